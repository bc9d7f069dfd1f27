/* kwatch 0.1.0: Kubernetes resources mirrored into tables by list+watch */

\echo Use "CREATE EXTENSION kwatch" to load this file. \quit

-- ---------------------------------------------------------------------
-- Clusters are foreign servers of the kwatch foreign data wrapper.
-- ---------------------------------------------------------------------

-- kwatch_fdw_validator(options text[], catalog oid): checks server, user
-- mapping and foreign table options (src/fdw_option.c).
CREATE FUNCTION kwatch_fdw_validator(text[], oid)
RETURNS void
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT;

-- kwatch_fdw_handler(): the callbacks of live foreign tables (src/fdw.c,
-- see "Live foreign tables" below).
CREATE FUNCTION kwatch_fdw_handler() RETURNS fdw_handler
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT;

CREATE FOREIGN DATA WRAPPER kwatch HANDLER kwatch_fdw_handler VALIDATOR kwatch_fdw_validator;

-- server_config(server): the connection settings kwatch resolves for a
-- server and the current user, secrets redacted.  For debugging kubeconfigs.
CREATE FUNCTION server_config(server text)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'kwatch_server_config'
LANGUAGE C STRICT;
REVOKE ALL ON FUNCTION server_config(text) FROM PUBLIC;

-- ---------------------------------------------------------------------
-- Registrations: one row per watch.  The worker reads this table and writes
-- the resume point (resource_version) in the same transaction as the rows
-- it reflects.
-- ---------------------------------------------------------------------
CREATE TABLE registrations (
    id               serial PRIMARY KEY,
    server           text NOT NULL,     -- foreign server name = cluster column
    resource         text NOT NULL,     -- canonical: plural, or plural.group
    api_group        text NOT NULL,     -- '' for the core group
    api_version      text NOT NULL,
    plural           text NOT NULL,
    kind             text NOT NULL,
    namespaced       boolean NOT NULL,
    namespace        text,              -- NULL: all namespaces
    label_selector   text,
    field_selector   text,
    table_name       text NOT NULL,     -- in schema k8s
    channel          text NOT NULL,     -- NOTIFY channel
    notify           boolean NOT NULL DEFAULT true,
    owner            oid NOT NULL,      -- role whose user mapping is used
    resource_version text,              -- resume point (checkpoint)
    synced_at        timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (server, api_group, plural)
);
SELECT pg_catalog.pg_extension_config_dump('registrations', '');
SELECT pg_catalog.pg_extension_config_dump('registrations_id_seq', '');

-- ---------------------------------------------------------------------
-- Helpers used by the generated columns of mirror tables.  Immutable: they
-- read only their argument.
-- ---------------------------------------------------------------------

-- k8s_timestamp(text): an RFC 3339 timestamp as written by the API server
-- ("2024-05-01T10:00:00Z") to timestamptz; NULL stays NULL.
CREATE FUNCTION k8s_timestamp(text) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
AS $$ SELECT $1::timestamptz $$;

-- pod_restart_count(pod jsonb): sum of status.containerStatuses[].restartCount.
CREATE FUNCTION pod_restart_count(jsonb) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
  SELECT COALESCE(sum((c->>'restartCount')::integer), 0)::integer
  FROM jsonb_array_elements(COALESCE($1->'status'->'containerStatuses', '[]')) c
$$;

