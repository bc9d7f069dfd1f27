#!/usr/bin/python3
"""Recovery timings (issue 3, part 6).  Prints a report; asserts nothing.

usage: recovery.py --objects N --k8s-dir DIR --cluster-sh PATH --pg-dir DIR
       (environment: PG* for PostgreSQL; KWATCH_K8S_SERVER, KWATCH_K8S_TOKEN,
       KWATCH_K8S_CA from the cluster's env file)

1. relist after a 410 on N ConfigMaps: PostgreSQL is stopped, 1% of the
   objects change, etcd is compacted and the API server restarted (a fresh
   watch cache: the checkpoint is too old), PostgreSQL started again; timed
   from PostgreSQL's start to the table equal to the server (and the cost of
   a bare paginated LIST of the same objects, for comparison);
2. API server back -> table converged: the API server is restarted while a
   watch runs; a ConfigMap is created as soon as it is ready again; timed
   until the row is in the table and every row equals the server;
3. stalled connection noticed: the watch goes through a proxy
   (test/fakeapi/proxy.py) that freezes its connection right
   after an event; timed until the worker reports the silence (its
   last_error_at), and until a change made during the freeze is in the
   table, against its bound: the WATCH's timeoutSeconds (at most
   2 x kwatch.watch_timeout) + kwatch.inactivity_timeout.
"""
import argparse
import concurrent.futures
import os
import statistics
import subprocess
import sys
import time
from datetime import timezone

import psycopg2

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, os.path.join(HERE, ".."))
from k8s_api import Api  # noqa: E402
from fakeapi.proxy import FaultProxy  # noqa: E402

NS = "kwatch-recovery"
NS_STALL = "kwatch-recovery-stall"


API = Api(os.environ["KWATCH_K8S_SERVER"], os.environ["KWATCH_K8S_TOKEN"], os.environ["KWATCH_K8S_CA"],
          patience=180)


_conn = [None]


def pg():
    """One autocommit connection, opened again after PostgreSQL restarted."""
    c = _conn[0]
    if c is None or c.closed:
        c = psycopg2.connect(connect_timeout=5)
        c.autocommit = True
        _conn[0] = c
    return c


def q(sql, args=None):
    try:
        with pg().cursor() as cur:
            cur.execute(sql, args)
            return cur.fetchall() if cur.description else []
    except psycopg2.OperationalError:
        _conn[0] = None
        raise


def q1(sql, args=None):
    r = q(sql, args)
    return r[0][0] if r else None


def wait(fn, timeout, what, interval=0.05):
    deadline = time.monotonic() + timeout
    while True:
        try:
            v = fn()
        except psycopg2.OperationalError:
            v = None
        if v:
            return v
        if time.monotonic() > deadline:
            raise SystemExit("timed out after %ss waiting for %s" % (timeout, what))
        time.sleep(interval)


def cm(ns, name, v="1"):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
            "data": {"v": v, "pad": "x" * 200}}


def ensure_namespace(ns):
    API.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                               "metadata": {"name": ns}})


def create_many(ns, n, threads=16):
    coll = "/api/v1/namespaces/%s/configmaps" % ns
    with concurrent.futures.ThreadPoolExecutor(threads) as ex:
        codes = list(ex.map(lambda i: API.request("POST", coll, cm(ns, "cm-%05d" % i))[0], range(n)))
    bad = [c for c in codes if c not in (201, 409)]
    if bad:
        raise SystemExit("creating configmaps failed: %s" % bad[:5])


def server_map(ns):
    st, body = API.request("GET", "/api/v1/namespaces/%s/configmaps" % ns)
    return {i["metadata"]["uid"]: i["metadata"]["resourceVersion"] for i in body["items"]}


def table_map(server):
    return dict(q("SELECT uid, resource_version FROM k8s.configmaps WHERE cluster = %s", (server,)))


def converged(server, ns):
    return table_map(server) == server_map(ns)


def status(server):
    try:
        with pg().cursor() as cur:
            cur.execute("SELECT * FROM kwatch.watches WHERE server = %s", (server,))
            row = cur.fetchone()
            return dict(zip([d[0] for d in cur.description], row)) if row else None
    except psycopg2.OperationalError:
        _conn[0] = None
        raise


