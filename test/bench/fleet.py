#!/usr/bin/python3
"""A fleet of clusters on one real API server (issue 47, the fleet report).
Prints a Markdown report, writes JSON; asserts nothing.

usage: fleet.py [--watches 100,300,1000] [--resources 4] [--idle 20]
                [--changes 5] [--json FILE]
       (environment: PG* for the PostgreSQL with kwatch preloaded;
        KWATCH_K8S_SERVER/_TOKEN/_CA of a 1.20 API server bound to every
        loopback address (fleet.sh starts one with --bind-address=0.0.0.0);
        KWATCH_BENCH_DIR for the JSON)

For each size W (rounds one after another, the same PostgreSQL):
1. W / R foreign servers (fleet000, ...), R resources each (configmaps,
   serviceaccounts, limitranges, podtemplates: core, namespaced, few
   objects), every server reaching the one API server through a loopback
   address of its own (127.0.0.2, 127.0.0.3, ... with tls_server_name
   127.0.0.1, the name the certificate holds), so that kwatch's
   connections are per server as in a real fleet;
2. every watch registered in ONE statement (`SELECT kwatch.watch(r, server
   => s) FROM ...`); "all synced" is from that statement until every
   watch is healthy and has listed;
3. reports every kwatch process's peak and settled RssAnon (the worker, the
   apply workers, the request sender), all kwatch processes' CPU while
   the fleet is idle over --idle seconds (from when they have used under
   1% of a core for 3 s in a row; the worker's 10-s reload of the
   registrations falls in it twice), the worker's ESTABLISHED TCP
   connections per loopback address (= per server), the change latency:
   --changes updates of one ConfigMap, each seen by every server's
   configmaps watch, from the update's return to each NOTIFY (p50, p99,
   max over all servers and changes);
4. restarts PostgreSQL (fast shutdown) and reports the time until every
   watch is healthy again and the LISTs and WATCHes sent since (a watch
   whose resourceVersion is still served resumes without a LIST);
5. with --k8s-dir: compacts etcd and restarts the API server, so that no
   watch's resourceVersion is served any more (410 Gone): every watch
   relists, kwatch.max_concurrent_relists at a time; reports the time
   until all are healthy again, the relists, the LISTs the API server's
   audit log shows and the most of them in flight at once;
6. unwatches everything (dropping the tables) and drops the servers.
Targets (issue 47) at 1,000 watches on 2 cores: all synced within 60 s,
every kwatch process under 64 MB RssAnon, all kwatch processes together
under 1% of a core while idle, a change in its mirror within 1 s (p99).
"""
import argparse
import datetime
import json
import os
import select
import subprocess
import sys
import time
import urllib.request
import ssl

import psycopg2

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import measure  # noqa: E402
from report import emit, json_path  # noqa: E402

RESOURCES = ["configmaps", "serviceaccounts", "limitranges", "podtemplates"]
NS = "kwatch-fleet"
CM = "fleet-probe"


def server_name(i):
    return "fleet%03d" % i


