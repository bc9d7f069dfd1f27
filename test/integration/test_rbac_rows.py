"""Rows that follow Kubernetes RBAC (issue 50): kwatch.enable_rbac_rows() on
a mirror of pods, on a second control plane with RBAC authorization.  Each
PostgreSQL role's user mapping presents a client certificate of its own
(signed by the plane's CA, groups in O=, as test/k8s/cluster.sh's header
says); each role reads exactly what `kubectl get pods` as that identity
lists, object by object: alice (a RoleBinding in namespaces a and b), bob (a
ClusterRoleBinding to a ClusterRole that lists pods), carol (through her group team-c, bound in c),
dave (no binding), and a role without a user mapping (nothing).  The owner
reads all; a RoleBinding created, then deleted, changes what alice reads
within the latency of the rolebindings mirror (measured, printed); the
kubectl.* view and the history table filter the same way; a notification
names no object; disable_rbac_rows() gives back every
row; with the API server stopped past kwatch.rbac_decision_max_age, a
restricted role reads nothing."""
import json
import os
import subprocess
import threading
import time

import psycopg2
import pytest
from psycopg2 import sql as pgsql

import conftest
from conftest import sql, sql_one, wait_until, wait_watching, watch
from test_faults_cluster import AltCluster

ROLES = ("alice", "bob", "carol", "dave", "nomap")


@pytest.fixture(scope="module")
def alt():
    c = AltCluster(conftest.TEST_DIR / "k8s-rbac")
    c.start()
    yield c
    if not conftest.KEEP:
        conftest.run(["bash", conftest.CLUSTER_SH, "stop", c.dir], check=False)


