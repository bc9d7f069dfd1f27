-- Rows that follow RBAC (src/functions/rbac_rows.c, sql/schema/functions/
-- rbac_rows.sql) without a cluster: the decision's attributes, its "no"
-- without an error for whatever it is given, and the opt-in's refusals.
-- The decisions themselves: test/integration/test_rbac_rows.py.
CREATE EXTENSION IF NOT EXISTS kwatch;
\set VERBOSITY terse

SELECT p.proname, p.proleakproof, p.provolatile, p.proparallel
  FROM pg_proc p WHERE p.pronamespace = 'kwatch'::regnamespace
   AND p.proname IN ('rbac_visible', 'matches_labels', 'enable_rbac_rows', 'disable_rbac_rows')
 ORDER BY 1, 2;

-- never an error: false for NULLs, a table that is no mirror, a server
-- that does not exist or is no kwatch server
SELECT kwatch.rbac_visible(NULL, 'x', 'y') AS null_table,
       kwatch.rbac_visible('pg_class', NULL, 'y') AS null_cluster,
       kwatch.rbac_visible('pg_class', 'x', 'y') AS no_mirror,
       kwatch.rbac_visible('pg_class', repeat('x', 200), repeat('y', 200)) AS long_names;
CREATE TABLE rbac_t (cluster text, namespace text);
INSERT INTO rbac_t VALUES ('nowhere', 'a'), ('nowhere', NULL), (NULL, 'b'), ('', '');
SELECT cluster, namespace, kwatch.rbac_visible('rbac_t', cluster, namespace) FROM rbac_t;

-- the opt-in: mirror tables only, their owner only
SELECT kwatch.enable_rbac_rows('rbac_t');
SELECT kwatch.disable_rbac_rows('rbac_t');
SELECT kwatch.enable_rbac_rows('pg_class');
DROP TABLE rbac_t;

-- the decision's age: a superuser's setting (a role may not lengthen it)
SHOW kwatch.rbac_decision_max_age;
CREATE ROLE kw_rbac_reader;
SET ROLE kw_rbac_reader;
SET kwatch.rbac_decision_max_age = '1h';
RESET ROLE;
DROP ROLE kw_rbac_reader;
