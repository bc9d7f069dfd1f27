-- ---------------------------------------------------------------------
-- Pods: printers.go printPod
-- ---------------------------------------------------------------------

-- _pod_print(object jsonb) -> (ready_containers, total_containers, status,
-- restarts, last_restart): the READY, STATUS and RESTARTS cells of a pod in
-- one pass, ported line by line from printers.go printPod (current
-- release): SchedulingGated from the PodScheduled condition; init
-- containers in order (Init:N/M, Init:<reason>, Init:Signal:N,
-- Init:ExitCode:N), sidecars (init containers with restartPolicy Always)
-- counted in READY's total and, once started, in its ready count; regular
-- containers last to first (waiting reason, terminated reason,
-- Signal:N, ExitCode:N), "Completed" turned back to Running/NotReady while
-- a container runs; Unknown for a deleted pod of a lost node, Terminating
-- for a deleted pod whose phase is not terminal.  Restarts count every init
-- container while initializing, else the sidecars and the regular
-- containers; last_restart is the latest lastState.terminated.finishedAt
-- among the containers counted (NULL if none).
CREATE OR REPLACE FUNCTION kwatch._pod_print(object jsonb, OUT ready_containers integer, OUT total_containers integer, OUT status text, OUT restarts bigint, OUT last_restart timestamp with time zone) RETURNS record
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  st jsonb := COALESCE(object->'status', '{}');
  init_specs jsonb := kwatch._printer_array(object->'spec'->'initContainers');
  n_init integer := jsonb_array_length(kwatch._printer_array(object->'spec'->'initContainers'));
  phase text := COALESCE(st->>'phase', '');
  c jsonb;
  i bigint;
  term jsonb;
  wait jsonb;
  finished timestamptz;
  restartable boolean;
  sidecar_restarts bigint := 0;
  sidecar_last timestamptz;
  initializing boolean := false;
  has_running boolean := false;
