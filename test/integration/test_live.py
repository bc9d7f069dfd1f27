"""Live foreign tables (src/live/fdw.c): IMPORT FOREIGN SCHEMA, scans compared with
`kubectl get -o json` object by object, selector pushdown and its local
re-check, pagination, LIMIT, estimates, error SQLSTATEs, cancel (writes:
test_live_write.py)."""
import json
import os
import re
import time

import psycopg2
import pytest
from psycopg2 import sql as pgsql

import conftest
from conftest import create_pods, free_port, kubectl, kubectl_json, sql, sql_one
from live_support import (StalledServer, assert_live_matches, explain, foreign_scan,
                          foreign_tables, import_schema, live_diff, live_rows, request_of)

COLS = "uid, resource_version, namespace, name, labels, object"


def schema_for(ctx, suffix=""):
    return re.sub(r"[^a-z0-9]+", "_", ctx.base + suffix)[:60]


@pytest.fixture
def live(ctx):
    """A kwatch server with every listable resource imported into a schema: (server, schema)."""
    srv = ctx.server()
    schema = schema_for(ctx)
    import_schema(srv, schema)
    yield srv, schema
    sql(pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(pgsql.Identifier(schema)))


def sql_error(query, params=None):
    with pytest.raises(psycopg2.Error) as e:
        sql(query, params)
    return e.value


# ------------------------------------------------------------------ IMPORT

def test_import_foreign_schema(ctx):
    srv = ctx.server()
    schema = schema_for(ctx)
    try:
        # every resource `kubectl api-resources --verbs=list` shows, once,
        # but Secrets, which are imported only when asked for (test_secrets.py)
        for attempt in range(3):  # a CRD another test deleted may still be going away
            import_schema(srv, schema)
            tables = foreign_tables(schema)
            want = set(kubectl("api-resources", "--verbs=list", "-o", "name").split()) - {"secrets"}
            got = {o["resource"] for o in tables.values()}
            if got == want:
                break
        assert got == want
        assert len(tables) == len(want)
        assert tables["pods"] == {"resource": "pods", "api_version": "v1", "namespaced": "true",
                                  "kind": "Pod"}
        assert tables["nodes"]["namespaced"] == "false"
        assert tables["deployments"]["resource"] == "deployments.apps"
        # events exist in two groups: the core one keeps the plain name
        assert tables["events"]["resource"] == "events"
        assert tables["events_events_k8s_io"]["resource"] == "events.events.k8s.io"

        # the same columns as the mirror tables, in the same order
        mirror = "live_cmp_" + schema[-20:]
        sql("SELECT kwatch.create_mirror_table(%s, '', 'v1', 'pods')", (mirror,))
        try:
            def columns(nsp, rel):
                return sql("SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute"
                           " WHERE attrelid = (quote_ident(%s) || '.' || quote_ident(%s))::regclass"
                           " AND attnum > 0 AND NOT attisdropped ORDER BY attnum", (nsp, rel))
            assert columns(schema, "pods") == columns("k8s", mirror)
        finally:
            sql(pgsql.SQL("DROP TABLE k8s.{} CASCADE").format(pgsql.Identifier(mirror)))

        import_schema(srv, schema, "LIMIT TO (pods, nodes)")
        assert set(foreign_tables(schema)) == {"pods", "nodes"}
        import_schema(srv, schema, "EXCEPT (pods, events)")
        rest = set(foreign_tables(schema))
        assert "pods" not in rest and "events" not in rest
        assert rest == set(tables) - {"pods", "events"}

        e = sql_error(pgsql.SQL("IMPORT FOREIGN SCHEMA kube_system FROM SERVER {} INTO {}")
                      .format(pgsql.Identifier(srv), pgsql.Identifier(schema)))
        assert e.pgcode == "3F000", e.pgerror
    finally:
        sql(pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(pgsql.Identifier(schema)))


# ------------------------------------------------------------------ scans

