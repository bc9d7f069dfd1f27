"""A fleet: 500 watches over 100 servers, registered in one transaction.

The worker used to walk freed memory while it started many watches at once
(kw_registrations_read returned a List built in SPI's context past
SPI_finish): with 50-100 servers registered in one statement it died of
signal 11 and took PostgreSQL with it, and again at every restart.  Here a
fleet user's sequence, at a fleet's size: register 500 watches (100 servers,
each a "cluster" on the one 1.20 API server, x 5 resources) in one
transaction, unwatch half of them in one, register them again in one,
restart PostgreSQL; after each step every watch converges (its rows equal
the server's objects, object by object) and no kwatch process died.
"""
import json
import os
import socket
import subprocess
import time

import pytest
from psycopg2 import sql as pgsql

import conftest
from conftest import free_port, kubectl, sql, sql_one
from fakeapi.proxy import FaultProxy

N_SERVERS = 100
RESOURCES = ("configmaps", "secrets", "serviceaccounts", "limitranges", "resourcequotas")


def server_objects(ns):
    """{resource: sorted [(uid, resourceVersion)]} of namespace ns, from the API server."""
    out = {}
    for r in RESOURCES:
        items = json.loads(kubectl("get", r, "-n", ns, "-o", "json"))["items"]
        out[r] = sorted((i["metadata"]["uid"], i["metadata"]["resourceVersion"]) for i in items)
    return out


def converged(servers, tables, ns, expected):
    """Whether every watch is healthy and synced and each server's rows of
    namespace ns in each table equal `expected`; else what differs."""
    bad = sql_one("SELECT count(*) FROM kwatch.watches WHERE server = ANY(%s)"
                  " AND NOT (healthy AND synced)", (servers,))
    n = sql_one("SELECT count(*) FROM kwatch.watches WHERE server = ANY(%s)", (servers,))
    if bad or n != len(servers) * len(RESOURCES):
        return "%d of %d watches not healthy and synced" % (bad, n)
    for r in RESOURCES:
        rows = dict(sql(pgsql.SQL("SELECT cluster, array_agg(uid || ' ' || resource_version ORDER BY uid, resource_version)"
                                  " FROM {} WHERE cluster = ANY(%s) AND namespace = %s GROUP BY cluster")
                        .format(pgsql.SQL(tables[r])), (servers, ns)))
        want = ["%s %s" % o for o in expected[r]]
        for s in servers:
            if rows.get(s, []) != want:
                return "%s on %s: %s, the server has %s" % (r, s, rows.get(s), want)
    return True


def wait_converged(servers, tables, ns, timeout=240):
    """Waits until converged(); fails showing what still differed."""
    expected = server_objects(ns)
    deadline = time.monotonic() + timeout
    while True:
        state = converged(servers, tables, ns, expected)
        if state is True:
            return
        if time.monotonic() > deadline:
            pytest.fail("the fleet did not converge in %ds: %s" % (timeout, state), pytrace=False)
        time.sleep(1)


