"""Scale-out on PostgreSQL's own engines (issue 11, README "Scaling out"):
the mirror tables published with logical replication to a database that
runs no watch (one row set per cluster, partitioned by `cluster`), and a
hot standby that serves them read-only and, once promoted, takes the
watches over from the replicated checkpoints, even when the failover lost
the primary's last transactions.  Each test runs PostgreSQL instances of its
own (replicas.py) beside the session's."""
import os
import re

import psycopg2
import pytest
from psycopg2 import sql as pgsql

import cluster

from cluster import configmaps_doc, create_pods, kubectl, kubectl_json
from common import REPO, run, wait_until
from compare import assert_table_matches_server, row_uids
from postgres import Postgres, sql, sql_one
from proxy_support import ConnectProxy
from replicas import (all_columns, bindir, column_definitions, copy_mirror_ddl, create_server, instances,  # noqa: F401
                      partition_by_cluster, publish, replica_identities, subscribe, wait_replayed,
                      wait_subscription_ready, wait_worker)
from watches import watch, wait_watching, watch_status

LOGICAL = "wal_level = logical"
PK = "primary key (cluster, uid)"


def rv_of(kind, ns, name):
    """The server's resourceVersion of object `kind`/`name` in namespace `ns`."""
    return kubectl_json("get", kind, name, "-n", ns)["metadata"]["resourceVersion"]


def checkpoint(pg, server, resource):
    """The resume resourceVersion the worker of `pg` committed for the watch."""
    return sql_one("SELECT resource_version FROM kwatch.registrations WHERE server = %s AND resource = %s",
                   (server, resource), conn=pg.conn)


def events(pg, after=0, cluster=None):
    """kwatch.events rows of `pg` after seq `after` (of one cluster if given),
    as dicts in seq order."""
    keys = ("seq", "cluster", "type", "name", "preexisting", "final_state_unknown")
    rows = sql("SELECT seq, cluster, type, name, preexisting, final_state_unknown FROM kwatch.events"
               " WHERE seq > %s AND (%s IS NULL OR cluster = %s) ORDER BY seq",
               (after, cluster, cluster), conn=pg.conn)
    return [dict(zip(keys, r)) for r in rows]


def sqlstate(pg, query, params=None):
    """The SQLSTATE `query` fails with on `pg` (fails the test when it succeeds)."""
    with pytest.raises(psycopg2.Error) as e:
        sql(query, params, conn=pg.conn)
    return e.value.pgcode


ERRORS = r"\b(ERROR|FATAL|PANIC):"
WORKER = r"kwatch worker"


def log_lines(pg, pattern):
    """The lines of `pg`'s log that match the regular expression `pattern`."""
    return [line for line in pg.log_since().splitlines() if re.search(pattern, line)]


def assert_replica_equal(pub, sub, table, srv, get_args, timeout=30):
    """The subscriber's rows of cluster `srv` in `table` equal the server's
    objects one by one, and every column of them (the generated ones, which
    PostgreSQL 15 does not replicate but the subscriber computes) equals the
    publisher's."""
    assert_table_matches_server(table, srv, get_args, timeout=timeout, conn=pub.conn)
    assert_table_matches_server(table, srv, get_args, timeout=timeout, conn=sub.conn, secret_data=False)
    wait_until(lambda: all_columns(sub, table, srv) == all_columns(pub, table, srv), timeout,
               "every column of %s's rows in %s to equal the publisher's" % (srv, table))


