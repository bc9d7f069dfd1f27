"""Custom resources that both control planes serve, for tests parametrized
over them (conftest's `plane`) and the modern (1.36) plane's own tests:
cert-manager's Certificate (test/fixtures/certificates-crd.json, its
objects certificates.json), created with kubectl; the checkpoint; the
kwatch.events rows of a cluster."""
import copy
import json
import random

from cluster import json_documents, kubectl, kubectl_json, wait_crd_established
from common import REPO, wait_until
from postgres import sql, sql_one

FIXTURES = REPO / "test" / "fixtures"
CERT_CRD = json.loads((FIXTURES / "certificates-crd.json").read_text())
CERT_SAMPLES = json.loads((FIXTURES / "certificates.json").read_text())
CERTS = "certificates.cert-manager.io"   # the resource as kwatch.watch() takes it
CERT_GROUP = "cert-manager.io"
EVENT_COLUMNS = ("seq", "type", "namespace", "name", "uid", "resource_version")


def ensure_certificate_crd():
    """Creates (or keeps) the Certificate CRD on the current plane and waits
    until it is established and its group is in discovery.  Shared by the
    tests (never deleted: each test works in namespaces of its own)."""
    kubectl("apply", "-f", "-", input=json.dumps(CERT_CRD))
    wait_crd_established(CERTS)
    wait_until(lambda: kubectl("get", "--raw", "/apis/%s/v1" % CERT_GROUP, check=False).strip(),
               30, "discovery of " + CERT_GROUP)


def certificate(name, i=0, labels=None, **spec):
    """A Certificate named `name`: the i-th sample of certificates.json
    (cycled) with `labels` added and spec fields `spec` set."""
    c = copy.deepcopy(CERT_SAMPLES[i % len(CERT_SAMPLES)])
    c["metadata"]["name"] = name
    c["metadata"].setdefault("labels", {}).update(labels or {})
    c["spec"].update(spec)
    return c


def certificates_doc(objs):
    """kubectl input of several objects: JSON documents one after another
    (a v1 List needs /api, which the modern plane does not serve)."""
    return "\n".join(json.dumps(o) for o in objs)


def create_certificates(ns, certs):
    """Creates Certificates in `ns`: certs is {name: labels} or a list of
    objects; returns {name: (uid, resourceVersion)}.  Retried while the CR
    endpoint still answers 404/429 right after the CRD or a restart."""
    objs = certs if isinstance(certs, list) else [
        certificate(n, i, labels) for i, (n, labels) in enumerate(certs.items())]
    out = wait_until(lambda: kubectl("create", "-n", ns, "-o", "json", "-f", "-", check=False,
                                     input=certificates_doc(objs)), 30, "creating Certificates")
    return {o["metadata"]["name"]: (o["metadata"]["uid"], o["metadata"]["resourceVersion"])
            for o in json_documents(out)}


def change_certificate(ns, name, **spec):
    """Merge-patches spec fields of Certificate `name`; returns its new resourceVersion."""
    out = kubectl("patch", CERTS, name, "-n", ns, "--type=merge", "-o", "json",
                  "-p", json.dumps({"spec": spec}))
    return json.loads(out)["metadata"]["resourceVersion"]


def set_ready(ns, name, status="True", message="Certificate is up to date and has not expired"):
    """Writes status.conditions Ready=`status` through the status subresource
    (as cert-manager's controller does); returns the new resourceVersion."""
    out = kubectl("patch", CERTS, name, "-n", ns, "--subresource=status", "--type=merge", "-o", "json",
                  "-p", json.dumps({"status": {"conditions": [{
                      "type": "Ready", "status": status, "reason": "Ready", "message": message,
                      "lastTransitionTime": "2026-11-26T08:00:00Z"}],
                      "notAfter": "2027-02-24T08:00:00Z", "revision": 1}}))
    return json.loads(out)["metadata"]["resourceVersion"]


def certificates_get(ns=None, selector=None):
    """`kubectl get` arguments for the Certificates of `ns` (None: all namespaces)."""
    args = [CERTS] + (["-n", ns] if ns else ["-A"])
    return args + (["-l", selector] if selector else [])


def server_certificates(ns):
    """{name: (uid, resourceVersion)} of the Certificates in `ns` on the server."""
    return {i["metadata"]["name"]: (i["metadata"]["uid"], i["metadata"]["resourceVersion"])
            for i in kubectl_json("get", *certificates_get(ns))["items"]}


def checkpoint(server, resource=CERTS):
    """The registration's resourceVersion checkpoint (text) or None."""
    return sql_one("SELECT resource_version FROM kwatch.registrations"
                   " WHERE server = %s AND resource = %s", (server, resource))


def last_seq():
    return sql_one("SELECT coalesce(max(seq), 0) FROM kwatch.events")


def events_of(cluster, after_seq=0):
    """kwatch.events rows of `cluster` after `after_seq` as dicts, in order."""
    rows = sql("SELECT " + ", ".join(EVENT_COLUMNS) + " FROM kwatch.events"
               " WHERE cluster = %s AND seq > %s ORDER BY seq", (cluster, after_seq))
    return [dict(zip(EVENT_COLUMNS, r)) for r in rows]


class CertificateWorkload:
    """Seeded random changes of Certificates over namespaces: creates,
    spec changes, label changes (in and out of label selector sel=yes),
    status writes, deletes and re-creates under the same name.  `objects`
    is {(ns, name): True} for what should exist."""

    def __init__(self, namespaces, seed):
        self.namespaces = namespaces
        self.rng = random.Random(seed)
        self.live = {}     # (ns, name) -> index of sample
        self.serial = 0

    def round(self, changes):
        """Applies `changes` random changes; returns how many of each kind."""
        done = {}
        for _ in range(changes):
            ns = self.rng.choice(self.namespaces)
            mine = [k for k in self.live if k[0] == ns]
            kind = self.rng.choice(["create"] * 3 + (["spec", "label", "status", "delete", "recreate"]
                                                     if mine else []))
            if kind == "create":
                self.serial += 1
                name = "c%d" % self.serial
                labels = {"sel": self.rng.choice(["yes", "no"])}
                create_certificates(ns, [certificate(name, self.serial, labels)])
                self.live[(ns, name)] = self.serial
            else:
                key = self.rng.choice(sorted(mine))
                name = key[1]
                if kind == "spec":
                    change_certificate(ns, name, renewBefore="%dh0m0s" % self.rng.randint(1, 999))
                elif kind == "label":
                    kubectl("label", CERTS, name, "-n", ns, "--overwrite",
                            "sel=" + self.rng.choice(["yes", "no"]))
                elif kind == "status":
                    set_ready(ns, name, self.rng.choice(["True", "False"]))
                elif kind == "delete":
                    kubectl("delete", CERTS, name, "-n", ns, "--wait=false")
                    del self.live[key]
                elif kind == "recreate":
                    kubectl("delete", CERTS, name, "-n", ns, "--wait=false")
                    create_certificates(ns, [certificate(name, self.live[key], {"sel": "yes"})])
            done[kind] = done.get(kind, 0) + 1
        return done
