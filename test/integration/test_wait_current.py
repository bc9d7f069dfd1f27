"""kwatch.wait_current() (src/functions/wait_current.c): read your own writes, on the 1.20 plane and on a 1.36
API server (modern_local.py).  After `kubectl apply`, wait_current() returns and the next statement
of the same session sees the row; on an idle collection it returns by comparing the table with a
metadata-only LIST (the times are printed, not asserted); a timeout is 57014; a role without USAGE
on the server cannot use it.  The requests each call made are counted from kwatch's DEBUG2 lines."""
import collections
import json
import re
import threading
import time

import psycopg2
import pytest
from psycopg2 import sql as pgsql

import cluster
import postgres
from conftest import (kubectl, configmap_manifest, crd_manifest, wait_until, wait_crd_established, sql, sql_one,
                      TEST_DIR, RUN_ID)
from watches import watch, wait_watching
from modern_local import ModernPlane


class Session:
    """One connection of the test's, with kwatch's DEBUG lines kept."""

    def __init__(self):
        self.conn = postgres.PG.connect()
        self.conn.notices = collections.deque(maxlen=100000)
        self.cur = self.conn.cursor()
        self.cur.execute("SET client_min_messages = debug2")

    def wait_current(self, resource, server, timeout="60s"):
        """Calls wait_current; returns (resourceVersion, seconds, requests, how); self.bytes gets
        the bytes of the responses."""
        self.conn.notices.clear()
        t0 = time.monotonic()
        self.cur.execute("SELECT kwatch.wait_current(%s, %s, %s::interval)", (resource, server, timeout))
        rv = self.cur.fetchone()[0]
        took = time.monotonic() - t0
        reqs = [n for n in self.conn.notices if "kwatch: wait_current GET" in n]
        how = [m.group(1) for n in self.conn.notices
               for m in [re.search(r"reflects resourceVersion \S+ \(server's \S+\) by (\w+)", n)] if m]
        self.bytes = sum(int(m.group(1)) for n in self.conn.notices
                         for m in [re.search(r"wait_current GET .*: HTTP \d+, (\d+) bytes", n)] if m)
        return rv, took, len(reqs), how[-1] if how else None

    def one(self, query, params=None):
        self.cur.execute(query, params)
        return self.cur.fetchone()

    def close(self):
        self.conn.close()


def read_your_writes(session, apply, table, server, resource, rounds=3):
    """`rounds` times: apply() (returns the uid and resourceVersion of what it wrote), then
    wait_current(), then the row in the same session; prints each round's cost."""
    for i in range(rounds):
        uid, written_rv = apply(i)
        rv, took, reqs, how = session.wait_current(resource, server)
        row = session.one(pgsql.SQL("SELECT resource_version FROM {} WHERE cluster = %s AND uid = %s")
                          .format(pgsql.SQL(table)), (server, uid))
        print("after apply %d: wait_current -> %s by %s in %.3f s, %d requests, %d bytes"
              % (i, rv, how, took, reqs, session.bytes))
        assert row is not None, "the row written is not visible after wait_current()"
        assert row[0] == written_rv
        assert int(rv) >= int(written_rv)


def idle_wait(session, table, server, resource):
    """wait_current() on a collection nothing writes: prints its cost; the table then equals the
    collection (the proof it gave)."""
    for i in range(2):
        rv, took, reqs, how = session.wait_current(resource, server)
        print("idle: wait_current -> %s by %s in %.3f s, %d requests, %d bytes"
              % (rv, how, took, reqs, session.bytes))
        assert how in ("checkpoint", "comparison")


# ---------------------------------------------------------------- the 1.20 plane

def test_read_your_writes_on_1_20(ctx):
    ns = ctx.namespace()
    server = ctx.server()
    table = watch("configmaps", server, namespace=ns)
    wait_watching(server, "configmaps")
    s = Session()
    try:
        idle_wait(s, table, server, "configmaps")

        def apply(i):
            out = json.loads(kubectl("apply", "-o", "json", "-f", "-", input=json.dumps(
                configmap_manifest(ns, "rw-%d" % i, v=str(i)))))
            return out["metadata"]["uid"], out["metadata"]["resourceVersion"]
        read_your_writes(s, apply, table, server, "configmaps")
        idle_wait(s, table, server, "configmaps")
        # a write elsewhere (another namespace) moves the server's resourceVersion past the
        # watch's checkpoint: this idle collection is then proven current by the comparison
        other = ctx.namespace("-other")
        kubectl("apply", "-f", "-", input=json.dumps(configmap_manifest(other, "elsewhere")))
        idle_wait(s, table, server, "configmaps")
    finally:
        s.close()


