"""Acting on the cluster (issue 32, first part): kwatch.apply() makes a
server-side apply with the caller's credentials, checked by a dry run in
the statement, sent at once (at => 'now') or after COMMIT by the request
sender; kwatch.wait_apply() and kwatch.applies give the outcome."""
import json
import time

import psycopg2
import pytest
from psycopg2 import sql as pgsql

import conftest
from conftest import kubectl, kubectl_json, sql, sql_one, watch


def error(query, params=None, conn=None):
    with pytest.raises(psycopg2.Error) as e:
        sql(query, params, conn=conn)
    return e.value


def cm(ns, name, **data):
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": name, "namespace": ns}, "data": data})


def exists(kind, ns, name):
    return kubectl("get", kind, name, "-n", ns, "--ignore-not-found", "-o", "name").strip() != ""


def test_apply_at_commit_is_sent_after_commit_and_a_rollback_sends_nothing(ctx):
    srv = ctx.server()
    ns = ctx.namespace()
    table = watch("configmaps", srv, namespace=ns)
    sql("SELECT kwatch.wait_synced('configmaps', server => %s, timeout => '1 min')", (srv,))

    # ROLLBACK: the dry run ran, nothing is sent
    conn = conftest.PG.connect(autocommit=False)
    try:
        r = sql("SELECT (a).id, (a).state, (a).object->'data' FROM"
                " (SELECT kwatch.apply(%s::jsonb, server => %s) a) x", (cm(ns, "rolled", k="v"), srv), conn=conn)[0]
        assert r[1] == "pending" and r[0] is not None and r[2] == {"k": "v"}, r
        e = error("SELECT kwatch.wait_apply(%s)", (r[0],), conn=conn)
        assert e.pgcode == "55000" and e.diag.message_hint.startswith("COMMIT first"), e.pgerror
        conn.rollback()
    finally:
        conn.close()
    time.sleep(2)
    assert not exists("configmap", ns, "rolled")

    # COMMIT: sent, and with wait_mirror the mirror has it when the wait returns
    aid = sql_one("SELECT (kwatch.apply(%s::jsonb, server => %s)).id", (cm(ns, "sent", k="v"), srv))
    st = sql("SELECT (w).state, (w).object->'data', (w).object->'metadata'->>'resourceVersion',"
             " (w).object->'metadata' ? 'managedFields'"
             " FROM (SELECT kwatch.wait_apply(%s, '1 min', wait_mirror => true) w) x", (aid,))
    # it returns the object as stored (without managedFields, as mirror rows)
    assert st[0][:2] == ("applied", {"k": "v"}) and st[0][3] is False, st
    assert st[0][2] == sql_one("SELECT resource_version FROM kwatch.applies WHERE id = %s", (aid,))
    assert kubectl_json("get", "configmap", "sent", "-n", ns)["data"] == {"k": "v"}
    assert sql_one(pgsql.SQL("SELECT object->'data' FROM {} WHERE cluster = %s AND name = 'sent'")
                   .format(pgsql.SQL(table)), (srv,)) == {"k": "v"}
    row = sql("SELECT state, http_status, resource_version IS NOT NULL, attempts, role::text"
              " FROM kwatch.applies WHERE id = %s", (aid,))
    assert row == [("applied", 201, True, 1, "postgres")], row
    # the manifest is gone once sent
    assert sql_one("SELECT manifest FROM kwatch.apply_queue WHERE id = %s", (aid,)) is None
    # an apply is idempotent: the same manifest again changes nothing
    rv = kubectl_json("get", "configmap", "sent", "-n", ns)["metadata"]["resourceVersion"]
    aid = sql_one("SELECT (kwatch.apply(%s::jsonb, server => %s)).id", (cm(ns, "sent", k="v"), srv))
    sql("SELECT kwatch.wait_apply(%s, '1 min')", (aid,))
    assert kubectl_json("get", "configmap", "sent", "-n", ns)["metadata"]["resourceVersion"] == rv


