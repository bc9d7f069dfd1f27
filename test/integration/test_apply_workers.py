"""Apply workers (src/apply_*.c): one table's code never stalls another
table's watches.

A mirror table whose CHECK sleeps, and one its owner holds locked, while a
third watch changes: the third watch's changes reach their table while the
other two are still stuck, the stuck ones show their error
(kwatch.apply_timeout: statement timeout, lock timeout), and both recover
once the constraint is gone and the lock released.  An apply worker killed
in the middle of a batch (SIGKILL: PostgreSQL restarts every process; or
pg_terminate_backend: only that worker ends) loses nothing and notifies no
change twice.
"""
import os
import signal
import time

from psycopg2 import sql as pgsql

import conftest
from postgres import quietly
from conftest import (assert_table_matches_server, kubectl, sql, sql_one, wait_until,
                      watch, watch_status)


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100.0 * (len(values) - 1))))]


def apply_backends(wait_event=None):
    q = "SELECT pid FROM pg_stat_activity WHERE backend_type = 'kwatch apply worker'"
    if wait_event:
        q += " AND wait_event = %s"
        return [r[0] for r in sql(q, (wait_event,))]
    return [r[0] for r in sql(q)]


def test_a_slow_or_locked_table_stalls_only_its_own_watch(ctx, settings):
    """The slow watch has a deadline of its own (watch(apply_timeout)),
    shorter than kwatch.apply_timeout's default; the locked one waits 2 s
    per lock wait."""
    settings(backoff_initial="200ms", backoff_max="2s")
    ns = ctx.namespace()
    srv = ctx.server()
    ctx.tables += ["limitranges", "resourcequotas"]     # other tests expect none
    slow = watch("limitranges", srv, namespace=ns, apply_timeout="4s")
    assert sql_one("SELECT apply_timeout FROM kwatch.registrations WHERE server = %s"
                   " AND resource = 'limitranges'", (srv,)).total_seconds() == 4
    locked = watch("resourcequotas", srv, namespace=ns)
    fast = watch("configmaps", srv, namespace=ns)
    sql("SELECT kwatch.wait_synced(server => %s, timeout => '60s')", (srv,))
    lst = ctx.listener("kwatch_configmaps")
    locker = conftest.PG.connect()
    try:
        # a table owner's CHECK that takes 30 s per row, and a lock held for the test
        sql(pgsql.SQL("ALTER TABLE {} ADD CONSTRAINT slow_audit"
                      " CHECK (length(pg_sleep(30)::text) >= 0) NOT VALID").format(pgsql.SQL(slow)))
        locker.autocommit = False
        with locker.cursor() as cur:
            cur.execute(pgsql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(pgsql.SQL(locked)))
        kubectl("create", "-n", ns, "-f", "-", input="""
apiVersion: v1
kind: LimitRange
metadata: {name: slow-lr}
spec: {limits: [{type: Container, max: {cpu: "2"}}]}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: locked-rq}
spec: {hard: {pods: "10"}}
""")
        wait_until(lambda: apply_backends("PgSleep"), 20, "an apply worker inside the slow CHECK")

        lags = []
        for i in range(20):
            name = "fast-%02d" % i
            t0 = time.monotonic()    # kubectl's own run included: an upper bound
            kubectl("create", "configmap", name, "-n", ns, "--from-literal=i=%d" % i)
            lst.wait_for(type="ADDED", cluster=srv, name=name, timeout=30)
            lags.append(time.monotonic() - t0)
        print("lag of an unrelated watch beside a stuck table: p50 %.3f s, p99 %.3f s"
              % (percentile(lags, 50), percentile(lags, 99)))
        assert_table_matches_server(fast, srv, ["configmaps", "-n", ns])

        # meanwhile the other two never got their change in, and say why
        assert sql_one(pgsql.SQL("SELECT count(*) FROM {} WHERE cluster = %s").format(pgsql.SQL(slow)),
                       (srv,)) == 0
        with locker.cursor() as cur:     # the lock's holder may read it
            cur.execute(pgsql.SQL("SELECT count(*) FROM {} WHERE cluster = %s").format(pgsql.SQL(locked)),
                        (srv,))
            assert cur.fetchone()[0] == 0
        wait_until(lambda: "kwatch.apply_timeout (4000 ms)" in (watch_status(srv, "limitranges")["last_error"] or ""),
                   30, "the slow watch's error")
        wait_until(lambda: "stayed locked" in (watch_status(srv, "resourcequotas")["last_error"] or ""),
                   30, "the locked watch's error")
        assert watch_status(srv, "configmaps")["last_error"] is None
    finally:
        locker.rollback()
        locker.close()
        sql(pgsql.SQL("ALTER TABLE {} DROP CONSTRAINT IF EXISTS slow_audit").format(pgsql.SQL(slow)))

    # both recover, nothing lost
    wait_until(lambda: sql_one(pgsql.SQL("SELECT count(*) FROM {} WHERE cluster = %s")
                               .format(pgsql.SQL(slow)), (srv,)) == 1, 30, "the limit range applied")
    wait_until(lambda: sql_one(pgsql.SQL("SELECT count(*) FROM {} WHERE cluster = %s")
                               .format(pgsql.SQL(locked)), (srv,)) == 1, 30, "the quota applied")
    assert_table_matches_server(slow, srv, ["limitranges", "-n", ns])
    assert_table_matches_server(locked, srv, ["resourcequotas", "-n", ns])
    for resource in ("limitranges", "resourcequotas", "configmaps"):
        st = watch_status(srv, resource)
        assert st["state"] == "watching", st


