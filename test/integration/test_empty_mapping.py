"""A user mapping without a credential never means the server's credentials.

PostgreSQL lets any role with USAGE on a server create or alter its own user
mapping (commands/foreigncmds.c, user_mapping_ddl_aclcheck); a mapping with
no credential option used to replace nothing, so the server's kubeconfig (the
admin's) was used.  Here the server's owner shares the admin's token with a
PUBLIC mapping on purpose, and a tenant's own empty mapping must get neither
that nor the server's own: every path that resolves credentials (watch() and
its discovery, a live read and write, apply at commit and at once, delete,
wait_current, the request sender, the worker) refuses it with 28000, and the
API server's audit log shows no request of that tenant's namespace made as
anyone but the tenant's own Kubernetes user.
"""
import json
import re

import psycopg2
import pytest
from psycopg2 import sql as pgsql

import conftest
from conftest import sql, sql_one, wait_until


def cm(ns, name):
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": name, "namespace": ns}, "data": {"k": "v"}})


def test_an_empty_user_mapping_never_means_the_servers_credentials(ctx):
    srv = ctx.server()                      # its kubeconfig: the admin's token
    ns = ctx.namespace()
    role = ("kw_empty_" + ctx.base.replace("-", "_"))[:63]
    schema = re.sub(r"[^a-z0-9]+", "_", ctx.base + "_em")[:60]
    r, s, sc = pgsql.Identifier(role), pgsql.Identifier(srv), pgsql.Identifier(schema)
    admin = pgsql.Literal(conftest.CLUSTER.token)
    user_token = pgsql.Literal(conftest.CLUSTER.env["KWATCH_K8S_USER_TOKEN"])
    sql(pgsql.SQL("CREATE ROLE {}").format(r))
    conn = None
    try:
        # the owner shares the admin's token: what an empty mapping must not fall back to
        sql(pgsql.SQL("CREATE USER MAPPING FOR PUBLIC SERVER {} OPTIONS (token {});"
                      " GRANT USAGE ON FOREIGN SERVER {} TO {};"
                      " GRANT EXECUTE ON FUNCTION kwatch.watch, kwatch.unwatch, kwatch.wait_current TO {};"
                      " CREATE SCHEMA {};"
                      " CREATE FOREIGN TABLE {}.cms (namespace text, name text, object jsonb) SERVER {}"
                      "   OPTIONS (resource 'configmaps', namespace {}, use_remote_estimate 'false');"
                      " GRANT USAGE ON SCHEMA {} TO {}; GRANT ALL ON {}.cms TO {}")
            .format(s, admin, s, r, r, sc, sc, s, pgsql.Literal(ns), sc, r, sc, r))
        # a watch of the superuser's (its own credentials), cluster-wide, for wait_current
        sql("SELECT kwatch.watch('configmaps', server => %s)", (srv,))
        sql("SELECT kwatch.wait_synced('configmaps', server => %s, timeout => '1 min')", (srv,))
        since = conftest.CLUSTER.audit_size()

        conn = conftest.PG.connect(autocommit=True)
        cur = conn.cursor()
        cur.execute(pgsql.SQL("SET ROLE {}").format(r))
        # the tenant makes its own mapping, with no credential (it may: USAGE)
        cur.execute(pgsql.SQL("CREATE USER MAPPING FOR CURRENT_USER SERVER {}").format(s))

        def refused(query, params=None, hint=True):
            with pytest.raises(psycopg2.Error) as e:
                cur.execute(query, params)
            assert e.value.pgcode == "28000", (query, e.value.pgerror)
            assert "has no credential" in e.value.diag.message_primary, e.value.pgerror
            # (an outcome the sender stored keeps the message, not the hint)
            assert not hint or "ADD token" in e.value.diag.message_hint, e.value.pgerror
            return e.value

        refused("SELECT kwatch.watch('configmaps', server => %s, namespace => %s,"
                " table_name => 'empty_cms')", (srv, ns))
        refused("SELECT kwatch.watch('secrets', server => %s, namespace => %s, secret_data => true,"
                " table_name => 'empty_secrets')", (srv, ns))
        refused("SELECT name FROM %s.cms" % schema)
        refused("INSERT INTO %s.cms (namespace, name, object) VALUES (%%s, 'live', '{}')" % schema, (ns,))
        refused("SELECT kwatch.apply(%s::jsonb, server => %s)", (cm(ns, "at-commit"), srv))
        refused("SELECT kwatch.apply(%s::jsonb, server => %s, at => 'now')", (cm(ns, "at-once"), srv))
        refused("SELECT kwatch.delete('configmaps', 'x', namespace => %s, server => %s, at => 'now')",
                (ns, srv))
        refused("SELECT kwatch.delete('configmaps', 'x', namespace => %s, server => %s)", (ns, srv))
        refused("SELECT kwatch.wait_current('configmaps', server => %s, timeout => '10s')", (srv,))
        assert sql_one("SELECT count(*) FROM kwatch.registrations WHERE server = %s AND owner = %s::regrole",
                       (srv, role)) == 0

        # with a token of its own the tenant works, as its own Kubernetes user
        cur.execute(pgsql.SQL("ALTER USER MAPPING FOR CURRENT_USER SERVER {} OPTIONS (ADD token {})")
                    .format(s, user_token))
        cur.execute("SELECT kwatch.watch('configmaps', server => %s, namespace => %s,"
                    " table_name => 'empty_cms')", (srv, ns))
        ctx.tables.append("empty_cms")
        cur.execute("SELECT kwatch.wait_synced('empty_cms', server => %s, timeout => '1 min')", (srv,))

        # an apply queued with the token, the token dropped before COMMIT:
        # the request sender finds the empty mapping and sends nothing
        conn.autocommit = False
        cur.execute("SELECT (kwatch.apply(%s::jsonb, server => %s)).id", (cm(ns, "queued"), srv))
        aid = cur.fetchone()[0]
        cur.execute(pgsql.SQL("ALTER USER MAPPING FOR CURRENT_USER SERVER {} OPTIONS (DROP token)").format(s))
        conn.commit()
        conn.autocommit = True
        refused("SELECT kwatch.wait_apply(%s, '1 min')", (aid,), hint=False)
        cur.execute("SELECT state, sqlstate FROM kwatch.applies WHERE id = %s", (aid,))
        assert cur.fetchone() == ("failed", "28000")

        # the worker: the running watch stops at the emptied mapping
        def status():
            rows = sql("SELECT healthy, last_error FROM kwatch.watches WHERE server = %s"
                       " AND table_name = 'k8s.empty_cms'", (srv,))
            return rows[0] if rows and rows[0][1] and "has no credential" in rows[0][1] else None
        st = wait_until(status, 30, "the watch to refuse")
        assert not st[0], st
        conftest.CLUSTER.kubectl("create", "configmap", "after-drop", "-n", ns)
        for _ in range(3):
            assert sql_one("SELECT count(*) FROM k8s.empty_cms WHERE name = 'after-drop'") == 0
            conn.cursor().execute("SELECT pg_sleep(1)")

        # the audit log: in the tenant's namespace, kwatch acted as the tenant only
        users = {(ev.get("user", {}).get("username"))
                 for ev in conftest.CLUSTER.audit_requests(since, "kwatch/", verbs=("get", "list", "watch", "create", "patch", "update", "delete"))
                 if "/namespaces/%s/" % ns in ev["requestURI"]}
        assert users == {"kwatch-user"}, users
    finally:
        if conn is not None:
            conn.close()
        # by the table with its schema: a bare 'configmaps' names both watches (42P08)
        for (tbl,) in sql("SELECT table_name FROM kwatch.watches WHERE server = %s", (srv,)):
            sql("SELECT kwatch.unwatch(%s, server => %s)", (tbl, srv))
        sql(pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sc))
        sql(pgsql.SQL("DROP OWNED BY {} CASCADE; DROP ROLE {}").format(r, r))
