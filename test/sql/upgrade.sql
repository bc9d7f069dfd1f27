-- Extension update 0.1.0 -> 0.2.0: rows that 0.1.0 wrote from a LIST (items
-- carry no apiVersion/kind) get them from their watch's resource, once;
-- keys an object already has are kept; rows of other clusters and tables
-- without a watch are not touched.
DROP EXTENSION IF EXISTS kwatch CASCADE;
CREATE EXTENSION kwatch VERSION '0.1.0';
SELECT extversion FROM pg_extension WHERE extname = 'kwatch';
SELECT kwatch.create_mirror_table('upgrade_pods', '', 'v1', 'pods');
SELECT kwatch.create_mirror_table('upgrade_crontabs', 'stable.example.com', 'v1', 'crontabs');
SELECT kwatch.create_mirror_table('upgrade_secrets', '', 'v1', 'secrets');
CREATE ROLE kw_upgrade_owner;
-- registrations as 0.1.0 stored them (their servers do not exist: the worker
-- marks these watches failed and writes nothing)
INSERT INTO kwatch.registrations (server, resource, api_group, api_version, plural, kind,
                                  namespaced, table_name, channel, owner)
VALUES ('old', 'pods', '', 'v1', 'pods', 'Pod', true, 'upgrade_pods', 'kwatch_upgrade_pods', 10),
       ('old', 'crontabs.stable.example.com', 'stable.example.com', 'v1', 'crontabs', 'CronTab',
        true, 'upgrade_crontabs', 'kwatch_upgrade_crontabs', 'kw_upgrade_owner'::regrole),
       ('old', 'secrets', '', 'v1', 'secrets', 'Secret', true, 'upgrade_secrets',
        'kwatch_upgrade_secrets', 10);
INSERT INTO k8s.upgrade_pods (cluster, uid, resource_version, object) VALUES
  ('old', 'u1', '1', '{"metadata": {"name": "listed", "namespace": "n", "uid": "u1", "resourceVersion": "1"}}'),
  ('old', 'u2', '2', '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "watched", "namespace": "n", "uid": "u2", "resourceVersion": "2"}}'),
  ('old', 'u3', '3', '{"apiVersion": "v1beta1", "metadata": {"name": "odd", "namespace": "n", "uid": "u3", "resourceVersion": "3"}}'),
  ('unwatched', 'u4', '4', '{"metadata": {"name": "other", "namespace": "n", "uid": "u4", "resourceVersion": "4"}}');
INSERT INTO k8s.upgrade_crontabs (cluster, uid, resource_version, object) VALUES
  ('old', 'c1', '5', '{"metadata": {"name": "ct", "namespace": "n", "uid": "c1", "resourceVersion": "5"}, "spec": {"cronSpec": "* * * * *"}}');
-- 0.1.0 stored Secrets in clear
INSERT INTO k8s.upgrade_secrets (cluster, uid, resource_version, object) VALUES
  ('old', 's1', '6', '{"kind": "Secret", "apiVersion": "v1", "type": "Opaque",
    "metadata": {"name": "db", "namespace": "n", "uid": "s1", "resourceVersion": "6",
      "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"stringData\":{\"password\":\"hunter2\"}}",
                      "team": "a"}},
    "data": {"password": "aHVudGVyMg==", "user": "YWRtaW4=", "same": "aHVudGVyMg=="}}');

ALTER EXTENSION kwatch UPDATE TO '0.2.0';
SELECT extversion FROM pg_extension WHERE extname = 'kwatch';
SELECT cluster, uid, object->>'apiVersion' AS api_version, object->>'kind' AS kind,
       object->'metadata'->>'name' AS name
  FROM k8s.upgrade_pods ORDER BY uid;
SELECT object FROM k8s.upgrade_crontabs;
-- the generated columns still follow the object
SELECT name, namespace FROM k8s.upgrade_pods ORDER BY uid;
-- Secrets: every value a keyed digest, keys and the rest kept; the digest
-- is keyed by object and key (0.7.0, issue 30), so equal values under two
-- keys differ too, as different ones do
SELECT d.key, d.value ~ '^<redacted hmac-sha256:[0-9a-f]{32}>$' AS redacted
  FROM k8s.upgrade_secrets, jsonb_each_text(object->'data') d ORDER BY d.key;
SELECT object->'data'->>'password' <> object->'data'->>'same' AS equal_values_differ_by_key,
       object->'data'->>'password' <> object->'data'->>'user' AS different_values_differ,
       object->'metadata'->'annotations'->>'kubectl.kubernetes.io/last-applied-configuration'
         ~ '^<redacted hmac-sha256:[0-9a-f]{32}>$' AS last_applied_redacted,
       object->'metadata'->'annotations'->>'team' AS other_annotation,
       object::text LIKE '%hunter2%' OR object::text LIKE '%aHVudGVyMg%' AS leaks,
       object->>'type' AS type, name
  FROM k8s.upgrade_secrets;
