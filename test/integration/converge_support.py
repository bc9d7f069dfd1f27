"""The convergence engine (issue 3, part 5): seeded random cluster changes
interleaved with faults, then an object-by-object comparison of every
mirror table with the server's LIST and of the last notification per object
with its final state.  Used by test_convergence.py (short CI run) and by the
soak (test/bench/soak.sh, KWATCH_SOAK=1).

Pieces:
  * Api: a small HTTPS client for the test cluster (token + CA from the
    cluster env), one keep-alive connection per thread, that retries while
    the API server or etcd is down (a fault in progress);
  * Workload: the seeded generator of creates, updates, label changes (which
    move objects in and out of label-selected watches), deletes and
    re-creates (same name, new uid) over configmaps, unscheduled pods and a
    CRD's objects in several namespaces;
  * Faults: what can go wrong with the API server, etcd and PostgreSQL;
  * NotificationTracker: LISTENs on every channel in a thread, remembers the
    last notification per (cluster, uid); after a PostgreSQL restart (the
    listener's connection is lost, and NOTIFY is fire-and-forget) it
    re-reads the table, as README's "NOTIFY payload" tells clients to;
  * Engine.check(): waits for quiet, then compares.
"""
import json
import os
import random
import select
import threading
import signal
import time
import traceback
from collections import Counter

import psycopg2
from psycopg2 import sql as pgsql

import conftest
from cluster import crd_manifest as _crd_manifest
from compare import mirror_rows, row_problems
from conftest import sql, sql_one
from fakeapi.proxy import FaultProxy
from k8s_api import Api


def cluster_api(cluster, patience=120):
    return Api(cluster.server, cluster.token, cluster.ca, patience)


# ---------------------------------------------------------------- resources

CRD_PLURAL = "widgets"


def crd_group():
    return "cv%s.example.com" % conftest.RUN_ID


def crd_manifest(group):
    return _crd_manifest(group, CRD_PLURAL, "Widget")


class Kind:
    """One resource the workload changes: its URLs and how its objects look."""

    def __init__(self, plural, kind, api_version, prefix):
        self.plural, self.kind, self.api_version, self.prefix = plural, kind, api_version, prefix

    def collection(self, namespace=None):
        ns = "/namespaces/%s" % namespace if namespace else ""
        return "%s%s/%s" % (self.prefix, ns, self.plural)

    def manifest(self, name, namespace, labels, rnd):
        meta = {"name": name, "namespace": namespace, "labels": labels}
        o = {"apiVersion": self.api_version, "kind": self.kind, "metadata": meta}
        if self.kind == "Pod":
            o["spec"] = {"containers": [{"name": "c", "image": "registry.invalid/pause:1"}],
                         "terminationGracePeriodSeconds": 0}
        elif self.kind == "ConfigMap":
            o["data"] = {"v": str(rnd.random()), "blob": "x" * rnd.randrange(0, 2000)}
        else:
            o["spec"] = {"size": rnd.randrange(1000), "note": "n%d" % rnd.randrange(10 ** 6)}
        return o

    def change(self, rnd):
        """A merge patch changing the object's content (not its labels)."""
        if self.kind == "Pod":
            return {"metadata": {"annotations": {"kwc/v": str(rnd.random())}}}
        if self.kind == "ConfigMap":
            return {"data": {"v": str(rnd.random())}}
        return {"spec": {"size": rnd.randrange(1000)}}


# ---------------------------------------------------------------- workload

