"""kwatch.unwatch: the status row, the rows and (optionally) the table go."""
import conftest
from conftest import (assert_table_matches_server, create_pods, kubectl, row_uids, sql, sql_one,
                      wait_until, wait_watching, watch, watch_status)


def test_unwatch_stops_and_deletes_rows(ctx):
    ns = ctx.namespace()
    gone, stays = ctx.server("-gone"), ctx.server("-stays")
    pods = ["pods", "-n", ns]
    create_pods(ns, {"p1": {}, "p2": {}})
    for s in (gone, stays):
        watch("pods", s, namespace=ns)
    for s in (gone, stays):
        wait_watching(s, "pods")
        assert_table_matches_server("k8s.pods", s, pods)
    worker = sql_one("SELECT kwatch.worker_pid()")
    lst = ctx.listener("kwatch_pods")

    assert sql_one("SELECT kwatch.unwatch('pods', server => %s)", (gone,)) is True
    assert watch_status(gone, "pods") is None
    assert sql_one("SELECT count(*) FROM kwatch.registrations WHERE server = %s", (gone,)) == 0
    assert row_uids("k8s.pods", gone) == set()
    # the other server's rows of the shared table are untouched
    assert len(row_uids("k8s.pods", stays)) == 2
    # a second unwatch finds nothing
    assert sql_one("SELECT kwatch.unwatch('pods', server => %s)", (gone,)) is False

    # later changes reach the remaining watch only
    p3 = create_pods(ns, {"p3": {}})["p3"]
    kubectl("label", "pod", "p1", "-n", ns, "after=unwatch")
    lst.wait_for(cluster=stays, type="ADDED", uid=p3)
    assert_table_matches_server("k8s.pods", stays, pods)
    assert row_uids("k8s.pods", gone) == set()
    assert lst.payloads(cluster=gone) == []
    assert sql_one("SELECT kwatch.worker_pid()") == worker, "the worker restarted"
    assert wait_watching(stays, "pods")["database_errors"] == 0


def test_unwatch_drop_table(ctx):
    ns = ctx.namespace()
    one, two = ctx.server("-1"), ctx.server("-2")
    kubectl("create", "configmap", "cm1", "-n", ns, "--from-literal=k=v")
    for s in (one, two):
        assert watch("configmaps", s, namespace=ns) == "k8s.configmaps"
    for s in (one, two):
        wait_watching(s, "configmaps")
        assert_table_matches_server("k8s.configmaps", s, ["configmaps", "-n", ns])

    # another server still mirrors into the table: only this server's rows go
    assert sql_one("SELECT kwatch.unwatch('configmaps', server => %s, drop_table => true)",
                   (one,)) is True
    assert sql_one("SELECT to_regclass('k8s.configmaps')::text") == "k8s.configmaps"
    assert row_uids("k8s.configmaps", one) == set()
    assert row_uids("k8s.configmaps", two) != set()

    # the last one: the table is dropped
    assert sql_one("SELECT kwatch.unwatch('configmaps', server => %s, drop_table => true)",
                   (two,)) is True
    assert sql_one("SELECT to_regclass('k8s.configmaps')") is None
    assert watch_status(one, "configmaps") is None and watch_status(two, "configmaps") is None

    # the worker survives the drop and keeps serving other watches
    log_from = conftest.PG.log_size()
    kubectl("create", "configmap", "cm2", "-n", ns, "--from-literal=k=v")
    watch("pods", one, namespace=ns)
    wait_watching(one, "pods")
    p = create_pods(ns, {"p": {}})["p"]
    wait_until(lambda: row_uids("k8s.pods", one) == {p}, 20, "the pod row")
    errors = [line for line in conftest.PG.log_since(log_from).splitlines()
              if "ERROR" in line and "configmaps" in line]
    assert errors == []


def test_unwatch_then_watch_again(ctx):
    ns = ctx.namespace()
    srv = ctx.server()
    pods = ["pods", "-n", ns]
    create_pods(ns, {"p1": {"tier": "web"}, "p2": {"tier": "db"}})
    watch("pods", srv, namespace=ns)
    first = wait_watching(srv, "pods")
    assert_table_matches_server("k8s.pods", srv, pods)

    # in two transactions, back to back: the rows unwatch deleted must come back
    assert sql_one("SELECT kwatch.unwatch('pods', server => %s)", (srv,)) is True
    watch("pods", srv, namespace=ns)
    second = wait_watching(srv, "pods")
    assert second["id"] != first["id"]
    assert_table_matches_server("k8s.pods", srv, pods)
    p3 = create_pods(ns, {"p3": {"tier": "web"}})["p3"]
    wait_until(lambda: p3 in row_uids("k8s.pods", srv), 20, "the new pod")

    # in one transaction, with another selector: the table follows the new one
    conn = conftest.PG.connect(autocommit=False)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT kwatch.unwatch('pods', server => %s)", (srv,))
            cur.execute("SELECT kwatch.watch('pods', server => %s, namespace => %s,"
                        " label_selector => 'tier=web')", (srv, ns))
        conn.commit()
    finally:
        conn.close()
    third = wait_watching(srv, "pods")
    assert third["id"] != second["id"] and third["label_selector"] == "tier=web"
    assert_table_matches_server("k8s.pods", srv, pods + ["-l", "tier=web"])
    p4 = create_pods(ns, {"p4": {"tier": "web"}, "p5": {"tier": "db"}})
    wait_until(lambda: p4["p4"] in row_uids("k8s.pods", srv), 20, "the new web pod")
    assert_table_matches_server("k8s.pods", srv, pods + ["-l", "tier=web"])
    st = wait_watching(srv, "pods")
    assert st["objects"] == 3, st
