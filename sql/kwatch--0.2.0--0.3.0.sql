-- kwatch 0.2.0 -> 0.3.0: cluster history in SQL (issue 11).
--
-- A mirror table with history keeps k8s.<table>_history: one row per
-- version of each object, its validity as a tstzrange from the moment the
-- change was applied, written by a trigger in the transaction that changed
-- the mirror row (so a NOTIFY, the row and its history commit together).

\echo Use "ALTER EXTENSION kwatch UPDATE TO '0.3.0'" to load this file. \quit

-- Mirror tables with history, and how long they keep closed versions.
-- Read by the worker, which prunes them (src/history.c).
CREATE TABLE @extschema@.history_tables (
    table_name    text PRIMARY KEY,       -- the mirror table, in schema k8s
    history_table text NOT NULL,          -- in schema k8s
    history_oid   oid NOT NULL,           -- that table, as kwatch created it
    enabled       boolean NOT NULL DEFAULT true,  -- the trigger is on
    retention     interval,               -- closed versions older than this go; NULL: kept
    max_rows      bigint CHECK (max_rows > 0),  -- at most this many rows; NULL: no limit
    CHECK (retention IS NULL OR retention > interval '0')
);
SELECT pg_catalog.pg_extension_config_dump('@extschema@.history_tables', '');
GRANT SELECT ON @extschema@.history_tables TO PUBLIC;