def test_live_scans_match_kubectl(ctx, live):
    srv, s = live
    ns = ctx.namespace()
    other = ctx.namespace("-other")
    create_pods(ns, {"web-1": {"app": "web", "tier": "front"}, "web-2": {"app": "web", "tier": "back"},
                     "db-1": {"app": "db", "tier": "back"}, "bare": {},
                     "job-1": {"app": "job", "tier": "batch"}})
    create_pods(other, {"web-9": {"app": "web"}})
    pods = s + ".pods"

    # the issue's example: label selector on the namespaced path
    q = "SELECT %s FROM %s WHERE labels->>'app' = 'web' AND namespace = %%s" % (COLS, pods)
    req = request_of(q, (ns,))
    assert req == "GET /api/v1/namespaces/%s/pods?labelSelector=app=web&limit=500" % ns
    diff = live_diff(live_rows(q, (ns,)), kubectl_json("get", "pods", "-n", ns, "-l", "app=web")["items"])
    assert diff is None, diff
    assert len(live_rows(q, (ns,))) == 2

    # whole namespace, all namespaces (filtered to ours), IN lists, ?, @>
    assert_live_matches(pods, "namespace = %s", (ns,), ["pods", "-n", ns])
    assert_live_matches(pods, "labels->>'tier' IN ('front', 'back') AND namespace = %s", (ns,),
                        ["pods", "-n", ns, "-l", "tier in (front,back)"])
    assert_live_matches(pods, "labels->>'tier' NOT IN ('front', 'back') AND namespace = %s", (ns,),
                        ["pods", "-n", ns, "-l", "tier,tier notin (front,back)"])
    assert_live_matches(pods, "labels ? 'app' AND namespace = %s", (ns,), ["pods", "-n", ns, "-l", "app"])
    assert_live_matches(pods, "NOT (labels ? 'app') AND namespace = %s", (ns,),
                        ["pods", "-n", ns, "-l", "!app"])
    assert_live_matches(pods, """labels @> '{"app": "web", "tier": "back"}' AND namespace = %s""",
                        (ns,), ["pods", "-n", ns, "-l", "app=web,tier=back"])
    # namespace IN (...): one LIST per namespace
    q = "SELECT %s FROM %s WHERE labels->>'app' = 'web' AND namespace IN (%%s, %%s)" % (COLS, pods)
    assert request_of(q, (ns, other)) == (
        "GET /api/v1/namespaces/%s/pods?labelSelector=app=web&limit=500; "
        "GET /api/v1/namespaces/%s/pods?labelSelector=app=web&limit=500" % (ns, other))
    items = (kubectl_json("get", "pods", "-n", ns, "-l", "app=web")["items"] +
             kubectl_json("get", "pods", "-n", other, "-l", "app=web")["items"])
    diff = live_diff(live_rows(q, (ns, other)), items)
    assert diff is None, diff
    plan = foreign_scan(explain(q, (ns, other), analyze=True))
    assert plan["Kubernetes Pages"] == 2 and plan["Actual Rows"] == 3
    # all namespaces: the label selector on /api/v1/pods; a LIKE stays local
    q = ("SELECT %s FROM %s WHERE labels->>'app' = 'web' AND namespace LIKE %%s"
         % (COLS, pods))
    assert request_of(q, (ns + "%",)) == "GET /api/v1/pods?labelSelector=app=web&limit=500"
    diff = live_diff(live_rows(q, (ns + "%",)), items)
    assert diff is None, diff

    # field selectors: metadata.name, status.phase, spec.nodeName
    q = "SELECT %s FROM %s WHERE name = 'web-1' AND namespace = %%s" % (COLS, pods)
    assert "fieldSelector=metadata.name=web-1" in request_of(q, (ns,))
    assert_live_matches(pods, "name = 'web-1' AND namespace = %s", (ns,),
                        ["pods", "-n", ns, "--field-selector", "metadata.name=web-1"])
    q = "SELECT %s FROM %s WHERE phase = 'Pending' AND namespace = %%s" % (COLS, pods)
    assert "fieldSelector=status.phase=Pending" in request_of(q, (ns,))
    assert_live_matches(pods, "phase = 'Pending' AND namespace = %s", (ns,),
                        ["pods", "-n", ns, "--field-selector", "status.phase=Pending"])
    # spec.nodeName!=x: the server counts a missing nodeName as "" and returns
    # every unscheduled pod; SQL's NULL <> 'x' is not true: the filter drops them
    q = "SELECT %s FROM %s WHERE object->'spec'->>'nodeName' <> 'nowhere' AND namespace = %%s" % (
        COLS, pods)
    assert "fieldSelector=spec.nodeName!=nowhere" in request_of(q, (ns,))
    assert len(kubectl_json("get", "pods", "-n", ns, "--field-selector", "spec.nodeName!=nowhere")
               ["items"]) == 5
    assert live_rows(q, (ns,)) == {}

    # cluster-scoped resources
    assert_live_matches(s + ".namespaces", "name IN (%s, %s)", (ns, other),
                        ["namespaces", ns, other])
    assert request_of("SELECT * FROM %s.namespaces WHERE name = %%s" % s, (ns,)) == \
        "GET /api/v1/namespaces?fieldSelector=metadata.name=%s&limit=500" % ns
    assert_live_matches(s + ".namespaces", "name = %s", (ns,), ["namespaces", ns])

    # typed columns: the same values the mirror's generated columns compute
    row = sql("SELECT cluster, phase, ready, restart_count, created_at IS NOT NULL, node_name"
              " FROM %s WHERE namespace = %%s AND name = 'web-1'" % pods, (ns,))
    assert row == [(srv, "Pending", False, 0, True, None)]


