"""Hostile names through watch(), the mirror table, NOTIFY and EXPLAIN
(issue 13): table names with quotes, semicolons, backslashes and
non-ASCII letters, names at and past the byte limit, selectors with
quotes, resource names that are SQL; CRD groups longer than an identifier
and label values that are not label values through IMPORT and EXPLAIN.  Each is either used exactly as
given (quoted everywhere) or refused with a clear SQLSTATE, and nothing
else is touched."""

import json

from psycopg2 import sql as pgsql

import conftest
from conftest import (assert_table_matches_server, crd_manifest, kubectl, sql, sql_one, wait_until,
                      wait_watching, watch, watch_error, watch_status)
from live_support import foreign_tables, import_schema


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


def widget_crd(group):
    return crd_manifest(group, "hostilewidgets", "HostileWidget")


def test_long_crd_groups_and_hostile_label_values_through_import_and_explain(ctx):
    """Three CRDs of one plural whose groups share their first 70 characters:
    IMPORT names the second and third plural_<group>, which is longer than an
    identifier and the same for both once cut, so the third gets _2 (it used
    to make PostgreSQL truncate both to one name and fail the whole IMPORT).
    Label values that are not label values (a quote, a semicolon, SQL) are
    never sent as a selector: EXPLAIN shows the request without them, and the
    scan answers from a local filter."""
    ns = ctx.namespace()
    srv = ctx.server()
    stem = "hostile-" + conftest.RUN_ID.lower() + "-" + "a" * 60
    groups = [stem + ".one.example.com", stem + ".two.example.com", stem + ".six.example.com"]
    for g in groups:
        ctx.crds.append("hostilewidgets." + g)
        kubectl("apply", "-f", "-", input=json.dumps(widget_crd(g)))
    for g in groups:
        conftest.wait_crd_established("hostilewidgets." + g)
        wait_until(lambda: kubectl("get", "--raw", "/apis/%s/v1" % g, check=False).strip(),
                   30, "discovery of " + g)
        kubectl("create", "-n", ns, "-f", "-", input=json.dumps({
            "apiVersion": g + "/v1", "kind": "HostileWidget",
            "metadata": {"name": "w-" + g.split(".")[1], "labels": {"app": "a.b-c_d"}}}))
    schema = ("kw_hostile_" + conftest.RUN_ID).lower()
    try:
        import_schema(srv, schema)
        tables = {t: o["resource"] for t, o in foreign_tables(schema).items()
                  if o["resource"].startswith("hostilewidgets.")}
        assert sorted(tables.values()) == sorted("hostilewidgets." + g for g in groups), tables
        assert all(len(t.encode()) <= 63 for t in tables), tables
        assert len(set(tables)) == 3
        assert "hostilewidgets" in tables
        for table, resource in tables.items():
            rows = sql(pgsql.SQL("SELECT name, labels->>'app' FROM {}.{} WHERE namespace = %s")
                       .format(pgsql.Identifier(schema), pgsql.Identifier(table)), (ns,))
            assert rows == [("w-" + resource.split(".")[2], "a.b-c_d")], (table, rows)

        def explain(value):
            plan = sql(pgsql.SQL("EXPLAIN (VERBOSE, FORMAT JSON) SELECT name FROM {}.hostilewidgets"
                                 " WHERE namespace = %s AND labels->>'app' = %s")
                       .format(pgsql.Identifier(schema)), (ns, value))[0][0][0]["Plan"]
            return plan["Kubernetes Request"], plan["All Conditions Pushed Exactly"]

        req, exact = explain("a.b-c_d")
        assert "labelSelector=app=a.b-c_d" in req and exact, req
        for hostile in ("x'; DROP TABLE kwatch.registrations; --", 'a"b', "a\\b", "é", "a b", "x" * 64):
            req, exact = explain(hostile)
            assert "labelSelector" not in req and not exact, (hostile, req)
            assert sql(pgsql.SQL("SELECT name FROM {}.hostilewidgets WHERE namespace = %s"
                                 " AND labels->>'app' = %s").format(pgsql.Identifier(schema)),
                       (ns, hostile)) == []
        assert sql_one("SELECT to_regclass('kwatch.registrations')") is not None
    finally:
        sql(pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(pgsql.Identifier(schema)))
