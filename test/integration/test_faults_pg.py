"""PostgreSQL-side faults (issue 3, part 3): a mirror table locked by LOCK or
a long ALTER TABLE (other watches keep flowing, this one catches up without
relisting), the worker killed mid-batch, PostgreSQL restarted during a relist
and during a burst of events, the extension dropped and re-created.
(A user column added to a mirror table: test_user_columns.py, and the
ALTER TABLE case here adds one while events wait for the table.)"""
import threading
import time

import pytest

import conftest
from conftest import (assert_table_matches_server, configmap_manifest, configmaps_doc, create_pods,
                      kubectl, row_uids, sql, sql_one, wait_until, wait_watching, watch,
                      watch_status, watched_namespace)
from converge_support import NotificationTracker, cluster_api


def apply_configmaps(ns, names, **data):
    kubectl("apply", "-f", "-", input=configmaps_doc(ns, names, **data))


def lock_errors(server, resource):
    st = watch_status(server, resource)
    return st if "lock timeout" in (st["last_error"] or "") else None


def checkpoint(server, resource):
    return sql_one("SELECT resource_version FROM kwatch.registrations"
                   " WHERE server = %s AND resource = %s", (server, resource))


@pytest.mark.parametrize("how", ["lock", "alter_table"])
def test_table_locked(ctx, how):
    """The watch keeps its batch while its table is locked, other watches flow."""
    ns = ctx.namespace()
    srv = ctx.server()
    cms, pods = ["configmaps", "-n", ns], ["pods", "-n", ns]
    apply_configmaps(ns, ["c0", "c1", "gone"])
    create_pods(ns, {"p0": {}})
    cm_table = watch("configmaps", srv, namespace=ns)
    pod_table = watch("pods", srv, namespace=ns)
    wait_watching(srv, "configmaps")
    wait_watching(srv, "pods")
    assert_table_matches_server(cm_table, srv, cms)
    assert_table_matches_server(pod_table, srv, pods)
    lst = ctx.listener("kwatch_configmaps", cm_table)
    before = watch_status(srv, "configmaps")
    old_uids = row_uids(cm_table, srv)

    locker = conftest.PG.connect(autocommit=False)
    try:
        with locker.cursor() as cur:
            if how == "lock":
                cur.execute("LOCK TABLE %s IN ACCESS EXCLUSIVE MODE" % cm_table)
            else:
                cur.execute("ALTER TABLE %s ADD COLUMN IF NOT EXISTS user_note text DEFAULT 'mine'"
                            % cm_table)
        apply_configmaps(ns, ["c1", "c2", "c3"], v="2")
        kubectl("delete", "configmap", "gone", "-n", ns)
        create_pods(ns, {"p1": {}})
        kubectl("label", "pod", "p0", "-n", ns, "during=lock")
        # the other watch flows while this table is locked
        assert_table_matches_server(pod_table, srv, pods)
        # the locked watch met lock_timeout and keeps its batch
        wait_until(lambda: lock_errors(srv, "configmaps"), 20, "a lock timeout on " + cm_table)
        # the kept batch is retried (each try waits lock_timeout = 2 s), still locked
        wait_until(lambda: watch_status(srv, "configmaps")["database_errors"] >= 2, 20,
                   "a retry of the kept batch")
        lst.poll(0.2)
        assert lst.payloads(cluster=srv) == [], "notified while the table was locked"
    finally:
        locker.commit()
        locker.close()

    assert_table_matches_server(cm_table, srv, cms)
    after = wait_watching(srv, "configmaps")
    # caught up from the kept batch: no relist, no LIST, nothing lost
    assert after["relists"] == before["relists"] and after["list_calls"] == before["list_calls"], \
        (before, after)
    new = row_uids(cm_table, srv) - old_uids
    assert len(new) == 2
    lst.wait_for(type="DELETED", cluster=srv, name="gone")
    wait_until(lambda: {p["uid"] for p in lst.payloads(cluster=srv, type="ADDED")} == new,
               20, "ADDED for c2 and c3")
    wait_until(lambda: {p["name"] for p in lst.payloads(cluster=srv, type="MODIFIED")} == {"c1"},
               20, "MODIFIED for c1")
    assert lst.visibility_problems(srv) == []
    if how == "alter_table":
        try:
            # the user column: kept on updated rows, defaulted on new ones
            assert {r[0] for r in sql("SELECT user_note FROM %s WHERE cluster = %%s" % cm_table,
                                      (srv,))} == {"mine"}
        finally:
            sql("ALTER TABLE %s DROP COLUMN IF EXISTS user_note" % cm_table)


