--
-- Live foreign tables without a cluster: option validation, the columns,
-- and the request EXPLAIN shows for each WHERE clause (fdw_deparse.c).
-- The server points nowhere and use_remote_estimate is off, and the tables
-- carry api_version/namespaced as IMPORT writes them, so nothing here
-- contacts an API server.
--
CREATE EXTENSION IF NOT EXISTS kwatch;
CREATE SERVER live_nowhere FOREIGN DATA WRAPPER kwatch
  OPTIONS (api_server 'https://127.0.0.1:1', use_remote_estimate 'false');

-- options
CREATE FOREIGN TABLE bad (name text) SERVER live_nowhere;
CREATE FOREIGN TABLE bad (name text) SERVER live_nowhere OPTIONS (resource 'po ds');
CREATE FOREIGN TABLE bad (name text) SERVER live_nowhere OPTIONS (resource 'pods', namespace 'Not_A_Label');
CREATE FOREIGN TABLE bad (name text) SERVER live_nowhere OPTIONS (resource 'pods', namespaced 'maybe');
CREATE FOREIGN TABLE bad (name text) SERVER live_nowhere OPTIONS (resource 'pods', use_remote_estimat 'false');
CREATE FOREIGN TABLE bad (name text) SERVER live_nowhere OPTIONS (resource '');
-- api_version goes into the request path: a version name, nothing else
CREATE FOREIGN TABLE bad (name text) SERVER live_nowhere
  OPTIONS (resource 'pods', api_version 'v1/namespaces/kube-system/secrets#', namespaced 'true');
CREATE FOREIGN TABLE bad (name text) SERVER live_nowhere
  OPTIONS (resource 'pods', api_version 'v1?watch=1&x=', namespaced 'true');
ALTER SERVER live_nowhere OPTIONS (SET use_remote_estimate 'off');
ALTER SERVER live_nowhere OPTIONS (SET use_remote_estimate 'yes please');

-- the columns: those of the mirror tables, with their expressions
SELECT * FROM kwatch.live_columns('', 'pods');
SELECT column_name, column_type FROM kwatch.live_columns('apps', 'deployments')
 EXCEPT SELECT column_name, column_type FROM kwatch.live_columns('', 'configmaps')
 ORDER BY 1;

CREATE SCHEMA live;
CREATE FOREIGN TABLE live.pods (
  cluster text, namespace text, name text, uid text, resource_version text,
  labels jsonb, annotations jsonb, owner_references jsonb,
  created_at timestamptz, deleted_at timestamptz,
  phase text, node_name text, pod_ip text, host_ip text, ready boolean,
  restart_count integer, service_account text, object jsonb)
  SERVER live_nowhere OPTIONS (resource 'pods', api_version 'v1', namespaced 'true');
CREATE FOREIGN TABLE live.nodes (name text, namespace text, labels jsonb, object jsonb)
  SERVER live_nowhere OPTIONS (resource 'nodes', api_version 'v1', namespaced 'false');
CREATE FOREIGN TABLE live.deployments (namespace text, name text, labels jsonb, replicas integer)
  SERVER live_nowhere OPTIONS (resource 'deployments.apps', api_version 'v1', namespaced 'true');
CREATE FOREIGN TABLE live.shop_pods (namespace text, name text, labels jsonb)
  SERVER live_nowhere OPTIONS (resource 'pods', api_version 'v1', namespaced 'true', namespace 'shop');
CREATE FOREIGN TABLE live.odd (name text, foo integer)
  SERVER live_nowhere OPTIONS (resource 'pods', api_version 'v1', namespaced 'true');

-- pushdown, as EXPLAIN shows it
EXPLAIN (COSTS OFF) SELECT * FROM live.pods WHERE labels->>'app' = 'web' AND namespace = 'shop';
EXPLAIN (COSTS OFF) SELECT name FROM live.pods WHERE name = 'web-1';
EXPLAIN (COSTS OFF) SELECT name FROM live.pods WHERE labels ? 'app' AND NOT (labels ? 'canary');
EXPLAIN (COSTS OFF) SELECT name FROM live.pods WHERE labels @> '{"app": "web", "tier": "front"}';
EXPLAIN (COSTS OFF) SELECT name FROM live.pods WHERE labels->>'tier' IN ('front', 'back');
EXPLAIN (COSTS OFF) SELECT name FROM live.pods WHERE labels->>'tier' NOT IN ('front', 'back');
EXPLAIN (COSTS OFF) SELECT name FROM live.pods WHERE labels->>'app' <> 'web';
EXPLAIN (COSTS OFF) SELECT name FROM live.pods WHERE labels->>'app' IS NULL AND labels->>'env' IS NOT NULL;
EXPLAIN (COSTS OFF) SELECT name FROM live.pods WHERE phase = 'Running' AND node_name = 'node-1';
EXPLAIN (COSTS OFF) SELECT name FROM live.pods WHERE object->'spec'->>'schedulerName' = 'default-scheduler'
  AND object->'status'->>'podIP' <> '10.0.0.1';
EXPLAIN (COSTS OFF) SELECT name FROM live.pods WHERE namespace = 'a' AND namespace = 'b';
EXPLAIN (COSTS OFF) SELECT name FROM live.shop_pods WHERE namespace = 'other';
-- field values are escaped; label values that can't be label values stay local
EXPLAIN (COSTS OFF) SELECT name FROM live.pods WHERE name = 'a,b=c\d';
EXPLAIN (COSTS OFF) SELECT name FROM live.pods WHERE labels->>'app' = 'not a label value';
-- label keys whose prefix is no DNS subdomain stay local (the server would say 400)
EXPLAIN (COSTS OFF) SELECT name FROM live.pods WHERE labels->>'-x.io/app' = 'web'
  AND labels ? 'a..b/c' AND labels->>'a-.io/b' IS NULL AND labels->>'x.io-/b' = 'v';