-- the digest function is not for everyone: it would let anyone test guesses
SELECT has_function_privilege('public', 'kwatch.redact_secret(jsonb)', 'EXECUTE');
SELECT kwatch.redact_secret('[1]');
-- new watch parameters and status columns; Secrets notify seq and type only
SELECT pg_get_function_identity_arguments('kwatch.watch'::regproc);
SELECT resource, secret_data, notify_payload FROM kwatch.watches ORDER BY id;
-- retry ranges: checked, and their bounds in ms for the worker
SELECT kwatch._check_retry_range('retry_relist_after', '[1s,5s]');
SELECT kwatch._check_retry_range('retry_relist_after', '[5ms,1s]');
SELECT kwatch._check_retry_range('retry_watch_after', '[1s,)');
SELECT kwatch._check_retry_range('retry_watch_after', '[2h,3h]');
UPDATE kwatch.registrations SET retry_relist_after = '[1s,5s]', retry_watch_after = '[250ms,1.5s]'
 WHERE resource = 'pods';
SELECT resource, retry_relist_after, retry_watch_after, retry_ms FROM kwatch.registrations ORDER BY id;
SELECT resource, retry_relist_after, synced, syncs, relist_requests FROM kwatch.watches ORDER BY id;
-- the event stream's new columns
SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
 WHERE attrelid = 'kwatch.events'::regclass AND attnum > 11 ORDER BY attnum;
-- a 0.1.0 table whose watches are one role's becomes that role's (0.2.0
-- writes a mirror table as its owner); the others keep theirs
SELECT c.relname, c.relowner::regrole = 'kw_upgrade_owner'::regrole AS role_owns
  FROM pg_class c WHERE c.relname LIKE 'upgrade_%' AND c.relkind = 'r' ORDER BY 1;

-- Extension update 0.2.0 -> 0.3.0: history.  Roles that could call watch()
-- keep it (its signature grew) and get history().
GRANT EXECUTE ON FUNCTION kwatch.watch TO kw_upgrade_owner;
ALTER EXTENSION kwatch UPDATE TO '0.3.0';
SELECT extversion FROM pg_extension WHERE extname = 'kwatch';
SELECT pg_get_function_identity_arguments('kwatch.watch'::regproc);
SELECT has_function_privilege('kw_upgrade_owner', 'kwatch.watch'::regproc, 'EXECUTE') AS watch,
       has_function_privilege('kw_upgrade_owner', 'kwatch.history'::regproc, 'EXECUTE') AS history,
       has_function_privilege('public', 'kwatch.history'::regproc, 'EXECUTE') AS public_history;
