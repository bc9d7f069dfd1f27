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
