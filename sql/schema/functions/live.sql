-- ---------------------------------------------------------------------
-- Live foreign tables (src/live/fdw.c): a scan of a foreign table of a
-- kwatch server is a chunked LIST against its API server, with WHERE
-- clauses pushed down as namespace, label selector and field selector.
-- ---------------------------------------------------------------------

-- live_columns(api_group, plural): the columns of a live table of that
-- resource, which are the columns of its mirror table (base_columns,
-- typed_columns, object) in the same order, each with the expression that
-- computes it from `object` (the listed object, jsonb) and `cluster` (the
-- server's name, text).  src/live/live_column.c plans these expressions
-- once per backend and evaluates them for every listed object.
CREATE OR REPLACE FUNCTION kwatch.live_columns(api_group text, plural text, OUT column_name text, OUT column_type text, OUT expression text) RETURNS SETOF record
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $_$
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
$_$;