-- A CRD's printer columns as generated columns (what watch() does with
-- them is in test/integration/test_crd.py): names, types, paths, refusals
SELECT unnest(defs) AS def FROM kwatch._printer_column_defs('[
  {"name": "Cron Spec", "type": "string", "jsonPath": ".spec.cronSpec"},
  {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
  {"name": "Ratio", "type": "number", "jsonPath": ".status.ratio"},
  {"name": "Ready", "type": "boolean", "jsonPath": ".status.conditions[0].ready"},
  {"name": "Last Run", "type": "date", "jsonPath": ".status.lastScheduleTime"},
  {"name": "Team", "type": "string", "jsonPath": ".metadata.labels[''example.com/team'']"},
  {"name": "Order", "type": "string", "jsonPath": "{.spec.order}"},
  {"name": "2nd", "type": "string", "jsonPath": ".spec.second"}
]', ARRAY['name', 'namespace']);
SELECT unnest(skipped) AS skipped FROM kwatch._printer_column_defs('[
  {"name": "Name", "type": "string", "jsonPath": ".metadata.name"},
  {"name": "Status", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
  {"name": "All", "type": "string", "jsonPath": ".spec.items[*].name"},
  {"name": "Size", "type": "quantity", "jsonPath": ".spec.size"},
  {"name": "!!!", "type": "string", "jsonPath": ".spec.x"}
]', ARRAY['name', 'namespace']);
-- the values: of the declared kind or NULL, never an error
SELECT kwatch.jsonb_integer('3'), kwatch.jsonb_integer('3.7'), kwatch.jsonb_integer('"3"'),
       kwatch.jsonb_integer('1e30'), kwatch.jsonb_integer(NULL);
SELECT kwatch.jsonb_number('0.25'), kwatch.jsonb_number('true'), kwatch.jsonb_number('1e400');
SELECT kwatch.jsonb_boolean('true'), kwatch.jsonb_boolean('"true"');
SELECT kwatch.jsonb_timestamp('"2024-05-01T10:00:00Z"'), kwatch.jsonb_timestamp('"2024-02-31T10:00:00Z"'),
       kwatch.jsonb_timestamp('"now"'), kwatch.jsonb_timestamp('17');
-- typed_columns() adds the printer columns stored for a resource
INSERT INTO kwatch.printer_columns (api_group, plural, api_version, columns)
VALUES ('stable.example.com', 'crontabs', 'v1',
        ARRAY['cron_spec text GENERATED ALWAYS AS (object #>> ''{spec,cronSpec}'') STORED']);
SELECT kwatch.typed_columns('stable.example.com', 'crontabs');
SELECT column_name, column_type, expression FROM kwatch.live_columns('stable.example.com', 'crontabs')
 WHERE column_name = 'cron_spec';
SELECT cardinality(kwatch.typed_columns('', 'pods'));
DELETE FROM kwatch.printer_columns;

-- Extension update 0.3.0 -> 0.4.0: the generated columns' functions in C,
-- same OIDs (the columns that call them are untouched), same values
SELECT p.oid AS restart_count_oid FROM pg_proc p WHERE p.oid = 'kwatch.pod_restart_count'::regproc \gset
ALTER EXTENSION kwatch UPDATE TO '0.4.0';
SELECT extversion FROM pg_extension WHERE extname = 'kwatch';
SELECT proname, l.lanname, p.provolatile, p.proisstrict, p.proconfig
  FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
 WHERE p.pronamespace = 'kwatch'::regnamespace
   AND proname IN ('k8s_timestamp', 'pod_restart_count', 'condition_true', 'jsonb_integer',
                   'jsonb_number', 'jsonb_boolean', 'jsonb_timestamp') ORDER BY 1;
SELECT 'kwatch.pod_restart_count'::regproc::oid = :restart_count_oid AS same_oid;
SELECT kwatch.jsonb_integer('3'), kwatch.jsonb_integer('3.7'), kwatch.jsonb_integer('"3"'),
       kwatch.jsonb_integer('1e30'), kwatch.jsonb_integer(NULL), kwatch.jsonb_integer('-3.7'),
       kwatch.jsonb_integer('9223372036854775807'), kwatch.jsonb_integer('9223372036854775808');
SELECT kwatch.jsonb_number('0.25'), kwatch.jsonb_number('true'), kwatch.jsonb_number('1e400'),
       kwatch.jsonb_number('{"a": 1}');
SELECT kwatch.jsonb_boolean('true'), kwatch.jsonb_boolean('"true"'), kwatch.jsonb_boolean('null');
SELECT kwatch.jsonb_timestamp('"2024-05-01T10:00:00Z"') AT TIME ZONE 'UTC' AS utc,
       kwatch.jsonb_timestamp('"2024-02-31T10:00:00Z"') AS feb31,
       kwatch.jsonb_timestamp('"now"') AS now, kwatch.jsonb_timestamp('17') AS number,
       kwatch.jsonb_timestamp('"2024-05-01t10:00:00.123456+02:00"') AT TIME ZONE 'UTC' AS offset,
       kwatch.jsonb_timestamp('"2024-05-01T10:00:00+02"') AS short_offset;
SELECT kwatch.k8s_timestamp('2024-05-01T10:00:00Z') AT TIME ZONE 'UTC' AS ts,
       kwatch.k8s_timestamp('2024-13-01T10:00:00Z') AS month13,
       kwatch.k8s_timestamp('2024-05-01 10:00:00 Mars/Olympus') AS zone,
       kwatch.k8s_timestamp('') AS empty, kwatch.k8s_timestamp(NULL) AS null;
SELECT kwatch.pod_restart_count('{"status":{"containerStatuses":[{"restartCount":2},{"restartCount":"3"},
         {"restartCount":1.5},{"restartCount":true},{"name":"x"},7,null]}}') AS sum,
       kwatch.pod_restart_count('{"status":{"containerStatuses":{"restartCount":2}}}') AS object,
       kwatch.pod_restart_count('{"status":null}') AS null_status, kwatch.pod_restart_count(NULL) AS null,
       kwatch.pod_restart_count('{"status":{"containerStatuses":[{"restartCount":2147483647},{"restartCount":1}]}}') AS overflow;
