#!/usr/bin/python3
"""Many watched resources on one server (issue 10, item 3).  Prints a
Markdown report, writes JSON; asserts nothing.

usage: scale.py [--crds 200] [--objects 10] [--idle 30] [--json FILE]
       (environment as bench.py; PGHOST is the directory test/drivers/pg.sh runs
        the server in, which this script restarts once if
        kwatch.max_watches is too small for the watches it makes)

1. creates --crds CustomResourceDefinitions (widget000s.scale.kwatch.io,
   ..., namespaced, any object) with one `kubectl apply`, waits until every
   one is Established and served by discovery, and creates --objects
   objects of each in namespace kwatch-scale (16 clients);
2. on a foreign server of its own, calls kwatch.watch() for every resource
   (timed: each call creates the mirror table), then waits until every
   watch is healthy with all its rows; "time to all synced" is from the first
   watch() call;
3. waits until the API server is quiet (1.20 keeps rebuilding its OpenAPI
   spec for minutes after many CRDs appear) and measures its CPU for 10 s
   before the watches, then reports: kwatch's processes (the worker; any relist merge), the
   worker's TCP connections to the API server (its socket inodes matched in
   /proc/net/tcp{,6}), the worker's RssAnon peak during the sync (sampled
   every 10 ms) and after, its CPU while all watches are idle over --idle
   seconds (/proc/<pid>/stat), and the delay from a PATCH of an object of
   the last resource to its row changed;
4. unwatches everything (dropping the tables) and drops the server; the
   CRDs stay for the next run.
"""
import argparse
import concurrent.futures
import datetime
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import db  # noqa: E402
import measure  # noqa: E402
from anchors import KwatchPids, apiserver_pid  # noqa: E402
from bench import api, machine  # noqa: E402
from report import emit, json_path, scale_markdown  # noqa: E402

GROUP = "scale.kwatch.io"
NS = "kwatch-scale"
SERVER = "scale"


def crd(i):
    kind = "Widget%03d" % i
    plural = kind.lower() + "s"
    return plural, {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "%s.%s" % (plural, GROUP)},
        "spec": {"group": GROUP, "scope": "Namespaced",
                 "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                     "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}


def ensure_crds(count):
    """Applies the CRDs missing; waits for Established and discovery."""
    plurals = [crd(i)[0] for i in range(count)]
    s, b = api("GET", "/apis/%s/v1" % GROUP)
    served = {r["name"] for r in json.loads(b).get("resources", [])} if s == 200 else set()
    missing = [i for i in range(count) if plurals[i] not in served]
    t0 = time.monotonic()
    if missing:
        print("creating %d CRDs..." % len(missing), flush=True)
        doc = {"apiVersion": "v1", "kind": "List", "items": [crd(i)[1] for i in missing]}
        subprocess.run(["kubectl", "apply", "-f", "-"], input=json.dumps(doc).encode(), check=True,
                       capture_output=True)
    while True:
        s, b = api("GET", "/apis/%s/v1" % GROUP)
        served = {r["name"] for r in json.loads(b).get("resources", [])} if s == 200 else set()
        if all(p in served for p in plurals):
            break
        if time.monotonic() - t0 > 900:
            sys.exit("only %d of %d CRDs served after 900 s" % (len(served), count))
        time.sleep(1)
    return plurals, (time.monotonic() - t0) if missing else None


