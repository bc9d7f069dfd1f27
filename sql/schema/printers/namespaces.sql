-- ---------------------------------------------------------------------
-- Namespaces: printers.go printNamespace
-- ---------------------------------------------------------------------

-- namespace_status(object jsonb) -> text: STATUS, status.phase ("" when
-- unset).  printers.go printNamespace.
CREATE OR REPLACE FUNCTION kwatch.namespace_status(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(object->'status'->>'phase', '') $$;
COMMENT ON FUNCTION kwatch.namespace_status(jsonb) IS
'Namespace STATUS cell: status.phase. printers.go printNamespace.';
