"""Integration tests for kwatch against a real Kubernetes control plane.

Session fixtures start (see test/k8s/cluster.sh and test/drivers/pg.sh):
  * a cluster (etcd + kube-apiserver + kube-controller-manager 1.20) in
    $KWATCH_TEST_DIR/k8s (default <repo>/.test/k8s), reused if running;
  * a fresh PostgreSQL in $KWATCH_TEST_DIR/pg on a free port, database
    kwatch_it, with CREATE EXTENSION kwatch.
  * the modern control plane (etcd 3.5 + the Kubernetes 1.36 generic API
    server, custom resources only; test/k8s/modern-cluster.sh) in
    $KWATCH_TEST_DIR/k8s-modern, started beside the 1.20 one (cluster.MODERN);
    if it cannot start, only the tests that use it fail, with the reason.
All are stopped at the end of the session unless KWATCH_KEEP=1.

Tests that hold for any control plane take the `plane` fixture: they run
once per plane ("1.20", "1.36"), and for the 1.36 run CLUSTER (and so
kubectl, kubectl_json, ctx.server, assert_table_matches_server) is the
modern plane; `modern` gives the modern plane alone.

Every test gets a `ctx` (TestContext) that hands out foreign servers and
namespaces named after the test (plus a per-run id) and removes them
afterwards, so tests share the cluster and the mirror tables but not rows:
rows of different servers differ by their `cluster` column.

This file holds the fixtures; the helpers live in one module per concern
(README.md in this folder) and are re-exported here, so that
`from conftest import kubectl, sql, wait_until, Listener,
assert_table_matches_server, PG, CLUSTER, ...` keeps working:
  common.py    paths, RUN_ID, run, wait_until, free_port
  cluster.py   Cluster (CLUSTER), kubectl, kubectl_json, manifests
  postgres.py  Postgres (PG), sql, sql_one, Listener
  watches.py   watch, watch_error, watch_status, wait_watching, wait_status,
               watched_namespace
  compare.py   normalise, shown, mirror_diff, assert_table_matches_server
"""
import os
import re
import shutil
import threading
import time
import warnings

from psycopg2 import sql as pgsql
import pytest

import cluster
import postgres
from common import (REPO, TEST_DIR, KEEP, SCRIPTS, RUN_ID, run,  # noqa: F401  (re-exported)
                    wait_until, free_port)
from cluster import (K8S_DIR, CLUSTER_SH, MODERN_DIR, MODERN_SH, ModernCluster,  # noqa: F401
                     KUBECTL, Cluster, kubectl,
                     kubectl_json, wait_crd_established, configmap_manifest, configmaps_doc, crd_manifest, pod_manifest, create_pods, json_documents,
                     server_uids)
from postgres import PG_DIR, PG_SH, DB, Postgres, sql, sql_one, Listener  # noqa: F401
from watches import (watch, watch_error, watch_status, wait_watching, wait_status,  # noqa: F401
                     watched_namespace)
from compare import (normalise, LAST_APPLIED, redact_secret, shown,  # noqa: F401
                     table_secret_data, mirror_rows, row_problems, rows_diff, mirror_diff,
                     assert_table_matches_server, row_uids)


def __getattr__(name):
    """conftest.PG and conftest.CLUSTER: the session's, once started."""
    if name == "PG":
        return postgres.PG
    if name == "CLUSTER":
        return cluster.CLUSTER
    if name == "MODERN":
        return cluster.MODERN
    raise AttributeError(name)