def test_timeout_and_privileges(ctx):
    """A table the worker cannot write (another session holds a SHARE lock on it) does not reflect
    a new ConfigMap: wait_current() times out with 57014.  A role without USAGE on the server does
    not see the watch (42704); with USAGE it may wait."""
    ns = ctx.namespace()
    server = ctx.server()
    table = watch("configmaps", server, namespace=ns)
    wait_watching(server, "configmaps")
    locker = postgres.PG.connect(autocommit=False)
    s = Session()
    try:
        locker.cursor().execute(pgsql.SQL("LOCK TABLE {} IN SHARE MODE").format(pgsql.SQL(table)))
        kubectl("apply", "-f", "-", input=json.dumps(configmap_manifest(ns, "blocked")))
        with pytest.raises(psycopg2.Error) as e:
            s.wait_current("configmaps", server, timeout="2s")
        assert e.value.pgcode == "57014", e.value
        print("timeout:", e.value.pgerror)
    finally:
        locker.rollback()
        locker.close()
        s.close()

    role = "kw_wc_%s" % RUN_ID
    sql(pgsql.SQL("CREATE ROLE {}").format(pgsql.Identifier(role)))
    try:
        conn = postgres.PG.connect()
        cur = conn.cursor()
        cur.execute(pgsql.SQL("SET ROLE {}").format(pgsql.Identifier(role)))
        with pytest.raises(psycopg2.Error) as e:
            cur.execute("SELECT kwatch.wait_current('configmaps', %s, '10s')", (server,))
        assert e.value.pgcode == "42704", e.value
        sql(pgsql.SQL("GRANT USAGE ON FOREIGN SERVER {} TO {}").format(
            pgsql.Identifier(server), pgsql.Identifier(role)))
        sql(pgsql.SQL("CREATE USER MAPPING FOR {} SERVER {} OPTIONS (token {})").format(
            pgsql.Identifier(role), pgsql.Identifier(server), pgsql.Literal(cluster.CLUSTER.token)))
        cur.execute("SELECT kwatch.wait_current('configmaps', %s, '30s')", (server,))
        # without SELECT on the table: proven all the same (the comparison
        # reads the table as its owner and tells only equal or not); the
        # cluster's other writes move R past an idle watch's checkpoint
        assert cur.fetchone()[0].isdigit()
        sql(pgsql.SQL("GRANT USAGE ON SCHEMA k8s TO {}").format(pgsql.Identifier(role)))
        sql(pgsql.SQL("GRANT SELECT ON {} TO {}").format(pgsql.SQL(table), pgsql.Identifier(role)))
        cur.execute("SELECT kwatch.wait_current('configmaps', %s, '30s')", (server,))
        assert cur.fetchone()[0].isdigit()
        conn.close()
    finally:
        sql(pgsql.SQL("DROP OWNED BY {}").format(pgsql.Identifier(role)))
        sql(pgsql.SQL("DROP ROLE {}").format(pgsql.Identifier(role)))


# ---------------------------------------------------------------- the 1.36 server

@pytest.fixture(scope="module")
def modern():
    plane = ModernPlane(TEST_DIR / "modern-wait-current")
    plane.start()
    yield plane
    plane.stop()


def metric(text, name, **labels):
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            if all('%s="%s"' % kv in line for kv in labels.items()):
                total += float(line.rsplit(" ", 1)[1])
    return total


def test_read_your_writes_on_1_36(ctx, modern):
    group = "rw.example.com"
    modern.kubectl("apply", "-f", "-", input=json.dumps(
        crd_manifest(group, "widgets", "Widget", short_names=["wdg"])))
    wait_crd_established("widgets." + group, plane=modern)
    server = ctx.server(kubeconfig=str(modern.kubeconfig))
    table = watch("widgets." + group, server)
    ctx.tables.append(table.split(".")[-1].strip('"'))
    wait_watching(server, "widgets." + group)
    s = Session()
    try:
        before = modern.metrics()
        idle_wait(s, table, server, "widgets." + group)

        def apply(i):
            out = json.loads(modern.kubectl("apply", "-o", "json", "-f", "-", input=json.dumps({
                "apiVersion": group + "/v1", "kind": "Widget",
                "metadata": {"name": "w%d" % i, "namespace": "default"}, "spec": {"n": i}})).stdout)
            return out["metadata"]["uid"], out["metadata"]["resourceVersion"]
        read_your_writes(s, apply, table, server, "widgets." + group)
        idle_wait(s, table, server, "widgets." + group)
        # writes elsewhere move the server's resourceVersion past the watch's checkpoint: an
        # idle collection is then proven current by the comparison
        modern.kubectl("apply", "-f", "-", input=json.dumps(
            crd_manifest(group, "gadgets", "Gadget")))
        idle_wait(s, table, server, "widgets." + group)
        after = modern.metrics()
        print("1.36: consistent reads served from the watch cache during the test: %d"
              % (metric(after, "apiserver_watch_cache_consistent_read_total", success="true")
                 - metric(before, "apiserver_watch_cache_consistent_read_total", success="true")))
    finally:
        s.close()
