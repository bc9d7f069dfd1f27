-- ---------------------------------------------------------------------
-- HorizontalPodAutoscalers (autoscaling/v2 and v2beta2 JSON;
-- autoscaling/v1's targetCPUUtilizationPercentage read as the Resource
-- cpu metric it converts to): printers.go printHorizontalPodAutoscaler,
-- formatHPAMetrics
-- ---------------------------------------------------------------------

-- horizontalpodautoscaler_reference(object jsonb) -> text: REFERENCE,
-- "Kind/name" of spec.scaleTargetRef.  printers.go
-- printHorizontalPodAutoscaler.
CREATE OR REPLACE FUNCTION kwatch.horizontalpodautoscaler_reference(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(object->'spec'->'scaleTargetRef'->>'kind', '') || '/' || COALESCE(object->'spec'->'scaleTargetRef'->>'name', '') $$;
COMMENT ON FUNCTION kwatch.horizontalpodautoscaler_reference(jsonb) IS
'HPA REFERENCE cell "Kind/name". printers.go printHorizontalPodAutoscaler.';

-- _printer_hpa_v1_metrics(object jsonb) -> jsonb: an autoscaling/v1
-- HorizontalPodAutoscaler's metrics in the autoscaling/v2 shape, as
-- {"metrics": [...], "currentMetrics": [...]}: the ones kept in annotation
-- autoscaling.alpha.kubernetes.io/metrics (v2beta1-style MetricSpecs), then
-- spec.targetCPUUtilizationPercentage as a cpu Utilization metric; none at
-- all is cpu at 80%; current metrics from annotation
-- autoscaling.alpha.kubernetes.io/current-metrics when present, else
-- status.currentCPUUtilizationPercentage.  An annotation that is no JSON
-- list is ignored, as the API server's json.Unmarshal error is.
-- pkg/apis/autoscaling/v1/conversion.go
-- Convert_v1_HorizontalPodAutoscaler_To_autoscaling_HorizontalPodAutoscaler
-- and the Convert_v1_*MetricSource/*MetricStatus functions (1.20 and today
-- alike), which the printer sees the object through.
CREATE OR REPLACE FUNCTION kwatch._printer_hpa_v1_metrics(object jsonb) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  ann jsonb := object->'metadata'->'annotations';
  other jsonb;
  current jsonb;
  metrics jsonb := '[]';
  statuses jsonb := '[]';
  m jsonb;
  s jsonb;
  t text;
BEGIN
  IF jsonb_typeof(ann->'autoscaling.alpha.kubernetes.io/metrics') = 'string' THEN
    BEGIN
      other := (ann->>'autoscaling.alpha.kubernetes.io/metrics')::jsonb;
    EXCEPTION WHEN data_exception OR program_limit_exceeded THEN   -- no JSON, nested too deep
      other := NULL;
    END;
  END IF;
  IF jsonb_typeof(ann->'autoscaling.alpha.kubernetes.io/current-metrics') = 'string' THEN
    BEGIN
      current := (ann->>'autoscaling.alpha.kubernetes.io/current-metrics')::jsonb;
    EXCEPTION WHEN data_exception OR program_limit_exceeded THEN
      current := NULL;
    END;
  END IF;
  FOR m IN SELECT e FROM jsonb_array_elements(kwatch._printer_array(other)) e LOOP
    t := m->>'type';
    metrics := metrics || jsonb_build_array(jsonb_strip_nulls(CASE t
      WHEN 'Resource' THEN jsonb_build_object('type', t, 'resource', jsonb_build_object(
        'name', m->'resource'->'name', 'target', jsonb_build_object(
          'type', CASE WHEN m->'resource'->'targetAverageUtilization' IS NULL THEN 'AverageValue' ELSE 'Utilization' END,
          'averageUtilization', m->'resource'->'targetAverageUtilization',
          'averageValue', m->'resource'->'targetAverageValue')))
      WHEN 'ContainerResource' THEN jsonb_build_object('type', t, 'containerResource', jsonb_build_object(
        'name', m->'containerResource'->'name', 'container', m->'containerResource'->'container',
        'target', jsonb_build_object(
          'type', CASE WHEN m->'containerResource'->'targetAverageUtilization' IS NULL THEN 'AverageValue' ELSE 'Utilization' END,
          'averageUtilization', m->'containerResource'->'targetAverageUtilization',
          'averageValue', m->'containerResource'->'targetAverageValue')))
      WHEN 'Pods' THEN jsonb_build_object('type', t, 'pods', jsonb_build_object(
        'metric', jsonb_build_object('name', m->'pods'->'metricName', 'selector', m->'pods'->'selector'),
        'target', jsonb_build_object('type', 'AverageValue', 'averageValue', m->'pods'->'targetAverageValue')))
      WHEN 'Object' THEN jsonb_build_object('type', t, 'object', jsonb_build_object(
        'describedObject', m->'object'->'target',
        'metric', jsonb_build_object('name', m->'object'->'metricName', 'selector', m->'object'->'selector'),
        'target', jsonb_build_object(
          'type', CASE WHEN m->'object'->'averageValue' IS NULL THEN 'Value' ELSE 'AverageValue' END,
          'value', m->'object'->'targetValue', 'averageValue', m->'object'->'averageValue')))
      WHEN 'External' THEN jsonb_build_object('type', t, 'external', jsonb_build_object(
        'metric', jsonb_build_object('name', m->'external'->'metricName', 'selector', m->'external'->'metricSelector'),
        'target', jsonb_build_object(
          'type', CASE WHEN m->'external'->'targetAverageValue' IS NULL THEN 'Value' ELSE 'AverageValue' END,
          'value', m->'external'->'targetValue', 'averageValue', m->'external'->'targetAverageValue')))
      ELSE jsonb_build_object('type', t) END));
  END LOOP;
  IF object->'spec'->'targetCPUUtilizationPercentage' IS NOT NULL
     AND jsonb_typeof(object->'spec'->'targetCPUUtilizationPercentage') <> 'null' THEN
    metrics := metrics || jsonb_build_array(jsonb_build_object('type', 'Resource', 'resource',
      jsonb_build_object('name', 'cpu', 'target', jsonb_build_object(
        'type', 'Utilization', 'averageUtilization', object->'spec'->'targetCPUUtilizationPercentage'))));
  END IF;
  IF jsonb_array_length(metrics) = 0 THEN
    metrics := '[{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]';
  END IF;
  IF jsonb_typeof(current) = 'array' THEN
    FOR s IN SELECT e FROM jsonb_array_elements(current) e LOOP
      t := s->>'type';
      statuses := statuses || jsonb_build_array(jsonb_strip_nulls(CASE t
        WHEN 'Resource' THEN jsonb_build_object('type', t, 'resource', jsonb_build_object(
          'name', s->'resource'->'name', 'current', jsonb_build_object(
            'averageUtilization', s->'resource'->'currentAverageUtilization',
            'averageValue', s->'resource'->'currentAverageValue')))
        WHEN 'ContainerResource' THEN jsonb_build_object('type', t, 'containerResource', jsonb_build_object(
          'name', s->'containerResource'->'name', 'container', s->'containerResource'->'container',
          'current', jsonb_build_object(
            'averageUtilization', s->'containerResource'->'currentAverageUtilization',
            'averageValue', s->'containerResource'->'currentAverageValue')))
        WHEN 'Pods' THEN jsonb_build_object('type', t, 'pods', jsonb_build_object(
          'metric', jsonb_build_object('name', s->'pods'->'metricName'),
          'current', jsonb_build_object('averageValue', s->'pods'->'currentAverageValue')))
        WHEN 'Object' THEN jsonb_build_object('type', t, 'object', jsonb_build_object(
          'describedObject', s->'object'->'target',
          'metric', jsonb_build_object('name', s->'object'->'metricName'),
          'current', jsonb_build_object('value', s->'object'->'currentValue',
                                        'averageValue', s->'object'->'averageValue')))
        WHEN 'External' THEN jsonb_build_object('type', t, 'external', jsonb_build_object(
          'metric', jsonb_build_object('name', s->'external'->'metricName'),
          'current', jsonb_build_object('value', s->'external'->'currentValue',
                                        'averageValue', s->'external'->'currentAverageValue')))
        ELSE jsonb_build_object('type', t) END));
    END LOOP;
  ELSIF object->'status'->'currentCPUUtilizationPercentage' IS NOT NULL
        AND jsonb_typeof(object->'status'->'currentCPUUtilizationPercentage') <> 'null' THEN
    statuses := jsonb_build_array(jsonb_build_object('type', 'Resource', 'resource',
      jsonb_build_object('name', 'cpu', 'current', jsonb_build_object(
        'averageUtilization', object->'status'->'currentCPUUtilizationPercentage'))));
  END IF;
  RETURN jsonb_build_object('metrics', metrics, 'currentMetrics', statuses);
END
$$;
COMMENT ON FUNCTION kwatch._printer_hpa_v1_metrics(jsonb) IS
'An autoscaling/v1 HPA''s metrics (annotations, CPU target, default cpu 80%) in the autoscaling/v2 shape, as the API server converts them. pkg/apis/autoscaling/v1/conversion.go. Helper of the printer functions.';

-- horizontalpodautoscaler_targets(object jsonb) -> text: TARGETS, per metric
-- "current/target" ("cpu: 50%/80%", "50m/100m (avg)", "<unknown>" for a
-- missing current value, "<auto>" for a missing utilization target,
-- "<unknown type>"), the first two joined with ", ", then " + N more...";
-- NULL (kubectl's "<none>") without metrics.  Statuses are matched to specs by position, as
-- the printer does.  printers.go formatHPAMetrics (1.20 prints Resource
-- metrics without the "cpu: " prefix).
CREATE OR REPLACE FUNCTION kwatch.horizontalpodautoscaler_targets(object jsonb) RETURNS text
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  specs jsonb := kwatch._printer_array(object->'spec'->'metrics');
  statuses jsonb := kwatch._printer_array(object->'status'->'currentMetrics');
  list text[] := '{}';
  spec jsonb;
  i integer;
  stat jsonb;
  src jsonb;
  cur text;
  target text;
  v1 jsonb;
BEGIN
  -- autoscaling/v1 (what watch('horizontalpodautoscalers') stores on a
  -- server whose preferred version it is): the metrics as the API server
  -- converts them before printing (_printer_hpa_v1_metrics)
  IF object->>'apiVersion' = 'autoscaling/v1'
     OR (object->'spec'->'metrics' IS NULL
         AND (object->'spec' ? 'targetCPUUtilizationPercentage'
              OR object->'metadata'->'annotations' ? 'autoscaling.alpha.kubernetes.io/metrics')) THEN
    v1 := kwatch._printer_hpa_v1_metrics(object);
    specs := v1->'metrics';
    statuses := v1->'currentMetrics';
  END IF;
  IF jsonb_array_length(specs) = 0 THEN
    RETURN NULL;
  END IF;
  FOR spec, i IN SELECT e, o - 1 FROM jsonb_array_elements(specs) WITH ORDINALITY AS x(e, o) LOOP
    stat := statuses->i;   -- NULL past the end
    CASE spec->>'type'
    WHEN 'External', 'Object' THEN
      src := CASE spec->>'type' WHEN 'External' THEN spec->'external' ELSE spec->'object' END;
      stat := CASE spec->>'type' WHEN 'External' THEN stat->'external' ELSE stat->'object' END;
      IF jsonb_typeof(stat) <> 'object' THEN stat := NULL; END IF;
      IF src->'target'->'averageValue' IS NOT NULL AND jsonb_typeof(src->'target'->'averageValue') <> 'null' THEN
        cur := '<unknown>';
        IF stat IS NOT NULL AND stat->'current'->'averageValue' IS NOT NULL AND jsonb_typeof(stat->'current'->'averageValue') <> 'null' THEN
          cur := kwatch._printer_quantity(stat->'current'->'averageValue');
        END IF;
        list := list || (cur || '/' || kwatch._printer_quantity(src->'target'->'averageValue') || ' (avg)');
      ELSE
        cur := '<unknown>';
        IF stat IS NOT NULL THEN
          cur := kwatch._printer_quantity(stat->'current'->'value');
        END IF;
        list := list || (cur || '/' || kwatch._printer_quantity(src->'target'->'value'));
      END IF;
    WHEN 'Pods' THEN
      cur := '<unknown>';
      IF jsonb_typeof(stat->'pods') = 'object' THEN
        cur := kwatch._printer_quantity(stat->'pods'->'current'->'averageValue');
      END IF;
      list := list || (cur || '/' || kwatch._printer_quantity(spec->'pods'->'target'->'averageValue'));
    WHEN 'Resource', 'ContainerResource' THEN
      src := CASE spec->>'type' WHEN 'Resource' THEN spec->'resource' ELSE spec->'containerResource' END;
      stat := CASE spec->>'type' WHEN 'Resource' THEN stat->'resource' ELSE stat->'containerResource' END;
      IF jsonb_typeof(stat) <> 'object' THEN stat := NULL; END IF;
      IF src->'target'->'averageValue' IS NOT NULL AND jsonb_typeof(src->'target'->'averageValue') <> 'null' THEN
        cur := '<unknown>';
        IF stat IS NOT NULL THEN
          cur := kwatch._printer_quantity(stat->'current'->'averageValue');
        END IF;
        list := list || (COALESCE(src->>'name', '') || ': ' || cur || '/' || kwatch._printer_quantity(src->'target'->'averageValue'));
      ELSE
        cur := '<unknown>';
        IF stat IS NOT NULL AND jsonb_typeof(stat->'current'->'averageUtilization') = 'number' THEN
          cur := kwatch._printer_int(stat->'current'->'averageUtilization') || '%';
        END IF;
        target := '<auto>';
        IF jsonb_typeof(src->'target'->'averageUtilization') = 'number' THEN
          target := kwatch._printer_int(src->'target'->'averageUtilization') || '%';
        END IF;
        list := list || (COALESCE(src->>'name', '') || ': ' || cur || '/' || target);
      END IF;
    ELSE
      list := list || '<unknown type>'::text;
    END CASE;
  END LOOP;
  IF cardinality(list) > 2 THEN
    RETURN array_to_string(list[1:2], ', ') || ' + ' || (cardinality(list) - 2) || ' more...';
  END IF;
  RETURN array_to_string(list, ', ');
END
$$;
COMMENT ON FUNCTION kwatch.horizontalpodautoscaler_targets(jsonb) IS
'HPA TARGETS cell ("cpu: 50%/80%, 50m/100m + 1 more...", NULL (kubectl''s "<none>")). printers.go formatHPAMetrics (current release).';

-- horizontalpodautoscaler_minpods(object jsonb) -> text: MINPODS,
-- spec.minReplicas, "<unset>".  printers.go printHorizontalPodAutoscaler.
CREATE OR REPLACE FUNCTION kwatch.horizontalpodautoscaler_minpods(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(kwatch._printer_int(object->'spec'->'minReplicas')::text, '<unset>') $$;
COMMENT ON FUNCTION kwatch.horizontalpodautoscaler_minpods(jsonb) IS
'HPA MINPODS cell: spec.minReplicas or "<unset>". printers.go printHorizontalPodAutoscaler.';

-- horizontalpodautoscaler_maxpods(object jsonb) -> bigint: MAXPODS,
-- spec.maxReplicas.  printers.go printHorizontalPodAutoscaler.
CREATE OR REPLACE FUNCTION kwatch.horizontalpodautoscaler_maxpods(object jsonb) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(kwatch._printer_int(object->'spec'->'maxReplicas'), 0) $$;
COMMENT ON FUNCTION kwatch.horizontalpodautoscaler_maxpods(jsonb) IS
'HPA MAXPODS cell: spec.maxReplicas. printers.go printHorizontalPodAutoscaler.';

-- horizontalpodautoscaler_replicas(object jsonb) -> bigint: REPLICAS,
-- status.currentReplicas.  printers.go printHorizontalPodAutoscaler.
CREATE OR REPLACE FUNCTION kwatch.horizontalpodautoscaler_replicas(object jsonb) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(kwatch._printer_int(object->'status'->'currentReplicas'), 0) $$;
COMMENT ON FUNCTION kwatch.horizontalpodautoscaler_replicas(jsonb) IS
'HPA REPLICAS cell: status.currentReplicas. printers.go printHorizontalPodAutoscaler.';
