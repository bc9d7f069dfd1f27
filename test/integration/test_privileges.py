"""Credentials never fall back to stronger ones (issue 13, hole 5), and
unwatch checks its caller (hole 3), run as unprivileged roles against the
real control plane.

A server whose own options carry credentials (here a kubeconfig with the
cluster's admin token) lends them to superusers only: a role with USAGE on
the server but no user mapping is refused (postgres_fdw's "user mapping not
found") by watch() and by live scans, where it used to get the server's
credentials.  A watch belongs to its registering role: DROP ROLE refuses while the role
has watches, DROP OWNED removes them; a watch whose role is gone anyway fails
clearly instead of going on with the PUBLIC mapping's or the server's
credentials.
"""
import base64
import time

import psycopg2
import pytest
from psycopg2 import sql as pgsql

import conftest
from conftest import kubectl, sql, sql_one, wait_status, wait_until, wait_watching, watch, watch_status


def as_role(role):
    """A new autocommit connection that has SET ROLE `role`."""
    conn = conftest.PG.connect(autocommit=True)
    conn.cursor().execute(pgsql.SQL("SET ROLE {}").format(pgsql.Identifier(role)))
    return conn


def run_as(role, query, params=None):
    conn = as_role(role)
    try:
        with conn.cursor() as cur:
            cur.execute(query, params)
            return cur.fetchall() if cur.description else None
    finally:
        conn.close()


def error_as(role, query, params=None):
    with pytest.raises(psycopg2.Error) as e:
        run_as(role, query, params)
    return e.value


@pytest.fixture
def role(ctx):
    name = ("kwr_" + ctx.base)[:63].replace("-", "_")
    sql(pgsql.SQL("CREATE ROLE {}").format(pgsql.Identifier(name)))
    yield name
    if sql_one("SELECT count(*) FROM pg_roles WHERE rolname = %s", (name,)):
        sql(pgsql.SQL("DROP OWNED BY {} CASCADE").format(pgsql.Identifier(name)))
        sql(pgsql.SQL("DROP ROLE {}").format(pgsql.Identifier(name)))


def grant(role, srv):
    r, s = pgsql.Identifier(role), pgsql.Identifier(srv)
    sql(pgsql.SQL("GRANT USAGE ON FOREIGN SERVER {} TO {}").format(s, r))
    sql(pgsql.SQL("GRANT EXECUTE ON FUNCTION kwatch.watch, kwatch.unwatch TO {}").format(r))


def tenant_on(role, srv):
    """`role` as a tenant of server `srv` (README "Roles"): grant(), and a
    user mapping of its own with the cluster's token."""
    grant(role, srv)
    sql(pgsql.SQL("CREATE USER MAPPING FOR {} SERVER {} OPTIONS (token {})").format(
        pgsql.Identifier(role), pgsql.Identifier(srv), pgsql.Literal(conftest.CLUSTER.token)))


def stalling_function(role, schema):
    """As `role`, table <schema>.flag (on) and trigger function
    <schema>.stall(), which sleeps while the flag is on and catches the
    cancel a deadline raises (a table owner's code kwatch must bound)."""
    run_as(role, pgsql.SQL("""
        CREATE TABLE {s}.flag (on_ boolean);
        INSERT INTO {s}.flag VALUES (true);
        CREATE FUNCTION {s}.stall() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN
          WHILE (SELECT on_ FROM {s}.flag) LOOP
            BEGIN PERFORM pg_catalog.pg_sleep(0.2);
            EXCEPTION WHEN query_canceled THEN NULL; END;
          END LOOP;
          RETURN OLD; END$$;
    """).format(s=schema))


def test_a_role_without_user_mapping_gets_no_server_credentials(ctx, role):
    ns = ctx.namespace()
    srv = ctx.server()          # its kubeconfig carries the admin's credentials
    grant(role, srv)
    e = error_as(role, "SELECT kwatch.watch('replicationcontrollers', server => %s, namespace => %s)",
                 (srv, ns))
    assert e.pgcode == "42704", e.pgerror
    assert "user mapping not found" in e.diag.message_primary, e.pgerror
    assert sql_one("SELECT count(*) FROM kwatch.registrations WHERE server = %s", (srv,)) == 0

    # a live table: the same refusal
    schema = ("kwr_live_" + conftest.RUN_ID)
    sql(pgsql.SQL("CREATE SCHEMA {}").format(pgsql.Identifier(schema)))
    try:
        sql(pgsql.SQL("CREATE FOREIGN TABLE {}.cms (namespace text, name text) SERVER {}"
                      " OPTIONS (resource 'configmaps', api_version 'v1', namespaced 'true',"
                      " use_remote_estimate 'false')")
            .format(pgsql.Identifier(schema), pgsql.Identifier(srv)))
        sql(pgsql.SQL("GRANT USAGE ON SCHEMA {0} TO {1}; GRANT SELECT ON {0}.cms TO {1}")
            .format(pgsql.Identifier(schema), pgsql.Identifier(role)))
        e = error_as(role, "SELECT name FROM %s.cms WHERE namespace = %%s" % schema, (ns,))
        assert e.pgcode == "42704" and "user mapping not found" in e.diag.message_primary, e.pgerror

        # a PUBLIC mapping is the admin sharing the server's credentials on purpose
        sql(pgsql.SQL("CREATE USER MAPPING FOR PUBLIC SERVER {}").format(pgsql.Identifier(srv)))
        # (the controller-manager creates the namespace's kube-root-ca.crt shortly after it)
        wait_until(lambda: "kube-root-ca.crt" in kubectl("get", "configmaps", "-n", ns, "-o", "name"),
                   30, "kube-root-ca.crt")
        rows = run_as(role, "SELECT name FROM %s.cms WHERE namespace = %%s" % schema, (ns,))
        assert ("kube-root-ca.crt",) in rows
        # (a resource no other test mirrors: the new table is the role's)
        assert run_as(role, "SELECT kwatch.watch('replicationcontrollers', server => %s,"
                      " namespace => %s)::text", (srv, ns)) == [("k8s.replicationcontrollers",)]
        wait_watching(srv, "replicationcontrollers")
    finally:
        sql(pgsql.SQL("DROP SCHEMA {} CASCADE").format(pgsql.Identifier(schema)))
        sql("SELECT kwatch.unwatch('replicationcontrollers', server => %s)", (srv,))
        sql("DROP TABLE IF EXISTS k8s.replicationcontrollers CASCADE")


def test_a_dropped_role_is_not_replaced_by_other_credentials(ctx, role):
    ns = ctx.namespace()
    srv = ctx.server(auth="token")          # the superuser's mapping holds the token
    grant(role, srv)
    sql(pgsql.SQL("CREATE USER MAPPING FOR {} SERVER {} OPTIONS (token {})").format(
        pgsql.Identifier(role), pgsql.Identifier(srv), pgsql.Literal(conftest.CLUSTER.token)))
    # a PUBLIC mapping with the same token: what a dropped role used to fall back to
    sql(pgsql.SQL("CREATE USER MAPPING FOR PUBLIC SERVER {} OPTIONS (token {})").format(
        pgsql.Identifier(srv), pgsql.Literal(conftest.CLUSTER.token)))
    run_as(role, "SELECT kwatch.watch('limitranges', server => %s, namespace => %s)", (srv, ns))
    wait_watching(srv, "limitranges")

    # unwatch by another role: refused (hole 3)
    other = role + "_x"
    sql(pgsql.SQL("CREATE ROLE {}").format(pgsql.Identifier(other)))
    try:
        grant(other, srv)
        e = error_as(other, "SELECT kwatch.unwatch('limitranges', server => %s, drop_table => true)", (srv,))
        assert e.pgcode == "42501", e.pgerror
        assert watch_status(srv, "limitranges") is not None
    finally:
        sql(pgsql.SQL("DROP OWNED BY {} CASCADE").format(pgsql.Identifier(other)))
        sql(pgsql.SQL("DROP ROLE {}").format(pgsql.Identifier(other)))

    # the watch is the role's object (src/functions/ownership.c): DROP ROLE refuses,
    # from kwatch's database and from any other
    e = error_as_super(pgsql.SQL("DROP ROLE {}").format(pgsql.Identifier(role)))
    assert e.pgcode == "2BP01", e.pgerror
    assert 'owner of watch of limitranges on server "%s"' % srv in e.diag.message_detail, e.pgerror
    other_db = psycopg2.connect(**conftest.PG.dsn(dbname="postgres"))
    other_db.autocommit = True
    try:
        with pytest.raises(psycopg2.Error) as e:
            other_db.cursor().execute(pgsql.SQL("DROP ROLE {}").format(pgsql.Identifier(role)))
        assert e.value.pgcode == "2BP01", e.value.pgerror
        assert "owner of watch %d in database" % watch_id(srv, "limitranges") in e.value.diag.message_detail
    finally:
        other_db.close()
    assert watch_status(srv, "limitranges") is not None

    # DROP OWNED removes it with its rows, as unwatch would; then the role goes
    sql(pgsql.SQL("DROP OWNED BY {} CASCADE").format(pgsql.Identifier(role)))
    assert sql_one("SELECT count(*) FROM kwatch.registrations WHERE server = %s", (srv,)) == 0
    sql(pgsql.SQL("DROP ROLE {}").format(pgsql.Identifier(role)))

    # a registration whose role is gone anyway (dropped where kwatch was not
    # loaded): the worker refuses it rather than use the PUBLIC mapping
    sql("SELECT kwatch.watch('limitranges', server => %s, namespace => %s)", (srv, ns))
    gone = role + "_gone"
    sql(pgsql.SQL("CREATE ROLE {}").format(pgsql.Identifier(gone)))
    gone_oid = sql_one("SELECT oid FROM pg_roles WHERE rolname = %s", (gone,))
    sql(pgsql.SQL("DROP ROLE {}").format(pgsql.Identifier(gone)))
    sql("UPDATE kwatch.registrations SET owner = %s WHERE server = %s", (gone_oid, srv))
    worker = sql_one("SELECT kwatch.worker_pid()")
    sql("SELECT pg_terminate_backend(%s)", (worker,))
    wait_until(lambda: sql_one("SELECT kwatch.worker_pid()") not in (None, worker), 30, "a new worker")
    st = wait_until(lambda: (lambda s: s if s and s["last_error"] and "does not exist" in s["last_error"]
                             else None)(watch_status(srv, "limitranges")), 30, "the watch to fail")
    assert not st["healthy"], st
    assert st["list_calls"] == 0 and st["watch_calls"] == 0, "no request with borrowed credentials"
    sql("SELECT kwatch.unwatch('limitranges', server => %s, drop_table => true)", (srv,))


def error_as_super(query, params=None):
    with pytest.raises(psycopg2.Error) as e:
        sql(query, params)
    return e.value


def watch_id(srv, resource):
    return sql_one("SELECT id FROM kwatch.registrations WHERE server = %s AND resource = %s",
                   (srv, resource))