def _start_modern():
    """Starts the modern plane (in a thread, beside the 1.20 one); a failure
    is kept in cluster.MODERN_ERROR for the tests that need the plane."""
    cache = os.environ.get("KWATCH_K8S_MODERN_CACHE", "/var/cache/kwatch-k8s-modern")
    if not all(os.access(os.path.join(cache, "bin", b), os.X_OK) for b in ("crd-apiserver", "etcd")):
        # not built here (e.g. test/versions' chroots): no 3-minute build in the session
        cluster.MODERN_ERROR = ("no binaries in %s/bin: run test/k8s/modern-build.sh"
                                " (make test does)" % cache)
        return
    try:
        m = ModernCluster(MODERN_DIR)
        m.start()
        cluster.MODERN = m
    except Exception as e:  # reported by the `modern`/`plane` fixtures
        cluster.MODERN_ERROR = e


@pytest.fixture(scope="session", autouse=True)
def environment():
    """The cluster and PostgreSQL for the whole session."""
    TEST_DIR.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(SCRIPTS, ignore_errors=True)
    shutil.copytree(REPO / "test" / "k8s", SCRIPTS / "k8s")
    shutil.copy2(REPO / "test" / "drivers" / "pg.sh", PG_SH)
    modern = threading.Thread(target=_start_modern, name="modern-plane", daemon=True)
    modern.start()
    cluster.LEGACY = cluster.CLUSTER = Cluster(K8S_DIR)
    cluster.CLUSTER.start()
    modern.join()

    # a fresh PostgreSQL each session: no registrations left from earlier runs
    if (PG_DIR / "data" / "postmaster.pid").exists():
        run(["bash", PG_SH, "stop", PG_DIR], check=False)
    shutil.rmtree(PG_DIR, ignore_errors=True)
    PG = postgres.PG = Postgres(PG_DIR, free_port())
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
        if (MODERN_DIR / "ports").exists():
            run(["bash", MODERN_SH, "stop", MODERN_DIR], check=False)


def modern_plane():
    """The session's modern plane (cluster.MODERN); fails the test with the
    reason when it could not be started."""
    if cluster.MODERN is None:
        pytest.fail("the modern control plane (test/k8s/modern-cluster.sh) did not start: %s"
                    % (cluster.MODERN_ERROR or "not started"), pytrace=False)
    return cluster.MODERN


def _use_plane(c):
    """Points CLUSTER (and so the module-level helpers) at plane `c`; returns
    a function restoring the previous one."""
    saved = cluster.CLUSTER
    cluster.CLUSTER = c
    return lambda: setattr(cluster, "CLUSTER", saved)


@pytest.fixture(params=["1.20", "1.36"])
def plane(request):
    """The control plane of this run of a test parametrized over both: the
    session's 1.20 Cluster or the modern (1.36) one, which CLUSTER is for
    the test's duration.  A test taking both `plane` and `ctx` gets its ctx
    on this plane."""
    c = cluster.LEGACY if request.param == "1.20" else modern_plane()
    restore = _use_plane(c)
    yield c
    restore()


@pytest.fixture
def modern():
    """The modern (1.36) plane, which CLUSTER is for the test's duration."""
    restore = _use_plane(modern_plane())
    yield cluster.MODERN
    restore()


def _slug(test_name):
    """The test's name as a DNS label of at most 40 characters; a
    parametrized test's parameters ("[1.36]") are kept whole at the end, so
    that its runs (e.g. on the two planes) never share server names and so
    kwatch.events rows."""
    base, _, param = test_name.partition("[")
    s = re.sub(r"[^a-z0-9]+", "-", re.sub(r"^test_", "", base).lower()).strip("-")
    p = re.sub(r"[^a-z0-9]+", "-", param.rstrip("]").lower()).strip("-")[:20]
    if p:
        s = s[:40 - len(p) - 1].strip("-") + "-" + p
    return s[:40].strip("-")


