"""Every mirrored and live object is the whole Kubernetes object: apiVersion
and kind on every row, whichever path it came by (issue 14).

A LIST carries apiVersion and kind once, on the list, and none on its items;
a WATCH event's object carries them.  kwatch writes them on listed objects
from the resource the watch resolved through discovery, so `object` equals
`kubectl get -o json` (managedFields aside) after the initial sync, after
watch events and after a relist, for every kind below and for a CRD.
(conftest.mirror_diff compares whole objects, apiVersion and kind included,
so every other table comparison of the suite checks this too.)
"""
import json

from psycopg2 import sql as pgsql

import conftest
from conftest import (assert_table_matches_server, kubectl, sql, sql_one, wait_until,
                      wait_watching, watch, watch_status)
from live_support import assert_live_matches, import_schema
from test_crd import crd_manifest, crontab

# resource as watched -> (apiVersion, kind) the objects must carry
RESOURCES = {
    "configmaps": ("v1", "ConfigMap"),
    "secrets": ("v1", "Secret"),
    "services": ("v1", "Service"),
    "serviceaccounts": ("v1", "ServiceAccount"),
    "endpoints": ("v1", "Endpoints"),
    "persistentvolumeclaims": ("v1", "PersistentVolumeClaim"),
    "pods": ("v1", "Pod"),
    "deployments.apps": ("apps/v1", "Deployment"),
    "replicasets.apps": ("apps/v1", "ReplicaSet"),
    "statefulsets.apps": ("apps/v1", "StatefulSet"),
    "jobs.batch": ("batch/v1", "Job"),
    "roles.rbac.authorization.k8s.io": ("rbac.authorization.k8s.io/v1", "Role"),
    "rolebindings.rbac.authorization.k8s.io": ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    "leases.coordination.k8s.io": ("coordination.k8s.io/v1", "Lease"),
    "ingresses.networking.k8s.io": ("networking.k8s.io/v1", "Ingress"),
}


def manifests(ns):
    meta = {"name": "shape", "namespace": ns, "labels": {"app": "shape"}}
    pod_spec = {"containers": [{"name": "c", "image": "registry.invalid/pause:1"}]}
    tmpl = {"metadata": {"labels": {"app": "shape"}}, "spec": pod_spec}
    sel = {"matchLabels": {"app": "shape"}}
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "stringData": {"k": "v"}},
        {"apiVersion": "v1", "kind": "Service", "metadata": meta,
         "spec": {"selector": {"app": "shape"}, "ports": [{"port": 80}]}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta,
         "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
         "spec": {"replicas": 1, "selector": sel, "template": tmpl}},
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta,
         "spec": {"replicas": 0, "serviceName": "shape", "selector": sel, "template": tmpl}},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
         "spec": {"template": {"spec": dict(pod_spec, restartPolicy="Never")}}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta,
         "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "shape"},
         "subjects": [{"kind": "ServiceAccount", "name": "shape", "namespace": ns}]},
        {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
         "spec": {"holderIdentity": "shape"}},
        {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta,
         "spec": {"defaultBackend": {"service": {"name": "shape", "port": {"number": 80}}}}},
    ]


def check_rows(srv, tables, ns):
    for res, table in tables.items():
        api_version, kind = RESOURCES[res]
        # every row carries the resource's type; then whole objects equal kubectl's
        bad = sql("SELECT name, object->>'apiVersion', object->>'kind' FROM %s"
                  " WHERE cluster = %%s AND (object->>'apiVersion' IS DISTINCT FROM %%s"
                  " OR object->>'kind' IS DISTINCT FROM %%s)" % table, (srv, api_version, kind))
        assert bad == [], (res, bad)
        assert_table_matches_server(table, srv, [res, "-n", ns], timeout=60)