def test_the_worker_writes_as_the_table_owner(ctx, role):
    """A watch registered by a role creates a mirror table that role owns,
    and the worker writes it as that owner under SECURITY_RESTRICTED_OPERATION
    (issue 13, hole 2): the owner's trigger runs with the owner's rights,
    not the worker's superuser's, on inserts, updates, relist merges and
    unwatch's deletes alike."""
    ns = ctx.namespace()
    srv = ctx.server(auth="token")
    grant(role, srv)
    r = pgsql.Identifier(role)
    sql(pgsql.SQL("CREATE USER MAPPING FOR {} SERVER {} OPTIONS (token {})").format(
        r, pgsql.Identifier(srv), pgsql.Literal(conftest.CLUSTER.token)))
    schema = pgsql.Identifier(role + "_s")
    sql(pgsql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(schema, r))
    try:
        table = run_as(role, "SELECT kwatch.watch('resourcequotas', server => %s, namespace => %s)::text",
                       (srv, ns))[0][0]
        assert sql_one("SELECT relowner::regrole::text FROM pg_class WHERE oid = %s::regclass",
                       (table,)) == role
        # the owner's audit trigger: who runs it, with which rights
        run_as(role, pgsql.SQL("""
            CREATE TABLE {s}.audit (op text, who text, su boolean, path text);
            CREATE FUNCTION {s}.audit_fn() RETURNS trigger LANGUAGE plpgsql AS $$
              BEGIN
                INSERT INTO {s}.audit VALUES (TG_OP, current_user,
                  (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user),
                  current_setting('search_path'));
                RETURN NULL;
              END $$;
            CREATE TRIGGER audit AFTER INSERT OR UPDATE OR DELETE ON {t}
              FOR EACH ROW EXECUTE FUNCTION {s}.audit_fn();""").format(
            s=schema, t=pgsql.SQL(table)))
        wait_watching(srv, "resourcequotas")
        # another role's watch of the same resource (on another server) would be
        # written into this role's table as its owner: refused without rights on it
        other, srv2 = role + "_x", ctx.server("-2", auth="token")
        sql(pgsql.SQL("CREATE ROLE {}").format(pgsql.Identifier(other)))
        try:
            grant(other, srv2)
            sql(pgsql.SQL("CREATE USER MAPPING FOR {} SERVER {} OPTIONS (token {})").format(
                pgsql.Identifier(other), pgsql.Identifier(srv2), pgsql.Literal(conftest.CLUSTER.token)))
            e = error_as(other, "SELECT kwatch.watch('resourcequotas', server => %s, namespace => %s)",
                         (srv2, ns))
            assert e.pgcode == "42501" and "permission denied for table" in e.diag.message_primary, e.pgerror
        finally:
            sql(pgsql.SQL("DROP OWNED BY {} CASCADE").format(pgsql.Identifier(other)))
            sql(pgsql.SQL("DROP ROLE {}").format(pgsql.Identifier(other)))
        conftest.kubectl("create", "quota", "q1", "-n", ns, "--hard=pods=5")
        wait_until(lambda: sql_one(pgsql.SQL("SELECT count(*) FROM {}.audit").format(schema)) >= 1,
                   30, "the trigger on the watch's insert")
        # a relist (worker restarted without a checkpoint) merges as the owner too
        conftest.kubectl("create", "quota", "q2", "-n", ns, "--hard=pods=6")
        worker = sql_one("SELECT kwatch.worker_pid()")
        sql("SELECT pg_terminate_backend(%s)", (worker,))
        wait_until(lambda: sql_one("SELECT kwatch.worker_pid()") != worker, 20, "the worker to exit")
        sql("UPDATE kwatch.registrations SET resource_version = NULL WHERE server = %s", (srv,))
        wait_until(lambda: sql_one("SELECT kwatch.worker_pid()") not in (None, worker), 30, "a new worker")
        wait_watching(srv, "resourcequotas", timeout=60)
        conftest.assert_table_matches_server(table, srv, ["resourcequotas", "-n", ns])
        # unwatch deletes the rows as the owner as well
        run_as(role, "SELECT kwatch.unwatch('resourcequotas', server => %s)", (srv,))
        rows = sql(pgsql.SQL("SELECT op, who, su, path FROM {}.audit").format(schema))
        assert {op for op, _, _, _ in rows} >= {"INSERT", "DELETE"}, rows
        assert all(who == role and su is False for _, who, su, _ in rows), rows
        assert all(path == "pg_catalog, pg_temp" for _, _, _, path in rows), rows
    finally:
        sql(pgsql.SQL("DROP SCHEMA {} CASCADE").format(schema))
        sql("DROP TABLE IF EXISTS k8s.resourcequotas CASCADE")


def test_row_level_security_gives_each_tenant_its_namespace(ctx, role):
    """The README's recipe: the mirror table's owner enables row-level
    security and gives each tenant role the rows of its namespace; the
    worker, writing as the owner, keeps filling the table for everyone."""
    ns_a, ns_b = ctx.namespace("-a"), ctx.namespace("-b")
    srv = ctx.server(auth="token")
    grant(role, srv)
    r = pgsql.Identifier(role)
    sql(pgsql.SQL("CREATE USER MAPPING FOR {} SERVER {} OPTIONS (token {})").format(
        r, pgsql.Identifier(srv), pgsql.Literal(conftest.CLUSTER.token)))
    tenant = role + "_tenant_a"
    t = pgsql.Identifier(tenant)
    sql(pgsql.SQL("CREATE ROLE {}").format(t))
    try:
        table = run_as(role, "SELECT kwatch.watch('podtemplates', server => %s)::text", (srv,))[0][0]
        # podtemplates: a resource no other test watches, so the table is the role's own
        run_as(role, pgsql.SQL("""
            ALTER TABLE {tbl} ENABLE ROW LEVEL SECURITY;
            CREATE POLICY tenant_a ON {tbl} FOR SELECT TO {t} USING (namespace = {ns});
            GRANT SELECT ON {tbl} TO {t};""").format(
            tbl=pgsql.SQL(table), t=t, ns=pgsql.Literal(ns_a)))
        sql(pgsql.SQL("GRANT USAGE ON SCHEMA k8s TO {}").format(t))
        wait_watching(srv, "podtemplates")
        for ns in (ns_a, ns_b):
            conftest.kubectl("apply", "-n", ns, "-f", "-", input=
                             '{"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "pt"},'
                             ' "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}')
        wait_until(lambda: sql_one("SELECT count(*) FROM %s WHERE cluster = %%s AND name = 'pt'" % table,
                                   (srv,)) == 2, 30, "both podtemplates mirrored")
        seen = run_as(tenant, "SELECT namespace, name FROM %s WHERE name = 'pt'" % table)
        assert seen == [(ns_a, "pt")], seen
        # the owner and superusers see everything; the tenant nothing more
        assert len(run_as(role, "SELECT 1 FROM %s WHERE name = 'pt'" % table)) == 2
    finally:
        sql("DROP TABLE IF EXISTS k8s.podtemplates CASCADE")
        sql(pgsql.SQL("DROP OWNED BY {} CASCADE").format(t))
        sql(pgsql.SQL("DROP ROLE {}").format(t))


def test_a_table_owners_code_never_acts_with_more_rights(ctx, role):
    """Code a mirror table's owner attaches to it, or runs through a
    function someone else calls, gets that owner's rights and no more
    (review of issue 13): kwatch.watch() called from a CHECK constraint the
    worker evaluates is refused (security-restricted operation), rather than
    registering a watch with the worker's superuser credentials; called from
    the owner's SECURITY DEFINER function by a superuser, it checks the
    owner, not the session's role; an implicit cast from a column type of
    the owner's own never runs as a superuser, neither in watch()'s
    restore of generated columns nor in the worker, which refuses the table."""
    ns = ctx.namespace()
    dev = ctx.server(auth="token")
    prod = ctx.server("-p", auth="token")       # the superuser's credentials only
    grant(role, dev)
    r, s = pgsql.Identifier(role), pgsql.Identifier(role + "_s")
    sql(pgsql.SQL("CREATE USER MAPPING FOR {} SERVER {} OPTIONS (token {})").format(
        r, pgsql.Identifier(dev), pgsql.Literal(conftest.CLUSTER.token)))
    sql(pgsql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(s, r))
    tname = ("kwr_cm_" + conftest.RUN_ID).lower()
    table = "k8s." + tname
    is_super = pgsql.SQL("SELECT rolsuper FROM pg_roles WHERE rolname = {}").format(pgsql.Literal(role))
    try:
        run_as(role, "SELECT kwatch.watch('configmaps', server => %s, namespace => %s, table_name => %s)",
               (dev, ns, tname))
        wait_watching(dev, "configmaps")
        # (1) a CHECK constraint the worker evaluates as the table's owner
        run_as(role, pgsql.SQL("ALTER TABLE {} ADD CONSTRAINT grab CHECK (kwatch.watch('secrets',"
                               " server => {}, secret_data => true) IS NOT NULL) NOT VALID").format(
            pgsql.SQL(table), pgsql.Literal(prod)))
        kubectl("create", "configmap", "trigger-it", "-n", ns, "--from-literal=a=b")
        st = wait_until(lambda: (lambda st: st if st and st["last_error"] and
                                 "security-restricted operation" in st["last_error"] else None)(
            watch_status(dev, "configmaps")), 30, "the worker's apply to be refused")
        assert sql_one("SELECT count(*) FROM kwatch.registrations WHERE server = %s", (prod,)) == 0, st
        run_as(role, pgsql.SQL("ALTER TABLE {} DROP CONSTRAINT grab").format(pgsql.SQL(table)))
        conftest.assert_table_matches_server(table, dev, ["configmaps", "-n", ns], timeout=60)

        # (2) the owner's SECURITY DEFINER function, called by a superuser
        run_as(role, pgsql.SQL("CREATE FUNCTION {}.f() RETURNS text SECURITY DEFINER LANGUAGE sql"
                               " AS $$ SELECT kwatch.watch('secrets', server => {})::text $$").format(
            s, pgsql.Literal(prod)))
        with pytest.raises(psycopg2.Error) as e:
            sql(pgsql.SQL("SELECT {}.f()").format(s))
        assert e.value.pgcode == "42501" and "foreign server" in e.value.diag.message_primary, e.value.pgerror
        assert sql_one("SELECT count(*) FROM kwatch.registrations WHERE server = %s", (prod,)) == 0

        # (3) an implicit cast from the owner's own type, and generated
        # columns for watch() to restore
        run_as(role, "SELECT kwatch.unwatch('configmaps', server => %s)", (dev,))
        gen = [a for (a,) in sql("SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass"
                                 " AND attgenerated <> '' AND NOT attisdropped", (table,))]
        # the view kubectl.<t> refuses a change of the type of a column it
        # shows (issue 35); an owner whose view an admin dropped can try
        sql("SELECT kwatch._drop_printed_view(%s::regclass)", (table,))
        run_as(role, pgsql.SQL("""
            ALTER TABLE {t} {drops};
            CREATE TYPE {s}.t AS (x jsonb);
            CREATE FUNCTION {s}.g() RETURNS void LANGUAGE plpgsql AS $$BEGIN
              IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
                EXECUTE 'ALTER ROLE ' || quote_ident({role}) || ' SUPERUSER';
              END IF; END$$;
            CREATE FUNCTION {s}.f(x {s}.t) RETURNS jsonb LANGUAGE plpgsql IMMUTABLE
              AS $$BEGIN PERFORM {s}.g(); RETURN x.x; END$$;
            CREATE CAST ({s}.t AS jsonb) WITH FUNCTION {s}.f({s}.t) AS IMPLICIT;
            ALTER TABLE {t} ALTER COLUMN object TYPE {s}.t USING row(object)::{s}.t;
            INSERT INTO {t} (cluster, uid, resource_version, object) VALUES ('x', 'u', '1', row('{{}}')::{s}.t);
        """).format(t=pgsql.SQL(table), s=s, role=pgsql.Literal(role),
                    drops=pgsql.SQL(", ").join(pgsql.SQL("DROP COLUMN {}").format(pgsql.Identifier(a))
                                              for a in gen)))
        try:
            run_as(role, "SELECT kwatch.watch('configmaps', server => %s, namespace => %s,"
                   " table_name => %s)", (dev, ns, tname))
        except psycopg2.Error:
            pass        # the restore may fail as the owner; it never runs as more
        assert sql_one(is_super) is False
        if sql_one("SELECT count(*) FROM kwatch.registrations WHERE server = %s", (dev,)):
            st = wait_until(lambda: (lambda st: st if st and st["last_error"] and
                                     "of type jsonb" in st["last_error"] else None)(
                watch_status(dev, "configmaps")), 30, "the worker to refuse the altered table")
        assert sql_one(is_super) is False
    finally:
        sql(pgsql.SQL("ALTER ROLE {} NOSUPERUSER").format(r))
        sql("SELECT kwatch.unwatch('configmaps', server => %s)", (dev,)) \
            if sql_one("SELECT count(*) FROM kwatch.registrations WHERE server = %s", (dev,)) else None
        sql(pgsql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(pgsql.SQL(table)))
        sql(pgsql.SQL("DROP SCHEMA {} CASCADE").format(s))