SELECT kwatch.condition_true('{"status":{"conditions":[{"type":"PodScheduled","status":"True"},
         {"type":"Ready","status":"True"}]}}', 'Ready') AS ready,
       kwatch.condition_true('{"status":{"conditions":[{"type":"Ready","status":"true"}]}}', 'Ready') AS lower,
       kwatch.condition_true('{"status":{"conditions":"Ready"}}', 'Ready') AS scalar,
       kwatch.condition_true('{}', 'Ready') AS none, kwatch.condition_true(NULL, 'Ready') AS null,
       kwatch.condition_true('{"status":{"conditions":[{"type":"Ready","status":"True"}]}}', NULL) AS null_type;
-- a row whose values 0.3.0 rejected (a bad timestamp, a bad count) is stored
INSERT INTO k8s.upgrade_pods (cluster, uid, resource_version, object)
VALUES ('prod', 'u-odd', '9', '{"metadata": {"name": "odd", "namespace": "ns", "uid": "u-odd",
        "creationTimestamp": "yesterday"},
        "status": {"containerStatuses": [{"restartCount": "many"}, {"restartCount": 4}],
                   "conditions": [{"type": "Ready", "status": "True"}]}}');
SELECT name, created_at, restart_count, ready FROM k8s.upgrade_pods WHERE uid = 'u-odd';

-- Extension update 0.4.0 -> 0.5.0 (issue 22): kwatch knows its mirror
-- tables by OID (kwatch.tables), never by their comment.  The update
-- records the tables of today's watches and a superuser's tables that carry
-- kwatch's comment; a role's table that merely carries it is not kwatch's.
CREATE TABLE k8s.upgrade_forged (cluster text, uid text, resource_version text, object jsonb);
COMMENT ON TABLE k8s.upgrade_forged IS 'kwatch mirror of secrets (v1)';
ALTER TABLE k8s.upgrade_forged OWNER TO kw_upgrade_owner;
SELECT kwatch.create_mirror_table('upgrade_orphan', '', 'v1', 'configmaps');
-- a superuser's watch that 0.4.0 let into a role's table: named by the update
SELECT kwatch.create_mirror_table('upgrade_joined', '', 'v1', 'endpoints');
ALTER TABLE k8s.upgrade_joined OWNER TO kw_upgrade_owner;
INSERT INTO kwatch.registrations (server, resource, api_group, api_version, plural, kind,
                                  namespaced, table_name, channel, owner)
VALUES ('old', 'endpoints', '', 'v1', 'endpoints', 'Endpoints', true, 'upgrade_joined',
        'kwatch_upgrade_joined', 10);
GRANT EXECUTE ON FUNCTION kwatch.watch TO kw_upgrade_owner;
ALTER EXTENSION kwatch UPDATE TO '0.5.0';
SELECT extversion FROM pg_extension WHERE extname = 'kwatch';
-- (issue 21) watch() gains apply_timeout, a watch's own deadline for its
-- batches; the roles granted EXECUTE on the old watch() keep it
SELECT pg_get_function_identity_arguments('kwatch.watch'::regproc) LIKE '%, apply_timeout interval'
         AS has_apply_timeout,
       has_function_privilege('kw_upgrade_owner', 'kwatch.watch'::regproc, 'EXECUTE') AS still_granted,
       (SELECT format_type(atttypid, atttypmod) FROM pg_attribute
         WHERE attrelid = 'kwatch.registrations'::regclass AND attname = 'apply_timeout') AS column_type;
SELECT relid, relname, api_group, plural, made_by = 'kw_upgrade_owner'::regrole AS by_role
  FROM kwatch.tables ORDER BY relname;
-- a table made now is recorded; rows of dropped tables go, and an entry
-- whose OID names a table of another name (renamed, or the OID reused) no
-- longer counts
SELECT kwatch.create_mirror_table('upgrade_new', '', 'v1', 'services');
SELECT relname, api_group, plural, made_by = current_user::regrole AS by_me
  FROM kwatch.tables WHERE relname = 'upgrade_new';
DROP TABLE k8s.upgrade_new;
SELECT relname, plural FROM kwatch._mirror_table('k8s.upgrade_pods');
SELECT relname FROM kwatch.tables ORDER BY 1;
ALTER TABLE k8s.upgrade_orphan RENAME TO upgrade_renamed;
SELECT count(*) FROM kwatch._mirror_table('k8s.upgrade_renamed');
-- the catalog is readable by everyone, written by kwatch only
SELECT has_table_privilege('public', 'kwatch.tables', 'SELECT') AS public_select,
       has_table_privilege('public', 'kwatch.tables', 'INSERT') AS public_insert,
       has_function_privilege('public', 'kwatch._mirror_table(regclass)', 'EXECUTE') AS public_lookup;
