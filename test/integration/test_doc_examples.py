"""Every SQL example of README.md and doc/*.md runs (issue 31).

Each ```sql block of the pages is found here and run with psql against the
test cluster, as a reader would paste it, with the server 'prod' (and
'staging') of the examples replaced by the test's own.  A block may carry a
marker, an HTML comment on the line before its fence (invisible on GitHub):

  <!-- example: given: SQL -->       run, committed, before the block (a watch
                                     the block needs, waited for)
  <!-- example: with: SQL -->        run in the block's transaction first (a
                                     business table, a role; rolled back)
  <!-- example: autocommit -->       the block runs committed, statement by
                                     statement (wait_synced() must see the
                                     watch() before it committed); the test's
                                     cleanup unwatches what it registered
  <!-- example: covered: FILE::TEST -->  another test runs this block
  <!-- example: skip: REASON -->     cannot run here, and why

Without autocommit a block runs in a transaction that is rolled back, so
DDL of the examples (RLS, partitioning, IMPORT FOREIGN SCHEMA) leaves
nothing behind.  psql stops at the first error (ON_ERROR_STOP), so a block
passes only when every statement of it runs.
"""
import os
import re
import subprocess
from pathlib import Path

import pytest

import conftest
from common import REPO

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


def psql(script, server, staging):
    def ours(text):
        for doc_name, name in (("prod", server), ("staging", staging)):
            text = text.replace("'%s'" % doc_name, "'%s'" % name)
            text = re.sub(r"\bSERVER %s\b" % doc_name, 'SERVER "%s"' % name, text)
        return text

    pg = conftest.PG
    env = dict(os.environ, PGHOST=str(pg.dir), PGPORT=str(pg.port), PGDATABASE=pg.db,
               PGUSER="postgres", PGOPTIONS="-c statement_timeout=180s")
    r = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1"], input=ours(script),
                       env=env, capture_output=True, text=True, timeout=400)
    return r


@pytest.mark.parametrize("page,line,body,marks",
                         [pytest.param(*e, id="%s:%d" % e[:2]) for e in EXAMPLES])
def test_example_runs(ctx, page, line, body, marks):
    if "skip" in marks:
        pytest.skip(marks["skip"][0])
    if "covered" in marks:
        pytest.skip("run by " + marks["covered"][0])
    server, staging = ctx.server("-prod"), ctx.server("-staging")
    ns = ctx.namespace("-shop")
    body = body.replace("'shop'", "'%s'" % ns)
    for given in marks.get("given", []):
        r = psql(given, server, staging)
        assert r.returncode == 0, "given of %s:%d failed:\n%s" % (page, line, r.stderr)
    if "autocommit" in marks:
        script = "\n".join(marks.get("with", [])) + "\n" + body
    else:
        script = "BEGIN;\n" + "\n".join(marks.get("with", [])) + "\n" + body + "\nROLLBACK;\n"
    r = psql(script, server, staging)
    assert r.returncode == 0, "%s:%d failed:\n%s\n--- the block as run:\n%s" % (
        page, line, r.stderr, script)