def k8s_tables():
    """The tables of schema k8s now (the mirror tables a test made go with it:
    later tests expect a resource's default table not to exist yet)."""
    return {r[0] for r in sql("SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                              " WHERE n.nspname = 'k8s' AND c.relkind IN ('r', 'p')")}


def watch_all(servers, ns):
    """One transaction: every resource on every server, namespace ns; {resource: table}."""
    rows = sql("SELECT r, kwatch.watch(r, server => s, namespace => %s)::text"
               " FROM unnest(%s::text[]) s, unnest(%s::text[]) r",
               (ns, servers, list(RESOURCES)))
    return dict(rows)


def test_a_fleet_registered_at_once_unwatched_and_restarted(ctx):
    ns = ctx.namespace()
    servers = [ctx.server("-%d" % i) for i in range(N_SERVERS)]
    kubectl("create", "configmap", "fleet-one", "-n", ns, "--from-literal=k=v")
    log_start = conftest.PG.log_size()

    before = k8s_tables()
    tables = watch_all(servers, ns)
    ctx.tables += sorted(k8s_tables() - before)
    assert len(tables) == len(RESOURCES) and sql_one(
        "SELECT count(*) FROM kwatch.registrations WHERE server = ANY(%s)", (servers,)) == 500
    wait_converged(servers, tables, ns)

    # half of the fleet unwatched in one transaction, then registered again in one
    half = servers[::2]
    sql("SELECT count(kwatch.unwatch(w.table_name, server => w.server))"
        " FROM kwatch.registrations w WHERE w.server = ANY(%s)", (half,))
    assert sql_one("SELECT count(*) FROM kwatch.registrations WHERE server = ANY(%s)", (servers,)) == 250
    kubectl("create", "configmap", "fleet-two", "-n", ns, "--from-literal=k=v")
    assert watch_all(half, ns) == tables
    wait_converged(servers, tables, ns)

    # a restart resumes all 500 (a change made while PostgreSQL is down included)
    conftest.PG.stop()
    kubectl("create", "configmap", "fleet-three", "-n", ns, "--from-literal=k=v")
    conftest.PG.start()
    wait_converged(servers, tables, ns)

    log = conftest.PG.log_since(log_start)
    assert "terminated by signal" not in log and "was terminated" not in log, log[-3000:]
    assert "runs without status" not in log, log[-3000:]


def test_servers_that_are_down_never_fail_the_fleets_registration(ctx, settings):
    """One statement registers a watch on every server of a fleet, three of
    them down: one whose port refuses, one that accepts and never answers
    (the TLS handshake stalls), one whose name does not resolve.  The
    statement succeeds for all: a server that is down is registered from
    what kwatch knows of the resource (the watches of the servers that
    answered), and each costs the caller one connect timeout at most.  The
    servers that answer sync; each that is down shows why it waits; the one
    that refused, back later, syncs too."""
    settings(connect_timeout=2)
    cl = conftest.CLUSTER
    ns = ctx.namespace()
    kubectl("create", "configmap", "fleet-down", "-n", ns, "--from-literal=k=v")
    up = [ctx.server("-up%d" % i) for i in range(3)]
    stalled = socket.socket()
    stalled.bind(("127.0.0.1", 0))
    stalled.listen(64)                      # accepts (the kernel does), never answers
    back_port = free_port()
    down = {"-refused": "https://127.0.0.1:%d" % back_port,
            "-stalled": "https://127.0.0.1:%d" % stalled.getsockname()[1],
            "-unresolved": "https://kwatch-fleet-down.invalid:6443"}
    px = None
    try:
        for suffix, url in down.items():
            name = ctx.base + suffix
            s = pgsql.Identifier(name)
            sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch OPTIONS (api_server {},"
                          " certificate_authority {});"
                          " CREATE USER MAPPING FOR CURRENT_USER SERVER {} OPTIONS (token {})")
                .format(s, pgsql.Literal(url), pgsql.Literal(cl.ca), s, pgsql.Literal(cl.token)))
            ctx.servers.append(name)
        downs = [ctx.base + s for s in down]
        servers = up + downs
        before = k8s_tables()
        rows = sql("SELECT s, kwatch.watch('configmaps', server => s, namespace => %s)::text"
                   " FROM unnest(%s::text[]) WITH ORDINALITY u(s, i) ORDER BY i", (ns, servers))
        assert [r[0] for r in rows] == servers and len({r[1] for r in rows}) == 1, rows
        table = rows[0][1]
        ctx.tables += sorted(k8s_tables() - before)
        assert sql_one("SELECT count(*) FROM kwatch.registrations WHERE server = ANY(%s)", (servers,)) == 6

        want = sorted((i["metadata"]["uid"], i["metadata"]["resourceVersion"])
                      for i in json.loads(kubectl("get", "configmaps", "-n", ns, "-o", "json"))["items"])

        def rows_of(s):
            return sorted(sql(pgsql.SQL("SELECT uid, resource_version FROM {} WHERE cluster = %s"
                                        " AND namespace = %s").format(pgsql.SQL(table)), (s, ns)))

        deadline = time.monotonic() + 60
        while any(rows_of(s) != [tuple(w) for w in want] for s in up):
            assert time.monotonic() < deadline, [(s, rows_of(s)) for s in up]
            time.sleep(0.5)
        for s in downs:
            st = None
            deadline = time.monotonic() + 30
            while not (st and st["last_error"]):
                assert time.monotonic() < deadline, (s, st)
                time.sleep(0.5)
                st = sql("SELECT healthy, last_error FROM kwatch.watches WHERE server = %s", (s,))
                st = {"healthy": st[0][0], "last_error": st[0][1]} if st else None
            assert not st["healthy"], (s, st)

        # the server that refused comes back (the real API server behind a
        # proxy on its port): its watch syncs without anyone asking
        px = FaultProxy.for_cluster(cl.server, cl.dir / "pki", port=back_port).start()
        deadline = time.monotonic() + 60
        while rows_of(ctx.base + "-refused") != [tuple(w) for w in want]:
            assert time.monotonic() < deadline, rows_of(ctx.base + "-refused")
            time.sleep(0.5)
    finally:
        stalled.close()
        if px is not None:
            px.stop()


def fleet_kubeconfig(path, contexts):
    """A kubeconfig of the test cluster under each context name; a name
    starting with "exec" gets a user whose exec plugin prints the token."""
    cl = conftest.CLUSTER
    cred = json.dumps({"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
                       "status": {"token": cl.token}})
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": contexts[0],
           "clusters": [{"name": "test", "cluster": {"server": cl.server, "certificate-authority": str(cl.ca)}}],
           "users": [{"name": "token", "user": {"token": cl.token}},
                     {"name": "exec", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1",
                                                        "command": "/bin/sh",
                                                        "args": ["-c", "printf '%s' '" + cred + "'"]}}}],
           "contexts": [{"name": c, "context": {"cluster": "test",
                                                "user": "exec" if c.startswith("exec") else "token"}}
                        for c in contexts]}
    path.write_text(json.dumps(doc))
    path.chmod(0o644)


