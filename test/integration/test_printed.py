"""Issue 35: the views kubectl.<table> show what the API server's own Table
(`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`, what kubectl asks
for) shows, cell by cell, for the same objects.

Built-in kinds on the 1.20 plane (the 1.36 plane serves custom resources
only), custom resources with and without printer columns on both planes.
Pod statuses that need a kubelet are written through the status
subresource; a Node object with no kubelet is made NotReady and
unschedulable the same way.  Cells where 1.20's printers differ from the
current ones (test/printers/README.md, "Where 1.20 prints differently")
are compared as 1.20 prints them: the view's integer `restarts` against
1.20's integer RESTARTS.  Relative times (AGE, DURATION, LAST SEEN, LAST
SCHEDULE) are compared to kubectl's displayed precision: the Table is read
before the view, so the view's text may be a few seconds older."""
import http.client
import json
import re
import ssl
import urllib.parse

import pytest
from psycopg2 import sql as pgsql

import cluster
import conftest
import postgres
from conftest import kubectl, sql, sql_one, wait_until, wait_watching, watch

TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io"

# Table headers whose snake case is not the view's column name
HEADER_COLUMNS = {"port(s)": "ports", "volumemode": "volume_mode", "storageclass": "storageclass",
                  "volumeattributesclass": "volumeattributesclass", "minpods": "minpods",
                  "maxpods": "maxpods", "up-to-date": "up_to_date"}

# columns whose cells are relative times, compared to displayed precision
RELATIVE = {"age", "duration", "last_seen", "first_seen", "last_schedule"}


def column_name(header):
    h = header.lower()
    return HEADER_COLUMNS.get(h) or re.sub(r"[^a-z0-9]+", "_", h).strip("_")


def connection(plane):
    """An HTTPS connection to the plane's API server: the cluster CA, and the
    admin client certificate on the modern plane (which has no token)."""
    u = urllib.parse.urlsplit(plane.server)
    ctx = ssl.create_default_context(cafile=plane.ca)
    if plane.token is None:
        ctx.load_cert_chain(plane.client_cert, plane.client_key)
    return http.client.HTTPSConnection(u.hostname, u.port or 443, context=ctx, timeout=30)


def credentials(plane):
    return {"Authorization": "Bearer " + plane.token} if plane.token else {}


def api_get(path, accept=TABLE_ACCEPT, plane=None):
    """GET `path` on the plane's API server with its admin credentials; the
    decoded JSON answer."""
    plane = plane or cluster.CLUSTER
    c = connection(plane)
    try:
        c.request("GET", path, headers=dict(credentials(plane), Accept=accept))
        r = c.getresponse()
        body = r.read()
        assert r.status == 200, (path, r.status, body[:300])
        return json.loads(body)
    finally:
        c.close()


def api_send(method, path, body, ctype="application/json", plane=None):
    plane = plane or cluster.CLUSTER
    c = connection(plane)
    try:
        c.request(method, path, body=json.dumps(body), headers=dict(
            credentials(plane), Accept="application/json", **{"Content-Type": ctype}))
        r = c.getresponse()
        raw = r.read()
        assert r.status in (200, 201), (method, path, r.status, raw[:500])
        return json.loads(raw)
    finally:
        c.close()


def patch_status(path, status):
    """Merge-patches the status subresource of the object at `path`."""
    api_send("PATCH", path + "/status", {"status": status}, "application/merge-patch+json")


UNITS = {"y": 365 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1}


def seconds(text):
    """kubectl's HumanDuration text ("3m10s", "2d1h", "5y") -> (seconds, unit
    of its last part), or None for another text."""
    parts = re.findall(r"(\d+)([ydhms])", text or "")
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(int(n) * UNITS[u] for n, u in parts), UNITS[parts[-1][1]]


def cell_text(cell):
    """A Table cell as the view's text shows it (JSON null as NULL)."""
    if cell is None or isinstance(cell, str):
        return cell
    if isinstance(cell, bool):
        return "true" if cell else "false"
    return str(cell)


