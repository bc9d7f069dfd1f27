#!/usr/bin/python3
"""Relations benchmark (issue 49): the relation functions
(sql/schema/functions/relations.sql) at 50,000 pods.  Needs only PostgreSQL
with kwatch (no API server): it makes mirror tables of its own
(k8s.relbench_<resource>, rows of cluster 'relbench', through
kwatch.create_mirror_table, so with the indexes watch() makes) and fills
them with pods-shaped rows in one statement each: `--pods` pods in
`--namespaces` namespaces, 20 per Deployment, each Deployment with two
ReplicaSets (the current one owning the pods, an old one scaled to 0), a
Service and an EndpointSlice per Deployment, pods spread over `--nodes`
Nodes.  Prints, for each relation, the median time of `--repeat` calls on
objects picked at random, and the EXPLAIN ANALYZE of the queries the
functions run (index use); then what the relation indexes cost on a sync
(INSERT of the same pods into an empty table with and without them).
Asserts nothing; drops its tables.

usage: relations.py [--pods 50000] [--namespaces 100] [--nodes 500] [--repeat 50] [--json FILE]
(PG* environment variables name the database; make bench runs it.)
"""
import argparse
import json
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import db  # noqa: E402

TABLES = [("relbench_pods", "", "pods"), ("relbench_replicasets", "apps", "replicasets"),
          ("relbench_deployments", "apps", "deployments"), ("relbench_services", "", "services"),
          ("relbench_endpointslices", "discovery.k8s.io", "endpointslices"), ("relbench_nodes", "", "nodes")]

