"""The test clusters and kubectl: the session's 1.20 control plane
(test/k8s/cluster.sh: Cluster, CLUSTER, set by conftest's session fixture)
and its modern one (test/k8s/modern-cluster.sh: ModernCluster, MODERN, the
Kubernetes 1.36 generic API server, custom resources only), manifests, and
the objects and uids `kubectl get` returns.

CLUSTER is the plane the module-level helpers (kubectl, kubectl_json,
compare.mirror_diff, ctx.server, ...) talk to: conftest's `plane` fixture
points it at MODERN for a test parametrized over both planes."""
import json
import os
import re
import shutil
import ssl
import http.client
from pathlib import Path

from common import SCRIPTS, TEST_DIR, run, wait_until

K8S_DIR = TEST_DIR / "k8s"
CLUSTER_SH = SCRIPTS / "k8s" / "cluster.sh"
MODERN_DIR = TEST_DIR / "k8s-modern"
MODERN_SH = SCRIPTS / "k8s" / "modern-cluster.sh"
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"

CLUSTER = None  # the plane helpers talk to: the session's 1.20 Cluster, or MODERN in a `plane` test
LEGACY = None   # the session's 1.20 Cluster (CLUSTER outside `plane` tests)
MODERN = None   # ModernCluster, set by the session fixture once started
MODERN_ERROR = None  # why MODERN could not be started (tests that need it fail with it)


class Cluster:
    """The 1.20 control plane of test/k8s/cluster.sh in `directory`."""
    script = CLUSTER_SH
    version = "1.20"
    modern = False

    def __init__(self, directory):
        self.dir = Path(directory)
        self.env = {}

    def __repr__(self):
        return "<%s %s %s>" % (type(self).__name__, self.version, self.dir)

    def _sh(self, command, timeout=180, env=None):
        return run(["bash", self.script, command, self.dir], timeout=timeout,
                   env=dict(os.environ, **env) if env else None)

    def start(self):
        self._sh("start")
        for line in (self.dir / "env").read_text().splitlines():
            m = re.match(r"export (\w+)=(.*)$", line)
            if m:
                self.env[m.group(1)] = m.group(2)
        # the PostgreSQL server runs as `postgres` and must read the
        # kubeconfig and the CA (test-only cluster)
        run(["chmod", "-R", "a+rX", self.dir])

    @property
    def kubeconfig(self):
        return self.env["KUBECONFIG"]

    @property
    def server(self):
        return self.env["KWATCH_K8S_SERVER"]

    @property
    def token(self):
        return self.env["KWATCH_K8S_TOKEN"]

    @property
    def ca(self):
        return self.env["KWATCH_K8S_CA"]

    def compact(self):
        return self._sh("compact").stdout.strip()

    def restart_apiserver(self, down_s=0):
        """Kills kube-apiserver and starts it again on its port (after
        `down_s` seconds down), waiting until it is ready."""
        self._sh("restart-apiserver", timeout=180 + down_s,
                 env={"KWATCH_APISERVER_DOWN_S": str(down_s)} if down_s else None)

    def stop_etcd(self):
        self._sh("stop-etcd")

    def start_etcd(self):
        self._sh("start-etcd")

    readyz = "/readyz"  # the API server's readiness path (kubectl get --raw)

    def ready(self):
        """Whether the API server answers its readiness check with ok."""
        return self.kubectl("get", "--raw", self.readyz, check=False).strip() == "ok"

    def stop(self):
        self._sh("stop")

    def kubectl(self, *args, input=None, check=True):
        """Runs kubectl against this plane; returns stdout."""
        env = dict(os.environ, KUBECONFIG=self.kubeconfig)
        return run([KUBECTL, *args], input=input, env=env, timeout=120, check=check).stdout

    # ---- the audit log (cluster.sh: list and watch requests and some writes, Metadata level)
    @property
    def audit_log(self):
        return self.dir / "audit.log"

    def audit_size(self):
        """The audit log's size in bytes now: an offset for audit_requests(since=)."""
        try:
            return self.audit_log.stat().st_size
        except FileNotFoundError:
            return 0

    def audit_requests(self, since=0, user_agent="kwatch/", stage=None, verbs=("list", "watch")):
        """The audit events (dicts: verb, requestURI, userAgent, stage,
        responseStatus.code, user.username, ...) written after byte offset
        `since`, of clients whose User-Agent starts with `user_agent` (None:
        all), in `stage` if given ("ResponseStarted": a WATCH began;
        "ResponseComplete": a LIST or WATCH ended), of the `verbs` given.
        The log holds list and watch, and the writes of configmaps, secrets
        and namespaces (create, patch, update, delete; cluster.sh)."""
        events = []
        try:
            with open(self.audit_log, "rb") as f:
                f.seek(since)
                data = f.read()
        except FileNotFoundError:
            return events
        for line in data.decode("utf-8", "replace").splitlines():
            try:
                ev = json.loads(line)
            except ValueError:
                continue  # a line being written
            if user_agent is not None and not ev.get("userAgent", "").startswith(user_agent):
                continue
            if stage is not None and ev.get("stage") != stage:
                continue
            if ev.get("verb") not in verbs:
                continue
            events.append(ev)
        return events

    def audit_calls(self, since=0, user_agent="kwatch/"):
        """(verb, HTTP status, request URI) of each LIST and WATCH kwatch (by
        its User-Agent) sent after audit offset `since`, in order: a request
        once, at its first stage (audit_requests)."""
        seen, calls = set(), []
        for ev in self.audit_requests(since, user_agent):
            if ev.get("auditID") in seen:
                continue
            seen.add(ev.get("auditID"))
            calls.append((ev.get("verb"), ev.get("responseStatus", {}).get("code"), ev["requestURI"]))
        return calls

    def audit_uris(self, since=0, user_agent="kwatch/"):
        """The request URIs (path?query) of audit_calls, in order."""
        return [uri for _, _, uri in self.audit_calls(since, user_agent)]


