-- ---------------------------------------------------------------------
-- ReplicaSets: printers.go printReplicaSet.  The integers are int64
-- cells; unset counts are 0, as the internal types hold them.  The wide
-- CONTAINERS and IMAGES cells follow layoutContainerCells, SELECTOR
-- FormatLabelSelector.
-- ---------------------------------------------------------------------

-- replicaset_desired(object jsonb) -> bigint: DESIRED, spec.replicas.
-- printers.go printReplicaSet.
CREATE OR REPLACE FUNCTION kwatch.replicaset_desired(object jsonb) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(kwatch._printer_int(object->'spec'->'replicas'), 0) $$;
COMMENT ON FUNCTION kwatch.replicaset_desired(jsonb) IS
'ReplicaSet DESIRED cell: spec.replicas. printers.go printReplicaSet.';

-- replicaset_current(object jsonb) -> bigint: CURRENT, status.replicas.
-- printers.go printReplicaSet.
CREATE OR REPLACE FUNCTION kwatch.replicaset_current(object jsonb) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(kwatch._printer_int(object->'status'->'replicas'), 0) $$;
COMMENT ON FUNCTION kwatch.replicaset_current(jsonb) IS
'ReplicaSet CURRENT cell: status.replicas. printers.go printReplicaSet.';

-- replicaset_ready(object jsonb) -> bigint: READY, status.readyReplicas.
-- printers.go printReplicaSet.
CREATE OR REPLACE FUNCTION kwatch.replicaset_ready(object jsonb) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(kwatch._printer_int(object->'status'->'readyReplicas'), 0) $$;
COMMENT ON FUNCTION kwatch.replicaset_ready(jsonb) IS
'ReplicaSet READY cell: status.readyReplicas. printers.go printReplicaSet.';

-- replicaset_containers(object jsonb) -> text: CONTAINERS (wide), the names
-- of the pod template's containers joined with ",".  printers.go
-- printReplicaSet (layoutContainerCells).
CREATE OR REPLACE FUNCTION kwatch.replicaset_containers(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT kwatch._printer_container_cells(object->'spec'->'template'->'spec'->'containers', 'name') $$;
COMMENT ON FUNCTION kwatch.replicaset_containers(jsonb) IS
'ReplicaSet CONTAINERS cell (wide): container names joined with ",". printers.go printReplicaSet.';

-- replicaset_images(object jsonb) -> text: IMAGES (wide), the images of the
-- pod template's containers joined with ",".  printers.go printReplicaSet
-- (layoutContainerCells).
CREATE OR REPLACE FUNCTION kwatch.replicaset_images(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT kwatch._printer_container_cells(object->'spec'->'template'->'spec'->'containers', 'image') $$;
COMMENT ON FUNCTION kwatch.replicaset_images(jsonb) IS
'ReplicaSet IMAGES cell (wide): container images joined with ",". printers.go printReplicaSet.';

-- replicaset_selector(object jsonb) -> text: SELECTOR (wide), spec.selector
-- as "k=v,k in (a,b),...", "<none>" for a nil or empty selector, "<error>"
-- for an invalid one.  printers.go printReplicaSet
-- (metav1.FormatLabelSelector).
CREATE OR REPLACE FUNCTION kwatch.replicaset_selector(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT kwatch._printer_format_label_selector(object->'spec'->'selector') $$;
COMMENT ON FUNCTION kwatch.replicaset_selector(jsonb) IS
'ReplicaSet SELECTOR cell (wide): spec.selector as "k=v,...", "<none>", "<error>". printers.go printReplicaSet (FormatLabelSelector).';