# one Deployment d of namespace ns-<d % namespaces>: deployment web-<d>, its
# ReplicaSets web-<d>-a (current) and web-<d>-o (old), pods web-<d>-a-<i>
FILL = {
    "relbench_nodes": """
      SELECT 'relbench', 'node-' || n, '1', jsonb_build_object('apiVersion', 'v1', 'kind', 'Node',
        'metadata', jsonb_build_object('name', 'node-' || n, 'uid', 'node-' || n, 'resourceVersion', '1',
                                       'labels', jsonb_build_object('kubernetes.io/hostname', 'node-' || n)),
        'status', jsonb_build_object('conditions', jsonb_build_array(jsonb_build_object('type', 'Ready', 'status', 'True'))))
        FROM generate_series(0, %(nodes)s - 1) n""",
    "relbench_deployments": """
      SELECT 'relbench', 'dep-' || d, '1', jsonb_build_object('apiVersion', 'apps/v1', 'kind', 'Deployment',
        'metadata', jsonb_build_object('name', 'web-' || d, 'namespace', 'ns-' || d %% %(namespaces)s,
                                       'uid', 'dep-' || d, 'resourceVersion', '1',
                                       'annotations', jsonb_build_object('deployment.kubernetes.io/revision', '2')),
        'spec', jsonb_build_object('replicas', 20, 'selector', jsonb_build_object('matchLabels', jsonb_build_object('app', 'web-' || d)),
          'template', jsonb_build_object('metadata', jsonb_build_object('labels', jsonb_build_object('app', 'web-' || d)),
            'spec', jsonb_build_object('containers', jsonb_build_array(jsonb_build_object('name', 'web', 'image', 'nginx:2'))))))
        FROM generate_series(0, %(deployments)s - 1) d""",
    "relbench_replicasets": """
      SELECT 'relbench', 'rs-' || d || '-' || v, '1', jsonb_build_object('apiVersion', 'apps/v1', 'kind', 'ReplicaSet',
        'metadata', jsonb_build_object('name', 'web-' || d || '-' || v, 'namespace', 'ns-' || d %% %(namespaces)s,
                                       'uid', 'rs-' || d || '-' || v, 'resourceVersion', '1',
                                       'labels', jsonb_build_object('app', 'web-' || d, 'pod-template-hash', v),
                                       'annotations', jsonb_build_object('deployment.kubernetes.io/revision',
                                                                         CASE v WHEN 'a' THEN '2' ELSE '1' END),
                                       'ownerReferences', jsonb_build_array(jsonb_build_object(
                                         'apiVersion', 'apps/v1', 'kind', 'Deployment', 'name', 'web-' || d,
                                         'uid', 'dep-' || d, 'controller', true, 'blockOwnerDeletion', true))),
        'spec', jsonb_build_object('replicas', CASE v WHEN 'a' THEN 20 ELSE 0 END,
          'template', jsonb_build_object('metadata', jsonb_build_object('labels', jsonb_build_object('app', 'web-' || d, 'pod-template-hash', v)),
            'spec', jsonb_build_object('containers', jsonb_build_array(jsonb_build_object('name', 'web',
              'image', CASE v WHEN 'a' THEN 'nginx:2' ELSE 'nginx:1' END))))))
        FROM generate_series(0, %(deployments)s - 1) d, unnest(ARRAY['a', 'o']) v""",
    "relbench_pods": """
      SELECT 'relbench', 'pod-' || p, '1', jsonb_build_object('apiVersion', 'v1', 'kind', 'Pod',
        'metadata', jsonb_build_object('name', 'web-' || p / 20 || '-a-' || p %% 20,
                                       'namespace', 'ns-' || (p / 20) %% %(namespaces)s,
                                       'uid', 'pod-' || p, 'resourceVersion', '1',
                                       'labels', jsonb_build_object('app', 'web-' || p / 20, 'pod-template-hash', 'a'),
                                       'ownerReferences', jsonb_build_array(jsonb_build_object(
                                         'apiVersion', 'apps/v1', 'kind', 'ReplicaSet', 'name', 'web-' || p / 20 || '-a',
                                         'uid', 'rs-' || p / 20 || '-a', 'controller', true, 'blockOwnerDeletion', true))),
        'spec', jsonb_build_object('nodeName', 'node-' || p %% %(nodes)s, 'restartPolicy', 'Always',
          'containers', jsonb_build_array(jsonb_build_object('name', 'web', 'image', 'nginx:2',
            'ports', jsonb_build_array(jsonb_build_object('containerPort', 80, 'protocol', 'TCP')),
            'resources', jsonb_build_object('requests', jsonb_build_object('cpu', '100m', 'memory', '128Mi'))))),
        'status', jsonb_build_object('phase', 'Running', 'podIP', '10.1.' || p / 250 || '.' || p %% 250,
          'hostIP', '10.0.0.' || p %% %(nodes)s %% 250,
          'conditions', jsonb_build_array(jsonb_build_object('type', 'Ready', 'status', 'True')),
          'containerStatuses', jsonb_build_array(jsonb_build_object('name', 'web', 'ready', true, 'restartCount', 0,
            'image', 'nginx:2', 'state', jsonb_build_object('running', jsonb_build_object('startedAt', '2026-01-01T00:00:00Z'))))))
        FROM generate_series(0, %(pods)s - 1) p""",
    "relbench_services": """
      SELECT 'relbench', 'svc-' || d, '1', jsonb_build_object('apiVersion', 'v1', 'kind', 'Service',
        'metadata', jsonb_build_object('name', 'web-' || d, 'namespace', 'ns-' || d %% %(namespaces)s,
                                       'uid', 'svc-' || d, 'resourceVersion', '1'),
        'spec', jsonb_build_object('selector', jsonb_build_object('app', 'web-' || d),
                                   'ports', jsonb_build_array(jsonb_build_object('port', 80))))
        FROM generate_series(0, %(deployments)s - 1) d""",
    "relbench_endpointslices": """
      SELECT 'relbench', 'eps-' || d, '1', jsonb_build_object('apiVersion', 'discovery.k8s.io/v1', 'kind', 'EndpointSlice',
        'metadata', jsonb_build_object('name', 'web-' || d || '-x', 'namespace', 'ns-' || d %% %(namespaces)s,
                                       'uid', 'eps-' || d, 'resourceVersion', '1',
                                       'labels', jsonb_build_object('kubernetes.io/service-name', 'web-' || d),
                                       'ownerReferences', jsonb_build_array(jsonb_build_object(
                                         'apiVersion', 'v1', 'kind', 'Service', 'name', 'web-' || d,
                                         'uid', 'svc-' || d, 'controller', true))),
        'addressType', 'IPv4', 'endpoints', '[]'::jsonb)
        FROM generate_series(0, %(deployments)s - 1) d""",
}

