-- history_tables: the mirror tables with history, and how long they keep
-- closed versions.  Read by the worker, which prunes each table by an apply
-- worker request of its own, bounded by kwatch.apply_timeout
-- (src/transfer/worker.c prune_if_due, src/apply/history.c), and notes when
-- a table's pruning began and when it finished: a table whose last pruning
-- never finished (its apply worker was terminated) is listed last in the
-- next round.
CREATE TABLE kwatch.history_tables (
    table_name    text PRIMARY KEY,       -- the mirror table, in schema k8s
    history_table text NOT NULL,          -- in schema k8s
    history_oid   oid NOT NULL,           -- that table, as kwatch created it
    enabled       boolean NOT NULL DEFAULT true,  -- the trigger is on
    retention     interval,               -- closed versions older than this go; NULL: kept
    max_rows      bigint CHECK (max_rows > 0),  -- at most this many rows; NULL: no limit
    prune_started_at timestamptz,         -- the last pruning began
    pruned_at     timestamptz,            -- and finished
    CHECK (retention IS NULL OR retention > interval '0')
);
SELECT pg_catalog.pg_extension_config_dump('kwatch.history_tables', '');
GRANT SELECT ON kwatch.history_tables TO PUBLIC;