def test_logical_replication_keeps_a_subscriber_equal_to_the_cluster(ctx, instances):
    """A kwatch database publishes k8s.pods and k8s.configmaps; a second
    PostgreSQL with no foreign server and no watch gets their definitions
    with pg_dump --schema-only and subscribes.  Its rows equal the cluster's
    objects one by one, with the same generated columns as the publisher's,
    after the initial copy, live creates, updates and deletes, and a relist
    whose inserts, updates and inferred deletions replicate too; every
    mirror table's replica identity is its primary key; a table a later
    watch creates joins with dump + ALTER PUBLICATION ADD TABLE + REFRESH."""
    pub = instances.kwatch_db("publisher", LOGICAL)
    sub = instances.kwatch_db("subscriber")   # no server, no watch: its worker idles
    ns = ctx.namespace()
    srv = create_server(pub, ctx.base)
    pods, cms = ["pods", "-n", ns], ["configmaps", "-n", ns]
    create_pods(ns, {"p1": {"app": "web"}, "p2": {"app": "db"}})
    kubectl("apply", "-f", "-", input=configmaps_doc(ns, ["c1", "c2", "c3"]))
    pods_t = watch("pods", srv, conn=pub.conn, namespace=ns)
    cms_t = watch("configmaps", srv, conn=pub.conn, namespace=ns)
    for res in ("pods", "configmaps"):
        wait_watching(srv, res, conn=pub.conn)
    assert replica_identities(pub) == {"k8s.configmaps": PK, "k8s.pods": PK}

    copy_mirror_ddl(pub, sub)
    for t in (pods_t, cms_t):
        assert column_definitions(sub, t) == column_definitions(pub, t)
    assert any(expr for _, _, expr in column_definitions(sub, pods_t)), "no generated column copied"
    publish(pub, "kwatch", [pods_t, cms_t])
    subscribe(sub, "kwatch", pub, "kwatch")
    wait_subscription_ready(sub, "kwatch")
    assert_replica_equal(pub, sub, pods_t, srv, pods)
    assert_replica_equal(pub, sub, cms_t, srv, cms)
    assert sql("SELECT DISTINCT phase FROM k8s.pods", conn=sub.conn) == [("Pending",)]

    # live changes: inserts, updates (a label: the generated labels column), deletes
    create_pods(ns, {"p3": {"app": "web"}})
    kubectl("create", "configmap", "c4", "-n", ns, "--from-literal=v=4")
    kubectl("label", "pod", "p1", "-n", ns, "app=api", "--overwrite")
    kubectl("patch", "configmap", "c1", "-n", ns, "-p", '{"data":{"v":"2"}}')
    kubectl("delete", "pod", "p2", "-n", ns, "--wait=false")
    kubectl("delete", "configmap", "c3", "-n", ns)
    assert_replica_equal(pub, sub, pods_t, srv, pods)
    assert_replica_equal(pub, sub, cms_t, srv, cms)
    assert sql_one("SELECT labels->>'app' FROM k8s.pods WHERE name = 'p1'", conn=sub.conn) == "api"

    # a relist: the worker stops, changes happen that no watch sees, and it
    # comes back without a checkpoint, so it LISTs and merges the list into
    # the rows (a 410 relist merges the same way)
    last = sql_one("SELECT kwatch.events_last_seq()", conn=pub.conn)
    worker = sql_one("SELECT kwatch.worker_pid()", conn=pub.conn)
    sql("SELECT pg_terminate_backend(%s)", (worker,), conn=pub.conn)
    wait_until(lambda: sql_one("SELECT kwatch.worker_pid()", conn=pub.conn) != worker, 20,
               "the worker to exit")
    kubectl("delete", "configmap", "c2", "-n", ns)
    kubectl("apply", "-f", "-", input=configmaps_doc(ns, ["c1", "c5"], v="5"))
    sql("UPDATE kwatch.registrations SET resource_version = NULL WHERE server = %s AND resource = 'configmaps'",
        (srv,), conn=pub.conn)
    wait_worker(pub)
    sql("SELECT kwatch.wait_synced('configmaps', server => %s, timeout => '60s')", (srv,), conn=pub.conn)
    relisted = {(e["type"], e["name"]): e for e in events(pub, last, srv)}
    assert relisted[("DELETED", "c2")]["final_state_unknown"] is True, relisted
    assert relisted[("ADDED", "c5")]["preexisting"] is True, relisted
    assert relisted[("MODIFIED", "c1")]["preexisting"] is True, relisted
    assert_replica_equal(pub, sub, cms_t, srv, cms)
    assert_replica_equal(pub, sub, pods_t, srv, pods)

    # a later watch creates a table: its definition first, then the publication
    kubectl("create", "service", "clusterip", "web", "-n", ns, "--tcp=80:8080")
    svc_t = watch("services", srv, conn=pub.conn, namespace=ns)
    wait_watching(srv, "services", conn=pub.conn)
    copy_mirror_ddl(pub, sub, svc_t)
    sql("ALTER PUBLICATION kwatch ADD TABLE k8s.services", conn=pub.conn)
    sql("ALTER SUBSCRIPTION kwatch REFRESH PUBLICATION", conn=sub.conn)
    wait_subscription_ready(sub, "kwatch")
    assert replica_identities(pub) == {"k8s.configmaps": PK, "k8s.pods": PK, "k8s.services": PK}
    kubectl("label", "service", "web", "-n", ns, "tier=front")
    assert_replica_equal(pub, sub, svc_t, srv, ["services", "-n", ns])
    assert sql_one("SELECT cluster_ip FROM k8s.services WHERE name = 'web'", conn=sub.conn) == \
        kubectl_json("get", "service", "web", "-n", ns)["spec"]["clusterIP"]
    # the subscriber's replication never stopped on an error
    assert log_lines(sub, ERRORS) == []


