"""Day two (issue 33): a database the worker does not serve says so at once
and never shows another database's status; a wait for a watch the current
transaction registered fails at once instead of at its timeout."""
import time

import psycopg2
import pytest
from psycopg2 import sql as pgsql

import conftest
from conftest import sql, sql_one, watch, wait_watching
from common import wait_until
from replicas import instances  # noqa: F401  (fixture)


def error(query, params=None, conn=None):
    with pytest.raises(psycopg2.Error) as e:
        sql(query, params, conn=conn)
    return e.value


@pytest.fixture
def other_db(ctx):
    """A second database with the extension and a server of its own."""
    name = ("kw_other_" + ctx.base)[:63].replace("-", "_")
    sql(pgsql.SQL("CREATE DATABASE {}").format(pgsql.Identifier(name)))
    conn = psycopg2.connect(**conftest.PG.dsn(dbname=name))
    conn.autocommit = True
    try:
        sql("CREATE EXTENSION kwatch", conn=conn)
        yield name, conn
    finally:
        conn.close()
        sql(pgsql.SQL("DROP DATABASE {} WITH (FORCE)").format(pgsql.Identifier(name)))


def test_a_database_the_worker_does_not_serve_shows_nothing_of_another(ctx, other_db):
    """Issue 33, item 1: the worker's database has a watch with status; in
    another database with the extension, the same ids show nothing, and
    every function that needs the worker says which database it serves."""
    name, other = other_db
    srv = ctx.server()
    watch("configmaps", srv)
    wait_watching(srv, "configmaps")
    served = sql_one("SHOW kwatch.database")
    assert sql_one("SELECT count(*) FROM kwatch.watches WHERE server = %s", (srv,)) == 1
    assert sql_one("SELECT kwatch.worker_pid()") is not None

    sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch OPTIONS (kubeconfig {})")
        .format(pgsql.Identifier(srv), pgsql.Literal(conftest.CLUSTER.kubeconfig)), conn=other)
    e = error("SELECT kwatch.watch('configmaps', server => %s)", (srv,), conn=other)
    assert e.pgcode == "55000", e.pgerror
    assert 'serves database "%s", not "%s"' % (served, name) in e.diag.message_primary
    assert "kwatch.database" in e.diag.message_hint + e.diag.message_detail
    # nothing registered, nothing shown: not the worker's database's status
    assert sql_one("SELECT count(*) FROM kwatch.registrations", conn=other) == 0
    assert sql("SELECT * FROM kwatch.watches", conn=other) == []
    assert sql_one("SELECT kwatch.worker_pid()", conn=other) is None
    assert sql("SELECT seq FROM kwatch.events LIMIT 1", conn=other) == []
    for q in ("SELECT kwatch._wait_synced(ARRAY[1], ARRAY[0::bigint], '1s')",
              "SELECT kwatch._request_relist(1)"):
        started = time.monotonic()
        e = error(q, conn=other)
        assert e.pgcode == "55000" and "serves database" in e.diag.message_primary, (q, e.pgerror)
        assert time.monotonic() - started < 1.0
    # what was registered there before (0.6.0 let it) can still be removed
    assert sql_one("SELECT count(*) FROM kwatch.watches WHERE server = %s", (srv,)) == 1


def test_a_wait_in_the_registering_transaction_fails_at_once(ctx):
    """Issue 33, item 3: wait_synced(), wait_current() and relist(wait =>
    true) for a watch registered by the current transaction fail with
    55000 "COMMIT first" in well under 100 ms; after COMMIT they work."""
    srv = ctx.server()
    conn = conftest.PG.connect(autocommit=False)
    try:
        for q in ("SELECT kwatch.wait_synced('configmaps', server => %s, timeout => '30s')",
                  "SELECT kwatch.wait_current('configmaps', server => %s, timeout => '30s')",
                  "SELECT kwatch.relist('configmaps', server => %s, wait => true, timeout => '30s')"):
            sql("SELECT kwatch.watch('configmaps', server => %s)", (srv,), conn=conn)
            started = time.monotonic()
            e = error(q, (srv,), conn=conn)
            took = time.monotonic() - started
            conn.rollback()
            assert e.pgcode == "55000", (q, e.pgerror)
            assert "registered by this transaction" in e.diag.message_primary, e.pgerror
            assert e.diag.message_hint.startswith("COMMIT first"), e.pgerror
            assert took < 0.1, (q, took)
    finally:
        conn.close()
    watch("configmaps", srv)
    sql("SELECT kwatch.wait_synced('configmaps', server => %s, timeout => '2 min')", (srv,))
    assert sql_one("SELECT kwatch.wait_current('configmaps', server => %s, timeout => '2 min')"
                   " IS NOT NULL", (srv,))


