"""Cluster history (issue 11, src/apply/history.c, sql/kwatch--0.2.0--0.3.0.sql):
k8s.<table>_history keeps one row per version of each object, written in
the transaction that changed the mirror row, against the real apiserver:
versions and their contiguous validity, as-of queries, diffs, deletions
seen by the watch, inferred by a relist and made by unwatch, retention by
age and by size, turning history on later."""
import psycopg2
import psycopg2.extras
from psycopg2 import sql as pgsql

import conftest
from conftest import (assert_table_matches_server, configmaps_doc, kubectl, sql, sql_one,
                      wait_until, watch)


def history_table(ctx, srv, ns, **kw):
    """A watch of the ConfigMaps of ns into a table of this test's own (its
    history on, kw passed to watch()), synced; returns (table, history) as
    names in schema k8s.  Both are dropped by ctx's cleanup."""
    t = "cmh_" + ctx.base[-10:].replace("-", "_")
    watch("configmaps", srv, namespace=ns, table_name=t, history=True, **kw)
    sql("SELECT kwatch.wait_synced('configmaps', server => %s, timeout => '60s')", (srv,))
    ctx.tables += [t + "_history", t]
    return t, t + "_history"


def versions(h, name):
    """The versions of object `name` in history table k8s.<h>, oldest first:
    dicts of resource_version, lower, upper, change, deletion, object."""
    rows = sql(pgsql.SQL("SELECT resource_version, lower(valid), upper(valid), change, deletion, object"
                         " FROM k8s.{} WHERE name = %s ORDER BY lower(valid)")
               .format(pgsql.Identifier(h)), (name,))
    keys = ("rv", "lower", "upper", "change", "deletion", "object")
    return [dict(zip(keys, r)) for r in rows]


def rv_of(ns, name):
    return conftest.kubectl_json("get", "configmap", name, "-n", ns)["metadata"]["resourceVersion"]


def test_versions_as_of_and_deletions(ctx):
    """Every change is a version whose range ends where the next begins;
    as_of() answers what the table held at a moment; object_diff() names
    what changed; a deletion closes the last version, marked DELETED when
    the watch saw it, DELETED_FINAL_STATE_UNKNOWN when a relist inferred it,
    UNWATCHED when the watch went.  The open versions are the mirror."""
    ns = ctx.namespace()
    srv = ctx.server()
    kubectl("apply", "-f", "-", input=configmaps_doc(ns, ["a", "gone"]))
    t, h = history_table(ctx, srv, ns)
    assert_table_matches_server("k8s." + t, srv, ["configmaps", "-n", ns])
    t1 = sql_one("SELECT clock_timestamp()")
    rv1 = rv_of(ns, "a")

    kubectl("label", "configmap", "a", "-n", ns, "x=1")
    wait_until(lambda: len(versions(h, "a")) == 2, 30, "a second version of a")
    t2 = sql_one("SELECT clock_timestamp()")
    rv2 = rv_of(ns, "a")
    kubectl("label", "configmap", "a", "-n", ns, "x=2", "--overwrite")
    wait_until(lambda: len(versions(h, "a")) == 3, 30, "a third version of a")
    kubectl("delete", "configmap", "a", "-n", ns)
    wait_until(lambda: versions(h, "a")[-1]["upper"] is not None, 30, "a's last version closed")

    vs = versions(h, "a")
    assert [v["change"] for v in vs] == ["ADDED", "MODIFIED", "MODIFIED"], vs
    assert [v["rv"] for v in vs][:2] == [rv1, rv2], vs
    for prev, nxt in zip(vs, vs[1:]):
        assert prev["upper"] == nxt["lower"] and prev["deletion"] is None, (prev, nxt)
    assert vs[-1]["deletion"] == "DELETED", vs[-1]
    assert all(v["lower"] < v["upper"] for v in vs), vs

    # as of a moment: the version valid then
    at = dict(sql(pgsql.SQL("SELECT name, resource_version FROM kwatch.as_of({}::regclass, %s)")
                  .format(pgsql.Literal("k8s." + t)), (t1,)))
    assert at.get("a") == rv1 and "gone" in at, at
    at = dict(sql(pgsql.SQL("SELECT name, resource_version FROM kwatch.as_of({}::regclass, %s)")
                  .format(pgsql.Literal("k8s." + t)), (t2,)))
    assert at.get("a") == rv2, at
    assert "a" not in dict(sql(pgsql.SQL("SELECT name, 1 FROM kwatch.as_of({}::regclass, now())")
                               .format(pgsql.Literal("k8s." + t))))

    # what changed between two versions
    diff = sql("SELECT path, old_value, new_value FROM kwatch.object_diff(%s, %s)",
               (psycopg2.extras.Json(vs[0]["object"]), psycopg2.extras.Json(vs[1]["object"])))
    assert diff == [(["metadata", "labels"], None, {"x": "1"})] or \
        diff == [(["metadata", "labels", "x"], None, "1")], diff

    # a deletion the watch never saw: the worker is away, comes back with a
    # checkpoint older than the watch cache and relists (as test_informer)
    worker = sql_one("SELECT kwatch.worker_pid()")
    sql("SELECT pg_terminate_backend(%s)", (worker,))
    wait_until(lambda: sql_one("SELECT kwatch.worker_pid()") != worker, 20, "the worker to exit")
    kubectl("delete", "configmap", "gone", "-n", ns)
    # a fresh watch cache: the WATCH from "1" gets 410 on a young control
    # plane too, whose cache would still replay the deletion (issue 34)
    conftest.CLUSTER.restart_apiserver()
    sql("UPDATE kwatch.registrations SET resource_version = '1' WHERE server = %s", (srv,))
    wait_until(lambda: sql_one("SELECT kwatch.worker_pid()") not in (None, worker), 30, "a new worker")
    wait_until(lambda: versions(h, "gone")[-1]["upper"] is not None, 60, "gone's version closed")
    assert versions(h, "gone")[-1]["deletion"] == "DELETED_FINAL_STATE_UNKNOWN"
    assert_table_matches_server("k8s." + t, srv, ["configmaps", "-n", ns])

    # the open versions are the mirror, object for object
    open_ = sql(pgsql.SQL("SELECT uid, resource_version, object FROM k8s.{} WHERE upper_inf(valid)"
                          " ORDER BY uid").format(pgsql.Identifier(h)))
    mirror = sql(pgsql.SQL("SELECT uid, resource_version, object FROM k8s.{} ORDER BY uid")
                 .format(pgsql.Identifier(t)))
    assert open_ == mirror

    # unwatch: the watch's rows go, their versions close as UNWATCHED
    sql("SELECT kwatch.unwatch('configmaps', server => %s)", (srv,))
    assert sql(pgsql.SQL("SELECT DISTINCT deletion FROM k8s.{} WHERE name = 'kube-root-ca.crt'")
               .format(pgsql.Identifier(h))) == [("UNWATCHED",)]
    assert sql_one(pgsql.SQL("SELECT count(*) FROM k8s.{} WHERE upper_inf(valid)")
                   .format(pgsql.Identifier(h))) == 0


