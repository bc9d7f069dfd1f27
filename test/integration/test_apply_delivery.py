"""Acting on the cluster (issue 32): whose identity each write carries, read
from the API server's audit log (cluster.sh logs the writes of configmaps,
secrets and namespaces with their user), and that an apply made at COMMIT
reaches the cluster across an API server that is down at COMMIT and a
PostgreSQL crash (SIGKILL of a backend) before it was sent; custom
resources on both control planes."""
import json
import os
import re
import signal
import threading
import time

import psycopg2
from psycopg2 import sql as pgsql

import conftest
from postgres import quietly
from cluster import audit_writes
from fakeapi.proxy import FaultProxy
from conftest import kubectl, kubectl_json, sql, sql_one, wait_until, wait_watching, watch
from live_support import import_schema
from modern_support import CERT_GROUP, CERTS, certificate, ensure_certificate_crd


def cm(ns, name, **data):
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": name, "namespace": ns}, "data": data})


def writes_in(ns, since):
    """(verb, user, code, uri) of the logged writes in namespace ns."""
    return [w for w in audit_writes(conftest.CLUSTER, since) if "/namespaces/%s/" % ns in w[3]]


def test_every_write_carries_the_roles_own_token(ctx):
    """A role with its own user mapping writes as its own Kubernetes user
    (kwatch-user), never as the PUBLIC mapping's (admin) or the
    superuser's, by each way: apply at commit (sent by the request sender),
    at once, a delete, and a live table's INSERT, UPDATE and DELETE.  A
    rolled-back apply sends only its dry run."""
    srv = ctx.server(auth="token")          # the superuser's own mapping: admin
    ns = ctx.namespace()
    role = ("kw_ident_" + ctx.base.replace("-", "_"))[:63]
    r, s = pgsql.Identifier(role), pgsql.Identifier(srv)
    schema = re.sub(r"[^a-z0-9]+", "_", ctx.base + "_id")[:60]
    sql(pgsql.SQL("CREATE ROLE {} LOGIN").format(r))
    try:
        sql(pgsql.SQL("GRANT USAGE ON FOREIGN SERVER {} TO {};"
                      " CREATE USER MAPPING FOR PUBLIC SERVER {} OPTIONS (token {});"
                      " CREATE USER MAPPING FOR {} SERVER {} OPTIONS (token {})").format(
            s, r, s, pgsql.Literal(conftest.CLUSTER.token),
            r, s, pgsql.Literal(conftest.CLUSTER.env["KWATCH_K8S_USER_TOKEN"])))
        import_schema(srv, schema, "LIMIT TO (configmaps)")
        sql(pgsql.SQL("GRANT USAGE ON SCHEMA {} TO {}; GRANT ALL ON ALL TABLES IN SCHEMA {} TO {}")
            .format(pgsql.Identifier(schema), r, pgsql.Identifier(schema), r))
        since = conftest.CLUSTER.audit_size()

        conn = conftest.PG.connect(autocommit=True)
        try:
            as_role = lambda q, p=None: sql(pgsql.SQL("SET ROLE {}; ").format(r).as_string(conn) + q, p, conn=conn)
            # rolled back: the dry run only
            conn.autocommit = False
            as_role("SELECT kwatch.apply(%s::jsonb, server => %s)", (cm(ns, "rolled", k="v"), srv))
            conn.rollback()
            conn.autocommit = True
            aid = as_role("SELECT (kwatch.apply(%s::jsonb, server => %s)).id", (cm(ns, "at-commit", k="v"), srv))[0][0]
            assert as_role("SELECT (kwatch.wait_apply(%s, '1 min')).state", (aid,)) == [("applied",)]
            as_role("SELECT kwatch.apply(%s::jsonb, server => %s, at => 'now')", (cm(ns, "at-once", k="v"), srv))
            as_role("SELECT kwatch.delete('configmaps', 'at-once', namespace => %s, server => %s, at => 'now')",
                    (ns, srv))
            t = "%s.configmaps" % schema
            as_role("INSERT INTO %s (namespace, name, object) VALUES (%%s, 'live', '{\"data\": {}}')" % t, (ns,))
            as_role("UPDATE %s SET labels = '{\"by\": \"role\"}' WHERE namespace = %%s AND name = 'live'" % t, (ns,))
            as_role("DELETE FROM %s WHERE namespace = %%s AND name IN ('live', 'at-commit')" % t, (ns,))
        finally:
            conn.close()

        writes = wait_until(lambda: (lambda w: w if len(w) >= 9 else None)(writes_in(ns, since)),
                            20, "the writes in the audit log")
        assert {user for _, user, _, _ in writes} == {"kwatch-user"}, writes
        rolled = [w for w in writes if "/rolled" in w[3]]
        assert len(rolled) == 1 and "dryRun=All" in rolled[0][3], rolled
        by_verb = sorted((verb, re.sub(r"\?.*", "", uri).rsplit("/", 1)[-1], "dryRun" in uri)
                         for verb, _, _, uri in writes if "/rolled" not in uri)
        assert by_verb == sorted([
            ("patch", "at-commit", True), ("patch", "at-commit", False),   # dry run, then the apply
            ("patch", "at-once", True), ("patch", "at-once", False),
            ("delete", "at-once", False), ("delete", "at-once", False),  # its dry run is in the body
            ("create", "configmaps", False),                             # INSERT: POST to the collection
            ("patch", "live", False), ("delete", "live", False), ("delete", "at-commit", False)]), by_verb
        assert kubectl("get", "configmaps", "-n", ns, "-o", "name").split() == ["configmap/kube-root-ca.crt"]
    finally:
        sql(pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(pgsql.Identifier(schema)))
        sql(pgsql.SQL("DROP OWNED BY {} CASCADE; DROP ROLE {}").format(r, r))


