#!/usr/bin/python3
"""Watch-event lag from the real API server, kwatch beside client-go (issue
10, item 2, second half).  Prints a Markdown report, writes JSON; asserts
nothing.

usage: evreal.py [--objects 200] [--bytes 2048] [--paced 200] [--seconds 10]
                 [--clients 6] [--json FILE]
       (environment as bench.py: PG*, KWATCH_K8S_SERVER, KWATCH_K8S_TOKEN,
        KWATCH_K8S_CA, KUBECONFIG; KWATCH_BENCH_DIR for the informer build)

1. creates --objects ConfigMaps of ~--bytes each in namespace kwatch-evreal;
2. watches them with kwatch (a foreign server of its own, the bench's
   kubeconfig) and with a client-go informer (test/bench/informer -lag: a
   ConfigMap informer on the namespace whose UpdateFunc records the
   resourceVersion and the time), both synced before anything changes; a
   LISTENing connection records when each notification arrives;
3. two phases of merge-PATCHes, each setting the annotation kwatch.io/sent
   to the time just before the request (Unix ns; the response's
   resourceVersion identifies the event):
     paced    --paced PATCHes one at a time (the API server idle between);
     ceiling  --clients processes, each one keep-alive connection PATCHing
              as fast as the API server answers, for --seconds: its ceiling
              on this machine, both clients under that load;
   lag = notification received (kwatch) or UpdateFunc called (client-go)
   minus the send time, same host clock; p50, p99, max for each, and
   kwatch p50 - client-go p50 (issue 10: within 5 ms);
4. unwatches (dropping the table), drops the server and the namespace's
   ConfigMaps stay for the next run.
"""
import argparse
import concurrent.futures
import datetime
import http.client
import json
import multiprocessing
import os
import ssl
import statistics
import subprocess
import sys
import time
import urllib.parse

import psycopg2

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import anchors  # noqa: E402
import db  # noqa: E402
import measure  # noqa: E402
from evstream import RV_RE, Listener, pct  # noqa: E402
from report import emit, json_path, evreal_markdown  # noqa: E402

NS = "kwatch-evreal"
SERVER = "evreal"
TABLE = "evreal_configmaps"


def connection():
    u = urllib.parse.urlsplit(os.environ["KWATCH_K8S_SERVER"])
    ctx = ssl.create_default_context(cafile=os.environ["KWATCH_K8S_CA"])
    return http.client.HTTPSConnection(u.hostname, u.port, context=ctx, timeout=60)


def request(conn, method, path, body=None, ctype="application/json"):
    conn.request(method, path, body=json.dumps(body).encode() if body is not None else None,
                 headers={"Authorization": "Bearer " + os.environ["KWATCH_K8S_TOKEN"],
                          "Content-Type": ctype, "User-Agent": "kwatch-bench"})
    r = conn.getresponse()
    return r.status, r.read()


def patch(conn, name):
    """One merge-PATCH stamping kwatch.io/sent; (resourceVersion, sent ns)."""
    sent = time.time_ns()
    s, b = request(conn, "PATCH", "/api/v1/namespaces/%s/configmaps/%s" % (NS, name),
                   {"metadata": {"annotations": {"kwatch.io/sent": str(sent)}}},
                   ctype="application/merge-patch+json")
    if s != 200:
        raise RuntimeError("PATCH %s: %d %s" % (name, s, b[:200]))
    return int(json.loads(b)["metadata"]["resourceVersion"]), sent


def patcher(args):
    """A ceiling client (its own process): PATCHes objects first, first +
    step, ... until `until` (time.time()); returns [(rv, sent ns)]."""
    first, step, objects, until = args
    conn, out, i = connection(), [], first
    while time.time() < until:
        out.append(patch(conn, "cm-%04d" % (i % objects)))
        i += step
    conn.close()
    return out