-- which functions PUBLIC may execute: the documented API, and the helpers
-- whose callers run with a user's rights (sql/kwatch--0.4.0--0.5.0.sql says
-- why each); every other helper is the extension owner's
SELECT p.oid::regprocedure AS public_function
  FROM pg_proc p
 WHERE p.pronamespace = 'kwatch'::regnamespace
   AND has_function_privilege('public', p.oid, 'EXECUTE')
 ORDER BY p.oid::regprocedure::text COLLATE "C";

-- Extension update 0.5.0 -> 0.6.0 (issue 23): kwatch.wait_current(), read
-- your own writes; public, acting on the watches kwatch.watches shows the
-- caller, with the caller's USAGE on their server and its credentials
ALTER EXTENSION kwatch UPDATE TO '0.6.0';
SELECT extversion FROM pg_extension WHERE extname = 'kwatch';
SELECT pg_get_function_identity_arguments('kwatch.wait_current'::regproc) AS wait_current,
       pg_get_function_result('kwatch.wait_current'::regproc) AS returns,
       has_function_privilege('public', 'kwatch.wait_current(text,text,interval)', 'EXECUTE') AS public_wait,
       has_function_privilege('public', 'kwatch._wait_current(integer[],interval)', 'EXECUTE') AS public_helper;
-- a role's own watch on a server the role has no USAGE on: it sees the
-- watch, and may not wait on it; with USAGE (a superuser) the consistent
-- read is sent, here to a server that refuses connections
CREATE SERVER wc_down FOREIGN DATA WRAPPER kwatch
  OPTIONS (api_server 'https://127.0.0.1:1', insecure_skip_tls_verify 'true');
INSERT INTO kwatch.registrations (server, resource, api_group, api_version, plural, kind,
                                  namespaced, table_name, channel, owner)
VALUES ('wc_down', 'configmaps', '', 'v1', 'configmaps', 'ConfigMap', true, 'upgrade_wc',
        'kwatch_upgrade_wc', 'kw_upgrade_owner'::regrole);
SET ROLE kw_upgrade_owner;
SELECT resource, server FROM kwatch.watches WHERE server = 'wc_down';
RESET ROLE;

-- Extension update 0.6.0 -> 0.7.0 (issue 30): a non-superuser's watch may
-- not have no deadline, nor one longer than kwatch.apply_timeout (1min
-- here): the ones 0.6.0 let through take the setting's; a superuser's
-- keeps its own; kwatch_stage is made by the script
UPDATE kwatch.registrations SET apply_timeout = '0' WHERE server = 'wc_down';
INSERT INTO kwatch.registrations (server, resource, api_group, api_version, plural, kind,
                                  namespaced, table_name, channel, owner, apply_timeout)
VALUES ('wc_down', 'secrets', '', 'v1', 'secrets', 'Secret', true, 'upgrade_wc_s',
        'kwatch_upgrade_wc_s', 'kw_upgrade_owner'::regrole, '2 hours'),
       ('wc_down', 'pods', '', 'v1', 'pods', 'Pod', true, 'upgrade_wc_p',
        'kwatch_upgrade_wc_p', CURRENT_USER::regrole, '0');
SELECT name, resource_version, object->'data'->>'password' ~ '^<redacted hmac-sha256:' AS digest
  FROM k8s.upgrade_secrets;
-- a labels index of the table's owner's own (issue 36: kept as it is)
CREATE INDEX upgrade_crontabs_label_keys ON k8s.upgrade_crontabs USING gin (labels);
ALTER EXTENSION kwatch UPDATE TO '0.7.0';
SELECT extversion FROM pg_extension WHERE extname = 'kwatch';
-- 0.6.0's digests (of the value alone) are gone: "<redacted>" and no
-- resource_version until the relist rewrites the row with 0.7.0's digests
SELECT name, resource_version, object->'data' AS data,
       object::text LIKE '%hunter2%' OR object::text LIKE '%aHVudGVyMg%' AS leaks
  FROM k8s.upgrade_secrets;
SELECT resource, apply_timeout FROM kwatch.registrations WHERE server = 'wc_down' ORDER BY resource;
SELECT nspname, pg_get_userbyid(nspowner) = CURRENT_USER AS superuser_owns,
       has_schema_privilege('public', oid, 'USAGE') AS public_usage
  FROM pg_namespace WHERE nspname = 'kwatch_stage';
-- from now on refused (42501), and clamped when a watch changes hands
UPDATE kwatch.registrations SET apply_timeout = '0' WHERE resource = 'configmaps' AND server = 'wc_down';
UPDATE kwatch.registrations SET apply_timeout = '30s' WHERE resource = 'configmaps' AND server = 'wc_down';
UPDATE kwatch.registrations SET owner = 'kw_upgrade_owner'::regrole WHERE resource = 'pods' AND server = 'wc_down';
SELECT resource, apply_timeout FROM kwatch.registrations WHERE server = 'wc_down' ORDER BY resource;
DELETE FROM kwatch.registrations;

