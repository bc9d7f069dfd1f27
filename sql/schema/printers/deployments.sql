-- ---------------------------------------------------------------------
-- Deployments: printers.go printDeployment.  The integers are int64
-- cells; unset counts are 0, as the internal types hold them.  The wide
-- CONTAINERS and IMAGES cells follow layoutContainerCells, SELECTOR
-- FormatLabelSelector (a Deployment's: the selector's String()).
-- ---------------------------------------------------------------------

-- deployment_ready(object jsonb) -> text: READY, "readyReplicas/replicas".
-- printers.go printDeployment.
CREATE OR REPLACE FUNCTION kwatch.deployment_ready(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(kwatch._printer_int(object->'status'->'readyReplicas'), 0) || '/' || COALESCE(kwatch._printer_int(object->'spec'->'replicas'), 0) $$;
COMMENT ON FUNCTION kwatch.deployment_ready(jsonb) IS
'Deployment READY cell "ready/desired". printers.go printDeployment.';

-- deployment_up_to_date(object jsonb) -> bigint: UP-TO-DATE,
-- status.updatedReplicas.  printers.go printDeployment.
CREATE OR REPLACE FUNCTION kwatch.deployment_up_to_date(object jsonb) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(kwatch._printer_int(object->'status'->'updatedReplicas'), 0) $$;
COMMENT ON FUNCTION kwatch.deployment_up_to_date(jsonb) IS
'Deployment UP-TO-DATE cell: status.updatedReplicas. printers.go printDeployment.';

-- deployment_available(object jsonb) -> bigint: AVAILABLE,
-- status.availableReplicas.  printers.go printDeployment.
CREATE OR REPLACE FUNCTION kwatch.deployment_available(object jsonb) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(kwatch._printer_int(object->'status'->'availableReplicas'), 0) $$;
COMMENT ON FUNCTION kwatch.deployment_available(jsonb) IS
'Deployment AVAILABLE cell: status.availableReplicas. printers.go printDeployment.';

-- deployment_containers(object jsonb) -> text: CONTAINERS (wide), the names
-- of the pod template's containers joined with ",".  printers.go
-- printDeployment (layoutContainerCells).
CREATE OR REPLACE FUNCTION kwatch.deployment_containers(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT kwatch._printer_container_cells(object->'spec'->'template'->'spec'->'containers', 'name') $$;
COMMENT ON FUNCTION kwatch.deployment_containers(jsonb) IS
'Deployment CONTAINERS cell (wide): container names joined with ",". printers.go printDeployment.';

-- deployment_images(object jsonb) -> text: IMAGES (wide), the images of the
-- pod template's containers joined with ",".  printers.go printDeployment
-- (layoutContainerCells).
CREATE OR REPLACE FUNCTION kwatch.deployment_images(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT kwatch._printer_container_cells(object->'spec'->'template'->'spec'->'containers', 'image') $$;
COMMENT ON FUNCTION kwatch.deployment_images(jsonb) IS
'Deployment IMAGES cell (wide): container images joined with ",". printers.go printDeployment.';

-- deployment_selector(object jsonb) -> text: SELECTOR (wide), spec.selector
-- as "k=v,k in (a,b),...": labels.Selector's String() itself, so "" (not
-- "<none>") for a nil or empty selector, and "<invalid>" for an invalid
-- one.  printers.go printDeployment (current release; 1.20's
-- printDeployment fails on an invalid selector, which validation rejects on
-- write).
CREATE OR REPLACE FUNCTION kwatch.deployment_selector(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(kwatch._printer_label_selector(object->'spec'->'selector'), '<invalid>') $$;
COMMENT ON FUNCTION kwatch.deployment_selector(jsonb) IS
'Deployment SELECTOR cell (wide): spec.selector as "k=v,...", "" when nil or empty, "<invalid>". printers.go printDeployment.';