def slow_switch(table):
    """A CHECK on `table` that sleeps while kwatch_test_slow.on_ is true."""
    sql("CREATE TABLE IF NOT EXISTS public.kwatch_test_slow (on_ boolean)")
    sql("TRUNCATE public.kwatch_test_slow")
    sql("INSERT INTO public.kwatch_test_slow VALUES (true)")
    sql("CREATE OR REPLACE FUNCTION public.kwatch_test_sleep() RETURNS boolean LANGUAGE plpgsql AS"
        " $$ BEGIN WHILE (SELECT on_ FROM public.kwatch_test_slow) LOOP PERFORM pg_sleep(0.2);"
        " END LOOP; RETURN true; END $$")
    sql(pgsql.SQL("ALTER TABLE {} ADD CONSTRAINT kwatch_test_slow CHECK (public.kwatch_test_sleep())"
                  " NOT VALID").format(pgsql.SQL(table)))


def slow_switch_off(table):
    sql("UPDATE public.kwatch_test_slow SET on_ = false")
    sql(pgsql.SQL("ALTER TABLE {} DROP CONSTRAINT IF EXISTS kwatch_test_slow").format(pgsql.SQL(table)))


def kill_apply_worker_mid_batch(ctx, how):
    ns = ctx.namespace()
    srv = ctx.server()
    ctx.tables.append("podtemplates")     # other tests expect none
    table = watch("podtemplates", srv, namespace=ns)
    sql("SELECT kwatch.wait_synced(server => %s, timeout => '60s')", (srv,))
    lst = ctx.listener("kwatch_podtemplates")
    slow_switch(table)
    try:
        kubectl("create", "-n", ns, "-f", "-", input="""
apiVersion: v1
kind: PodTemplate
metadata: {name: killed-mid-batch}
template: {spec: {containers: [{name: c, image: busybox}]}}
""")
        pids = wait_until(lambda: apply_backends("PgSleep"), 20, "an apply worker inside the batch")
        if how == "SIGKILL":
            os.kill(pids[0], signal.SIGKILL)
            # PostgreSQL restarts every process; the worker resumes from its checkpoint
            time.sleep(1)
            conftest.PG.close()
            wait_until(quietly(lambda: sql_one("SELECT kwatch.worker_pid()")),
                       60, "PostgreSQL and the kwatch worker back")
        else:
            sql("SELECT pg_terminate_backend(%s)", (pids[0],))
    finally:
        wait_until(quietly(lambda: slow_switch_off(table) or True), 60, "the slow CHECK dropped")
    wait_until(lambda: sql_one(pgsql.SQL("SELECT count(*) FROM {} WHERE cluster = %s")
                               .format(pgsql.SQL(table)), (srv,)) == 1, 60, "the object applied")
    assert_table_matches_server(table, srv, ["podtemplates", "-n", ns])
    wait_until(lambda: watch_status(srv, "podtemplates")["state"] == "watching", 30, "watching")
    return srv, lst


def test_an_apply_worker_terminated_mid_batch_loses_nothing(ctx):
    srv, lst = kill_apply_worker_mid_batch(ctx, "terminate")
    lst.wait_for(type="ADDED", cluster=srv, name="killed-mid-batch")
    time.sleep(1)
    # the batch rolled back with its worker: its change was notified once, by the retry
    assert len(lst.payloads(cluster=srv, name="killed-mid-batch")) == 1, lst.payloads(cluster=srv)


def test_an_apply_worker_killed_mid_batch_loses_nothing(ctx):
    srv, _ = kill_apply_worker_mid_batch(ctx, "SIGKILL")
    # the listener's connection died with the restart: count in the event stream instead
    n = sql_one("SELECT count(*) FROM kwatch.events WHERE cluster = %s AND name = 'killed-mid-batch'",
                (srv,))
    assert n == 1, n


