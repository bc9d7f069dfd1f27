"""What client-go's informer tells its users, in SQL (issue 9): origin
flags on every change (preexisting, final_state_unknown,
previous_resource_version) in NOTIFY payloads and kwatch.events, through
live changes and a 410 relist of the real control plane; the sync barrier
kwatch.wait_synced(); relists on demand with kwatch.relist()."""
import time

import psycopg2
import pytest
from psycopg2 import sql as pgsql

import conftest
from conftest import (assert_table_matches_server, configmaps_doc, kubectl, kubectl_json, sql, sql_one,
                      wait_until, wait_watching, watch, watch_status)
from faults_support import fake, fake_server, gaps_after, not_probe, pod, wait_status  # noqa: F401


def rv_of(ns, name):
    return kubectl_json("get", "configmap", name, "-n", ns)["metadata"]["resourceVersion"]


def events_of(srv):
    """kwatch.events rows of cluster srv: {(type, name): row dict}, the last of each."""
    rows = sql("SELECT seq, type, name, preexisting, final_state_unknown, previous_resource_version,"
               " resource_version FROM kwatch.events WHERE cluster = %s ORDER BY seq", (srv,))
    keys = ("seq", "type", "name", "preexisting", "final_state_unknown",
            "previous_resource_version", "resource_version")
    return {(r[1], r[2]): dict(zip(keys, r)) for r in rows}


def flags(p):
    return (p["preexisting"], p["final_state_unknown"], p.get("previous_resource_version"))


def test_origin_flags_through_live_changes_and_a_410_relist(ctx):
    pg = conftest.PG
    ns = ctx.namespace()
    srv = ctx.server()
    kubectl("apply", "-f", "-", input=configmaps_doc(ns, ["c0", "c1", "gone"]))
    lst = ctx.listener("kwatch_configmaps")
    table = watch("configmaps", srv, namespace=ns)
    sql("SELECT kwatch.wait_synced('configmaps', server => %s, timeout => '60s')", (srv,))
    assert_table_matches_server(table, srv, ["configmaps", "-n", ns])

    # the initial LIST: preexisting adds (AddFunc(obj, isInInitialList=true))
    p = lst.wait_for(type="ADDED", cluster=srv, name="c0")
    assert flags(p) == (True, False, None), p
    assert "previous_resource_version" not in p

    # live changes: watch events, not preexisting; a MODIFIED carries the
    # resourceVersion the row held (UpdateFunc(oldObj, newObj))
    c0_rv = rv_of(ns, "c0")
    kubectl("label", "configmap", "c0", "-n", ns, "x=1")
    p = lst.wait_for(type="MODIFIED", cluster=srv, name="c0")
    assert flags(p) == (False, False, c0_rv), p
    assert p["resource_version"] == rv_of(ns, "c0")
    kubectl("create", "configmap", "live", "-n", ns, "--from-literal=a=b")
    assert flags(lst.wait_for(type="ADDED", cluster=srv, name="live")) == (False, False, None)
    kubectl("delete", "configmap", "live", "-n", ns)
    assert flags(lst.wait_for(type="DELETED", cluster=srv, name="live")) == (False, False, None)

    # changes the watch cannot see: the worker is down meanwhile, and comes
    # back with a checkpoint older than the API server's watch cache holds,
    # so its WATCH gets 410 and it relists (PROTOCOL 7, 16)
    c1_rv = rv_of(ns, "c1")
    log_from = pg.log_size()
    worker = sql_one("SELECT kwatch.worker_pid()")
    # the restarted worker (bgw_restart_time 5 s) must read the old
    # checkpoint, whenever it starts: it waits on this lock until the
    # changes and the checkpoint are in place
    hold = pg.connect(autocommit=False)
    try:
        sql("LOCK TABLE kwatch.registrations IN ACCESS EXCLUSIVE MODE", conn=hold)
        sql("SELECT pg_terminate_backend(%s)", (worker,))
        wait_until(lambda: sql_one("SELECT kwatch.worker_pid()") != worker, 20, "the worker to exit")
        kubectl("delete", "configmap", "gone", "-n", ns)
        kubectl("apply", "-f", "-", input=configmaps_doc(ns, ["c1", "c2"], v="2"))
        # a fresh watch cache starts at the current revision: a WATCH from
        # "1" is refused with 410 however young the control plane is (a
        # young one's cache still holds revision 1 and would replay the
        # events instead: issue 34)
        conftest.CLUSTER.restart_apiserver()
        sql("UPDATE kwatch.registrations SET resource_version = '1' WHERE server = %s", (srv,), conn=hold)
        hold.commit()
    finally:
        hold.close()
    wait_until(lambda: sql_one("SELECT kwatch.worker_pid()") not in (None, worker), 30, "a new worker")
    sql("SELECT kwatch.wait_synced('configmaps', server => %s, timeout => '60s')", (srv,))
    assert_table_matches_server(table, srv, ["configmaps", "-n", ns])
    log = pg.log_since(log_from)
    assert any('"%s"' % srv in line and ("410" in line or "too old" in line)
               for line in log.splitlines()), log[-3000:]

    # found by the relist: preexisting; the deletion inferred, its final
    # state unknown (DeletedFinalStateUnknown)
    gone = lst.wait_for(type="DELETED", cluster=srv, name="gone")
    assert flags(gone) == (True, True, None), gone
    c2 = lst.wait_for(type="ADDED", cluster=srv, name="c2")
    assert flags(c2) == (True, False, None), c2
    c1 = lst.wait_for(type="MODIFIED", cluster=srv, name="c1")
    assert flags(c1) == (True, False, c1_rv), c1
    assert lst.payloads(cluster=srv, name="c0", type="MODIFIED")[-1]["seq"] < c1["seq"]

    # kwatch.events says the same, event by event
    ev = events_of(srv)
    for p in (gone, c2, c1, lst.payloads(cluster=srv, type="MODIFIED", name="c0")[0]):
        row = ev[(p["type"], p["name"])]
        assert row["seq"] == p["seq"], (row, p)
        assert (row["preexisting"], row["final_state_unknown"],
                row["previous_resource_version"]) == flags(p), (row, p)
    assert ev[("DELETED", "live")]["final_state_unknown"] is False


