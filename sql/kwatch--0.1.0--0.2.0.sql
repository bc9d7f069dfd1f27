/* kwatch 0.1.0 -> 0.2.0: every mirrored object carries apiVersion and kind */

\echo Use "ALTER EXTENSION kwatch UPDATE TO '0.2.0'" to load this file. \quit

-- A LIST carries apiVersion and kind once, on the list, and none on its
-- items; kwatch 0.1.0 stored listed objects without them, while objects
-- that came by a WATCH event had them.  0.2.0 writes them on every object
-- (src/decode.c), but a relist never rewrites an object whose
-- resourceVersion did not change, so the rows 0.1.0 wrote get them here,
-- once: apiVersion ("group/version", or "version" for the core group) and
-- kind from the resource each watch resolved through discovery.  Keys an
-- object already has win (the right operand of || wins).  No notification
-- is sent: the Kubernetes object did not change.
DO $$
DECLARE
  r record;
BEGIN
  FOR r IN SELECT server, api_group, api_version, kind, table_name
             FROM @extschema@.registrations ORDER BY id LOOP
    IF to_regclass(format('k8s.%I', r.table_name)) IS NULL THEN
      CONTINUE;
    END IF;
    EXECUTE format(
      'UPDATE k8s.%I SET object = jsonb_build_object(''apiVersion'', %L, ''kind'', %L) || object '
      'WHERE cluster = %L AND NOT (object ? ''apiVersion'' AND object ? ''kind'')',
      r.table_name,
      CASE r.api_group WHEN '' THEN r.api_version ELSE r.api_group || '/' || r.api_version END,
      r.kind, r.server);
  END LOOP;
END
$$;

-- ---------------------------------------------------------------------
-- Secrets redacted by default (README "Security", src/redact.c): the
-- values of a Secret's data and stringData, and its last-applied
-- annotation, are stored as keyed digests unless the watch opts in.
-- ---------------------------------------------------------------------

ALTER TABLE @extschema@.registrations
  ADD COLUMN secret_data boolean NOT NULL DEFAULT false,
  -- what a NOTIFY says: 'full' (type, cluster, namespace, name, uid,
  -- resource_version, seq) or 'minimal' (seq and type only); channels are
  -- public (anyone may LISTEN), so Secrets default to 'minimal'
  ADD COLUMN notify_payload text NOT NULL DEFAULT 'full'
    CHECK (notify_payload IN ('full', 'minimal'));
UPDATE @extschema@.registrations SET notify_payload = 'minimal'
 WHERE api_group = '' AND plural = 'secrets';

-- redact_secret(object jsonb) -> jsonb: the Secret `object` with each value
-- of data and stringData, and the annotation
-- kubectl.kubernetes.io/last-applied-configuration, replaced by
-- "<redacted hmac-sha256:HEX>" (keys and everything else kept).  Not for
-- PUBLIC: with it anyone could test a guess against a stored digest.
-- Errors: invalid_parameter_value when object is not a JSON object.
CREATE FUNCTION @extschema@.redact_secret(object jsonb) RETURNS jsonb
AS 'MODULE_PATHNAME', 'kwatch_redact_secret'
LANGUAGE C STRICT;
REVOKE ALL ON FUNCTION @extschema@.redact_secret(jsonb) FROM PUBLIC;

-- Rows 0.1.0 stored in clear, redacted once (no notification: the
-- Kubernetes object did not change).
DO $$
DECLARE
  r record;
BEGIN
  FOR r IN SELECT server, table_name FROM @extschema@.registrations
            WHERE api_group = '' AND plural = 'secrets' ORDER BY id LOOP
    IF to_regclass(format('k8s.%I', r.table_name)) IS NULL THEN
      CONTINUE;
    END IF;
    EXECUTE format('UPDATE k8s.%I SET object = @extschema@.redact_secret(object) WHERE cluster = %L',
                   r.table_name, r.server);
  END LOOP;
END
$$;

