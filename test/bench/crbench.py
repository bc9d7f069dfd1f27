#!/usr/bin/python3
"""Custom resources on the modern control plane (issue 23): the initial sync
of N cert-manager Certificates (test/fixtures/certificates-crd.json) by a
streaming list (WATCH with sendInitialEvents=true) and by LIST, beside a
COPY floor.  Prints Markdown and writes JSON; asserts nothing.

usage: crbench.py --objects 10000,50000 [--repeat R] [--json FILE]
       (environment: PG* for PostgreSQL; KWATCH_MODERN_DIR, the directory
        test/k8s/modern-cluster.sh started)

For each N (ascending):
  1. creates the missing Certificates in namespace crbench (more than N
     there is an error: start from a fresh plane): POSTs from 16 threads,
     each over one keep-alive HTTPS connection (the creation rate is
     reported);
  2. R rounds, each measuring in turn kwatch by streaming list, the
     streaming list floor, kwatch by LIST and the LIST floor (interleaved:
     a slower stretch of a shared machine touches all of them); for kwatch,
     `kwatch.list_strategy` set to 'stream' or
     'list' (ALTER SYSTEM + pg_reload_conf()); a fresh foreign server; the
     API server restarted (modern-cluster.sh restart-apiserver: its memory
     is then its watch cache and what the list costs, not what creating the
     objects left in its heap; unless --no-restart); then
     watch() -> the first row committed (time to first row; polled every
     5 ms on another connection) -> the watch healthy with every row
     (total).  Peak memory: kwatch = the summed RssAnon of the worker and
     the apply workers sampled every 10 ms (as anchors.py); the API server =
     its VmHWM after resetting it (/proc/PID/clear_refs 5) before the run,
     and its RssAnon sampled.  The server's own counters tell what kwatch
     asked for: apiserver_watch_list_duration_seconds_count (streaming
     lists finished) and apiserver_request_total{verb="LIST"} for the
     resource.  When the installed kwatch has no kwatch.list_strategy, the
     'list' mode is kwatch's only one and 'stream' reports "not available";
  3. the COPY floor: kwatch's rows of the last run written as COPY text and
     loaded with one COPY FROM file into a table LIKE the mirror.
"""
import argparse
import concurrent.futures
import datetime
import http.client
import json
import os
import re
import ssl
import subprocess
import sys
import threading
import time

import psycopg2

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import measure  # noqa: E402
from anchors import KwatchPids, wait_synced, wal_bytes, wal_lsn  # noqa: E402

FIXTURES = os.path.join(HERE, "..", "fixtures")
RESOURCE = "certificates.cert-manager.io"
SERVER = "crbench"
PATH = "/apis/cert-manager.io/v1"


class Api:
    """HTTPS to the modern plane with its admin client certificate, one
    keep-alive connection per thread."""

    def __init__(self, directory):
        env = {}
        with open(os.path.join(directory, "env")) as f:
            for line in f:
                m = re.match(r"export (\w+)=(.*)$", line.strip())
                if m:
                    env[m.group(1)] = m.group(2)
        self.env = env
        self.host, port = env["KWATCH_K8S_SERVER"].rsplit("//", 1)[1].rsplit(":", 1)
        self.port = int(port)
        self.tls = ssl.create_default_context(cafile=env["KWATCH_K8S_CA"])
        self.tls.load_cert_chain(env["KWATCH_K8S_CLIENT_CERT"], env["KWATCH_K8S_CLIENT_KEY"])
        self.local = threading.local()
        with open(os.path.join(directory, "apiserver.pid")) as f:
            self.pid = int(f.read())
        self.kubeconfig = env["KUBECONFIG"]

    def request(self, method, path, body=None, ctype="application/json"):
        for attempt in range(3):
            conn = getattr(self.local, "conn", None)
            if conn is None:
                conn = self.local.conn = http.client.HTTPSConnection(self.host, self.port,
                                                                      context=self.tls, timeout=120)
            try:
                conn.request(method, path, body=json.dumps(body) if body is not None else None,
                             headers={"Content-Type": ctype, "User-Agent": "kwatch-bench"})
                r = conn.getresponse()
                return r.status, r.read()
            except (http.client.HTTPException, OSError):
                conn.close()
                self.local.conn = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")


