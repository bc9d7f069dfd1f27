"""A fleet database that acts (issue 47, item 6): two cluster instances
watch a cluster each and publish their mirror tables; a fleet instance
(kwatch preloaded, kwatch.database its database, no watch) subscribes to
both, partitioned by cluster, holds servers of its own for writes, and runs
doc/operations.md's "A fleet of instances" as written: kwatch.apply() and
kwatch.delete() there are sent by its own request sender to the cluster
they name, and wait_apply(wait_mirror => true) waits for the replicated
row.  Each instance is a PostgreSQL of its own (replicas.py); the two
"clusters" are two server names of the one test control plane."""
import re
import threading

import psycopg2
import pytest
from psycopg2 import sql as pgsql

import cluster
from cluster import configmaps_doc, kubectl, kubectl_json
from common import REPO, run
from postgres import sql, sql_one
from proxy_support import ConnectProxy
from replicas import (bindir, copy_mirror_ddl, create_server, instances, partition_by_cluster,  # noqa: F401
                      publish, subscribe, wait_subscription_ready)
from watches import watch, wait_watching

LOGICAL = "wal_level = logical"
TABLE = "k8s.configmaps"


def fleet_recipe():
    """The SQL blocks of doc/operations.md's "A fleet of instances", in order."""
    text = (REPO / "doc" / "operations.md").read_text()
    section = text[text.index("### A fleet of instances"):text.index("## Upgrading")]
    return re.findall(r"```sql\n(.*?)```", section, re.S)


def psql(pg, script):
    """`script` run by psql in `pg`'s database (each statement its own
    transaction, stopping at the first error); its rows, unaligned, one
    list of columns per row."""
    out = run(["%s/psql" % bindir(), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", pg.dir,
               "-p", pg.port, "-U", "postgres", "-d", pg.db], input=script).stdout
    return [line.split("|") for line in out.splitlines() if line]


def rows(pg, srv, ns, name):
    """[(uid, resource_version)] of cluster `srv`'s row of ConfigMap ns/name in `pg`."""
    return sql("SELECT uid, resource_version FROM k8s.configmaps WHERE cluster = %s AND namespace = %s"
               " AND name = %s", (srv, ns, name), conn=pg.conn)


