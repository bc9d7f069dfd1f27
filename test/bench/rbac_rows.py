#!/usr/bin/python3
"""Rows that follow RBAC: what kwatch.enable_rbac_rows() costs a reader.
Prints a report; asserts nothing.

usage: rbac_rows.py [--rows 50000] [--namespaces 500] [--rounds 21] [--json PATH]

Run by rbac_rows.sh (`make bench`), which starts a 1.20 control plane with
RBAC authorization; the PG* environment names the database, KUBECONFIG and
KWATCH_K8S_* the plane.  It makes `namespaces` namespaces, a ClusterRole
that may list pods and, for user kwatch-user (a static token without
groups), a RoleBinding to it in every second namespace; a foreign server
with three readers of k8s.pods:
  * the table's owner (a superuser: RLS exempts it), i.e. the query
    without the policy;
  * reader_all, whose user mapping carries the admin token: one
    cluster-wide SelfSubjectAccessReview allows every row;
  * reader_half, whose mapping carries kwatch-user's token: it may list
    pods in half the namespaces, so one review per namespace.
and, to tell the policy's own cost from the parallel workers it forgoes
(kwatch.rbac_visible is PARALLEL UNSAFE), the owner with
max_parallel_workers_per_gather = 0.
The table gets `rows` pods-shaped rows spread over the namespaces (written
by its owner, as the worker would: the plane runs no pods), each with the
labels of a Deployment's pod.  Four queries (a full scan, a label
selector, a lookup by namespace and name; a full scan both as count(*),
the worst case, and with the README's filter on the labels; each reads
`phase` but the first) run `rounds` times, each sample the mean of 5
executions or more (~20 ms of them), rounds interleaved with the reader
that goes first rotating.  Reported: medians and their ratio reader /
owner (the target, doc/security.md: at most 1.2x), and the fastest
samples and theirs (on a shared 2-core machine the median of a 5 ms query
moves by 20% between runs, the fastest much less); and the owner's count
of a column (FLOOR: what any filter reading a column pays, which a bare
count(*) does not).  The rows' namespaces alternate row by row (the order
of the INSERT below), the worst case for the policy's check of the
previous row's namespace; after a LIST they come in namespace runs.  Also
the first query of a new connection of reader_half, which makes the
reviews (1 + namespaces).
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import psycopg2

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import db  # noqa: E402

SERVER = "bench_rbac"
BATCH = 5

QUERIES = [
    # the worst case: nothing else is computed per row, and without the
    # policy the scan need not even read the rows' columns
    ("full scan, count(*)", "SELECT count(*) FROM k8s.pods"),
    # the README's query: a full scan with a filter on the labels
    ("full scan, labels->>'app' = 'app-7'",
     "SELECT count(phase) FROM k8s.pods WHERE labels->>'app' = 'app-7'"),
    ("label selector app=app-7",
     "SELECT count(phase) FROM k8s.pods WHERE kwatch.matches_labels(labels, 'app=app-7')"),
    ("lookup by namespace and name",
     "SELECT count(phase) FROM k8s.pods WHERE namespace = 'rbac-0042' AND name = 'pod-0042-00007'"),
]

# What any row filter pays that a bare count(*) does not: reading a column
# of every row (the policy reads cluster and namespace).  Run by the owner
# without parallel workers, beside the full scans.
FLOOR = ("owner, count(namespace), no parallel workers",
         "SELECT count(namespace) FROM k8s.pods")


def kubectl_apply(docs):
    """kubectl apply of a List of `docs` (one call)."""
    body = json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
    subprocess.run(["kubectl", "apply", "-f", "-"], input=body.encode(), check=True,
                   stdout=subprocess.DEVNULL)


def setup_cluster(namespaces):
    """The namespaces, ClusterRole pod-lister and kwatch-user's RoleBindings."""
    nss = ["rbac-%04d" % i for i in range(namespaces)]
    docs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in nss]
    docs.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                 "metadata": {"name": "kwatch-bench-pod-lister"},
                 "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]})
    docs += [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
              "metadata": {"name": "kwatch-bench-pods", "namespace": n},
              "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                          "name": "kwatch-bench-pod-lister"},
              "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "kwatch-user"}]}
             for n in nss[::2]]
    kubectl_apply(docs)
    return nss