BEGIN
  restarts := 0;
  ready_containers := 0;
  total_containers := jsonb_array_length(kwatch._printer_array(object->'spec'->'containers'));
  status := phase;
  IF COALESCE(st->>'reason', '') <> '' THEN
    status := st->>'reason';
  END IF;

  -- {type: PodScheduled, reason: SchedulingGated} sets SchedulingGated.
  IF EXISTS (SELECT 1 FROM jsonb_array_elements(kwatch._printer_array(st->'conditions')) cond
             WHERE cond->>'type' = 'PodScheduled' AND cond->>'reason' = 'SchedulingGated') THEN
    status := 'SchedulingGated';
  END IF;

  -- Sidecars (restartPolicy Always) count in READY's total.
  total_containers := total_containers
    + (SELECT count(*)::integer FROM jsonb_array_elements(init_specs) s
       WHERE s->>'restartPolicy' = 'Always');

  FOR c, i IN SELECT e, o - 1 FROM jsonb_array_elements(kwatch._printer_array(st->'initContainerStatuses')) WITH ORDINALITY AS x(e, o)
  LOOP
    restarts := restarts + COALESCE(kwatch._printer_int32(c->'restartCount'), 0);
    finished := kwatch._printer_time(c->'lastState'->'terminated'->>'finishedAt');
    IF finished IS NOT NULL AND (last_restart IS NULL OR last_restart < finished) THEN
      last_restart := finished;
    END IF;
    -- The spec of the init container of that name (Go map: the last of
    -- that name wins); none for a status without a spec.
    SELECT s->>'restartPolicy' = 'Always' INTO restartable
      FROM jsonb_array_elements(init_specs) WITH ORDINALITY AS y(s, o)
     WHERE COALESCE(s->>'name', '') = COALESCE(c->>'name', '')
     ORDER BY o DESC LIMIT 1;
    restartable := COALESCE(restartable, false);
    IF restartable THEN
      sidecar_restarts := sidecar_restarts + COALESCE(kwatch._printer_int32(c->'restartCount'), 0);
      IF finished IS NOT NULL AND (sidecar_last IS NULL OR sidecar_last < finished) THEN
        sidecar_last := finished;
      END IF;
    END IF;
    term := CASE WHEN jsonb_typeof(c->'state'->'terminated') = 'object' THEN c->'state'->'terminated' END;
    wait := CASE WHEN jsonb_typeof(c->'state'->'waiting') = 'object' THEN c->'state'->'waiting' END;
    IF term IS NOT NULL AND COALESCE(kwatch._printer_int32(term->'exitCode'), 0) = 0 THEN
      CONTINUE;
    ELSIF restartable AND COALESCE(kwatch._printer_bool(c->'started'), false) THEN
      IF COALESCE(kwatch._printer_bool(c->'ready'), false) THEN
        ready_containers := ready_containers + 1;
      END IF;
      CONTINUE;
    ELSIF term IS NOT NULL THEN
      -- initialization is failed
      IF COALESCE(term->>'reason', '') = '' THEN
        IF COALESCE(kwatch._printer_int32(term->'signal'), 0) <> 0 THEN
          status := 'Init:Signal:' || kwatch._printer_int32(term->'signal');
        ELSE
          status := 'Init:ExitCode:' || COALESCE(kwatch._printer_int32(term->'exitCode'), 0);
        END IF;
      ELSE
        status := 'Init:' || (term->>'reason');
      END IF;
      initializing := true;
    ELSIF wait IS NOT NULL AND COALESCE(wait->>'reason', '') <> '' AND wait->>'reason' <> 'PodInitializing' THEN
      status := 'Init:' || (wait->>'reason');
      initializing := true;
    ELSE
      status := 'Init:' || i || '/' || n_init;
      initializing := true;
    END IF;
    EXIT;
  END LOOP;

  IF NOT initializing OR EXISTS (
       -- isPodInitializedConditionTrue: the first Initialized condition.
       SELECT 1 FROM (SELECT cond FROM jsonb_array_elements(kwatch._printer_array(st->'conditions')) WITH ORDINALITY AS z(cond, o)
                       WHERE cond->>'type' = 'Initialized' ORDER BY o LIMIT 1) f
        WHERE f.cond->>'status' = 'True') THEN
    restarts := sidecar_restarts;
    last_restart := sidecar_last;
    FOR c IN SELECT e FROM jsonb_array_elements(kwatch._printer_array(st->'containerStatuses')) WITH ORDINALITY AS x(e, o) ORDER BY o DESC
    LOOP
      restarts := restarts + COALESCE(kwatch._printer_int32(c->'restartCount'), 0);
      finished := kwatch._printer_time(c->'lastState'->'terminated'->>'finishedAt');
      IF finished IS NOT NULL AND (last_restart IS NULL OR last_restart < finished) THEN
        last_restart := finished;
      END IF;
      term := CASE WHEN jsonb_typeof(c->'state'->'terminated') = 'object' THEN c->'state'->'terminated' END;
      wait := CASE WHEN jsonb_typeof(c->'state'->'waiting') = 'object' THEN c->'state'->'waiting' END;
      IF wait IS NOT NULL AND COALESCE(wait->>'reason', '') <> '' THEN
        status := wait->>'reason';
      ELSIF term IS NOT NULL AND COALESCE(term->>'reason', '') <> '' THEN
        status := term->>'reason';
      ELSIF term IS NOT NULL THEN
        IF COALESCE(kwatch._printer_int32(term->'signal'), 0) <> 0 THEN
          status := 'Signal:' || kwatch._printer_int32(term->'signal');
        ELSE
          status := 'ExitCode:' || COALESCE(kwatch._printer_int32(term->'exitCode'), 0);
        END IF;
      ELSIF COALESCE(kwatch._printer_bool(c->'ready'), false) AND jsonb_typeof(c->'state'->'running') = 'object' THEN
        has_running := true;
        ready_containers := ready_containers + 1;
      END IF;
    END LOOP;

    -- change pod status back to "Running" if there is at least one
    -- container still reporting as "Running" status
    IF status = 'Completed' AND has_running THEN
      IF EXISTS (SELECT 1 FROM jsonb_array_elements(kwatch._printer_array(st->'conditions')) cond
                 WHERE cond->>'type' = 'Ready' AND cond->>'status' = 'True') THEN
        status := 'Running';
      ELSE
        status := 'NotReady';
      END IF;
    END IF;
  END IF;

  IF object->'metadata'->>'deletionTimestamp' IS NOT NULL AND st->>'reason' = 'NodeLost' THEN
    status := 'Unknown';
  ELSIF object->'metadata'->>'deletionTimestamp' IS NOT NULL AND phase NOT IN ('Succeeded', 'Failed') THEN
    status := 'Terminating';
  END IF;
END
$$;
COMMENT ON FUNCTION kwatch._pod_print(jsonb) IS
'READY counts, STATUS, RESTARTS and the last restart time of a pod in one pass. printers.go printPod (current release, sidecars and SchedulingGated).';

-- pod_ready_text(object jsonb) -> text: READY, "ready/total" ("2/2"),
-- sidecar init containers included.  printers.go printPod.
CREATE OR REPLACE FUNCTION kwatch.pod_ready_text(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT p.ready_containers || '/' || p.total_containers FROM kwatch._pod_print(object) p $$;
COMMENT ON FUNCTION kwatch.pod_ready_text(jsonb) IS
'Pod READY cell "ready/total" (sidecar init containers counted). printers.go printPod, current release.';

-- pod_status(object jsonb) -> text: STATUS exactly as kubectl prints it
-- (Running, CrashLoopBackOff, Init:0/1, Init:CrashLoopBackOff, Completed,
-- OOMKilled, Error, Signal:9, ExitCode:1, Terminating, Unknown,
-- SchedulingGated, NotReady, ...).  printers.go printPod.
CREATE OR REPLACE FUNCTION kwatch.pod_status(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT p.status FROM kwatch._pod_print(object) p $$;
COMMENT ON FUNCTION kwatch.pod_status(jsonb) IS
'Pod STATUS cell (CrashLoopBackOff, Init:0/1, Terminating, Completed, ...). printers.go printPod, current release.';

-- pod_restarts(object jsonb) -> bigint: RESTARTS' number (Go's int): while
-- initializing the init containers' restarts, else the sidecars' plus the
-- regular containers'.  printers.go printPod (1.20 prints the same number
-- without sidecars, as an integer cell).
CREATE OR REPLACE FUNCTION kwatch.pod_restarts(object jsonb) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT p.restarts FROM kwatch._pod_print(object) p $$;
COMMENT ON FUNCTION kwatch.pod_restarts(jsonb) IS
'Pod RESTARTS count as kubectl sums it (sidecar init containers included). printers.go printPod, current release.';

