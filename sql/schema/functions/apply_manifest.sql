-- kwatch.apply(manifest text, server, field_manager, force, dry_run, at,
-- deadline) -> SETOF apply_result: a manifest as `kubectl apply -f` takes
-- it: YAML (several documents separated by ---, converted to JSON with
-- kubectl's YAML 1.1 rules) or JSON; empty documents are skipped and a
-- List gives its items.  Each object is applied in order by
-- kwatch.apply(manifest jsonb, ...) with the same other arguments, one
-- row each.  An untyped literal calls this one (text is the preferred
-- type of its category); '...'::jsonb the jsonb one.  At 'commit' all
-- objects are queued in the caller's transaction (an error leaves none);
-- at 'now' they are sent in order and the first failure raises, the
-- earlier ones staying applied.  ERRORs: 22P02 a YAML syntax error (its
-- line and column) or a value JSON cannot hold (.inf, .nan); 22023 a
-- document that is not an object, or no object at all; 54000 nesting
-- deeper than 512 levels, aliases expanding past 2,000,000 values, or
-- an anchor name over 127 bytes; 42501 without EXECUTE on the jsonb
-- form; and
-- each object's, as the jsonb form raises them, with a CONTEXT line
-- naming its document (number, line), kind and name.
CREATE FUNCTION kwatch.apply(manifest text, server text DEFAULT NULL::text, field_manager text DEFAULT 'kwatch'::text, force boolean DEFAULT false, dry_run boolean DEFAULT false, at text DEFAULT 'commit'::text, deadline interval DEFAULT '00:10:00'::interval) RETURNS SETOF kwatch.apply_result
    LANGUAGE c ROWS 1
    AS 'MODULE_PATHNAME', 'kwatch_apply_text';

-- kwatch.manifest_objects(manifest text) -> SETOF jsonb: the objects
-- kwatch.apply(manifest text) would apply, in order, as JSON (no request
-- is made): what `kubectl create --dry-run=client -o json -f` prints.
-- ERRORs as the conversion of kwatch.apply(manifest text).
CREATE FUNCTION kwatch.manifest_objects(manifest text) RETURNS SETOF jsonb
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'kwatch_manifest_objects';
