#!/usr/bin/python3
"""kwatch beside its peers, in one run (issue 10).  Prints a Markdown report
and writes the same figures as JSON; asserts nothing.

usage: bench.py --pods N [--repeat R] [--json FILE] [--skip NAME,...]
       (environment: PG* for PostgreSQL, KWATCH_K8S_SERVER, KWATCH_K8S_TOKEN,
        KWATCH_K8S_CA, KWATCH_K8S_PKI, KUBECONFIG; KWATCH_BENCH_DIR for the
        informer build and scratch files)

1. creates N realistic pods (the recorded v1.20 coredns pod of
   test/fixtures/pod-v1.20.json as template: labels app=app-<i%50>,
   tier=web|backend|ops, annotations, full spec, then its Running status
   with the pod's own IPs written to pods/status as a kubelet does, one in
   100 in CrashLoopBackOff: pod_status()) in namespace kwatch-bench, with 16
   concurrent clients;
2. the anchors (anchors.py), R rounds, each one after another on the same
   cluster and objects: kwatch's initial sync, the client-go informer (JSON
   with and without gzip, protobuf), kubectl get -o json, the LIST floor
   (rv=0 and paged), the COPY floor; the median of each is reported, with
   the ratios kwatch/informer and kwatch/max(LIST floor, COPY floor);
3. the cost of an unchanged relist and WAL per applied event (costs.py);
4. label and field queries on the mirror, the live table and kubectl
   (queries.py);
5. event -> notification delay: patches M pods one by one and times each
   PATCH response -> NOTIFY receipt on a LISTENing connection.
Skippable parts (--skip): informer, kubectl, list, copy, relist, wal, queries,
notify.
"""
import argparse
import datetime
import concurrent.futures
import json
import os
import select
import ssl
import statistics
import sys
import time
import urllib.request

import psycopg2

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from measure import machine  # noqa: E402,F401  (scale.py imports it from here)
SERVER = os.environ["KWATCH_K8S_SERVER"]
TOKEN = os.environ["KWATCH_K8S_TOKEN"]
CTX = ssl.create_default_context(cafile=os.environ["KWATCH_K8S_CA"])
NS = "kwatch-bench"


