"""kwatch.watch: errors, transactions, resource names."""
import psycopg2
import pytest
from psycopg2 import sql as pgsql

import conftest
from conftest import (assert_table_matches_server, create_pods, free_port, sql, sql_one,
                      wait_watching, watch, watch_error, watch_status)


def registrations(server):
    return sql_one("SELECT count(*) FROM kwatch.registrations WHERE server = %s", (server,))


def test_errors_leave_nothing_behind(ctx):
    ns = ctx.namespace()
    srv = ctx.server()

    e = watch_error("nosuchthings", srv)
    assert e.pgcode == "42704", e.pgerror
    assert 'resource "nosuchthings" not found' in e.diag.message_primary
    assert srv in e.diag.message_primary

    # the API server's own message for a bad selector; nothing was created
    assert sql_one("SELECT to_regclass('k8s.podtemplates')") is None
    e = watch_error("podtemplates", srv, namespace=ns, label_selector="app in (")
    assert e.pgcode == "22023", e.pgerror
    assert "unable to parse requirement" in e.diag.message_primary, e.pgerror
    assert sql_one("SELECT to_regclass('k8s.podtemplates')") is None
    e = watch_error("podtemplates", srv, field_selector="nosuchfield=x")
    assert e.pgcode == "22023", e.pgerror
    assert "nosuchfield" in e.diag.message_primary, e.pgerror
    assert sql_one("SELECT to_regclass('k8s.podtemplates')") is None

    # a namespace for a cluster-scoped resource; a name that is no DNS label
    e = watch_error("namespaces", srv, namespace=ns)
    assert e.pgcode == "22023", e.pgerror
    assert "cluster-scoped" in e.diag.message_primary, e.pgerror
    e = watch_error("pods", srv, namespace="Not_A/Namespace")
    assert e.pgcode == "22023", e.pgerror

    e = watch_error("pods", ctx.base + "-missing")
    assert e.pgcode == "42704", e.pgerror
    assert "does not exist" in e.diag.message_primary

    # an API server that refuses connections; a token it does not know
    down = ctx.base + "-down"
    sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch OPTIONS (api_server {},"
                  " certificate_authority {})").format(
        pgsql.Identifier(down), pgsql.Literal("https://127.0.0.1:%d" % free_port()),
        pgsql.Literal(conftest.CLUSTER.ca)))
    ctx.servers.append(down)
    sql(pgsql.SQL("CREATE USER MAPPING FOR CURRENT_USER SERVER {} OPTIONS (token 'x')")
        .format(pgsql.Identifier(down)))
    e = watch_error("pods", down)
    assert down in e.diag.message_primary, e.pgerror
    bad = ctx.server("-badtoken", auth="token")
    sql(pgsql.SQL("ALTER USER MAPPING FOR CURRENT_USER SERVER {} OPTIONS (SET token 'wrong')")
        .format(pgsql.Identifier(bad)))
    e = watch_error("pods", bad)
    assert "Unauthorized" in e.pgerror or "401" in e.pgerror, e.pgerror
    for s in (down, bad):
        assert registrations(s) == 0

    assert registrations(srv) == 0
    assert registrations(ctx.base + "-missing") == 0
    assert sql_one("SELECT count(*) FROM kwatch.watches WHERE server IN (%s, %s)",
                   (srv, ctx.base + "-missing")) == 0

    # the server is usable afterwards
    create_pods(ns, {"p": {}})
    watch("pods", srv, namespace=ns)
    wait_watching(srv, "pods")
    assert_table_matches_server("k8s.pods", srv, ["pods", "-n", ns])