def test_dry_run_and_now(ctx):
    srv = ctx.server()
    ns = ctx.namespace()
    r = sql("SELECT (a).id, (a).state, (a).object->'data', (a).object->'metadata' ? 'managedFields' FROM"
            " (SELECT kwatch.apply(%s::jsonb, server => %s, dry_run => true) a) x", (cm(ns, "dry", k="v"), srv))
    assert r == [(None, "dry run", {"k": "v"}, False)], r
    time.sleep(1)
    assert not exists("configmap", ns, "dry")
    conn = conftest.PG.connect(autocommit=False)
    try:
        r = sql("SELECT (a).state, (a).object->'metadata'->>'resourceVersion',"
                " (a).object->'metadata' ? 'managedFields', (a).object->'metadata' ? 'uid' FROM"
                " (SELECT kwatch.apply(%s::jsonb, server => %s, at => 'now') a) x",
                (cm(ns, "now", k="v"), srv), conn=conn)[0]
        # the object as mirror rows hold it: no managedFields
        assert r[0] == "applied" and r[1] and r[2] is False and r[3] is True, r
        # at once is not undone by ROLLBACK
        conn.rollback()
    finally:
        conn.close()
    assert exists("configmap", ns, "now")


def test_a_field_managers_conflict_fails_the_statement_and_force_takes_it_over(ctx):
    srv = ctx.server()
    ns = ctx.namespace()
    kubectl("apply", "--server-side", "-f", "-", input=cm(ns, "owned", k="kubectl"))
    for at in ("commit", "now"):
        e = error("SELECT kwatch.apply(%s::jsonb, server => %s, at => %s)", (cm(ns, "owned", k="kwatch"), srv, at))
        assert e.pgcode == "KW409", e.pgerror
        assert ".data.k" in e.diag.message_detail and "kubectl" in e.diag.message_detail, e.pgerror
        assert "force" in e.diag.message_hint
    aid = sql_one("SELECT (kwatch.apply(%s::jsonb, server => %s, force => true)).id", (cm(ns, "owned", k="kwatch"), srv))
    sql("SELECT kwatch.wait_apply(%s, '1 min')", (aid,))
    assert kubectl_json("get", "configmap", "owned", "-n", ns)["data"] == {"k": "kwatch"}
    # scaling a Deployment made by kubectl create: replicas belong to kubectl's manager
    kubectl("create", "deployment", "web", "-n", ns, "--image=registry.invalid/web:1", "--replicas=1")
    scale = json.dumps({"apiVersion": "apps/v1", "kind": "Deployment",
                        "metadata": {"name": "web", "namespace": ns}, "spec": {"replicas": 3}})
    e = error("SELECT kwatch.apply(%s::jsonb, server => %s)", (scale, srv))
    assert e.pgcode == "KW409" and ".spec.replicas" in e.diag.message_detail, e.pgerror
    aid = sql_one("SELECT (kwatch.apply(%s::jsonb, server => %s, force => true)).id", (scale, srv))
    sql("SELECT kwatch.wait_apply(%s, '1 min')", (aid,))
    assert kubectl_json("get", "deployment", "web", "-n", ns)["spec"]["replicas"] == 3


def test_bad_manifests_and_unknown_kinds_fail_before_any_write(ctx):
    srv = ctx.server()
    ns = ctx.namespace()
    for manifest, code in (('[]', "22023"),
                           ('{"kind": "ConfigMap", "metadata": {"name": "x"}}', "22023"),
                           ('{"apiVersion": "v1", "metadata": {"name": "x"}}', "22023"),
                           ('{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}', "22023"),
                           ('{"apiVersion": "../v1", "kind": "ConfigMap", "metadata": {"name": "x"}}', "22023"),
                           ('{"apiVersion": "v1", "kind": "NoSuchKind", "metadata": {"name": "x"}}', "42704"),
                           ('{"apiVersion": "nope.example.com/v1", "kind": "X", "metadata": {"name": "x"}}', "42704")):
        e = error("SELECT kwatch.apply(%s::jsonb, server => %s)", (manifest, srv))
        assert e.pgcode == code, (manifest, e.pgerror)
    # an invalid object: the server's causes
    bad = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "Not_Valid", "namespace": ns}})
    e = error("SELECT kwatch.apply(%s::jsonb, server => %s)", (bad, srv))
    assert e.pgcode == "22023" and "metadata.name" in e.diag.message_detail, e.pgerror
    assert sql_one("SELECT count(*) FROM kwatch.apply_queue WHERE server = %s", (srv,)) == 0


