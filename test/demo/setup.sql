-- test/demo/setup.sql -- what the demo sets up in its database (psql
-- variable :kubeconfig, the path the PostgreSQL server reads): the
-- extension, the server `demo` (the name the docs' examples use), the
-- watches of pods, replicasets, deployments and namespaces, and live
-- tables of pods, nodes, configmaps and services in schema k8s_live.  Run
-- by test/demo/demo.sh (step 5) and by test/integration/test_doc_examples.py,
-- which runs every example of the docs against this setup as written.
-- Idempotent: a second run changes nothing.
\set ON_ERROR_STOP on
CREATE EXTENSION IF NOT EXISTS kwatch;
-- a demo database kept from an earlier kwatch: to the installed version
ALTER EXTENSION kwatch UPDATE;
SELECT format('CREATE SERVER demo FOREIGN DATA WRAPPER kwatch OPTIONS (kubeconfig %L)', :'kubeconfig')
 WHERE NOT EXISTS (SELECT 1 FROM pg_foreign_server WHERE srvname = 'demo') \gexec
-- watch() again with the same settings returns the table
SELECT kwatch.watch('pods', server => 'demo');
SELECT kwatch.watch('replicasets', server => 'demo');
SELECT kwatch.watch('deployments.apps', server => 'demo');
SELECT kwatch.watch('namespaces', server => 'demo');
CREATE SCHEMA IF NOT EXISTS k8s_live;
SELECT 'IMPORT FOREIGN SCHEMA k8s LIMIT TO (pods, nodes, configmaps, services) FROM SERVER demo INTO k8s_live'
 WHERE to_regclass('k8s_live.pods') IS NULL \gexec
