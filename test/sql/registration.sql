-- Registration: errors that need no reachable cluster, mirror table shape,
-- the helper functions behind generated columns, privileges.
CREATE EXTENSION IF NOT EXISTS kwatch;
\set VERBOSITY terse

-- Without any kwatch server, watch() says how to create one.
SELECT kwatch.watch('pods');

-- A server that refuses connections: a clear, classified error.
CREATE SERVER down FOREIGN DATA WRAPPER kwatch
  OPTIONS (api_server 'https://127.0.0.1:1', insecure_skip_tls_verify 'true');
DO $$
BEGIN
  PERFORM kwatch.watch('pods');
EXCEPTION WHEN OTHERS THEN
  RAISE NOTICE 'sqlstate %: %', SQLSTATE, split_part(SQLERRM, ':', 1);
END $$;

-- Unknown server, bad names: refused before any request.
SELECT kwatch.watch('pods', server => 'nope');
SELECT kwatch.watch('po ds', server => 'down');
SELECT kwatch.watch('pods', server => 'down', namespace => 'Bad_NS');

-- Nothing was left behind by the failures.
SELECT count(*) FROM kwatch.registrations;
SELECT count(*) FROM kwatch.watches;
SELECT to_regclass('k8s.pods');

-- Only superusers (or roles granted EXECUTE) may register watches.
CREATE ROLE kw_nobody;
SET ROLE kw_nobody;
SELECT kwatch.watch('pods', server => 'down');
SELECT kwatch.unwatch('pods', server => 'down');
SELECT count(*) FROM kwatch.watches;   -- the status view is public
RESET ROLE;
DROP ROLE kw_nobody;

-- unwatch of something never watched
SELECT kwatch.unwatch('pods', server => 'down');