def test_a_table_owners_deferred_triggers_fire_as_the_owner(ctx, role):
    """A deferred constraint trigger the owner puts on its mirror table
    fires as the owner, in the apply worker, not at commit as the worker's
    superuser; the owner's code cannot defer constraints again while kwatch
    writes its table (the batch is refused and retried, other rows still
    arrive once the trigger is gone)."""
    ns = ctx.namespace()
    dev = ctx.server(auth="token")
    grant(role, dev)
    r, s = pgsql.Identifier(role), pgsql.Identifier(role + "_d")
    sql(pgsql.SQL("CREATE USER MAPPING FOR {} SERVER {} OPTIONS (token {})").format(
        r, pgsql.Identifier(dev), pgsql.Literal(conftest.CLUSTER.token)))
    sql(pgsql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(s, r))
    tname = ("kwr_dt_" + conftest.RUN_ID).lower()
    table = "k8s." + tname
    try:
        run_as(role, "SELECT kwatch.watch('configmaps', server => %s, namespace => %s, table_name => %s)",
               (dev, ns, tname))
        wait_watching(dev, "configmaps")
        run_as(role, pgsql.SQL("""
            CREATE TABLE {s}.seen (who text, superuser boolean);
            CREATE FUNCTION {s}.note() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN
              INSERT INTO {s}.seen SELECT current_user, rolsuper FROM pg_catalog.pg_roles
                WHERE rolname = current_user;
              RETURN NULL; END$$;
            CREATE CONSTRAINT TRIGGER note AFTER INSERT OR UPDATE ON {t}
              DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {s}.note();
        """).format(s=s, t=pgsql.SQL(table)))
        kubectl("create", "configmap", "deferred-1", "-n", ns, "--from-literal=a=b")
        seen = wait_until(lambda: sql(pgsql.SQL("SELECT who, superuser FROM {}.seen").format(s)), 30,
                          "the deferred trigger to fire")
        assert all(who == role and not sup for who, sup in seen), seen

        # the owner's code may not defer constraints again
        run_as(role, pgsql.SQL("""
            CREATE OR REPLACE FUNCTION {s}.note() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN
              SET CONSTRAINTS ALL DEFERRED; RETURN NULL; END$$;
            DROP TRIGGER note ON {t};
            CREATE TRIGGER redefer AFTER INSERT OR UPDATE ON {t} FOR EACH ROW EXECUTE FUNCTION {s}.note();
        """).format(s=s, t=pgsql.SQL(table)))
        kubectl("create", "configmap", "deferred-2", "-n", ns, "--from-literal=a=b")
        wait_until(lambda: "cannot defer constraints" in (watch_status(dev, "configmaps")["last_error"] or ""),
                   30, "the re-deferral to be refused")
        run_as(role, pgsql.SQL("DROP TRIGGER redefer ON {}").format(pgsql.SQL(table)))
        conftest.assert_table_matches_server(table, dev, ["configmaps", "-n", ns], timeout=60)
    finally:
        if sql_one("SELECT count(*) FROM kwatch.registrations WHERE server = %s", (dev,)):
            sql("SELECT kwatch.unwatch('configmaps', server => %s)", (dev,))
        sql(pgsql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(pgsql.SQL(table)))
        sql(pgsql.SQL("DROP SCHEMA {} CASCADE").format(s))


def test_watch_status_shows_a_role_only_what_kwatch_watches_does(ctx, role):
    srv = ctx.server()
    ns = ctx.namespace()
    watch("configmaps", srv, namespace=ns)
    wait_watching(srv, "configmaps")
    assert sql_one("SELECT count(*) FROM kwatch.watch_status()") >= 1
    assert run_as(role, "SELECT count(*) FROM kwatch.watch_status()") == [(0,)]
    assert run_as(role, "SELECT count(*) FROM kwatch.watches") == [(0,)]
    # USAGE on the server shows its watches, in both
    sql(pgsql.SQL("GRANT USAGE ON FOREIGN SERVER {} TO {}").format(
        pgsql.Identifier(srv), pgsql.Identifier(role)))
    # (the state comes from watch_status(): 'pending' when it hides the row)
    assert run_as(role, "SELECT state FROM kwatch.watches WHERE server = %s", (srv,)) == [("watching",)]
    assert run_as(role, "SELECT count(*) FROM kwatch.watch_status()")[0][0] >= 1


def test_no_function_a_role_creates_runs_in_the_worker(ctx, role):
    """The worker and the relist merges run as the bootstrap superuser with
    search_path pinned to pg_catalog: a role allowed to create in public
    cannot have its to_jsonb(kwatch.registrations) (an exact type match,
    which PostgreSQL would prefer to pg_catalog's) run by the worker's
    registration reload (second review of issue 13)."""
    r = pgsql.Identifier(role)
    sql(pgsql.SQL("GRANT CREATE ON SCHEMA public TO {}").format(r))
    try:
        run_as(role, pgsql.SQL("""
            CREATE FUNCTION public.to_jsonb(x kwatch.registrations) RETURNS jsonb LANGUAGE plpgsql AS $$
            BEGIN
              IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
                EXECUTE 'ALTER ROLE ' || quote_ident({role}) || ' SUPERUSER';
              END IF;
              RETURN '{{}}';
            END $$""").format(role=pgsql.Literal(role)))
        srv = ctx.server()
        ns = ctx.namespace()
        watch("configmaps", srv, namespace=ns)         # the worker reloads registrations
        wait_watching(srv, "configmaps")
        worker = sql_one("SELECT kwatch.worker_pid()")   # and again from scratch
        sql("SELECT pg_terminate_backend(%s)", (worker,))
        wait_until(lambda: sql_one("SELECT kwatch.worker_pid()") not in (None, worker), 30, "a new worker")
        wait_watching(srv, "configmaps")
        assert sql_one("SELECT rolsuper FROM pg_roles WHERE rolname = %s", (role,)) is False
    finally:
        sql(pgsql.SQL("ALTER ROLE {} NOSUPERUSER").format(r))
        sql("DROP FUNCTION IF EXISTS public.to_jsonb(kwatch.registrations)")
        sql(pgsql.SQL("REVOKE CREATE ON SCHEMA public FROM {}").format(r))


def run_as_notices(role, query, params=None):
    """run_as, returning (rows, the NOTICE messages the statement raised)."""
    conn = as_role(role)
    try:
        with conn.cursor() as cur:
            cur.execute(query, params)
            return (cur.fetchall() if cur.description else None), list(conn.notices)
    finally:
        conn.close()


def tenant(name, srv):
    """A role with EXECUTE on watch/unwatch, USAGE on server `srv` and a user
    mapping there (the cluster's token), as README "Roles" describes."""
    sql(pgsql.SQL("CREATE ROLE {}").format(pgsql.Identifier(name)))
    grant(name, srv)
    sql(pgsql.SQL("CREATE USER MAPPING FOR {} SERVER {} OPTIONS (token {})").format(
        pgsql.Identifier(name), pgsql.Identifier(srv), pgsql.Literal(conftest.CLUSTER.token)))


def drop_role(name):
    if sql_one("SELECT count(*) FROM pg_roles WHERE rolname = %s", (name,)):
        sql(pgsql.SQL("DROP OWNED BY {} CASCADE").format(pgsql.Identifier(name)))
        sql(pgsql.SQL("DROP ROLE {}").format(pgsql.Identifier(name)))


