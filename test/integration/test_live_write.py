"""Writes through live tables (issue 32, src/live/fdw_modify.c): UPDATE sends a
JSON merge patch of what the statement changed with the row's resourceVersion
as precondition, DELETE sends the uid/resourceVersion preconditions, INSERT
creates, RETURNING returns the object as stored; each checked against
`kubectl get`.  A row that changed (or was recreated) between the scan and the
write fails with 40001 and leaves the server as it was."""
import json
import re
import threading
import time

import psycopg2
import pytest
from psycopg2 import sql as pgsql

import conftest
from conftest import kubectl, kubectl_json, sql, sql_one, watch
from live_support import import_schema


def error(query, params=None):
    with pytest.raises(psycopg2.Error) as e:
        sql(query, params)
    return e.value


@pytest.fixture
def live(ctx):
    """A server with configmaps, secrets, deployments imported: (server, schema)."""
    srv = ctx.server()
    schema = re.sub(r"[^a-z0-9]+", "_", ctx.base + "_w")[:60]
    import_schema(srv, schema, "LIMIT TO (configmaps, secrets, deployments)")
    yield srv, schema
    sql(pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(pgsql.Identifier(schema)))


def get(kind, ns, name):
    return kubectl_json("get", kind, name, "-n", ns)


def gone(kind, ns, name):
    return kubectl("get", kind, name, "-n", ns, "--ignore-not-found", "-o", "name").strip() == ""


def test_insert_update_delete_reach_the_cluster_with_returning(ctx, live):
    srv, s = live
    ns = ctx.namespace()
    t = "%s.configmaps" % s

    # INSERT creates; RETURNING is the object as stored
    uid, rv, labels, managed = sql("INSERT INTO %s (namespace, name, labels, object)"
                                   " VALUES (%%s, 'made', '{\"app\": \"web\"}', '{\"data\": {\"k\": \"v\"}}')"
                                   " RETURNING uid, resource_version, labels, object->'metadata' ? 'managedFields'"
                                   % t, (ns,))[0]
    assert managed is False   # as a scanned row: no managedFields
    cm = get("configmap", ns, "made")
    assert (cm["metadata"]["uid"], cm["metadata"]["resourceVersion"]) == (uid, rv)
    assert cm["data"] == {"k": "v"} and cm["metadata"]["labels"] == {"app": "web"} == labels
    e = error("INSERT INTO %s (namespace, name, object) VALUES (%%s, 'made', '{}')" % t, (ns,))
    assert e.pgcode == "42710", e.pgerror

    # UPDATE of labels: a merge patch of the change only, by field manager kwatch
    rows = sql("UPDATE %s SET labels = labels || '{\"tier\": \"a\"}' WHERE namespace = %%s"
               " AND name = 'made' RETURNING resource_version, labels" % t, (ns,))
    cm = get("configmap", ns, "made")
    assert rows == [(cm["metadata"]["resourceVersion"], {"app": "web", "tier": "a"})], rows
    assert cm["metadata"]["labels"] == {"app": "web", "tier": "a"} and cm["data"] == {"k": "v"}
    managed = kubectl_json("get", "configmap", "made", "-n", ns, "--show-managed-fields")["metadata"]["managedFields"]
    assert any(m["manager"] == "kwatch" and m["operation"] == "Update" for m in managed), managed
    # removing a key is a null in the patch; the object column and labels in one statement
    sql("UPDATE %s SET labels = labels - 'app', object = jsonb_set(object, '{data,k}', '\"v2\"')"
        " WHERE namespace = %%s AND name = 'made'" % t, (ns,))
    cm = get("configmap", ns, "made")
    assert cm["metadata"]["labels"] == {"tier": "a"} and cm["data"] == {"k": "v2"}, cm
    # an UPDATE that changes nothing sends nothing (the resourceVersion stays)
    rv = cm["metadata"]["resourceVersion"]
    assert sql("UPDATE %s SET labels = labels WHERE namespace = %%s AND name = 'made'" % t, (ns,)) == []
    assert get("configmap", ns, "made")["metadata"]["resourceVersion"] == rv
    # name and namespace are the object's identity
    e = error("UPDATE %s SET object = jsonb_set(object, '{metadata,name}', '\"other\"')"
              " WHERE namespace = %%s AND name = 'made'" % t, (ns,))
    assert e.pgcode == "22023" and "metadata.name" in e.diag.message_primary, e.pgerror

    # DELETE; a second DELETE finds no row, and one of a row read earlier counts none
    assert sql("DELETE FROM %s WHERE namespace = %%s AND name = 'made' RETURNING name, uid" % t, (ns,)) \
        == [("made", uid)]
    assert gone("configmap", ns, "made")
    assert sql("DELETE FROM %s WHERE namespace = %%s AND name = 'made' RETURNING name" % t, (ns,)) == []


def during_scan(action, delay=1.0):
    """Runs action() in a thread after `delay` s: the statement's filter
    sleeps after its row was read, so the write then sees a changed object."""
    th = threading.Thread(target=lambda: (time.sleep(delay), action()))
    th.start()
    return th