def test_a_kubeconfigs_contexts_become_servers_in_one_statement(ctx):
    """kwatch.import_servers(): 30 contexts (an EKS-style ARN and an exec
    plugin's among them) become 30 servers with names a user can type, a
    resource is watched on all of them in one statement and every mirror
    converges; run again after the file changed it creates the new context,
    names those that exist, reports the one gone and a name collision, and
    drops nothing."""
    ns = ctx.namespace()
    kubectl("create", "configmap", "imported", "-n", ns, "--from-literal=k=v")
    tag = ctx.base[-4:]
    names = ["team-%02d-%s" % (i, tag) for i in range(28)] + \
            ["arn:aws:eks:eu-west-1:1234:cluster/prod-" + tag, "exec-" + tag]
    kc = conftest.TEST_DIR / ("fleet-%s.kubeconfig" % tag)
    fleet_kubeconfig(kc, names)
    rows = sql("SELECT server, context, action, detail FROM kwatch.import_servers(%s, '*-' || %s)",
               (str(kc), tag))
    ctx.servers += [r[0] for r in rows if r[2] == "created"]
    assert [r[2] for r in rows] == ["created"] * 30, rows
    servers = [r[0] for r in rows]
    assert servers[0] == "team_00_" + tag and servers[28] == "arn_aws_eks_eu_west_1_1234_cluster_prod_" + tag
    assert sql("SELECT option_value FROM pg_foreign_server s, pg_options_to_table(s.srvoptions)"
               " WHERE s.srvname = %s AND option_name = 'context'", (servers[28],)) == [(names[28],)]

    # one statement watches every server of the set
    before = k8s_tables()
    table = sql_one("SELECT min(kwatch.watch('configmaps', server => s.srvname, namespace => %s)::text)"
                    " FROM pg_foreign_server s, pg_options_to_table(s.srvoptions) o"
                    " WHERE o.option_name = 'kubeconfig' AND o.option_value = %s", (ns, str(kc)))
    ctx.tables += sorted(k8s_tables() - before)
    uid = json.loads(kubectl("get", "configmap", "imported", "-n", ns, "-o", "json"))["metadata"]["uid"]
    deadline = time.monotonic() + 120
    while True:
        have = sql_one(pgsql.SQL("SELECT count(DISTINCT cluster) FROM {} WHERE uid = %s AND cluster = ANY(%s)")
                       .format(pgsql.SQL(table)), (uid, servers))
        if have == 30:
            break
        assert time.monotonic() < deadline, "%d of 30 mirrors have the ConfigMap" % have
        time.sleep(1)
    row = sql("SELECT watches, healthy, synced, objects FROM kwatch.clusters WHERE server = %s", (servers[29],))
    assert row and row[0][0] == 1 and row[0][1] == 1 and row[0][2] == 1 and row[0][3] >= 1, row

    # the file changes: one context gone, one new, one whose name another server has
    sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch OPTIONS (api_server {})")
        .format(pgsql.Identifier("late_" + tag), pgsql.Literal(conftest.CLUSTER.server)))
    ctx.servers.append("late_" + tag)
    fleet_kubeconfig(kc, names[1:] + ["new-" + tag, "late-" + tag])
    again = {r[1]: (r[0], r[2]) for r in sql("SELECT server, context, action FROM kwatch.import_servers(%s, '*-' || %s)",
                                               (str(kc), tag))}
    ctx.servers += [s for s, a in again.values() if a == "created"]
    assert again["new-" + tag] == ("new_" + tag, "created"), again
    assert again["late-" + tag] == ("late_" + tag, "collision"), again
    assert again[names[0]] == (servers[0], "gone"), again
    assert all(again[n] == (s, "exists") for n, s in zip(names[1:], servers[1:])), again
    assert sql_one("SELECT count(*) FROM pg_foreign_server WHERE srvname = %s", (servers[0],)) == 1


