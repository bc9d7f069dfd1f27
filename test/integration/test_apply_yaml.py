"""YAML manifests for kwatch.apply() (issue 49): kwatch.apply(manifest
text) takes YAML of several documents as `kubectl apply -f` does, converted
as kubectl converts it (the oracle: kubectl itself, run on the same text),
and the API server's refusals are mapped by meaning: an object that does
not fit its schema is 22023 (also the 500 a 1.20 server answers for it),
a missing namespace is named with a hint."""
import json
import os
import subprocess
import tempfile

import psycopg2
import pytest

import conftest
from conftest import kubectl_json, sql, sql_one

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "yaml-manifest-scalars.yaml")
ORACLE_LABEL = "kwatch-oracle"


def error(query, params=None, conn=None):
    with pytest.raises(psycopg2.Error) as e:
        sql(query, params, conn=conn)
    return e.value


def json_stream(text):
    """The objects of kubectl's -o json output (one, or several one after another)."""
    dec, i, out = json.JSONDecoder(), 0, []
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return out
        o, i = dec.raw_decode(text, i)
        out.append(o)


def kubectl_client(*args, path):
    """kubectl's client-side reading of file `path` (-o json), against the
    test cluster's kubeconfig (no request is sent with --local/--dry-run=client
    but discovery)."""
    r = subprocess.run(["kubectl", "--kubeconfig", conftest.CLUSTER.kubeconfig, *args, "-f", path,
                        "-o", "json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json_stream(r.stdout)


def pruned(v):
    """kubectl's typed output without what its Go structs add (null and
    empty members: creationTimestamp: null, status: {}, strategy: {})."""
    if isinstance(v, dict):
        out = {k: pruned(x) for k, x in v.items()}
        return {k: x for k, x in out.items() if x not in (None, {}, [])}
    if isinstance(v, list):
        return [pruned(x) for x in v]
    return v


def same(a, b, path=""):
    """a == b, numbers compared as floats (kubectl's unstructured JSON holds
    big numbers as float64, jsonb as numeric)."""
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        assert float(a) == float(b), (path, a, b)
    elif isinstance(a, dict) and isinstance(b, dict):
        assert set(a) == set(b), (path, sorted(set(a) ^ set(b)))
        for k in a:
            same(a[k], b[k], path + "/" + k)
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), (path, a, b)
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, "%s/%d" % (path, i))
    else:
        assert type(a) == type(b) and a == b, (path, a, b)


def test_yaml_1_1_scalars_keys_anchors_and_lists_convert_as_kubectl_converts_them(ctx):
    """The fixture's objects (several documents, an empty one, a List) as
    kwatch.manifest_objects() makes them == what kubectl makes of the same
    file (`kubectl label --local`: the builder's reading, unstructured, no
    request)."""
    text = open(FIXTURE).read()
    theirs = kubectl_client("label", "--local", ORACLE_LABEL + "=1", path=FIXTURE)
    for o in theirs:
        o["metadata"]["labels"].pop(ORACLE_LABEL)
        if not o["metadata"]["labels"]:
            del o["metadata"]["labels"]
    ours = sql("SELECT o FROM kwatch.manifest_objects(%s) o", (text,))
    assert len(ours) == len(theirs) == 3
    for (o,), t in zip(ours, theirs):
        same(o, t)
    # a few of the rules, spelled out
    spec = ours[0][0]["spec"]
    assert spec["booleans"] == [True] * 5 + [False] * 5 + [True] * 3 + [False] * 3 + [True] * 3 + [False] * 3
    assert spec["ints"][4:7] == [511, 15, 31] and spec["floats"][-1] == "1e400"
    assert spec["timestamps"][2] == "2002-12-14" and spec["keys"]["1e+06"] == "big float"
    assert spec["anchors"]["overridden"] == {"a": 1, "b": 2}


