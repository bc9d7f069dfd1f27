-- ---------------------------------------------------------------------
-- ReplicationControllers: printers.go printReplicationController.  The
-- integers are int64 cells; unset counts are 0, as the internal types
-- hold them.  The wide CONTAINERS and IMAGES cells follow
-- layoutContainerCells, SELECTOR FormatLabelSelector (a
-- ReplicationController's: labels.FormatLabels).
-- ---------------------------------------------------------------------

-- replicationcontroller_desired(object jsonb) -> bigint: DESIRED,
-- spec.replicas (0 when unset, as the internal type holds it; the API
-- server defaults it to 1).  printers.go printReplicationController.
CREATE OR REPLACE FUNCTION kwatch.replicationcontroller_desired(object jsonb) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(kwatch._printer_int(object->'spec'->'replicas'), 0) $$;
COMMENT ON FUNCTION kwatch.replicationcontroller_desired(jsonb) IS
'ReplicationController DESIRED cell: spec.replicas. printers.go printReplicationController.';

-- replicationcontroller_current(object jsonb) -> bigint: CURRENT,
-- status.replicas.  printers.go printReplicationController.
CREATE OR REPLACE FUNCTION kwatch.replicationcontroller_current(object jsonb) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(kwatch._printer_int(object->'status'->'replicas'), 0) $$;
COMMENT ON FUNCTION kwatch.replicationcontroller_current(jsonb) IS
'ReplicationController CURRENT cell: status.replicas. printers.go printReplicationController.';

-- replicationcontroller_ready(object jsonb) -> bigint: READY,
-- status.readyReplicas.  printers.go printReplicationController.
CREATE OR REPLACE FUNCTION kwatch.replicationcontroller_ready(object jsonb) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(kwatch._printer_int(object->'status'->'readyReplicas'), 0) $$;
COMMENT ON FUNCTION kwatch.replicationcontroller_ready(jsonb) IS
'ReplicationController READY cell: status.readyReplicas. printers.go printReplicationController.';

-- replicationcontroller_containers(object jsonb) -> text: CONTAINERS
-- (wide), the names of the pod template's containers joined with ",", ""
-- without a template.  printers.go printReplicationController
-- (layoutContainerCells; 1.20 fails on a nil template, which validation
-- rejects on write).
CREATE OR REPLACE FUNCTION kwatch.replicationcontroller_containers(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT kwatch._printer_container_cells(object->'spec'->'template'->'spec'->'containers', 'name') $$;
COMMENT ON FUNCTION kwatch.replicationcontroller_containers(jsonb) IS
'ReplicationController CONTAINERS cell (wide): container names joined with ",". printers.go printReplicationController.';

-- replicationcontroller_images(object jsonb) -> text: IMAGES (wide), the
-- images of the pod template's containers joined with ",", "" without a
-- template.  printers.go printReplicationController (layoutContainerCells;
-- 1.20 fails on a nil template, which validation rejects on write).
CREATE OR REPLACE FUNCTION kwatch.replicationcontroller_images(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT kwatch._printer_container_cells(object->'spec'->'template'->'spec'->'containers', 'image') $$;
COMMENT ON FUNCTION kwatch.replicationcontroller_images(jsonb) IS
'ReplicationController IMAGES cell (wide): container images joined with ",". printers.go printReplicationController.';

-- replicationcontroller_selector(object jsonb) -> text: SELECTOR (wide),
-- spec.selector, a plain string map, as "k=v,..." sorted by key, "<none>"
-- when empty.  printers.go printReplicationController
-- (labels.FormatLabels).
CREATE OR REPLACE FUNCTION kwatch.replicationcontroller_selector(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT kwatch._printer_format_labels(object->'spec'->'selector') $$;
COMMENT ON FUNCTION kwatch.replicationcontroller_selector(jsonb) IS
'ReplicationController SELECTOR cell (wide): spec.selector as "k=v,..." or "<none>". printers.go printReplicationController (labels.FormatLabels).';
