-- ---------------------------------------------------------------------
-- DaemonSets: printers.go printDaemonSet.  The integers are int64
-- cells; unset counts are 0, as the internal types hold them.  The wide
-- CONTAINERS and IMAGES cells follow layoutContainerCells, SELECTOR
-- FormatLabelSelector.
-- ---------------------------------------------------------------------

-- daemonset_desired(object jsonb) -> bigint: DESIRED,
-- status.desiredNumberScheduled.  printers.go printDaemonSet.
CREATE OR REPLACE FUNCTION kwatch.daemonset_desired(object jsonb) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(kwatch._printer_int(object->'status'->'desiredNumberScheduled'), 0) $$;
COMMENT ON FUNCTION kwatch.daemonset_desired(jsonb) IS
'DaemonSet DESIRED cell: status.desiredNumberScheduled. printers.go printDaemonSet.';

-- daemonset_current(object jsonb) -> bigint: CURRENT,
-- status.currentNumberScheduled.  printers.go printDaemonSet.
CREATE OR REPLACE FUNCTION kwatch.daemonset_current(object jsonb) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(kwatch._printer_int(object->'status'->'currentNumberScheduled'), 0) $$;
COMMENT ON FUNCTION kwatch.daemonset_current(jsonb) IS
'DaemonSet CURRENT cell: status.currentNumberScheduled. printers.go printDaemonSet.';

-- daemonset_ready(object jsonb) -> bigint: READY, status.numberReady.
-- printers.go printDaemonSet.
CREATE OR REPLACE FUNCTION kwatch.daemonset_ready(object jsonb) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(kwatch._printer_int(object->'status'->'numberReady'), 0) $$;
COMMENT ON FUNCTION kwatch.daemonset_ready(jsonb) IS
'DaemonSet READY cell: status.numberReady. printers.go printDaemonSet.';

-- daemonset_up_to_date(object jsonb) -> bigint: UP-TO-DATE,
-- status.updatedNumberScheduled.  printers.go printDaemonSet.
CREATE OR REPLACE FUNCTION kwatch.daemonset_up_to_date(object jsonb) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(kwatch._printer_int(object->'status'->'updatedNumberScheduled'), 0) $$;
COMMENT ON FUNCTION kwatch.daemonset_up_to_date(jsonb) IS
'DaemonSet UP-TO-DATE cell: status.updatedNumberScheduled. printers.go printDaemonSet.';

-- daemonset_available(object jsonb) -> bigint: AVAILABLE,
-- status.numberAvailable.  printers.go printDaemonSet.
CREATE OR REPLACE FUNCTION kwatch.daemonset_available(object jsonb) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(kwatch._printer_int(object->'status'->'numberAvailable'), 0) $$;
COMMENT ON FUNCTION kwatch.daemonset_available(jsonb) IS
'DaemonSet AVAILABLE cell: status.numberAvailable. printers.go printDaemonSet.';

-- daemonset_node_selector(object jsonb) -> text: NODE SELECTOR, the pod
-- template's nodeSelector as "k=v,...", "<none>".  printers.go
-- printDaemonSet (labels.FormatLabels).
CREATE OR REPLACE FUNCTION kwatch.daemonset_node_selector(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT kwatch._printer_format_labels(object->'spec'->'template'->'spec'->'nodeSelector') $$;
COMMENT ON FUNCTION kwatch.daemonset_node_selector(jsonb) IS
'DaemonSet NODE SELECTOR cell "k=v,..." or "<none>". printers.go printDaemonSet.';

-- daemonset_containers(object jsonb) -> text: CONTAINERS (wide), the names
-- of the pod template's containers joined with ",".  printers.go
-- printDaemonSet (layoutContainerCells).
CREATE OR REPLACE FUNCTION kwatch.daemonset_containers(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT kwatch._printer_container_cells(object->'spec'->'template'->'spec'->'containers', 'name') $$;
COMMENT ON FUNCTION kwatch.daemonset_containers(jsonb) IS
'DaemonSet CONTAINERS cell (wide): container names joined with ",". printers.go printDaemonSet.';

-- daemonset_images(object jsonb) -> text: IMAGES (wide), the images of the
-- pod template's containers joined with ",".  printers.go printDaemonSet
-- (layoutContainerCells).
CREATE OR REPLACE FUNCTION kwatch.daemonset_images(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT kwatch._printer_container_cells(object->'spec'->'template'->'spec'->'containers', 'image') $$;
COMMENT ON FUNCTION kwatch.daemonset_images(jsonb) IS
'DaemonSet IMAGES cell (wide): container images joined with ",". printers.go printDaemonSet.';

-- daemonset_selector(object jsonb) -> text: SELECTOR (wide), spec.selector
-- as "k=v,k in (a,b),...", "<none>" for a nil or empty selector, "<error>"
-- for an invalid one.  printers.go printDaemonSet
-- (metav1.FormatLabelSelector).
CREATE OR REPLACE FUNCTION kwatch.daemonset_selector(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT kwatch._printer_format_label_selector(object->'spec'->'selector') $$;
COMMENT ON FUNCTION kwatch.daemonset_selector(jsonb) IS
'DaemonSet SELECTOR cell (wide): spec.selector as "k=v,...", "<none>", "<error>". printers.go printDaemonSet (FormatLabelSelector).';
