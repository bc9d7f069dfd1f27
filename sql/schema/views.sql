-- watches: one row per registered watch with its live state and counters
-- (watch_status()).  state is 'pending' until the worker picks the watch
-- up, 'no worker' when kwatch is not in shared_preload_libraries (or the
-- worker is restarting).  A role sees the watches it may know of: those it
-- registered (or a role it belongs to did), and those of servers it has
-- USAGE on; superusers see all.  Selectors, namespaces and the API
-- server's error text are no one else's business.  security_barrier: no
-- function in a user's WHERE clause sees the rows filtered out.  `owner`:
-- the role whose watch it is; `names`: the names its resource answers to
-- (plural, kind, singular, short names: registrations.names).
CREATE VIEW kwatch.watches WITH (security_barrier) AS
SELECT r.id,
       r.server,
       r.resource,
       r.namespace,
       r.label_selector,
       r.field_selector,
       format('k8s.%I', r.table_name) AS table_name,
       r.channel,
       r.notify,
       COALESCE(s.state, CASE WHEN kwatch.worker_pid() IS NULL THEN 'no worker'
                              ELSE 'pending' END) AS state,
       COALESCE(s.healthy, false) AS healthy,
       COALESCE(s.resource_version, r.resource_version) AS resource_version,
       s.objects,
       COALESCE(s.last_sync_at, r.synced_at) AS last_sync_at,
       s.state_since,
       s.last_error,
       s.last_error_at,
       s.list_calls, s.watch_calls, s.relists,
       s.added, s.modified, s.deleted, s.bookmarks, s.notifications,
       s.skipped_objects, s.sanitized_objects,
       s.http_errors, s.decode_errors, s.database_errors,
       r.secret_data, r.notify_payload,
       COALESCE(s.synced, false) AS synced, s.syncs, s.relist_requests,
       r.retry_relist_after, r.retry_watch_after,
       r.owner::regrole AS owner,
       CASE WHEN r.names = '{}' THEN ARRAY[r.plural, pg_catalog.lower(r.kind)] ELSE r.names END AS names
FROM kwatch.registrations r
LEFT JOIN kwatch.watch_status() s ON s.watch_id = r.id
WHERE CASE WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_roles a WHERE a.oid = r.owner)
           THEN pg_catalog.pg_has_role(r.owner, 'USAGE') ELSE false END
   OR EXISTS (SELECT 1 FROM pg_catalog.pg_foreign_server fs
              WHERE fs.srvname = r.server
                AND pg_catalog.has_server_privilege(fs.oid, 'USAGE'))
   OR (SELECT a.rolsuper FROM pg_catalog.pg_roles a WHERE a.rolname = current_user)
ORDER BY r.id;
GRANT SELECT ON kwatch.watches TO PUBLIC;

-- applies: each apply made at commit (tables/apply_queue.sql), to the role
-- that made it (and its members) and superusers only; the manifest is
-- never shown.
CREATE VIEW kwatch.applies WITH (security_barrier) AS
SELECT q.id, q.server, q.role::regrole AS role, q.verb, q.api_version, q.kind, q.namespace, q.name,
       q.field_manager, q.force, q.state, q.http_status, q.sqlstate, q.message, q.detail,
       q.attempts, q.resource_version, q.uid, q.created_at, q.finished_at, q.deadline,
       q.next_attempt_at
FROM kwatch.apply_queue q
WHERE CASE WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_roles a WHERE a.oid = q.role)
           THEN pg_catalog.pg_has_role(q.role, 'USAGE') ELSE false END
   OR (SELECT a.rolsuper FROM pg_catalog.pg_roles a WHERE a.rolname = current_user);
GRANT SELECT ON kwatch.applies TO PUBLIC;
