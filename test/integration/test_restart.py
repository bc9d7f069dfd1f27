"""PostgreSQL restarts: resume from the checkpoint, or relist after a 410."""
import os
import shutil

import conftest
from postgres import Reader
from conftest import (assert_table_matches_server, create_pods, kubectl, kubectl_json, row_uids,
                      watched_namespace,
                      sql_one, wait_until, wait_watching, watch, watch_status)


def checkpoint(server, resource="pods"):
    return sql_one("SELECT resource_version FROM kwatch.registrations"
                   " WHERE server = %s AND resource = %s", (server, resource))


class RowSetReader(Reader):
    """Reads the uid set of one cluster's rows in a loop, in its own
    connection, collecting every distinct set it sees (PROTOCOL 23: a relist
    must never show a reader a half-replaced table)."""

    def __init__(self, table, cluster):
        super().__init__()
        self.table, self.cluster = table, cluster
        self.seen = []
        self.read_once()  # the state before the thread runs

    def read_once(self):
        with self.conn.cursor() as cur:
            cur.execute("SELECT uid FROM %s WHERE cluster = %%s" % self.table, (self.cluster,))
            rows = frozenset(r[0] for r in cur.fetchall())
        if not self.seen or self.seen[-1] != rows:
            self.seen.append(rows)

    def finish(self):
        super().finish()
        return self.seen


def test_relist_after_410_removes_objects_deleted_in_the_gap(ctx, settings):
    pg, cluster = conftest.PG, conftest.CLUSTER
    # small pages from etcd and one object per transaction: the relist
    # takes many requests and transactions, and readers must still see it
    # at once
    settings(list_from_watch_cache="off", list_page_size=2, batch_size=1)
    ns = ctx.namespace()
    # A kubeconfig of this test's servers only: made unreadable while
    # PostgreSQL starts, so that the worker cannot relist before our listener
    # listens (a notification sent while nobody listens is lost).
    kc = conftest.TEST_DIR / ("kubeconfig-" + ctx.base)
    shutil.copyfile(cluster.kubeconfig, kc)
    os.chmod(kc, 0o644)
    srv = ctx.server(kubeconfig=str(kc))  # the namespace
    sel = ctx.server("-sel", kubeconfig=str(kc))  # sel=yes pods of the namespace
    pods, sel_pods = ["pods", "-n", ns], ["pods", "-n", ns, "-l", "sel=yes"]
    uids = create_pods(ns, {"keep-1": {}, "keep-2": {}, "sel-in": {"sel": "yes"},
                            "sel-out": {"sel": "yes"}, "gone-1": {"sel": "yes"}, "gone-2": {},
                            "again": {}})
    table = watch("pods", srv, namespace=ns)
    watch("pods", sel, namespace=ns, label_selector="sel=yes")
    wait_watching(srv, "pods")
    wait_watching(sel, "pods")
    assert_table_matches_server(table, srv, pods)
    assert_table_matches_server(table, sel, sel_pods)
    old_rv = wait_until(lambda: checkpoint(srv), 10, "a checkpoint")

    pg.stop()
    try:
        kubectl("delete", "pod", "gone-1", "gone-2", "again", "-n", ns, "--wait=false")
        # "again" comes back under the same name with a new uid (PROTOCOL 24)
        new = create_pods(ns, {"new-1": {"sel": "yes"}, "new-2": {}, "again": {"v": "2"}})
        kubectl("label", "pod", "keep-1", "-n", ns, "changed=yes")
        kubectl("label", "pod", "sel-out", "-n", ns, "sel-")  # leaves the selector
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
    reader = RowSetReader(table, srv)
    reader.start()
    for server in (srv, sel):
        wait_until(lambda: "kubeconfig" in (watch_status(server, "pods")["last_error"] or ""),
                   20, "the unreadable kubeconfig to be reported")
        assert not watch_status(server, "pods")["healthy"]
    os.chmod(kc, 0o644)

    assert_table_matches_server(table, srv, pods, timeout=60)
    assert_table_matches_server(table, sel, sel_pods, timeout=60)
    final = {uids["keep-1"], uids["keep-2"], uids["sel-in"], uids["sel-out"],
             new["new-1"], new["new-2"], new["again"]}
    assert row_uids(table, srv) == final
    assert row_uids(table, sel) == {uids["sel-in"], new["new-1"]}

    def notified(cluster, type):
        return {p["uid"] for p in lst.payloads(cluster=cluster, type=type)}
    wait_until(lambda: notified(srv, "DELETED") == {uids["gone-1"], uids["gone-2"], uids["again"]},
               20, "DELETED notifications for the pods deleted while PostgreSQL was down")
    wait_until(lambda: notified(srv, "ADDED") == {new["new-1"], new["new-2"], new["again"]},
               20, "ADDED notifications for the pods created while PostgreSQL was down")
    wait_until(lambda: notified(srv, "MODIFIED") == {uids["keep-1"], uids["sel-out"]},
               20, "MODIFIED notifications for the pods relabelled while PostgreSQL was down")
    for name in ("keep-1", "sel-out"):
        rv = kubectl_json("get", "pod", name, "-n", ns)["metadata"]["resourceVersion"]
        assert [p["resource_version"] for p in lst.payloads(cluster=srv, type="MODIFIED",
                                                             uid=uids[name])] == [rv]
    # the selector's view: what left it or was deleted is DELETED, what entered ADDED
    wait_until(lambda: notified(sel, "DELETED") == {uids["sel-out"], uids["gone-1"]},
               20, "DELETED notifications of the label-selected watch")
    wait_until(lambda: notified(sel, "ADDED") == {new["new-1"]},
               20, "ADDED notifications of the label-selected watch")
    assert notified(sel, "MODIFIED") == set()
    for quiet in ("keep-2", "sel-in"):
        assert lst.payloads(uid=uids[quiet]) == [], quiet + " did not change"
    assert lst.visibility_problems(srv) == [] and lst.visibility_problems(sel) == []
    seen = reader.finish()
    before = frozenset(uids.values())
    assert [s for s in seen if s not in (before, frozenset(final))] == [], \
        "a reader saw a half-replaced table: %s" % seen

    log = pg.log_since(log_from)
    for server, count in ((srv, 7), (sel, 2)):
        st = wait_watching(server, "pods")
        assert st["list_calls"] >= 1 and st["relists"] >= 1, st
        assert st["http_errors"] >= 1, st
        assert st["objects"] == count, st
        mine = [line for line in log.splitlines() if '"%s"' % server in line]
        assert any("410" in line or "too old" in line for line in mine), \
            "no 410 logged for %s; its log lines: %s" % (server, mine)
    assert watch_status(srv, "pods")["list_calls"] >= 4, "7 objects in pages of 2"
    assert checkpoint(srv) != old_rv


