-- ---------------------------------------------------------------------
-- What `kubectl get -o wide` shows, as one view per mirror table.
--
-- Every mirror table k8s.<t> gets a view kubectl.<t> (same name, schema
-- kubectl): cluster, namespace, name, then kubectl's columns for the kind
-- in kubectl's order (wide ones included) under kubectl's headers in
-- snake case, then uid (to join back to k8s.<t>).  The cells are the
-- printer functions (sql/schema/printers/) applied to `object`, so an
-- expression index on one (CREATE INDEX ON k8s.pods (kwatch.pod_status(object)))
-- serves `WHERE status = ...` on the view.  A cell kubectl prints as
-- "<none>" is NULL.  AGE is `age text`, kubectl's text
-- (kwatch.human_duration(now() - created_at) at query time: "78s",
-- "5m12s", "2d5h"), followed by `created_at timestamptz`, the time it is
-- computed from, to filter and sort on; other times are timestamptz, a
-- Job's DURATION an interval.  A custom resource's view shows its printer
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
-- ---------------------------------------------------------------------

-- _printed_columns(api_group, plural) -> text[]: the view's select list
-- between name and uid for a built-in kind, as "<expression> AS <column>"
-- over table alias t; NULL for a kind without a printer (and for custom
-- resources, whose columns _printed_view_sql reads from printer_columns).
-- Rules: pkg/printers/internalversion/printers.go AddHandlers (the column
-- definitions per kind, wide ones included) of the release the printer
-- functions follow.
CREATE OR REPLACE FUNCTION kwatch._printed_columns(api_group text, plural text) RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT CASE
    WHEN (api_group, plural) = ('', 'pods') THEN ARRAY[
      'kwatch.pod_ready_text(t.object) AS ready', 'kwatch.pod_status(t.object) AS status',
      'kwatch.pod_restarts(t.object) AS restarts', 'kwatch.pod_last_restart(t.object) AS last_restart',
      'kwatch.human_duration(now() - t.created_at) AS age, t.created_at', 'kwatch.pod_ip(t.object) AS ip', 'kwatch.pod_node(t.object) AS node',
      'kwatch.pod_nominated_node(t.object) AS nominated_node',
      'kwatch.pod_readiness_gates(t.object) AS readiness_gates']
    WHEN (api_group, plural) = ('', 'nodes') THEN ARRAY[
      'kwatch.node_status(t.object) AS status', 'kwatch.node_roles(t.object) AS roles',
      'kwatch.human_duration(now() - t.created_at) AS age, t.created_at', 'kwatch.node_version(t.object) AS version',
      'kwatch.node_internal_ip(t.object) AS internal_ip', 'kwatch.node_external_ip(t.object) AS external_ip',
      'kwatch.node_os_image(t.object) AS os_image', 'kwatch.node_kernel_version(t.object) AS kernel_version',
      'kwatch.node_container_runtime(t.object) AS container_runtime']
    WHEN (api_group, plural) = ('', 'namespaces') THEN ARRAY[
      'kwatch.namespace_status(t.object) AS status', 'kwatch.human_duration(now() - t.created_at) AS age, t.created_at']
    WHEN (api_group, plural) = ('apps', 'deployments') THEN ARRAY[
      'kwatch.deployment_ready(t.object) AS ready', 'kwatch.deployment_up_to_date(t.object) AS up_to_date',
      'kwatch.deployment_available(t.object) AS available', 'kwatch.human_duration(now() - t.created_at) AS age, t.created_at',
      'kwatch.deployment_containers(t.object) AS containers', 'kwatch.deployment_images(t.object) AS images',
      'kwatch.deployment_selector(t.object) AS selector']
    WHEN (api_group, plural) = ('apps', 'replicasets') THEN ARRAY[
      'kwatch.replicaset_desired(t.object) AS desired', 'kwatch.replicaset_current(t.object) AS current',
      'kwatch.replicaset_ready(t.object) AS ready', 'kwatch.human_duration(now() - t.created_at) AS age, t.created_at',
      'kwatch.replicaset_containers(t.object) AS containers', 'kwatch.replicaset_images(t.object) AS images',
      'kwatch.replicaset_selector(t.object) AS selector']
    WHEN (api_group, plural) = ('', 'replicationcontrollers') THEN ARRAY[
      'kwatch.replicationcontroller_desired(t.object) AS desired',
      'kwatch.replicationcontroller_current(t.object) AS current',
      'kwatch.replicationcontroller_ready(t.object) AS ready', 'kwatch.human_duration(now() - t.created_at) AS age, t.created_at',
      'kwatch.replicationcontroller_containers(t.object) AS containers',
      'kwatch.replicationcontroller_images(t.object) AS images',
      'kwatch.replicationcontroller_selector(t.object) AS selector']
    WHEN (api_group, plural) = ('apps', 'statefulsets') THEN ARRAY[
      'kwatch.statefulset_ready(t.object) AS ready', 'kwatch.human_duration(now() - t.created_at) AS age, t.created_at',
      'kwatch.statefulset_containers(t.object) AS containers', 'kwatch.statefulset_images(t.object) AS images']
    WHEN (api_group, plural) = ('apps', 'daemonsets') THEN ARRAY[
      'kwatch.daemonset_desired(t.object) AS desired', 'kwatch.daemonset_current(t.object) AS current',
      'kwatch.daemonset_ready(t.object) AS ready', 'kwatch.daemonset_up_to_date(t.object) AS up_to_date',
      'kwatch.daemonset_available(t.object) AS available',
      'kwatch.daemonset_node_selector(t.object) AS node_selector', 'kwatch.human_duration(now() - t.created_at) AS age, t.created_at',
      'kwatch.daemonset_containers(t.object) AS containers', 'kwatch.daemonset_images(t.object) AS images',
      'kwatch.daemonset_selector(t.object) AS selector']
    WHEN (api_group, plural) = ('batch', 'jobs') THEN ARRAY[
      'kwatch.job_status(t.object) AS status', 'kwatch.job_completions(t.object) AS completions',
      'COALESCE(kwatch.job_completion_time(t.object), now()) - kwatch.job_start_time(t.object) AS duration',
      'kwatch.human_duration(now() - t.created_at) AS age, t.created_at',
      'kwatch.job_containers(t.object) AS containers', 'kwatch.job_images(t.object) AS images',
      'kwatch.job_selector(t.object) AS selector']
    WHEN (api_group, plural) = ('batch', 'cronjobs') THEN ARRAY[
      'kwatch.cronjob_schedule(t.object) AS schedule', 'kwatch.cronjob_timezone(t.object) AS timezone',
      'kwatch.cronjob_suspend(t.object) AS suspend', 'kwatch.cronjob_active(t.object) AS active',
      'kwatch.cronjob_last_schedule(t.object) AS last_schedule', 'kwatch.human_duration(now() - t.created_at) AS age, t.created_at',
      'kwatch.cronjob_containers(t.object) AS containers', 'kwatch.cronjob_images(t.object) AS images',
      'kwatch.cronjob_selector(t.object) AS selector']
    WHEN (api_group, plural) = ('', 'services') THEN ARRAY[
      'kwatch.service_type(t.object) AS type', 'kwatch.service_cluster_ip(t.object) AS cluster_ip',
      'kwatch.service_external_ip(t.object) AS external_ip', 'kwatch.service_ports(t.object) AS ports',
      'kwatch.human_duration(now() - t.created_at) AS age, t.created_at', 'kwatch.service_selector(t.object) AS selector']
    WHEN (api_group, plural) = ('', 'endpoints') THEN ARRAY[
      'kwatch.endpoints_endpoints(t.object) AS endpoints', 'kwatch.human_duration(now() - t.created_at) AS age, t.created_at']
    WHEN plural = 'ingresses' AND api_group IN ('networking.k8s.io', 'extensions') THEN ARRAY[
      'kwatch.ingress_class(t.object) AS class', 'kwatch.ingress_hosts(t.object) AS hosts',
      'kwatch.ingress_address(t.object) AS address', 'kwatch.ingress_ports(t.object) AS ports',
      'kwatch.human_duration(now() - t.created_at) AS age, t.created_at']
    WHEN (api_group, plural) = ('', 'configmaps') THEN ARRAY[
      'kwatch.configmap_data(t.object) AS data', 'kwatch.human_duration(now() - t.created_at) AS age, t.created_at']
    WHEN (api_group, plural) = ('', 'secrets') THEN ARRAY[
      'kwatch.secret_type(t.object) AS type', 'kwatch.secret_data(t.object) AS data',
      'kwatch.human_duration(now() - t.created_at) AS age, t.created_at']
    WHEN (api_group, plural) = ('', 'serviceaccounts') THEN ARRAY[
      'kwatch.serviceaccount_secrets(t.object) AS secrets', 'kwatch.human_duration(now() - t.created_at) AS age, t.created_at']
    WHEN (api_group, plural) = ('', 'persistentvolumes') THEN ARRAY[
      'kwatch.persistentvolume_capacity(t.object) AS capacity',
      'kwatch.persistentvolume_access_modes(t.object) AS access_modes',
      'kwatch.persistentvolume_reclaim_policy(t.object) AS reclaim_policy',
      'kwatch.persistentvolume_status(t.object) AS status', 'kwatch.persistentvolume_claim(t.object) AS claim',
      'kwatch.persistentvolume_storageclass(t.object) AS storageclass',
      'kwatch.persistentvolume_volumeattributesclass(t.object) AS volumeattributesclass',
      'kwatch.persistentvolume_reason(t.object) AS reason', 'kwatch.human_duration(now() - t.created_at) AS age, t.created_at',
      'kwatch.persistentvolume_volume_mode(t.object) AS volume_mode']
    WHEN (api_group, plural) = ('', 'persistentvolumeclaims') THEN ARRAY[
      'kwatch.persistentvolumeclaim_status(t.object) AS status',
      'kwatch.persistentvolumeclaim_volume(t.object) AS volume',
      'kwatch.persistentvolumeclaim_capacity(t.object) AS capacity',
      'kwatch.persistentvolumeclaim_access_modes(t.object) AS access_modes',
      'kwatch.persistentvolumeclaim_storageclass(t.object) AS storageclass',
      'kwatch.persistentvolumeclaim_volumeattributesclass(t.object) AS volumeattributesclass',
      'kwatch.human_duration(now() - t.created_at) AS age, t.created_at', 'kwatch.persistentvolumeclaim_volume_mode(t.object) AS volume_mode']
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
      'kwatch.horizontalpodautoscaler_replicas(t.object) AS replicas', 'kwatch.human_duration(now() - t.created_at) AS age, t.created_at']
  END
