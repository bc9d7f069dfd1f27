"""A CustomResourceDefinition created after the worker started, then watched;
each test runs on both control planes (conftest's `plane`: 1.20 and the
modern 1.36 generic API server)."""
import json

import psycopg2
import pytest

import cluster
import conftest
from conftest import (assert_table_matches_server, kubectl, row_uids, server_uids, sql_one,
                      wait_until, wait_watching, watch, watch_status)


def crd_manifest(group):
    """The CronTab CRD of the Kubernetes documentation, in `group`."""
    return cluster.crd_manifest(group, "crontabs", "CronTab", short_names=["ct"], schema={
        "type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "cronSpec": {"type": "string"},
                "image": {"type": "string"},
                "replicas": {"type": "integer"}}}}})


def plane_group(prefix, plane):
    """An API group of this run and plane only: a kept cluster may hold
    earlier runs' CRDs, and the two planes' runs of a test must not share a
    table by sharing a group."""
    return "%s%sv%s.example.com" % (prefix, conftest.RUN_ID, plane.version.replace(".", ""))


def crontab(group, name, spec, labels=None):
    return {"apiVersion": group + "/v1", "kind": "CronTab",
            "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def test_crd_created_after_worker_start(plane, ctx):
    ns = ctx.namespace()
    srv = ctx.server()
    # a group of this run only: a kept cluster may hold earlier runs' CRDs
    group = plane_group("new", plane)
    resource = "crontabs." + group

    # unknown before the CRD exists (and this backend has used discovery)
    with pytest.raises(psycopg2.Error) as e:
        watch(resource, srv, namespace=ns)
    assert e.value.pgcode == "42704", e.value.pgerror

    ctx.crds.append(resource)
    kubectl("apply", "-f", "-", input=json.dumps(crd_manifest(group)))
    conftest.wait_crd_established(resource)
    # the API server publishes the new group in discovery shortly after
    wait_until(lambda: kubectl("get", "--raw", "/apis/%s/v1" % group, check=False).strip(),
               30, "discovery of " + group)
    for name, spec, labels in (("every-minute", {"cronSpec": "* * * * *", "image": "a:1"}, {"k": "1"}),
                               ("hourly", {"cronSpec": "0 * * * *", "replicas": 2}, {})):
        kubectl("create", "-n", ns, "-f", "-", input=json.dumps(crontab(group, name, spec, labels)))

    taken = sql_one("SELECT to_regclass('k8s.crontabs')") is not None
    table = watch(resource, srv, namespace=ns)
    # another test's crontabs of another group may own k8s.crontabs already
    assert table == ("k8s.crontabs_" + group.replace(".", "_") if taken else "k8s.crontabs")
    st = wait_watching(srv, resource)
    assert st["resource"] == resource
    get = [resource, "-n", ns]
    assert_table_matches_server(table, srv, get)
    assert len(row_uids(table, srv)) == 2

    kubectl("create", "-n", ns, "-f", "-",
            input=json.dumps(crontab(group, "daily", {"cronSpec": "0 0 * * *"}, {"k": "3"})))
    wait_until(lambda: len(row_uids(table, srv)) == 3, 20, "the third CronTab row")
    assert_table_matches_server(table, srv, get)
    assert row_uids(table, srv) == server_uids(*get)


def test_crd_deleted_and_recreated_while_watched(plane, ctx):
    ns = ctx.namespace()
    srv = ctx.server()
    group = plane_group("del", plane)
    resource = "crontabs." + group
    get = [resource, "-n", ns]

    def create_crd():
        kubectl("apply", "-f", "-", input=json.dumps(crd_manifest(group)))
        conftest.wait_crd_established(resource)
        wait_until(lambda: kubectl("get", "--raw", "/apis/%s/v1" % group, check=False).strip(),
                   30, "discovery of " + group)

    def create_crontab(name):
        # the CR endpoint may answer 404 for a moment after discovery shows it
        wait_until(lambda: kubectl("create", "-n", ns, "-f", "-", check=False,
                                   input=json.dumps(crontab(group, name, {"cronSpec": "* * * * *"}))),
                   30, "creating CronTab " + name)

    ctx.crds.append(resource)
    create_crd()
    create_crontab("one")
    table = watch(resource, srv, namespace=ns)
    wait_watching(srv, resource)
    assert_table_matches_server(table, srv, get)

    # deleting the CRD deletes its objects: their rows go
    kubectl("delete", "crd", resource, "--timeout=60s")
    wait_until(lambda: row_uids(table, srv) == set(), 30, "the CronTab rows to go")
    # the watch reports the missing resource instead of claiming health
    wait_until(lambda: not watch_status(srv, resource)["healthy"], 30, "an unhealthy watch")

    # the CRD comes back: the watch picks up the new objects by itself
    create_crd()
    create_crontab("two")
    wait_until(lambda: len(row_uids(table, srv)) == 1, 60, "the new CronTab row")
    assert_table_matches_server(table, srv, get)
    wait_watching(srv, resource, timeout=60)


def backup_crd(group, columns):
    """A namespaced Backup CRD in `group` whose v1 has printer columns `columns`."""
    crd = cluster.crd_manifest(group, "backups", "Backup")
    crd["spec"]["versions"][0]["additionalPrinterColumns"] = columns
    return crd


PRINTER_COLUMNS = [
    {"name": "Schedule", "type": "string", "jsonPath": ".spec.schedule"},
    {"name": "Retain", "type": "integer", "jsonPath": ".spec.retain"},
    {"name": "Last Run", "type": "date", "jsonPath": ".status.lastRun"},
    {"name": "Ratio", "type": "number", "jsonPath": ".status.ratio"},
    {"name": "Paused", "type": "boolean", "jsonPath": ".spec.paused"},
    {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
]


def test_printer_columns_become_typed_columns(plane, ctx):
    """A CRD's additionalPrinterColumns (what `kubectl get` shows) become
    generated columns of the mirror table with PostgreSQL types (string,
    integer, date, number, boolean) and the values of their JSONPath; a
    filter path is left out with a NOTICE; watching again after the CRD's
    columns changed adds and replaces columns and keeps every row; a live
    table IMPORTed afterwards has the same columns and values."""
    ns = ctx.namespace()
    srv = ctx.server()
    group = plane_group("pc", plane)
    resource = "backups." + group
    ctx.crds.append(resource)
    kubectl("apply", "-f", "-", input=json.dumps(backup_crd(group, PRINTER_COLUMNS)))
    conftest.wait_crd_established(resource)
    wait_until(lambda: kubectl("get", "--raw", "/apis/%s/v1" % group, check=False).strip(),
               30, "discovery of " + group)
    objs = {"nightly": {"spec": {"schedule": "0 3 * * *", "retain": 7, "paused": False},
                        "status": {"lastRun": "2026-11-24T03:00:00Z", "ratio": 0.5}},
            "odd": {"spec": {"schedule": "@weekly", "retain": "seven", "paused": "no"},
                    "status": {"lastRun": "yesterday", "ratio": "half"}}}
    for name, body in objs.items():
        kubectl("create", "-n", ns, "-f", "-", input=json.dumps(
            {"apiVersion": group + "/v1", "kind": "Backup", "metadata": {"name": name}, **body}))

    conn = conftest.PG.connect()
    try:
        cur = conn.cursor()
        cur.execute("SELECT kwatch.watch(%s, server => %s, namespace => %s)::text", (resource, srv, ns))
        table = cur.fetchone()[0]
        assert any("Ready: JSONPath" in n and "not a simple path" in n for n in conn.notices), conn.notices
    finally:
        conn.close()
    wait_watching(srv, resource)
    assert_table_matches_server(table, srv, [resource, "-n", ns])

    def columns():
        return dict(conftest.sql("SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute"
                                 " WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped",
                                 (table,)))
    cols = columns()
    assert {k: cols.get(k) for k in ("schedule", "retain", "last_run", "ratio", "paused")} == {
        "schedule": "text", "retain": "bigint", "last_run": "timestamp with time zone",
        "ratio": "double precision", "paused": "boolean"}, cols
    assert "ready" not in cols
    rows = {r[0]: r[1:] for r in conftest.sql(
        "SELECT name, schedule, retain, last_run = '2026-11-24 03:00+00', ratio, paused FROM %s" % table)}
    assert rows == {"nightly": ("0 3 * * *", 7, True, 0.5, False),
                    "odd": ("@weekly", None, None, None, None)}, rows

    # the CRD's columns change: Retain reads another path, Owner is new
    changed = [c for c in PRINTER_COLUMNS if c["name"] not in ("Retain", "Ready")] + [
        {"name": "Retain", "type": "integer", "jsonPath": ".spec.keep"},
        {"name": "Owner", "type": "string", "jsonPath": ".metadata.labels['example.com/owner']"}]
    kubectl("apply", "-f", "-", input=json.dumps(backup_crd(group, changed)))
    kubectl("label", "backup", "nightly", "-n", ns, "example.com/owner=ops")
    kubectl("patch", "backup", "nightly", "-n", ns, "--type=merge", "-p", '{"spec": {"keep": 30}}')
    wait_until(lambda: conftest.sql_one("SELECT object->'spec'->>'keep' FROM %s WHERE name = 'nightly'"
                                        % table) == "30", 30, "the patched object")
    before = row_uids(table, srv)
    watch(resource, srv, namespace=ns)          # the same watch again: columns refreshed
    assert columns().get("owner") == "text"
    assert row_uids(table, srv) == before
    assert conftest.sql("SELECT name, retain, owner FROM %s ORDER BY name" % table) == [
        ("nightly", 30, "ops"), ("odd", None, None)]

    # a live table of the resource: the same columns, the same values
    schema = "live_pc_" + conftest.RUN_ID
    conftest.sql("CREATE SCHEMA %s" % schema)
    try:
        conftest.sql("IMPORT FOREIGN SCHEMA k8s LIMIT TO (backups) FROM SERVER %s INTO %s"
                     % (psycopg2.extensions.quote_ident(srv, conftest.PG.conn), schema))
        live = conftest.sql("SELECT name, schedule, retain, owner, paused FROM %s.backups"
                            " WHERE namespace = %%s ORDER BY name" % schema, (ns,))
        mirror = conftest.sql("SELECT name, schedule, retain, owner, paused FROM %s ORDER BY name" % table)
        assert live == mirror, (live, mirror)
    finally:
        conftest.sql("DROP SCHEMA %s CASCADE" % schema)