def test_objects_that_depend_on_each_other_in_one_transaction(ctx):
    """A Namespace and a ConfigMap in it, in one transaction: the
    ConfigMap's dry run (404: no such namespace yet) is deferred to the
    send, and both arrive in order."""
    srv = ctx.server()
    ns = ctx.base[:50] + "-dep"
    ctx.namespaces.append(ns)
    conn = conftest.PG.connect(autocommit=False)
    try:
        a = sql_one("SELECT (kwatch.apply(%s::jsonb, server => %s)).id",
                    (json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}), srv), conn=conn)
        b = sql_one("SELECT (kwatch.apply(%s::jsonb, server => %s)).id", (cm(ns, "inside", k="v"), srv), conn=conn)
        conn.commit()
    finally:
        conn.close()
    # alone, the same dry run fails at once
    e = error("SELECT kwatch.apply(%s::jsonb, server => %s)", (cm(ns + "-none", "x", k="v"), srv))
    assert e.pgcode == "42704", e.pgerror
    for i in (a, b):
        sql("SELECT kwatch.wait_apply(%s, '1 min')", (i,))
    assert exists("configmap", ns, "inside")


def test_a_role_without_usage_sends_nothing_and_sees_no_other_roles_applies(ctx):
    srv = ctx.server()
    ns = ctx.namespace()
    aid = sql_one("SELECT (kwatch.apply(%s::jsonb, server => %s)).id", (cm(ns, "mine", k="v"), srv))
    sql("SELECT kwatch.wait_apply(%s, '1 min')", (aid,))
    role = ("kw_apply_" + ctx.base.replace("-", "_"))[:63]
    r = pgsql.Identifier(role)
    sql(pgsql.SQL("CREATE ROLE {}").format(r))
    try:
        conn = conftest.PG.connect(autocommit=False)
        try:
            sql(pgsql.SQL("SET ROLE {}").format(r), conn=conn)
            e = error("SELECT kwatch.apply(%s::jsonb, server => %s)", (cm(ns, "theirs", k="v"), srv), conn=conn)
            assert e.pgcode == "42501", e.pgerror
            conn.rollback()
            sql(pgsql.SQL("SET ROLE {}").format(r), conn=conn)
            assert sql("SELECT * FROM kwatch.applies", conn=conn) == []
            e = error("SELECT kwatch.wait_apply(%s, '1s')", (aid,), conn=conn)
            assert e.pgcode == "42704", e.pgerror
            conn.rollback()
            sql(pgsql.SQL("SET ROLE {}").format(r), conn=conn)
            e = error("SELECT * FROM kwatch.apply_queue", conn=conn)
            assert e.pgcode == "42501", e.pgerror
        finally:
            conn.close()
    finally:
        sql(pgsql.SQL("DROP OWNED BY {} CASCADE; DROP ROLE {}").format(r, r))
    assert not exists("configmap", ns, "theirs")


def test_a_secret_applied_at_commit_leaves_its_data_nowhere(ctx):
    srv = ctx.server()
    ns = ctx.namespace()
    secret = json.dumps({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": ns},
                         "stringData": {"password": "hunter2-apply"}})
    r = sql("SELECT (a).id, (a).object FROM (SELECT kwatch.apply(%s::jsonb, server => %s) a) x", (secret, srv))[0]
    assert "hunter2" not in json.dumps(r[1]) and "data" not in r[1], r
    w = sql_one("SELECT (kwatch.wait_apply(%s, '1 min')).object", (r[0],))
    assert w["kind"] == "Secret" and "data" not in w and "hunter2" not in json.dumps(w), w
    assert sql_one("SELECT manifest FROM kwatch.apply_queue WHERE id = %s", (r[0],)) is None
    assert "hunter2" not in json.dumps(sql("SELECT * FROM kwatch.applies WHERE id = %s", (r[0],)), default=str)
    assert kubectl_json("get", "secret", "s", "-n", ns)["data"]["password"]


