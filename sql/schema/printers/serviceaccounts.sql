-- ---------------------------------------------------------------------
-- ServiceAccounts: printers.go printServiceAccount
-- ---------------------------------------------------------------------

-- serviceaccount_secrets(object jsonb) -> bigint: SECRETS, len(secrets).
-- printers.go printServiceAccount.
CREATE OR REPLACE FUNCTION kwatch.serviceaccount_secrets(object jsonb) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT kwatch._printer_count(object->'secrets')::bigint $$;
COMMENT ON FUNCTION kwatch.serviceaccount_secrets(jsonb) IS
'ServiceAccount SECRETS cell: number of secrets references. printers.go printServiceAccount.';
