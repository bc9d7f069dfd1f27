--
-- yaml_manifest: a manifest's text -> the objects kwatch.apply(text) applies
-- (src/decode/yaml_manifest.c), seen through kwatch.manifest_objects(), and
-- which kwatch.apply() an argument calls.  kubectl's own reading of YAML is
-- compared in test/integration/test_apply_yaml.py; these are the cases that
-- need no server.
--
CREATE EXTENSION IF NOT EXISTS kwatch;
-- several documents, empty ones skipped, a List flattened, JSON as JSON
SELECT o FROM kwatch.manifest_objects($$
apiVersion: v1
kind: ConfigMap
metadata: {name: a}
data: {k: v}
---
---
# a comment only
---
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}
- {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}
$$) o;
SELECT o FROM kwatch.manifest_objects('  {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "j"}, "data": {"n": "1"}}') o;
SELECT count(*) FROM kwatch.manifest_objects(E'# nothing\n---\n~\n');
-- YAML 1.1 scalars
SELECT o->'spec' FROM kwatch.manifest_objects($$
spec:
  b: [yes, No, ON, off, y, N, yEs]
  nulls: [~, null, "", NULL]
  n: the key n is false, as in kubectl
  e:
  i: [0777, 0o17, 0x1F, 0b11, 1_000, -0x10, 08, 9223372036854775808]
  f: [1.5e3, .5, 1., 1e-7, 1e400]
  t: [2001-12-14t21:59:43.10-05:00, 2002-12-14]
  s: ["yes", '0x1F', !!str 12, ! 12, 1.2.3, +]
  block: |
    two
    lines
  k: {1: a, 1.5: b, 1e6: c, true: d}
  m:
    base: &b {a: 1, b: 2}
    merged: {<<: *b, b: 3}
    before: {b: 3, <<: *b}
$$) o;
-- errors: syntax (line, column), values JSON cannot hold, keys, aliases, depth, not an object
SELECT kwatch.manifest_objects(E'kind: ConfigMap\nmetadata:\n  name: [a\n');
SELECT kwatch.manifest_objects(E'kind: ConfigMap\ndata: {a: b}}\n');
SELECT kwatch.manifest_objects('a: .inf');
SELECT kwatch.manifest_objects('a: -.Inf');
SELECT kwatch.manifest_objects('a: .NaN');
SELECT kwatch.manifest_objects('~: 1');
SELECT kwatch.manifest_objects('? [a]: 1');
SELECT kwatch.manifest_objects('a: !!int abc');
SELECT kwatch.manifest_objects('a: *nothing');
SELECT kwatch.manifest_objects('a: &x [*x]');
SELECT kwatch.manifest_objects('a: {<<: [1]}');
SELECT kwatch.manifest_objects('a: ' || repeat('[', 600));
SELECT kwatch.manifest_objects(E'- a\n- b\n');
SELECT kwatch.manifest_objects(E'a: 1\n---\njust text\n');
SELECT kwatch.manifest_objects(E'kind: List\nitems: [1]\n');
SELECT kwatch.manifest_objects(E'a: "nul \\0 here"');
SELECT kwatch.manifest_objects('{"a": ');
-- aliases that expand without end are bounded
SELECT count(*) FROM kwatch.manifest_objects($$
a: &a [x, x, x, x, x, x, x, x, x, x]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]
$$);
-- so do merges of empty mappings, which push no value (else 10^9 merges,
-- not cancellable)
SELECT count(*) FROM kwatch.manifest_objects($$
e0: &e0 {}
e1: &e1 {<<: [*e0, *e0, *e0, *e0, *e0, *e0, *e0, *e0, *e0, *e0]}
e2: &e2 {<<: [*e1, *e1, *e1, *e1, *e1, *e1, *e1, *e1, *e1, *e1]}
e3: &e3 {<<: [*e2, *e2, *e2, *e2, *e2, *e2, *e2, *e2, *e2, *e2]}
e4: &e4 {<<: [*e3, *e3, *e3, *e3, *e3, *e3, *e3, *e3, *e3, *e3]}
e5: &e5 {<<: [*e4, *e4, *e4, *e4, *e4, *e4, *e4, *e4, *e4, *e4]}
e6: &e6 {<<: [*e5, *e5, *e5, *e5, *e5, *e5, *e5, *e5, *e5, *e5]}
e7: &e7 {<<: [*e6, *e6, *e6, *e6, *e6, *e6, *e6, *e6, *e6, *e6]}
e8: &e8 {<<: [*e7, *e7, *e7, *e7, *e7, *e7, *e7, *e7, *e7, *e7]}
e9: &e9 {<<: [*e8, *e8, *e8, *e8, *e8, *e8, *e8, *e8, *e8, *e8]}
$$);
-- which kwatch.apply(): an untyped literal the text one, jsonb the jsonb one
SELECT p.oid::regprocedure, p.proretset
  FROM pg_proc p WHERE p.proname = 'apply' AND p.pronamespace = 'kwatch'::regnamespace ORDER BY p.proretset;
EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM kwatch.apply('{"apiVersion": "v1"}');
EXPLAIN (VERBOSE, COSTS OFF) SELECT kwatch.apply('{"apiVersion": "v1"}'::jsonb);
EXPLAIN (VERBOSE, COSTS OFF) SELECT (kwatch.apply($$apiVersion: v1$$, dry_run => true)).id;
-- the text form calls the jsonb one as the caller would: its EXECUTE privilege holds
CREATE ROLE kw_yaml_user;
REVOKE EXECUTE ON FUNCTION kwatch.apply(jsonb, text, text, boolean, boolean, text, interval) FROM PUBLIC;
SET ROLE kw_yaml_user;
SELECT * FROM kwatch.apply(E'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n');
RESET ROLE;
GRANT EXECUTE ON FUNCTION kwatch.apply(jsonb, text, text, boolean, boolean, text, interval) TO PUBLIC;
DROP ROLE kw_yaml_user;
-- the CONTEXT names the document: here the jsonb form's own check (no metadata.name)
SELECT * FROM kwatch.apply(E'---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {}\n');
-- a manifest of no object, before anything else
SELECT * FROM kwatch.apply(E'---\n# nothing\n');
SELECT * FROM kwatch.apply('a: [');