def test_retention_by_age_and_size(ctx, settings):
    """The worker prunes closed versions older than the retention and the
    oldest closed versions beyond max_rows; open versions stay."""
    settings(history_prune_interval=1)
    ns = ctx.namespace()
    srv = ctx.server()
    kubectl("apply", "-f", "-", input=configmaps_doc(ns, ["r"]))
    t, h = history_table(ctx, srv, ns, history_retention="3 seconds")
    count = pgsql.SQL("SELECT count(*) FILTER (WHERE upper_inf(valid)), count(*) FROM k8s.{}"
                      " WHERE name = 'r'").format(pgsql.Identifier(h))
    for i in range(4):
        kubectl("label", "configmap", "r", "-n", ns, "i=%d" % i, "--overwrite")
    wait_until(lambda: sql(count)[0] == (1, 5), 30, "five versions of r")
    wait_until(lambda: sql(count)[0] == (1, 1), 30, "closed versions pruned after 3 s")

    # by size: at most 3 rows; retention by age off
    sql("SELECT kwatch.history(%s::regclass, retention => NULL, max_rows => 3)", ("k8s." + t,))
    for i in range(6):
        kubectl("label", "configmap", "r", "-n", ns, "j=%d" % i, "--overwrite")
    rv = rv_of(ns, "r")
    wait_until(lambda: sql_one(pgsql.SQL("SELECT resource_version FROM k8s.{} WHERE name = 'r'"
                                         " AND upper_inf(valid)").format(pgsql.Identifier(h))) == rv,
               30, "the newest version of r")
    wait_until(lambda: sql_one(pgsql.SQL("SELECT count(*) FROM k8s.{}").format(pgsql.Identifier(h))) <= 3,
               30, "history cut to max_rows")
    names = {r[0] for r in sql(pgsql.SQL("SELECT name FROM k8s.{} WHERE upper_inf(valid)")
                               .format(pgsql.Identifier(h)))}
    assert "r" in names and "kube-root-ca.crt" in names, names