def test_unwatch_drop_table_deletes_the_rows_first(ctx):
    """Issue 33, item 6: unwatch(drop_table => true) deletes the watch's
    rows as ordinary deletes before dropping the table, so that a
    logical-replication subscriber (which never sees a DROP TABLE) removes
    that cluster's rows; a row trigger stands in for the subscriber: it
    sees every row deleted."""
    srv = ctx.server()
    ns = ctx.namespace()
    for i in range(3):
        conftest.kubectl("create", "configmap", "c%d" % i, "-n", ns, "--from-literal=k=v")
    table = "cms_" + ctx.base.replace("-", "_")[:40]
    ctx.tables.append(table)
    watch("configmaps", srv, namespace=ns, table_name=table)
    sql("SELECT kwatch.wait_synced(%s, server => %s, timeout => '2 min')", (table, srv))
    names = sorted(r[0] for r in sql(pgsql.SQL("SELECT name FROM k8s.{}").format(pgsql.Identifier(table))))
    assert {"c0", "c1", "c2"} <= set(names), names     # and the namespace's kube-root-ca.crt
    log = "deleted_" + table
    sql(pgsql.SQL("CREATE TABLE public.{} (name text)").format(pgsql.Identifier(log)))
    try:
        sql(pgsql.SQL("CREATE FUNCTION public.{f}() RETURNS trigger LANGUAGE plpgsql AS "
                      "$$BEGIN INSERT INTO public.{l} VALUES (OLD.name); RETURN OLD; END$$")
            .format(f=pgsql.Identifier(log + "_f"), l=pgsql.Identifier(log)))
        sql(pgsql.SQL("CREATE TRIGGER kept AFTER DELETE ON k8s.{} FOR EACH ROW EXECUTE FUNCTION public.{}()")
            .format(pgsql.Identifier(table), pgsql.Identifier(log + "_f")))
        assert sql_one("SELECT kwatch.unwatch(%s, server => %s, drop_table => true)", (table, srv))
        assert sql_one("SELECT to_regclass(%s)", ("k8s." + table,)) is None
        assert sorted(r[0] for r in sql(pgsql.SQL("SELECT name FROM public.{}")
                                        .format(pgsql.Identifier(log)))) == names
    finally:
        sql(pgsql.SQL("DROP TABLE IF EXISTS public.{}").format(pgsql.Identifier(log)))
        sql(pgsql.SQL("DROP FUNCTION IF EXISTS public.{}()").format(pgsql.Identifier(log + "_f")))


def test_a_running_watch_takes_a_relist_from_the_transaction_that_wrote_its_row(ctx):
    """The 0.7.0 update clears a Secret watch's checkpoint and asks for a
    relist in one transaction: a watch the worker runs takes the request
    although this transaction wrote its row (only a watch the worker does
    not run yet, a registration of this transaction's, is refused)."""
    srv = ctx.server()
    watch("configmaps", srv)
    wait_watching(srv, "configmaps")
    wid = sql_one("SELECT id FROM kwatch.registrations WHERE server = %s", (srv,))
    before = sql_one("SELECT relist_requests FROM kwatch.watches WHERE id = %s", (wid,))
    conn = conftest.PG.connect(autocommit=False)
    try:
        sql("UPDATE kwatch.registrations SET resource_version = NULL WHERE id = %s", (wid,), conn=conn)
        assert sql_one("SELECT kwatch._request_relist(%s)", (wid,), conn=conn) > 0
        conn.commit()
    finally:
        conn.close()
    assert sql_one("SELECT relist_requests FROM kwatch.watches WHERE id = %s", (wid,)) == before + 1


