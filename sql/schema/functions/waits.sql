-- _wait_synced(ids, requests, timeout): waits until each watch ids[i]
-- has a committed LIST and no relist pending, and the relist request
-- requests[i] (0: none) has been served; only for watches kwatch.watches
-- shows the caller (src/sync_wait.c).
CREATE OR REPLACE FUNCTION kwatch._wait_synced(ids integer[], requests bigint[], timeout interval) RETURNS void
    LANGUAGE c
    AS 'MODULE_PATHNAME', 'kwatch_wait_synced';

-- _wait_current(ids, timeout) -> text: waits until each watch ids[i]
-- reflects the server's current resourceVersion, one after the other;
-- returns the resourceVersion proven for the last one.  PUBLIC may execute
-- it: it acts only on watches kwatch.watches shows the caller, with the
-- caller's USAGE on their server and the caller's credentials
-- (src/wait_current.c).
CREATE OR REPLACE FUNCTION kwatch._wait_current(ids integer[], timeout interval) RETURNS text
    LANGUAGE c
    AS 'MODULE_PATHNAME', 'kwatch_wait_current';

-- wait_synced(resource, server, timeout): as in 0.2.0, for the watches
-- _watch_ids() finds (the caller's own first).  ERRORs as in 0.2.0, and 42P08 (_watch_ids).
CREATE OR REPLACE FUNCTION kwatch.wait_synced(resource text DEFAULT NULL::text, server text DEFAULT NULL::text, timeout interval DEFAULT NULL::interval) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  srv text := COALESCE(server, kwatch._default_server());
  ids integer[] := kwatch._watch_ids(resource, srv);
BEGIN
  IF ids IS NULL THEN
    RAISE EXCEPTION 'no watch of % on server "%"', COALESCE(resource, 'any resource'), srv
      USING ERRCODE = 'undefined_object',
            HINT = 'kwatch.watches lists the watches you may see.';
  END IF;
  PERFORM kwatch._wait_synced(ids, array_fill(0::bigint, ARRAY[cardinality(ids)]), timeout);
END
$$;

-- wait_current(resource, server, timeout) -> text: as in 0.6.0, for the
-- watches _watch_ids() finds (the caller's own first).  ERRORs as in 0.6.0, and 42P08 (_watch_ids).
CREATE OR REPLACE FUNCTION kwatch.wait_current(resource text, server text DEFAULT NULL::text, timeout interval DEFAULT NULL::interval) RETURNS text
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  srv text := COALESCE(server, kwatch._default_server());
  ids integer[];
BEGIN
  IF wait_current.resource IS NULL THEN
    RAISE EXCEPTION 'resource must not be null'
      USING ERRCODE = 'null_value_not_allowed',
            HINT = 'Name the watched resource, as kwatch.watches shows it.';
  END IF;
  ids := kwatch._watch_ids(resource, srv);
  IF ids IS NULL THEN
    RAISE EXCEPTION 'no watch of % on server "%"', resource, srv
      USING ERRCODE = 'undefined_object',
            HINT = 'kwatch.watches lists the watches you may see.';
  END IF;
  RETURN kwatch._wait_current(ids, timeout);
END
$$;