def ns_of(n):
    """The namespace holding the bench's Certificates: one, filled up to each
    size in turn (ascending), on a fresh plane (modern.sh wipes its etcd),
    so that the watch cache holds only the objects being listed."""
    return "crbench"


def ensure_crd(api):
    crd = json.load(open(os.path.join(FIXTURES, "certificates-crd.json")))
    s, b = api.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    if s not in (201, 409):
        raise RuntimeError("creating the CRD: %d %s" % (s, b[:300]))
    t0 = time.time()
    while time.time() - t0 < 60:
        s, b = api.request("GET", PATH + "/certificates?limit=1")
        if s == 200:
            return
        time.sleep(0.2)
    raise RuntimeError("the Certificate endpoint did not come: %d %s" % (s, b[:300]))


def count(api, ns):
    s, b = api.request("GET", PATH + "/namespaces/%s/certificates?limit=1" % ns)
    d = json.loads(b)
    return d["metadata"].get("remainingItemCount", 0) + len(d["items"])


def create(api, n, threads=16):
    """Creates Certificates cert-<i> for i in [have, n); returns (created, seconds)."""
    samples = json.load(open(os.path.join(FIXTURES, "certificates.json")))
    ns = ns_of(n)
    have = count(api, ns)
    if have > n:
        raise SystemExit("namespace %s holds %d Certificates, more than %d: run on a fresh plane"
                         " (modern.sh wipes its etcd)" % (ns, have, n))
    if have == n:
        return 0, 0.0
    print("creating %d Certificates with %d threads..." % (n - have, threads), flush=True)

    def make(i):
        c = json.loads(json.dumps(samples[i % len(samples)]))
        c["metadata"]["name"] = "cert-%06d" % i
        c["metadata"]["labels"] = dict(c["metadata"].get("labels", {}), shard="s%d" % (i % 20))
        c["spec"]["secretName"] = "cert-%06d-tls" % i
        if "dnsNames" in c["spec"]:
            c["spec"]["dnsNames"] = ["host-%d.example.com" % i, "www.host-%d.example.com" % i]
        s, b = api.request("POST", PATH + "/namespaces/%s/certificates" % ns, c)
        if s not in (201, 409):
            raise RuntimeError("create failed %d: %s" % (s, b[:300]))
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(threads) as ex:
        list(ex.map(make, range(have, n), chunksize=64))
    return n - have, time.monotonic() - t0


def metrics(api):
    s, b = api.request("GET", "/metrics")
    return b.decode()


def metric(text, name, **labels):
    total = 0.0
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)", line)
        if not m or m.group(1) != name:
            continue
        have = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(m.group(4))
    return total


def server_counters(api):
    t = metrics(api)
    return (metric(t, "apiserver_watch_list_duration_seconds_count",
                   group="cert-manager.io", resource="certificates"),
            metric(t, "apiserver_request_total", verb="LIST", group="cert-manager.io",
                   resource="certificates"))


def set_strategy(cur, mode):
    """ALTER SYSTEM SET kwatch.list_strategy = mode + reload; False when the
    installed kwatch has no such setting."""
    try:
        cur.execute("ALTER SYSTEM SET kwatch.list_strategy = %s", (mode,))
    except psycopg2.Error as e:
        print("  kwatch.list_strategy: %s" % str(e).strip().splitlines()[0], flush=True)
        return False
    cur.execute("SELECT pg_reload_conf()")
    time.sleep(1.5)   # the worker takes the SIGHUP
    return True


def reset_hwm(pid):
    try:
        with open("/proc/%d/clear_refs" % pid, "w") as f:
            f.write("5")
    except OSError:
        pass


