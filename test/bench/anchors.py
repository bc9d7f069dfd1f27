"""The anchors of issue 10: kwatch's initial sync beside what other clients
pay for the same pods on the same cluster, measured one after another in one
run.  Imported by bench.py; every function returns one row (a dict) with
seconds, objects, peak RSS (MB), CPU seconds and the API server's CPU seconds
spent serving it.

Rows and how each is measured:
  kwatch          watch() call -> the watch healthy with every row committed;
                  RSS = peak of the summed RssAnon (private memory) of the
                  worker and the apply workers, sampled every 10 ms (each
                  process's own peak in the JSON: worker_rss_peak_mb,
                  apply_rss_peak_mb);
                  the end awaited with kwatch.wait_synced() (the list's
                  merge committed; it sleeps on the worker's condition
                  variable), the phases first_rows_s (first batch
                  committed) and all_rows_s (every row committed) from the
                  watch's counters (kwatch.watch_status(), polled every
                  20 ms by SyncPhases on a connection of its own: the
                  kwatch.watches view costs 1-4 ms a call, a tenth of a
                  core at that rate, taken from the sync it measures);
                  CPU = the whole PostgreSQL instance (worker, apply workers,
                  WAL writer, ...; measure.pg_cpu_s), the worker's and the
                  apply workers' apart in the JSON (worker_cpu_s,
                  apply_cpu_s)
  informer        test/bench/informer (client-go SharedInformerFactory, pods,
                  all namespaces) from Start to HasSynced, as JSON (with and
                  without gzip; client-go asks for gzip by default) and
                  protobuf; RSS and CPU of the process from wait4
  kubectl         `kubectl get pods -A -o json` to a file; wall time of the
                  process, RSS and CPU from wait4
  LIST rv=0       one curl GET ?resourceVersion=0 (the watch cache answers
                  whole, as to an informer), body discarded; wait4; its
                  first byte (curl's time_starttransfer) as first_byte_s
  LIST paged      GETs of limit=500 pages following continue tokens (etcd
                  answers, as to kwatch), over one keep-alive connection, in a
                  child Python process that discards the bodies (curl cannot
                  follow continue tokens); wait4
  COPY            the same objects as kwatch stores them (managedFields
                  dropped, apiVersion and kind added), pre-written as COPY
                  text, loaded with a server-side COPY FROM file in one
                  transaction into a table made LIKE k8s.pods INCLUDING ALL
                  (the same generated columns, indexes and lz4 compression);
                  RSS = the backend's peak RssAnon, CPU as for kwatch
"""
import glob
import hashlib
import http.client
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse

import measure

HERE = os.path.dirname(os.path.abspath(__file__))
K8S_CACHE = os.environ.get("KWATCH_K8S_CACHE", "/var/cache/kwatch-k8s")
GOROOT_BIN = "/usr/lib/go-1.19/bin"
USER_AGENT = "kwatch-bench"   # not curl/...: the apiserver pretty-prints JSON for curl
LAUNCHER = [None]             # measure.build_launcher's binary, set by setup()


def setup(bench_dir):
    """Builds the rusage launcher (and nothing else) for the child anchors."""
    LAUNCHER[0] = measure.build_launcher(bench_dir)


def apiserver_pid():
    """kube-apiserver's pid from the cluster dir cluster.sh wrote (DIR/pki -> DIR)."""
    d = os.path.dirname(os.environ["KWATCH_K8S_PKI"])
    with open(os.path.join(d, "apiserver.pid")) as f:
        pid = int(f.read())
    if "kube-apiserver" not in measure.cmdline(pid):
        raise RuntimeError("no kube-apiserver at pid %d" % pid)
    return pid


