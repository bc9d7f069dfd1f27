"""The relist merge's plans do not depend on the mirror table's statistics
(issue 15).

A relist of a second cluster in a populated table analyzed before that
cluster's rows came is the case where the statistics lie: they say the
cluster has about one row.  (Its first sync has nothing to replace and
goes straight into the table.)
Before the staging table had an index on uid, the sweep that deletes rows
missing from the list was then planned as a nested loop that scans the whole
staging table once per mirror row (quadratic: 193 s for 10,000 pods).  This
test reads the plan the worker really ran (auto_explain, preloaded off by
conftest) and checks its shape, not its time: timings belong to `make bench`.
"""
import re
import time

import conftest
from conftest import assert_table_matches_server, sql, sql_one, wait_watching, watch
from events_support import create_configmaps

OBJECTS = 2000


def _plans(log, statement_start):
    """The auto_explain plans in `log` whose query text starts with
    `statement_start`: a list of plan texts (the lines after Query Text)."""
    plans, lines = [], log.splitlines()
    for i, line in enumerate(lines):
        if "Query Text: " + statement_start not in line:
            continue
        body = []
        for nxt in lines[i + 1:]:
            if not nxt.startswith(("\t", " ")):
                break
            body.append(nxt.strip())
        plans.append("\n".join(body))
    return plans


def test_second_cluster_sync_into_analyzed_table(ctx):
    ns = ctx.namespace()
    create_configmaps(ns, "cm", OBJECTS)

    first = ctx.server("-a")
    table = watch("configmaps", first, namespace=ns)
    wait_watching(first, "configmaps", timeout=120)
    assert_table_matches_server(table, first, ["configmaps", "-n", ns], timeout=60)
    sql("ANALYZE " + table)   # statistics now say: every row is cluster `first`
    # and keep saying so (no autoanalyze after the second cluster's rows)
    sql("ALTER TABLE %s SET (autovacuum_enabled = off)" % table)

    sql("ALTER SYSTEM SET auto_explain.log_min_duration = 0")
    sql("ALTER SYSTEM SET auto_explain.log_nested_statements = on")
    sql("SELECT pg_reload_conf()")
    try:
        offset = conftest.PG.log_size()
        second = ctx.server("-b")
        # reload is asynchronous: the worker must have auto_explain on before
        # it writes the second cluster's list
        time.sleep(1)
        assert watch("configmaps", second, namespace=ns) == table
        wait_watching(second, "configmaps", timeout=120)
        assert_table_matches_server(table, second, ["configmaps", "-n", ns], timeout=60)
        # its first sync has nothing to replace: straight into the table
        # (src/apply/relist_stage.c; by COPY, src/apply/copy_rows.c, which has no
        # plan), no staging table, no merge from it, no sweep
        log = conftest.PG.log_since(offset)
        assert _plans(log, "UPDATE kwatch.registrations"), \
            "auto_explain logged none of the worker's statements:\n" + log[-3000:]
        assert not _plans(log, "INSERT INTO %s AS t (cluster, uid, resource_version, object) SELECT $1" % table)
        assert not _plans(log, "DELETE FROM %s t WHERE t.cluster = $1 AND NOT EXISTS" % table)

        # a relist of the second cluster: merged and swept while the
        # statistics still say it has about one row
        offset = conftest.PG.log_size()
        sql("SELECT kwatch.relist('configmaps', server => %s, wait => true, timeout => '120s')", (second,))
    finally:
        sql("ALTER SYSTEM RESET auto_explain.log_min_duration")
        sql("ALTER SYSTEM RESET auto_explain.log_nested_statements")
        sql("SELECT pg_reload_conf()")
        sql("ALTER TABLE %s RESET (autovacuum_enabled)" % table)

    # OBJECTS and the namespace's kube-root-ca.crt
    assert sql_one("SELECT count(*) FROM %s WHERE cluster = %%s" % table, (second,)) == OBJECTS + 1
    log = conftest.PG.log_since(offset)
    sweeps = _plans(log, "DELETE FROM %s t WHERE t.cluster = $1 AND NOT EXISTS" % table)
    assert sweeps, "no plan of the relist sweep in the log:\n" + log[-3000:]
    for plan in sweeps:
        # the statistics say ~1 row for the new cluster: a nested loop may be
        # chosen, but its inner side must probe the staging table's index
        assert not re.search(r"Seq Scan on relist_stage_\d+", plan) or "Nested Loop" not in plan, plan
        assert re.search(r"(Index Scan using|Index Only Scan using|Bitmap Index Scan on) relist_stage_\d+_uid_idx"
                         r"|Hash (Anti )?Join|Merge (Anti )?Join", plan), plan
