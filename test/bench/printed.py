#!/usr/bin/python3
"""kubectl's columns benchmark (issue 35; after bench.py, same environment):
what the view kubectl.pods costs to query, what an expression index on a
printer function costs on the sync, and `kubectl get pods -A | grep` for the
same question.  Prints a report; asserts nothing.

usage: printed.py [--repeat 3]

On the pods bench.py left in k8s.pods (server bench), every statement run
`repeat` times, rounds interleaved, medians reported:
  - `SELECT name, ready, status, restarts, age FROM kubectl.pods WHERE
    status = 'CrashLoopBackOff'`: without an index (every row's cells
    computed) and with `CREATE INDEX ON k8s.pods (kwatch.pod_status(object))`;
  - the whole view (every cell of every row) beside `SELECT * FROM k8s.pods`
    without `object`, the floor;
  - `kubectl get pods -A -o wide | grep CrashLoopBackOff` against the API
    server ($KUBECONFIG), the way a shell user asks;
  - the cost on the initial sync: INSERT ... SELECT of the same N objects
    (cluster, uid, resource_version, object: what the worker writes) into
    an empty mirror table without and with the expression index, and the
    index's size.  The view itself adds nothing to a sync (it is a view);
    only an index a user adds does.
bench.py's pods are Running with a kubelet's status, one in 100 in
CrashLoopBackOff (bench.pod_status), so the query finds 1% of the rows.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import db  # noqa: E402

QUERY = ("SELECT name, ready, status, restarts, age FROM kubectl.pods "
         "WHERE cluster = 'bench' AND status = 'CrashLoopBackOff'")
# every cell made into text (count(*) alone would let the planner skip the
# view's columns and measure nothing)
WHOLE_VIEW = "SELECT sum(length(v::text)) FROM (SELECT * FROM kubectl.pods WHERE cluster = 'bench') v"
FLOOR = ("SELECT sum(length(v::text)) FROM (SELECT cluster, namespace, name, uid, created_at, labels "
         "FROM k8s.pods WHERE cluster = 'bench') v")


def timed(cur, q):
    t = time.perf_counter()
    cur.execute(q)
    cur.fetchall()
    return time.perf_counter() - t


def kubectl_grep():
    t = time.perf_counter()
    subprocess.run("kubectl get pods -A -o wide | grep CrashLoopBackOff", shell=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t


def sync_copy(cur, indexed):
    """INSERT ... SELECT of bench's pods into a new mirror table (with the
    expression index first when `indexed`); returns (seconds, index bytes)."""
    cur.execute("DROP TABLE IF EXISTS k8s.pods_printed_bench")
    cur.execute("SELECT kwatch.create_mirror_table('pods_printed_bench', '', 'v1', 'pods')")
    if indexed:
        cur.execute("CREATE INDEX pods_printed_bench_status ON k8s.pods_printed_bench "
                    "(kwatch.pod_status(object))")
    t = time.perf_counter()
    cur.execute("INSERT INTO k8s.pods_printed_bench (cluster, uid, resource_version, object) "
                "SELECT cluster, uid, resource_version, object FROM k8s.pods WHERE cluster = 'bench'")
    elapsed = time.perf_counter() - t
    size = 0
    if indexed:
        cur.execute("SELECT pg_relation_size('k8s.pods_printed_bench_status')")
        size = cur.fetchone()[0]
    return elapsed, size


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    cur, n = db.bench_pods()
    cur.execute("SELECT to_regclass('kubectl.pods') IS NOT NULL")
    if not cur.fetchone()[0]:
        print("printed.py: no view kubectl.pods (watch('pods') makes it)")
        return
    cur.execute("DROP INDEX IF EXISTS k8s.pods_printed_status")
    r = {k: [] for k in ("query", "query_indexed", "view", "floor", "kubectl",
                         "sync", "sync_indexed", "index_build")}
    size = 0
    for _ in range(a.repeat):
        r["query"].append(timed(cur, QUERY))
        r["view"].append(timed(cur, WHOLE_VIEW))
        r["floor"].append(timed(cur, FLOOR))
        r["kubectl"].append(kubectl_grep())
        t = time.perf_counter()
        cur.execute("CREATE INDEX pods_printed_status ON k8s.pods (kwatch.pod_status(object))")
        r["index_build"].append(time.perf_counter() - t)
        cur.execute("ANALYZE k8s.pods")
        r["query_indexed"].append(timed(cur, QUERY))
        cur.execute("DROP INDEX k8s.pods_printed_status")
        for indexed in (False, True):
            elapsed, s = sync_copy(cur, indexed)
            r["sync_indexed" if indexed else "sync"].append(elapsed)
            size = s or size
    cur.execute("DROP TABLE IF EXISTS k8s.pods_printed_bench")
    med = {k: statistics.median(v) for k, v in r.items()}
    print()
    print("kwatch: kubectl's columns (kubectl.pods), %d pods, median of %d rounds" % (n, a.repeat))
    print("  WHERE status = 'CrashLoopBackOff', no index   %8.3f s" % med["query"])
    print("  the same with an index on pod_status(object) %8.4f s  (index built in %.2f s)"
          % (med["query_indexed"], med["index_build"]))
    print("  kubectl get pods -A -o wide | grep            %8.3f s" % med["kubectl"])
    print("  whole view, every cell                        %8.3f s  (%.1f us per row)"
          % (med["view"], med["view"] / max(n, 1) * 1e6))
    print("  the same rows without printed cells (floor)   %8.3f s" % med["floor"])
    print("  sync of %d objects into an empty table        %8.2f s  without the index" % (n, med["sync"]))
    print("                                                %8.2f s  with it (+%.1f us per object; index %.1f MB)"
          % (med["sync_indexed"], (med["sync_indexed"] - med["sync"]) / max(n, 1) * 1e6, size / 1e6))


if __name__ == "__main__":
    main()