def settle(api_pid, postmaster, below=0.15, window=0.5, limit=10):
    """Waits (up to `limit` s) until the API server and PostgreSQL each used
    less than `below` of a core over `window` s, so that what the previous
    row left running (the apiserver's garbage collection after a large list,
    a checkpoint or autovacuum after a COPY) does not land on the next row."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        a0, p0, w0 = measure.cpu_s(api_pid), measure.pg_cpu_s(postmaster), time.monotonic()
        time.sleep(window)
        w = time.monotonic() - w0
        if (measure.cpu_s(api_pid) - a0) / w < below and (measure.pg_cpu_s(postmaster) - p0) / w < below:
            break
    return time.monotonic() - t0


def row(name, seconds, objects, rss_kb, cpu, api_cpu, **extra):
    r = {"name": name, "seconds": seconds, "objects": objects,
         "objects_per_s": objects / seconds if seconds else None,
         "rss_mb": rss_kb / 1024 if rss_kb is not None else None,
         "cpu_s": cpu, "apiserver_cpu_s": api_cpu}
    r.update(extra)
    return r


# ----------------------------------------------------------------- kwatch

def apply_workers(postmaster):
    """The pids of the kwatch apply workers running now."""
    return [p for p in measure.children(postmaster) if "kwatch apply" in measure.cmdline(p)]


class KwatchPids:
    """The kwatch worker and the apply workers running now (they start on
    demand); the postmaster's children are scanned at most every 100 ms, so
    that sampling costs little CPU beside what it measures.  .seen keeps
    every apply worker met."""

    def __init__(self, postmaster, worker):
        self.postmaster, self.worker = postmaster, worker
        self.applies, self.scanned = [], 0.0
        self.seen = set()

    def __call__(self):
        now = time.monotonic()
        if now - self.scanned > 0.1:
            self.applies = apply_workers(self.postmaster)
            self.seen.update(self.applies)
            self.scanned = now
        return [self.worker] + self.applies


def wal_lsn(cur):
    cur.execute("SELECT pg_current_wal_insert_lsn()")
    return cur.fetchone()[0]


def wal_bytes(cur, since):
    cur.execute("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s)::bigint", (since,))
    return cur.fetchone()[0]


class SyncPhases(threading.Thread):
    """The phases of one watch's initial sync, from its counters polled
    every 20 ms (kwatch.watch_status(): 0.3 ms a call, where the
    kwatch.watches view costs 1-4 ms) on a connection of its own: .first_rows
    (seconds from t0 to the first batch committed, `added` > 0) and
    .all_rows (to `added` >= n).  Stops at all_rows or when .halt is set."""

    def __init__(self, server, resource, n, t0):
        super().__init__(daemon=True)
        self.server, self.resource, self.n, self.t0 = server, resource, n, t0
        self.first_rows = self.all_rows = None
        self.halt = threading.Event()

    def run(self):
        import psycopg2
        conn = psycopg2.connect("")
        conn.autocommit = True
        cur = conn.cursor()
        cur.execute("SELECT id FROM kwatch.registrations WHERE server = %s AND resource = %s",
                    (self.server, self.resource))
        wid = cur.fetchone()[0]
        while not self.halt.is_set() and self.all_rows is None:
            cur.execute("SELECT added FROM kwatch.watch_status() WHERE watch_id = %s", (wid,))
            r = cur.fetchone()
            added = r[0] if r else None
            now = time.monotonic() - self.t0
            if self.first_rows is None and added:
                self.first_rows = now
            if added and added >= self.n:
                self.all_rows = now
            self.halt.wait(0.02)
        conn.close()


def wait_synced(cur, server, resource, n):
    """Blocks in kwatch.wait_synced() until the watch of resource on server
    has its list merged (no polling) and returns that moment
    (time.monotonic()); then checks that it holds >= n objects and turns
    healthy (its watch started, a moment after the merge; not counted).
    RuntimeError otherwise, or after 30 minutes."""
    cur.execute("SELECT kwatch.wait_synced(%s, server => %s, timeout => '30 min')", (resource, server))
    synced_at = time.monotonic()
    deadline = synced_at + 30
    while True:
        cur.execute("SELECT healthy, objects FROM kwatch.watches WHERE server = %s AND resource = %s",
                    (server, resource))
        healthy, objects = cur.fetchone()
        if healthy and objects is not None and objects >= n:
            return synced_at
        if time.monotonic() > deadline:
            raise RuntimeError("the watch of %s on %s synced, then not healthy with >= %d objects (%s)"
                               % (resource, server, n, objects))
        time.sleep(0.05)


def kwatch_sync(cur, server, n, postmaster, api_pid, notify=True):
    """Drops the mirror and times watch('pods') to healthy with >= n rows."""
    cur.execute("SELECT kwatch.unwatch('pods', server => %s, drop_table => true)"
                " FROM kwatch.registrations WHERE server = %s AND resource = 'pods'", (server, server))
    cur.execute("SELECT kwatch.worker_pid()")
    worker = cur.fetchone()[0]
    rss0 = measure.status_kb(worker)[0]
    cpu_pg0, cpu_w0, api0 = measure.pg_cpu_s(postmaster), measure.cpu_s(worker), measure.cpu_s(api_pid)
    apply0 = {p: measure.cpu_s(p) for p in apply_workers(postmaster)}
    lsn = wal_lsn(cur)
    pids = KwatchPids(postmaster, worker)
    sampler = measure.Sampler(pids)
    sampler.start()
    t0 = time.monotonic()
    cur.execute("SELECT kwatch.watch('pods', server => %s, notify => %s)", (server, notify))
    phases = SyncPhases(server, "pods", n, t0)
    phases.start()
    took = wait_synced(cur, server, "pods", n) - t0
    phases.halt.set()
    phases.join()
    # the last rows may commit with the merge itself, between two polls
    first_rows, all_rows = phases.first_rows, phases.all_rows or took
    peak = sampler.stop()
    cpu_pg, cpu_w = measure.pg_cpu_s(postmaster) - cpu_pg0, measure.cpu_s(worker) - cpu_w0
    cpu_apply = sum(measure.cpu_s(p) - apply0.get(p, 0.0) for p in pids.seen | set(apply0))
    apply_peak = max([kb for p, kb in sampler.peak_by_pid.items() if p != worker] or [0])
    api = measure.cpu_s(api_pid) - api0
    wal = wal_bytes(cur, lsn)
    cur.execute("SELECT count(*), pg_total_relation_size('k8s.pods') FROM k8s.pods WHERE cluster = %s",
                (server,))
    rows, size = cur.fetchone()
    return row("kwatch", took, rows, peak, cpu_pg, api, worker_cpu_s=cpu_w, apply_cpu_s=cpu_apply,
               apply_workers=len(pids.seen | set(apply0)),
               first_rows_s=first_rows, all_rows_s=all_rows,
               worker_rss_peak_mb=sampler.peak_by_pid.get(worker, 0) / 1024,
               apply_rss_peak_mb=apply_peak / 1024,
               worker_rss_before_mb=rss0 / 1024, worker_rss_after_mb=measure.status_kb(worker)[0] / 1024,
               wal_bytes=wal, table_mb=size / 1e6)


# ----------------------------------------------------------------- informer

def k8s_src():
    found = sorted(glob.glob(os.path.join(K8S_CACHE, "src", "kubernetes-*/")))
    if not found or not os.path.isdir(os.path.join(found[0], "vendor", "k8s.io", "client-go")):
        raise RuntimeError("no unpacked Kubernetes source under %s/src (test/k8s/build.sh)" % K8S_CACHE)
    return found[0].rstrip("/")


def build_informer(bench_dir):
    """Builds test/bench/informer/main.go into bench_dir/bin/informer, in
    GOPATH mode against the vendored client-go of the Kubernetes source tree
    build.sh unpacked: a GOPATH of our own in bench_dir/go whose
    src/k8s.io/kubernetes holds the program and a symlink to the tree's
    vendor directory, so the import paths (k8s.io/kubernetes/vendor/...) and
    flags equal the apiserver build's and its GOCACHE serves the compiled
    client-go.  Rebuilt only when the source, the tree or Go changed."""
    src = os.path.join(HERE, "informer", "main.go")
    ksrc = k8s_src()
    go = os.path.join(GOROOT_BIN, "go")
    out = os.path.join(bench_dir, "bin", "informer")
    key = hashlib.sha256(open(src, "rb").read() + ksrc.encode() +
                         subprocess.run([go, "version"], capture_output=True, check=True).stdout).hexdigest()
    stamp = out + ".stamp"
    if os.path.exists(out) and os.path.exists(stamp) and open(stamp).read() == key:
        return out
    kdir = os.path.join(bench_dir, "go", "src", "k8s.io", "kubernetes")
    pkg = os.path.join(kdir, "kwbench", "informer")
    os.makedirs(pkg, exist_ok=True)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    vendor = os.path.join(kdir, "vendor")
    if os.path.islink(vendor) and os.readlink(vendor) != os.path.join(ksrc, "vendor"):
        os.unlink(vendor)
    if not os.path.islink(vendor):
        os.symlink(os.path.join(ksrc, "vendor"), vendor)
    shutil.copyfile(src, os.path.join(pkg, "main.go"))
    env = dict(os.environ, GOPATH=os.path.join(bench_dir, "go"), GOCACHE=os.path.join(K8S_CACHE, "gocache"),
               GO111MODULE="off", GOPROXY="off", GOFLAGS="", CGO_ENABLED="0",
               PATH=GOROOT_BIN + ":" + os.environ["PATH"])
    env.pop("GOROOT", None)
    print("building the client-go informer (once; reuses the apiserver build's cache)...", flush=True)
    t0 = time.monotonic()
    subprocess.run([go, "build", "-tags", "selinux,notest", "-trimpath", "-ldflags", "-s -w",
                    "-o", out + ".tmp", "k8s.io/kubernetes/kwbench/informer"],
                   cwd=kdir, env=env, check=True)
    os.rename(out + ".tmp", out)
    with open(stamp, "w") as f:
        f.write(key)
    print("  built in %.0f s" % (time.monotonic() - t0), flush=True)
    return out


def informer(binary, api_pid, protobuf=False, gzip=True):
    """One informer process to HasSynced; its own elapsed time (Start ->
    HasSynced), RSS and CPU of the whole process (startup included)."""
    argv = [binary, "-kubeconfig", os.environ["KUBECONFIG"], "-gzip=%s" % str(gzip).lower()]
    if protobuf:
        argv.append("-protobuf")
    api0 = measure.cpu_s(api_pid)
    wall, rss, cpu, out = measure.run_child(LAUNCHER[0], argv, stdout=subprocess.PIPE)
    res = json.loads(out)
    name = "client-go informer, %s%s" % ("protobuf" if protobuf else "JSON",
                                         "" if protobuf else (", gzip" if gzip else ", no gzip"))
    return row(name, res["seconds"], res["objects"], rss, cpu, measure.cpu_s(api_pid) - api0,
               wall_s=wall, heap_mb=res["heap_mb"])


# ----------------------------------------------------------------- kubectl, LIST

def kubectl_json(bench_dir, api_pid):
    """`kubectl get pods -A -o json` into a file (then counted, unmeasured)."""
    path = os.path.join(bench_dir, "kubectl-pods.json")
    api0 = measure.cpu_s(api_pid)
    with open(path, "wb") as f:
        wall, rss, cpu, _ = measure.run_child(LAUNCHER[0], ["kubectl", "get", "pods", "-A", "-o", "json"],
                                              stdout=f)
    api = measure.cpu_s(api_pid) - api0
    with open(path) as f:
        n = len(json.load(f)["items"])
    os.unlink(path)
    return row("kubectl get pods -A -o json", wall, n, rss, cpu, api)


def list_rv0(n, api_pid):
    """The LIST floor as an informer's first LIST: one curl GET
    /api/v1/pods?resourceVersion=0 (served whole from the watch cache)."""
    url = os.environ["KWATCH_K8S_SERVER"] + "/api/v1/pods?resourceVersion=0"
    argv = ["curl", "-sS", "-f", "--http1.1", "-o", "/dev/null", "-w",
            "%{size_download} %{time_starttransfer}",
            "--cacert", os.environ["KWATCH_K8S_CA"], "-A", USER_AGENT,
            "-H", "Authorization: Bearer " + os.environ["KWATCH_K8S_TOKEN"], url]
    api0 = measure.cpu_s(api_pid)
    wall, rss, cpu, out = measure.run_child(LAUNCHER[0], argv, stdout=subprocess.PIPE)
    size, first_byte = out.split()
    return row("LIST floor, rv=0 (curl, one response)", wall, n, rss, cpu, measure.cpu_s(api_pid) - api0,
               bytes=int(size), first_byte_s=float(first_byte))


def list_paged(n, api_pid, limit=500):
    """The LIST floor as kwatch lists: pages of `limit` without a
    resourceVersion (etcd), in a child process (this file's __main__)."""
    api0 = measure.cpu_s(api_pid)
    wall, rss, cpu, out = measure.run_child(LAUNCHER[0], [sys.executable, os.path.abspath(__file__),
                                                "list-paged", str(limit)], stdout=subprocess.PIPE)
    res = json.loads(out)
    return row("LIST floor, paged by %d (keep-alive, from etcd)" % limit, res["seconds"], n, rss, cpu,
               measure.cpu_s(api_pid) - api0, bytes=res["bytes"], pages=res["pages"], wall_s=wall)


def _list_paged_child(limit):
    """Child process: GET every page over one HTTP/1.1 keep-alive TLS
    connection, reading and discarding bodies; the continue token is taken
    from the list's metadata, which the apiserver writes before the items."""
    u = urllib.parse.urlsplit(os.environ["KWATCH_K8S_SERVER"])
    ctx = ssl.create_default_context(cafile=os.environ["KWATCH_K8S_CA"])
    t0 = time.monotonic()
    conn = http.client.HTTPSConnection(u.hostname, u.port, context=ctx)
    headers = {"Authorization": "Bearer " + os.environ["KWATCH_K8S_TOKEN"], "User-Agent": USER_AGENT,
               "Accept": "application/json"}
    cont, pages, nbytes = None, 0, 0
    while True:
        path = "/api/v1/pods?limit=%d" % limit
        if cont:
            path += "&continue=" + urllib.parse.quote(cont, safe="")
        conn.request("GET", path, headers=headers)
        resp = conn.getresponse()
        if resp.status != 200:
            raise SystemExit("GET %s: %d %s" % (path, resp.status, resp.read()[:300]))
        head = resp.read(4096)
        m = re.search(rb'"metadata":\{[^{}]*?"continue":"([^"]*)"', head)
        nbytes += len(head)
        while True:
            chunk = resp.read(1 << 20)
            if not chunk:
                break
            nbytes += len(chunk)
        pages += 1
        cont = m.group(1).decode() if m else None
        if not cont:
            break
    print(json.dumps({"seconds": time.monotonic() - t0, "pages": pages, "bytes": nbytes}))


# ----------------------------------------------------------------- COPY

def prepare_copy(cur, bench_dir, server):
    """Writes the objects as kwatch stores them (its own rows, read back) as
    COPY text to a file the server can read; returns (path, rows).  Reading
    them from the mirror (rather than re-listing) makes the rows identical."""
    path = os.path.join(bench_dir, "copy-pods.txt")
    cur.execute("COPY (SELECT 'copyfloor', uid, resource_version, object FROM k8s.pods"
                " WHERE cluster = %s) TO %s", (server, path))
    cur.execute("SELECT count(*) FROM k8s.pods WHERE cluster = %s", (server,))
    return path, cur.fetchone()[0]


def copy_floor(conn, path, n, postmaster, api_pid):
    """A fresh table LIKE k8s.pods INCLUDING ALL, then one COPY FROM file."""
    cur = conn.cursor()
    cur.execute("DROP TABLE IF EXISTS public.copy_floor")
    cur.execute("CREATE TABLE public.copy_floor (LIKE k8s.pods INCLUDING ALL)")
    cur.execute("SELECT pg_backend_pid()")
    backend = cur.fetchone()[0]
    sampler = measure.Sampler(lambda: [backend])
    lsn = wal_lsn(cur)
    cpu0, api0 = measure.pg_cpu_s(postmaster), measure.cpu_s(api_pid)
    sampler.start()
    t0 = time.monotonic()
    cur.execute("COPY public.copy_floor (cluster, uid, resource_version, object) FROM %s", (path,))
    took = time.monotonic() - t0
    peak = sampler.stop()
    cpu, api = measure.pg_cpu_s(postmaster) - cpu0, measure.cpu_s(api_pid) - api0
    wal = wal_bytes(cur, lsn)
    cur.execute("SELECT count(*), pg_total_relation_size('public.copy_floor') FROM public.copy_floor")
    rows, size = cur.fetchone()
    cur.execute("DROP TABLE public.copy_floor")
    return row("COPY floor (COPY FROM file, table LIKE k8s.pods)", took, rows, peak, cpu, api,
               wal_bytes=wal, table_mb=size / 1e6)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "list-paged":
        _list_paged_child(int(sys.argv[2]))
    else:
        sys.exit("usage: anchors.py list-paged LIMIT   (a child of bench.py)")
