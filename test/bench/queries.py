"""Label-selector and field queries three ways, same run (issue 10, item 5).
Imported by bench.py; returns a list of dicts, one per query.

For each query the same question is asked of
  mirror   the kwatch mirror k8s.pods (indexes: GIN on labels, btree on
           (namespace, name)); median of `mirror_runs` round trips through
           psycopg2, rows fetched;
  live     kwatch's live foreign table of the same server (IMPORT FOREIGN
           SCHEMA k8s LIMIT TO (pods) INTO bench_live): each scan is a LIST
           with the selectors pushed down; median of `slow_runs`;
  kubectl  `kubectl get pods ... -l/--field-selector ... -o name` (or -o
           json): wall time of the process, median of `slow_runs`.
Row counts are reported for each, so a mismatch shows.
"""
import json
import statistics
import subprocess
import time

from bench import NS

# (label, mirror/live WHERE clause, kubectl arguments, selected column)
QUERIES = [
    ("label app=app-7 (2%)", "labels @> '{\"app\": \"app-7\"}'", ["-A", "-l", "app=app-7"], "name"),
    ("label tier in (web,ops) (67%)", "labels->>'tier' IN ('web', 'ops')",
     ["-A", "-l", "tier in (web,ops)"], "name"),
    ("field metadata.name (1 pod)", "namespace = '%s' AND name = 'bench-000123'" % NS,
     ["-n", NS, "--field-selector", "metadata.name=bench-000123"], "name"),
    ("field status.phase=Running (all)", "phase = 'Running'",
     ["-A", "--field-selector", "status.phase=Running"], "name"),
    ("label app=app-7, whole objects", "labels @> '{\"app\": \"app-7\"}'", ["-A", "-l", "app=app-7"],
     "object"),
]


def _median_time(fn, runs):
    times, out = [], None
    for _ in range(runs):
        t0 = time.monotonic()
        out = fn()
        times.append(time.monotonic() - t0)
    return statistics.median(times), out


def run(conn, server, mirror_runs=20, slow_runs=3):
    cur = conn.cursor()
    cur.execute("DROP SCHEMA IF EXISTS bench_live CASCADE")
    cur.execute("CREATE SCHEMA bench_live")
    cur.execute("IMPORT FOREIGN SCHEMA k8s LIMIT TO (pods) FROM SERVER %s INTO bench_live" % server)
    results = []
    for label, where, kargs, col in QUERIES:
        mirror_sql = "SELECT %s FROM k8s.pods WHERE cluster = '%s' AND %s" % (col, server, where)
        live_sql = "SELECT %s FROM bench_live.pods WHERE %s" % (col, where)

        def q(sql):
            cur.execute(sql)
            return len(cur.fetchall())
        q(mirror_sql)   # plan cache, buffers
        m_s, m_rows = _median_time(lambda: q(mirror_sql), mirror_runs)
        cur.execute("EXPLAIN (FORMAT JSON) " + live_sql)
        request = cur.fetchone()[0][0]["Plan"].get("Kubernetes Request")
        l_s, l_rows = _median_time(lambda: q(live_sql), slow_runs)
        out = "json" if col == "object" else "name"

        def kubectl():
            p = subprocess.run(["kubectl", "get", "pods"] + kargs + ["-o", out], capture_output=True,
                               check=True)
            if out == "json":
                return len(json.loads(p.stdout)["items"])
            return len(p.stdout.splitlines())
        k_s, k_rows = _median_time(kubectl, slow_runs)
        results.append({"query": label, "sql": mirror_sql, "live_request": request,
                        "kubectl": "kubectl get pods %s -o %s" % (" ".join(kargs), out),
                        "mirror_ms": m_s * 1000, "mirror_rows": m_rows,
                        "live_ms": l_s * 1000, "live_rows": l_rows,
                        "kubectl_ms": k_s * 1000, "kubectl_rows": k_rows})
    cur.execute("DROP SCHEMA bench_live CASCADE")
    return results