DROP FUNCTION @extschema@.watch(text, text, text, text, text, boolean, text);

-- ---------------------------------------------------------------------
-- Retry ranges per watch (client-go's RetryRelistAfter/RetryWatchAfter):
-- the delay before the next LIST, or the next WATCH, after a failure is
-- drawn uniformly inside the range; NULL keeps kwatch.backoff_initial ..
-- kwatch.backoff_max's jittered exponential backoff (src/watch.c,
-- schedule_retry).  retry_ms carries the bounds in milliseconds for the
-- worker: [relist lower, relist upper, watch lower, watch upper].
-- ---------------------------------------------------------------------
CREATE TYPE @extschema@.interval_range AS RANGE (subtype = interval);
ALTER TABLE @extschema@.registrations
  ADD COLUMN retry_relist_after @extschema@.interval_range,
  ADD COLUMN retry_watch_after @extschema@.interval_range,
  ADD COLUMN retry_ms integer[] GENERATED ALWAYS AS (ARRAY[
    (extract(epoch FROM lower(retry_relist_after)) * 1000)::integer,
    (extract(epoch FROM upper(retry_relist_after)) * 1000)::integer,
    (extract(epoch FROM lower(retry_watch_after)) * 1000)::integer,
    (extract(epoch FROM upper(retry_watch_after)) * 1000)::integer]) STORED;

-- _check_retry_range(name, r): raises invalid_parameter_value unless `r`
-- is NULL or a non-empty range with finite bounds within [10ms, 1 hour].
CREATE FUNCTION @extschema@._check_retry_range(name text, r @extschema@.interval_range)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF r IS NOT NULL AND (isempty(r) OR lower_inf(r) OR upper_inf(r)
                        OR lower(r) < interval '10 milliseconds' OR upper(r) > interval '1 hour') THEN
    RAISE EXCEPTION 'invalid % "%"', name, r
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'Give both bounds, between 10ms and 1 hour, e.g. ''[1s,5s]''.';
  END IF;
END
$$;