def cell_matches(column, table_cell, view_cell):
    # kubectl's empty cell "<none>" is NULL in the view, and NULL only
    if table_cell == "<none>":
        return view_cell is None
    if cell_text(table_cell) == view_cell:
        return True
    if column in RELATIVE and view_cell is None:
        # no time: the printers say so in words (Event "<unknown>", a Job
        # not started ""), a CRD's date column as null
        return table_cell in (None, "", "<unknown>")
    if column in RELATIVE:
        a, b = seconds(str(table_cell)), seconds(view_cell)
        # read a few seconds apart: within the coarser unit, plus 5 s
        return a is not None and b is not None and abs(a[0] - b[0]) <= max(a[1], b[1]) + 5
    return False


def view_cells(view, columns, where, params):
    """{uid: {column: text}} from kubectl.<view>: intervals as kubectl's
    duration text, timestamps as time since (translate_timestamp_since),
    NULL as NULL, numbers as digits."""
    types = dict(sql("SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
                     "WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped",
                     ("kubectl.%s" % pgsql.Identifier(view).as_string(postgres.PG.conn),)))
    exprs = []
    for c in columns:
        ident = pgsql.Identifier(c)
        if types[c] == "interval":
            exprs.append(pgsql.SQL("kwatch.human_duration({})").format(ident))
        elif types[c] == "timestamp with time zone":
            exprs.append(pgsql.SQL("CASE WHEN {0} IS NOT NULL THEN "
                                   "kwatch.translate_timestamp_since({0}, now()) END").format(ident))
        else:
            exprs.append(pgsql.SQL("{}::text").format(ident))
    q = pgsql.SQL("SELECT uid, {} FROM kubectl.{} WHERE {}").format(
        pgsql.SQL(", ").join(exprs), pgsql.Identifier(view), pgsql.SQL(where))
    return {r[0]: dict(zip(columns, r[1:])) for r in sql(q, params)}


def compare_table(view, path, where, params, skip=(), plane=None, attempts=6, as_120=None):
    """Reads the Table of collection `path`, then kwatch.<view>'s rows (after
    wait_current, so the table is at least as new as the Table), and
    compares every cell of every row; retried while a controller changes
    the objects in between.  `as_120` {column: f}: the view's text as the
    1.20 printers print it (f(text)), for the cells test/printers/README.md
    lists as printed differently.  Returns the number of cells compared."""
    last = None
    for _ in range(attempts):
        table = api_get(path + ("&" if "?" in path else "?") + "includeObject=Metadata", plane=plane)
        headers = [column_name(c["name"]) for c in table["columnDefinitions"]]
        assert "name" in headers, headers
        view_columns = set(r[0] for r in sql(
            "SELECT a.attname FROM pg_attribute a WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0",
            ("kubectl." + pgsql.Identifier(view).as_string(postgres.PG.conn),)))
        compared = [h for h in headers if h not in skip]
        missing = [h for h in compared if h not in view_columns]
        assert not missing, "view kubectl.%s lacks Table columns %s (has %s)" % (
            view, missing, sorted(view_columns))
        sql_one("SELECT kwatch.wait_current(%s, server => %s, timeout => '60s')",
                (params[-1], params[0]))
        rows = view_cells(view, compared, where, params[:-1])
        diffs, cells = [], 0
        table_uids = set()
        for row in table["rows"]:
            uid = row["object"]["metadata"]["uid"]
            table_uids.add(uid)
            mine = rows.get(uid)
            if mine is None:
                diffs.append("%s: no row in kubectl.%s" % (row["cells"][0], view))
                continue
            for h, cell in zip(headers, row["cells"]):
                if h in skip:
                    continue
                cells += 1
                if as_120 and h in as_120 and mine[h] is not None:
                    mine[h] = as_120[h](mine[h])
                if not cell_matches(h, cell, mine[h]):
                    diffs.append("%s %s: Table %r, view %r" % (row["cells"][0], h, cell, mine[h]))
        extra = set(rows) - table_uids
        if extra:
            diffs.append("rows of kubectl.%s not in the Table: %s" % (view, sorted(extra)))
        if not diffs:
            return cells
        last = diffs
    pytest.fail("kubectl.%s differs from the API server's Table:\n  %s" % (view, "\n  ".join(last)),
                pytrace=False)