def test_apiserver_restart_while_watching(ctx):
    cluster = conftest.CLUSTER
    ns, srv, table, pods = watched_namespace(ctx, "pods", lambda ns: create_pods(ns, {"a": {}}))
    errors_before = watch_status(srv, "pods")["http_errors"]

    cluster.restart_apiserver()
    create_pods(ns, {"b": {}})
    kubectl("label", "pod", "a", "-n", ns, "after=restart")
    kubectl("delete", "pod", "b", "-n", ns, "--wait=false")
    create_pods(ns, {"c": {}})
    assert_table_matches_server(table, srv, pods, timeout=60)
    st = wait_watching(srv, "pods", timeout=60)
    assert st["http_errors"] > errors_before, ("the outage went unnoticed", st)
    assert st["objects"] == 2, st


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
    assert st["objects"] == 2, st  # counted from the table when resuming


def process_gone(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def test_crash_recovery_resumes_from_checkpoint(ctx):
    pg = conftest.PG
    ns, srv, table, pods = watched_namespace(ctx, "pods", lambda ns: create_pods(ns, {"a": {}}))
    kubectl("label", "pod", "a", "-n", ns, "step=1")
    assert_table_matches_server(table, srv, pods)
    rv = kubectl_json("get", "pod", "a", "-n", ns)["metadata"]["resourceVersion"]
    wait_until(lambda: checkpoint(srv) == rv, 10, "the checkpoint to reach the last event's RV")
    worker = sql_one("SELECT kwatch.worker_pid()")

    pg.close()
    conftest.run(["bash", conftest.PG_SH, "kill", pg.dir])  # SIGKILL the postmaster
    # the worker must notice that the postmaster died and exit (an orphan
    # attached to the old shared memory would keep PostgreSQL from starting)
    wait_until(lambda: process_gone(worker), 30, "the worker (pid %d) to exit" % worker)
    # This machine's init may never reap the dead postmaster: its zombie
    # still "exists" for kill(pid, 0), so PostgreSQL would take the stale
    # lock files for a running server's.  After a real crash the process is
    # gone; remove them.
    lock = pg.dir / "data" / "postmaster.pid"
    postmaster = int(lock.read_text().split()[0])
    wait_until(lambda: process_gone(postmaster), 10, "the postmaster to die")
    for f in (lock, pg.dir / (".s.PGSQL.%d.lock" % pg.port), pg.dir / (".s.PGSQL.%d" % pg.port)):
        f.unlink(missing_ok=True)
    pg.start()
    wait_until(lambda: sql_one("SELECT kwatch.worker_pid()"), 20, "the worker after the crash")

    b = create_pods(ns, {"b": {}})["b"]
    kubectl("label", "pod", "a", "-n", ns, "step=2", "--overwrite")
    assert_table_matches_server(table, srv, pods)
    assert b in row_uids(table, srv)
    st = wait_watching(srv, "pods")
    assert st["list_calls"] == 0 and st["relists"] == 0, ("resumed with a LIST", st)
