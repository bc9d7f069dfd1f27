"""Real-server faults (issue 3, part 2) with the real control plane:
kube-apiserver killed and restarted (its watch cache is lost: the re-watch
gets 410 and relists), etcd stopped for a while, a namespace deleted with its
pods, and, on a second control plane with RBAC and --watch-cache=false, a
resource denied by RBAC (403) and an etcd compaction seen by a watch served
straight from etcd.  (A CRD deleted while watched: test_crd.py.)"""
import json
import os
import time

import pytest
from psycopg2 import sql as pgsql

import conftest
from conftest import (assert_table_matches_server, configmaps_doc, create_pods, kubectl, row_uids,
                      sql, sql_one, wait_until, wait_watching, watch, watch_status)


def logged_410(log, server):
    mine = [line for line in log.splitlines() if '"%s"' % server in line]
    return any("410" in line or "too old" in line for line in mine)


def test_apiserver_killed_watch_cache_lost(ctx):
    cluster, pg = conftest.CLUSTER, conftest.PG
    ns, other = ctx.namespace(), ctx.namespace("-o")
    srv = ctx.server()
    cms = ["configmaps", "-n", ns]
    kubectl("apply", "-f", "-", input=configmaps_doc(ns, ["c0", "c1", "gone"]))
    table = watch("configmaps", srv, namespace=ns)
    wait_watching(srv, "configmaps")
    assert_table_matches_server(table, srv, cms)
    lst = ctx.listener("kwatch_configmaps", table)
    before = watch_status(srv, "configmaps")
    log_from = pg.log_size()
    # writes this watch does not see move etcd's revision past its
    # checkpoint: the restarted API server's new watch cache starts above it
    kubectl("apply", "-f", "-", input=configmaps_doc(other, ["x0", "x1", "x2"]))

    cluster.restart_apiserver()
    kubectl("delete", "configmap", "gone", "-n", ns)
    kubectl("apply", "-f", "-", input=configmaps_doc(ns, ["c1", "c2"], v="2"))
    assert_table_matches_server(table, srv, cms, timeout=60)
    st = wait_watching(srv, "configmaps", timeout=60)
    # the re-watch from the old resourceVersion was refused: 410, relist
    assert st["relists"] > before["relists"], (before, st)
    wait_until(lambda: logged_410(pg.log_since(log_from), srv), 10, "a 410 in the log")
    lst.wait_for(type="DELETED", cluster=srv, name="gone")
    lst.wait_for(type="ADDED", cluster=srv, name="c2")
    lst.wait_for(type="MODIFIED", cluster=srv, name="c1")
    assert lst.payloads(cluster=srv, name="c0") == [], "c0 did not change"
    assert lst.visibility_problems(srv) == []


def test_etcd_stopped_for_a_while(ctx):
    cluster = conftest.CLUSTER
    ns = ctx.namespace()
    srv = ctx.server()
    cms, pods = ["configmaps", "-n", ns], ["pods", "-n", ns]
    kubectl("apply", "-f", "-", input=configmaps_doc(ns, ["c0", "gone"]))
    create_pods(ns, {"p0": {}})
    table = watch("configmaps", srv, namespace=ns)
    pod_table = watch("pods", srv, namespace=ns)
    wait_watching(srv, "configmaps")
    wait_watching(srv, "pods")
    lst = ctx.listener("kwatch_configmaps", table)
    cluster._sh("stop-etcd")
    try:
        time.sleep(8)  # the outage: the API server answers errors or nothing
    finally:
        cluster._sh("start-etcd")
    wait_until(lambda: kubectl("get", "--raw", "/readyz", check=False).strip() == "ok", 60,
               "the API server to be ready again")
    kubectl("delete", "configmap", "gone", "-n", ns)
    kubectl("apply", "-f", "-", input=configmaps_doc(ns, ["c0", "c1"], v="2"))
    create_pods(ns, {"p1": {}})
    assert_table_matches_server(table, srv, cms, timeout=90)
    assert_table_matches_server(pod_table, srv, pods, timeout=90)
    wait_watching(srv, "configmaps", timeout=60)
    wait_watching(srv, "pods", timeout=60)
    lst.wait_for(type="DELETED", cluster=srv, name="gone")
    lst.wait_for(type="ADDED", cluster=srv, name="c1")
    assert lst.visibility_problems(srv) == []