-- Issue 35: the update made a view kubectl.<t> for each mirror table that
-- kwatch.tables knows (upgrade_renamed's row names another name: none),
-- owned by a superuser (never by a role that could redefine it), neither
-- it nor schema kubectl a member of the extension (DROP EXTENSION must not
-- take them); SELECT on each granted to its table's owner, who may grant
-- it on; a table drops with CASCADE (the view reads it)
SELECT v.relname, (SELECT a.rolsuper FROM pg_roles a WHERE a.oid = v.relowner) AS superuser_owned,
       v.reloptions AS options,
       EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass
               AND d.objid = v.oid AND d.deptype = 'e') AS extension_member
  FROM pg_class v JOIN pg_class t ON t.relname = v.relname AND t.relnamespace = 'k8s'::regnamespace
 WHERE v.relnamespace = 'kubectl'::regnamespace ORDER BY 1;
SELECT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_namespace'::regclass
               AND d.objid = 'kubectl'::regnamespace AND d.deptype = 'e') AS schema_member;
SELECT name, ready, status, restarts, age IS NOT NULL AS has_age FROM kubectl.upgrade_pods ORDER BY uid;
SELECT v.relname, a.rolname = c.relowner::regrole::text AS granted_to_table_owner, x.is_grantable
  FROM pg_class v, aclexplode(v.relacl) x, pg_roles a, pg_class c
 WHERE v.relnamespace = 'kubectl'::regnamespace AND a.oid = x.grantee AND x.privilege_type = 'SELECT'
   AND c.relname = v.relname AND c.relnamespace = 'k8s'::regnamespace AND a.oid <> v.relowner
 ORDER BY 1;
-- Issue 36: the labels index kwatch made is jsonb_path_ops, same name; the
-- owner's own is as it was
SELECT i.indexrelid::regclass AS index, pg_get_indexdef(i.indexrelid) AS definition
  FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
 WHERE c.relnamespace = 'k8s'::regnamespace AND c.relname IN ('upgrade_pods', 'upgrade_crontabs')
   AND pg_get_indexdef(i.indexrelid) LIKE '%gin%'
 ORDER BY 1::text;

-- Extension update 0.7.0 -> 0.8.0 (the script built from sql/updates/):
-- as_of() is a C function, still PUBLIC's, no longer with a search_path
-- of its own; it refuses a table without history as before
-- the 0.8.0 library refuses its entry points while the schema is 0.7.0
-- (55000, with the hint to update: src/common/schema_version.c), the
-- live/events tables' planning too; the generated columns' helpers work
SELECT kwatch.history('k8s.upgrade_pods');
SELECT count(*) FROM kwatch.events;
DROP SERVER IF EXISTS wc_gone;
SELECT kwatch.jsonb_integer('3');
-- a 0.7.0 history table, for the managers column below (0.7.0's own implementation,
-- which the entry point above would have run)
SELECT kwatch._history_impl('k8s.upgrade_pods');
-- the answer is kept for the transaction, and read again after the update
BEGIN;
SAVEPOINT before_update;
SELECT count(*) FROM kwatch.events;
ROLLBACK TO SAVEPOINT before_update;
ALTER EXTENSION kwatch UPDATE TO '0.8.0';
SELECT count(*) >= 0 AS readable FROM kwatch.events;
COMMIT;
SELECT extversion FROM pg_extension WHERE extname = 'kwatch';
SELECT l.lanname, p.provolatile, p.proisstrict, p.prosecdef, p.proconfig,
       pg_get_function_result(p.oid) AS returns,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public_execute
  FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
 WHERE p.oid = 'kwatch.as_of(regclass, timestamptz)'::regprocedure;
SELECT kwatch.as_of('k8s.upgrade_crontabs', now());
SELECT count(*) FROM kwatch.as_of(NULL, now());
-- 0.8.0: a history table gets the column managers (who changed each
-- version), its trigger the argument that says so
SELECT a.attname, format_type(a.atttypid, a.atttypmod) AS type FROM pg_attribute a
 WHERE a.attrelid = 'k8s.upgrade_pods_history'::regclass AND a.attname = 'managers';
SELECT pg_get_triggerdef(g.oid) FROM pg_trigger g
 WHERE g.tgrelid = 'k8s.upgrade_pods'::regclass AND g.tgname = 'kwatch_history';
-- a row written by another process than the worker: no managers
UPDATE k8s.upgrade_pods SET resource_version = resource_version || '0' WHERE uid = 'u1';
SELECT change, managers FROM k8s.upgrade_pods_history WHERE uid = 'u1' ORDER BY lower(valid);

