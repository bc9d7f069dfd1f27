-- ---------------------------------------------------------------------
-- Secrets: printers.go printSecret
-- ---------------------------------------------------------------------

-- secret_type(object jsonb) -> text: TYPE, type.  printers.go printSecret.
CREATE OR REPLACE FUNCTION kwatch.secret_type(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(object->>'type', '') $$;
COMMENT ON FUNCTION kwatch.secret_type(jsonb) IS
'Secret TYPE cell. printers.go printSecret.';

-- secret_data(object jsonb) -> bigint: DATA, len(data).  printers.go
-- printSecret.
CREATE OR REPLACE FUNCTION kwatch.secret_data(object jsonb) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT kwatch._printer_count(object->'data')::bigint $$;
COMMENT ON FUNCTION kwatch.secret_data(jsonb) IS
'Secret DATA cell: number of data keys. printers.go printSecret.';
