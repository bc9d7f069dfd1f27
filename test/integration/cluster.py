"""The test cluster (test/k8s/cluster.sh) and kubectl: the session's
Cluster (CLUSTER, set by conftest's session fixture), manifests, and the
objects and uids `kubectl get` returns."""
import json
import os
import re
import shutil
from pathlib import Path

from common import SCRIPTS, TEST_DIR, run

K8S_DIR = TEST_DIR / "k8s"
CLUSTER_SH = SCRIPTS / "k8s" / "cluster.sh"
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"

CLUSTER = None  # Cluster, set by the session fixture


class Cluster:
    def __init__(self, directory):
        self.dir = Path(directory)
        self.env = {}

    def _sh(self, command, timeout=180):
        return run(["bash", CLUSTER_SH, command, self.dir], timeout=timeout)

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

    def restart_apiserver(self):
        self._sh("restart-apiserver")

    def stop(self):
        self._sh("stop")


def kubectl(*args, input=None, check=True):
    """Runs kubectl against the test cluster; returns stdout."""
    env = dict(os.environ, KUBECONFIG=CLUSTER.kubeconfig)
    return run([KUBECTL, *args], input=input, env=env, timeout=120, check=check).stdout


def kubectl_json(*args):
    return json.loads(kubectl(*args, "-o", "json"))


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
