-- ---------------------------------------------------------------------
-- Fleets: many clusters, one server each.
-- ---------------------------------------------------------------------

-- import_servers(kubeconfig, contexts, prefix) -> (server, context,
-- action, detail): each context of the kubeconfig (a path, or a
-- colon-separated list as the server option takes) whose name matches
-- `contexts` (* any run, ? one character) becomes CREATE SERVER <prefix +
-- the context's name, lower-cased, other characters as _> FOREIGN DATA
-- WRAPPER kwatch OPTIONS (kubeconfig, context), run as the caller.
-- action: created, exists (a server of this kubeconfig and context: its
-- name), collision (the name is another server's; nothing made), refused
-- (CREATE SERVER failed: its error in detail), gone (the server's context
-- left the file; the server is kept).  Run again, it adds what is new and
-- drops nothing.  ERRORs: 42501 without the privileges of
-- pg_read_server_files (as the kubeconfig option itself); those of
-- reading the kubeconfig.  Rules: client-go tools/clientcmd (contexts,
-- the merge of a file list); src/functions/import_servers.c.
CREATE OR REPLACE FUNCTION kwatch.import_servers(kubeconfig text, contexts text DEFAULT '*',
                                                 prefix text DEFAULT '')
RETURNS TABLE (server text, context text, action text, detail text)
    LANGUAGE c
    AS 'MODULE_PATHNAME', 'kwatch_import_servers';
REVOKE ALL ON FUNCTION kwatch.import_servers(text, text, text) FROM PUBLIC;

-- clusters: one row per kwatch server the role may see (its USAGE, its
-- ownership, or a watch of its own there; superusers: all), with its
-- watches as kwatch.watches shows them to the role: how many, how many are
-- healthy and synced, the objects they hold, the last error with its time,
-- and when one of them last applied a change (last_change_at).  A server
-- without watches has a row with zeros.
CREATE OR REPLACE VIEW kwatch.clusters WITH (security_barrier) AS
SELECT s.srvname::text AS server,
       count(w.id) AS watches,
       count(w.id) FILTER (WHERE w.healthy) AS healthy,
       count(w.id) FILTER (WHERE w.synced) AS synced,
       COALESCE(sum(w.objects), 0)::bigint AS objects,
       (array_agg(w.last_error ORDER BY w.last_error_at DESC NULLS LAST)
          FILTER (WHERE w.last_error IS NOT NULL))[1] AS last_error,
       max(w.last_error_at) AS last_error_at,
       max(w.last_sync_at) AS last_change_at,
       pg_catalog.now() - max(w.last_sync_at) AS last_change_age
FROM pg_catalog.pg_foreign_server s
JOIN pg_catalog.pg_foreign_data_wrapper f ON f.oid = s.srvfdw AND f.fdwname = 'kwatch'
LEFT JOIN kwatch.watches w ON w.server = s.srvname
WHERE pg_catalog.has_server_privilege(s.oid, 'USAGE')
   OR pg_catalog.pg_has_role(s.srvowner, 'USAGE')
   OR w.id IS NOT NULL
GROUP BY s.srvname
ORDER BY s.srvname;
GRANT SELECT ON kwatch.clusters TO PUBLIC;