def k8s_tables():
    return {r[0] for r in sql("SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                              " WHERE n.nspname = 'k8s' AND c.relkind IN ('r', 'p')")}


def mint_cert(alt, user, group=None):
    """A client certificate of CN=user (O=group) signed by the plane's CA: (cert, key) PEM."""
    pki = os.path.join(str(alt.dir), "pki")
    out = os.path.join(conftest.TEST_DIR, "rbac-certs")
    os.makedirs(out, exist_ok=True)
    key, csr, crt = (os.path.join(out, user + ext) for ext in (".key", ".csr", ".crt"))
    subj = ("/O=%s" % group if group else "") + "/CN=%s" % user
    subprocess.run(["openssl", "req", "-new", "-nodes", "-newkey", "rsa:2048", "-keyout", key,
                    "-out", csr, "-subj", subj], check=True, capture_output=True)
    subprocess.run(["openssl", "x509", "-req", "-in", csr, "-CA", os.path.join(pki, "ca.crt"),
                    "-CAkey", os.path.join(pki, "ca.key"), "-CAcreateserial", "-out", crt,
                    "-days", "2"], check=True, capture_output=True)
    return open(crt).read(), open(key).read()


def as_identity(user):
    return {"alice": ["--as", "alice"], "bob": ["--as", "bob"],
            "carol": ["--as", "carol", "--as-group", "team-c"], "dave": ["--as", "dave"]}[user]


def kubectl_names(alt, user, namespaces):
    """(namespace, name) of the pods `kubectl get pods` as user lists in namespaces."""
    got = set()
    for ns in namespaces:
        if alt.kubectl("auth", "can-i", "list", "pods", "-n", ns, *as_identity(user),
                       check=False).strip() != "yes":
            continue
        items = json.loads(alt.kubectl("get", "pods", "-n", ns, "-o", "json", *as_identity(user)))["items"]
        got |= {(ns, i["metadata"]["name"]) for i in items}
    return got


def read_as(conn, role, relation, srv):
    with conn.cursor() as cur:
        cur.execute(pgsql.SQL("SET ROLE {}").format(pgsql.Identifier(role)))
        try:
            cur.execute(pgsql.SQL("SELECT namespace, name FROM {} WHERE cluster = %s").format(
                pgsql.SQL(relation)), (srv,))
            return set(cur.fetchall())
        finally:
            cur.execute("RESET ROLE")


def test_rows_follow_rbac(ctx, alt):
    before = k8s_tables()
    base = ctx.base[:40]
    nss = {k: "%s-%s" % (base, k) for k in "abcd"}
    extra = base + "-e"   # not among nss: the notification test's pod
    for ns in nss.values():
        alt.kubectl("create", "namespace", ns)
    pods = {"apiVersion": "v1", "kind": "List", "items": [
        conftest.pod_manifest("p%d" % i, {"i": str(i)}, ns)
        for ns in nss.values() for i in range(2)]}
    alt.kubectl("create", "-f", "-", input=json.dumps(pods))
    # the bootstrap ClusterRole view is aggregated by the controller manager,
    # which this plane does not run: a ClusterRole of its own
    lister = base + "-pod-lister"
    alt.kubectl("create", "clusterrole", lister, "--verb=get,list,watch", "--resource=pods")
    alt.kubectl("create", "rolebinding", "alice", "-n", nss["a"], "--clusterrole=" + lister, "--user=alice")
    alt.kubectl("create", "rolebinding", "alice", "-n", nss["b"], "--clusterrole=" + lister, "--user=alice")
    alt.kubectl("create", "clusterrolebinding", base + "-bob", "--clusterrole=" + lister, "--user=bob")
    alt.kubectl("create", "rolebinding", "team-c", "-n", nss["c"], "--clusterrole=" + lister, "--group=team-c")

    srv = ctx.base + "-r"
    ident = pgsql.Identifier(srv)
    sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch "
                  "OPTIONS (api_server {}, certificate_authority {})")
        .format(ident, pgsql.Literal(alt.server), pgsql.Literal(alt.ca)))
    ctx.servers.append(srv)
    sql(pgsql.SQL("CREATE USER MAPPING FOR CURRENT_USER SERVER {} OPTIONS (token {})")
        .format(ident, pgsql.Literal(alt.token)))
    roles = {r: (base + "_" + r)[:63] for r in ROLES}
    conn = conftest.PG.connect()
    try:
        tname = ("rb_" + base).replace("-", "_")[:50]
        table = watch("pods", srv, table_name=tname, history=True)
        wait_watching(srv, "pods")
        for r, role in roles.items():
            rid = pgsql.Identifier(role)
            sql(pgsql.SQL("CREATE ROLE {} NOLOGIN").format(rid))
            sql(pgsql.SQL("GRANT SELECT ON {} TO {}").format(pgsql.SQL(table), rid))
            sql(pgsql.SQL("GRANT USAGE ON SCHEMA k8s, kubectl TO {}").format(rid))
            sql(pgsql.SQL("GRANT USAGE ON FOREIGN SERVER {} TO {}").format(ident, rid))
            if r == "nomap":
                continue
            cert, key = mint_cert(alt, r, "team-c" if r == "carol" else None)
            sql(pgsql.SQL("CREATE USER MAPPING FOR {} SERVER {} OPTIONS "
                          "(client_certificate_data {}, client_key_data {})")
                .format(rid, ident, pgsql.Literal(cert), pgsql.Literal(key)))
        view = sql_one("SELECT to_regclass(%s)::text", ("kubectl." + tname,))
        hist = sql_one("SELECT history_oid::regclass::text FROM kwatch.history_tables WHERE table_name = %s",
                       (tname,))
        assert view and hist, (view, hist)
        for role in roles.values():
            sql(pgsql.SQL("GRANT SELECT ON {}, {} TO {}").format(pgsql.SQL(view), pgsql.SQL(hist),
                                                                pgsql.Identifier(role)))

        everything = {(ns, "p%d" % i) for ns in nss.values() for i in range(2)}
        mine = set(nss.values())
        wait_until(lambda: {x for x in sql("SELECT namespace, name FROM %s WHERE cluster = %%s"
                                           % table, (srv,)) if x[0] in mine} == everything, 60,
                   "the pods mirrored")
        # before the opt-in every role with SELECT reads every row (today's behaviour)
        assert {x for x in read_as(conn, roles["dave"], table, srv) if x[0] in mine} == everything

        sql("SELECT kwatch.enable_rbac_rows(%s)", (table,))
        sql("SELECT kwatch.enable_rbac_rows(%s)", (table,))   # idempotent
        for res in ("roles", "rolebindings", "clusterroles", "clusterrolebindings"):
            wait_watching(srv, res + ".rbac.authorization.k8s.io")
        assert sql_one("SELECT count(*) FROM pg_policy WHERE polrelid = %s::regclass", (table,)) == 1
        # each policy names its own table (a dump restores it by name, never by OID)
        for rel in (table, hist):
            qual = sql_one("SELECT pg_get_expr(polqual, polrelid) FROM pg_policy"
                           " WHERE polrelid = %s::regclass AND polname = 'kwatch_rbac'", (rel,))
            assert "kwatch.rbac_visible('%s'::regclass, cluster, namespace)" % rel in qual, qual

        # each role reads what kubectl as its identity lists, object by object
        for r in ("alice", "bob", "carol", "dave"):
            want = kubectl_names(alt, r, nss.values())
            got = {x for x in read_as(conn, roles[r], table, srv) if x[0] in mine}
            assert got == want, (r, got, want)
            assert {x for x in read_as(conn, roles[r], view, srv) if x[0] in mine} == want, r
            assert {x for x in read_as(conn, roles[r], hist, srv) if x[0] in mine} == want, r
        assert kubectl_names(alt, "alice", nss.values()) == {(nss[k], "p%d" % i) for k in "ab" for i in range(2)}
        assert kubectl_names(alt, "bob", nss.values()) == everything
        assert kubectl_names(alt, "carol", nss.values()) == {(nss["c"], "p%d" % i) for i in range(2)}
        # a label selector keeps the labels GIN index under the policy
        # (matches_labels is LEAKPROOF), a lookup by name its btree index
        with conn.cursor() as cur:
            cur.execute(pgsql.SQL("SET ROLE {}").format(pgsql.Identifier(roles["alice"])))
            cur.execute("SET enable_seqscan = off")
            cur.execute("EXPLAIN SELECT name FROM %s WHERE kwatch.matches_labels(labels, 'i=1')" % table)
            plan = "\n".join(r[0] for r in cur.fetchall())
            assert "Bitmap Index Scan" in plan and "labels" in plan, plan
            cur.execute("EXPLAIN SELECT name FROM %s WHERE namespace = %%s AND name = 'p1'" % table,
                        (nss["a"],))
            plan = "\n".join(r[0] for r in cur.fetchall())
            assert "Index" in plan, plan
            cur.execute("SELECT namespace, name FROM %s WHERE cluster = %%s"
                        " AND kwatch.matches_labels(labels, 'i=1')" % table, (srv,))
            assert {x for x in cur.fetchall() if x[0] in mine} == {(nss[k], "p1") for k in "ab"}
            cur.execute("RESET enable_seqscan")
            cur.execute("RESET ROLE")
        # as_of() reads history as the owner, and applies the caller's decision;
        # only the owner turns the decision off
        with conn.cursor() as cur:
            cur.execute(pgsql.SQL("SET ROLE {}").format(pgsql.Identifier(roles["alice"])))
            with pytest.raises(psycopg2.Error) as e:
                cur.execute("SELECT kwatch.disable_rbac_rows(%s)", (table,))
            assert e.value.pgcode == "42501", e.value.pgerror
            cur.execute("SELECT namespace, name FROM kwatch.as_of(%s, now()) WHERE cluster = %s",
                        (table, srv))
            assert {x for x in cur.fetchall() if x[0] in mine} == \
                {(nss[k], "p%d" % i) for k in "ab" for i in range(2)}
            cur.execute("RESET ROLE")
        del conn.notices[:]
        assert read_as(conn, roles["nomap"], table, srv) == set()
        # one WARNING for the server, naming no namespace
        warnings = [n for n in conn.notices if "WARNING" in n]
        assert len(warnings) == 1 and "hidden from role" in warnings[0], conn.notices
        assert not any(ns in warnings[0] for ns in nss.values()), warnings
        assert read_as(conn, roles["dave"], table, srv) == set()
        # the owner (here a superuser) reads every row
        assert {x for x in sql("SELECT namespace, name FROM %s WHERE cluster = %%s" % table, (srv,))} >= everything

        # kwatch.events, for a role granted it, shows the events of the rows it may read
        sql(pgsql.SQL("GRANT SELECT ON kwatch.events TO {}").format(pgsql.Identifier(roles["alice"])))
        q = ("SELECT DISTINCT namespace FROM kwatch.events WHERE cluster = %s AND table_name = %s")
        assert {n for (n,) in sql(q, (srv, tname)) if n in mine} == mine   # the owner: all
        with conn.cursor() as cur:
            cur.execute(pgsql.SQL("SET ROLE {}").format(pgsql.Identifier(roles["alice"])))
            cur.execute(q, (srv, tname))
            assert {n for (n,) in cur.fetchall() if n in mine} == {nss["a"], nss["b"]}
            cur.execute("RESET ROLE")

        # anyone may LISTEN: a notification of such a table names no object
        channel = sql_one("SELECT channel FROM kwatch.watches WHERE server = %s AND table_name = %s",
                          (srv, table))
        lst = ctx.listener(channel)
        alt.kubectl("create", "namespace", extra)
        alt.kubectl("create", "-f", "-", input=json.dumps(conftest.pod_manifest("secret-name", {}, extra)))
        payload = lst.wait_for(type="ADDED")
        assert set(payload) <= {"seq", "type"}, payload

        # a RoleBinding created, then deleted: alice's reads follow within the
        # mirror's latency (a decision age far longer, so the RBAC stamp does it)
        with conn.cursor() as cur:
            cur.execute("SET kwatch.rbac_decision_max_age = '1h'")
        d_rows = {(nss["d"], "p%d" % i) for i in range(2)}
        t0 = time.monotonic()
        alt.kubectl("create", "rolebinding", "alice", "-n", nss["d"], "--clusterrole=" + lister, "--user=alice")
        wait_until(lambda: d_rows <= read_as(conn, roles["alice"], table, srv), 30, "alice reads d")
        granted = time.monotonic() - t0
        t0 = time.monotonic()
        alt.kubectl("delete", "rolebinding", "alice", "-n", nss["d"])
        wait_until(lambda: not (d_rows & read_as(conn, roles["alice"], table, srv)), 30,
                   "alice no longer reads d")
        revoked = time.monotonic() - t0
        print("rbac rows: a RoleBinding created shows in alice's reads after %.2f s, "
              "deleted: %.2f s" % (granted, revoked))
        assert granted < 10 and revoked < 10, (granted, revoked)

        # no USAGE on the server (as a live table's read needs it): nothing
        sql(pgsql.SQL("REVOKE USAGE ON FOREIGN SERVER {} FROM {}").format(ident, pgsql.Identifier(roles["bob"])))
        assert not {x for x in read_as(conn, roles["bob"], table, srv) if x[0] in mine}
        sql(pgsql.SQL("GRANT USAGE ON FOREIGN SERVER {} TO {}").format(ident, pgsql.Identifier(roles["bob"])))

        # the API server down past the bound: nothing (fail closed), then back
        with conn.cursor() as cur:
            cur.execute("SET kwatch.rbac_decision_max_age = '1s'")
        assert {x for x in read_as(conn, roles["bob"], table, srv) if x[0] in mine} == everything
        down = threading.Thread(target=conftest.run, args=(
            ["bash", conftest.CLUSTER_SH, "restart-apiserver", alt.dir],),
            kwargs={"timeout": 200, "env": dict(os.environ, KWATCH_APISERVER_DOWN_S="6", **alt.ENV)})
        down.start()
        try:
            wait_until(lambda: not read_as(conn, roles["bob"], table, srv), 30,
                       "bob reads nothing while the API server is down")
            assert {x for x in sql("SELECT namespace, name FROM %s WHERE cluster = %%s" % table, (srv,))
                    if x[0] in mine} == everything   # the owner still reads all
        finally:
            down.join()
        wait_until(lambda: {x for x in read_as(conn, roles["bob"], table, srv) if x[0] in mine}
                   == everything, 30, "bob reads all again")

        # history turned on after the opt-in: the history table made then has
        # the policy too (its versions are the same rows)
        alt.kubectl("create", "configmap", "cm-secret", "-n", nss["d"], "--from-literal=k=v")
        cms = watch("configmaps", srv, table_name=tname[:44] + "_cm")
        wait_watching(srv, "configmaps")
        sql("SELECT kwatch.enable_rbac_rows(%s)", (cms,))
        cms_hist = sql_one("SELECT kwatch.history(%s)::text", (cms,))
        sql(pgsql.SQL("GRANT SELECT ON {}, {} TO {}").format(pgsql.SQL(cms), pgsql.SQL(cms_hist),
                                                            pgsql.Identifier(roles["dave"])))
        wait_until(lambda: (nss["d"], "cm-secret") in set(sql(
            "SELECT namespace, name FROM %s WHERE cluster = %%s" % cms_hist, (srv,))), 30,
            "the configmap's first version")
        assert sql_one("SELECT pg_get_expr(polqual, polrelid) FROM pg_policy WHERE polrelid = %s::regclass"
                       " AND polname = 'kwatch_rbac'", (cms_hist,)) == \
            "kwatch.rbac_visible('%s'::regclass, cluster, namespace)" % cms_hist
        assert not {x for x in read_as(conn, roles["dave"], cms_hist, srv) if x[0] in mine}

        # disabled: today's behaviour again
        sql("SELECT kwatch.disable_rbac_rows(%s)", (table,))
        sql("SELECT kwatch.disable_rbac_rows(%s)", (table,))
        assert {x for x in read_as(conn, roles["dave"], table, srv) if x[0] in mine} == everything
        assert sql_one("SELECT relrowsecurity FROM pg_class WHERE oid = %s::regclass", (table,)) is False

        # only a server that writes the table decides: its watches gone (DROP
        # SERVER ... CASCADE), the history rows stay, and a new server of the
        # rows' name, dave's (a role with USAGE on the wrapper makes one that
        # points at an API server of its own; here the plane, with an admin
        # token in dave's own mapping: every review allowed), decides nothing
        sql("SELECT kwatch.enable_rbac_rows(%s)", (table,))
        dave = pgsql.Identifier(roles["dave"])
        assert not {x for x in read_as(conn, roles["dave"], hist, srv) if x[0] in mine}
        before_drop = sql_one("SELECT clock_timestamp()")
        sql(pgsql.SQL("DROP SERVER {} CASCADE").format(ident))
        assert {x for x in sql("SELECT namespace, name FROM %s WHERE cluster = %%s" % hist, (srv,))
                if x[0] in mine} == everything
        sql(pgsql.SQL("GRANT USAGE ON FOREIGN DATA WRAPPER kwatch TO {}").format(dave))
        sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch "
                      "OPTIONS (api_server {}, certificate_authority {})")
            .format(ident, pgsql.Literal(alt.server), pgsql.Literal(alt.ca)))
        sql(pgsql.SQL("ALTER SERVER {} OWNER TO {}").format(ident, dave))
        sql(pgsql.SQL("CREATE USER MAPPING FOR {} SERVER {} OPTIONS (token {})")
            .format(dave, ident, pgsql.Literal(alt.token)))
        with conn.cursor() as cur:
            cur.execute(pgsql.SQL("SET ROLE {}").format(dave))
            cur.execute("SELECT kwatch.rbac_visible(%s, %s, %s)", (table, srv, nss["a"]))
            assert cur.fetchone()[0] is False
            cur.execute("SELECT namespace, name FROM kwatch.as_of(%s, %s) WHERE cluster = %s",
                        (table, before_drop, srv))
            assert not {x for x in cur.fetchall() if x[0] in mine}
            cur.execute("RESET ROLE")
        assert {x for x in sql("SELECT namespace, name FROM kwatch.as_of(%s, %s) WHERE cluster = %s",
                               (table, before_drop, srv)) if x[0] in mine} == everything
        assert not {x for x in read_as(conn, roles["dave"], hist, srv) if x[0] in mine}
    finally:
        conn.close()
        ctx.cleanup()
        ctx.servers = []
        ctx.tables += sorted(k8s_tables() - before)
        for t in ctx.tables:
            sql(pgsql.SQL("DROP TABLE IF EXISTS k8s.{} CASCADE").format(pgsql.Identifier(t)))
        ctx.tables = []
        for role in roles.values():
            if sql_one("SELECT count(*) FROM pg_roles WHERE rolname = %s", (role,)):
                sql(pgsql.SQL("DROP OWNED BY {0}; DROP ROLE {0}").format(pgsql.Identifier(role)))
        alt.kubectl("delete", "clusterrolebinding", base + "-bob", "--ignore-not-found", check=False)
        alt.kubectl("delete", "clusterrole", lister, "--ignore-not-found", check=False)
        alt.kubectl("delete", "namespace", *nss.values(), extra, "--wait=false", check=False)


def test_owner_only(ctx):
    """enable_rbac_rows() of a table the caller does not own: 42501; of a
    relation that is no mirror table: 42P01."""
    with pytest.raises(psycopg2.Error) as e:
        sql("SELECT kwatch.enable_rbac_rows('pg_catalog.pg_class')")
    assert e.value.pgcode == "42P01", e.value.pgerror