def test_a_requested_relist_survives_a_crash_of_its_merge(ctx):
    """kwatch.relist() on a table whose rows were made stale, with the
    apply worker merging the LIST killed (SIGKILL: PostgreSQL restarts
    every process): the request is not forgotten (its LIST cleared the
    checkpoint), so the restarted worker lists again and repairs the rows."""
    ns = ctx.namespace()
    srv = ctx.server()
    kubectl("apply", "-f", "-", input=conftest.configmaps_doc(ns, ["stale-%02d" % i for i in range(10)]))
    table = watch("configmaps", srv, namespace=ns)
    sql("SELECT kwatch.wait_synced(server => %s, timeout => '60s')", (srv,))
    sql(pgsql.SQL("UPDATE {} SET resource_version = 'stale', object = object || '{{\"stale\": true}}'"
                  " WHERE cluster = %s").format(pgsql.SQL(table)), (srv,))
    slow_switch(table)
    try:
        sql("SELECT kwatch.relist('configmaps', server => %s)", (srv,))
        pids = wait_until(lambda: apply_backends("PgSleep"), 30, "the relist's merge inside the table's CHECK")
        os.kill(pids[0], signal.SIGKILL)
        time.sleep(1)
        conftest.PG.close()
        wait_until(quietly(lambda: sql_one("SELECT kwatch.worker_pid()")), 60,
                   "PostgreSQL and the kwatch worker back")
    finally:
        wait_until(quietly(lambda: slow_switch_off(table) or True), 60, "the slow CHECK dropped")
    wait_until(lambda: sql_one(pgsql.SQL("SELECT count(*) FROM {} WHERE cluster = %s"
                                         " AND resource_version = 'stale'").format(pgsql.SQL(table)),
                               (srv,)) == 0, 60, "the stale rows repaired")
    assert_table_matches_server(table, srv, ["configmaps", "-n", ns])
    st = watch_status(srv, "configmaps")
    assert st["state"] == "watching" and st["synced"], st


def test_relists_begun_at_once_share_the_staging_schema(ctx):
    """Relists that begin in several apply workers at once (after a 410 on
    every watch, as when the API server's history is compacted) make the
    staging schema once: no watch fails on pg_namespace's unique index."""
    ns = ctx.namespace()
    srv = ctx.server()
    resources = ["configmaps", "serviceaccounts", "services", "endpoints"]
    for r in resources:
        watch(r, srv, namespace=ns)
    sql("SELECT kwatch.wait_synced(server => %s, timeout => '60s')", (srv,))
    sql("DROP SCHEMA IF EXISTS kwatch_stage CASCADE")
    sql("SELECT kwatch.relist(r, server => %s) FROM unnest(%s::text[]) r", (srv, resources))
    for r in resources:
        sql("SELECT kwatch.relist(%s, server => %s, wait => true, timeout => '60s')", (r, srv))
    for r in resources:
        st = watch_status(srv, r)
        assert st["state"] == "watching" and "duplicate key" not in (st["last_error"] or ""), st
    assert sql_one("SELECT count(*) FROM pg_namespace WHERE nspname = 'kwatch_stage'") == 1


def watch_with_slow_batches(ctx, settings, prefix, n, sleep_s):
    """`n` ConfigMaps <prefix>-NNN in a new namespace, watched in batches of
    about 25 into a table whose statement trigger, made in the registering
    transaction (so it is there for the first batch), records the backend
    that runs each batch in public.kwatch_test_spread and sleeps `sleep_s`.
    Returns (server, namespace, table)."""
    settings(batch_size=25)
    ns = ctx.namespace()
    srv = ctx.server()
    kubectl("apply", "-f", "-", input=conftest.configmaps_doc(ns, ["%s-%03d" % (prefix, i) for i in range(n)]))
    sql("CREATE TABLE IF NOT EXISTS public.kwatch_test_spread (pid int, at timestamptz)")
    sql("TRUNCATE public.kwatch_test_spread")
    sql("CREATE OR REPLACE FUNCTION public.kwatch_test_spread() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN INSERT INTO public.kwatch_test_spread VALUES (pg_backend_pid(), clock_timestamp());"
        " PERFORM pg_sleep(%s); RETURN NULL; END $$" % float(sleep_s))
    conn = conftest.PG.connect()
    conn.autocommit = False
    try:
        table = watch("configmaps", srv, conn, namespace=ns)
        with conn.cursor() as cur:
            cur.execute(pgsql.SQL("CREATE TRIGGER kwatch_test_spread AFTER INSERT ON {}"
                                  " FOR EACH STATEMENT EXECUTE FUNCTION public.kwatch_test_spread()")
                        .format(pgsql.SQL(table)))
        conn.commit()
    finally:
        conn.close()
    return srv, ns, table