def test_worker_killed_mid_batch(ctx):
    ns, srv, table, cms = watched_namespace(ctx, "configmaps",
                                            lambda ns: apply_configmaps(ns, ["c0", "gone"]))
    kubectl("label", "configmap", "c0", "-n", ns, "step=1")
    assert_table_matches_server(table, srv, cms)
    rv = conftest.kubectl_json("get", "configmap", "c0", "-n", ns)["metadata"]["resourceVersion"]
    wait_until(lambda: checkpoint(srv, "configmaps") == rv, 10, "the checkpoint")
    lst = ctx.listener("kwatch_configmaps", table)
    worker = sql_one("SELECT kwatch.worker_pid()")

    # a batch decoded and waiting for the locked table: the worker dies with it
    locker = conftest.PG.connect(autocommit=False)
    try:
        with locker.cursor() as cur:
            cur.execute("LOCK TABLE %s IN ACCESS EXCLUSIVE MODE" % table)
        apply_configmaps(ns, ["c1", "c2"])
        kubectl("label", "configmap", "c0", "-n", ns, "step=2", "--overwrite")
        kubectl("delete", "configmap", "gone", "-n", ns)
        wait_until(lambda: lock_errors(srv, "configmaps"), 20, "the batch to wait for the lock")
        sql("SELECT pg_terminate_backend(%s)", (worker,))
        wait_until(lambda: sql_one("SELECT kwatch.worker_pid()") != worker, 20, "the worker to exit")
        # nothing of the lost batch was committed: the checkpoint did not move
        assert checkpoint(srv, "configmaps") == rv
    finally:
        locker.commit()
        locker.close()

    # the postmaster starts a new worker (after 5 s); it resumes from the
    # checkpoint and gets the lost events again from the API server
    wait_until(lambda: sql_one("SELECT kwatch.worker_pid()") not in (None, worker), 30,
               "a new worker")
    assert_table_matches_server(table, srv, cms, timeout=40)
    st = wait_watching(srv, "configmaps")
    assert st["list_calls"] == 0 and st["relists"] == 0, ("relisted instead of resuming", st)
    wait_until(lambda: sorted(p["name"] for p in lst.payloads(cluster=srv)) == ["c0", "c1", "c2", "gone"],
               20, "one notification per change")
    assert lst.payloads(cluster=srv, name="gone")[0]["type"] == "DELETED"
    assert lst.visibility_problems(srv) == []


def test_postgres_restart_during_relist(ctx, settings):
    pg = conftest.PG
    settings(list_from_watch_cache="off", list_page_size=5)
    ns = ctx.namespace()
    srv = ctx.server()
    cms = ["configmaps", "-n", ns]
    apply_configmaps(ns, ["c%02d" % i for i in range(30)])
    # the LIST is staged page by page but its merge waits for the locked
    # table: PostgreSQL is restarted in the middle of the relist
    if sql_one("SELECT to_regclass('k8s.configmaps')") is None:
        sql("SELECT kwatch.create_mirror_table('configmaps', '', 'v1', 'configmaps')")
    locker = pg.connect(autocommit=False)
    try:
        with locker.cursor() as cur:
            cur.execute("LOCK TABLE k8s.configmaps IN ACCESS EXCLUSIVE MODE")
        table = watch("configmaps", srv, namespace=ns)
        wait_until(lambda: lock_errors(srv, "configmaps"), 30, "the relist to wait for the table")
        st = watch_status(srv, "configmaps")
        assert st["state"] != "watching", st
        assert checkpoint(srv, "configmaps") is None
        pg.restart()  # ends the locking session too
    finally:
        locker.close()
    wait_until(lambda: sql_one("SELECT kwatch.worker_pid()"), 30, "the worker after the restart")
    lst = ctx.listener("kwatch_configmaps", table)
    apply_configmaps(ns, ["c00", "late"], v="2")
    assert_table_matches_server(table, srv, cms, timeout=40)
    st = wait_watching(srv, "configmaps")
    # no checkpoint was written: the relist started over after the restart
    assert st["list_calls"] >= 7 and st["objects"] == len(conftest.server_uids(*cms)), st
    assert checkpoint(srv, "configmaps") is not None
    assert lst.visibility_problems(srv) == []