-- unwatch checks its caller: a role granted EXECUTE removes its own watches
-- (or its roles'), never another role's, with or without drop_table.
CREATE ROLE kw_alice;
CREATE ROLE kw_bob;
CREATE ROLE kw_alice_team IN ROLE kw_alice;
GRANT EXECUTE ON FUNCTION kwatch.unwatch(text, text, boolean) TO kw_alice, kw_bob;
SELECT kwatch.create_mirror_table('configmaps', '', 'v1', 'configmaps');
INSERT INTO kwatch.registrations (server, resource, api_group, api_version, plural, kind,
                                  namespaced, table_name, channel, owner)
VALUES ('down', 'configmaps', '', 'v1', 'configmaps', 'ConfigMap', true, 'configmaps',
        'kwatch_configmaps', 'kw_alice'::regrole);
INSERT INTO k8s.configmaps (cluster, uid, resource_version, object)
VALUES ('down', 'u1', '1', '{"metadata": {"name": "a", "namespace": "n", "uid": "u1"}}');
-- kwatch.watches shows a role its own watches (and those of servers it may use)
SET ROLE kw_bob;
SELECT resource, server FROM kwatch.watches;
SET ROLE kw_alice;
SELECT resource, server FROM kwatch.watches;
SET ROLE kw_bob;
SELECT kwatch.unwatch('configmaps', server => 'down');
SELECT kwatch.unwatch('configmaps', server => 'down', drop_table => true);
RESET ROLE;
SELECT count(*) AS watches_left FROM kwatch.registrations;
SELECT count(*) AS rows_left FROM k8s.configmaps;
-- a member of the owning role may
SET ROLE kw_alice_team;
SELECT kwatch.unwatch('configmaps', server => 'down');
RESET ROLE;
SELECT count(*) AS watches_left FROM kwatch.registrations;
-- A watch belongs to its role like the role's tables do (src/functions/ownership.c):
-- DROP ROLE refuses while it has watches, REASSIGN OWNED moves them, DROP
-- OWNED removes them with their rows.
INSERT INTO kwatch.registrations (server, resource, api_group, api_version, plural, kind,
                                  namespaced, table_name, channel, owner)
VALUES ('down', 'configmaps', '', 'v1', 'configmaps', 'ConfigMap', true, 'configmaps',
        'kwatch_configmaps', 'kw_bob'::regrole);
INSERT INTO k8s.configmaps (cluster, uid, resource_version, object)
VALUES ('down', 'u2', '1', '{"metadata": {"name": "b", "namespace": "n", "uid": "u2"}}');
REVOKE EXECUTE ON FUNCTION kwatch.unwatch(text, text, boolean) FROM kw_bob;
\set VERBOSITY default
DROP ROLE kw_bob;
\set VERBOSITY terse
CREATE ROLE kw_carol;
REASSIGN OWNED BY kw_bob TO kw_carol;
SELECT resource, owner::regrole FROM kwatch.registrations;
DROP ROLE kw_bob;
DROP ROLE kw_carol;
-- a role that may not act for kw_carol cannot DROP OWNED it
SET ROLE kw_alice;
DROP OWNED BY kw_carol;
RESET ROLE;
SELECT count(*) AS watches_left FROM kwatch.registrations;
DROP OWNED BY kw_carol;
SELECT count(*) AS watches_left FROM kwatch.registrations;
SELECT count(*) AS rows_left FROM k8s.configmaps;
DROP ROLE kw_carol;
-- a watch whose role is gone (dropped where kwatch was not loaded):
-- superusers only
CREATE ROLE kw_gone;
SELECT oid AS gone FROM pg_roles WHERE rolname = 'kw_gone' \gset
DROP ROLE kw_gone;
INSERT INTO kwatch.registrations (server, resource, api_group, api_version, plural, kind,
                                  namespaced, table_name, channel, owner)
VALUES ('down', 'configmaps', '', 'v1', 'configmaps', 'ConfigMap', true, 'configmaps',
        'kwatch_configmaps', :gone);
SET ROLE kw_alice;
SELECT kwatch.unwatch('configmaps', server => 'down');
RESET ROLE;
SELECT kwatch.unwatch('configmaps', server => 'down', drop_table => true);
SELECT to_regclass('k8s.configmaps');
REVOKE EXECUTE ON FUNCTION kwatch.unwatch(text, text, boolean) FROM kw_alice;
DROP ROLE kw_alice_team;
DROP ROLE kw_alice;

-- Helper functions of the generated columns.
SELECT kwatch.k8s_timestamp('2024-05-01T10:00:00Z') AT TIME ZONE 'UTC' AS ts;
SELECT kwatch.k8s_timestamp(NULL) IS NULL AS null_ok;
SELECT kwatch.pod_restart_count('{"status":{"containerStatuses":[{"restartCount":2},{"restartCount":3}]}}');
SELECT kwatch.pod_restart_count('{}');
SELECT kwatch.condition_true('{"status":{"conditions":[{"type":"Ready","status":"True"}]}}', 'Ready'),
       kwatch.condition_true('{"status":{"conditions":[{"type":"Ready","status":"False"}]}}', 'Ready');

-- A mirror table, and what its generated columns make of a real pod
-- (test/fixtures/pod-v1.20.json, recorded from a v1.20 cluster).
SELECT kwatch.create_mirror_table('pods', '', 'v1', 'pods');
SELECT obj_description('k8s.pods'::regclass, 'pg_class');
SELECT attname, format_type(atttypid, atttypmod), attgenerated <> '' AS generated
FROM pg_attribute WHERE attrelid = 'k8s.pods'::regclass AND attnum > 0 ORDER BY attnum;
SELECT indexdef FROM pg_indexes WHERE schemaname = 'k8s' AND tablename = 'pods' ORDER BY 1;
\getenv abs_srcdir PG_ABS_SRCDIR
\set fixture :abs_srcdir '/fixtures/pod-v1.20.json'
INSERT INTO k8s.pods (cluster, uid, resource_version, object)
SELECT 'kind', o->'metadata'->>'uid', o->'metadata'->>'resourceVersion', o #- '{metadata,managedFields}'
FROM (SELECT pg_read_file(:'fixture')::jsonb AS o) f;
SELECT cluster, namespace, name, phase, node_name, pod_ip, ready, restart_count,
       labels, owner_references->0->>'kind' AS owner_kind, created_at AT TIME ZONE 'UTC' AS created_at,
       deleted_at, object->'metadata' ? 'managedFields' AS has_managed_fields
FROM k8s.pods;
-- Users may add their own columns and indexes.
ALTER TABLE k8s.pods ADD COLUMN note text;
CREATE INDEX ON k8s.pods (phase);
-- An existing mirror table is reused, not recreated.
SELECT kwatch.create_mirror_table('pods', '', 'v1', 'pods');
SELECT count(*) FROM k8s.pods;
DROP TABLE k8s.pods;

-- Typed columns per resource.
SELECT kwatch.typed_columns('apps', 'deployments') IS NOT NULL AS has_deployment_columns,
       cardinality(kwatch.typed_columns('', 'configmaps')) AS configmap_columns;

DROP SERVER down;
