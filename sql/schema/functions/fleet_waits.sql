-- ---------------------------------------------------------------------
-- Read your own writes in a fleet database: wait_apply(wait_mirror =>
-- true) where no watch of this database mirrors the resource on that
-- server, and its rows arrive by logical replication from the cluster
-- database that watches it (doc/operations.md, "A fleet of instances";
-- src/functions/apply.c, kwatch_wait_apply).
-- ---------------------------------------------------------------------

-- _rv_at_least(a, b) -> boolean: whether resourceVersion `a` is `b` or
-- newer, compared as Kubernetes 1.35 allows for one resource (PROTOCOL 28,
-- apimachinery pkg/util/resourceversion CompareResourceVersion: decimal
-- strings without leading zeros, the longer is greater, then character by
-- character); a resourceVersion that is not such a string is only ever
-- equal to itself.  NULL when either is NULL.
CREATE OR REPLACE FUNCTION kwatch._rv_at_least(a text, b text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT CASE
           WHEN a IS NULL OR b IS NULL THEN NULL
           WHEN a = b THEN true
           WHEN a !~ '^[1-9][0-9]*$' OR b !~ '^[1-9][0-9]*$' THEN false
           ELSE length(a) > length(b) OR (length(a) = length(b) AND a COLLATE "C" > b COLLATE "C")
         END
$$;

-- _replicated_table(api_group, plural) -> regclass: the table of schema
-- k8s that holds `plural`'s (of `api_group`) rows in a database that does
-- not watch it: the name watch() gives a resource's first table
-- (functions/watch.sql: the plural, else the plural qualified by the group
-- on a collision, "<plural>_core" for the core group), the plural first;
-- a table whose comment (COMMENT ON TABLE, which pg_dump copies) names
-- another resource is skipped ("kwatch mirror of <plural> (<group>/<version>)",
-- functions/mirror_tables.sql).  NULL when there is none.
CREATE OR REPLACE FUNCTION kwatch._replicated_table(api_group text, plural text) RETURNS regclass
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT t.rel
    FROM unnest(ARRAY[plural, plural || '_' || CASE api_group WHEN '' THEN 'core'
                                                ELSE replace(replace(api_group, '.', '_'), '-', '_') END])
         WITH ORDINALITY AS n(relname, i)
    CROSS JOIN LATERAL (SELECT to_regclass(format('k8s.%I', n.relname)) AS rel) t
   WHERE t.rel IS NOT NULL
     AND (obj_description(t.rel, 'pg_class') IS NULL
          OR obj_description(t.rel, 'pg_class') NOT LIKE 'kwatch mirror of %'
          OR (api_group = '' AND obj_description(t.rel, 'pg_class') LIKE format('kwatch mirror of %s (%%)', plural)
              AND obj_description(t.rel, 'pg_class') NOT LIKE '%/%')
          OR (api_group <> '' AND obj_description(t.rel, 'pg_class')
                                  LIKE format('kwatch mirror of %s (%s/%%)', plural, api_group)))
   ORDER BY n.i
   LIMIT 1
$$;

-- _wait_replicated(server, api_group, plural, verb, namespace, name, uid,
-- resource_version, until) -> regclass: waits, reading the table again
-- every 50 ms (each read a new snapshot: READ COMMITTED), until the rows of
-- cluster `server` in the table _replicated_table() finds show apply's
-- outcome, and returns that table (NULL at once, without waiting, when
-- kwatch made that table in this database, kwatch.tables: its rows come
-- from this database's watches, and none the caller sees mirrors that
-- server):
--   verb 'apply': the row of `uid` has `resource_version` or a newer one,
--     or the row of that namespace and name has another uid (the applied
--     object was deleted and made again since);
--   verb 'delete': no row of that namespace and name is left (of that uid,
--     when the delete gave one: its uid precondition).
-- Read with the caller's rights (a table the caller may not read fails,
-- 42501), so PUBLIC may execute it.  ERRORs: 42P01 no such table (nothing
-- mirrors the resource here: no watch, no replicated table), 57014 at
-- `until` (NULL: no limit but statement_timeout and cancel).  An object the
-- cluster database's watch does not mirror (another namespace, a selector
-- it does not match), or deleted since, never shows: the wait ends at
-- `until`.
CREATE OR REPLACE FUNCTION kwatch._wait_replicated(server text, api_group text, plural text, verb text,
                                                   namespace text, name text, uid text,
                                                   resource_version text, until timestamptz)
    RETURNS regclass
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  rel regclass := kwatch._replicated_table(api_group, plural);
  done boolean;
BEGIN
  IF rel IS NULL THEN
    RAISE EXCEPTION 'nothing mirrors % on server "%" in this database', plural, server
      USING ERRCODE = 'undefined_table',
            DETAIL = format('No watch of yours mirrors it here, and there is no table k8s.%I.', plural),
            HINT = 'Watch it here, or replicate its mirror table from the cluster database that watches it (doc/operations.md, "A fleet of instances"); or call kwatch.wait_apply() without wait_mirror.';
  END IF;
  -- a table kwatch made here gets its rows from this database's watches
  -- only, and none the caller sees mirrors that server: nothing to wait for
  -- (as before 0.8.0), rather than a wait that no row would ever end
  IF EXISTS (SELECT 1 FROM kwatch.tables t JOIN pg_class c ON c.oid = t.relid AND c.relname = t.relname
              WHERE t.relid = rel) THEN
    RETURN NULL;
  END IF;
  LOOP
    IF verb = 'delete' THEN
      EXECUTE format('SELECT NOT EXISTS (SELECT 1 FROM %s t WHERE t.cluster = $1'
                     ' AND t.namespace IS NOT DISTINCT FROM $2 AND t.name = $3 AND ($4 IS NULL OR t.uid = $4))', rel)
        INTO done USING server, namespace, name, uid;
    ELSE
      EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s t WHERE t.cluster = $1'
                     ' AND ((t.uid = $4 AND kwatch._rv_at_least(t.resource_version, $5))'
                     '      OR (t.namespace IS NOT DISTINCT FROM $2 AND t.name = $3 AND t.uid <> $4)))', rel)
        INTO done USING server, namespace, name, uid, resource_version;
    END IF;
    EXIT WHEN done;
    IF until IS NOT NULL AND clock_timestamp() >= until THEN
      RAISE EXCEPTION 'the replicated row of % "%" on server "%" does not show the % at the timeout',
                      plural, name, server, CASE verb WHEN 'delete' THEN 'deletion' ELSE 'apply' END
        USING ERRCODE = 'query_canceled',
              DETAIL = format('Table %s, read in this database: its rows arrive by logical replication.', rel),
              HINT = 'See the fleet database''s subscriptions (pg_stat_subscription), and the cluster database''s watch of it (kwatch.watches there).';
    END IF;
    PERFORM pg_sleep(0.05);
  END LOOP;
  RETURN rel;
END
$$;