def test_history_turned_on_later(ctx):
    """kwatch.history() on a mirror table that already holds rows: each
    opens its first version; later changes add versions; turning it off
    keeps the table and stops adding; only the table's owner may."""
    ns = ctx.namespace()
    srv = ctx.server()
    kubectl("apply", "-f", "-", input=configmaps_doc(ns, ["p", "q"]))
    t = "cml_" + ctx.base[-10:].replace("-", "_")
    ctx.tables += [t + "_history", t]
    watch("configmaps", srv, namespace=ns, table_name=t)
    sql("SELECT kwatch.wait_synced('configmaps', server => %s, timeout => '60s')", (srv,))
    h = sql_one("SELECT kwatch.history(%s::regclass)::text", ("k8s." + t,))
    assert h == "k8s." + t + "_history"
    assert sql_one(pgsql.SQL("SELECT count(*) FROM {} WHERE upper_inf(valid)").format(pgsql.SQL(h))) == \
        sql_one(pgsql.SQL("SELECT count(*) FROM k8s.{}").format(pgsql.Identifier(t)))
    kubectl("label", "configmap", "p", "-n", ns, "y=1")
    wait_until(lambda: len(versions(t + "_history", "p")) == 2, 30, "p's second version")

    other = pgsql.Identifier(("kwh_" + ctx.base)[:63].replace("-", "_"))
    sql(pgsql.SQL("CREATE ROLE {}").format(other))
    try:
        sql(pgsql.SQL("GRANT EXECUTE ON FUNCTION kwatch.history(regclass, boolean, interval, bigint) TO {}").format(other))
        oid = sql_one("SELECT %s::regclass::oid", ("k8s." + t,))
        conn = conftest.PG.connect()
        try:
            cur = conn.cursor()
            cur.execute(pgsql.SQL("SET ROLE {}").format(other))
            try:
                cur.execute("SELECT kwatch.history(%s::oid::regclass, false)", (oid,))
                raise AssertionError("another role turned history off")
            except psycopg2.Error as e:
                assert e.pgcode == "42501" and "must be owner" in e.pgerror, e.pgerror
        finally:
            conn.close()
    finally:
        sql(pgsql.SQL("DROP OWNED BY {}; DROP ROLE {}").format(other, other))

    sql("SELECT kwatch.history(%s::regclass, false)", ("k8s." + t,))
    kubectl("label", "configmap", "p", "-n", ns, "y=2", "--overwrite")
    wait_until(lambda: sql_one(pgsql.SQL("SELECT object->'metadata'->'labels'->>'y' FROM k8s.{}"
                                         " WHERE name = 'p'").format(pgsql.Identifier(t))) == "2",
               30, "the mirror took the change")
    assert len(versions(t + "_history", "p")) == 2


def test_each_version_says_which_field_managers_changed_it(ctx):
    """Issue 49: a version's `managers` summarizes the object's
    metadata.managedFields (manager, operation, time, subresource), which
    the mirror drops, with `changed` true for the entries that are new or
    whose time moved since the previous version: who made this change (a
    field manager, not a user).  The object itself has no managedFields."""
    import json
    ns = ctx.namespace()
    srv = ctx.server()
    kubectl("apply", "-f", "-", input=configmaps_doc(ns, ["w"]))
    t, h = history_table(ctx, srv, ns)
    sql("SELECT kwatch.apply(%s::jsonb, server => %s, field_manager => 'kw-history-test', at => 'now')",
        (json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w", "namespace": ns},
                     "data": {"by": "kw"}}), srv))
    wait_until(lambda: len(versions(h, "w")) == 2, 30, "w's second version")
    kubectl("label", "configmap", "w", "-n", ns, "who=kubectl")
    wait_until(lambda: len(versions(h, "w")) == 3, 30, "w's third version")
    rows = sql(pgsql.SQL("SELECT change, managers, object->'metadata' ? 'managedFields' FROM k8s.{}"
                         " WHERE name = 'w' ORDER BY lower(valid)").format(pgsql.Identifier(h)))
    assert [r[0] for r in rows] == ["ADDED", "MODIFIED", "MODIFIED"] and not any(r[2] for r in rows), rows
    for _, managers, _ in rows:
        assert managers and all(set(m) <= {"manager", "operation", "time", "subresource", "changed"}
                                and m["manager"] and m["time"] for m in managers), managers
    changed = [[(m["manager"], m["operation"]) for m in r[1] if m["changed"]] for r in rows]
    assert [m for m, _ in changed[0]] and all(m.startswith("kubectl") for m, _ in changed[0]), changed
    assert changed[1] == [("kw-history-test", "Apply")], changed
    assert len(changed[2]) == 1 and changed[2][0][0].startswith("kubectl"), changed
    # the earlier managers are still listed, unchanged
    assert ("kw-history-test", "Apply", False) in [(m["manager"], m["operation"], m["changed"])
                                                   for m in rows[2][1]], rows[2][1]