def test_listed_watched_and_relisted_objects_carry_api_version_and_kind(ctx):
    ns = ctx.namespace()
    group = "shape%s.example.com" % conftest.RUN_ID
    crd = "crontabs." + group
    RESOURCES[crd] = (group + "/v1", "CronTab")
    ctx.crds.append(crd)
    kubectl("apply", "-f", "-", input=json.dumps(crd_manifest(group)))
    conftest.wait_crd_established(crd)
    wait_until(lambda: kubectl("get", "--raw", "/apis/%s/v1" % group, check=False).strip(),
               30, "discovery of " + group)
    kubectl("apply", "-f", "-", input=json.dumps(
        {"apiVersion": "v1", "kind": "List", "items": manifests(ns)}))
    kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(
        crontab(group, "listed", {"cronSpec": "* * * * *"}, {"app": "shape"})))
    # the controllers' objects: the deployment's replicaset and pod, the
    # service's endpoints, the job's pod
    wait_until(lambda: kubectl("get", "replicasets.apps,endpoints", "-n", ns, "-o", "name").count("/") >= 2,
               60, "replicaset and endpoints")

    srv = ctx.server()
    tables = {res: watch(res, srv, namespace=ns) for res in RESOURCES}
    for res in tables:
        wait_watching(srv, res, timeout=60)

    # 1. the initial LIST
    check_rows(srv, tables, ns)
    # registrations say what each row must carry (the worker's source)
    for res, (api_version, kind) in RESOURCES.items():
        g, v, k = sql("SELECT api_group, api_version, kind FROM kwatch.registrations"
                      " WHERE server = %s AND resource = %s", (srv, res))[0]
        assert ((g + "/" + v) if g else v, k) == (api_version, kind), res

    # 2. WATCH events: every object changed, one created
    for res in RESOURCES:
        kubectl("label", res, "--all", "-n", ns, "round=2", "--overwrite")
    kubectl("create", "configmap", "added-later", "-n", ns, "--from-literal=a=b")
    kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(
        crontab(group, "watched", {"cronSpec": "0 * * * *"}, {"app": "shape"})))
    wait_until(lambda: sql_one("SELECT count(*) FROM %s WHERE cluster = %%s AND name = 'watched'"
                               % tables[crd], (srv,)) == 1, 30, "the CronTab created while watched")
    check_rows(srv, tables, ns)

    # 3. a relist: the worker stopped, objects changed meanwhile, and its
    # checkpoints older than the API server's history (410 -> relist)
    # (a CRD's watch cache starts at the CRD's creation: a WATCH from RV 1 is
    # always refused with 410; a core resource's may still hold RV 1 on a
    # young cluster, and would replay events instead)
    relisted = (crd,)
    worker = sql_one("SELECT kwatch.worker_pid()")
    sql("SELECT pg_terminate_backend(%s)", (worker,))
    wait_until(lambda: sql_one("SELECT kwatch.worker_pid()") != worker, 20, "the worker to exit")
    sql("UPDATE kwatch.registrations SET resource_version = '1' WHERE server = %s", (srv,))
    for res in ("configmaps", crd):
        kubectl("label", res, "--all", "-n", ns, "round=3", "--overwrite")
    # the postmaster starts a new worker after 5 s
    wait_until(lambda: sql_one("SELECT kwatch.worker_pid()") not in (None, worker), 30, "a new worker")
    # (a new worker shows its watches with NULL counters until it runs them)
    wait_until(lambda: all((watch_status(srv, res)["relists"] or 0) >= 1 and watch_status(srv, res)["healthy"]
                           for res in relisted), 60, "a relist of the crontabs")
    check_rows(srv, tables, ns)
    assert sql("SELECT DISTINCT labels->>'round' FROM %s WHERE cluster = %%s AND name = 'listed'"
               % tables[crd], (srv,)) == [("3",)]


def test_live_tables_carry_api_version_and_kind(ctx):
    srv = ctx.server()
    ns = ctx.namespace()
    schema = "shape_live_%s" % conftest.RUN_ID
    kubectl("apply", "-f", "-", input=json.dumps(
        {"apiVersion": "v1", "kind": "List", "items": manifests(ns)}))
    try:
        import_schema(srv, schema, "LIMIT TO (configmaps, secrets, deployments, roles, leases)")
        # IMPORT records each table's kind, so scans need no discovery
        opts = dict(sql("SELECT c.relname, array_to_string(t.ftoptions, ',') FROM pg_foreign_table t"
                        " JOIN pg_class c ON c.oid = t.ftrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
                        " WHERE n.nspname = %s", (schema,)))
        assert "kind=ConfigMap" in opts["configmaps"] and "kind=Deployment" in opts["deployments"], opts
        for table, args in (("configmaps", ["configmaps"]), ("secrets", ["secrets"]),
                            ("deployments", ["deployments.apps"]),
                            ("roles", ["roles.rbac.authorization.k8s.io"]),
                            ("leases", ["leases.coordination.k8s.io"])):
            rows = assert_live_matches("%s.%s" % (schema, table), "namespace = %s", (ns,),
                                       args + ["-n", ns])
            assert rows and all("apiVersion" in r["object"] and "kind" in r["object"]
                                for r in rows.values()), rows
        # a table made by hand without the kind option: the LIST's kind (ConfigMapList)
        sql(pgsql.SQL("CREATE FOREIGN TABLE {}.hand (namespace text, name text, uid text,"
                      " resource_version text, labels jsonb, object jsonb) SERVER {}"
                      " OPTIONS (resource 'configmaps', api_version 'v1', namespaced 'true')")
            .format(pgsql.Identifier(schema), pgsql.Identifier(srv)))
        assert sql("SELECT object->>'apiVersion', object->>'kind' FROM %s.hand"
                   " WHERE namespace = %%s AND name = 'shape'" % schema, (ns,)) == [("v1", "ConfigMap")]
    finally:
        sql(pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(pgsql.Identifier(schema)))