def ensure_objects(plurals, per):
    api("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
    to_create = []
    for p in plurals:
        s, b = api("GET", "/apis/%s/v1/namespaces/%s/%s" % (GROUP, NS, p))
        have = len(json.loads(b)["items"]) if s == 200 else 0
        to_create += [(p, j) for j in range(have, per)]
    if not to_create:
        return

    def make(t):
        p, j = t
        kind = p[:-1].capitalize()
        s, b = api("POST", "/apis/%s/v1/namespaces/%s/%s" % (GROUP, NS, p),
                   {"apiVersion": GROUP + "/v1", "kind": kind,
                    "metadata": {"name": "w-%04d" % j, "labels": {"app": "scale"}},
                    "spec": {"size": j, "color": "blue", "tags": ["a", "b", "c"]}})
        if s not in (201, 409):
            raise RuntimeError("create %s: %d %s" % (p, s, b[:200]))
    print("creating %d objects..." % len(to_create), flush=True)
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        list(ex.map(make, to_create))


def wait_apiserver_quiet(api_pid, below=0.3, window=5, limit=600):
    """Waits until the API server used less than `below` of a core over
    `window` s (1.20 rebuilds its OpenAPI spec for minutes after many CRDs
    appear); returns the seconds waited."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        c0, w0 = measure.cpu_s(api_pid), time.monotonic()
        time.sleep(window)
        if (measure.cpu_s(api_pid) - c0) / (time.monotonic() - w0) < below:
            break
    return time.monotonic() - t0


def ensure_max_watches(cur, need):
    """Raises kwatch.max_watches (a postmaster setting) and restarts the
    server in $PGHOST if it is below `need`; returns a new cursor or None."""
    cur.execute("SHOW kwatch.max_watches")
    have = int(cur.fetchone()[0])
    if have >= need:
        return None
    print("kwatch.max_watches %d -> %d (restarting PostgreSQL)" % (have, need), flush=True)
    cur.execute("ALTER SYSTEM SET kwatch.max_watches = %s", (need,))
    here = os.path.dirname(os.path.abspath(__file__))
    subprocess.run(["bash", os.path.join(here, "..", "drivers", "pg.sh"), "restart", os.environ["PGHOST"]], check=True)
    return True


def watch_states(cur):
    cur.execute("SELECT count(*) FILTER (WHERE healthy AND objects IS NOT NULL), coalesce(sum(objects), 0)::bigint,"
                " count(*) FROM kwatch.watches WHERE server = %s", (SERVER,))
    return cur.fetchone()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--crds", type=int, default=200)
    ap.add_argument("--objects", type=int, default=10)
    ap.add_argument("--idle", type=int, default=30)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    out_json = json_path(a.json, "scale-%d.json" % a.crds)

    plurals, crd_s = ensure_crds(a.crds)
    ensure_objects(plurals, a.objects)

    conn = db.connect()
    if ensure_max_watches(conn.cursor(), a.crds + 32):
        conn.close()
        conn = db.connect()
    cur = conn.cursor()
    worker, postmaster = db.fresh_server(cur, SERVER, 60)
    api_pid = apiserver_pid()
    api_port = int(os.environ["KWATCH_K8S_SERVER"].rsplit(":", 1)[1])

    rep = {"meta": {"date": datetime.date.today().isoformat(), "machine": machine(), "crds": a.crds,
                    "objects_per_crd": a.objects, "crd_create_s": crd_s}}
    # the API server's own idle CPU first: 1.20 keeps rebuilding its OpenAPI
    # spec for a while after many CRDs appear, whoever watches
    rep["meta"]["apiserver_settle_s"] = wait_apiserver_quiet(api_pid)
    base0, b0 = measure.cpu_s(api_pid), time.monotonic()
    time.sleep(min(a.idle, 10))
    idle_api_before = (measure.cpu_s(api_pid) - base0) / (time.monotonic() - b0)
    rss0 = measure.status_kb(worker)[0]
    sampler = measure.Sampler(KwatchPids(postmaster, worker))
    sampler.start()
    cpu_w0, api0 = measure.cpu_s(worker), measure.cpu_s(api_pid)
    t0 = time.monotonic()
    for p in plurals:
        cur.execute("SELECT kwatch.watch(%s, server => %s)", ("%s.%s" % (p, GROUP), SERVER))
    registered = time.monotonic() - t0
    while True:
        synced, objects, total = watch_states(cur)
        if synced == len(plurals) and objects >= len(plurals) * a.objects:
            break
        if time.monotonic() - t0 > 900:
            sys.exit("%d of %d watches synced after 900 s" % (synced, total))
        time.sleep(0.05)
    all_synced = time.monotonic() - t0
    peak = sampler.stop()
    sync_cpu, sync_api = measure.cpu_s(worker) - cpu_w0, measure.cpu_s(api_pid) - api0
    kw_procs = [p for p in measure.children(postmaster) if "kwatch" in measure.cmdline(p)]
    conns = measure.tcp_connections_by_port(worker, [api_port]).get(api_port, 0)

    time.sleep(5)   # let the last commits and any retries settle
    cpu1, api1, w1 = measure.cpu_s(worker), measure.cpu_s(api_pid), time.monotonic()
    time.sleep(a.idle)
    idle_s = time.monotonic() - w1
    idle_cpu = (measure.cpu_s(worker) - cpu1) / idle_s
    idle_api = (measure.cpu_s(api_pid) - api1) / idle_s
    rss_after = measure.status_kb(worker)[0]
    cur.execute("SELECT sum(watch_calls)::bigint, sum(list_calls)::bigint, sum(relists)::bigint,"
                " count(*) FILTER (WHERE NOT healthy)"
                " FROM kwatch.watches WHERE server = %s", (SERVER,))
    watch_calls, list_calls, relists, unhealthy = cur.fetchone()

    # a change on the last resource: PATCH response -> the row changed
    last = plurals[-1]
    stamp = str(time.time_ns())
    api("PATCH", "/apis/%s/v1/namespaces/%s/%s/w-0000" % (GROUP, NS, last),
        {"metadata": {"labels": {"stamp": stamp}}}, ctype="application/merge-patch+json")
    sent = time.monotonic()
    cur.execute("SELECT table_name FROM kwatch.watches WHERE server = %s AND resource = %s",
                (SERVER, "%s.%s" % (last, GROUP)))
    table = cur.fetchone()[0]
    while True:
        cur.execute("SELECT 1 FROM %s WHERE cluster = %%s AND name = 'w-0000' AND labels->>'stamp' = %%s"
                    % table, (SERVER, stamp))
        if cur.fetchone():
            break
        if time.monotonic() - sent > 30:
            break
        time.sleep(0.001)
    change_ms = (time.monotonic() - sent) * 1000

    rep["result"] = {
        "watches": len(plurals), "objects": objects, "register_s": registered, "all_synced_s": all_synced,
        "kwatch_processes": len(kw_procs), "tcp_connections": conns,
        "worker_rss_before_mb": rss0 / 1024, "worker_rss_peak_mb": peak / 1024,
        "worker_rss_after_mb": rss_after / 1024, "sync_worker_cpu_s": sync_cpu,
        "sync_apiserver_cpu_s": sync_api, "idle_seconds": idle_s, "idle_worker_cpu_pct": idle_cpu * 100,
        "idle_apiserver_cpu_pct": idle_api * 100,
        "idle_apiserver_cpu_pct_before_watches": idle_api_before * 100, "watch_calls": watch_calls, "list_calls": list_calls,
        "relists": relists, "unhealthy_after_idle": unhealthy, "change_to_row_ms": change_ms}
    for p in plurals:
        cur.execute("SELECT kwatch.unwatch(%s, server => %s, drop_table => true)", ("%s.%s" % (p, GROUP), SERVER))
    cur.execute("DROP SERVER %s CASCADE" % SERVER)

    emit(rep, out_json, scale_markdown)


if __name__ == "__main__":
    main()