def test_a_prepared_table_never_receives_another_roles_watch(ctx, role):
    """Issue 22, hole 1, replayed: a tenant has kwatch make k8s.secrets as
    the mirror of serviceaccounts, writes kwatch's comment of a Secrets
    mirror on it, grants INSERT, UPDATE, DELETE to PUBLIC and unwatches.
    0.4.0 then gave the next Secrets watch (another tenant's, and a
    superuser's with secret_data) that table, whose owner read every value.
    Now kwatch knows its tables by OID: the name is not the Secrets mirror,
    so each watch gets a table of its own and the squatter's stays empty."""
    srv_a = ctx.server("-a", auth="token")
    srv_b = ctx.server("-b", auth="token")
    srv_su = ctx.server("-su", auth="token")      # the superuser's
    ns_a, ns_b = ctx.namespace("-a"), ctx.namespace("-b")
    alice, bob = role, role + "_b"
    grant(alice, srv_a)
    sql(pgsql.SQL("CREATE USER MAPPING FOR {} SERVER {} OPTIONS (token {})").format(
        pgsql.Identifier(alice), pgsql.Identifier(srv_a), pgsql.Literal(conftest.CLUSTER.token)))
    # the name must be free for the squat (a Secrets mirror left by an
    # earlier test of the session has no watch any more)
    assert sql_one("SELECT count(*) FROM kwatch.registrations WHERE table_name = 'secrets'") == 0
    sql("DROP TABLE IF EXISTS k8s.secrets CASCADE")
    ctx.tables.append("secrets_core")
    try:
        tenant(bob, srv_b)
        # the squat, as alice
        assert run_as(alice, "SELECT kwatch.watch('serviceaccounts', server => %s, namespace => %s,"
                      " table_name => 'secrets')::text", (srv_a, ns_a)) == [("k8s.secrets",)]
        run_as(alice, "COMMENT ON TABLE k8s.secrets IS 'kwatch mirror of secrets (v1)';"
               " GRANT INSERT, UPDATE, DELETE ON k8s.secrets TO PUBLIC;"
               " SELECT kwatch.unwatch('serviceaccounts', server => %s)", (srv_a,))
        kubectl("create", "secret", "generic", "bobs", "-n", ns_b, "--from-literal=password=S3cr3t-Bob-Value")

        # bob's Secrets watch: a table of its own, never alice's
        (table_b,), = run_as(bob, "SELECT kwatch.watch('secrets', server => %s, namespace => %s)::text",
                             (srv_b, ns_b))
        assert table_b == "k8s.secrets_core"
        assert sql_one("SELECT relowner::regrole::text FROM pg_class WHERE oid = 'k8s.secrets_core'::regclass") == bob
        wait_watching(srv_b, "secrets")
        assert sql_one("SELECT count(*) FROM k8s.secrets_core WHERE cluster = %s", (srv_b,)) >= 1
        run_as(bob, "SELECT kwatch.unwatch('secrets', server => %s, drop_table => true)", (srv_b,))

        # the superuser's, with the values in clear: the same
        table_su = sql_one("SELECT kwatch.watch('secrets', server => %s, namespace => %s,"
                           " secret_data => true)::text", (srv_su, ns_b))
        assert table_su == "k8s.secrets_core"
        assert sql_one("SELECT relowner::regrole::text FROM pg_class WHERE oid = 'k8s.secrets_core'::regclass") \
            == sql_one("SELECT current_user")
        wait_watching(srv_su, "secrets")
        value = base64.b64encode(b"S3cr3t-Bob-Value").decode()
        assert sql_one("SELECT count(*) FROM k8s.secrets_core WHERE object->'data'->>'password' = %s",
                       (value,)) == 1
        # alice's table got nothing, and alice can read nothing of the Secret
        assert sql_one("SELECT count(*) FROM k8s.secrets") == 0
        e = error_as(alice, "SELECT object FROM k8s.secrets_core")
        assert e.pgcode == "42501", e.pgerror
        # the squatted name itself, asked for by name: refused, not joined
        e = error_as_super("SELECT kwatch.watch('secrets', server => %s, namespace => %s,"
                           " table_name => 'secrets')", (srv_a, ns_b))
        assert e.pgcode in ("42P07", "42710"), e.pgerror
        sql("SELECT kwatch.unwatch('secrets', server => %s)", (srv_su,))
    finally:
        drop_role(bob)


def test_a_watch_joins_only_a_table_its_role_owns_and_says_so(ctx, role):
    """Issue 22, hole 1: an existing mirror table takes another watch only
    when kwatch made it for that resource and the caller owns it (or has
    its owner's privileges), with a NOTICE naming the table and its owner;
    rights granted on it (even to PUBLIC) are not enough, a superuser's
    watch never writes a non-superuser's table, and another role's watch
    does not make it anew once its owner dropped it.  watch() with another role's registration on the same server says
    whose it is, the same way whatever settings it passed."""
    ns = ctx.namespace()
    srv, srv2 = ctx.server(auth="token"), ctx.server("-2", auth="token")
    srv_o, srv_su = ctx.server("-o", auth="token"), ctx.server("-su", auth="token")
    other = role + "_o"
    tname = ("kwr_t_" + conftest.RUN_ID).lower()
    try:
        for s in (srv, srv2):
            grant(role, s)
            sql(pgsql.SQL("CREATE USER MAPPING FOR {} SERVER {} OPTIONS (token {})").format(
                pgsql.Identifier(role), pgsql.Identifier(s), pgsql.Literal(conftest.CLUSTER.token)))
        tenant(other, srv_o)
        table = run_as(role, "SELECT kwatch.watch('configmaps', server => %s, namespace => %s,"
                       " table_name => %s)::text", (srv, ns, tname))[0][0]
        assert sql_one("SELECT made_by::text FROM kwatch.tables WHERE relid = %s::regclass", (table,)) == role
        # the same role on a second server joins its table, and is told so
        rows, notices = run_as_notices(role, "SELECT kwatch.watch('configmaps', server => %s,"
                                       " namespace => %s, table_name => %s)::text", (srv2, ns, tname))
        assert rows == [(table,)]
        assert any("joins table %s, owned by role %s" % (table, role) in n for n in notices), notices
        # another role: not with INSERT, UPDATE, DELETE granted, not even to PUBLIC
        sql(pgsql.SQL("GRANT INSERT, UPDATE, DELETE ON {} TO PUBLIC").format(pgsql.SQL(table)))
        e = error_as(other, "SELECT kwatch.watch('configmaps', server => %s, namespace => %s,"
                     " table_name => %s)", (srv_o, ns, tname))
        assert e.pgcode == "42501" and "permission denied for table" in e.diag.message_primary, e.pgerror
        # a superuser: not into a tenant's table
        e = error_as_super("SELECT kwatch.watch('configmaps', server => %s, namespace => %s,"
                           " table_name => %s)", (srv_su, ns, tname))
        assert e.pgcode == "42501" and "superuser" in e.diag.message_primary, e.pgerror
        assert sql_one("SELECT count(*) FROM kwatch.registrations WHERE table_name = %s", (tname,)) == 2
        # the other role on the first role's server: told whose the watch is,
        # the same with the same settings or other ones (no probing)
        grant(other, srv)
        sql(pgsql.SQL("CREATE USER MAPPING FOR {} SERVER {} OPTIONS (token {})").format(
            pgsql.Identifier(other), pgsql.Identifier(srv), pgsql.Literal(conftest.CLUSTER.token)))
        msgs = set()
        for kw in ("namespace => %s, table_name => %s", "namespace => %s, label_selector => 'x=y',"
                   " table_name => %s"):
            e = error_as(other, "SELECT kwatch.watch('configmaps', server => %%s, %s)" % kw, (srv, ns, tname))
            assert e.pgcode == "42710", e.pgerror
            msgs.add((e.diag.message_primary, e.diag.message_detail))
        assert len(msgs) == 1, msgs
        (primary, detail), = msgs
        assert ("by role %s" % role) in primary and "nothing was registered" in detail, msgs
        assert sql_one("SELECT count(*) FROM kwatch.registrations WHERE owner = %s::regrole", (other,)) == 0
        # a table its owner dropped while its watches still name it is not
        # made anew for another role (it would receive their rows)
        run_as(role, pgsql.SQL("DROP TABLE {} CASCADE").format(pgsql.SQL(table)))
        e = error_as(other, "SELECT kwatch.watch('configmaps', server => %s, namespace => %s)", (srv_o, ns))
        assert e.pgcode == "42501" and "is gone" in e.diag.message_primary, e.pgerror
        assert sql_one("SELECT to_regclass(%s)", (table,)) is None
        run_as(role, "SELECT kwatch.unwatch('configmaps', server => %s)", (srv2,))
        run_as(role, "SELECT kwatch.unwatch('configmaps', server => %s, drop_table => true)", (srv,))
        assert sql_one("SELECT to_regclass(%s)", (table,)) is None
    finally:
        drop_role(other)
        sql(pgsql.SQL("DROP TABLE IF EXISTS k8s.{} CASCADE").format(pgsql.Identifier(tname)))


def test_revoked_usage_stops_a_running_watch(ctx, role):
    """REVOKE USAGE on the server from a watch's role stops its running
    watch within seconds (42501 in last_error): the revocation reaches the
    worker through connection.c's invalidation and the wake at commit, not
    at the watch's next reconnect.  GRANT brings it back."""
    ns = ctx.namespace()
    srv = ctx.server("-r", auth="token")
    grant(role, srv)
    sql(pgsql.SQL("CREATE USER MAPPING FOR {} SERVER {} OPTIONS (token {})")
        .format(pgsql.Identifier(role), pgsql.Identifier(srv), pgsql.Literal(conftest.CLUSTER.token)))
    run_as(role, "SELECT kwatch.watch('resourcequotas', server => %s, namespace => %s)", (srv, ns))
    wait_watching(srv, "resourcequotas")
    sql(pgsql.SQL("REVOKE USAGE ON FOREIGN SERVER {} FROM {}")
        .format(pgsql.Identifier(srv), pgsql.Identifier(role)))
    st = wait_status(srv, "resourcequotas", lambda s: s["state"] == "failed", timeout=15,
                     msg="the watch stopped after REVOKE USAGE")
    assert "USAGE" in st["last_error"], st
    sql(pgsql.SQL("GRANT USAGE ON FOREIGN SERVER {} TO {}")
        .format(pgsql.Identifier(srv), pgsql.Identifier(role)))
    wait_watching(srv, "resourcequotas", timeout=30)


def test_revoked_membership_stops_a_running_watch(ctx, role):
    """USAGE held through a group role: revoking the membership stops the
    watch within seconds too (pg_auth_members invalidates the settings,
    REVOKE of a role wakes the worker)."""
    ns = ctx.namespace()
    srv = ctx.server("-g", auth="token")
    group = role + "_g"
    g, r, s = pgsql.Identifier(group), pgsql.Identifier(role), pgsql.Identifier(srv)
    sql(pgsql.SQL("CREATE ROLE {}").format(g))
    try:
        sql(pgsql.SQL("GRANT USAGE ON FOREIGN SERVER {} TO {}").format(s, g))
        sql(pgsql.SQL("GRANT {} TO {}").format(g, r))
        sql(pgsql.SQL("GRANT EXECUTE ON FUNCTION kwatch.watch, kwatch.unwatch TO {}").format(r))
        sql(pgsql.SQL("CREATE USER MAPPING FOR {} SERVER {} OPTIONS (token {})")
            .format(r, s, pgsql.Literal(conftest.CLUSTER.token)))
        run_as(role, "SELECT kwatch.watch('podtemplates', server => %s, namespace => %s,"
               " table_name => %s)", (srv, ns, "pt_" + role[-20:]))
        wait_watching(srv, "podtemplates")
        sql(pgsql.SQL("REVOKE {} FROM {}").format(g, r))
        st = wait_status(srv, "podtemplates", lambda x: x["state"] == "failed", timeout=15,
                         msg="the watch stopped after the membership went")
        assert "USAGE" in st["last_error"], st
    finally:
        sql(pgsql.SQL("DROP OWNED BY {} CASCADE").format(g))
        sql(pgsql.SQL("DROP ROLE {}").format(g))


