"""Issue 35 on real objects: the views kubectl.<table> equal the 1.20 API
server's Table cell by cell for objects recorded from real clusters, not
only for the ones test_printed.py writes.

The objects are test/fixtures/corpus-printed (copied from the shared
k8s-corpus: k8s-openapi's replays of kind clusters v1.20 and v1.14 and a
kube-apiserver 1.20 recording; SOURCES.md there says which, what was
stripped and what was left out).  Each recording is recreated in a namespace
and watched through a server of its own: its objects are created as
recorded and their recorded status is written through the status
subresource, owned objects before their owners so that the running
controllers adopt the recorded ones (a ReplicaSet its pods, a Deployment
its ReplicaSet).  Pods bound to a recorded node are bound to a Node of the
test's named after it (there is no scheduler and no kubelet).  The
controllers may change the objects afterwards (a Deployment's counts, a new
ReplicaSet and its pods for a template from 1.14): the comparison covers
whatever the Table shows, once the view has caught up.  Cells where 1.20
prints differently (test/printers/README.md, "Where 1.20 prints
differently") are treated as test_printed.py treats them: pods' RESTARTS
is compared as the integer 1.20 prints, an HPA's TARGETS through as_120.
Cluster-scoped fixtures get a test-unique name and are deleted at the end.
Every kind with a fixture file must compare more than 0 cells."""
import json
import re

import pytest
from psycopg2 import sql as pgsql

import postgres
from conftest import REPO, kubectl, sql, sql_one, wait_watching, watch
from test_printed import api_get, api_send, compare_table, patch_status

FIXTURES = REPO / "test" / "fixtures" / "corpus-printed"

# (resource, collection prefix of its Table on the 1.20 plane, namespaced), in
# creation order: what a controller adopts before that controller's owner
RESOURCES = [
    ("namespaces", "/api/v1", False), ("nodes", "/api/v1", False),
    ("persistentvolumes", "/api/v1", False), ("configmaps", "/api/v1", True),
    ("secrets", "/api/v1", True), ("serviceaccounts", "/api/v1", True),
    ("persistentvolumeclaims", "/api/v1", True), ("pods", "/api/v1", True),
    ("replicasets", "/apis/apps/v1", True), ("deployments", "/apis/apps/v1", True),
    ("daemonsets", "/apis/apps/v1", True), ("statefulsets", "/apis/apps/v1", True),
    ("jobs", "/apis/batch/v1", True), ("cronjobs", "/apis/batch/v1beta1", True),
    ("services", "/api/v1", True), ("endpoints", "/api/v1", True),
    ("ingresses", "/apis/networking.k8s.io/v1", True), ("events", "/api/v1", True),
    ("horizontalpodautoscalers", "/apis/autoscaling/v2beta2", True),
]

# 1.20 prints a Resource metric without its name ("50%/80%"), as in test_printed.py
AS_120 = {"targets": lambda t: re.sub(r"(^|, )[a-z0-9./-]+: ", r"\1", t)}


def recordings():
    """{recording: {resource: [fixture entry]}} of every corpus-printed file."""
    out = {}
    for res, _, _ in RESOURCES:
        f = FIXTURES / (res + ".json")
        if f.exists():
            for entry in json.loads(f.read_text()):
                out.setdefault(entry["recording"], {}).setdefault(res, []).append(entry)
    return out


def collection(api_version, res, ns):
    """The path of collection `res` of `api_version` (in namespace ns, if any)."""
    root = "/api/v1" if api_version == "v1" else "/apis/" + api_version
    return root + ("/namespaces/" + ns if ns else "") + "/" + res


def view_name(table):
    return table.split(".", 1)[1].strip('"')


def create(res, entry, ns, rename, node_of):
    """Creates the fixture's object (in ns, or renamed when cluster-scoped),
    then writes its recorded status through the status subresource; returns
    its name."""
    obj = json.loads(json.dumps(entry["object"]))
    meta = obj["metadata"]
    if ns:
        meta["namespace"] = ns
    else:
        meta["name"] = rename(meta["name"], 63 if res == "namespaces" else 253)
    if res == "pods" and obj["spec"].get("nodeName"):
        obj["spec"]["nodeName"] = node_of(obj["spec"]["nodeName"])
    if res == "events" and "involvedObject" in obj:
        obj["involvedObject"]["namespace"] = ns
    path = collection(obj["apiVersion"], res, ns)
    api_send("POST", path, obj)
    if entry["status"]:
        patch_status(path + "/" + meta["name"], entry["status"])
    return meta["name"]