def ensure_objects(n, nbytes):
    conn = connection()
    request(conn, "POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
    s, b = request(conn, "GET", "/api/v1/namespaces/%s/configmaps" % NS)
    have = {o["metadata"]["name"] for o in json.loads(b)["items"]} if s == 200 else set()
    conn.close()
    missing = ["cm-%04d" % i for i in range(n) if "cm-%04d" % i not in have]

    def make(name):
        c = connection()
        data = {"key-%03d" % k: "%064d" % k for k in range(max(1, nbytes // 80))}
        s, b = request(c, "POST", "/api/v1/namespaces/%s/configmaps" % NS,
                       {"metadata": {"name": name, "labels": {"app": "evreal"}}, "data": data})
        c.close()
        if s not in (201, 409):
            raise RuntimeError("create %s: %d %s" % (name, s, b[:200]))
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        list(ex.map(make, missing))


def lags_of(sent_at, received):
    """Sorted lags in ms of the events in sent_at, from (rv, time ns) pairs
    (the first receipt of each resourceVersion)."""
    seen, lags = set(), []
    for rv, t in received:
        s = sent_at.get(rv)
        if s is not None and rv not in seen:
            seen.add(rv)
            lags.append((t - s) / 1e6)
    lags.sort()
    return lags


def summary(lags, n):
    if not lags:
        return {"events": n, "received": 0}
    return {"events": n, "received": len(lags), "p50_ms": statistics.median(lags), "p99_ms": pct(lags, 0.99),
            "max_ms": lags[-1]}


def counters(cur):
    cur.execute("SELECT modified, notifications, channel FROM kwatch.watches WHERE server = %s", (SERVER,))
    return cur.fetchone()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, default=200)
    ap.add_argument("--bytes", type=int, default=2048)
    ap.add_argument("--paced", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--clients", type=int, default=6)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    bench_dir = os.environ.get("KWATCH_BENCH_DIR", "/var/tmp/kwatch-bench")
    out_json = json_path(a.json, "evreal.json")

    ensure_objects(a.objects, a.bytes)
    informer_bin = anchors.build_informer(bench_dir)
    api_pid = anchors.apiserver_pid()

    conn = psycopg2.connect("")
    conn.autocommit = True
    cur = conn.cursor()
    db.fresh_server(cur, SERVER, 30)
    cur.execute("SELECT kwatch.watch('configmaps', server => %s, namespace => %s, table_name => %s)",
                (SERVER, NS, TABLE))
    cur.execute("SELECT kwatch.wait_synced('configmaps', server => %s, timeout => '120 s')", (SERVER,))
    cur.execute("SELECT kwatch.worker_pid()")
    worker = cur.fetchone()[0]
    channel = counters(cur)[2]
    listener = Listener(channel)
    listener.start()
    inf = subprocess.Popen([informer_bin, "-kubeconfig", os.environ["KUBECONFIG"], "-gzip=false", "-lag", NS],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    if inf.stdout.readline().strip() != "synced":
        sys.exit("the informer did not sync")

    phases = []
    try:
        for name in ("paced", "ceiling"):
            time.sleep(2)
            before = counters(cur)
            w0, api0, i0, t0 = (measure.cpu_s(worker), measure.cpu_s(api_pid), measure.cpu_s(inf.pid),
                                time.monotonic())
            if name == "paced":
                c = connection()
                sent = [patch(c, "cm-%04d" % (i % a.objects)) for i in range(a.paced)]
                c.close()
            else:
                until = time.time() + a.seconds
                with multiprocessing.Pool(a.clients) as pool:
                    parts = pool.map(patcher, [(k, a.clients, a.objects, until) for k in range(a.clients)])
                sent = [x for p in parts for x in p]
            send_s = time.monotonic() - t0
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                c_ = counters(cur)
                if c_[1] - before[1] >= len(sent):
                    break
                time.sleep(0.05)
            time.sleep(0.5)
            wall = time.monotonic() - t0
            phases.append({"name": name, "sent": sent, "send_s": send_s, "wall_s": wall,
                           "worker_cpu_pct": (measure.cpu_s(worker) - w0) / wall * 100,
                           "apiserver_cpu_pct": (measure.cpu_s(api_pid) - api0) / wall * 100,
                           "informer_cpu_pct": (measure.cpu_s(inf.pid) - i0) / wall * 100,
                           "notifications_counted": counters(cur)[1] - before[1],
                           "notify": [(int(m.group(1)), t) for t, ps in listener.take() for p in ps
                                      for m in [RV_RE.search(p)] if m]})
    finally:
        listener.stop()
        out, _ = inf.communicate("", timeout=60)
        cur.execute("SELECT kwatch.unwatch('configmaps', server => %s, drop_table => true)", (SERVER,))
        cur.execute("DROP SERVER %s CASCADE" % SERVER)
    informer_rx = []
    for line in out.splitlines():
        rv, t = line.split()
        informer_rx.append((int(rv), int(t)))

    rows = []
    for ph in phases:
        sent_at = dict(ph["sent"])
        kw = summary(lags_of(sent_at, ph["notify"]), len(sent_at))
        cg = summary(lags_of(sent_at, informer_rx), len(sent_at))
        rows.append({"phase": ph["name"], "events": len(sent_at), "send_s": ph["send_s"],
                     "patches_per_s": len(sent_at) / ph["send_s"], "kwatch": kw, "client_go": cg,
                     "p50_diff_ms": kw.get("p50_ms", float("nan")) - cg.get("p50_ms", float("nan")),
                     "worker_cpu_pct": ph["worker_cpu_pct"], "apiserver_cpu_pct": ph["apiserver_cpu_pct"],
                     "informer_cpu_pct": ph["informer_cpu_pct"],
                     "notifications_counted": ph["notifications_counted"]})
    rep = {"evreal": rows, "meta": {"date": datetime.date.today().isoformat(), "machine": measure.machine(),
                                    "objects": a.objects, "clients": a.clients, "seconds": a.seconds}}
    emit(rep, out_json, evreal_markdown)


if __name__ == "__main__":
    main()