def test_wait_synced_returns_when_the_table_holds_the_whole_list(ctx, settings):
    """A fresh watch of 2,000 objects listed in pages of 100: wait_synced
    returns only once the table holds every one, in the session that
    registered the watch (watch, commit, wait, trust the table)."""
    settings(list_from_watch_cache="off", list_page_size=100)
    ns = ctx.namespace()
    srv = ctx.server()
    names = ["cm-%04d" % i for i in range(2000)]
    for i in range(0, len(names), 500):
        kubectl("apply", "-f", "-", input=configmaps_doc(ns, names[i:i + 500]))
    want = len(kubectl("get", "configmaps", "-n", ns, "-o", "name").split())
    assert want == 2001    # and the namespace's kube-root-ca.crt
    conn = conftest.PG.connect()
    try:
        cur = conn.cursor()
        cur.execute("SELECT kwatch.watch('configmaps', server => %s, namespace => %s)::text", (srv, ns))
        table = cur.fetchone()[0]
        t0 = time.monotonic()
        cur.execute("SELECT kwatch.wait_synced('configmaps', server => %s)", (srv,))
        waited = time.monotonic() - t0
        cur.execute(pgsql.SQL("SELECT count(*) FROM {} WHERE cluster = %s").format(pgsql.SQL(table)),
                    (srv,))
        assert cur.fetchone()[0] == want, "wait_synced returned %.2f s in, before the table was full" % waited
        cur.execute("SELECT synced, syncs, state FROM kwatch.watches WHERE server = %s", (srv,))
        assert cur.fetchone() == (True, 1, "watching")
        # every watch of the server (resource left out): already synced
        cur.execute("SELECT kwatch.wait_synced(server => %s, timeout => '1s')", (srv,))
    finally:
        conn.close()
    assert_table_matches_server(table, srv, ["configmaps", "-n", ns])

    # a name no visible watch has
    with pytest.raises(psycopg2.Error) as e:
        sql("SELECT kwatch.wait_synced('secrets', server => %s, timeout => '1s')", (srv,))
    assert e.value.pgcode == "42704", e.value.pgerror