def test_local_recheck_where_selectors_differ(ctx, live):
    """Selector semantics differ from SQL's; the local filter makes the answer SQL's."""
    srv, s = live
    ns = ctx.namespace()
    create_pods(ns, {"a": {"app": "web"}, "b": {"app": "db"}, "c": {}, "d": {"app": "api"}})
    pods = s + ".pods"

    def names(where):
        return sorted(r[0] for r in sql("SELECT name FROM %s WHERE namespace = %%s AND %s"
                                        % (pods, where), (ns,)))

    # app!=web on the server also matches "c" (no app label); SQL's <> is NULL there
    assert "labelSelector=app!=web" in request_of(
        "SELECT name FROM %s WHERE namespace = %%s AND labels->>'app' <> 'web'" % pods, (ns,))
    assert len(kubectl_json("get", "pods", "-n", ns, "-l", "app!=web")["items"]) == 3
    assert names("labels->>'app' <> 'web'") == ["b", "d"]
    # notin: the same
    assert names("labels->>'app' NOT IN ('web', 'db')") == ["d"]
    # IS NULL -> !app: the same semantics
    assert names("labels->>'app' IS NULL") == ["c"]
    # IN with a NULL element stays local
    assert names("labels->>'app' IN ('web', NULL)") == ["a"]
    # a non-label value can match nothing; not sent, still answered
    assert names("labels->>'app' = 'not a label value'") == []
    # OR is not pushed, answered locally
    assert names("(labels->>'app' = 'web' OR name = 'c')") == ["a", "c"]


def test_deployments_and_crd_by_create_foreign_table(ctx):
    srv = ctx.server()
    ns = ctx.namespace()
    schema = schema_for(ctx)
    group = "live-%s.example.com" % conftest.RUN_ID
    from test_crd import crd_manifest, crontab
    resource = "crontabs." + group
    ctx.crds.append(resource)
    kubectl("apply", "-f", "-", input=json.dumps(crd_manifest(group)))
    conftest.wait_crd_established(resource)
    for i in range(3):
        kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(
            crontab(group, "ct-%d" % i, {"cronSpec": "* * * * %d" % i}, {"i": str(i)})))
    kubectl("create", "deployment", "web", "-n", ns, "--image=registry.invalid/web:1", "--replicas=2")
    try:
        sql(pgsql.SQL("CREATE SCHEMA {}").format(pgsql.Identifier(schema)))
        for table, res, extra in (("deploy", "deployments.apps", ", replicas integer"),
                                  ("crontabs", resource, ""), ("ct", "ct", ""),
                                  ("ct_bad", resource, ", replicas integer")):
            sql(pgsql.SQL("CREATE FOREIGN TABLE {}.{} (cluster text, namespace text, name text,"
                          " uid text, resource_version text, labels jsonb{}, object jsonb)"
                          " SERVER {} OPTIONS (resource {})").format(
                pgsql.Identifier(schema), pgsql.Identifier(table), pgsql.SQL(extra),
                pgsql.Identifier(srv), pgsql.Literal(res)))
        assert request_of("SELECT * FROM %s.deploy WHERE namespace = %%s" % schema, (ns,)) == \
            "GET /apis/apps/v1/namespaces/%s/deployments?limit=500" % ns
        rows = assert_live_matches(schema + ".deploy", "namespace = %s", (ns,),
                                   ["deployments", "-n", ns])
        assert [r["name"] for r in rows.values()] == ["web"]
        assert sql_one("SELECT replicas FROM %s.deploy WHERE namespace = %%s" % schema, (ns,)) == 2
        assert_live_matches(schema + ".crontabs", "namespace = %s", (ns,), [resource, "-n", ns])
        assert_live_matches(schema + ".ct", "namespace = %s AND labels->>'i' IN ('0', '2')", (ns,),
                            [resource, "-n", ns, "-l", "i in (0,2)"])
        # a typed column of another resource is no column of this one
        e = sql_error("SELECT name FROM %s.ct_bad" % schema)
        assert e.pgcode == "42703" and "replicas" in e.diag.message_primary, e.pgerror
    finally:
        sql(pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(pgsql.Identifier(schema)))