def stall_resolver():
    """test/fakeapi/stall_resolver.c built into the test directory (readable
    by the postgres user); returns the .so's path."""
    src = conftest.REPO / "test" / "fakeapi" / "stall_resolver.c"
    out = conftest.TEST_DIR / "stall_resolver.so"
    if not out.exists() or out.stat().st_mtime < src.stat().st_mtime:
        subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", str(out), str(src), "-ldl"], check=True)
    out.chmod(0o755)
    return out


def test_one_cluster_never_holds_up_the_fleet(ctx, settings):
    """A fleet of 24 servers that answer, and among them one of each way a
    cluster fails: a port that refuses, a listener that accepts and never
    answers (TLS stalls), a name that does not resolve, a name whose lookup
    stalls for a minute (an LD_PRELOAD shim standing in for a resolver whose
    nameserver never answers), and a server whose LIST takes 30 s (the
    fault proxy holds it).  Registered in one statement, the 24 sync before
    the slow LIST is even answered, so no failing server held the worker's
    loop or the registering backend (libcurl's threaded resolver must not
    be waited for when a lookup is given up: CURLOPT_QUICK_EXIT); each
    failing server shows its error and backs off; the slow one syncs once
    its LIST arrives."""
    cl = conftest.CLUSTER
    shim = stall_resolver()
    os.environ["LD_PRELOAD"] = str(shim)
    os.environ["KWATCH_STALL_RESOLVER_S"] = "60"
    try:
        conftest.PG.restart()
    finally:
        del os.environ["LD_PRELOAD"]
    settings(connect_timeout=2)
    ns = ctx.namespace()
    kubectl("create", "configmap", "fleet-slow", "-n", ns, "--from-literal=k=v")
    up = [ctx.server("-ok%d" % i) for i in range(24)]
    stalled = socket.socket()
    stalled.bind(("127.0.0.1", 0))
    stalled.listen(64)
    px = FaultProxy.for_cluster(cl.server, cl.dir / "pki").start()
    slow_list = px.inject("slow", on="list", seconds=30, when=lambda r: r.query.get("limit") != "1")
    failing = {"-refused": "https://127.0.0.1:%d" % free_port(),
               "-stalled": "https://127.0.0.1:%d" % stalled.getsockname()[1],
               "-unresolved": "https://kwatch-fleet-down.invalid:6443",
               "-lookup-stalls": "https://api.kwatch-stall.invalid:6443",
               "-slow": px.url}
    try:
        for suffix, url in failing.items():
            s = pgsql.Identifier(ctx.base + suffix)
            sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch OPTIONS (api_server {},"
                          " certificate_authority {});"
                          " CREATE USER MAPPING FOR CURRENT_USER SERVER {} OPTIONS (token {})")
                .format(s, pgsql.Literal(url), pgsql.Literal(cl.ca), s, pgsql.Literal(cl.token)))
            ctx.servers.append(ctx.base + suffix)
        down = [ctx.base + s for s in failing if s != "-slow"]
        slow = ctx.base + "-slow"
        before = k8s_tables()
        started = time.monotonic()
        rows = sql("SELECT s, kwatch.watch('configmaps', server => s, namespace => %s)::text"
                   " FROM unnest(%s::text[]) s", (ns, up + [slow] + down))
        registered_s = time.monotonic() - started
        print("registered %d servers in %.1f s" % (len(rows), registered_s))
        table = rows[0][1]
        ctx.tables += sorted(k8s_tables() - before)
        want = sorted((i["metadata"]["uid"], i["metadata"]["resourceVersion"])
                      for i in json.loads(kubectl("get", "configmaps", "-n", ns, "-o", "json"))["items"])

        def synced(servers):
            got = dict(sql(pgsql.SQL("SELECT cluster, array_agg(uid || ' ' || resource_version ORDER BY uid)"
                                     " FROM {} WHERE cluster = ANY(%s) AND namespace = %s GROUP BY cluster")
                           .format(pgsql.SQL(table)), (servers, ns)))
            return [s for s in servers if got.get(s) != ["%s %s" % w for w in want]]

        # the 24 sync while the slow server's LIST is still held: nothing waited for it,
        # nor for the lookup that stalls (a minute), nor for the listener that never answers
        held = px.wait_for_request(lambda r: r.kind == "list" and r.query.get("limit") != "1", timeout=30)
        while synced(up):
            assert time.monotonic() < held.at + 28, ("still not synced while the slow LIST was held",
                                                     synced(up), registered_s)
            time.sleep(0.2)
        synced_s = time.monotonic() - started
        assert synced([slow]) == [slow] and slow_list.hits
        # each failing server says why it waits, and backs off instead of retrying at once
        deadline = time.monotonic() + 30
        while True:
            st = dict((r[0], r[1:]) for r in sql(
                "SELECT server, healthy, last_error, http_errors FROM kwatch.watches WHERE server = ANY(%s)",
                (down,)))
            if all(st.get(s) and st[s][1] for s in down) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        for s in down:
            assert st.get(s) and not st[s][0] and st[s][1], (s, st.get(s))
            assert st[s][2] <= 10, ("retried without backing off", s, st[s])
        # the slow server's LIST arrives: it syncs
        deadline = time.monotonic() + 60
        while synced([slow]):
            assert time.monotonic() < deadline, sql("SELECT * FROM kwatch.watches WHERE server = %s", (slow,))
            time.sleep(0.5)
        print("the 24 that answer synced %.1f s after the registration began" % synced_s)
    finally:
        stalled.close()
        px.stop()
        conftest.PG.restart()       # without the shim