def spread_first_sync(ctx, settings, n, sleep_s, during=None):
    """A first sync of `n` ConfigMaps (watch_with_slow_batches): the stream
    outruns the inserts, so full batches wait and go to spare apply workers (watch_apply.c,
    "Spreading a list").  `during(srv)` runs while the batches are applied.
    Returns the server and the pids that applied batches, in order."""
    srv, ns, table = watch_with_slow_batches(ctx, settings, "spread", n, sleep_s)
    try:
        if during:
            during(srv)
        sql("SELECT kwatch.wait_synced(server => %s, timeout => '120s')", (srv,))
    finally:
        sql(pgsql.SQL("DROP TRIGGER IF EXISTS kwatch_test_spread ON {}").format(pgsql.SQL(table)))
    assert_table_matches_server(table, srv, ["configmaps", "-n", ns])
    pids = [r[0] for r in sql("SELECT pid FROM public.kwatch_test_spread ORDER BY at")]
    return srv, pids


def test_a_first_sync_is_spread_over_idle_apply_workers(ctx, settings):
    """Issue 36: 300 objects in batches of about 25 (a batch ends once it
    holds 25, at the end of the bytes read), each 0.3 s in its owner's
    trigger: several apply workers insert at once (the trigger saw more
    than one backend), and the table equals the server, each object
    notified once."""
    srv, pids = spread_first_sync(ctx, settings, 300, 0.3)
    assert len(pids) >= 4, pids
    assert len(set(pids)) >= 2, pids
    n = sql("SELECT name, count(*) FROM kwatch.events WHERE cluster = %s GROUP BY name"
            " HAVING count(*) <> 1", (srv,))
    assert n == [], n
    rows = sql_one("SELECT count(*) FROM k8s.configmaps WHERE cluster = %s", (srv,))
    assert rows >= 300     # and the namespace's kube-root-ca.crt
    assert sql_one("SELECT count(*) FROM kwatch.events WHERE cluster = %s AND type = 'ADDED'",
                   (srv,)) == rows
    st = watch_status(srv, "configmaps")
    assert st["state"] == "watching" and st["synced"] and st["objects"] == rows, st


def test_an_apply_worker_terminated_during_a_spread_list_loses_nothing(ctx, settings):
    """Issue 36: one of the apply workers inserting a spread first sync is
    terminated inside its batch: that batch rolls back, the list starts
    over once the others are back (a relist: the rows committed stay and
    are not notified again), and the table equals the server with every
    object notified exactly once."""
    def kill_one(srv):
        pids = wait_until(lambda: (lambda p: p if len(p) >= 2 else None)(apply_backends("PgSleep")),
                          60, "two apply workers inside the spread list's batches")
        sql("SELECT pg_terminate_backend(%s)", (pids[-1],))

    srv, pids = spread_first_sync(ctx, settings, 300, 0.5, during=kill_one)
    dup = sql("SELECT name, count(*) FROM kwatch.events WHERE cluster = %s GROUP BY name"
              " HAVING count(*) <> 1", (srv,))
    assert dup == [], dup
    rows = sql_one("SELECT count(*) FROM k8s.configmaps WHERE cluster = %s", (srv,))
    assert rows >= 300
    assert sql_one("SELECT count(DISTINCT name) FROM kwatch.events WHERE cluster = %s", (srv,)) == rows
    st = watch_status(srv, "configmaps")
    assert st["state"] == "watching" and st["synced"] and st["objects"] == rows, st


def test_unwatch_waits_for_the_batches_in_progress_not_the_spread_list(ctx, settings):
    """Issue 36: while the batches of a first sync are spread over apply
    workers (each 0.5 s in its owner's trigger, 24 of them), unwatch()
    waits for the batches in progress, not for the list: the batches that
    start after it (they find no registration) roll back, so when it
    returns fewer than all batches (at least 16) committed, and no row of
    the watch is left or comes later."""
    srv, ns, table = watch_with_slow_batches(ctx, settings, "unw", 600, 0.5)
    try:
        wait_until(lambda: len(apply_backends("PgSleep")) >= 2, 60,
                   "two apply workers inside the spread list's batches")
        assert sql_one("SELECT kwatch.unwatch('configmaps', server => %s)", (srv,)) is True
        committed = sql_one("SELECT count(*) FROM public.kwatch_test_spread")
        assert committed < 12, committed
        time.sleep(2)
        assert sql_one(pgsql.SQL("SELECT count(*) FROM {} WHERE cluster = %s").format(pgsql.SQL(table)),
                       (srv,)) == 0
        assert sql_one("SELECT count(*) FROM public.kwatch_test_spread") == committed
    finally:
        sql(pgsql.SQL("DROP TRIGGER IF EXISTS kwatch_test_spread ON {}").format(pgsql.SQL(table)))