def test_fleet_database_holds_one_row_set_per_cluster_in_its_partition(ctx, instances):
    """Two kwatch databases ("east" and "west": two servers of the test
    cluster) publish k8s.configmaps to a fleet database whose k8s.configmaps
    is partitioned by LIST (cluster), one partition each.  Each cluster's
    rows arrive in its own partition and equal the server's objects through
    creates, updates and deletes; unwatching in west removes west's rows
    from the fleet database and leaves east's."""
    east_db = instances.kwatch_db("east", LOGICAL)
    west_db = instances.kwatch_db("west", LOGICAL)
    fleet = instances.kwatch_db("fleet")
    ns = ctx.namespace()
    cms = ["configmaps", "-n", ns]
    kubectl("apply", "-f", "-", input=configmaps_doc(ns, ["a", "b"]))
    east, west = create_server(east_db, ctx.base + "-east"), create_server(west_db, ctx.base + "-west")
    table = "k8s.configmaps"
    for db, srv in ((east_db, east), (west_db, west)):
        assert watch("configmaps", srv, conn=db.conn, namespace=ns) == table
        wait_watching(srv, "configmaps", conn=db.conn)
        publish(db, "kwatch", [table])

    copy_mirror_ddl(east_db, fleet)
    partition_by_cluster(fleet, "configmaps", [east, west])
    for db, srv in ((east_db, east), (west_db, west)):
        assert column_definitions(fleet, table) == column_definitions(db, table)
        subscribe(fleet, "kwatch_" + srv.rsplit("-", 1)[1], db, "kwatch")
    for name in ("kwatch_east", "kwatch_west"):
        wait_subscription_ready(fleet, name)

    def partitions():
        """{cluster: the partitions its rows are in} in the fleet database."""
        rows = sql("SELECT cluster, array_agg(DISTINCT tableoid::regclass::text) FROM k8s.configmaps"
                   " GROUP BY cluster", conn=fleet.conn)
        return {c: sorted(p) for c, p in rows}

    kubectl("create", "configmap", "c", "-n", ns, "--from-literal=v=3")
    kubectl("patch", "configmap", "a", "-n", ns, "-p", '{"data":{"v":"2"}}')
    kubectl("delete", "configmap", "b", "-n", ns)
    for db, srv in ((east_db, east), (west_db, west)):
        assert_replica_equal(db, fleet, table, srv, cms)
    assert partitions() == {east: ["k8s_part.configmaps_0"], west: ["k8s_part.configmaps_1"]}
    assert sql_one("SELECT count(*) FROM k8s_part.configmaps_default", conn=fleet.conn) == 0

    # a cluster leaves: its rows go, the other's stay
    assert sql_one("SELECT kwatch.unwatch('configmaps', server => %s)", (west,), conn=west_db.conn) is True
    wait_until(lambda: not row_uids(table, west, fleet.conn), 30, "west's rows to leave the fleet database")
    kubectl("create", "configmap", "d", "-n", ns)
    assert_replica_equal(east_db, fleet, table, east, cms)
    assert partitions() == {east: ["k8s_part.configmaps_0"]}


