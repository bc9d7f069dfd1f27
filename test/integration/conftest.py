"""Integration tests for kwatch against a real Kubernetes control plane.

Session fixtures start (see test/k8s/cluster.sh and test/pg.sh):
  * a cluster (etcd + kube-apiserver + kube-controller-manager 1.20) in
    $KWATCH_TEST_DIR/k8s (default <repo>/.test/k8s), reused if running;
  * a fresh PostgreSQL in $KWATCH_TEST_DIR/pg on a free port, database
    kwatch_it, with CREATE EXTENSION kwatch.
Both are stopped at the end of the session unless KWATCH_KEEP=1.

Every test gets a `ctx` (TestContext) that hands out foreign servers and
namespaces named after the test (plus a per-run id) and removes them
afterwards, so tests share the cluster and the mirror tables but not rows:
rows of different servers differ by their `cluster` column.

Helpers importable from the tests (`from conftest import ...`): kubectl,
kubectl_json, sql, sql_one, wait_until, Listener, normalise,
assert_table_matches_server, mirror_diff, watch_status, PG, CLUSTER.
"""
import copy
import hashlib
import hmac
import json
import os
import re
import secrets
import select
import shutil
import socket
import subprocess
import time
import warnings
from pathlib import Path

import psycopg2
import psycopg2.extensions
import psycopg2.extras
from psycopg2 import sql as pgsql
import pytest

REPO = Path(__file__).resolve().parents[2]
TEST_DIR = Path(os.environ.get("KWATCH_TEST_DIR") or REPO / ".test").resolve()
K8S_DIR = TEST_DIR / "k8s"
PG_DIR = TEST_DIR / "pg"
DB = "kwatch_it"
KEEP = os.environ.get("KWATCH_KEEP") == "1"
# The session runs snapshots of the helper scripts (taken at its start):
# bash reads a script while running it, and these files may be edited
# while a long session runs.
SCRIPTS = TEST_DIR / "scripts"
CLUSTER_SH = SCRIPTS / "k8s" / "cluster.sh"
PG_SH = SCRIPTS / "pg.sh"
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
# a short random id, so that names from an earlier run on a kept cluster
# (KWATCH_KEEP=1) never collide with this run's
RUN_ID = secrets.token_hex(2)

CLUSTER = None  # Cluster, set by the session fixture
PG = None  # Postgres, set by the session fixture


# ---------------------------------------------------------------- processes