def address(i):
    """The loopback address of server i: 127.0.0.2 ... 127.0.1.x (never .1)."""
    n = i + 2
    return "127.0.%d.%d" % (n // 254, n % 254 + 1) if n >= 254 else "127.0.0.%d" % n


def api(method, path, body=None):
    """A request to the API server with the admin token; returns the JSON."""
    ctx = ssl.create_default_context(cafile=os.environ["KWATCH_K8S_CA"])
    req = urllib.request.Request(os.environ["KWATCH_K8S_SERVER"] + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Authorization": "Bearer " + os.environ["KWATCH_K8S_TOKEN"],
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, context=ctx, timeout=30) as r:
        return json.loads(r.read() or b"null")


def ensure_namespace():
    try:
        api("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
    except urllib.error.HTTPError as e:
        if e.code != 409:
            raise
    try:
        api("POST", "/api/v1/namespaces/%s/configmaps" % NS,
            {"metadata": {"name": CM}, "data": {"stamp": "0"}})
    except urllib.error.HTTPError as e:
        if e.code != 409:
            raise


class Pg:
    """The bench's PostgreSQL: one autocommit connection, and who is who."""

    def __init__(self):
        self.connect()

    def connect(self):
        self.conn = psycopg2.connect("")
        self.conn.autocommit = True
        self.cur = self.conn.cursor()

    def q(self, query, params=None):
        self.cur.execute(query, params)
        return self.cur.fetchall() if self.cur.description else []

    def one(self, query, params=None):
        rows = self.q(query, params)
        return rows[0][0] if rows else None

    def postmaster(self):
        with open(os.path.join(self.one("SELECT current_setting('data_directory')"),
                               "postmaster.pid")) as fh:
            return int(fh.readline())

    def worker(self, timeout=60):
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            pid = self.one("SELECT kwatch.worker_pid()")
            if pid:
                return pid
            time.sleep(0.2)
        sys.exit("no kwatch worker after %d s" % timeout)


def kwatch_pids(postmaster):
    return [p for p in measure.children(postmaster) if "kwatch" in measure.cmdline(p)]


def connections_by_address(pid, port):
    """ESTABLISHED TCP connections of pid to `port`, by remote IPv4 address."""
    by = {}
    for hexip, p in measure.tcp_established(pid):
        if p == port and len(hexip) == 8:
            ip = ".".join(str(int(hexip[i:i + 2], 16)) for i in (6, 4, 2, 0))
            by[ip] = by.get(ip, 0) + 1
    return by


def drop_all(pg):
    for (tbl, srv) in pg.q("SELECT table_name, server FROM kwatch.registrations"
                           " WHERE server LIKE 'fleet%%' ORDER BY id"):
        pg.q("SELECT kwatch.unwatch(%s, server => %s)", (tbl, srv))
    for (s,) in pg.q("SELECT srvname FROM pg_foreign_server WHERE srvname LIKE 'fleet%%'"):
        pg.q('DROP SERVER "%s" CASCADE' % s)
    for r in RESOURCES:
        pg.q("DROP TABLE IF EXISTS k8s.%s CASCADE" % r)


def wait_all_healthy(pg, watches, t0, limit=600, listed=True):
    while True:
        n = pg.one("SELECT count(*) FILTER (WHERE healthy%s) FROM kwatch.watches"
                   " WHERE server LIKE 'fleet%%'" % (" AND resource_version IS NOT NULL" if listed else ""))
        if n == watches:
            return time.monotonic() - t0
        if time.monotonic() - t0 > limit:
            return float("nan")
        time.sleep(0.05)


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def change_latencies(pg, servers, changes):
    """ms from each update of the probe ConfigMap to its NOTIFY from each
    server's configmaps watch."""
    channel = pg.one("SELECT channel FROM kwatch.watches WHERE server = %s AND resource = 'configmaps'",
                     (server_name(0),))
    lconn = psycopg2.connect("")
    lconn.autocommit = True
    lconn.cursor().execute('LISTEN "%s"' % channel)
    out, missing = [], 0
    for k in range(changes):
        stamp = "%d-%d" % (os.getpid(), time.time_ns())
        body = json.dumps({"data": {"stamp": stamp}}).encode()
        ctx = ssl.create_default_context(cafile=os.environ["KWATCH_K8S_CA"])
        req = urllib.request.Request(
            os.environ["KWATCH_K8S_SERVER"] + "/api/v1/namespaces/%s/configmaps/%s" % (NS, CM),
            method="PATCH", data=body,
            headers={"Authorization": "Bearer " + os.environ["KWATCH_K8S_TOKEN"],
                     "Content-Type": "application/merge-patch+json"})
        with urllib.request.urlopen(req, context=ctx, timeout=30) as r:
            rv = json.loads(r.read())["metadata"]["resourceVersion"]
        sent = time.monotonic()
        seen = set()
        while len(seen) < servers and time.monotonic() - sent < 30:
            if select.select([lconn], [], [], 1) == ([], [], []):
                continue
            lconn.poll()
            while lconn.notifies:
                p = json.loads(lconn.notifies.pop(0).payload)
                if p.get("name") == CM and p.get("resource_version") == rv and p.get("cluster") not in seen:
                    seen.add(p["cluster"])
                    out.append((time.monotonic() - sent) * 1000)
        missing += servers - len(seen)
        time.sleep(0.5)
    lconn.close()
    return out, missing


def cpu_all(pids):
    return sum(measure.cpu_s(p) for p in pids)


def restart_pg(pg_dir):
    subprocess.run(["bash", os.path.join(HERE, "..", "drivers", "pg.sh"), "restart", pg_dir],
                   check=True, stdout=subprocess.DEVNULL)


def lists_in_flight(audit_log, offset):
    """(LISTs kwatch sent, the most in flight at once) among the audit
    events of `audit_log` from byte `offset`: the LIST requests' intervals
    from requestReceivedTimestamp to the ResponseComplete stage."""
    spans = []
    with open(audit_log, "rb") as f:
        f.seek(offset)
        for line in f:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if (e.get("verb") == "list" and e.get("stage") == "ResponseComplete"
                    and "kwatch" in e.get("userAgent", "")):
                t = [datetime.datetime.strptime(e[k], "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()
                     for k in ("requestReceivedTimestamp", "stageTimestamp")]
                spans.append(t)
    edges = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    most = cur = 0
    for _, d in edges:
        cur += d
        most = max(most, cur)
    return len(spans), most


def relist_storm(pg, watches, k8s_dir):
    """An etcd compaction and an API server restart: every watch's
    resourceVersion is gone (410), so every watch relists, at most
    kwatch.max_concurrent_relists at once.  Returns the time until all are
    healthy again, the relists and the LISTs the API server's audit log
    shows, and the most of them in flight at once."""
    cluster_sh = os.path.join(HERE, "..", "k8s", "cluster.sh")
    api("POST", "/api/v1/namespaces/%s/configmaps" % NS,
        {"metadata": {"name": "fleet-storm-%d-%d" % (watches, time.time())}, "data": {"k": "v"}})
    r0, l0 = pg.q("SELECT sum(relists)::bigint, sum(list_calls)::bigint FROM kwatch.watches"
                  " WHERE server LIKE 'fleet%%'")[0]
    subprocess.run(["bash", cluster_sh, "compact", k8s_dir], check=True, stdout=subprocess.DEVNULL)
    audit = os.path.join(k8s_dir, "audit.log")
    offset = os.path.getsize(audit) if os.path.exists(audit) else 0
    t = time.monotonic()
    subprocess.run(["bash", cluster_sh, "restart-apiserver", k8s_dir], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    healthy_s = float("nan")
    while time.monotonic() - t < 600:
        relists, healthy = pg.q("SELECT sum(relists)::bigint, count(*) FILTER (WHERE healthy AND synced)"
                                " FROM kwatch.watches WHERE server LIKE 'fleet%%'")[0]
        if relists - r0 >= watches and healthy == watches:
            healthy_s = time.monotonic() - t
            break
        time.sleep(0.1)
    relists -= r0
    list_calls = pg.one("SELECT sum(list_calls)::bigint FROM kwatch.watches WHERE server LIKE 'fleet%%'") - l0
    lists, most = lists_in_flight(audit, offset) if os.path.exists(audit) else (None, None)
    return {"after_410_all_healthy_s": healthy_s, "after_410_relists": relists,
            "after_410_list_calls": list_calls,
            "after_410_lists": lists, "after_410_lists_in_flight_max": most,
            "max_concurrent_relists": pg.one("SELECT current_setting('kwatch.max_concurrent_relists')::int")}


def one_round(pg, watches, resources, idle, changes, api_port, pg_dir, k8s_dir=None):
    servers = max(1, watches // resources)
    watches = servers * resources
    drop_all(pg)
    for i in range(servers):
        pg.q('CREATE SERVER "%s" FOREIGN DATA WRAPPER kwatch OPTIONS (api_server %%s,'
             ' certificate_authority %%s, tls_server_name %%s)' % server_name(i),
             ("https://%s:%d" % (address(i), api_port), os.environ["KWATCH_K8S_CA"], "127.0.0.1"))
        pg.q('CREATE USER MAPPING FOR CURRENT_USER SERVER "%s" OPTIONS (token %%s)' % server_name(i),
             (os.environ["KWATCH_K8S_TOKEN"],))
    postmaster = pg.postmaster()
    worker = pg.worker()
    time.sleep(1)
    sampler = measure.Sampler(lambda: kwatch_pids(postmaster), period=0.05)
    sampler.start()
    t0 = time.monotonic()
    pg.q("SELECT kwatch.watch(r, server => s.srvname)"
         "  FROM pg_foreign_server s, unnest(%s::text[]) r WHERE s.srvname LIKE 'fleet%%'",
         (RESOURCES[:resources],))
    register_s = time.monotonic() - t0
    synced_s = wait_all_healthy(pg, watches, t0)
    peak_kb = sampler.stop()
    peak_by = {measure.cmdline(p).strip(): kb for p, kb in sampler.peak_by_pid.items()}

    # idle: once the kwatch processes have used under 1% of a core for 3 s
    # in a row (the last batches, checkpoints and status are written), at
    # most 60 s
    xact = "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
    settle_t0, quiet = time.monotonic(), 0
    c_prev = cpu_all(kwatch_pids(postmaster))
    while time.monotonic() - settle_t0 < 60 and quiet < 3:
        time.sleep(1)
        c_now = cpu_all(kwatch_pids(postmaster))
        quiet = quiet + 1 if c_now - c_prev <= 0.01 else 0
        c_prev = c_now
    settle_s = time.monotonic() - settle_t0
    pids = kwatch_pids(postmaster)
    x0 = pg.one(xact)
    c0 = {p: measure.cpu_s(p) for p in pids}
    w0 = time.monotonic()
    time.sleep(idle)
    idle_wall = time.monotonic() - w0
    idle_by = {measure.cmdline(p).strip(): (measure.cpu_s(p) - c0[p]) / idle_wall * 100 for p in pids}
    idle_pct = sum(idle_by.values())
    pg.q("SELECT pg_stat_clear_snapshot()")
    idle_commits = (pg.one(xact) - x0 - 2) / idle_wall
    rss = {measure.cmdline(p).strip(): measure.status_kb(p)[0] for p in pids}
    conns = connections_by_address(worker, api_port)
    lat, missing = change_latencies(pg, servers, changes)

    # a PostgreSQL restart: what it sends, how long until all are healthy
    pg.conn.close()
    t1 = time.monotonic()
    restart_pg(pg_dir)
    pg.connect()
    pg.worker()
    resumed_s = wait_all_healthy(pg, watches, t1)
    time.sleep(2)
    lists, watch_calls, relists = pg.q(
        "SELECT sum(list_calls)::bigint, sum(watch_calls)::bigint, sum(relists)::bigint"
        " FROM kwatch.watches WHERE server LIKE 'fleet%%'")[0]
    relist = relist_storm(pg, watches, k8s_dir) if k8s_dir else {}
    if not os.environ.get("KWATCH_FLEET_KEEP_WATCHES"):   # to look at the fleet afterwards
        drop_all(pg)
    return {"watches": watches, "servers": servers, "register_s": register_s,
            "all_synced_s": synced_s, "kwatch_peak_rss_mb_total": peak_kb / 1024,
            "peak_rss_mb_by_process": {k: v / 1024 for k, v in peak_by.items()},
            "rss_mb_by_process": {k: v / 1024 for k, v in rss.items()},
            "idle_cpu_pct_all_kwatch": idle_pct,
            "idle_cpu_pct_by_process": idle_by, "idle_commits_per_s": idle_commits,
            "settle_s": settle_s,
            "tcp_connections": sum(conns.values()), "addresses_connected": len(conns),
            "max_connections_per_address": max(conns.values()) if conns else 0,
            "addresses_by_connections": {str(k): sum(1 for v in conns.values() if v == k)
                                         for k in sorted(set(conns.values()))},
            "change_ms_p50": pct(lat, 50), "change_ms_p99": pct(lat, 99),
            "change_ms_max": max(lat) if lat else float("nan"), "changes_missing": missing,
            "restart_all_healthy_s": resumed_s, "lists_after_restart": lists,
            "watches_after_restart": watch_calls, "relists_after_restart": relists, **relist}


def fleet_markdown(rep):
    rows = rep["fleet"]
    out = ["## A fleet on one API server (`fleet.py`, issue 47)", "",
           "%s; one 1.20 API server reached through a loopback address per server; %s." % (
               rep["meta"]["machine"], rep["meta"]["date"]), "",
           "| watches (servers x resources) | all synced (target <= 60 s at 1,000) | peak RssAnon, largest kwatch process (target < 64 MB) | kwatch CPU idle, all processes (target < 1%) | TCP connections (per server) | change -> NOTIFY p50 / p99 (target p99 <= 1 s) | after a restart: all healthy, LISTs / WATCHes |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        largest = max(r["peak_rss_mb_by_process"].items(), key=lambda kv: kv[1], default=("-", 0))
        out.append("| %d (%d x %d) | %.1f s | %.1f MB (%s) | %.2f%% | %d (%d servers, at most %d each) | %.0f / %.0f ms%s | %.1f s, %s / %s |" % (
            r["watches"], r["servers"], r["watches"] // r["servers"], r["all_synced_s"],
            largest[1], largest[0], r["idle_cpu_pct_all_kwatch"], r["tcp_connections"],
            r["addresses_connected"], r["max_connections_per_address"],
            r["change_ms_p50"], r["change_ms_p99"],
            (", %d not seen" % r["changes_missing"]) if r["changes_missing"] else "",
            r["restart_all_healthy_s"], r["lists_after_restart"], r["watches_after_restart"]))
    out.append("")
    for r in rows:
        if "after_410_relists" in r:
            out.append("- %d watches, after an etcd compaction and an API server restart (410 Gone for every"
                       " watch): all healthy again in %.1f s, %d relists, %d LIST requests sent (%s of them"
                       " in the API server's audit log), at most %s in flight at once"
                       " (kwatch.max_concurrent_relists = %d)" % (
                           r["watches"], r["after_410_all_healthy_s"], r["after_410_relists"],
                           r["after_410_list_calls"], r["after_410_lists"],
                           r["after_410_lists_in_flight_max"],
                           r["max_concurrent_relists"]))
    for r in rows:
        out.append("- %d watches, settled RssAnon: %s" % (r["watches"], ", ".join(
            "%s %.1f MB" % (k, v) for k, v in sorted(r["rss_mb_by_process"].items()))))
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--watches", default="100,300,1000")
    ap.add_argument("--resources", type=int, default=4)
    ap.add_argument("--idle", type=int, default=20)
    ap.add_argument("--changes", type=int, default=5)
    ap.add_argument("--pg-dir", default=os.environ.get("KWATCH_FLEET_PG_DIR"))
    ap.add_argument("--k8s-dir", default=None,
                    help="the control plane's directory: enables the 410 relist storm (step 5)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    sizes = [int(x) for x in a.watches.split(",")]
    out_json = json_path(a.json, "fleet.json")
    api_port = int(os.environ["KWATCH_K8S_SERVER"].rsplit(":", 1)[1])
    ensure_namespace()
    pg = Pg()
    pg.q("CREATE EXTENSION IF NOT EXISTS kwatch")
    pg_dir = a.pg_dir or os.path.dirname(pg.one("SELECT current_setting('data_directory')"))
    rows = [one_round(pg, w, a.resources, a.idle, a.changes, api_port, pg_dir, a.k8s_dir)
            for w in sizes]
    rep = {"meta": {"date": datetime.date.today().isoformat(), "machine": measure.machine(),
                    "resources": RESOURCES[:a.resources]},
           "fleet": rows}
    emit(rep, out_json, fleet_markdown)


if __name__ == "__main__":
    main()
