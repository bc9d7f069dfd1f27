-- ---------------------------------------------------------------------
-- Clusters: the foreign servers of the kwatch wrapper.  What kwatch
-- resolves for one (server_config, _default_server), the discovery and the
-- probe a watch makes through it (_discover, _probe), and what the
-- ProcessUtility hook (src/functions/ownership.c) calls around ALTER SERVER
-- ... RENAME, DROP SERVER, DROP FOREIGN DATA WRAPPER and DROP OWNED: a watch
-- depends on its server, whose name is the `cluster` value of every row the
-- watch writes, so a rename of a watched server is refused, and DROP SERVER
-- treats the watches as dependents (RESTRICT refuses, CASCADE removes them
-- as unwatch() does).
-- ---------------------------------------------------------------------

-- server_config(server): the connection settings kwatch resolves for a
-- server and the current user, secrets redacted.  For debugging kubeconfigs.
CREATE OR REPLACE FUNCTION kwatch.server_config(server text) RETURNS jsonb
    LANGUAGE c STRICT
    AS 'MODULE_PATHNAME', 'kwatch_server_config';
REVOKE ALL ON FUNCTION kwatch.server_config(text) FROM PUBLIC;

-- _discover(server, resource): resolves a user's resource name through the
-- API server's discovery documents (src/cluster/discovery.c).  One row:
-- group, version, plural, kind, namespaced, verbs, the caller's role
-- (outside any SECURITY DEFINER function), whose user mapping the watch
-- will use, and the names the resource answers to (plural, kind in lower
-- case, singular, short names), which watch() keeps with the watch.
CREATE OR REPLACE FUNCTION kwatch._discover(server text, resource text, OUT api_group text, OUT api_version text, OUT plural text, OUT kind text, OUT namespaced boolean, OUT verbs text[], OUT caller oid, OUT names text[]) RETURNS record
    LANGUAGE c STRICT
    AS 'MODULE_PATHNAME', 'kwatch_discover';
REVOKE ALL ON FUNCTION kwatch._discover(text, text) FROM PUBLIC;

-- _probe(server, api_group, api_version, plural, namespace, label_selector,
-- field_selector): a LIST with limit=1 as the caller, so that a bad selector,
-- a forbidden resource or a missing namespace fails the registration with
-- the API server's own message.  Returns the list's resourceVersion.
CREATE OR REPLACE FUNCTION kwatch._probe(server text, api_group text, api_version text, plural text, namespace text, label_selector text, field_selector text) RETURNS text
    LANGUAGE c
    AS 'MODULE_PATHNAME', 'kwatch_probe';
REVOKE ALL ON FUNCTION kwatch._probe(text, text, text, text, text, text, text) FROM PUBLIC;

-- _default_server(): the only foreign server of the kwatch wrapper; errors
-- when there are none or several.
CREATE OR REPLACE FUNCTION kwatch._default_server() RETURNS text
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  names text[];
BEGIN
  SELECT array_agg(s.srvname ORDER BY s.srvname) INTO names
  FROM pg_foreign_server s JOIN pg_foreign_data_wrapper w ON w.oid = s.srvfdw
  WHERE w.fdwname = 'kwatch';
  IF names IS NULL THEN
    RAISE EXCEPTION 'no kwatch server exists'
      USING ERRCODE = 'undefined_object',
            HINT = 'Create one: CREATE SERVER prod FOREIGN DATA WRAPPER kwatch OPTIONS (kubeconfig ''/path/to/config'');';
  ELSIF cardinality(names) > 1 THEN
    RAISE EXCEPTION 'several kwatch servers exist: %', array_to_string(names, ', ')
      USING ERRCODE = 'ambiguous_parameter', HINT = 'Name one with server => ''...''.';
  END IF;
  RETURN names[1];
END
$$;

-- _servers_gone(before, how) -> text[]: `before` holds the names of the
-- watched servers that existed before the statement; for those that no
-- longer exist (the statement dropped or renamed them), by `how`:
--   'check'    returns {server, detail}: the first such server and one line
--              per watch ("watch of pods on server prod (table k8s.pods)
--              depends on server prod", as PostgreSQL's
--              backend/catalog/dependency.c reportDependentObjects words
--              it), which the hook raises (55006 for a rename, 2BP01 for a
--              drop without CASCADE); NULL when no watch depends on them;
--   'cascade'  removes their watches as unwatch() does: the registrations
--              and relist stages, and the rows with that cluster value,
--              deleted as each table's owner (_delete_cluster_rows), each
--              table's in a subtransaction that waits at most 5 s for its
--              lock: a table whose owner's trigger refuses, or whose lock
--              is held, keeps its rows with a WARNING (its owner may
--              delay the drop, not refuse it); the tables, their views and
--              history stay; a NOTICE per watch.  Returns NULL.
-- Run by the hook as the extension's owner; EXECUTE is revoked from PUBLIC.
CREATE OR REPLACE FUNCTION kwatch._servers_gone(before text[], how text) RETURNS text[]
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  gone text[];
  dependents text;
  first_server text;
  tables text[];
  r record;
  saved_lock_timeout text := current_setting('lock_timeout');