def run(cmd, *, input=None, env=None, timeout=180, check=True):
    """Runs cmd; on failure raises with its output (nothing is printed otherwise)."""
    p = subprocess.run([str(c) for c in cmd], input=input, env=env, timeout=timeout,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and p.returncode != 0:
        raise RuntimeError("command failed (exit %d): %s\n--- stdout:\n%s\n--- stderr:\n%s"
                           % (p.returncode, " ".join(map(str, cmd)), p.stdout[-4000:],
                              p.stderr[-4000:]))
    return p


class Cluster:
    def __init__(self, directory):
        self.dir = Path(directory)
        self.env = {}

    def _sh(self, command, timeout=180):
        return run(["bash", CLUSTER_SH, command, self.dir], timeout=timeout)

    def start(self):
        self._sh("start")
        for line in (self.dir / "env").read_text().splitlines():
            m = re.match(r"export (\w+)=(.*)$", line)
            if m:
                self.env[m.group(1)] = m.group(2)
        # the PostgreSQL server runs as `postgres` and must read the
        # kubeconfig and the CA (test-only cluster)
        run(["chmod", "-R", "a+rX", self.dir])

    @property
    def kubeconfig(self):
        return self.env["KUBECONFIG"]

    @property
    def server(self):
        return self.env["KWATCH_K8S_SERVER"]

    @property
    def token(self):
        return self.env["KWATCH_K8S_TOKEN"]

    @property
    def ca(self):
        return self.env["KWATCH_K8S_CA"]

    def compact(self):
        return self._sh("compact").stdout.strip()

    def restart_apiserver(self):
        self._sh("restart-apiserver")

    def stop(self):
        self._sh("stop")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Postgres:
    """The throwaway PostgreSQL of test/pg.sh, plus one shared autocommit connection."""

    def __init__(self, directory, port):
        self.dir = Path(directory)
        self.port = port
        self._conn = None

    @property
    def log_path(self):
        return self.dir / "postgres.log"

    def start(self):
        run(["bash", PG_SH, "start", self.dir, self.port, DB])

    def stop(self):
        self.close()
        run(["bash", PG_SH, "stop", self.dir])

    def restart(self):
        self.close()
        run(["bash", PG_SH, "restart", self.dir])

    def running(self):
        try:
            psycopg2.connect(**self.dsn(connect_timeout=2)).close()
            return True
        except psycopg2.OperationalError:
            return False

    def dsn(self, **kw):
        d = dict(host=str(self.dir), port=self.port, dbname=DB, user="postgres")
        d.update(kw)
        return d

    def connect(self, autocommit=True):
        conn = psycopg2.connect(**self.dsn())
        conn.autocommit = autocommit
        return conn

    @property
    def conn(self):
        if self._conn is None or self._conn.closed:
            self._conn = self.connect()
        return self._conn

    def close(self):
        if self._conn is not None and not self._conn.closed:
            self._conn.close()
        self._conn = None

    def log_size(self):
        try:
            return self.log_path.stat().st_size
        except FileNotFoundError:
            return 0

    def log_since(self, offset=0):
        """The PostgreSQL log from byte `offset` (see log_size)."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""


# ---------------------------------------------------------------- helpers

def kubectl(*args, input=None, check=True):
    """Runs kubectl against the test cluster; returns stdout."""
    env = dict(os.environ, KUBECONFIG=CLUSTER.kubeconfig)
    return run([KUBECTL, *args], input=input, env=env, timeout=120, check=check).stdout


def kubectl_json(*args):
    return json.loads(kubectl(*args, "-o", "json"))


def configmaps_doc(ns, names, **data):
    """A kubectl-appliable List of ConfigMaps `names` in namespace `ns` with
    `data` (default {"v": "1"}), as JSON text."""
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n, "namespace": ns},
         "data": data or {"v": "1"}} for n in names]})


def sql(query, params=None, conn=None):
    """Runs a statement (autocommit on the shared connection unless conn); returns all rows."""
    c = conn if conn is not None else PG.conn
    with c.cursor() as cur:
        cur.execute(query, params)
        return cur.fetchall() if cur.description is not None else []


def sql_one(query, params=None, conn=None):
    """The first column of the first row (None when there is no row)."""
    rows = sql(query, params, conn)
    return rows[0][0] if rows else None


def wait_until(fn, timeout=20, msg="condition", interval=0.1):
    """Polls fn() every interval seconds until it returns a truthy value (returned);
    fails the test after `timeout` seconds showing fn's last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail("timed out after %ss waiting for %s; last value: %r"
                        % (timeout, msg, value), pytrace=False)
        time.sleep(interval)


def watch_status(server, resource):
    """The kwatch.watches row of (server, canonical resource) as a dict, or None."""
    with PG.conn.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
        cur.execute("SELECT * FROM kwatch.watches WHERE server = %s AND resource = %s",
                    (server, resource))
        row = cur.fetchone()
        return dict(row) if row else None


def wait_watching(server, resource, timeout=30):
    """Waits until the watch streams (state watching, healthy); returns its status."""
    def ok():
        st = watch_status(server, resource)
        return st if st and st["state"] == "watching" and st["healthy"] else False
    try:
        return wait_until(ok, timeout, "watch %s on %s to be watching" % (resource, server))
    except BaseException:
        print("status:", watch_status(server, resource))
        raise


