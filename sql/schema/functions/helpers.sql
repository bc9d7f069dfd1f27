-- ---------------------------------------------------------------------
-- Helpers of the functions that act for a role: who called
-- (_caller, _acts_for), running a statement as a table's owner
-- (_execute_as_owner, _owned_by_superuser), echoing input in an error
-- (_excerpt); and the redaction of Secrets (redact_secret).
-- ---------------------------------------------------------------------

-- redact_secret(object jsonb) -> jsonb: the Secret `object` with each value
-- of data and stringData, and the annotation
-- kubectl.kubernetes.io/last-applied-configuration, replaced by
-- "<redacted hmac-sha256:HEX>" (keys and everything else kept).  Not for
-- PUBLIC: with it anyone could test a guess against a stored digest.
-- Errors: invalid_parameter_value when object is not a JSON object.
CREATE OR REPLACE FUNCTION kwatch.redact_secret(object jsonb) RETURNS jsonb
    LANGUAGE c STRICT
    AS 'MODULE_PATHNAME', 'kwatch_redact_secret';
REVOKE ALL ON FUNCTION kwatch.redact_secret(jsonb) FROM PUBLIC;

-- _caller() -> oid: the role that called watch/unwatch/relist/history
-- (src/functions/privileged.c), for the checks of their implementations.
CREATE OR REPLACE FUNCTION kwatch._caller() RETURNS oid
    LANGUAGE c STRICT
    AS 'MODULE_PATHNAME', 'kwatch_caller';
REVOKE ALL ON FUNCTION kwatch._caller() FROM PUBLIC;

-- _execute_as_owner(rel, sql) -> bigint: runs `sql` as the owner of `rel`
-- under SECURITY_RESTRICTED_OPERATION (src/apply/sync.c); for kwatch's own
-- statements that read or alter a role's mirror table.  Returns the number
-- of rows processed.
CREATE OR REPLACE FUNCTION kwatch._execute_as_owner(rel regclass, sql text) RETURNS bigint
    LANGUAGE c STRICT
    AS 'MODULE_PATHNAME', 'kwatch_execute_as_owner';

SET default_tablespace = '';

SET default_table_access_method = heap;
REVOKE ALL ON FUNCTION kwatch._execute_as_owner(regclass, text) FROM PUBLIC;

-- _excerpt(s) -> text: `s` for an error message that echoes it: at most
-- 300 characters, marked "... (N characters, cut)" when longer (the C
-- side's kw_excerpt, src/cluster/http.c).  NULL stays NULL.
CREATE OR REPLACE FUNCTION kwatch._excerpt(s text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT CASE WHEN length(s) > 300 THEN left(s, 300) || format('... (%s characters, cut)', length(s))
              ELSE s END
$$;
REVOKE ALL ON FUNCTION kwatch._excerpt(text) FROM PUBLIC;

-- _owned_by_superuser(rel) -> boolean: whether a superuser owns `rel`
-- (so that kwatch may run the table owner's code, a trigger say, with a
-- superuser's rights: its owner's own); false when `rel` does not exist.
CREATE OR REPLACE FUNCTION kwatch._owned_by_superuser(rel regclass) RETURNS boolean
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT COALESCE((SELECT a.rolsuper FROM pg_class c JOIN pg_roles a ON a.oid = c.relowner
                   WHERE c.oid = rel), false)
$$;
REVOKE ALL ON FUNCTION kwatch._owned_by_superuser(regclass) FROM PUBLIC;

-- _acts_for(caller, owner) -> boolean: whether role `caller` may act for
-- the watches of role `owner`: a superuser, or a role with the privileges
-- of `owner` (USAGE); false when `owner` no longer exists.  The one test
-- watch() and _find_watch() use to tell the caller's own watches from
-- another role's.
CREATE OR REPLACE FUNCTION kwatch._acts_for(caller oid, owner oid) RETURNS boolean
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT COALESCE((SELECT a.rolsuper FROM pg_roles a WHERE a.oid = caller), false)
         OR (EXISTS (SELECT 1 FROM pg_roles a WHERE a.oid = owner)
             AND pg_has_role(caller, owner, 'USAGE'))
$$;
REVOKE ALL ON FUNCTION kwatch._acts_for(oid, oid) FROM PUBLIC;