def container_status(name, ready=False, restarts=0, state=None, last=None):
    s = {"name": name, "ready": ready, "restartCount": restarts, "image": "registry.invalid/x:1",
         "imageID": "", "state": state or {"waiting": {"reason": "ContainerCreating"}}}
    if last:
        s["lastState"] = last
    return s


def pods_with_statuses(ns, node):
    """Pods whose statuses (written through the subresource) cover what the
    issue names; returns their names."""
    t0 = "2024-05-01T10:00:00Z"
    term = lambda reason, code, signal=None: {"terminated": dict(  # noqa: E731
        {"exitCode": code, "startedAt": t0, "finishedAt": "2024-05-01T10:05:00Z"},
        **({"reason": reason} if reason else {}), **({"signal": signal} if signal else {}))}
    running = {"running": {"startedAt": t0}}
    two = lambda: [{"name": "a", "image": "registry.invalid/a:1"},  # noqa: E731
                   {"name": "b", "image": "registry.invalid/b:1"}]
    init2 = [{"name": "i1", "image": "registry.invalid/i:1"}, {"name": "i2", "image": "registry.invalid/i:1"}]
    cases = {
        "running": ({}, {"phase": "Running", "podIP": "10.1.0.5", "podIPs": [{"ip": "10.1.0.5"}],
                         "containerStatuses": [container_status("a", True, 0, running),
                                               container_status("b", True, 0, running)]}),
        "crashloop": ({}, {"phase": "Running", "containerStatuses": [
            container_status("a", True, 0, running),
            container_status("b", False, 7, {"waiting": {"reason": "CrashLoopBackOff"}},
                             term("Error", 1))]}),
        "imagepull": ({}, {"phase": "Pending", "containerStatuses": [
            container_status("a", False, 0, {"waiting": {"reason": "ImagePullBackOff"}}),
            container_status("b")]}),
        "creating": ({}, {"phase": "Pending", "containerStatuses": [container_status("a"),
                                                                     container_status("b")]}),
        "completed": ({}, {"phase": "Succeeded", "containerStatuses": [
            container_status("a", False, 0, term("Completed", 0)),
            container_status("b", False, 0, term("Completed", 0))]}),
        # the printer walks containers last to first: the first one's reason wins
        "error": ({}, {"phase": "Failed", "containerStatuses": [
            container_status("a", False, 0, term("Error", 1)),
            container_status("b", False, 0, term("Completed", 0))]}),
        "oomkilled": ({}, {"phase": "Running", "containerStatuses": [
            container_status("a", True, 0, running),
            container_status("b", False, 2, term("OOMKilled", 137), term("OOMKilled", 137))]}),
        "signal": ({}, {"phase": "Running", "containerStatuses": [
            container_status("a", True, 0, running),
            container_status("b", False, 1, term(None, 0, 9))]}),
        "init-waiting": ({"initContainers": init2}, {"phase": "Pending", "initContainerStatuses": [
            container_status("i1", False, 0, {"waiting": {"reason": "PodInitializing"}}),
            container_status("i2", False, 0, {"waiting": {"reason": "PodInitializing"}})],
            "containerStatuses": [container_status("a"), container_status("b")]}),
        "init-one-done": ({"initContainers": init2}, {"phase": "Pending", "initContainerStatuses": [
            container_status("i1", False, 0, term("Completed", 0)),
            container_status("i2", False, 0, {"running": {"startedAt": t0}})],
            "containerStatuses": [container_status("a"), container_status("b")]}),
        "init-crashloop": ({"initContainers": init2}, {"phase": "Pending", "initContainerStatuses": [
            container_status("i1", False, 4, {"waiting": {"reason": "CrashLoopBackOff"}}, term("Error", 2)),
            container_status("i2")],
            "containerStatuses": [container_status("a"), container_status("b")]}),
        "gates": ({"readinessGates": [{"conditionType": "example.com/ready"},
                                      {"conditionType": "example.com/other"}]},
                  {"phase": "Running", "nominatedNodeName": "elsewhere",
                   "conditions": [{"type": "example.com/ready", "status": "True"}],
                   "containerStatuses": [container_status("a", True, 0, running),
                                         container_status("b", True, 0, running)]}),
        "terminating": ({}, {"phase": "Running", "containerStatuses": [
            container_status("a", True, 0, running), container_status("b", True, 0, running)]}),
    }
    for name, (spec, status) in cases.items():
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": ns,
                             "finalizers": ["example.com/hold"] if name == "terminating" else []},
                "spec": dict({"containers": two(), "nodeName": node}, **spec)}
        api_send("POST", "/api/v1/namespaces/%s/pods" % ns, body)
        patch_status("/api/v1/namespaces/%s/pods/%s" % (ns, name), status)
    kubectl("delete", "pod", "terminating", "-n", ns, "--wait=false")
    return list(cases)