-- _change_origin(): why the worker is changing mirror rows right now, in
-- this process: 'watch' (an event, or a LIST that found the object), 'relist'
-- (rows a LIST no longer had: client-go's DeletedFinalStateUnknown) or
-- 'unwatch' (a watch removed with its rows).  src/history.c.
CREATE FUNCTION @extschema@._change_origin() RETURNS text
AS 'MODULE_PATHNAME', 'kwatch_change_origin'
LANGUAGE C;

-- _history_trigger(): AFTER INSERT/UPDATE/DELETE FOR EACH ROW on a mirror
-- table, TG_ARGV[0] its history table (qualified and quoted).  INSERT opens
-- a version (change ADDED); UPDATE closes the open one and opens the next
-- (MODIFIED); DELETE closes it, noting how the object went (`deletion`:
-- DELETED seen by a watch, DELETED_FINAL_STATE_UNKNOWN inferred by a relist,
-- UNWATCHED when its watch was removed).  A version closes where the next
-- opens, so the ranges of one object never overlap nor leave gaps; the
-- clock is clock_timestamp(), kept strictly increasing per object so that a
-- version changed twice in one transaction still has a non-empty range.
-- Runs as whoever writes the mirror table: the worker writes it as the
-- table's owner (src/sync.c), who owns the history table too.
CREATE FUNCTION @extschema@._history_trigger() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  h text := TG_ARGV[0];
  at timestamptz := clock_timestamp();
  closed timestamptz;
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    EXECUTE format('UPDATE %s SET valid = tstzrange(lower(valid), greatest($3, lower(valid) + interval ''1 microsecond'')),'
                   ' deletion = $4 WHERE cluster = $1 AND uid = $2 AND upper_inf(valid) RETURNING upper(valid)', h)
      INTO closed
      USING OLD.cluster, OLD.uid, at,
            CASE WHEN TG_OP = 'UPDATE' THEN NULL
                 ELSE CASE @extschema@._change_origin()
                        WHEN 'relist' THEN 'DELETED_FINAL_STATE_UNKNOWN'
                        WHEN 'unwatch' THEN 'UNWATCHED'
                        ELSE 'DELETED' END
            END;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    EXECUTE format('INSERT INTO %s (cluster, uid, namespace, name, resource_version, valid, change, object)'
                   ' VALUES ($1, $2, $3, $4, $5, tstzrange($6, NULL), $7, $8)', h)
      USING NEW.cluster, NEW.uid, NEW.namespace, NEW.name, NEW.resource_version,
            COALESCE(closed, at), CASE TG_OP WHEN 'INSERT' THEN 'ADDED' ELSE 'MODIFIED' END,
            NEW.object;
  END IF;
  RETURN NULL;
END
$$;

-- _execute_as_owner(rel, sql) -> bigint: runs `sql` as the owner of `rel`
-- under SECURITY_RESTRICTED_OPERATION (src/sync.c); for kwatch's own
-- statements that read or alter a role's mirror table.
CREATE FUNCTION @extschema@._execute_as_owner(rel regclass, sql text) RETURNS bigint
AS 'MODULE_PATHNAME', 'kwatch_execute_as_owner'
LANGUAGE C STRICT;
REVOKE ALL ON FUNCTION @extschema@._execute_as_owner(regclass, text) FROM PUBLIC;

-- _history_enable(rel, retention, max_rows): gives mirror table `rel`
-- (k8s.<t>) its history table k8s.<t>_history (created when missing, owned
-- by rel's owner, with the indexes as-of and per-object queries need) and
-- the trigger, and records the retention.  Rows already in `rel` open
-- their first version now (change ADDED) in a history table made now; an
-- existing one (history turned off and on) continues, without the changes
-- made while it was off.  Called by _history_impl, which checked the caller.
CREATE FUNCTION @extschema@._history_enable(rel regclass, retention interval, max_rows bigint)
RETURNS regclass
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  t text := (SELECT c.relname FROM pg_class c WHERE c.oid = rel);
  h text := t || '_history';
  owner regrole := (SELECT c.relowner FROM pg_class c WHERE c.oid = rel)::regrole;
  hrel regclass;
  created boolean := false;
BEGIN
  IF octet_length(h) > 63 THEN
    RAISE EXCEPTION 'history table name "%" is too long', h
      USING ERRCODE = 'name_too_long',
            HINT = 'Mirror tables with history need names of at most 55 bytes (table_name => ...).';
  END IF;
  IF to_regclass(format('k8s.%I', h)) IS NULL THEN
    EXECUTE format($t$
      CREATE TABLE k8s.%1$I (
        id               bigint GENERATED ALWAYS AS IDENTITY,
        cluster          text NOT NULL,
        uid              text NOT NULL,
        namespace        text,
        name             text NOT NULL,
        resource_version text NOT NULL,
        valid            tstzrange NOT NULL,
        change           text NOT NULL CHECK (change IN ('ADDED', 'MODIFIED')),
        deletion         text CHECK (deletion IN ('DELETED', 'DELETED_FINAL_STATE_UNKNOWN', 'UNWATCHED')),
        object           jsonb NOT NULL,
        PRIMARY KEY (cluster, id)
      )$t$, h);
    EXECUTE format('CREATE INDEX ON k8s.%I USING gist (valid)', h);
    EXECUTE format('CREATE INDEX ON k8s.%I (cluster, uid, lower(valid))', h);
    EXECUTE format('CREATE UNIQUE INDEX ON k8s.%I (cluster, uid) WHERE upper_inf(valid)', h);
    EXECUTE format('COMMENT ON TABLE k8s.%I IS %L', h, format('kwatch history of k8s.%s', t));
    EXECUTE format('ALTER TABLE k8s.%I OWNER TO %s', h, owner);
    created := true;
  ELSIF NOT EXISTS (SELECT 1 FROM @extschema@.history_tables x, pg_class c
                   WHERE x.table_name = t AND c.oid = x.history_oid
                     AND c.oid = format('k8s.%I', h)::regclass AND c.relowner = owner) THEN
    -- only the table kwatch made as this mirror table's history, and only
    -- while both have one owner: another role's table of that name (made
    -- in advance, or left by a dropped mirror table) would get the rows
    -- and run its owner's triggers with the writer's rights
    RAISE EXCEPTION 'table k8s.% exists and is not the history of k8s.%', h, t
      USING ERRCODE = 'duplicate_table',
            HINT = 'Drop or rename it, or give the mirror table another table_name.';
  END IF;
  hrel := format('k8s.%I', h)::regclass;
  IF NOT EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgrelid = rel AND g.tgname = 'kwatch_history') THEN
    EXECUTE format('CREATE TRIGGER kwatch_history AFTER INSERT OR UPDATE OR DELETE ON %s'
                   ' FOR EACH ROW EXECUTE FUNCTION @extschema@._history_trigger(%L)', rel, hrel::text);
    -- What the table holds now is the first version of each object.  Only
    -- into a history table made just now: an older one may carry its
    -- owner's triggers, which must never run with this function's rights.
    IF created THEN
      -- as the mirror table's owner: its columns' types, casts and
      -- inheriting tables are the owner's code and credentials
      PERFORM @extschema@._execute_as_owner(rel, format(
        'INSERT INTO %s (cluster, uid, namespace, name, resource_version, valid, change, object)'
        ' SELECT m.cluster, m.uid, m.namespace, m.name, m.resource_version, tstzrange(now(), NULL),'
        ' ''ADDED'', m.object FROM ONLY %s m', hrel, rel));
    END IF;
  END IF;
  INSERT INTO @extschema@.history_tables AS x (table_name, history_table, history_oid, retention,
                                                max_rows, enabled)
  VALUES (t, h, hrel, retention, max_rows, true)
  ON CONFLICT (table_name) DO UPDATE SET retention = EXCLUDED.retention, max_rows = EXCLUDED.max_rows,
                                         history_table = EXCLUDED.history_table,
                                         history_oid = EXCLUDED.history_oid, enabled = true;
  RETURN hrel;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._history_enable(regclass, interval, bigint) FROM PUBLIC;

