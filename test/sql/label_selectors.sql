-- Label selectors: kwatch.matches_labels(labels, selector text | jsonb),
-- kwatch.matches_service_selector (src/functions/label_selector.c,
-- sql/schema/functions/label_selectors.sql).  The cases of apimachinery's
-- tests are copied as data, each with its file and line in Kubernetes
-- 1.20's staging/src/k8s.io/apimachinery/pkg/ (labels/selector_test.go,
-- apis/meta/v1/helpers_test.go).
CREATE EXTENSION IF NOT EXISTS kwatch;

-- the message of an invalid selector (22023, invalid_parameter_value), or 'valid'
CREATE FUNCTION sel_error(sel text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  PERFORM kwatch.matches_labels('{}', sel);
  RETURN 'valid';
EXCEPTION WHEN invalid_parameter_value THEN
  RETURN SQLERRM;
END $$;
CREATE FUNCTION sel_error(sel jsonb) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  PERFORM kwatch.matches_labels('{}', sel);
  RETURN 'valid';
EXCEPTION WHEN invalid_parameter_value THEN
  RETURN SQLERRM;
END $$;

-- the issue's example: != matches objects without the key, as kubectl does
SELECT l AS labels, kwatch.matches_labels(l, 'app=web,tier!=db') AS selected,
       (l->>'app' = 'web' AND l->>'tier' <> 'db') AS "labels->> <>"
  FROM (VALUES ('{"app": "web"}'::jsonb), ('{"app": "web", "tier": "db"}'),
               ('{"app": "web", "tier": "fe"}'), ('{"app": "api"}'), ('{}')) v(l);

-- TestSelectorParse (selector_test.go:29-63)
SELECT s, sel_error(s) FROM (VALUES
  ('x=a,y=b,z=c'), (''), ('x!=a,y=b'), ('x='), ('x= '), ('x=,z= '), ('x= ,z= '), ('!x'),
  ('x>1'), ('x>1,z<5'),                          -- testGoodStrings, :30-41
  ('x=a||y=b'), ('x==a==b'), ('!x=a'), ('x<a')    -- testBadStrings, :42-47
  ) v(s);

-- TestDeterministicParse (selector_test.go:65-74): order does not matter
SELECT kwatch.matches_labels('{"x": "a", "a": "x"}', 'x=a,a=x'),
       kwatch.matches_labels('{"x": "a", "a": "x"}', 'a=x,x=a');

-- TestEverything (:98-105), TestSelectorMatches (:107-136), TestSetMatches
-- (:151-165, as selectors), TestRequirementSelectorMatching (:379-424, as
-- the selectors those requirements print as)
SELECT sel, labels, want, kwatch.matches_labels(labels::jsonb, sel) AS got,
       CASE WHEN kwatch.matches_labels(labels::jsonb, sel) = want THEN 'ok' ELSE 'WRONG' END AS "?"
  FROM (VALUES
  ('', '{"x": "y"}', true),                       -- :99 Everything, :108
  ('x=y', '{"x": "y"}', true),                    -- :109
  ('x=y,z=w', '{"x": "y", "z": "w"}', true),      -- :110
  ('x!=y,z!=w', '{"x": "z", "z": "a"}', true),    -- :111
  ('notin=in', '{"notin": "in"}', true),          -- :112 in and notin in exactMatch
  ('x', '{"x": "z"}', true),                      -- :113
  ('!x', '{"y": "z"}', true),                     -- :114
  ('x>1', '{"x": "2"}', true),                    -- :115
  ('x<1', '{"x": "0"}', true),                    -- :116
  ('x=z', '{}', false),                           -- :117
  ('x=y', '{"x": "z"}', false),                   -- :118
  ('x=y,z=w', '{"x": "w", "z": "w"}', false),     -- :119
  ('x!=y,z!=w', '{"x": "z", "z": "w"}', false),   -- :120
  ('x', '{"y": "z"}', false),                     -- :121
  ('!x', '{"x": "z"}', false),                    -- :122
  ('x>1', '{"x": "0"}', false),                   -- :123
  ('x<1', '{"x": "2"}', false),                   -- :124
  ('foo=bar', '{"foo": "bar", "baz": "blah"}', true),      -- :130
  ('baz=blah', '{"foo": "bar", "baz": "blah"}', true),     -- :131
  ('foo=bar,baz=blah', '{"foo": "bar", "baz": "blah"}', true), -- :132
  ('foo=blah', '{"foo": "bar", "baz": "blah"}', false),    -- :133
  ('baz=bar', '{"foo": "bar", "baz": "blah"}', false),     -- :134
  ('foo=bar,foobar=bar,baz=blah', '{"foo": "bar", "baz": "blah"}', false), -- :135
  ('', '{"foo": "bar", "baz": "blah"}', true),             -- :156 Set{}
  ('x in (foo),y notin (alpha)', '{"x": "foo", "y": "baz"}', true),  -- :389
  ('x in (foo),y in (alpha)', '{"x": "foo", "y": "baz"}', false),    -- :393
  ('x notin (),y', '{"y": ""}', true),            -- :397
  ('!x,y', '{"y": ""}', true),                    -- :401
  ('x notin (),!y', '{"y": ""}', false),          -- :405
  ('x in ()', '{"y": "baz"}', false),             -- :409
  ('z>1', '{"z": "2"}', true),                    -- :412
  ('z>1', '{"z": "v2"}', false),                  -- :415
  -- not from the tests: notin of an absent key, empty values, == and in
  ('x notin (a,b)', '{}', true),
  ('x notin (a,b)', '{"x": "a"}', false),
  ('x in (a,b)', '{"x": "b"}', true),
  ('x==a', '{"x": "a"}', true),
  ('x=', '{"x": ""}', true),
  ('x=', '{}', false),
  ('x<10', '{"x": "-3"}', true),
  ('x>9223372036854775806', '{"x": "9223372036854775807"}', true),
  ('x>1', '{"x": "99999999999999999999"}', false),
  ('x', '["x"]', false),                          -- labels not an object: no labels
  ('!x', '{"x": null}', false)                    -- a key with a non-string value exists
  ) v(sel, labels, want);

-- TestLexer (:186-218), TestLexerSequence (:228-263), TestParserLookahead
-- (:264-299): the tokens as a selector's validity shows them
SELECT s, sel_error(s) FROM (VALUES
  (','), ('notin'), ('in'), ('='), ('=='), ('>'), ('<'), ('!'), ('!='), ('('), (')'),
  ('~'), ('||'),                                  -- :191-206
  ('key in ( value )'), ('key notin ( value )'), ('key in ( value1, value2 )'),
  ('key'), ('!key'), ('()'), ('x in (),y'), ('== != (), = notin'), ('key>2'),
  ('key<1')                                       -- :233-242
  ) v(s);

-- TestSetSelectorParser (selector_test.go:426-525): In, and whether valid
SELECT s, sel_error(s) FROM (VALUES
  (''), (E'\rx'), ('this-is-a-dns.domain.com/key-with-dash'),
  ('this-is-another-dns.domain.com/key-with-dash in (so,what)'),
  ('0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)'), (E'foo  in\t (abc)'),
  (E'x notin\n (abc)'), (E'x  notin\t\t\t(abc,def)'), ('x in (abc,def)'), ('x in (abc,)'),
  ('x in ()'), ('x notin (abc,,def),bar,z in (),w'), ('x,y in (a)'), ('x=a'), ('x>1'),
  ('x<7'), ('x=a,y!=b'), ('x=a,y!=b,z in (h,i,j)'), ('x=a||y=b'), ('x,,y'), (',x,y'),
  ('x nott in (y)'), ('x notin ( )'), ('x notin (, a)'), ('a in (xyz),'),
  ('a in (xyz)b notin ()'), ('a '), ('a in (x,y,notin, z,in)'), ('a in (xyz abc)'),
  ('a notin('), ('a ('), ('(')
  ) v(s);
-- their parsed values, as matches show them (:458-469, :496-509)
SELECT kwatch.matches_labels('{"x": ""}', 'x in (abc,)') AS "x in (abc,) has ''",
       kwatch.matches_labels('{"x": ""}', 'x notin (, a)') AS "x notin (, a) on x=''",
       kwatch.matches_labels('{"x": "def"}', 'x notin (abc,,def),bar,z in (),w') AS "has def",
       kwatch.matches_labels('{"bar": "", "w": "", "z": "", "x": "q"}',
                             'x notin (abc,,def),bar,z in (),w') AS "all four",
       kwatch.matches_labels('{"a": "notin"}', 'a in (x,y,notin, z,in)') AS "notin a value";

-- TestRequirementConstructor (selector_test.go:301-329), as selectors
SELECT s, sel_error(s) FROM (VALUES
  ('x in (foo)'), ('x notin (foo)'), ('x'), ('!x'), ('1foo in (bar)'), ('1234 in (bar)'),
  ('y>1'), ('z<6'), ('foo>bar'), ('barz<blah'),   -- :310-319
  (repeat('a', 254))                              -- :320 a key over 63 characters
  ) v(s);
-- TestValidatedSelectorFromSet (:712-740): a value over 63 characters
SELECT sel_error('Key=axahm2EJ8Phiephe2eixohbee9eGeiyees1thuozi1xoh0GiuH3diewi8iem7Nui');

-- key and value validation (util/validation: IsQualifiedName, IsValidLabelValue)
SELECT s, sel_error(s) FROM (VALUES
  ('app.kubernetes.io/name=web'), ('a/b/c'), ('/a'), ('example.com/'), ('Example.com/a'),
  ('-a'), ('a_b.c-d=A_b.c-D'), ('a=-b'), ('a=b-'), (repeat('a', 63) || '=' || repeat('b', 63)),
  (repeat('a', 64)), ('a=' || repeat('b', 64)), (repeat('p', 254) || '/a'), ('a"b'),
  ('x in (b@, a@)')
  ) v(s);

-- the whole error: message, DETAIL with the character, HINT
\set VERBOSITY default
SELECT kwatch.matches_labels('{}', 'app=web,tier!=db,,x');
SELECT kwatch.matches_labels('{}', 'app in (web');
SELECT kwatch.matches_labels('{}', '{"matchLabels": {"app": "web"}}');
SELECT kwatch.matches_labels('{}', '{"matchExpressions": [{"key": "tier", "operator": "in", "values": ["db"]}]}'::jsonb);
-- what is echoed of a long selector is cut (kw_excerpt: 300 bytes)
SELECT kwatch.matches_labels('{}', 'app=web,' || repeat('x', 400) || ' in (a');
\set VERBOSITY terse
SELECT length(sel_error(repeat('(', 100000))) AS "found '(((...'",
       length(sel_error(repeat('a', 100000))) AS "invalid key aaa...",
       length(sel_error('a=' || repeat('b', 100000))) AS "invalid value bbb...";

-- a LabelSelector (metav1): TestLabelSelectorAsSelector (apis/meta/v1/helpers_test.go:31-94)
SELECT sel, labels, want, kwatch.matches_labels(labels::jsonb, sel::jsonb) AS got,
       CASE WHEN kwatch.matches_labels(labels::jsonb, sel::jsonb) IS NOT DISTINCT FROM want
            THEN 'ok' ELSE 'WRONG' END AS "?"
  FROM (VALUES
  (NULL, '{"foo": "bar"}', false),                -- :50 nil: Nothing
  ('null', '{"foo": "bar"}', false),
  ('{}', '{"foo": "bar"}', true),                 -- :51 Everything
  ('{}', '{}', true),
  ('{"matchLabels": {}, "matchExpressions": []}', '{}', true),
  ('{"matchLabels": {"foo": "bar"}}', '{"foo": "bar"}', true),   -- :53 foo=bar
  ('{"matchLabels": {"foo": "bar"}}', '{"foo": "baz"}', false),
  ('{"matchExpressions": [{"key": "baz", "operator": "In", "values": ["qux", "norf"]}]}',
   '{"baz": "norf"}', true),                      -- :57 baz in (norf,qux)
  ('{"matchExpressions": [{"key": "baz", "operator": "In", "values": ["qux", "norf"]}]}',
   '{"baz": "x"}', false),
  ('{"matchLabels": {"foo": "bar"}, "matchExpressions": [{"key": "baz", "operator": "In", "values": ["qux", "norf"]}]}',
   '{"foo": "bar", "baz": "qux"}', true),         -- :61 baz in (norf,qux),foo=bar
  ('{"matchLabels": {"foo": "bar"}, "matchExpressions": [{"key": "baz", "operator": "In", "values": ["qux", "norf"]}]}',
   '{"baz": "qux"}', false),
  ('{"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}]}', '{}', true),
  ('{"matchExpressions": [{"key": "tier", "operator": "Exists"}]}', '{"tier": ""}', true),
  ('{"matchExpressions": [{"key": "tier", "operator": "DoesNotExist", "values": []}]}', '{"tier": ""}', false),
  ('{"matchLabels": {"app": "web"}}', NULL, NULL)  -- NULL labels: NULL
  ) v(sel, labels, want);
SELECT s, sel_error(s::jsonb) FROM (VALUES
  ('{"matchExpressions": [{"key": "baz", "operator": "Exists", "values": ["qux", "norf"]}]}'), -- :65-73
  ('{"matchExpressions": [{"key": "baz", "operator": "In", "values": []}]}'),
  ('{"matchExpressions": [{"key": "baz", "operator": "NotIn"}]}'),
  ('{"matchExpressions": [{"key": "baz", "operator": "Gt", "values": ["1"]}]}'),
  ('{"matchExpressions": [{"operator": "Exists"}]}'),
  ('{"matchExpressions": [{"key": "a", "operator": "In", "values": ["ok", "-bad"]}]}'),
  ('{"matchLabels": {"app": "we b"}}'),
  ('{"matchLabels": {"app": 1}}'),
  ('{"matchLabels": []}'),
  ('{"matchExpressions": {}}'),
  ('[]'),
  ('"app=web"'),
  ('{"matchLabels": null, "other": 1}')
  ) v(s);

-- a Service's spec.selector: equalities; none (NULL, null, {}) selects nothing
SELECT sel, kwatch.matches_service_selector('{"app": "web", "tier": "fe"}', sel::jsonb)
  FROM (VALUES ('{"app": "web"}'), ('{"app": "web", "tier": "db"}'), ('{}'), ('null'), (NULL)) v(sel);

-- the index: a constant selector's equalities become labels @> ..., which
-- the GIN index (jsonb_path_ops, as on mirror tables) serves; the rest is
-- a filter
CREATE TABLE pods (name text, labels jsonb);
CREATE INDEX pods_labels ON pods USING gin (labels jsonb_path_ops);
INSERT INTO pods
  SELECT 'p' || i, jsonb_strip_nulls(jsonb_build_object(
           'app', (ARRAY['web', 'api', 'db'])[i % 3 + 1],
           'tier', CASE WHEN i % 4 = 0 THEN NULL ELSE (ARRAY['db', 'fe', 'cache'])[i % 3 + 1] END,
           'pod-template-hash', 'h' || (i % 7)))
    FROM generate_series(1, 300) i;
ANALYZE pods;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT name FROM pods WHERE kwatch.matches_labels(labels, 'app=web,tier!=db');
EXPLAIN (COSTS OFF) SELECT name FROM pods WHERE kwatch.matches_labels(labels, 'app==web,pod-template-hash in (h1)');
EXPLAIN (COSTS OFF) SELECT name FROM pods WHERE kwatch.matches_labels(labels, 'app=web,app=api');
EXPLAIN (COSTS OFF) SELECT name FROM pods
  WHERE kwatch.matches_labels(labels, '{"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db", "cache"]}]}'::jsonb);
EXPLAIN (COSTS OFF) SELECT name FROM pods WHERE kwatch.matches_service_selector(labels, '{"app": "web"}');
-- nothing to serve: no rewrite
EXPLAIN (COSTS OFF) SELECT name FROM pods WHERE kwatch.matches_labels(labels, 'tier notin (db),app in (web,api)');
-- pg_catalog's @> whatever the caller's search_path: an operator of the
-- caller's own schema first changes neither the rewrite nor the service
-- selector's body
CREATE SCHEMA sel_hijack;
CREATE FUNCTION sel_hijack.contains(jsonb, jsonb) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT true';
CREATE OPERATOR sel_hijack.@> (function = sel_hijack.contains, leftarg = jsonb, rightarg = jsonb);
SET search_path = sel_hijack, pg_catalog, public;
SELECT count(*) FROM pods WHERE kwatch.matches_labels(labels, 'app=web');
SELECT count(*) FROM pods WHERE kwatch.matches_service_selector(labels, '{"app": "web"}');
SELECT kwatch.matches_service_selector('{"app": "db"}', '{"app": "web"}');
RESET search_path;
DROP SCHEMA sel_hijack CASCADE;
RESET enable_seqscan;
-- the same rows as without the rewrite: the selector as a constant
-- (rewritten) and as a value the planner cannot see
CREATE FUNCTION count_both(sel text, OUT rewritten bigint, OUT plain bigint) LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('SELECT count(*) FROM pods WHERE kwatch.matches_labels(labels, %L)', sel) INTO rewritten;
  SELECT count(*) INTO plain FROM pods WHERE kwatch.matches_labels(labels, (SELECT sel));
END $$;
SELECT sel, (count_both(sel)).* FROM (VALUES ('app=web,tier!=db'), ('app==web,pod-template-hash in (h1)'),
  ('app=web,app=api'), ('app in (web),tier'), ('app=web,!tier'), ('app in (web,db),tier notin (db)')) v(sel);
SELECT (SELECT count(*) FROM pods WHERE kwatch.matches_labels(labels,
          '{"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}'::jsonb)) AS rewritten,
       (SELECT count(*) FROM pods WHERE kwatch.matches_labels(labels, (SELECT
          '{"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}'::jsonb))) AS plain;
-- a selector that is no constant (a join's, a parameter): the index
-- condition labels @> kwatch._label_selector_equalities(selector), lossy,
-- evaluated per scan (here per Deployment)
CREATE TABLE deployments (name text, selector jsonb, selector_text text);
INSERT INTO deployments VALUES
  ('web', '{"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}]}', 'app=web,tier!=db'),
  ('api', '{"matchLabels": {"app": "api", "pod-template-hash": "h2"}}', 'app=api,pod-template-hash=h2'),
  ('any-db', '{"matchExpressions": [{"key": "tier", "operator": "In", "values": ["db"]}]}', 'tier in (db)'),
  ('none', 'null', NULL),
  ('all', '{}', '');
ANALYZE deployments;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT d.name, p.name FROM deployments d
  JOIN pods p ON kwatch.matches_labels(p.labels, d.selector) WHERE d.name = 'web';
EXPLAIN (COSTS OFF) SELECT d.name, p.name FROM deployments d
  JOIN pods p ON kwatch.matches_labels(p.labels, d.selector_text) WHERE d.name = 'web';
PREPARE by_selector(text) AS SELECT count(*) FROM pods WHERE kwatch.matches_labels(labels, $1);
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE by_selector('app=web');
EXECUTE by_selector('app=web,tier!=db');
EXECUTE by_selector('tier!=db');
RESET plan_cache_mode;
DEALLOCATE by_selector;
-- the same pairs by the index as without it
SELECT d.name,
       (SELECT count(*) FROM pods p WHERE kwatch.matches_labels(p.labels, d.selector)) AS by_index,
       (SELECT count(*) FROM pods p WHERE kwatch.matches_labels(p.labels, d.selector_text)) AS by_text,
       (SELECT count(*) FROM pods p WHERE kwatch.matches_labels(p.labels || '{}', d.selector)) AS without
  FROM deployments d ORDER BY d.name;
RESET enable_seqscan;
SELECT kwatch._label_selector_equalities('app=web,tier!=db,x in (a),y in (a,b)'),
       kwatch._label_selector_equalities('!x'),
       kwatch._label_selector_equalities('{"matchLabels": {"a": "b"}}'::jsonb),
       kwatch._label_selector_equalities('null'::jsonb);
DROP TABLE deployments;

-- and in the planner's every pass: a view, a prepared statement
CREATE VIEW web_pods AS SELECT name FROM pods WHERE kwatch.matches_labels(labels, 'app=web,tier!=db');
SELECT count(*) FROM web_pods;
PREPARE q(text) AS SELECT count(*) FROM pods WHERE kwatch.matches_labels(labels, $1);
EXECUTE q('app=web,tier!=db');
DROP VIEW web_pods;
DROP TABLE pods;
-- a live table (no cluster contacted: EXPLAIN only): the rewritten
-- equalities are sent as the request's labelSelector, the rest is a filter
CREATE SERVER sel_nowhere FOREIGN DATA WRAPPER kwatch
  OPTIONS (api_server 'https://127.0.0.1:1', use_remote_estimate 'false');
CREATE FOREIGN TABLE sel_live_pods (namespace text, name text, labels jsonb)
  SERVER sel_nowhere OPTIONS (resource 'pods', api_version 'v1', namespaced 'true');
EXPLAIN (COSTS OFF) SELECT name FROM sel_live_pods WHERE kwatch.matches_labels(labels, 'app=web,tier!=db');
DROP SERVER sel_nowhere CASCADE;
-- under row-level security (kwatch.enable_rbac_rows, doc/security.md): the call
-- stays a call, LEAKPROOF, so its equalities are still the GIN index's
-- condition ahead of the policy; jsonb's @> written by hand is not
-- LEAKPROOF, so it is no index condition there.  A selector computed from
-- a row never raises (it selects nothing); a constant one does.
CREATE TABLE rls_pods (namespace text, name text, labels jsonb);
CREATE INDEX rls_pods_labels ON rls_pods USING gin (labels jsonb_path_ops);
INSERT INTO rls_pods SELECT 'ns' || (i % 5), 'p' || i,
       jsonb_build_object('app', CASE WHEN i % 2 = 0 THEN 'web' ELSE 'api' END)
  FROM generate_series(1, 200) i;
ANALYZE rls_pods;
CREATE FUNCTION rls_visible(ns text) RETURNS boolean LANGUAGE plpgsql STABLE
  AS $$ BEGIN RETURN ns <> 'ns0'; END $$;
ALTER TABLE rls_pods ENABLE ROW LEVEL SECURITY;
CREATE POLICY rls_visible ON rls_pods FOR SELECT USING (rls_visible(namespace));
CREATE ROLE kw_rls_reader;
GRANT SELECT ON rls_pods TO kw_rls_reader;
SET ROLE kw_rls_reader;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT name FROM rls_pods WHERE kwatch.matches_labels(labels, 'app=web');
EXPLAIN (COSTS OFF) SELECT name FROM rls_pods
 WHERE kwatch.matches_labels(labels, '{"matchLabels": {"app": "web"}}'::jsonb);
SELECT count(*) FROM rls_pods WHERE kwatch.matches_labels(labels, 'app=web');
SELECT count(*) FROM rls_pods WHERE kwatch.matches_labels(labels, 'app=web,app!=api');
EXPLAIN (COSTS OFF) SELECT name FROM rls_pods WHERE labels @> '{"app": "web"}';
RESET enable_seqscan;
SELECT s, kwatch.matches_labels(l, s)
  FROM (VALUES ('{"app": "web"}'::jsonb, 'app=web'), ('{"x": "a"}', 'x=a||y=b')) v(l, s);
SELECT kwatch.matches_labels('{}', 'x=a||y=b');
RESET ROLE;
DROP TABLE rls_pods;
DROP FUNCTION rls_visible(text);
DROP ROLE kw_rls_reader;
DROP FUNCTION sel_error(text);
DROP FUNCTION sel_error(jsonb);
DROP FUNCTION count_both(text);