def test_pagination_many_pages(ctx, live, settings):
    srv, s = live
    ns = ctx.namespace()
    create_pods(ns, {"p-%02d" % i: {"i": str(i), "odd": str(i % 2)} for i in range(23)})
    settings(list_page_size=4)
    q = "SELECT %s FROM %s.pods WHERE namespace = %%s" % (COLS, s)
    plan = foreign_scan(explain(q, (ns,), analyze=True))
    assert plan["Kubernetes Request"].endswith("?limit=4")
    assert plan["Kubernetes Pages"] == 6  # 23 objects, 4 a page
    assert plan["Actual Rows"] == 23
    assert_live_matches(s + ".pods", "namespace = %s", (ns,), ["pods", "-n", ns])
    # with a selector the pages hold fewer matches, continue tokens still followed
    assert_live_matches(s + ".pods", "namespace = %s AND labels->>'odd' = '1'", (ns,),
                        ["pods", "-n", ns, "-l", "odd=1"])


def test_limit_pushdown(ctx, live):
    srv, s = live
    ns = ctx.namespace()
    create_pods(ns, {"p-%d" % i: {"app": "web"} for i in range(7)})
    q = "SELECT name FROM %s.pods WHERE namespace = %%s AND labels->>'app' = 'web' LIMIT 3" % s
    plan = foreign_scan(explain(q, (ns,), analyze=True))
    assert plan["Kubernetes Request"].endswith("labelSelector=app=web&limit=3")
    assert plan["Kubernetes Pages"] == 1 and plan["Actual Rows"] == 3
    names = {r[0] for r in sql(q, (ns,))}
    assert len(names) == 3 and names <= {"p-%d" % i for i in range(7)}
    # OFFSET: limit covers both; a clause that is re-checked keeps the page size
    assert request_of(q.replace("LIMIT 3", "LIMIT 2 OFFSET 3"), (ns,)).endswith("&limit=5")
    assert len(sql(q.replace("LIMIT 3", "LIMIT 2 OFFSET 3"), (ns,))) == 2
    q2 = "SELECT name FROM %s.pods WHERE namespace = %%s AND phase = 'Pending' LIMIT 3" % s
    assert request_of(q2, (ns,)).endswith("&limit=500")
    assert len(sql(q2, (ns,))) == 3


def test_estimates_and_join_with_local_table(ctx, live):
    srv, s = live
    ns = ctx.namespace()
    create_pods(ns, {"p-%02d" % i: {"app": "web" if i < 5 else "db"} for i in range(30)})
    # limit=1 LIST: remainingItemCount + 1 = the namespace's size
    plan = foreign_scan(explain("SELECT * FROM %s.pods WHERE namespace = %%s" % s, (ns,)))
    assert plan["Plan Rows"] == 30
    # a pushed name is one row
    plan = foreign_scan(explain("SELECT * FROM %s.pods WHERE name = 'p-01'" % s))
    assert plan["Plan Rows"] == 1

    # join: a local table of wanted names
    tmp = "wanted_" + schema_for(ctx)[-20:]
    sql("CREATE TABLE %s (name text PRIMARY KEY, note text)" % tmp)
    try:
        sql("INSERT INTO %s SELECT 'p-' || lpad(i::text, 2, '0'), 'n' || i"
            " FROM generate_series(0, 29, 3) i" % tmp)
        rows = sql("SELECT p.name, w.note, p.labels->>'app' FROM %s.pods p JOIN %s w USING (name)"
                   " WHERE p.namespace = %%s ORDER BY 1" % (s, tmp), (ns,))
        assert [r[0] for r in rows] == ["p-%02d" % i for i in range(0, 30, 3)]
        assert [r[2] for r in rows] == ["web" if i < 5 else "db" for i in range(0, 30, 3)]
        # the live scan runs once (not once per local row)
        plan = explain("SELECT p.name FROM %s.pods p JOIN %s w USING (name)"
                       " WHERE p.namespace = %%s" % (s, tmp), (ns,), analyze=True)
        assert foreign_scan(plan)["Actual Loops"] == 1
    finally:
        sql("DROP TABLE %s" % tmp)