def test_wait_synced_times_out_and_fails_clearly(ctx, fake):
    # a server answering 503 to every LIST: the watch never syncs
    srv = fake_server(ctx, fake)
    fake.create("pods", pod("p0"))
    fake.inject("status", on="list", code=503, times=None, when=not_probe)
    watch("pods", srv)
    t0 = time.monotonic()
    with pytest.raises(psycopg2.Error) as e:
        sql("SELECT kwatch.wait_synced('pods', server => %s, timeout => '1.5s')", (srv,))
    assert e.value.pgcode == "57014", e.value.pgerror
    assert "timed out" in e.value.diag.message_primary
    assert 1.4 < time.monotonic() - t0 < 10
    # statement_timeout and cancel end the wait too
    conn = conftest.PG.connect()
    try:
        conn.cursor().execute("SET statement_timeout = '500ms'")
        with pytest.raises(psycopg2.Error) as e:
            conn.cursor().execute("SELECT kwatch.wait_synced('pods', server => %s)", (srv,))
        assert e.value.pgcode == "57014" and "statement timeout" in e.value.diag.message_primary
    finally:
        conn.close()

    # a 403: the watch fails; wait_synced says so with the server's message
    fake.clear_faults()
    fake.inject("status", on="list", code=403, times=None, when=not_probe)
    sql("SELECT kwatch.relist('pods', server => %s)", (srv,))
    wait_status(srv, "pods", lambda s: s["state"] == "failed", msg="failed")
    with pytest.raises(psycopg2.Error) as e:
        sql("SELECT kwatch.wait_synced('pods', server => %s, timeout => '10s')", (srv,))
    assert e.value.pgcode == "55000", e.value.pgerror
    assert "failed" in e.value.diag.message_primary
    assert "403" in (e.value.diag.message_detail or ""), e.value.pgerror


def test_relist_on_demand(ctx):
    ns = ctx.namespace()
    srv = ctx.server()
    kubectl("apply", "-f", "-", input=configmaps_doc(ns, ["r0", "r1"]))
    table = watch("configmaps", srv, namespace=ns)
    sql("SELECT kwatch.wait_synced('configmaps', server => %s, timeout => '60s')", (srv,))
    before = watch_status(srv, "configmaps")
    lst = ctx.listener("kwatch_configmaps")
    # a row the server does not have (as a missed deletion would leave):
    # the relist on demand deletes it, final state unknown
    sql(pgsql.SQL("INSERT INTO {} (cluster, uid, resource_version, object) VALUES (%s, 'stale-uid', '1',"
                  " jsonb_build_object('metadata', jsonb_build_object('name', 'stale', 'namespace', %s,"
                  " 'uid', 'stale-uid', 'resourceVersion', '1')))").format(pgsql.SQL(table)), (srv, ns))
    assert sql_one("SELECT kwatch.relist('configmaps', server => %s, wait => true, timeout => '60s')",
                   (srv,)) is True
    # returned after the relist committed: the row is gone already
    assert sql_one(pgsql.SQL("SELECT count(*) FROM {} WHERE uid = 'stale-uid'").format(pgsql.SQL(table))) == 0
    st = watch_status(srv, "configmaps")
    assert st["relist_requests"] == before["relist_requests"] + 1
    assert st["syncs"] == before["syncs"] + 1
    assert st["relists"] == before["relists"] + 1
    p = lst.wait_for(type="DELETED", cluster=srv, name="stale")
    assert flags(p) == (True, True, None), p
    # unchanged objects are not notified again
    assert lst.payloads(cluster=srv, name="r0") == []
    assert_table_matches_server(table, srv, ["configmaps", "-n", ns])
    wait_watching(srv, "configmaps")

    # only the watch's owner (or a superuser) may ask
    role = ("kwr_" + ctx.base)[:63].replace("-", "_")
    sql(pgsql.SQL("CREATE ROLE {}").format(pgsql.Identifier(role)))
    try:
        sql(pgsql.SQL("GRANT EXECUTE ON FUNCTION kwatch.relist TO {}").format(pgsql.Identifier(role)))
        conn = conftest.PG.connect()
        try:
            conn.cursor().execute(pgsql.SQL("SET ROLE {}").format(pgsql.Identifier(role)))
            with pytest.raises(psycopg2.Error) as e:
                conn.cursor().execute("SELECT kwatch.relist('configmaps', server => %s)", (srv,))
            assert e.value.pgcode == "42501", e.value.pgerror
        finally:
            conn.close()
    finally:
        sql(pgsql.SQL("DROP OWNED BY {}").format(pgsql.Identifier(role)))
        sql(pgsql.SQL("DROP ROLE {}").format(pgsql.Identifier(role)))
    assert watch_status(srv, "configmaps")["relist_requests"] == before["relist_requests"] + 1
    with pytest.raises(psycopg2.Error) as e:
        sql("SELECT kwatch.relist('nothing', server => %s)", (srv,))
    assert e.value.pgcode == "42704", e.value.pgerror