def _rows(table, cluster_name):
    return sql_one(pgsql.SQL("SELECT count(*) FROM k8s.{} WHERE cluster = %s")
                   .format(pgsql.Identifier(table)), (cluster_name,))


def _watched_table(ctx, srv, ns, name):
    """A configmaps watch of namespace `ns` into a table of the test's, synced
    with the ConfigMap `name`; returns the table."""
    conftest.kubectl("create", "configmap", name, "-n", ns, "--from-literal=k=v")
    table = ("cms_" + ctx.base.replace("-", "_"))[:60]
    ctx.tables.append(table)
    watch("configmaps", srv, namespace=ns, table_name=table)
    sql("SELECT kwatch.wait_synced(%s, server => %s, timeout => '2 min')", (table, srv))
    assert sql_one(pgsql.SQL("SELECT count(*) FROM k8s.{} WHERE cluster = %s AND name = %s")
                   .format(pgsql.Identifier(table)), (srv, name)) == 1
    return table


def test_a_watched_server_cannot_be_renamed(ctx):
    """Issue 33, item 2: the server's name is the cluster value of its
    watches' rows, so ALTER SERVER ... RENAME of a watched server is refused
    (55006) and the watch goes on; a server without watches renames."""
    srv = ctx.server()
    ns = ctx.namespace()
    table = _watched_table(ctx, srv, ns, "before")
    e = error(pgsql.SQL("ALTER SERVER {} RENAME TO {}")
              .format(pgsql.Identifier(srv), pgsql.Identifier(srv + "-x")))
    assert e.pgcode == "55006", e.pgerror
    assert "kwatch watches it" in e.diag.message_primary
    assert "watch of configmaps on server %s" % srv in e.diag.message_detail
    assert "unwatch" in e.diag.message_hint
    assert sql_one("SELECT count(*) FROM pg_foreign_server WHERE srvname = %s", (srv,)) == 1
    # the watch goes on under its name
    conftest.kubectl("create", "configmap", "after", "-n", ns, "--from-literal=k=v")
    sql("SELECT kwatch.wait_current(%s, server => %s, timeout => '1 min')", (table, srv))
    assert sql_one(pgsql.SQL("SELECT count(*) FROM k8s.{} WHERE cluster = %s AND name = 'after'")
                   .format(pgsql.Identifier(table)), (srv,)) == 1
    # without watches the rename is PostgreSQL's own
    idle = ctx.server("-idle")
    sql(pgsql.SQL("ALTER SERVER {} RENAME TO {}").format(pgsql.Identifier(idle), pgsql.Identifier(idle + "2")))
    sql(pgsql.SQL("ALTER SERVER {} RENAME TO {}").format(pgsql.Identifier(idle + "2"), pgsql.Identifier(idle)))