def test_hot_standby_serves_the_tables_and_promotion_resumes_from_the_checkpoints(ctx, instances):
    """A hot standby of a kwatch database, kwatch in its
    shared_preload_libraries (copied by pg_basebackup), starts no worker
    (BgWorkerStart_RecoveryFinished) and logs no error; it serves the mirror
    tables, equal to the cluster as the primary's changes replay, and
    kwatch.watches, which shows the replayed checkpoint with state 'no
    worker'; watch, unwatch, relist and LISTEN are refused.  The primary
    stops, changes happen in the cluster, the standby is promoted: its worker
    resumes every watch from the replicated checkpoint with a WATCH (no
    LIST, no relist), the changes made during the switch arrive, and the
    event stream continues from the replicated kwatch.event_state without a
    hole, so a client that had read every event goes on from where it was."""
    primary = instances.kwatch_db("primary")
    ns = ctx.namespace()
    srv = create_server(primary, ctx.base)
    pods, cms = ["pods", "-n", ns], ["configmaps", "-n", ns]
    create_pods(ns, {"a": {}, "b": {}})
    kubectl("apply", "-f", "-", input=configmaps_doc(ns, ["c1"]))
    pods_t = watch("pods", srv, conn=primary.conn, namespace=ns)
    cms_t = watch("configmaps", srv, conn=primary.conn, namespace=ns)
    for res in ("pods", "configmaps"):
        wait_watching(srv, res, conn=primary.conn)

    # a server whose every request goes through a proxy that counts them
    proxy = ConnectProxy().start()
    via_proxy = ctx.base + "-proxy"
    sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch OPTIONS (kubeconfig {}, proxy_url {})")
        .format(pgsql.Identifier(via_proxy), pgsql.Literal(cluster.CLUSTER.kubeconfig),
                pgsql.Literal(proxy.url)), conn=primary.conn)

    standby = instances.standby("standby", primary)
    assert sql_one("SELECT pg_is_in_recovery()", conn=standby.conn) is True
    assert sql_one("SHOW shared_preload_libraries", conn=standby.conn).startswith("kwatch")
    kubectl("label", "pod", "a", "-n", ns, "step=1")
    assert_table_matches_server(pods_t, srv, pods, conn=primary.conn)
    wait_replayed(primary, standby)
    assert_table_matches_server(pods_t, srv, pods, conn=standby.conn)
    assert_table_matches_server(cms_t, srv, cms, conn=standby.conn)

    # no worker, nothing failing: the postmaster starts it only once recovery ends
    assert log_lines(standby, WORKER + "|" + ERRORS) == []
    assert sql_one("SELECT kwatch.worker_pid()", conn=standby.conn) is None
    assert sql("SELECT pid FROM pg_stat_activity WHERE backend_type = 'kwatch worker'",
               conn=standby.conn) == []
    st = watch_status(srv, "pods", conn=standby.conn)
    assert (st["state"], st["healthy"], st["synced"], st["list_calls"]) == ("no worker", False, False, None), st
    assert st["resource_version"] == checkpoint(primary, srv, "pods"), st
    assert sql_one("SELECT kwatch.events_last_seq()", conn=standby.conn) is None
    assert sql("SELECT * FROM kwatch.events", conn=standby.conn) == []
    assert sqlstate(standby, "SELECT kwatch.watch('secrets', server => %s)", (srv,)) == "25006"
    assert sqlstate(standby, "SELECT kwatch.unwatch('pods', server => %s)", (srv,)) == "25006"
    assert sqlstate(standby, "SELECT kwatch.relist('pods', server => %s)", (srv,)) == "55000"
    assert sqlstate(standby, "LISTEN kwatch_pods") == "25006"
    assert sqlstate(standby, "SELECT kwatch.wait_current('pods', server => %s)", (srv,)) == "55000"
    assert sqlstate(standby, "SELECT kwatch.wait_synced(server => %s)", (srv,)) == "55000"
    # issue 33: the standby refuses before any request (no discovery)...
    assert sqlstate(standby, "SELECT kwatch.watch('secrets', server => %s)", (via_proxy,)) == "25006"
    assert proxy.targets == [], proxy.requests
    # ... where the primary's watch() makes them (rolled back: no watch)
    c = primary.connect(autocommit=False)
    try:
        sql("SELECT kwatch.watch('secrets', server => %s)", (via_proxy,), conn=c)
        c.rollback()
    finally:
        c.close()
    assert proxy.targets != []
    proxy.stop()

    # a fresh checkpoint, inside the API server's watch cache window; the
    # event stream's last seq, which a caught-up client has read
    kubectl("label", "pod", "a", "-n", ns, "step=2", "--overwrite")
    kubectl("patch", "configmap", "c1", "-n", ns, "-p", '{"data":{"v":"2"}}')
    for res, kind, name in (("pods", "pod", "a"), ("configmaps", "configmap", "c1")):
        rv = rv_of(kind, ns, name)
        wait_until(lambda: checkpoint(primary, srv, res) == rv, 20, "the %s checkpoint at %s" % (res, rv))
    last = sql_one("SELECT kwatch.events_last_seq()", conn=primary.conn)
    wait_replayed(primary, standby)
    assert sql_one("SELECT max(last_seq) FROM kwatch.event_state", conn=standby.conn) == last
    assert log_lines(standby, WORKER) == []

    # the switch: the primary goes, the cluster changes, the standby is promoted
    primary.stop()
    create_pods(ns, {"c": {}})
    kubectl("label", "pod", "a", "-n", ns, "step=3", "--overwrite")
    kubectl("delete", "pod", "b", "-n", ns, "--wait=false")
    kubectl("create", "configmap", "c2", "-n", ns)
    standby.promote()
    wait_worker(standby)
    assert_table_matches_server(pods_t, srv, pods, conn=standby.conn)
    assert_table_matches_server(cms_t, srv, cms, conn=standby.conn)
    for res in ("pods", "configmaps"):
        st = wait_watching(srv, res, conn=standby.conn)
        assert (st["list_calls"], st["relists"]) == (0, 0), ("resumed with a LIST", st)
        assert st["watch_calls"] >= 1, st
    assert watch_status(srv, "pods", conn=standby.conn)["added"] >= 1
    assert watch_status(srv, "pods", conn=standby.conn)["deleted"] >= 1

    # the event stream goes on after `last`: no hole, nothing numbered twice,
    # the switch's changes as watch events (not a relist's)
    after = events(standby, 0)
    assert [e["seq"] for e in after] == list(range(last + 1, last + 1 + len(after))), after
    assert sql_one("SELECT kwatch.events_oldest_seq()", conn=standby.conn) == last + 1
    got = {(e["type"], e["name"]) for e in after}
    assert {("ADDED", "c"), ("MODIFIED", "a"), ("DELETED", "b"), ("ADDED", "c2")} <= got, after
    assert not any(e["preexisting"] for e in after), after
    # and it streams on
    kubectl("label", "configmap", "c1", "-n", ns, "after=promotion")
    assert_table_matches_server(cms_t, srv, cms, conn=standby.conn)
    assert sql_one("SELECT kwatch.events_last_seq()", conn=standby.conn) > after[-1]["seq"]


