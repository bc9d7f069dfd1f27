"""Day two (issue 33): a database the worker does not serve says so at once
and never shows another database's status; a wait for a watch the current
transaction registered fails at once instead of at its timeout."""
import time

import psycopg2
import pytest
from psycopg2 import sql as pgsql

import conftest
from conftest import sql, sql_one, watch, wait_watching


def error(query, params=None, conn=None):
    with pytest.raises(psycopg2.Error) as e:
        sql(query, params, conn=conn)
    return e.value


@pytest.fixture
def other_db(ctx):
    """A second database with the extension and a server of its own."""
    name = ("kw_other_" + ctx.base)[:63].replace("-", "_")
    sql(pgsql.SQL("CREATE DATABASE {}").format(pgsql.Identifier(name)))
    conn = psycopg2.connect(**conftest.PG.dsn(dbname=name))
    conn.autocommit = True
    try:
        sql("CREATE EXTENSION kwatch", conn=conn)
        yield name, conn
    finally:
        conn.close()
        sql(pgsql.SQL("DROP DATABASE {} WITH (FORCE)").format(pgsql.Identifier(name)))


def test_a_database_the_worker_does_not_serve_shows_nothing_of_another(ctx, other_db):
    """Issue 33, item 1: the worker's database has a watch with status; in
    another database with the extension, the same ids show nothing, and
    every function that needs the worker says which database it serves."""
    name, other = other_db
    srv = ctx.server()
    watch("configmaps", srv)
    wait_watching(srv, "configmaps")
    served = sql_one("SHOW kwatch.database")
    assert sql_one("SELECT count(*) FROM kwatch.watches WHERE server = %s", (srv,)) == 1
    assert sql_one("SELECT kwatch.worker_pid()") is not None

    sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch OPTIONS (kubeconfig {})")
        .format(pgsql.Identifier(srv), pgsql.Literal(conftest.CLUSTER.kubeconfig)), conn=other)
    e = error("SELECT kwatch.watch('configmaps', server => %s)", (srv,), conn=other)
    assert e.pgcode == "55000", e.pgerror
    assert 'serves database "%s", not "%s"' % (served, name) in e.diag.message_primary
    assert "kwatch.database" in e.diag.message_hint + e.diag.message_detail
    # nothing registered, nothing shown: not the worker's database's status
    assert sql_one("SELECT count(*) FROM kwatch.registrations", conn=other) == 0
    assert sql("SELECT * FROM kwatch.watches", conn=other) == []
    assert sql_one("SELECT kwatch.worker_pid()", conn=other) is None
    assert sql("SELECT seq FROM kwatch.events LIMIT 1", conn=other) == []
    for q in ("SELECT kwatch._wait_synced(ARRAY[1], ARRAY[0::bigint], '1s')",
              "SELECT kwatch._request_relist(1)"):
        started = time.monotonic()
        e = error(q, conn=other)
        assert e.pgcode == "55000" and "serves database" in e.diag.message_primary, (q, e.pgerror)
        assert time.monotonic() - started < 1.0
    # what was registered there before (0.6.0 let it) can still be removed
    assert sql_one("SELECT count(*) FROM kwatch.watches WHERE server = %s", (srv,)) == 1


def test_a_wait_in_the_registering_transaction_fails_at_once(ctx):
    """Issue 33, item 3: wait_synced(), wait_current() and relist(wait =>
    true) for a watch registered by the current transaction fail with
    55000 "COMMIT first" in well under 100 ms; after COMMIT they work."""
    srv = ctx.server()
    conn = conftest.PG.connect(autocommit=False)
    try:
        for q in ("SELECT kwatch.wait_synced('configmaps', server => %s, timeout => '30s')",
                  "SELECT kwatch.wait_current('configmaps', server => %s, timeout => '30s')",
                  "SELECT kwatch.relist('configmaps', server => %s, wait => true, timeout => '30s')"):
            sql("SELECT kwatch.watch('configmaps', server => %s)", (srv,), conn=conn)
            started = time.monotonic()
            e = error(q, (srv,), conn=conn)
            took = time.monotonic() - started
            conn.rollback()
            assert e.pgcode == "55000", (q, e.pgerror)
            assert "registered by this transaction" in e.diag.message_primary, e.pgerror
            assert e.diag.message_hint.startswith("COMMIT first"), e.pgerror
            assert took < 0.1, (q, took)
    finally:
        conn.close()
    watch("configmaps", srv)
    sql("SELECT kwatch.wait_synced('configmaps', server => %s, timeout => '2 min')", (srv,))
    assert sql_one("SELECT kwatch.wait_current('configmaps', server => %s, timeout => '2 min')"
                   " IS NOT NULL", (srv,))