def fresh_server(cur, kubeconfig):
    cur.execute("CREATE EXTENSION IF NOT EXISTS kwatch")
    cur.execute("SELECT kwatch.unwatch(resource, server => server, drop_table => true)"
                " FROM kwatch.registrations WHERE server = %s", (SERVER,))
    cur.execute("DROP SERVER IF EXISTS %s CASCADE" % SERVER)
    cur.execute("CREATE SERVER %s FOREIGN DATA WRAPPER kwatch OPTIONS (kubeconfig %%s)" % SERVER,
                (kubeconfig,))
    worker, t0 = None, time.time()
    while worker is None and time.time() - t0 < 30:
        cur.execute("SELECT kwatch.worker_pid()")
        worker = cur.fetchone()[0] or time.sleep(0.2)
    cur.execute("SELECT current_setting('data_directory')")
    with open(os.path.join(cur.fetchone()[0], "postmaster.pid")) as f:
        return worker, int(f.readline())


class FirstRow(threading.Thread):
    """Polls (every 5 ms, own connection) until the mirror holds a row of
    SERVER; .at is the monotonic time it was first seen."""

    def __init__(self):
        super().__init__(daemon=True)
        self.at = None
        self.table = None
        self.halt = threading.Event()

    def run(self):
        conn = psycopg2.connect("")
        conn.autocommit = True
        cur = conn.cursor()
        while not self.halt.is_set() and self.at is None:
            cur.execute("SELECT table_name FROM kwatch.registrations WHERE server = %s AND resource = %s",
                        (SERVER, RESOURCE))
            r = cur.fetchone()
            if r and r[0]:
                try:
                    cur.execute("SELECT 1 FROM k8s.%s WHERE cluster = %%s LIMIT 1"
                                % psycopg2.extensions.quote_ident(r[0], conn), (SERVER,))
                    if cur.fetchone():
                        self.at = time.monotonic()
                        self.table = "k8s." + psycopg2.extensions.quote_ident(r[0], conn)
                except psycopg2.Error:
                    pass
            time.sleep(0.005)
        conn.close()


def restart_apiserver(api, directory):
    """Restarts the API server (modern-cluster.sh) and waits until the
    Certificates answer (a restarted server says 429 while its watch cache fills)."""
    subprocess.run(["bash", os.path.join(HERE, "..", "k8s", "modern-cluster.sh"), "restart-apiserver",
                    directory], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(directory, "apiserver.pid")) as f:
        api.pid = int(f.read())
    api.local = threading.local()
    # A custom resource's storage and watch cache are made on its first
    # request: wait until the cache is initialized, or the sync would pay
    # for filling it (a LIST paged from etcd meanwhile, a stream waiting).
    t0 = time.time()
    while time.time() - t0 < 120:
        s, _ = api.request("GET", PATH + "/certificates?limit=1")
        if s == 200 and metric(metrics(api), "apiserver_watch_cache_initializations_total",
                               group="cert-manager.io", resource="certificates") >= 1:
            return
        time.sleep(0.2)
    raise RuntimeError("the restarted API server does not serve Certificates from its watch cache")


