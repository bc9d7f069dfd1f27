#!/usr/bin/python3
"""Acting on the cluster (issue 32; after bench.py, same environment):
kwatch.apply() at commit beside `kubectl apply --server-side`.  Prints a
report; asserts nothing.

usage: applies.py [--objects 1000] [--latency 100]

1. `objects` ConfigMaps applied at commit in one transaction, from COMMIT
   until the request sender has applied them all (kwatch.applies), as
   applies per second; the same objects again with `kubectl apply
   --server-side` of one document holding them all (one process), and a
   sample of them with one kubectl process per object (as a script calling
   kubectl per row would);
2. the time from COMMIT of one apply to the mirror table showing the new
   value (a watch of the namespace's ConfigMaps), `latency` times, p50 and
   p99.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import db  # noqa: E402

NS = "kwatch-bench-apply-%d" % int(time.time())   # fresh objects each run


def kubectl(*args, input=None):
    p = subprocess.run(["kubectl", *args], input=input, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit("kubectl %s: %s" % (" ".join(args), p.stderr[-2000:]))
    return p.stdout


def manifest(i, value):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm-%05d" % i, "namespace": NS}, "data": {"v": value}}


def wait_applied(cur, first_id, n, timeout=600):
    t0 = time.time()
    while True:
        cur.execute("SELECT count(*) FILTER (WHERE state = 'applied'), count(*) FILTER (WHERE state = 'failed')"
                    " FROM kwatch.applies WHERE id >= %s", (first_id,))
        ok, failed = cur.fetchone()
        if ok + failed >= n:
            return failed
        if time.time() - t0 > timeout:
            raise SystemExit("applies did not finish in %d s" % timeout)
        time.sleep(0.02)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, default=1000)
    ap.add_argument("--latency", type=int, default=100)
    a = ap.parse_args()
    conn = db.connect()
    cur = conn.cursor()
    subprocess.run(["kubectl", "create", "namespace", NS], capture_output=True)
    cur.execute("SELECT kwatch.watch('configmaps', server => 'bench', namespace => %s,"
                " table_name => 'bench_apply_cms')", (NS,))
    cur.execute("SELECT kwatch.wait_synced('bench_apply_cms', server => 'bench', timeout => '2 min')")

    # 1. one transaction of N applies at commit
    tx = db.connect()
    tx.autocommit = False
    tc = tx.cursor()
    for i in range(a.objects):
        tc.execute("SELECT (kwatch.apply(%s::jsonb, server => 'bench', force => true)).id",
                   (json.dumps(manifest(i, "1")),))
        if i == 0:
            first = tc.fetchone()[0]
    t0 = time.time()
    tx.commit()
    failed = wait_applied(cur, first, a.objects)
    kwatch_s = time.time() - t0
    tx.close()

    doc = json.dumps({"apiVersion": "v1", "kind": "List", "items": [manifest(i, "2") for i in range(a.objects)]})
    t0 = time.time()
    kubectl("apply", "--server-side", "--force-conflicts", "--field-manager=bench-kubectl", "-f", "-", input=doc)
    kubectl_all_s = time.time() - t0
    sample = min(50, a.objects)
    t0 = time.time()
    for i in range(sample):
        kubectl("apply", "--server-side", "--force-conflicts", "--field-manager=bench-kubectl", "-f", "-",
                input=json.dumps(manifest(i, "3")))
    kubectl_each_s = (time.time() - t0) / sample

    # 2. COMMIT -> mirror
    lat = []
    for k in range(a.latency):
        value = "lat-%d" % k
        t0 = time.time()
        cur.execute("SELECT (kwatch.apply(%s::jsonb, server => 'bench', force => true)).id",
                    (json.dumps(manifest(0, value)),))
        while True:
            cur.execute("SELECT object->'data'->>'v' FROM k8s.bench_apply_cms WHERE name = 'cm-00000'")
            r = cur.fetchone()
            if r and r[0] == value:
                break
            if time.time() - t0 > 60:
                raise SystemExit("the mirror did not show the apply in 60 s")
            time.sleep(0.001)
        lat.append((time.time() - t0) * 1000)
    lat.sort()

    cur.execute("SELECT kwatch.unwatch('bench_apply_cms', server => 'bench', drop_table => true)")
    subprocess.run(["kubectl", "delete", "namespace", NS, "--wait=false"], capture_output=True)
    print()
    print("kwatch: acting on the cluster, %d ConfigMaps" % a.objects)
    print("  kwatch.apply() at commit, one transaction    %7.2f s  %7.0f applies/s  (%d failed)"
          % (kwatch_s, a.objects / kwatch_s, failed))
    print("  kubectl apply --server-side, one process     %7.2f s  %7.0f objects/s" % (kubectl_all_s, a.objects / kubectl_all_s))
    print("  kubectl apply --server-side, one per object  %7.3f s each  %5.1f objects/s (sample of %d)"
          % (kubectl_each_s, 1 / kubectl_each_s, sample))
    print("  COMMIT -> mirror row shows the change        p50 %.1f ms, p99 %.1f ms over %d applies"
          % (statistics.median(lat), lat[int(len(lat) * 0.99) - 1], len(lat)))


if __name__ == "__main__":
    main()
