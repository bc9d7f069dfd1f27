"""Issue 49: kwatch.matches_labels() selects what the API server's own
labelSelector selects (`kubectl get -l`), and rejects what it rejects, in
its words.

ConfigMaps with labels shaped like pods' (app, tier, env,
pod-template-hash; some without tier) and the namespace's
kube-root-ca.crt (no labels at all) are mirrored; for each selector the
names `kubectl get configmaps -l SELECTOR` prints are compared with the rows
`kwatch.matches_labels(labels, SELECTOR)` keeps, and with the rows of the
LabelSelector object the selector is equivalent to where it has one.  For
invalid selectors, kubectl's error (the API server's 400) holds the
message of the SQL function's 22023.  The rule-by-rule cases of
apimachinery's own tests are in test/sql/label_selectors.sql."""
import json
import os
import subprocess

import psycopg2
import pytest

import cluster
from conftest import kubectl, sql, wait_until, wait_watching, watch

LABELS = {
    "web-1": {"app": "web", "tier": "fe", "env": "prod", "pod-template-hash": "5d8f9"},
    "web-2": {"app": "web", "tier": "db", "env": "prod", "pod-template-hash": "5d8f9"},
    "web-3": {"app": "web", "env": "staging", "pod-template-hash": "77c4b"},
    "api-1": {"app": "api", "tier": "be", "env": "prod"},
    "api-2": {"app": "api", "tier": "db", "env": "dev", "version": "3"},
    "odd": {"app.kubernetes.io/name": "odd", "version": "12", "empty": ""},
}

SELECTORS = [
    "app=web,tier!=db", "app=web", "app==web", "tier!=db", "tier in (db,fe)",
    "tier notin (db,fe)", "tier", "!tier", "app in (web),env notin (prod)",
    "app.kubernetes.io/name=odd", "empty=", "empty in ()", "version>5", "version<5",
    "env in (prod, dev) , !version", "", "app=nope", "app=web,app=api",
    " app  in\t(web,api)\n,tier",
]

INVALID = ["app=web,,tier", "x==a==b", "!x=a", "x<a", "a in (xyz abc)", "a notin(",
           "Bad_Key-/x=a", "app=-web", "a/b/c", "x in (a", "(", ",x"]

# LabelSelector objects and the string selector each means
OBJECTS = [
    ({"matchLabels": {"app": "web"},
      "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}]}, "app=web,tier notin (db)"),
    ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, "!tier"),
    ({"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod", "dev"]},
                           {"key": "tier", "operator": "Exists"}]}, "env in (prod,dev),tier"),
    ({}, ""),
]


def names_by_kubectl(ns, selector):
    out = kubectl("get", "configmaps", "-n", ns, "-l", selector, "-o", "name")
    return sorted(n.split("/", 1)[1] for n in out.split())


def names_by_sql(srv, ns, selector):
    return [r[0] for r in sql("SELECT name FROM k8s.configmaps WHERE cluster = %s AND namespace = %s"
                              " AND kwatch.matches_labels(labels, %s::text) ORDER BY name",
                              (srv, ns, selector))]


def test_selectors_select_what_the_api_server_selects(ctx):
    ns = ctx.namespace()
    srv = ctx.server()
    kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n, "namespace": ns, "labels": l},
         "data": {"v": "1"}} for n, l in LABELS.items()]}))
    watch("configmaps", srv, namespace=ns)
    wait_watching(srv, "configmaps")
    wait_until(lambda: len(names_by_sql(srv, ns, "")) == len(LABELS) + 1, msg="mirrored")
    for sel in SELECTORS:
        assert names_by_sql(srv, ns, sel) == names_by_kubectl(ns, sel), sel
    # the planner's rewrite changes nothing: the same with the selector as a literal
    for sel in SELECTORS:
        lit = sql("SELECT name FROM k8s.configmaps WHERE cluster = %%s AND namespace = %%s"
                  " AND kwatch.matches_labels(labels, '%s') ORDER BY name" % sel.replace("'", "''"),
                  (srv, ns))
        assert [r[0] for r in lit] == names_by_kubectl(ns, sel), sel
    for obj, sel in OBJECTS:
        rows = sql("SELECT name FROM k8s.configmaps WHERE cluster = %s AND namespace = %s"
                   " AND kwatch.matches_labels(labels, %s::jsonb) ORDER BY name",
                   (srv, ns, json.dumps(obj)))
        assert [r[0] for r in rows] == names_by_kubectl(ns, sel), obj


def test_invalid_selectors_fail_as_the_api_server_does(ctx):
    ns = ctx.namespace()
    for sel in INVALID:
        with pytest.raises(psycopg2.Error) as e:
            sql("SELECT kwatch.matches_labels('{}', %s::text)", (sel,))
        assert e.value.pgcode == "22023", sel
        ours = e.value.diag.message_primary
        theirs = kubectl_error(ns, sel)
        assert ours in theirs, (sel, ours, theirs)


def kubectl_error(ns, selector):
    """kubectl's stderr for `get configmaps -l selector` (it must fail)."""
    r = subprocess.run([cluster.KUBECTL, "get", "configmaps", "-n", ns, "-l", selector],
                       env=dict(os.environ, KUBECONFIG=cluster.CLUSTER.kubeconfig),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0, selector
    return r.stderr