def test_namespace_deleted_with_its_pods(ctx):
    ns = ctx.namespace()
    srv = ctx.server()
    every = ctx.server("-all")  # cluster-wide, selecting this test's pods
    sel = "kwns=" + ctx.base
    uids = create_pods(ns, {"p%d" % i: {"kwns": ctx.base} for i in range(5)})
    table = watch("pods", srv, namespace=ns)
    watch("pods", every, label_selector=sel)
    wait_watching(srv, "pods")
    wait_watching(every, "pods")
    assert_table_matches_server(table, srv, ["pods", "-n", ns])
    assert_table_matches_server(table, every, ["pods", "-A", "-l", sel])
    lst = ctx.listener("kwatch_pods", table)

    kubectl("delete", "namespace", ns, "--timeout=120s")
    for server in (srv, every):
        wait_until(lambda: row_uids(table, server) == set(), 60, "the rows of " + server + " to go")
        wait_until(lambda: {p["uid"] for p in lst.payloads(cluster=server, type="DELETED")}
                   == set(uids.values()), 20, "a DELETED per pod for " + server)
    assert lst.visibility_problems(srv) == [] and lst.visibility_problems(every) == []

    # the namespace comes back under the same name: the watches go on
    kubectl("create", "namespace", ns)
    again = create_pods(ns, {"p0": {"kwns": ctx.base}})
    assert again["p0"] != uids["p0"]
    assert_table_matches_server(table, srv, ["pods", "-n", ns])
    assert_table_matches_server(table, every, ["pods", "-A", "-l", sel])
    for server in (srv, every):
        st = wait_watching(server, "pods")
        assert st["objects"] == 1, st


# ------------------------------------------------------------------ RBAC, no watch cache

class AltCluster(conftest.Cluster):
    """A second control plane: RBAC authorization and --watch-cache=false
    (every watch is served from etcd), no controller manager."""

    ENV = {"KWATCH_K8S_AUTHZ": "RBAC", "KWATCH_APISERVER_ARGS": "--watch-cache=false",
           "KWATCH_K8S_NO_CM": "1"}

    def _sh(self, command, timeout=180):
        return conftest.run(["bash", conftest.CLUSTER_SH, command, self.dir], timeout=timeout,
                            env=dict(os.environ, **self.ENV))

    def kubectl(self, *args, input=None, check=True):
        env = dict(os.environ, KUBECONFIG=self.kubeconfig)
        return conftest.run([conftest.KUBECTL, *args], input=input, env=env, timeout=120,
                            check=check).stdout


@pytest.fixture(scope="module")
def alt():
    c = AltCluster(conftest.TEST_DIR / "k8s-rbac")
    c.start()
    yield c
    if not conftest.KEEP:
        conftest.run(["bash", conftest.CLUSTER_SH, "stop", c.dir], check=False)


def alt_server(ctx, alt, suffix, token):
    """A foreign server for the second control plane with a token user mapping."""
    name = ctx.base + suffix
    ident = pgsql.Identifier(name)
    sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch "
                  "OPTIONS (api_server {}, certificate_authority {})")
        .format(ident, pgsql.Literal(alt.server), pgsql.Literal(alt.ca)))
    sql(pgsql.SQL("CREATE USER MAPPING FOR CURRENT_USER SERVER {} OPTIONS (token {})")
        .format(ident, pgsql.Literal(token)))
    ctx.servers.append(name)
    return name


def alt_diff(alt, table, server, ns):
    items = json.loads(alt.kubectl("get", "configmaps", "-n", ns, "-o", "json"))["items"]
    want = {i["metadata"]["uid"]: i["metadata"]["resourceVersion"] for i in items}
    got = dict(sql("SELECT uid, resource_version FROM %s WHERE cluster = %%s" % table, (server,)))
    return None if want == got else (want, got)