$$;
REVOKE ALL ON FUNCTION kwatch._printed_columns(text, text) FROM PUBLIC;

-- _printed_view_sql(rel) -> text: the SELECT of view kubectl.<t> for
-- mirror table `rel` (kwatch.tables says its resource), or NULL when
-- kwatch did not make `rel`.  A custom resource (a row in printer_columns)
-- shows the table's typed printer columns that exist, and AGE when its CRD
-- declares no printer columns (apiextensions-apiserver
-- pkg/registry/customresource/tableconvertor: the default columns); a kind
-- without a printer shows NAME and AGE.
CREATE OR REPLACE FUNCTION kwatch._printed_view_sql(rel regclass) RETURNS text
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  m kwatch.tables;
  cols text[];
  pc text[];
BEGIN
  SELECT * INTO m FROM kwatch._mirror_table(rel);
  IF m.relid IS NULL THEN
    RETURN NULL;
  END IF;
  cols := kwatch._printed_columns(m.api_group, m.plural);
  IF cols IS NULL THEN
    SELECT p.columns INTO pc FROM kwatch.printer_columns p
     WHERE (p.api_group, p.plural) = (m.api_group, m.plural);
    IF pc IS NOT NULL AND cardinality(pc) > 0 THEN
      SELECT array_agg(format('t.%I', a.attname) ORDER BY a.attnum) INTO cols
        FROM pg_attribute a
       WHERE a.attrelid = rel AND a.attnum > 0 AND NOT a.attisdropped
         AND a.attname IN (SELECT split_part(c, ' ', 1) FROM unnest(pc) c);
    END IF;
    IF pc IS NULL OR cardinality(pc) = 0 THEN
      cols := ARRAY['kwatch.human_duration(now() - t.created_at) AS age, t.created_at'];
    END IF;
  END IF;
  -- ONLY a plain table: a child its owner attaches (a foreign table, say)
  -- is never scanned for the view's reader
  RETURN format('SELECT t.cluster, t.namespace, t.name, %s t.uid FROM %s%s t',
                COALESCE((SELECT string_agg(c || ', ', '') FROM unnest(cols) c), ''),
                CASE (SELECT c.relkind FROM pg_class c WHERE c.oid = rel) WHEN 'r' THEN 'ONLY ' ELSE '' END,
                rel);
