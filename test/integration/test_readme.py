"""The README's "First hour" stays honest (issue 26): its SQL blocks are
read from README.md and run against the test cluster, with the README's
names (the demo's server 'demo', 'staging', the role app) replaced by the test's own, and
each does what the README says it does; the mistakes it warns about fail
with the SQLSTATE it names."""
import re

import psycopg2
import pytest
from psycopg2 import sql as pgsql

import conftest
from common import REPO
from conftest import create_pods, sql, sql_one, wait_watching, watch_status
from test_privileges import error_as, run_as


def first_hour_blocks():
    text = (REPO / "README.md").read_text()
    section = text[text.index("\n## First hour\n"):text.index("\n## Quick start")]
    return re.findall(r"```sql\n(.*?)```", section, re.S)


def error(query, params=None):
    with pytest.raises(psycopg2.Error) as e:
        sql(query, params)
    return e.value


@pytest.fixture
def app_role(ctx):
    name = ("kwapp_" + ctx.base)[:63].replace("-", "_")
    sql(pgsql.SQL("CREATE ROLE {}").format(pgsql.Identifier(name)))
    yield name
    sql(pgsql.SQL("DROP OWNED BY {} CASCADE").format(pgsql.Identifier(name)))
    sql(pgsql.SQL("DROP ROLE {}").format(pgsql.Identifier(name)))


def test_first_hour_sql(ctx, app_role):
    wait_synced, watch_one, by_cluster, mapping, faults, backoff = first_hour_blocks()
    prod, staging = ctx.server("-prod"), ctx.server("-staging")

    def ours(block):
        return (block.replace("'demo'", "'%s'" % prod).replace("'staging'", "'%s'" % staging)
                .replace("FOR app ", "FOR %s " % app_role).replace("SERVER demo ", 'SERVER "%s" ' % prod))

    ns = ctx.namespace()
    create_pods(ns, {"first-hour": {}})
    # several servers: leaving out server => is 42P08
    e = error(ours(watch_one).replace(", server => '%s'" % prod, ""))
    assert e.pgcode == "42P08", e.pgerror
    sql(ours(watch_one))
    sql(ours(wait_synced))      # returns once the LIST is committed: the rows are there
    assert sql_one("SELECT count(*) FROM k8s.pods WHERE cluster = %s AND namespace = %s"
                   " AND name = 'first-hour'", (prod, ns)) == 1
    # one table per resource unless table_name => names another: then the
    # watch has a table of its own
    ctx.tables.append("pods_staging")
    assert sql_one("SELECT kwatch.watch('pods', server => %s, table_name => 'pods_staging')::text",
                   (staging,)) == "k8s.pods_staging"
    sql("SELECT kwatch.unwatch('pods_staging', server => %s, drop_table => true)", (staging,))
    sql("SELECT kwatch.watch('pods', server => %s)", (staging,))
    sql("SELECT kwatch.wait_synced('pods', server => %s, timeout => '2 min')", (staging,))
    assert ("first-hour", "Pending") in sql(ours(by_cluster))

    # a role that is not a superuser: 42704 without a user mapping, watching with one
    r, s = pgsql.Identifier(app_role), pgsql.Identifier(prod)
    sql(pgsql.SQL("GRANT USAGE ON FOREIGN SERVER {} TO {}").format(s, r))
    sql(pgsql.SQL("GRANT EXECUTE ON FUNCTION kwatch.watch, kwatch.unwatch TO {}").format(r))
    q = "SELECT kwatch.watch('podtemplates', server => %s, namespace => %s)"
    e = error_as(app_role, q, (prod, ns))
    assert e.pgcode == "42704" and "user mapping not found" in e.diag.message_primary, e.pgerror
    sql(ours(mapping).replace("'...'", pgsql.Literal(conftest.CLUSTER.token).as_string(conftest.PG.conn)))
    try:
        run_as(app_role, q, (prod, ns))
        wait_watching(prod, "podtemplates")
    finally:
        run_as(app_role, "SELECT kwatch.unwatch('podtemplates', server => %s, drop_table => true)", (prod,))
        sql(pgsql.SQL("DROP USER MAPPING FOR {} SERVER {}").format(r, s))
    assert sql_one("SELECT to_regclass('k8s.podtemplates')") is None

    # healthy watches: the query of what is wrong now shows none of ours
    wait_watching(prod, "pods")
    wait_watching(staging, "pods")
    assert not [row for row in sql(ours(faults)) if row[0] in (prod, staging)]
    assert watch_status(prod, "pods")["last_error"] is None

    # the demo's faster retries, as the README sets them
    try:
        sql(ours(backoff))
        sql("SELECT pg_reload_conf()")
        conn = conftest.PG.connect(autocommit=True)
        try:
            assert sql_one("SHOW kwatch.backoff_max", conn=conn) == "5s"
        finally:
            conn.close()
    finally:
        sql("ALTER SYSTEM RESET kwatch.backoff_max")
        sql("SELECT pg_reload_conf()")


def test_every_link_of_readme_and_doc_resolves():
    """Issue 31: README.md leads and doc/ holds the rest; every relative
    link of README.md, doc/*.md and src/README.md names a file that exists,
    and every #anchor a heading of that file (GitHub's slugs)."""
    def slug(title):
        return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")

    pages = [REPO / "README.md", REPO / "src" / "README.md", *sorted((REPO / "doc").glob("*.md"))]
    broken = []
    for page in pages:
        text = page.read_text()
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue            # https:, mailto:
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append("%s: %s (no such file)" % (page.relative_to(REPO), target))
            elif anchor and dest.suffix == ".md":
                heads = {slug(h) for h in re.findall(r"(?m)^#+ (.*)$", dest.read_text())}
                if anchor not in heads:
                    broken.append("%s: %s (no such heading)" % (page.relative_to(REPO), target))
    assert not broken, "\n".join(broken)
    assert len((REPO / "README.md").read_text().splitlines()) <= 500