def check_pods(view, srv, ns, entries):
    """1.20's RESTARTS is the integer the view's restarts holds (the cell the
    comparison skips); the recorded container statuses reached the view."""
    table = api_get("/api/v1/namespaces/%s/pods?includeObject=Metadata" % ns)
    sql_one("SELECT kwatch.wait_current('pods', server => %s, timeout => '60s')", (srv,))
    col = [c["name"] for c in table["columnDefinitions"]].index("Restarts")
    vid = pgsql.Identifier(view).as_string(postgres.PG.conn)
    rows = sql("SELECT uid, name, restarts, ready FROM kubectl.{} WHERE cluster = %s AND namespace = %s"
               .format(vid), (srv, ns))
    restarts = {r[0]: r[2] for r in rows}
    for row in table["rows"]:
        assert row["cells"][col] == restarts.get(row["object"]["metadata"]["uid"]), row["cells"]
    # printPod's READY: ready and running containers / spec.containers
    ready = {r[1]: r[3] for r in rows}
    for e in entries:
        statuses = e["status"].get("containerStatuses")
        if statuses:
            n = sum(1 for s in statuses if s.get("ready") and "running" in (s.get("state") or {}))
            want = "%d/%d" % (n, len(e["object"]["spec"]["containers"]))
            assert ready.get(e["object"]["metadata"]["name"]) == want, (e["source"], ready)


def _recording(ctx, ns, srv, kinds, created):
    """Creates one recording's objects in ns, watches their resources through
    srv and compares each view with the Table; returns {resource: cells}."""
    def rename(name, limit=253):
        return (ctx.base + "-" + name)[:limit].rstrip("-.")

    def node_of(recorded):
        name = rename(recorded)
        if ("nodes", name) not in created:
            api_send("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                               "metadata": {"name": name}})
            created.append(("nodes", name))
        return name

    # (the plane runs without the ServiceAccount admission plugin: pods may
    # name service accounts of the recording cluster)
    for res, _, namespaced in RESOURCES:
        for entry in kinds.get(res, ()):
            name = create(res, entry, ns if namespaced else None, rename, node_of)
            if not namespaced:
                created.append((res, name))
    tables = {}
    for res, _, namespaced in RESOURCES:
        if res in kinds:
            tables[res] = watch(res, srv, **({"namespace": ns} if namespaced else {}))
    for res in tables:
        wait_watching(srv, sql_one("SELECT resource FROM kwatch.watches WHERE server = %s "
                                   "AND resource LIKE %s ORDER BY 1 LIMIT 1", (srv, res + "%")), 60)
    cells = {}
    for res, prefix, namespaced in RESOURCES:
        if res not in tables:
            continue
        view = view_name(tables[res])
        if namespaced:
            path, where, params = ("%s/namespaces/%s/%s" % (prefix, ns, res),
                                   "cluster = %s AND namespace = %s", [srv, ns, res])
        else:
            path, where, params = "%s/%s" % (prefix, res), "cluster = %s", [srv, res]
        skip = {"restarts"} if res == "pods" else set()
        cells[res] = compare_table(view, path, where, params, skip, as_120=AS_120)
        if res == "pods":
            check_pods(view, srv, ns, kinds[res])
    return cells


def test_corpus_objects_print_as_the_api_servers_table(plane, ctx):
    """Real objects of the corpus, recreated on the 1.20 plane with their
    recorded status: kubectl.<t> equals the API server's Table cell by cell."""
    if plane.modern:
        pytest.skip("the 1.36 plane serves custom resources only; the corpus objects are built-in kinds")
    recs = recordings()
    assert recs, "no fixtures in %s" % FIXTURES
    created = []   # cluster-scoped (resource, name): the fixtures' and the pods' nodes
    total = {}
    try:
        for i, (rec, kinds) in enumerate(sorted(recs.items())):
            ns, srv = ctx.namespace("-r%d" % i), ctx.server("-r%d" % i)
            for res, n in _recording(ctx, ns, srv, kinds, created).items():
                total["%s %s" % (rec, res)] = n
    finally:
        for res, name in reversed(created):
            kubectl("delete", res, name, "--wait=false", "--ignore-not-found", check=False)
    print("cells compared per recording and kind:", total)
    assert all(n > 0 for n in total.values()), total
