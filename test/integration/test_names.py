"""Which watch a name means (doc/reference.md, "Which watch a name means"):
kubectl's short names and the other forms through watch, unwatch, relist,
wait_synced, wait_current and history; 42P08 for a name that means several
of the caller's watches; 42704 for an unknown server in every function; a
short name unwatched while its cluster is down (the names watch() kept);
a HINT that names the caller's own table only; unwatch(drop_table) of a
table another watch still writes."""
import psycopg2
import pytest
from psycopg2 import sql as pgsql

import conftest
from common import free_port
from conftest import sql, sql_one, wait_watching, watch


def k8s_tables():
    return {r[0] for r in sql("SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                              " WHERE n.nspname = 'k8s' AND c.relkind IN ('r', 'p')")}


def error(query, params=None, conn=None):
    with pytest.raises(psycopg2.Error) as e:
        sql(query, params, conn)
    return e.value


def notices_of(query, params=None):
    conn = conftest.PG.connect(autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute(query, params)
            return cur.fetchall(), list(conn.notices)
    finally:
        conn.close()


def test_short_names_through_every_function(ctx):
    """watch('sa') keeps the names discovery gave; the same short name then
    means the watch in unwatch, relist, wait_synced, wait_current, history."""
    srv, ns = ctx.server(), ctx.namespace()
    before = k8s_tables()
    try:
        assert watch("sa", srv, namespace=ns) == "k8s.serviceaccounts"
        names = sql_one("SELECT names FROM kwatch.registrations WHERE server = %s", (srv,))
        assert {"serviceaccounts", "serviceaccount", "sa"} <= set(names), names
        assert set(sql_one("SELECT names FROM kwatch.watches WHERE server = %s", (srv,))) >= set(names)
        sql("SELECT kwatch.wait_synced('sa', server => %s, timeout => '60s')", (srv,))
        assert sql_one("SELECT kwatch.wait_current('ServiceAccount', server => %s, timeout => '30s')",
                       (srv,))
        assert sql_one("SELECT kwatch.relist('serviceaccount', server => %s, wait => true,"
                       " timeout => '60s')", (srv,)) is True
        assert sql_one("SELECT kwatch.history('sa', server => %s)::text", (srv,)) \
            == "k8s.serviceaccounts_history"
        # a table, with or without its schema, as a regclass would read it
        assert sql_one("SELECT kwatch.history('serviceaccounts', false)::text") == "k8s.serviceaccounts_history"
        assert sql_one("SELECT kwatch.history('k8s.serviceaccounts', false)::text") \
            == "k8s.serviceaccounts_history"
        assert sql_one("SELECT kwatch.unwatch('sa', server => %s, drop_table => true)", (srv,)) is True
        assert sql_one("SELECT to_regclass('k8s.serviceaccounts')") is None
        assert sql_one("SELECT count(*) FROM kwatch.registrations WHERE server = %s", (srv,)) == 0
    finally:
        ctx.tables += sorted(k8s_tables() - before)


def test_an_ambiguous_name_is_42P08_everywhere(ctx):
    """Two watches of configmaps by one role on one server (two people who
    share a role): no name of the resource picks one; the table does."""
    srv, ns = ctx.server(), ctx.namespace()
    before = k8s_tables()
    try:
        assert watch("cm", srv, namespace=ns) == "k8s.configmaps"
        assert watch("configmaps", srv, namespace=ns, label_selector="team=b",
                     table_name="names_team_cms") == "k8s.names_team_cms"
        for q in ("SELECT kwatch.unwatch('configmaps', server => %s)",
                  "SELECT kwatch.unwatch('cm', server => %s, drop_table => true)",
                  "SELECT kwatch.relist('ConfigMap', server => %s)",
                  "SELECT kwatch.history('configmap', server => %s)",
                  "SELECT kwatch.watch('cm', server => %s, namespace => 'other')"):
            e = error(q, (srv,))
            assert e.pgcode == "42P08", (q, e.pgerror)
            assert "k8s.configmaps" in e.diag.message_detail and "k8s.names_team_cms" in e.diag.message_detail, \
                e.diag.message_detail
            assert e.diag.message_hint, q
        assert "label selector team=b" in error("SELECT kwatch.unwatch('cm', server => %s)", (srv,)).diag.message_detail
        assert sql_one("SELECT count(*) FROM kwatch.registrations WHERE server = %s", (srv,)) == 2
        # the same call again names the watch with those very settings
        assert watch("configmaps", srv, namespace=ns) == "k8s.configmaps"
        # waiting for both is no choice made for the caller
        sql("SELECT kwatch.wait_synced('cm', server => %s, timeout => '60s')", (srv,))
        # the table with its schema names one, also the default table's name
        assert sql_one("SELECT kwatch.unwatch('k8s.configmaps', server => %s, drop_table => true)",
                       (srv,)) is True
        assert sql_one("SELECT table_name FROM kwatch.watches WHERE server = %s", (srv,)) == "k8s.names_team_cms"
        assert sql_one("SELECT kwatch.unwatch('cm', server => %s, drop_table => true)", (srv,)) is True
        assert sql_one("SELECT count(*) FROM kwatch.registrations WHERE server = %s", (srv,)) == 0
    finally:
        ctx.tables += sorted(k8s_tables() - before)


def test_an_unknown_server_is_42704_everywhere(ctx):
    ctx.server()
    for q in ("SELECT kwatch.watch('pods', server => 'names_prod_typo')",
              "SELECT kwatch.unwatch('pods', server => 'names_prod_typo')",
              "SELECT kwatch.relist('pods', server => 'names_prod_typo')",
              "SELECT kwatch.wait_synced('pods', server => 'names_prod_typo')",
              "SELECT kwatch.wait_current('pods', server => 'names_prod_typo')",
              "SELECT kwatch.history('pods', server => 'names_prod_typo')"):
        e = error(q)
        assert e.pgcode == "42704" and 'server "names_prod_typo" does not exist' in e.pgerror, (q, e.pgerror)


def test_a_short_name_while_the_server_is_down(ctx):
    """A server that refuses connections after watch(): its short name is
    resolved from the names kept with the caller's own watches, for watch()
    on another server that is down, relist() and unwatch()."""
    ns = ctx.namespace()
    up, down = ctx.server(auth="token"), ctx.server("-down", auth="token")
    before = k8s_tables()
    try:
        assert watch("deploy", up, namespace=ns) == "k8s.deployments"
        refused = "https://127.0.0.1:%d" % free_port()
        sql(pgsql.SQL("ALTER SERVER {} OPTIONS (SET api_server {})").format(
            pgsql.Identifier(down), pgsql.Literal(refused)))
        rows, notices = notices_of("SELECT kwatch.watch('deploy', server => %s, namespace => %s)::text",
                                   (down, ns))
        assert rows == [("k8s.deployments",)]
        assert any("is unreachable: deployments.apps is registered as kwatch already knows it" in n
                   for n in notices), notices
        sql(pgsql.SQL("ALTER SERVER {} OPTIONS (SET api_server {})").format(
            pgsql.Identifier(up), pgsql.Literal(refused)))
        for s in (up, down):
            assert sql_one("SELECT kwatch.relist('deploy', server => %s)", (s,)) is True
            assert sql_one("SELECT kwatch.unwatch('deploy', server => %s)", (s,)) is True
        assert sql_one("SELECT count(*) FROM kwatch.registrations WHERE server IN (%s, %s)", (up, down)) == 0
    finally:
        ctx.tables += sorted(k8s_tables() - before)


def test_a_hint_never_names_another_roles_table(ctx):
    """Alice's watch holds k8s.configmaps; Bob's watch of the same resource
    writes a table of his own.  Bob's refused watch() names his table, his
    unwatch() of the short name removes his watch, never Alice's."""
    ns, srv = ctx.namespace(), ctx.server(auth="token")
    alice, bob = [("kwn_%s_%s" % (who, ctx.base))[:63].replace("-", "_") for who in ("alice", "bob")]
    before = k8s_tables()
    conns = []
    try:
        for r in (alice, bob):
            ident = pgsql.Identifier(r)
            sql(pgsql.SQL("CREATE ROLE {}").format(ident))
            sql(pgsql.SQL("GRANT USAGE ON FOREIGN SERVER {} TO {}").format(pgsql.Identifier(srv), ident))
            sql(pgsql.SQL("GRANT EXECUTE ON FUNCTION kwatch.watch, kwatch.unwatch TO {}").format(ident))
            sql(pgsql.SQL("CREATE USER MAPPING FOR {} SERVER {} OPTIONS (token {})").format(
                ident, pgsql.Identifier(srv), pgsql.Literal(conftest.CLUSTER.token)))
            c = conftest.PG.connect(autocommit=True)
            c.cursor().execute(pgsql.SQL("SET ROLE {}").format(ident))
            conns.append(c)
        a, b = conns
        assert watch("configmaps", srv, conn=a, namespace=ns) == "k8s.configmaps"
        assert watch("cm", srv, conn=b, namespace=ns, table_name="names_bob_cms") == "k8s.names_bob_cms"
        e = error("SELECT kwatch.watch('cm', server => %s, namespace => 'other')", (srv,), b)
        assert e.pgcode == "42710", e.pgerror
        assert "k8s.names_bob_cms" in e.diag.message_hint and "k8s.configmaps" not in e.diag.message_hint, \
            e.diag.message_hint
        assert sql_one("SELECT kwatch.unwatch('cm', server => %s)", (srv,), b) is True
        assert sql_one("SELECT owner::regrole::text FROM kwatch.registrations WHERE server = %s", (srv,)) == alice
        # nothing of Bob's left: Alice's watch is refused him, by name only
        e = error("SELECT kwatch.unwatch('cm', server => %s)", (srv,), b)
        assert e.pgcode == "42501" and "k8s.configmaps" not in (e.diag.message_hint or ""), e.pgerror
        assert sql_one("SELECT kwatch.unwatch('cm', server => %s, drop_table => true)", (srv,), a) is True
    finally:
        for c in conns:
            c.close()
        for r in (alice, bob):
            if sql_one("SELECT count(*) FROM pg_roles WHERE rolname = %s", (r,)):
                sql(pgsql.SQL("DROP OWNED BY {} CASCADE").format(pgsql.Identifier(r)))
                sql(pgsql.SQL("DROP ROLE {}").format(pgsql.Identifier(r)))
        ctx.tables += sorted(k8s_tables() - before)


def test_drop_table_of_a_table_another_watch_writes(ctx):
    """unwatch(drop_table => true) keeps a table another server's watch
    still writes, with a WARNING; the last one drops it."""
    ns = ctx.namespace()
    one, two = ctx.server("-1"), ctx.server("-2")
    before = k8s_tables()
    try:
        for s in (one, two):
            assert watch("cm", s, namespace=ns) == "k8s.configmaps"
        rows, notices = notices_of("SELECT kwatch.unwatch('cm', server => %s, drop_table => true)", (one,))
        assert rows == [(True,)]
        assert any("table k8s.configmaps is kept: other watches still write it" in n for n in notices), notices
        assert sql_one("SELECT to_regclass('k8s.configmaps')::text") == "k8s.configmaps"
        rows, notices = notices_of("SELECT kwatch.unwatch('cm', server => %s, drop_table => true)", (two,))
        assert rows == [(True,)] and not any("is kept" in n for n in notices), notices
        assert sql_one("SELECT to_regclass('k8s.configmaps')") is None
    finally:
        ctx.tables += sorted(k8s_tables() - before)
