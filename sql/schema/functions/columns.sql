-- ---------------------------------------------------------------------
-- The columns of mirror tables (and of the live tables that show the
-- same): the base columns every table has, the generated columns of a
-- built-in resource, a CRD's printer columns as generated columns, and the
-- functions those generated columns call, in C (every row a watch writes
-- computes them).  DROP EXTENSION ... CASCADE drops the columns that call
-- these functions: restore_generated_columns adds them back.
-- ---------------------------------------------------------------------

-- _builtin_columns(api_group, plural) -> text[]: the extra generated
-- columns a mirror table of that built-in resource gets (pods' phase,
-- node_name, ready, ...), as column definitions; an empty array for other
-- resources.  typed_columns() adds a custom resource's printer columns.
CREATE OR REPLACE FUNCTION kwatch._builtin_columns(api_group text, plural text) RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $_$
  SELECT CASE api_group || '/' || plural
    WHEN '/pods' THEN ARRAY[
      $c$phase text GENERATED ALWAYS AS (object->'status'->>'phase') STORED$c$,
      $c$node_name text GENERATED ALWAYS AS (object->'spec'->>'nodeName') STORED$c$,
      $c$pod_ip text GENERATED ALWAYS AS (object->'status'->>'podIP') STORED$c$,
      $c$host_ip text GENERATED ALWAYS AS (object->'status'->>'hostIP') STORED$c$,
      $c$ready boolean GENERATED ALWAYS AS (kwatch.condition_true(object, 'Ready')) STORED$c$,
      $c$restart_count integer GENERATED ALWAYS AS (kwatch.pod_restart_count(object)) STORED$c$,
      $c$service_account text GENERATED ALWAYS AS (object->'spec'->>'serviceAccountName') STORED$c$]
    WHEN '/nodes' THEN ARRAY[
      $c$ready boolean GENERATED ALWAYS AS (kwatch.condition_true(object, 'Ready')) STORED$c$,
      $c$unschedulable boolean GENERATED ALWAYS AS (COALESCE((object->'spec'->>'unschedulable')::boolean, false)) STORED$c$,
      $c$kubelet_version text GENERATED ALWAYS AS (object->'status'->'nodeInfo'->>'kubeletVersion') STORED$c$,
      $c$pod_cidr text GENERATED ALWAYS AS (object->'spec'->>'podCIDR') STORED$c$]
    WHEN '/namespaces' THEN ARRAY[
      $c$phase text GENERATED ALWAYS AS (object->'status'->>'phase') STORED$c$]
    WHEN '/services' THEN ARRAY[
      $c$type text GENERATED ALWAYS AS (object->'spec'->>'type') STORED$c$,
      $c$cluster_ip text GENERATED ALWAYS AS (object->'spec'->>'clusterIP') STORED$c$]
    WHEN 'apps/deployments' THEN ARRAY[
      $c$replicas integer GENERATED ALWAYS AS ((object->'spec'->>'replicas')::integer) STORED$c$,
      $c$ready_replicas integer GENERATED ALWAYS AS (COALESCE((object->'status'->>'readyReplicas')::integer, 0)) STORED$c$,
      $c$available_replicas integer GENERATED ALWAYS AS (COALESCE((object->'status'->>'availableReplicas')::integer, 0)) STORED$c$,
      $c$updated_replicas integer GENERATED ALWAYS AS (COALESCE((object->'status'->>'updatedReplicas')::integer, 0)) STORED$c$]
    WHEN 'apps/replicasets' THEN ARRAY[
      $c$replicas integer GENERATED ALWAYS AS ((object->'spec'->>'replicas')::integer) STORED$c$,
      $c$ready_replicas integer GENERATED ALWAYS AS (COALESCE((object->'status'->>'readyReplicas')::integer, 0)) STORED$c$,
      $c$available_replicas integer GENERATED ALWAYS AS (COALESCE((object->'status'->>'availableReplicas')::integer, 0)) STORED$c$]
    ELSE ARRAY[]::text[]
  END
$_$;