def release_finalizers(ns):
    kubectl("patch", "pod", "terminating", "-n", ns, "--type=merge", "-p",
            '{"metadata":{"finalizers":[]}}', check=False)


def test_builtin_kinds_print_as_the_api_servers_table(plane, ctx):
    """Every kind of the issue, watched into its mirror table: kubectl.<t>
    equals the 1.20 API server's Table cell by cell."""
    if plane.modern:
        pytest.skip("the 1.36 plane serves custom resources only (test_custom_resources_... covers it)")
    ns = ctx.namespace()
    srv = ctx.server()
    node = ctx.base[:40] + "-node"
    api_send("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": node, "labels": {"node-role.kubernetes.io/worker": "", "kubernetes.io/hostname": node}},
        "spec": {"unschedulable": True}})
    try:
        patch_status("/api/v1/nodes/" + node, {
            "conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                            "lastHeartbeatTime": "2024-05-01T10:00:00Z",
                            "lastTransitionTime": "2024-05-01T10:00:00Z"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.7"},
                          {"type": "ExternalIP", "address": "203.0.113.7"}],
            "nodeInfo": {"kubeletVersion": "v1.20.2", "osImage": "Debian GNU/Linux 12",
                         "kernelVersion": "6.1.0", "containerRuntimeVersion": "containerd://1.6.20",
                         "machineID": "", "systemUUID": "", "bootID": "", "kubeProxyVersion": "",
                         "operatingSystem": "linux", "architecture": "amd64"}})
        _builtin_kinds(ns, srv, node)
    finally:
        release_finalizers(ns)
        kubectl("delete", "node", node, "--wait=false", "--ignore-not-found", check=False)