def test_a_fleet_instance_reads_every_cluster_and_acts_on_each(ctx, instances):
    """The recipe as written: the fleet sees both clusters' rows; an apply
    there naming west reaches west's server (its requests through a proxy
    that counts them; east's never do), wait_apply(wait_mirror) returns
    with the replicated row at the applied resourceVersion, a delete's once
    the row is gone; a YAML manifest applied on east likewise.  While west's
    subscription is disabled the wait ends at its timeout (57014) and
    returns once it is enabled again; a resource with no table here fails
    with 42P01."""
    east_db = instances.kwatch_db("east", LOGICAL)
    west_db = instances.kwatch_db("west", LOGICAL)
    fleet = instances.kwatch_db("fleet")
    ns = ctx.namespace()
    kubectl("apply", "-f", "-", input=configmaps_doc(ns, ["a"]))
    east, west = ctx.base + "-east", ctx.base + "-west"
    for db, srv in ((east_db, east), (west_db, west)):
        create_server(db, srv)
        assert watch("configmaps", srv, conn=db.conn, namespace=ns) == TABLE
        wait_watching(srv, "configmaps", conn=db.conn)
        publish(db, "kwatch", [TABLE])
    copy_mirror_ddl(east_db, fleet)
    partition_by_cluster(fleet, "configmaps", [east, west])
    subs = {east: "kwatch_east", west: "kwatch_west"}
    for db, srv in ((east_db, east), (west_db, west)):
        subscribe(fleet, subs[srv], db, "kwatch")
    for name in subs.values():
        wait_subscription_ready(fleet, name)

    servers, act = fleet_recipe()
    kubeconfig = cluster.CLUSTER.kubeconfig
    for c, srv in (("east", east), ("west", west)):
        servers = servers.replace("SERVER %s " % c, "SERVER %s " % pgsql.Identifier(srv).as_string(fleet.conn)) \
                         .replace("/etc/kwatch/%s.kubeconfig" % c, kubeconfig)
    psql(fleet, servers)
    assert sql("SELECT count(*) FROM kwatch.registrations", conn=fleet.conn) == [(0,)]
    proxy = ConnectProxy().start()
    try:
        sql(pgsql.SQL("ALTER SERVER {} OPTIONS (ADD proxy_url {})").format(
            pgsql.Identifier(west), pgsql.Literal(proxy.url)), conn=fleet.conn)

        act = act.replace("server => 'west'", "server => '%s'" % west) \
                 .replace("cluster = 'west'", "cluster = '%s'" % west) \
                 .replace('"namespace": "shop"', '"namespace": "%s"' % ns) \
                 .replace("'shop'", "'%s'" % ns)
        out = psql(fleet, act)
        # both clusters' rows (kube-root-ca.crt and a), then the apply's
        # outcome, the row as it was when the wait returned, the delete's
        assert out[:2] == [[east, "2"], [west, "2"]], out
        assert out[2][0] == "applied" and out[3] == [out[2][1]], out
        assert out[4:] == [["applied"]], out
        assert proxy.targets, "west's apply did not go through west's server"
        assert sql_one("SELECT array_agg(DISTINCT server) FROM kwatch.applies", conn=fleet.conn) == [west]
        assert kubectl("get", "configmap", "feature-flags", "-n", ns, "--ignore-not-found",
                       "-o", "name").strip() == ""
        assert rows(fleet, west, ns, "feature-flags") == []

        # apply(text) on east: not through west's proxy
        tunnels = len(proxy.targets)
        aid = sql_one("SELECT id FROM kwatch.apply(%s, server => %s)",
                      ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\n  namespace: %s\n"
                       "data:\n  k: v\n" % ns, east), conn=fleet.conn)
        st = sql("SELECT state, object->'metadata'->>'resourceVersion' FROM"
                 " kwatch.wait_apply(%s, timeout => '1 min', wait_mirror => true)", (aid,), conn=fleet.conn)[0]
        assert st[0] == "applied", st
        assert rows(fleet, east, ns, "from-yaml")[0][1] == st[1]
        assert kubectl_json("get", "configmap", "from-yaml", "-n", ns)["data"] == {"k": "v"}
        assert len(proxy.targets) == tunnels, proxy.requests
    finally:
        proxy.stop()
    sql(pgsql.SQL("ALTER SERVER {} OPTIONS (DROP proxy_url)").format(pgsql.Identifier(west)), conn=fleet.conn)

    # the wait is for the replicated row: none arrives while west's
    # subscription is disabled, so the wait ends at its timeout...
    sql("ALTER SUBSCRIPTION kwatch_west DISABLE", conn=fleet.conn)
    aid = sql_one("SELECT id FROM kwatch.apply(%s::jsonb, server => %s)",
                  ('{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "held", "namespace": "%s"}}'
                   % ns, west), conn=fleet.conn)
    with pytest.raises(psycopg2.Error) as e:
        sql("SELECT kwatch.wait_apply(%s, timeout => '3 s', wait_mirror => true)", (aid,), conn=fleet.conn)
    assert e.value.pgcode == "57014", e.value.pgerror
    assert "replicated row" in e.value.pgerror, e.value.pgerror
    assert sql_one("SELECT state FROM kwatch.applies WHERE id = %s", (aid,), conn=fleet.conn) == "applied"
    assert rows(fleet, west, ns, "held") == []
    # ... and one running returns once it is enabled again, the row there
    done = {}

    def wait():
        c = fleet.connect()
        try:
            done["rv"] = sql_one("SELECT object->'metadata'->>'resourceVersion' FROM"
                                 " kwatch.wait_apply(%s, timeout => '1 min', wait_mirror => true)", (aid,), conn=c)
            done["row"] = rows(fleet, west, ns, "held")
        finally:
            c.close()
    t = threading.Thread(target=wait)
    t.start()
    t.join(1)
    assert t.is_alive(), done
    sql("ALTER SUBSCRIPTION kwatch_west ENABLE", conn=fleet.conn)
    t.join(60)
    assert done["row"] and done["row"][0][1] == done["rv"], done

    # nothing mirrors Secrets here: no watch, no table
    aid = sql_one("SELECT id FROM kwatch.apply(%s::jsonb, server => %s)",
                  ('{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "%s"}}' % ns,
                   east), conn=fleet.conn)
    with pytest.raises(psycopg2.Error) as e:
        sql("SELECT kwatch.wait_apply(%s, timeout => '30 s', wait_mirror => true)", (aid,), conn=fleet.conn)
    assert e.value.pgcode == "42P01", e.value.pgerror
    assert sql("SELECT state FROM kwatch.wait_apply(%s)", (aid,), conn=fleet.conn) == [("applied",)]

    # in a cluster database, a server none of its watches mirrors: the
    # table is kwatch's own (kwatch.tables), so nothing is waited for
    other = create_server(east_db, ctx.base + "-other")
    aid = sql_one("SELECT id FROM kwatch.apply(%s::jsonb, server => %s)",
                  ('{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "o", "namespace": "%s"}}' % ns,
                   other), conn=east_db.conn)
    assert sql("SELECT state FROM kwatch.wait_apply(%s, timeout => '30 s', wait_mirror => true)", (aid,),
               conn=east_db.conn) == [("applied",)]
    assert rows(east_db, other, ns, "o") == []
    for pg in (east_db, west_db, fleet):
        assert "terminated by signal" not in pg.log_since(), pg.log_path


def test_a_fleet_database_without_kwatch_preloaded_acts_only_at_once(ctx, instances):
    """A fleet database that only reads (kwatch not preloaded, as "A fleet
    database: logical replication" allows) has no request sender: an apply
    or delete at commit fails at once (55000, saying why and how to
    preload), rather than waiting in the queue for ever; at => 'now' is sent
    by the backend itself."""
    fleet = instances.plain("readonly-fleet", "shared_preload_libraries = ''")
    sql("CREATE EXTENSION kwatch", conn=fleet.conn)
    ns = ctx.namespace()
    srv = create_server(fleet, ctx.base)
    manifest = '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "now", "namespace": "%s"}}' % ns
    for q, args in (("SELECT kwatch.apply(%s::jsonb, server => %s)", (manifest, srv)),
                    ("SELECT kwatch.delete('configmaps', 'now', namespace => %s, server => %s)", (ns, srv))):
        with pytest.raises(psycopg2.Error) as e:
            sql(q, args, conn=fleet.conn)
        assert e.value.pgcode == "55000", e.value.pgerror
        assert "shared_preload_libraries" in e.value.diag.message_primary, e.value.pgerror
        assert "kwatch.database = 'postgres'" in e.value.diag.message_hint, e.value.pgerror
    assert sql("SELECT state FROM kwatch.apply(%s::jsonb, server => %s, at => 'now')", (manifest, srv),
               conn=fleet.conn) == [("applied",)]
    assert kubectl_json("get", "configmap", "now", "-n", ns)["metadata"]["name"] == "now"
    assert sql("SELECT count(*) FROM kwatch.applies", conn=fleet.conn) == [(0,)]