-- _history_impl(table_name, enabled, retention, max_rows): see history()
-- below.  Only the mirror table's owner (or a member of it) and superusers
-- (insufficient_privilege).
CREATE FUNCTION @extschema@._history_impl(table_name regclass, enabled boolean DEFAULT true,
                                          retention interval DEFAULT NULL,
                                          max_rows bigint DEFAULT NULL)
RETURNS regclass
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  t text;
  owner oid;
BEGIN
  SELECT c.relname, c.relowner INTO t, owner FROM pg_class c
  WHERE c.oid = table_name AND c.relnamespace = 'k8s'::regnamespace;
  IF NOT FOUND OR COALESCE(obj_description(table_name, 'pg_class'), '') NOT LIKE 'kwatch mirror of %' THEN
    RAISE EXCEPTION '% is not a kwatch mirror table', table_name
      USING ERRCODE = 'wrong_object_type';
  END IF;
  IF NOT pg_has_role(@extschema@._caller(), owner, 'USAGE') THEN
    RAISE EXCEPTION 'must be owner of table % to change its history', table_name
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF enabled THEN
    RETURN @extschema@._history_enable(table_name, retention, max_rows);
  END IF;
  EXECUTE format('DROP TRIGGER IF EXISTS kwatch_history ON %s', table_name);
  UPDATE @extschema@.history_tables x SET enabled = false WHERE x.table_name = t;
  RETURN to_regclass(format('k8s.%I', t || '_history'));
END
$$;
REVOKE ALL ON FUNCTION @extschema@._history_impl(regclass, boolean, interval, bigint) FROM PUBLIC;

-- history(table_name, enabled => true, retention => NULL, max_rows => NULL)
-- -> regclass: turns the history of mirror table `table_name` on (creating
-- k8s.<table>_history; a second call changes the retention) or off (the
-- trigger goes, the history table and its rows stay: DROP it when it is no
-- longer wanted).  Returns the history table.  Run as watch() is
-- (src/privileged.c); granted like watch().
CREATE FUNCTION @extschema@.history(table_name regclass, enabled boolean DEFAULT true,
                                    retention interval DEFAULT NULL,
                                    max_rows bigint DEFAULT NULL)
RETURNS regclass
AS 'MODULE_PATHNAME', 'kwatch_privileged_entry'
LANGUAGE C;
REVOKE ALL ON FUNCTION @extschema@.history(regclass, boolean, interval, bigint) FROM PUBLIC;

-- watch() gains history, history_retention and history_max_rows: its
-- implementation is 0.2.0's (the resource resolved, the caller's rights on
-- the table checked, the registration stored) with history enabled last,
-- also for a watch that exists already.  The EXECUTE grants of the old
-- watch() pass to the new one.
DROP FUNCTION @extschema@._watch_impl(text, text, text, text, text, boolean, text, boolean,
                                      text, @extschema@.interval_range, @extschema@.interval_range);

CREATE FUNCTION @extschema@._watch_impl(resource text,
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
                      history_max_rows bigint DEFAULT NULL)
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
  skipped text[];