def api(method, path, body=None, ctype="application/json"):
    req = urllib.request.Request(SERVER + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None)
    req.add_header("Authorization", "Bearer " + TOKEN)
    req.add_header("Content-Type", ctype)
    req.add_header("User-Agent", "kwatch-bench")
    try:
        with urllib.request.urlopen(req, context=CTX, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def template():
    pod = json.load(open(os.path.join(HERE, "..", "fixtures", "pod-v1.20.json")))
    meta = pod["metadata"]
    for k in ("uid", "resourceVersion", "creationTimestamp", "managedFields", "ownerReferences",
              "generateName", "selfLink"):
        meta.pop(k, None)
    meta["namespace"] = NS
    meta["annotations"] = {"kwatch.io/bench": "true", "prometheus.io/scrape": "true",
                           "prometheus.io/port": "9153"}
    pod["spec"].pop("nodeName", None)
    pod.pop("status", None)
    return pod


def pod_status(i):
    """The status a kubelet would have written for bench pod i (PUT to the
    pods/status subresource after the create, as a kubelet does): the
    recorded pod's Running status with pod i's own IP and container ID; one
    pod in 100 is in CrashLoopBackOff (restarts, last state terminated).
    It makes the served pod what users have (about 9 KB with the two
    managedFields entries) rather than a 5 KB pod without status."""
    st = json.load(open(os.path.join(HERE, "..", "fixtures", "pod-v1.20.json")))["status"]
    ip = f"10.{64 + (i >> 16) % 64}.{(i >> 8) & 255}.{i & 255}"
    st["podIP"], st["podIPs"] = ip, [{"ip": ip}]
    st["hostIP"] = f"172.20.{(i // 110) >> 8 & 255}.{(i // 110) & 255}"
    c = st["containerStatuses"][0]
    c["containerID"] = "containerd://%064x" % (i * 2654435761 % (1 << 256))
    if i % 100 == 99:
        c["ready"], c["started"], c["restartCount"] = False, False, 7
        c["state"] = {"waiting": {"reason": "CrashLoopBackOff",
                                  "message": "back-off 5m0s restarting failed container=coredns"}}
        c["lastState"] = {"terminated": {"exitCode": 1, "reason": "Error",
                                         "startedAt": "2022-01-20T05:40:11Z",
                                         "finishedAt": "2022-01-20T05:40:12Z",
                                         "containerID": c["containerID"]}}
        for cond in st["conditions"]:
            if cond["type"] in ("Ready", "ContainersReady"):
                cond["status"], cond["reason"] = "False", "ContainersNotReady"
                cond["message"] = "containers with unready status: [coredns]"
    return st


def rss_kb(pid):
    """(private resident memory, peak resident memory) in kB.  RssAnon leaves
    out the shared buffers the worker touched, which are PostgreSQL's cache,
    not kwatch's memory."""
    with open(f"/proc/{pid}/status") as f:
        d = dict(line.split(":", 1) for line in f)
    return int(d["RssAnon"].split()[0]), int(d["VmHWM"].split()[0])


def create_pods(n):
    """Creates the pods that are missing; returns seconds taken or None."""
    api("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
    status, body = api("GET", f"/api/v1/namespaces/{NS}/pods?limit=1")
    have = json.loads(body).get("metadata", {}).get("remainingItemCount", 0) + \
        len(json.loads(body).get("items", []))
    t = template()
    if have >= n:
        return None
    print(f"creating {n - have} pods (~{len(json.dumps(t))} bytes of JSON each)...", flush=True)
    t0 = time.time()

    def make(i):
        p = json.loads(json.dumps(t))
        p["metadata"]["name"] = f"bench-{i:06d}"
        p["metadata"]["labels"] = {"app": f"app-{i % 50}", "tier": ["web", "backend", "ops"][i % 3],
                                   "bench": "true"}
        s, b = api("POST", f"/api/v1/namespaces/{NS}/pods", p)
        if s == 409:
            s, b = api("GET", f"/api/v1/namespaces/{NS}/pods/{p['metadata']['name']}")
        if s not in (200, 201):
            raise RuntimeError(f"create failed {s}: {b[:200]}")
        made = json.loads(b)
        if made.get("status", {}).get("podIP"):
            return
        made["status"] = pod_status(i)
        s, b = api("PUT", f"/api/v1/namespaces/{NS}/pods/{p['metadata']['name']}/status", made)
        if s != 200:
            raise RuntimeError(f"status update failed {s}: {b[:200]}")
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        list(ex.map(make, range(have, n)))
    return time.time() - t0


def count_pods():
    """Pods in all namespaces (what every anchor lists), and bytes per pod."""
    s, b = api("GET", "/api/v1/pods?limit=1")
    d = json.loads(b)
    return d["metadata"].get("remainingItemCount", 0) + len(d["items"]), len(json.dumps(d["items"][0]))


def notify_delay(events):
    """PATCH one pod at a time; PATCH response -> NOTIFY received."""
    lconn = psycopg2.connect("")
    lconn.autocommit = True
    lconn.cursor().execute("LISTEN kwatch_pods")
    delays = []
    for i in range(events):
        name = f"bench-{i:06d}"
        s, _ = api("PATCH", f"/api/v1/namespaces/{NS}/pods/{name}",
                   {"metadata": {"labels": {"bench-seq": str(time.time_ns())}}},
                   ctype="application/merge-patch+json")
        t_sent = time.time()
        got = False
        while not got and time.time() - t_sent < 10:
            if select.select([lconn], [], [], 1) == ([], [], []):
                continue
            lconn.poll()
            while lconn.notifies:
                p = json.loads(lconn.notifies.pop(0).payload)
                if p["name"] == name and p["type"] == "MODIFIED":
                    delays.append((time.time() - t_sent) * 1000)
                    got = True
    lconn.close()
    delays.sort()
    if not delays:
        return None
    return {"events": len(delays), "p50_ms": statistics.median(delays),
            "p95_ms": delays[max(0, int(len(delays) * 0.95) - 1)], "max_ms": delays[-1]}


def mem_available_mb():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    return 0


def median_row(runs):
    """The run of median seconds (its RSS and CPU with it), all runs kept."""
    runs = sorted(runs, key=lambda r: r["seconds"])
    med = dict(runs[(len(runs) - 1) // 2])
    med["runs"] = [{k: r[k] for k in ("seconds", "rss_mb", "cpu_s", "apiserver_cpu_s")} for r in runs]
    return med


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pods", type=int, default=10000)
    ap.add_argument("--events", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=None,
                    help="rounds of anchors (default 3 up to 20,000 pods, else 1)")
    ap.add_argument("--json", default=None, help="where to write the JSON report")
    ap.add_argument("--skip", default="", help="comma-separated parts to skip")
    a = ap.parse_args()
    skip = set(filter(None, a.skip.split(",")))
    repeat = a.repeat or (3 if a.pods <= 20000 else 1)
    bench_dir = os.environ.get("KWATCH_BENCH_DIR", "/var/tmp/kwatch-bench")
    out_json = a.json or os.path.join(bench_dir, "bench-%d.json" % a.pods)

    import anchors
    import costs
    import db
    import queries

    created = create_pods(a.pods)
    n, bytes_one = count_pods()
    conn = db.connect()
    cur = conn.cursor()
    _, postmaster = db.fresh_server(cur, "bench", 30)
    api_pid = anchors.apiserver_pid()
    anchors.setup(bench_dir)
    informer_bin = None if "informer" in skip else anchors.build_informer(bench_dir)

    print("measuring %d pods, %d round%s..." % (n, repeat, "s" if repeat > 1 else ""), flush=True)
    runs = {}
    notes = []
    copy_file = None
    for r in range(repeat):
        steps = [("kwatch", lambda: anchors.kwatch_sync(cur, "bench", n, postmaster, api_pid))]
        if informer_bin:
            steps += [("informer", lambda: anchors.informer(informer_bin, api_pid)),
                      ("informer", lambda: anchors.informer(informer_bin, api_pid, gzip=False)),
                      ("informer", lambda: anchors.informer(informer_bin, api_pid, protobuf=True))]
        if "kubectl" not in skip:
            # kubectl holds the whole list several times over (~230 kB per pod)
            if mem_available_mb() > n * 0.35:
                steps.append(("kubectl", lambda: anchors.kubectl_json(bench_dir, api_pid)))
            elif r == 0:
                notes.append("kubectl skipped: %.0f MB available, it needs ~%.0f MB" %
                             (mem_available_mb(), n * 0.35))
        if "list" not in skip:
            steps += [("list", lambda: anchors.list_rv0(n, api_pid)),
                      ("list", lambda: anchors.list_paged(n, api_pid))]
        if "copy" not in skip:
            steps.append(("copy", lambda: anchors.copy_floor(conn, copy_file, n, postmaster, api_pid)))
        for kind, step in steps:
            anchors.settle(api_pid, postmaster)
            res = step()
            runs.setdefault(res["name"], []).append(res)
            print("  round %d: %-52s %7.2f s  %7.0f MB  %6.2f CPU s" %
                  (r + 1, res["name"], res["seconds"], res["rss_mb"], res["cpu_s"]), flush=True)
            if kind == "kwatch" and copy_file is None and "copy" not in skip:
                # the objects exactly as kwatch stored them, for the COPY floor
                copy_file, _ = anchors.prepare_copy(cur, os.path.join(bench_dir, "pg"), "bench")
    if copy_file:
        os.unlink(copy_file)

    report = {"meta": {
        "date": datetime.date.today().isoformat(), "machine": machine(), "objects": n, "pods_arg": a.pods,
        "bytes_per_object": bytes_one, "rounds": repeat, "created_s": created,
        "setup": "kube-apiserver 1.20 (watch cache on) and PostgreSQL 15 (fsync off) on loopback",
        "rounds_note": "median of %d round%s, each measuring every row in turn" %
                       (repeat, "s" if repeat > 1 else "") if repeat > 1 else "one round",
        "mirror_runs": 20, "slow_runs": 3 if a.pods <= 20000 else 1}}
    report["anchors"] = [median_row(v) for v in runs.values()]
    report["anchor_notes"] = [
        "seconds: kwatch from the `watch()` call to its list merged, every row committed (`kwatch.wait_synced()` returns); informer "
        "from `Start` to `HasSynced` (its own clock); kubectl and curl the whole process; COPY the statement",
        "peak RSS: kwatch the summed RssAnon of the worker and the apply workers (private memory; "
        "shared buffers left out), sampled every 10 ms; the COPY backend's likewise; the other processes' ru_maxrss "
        "(wait4)",
        "CPU s: for kwatch and COPY the whole PostgreSQL instance (worker, apply workers, WAL writer, ...); for "
        "the others the process (user + system); the apiserver's CPU serving it apart",
        "LIST floor rv=0: one response from the watch cache (what an informer's and kwatch's first "
        "LIST ask); paged: limit=500 pages from etcd (a consistent read: kwatch.relist()), one "
        "keep-alive connection; both bodies discarded",
        "COPY floor: the rows kwatch wrote, as COPY text, loaded by a server-side COPY FROM file into a "
        "table LIKE k8s.pods INCLUDING ALL (generated columns, indexes, lz4)",
        "client-go asks for gzip by default (Accept-Encoding); kwatch does not "
        "(kwatch.http_compression off)"] + notes
    print()
    print("cost of an unchanged relist, WAL per event, queries...", flush=True)
    if "relist" not in skip:
        report["relist"] = costs.relist_unchanged(conn, "bench")
    if "wal" not in skip:
        report["wal_per_event"] = costs.wal_per_event(conn, "bench", min(500, a.pods))
    if "queries" not in skip:
        report["queries"] = queries.run(conn, "bench", report["meta"]["mirror_runs"],
                                        report["meta"]["slow_runs"])
    if "notify" not in skip:
        report["notify_delay"] = notify_delay(min(a.events, a.pods))
    cur.execute("SELECT pg_total_relation_size('k8s.pods')")
    report["meta"]["table_mb"] = cur.fetchone()[0] / 1e6

    with open(out_json, "w") as f:
        json.dump(report, f, indent=1)
    import report as rpt
    print()
    sys.stdout.write(rpt.markdown(report))
    print()
    print("(JSON: %s; README table: test/bench/report.py --readme test/bench/README.md %s)" % (out_json, out_json))


if __name__ == "__main__":
    main()