class Workload:
    """Seeded random changes over kinds x namespaces x name slots.

    Labels: every object carries kwc-run=<run> (the cluster-wide watches
    select on it) and a random `tier` in {a, b, c} or none; the selected
    watches use `tier in (a,b)`, so label changes move objects in and out
    of their selection."""

    def __init__(self, api, rnd, run_label, kinds, namespaces, slots):
        self.api, self.rnd, self.run_label = api, rnd, run_label
        self.kinds, self.namespaces, self.slots = kinds, namespaces, slots
        self.ops = Counter()
        self.exists = set()
        self.errors = Counter()
        self.lock = threading.Lock()

    def labels(self):
        lab = {"kwc-run": self.run_label}
        t = self.rnd.choice(["a", "b", "c", None])
        if t:
            lab["tier"] = t
        return lab

    def plan(self, n):
        """n random operations (deterministic for the seed): (op, kind, ns,
        name, args).  A model of which slots exist steers the choice (create
        what is absent; change, delete or re-create what exists), so few
        requests are refused; concurrency and faults make it approximate."""
        out = []
        for _ in range(n):
            k = self.rnd.choice(self.kinds)
            ns = self.rnd.choice(self.namespaces)
            name = "%s-%d" % (k.kind.lower(), self.rnd.randrange(self.slots))
            key = (k.plural, ns, name)
            if key in self.exists:
                op = self.rnd.choices(["update", "label", "delete", "recreate", "create"],
                                      [35, 30, 20, 13, 2])[0]
            else:
                op = self.rnd.choices(["create", "update", "delete"], [90, 5, 5])[0]
            if op in ("create", "recreate"):
                args = k.manifest(name, ns, self.labels(), self.rnd)
            elif op == "update":
                args = k.change(self.rnd)
            elif op == "label":
                t = self.rnd.choice(["a", "b", "c", None])
                args = {"metadata": {"labels": {"tier": t}}}
            else:
                args = None
            if op == "delete":
                self.exists.discard(key)
            else:
                self.exists.add(key)
            out.append((op, k, ns, name, args))
        return out

    def apply(self, op):
        """Performs one planned operation; a 404 or 409 (the slot was not in
        the state the plan assumed) is counted, not an error."""
        kind, k, ns, name, args = op
        coll = k.collection(ns)
        item = coll + "/" + name
        if kind == "create":
            st, _ = self.api.request("POST", coll, args)
        elif kind in ("update", "label"):
            st, _ = self.api.request("PATCH", item, args, "application/merge-patch+json")
            if st == 404:  # absent: create it instead
                kind = "create"
                st, _ = self.api.request("POST", coll, k.manifest(name, ns, {"kwc-run": self.run_label},
                                                                   random.Random(name)))
        elif kind == "delete":
            st, _ = self.api.request("DELETE", item, {"gracePeriodSeconds": 0})
        elif kind == "recreate":
            self.api.request("DELETE", item, {"gracePeriodSeconds": 0})
            st, _ = self.api.request("POST", coll, args)
        with self.lock:
            if st in (200, 201, 202):
                self.ops[kind] += 1
            else:
                self.errors[st] += 1
        return st


# ---------------------------------------------------------------- notifications

class NotificationTracker(threading.Thread):
    """LISTENs on channels in its own connection and keeps, per (channel,
    cluster, uid), the last announced (type, resource_version).

    On connection loss (PostgreSQL restart) it reconnects, LISTENs again and
    then reads every row of the watched tables as the client's new starting
    point: notifications committed after the LISTEN are all delivered, in
    commit order, so snapshot + later notifications is the client's view."""

    def __init__(self, channels):
        super().__init__(daemon=True)
        self.channels = dict(channels)  # channel -> table
        self.state = {}
        self.count = 0
        self.resyncs = 0
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.error = None
        self.conn = None
        self.ready = threading.Event()

    def _connect(self):
        conn = conftest.PG.connect()
        with conn.cursor() as cur:
            for ch in self.channels:
                cur.execute(pgsql.SQL("LISTEN {}").format(pgsql.Identifier(ch)))
        snap = {}
        with conn.cursor() as cur:
            for ch, table in self.channels.items():
                cur.execute("SELECT cluster, uid, resource_version FROM %s" % table)
                for cluster, uid, rv in cur.fetchall():
                    snap[(ch, cluster, uid)] = ("SNAPSHOT", rv)
        with self.lock:
            if self.conn is not None:
                self.resyncs += 1
            self.state = snap
        self.conn = conn
        self._drain()

    def _drain(self):
        self.conn.poll()
        with self.lock:
            while self.conn.notifies:
                n = self.conn.notifies.pop(0)
                p = json.loads(n.payload)
                self.state[(n.channel, p["cluster"], p["uid"])] = (p["type"], p["resource_version"])
                self.count += 1

    def run(self):
        while not self.stopping.is_set():
            try:
                if self.conn is None or self.conn.closed:
                    try:
                        self._connect()
                    except psycopg2.OperationalError:
                        time.sleep(0.2)
                        continue
                    self.ready.set()
                if select.select([self.conn], [], [], 0.2)[0]:
                    self._drain()
            except psycopg2.OperationalError:
                try:
                    self.conn.close()
                except Exception:
                    pass
                # keep self.conn (closed) so that the next connect counts a resync
            except Exception:
                self.error = traceback.format_exc()
                return

    def view(self, channel, cluster):
        """{uid: (type, rv)} of the client's current view of one watch."""
        with self.lock:
            return {u: v for (ch, c, u), v in self.state.items() if ch == channel and c == cluster}

    def finish(self):
        self.stopping.set()
        self.join(10)
        if self.conn is not None and not self.conn.closed:
            self.conn.close()


