"""Users may add their own columns, indexes and triggers to a mirror table."""
import conftest
from conftest import (assert_table_matches_server, create_pods, kubectl, sql, sql_one,
                      wait_until, wait_watching, watch)
from events_support import create_configmaps


def test_user_columns_indexes_and_triggers(ctx):
    ns = ctx.namespace()
    srv = ctx.server()
    uids = create_pods(ns, {"u1": {"app": "u"}, "u2": {"app": "u"}})
    table = watch("pods", srv, namespace=ns)
    wait_watching(srv, "pods")
    assert_table_matches_server(table, srv, ["pods", "-n", ns])

    # a user column with a default, an index on it, and a trigger keeping an audit trail
    sql("ALTER TABLE k8s.pods ADD COLUMN IF NOT EXISTS owner_team text DEFAULT 'unassigned'")
    sql("CREATE INDEX IF NOT EXISTS pods_owner_team_idx ON k8s.pods (owner_team)")
    sql("CREATE TABLE IF NOT EXISTS public.pod_audit (uid text, resource_version text, at timestamptz DEFAULT now())")
    sql("""CREATE OR REPLACE FUNCTION public.pod_audit_fn() RETURNS trigger LANGUAGE plpgsql AS $$
           BEGIN INSERT INTO public.pod_audit (uid, resource_version)
                 VALUES (NEW.uid, NEW.resource_version); RETURN NEW; END $$""")
    sql("DROP TRIGGER IF EXISTS pod_audit ON k8s.pods")
    sql("CREATE TRIGGER pod_audit AFTER INSERT OR UPDATE ON k8s.pods"
        " FOR EACH ROW EXECUTE FUNCTION public.pod_audit_fn()")
    try:
        sql("UPDATE k8s.pods SET owner_team = 'payments' WHERE cluster = %s AND uid = %s",
            (srv, uids["u1"]))

        # sync keeps working: a change and a new pod arrive
        kubectl("label", "pod", "u1", "-n", ns, "stage=two", "--overwrite")
        u3 = create_pods(ns, {"u3": {"app": "u"}})["u3"]
        wait_until(lambda: sql_one("SELECT labels->>'stage' FROM k8s.pods WHERE cluster = %s AND uid = %s",
                                   (srv, uids["u1"])) == "two", msg="label change mirrored")
        wait_until(lambda: sql_one("SELECT count(*) FROM k8s.pods WHERE cluster = %s AND uid = %s",
                                   (srv, u3)) == 1, msg="new pod mirrored")
        assert_table_matches_server(table, srv, ["pods", "-n", ns])

        # the user's value survives kwatch's updates; new rows get the default
        assert sql_one("SELECT owner_team FROM k8s.pods WHERE cluster = %s AND uid = %s",
                       (srv, uids["u1"])) == "payments"
        assert sql_one("SELECT owner_team FROM k8s.pods WHERE cluster = %s AND uid = %s",
                       (srv, u3)) == "unassigned"
        # the trigger saw kwatch's writes, with the resourceVersion now in the table
        rv = sql_one("SELECT resource_version FROM k8s.pods WHERE cluster = %s AND uid = %s",
                     (srv, uids["u1"]))
        assert sql_one("SELECT count(*) FROM public.pod_audit WHERE uid = %s AND resource_version = %s",
                       (uids["u1"], rv)) == 1
        assert sql_one("SELECT count(*) FROM kwatch.watches WHERE server = %s AND healthy", (srv,)) == 1
    finally:
        sql("DROP TRIGGER IF EXISTS pod_audit ON k8s.pods")
        sql("DROP INDEX IF EXISTS k8s.pods_owner_team_idx")
        sql("ALTER TABLE k8s.pods DROP COLUMN IF EXISTS owner_team")
        sql("DROP TABLE IF EXISTS public.pod_audit")
        sql("DROP FUNCTION IF EXISTS public.pod_audit_fn()")


