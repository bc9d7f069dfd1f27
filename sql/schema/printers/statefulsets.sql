-- ---------------------------------------------------------------------
-- StatefulSets: printers.go printStatefulSet.  The integers are int64
-- cells; unset counts are 0, as the internal types hold them.  The wide
-- CONTAINERS and IMAGES cells follow layoutContainerCells, SELECTOR
-- FormatLabelSelector.
-- ---------------------------------------------------------------------

-- statefulset_ready(object jsonb) -> text: READY, "readyReplicas/replicas".
-- printers.go printStatefulSet.
CREATE OR REPLACE FUNCTION kwatch.statefulset_ready(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(kwatch._printer_int(object->'status'->'readyReplicas'), 0) || '/' || COALESCE(kwatch._printer_int(object->'spec'->'replicas'), 0) $$;
COMMENT ON FUNCTION kwatch.statefulset_ready(jsonb) IS
'StatefulSet READY cell "ready/desired". printers.go printStatefulSet.';

-- statefulset_containers(object jsonb) -> text: CONTAINERS (wide), the
-- names of the pod template's containers joined with ",".  printers.go
-- printStatefulSet (layoutContainerCells).
CREATE OR REPLACE FUNCTION kwatch.statefulset_containers(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT kwatch._printer_container_cells(object->'spec'->'template'->'spec'->'containers', 'name') $$;
COMMENT ON FUNCTION kwatch.statefulset_containers(jsonb) IS
'StatefulSet CONTAINERS cell (wide): container names joined with ",". printers.go printStatefulSet.';

-- statefulset_images(object jsonb) -> text: IMAGES (wide), the images of
-- the pod template's containers joined with ",".  printers.go
-- printStatefulSet (layoutContainerCells).
CREATE OR REPLACE FUNCTION kwatch.statefulset_images(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT kwatch._printer_container_cells(object->'spec'->'template'->'spec'->'containers', 'image') $$;
COMMENT ON FUNCTION kwatch.statefulset_images(jsonb) IS
'StatefulSet IMAGES cell (wide): container images joined with ",". printers.go printStatefulSet.';
