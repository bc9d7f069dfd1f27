"""PostgreSQL restarts: resume from the checkpoint, or relist after a 410."""
import os
import shutil

import conftest
from conftest import (assert_table_matches_server, create_pods, kubectl, kubectl_json, row_uids,
                      sql_one, wait_until, wait_watching, watch)


def checkpoint(server, resource="pods"):
    return sql_one("SELECT resource_version FROM kwatch.registrations"
                   " WHERE server = %s AND resource = %s", (server, resource))


def test_relist_after_410_removes_objects_deleted_in_the_gap(ctx):
    pg, cluster = conftest.PG, conftest.CLUSTER
    ns = ctx.namespace()
    # A kubeconfig of this server only: made unreadable while PostgreSQL
    # starts, so that the worker cannot relist before our listener listens
    # (a notification sent while nobody listens is lost).
    kc = conftest.TEST_DIR / ("kubeconfig-" + ctx.base)
    shutil.copyfile(cluster.kubeconfig, kc)
    os.chmod(kc, 0o644)
    srv = ctx.server(kubeconfig=str(kc))
    pods = ["pods", "-n", ns]
    uids = create_pods(ns, {"keep-1": {}, "keep-2": {}, "gone-1": {}, "gone-2": {}})
    table = watch("pods", srv, namespace=ns)
    wait_watching(srv, "pods")
    assert_table_matches_server(table, srv, pods)
    old_rv = wait_until(lambda: checkpoint(srv), 10, "a checkpoint")

    pg.stop()
    try:
        kubectl("delete", "pod", "gone-1", "gone-2", "-n", ns, "--wait=false")
        new = create_pods(ns, {"new-1": {}, "new-2": {}})
        kubectl("label", "pod", "keep-1", "-n", ns, "changed=yes")
        cluster.compact()
        # a fresh watch cache: the old resourceVersion is really gone
        cluster.restart_apiserver()
        os.chmod(kc, 0o600)  # root's: unreadable for the postgres user
        log_from = pg.log_size()
        pg.start()
    finally:
        if not pg.running():
            os.chmod(kc, 0o644)
            pg.start()
    lst = ctx.listener("kwatch_pods", table)
    os.chmod(kc, 0o644)

    assert_table_matches_server(table, srv, pods, timeout=60)
    assert row_uids(table, srv) == {uids["keep-1"], uids["keep-2"], new["new-1"], new["new-2"]}
    gone = {uids["gone-1"], uids["gone-2"]}
    wait_until(lambda: {p["uid"] for p in lst.payloads(cluster=srv, type="DELETED")} == gone,
               20, "DELETED notifications for the pods deleted while PostgreSQL was down")
    wait_until(lambda: {p["uid"] for p in lst.payloads(cluster=srv, type="ADDED")}
               == {new["new-1"], new["new-2"]},
               20, "ADDED notifications for the pods created while PostgreSQL was down")
    keep1 = kubectl_json("get", "pod", "keep-1", "-n", ns)["metadata"]["resourceVersion"]
    assert [p["resource_version"] for p in lst.payloads(cluster=srv, type="MODIFIED",
                                                         uid=uids["keep-1"])] == [keep1]
    assert lst.payloads(cluster=srv, uid=uids["keep-2"]) == [], "keep-2 did not change"
    assert lst.visibility_problems(srv) == []

    st = wait_watching(srv, "pods")
    log = pg.log_since(log_from)
    assert st["list_calls"] >= 1 and st["relists"] >= 1, st
    assert st["http_errors"] >= 1, st
    mine = [line for line in log.splitlines() if srv in line]
    assert any("410" in line or "too old" in line for line in mine), \
        "no 410 logged for %s; its log lines: %s" % (srv, mine)
    assert int(checkpoint(srv)) > int(old_rv)


def test_restart_resumes_from_checkpoint_without_list(ctx):
    pg = conftest.PG
    ns = ctx.namespace()
    srv = ctx.server()
    pods = ["pods", "-n", ns]
    uids = create_pods(ns, {"a": {}})
    table = watch("pods", srv, namespace=ns)
    wait_watching(srv, "pods")
    assert_table_matches_server(table, srv, pods)
    # a fresh checkpoint, well inside the API server's watch cache window
    kubectl("label", "pod", "a", "-n", ns, "step=1")
    assert_table_matches_server(table, srv, pods)
    rv = kubectl_json("get", "pod", "a", "-n", ns)["metadata"]["resourceVersion"]
    wait_until(lambda: checkpoint(srv) == rv, 10, "the checkpoint to reach the last event's RV")

    log_from = pg.log_size()
    pg.restart()
    wait_until(lambda: sql_one("SELECT kwatch.worker_pid()"), 20, "the worker after restart")
    b = create_pods(ns, {"b": {}})["b"]
    kubectl("label", "pod", "a", "-n", ns, "step=2", "--overwrite")
    assert_table_matches_server(table, srv, pods)
    assert row_uids(table, srv) == {uids["a"], b}

    st = wait_watching(srv, "pods")
    assert st["list_calls"] == 0, ("resumed with a LIST", st, pg.log_since(log_from)[-3000:])
    assert st["watch_calls"] >= 1 and st["relists"] == 0, st
    assert st["added"] >= 1 and st["modified"] >= 1, st
