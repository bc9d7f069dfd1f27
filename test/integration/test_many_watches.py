"""Every listable resource of the cluster, watched at once by the one worker.

Issue #2: "50 watched resources must not need 50 processes" -- one background
worker multiplexes all LIST and WATCH requests (libcurl multi, HTTP/2), and
every mirror table must still equal the server object by object.
"""
from conftest import assert_table_matches_server, kubectl, sql_one, wait_until, watch


def test_every_listable_resource_through_one_worker(ctx):
    names = kubectl("api-resources", "--verbs=list,watch", "-o", "name").split()
    assert len(names) >= 30, names  # kube-apiserver 1.20 serves ~45

    srv = ctx.server()
    tables = {name: watch(name, srv) for name in names}
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