-- base_columns(): the columns every mirror table has before its typed
-- columns, as column definitions in the form typed_columns() uses.  The
-- mirror tables (create_mirror_table) and the live foreign tables
-- (live_columns, src/live/live_column.c) are both built from this one list.
CREATE OR REPLACE FUNCTION kwatch.base_columns() RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $_$
  SELECT ARRAY[
    $c$cluster text NOT NULL$c$,
    $c$namespace text GENERATED ALWAYS AS (object->'metadata'->>'namespace') STORED$c$,
    $c$name text GENERATED ALWAYS AS (object->'metadata'->>'name') STORED$c$,
    $c$uid text NOT NULL$c$,
    $c$resource_version text NOT NULL$c$,
    $c$labels jsonb GENERATED ALWAYS AS (COALESCE(object->'metadata'->'labels', '{}')) STORED$c$,
    $c$annotations jsonb GENERATED ALWAYS AS (COALESCE(object->'metadata'->'annotations', '{}')) STORED$c$,
    $c$owner_references jsonb GENERATED ALWAYS AS (COALESCE(object->'metadata'->'ownerReferences', '[]')) STORED$c$,
    $c$created_at timestamptz GENERATED ALWAYS AS (kwatch.k8s_timestamp(object->'metadata'->>'creationTimestamp')) STORED$c$,
    $c$deleted_at timestamptz GENERATED ALWAYS AS (kwatch.k8s_timestamp(object->'metadata'->>'deletionTimestamp')) STORED$c$]
$_$;

-- restore_generated_columns(table_name, api_group, plural): adds back the
-- generated columns of an existing mirror table k8s.<table_name> that use
-- this extension's functions (created_at, deleted_at, pods' ready and
-- restart_count, nodes' ready).  DROP EXTENSION kwatch CASCADE drops those
-- columns (pg_depend: a column default expression depends on its functions,
-- see PostgreSQL's src/backend/catalog/dependency.c) but not the tables,
-- which are the user's; watch() after CREATE EXTENSION reuses the table and
-- calls this.  Columns that exist are left alone (no lock is taken then);
-- restored ones come last in the column order.  Runs for the table's owner
-- only (or a superuser for a table a superuser owns): ALTER TABLE ... ADD
-- COLUMN ... GENERATED evaluates the expression over every row, through
-- casts of the owner's column types, which must never run with another
-- role's rights (kwatch._restore_columns_as_owner runs it as the owner).
-- Errors: 42501 for any other caller; 42809 when k8s.<table_name> is not a
-- table; those of ALTER TABLE.
CREATE OR REPLACE FUNCTION kwatch.restore_generated_columns(table_name text, api_group text, plural text) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  c text;
  rel regclass := format('k8s.%I', table_name)::regclass;
BEGIN
  IF (SELECT k.relkind NOT IN ('r', 'p') FROM pg_class k WHERE k.oid = rel) THEN
    RAISE EXCEPTION '% is not a table', rel USING ERRCODE = 'wrong_object_type';
  END IF;
  IF NOT (SELECT k.relowner = u.oid OR (u.rolsuper AND o.rolsuper)
            FROM pg_class k, pg_roles o, pg_roles u
           WHERE k.oid = rel AND o.oid = k.relowner AND u.rolname = current_user) THEN
    RAISE EXCEPTION 'only the owner of % may restore its generated columns', rel
      USING ERRCODE = 'insufficient_privilege',
            HINT = format('Run it as role %s, or call kwatch.watch() for the table again.',
                          (SELECT k.relowner::regrole FROM pg_class k WHERE k.oid = rel));
  END IF;
  FOREACH c IN ARRAY kwatch.base_columns() || kwatch.typed_columns(api_group, plural) LOOP
    CONTINUE WHEN c NOT LIKE '% GENERATED ALWAYS AS %';
    IF NOT EXISTS (SELECT 1 FROM pg_attribute
                   WHERE attrelid = format('k8s.%I', table_name)::regclass
                     AND attname = split_part(c, ' ', 1) AND NOT attisdropped) THEN
      EXECUTE format('ALTER TABLE k8s.%I ADD COLUMN %s', table_name, c);
    END IF;
  END LOOP;
END
$$;

-- _restore_columns_as_owner(rel, api_group, plural): restore_generated_columns
-- on the existing mirror table `rel`, run as its owner under
-- SECURITY_RESTRICTED_OPERATION (src/apply/sync.c); create_mirror_table
-- uses it, so that watch() never runs an ALTER TABLE over a role's rows
-- with the extension owner's rights.
CREATE OR REPLACE FUNCTION kwatch._restore_columns_as_owner(rel regclass, api_group text, plural text) RETURNS void
    LANGUAGE c STRICT
    AS 'MODULE_PATHNAME', 'kwatch_restore_columns_as_owner';
REVOKE ALL ON FUNCTION kwatch._restore_columns_as_owner(regclass, text, text) FROM PUBLIC;

-- _printer_columns(server, api_group, plural, api_version) -> jsonb: the
-- CRD's additionalPrinterColumns for that version, read as the caller of
-- watch(); NULL when it is no CRD or the caller may not read CRDs
-- (src/cluster/discovery.c).
CREATE OR REPLACE FUNCTION kwatch._printer_columns(server text, api_group text, plural text, api_version text) RETURNS jsonb
    LANGUAGE c STRICT
    AS 'MODULE_PATHNAME', 'kwatch_printer_columns';
REVOKE ALL ON FUNCTION kwatch._printer_columns(text, text, text, text) FROM PUBLIC;

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
CREATE OR REPLACE FUNCTION kwatch._printer_column_defs(columns jsonb, taken text[], OUT defs text[], OUT skipped text[]) RETURNS record
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
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
$_$;
REVOKE ALL ON FUNCTION kwatch._printer_column_defs(jsonb, text[]) FROM PUBLIC;

-- typed_columns(api_group, plural) -> text[]: the generated columns a
-- mirror table of that resource gets after its base columns, as column
-- definitions: a built-in resource's (_builtin_columns), then a custom
-- resource's printer columns stored in kwatch.printer_columns (none until
-- a watch of it read its CRD).
CREATE OR REPLACE FUNCTION kwatch.typed_columns(api_group text, plural text) RETURNS text[]
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT kwatch._builtin_columns(api_group, plural)
         || COALESCE((SELECT p.columns FROM kwatch.printer_columns p
                      WHERE p.api_group = typed_columns.api_group AND p.plural = typed_columns.plural),
                     '{}')