def test_a_database_without_kwatch_preloaded_can_hold_mirror_tables(instances):
    """A fleet database needs kwatch's SQL functions (the generated columns
    call kwatch.k8s_timestamp, condition_true and pod_restart_count) but no
    worker: CREATE EXTENSION kwatch works without kwatch in
    shared_preload_libraries, the functions answer, and no worker runs."""
    fleet = instances.plain("unpreloaded", "shared_preload_libraries = ''")
    sql("CREATE EXTENSION kwatch", conn=fleet.conn)
    assert sql_one("SELECT kwatch.condition_true('{\"status\":{\"conditions\":[{\"type\":\"Ready\","
                   "\"status\":\"True\"}]}}', 'Ready')", conn=fleet.conn) is True
    assert sql_one("SELECT kwatch.k8s_timestamp('2024-05-01T10:00:00Z') = '2024-05-01 10:00:00+00'",
                   conn=fleet.conn) is True
    assert sql_one("SELECT kwatch.worker_pid()", conn=fleet.conn) is None
    assert sql("SELECT * FROM kwatch.watches", conn=fleet.conn) == []


def test_wait_synced_on_a_hot_standby_fails_at_once(ctx, instances):
    """kwatch.wait_synced() on a hot standby, where no worker will ever sync
    a watch, fails at once with 55000 and a hint to call it on the primary,
    instead of waiting for its timeout."""
    primary = instances.kwatch_db("primary")
    ns = ctx.namespace()
    srv = create_server(primary, ctx.base)
    watch("configmaps", srv, conn=primary.conn, namespace=ns)
    sql("SELECT kwatch.wait_synced('configmaps', server => %s, timeout => '30s')", (srv,), conn=primary.conn)
    standby = instances.standby("standby", primary)
    wait_replayed(primary, standby)
    sql("SET statement_timeout = '3s'", conn=standby.conn)
    with pytest.raises(psycopg2.Error) as e:
        sql("SELECT kwatch.wait_synced('configmaps', server => %s)", (srv,), conn=standby.conn)
    assert e.value.pgcode == "55000", (e.value.pgcode, e.value.pgerror)
    assert "primary" in (e.value.diag.message_hint or ""), e.value.pgerror


