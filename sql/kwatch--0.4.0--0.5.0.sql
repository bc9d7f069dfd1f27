-- kwatch 0.4.0 -> 0.5.0.
--
-- This script is shared: each change has its own section below, headed by
-- the issue it answers.  Append new sections at the end.

\echo Use "ALTER EXTENSION kwatch UPDATE TO '0.5.0'" to load this file. \quit

-- =====================================================================
-- Issue 22, hole 1: kwatch knows its mirror tables by OID, never by their
-- comment.
--
-- 0.4.0 took an existing table k8s.<t> for a mirror of resource X when
-- its comment said "kwatch mirror of X (...)", which the table's owner can
-- write, and let another role's watch into it when that role held INSERT,
-- UPDATE and DELETE on it, which the owner can grant to PUBLIC: a tenant
-- could prepare a table under a resource's default name and receive the
-- next role's watch of that resource (a superuser's Secrets watch, with
-- secret_data).  Now:
--   * kwatch.tables records every table kwatch made, by OID (regclass, so
--     that pg_dump and pg_upgrade carry it), with the resource it mirrors;
--   * a watch uses an existing table only when kwatch made it for that
--     resource and the calling role owns it (or has its owner's
--     privileges), and a superuser's watch never one a non-superuser owns;
--   * joining an existing table says so (NOTICE: the table and its owner);
--   * watch() with the settings of another role's existing watch no longer
--     returns that role's table quietly: a role without that role's
--     privileges gets an error that names the role and nothing of its
--     settings, whatever settings it passed (so that it cannot probe
--     them); a member or superuser gets the table and a NOTICE that
--     nothing was registered.
-- =====================================================================

-- The mirror tables kwatch made.  Written by watch() (and
-- create_mirror_table) only; read by watch() and history().  `relname` is
-- the table's name when kwatch made it: a row whose relid now names
-- another table (a dropped table's OID reused, or the table renamed) does
-- not count.
CREATE TABLE @extschema@.tables (
    relid     regclass PRIMARY KEY,   -- the table, k8s.<relname>
    relname   name NOT NULL,          -- its name when made
    api_group text NOT NULL,          -- the resource it mirrors ('' = core)
    plural    text NOT NULL,
    made_by   regrole NOT NULL,       -- the role whose watch made it
    made_at   timestamptz NOT NULL DEFAULT now()
);
SELECT pg_catalog.pg_extension_config_dump('@extschema@.tables', '');
GRANT SELECT ON @extschema@.tables TO PUBLIC;

-- Existing installations: the tables of today's watches are kwatch's
-- (0.4.0 made or took them), and so are tables with kwatch's comment whose
-- owner is a superuser (no tenant can own such a table or set its
-- comment).  A table of a non-superuser that no watch uses any more is not
-- recorded: a watch that wants its name gets the group-qualified name
-- instead (README "Upgrading").
INSERT INTO @extschema@.tables (relid, relname, api_group, plural, made_by, made_at)
SELECT DISTINCT ON (c.oid) c.oid::regclass, c.relname, r.api_group, r.plural,
       c.relowner::regrole, r.created_at
  FROM @extschema@.registrations r
  JOIN pg_catalog.pg_class c ON c.relname = r.table_name AND c.relkind IN ('r', 'p')
                            AND c.relnamespace = to_regnamespace('k8s')
 ORDER BY c.oid, r.id;
INSERT INTO @extschema@.tables (relid, relname, api_group, plural, made_by)
SELECT c.oid::regclass, c.relname,
       CASE WHEN m[2] LIKE '%/%' THEN split_part(m[2], '/', 1) ELSE '' END,
       m[1], c.relowner::regrole
  FROM pg_catalog.pg_class c
  JOIN pg_catalog.pg_roles o ON o.oid = c.relowner AND o.rolsuper
  CROSS JOIN LATERAL regexp_match(pg_catalog.obj_description(c.oid, 'pg_class'),
                                  '^kwatch mirror of ([^ ]+) \(([^)]*)\)$') m
 WHERE c.relnamespace = to_regnamespace('k8s') AND c.relkind IN ('r', 'p')
   AND m IS NOT NULL
ON CONFLICT (relid) DO NOTHING;

-- Watches 0.4.0 let into another role's table (with INSERT, UPDATE and
-- DELETE granted, or a superuser's into a role's table) keep running: the
-- update names each, so that an administrator can look at the table and
-- unwatch what should not write into it.
DO $$
DECLARE
  w record;