def test_an_apply_survives_an_api_server_down_at_commit_and_a_crash(ctx):
    """The API server is stopped right after the dry runs, the transaction
    commits while it is down, PostgreSQL crashes (SIGKILL of a backend:
    every process restarts) while the apply is still pending, and the API
    server comes back 20 s after it stopped: the applies arrive, in commit
    order, each once."""
    srv = ctx.server()
    ns = ctx.namespace()
    conn = conftest.PG.connect(autocommit=False)
    try:
        first = sql_one("SELECT (kwatch.apply(%s::jsonb, server => %s)).id", (cm(ns, "late", v="1"), srv), conn=conn)
        second = sql_one("SELECT (kwatch.apply(%s::jsonb, server => %s)).id", (cm(ns, "late", v="2"), srv), conn=conn)
        down = threading.Thread(target=conftest.CLUSTER.restart_apiserver, kwargs={"down_s": 20})
        t0 = time.monotonic()
        down.start()
        wait_until(lambda: not conftest.CLUSTER.ready(), 20, "the API server stopped")
        conn.commit()
    finally:
        conn.close()
    # the sender tries, fails to connect and waits its backoff; the apply stays pending
    wait_until(lambda: sql_one("SELECT attempts FROM kwatch.applies WHERE id = %s", (first,)) >= 1,
               20, "a first attempt while the API server is down")
    assert sql("SELECT state FROM kwatch.applies WHERE id IN (%s, %s)", (first, second)) == [("pending",)] * 2

    # a crash while it is pending: the queue is in a table, the sender starts again
    backend = sql_one("SELECT pid FROM pg_stat_activity WHERE backend_type = 'kwatch request sender'")
    assert backend, "no request sender running"
    os.kill(backend, signal.SIGKILL)
    time.sleep(1)
    conftest.PG.close()
    wait_until(quietly(lambda: sql_one("SELECT kwatch.worker_pid()")), 60, "PostgreSQL back")

    down.join()
    assert time.monotonic() - t0 >= 20
    rows = wait_until(quietly(lambda: (lambda r: r if all(x[0] == "applied" for x in r) else None)(
        sql("SELECT state, attempts, finished_at FROM kwatch.applies WHERE id IN (%s, %s) ORDER BY id",
            (first, second)))), 120, "both applies sent once the API server is back")
    # the first was tried while the API server was down; the second waited for it
    assert rows[0][1] >= 2 and rows[1][1] == 1 and rows[0][2] <= rows[1][2], rows
    late = kubectl_json("get", "configmap", "late", "-n", ns, "--show-managed-fields")
    assert late["data"] == {"v": "2"}, late["data"]   # commit order: the later apply wins
    assert [m["manager"] for m in late["metadata"]["managedFields"]] == ["kwatch"]


