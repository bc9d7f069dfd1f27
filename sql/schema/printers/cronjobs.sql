-- ---------------------------------------------------------------------
-- CronJobs: printers.go printCronJob
-- ---------------------------------------------------------------------

-- cronjob_schedule(object jsonb) -> text: SCHEDULE, spec.schedule.
-- printers.go printCronJob.
CREATE OR REPLACE FUNCTION kwatch.cronjob_schedule(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(object->'spec'->>'schedule', '') $$;
COMMENT ON FUNCTION kwatch.cronjob_schedule(jsonb) IS
'CronJob SCHEDULE cell. printers.go printCronJob.';

-- cronjob_timezone(object jsonb) -> text: TIMEZONE, spec.timeZone,
-- NULL (kubectl's "<none>").  printers.go printCronJob (current release; not in 1.20).
CREATE OR REPLACE FUNCTION kwatch.cronjob_timezone(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT object->'spec'->>'timeZone' $$;
COMMENT ON FUNCTION kwatch.cronjob_timezone(jsonb) IS
'CronJob TIMEZONE cell or NULL (kubectl''s "<none>"). printers.go printCronJob (current release).';

-- cronjob_suspend(object jsonb) -> text: SUSPEND, "True", "False" or
-- "<unset>" (the cell is this text though the column says boolean).
-- printers.go printCronJob (printBoolPtr).
CREATE OR REPLACE FUNCTION kwatch.cronjob_suspend(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT CASE WHEN jsonb_typeof(object->'spec'->'suspend') = 'boolean'
              THEN CASE WHEN kwatch._printer_bool(object->'spec'->'suspend') THEN 'True' ELSE 'False' END
              ELSE '<unset>' END
$$;
COMMENT ON FUNCTION kwatch.cronjob_suspend(jsonb) IS
'CronJob SUSPEND cell "True"/"False"/"<unset>". printers.go printCronJob (printBoolPtr).';

-- cronjob_active(object jsonb) -> bigint: ACTIVE, len(status.active).
-- printers.go printCronJob.
CREATE OR REPLACE FUNCTION kwatch.cronjob_active(object jsonb) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT kwatch._printer_count(object->'status'->'active')::bigint $$;
COMMENT ON FUNCTION kwatch.cronjob_active(jsonb) IS
'CronJob ACTIVE cell: number of active jobs. printers.go printCronJob.';

-- cronjob_last_schedule(object jsonb) -> timestamptz:
-- status.lastScheduleTime, what LAST SCHEDULE is computed from (NULL:
-- NULL (kubectl's "<none>")).  printers.go printCronJob.
CREATE OR REPLACE FUNCTION kwatch.cronjob_last_schedule(object jsonb) RETURNS timestamp with time zone
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT kwatch._printer_time(object->'status'->>'lastScheduleTime') $$;
COMMENT ON FUNCTION kwatch.cronjob_last_schedule(jsonb) IS
'CronJob status.lastScheduleTime, what LAST SCHEDULE is computed from. printers.go printCronJob.';

-- cronjob_last_schedule_text(object jsonb, at timestamptz) -> text: LAST
-- SCHEDULE at instant `at`, NULL (kubectl's "<none>") when never scheduled.  printers.go
-- printCronJob.  A view passes now().
CREATE OR REPLACE FUNCTION kwatch.cronjob_last_schedule_text(object jsonb, at timestamp with time zone) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT CASE WHEN object->'status'->>'lastScheduleTime' IS NULL THEN NULL
              ELSE kwatch.translate_timestamp_since(kwatch.cronjob_last_schedule(object), at) END
$$;
COMMENT ON FUNCTION kwatch.cronjob_last_schedule_text(jsonb, timestamp with time zone) IS
'CronJob LAST SCHEDULE cell at instant at, NULL (kubectl''s "<none>") (a view passes now()). printers.go printCronJob.';

-- cronjob_containers(object jsonb) -> text: CONTAINERS (wide), the names of
-- the job template's pod template's containers joined with ",".
-- printers.go printCronJob (layoutContainerCells).
CREATE OR REPLACE FUNCTION kwatch.cronjob_containers(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT kwatch._printer_container_cells(object->'spec'->'jobTemplate'->'spec'->'template'->'spec'->'containers', 'name') $$;
COMMENT ON FUNCTION kwatch.cronjob_containers(jsonb) IS
'CronJob CONTAINERS cell (wide): container names joined with ",". printers.go printCronJob.';

-- cronjob_images(object jsonb) -> text: IMAGES (wide), the images of the
-- job template's pod template's containers joined with ",".  printers.go
-- printCronJob (layoutContainerCells).
CREATE OR REPLACE FUNCTION kwatch.cronjob_images(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT kwatch._printer_container_cells(object->'spec'->'jobTemplate'->'spec'->'template'->'spec'->'containers', 'image') $$;
COMMENT ON FUNCTION kwatch.cronjob_images(jsonb) IS
'CronJob IMAGES cell (wide): container images joined with ",". printers.go printCronJob.';

-- cronjob_selector(object jsonb) -> text: SELECTOR (wide),
-- spec.jobTemplate.spec.selector as "k=v,k in (a,b),...", NULL (kubectl's "<none>") for a
-- nil or empty selector, "<error>" for an invalid one.  printers.go
-- printCronJob (metav1.FormatLabelSelector).
CREATE OR REPLACE FUNCTION kwatch.cronjob_selector(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT kwatch._printer_format_label_selector(object->'spec'->'jobTemplate'->'spec'->'selector') $$;
COMMENT ON FUNCTION kwatch.cronjob_selector(jsonb) IS
'CronJob SELECTOR cell (wide): spec.jobTemplate.spec.selector as "k=v,...", NULL (kubectl''s "<none>"), "<error>". printers.go printCronJob (FormatLabelSelector).';