def _first_sync_wal(ctx, ns, suffix, extra_sql):
    """Watches the ConfigMaps of `ns` on a fresh server into table
    k8s.cm_<suffix>, running extra_sql (with {t} for the table) in the
    watch()'s transaction, so before the first sync; returns (table,
    server, the WAL record types written for the table's heap during the
    sync: {record_type: count})."""
    srv = ctx.server("-" + suffix)
    conn = conftest.PG.connect(autocommit=False)
    try:
        lsn = sql_one("SELECT pg_current_wal_flush_lsn()::text", conn=conn)
        table = watch("configmaps", srv, conn=conn, namespace=ns, table_name="cm_" + suffix)
        for stmt in extra_sql:
            sql(stmt.format(t=table), conn=conn)
        conn.commit()
    finally:
        conn.close()
    wait_watching(srv, "configmaps", timeout=60)
    assert_table_matches_server(table, srv, ["configmaps", "-n", ns])
    node = sql_one("SELECT pg_relation_filenode(%s::regclass)", (table,))
    # record types as pg_walinspect names them, "+INIT" (a new page) left out
    rows = sql("SELECT split_part(record_type, '+', 1), count(*)"
               " FROM pg_get_wal_records_info(%s::pg_lsn, pg_current_wal_flush_lsn())"
               " WHERE resource_manager IN ('Heap', 'Heap2') AND block_ref ~ %s GROUP BY 1",
               (lsn, r"rel \d+/\d+/%d " % node))
    return table, srv, dict(rows)


def test_first_sync_by_copy_and_by_insert_under_a_before_trigger(ctx):
    """A list's batches are written with COPY's multi-insert
    (src/apply/copy_rows.c): the first sync's WAL holds MULTI_INSERT
    records for the mirror table, not a record per row, and the owner's
    column default and AFTER trigger apply to every row as for an INSERT.
    A table whose owner adds a BEFORE INSERT row trigger (which may change
    a row) is written by INSERT, a row at a time: the trigger sees, and
    changes, every listed row."""
    ns = ctx.namespace()
    create_configmaps(ns, "cp", 40)
    sql("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
    sql("CREATE TABLE IF NOT EXISTS public.cm_seen (uid text)")
    sql("""CREATE OR REPLACE FUNCTION public.cm_seen_fn() RETURNS trigger LANGUAGE plpgsql AS $$
           BEGIN INSERT INTO public.cm_seen VALUES (NEW.uid); RETURN NEW; END $$""")
    sql("""CREATE OR REPLACE FUNCTION public.cm_team_fn() RETURNS trigger LANGUAGE plpgsql AS $$
           BEGIN NEW.team := 'set-before'; RETURN NEW; END $$""")
    try:
        table, srv, wal = _first_sync_wal(ctx, ns, "copy", [
            "ALTER TABLE {t} ADD COLUMN team text DEFAULT 'unassigned'",
            "CREATE TRIGGER seen AFTER INSERT ON {t} FOR EACH ROW EXECUTE FUNCTION public.cm_seen_fn()"])
        rows = sql_one("SELECT count(*) FROM %s WHERE cluster = %%s" % table, (srv,))
        assert rows >= 40, rows
        assert wal.get("MULTI_INSERT", 0) >= 1 and wal.get("INSERT", 0) < rows, wal
        assert sql("SELECT DISTINCT team FROM %s WHERE cluster = %%s" % table, (srv,)) == [("unassigned",)]
        assert sql_one("SELECT count(*) FROM public.cm_seen s JOIN %s t ON t.uid = s.uid"
                       " WHERE t.cluster = %%s" % table, (srv,)) == rows

        table, srv, wal = _first_sync_wal(ctx, ns, "before", [
            "ALTER TABLE {t} ADD COLUMN team text DEFAULT 'unassigned'",
            "CREATE TRIGGER team BEFORE INSERT ON {t} FOR EACH ROW EXECUTE FUNCTION public.cm_team_fn()"])
        rows = sql_one("SELECT count(*) FROM %s WHERE cluster = %%s" % table, (srv,))
        assert wal.get("MULTI_INSERT", 0) == 0 and wal.get("INSERT", 0) >= rows, wal
        assert sql("SELECT DISTINCT team FROM %s WHERE cluster = %%s" % table, (srv,)) == [("set-before",)]
    finally:
        sql("SELECT kwatch.unwatch(resource, server => server, drop_table => true)"
            " FROM kwatch.registrations WHERE table_name IN ('cm_copy', 'cm_before')")
        sql("DROP TABLE IF EXISTS public.cm_seen")
