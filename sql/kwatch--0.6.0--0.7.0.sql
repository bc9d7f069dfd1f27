-- kwatch 0.6.0 -> 0.7.0.
--
-- This script is shared: each change has its own section below, headed by
-- the issue it answers.  Append new sections at the end.

\echo Use "ALTER EXTENSION kwatch UPDATE TO '0.7.0'" to load this file. \quit

-- =====================================================================
-- Issue 30: security round four.
--
-- 1. (Critical) What a caller had deferred fired under the extension
--    owner's identity inside watch()/unwatch()/history()/relist() and DROP
--    OWNED: fixed in the library (src/privileged.c and src/ownership.c fire
--    it before switching, as the caller; src/owner_functions.c never fires
--    anything with the owner's rights).  Nothing to change here.
-- 2. (High) One role could hold every apply worker: a non-superuser's watch
--    may no longer have no deadline (apply_timeout => '0') or one longer
--    than kwatch.apply_timeout.  The library clamps whatever a registration
--    says (src/watch_apply.c) and gives one role at most all apply workers
--    but one (src/apply_pool.c); registrations refuse such a value from now
--    on (below), and the ones 0.6.0 let through are cleared to NULL (the
--    setting) here.
-- =====================================================================

-- _check_apply_timeout() -> trigger: BEFORE INSERT OR UPDATE OF
-- apply_timeout, owner on kwatch.registrations: refuses (42501) a deadline
-- of 0 (none) or longer than kwatch.apply_timeout for a watch whose owner
-- is not a superuser, while the setting has a deadline at all (README
-- "Roles": a table owner's code may not hold an apply worker past
-- kwatch.apply_timeout + 10 s).  kwatch.apply_timeout is a sighup setting:
-- a role cannot raise it for its session.
CREATE FUNCTION @extschema@._check_apply_timeout() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  limit_ interval := pg_catalog.current_setting('kwatch.apply_timeout', true)::interval;
BEGIN
  IF NEW.apply_timeout IS NULL OR limit_ IS NULL OR limit_ = interval '0'
     OR (SELECT a.rolsuper FROM pg_catalog.pg_roles a WHERE a.oid = NEW.owner) THEN
    RETURN NEW;
  END IF;
  IF NEW.apply_timeout = interval '0' OR NEW.apply_timeout > limit_ THEN
    -- a watch given to another role (REASSIGN OWNED): the setting's deadline
    IF TG_OP = 'UPDATE' AND NEW.owner IS DISTINCT FROM OLD.owner
       AND NEW.apply_timeout IS NOT DISTINCT FROM OLD.apply_timeout THEN
      NEW.apply_timeout := NULL;
      RETURN NEW;
    END IF;
    RAISE EXCEPTION 'apply_timeout % is longer than kwatch.apply_timeout (%)',
                    CASE WHEN NEW.apply_timeout = interval '0' THEN '0 (no limit)'
                         ELSE NEW.apply_timeout::text END, limit_
      USING ERRCODE = 'insufficient_privilege',
            DETAIL = 'Only a superuser''s watch may have no deadline or a longer one: its table owner''s code would hold an apply worker from every other watch.',
            HINT = 'Leave apply_timeout out (the setting), or pass a shorter one.';
  END IF;
  RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._check_apply_timeout() FROM PUBLIC;
CREATE TRIGGER check_apply_timeout BEFORE INSERT OR UPDATE OF apply_timeout, owner
  ON @extschema@.registrations
  FOR EACH ROW EXECUTE FUNCTION @extschema@._check_apply_timeout();

-- the registrations 0.6.0 let through: the setting's deadline instead
UPDATE @extschema@.registrations r SET apply_timeout = NULL
 WHERE r.apply_timeout IS NOT NULL
   AND NOT COALESCE((SELECT a.rolsuper FROM pg_catalog.pg_roles a WHERE a.oid = r.owner), false)
   AND COALESCE(pg_catalog.current_setting('kwatch.apply_timeout', true)::interval, interval '0') > interval '0'
   AND (r.apply_timeout = interval '0'
        OR r.apply_timeout > pg_catalog.current_setting('kwatch.apply_timeout', true)::interval);

-- 6. (Low) kwatch's advisory lock was anyone's: the schema of the staging
--    tables (kwatch_stage.relist_stage_<id>, src/sync.c) is created here,
--    by the extension's owner, so a relist needs no lock another role can
--    hold.  An existing one (the worker made it) is kept: the worker checks
--    that a superuser owns it.  Not a member of the extension: its unlogged
--    tables are the worker's scratch space, left out of dumps either way.
-- (CREATE SCHEMA IF NOT EXISTS is refused in an extension script when
-- the schema exists and is not the extension's, as after DROP EXTENSION.)
DO $$
BEGIN
  IF pg_catalog.to_regnamespace('kwatch_stage') IS NULL THEN
    CREATE SCHEMA kwatch_stage;
    ALTER EXTENSION kwatch DROP SCHEMA kwatch_stage;
  END IF;
END
$$;
GRANT USAGE ON SCHEMA kwatch_stage TO PUBLIC;

-- 3. (Medium) One history table stopped pruning for everyone: pruning ran
--    every history table in one transaction, so a trigger that caught the
--    deadline's cancel on one table rolled back every table's deletes.  The
--    worker now prunes each table in transactions of its own
--    (src/history.c), and notes when a table's pruning began and when it
--    finished: a table whose last pruning never finished (its apply worker
--    was terminated) is pruned last in the next round.
ALTER TABLE @extschema@.history_tables
  ADD COLUMN prune_started_at timestamptz,
  ADD COLUMN pruned_at timestamptz;

-- 4. (Medium) Secret digests could be tested against guesses from another
--    object: the digest depended only on the value.  The 0.7.0 library keys
--    it by the Secret's uid, the field and the key (src/redact.c).  The
--    digests already stored cannot be recomputed (the values are not
--    kept), so they become plain "<redacted>": in history tables for good,
--    and in mirror tables until the relist asked for here rewrites each
--    row with its new digests (their resource_version is cleared so that
--    the relist sees them as changed; each is notified once as MODIFIED).
--    Each table is rewritten as its owner (_execute_as_owner): its
--    triggers never run with the rights of the role running this update.
DO $$
DECLARE
  r record;
  rel regclass;
  rewrite constant text :=
    'UPDATE %s SET object = pg_catalog.regexp_replace(object::text,'
    ' ''<redacted hmac-sha256:[0-9a-f]{32}>'', ''<redacted>'', ''g'')::jsonb%s'
    ' WHERE object::text ~ ''<redacted hmac-sha256:''';
BEGIN
  -- a table its owner locks or whose trigger refuses must not stop the
  -- update that ships these fixes: it is skipped with a WARNING (its
  -- mirror rows still get the new digests when the relist rewrites them
  -- after their next change; run the UPDATE below as its owner to redo it)
  SET LOCAL lock_timeout = '5s';
  SET LOCAL statement_timeout = '5min';
  FOR r IN SELECT DISTINCT g.table_name FROM @extschema@.registrations g
            WHERE g.api_group = '' AND g.plural = 'secrets' AND NOT g.secret_data LOOP
    -- only the history table kwatch made for this mirror table (by OID and name)
    FOR rel IN SELECT c.oid::regclass FROM @extschema@.history_tables h
                 JOIN pg_catalog.pg_class c ON c.oid = h.history_oid
                      AND c.relname = h.history_table
                      AND c.relnamespace = 'k8s'::pg_catalog.regnamespace
                WHERE h.table_name = r.table_name LOOP
      BEGIN
        PERFORM @extschema@._execute_as_owner(rel, format(rewrite, rel, ''));
      EXCEPTION WHEN OTHERS THEN
        RAISE WARNING 'kwatch: the digests in % were not rewritten: %', rel, SQLERRM;
      END;
    END LOOP;
    rel := pg_catalog.to_regclass(format('k8s.%I', r.table_name));
    IF rel IS NOT NULL THEN
      BEGIN
        PERFORM @extschema@._execute_as_owner(rel, format(rewrite, rel, ', resource_version = '''''));
      EXCEPTION WHEN OTHERS THEN
        RAISE WARNING 'kwatch: the digests in % were not rewritten: %', rel, SQLERRM;
      END;
    END IF;
  END LOOP;
  FOR r IN SELECT g.id FROM @extschema@.registrations g
            WHERE g.api_group = '' AND g.plural = 'secrets' AND NOT g.secret_data LOOP
    UPDATE @extschema@.registrations SET resource_version = NULL WHERE id = r.id;
    BEGIN
      PERFORM @extschema@._request_relist(r.id);
    EXCEPTION WHEN OTHERS THEN
      NULL;    -- no worker runs it now: it lists when it starts (no checkpoint)
    END;
  END LOOP;
  RESET lock_timeout;
  RESET statement_timeout;
END
$$;