def sync(cur, api, n, mode, restart_dir=None):
    """One initial sync of the n Certificates in mode; a result row (dict)."""
    worker, postmaster = fresh_server(cur, api.kubeconfig)
    if restart_dir:
        restart_apiserver(api, restart_dir)
    time.sleep(0.5)
    counters0 = server_counters(api)
    rss0 = measure.status_kb(worker)[0]
    for p in [worker] + [q for q in measure.children(postmaster) if "kwatch apply" in measure.cmdline(q)]:
        reset_hwm(p)
    reset_hwm(api.pid)
    api_rss0 = measure.status_kb(api.pid)[0]
    pids = KwatchPids(postmaster, worker)
    sampler = measure.Sampler(pids)
    api_sampler = measure.Sampler(lambda: [api.pid])
    cpu_pg0, api_cpu0 = measure.pg_cpu_s(postmaster), measure.cpu_s(api.pid)
    worker_cpu0 = measure.cpu_s(worker)
    lsn = wal_lsn(cur)
    first = FirstRow()
    sampler.start()
    api_sampler.start()
    first.start()
    t0 = time.monotonic()
    cur.execute("SELECT kwatch.watch(%s, server => %s, namespace => %s)::text", (RESOURCE, SERVER, ns_of(n)))
    table = cur.fetchone()[0]
    took = wait_synced(cur, SERVER, RESOURCE, n) - t0
    peak = sampler.stop()
    api_peak = api_sampler.stop()
    first.halt.set()
    first.join()
    cpu_pg, api_cpu = measure.pg_cpu_s(postmaster) - cpu_pg0, measure.cpu_s(api.pid) - api_cpu0
    worker_cpu = measure.cpu_s(worker) - worker_cpu0
    wal = wal_bytes(cur, lsn)
    counters1 = server_counters(api)
    cur.execute("SELECT count(*) FROM %s WHERE cluster = %%s" % table, (SERVER,))
    rows = cur.fetchone()[0]
    hwm = {p: measure.status_kb(p)[1] for p in pids.seen | {worker}}
    return {"mode": mode, "objects": rows, "seconds": took,
            "first_row_s": (first.at - t0) if first.at else None,
            "objects_per_s": rows / took if took else None,
            "kwatch_rss_peak_mb": peak / 1024,
            "worker_rss_peak_mb": sampler.peak_by_pid.get(worker, 0) / 1024,
            "apply_rss_peak_mb": max([kb for p, kb in sampler.peak_by_pid.items() if p != worker] or [0]) / 1024,
            "kwatch_vmhwm_mb": sum(hwm.values()) / 1024,
            "worker_rss_before_mb": rss0 / 1024,
            "apiserver_vmhwm_mb": measure.status_kb(api.pid)[1] / 1024,
            "apiserver_rss_peak_mb": api_peak / 1024, "apiserver_rss_before_mb": api_rss0 / 1024,
            "pg_cpu_s": cpu_pg, "worker_cpu_s": worker_cpu, "apiserver_cpu_s": api_cpu, "wal_bytes": wal,
            "streaming_lists": counters1[0] - counters0[0], "list_requests": counters1[1] - counters0[1],
            "table": table}


def client_floor(api, n, mode, restart_dir=None):
    """What a client that discards every byte pays: the streaming list
    (WATCH sendInitialEvents=true, read in 1 MB chunks until the
    initial-events-end annotation) or the LIST (resourceVersion=0, one
    response) of the n Certificates, over a new connection.  The API server
    produces the same events or list for kwatch: its share of kwatch's time."""
    if restart_dir:
        restart_apiserver(api, restart_dir)
    time.sleep(0.5)
    reset_hwm(api.pid)
    path = PATH + "/namespaces/%s/certificates" % ns_of(n)
    if mode == "stream":
        path += ("?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
                 "&allowWatchBookmarks=true&timeoutSeconds=600")
    else:
        path += "?resourceVersion=0"
    conn = http.client.HTTPSConnection(api.host, api.port, context=api.tls, timeout=600)
    api_cpu0 = measure.cpu_s(api.pid)
    t0 = time.monotonic()
    conn.request("GET", path, headers={"User-Agent": "kwatch-bench", "Accept": "application/json"})
    r = conn.getresponse()
    first, size, tail = None, 0, b""
    while True:
        chunk = r.read1(1 << 20)
        if not chunk:
            break
        if first is None:
            first = time.monotonic() - t0
        size += len(chunk)
        if mode == "stream" and b"initial-events-end" in tail + chunk:
            break
        tail = chunk[-64:]
    took = time.monotonic() - t0
    conn.close()
    return {"mode": "floor-" + mode, "objects": n, "seconds": took, "first_row_s": first,
            "objects_per_s": n / took, "bytes": size, "apiserver_cpu_s": measure.cpu_s(api.pid) - api_cpu0,
            "apiserver_vmhwm_mb": measure.status_kb(api.pid)[1] / 1024}


