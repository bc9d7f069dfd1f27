#!/usr/bin/python3
"""Label selectors' cost (issue 49): kwatch.matches_labels(labels, selector)
beside the hand-written query that means the same, on pods-shaped rows.
Prints a report (report.py selectors_markdown); asserts nothing.

usage: label_selectors.py [--rows 50000] [--rounds 15] [--json PATH]

Needs only a PostgreSQL with kwatch installed (the PG* environment names the
database; `make bench` runs it after printed.py), so it runs alone too:
    PGHOST=... PGDATABASE=... python3 test/bench/label_selectors.py
It makes a temporary table of `rows` rows with the columns and the index a
mirror table has for labels (`labels jsonb`, GIN `jsonb_path_ops`), each
row's labels those of a Deployment's pod: app (one of 100), tier (web, api,
cache, db; absent on one row in 5), env (prod, staging, dev) and
pod-template-hash (one of 3 per app).  Each selector query and its
hand-written twin (`labels @> ...` and `labels->>` tests that keep the rows
without the key, as `!=` does) run `rounds` times (each sample the mean of 5 executions), rounds
interleaved, which of a pair goes first alternating;
medians, the ratio selector / hand-written (target <= 1.5), rows and the
plan's scan are reported.
"""
import argparse
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import db  # noqa: E402
import report  # noqa: E402

CASES = [
    ("app=app-7", "labels @> '{\"app\": \"app-7\"}'"),
    ("app=app-7,tier!=db",
     "labels @> '{\"app\": \"app-7\"}' AND (labels->>'tier') IS DISTINCT FROM 'db'"),
    ("app=app-7,env in (prod),pod-template-hash",
     "labels @> '{\"app\": \"app-7\", \"env\": \"prod\"}' AND labels ? 'pod-template-hash'"),
    ("env in (prod,staging),tier notin (db,cache)",
     "labels->>'env' IN ('prod', 'staging') AND (labels->>'tier' IS NULL OR labels->>'tier' NOT IN ('db', 'cache'))"),
]


BATCH = 5   # executions per sample: a sample under a millisecond is mostly jitter


def timed(cur, q):
    """(seconds per execution of q, averaged over BATCH, its count)."""
    t = time.perf_counter()
    for _ in range(BATCH):
        cur.execute(q)
        n = cur.fetchone()[0]
    return (time.perf_counter() - t) / BATCH, n


def scan_of(cur, q):
    cur.execute("EXPLAIN (COSTS OFF) " + q)
    plan = [r[0] for r in cur.fetchall()]
    for scan in ("Bitmap Index Scan", "Index Scan", "Seq Scan"):
        if any(scan in p for p in plan):
            return scan
    return "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=50000)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--json")
    args = ap.parse_args()
    cur = db.connect().cursor()
    cur.execute("CREATE EXTENSION IF NOT EXISTS kwatch")
    cur.execute("CREATE TEMP TABLE selector_pods (name text, labels jsonb NOT NULL)")
    cur.execute("""INSERT INTO selector_pods
        SELECT 'pod-' || i, jsonb_strip_nulls(jsonb_build_object(
                 'app', 'app-' || (i %% 100),
                 'tier', CASE WHEN i / 100 %% 5 = 0 THEN NULL ELSE (ARRAY['web', 'api', 'cache', 'db'])[i / 100 %% 4 + 1] END,
                 'env', (ARRAY['prod', 'staging', 'dev'])[i / 10 %% 3 + 1],
                 'pod-template-hash', substr(md5('rs' || (i %% 300)), 1, 10)))
          FROM generate_series(1, %s) i""", (args.rows,))
    cur.execute("CREATE INDEX ON selector_pods USING gin (labels jsonb_path_ops)")
    cur.execute("ANALYZE selector_pods")
    queries = []
    for sel, hand in CASES:
        queries.append(("SELECT count(*) FROM selector_pods WHERE kwatch.matches_labels(labels, '%s')" % sel,
                        "SELECT count(*) FROM selector_pods WHERE " + hand))
    times = [([], []) for _ in queries]
    rows = [None] * len(queries)
    for q in queries:                      # warm: caches, the plan's first parse
        timed(cur, q[0]), timed(cur, q[1])
    for rnd in range(args.rounds):
        for i, (qs, qh) in enumerate(queries):
            # which of the two goes first alternates: the second of a pair
            # runs on the caches the first warmed
            if rnd % 2 == 0:
                ts, ns = timed(cur, qs)
                th, nh = timed(cur, qh)
            else:
                th, nh = timed(cur, qh)
                ts, ns = timed(cur, qs)
            times[i][0].append(ts)
            times[i][1].append(th)
            rows[i] = (ns, nh)
    results = []
    for i, (sel, hand) in enumerate(CASES):
        s, h = statistics.median(times[i][0]), statistics.median(times[i][1])
        results.append({"selector": sel, "hand_written": hand, "selector_ms": s * 1000,
                        "hand_written_ms": h * 1000, "ratio": s / h, "rows": rows[i][0],
                        "rows_hand_written": rows[i][1],
                        "selector_scan": scan_of(cur, queries[i][0]),
                        "hand_written_scan": scan_of(cur, queries[i][1])})
    cur.execute("EXPLAIN (COSTS OFF) " + queries[1][0])
    plan = [r[0] for r in cur.fetchall()]
    rep = {"selectors": results, "plan": plan,
           "meta": {"date": time.strftime("%Y-%m-%d"), "machine": "%s, %d CPUs" % (platform.machine(), os.cpu_count()),
                    "rows": args.rows, "rounds": args.rounds}}
    report.emit(rep, report.json_path(args.json, "selectors.json"), report.selectors_markdown)


if __name__ == "__main__":
    main()