BEGIN
  SELECT array_agg(s ORDER BY s) INTO gone FROM unnest(before) s
  WHERE NOT EXISTS (SELECT 1 FROM pg_foreign_server f WHERE f.srvname = s);
  SELECT string_agg(d.line, E'\n' ORDER BY d.ord, d.id), min(d.server)
    INTO dependents, first_server
  FROM (SELECT 1 AS ord, x.id::bigint AS id, x.server,
               format('watch of %s on server %s (table k8s.%I) depends on server %s',
                      x.resource, x.server, x.table_name, x.server) AS line
          FROM kwatch.registrations x WHERE x.server = ANY (gone)
        UNION ALL
        SELECT 2, q.id, q.server,
               format('pending %s %s of %s %s on server %s depends on server %s',
                      q.verb, q.id, q.kind, q.name, q.server, q.server)
          FROM kwatch.apply_queue q WHERE q.state = 'pending' AND q.server = ANY (gone)) d;
  IF dependents IS NULL THEN
    RETURN NULL;
  END IF;
  IF how <> 'cascade' THEN
    RETURN ARRAY[first_server, dependents];
  END IF;
  -- pending applies and deletes fail: never sent to a server of another identity
  UPDATE kwatch.apply_queue q
     SET state = 'failed', sqlstate = '42704', message = format('server %s was dropped', q.server),
         manifest = NULL, finished_at = now()
   WHERE q.state = 'pending' AND q.server = ANY (gone);
  -- their batches in progress end first; later ones wait
  PERFORM kwatch._lock_registration(x.id)
     FROM kwatch.registrations x WHERE x.server = ANY (gone) ORDER BY x.id;
  FOR r IN DELETE FROM kwatch.registrations x WHERE x.server = ANY (gone)
           RETURNING x.id, x.table_name, x.server, x.resource
  LOOP
    PERFORM kwatch._drop_relist_stage(r.id);
    tables := tables || format('k8s.%I', r.table_name) || r.server;
    RAISE NOTICE 'drop cascades to watch of % on server %', r.resource, r.server;
  END LOOP;
  PERFORM set_config('lock_timeout', '5s', true);
  FOR r IN SELECT DISTINCT tables[i] AS rel, tables[i + 1] AS server
           FROM generate_subscripts(tables, 1) i WHERE i % 2 = 1
  LOOP
    CONTINUE WHEN to_regclass(r.rel) IS NULL;
    BEGIN
      PERFORM kwatch._delete_cluster_rows(to_regclass(r.rel), r.server);
    EXCEPTION WHEN OTHERS THEN
      RAISE WARNING 'the rows of cluster % stay in %: %', r.server, r.rel, SQLERRM
        USING HINT = format('Delete them as the table''s owner: DELETE FROM %s WHERE cluster = %L;', r.rel, r.server);
    END;
  END LOOP;
  PERFORM set_config('lock_timeout', saved_lock_timeout, true);
  PERFORM kwatch._wake_at_commit();
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION kwatch._servers_gone(text[], text) FROM PUBLIC;

-- _server_name_held(name, caller) -> text: the watches registered under
-- server name `name` with no server of that name (their server was dropped
-- while registrations could outlive it) that `caller` may not act for, one
-- line each; NULL when none.  The hook (src/functions/ownership.c) refuses
-- CREATE SERVER and ALTER SERVER ... RENAME TO such a name to everyone but
-- a superuser: the new server would take over those watches, and a DROP
-- SERVER ... CASCADE of it would remove them.
CREATE OR REPLACE FUNCTION kwatch._server_name_held(name text, caller oid) RETURNS text
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT string_agg(format('watch of %s on server %s (table k8s.%I)', x.resource, x.server, x.table_name),
                    E'\n' ORDER BY x.id)
  FROM kwatch.registrations x
  WHERE x.server = name
    AND NOT (EXISTS (SELECT 1 FROM pg_roles a WHERE a.oid = x.owner)
             AND pg_has_role(caller, x.owner, 'USAGE'))
$$;
REVOKE ALL ON FUNCTION kwatch._server_name_held(text, oid) FROM PUBLIC;

-- _lock_server(name) -> void: locks foreign server `name` (AccessShareLock
-- on the object, as a statement that uses it does) until the end of the
-- transaction, so that watch() and a concurrent DROP SERVER serialize: the
-- DROP waits for the watch's transaction and then sees its registration.
-- ERRORs: 42704 when the server does not exist (also when it was dropped
-- while the lock was awaited).
CREATE OR REPLACE FUNCTION kwatch._lock_server(name text) RETURNS void
    LANGUAGE c STRICT
    AS 'MODULE_PATHNAME', 'kwatch_lock_server';
REVOKE ALL ON FUNCTION kwatch._lock_server(text) FROM PUBLIC;