# (label, SQL of the call with %(d)s = a Deployment number, %(p)s = a pod
# number, %(n)s = a node number; namespaces filled in)
CALLS = [
    ("pods_of a Deployment (20 pods, through its 2 ReplicaSets)",
     "SELECT count(*) FROM kwatch.pods_of('deployment', 'web-%(d)s', 'ns-%(dns)s', 'relbench')"),
    ("pods_of a ReplicaSet", "SELECT count(*) FROM kwatch.pods_of('rs', 'web-%(d)s-a', 'ns-%(dns)s', 'relbench')"),
    ("pods_of a Service (labels @> selector)",
     "SELECT count(*) FROM kwatch.pods_of('svc', 'web-%(d)s', 'ns-%(dns)s', 'relbench')"),
    ("endpoint_slices_of a Service",
     "SELECT count(*) FROM kwatch.endpoint_slices_of('web-%(d)s', 'ns-%(dns)s', 'relbench')"),
    ("pods_of a Node", "SELECT count(*) FROM kwatch.pods_of('node', 'node-%(n)s', server => 'relbench')"),
    ("owner_chain of a pod (3 rows)",
     "SELECT count(*) FROM kwatch.owner_chain('pod', 'web-%(pd)s-a-%(pi)s', 'ns-%(pns)s', 'relbench')"),
    ("top_owner of a pod", "SELECT (kwatch.top_owner('pod', 'web-%(pd)s-a-%(pi)s', 'ns-%(pns)s', 'relbench')).name"),
    ("node_of a pod", "SELECT count(*) FROM kwatch.node_of('web-%(pd)s-a-%(pi)s', 'ns-%(pns)s', 'relbench')"),
    ("rollout_undo's reads (skipped: already at revision 2)",
     "SELECT kwatch.rollout_undo('web-%(d)s', 'ns-%(dns)s', 'relbench', to_revision => 2)"),
]

# the statements the functions run, as they run them (plpgsql's EXECUTE
# plans with the values)
EXPLAINS = [
    ("a Deployment's ReplicaSets",
     "SELECT array_agg(m.uid) FROM k8s.relbench_replicasets m WHERE m.cluster = 'relbench'"
     " AND m.namespace = 'ns-%(dns)s' AND kwatch.controller_uid(m.owner_references) = 'dep-%(d)s'"),
    ("their pods",
     "SELECT p.cluster, p.namespace, p.name, p.uid, p.object FROM k8s.relbench_pods p WHERE p.cluster = 'relbench'"
     " AND p.namespace = 'ns-%(dns)s' AND kwatch.controller_uid(p.owner_references) = ANY ('{rs-%(d)s-a,rs-%(d)s-o}')"
     " ORDER BY p.name"),
    ("a Service's pods",
     "SELECT p.cluster, p.namespace, p.name, p.uid, p.object FROM k8s.relbench_pods p WHERE p.cluster = 'relbench'"
     " AND p.namespace = 'ns-%(dns)s' AND p.labels @> '{\"app\": \"web-%(d)s\"}' ORDER BY p.name"),
    ("a Node's pods",
     "SELECT p.cluster, p.namespace, p.name, p.uid, p.object FROM k8s.relbench_pods p WHERE p.cluster = 'relbench'"
     " AND p.node_name = 'node-%(n)s' ORDER BY p.namespace, p.name"),
    ("an owner by uid (owner_chain's step)",
     "SELECT t.object FROM k8s.relbench_replicasets t WHERE t.cluster = 'relbench' AND t.uid = 'rs-%(d)s-a'"),
]


