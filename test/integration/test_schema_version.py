"""One schema for the C code (doc/operations.md, "Upgrading"): the library
refuses an installed extension at another version than its own, and the
worker, restarted with the new library before ALTER EXTENSION kwatch
UPDATE, logs the mismatch once and waits (no restart loop), then serves
the database as soon as the extension is updated.  A PostgreSQL instance
of the test's own (replicas.py) whose kwatch.database has kwatch 0.7.0."""
import re
import time

import psycopg2
import pytest

from cluster import configmaps_doc, kubectl
from compare import assert_table_matches_server
from common import wait_until
from postgres import sql, sql_one
from replicas import create_server, instances, wait_worker  # noqa: F401  (fixture)
from watches import watch

OLD = "0.7.0"
MISMATCH = "differs from installed extension version"
STARTED = 'kwatch worker started in database "postgres"'


def lines(pg, offset, pattern):
    """The lines of `pg`'s log from byte `offset`, from the last start of
    PostgreSQL on, matching regex `pattern`."""
    log = pg.log_since(offset)
    log = log[log.rfind("starting PostgreSQL"):]
    return [l for l in log.splitlines() if re.search(pattern, l)]


def worker_pids(pg):
    """The pids of the processes named "kwatch worker" (pg_stat_activity)."""
    return [r[0] for r in sql("SELECT pid FROM pg_stat_activity WHERE application_name = 'kwatch worker'",
                              conn=pg.conn)]


def refusal(pg, query, params=None):
    """The error `query` raises on `pg` (fails the test when it raises none)."""
    with pytest.raises(psycopg2.Error) as e:
        sql(query, params, conn=pg.conn)
    return e.value


def test_the_worker_waits_for_alter_extension_update_and_the_entry_points_refuse(ctx, instances):  # noqa: F811
    pg = instances.plain("schema-version")
    library = sql_one("SELECT default_version FROM pg_available_extensions WHERE name = 'kwatch'",
                      conn=pg.conn)
    assert library != OLD
    sql("CREATE EXTENSION kwatch VERSION %s", (OLD,), conn=pg.conn)
    srv = create_server(pg, "sv")
    ns = ctx.namespace()
    kubectl("apply", "-f", "-", input=configmaps_doc(ns, ["a", "b"]))

    # a restart with the new library before the update
    offset = pg.log_size()
    pg.restart()
    wait_until(lambda: lines(pg, offset, MISMATCH), 15, "the worker's mismatch LOG")
    first = worker_pids(pg)
    assert len(first) == 1, first
    time.sleep(11)      # two of the worker's 5 s rechecks, two of a restart loop's 5 s
    logged = lines(pg, offset, MISMATCH)
    assert len(logged) == 1, logged
    assert "library version %s %s %s" % (library, MISMATCH, OLD) in logged[0], logged
    log = pg.log_since(offset)
    assert "Run ALTER EXTENSION kwatch UPDATE." in log, log[-3000:]
    assert worker_pids(pg) == first, "the worker restarted"
    assert not lines(pg, offset, STARTED + "|terminated by signal|exited with exit code"), log[-3000:]
    assert sql_one("SELECT kwatch.worker_pid()", conn=pg.conn) is None

    # the entry points refuse: a watch, an apply, a wait
    manifest = '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "%s"}}' % ns
    for q, p in (("SELECT kwatch.watch('configmaps', server => %s)", (srv,)),
                 ("SELECT kwatch.apply(%s::jsonb, server => %s)", (manifest, srv)),
                 ("SELECT kwatch._wait_synced(ARRAY[1], ARRAY[0::bigint], '1s')", None)):
        e = refusal(pg, q, p)
        assert e.pgcode == "55000", (q, e.pgerror)
        assert library in e.diag.message_primary and OLD in e.diag.message_primary, e.pgerror
        assert e.diag.message_hint == "Run ALTER EXTENSION kwatch UPDATE.", e.pgerror

    # the update wakes the worker at its commit (no wait for its next look,
    # nor a restart of its own), and it serves the database
    sql("ALTER EXTENSION kwatch UPDATE", conn=pg.conn)
    wait_worker(pg, timeout=15)
    wait_until(lambda: lines(pg, offset, STARTED), 10, "the worker's start LOG")
    assert worker_pids(pg) == first
    assert len(lines(pg, offset, STARTED)) == 1
    table = watch("configmaps", srv, conn=pg.conn, namespace=ns)
    sql("SELECT kwatch.wait_synced('configmaps', server => %s, timeout => '30s')", (srv,), conn=pg.conn)
    assert_table_matches_server(table, srv, ["configmaps", "-n", ns], conn=pg.conn)
    assert sql_one("SELECT count(*) FROM %s WHERE cluster = %%s" % table, (srv,), conn=pg.conn) >= 2