-- condition_true(object jsonb, type text): whether status.conditions holds
-- the condition `type` with status "True" (Pod Ready, Node Ready, ...).
CREATE FUNCTION condition_true(jsonb, text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
  SELECT EXISTS (SELECT 1
                 FROM jsonb_array_elements(COALESCE($1->'status'->'conditions', '[]')) c
                 WHERE c->>'type' = $2 AND c->>'status' = 'True')
$$;

-- typed_columns(api_group, plural): the extra generated columns a mirror
-- table of that resource gets, as column definitions.
CREATE FUNCTION typed_columns(api_group text, plural text) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
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
$$;

-- base_columns(): the columns every mirror table has before its typed
-- columns, as column definitions in the form typed_columns() uses.  The
-- mirror tables (create_mirror_table) and the live foreign tables
-- (live_columns, src/live_column.c) are both built from this one list.
CREATE FUNCTION base_columns() RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
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
$$;

-- create_mirror_table(table_name, api_group, api_version, plural): creates
-- k8s.<table_name> for a resource unless it exists.  One row per object,
-- keyed by (cluster, uid); everything but the key, resource_version and the
-- object is derived from the object by generated columns, so the worker
-- writes four values per row and users may add columns and indexes freely.
CREATE FUNCTION create_mirror_table(table_name text, api_group text,
                                    api_version text, plural text)
RETURNS regclass
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  extra text := '';
  c text;
BEGIN
  IF to_regnamespace('k8s') IS NULL THEN
    CREATE SCHEMA k8s;
  END IF;
  IF to_regclass(format('k8s.%I', table_name)) IS NOT NULL THEN
    PERFORM kwatch.restore_generated_columns(table_name, api_group, plural);
    RETURN format('k8s.%I', table_name)::regclass;
  END IF;
  FOREACH c IN ARRAY kwatch.base_columns() || kwatch.typed_columns(api_group, plural) LOOP
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
  EXECUTE format('CREATE INDEX ON k8s.%I USING gin (labels)', table_name);
  EXECUTE format('COMMENT ON TABLE k8s.%I IS %L', table_name,
                 format('kwatch mirror of %s (%s)', plural,
                        CASE api_group WHEN '' THEN api_version
                             ELSE api_group || '/' || api_version END));
  RETURN format('k8s.%I', table_name)::regclass;
END
$$;

-- ---------------------------------------------------------------------
-- Registration functions
-- ---------------------------------------------------------------------

-- _discover(server, resource): resolves a user's resource name through the
-- API server's discovery documents (src/discovery.c).  One row: group,
-- version, plural, kind, namespaced, verbs, and the caller's role (outside
-- any SECURITY DEFINER function), whose user mapping the watch will use.
CREATE FUNCTION _discover(server text, resource text,
    OUT api_group text, OUT api_version text, OUT plural text, OUT kind text,
    OUT namespaced boolean, OUT verbs text[], OUT caller oid)
AS 'MODULE_PATHNAME', 'kwatch_discover'
LANGUAGE C STRICT;

-- _probe(server, api_group, api_version, plural, namespace, label_selector,
-- field_selector): a LIST with limit=1 as the caller, so that a bad selector,
-- a forbidden resource or a missing namespace fails the registration with
-- the API server's own message.  Returns the list's resourceVersion.
CREATE FUNCTION _probe(server text, api_group text, api_version text,
                       plural text, namespace text, label_selector text,
                       field_selector text)
RETURNS text
AS 'MODULE_PATHNAME', 'kwatch_probe'
LANGUAGE C;

-- _wake_at_commit(): makes the worker reload registrations when (and only
-- if) the current transaction commits.
CREATE FUNCTION _wake_at_commit() RETURNS void
AS 'MODULE_PATHNAME', 'kwatch_wake_at_commit'
LANGUAGE C;

-- _default_server(): the only foreign server of the kwatch wrapper; errors
-- when there are none or several.
CREATE FUNCTION _default_server() RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  names text[];
BEGIN
  SELECT array_agg(s.srvname ORDER BY s.srvname) INTO names
  FROM pg_foreign_server s JOIN pg_foreign_data_wrapper w ON w.oid = s.srvfdw
  WHERE w.fdwname = 'kwatch';
  IF names IS NULL THEN
    RAISE EXCEPTION 'no kwatch server exists'
      USING ERRCODE = 'undefined_object',
            HINT = 'Create one: CREATE SERVER prod FOREIGN DATA WRAPPER kwatch OPTIONS (kubeconfig ''/path/to/config'');';
  ELSIF cardinality(names) > 1 THEN
    RAISE EXCEPTION 'several kwatch servers exist: %', array_to_string(names, ', ')
      USING ERRCODE = 'ambiguous_parameter', HINT = 'Name one with server => ''...''.';
  END IF;
  RETURN names[1];
