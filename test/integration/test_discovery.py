"""Discovery (src/cluster/discovery.c): aggregated discovery where the server serves it (Kubernetes 1.26+;
here the 1.36 API server of modern_local.py, which has no /api and whose legacy /apis names only
apiextensions.k8s.io), the legacy documents on the 1.20 plane; the requests each path makes, counted
from kwatch's own DEBUG2 lines ("kwatch: discovery GET <path>")."""
import collections
import json
import re

import pytest
from psycopg2 import sql as pgsql

import postgres
from conftest import kubectl, crd_manifest, wait_until, wait_crd_established, sql, sql_one, TEST_DIR, RUN_ID
from live_support import import_schema, foreign_tables
from faults_support import fake, fake_server  # noqa: F401 (fixture)
from modern_local import ModernPlane


def discover(server, name):
    """kwatch._discover(server, name) on a connection of its own; returns (row, [paths requested])."""
    conn = postgres.PG.connect()
    try:
        conn.notices = collections.deque(maxlen=100000)
        cur = conn.cursor()
        cur.execute("SET client_min_messages = debug2")
        cur.execute("SELECT api_group, api_version, plural, kind, namespaced"
                    " FROM kwatch._discover(%s, %s)", (server, name))
        row = cur.fetchone()
        return row, requests(conn)
    finally:
        conn.close()


def requests(conn):
    return [m.group(1) for n in conn.notices
            for m in [re.search(r"kwatch: discovery GET (\S+): HTTP", n)] if m]


def import_counted(server, schema):
    """IMPORT FOREIGN SCHEMA k8s into `schema`; returns the paths requested."""
    conn = postgres.PG.connect()
    try:
        conn.notices = collections.deque(maxlen=100000)
        cur = conn.cursor()
        cur.execute(pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(pgsql.Identifier(schema)))
        cur.execute(pgsql.SQL("CREATE SCHEMA {}").format(pgsql.Identifier(schema)))
        cur.execute("SET client_min_messages = debug2")
        cur.execute(pgsql.SQL("IMPORT FOREIGN SCHEMA k8s FROM SERVER {} INTO {}").format(
            pgsql.Identifier(server), pgsql.Identifier(schema)))
        return requests(conn)
    finally:
        conn.close()


def test_legacy_discovery_requests(ctx):
    """1.20 has no aggregated discovery: /api answers an APIVersions, /apis an APIGroupList, and
    kwatch reads the legacy documents; a group-qualified name needs only its group's."""
    server = ctx.server()
    row, reqs = discover(server, "deployments.apps")
    assert row == ("apps", "v1", "deployments", "Deployment", True)
    assert reqs == ["/apis/apps", "/apis/apps/v1"]
    row, reqs = discover(server, "po")
    assert row == ("", "v1", "pods", "Pod", True)
    assert reqs == ["/api/v1"]
    row, reqs = discover(server, "HorizontalPodAutoscaler")
    assert row[0] == "autoscaling" and row[2] == "horizontalpodautoscalers"
    assert reqs[:2] == ["/api/v1", "/apis"] and all(r.startswith("/apis/") for r in reqs[2:])
    print("1.20, unqualified name in a late group: %d requests" % len(reqs))
    reqs = import_counted(server, "disc_legacy_" + RUN_ID)
    assert reqs[:2] == ["/api/v1", "/apis"]
    print("1.20, IMPORT FOREIGN SCHEMA: %d requests" % len(reqs))
    sql(pgsql.SQL("DROP SCHEMA {} CASCADE").format(pgsql.Identifier("disc_legacy_" + RUN_ID)))
    with pytest.raises(Exception) as e:
        discover(server, "nothings.nowhere.example.com")
    assert e.value.pgcode == "42704"


def test_group_documents_not_served(ctx, fake):
    """A server that serves no /apis/<group> (the fake API server serves /apis and the group
    versions only): a group-qualified name is sought in /apis after the 404."""
    server = fake_server(ctx, fake)
    row, reqs = discover(server, "deployments.apps")
    assert row == ("apps", "v1", "deployments", "Deployment", True)
    assert reqs == ["/apis/apps", "/apis", "/apis/apps/v1"]