BEGIN
  IF NOT COALESCE(history, false) AND (history_retention IS NOT NULL OR history_max_rows IS NOT NULL) THEN
    RAISE EXCEPTION 'history_retention and history_max_rows need history => true'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  label_selector := NULLIF(btrim(label_selector), '');
  field_selector := NULLIF(btrim(field_selector), '');
  namespace := NULLIF(btrim(namespace), '');

  IF namespace IS NOT NULL AND namespace !~ '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$' THEN
    RAISE EXCEPTION 'invalid namespace name "%"', namespace
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'Namespace names are DNS labels: lower-case letters, digits and "-".';
  END IF;

  d := @extschema@._discover(srv, resource);
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
    RAISE EXCEPTION 'invalid notify_payload "%"', notify_payload
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'Use ''full'' (identity of each change) or ''minimal'' (seq and type only).';
  END IF;

  PERFORM @extschema@._check_retry_range('retry_relist_after', retry_relist_after);
  PERFORM @extschema@._check_retry_range('retry_watch_after', retry_watch_after);

  SELECT * INTO existing FROM @extschema@.registrations r
  WHERE r.server = srv AND r.api_group = d.api_group AND r.plural = d.plural;
  IF FOUND THEN
    IF existing.namespace IS NOT DISTINCT FROM namespace
       AND existing.label_selector IS NOT DISTINCT FROM label_selector
       AND existing.field_selector IS NOT DISTINCT FROM field_selector
       AND existing.notify = _watch_impl.notify
       AND existing.secret_data = COALESCE(_watch_impl.secret_data, false)
       AND existing.notify_payload = _watch_impl.notify_payload
       AND existing.retry_relist_after IS NOT DISTINCT FROM _watch_impl.retry_relist_after
       AND existing.retry_watch_after IS NOT DISTINCT FROM _watch_impl.retry_watch_after
       AND (_watch_impl.table_name IS NULL OR existing.table_name = _watch_impl.table_name) THEN
      rel := format('k8s.%I', existing.table_name)::regclass;
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
    RAISE EXCEPTION '% is already watched on server "%" with other settings', canonical, srv
      USING ERRCODE = 'duplicate_object',
            HINT = format('Call @extschema@.unwatch(%L, server => %L) first.', canonical, srv);
  END IF;

  -- The server validates selectors, namespace and permissions for us.
  PERFORM @extschema@._probe(srv, d.api_group, d.api_version, d.plural, namespace,
                        label_selector, field_selector);

  -- Table: the one this resource already has (watched on another server),
  -- else the plural, else the plural qualified by the group on a collision.
  SELECT r.table_name INTO tbl FROM @extschema@.registrations r
  WHERE r.api_group = d.api_group AND r.plural = d.plural LIMIT 1;
  IF _watch_impl.table_name IS NOT NULL THEN
    IF tbl IS NOT NULL AND tbl <> _watch_impl.table_name THEN
      RAISE EXCEPTION '% is already mirrored into table k8s.%', canonical, tbl
        USING ERRCODE = 'duplicate_object',
              HINT = 'The same resource on several servers shares one table; leave out table_name.';
    END IF;
    IF EXISTS (SELECT 1 FROM @extschema@.registrations r
               WHERE r.table_name = _watch_impl.table_name
                 AND (r.api_group, r.plural) <> (d.api_group, d.plural))
       OR (to_regclass(format('k8s.%I', _watch_impl.table_name)) IS NOT NULL
           AND obj_description(to_regclass(format('k8s.%I', _watch_impl.table_name)), 'pg_class')
               IS DISTINCT FROM format('kwatch mirror of %s (%s)', d.plural,
                   CASE d.api_group WHEN '' THEN d.api_version
                        ELSE d.api_group || '/' || d.api_version END)) THEN
      RAISE EXCEPTION 'table k8s.% is not a mirror of %', _watch_impl.table_name, canonical
        USING ERRCODE = 'duplicate_table',
              HINT = 'Choose another table_name; one table mirrors one resource.';
    END IF;
    tbl := _watch_impl.table_name;
  ELSIF tbl IS NULL THEN
    tbl := d.plural;
    IF EXISTS (SELECT 1 FROM @extschema@.registrations r
               WHERE r.table_name = tbl AND (r.api_group, r.plural) <> (d.api_group, d.plural))
       OR (to_regclass(format('k8s.%I', tbl)) IS NOT NULL
           AND obj_description(to_regclass(format('k8s.%I', tbl)), 'pg_class')
               IS DISTINCT FROM format('kwatch mirror of %s (%s)', d.plural,
                   CASE d.api_group WHEN '' THEN d.api_version
                        ELSE d.api_group || '/' || d.api_version END)) THEN
      tbl := d.plural || '_' || replace(replace(d.api_group, '.', '_'), '-', '_');
      IF d.api_group = '' THEN
        tbl := d.plural || '_core';
      END IF;
    END IF;
  END IF;
  -- in bytes: the channel 'kwatch_' || tbl must fit in an identifier
  -- (NAMEDATALEN - 1 = 63 bytes), and a longer table name would be cut
  IF octet_length(tbl) > 56 THEN
    RAISE EXCEPTION 'table name "%" is too long', tbl
      USING ERRCODE = 'name_too_long', HINT = 'Pass a shorter table_name => ''...''.';
  END IF;

  -- A new mirror table belongs to the registering role: the worker writes
  -- it as its owner (src/sync.c), so a trigger on it runs with the owner's
  -- rights, never a superuser's.  Another role's existing table takes only
  -- the watches of roles that may write it.
  IF to_regclass(format('k8s.%I', tbl)) IS NULL THEN
    rel := @extschema@.create_mirror_table(tbl, d.api_group, d.api_version, d.plural);
    EXECUTE format('ALTER TABLE %s OWNER TO %s', rel, d.caller::regrole);
    EXECUTE format('GRANT USAGE ON SCHEMA k8s TO %s', d.caller::regrole);
  ELSE
    rel := @extschema@.create_mirror_table(tbl, d.api_group, d.api_version, d.plural);
    IF NOT pg_has_role(d.caller, (SELECT relowner FROM pg_class WHERE oid = rel), 'USAGE')
       AND NOT (has_table_privilege(d.caller, rel, 'INSERT')
                AND has_table_privilege(d.caller, rel, 'UPDATE')
                AND has_table_privilege(d.caller, rel, 'DELETE')) THEN
      RAISE EXCEPTION 'permission denied for table %', rel
        USING ERRCODE = 'insufficient_privilege',
              DETAIL = format('%s mirrors %s for another role; the worker would write your rows as its owner.',
                              rel, canonical),
              HINT = 'Its owner can GRANT INSERT, UPDATE, DELETE on it, or pass table_name => for a table of your own.';
    END IF;
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
     secret_data, notify_payload, retry_relist_after, retry_watch_after)
  VALUES (srv, canonical, d.api_group, d.api_version, d.plural, d.kind, d.namespaced,
          namespace, label_selector, field_selector, tbl, 'kwatch_' || tbl,
          _watch_impl.notify, d.caller, COALESCE(_watch_impl.secret_data, false), _watch_impl.notify_payload,
          _watch_impl.retry_relist_after, _watch_impl.retry_watch_after);

  IF _watch_impl.history THEN
    PERFORM @extschema@._history_impl(rel, true, history_retention, history_max_rows);
  END IF;
  PERFORM @extschema@._wake_at_commit();
  RETURN rel;
