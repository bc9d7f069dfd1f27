-- Relations (sql/schema/functions/relations.sql) and rollout_undo's checks
-- (rollout.sql) over hand-made mirror rows: owner chains, pods of a
-- Deployment, ReplicaSet, Service (an empty selector selects none), Node,
-- the relations kept within one server, the indexes made with the tables,
-- the caller's own rights (42501), errors.  The same on a real control
-- plane, and the rollback's write: test/integration/test_relations.py.
CREATE EXTENSION IF NOT EXISTS kwatch;
\set VERBOSITY terse
SELECT kwatch.create_mirror_table('pods', '', 'v1', 'pods');
SELECT kwatch.create_mirror_table('replicasets', 'apps', 'v1', 'replicasets');
SELECT kwatch.create_mirror_table('deployments', 'apps', 'v1', 'deployments');
SELECT kwatch.create_mirror_table('services', '', 'v1', 'services');
SELECT kwatch.create_mirror_table('nodes', '', 'v1', 'nodes');
SELECT indexrelid::regclass, pg_get_indexdef(indexrelid) FROM pg_index
 WHERE indrelid IN ('k8s.pods'::regclass, 'k8s.replicasets'::regclass, 'k8s.deployments'::regclass)
   AND pg_get_indexdef(indexrelid) !~ 'pkey|labels|namespace, name' ORDER BY 1;
SELECT kwatch.controller_uid('[{"uid":"a"},{"uid":"b","controller":true}]'),
       kwatch.controller_uid('[{"uid":"a","controller":false}]'), kwatch.controller_uid('{}'),
       kwatch.controller_uid('[]'), kwatch.controller_uid('[{"controller":true}, 3]');
INSERT INTO k8s.deployments (cluster, uid, resource_version, object) VALUES
 ('prod', 'd1', '1', '{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop","uid":"d1","resourceVersion":"1"},"spec":{"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"c","image":"v3"}]}}}}');
INSERT INTO k8s.replicasets (cluster, uid, resource_version, object) VALUES
 ('prod', 'r1', '1', '{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"web-1","namespace":"shop","uid":"r1","annotations":{"deployment.kubernetes.io/revision":"1"},"ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"web","uid":"d1","controller":true}]},"spec":{"template":{"metadata":{"labels":{"app":"web","pod-template-hash":"1"}},"spec":{"containers":[{"name":"c","image":"v1"}]}}}}'),
 ('prod', 'r2', '1', '{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"web-2","namespace":"shop","uid":"r2","annotations":{"deployment.kubernetes.io/revision":"2"},"ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"web","uid":"d1","controller":true}]},"spec":{"template":{"metadata":{"labels":{"app":"web","pod-template-hash":"2"}},"spec":{"containers":[{"name":"c","image":"v2"}]}}}}'),
 ('prod', 'r3', '1', '{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"web-3","namespace":"shop","uid":"r3","annotations":{"deployment.kubernetes.io/revision":"3"},"ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"web","uid":"d1","controller":true}]},"spec":{"template":{"metadata":{"labels":{"app":"web","pod-template-hash":"3"}},"spec":{"containers":[{"name":"c","image":"v3"}]}}}}');
INSERT INTO k8s.pods (cluster, uid, resource_version, object) VALUES
 ('prod', 'p1', '1', '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-3-a","namespace":"shop","uid":"p1","labels":{"app":"web"},"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-3","uid":"r3","controller":true}]},"spec":{"nodeName":"n1"}}'),
 ('prod', 'p2', '1', '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"lone","namespace":"shop","uid":"p2","labels":{"app":"x"}},"spec":{}}'),
 ('other', 'p3', '1', '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-3-a","namespace":"shop","uid":"p3","labels":{"app":"web"},"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-3","uid":"r3","controller":true}]},"spec":{"nodeName":"n1"}}');
INSERT INTO k8s.services (cluster, uid, resource_version, object) VALUES
 ('prod', 's1', '1', '{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"shop","uid":"s1"},"spec":{"selector":{"app":"web"}}}'),
 ('prod', 's2', '1', '{"apiVersion":"v1","kind":"Service","metadata":{"name":"none","namespace":"shop","uid":"s2"},"spec":{}}');
INSERT INTO k8s.nodes (cluster, uid, resource_version, object) VALUES
 ('prod', 'n1', '1', '{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","uid":"n1"}}');
INSERT INTO k8s.deployments (cluster, uid, resource_version, object) VALUES
 ('prod', 'd2', '1', '{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"other","uid":"d2","resourceVersion":"1"},"spec":{}}');