-- The functions the library checks (kwatch_privileged_entry: watch,
-- history, ...; the waits) refuse an older schema (55000,
-- src/common/schema_version.c): what the steps above tested of them runs
-- here, at the current version.
SELECT kwatch.create_mirror_table('upgrade_hpods', '', 'v1', 'pods');
INSERT INTO k8s.upgrade_hpods (cluster, uid, resource_version, object) VALUES
  ('old', 'u1', '1', '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "listed", "namespace": "n", "uid": "u1", "resourceVersion": "1"}}'),
  ('old', 'u2', '2', '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "watched", "namespace": "n", "uid": "u2", "resourceVersion": "2"}}'),
  ('old', 'u3', '3', '{"apiVersion": "v1beta1", "kind": "Pod", "metadata": {"name": "odd", "namespace": "n", "uid": "u3", "resourceVersion": "3"}}'),
  ('unwatched', 'u4', '4', '{"metadata": {"name": "other", "namespace": "n", "uid": "u4", "resourceVersion": "4"}}');
-- history of a mirror table with rows: each opens its first version
SELECT kwatch.history('k8s.upgrade_hpods', retention => '7 days');
SELECT c.relowner = p.relowner AS same_owner, obj_description(c.oid, 'pg_class')
  FROM pg_class c, pg_class p
 WHERE c.oid = 'k8s.upgrade_hpods_history'::regclass AND p.oid = 'k8s.upgrade_hpods'::regclass;
SELECT table_name, history_table, retention, max_rows FROM kwatch.history_tables;
SELECT cluster, uid, name, resource_version, change, deletion, upper_inf(valid) AS open
  FROM k8s.upgrade_hpods_history ORDER BY uid;
-- changes as the worker makes them: a version each, ranges end to end
UPDATE k8s.upgrade_hpods SET resource_version = '7',
       object = jsonb_set(object, '{metadata,labels}', '{"app": "web"}') WHERE uid = 'u1';
UPDATE k8s.upgrade_hpods SET resource_version = '8',
       object = jsonb_set(object, '{metadata,labels}', '{"app": "api"}') WHERE uid = 'u1';
DELETE FROM k8s.upgrade_hpods WHERE uid = 'u2';
SELECT uid, resource_version, change, deletion, upper_inf(valid) AS open,
       upper(valid) = lead(lower(valid)) OVER (PARTITION BY uid ORDER BY lower(valid)) AS ends_where_next_begins,
       NOT isempty(valid) AS nonempty
  FROM k8s.upgrade_hpods_history WHERE uid IN ('u1', 'u2') ORDER BY uid, lower(valid);
SELECT count(*) = (SELECT count(*) FROM k8s.upgrade_hpods) AS open_versions_are_the_table
  FROM k8s.upgrade_hpods_history WHERE upper_inf(valid);
SELECT name, resource_version FROM kwatch.as_of('k8s.upgrade_hpods', now()) ORDER BY uid;
SELECT name, resource_version FROM kwatch.as_of('k8s.upgrade_hpods', clock_timestamp()) ORDER BY uid;
-- what changed between two versions
SELECT * FROM kwatch.object_diff(
  (SELECT object FROM k8s.upgrade_hpods_history WHERE uid = 'u1' AND resource_version = '7'),
  (SELECT object FROM k8s.upgrade_hpods_history WHERE uid = 'u1' AND resource_version = '8'));
SELECT * FROM kwatch.object_diff('{"a": 1, "b": {"c": [1, 2], "d": "x"}, "metadata": {"resourceVersion": "1"}}',
                                 '{"a": 1, "b": {"c": [1, 3], "e": null}, "metadata": {"resourceVersion": "2"}}');
SELECT count(*) FROM kwatch.object_diff('{"a": 1}', '{"a": 1}');
SELECT * FROM kwatch.object_diff('{"gone": {"x": 1}, "same": 2}', '{"new": {"y": [1]}, "same": 2}');
-- refusals
SELECT kwatch.history('kwatch.registrations');
SELECT kwatch.as_of('k8s.upgrade_crontabs', now());
SELECT kwatch.watch('pods', server => 'old', history_retention => '1 day');
SET ROLE kw_upgrade_owner;
SELECT kwatch.history('k8s.upgrade_hpods', false);
RESET ROLE;
-- off: the trigger goes, the history stays
SELECT kwatch.history('k8s.upgrade_hpods', false);
DELETE FROM k8s.upgrade_hpods WHERE uid = 'u3';
SELECT count(*) FROM k8s.upgrade_hpods_history WHERE uid = 'u3' AND upper_inf(valid);
SELECT table_name, enabled FROM kwatch.history_tables;
DROP TABLE k8s.upgrade_hpods_history;