END
$$;
REVOKE ALL ON FUNCTION kwatch._printed_view_sql(regclass) FROM PUBLIC;

-- _printed_view(rel) -> regclass: the view kubectl.<t> of mirror table
-- `rel` (k8s.<t>), or NULL when there is none: a view of that name in
-- schema kubectl that reads `rel`; a relation of that name that does not
-- is not kwatch's.
CREATE OR REPLACE FUNCTION kwatch._printed_view(rel regclass) RETURNS regclass
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT v.oid::regclass
    FROM pg_class t, pg_class v, pg_rewrite w, pg_depend d
   WHERE t.oid = rel AND v.relnamespace = to_regnamespace('kubectl')
     AND v.relname = t.relname AND v.relkind = 'v'
     AND w.ev_class = v.oid AND d.classid = 'pg_rewrite'::regclass AND d.objid = w.oid
     AND d.refclassid = 'pg_class'::regclass AND d.refobjid = rel
   LIMIT 1
$$;
REVOKE ALL ON FUNCTION kwatch._printed_view(regclass) FROM PUBLIC;

-- _drop_printed_view(rel): drops the view kubectl.<t> of mirror table
-- `rel`, if there is one (before the table, or a column it shows, is
-- dropped), with CASCADE: what depends on it goes too, as with the
-- owner's DROP TABLE ... CASCADE, since any role may make a (temporary)
-- view over it and must not block unwatch(drop_table => true), DROP OWNED
-- or a CRD's column change that way.  Waits at most 5 s for its lock
-- (55P03 after that: a role holding the view open in a transaction).
CREATE OR REPLACE FUNCTION kwatch._drop_printed_view(rel regclass) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET lock_timeout TO '5s'
    AS $$