def test_failover_that_lost_the_last_transactions_converges(ctx, instances):
    """Asynchronous replication loses the primary's last transactions when
    it fails: the standby, cut off from the primary, misses changes the
    primary applied (rows, checkpoints, events), then the primary stops and
    the standby is promoted.  Its worker resumes from the older replicated
    checkpoints and the watch delivers the lost changes again, with the ones
    made during the switch: the tables equal the cluster, without a LIST."""
    primary = instances.kwatch_db("primary")
    ns = ctx.namespace()
    srv = create_server(primary, ctx.base)
    cms = ["configmaps", "-n", ns]
    kubectl("apply", "-f", "-", input=configmaps_doc(ns, ["c1", "c2"]))
    table = watch("configmaps", srv, conn=primary.conn, namespace=ns)
    wait_watching(srv, "configmaps", conn=primary.conn)
    standby = instances.standby("standby", primary)
    kubectl("label", "configmap", "c1", "-n", ns, "step=1")
    assert_table_matches_server(table, srv, cms, conn=primary.conn)
    wait_replayed(primary, standby)
    replayed = checkpoint(standby, srv, "configmaps")
    assert replayed == checkpoint(primary, srv, "configmaps")

    # the standby stops receiving WAL; the primary goes on alone
    sql("ALTER SYSTEM SET primary_conninfo = ''", conn=standby.conn)
    sql("SELECT pg_reload_conf()", conn=standby.conn)
    wait_until(lambda: not sql("SELECT 1 FROM pg_stat_wal_receiver", conn=standby.conn), 20,
               "the standby's WAL receiver to stop")
    kubectl("create", "configmap", "lost-1", "-n", ns)
    kubectl("label", "configmap", "c1", "-n", ns, "step=2", "--overwrite")
    kubectl("delete", "configmap", "c2", "-n", ns)
    assert_table_matches_server(table, srv, cms, conn=primary.conn)
    assert checkpoint(primary, srv, "configmaps") != replayed   # committed with the rows
    primary.stop()
    assert checkpoint(standby, srv, "configmaps") == replayed
    assert sql_one("SELECT count(*) FROM k8s.configmaps WHERE name = 'lost-1'", conn=standby.conn) == 0

    # the switch
    kubectl("create", "configmap", "during", "-n", ns)
    standby.promote()
    wait_worker(standby)
    assert_table_matches_server(table, srv, cms, conn=standby.conn)
    st = wait_watching(srv, "configmaps", conn=standby.conn)
    assert (st["list_calls"], st["relists"]) == (0, 0), ("resumed with a LIST", st)


def fleet_recipe():
    """The code blocks of doc/operations.md's "A fleet database: logical
    replication", in order: [(language, body), ...]."""
    text = (REPO / "doc" / "operations.md").read_text()
    section = text[text.index("### A fleet database: logical replication"):
                   text.index("### Very large fleets")]
    return re.findall(r"```(sql|sh)\n(.*?)```", section, re.S)


