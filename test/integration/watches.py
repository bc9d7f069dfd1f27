"""kwatch's SQL interface as the tests use it: watch(), the error it
raises, and the kwatch.watches status row, waited on."""
import psycopg2
import psycopg2.extras
from psycopg2 import sql as pgsql
import pytest

import postgres
from common import wait_until
from compare import assert_table_matches_server
from postgres import sql_one


def watch(resource, server, conn=None, **kw):
    """kwatch.watch(resource, server => ..., **kw) on conn (default the
    session's PostgreSQL); returns the table name (text)."""
    args = [pgsql.SQL("{} => %s").format(pgsql.Identifier(k)) for k in kw]
    q = pgsql.SQL("SELECT kwatch.watch(%s, server => %s{})::text").format(
        pgsql.SQL("").join(pgsql.SQL(", ") + a for a in args))
    return sql_one(q, [resource, server, *kw.values()], conn)


def watch_error(resource, server, **kw):
    """The psycopg2 error kwatch.watch(resource, server => ..., **kw) raises
    (fails the test when it raises none)."""
    with pytest.raises(psycopg2.Error) as e:
        watch(resource, server, **kw)
    return e.value


def watch_status(server, resource, conn=None):
    """The kwatch.watches row of (server, canonical resource) as a dict, or
    None (read on conn, default the session's PostgreSQL)."""
    with (conn or postgres.PG.conn).cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
        cur.execute("SELECT * FROM kwatch.watches WHERE server = %s AND resource = %s",
                    (server, resource))
        row = cur.fetchone()
        return dict(row) if row else None


def wait_status(server, resource, pred, timeout=30, msg="status", conn=None):
    """Waits until pred(the watch's status row, read on conn) is true; returns the row."""
    def ok():
        st = watch_status(server, resource, conn)
        return st if st and pred(st) else False
    try:
        return wait_until(ok, timeout, msg)
    except BaseException:
        print("status:", watch_status(server, resource, conn))
        raise


def wait_watching(server, resource, timeout=30, conn=None):
    """Waits until the watch streams (state watching, healthy; status read on
    conn, default the session's PostgreSQL); returns its status."""
    return wait_status(server, resource, lambda st: st["state"] == "watching" and st["healthy"],
                       timeout, "watch %s on %s to be watching" % (resource, server), conn)


def watched_namespace(ctx, resource, fill):
    """A namespace of the test's, fill(namespace) run to create objects in
    it, and a watch of `resource` there, watching and equal to the server.
    Returns (namespace, server, table, the `kubectl get` arguments)."""
    ns = ctx.namespace()
    srv = ctx.server()
    get_args = [resource, "-n", ns]
    fill(ns)
    table = watch(resource, srv, namespace=ns)
    wait_watching(srv, resource)
    assert_table_matches_server(table, srv, get_args)
    return ns, srv, table, get_args
