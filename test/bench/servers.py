#!/usr/bin/python3
"""Many API servers at once, one watch each (issue 10, item 3, second half).
Prints a Markdown report, writes JSON; asserts nothing.  scale.py does the
same for many resources on one server.

usage: servers.py [--servers 20] [--objects 500] [--idle 30] [--json FILE]
       (environment: PG* for the PostgreSQL with kwatch preloaded;
        KWATCH_BENCH_DIR for the JSON)

1. starts --servers fake API servers (test/fakeapi FakeAPI, plain http,
   each on its own port, all in this process) with --objects ConfigMaps
   each (~400 bytes) in namespace kwatch-servers;
2. one foreign server per fake (benchsrv00, ...), one kwatch.watch() of its
   configmaps each (all into one mirror table, told apart by `cluster`);
   "time to all synced" is from the first watch() call until every watch is
   healthy with all its rows;
3. reports, as scale.py does: kwatch's processes, the worker's TCP
   connections to the fakes (its socket inodes in /proc/net/tcp, by remote
   port), its RssAnon before, peak during the sync (sampled every 10 ms) and
   after, its CPU while every watch is idle over --idle seconds, the WATCH
   and LIST requests, relists and unhealthy watches after the idle period,
   and the delay from a change on the last fake to its notification on a
   LISTENing connection;
4. unwatches everything (dropping the table), drops the servers, stops the
   fakes.
"""
import argparse
import datetime
import json
import os
import select
import sys
import time

import psycopg2

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
import measure  # noqa: E402
from anchors import KwatchPids  # noqa: E402
from fakeapi.server import FakeAPI  # noqa: E402
from report import emit, json_path, servers_markdown  # noqa: E402

NS = "kwatch-servers"
TABLE = "servers_configmaps"   # in schema k8s


def server_name(i):
    return "benchsrv%02d" % i


def configmap(i, j):
    return {"metadata": {"name": "cm-%04d" % j, "namespace": NS, "labels": {"app": "servers", "shard": str(j % 8)}},
            "data": {"server": str(i), "index": str(j), "payload": "x" * 256}}