def test_retry_ranges_are_honoured(ctx, fake):
    """Each retry waits a delay drawn inside the watch's range for the
    request that comes next (tests set kwatch.backoff_initial to 200ms,
    whose doubling backoff would give other spacings)."""
    srv = fake_server(ctx, fake)
    fake.create("pods", pod("p0"))
    f = fake.inject("status", on="list", code=503, times=4, when=not_probe)
    table = watch("pods", srv, retry_relist_after="[1s,1.5s]", retry_watch_after="[300ms,500ms]")
    wait_status(srv, "pods", lambda s: s["state"] == "watching", timeout=30, msg="watching")
    assert len(f.hits) == 4
    gaps = gaps_after(f.hits, [r for r in fake.requests_for("list", "pods")
                               if r.query.get("limit") != "1"])
    assert len(gaps) == 4 and all(0.95 <= g <= 1.9 for g in gaps), gaps

    w = fake.inject("status", on="watch", code=503, times=4)
    fake.set_down(True)
    fake.set_down(False)
    wait_until(lambda: len(w.hits) == 4, 30, "four refused watches")
    wait_status(srv, "pods", lambda s: s["state"] == "watching", timeout=30, msg="watching again")
    gaps = gaps_after(w.hits, fake.requests_for("watch", "pods"))
    assert len(gaps) == 4 and all(0.28 <= g <= 0.9 for g in gaps), gaps
    # no relist: a refused WATCH is retried as a WATCH
    assert watch_status(srv, "pods")["relists"] == 0
    assert sql("SELECT retry_relist_after::text, retry_watch_after::text FROM kwatch.watches"
               " WHERE server = %s", (srv,)) == [('[00:00:01,00:00:01.5]', '[00:00:00.3,00:00:00.5]')]
    assert sql_one(pgsql.SQL("SELECT count(*) FROM {}").format(pgsql.SQL(table))) >= 1

    # bad ranges are refused before anything is registered
    with pytest.raises(psycopg2.Error) as e:
        watch("services", srv, retry_watch_after="[1ms,2ms]")
    assert e.value.pgcode == "22023", e.value.pgerror