def alt_converged(alt, table, server, ns, timeout=60):
    last = [None]

    def same():
        last[0] = alt_diff(alt, table, server, ns)
        return last[0] is None
    wait_until(same, timeout, "%s of %s to equal the server (diff %r)" % (table, server, last))


def grant(alt, ns):
    alt.kubectl("create", "role", "cm-reader", "-n", ns, "--verb=get,list,watch",
                "--resource=configmaps")
    alt.kubectl("create", "rolebinding", "cm-reader", "-n", ns, "--role=cm-reader",
                "--user=kwatch-user")


def test_forbidden_by_rbac_then_allowed(ctx, settings, alt):
    settings(watch_timeout="1s")  # re-watch often: each one is authorized anew
    ns, other = ctx.base[:50] + "-rbac", ctx.base[:50] + "-adm"
    for n in (ns, other):
        alt.kubectl("create", "namespace", n)
    alt.kubectl("apply", "-f", "-", input=configmaps_doc(ns, ["c0", "c1"]))
    grant(alt, ns)
    user = alt_server(ctx, alt, "-user", alt.env["KWATCH_K8S_USER_TOKEN"])
    admin = alt_server(ctx, alt, "-admin", alt.token)
    table = watch("configmaps", user, namespace=ns)
    watch("configmaps", admin, namespace=other)
    wait_watching(user, "configmaps")
    wait_watching(admin, "configmaps")
    alt_converged(alt, table, user, ns)
    rows = sql("SELECT uid, resource_version FROM %s WHERE cluster = %%s ORDER BY uid" % table, (user,))

    # access revoked: the watch fails with 403 and keeps the rows it has
    alt.kubectl("delete", "rolebinding", "cm-reader", "-n", ns)
    wait_until(lambda: watch_status(user, "configmaps")["state"] == "failed", 30, "a failed watch")
    st = watch_status(user, "configmaps")
    assert not st["healthy"] and "403" in st["last_error"], st
    alt.kubectl("apply", "-f", "-", input=configmaps_doc(ns, ["c1", "c2"], v="2"))
    alt.kubectl("apply", "-f", "-", input=configmaps_doc(other, ["o1"]))
    alt_converged(alt, table, admin, other)  # the other watch flows meanwhile
    assert sql("SELECT uid, resource_version FROM %s WHERE cluster = %%s ORDER BY uid" % table,
               (user,)) == rows, "rows changed while the watch was forbidden"

    # access granted again: the watch recovers by itself and catches up
    alt.kubectl("create", "rolebinding", "cm-reader", "-n", ns, "--role=cm-reader",
                "--user=kwatch-user")
    alt_converged(alt, table, user, ns, timeout=60)
    wait_watching(user, "configmaps", timeout=30)


def test_compaction_without_watch_cache(ctx, settings, alt):
    pg = conftest.PG
    settings(watch_timeout="2s")
    ns, other = ctx.base[:50] + "-cmp", ctx.base[:50] + "-oth"
    for n in (ns, other):
        alt.kubectl("create", "namespace", n)
    alt.kubectl("apply", "-f", "-", input=configmaps_doc(ns, ["c0", "gone"]))
    srv = alt_server(ctx, alt, "", alt.token)
    table = watch("configmaps", srv, namespace=ns)
    wait_watching(srv, "configmaps")
    alt_converged(alt, table, srv, ns)
    before = watch_status(srv, "configmaps")
    log_from = pg.log_size()
    # the checkpoint falls behind etcd's revision (no watch cache, no
    # bookmarks), then the history it points into is compacted: the next
    # WATCH, served by etcd, is refused with 410 and the watch relists
    for i in range(3):
        alt.kubectl("apply", "-f", "-", input=configmaps_doc(other, ["x%d" % i]))
    alt.compact()
    wait_until(lambda: watch_status(srv, "configmaps")["relists"] > before["relists"], 30,
               "a relist after the compaction")
    alt.kubectl("delete", "configmap", "gone", "-n", ns)
    alt.kubectl("apply", "-f", "-", input=configmaps_doc(ns, ["c1"]))
    alt_converged(alt, table, srv, ns)
    wait_watching(srv, "configmaps")
    assert logged_410(pg.log_since(log_from), srv), pg.log_since(log_from)[-3000:]