def test_delete_at_commit_now_and_with_a_uid_precondition(ctx):
    """kwatch.delete(): dry run first; at commit sent after COMMIT; a uid
    precondition refuses (40001) an object recreated under the same name,
    so the object deleted is the one the caller saw."""
    srv = ctx.server()
    ns = ctx.namespace()
    for name in ("a", "b", "c"):
        kubectl("create", "configmap", name, "-n", ns, "--from-literal=k=v")
    # a dry run deletes nothing; a missing object fails at once
    assert sql_one("SELECT (kwatch.delete('configmaps', 'a', namespace => %s, server => %s,"
                   " dry_run => true)).state", (ns, srv)) == "dry run"
    assert exists("configmap", ns, "a")
    e = error("SELECT kwatch.delete('configmaps', 'nope', namespace => %s, server => %s)", (ns, srv))
    assert e.pgcode == "42704", e.pgerror
    # at commit
    conn = conftest.PG.connect(autocommit=False)
    try:
        sql("SELECT kwatch.delete('configmaps', 'a', namespace => %s, server => %s)", (ns, srv), conn=conn)
        conn.rollback()
    finally:
        conn.close()
    time.sleep(1)
    assert exists("configmap", ns, "a")
    aid = sql_one("SELECT (kwatch.delete('configmap', 'a', namespace => %s, server => %s)).id", (ns, srv))
    sql("SELECT kwatch.wait_apply(%s, '1 min')", (aid,))
    assert not exists("configmap", ns, "a")
    assert sql_one("SELECT verb FROM kwatch.applies WHERE id = %s", (aid,)) == "delete"
    # at once, with the uid the caller saw
    uid = kubectl_json("get", "configmap", "b", "-n", ns)["metadata"]["uid"]
    assert sql_one("SELECT (kwatch.delete('configmaps', 'b', namespace => %s, server => %s, uid => %s,"
                   " at => 'now')).state", (ns, srv, uid)) == "applied"
    assert not exists("configmap", ns, "b")
    # recreated under the same name: the old uid deletes nothing
    old = kubectl_json("get", "configmap", "c", "-n", ns)["metadata"]["uid"]
    kubectl("delete", "configmap", "c", "-n", ns)
    kubectl("create", "configmap", "c", "-n", ns, "--from-literal=k=new")
    e = error("SELECT kwatch.delete('configmaps', 'c', namespace => %s, server => %s, uid => %s)", (ns, srv, old))
    assert e.pgcode == "40001", e.pgerror
    assert exists("configmap", ns, "c")


def test_a_crd_and_its_custom_resource_in_one_transaction(ctx):
    """The custom resource's kind is not served at its dry run: since the
    same transaction queued the CRD of its group, its check is left to the
    send, which retries until the CRD is established."""
    srv = ctx.server()
    ns = ctx.namespace()
    group = "kw%d.example.com" % (abs(hash(ctx.base)) % 10**8)
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets." + group},
           "spec": {"group": group, "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object",
                                                                 "x-kubernetes-preserve-unknown-fields": True}}}]}}
    ctx.crds.append("widgets." + group)
    widget = {"apiVersion": group + "/v1", "kind": "Widget", "metadata": {"name": "w1", "namespace": ns},
              "spec": {"size": 3}}
    # alone, the custom resource's kind is unknown at once
    e = error("SELECT kwatch.apply(%s::jsonb, server => %s)", (json.dumps(widget), srv))
    assert e.pgcode == "42704", e.pgerror
    conn = conftest.PG.connect(autocommit=False)
    try:
        a = sql_one("SELECT (kwatch.apply(%s::jsonb, server => %s)).id", (json.dumps(crd), srv), conn=conn)
        b = sql_one("SELECT (kwatch.apply(%s::jsonb, server => %s)).id", (json.dumps(widget), srv), conn=conn)
        conn.commit()
    finally:
        conn.close()
    for i in (a, b):
        sql("SELECT kwatch.wait_apply(%s, '2 min')", (i,))
    assert kubectl_json("get", "widgets." + group, "w1", "-n", ns)["spec"]["size"] == 3


def test_a_pending_apply_depends_on_its_server(ctx):
    """DROP SERVER of a server with a pending apply: refused without
    CASCADE; with CASCADE the apply fails and is never sent (a server
    created later under the same name, with other credentials, gets
    nothing)."""
    srv = ctx.server()
    ns = ctx.namespace()
    conn = conftest.PG.connect(autocommit=False)
    try:
        aid = sql_one("SELECT (kwatch.apply(%s::jsonb, server => %s)).id", (cm(ns, "orphan", k="v"), srv), conn=conn)
        sql("SAVEPOINT s", conn=conn)
        e = error(pgsql.SQL("DROP SERVER {}").format(pgsql.Identifier(srv)), conn=conn)
        assert e.pgcode == "2BP01" and "pending apply %s of ConfigMap orphan" % aid in e.diag.message_detail, e.pgerror
        sql("ROLLBACK TO SAVEPOINT s", conn=conn)
        sql(pgsql.SQL("DROP SERVER {} CASCADE").format(pgsql.Identifier(srv)), conn=conn)
        conn.commit()
    finally:
        conn.close()
    assert sql("SELECT state, sqlstate FROM kwatch.applies WHERE id = %s", (aid,)) == [("failed", "42704")]
    e = error("SELECT kwatch.wait_apply(%s, '10s')", (aid,))
    assert e.pgcode == "42704" and "was dropped" in e.diag.message_primary, e.pgerror
    time.sleep(1)
    assert not exists("configmap", ns, "orphan")