def test_custom_resources_by_apply_and_through_a_live_table(plane, ctx):
    """On both planes, Certificates (a CRD with a status subresource): a
    rolled-back apply sends its dry run only (on 1.36, counted by the API
    server's apiserver_request_total), one at COMMIT arrives and the mirror
    shows it when wait_apply(wait_mirror) returns, and a live table's
    UPDATE and DELETE reach the cluster and then the mirror."""
    ensure_certificate_crd()
    ns = ctx.namespace()
    srv = ctx.server()
    table = watch(CERTS, srv, namespace=ns)
    wait_watching(srv, CERTS)

    def patches(dry_run):
        if not plane.modern:
            return None
        # server-side apply counts as verb APPLY
        return plane.metric("apiserver_request_total", verb="APPLY", group=CERT_GROUP,
                            resource="certificates", dry_run=dry_run)

    def manifest(name, **spec):
        c = certificate(name, 0, **spec)
        c["metadata"] = {"name": name, "namespace": ns, "labels": c["metadata"].get("labels", {})}
        c.pop("status", None)
        return json.dumps(c)

    dry0, real0 = patches("All"), patches("")
    conn = conftest.PG.connect(autocommit=False)
    try:
        sql("SELECT kwatch.apply(%s::jsonb, server => %s)", (manifest("rolled"), srv), conn=conn)
        conn.rollback()
    finally:
        conn.close()
    aid = sql_one("SELECT (kwatch.apply(%s::jsonb, server => %s)).id", (manifest("applied", renewBefore="360h0m0s"), srv))
    assert sql("SELECT (kwatch.wait_apply(%s, '1 min', wait_mirror => true)).state", (aid,)) == [("applied",)]
    assert sql_one("SELECT object->'spec'->>'renewBefore' FROM %s WHERE cluster = %%s AND name = 'applied'"
                   % table, (srv,)) == "360h0m0s"
    assert kubectl("get", CERTS, "-n", ns, "-o", "name").split() == ["certificate.cert-manager.io/applied"]
    if plane.modern:
        # the rolled-back apply and the sent one each made a dry run; only one was sent
        assert (patches("All") - dry0, patches("") - real0) == (2, 1), \
            [l for l in plane.metrics().splitlines() if 'verb="APPLY"' in l]

    schema = re.sub(r"[^a-z0-9]+", "_", ctx.base + "_cr")[:60]
    import_schema(srv, schema, "LIMIT TO (certificates)")
    try:
        t = "%s.certificates" % schema
        rv = sql_one("UPDATE %s SET object = jsonb_set(object, '{spec,renewBefore}', '\"720h0m0s\"')"
                     " WHERE namespace = %%s AND name = 'applied' RETURNING resource_version" % t, (ns,))
        assert kubectl_json("get", CERTS, "applied", "-n", ns)["spec"]["renewBefore"] == "720h0m0s"
        sql("SELECT kwatch.wait_current(%s, server => %s, timeout => '1 min')", (CERTS, srv))
        assert sql("SELECT resource_version, object->'spec'->>'renewBefore' FROM %s WHERE cluster = %%s"
                   % table, (srv,)) == [(rv, "720h0m0s")]
        assert sql("DELETE FROM %s WHERE namespace = %%s RETURNING name" % t, (ns,)) == [("applied",)]
        sql("SELECT kwatch.wait_current(%s, server => %s, timeout => '1 min')", (CERTS, srv))
        assert sql_one("SELECT count(*) FROM %s WHERE cluster = %%s" % table, (srv,)) == 0
    finally:
        sql(pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(pgsql.Identifier(schema)))