END
$$;

REVOKE ALL ON FUNCTION @extschema@._watch_impl(text, text, text, text, text, boolean, text, boolean,
                                               text, @extschema@.interval_range,
                                               @extschema@.interval_range, boolean, interval, bigint)
  FROM PUBLIC;

CREATE TEMP TABLE kwatch_watch_grants AS
  SELECT a.grantee FROM pg_catalog.pg_proc p, LATERAL pg_catalog.aclexplode(p.proacl) a
  WHERE p.oid = '@extschema@.watch(text, text, text, text, text, boolean, text, boolean, text,
                                   @extschema@.interval_range, @extschema@.interval_range)'::regprocedure
    AND a.privilege_type = 'EXECUTE'
    AND a.grantee <> (SELECT e.extowner FROM pg_catalog.pg_extension e WHERE e.extname = 'kwatch');
DROP FUNCTION @extschema@.watch(text, text, text, text, text, boolean, text, boolean, text,
                                @extschema@.interval_range, @extschema@.interval_range);

-- watch(...): see _watch_impl above; run as a C entry point that checks
-- its caller (src/privileged.c).
CREATE FUNCTION @extschema@.watch(resource text,
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
                      history_max_rows bigint DEFAULT NULL)
RETURNS regclass
AS 'MODULE_PATHNAME', 'kwatch_privileged_entry'
LANGUAGE C;
REVOKE ALL ON FUNCTION @extschema@.watch(text, text, text, text, text, boolean, text, boolean, text,
                                         @extschema@.interval_range, @extschema@.interval_range,
                                         boolean, interval, bigint) FROM PUBLIC;