def test_relists_merge_in_an_apply_worker(ctx):
    """A relist's merge is apply work like any batch (apply_execute.c), run
    by an apply worker while the worker serves the other watches: the
    table, NOTIFY payloads (flags included) and the event stream (seq in
    commit order, no holes) are right, deletions included.  The first sync
    into a table without rows of the cluster has nothing to merge: its
    batches go straight into the table (relist_stage.c), with the same payloads and
    stream."""
    ns = ctx.namespace()
    srv = ctx.server()
    kubectl("apply", "-f", "-", input=configmaps_doc(ns, ["bg-%02d" % i for i in range(40)]))
    lst = ctx.listener("kwatch_configmaps")
    first_seq = sql_one("SELECT kwatch.events_last_seq()")
    table = watch("configmaps", srv, namespace=ns)
    # another watch keeps streaming meanwhile
    other = ctx.server("-o")
    other_table = watch("serviceaccounts", other, namespace=ns)
    sql("SELECT kwatch.wait_synced(server => %s, timeout => '60s')", (srv,))
    assert_table_matches_server(table, srv, ["configmaps", "-n", ns])
    wait_until(lambda: len(lst.payloads(cluster=srv, type="ADDED")) == 41, 20, "41 ADDED")
    adds = lst.payloads(cluster=srv, type="ADDED")
    assert all(p["preexisting"] for p in adds)
    # the event stream: contiguous, in commit order, each seq once
    seqs = [r[0] for r in sql("SELECT seq FROM kwatch.events WHERE seq > %s ORDER BY seq", (first_seq,))]
    assert seqs == list(range(first_seq + 1, first_seq + 1 + len(seqs))), seqs[:5]
    assert sorted(p["seq"] for p in adds) == sorted(
        r[0] for r in sql("SELECT seq FROM kwatch.events WHERE seq > %s AND cluster = %s AND type = 'ADDED'",
                          (first_seq, srv)))

    # a relist on demand, merged in the background too, finds a missed deletion
    sql(pgsql.SQL("INSERT INTO {} (cluster, uid, resource_version, object) VALUES (%s, 'bg-stale', '1',"
                  " jsonb_build_object('metadata', jsonb_build_object('name', 'bg-stale', 'namespace', %s,"
                  " 'uid', 'bg-stale', 'resourceVersion', '1')))").format(pgsql.SQL(table)), (srv, ns))
    sql("SELECT kwatch.relist('configmaps', server => %s, wait => true, timeout => '60s')", (srv,))
    # written by apply workers, not by the worker that runs the transfers
    assert sql_one("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'kwatch apply worker'") >= 1
    p = lst.wait_for(type="DELETED", cluster=srv, name="bg-stale")
    assert flags(p) == (True, True, None), p
    assert_table_matches_server(table, srv, ["configmaps", "-n", ns])
    st = watch_status(srv, "configmaps")
    assert st["state"] == "watching" and st["synced"] and st["syncs"] == 2, st
    # live changes still flow, for both watches
    kubectl("create", "configmap", "bg-live", "-n", ns, "--from-literal=a=b")
    kubectl("create", "serviceaccount", "bg-live", "-n", ns)
    p = lst.wait_for(type="ADDED", cluster=srv, name="bg-live")
    assert flags(p) == (False, False, None), p
    assert_table_matches_server(table, srv, ["configmaps", "-n", ns])
    assert_table_matches_server(other_table, other, ["serviceaccounts", "-n", ns])
    # unwatch leaves no staging table behind
    assert sql_one("SELECT to_regclass(%s)", ("kwatch_stage.relist_stage_%d" % st["id"],)) is not None
    sql("SELECT kwatch.unwatch('configmaps', server => %s)", (srv,))
    assert sql_one("SELECT to_regclass(%s)", ("kwatch_stage.relist_stage_%d" % st["id"],)) is None


def test_wait_synced_after_a_worker_restart_and_beside_an_open_unwatch(ctx):
    """A watch resumed from its checkpoint after a worker restart is synced
    (its table holds a committed LIST) without a new LIST; and a session
    that called unwatch and left its transaction open delays no other
    watch's first sync (the staging tables are outside the extension)."""
    ns = ctx.namespace()
    srv = ctx.server()
    watch("configmaps", srv, namespace=ns)
    sql("SELECT kwatch.wait_synced('configmaps', server => %s, timeout => '60s')", (srv,))
    worker = sql_one("SELECT kwatch.worker_pid()")
    sql("SELECT pg_terminate_backend(%s)", (worker,))
    wait_until(lambda: sql_one("SELECT kwatch.worker_pid()") not in (None, worker), 30, "a new worker")
    sql("SELECT kwatch.wait_synced('configmaps', server => %s, timeout => '30s')", (srv,))
    st = watch_status(srv, "configmaps")
    assert st["synced"] and st["syncs"] == 0 and st["list_calls"] == 0, st
    # relist(wait) after the restart: served by a LIST of its own
    sql("SELECT kwatch.relist('configmaps', server => %s, wait => true, timeout => '60s')", (srv,))
    st = watch_status(srv, "configmaps")
    assert st["syncs"] == 1 and st["relist_requests"] == 1 and st["list_calls"] >= 1, st

    conn = conftest.PG.connect(autocommit=False)
    try:
        conn.cursor().execute("SELECT kwatch.unwatch('configmaps', server => %s)", (srv,))
        other = ctx.server("-o")
        watch("serviceaccounts", other, namespace=ns)
        sql("SELECT kwatch.wait_synced('serviceaccounts', server => %s, timeout => '30s')", (other,))
    finally:
        conn.rollback()
        conn.close()
