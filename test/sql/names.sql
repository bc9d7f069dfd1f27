-- Which watch a name means (doc/reference.md, "Which watch a name means"):
-- the name forms, 42P08 for an ambiguous name, 42704 for an unknown server
-- in every function, unwatch(drop_table) of a table other watches write.
-- No cluster: the watches are registered by hand on servers that refuse.
CREATE EXTENSION IF NOT EXISTS kwatch;
\set VERBOSITY terse
\set SHOW_CONTEXT never

-- the forms of a resource's name (kubectl's): plural, singular, kind, short
-- name, with or without the group; the core group as "", "core" or none
SELECT n, kwatch._names_resource(n, 'configmaps', '{configmaps,configmap,cm}') AS configmaps,
       kwatch._names_resource(n, 'deployments.apps', '{deployments,deployment,deploy}') AS deployments
FROM unnest(ARRAY['configmaps', 'CM', 'configmap', 'cm.core', 'configmaps.', 'cm.apps',
                  'deploy', 'Deployment.apps', 'deployments.apps', 'deploy.batch',
                  'k8s.configmaps']) n;
-- a table name: as kwatch.watches shows it without k8s., or as SQL reads it
SELECT n, kwatch._table_forms(n) FROM unnest(ARRAY['pods', 'k8s.pods', 'K8S."My T"',
                                                   'public.pods', '"unterminated']) n;

CREATE SERVER down FOREIGN DATA WRAPPER kwatch
  OPTIONS (api_server 'https://127.0.0.1:1', insecure_skip_tls_verify 'true');
CREATE SERVER down2 FOREIGN DATA WRAPPER kwatch
  OPTIONS (api_server 'https://127.0.0.1:1', insecure_skip_tls_verify 'true');

-- an unknown server is 42704 everywhere
\set VERBOSITY default
SELECT kwatch.unwatch('pods', server => 'prod_typo');
SELECT kwatch.relist('pods', server => 'prod_typo');
SELECT kwatch.wait_synced('pods', server => 'prod_typo');
SELECT kwatch.wait_current('pods', server => 'prod_typo');
SELECT kwatch.history('pods', server => 'prod_typo');
SELECT kwatch.watch('pods', server => 'prod_typo');
\set VERBOSITY terse
\set SHOW_CONTEXT never

-- one role, two watches of configmaps on one server (two people sharing a
-- role): every name of the resource is ambiguous, its tables are not
SELECT kwatch.create_mirror_table('configmaps', '', 'v1', 'configmaps');
SELECT kwatch.create_mirror_table('team_cms', '', 'v1', 'configmaps');
INSERT INTO kwatch.registrations (server, resource, api_group, api_version, plural, kind,
                                  namespaced, namespace, label_selector, table_name, channel, owner, names)
VALUES ('down', 'configmaps', '', 'v1', 'configmaps', 'ConfigMap', true, NULL, NULL, 'configmaps',
        'kwatch_configmaps', current_user::regrole, '{configmaps,configmap,cm}'),
       ('down', 'configmaps', '', 'v1', 'configmaps', 'ConfigMap', true, 'team', 'app=x', 'team_cms',
        'kwatch_team_cms', current_user::regrole, '{configmaps,configmap,cm}');
\set VERBOSITY default
SELECT kwatch.unwatch('configmaps', server => 'down');
SELECT kwatch.unwatch('cm', server => 'down');
SELECT kwatch.relist('ConfigMap', server => 'down');
SELECT kwatch.history('cm', server => 'down');
\set VERBOSITY terse
\set SHOW_CONTEXT never
SELECT count(*) AS watches FROM kwatch.registrations;
-- the table with its schema tells one: a resource name never has "k8s."
SELECT kwatch.unwatch('k8s.team_cms', server => 'down');
SELECT table_name FROM kwatch.watches;
-- one left: its short name means it
SELECT kwatch.unwatch('cm', server => 'down');
SELECT count(*) AS watches FROM kwatch.registrations;

-- a name without its group means the core group's resource (kubectl's
-- order), whatever other group has a resource of that plural
SELECT kwatch.create_mirror_table('events', '', 'v1', 'events');
SELECT kwatch.create_mirror_table('events_events_k8s_io', 'events.k8s.io', 'v1', 'events');
INSERT INTO kwatch.registrations (server, resource, api_group, api_version, plural, kind,
                                  namespaced, table_name, channel, owner, names)