class Listener:
    """LISTENs on a channel in its own connection and collects payloads.

    When `table` is given, each notification is followed at once, on the
    listener's connection, by a SELECT of the row it names; `seen` holds
    (payload, resource_version of the row or None) in arrival order, which
    tells whether the row was visible when the notification arrived.
    """

    def __init__(self, channel, table=None):
        self.channel = channel
        self.table = table
        self.conn = PG.connect()
        self.seen = []
        with self.conn.cursor() as cur:
            cur.execute(pgsql.SQL("LISTEN {}").format(pgsql.Identifier(channel)))

    def poll(self, timeout=0.0):
        if select.select([self.conn], [], [], timeout)[0] or timeout == 0:
            self.conn.poll()
        while self.conn.notifies:
            n = self.conn.notifies.pop(0)
            payload = json.loads(n.payload)
            row_rv = None
            if self.table:
                with self.conn.cursor() as cur:
                    cur.execute("SELECT resource_version FROM %s WHERE cluster = %%s AND uid = %%s"
                                % self.table, (payload.get("cluster"), payload.get("uid")))
                    r = cur.fetchone()
                    row_rv = r[0] if r else None
            self.seen.append((payload, row_rv))

    def payloads(self, cluster=None, type=None, uid=None, name=None):
        self.poll()
        return [p for p, _ in self.seen
                if (cluster is None or p.get("cluster") == cluster)
                and (type is None or p.get("type") == type)
                and (uid is None or p.get("uid") == uid)
                and (name is None or p.get("name") == name)]

    def wait_for(self, timeout=20, msg="notification", **match):
        """Waits for the first payload matching **match (cluster=, type=, uid=, name=)."""
        def found():
            self.poll(0.1)
            got = self.payloads(**match)
            return got[0] if got else None
        return wait_until(found, timeout, "%s %r on %s (got: %r)"
                          % (msg, match, self.channel, [p for p, _ in self.seen][-10:]),
                          interval=0)

    def visibility_problems(self, cluster):
        """Notifications of `cluster` whose row was not as announced when they arrived:
        ADDED/MODIFIED -> row present with the payload's resource_version (or a
        later notification of the same uid explains a newer one); DELETED -> no row."""
        self.poll()
        problems = []
        seen = [(p, rv) for p, rv in self.seen if p.get("cluster") == cluster]
        for i, (p, rv) in enumerate(seen):
            later = [q for q, _ in seen[i + 1:] if q.get("uid") == p.get("uid")]
            later_rvs = [q["resource_version"] for q in later]
            if p["type"] in ("ADDED", "MODIFIED"):
                if rv is None:
                    if not any(q["type"] == "DELETED" for q in later):
                        problems.append((p, rv))
                elif rv != p["resource_version"] and rv not in later_rvs:
                    problems.append((p, rv))
            elif p["type"] == "DELETED":
                if rv is not None and rv not in later_rvs:
                    problems.append((p, rv))
        return problems

    def close(self):
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def normalise(obj, api_version=None, kind=None):
    """`obj` as kwatch stores it: without metadata.managedFields.  A server
    object without apiVersion/kind (a LIST item: only the list carries them)
    gets the resource's, which every mirrored and live object must carry."""
    o = copy.deepcopy(obj)
    o.get("metadata", {}).pop("managedFields", None)
    if api_version is not None:
        o.setdefault("apiVersion", api_version)
    if kind is not None:
        o.setdefault("kind", kind)
    return o


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def redact_secret(obj):
    """A Secret as kwatch shows it without secret_data (src/redact.c): each
    value of data and stringData, and the last-applied annotation, replaced
    by "<redacted hmac-sha256:HEX>" under the server's key file."""
    key = (PG.dir / "data" / "kwatch_secret.key").read_bytes()

    def digest(v):
        b = v.encode() if isinstance(v, str) else json.dumps(v, separators=(",", ":")).encode()
        return "<redacted hmac-sha256:%s>" % hmac.new(key, b, hashlib.sha256).hexdigest()[:32]
    o = copy.deepcopy(obj)
    for field in ("data", "stringData"):
        if isinstance(o.get(field), dict):
            o[field] = {k: digest(v) for k, v in o[field].items()}
    ann = o.get("metadata", {}).get("annotations")
    if isinstance(ann, dict) and LAST_APPLIED in ann:
        ann[LAST_APPLIED] = digest(ann[LAST_APPLIED])
    return o


def shown(obj, secret_data=False):
    """The server's `obj` as kwatch must show it: Secrets redacted unless
    the watch or live table opted in with secret_data."""
    if obj.get("kind") == "Secret" and not secret_data:
        return redact_secret(obj)
    return obj


def table_secret_data(table, cluster):
    """Whether the watch of `cluster` into mirror `table` opted into secret_data."""
    return bool(sql_one("SELECT bool_or(secret_data) FROM kwatch.registrations"
                        " WHERE server = %s AND format('k8s.%%I', table_name) = %s",
                        (cluster, table)))


def mirror_rows(table, cluster):
    """{uid: row dict} of the mirror table's rows for one cluster."""
    with PG.conn.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
        cur.execute("SELECT uid, resource_version, namespace, name, labels, object FROM %s"
                    " WHERE cluster = %%s" % table, (cluster,))
        return {r["uid"]: dict(r) for r in cur.fetchall()}


