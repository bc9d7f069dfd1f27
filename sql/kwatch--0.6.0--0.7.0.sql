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
--    OWNED: fixed in the library (src/functions/privileged.c and src/functions/ownership.c fire
--    it before switching, as the caller; src/functions/owner_functions.c never fires
--    anything with the owner's rights).  Nothing to change here.
-- 2. (High) One role could hold every apply worker: a non-superuser's watch
--    may no longer have no deadline (apply_timeout => '0') or one longer
--    than kwatch.apply_timeout.  The library clamps whatever a registration
--    says (src/transfer/watch_apply.c) and gives one role at most all apply workers
--    but one (src/channel/apply_pool.c); registrations refuse such a value from now
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
--    tables (kwatch_stage.relist_stage_<id>, src/apply/sync.c) is created here,
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
--    worker now prunes each table by an apply worker request of its own,
--    counted against the table owner's share of the workers and bounded by
--    kwatch.apply_timeout alone (src/transfer/worker.c prune_if_due, src/apply/history.c),
--    and notes when a table's pruning began and when it finished: a table
--    whose last pruning never finished (its apply worker was terminated) is
--    listed last in the next round.
ALTER TABLE @extschema@.history_tables
  ADD COLUMN prune_started_at timestamptz,
  ADD COLUMN pruned_at timestamptz;

-- 4. (Medium) Secret digests could be tested against guesses from another
--    object: the digest depended only on the value.  The 0.7.0 library keys
--    it by the Secret's uid, the field and the key (src/decode/redact.c).  The
--    digests already stored cannot be recomputed (the values are not
--    kept), so they become plain "<redacted>": in history tables for good,
--    and in mirror tables until the relist asked for here rewrites each
--    row with its new digests (their resource_version is cleared so that
--    the relist sees them as changed; each is notified once as MODIFIED).
--    Only tables a superuser owns are rewritten here (as their owner,
--    _execute_as_owner): the update runs no code of another role, whose
--    trigger could hold it and its locks for as long as it likes (a
--    review finding).  For a table another role owns, a WARNING gives its
--    owner the statement to run (README "Upgrading"); until then its
--    digests stay as 0.6.0 wrote them, and each Secret's row gets new ones
--    at its next change.
-- _owned_by_superuser(rel) -> boolean: whether a superuser owns `rel`
-- (whose code the 0.7.0 update may then run).
CREATE FUNCTION @extschema@._owned_by_superuser(rel regclass) RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT COALESCE((SELECT a.rolsuper FROM pg_class c JOIN pg_roles a ON a.oid = c.relowner
                   WHERE c.oid = rel), false)
$$;
REVOKE ALL ON FUNCTION @extschema@._owned_by_superuser(regclass) FROM PUBLIC;

DO $$
DECLARE
  r record;
  rel regclass;
  rewrite constant text :=
    'UPDATE %s SET object = pg_catalog.regexp_replace(object::text,'
    ' ''<redacted hmac-sha256:[0-9a-f]{32}>'', ''<redacted>'', ''g'')::jsonb%s'
    ' WHERE object::text ~ ''<redacted hmac-sha256:''';
BEGIN
  -- a table locked (or a superuser's trigger refusing) must not stop the
  -- update that ships these fixes: it is skipped with a WARNING (its
  -- mirror rows still get the new digests at their next change; run the
  -- UPDATE below as its owner to redo it)
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
      IF NOT @extschema@._owned_by_superuser(rel) THEN
        RAISE WARNING 'kwatch: % keeps the Secret digests 0.6.0 wrote', rel
          USING DETAIL = 'Its owner is not a superuser: this update runs none of its code.',
                HINT = 'As its owner, run: ' || format(rewrite, rel, '');
        CONTINUE;
      END IF;
      BEGIN
        PERFORM @extschema@._execute_as_owner(rel, format(rewrite, rel, ''));
      EXCEPTION WHEN OTHERS THEN
        RAISE WARNING 'kwatch: the digests in % were not rewritten: %', rel, SQLERRM;
      END;
    END LOOP;
    rel := pg_catalog.to_regclass(format('k8s.%I', r.table_name));
    IF rel IS NOT NULL AND NOT @extschema@._owned_by_superuser(rel) THEN
      RAISE WARNING 'kwatch: % keeps the Secret digests 0.6.0 wrote', rel
        USING DETAIL = 'Its owner is not a superuser: this update runs none of its code.',
              HINT = format('As its owner, run: %s; then SELECT kwatch.relist(''secrets'', server => ...) for each server it mirrors.',
                            format(rewrite, rel, ', resource_version = '''''));
    ELSIF rel IS NOT NULL THEN
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

-- 5. (Low/Medium) One role's watch of a resource denied it to every other
--    role: a second role could not watch it on the same server, nor into
--    a table of its own, although the HINT said so.  Now a watch is one
--    resource on one server into one table: several roles (or one role,
--    for two namespaces) may watch a resource on a server, each into a
--    table of its own (table_name =>).  A table still receives one watch
--    per server.  A name given to unwatch(), relist(), wait_synced() and
--    wait_current() means the caller's own watches first (the role's or a
--    role it is a member of); among several, the one whose table has that
--    name, else 42P08 naming the tables (_find_watch).  kwatch.watches
--    gains `owner`, so each role can tell its watches from others'.
ALTER TABLE @extschema@.registrations
  DROP CONSTRAINT registrations_server_api_group_plural_key,
  ADD CONSTRAINT registrations_server_api_group_plural_table_name_key
    UNIQUE (server, api_group, plural, table_name);

-- _acts_for(caller, owner) -> boolean: whether role `caller` may act for
-- the watches of role `owner`: a superuser, or a role with the privileges
-- of `owner` (USAGE); false when `owner` no longer exists.  The one test
-- watch() and _find_watch() use to tell the caller's own watches from
-- another role's.
CREATE FUNCTION @extschema@._acts_for(caller oid, owner oid) RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT COALESCE((SELECT a.rolsuper FROM pg_roles a WHERE a.oid = caller), false)
         OR (EXISTS (SELECT 1 FROM pg_roles a WHERE a.oid = owner)
             AND pg_has_role(caller, owner, 'USAGE'))
$$;
REVOKE ALL ON FUNCTION @extschema@._acts_for(oid, oid) FROM PUBLIC;

-- _watch_impl(...): as in 0.5.0 (see watch()), but the watch a call names
-- is the one into table_name when given, else the caller's own of the
-- resource on the server, else another role's (42710, whose HINT --
-- table_name => for a table of your own -- now works); a table_name that
-- no watch of the resource uses makes a new watch into it, whatever other
-- tables mirror the resource.  ERRORs as in 0.5.0, less "already mirrored
-- into table".
CREATE OR REPLACE FUNCTION @extschema@._watch_impl(resource text,
                      server text DEFAULT NULL,
                      namespace text DEFAULT NULL,
                      label_selector text DEFAULT NULL,
                      field_selector text DEFAULT NULL,
                      notify boolean DEFAULT true,
                      table_name text DEFAULT NULL,
                      secret_data boolean DEFAULT false,
                      notify_payload text DEFAULT NULL,
                      retry_relist_after @extschema@.interval_range DEFAULT NULL,
                      retry_watch_after @extschema@.interval_range DEFAULT NULL,
                      history boolean DEFAULT false,
                      history_retention interval DEFAULT NULL,
                      history_max_rows bigint DEFAULT NULL,
                      apply_timeout interval DEFAULT NULL)
RETURNS regclass
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  srv text := COALESCE(server, @extschema@._default_server());
  d record;
  existing @extschema@.registrations;
  tbl text;
  canonical text;
  rel regclass;
  owner oid;
  skipped text[];
  caller_super boolean;
BEGIN
  IF NOT COALESCE(history, false) AND (history_retention IS NOT NULL OR history_max_rows IS NOT NULL) THEN
    RAISE EXCEPTION 'history_retention and history_max_rows need history => true'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  label_selector := NULLIF(btrim(label_selector), '');
  field_selector := NULLIF(btrim(field_selector), '');
  namespace := NULLIF(btrim(namespace), '');

  IF namespace IS NOT NULL AND namespace !~ '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$' THEN
    RAISE EXCEPTION 'invalid namespace name "%"', @extschema@._excerpt(namespace)
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'Namespace names are DNS labels: lower-case letters, digits and "-".';
  END IF;

  -- the server stays until this transaction ends: a concurrent DROP
  -- SERVER waits, and then sees this watch (issue 33)
  PERFORM @extschema@._lock_server(srv);
  d := @extschema@._discover(srv, resource);
  caller_super := COALESCE((SELECT a.rolsuper FROM pg_roles a WHERE a.oid = d.caller), false);
  IF NOT (d.verbs @> ARRAY['list', 'watch']) THEN
    RAISE EXCEPTION 'resource "%" cannot be watched', resource
      USING ERRCODE = 'feature_not_supported',
            DETAIL = format('The API server allows only these verbs on %s: %s.',
                            d.plural, array_to_string(d.verbs, ', ')),
            HINT = 'kwatch needs the list and watch verbs.';
  END IF;
  IF namespace IS NOT NULL AND NOT d.namespaced THEN
    RAISE EXCEPTION 'resource "%" is cluster-scoped', d.plural
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'Leave out namespace => for cluster-scoped resources.';
  END IF;
  canonical := CASE d.api_group WHEN '' THEN d.plural ELSE d.plural || '.' || d.api_group END;
  notify_payload := COALESCE(notify_payload,
                             CASE WHEN d.api_group = '' AND d.plural = 'secrets' THEN 'minimal'
                                  ELSE 'full' END);
  IF notify_payload NOT IN ('full', 'minimal') THEN
    RAISE EXCEPTION 'invalid notify_payload "%"', @extschema@._excerpt(notify_payload)
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'Use ''full'' (identity of each change) or ''minimal'' (seq and type only).';
  END IF;

  PERFORM @extschema@._check_retry_range('retry_relist_after', retry_relist_after);
  PERFORM @extschema@._check_retry_range('retry_watch_after', retry_watch_after);
  IF _watch_impl.apply_timeout < interval '0' THEN
    RAISE EXCEPTION 'invalid apply_timeout "%"', _watch_impl.apply_timeout
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'A length of time, 0 for no limit, or NULL for kwatch.apply_timeout.';
  END IF;

  -- The watch this call names: the one into table_name when given (none
  -- there: a new watch, whatever other tables mirror the resource), else
  -- the caller's own watch of the resource on the server (its role or one
  -- it is a member of), else another role's.
  SELECT r.* INTO existing FROM @extschema@.registrations r
  WHERE r.server = srv AND r.api_group = d.api_group AND r.plural = d.plural
    AND (_watch_impl.table_name IS NULL OR r.table_name = _watch_impl.table_name)
  ORDER BY @extschema@._acts_for(d.caller, r.owner) DESC, r.id
  LIMIT 1;
  IF FOUND THEN
    -- Another role's watch: one without that role's privileges learns who
    -- holds it and nothing else; the answer is the same whatever settings
    -- it passed, so it cannot probe the other watch's selectors.  It may
    -- watch the resource into a table of its own (issue 30, item 5).
    IF NOT @extschema@._acts_for(d.caller, existing.owner) THEN
      RAISE EXCEPTION '% is already watched on server "%" by role %', canonical, srv,
                      existing.owner::regrole
        USING ERRCODE = 'duplicate_object',
              DETAIL = format('Its watch writes table k8s.%I; nothing was registered for you.',
                              existing.table_name),
              HINT = 'Pass table_name => for a table of your own, or ask that role to share its table (GRANT SELECT).';
    END IF;
    IF existing.namespace IS NOT DISTINCT FROM namespace
       AND existing.label_selector IS NOT DISTINCT FROM label_selector
       AND existing.field_selector IS NOT DISTINCT FROM field_selector
       AND existing.notify = _watch_impl.notify
       AND existing.secret_data = COALESCE(_watch_impl.secret_data, false)
       AND existing.notify_payload = _watch_impl.notify_payload
       AND existing.retry_relist_after IS NOT DISTINCT FROM _watch_impl.retry_relist_after
       AND existing.retry_watch_after IS NOT DISTINCT FROM _watch_impl.retry_watch_after
       AND existing.apply_timeout IS NOT DISTINCT FROM _watch_impl.apply_timeout
       AND (_watch_impl.table_name IS NULL OR existing.table_name = _watch_impl.table_name) THEN
      rel := format('k8s.%I', existing.table_name)::regclass;
      IF existing.owner <> d.caller THEN
        RAISE NOTICE '% on server "%" is already watched by role %, into %: nothing was registered',
                     canonical, srv, existing.owner::regrole, rel;
      END IF;
      -- watching again picks up a CRD's changed printer columns, on a
      -- table the caller may alter (its owner's role or a member)
      IF d.api_group <> '' AND pg_has_role(d.caller, (SELECT c.relowner FROM pg_class c
                                                      WHERE c.oid = rel), 'USAGE') THEN
        PERFORM @extschema@._refresh_printer_columns(srv, d.api_group, d.plural, d.api_version,
                                                     existing.table_name);
        PERFORM @extschema@._restore_columns_as_owner(rel, d.api_group, d.plural);
      END IF;
      -- its view kubectl.<t> (issue 35), made anew where a CRD's columns
      -- changed, on a table the caller may alter
      IF pg_has_role(d.caller, (SELECT c.relowner FROM pg_class c WHERE c.oid = rel), 'USAGE') THEN
        PERFORM @extschema@._make_printed_view(rel);
      END IF;
      IF _watch_impl.history THEN
        PERFORM @extschema@._history_impl(rel, true, history_retention, history_max_rows);
      END IF;
      RETURN rel;
    END IF;
    RAISE EXCEPTION '% is already watched on server "%" into k8s.% with other settings', canonical, srv,
                    existing.table_name
      USING ERRCODE = 'duplicate_object',
            HINT = format('Call @extschema@.unwatch(%L, server => %L) first, or pass table_name => for a second table.',
                          existing.table_name, srv);
  END IF;

  -- The server validates selectors, namespace and permissions for us.
  PERFORM @extschema@._probe(srv, d.api_group, d.api_version, d.plural, namespace,
                        label_selector, field_selector);

  -- Table: the one this resource already has (watched on another server;
  -- one the caller may join first), else the plural, else the plural
  -- qualified by the group on a collision.  table_name => names any table
  -- of this resource, or a new one: several tables may mirror one resource
  -- (a role's own, issue 30 item 5).  A name is this resource's only when
  -- kwatch made the table of that name for it (kwatch.tables), whatever
  -- the table's comment says.
  SELECT r.table_name INTO tbl FROM @extschema@.registrations r
  WHERE r.api_group = d.api_group AND r.plural = d.plural
  ORDER BY @extschema@._acts_for(d.caller, r.owner) DESC, r.id
  LIMIT 1;
  IF _watch_impl.table_name IS NOT NULL THEN
    IF EXISTS (SELECT 1 FROM @extschema@.registrations r
               WHERE r.table_name = _watch_impl.table_name
                 AND (r.api_group, r.plural) <> (d.api_group, d.plural))
       OR (to_regclass(format('k8s.%I', _watch_impl.table_name)) IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM @extschema@._mirror_table(
                                           to_regclass(format('k8s.%I', _watch_impl.table_name))) t
                           WHERE (t.api_group, t.plural) = (d.api_group, d.plural))) THEN
      RAISE EXCEPTION 'table k8s.% is not a mirror of %', @extschema@._excerpt(_watch_impl.table_name), canonical
        USING ERRCODE = 'duplicate_table',
              DETAIL = 'kwatch did not make that table for this resource.',
              HINT = 'Choose another table_name; one table mirrors one resource.';
    END IF;
    tbl := _watch_impl.table_name;
  ELSIF tbl IS NULL THEN
    tbl := d.plural;
    IF EXISTS (SELECT 1 FROM @extschema@.registrations r
               WHERE r.table_name = tbl AND (r.api_group, r.plural) <> (d.api_group, d.plural))
       OR (to_regclass(format('k8s.%I', tbl)) IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM @extschema@._mirror_table(to_regclass(format('k8s.%I', tbl))) t
                           WHERE (t.api_group, t.plural) = (d.api_group, d.plural))) THEN
      tbl := d.plural || '_' || replace(replace(d.api_group, '.', '_'), '-', '_');
      IF d.api_group = '' THEN
        tbl := d.plural || '_core';
      END IF;
    END IF;
  END IF;
  -- in bytes: the channel 'kwatch_' || tbl must fit in an identifier
  -- (NAMEDATALEN - 1 = 63 bytes), and a longer table name would be cut
  IF octet_length(tbl) > 56 THEN
    RAISE EXCEPTION 'table name "%" is too long', @extschema@._excerpt(tbl)
      USING ERRCODE = 'name_too_long', HINT = 'Pass a shorter table_name => ''...''.';
  END IF;

  -- A new mirror table belongs to the registering role: the worker writes
  -- it as its owner (src/apply/sync.c), so a trigger on it runs with the owner's
  -- rights, never a superuser's.  An existing table is joined only when
  -- kwatch made it for this resource and the caller owns it (or has its
  -- owner's privileges); a superuser's watch never joins a table a
  -- non-superuser owns, whose triggers would see everything the superuser's
  -- credentials can list.
  IF to_regclass(format('k8s.%I', tbl)) IS NULL THEN
    -- a table other roles' watches still name (its owner dropped it): made
    -- anew by this caller, it would receive their rows as its owner
    IF EXISTS (SELECT 1 FROM @extschema@.registrations r
               WHERE r.table_name = tbl
                 AND NOT @extschema@._acts_for(d.caller, r.owner)) THEN
      RAISE EXCEPTION 'table k8s.% is gone, and watches of another role still name it', tbl
        USING ERRCODE = 'insufficient_privilege',
              DETAIL = 'A table made now would be yours, and the worker would write their rows into it.',
              HINT = 'Pass table_name => for a table of your own.';
    END IF;
    rel := @extschema@.create_mirror_table(tbl, d.api_group, d.api_version, d.plural);
    EXECUTE format('ALTER TABLE %s OWNER TO %s', rel, d.caller::regrole);
    EXECUTE format('GRANT USAGE ON SCHEMA k8s TO %s', d.caller::regrole);
    UPDATE @extschema@.tables t SET made_by = d.caller::regrole WHERE t.relid = rel;
  ELSE
    rel := format('k8s.%I', tbl)::regclass;
    owner := (SELECT c.relowner FROM pg_class c WHERE c.oid = rel);
    IF NOT EXISTS (SELECT 1 FROM @extschema@._mirror_table(rel) t
                   WHERE (t.api_group, t.plural) = (d.api_group, d.plural)) THEN
      RAISE EXCEPTION 'table % is not a mirror of %', rel, canonical
        USING ERRCODE = 'duplicate_table',
              DETAIL = 'kwatch did not make that table for this resource.',
              HINT = 'Pass table_name => for a table of your own.';
    END IF;
    IF NOT pg_has_role(d.caller, owner, 'USAGE') THEN
      RAISE EXCEPTION 'permission denied for table %', rel
        USING ERRCODE = 'insufficient_privilege',
              DETAIL = format('%s mirrors %s for role %s; the worker would write your rows as its owner.',
                              rel, canonical, owner::regrole),
              HINT = 'Pass table_name => for a table of your own.';
    END IF;
    IF caller_super AND NOT (SELECT a.rolsuper FROM pg_roles a WHERE a.oid = owner) THEN
      RAISE EXCEPTION 'a superuser''s watch does not write table %, which role % owns', rel, owner::regrole
        USING ERRCODE = 'insufficient_privilege',
              DETAIL = 'Its owner''s triggers and rules would see every object your credentials can list.',
              HINT = 'Pass table_name => for a table of your own, or take the table over first (ALTER TABLE ... OWNER TO).';
    END IF;
    RAISE NOTICE 'the watch of % on server "%" joins table %, owned by role %', canonical, srv,
                 rel, owner::regrole;
    -- as the table's owner: its rows feed the ALTER TABLE's expressions
    PERFORM @extschema@._restore_columns_as_owner(rel, d.api_group, d.plural);
  END IF;

  -- A custom resource's printer columns (the columns `kubectl get` shows)
  -- become typed columns of the table (typed_columns()), when the caller
  -- may alter it: its owner's role or a member.
  IF d.api_group <> '' AND pg_has_role(d.caller, (SELECT c.relowner FROM pg_class c
                                                  WHERE c.oid = rel), 'USAGE') THEN
    skipped := @extschema@._refresh_printer_columns(srv, d.api_group, d.plural, d.api_version, tbl);
    PERFORM @extschema@._restore_columns_as_owner(rel, d.api_group, d.plural);
    IF cardinality(skipped) > 0 THEN
      RAISE NOTICE 'printer columns of % left out of k8s.%: %', canonical, tbl,
                   array_to_string(skipped, '; ');
    END IF;
  END IF;

  INSERT INTO @extschema@.registrations
    (server, resource, api_group, api_version, plural, kind, namespaced,
     namespace, label_selector, field_selector, table_name, channel, notify, owner,
     secret_data, notify_payload, retry_relist_after, retry_watch_after, apply_timeout)
  VALUES (srv, canonical, d.api_group, d.api_version, d.plural, d.kind, d.namespaced,
          namespace, label_selector, field_selector, tbl, 'kwatch_' || tbl,
          _watch_impl.notify, d.caller, COALESCE(_watch_impl.secret_data, false), _watch_impl.notify_payload,
          _watch_impl.retry_relist_after, _watch_impl.retry_watch_after, _watch_impl.apply_timeout);

  -- what kubectl get -o wide shows, as view kubectl.<t> (issue 35)
  PERFORM @extschema@._make_printed_view(rel);
  IF _watch_impl.history THEN
    PERFORM @extschema@._history_impl(rel, true, history_retention, history_max_rows);
  END IF;
  PERFORM @extschema@._wake_at_commit();
  RETURN rel;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._watch_impl(text, text, text, text, text, boolean, text, boolean,
                                               text, @extschema@.interval_range,
                                               @extschema@.interval_range, boolean, interval, bigint,
                                               interval)
  FROM PUBLIC;

-- _find_watch(name, server, caller) -> registrations: the watch `name`
-- means on `server` for role `caller` (unwatch(), relist()).  Matches, in
-- this order: the resource as kwatch.watches shows it that is also the
-- table's name, the resource, the table name, then its plural, kind or
-- plural.group.  The caller's own watches (its role or one it has USAGE
-- of; every watch for a superuser) come before others'.  NULL (all
-- fields) when nothing matches.  ERRORs: 42P08 several watches match
-- equally well (DETAIL: their tables; HINT: name the table).
CREATE FUNCTION @extschema@._find_watch(name text, server text, caller oid)
RETURNS @extschema@.registrations
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  found_ids integer[];
  tables text[];
  r @extschema@.registrations;
BEGIN
  WITH m AS (
    SELECT x.id, x.table_name,
           @extschema@._acts_for(caller, x.owner) AS own,
           CASE WHEN x.resource = name AND x.table_name = name THEN 0
                WHEN x.resource = name THEN 1
                WHEN x.table_name = name THEN 2
                ELSE 3 END AS rank
    FROM @extschema@.registrations x
    WHERE x.server = _find_watch.server
      AND (x.resource = name OR x.plural = name OR lower(x.kind) = lower(name)
           OR x.table_name = name OR x.plural || '.' || x.api_group = name)),
  best AS (
    SELECT * FROM m ORDER BY own DESC, rank LIMIT 1)
  SELECT array_agg(m.id ORDER BY m.id), array_agg(format('k8s.%I', m.table_name) ORDER BY m.id)
  INTO found_ids, tables
  FROM m JOIN best b ON (m.own, m.rank) = (b.own, b.rank);
  IF found_ids IS NULL THEN
    RETURN r;
  END IF;
  IF cardinality(found_ids) > 1 THEN
    RAISE EXCEPTION '"%" matches several watches on server "%"', name, server
      USING ERRCODE = 'ambiguous_parameter',
            DETAIL = format('They write tables %s.', array_to_string(tables, ', ')),
            HINT = 'Name the watch by its table (without k8s.), as kwatch.watches.table_name shows it.';
  END IF;
  SELECT * INTO r FROM @extschema@.registrations x WHERE x.id = found_ids[1];
  RETURN r;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._find_watch(text, text, oid) FROM PUBLIC;

-- _unwatch_impl(resource, server, drop_table): as in 0.2.0 (see
-- unwatch()), the watch found by _find_watch() for the caller; its rows
-- are deleted also before drop_table drops the table (issue 33: a fleet
-- subscriber receives the deletes).
-- Returns false when there is none; ERRORs: 42P08 (_find_watch), 42501
-- another role's watch, or drop_table of a table the caller does not own.
CREATE OR REPLACE FUNCTION @extschema@._unwatch_impl(resource text,
                        server text DEFAULT NULL,
                        drop_table boolean DEFAULT false)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  srv text := COALESCE(server, @extschema@._default_server());
  r @extschema@.registrations;
  rel regclass;
  drop_it boolean;
BEGIN
  r := @extschema@._find_watch(resource, srv, @extschema@._caller());
  IF r.id IS NULL THEN
    RETURN false;
  END IF;
  PERFORM @extschema@._check_watch_owner(r.owner, srv, r.resource);
  -- the watch's batches in progress end first; later ones wait (issue 36)
  PERFORM @extschema@._lock_registration(r.id);
  DELETE FROM @extschema@.registrations x WHERE x.id = r.id
  RETURNING * INTO r;
  IF NOT FOUND THEN
    RETURN false;   -- a concurrent unwatch removed it first
  END IF;
  PERFORM @extschema@._drop_relist_stage(r.id);
  rel := to_regclass(format('k8s.%I', r.table_name));
  IF rel IS NOT NULL THEN
    drop_it := drop_table AND NOT EXISTS (SELECT 1 FROM @extschema@.registrations x
                                          WHERE x.table_name = r.table_name);
    -- only its owner's (or a member's) table: another role may have
    -- watched into it with INSERT, UPDATE and DELETE granted; checked
    -- before anything is deleted
    IF drop_it AND NOT pg_has_role(@extschema@._caller(),
                                   (SELECT c.relowner FROM pg_class c WHERE c.oid = rel), 'USAGE') THEN
      RAISE EXCEPTION 'must be owner of table k8s.% to drop it', r.table_name
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'Leave out drop_table => true: the watch and its rows can go without the table.';
    END IF;
    -- the rows go first, as deletes, also when the table is dropped next
    -- (issue 33): a logical-replication subscriber (the fleet recipe)
    -- receives the deletes, whereas a DROP TABLE is not replicated and
    -- would leave it this cluster's rows for ever.  As the table's owner:
    -- its DELETE triggers never run as the definer.
    PERFORM @extschema@._delete_cluster_rows(rel, srv);
    IF drop_it THEN
      PERFORM @extschema@._drop_printed_view(rel);   -- issue 35
      EXECUTE format('DROP TABLE %s', rel);
    END IF;
  END IF;
  PERFORM @extschema@._wake_at_commit();
  RETURN true;
END
$$;

-- _relist_impl(resource, server, wait, timeout): as in 0.2.0 (see
-- relist()), the watch found by _find_watch() for the caller.  ERRORs:
-- 42704 no such watch, 42P08 (_find_watch), 42501 another role's watch,
-- and wait_synced()'s when waiting.
CREATE OR REPLACE FUNCTION @extschema@._relist_impl(resource text, server text DEFAULT NULL,
                                   wait boolean DEFAULT false, timeout interval DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  srv text := COALESCE(server, @extschema@._default_server());
  r @extschema@.registrations;
  request bigint;
BEGIN
  r := @extschema@._find_watch(resource, srv, @extschema@._caller());
  IF r.id IS NULL THEN
    RAISE EXCEPTION 'no watch of % on server "%"', resource, srv
      USING ERRCODE = 'undefined_object';
  END IF;
  PERFORM @extschema@._check_watch_owner(r.owner, srv, r.resource);
  request := @extschema@._request_relist(r.id);
  IF wait THEN
    PERFORM @extschema@._wait_synced(ARRAY[r.id], ARRAY[request], timeout);
  END IF;
  RETURN true;
END
$$;


-- kwatch.watches gains `owner` (last column): the role whose watch it is.
CREATE OR REPLACE VIEW @extschema@.watches WITH (security_barrier) AS
SELECT r.id,
       r.server,
       r.resource,
       r.namespace,
       r.label_selector,
       r.field_selector,
       format('k8s.%I', r.table_name) AS table_name,
       r.channel,
       r.notify,
       COALESCE(s.state, CASE WHEN @extschema@.worker_pid() IS NULL THEN 'no worker'
                              ELSE 'pending' END) AS state,
       COALESCE(s.healthy, false) AS healthy,
       COALESCE(s.resource_version, r.resource_version) AS resource_version,
       s.objects,
       COALESCE(s.last_sync_at, r.synced_at) AS last_sync_at,
       s.state_since,
       s.last_error,
       s.last_error_at,
       s.list_calls, s.watch_calls, s.relists,
       s.added, s.modified, s.deleted, s.bookmarks, s.notifications,
       s.skipped_objects, s.sanitized_objects,
       s.http_errors, s.decode_errors, s.database_errors,
       r.secret_data, r.notify_payload,
       COALESCE(s.synced, false) AS synced, s.syncs, s.relist_requests,
       r.retry_relist_after, r.retry_watch_after,
       r.owner::regrole AS owner
FROM @extschema@.registrations r
LEFT JOIN @extschema@.watch_status() s ON s.watch_id = r.id
WHERE CASE WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_roles a WHERE a.oid = r.owner)
           THEN pg_catalog.pg_has_role(r.owner, 'USAGE') ELSE false END
   OR EXISTS (SELECT 1 FROM pg_catalog.pg_foreign_server fs
              WHERE fs.srvname = r.server
                AND pg_catalog.has_server_privilege(fs.oid, 'USAGE'))
   OR (SELECT a.rolsuper FROM pg_catalog.pg_roles a WHERE a.rolname = current_user)
ORDER BY r.id;

-- _watch_ids(resource, server) -> integer[]: the watches `resource` means
-- for wait_synced() and wait_current(), among those kwatch.watches shows
-- the caller on `server`.  NULL `resource`: the caller's own watches (its
-- role's, or a role's it is a member of -- a superuser's too, without the
-- superuser's bypass) when it has any, else all.  Else the watches whose
-- resource (as shown, or its plural) or table name is `resource`, ranked
-- as _find_watch() ranks them: own first, then the resource that is also
-- the table's name, the resource, the table name, the plural; the best of
-- one role (all of them: one role may watch a resource into several
-- tables).  NULL when none.  ERRORs: 42P08 the best matches are several
-- roles' (DETAIL: their tables; name one by its table) -- another role's
-- watch never joins what the caller waits for unnoticed.
CREATE FUNCTION @extschema@._watch_ids(resource text, server text) RETURNS integer[]
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  ids integer[];
  owners integer;
  tables text[];
BEGIN
  WITH RECURSIVE mine(role) AS (
    SELECT a.oid FROM pg_roles a WHERE a.rolname = current_user
    UNION
    SELECT m.roleid FROM pg_auth_members m JOIN mine ON m.member = mine.role),
  m AS (
    SELECT w.id, w.owner::oid AS owner, w.table_name,
           w.owner::oid IN (SELECT role FROM mine) AS own,
           CASE WHEN _watch_ids.resource IS NULL THEN 0
                WHEN w.resource = _watch_ids.resource
                     AND w.table_name = format('k8s.%I', _watch_ids.resource) THEN 0
                WHEN w.resource = _watch_ids.resource THEN 1
                WHEN w.table_name = format('k8s.%I', _watch_ids.resource) THEN 2
                ELSE 3 END AS rank
    FROM @extschema@.watches w
    WHERE w.server = _watch_ids.server
      AND (_watch_ids.resource IS NULL
           OR w.resource = _watch_ids.resource
           OR w.table_name = format('k8s.%I', _watch_ids.resource)
           OR split_part(w.resource, '.', 1) = _watch_ids.resource)),
  best AS (SELECT * FROM m ORDER BY own DESC, rank LIMIT 1)
  SELECT array_agg(m.id ORDER BY m.id), count(DISTINCT m.owner), array_agg(m.table_name ORDER BY m.id)
  INTO ids, owners, tables
  FROM m JOIN best b ON (m.own, m.rank) = (b.own, b.rank);
  IF resource IS NOT NULL AND owners > 1 THEN
    RAISE EXCEPTION '"%" matches watches of several roles on server "%"', resource, server
      USING ERRCODE = 'ambiguous_parameter',
            DETAIL = format('They write tables %s.', array_to_string(tables, ', ')),
            HINT = 'Name the watch by its table (without k8s.), as kwatch.watches.table_name shows it.';
  END IF;
  RETURN ids;
END
$$;

-- wait_synced(resource, server, timeout): as in 0.2.0, for the watches
-- _watch_ids() finds (the caller's own first).  ERRORs as in 0.2.0, and 42P08 (_watch_ids).
CREATE OR REPLACE FUNCTION @extschema@.wait_synced(resource text DEFAULT NULL, server text DEFAULT NULL,
                                                   timeout interval DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  srv text := COALESCE(server, @extschema@._default_server());
  ids integer[] := @extschema@._watch_ids(resource, srv);
BEGIN
  IF ids IS NULL THEN
    RAISE EXCEPTION 'no watch of % on server "%"', COALESCE(resource, 'any resource'), srv
      USING ERRCODE = 'undefined_object',
            HINT = 'kwatch.watches lists the watches you may see.';
  END IF;
  PERFORM @extschema@._wait_synced(ids, array_fill(0::bigint, ARRAY[cardinality(ids)]), timeout);
END
$$;

-- wait_current(resource, server, timeout) -> text: as in 0.6.0, for the
-- watches _watch_ids() finds (the caller's own first).  ERRORs as in 0.6.0, and 42P08 (_watch_ids).
CREATE OR REPLACE FUNCTION @extschema@.wait_current(resource text, server text DEFAULT NULL,
                                                    timeout interval DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  srv text := COALESCE(server, @extschema@._default_server());
  ids integer[];
BEGIN
  IF wait_current.resource IS NULL THEN
    RAISE EXCEPTION 'resource must not be null'
      USING ERRCODE = 'null_value_not_allowed',
            HINT = 'Name the watched resource, as kwatch.watches shows it.';
  END IF;
  ids := @extschema@._watch_ids(resource, srv);
  IF ids IS NULL THEN
    RAISE EXCEPTION 'no watch of % on server "%"', resource, srv
      USING ERRCODE = 'undefined_object',
            HINT = 'kwatch.watches lists the watches you may see.';
  END IF;
  RETURN @extschema@._wait_current(ids, timeout);
END
$$;

-- =====================================================================
-- Issue 35 (printer part): kubectl's printed columns as SQL functions of
-- the stored object.
--
-- Every function below takes `object jsonb`, the full object as the API
-- server returns it in JSON (what a mirror table's `object` column holds),
-- and returns one cell of the Table the API server serves for
-- `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`.  The rules are
-- ported from the Kubernetes printers, pkg/printers/internalversion/
-- printers.go, of the current release line (kubernetes/kubernetes master,
-- the 1.34-era file: Job STATUS, CronJob TIMEZONE, PV/PVC
-- VOLUMEATTRIBUTESCLASS columns, sidecar init containers, SchedulingGated;
-- read from the reference index, file version 59882936, whose printers_test.go
-- companion is file version 100530230).  Each function names the printers.go
-- function it follows.  test/printers/README.md lists the cells where the
-- 1.20 printers print differently.
--
-- The API server prints with GenerateOptions{Wide: true} (pkg/printers/
-- storage/storage.go, ConvertToTable), so the cells here are the wide ones:
-- a LoadBalancer's EXTERNAL-IP and an Ingress's ADDRESS are not clipped to
-- 16 characters (the functions that clip take `wide => false`).
--
-- Every function pins search_path (pg_catalog, pg_temp): its body is
-- parsed when it runs, as whoever reads a kubectl.<t> view or maintains
-- an index on it, and an operator or function of that reader's path (a
-- writable public schema) must not be what runs (issue 35's review).
--
-- IMMUTABLE PARALLEL SAFE: every function reads only its arguments.  Cells
-- that depend on the current time (AGE, a Job's DURATION while it runs,
-- RESTARTS' "(3m ago)", an Event's LAST SEEN, a CronJob's LAST SCHEDULE)
-- are given as the timestamp they are computed from, plus a function of
-- (object, at timestamptz) that formats them for a given instant: a view
-- passes now(), so nothing here calls now().
--
-- Timestamps: the API server writes RFC 3339 with an explicit zone ("Z"),
-- whose reading depends on neither TimeZone nor DateStyle; a zero
-- metav1.Time is written as null and is NULL here (kubectl: "<unknown>").
-- =====================================================================

-- ---------------------------------------------------------------------
-- Shared helpers
-- ---------------------------------------------------------------------

-- _printer_time(text) -> timestamptz: an RFC 3339 timestamp written by the
-- API server ("2024-05-01T10:00:00Z", "...T10:00:00.123456Z") as
-- timestamptz; NULL (a zero metav1.Time) stays NULL, and so does text
-- that is no RFC 3339 time ("yesterday", a month 13: what the API server
-- would refuse), never an error.  The library's k8s_timestamp does the
-- same in C; this one needs no library.  The pattern keeps the exception
-- block (a subtransaction) for the rare text that looks right and is not.
CREATE FUNCTION @extschema@._printer_time(ts text) RETURNS timestamptz
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF ts !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$' THEN
    RETURN NULL;
  END IF;
  BEGIN
    RETURN ts::timestamptz;
  EXCEPTION WHEN data_exception THEN   -- a zone past +-15:59, a month 13...
    RETURN NULL;
  END;
END
$$;
COMMENT ON FUNCTION @extschema@._printer_time(text) IS
'RFC 3339 timestamp as written by the API server -> timestamptz; NULL for NULL or for text that is no such time, never an error. Helper of the issue 35 printer functions.';

-- human_duration(d interval) -> text: the duration as kubectl prints ages
-- ("30s", "5m", "3m10s", "100m", "7h59m", "2d1h", "90d", "2y1d", "10y";
-- "0s" for up to 2 s in the future, "<invalid>" beyond).  Port of
-- k8s.io/apimachinery/pkg/util/duration.HumanDuration (same text in 1.20
-- and today).  Give it the difference of two timestamps: an interval with
-- a months field counts 30 days a month.
CREATE FUNCTION @extschema@.human_duration(d interval) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  secs numeric := extract(epoch FROM d);   -- microsecond precision
  seconds bigint := trunc(secs);           -- Go int(d.Seconds()) truncates
  minutes bigint;
  hours bigint;
BEGIN
  IF seconds < -1 THEN
    RETURN '<invalid>';
  ELSIF seconds < 0 THEN
    RETURN '0s';
  ELSIF seconds < 60 * 2 THEN
    RETURN seconds || 's';
  END IF;
  minutes := trunc(secs / 60);
  IF minutes < 10 THEN
    IF seconds % 60 = 0 THEN
      RETURN minutes || 'm';
    END IF;
    RETURN minutes || 'm' || (seconds % 60) || 's';
  ELSIF minutes < 60 * 3 THEN
    RETURN minutes || 'm';
  END IF;
  hours := trunc(secs / 3600);
  IF hours < 8 THEN
    IF minutes % 60 = 0 THEN
      RETURN hours || 'h';
    END IF;
    RETURN hours || 'h' || (minutes % 60) || 'm';
  ELSIF hours < 48 THEN
    RETURN hours || 'h';
  ELSIF hours < 24 * 8 THEN
    IF hours % 24 = 0 THEN
      RETURN (hours / 24) || 'd';
    END IF;
    RETURN (hours / 24) || 'd' || (hours % 24) || 'h';
  ELSIF hours < 24 * 365 * 2 THEN
    RETURN (hours / 24) || 'd';
  ELSIF hours < 24 * 365 * 8 THEN
    IF (hours / 24) % 365 = 0 THEN
      RETURN (hours / 24 / 365) || 'y';
    END IF;
    RETURN (hours / 24 / 365) || 'y' || ((hours / 24) % 365) || 'd';
  END IF;
  RETURN (hours / 24 / 365) || 'y';
END
$$;
COMMENT ON FUNCTION @extschema@.human_duration(interval) IS
'Duration as kubectl prints it ("3m10s", "2d1h", "10y"). Port of apimachinery util/duration.HumanDuration.';

-- translate_timestamp_since(ts timestamptz, at timestamptz) -> text: the
-- AGE cell of an object created at `ts`, printed at instant `at`
-- ("<unknown>" when ts is NULL).  printers.go translateTimestampSince,
-- with time.Now() made the argument `at`: a view passes now().
CREATE FUNCTION @extschema@.translate_timestamp_since(ts timestamptz, at timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT CASE WHEN ts IS NULL THEN '<unknown>' ELSE @extschema@.human_duration(at - ts) END $$;
COMMENT ON FUNCTION @extschema@.translate_timestamp_since(timestamptz, timestamptz) IS
'AGE-style cell: human_duration(at - ts), "<unknown>" for NULL. printers.go translateTimestampSince with now() as the argument at.';

-- age(object jsonb, at timestamptz) -> text: the AGE cell of any object at
-- instant `at`, from metadata.creationTimestamp.  printers.go
-- translateTimestampSince(obj.CreationTimestamp).
CREATE FUNCTION @extschema@.age(object jsonb, at timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.translate_timestamp_since(@extschema@._printer_time(object->'metadata'->>'creationTimestamp'), at) $$;
COMMENT ON FUNCTION @extschema@.age(jsonb, timestamptz) IS
'AGE cell of any object at instant at (a view passes now()). printers.go translateTimestampSince(CreationTimestamp).';

-- _printer_format_labels(labels jsonb) -> text: a string map as
-- "k1=v1,k2=v2", keys in byte order, "<none>" when empty.
-- apimachinery labels.FormatLabels.
CREATE FUNCTION @extschema@._printer_format_labels(labels jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT COALESCE(string_agg(key || '=' || value, ',' ORDER BY key COLLATE "C"), '<none>')
  FROM jsonb_each_text(CASE WHEN jsonb_typeof(labels) = 'object' THEN labels ELSE '{}' END)
$$;
COMMENT ON FUNCTION @extschema@._printer_format_labels(jsonb) IS
'String map as "k=v,..." sorted, "<none>" when empty. apimachinery labels.FormatLabels.';

-- _printer_count(j jsonb) -> integer: the number of entries of a JSON
-- array or object (Go len() of a slice or map), 0 for null or absent.
CREATE FUNCTION @extschema@._printer_count(j jsonb) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE jsonb_typeof(j)
           WHEN 'array' THEN jsonb_array_length(j)
           WHEN 'object' THEN (SELECT count(*)::integer FROM jsonb_object_keys(j))
           ELSE 0 END
$$;
COMMENT ON FUNCTION @extschema@._printer_count(jsonb) IS
'Go len() of a JSON array or object, 0 for null/absent. Helper of the issue 35 printer functions.';

-- _printer_array(j jsonb) -> jsonb: j when it is an array, else '[]'.
CREATE FUNCTION @extschema@._printer_array(j jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT CASE WHEN jsonb_typeof(j) = 'array' THEN j ELSE '[]'::jsonb END $$;
COMMENT ON FUNCTION @extschema@._printer_array(jsonb) IS
'j when it is a JSON array, else []. Helper of the issue 35 printer functions.';

-- _printer_int(j jsonb) -> bigint: j when it is a JSON integer in int64's
-- range, else NULL (a string, a fraction, an object...): what Go's decoder
-- would refuse, so an object the API server never serves; a printer cell
-- must not fail a query (or an index on it, which the worker writes) over
-- a row written by hand.  _printer_int32: the same in int32's range.
-- _printer_bool: j when it is a JSON boolean, else NULL.
CREATE FUNCTION @extschema@._printer_int(j jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT CASE WHEN jsonb_typeof(j) = 'number' AND j::text ~ '^-?[0-9]{1,18}$'
                  THEN j::text::bigint END $$;
COMMENT ON FUNCTION @extschema@._printer_int(jsonb) IS
'j as bigint when it is a JSON integer (up to 18 digits), else NULL, never an error. Helper of the issue 35 printer functions.';
CREATE FUNCTION @extschema@._printer_int32(j jsonb) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT CASE WHEN jsonb_typeof(j) = 'number' AND j::text ~ '^-?[0-9]{1,9}$'
                  THEN j::text::integer END $$;
COMMENT ON FUNCTION @extschema@._printer_int32(jsonb) IS
'j as integer when it is a JSON integer (up to 9 digits), else NULL, never an error. Helper of the issue 35 printer functions.';
CREATE FUNCTION @extschema@._printer_bool(j jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT CASE WHEN jsonb_typeof(j) = 'boolean' THEN j::text::boolean END $$;
COMMENT ON FUNCTION @extschema@._printer_bool(jsonb) IS
'j as boolean when it is a JSON boolean, else NULL, never an error. Helper of the issue 35 printer functions.';

-- _printer_access_modes(modes jsonb) -> text: access modes as "RWO,ROX,
-- RWX,RWOP" (that order, duplicates once, unknown modes left out).
-- pkg/apis/core/helper GetAccessModesAsString (1.20 has no RWOP).
CREATE FUNCTION @extschema@._printer_access_modes(modes jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT COALESCE(string_agg(short, ',' ORDER BY ord), '')
  FROM (VALUES (1, 'ReadWriteOnce', 'RWO'), (2, 'ReadOnlyMany', 'ROX'),
               (3, 'ReadWriteMany', 'RWX'), (4, 'ReadWriteOncePod', 'RWOP')) AS m(ord, mode, short)
  WHERE @extschema@._printer_array(modes) @> jsonb_build_array(mode)
$$;
COMMENT ON FUNCTION @extschema@._printer_access_modes(jsonb) IS
'Access modes as "RWO,ROX,RWX,RWOP". pkg/apis/core/helper GetAccessModesAsString.';

-- _printer_lb_status(status jsonb, wide boolean) -> text: a
-- (Ingress)LoadBalancerStatus as its ingress points, the IP of each or its
-- hostname when it has no IP, sorted and distinct, joined with ","; when
-- not wide, clipped to 13 characters + "..." past 16.  printers.go
-- loadBalancerStatusStringer / ingressLoadBalancerStatusStringer.
CREATE FUNCTION @extschema@._printer_lb_status(status jsonb, wide boolean) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE WHEN NOT wide AND length(r) > 16 THEN substr(r, 1, 13) || '...' ELSE r END
  FROM (SELECT COALESCE(string_agg(DISTINCT point COLLATE "C", ',' ORDER BY point COLLATE "C"), '') AS r
        FROM (SELECT CASE WHEN COALESCE(i->>'ip', '') <> '' THEN i->>'ip'
                          WHEN COALESCE(i->>'hostname', '') <> '' THEN i->>'hostname' END AS point
              FROM jsonb_array_elements(@extschema@._printer_array(status->'ingress')) i) p
        WHERE point IS NOT NULL) s
$$;
COMMENT ON FUNCTION @extschema@._printer_lb_status(jsonb, boolean) IS
'LoadBalancer ingress points "ip|hostname,..." sorted; clipped to 16 when not wide. printers.go loadBalancerStatusStringer.';

-- _printer_quantity(q jsonb) -> text: a *resource.Quantity's String():
-- the serialized text (the API server writes the form the printer's
-- String() returns), "<nil>" for a nil pointer.
CREATE FUNCTION @extschema@._printer_quantity(q jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT CASE WHEN q IS NULL OR jsonb_typeof(q) = 'null' THEN '<nil>' ELSE q #>> '{}' END $$;
COMMENT ON FUNCTION @extschema@._printer_quantity(jsonb) IS
'(*resource.Quantity).String(): the serialized quantity, "<nil>" for a nil pointer.';

-- _printer_container_cells(containers jsonb, field text) -> text: the
-- CONTAINERS (field 'name') or IMAGES (field 'image') cell of a pod
-- template: that field of each of spec.containers, in order, joined with
-- "," ("" for no containers; a container without the field adds "").
-- Init containers are not listed (printers.go passes only Containers).
-- printers.go layoutContainerCells.
CREATE FUNCTION @extschema@._printer_container_cells(containers jsonb, field text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT COALESCE(string_agg(COALESCE(c->>field, ''), ',' ORDER BY o), '')
  FROM jsonb_array_elements(@extschema@._printer_array(containers)) WITH ORDINALITY AS x(c, o)
$$;
COMMENT ON FUNCTION @extschema@._printer_container_cells(jsonb, text) IS
'Containers'' names (field name) or images (field image) joined with ",". printers.go layoutContainerCells.';

-- _printer_label_key_valid(key text) -> boolean: whether key is a valid
-- label key: an optional prefix, a DNS-1123 subdomain of at most 253
-- bytes, and "/", then a name of 1 to 63 bytes of [A-Za-z0-9._-] that
-- starts and ends alphanumeric (NULL, Go's "", is not valid).
-- apimachinery util/validation IsQualifiedName (1.20; IsLabelKey today,
-- the same rule), which labels.NewRequirement checks.
CREATE FUNCTION @extschema@._printer_label_key_valid(key text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT COALESCE(CASE cardinality(p)
           WHEN 1 THEN true
           WHEN 2 THEN octet_length(p[1]) BETWEEN 1 AND 253
                       AND p[1] ~ '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'
           ELSE false END
         AND octet_length(p[cardinality(p)]) BETWEEN 1 AND 63
         AND p[cardinality(p)] ~ '^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$', false)
  FROM (SELECT string_to_array(key, '/') AS p) s
$$;
COMMENT ON FUNCTION @extschema@._printer_label_key_valid(text) IS
'Whether key is a valid label key ([prefix/]name). apimachinery validation.IsQualifiedName, as labels.NewRequirement checks it.';

-- _printer_label_value_valid(value text) -> boolean: whether value is a
-- valid label value: at most 63 bytes, empty or [A-Za-z0-9._-] starting
-- and ending alphanumeric.  apimachinery util/validation
-- IsValidLabelValue, which labels.NewRequirement checks.
CREATE FUNCTION @extschema@._printer_label_value_valid(value text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT COALESCE(octet_length(value) <= 63
                  AND value ~ '^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$', false)
$$;
COMMENT ON FUNCTION @extschema@._printer_label_value_valid(text) IS
'Whether value is a valid label value. apimachinery validation.IsValidLabelValue, as labels.NewRequirement checks it.';

-- _printer_label_selector(selector jsonb) -> text: a metav1.LabelSelector
-- as labels.Selector's String() prints it after LabelSelectorAsSelector:
-- one requirement per matchLabels entry ("k=v") and per matchExpressions
-- entry (In "k in (a,b)", NotIn "k notin (a,b)", Exists "k",
-- DoesNotExist "!k"; several values sorted in byte order, duplicates
-- kept, a single value as written), sorted by key in byte order and
-- joined with ",".  Requirements with the same key keep their order,
-- matchLabels' first, as Go's sort.Sort leaves them for up to 12
-- requirements.  "" for a nil (absent or null) selector (labels.Nothing())
-- and for one with neither matchLabels nor matchExpressions
-- (labels.Everything()).  NULL where LabelSelectorAsSelector returns an
-- error: an operator other than In/NotIn/Exists/DoesNotExist, In/NotIn
-- without values, Exists/DoesNotExist with values, an invalid key or
-- value (labels.NewRequirement).  apimachinery meta/v1
-- LabelSelectorAsSelector, labels Requirement.String and
-- internalSelector.String (same in 1.20 and today).
CREATE FUNCTION @extschema@._printer_label_selector(selector jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  WITH req AS (
    SELECT 0 AS src, 0::bigint AS ord, m.key, '=' AS op, ARRAY[COALESCE(m.value, '')] AS vals
    FROM jsonb_each_text(CASE WHEN jsonb_typeof(selector->'matchLabels') = 'object'
                              THEN selector->'matchLabels' ELSE '{}'::jsonb END) AS m(key, value)
    UNION ALL
    SELECT 1, x.o, COALESCE(x.e->>'key', ''), COALESCE(x.e->>'operator', ''),
           ARRAY(SELECT COALESCE(v, '')
                 FROM jsonb_array_elements_text(@extschema@._printer_array(x.e->'values')) WITH ORDINALITY AS y(v, n)
                 ORDER BY n)
    FROM jsonb_array_elements(@extschema@._printer_array(selector->'matchExpressions')) WITH ORDINALITY AS x(e, o)
  ), r AS (
    SELECT src, ord, key,
           @extschema@._printer_label_key_valid(key)
           AND CASE WHEN src = 0 THEN true
                    WHEN op IN ('In', 'NotIn') THEN cardinality(vals) > 0
                    WHEN op IN ('Exists', 'DoesNotExist') THEN cardinality(vals) = 0
                    ELSE false END
           AND NOT EXISTS (SELECT FROM unnest(vals) AS v WHERE NOT @extschema@._printer_label_value_valid(v)) AS ok,
           CASE WHEN src = 1 AND op = 'DoesNotExist' THEN '!' ELSE '' END || key
           || CASE WHEN src = 0 THEN '=' WHEN op = 'In' THEN ' in (' WHEN op = 'NotIn' THEN ' notin (' ELSE '' END
           || CASE WHEN src = 0 OR op IN ('In', 'NotIn') THEN
                     CASE WHEN cardinality(vals) = 1 THEN vals[1]
                          ELSE (SELECT COALESCE(string_agg(v, ',' ORDER BY v COLLATE "C"), '') FROM unnest(vals) AS v) END
                   ELSE '' END
           || CASE WHEN src = 1 AND op IN ('In', 'NotIn') THEN ')' ELSE '' END AS txt
    FROM req
  )
  SELECT CASE WHEN jsonb_typeof(selector) IS DISTINCT FROM 'object' THEN ''
              WHEN NOT COALESCE(bool_and(ok), true) THEN NULL
              ELSE COALESCE(string_agg(txt, ',' ORDER BY key COLLATE "C", src, ord), '') END
  FROM r
$$;
COMMENT ON FUNCTION @extschema@._printer_label_selector(jsonb) IS
'LabelSelector as labels.Selector String() prints it ("a=b,k in (x,y),!z"), "" for nil or empty, NULL when invalid. apimachinery LabelSelectorAsSelector.';

-- _printer_format_label_selector(selector jsonb) -> text: a
-- metav1.LabelSelector as the printers show it: _printer_label_selector's
-- text, "<none>" when that is "" (nil or empty selector), "<error>" when
-- the selector is invalid.  apimachinery meta/v1 FormatLabelSelector.
CREATE FUNCTION @extschema@._printer_format_label_selector(selector jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE WHEN s IS NULL THEN '<error>' WHEN s = '' THEN '<none>' ELSE s END
  FROM (SELECT @extschema@._printer_label_selector(selector) AS s) x
$$;
COMMENT ON FUNCTION @extschema@._printer_format_label_selector(jsonb) IS
'LabelSelector as "k=v,k in (a,b)", "<none>" for nil or empty, "<error>" when invalid. apimachinery metav1.FormatLabelSelector.';

-- ---------------------------------------------------------------------
-- Pods: printers.go printPod
-- ---------------------------------------------------------------------

-- _pod_print(object jsonb) -> (ready_containers, total_containers, status,
-- restarts, last_restart): the READY, STATUS and RESTARTS cells of a pod in
-- one pass, ported line by line from printers.go printPod (current
-- release): SchedulingGated from the PodScheduled condition; init
-- containers in order (Init:N/M, Init:<reason>, Init:Signal:N,
-- Init:ExitCode:N), sidecars (init containers with restartPolicy Always)
-- counted in READY's total and, once started, in its ready count; regular
-- containers last to first (waiting reason, terminated reason,
-- Signal:N, ExitCode:N), "Completed" turned back to Running/NotReady while
-- a container runs; Unknown for a deleted pod of a lost node, Terminating
-- for a deleted pod whose phase is not terminal.  Restarts count every init
-- container while initializing, else the sidecars and the regular
-- containers; last_restart is the latest lastState.terminated.finishedAt
-- among the containers counted (NULL if none).
CREATE FUNCTION @extschema@._pod_print(object jsonb,
                                  OUT ready_containers integer,
                                  OUT total_containers integer,
                                  OUT status text,
                                  OUT restarts bigint,
                                  OUT last_restart timestamptz)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  st jsonb := COALESCE(object->'status', '{}');
  init_specs jsonb := @extschema@._printer_array(object->'spec'->'initContainers');
  n_init integer := jsonb_array_length(@extschema@._printer_array(object->'spec'->'initContainers'));
  phase text := COALESCE(st->>'phase', '');
  c jsonb;
  i bigint;
  term jsonb;
  wait jsonb;
  finished timestamptz;
  restartable boolean;
  sidecar_restarts bigint := 0;
  sidecar_last timestamptz;
  initializing boolean := false;
  has_running boolean := false;
BEGIN
  restarts := 0;
  ready_containers := 0;
  total_containers := jsonb_array_length(@extschema@._printer_array(object->'spec'->'containers'));
  status := phase;
  IF COALESCE(st->>'reason', '') <> '' THEN
    status := st->>'reason';
  END IF;

  -- {type: PodScheduled, reason: SchedulingGated} sets SchedulingGated.
  IF EXISTS (SELECT 1 FROM jsonb_array_elements(@extschema@._printer_array(st->'conditions')) cond
             WHERE cond->>'type' = 'PodScheduled' AND cond->>'reason' = 'SchedulingGated') THEN
    status := 'SchedulingGated';
  END IF;

  -- Sidecars (restartPolicy Always) count in READY's total.
  total_containers := total_containers
    + (SELECT count(*)::integer FROM jsonb_array_elements(init_specs) s
       WHERE s->>'restartPolicy' = 'Always');

  FOR c, i IN SELECT e, o - 1 FROM jsonb_array_elements(@extschema@._printer_array(st->'initContainerStatuses')) WITH ORDINALITY AS x(e, o)
  LOOP
    restarts := restarts + COALESCE(@extschema@._printer_int32(c->'restartCount'), 0);
    finished := @extschema@._printer_time(c->'lastState'->'terminated'->>'finishedAt');
    IF finished IS NOT NULL AND (last_restart IS NULL OR last_restart < finished) THEN
      last_restart := finished;
    END IF;
    -- The spec of the init container of that name (Go map: the last of
    -- that name wins); none for a status without a spec.
    SELECT s->>'restartPolicy' = 'Always' INTO restartable
      FROM jsonb_array_elements(init_specs) WITH ORDINALITY AS y(s, o)
     WHERE COALESCE(s->>'name', '') = COALESCE(c->>'name', '')
     ORDER BY o DESC LIMIT 1;
    restartable := COALESCE(restartable, false);
    IF restartable THEN
      sidecar_restarts := sidecar_restarts + COALESCE(@extschema@._printer_int32(c->'restartCount'), 0);
      IF finished IS NOT NULL AND (sidecar_last IS NULL OR sidecar_last < finished) THEN
        sidecar_last := finished;
      END IF;
    END IF;
    term := CASE WHEN jsonb_typeof(c->'state'->'terminated') = 'object' THEN c->'state'->'terminated' END;
    wait := CASE WHEN jsonb_typeof(c->'state'->'waiting') = 'object' THEN c->'state'->'waiting' END;
    IF term IS NOT NULL AND COALESCE(@extschema@._printer_int32(term->'exitCode'), 0) = 0 THEN
      CONTINUE;
    ELSIF restartable AND COALESCE(@extschema@._printer_bool(c->'started'), false) THEN
      IF COALESCE(@extschema@._printer_bool(c->'ready'), false) THEN
        ready_containers := ready_containers + 1;
      END IF;
      CONTINUE;
    ELSIF term IS NOT NULL THEN
      -- initialization is failed
      IF COALESCE(term->>'reason', '') = '' THEN
        IF COALESCE(@extschema@._printer_int32(term->'signal'), 0) <> 0 THEN
          status := 'Init:Signal:' || @extschema@._printer_int32(term->'signal');
        ELSE
          status := 'Init:ExitCode:' || COALESCE(@extschema@._printer_int32(term->'exitCode'), 0);
        END IF;
      ELSE
        status := 'Init:' || (term->>'reason');
      END IF;
      initializing := true;
    ELSIF wait IS NOT NULL AND COALESCE(wait->>'reason', '') <> '' AND wait->>'reason' <> 'PodInitializing' THEN
      status := 'Init:' || (wait->>'reason');
      initializing := true;
    ELSE
      status := 'Init:' || i || '/' || n_init;
      initializing := true;
    END IF;
    EXIT;
  END LOOP;

  IF NOT initializing OR EXISTS (
       -- isPodInitializedConditionTrue: the first Initialized condition.
       SELECT 1 FROM (SELECT cond FROM jsonb_array_elements(@extschema@._printer_array(st->'conditions')) WITH ORDINALITY AS z(cond, o)
                       WHERE cond->>'type' = 'Initialized' ORDER BY o LIMIT 1) f
        WHERE f.cond->>'status' = 'True') THEN
    restarts := sidecar_restarts;
    last_restart := sidecar_last;
    FOR c IN SELECT e FROM jsonb_array_elements(@extschema@._printer_array(st->'containerStatuses')) WITH ORDINALITY AS x(e, o) ORDER BY o DESC
    LOOP
      restarts := restarts + COALESCE(@extschema@._printer_int32(c->'restartCount'), 0);
      finished := @extschema@._printer_time(c->'lastState'->'terminated'->>'finishedAt');
      IF finished IS NOT NULL AND (last_restart IS NULL OR last_restart < finished) THEN
        last_restart := finished;
      END IF;
      term := CASE WHEN jsonb_typeof(c->'state'->'terminated') = 'object' THEN c->'state'->'terminated' END;
      wait := CASE WHEN jsonb_typeof(c->'state'->'waiting') = 'object' THEN c->'state'->'waiting' END;
      IF wait IS NOT NULL AND COALESCE(wait->>'reason', '') <> '' THEN
        status := wait->>'reason';
      ELSIF term IS NOT NULL AND COALESCE(term->>'reason', '') <> '' THEN
        status := term->>'reason';
      ELSIF term IS NOT NULL THEN
        IF COALESCE(@extschema@._printer_int32(term->'signal'), 0) <> 0 THEN
          status := 'Signal:' || @extschema@._printer_int32(term->'signal');
        ELSE
          status := 'ExitCode:' || COALESCE(@extschema@._printer_int32(term->'exitCode'), 0);
        END IF;
      ELSIF COALESCE(@extschema@._printer_bool(c->'ready'), false) AND jsonb_typeof(c->'state'->'running') = 'object' THEN
        has_running := true;
        ready_containers := ready_containers + 1;
      END IF;
    END LOOP;

    -- change pod status back to "Running" if there is at least one
    -- container still reporting as "Running" status
    IF status = 'Completed' AND has_running THEN
      IF EXISTS (SELECT 1 FROM jsonb_array_elements(@extschema@._printer_array(st->'conditions')) cond
                 WHERE cond->>'type' = 'Ready' AND cond->>'status' = 'True') THEN
        status := 'Running';
      ELSE
        status := 'NotReady';
      END IF;
    END IF;
  END IF;

  IF object->'metadata'->>'deletionTimestamp' IS NOT NULL AND st->>'reason' = 'NodeLost' THEN
    status := 'Unknown';
  ELSIF object->'metadata'->>'deletionTimestamp' IS NOT NULL AND phase NOT IN ('Succeeded', 'Failed') THEN
    status := 'Terminating';
  END IF;
END
$$;
COMMENT ON FUNCTION @extschema@._pod_print(jsonb) IS
'READY counts, STATUS, RESTARTS and the last restart time of a pod in one pass. printers.go printPod (current release, sidecars and SchedulingGated).';

-- pod_ready_text(object jsonb) -> text: READY, "ready/total" ("2/2"),
-- sidecar init containers included.  printers.go printPod.
CREATE FUNCTION @extschema@.pod_ready_text(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT p.ready_containers || '/' || p.total_containers FROM @extschema@._pod_print(object) p $$;
COMMENT ON FUNCTION @extschema@.pod_ready_text(jsonb) IS
'Pod READY cell "ready/total" (sidecar init containers counted). printers.go printPod, current release.';

-- pod_status(object jsonb) -> text: STATUS exactly as kubectl prints it
-- (Running, CrashLoopBackOff, Init:0/1, Init:CrashLoopBackOff, Completed,
-- OOMKilled, Error, Signal:9, ExitCode:1, Terminating, Unknown,
-- SchedulingGated, NotReady, ...).  printers.go printPod.
CREATE FUNCTION @extschema@.pod_status(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT p.status FROM @extschema@._pod_print(object) p $$;
COMMENT ON FUNCTION @extschema@.pod_status(jsonb) IS
'Pod STATUS cell (CrashLoopBackOff, Init:0/1, Terminating, Completed, ...). printers.go printPod, current release.';

-- pod_restarts(object jsonb) -> bigint: RESTARTS' number (Go's int): while
-- initializing the init containers' restarts, else the sidecars' plus the
-- regular containers'.  printers.go printPod (1.20 prints the same number
-- without sidecars, as an integer cell).
CREATE FUNCTION @extschema@.pod_restarts(object jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT p.restarts FROM @extschema@._pod_print(object) p $$;
COMMENT ON FUNCTION @extschema@.pod_restarts(jsonb) IS
'Pod RESTARTS count as kubectl sums it (sidecar init containers included). printers.go printPod, current release.';

-- pod_last_restart(object jsonb) -> timestamptz: the latest
-- lastState.terminated.finishedAt among the containers RESTARTS counts, the
-- time kubectl's "(3m ago)" is computed from; NULL when there is none.
-- printers.go printPod lastRestartDate.
CREATE FUNCTION @extschema@.pod_last_restart(object jsonb) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT p.last_restart FROM @extschema@._pod_print(object) p $$;
COMMENT ON FUNCTION @extschema@.pod_last_restart(jsonb) IS
'Time RESTARTS "(3m ago)" is computed from (latest lastState.terminated.finishedAt counted), NULL if none. printers.go printPod.';

-- pod_restarts_text(object jsonb, at timestamptz) -> text: the RESTARTS
-- cell at instant `at`: "7", or "7 (3m ago)" when there were restarts and a
-- last restart time.  printers.go printPod restartsStr (1.20: the number
-- alone).  A view passes now().
CREATE FUNCTION @extschema@.pod_restarts_text(object jsonb, at timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE WHEN p.restarts <> 0 AND p.last_restart IS NOT NULL
              THEN p.restarts || ' (' || @extschema@.translate_timestamp_since(p.last_restart, at) || ' ago)'
              ELSE p.restarts::text END
  FROM @extschema@._pod_print(object) p
$$;
COMMENT ON FUNCTION @extschema@.pod_restarts_text(jsonb, timestamptz) IS
'Pod RESTARTS cell at instant at: "7" or "7 (3m ago)" (a view passes now()). printers.go printPod restartsStr.';

-- pod_ip(object jsonb) -> text: IP, status.podIPs[0].ip, "<none>".
-- printers.go printPod (wide).
CREATE FUNCTION @extschema@.pod_ip(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(NULLIF(object->'status'->'podIPs'->0->>'ip', ''), '<none>') $$;
COMMENT ON FUNCTION @extschema@.pod_ip(jsonb) IS
'Pod IP cell: status.podIPs[0].ip or "<none>". printers.go printPod (wide).';

-- pod_node(object jsonb) -> text: NODE, spec.nodeName, "<none>".
-- printers.go printPod (wide).
CREATE FUNCTION @extschema@.pod_node(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(NULLIF(object->'spec'->>'nodeName', ''), '<none>') $$;
COMMENT ON FUNCTION @extschema@.pod_node(jsonb) IS
'Pod NODE cell: spec.nodeName or "<none>". printers.go printPod (wide).';

-- pod_nominated_node(object jsonb) -> text: NOMINATED NODE,
-- status.nominatedNodeName, "<none>".  printers.go printPod (wide).
CREATE FUNCTION @extschema@.pod_nominated_node(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(NULLIF(object->'status'->>'nominatedNodeName', ''), '<none>') $$;
COMMENT ON FUNCTION @extschema@.pod_nominated_node(jsonb) IS
'Pod NOMINATED NODE cell: status.nominatedNodeName or "<none>". printers.go printPod (wide).';

-- pod_readiness_gates(object jsonb) -> text: READINESS GATES, "true/gates"
-- (a gate counts when the first condition of its type is True), "<none>"
-- without gates.  printers.go printPod (wide).
CREATE FUNCTION @extschema@.pod_readiness_gates(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE WHEN @extschema@._printer_count(object->'spec'->'readinessGates') = 0 THEN '<none>'
         ELSE (SELECT count(*) FILTER (WHERE (
                        SELECT cond->>'status' = 'True'
                        FROM jsonb_array_elements(@extschema@._printer_array(object->'status'->'conditions')) WITH ORDINALITY AS c(cond, o)
                        WHERE cond->>'type' = COALESCE(g->>'conditionType', '')
                        ORDER BY o LIMIT 1))
               FROM jsonb_array_elements(@extschema@._printer_array(object->'spec'->'readinessGates')) g)
              || '/' || jsonb_array_length(@extschema@._printer_array(object->'spec'->'readinessGates')) END
$$;
COMMENT ON FUNCTION @extschema@.pod_readiness_gates(jsonb) IS
'Pod READINESS GATES cell "true/total" or "<none>". printers.go printPod (wide).';

-- ---------------------------------------------------------------------
-- Nodes: printers.go printNode, findNodeRoles, getNodeInternalIP,
-- getNodeExternalIP
-- ---------------------------------------------------------------------

-- node_status(object jsonb) -> text: STATUS: Ready / NotReady (the last
-- Ready condition), Unknown without one, then ",SchedulingDisabled" when
-- spec.unschedulable.  printers.go printNode.
CREATE FUNCTION @extschema@.node_status(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT COALESCE((SELECT CASE WHEN cond->>'status' = 'True' THEN 'Ready' ELSE 'NotReady' END
                   FROM jsonb_array_elements(@extschema@._printer_array(object->'status'->'conditions')) WITH ORDINALITY AS c(cond, o)
                   WHERE cond->>'type' = 'Ready' ORDER BY o DESC LIMIT 1), 'Unknown')
         || CASE WHEN COALESCE(@extschema@._printer_bool(object->'spec'->'unschedulable'), false) THEN ',SchedulingDisabled' ELSE '' END
$$;
COMMENT ON FUNCTION @extschema@.node_status(jsonb) IS
'Node STATUS cell: Ready/NotReady/Unknown[,SchedulingDisabled]. printers.go printNode.';

-- node_roles(object jsonb) -> text: ROLES, from node-role.kubernetes.io/<role>
-- label keys and the kubernetes.io/role label value, sorted, distinct,
-- joined with ","; "<none>".  printers.go findNodeRoles.
CREATE FUNCTION @extschema@.node_roles(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT COALESCE(string_agg(DISTINCT role COLLATE "C", ',' ORDER BY role COLLATE "C"), '<none>')
  FROM (SELECT CASE WHEN key LIKE 'node-role.kubernetes.io/%' THEN NULLIF(substr(key, 25), '')
                    WHEN key = 'kubernetes.io/role' THEN NULLIF(value, '') END AS role
        FROM jsonb_each_text(CASE WHEN jsonb_typeof(object->'metadata'->'labels') = 'object'
                                  THEN object->'metadata'->'labels' ELSE '{}' END)) r
  WHERE role IS NOT NULL
$$;
COMMENT ON FUNCTION @extschema@.node_roles(jsonb) IS
'Node ROLES cell ("control-plane", "<none>"). printers.go findNodeRoles.';

-- node_version(object jsonb) -> text: VERSION, status.nodeInfo.kubeletVersion
-- ("" when unset).  printers.go printNode.
CREATE FUNCTION @extschema@.node_version(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(object->'status'->'nodeInfo'->>'kubeletVersion', '') $$;
COMMENT ON FUNCTION @extschema@.node_version(jsonb) IS
'Node VERSION cell: kubeletVersion. printers.go printNode.';

-- node_internal_ip(object jsonb) -> text: INTERNAL-IP, the first InternalIP
-- address, "<none>".  printers.go getNodeInternalIP (wide).
CREATE FUNCTION @extschema@.node_internal_ip(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT COALESCE((SELECT COALESCE(a->>'address', '')
                   FROM jsonb_array_elements(@extschema@._printer_array(object->'status'->'addresses')) WITH ORDINALITY AS x(a, o)
                   WHERE a->>'type' = 'InternalIP' ORDER BY o LIMIT 1), '<none>')
$$;
COMMENT ON FUNCTION @extschema@.node_internal_ip(jsonb) IS
'Node INTERNAL-IP cell: first InternalIP address or "<none>". printers.go getNodeInternalIP.';

-- node_external_ip(object jsonb) -> text: EXTERNAL-IP, the first ExternalIP
-- address, "<none>".  printers.go getNodeExternalIP (wide).
CREATE FUNCTION @extschema@.node_external_ip(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT COALESCE((SELECT COALESCE(a->>'address', '')
                   FROM jsonb_array_elements(@extschema@._printer_array(object->'status'->'addresses')) WITH ORDINALITY AS x(a, o)
                   WHERE a->>'type' = 'ExternalIP' ORDER BY o LIMIT 1), '<none>')
$$;
COMMENT ON FUNCTION @extschema@.node_external_ip(jsonb) IS
'Node EXTERNAL-IP cell: first ExternalIP address or "<none>". printers.go getNodeExternalIP.';

-- node_os_image(object jsonb) -> text: OS-IMAGE, "<unknown>" when empty.
-- printers.go printNode (wide).
CREATE FUNCTION @extschema@.node_os_image(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(NULLIF(object->'status'->'nodeInfo'->>'osImage', ''), '<unknown>') $$;
COMMENT ON FUNCTION @extschema@.node_os_image(jsonb) IS
'Node OS-IMAGE cell or "<unknown>". printers.go printNode (wide).';

-- node_kernel_version(object jsonb) -> text: KERNEL-VERSION, "<unknown>"
-- when empty.  printers.go printNode (wide).
CREATE FUNCTION @extschema@.node_kernel_version(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(NULLIF(object->'status'->'nodeInfo'->>'kernelVersion', ''), '<unknown>') $$;
COMMENT ON FUNCTION @extschema@.node_kernel_version(jsonb) IS
'Node KERNEL-VERSION cell or "<unknown>". printers.go printNode (wide).';

-- node_container_runtime(object jsonb) -> text: CONTAINER-RUNTIME,
-- containerRuntimeVersion, "<unknown>" when empty.  printers.go printNode.
CREATE FUNCTION @extschema@.node_container_runtime(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(NULLIF(object->'status'->'nodeInfo'->>'containerRuntimeVersion', ''), '<unknown>') $$;
COMMENT ON FUNCTION @extschema@.node_container_runtime(jsonb) IS
'Node CONTAINER-RUNTIME cell or "<unknown>". printers.go printNode (wide).';

-- ---------------------------------------------------------------------
-- Namespaces: printers.go printNamespace
-- ---------------------------------------------------------------------

-- namespace_status(object jsonb) -> text: STATUS, status.phase ("" when
-- unset).  printers.go printNamespace.
CREATE FUNCTION @extschema@.namespace_status(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(object->'status'->>'phase', '') $$;
COMMENT ON FUNCTION @extschema@.namespace_status(jsonb) IS
'Namespace STATUS cell: status.phase. printers.go printNamespace.';

-- ---------------------------------------------------------------------
-- Workloads: printDeployment, printReplicaSet, printReplicationController,
-- printStatefulSet, printDaemonSet (integers are int64 cells; unset counts
-- are 0, as the internal types hold them).  The wide CONTAINERS and IMAGES
-- cells follow layoutContainerCells, SELECTOR FormatLabelSelector (a
-- ReplicationController's labels.FormatLabels, a Deployment's the
-- selector's String())
-- ---------------------------------------------------------------------

-- deployment_ready(object jsonb) -> text: READY, "readyReplicas/replicas".
-- printers.go printDeployment.
CREATE FUNCTION @extschema@.deployment_ready(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(@extschema@._printer_int(object->'status'->'readyReplicas'), 0) || '/' || COALESCE(@extschema@._printer_int(object->'spec'->'replicas'), 0) $$;
COMMENT ON FUNCTION @extschema@.deployment_ready(jsonb) IS
'Deployment READY cell "ready/desired". printers.go printDeployment.';

-- deployment_up_to_date(object jsonb) -> bigint: UP-TO-DATE,
-- status.updatedReplicas.  printers.go printDeployment.
CREATE FUNCTION @extschema@.deployment_up_to_date(object jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(@extschema@._printer_int(object->'status'->'updatedReplicas'), 0) $$;
COMMENT ON FUNCTION @extschema@.deployment_up_to_date(jsonb) IS
'Deployment UP-TO-DATE cell: status.updatedReplicas. printers.go printDeployment.';

-- deployment_available(object jsonb) -> bigint: AVAILABLE,
-- status.availableReplicas.  printers.go printDeployment.
CREATE FUNCTION @extschema@.deployment_available(object jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(@extschema@._printer_int(object->'status'->'availableReplicas'), 0) $$;
COMMENT ON FUNCTION @extschema@.deployment_available(jsonb) IS
'Deployment AVAILABLE cell: status.availableReplicas. printers.go printDeployment.';

-- deployment_containers(object jsonb) -> text: CONTAINERS (wide), the names
-- of the pod template's containers joined with ",".  printers.go
-- printDeployment (layoutContainerCells).
CREATE FUNCTION @extschema@.deployment_containers(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._printer_container_cells(object->'spec'->'template'->'spec'->'containers', 'name') $$;
COMMENT ON FUNCTION @extschema@.deployment_containers(jsonb) IS
'Deployment CONTAINERS cell (wide): container names joined with ",". printers.go printDeployment.';

-- deployment_images(object jsonb) -> text: IMAGES (wide), the images of the
-- pod template's containers joined with ",".  printers.go printDeployment
-- (layoutContainerCells).
CREATE FUNCTION @extschema@.deployment_images(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._printer_container_cells(object->'spec'->'template'->'spec'->'containers', 'image') $$;
COMMENT ON FUNCTION @extschema@.deployment_images(jsonb) IS
'Deployment IMAGES cell (wide): container images joined with ",". printers.go printDeployment.';

-- deployment_selector(object jsonb) -> text: SELECTOR (wide), spec.selector
-- as "k=v,k in (a,b),...": labels.Selector's String() itself, so "" (not
-- "<none>") for a nil or empty selector, and "<invalid>" for an invalid
-- one.  printers.go printDeployment (current release; 1.20's
-- printDeployment fails on an invalid selector, which validation rejects on
-- write).
CREATE FUNCTION @extschema@.deployment_selector(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(@extschema@._printer_label_selector(object->'spec'->'selector'), '<invalid>') $$;
COMMENT ON FUNCTION @extschema@.deployment_selector(jsonb) IS
'Deployment SELECTOR cell (wide): spec.selector as "k=v,...", "" when nil or empty, "<invalid>". printers.go printDeployment.';

-- replicaset_desired(object jsonb) -> bigint: DESIRED, spec.replicas.
-- printers.go printReplicaSet.
CREATE FUNCTION @extschema@.replicaset_desired(object jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(@extschema@._printer_int(object->'spec'->'replicas'), 0) $$;
COMMENT ON FUNCTION @extschema@.replicaset_desired(jsonb) IS
'ReplicaSet DESIRED cell: spec.replicas. printers.go printReplicaSet.';

-- replicaset_current(object jsonb) -> bigint: CURRENT, status.replicas.
-- printers.go printReplicaSet.
CREATE FUNCTION @extschema@.replicaset_current(object jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(@extschema@._printer_int(object->'status'->'replicas'), 0) $$;
COMMENT ON FUNCTION @extschema@.replicaset_current(jsonb) IS
'ReplicaSet CURRENT cell: status.replicas. printers.go printReplicaSet.';

-- replicaset_ready(object jsonb) -> bigint: READY, status.readyReplicas.
-- printers.go printReplicaSet.
CREATE FUNCTION @extschema@.replicaset_ready(object jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(@extschema@._printer_int(object->'status'->'readyReplicas'), 0) $$;
COMMENT ON FUNCTION @extschema@.replicaset_ready(jsonb) IS
'ReplicaSet READY cell: status.readyReplicas. printers.go printReplicaSet.';

-- replicaset_containers(object jsonb) -> text: CONTAINERS (wide), the names
-- of the pod template's containers joined with ",".  printers.go
-- printReplicaSet (layoutContainerCells).
CREATE FUNCTION @extschema@.replicaset_containers(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._printer_container_cells(object->'spec'->'template'->'spec'->'containers', 'name') $$;
COMMENT ON FUNCTION @extschema@.replicaset_containers(jsonb) IS
'ReplicaSet CONTAINERS cell (wide): container names joined with ",". printers.go printReplicaSet.';

-- replicaset_images(object jsonb) -> text: IMAGES (wide), the images of the
-- pod template's containers joined with ",".  printers.go printReplicaSet
-- (layoutContainerCells).
CREATE FUNCTION @extschema@.replicaset_images(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._printer_container_cells(object->'spec'->'template'->'spec'->'containers', 'image') $$;
COMMENT ON FUNCTION @extschema@.replicaset_images(jsonb) IS
'ReplicaSet IMAGES cell (wide): container images joined with ",". printers.go printReplicaSet.';

-- replicaset_selector(object jsonb) -> text: SELECTOR (wide), spec.selector
-- as "k=v,k in (a,b),...", "<none>" for a nil or empty selector, "<error>"
-- for an invalid one.  printers.go printReplicaSet
-- (metav1.FormatLabelSelector).
CREATE FUNCTION @extschema@.replicaset_selector(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._printer_format_label_selector(object->'spec'->'selector') $$;
COMMENT ON FUNCTION @extschema@.replicaset_selector(jsonb) IS
'ReplicaSet SELECTOR cell (wide): spec.selector as "k=v,...", "<none>", "<error>". printers.go printReplicaSet (FormatLabelSelector).';

-- replicationcontroller_desired(object jsonb) -> bigint: DESIRED,
-- spec.replicas (0 when unset, as the internal type holds it; the API
-- server defaults it to 1).  printers.go printReplicationController.
CREATE FUNCTION @extschema@.replicationcontroller_desired(object jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(@extschema@._printer_int(object->'spec'->'replicas'), 0) $$;
COMMENT ON FUNCTION @extschema@.replicationcontroller_desired(jsonb) IS
'ReplicationController DESIRED cell: spec.replicas. printers.go printReplicationController.';

-- replicationcontroller_current(object jsonb) -> bigint: CURRENT,
-- status.replicas.  printers.go printReplicationController.
CREATE FUNCTION @extschema@.replicationcontroller_current(object jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(@extschema@._printer_int(object->'status'->'replicas'), 0) $$;
COMMENT ON FUNCTION @extschema@.replicationcontroller_current(jsonb) IS
'ReplicationController CURRENT cell: status.replicas. printers.go printReplicationController.';

-- replicationcontroller_ready(object jsonb) -> bigint: READY,
-- status.readyReplicas.  printers.go printReplicationController.
CREATE FUNCTION @extschema@.replicationcontroller_ready(object jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(@extschema@._printer_int(object->'status'->'readyReplicas'), 0) $$;
COMMENT ON FUNCTION @extschema@.replicationcontroller_ready(jsonb) IS
'ReplicationController READY cell: status.readyReplicas. printers.go printReplicationController.';

-- replicationcontroller_containers(object jsonb) -> text: CONTAINERS
-- (wide), the names of the pod template's containers joined with ",", ""
-- without a template.  printers.go printReplicationController
-- (layoutContainerCells; 1.20 fails on a nil template, which validation
-- rejects on write).
CREATE FUNCTION @extschema@.replicationcontroller_containers(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._printer_container_cells(object->'spec'->'template'->'spec'->'containers', 'name') $$;
COMMENT ON FUNCTION @extschema@.replicationcontroller_containers(jsonb) IS
'ReplicationController CONTAINERS cell (wide): container names joined with ",". printers.go printReplicationController.';

-- replicationcontroller_images(object jsonb) -> text: IMAGES (wide), the
-- images of the pod template's containers joined with ",", "" without a
-- template.  printers.go printReplicationController (layoutContainerCells;
-- 1.20 fails on a nil template, which validation rejects on write).
CREATE FUNCTION @extschema@.replicationcontroller_images(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._printer_container_cells(object->'spec'->'template'->'spec'->'containers', 'image') $$;
COMMENT ON FUNCTION @extschema@.replicationcontroller_images(jsonb) IS
'ReplicationController IMAGES cell (wide): container images joined with ",". printers.go printReplicationController.';

-- replicationcontroller_selector(object jsonb) -> text: SELECTOR (wide),
-- spec.selector, a plain string map, as "k=v,..." sorted by key, "<none>"
-- when empty.  printers.go printReplicationController
-- (labels.FormatLabels).
CREATE FUNCTION @extschema@.replicationcontroller_selector(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._printer_format_labels(object->'spec'->'selector') $$;
COMMENT ON FUNCTION @extschema@.replicationcontroller_selector(jsonb) IS
'ReplicationController SELECTOR cell (wide): spec.selector as "k=v,..." or "<none>". printers.go printReplicationController (labels.FormatLabels).';

-- statefulset_ready(object jsonb) -> text: READY, "readyReplicas/replicas".
-- printers.go printStatefulSet.
CREATE FUNCTION @extschema@.statefulset_ready(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(@extschema@._printer_int(object->'status'->'readyReplicas'), 0) || '/' || COALESCE(@extschema@._printer_int(object->'spec'->'replicas'), 0) $$;
COMMENT ON FUNCTION @extschema@.statefulset_ready(jsonb) IS
'StatefulSet READY cell "ready/desired". printers.go printStatefulSet.';

-- statefulset_containers(object jsonb) -> text: CONTAINERS (wide), the
-- names of the pod template's containers joined with ",".  printers.go
-- printStatefulSet (layoutContainerCells).
CREATE FUNCTION @extschema@.statefulset_containers(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._printer_container_cells(object->'spec'->'template'->'spec'->'containers', 'name') $$;
COMMENT ON FUNCTION @extschema@.statefulset_containers(jsonb) IS
'StatefulSet CONTAINERS cell (wide): container names joined with ",". printers.go printStatefulSet.';

-- statefulset_images(object jsonb) -> text: IMAGES (wide), the images of
-- the pod template's containers joined with ",".  printers.go
-- printStatefulSet (layoutContainerCells).
CREATE FUNCTION @extschema@.statefulset_images(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._printer_container_cells(object->'spec'->'template'->'spec'->'containers', 'image') $$;
COMMENT ON FUNCTION @extschema@.statefulset_images(jsonb) IS
'StatefulSet IMAGES cell (wide): container images joined with ",". printers.go printStatefulSet.';

-- daemonset_desired(object jsonb) -> bigint: DESIRED,
-- status.desiredNumberScheduled.  printers.go printDaemonSet.
CREATE FUNCTION @extschema@.daemonset_desired(object jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(@extschema@._printer_int(object->'status'->'desiredNumberScheduled'), 0) $$;
COMMENT ON FUNCTION @extschema@.daemonset_desired(jsonb) IS
'DaemonSet DESIRED cell: status.desiredNumberScheduled. printers.go printDaemonSet.';

-- daemonset_current(object jsonb) -> bigint: CURRENT,
-- status.currentNumberScheduled.  printers.go printDaemonSet.
CREATE FUNCTION @extschema@.daemonset_current(object jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(@extschema@._printer_int(object->'status'->'currentNumberScheduled'), 0) $$;
COMMENT ON FUNCTION @extschema@.daemonset_current(jsonb) IS
'DaemonSet CURRENT cell: status.currentNumberScheduled. printers.go printDaemonSet.';

-- daemonset_ready(object jsonb) -> bigint: READY, status.numberReady.
-- printers.go printDaemonSet.
CREATE FUNCTION @extschema@.daemonset_ready(object jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(@extschema@._printer_int(object->'status'->'numberReady'), 0) $$;
COMMENT ON FUNCTION @extschema@.daemonset_ready(jsonb) IS
'DaemonSet READY cell: status.numberReady. printers.go printDaemonSet.';

-- daemonset_up_to_date(object jsonb) -> bigint: UP-TO-DATE,
-- status.updatedNumberScheduled.  printers.go printDaemonSet.
CREATE FUNCTION @extschema@.daemonset_up_to_date(object jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(@extschema@._printer_int(object->'status'->'updatedNumberScheduled'), 0) $$;
COMMENT ON FUNCTION @extschema@.daemonset_up_to_date(jsonb) IS
'DaemonSet UP-TO-DATE cell: status.updatedNumberScheduled. printers.go printDaemonSet.';

-- daemonset_available(object jsonb) -> bigint: AVAILABLE,
-- status.numberAvailable.  printers.go printDaemonSet.
CREATE FUNCTION @extschema@.daemonset_available(object jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(@extschema@._printer_int(object->'status'->'numberAvailable'), 0) $$;
COMMENT ON FUNCTION @extschema@.daemonset_available(jsonb) IS
'DaemonSet AVAILABLE cell: status.numberAvailable. printers.go printDaemonSet.';

-- daemonset_node_selector(object jsonb) -> text: NODE SELECTOR, the pod
-- template's nodeSelector as "k=v,...", "<none>".  printers.go
-- printDaemonSet (labels.FormatLabels).
CREATE FUNCTION @extschema@.daemonset_node_selector(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._printer_format_labels(object->'spec'->'template'->'spec'->'nodeSelector') $$;
COMMENT ON FUNCTION @extschema@.daemonset_node_selector(jsonb) IS
'DaemonSet NODE SELECTOR cell "k=v,..." or "<none>". printers.go printDaemonSet.';

-- daemonset_containers(object jsonb) -> text: CONTAINERS (wide), the names
-- of the pod template's containers joined with ",".  printers.go
-- printDaemonSet (layoutContainerCells).
CREATE FUNCTION @extschema@.daemonset_containers(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._printer_container_cells(object->'spec'->'template'->'spec'->'containers', 'name') $$;
COMMENT ON FUNCTION @extschema@.daemonset_containers(jsonb) IS
'DaemonSet CONTAINERS cell (wide): container names joined with ",". printers.go printDaemonSet.';

-- daemonset_images(object jsonb) -> text: IMAGES (wide), the images of the
-- pod template's containers joined with ",".  printers.go printDaemonSet
-- (layoutContainerCells).
CREATE FUNCTION @extschema@.daemonset_images(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._printer_container_cells(object->'spec'->'template'->'spec'->'containers', 'image') $$;
COMMENT ON FUNCTION @extschema@.daemonset_images(jsonb) IS
'DaemonSet IMAGES cell (wide): container images joined with ",". printers.go printDaemonSet.';

-- daemonset_selector(object jsonb) -> text: SELECTOR (wide), spec.selector
-- as "k=v,k in (a,b),...", "<none>" for a nil or empty selector, "<error>"
-- for an invalid one.  printers.go printDaemonSet
-- (metav1.FormatLabelSelector).
CREATE FUNCTION @extschema@.daemonset_selector(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._printer_format_label_selector(object->'spec'->'selector') $$;
COMMENT ON FUNCTION @extschema@.daemonset_selector(jsonb) IS
'DaemonSet SELECTOR cell (wide): spec.selector as "k=v,...", "<none>", "<error>". printers.go printDaemonSet (FormatLabelSelector).';

-- ---------------------------------------------------------------------
-- Jobs and CronJobs: printers.go printJob, hasJobCondition, printCronJob
-- ---------------------------------------------------------------------

-- _printer_job_condition(object jsonb, type text) -> boolean: whether the
-- first condition of that type is True.  printers.go hasJobCondition.
CREATE FUNCTION @extschema@._printer_job_condition(object jsonb, type text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT COALESCE((SELECT cond->>'status' = 'True'
                   FROM jsonb_array_elements(@extschema@._printer_array(object->'status'->'conditions')) WITH ORDINALITY AS c(cond, o)
                   WHERE cond->>'type' = type ORDER BY o LIMIT 1), false)
$$;
COMMENT ON FUNCTION @extschema@._printer_job_condition(jsonb, text) IS
'Whether the first Job condition of that type is True. printers.go hasJobCondition.';

-- job_status(object jsonb) -> text: STATUS: Complete, Failed, Terminating,
-- Suspended, FailureTarget or Running, in that precedence.  printers.go
-- printJob (current release; 1.20 has no STATUS column).
CREATE FUNCTION @extschema@.job_status(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE WHEN @extschema@._printer_job_condition(object, 'Complete') THEN 'Complete'
              WHEN @extschema@._printer_job_condition(object, 'Failed') THEN 'Failed'
              WHEN object->'metadata'->>'deletionTimestamp' IS NOT NULL THEN 'Terminating'
              WHEN @extschema@._printer_job_condition(object, 'Suspended') THEN 'Suspended'
              WHEN @extschema@._printer_job_condition(object, 'FailureTarget') THEN 'FailureTarget'
              ELSE 'Running' END
$$;
COMMENT ON FUNCTION @extschema@.job_status(jsonb) IS
'Job STATUS cell: Complete/Failed/Terminating/Suspended/FailureTarget/Running. printers.go printJob (current release).';

-- job_completions(object jsonb) -> text: COMPLETIONS, "succeeded/completions",
-- or without completions "succeeded/1", "succeeded/1 of parallelism" when
-- parallelism > 1.  printers.go printJob.
CREATE FUNCTION @extschema@.job_completions(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT COALESCE(@extschema@._printer_int(object->'status'->'succeeded'), 0) || '/' ||
         CASE WHEN jsonb_typeof(object->'spec'->'completions') = 'number' THEN (object->'spec'->>'completions')
              WHEN COALESCE(@extschema@._printer_int(object->'spec'->'parallelism'), 0) > 1 THEN '1 of ' || @extschema@._printer_int(object->'spec'->'parallelism')
              ELSE '1' END
$$;
COMMENT ON FUNCTION @extschema@.job_completions(jsonb) IS
'Job COMPLETIONS cell "1/1", "0/1 of 3". printers.go printJob.';

-- job_start_time(object jsonb) -> timestamptz: status.startTime, where
-- DURATION starts (NULL: DURATION is "").  printers.go printJob.
CREATE FUNCTION @extschema@.job_start_time(object jsonb) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._printer_time(object->'status'->>'startTime') $$;
COMMENT ON FUNCTION @extschema@.job_start_time(jsonb) IS
'Job status.startTime, where DURATION starts. printers.go printJob.';

-- job_completion_time(object jsonb) -> timestamptz: status.completionTime,
-- where DURATION ends (NULL: it runs up to now).  printers.go printJob.
CREATE FUNCTION @extschema@.job_completion_time(object jsonb) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._printer_time(object->'status'->>'completionTime') $$;
COMMENT ON FUNCTION @extschema@.job_completion_time(jsonb) IS
'Job status.completionTime, where DURATION ends (NULL while running). printers.go printJob.';

-- job_duration(object jsonb, at timestamptz) -> text: DURATION at instant
-- `at`: "" before the start, completion - start once complete, else
-- at - start.  printers.go printJob.  A view passes now().
CREATE FUNCTION @extschema@.job_duration(object jsonb, at timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE WHEN @extschema@.job_start_time(object) IS NULL THEN ''
              ELSE @extschema@.human_duration(COALESCE(@extschema@.job_completion_time(object), at) - @extschema@.job_start_time(object)) END
$$;
COMMENT ON FUNCTION @extschema@.job_duration(jsonb, timestamptz) IS
'Job DURATION cell at instant at (a view passes now()). printers.go printJob.';

-- job_containers(object jsonb) -> text: CONTAINERS (wide), the names of the
-- pod template's containers joined with ",".  printers.go printJob
-- (layoutContainerCells).
CREATE FUNCTION @extschema@.job_containers(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._printer_container_cells(object->'spec'->'template'->'spec'->'containers', 'name') $$;
COMMENT ON FUNCTION @extschema@.job_containers(jsonb) IS
'Job CONTAINERS cell (wide): container names joined with ",". printers.go printJob.';

-- job_images(object jsonb) -> text: IMAGES (wide), the images of the pod
-- template's containers joined with ",".  printers.go printJob
-- (layoutContainerCells).
CREATE FUNCTION @extschema@.job_images(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._printer_container_cells(object->'spec'->'template'->'spec'->'containers', 'image') $$;
COMMENT ON FUNCTION @extschema@.job_images(jsonb) IS
'Job IMAGES cell (wide): container images joined with ",". printers.go printJob.';

-- job_selector(object jsonb) -> text: SELECTOR (wide), spec.selector as
-- "k=v,k in (a,b),...", "<none>" for a nil or empty selector, "<error>" for
-- an invalid one.  printers.go printJob (metav1.FormatLabelSelector).
CREATE FUNCTION @extschema@.job_selector(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._printer_format_label_selector(object->'spec'->'selector') $$;
COMMENT ON FUNCTION @extschema@.job_selector(jsonb) IS
'Job SELECTOR cell (wide): spec.selector as "k=v,...", "<none>", "<error>". printers.go printJob (FormatLabelSelector).';

-- cronjob_schedule(object jsonb) -> text: SCHEDULE, spec.schedule.
-- printers.go printCronJob.
CREATE FUNCTION @extschema@.cronjob_schedule(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(object->'spec'->>'schedule', '') $$;
COMMENT ON FUNCTION @extschema@.cronjob_schedule(jsonb) IS
'CronJob SCHEDULE cell. printers.go printCronJob.';

-- cronjob_timezone(object jsonb) -> text: TIMEZONE, spec.timeZone,
-- "<none>".  printers.go printCronJob (current release; not in 1.20).
CREATE FUNCTION @extschema@.cronjob_timezone(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(object->'spec'->>'timeZone', '<none>') $$;
COMMENT ON FUNCTION @extschema@.cronjob_timezone(jsonb) IS
'CronJob TIMEZONE cell or "<none>". printers.go printCronJob (current release).';

-- cronjob_suspend(object jsonb) -> text: SUSPEND, "True", "False" or
-- "<unset>" (the cell is this text though the column says boolean).
-- printers.go printCronJob (printBoolPtr).
CREATE FUNCTION @extschema@.cronjob_suspend(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE WHEN jsonb_typeof(object->'spec'->'suspend') = 'boolean'
              THEN CASE WHEN @extschema@._printer_bool(object->'spec'->'suspend') THEN 'True' ELSE 'False' END
              ELSE '<unset>' END
$$;
COMMENT ON FUNCTION @extschema@.cronjob_suspend(jsonb) IS
'CronJob SUSPEND cell "True"/"False"/"<unset>". printers.go printCronJob (printBoolPtr).';

-- cronjob_active(object jsonb) -> bigint: ACTIVE, len(status.active).
-- printers.go printCronJob.
CREATE FUNCTION @extschema@.cronjob_active(object jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._printer_count(object->'status'->'active')::bigint $$;
COMMENT ON FUNCTION @extschema@.cronjob_active(jsonb) IS
'CronJob ACTIVE cell: number of active jobs. printers.go printCronJob.';

-- cronjob_last_schedule(object jsonb) -> timestamptz:
-- status.lastScheduleTime, what LAST SCHEDULE is computed from (NULL:
-- "<none>").  printers.go printCronJob.
CREATE FUNCTION @extschema@.cronjob_last_schedule(object jsonb) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._printer_time(object->'status'->>'lastScheduleTime') $$;
COMMENT ON FUNCTION @extschema@.cronjob_last_schedule(jsonb) IS
'CronJob status.lastScheduleTime, what LAST SCHEDULE is computed from. printers.go printCronJob.';

-- cronjob_last_schedule_text(object jsonb, at timestamptz) -> text: LAST
-- SCHEDULE at instant `at`, "<none>" when never scheduled.  printers.go
-- printCronJob.  A view passes now().
CREATE FUNCTION @extschema@.cronjob_last_schedule_text(object jsonb, at timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE WHEN object->'status'->>'lastScheduleTime' IS NULL THEN '<none>'
              ELSE @extschema@.translate_timestamp_since(@extschema@.cronjob_last_schedule(object), at) END
$$;
COMMENT ON FUNCTION @extschema@.cronjob_last_schedule_text(jsonb, timestamptz) IS
'CronJob LAST SCHEDULE cell at instant at, "<none>" (a view passes now()). printers.go printCronJob.';

-- cronjob_containers(object jsonb) -> text: CONTAINERS (wide), the names of
-- the job template's pod template's containers joined with ",".
-- printers.go printCronJob (layoutContainerCells).
CREATE FUNCTION @extschema@.cronjob_containers(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._printer_container_cells(object->'spec'->'jobTemplate'->'spec'->'template'->'spec'->'containers', 'name') $$;
COMMENT ON FUNCTION @extschema@.cronjob_containers(jsonb) IS
'CronJob CONTAINERS cell (wide): container names joined with ",". printers.go printCronJob.';

-- cronjob_images(object jsonb) -> text: IMAGES (wide), the images of the
-- job template's pod template's containers joined with ",".  printers.go
-- printCronJob (layoutContainerCells).
CREATE FUNCTION @extschema@.cronjob_images(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._printer_container_cells(object->'spec'->'jobTemplate'->'spec'->'template'->'spec'->'containers', 'image') $$;
COMMENT ON FUNCTION @extschema@.cronjob_images(jsonb) IS
'CronJob IMAGES cell (wide): container images joined with ",". printers.go printCronJob.';

-- cronjob_selector(object jsonb) -> text: SELECTOR (wide),
-- spec.jobTemplate.spec.selector as "k=v,k in (a,b),...", "<none>" for a
-- nil or empty selector, "<error>" for an invalid one.  printers.go
-- printCronJob (metav1.FormatLabelSelector).
CREATE FUNCTION @extschema@.cronjob_selector(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._printer_format_label_selector(object->'spec'->'jobTemplate'->'spec'->'selector') $$;
COMMENT ON FUNCTION @extschema@.cronjob_selector(jsonb) IS
'CronJob SELECTOR cell (wide): spec.jobTemplate.spec.selector as "k=v,...", "<none>", "<error>". printers.go printCronJob (FormatLabelSelector).';

-- ---------------------------------------------------------------------
-- Services: printers.go printService, getServiceExternalIP, makePortString
-- ---------------------------------------------------------------------

-- service_type(object jsonb) -> text: TYPE, spec.type.
-- printers.go printService.
CREATE FUNCTION @extschema@.service_type(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(object->'spec'->>'type', '') $$;
COMMENT ON FUNCTION @extschema@.service_type(jsonb) IS
'Service TYPE cell. printers.go printService.';

-- service_cluster_ip(object jsonb) -> text: CLUSTER-IP, spec.clusterIPs[0]
-- ("None" for a headless service), "<none>".  An object written before
-- clusterIPs existed (< 1.20) has only spec.clusterIP, which the API server
-- defaults into clusterIPs when it reads it: taken here the same way.
-- printers.go printService.
CREATE FUNCTION @extschema@.service_cluster_ip(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE WHEN @extschema@._printer_count(object->'spec'->'clusterIPs') > 0 THEN COALESCE(object->'spec'->'clusterIPs'->>0, '')
              ELSE COALESCE(NULLIF(object->'spec'->>'clusterIP', ''), '<none>') END
$$;
COMMENT ON FUNCTION @extschema@.service_cluster_ip(jsonb) IS
'Service CLUSTER-IP cell: clusterIPs[0] or "<none>". printers.go printService.';

-- service_external_ip(object jsonb, wide boolean DEFAULT true) -> text:
-- EXTERNAL-IP: ClusterIP/NodePort: spec.externalIPs joined or "<none>";
-- LoadBalancer: the load balancer's points then the externalIPs, or
-- "<pending>"; ExternalName: spec.externalName; "<unknown>" otherwise.
-- wide => false clips the load balancer's points as the client-side
-- printer did; the API server's Table is wide.  printers.go
-- getServiceExternalIP.
CREATE FUNCTION @extschema@.service_external_ip(object jsonb, wide boolean DEFAULT true) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE COALESCE(object->'spec'->>'type', '')
    WHEN 'ClusterIP' THEN COALESCE(ext, '<none>')
    WHEN 'NodePort' THEN COALESCE(ext, '<none>')
    WHEN 'LoadBalancer' THEN
      CASE WHEN ext IS NOT NULL THEN CASE WHEN lb <> '' THEN lb || ',' || ext ELSE ext END
           WHEN lb <> '' THEN lb
           ELSE '<pending>' END
    WHEN 'ExternalName' THEN COALESCE(object->'spec'->>'externalName', '')
    ELSE '<unknown>' END
  FROM (SELECT (SELECT string_agg(e, ',' ORDER BY o)
                FROM jsonb_array_elements_text(@extschema@._printer_array(object->'spec'->'externalIPs')) WITH ORDINALITY AS x(e, o)) AS ext,
               @extschema@._printer_lb_status(object->'status'->'loadBalancer', wide) AS lb) s
$$;
COMMENT ON FUNCTION @extschema@.service_external_ip(jsonb, boolean) IS
'Service EXTERNAL-IP cell ("<none>", "<pending>", LB points + externalIPs). wide => false clips as client-side kubectl did. printers.go getServiceExternalIP.';

-- service_ports(object jsonb) -> text: PORT(S), "port/protocol" or
-- "port:nodePort/protocol" per port, joined with ","; "<none>".
-- printers.go makePortString.
CREATE FUNCTION @extschema@.service_ports(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT COALESCE(NULLIF(string_agg(
           COALESCE(@extschema@._printer_int(p->'port'), 0)
           || CASE WHEN COALESCE(@extschema@._printer_int(p->'nodePort'), 0) > 0 THEN ':' || @extschema@._printer_int(p->'nodePort') ELSE '' END
           || '/' || COALESCE(p->>'protocol', ''), ',' ORDER BY o), ''), '<none>')
  FROM jsonb_array_elements(@extschema@._printer_array(object->'spec'->'ports')) WITH ORDINALITY AS x(p, o)
$$;
COMMENT ON FUNCTION @extschema@.service_ports(jsonb) IS
'Service PORT(S) cell "80/TCP,443:30443/TCP" or "<none>". printers.go makePortString.';

-- service_selector(object jsonb) -> text: SELECTOR, spec.selector as
-- "k=v,...", "<none>".  printers.go printService (wide).
CREATE FUNCTION @extschema@.service_selector(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._printer_format_labels(object->'spec'->'selector') $$;
COMMENT ON FUNCTION @extschema@.service_selector(jsonb) IS
'Service SELECTOR cell "k=v,..." or "<none>". printers.go printService (wide).';

-- ---------------------------------------------------------------------
-- Endpoints: printers.go formatEndpoints
-- ---------------------------------------------------------------------

-- endpoints_endpoints(object jsonb) -> text: ENDPOINTS, the first three of
-- "ip:port" (ip alone for a subset without ports; [ipv6]:port) over the
-- subsets and their ports, then " + N more..."; "<none>" without subsets.
-- printers.go formatEndpoints(endpoints, nil).
CREATE FUNCTION @extschema@.endpoints_endpoints(object jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  list text[] := '{}';
  max_shown constant integer := 3;
  more boolean := false;
  total bigint := 0;
  ss jsonb;
  port jsonb;
  addr jsonb;
  ip text;
BEGIN
  IF @extschema@._printer_count(object->'subsets') = 0 THEN
    RETURN '<none>';
  END IF;
  FOR ss IN SELECT e FROM jsonb_array_elements(@extschema@._printer_array(object->'subsets')) WITH ORDINALITY AS x(e, o) ORDER BY o LOOP
    IF @extschema@._printer_count(ss->'ports') = 0 THEN
      -- It's possible to have headless services with no ports.
      total := total + @extschema@._printer_count(ss->'addresses');
      IF cardinality(list) >= max_shown THEN
        -- shown all it shows: the rest is counted, never expanded again
        -- (a port per address would be quadratic)
        more := more OR @extschema@._printer_count(ss->'addresses') > 0;
        CONTINUE;
      END IF;
      FOR addr IN SELECT e FROM jsonb_array_elements(@extschema@._printer_array(ss->'addresses')) WITH ORDINALITY AS y(e, o) ORDER BY o LOOP
        IF cardinality(list) = max_shown THEN
          more := true;
          EXIT;
        END IF;
        list := list || COALESCE(addr->>'ip', '');
      END LOOP;
      CONTINUE;
    END IF;
    FOR port IN SELECT e FROM jsonb_array_elements(@extschema@._printer_array(ss->'ports')) WITH ORDINALITY AS y(e, o) ORDER BY o LOOP
      total := total + @extschema@._printer_count(ss->'addresses');
      IF cardinality(list) >= max_shown THEN
        more := more OR @extschema@._printer_count(ss->'addresses') > 0;
        CONTINUE;
      END IF;
      FOR addr IN SELECT e FROM jsonb_array_elements(@extschema@._printer_array(ss->'addresses')) WITH ORDINALITY AS z(e, o) ORDER BY o LOOP
        IF cardinality(list) = max_shown THEN
          more := true;
          EXIT;
        END IF;
        ip := COALESCE(addr->>'ip', '');
        -- net.JoinHostPort brackets a host that holds a colon.
        list := list || (CASE WHEN strpos(ip, ':') > 0 THEN '[' || ip || ']' ELSE ip END
                         || ':' || COALESCE(@extschema@._printer_int(port->'port'), 0));
      END LOOP;
    END LOOP;
  END LOOP;
  IF more THEN
    RETURN array_to_string(list, ',') || ' + ' || (total - max_shown) || ' more...';
  END IF;
  RETURN array_to_string(list, ',');
END
$$;
COMMENT ON FUNCTION @extschema@.endpoints_endpoints(jsonb) IS
'Endpoints ENDPOINTS cell "10.0.0.1:80,... + N more..." or "<none>". printers.go formatEndpoints.';

-- ---------------------------------------------------------------------
-- Ingresses: printers.go printIngress, formatHosts, formatPorts,
-- ingressLoadBalancerStatusStringer
-- ---------------------------------------------------------------------

-- ingress_class(object jsonb) -> text: CLASS, spec.ingressClassName,
-- "<none>".  printers.go printIngress.
CREATE FUNCTION @extschema@.ingress_class(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(object->'spec'->>'ingressClassName', '<none>') $$;
COMMENT ON FUNCTION @extschema@.ingress_class(jsonb) IS
'Ingress CLASS cell: spec.ingressClassName or "<none>". printers.go printIngress.';

-- ingress_hosts(object jsonb) -> text: HOSTS, the first three non-empty
-- rule hosts joined with ",", then " + N more..." (N counts every rule past
-- the third); "*" without hosts.  printers.go formatHosts.
CREATE FUNCTION @extschema@.ingress_hosts(object jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  list text[] := '{}';
  more boolean := false;
  rules jsonb := @extschema@._printer_array(object->'spec'->'rules');
  rule jsonb;
BEGIN
  FOR rule IN SELECT e FROM jsonb_array_elements(rules) WITH ORDINALITY AS x(e, o) ORDER BY o LOOP
    IF cardinality(list) = 3 THEN
      more := true;
    END IF;
    IF NOT more AND COALESCE(rule->>'host', '') <> '' THEN
      list := list || (rule->>'host');
    END IF;
  END LOOP;
  IF cardinality(list) = 0 THEN
    RETURN '*';
  END IF;
  IF more THEN
    RETURN array_to_string(list, ',') || ' + ' || (jsonb_array_length(rules) - 3) || ' more...';
  END IF;
  RETURN array_to_string(list, ',');
END
$$;
COMMENT ON FUNCTION @extschema@.ingress_hosts(jsonb) IS
'Ingress HOSTS cell "a,b,c + N more..." or "*". printers.go formatHosts.';

-- ingress_address(object jsonb, wide boolean DEFAULT true) -> text:
-- ADDRESS, the load balancer's points (IP, else hostname) sorted and joined
-- with ","; wide => false clips past 16 characters.  printers.go
-- ingressLoadBalancerStatusStringer (the API server's Table is wide).
CREATE FUNCTION @extschema@.ingress_address(object jsonb, wide boolean DEFAULT true) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._printer_lb_status(object->'status'->'loadBalancer', wide) $$;
COMMENT ON FUNCTION @extschema@.ingress_address(jsonb, boolean) IS
'Ingress ADDRESS cell (LB points sorted, ","). printers.go ingressLoadBalancerStatusStringer.';

-- ingress_ports(object jsonb) -> text: PORTS, "80, 443" with TLS, else
-- "80".  printers.go formatPorts.
CREATE FUNCTION @extschema@.ingress_ports(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT CASE WHEN @extschema@._printer_count(object->'spec'->'tls') <> 0 THEN '80, 443' ELSE '80' END $$;
COMMENT ON FUNCTION @extschema@.ingress_ports(jsonb) IS
'Ingress PORTS cell "80" or "80, 443". printers.go formatPorts.';

-- ---------------------------------------------------------------------
-- ConfigMaps, Secrets, ServiceAccounts: printConfigMap, printSecret,
-- printServiceAccount
-- ---------------------------------------------------------------------

-- configmap_data(object jsonb) -> bigint: DATA, len(data) + len(binaryData).
-- printers.go printConfigMap.
CREATE FUNCTION @extschema@.configmap_data(object jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT (@extschema@._printer_count(object->'data') + @extschema@._printer_count(object->'binaryData'))::bigint $$;
COMMENT ON FUNCTION @extschema@.configmap_data(jsonb) IS
'ConfigMap DATA cell: number of data + binaryData keys. printers.go printConfigMap.';

-- secret_type(object jsonb) -> text: TYPE, type.  printers.go printSecret.
CREATE FUNCTION @extschema@.secret_type(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(object->>'type', '') $$;
COMMENT ON FUNCTION @extschema@.secret_type(jsonb) IS
'Secret TYPE cell. printers.go printSecret.';

-- secret_data(object jsonb) -> bigint: DATA, len(data).  printers.go
-- printSecret.
CREATE FUNCTION @extschema@.secret_data(object jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._printer_count(object->'data')::bigint $$;
COMMENT ON FUNCTION @extschema@.secret_data(jsonb) IS
'Secret DATA cell: number of data keys. printers.go printSecret.';

-- serviceaccount_secrets(object jsonb) -> bigint: SECRETS, len(secrets).
-- printers.go printServiceAccount.
CREATE FUNCTION @extschema@.serviceaccount_secrets(object jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._printer_count(object->'secrets')::bigint $$;
COMMENT ON FUNCTION @extschema@.serviceaccount_secrets(jsonb) IS
'ServiceAccount SECRETS cell: number of secrets references. printers.go printServiceAccount.';

-- ---------------------------------------------------------------------
-- PersistentVolumes and claims: printPersistentVolume,
-- printPersistentVolumeClaim
-- ---------------------------------------------------------------------

-- persistentvolume_capacity(object jsonb) -> text: CAPACITY,
-- spec.capacity.storage, "0" when unset.  printers.go printPersistentVolume.
CREATE FUNCTION @extschema@.persistentvolume_capacity(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(object->'spec'->'capacity'->>'storage', '0') $$;
COMMENT ON FUNCTION @extschema@.persistentvolume_capacity(jsonb) IS
'PV CAPACITY cell: spec.capacity.storage ("0" unset). printers.go printPersistentVolume.';

-- persistentvolume_access_modes(object jsonb) -> text: ACCESS MODES, "RWO".
-- printers.go printPersistentVolume.
CREATE FUNCTION @extschema@.persistentvolume_access_modes(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._printer_access_modes(object->'spec'->'accessModes') $$;
COMMENT ON FUNCTION @extschema@.persistentvolume_access_modes(jsonb) IS
'PV ACCESS MODES cell "RWO,ROX,RWX,RWOP". printers.go printPersistentVolume.';

-- persistentvolume_reclaim_policy(object jsonb) -> text: RECLAIM POLICY.
-- printers.go printPersistentVolume.
CREATE FUNCTION @extschema@.persistentvolume_reclaim_policy(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(object->'spec'->>'persistentVolumeReclaimPolicy', '') $$;
COMMENT ON FUNCTION @extschema@.persistentvolume_reclaim_policy(jsonb) IS
'PV RECLAIM POLICY cell. printers.go printPersistentVolume.';

-- persistentvolume_status(object jsonb) -> text: STATUS, status.phase or
-- "Terminating" once deleted.  printers.go printPersistentVolume.
CREATE FUNCTION @extschema@.persistentvolume_status(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE WHEN object->'metadata'->>'deletionTimestamp' IS NOT NULL THEN 'Terminating'
              ELSE COALESCE(object->'status'->>'phase', '') END
$$;
COMMENT ON FUNCTION @extschema@.persistentvolume_status(jsonb) IS
'PV STATUS cell: phase or Terminating. printers.go printPersistentVolume.';

-- persistentvolume_claim(object jsonb) -> text: CLAIM, "namespace/name" of
-- spec.claimRef, "" without one.  printers.go printPersistentVolume.
CREATE FUNCTION @extschema@.persistentvolume_claim(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE WHEN jsonb_typeof(object->'spec'->'claimRef') = 'object'
              THEN COALESCE(object->'spec'->'claimRef'->>'namespace', '') || '/' || COALESCE(object->'spec'->'claimRef'->>'name', '')
              ELSE '' END
$$;
COMMENT ON FUNCTION @extschema@.persistentvolume_claim(jsonb) IS
'PV CLAIM cell "namespace/name" or "". printers.go printPersistentVolume.';

-- persistentvolume_storageclass(object jsonb) -> text: STORAGECLASS, the
-- volume.beta.kubernetes.io/storage-class annotation, else
-- spec.storageClassName.  pkg/apis/core/helper GetPersistentVolumeClass.
CREATE FUNCTION @extschema@.persistentvolume_storageclass(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT COALESCE(object->'metadata'->'annotations'->>'volume.beta.kubernetes.io/storage-class',
                  object->'spec'->>'storageClassName', '')
$$;
COMMENT ON FUNCTION @extschema@.persistentvolume_storageclass(jsonb) IS
'PV STORAGECLASS cell (beta annotation first). pkg/apis/core/helper GetPersistentVolumeClass.';

-- persistentvolume_volumeattributesclass(object jsonb) -> text:
-- VOLUMEATTRIBUTESCLASS, spec.volumeAttributesClassName, "<unset>".
-- printers.go printPersistentVolume (current release; not in 1.20).
CREATE FUNCTION @extschema@.persistentvolume_volumeattributesclass(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(object->'spec'->>'volumeAttributesClassName', '<unset>') $$;
COMMENT ON FUNCTION @extschema@.persistentvolume_volumeattributesclass(jsonb) IS
'PV VOLUMEATTRIBUTESCLASS cell or "<unset>". printers.go printPersistentVolume (current release).';

-- persistentvolume_reason(object jsonb) -> text: REASON, status.reason.
-- printers.go printPersistentVolume.
CREATE FUNCTION @extschema@.persistentvolume_reason(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(object->'status'->>'reason', '') $$;
COMMENT ON FUNCTION @extschema@.persistentvolume_reason(jsonb) IS
'PV REASON cell: status.reason. printers.go printPersistentVolume.';

-- persistentvolume_volume_mode(object jsonb) -> text: VOLUMEMODE,
-- spec.volumeMode, "<unset>".  printers.go printPersistentVolume (wide).
CREATE FUNCTION @extschema@.persistentvolume_volume_mode(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(object->'spec'->>'volumeMode', '<unset>') $$;
COMMENT ON FUNCTION @extschema@.persistentvolume_volume_mode(jsonb) IS
'PV VOLUMEMODE cell or "<unset>". printers.go printPersistentVolume (wide).';

-- persistentvolumeclaim_status(object jsonb) -> text: STATUS, status.phase
-- or "Terminating" once deleted.  printers.go printPersistentVolumeClaim.
CREATE FUNCTION @extschema@.persistentvolumeclaim_status(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE WHEN object->'metadata'->>'deletionTimestamp' IS NOT NULL THEN 'Terminating'
              ELSE COALESCE(object->'status'->>'phase', '') END
$$;
COMMENT ON FUNCTION @extschema@.persistentvolumeclaim_status(jsonb) IS
'PVC STATUS cell: phase or Terminating. printers.go printPersistentVolumeClaim.';

-- persistentvolumeclaim_volume(object jsonb) -> text: VOLUME,
-- spec.volumeName.  printers.go printPersistentVolumeClaim.
CREATE FUNCTION @extschema@.persistentvolumeclaim_volume(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(object->'spec'->>'volumeName', '') $$;
COMMENT ON FUNCTION @extschema@.persistentvolumeclaim_volume(jsonb) IS
'PVC VOLUME cell: spec.volumeName. printers.go printPersistentVolumeClaim.';

-- persistentvolumeclaim_capacity(object jsonb) -> text: CAPACITY,
-- status.capacity.storage ("0" unset) once bound to a volume, else "".
-- printers.go printPersistentVolumeClaim.
CREATE FUNCTION @extschema@.persistentvolumeclaim_capacity(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE WHEN COALESCE(object->'spec'->>'volumeName', '') <> ''
              THEN COALESCE(object->'status'->'capacity'->>'storage', '0') ELSE '' END
$$;
COMMENT ON FUNCTION @extschema@.persistentvolumeclaim_capacity(jsonb) IS
'PVC CAPACITY cell (status capacity once a volume is named, else ""). printers.go printPersistentVolumeClaim.';

-- persistentvolumeclaim_access_modes(object jsonb) -> text: ACCESS MODES,
-- status.accessModes once bound to a volume, else "".  printers.go
-- printPersistentVolumeClaim.
CREATE FUNCTION @extschema@.persistentvolumeclaim_access_modes(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE WHEN COALESCE(object->'spec'->>'volumeName', '') <> ''
              THEN @extschema@._printer_access_modes(object->'status'->'accessModes') ELSE '' END
$$;
COMMENT ON FUNCTION @extschema@.persistentvolumeclaim_access_modes(jsonb) IS
'PVC ACCESS MODES cell (status modes once a volume is named, else ""). printers.go printPersistentVolumeClaim.';

-- persistentvolumeclaim_storageclass(object jsonb) -> text: STORAGECLASS,
-- the beta annotation, else spec.storageClassName, else "".
-- pkg/apis/core/helper GetPersistentVolumeClaimClass.
CREATE FUNCTION @extschema@.persistentvolumeclaim_storageclass(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT COALESCE(object->'metadata'->'annotations'->>'volume.beta.kubernetes.io/storage-class',
                  object->'spec'->>'storageClassName', '')
$$;
COMMENT ON FUNCTION @extschema@.persistentvolumeclaim_storageclass(jsonb) IS
'PVC STORAGECLASS cell (beta annotation first). pkg/apis/core/helper GetPersistentVolumeClaimClass.';

-- persistentvolumeclaim_volumeattributesclass(object jsonb) -> text:
-- VOLUMEATTRIBUTESCLASS, spec.volumeAttributesClassName, "<unset>".
-- printers.go printPersistentVolumeClaim (current release; not in 1.20).
CREATE FUNCTION @extschema@.persistentvolumeclaim_volumeattributesclass(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(object->'spec'->>'volumeAttributesClassName', '<unset>') $$;
COMMENT ON FUNCTION @extschema@.persistentvolumeclaim_volumeattributesclass(jsonb) IS
'PVC VOLUMEATTRIBUTESCLASS cell or "<unset>". printers.go printPersistentVolumeClaim (current release).';

-- persistentvolumeclaim_volume_mode(object jsonb) -> text: VOLUMEMODE,
-- spec.volumeMode, "<unset>".  printers.go printPersistentVolumeClaim (wide).
CREATE FUNCTION @extschema@.persistentvolumeclaim_volume_mode(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(object->'spec'->>'volumeMode', '<unset>') $$;
COMMENT ON FUNCTION @extschema@.persistentvolumeclaim_volume_mode(jsonb) IS
'PVC VOLUMEMODE cell or "<unset>". printers.go printPersistentVolumeClaim (wide).';

-- ---------------------------------------------------------------------
-- Events (core/v1 Event JSON): printers.go printEvent, formatEventSource
-- ---------------------------------------------------------------------

-- event_first_seen(object jsonb) -> timestamptz: what FIRST SEEN is
-- computed from: firstTimestamp, else eventTime; NULL: "<unknown>".
-- printers.go printEvent.
CREATE FUNCTION @extschema@.event_first_seen(object jsonb) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE WHEN object->>'firstTimestamp' IS NOT NULL THEN @extschema@._printer_time(object->>'firstTimestamp')
              ELSE @extschema@._printer_time(object->>'eventTime') END
$$;
COMMENT ON FUNCTION @extschema@.event_first_seen(jsonb) IS
'Event time FIRST SEEN is computed from: firstTimestamp, else eventTime. printers.go printEvent.';

-- event_last_seen(object jsonb) -> timestamptz: what LAST SEEN is computed
-- from: series.lastObservedTime for a series, else lastTimestamp, else
-- FIRST SEEN's time; NULL: "<unknown>".  printers.go printEvent.
CREATE FUNCTION @extschema@.event_last_seen(object jsonb) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE WHEN jsonb_typeof(object->'series') = 'object' THEN @extschema@._printer_time(object->'series'->>'lastObservedTime')
              WHEN object->>'lastTimestamp' IS NOT NULL THEN @extschema@._printer_time(object->>'lastTimestamp')
              ELSE @extschema@.event_first_seen(object) END
$$;
COMMENT ON FUNCTION @extschema@.event_last_seen(jsonb) IS
'Event time LAST SEEN is computed from: series.lastObservedTime, else lastTimestamp, else first seen. printers.go printEvent.';

-- event_last_seen_text(object jsonb, at timestamptz) -> text: LAST SEEN at
-- instant `at` ("2d", "<unknown>").  printers.go printEvent.
CREATE FUNCTION @extschema@.event_last_seen_text(object jsonb, at timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.translate_timestamp_since(@extschema@.event_last_seen(object), at) $$;
COMMENT ON FUNCTION @extschema@.event_last_seen_text(jsonb, timestamptz) IS
'Event LAST SEEN cell at instant at (a view passes now()). printers.go printEvent.';

-- event_first_seen_text(object jsonb, at timestamptz) -> text: FIRST SEEN
-- at instant `at`.  printers.go printEvent (wide).
CREATE FUNCTION @extschema@.event_first_seen_text(object jsonb, at timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.translate_timestamp_since(@extschema@.event_first_seen(object), at) $$;
COMMENT ON FUNCTION @extschema@.event_first_seen_text(jsonb, timestamptz) IS
'Event FIRST SEEN cell at instant at (a view passes now()). printers.go printEvent (wide).';

-- event_type(object jsonb) -> text: TYPE (Normal, Warning).
-- printers.go printEvent.
CREATE FUNCTION @extschema@.event_type(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(object->>'type', '') $$;
COMMENT ON FUNCTION @extschema@.event_type(jsonb) IS
'Event TYPE cell. printers.go printEvent.';

-- event_reason(object jsonb) -> text: REASON.  printers.go printEvent.
CREATE FUNCTION @extschema@.event_reason(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(object->>'reason', '') $$;
COMMENT ON FUNCTION @extschema@.event_reason(jsonb) IS
'Event REASON cell. printers.go printEvent.';

-- event_object(object jsonb) -> text: OBJECT, "kind/name" of the involved
-- object, kind in lower case ("pod/web-1"; "node" without a name).
-- printers.go printEvent.
CREATE FUNCTION @extschema@.event_object(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT lower(COALESCE(object->'involvedObject'->>'kind', ''))
         || CASE WHEN COALESCE(object->'involvedObject'->>'name', '') <> '' THEN '/' || (object->'involvedObject'->>'name') ELSE '' END
$$;
COMMENT ON FUNCTION @extschema@.event_object(jsonb) IS
'Event OBJECT cell "kind/name" (kind lower-cased). printers.go printEvent.';

-- event_subobject(object jsonb) -> text: SUBOBJECT,
-- involvedObject.fieldPath.  printers.go printEvent (wide).
CREATE FUNCTION @extschema@.event_subobject(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(object->'involvedObject'->>'fieldPath', '') $$;
COMMENT ON FUNCTION @extschema@.event_subobject(jsonb) IS
'Event SUBOBJECT cell: involvedObject.fieldPath. printers.go printEvent (wide).';

-- event_source(object jsonb) -> text: SOURCE, "component, host" (the
-- component else reportingComponent, the host else reportingInstance; the
-- component alone without a host).  printers.go formatEventSource (wide).
CREATE FUNCTION @extschema@.event_source(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT component || CASE WHEN instance = '' THEN '' ELSE ', ' || instance END
  FROM (SELECT COALESCE(NULLIF(object->'source'->>'component', ''), object->>'reportingComponent', '') AS component,
               COALESCE(NULLIF(object->'source'->>'host', ''), object->>'reportingInstance', '') AS instance) s
$$;
COMMENT ON FUNCTION @extschema@.event_source(jsonb) IS
'Event SOURCE cell "component, host". printers.go formatEventSource (wide).';

-- event_message(object jsonb) -> text: MESSAGE, with leading and trailing
-- white space (Go unicode.IsSpace) removed.  printers.go printEvent.
CREATE FUNCTION @extschema@.event_message(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT btrim(COALESCE(object->>'message', ''),
               E' \t\n\r\f\x0B' || E'\u0085\u00A0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200A\u2028\u2029\u202F\u205F\u3000')
$$;
COMMENT ON FUNCTION @extschema@.event_message(jsonb) IS
'Event MESSAGE cell, white space trimmed (strings.TrimSpace). printers.go printEvent.';

-- event_count(object jsonb) -> bigint: COUNT, series.count for a series,
-- else count, else 1 (singleton events of the new API carry no count).
-- printers.go printEvent (1.20 prints series.count + 1).
CREATE FUNCTION @extschema@.event_count(object jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE WHEN jsonb_typeof(object->'series') = 'object' THEN COALESCE(@extschema@._printer_int(object->'series'->'count'), 0)
              WHEN COALESCE(@extschema@._printer_int(object->'count'), 0) = 0 THEN 1
              ELSE @extschema@._printer_int(object->'count') END
$$;
COMMENT ON FUNCTION @extschema@.event_count(jsonb) IS
'Event COUNT cell: series.count, count, or 1. printers.go printEvent (current release).';

-- ---------------------------------------------------------------------
-- HorizontalPodAutoscalers (autoscaling/v2 and v2beta2 JSON; autoscaling/v1's
-- targetCPUUtilizationPercentage read as the Resource cpu metric it converts
-- to): printers.go printHorizontalPodAutoscaler, formatHPAMetrics
-- ---------------------------------------------------------------------

-- horizontalpodautoscaler_reference(object jsonb) -> text: REFERENCE,
-- "Kind/name" of spec.scaleTargetRef.  printers.go
-- printHorizontalPodAutoscaler.
CREATE FUNCTION @extschema@.horizontalpodautoscaler_reference(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(object->'spec'->'scaleTargetRef'->>'kind', '') || '/' || COALESCE(object->'spec'->'scaleTargetRef'->>'name', '') $$;
COMMENT ON FUNCTION @extschema@.horizontalpodautoscaler_reference(jsonb) IS
'HPA REFERENCE cell "Kind/name". printers.go printHorizontalPodAutoscaler.';

-- _printer_hpa_v1_metrics(object jsonb) -> jsonb: an autoscaling/v1
-- HorizontalPodAutoscaler's metrics in the autoscaling/v2 shape, as
-- {"metrics": [...], "currentMetrics": [...]}: the ones kept in annotation
-- autoscaling.alpha.kubernetes.io/metrics (v2beta1-style MetricSpecs), then
-- spec.targetCPUUtilizationPercentage as a cpu Utilization metric; none at
-- all is cpu at 80%; current metrics from annotation
-- autoscaling.alpha.kubernetes.io/current-metrics when present, else
-- status.currentCPUUtilizationPercentage.  An annotation that is no JSON
-- list is ignored, as the API server's json.Unmarshal error is.
-- pkg/apis/autoscaling/v1/conversion.go
-- Convert_v1_HorizontalPodAutoscaler_To_autoscaling_HorizontalPodAutoscaler
-- and the Convert_v1_*MetricSource/*MetricStatus functions (1.20 and today
-- alike), which the printer sees the object through.
CREATE FUNCTION @extschema@._printer_hpa_v1_metrics(object jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  ann jsonb := object->'metadata'->'annotations';
  other jsonb;
  current jsonb;
  metrics jsonb := '[]';
  statuses jsonb := '[]';
  m jsonb;
  s jsonb;
  t text;
BEGIN
  IF jsonb_typeof(ann->'autoscaling.alpha.kubernetes.io/metrics') = 'string' THEN
    BEGIN
      other := (ann->>'autoscaling.alpha.kubernetes.io/metrics')::jsonb;
    EXCEPTION WHEN data_exception OR program_limit_exceeded THEN   -- no JSON, nested too deep
      other := NULL;
    END;
  END IF;
  IF jsonb_typeof(ann->'autoscaling.alpha.kubernetes.io/current-metrics') = 'string' THEN
    BEGIN
      current := (ann->>'autoscaling.alpha.kubernetes.io/current-metrics')::jsonb;
    EXCEPTION WHEN data_exception OR program_limit_exceeded THEN
      current := NULL;
    END;
  END IF;
  FOR m IN SELECT e FROM jsonb_array_elements(@extschema@._printer_array(other)) e LOOP
    t := m->>'type';
    metrics := metrics || jsonb_build_array(jsonb_strip_nulls(CASE t
      WHEN 'Resource' THEN jsonb_build_object('type', t, 'resource', jsonb_build_object(
        'name', m->'resource'->'name', 'target', jsonb_build_object(
          'type', CASE WHEN m->'resource'->'targetAverageUtilization' IS NULL THEN 'AverageValue' ELSE 'Utilization' END,
          'averageUtilization', m->'resource'->'targetAverageUtilization',
          'averageValue', m->'resource'->'targetAverageValue')))
      WHEN 'ContainerResource' THEN jsonb_build_object('type', t, 'containerResource', jsonb_build_object(
        'name', m->'containerResource'->'name', 'container', m->'containerResource'->'container',
        'target', jsonb_build_object(
          'type', CASE WHEN m->'containerResource'->'targetAverageUtilization' IS NULL THEN 'AverageValue' ELSE 'Utilization' END,
          'averageUtilization', m->'containerResource'->'targetAverageUtilization',
          'averageValue', m->'containerResource'->'targetAverageValue')))
      WHEN 'Pods' THEN jsonb_build_object('type', t, 'pods', jsonb_build_object(
        'metric', jsonb_build_object('name', m->'pods'->'metricName', 'selector', m->'pods'->'selector'),
        'target', jsonb_build_object('type', 'AverageValue', 'averageValue', m->'pods'->'targetAverageValue')))
      WHEN 'Object' THEN jsonb_build_object('type', t, 'object', jsonb_build_object(
        'describedObject', m->'object'->'target',
        'metric', jsonb_build_object('name', m->'object'->'metricName', 'selector', m->'object'->'selector'),
        'target', jsonb_build_object(
          'type', CASE WHEN m->'object'->'averageValue' IS NULL THEN 'Value' ELSE 'AverageValue' END,
          'value', m->'object'->'targetValue', 'averageValue', m->'object'->'averageValue')))
      WHEN 'External' THEN jsonb_build_object('type', t, 'external', jsonb_build_object(
        'metric', jsonb_build_object('name', m->'external'->'metricName', 'selector', m->'external'->'metricSelector'),
        'target', jsonb_build_object(
          'type', CASE WHEN m->'external'->'targetAverageValue' IS NULL THEN 'Value' ELSE 'AverageValue' END,
          'value', m->'external'->'targetValue', 'averageValue', m->'external'->'targetAverageValue')))
      ELSE jsonb_build_object('type', t) END));
  END LOOP;
  IF object->'spec'->'targetCPUUtilizationPercentage' IS NOT NULL
     AND jsonb_typeof(object->'spec'->'targetCPUUtilizationPercentage') <> 'null' THEN
    metrics := metrics || jsonb_build_array(jsonb_build_object('type', 'Resource', 'resource',
      jsonb_build_object('name', 'cpu', 'target', jsonb_build_object(
        'type', 'Utilization', 'averageUtilization', object->'spec'->'targetCPUUtilizationPercentage'))));
  END IF;
  IF jsonb_array_length(metrics) = 0 THEN
    metrics := '[{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]';
  END IF;
  IF jsonb_typeof(current) = 'array' THEN
    FOR s IN SELECT e FROM jsonb_array_elements(current) e LOOP
      t := s->>'type';
      statuses := statuses || jsonb_build_array(jsonb_strip_nulls(CASE t
        WHEN 'Resource' THEN jsonb_build_object('type', t, 'resource', jsonb_build_object(
          'name', s->'resource'->'name', 'current', jsonb_build_object(
            'averageUtilization', s->'resource'->'currentAverageUtilization',
            'averageValue', s->'resource'->'currentAverageValue')))
        WHEN 'ContainerResource' THEN jsonb_build_object('type', t, 'containerResource', jsonb_build_object(
          'name', s->'containerResource'->'name', 'container', s->'containerResource'->'container',
          'current', jsonb_build_object(
            'averageUtilization', s->'containerResource'->'currentAverageUtilization',
            'averageValue', s->'containerResource'->'currentAverageValue')))
        WHEN 'Pods' THEN jsonb_build_object('type', t, 'pods', jsonb_build_object(
          'metric', jsonb_build_object('name', s->'pods'->'metricName'),
          'current', jsonb_build_object('averageValue', s->'pods'->'currentAverageValue')))
        WHEN 'Object' THEN jsonb_build_object('type', t, 'object', jsonb_build_object(
          'describedObject', s->'object'->'target',
          'metric', jsonb_build_object('name', s->'object'->'metricName'),
          'current', jsonb_build_object('value', s->'object'->'currentValue',
                                        'averageValue', s->'object'->'averageValue')))
        WHEN 'External' THEN jsonb_build_object('type', t, 'external', jsonb_build_object(
          'metric', jsonb_build_object('name', s->'external'->'metricName'),
          'current', jsonb_build_object('value', s->'external'->'currentValue',
                                        'averageValue', s->'external'->'currentAverageValue')))
        ELSE jsonb_build_object('type', t) END));
    END LOOP;
  ELSIF object->'status'->'currentCPUUtilizationPercentage' IS NOT NULL
        AND jsonb_typeof(object->'status'->'currentCPUUtilizationPercentage') <> 'null' THEN
    statuses := jsonb_build_array(jsonb_build_object('type', 'Resource', 'resource',
      jsonb_build_object('name', 'cpu', 'current', jsonb_build_object(
        'averageUtilization', object->'status'->'currentCPUUtilizationPercentage'))));
  END IF;
  RETURN jsonb_build_object('metrics', metrics, 'currentMetrics', statuses);
END
$$;
COMMENT ON FUNCTION @extschema@._printer_hpa_v1_metrics(jsonb) IS
'An autoscaling/v1 HPA''s metrics (annotations, CPU target, default cpu 80%) in the autoscaling/v2 shape, as the API server converts them. pkg/apis/autoscaling/v1/conversion.go. Helper of the issue 35 printer functions.';

-- horizontalpodautoscaler_targets(object jsonb) -> text: TARGETS, per metric
-- "current/target" ("cpu: 50%/80%", "50m/100m (avg)", "<unknown>" for a
-- missing current value, "<auto>" for a missing utilization target,
-- "<unknown type>"), the first two joined with ", ", then " + N more...";
-- "<none>" without metrics.  Statuses are matched to specs by position, as
-- the printer does.  printers.go formatHPAMetrics (1.20 prints Resource
-- metrics without the "cpu: " prefix).
CREATE FUNCTION @extschema@.horizontalpodautoscaler_targets(object jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  specs jsonb := @extschema@._printer_array(object->'spec'->'metrics');
  statuses jsonb := @extschema@._printer_array(object->'status'->'currentMetrics');
  list text[] := '{}';
  spec jsonb;
  i integer;
  stat jsonb;
  src jsonb;
  cur text;
  target text;
  v1 jsonb;
BEGIN
  -- autoscaling/v1 (what watch('horizontalpodautoscalers') stores on a
  -- server whose preferred version it is): the metrics as the API server
  -- converts them before printing (_printer_hpa_v1_metrics)
  IF object->>'apiVersion' = 'autoscaling/v1'
     OR (object->'spec'->'metrics' IS NULL
         AND (object->'spec' ? 'targetCPUUtilizationPercentage'
              OR object->'metadata'->'annotations' ? 'autoscaling.alpha.kubernetes.io/metrics')) THEN
    v1 := @extschema@._printer_hpa_v1_metrics(object);
    specs := v1->'metrics';
    statuses := v1->'currentMetrics';
  END IF;
  IF jsonb_array_length(specs) = 0 THEN
    RETURN '<none>';
  END IF;
  FOR spec, i IN SELECT e, o - 1 FROM jsonb_array_elements(specs) WITH ORDINALITY AS x(e, o) LOOP
    stat := statuses->i;   -- NULL past the end
    CASE spec->>'type'
    WHEN 'External', 'Object' THEN
      src := CASE spec->>'type' WHEN 'External' THEN spec->'external' ELSE spec->'object' END;
      stat := CASE spec->>'type' WHEN 'External' THEN stat->'external' ELSE stat->'object' END;
      IF jsonb_typeof(stat) <> 'object' THEN stat := NULL; END IF;
      IF src->'target'->'averageValue' IS NOT NULL AND jsonb_typeof(src->'target'->'averageValue') <> 'null' THEN
        cur := '<unknown>';
        IF stat IS NOT NULL AND stat->'current'->'averageValue' IS NOT NULL AND jsonb_typeof(stat->'current'->'averageValue') <> 'null' THEN
          cur := @extschema@._printer_quantity(stat->'current'->'averageValue');
        END IF;
        list := list || (cur || '/' || @extschema@._printer_quantity(src->'target'->'averageValue') || ' (avg)');
      ELSE
        cur := '<unknown>';
        IF stat IS NOT NULL THEN
          cur := @extschema@._printer_quantity(stat->'current'->'value');
        END IF;
        list := list || (cur || '/' || @extschema@._printer_quantity(src->'target'->'value'));
      END IF;
    WHEN 'Pods' THEN
      cur := '<unknown>';
      IF jsonb_typeof(stat->'pods') = 'object' THEN
        cur := @extschema@._printer_quantity(stat->'pods'->'current'->'averageValue');
      END IF;
      list := list || (cur || '/' || @extschema@._printer_quantity(spec->'pods'->'target'->'averageValue'));
    WHEN 'Resource', 'ContainerResource' THEN
      src := CASE spec->>'type' WHEN 'Resource' THEN spec->'resource' ELSE spec->'containerResource' END;
      stat := CASE spec->>'type' WHEN 'Resource' THEN stat->'resource' ELSE stat->'containerResource' END;
      IF jsonb_typeof(stat) <> 'object' THEN stat := NULL; END IF;
      IF src->'target'->'averageValue' IS NOT NULL AND jsonb_typeof(src->'target'->'averageValue') <> 'null' THEN
        cur := '<unknown>';
        IF stat IS NOT NULL THEN
          cur := @extschema@._printer_quantity(stat->'current'->'averageValue');
        END IF;
        list := list || (COALESCE(src->>'name', '') || ': ' || cur || '/' || @extschema@._printer_quantity(src->'target'->'averageValue'));
      ELSE
        cur := '<unknown>';
        IF stat IS NOT NULL AND jsonb_typeof(stat->'current'->'averageUtilization') = 'number' THEN
          cur := @extschema@._printer_int(stat->'current'->'averageUtilization') || '%';
        END IF;
        target := '<auto>';
        IF jsonb_typeof(src->'target'->'averageUtilization') = 'number' THEN
          target := @extschema@._printer_int(src->'target'->'averageUtilization') || '%';
        END IF;
        list := list || (COALESCE(src->>'name', '') || ': ' || cur || '/' || target);
      END IF;
    ELSE
      list := list || '<unknown type>'::text;
    END CASE;
  END LOOP;
  IF cardinality(list) > 2 THEN
    RETURN array_to_string(list[1:2], ', ') || ' + ' || (cardinality(list) - 2) || ' more...';
  END IF;
  RETURN array_to_string(list, ', ');
END
$$;
COMMENT ON FUNCTION @extschema@.horizontalpodautoscaler_targets(jsonb) IS
'HPA TARGETS cell ("cpu: 50%/80%, 50m/100m + 1 more...", "<none>"). printers.go formatHPAMetrics (current release).';

-- horizontalpodautoscaler_minpods(object jsonb) -> text: MINPODS,
-- spec.minReplicas, "<unset>".  printers.go printHorizontalPodAutoscaler.
CREATE FUNCTION @extschema@.horizontalpodautoscaler_minpods(object jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(@extschema@._printer_int(object->'spec'->'minReplicas')::text, '<unset>') $$;
COMMENT ON FUNCTION @extschema@.horizontalpodautoscaler_minpods(jsonb) IS
'HPA MINPODS cell: spec.minReplicas or "<unset>". printers.go printHorizontalPodAutoscaler.';

-- horizontalpodautoscaler_maxpods(object jsonb) -> bigint: MAXPODS,
-- spec.maxReplicas.  printers.go printHorizontalPodAutoscaler.
CREATE FUNCTION @extschema@.horizontalpodautoscaler_maxpods(object jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(@extschema@._printer_int(object->'spec'->'maxReplicas'), 0) $$;
COMMENT ON FUNCTION @extschema@.horizontalpodautoscaler_maxpods(jsonb) IS
'HPA MAXPODS cell: spec.maxReplicas. printers.go printHorizontalPodAutoscaler.';

-- horizontalpodautoscaler_replicas(object jsonb) -> bigint: REPLICAS,
-- status.currentReplicas.  printers.go printHorizontalPodAutoscaler.
CREATE FUNCTION @extschema@.horizontalpodautoscaler_replicas(object jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT COALESCE(@extschema@._printer_int(object->'status'->'currentReplicas'), 0) $$;
COMMENT ON FUNCTION @extschema@.horizontalpodautoscaler_replicas(jsonb) IS
'HPA REPLICAS cell: status.currentReplicas. printers.go printHorizontalPodAutoscaler.';

-- End of issue 35, printer part (test/printers/run.sh loads the lines above,
-- up to this line, from its header on).

-- =====================================================================
-- Issue 35 (views): what `kubectl get -o wide` shows, as one view per
-- mirror table.
--
-- Every mirror table k8s.<t> gets a view kubectl.<t> (same name, schema
-- kubectl): cluster, namespace, name, then kubectl's columns for the kind
-- in kubectl's order (wide ones included) under kubectl's headers in
-- snake case, then uid (to join back to k8s.<t>).  The cells are the
-- printer functions above applied to `object`, so an expression index on
-- one (CREATE INDEX ON k8s.pods (kwatch.pod_status(object))) serves
-- `WHERE status = ...` on the view.  AGE is `age interval`, now() minus
-- the table's created_at at query time (kubectl's text:
-- kwatch.human_duration(age)); other times are timestamptz, a Job's
-- DURATION an interval.  A custom resource's view shows its printer
-- columns (the typed columns the table already has) and, when its CRD
-- declares none, AGE, as the API server's Table does; every other kind
-- gets NAME and AGE, as kubectl shows a kind without a printer.
--
-- The views are made WITH (security_invoker = true): a query through one
-- is checked, and row-level security applied, as the role that runs it on
-- k8s.<t>.  A view belongs to the extension's owner, never to a role that
-- could redefine it, and SELECT on it is the table owner's to grant
-- (_make_printed_view).  watch() makes or refreshes the view;
-- unwatch(drop_table => true) and DROP OWNED drop it with the table; a
-- user's own DROP TABLE k8s.<t> needs CASCADE.  Schema kubectl is made on
-- first use, as k8s is; a schema of that name owned by another role than
-- a superuser is left alone (no view is made in it; a WARNING says so).
-- =====================================================================

-- _printed_columns(api_group, plural) -> text[]: the view's select list
-- between name and uid for a built-in kind, as "<expression> AS <column>"
-- over table alias t; NULL for a kind without a printer (and for custom
-- resources, whose columns _printed_view_sql reads from printer_columns).
-- Rules: pkg/printers/internalversion/printers.go AddHandlers (the column
-- definitions per kind, wide ones included) of the release the printer
-- functions follow.
CREATE FUNCTION @extschema@._printed_columns(api_group text, plural text) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE
    WHEN (api_group, plural) = ('', 'pods') THEN ARRAY[
      'kwatch.pod_ready_text(t.object) AS ready', 'kwatch.pod_status(t.object) AS status',
      'kwatch.pod_restarts(t.object) AS restarts', 'kwatch.pod_last_restart(t.object) AS last_restart',
      'now() - t.created_at AS age', 'kwatch.pod_ip(t.object) AS ip', 'kwatch.pod_node(t.object) AS node',
      'kwatch.pod_nominated_node(t.object) AS nominated_node',
      'kwatch.pod_readiness_gates(t.object) AS readiness_gates']
    WHEN (api_group, plural) = ('', 'nodes') THEN ARRAY[
      'kwatch.node_status(t.object) AS status', 'kwatch.node_roles(t.object) AS roles',
      'now() - t.created_at AS age', 'kwatch.node_version(t.object) AS version',
      'kwatch.node_internal_ip(t.object) AS internal_ip', 'kwatch.node_external_ip(t.object) AS external_ip',
      'kwatch.node_os_image(t.object) AS os_image', 'kwatch.node_kernel_version(t.object) AS kernel_version',
      'kwatch.node_container_runtime(t.object) AS container_runtime']
    WHEN (api_group, plural) = ('', 'namespaces') THEN ARRAY[
      'kwatch.namespace_status(t.object) AS status', 'now() - t.created_at AS age']
    WHEN (api_group, plural) = ('apps', 'deployments') THEN ARRAY[
      'kwatch.deployment_ready(t.object) AS ready', 'kwatch.deployment_up_to_date(t.object) AS up_to_date',
      'kwatch.deployment_available(t.object) AS available', 'now() - t.created_at AS age',
      'kwatch.deployment_containers(t.object) AS containers', 'kwatch.deployment_images(t.object) AS images',
      'kwatch.deployment_selector(t.object) AS selector']
    WHEN (api_group, plural) = ('apps', 'replicasets') THEN ARRAY[
      'kwatch.replicaset_desired(t.object) AS desired', 'kwatch.replicaset_current(t.object) AS current',
      'kwatch.replicaset_ready(t.object) AS ready', 'now() - t.created_at AS age',
      'kwatch.replicaset_containers(t.object) AS containers', 'kwatch.replicaset_images(t.object) AS images',
      'kwatch.replicaset_selector(t.object) AS selector']
    WHEN (api_group, plural) = ('', 'replicationcontrollers') THEN ARRAY[
      'kwatch.replicationcontroller_desired(t.object) AS desired',
      'kwatch.replicationcontroller_current(t.object) AS current',
      'kwatch.replicationcontroller_ready(t.object) AS ready', 'now() - t.created_at AS age',
      'kwatch.replicationcontroller_containers(t.object) AS containers',
      'kwatch.replicationcontroller_images(t.object) AS images',
      'kwatch.replicationcontroller_selector(t.object) AS selector']
    WHEN (api_group, plural) = ('apps', 'statefulsets') THEN ARRAY[
      'kwatch.statefulset_ready(t.object) AS ready', 'now() - t.created_at AS age',
      'kwatch.statefulset_containers(t.object) AS containers', 'kwatch.statefulset_images(t.object) AS images']
    WHEN (api_group, plural) = ('apps', 'daemonsets') THEN ARRAY[
      'kwatch.daemonset_desired(t.object) AS desired', 'kwatch.daemonset_current(t.object) AS current',
      'kwatch.daemonset_ready(t.object) AS ready', 'kwatch.daemonset_up_to_date(t.object) AS up_to_date',
      'kwatch.daemonset_available(t.object) AS available',
      'kwatch.daemonset_node_selector(t.object) AS node_selector', 'now() - t.created_at AS age',
      'kwatch.daemonset_containers(t.object) AS containers', 'kwatch.daemonset_images(t.object) AS images',
      'kwatch.daemonset_selector(t.object) AS selector']
    WHEN (api_group, plural) = ('batch', 'jobs') THEN ARRAY[
      'kwatch.job_status(t.object) AS status', 'kwatch.job_completions(t.object) AS completions',
      'COALESCE(kwatch.job_completion_time(t.object), now()) - kwatch.job_start_time(t.object) AS duration',
      'now() - t.created_at AS age',
      'kwatch.job_containers(t.object) AS containers', 'kwatch.job_images(t.object) AS images',
      'kwatch.job_selector(t.object) AS selector']
    WHEN (api_group, plural) = ('batch', 'cronjobs') THEN ARRAY[
      'kwatch.cronjob_schedule(t.object) AS schedule', 'kwatch.cronjob_timezone(t.object) AS timezone',
      'kwatch.cronjob_suspend(t.object) AS suspend', 'kwatch.cronjob_active(t.object) AS active',
      'kwatch.cronjob_last_schedule(t.object) AS last_schedule', 'now() - t.created_at AS age',
      'kwatch.cronjob_containers(t.object) AS containers', 'kwatch.cronjob_images(t.object) AS images',
      'kwatch.cronjob_selector(t.object) AS selector']
    WHEN (api_group, plural) = ('', 'services') THEN ARRAY[
      'kwatch.service_type(t.object) AS type', 'kwatch.service_cluster_ip(t.object) AS cluster_ip',
      'kwatch.service_external_ip(t.object) AS external_ip', 'kwatch.service_ports(t.object) AS ports',
      'now() - t.created_at AS age', 'kwatch.service_selector(t.object) AS selector']
    WHEN (api_group, plural) = ('', 'endpoints') THEN ARRAY[
      'kwatch.endpoints_endpoints(t.object) AS endpoints', 'now() - t.created_at AS age']
    WHEN plural = 'ingresses' AND api_group IN ('networking.k8s.io', 'extensions') THEN ARRAY[
      'kwatch.ingress_class(t.object) AS class', 'kwatch.ingress_hosts(t.object) AS hosts',
      'kwatch.ingress_address(t.object) AS address', 'kwatch.ingress_ports(t.object) AS ports',
      'now() - t.created_at AS age']
    WHEN (api_group, plural) = ('', 'configmaps') THEN ARRAY[
      'kwatch.configmap_data(t.object) AS data', 'now() - t.created_at AS age']
    WHEN (api_group, plural) = ('', 'secrets') THEN ARRAY[
      'kwatch.secret_type(t.object) AS type', 'kwatch.secret_data(t.object) AS data',
      'now() - t.created_at AS age']
    WHEN (api_group, plural) = ('', 'serviceaccounts') THEN ARRAY[
      'kwatch.serviceaccount_secrets(t.object) AS secrets', 'now() - t.created_at AS age']
    WHEN (api_group, plural) = ('', 'persistentvolumes') THEN ARRAY[
      'kwatch.persistentvolume_capacity(t.object) AS capacity',
      'kwatch.persistentvolume_access_modes(t.object) AS access_modes',
      'kwatch.persistentvolume_reclaim_policy(t.object) AS reclaim_policy',
      'kwatch.persistentvolume_status(t.object) AS status', 'kwatch.persistentvolume_claim(t.object) AS claim',
      'kwatch.persistentvolume_storageclass(t.object) AS storageclass',
      'kwatch.persistentvolume_volumeattributesclass(t.object) AS volumeattributesclass',
      'kwatch.persistentvolume_reason(t.object) AS reason', 'now() - t.created_at AS age',
      'kwatch.persistentvolume_volume_mode(t.object) AS volume_mode']
    WHEN (api_group, plural) = ('', 'persistentvolumeclaims') THEN ARRAY[
      'kwatch.persistentvolumeclaim_status(t.object) AS status',
      'kwatch.persistentvolumeclaim_volume(t.object) AS volume',
      'kwatch.persistentvolumeclaim_capacity(t.object) AS capacity',
      'kwatch.persistentvolumeclaim_access_modes(t.object) AS access_modes',
      'kwatch.persistentvolumeclaim_storageclass(t.object) AS storageclass',
      'kwatch.persistentvolumeclaim_volumeattributesclass(t.object) AS volumeattributesclass',
      'now() - t.created_at AS age', 'kwatch.persistentvolumeclaim_volume_mode(t.object) AS volume_mode']
    WHEN (api_group, plural) = ('', 'events') THEN ARRAY[
      'kwatch.event_last_seen(t.object) AS last_seen', 'kwatch.event_type(t.object) AS type',
      'kwatch.event_reason(t.object) AS reason', 'kwatch.event_object(t.object) AS object',
      'kwatch.event_subobject(t.object) AS subobject', 'kwatch.event_source(t.object) AS source',
      'kwatch.event_message(t.object) AS message', 'kwatch.event_first_seen(t.object) AS first_seen',
      'kwatch.event_count(t.object) AS count']
    WHEN (api_group, plural) = ('autoscaling', 'horizontalpodautoscalers') THEN ARRAY[
      'kwatch.horizontalpodautoscaler_reference(t.object) AS reference',
      'kwatch.horizontalpodautoscaler_targets(t.object) AS targets',
      'kwatch.horizontalpodautoscaler_minpods(t.object) AS minpods',
      'kwatch.horizontalpodautoscaler_maxpods(t.object) AS maxpods',
      'kwatch.horizontalpodautoscaler_replicas(t.object) AS replicas', 'now() - t.created_at AS age']
  END
$$;
REVOKE ALL ON FUNCTION @extschema@._printed_columns(text, text) FROM PUBLIC;

-- _printed_view_sql(rel) -> text: the SELECT of view kubectl.<t> for
-- mirror table `rel` (kwatch.tables says its resource), or NULL when
-- kwatch did not make `rel`.  A custom resource (a row in printer_columns)
-- shows the table's typed printer columns that exist, and AGE when its CRD
-- declares no printer columns (apiextensions-apiserver
-- pkg/registry/customresource/tableconvertor: the default columns); a kind
-- without a printer shows NAME and AGE.
CREATE FUNCTION @extschema@._printed_view_sql(rel regclass) RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  m @extschema@.tables;
  cols text[];
  pc text[];
BEGIN
  SELECT * INTO m FROM @extschema@._mirror_table(rel);
  IF m.relid IS NULL THEN
    RETURN NULL;
  END IF;
  cols := @extschema@._printed_columns(m.api_group, m.plural);
  IF cols IS NULL THEN
    SELECT p.columns INTO pc FROM @extschema@.printer_columns p
     WHERE (p.api_group, p.plural) = (m.api_group, m.plural);
    IF pc IS NOT NULL AND cardinality(pc) > 0 THEN
      SELECT array_agg(format('t.%I', a.attname) ORDER BY a.attnum) INTO cols
        FROM pg_attribute a
       WHERE a.attrelid = rel AND a.attnum > 0 AND NOT a.attisdropped
         AND a.attname IN (SELECT split_part(c, ' ', 1) FROM unnest(pc) c);
    END IF;
    IF pc IS NULL OR cardinality(pc) = 0 THEN
      cols := ARRAY['now() - t.created_at AS age'];
    END IF;
  END IF;
  RETURN format('SELECT t.cluster, t.namespace, t.name, %s t.uid FROM %s t',
                COALESCE((SELECT string_agg(c || ', ', '') FROM unnest(cols) c), ''), rel);
END
$$;
REVOKE ALL ON FUNCTION @extschema@._printed_view_sql(regclass) FROM PUBLIC;

-- _printed_view(rel) -> regclass: the view kubectl.<t> of mirror table
-- `rel` (k8s.<t>), or NULL when there is none: a view of that name in
-- schema kubectl that reads `rel`; a relation of that name that does not
-- is not kwatch's.
CREATE FUNCTION @extschema@._printed_view(rel regclass) RETURNS regclass
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT v.oid::regclass
    FROM pg_class t, pg_class v, pg_rewrite w, pg_depend d
   WHERE t.oid = rel AND v.relnamespace = to_regnamespace('kubectl')
     AND v.relname = t.relname AND v.relkind = 'v'
     AND w.ev_class = v.oid AND d.classid = 'pg_rewrite'::regclass AND d.objid = w.oid
     AND d.refclassid = 'pg_class'::regclass AND d.refobjid = rel
   LIMIT 1
$$;
REVOKE ALL ON FUNCTION @extschema@._printed_view(regclass) FROM PUBLIC;

-- _drop_printed_view(rel): drops the view kubectl.<t> of mirror table
-- `rel`, if there is one (before the table, or a column it shows, is
-- dropped), with CASCADE: what depends on it goes too, as with the
-- owner's DROP TABLE ... CASCADE, since any role may make a (temporary)
-- view over it and must not block unwatch(drop_table => true), DROP OWNED
-- or a CRD's column change that way.  Waits at most 5 s for its lock
-- (55P03 after that: a role holding the view open in a transaction).
CREATE FUNCTION @extschema@._drop_printed_view(rel regclass) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET lock_timeout = '5s'
AS $$
DECLARE
  v regclass := @extschema@._printed_view(rel);
BEGIN
  IF v IS NOT NULL THEN
    EXECUTE format('DROP VIEW %s CASCADE', v);
  END IF;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._drop_printed_view(regclass) FROM PUBLIC;

-- _drop_printed_views_of(roles oid[]): drops the views kubectl.<t> of the
-- mirror tables `roles` own, for DROP OWNED BY (src/functions/ownership.c),
-- whose drop of the tables the views would otherwise refuse; with CASCADE,
-- as _drop_printed_view.
CREATE FUNCTION @extschema@._drop_printed_views_of(roles oid[]) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  r record;
BEGIN
  -- by what the views read, wherever the table is now (its owner may have
  -- moved it out of k8s)
  FOR r IN SELECT DISTINCT v.oid::regclass AS view
             FROM pg_class v, pg_rewrite w, pg_depend d, pg_class t
            WHERE v.relnamespace = to_regnamespace('kubectl') AND v.relkind = 'v'
              AND w.ev_class = v.oid AND d.classid = 'pg_rewrite'::regclass AND d.objid = w.oid
              AND d.refclassid = 'pg_class'::regclass AND d.refobjid = t.oid AND t.oid <> v.oid
              AND t.relkind IN ('r', 'p') AND t.relowner = ANY (roles) LOOP
    EXECUTE format('DROP VIEW IF EXISTS %s CASCADE', r.view);
  END LOOP;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._drop_printed_views_of(oid[]) FROM PUBLIC;

-- _make_printed_view(rel) -> regclass: makes or refreshes kubectl.<t> for
-- mirror table `rel` = k8s.<t> (see this section's head); returns it, or
-- NULL when none was made: `rel` is no mirror table kwatch made, schema
-- kubectl belongs to a role that is no superuser, kubectl.<t> is taken by
-- something else, or the view changes columns while a view depends on it
-- (each with a WARNING or NOTICE: watch() goes on).
--
-- The view belongs to the caller of this function (the extension's owner,
-- a superuser), never to the table's owner: a view that a role could
-- redefine would run that role's code with the rights of whoever reads
-- it.  It reads k8s.<t> itself, so PostgreSQL refuses what would change
-- what it reads (ALTER COLUMN ... TYPE of a column it shows, with which an
-- assignment cast of the owner's would run as the reader) and a DROP
-- TABLE without CASCADE.  SELECT on it is granted to the table's owner
-- WITH GRANT OPTION, not to PUBLIC: the owner grants it beside SELECT on
-- k8s.<t>; a former owner's grants are revoked.  Waits at most 5 s for a
-- lock (55P03: watch() fails and may be called again).  Runs no code of
-- any role: CREATE VIEW, DROP VIEW, GRANT and REVOKE only.
CREATE FUNCTION @extschema@._make_printed_view(rel regclass) RETURNS regclass
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET lock_timeout = '5s'
AS $$
DECLARE
  q text := @extschema@._printed_view_sql(rel);
  tname name := (SELECT c.relname FROM pg_class c WHERE c.oid = rel);
  owner regrole := (SELECT c.relowner::regrole FROM pg_class c WHERE c.oid = rel);
  v regclass;
  r record;
BEGIN
  IF q IS NULL THEN
    RETURN NULL;
  END IF;
  IF to_regnamespace('kubectl') IS NULL THEN
    CREATE SCHEMA kubectl;
    GRANT USAGE ON SCHEMA kubectl TO PUBLIC;
    COMMENT ON SCHEMA kubectl IS 'kwatch: what kubectl get -o wide shows, one view per mirror table of schema k8s';
  ELSIF NOT (SELECT a.rolsuper FROM pg_namespace n, pg_roles a
              WHERE n.nspname = 'kubectl' AND a.oid = n.nspowner) THEN
    RAISE WARNING 'no view kubectl.% made: schema kubectl belongs to role %, not a superuser', tname,
                  (SELECT n.nspowner::regrole FROM pg_namespace n WHERE n.nspname = 'kubectl')
      USING HINT = 'Rename that schema, then call watch() again.';
    RETURN NULL;
  END IF;
  v := @extschema@._printed_view(rel);
  IF v IS NULL AND to_regclass(format('kubectl.%I', tname)) IS NOT NULL THEN
    -- a view kwatch made for a table that is no longer k8s.<t> (its owner
    -- moved it out of k8s): it must not go on showing that table's rows
    -- under this name
    IF (SELECT c.relkind = 'v' AND c.relowner = current_user::regrole FROM pg_class c
         WHERE c.oid = to_regclass(format('kubectl.%I', tname))) THEN
      RAISE WARNING 'view kubectl.% read another table than %: made anew', tname, rel;
      EXECUTE format('DROP VIEW kubectl.%I CASCADE', tname);
    ELSE
      RAISE NOTICE 'no view kubectl.% made: a relation of that name is not a view of %', tname, rel;
      RETURN NULL;
    END IF;
  END IF;
  -- the view as it should be exists already (its comment carries the
  -- digest of its query, and the owner's grant is there): nothing to do,
  -- and no lock taken on the table, which its owner may hold for long
  IF v IS NOT NULL
     AND obj_description(v, 'pg_class') LIKE '%[' || md5(q) || ']'
     AND has_table_privilege(owner, v, 'SELECT WITH GRANT OPTION')
     AND NOT EXISTS (SELECT 1 FROM pg_class c, aclexplode(c.relacl) x
                      WHERE c.oid = v AND x.is_grantable AND x.grantee <> c.relowner
                        AND x.grantee <> owner) THEN
    RETURN v;
  END IF;
  BEGIN   -- a lock held longer than lock_timeout: no view this time, watch() goes on
  BEGIN
    EXECUTE format('CREATE OR REPLACE VIEW kubectl.%I WITH (security_invoker = true) AS %s', tname, q);
  EXCEPTION WHEN invalid_table_definition OR datatype_mismatch THEN
    -- its columns changed (a CRD's printer columns): drop and make anew,
    -- unless a view depends on it
    BEGIN
      EXECUTE format('DROP VIEW kubectl.%I', tname);
      EXECUTE format('CREATE VIEW kubectl.%I WITH (security_invoker = true) AS %s', tname, q);
    EXCEPTION WHEN dependent_objects_still_exist THEN
      RAISE NOTICE 'view kubectl.% keeps its former columns: other objects depend on it', tname;
      RETURN to_regclass(format('kubectl.%I', tname));
    END;
  END;
  v := format('kubectl.%I', tname)::regclass;
  -- a former owner of the table (ALTER TABLE OWNER, REASSIGN OWNED) keeps
  -- no say over who reads the view, nor do those it granted it to
  FOR r IN SELECT x.grantee::regrole AS grantee FROM pg_class c, aclexplode(c.relacl) x
            WHERE c.oid = v AND x.is_grantable AND x.grantee <> c.relowner AND x.grantee <> owner LOOP
    EXECUTE format('REVOKE ALL ON %s FROM %s CASCADE', v, r.grantee);
  END LOOP;
  EXECUTE format('GRANT SELECT ON %s TO %s WITH GRANT OPTION', v, owner);
  EXECUTE format('COMMENT ON VIEW %s IS %L', v,
                 format('kwatch: kubectl get -o wide for %s (rows checked as the caller on the table) [%s]',
                        rel, md5(q)));
  EXCEPTION WHEN lock_not_available THEN
    RAISE WARNING 'view kubectl.% not made or refreshed: %', tname, SQLERRM
      USING HINT = 'Another session holds it open; call watch() again later.';
    RETURN NULL;
  END;
  RETURN v;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._make_printed_view(regclass) FROM PUBLIC;

-- _refresh_printer_columns(...): as in 0.3.0, and the view kubectl.<t>
-- (above) is dropped before a printer column it shows is, which would
-- fail otherwise; watch() makes it anew right after.
CREATE OR REPLACE FUNCTION @extschema@._refresh_printer_columns(server text, api_group text, plural text,
                                                     api_version text, table_name text)
RETURNS text[]
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  cols jsonb := @extschema@._printer_columns(server, api_group, plural, api_version);
  taken text[];
  r record;
  old text[];
  c text;
BEGIN
  IF cols IS NULL THEN
    RETURN '{}';
  END IF;
  SELECT array_agg(split_part(b, ' ', 1)) INTO taken
  FROM unnest(@extschema@.base_columns() || @extschema@._builtin_columns(api_group, plural)
              || ARRAY['object', 'ctid', 'xmin', 'xmax', 'cmin', 'cmax', 'tableoid', 'oid']) b;
  r := @extschema@._printer_column_defs(cols, taken);
  SELECT p.columns INTO old FROM @extschema@.printer_columns p
  WHERE p.api_group = _refresh_printer_columns.api_group AND p.plural = _refresh_printer_columns.plural;
  IF old IS NOT NULL AND to_regclass(format('k8s.%I', table_name)) IS NOT NULL THEN
    FOREACH c IN ARRAY old LOOP
      CONTINUE WHEN c = ANY (r.defs);
      -- only a generated column (a printer column kwatch made), as the owner
      IF EXISTS (SELECT 1 FROM pg_attribute a
                 WHERE a.attrelid = format('k8s.%I', table_name)::regclass
                   AND a.attname = split_part(c, ' ', 1) AND a.attgenerated = 's'
                   AND NOT a.attisdropped) THEN
        -- the view kubectl.<t> shows it (issue 35): made anew by watch()
        PERFORM @extschema@._drop_printed_view(format('k8s.%I', table_name)::regclass);
        PERFORM @extschema@._execute_as_owner(format('k8s.%I', table_name)::regclass,
          format('ALTER TABLE k8s.%I DROP COLUMN %I', table_name, split_part(c, ' ', 1)));
      END IF;
    END LOOP;
  END IF;
  INSERT INTO @extschema@.printer_columns AS p (api_group, plural, api_version, columns, skipped)
  VALUES (api_group, plural, api_version, r.defs, r.skipped)
  ON CONFLICT ON CONSTRAINT printer_columns_pkey
  DO UPDATE SET api_version = EXCLUDED.api_version, columns = EXCLUDED.columns, skipped = EXCLUDED.skipped;
  RETURN r.skipped;
END
$$;

-- Existing mirror tables get their views now.  What an update script makes
-- becomes a member of the extension, which these views must not be (they
-- belong with their tables: DROP EXTENSION would take them, pg_dump would
-- leave them out), so each leaves the extension at once; one that cannot
-- be made is reported and skipped, and watch() makes it later.
DO $$
DECLARE
  r record;
  v regclass;
  new_schema boolean := to_regnamespace('kubectl') IS NULL;
BEGIN
  FOR r IN SELECT t.relid FROM @extschema@.tables t JOIN pg_class c ON c.oid = t.relid ORDER BY t.relname LOOP
    BEGIN
      -- a table's owner holding a lock on it must not stall the update
      -- (issue 30's rule): its view is made by its next watch() instead
      SET LOCAL lock_timeout = '5s';
      v := @extschema@._make_printed_view(r.relid);
      IF v IS NOT NULL THEN
        EXECUTE format('ALTER EXTENSION kwatch DROP VIEW %s', v);
      END IF;
    EXCEPTION WHEN OTHERS THEN
      RAISE WARNING 'no view kubectl.% made: %', r.relid::regclass, SQLERRM
        USING HINT = 'Call watch() for it again once the cause is gone.';
    END;
  END LOOP;
  RESET lock_timeout;
  IF new_schema AND to_regnamespace('kubectl') IS NOT NULL THEN
    ALTER EXTENSION kwatch DROP SCHEMA kubectl;
  END IF;
END
$$;

-- =====================================================================
-- Issue 33 (servers): a watch depends on its foreign server.  Its name is
-- the `cluster` value of every row the watch writes, so a rename of a
-- watched server is refused, and DROP SERVER treats the watches as
-- dependents: RESTRICT refuses, CASCADE removes them as unwatch() does.
-- The ProcessUtility hook (src/functions/ownership.c) calls the function
-- below after PostgreSQL ran ALTER SERVER ... RENAME, DROP SERVER, DROP
-- FOREIGN DATA WRAPPER or DROP OWNED.
-- =====================================================================

-- _servers_gone(before, how) -> text[]: `before` holds the names of the
-- watched servers that existed before the statement; for those that no
-- longer exist (the statement dropped or renamed them), by `how`:
--   'check'    returns {server, detail}: the first such server and one line
--              per watch ("watch of pods on server prod (table k8s.pods)
--              depends on server prod", as PostgreSQL's
--              backend/catalog/dependency.c reportDependentObjects words
--              it), which the hook raises (55006 for a rename, 2BP01 for a
--              drop without CASCADE); NULL when no watch depends on them;
--   'cascade'  removes their watches as unwatch() does: the registrations
--              and relist stages, and the rows with that cluster value,
--              deleted as each table's owner (_delete_cluster_rows), each
--              table's in a subtransaction that waits at most 5 s for its
--              lock: a table whose owner's trigger refuses, or whose lock
--              is held, keeps its rows with a WARNING (its owner may
--              delay the drop, not refuse it); the tables, their views and
--              history stay; a NOTICE per watch.  Returns NULL.
-- Run by the hook as the extension's owner; EXECUTE is revoked from PUBLIC.
CREATE FUNCTION @extschema@._servers_gone(before text[], how text)
RETURNS text[]
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  gone text[];
  dependents text;
  first_server text;
  tables text[];
  r record;
  saved_lock_timeout text := current_setting('lock_timeout');
BEGIN
  SELECT array_agg(s ORDER BY s) INTO gone FROM unnest(before) s
  WHERE NOT EXISTS (SELECT 1 FROM pg_foreign_server f WHERE f.srvname = s);
  SELECT string_agg(d.line, E'\n' ORDER BY d.ord, d.id), min(d.server)
    INTO dependents, first_server
  FROM (SELECT 1 AS ord, x.id::bigint AS id, x.server,
               format('watch of %s on server %s (table k8s.%I) depends on server %s',
                      x.resource, x.server, x.table_name, x.server) AS line
          FROM @extschema@.registrations x WHERE x.server = ANY (gone)
        UNION ALL
        SELECT 2, q.id, q.server,
               format('pending %s %s of %s %s on server %s depends on server %s',
                      q.verb, q.id, q.kind, q.name, q.server, q.server)
          FROM @extschema@.apply_queue q WHERE q.state = 'pending' AND q.server = ANY (gone)) d;
  IF dependents IS NULL THEN
    RETURN NULL;
  END IF;
  IF how <> 'cascade' THEN
    RETURN ARRAY[first_server, dependents];
  END IF;
  -- pending applies and deletes (issue 32) fail: never sent to a server of another identity
  UPDATE @extschema@.apply_queue q
     SET state = 'failed', sqlstate = '42704', message = format('server %s was dropped', q.server),
         manifest = NULL, finished_at = now()
   WHERE q.state = 'pending' AND q.server = ANY (gone);
  -- their batches in progress end first; later ones wait (issue 36)
  PERFORM @extschema@._lock_registration(x.id)
     FROM @extschema@.registrations x WHERE x.server = ANY (gone) ORDER BY x.id;
  FOR r IN DELETE FROM @extschema@.registrations x WHERE x.server = ANY (gone)
           RETURNING x.id, x.table_name, x.server, x.resource
  LOOP
    PERFORM @extschema@._drop_relist_stage(r.id);
    tables := tables || format('k8s.%I', r.table_name) || r.server;
    RAISE NOTICE 'drop cascades to watch of % on server %', r.resource, r.server;
  END LOOP;
  PERFORM set_config('lock_timeout', '5s', true);
  FOR r IN SELECT DISTINCT tables[i] AS rel, tables[i + 1] AS server
           FROM generate_subscripts(tables, 1) i WHERE i % 2 = 1
  LOOP
    CONTINUE WHEN to_regclass(r.rel) IS NULL;
    BEGIN
      PERFORM @extschema@._delete_cluster_rows(to_regclass(r.rel), r.server);
    EXCEPTION WHEN OTHERS THEN
      RAISE WARNING 'the rows of cluster % stay in %: %', r.server, r.rel, SQLERRM
        USING HINT = format('Delete them as the table''s owner: DELETE FROM %s WHERE cluster = %L;', r.rel, r.server);
    END;
  END LOOP;
  PERFORM set_config('lock_timeout', saved_lock_timeout, true);
  PERFORM @extschema@._wake_at_commit();
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._servers_gone(text[], text) FROM PUBLIC;

-- _server_name_held(name, caller) -> text: the watches registered under
-- server name `name` (kept from a server dropped before 0.7.0, whose
-- registrations outlived it) that `caller` may not act for, one line each;
-- NULL when none.  The hook (src/functions/ownership.c) refuses CREATE
-- SERVER and ALTER SERVER ... RENAME TO such a name to everyone but a
-- superuser: the new server would take over those watches, and a DROP
-- SERVER ... CASCADE of it would remove them.
CREATE FUNCTION @extschema@._server_name_held(name text, caller oid)
RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT string_agg(format('watch of %s on server %s (table k8s.%I)', x.resource, x.server, x.table_name),
                    E'\n' ORDER BY x.id)
  FROM @extschema@.registrations x
  WHERE x.server = name
    AND NOT (EXISTS (SELECT 1 FROM pg_roles a WHERE a.oid = x.owner)
             AND pg_has_role(caller, x.owner, 'USAGE'))
$$;
REVOKE ALL ON FUNCTION @extschema@._server_name_held(text, oid) FROM PUBLIC;

-- _lock_server(name) -> void: locks foreign server `name` (AccessShareLock
-- on the object, as a statement that uses it does) until the end of the
-- transaction, so that watch() and a concurrent DROP SERVER serialize: the
-- DROP waits for the watch's transaction and then sees its registration.
-- ERRORs: 42704 when the server does not exist (also when it was dropped
-- while the lock was awaited).
CREATE FUNCTION @extschema@._lock_server(name text) RETURNS void
LANGUAGE C STRICT
AS 'MODULE_PATHNAME', 'kwatch_lock_server';
REVOKE ALL ON FUNCTION @extschema@._lock_server(text) FROM PUBLIC;

-- =====================================================================
-- Issue 32: acting on the cluster with server-side apply.
-- kwatch.apply() validates every manifest with a dry run in the
-- statement, then applies it at once (at => 'now') or records it here, in
-- the caller's transaction, for the request sender (a background process,
-- src/sender/sender.c) to send after COMMIT.  Results: kwatch.applies,
-- kwatch.wait_apply().  Writes through live tables (INSERT, UPDATE, DELETE
-- on a foreign table of a kwatch server; src/live/fdw_modify.c) need no
-- SQL object: with the new library every live table takes them, unless
-- its option updatable (or its server's) is 'false'; a role still needs
-- the table's INSERT/UPDATE/DELETE privilege, USAGE on the server and a
-- user mapping, and the cluster's RBAC decides the rest.  The mirror
-- tables' apply workers are named 'kwatch apply worker' (backend_type).
-- =====================================================================

-- What kwatch.apply() and kwatch.wait_apply() return: the apply's id (NULL
-- for a dry run or one sent at once), its state ('dry run', 'applied',
-- 'pending', 'failed'), and the object as the server stored it (or would
-- store it, for a dry run; at commit: the dry run's answer until the send).
-- A Secret's data and stringData are left out.
CREATE TYPE @extschema@.apply_result AS (
  id bigint,
  state text,
  object jsonb
);

-- The applies to send after COMMIT, one row per kwatch.apply() at commit,
-- and their outcome.  Written only through kwatch.apply() (as the
-- extension's owner) and the sender; no role but the extension's owner
-- reads it (a pending Secret manifest is here until it is sent, then the
-- manifest is cleared).  `object_key` orders the applies of one object:
-- apply() locks kwatch.apply_objects' row of the object, so two
-- transactions applying one object commit in the order of their ids.
CREATE TABLE @extschema@.apply_queue (
  id bigserial PRIMARY KEY,
  server text NOT NULL,
  role oid NOT NULL,                         -- who asked: its credentials send it
  role_name text NOT NULL,                   -- and its name then (an oid reused by a new role sends nothing)
  object_key text NOT NULL,                  -- server/group/kind/namespace/name
  api_group text NOT NULL,
  api_version text NOT NULL,
  resource text,                             -- the plural; NULL: found at the send (a CRD of the same transaction)
  kind text NOT NULL,
  namespace text,
  name text NOT NULL,
  field_manager text NOT NULL,
  force boolean NOT NULL,
  verb text NOT NULL DEFAULT 'apply' CHECK (verb IN ('apply', 'delete')),
  delete_options jsonb,                      -- DeleteOptions of a delete
  manifest jsonb,                            -- NULL once finished
  validated boolean NOT NULL,                -- false: the dry run was deferred to the send
  state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'applied', 'failed')),
  http_status integer,
  sqlstate text,
  message text,
  detail text,
  attempts integer NOT NULL DEFAULT 0,
  resource_version text,                     -- of the object the server returned
  uid text,
  created_at timestamptz NOT NULL DEFAULT now(),
  deadline timestamptz NOT NULL,
  next_attempt_at timestamptz NOT NULL DEFAULT '-infinity',
  finished_at timestamptz
);
CREATE INDEX apply_queue_pending ON @extschema@.apply_queue (id) WHERE state = 'pending';
-- the sender's "first pending apply of its object" test
CREATE INDEX apply_queue_pending_object ON @extschema@.apply_queue (object_key, id) WHERE state = 'pending';
CREATE INDEX apply_queue_finished ON @extschema@.apply_queue (finished_at) WHERE state <> 'pending';
REVOKE ALL ON @extschema@.apply_queue FROM PUBLIC;
REVOKE ALL ON SEQUENCE @extschema@.apply_queue_id_seq FROM PUBLIC;

-- One row per object ever applied at commit: apply() locks it (FOR UPDATE)
-- in the caller's transaction, so that the applies of one object are
-- queued in commit order (see apply_queue).
CREATE TABLE @extschema@.apply_objects (
  object_key text PRIMARY KEY
);
REVOKE ALL ON @extschema@.apply_objects FROM PUBLIC;

-- kwatch.applies: each apply made at commit, to the role that made it (and
-- its members) and superusers only; the manifest is never shown.
CREATE VIEW @extschema@.applies WITH (security_barrier) AS
SELECT q.id, q.server, q.role::regrole AS role, q.verb, q.api_version, q.kind, q.namespace, q.name,
       q.field_manager, q.force, q.state, q.http_status, q.sqlstate, q.message, q.detail,
       q.attempts, q.resource_version, q.uid, q.created_at, q.finished_at, q.deadline,
       q.next_attempt_at
FROM @extschema@.apply_queue q
WHERE CASE WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_roles a WHERE a.oid = q.role)
           THEN pg_catalog.pg_has_role(q.role, 'USAGE') ELSE false END
   OR (SELECT a.rolsuper FROM pg_catalog.pg_roles a WHERE a.rolname = current_user);
GRANT SELECT ON @extschema@.applies TO PUBLIC;

-- kwatch.apply(manifest, server, field_manager, force, dry_run, at,
-- deadline) -> apply_result: server-side apply of one object (PATCH with
-- Content-Type application/apply-patch+yaml, fieldManager, force; the
-- resource found from the manifest's apiVersion and kind by discovery),
-- with the caller's credentials (its user mapping, else the server's
-- PUBLIC one, as live tables choose them).  Always first a dry run
-- (dryRun=All) in the statement; then, by `at`: 'commit' (the default)
-- records it to be sent after COMMIT by the request sender, retried on
-- 429 (Retry-After), 5xx and connection errors until `deadline` after the
-- commit; 'now' sends it in the statement (not undone by ROLLBACK).
-- dry_run => true only validates.  ERRORs (SQLSTATE): 22023 a bad
-- manifest (not an object; no apiVersion, kind or metadata.name) before any
-- request, or an invalid object (the server's causes in DETAIL); 42704 an
-- unknown kind, or not found; KW409 a field-manager conflict (DETAIL: each
-- field and its manager; force => true takes the fields over); 40001 a
-- conflict (a stale resourceVersion in the manifest); 42501 no USAGE on
-- the server, a 403 from the cluster (its reason), or a call from
-- kwatch's own processes; 55000 at commit in a database the worker does
-- not serve; 25006 at commit on a hot standby; what a request raises
-- (08xxx unreachable, 28000 credentials), 54000 a manifest over 3 MB,
-- 55P03 another transaction's uncommitted apply of the object (5 s).  Rule
-- for objects that depend on each other in one transaction: a dry run
-- answered 404 when the same transaction queued the Namespace it names, or
-- an unknown kind when it queued a CRD of its group, does not fail an apply
-- at commit: it is validated when it is sent.
CREATE FUNCTION @extschema@.apply(manifest jsonb,
                                  server text DEFAULT NULL,
                                  field_manager text DEFAULT 'kwatch',
                                  force boolean DEFAULT false,
                                  dry_run boolean DEFAULT false,
                                  at text DEFAULT 'commit',
                                  deadline interval DEFAULT '10 minutes')
RETURNS @extschema@.apply_result
LANGUAGE C
AS 'MODULE_PATHNAME', 'kwatch_apply';

-- kwatch.wait_apply(id, timeout) -> apply_result: waits until apply `id`
-- (made at commit by the caller's role) is applied, and returns it, or
-- raises its error (its SQLSTATE, the server's message) when it failed.
-- wait_mirror => true then also waits until every watch of that server
-- and resource has committed a checkpoint at or past the applied object's
-- resourceVersion (read your own writes, as wait_current()).  ERRORs:
-- 55000 when the current transaction made the apply ("COMMIT first"),
-- 42704 no such apply visible to the caller, 57014 at the timeout
-- (default: none).
CREATE FUNCTION @extschema@.wait_apply(id bigint,
                                       timeout interval DEFAULT NULL,
                                       wait_mirror boolean DEFAULT false)
RETURNS @extschema@.apply_result
LANGUAGE C
AS 'MODULE_PATHNAME', 'kwatch_wait_apply';

-- kwatch.delete(resource, name, namespace, server, uid, resource_version,
-- propagation_policy, grace_period, dry_run, at, deadline) -> apply_result:
-- deletes object `name` of `resource` (a name as watch() takes it: "pods",
-- "deployments.apps", a kind) with the caller's credentials, in the same
-- three ways as apply() (a dry run first; at commit through the request
-- sender, or at once).  `uid` and `resource_version` become DeleteOptions
-- preconditions, so the object deleted is the one the caller saw (a
-- different one answers 409: 40001); propagation_policy is 'Orphan',
-- 'Background' or 'Foreground'; grace_period in seconds.  Done means the
-- API server accepted the deletion (200/202): an object with finalizers
-- stays, with metadata.deletionTimestamp set, until they are removed; a
-- send answered 404 counts as done (the object is gone: an earlier attempt
-- whose answer was lost, or another client).  ERRORs: as apply(), and
-- 42704 when the object does not exist at the dry run.
CREATE FUNCTION @extschema@.delete(resource text,
                                   name text,
                                   namespace text DEFAULT NULL,
                                   server text DEFAULT NULL,
                                   uid text DEFAULT NULL,
                                   resource_version text DEFAULT NULL,
                                   propagation_policy text DEFAULT NULL,
                                   grace_period integer DEFAULT NULL,
                                   dry_run boolean DEFAULT false,
                                   at text DEFAULT 'commit',
                                   deadline interval DEFAULT '10 minutes')
RETURNS @extschema@.apply_result
LANGUAGE C
AS 'MODULE_PATHNAME', 'kwatch_delete';

-- =====================================================================
-- Issue 36: big lists.  A mirror table's GIN index on labels is made with
-- jsonb_path_ops instead of jsonb_ops.  A label selector `labels @>
-- '{"app":"web"}'` looks up one hashed key/value entry per pair instead of
-- the key's posting list (every row whose labels have the key, often the
-- whole table) intersected with the value's: at 50,000 pods it answers in
-- a quarter of the time, and the index is half the size and cheaper to
-- keep up during a sync (measured: test/bench/README.md, "Label
-- selectors").  Key existence, `labels ? 'app'`, is no longer indexed
-- (jsonb_path_ops has no key entries) and is a filter on the cluster's
-- rows; a table's owner who needs it indexed adds
-- `CREATE INDEX ON k8s.<table> USING gin (labels)`.  Tables made before
-- 0.7.0 get the new index here, under the same name, if theirs is still
-- the one kwatch made (named <table>_labels_idx, on labels alone, jsonb_ops);
-- built beside the old index (a SHARE lock: the worker's writes wait,
-- reads go on), then swapped in a moment; a table locked for more than 5 s
-- keeps its index, with a WARNING.
-- =====================================================================

-- create_mirror_table(table_name, api_group, api_version, plural) ->
-- regclass: as in 0.5.0, with GIN (labels jsonb_path_ops).
CREATE OR REPLACE FUNCTION @extschema@.create_mirror_table(table_name text, api_group text,
                                    api_version text, plural text)
RETURNS regclass
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  extra text := '';
  c text;
  rel regclass;
BEGIN
  IF to_regnamespace('k8s') IS NULL THEN
    CREATE SCHEMA k8s;
  END IF;
  IF to_regclass(format('k8s.%I', table_name)) IS NOT NULL THEN
    -- as the table's owner: its rows feed the ALTER TABLE's expressions
    PERFORM @extschema@._restore_columns_as_owner(format('k8s.%I', table_name)::regclass,
                                                  api_group, plural);
    RETURN format('k8s.%I', table_name)::regclass;
  END IF;
  FOREACH c IN ARRAY @extschema@.base_columns() || @extschema@.typed_columns(api_group, plural) LOOP
    extra := extra || c || ', ';
  END LOOP;
  EXECUTE format($t$
    CREATE TABLE k8s.%1$I (
      %2$s
      object           jsonb NOT NULL,
      PRIMARY KEY (cluster, uid)
    )$t$, table_name, extra);
  -- lz4 compresses about twice as fast as pglz for these documents
  IF EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression'
             AND 'lz4' = ANY (enumvals)) THEN
    EXECUTE format('ALTER TABLE k8s.%I ALTER COLUMN object SET COMPRESSION lz4, '
                   'ALTER COLUMN annotations SET COMPRESSION lz4', table_name);
  END IF;
  EXECUTE format('CREATE INDEX ON k8s.%I (namespace, name)', table_name);
  EXECUTE format('CREATE INDEX ON k8s.%I USING gin (labels jsonb_path_ops)', table_name);
  -- for people reading \dt+; kwatch itself goes by kwatch.tables
  EXECUTE format('COMMENT ON TABLE k8s.%I IS %L', table_name,
                 format('kwatch mirror of %s (%s)', plural,
                        CASE api_group WHEN '' THEN api_version
                             ELSE api_group || '/' || api_version END));
  rel := format('k8s.%I', table_name)::regclass;
  DELETE FROM @extschema@.tables t
   WHERE t.relid = rel OR NOT EXISTS (SELECT 1 FROM pg_class x WHERE x.oid = t.relid);
  INSERT INTO @extschema@.tables (relid, relname, api_group, plural, made_by)
  VALUES (rel, table_name, api_group, plural, current_user::regrole);
  RETURN rel;
END
$$;
REVOKE ALL ON FUNCTION @extschema@.create_mirror_table(text, text, text, text) FROM PUBLIC;

-- The labels index of the tables kwatch made, rebuilt with jsonb_path_ops
-- (see above).  An index a table's owner made, or changed, is left alone.
-- The new index is built beside the old one (a SHARE lock: reads go on),
-- then the old one dropped and the new one renamed (ACCESS EXCLUSIVE, a
-- moment); each table's lock is waited for at most 5 s, after which that
-- table keeps its index and a WARNING says how to rebuild it later.
DO $$
DECLARE
  r record;
  saved text := current_setting('lock_timeout');
BEGIN
  PERFORM set_config('lock_timeout', '5s', true);
  FOR r IN
    SELECT i.indexrelid::regclass AS idx, i.indrelid::regclass AS rel, ic.relname AS idxname
      FROM @extschema@.tables t
      JOIN pg_class tc ON tc.oid = t.relid AND tc.relname = t.relname
                      AND tc.relnamespace = (SELECT n.oid FROM pg_namespace n WHERE n.nspname = 'k8s')
      JOIN pg_index i ON i.indrelid = t.relid
      JOIN pg_class ic ON ic.oid = i.indexrelid
      JOIN pg_am am ON am.oid = ic.relam
      JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
      JOIN pg_opclass oc ON oc.oid = i.indclass[0]
     WHERE am.amname = 'gin' AND oc.opcname = 'jsonb_ops' AND a.attname = 'labels'
       AND i.indnatts = 1 AND i.indpred IS NULL AND i.indexprs IS NULL
       AND ic.relname = tc.relname || '_labels_idx'
     ORDER BY 2
  LOOP
    BEGIN
      EXECUTE format('CREATE INDEX %I ON %s USING gin (labels jsonb_path_ops)',
                     'kwatch_036_' || r.rel::oid, r.rel);
      EXECUTE format('DROP INDEX %s', r.idx);
      EXECUTE format('ALTER INDEX k8s.%I RENAME TO %I', 'kwatch_036_' || r.rel::oid, r.idxname);
    EXCEPTION WHEN lock_not_available THEN
      RAISE WARNING 'kept the jsonb_ops index % of %: its table stayed locked for 5 s', r.idxname, r.rel
        USING HINT = format('Later, as the table''s owner: CREATE INDEX ON %s USING gin (labels jsonb_path_ops); DROP INDEX k8s.%I;',
                            r.rel, r.idxname);
    END;
  END LOOP;
  PERFORM set_config('lock_timeout', saved, true);
END
$$;

-- _lock_registration(id) -> void (C, src/common/catalog.c): takes watch
-- id's registration lock exclusively until the transaction ends, waiting
-- for the watch's batches in progress; the next ones wait behind it.
-- unwatch() and DROP SERVER ... CASCADE take it before they delete the
-- registration: while a list's batches are spread over several apply
-- workers (issue 36), their share locks on the row overlap, and a DELETE
-- waiting on the row alone would wait for the whole list.  EXECUTE is
-- revoked from PUBLIC (a role holding it would stall the watch).
CREATE FUNCTION @extschema@._lock_registration(id integer) RETURNS void
LANGUAGE C STRICT
AS 'MODULE_PATHNAME', 'kwatch_lock_registration';
REVOKE ALL ON FUNCTION @extschema@._lock_registration(integer) FROM PUBLIC;