# ------------------------------------------------------------------ errors

def make_table(server, table, resource, extra_options=""):
    sql(pgsql.SQL("CREATE FOREIGN TABLE {} (namespace text, name text) SERVER {}"
                  " OPTIONS (resource {}{})").format(
        pgsql.Identifier(table), pgsql.Identifier(server), pgsql.Literal(resource),
        pgsql.SQL(extra_options)))


def test_errors(ctx):
    srv = ctx.server()
    t = schema_for(ctx, "_t")
    try:
        # 404 from discovery: a resource the cluster does not serve
        make_table(srv, t + "_a", "nopes")
        e = sql_error("SELECT * FROM %s_a" % t)
        assert e.pgcode == "42704" and "nopes" in e.diag.message_primary, e.pgerror
        # 404 from the LIST itself: a group that does not exist
        make_table(srv, t + "_b", "widgets.nowhere.example.com",
                   ", api_version 'v1', namespaced 'true'")
        e = sql_error("SELECT * FROM %s_b" % t)
        assert e.pgcode == "42704", e.pgerror
        assert e.diag.context and "GET /apis/nowhere.example.com/v1/widgets" in e.diag.context
        assert e.diag.message_detail  # the server's message

        # 401: a token the server does not know
        bad = ctx.server("-badtoken", auth="token")
        sql(pgsql.SQL("ALTER USER MAPPING FOR CURRENT_USER SERVER {} OPTIONS (SET token 'wrong')")
            .format(pgsql.Identifier(bad)))
        make_table(bad, t + "_c", "pods", ", api_version 'v1', namespaced 'true'")
        e = sql_error("SELECT * FROM %s_c" % t)
        assert e.pgcode == "28000", e.pgerror
        assert "401" in e.diag.message_primary and e.diag.message_detail == "Unauthorized"

        # refused connection and TLS failure: named, HV00N (fdw_unable_to_establish_connection)
        down = ctx.base + "-down"
        sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch OPTIONS (api_server {})")
            .format(pgsql.Identifier(down), pgsql.Literal("https://127.0.0.1:%d" % free_port())))
        ctx.servers.append(down)
        make_table(down, t + "_d", "pods", ", api_version 'v1', namespaced 'true'")
        e = sql_error("SELECT * FROM %s_d" % t)
        assert e.pgcode == "HV00N", e.pgerror
        assert "connect" in e.diag.message_primary
        notls = ctx.base + "-notls"  # the real server, without its CA
        sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch OPTIONS (api_server {},"
                      " use_remote_estimate 'false')")
            .format(pgsql.Identifier(notls), pgsql.Literal(conftest.CLUSTER.server)))
        ctx.servers.append(notls)
        make_table(notls, t + "_e", "pods", ", api_version 'v1', namespaced 'true'")
        e = sql_error("SELECT * FROM %s_e" % t)
        assert e.pgcode == "HV00N", e.pgerror
        assert "TLS" in e.diag.message_primary, e.pgerror
    finally:
        for x in "abcde":
            sql("DROP FOREIGN TABLE IF EXISTS %s_%s" % (t, x))


def stalled_table(ctx, stalled):
    """A live pods table on a server whose API server (a StalledServer) never answers."""
    name = ctx.base + "-stalled"
    sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch OPTIONS (api_server {},"
                  " use_remote_estimate 'false', allow_insecure_http 'true')").format(
        pgsql.Identifier(name), pgsql.Literal("http://127.0.0.1:%d" % stalled.port)))
    ctx.servers.append(name)
    table = schema_for(ctx, "_stalled")
    make_table(name, table, "pods", ", api_version 'v1', namespaced 'true'")
    return table


