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