def test_the_sender_retries_429_after_retry_after_and_5xx(ctx):
    """Through the fault proxy (which forwards writes to the real API
    server): the apply's send is answered 429 with Retry-After: 3, then 503
    twice; the request sender waits the Retry-After, backs off on the 503s,
    and the fourth attempt lands.  In the statement (at => 'now') the same
    503 fails the call at once, with the status in the message."""
    cl = conftest.CLUSTER
    px = FaultProxy.for_cluster(cl.server, cl.dir / "pki").start()
    try:
        srv = ctx.base + "-px"
        s = pgsql.Identifier(srv)
        sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch OPTIONS (api_server {}, certificate_authority {})")
            .format(s, pgsql.Literal(px.url), pgsql.Literal(cl.ca)))
        ctx.servers.append(srv)
        sql(pgsql.SQL("CREATE USER MAPPING FOR CURRENT_USER SERVER {} OPTIONS (token {})")
            .format(s, pgsql.Literal(cl.token)))
        ns = ctx.namespace()
        sent = lambda r: "dryRun" not in r.query
        px.inject("status", on="write", code=429, retry_after=3, times=1, when=sent)
        px.inject("status", on="write", code=503, times=2, when=sent)
        aid = sql_one("SELECT (kwatch.apply(%s::jsonb, server => %s)).id", (cm(ns, "retried", k="v"), srv))
        assert sql("SELECT (kwatch.wait_apply(%s, '1 min')).state", (aid,)) == [("applied",)]
        assert sql("SELECT attempts, http_status FROM kwatch.applies WHERE id = %s", (aid,)) == [(4, 201)]
        writes = [r for r in px.requests_for(kind="write") if sent(r) and r.path.endswith("/retried")]
        assert [r.status for r in writes] == [429, 503, 503, 201], writes
        assert writes[1].at - writes[0].at >= 2.9, [w.at for w in writes]   # Retry-After: 3
        assert kubectl_json("get", "configmap", "retried", "-n", ns)["data"] == {"k": "v"}

        px.inject("status", on="write", code=503, times=1, when=sent)
        try:
            sql("SELECT kwatch.apply(%s::jsonb, server => %s, at => 'now')", (cm(ns, "now-503", k="v"), srv))
            raise AssertionError("a 503 at once did not fail the statement")
        except psycopg2.Error as e:
            assert "503" in (e.diag.message_detail or "") + e.pgerror, e.pgerror
        assert kubectl("get", "configmap", "now-503", "-n", ns, "--ignore-not-found", "-o", "name").strip() == ""
    finally:
        px.stop()


def test_an_idle_sender_sleeps():
    """With nothing pending the request sender sleeps until kwatch.apply()
    wakes it at commit, or 10 s (src/sender/sender.c, SENDER_IDLE_MS).  0.7.0
    as first written woke every 50 ms on an empty queue (GREATEST ignored
    min()'s NULL), 1.6 % of a core per database for nothing: counted here by
    its voluntary context switches (each sleep is one)."""
    wait_until(lambda: sql_one("SELECT count(*) FROM kwatch.apply_queue WHERE state = 'pending'") == 0,
               120, "no apply pending")
    pid = wait_until(lambda: sql_one("SELECT pid FROM pg_stat_activity"
                                     " WHERE backend_type = 'kwatch request sender'"),
                     60, "the request sender running")

    def switches():
        with open("/proc/%d/status" % pid) as f:
            return int(re.search(r"^voluntary_ctxt_switches:\s+(\d+)", f.read(), re.M).group(1))
    time.sleep(1)   # the round that saw the last apply
    before = switches()
    time.sleep(4)
    woke = switches() - before
    assert woke <= 10, "the idle request sender woke %d times in 4 s" % woke


def test_a_pending_apply_keeps_its_server(ctx):
    """A transaction queues an apply; before it commits an admin renames the
    server.  The rename waits for that transaction (apply() holds a lock on
    the server until its transaction ends, as watch() does) and is then
    refused, since a pending apply depends on the server; the apply goes to
    the server it was made for.  A server whose name is gone when the sender
    looks fails its applies (42704) and is never retried, so a new server of
    that name never receives them."""
    srv = ctx.server(auth="token")
    ns = ctx.namespace()
    a = conftest.PG.connect(autocommit=False)
    try:
        cur = a.cursor()
        cur.execute("SELECT (kwatch.apply(%s::jsonb, server => %s)).id", (cm(ns, "kept", k="v"), srv))
        aid = cur.fetchone()[0]
        outcome = {}

        def rename():
            try:
                sql(pgsql.SQL("ALTER SERVER {} RENAME TO {}").format(
                    pgsql.Identifier(srv), pgsql.Identifier(srv + "-renamed")))
                outcome["error"] = None
            except psycopg2.Error as e:
                outcome["error"] = e
        t = threading.Thread(target=rename)
        t.start()
        time.sleep(1.5)
        assert t.is_alive(), "the rename waits for the transaction that queued the apply"
        a.commit()
        t.join(30)
        e = outcome["error"]
        assert e is not None and e.pgcode == "55006", e
        assert "pending apply %d" % aid in (e.diag.message_detail or ""), e.diag.message_detail
        assert sql("SELECT (kwatch.wait_apply(%s, '1 min')).state", (aid,)) == [("applied",)]
        assert kubectl_json("get", "configmap", "kept", "-n", ns)["data"] == {"k": "v"}
    finally:
        a.close()


