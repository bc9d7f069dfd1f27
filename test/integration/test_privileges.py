"""Credentials never fall back to stronger ones (issue 13, hole 5), and
unwatch checks its caller (hole 3), run as unprivileged roles against the
real control plane.

A server whose own options carry credentials (here a kubeconfig with the
cluster's admin token) lends them to superusers only: a role with USAGE on
the server but no user mapping is refused (postgres_fdw's "user mapping not
found") by watch() and by live scans, where it used to get the server's
credentials.  A watch whose registering role was dropped fails clearly
instead of going on with the PUBLIC mapping's or the server's credentials.
"""
import psycopg2
import pytest
from psycopg2 import sql as pgsql

import conftest
from conftest import sql, sql_one, wait_until, wait_watching, watch_status


def as_role(role):
    """A new autocommit connection that has SET ROLE `role`."""
    conn = conftest.PG.connect(autocommit=True)
    conn.cursor().execute(pgsql.SQL("SET ROLE {}").format(pgsql.Identifier(role)))
    return conn


def run_as(role, query, params=None):
    conn = as_role(role)
    try:
        with conn.cursor() as cur:
            cur.execute(query, params)
            return cur.fetchall() if cur.description else None
    finally:
        conn.close()


def error_as(role, query, params=None):
    with pytest.raises(psycopg2.Error) as e:
        run_as(role, query, params)
    return e.value


@pytest.fixture
def role(ctx):
    name = ("kwr_" + ctx.base)[:63].replace("-", "_")
    sql(pgsql.SQL("CREATE ROLE {}").format(pgsql.Identifier(name)))
    yield name
    if sql_one("SELECT count(*) FROM pg_roles WHERE rolname = %s", (name,)):
        sql(pgsql.SQL("DROP OWNED BY {} CASCADE").format(pgsql.Identifier(name)))
        sql(pgsql.SQL("DROP ROLE {}").format(pgsql.Identifier(name)))


def grant(role, srv):
    r, s = pgsql.Identifier(role), pgsql.Identifier(srv)
    sql(pgsql.SQL("GRANT USAGE ON FOREIGN SERVER {} TO {}").format(s, r))
    sql(pgsql.SQL("GRANT EXECUTE ON FUNCTION kwatch.watch, kwatch.unwatch TO {}").format(r))


def test_a_role_without_user_mapping_gets_no_server_credentials(ctx, role):
    ns = ctx.namespace()
    srv = ctx.server()          # its kubeconfig carries the admin's credentials
    grant(role, srv)
    e = error_as(role, "SELECT kwatch.watch('configmaps', server => %s, namespace => %s)", (srv, ns))
    assert e.pgcode == "42704", e.pgerror
    assert "user mapping not found" in e.diag.message_primary, e.pgerror
    assert sql_one("SELECT count(*) FROM kwatch.registrations WHERE server = %s", (srv,)) == 0

    # a live table: the same refusal
    schema = ("kwr_live_" + conftest.RUN_ID)
    sql(pgsql.SQL("CREATE SCHEMA {}").format(pgsql.Identifier(schema)))
    try:
        sql(pgsql.SQL("CREATE FOREIGN TABLE {}.cms (namespace text, name text) SERVER {}"
                      " OPTIONS (resource 'configmaps', api_version 'v1', namespaced 'true',"
                      " use_remote_estimate 'false')")
            .format(pgsql.Identifier(schema), pgsql.Identifier(srv)))
        sql(pgsql.SQL("GRANT USAGE ON SCHEMA {0} TO {1}; GRANT SELECT ON {0}.cms TO {1}")
            .format(pgsql.Identifier(schema), pgsql.Identifier(role)))
        e = error_as(role, "SELECT name FROM %s.cms WHERE namespace = %%s" % schema, (ns,))
        assert e.pgcode == "42704" and "user mapping not found" in e.diag.message_primary, e.pgerror

        # a PUBLIC mapping is the admin sharing the server's credentials on purpose
        sql(pgsql.SQL("CREATE USER MAPPING FOR PUBLIC SERVER {}").format(pgsql.Identifier(srv)))
        rows = run_as(role, "SELECT name FROM %s.cms WHERE namespace = %%s" % schema, (ns,))
        assert ("kube-root-ca.crt",) in rows
        assert run_as(role, "SELECT kwatch.watch('configmaps', server => %s, namespace => %s)::text",
                      (srv, ns)) == [("k8s.configmaps",)]
        wait_watching(srv, "configmaps")
    finally:
        sql(pgsql.SQL("DROP SCHEMA {} CASCADE").format(pgsql.Identifier(schema)))


def test_a_dropped_role_is_not_replaced_by_other_credentials(ctx, role):
    ns = ctx.namespace()
    srv = ctx.server(auth="token")          # the superuser's mapping holds the token
    grant(role, srv)
    sql(pgsql.SQL("CREATE USER MAPPING FOR {} SERVER {} OPTIONS (token {})").format(
        pgsql.Identifier(role), pgsql.Identifier(srv), pgsql.Literal(conftest.CLUSTER.token)))
    # a PUBLIC mapping with the same token: what a dropped role used to fall back to
    sql(pgsql.SQL("CREATE USER MAPPING FOR PUBLIC SERVER {} OPTIONS (token {})").format(
        pgsql.Identifier(srv), pgsql.Literal(conftest.CLUSTER.token)))
    run_as(role, "SELECT kwatch.watch('configmaps', server => %s, namespace => %s)", (srv, ns))
    wait_watching(srv, "configmaps")

    # unwatch by another role: refused (hole 3)
    other = role + "_x"
    sql(pgsql.SQL("CREATE ROLE {}").format(pgsql.Identifier(other)))
    try:
        grant(other, srv)
        e = error_as(other, "SELECT kwatch.unwatch('configmaps', server => %s, drop_table => true)", (srv,))
        assert e.pgcode == "42501", e.pgerror
        assert watch_status(srv, "configmaps") is not None
    finally:
        sql(pgsql.SQL("DROP OWNED BY {} CASCADE").format(pgsql.Identifier(other)))
        sql(pgsql.SQL("DROP ROLE {}").format(pgsql.Identifier(other)))

    # the registering role goes away; the worker reloads its watches
    sql(pgsql.SQL("DROP OWNED BY {} CASCADE").format(pgsql.Identifier(role)))
    sql(pgsql.SQL("DROP ROLE {}").format(pgsql.Identifier(role)))
    worker = sql_one("SELECT kwatch.worker_pid()")
    sql("SELECT pg_terminate_backend(%s)", (worker,))
    wait_until(lambda: sql_one("SELECT kwatch.worker_pid()") not in (None, worker), 30, "a new worker")
    st = wait_until(lambda: (lambda s: s if s and s["last_error"] and "does not exist" in s["last_error"]
                             else None)(watch_status(srv, "configmaps")), 30, "the watch to fail")
    assert not st["healthy"], st
    assert st["list_calls"] == 0 and st["watch_calls"] == 0, "no request with borrowed credentials"
