"""Every listable resource of the cluster, watched at once by the one worker.

Issue #2: "50 watched resources must not need 50 processes" -- one background
worker multiplexes all LIST and WATCH requests (libcurl multi, HTTP/2), and
every mirror table must still equal the server object by object.
"""
from conftest import assert_table_matches_server, kubectl, sql, sql_one, wait_until, watch


def test_every_listable_resource_through_one_worker(ctx):
    names = kubectl("api-resources", "--verbs=list,watch", "-o", "name").split()
    assert len(names) >= 30, names  # kube-apiserver 1.20 serves ~45

    srv = ctx.server()
    before = {r[0] for r in sql("SELECT format('k8s.%I', relname) FROM pg_class c"
                                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                                " WHERE n.nspname = 'k8s' AND c.relkind = 'r'")}
    tables = {}
    try:
        for name in names:
            tables[name] = watch(name, srv)
        _check(srv, names, tables)
    finally:
        # leave no tables behind that other tests expect not to exist
        for (res, table) in sql("SELECT resource, table_name FROM kwatch.watches WHERE server = %s"
                                " ORDER BY resource LIKE '%%.%%' DESC", (srv,)):
            sql("SELECT kwatch.unwatch(%s, server => %s, drop_table => %s)",
                (res, srv, table not in before))


def _check(srv, names, tables):
    assert len(set(tables.values())) == len(names), "each resource gets its own table"

    def all_healthy():
        return sql_one("SELECT count(*) FILTER (WHERE healthy) || '/' || count(*)"
                       " FROM kwatch.watches WHERE server = %s", (srv,))
    wait_until(lambda: all_healthy() == "%d/%d" % (len(names), len(names)),
               timeout=120, msg="all %d watches healthy" % len(names))

    # one process serves them all
    assert sql_one("SELECT count(*) FROM pg_stat_activity"
                   " WHERE backend_type = 'kwatch worker'") == 1

    for name, table in tables.items():
        assert_table_matches_server(table, srv, [name, "-A"])

    # and nothing failed on the way
    assert sql_one("SELECT coalesce(sum(decode_errors + database_errors), 0)"
                   " FROM kwatch.watches WHERE server = %s", (srv,)) == 0
