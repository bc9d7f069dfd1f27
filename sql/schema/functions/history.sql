-- ---------------------------------------------------------------------
-- History: a mirror table with history keeps k8s.<table>_history, one row
-- per version of each object, its validity as a tstzrange from the moment
-- the change was applied, written by a trigger in the transaction that
-- changed the mirror row (so a NOTIFY, the row and its history commit
-- together).  kwatch.history_tables lists them; the worker prunes them
-- (src/apply/history.c).
-- ---------------------------------------------------------------------

-- _change_origin(): why the worker is changing mirror rows right now, in
-- this process: 'watch' (an event, or a LIST that found the object), 'relist'
-- (rows a LIST no longer had: client-go's DeletedFinalStateUnknown) or
-- 'unwatch' (a watch removed with its rows).  src/apply/history.c.
CREATE OR REPLACE FUNCTION kwatch._change_origin() RETURNS text
    LANGUAGE c
    AS 'MODULE_PATHNAME', 'kwatch_change_origin';

-- _change_managers(uid, resource_version) -> jsonb: the summary of the
-- metadata.managedFields of that version of an object, [{manager,
-- operation, time, subresource}, ...] in the object's order, when this
-- process (the kwatch worker) is writing it in this transaction; else
-- NULL (another session's write, a version a relist merged, an object
-- without managedFields).  For the history trigger.  src/apply/history.c.
CREATE OR REPLACE FUNCTION kwatch._change_managers(uid text, resource_version text) RETURNS jsonb
    LANGUAGE c
    AS 'MODULE_PATHNAME', 'kwatch_change_managers';

-- _history_managers(managers, previous) -> jsonb: `managers`
-- (_change_managers) with "changed" in each entry: true when the previous
-- version's summary `previous` has no such entry (same manager,
-- operation, time and subresource: new, or its time moved: that manager
-- wrote this change); without a previous summary (the first version, or
-- one written before 0.8.0 or merged by a relist) true for the entries of
-- the newest time.  NULL when `managers` is NULL.  The rule of
-- apimachinery meta/v1 ManagedFieldsEntry.Time: set when the entry's
-- manager changes a field it owns.
CREATE OR REPLACE FUNCTION kwatch._history_managers(managers jsonb, previous jsonb) RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT jsonb_agg(e || jsonb_build_object('changed',
           CASE WHEN jsonb_typeof(previous) = 'array'
                THEN NOT EXISTS (SELECT 1 FROM jsonb_array_elements(previous) p WHERE p - 'changed' = e)
                ELSE e->>'time' IS NOT DISTINCT FROM
                     (SELECT max(m->>'time') FROM jsonb_array_elements(managers) m) END)
           ORDER BY o)
    FROM jsonb_array_elements(CASE WHEN jsonb_typeof(managers) = 'array' THEN managers ELSE '[]' END)
         WITH ORDINALITY AS x(e, o)
   WHERE jsonb_typeof(managers) = 'array'
$$;

