-- ---------------------------------------------------------------------
-- Waits: wait_synced() (the sync barrier, src/functions/sync_wait.c) and
-- wait_current() (read your own writes, src/functions/wait_current.c).
-- ---------------------------------------------------------------------

-- _wait_synced(ids, requests, timeout): waits until each watch ids[i]
-- has a committed LIST and no relist pending, and the relist request
-- requests[i] (0: none) has been served; only for watches kwatch.watches
-- shows the caller (src/functions/sync_wait.c).
CREATE OR REPLACE FUNCTION kwatch._wait_synced(ids integer[], requests bigint[], timeout interval) RETURNS void
    LANGUAGE c
    AS 'MODULE_PATHNAME', 'kwatch_wait_synced';

-- _wait_current(ids, timeout) -> text: waits until each watch ids[i]
-- reflects the server's current resourceVersion, one after the other;
-- returns the resourceVersion proven for the last one.  PUBLIC may execute
-- it: it acts only on watches kwatch.watches shows the caller, with the
-- caller's USAGE on their server and the caller's credentials
-- (src/functions/wait_current.c).
CREATE OR REPLACE FUNCTION kwatch._wait_current(ids integer[], timeout interval) RETURNS text
    LANGUAGE c
    AS 'MODULE_PATHNAME', 'kwatch_wait_current';

-- wait_synced(resource => NULL, server => NULL, timeout => NULL) -> void:
-- returns once the watches `resource` names on `server` (the default server
-- when NULL; _watch_ids() chooses them, the caller's own first; every
-- watch the caller may see on the server when resource is NULL) have
-- committed their initial sync, or the relist in progress, so that their
-- tables can be trusted (client-go's WaitForCacheSync).  Waits on a
-- condition variable; honours statement_timeout and cancel.  ERRORs: 42704
-- no such server, or no such watch among those kwatch.watches shows the caller; 42P08
-- (_watch_ids); 55000 the watch is in state 'failed' (DETAIL: its last
-- error) or kwatch is not preloaded; 57014 `timeout` passed first.
CREATE OR REPLACE FUNCTION kwatch.wait_synced(resource text DEFAULT NULL::text, server text DEFAULT NULL::text, timeout interval DEFAULT NULL::interval) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  srv text := kwatch._server_named(server);
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

-- wait_current(resource, server => NULL, timeout => NULL) -> text: returns
-- once the mirror tables of the watches `resource` names on `server` (the
-- default server when NULL; _watch_ids() chooses them, the caller's own
-- first) reflect the cluster at least as of the call -- after `kubectl
-- apply`, the next statement of a READ COMMITTED session sees the change
-- -- and returns that resourceVersion (the server's, read when called; or a
-- later one a comparison proved).  Cost: one LIST of one object's
-- metadata; for a collection that had no event since, also one
-- metadata-only LIST of the collection (500 a page) and a read of its rows.
-- Needs USAGE on the server (the request is made with the caller's
-- credentials).  ERRORs: 22004 resource NULL; 42704 no such server, or no such watch among
-- those kwatch.watches shows the caller; 42P08 (_watch_ids); 42501 no
-- USAGE on the server, or the API server refused the caller's credentials;
-- 55000 the watch is 'failed' (DETAIL: its last error) or kwatch is not
-- preloaded; 57014 `timeout` passed first; 25000 in a REPEATABLE READ or
-- SERIALIZABLE transaction.  Honours statement_timeout and cancel.
CREATE OR REPLACE FUNCTION kwatch.wait_current(resource text, server text DEFAULT NULL::text, timeout interval DEFAULT NULL::interval) RETURNS text
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  srv text := kwatch._server_named(server);
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