EXPLAIN (COSTS OFF) SELECT name FROM live.pods WHERE labels->>'app.kubernetes.io/name' = 'web'
  AND labels ? 'a-1.b2/c';
-- not pushed: unsupported fields, other operators, cluster-scoped namespace, volatile
EXPLAIN (COSTS OFF) SELECT name FROM live.pods WHERE host_ip = '10.0.0.1' OR name = 'x';
EXPLAIN (COSTS OFF) SELECT name FROM live.pods WHERE name LIKE 'web-%' AND restart_count > 3;
EXPLAIN (COSTS OFF) SELECT name FROM live.pods WHERE phase = '';
EXPLAIN (COSTS OFF) SELECT name FROM live.pods WHERE name = random()::text;
EXPLAIN (COSTS OFF) SELECT name FROM live.nodes WHERE namespace = 'x' AND name = 'n1';
EXPLAIN (COSTS OFF) SELECT name FROM live.nodes WHERE object->'spec'->>'podCIDR' = '10.0.0.0/24';
EXPLAIN (COSTS OFF) SELECT name FROM live.deployments WHERE replicas = 3;
-- namespace IN (...): one LIST per namespace; with namespace = too, the path wins
EXPLAIN (COSTS OFF) SELECT name FROM live.deployments WHERE namespace IN ('a', 'b', 'a');
EXPLAIN (COSTS OFF) SELECT name FROM live.deployments WHERE namespace IN ('a', 'b') AND namespace = 'a';
-- a prepared statement's custom plan sees its parameter as a constant
PREPARE q(text) AS SELECT name FROM live.pods WHERE name = $1;
EXPLAIN (COSTS OFF) EXECUTE q('x');
DEALLOCATE q;
-- generic plans: parameters are bound into the request at execution
SET plan_cache_mode = force_generic_plan;
PREPARE q(text, text, text) AS SELECT name FROM live.pods
  WHERE namespace = $1 AND labels->>'app' = $2 AND name <> $3 AND phase = $2;
EXPLAIN (COSTS OFF) EXECUTE q('shop', 'web', 'x');
DEALLOCATE q;
RESET plan_cache_mode;
-- a subquery's value (an InitPlan's PARAM_EXEC) likewise
EXPLAIN (COSTS OFF) SELECT name FROM live.pods WHERE namespace = (SELECT 'shop');
-- LIMIT: pushed as the page size only when every clause is pushed exactly
EXPLAIN (COSTS OFF, VERBOSE) SELECT name FROM live.pods WHERE namespace = 'shop' AND labels->>'app' = 'web' LIMIT 5;
EXPLAIN (COSTS OFF) SELECT name FROM live.pods LIMIT 5 OFFSET 10;
EXPLAIN (COSTS OFF) SELECT name FROM live.pods WHERE phase = 'Running' LIMIT 5;
EXPLAIN (COSTS OFF) SELECT name FROM live.pods ORDER BY name LIMIT 5;
EXPLAIN (COSTS OFF) SELECT p.name FROM live.pods p JOIN live.nodes n ON n.name = p.node_name LIMIT 5;
-- a column no live table has
EXPLAIN (COSTS OFF) SELECT name FROM live.odd;

-- writes (fdw_modify.c): computed columns are refused before any request,
-- EXPLAIN names the request of each row, option updatable turns them off
UPDATE live.pods SET name = 'y' WHERE name = 'x';
UPDATE live.pods SET phase = 'Failed', labels = '{}';
INSERT INTO live.pods (object, ready) VALUES ('{}', true);
EXPLAIN (COSTS OFF) UPDATE live.pods SET labels = labels || '{"tier": "web"}' WHERE namespace = 'shop';
EXPLAIN (COSTS OFF) DELETE FROM live.pods WHERE namespace = 'shop' AND name = 'x';
EXPLAIN (COSTS OFF) INSERT INTO live.pods (namespace, name, object) VALUES ('shop', 'x', '{}');
-- refused before any request: a namespace that is not a DNS label, COPY,
-- ON CONFLICT, a view WITH CHECK OPTION (checked after the write: too late)
INSERT INTO live.pods (namespace, name, object) VALUES ('x?dryRun=All', 'p', '{}');
COPY live.pods (namespace, name, object) FROM STDIN;
shop	p	{}
\.
INSERT INTO live.pods (namespace, name, object) VALUES ('shop', 'p', '{}') ON CONFLICT DO NOTHING;
CREATE VIEW live.checked_pods AS SELECT * FROM live.pods WHERE namespace = 'shop' WITH CHECK OPTION;
INSERT INTO live.checked_pods (namespace, name, object) VALUES ('kube-system', 'p', '{}');
DROP VIEW live.checked_pods;
ALTER FOREIGN TABLE live.pods OPTIONS (ADD updatable 'false');
DELETE FROM live.pods WHERE name = 'x';
ALTER FOREIGN TABLE live.pods OPTIONS (DROP updatable);

-- IMPORT FOREIGN SCHEMA: one remote schema, no options
IMPORT FOREIGN SCHEMA kube_system FROM SERVER live_nowhere INTO live;
IMPORT FOREIGN SCHEMA k8s FROM SERVER live_nowhere INTO live OPTIONS (x 'y');

-- a scan of an unreachable server fails clearly
\set VERBOSITY terse
SELECT name FROM live.pods;
\set VERBOSITY default

DROP SCHEMA live CASCADE;
DROP SERVER live_nowhere CASCADE;
