#!/usr/bin/python3
"""History benchmark (issue 11; after bench.py, same environment): what
keeping k8s.pods_history costs per applied change.  Prints a report;
asserts nothing.

usage: history.py [--repeat 3]

The initial sync of the pods bench.py created (one transaction applying N
ADDED changes through the worker's real path: LIST, staging, merge) is run
`repeat` times without history and `repeat` times with it (watch(history =>
true): the trigger writes one history row per change in the same
transaction).  Reported: the median sync time of each, the difference per
change (microseconds), WAL bytes per change with and without, and the
history table's size.  A watch event pays the same trigger per row.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import db  # noqa: E402
import events  # noqa: E402  (sync_once)


def sync_once(cur, n, history):
    """events.sync_once after dropping the history table too; returns
    (seconds until all n rows are there, WAL bytes written meanwhile)."""
    # the watch goes first: its history trigger writes the history table
    # while unwatch deletes the rows
    cur.execute("SELECT kwatch.unwatch('pods', server => 'bench', drop_table => true)")
    cur.execute("DROP TABLE IF EXISTS k8s.pods_history")
    cur.execute("SELECT pg_current_wal_lsn()")
    lsn0 = cur.fetchone()[0]
    elapsed = events.sync_once(cur, n, history)
    cur.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)", (lsn0,))
    return elapsed, float(cur.fetchone()[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    cur, n = db.bench_pods()
    runs = {False: [], True: []}
    for _ in range(a.repeat):
        for history in (False, True):
            runs[history].append(sync_once(cur, n, history))
    cur.execute("SELECT pg_total_relation_size('k8s.pods_history'), count(*) FROM k8s.pods_history")
    size, rows = cur.fetchone()

    base = statistics.median(t for t, _ in runs[False])
    hist = statistics.median(t for t, _ in runs[True])
    wal_base = statistics.median(w for _, w in runs[False]) / n
    wal_hist = statistics.median(w for _, w in runs[True]) / n
    print()
    print("kwatch history benchmark (%d pods, median of %d syncs each)" % (n, a.repeat))
    print("  initial sync without history  %.2f s   (%s)" % (base, ", ".join("%.2f" % t for t, _ in runs[False])))
    print("  initial sync with history     %.2f s   (%s)" % (hist, ", ".join("%.2f" % t for t, _ in runs[True])))
    print("  history's cost per change     %.0f us" % ((hist - base) / n * 1e6))
    print("  WAL per change                %.0f bytes without, %.0f with history" % (wal_base, wal_hist))
    print("  k8s.pods_history              %d rows, %.1f MB with indexes" % (rows, size / 1e6))
    # leave the table as bench.py made it: without history
    sync_once(cur, n, False)


if __name__ == "__main__":
    main()