def params(a, rnd):
    deployments = a.pods // 20
    d, p = rnd.randrange(deployments), rnd.randrange(a.pods)
    return {"d": d, "dns": d % a.namespaces, "n": rnd.randrange(a.nodes),
            "pd": p // 20, "pi": p % 20, "pns": (p // 20) % a.namespaces}


def make_tables(cur, a, with_data=True):
    for t, group, plural in TABLES:
        cur.execute("DROP TABLE IF EXISTS k8s.%s CASCADE" % t)
        cur.execute("SELECT kwatch.create_mirror_table(%s, %s, 'v1', %s)", (t, group, plural))
    if with_data:
        v = {"pods": a.pods, "deployments": a.pods // 20, "namespaces": a.namespaces, "nodes": a.nodes}
        for t, _, _ in TABLES:
            cur.execute("INSERT INTO k8s.%s (cluster, uid, resource_version, object) " % t + FILL[t] % v)
            cur.execute("VACUUM ANALYZE k8s.%s" % t)


def sync_cost(cur, a):
    """Seconds to INSERT the pods into an empty mirror table with the
    relation indexes and without; their size."""
    out = {}
    v = {"pods": a.pods, "deployments": a.pods // 20, "namespaces": a.namespaces, "nodes": a.nodes}
    for indexed in (True, False):
        cur.execute("DROP TABLE IF EXISTS k8s.relbench_sync")
        cur.execute("SELECT kwatch.create_mirror_table('relbench_sync', '', 'v1', 'pods')")
        if not indexed:
            cur.execute("SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = 'k8s.relbench_sync'::regclass"
                        " AND pg_get_indexdef(indexrelid) ~ 'controller_uid|node_name'")
            for (i,) in cur.fetchall():
                cur.execute("DROP INDEX %s" % i)
        t = time.perf_counter()
        cur.execute("INSERT INTO k8s.relbench_sync (cluster, uid, resource_version, object) "
                    + FILL["relbench_pods"].replace("'relbench'", "'relbench-sync'", 1) % v)
        out["with" if indexed else "without"] = time.perf_counter() - t
        if indexed:
            cur.execute("SELECT sum(pg_relation_size(indexrelid)) FROM pg_index WHERE indrelid = 'k8s.relbench_sync'::regclass"
                        " AND pg_get_indexdef(indexrelid) ~ 'controller_uid|node_name'")
            out["index_bytes"] = int(cur.fetchone()[0])
    cur.execute("DROP TABLE k8s.relbench_sync")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pods", type=int, default=50000)
    ap.add_argument("--namespaces", type=int, default=100)
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--json")
    a = ap.parse_args()
    cur = db.connect().cursor()
    cur.execute("CREATE EXTENSION IF NOT EXISTS kwatch")
    t = time.perf_counter()
    make_tables(cur, a)
    fill_s = time.perf_counter() - t
    rnd = random.Random(49)
    report = {"pods": a.pods, "replicasets": a.pods // 10, "deployments": a.pods // 20, "calls": {}, "explain": {}}
    try:
        for label, q in CALLS:
            times = []
            for _ in range(a.repeat):
                s = q % params(a, rnd)
                t = time.perf_counter()
                cur.execute(s)
                cur.fetchall()
                times.append(time.perf_counter() - t)
            report["calls"][label] = statistics.median(times)
        for label, q in EXPLAINS:
            cur.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) " + q % params(a, rnd))
            report["explain"][label] = [r[0] for r in cur.fetchall()]
        report["sync"] = sync_cost(cur, a)
    finally:
        for tbl, _, _ in TABLES:
            cur.execute("DROP TABLE IF EXISTS k8s.%s CASCADE" % tbl)
    print()
    print("kwatch: relations, %d pods, %d ReplicaSets, %d Deployments, Services and EndpointSlices, "
          "%d nodes (rows made in %.1f s); median of %d calls on random objects"
          % (a.pods, a.pods // 10, a.pods // 20, a.nodes, fill_s, a.repeat))
    for label, s in report["calls"].items():
        print("  %-58s %8.2f ms" % (label, s * 1000))
    print("  sync of %d pods into an empty table: %.2f s with the relation indexes, %.2f s without"
          " (+%.1f us per pod; indexes %.1f MB)"
          % (a.pods, report["sync"]["with"], report["sync"]["without"],
             (report["sync"]["with"] - report["sync"]["without"]) / a.pods * 1e6,
             report["sync"]["index_bytes"] / 1e6))
    for label, plan in report["explain"].items():
        print()
        print("  EXPLAIN ANALYZE: %s" % label)
        for line in plan:
            print("    " + line)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