def test_wait_current_never_runs_a_table_owners_code_with_the_callers_rights(ctx, role):
    """Review of kwatch.wait_current() (src/functions/wait_current.c, table_matches):
    its comparison reads the mirror table with a query of kwatch's own, as
    the caller.  A table owner who gave `cluster` a type of their own with
    an implicit cast to text has that cast's function run by the caller --
    a superuser waiting for the owner's watch -- where the worker would
    refuse the table (42804) and run nothing of the owner's but as the
    owner (README "Roles")."""
    from faults_support import FakeAPI, fake_server, pod
    api = FakeAPI().start()
    r, s = pgsql.Identifier(role), pgsql.Identifier(role + "_s")
    tname = ("kwr_wc_" + conftest.RUN_ID).lower()
    table = "k8s." + tname
    is_super = pgsql.SQL("SELECT rolsuper FROM pg_roles WHERE rolname = {}").format(pgsql.Literal(role))
    try:
        srv = fake_server(ctx, api)
        api.create("pods", pod("p0"))
        grant(role, srv)
        sql(pgsql.SQL("CREATE USER MAPPING FOR {} SERVER {} OPTIONS (token 'fake')").format(r, pgsql.Identifier(srv)))
        sql(pgsql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(s, r))
        run_as(role, "SELECT kwatch.watch('pods', server => %s, table_name => %s)", (srv, tname))
        wait_status(srv, "pods", lambda st: st["state"] == "watching" and st["synced"], msg="synced")
        # see above: kubectl.<t> would refuse the ALTER ... TYPE (issue 35)
        sql("SELECT kwatch._drop_printed_view(%s::regclass)", (table,))
        run_as(role, pgsql.SQL("""
            CREATE TYPE {s}.t AS (x text);
            CREATE FUNCTION {s}.g() RETURNS void LANGUAGE plpgsql AS $$BEGIN
              IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
                EXECUTE 'ALTER ROLE ' || quote_ident({role}) || ' SUPERUSER';
              END IF; END$$;
            CREATE FUNCTION {s}.f(x {s}.t) RETURNS text LANGUAGE plpgsql IMMUTABLE
              AS $$BEGIN PERFORM {s}.g(); RETURN x.x; END$$;
            CREATE CAST ({s}.t AS text) WITH FUNCTION {s}.f({s}.t) AS IMPLICIT;
            ALTER TABLE {t} ALTER COLUMN cluster TYPE {s}.t USING row(cluster)::{s}.t;
        """).format(t=pgsql.SQL(table), s=s, role=pgsql.Literal(role)))
        # the server's resourceVersion moves on elsewhere: the pods' checkpoint stays
        # below it, so wait_current() compares the table with a LIST
        api.create("configmaps", {"metadata": {"name": "c", "namespace": "default"}, "data": {}})
        try:
            sql("SELECT kwatch.wait_current('pods', %s, '5s')", (srv,))
        except psycopg2.Error:
            pass        # a refusal is fine; running the owner's cast as superuser is not
        assert sql_one(is_super) is False, "the table owner's cast ran as the superuser"
    finally:
        sql(pgsql.SQL("ALTER ROLE {} NOSUPERUSER").format(r))
        if sql_one("SELECT count(*) FROM kwatch.registrations WHERE table_name = %s", (tname,)):
            sql("SELECT kwatch.unwatch('pods', server => %s)", (srv,))
        sql(pgsql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(pgsql.SQL(table)))
        sql(pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(s))
        api.stop()


def test_wait_current_reads_registrations_with_no_search_path_of_the_callers(ctx, role):
    """Review of kwatch._wait_current() (PUBLIC may execute it, and call
    it directly, with any search_path): read_registration runs
    kw_registrations_read's query, whose operators are not schema-qualified
    ($1 = 0, id = $1, ->>, ...), with the bootstrap superuser's rights and
    the caller's search_path.  An `=` of the caller's own found first runs
    as superuser."""
    from faults_support import FakeAPI, fake_server, pod
    api = FakeAPI().start()
    r, s = pgsql.Identifier(role), pgsql.Identifier(role + "_s")
    is_super = pgsql.SQL("SELECT rolsuper FROM pg_roles WHERE rolname = {}").format(pgsql.Literal(role))
    try:
        srv = fake_server(ctx, api)
        api.create("pods", pod("p0"))
        watch("pods", srv)
        wait_status(srv, "pods", lambda st: st["state"] == "watching", msg="watching")
        wid = sql_one("SELECT id FROM kwatch.registrations WHERE server = %s", (srv,))
        # USAGE on the server: kwatch.watches shows the role the watch
        sql(pgsql.SQL("GRANT USAGE ON FOREIGN SERVER {} TO {}").format(pgsql.Identifier(srv), r))
        sql(pgsql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(s, r))
        run_as(role, pgsql.SQL("""
            CREATE FUNCTION {s}.eq(a int, b int) RETURNS boolean LANGUAGE plpgsql AS $$BEGIN
              IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
                EXECUTE 'ALTER ROLE ' || quote_ident({role}) || ' SUPERUSER';
              END IF;
              RETURN a OPERATOR(pg_catalog.=) b; END$$;
            CREATE OPERATOR {s}.= (leftarg = int, rightarg = int, function = {s}.eq);
        """).format(s=s, role=pgsql.Literal(role)))
        try:
            run_as(role, pgsql.SQL("SET search_path = {}, pg_catalog;"
                                   " SELECT kwatch._wait_current(ARRAY[{}], '1s')").format(
                s, pgsql.Literal(wid)))
        except psycopg2.Error:
            pass        # refused (no user mapping, timeout): fine, as long as nothing ran as superuser
        assert sql_one(is_super) is False, "the caller's operator ran as the bootstrap superuser"
    finally:
        sql(pgsql.SQL("ALTER ROLE {} NOSUPERUSER").format(r))
        sql(pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(s))
        api.stop()


def _deferred_bait(conn, role):
    """Issue 30, attack 1: as `role`, a temp table whose deferred constraint
    trigger records who fired it and tries to make `role` superuser, and one
    row queued for it in the open transaction of `conn` (not autocommit)."""
    with conn.cursor() as cur:
        cur.execute(pgsql.SQL("""
            CREATE TEMP TABLE IF NOT EXISTS bait (x int);
            CREATE TEMP TABLE IF NOT EXISTS fired (who text, superuser boolean);
            CREATE OR REPLACE FUNCTION pg_temp.evil() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN
              INSERT INTO pg_temp.fired SELECT current_user, rolsuper FROM pg_catalog.pg_roles
                WHERE rolname = current_user;
              BEGIN
                EXECUTE 'ALTER ROLE ' || quote_ident({role}) || ' SUPERUSER';
              EXCEPTION WHEN insufficient_privilege THEN NULL;
              END;
              RETURN NULL; END$$;
            DROP TRIGGER IF EXISTS evil ON pg_temp.bait;
            CREATE CONSTRAINT TRIGGER evil AFTER INSERT ON pg_temp.bait
              DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION pg_temp.evil();
        """).format(role=pgsql.Literal(role)))
        conn.commit()
        cur.execute("INSERT INTO pg_temp.bait VALUES (1)")


def _fired(conn):
    with conn.cursor() as cur:
        cur.execute("SELECT who, superuser FROM pg_temp.fired")
        rows = cur.fetchall()
        cur.execute("TRUNCATE pg_temp.fired")
    conn.commit()
    return rows


@pytest.mark.parametrize("call", ["watch", "rejoin", "history", "relist", "unwatch", "drop_owned"])
def test_a_callers_deferred_trigger_fires_as_the_caller(ctx, role, call):
    """Issue 30, attack 1 (Critical): watch(), unwatch(), history() (and
    relist(), DROP OWNED) switched to the extension owner and then fired
    what the caller had deferred, so a deferred constraint trigger on a
    temp table made its role superuser.  What the caller deferred must fire
    before any identity switch, as the caller, and the role stays as it was."""
    ns = ctx.namespace()
    dev = ctx.server(auth="token")
    tenant_on(role, dev)
    r = pgsql.Identifier(role)
    sql(pgsql.SQL("GRANT EXECUTE ON FUNCTION kwatch.history(regclass, boolean, interval, bigint), kwatch.relist TO {}").format(r))
    tname = ("kwr_df_" + conftest.RUN_ID).lower()
    is_super = pgsql.SQL("SELECT rolsuper FROM pg_roles WHERE rolname = {}").format(pgsql.Literal(role))
    watch_sql = "SELECT kwatch.watch('leases.coordination.k8s.io', server => %s, namespace => %s, table_name => %s)"
    group = role + "_g"
    g = pgsql.Identifier(group)
    conn = as_role(role)
    conn.autocommit = False
    try:
        if call == "drop_owned":
            # DROP OWNED removes a watch into a table its role does not own
            # through unwatch's implementation (ownership.c): the table is a
            # group's the role belongs to, made by the group's watch of another server
            other = ctx.server(suffix="g", auth="token")
            sql(pgsql.SQL("CREATE ROLE {}").format(g))
            sql(pgsql.SQL("GRANT {} TO {}").format(g, r))
            tenant_on(group, other)
            run_as(group, watch_sql, (other, ns, tname))
            wait_watching(other, "leases.coordination.k8s.io")
        if call != "watch":
            with conn.cursor() as cur:
                cur.execute(watch_sql, (dev, ns, tname))
            conn.commit()
            wait_watching(dev, "leases.coordination.k8s.io")
        statement, params = {
            "watch": (watch_sql, (dev, ns, tname)),
            "rejoin": (watch_sql, (dev, ns, tname)),
            "history": ("SELECT kwatch.history(%s::regclass)", ("k8s." + tname,)),
            "relist": ("SELECT kwatch.relist('leases.coordination.k8s.io', server => %s)", (dev,)),
            "unwatch": ("SELECT kwatch.unwatch('leases.coordination.k8s.io', server => %s)", (dev,)),
            "drop_owned": (pgsql.SQL("DROP OWNED BY {}").format(r), None),
        }[call]
        _deferred_bait(conn, role)
        with conn.cursor() as cur:
            cur.execute(statement, params)
        conn.commit()
        assert sql_one(is_super) is False, "the caller's deferred trigger ran with the extension owner's rights"
        if call != "drop_owned":       # (DROP OWNED dropped the temp tables too)
            assert _fired(conn) == [(role, False)], "the deferred trigger fired once, as the caller"
    finally:
        conn.close()
        sql(pgsql.SQL("ALTER ROLE {} NOSUPERUSER").format(r))
        if sql_one("SELECT count(*) FROM kwatch.registrations WHERE server = %s", (dev,)):
            sql("SELECT kwatch.unwatch('leases.coordination.k8s.io', server => %s)", (dev,))
        sql(pgsql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(pgsql.SQL("k8s." + tname)))
        sql(pgsql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(pgsql.SQL("k8s." + tname + "_history")))
        if sql_one("SELECT count(*) FROM pg_roles WHERE rolname = %s", (group,)):
            sql(pgsql.SQL("DROP OWNED BY {} CASCADE; DROP ROLE {}").format(g, g))


STUCK_OBJECTS = """
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: stuck-lease}
spec: {holderIdentity: x}
---
apiVersion: v1
kind: PodTemplate
metadata: {name: stuck-pt}
template: {spec: {containers: [{name: c, image: busybox}]}}
---
apiVersion: v1
kind: LimitRange
metadata: {name: stuck-lr}
spec: {limits: [{type: Container, max: {cpu: "2"}}]}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: stuck-rq}
spec: {hard: {pods: "10"}}
"""