def mirror_diff(table, cluster, kubectl_get_args):
    """None when the rows of `cluster` in `table` equal, object by object, what
    `kubectl get <kubectl_get_args> -o json` returns; else a description."""
    items = kubectl_json("get", *kubectl_get_args)["items"]
    secret_data = table_secret_data(table, cluster)
    server = {i["metadata"]["uid"]: shown(i, secret_data) for i in items}
    rows = mirror_rows(table, cluster)
    problems = []
    missing = sorted(set(server) - set(rows))
    extra = sorted(set(rows) - set(server))
    for u in missing:
        m = server[u]["metadata"]
        problems.append("missing row: %s/%s uid %s rv %s"
                        % (m.get("namespace"), m["name"], u, m["resourceVersion"]))
    for u in extra:
        r = rows[u]
        problems.append("extra row: %s/%s uid %s rv %s"
                        % (r["namespace"], r["name"], u, r["resource_version"]))
    for u in sorted(set(server) & set(rows)):
        s, r = server[u], rows[u]
        m = s["metadata"]
        what = "%s/%s" % (m.get("namespace"), m["name"])
        if r["resource_version"] != m["resourceVersion"]:
            problems.append("%s: resource_version %s, server %s"
                            % (what, r["resource_version"], m["resourceVersion"]))
            continue  # not converged yet; the rest would differ too
        for col, want in (("namespace", m.get("namespace")), ("name", m["name"]),
                          ("labels", m.get("labels") or {})):
            if r[col] != want:
                problems.append("%s: column %s = %r, server %r" % (what, col, r[col], want))
        so, ro = normalise(s), normalise(r["object"])
        if so != ro:
            keys = sorted(k for k in set(so) | set(ro) if so.get(k) != ro.get(k))
            problems.append("%s: object differs in %s: row %s vs server %s"
                            % (what, keys, json.dumps({k: ro.get(k) for k in keys})[:800],
                               json.dumps({k: so.get(k) for k in keys})[:800]))
    return "; ".join(problems) if problems else None


def assert_table_matches_server(table, cluster, kubectl_get_args, timeout=30):
    """Waits (up to timeout s) until the mirror rows of `cluster` equal the
    server's objects (mirror_diff), failing with the last difference."""
    last = [None]

    def same():
        last[0] = mirror_diff(table, cluster, kubectl_get_args)
        return last[0] is None
    deadline = time.monotonic() + timeout
    while not same():
        if time.monotonic() >= deadline:
            pytest.fail("%s (cluster %s) does not match `kubectl get %s` after %ss: %s"
                        % (table, cluster, " ".join(kubectl_get_args), timeout, last[0]),
                        pytrace=False)
        time.sleep(0.2)


def pod_manifest(name, labels=None, namespace=None):
    meta = {"name": name, "labels": labels or {}}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [{"name": "c", "image": "registry.invalid/pause:1"}]}}


def create_pods(namespace, pods):
    """Creates bare pods: pods is {name: labels}.  Returns {name: uid}."""
    doc = {"apiVersion": "v1", "kind": "List",
           "items": [pod_manifest(n, l, namespace) for n, l in pods.items()]}
    out = kubectl("create", "-o", "json", "-f", "-", input=json.dumps(doc))
    return {i["metadata"]["name"]: i["metadata"]["uid"] for i in json_documents(out)}


def json_documents(text):
    """The objects of kubectl's -o json output: one document, a List, or several in a row."""
    dec, pos, docs = json.JSONDecoder(), 0, []
    text = text.strip()
    while pos < len(text):
        obj, end = dec.raw_decode(text, pos)
        docs.extend(obj["items"] if obj.get("kind") == "List" else [obj])
        pos = end
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return docs


def server_uids(*kubectl_get_args):
    return {i["metadata"]["uid"] for i in kubectl_json("get", *kubectl_get_args)["items"]}


def row_uids(table, cluster):
    return {r[0] for r in sql("SELECT uid FROM %s WHERE cluster = %%s" % table, (cluster,))}


# ---------------------------------------------------------------- fixtures

@pytest.fixture(scope="session", autouse=True)
def environment():
    """The cluster and PostgreSQL for the whole session."""
    global CLUSTER, PG
    TEST_DIR.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(SCRIPTS, ignore_errors=True)
    shutil.copytree(REPO / "test" / "k8s", SCRIPTS / "k8s")
    shutil.copy2(REPO / "test" / "pg.sh", PG_SH)
    CLUSTER = Cluster(K8S_DIR)
    CLUSTER.start()

    # a fresh PostgreSQL each session: no registrations left from earlier runs
    if (PG_DIR / "data" / "postmaster.pid").exists():
        run(["bash", PG_SH, "stop", PG_DIR], check=False)
    shutil.rmtree(PG_DIR, ignore_errors=True)
    PG = Postgres(PG_DIR, free_port())
    # auto_explain logs nothing until a test sets auto_explain.log_min_duration
    # (test_relist_plans.py reads the plans the worker runs)
    os.environ.setdefault("KWATCH_PG_PRELOAD", "auto_explain")
    try:
        PG.start()
        sql("CREATE EXTENSION kwatch")
        # pg.sh creates the database after the postmaster started, so the
        # worker's first attempt may have failed: it is restarted after 5 s
        wait_until(lambda: sql_one("SELECT kwatch.worker_pid()"), 30, "the kwatch worker")
    except BaseException:
        print(PG.log_since()[-4000:])
        raise
    yield
    PG.close()
    if not KEEP:
        run(["bash", PG_SH, "stop", PG_DIR], check=False)
        run(["bash", CLUSTER_SH, "stop", K8S_DIR], check=False)