def watching(server):
    st = status(server)
    return st if st and st["state"] == "watching" and st["healthy"] else None


def cluster_sh(args, cmd):
    t0 = time.monotonic()
    subprocess.run(["bash", args.cluster_sh, cmd, args.k8s_dir], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - t0


def pg_sh(args, cmd):
    extra = [os.environ["PGPORT"], os.environ["PGDATABASE"]] if cmd == "start" else []
    subprocess.run(["bash", os.path.join(HERE, "..", "drivers", "pg.sh"), cmd, args.pg_dir, *extra], check=True,
                   stdout=subprocess.DEVNULL)


def timed_list(ns, limit=500):
    t0 = time.monotonic()
    cont, n = None, 0
    while True:
        path = "/api/v1/namespaces/%s/configmaps?limit=%d" % (ns, limit)
        if cont:
            path += "&continue=" + cont
        st, body = API.request("GET", path)
        n += len(body["items"])
        cont = body["metadata"].get("continue")
        if not cont:
            return time.monotonic() - t0, n


def reload_settings(**gucs):
    for k, v in gucs.items():
        q("ALTER SYSTEM SET kwatch.%s = %%s" % k, (str(v),))
    q("SELECT pg_reload_conf()")
    time.sleep(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, default=10000)
    ap.add_argument("--k8s-dir", required=True)
    ap.add_argument("--cluster-sh", required=True)
    ap.add_argument("--pg-dir", required=True)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n = args.objects
    report = []
    settings = dict(q("SELECT name, setting || coalesce(unit, '') FROM pg_settings"
                      " WHERE name LIKE 'kwatch.%%'"))

    q("CREATE SERVER IF NOT EXISTS direct FOREIGN DATA WRAPPER kwatch OPTIONS (kubeconfig %s)",
      (os.environ["KUBECONFIG"],))
    ensure_namespace(NS)
    t0 = time.monotonic()
    create_many(NS, n)
    print("created %d configmaps in %.1f s" % (n, time.monotonic() - t0), flush=True)
    list_s, listed = timed_list(NS)

    # ---- 1. relist after a 410
    t0 = time.monotonic()
    q("SELECT kwatch.watch('configmaps', server => 'direct', namespace => %s)", (NS,))
    wait(lambda: watching("direct") and converged("direct", NS), 600, "the initial sync")
    initial_s = time.monotonic() - t0
    pg_sh(args, "stop")
    coll = "/api/v1/namespaces/%s/configmaps" % NS
    changed, gone = max(1, n // 100), max(1, n // 1000)
    stamp = str(time.time())
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda i: API.request("PATCH", "%s/cm-%05d" % (coll, i * 97 % n), {"data": {"v": stamp}},
                                          "application/merge-patch+json"), range(changed)))
        list(ex.map(lambda i: API.request("DELETE", "%s/cm-%05d" % (coll, (i * 89 + 7) % n)),
                    range(gone)))
        list(ex.map(lambda i: API.request("POST", coll, cm(NS, "new-%s-%05d" % (stamp, i))),
                    range(gone)))
    cluster_sh(args, "compact")
    cluster_sh(args, "restart-apiserver")
    t0 = time.monotonic()
    pg_sh(args, "start")
    wait(lambda: (status("direct") or {}).get("relists", 0) >= 1 and watching("direct")
         and converged("direct", NS), 600, "the relist after 410", interval=0.02)
    relist_s = time.monotonic() - t0
    st = status("direct")
    report += [
        "1. relist after a 410 on %d ConfigMaps (%d changed, %d deleted, %d created while"
        " PostgreSQL was down; etcd compacted, API server restarted)" % (n, changed, gone, gone),
        "   PostgreSQL start -> table equal to the server: %.2f s (relists %d, list calls %d,"
        " notifications %d)" % (relist_s, st["relists"], st["list_calls"], st["notifications"]),
        "   for comparison: initial sync %.2f s; bare paginated LIST (limit 500) of %d objects"
        " by a client: %.2f s" % (initial_s, listed, list_s),
    ]
    print("\n".join(report[-3:]), flush=True)

    # ---- 2. API server back -> table converged
    times, downs = [], []
    for i in range(args.repeat):
        wait(lambda: watching("direct"), 60, "a watching watch")
        downs.append(cluster_sh(args, "restart-apiserver"))
        t0 = time.monotonic()
        st_code, _ = API.request("POST", coll, cm(NS, "marker-%d-%d" % (os.getpid(), i)))
        wait(lambda: watching("direct") and converged("direct", NS), 120, "convergence after restart",
             interval=0.02)
        times.append(time.monotonic() - t0)
    report += [
        "2. API server restarted while watching (%d runs; restart-apiserver took %s s):"
        % (args.repeat, ", ".join("%.1f" % d for d in downs)),
        "   ready again -> a new object in the table and the table equal to the server: %s s"
        " (median %.2f; kwatch.backoff_initial %s, backoff_max %s)"
        % (", ".join("%.2f" % t for t in times), statistics.median(times),
           settings.get("kwatch.backoff_initial"), settings.get("kwatch.backoff_max")),
    ]
    print("\n".join(report[-2:]), flush=True)

    # ---- 3. stalled connection
    inactivity = 10
    watch_timeout = 10  # a frozen WATCH is given up inactivity s past its timeoutSeconds
    reload_settings(watch_timeout="%ds" % watch_timeout, inactivity_timeout="%ds" % inactivity)
    pki = os.path.join(args.k8s_dir, "pki")
    proxy = FaultProxy.for_cluster(os.environ["KWATCH_K8S_SERVER"], pki).start()
    q("CREATE SERVER IF NOT EXISTS proxied FOREIGN DATA WRAPPER kwatch"
      " OPTIONS (api_server %s, certificate_authority %s)", (proxy.url, os.environ["KWATCH_K8S_CA"]))
    q("CREATE USER MAPPING IF NOT EXISTS FOR CURRENT_USER SERVER proxied OPTIONS (token %s)",
      (os.environ["KWATCH_K8S_TOKEN"],))
    ensure_namespace(NS_STALL)
    q("SELECT kwatch.watch('configmaps', server => 'proxied', namespace => %s)", (NS_STALL,))
    wait(lambda: watching("proxied"), 60, "the proxied watch")
    scoll = "/api/v1/namespaces/%s/configmaps" % NS_STALL
    noticed, recovered = [], []
    for i in range(args.repeat):
        wait(lambda: watching("proxied"), 60, "the proxied watch")
        name = "tick-%d-%d" % (os.getpid(), i)
        API.request("POST", scoll, cm(NS_STALL, name))
        wait(lambda: q1("SELECT 1 FROM k8s.configmaps WHERE cluster = 'proxied' AND name = %s",
                        (name,)), 30, "the tick event", interval=0.005)
        t_freeze = time.time()
        proxy.freeze(120)
        API.request("POST", scoll, cm(NS_STALL, name + "-during"))
        wait(lambda: q1("SELECT 1 FROM k8s.configmaps WHERE cluster = 'proxied' AND name = %s",
                        (name + "-during",)), 120, "the change made during the stall", interval=0.02)
        recovered.append(time.time() - t_freeze)
        st = status("proxied")
        at = st["last_error_at"].astimezone(timezone.utc).timestamp()
        if "received nothing" in (st["last_error"] or ""):
            noticed.append(at - t_freeze)
        proxy.cut()
    proxy.stop()
    report += [
        "3. stalled connection (proxy freezes the watch right after an event; %d runs;"
        " kwatch.watch_timeout %d s, kwatch.inactivity_timeout %d s: noticed at most %d s after"
        " the WATCH started):" % (args.repeat, watch_timeout, inactivity, 2 * watch_timeout + inactivity),
        "   freeze -> worker reports the silence: %s s" % ", ".join("%.2f" % t for t in noticed),
        "   freeze -> the change made during the stall is in the table: %s s"
        % ", ".join("%.2f" % t for t in recovered),
    ]
    print("\n".join(report[-3:]), flush=True)
    q("ALTER SYSTEM RESET kwatch.inactivity_timeout")
    q("ALTER SYSTEM RESET kwatch.watch_timeout")
    q("SELECT pg_reload_conf()")

    print("\n== kwatch recovery report ==")
    print("\n".join(report))


if __name__ == "__main__":
    main()