def test_one_role_cannot_take_every_apply_worker(ctx, role, settings):
    """Issue 30, attack 2 (High): four watches of one role, each table with
    a trigger that sleeps and catches cancellation, held all four apply
    workers (kwatch.max_apply_workers' default), so another owner's change
    waited for them.  A role may not give its watch no deadline or a longer
    one than kwatch.apply_timeout, and holds at most all workers but one:
    another owner's change arrives while the four are stuck (well within
    kwatch.apply_timeout + 10 s, the bound README "Roles" states)."""
    settings(apply_timeout="6s", backoff_initial="200ms", backoff_max="2s")
    ns, other_ns = ctx.namespace(), ctx.namespace("-o")
    dev = ctx.server(auth="token")
    tenant_on(role, dev)
    r, s = pgsql.Identifier(role), pgsql.Identifier(role + "_s")
    sql(pgsql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(s, r))
    resources = ["leases.coordination.k8s.io", "podtemplates", "limitranges", "resourcequotas"]
    # tables of the role's own: a table of another test's may hold a default name
    tables = [("kwr_st%d_" % i + conftest.RUN_ID).lower() for i in range(4)]
    ctx.tables += tables
    # another owner's watch (a superuser's), synced before the attack
    theirs = ctx.server("-t")
    their_table = watch("configmaps", theirs, namespace=other_ns)
    sql("SELECT kwatch.wait_synced(server => %s, timeout => '60s')", (theirs,))

    # no deadline, or a longer one, is a superuser's alone
    for too_long in ("0", "1 day"):
        e = error_as(role, "SELECT kwatch.watch('limitranges', server => %s, namespace => %s,"
                           " apply_timeout => %s)", (dev, ns, too_long))
        assert e.pgcode == "42501", e
        assert "kwatch.apply_timeout" in e.pgerror, e.pgerror
    stalling_function(role, s)
    try:
        for res, t in zip(resources, tables):
            run_as(role, "SELECT kwatch.watch(%s, server => %s, namespace => %s, table_name => %s)",
                   (res, dev, ns, t))
        sql("SELECT kwatch.wait_synced(server => %s, timeout => '60s')", (dev,))
        for t in tables:
            run_as(role, pgsql.SQL("CREATE TRIGGER stall AFTER INSERT ON k8s.{} FOR EACH STATEMENT"
                                   " EXECUTE FUNCTION {}.stall()").format(pgsql.Identifier(t), s))
        kubectl("create", "-n", ns, "-f", "-", input=STUCK_OBJECTS)
        wait_until(lambda: len(sql("SELECT pid FROM pg_stat_activity WHERE backend_type = 'kwatch apply worker'"
                                   " AND wait_event = 'PgSleep'")) >= 3, 30,
                   "three apply workers stuck in the role's triggers")
        stuck = len(sql("SELECT pid FROM pg_stat_activity WHERE backend_type = 'kwatch apply worker'"
                        " AND wait_event = 'PgSleep'"))
        assert stuck == 3, "one role holds all apply workers but one (%d stuck)" % stuck
        lst = ctx.listener("kwatch_configmaps")
        for i in range(3):
            name = "other-%d" % i
            kubectl("create", "configmap", name, "-n", other_ns, "--from-literal=i=%d" % i)
            # under kwatch.apply_timeout (6 s) + 10 s: the role's stuck batches never delay it
            lst.wait_for(type="ADDED", cluster=theirs, name=name, timeout=5)
        conftest.assert_table_matches_server(their_table, theirs, ["configmaps", "-n", other_ns])
    finally:
        sql(pgsql.SQL("UPDATE {}.flag SET on_ = false").format(s))
    # the role's watches recover once its code lets go
    for res, t in zip(resources, tables):
        conftest.assert_table_matches_server("k8s." + t, dev, [res, "-n", ns], timeout=60)
    for res in resources:
        sql("SELECT kwatch.unwatch(%s, server => %s)", (res, dev))
    sql(pgsql.SQL("DROP SCHEMA {} CASCADE").format(s))


def test_repeated_relists_of_one_watch_coalesce(ctx, role):
    """Issue 30, attack 7 (Low): relist() had no rate: 1,920 calls in 20 s
    became 1,873 consistent LISTs from etcd.  Requests made while an earlier
    one's LIST has not committed wait for it and are served by one LIST
    begun after all of them; relist(wait => true) still returns only after
    a LIST that began after the call."""
    ns = ctx.namespace()
    dev = ctx.server(auth="token")
    tenant_on(role, dev)
    r = pgsql.Identifier(role)
    sql(pgsql.SQL("GRANT EXECUTE ON FUNCTION kwatch.relist TO {}").format(r))
    tname = ("kwr_rl_" + conftest.RUN_ID).lower()
    kubectl("apply", "-f", "-", input=conftest.configmaps_doc(ns, ["a%d" % i for i in range(50)]))
    try:
        run_as(role, "SELECT kwatch.watch('configmaps', server => %s, namespace => %s, table_name => %s)",
               (dev, ns, tname))
        sql("SELECT kwatch.wait_synced(server => %s, timeout => '60s')", (dev,))
        since = conftest.CLUSTER.audit_size()
        conn = as_role(role)
        try:
            with conn.cursor() as cur:
                for _ in range(200):
                    cur.execute("SELECT kwatch.relist('configmaps', server => %s)", (dev,))
                kubectl("create", "configmap", "late", "-n", ns, "--from-literal=a=b")
                cur.execute("SELECT kwatch.relist('configmaps', server => %s, wait => true, timeout => '60s')",
                            (dev,))
        finally:
            conn.close()
        # the LIST that served the last call began after it: "late" is in the table
        assert sql_one(pgsql.SQL("SELECT count(*) FROM k8s.{} WHERE cluster = %s AND name = 'late'")
                       .format(pgsql.Identifier(tname)), (dev,)) == 1
        time.sleep(2)      # the audit log's last lines
        lists = [uri for verb, _, uri in conftest.CLUSTER.audit_calls(since)
                 if verb == "list" and "/namespaces/%s/configmaps" % ns in uri]
        print("201 relist() calls made %d LISTs" % len(lists))
        # one LIST at a time: how many complete while the 201 calls run
        # depends on the machine's load (8-34 seen on 2 busy cores), one per
        # call would be 201
        assert 1 <= len(lists) <= 50, lists
        conftest.assert_table_matches_server("k8s." + tname, dev, ["configmaps", "-n", ns])
    finally:
        if sql_one("SELECT count(*) FROM kwatch.registrations WHERE server = %s", (dev,)):
            sql("SELECT kwatch.unwatch('configmaps', server => %s)", (dev,))
        sql(pgsql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(pgsql.SQL("k8s." + tname)))


def test_no_role_can_hold_up_the_staging_schema(ctx, role):
    """Issue 30, attack 6 (Low): any role could hold kwatch's advisory lock
    (1802985800, 1), taken to create the staging schema, and every staged
    relist then failed with 55P03 for as long as it held it.  The schema is
    the extension script's; made again, after a DROP, under a lock of
    kwatch's own table that a role with SELECT cannot take."""
    ns = ctx.namespace()
    srv = ctx.server()
    watch("configmaps", srv, namespace=ns)
    sql("SELECT kwatch.wait_synced(server => %s, timeout => '60s')", (srv,))
    holder = as_role(role)
    holder.autocommit = False
    try:
        with holder.cursor() as cur:
            cur.execute("SELECT pg_advisory_lock(1802985800, 1)")
            cur.execute("LOCK TABLE kwatch.tables IN ACCESS SHARE MODE")   # what SELECT allows
            with pytest.raises(psycopg2.Error) as e:
                cur.execute("LOCK TABLE kwatch.tables IN SHARE UPDATE EXCLUSIVE MODE")
            assert e.value.pgcode == "42501", e.value
        holder.rollback()
        with holder.cursor() as cur:
            cur.execute("SELECT pg_advisory_lock(1802985800, 1)")
        for drop in (False, True):
            if drop:
                sql("DROP SCHEMA IF EXISTS kwatch_stage CASCADE")
            sql("SELECT kwatch.relist('configmaps', server => %s, wait => true, timeout => '30s')", (srv,))
            # the relist committed; the watch then resumes streaming
            st = wait_watching(srv, "configmaps")
            assert st["last_error"] is None, st
        assert sql_one("SELECT count(*) FROM pg_namespace WHERE nspname = 'kwatch_stage'") == 1
    finally:
        holder.close()


def test_one_history_table_cannot_stop_pruning_for_others(ctx, role, settings):
    """Issue 30, attack 3 (Medium): pruning ran every history table in one
    transaction; a trigger on a role's own history table that caught the
    deadline's cancel and kept sleeping had the round's apply worker
    terminated, and no table's deletes committed.  Each table is now pruned
    by a request of its own, counted against its owner's share of the apply
    workers: the other table is pruned while the role's trigger still
    stalls, with no deadline to wait for (apply_timeout is long here, so
    one request for all tables would never get to it)."""
    settings(history_prune_interval=1, apply_timeout="10min", backoff_initial="200ms", backoff_max="2s")
    ns, their_ns = ctx.namespace(), ctx.namespace("-t")
    dev = ctx.server(auth="token")
    tenant_on(role, dev)
    r, s = pgsql.Identifier(role), pgsql.Identifier(role + "_s")
    sql(pgsql.SQL("GRANT EXECUTE ON FUNCTION kwatch.history(regclass, boolean, interval, bigint) TO {}").format(r))
    sql(pgsql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(s, r))
    pt_table = ("kwr_pt_" + conftest.RUN_ID).lower()
    ctx.tables += [pt_table + "_history", pt_table]
    theirs = ctx.server("-t")
    kubectl("apply", "-f", "-", input=conftest.configmaps_doc(their_ns, ["r"]))
    t = "cmp_" + ctx.base[-10:].replace("-", "_")
    ctx.tables += [t + "_history", t]
    their_table = watch("configmaps", theirs, namespace=their_ns, table_name=t, history=True,
                        history_retention="1 second")
    sql("SELECT kwatch.wait_synced(server => %s, timeout => '60s')", (theirs,))
    stalling_function(role, s)
    try:
        run_as(role, "SELECT kwatch.watch('podtemplates', server => %s, namespace => %s, history => true,"
                     " history_retention => '1 second', table_name => %s)", (dev, ns, pt_table))
        sql("SELECT kwatch.wait_synced(server => %s, timeout => '60s')", (dev,))
        run_as(role, pgsql.SQL("CREATE TRIGGER stall BEFORE DELETE ON k8s.{}"
                               " FOR EACH ROW EXECUTE FUNCTION {}.stall()").format(
                                   pgsql.Identifier(pt_table + "_history"), s))
        kubectl("create", "-n", ns, "-f", "-", input="""
apiVersion: v1
kind: PodTemplate
metadata: {name: pt}
template: {spec: {containers: [{name: c, image: busybox}]}}
""")
        for i in range(3):
            kubectl("label", "podtemplate", "pt", "-n", ns, "i=%d" % i, "--overwrite")
        wait_until(lambda: sql("SELECT pid FROM pg_stat_activity WHERE backend_type = 'kwatch apply worker'"
                               " AND wait_event = 'PgSleep'"), 30, "pruning stuck in the role's trigger")
        h = t + "_history"
        count = pgsql.SQL("SELECT count(*) FILTER (WHERE upper_inf(valid)), count(*) FROM k8s.{}"
                          " WHERE cluster = %s AND name = 'r'").format(pgsql.Identifier(h))
        for i in range(4):
            kubectl("label", "configmap", "r", "-n", their_ns, "i=%d" % i, "--overwrite")
        wait_until(lambda: sql(count, (theirs,))[0] == (1, 5), 30, "five versions of r")
        stuck = sql("SELECT pid FROM pg_stat_activity WHERE backend_type = 'kwatch apply worker'"
                    " AND wait_event = 'PgSleep'")
        wait_until(lambda: sql(count, (theirs,))[0] == (1, 1), 45,
                   "the other table's closed versions pruned while the role's trigger stalls")
        # ... by another worker: the stalled one is still in the role's trigger
        assert set(stuck) <= set(sql("SELECT pid FROM pg_stat_activity WHERE backend_type = 'kwatch apply worker'"
                                     " AND wait_event = 'PgSleep'")), stuck
    finally:
        sql(pgsql.SQL("UPDATE {}.flag SET on_ = false").format(s))
        if sql_one("SELECT count(*) FROM kwatch.registrations WHERE server = %s", (dev,)):
            sql("SELECT kwatch.unwatch('podtemplates', server => %s)", (dev,))
        sql(pgsql.SQL("DROP SCHEMA {} CASCADE").format(s))