-- history() reads a role's mirror table as that role, never as the
-- extension owner: the first versions obey the owner's forced row security
-- (superusers bypass it), so the owner's casts, policies and inheriting
-- tables run with the owner's rights only
SELECT kwatch.create_mirror_table('upgrade_owned', '', 'v1', 'configmaps');
INSERT INTO k8s.upgrade_owned (cluster, uid, resource_version, object) VALUES
  ('old', 'seen', '1', '{"metadata": {"name": "seen", "uid": "seen"}}'),
  ('old', 'hidden', '2', '{"metadata": {"name": "hidden", "uid": "hidden"}}');
ALTER TABLE k8s.upgrade_owned OWNER TO kw_upgrade_owner;
ALTER TABLE k8s.upgrade_owned ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY only_seen ON k8s.upgrade_owned USING (uid <> 'hidden');
SELECT kwatch.history('k8s.upgrade_owned');
SELECT uid FROM k8s.upgrade_owned_history ORDER BY uid;
DROP TABLE k8s.upgrade_owned_history, k8s.upgrade_owned;
-- a table that merely has the history's name (another role's, even with
-- kwatch's comment) is never taken as the history
SELECT kwatch.create_mirror_table('upgrade_squat', '', 'v1', 'configmaps');
CREATE TABLE k8s.upgrade_squat_history (id bigint, cluster text, uid text, namespace text, name text,
  resource_version text, valid tstzrange, change text, deletion text, object jsonb);
COMMENT ON TABLE k8s.upgrade_squat_history IS 'kwatch history of k8s.upgrade_squat';
ALTER TABLE k8s.upgrade_squat_history OWNER TO kw_upgrade_owner;
SELECT kwatch.history('k8s.upgrade_squat');
DROP TABLE k8s.upgrade_squat_history, k8s.upgrade_squat;

-- history() takes only a table kwatch made, whatever the comment says
SELECT kwatch.history('k8s.upgrade_forged');

-- the history trigger still fires for a table owner without EXECUTE on it
-- (PostgreSQL checks EXECUTE when a trigger is created, not when it fires)
SELECT kwatch.create_mirror_table('upgrade_hist', '', 'v1', 'configmaps');
ALTER TABLE k8s.upgrade_hist OWNER TO kw_upgrade_owner;
SELECT kwatch.history('k8s.upgrade_hist');
SET ROLE kw_upgrade_owner;
INSERT INTO k8s.upgrade_hist (cluster, uid, resource_version, object)
VALUES ('c', 'h1', '1', '{"metadata": {"name": "h1", "uid": "h1"}}');
SELECT uid, change, upper_inf(valid) AS open FROM k8s.upgrade_hist_history;
SELECT kwatch._check_retry_range('retry_relist_after', '[1s,5s]');
RESET ROLE;
DROP TABLE k8s.upgrade_hist_history, k8s.upgrade_hist;

-- wait_current(): refusals that need no cluster, and a role's own watch on
-- a server the role has no USAGE on
INSERT INTO kwatch.registrations (server, resource, api_group, api_version, plural, kind,
                                  namespaced, table_name, channel, owner)
VALUES ('wc_down', 'configmaps', '', 'v1', 'configmaps', 'ConfigMap', true, 'upgrade_wc',
        'kwatch_upgrade_wc', 'kw_upgrade_owner'::regrole);
SELECT kwatch.wait_current(NULL, 'wc_down');
SELECT kwatch.wait_current('nothing', 'wc_down');
SELECT kwatch._wait_current(ARRAY[-1], NULL);
SELECT kwatch.wait_current('configmaps', 'wc_down', '-1s');
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT kwatch.wait_current('configmaps', 'wc_down');
ROLLBACK;
SET ROLE kw_upgrade_owner;
SELECT kwatch.wait_current('configmaps', 'wc_down', '1s');
RESET ROLE;
DO $$
BEGIN
  PERFORM kwatch.wait_current('configmaps', 'wc_down', '1s');
EXCEPTION WHEN OTHERS THEN
  RAISE NOTICE 'sqlstate %: %', SQLSTATE, split_part(SQLERRM, ':', 1);
END $$;
DELETE FROM kwatch.registrations;
DROP SERVER wc_down;

DROP TABLE k8s.upgrade_pods, k8s.upgrade_crontabs, k8s.upgrade_secrets;   -- 2BP01: the views read them
DROP TABLE k8s.upgrade_pods, k8s.upgrade_crontabs, k8s.upgrade_secrets, k8s.upgrade_renamed,
  k8s.upgrade_hpods CASCADE;
DROP OWNED BY kw_upgrade_owner;
DROP ROLE kw_upgrade_owner;