def copy_floor(cur, table):
    """kwatch's rows of the last run as COPY text in the data directory (the
    server writes and reads it), then one COPY FROM file into a fresh table
    LIKE the mirror INCLUDING ALL (its generated columns and indexes)."""
    cur.execute("SELECT current_setting('data_directory')")
    path = os.path.join(cur.fetchone()[0], "copy-certificates.txt")
    cur.execute("COPY (SELECT 'copyfloor', uid, resource_version, object FROM %s WHERE cluster = %%s) TO %%s"
                % table, (SERVER, path))
    cur.execute("DROP TABLE IF EXISTS public.copy_floor_cr")
    cur.execute("CREATE TABLE public.copy_floor_cr (LIKE %s INCLUDING ALL)" % table)
    cur.execute("SELECT pg_backend_pid()")
    backend = cur.fetchone()[0]
    sampler = measure.Sampler(lambda: [backend])
    sampler.start()
    t0 = time.monotonic()
    cur.execute("COPY public.copy_floor_cr (cluster, uid, resource_version, object) FROM %s", (path,))
    took = time.monotonic() - t0
    peak = sampler.stop()
    cur.execute("SELECT count(*) FROM public.copy_floor_cr")
    rows = cur.fetchone()[0]
    cur.execute("DROP TABLE public.copy_floor_cr")
    cur.execute("SELECT pg_stat_file(%s) IS NOT NULL", (path,))
    try:
        os.unlink(path)
    except OSError:
        pass
    return {"mode": "copy", "objects": rows, "seconds": took, "objects_per_s": rows / took,
            "kwatch_rss_peak_mb": peak / 1024}