def _slug(test_name):
    s = re.sub(r"^test_", "", test_name)
    s = re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")
    return s[:40].strip("-")


class TestContext:
    """Names and cleanup for one test: servers, namespaces, CRDs."""

    __test__ = False

    def __init__(self, test_name):
        self.base = "%s-%s" % (_slug(test_name), RUN_ID)
        self.servers = []
        self.namespaces = []
        self.crds = []
        self.listeners = []

    def server(self, suffix="", auth="kubeconfig", kubeconfig=None):
        """Creates a foreign server named after the test; returns its name (= cluster column)."""
        name = self.base + suffix
        ident = pgsql.Identifier(name)
        if auth == "kubeconfig":
            sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch OPTIONS (kubeconfig {})")
                .format(ident, pgsql.Literal(kubeconfig or CLUSTER.kubeconfig)))
        elif auth == "token":
            sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch "
                          "OPTIONS (api_server {}, certificate_authority {})")
                .format(ident, pgsql.Literal(CLUSTER.server), pgsql.Literal(CLUSTER.ca)))
            sql(pgsql.SQL("CREATE USER MAPPING FOR CURRENT_USER SERVER {} OPTIONS (token {})")
                .format(ident, pgsql.Literal(CLUSTER.token)))
        else:
            raise ValueError(auth)
        self.servers.append(name)
        return name

    def namespace(self, suffix=""):
        name = (self.base + suffix)[:63]
        kubectl("create", "namespace", name)
        self.namespaces.append(name)
        return name

    def listener(self, channel, table=None):
        lst = Listener(channel, table)
        self.listeners.append(lst)
        return lst

    def cleanup(self):
        for lst in self.listeners:
            try:
                lst.close()
            except Exception:
                pass
        try:
            if not PG.running():
                PG.start()
            for s in self.servers:
                # one statement per watch, group-qualified names first: a bare
                # plural ("events") may also match another group's watch
                for (res,) in sql("SELECT resource FROM kwatch.registrations WHERE server = %s"
                                  " ORDER BY api_group = '', id", (s,)):
                    sql("SELECT kwatch.unwatch(%s, server => %s)", (res, s))
                sql(pgsql.SQL("DROP SERVER IF EXISTS {} CASCADE").format(pgsql.Identifier(s)))
        except Exception as e:  # never hide the test's own outcome
            warnings.warn("cleanup of servers %s failed: %s" % (self.servers, e))
        for ns in self.namespaces:
            kubectl("delete", "namespace", ns, "--wait=false", "--ignore-not-found", check=False)
        for crd in self.crds:
            kubectl("delete", "crd", crd, "--wait=false", "--ignore-not-found", check=False)


@pytest.fixture
def ctx(request):
    c = TestContext(request.node.name)
    yield c
    c.cleanup()


@pytest.fixture
def settings():
    """set(**gucs): ALTER SYSTEM SET kwatch.<name> and reload; reset at teardown."""
    changed = []

    def set_(**gucs):
        for name, value in gucs.items():
            sql("ALTER SYSTEM SET kwatch.%s = %%s" % name, (str(value),))
            changed.append(name)
        sql("SELECT pg_reload_conf()")
        time.sleep(1)  # let the worker process the SIGHUP before the next step
    yield set_
    if changed:
        if not PG.running():  # a test that failed while PostgreSQL was down
            PG.start()
        for name in changed:
            sql("ALTER SYSTEM RESET kwatch.%s" % name)
        sql("SELECT pg_reload_conf()")


def watch(resource, server, **kw):
    """kwatch.watch(resource, server => ..., **kw); returns the table name (text)."""
    args = [pgsql.SQL("{} => %s").format(pgsql.Identifier(k)) for k in kw]
    q = pgsql.SQL("SELECT kwatch.watch(%s, server => %s{})::text").format(
        pgsql.SQL("").join(pgsql.SQL(", ") + a for a in args))
    return sql_one(q, [resource, server, *kw.values()])


def watch_error(resource, server, **kw):
    """The psycopg2 error kwatch.watch(resource, server => ..., **kw) raises
    (fails the test when it raises none)."""
    with pytest.raises(psycopg2.Error) as e:
        watch(resource, server, **kw)
    return e.value