def test_postgres_restart_during_event_burst(ctx):
    pg = conftest.PG
    ns = ctx.namespace()
    srv = ctx.server()
    cms = ["configmaps", "-n", ns]
    table = watch("configmaps", srv, namespace=ns)
    wait_watching(srv, "configmaps")
    tracker = NotificationTracker({"kwatch_configmaps": table})
    tracker.start()
    api = cluster_api(conftest.CLUSTER)
    coll = "/api/v1/namespaces/%s/configmaps" % ns
    errors = []

    def burst():
        try:
            for i in range(120):
                name = "b%d" % (i % 40)
                if i < 40:
                    st, _ = api.request("POST", coll, configmap_manifest(ns, name))
                elif i % 7 == 0:
                    st, _ = api.request("DELETE", coll + "/" + name)
                else:
                    st, _ = api.request("PATCH", coll + "/" + name, {"data": {"v": str(i)}},
                                        "application/merge-patch+json")
                if st not in (200, 201, 404):
                    errors.append((i, st))
                time.sleep(0.02)
        except Exception as e:
            errors.append(repr(e))

    try:
        assert tracker.ready.wait(20)
        t = threading.Thread(target=burst)
        t.start()
        wait_until(lambda: sql_one("SELECT count(*) FROM %s WHERE cluster = %%s" % table, (srv,)) >= 10,
                   20, "the burst to reach the table")
        pg.restart()
        t.join(120)
        assert not errors, errors
        assert_table_matches_server(table, srv, cms, timeout=40)
        st = wait_watching(srv, "configmaps")
        assert st["list_calls"] == 0 and st["relists"] == 0, ("resumed with a LIST", st)
        # the client's view: the table read after reconnecting plus later notifications
        server = {i["metadata"]["uid"]: i["metadata"]["resourceVersion"]
                  for i in conftest.kubectl_json("get", *cms)["items"]}

        def client_view_matches():
            view = tracker.view("kwatch_configmaps", srv)
            live = {u: rv for u, (typ, rv) in view.items() if typ != "DELETED"}
            return live == server or (live, server)
        wait_until(lambda: client_view_matches() is True, 20, "the notifications to match")
        assert tracker.resyncs >= 1
    finally:
        tracker.finish()


def test_extension_dropped_and_recreated(ctx):
    pg = conftest.PG
    ns, srv, table, cms = watched_namespace(ctx, "configmaps",
                                            lambda ns: apply_configmaps(ns, ["c0", "c1"]))
    worker = sql_one("SELECT kwatch.worker_pid()")
    log_from = pg.log_size()
    rows = "SELECT uid, resource_version FROM %s WHERE cluster = %%s ORDER BY uid" % table
    before = sql(rows, (srv,))

    sql("DROP EXTENSION kwatch CASCADE")  # and with it the foreign server
    try:
        # the worker writes nothing more (its checkpoint update fails: the
        # registration is gone) and stops the watch at its next reload
        kubectl("delete", "configmap", "c1", "-n", ns)
        apply_configmaps(ns, ["c2"])
        wait_until(lambda: "stopping watch" in pg.log_since(log_from), 20, "the watch to stop")
        assert sql(rows, (srv,)) == before
    finally:
        sql("CREATE EXTENSION IF NOT EXISTS kwatch")
    ctx.servers.remove(srv)
    assert ctx.server() == srv
    assert watch("configmaps", srv, namespace=ns) == table
    wait_watching(srv, "configmaps")
    assert_table_matches_server(table, srv, cms)
    # the mirror table is whole again: the generated columns that depend on
    # the extension's functions went with it and are back
    assert sql_one("SELECT count(*) FROM %s WHERE cluster = %%s AND created_at IS NULL"
                   % table, (srv,)) == 0
    # one worker all along: no crash, no restart
    assert sql_one("SELECT kwatch.worker_pid()") == worker
    log = pg.log_since(log_from)
    assert "terminated by signal" not in log and "was terminated" not in log, log[-3000:]