def _builtin_kinds(ns, srv, node):
    pods_with_statuses(ns, node)
    docs = [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {
            "replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                {"name": "web", "image": "registry.invalid/web:1"},
                {"name": "log", "image": "registry.invalid/log:1"}]}}}},
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"}, "spec": {
            "replicas": 1, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [
                {"name": "db", "image": "registry.invalid/db:1"}]}}}},
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"}, "spec": {
            "selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["agent"]}]},
            "template": {"metadata": {"labels": {"app": "agent"}}, "spec": {
                "nodeSelector": {"kubernetes.io/os": "linux"},
                "containers": [{"name": "agent", "image": "registry.invalid/agent:1"}]}}}},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once"}, "spec": {
            "completions": 3, "parallelism": 1, "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "once", "image": "registry.invalid/once:1"}]}}}},
        {"apiVersion": "batch/v1beta1", "kind": "CronJob", "metadata": {"name": "nightly"}, "spec": {
            "schedule": "0 3 * * *", "suspend": True, "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "n", "image": "registry.invalid/n:1"}]}}}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {
            "selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP", "name": "http"},
                                                  {"port": 53, "protocol": "UDP", "name": "dns"}]}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "np"}, "spec": {
            "type": "NodePort", "selector": {"app": "web"}, "ports": [{"port": 443, "nodePort": 31443}]}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "lb"}, "spec": {
            "type": "LoadBalancer", "externalIPs": ["198.51.100.9"], "ports": [{"port": 8443}]}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "ext"}, "spec": {
            "type": "ExternalName", "externalName": "db.example.com"}},
        {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "manual"}, "subsets": [
            {"addresses": [{"ip": "10.1.2.3"}, {"ip": "10.1.2.4"}], "ports": [{"port": 5432}]}]},
        {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "web"}, "spec": {
            "ingressClassName": "nginx", "tls": [{"hosts": ["a.example.com"]}], "rules": [
                {"host": "a.example.com", "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": {
                    "service": {"name": "web", "port": {"number": 80}}}}]}},
                {"host": "b.example.com"}]}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "1", "b": "2"}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "type": "Opaque",
         "stringData": {"user": "u", "password": "p"}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"}, "spec": {
            "accessModes": ["ReadWriteOnce", "ReadOnlyMany"], "storageClassName": "manual",
            "resources": {"requests": {"storage": "1Gi"}}}},
        {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "web.1"},
         "involvedObject": {"kind": "Pod", "namespace": ns, "name": "crashloop",
                            "fieldPath": "spec.containers{b}"},
         "reason": "BackOff", "message": "Back-off restarting failed container", "type": "Warning",
         "source": {"component": "kubelet", "host": node}, "count": 12,
         "firstTimestamp": "2024-05-01T10:00:00Z", "lastTimestamp": "2024-05-01T10:30:00Z"},
        {"apiVersion": "autoscaling/v2beta2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
         "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                  "minReplicas": 2, "maxReplicas": 5, "metrics": [{"type": "Resource", "resource": {
                      "name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}}}]}},
    ]
    pv = {"apiVersion": "v1", "kind": "PersistentVolume",
          "metadata": {"name": ns[:50] + "-pv"}, "spec": {
              "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
              "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "manual",
              "hostPath": {"path": "/tmp/kwatch-pv"},
              "claimRef": {"namespace": ns, "name": "data"}}}
    kubectl("apply", "-n", ns, "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                             "items": docs}))
    kubectl("apply", "-f", "-", input=json.dumps(pv))
    try:
        patch_status("/api/v1/namespaces/%s/services/lb" % ns,
                     {"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}, {"hostname": "lb.example.com"}]}})
        patch_status("/apis/networking.k8s.io/v1/namespaces/%s/ingresses/web" % ns,
                     {"loadBalancer": {"ingress": [{"ip": "192.0.2.20"}]}})

        namespaced = [("pods", "/api/v1"), ("deployments", "/apis/apps/v1"),
                      ("replicasets", "/apis/apps/v1"), ("statefulsets", "/apis/apps/v1"),
                      ("daemonsets", "/apis/apps/v1"), ("jobs", "/apis/batch/v1"),
                      ("cronjobs", "/apis/batch/v1beta1"), ("services", "/api/v1"),
                      ("endpoints", "/api/v1"), ("ingresses", "/apis/networking.k8s.io/v1"),
                      ("configmaps", "/api/v1"), ("secrets", "/api/v1"), ("serviceaccounts", "/api/v1"),
                      ("persistentvolumeclaims", "/api/v1"), ("events", "/api/v1"),
                      ("horizontalpodautoscalers", "/apis/autoscaling/v2beta2")]
        cluster_scoped = [("nodes", "/api/v1"), ("namespaces", "/api/v1"),
                          ("persistentvolumes", "/api/v1")]
        tables = {}
        for res, _ in namespaced:
            tables[res] = watch(res, srv, namespace=ns)
        for res, _ in cluster_scoped:
            tables[res] = watch(res, srv)
        for res in tables:
            wait_watching(srv, sql_one("SELECT resource FROM kwatch.watches WHERE server = %s "
                                       "AND resource LIKE %s ORDER BY 1 LIMIT 1", (srv, res + "%")), 60)
        total = {}
        for res, prefix in namespaced:
            view = tables[res].split(".", 1)[1].strip('"')
            skip = {"restarts"} if res == "pods" else set()
            # 1.20 prints a Resource metric without its name ("50%/80%")
            as_120 = {"targets": lambda t: re.sub(r"(^|, )[a-z0-9./-]+: ", r"\1", t)}
            total[res] = compare_table(view, "%s/namespaces/%s/%s" % (prefix, ns, res),
                                       "cluster = %s AND namespace = %s", [srv, ns, res], skip,
                                       as_120=as_120)
            if res == "pods":
                # 1.20's RESTARTS is the integer the view's restarts holds
                table = api_get("/api/v1/namespaces/%s/pods?includeObject=Metadata" % ns)
                col = [c["name"] for c in table["columnDefinitions"]].index("Restarts")
                mine = dict(sql("SELECT uid, restarts FROM kubectl.{} WHERE cluster = %s".format(
                    pgsql.Identifier(view).as_string(postgres.PG.conn)), (srv,)))
                for row in table["rows"]:
                    assert row["cells"][col] == mine[row["object"]["metadata"]["uid"]], row["cells"]
        for res, prefix in cluster_scoped:
            view = tables[res].split(".", 1)[1].strip('"')
            total[res] = compare_table(view, "%s/%s" % (prefix, res), "cluster = %s", [srv, res])
        # the statuses the issue names reached the view
        statuses = dict(sql("SELECT name, status FROM kubectl.{} WHERE cluster = %s AND namespace = %s"
                            .format(pgsql.Identifier(tables["pods"].split(".", 1)[1].strip('"'))
                                    .as_string(postgres.PG.conn)), (srv, ns)))
        for name, status in [("crashloop", "CrashLoopBackOff"), ("imagepull", "ImagePullBackOff"),
                             ("creating", "ContainerCreating"), ("completed", "Completed"),
                             ("error", "Error"), ("oomkilled", "OOMKilled"), ("signal", "Signal:9"),
                             ("init-waiting", "Init:0/2"), ("init-one-done", "Init:1/2"),
                             ("init-crashloop", "Init:CrashLoopBackOff"), ("terminating", "Terminating")]:
            assert statuses[name] == status, (name, statuses[name])
        node_status = sql_one("SELECT status FROM kubectl.nodes WHERE cluster = %s AND name = %s",
                              (srv, node))
        assert node_status == "NotReady,SchedulingDisabled"
        print("cells compared per kind:", total)
        assert all(n > 0 for n in total.values()), total
    finally:
        kubectl("delete", "pv", pv["metadata"]["name"], "--wait=false", "--ignore-not-found", check=False)


PRINTER_COLUMNS = [
    {"name": "Schedule", "type": "string", "jsonPath": ".spec.schedule"},
    {"name": "Retain", "type": "integer", "jsonPath": ".spec.retain"},
    {"name": "Ratio", "type": "number", "jsonPath": ".status.ratio"},
    {"name": "Paused", "type": "boolean", "jsonPath": ".spec.paused", "priority": 1},
    {"name": "Last Run", "type": "date", "jsonPath": ".status.lastRun"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def test_custom_resources_print_as_the_api_servers_table(plane, ctx):
    """A CRD's view shows its printer columns as the Table does (NAME first,
    then the columns, dates as relative times); a CRD that declares none
    shows NAME and AGE, the columns the API server serves for it."""
    ns = ctx.namespace()
    srv = ctx.server()
    group = "pr%sv%s.example.com" % (conftest.RUN_ID, plane.version.replace(".", ""))
    with_cols = cluster.crd_manifest(group, "backups", "Backup")
    with_cols["spec"]["versions"][0]["additionalPrinterColumns"] = PRINTER_COLUMNS
    without = cluster.crd_manifest(group, "gadgets", "Gadget")
    for crd in (with_cols, without):
        ctx.crds.append(crd["metadata"]["name"])
        kubectl("apply", "-f", "-", input=json.dumps(crd))
        conftest.wait_crd_established(crd["metadata"]["name"])
    wait_until(lambda: kubectl("get", "--raw", "/apis/%s/v1" % group, check=False).strip(),
               30, "discovery of " + group)
    items = [{"apiVersion": group + "/v1", "kind": "Backup", "metadata": {"name": "nightly"},
              "spec": {"schedule": "0 3 * * *", "retain": 7, "paused": False},
              "status": {"lastRun": "2026-11-24T03:00:00Z", "ratio": 0.5}},
             {"apiVersion": group + "/v1", "kind": "Backup", "metadata": {"name": "bare"}, "spec": {}},
             {"apiVersion": group + "/v1", "kind": "Gadget", "metadata": {"name": "g1"}, "spec": {"a": 1}}]
    for item in items:
        kubectl("create", "-n", ns, "-f", "-", input=json.dumps(item))
    cells = {}
    for plural in ("backups", "gadgets"):
        resource = "%s.%s" % (plural, group)
        table = watch(resource, srv, namespace=ns)
        wait_watching(srv, resource, 60)
        view = table.split(".", 1)[1].strip('"')
        cells[plural] = compare_table(view, "/apis/%s/v1/namespaces/%s/%s" % (group, ns, plural),
                                      "cluster = %s AND namespace = %s", [srv, ns, resource])
    assert cells["backups"] == 2 * (1 + len(PRINTER_COLUMNS)), cells
    assert cells["gadgets"] == 2, cells   # NAME and AGE, the API server's default column
    gadget_columns = [r[0] for r in sql("SELECT attname FROM pg_attribute WHERE attrelid = "
                                        "to_regclass(%s) AND attnum > 0 ORDER BY attnum",
                                        ("kubectl." + table.split(".", 1)[1],))]
    assert gadget_columns == ["cluster", "namespace", "name", "age", "created_at", "uid"]


def test_view_follows_its_table_is_indexable_and_checks_the_caller(plane, ctx):
    """kubectl.<t> is made by watch(), belongs to a superuser (no role can
    redefine what others run through it), lets an expression index on a
    printer function serve its WHERE, shows rows only to a role the table's
    owner granted it to (security_invoker: SELECT on the table too), keeps
    the owner from changing the type of a column it shows, blocks a plain
    DROP TABLE and goes with unwatch(drop_table => true)."""
    if plane.modern:
        pytest.skip("pods: the 1.20 plane")
    ns = ctx.namespace()
    srv = ctx.server()
    t = ("pr_%s" % conftest.RUN_ID)
    for name in ("a", "b"):
        kubectl("create", "-n", ns, "-f", "-", input=json.dumps(cluster.pod_manifest(name)))
    patch_status("/api/v1/namespaces/%s/pods/a" % ns, {"phase": "Running", "containerStatuses": [
        container_status("c", False, 3, {"waiting": {"reason": "CrashLoopBackOff"}})]})
    watch("pods", srv, namespace=ns, table_name=t)
    wait_watching(srv, "pods", 60)
    sql_one("SELECT kwatch.wait_current('pods', server => %s, timeout => '60s')", (srv,))
    tid = pgsql.Identifier(t)
    assert sql(pgsql.SQL("SELECT name, ready, status, restarts FROM kubectl.{} ORDER BY name")
               .format(tid)) == [("a", "0/1", "CrashLoopBackOff", 3), ("b", "0/1", "Pending", 0)]
    # kubectl's "<none>" is NULL (no node: not scheduled); AGE is kubectl's
    # text beside the time it is computed from
    rows = sql(pgsql.SQL("SELECT v.age, v.created_at = k.created_at, pg_typeof(v.age)::text FROM kubectl.{} v "
                         "JOIN k8s.{} k USING (uid) WHERE v.node IS NULL AND v.ip IS NULL").format(tid, tid))
    assert len(rows) == 2 and all(re.fullmatch(r"\d+(s|m\d*s?)", r[0]) and r[1] and r[2] == "text"
                                  for r in rows), rows
    assert sql_one("SELECT a.rolsuper FROM pg_class c, pg_roles a WHERE c.oid = %s::regclass "
                   "AND a.oid = c.relowner", ("kubectl." + t,))
    sql(pgsql.SQL("CREATE INDEX ON k8s.{} (kwatch.pod_status(object))").format(tid))
    conn = conftest.PG.connect(autocommit=False)   # rolled back: the role too
    try:
        cur = conn.cursor()
        cur.execute("SET LOCAL enable_seqscan = off")
        cur.execute(pgsql.SQL("EXPLAIN SELECT name FROM kubectl.{} WHERE status = 'CrashLoopBackOff'")
                    .format(tid))
        plan = "\n".join(r[0] for r in cur.fetchall())
        assert "pod_status" in plan and "Index" in plan, plan
        # the table's owner grants the view: a role granted only the view
        # reads nothing (security_invoker), granted both it reads the rows
        role = ("pr_reader_%s" % conftest.RUN_ID)
        cur.execute(pgsql.SQL("CREATE ROLE {}").format(pgsql.Identifier(role)))
        cur.execute(pgsql.SQL("SELECT has_table_privilege(c.relowner, %s, 'SELECT WITH GRANT OPTION') "
                              "FROM pg_class c WHERE c.oid = %s::regclass"), ("kubectl." + t, "k8s." + t))
        assert cur.fetchone()[0]
        cur.execute(pgsql.SQL("SELECT has_table_privilege('public', %s, 'SELECT')"), ("kubectl." + t,))
        assert cur.fetchone()[0] is False
        cur.execute(pgsql.SQL("GRANT SELECT ON kubectl.{} TO {}").format(tid, pgsql.Identifier(role)))
        cur.execute("SAVEPOINT s")
        cur.execute(pgsql.SQL("SET ROLE {}").format(pgsql.Identifier(role)))
        with pytest.raises(Exception) as e:
            cur.execute(pgsql.SQL("SELECT count(*) FROM kubectl.{}").format(tid))
        assert getattr(e.value, "pgcode", None) == "42501", e.value
        cur.execute("ROLLBACK TO SAVEPOINT s")
        cur.execute(pgsql.SQL("GRANT SELECT ON k8s.{} TO {}").format(tid, pgsql.Identifier(role)))
        cur.execute(pgsql.SQL("SET ROLE {}").format(pgsql.Identifier(role)))
        cur.execute(pgsql.SQL("SELECT count(*) FROM kubectl.{}").format(tid))
        assert cur.fetchone()[0] == 2
        conn.rollback()
    finally:
        conn.close()
    # the owner may not change what the view reads (an assignment cast of
    # its own would run as the reader)
    with pytest.raises(Exception) as e:
        sql(pgsql.SQL("ALTER TABLE k8s.{} ALTER COLUMN created_at DROP EXPRESSION, "
                      "ALTER COLUMN created_at TYPE text").format(tid))
    assert getattr(e.value, "pgcode", None) == "0A000", e.value
    with pytest.raises(Exception) as e:
        sql(pgsql.SQL("DROP TABLE k8s.{}").format(tid))
    assert getattr(e.value, "pgcode", None) == "2BP01", e.value
    # any role may build a (temporary) view on kubectl.<t>: it must not keep
    # the owner's unwatch(drop_table => true) from dropping the table
    pin = conftest.PG.connect()
    try:
        role = ("pr_pin_%s" % conftest.RUN_ID)
        pc = pin.cursor()
        pc.execute(pgsql.SQL("CREATE ROLE {}").format(pgsql.Identifier(role)))
        pc.execute(pgsql.SQL("SET ROLE {}").format(pgsql.Identifier(role)))
        pc.execute(pgsql.SQL("CREATE TEMP VIEW pin AS SELECT name FROM kubectl.{}").format(tid))
        assert sql_one("SELECT kwatch.unwatch(%s, server => %s, drop_table => true)", (t, srv))
        pc.execute("RESET ROLE")
        pc.execute("SELECT to_regclass('pg_temp.pin') IS NULL")
        assert pc.fetchone()[0]
        pc.execute(pgsql.SQL("DROP ROLE {}").format(pgsql.Identifier(role)))
    finally:
        pin.close()
    assert sql_one("SELECT to_regclass(%s) IS NULL AND to_regclass(%s) IS NULL",
                   ("kubectl." + t, "k8s." + t))
