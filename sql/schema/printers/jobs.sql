-- ---------------------------------------------------------------------
-- Jobs: printers.go printJob, hasJobCondition
-- ---------------------------------------------------------------------

-- _printer_job_condition(object jsonb, type text) -> boolean: whether the
-- first condition of that type is True.  printers.go hasJobCondition.
CREATE OR REPLACE FUNCTION kwatch._printer_job_condition(object jsonb, type text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT COALESCE((SELECT cond->>'status' = 'True'
                   FROM jsonb_array_elements(kwatch._printer_array(object->'status'->'conditions')) WITH ORDINALITY AS c(cond, o)
                   WHERE cond->>'type' = type ORDER BY o LIMIT 1), false)
$$;
COMMENT ON FUNCTION kwatch._printer_job_condition(jsonb, text) IS
'Whether the first Job condition of that type is True. printers.go hasJobCondition.';

-- job_status(object jsonb) -> text: STATUS: Complete, Failed, Terminating,
-- Suspended, FailureTarget or Running, in that precedence.  printers.go
-- printJob (current release; 1.20 has no STATUS column).
CREATE OR REPLACE FUNCTION kwatch.job_status(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT CASE WHEN kwatch._printer_job_condition(object, 'Complete') THEN 'Complete'
              WHEN kwatch._printer_job_condition(object, 'Failed') THEN 'Failed'
              WHEN object->'metadata'->>'deletionTimestamp' IS NOT NULL THEN 'Terminating'
              WHEN kwatch._printer_job_condition(object, 'Suspended') THEN 'Suspended'
              WHEN kwatch._printer_job_condition(object, 'FailureTarget') THEN 'FailureTarget'
              ELSE 'Running' END
$$;
COMMENT ON FUNCTION kwatch.job_status(jsonb) IS
'Job STATUS cell: Complete/Failed/Terminating/Suspended/FailureTarget/Running. printers.go printJob (current release).';

-- job_completions(object jsonb) -> text: COMPLETIONS, "succeeded/completions",
-- or without completions "succeeded/1", "succeeded/1 of parallelism" when
-- parallelism > 1.  printers.go printJob.
CREATE OR REPLACE FUNCTION kwatch.job_completions(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT COALESCE(kwatch._printer_int(object->'status'->'succeeded'), 0) || '/' ||
         CASE WHEN jsonb_typeof(object->'spec'->'completions') = 'number' THEN (object->'spec'->>'completions')
              WHEN COALESCE(kwatch._printer_int(object->'spec'->'parallelism'), 0) > 1 THEN '1 of ' || kwatch._printer_int(object->'spec'->'parallelism')
              ELSE '1' END
$$;
COMMENT ON FUNCTION kwatch.job_completions(jsonb) IS
'Job COMPLETIONS cell "1/1", "0/1 of 3". printers.go printJob.';

-- job_start_time(object jsonb) -> timestamptz: status.startTime, where
-- DURATION starts (NULL: DURATION is "").  printers.go printJob.
CREATE OR REPLACE FUNCTION kwatch.job_start_time(object jsonb) RETURNS timestamp with time zone
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT kwatch._printer_time(object->'status'->>'startTime') $$;
COMMENT ON FUNCTION kwatch.job_start_time(jsonb) IS
'Job status.startTime, where DURATION starts. printers.go printJob.';

-- job_completion_time(object jsonb) -> timestamptz: status.completionTime,
-- where DURATION ends (NULL: it runs up to now).  printers.go printJob.
CREATE OR REPLACE FUNCTION kwatch.job_completion_time(object jsonb) RETURNS timestamp with time zone
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT kwatch._printer_time(object->'status'->>'completionTime') $$;
COMMENT ON FUNCTION kwatch.job_completion_time(jsonb) IS
'Job status.completionTime, where DURATION ends (NULL while running). printers.go printJob.';

-- job_duration(object jsonb, at timestamptz) -> text: DURATION at instant
-- `at`: "" before the start, completion - start once complete, else
-- at - start.  printers.go printJob.  A view passes now().
CREATE OR REPLACE FUNCTION kwatch.job_duration(object jsonb, at timestamp with time zone) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT CASE WHEN kwatch.job_start_time(object) IS NULL THEN ''
              ELSE kwatch.human_duration(COALESCE(kwatch.job_completion_time(object), at) - kwatch.job_start_time(object)) END
$$;
COMMENT ON FUNCTION kwatch.job_duration(jsonb, timestamp with time zone) IS
'Job DURATION cell at instant at (a view passes now()). printers.go printJob.';

-- job_containers(object jsonb) -> text: CONTAINERS (wide), the names of the
-- pod template's containers joined with ",".  printers.go printJob
-- (layoutContainerCells).
CREATE OR REPLACE FUNCTION kwatch.job_containers(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT kwatch._printer_container_cells(object->'spec'->'template'->'spec'->'containers', 'name') $$;
COMMENT ON FUNCTION kwatch.job_containers(jsonb) IS
'Job CONTAINERS cell (wide): container names joined with ",". printers.go printJob.';

-- job_images(object jsonb) -> text: IMAGES (wide), the images of the pod
-- template's containers joined with ",".  printers.go printJob
-- (layoutContainerCells).
CREATE OR REPLACE FUNCTION kwatch.job_images(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT kwatch._printer_container_cells(object->'spec'->'template'->'spec'->'containers', 'image') $$;
COMMENT ON FUNCTION kwatch.job_images(jsonb) IS
'Job IMAGES cell (wide): container images joined with ",". printers.go printJob.';

-- job_selector(object jsonb) -> text: SELECTOR (wide), spec.selector as
-- "k=v,k in (a,b),...", "<none>" for a nil or empty selector, "<error>" for
-- an invalid one.  printers.go printJob (metav1.FormatLabelSelector).
CREATE OR REPLACE FUNCTION kwatch.job_selector(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT kwatch._printer_format_label_selector(object->'spec'->'selector') $$;
COMMENT ON FUNCTION kwatch.job_selector(jsonb) IS
'Job SELECTOR cell (wide): spec.selector as "k=v,...", "<none>", "<error>". printers.go printJob (FormatLabelSelector).';