def test_the_fleet_recipe_as_written(ctx, instances):
    """Issue 33, item 5: doc/operations.md's fleet recipe, its blocks run as
    written (host names, the database `app` and the fleet's connection
    changed for this machine's), against two PostgreSQL clusters: a cluster
    database and a fleet with two fleet databases.  The replicator role
    and its grants are the recipe's (no superuser replicates); both fleet
    databases equal the cluster object by object; a table a later watch
    creates joins both, through the default privileges, in the order the
    recipe gives; unwatch(drop_table => true)'s deletes reach both; the
    fleet logs no error (no "permission denied", no "out of ... slots")."""
    east = instances.kwatch_db("east", LOGICAL)
    # sized as the recipe says: 2 subscriptions here; kwatch is preloaded too
    fleet = instances.plain("fleet", "max_logical_replication_workers = 6", "max_worker_processes = 16")
    fleets = []
    for name in ("fleet", "fleet2"):
        sql(pgsql.SQL("CREATE DATABASE {}").format(pgsql.Identifier(name)), conn=fleet.conn)
        fleets.append(Postgres(fleet.dir, fleet.port, db=name))
    ns = ctx.namespace()
    srv = create_server(east, ctx.base)
    create_pods(ns, {"p1": {"app": "web"}})
    kubectl("apply", "-f", "-", input=configmaps_doc(ns, ["c1", "c2"]))
    for res in ("pods", "configmaps"):
        watch(res, srv, conn=east.conn, namespace=ns)
        sql("SELECT kwatch.wait_synced(%s, server => %s, timeout => '2 min')", (res, srv), conn=east.conn)

    blocks = fleet_recipe()
    assert [lang for lang, _ in blocks] == ["sql", "sh", "sql"], blocks
    psql = "%s/psql" % bindir()
    source = "-h %s -p %s -U postgres %s" % (east.dir, east.port, east.db)
    # 1. the cluster database: role, grants, default privileges, publication
    run([psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", east.dir, "-p", east.port, "-U", "postgres",
         "-d", east.db], input=blocks[0][1])
    conninfo = "host=%s port=%s dbname=%s" % (east.dir, east.port, east.db)
    for db in fleets:
        # 2. each fleet database: the extension and the tables' definitions
        script = blocks[1][1].replace("-h east-db app", source).replace("-d fleet", "-d " + db.db)
        run(["bash", "-euo", "pipefail", "-c", script],
            env=dict(os.environ, PGHOST=str(fleet.dir), PGPORT=str(fleet.port), PGUSER="postgres",
                     PATH=bindir() + ":" + os.environ["PATH"]))
        # 3. its subscription (one cluster database here: east's line), named
        # after the fleet database as the recipe says
        sub = "\n".join(l for l in blocks[2][1].splitlines() if "west-db" not in l)
        sub = sub.replace("host=east-db dbname=app", conninfo).replace("fleet_", db.db + "_")
        run([psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", fleet.dir, "-p", fleet.port,
             "-U", "postgres", "-d", db.db], input=sub)
    try:
        for db in fleets:
            wait_subscription_ready(db, db.db + "_east")
            for table, res in (("k8s.pods", "pods"), ("k8s.configmaps", "configmaps")):
                assert_table_matches_server(table, srv, [res, "-n", ns], conn=db.conn, secret_data=False)
        # replication ran as the recipe's role, not as a superuser
        assert sql_one("SELECT count(*) FROM pg_stat_replication WHERE usename = 'replicator'",
                       conn=east.conn) == 2

        # a new watch, a new table: its definition into every fleet database
        # first, then the publication, then each subscription's refresh
        kubectl("create", "service", "clusterip", "web", "-n", ns, "--tcp=80:8080")
        watch("services", srv, conn=east.conn, namespace=ns)
        sql("SELECT kwatch.wait_synced('services', server => %s, timeout => '2 min')", (srv,), conn=east.conn)
        for db in fleets:
            copy_mirror_ddl(east, db, "k8s.services")
        sql("ALTER PUBLICATION kwatch ADD TABLE k8s.services", conn=east.conn)
        for db in fleets:
            sql(pgsql.SQL("ALTER SUBSCRIPTION {} REFRESH PUBLICATION").format(
                pgsql.Identifier(db.db + "_east")), conn=db.conn)
            wait_subscription_ready(db, db.db + "_east")
            assert_table_matches_server("k8s.services", srv, ["services", "-n", ns], conn=db.conn)

        # unwatch(drop_table => true): the rows go as deletes, which both receive
        assert sql_one("SELECT kwatch.unwatch('configmaps', server => %s, drop_table => true)", (srv,),
                       conn=east.conn)
        for db in fleets:
            wait_until(lambda: sql_one("SELECT count(*) FROM k8s.configmaps WHERE cluster = %s", (srv,),
                                       conn=db.conn) == 0, 30, "the configmaps' deletes in " + db.db)
        # and the others go on
        kubectl("label", "pod", "p1", "-n", ns, "step=after")
        for db in fleets:
            assert_table_matches_server("k8s.pods", srv, ["pods", "-n", ns], conn=db.conn)
        assert log_lines(fleet, ERRORS) == []
    finally:
        for db in fleets:
            sql(pgsql.SQL("DROP SUBSCRIPTION IF EXISTS {}").format(pgsql.Identifier(db.db + "_east")),
                conn=db.conn)
            db.close()
