"""Every SQL example of README.md and doc/*.md runs as written in the demo
(issues 31 and 49).

The module sets up, in the test database and on the test plane, what
`make demo` does (test/demo/workload.sh: namespaces shop, billing,
monitoring and their Deployments; test/demo/setup.sql: the server `demo`,
its watches of pods, replicasets, deployments and namespaces, the live
tables k8s_live.*), and runs each ```sql block of the pages with psql as a
reader of the docs would paste it into the demo's psql: names unchanged.
A block may carry a marker, an HTML comment on the line before its fence
(invisible on GitHub):

  <!-- example: given: SQL -->       run, committed, before the block (a watch
                                     the block needs, waited for; the same
                                     call as one of the demo's returns its table)
  <!-- example: with: SQL -->        run in the block's transaction first (a
                                     business table, a role; rolled back)
  <!-- example: autocommit -->       the block runs committed, statement by
                                     statement (wait_synced() must see the
                                     watch() before it committed)
  <!-- example: covered: FILE::TEST -->  another test runs this block
  <!-- example: skip: REASON -->     cannot run here, and why

Without autocommit a block runs in a transaction that is rolled back, so
DDL of the examples (RLS, partitioning, IMPORT FOREIGN SCHEMA) leaves
nothing behind.  After each block the watches and servers it added are
removed, so that the next one finds the demo as it was.  psql stops at the
first error (ON_ERROR_STOP), so a block passes only when every statement of
it runs.
"""
import os
import re
import subprocess
from pathlib import Path

import pytest
from psycopg2 import sql as pgsql

import cluster
import conftest
from common import REPO
from conftest import sql

FENCE = re.compile(r"(?P<markers>(?:[ \t]*<!-- example: .*? -->\n)*)[ \t]*```sql\n(?P<body>.*?)```", re.S)
MARKER = re.compile(r"<!-- example: (?P<kind>given|with|autocommit|covered|skip)(?::\s*(?P<arg>.*?))? -->", re.S)
PAGES = ["README.md"] + sorted("doc/" + p.name for p in (REPO / "doc").glob("*.md"))


def examples():
    """(page, line, body, {kind: [arg, ...]}) of every ```sql block."""
    out = []
    for page in PAGES:
        text = (REPO / page).read_text()
        for m in FENCE.finditer(text):
            line = text.count("\n", 0, m.start("body"))
            marks = {}
            for mk in MARKER.finditer(m.group("markers")):
                marks.setdefault(mk.group("kind"), []).append((mk.group("arg") or "").strip())
            body = "\n".join(l[2:] if l.startswith("  ") else l for l in m.group("body").splitlines())
            out.append((page, line, body, marks))
    return out


EXAMPLES = examples()


def test_every_example_is_run_or_says_why_not():
    """A skipped block names its reason; a covered one a test that exists."""
    assert len(EXAMPLES) >= 20, [(p, l) for p, l, _, _ in EXAMPLES]
    for page, line, _, marks in EXAMPLES:
        for reason in marks.get("skip", []):
            assert len(reason) > 20, "%s:%d: a skip needs its reason" % (page, line)
        for target in marks.get("covered", []):
            path, _, name = target.partition("::")
            src = (Path(__file__).parent / path).read_text()
            assert re.search(r"^def %s\(" % re.escape(name), src, re.M), \
                "%s:%d: covered by %s, which does not exist" % (page, line, target)


def psql(script, *args):
    pg = conftest.PG
    env = dict(os.environ, PGHOST=str(pg.dir), PGPORT=str(pg.port), PGDATABASE=pg.db,
               PGUSER="postgres", PGOPTIONS="-c statement_timeout=180s")
    return subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", *args], input=script,
                          env=env, capture_output=True, text=True, timeout=400)


DEMO_NAMESPACES = ("shop", "billing", "monitoring")


def _state():
    """(registrations as (server, table), kwatch servers, tables of schema k8s)."""
    regs = set(sql("SELECT server, table_name FROM kwatch.registrations"))
    servers = {s for (s,) in sql("SELECT s.srvname FROM pg_foreign_server s"
                                 " JOIN pg_foreign_data_wrapper w ON w.oid = s.srvfdw"
                                 " WHERE w.fdwname = 'kwatch'")}
    tables = {t for (t,) in sql("SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                                " WHERE n.nspname = 'k8s'"
                                " AND c.relkind IN ('r', 'p')")}
    return regs, servers, tables


def _back_to(state):
    """Removes the watches, servers and k8s tables added since `state`."""
    regs, servers, tables = state
    now_regs, now_servers, now_tables = _state()
    for server, table in sorted(now_regs - regs):
        sql("SELECT kwatch.unwatch(%s, server => %s)", (table, server))
    for s in now_servers - servers:
        sql(pgsql.SQL("DROP SERVER IF EXISTS {} CASCADE").format(pgsql.Identifier(s)))
    for t in now_tables - tables:
        sql(pgsql.SQL("DROP TABLE IF EXISTS k8s.{} CASCADE").format(pgsql.Identifier(t)))
    if regs - now_regs and "demo" in servers:    # a block unwatched one of the demo's
        _setup_demo()


def _setup_demo():
    kubeconfig = cluster.CLUSTER.kubeconfig
    r = psql("", "-v", "kubeconfig=%s" % kubeconfig, "-f", str(REPO / "test/demo/setup.sql"))
    assert r.returncode == 0, r.stderr
    sql("SELECT kwatch.wait_synced(server => 'demo', timeout => '2 min')")


@pytest.fixture(scope="module")
def demo():
    """The demo's setup (test/demo), made as demo.sh makes it; undone at the
    module's end.  Yields the state each example returns to."""
    before = _state()
    kubeconfig = cluster.CLUSTER.kubeconfig
    conftest.run(["bash", str(REPO / "test/demo/workload.sh")],
                 env=dict(os.environ, KUBECONFIG=str(kubeconfig)))
    _setup_demo()
    try:
        yield _state()
    finally:
        sql("DROP SCHEMA IF EXISTS k8s_live CASCADE")
        _back_to(before)
        cluster.CLUSTER.kubectl("delete", "namespace", *DEMO_NAMESPACES, "--wait=false",
                                "--ignore-not-found", check=False)


@pytest.mark.parametrize("page,line,body,marks",
                         [pytest.param(*e, id="%s:%d" % e[:2]) for e in EXAMPLES])
def test_example_runs(demo, page, line, body, marks):
    if "skip" in marks:
        pytest.skip(marks["skip"][0])
    if "covered" in marks:
        pytest.skip("run by " + marks["covered"][0])
    try:
        for given in marks.get("given", []):
            r = psql(given)
            assert r.returncode == 0, "given of %s:%d failed:\n%s" % (page, line, r.stderr)
        if "autocommit" in marks:
            script = "\n".join(marks.get("with", [])) + "\n" + body
        else:
            script = "BEGIN;\n" + "\n".join(marks.get("with", [])) + "\n" + body + "\nROLLBACK;\n"
        r = psql(script)
        assert r.returncode == 0, "%s:%d failed:\n%s\n--- the block as run:\n%s" % (
            page, line, r.stderr, script)
    finally:
        _back_to(demo)
