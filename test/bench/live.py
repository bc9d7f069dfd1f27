#!/usr/bin/python3
"""Live foreign table scan vs the mirror table.  Prints a report; asserts nothing.

usage: live.py --pods N   (environment as bench.py: PG*, KWATCH_K8S_SERVER,
                           KWATCH_K8S_TOKEN, KWATCH_K8S_CA, KUBECONFIG)

1. creates N pods (bench.py's template) in namespace kwatch-live-bench with
   one `kubectl apply` of a List;
2. IMPORT FOREIGN SCHEMA k8s LIMIT TO (pods) and times live scans of the
   namespace (all columns incl. object, and two columns), sampling the
   backend's private memory (RssAnon) every 10 ms;
3. kwatch.watch('pods') on the same server, waits for the mirror, and times
   the same queries on k8s.pods.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse

import psycopg2

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import api, rss_kb, template  # noqa: E402

NS = "kwatch-live-bench"
SERVER = "livebench"


def timed(conn, query, params=None):
    """(seconds, rows, peak RssAnon growth in kB) of one query on conn."""
    cur = conn.cursor()
    cur.execute("SELECT pg_backend_pid()")
    pid = cur.fetchone()[0]
    base = rss_kb(pid)[0]
    peak = [base]
    stop = [False]

    def sample():
        while not stop[0]:
            peak[0] = max(peak[0], rss_kb(pid)[0])
            time.sleep(0.01)
    t = threading.Thread(target=sample)
    t.start()
    t0 = time.monotonic()
    cur.execute(query, params)
    rows = cur.fetchall()
    dt = time.monotonic() - t0
    stop[0] = True
    t.join()
    return dt, rows, peak[0] - base


def run(conn, label, query, params, repeat=3):
    res = [timed(conn, query, params) for _ in range(repeat)]
    dt = statistics.median(r[0] for r in res)
    mem = max(r[2] for r in res)
    print(f"  {label:<58} {dt * 1000:8.0f} ms   backend +{mem / 1024:6.1f} MB   rows {res[0][1][0] if len(res[0][1]) == 1 else len(res[0][1])}")
    return dt, mem


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pods", type=int, default=2000)
    args = ap.parse_args()
    kube = os.environ["KUBECONFIG"]

    subprocess.run(["kubectl", "create", "namespace", NS], capture_output=True)
    items = []
    for i in range(args.pods):
        p = dict(template(), apiVersion="v1", kind="Pod")
        p["metadata"]["namespace"] = NS
        p["metadata"]["name"] = "live-%05d" % i
        p["metadata"]["labels"] = dict(p["metadata"].get("labels", {}), app="web" if i % 10 == 0 else "other")
        items.append(p)
    t0 = time.monotonic()
    subprocess.run(["kubectl", "apply", "-f", "-"], check=True, capture_output=True,
                   input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}).encode())
    print(f"created {args.pods} pods with one kubectl apply in {time.monotonic() - t0:.1f} s")

    # baseline: what any client pays for the same paginated LIST
    def bare_list():
        t0, cont, n = time.monotonic(), None, 0
        while True:
            path = "/api/v1/namespaces/%s/pods?limit=500" % NS
            if cont:
                path += "&continue=" + urllib.parse.quote(cont)
            status, body = api("GET", path)
            n += len(json.loads(body)["items"])
            cont = json.loads(body)["metadata"].get("continue")
            if not cont:
                return time.monotonic() - t0, n
    runs = [bare_list() for _ in range(3)]
    print(f"bare paginated LIST (Python urllib + json.loads, limit=500): "
          f"{statistics.median(r[0] for r in runs) * 1000:.0f} ms for {runs[0][1]} pods")

    conn = psycopg2.connect("")
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("CREATE EXTENSION IF NOT EXISTS kwatch")
    cur.execute(f"DROP SERVER IF EXISTS {SERVER} CASCADE")
    cur.execute(f"CREATE SERVER {SERVER} FOREIGN DATA WRAPPER kwatch OPTIONS (kubeconfig %s)", (kube,))
    cur.execute("DROP SCHEMA IF EXISTS live CASCADE; CREATE SCHEMA live")
    cur.execute(f"IMPORT FOREIGN SCHEMA k8s LIMIT TO (pods) FROM SERVER {SERVER} INTO live")
    cur.execute("SHOW kwatch.list_page_size")
    print(f"kwatch.list_page_size = {cur.fetchone()[0]}")

    full = "SELECT count(*), sum(length(object::text)) FROM {t} WHERE namespace = %s{c}"
    two = "SELECT name, phase FROM {t} WHERE namespace = %s{c}"
    sel = "SELECT name, phase FROM {t} WHERE namespace = %s AND labels->>'app' = 'web'{c}"

    print("live foreign table (each a LIST against the API server; median of 3):")
    conn2 = psycopg2.connect("")
    for label, q in (("all columns, whole namespace", full), ("name, phase, whole namespace", two),
                     ("name, phase, labels->>'app' = 'web' (10%)", sel)):
        run(conn2, label, q.format(t="live.pods", c=""), (NS,))
    conn2.close()

    cur.execute(f"SELECT kwatch.watch('pods', server => '{SERVER}')")
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        cur.execute("SELECT count(*) FROM k8s.pods WHERE cluster = %s AND namespace = %s", (SERVER, NS))
        if cur.fetchone()[0] == args.pods:
            break
        time.sleep(0.5)
    print("mirror table k8s.pods (local; median of 3):")
    conn3 = psycopg2.connect("")
    for label, q in (("all columns, whole namespace", full), ("name, phase, whole namespace", two),
                     ("name, phase, labels->>'app' = 'web' (10%)", sel)):
        run(conn3, label, q.format(t="k8s.pods", c=" AND cluster = '%s'" % SERVER), (NS,))
    conn3.close()

    cur.execute(f"SELECT kwatch.unwatch('pods', server => '{SERVER}', drop_table => true)")
    cur.execute("DROP SCHEMA live CASCADE")
    cur.execute(f"DROP SERVER {SERVER} CASCADE")
    subprocess.run(["kubectl", "delete", "namespace", NS, "--wait=false"], capture_output=True)


if __name__ == "__main__":
    main()
