"""Relations in one call and a rollback (issue 49): kwatch.owner_chain(),
pods_of(), node_of(), endpoint_slices_of(), volume_of()/claim_of() and
rollout_undo() on objects the control plane's own controllers made: a
Deployment's ReplicaSets and pods (the controller-manager), EndpointSlices
of a Service, a bound claim and volume.  The plane has no scheduler or
kubelet: the test makes Nodes, binds the pods through pods/binding and
writes their status as a kubelet would.  Each relation is compared with
what the API server says."""
import json
import time

import psycopg2
import pytest

import cluster
from conftest import kubectl, kubectl_json, sql, sql_one
from k8s_api import Api

RESOURCES = ["pods", "replicasets.apps", "deployments.apps", "services",
             "endpointslices.discovery.k8s.io", "persistentvolumeclaims"]
CLUSTER_SCOPED = ["nodes", "persistentvolumes"]


def k8s_tables():
    return {r[0] for r in sql("SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                              " WHERE n.nspname = 'k8s' AND c.relkind IN ('r', 'p')")}


def until(what, check, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail("timed out waiting for %s" % what, pytrace=False)
        time.sleep(0.3)


def current(srv, *resources):
    for r in resources:
        sql("SELECT kwatch.wait_current(%s, server => %s, timeout => '30s')", (r, srv))


def names(rows):
    return sorted(r[0] for r in rows)


@pytest.fixture
def plane_objects(ctx):
    """A namespace watched whole on a fresh server; two Nodes; {'srv', 'ns', 'api', 'nodes'}."""
    srv = ctx.server()
    ns = ctx.namespace()
    before = k8s_tables()
    sql("SELECT kwatch.watch(r, server => %s, namespace => %s) FROM unnest(%s::text[]) r",
        (srv, ns, RESOURCES))
    sql("SELECT kwatch.watch(r, server => %s) FROM unnest(%s::text[]) r", (srv, CLUSTER_SCOPED))
    ctx.tables += sorted(k8s_tables() - before)
    api = Api(cluster.CLUSTER.server, cluster.CLUSTER.token, cluster.CLUSTER.ca)
    nodes = ["%s-n%d" % (ns[:50], i) for i in (1, 2)]
    for n in nodes:
        st, body = api.request("POST", "/api/v1/nodes",
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": n, "labels": {"kwatch-test": ns[:63]}}})
        assert st == 201, body
    yield {"srv": srv, "ns": ns, "api": api, "nodes": nodes}
    for n in nodes:
        api.request("DELETE", "/api/v1/nodes/" + n)
    for pv in kubectl("get", "pv", "-l", "kwatch-test=" + ns[:63], "-o", "name").split():
        kubectl("delete", pv, "--wait=false")


def run_pods(api, ns, pods, nodes):
    """Binds each pod to a node in turn (the scheduler's POST .../binding)
    and writes it Running and Ready with an IP (the kubelet's status)."""
    for i, p in enumerate(sorted(pods)):
        node = nodes[i % len(nodes)]
        st, body = api.request("POST", "/api/v1/namespaces/%s/pods/%s/binding" % (ns, p),
            {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": p},
             "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
        assert st == 201, body
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status = {"status": {
            "phase": "Running", "hostIP": "10.0.0.%d" % (i % len(nodes) + 1),
            "podIP": "10.1.0.%d" % (i + 1), "podIPs": [{"ip": "10.1.0.%d" % (i + 1)}], "startTime": now,
            "conditions": [{"type": t, "status": "True", "lastTransitionTime": now}
                           for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")]}}
        st, body = api.request("PATCH", "/api/v1/namespaces/%s/pods/%s/status" % (ns, p),
                               status, ctype="application/merge-patch+json")
        assert st == 200, body


def api_pods(ns, *args):
    return kubectl_json("get", "pods", "-n", ns, *args)["items"]


def test_relations_match_the_api_server(plane_objects):
    srv, ns, api, nodes = (plane_objects[k] for k in ("srv", "ns", "api", "nodes"))
    kubectl("create", "deployment", "web", "--image=nginx:1", "--replicas=3", "-n", ns)
    kubectl("create", "service", "clusterip", "web", "--tcp=80:80", "-n", ns)
    # a Service without a selector selects no pods (the endpoints controllers skip it)
    kubectl("create", "service", "clusterip", "bare", "--tcp=80:80", "-n", ns)
    kubectl("patch", "service", "bare", "-n", ns, "--type=json",
            "-p", '[{"op": "remove", "path": "/spec/selector"}]')
    pods = until("the ReplicaSet's pods", lambda: [p["metadata"]["name"] for p in api_pods(ns)
                                                   if len(api_pods(ns)) == 3])
    run_pods(api, ns, pods, nodes)
    until("the EndpointSlice's endpoints", lambda: any(
        len(s.get("endpoints") or []) == 3 for s in kubectl_json(
            "get", "endpointslices", "-n", ns, "-l", "kubernetes.io/service-name=web")["items"]))
    current(srv, *RESOURCES)
    current(srv, "nodes")

    live = {p["metadata"]["name"]: p for p in api_pods(ns)}
    dep = kubectl_json("get", "deployment", "web", "-n", ns)
    rs_uids = {r["metadata"]["uid"] for r in kubectl_json("get", "rs", "-n", ns)["items"]
               if any(o.get("controller") and o["uid"] == dep["metadata"]["uid"]
                      for o in r["metadata"]["ownerReferences"])}
    of_deployment = sorted(n for n, p in live.items()
                           if any(o.get("controller") and o["uid"] in rs_uids
                                  for o in p["metadata"]["ownerReferences"]))
    assert len(of_deployment) == 3
    assert names(sql("SELECT name FROM kwatch.pods_of('deployment', 'web', %s, %s)", (ns, srv))) == of_deployment
    rs_name = kubectl_json("get", "rs", "-n", ns)["items"][0]["metadata"]["name"]
    assert names(sql("SELECT name FROM kwatch.pods_of('rs', %s, %s, %s)", (rs_name, ns, srv))) == of_deployment

    # the owner chain of each pod is what its ownerReferences say, up to the Deployment
    for name, p in live.items():
        ref = next(o for o in p["metadata"]["ownerReferences"] if o.get("controller"))
        rs = kubectl_json("get", "rs", ref["name"], "-n", ns)
        rref = next(o for o in rs["metadata"]["ownerReferences"] if o.get("controller"))
        chain = sql("SELECT depth, kind, name, uid, mirrored FROM kwatch.owner_chain('pods', %s, %s, %s)",
                    (name, ns, srv))
        assert chain == [(0, "Pod", name, p["metadata"]["uid"], True),
                         (1, "ReplicaSet", ref["name"], ref["uid"], True),
                         (2, "Deployment", rref["name"], rref["uid"], True)], chain
        assert sql("SELECT (t).kind, (t).name FROM kwatch.top_owner('pod', %s, %s, %s) t",
                   (name, ns, srv)) == [("Deployment", "web")]
        # its node
        assert sql("SELECT name, uid FROM kwatch.node_of(%s, %s, %s)", (name, ns, srv)) == [
            (p["spec"]["nodeName"], kubectl_json("get", "node", p["spec"]["nodeName"])["metadata"]["uid"])]

    # a node's pods: the field selector spec.nodeName
    for n in nodes:
        want = sorted(p["metadata"]["name"] for p in api_pods(ns, "--field-selector", "spec.nodeName=" + n))
        assert want and names(sql("SELECT name FROM kwatch.pods_of('node', %s, server => %s)"
                                  " WHERE namespace = %s", (n, srv, ns))) == want

    # a Service's pods: its selector; its EndpointSlices: the service-name label
    sel = ",".join("%s=%s" % kv for kv in kubectl_json("get", "svc", "web", "-n", ns)["spec"]["selector"].items())
    assert names(sql("SELECT name FROM kwatch.pods_of('svc', 'web', %s, %s)", (ns, srv))) == sorted(
        p["metadata"]["name"] for p in api_pods(ns, "-l", sel))
    assert sql("SELECT count(*) FROM kwatch.pods_of('service', 'bare', %s, %s)", (ns, srv)) == [(0,)]
    slices = kubectl_json("get", "endpointslices", "-n", ns, "-l", "kubernetes.io/service-name=web")["items"]
    got = sql("SELECT name, object->>'apiVersion', (SELECT array_agg(a ORDER BY a) FROM"
              " jsonb_array_elements(object->'endpoints') e, jsonb_array_elements_text(e->'addresses') a)"
              " FROM kwatch.endpoint_slices_of('web', %s, %s)", (ns, srv))
    assert got == [(s["metadata"]["name"], "discovery.k8s.io/v1beta1",
                    sorted(a for e in s["endpoints"] for a in e["addresses"])) for s in slices], got
    assert sorted(got[0][2]) == sorted(live[n]["status"]["podIP"] for n in of_deployment)

    # a claim bound by the PV controller, both ways
    kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "PersistentVolume",
         "metadata": {"name": ns[:50] + "-pv", "labels": {"kwatch-test": ns[:63]}},
         "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                  "storageClassName": "", "hostPath": {"path": "/tmp/kwatch-pv"}}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": ns},
         "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                  "resources": {"requests": {"storage": "1Gi"}}}}]}))
    pvc = until("the claim bound", lambda: (lambda c: c if c.get("status", {}).get("phase") == "Bound" else None)(
        kubectl_json("get", "pvc", "data", "-n", ns)))
    current(srv, "persistentvolumeclaims")
    current(srv, "persistentvolumes")
    pv = kubectl_json("get", "pv", pvc["spec"]["volumeName"])
    assert pv["spec"]["claimRef"]["uid"] == pvc["metadata"]["uid"]
    assert sql("SELECT name, uid FROM kwatch.volume_of('data', %s, %s)", (ns, srv)) == [
        (pv["metadata"]["name"], pv["metadata"]["uid"])]
    assert sql("SELECT namespace, name, uid FROM kwatch.claim_of(%s, %s)", (pv["metadata"]["name"], srv)) == [
        (ns, "data", pvc["metadata"]["uid"])]


def test_rollout_undo_is_kubectls(plane_objects):
    srv, ns = plane_objects["srv"], plane_objects["ns"]
    kubectl("create", "deployment", "web", "--image=nginx:1", "-n", ns)
    for image in ("nginx:2", "nginx:3"):
        until("the rollout's ReplicaSet", lambda: kubectl_json("get", "deployment", "web", "-n", ns)
              .get("status", {}).get("observedGeneration") == kubectl_json(
                  "get", "deployment", "web", "-n", ns)["metadata"]["generation"])
        kubectl("set", "image", "deployment/web", "nginx=" + image, "-n", ns)
    until("three ReplicaSets", lambda: len(kubectl_json("get", "rs", "-n", ns)["items"]) == 3)
    until("revision 3", lambda: kubectl_json("get", "deployment", "web", "-n", ns)["metadata"]
          ["annotations"].get("deployment.kubernetes.io/revision") == "3")
    current(srv, "deployments.apps", "replicasets.apps")

    with pytest.raises(psycopg2.Error) as e:
        sql("SELECT kwatch.rollout_undo('web', %s, %s, to_revision => 9)", (ns, srv))
    assert e.value.pgcode == "22023", e.value.pgerror

    # a mirror row older than the Deployment: nothing written, 40001
    table = sql_one("SELECT table_name FROM kwatch.watches WHERE server = %s AND resource = 'deployments.apps'", (srv,))
    rv = kubectl_json("get", "deployment", "web", "-n", ns)["metadata"]["resourceVersion"]
    sql("UPDATE %s SET resource_version = '1', object = jsonb_set(object, '{metadata,resourceVersion}', '\"1\"')"
        " WHERE cluster = %%s AND namespace = %%s AND name = 'web'" % table, (srv, ns))
    with pytest.raises(psycopg2.Error) as e:
        sql("SELECT kwatch.rollout_undo('web', %s, %s)", (ns, srv))
    assert e.value.pgcode == "40001", e.value.pgerror
    assert kubectl_json("get", "deployment", "web", "-n", ns)["metadata"]["resourceVersion"] == rv
    sql("SELECT kwatch.relist('deployments.apps', server => %s, wait => true, timeout => '1 min')", (srv,))

    assert sql_one("SELECT kwatch.rollout_undo('web', %s, %s)", (ns, srv)) == "deployment.apps/web rolled back"
    dep = kubectl_json("get", "deployment", "web", "-n", ns)
    rs2 = next(r for r in kubectl_json("get", "rs", "-n", ns)["items"]
               if r["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2")
    want = rs2["spec"]["template"]
    del want["metadata"]["labels"]["pod-template-hash"]
    assert dep["spec"]["template"] == want
    # the field manager of the write; the controller makes revision 2 the 4th
    st, raw = plane_objects["api"].request("GET", "/apis/apps/v1/namespaces/%s/deployments/web" % ns)
    assert any(m["manager"] == "kwatch" and m["operation"] == "Update"
               and "f:template" in json.dumps(m.get("fieldsV1", {}))
               for m in raw["metadata"]["managedFields"]), raw["metadata"]
    until("revision 4", lambda: kubectl_json("get", "deployment", "web", "-n", ns)["metadata"]
          ["annotations"].get("deployment.kubernetes.io/revision") == "4")
    history = kubectl("rollout", "history", "deployment/web", "-n", ns)
    assert [l.split()[0] for l in history.splitlines()[2:] if l.strip()] == ["1", "3", "4"], history

    # the template already current: skipped, nothing written
    current(srv, "deployments.apps", "replicasets.apps")
    rv = kubectl_json("get", "deployment", "web", "-n", ns)["metadata"]["resourceVersion"]
    assert sql_one("SELECT kwatch.rollout_undo('web', %s, %s, to_revision => 4)", (ns, srv)) == (
        "deployment.apps/web skipped rollback (current template already matches revision 4)")
    assert kubectl_json("get", "deployment", "web", "-n", ns)["metadata"]["resourceVersion"] == rv
    # --to-revision=1
    assert sql_one("SELECT kwatch.rollout_undo('web', %s, %s, to_revision => 1)", (ns, srv)) == (
        "deployment.apps/web rolled back")
    assert kubectl_json("get", "deployment", "web", "-n", ns)["spec"]["template"]["spec"]["containers"][0][
        "image"] == "nginx:1"