class ModernCluster(Cluster):
    """The modern control plane of test/k8s/modern-cluster.sh in
    `directory`: etcd 3.5 + the Kubernetes 1.36 generic API server of
    k8s.io/apiextensions-apiserver.  Custom resources only (no /api, no
    Namespace objects: a namespaced custom resource goes into any namespace
    name), client-certificate authentication (no token), no audit log;
    /metrics (metrics(), metric()) shows streaming lists."""
    script = MODERN_SH
    version = "1.36"
    modern = True
    readyz = "/readyz?exclude=informer-sync"  # informer-sync never passes here

    @property
    def token(self):
        return None

    @property
    def client_cert(self):
        return self.env["KWATCH_K8S_CLIENT_CERT"]

    @property
    def client_key(self):
        return self.env["KWATCH_K8S_CLIENT_KEY"]

    def audit_requests(self, since=0, user_agent="kwatch/", stage=None):
        raise NotImplementedError("the modern plane has no audit log: read metrics()")

    def get(self, path, timeout=30):
        """GET `path` (with query) from the API server with the admin client
        certificate; returns (HTTP status, body bytes)."""
        tls = ssl.create_default_context(cafile=self.ca)
        tls.load_cert_chain(self.client_cert, self.client_key)
        host, port = self.server.rsplit("//", 1)[1].rsplit(":", 1)
        conn = http.client.HTTPSConnection(host, int(port), context=tls, timeout=timeout)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def metrics(self):
        """The API server's /metrics (Prometheus text format)."""
        status, body = self.get("/metrics")
        if status != 200:
            raise RuntimeError("GET /metrics: HTTP %d %s" % (status, body[:300]))
        return body.decode()

    def metric(self, name, text=None, **labels):
        """The sum of the samples of metric `name` (e.g.
        "apiserver_watch_list_duration_seconds_count") whose labels include
        `labels` (e.g. group="cert-manager.io", resource="certificates"), from
        `text` or a fresh metrics(); 0.0 when there is none."""
        total = 0.0
        for line in (text if text is not None else self.metrics()).splitlines():
            m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)", line)
            if not m or m.group(1) != name:
                continue
            have = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
            if all(have.get(k) == str(v) for k, v in labels.items()):
                total += float(m.group(4))
        return total

    def watch_list_count(self, group=None, resource=None, text=None):
        """How many streaming lists (WATCH with sendInitialEvents=true) the
        server has finished: apiserver_watch_list_duration_seconds_count,
        for `group`/`resource` if given."""
        labels = {}
        if group is not None:
            labels["group"] = group
        if resource is not None:
            labels["resource"] = resource
        return self.metric("apiserver_watch_list_duration_seconds_count", text, **labels)