def test_a_callers_trigger_cannot_defer_another_into_kwatchs_identity(ctx, role):
    """Issue 30, review of the fix: a deferred trigger of the caller's that
    fires when watch() sets constraints IMMEDIATE ran SET CONSTRAINTS ALL
    DEFERRED and queued a second deferred trigger, which then fired inside
    the implementation, under the extension owner's identity.  Deferring
    is refused for the whole call (42501), and nothing runs as superuser."""
    ns = ctx.namespace()
    dev = ctx.server(auth="token")
    tenant_on(role, dev)
    r = pgsql.Identifier(role)
    tname = ("kwr_rd_" + conftest.RUN_ID).lower()
    is_super = pgsql.SQL("SELECT rolsuper FROM pg_roles WHERE rolname = {}").format(pgsql.Literal(role))
    conn = as_role(role)
    conn.autocommit = False
    try:
        with conn.cursor() as cur:
            cur.execute(pgsql.SQL("""
                CREATE TEMP TABLE t1 (x int); CREATE TEMP TABLE t2 (x int);
                CREATE FUNCTION pg_temp.f2() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN
                  BEGIN EXECUTE 'ALTER ROLE ' || quote_ident({role}) || ' SUPERUSER';
                  EXCEPTION WHEN insufficient_privilege THEN NULL; END;
                  RETURN NULL; END$$;
                CREATE FUNCTION pg_temp.f1() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN
                  SET CONSTRAINTS ALL DEFERRED; INSERT INTO pg_temp.t2 VALUES (1); RETURN NULL; END$$;
                CREATE CONSTRAINT TRIGGER a AFTER INSERT ON pg_temp.t1
                  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION pg_temp.f1();
                CREATE CONSTRAINT TRIGGER b AFTER INSERT ON pg_temp.t2
                  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION pg_temp.f2();
            """).format(role=pgsql.Literal(role)))
            conn.commit()
            cur.execute("SET CONSTRAINTS ALL DEFERRED; INSERT INTO pg_temp.t1 VALUES (1)")
            with pytest.raises(psycopg2.Error) as e:
                cur.execute("SELECT kwatch.watch('configmaps', server => %s, namespace => %s,"
                            " table_name => %s)", (dev, ns, tname))
            assert e.value.pgcode == "42501" and "defer" in e.value.pgerror, e.value.pgerror
        conn.rollback()
        assert sql_one(is_super) is False
    finally:
        conn.close()
        sql(pgsql.SQL("ALTER ROLE {} NOSUPERUSER").format(r))
        sql(pgsql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(pgsql.SQL("k8s." + tname)))


def test_two_roles_watch_one_resource_each_into_a_table_of_their_own(ctx, role):
    """Issue 30, item 5: one role's watch of configmaps no longer denies the
    resource to others.  A second role on the same server is told whose the
    watch is and that table_name => gives it one of its own (the HINT is
    true now); with it, each table holds its role's namespace only, and a
    name given to relist(), wait_synced() and unwatch() means the caller's
    own watch.  A superuser, who may use both, names one by its table."""
    srv = ctx.server(auth="token")
    ns_a, ns_b = ctx.namespace("-a"), ctx.namespace("-b")
    alice, bob = role, role + "_b"
    t_a, t_b = ("kwr_sq_a_" + conftest.RUN_ID).lower(), ("kwr_sq_b_" + conftest.RUN_ID).lower()
    ctx.tables += [t_a, t_b]
    try:
        tenant_on(alice, srv)
        tenant(bob, srv)
        for r in (alice, bob):
            sql(pgsql.SQL("GRANT EXECUTE ON FUNCTION kwatch.relist TO {}").format(pgsql.Identifier(r)))
        assert run_as(alice, "SELECT kwatch.watch('configmaps', server => %s, namespace => %s,"
                      " table_name => %s)::text", (srv, ns_a, t_a)) == [("k8s." + t_a,)]
        # bob without a table name: refused, told how
        e = error_as(bob, "SELECT kwatch.watch('configmaps', server => %s, namespace => %s)", (srv, ns_b))
        assert e.pgcode == "42710" and ("by role %s" % alice) in e.diag.message_primary, e.pgerror
        assert "table_name =>" in e.diag.message_hint, e.pgerror
        # ... and doing what the HINT says works
        assert run_as(bob, "SELECT kwatch.watch('configmaps', server => %s, namespace => %s,"
                      " table_name => %s)::text", (srv, ns_b, t_b)) == [("k8s." + t_b,)]
        assert sql_one("SELECT relowner::regrole::text FROM pg_class WHERE oid = %s::regclass",
                       ("k8s." + t_b,)) == bob
        kubectl("create", "configmap", "mine", "-n", ns_a, "--from-literal=k=a")
        kubectl("create", "configmap", "mine", "-n", ns_b, "--from-literal=k=b")
        run_as(bob, "SELECT kwatch.wait_synced('configmaps', server => %s, timeout => '60s')", (srv,))
        run_as(alice, "SELECT kwatch.wait_synced('configmaps', server => %s, timeout => '60s')", (srv,))
        for t, ns in ((t_a, ns_a), (t_b, ns_b)):
            conftest.assert_table_matches_server("k8s." + t, srv, ["configmaps", "-n", ns], timeout=60)
            assert sql_one(pgsql.SQL("SELECT count(*) FROM k8s.{} WHERE namespace <> %s")
                           .format(pgsql.Identifier(t)), (ns,)) == 0
        owners = dict(sql("SELECT table_name, owner::text FROM kwatch.watches WHERE server = %s", (srv,)))
        assert owners == {"k8s." + t_a: alice, "k8s." + t_b: bob}

        def relist_requests(t):
            return sql_one("SELECT relist_requests FROM kwatch.watches WHERE table_name = %s", ("k8s." + t,))
        before_a, before_b = relist_requests(t_a), relist_requests(t_b)
        run_as(bob, "SELECT kwatch.relist('configmaps', server => %s, wait => true, timeout => '60s')", (srv,))
        assert (relist_requests(t_a), relist_requests(t_b)) == (before_a, before_b + 1)
        # a superuser names one by its table
        e = error_as_super("SELECT kwatch.relist('configmaps', server => %s)", (srv,))
        assert e.pgcode == "42P08" and t_a in e.diag.message_detail and t_b in e.diag.message_detail, e.pgerror
        sql("SELECT kwatch.relist(%s, server => %s)", (t_a, srv))
        # ... and waits for one by its table: another role's watch never
        # joins what a caller waits for unnoticed (review finding F1)
        e = error_as_super("SELECT kwatch.wait_synced('configmaps', server => %s, timeout => '5s')", (srv,))
        assert e.pgcode == "42P08" and t_b in e.diag.message_detail, e.pgerror
        sql("SELECT kwatch.wait_synced(%s, server => %s, timeout => '60s')", (t_a, srv))
        wait_until(lambda: relist_requests(t_a) == before_a + 1, 10, "the superuser's relist of alice's")
        # unwatch means the caller's own watch; the other stays and streams
        assert run_as(bob, "SELECT kwatch.unwatch('configmaps', server => %s)", (srv,)) == [(True,)]
        assert [r[0] for r in sql("SELECT table_name FROM kwatch.watches WHERE server = %s", (srv,))] \
            == ["k8s." + t_a]
        kubectl("create", "configmap", "later", "-n", ns_a, "--from-literal=k=a")
        conftest.assert_table_matches_server("k8s." + t_a, srv, ["configmaps", "-n", ns_a], timeout=60)
    finally:
        drop_role(bob)


def test_a_caught_error_in_an_owners_trigger_leaves_deferral_allowed(ctx):
    """While kwatch acts as a table's owner, SET CONSTRAINTS ... DEFERRED is
    refused; an error raised there (the owner's trigger refusing unwatch()'s
    deletes) and caught by the caller's EXCEPTION block ends that refusal:
    the rest of the transaction may defer constraints again."""
    srv = ctx.server()
    ns = ctx.namespace()
    kubectl("create", "configmap", "kept", "-n", ns, "--from-literal=k=v")
    table = watch("configmaps", srv, namespace=ns)
    sql("SELECT kwatch.wait_synced('configmaps', server => %s, timeout => '1 min')", (srv,))
    fn = "pg_temp_refuse_" + conftest.RUN_ID.lower()
    sql("CREATE FUNCTION public.%s() RETURNS trigger LANGUAGE plpgsql AS"
        " $$BEGIN RAISE EXCEPTION 'rows stay'; END$$" % fn)
    sql(pgsql.SQL("CREATE TRIGGER refuse BEFORE DELETE ON {} FOR EACH ROW EXECUTE FUNCTION public.{}()")
        .format(pgsql.SQL(table), pgsql.Identifier(fn)))
    conn = conftest.PG.connect(autocommit=False)
    try:
        with conn.cursor() as cur:
            cur.execute("DO $$BEGIN PERFORM kwatch.unwatch('configmaps', server => %s);"
                        " EXCEPTION WHEN others THEN RAISE NOTICE 'caught: %%', SQLERRM; END$$" % (
                            pgsql.Literal(srv).as_string(conn)))
            assert any("rows stay" in n for n in conn.notices), conn.notices
            cur.execute("SET CONSTRAINTS ALL DEFERRED")
        conn.rollback()
    finally:
        conn.close()
        sql(pgsql.SQL("DROP TRIGGER refuse ON {}").format(pgsql.SQL(table)))
        sql("DROP FUNCTION public.%s()" % fn)