-- _history_trigger(): AFTER INSERT/UPDATE/DELETE FOR EACH ROW on a mirror
-- table, TG_ARGV[0] its history table (qualified and quoted), TG_ARGV[1]
-- 'managers' when that table has the column managers (0.8.0: who changed
-- the object, _history_managers of _change_managers).  INSERT opens
-- a version (change ADDED); UPDATE closes the open one and opens the next
-- (MODIFIED); DELETE closes it, noting how the object went (`deletion`:
-- DELETED seen by a watch, DELETED_FINAL_STATE_UNKNOWN inferred by a relist,
-- UNWATCHED when its watch was removed).  A version closes where the next
-- opens, so the ranges of one object never overlap nor leave gaps; the
-- clock is clock_timestamp(), kept strictly increasing per object so that a
-- version changed twice in one transaction still has a non-empty range.
-- Runs as whoever writes the mirror table: the worker writes it as the
-- table's owner (src/apply/sync.c), who owns the history table too.
CREATE OR REPLACE FUNCTION kwatch._history_trigger() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
  h text := TG_ARGV[0];
  with_managers boolean := TG_NARGS > 1 AND TG_ARGV[1] = 'managers';
  at timestamptz := clock_timestamp();
  closed timestamptz;
  previous jsonb;
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    EXECUTE format('UPDATE %s SET valid = tstzrange(lower(valid), greatest($3, lower(valid) + interval ''1 microsecond'')),'
                   ' deletion = $4 WHERE cluster = $1 AND uid = $2 AND upper_inf(valid) RETURNING upper(valid), %s',
                   h, CASE WHEN with_managers THEN 'managers' ELSE 'NULL::jsonb' END)
      INTO closed, previous
      USING OLD.cluster, OLD.uid, at,
            CASE WHEN TG_OP = 'UPDATE' THEN NULL
                 ELSE CASE kwatch._change_origin()
                        WHEN 'relist' THEN 'DELETED_FINAL_STATE_UNKNOWN'
                        WHEN 'unwatch' THEN 'UNWATCHED'
                        ELSE 'DELETED' END
            END;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') AND with_managers THEN
    EXECUTE format('INSERT INTO %s (cluster, uid, namespace, name, resource_version, valid, change, object, managers)'
                   ' VALUES ($1, $2, $3, $4, $5, tstzrange($6, NULL), $7, $8, $9)', h)
      USING NEW.cluster, NEW.uid, NEW.namespace, NEW.name, NEW.resource_version,
            COALESCE(closed, at), CASE TG_OP WHEN 'INSERT' THEN 'ADDED' ELSE 'MODIFIED' END,
            NEW.object,
            kwatch._history_managers(kwatch._change_managers(NEW.uid, NEW.resource_version), previous);
  ELSIF TG_OP IN ('INSERT', 'UPDATE') THEN
    EXECUTE format('INSERT INTO %s (cluster, uid, namespace, name, resource_version, valid, change, object)'
                   ' VALUES ($1, $2, $3, $4, $5, tstzrange($6, NULL), $7, $8)', h)
      USING NEW.cluster, NEW.uid, NEW.namespace, NEW.name, NEW.resource_version,
            COALESCE(closed, at), CASE TG_OP WHEN 'INSERT' THEN 'ADDED' ELSE 'MODIFIED' END,
            NEW.object;
  END IF;
  RETURN NULL;
END
$_$;
REVOKE ALL ON FUNCTION kwatch._history_trigger() FROM PUBLIC;

-- _history_enable(rel, retention, max_rows): gives mirror table `rel`
-- (k8s.<t>) its history table k8s.<t>_history (created when missing, owned
-- by rel's owner, with the indexes as-of and per-object queries need) and
-- the trigger, and records the retention.  Rows already in `rel` open
-- their first version now (change ADDED) in a history table made now; an
-- existing one (history turned off and on) continues, without the changes
-- made while it was off.  A history table made for a mirror table with the
-- policy kwatch_rbac gets it too.  Called by _history_impl, which checked
-- the caller.
CREATE OR REPLACE FUNCTION kwatch._history_enable(rel regclass, retention interval, max_rows bigint) RETURNS regclass
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
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
        managers         jsonb,
        PRIMARY KEY (cluster, id)
      )$t$, h);
    EXECUTE format('CREATE INDEX ON k8s.%I USING gist (valid)', h);
    EXECUTE format('CREATE INDEX ON k8s.%I (cluster, uid, lower(valid))', h);
    EXECUTE format('CREATE UNIQUE INDEX ON k8s.%I (cluster, uid) WHERE upper_inf(valid)', h);
    EXECUTE format('COMMENT ON TABLE k8s.%I IS %L', h, format('kwatch history of k8s.%s', t));
    EXECUTE format('ALTER TABLE k8s.%I OWNER TO %s', h, owner);
    created := true;
  ELSIF NOT EXISTS (SELECT 1 FROM kwatch.history_tables x, pg_class c
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
    -- with 'managers' when the history table has that column (one made
    -- before 0.8.0 that the update could not change has not)
    EXECUTE format('CREATE TRIGGER kwatch_history AFTER INSERT OR UPDATE OR DELETE ON %s'
                   ' FOR EACH ROW EXECUTE FUNCTION kwatch._history_trigger(%L%s)', rel, hrel::text,
                   CASE WHEN EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = hrel
                                        AND a.attname = 'managers' AND NOT a.attisdropped
                                        AND a.atttypid = 'jsonb'::regtype)
                        THEN ', ''managers''' ELSE '' END);
    -- What the table holds now is the first version of each object.  Only
    -- into a history table made just now: an older one may carry its
    -- owner's triggers, which must never run with this function's rights.
    IF created THEN
      -- as the mirror table's owner: its columns' types, casts and
      -- inheriting tables are the owner's code and credentials
      PERFORM kwatch._execute_as_owner(rel, format(
        'INSERT INTO %s (cluster, uid, namespace, name, resource_version, valid, change, object)'
        ' SELECT m.cluster, m.uid, m.namespace, m.name, m.resource_version, tstzrange(now(), NULL),'
        ' ''ADDED'', m.object FROM ONLY %s m', hrel, rel));
    END IF;
  END IF;
  -- a mirror table whose rows follow RBAC (kwatch.enable_rbac_rows,
  -- functions/rbac_rows.sql) gives a history table made now the same
  -- policy: its versions are the same rows
  IF created AND EXISTS (SELECT 1 FROM pg_policy p WHERE p.polrelid = rel AND p.polname = 'kwatch_rbac') THEN
    EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', hrel);
    EXECUTE format('CREATE POLICY kwatch_rbac ON %s FOR SELECT USING '
                   '(kwatch.rbac_visible(%L::regclass, cluster, namespace))', hrel, hrel::text);
  END IF;
  INSERT INTO kwatch.history_tables AS x (table_name, history_table, history_oid, retention,
                                                max_rows, enabled)
  VALUES (t, h, hrel, retention, max_rows, true)
  ON CONFLICT (table_name) DO UPDATE SET retention = EXCLUDED.retention, max_rows = EXCLUDED.max_rows,
                                         history_table = EXCLUDED.history_table,
                                         history_oid = EXCLUDED.history_oid, enabled = true;
  RETURN hrel;