BEGIN
  FOR w IN
    SELECT r.id, r.resource, r.server, c.oid::regclass AS rel, c.relowner::regrole AS table_owner
      FROM @extschema@.registrations r
      JOIN pg_catalog.pg_class c ON c.relname = r.table_name AND c.relkind IN ('r', 'p')
                                AND c.relnamespace = to_regnamespace('k8s')
      JOIN pg_catalog.pg_roles t ON t.oid = c.relowner
      LEFT JOIN pg_catalog.pg_roles o ON o.oid = r.owner
     WHERE o.oid IS NULL
        OR NOT pg_catalog.pg_has_role(r.owner, c.relowner, 'USAGE')
        OR (o.rolsuper AND NOT t.rolsuper)
     ORDER BY r.id
  LOOP
    RAISE WARNING 'watch % (% on server "%") writes table %, which role % owns', w.id, w.resource,
                  w.server, w.rel, w.table_owner
      USING DETAIL = 'kwatch 0.5.0 lets a watch write only a table its role owns, and a superuser''s none of a non-superuser''s; this one predates the rule.',
            HINT = 'Check the table''s triggers, rules and grants; unwatch the watch if it should not write there.';
  END LOOP;
END
$$;

-- _mirror_table(rel) -> the row of kwatch.tables for table `rel`, or
-- nothing when kwatch did not make it (or its OID now names another
-- table).  Drops the rows of tables that are gone.  For watch() and
-- history(); not granted to PUBLIC.
CREATE FUNCTION @extschema@._mirror_table(rel regclass)
RETURNS SETOF @extschema@.tables
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  DELETE FROM @extschema@.tables t
   WHERE NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = t.relid);
  RETURN QUERY
    SELECT t.* FROM @extschema@.tables t, pg_class c
     WHERE t.relid = rel AND c.oid = t.relid AND c.relname = t.relname
       AND c.relnamespace = to_regnamespace('k8s');
END
$$;
REVOKE ALL ON FUNCTION @extschema@._mirror_table(regclass) FROM PUBLIC;

-- create_mirror_table(table_name, api_group, api_version, plural) ->
-- regclass: as in 0.2.0 (an existing table is returned, its generated
-- columns restored as its owner), and a table it makes is recorded in
-- kwatch.tables, made by the current user (watch() records its caller).
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
  EXECUTE format('CREATE INDEX ON k8s.%I USING gin (labels)', table_name);
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