def fmt(v, digits=2):
    if v is None:
        return ""
    if isinstance(v, float):
        return "{:,.{}f}".format(v, digits)
    return "{:,}".format(v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", default="10000,50000")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json")
    ap.add_argument("--no-restart", action="store_true",
                    help="do not restart the API server before each sync")
    args = ap.parse_args()
    sizes = sorted(int(x) for x in args.objects.split(",") if x.strip())
    api = Api(os.environ["KWATCH_MODERN_DIR"])
    conn = psycopg2.connect("")
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("CREATE EXTENSION IF NOT EXISTS kwatch")
    ensure_crd(api)
    # the generic server's /version is unstamped (v0.0.0-master): the build's own record
    cache = os.environ.get("KWATCH_K8S_MODERN_CACHE", "/var/cache/kwatch-k8s-modern")
    try:
        with open(os.path.join(cache, "VERSIONS")) as f:
            version = f.readline().strip()
    except OSError:
        version = "k8s.io/apiextensions-apiserver (version unknown)"
    report = {"date": datetime.date.today().isoformat(), "machine": measure.machine(),
              "server": version,
              "repeat": args.repeat, "apiserver_restarted": not args.no_restart, "sizes": []}
    for n in sizes:
        made, secs = create(api, n)
        entry = {"objects": n, "created": made, "create_s": secs,
                 "create_per_s": made / secs if secs else None, "rows": []}
        bytes_each = None
        s, b = api.request("GET", PATH + "/namespaces/%s/certificates?limit=1" % ns_of(n))
        items = json.loads(b)["items"]
        if items:
            bytes_each = len(json.dumps(items[0]))
        entry["bytes_per_object"] = bytes_each
        if made:
            print("  created %d in %.1f s (%.0f/s)" % (made, secs, made / secs), flush=True)
        table = None
        restart_dir = None if args.no_restart else os.environ["KWATCH_MODERN_DIR"]
        # rounds interleaved: in each, kwatch and the floor of each mode in
        # turn, so that a slower stretch of the machine touches them alike
        runs = {mode: [] for mode in ("stream", "list")}
        floors = {mode: [] for mode in ("stream", "list")}
        available = {}
        for r in range(args.repeat):
            for mode in ("stream", "list"):
                available[mode] = set_strategy(cur, mode)
                if available[mode] or mode == "list":
                    res = sync(cur, api, n, mode, restart_dir)
                    res["available"] = available[mode]
                    res["strategy_setting"] = available[mode]
                    runs[mode].append(res)
                    table = res["table"]
                    print("  round %d: kwatch %s %d: %.2f s (first row %s s), kwatch %.0f MB, apiserver %.0f MB, "
                          "streaming lists %d, LIST requests %d" %
                          (r + 1, mode, n, res["seconds"], fmt(res["first_row_s"]), res["kwatch_rss_peak_mb"],
                           res["apiserver_vmhwm_mb"], res["streaming_lists"], res["list_requests"]),
                          flush=True)
                fl = client_floor(api, n, mode, restart_dir)
                floors[mode].append(fl)
                print("  round %d: %s floor %d: %.2f s, API server CPU %.2f s"
                      % (r + 1, mode, n, fl["seconds"], fl["apiserver_cpu_s"]), flush=True)
        for mode in ("stream", "list"):
            if not runs[mode]:
                entry["rows"].append({"mode": mode, "available": False})
                continue
            ordered = sorted(runs[mode], key=lambda x: x["seconds"])
            med = dict(ordered[(len(ordered) - 1) // 2])
            med["runs"] = [x["seconds"] for x in ordered]
            entry["rows"].append(med)
        for mode in ("stream", "list"):
            ordered = sorted(floors[mode], key=lambda x: x["seconds"])
            entry["rows"].append(ordered[(len(ordered) - 1) // 2])
        if table:
            entry["rows"].append(copy_floor(cur, table))
        report["sizes"].append(entry)
    try:
        cur.execute("ALTER SYSTEM RESET kwatch.list_strategy")
        cur.execute("SELECT pg_reload_conf()")
    except psycopg2.Error:
        pass
    cur.execute("SELECT kwatch.unwatch(resource, server => server, drop_table => true)"
                " FROM kwatch.registrations WHERE server = %s", (SERVER,))
    print()
    print(markdown(report))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


def markdown(report):
    out = ["Custom resources on the modern control plane (%s; %s; %s; median of %d):" %
           (report["server"], report["date"], report["machine"], report.get("repeat", 1)), "",
           "| objects | how | total s | first row s | obj/s | kwatch peak RssAnon MB (worker + apply) |"
           " API server VmHWM MB | streaming lists / LIST requests (server's counters) |"
           " CPU s: PostgreSQL (of it the worker) / API server |",
           "|---|---|---|---|---|---|---|---|---|"]
    names = {"stream": "kwatch, streaming list (`list_strategy = stream`)",
             "list": "kwatch, LIST (`list_strategy = list`)", "copy": "COPY floor (COPY FROM file)",
             "floor-stream": "streaming list floor (a client discarding the bytes)",
             "floor-list": "LIST floor (rv=0, a client discarding the bytes)"}
    for e in report["sizes"]:
        for r in e["rows"]:
            if not r.get("available", True):
                out.append("| {:,} | {} | not available (no kwatch.list_strategy) | | | | | | |".format(
                    e["objects"], names[r["mode"]]))
                continue
            name = names[r["mode"]]
            if r["mode"] == "list" and not r.get("strategy_setting", True):
                name = "kwatch, LIST (its only strategy)"
            counters = "%d / %d" % (r["streaming_lists"], r["list_requests"]) if "streaming_lists" in r else ""
            cpu = "%s%s / %s" % (fmt(r.get("pg_cpu_s")),
                                 " (%s)" % fmt(r["worker_cpu_s"]) if "worker_cpu_s" in r else "",
                                 fmt(r.get("apiserver_cpu_s"))) \
                if r.get("apiserver_cpu_s") is not None else ""
            out.append("| {:,} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
                e["objects"], name, fmt(r["seconds"]), fmt(r.get("first_row_s")),
                fmt(r["objects_per_s"], 0), fmt(r.get("kwatch_rss_peak_mb"), 0),
                fmt(r.get("apiserver_vmhwm_mb"), 0), counters, cpu))
    out.append("")
    for e in report["sizes"]:
        if e["created"]:
            out.append("Created {:,} Certificates (~{} bytes of JSON each as served) in {:.1f} s: "
                       "{:,.0f}/s (POSTs from 16 threads, one keep-alive connection each).".format(
                           e["created"], e["bytes_per_object"], e["create_s"], e["create_per_s"]))
    return "\n".join(out)


if __name__ == "__main__":
    main()