DO $$
DECLARE
  g oid;
BEGIN
  FOR g IN SELECT grantee FROM kwatch_watch_grants LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION @extschema@.watch(text, text, text, text, text, boolean,'
                   ' text, boolean, text, @extschema@.interval_range, @extschema@.interval_range, boolean,'
                   ' interval, bigint) TO %s',
                   CASE g WHEN 0 THEN 'PUBLIC' ELSE g::regrole::text END);
    EXECUTE format('GRANT EXECUTE ON FUNCTION @extschema@.history(regclass, boolean, interval, bigint) TO %s',
                   CASE g WHEN 0 THEN 'PUBLIC' ELSE g::regrole::text END);
  END LOOP;
END
$$;
DROP TABLE kwatch_watch_grants;

-- as_of(table_name, at) -> the objects mirror table `table_name` held at
-- `at`, from its history: one row per object whose version was valid then.
-- Runs with the caller's rights (SELECT on the history table).
CREATE FUNCTION @extschema@.as_of(table_name regclass, at timestamptz)
RETURNS TABLE (cluster text, namespace text, name text, uid text, resource_version text,
               object jsonb, valid tstzrange)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  h text;
BEGIN
  SELECT x.history_table INTO h FROM @extschema@.history_tables x
  WHERE to_regclass(format('k8s.%I', x.table_name)) = as_of.table_name;
  IF h IS NULL THEN
    h := (SELECT c.relname FROM pg_class c WHERE c.oid = as_of.table_name) || '_history';
    IF to_regclass(format('k8s.%I', h)) IS NULL THEN
      RAISE EXCEPTION '% has no history', as_of.table_name
        USING ERRCODE = 'undefined_table',
              HINT = 'Turn it on with kwatch.history(table) or kwatch.watch(..., history => true).';
    END IF;
  END IF;
  RETURN QUERY EXECUTE format('SELECT h.cluster, h.namespace, h.name, h.uid, h.resource_version, h.object, h.valid'
                              ' FROM k8s.%I h WHERE h.valid @> $1', h)
    USING at;
END
$$;

-- object_diff(old, new) -> one row per path whose value differs between
-- two versions of an object (path as text[], old and new value; NULL where
-- a key is absent): objects are compared key by key, anything else (arrays,
-- scalars) as a whole.  metadata.resourceVersion and metadata.generation
-- differ between any two versions and are left out, as
-- metadata.managedFields is from every stored object.
CREATE FUNCTION @extschema@.object_diff(old jsonb, new jsonb)
RETURNS TABLE (path text[], old_value jsonb, new_value jsonb)
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
  WITH RECURSIVE d(path, o, n) AS (
    SELECT ARRAY[]::text[], old, new
    UNION ALL
    SELECT d.path || k.key, d.o -> k.key, d.n -> k.key
    FROM d,
         LATERAL (SELECT jsonb_object_keys(CASE jsonb_typeof(d.o) WHEN 'object' THEN d.o ELSE '{}' END) AS key
                  UNION
                  SELECT jsonb_object_keys(CASE jsonb_typeof(d.n) WHEN 'object' THEN d.n ELSE '{}' END)) k
    WHERE jsonb_typeof(d.o) = 'object' AND jsonb_typeof(d.n) = 'object'
      AND d.o IS DISTINCT FROM d.n
  )
  SELECT d.path, d.o, d.n FROM d
  WHERE d.o IS DISTINCT FROM d.n
    AND NOT COALESCE(jsonb_typeof(d.o) = 'object' AND jsonb_typeof(d.n) = 'object', false)
    AND d.path NOT IN (ARRAY['metadata', 'resourceVersion'], ARRAY['metadata', 'generation'])
  ORDER BY d.path