-- watch(resource, server, namespace, label_selector, field_selector, notify,
-- table_name, secret_data, notify_payload, retry_relist_after,
-- retry_watch_after) -> regclass: registers a watch of `resource` ("pods", "pod",
-- "po", "deployments.apps", a CRD's plural...) on foreign server `server`
-- and returns its mirror table (k8s.<plural>, group-qualified on a name
-- collision).  Syncing starts when the calling transaction commits.
-- Errors: unknown server or resource (undefined_object), a resource without
-- list/watch verbs (feature_not_supported), a bad selector or a forbidden
-- resource (the API server's message, see _probe), an existing watch of the
-- same resource on the same server with other settings (duplicate_object).
-- A watch of Secrets stores each value of data and stringData, and the
-- last-applied annotation, as a keyed digest (src/redact.c) unless
-- secret_data => true: the mirror's readers are not the cluster's.
-- notify_payload: 'full' or 'minimal' (seq and type: anyone may LISTEN on
-- a channel); default 'minimal' for Secrets, 'full' otherwise.
-- retry_relist_after, retry_watch_after: ranges ('[1s,5s]') the delay
-- before the next LIST or WATCH after a failure is drawn from; NULL for
-- the GUCs' backoff (invalid_parameter_value outside [10ms, 1 hour]).
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
                      retry_watch_after @extschema@.interval_range DEFAULT NULL)
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
BEGIN
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
      RETURN format('k8s.%I', existing.table_name)::regclass;
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

  INSERT INTO @extschema@.registrations
    (server, resource, api_group, api_version, plural, kind, namespaced,
     namespace, label_selector, field_selector, table_name, channel, notify, owner,
     secret_data, notify_payload, retry_relist_after, retry_watch_after)
  VALUES (srv, canonical, d.api_group, d.api_version, d.plural, d.kind, d.namespaced,
          namespace, label_selector, field_selector, tbl, 'kwatch_' || tbl,
          _watch_impl.notify, d.caller, COALESCE(_watch_impl.secret_data, false), _watch_impl.notify_payload,
          _watch_impl.retry_relist_after, _watch_impl.retry_watch_after);

  PERFORM @extschema@._wake_at_commit();
  RETURN rel;
END
$$;

REVOKE ALL ON FUNCTION @extschema@._watch_impl(text, text, text, text, text, boolean, text, boolean,
                                               text, @extschema@.interval_range,
                                               @extschema@.interval_range) FROM PUBLIC;

-- watch(...): see _watch_impl above.  A C function that runs with its
-- caller's identity, checks it, and runs _watch_impl as the extension's
-- owner (src/privileged.c): a SECURITY DEFINER function could not tell
-- its caller from the session's role.  Refused (42501) inside a
-- security-restricted operation, e.g. from a trigger on a mirror table.
CREATE FUNCTION watch(resource text,
                      server text DEFAULT NULL,
                      namespace text DEFAULT NULL,
                      label_selector text DEFAULT NULL,
                      field_selector text DEFAULT NULL,
                      notify boolean DEFAULT true,
                      table_name text DEFAULT NULL,
                      secret_data boolean DEFAULT false,
                      notify_payload text DEFAULT NULL,
                      retry_relist_after @extschema@.interval_range DEFAULT NULL,
                      retry_watch_after @extschema@.interval_range DEFAULT NULL)
RETURNS regclass
AS 'MODULE_PATHNAME', 'kwatch_privileged_entry'
LANGUAGE C;
REVOKE ALL ON FUNCTION @extschema@.watch(text, text, text, text, text, boolean, text, boolean, text,
                                         @extschema@.interval_range, @extschema@.interval_range) FROM PUBLIC;

-- kwatch.watches shows a role the watches it may know of: those it
-- registered (or a role it belongs to did), and those of servers it has
-- USAGE on; superusers see all.  Selectors, namespaces and the API
-- server's error text are no one else's business.  security_barrier: no
-- function in a user's WHERE clause sees the rows filtered out.
-- watch_status() gained synced, syncs and relist_requests (src/sync_wait.c):
-- the view is re-created over it below.
DROP VIEW @extschema@.watches;
DROP FUNCTION @extschema@.watch_status();
-- watch_status(): one row per watch the worker runs, from shared memory.
CREATE FUNCTION @extschema@.watch_status(
    OUT watch_id integer, OUT state text, OUT healthy boolean,
    OUT resource_version text, OUT objects bigint, OUT last_sync_at timestamptz,
    OUT state_since timestamptz, OUT last_error text, OUT last_error_at timestamptz,
    OUT list_calls bigint, OUT watch_calls bigint, OUT relists bigint,
    OUT added bigint, OUT modified bigint, OUT deleted bigint, OUT bookmarks bigint,
    OUT notifications bigint, OUT skipped_objects bigint, OUT sanitized_objects bigint,
    OUT http_errors bigint, OUT decode_errors bigint, OUT database_errors bigint,
    OUT synced boolean, OUT syncs bigint, OUT relist_requests bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'kwatch_watch_status'
LANGUAGE C STRICT VOLATILE;

CREATE VIEW watches WITH (security_barrier) AS
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
       r.retry_relist_after, r.retry_watch_after
FROM @extschema@.registrations r
LEFT JOIN @extschema@.watch_status() s ON s.watch_id = r.id
WHERE CASE WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_roles a WHERE a.oid = r.owner)
           THEN pg_catalog.pg_has_role(r.owner, 'USAGE') ELSE false END
   OR EXISTS (SELECT 1 FROM pg_catalog.pg_foreign_server fs
              WHERE fs.srvname = r.server
                AND pg_catalog.has_server_privilege(fs.oid, 'USAGE'))
   OR (SELECT a.rolsuper FROM pg_catalog.pg_roles a WHERE a.rolname = current_user)
ORDER BY r.id;
GRANT SELECT ON @extschema@.watches TO PUBLIC;

-- ---------------------------------------------------------------------
-- unwatch checks its caller (README "Security"): only the role that
-- registered a watch, a member of it, or a superuser may remove it.
-- ---------------------------------------------------------------------

-- _delete_cluster_rows(rel, cluster) -> bigint: deletes the rows of
-- `cluster` from mirror table `rel` as the table's owner, under
-- SECURITY_RESTRICTED_OPERATION (src/sync.c).
CREATE FUNCTION @extschema@._delete_cluster_rows(rel regclass, cluster text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'kwatch_delete_cluster_rows'
LANGUAGE C STRICT;
REVOKE ALL ON FUNCTION @extschema@._delete_cluster_rows(regclass, text) FROM PUBLIC;

-- _drop_relist_stage(id): drops watch `id`'s relist staging table
-- (kwatch_stage.relist_stage_<id>, which the worker creates, src/sync.c)
-- if there is one.
CREATE FUNCTION @extschema@._drop_relist_stage(id integer) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF to_regclass(format('kwatch_stage.relist_stage_%s', id)) IS NOT NULL THEN
    EXECUTE format('DROP TABLE kwatch_stage.relist_stage_%s', id);
  END IF;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._drop_relist_stage(integer) FROM PUBLIC;

-- _restore_columns_as_owner(rel, api_group, plural): restore_generated_columns
-- on the existing mirror table `rel`, run as its owner under
-- SECURITY_RESTRICTED_OPERATION (src/sync.c); create_mirror_table (below)
-- uses it, so that watch() never runs an ALTER TABLE over a role's rows
-- with the extension owner's rights.
CREATE FUNCTION @extschema@._restore_columns_as_owner(rel regclass, api_group text, plural text)
RETURNS void
AS 'MODULE_PATHNAME', 'kwatch_restore_columns_as_owner'
LANGUAGE C STRICT;
REVOKE ALL ON FUNCTION @extschema@._restore_columns_as_owner(regclass, text, text) FROM PUBLIC;

-- create_mirror_table(table_name, api_group, plural): as in 0.1.0, but an
-- existing table's generated columns are restored as its owner.
CREATE OR REPLACE FUNCTION @extschema@.create_mirror_table(table_name text, api_group text,
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
    -- as the table's owner: its rows feed the ALTER TABLE's expressions
    PERFORM @extschema@._restore_columns_as_owner(format('k8s.%I', table_name)::regclass,
                                                  api_group, plural);
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
REVOKE ALL ON FUNCTION @extschema@.create_mirror_table(text, text, text, text) FROM PUBLIC;

-- _caller() -> oid: the role that called watch/unwatch/relist
-- (src/privileged.c), for the checks of their implementations.
CREATE FUNCTION @extschema@._caller() RETURNS oid
AS 'MODULE_PATHNAME', 'kwatch_caller'
LANGUAGE C STRICT;
REVOKE ALL ON FUNCTION @extschema@._caller() FROM PUBLIC;

-- _check_watch_owner(owner, server, resource): raises insufficient_privilege
-- unless the caller of watch/unwatch/relist (src/privileged.c) is a superuser or has the
-- privileges of `owner` (src/ownership.c).
CREATE FUNCTION @extschema@._check_watch_owner(owner oid, server text, resource text)
RETURNS void
AS 'MODULE_PATHNAME', 'kwatch_check_watch_owner'
LANGUAGE C STRICT;
REVOKE ALL ON FUNCTION @extschema@._check_watch_owner(oid, text, text) FROM PUBLIC;

-- unwatch(resource, server, drop_table) -> boolean: stops the watch of
-- `resource` (as registered: "pods", "deployments.apps", its kind or its
-- table name) on `server` and deletes that server's rows from the mirror
-- table; with drop_table, drops the table when no other server still
-- mirrors into it.  Returns false when there was no such watch.  Only the
-- role that registered the watch (or a member of it) and superusers may
-- remove it (_check_watch_owner; insufficient_privilege otherwise).
CREATE FUNCTION @extschema@._unwatch_impl(resource text,
                        server text DEFAULT NULL,
                        drop_table boolean DEFAULT false)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  srv text := COALESCE(server, @extschema@._default_server());
  r @extschema@.registrations;
  best integer;
  candidates text[];
BEGIN
  -- The name as @extschema@.watches shows it wins, then the table name, then a
  -- plural, kind or plural.group; several equally good matches are an error.
  WITH m AS (
    SELECT x.id, x.resource,
           CASE WHEN x.resource = _unwatch_impl.resource THEN 1
                WHEN x.table_name = _unwatch_impl.resource THEN 2
                ELSE 3 END AS rank
    FROM @extschema@.registrations x
    WHERE x.server = srv
      AND (x.resource = _unwatch_impl.resource OR x.plural = _unwatch_impl.resource
           OR lower(x.kind) = lower(_unwatch_impl.resource) OR x.table_name = _unwatch_impl.resource
           OR x.plural || '.' || x.api_group = _unwatch_impl.resource))
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
            HINT = 'Use the name shown in @extschema@.watches.resource.';
  END IF;
  SELECT * INTO r FROM @extschema@.registrations x
  WHERE x.server = srv AND x.resource = candidates[1];
  IF FOUND THEN
    PERFORM @extschema@._check_watch_owner(r.owner, srv, r.resource);
  END IF;
  DELETE FROM @extschema@.registrations x
  WHERE x.server = srv AND x.resource = candidates[1]
  RETURNING * INTO r;
  IF NOT FOUND THEN
    RETURN false;   -- a concurrent unwatch removed it first
  END IF;
  PERFORM @extschema@._drop_relist_stage(r.id);
  IF to_regclass(format('k8s.%I', r.table_name)) IS NOT NULL THEN
    IF drop_table AND NOT EXISTS (SELECT 1 FROM @extschema@.registrations x
                                  WHERE x.table_name = r.table_name) THEN
      -- only its owner's (or a member's) table: another role may have
      -- watched into it with INSERT, UPDATE and DELETE granted
      IF NOT pg_has_role(@extschema@._caller(),
                         (SELECT c.relowner FROM pg_class c
                          WHERE c.oid = format('k8s.%I', r.table_name)::regclass), 'USAGE') THEN
        RAISE EXCEPTION 'must be owner of table k8s.% to drop it', r.table_name
          USING ERRCODE = 'insufficient_privilege',
                HINT = 'Leave out drop_table => true: the watch and its rows can go without the table.';
      END IF;
      EXECUTE format('DROP TABLE k8s.%I', r.table_name);
    ELSE
      -- as the table's owner: its DELETE triggers never run as the definer
      PERFORM @extschema@._delete_cluster_rows(format('k8s.%I', r.table_name)::regclass, srv);
    END IF;
  END IF;
  PERFORM @extschema@._wake_at_commit();
  RETURN true;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._unwatch_impl(text, text, boolean) FROM PUBLIC;

-- unwatch(...): see _unwatch_impl above; run as watch() is
-- (src/privileged.c).  EXECUTE grants given on 0.1.0's unwatch are kept.
CREATE OR REPLACE FUNCTION unwatch(resource text,
                                   server text DEFAULT NULL,
                                   drop_table boolean DEFAULT false)
RETURNS boolean
AS 'MODULE_PATHNAME', 'kwatch_privileged_entry'
LANGUAGE C;


-- Mirror tables that 0.1.0 created belong to the extension's owner; 0.2.0
-- gives a new table to the role whose watch created it (see watch()), and
-- the worker writes it as that role.  A 0.1.0 table whose watches all
-- belong to one existing role is handed to that role, so that it is written
-- as 0.2.0 would; a table shared by several roles' watches, or without a
-- watch, keeps its owner.
DO $$
DECLARE
  t record;
BEGIN
  FOR t IN
    SELECT r.table_name, min(r.owner) AS owner
    FROM @extschema@.registrations r
    GROUP BY r.table_name
    HAVING count(DISTINCT r.owner) = 1
  LOOP
    IF to_regclass(format('k8s.%I', t.table_name)) IS NOT NULL
       AND EXISTS (SELECT 1 FROM pg_catalog.pg_roles a WHERE a.oid = t.owner)
       AND (SELECT c.relowner FROM pg_catalog.pg_class c
            WHERE c.oid = format('k8s.%I', t.table_name)::regclass) <> t.owner THEN
      EXECUTE format('ALTER TABLE k8s.%I OWNER TO %s', t.table_name, t.owner::regrole);
      EXECUTE format('GRANT USAGE ON SCHEMA k8s TO %s', t.owner::regrole);
    END IF;
  END LOOP;
END
$$;

-- ---------------------------------------------------------------------
-- What client-go tells its event handlers, in the event stream: the
-- origin flags and the previous resourceVersion (src/kwatch.h, KwChange;
-- NOTIFY payloads carry the same keys, src/notify.c).
-- ---------------------------------------------------------------------
ALTER FOREIGN TABLE @extschema@.events
  ADD COLUMN preexisting boolean NOT NULL,
  ADD COLUMN final_state_unknown boolean NOT NULL,
  ADD COLUMN previous_resource_version text;
COMMENT ON COLUMN @extschema@.events.preexisting IS
  'the change was found by a LIST (initial sync or relist), not a watch event';
COMMENT ON COLUMN @extschema@.events.final_state_unknown IS
  'a DELETED inferred by a relist: the object''s last state was not seen (client-go DeletedFinalStateUnknown)';
COMMENT ON COLUMN @extschema@.events.previous_resource_version IS
  'on MODIFIED, the resourceVersion the row held before';

-- ---------------------------------------------------------------------
-- Sync barrier and relist on demand (src/sync_wait.c).
-- ---------------------------------------------------------------------

-- _wait_synced(ids, requests, timeout): waits until each watch ids[i]
-- has a committed LIST and no relist pending, and the relist request
-- requests[i] (0: none) has been served; only for watches kwatch.watches
-- shows the caller (src/sync_wait.c).
CREATE FUNCTION @extschema@._wait_synced(ids integer[], requests bigint[], timeout interval)
RETURNS void
AS 'MODULE_PATHNAME', 'kwatch_wait_synced'
LANGUAGE C;

-- _request_relist(id) -> bigint: asks the worker to relist watch `id` now;
-- returns the request's number, for _wait_synced (src/sync_wait.c).
CREATE FUNCTION @extschema@._request_relist(id integer)
RETURNS bigint
AS 'MODULE_PATHNAME', 'kwatch_request_relist'
LANGUAGE C STRICT;
REVOKE ALL ON FUNCTION @extschema@._request_relist(integer) FROM PUBLIC;

-- wait_synced(resource, server, timeout) -> void: returns once the watch of
-- `resource` on `server` (the default server when NULL; every watch of the
-- server when resource is NULL) has committed its initial sync, or the
-- relist in progress, so that its table can be trusted (client-go's
-- WaitForCacheSync).  `resource` is matched as kwatch.watches shows it, or
-- by table name or plural.  Waits on a condition variable; honours
-- statement_timeout and cancel.  ERRORs: 42704 no such watch among those
-- kwatch.watches shows the caller; 55000 the watch is in state 'failed'
-- (DETAIL: its last error) or kwatch is not preloaded; 57014 `timeout`
-- passed first.
CREATE FUNCTION @extschema@.wait_synced(resource text DEFAULT NULL, server text DEFAULT NULL,
                                        timeout interval DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  srv text := COALESCE(server, @extschema@._default_server());
  ids integer[];
BEGIN
  SELECT array_agg(w.id ORDER BY w.id) INTO ids
  FROM @extschema@.watches w
  WHERE w.server = srv
    AND (wait_synced.resource IS NULL
         OR w.resource = wait_synced.resource
         OR w.table_name = format('k8s.%I', wait_synced.resource)
         OR split_part(w.resource, '.', 1) = wait_synced.resource);
  IF ids IS NULL THEN
    RAISE EXCEPTION 'no watch of % on server "%"', COALESCE(resource, 'any resource'), srv
      USING ERRCODE = 'undefined_object',
            HINT = 'kwatch.watches lists the watches you may see.';
  END IF;
  PERFORM @extschema@._wait_synced(ids, array_fill(0::bigint, ARRAY[cardinality(ids)]), timeout);
END
$$;

-- relist(resource, server, wait, timeout) -> boolean: asks the worker to
-- list the watch of `resource` on `server` again now (client-go's
-- Store.Resync on demand): it ends the watch stream and merges a fresh,
-- consistent LIST in one transaction, notifying what changed (as
-- preexisting; deletions it finds as final_state_unknown).  With wait,
-- returns once that relist has committed (see wait_synced for the errors
-- and timeout).  Counted in kwatch.watches.relist_requests.  Only the
-- watch's owner (or a member) and superusers may (42501); 42704 for no
-- such watch; 55000 when the worker does not run it yet.  Returns true.
CREATE FUNCTION @extschema@._relist_impl(resource text, server text DEFAULT NULL,
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
  SELECT * INTO r FROM @extschema@.registrations x
  WHERE x.server = srv
    AND (x.resource = _relist_impl.resource OR x.table_name = _relist_impl.resource
         OR x.plural = _relist_impl.resource OR lower(x.kind) = lower(_relist_impl.resource)
         OR x.plural || '.' || x.api_group = _relist_impl.resource)
  ORDER BY (x.resource = _relist_impl.resource) DESC, x.id
  LIMIT 1;
  IF NOT FOUND THEN
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
REVOKE ALL ON FUNCTION @extschema@._relist_impl(text, text, boolean, interval) FROM PUBLIC;

-- relist(...): see _relist_impl above; run as watch() is
-- (src/privileged.c).
CREATE FUNCTION @extschema@.relist(resource text, server text DEFAULT NULL,
                                   wait boolean DEFAULT false, timeout interval DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'kwatch_privileged_entry'
LANGUAGE C;
REVOKE ALL ON FUNCTION @extschema@.relist(text, text, boolean, interval) FROM PUBLIC;

-- ---------------------------------------------------------------------
-- Metrics in Prometheus' text exposition format (version 0.0.4,
-- https://prometheus.io/docs/instrumenting/exposition_formats/): the
-- counters client-go's informer exports per watch, with labels server,
-- resource and namespace ("" for all namespaces), from kwatch.watches --
-- so a role sees the metrics of the watches it may see there.
-- ---------------------------------------------------------------------

-- _prometheus_label(v) -> text: `v` as a label value: backslash, double
-- quote and line feed escaped, NULL as "".
CREATE FUNCTION @extschema@._prometheus_label(v text) RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT '"' || replace(replace(replace(COALESCE(v, ''), '\', '\\'), '"', '\"'), E'\n', '\n') || '"'
$$;

-- metrics() -> text: one metric family per counter or gauge, each with
-- # HELP and # TYPE lines, a sample per watch the worker runs (watches
-- not yet started have none).  Scraped by postgres_exporter with
-- test/prometheus/queries.yaml, or by anything that can run a query.
CREATE FUNCTION @extschema@.metrics() RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $m$
WITH w AS (
  SELECT format('server=%s,resource=%s,namespace=%s',
                @extschema@._prometheus_label(server), @extschema@._prometheus_label(resource),
                @extschema@._prometheus_label(namespace)) AS l, *
  FROM @extschema@.watches
  WHERE syncs IS NOT NULL
),
family(ord, name, type, help) AS (VALUES
  (1,  'kwatch_client_calls_total', 'counter', 'LIST and WATCH requests sent to the API server, by verb.'),
  (2,  'kwatch_relist_requests_total', 'counter', 'Relists asked for with kwatch.relist().'),
  (3,  'kwatch_relists_total', 'counter', 'LISTs after the first: after a 410, an apply failure or a request.'),
  (4,  'kwatch_events_total', 'counter', 'Changes applied to the mirror table, by type.'),
  (5,  'kwatch_notifications_total', 'counter', 'NOTIFY messages sent.'),
  (6,  'kwatch_errors_total', 'counter', 'Errors, by source: http (connection, TLS, status), decode, database.'),
  (7,  'kwatch_skipped_objects_total', 'counter', 'Objects skipped because they could not be stored.'),
  (8,  'kwatch_alive_current', 'gauge', '1 while the watch streams (state watching), else 0.'),
  (9,  'kwatch_failing_current', 'gauge', '1 while the watch is failing (state backoff or failed), else 0.'),
  (10, 'kwatch_synced', 'gauge', '1 once the table holds a committed LIST and no relist is pending.'),
  (11, 'kwatch_objects', 'gauge', 'Rows of this watch in its mirror table.'),
  (12, 'kwatch_sync_lag_seconds', 'gauge', 'Seconds since the table last caught up with the stream (an event, bookmark or relist applied).'),
  (13, 'kwatch_event_ring_oldest_seq', 'gauge', 'Oldest seq kwatch.events still holds.'),
  (14, 'kwatch_event_ring_last_seq', 'gauge', 'Newest committed seq of kwatch.events.')
),
sample(ord, labels, value) AS (
  SELECT 1, l || ',verb="list"', list_calls::float8 FROM w
  UNION ALL SELECT 1, l || ',verb="watch"', watch_calls FROM w
  UNION ALL SELECT 2, l, relist_requests FROM w
  UNION ALL SELECT 3, l, relists FROM w
  UNION ALL SELECT 4, l || ',type="ADDED"', added FROM w
  UNION ALL SELECT 4, l || ',type="MODIFIED"', modified FROM w
  UNION ALL SELECT 4, l || ',type="DELETED"', deleted FROM w
  UNION ALL SELECT 4, l || ',type="BOOKMARK"', bookmarks FROM w
  UNION ALL SELECT 5, l, notifications FROM w
  UNION ALL SELECT 6, l || ',source="http"', http_errors FROM w
  UNION ALL SELECT 6, l || ',source="decode"', decode_errors FROM w
  UNION ALL SELECT 6, l || ',source="database"', database_errors FROM w
  UNION ALL SELECT 7, l, skipped_objects FROM w
  UNION ALL SELECT 8, l, (state = 'watching')::int FROM w
  UNION ALL SELECT 9, l, (state IN ('backoff', 'failed'))::int FROM w
  UNION ALL SELECT 10, l, synced::int FROM w
  UNION ALL SELECT 11, l, objects FROM w
  UNION ALL SELECT 12, l, extract(epoch FROM now() - last_sync_at)::float8 FROM w
                          WHERE last_sync_at IS NOT NULL
  UNION ALL SELECT 13, NULL, @extschema@.events_oldest_seq() WHERE @extschema@.events_oldest_seq() IS NOT NULL
  UNION ALL SELECT 14, NULL, @extschema@.events_last_seq() WHERE @extschema@.events_last_seq() IS NOT NULL
)
SELECT COALESCE(string_agg(block, '' ORDER BY ord), '')
FROM (
  SELECT f.ord,
         format(E'# HELP %s %s\n# TYPE %s %s\n', f.name, f.help, f.name, f.type)
         || string_agg(f.name || COALESCE('{' || s.labels || '}', '') || ' '
                       || CASE WHEN s.value = trunc(s.value) AND abs(s.value) < 1e15
                               THEN trunc(s.value)::bigint::text ELSE s.value::text END
                       || E'\n', '' ORDER BY s.labels) AS block
  FROM family f JOIN sample s ON s.ord = f.ord
  GROUP BY f.ord, f.name, f.type, f.help
) b
$m$;