END
$$;

-- watch(resource, server, namespace, label_selector, field_selector, notify,
-- table_name) -> regclass: registers a watch of `resource` ("pods", "pod",
-- "po", "deployments.apps", a CRD's plural...) on foreign server `server`
-- and returns its mirror table (k8s.<plural>, group-qualified on a name
-- collision).  Syncing starts when the calling transaction commits.
-- Errors: unknown server or resource (undefined_object), a resource without
-- list/watch verbs (feature_not_supported), a bad selector or a forbidden
-- resource (the API server's message, see _probe), an existing watch of the
-- same resource on the same server with other settings (duplicate_object).
CREATE FUNCTION watch(resource text,
                      server text DEFAULT NULL,
                      namespace text DEFAULT NULL,
                      label_selector text DEFAULT NULL,
                      field_selector text DEFAULT NULL,
                      notify boolean DEFAULT true,
                      table_name text DEFAULT NULL)
RETURNS regclass
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  srv text := COALESCE(server, kwatch._default_server());
  d record;
  existing kwatch.registrations;
  tbl text;
  canonical text;
  rel regclass;
BEGIN
  label_selector := NULLIF(btrim(label_selector), '');
  field_selector := NULLIF(btrim(field_selector), '');
  namespace := NULLIF(btrim(namespace), '');

  IF namespace IS NOT NULL AND namespace !~ '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$' THEN
    RAISE EXCEPTION 'invalid namespace name "%"', namespace
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'Namespace names are DNS labels: lower-case letters, digits and "-".';
  END IF;

  d := kwatch._discover(srv, resource);
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

  SELECT * INTO existing FROM kwatch.registrations r
  WHERE r.server = srv AND r.api_group = d.api_group AND r.plural = d.plural;
  IF FOUND THEN
    IF existing.namespace IS NOT DISTINCT FROM namespace
       AND existing.label_selector IS NOT DISTINCT FROM label_selector
       AND existing.field_selector IS NOT DISTINCT FROM field_selector
       AND existing.notify = watch.notify
       AND (watch.table_name IS NULL OR existing.table_name = watch.table_name) THEN
      RETURN format('k8s.%I', existing.table_name)::regclass;
    END IF;
    RAISE EXCEPTION '% is already watched on server "%" with other settings', canonical, srv
      USING ERRCODE = 'duplicate_object',
            HINT = format('Call kwatch.unwatch(%L, server => %L) first.', canonical, srv);
  END IF;

  -- The server validates selectors, namespace and permissions for us.
  PERFORM kwatch._probe(srv, d.api_group, d.api_version, d.plural, namespace,
                        label_selector, field_selector);

  -- Table: the one this resource already has (watched on another server),
  -- else the plural, else the plural qualified by the group on a collision.
  SELECT r.table_name INTO tbl FROM kwatch.registrations r
  WHERE r.api_group = d.api_group AND r.plural = d.plural LIMIT 1;
  IF watch.table_name IS NOT NULL THEN
    IF tbl IS NOT NULL AND tbl <> watch.table_name THEN
      RAISE EXCEPTION '% is already mirrored into table k8s.%', canonical, tbl
        USING ERRCODE = 'duplicate_object',
              HINT = 'The same resource on several servers shares one table; leave out table_name.';
    END IF;
    IF EXISTS (SELECT 1 FROM kwatch.registrations r
               WHERE r.table_name = watch.table_name
                 AND (r.api_group, r.plural) <> (d.api_group, d.plural))
       OR (to_regclass(format('k8s.%I', watch.table_name)) IS NOT NULL
           AND obj_description(to_regclass(format('k8s.%I', watch.table_name)), 'pg_class')
               IS DISTINCT FROM format('kwatch mirror of %s (%s)', d.plural,
                   CASE d.api_group WHEN '' THEN d.api_version
                        ELSE d.api_group || '/' || d.api_version END)) THEN
      RAISE EXCEPTION 'table k8s.% is not a mirror of %', watch.table_name, canonical
        USING ERRCODE = 'duplicate_table',
              HINT = 'Choose another table_name; one table mirrors one resource.';
    END IF;
    tbl := watch.table_name;
  ELSIF tbl IS NULL THEN
    tbl := d.plural;
    IF EXISTS (SELECT 1 FROM kwatch.registrations r
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
  IF length(tbl) > 56 THEN
    RAISE EXCEPTION 'table name "%" is too long', tbl
      USING ERRCODE = 'name_too_long', HINT = 'Pass a shorter table_name => ''...''.';
  END IF;

  rel := kwatch.create_mirror_table(tbl, d.api_group, d.api_version, d.plural);

  INSERT INTO kwatch.registrations
    (server, resource, api_group, api_version, plural, kind, namespaced,
     namespace, label_selector, field_selector, table_name, channel, notify, owner)
  VALUES (srv, canonical, d.api_group, d.api_version, d.plural, d.kind, d.namespaced,
          namespace, label_selector, field_selector, tbl, 'kwatch_' || tbl,
          watch.notify, d.caller);

  PERFORM kwatch._wake_at_commit();
  RETURN rel;
END
$$;

-- unwatch(resource, server, drop_table) -> boolean: stops the watch of
-- `resource` (as registered: "pods", "deployments.apps", its kind or its
-- table name) on `server` and deletes that server's rows from the mirror
-- table; with drop_table, drops the table when no other server still
-- mirrors into it.  Returns false when there was no such watch.
CREATE FUNCTION unwatch(resource text,
                        server text DEFAULT NULL,
                        drop_table boolean DEFAULT false)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  srv text := COALESCE(server, kwatch._default_server());
  r kwatch.registrations;
  best integer;
  candidates text[];
BEGIN
  -- The name as kwatch.watches shows it wins, then the table name, then a
  -- plural, kind or plural.group; several equally good matches are an error.
  WITH m AS (
    SELECT x.id, x.resource,
           CASE WHEN x.resource = unwatch.resource THEN 1
                WHEN x.table_name = unwatch.resource THEN 2
                ELSE 3 END AS rank
    FROM kwatch.registrations x
    WHERE x.server = srv
      AND (x.resource = unwatch.resource OR x.plural = unwatch.resource
           OR lower(x.kind) = lower(unwatch.resource) OR x.table_name = unwatch.resource
           OR x.plural || '.' || x.api_group = unwatch.resource))
  SELECT min(m.rank), array_agg(m.resource ORDER BY m.resource)
           FILTER (WHERE m.rank = (SELECT min(rank) FROM m))
  INTO best, candidates FROM m;
  IF best IS NULL THEN
    RETURN false;
  END IF;
  IF cardinality(candidates) > 1 THEN
    RAISE EXCEPTION '"%" matches several watches on server "%": %', resource, srv,
                    array_to_string(candidates, ', ')
      USING ERRCODE = 'ambiguous_parameter',
            HINT = 'Use the name shown in kwatch.watches.resource.';
  END IF;
  DELETE FROM kwatch.registrations x
  WHERE x.server = srv AND x.resource = candidates[1]
  RETURNING * INTO r;
  IF NOT FOUND THEN
    RETURN false;   -- a concurrent unwatch removed it first
  END IF;
  IF to_regclass(format('k8s.%I', r.table_name)) IS NOT NULL THEN
    IF drop_table AND NOT EXISTS (SELECT 1 FROM kwatch.registrations x
                                  WHERE x.table_name = r.table_name) THEN
      EXECUTE format('DROP TABLE k8s.%I', r.table_name);
    ELSE
      EXECUTE format('DELETE FROM k8s.%I WHERE cluster = $1', r.table_name) USING srv;
    END IF;
  END IF;
  PERFORM kwatch._wake_at_commit();
  RETURN true;
END
$$;

REVOKE ALL ON FUNCTION watch(text, text, text, text, text, boolean, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION unwatch(text, text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION _discover(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION _probe(text, text, text, text, text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION _wake_at_commit() FROM PUBLIC;
REVOKE ALL ON FUNCTION create_mirror_table(text, text, text, text) FROM PUBLIC;

-- ---------------------------------------------------------------------
-- Status
-- ---------------------------------------------------------------------

-- watch_status(): one row per watch the worker runs, from shared memory.
CREATE FUNCTION watch_status(
    OUT watch_id integer, OUT state text, OUT healthy boolean,
    OUT resource_version text, OUT objects bigint, OUT last_sync_at timestamptz,
    OUT state_since timestamptz, OUT last_error text, OUT last_error_at timestamptz,
    OUT list_calls bigint, OUT watch_calls bigint, OUT relists bigint,
    OUT added bigint, OUT modified bigint, OUT deleted bigint, OUT bookmarks bigint,
    OUT notifications bigint, OUT skipped_objects bigint, OUT sanitized_objects bigint,
    OUT http_errors bigint, OUT decode_errors bigint, OUT database_errors bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'kwatch_watch_status'
LANGUAGE C STRICT VOLATILE;

-- worker_pid(): the kwatch worker's process id, NULL when none runs.
CREATE FUNCTION worker_pid() RETURNS integer
AS 'MODULE_PATHNAME', 'kwatch_worker_pid'
LANGUAGE C STRICT VOLATILE;

-- watches: one row per registered watch with its live state and counters.
-- state is 'pending' until the worker picks the watch up, 'no worker' when
-- kwatch is not in shared_preload_libraries (or the worker is restarting).
CREATE VIEW watches AS
SELECT r.id,
       r.server,
       r.resource,
       r.namespace,
       r.label_selector,
       r.field_selector,
       format('k8s.%I', r.table_name) AS table_name,
       r.channel,
       r.notify,
       COALESCE(s.state, CASE WHEN kwatch.worker_pid() IS NULL THEN 'no worker'
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
       s.http_errors, s.decode_errors, s.database_errors
FROM kwatch.registrations r
LEFT JOIN kwatch.watch_status() s ON s.watch_id = r.id
ORDER BY r.id;

GRANT USAGE ON SCHEMA kwatch TO PUBLIC;
GRANT SELECT ON watches TO PUBLIC;

-- ---------------------------------------------------------------------
-- Event stream: every change the worker applied, in order, from a ring in
-- shared memory (src/events.c), as the foreign table kwatch.events of its
-- own wrapper (src/events_fdw.c).  README "Event stream" has the recipe.
-- ---------------------------------------------------------------------

-- kwatch_events_fdw_handler(): the scan callbacks of kwatch.events.
CREATE FUNCTION kwatch_events_fdw_handler()
RETURNS fdw_handler
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT;

-- kwatch_events_fdw_validator(options text[], catalog oid): rejects every
-- option (fdw_invalid_option_name): the stream has nothing to configure.
CREATE FUNCTION kwatch_events_fdw_validator(text[], oid)
RETURNS void
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT;

CREATE FOREIGN DATA WRAPPER kwatch_events
  HANDLER kwatch_events_fdw_handler VALIDATOR kwatch_events_fdw_validator;
CREATE SERVER kwatch_events FOREIGN DATA WRAPPER kwatch_events;

-- events: one row per applied change (ADDED, MODIFIED, DELETED, including
-- deletions found by a relist), seq ascending with no holes.  Rows older
-- than events_oldest_seq() are gone (ring of kwatch.event_buffer entries,
-- emptied by a PostgreSQL restart).  truncated: a text field was longer than
-- Kubernetes allows and was cut (never for valid objects).
CREATE FOREIGN TABLE events (
    seq              bigint NOT NULL,
    at               timestamptz NOT NULL,
    cluster          text NOT NULL,
    resource         text NOT NULL,
    table_name       text NOT NULL,
    type             text NOT NULL,
    namespace        text,
    name             text NOT NULL,
    uid              text NOT NULL,
    resource_version text NOT NULL,
    truncated        boolean NOT NULL
) SERVER kwatch_events;
-- Names of objects of every watch: readable by superusers and roles
-- granted SELECT, like the mirror tables.
REVOKE ALL ON events FROM PUBLIC;

-- event_state: at most one row, the last seq the worker committed, written
-- in the same transaction as the rows; the sequence continues from it after
-- a restart (and after a pg_dump/restore: the row is dumped).
CREATE TABLE event_state (
    one      boolean PRIMARY KEY DEFAULT true CHECK (one),
    last_seq bigint NOT NULL
);
SELECT pg_catalog.pg_extension_config_dump('event_state', '');

-- events_last_seq(): seq of the newest committed event (0 before the
-- first); NULL while the stream is unavailable (no worker started yet, or
-- kwatch not preloaded).
CREATE FUNCTION events_last_seq() RETURNS bigint
AS 'MODULE_PATHNAME', 'kwatch_events_last_seq'
LANGUAGE C VOLATILE PARALLEL SAFE;

-- events_oldest_seq(): the oldest seq kwatch.events still holds
-- (events_last_seq() + 1 when none).  A reader whose last seen seq L has
-- events_oldest_seq() > L + 1 missed events: re-read the mirror tables.
CREATE FUNCTION events_oldest_seq() RETURNS bigint
AS 'MODULE_PATHNAME', 'kwatch_events_oldest_seq'
LANGUAGE C VOLATILE PARALLEL SAFE;

-- ---------------------------------------------------------------------
-- Live foreign tables (src/fdw.c): a scan of a foreign table of a kwatch
-- server is a chunked LIST against its API server, with WHERE clauses
-- pushed down as namespace, label selector and field selector.
-- ---------------------------------------------------------------------

-- live_columns(api_group, plural): the columns of a live table of that
-- resource, which are the columns of its mirror table (base_columns,
-- typed_columns, object) in the same order, each with the expression that
-- computes it from `object` (the listed object, jsonb) and `cluster` (the
-- server's name, text).  src/live_column.c plans these expressions once per
-- backend and evaluates them for every listed object.
CREATE FUNCTION live_columns(api_group text, plural text,
    OUT column_name text, OUT column_type text, OUT expression text)
RETURNS SETOF record
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
  SELECT m[1], m[2],
         CASE m[1] WHEN 'cluster' THEN 'cluster'
                   WHEN 'uid' THEN $e$object->'metadata'->>'uid'$e$
                   WHEN 'resource_version' THEN $e$object->'metadata'->>'resourceVersion'$e$
                   WHEN 'object' THEN 'object'
                   ELSE m[3] END
  FROM unnest(kwatch.base_columns() || kwatch.typed_columns(api_group, plural)
              || ARRAY['object jsonb NOT NULL']) WITH ORDINALITY AS d(def, n),
       regexp_match(d.def, '^(\w+) (.+?)(?: NOT NULL| GENERATED ALWAYS AS \((.*)\) STORED)?$') AS m
  ORDER BY d.n
$$;

-- ---------------------------------------------------------------------
-- Extension dropped and re-created (issue 3)
-- ---------------------------------------------------------------------

-- restore_generated_columns(table_name, api_group, plural): adds back the
-- generated columns of an existing mirror table k8s.<table_name> that use
-- this extension's functions (created_at, deleted_at, pods' ready and
-- restart_count, nodes' ready).  DROP EXTENSION kwatch CASCADE drops those
-- columns (pg_depend: a column default expression depends on its functions,
-- see src/backend/catalog/dependency.c) but not the tables, which are the
-- user's; watch() after CREATE EXTENSION reuses the table and calls this.
-- Columns that exist are left alone (no lock is taken then); restored ones
-- come last in the column order.  Errors: those of ALTER TABLE.
CREATE FUNCTION restore_generated_columns(table_name text, api_group text, plural text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  c text;
BEGIN
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
