-- kwatch 0.5.0 -> 0.6.0.
--
-- This script is shared: each change has its own section below, headed by
-- the issue it answers.  Append new sections at the end.

\echo Use "ALTER EXTENSION kwatch UPDATE TO '0.6.0'" to load this file. \quit

-- =====================================================================
-- Issue 23: read your own writes.  kwatch.wait_current() returns once a
-- watch's mirror table reflects the API server as of the call: it reads the
-- server's current resourceVersion R with a consistent LIST (limit=1, the
-- watch's namespace and selectors) and waits until the watch's committed
-- checkpoint reaches R, or, for a collection without events since, until a
-- metadata-only LIST equals the table's uid -> resourceVersion
-- (src/wait_current.c says how and what it costs).
-- =====================================================================

-- _wait_current(ids, timeout) -> text: waits until each watch ids[i]
-- reflects the server's current resourceVersion, one after the other;
-- returns the resourceVersion proven for the last one.  PUBLIC may execute
-- it: it acts only on watches kwatch.watches shows the caller, with the
-- caller's USAGE on their server and the caller's credentials
-- (src/wait_current.c).
CREATE FUNCTION @extschema@._wait_current(ids integer[], timeout interval)
RETURNS text
AS 'MODULE_PATHNAME', 'kwatch_wait_current'
LANGUAGE C;

-- wait_current(resource, server, timeout) -> text: returns once the mirror
-- table of the watch of `resource` on `server` (the default server when
-- NULL) reflects the cluster at least as of the call -- after `kubectl
-- apply`, the next statement of a READ COMMITTED session sees the change
-- -- and returns that resourceVersion (the server's, read when called; or a
-- later one a comparison proved).  `resource` is matched as wait_synced()
-- matches it (as kwatch.watches shows it, by table name or by plural; all
-- the watches that match, in turn).  Cost: one LIST of one object's
-- metadata; for a collection that had no event since, also one
-- metadata-only LIST of the collection (500 a page) and a read of its rows.
-- Needs USAGE on the server (the request is made with the caller's
-- credentials).  ERRORs: 22004 resource NULL; 42704 no such watch among
-- those kwatch.watches shows the caller; 42501 no USAGE on the server, or
-- the API server refused the caller's credentials; 55000 the watch is
-- 'failed' (DETAIL: its last error) or kwatch is not preloaded; 57014
-- `timeout` passed first; 25000 in a REPEATABLE READ or SERIALIZABLE
-- transaction.  Honours statement_timeout and cancel.
CREATE FUNCTION @extschema@.wait_current(resource text, server text DEFAULT NULL,
                                         timeout interval DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  srv text := COALESCE(server, @extschema@._default_server());
  ids integer[];
BEGIN
  IF wait_current.resource IS NULL THEN
    RAISE EXCEPTION 'resource must not be null'
      USING ERRCODE = 'null_value_not_allowed',
            HINT = 'Name the watched resource, as kwatch.watches shows it.';
  END IF;
  SELECT array_agg(w.id ORDER BY w.id) INTO ids
  FROM @extschema@.watches w
  WHERE w.server = srv
    AND (w.resource = wait_current.resource
         OR w.table_name = format('k8s.%I', wait_current.resource)
         OR split_part(w.resource, '.', 1) = wait_current.resource);
  IF ids IS NULL THEN
    RAISE EXCEPTION 'no watch of % on server "%"', resource, srv
      USING ERRCODE = 'undefined_object',
            HINT = 'kwatch.watches lists the watches you may see.';
  END IF;
  RETURN @extschema@._wait_current(ids, timeout);
END
$$;