def setup_database(cur, rows, namespaces):
    """Server, readers, the mirror table with `rows` rows and its policy."""
    cur.execute("CREATE EXTENSION IF NOT EXISTS kwatch")
    cur.execute("SELECT kwatch.unwatch(resource, server => server, drop_table => true)"
                " FROM kwatch.registrations WHERE server = %s", (SERVER,))
    cur.execute("DROP SERVER IF EXISTS %s CASCADE" % SERVER)
    cur.execute("CREATE SERVER %s FOREIGN DATA WRAPPER kwatch OPTIONS (api_server %%s,"
                " certificate_authority %%s)" % SERVER,
                (os.environ["KWATCH_K8S_SERVER"], os.environ["KWATCH_K8S_CA"]))
    admin, user = os.environ["KWATCH_K8S_TOKEN"], os.environ["KWATCH_K8S_USER_TOKEN"]
    cur.execute("CREATE USER MAPPING FOR CURRENT_USER SERVER %s OPTIONS (token %%s)" % SERVER, (admin,))
    for role, token in (("reader_all", admin), ("reader_half", user)):
        # a run before this one on the same database left the role's grants
        cur.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,))
        if cur.fetchone():
            cur.execute("DROP OWNED BY %s" % role)
        cur.execute("DROP ROLE IF EXISTS %s" % role)
        cur.execute("CREATE ROLE %s LOGIN" % role)
        cur.execute("GRANT USAGE ON FOREIGN SERVER %s TO %s" % (SERVER, role))
        cur.execute("CREATE USER MAPPING FOR %s SERVER %s OPTIONS (token %%s)" % (role, SERVER), (token,))
    cur.execute("SELECT kwatch.watch('pods', server => %s)", (SERVER,))
    cur.execute("SELECT kwatch.wait_synced('pods', server => %s, timeout => '60s')", (SERVER,))
    cur.execute("SELECT kwatch.enable_rbac_rows('k8s.pods')")
    for role in ("reader_all", "reader_half"):
        cur.execute("GRANT USAGE ON SCHEMA k8s TO %s; GRANT SELECT ON k8s.pods TO %s" % (role, role))
    # rows as a LIST would write them: pod j of namespace i, labels of a Deployment's pod
    cur.execute("""
        INSERT INTO k8s.pods (cluster, uid, resource_version, object)
        SELECT %s, u.uid, '1', jsonb_build_object(
                 'apiVersion', 'v1', 'kind', 'Pod',
                 'metadata', jsonb_build_object(
                    'name', format('pod-%%s-%%s', lpad(i::text, 4, '0'), lpad(j::text, 5, '0')),
                    'namespace', format('rbac-%%s', lpad(i::text, 4, '0')),
                    'uid', u.uid, 'resourceVersion', '1',
                    'labels', jsonb_build_object('app', 'app-' || (j %% 100),
                                                 'pod-template-hash', md5(i::text || (j %% 100))::text)),
                 'status', jsonb_build_object('phase', 'Running'))
          FROM generate_series(0, %s - 1) i, generate_series(0, %s - 1) j,
               LATERAL (SELECT format('%%s-%%s', i, j) AS uid) u""",
                (SERVER, namespaces, rows // namespaces))
    cur.execute("ANALYZE k8s.pods")


BATCHES = {}


def timed(cur, q):
    """(seconds per execution of q over a batch of executions, its result):
    BATCH executions, or as many as take ~20 ms (a lookup's 0.1 ms is
    otherwise the timer's and the round trip's noise), fixed per query at
    its first sample."""
    if q not in BATCHES:
        t = time.perf_counter()
        cur.execute(q)
        cur.fetchone()
        BATCHES[q] = max(BATCH, min(500, int(0.02 / max(time.perf_counter() - t, 1e-5))))
    batch = BATCHES[q]
    t = time.perf_counter()
    for _ in range(batch):
        cur.execute(q)
        n = cur.fetchone()[0]
    return (time.perf_counter() - t) / batch, n


def reader(role):
    """An autocommit cursor connected as `role`."""
    conn = psycopg2.connect("", user=role)
    conn.autocommit = True
    return conn.cursor()


def scan_of(cur, q):
    cur.execute("EXPLAIN (COSTS OFF) " + q)
    plan = [r[0] for r in cur.fetchall()]
    for scan in ("Bitmap Index Scan", "Index Only Scan", "Index Scan", "Seq Scan"):
        if any(scan in p for p in plan):
            return scan
    return plan[0].strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=50000)
    ap.add_argument("--namespaces", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--json")
    a = ap.parse_args()

    setup_cluster(a.namespaces)
    owner = db.connect().cursor()
    setup_database(owner, a.rows, a.namespaces)

    # the first query of a new connection of reader_half makes its reviews
    t = time.perf_counter()
    cold = reader("reader_half")
    cold.execute(QUERIES[0][1])
    cold_rows = cold.fetchone()[0]
    cold_s = time.perf_counter() - t

    serial = db.connect().cursor()
    serial.execute("SET max_parallel_workers_per_gather = 0")
    # rbac_visible is PARALLEL UNSAFE (its requests run in subtransactions):
    # the owner without parallel workers shows what is the policy's own cost
    curs = {"owner (no policy)": owner, "owner, no parallel workers": serial,
            "reader_all": reader("reader_all"), "reader_half": cold}
    names = list(curs)
    samples = {(q, r): [] for q, _ in QUERIES for r in names}
    counts, scans = {}, {}
    floor_samples = []
    for rnd in range(a.rounds):
        for qname, q in QUERIES:
            order = names[rnd % len(names):] + names[:rnd % len(names)]
            for r in order:
                s, n = timed(curs[r], q)
                samples[(qname, r)].append(s)
                counts[(qname, r)] = n
            if qname == QUERIES[0][0]:
                floor_samples.append(timed(serial, FLOOR[1])[0])
    for qname, q in QUERIES:
        for r in names:
            scans[(qname, r)] = scan_of(curs[r], q)

    out = {"rows": a.rows, "namespaces": a.namespaces, "rounds": a.rounds,
           "cold_first_query_s": cold_s, "cold_rows": cold_rows, "queries": []}
    print()
    print("### Rows that follow RBAC (test/bench/rbac_rows.py, %s, %d rows over %d namespaces, %d rounds)"
          % (platform.node(), a.rows, a.namespaces, a.rounds))
    print()
    print("| query | reader | rows | scan | median | reader / owner (target <= 1.2) | fastest | fastest / owner's |")
    print("|---|---|---|---|---|---|---|---|")
    for qname, _ in QUERIES:
        base = statistics.median(samples[(qname, names[0])])
        base_min = min(samples[(qname, names[0])])
        for r in names:
            m = statistics.median(samples[(qname, r)])
            lo = min(samples[(qname, r)])
            print("| %s | %s | %d | %s | %.2f ms | %s | %.2f ms | %s |" % (
                qname, r, counts[(qname, r)], scans[(qname, r)], m * 1000,
                "-" if r == names[0] else "%.2fx" % (m / base), lo * 1000,
                "-" if r == names[0] else "%.2fx" % (lo / base_min)))
            out["queries"].append({"query": qname, "reader": r, "rows": counts[(qname, r)],
                                   "scan": scans[(qname, r)], "median_ms": m * 1000,
                                   "fastest_ms": lo * 1000, "fastest_ratio": lo / base_min,
                                   "ratio": m / base})
    floor = statistics.median(floor_samples)
    out["floor"] = {"query": FLOOR[1], "median_ms": floor * 1000,
                    "ratio": floor / statistics.median(samples[(QUERIES[0][0], names[0])])}
    print()
    print("- the floor of any row filter, %s (`%s`): %.2f ms (%.2fx the owner's count(*))"
          % (FLOOR[0], FLOOR[1], floor * 1000, out["floor"]["ratio"]))
    print("- reader_half's first query on a new connection (1 + %d SelfSubjectAccessReviews): %.2f s, %d rows"
          % (a.namespaces, cold_s, cold_rows))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