END
$_$;
REVOKE ALL ON FUNCTION kwatch._history_enable(regclass, interval, bigint) FROM PUBLIC;

-- history(table_name, enabled => true, retention => NULL, max_rows => NULL)
-- -> regclass: turns the history of mirror table `table_name` on (creating
-- k8s.<table>_history; a second call changes the retention) or off (the
-- trigger goes, the history table and its rows stay: DROP it when it is no
-- longer wanted).  Returns the history table.  Run as watch() is
-- (src/functions/privileged.c): _history_impl as the extension's owner;
-- granted like watch().
CREATE OR REPLACE FUNCTION kwatch.history(table_name regclass, enabled boolean DEFAULT true, retention interval DEFAULT NULL::interval, max_rows bigint DEFAULT NULL::bigint) RETURNS regclass
    LANGUAGE c
    AS 'MODULE_PATHNAME', 'kwatch_privileged_entry';
REVOKE ALL ON FUNCTION kwatch.history(regclass, boolean, interval, bigint) FROM PUBLIC;

-- history(table_name text, enabled => true, retention => NULL, max_rows =>
-- NULL, server => NULL) -> regclass: history() for a table or watch named
-- as unwatch() names one -- a mirror table with or without "k8s."
-- ("pods", "k8s.pods"), or a resource the caller watches ("po", "pod",
-- "deployments.apps"...) whose watches (on `server`, or on any server when
-- NULL) write one table; then history(regclass) on it, with the caller's
-- rights (EXECUTE on that one is what a superuser grants).  A quoted
-- literal chooses this one (PostgreSQL prefers text for an unknown
-- literal); a regclass value the other.  The matching is _watch_ids()'s
-- (kwatch.watches, the caller's own first).  ERRORs: 42704 no such server,
-- or nothing of that name; 42P08 the name means several tables (DETAIL:
-- them, HINT: name the table); history(regclass)'s.
CREATE OR REPLACE FUNCTION kwatch.history(table_name text, enabled boolean DEFAULT true, retention interval DEFAULT NULL::interval, max_rows bigint DEFAULT NULL::bigint, server text DEFAULT NULL::text) RETURNS regclass
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  srv text;
  rel regclass;
  tables text[];
  f text;
BEGIN
  IF history.server IS NOT NULL THEN
    srv := kwatch._server_named(history.server);
  END IF;
  IF srv IS NULL THEN
    FOREACH f IN ARRAY kwatch._table_forms(history.table_name) LOOP
      rel := to_regclass(format('k8s.%I', f));
      EXIT WHEN rel IS NOT NULL;
    END LOOP;
  END IF;
  IF rel IS NULL THEN
    SELECT array_agg(DISTINCT w.table_name ORDER BY w.table_name) INTO tables
    FROM (SELECT DISTINCT x.server FROM kwatch.watches x
          WHERE srv IS NULL OR x.server = srv) s
    CROSS JOIN LATERAL unnest(kwatch._watch_ids(history.table_name, s.server)) i(id)
    JOIN kwatch.watches w ON w.id = i.id;
    IF tables IS NULL THEN
      RAISE EXCEPTION 'no mirror table or watch "%"%', history.table_name,
                      COALESCE(format(' on server "%s"', srv), '')
        USING ERRCODE = 'undefined_object',
              HINT = 'kwatch.watches lists the watches you may see and their tables.';
    ELSIF cardinality(tables) > 1 THEN
      RAISE EXCEPTION '"%" means several mirror tables', history.table_name
        USING ERRCODE = 'ambiguous_parameter',
              DETAIL = format('Watches of it write %s.', array_to_string(tables, ', ')),
              HINT = 'Name the table (with or without k8s.), or pass server =>.';
    END IF;
    rel := tables[1]::regclass;
  END IF;
  RETURN kwatch.history(rel, enabled, retention, max_rows);
END
$$;

-- as_of(table_name, at) -> the objects mirror table `table_name` held at
-- `at`, from the history table kwatch made for it (kwatch.history_tables,
-- by OID): one row per object whose version was valid then.  The caller
-- needs SELECT on the history table; the rows are read as that table's
-- owner under a security-restricted operation after its kind and column
-- types are checked (src/functions/owner_functions.c), so no code of the
-- owner's runs with the caller's rights.  ERRORs: 42P01 no history; 42809
-- the history table was replaced (a view, a column of another type); 42501
-- no SELECT; 0A000 row security the caller is subject to.
CREATE OR REPLACE FUNCTION kwatch.as_of(table_name regclass, at timestamptz)
RETURNS TABLE (cluster text, namespace text, name text, uid text,
               resource_version text, object jsonb, valid tstzrange)
AS 'MODULE_PATHNAME', 'kwatch_as_of'
LANGUAGE C STABLE STRICT;

-- object_diff(old, new) -> one row per path whose value differs between
-- two versions of an object (path as text[], old and new value; NULL where
-- a key is absent): objects are compared key by key, anything else (arrays,
-- scalars) as a whole.  metadata.resourceVersion and metadata.generation
-- differ between any two versions and are left out, as
-- metadata.managedFields is from every stored object.
CREATE OR REPLACE FUNCTION kwatch.object_diff(old jsonb, new jsonb) RETURNS TABLE(path text[], old_value jsonb, new_value jsonb)
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
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

-- _history_impl(table_name, enabled, retention, max_rows): history()'s
-- work, run as the extension's owner for the caller: checks that
-- `table_name` is a mirror table kwatch made (kwatch.tables, by OID) and
-- that the caller has its owner's privileges (pg_has_role USAGE: a member
-- of the owner, or a superuser), then turns its history on
-- (_history_enable) or off.  ERRORs: 42809 not a kwatch mirror table,
-- 42501 not its owner's role.
CREATE OR REPLACE FUNCTION kwatch._history_impl(table_name regclass, enabled boolean DEFAULT true, retention interval DEFAULT NULL::interval, max_rows bigint DEFAULT NULL::bigint) RETURNS regclass
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  t text;
  owner oid;
BEGIN
  SELECT c.relname, c.relowner INTO t, owner FROM pg_class c
  WHERE c.oid = table_name AND c.relnamespace = 'k8s'::regnamespace;
  IF NOT FOUND OR NOT EXISTS (SELECT 1 FROM kwatch._mirror_table(table_name)) THEN
    RAISE EXCEPTION '% is not a kwatch mirror table', table_name
      USING ERRCODE = 'wrong_object_type';
  END IF;
  IF NOT pg_has_role(kwatch._caller(), owner, 'USAGE') THEN
    RAISE EXCEPTION 'must be owner of table % to change its history', table_name
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF enabled THEN
    RETURN kwatch._history_enable(table_name, retention, max_rows);
  END IF;
  EXECUTE format('DROP TRIGGER IF EXISTS kwatch_history ON %s', table_name);
  UPDATE kwatch.history_tables x SET enabled = false WHERE x.table_name = t;
  RETURN to_regclass(format('k8s.%I', t || '_history'));
END
$$;
REVOKE ALL ON FUNCTION kwatch._history_impl(regclass, boolean, interval, bigint) FROM PUBLIC;