-- pod_last_restart(object jsonb) -> timestamptz: the latest
-- lastState.terminated.finishedAt among the containers RESTARTS counts, the
-- time kubectl's "(3m ago)" is computed from; NULL when there is none.
-- printers.go printPod lastRestartDate.
CREATE OR REPLACE FUNCTION kwatch.pod_last_restart(object jsonb) RETURNS timestamp with time zone
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT p.last_restart FROM kwatch._pod_print(object) p $$;
COMMENT ON FUNCTION kwatch.pod_last_restart(jsonb) IS
'Time RESTARTS "(3m ago)" is computed from (latest lastState.terminated.finishedAt counted), NULL if none. printers.go printPod.';

-- pod_restarts_text(object jsonb, at timestamptz) -> text: the RESTARTS
-- cell at instant `at`: "7", or "7 (3m ago)" when there were restarts and a
-- last restart time.  printers.go printPod restartsStr (1.20: the number
-- alone).  A view passes now().
CREATE OR REPLACE FUNCTION kwatch.pod_restarts_text(object jsonb, at timestamp with time zone) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT CASE WHEN p.restarts <> 0 AND p.last_restart IS NOT NULL
              THEN p.restarts || ' (' || kwatch.translate_timestamp_since(p.last_restart, at) || ' ago)'
              ELSE p.restarts::text END
  FROM kwatch._pod_print(object) p
$$;
COMMENT ON FUNCTION kwatch.pod_restarts_text(jsonb, timestamp with time zone) IS
'Pod RESTARTS cell at instant at: "7" or "7 (3m ago)" (a view passes now()). printers.go printPod restartsStr.';

-- pod_ip(object jsonb) -> text: IP, status.podIPs[0].ip, NULL (kubectl's "<none>").
-- printers.go printPod (wide).
CREATE OR REPLACE FUNCTION kwatch.pod_ip(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT NULLIF(object->'status'->'podIPs'->0->>'ip', '') $$;
COMMENT ON FUNCTION kwatch.pod_ip(jsonb) IS
'Pod IP cell: status.podIPs[0].ip or NULL (kubectl''s "<none>"). printers.go printPod (wide).';

-- pod_node(object jsonb) -> text: NODE, spec.nodeName, NULL (kubectl's "<none>").
-- printers.go printPod (wide).
CREATE OR REPLACE FUNCTION kwatch.pod_node(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT NULLIF(object->'spec'->>'nodeName', '') $$;
COMMENT ON FUNCTION kwatch.pod_node(jsonb) IS
'Pod NODE cell: spec.nodeName or NULL (kubectl''s "<none>"). printers.go printPod (wide).';

-- pod_nominated_node(object jsonb) -> text: NOMINATED NODE,
-- status.nominatedNodeName, NULL (kubectl's "<none>").  printers.go printPod (wide).
CREATE OR REPLACE FUNCTION kwatch.pod_nominated_node(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT NULLIF(object->'status'->>'nominatedNodeName', '') $$;
COMMENT ON FUNCTION kwatch.pod_nominated_node(jsonb) IS
'Pod NOMINATED NODE cell: status.nominatedNodeName or NULL (kubectl''s "<none>"). printers.go printPod (wide).';

-- pod_readiness_gates(object jsonb) -> text: READINESS GATES, "true/gates"
-- (a gate counts when the first condition of its type is True), NULL (kubectl's "<none>")
-- without gates.  printers.go printPod (wide).
CREATE OR REPLACE FUNCTION kwatch.pod_readiness_gates(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT CASE WHEN kwatch._printer_count(object->'spec'->'readinessGates') = 0 THEN NULL
         ELSE (SELECT count(*) FILTER (WHERE (
                        SELECT cond->>'status' = 'True'
                        FROM jsonb_array_elements(kwatch._printer_array(object->'status'->'conditions')) WITH ORDINALITY AS c(cond, o)
                        WHERE cond->>'type' = COALESCE(g->>'conditionType', '')
                        ORDER BY o LIMIT 1))
               FROM jsonb_array_elements(kwatch._printer_array(object->'spec'->'readinessGates')) g)
              || '/' || jsonb_array_length(kwatch._printer_array(object->'spec'->'readinessGates')) END
$$;
COMMENT ON FUNCTION kwatch.pod_readiness_gates(jsonb) IS
'Pod READINESS GATES cell "true/total" or NULL (kubectl''s "<none>"). printers.go printPod (wide).';