SELECT * FROM kwatch.owner_chain('pod', 'web-3-a', 'shop', 'prod');
SELECT * FROM kwatch.owner_chain('pods', 'web-3-a', 'shop', 'other');   -- the owners are prod's
SELECT * FROM kwatch.top_owner('pod', 'lone', server => 'prod');
SELECT (kwatch.top_owner('po', 'web-3-a', server => 'prod')).name;
SELECT cluster, namespace, name, uid FROM kwatch.pods_of('deploy', 'web', 'shop', 'prod');
SELECT name FROM kwatch.pods_of('deployments.apps', 'web', 'other', 'prod');
SELECT name FROM kwatch.pods_of('rs', 'web-3', server => 'prod');
SELECT name FROM kwatch.pods_of('svc', 'web', server => 'prod');
SELECT name FROM kwatch.pods_of('svc', 'none', server => 'prod');   -- no selector: none
SELECT name FROM kwatch.pods_of('node', 'n1', server => 'prod');
SELECT name FROM kwatch.node_of('web-3-a', server => 'prod');
SELECT name FROM kwatch.node_of('lone', server => 'prod');
-- errors
SELECT name FROM kwatch.pods_of('deploy', 'nope', server => 'prod');
SELECT name FROM kwatch.pods_of('deploy', 'web', server => 'prod');
SELECT name FROM kwatch.endpoint_slices_of('web', 'shop', 'prod');
SELECT kwatch.rollout_undo('web', 'shop', 'prod', to_revision => 7);
SELECT kwatch.rollout_undo('web', 'shop', 'prod', to_revision => -1);
SELECT kwatch.rollout_undo('web', 'other', 'prod');
SELECT kwatch.rollout_undo('web', 'shop', 'prod', to_revision => 3);
UPDATE k8s.deployments SET object = jsonb_set(object, '{spec,paused}', 'true') WHERE uid = 'd1';
SELECT kwatch.rollout_undo('web', 'shop', 'prod');
-- the caller's rights: no SELECT on the pods, no pods
CREATE ROLE relations_reader;
GRANT USAGE ON SCHEMA k8s TO relations_reader;
GRANT SELECT ON k8s.replicasets, k8s.deployments TO relations_reader;
SET ROLE relations_reader;
SELECT name FROM kwatch.pods_of('deploy', 'web', 'shop', 'prod');
SELECT name FROM kwatch.owner_chain('rs', 'web-3', 'shop', 'prod');
RESET ROLE;
-- a table another role owns is not read (its owner's code, a policy or a
-- cast of a column type of its own, would run with the caller's rights):
-- not by a superuser, nor by a role without that owner's rights; an owner
-- reference into it is "not mirrored"
CREATE ROLE relations_owner;
ALTER TABLE k8s.replicasets OWNER TO relations_owner;
SELECT name FROM kwatch.pods_of('deploy', 'web', 'shop', 'prod');
SELECT depth, kind, name, mirrored FROM kwatch.owner_chain('pod', 'web-3-a', 'shop', 'prod');
GRANT relations_owner TO relations_reader;
GRANT SELECT ON k8s.pods TO relations_reader;
SET ROLE relations_reader;
SELECT depth, kind, name, mirrored FROM kwatch.owner_chain('pod', 'web-3-a', 'shop', 'prod');
RESET ROLE;
REVOKE SELECT ON k8s.pods FROM relations_reader;
ALTER TABLE k8s.replicasets OWNER TO CURRENT_USER;
DROP ROLE relations_owner;
-- the plans use the indexes
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT array_agg(m.uid) FROM k8s.replicasets m
 WHERE m.cluster = 'prod' AND m.namespace = 'shop' AND kwatch.controller_uid(m.owner_references) = 'd1';
EXPLAIN (COSTS OFF) SELECT p.name FROM k8s.pods p WHERE p.cluster = 'prod' AND p.node_name = 'n1';
RESET enable_seqscan;
-- two mirror tables of pods: each server's relations read the one with its rows
SELECT kwatch.create_mirror_table('pods_b', '', 'v1', 'pods');
INSERT INTO k8s.pods_b (cluster, uid, resource_version, object) VALUES
 ('b', 'pb', '1', '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-b","namespace":"shop","uid":"pb","labels":{"app":"web"}},"spec":{}}');
SELECT kwatch._relation_table('', 'pods', 'b'), kwatch._relation_table('', 'pods', 'prod');
SELECT name FROM kwatch.pods_of('svc', 'web', server => 'prod');
SELECT kwatch._relation_table('', 'pods', 'nobody');
DROP TABLE k8s.pods_b;
DROP OWNED BY relations_reader;
DROP ROLE relations_reader;
DROP TABLE k8s.pods, k8s.replicasets, k8s.deployments, k8s.services, k8s.nodes;
