-- kwatch 0.3.0 -> 0.4.0: the generated columns' functions in C (issue 10).
--
-- Every row a watch writes computes its generated columns; as SQL and
-- PL/pgSQL functions (which PostgreSQL cannot inline there) these cost a
-- fifth of an insert into k8s.pods, and the printer-column helpers also
-- set search_path per call and opened a subtransaction per date.  The C
-- versions (src/column_functions.c) keep each function's OID, so the
-- generated columns that call them are unchanged, and its results, except
-- that none raises an error on an odd value: such a value now gives NULL
-- (k8s_timestamp of something not RFC 3339; a restart count that is not a
-- whole number is left out of the sum), where 0.3.0 rejected the row.

\echo Use "ALTER EXTENSION kwatch UPDATE TO '0.4.0'" to load this file. \quit

CREATE OR REPLACE FUNCTION @extschema@.k8s_timestamp(text) RETURNS timestamptz
AS 'MODULE_PATHNAME', 'kwatch_k8s_timestamp'
LANGUAGE C IMMUTABLE PARALLEL SAFE STRICT;

CREATE OR REPLACE FUNCTION @extschema@.pod_restart_count(jsonb) RETURNS integer
AS 'MODULE_PATHNAME', 'kwatch_pod_restart_count'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE OR REPLACE FUNCTION @extschema@.condition_true(jsonb, text) RETURNS boolean
AS 'MODULE_PATHNAME', 'kwatch_condition_true'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE OR REPLACE FUNCTION @extschema@.jsonb_integer(jsonb) RETURNS bigint
AS 'MODULE_PATHNAME', 'kwatch_jsonb_integer'
LANGUAGE C IMMUTABLE PARALLEL SAFE STRICT;

CREATE OR REPLACE FUNCTION @extschema@.jsonb_number(jsonb) RETURNS double precision
AS 'MODULE_PATHNAME', 'kwatch_jsonb_number'
LANGUAGE C IMMUTABLE PARALLEL SAFE STRICT;

CREATE OR REPLACE FUNCTION @extschema@.jsonb_boolean(jsonb) RETURNS boolean
AS 'MODULE_PATHNAME', 'kwatch_jsonb_boolean'
LANGUAGE C IMMUTABLE PARALLEL SAFE STRICT;

CREATE OR REPLACE FUNCTION @extschema@.jsonb_timestamp(jsonb) RETURNS timestamptz
AS 'MODULE_PATHNAME', 'kwatch_jsonb_timestamp'
LANGUAGE C IMMUTABLE PARALLEL SAFE STRICT;
