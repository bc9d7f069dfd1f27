-- ---------------------------------------------------------------------
-- Mirror tables: k8s.<table>, one per watched resource (several watches,
-- of several servers, may write one), made by watch() through
-- create_mirror_table and recorded by OID in kwatch.tables.
-- ---------------------------------------------------------------------

-- _delete_cluster_rows(rel, cluster) -> bigint: deletes the rows of
-- `cluster` from mirror table `rel` as the table's owner, under
-- SECURITY_RESTRICTED_OPERATION (src/apply/sync.c); returns how many.
CREATE OR REPLACE FUNCTION kwatch._delete_cluster_rows(rel regclass, cluster text) RETURNS bigint
    LANGUAGE c STRICT
    AS 'MODULE_PATHNAME', 'kwatch_delete_cluster_rows';
REVOKE ALL ON FUNCTION kwatch._delete_cluster_rows(regclass, text) FROM PUBLIC;

-- _drop_relist_stage(id): drops watch `id`'s relist staging table
-- (kwatch_stage.relist_stage_<id>, which the worker creates,
-- src/apply/sync.c) if there is one.
CREATE OR REPLACE FUNCTION kwatch._drop_relist_stage(id integer) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF to_regclass(format('kwatch_stage.relist_stage_%s', id)) IS NOT NULL THEN
    EXECUTE format('DROP TABLE kwatch_stage.relist_stage_%s', id);
  END IF;
END
$$;
REVOKE ALL ON FUNCTION kwatch._drop_relist_stage(integer) FROM PUBLIC;

-- _mirror_table(rel) -> the row of kwatch.tables for table `rel`, or
-- nothing when kwatch did not make it (or its OID now names another
-- table).  Drops the rows of tables that are gone.  For watch() and
-- history(); not granted to PUBLIC.
CREATE OR REPLACE FUNCTION kwatch._mirror_table(rel regclass) RETURNS SETOF kwatch.tables
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  DELETE FROM kwatch.tables t
   WHERE NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = t.relid);
  RETURN QUERY
    SELECT t.* FROM kwatch.tables t, pg_class c
     WHERE t.relid = rel AND c.oid = t.relid AND c.relname = t.relname
       AND c.relnamespace = to_regnamespace('k8s');
END
$$;
REVOKE ALL ON FUNCTION kwatch._mirror_table(regclass) FROM PUBLIC;

-- create_mirror_table(table_name, api_group, api_version, plural) ->
-- regclass: creates k8s.<table_name> for a resource unless it exists (then
-- it is returned, its generated columns restored as its owner,
-- _restore_columns_as_owner).  One row per object, keyed by (cluster, uid);
-- everything but the key, resource_version and the object is derived from
-- the object by generated columns (base_columns, typed_columns), so the
-- worker writes four values per row and users may add columns and indexes
-- freely; a GIN index on labels (jsonb_path_ops), and the indexes of the
-- relation functions (_create_relation_indexes).  A table it makes is
-- recorded in kwatch.tables, made by the current user (watch() records its
-- caller).
CREATE OR REPLACE FUNCTION kwatch.create_mirror_table(table_name text, api_group text, api_version text, plural text) RETURNS regclass
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
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
    PERFORM kwatch._restore_columns_as_owner(format('k8s.%I', table_name)::regclass,
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
  EXECUTE format('CREATE INDEX ON k8s.%I USING gin (labels jsonb_path_ops)', table_name);
  PERFORM kwatch._create_relation_indexes(format('k8s.%I', table_name)::regclass, api_group, plural);
  -- for people reading \dt+; kwatch itself goes by kwatch.tables
  EXECUTE format('COMMENT ON TABLE k8s.%I IS %L', table_name,
                 format('kwatch mirror of %s (%s)', plural,
                        CASE api_group WHEN '' THEN api_version
                             ELSE api_group || '/' || api_version END));
  rel := format('k8s.%I', table_name)::regclass;
  DELETE FROM kwatch.tables t
   WHERE t.relid = rel OR NOT EXISTS (SELECT 1 FROM pg_class x WHERE x.oid = t.relid);
  INSERT INTO kwatch.tables (relid, relname, api_group, plural, made_by)
  VALUES (rel, table_name, api_group, plural, current_user::regrole);
  RETURN rel;
END
$_$;
REVOKE ALL ON FUNCTION kwatch.create_mirror_table(text, text, text, text) FROM PUBLIC;