def test_cancel_interrupts_a_list_in_flight(ctx):
    """statement_timeout ends a LIST whose server never answers, long before
    kwatch.inactivity_timeout (120 s) would."""
    stalled = StalledServer()
    try:
        table = stalled_table(ctx, stalled)
        conn = conftest.PG.connect()
        try:
            sql("SET statement_timeout = '1s'", conn=conn)
            with pytest.raises(psycopg2.Error) as e:
                sql("SELECT * FROM %s" % table, conn=conn)
            assert e.value.pgcode == "57014", e.value.pgerror
            assert "statement timeout" in e.value.pgerror
            assert stalled.accepted, "the scan never connected"
            # the session is usable afterwards; the aborted scan left nothing behind
            sql("RESET statement_timeout", conn=conn)
            assert sql_one("SELECT 1", conn=conn) == 1
        finally:
            conn.close()
        sql("DROP FOREIGN TABLE %s" % table)
    finally:
        stalled.close()


def restart_apiserver(authz):
    """Restarts kube-apiserver with --authorization-mode=authz.  The kwatch
    worker's idle pooled connections would keep the port busy (server side in
    FIN_WAIT2) past cluster.sh's 5 s wait, so PostgreSQL is restarted first."""
    old = os.environ.get("KWATCH_K8S_AUTHZ")
    os.environ["KWATCH_K8S_AUTHZ"] = authz
    try:
        conftest.PG.restart()
        for attempt in range(15):
            try:
                conftest.CLUSTER.restart_apiserver()
                return
            except RuntimeError as e:
                if "in use" not in str(e) or attempt == 14:
                    raise
                time.sleep(5)
    finally:
        if old is None:
            del os.environ["KWATCH_K8S_AUTHZ"]
        else:
            os.environ["KWATCH_K8S_AUTHZ"] = old


def test_forbidden_under_rbac(ctx):
    """403 -> insufficient_privilege with the server's message, under RBAC."""
    srv = ctx.server("-user", auth="token")
    sql(pgsql.SQL("ALTER USER MAPPING FOR CURRENT_USER SERVER {} OPTIONS (SET token {})")
        .format(pgsql.Identifier(srv), pgsql.Literal(conftest.CLUSTER.env["KWATCH_K8S_USER_TOKEN"])))
    table = schema_for(ctx, "_t")
    make_table(srv, table, "pods", ", api_version 'v1', namespaced 'true'")
    try:
        restart_apiserver("RBAC")
        e = sql_error("SELECT * FROM %s WHERE namespace = 'default'" % table)
        assert e.pgcode == "42501", e.pgerror
        assert "403" in e.diag.message_primary
        assert "kwatch-user" in e.diag.message_detail  # the server's own message
        assert "GET /api/v1/namespaces/default/pods" in e.diag.context
    finally:
        restart_apiserver("AlwaysAllow")
        sql("DROP FOREIGN TABLE IF EXISTS %s" % table)


def status_body(code, reason, message):
    return json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                       "code": code, "reason": reason, "message": message})


def fake_table(ctx, fake, suffix):
    name = ctx.base + suffix
    sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch OPTIONS (api_server {},"
                  " use_remote_estimate 'false', allow_insecure_http 'true')")
        .format(pgsql.Identifier(name), pgsql.Literal(fake.url)))
    ctx.servers.append(name)
    table = schema_for(ctx, suffix)
    sql(pgsql.SQL("CREATE FOREIGN TABLE {} (namespace text, name text, uid text, labels jsonb,"
                  " phase text, object jsonb) SERVER {}"
                  " OPTIONS (resource 'pods', api_version 'v1', namespaced 'true')").format(
        pgsql.Identifier(table), pgsql.Identifier(name)))
    return table


def test_retry_after_and_pages_of_a_scripted_server(ctx):
    """PROTOCOL 3 and 10 against a scripted server: a 429 with Retry-After is
    retried; continue requests repeat the selectors and carry no
    resourceVersion; managedFields are not part of the object."""
    from live_support import FakeApiServer, pod_list
    fake = FakeApiServer([
        (429, {"Retry-After": "1"}, status_body(429, "TooManyRequests", "slow down")),
        (200, {}, pod_list(["a", "b"], cont="tok1")),
        (503, {"Retry-After": "1"}, status_body(503, "ServiceUnavailable", "busy")),
        (200, {}, pod_list(["c"])),
    ])
    try:
        t = fake_table(ctx, fake, "-fake")
        rows = sql("SELECT name, uid, phase, object->'metadata' ? 'managedFields' FROM %s"
                   " WHERE labels->>'app' = 'web' ORDER BY name" % t)
        assert rows == [("a", "uid-a", "Pending", False), ("b", "uid-b", "Pending", False),
                        ("c", "uid-c", "Pending", False)]
        first = "/api/v1/pods?labelSelector=app%3Dweb&limit=500"
        assert fake.requests == [first, first, first + "&continue=tok1", first + "&continue=tok1"]
    finally:
        fake.close()