def test_relists_after_410_take_turns(ctx, settings):
    """Watches whose resourceVersions the API server no longer serves (410
    Gone, as after an etcd compaction while PostgreSQL was down) all relist;
    the worker runs at most kwatch.max_concurrent_relists of those LISTs at
    once (here 2, each held 2 s by the fault proxy) and the others wait their
    turn, so the LISTs reach the server spread out; every watch converges."""
    settings(max_concurrent_relists=2)
    cl = conftest.CLUSTER
    ns = ctx.namespace()
    resources = ("configmaps", "secrets", "serviceaccounts", "limitranges", "resourcequotas",
                 "endpoints", "services", "podtemplates")
    kubectl("create", "configmap", "turns", "-n", ns, "--from-literal=k=v")
    px = FaultProxy.for_cluster(cl.server, cl.dir / "pki").start()
    try:
        s = pgsql.Identifier(ctx.base)
        sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch OPTIONS (api_server {},"
                      " certificate_authority {});"
                      " CREATE USER MAPPING FOR CURRENT_USER SERVER {} OPTIONS (token {})")
            .format(s, pgsql.Literal(px.url), pgsql.Literal(cl.ca), s, pgsql.Literal(cl.token)))
        ctx.servers.append(ctx.base)
        before = k8s_tables()
        tables = dict(sql("SELECT r, kwatch.watch(r, server => %s, namespace => %s)::text"
                          " FROM unnest(%s::text[]) r", (ctx.base, ns, list(resources))))
        ctx.tables += sorted(k8s_tables() - before)
        sql("SELECT kwatch.wait_synced(r, server => %s, timeout => '60s') FROM unnest(%s::text[]) r",
            (ctx.base, list(resources)))
        relists0 = sql_one("SELECT sum(relists) FROM kwatch.watches WHERE server = %s", (ctx.base,))

        # every WATCH from now on is answered 410; every LIST takes 2 s
        px.inject("too_old", on="watch", times=len(resources), http=True)
        px.inject("slow", on="list", times=None, seconds=2)
        t0 = time.monotonic()
        px.cut()
        deadline = time.monotonic() + 90
        while sql_one("SELECT sum(relists) FROM kwatch.watches WHERE server = %s AND healthy AND synced",
                      (ctx.base,)) != relists0 + len(resources) or sql_one(
                "SELECT count(*) FROM kwatch.watches WHERE server = %s AND NOT (healthy AND synced)",
                (ctx.base,)):
            assert time.monotonic() < deadline, sql(
                "SELECT resource, state, relists, last_error FROM kwatch.watches WHERE server = %s",
                (ctx.base,))
            time.sleep(0.5)
        px.clear_faults()
        lists = sorted(r.at for r in px.requests_for(kind="list") if r.at >= t0)
        assert len(lists) == len(resources), lists
        # a LIST is admitted once an earlier one's items are in (>= 2 s after
        # it arrived): at most 2 arrive in any 2 s
        busiest = max(sum(1 for b in lists if a - 1.9 < b <= a) for a in lists)
        assert busiest <= 2, [round(a - t0, 2) for a in lists]
        assert lists[-1] - lists[0] >= 2 * 2 * 0.9, [round(a - t0, 2) for a in lists]
        for r in resources:
            want = sorted(i["metadata"]["uid"]
                          for i in json.loads(kubectl("get", r, "-n", ns, "-o", "json"))["items"])
            got = sorted(x[0] for x in sql(pgsql.SQL("SELECT uid FROM {} WHERE cluster = %s AND namespace = %s")
                                           .format(pgsql.SQL(tables[r])), (ctx.base, ns)))
            assert got == want, (r, got, want)
        print("8 relists, at most 2 at once, LISTs arrived at", [round(a - t0, 1) for a in lists])
    finally:
        px.stop()