-- _excerpt(s) -> text: `s` for an error message that echoes it: at most
-- 300 characters, marked "... (N characters, cut)" when longer (issue 22,
-- hole 4; the C side's kw_excerpt, src/http.c).  NULL stays NULL.
CREATE FUNCTION @extschema@._excerpt(s text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE WHEN length(s) > 300 THEN left(s, 300) || format('... (%s characters, cut)', length(s))
              ELSE s END
$$;
REVOKE ALL ON FUNCTION @extschema@._excerpt(text) FROM PUBLIC;

-- _watch_impl(...): see watch() (0.3.0's signature, grants kept).  The
-- resource is resolved, the registration checked against an existing one
-- of the same server, the table chosen, made or joined (the rules above),
-- the registration stored and history enabled.  ERRORs: 22023 bad
-- arguments, 0A000 a resource without list and watch, 42710 the resource
-- already watched on the server (with other settings, or by a role whose
-- privileges the caller lacks), 42P07 a table name taken by a table kwatch
-- did not make for this resource, 42501 an existing mirror table the
-- caller may not have the worker write, 42622 a table name too long.
-- It gains apply_timeout (issue 21, "Apply workers" at the end of this
-- script): the watch's own kwatch.apply_timeout.
ALTER TABLE @extschema@.registrations ADD COLUMN apply_timeout interval
  CHECK (apply_timeout IS NULL OR apply_timeout >= interval '0');
DROP FUNCTION @extschema@._watch_impl(text, text, text, text, text, boolean, text, boolean,
                                      text, @extschema@.interval_range,
                                      @extschema@.interval_range, boolean, interval, bigint);
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

  SELECT * INTO existing FROM @extschema@.registrations r
  WHERE r.server = srv AND r.api_group = d.api_group AND r.plural = d.plural;
  IF FOUND THEN
    -- Another role's watch: one without that role's privileges learns who
    -- holds it and nothing else; the answer is the same whatever settings
    -- it passed, so it cannot probe the other watch's selectors.
    IF NOT (caller_super
            OR (EXISTS (SELECT 1 FROM pg_roles a WHERE a.oid = existing.owner)
                AND pg_has_role(d.caller, existing.owner, 'USAGE'))) THEN
      RAISE EXCEPTION '% is already watched on server "%" by role %', canonical, srv,
                      existing.owner::regrole
        USING ERRCODE = 'duplicate_object',
              DETAIL = 'One watch per resource per server; nothing was registered for you.',
              HINT = 'Ask that role to share its table (GRANT SELECT), or watch on another server.';
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
    RAISE EXCEPTION '% is already watched on server "%" with other settings', canonical, srv
      USING ERRCODE = 'duplicate_object',
            HINT = format('Call @extschema@.unwatch(%L, server => %L) first.', canonical, srv);
  END IF;

  -- The server validates selectors, namespace and permissions for us.
  PERFORM @extschema@._probe(srv, d.api_group, d.api_version, d.plural, namespace,
                        label_selector, field_selector);

  -- Table: the one this resource already has (watched on another server),
  -- else the plural, else the plural qualified by the group on a collision.
  -- A name is this resource's only when kwatch made the table of that name
  -- for it (kwatch.tables), whatever the table's comment says.
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
  -- it as its owner (src/sync.c), so a trigger on it runs with the owner's
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
                 AND NOT (caller_super
                          OR (EXISTS (SELECT 1 FROM pg_roles a WHERE a.oid = r.owner)
                              AND pg_has_role(d.caller, r.owner, 'USAGE')))) THEN
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

-- _history_impl(table_name, enabled, retention, max_rows): as in 0.3.0,
-- but a mirror table is one kwatch made (kwatch.tables), not one whose
-- comment says so.  ERRORs: 42809 not a kwatch mirror table, 42501 not
-- its owner's role.
CREATE OR REPLACE FUNCTION @extschema@._history_impl(table_name regclass, enabled boolean DEFAULT true,
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
  IF NOT FOUND OR NOT EXISTS (SELECT 1 FROM @extschema@._mirror_table(table_name)) THEN
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

-- =====================================================================
-- Issue 22: helper functions that nobody needs to call directly are no
-- longer executable by PUBLIC.  Each one kept public has a caller that runs
-- with the rights of whoever uses kwatch:
--   restore_generated_columns(text, text, text)  run as a mirror table's
--       owner by watch() (src/sync.c, kw_restore_columns_as_owner); alters
--       only tables its caller owns
--   _builtin_columns(text, text)  typed_columns() -> live_columns(), which
--       a live table's scan and IMPORT FOREIGN SCHEMA call as the user
--   _change_origin()  _history_trigger() calls it as whoever writes the
--       mirror table (the worker as the table's owner, or the owner)
--   _default_server(), _wait_synced(integer[], bigint[], interval)
--       wait_synced(), public; _wait_synced waits only for watches that
--       kwatch.watches shows the caller (src/sync_wait.c)
--   _prometheus_label(text)  metrics(), public; a pure function
-- Revoked: _check_retry_range and _printer_column_defs (called by
-- watch()'s implementation, as the extension's owner) and _history_trigger
-- (a trigger function: PostgreSQL checks EXECUTE when the trigger is
-- created, by history() as the extension's owner, not when it fires).
-- =====================================================================
REVOKE ALL ON FUNCTION @extschema@._check_retry_range(text, @extschema@.interval_range) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@._printer_column_defs(jsonb, text[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@._history_trigger() FROM PUBLIC;

-- =====================================================================
-- Issue 21: apply workers.  A watch may have its own deadline for the
-- batches it applies (watch(apply_timeout => ...), NULL: the
-- kwatch.apply_timeout setting; 0: none), stored in
-- registrations.apply_timeout (added with _watch_impl above).  watch()
-- gains the argument; the EXECUTE grants of the old watch() pass to the
-- new one.
-- =====================================================================
CREATE TEMP TABLE kwatch_watch_grants AS
  SELECT a.grantee FROM pg_catalog.pg_proc p, LATERAL pg_catalog.aclexplode(p.proacl) a
  WHERE p.oid = '@extschema@.watch(text, text, text, text, text, boolean, text, boolean, text,
                                   @extschema@.interval_range, @extschema@.interval_range,
                                   boolean, interval, bigint)'::regprocedure
    AND a.privilege_type = 'EXECUTE'
    AND a.grantee <> (SELECT e.extowner FROM pg_catalog.pg_extension e WHERE e.extname = 'kwatch');
DROP FUNCTION @extschema@.watch(text, text, text, text, text, boolean, text, boolean, text,
                                @extschema@.interval_range, @extschema@.interval_range,
                                boolean, interval, bigint);

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
                      history_max_rows bigint DEFAULT NULL,
                      apply_timeout interval DEFAULT NULL)
RETURNS regclass
AS 'MODULE_PATHNAME', 'kwatch_privileged_entry'
LANGUAGE C;
REVOKE ALL ON FUNCTION @extschema@.watch(text, text, text, text, text, boolean, text, boolean, text,
                                         @extschema@.interval_range, @extschema@.interval_range,
                                         boolean, interval, bigint, interval) FROM PUBLIC;
DO $$
DECLARE
  g oid;
BEGIN
  FOR g IN SELECT grantee FROM kwatch_watch_grants LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION @extschema@.watch(text, text, text, text, text, boolean,'
                   ' text, boolean, text, @extschema@.interval_range, @extschema@.interval_range, boolean,'
                   ' interval, bigint, interval) TO %s',
                   CASE g WHEN 0 THEN 'PUBLIC' ELSE g::regrole::text END);
  END LOOP;
END
$$;
DROP TABLE kwatch_watch_grants;