# ---------------------------------------------------------------- worker memory

def rss_anon_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


class MemoryLog:
    """RssAnon of each kwatch worker process, sampled after every round (the
    worker restarts after a kill or a PostgreSQL restart, so growth is judged
    per process)."""

    def __init__(self):
        self.by_pid = {}  # pid -> [kB, ...]
        self.order = []

    def sample(self):
        try:
            pid = sql_one("SELECT kwatch.worker_pid()")
        except psycopg2.Error:
            return
        if not pid:
            return
        kb = rss_anon_kb(pid)
        if kb is None:
            return
        if pid not in self.by_pid:
            self.by_pid[pid] = []
            self.order.append(pid)
        self.by_pid[pid].append(kb)

    def report(self):
        if not self.order:
            return "no samples"
        first = self.by_pid[self.order[0]][0]
        last = self.by_pid[self.order[-1]][-1]
        longest = max(self.order, key=lambda p: len(self.by_pid[p]))
        kb = self.by_pid[longest]
        step = max(1, len(kb) // 10)
        return ("start %d kB, end %d kB (%d worker processes); longest-lived pid %d over %d samples:"
                " %d -> %d kB (max %d; every %dth: %s)"
                % (first, last, len(self.order), longest, len(kb), kb[0], kb[-1], max(kb), step,
                   " ".join(str(k) for k in kb[::step])))


# ---------------------------------------------------------------- faults

class Faults:
    """Fault injectors; each is a callable(rnd) run in the fault thread while
    the workload runs.  `menu` lists the enabled ones."""

    def __init__(self, engine):
        self.e = engine
        self.injected = Counter()

    def apiserver_restart(self, rnd):
        """kube-apiserver killed and restarted: its watch cache is lost, a
        re-watch from an older resourceVersion gets 410 and relists."""
        conftest.CLUSTER.restart_apiserver()

    def compact(self, rnd):
        """etcd compacted to its current revision."""
        conftest.CLUSTER.compact()

    def compact_and_restart(self, rnd):
        """compaction, then a fresh watch cache: the checkpoints are gone."""
        conftest.CLUSTER.compact()
        conftest.CLUSTER.restart_apiserver()

    def etcd_stop(self, rnd):
        """etcd stopped for 2-6 s."""
        conftest.CLUSTER._sh("stop-etcd")
        time.sleep(rnd.uniform(2, 6))
        conftest.CLUSTER._sh("start-etcd")

    def pg_restart(self, rnd):
        """PostgreSQL restarted (fast shutdown) during the burst."""
        conftest.PG.restart()
        conftest.wait_until(lambda: _worker_pid_or_none(), 60, "the kwatch worker after a restart")

    def worker_kill(self, rnd):
        """the worker terminated mid-batch (pg_terminate_backend); the
        postmaster starts it again after 5 s and it resumes from its checkpoints."""
        pid = _worker_pid_or_none()
        if pid:
            sql("SELECT pg_terminate_backend(%s)", (pid,))

    def apply_terminate(self, rnd):
        """an apply worker terminated (pg_terminate_backend), mid-batch when
        one is busy: its batch rolls back, whether it committed is unknown to
        the worker, whose watch relists from its last resourceVersion."""
        pids = _apply_pids()
        if pids:
            sql("SELECT pg_terminate_backend(%s)", (rnd.choice(pids),))

    def apply_kill(self, rnd):
        """an apply worker killed with SIGKILL, mid-batch when one is busy:
        PostgreSQL restarts every process, the watches resume from their
        checkpoints."""
        pids = _apply_pids()
        if pids:
            os.kill(rnd.choice(pids), signal.SIGKILL)
            time.sleep(1)
            conftest.PG.close()
            conftest.wait_until(lambda: _worker_pid_or_none(), 60, "the kwatch worker after a crash")

    def table_lock(self, rnd):
        """LOCK on one mirror table for 3-8 s: that watch keeps its batch
        (lock_timeout) while the others flow; it catches up after."""
        table = rnd.choice(sorted({w.table for w in self.e.watches}))
        conn = conftest.PG.connect(autocommit=False)
        try:
            with conn.cursor() as cur:
                cur.execute("LOCK TABLE %s IN ACCESS EXCLUSIVE MODE" % table)
                time.sleep(rnd.uniform(3, 8))
            conn.commit()
        finally:
            conn.close()

    def alter_table(self, rnd):
        """a long ALTER TABLE adding a user column (held 2-5 s before commit)."""
        table = rnd.choice(sorted({w.table for w in self.e.watches}))
        col = "user_col_%d" % rnd.randrange(4)
        conn = conftest.PG.connect(autocommit=False)
        try:
            with conn.cursor() as cur:
                cur.execute("ALTER TABLE %s ADD COLUMN IF NOT EXISTS %s text DEFAULT 'mine'"
                            % (table, col))
                time.sleep(rnd.uniform(2, 5))
            conn.commit()
        finally:
            conn.close()

    def net_cut(self, rnd):
        """every connection through the proxy cut at once (watches and LISTs)."""
        self.e.proxy.cut()

    def net_freeze(self, rnd):
        """the connections through the proxy go silent, kept open, for longer
        than kwatch.inactivity_timeout, then are cut: a half-open connection,
        noticed by the worker when the WATCH stays silent inactivity_timeout
        past its timeoutSeconds (kwatch.watch_timeout..2x), else ended by the cut."""
        self.e.proxy.freeze(rnd.uniform(self.e.inactivity_s + 1, self.e.inactivity_s + 4))

    def net_errors(self, rnd):
        """the next 1-4 requests through the proxy get 429 (Retry-After: 1),
        503 or a proxy's HTML error page."""
        self.e.proxy.fail_next(rnd.randrange(1, 5), rnd.choice(["429", "503", "html"]))
        self.e.proxy.cut()  # so that the watches ask again now

    MENU = ["apiserver_restart", "compact", "compact_and_restart", "etcd_stop", "pg_restart",
            "worker_kill", "apply_terminate", "apply_kill", "table_lock", "alter_table", "net_cut",
            "net_freeze", "net_errors"]

    def inject(self, name, rnd):
        getattr(self, name)(rnd)
        self.injected[name] += 1


def _apply_pids():
    """The apply workers' pids, busy ones first (none when PostgreSQL is away)."""
    try:
        return [r[0] for r in sql("SELECT pid FROM pg_stat_activity WHERE backend_type = 'kwatch apply worker'"
                                  " ORDER BY state = 'active' DESC")]
    except psycopg2.Error:
        conftest.PG.close()
        return []


def _worker_pid_or_none():
    try:
        return sql_one("SELECT kwatch.worker_pid()")
    except psycopg2.Error:
        conftest.PG.close()
        return None


# ---------------------------------------------------------------- engine

class WatchSpec:
    def __init__(self, server, kind, resource, table, channel, namespace, selector):
        self.server, self.kind, self.resource = server, kind, resource
        self.table, self.channel = table, channel
        self.namespace, self.selector = namespace, selector

    def __repr__(self):
        return "%s %s ns=%s sel=%s" % (self.server, self.resource, self.namespace, self.selector)


class Engine:
    """Sets up namespaces, a CRD and watches for one test (ctx), then runs
    rounds: a burst of planned operations with faults injected at random
    moments, then check()."""

    def __init__(self, ctx, seed, faults=None, ops_per_round=60, threads=6, slots=12, pace=1.0,
                 inactivity_s=5, log=print):
        self.ctx, self.seed = ctx, seed
        self.rnd = random.Random(seed)
        self.log = log
        self.api = cluster_api(conftest.CLUSTER)
        self.ops_per_round, self.threads = ops_per_round, threads
        self.faults = Faults(self)
        self.menu = list(faults if faults is not None else Faults.MENU)
        self.memory = MemoryLog()
        self.rounds = 0
        self.mismatches = 0
        self.run_label = ctx.base
        self.watches = []
        self.slots = slots
        self.pace = pace
        self.inactivity_s = inactivity_s
        self.proxy = None

    def tag(self):
        return "[seed %s round %d]" % (self.seed, self.rounds)

    # -- setup
    def setup(self):
        ctx = self.ctx
        self.ns = [ctx.namespace("-%d" % i) for i in range(3)]
        group = crd_group()
        crd = "%s.%s" % (CRD_PLURAL, group)
        ctx.crds.append(crd)
        conftest.kubectl("apply", "-f", "-", input=json.dumps(crd_manifest(group)))
        conftest.wait_crd_established(crd)
        conftest.wait_until(lambda: self.api.request("GET", "/apis/%s/v1/%s" % (group, CRD_PLURAL))[0] == 200,
                            60, "the CRD's endpoint")
        cm = Kind("configmaps", "ConfigMap", "v1", "/api/v1")
        pod = Kind("pods", "Pod", "v1", "/api/v1")
        wid = Kind(CRD_PLURAL, "Widget", group + "/v1", "/apis/" + group + "/v1")
        self.kinds = [cm, pod, wid]
        self.workload = Workload(self.api, self.rnd, self.run_label, self.kinds, self.ns, self.slots)

        a = ctx.server("-a")  # per-namespace watches, no selector / a tier selector
        b = ctx.server("-b")  # cluster-wide watches selecting this run's objects
        c = self.proxied_server("-c")  # through the fault-injecting proxy
        run_sel = "kwc-run=" + self.run_label
        specs = [
            (c, cm, "configmaps", self.ns[1], "tier in (b,c)"),
            (c, pod, "pods", self.ns[0], None),
            (c, wid, crd, None, run_sel),
            (a, cm, "configmaps", self.ns[0], None),
            (a, pod, "pods", self.ns[1], "tier in (a,b)"),
            (a, wid, crd, self.ns[2], None),
            (b, cm, "configmaps", None, run_sel + ",tier in (a,b)"),
            (b, pod, "pods", None, run_sel),
            (b, wid, crd, None, run_sel + ",tier"),
        ]
        for server, kind, resource, ns, sel in specs:
            kw = {}
            if ns:
                kw["namespace"] = ns
            if sel:
                kw["label_selector"] = sel
            table = conftest.watch(resource, server, **kw)
            channel = sql_one("SELECT channel FROM kwatch.watches WHERE server = %s"
                              " AND resource = %s", (server, resource))
            self.watches.append(WatchSpec(server, kind, resource, table, channel, ns, sel))
        self.tracker = NotificationTracker({w.channel: w.table for w in self.watches})
        self.tracker.start()
        if not self.tracker.ready.wait(30):
            raise RuntimeError("the notification listener did not connect")
        for w in self.watches:
            conftest.wait_watching(w.server, w.resource, timeout=60)
        self.memory.sample()

    def proxied_server(self, suffix):
        """A foreign server reaching the API server through FaultProxy."""
        cl = conftest.CLUSTER
        self.proxy = FaultProxy.for_cluster(cl.server, cl.dir / "pki").start()
        name = self.ctx.base + suffix
        ident = pgsql.Identifier(name)
        sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch "
                      "OPTIONS (api_server {}, certificate_authority {})")
            .format(ident, pgsql.Literal(self.proxy.url), pgsql.Literal(cl.ca)))
        sql(pgsql.SQL("CREATE USER MAPPING FOR CURRENT_USER SERVER {} OPTIONS (token {})")
            .format(ident, pgsql.Literal(cl.token)))
        self.ctx.servers.append(name)
        return name

    # -- one round
    def round(self):
        """One burst: the planned changes spread evenly over a random 2-6 s
        (`pace` scales it), with 0-2 faults starting at random moments inside
        it, so that changes happen before, during and after each fault.
        Returns (seconds taken, faults injected)."""
        self.rounds += 1
        plan = self.workload.plan(self.ops_per_round)
        nfaults = self.rnd.choice([0, 1, 1, 2]) if self.menu else 0
        chosen = [self.rnd.choice(self.menu) for _ in range(nfaults)]
        fault_rnd = random.Random(self.rnd.random())
        span = self.rnd.uniform(2, 6) * self.pace
        at = sorted(self.rnd.uniform(0, span * 0.8) for _ in chosen)
        fault_errors = []
        t0 = time.monotonic()

        def fault_thread():
            for when, name in zip(at, chosen):
                time.sleep(max(0.0, t0 + when - time.monotonic()))
                self.log("%s fault: %s" % (self.tag(), name))
                try:
                    self.faults.inject(name, fault_rnd)
                except Exception:
                    fault_errors.append("%s: %s" % (name, traceback.format_exc()))

        ft = threading.Thread(target=fault_thread, daemon=True)
        ft.start()
        lock = threading.Lock()
        queue = list(enumerate(plan))
        op_errors = []

        def op_thread():
            while True:
                with lock:
                    if not queue:
                        return
                    i, op = queue.pop(0)
                time.sleep(max(0.0, t0 + span * i / len(plan) - time.monotonic()))
                try:
                    self.workload.apply(op)
                except Exception as e:
                    op_errors.append(repr(e))

        threads = [threading.Thread(target=op_thread, daemon=True) for _ in range(self.threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(900)
        ft.join(900)
        elapsed = time.monotonic() - t0
        if fault_errors:
            raise AssertionError("%s fault injection failed: %s" % (self.tag(), fault_errors))
        if op_errors:
            raise AssertionError("%s cluster changes failed: %s" % (self.tag(), op_errors[:5]))
        return elapsed, chosen

    # -- comparison
    def server_objects(self, w):
        items, _ = self.api.list(w.kind.collection(w.namespace), w.selector)
        return {i["metadata"]["uid"]: i for i in items}

    def diff(self, w):
        """Differences between one watch's rows and the server's LIST (object by object)."""
        server = self.server_objects(w)
        return row_problems(mirror_rows(w.table, w.server), server, w.kind.api_version,
                            w.kind.kind, columns=False), server

    def notification_diff(self, w, server):
        """The client's view (last notification, or the table read after a
        reconnect) against the server's objects."""
        view = self.tracker.view(w.channel, w.server)
        problems = []
        for u, o in server.items():
            got = view.get(u)
            want = o["metadata"]["resourceVersion"]
            if got is None or got[0] == "DELETED" or got[1] != want:
                problems.append("%s/%s uid %s: last notification %r, server rv %s"
                                % (o["metadata"].get("namespace"), o["metadata"]["name"], u, got, want))
        for u, got in view.items():
            if u not in server and got[0] != "DELETED":
                problems.append("uid %s gone from the server, last notification %r" % (u, got))
        return problems

    def check(self, timeout=180):
        """Waits until every watch is watching and every table equals the
        server (then the notifications too); returns the problems left after
        `timeout` (empty when converged) and the time it took."""
        t0 = time.monotonic()
        deadline = t0 + timeout
        problems = []
        while True:
            problems = []
            try:
                for w in self.watches:
                    st = conftest.watch_status(w.server, w.resource)
                    if not st or st["state"] != "watching":
                        problems.append("%r: state %s (%s)" % (w, st and st["state"],
                                                               st and st["last_error"]))
                        continue
                    rows_problems, server = self.diff(w)
                    problems += ["%r: %s" % (w, p) for p in rows_problems]
                    if not rows_problems:
                        problems += ["%r: %s" % (w, p) for p in self.notification_diff(w, server)]
            except psycopg2.Error as e:
                conftest.PG.close()
                problems.append("database: %s" % e)
            if self.tracker.error:
                problems.append("listener: " + self.tracker.error)
                break
            if not problems or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        self.memory.sample()
        return problems, time.monotonic() - t0

    def counts(self):
        total = 0
        for w in self.watches:
            total += sql_one("SELECT count(*) FROM %s WHERE cluster = %%s" % w.table, (w.server,))
        return total

    def stats(self):
        rows = sql("SELECT sum(added + modified + deleted), sum(relists), sum(http_errors),"
                   " sum(database_errors), sum(notifications) FROM kwatch.watches"
                   " WHERE server = ANY(%s)", (list({w.server for w in self.watches}),))[0]
        return dict(applied=rows[0], relists=rows[1], http_errors=rows[2],
                    database_errors=rows[3], notifications=rows[4])

    def close(self):
        # (a start that failed before the listener began has none to finish)
        if getattr(self, "tracker", None) is not None:
            self.tracker.finish()
        if self.proxy is not None:
            self.proxy.stop()
        # user columns a fault added stay harmless, but leave the tables as found
        for table in sorted({w.table for w in self.watches}):
            for i in range(4):
                try:
                    sql("ALTER TABLE %s DROP COLUMN IF EXISTS user_col_%d" % (table, i))
                except psycopg2.Error:
                    pass


def seed_from_env():
    s = os.environ.get("KWATCH_SEED")
    return int(s) if s else random.SystemRandom().randrange(10 ** 9)