def test_unwatch_drop_table_deletes_the_rows_first(ctx):
    """Issue 33, item 6: unwatch(drop_table => true) deletes the watch's
    rows as ordinary deletes before dropping the table, so that a
    logical-replication subscriber (which never sees a DROP TABLE) removes
    that cluster's rows; a row trigger stands in for the subscriber: it
    sees every row deleted."""
    srv = ctx.server()
    ns = ctx.namespace()
    for i in range(3):
        conftest.kubectl("create", "configmap", "c%d" % i, "-n", ns, "--from-literal=k=v")
    table = "cms_" + ctx.base.replace("-", "_")[:40]
    ctx.tables.append(table)
    watch("configmaps", srv, namespace=ns, table_name=table)
    sql("SELECT kwatch.wait_synced(%s, server => %s, timeout => '2 min')", (table, srv))
    names = sorted(r[0] for r in sql(pgsql.SQL("SELECT name FROM k8s.{}").format(pgsql.Identifier(table))))
    assert {"c0", "c1", "c2"} <= set(names), names     # and the namespace's kube-root-ca.crt
    log = "deleted_" + table
    sql(pgsql.SQL("CREATE TABLE public.{} (name text)").format(pgsql.Identifier(log)))
    try:
        sql(pgsql.SQL("CREATE FUNCTION public.{f}() RETURNS trigger LANGUAGE plpgsql AS "
                      "$$BEGIN INSERT INTO public.{l} VALUES (OLD.name); RETURN OLD; END$$")
            .format(f=pgsql.Identifier(log + "_f"), l=pgsql.Identifier(log)))
        sql(pgsql.SQL("CREATE TRIGGER kept AFTER DELETE ON k8s.{} FOR EACH ROW EXECUTE FUNCTION public.{}()")
            .format(pgsql.Identifier(table), pgsql.Identifier(log + "_f")))
        assert sql_one("SELECT kwatch.unwatch(%s, server => %s, drop_table => true)", (table, srv))
        assert sql_one("SELECT to_regclass(%s)", ("k8s." + table,)) is None
        assert sorted(r[0] for r in sql(pgsql.SQL("SELECT name FROM public.{}")
                                        .format(pgsql.Identifier(log)))) == names
    finally:
        sql(pgsql.SQL("DROP TABLE IF EXISTS public.{}").format(pgsql.Identifier(log)))
        sql(pgsql.SQL("DROP FUNCTION IF EXISTS public.{}()").format(pgsql.Identifier(log + "_f")))


def test_a_running_watch_takes_a_relist_from_the_transaction_that_wrote_its_row(ctx):
    """The 0.7.0 update clears a Secret watch's checkpoint and asks for a
    relist in one transaction: a watch the worker runs takes the request
    although this transaction wrote its row (only a watch the worker does
    not run yet, a registration of this transaction's, is refused)."""
    srv = ctx.server()
    watch("configmaps", srv)
    wait_watching(srv, "configmaps")
    wid = sql_one("SELECT id FROM kwatch.registrations WHERE server = %s", (srv,))
    before = sql_one("SELECT relist_requests FROM kwatch.watches WHERE id = %s", (wid,))
    conn = conftest.PG.connect(autocommit=False)
    try:
        sql("UPDATE kwatch.registrations SET resource_version = NULL WHERE id = %s", (wid,), conn=conn)
        assert sql_one("SELECT kwatch._request_relist(%s)", (wid,), conn=conn) > 0
        conn.commit()
    finally:
        conn.close()
    assert sql_one("SELECT relist_requests FROM kwatch.watches WHERE id = %s", (wid,)) == before + 1