$$;

-- k8s_timestamp(text) -> timestamptz: an RFC 3339 timestamp as written by
-- the API server ("2024-05-01T10:00:00Z"); NULL for NULL and for text that
-- is no RFC 3339 time, never an error.  In C (src/functions/column_functions.c),
-- as are the other functions the generated columns call: every row a watch
-- writes computes them, where SQL functions cannot be inlined.
CREATE OR REPLACE FUNCTION kwatch.k8s_timestamp(text) RETURNS timestamp with time zone
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'kwatch_k8s_timestamp';

-- pod_restart_count(pod jsonb) -> integer: the sum of
-- status.containerStatuses[].restartCount (a count that is not a whole
-- number is left out), 0 without any.  C, src/functions/column_functions.c.
CREATE OR REPLACE FUNCTION kwatch.pod_restart_count(jsonb) RETURNS integer
    LANGUAGE c IMMUTABLE PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'kwatch_pod_restart_count';

-- condition_true(object jsonb, type text) -> boolean: whether
-- status.conditions holds the condition `type` with status "True" (Pod
-- Ready, Node Ready, ...).  C, src/functions/column_functions.c.
CREATE OR REPLACE FUNCTION kwatch.condition_true(jsonb, text) RETURNS boolean
    LANGUAGE c IMMUTABLE PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'kwatch_condition_true';

-- jsonb_integer / jsonb_number / jsonb_boolean / jsonb_timestamp(value):
-- a JSON value as a printer column's type says (integer -> bigint, number
-- -> double precision, boolean, date -> timestamptz: an RFC 3339
-- date-time, as Kubernetes writes them), NULL when it is absent or of
-- another kind.  Never an error: a generated column that raised would stop
-- its watch on one odd object.  C, src/functions/column_functions.c.
CREATE OR REPLACE FUNCTION kwatch.jsonb_integer(jsonb) RETURNS bigint
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'kwatch_jsonb_integer';

