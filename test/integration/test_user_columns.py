"""Users may add their own columns, indexes and triggers to a mirror table."""
from conftest import (assert_table_matches_server, create_pods, kubectl, sql, sql_one,
                      wait_until, wait_watching, watch)


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