VALUES ('down', 'events', '', 'v1', 'events', 'Event', true, 'events', 'kwatch_events',
        current_user::regrole, '{events,event,ev}'),
       ('down', 'events.events.k8s.io', 'events.k8s.io', 'v1', 'events', 'Event', true,
        'events_events_k8s_io', 'kwatch_events_events_k8s_io', current_user::regrole, '{events,event,ev}');
SELECT (kwatch._find_watch('ev', 'down', current_user::regrole)).table_name;
SELECT (kwatch._find_watch('events.events.k8s.io', 'down', current_user::regrole)).table_name;
SELECT (kwatch._find_watch('event.events.k8s.io', 'down', current_user::regrole)).table_name;
SELECT kwatch._watch_ids('ev', 'down') = ARRAY[(SELECT id FROM kwatch.registrations WHERE table_name = 'events')];
SELECT kwatch.unwatch('ev.events.k8s.io', server => 'down', drop_table => true);
SELECT kwatch.unwatch('events', server => 'down', drop_table => true);
SELECT to_regclass('k8s.events'), to_regclass('k8s.events_events_k8s_io');

-- drop_table of a table another watch still writes: the watch and its rows
-- go, the table stays, with a WARNING that names only the caller's own
-- watches (another role's are counted)
CREATE ROLE kw_names_a;
CREATE ROLE kw_names_b;
GRANT EXECUTE ON FUNCTION kwatch.unwatch(text, text, boolean) TO kw_names_a;
GRANT USAGE ON SCHEMA k8s TO kw_names_a;
ALTER TABLE k8s.configmaps OWNER TO kw_names_a;
CREATE SERVER down3 FOREIGN DATA WRAPPER kwatch
  OPTIONS (api_server 'https://127.0.0.1:1', insecure_skip_tls_verify 'true');
INSERT INTO kwatch.registrations (server, resource, api_group, api_version, plural, kind,
                                  namespaced, table_name, channel, owner)
VALUES ('down', 'configmaps', '', 'v1', 'configmaps', 'ConfigMap', true, 'configmaps',
        'kwatch_configmaps', 'kw_names_a'::regrole),
       ('down2', 'configmaps', '', 'v1', 'configmaps', 'ConfigMap', true, 'configmaps',
        'kwatch_configmaps', 'kw_names_a'::regrole),
       ('down3', 'configmaps', '', 'v1', 'configmaps', 'ConfigMap', true, 'configmaps',
        'kwatch_configmaps', 'kw_names_b'::regrole);
INSERT INTO k8s.configmaps (cluster, uid, resource_version, object)
VALUES ('down', 'u1', '1', '{"metadata": {"name": "a", "namespace": "n", "uid": "u1"}}'),
       ('down2', 'u2', '1', '{"metadata": {"name": "b", "namespace": "n", "uid": "u2"}}');
SET ROLE kw_names_a;
\set VERBOSITY default
SELECT kwatch.unwatch('configmaps', server => 'down', drop_table => true);
\set VERBOSITY terse
\set SHOW_CONTEXT never
RESET ROLE;
SELECT cluster FROM k8s.configmaps;
SELECT count(*) AS watches FROM kwatch.registrations;
DELETE FROM kwatch.registrations;
DROP TABLE k8s.configmaps;
DROP SERVER down3;
REVOKE EXECUTE ON FUNCTION kwatch.unwatch(text, text, boolean) FROM kw_names_a;
REVOKE USAGE ON SCHEMA k8s FROM kw_names_a;
DROP ROLE kw_names_a;
DROP ROLE kw_names_b;

-- a server dropped under its watches (before kwatch followed servers):
-- unwatch() still removes them, the others say 42704
INSERT INTO kwatch.registrations (server, resource, api_group, api_version, plural, kind,
                                  namespaced, table_name, channel, owner)
VALUES ('gone', 'pods', '', 'v1', 'pods', 'Pod', true, 'pods', 'kwatch_pods', current_user::regrole);
SELECT kwatch.relist('pods', server => 'gone');
SELECT kwatch.unwatch('pods', server => 'gone');
SELECT count(*) AS watches FROM kwatch.registrations;

DROP TABLE k8s.team_cms;
DROP SERVER down;
DROP SERVER down2;