def test_expired_continue_and_malformed_list_of_a_scripted_server(ctx):
    from live_support import FakeApiServer, pod_list
    fake = FakeApiServer([
        (200, {}, pod_list(["a"], cont="tok1")),
        (410, {}, status_body(410, "Expired", "The provided continue parameter is too old")),
        (200, {}, pod_list(["a", "b"])[:-20]),  # truncated
        (200, {}, '{"kind": "PodList", "items": [["not an object"]]}'),
    ])
    try:
        t = fake_table(ctx, fake, "-fake2")
        e = sql_error("SELECT name FROM %s" % t)
        assert e.pgcode == "55000", e.pgerror
        assert "410" in e.diag.message_primary
        assert "too old" in e.diag.message_detail
        assert "continue=tok1" in e.diag.context
        for _ in range(2):
            e = sql_error("SELECT name FROM %s" % t)
            assert e.pgcode == "HV004" and "malformed" in e.diag.message_primary, e.pgerror
    finally:
        fake.close()


def test_stalled_server_times_out_clearly(ctx, settings):
    """Without a statement_timeout, kwatch.inactivity_timeout ends a LIST
    that receives nothing, with an error that says so."""
    stalled = StalledServer()
    try:
        table = stalled_table(ctx, stalled)
        settings(inactivity_timeout=2)
        e = sql_error("SELECT * FROM %s" % table)
        assert e.pgcode == "HV00N", e.pgerror
        assert "timed out" in e.diag.message_primary
        assert "kwatch.inactivity_timeout" in e.diag.message_detail
        sql("DROP FOREIGN TABLE %s" % table)
    finally:
        stalled.close()


def test_forbidden_status_of_a_scripted_server(ctx):
    """The 403 mapping without restarting the cluster: a Status as kube-apiserver writes it."""
    from live_support import FakeApiServer
    msg = ('pods is forbidden: User "kwatch-user" cannot list resource "pods" in API group ""'
           ' in the namespace "default"')
    fake = FakeApiServer([(403, {}, status_body(403, "Forbidden", msg))])
    try:
        t = fake_table(ctx, fake, "-fake3")
        e = sql_error("SELECT name FROM %s WHERE namespace = 'default'" % t)
        assert e.pgcode == "42501", e.pgerror
        assert e.diag.message_primary == 'could not list pods on server "%s": HTTP 403 Forbidden' % (
            ctx.base + "-fake3")
        assert e.diag.message_detail == msg
        assert e.diag.context == "GET /api/v1/namespaces/default/pods?limit=500"
    finally:
        fake.close()


def test_parameters_bound_at_execution(ctx, live):
    """Generic plans and subqueries: the values become selectors when the scan starts."""
    srv, s = live
    ns = ctx.namespace()
    create_pods(ns, {"a": {"app": "web"}, "b": {"app": "db"}, "c": {}})
    conn = conftest.PG.connect()
    try:
        sql("SET plan_cache_mode = force_generic_plan", conn=conn)
        sql("PREPARE q(text, text) AS SELECT name FROM %s.pods"
            " WHERE namespace = $1 AND labels->>'app' = $2 ORDER BY name" % s, conn=conn)
        plan = sql("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE q(%s, 'web')", (ns,), conn=conn)[0][0][0]
        scan = foreign_scan(plan["Plan"])
        assert scan["Kubernetes Request"] == \
            "GET /api/v1/namespaces/$1/pods?labelSelector=app=$2&limit=500"
        assert scan["Actual Rows"] == 1
        assert sql("EXECUTE q(%s, 'web')", (ns,), conn=conn) == [("a",)]
        assert sql("EXECUTE q(%s, 'db')", (ns,), conn=conn) == [("b",)]
        # not a label value: not sent, the filter answers (no pod has it)
        assert sql("EXECUTE q(%s, 'not a value')", (ns,), conn=conn) == []
        # NULL never compares true: no request at all
        plan = sql("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE q(%s, NULL)", (ns,), conn=conn)[0][0][0]
        assert foreign_scan(plan["Plan"]).get("Kubernetes Pages") is None
        assert sql("EXECUTE q(%s, NULL)", (ns,), conn=conn) == []
        # an InitPlan's value
        rows = sql("SELECT name FROM %s.pods WHERE namespace = (SELECT %%s::text)"
                   " AND labels->>'app' IS NOT NULL ORDER BY name" % s, (ns,), conn=conn)
        assert rows == [("a",), ("b",)]
    finally:
        conn.close()


