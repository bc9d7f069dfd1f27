"""Hostile names through watch(), the mirror table, NOTIFY and EXPLAIN
(issue 13): table names with quotes, semicolons, backslashes and
non-ASCII letters, names at and past the byte limit, selectors with
quotes, resource names that are SQL.  Each is either used exactly as
given (quoted everywhere) or refused with a clear SQLSTATE, and nothing
else is touched."""

from conftest import (assert_table_matches_server, kubectl, sql, sql_one, wait_watching,
                      watch, watch_error, watch_status)


def test_table_names_with_quotes_semicolons_backslashes_and_non_ascii(ctx):
    ns = ctx.namespace()
    srv = ctx.server()
    name = 'cm "x"; drop\\é'          # 15 characters, 16 bytes
    lst = ctx.listener("kwatch_" + name)
    table = watch("configmaps", srv, namespace=ns, table_name=name)
    assert table == sql_one("SELECT format('k8s.%%I', %s::text)", (name,))
    wait_watching(srv, "configmaps")
    kubectl("create", "configmap", "hostile", "-n", ns, "--from-literal=a=b")
    assert_table_matches_server(table, srv, ["configmaps", "-n", ns])
    p = lst.wait_for(cluster=srv, name="hostile", type="ADDED")
    assert p["namespace"] == ns
    # nothing else was created or dropped along the way
    assert sql_one("SELECT count(*) FROM pg_class WHERE relname = 'cm \"x\"'") == 0
    sql("SELECT kwatch.unwatch(%s, server => %s, drop_table => true)", (name, srv))
    assert sql_one("SELECT to_regclass(%s)", (table,)) is None


def test_names_past_the_byte_limit_are_refused(ctx):
    srv = ctx.server()
    ns = ctx.namespace()
    # 56 bytes fit (the channel kwatch_<name> is then 63 bytes)
    fits = "x" * 56
    assert watch("configmaps", srv, namespace=ns, table_name=fits) == "k8s." + fits
    wait_watching(srv, "configmaps")
    sql("SELECT kwatch.unwatch('configmaps', server => %s, drop_table => true)", (srv,))
    # 29 two-byte letters: 29 characters, 58 bytes
    for name in ("x" * 57, "é" * 29):
        e = watch_error("configmaps", srv, namespace=ns, table_name=name)
        assert e.pgcode == "42622", e.pgerror
    assert sql_one("SELECT count(*) FROM kwatch.registrations WHERE server = %s", (srv,)) == 0


def test_sql_in_resource_names_and_selectors_is_just_text(ctx):
    srv = ctx.server()
    ns = ctx.namespace()
    e = watch_error("pods; DROP TABLE kwatch.registrations; --", srv)
    assert e.pgcode == "22023" and "invalid resource name" in e.diag.message_primary, e.pgerror
    e = watch_error("pods", srv, namespace=ns, label_selector="app in ('x'); DROP TABLE k8s.pods")
    assert e.pgcode == "22023", e.pgerror
    e = watch_error("pods", srv, namespace="ns'; DROP TABLE x; --")
    assert e.pgcode == "22023", e.pgerror
    assert sql_one("SELECT to_regclass('kwatch.registrations')") is not None
    # a label value the API server accepts, with a dot, dash and underscore
    watch("configmaps", srv, namespace=ns, label_selector="app=a.b-c_d")
    st = wait_watching(srv, "configmaps")
    assert watch_status(srv, "configmaps")["label_selector"] == "app=a.b-c_d", st