def can_i(alt, verb, ns):
    return alt.kubectl("auth", "can-i", verb, "configmaps", "-n", ns, "--as", "kwatch-user",
                       check=False).strip() == "yes"


def test_writes_are_authorized_as_the_roles_own_user(ctx, alt):
    """Under RBAC (issue 32): every write carries the mapping's token, so
    the cluster's RBAC decides for kwatch-user.  Forbidden: 42501 with the
    server's reason, from the dry run of an apply, a delete at once and a
    live table's INSERT; granted: the apply is sent; revoked between the
    dry run and the send: the apply fails with 42501, not retried."""
    import psycopg2
    ns = ctx.base[:50] + "-w"
    alt.kubectl("create", "namespace", ns)
    user = alt_server(ctx, alt, "-wuser", alt.env["KWATCH_K8S_USER_TOKEN"])
    cm = lambda name: json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": name, "namespace": ns}, "data": {"k": "v"}})

    def refused(query, params):
        with pytest.raises(psycopg2.Error) as e:
            sql(query, params)
        assert e.value.pgcode == "42501", e.value.pgerror
        assert "kwatch-user" in e.value.pgerror, e.value.pgerror   # the server's own reason
        return e.value
    refused("SELECT kwatch.apply(%s::jsonb, server => %s)", (cm("a"), user))
    refused("SELECT kwatch.delete('configmaps', 'a', namespace => %s, server => %s, at => 'now')", (ns, user))
    sql(pgsql.SQL("CREATE FOREIGN TABLE {} (namespace text, name text, object jsonb) SERVER {}"
                  " OPTIONS (resource 'configmaps', api_version 'v1', namespaced 'true', kind 'ConfigMap')")
        .format(pgsql.Identifier(user), pgsql.Identifier(user)))
    try:
        refused(pgsql.SQL("INSERT INTO {} (namespace, name, object) VALUES (%s, 'a', '{{}}')")
                .format(pgsql.Identifier(user)), (ns,))
    finally:
        sql(pgsql.SQL("DROP FOREIGN TABLE {}").format(pgsql.Identifier(user)))

    alt.kubectl("create", "role", "cm-writer", "-n", ns, "--verb=get,list,watch,create,patch,delete",
                "--resource=configmaps")
    alt.kubectl("create", "rolebinding", "cm-writer", "-n", ns, "--role=cm-writer", "--user=kwatch-user")
    wait_until(lambda: can_i(alt, "patch", ns), 30, "the grant in effect")
    aid = sql_one("SELECT (kwatch.apply(%s::jsonb, server => %s)).id", (cm("a"), user))
    assert sql("SELECT (kwatch.wait_apply(%s, '1 min')).state", (aid,)) == [("applied",)]

    conn = conftest.PG.connect(autocommit=False)
    try:
        aid = sql_one("SELECT (kwatch.apply(%s::jsonb, server => %s)).id", (cm("b"), user), conn=conn)
        alt.kubectl("delete", "rolebinding", "cm-writer", "-n", ns)
        wait_until(lambda: not can_i(alt, "patch", ns), 30, "the grant revoked")
        conn.commit()
    finally:
        conn.close()
    refused("SELECT kwatch.wait_apply(%s, '1 min')", (aid,))
    assert sql("SELECT state, sqlstate, attempts, http_status FROM kwatch.applies WHERE id = %s", (aid,)) \
        == [("failed", "42501", 1, 403)]
    assert alt.kubectl("get", "configmaps", "-n", ns, "-o", "name").split() == ["configmap/a"]