def test_rollback_registers_nothing(ctx):
    ns = ctx.namespace()
    srv = ctx.server()
    log_from = conftest.PG.log_size()
    assert sql_one("SELECT to_regclass('k8s.limitranges')") is None
    conn = conftest.PG.connect(autocommit=False)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT kwatch.watch('limitranges', server => %s, namespace => %s)::text",
                        (srv, ns))
            assert cur.fetchone()[0] == "k8s.limitranges"
            cur.execute("SELECT id FROM kwatch.registrations WHERE server = %s", (srv,))
            rolled_back_id = cur.fetchone()[0]
        conn.rollback()
    finally:
        conn.close()
    assert sql_one("SELECT to_regclass('k8s.limitranges')") is None
    assert registrations(srv) == 0
    assert watch_status(srv, "limitranges") is None

    # A committed watch afterwards wakes the worker, which then loads the
    # registrations: the rolled-back one must not be among them.
    watch("pods", srv, namespace=ns)
    st = wait_watching(srv, "pods")
    assert st["id"] != rolled_back_id
    assert sql("SELECT * FROM kwatch.watch_status() WHERE watch_id = %s", (rolled_back_id,)) == []
    log = conftest.PG.log_since(log_from)
    assert "limitranges" not in log, log
    assert "starting watch %d:" % rolled_back_id not in log, log
    assert sql_one("SELECT to_regclass('k8s.limitranges')") is None


@pytest.mark.parametrize("names, table, canonical", [
    (["pods", "po", "pod", "Pod"], "k8s.pods", "pods"),
    (["deployments.apps", "deploy", "deployment", "Deployment", "deployments"],
     "k8s.deployments", "deployments.apps"),
    (["ns", "namespace", "Namespace", "namespaces"], "k8s.namespaces", "namespaces"),
])
def test_resource_names_resolve(ctx, names, table, canonical):
    srv = ctx.server()
    ns = None if canonical == "namespaces" else ctx.namespace()
    kw = {"namespace": ns} if ns else {}
    # the first name registers; the others resolve to the same resource
    # and, with the same settings, return the same table (idempotent)
    assert [watch(n, srv, **kw) for n in names] == [table] * len(names)
    assert sql("SELECT resource, table_name FROM kwatch.registrations WHERE server = %s",
               (srv,)) == [(canonical, table[len("k8s."):])]
    wait_watching(srv, canonical)
    # other settings for the same resource on the same server are refused
    e = watch_error(names[-1], srv, label_selector="x=y")
    assert e.pgcode == "42710", e.pgerror
    assert registrations(srv) == 1
    # unwatch accepts the names too
    assert sql_one("SELECT kwatch.unwatch(%s, server => %s)", (names[-1], srv)) is True
    assert registrations(srv) == 0


def test_a_huge_selector_is_never_echoed_whole(ctx):
    """Issue 22, hole 4, replayed: a 200 KB label selector came back whole
    in an error's DETAIL (the request URL).  Every message that echoes user
    input shows a bounded excerpt, marked as cut: the API server's answer,
    the URL, a name, an option's value."""
    ns = ctx.namespace()
    srv = ctx.server()
    huge = "app in (" + "x" * 200000 + ")"
    e = watch_error("podtemplates", srv, namespace=ns, label_selector=huge)
    shown = "\n".join(filter(None, (e.diag.message_primary, e.diag.message_detail,
                                    e.diag.message_hint, e.diag.context)))
    assert len(shown) < 4000, (len(shown), shown[:500])
    assert "x" * 1000 not in shown
    assert "cut)" in shown, shown
    assert registrations(srv) == 0
    # names and values that are echoed: cut the same way
    for stmt, params in [("SELECT kwatch.watch(%s, server => %s)", ("p" * 100000, srv)),
                         ("SELECT kwatch.watch('pods', server => %s, namespace => %s)", (srv, "N" * 100000)),
                         ("SELECT kwatch.watch('pods', server => %s, table_name => %s)", (srv, "t" * 100000))]:
        with pytest.raises(psycopg2.Error) as err:
            sql(stmt, params)
        d = err.value.diag
        shown = "\n".join(filter(None, (d.message_primary, d.message_detail, d.message_hint)))
        assert len(shown) < 4000 and "cut)" in shown, (err.value.pgcode, shown[:500])
    with pytest.raises(psycopg2.Error) as err:
        sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch OPTIONS (api_server {})").format(
            pgsql.Identifier(ctx.base + "-huge"), pgsql.Literal("ftp://" + "h" * 100000)))
    assert len(err.value.diag.message_primary) < 4000 and "cut)" in err.value.diag.message_primary