class TestContext:
    """Names and cleanup for one test: servers, namespaces, CRDs."""

    __test__ = False

    def __init__(self, test_name):
        # the plane this test's namespaces and CRDs live on (`plane`/`modern` set it first)
        self.plane = cluster.CLUSTER
        self.base = "%s-%s" % (_slug(test_name), RUN_ID)
        self.servers = []
        self.namespaces = []
        self.crds = []
        self.listeners = []
        self.tables = []  # in schema k8s, dropped after the watches

    def server(self, suffix="", auth="kubeconfig", kubeconfig=None):
        """Creates a foreign server named after the test; returns its name (= cluster column)."""
        name = self.base + suffix
        ident = pgsql.Identifier(name)
        if auth == "kubeconfig":
            sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch OPTIONS (kubeconfig {})")
                .format(ident, pgsql.Literal(kubeconfig or cluster.CLUSTER.kubeconfig)))
        elif auth == "token":
            sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch "
                          "OPTIONS (api_server {}, certificate_authority {})")
                .format(ident, pgsql.Literal(cluster.CLUSTER.server), pgsql.Literal(cluster.CLUSTER.ca)))
            sql(pgsql.SQL("CREATE USER MAPPING FOR CURRENT_USER SERVER {} OPTIONS (token {})")
                .format(ident, pgsql.Literal(cluster.CLUSTER.token)))
        else:
            raise ValueError(auth)
        self.servers.append(name)
        return name

    def namespace(self, suffix=""):
        """A namespace of the test's; on the modern plane (no Namespace
        objects) only a name, whose custom resources cleanup deletes."""
        name = (self.base + suffix)[:63]
        if not self.plane.modern:
            self.plane.kubectl("create", "namespace", name)
            # the controller-manager publishes kube-root-ca.crt into every
            # namespace, at once on a quiet machine and seconds later on a
            # busy one (a random-order run found tests that count it): wait
            deadline = time.monotonic() + 30
            while not self.plane.kubectl("get", "configmap", "kube-root-ca.crt", "-n", name,
                                         "--ignore-not-found", "-o", "name", check=False).strip():
                if time.monotonic() > deadline:
                    break
                time.sleep(0.1)
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
            if not postgres.PG.running():
                postgres.PG.start()
            for s in self.servers:
                # one statement per watch, named by its table with its schema:
                # several watches may share a resource (one per table), and a
                # bare name ("events", "configmaps") may also match another
                # group's watch, or another table's resource
                for (tbl,) in sql("SELECT format('k8s.%%I', table_name) FROM kwatch.registrations"
                                  " WHERE server = %s ORDER BY id", (s,)):
                    sql("SELECT kwatch.unwatch(%s, server => %s)", (tbl, s))
                sql(pgsql.SQL("DROP SERVER IF EXISTS {} CASCADE").format(pgsql.Identifier(s)))
            for t in self.tables:
                # CASCADE: its view kubectl.<t>
                sql(pgsql.SQL("DROP TABLE IF EXISTS k8s.{} CASCADE").format(pgsql.Identifier(t)))
        except Exception as e:  # never hide the test's own outcome
            warnings.warn("cleanup of servers %s failed: %s" % (self.servers, e))
        if self.plane.modern and self.namespaces:
            crds = self.plane.kubectl("get", "crd", "-o", "name", check=False).split()
            for crd in crds:
                for ns in self.namespaces:
                    self.plane.kubectl("delete", crd.split("/", 1)[1], "--all", "-n", ns,
                                       "--wait=false", "--ignore-not-found", check=False)
        elif self.namespaces:
            self.plane.kubectl("delete", "namespace", *self.namespaces, "--wait=false",
                               "--ignore-not-found", check=False)
        for crd in self.crds:
            self.plane.kubectl("delete", "crd", crd, "--wait=false", "--ignore-not-found",
                               check=False)


@pytest.fixture
def ctx(request):
    # a parametrized plane first: ctx lives on it, and is cleaned up before it is left
    for f in ("plane", "modern"):
        if f in request.fixturenames:
            request.getfixturevalue(f)
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
        if not postgres.PG.running():  # a test that failed while PostgreSQL was down
            postgres.PG.start()
        for name in changed:
            sql("ALTER SYSTEM RESET kwatch.%s" % name)
        sql("SELECT pg_reload_conf()")