def test_a_stale_row_fails_with_40001_and_changes_nothing(ctx, live):
    srv, s = live
    ns = ctx.namespace()
    t = "%s.configmaps" % s
    kubectl("create", "configmap", "stale", "-n", ns, "--from-literal=k=v")

    # UPDATE: the object is labelled by kubectl after the row was read
    th = during_scan(lambda: kubectl("label", "configmap", "stale", "-n", ns, "by=kubectl"))
    e = error("UPDATE %s SET object = jsonb_set(object, '{data,k}', '\"kwatch\"')"
              " WHERE namespace = %%s AND name = 'stale' AND pg_sleep(3) IS NOT NULL" % t, (ns,))
    th.join()
    assert e.pgcode == "40001", e.pgerror
    cm = get("configmap", ns, "stale")
    assert cm["data"] == {"k": "v"} and cm["metadata"]["labels"] == {"by": "kubectl"}

    # DELETE: the object is deleted and created again under its name
    old_uid = cm["metadata"]["uid"]

    def recreate():
        kubectl("delete", "configmap", "stale", "-n", ns)
        kubectl("create", "configmap", "stale", "-n", ns, "--from-literal=k=new")
    th = during_scan(recreate)
    e = error("DELETE FROM %s WHERE namespace = %%s AND name = 'stale' AND pg_sleep(4) IS NOT NULL" % t, (ns,))
    th.join()
    assert e.pgcode == "40001", e.pgerror
    cm = get("configmap", ns, "stale")
    assert cm["metadata"]["uid"] != old_uid and cm["data"] == {"k": "new"}


def test_scale_a_deployment_made_by_kubectl(ctx, live):
    """A merge patch (an Update, not an apply) takes no field-manager conflict:
    replicas of a Deployment made by `kubectl create` change without force."""
    srv, s = live
    ns = ctx.namespace()
    kubectl("create", "deployment", "web", "-n", ns, "--image=registry.invalid/web:1", "--replicas=1")
    # the controllers update a new Deployment's status: a row read before
    # that is stale (40001), and the statement is retried, as any 40001
    for attempt in range(10):
        try:
            n = sql_one("WITH u AS (UPDATE %s.deployments SET object = jsonb_set(object, '{spec,replicas}', '3')"
                        " WHERE namespace = %%s AND name = 'web' RETURNING replicas) SELECT replicas FROM u"
                        % s, (ns,))
            break
        except psycopg2.errors.SerializationFailure:
            time.sleep(0.5)
    assert n == 3
    assert get("deployment", ns, "web")["spec"]["replicas"] == 3


def test_a_redacted_secret_value_is_never_sent(ctx, live):
    srv, s = live
    ns = ctx.namespace()
    t = "%s.secrets" % s
    kubectl("create", "secret", "generic", "db", "-n", ns, "--from-literal=password=hunter2")
    real = get("secret", ns, "db")["data"]
    shown = sql_one("SELECT object->'data'->>'password' FROM %s WHERE namespace = %%s AND name = 'db'" % t, (ns,))
    assert shown.startswith("<redacted hmac-sha256:")
    # labels change; the values the row shows redacted stay as they are on the server
    sql("UPDATE %s SET labels = '{\"rotated\": \"no\"}' WHERE namespace = %%s AND name = 'db'" % t, (ns,))
    sec = get("secret", ns, "db")
    assert sec["data"] == real and sec["metadata"]["labels"] == {"rotated": "no"}
    # a redacted value copied elsewhere, or a whole object with them, is refused
    for q in ("UPDATE {t} SET object = jsonb_set(object, '{{data,copy}}', object->'data'->'password')"
              " WHERE namespace = %s AND name = 'db'",
              "INSERT INTO {t} (namespace, name, object) SELECT namespace, 'db2', object - 'metadata'"
              " FROM {t} WHERE namespace = %s AND name = 'db'"):
        e = error(q.format(t=t), (ns,))
        assert e.pgcode == "22023" and "redacted" in e.diag.message_primary, e.pgerror
        assert "hunter2" not in e.pgerror
    assert get("secret", ns, "db")["data"] == real
    assert gone("secret", ns, "db2")


def test_a_write_to_a_mirror_table_stays_local(ctx):
    """k8s.* belongs to the worker's mirror: its owner may write it, but that
    never reaches the cluster, and the object's next event puts the row back
    (a relist keeps a row whose resource_version equals the server's)."""
    srv = ctx.server()
    ns = ctx.namespace()
    kubectl("create", "configmap", "local", "-n", ns, "--from-literal=k=v")
    table = watch("configmaps", srv, namespace=ns)
    sql("SELECT kwatch.wait_synced('configmaps', server => %s, timeout => '1 min')", (srv,))
    sql(pgsql.SQL("UPDATE {} SET object = jsonb_set(object, '{{data,k}}', '\"local\"')"
                  " WHERE cluster = %s AND name = 'local'").format(pgsql.SQL(table)), (srv,))
    assert get("configmap", ns, "local")["data"] == {"k": "v"}
    kubectl("label", "configmap", "local", "-n", ns, "touched=yes")
    sql("SELECT kwatch.wait_current('configmaps', server => %s, timeout => '1 min')", (srv,))
    assert sql_one(pgsql.SQL("SELECT object->'data' FROM {} WHERE cluster = %s AND name = 'local'")
                   .format(pgsql.SQL(table)), (srv,)) == {"k": "v"}


