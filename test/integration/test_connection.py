"""Connection settings (src/cluster/connection.c): a server + user mapping +
kubeconfig resolved once per process and cached, the way postgres_fdw
caches connections, and dropped when the catalog or the kubeconfig file
changes -- in a backend's live-table scans and in the worker's watches,
which take the new settings without a restart and without a relist."""
import os

import psycopg2
from psycopg2 import sql as pgsql

import conftest
from conftest import (assert_table_matches_server, kubectl, sql, wait_status, wait_watching,
                      watch, watch_status)


def live_table(ctx, srv, ns):
    """A live table of ConfigMaps in namespace ns on server srv; its name."""
    name = "live_cm_" + srv[-14:].replace("-", "_")
    sql(pgsql.SQL("CREATE FOREIGN TABLE {} (name text) SERVER {} OPTIONS (resource 'configmaps',"
                  " namespace {})").format(pgsql.Identifier(name), pgsql.Identifier(srv),
                                            pgsql.Literal(ns)))
    return name  # dropped with the server (ctx's cleanup: DROP SERVER ... CASCADE)


def scan(table):
    """The names a scan of live table `table` returns (sorted), or the error's SQLSTATE."""
    try:
        return sorted(r[0] for r in sql(pgsql.SQL("SELECT name FROM {}").format(pgsql.Identifier(table))))
    except psycopg2.Error as e:
        return e.pgcode


def set_token(srv, token):
    sql(pgsql.SQL("ALTER USER MAPPING FOR CURRENT_USER SERVER {} OPTIONS (SET token {})")
        .format(pgsql.Identifier(srv), pgsql.Literal(token)))


def configmap(ns, name):
    kubectl("create", "configmap", name, "-n", ns, "--from-literal=v=1")


def test_backend_sees_user_mapping_and_kubeconfig_changes(ctx):
    """In one session (the suite's shared connection), a live table follows
    ALTER USER MAPPING at its next scan, and a kubeconfig file replaced on
    disk (by rename, as editors and kubectl do) at its next scan: the cache
    never serves settings the catalog or the file no longer say."""
    ns = ctx.namespace()
    configmap(ns, "one")
    srv = ctx.server("-um", auth="token")
    t = live_table(ctx, srv, ns)
    assert "one" in scan(t)
    set_token(srv, "not-a-token")
    assert scan(t) == "28000"
    set_token(srv, conftest.CLUSTER.token)
    assert "one" in scan(t)

    # a kubeconfig server: rewrite its file with a refused token, then restore it
    kc = conftest.TEST_DIR / ("kc-%s.yaml" % ctx.base[-12:])
    good = open(conftest.CLUSTER.kubeconfig).read()
    kc.write_text(good)
    kc.chmod(0o644)
    ksrv = ctx.server("-kc", kubeconfig=str(kc))
    sql(pgsql.SQL("CREATE USER MAPPING FOR CURRENT_USER SERVER {}").format(pgsql.Identifier(ksrv)))
    kt = live_table(ctx, ksrv, ns)
    assert "one" in scan(kt)
    tmp = kc.with_suffix(".new")
    tmp.write_text(good.replace(conftest.CLUSTER.token, "refused-token"))
    assert tmp.read_text() != good, "the kubeconfig carries the cluster's token"
    tmp.chmod(0o644)
    os.replace(tmp, kc)
    assert scan(kt) == "28000"
    tmp.write_text(good)
    tmp.chmod(0o644)
    os.replace(tmp, kc)
    assert "one" in scan(kt)


def test_worker_follows_alter_user_mapping(ctx):
    """A running watch takes its role's new user mapping at once: a refused
    token fails it (401, 28000 in last_error) within seconds, not at its
    next reconnect; the good one brings it back to watching, resuming from
    its resourceVersion (no relist), equal to the server, with the changes
    made meanwhile.  An ALTER that changes nothing costs no reconnect."""
    ns = ctx.namespace()
    configmap(ns, "a")
    srv = ctx.server("-w", auth="token")
    watch("configmaps", srv, namespace=ns)
    wait_watching(srv, "configmaps")
    before = watch_status(srv, "configmaps")

    # the same options again: settings equal, the stream goes on
    set_token(srv, conftest.CLUSTER.token)
    configmap(ns, "b")
    assert_table_matches_server("k8s.configmaps", srv, ["configmaps", "-n", ns])
    st = watch_status(srv, "configmaps")
    assert st["watch_calls"] == before["watch_calls"], (before, st)

    set_token(srv, "not-a-token")
    st = wait_status(srv, "configmaps", lambda s: s["state"] == "failed", timeout=20,
                     msg="the watch failed with the refused token")
    assert "401" in (st["last_error"] or "") or "Unauthorized" in (st["last_error"] or ""), st
    configmap(ns, "c")
    set_token(srv, conftest.CLUSTER.token)
    wait_watching(srv, "configmaps", timeout=30)
    assert_table_matches_server("k8s.configmaps", srv, ["configmaps", "-n", ns])
    st = watch_status(srv, "configmaps")
    assert st["relists"] == before["relists"] and st["list_calls"] == before["list_calls"], (before, st)