DECLARE
  v regclass := kwatch._printed_view(rel);
BEGIN
  IF v IS NOT NULL THEN
    EXECUTE format('DROP VIEW %s CASCADE', v);
  END IF;
END
$$;
REVOKE ALL ON FUNCTION kwatch._drop_printed_view(regclass) FROM PUBLIC;

-- _drop_printed_views_of(roles oid[]): drops the views kubectl.<t> of the
-- mirror tables `roles` own, for DROP OWNED BY (src/functions/ownership.c),
-- whose drop of the tables the views would otherwise refuse; with CASCADE,
-- as _drop_printed_view.
CREATE OR REPLACE FUNCTION kwatch._drop_printed_views_of(roles oid[]) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
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
REVOKE ALL ON FUNCTION kwatch._drop_printed_views_of(oid[]) FROM PUBLIC;

-- _make_printed_view(rel) -> regclass: makes or refreshes kubectl.<t> for
-- mirror table `rel` = k8s.<t> (this file's head says what it shows);
-- returns it, or NULL when none was made: `rel` is no mirror table kwatch
-- made, schema kubectl belongs to a role that is no superuser, kubectl.<t>
-- is taken by something else, or the view changes columns while a view
-- depends on it (each with a WARNING or NOTICE: watch() goes on).
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
-- any role: CREATE VIEW, DROP VIEW, GRANT and REVOKE only.  No view (a
-- WARNING, and the former one dropped) over a relation that is not a
-- table or whose columns the view reads are not of built-in types: the
-- view would run the owner's casts as its reader.
CREATE OR REPLACE FUNCTION kwatch._make_printed_view(rel regclass) RETURNS regclass
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET lock_timeout TO '5s'
    AS $$
DECLARE
  q text := kwatch._printed_view_sql(rel);
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
  v := kwatch._printed_view(rel);
  -- what the view reads must run no code of the table's owner for its
  -- reader: a table (not a view), and the columns it reads of built-in
  -- types (an owner's type, or a domain, brings casts and functions of the
  -- owner's; PostgreSQL only refuses ALTER COLUMN ... TYPE while the view
  -- exists, not DROP COLUMN ... CASCADE and a new column); otherwise no
  -- view, and the one there was goes
  IF (SELECT c.relkind NOT IN ('r', 'p') FROM pg_class c WHERE c.oid = rel)
     OR EXISTS (SELECT 1 FROM pg_attribute a
                 WHERE a.attrelid = rel AND a.attnum > 0 AND NOT a.attisdropped
                   AND a.atttypid >= 16384   -- FirstNormalObjectId: not a built-in type
                   AND position(format('t.%I', a.attname) IN q) > 0) THEN
    IF v IS NOT NULL THEN
      EXECUTE format('DROP VIEW %s', v);
    END IF;
    RAISE WARNING 'no view kubectl.% made: % has a column of a type of its own, or is no table', tname, rel
      USING DETAIL = 'The view would run code of the table''s owner for every role that reads it.',
            HINT = 'Give the columns kwatch made their types again, then call watch() again.';
    RETURN NULL;
  END IF;
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
REVOKE ALL ON FUNCTION kwatch._make_printed_view(regclass) FROM PUBLIC;