def test_drop_server_refuses_while_watched_and_cascade_removes_the_watches(ctx):
    """Issue 33, item 2: DROP SERVER of a watched server is refused with
    PostgreSQL's dependency error (2BP01, one DETAIL line per watch);
    DROP SERVER ... CASCADE removes its watches as unwatch() does (the
    registration, the rows with its cluster value; the table stays), the
    worker stops them, and no watch is shown as watching."""
    srv = ctx.server()
    ns = ctx.namespace()
    table = _watched_table(ctx, srv, ns, "one")
    wid = sql_one("SELECT id FROM kwatch.registrations WHERE server = %s", (srv,))
    e = error(pgsql.SQL("DROP SERVER {}").format(pgsql.Identifier(srv)))
    assert e.pgcode == "2BP01", e.pgerror
    assert e.diag.message_primary == "cannot drop server %s because other objects depend on it" % srv
    assert "watch of configmaps on server %s (table k8s.%s) depends on server %s" % (srv, table, srv) \
        in e.diag.message_detail
    assert "CASCADE" in e.diag.message_hint
    assert sql_one("SELECT state FROM kwatch.watches WHERE id = %s", (wid,)) == "watching"

    sql(pgsql.SQL("DROP SERVER {} CASCADE").format(pgsql.Identifier(srv)))
    assert sql_one("SELECT count(*) FROM kwatch.registrations WHERE server = %s", (srv,)) == 0
    assert sql("SELECT * FROM kwatch.watches WHERE id = %s", (wid,)) == []
    assert _rows(table, srv) == 0
    assert sql_one("SELECT to_regclass(%s) IS NOT NULL", ("k8s." + table,))
    # the worker stopped it: its status goes, and a new object never arrives
    deadline = time.monotonic() + 30
    while sql_one("SELECT count(*) FROM kwatch.watch_status() WHERE watch_id = %s", (wid,)):
        assert time.monotonic() < deadline, "the worker still runs the dropped server's watch"
        time.sleep(0.2)
    conftest.kubectl("create", "configmap", "two", "-n", ns, "--from-literal=k=v")
    time.sleep(3)
    assert _rows(table, srv) == 0


def test_drop_owned_of_a_servers_owner_treats_watches_as_dependents(ctx):
    """Issue 33, item 2: DROP OWNED BY the role that owns a server another
    role watches: RESTRICT refuses (2BP01), CASCADE removes the watch."""
    srv = ctx.server()
    ns = ctx.namespace()
    table = _watched_table(ctx, srv, ns, "one")
    role = ("kw_srv_owner_" + ctx.base.replace("-", "_"))[:63]
    r = pgsql.Identifier(role)
    sql(pgsql.SQL("CREATE ROLE {}").format(r))
    try:
        sql(pgsql.SQL("GRANT USAGE ON FOREIGN DATA WRAPPER kwatch TO {}").format(r))
        sql(pgsql.SQL("ALTER SERVER {} OWNER TO {}").format(pgsql.Identifier(srv), r))
        e = error(pgsql.SQL("DROP OWNED BY {}").format(r))
        assert e.pgcode == "2BP01", e.pgerror
        assert "watch of configmaps on server %s" % srv in e.diag.message_detail
        assert sql_one("SELECT count(*) FROM kwatch.registrations WHERE server = %s", (srv,)) == 1
        sql(pgsql.SQL("DROP OWNED BY {} CASCADE").format(r))
        assert sql_one("SELECT count(*) FROM pg_foreign_server WHERE srvname = %s", (srv,)) == 0
        assert sql_one("SELECT count(*) FROM kwatch.registrations WHERE server = %s", (srv,)) == 0
        assert _rows(table, srv) == 0
    finally:
        sql(pgsql.SQL("DROP OWNED BY {} CASCADE; DROP ROLE {}").format(r, r))


def test_a_missing_kwatch_database_is_logged_once_a_minute_and_then_served(instances):  # noqa: F811
    """Issue 33, item 4: kwatch.database naming no database: the worker's
    FATAL names the setting and says what to do, once a minute (not at
    every 5 s restart); a CREATE DATABASE of it wakes the waiting worker
    at its commit, which then serves it at once, without a restart of
    PostgreSQL."""
    pg = instances.plain("missing-db", "kwatch.database = 'kw_app'")
    time.sleep(16)       # three of the postmaster's 5 s restarts
    log = pg.log_since()
    fatals = [l for l in log.splitlines() if 'database "kw_app" does not exist' in l]
    assert len(fatals) == 1, log[-3000:]
    assert 'kwatch worker connecting to kwatch.database "kw_app"' in log, log[-3000:]
    assert "CREATE DATABASE kw_app" in log and "tries again in a minute" in log, log[-3000:]
    sql("CREATE DATABASE kw_app", conn=pg.conn)
    app = psycopg2.connect(**pg.dsn(dbname="kw_app"))
    app.autocommit = True
    try:
        sql("CREATE EXTENSION kwatch", conn=app)
        assert wait_until(lambda: sql_one("SELECT kwatch.worker_pid()", conn=app), 20,
                          "the worker serving kw_app")
    finally:
        app.close()


