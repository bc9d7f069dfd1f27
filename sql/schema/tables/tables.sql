-- tables: the mirror tables kwatch made.  Written by watch() (and
-- create_mirror_table) only; read by watch() and history().  `relname` is
-- the table's name when kwatch made it: a row whose relid now names
-- another table (a dropped table's OID reused, or the table renamed) does
-- not count.  Everyone may read it.
CREATE TABLE kwatch.tables (
    relid     regclass PRIMARY KEY,   -- the table, k8s.<relname>
    relname   name NOT NULL,          -- its name when made
    api_group text NOT NULL,          -- the resource it mirrors ('' = core)
    plural    text NOT NULL,
    made_by   regrole NOT NULL,       -- the role whose watch made it
    made_at   timestamptz NOT NULL DEFAULT now()
);
SELECT pg_catalog.pg_extension_config_dump('kwatch.tables', '');
GRANT SELECT ON kwatch.tables TO PUBLIC;
