#!/usr/bin/python3
"""Event-stream benchmark (after bench.py, same environment).  Prints a report; asserts nothing.

usage: events.py [--repeat 3] [--reads 200]

1. apply throughput: re-runs the initial sync of the pods bench.py created
   (unwatch + watch: one relist transaction applying N ADDED events, each
   also appended to the event ring) `repeat` times; run it on a build
   without the ring to compare;
2. reading the 1,000 most recent events with `seq > $last ORDER BY seq`
   (server-side prepared statement, generic plan), and for comparison
   `count(*)` over the whole ring (skipped when kwatch.events is absent).
"""
import argparse
import statistics
import time

import db


def sync_once(cur, n, history=False):
    """unwatch (dropping the table) and watch the bench's pods again, with
    or without history; returns the seconds until all n rows are there."""
    cur.execute("SELECT kwatch.unwatch('pods', server => 'bench', drop_table => true)")
    t0 = time.time()
    cur.execute("SELECT kwatch.watch('pods', server => 'bench', notify => true, history => %s)",
                (history,))
    while True:
        cur.execute("SELECT healthy, objects FROM kwatch.watches WHERE server = 'bench'")
        healthy, objects = cur.fetchone()
        if healthy and objects is not None and objects >= n:
            return time.time() - t0
        if time.time() - t0 > 600:
            raise SystemExit("sync did not finish in 600 s")
        time.sleep(0.01)


def timed(cur, query, args, reads):
    times = []
    for _ in range(reads):
        t0 = time.perf_counter()
        cur.execute(query, args)
        rows = cur.fetchall()
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return len(rows), statistics.median(times), times[int(len(times) * 0.95) - 1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--reads", type=int, default=200)
    a = ap.parse_args()
    cur, n = db.bench_pods()
    syncs = [sync_once(cur, n) for _ in range(a.repeat)]

    print()
    print("kwatch event-stream benchmark")
    print("  initial sync of %d pods  %s s  (best %.0f rows/s)"
          % (n, " / ".join("%.2f" % s for s in syncs), n / min(syncs)))
    cur.execute("SELECT to_regclass('kwatch.events') IS NOT NULL"
                " AND current_setting('kwatch.event_buffer', true) IS NOT NULL")
    if not cur.fetchone()[0]:
        print("  (no kwatch.events in this build)")
        return
    cur.execute("SHOW kwatch.event_buffer")
    ring = int(cur.fetchone()[0])
    cur.execute("SELECT kwatch.events_last_seq()")
    last = cur.fetchone()[0]
    cur.execute("SET plan_cache_mode = force_generic_plan")
    cur.execute("PREPARE since(bigint) AS SELECT * FROM kwatch.events WHERE seq > $1 ORDER BY seq")
    rows, p50, p95 = timed(cur, "EXECUTE since(%s)", (last - 1000,), a.reads)
    print("  1,000 recent events      %d rows: p50 %.2f ms, p95 %.2f ms (seq > $1 ORDER BY seq, "
          "round trip incl. psycopg2 decoding)" % (rows, p50, p95))
    rows, p50, p95 = timed(cur, "SELECT count(*) FROM kwatch.events", None, a.reads // 4)
    cur.execute("SELECT count(*) FROM kwatch.events")
    print("  whole ring count(*)      %d events (ring %d): p50 %.2f ms, p95 %.2f ms"
          % (cur.fetchone()[0], ring, p50, p95))
    rows, p50, p95 = timed(cur, "SELECT count(*) FROM kwatch.events WHERE seq > %s",
                           (last - 1000,), a.reads)
    print("  count(*) of last 1,000   p50 %.3f ms, p95 %.3f ms (server work without row transfer)"
          % (p50, p95))


if __name__ == "__main__":
    main()