def kubectl(*args, input=None, check=True):
    """Runs kubectl against the test cluster (CLUSTER: the plane of a
    `plane` test); returns stdout."""
    return CLUSTER.kubectl(*args, input=input, check=check)


def kubectl_json(*args):
    return json.loads(kubectl(*args, "-o", "json"))


def wait_crd_established(crd, timeout=60, plane=None):
    """Waits until CRD `crd` (plural.group) has condition Established=True on
    `plane` (anything with a kubectl method; default: the test cluster).
    Polls the condition itself: `kubectl wait --for condition=established`
    fails at once ("<nil> is of the type <nil>, expected []interface{}")
    when it reads the CRD before the apiextensions controller has written
    any status.conditions, which a just-created CRD on a busy machine
    shows (seen in CI)."""
    plane = plane or CLUSTER

    def established():
        out = plane.kubectl("get", "crd/" + crd, "-o",
                            'jsonpath={.status.conditions[?(@.type=="Established")].status}',
                            check=False)
        out = getattr(out, "stdout", out)   # modern_local's plane returns the process
        return out.strip() == "True"
    wait_until(established, timeout, "CRD %s Established" % crd, interval=0.2)


def configmap_manifest(ns, name, **data):
    """ConfigMap `name` in namespace `ns` with `data` (default {"v": "1"})."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
            "data": data or {"v": "1"}}


def configmaps_doc(ns, names, **data):
    """A kubectl-appliable List of ConfigMaps `names` in namespace `ns` with
    `data` (default {"v": "1"}), as JSON text."""
    return json.dumps({"apiVersion": "v1", "kind": "List",
                       "items": [configmap_manifest(ns, n, **data) for n in names]})


def crd_manifest(group, plural, kind, schema=None, short_names=None):
    """A namespaced CustomResourceDefinition <plural>.<group>, version v1,
    with `schema` (default: any object, unknown fields kept)."""
    names = {"plural": plural, "singular": kind.lower(), "kind": kind}
    if short_names:
        names["shortNames"] = short_names
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "%s.%s" % (plural, group)},
        "spec": {
            "group": group, "scope": "Namespaced", "names": names,
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                "openAPIV3Schema": schema or {"type": "object",
                                              "x-kubernetes-preserve-unknown-fields": True}}}],
        },
    }


def pod_manifest(name, labels=None, namespace=None):
    meta = {"name": name, "labels": labels or {}}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [{"name": "c", "image": "registry.invalid/pause:1"}]}}


def create_pods(namespace, pods):
    """Creates bare pods: pods is {name: labels}.  Returns {name: uid}."""
    doc = {"apiVersion": "v1", "kind": "List",
           "items": [pod_manifest(n, l, namespace) for n, l in pods.items()]}
    out = kubectl("create", "-o", "json", "-f", "-", input=json.dumps(doc))
    return {i["metadata"]["name"]: i["metadata"]["uid"] for i in json_documents(out)}


def json_documents(text):
    """The objects of kubectl's -o json output: one document, a List, or several in a row."""
    dec, pos, docs = json.JSONDecoder(), 0, []
    text = text.strip()
    while pos < len(text):
        obj, end = dec.raw_decode(text, pos)
        docs.extend(obj["items"] if obj.get("kind") == "List" else [obj])
        pos = end
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return docs


def server_uids(*kubectl_get_args):
    return {i["metadata"]["uid"] for i in kubectl_json("get", *kubectl_get_args)["items"]}


def audit_writes(cluster, since=0, user_agent="kwatch/"):
    """(verb, user, HTTP status, request URI) of each create/patch/update/
    delete of configmaps, secrets or namespaces logged after offset `since`."""
    return [(ev.get("verb"), ev.get("user", {}).get("username"),
             ev.get("responseStatus", {}).get("code"), ev["requestURI"])
            for ev in cluster.audit_requests(since, user_agent, verbs=("create", "patch", "update", "delete"))]