def drop_all(cur, n):
    cur.execute("SELECT kwatch.unwatch(resource, server => server, drop_table => true)"
                " FROM kwatch.registrations WHERE server LIKE 'benchsrv%%'")
    for i in range(n):
        cur.execute("DROP SERVER IF EXISTS %s CASCADE" % server_name(i))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--servers", type=int, default=20)
    ap.add_argument("--objects", type=int, default=500)
    ap.add_argument("--idle", type=int, default=30)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    out_json = json_path(a.json, "servers-%d.json" % a.servers)

    fakes = []
    for i in range(a.servers):
        f = FakeAPI().start()
        for j in range(a.objects):
            f.create("configmaps", configmap(i, j))
        fakes.append(f)
    ports = {f.port for f in fakes}

    conn = psycopg2.connect("")
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("CREATE EXTENSION IF NOT EXISTS kwatch")
    drop_all(cur, max(a.servers, 100))
    for i, f in enumerate(fakes):
        cur.execute("CREATE SERVER %s FOREIGN DATA WRAPPER kwatch OPTIONS (api_server %%s,"
                    " allow_insecure_http 'true')" % server_name(i), (f.url,))
    worker, t0 = None, time.time()
    while worker is None and time.time() - t0 < 60:
        cur.execute("SELECT kwatch.worker_pid()")
        worker = cur.fetchone()[0] or time.sleep(0.2)
    cur.execute("SELECT current_setting('data_directory')")
    with open(os.path.join(cur.fetchone()[0], "postmaster.pid")) as fh:
        postmaster = int(fh.readline())

    time.sleep(2)
    rss0 = measure.status_kb(worker)[0]
    sampler = measure.Sampler(KwatchPids(postmaster, worker))
    sampler.start()
    cpu_w0 = measure.cpu_s(worker)
    t0 = time.monotonic()
    for i in range(a.servers):
        cur.execute("SELECT kwatch.watch('configmaps', server => %s, namespace => %s, table_name => %s)",
                    (server_name(i), NS, TABLE))
    registered = time.monotonic() - t0
    while True:
        cur.execute("SELECT count(*) FILTER (WHERE healthy AND objects >= %s), count(*)"
                    " FROM kwatch.watches WHERE server LIKE 'benchsrv%%'", (a.objects,))
        synced, total = cur.fetchone()
        if synced == a.servers:
            break
        if time.monotonic() - t0 > 600:
            sys.exit("%d of %d watches synced after 600 s" % (synced, total))
        time.sleep(0.05)
    all_synced = time.monotonic() - t0
    peak = sampler.stop()
    sync_cpu = measure.cpu_s(worker) - cpu_w0
    cur.execute("SELECT count(*) FROM k8s." + TABLE)
    rows = cur.fetchone()[0]
    kw_procs = [p for p in measure.children(postmaster) if "kwatch" in measure.cmdline(p)]
    conns = measure.tcp_connections_by_port(worker, ports)

    time.sleep(5)   # let the last commits settle
    cpu1, w1 = measure.cpu_s(worker), time.monotonic()
    time.sleep(a.idle)
    idle_s = time.monotonic() - w1
    idle_cpu = (measure.cpu_s(worker) - cpu1) / idle_s
    rss_after = measure.status_kb(worker)[0]
    cur.execute("SELECT sum(watch_calls)::bigint, sum(list_calls)::bigint, sum(relists)::bigint,"
                " count(*) FILTER (WHERE NOT healthy), min(channel)"
                " FROM kwatch.watches WHERE server LIKE 'benchsrv%%'")
    watch_calls, list_calls, relists, unhealthy, channel = cur.fetchone()

    # a change on the last server -> its notification
    lconn = psycopg2.connect("")
    lconn.autocommit = True
    lconn.cursor().execute('LISTEN "%s"' % channel)
    last = server_name(a.servers - 1)
    sent = time.monotonic()
    fakes[-1].update("configmaps", NS, "cm-0000", lambda o: o["metadata"]["labels"].update(stamp=str(sent)))
    change_ms = None
    while change_ms is None and time.monotonic() - sent < 30:
        if select.select([lconn], [], [], 1) == ([], [], []):
            continue
        lconn.poll()
        while lconn.notifies:
            p = json.loads(lconn.notifies.pop(0).payload)
            if p.get("cluster") == last and p.get("name") == "cm-0000" and p["type"] == "MODIFIED":
                change_ms = (time.monotonic() - sent) * 1000
    lconn.close()

    drop_all(cur, a.servers)
    for f in fakes:
        f.stop()

    rep = {"meta": {"date": datetime.date.today().isoformat(), "machine": measure.machine(),
                    "objects_per_server": a.objects,
                    "fake_processes_note": "all %d in the harness's Python process" % a.servers},
           "servers": {
               "servers": a.servers, "objects": rows, "register_s": registered, "all_synced_s": all_synced,
               "kwatch_processes": len(kw_procs), "tcp_connections": sum(conns.values()),
               "servers_connected": len(conns), "connections_by_port": {str(k): v for k, v in conns.items()},
               "worker_rss_before_mb": rss0 / 1024, "worker_rss_peak_mb": peak / 1024,
               "worker_rss_after_mb": rss_after / 1024, "sync_worker_cpu_s": sync_cpu,
               "idle_seconds": idle_s, "idle_worker_cpu_pct": idle_cpu * 100,
               "watch_calls": watch_calls, "list_calls": list_calls, "relists": relists,
               "unhealthy_after_idle": unhealthy,
               "change_to_notify_ms": change_ms if change_ms is not None else float("nan")}}
    emit(rep, out_json, servers_markdown)


if __name__ == "__main__":
    main()