def test_several_documents_apply_in_order_as_kubectl_would_send_them(ctx):
    """A ConfigMap and a Deployment in one YAML text, with YAML 1.1 scalars,
    anchors (each document its own) and an empty document: one row per object, in order, and the
    objects on the server carry what kubectl's own conversion says."""
    srv = ctx.server()
    ns = ctx.namespace()
    text = """\
# a comment before the first document
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: %(ns)s
  labels: &labels {app: web}
data:
  enabled: "yes"
  octal: "0777"
  script: |
    echo one
    echo two
---
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: %(ns)s, labels: &labels {app: web}}
spec:
  replicas: 0x2
  paused: yes
  revisionHistoryLimit: 0o3
  progressDeadlineSeconds: 1_200
  selector: {matchLabels: *labels}
  template:
    metadata: {labels: *labels}
    spec:
      containers:
      - name: web
        image: registry.invalid/web:1
        ports: [{containerPort: 8080}]
""" % {"ns": ns}
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        f.write(text)
        f.flush()
        theirs = kubectl_client("create", "--dry-run=client", "--validate=false", path=f.name)
    ours = sql("SELECT o FROM kwatch.manifest_objects(%s) o", (text,))
    assert [pruned(o) for (o,) in ours] == [pruned(t) for t in theirs]

    rows = sql("SELECT state, object->>'kind', object->'metadata'->>'name'"
               " FROM kwatch.apply(%s, server => %s, at => 'now')", (text, srv))
    assert rows == [("applied", "ConfigMap", "settings"), ("applied", "Deployment", "web")], rows
    cm = kubectl_json("get", "configmap", "settings", "-n", ns)
    assert cm["data"] == theirs[0]["data"] and cm["metadata"]["labels"] == {"app": "web"}
    d = kubectl_json("get", "deployment", "web", "-n", ns)
    for k in ("replicas", "paused", "revisionHistoryLimit", "progressDeadlineSeconds", "selector"):
        assert d["spec"][k] == theirs[1]["spec"][k], k
    assert (d["spec"]["replicas"], d["spec"]["paused"], d["spec"]["revisionHistoryLimit"]) == (2, True, 3)

    # one document: the row's fields, as with the jsonb form; an untyped JSON literal takes the text form
    one = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "settings", "namespace": ns}, "data": {"enabled": "no"}})
    assert sql_one("SELECT (kwatch.apply(%s, server => %s, dry_run => true)).state", (one, srv)) == "dry run"


def test_at_commit_all_documents_or_none_and_the_error_names_the_document(ctx):
    srv = ctx.server()
    ns = ctx.namespace()
    text = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: first, namespace: %(ns)s}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: broken, namespace: %(ns)s}
spec:
  replicas: 1
  bogus: 1
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec: {containers: [{name: c, image: registry.invalid/c}]}
""" % {"ns": ns}
    conn = conftest.PG.connect(autocommit=False)
    try:
        e = error("SELECT * FROM kwatch.apply(%s, server => %s)", (text, srv), conn=conn)
        conn.rollback()
    finally:
        conn.close()
    # the 1.20 server's 500 for a field the schema does not declare is an invalid object
    assert e.pgcode == "22023", e.pgerror
    assert ".spec.bogus" in e.diag.message_detail and "not declared" in e.diag.message_detail, e.pgerror
    assert 'YAML document 2 (line 5) of the manifest: Deployment "broken"' in e.diag.context, e.diag.context
    assert sql_one("SELECT count(*) FROM kwatch.apply_queue WHERE server = %s", (srv,)) == 0

    # a string for a number: 22023 too, at once as well
    bad = text.split("---\n")[1].replace("replicas: 1", 'replicas: "three"').replace("  bogus: 1\n", "")
    e = error("SELECT * FROM kwatch.apply(%s, server => %s, at => 'now')", (bad, srv))
    assert e.pgcode == "22023" and ".spec.replicas" in e.diag.message_detail, e.pgerror
    # an invalid name: 422 Invalid, the causes in DETAIL (as before)
    e = error("SELECT * FROM kwatch.apply(%s, server => %s)",
              ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: Not_Valid, namespace: %s}\n" % ns, srv))
    assert e.pgcode == "22023" and "metadata.name" in e.diag.message_detail, e.pgerror


def test_syntax_errors_name_the_line_and_a_missing_namespace_is_named_with_a_hint(ctx):
    srv = ctx.server()
    e = error("SELECT * FROM kwatch.apply(%s, server => %s)",
              ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [x\n", srv))
    assert e.pgcode == "22P02" and e.diag.message_primary.startswith("YAML syntax error at line 5, column 1"), e.pgerror
    e = error("SELECT * FROM kwatch.apply(%s, server => %s)", ("a: .inf\n", srv))
    assert e.pgcode == "22P02" and "not representable in JSON" in e.pgerror, e.pgerror

    ns = ctx.base[:50] + "-absent"
    e = error("SELECT * FROM kwatch.apply(%s, server => %s)",
              ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: %s}\n" % ns, srv))
    assert e.pgcode == "42704", e.pgerror
    assert 'namespace "%s" does not exist' % ns in e.diag.message_primary, e.pgerror
    assert '"kind":"Namespace","metadata":{"name":"%s"}' % ns in e.diag.message_hint, e.pgerror