-- jsonb_number(value) -> double precision: see jsonb_integer.
CREATE OR REPLACE FUNCTION kwatch.jsonb_number(jsonb) RETURNS double precision
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'kwatch_jsonb_number';

-- jsonb_boolean(value) -> boolean: see jsonb_integer.
CREATE OR REPLACE FUNCTION kwatch.jsonb_boolean(jsonb) RETURNS boolean
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'kwatch_jsonb_boolean';

-- jsonb_timestamp(value) -> timestamptz: see jsonb_integer.
CREATE OR REPLACE FUNCTION kwatch.jsonb_timestamp(jsonb) RETURNS timestamp with time zone
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'kwatch_jsonb_timestamp';

-- _refresh_printer_columns(server, api_group, plural, api_version,
-- table_name) -> text[]: reads the CRD's printer columns as the caller of
-- watch() and stores them; columns of a former definition that the new one
-- no longer has (changed path, type or name) are dropped from the mirror
-- table k8s.<table_name>, after its view kubectl.<t> (which would refuse
-- the drop of a column it shows; watch() makes it anew right after), so
-- that create_mirror_table or restore_generated_columns adds the new ones.
-- Rows are kept.  Nothing happens for a resource that is no CRD.  Returns
-- the skipped columns.
CREATE OR REPLACE FUNCTION kwatch._refresh_printer_columns(server text, api_group text, plural text, api_version text, table_name text) RETURNS text[]
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  cols jsonb := kwatch._printer_columns(server, api_group, plural, api_version);
  taken text[];
  r record;
  old text[];
  c text;
BEGIN
  IF cols IS NULL THEN
    RETURN '{}';
  END IF;
  SELECT array_agg(split_part(b, ' ', 1)) INTO taken
  FROM unnest(kwatch.base_columns() || kwatch._builtin_columns(api_group, plural)
              || ARRAY['object', 'ctid', 'xmin', 'xmax', 'cmin', 'cmax', 'tableoid', 'oid']) b;
  r := kwatch._printer_column_defs(cols, taken);
  SELECT p.columns INTO old FROM kwatch.printer_columns p
  WHERE p.api_group = _refresh_printer_columns.api_group AND p.plural = _refresh_printer_columns.plural;
  IF old IS NOT NULL AND to_regclass(format('k8s.%I', table_name)) IS NOT NULL THEN
    FOREACH c IN ARRAY old LOOP
      CONTINUE WHEN c = ANY (r.defs);
      -- only a generated column (a printer column kwatch made), as the owner
      IF EXISTS (SELECT 1 FROM pg_attribute a
                 WHERE a.attrelid = format('k8s.%I', table_name)::regclass
                   AND a.attname = split_part(c, ' ', 1) AND a.attgenerated = 's'
                   AND NOT a.attisdropped) THEN
        -- the view kubectl.<t> shows it: made anew by watch()
        PERFORM kwatch._drop_printed_view(format('k8s.%I', table_name)::regclass);
        PERFORM kwatch._execute_as_owner(format('k8s.%I', table_name)::regclass,
          format('ALTER TABLE k8s.%I DROP COLUMN %I', table_name, split_part(c, ' ', 1)));
      END IF;
    END LOOP;
  END IF;
  INSERT INTO kwatch.printer_columns AS p (api_group, plural, api_version, columns, skipped)
  VALUES (api_group, plural, api_version, r.defs, r.skipped)
  ON CONFLICT ON CONSTRAINT printer_columns_pkey
  DO UPDATE SET api_version = EXCLUDED.api_version, columns = EXCLUDED.columns, skipped = EXCLUDED.skipped;
  RETURN r.skipped;
END
$$;
REVOKE ALL ON FUNCTION kwatch._refresh_printer_columns(text, text, text, text, text) FROM PUBLIC;