def test_a_server_that_stalls_writes_holds_no_other_roles_applies(ctx, settings):
    """A tenant's server answers the dry runs and then stalls every write
    (the fault proxy never answers them); the tenant has three applies
    pending there.  Another role's three applies to another server go out
    as soon as the stalled request gives up (kwatch.apply_send_timeout),
    not one per round behind a 30 s request each (59, 89 and 119 s in
    0.7.0): the stalled server's applies wait out its backoff together."""
    settings(apply_send_timeout=3)
    cl = conftest.CLUSTER
    px = FaultProxy.for_cluster(cl.server, cl.dir / "pki").start()
    tenant, other = ("kw_stall_t_" + ctx.base.replace("-", "_"))[:63], ("kw_stall_o_" + ctx.base.replace("-", "_"))[:63]
    ns = ctx.namespace()
    slow = ctx.base + "-slow"
    fast = ctx.server("-fast", auth="token")
    try:
        sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch OPTIONS (api_server {}, certificate_authority {})")
            .format(pgsql.Identifier(slow), pgsql.Literal(px.url), pgsql.Literal(cl.ca)))
        ctx.servers.append(slow)
        for role, srv in ((tenant, slow), (other, fast)):
            r, s = pgsql.Identifier(role), pgsql.Identifier(srv)
            sql(pgsql.SQL("CREATE ROLE {0}; GRANT USAGE ON FOREIGN SERVER {1} TO {0};"
                          " CREATE USER MAPPING FOR {0} SERVER {1} OPTIONS (token {2})")
                .format(r, s, pgsql.Literal(cl.token)))
        px.inject("stall", on="write", times=None, when=lambda q: "dryRun" not in q.query)

        def apply_as(role, srv, name):
            return sql_one(pgsql.SQL("SET ROLE {}; SELECT (kwatch.apply(%s::jsonb, server => %s)).id")
                           .format(pgsql.Identifier(role)), (cm(ns, name, k="v"), srv))
        stalled = [apply_as(tenant, slow, "stalled-%d" % i) for i in range(3)]
        sql("RESET ROLE")
        started = time.monotonic()
        mine = [apply_as(other, fast, "other-%d" % i) for i in range(3)]
        sql("RESET ROLE")
        for aid in mine:
            assert sql("SELECT (kwatch.wait_apply(%s, '2 min')).state", (aid,)) == [("applied",)]
        done = time.monotonic()
        # 0.7.0 sent a stalled request before each of them (a round each);
        # now the stalled server's applies wait out one backoff together
        tries = [q for q in px.requests_for(kind="write") if "dryRun" not in q.query and q.at <= done]
        assert 1 <= len(tries) <= 2, "%d stalled requests before the other role's 3 applies (%.1f s)" % (
            len(tries), done - started)
        states = sql("SELECT state FROM kwatch.applies WHERE id = ANY(%s)", (stalled,))
        assert [s for (s,) in states] == ["pending"] * 3, states
    finally:
        sql("RESET ROLE")
        px.stop()
        for role in (tenant, other):
            if sql_one("SELECT count(*) FROM pg_roles WHERE rolname = %s", (role,)):
                sql("UPDATE kwatch.apply_queue SET state = 'failed' WHERE role = %s::regrole AND state = 'pending'", (role,))
                sql(pgsql.SQL("DROP OWNED BY {0} CASCADE; DROP ROLE {0}").format(pgsql.Identifier(role)))