def test_as_of_never_runs_a_history_owners_code_with_the_callers_rights(ctx, role):
    """kwatch.as_of() read a history table found by name, as its caller.
    Its owner turns it into a view whose column calls the owner's function
    (a _RETURN rule on PostgreSQL 15, which keeps the table's OID; on 16+,
    where that is gone, DROP TABLE and CREATE VIEW under the same name): a
    superuser's as_of() made the owner a superuser.  Now the history table is
    found by its OID in kwatch.history_tables and must be a plain table
    (42809), a replaced one is no history at all (42P01), and its rows are
    read as its owner under a security-restricted operation; the owner's
    function never runs as the superuser.  Its plain use still works."""
    ns = ctx.namespace()
    srv = ctx.server(auth="token")
    tenant_on(role, srv)
    r, s = pgsql.Identifier(role), pgsql.Identifier(role + "_s")
    t = ("kwr_asof_" + conftest.RUN_ID).lower()
    h = t + "_history"
    ctx.tables += [h, t]
    sql(pgsql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(s, r))
    kubectl("create", "configmap", "one", "-n", ns)
    try:
        run_as(role, "SELECT kwatch.watch('configmaps', server => %s, namespace => %s, history => true,"
                     " table_name => %s)", (srv, ns, t))
        sql("SELECT kwatch.wait_synced(server => %s, timeout => '60s')", (srv,))
        names = sql("SELECT name FROM kwatch.as_of(%s::regclass, now()) ORDER BY 1", ("k8s." + t,))
        assert ("one",) in names, names

        run_as(role, pgsql.SQL("""
            CREATE FUNCTION {s}.f() RETURNS text LANGUAGE plpgsql AS $$BEGIN
              IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
                EXECUTE format('ALTER ROLE %I SUPERUSER', {role});
              END IF;
              RETURN 'x'; END$$;
        """).format(s=s, role=pgsql.Literal(role)))
        cols = sql("SELECT string_agg(CASE attname WHEN 'cluster' THEN %s"
                   "   WHEN 'valid' THEN '''(,)''::tstzrange' ELSE format('NULL::%%s', format_type(atttypid, atttypmod)) END"
                   "   || ' AS ' || quote_ident(attname), ', ' ORDER BY attnum)"
                   " FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped",
                   (role + "_s.f()", "k8s." + h))[0][0]
        in_place = int(sql_one("SHOW server_version_num")) < 160000
        # what PostgreSQL 15 needs before it converts: empty, no index or constraint
        # (and a VACUUM to clear relhasindex), then the rule
        prepare = pgsql.SQL("""
                DO $$DECLARE c record; BEGIN
                  EXECUTE 'TRUNCATE k8s.{h}';
                  FOR c IN SELECT conname FROM pg_constraint WHERE conrelid = 'k8s.{h}'::regclass LOOP
                    EXECUTE format('ALTER TABLE k8s.{h} DROP CONSTRAINT %I', c.conname);
                  END LOOP;
                  FOR c IN SELECT indexrelid::regclass AS i FROM pg_index WHERE indrelid = 'k8s.{h}'::regclass LOOP
                    EXECUTE format('DROP INDEX %s', c.i);
                  END LOOP;
                END$$""").format(h=pgsql.SQL(h))
        rule = pgsql.SQL('CREATE RULE "_RETURN" AS ON SELECT TO k8s.{h} DO INSTEAD SELECT ' + cols).format(
            h=pgsql.SQL(h))
        if in_place:
            # the table would become a view in place, its OID kept (PostgreSQL
            # 15): refused to its owner (src/functions/relation_guard.c) ...
            run_as(role, prepare)
            run_as(role, pgsql.SQL("VACUUM k8s.{}").format(pgsql.Identifier(h)))
            e = error_as(role, rule)
            assert e.pgcode == "42501" and "ON SELECT rule" in e.diag.message_primary, e.pgerror
            # ... and should it happen all the same (here done by a superuser),
            # as_of() reads no view
            sql(rule)
            assert sql_one("SELECT relkind FROM pg_class WHERE oid = %s::regclass", ("k8s." + h,)) == "v"
            code = "42809"
        else:
            # the owner drops its table; a view takes the name (made here by
            # a superuser for a role that would need CREATE on schema k8s)
            run_as(role, pgsql.SQL("DROP TABLE k8s.{h}").format(h=pgsql.SQL(h)))
            sql(pgsql.SQL("CREATE VIEW k8s.{h} AS SELECT " + cols + "; ALTER VIEW k8s.{h} OWNER TO {r}")
                .format(h=pgsql.SQL(h), r=r))
            code = "42P01"
        with pytest.raises(psycopg2.Error) as e:
            sql("SELECT * FROM kwatch.as_of(%s::regclass, now())", ("k8s." + t,))
        assert e.value.pgcode == code, e.value.pgerror
        assert sql_one("SELECT rolsuper FROM pg_roles WHERE rolname = %s", (role,)) is False
        assert sql_one("SELECT rolsuper FROM pg_roles WHERE rolname = current_user") is True
    finally:
        # the history table is a view now: the mirror's history trigger goes first
        sql(pgsql.SQL("DROP TRIGGER IF EXISTS kwatch_history ON k8s.{}").format(pgsql.Identifier(t)))
        if sql_one("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", ("k8s." + h,)) == "v":
            sql(pgsql.SQL("DROP VIEW k8s.{}").format(pgsql.Identifier(h)))
        if sql_one("SELECT count(*) FROM kwatch.registrations WHERE server = %s", (srv,)):
            sql("SELECT kwatch.unwatch(%s, server => %s)", (t, srv))
        sql(pgsql.SQL("DROP SCHEMA {} CASCADE").format(s))


def test_a_kubectl_view_never_reads_a_column_of_its_owners_type(ctx, role):
    """The views kubectl.<t> read a role's mirror table with the reader's
    rights (security_invoker): a cast from a column type of the owner's
    would run the owner's function as the reader, a superuser included.
    PostgreSQL refuses ALTER COLUMN ... TYPE under the view, but the owner
    may DROP COLUMN ... CASCADE (which drops the view), add the column back
    with a type of its own and call watch() again to have the view made
    anew.  watch() then makes no view (a WARNING says why); a plain table
    gets a view that reads ONLY it."""
    ns = ctx.namespace()
    srv = ctx.server(auth="token")
    tenant_on(role, srv)
    r, s = pgsql.Identifier(role), pgsql.Identifier(role + "_s")
    t = ("kwr_kv_" + conftest.RUN_ID).lower()
    ctx.tables.append(t)
    sql(pgsql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(s, r))
    try:
        args = (srv, ns, t)
        run_as(role, "SELECT kwatch.watch('configmaps', server => %s, namespace => %s, table_name => %s)", args)
        view = sql_one("SELECT pg_get_viewdef(%s::regclass)", ("kubectl." + t,))
        assert ("FROM ONLY k8s.%s" % t) in view, view
        run_as(role, pgsql.SQL("CREATE DOMAIN {s}.ts AS timestamptz;"
                               " ALTER TABLE k8s.{t} DROP COLUMN created_at CASCADE;"
                               " ALTER TABLE k8s.{t} ADD COLUMN created_at {s}.ts")
               .format(s=s, t=pgsql.Identifier(t)))
        assert sql_one("SELECT to_regclass(%s)", ("kubectl." + t,)) is None
        run_as(role, "SELECT kwatch.watch('configmaps', server => %s, namespace => %s, table_name => %s)", args)
        assert sql_one("SELECT to_regclass(%s)", ("kubectl." + t,)) is None, "a view over the owner's type"
    finally:
        if sql_one("SELECT count(*) FROM kwatch.registrations WHERE server = %s", (srv,)):
            sql("SELECT kwatch.unwatch(%s, server => %s)", (t, srv))
        sql(pgsql.SQL("DROP SCHEMA {} CASCADE").format(s))


def test_as_of_checks_the_history_table_after_the_callers_deferred_triggers(ctx, role):
    """A role's deferred constraint trigger on its own mirror table changes
    the history table's column type; in the same transaction it calls
    as_of().  The trigger used to fire after as_of() had checked the table
    and before it read it, and the rows of the new type were returned as
    text: the backend read an address of the role's choosing (signal 11
    with a bigint).  The caller's deferred triggers now fire before the
    checks: as_of() refuses the changed table (42809), the server lives."""
    ns = ctx.namespace()
    srv = ctx.server(auth="token")
    tenant_on(role, srv)
    r, s = pgsql.Identifier(role), pgsql.Identifier(role + "_s")
    t = ("kwr_asofd_" + conftest.RUN_ID).lower()
    h = t + "_history"
    ctx.tables += [h, t]
    sql(pgsql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(s, r))
    kubectl("create", "configmap", "one", "-n", ns)
    try:
        run_as(role, "SELECT kwatch.watch('configmaps', server => %s, namespace => %s, history => true,"
                     " table_name => %s)", (srv, ns, t))
        sql("SELECT kwatch.wait_synced(server => %s, timeout => '60s')", (srv,))
        run_as(role, pgsql.SQL("""
            CREATE FUNCTION {s}.swap() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN
              EXECUTE 'ALTER TABLE k8s.{h} DROP COLUMN resource_version,'
                      ' ADD COLUMN resource_version bigint DEFAULT 4096';
              RETURN NULL; END$$;
            CREATE CONSTRAINT TRIGGER swap AFTER INSERT ON k8s.{t} DEFERRABLE INITIALLY DEFERRED
              FOR EACH ROW EXECUTE FUNCTION {s}.swap();
        """).format(s=s, h=pgsql.SQL(h), t=pgsql.SQL(t)))
        conn = as_role(role)
        conn.autocommit = False
        try:
            cur = conn.cursor()
            cur.execute(pgsql.SQL("INSERT INTO k8s.{} (cluster, uid, resource_version, object)"
                                  " VALUES ('x', 'u-x', '1', '{{\"metadata\": {{\"name\": \"x\"}}}}')")
                        .format(pgsql.Identifier(t)))
            with pytest.raises(psycopg2.Error) as e:
                cur.execute("SELECT * FROM kwatch.as_of(%s::regclass, now())", ("k8s." + t,))
            assert e.value.pgcode == "42809", e.value.pgerror
        finally:
            conn.close()
        assert sql_one("SELECT 1") == 1          # the server is still there
    finally:
        run_as(role, pgsql.SQL("DROP TRIGGER IF EXISTS swap ON k8s.{}").format(pgsql.Identifier(t)))
        if sql_one("SELECT count(*) FROM kwatch.registrations WHERE server = %s", (srv,)):
            sql("SELECT kwatch.unwatch(%s, server => %s)", (t, srv))
        sql(pgsql.SQL("DROP SCHEMA {} CASCADE").format(s))


def test_restore_generated_columns_runs_for_the_tables_owner_only(ctx, role):
    """kwatch.restore_generated_columns() (PUBLIC may execute it) adds
    generated columns, which evaluates their expressions over every row
    through the casts of the owner's column types: a superuser calling it
    on a role's table would run the role's code with superuser rights.  It
    refuses any caller but the owner (42501), and works for the owner."""
    t = ("kwr_rgc_" + conftest.RUN_ID).lower()
    ctx.tables.append(t)
    sql("SELECT kwatch.create_mirror_table(%s, '', 'v1', 'configmaps')", (t,))
    sql(pgsql.SQL("ALTER TABLE k8s.{0} OWNER TO {1}; GRANT USAGE ON SCHEMA k8s TO {1}")
        .format(pgsql.Identifier(t), pgsql.Identifier(role)))
    e = error_as_super("SELECT kwatch.restore_generated_columns(%s, '', 'configmaps')", (t,))
    assert e.pgcode == "42501", e.pgerror
    run_as(role, "SELECT kwatch.restore_generated_columns(%s, '', 'configmaps')", (t,))