def test_updatable_false_and_a_role_without_a_mapping(ctx, live):
    srv, s = live
    ns = ctx.namespace()
    t = "%s.configmaps" % s
    kubectl("create", "configmap", "kept", "-n", ns, "--from-literal=k=v")
    sql("ALTER FOREIGN TABLE %s OPTIONS (ADD updatable 'false')" % t)
    e = error("DELETE FROM %s WHERE namespace = %%s" % t, (ns,))
    assert e.pgcode == "55000" and "does not allow deletes" in e.pgerror, e.pgerror
    sql("ALTER FOREIGN TABLE %s OPTIONS (DROP updatable)" % t)
    # a role with the table's privileges but no USAGE on the server, then
    # USAGE but no user mapping: nothing is sent (42501, then 42704)
    role = ctx.base.replace("-", "_")[:50] + "_w"
    r = pgsql.Identifier(role)
    sql(pgsql.SQL("CREATE ROLE {} LOGIN").format(r))
    try:
        sql(pgsql.SQL("GRANT USAGE ON SCHEMA {} TO {}; GRANT ALL ON {} TO {}").format(
            pgsql.Identifier(s), r, pgsql.SQL(t), r))
        e = error(pgsql.SQL("SET ROLE {}; INSERT INTO {} (namespace, name, object) VALUES (%s, 'x', '{{}}')")
                  .format(r, pgsql.SQL(t)), (ns,))
        assert e.pgcode == "42501" and "USAGE" in e.pgerror, e.pgerror
        delete = pgsql.SQL("SET ROLE {}; DELETE FROM {} WHERE namespace = %s").format(r, pgsql.SQL(t))
        sql("RESET ROLE")
        sql(pgsql.SQL("GRANT USAGE ON FOREIGN SERVER {} TO {}").format(pgsql.Identifier(srv), r))
        e = error(delete, (ns,))
        assert e.pgcode == "42704" and "user mapping" in e.pgerror, e.pgerror
    finally:
        sql("RESET ROLE")
        sql(pgsql.SQL("DROP OWNED BY {}; DROP ROLE {}").format(r, r))
    assert not gone("configmap", ns, "kept")


def test_a_trigger_in_kwatchs_own_processes_cannot_write_to_the_cluster(ctx, live):
    """A mirror table's trigger runs in an apply worker as the table's owner,
    in a security-restricted operation: a live-table INSERT or a
    kwatch.apply(at => 'now') from it is refused (42501), nothing is sent,
    and the watch reports the refusal."""
    from conftest import wait_until, watch_status
    srv, s = live
    ns = ctx.namespace()
    table = watch("configmaps", srv, namespace=ns)
    sql("SELECT kwatch.wait_synced('configmaps', server => %s, timeout => '1 min')", (srv,))
    fn = pgsql.Identifier(s, "echo")
    bodies = [("cannot write to live table",
               "INSERT INTO %s.configmaps (namespace, name, object)"
               " VALUES (NEW.namespace, 'echo-' || NEW.name, '{}')" % s),
              ("cannot call",
               "PERFORM kwatch.apply(jsonb_build_object('apiVersion', 'v1', 'kind', 'ConfigMap', 'metadata',"
               " jsonb_build_object('name', 'echo-' || NEW.name, 'namespace', NEW.namespace)),"
               " server => %s, at => 'now')" % pgsql.Literal(srv).as_string(conftest.PG.conn))]
    for want, body in bodies:
        sql(pgsql.SQL("CREATE OR REPLACE FUNCTION {}() RETURNS trigger LANGUAGE plpgsql AS $$"
                      " BEGIN IF NEW.name NOT LIKE 'echo-%' THEN " + body.replace("{", "{{").replace("}", "}}") +
                      "; END IF; RETURN NEW; END $$").format(fn))
        sql(pgsql.SQL("CREATE TRIGGER echo AFTER INSERT ON {} FOR EACH ROW EXECUTE FUNCTION {}()")
            .format(pgsql.SQL(table), fn))
        try:
            name = "t%d" % len(body)
            kubectl("create", "configmap", name, "-n", ns, "--from-literal=k=v")
            st = wait_until(lambda: (lambda st: st if st and st["last_error"] and want in st["last_error"] and
                                     "security-restricted operation" in st["last_error"] else None)(
                watch_status(srv, "configmaps")), 30, "the trigger's write refused")
            assert gone("configmap", ns, "echo-" + name), st
        finally:
            sql(pgsql.SQL("DROP TRIGGER echo ON {}").format(pgsql.SQL(table)))