$$;

-- ---------------------------------------------------------------------
-- Typed columns for custom resources (issue 11): the columns `kubectl get`
-- shows for a CRD (its version's additionalPrinterColumns) become generated
-- columns of the mirror table, and of live tables of it.
-- ---------------------------------------------------------------------

-- The printer columns of the custom resources watched so far, as column
-- definitions in the form typed_columns() gives them; `skipped` says which
-- printer columns could not be expressed, and why.
CREATE TABLE @extschema@.printer_columns (
    api_group   text NOT NULL,
    plural      text NOT NULL,
    api_version text NOT NULL,
    columns     text[] NOT NULL,
    skipped     text[] NOT NULL DEFAULT '{}',
    PRIMARY KEY (api_group, plural)
);
SELECT pg_catalog.pg_extension_config_dump('@extschema@.printer_columns', '');
GRANT SELECT ON @extschema@.printer_columns TO PUBLIC;

-- _printer_columns(server, api_group, plural, api_version) -> jsonb: the
-- CRD's additionalPrinterColumns for that version, read as the caller of
-- watch(); NULL when it is no CRD or the caller may not read CRDs
-- (src/discovery.c).
CREATE FUNCTION @extschema@._printer_columns(server text, api_group text, plural text,
                                             api_version text)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'kwatch_printer_columns'
LANGUAGE C STRICT;
REVOKE ALL ON FUNCTION @extschema@._printer_columns(text, text, text, text) FROM PUBLIC;

-- jsonb_integer / jsonb_number / jsonb_boolean / jsonb_timestamp(value):
-- a JSON value as the printer column type says (integer, number, boolean,
-- date), NULL when it is absent or of another kind.  Never an error: a
-- generated column that raised would stop its watch on one odd object.
CREATE FUNCTION @extschema@.jsonb_integer(jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE WHEN jsonb_typeof($1) = 'number' THEN
           CASE WHEN $1::numeric BETWEEN -9223372036854775808 AND 9223372036854775807
                THEN trunc($1::numeric)::bigint END END
$$;
CREATE FUNCTION @extschema@.jsonb_number(jsonb) RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE WHEN jsonb_typeof($1) = 'number' THEN
           CASE WHEN abs($1::numeric) < 1e300 THEN $1::double precision END END
$$;
CREATE FUNCTION @extschema@.jsonb_boolean(jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT CASE WHEN jsonb_typeof($1) = 'boolean' THEN $1::boolean END $$;
-- an RFC 3339 date-time ("2024-05-01T10:00:00Z"), as Kubernetes writes them
CREATE FUNCTION @extschema@.jsonb_timestamp(jsonb) RETURNS timestamptz
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF jsonb_typeof($1) IS DISTINCT FROM 'string'
     OR ($1 #>> '{}'::text[]) !~ '^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$' THEN
    RETURN NULL;
  END IF;
  RETURN ($1 #>> '{}'::text[])::timestamptz;
EXCEPTION WHEN datetime_field_overflow OR invalid_datetime_format THEN
  RETURN NULL;
END
$$;

-- _printer_column_defs(columns jsonb, taken text[]) -> (defs, skipped):
-- additionalPrinterColumns as generated column definitions.  A column's
-- name is the printer column's, lower-cased, runs of other characters as
-- "_" ("Cron Spec" -> cron_spec; a keyword gets a "_" appended); its type
-- string -> text, integer -> bigint, number -> double precision, boolean
-- -> boolean, date -> timestamptz; its value the jsonPath, which must be a
-- simple path of fields and indexes (.spec.replicas,
-- .status.conditions[0].status, .metadata.labels['app.kubernetes.io/name'];
-- the JSONPath subset CRDs use: k8s.io/client-go/util/jsonpath).  Columns
-- whose path needs more (filters, wildcards, ranges), whose type is unknown
-- or whose name is taken (`taken`: the base columns) are skipped, each
-- with the reason.
CREATE FUNCTION @extschema@._printer_column_defs(columns jsonb, taken text[],
                                                 OUT defs text[], OUT skipped text[])
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  c jsonb;
  col text;
  path text;
  elems text[];
  expr text;
  typ text;
BEGIN
  defs := '{}';
  skipped := '{}';
  FOR c IN SELECT * FROM jsonb_array_elements(COALESCE(columns, '[]')) LOOP
    col := btrim(lower(regexp_replace(COALESCE(c->>'name', ''), '[^A-Za-z0-9]+', '_', 'g')), '_');
    IF col ~ '^[0-9]' THEN
      col := 'c_' || col;
    END IF;
    IF col <> '' AND quote_ident(col) <> col THEN
      col := col || '_';
    END IF;
    path := btrim(COALESCE(c->>'jsonPath', ''));
    IF path LIKE '{%}' THEN
      path := substr(path, 2, length(path) - 2);
    END IF;
    IF col = '' OR octet_length(col) > 63 THEN
      skipped := skipped || format('%s: no usable column name', c->>'name');
      CONTINUE;
    END IF;
    IF col = ANY (taken) THEN
      skipped := skipped || format('%s: column %s exists already', c->>'name', col);
      CONTINUE;
    END IF;
    IF path !~ '^(\.[A-Za-z0-9_-]+|\[[0-9]+\]|\[''[^'']+''\])+$' THEN
      skipped := skipped || format('%s: JSONPath %s is not a simple path of fields and indexes',
                                   c->>'name', c->>'jsonPath');
      CONTINUE;
    END IF;
    SELECT array_agg(COALESCE(m[1], m[2], m[3]) ORDER BY n) INTO elems
    FROM regexp_matches(path, '\.([A-Za-z0-9_-]+)|\[([0-9]+)\]|\[''([^'']+)''\]', 'g')
         WITH ORDINALITY AS x(m, n);
    CASE c->>'type'
      WHEN 'string' THEN typ := 'text'; expr := format('object #>> %L', elems::text);
      WHEN 'integer' THEN typ := 'bigint'; expr := format('kwatch.jsonb_integer(object #> %L)', elems::text);
      WHEN 'number' THEN typ := 'double precision'; expr := format('kwatch.jsonb_number(object #> %L)', elems::text);
      WHEN 'boolean' THEN typ := 'boolean'; expr := format('kwatch.jsonb_boolean(object #> %L)', elems::text);
      WHEN 'date' THEN typ := 'timestamptz'; expr := format('kwatch.jsonb_timestamp(object #> %L)', elems::text);
      ELSE
        skipped := skipped || format('%s: type %s is not one of string, integer, number, boolean, date',
                                     c->>'name', c->>'type');
        CONTINUE;
    END CASE;
    defs := defs || format('%s %s GENERATED ALWAYS AS (%s) STORED', col, typ, expr);
    taken := taken || col;
  END LOOP;
END
$$;

-- typed_columns() now adds the printer columns of the custom resources
-- watched so far; the built-in resources' columns are 0.1.0's.
ALTER FUNCTION @extschema@.typed_columns(text, text) RENAME TO _builtin_columns;
CREATE FUNCTION @extschema@.typed_columns(api_group text, plural text) RETURNS text[]
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT @extschema@._builtin_columns(api_group, plural)
         || COALESCE((SELECT p.columns FROM @extschema@.printer_columns p
                      WHERE p.api_group = typed_columns.api_group AND p.plural = typed_columns.plural),
                     '{}')
$$;
ALTER FUNCTION @extschema@.live_columns(text, text) STABLE;

-- _refresh_printer_columns(server, api_group, plural, api_version,
-- table_name): reads the CRD's printer columns as the caller of watch()
-- and stores them; columns of a former definition that the new one no
-- longer has (changed path, type or name) are dropped from the mirror
-- table k8s.<table_name>, so that create_mirror_table or
-- restore_generated_columns adds the new ones.  Rows are kept.  Nothing
-- happens for a resource that is no CRD.  Returns the skipped columns.
CREATE FUNCTION @extschema@._refresh_printer_columns(server text, api_group text, plural text,
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
REVOKE ALL ON FUNCTION @extschema@._refresh_printer_columns(text, text, text, text, text) FROM PUBLIC;
