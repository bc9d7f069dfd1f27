-- ---------------------------------------------------------------------
-- ConfigMaps: printers.go printConfigMap
-- ---------------------------------------------------------------------

-- configmap_data(object jsonb) -> bigint: DATA, len(data) + len(binaryData).
-- printers.go printConfigMap.
CREATE OR REPLACE FUNCTION kwatch.configmap_data(object jsonb) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT (kwatch._printer_count(object->'data') + kwatch._printer_count(object->'binaryData'))::bigint $$;
COMMENT ON FUNCTION kwatch.configmap_data(jsonb) IS
'ConfigMap DATA cell: number of data + binaryData keys. printers.go printConfigMap.';
