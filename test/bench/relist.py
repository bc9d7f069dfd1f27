#!/usr/bin/python3
"""Relists into tables whose statistics lie, and what other watches see
meanwhile (issue 15).  Prints a report; asserts nothing.

usage: relist.py   (after bench.py: the N pods of namespace kwatch-bench
                    exist and k8s.pods holds them for server `bench`;
                    environment as bench.py)

Scenarios, each timed from the request to the watch healthy with every row:
  fresh      the initial sync into a new, empty table (the yardstick);
  second     the initial sync of a second cluster into k8s.pods, populated
             and analyzed (its statistics say the new cluster has ~1 row);
  namespace  a namespace-scoped watch of a third cluster into the same table;
  grown      a relist (a restart without a checkpoint) of a table that grew
             50x since its last ANALYZE (a watch of 2% of the pods, analyzed,
             then all).
During each, a probe watch of ConfigMaps on the same worker gets a PATCH
every 100 ms, and the delay from each PATCH response to its NOTIFY is
recorded (the other watches' lag while one watch merges); the worker's
RssAnon is sampled.
"""
import json
import os
import select
import sys
import threading
import time

import psycopg2

from bench import NS, api, rss_kb

PROBE_NS = "kwatch-bench-probe"


class Probe(threading.Thread):
    """PATCHes one ConfigMap every `period` s and times PATCH -> NOTIFY."""

    def __init__(self, period=0.1):
        super().__init__(daemon=True)
        self.period = period
        self.delays = []
        self.missed = 0
        self.stop = threading.Event()
        self.conn = psycopg2.connect("")
        self.conn.autocommit = True
        self.conn.cursor().execute("LISTEN kwatch_configmaps")

    def run(self):
        i = 0
        while not self.stop.is_set():
            i += 1
            tag = "%d-%d" % (os.getpid(), i)
            api("PATCH", "/api/v1/namespaces/%s/configmaps/probe" % PROBE_NS,
                {"metadata": {"labels": {"seq": tag}}}, ctype="application/merge-patch+json")
            sent = time.time()
            got = False
            while not got and time.time() - sent < 30:
                if select.select([self.conn], [], [], 0.5) == ([], [], []):
                    continue
                self.conn.poll()
                while self.conn.notifies:
                    p = json.loads(self.conn.notifies.pop(0).payload)
                    if p.get("name") == "probe" and p.get("type") == "MODIFIED":
                        got = True
            if got:
                self.delays.append(time.time() - sent)
            else:
                self.missed += 1
            time.sleep(max(0.0, self.period - (time.time() - sent)))

    def finish(self):
        self.stop.set()
        self.join(40)
        self.conn.close()
        d = sorted(self.delays)
        if not d:
            return "no probe changes"
        return "p50 %.0f ms, p99 %.0f ms, max %.0f ms over %d changes%s" % (
            d[len(d) // 2] * 1000, d[min(len(d) - 1, int(len(d) * 0.99))] * 1000, d[-1] * 1000,
            len(d), ", %d not notified within 30 s" % self.missed if self.missed else "")


def sql(cur, q, *args):
    cur.execute(q, args)
    return cur.fetchall() if cur.description else None


def merge_rss_kb(cur):
    """RssAnon of the background relist merges running now (merge.c), summed."""
    total = 0
    for (pid,) in sql(cur, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'kwatch relist merge'"):
        try:
            total += rss_kb(pid)[0]
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def wait_synced(cur, pid, server, table, n, t0, peak):
    """Waits until `server`'s pods are all in `table`; peak[0] tracks the
    worker's RssAnon, peak[1] that of background merges."""
    while len(peak) < 2:
        peak.append(0)
    while True:
        (healthy, objects), = sql(cur, "SELECT healthy, objects FROM kwatch.watches"
                                       " WHERE server = %s AND resource = 'pods'", server)
        peak[0] = max(peak[0], rss_kb(pid)[0])
        peak[1] = max(peak[1], merge_rss_kb(cur))
        if healthy and objects is not None and objects >= n:
            (rows,), = sql(cur, "SELECT count(*) FROM %s WHERE cluster = %%s" % table, server)
            if rows >= n:
                return time.time() - t0
        if time.time() - t0 > 900:
            sys.exit("%s did not sync in 900 s" % server)
        time.sleep(0.05)


def scenario(cur, name, action, server, table, n, results):
    (pid,), = sql(cur, "SELECT kwatch.worker_pid()")
    t0 = time.time()
    started = action()
    if isinstance(started, tuple):
        pid, t0 = started
    peak = [rss_kb(pid)[0]]
    probe = Probe()
    probe.start()
    took = wait_synced(cur, pid, server, table, n, t0, peak)
    time.sleep(0.5)
    lag = probe.finish()
    results.append((name, took, peak[0] / 1024, lag, peak[1] / 1024))
    print("  %-10s %7.2f s   peak RssAnon %5.0f MB (background merge %3.0f MB)   probe lag %s"
          % (name, took, peak[0] / 1024, peak[1] / 1024, lag), flush=True)


def fresh_server(cur, name):
    sql(cur, "SELECT kwatch.unwatch(resource, server => server) FROM kwatch.registrations"
             " WHERE server = %s", name)
    sql(cur, "DROP SERVER IF EXISTS %s CASCADE" % name)
    sql(cur, "CREATE SERVER %s FOREIGN DATA WRAPPER kwatch OPTIONS (kubeconfig %%s)" % name,
        os.environ["KUBECONFIG"])


def main():
    conn = psycopg2.connect("")
    conn.autocommit = True
    cur = conn.cursor()
    s, b = api("GET", "/api/v1/namespaces/%s/pods?limit=1" % NS)
    d = json.loads(b)
    n = d["metadata"].get("remainingItemCount", 0) + len(d["items"])

    # the probe: one ConfigMap watched on the bench server
    api("POST", "/api/v1/namespaces", {"metadata": {"name": PROBE_NS}})
    api("POST", "/api/v1/namespaces/%s/configmaps" % PROBE_NS,
        {"metadata": {"name": "probe"}, "data": {"k": "v"}})
    sql(cur, "SELECT kwatch.watch('configmaps', server => 'bench', namespace => %s)", PROBE_NS)

    for srv in ("bench_fresh", "bench_second", "bench_ns", "bench_grown"):
        fresh_server(cur, srv)
    # one table per resource: the yardstick needs k8s.pods new and empty
    sql(cur, "SELECT kwatch.unwatch('pods', server => 'bench', drop_table => true)")
    results = []
    print()
    print("relists into tables whose statistics lie (%d pods; probe: another watch's changes)" % n,
          flush=True)

    scenario(cur, "fresh", lambda: sql(cur, "SELECT kwatch.watch('pods', server => 'bench_fresh')"),
             "bench_fresh", "k8s.pods", n, results)
    sql(cur, "ANALYZE k8s.pods")
    scenario(cur, "second", lambda: sql(cur, "SELECT kwatch.watch('pods', server => 'bench_second')"),
             "bench_second", "k8s.pods", n, results)
    sql(cur, "ANALYZE k8s.pods")
    scenario(cur, "namespace", lambda: sql(cur, "SELECT kwatch.watch('pods', server => 'bench_ns',"
                                                " namespace => %s)", NS),
             "bench_ns", "k8s.pods", n, results)
    for srv in ("bench_second", "bench_ns", "bench_fresh"):
        sql(cur, "SELECT kwatch.unwatch('pods', server => %s, drop_table => true)", srv)

    # grown: analyzed at 2% of its rows (autovacuum off, as statistics go
    # stale between ANALYZEs), then filled, then relisted after a restart
    sql(cur, "SELECT kwatch.watch('pods', server => 'bench_grown', label_selector => 'app=app-0')")
    sql(cur, "ALTER TABLE k8s.pods SET (autovacuum_enabled = false)")
    (pid,), = sql(cur, "SELECT kwatch.worker_pid()")
    wait_synced(cur, pid, "bench_grown", "k8s.pods", n // 50, time.time(), [0])
    sql(cur, "ANALYZE k8s.pods")
    sql(cur, "SELECT kwatch.unwatch('pods', server => 'bench_grown')")
    sql(cur, "SELECT kwatch.watch('pods', server => 'bench_grown')")
    wait_synced(cur, pid, "bench_grown", "k8s.pods", n, time.time(), [0])

    def restart_relist():
        (old,), = sql(cur, "SELECT kwatch.worker_pid()")
        sql(cur, "SELECT pg_terminate_backend(%s)", old)
        deadline = time.time() + 60
        while sql(cur, "SELECT kwatch.worker_pid()")[0][0] == old:
            time.sleep(0.05)
        # no checkpoint: the new worker LISTs into the table it already fills
        # (a WATCH from a made-up old resourceVersion is not always refused
        # with 410 by a young cluster's watch cache; no checkpoint always lists)
        sql(cur, "UPDATE kwatch.registrations SET resource_version = NULL"
                 " WHERE server = 'bench_grown'")
        while sql(cur, "SELECT kwatch.worker_pid()")[0][0] in (None, old):
            if time.time() > deadline:
                sys.exit("no new worker within 60 s")
            time.sleep(0.05)
        new, = sql(cur, "SELECT kwatch.worker_pid()")[0]
        while sql(cur, "SELECT list_calls FROM kwatch.watches WHERE server = 'bench_grown'")[0][0] in (None, 0):
            if time.time() > deadline:
                sys.exit("the new worker did not LIST within 60 s")
            time.sleep(0.01)
        return new, time.time()
    scenario(cur, "grown", restart_relist, "bench_grown", "k8s.pods", n, results)
    sql(cur, "SELECT kwatch.unwatch('pods', server => 'bench_grown', drop_table => true)")
    sql(cur, "SELECT kwatch.unwatch('configmaps', server => 'bench')")

    base = results[0][1]
    print("  ratios to the fresh-table sync: " +
          ", ".join("%s %.2fx" % (name, took / base) for name, took, _, _, _ in results[1:]))
    print("  (grown: from the relist's first LIST request to healthy, after a worker restart\n"
          "   without a checkpoint)")


if __name__ == "__main__":
    main()
