-- ---------------------------------------------------------------------
-- Events (core/v1 Event JSON): printers.go printEvent,
-- formatEventSource
-- ---------------------------------------------------------------------

-- event_first_seen(object jsonb) -> timestamptz: what FIRST SEEN is
-- computed from: firstTimestamp, else eventTime; NULL: "<unknown>".
-- printers.go printEvent.
CREATE OR REPLACE FUNCTION kwatch.event_first_seen(object jsonb) RETURNS timestamp with time zone
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT CASE WHEN object->>'firstTimestamp' IS NOT NULL THEN kwatch._printer_time(object->>'firstTimestamp')
              ELSE kwatch._printer_time(object->>'eventTime') END
$$;
COMMENT ON FUNCTION kwatch.event_first_seen(jsonb) IS
'Event time FIRST SEEN is computed from: firstTimestamp, else eventTime. printers.go printEvent.';

-- event_last_seen(object jsonb) -> timestamptz: what LAST SEEN is computed
-- from: series.lastObservedTime for a series, else lastTimestamp, else
-- FIRST SEEN's time; NULL: "<unknown>".  printers.go printEvent.
CREATE OR REPLACE FUNCTION kwatch.event_last_seen(object jsonb) RETURNS timestamp with time zone
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT CASE WHEN jsonb_typeof(object->'series') = 'object' THEN kwatch._printer_time(object->'series'->>'lastObservedTime')
              WHEN object->>'lastTimestamp' IS NOT NULL THEN kwatch._printer_time(object->>'lastTimestamp')
              ELSE kwatch.event_first_seen(object) END
$$;
COMMENT ON FUNCTION kwatch.event_last_seen(jsonb) IS
'Event time LAST SEEN is computed from: series.lastObservedTime, else lastTimestamp, else first seen. printers.go printEvent.';

-- event_last_seen_text(object jsonb, at timestamptz) -> text: LAST SEEN at
-- instant `at` ("2d", "<unknown>").  printers.go printEvent.
CREATE OR REPLACE FUNCTION kwatch.event_last_seen_text(object jsonb, at timestamp with time zone) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT kwatch.translate_timestamp_since(kwatch.event_last_seen(object), at) $$;
COMMENT ON FUNCTION kwatch.event_last_seen_text(jsonb, timestamp with time zone) IS
'Event LAST SEEN cell at instant at (a view passes now()). printers.go printEvent.';

-- event_first_seen_text(object jsonb, at timestamptz) -> text: FIRST SEEN
-- at instant `at`.  printers.go printEvent (wide).
CREATE OR REPLACE FUNCTION kwatch.event_first_seen_text(object jsonb, at timestamp with time zone) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT kwatch.translate_timestamp_since(kwatch.event_first_seen(object), at) $$;
COMMENT ON FUNCTION kwatch.event_first_seen_text(jsonb, timestamp with time zone) IS
'Event FIRST SEEN cell at instant at (a view passes now()). printers.go printEvent (wide).';

-- event_type(object jsonb) -> text: TYPE (Normal, Warning).
-- printers.go printEvent.
CREATE OR REPLACE FUNCTION kwatch.event_type(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(object->>'type', '') $$;
COMMENT ON FUNCTION kwatch.event_type(jsonb) IS
'Event TYPE cell. printers.go printEvent.';

-- event_reason(object jsonb) -> text: REASON.  printers.go printEvent.
CREATE OR REPLACE FUNCTION kwatch.event_reason(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(object->>'reason', '') $$;
COMMENT ON FUNCTION kwatch.event_reason(jsonb) IS
'Event REASON cell. printers.go printEvent.';

-- event_object(object jsonb) -> text: OBJECT, "kind/name" of the involved
-- object, kind in lower case ("pod/web-1"; "node" without a name).
-- printers.go printEvent.
CREATE OR REPLACE FUNCTION kwatch.event_object(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT lower(COALESCE(object->'involvedObject'->>'kind', ''))
         || CASE WHEN COALESCE(object->'involvedObject'->>'name', '') <> '' THEN '/' || (object->'involvedObject'->>'name') ELSE '' END
$$;
COMMENT ON FUNCTION kwatch.event_object(jsonb) IS
'Event OBJECT cell "kind/name" (kind lower-cased). printers.go printEvent.';

-- event_subobject(object jsonb) -> text: SUBOBJECT,
-- involvedObject.fieldPath.  printers.go printEvent (wide).
CREATE OR REPLACE FUNCTION kwatch.event_subobject(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(object->'involvedObject'->>'fieldPath', '') $$;
COMMENT ON FUNCTION kwatch.event_subobject(jsonb) IS
'Event SUBOBJECT cell: involvedObject.fieldPath. printers.go printEvent (wide).';

-- event_source(object jsonb) -> text: SOURCE, "component, host" (the
-- component else reportingComponent, the host else reportingInstance; the
-- component alone without a host).  printers.go formatEventSource (wide).
CREATE OR REPLACE FUNCTION kwatch.event_source(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT component || CASE WHEN instance = '' THEN '' ELSE ', ' || instance END
  FROM (SELECT COALESCE(NULLIF(object->'source'->>'component', ''), object->>'reportingComponent', '') AS component,
               COALESCE(NULLIF(object->'source'->>'host', ''), object->>'reportingInstance', '') AS instance) s
$$;
COMMENT ON FUNCTION kwatch.event_source(jsonb) IS
'Event SOURCE cell "component, host". printers.go formatEventSource (wide).';

-- event_message(object jsonb) -> text: MESSAGE, with leading and trailing
-- white space (Go unicode.IsSpace) removed.  printers.go printEvent.
CREATE OR REPLACE FUNCTION kwatch.event_message(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT btrim(COALESCE(object->>'message', ''),
               E' \t\n\r\f\x0B' || E'\u0085\u00A0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200A\u2028\u2029\u202F\u205F\u3000')
$$;
COMMENT ON FUNCTION kwatch.event_message(jsonb) IS
'Event MESSAGE cell, white space trimmed (strings.TrimSpace). printers.go printEvent.';

-- event_count(object jsonb) -> bigint: COUNT, series.count for a series,
-- else count, else 1 (singleton events of the new API carry no count).
-- printers.go printEvent (1.20 prints series.count + 1).
CREATE OR REPLACE FUNCTION kwatch.event_count(object jsonb) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT CASE WHEN jsonb_typeof(object->'series') = 'object' THEN COALESCE(kwatch._printer_int(object->'series'->'count'), 0)
              WHEN COALESCE(kwatch._printer_int(object->'count'), 0) = 0 THEN 1
              ELSE kwatch._printer_int(object->'count') END
$$;
COMMENT ON FUNCTION kwatch.event_count(jsonb) IS
'Event COUNT cell: series.count, count, or 1. printers.go printEvent (current release).';