def test_drop_server_cascade_is_delayed_not_refused_by_a_table_owners_trigger(ctx):
    """Issue 33, item 2 (review): a DELETE trigger of a mirror table's owner
    that raises cannot refuse DROP SERVER ... CASCADE: the watch goes, the
    rows stay with a WARNING naming the statement that deletes them."""
    srv = ctx.server()
    ns = ctx.namespace()
    table = _watched_table(ctx, srv, ns, "kept")
    t = pgsql.Identifier(table)
    f = pgsql.Identifier(table + "_refuse")
    sql(pgsql.SQL("CREATE FUNCTION public.{}() RETURNS trigger LANGUAGE plpgsql AS "
                  "$$BEGIN RAISE EXCEPTION 'no deletes here'; END$$").format(f))
    try:
        sql(pgsql.SQL("CREATE TRIGGER refuse BEFORE DELETE ON k8s.{} FOR EACH ROW EXECUTE FUNCTION public.{}()")
            .format(t, f))
        conn = conftest.PG.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(pgsql.SQL("DROP SERVER {} CASCADE").format(pgsql.Identifier(srv)))
            warnings = [n for n in conn.notices if "WARNING" in n]
        finally:
            conn.close()
        assert any("the rows of cluster %s stay in k8s.%s" % (srv, table) in w and "no deletes here" in w
                   for w in warnings), warnings
        assert sql_one("SELECT count(*) FROM kwatch.registrations WHERE server = %s", (srv,)) == 0
        assert _rows(table, srv) >= 1
        sql(pgsql.SQL("DROP TRIGGER refuse ON k8s.{}").format(t))
        sql(pgsql.SQL("DELETE FROM k8s.{} WHERE cluster = %s").format(t), (srv,))
    finally:
        sql(pgsql.SQL("DROP FUNCTION IF EXISTS public.{}() CASCADE").format(f))


def test_a_server_name_held_by_another_roles_watches_is_refused(ctx):
    """Issue 33, item 2 (review): registrations whose server was dropped
    before 0.7.0 (simulated by renaming the registration's server) keep
    their name: another role may not create a server of that name (42710),
    which would take the watches over, nor rename one to it."""
    srv = ctx.server()
    ns = ctx.namespace()
    _watched_table(ctx, srv, ns, "held")
    ghost = srv + "-gone"
    role = ("kw_ghost_" + ctx.base.replace("-", "_"))[:63]
    r = pgsql.Identifier(role)
    sql("UPDATE kwatch.registrations SET server = %s WHERE server = %s", (ghost, srv))
    sql(pgsql.SQL("CREATE ROLE {}").format(r))
    try:
        sql(pgsql.SQL("GRANT USAGE ON FOREIGN DATA WRAPPER kwatch TO {}").format(r))
        conn = conftest.PG.connect(autocommit=False)
        try:
            sql(pgsql.SQL("SET ROLE {}").format(r), conn=conn)
            e = error(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch OPTIONS (api_server 'https://127.0.0.1:1')")
                      .format(pgsql.Identifier(ghost)), conn=conn)
            assert e.pgcode == "42710", e.pgerror
            assert "held by the watches of other roles" in e.diag.message_primary
            conn.rollback()
            sql(pgsql.SQL("SET ROLE {}").format(r), conn=conn)
            sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch OPTIONS (api_server 'https://127.0.0.1:1')")
                .format(pgsql.Identifier(ghost + "2")), conn=conn)
            e = error(pgsql.SQL("ALTER SERVER {} RENAME TO {}")
                      .format(pgsql.Identifier(ghost + "2"), pgsql.Identifier(ghost)), conn=conn)
            assert e.pgcode == "42710", e.pgerror
            conn.rollback()
        finally:
            conn.close()
    finally:
        sql("UPDATE kwatch.registrations SET server = %s WHERE server = %s", (srv, ghost))
        sql(pgsql.SQL("DROP OWNED BY {} CASCADE; DROP ROLE {}").format(r, r))