@pytest.fixture(scope="module")
def modern():
    plane = ModernPlane(TEST_DIR / "modern-discovery")
    plane.start()
    yield plane
    plane.stop()


def modern_server(ctx, modern, suffix=""):
    return ctx.server(suffix, kubeconfig=str(modern.kubeconfig))


def test_aggregated_discovery_finds_custom_resources(ctx, modern):
    """On the 1.36 server a CRD is found by its group-qualified name (through /apis/<group>), its
    short name and kind (through the aggregated /apis: /api/v1 is a 404 there, not an error), and
    IMPORT FOREIGN SCHEMA reads two documents and agrees with `kubectl api-resources`."""
    group = "bars.example.com"
    modern.kubectl("apply", "-f", "-", input=json.dumps(
        crd_manifest(group, "widgets", "Widget", short_names=["wdg"])))
    wait_crd_established("widgets." + group, plane=modern)
    server = modern_server(ctx, modern)
    want = (group, "v1", "widgets", "Widget", True)

    row, reqs = discover(server, "widgets." + group)
    assert row == want
    assert reqs == ["/apis/" + group, "/apis/%s/v1" % group]
    for name in ("wdg", "widget", "Widget", "widgets"):
        row, reqs = discover(server, name)
        assert row == want, name
        assert reqs == ["/api/v1", "/apis"], name
    row, reqs = discover(server, "crd")
    assert row[:3] == ("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    with pytest.raises(Exception) as e:
        discover(server, "pods")  # no core group on this server
    assert e.value.pgcode == "42704"
    with pytest.raises(Exception) as e:
        discover(server, "gadgets." + group)
    assert e.value.pgcode == "42704"
    # a group that does not exist: its 404, then the aggregated /apis, which lacks it too
    conn = postgres.PG.connect()
    conn.notices = collections.deque(maxlen=100000)
    with pytest.raises(Exception) as e:
        cur = conn.cursor()
        cur.execute("SET client_min_messages = debug2")
        cur.execute("SELECT kwatch._discover(%s, 'widgets.nowhere.example.com')", (server,))
    assert e.value.pgcode == "42704"
    assert requests(conn) == ["/apis/nowhere.example.com", "/apis"]
    conn.close()

    schema = "disc_modern_" + RUN_ID
    reqs = import_counted(server, schema)
    assert reqs == ["/api/v1", "/apis"]
    tables = foreign_tables(schema)
    ours = set()
    for o in tables.values():
        plural, _, group = o["resource"].partition(".")
        ours.add(("%s/%s" % (group, o["api_version"]) if group else o["api_version"], plural))
    theirs = set()
    for line in modern.kubectl("api-resources", "--verbs=list", "--no-headers").stdout.splitlines():
        cols = line.split()
        # NAME [SHORTNAMES] APIVERSION NAMESPACED KIND
        theirs.add((cols[-3], cols[0]))
    print("kwatch:", sorted(ours), "kubectl:", sorted(theirs))
    assert ours == theirs
    sql(pgsql.SQL("DROP SCHEMA {} CASCADE").format(pgsql.Identifier(schema)))


def test_watch_a_custom_resource_on_the_modern_server(ctx, modern):
    """kwatch.watch('widgets.<group>') on the 1.36 server (issue 23's report): registered, and the
    object created is mirrored."""
    group = "wcr.example.com"
    modern.kubectl("apply", "-f", "-", input=json.dumps(
        crd_manifest(group, "gizmos", "Gizmo", short_names=["gz"])))
    wait_crd_established("gizmos." + group, plane=modern)
    server = modern_server(ctx, modern)
    table = sql_one("SELECT kwatch.watch('gizmos.%s', server => %%s)::text" % group, (server,))
    ctx.tables.append(table.split(".")[-1].strip('"'))
    modern.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": group + "/v1", "kind": "Gizmo",
        "metadata": {"name": "g1", "namespace": "default"}, "spec": {"size": 3}}))
    uid = modern.kubectl("get", "gizmos." + group, "-n", "default", "g1",
                         "-o", "jsonpath={.metadata.uid}").stdout
    wait_until(lambda: sql_one(pgsql.SQL("SELECT count(*) FROM {} WHERE uid = %s").format(
        pgsql.SQL(table)), (uid,)), 30, "the Gizmo in " + table)
