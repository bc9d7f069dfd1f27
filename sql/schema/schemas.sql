-- Schemas.  kwatch is the extension's schema (kwatch.control: schema =
-- kwatch, relocatable = false): CREATE EXTENSION makes it, and every object
-- of these files is in it, named kwatch.<object>.  Everyone may use it;
-- what each role may do is granted object by object (doc/security.md).
-- The schemas k8s (mirror tables) and kubectl (their printed views) are
-- made on first use by the functions that put tables and views in them
-- (create_mirror_table, _make_printed_view), never by this script.
GRANT USAGE ON SCHEMA kwatch TO PUBLIC;

-- kwatch_stage: the schema of the relist staging tables
-- (kwatch_stage.relist_stage_<id>, src/apply/sync.c), made by the
-- extension's owner, so that a relist needs no lock another role could
-- hold.  An existing one (after DROP EXTENSION, or made by the worker) is
-- kept: the worker checks that a superuser owns it.  Not a member of the
-- extension: its unlogged tables are the worker's scratch space, left out
-- of dumps either way.  (CREATE SCHEMA IF NOT EXISTS is refused in an
-- extension script when the schema exists and is not the extension's.)
DO $$
BEGIN
  IF pg_catalog.to_regnamespace('kwatch_stage') IS NULL THEN
    CREATE SCHEMA kwatch_stage;
    ALTER EXTENSION kwatch DROP SCHEMA kwatch_stage;
  END IF;
END
$$;
GRANT USAGE ON SCHEMA kwatch_stage TO PUBLIC;