def test_declared_types_are_coerced(ctx, live):
    """A hand-made table may declare a column with another type: the live
    value is cast to it, as the column's type says."""
    srv, s = live
    ns = ctx.namespace()
    create_pods(ns, {"abcdef": {"app": "web"}})
    t = schema_for(ctx, "_typed")
    sql(pgsql.SQL("CREATE FOREIGN TABLE {} (namespace text, name varchar(3), restart_count bigint,"
                  " created_at text, ready text, labels json) SERVER {} OPTIONS (resource 'pods')")
        .format(pgsql.Identifier(t), pgsql.Identifier(srv)))
    try:
        row = sql("SELECT name, restart_count, created_at, ready, labels::text FROM %s"
                  " WHERE namespace = %%s" % t, (ns,))
        want = sql("SELECT name::varchar(3), restart_count::bigint, created_at::text, ready::text,"
                   " labels::json::text FROM %s.pods WHERE namespace = %%s" % s, (ns,))
        assert row == want and row[0][0] == "abc" and row[0][1] == 0
    finally:
        sql("DROP FOREIGN TABLE %s" % t)


def test_cancel_in_the_middle_of_a_page_leaves_the_session_sound(ctx):
    """A scan cancelled while its page is half received (items already
    handed out, the transfer still running) frees its curl handles with the
    query's memory: later scans in the same backend, including a correlated
    subquery that rescans with a new parameter each time, return exactly the
    server's rows, and a cursor closed mid-page does the same."""
    from live_support import FakeApiServer, HalfPageServer, pod_list
    body = pod_list(["a", "b", "c", "d"])
    half = HalfPageServer(body, body.index('"uid-c"'))  # a and b complete, c cut
    fake = FakeApiServer([(200, {}, pod_list(["a", "b", "c"]))] * 12)
    try:
        t_half = fake_table(ctx, half, "-half")
        t_fake = fake_table(ctx, fake, "-whole")
        conn = conftest.PG.connect()
        try:
            for _ in range(2):
                sql("SET statement_timeout = '1s'", conn=conn)
                with pytest.raises(psycopg2.Error) as e:
                    sql("SELECT name FROM %s" % t_half, conn=conn)
                assert e.value.pgcode == "57014", e.value.pgerror
                sql("RESET statement_timeout", conn=conn)
                assert sql("SELECT name FROM %s ORDER BY name" % t_fake, conn=conn) == \
                    [("a",), ("b",), ("c",)]
            # a cursor that got the page's first items, then closed with the transfer running
            conn.autocommit = False
            cur = conn.cursor()
            cur.execute("DECLARE c CURSOR FOR SELECT name FROM %s" % t_half)
            cur.execute("FETCH 2 FROM c")
            assert cur.fetchall() == [("a",), ("b",)]
            cur.execute("CLOSE c")
            conn.commit()
            conn.autocommit = True
            # correlated subquery: a rescan per outer row, the name bound each time
            del fake.requests[:]
            rows = sql("SELECT v, (SELECT count(*) FROM %s p WHERE p.name = x.v)"
                       " FROM (VALUES ('a'), ('c'), ('zz')) x(v) ORDER BY v" % t_fake, conn=conn)
            assert rows == [("a", 1), ("c", 1), ("zz", 0)]
            assert fake.requests == ["/api/v1/pods?fieldSelector=metadata.name%%3D%s&limit=500" % v
                                     for v in ("a", "c", "zz")]
            assert sql_one("SELECT 1", conn=conn) == 1
        finally:
            conn.close()
    finally:
        half.close()
        fake.close()
