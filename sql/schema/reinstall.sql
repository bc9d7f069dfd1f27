-- ---------------------------------------------------------------------
-- CREATE EXTENSION after DROP EXTENSION kwatch: the drop leaves schema k8s
-- and its tables (the mirror tables and their history are the user's
-- data; DROP EXTENSION ... CASCADE drops only their generated columns that
-- call kwatch's functions, which watch() restores).  The mirror tables
-- kwatch made that a superuser owns are recorded in kwatch.tables again,
-- found by kwatch's comment ("kwatch mirror of <plural> (<group/version>)",
-- create_mirror_table): no tenant can own such a table or set its comment.
-- A table of a non-superuser is not recorded (its comment proves nothing):
-- a watch that wants its name gets the group-qualified name instead
-- (doc/operations.md, "Upgrading").  The tables recorded get their views
-- kubectl.<t> and, when kwatch made it with jsonb_ops, their labels index
-- rebuilt with jsonb_path_ops, as create_mirror_table makes it.  A first
-- install finds no such table, and this does nothing.
-- ---------------------------------------------------------------------
INSERT INTO kwatch.tables (relid, relname, api_group, plural, made_by)
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

-- Their views.  What an extension script makes becomes a member of the
-- extension, which these views (and schema kubectl) must not be: they
-- belong with their tables (DROP EXTENSION would take them, pg_dump would
-- leave them out), so each leaves the extension at once; one that cannot
-- be made is reported and skipped, and watch() makes it later.
DO $$
DECLARE
  r record;
  v regclass;
  new_schema boolean := to_regnamespace('kubectl') IS NULL;
BEGIN
  FOR r IN SELECT t.relid FROM kwatch.tables t JOIN pg_class c ON c.oid = t.relid ORDER BY t.relname LOOP
    BEGIN
      -- a table's owner holding a lock on it must not stall the install:
      -- its view is made by its next watch() instead
      SET LOCAL lock_timeout = '5s';
      v := kwatch._make_printed_view(r.relid);
      IF v IS NOT NULL THEN
        EXECUTE format('ALTER EXTENSION kwatch DROP VIEW %s', v);
      END IF;
    EXCEPTION WHEN OTHERS THEN
      RAISE WARNING 'no view kubectl.% made: %', r.relid::regclass, SQLERRM
        USING HINT = 'Call watch() for it again once the cause is gone.';
    END;
  END LOOP;
  RESET lock_timeout;
  IF new_schema AND to_regnamespace('kubectl') IS NOT NULL THEN
    ALTER EXTENSION kwatch DROP SCHEMA kubectl;
  END IF;
END
$$;


-- Their labels index, when kwatch made it with jsonb_ops (before 0.7.0),
-- rebuilt with jsonb_path_ops, as create_mirror_table makes it
-- (doc/reference.md, the labels index).  An index a table's owner made,
-- or changed, is left alone.
-- The new index is built beside the old one (a SHARE lock: reads go on),
-- then the old one dropped and the new one renamed (ACCESS EXCLUSIVE, a
-- moment); each table's lock is waited for at most 5 s, after which that
-- table keeps its index and a WARNING says how to rebuild it later.
DO $$
DECLARE
  r record;
  saved text := current_setting('lock_timeout');
BEGIN
  PERFORM set_config('lock_timeout', '5s', true);
  FOR r IN
    SELECT i.indexrelid::regclass AS idx, i.indrelid::regclass AS rel, ic.relname AS idxname
      FROM kwatch.tables t
      JOIN pg_class tc ON tc.oid = t.relid AND tc.relname = t.relname
                      AND tc.relnamespace = (SELECT n.oid FROM pg_namespace n WHERE n.nspname = 'k8s')
      JOIN pg_index i ON i.indrelid = t.relid
      JOIN pg_class ic ON ic.oid = i.indexrelid
      JOIN pg_am am ON am.oid = ic.relam
      JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
      JOIN pg_opclass oc ON oc.oid = i.indclass[0]
     WHERE am.amname = 'gin' AND oc.opcname = 'jsonb_ops' AND a.attname = 'labels'
       AND i.indnatts = 1 AND i.indpred IS NULL AND i.indexprs IS NULL
       AND ic.relname = tc.relname || '_labels_idx'
     ORDER BY 2
  LOOP
    BEGIN
      EXECUTE format('CREATE INDEX %I ON %s USING gin (labels jsonb_path_ops)',
                     'kwatch_labels_' || r.rel::oid, r.rel);
      EXECUTE format('DROP INDEX %s', r.idx);
      EXECUTE format('ALTER INDEX k8s.%I RENAME TO %I', 'kwatch_labels_' || r.rel::oid, r.idxname);
    EXCEPTION WHEN lock_not_available THEN
      RAISE WARNING 'kept the jsonb_ops index % of %: its table stayed locked for 5 s', r.idxname, r.rel
        USING HINT = format('Later, as the table''s owner: CREATE INDEX ON %s USING gin (labels jsonb_path_ops); DROP INDEX k8s.%I;',
                            r.rel, r.idxname);
    END;
  END LOOP;
  PERFORM set_config('lock_timeout', saved, true);
END
$$;


-- Their relation indexes (on kwatch.controller_uid(owner_references), which
-- DROP EXTENSION ... CASCADE drops with the function), made again as
-- create_mirror_table makes them (_create_relation_indexes), each table's
-- lock waited for at most 5 s (then a WARNING, and the table goes without).
DO $$
DECLARE
  r record;
BEGIN
  FOR r IN SELECT t.relid, t.api_group, t.plural FROM kwatch.tables t
            JOIN pg_class c ON c.oid = t.relid AND c.relname = t.relname
           WHERE (t.api_group, t.plural) IN (('', 'pods'), ('apps', 'replicasets'), ('batch', 'jobs'))
           ORDER BY t.relname LOOP
    BEGIN
      SET LOCAL lock_timeout = '5s';
      PERFORM kwatch._create_relation_indexes(r.relid, r.api_group, r.plural);
    EXCEPTION WHEN OTHERS THEN
      RAISE WARNING 'table % gets no relation indexes: %', r.relid, SQLERRM
        USING HINT = 'Create them as its owner: see doc/reference.md, "Relations".';
    END;
  END LOOP;
  RESET lock_timeout;
END
$$;
