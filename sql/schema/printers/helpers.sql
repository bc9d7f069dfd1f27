-- ---------------------------------------------------------------------
-- kubectl's printed columns as SQL functions of the stored object: this
-- file has the helpers the kinds share, each kind its file beside it
-- (pods.sql, nodes.sql, ...), and functions/printed_views.sql the views
-- kubectl.<t> made of them.
--
-- Every printer function takes `object jsonb`, the full object as the
-- API server returns it in JSON (what a mirror table's `object` column
-- holds), and returns one cell of the Table the API server serves for
-- `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`.  The rules
-- are ported from the Kubernetes printers,
-- pkg/printers/internalversion/printers.go, of the current release
-- line (kubernetes/kubernetes master, the 1.34-era file: Job STATUS,
-- CronJob TIMEZONE, PV/PVC VOLUMEATTRIBUTESCLASS columns, sidecar init
-- containers, SchedulingGated; read from the reference index, file
-- version 59882936, whose printers_test.go companion is file version
-- 100530230).  Each function names the printers.go function it follows.
-- test/printers/README.md lists the cells where the 1.20 printers print
-- differently; test/printers/run.sh checks them against the upstream
-- printer tests.
--
-- The API server prints with GenerateOptions{Wide: true}
-- (pkg/printers/storage/storage.go, ConvertToTable), so the cells here
-- are the wide ones: a LoadBalancer's EXTERNAL-IP and an Ingress's
-- ADDRESS are not clipped to 16 characters (the functions that clip
-- take `wide => false`).
--
-- Every function pins search_path (pg_catalog, pg_temp): its body is
-- parsed when it runs, as whoever reads a kubectl.<t> view or maintains
-- an index on it, and an operator or function of that reader's path (a
-- writable public schema) must not be what runs.
--
-- IMMUTABLE PARALLEL SAFE: every function reads only its arguments.
-- Cells that depend on the current time (AGE, a Job's DURATION while it
-- runs, RESTARTS' "(3m ago)", an Event's LAST SEEN, a CronJob's LAST
-- SCHEDULE) are given as the timestamp they are computed from, plus a
-- function of (object, at timestamptz) that formats them for a given
-- instant: a view passes now(), so nothing here calls now().
--
-- A cell kubectl prints as "<none>" (nothing to show: a pod not yet
-- scheduled, a node without roles, a service without selector) is NULL
-- here, so that `WHERE node IS NULL` finds it; psql's
-- `\pset null '<none>'` shows it as kubectl does.  Every other cell is
-- the Table's text, the other words in brackets ("<unknown>",
-- "<pending>", "<unset>", "<invalid>", "<error>") included.
--
-- Timestamps: the API server writes RFC 3339 with an explicit zone
-- ("Z"), whose reading depends on neither TimeZone nor DateStyle; a
-- zero metav1.Time is written as null and is NULL here (kubectl:
-- "<unknown>").
--
-- The printer files need no library: test/printers/run.sh loads them
-- into a plain PostgreSQL.
-- ---------------------------------------------------------------------

-- _printer_time(text) -> timestamptz: an RFC 3339 timestamp written by the
-- API server ("2024-05-01T10:00:00Z", "...T10:00:00.123456Z") as
-- timestamptz; NULL (a zero metav1.Time) stays NULL, and so does text
-- that is no RFC 3339 time ("yesterday", a month 13: what the API server
-- would refuse), never an error.  The library's k8s_timestamp does the
-- same in C; this one needs no library.  The pattern keeps the exception
-- block (a subtransaction) for the rare text that looks right and is not.
CREATE OR REPLACE FUNCTION kwatch._printer_time(ts text) RETURNS timestamp with time zone
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
BEGIN
  IF ts !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$' THEN
    RETURN NULL;
  END IF;
  BEGIN
    RETURN ts::timestamptz;
  EXCEPTION WHEN data_exception THEN   -- a zone past +-15:59, a month 13...
    RETURN NULL;
  END;
END
$_$;
COMMENT ON FUNCTION kwatch._printer_time(text) IS
'RFC 3339 timestamp as written by the API server -> timestamptz; NULL for NULL or for text that is no such time, never an error. Helper of the printer functions.';

-- human_duration(d interval) -> text: the duration as kubectl prints ages
-- ("30s", "5m", "3m10s", "100m", "7h59m", "2d1h", "90d", "2y1d", "10y";
-- "0s" for up to 2 s in the future, "<invalid>" beyond).  Port of
-- k8s.io/apimachinery/pkg/util/duration.HumanDuration (same text in 1.20
-- and today).  Give it the difference of two timestamps: an interval with
-- a months field counts 30 days a month.
CREATE OR REPLACE FUNCTION kwatch.human_duration(d interval) RETURNS text
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  secs numeric := extract(epoch FROM d);   -- microsecond precision
  seconds bigint := trunc(secs);           -- Go int(d.Seconds()) truncates
  minutes bigint;
  hours bigint;
BEGIN
  IF seconds < -1 THEN
    RETURN '<invalid>';
  ELSIF seconds < 0 THEN
    RETURN '0s';
  ELSIF seconds < 60 * 2 THEN
    RETURN seconds || 's';
  END IF;
  minutes := trunc(secs / 60);
  IF minutes < 10 THEN
    IF seconds % 60 = 0 THEN
      RETURN minutes || 'm';
    END IF;
    RETURN minutes || 'm' || (seconds % 60) || 's';
  ELSIF minutes < 60 * 3 THEN
    RETURN minutes || 'm';
  END IF;
  hours := trunc(secs / 3600);
  IF hours < 8 THEN
    IF minutes % 60 = 0 THEN
      RETURN hours || 'h';
    END IF;
    RETURN hours || 'h' || (minutes % 60) || 'm';
  ELSIF hours < 48 THEN
    RETURN hours || 'h';
  ELSIF hours < 24 * 8 THEN
    IF hours % 24 = 0 THEN
      RETURN (hours / 24) || 'd';
    END IF;
    RETURN (hours / 24) || 'd' || (hours % 24) || 'h';
  ELSIF hours < 24 * 365 * 2 THEN
    RETURN (hours / 24) || 'd';
  ELSIF hours < 24 * 365 * 8 THEN
    IF (hours / 24) % 365 = 0 THEN
      RETURN (hours / 24 / 365) || 'y';
    END IF;
    RETURN (hours / 24 / 365) || 'y' || ((hours / 24) % 365) || 'd';
  END IF;
  RETURN (hours / 24 / 365) || 'y';
END
$$;
COMMENT ON FUNCTION kwatch.human_duration(interval) IS
'Duration as kubectl prints it ("3m10s", "2d1h", "10y"). Port of apimachinery util/duration.HumanDuration.';

-- translate_timestamp_since(ts timestamptz, at timestamptz) -> text: the
-- AGE cell of an object created at `ts`, printed at instant `at`
-- ("<unknown>" when ts is NULL).  printers.go translateTimestampSince,
-- with time.Now() made the argument `at`: a view passes now().
CREATE OR REPLACE FUNCTION kwatch.translate_timestamp_since(ts timestamp with time zone, at timestamp with time zone) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT CASE WHEN ts IS NULL THEN '<unknown>' ELSE kwatch.human_duration(at - ts) END $$;
COMMENT ON FUNCTION kwatch.translate_timestamp_since(timestamp with time zone, timestamp with time zone) IS
'AGE-style cell: human_duration(at - ts), "<unknown>" for NULL. printers.go translateTimestampSince with now() as the argument at.';

-- age(object jsonb, at timestamptz) -> text: the AGE cell of any object at
-- instant `at`, from metadata.creationTimestamp.  printers.go
-- translateTimestampSince(obj.CreationTimestamp).
CREATE OR REPLACE FUNCTION kwatch.age(object jsonb, at timestamp with time zone) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT kwatch.translate_timestamp_since(kwatch._printer_time(object->'metadata'->>'creationTimestamp'), at) $$;
COMMENT ON FUNCTION kwatch.age(jsonb, timestamp with time zone) IS
'AGE cell of any object at instant at (a view passes now()). printers.go translateTimestampSince(CreationTimestamp).';

-- _printer_format_labels(labels jsonb) -> text: a string map as
-- "k1=v1,k2=v2", keys in byte order, NULL (kubectl's "<none>") when empty.
-- apimachinery labels.FormatLabels.
CREATE OR REPLACE FUNCTION kwatch._printer_format_labels(labels jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT string_agg(key || '=' || value, ',' ORDER BY key COLLATE "C")
  FROM jsonb_each_text(CASE WHEN jsonb_typeof(labels) = 'object' THEN labels ELSE '{}' END)
$$;
COMMENT ON FUNCTION kwatch._printer_format_labels(jsonb) IS
'String map as "k=v,..." sorted, NULL (kubectl''s "<none>") when empty. apimachinery labels.FormatLabels.';

-- _printer_count(j jsonb) -> integer: the number of entries of a JSON
-- array or object (Go len() of a slice or map), 0 for null or absent.
CREATE OR REPLACE FUNCTION kwatch._printer_count(j jsonb) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT CASE jsonb_typeof(j)
           WHEN 'array' THEN jsonb_array_length(j)
           WHEN 'object' THEN (SELECT count(*)::integer FROM jsonb_object_keys(j))
           ELSE 0 END
$$;
COMMENT ON FUNCTION kwatch._printer_count(jsonb) IS
'Go len() of a JSON array or object, 0 for null/absent. Helper of the printer functions.';

-- _printer_array(j jsonb) -> jsonb: j when it is an array, else '[]'.
CREATE OR REPLACE FUNCTION kwatch._printer_array(j jsonb) RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT CASE WHEN jsonb_typeof(j) = 'array' THEN j ELSE '[]'::jsonb END $$;
COMMENT ON FUNCTION kwatch._printer_array(jsonb) IS
'j when it is a JSON array, else []. Helper of the printer functions.';

-- _printer_int(j jsonb) -> bigint: j when it is a JSON integer in int64's
-- range, else NULL (a string, a fraction, an object...): what Go's decoder
-- would refuse, so an object the API server never serves; a printer cell
-- must not fail a query (or an index on it, which the worker writes) over
-- a row written by hand.
CREATE OR REPLACE FUNCTION kwatch._printer_int(j jsonb) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$ SELECT CASE WHEN jsonb_typeof(j) = 'number' AND j::text ~ '^-?[0-9]{1,18}$'
                  THEN j::text::bigint END $_$;
COMMENT ON FUNCTION kwatch._printer_int(jsonb) IS
'j as bigint when it is a JSON integer (up to 18 digits), else NULL, never an error. Helper of the printer functions.';

-- _printer_int32(j jsonb) -> integer: j when it is a JSON integer in
-- int32's range, else NULL, never an error (as _printer_int).
CREATE OR REPLACE FUNCTION kwatch._printer_int32(j jsonb) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$ SELECT CASE WHEN jsonb_typeof(j) = 'number' AND j::text ~ '^-?[0-9]{1,9}$'
                  THEN j::text::integer END $_$;
COMMENT ON FUNCTION kwatch._printer_int32(jsonb) IS
'j as integer when it is a JSON integer (up to 9 digits), else NULL, never an error. Helper of the printer functions.';

-- _printer_bool(j jsonb) -> boolean: j when it is a JSON boolean, else
-- NULL, never an error (as _printer_int).
CREATE OR REPLACE FUNCTION kwatch._printer_bool(j jsonb) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT CASE WHEN jsonb_typeof(j) = 'boolean' THEN j::text::boolean END $$;
COMMENT ON FUNCTION kwatch._printer_bool(jsonb) IS
'j as boolean when it is a JSON boolean, else NULL, never an error. Helper of the printer functions.';

-- _printer_access_modes(modes jsonb) -> text: access modes as "RWO,ROX,
-- RWX,RWOP" (that order, duplicates once, unknown modes left out).
-- pkg/apis/core/helper GetAccessModesAsString (1.20 has no RWOP).
CREATE OR REPLACE FUNCTION kwatch._printer_access_modes(modes jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT COALESCE(string_agg(short, ',' ORDER BY ord), '')
  FROM (VALUES (1, 'ReadWriteOnce', 'RWO'), (2, 'ReadOnlyMany', 'ROX'),
               (3, 'ReadWriteMany', 'RWX'), (4, 'ReadWriteOncePod', 'RWOP')) AS m(ord, mode, short)
  WHERE kwatch._printer_array(modes) @> jsonb_build_array(mode)
$$;
COMMENT ON FUNCTION kwatch._printer_access_modes(jsonb) IS
'Access modes as "RWO,ROX,RWX,RWOP". pkg/apis/core/helper GetAccessModesAsString.';

-- _printer_lb_status(status jsonb, wide boolean) -> text: a
-- (Ingress)LoadBalancerStatus as its ingress points, the IP of each or its
-- hostname when it has no IP, sorted and distinct, joined with ","; when
-- not wide, clipped to 13 characters + "..." past 16.  printers.go
-- loadBalancerStatusStringer / ingressLoadBalancerStatusStringer.
CREATE OR REPLACE FUNCTION kwatch._printer_lb_status(status jsonb, wide boolean) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT CASE WHEN NOT wide AND length(r) > 16 THEN substr(r, 1, 13) || '...' ELSE r END
  FROM (SELECT COALESCE(string_agg(DISTINCT point COLLATE "C", ',' ORDER BY point COLLATE "C"), '') AS r
        FROM (SELECT CASE WHEN COALESCE(i->>'ip', '') <> '' THEN i->>'ip'
                          WHEN COALESCE(i->>'hostname', '') <> '' THEN i->>'hostname' END AS point
              FROM jsonb_array_elements(kwatch._printer_array(status->'ingress')) i) p
        WHERE point IS NOT NULL) s
$$;
COMMENT ON FUNCTION kwatch._printer_lb_status(jsonb, boolean) IS
'LoadBalancer ingress points "ip|hostname,..." sorted; clipped to 16 when not wide. printers.go loadBalancerStatusStringer.';

-- _printer_quantity(q jsonb) -> text: a *resource.Quantity's String():
-- the serialized text (the API server writes the form the printer's
-- String() returns), "<nil>" for a nil pointer.
CREATE OR REPLACE FUNCTION kwatch._printer_quantity(q jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT CASE WHEN q IS NULL OR jsonb_typeof(q) = 'null' THEN '<nil>' ELSE q #>> '{}' END $$;
COMMENT ON FUNCTION kwatch._printer_quantity(jsonb) IS
'(*resource.Quantity).String(): the serialized quantity, "<nil>" for a nil pointer.';

-- _printer_container_cells(containers jsonb, field text) -> text: the
-- CONTAINERS (field 'name') or IMAGES (field 'image') cell of a pod
-- template: that field of each of spec.containers, in order, joined with
-- "," ("" for no containers; a container without the field adds "").
-- Init containers are not listed (printers.go passes only Containers).
-- printers.go layoutContainerCells.
CREATE OR REPLACE FUNCTION kwatch._printer_container_cells(containers jsonb, field text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT COALESCE(string_agg(COALESCE(c->>field, ''), ',' ORDER BY o), '')
  FROM jsonb_array_elements(kwatch._printer_array(containers)) WITH ORDINALITY AS x(c, o)
$$;
COMMENT ON FUNCTION kwatch._printer_container_cells(jsonb, text) IS
'Containers'' names (field name) or images (field image) joined with ",". printers.go layoutContainerCells.';

-- _printer_label_key_valid(key text) -> boolean: whether key is a valid
-- label key: an optional prefix, a DNS-1123 subdomain of at most 253
-- bytes, and "/", then a name of 1 to 63 bytes of [A-Za-z0-9._-] that
-- starts and ends alphanumeric (NULL, Go's "", is not valid).
-- apimachinery util/validation IsQualifiedName (1.20; IsLabelKey today,
-- the same rule), which labels.NewRequirement checks.
CREATE OR REPLACE FUNCTION kwatch._printer_label_key_valid(key text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
  SELECT COALESCE(CASE cardinality(p)
           WHEN 1 THEN true
           WHEN 2 THEN octet_length(p[1]) BETWEEN 1 AND 253
                       AND p[1] ~ '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'
           ELSE false END
         AND octet_length(p[cardinality(p)]) BETWEEN 1 AND 63
         AND p[cardinality(p)] ~ '^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$', false)
  FROM (SELECT string_to_array(key, '/') AS p) s
$_$;
COMMENT ON FUNCTION kwatch._printer_label_key_valid(text) IS
'Whether key is a valid label key ([prefix/]name). apimachinery validation.IsQualifiedName, as labels.NewRequirement checks it.';

-- _printer_label_value_valid(value text) -> boolean: whether value is a
-- valid label value: at most 63 bytes, empty or [A-Za-z0-9._-] starting
-- and ending alphanumeric.  apimachinery util/validation
-- IsValidLabelValue, which labels.NewRequirement checks.
CREATE OR REPLACE FUNCTION kwatch._printer_label_value_valid(value text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
  SELECT COALESCE(octet_length(value) <= 63
                  AND value ~ '^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$', false)
$_$;
COMMENT ON FUNCTION kwatch._printer_label_value_valid(text) IS
'Whether value is a valid label value. apimachinery validation.IsValidLabelValue, as labels.NewRequirement checks it.';

-- _printer_label_selector(selector jsonb) -> text: a metav1.LabelSelector
-- as labels.Selector's String() prints it after LabelSelectorAsSelector:
-- one requirement per matchLabels entry ("k=v") and per matchExpressions
-- entry (In "k in (a,b)", NotIn "k notin (a,b)", Exists "k",
-- DoesNotExist "!k"; several values sorted in byte order, duplicates
-- kept, a single value as written), sorted by key in byte order and
-- joined with ",".  Requirements with the same key keep their order,
-- matchLabels' first, as Go's sort.Sort leaves them for up to 12
-- requirements.  "" for a nil (absent or null) selector (labels.Nothing())
-- and for one with neither matchLabels nor matchExpressions
-- (labels.Everything()).  NULL where LabelSelectorAsSelector returns an
-- error: an operator other than In/NotIn/Exists/DoesNotExist, In/NotIn
-- without values, Exists/DoesNotExist with values, an invalid key or
-- value (labels.NewRequirement).  apimachinery meta/v1
-- LabelSelectorAsSelector, labels Requirement.String and
-- internalSelector.String (same in 1.20 and today).
CREATE OR REPLACE FUNCTION kwatch._printer_label_selector(selector jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  WITH req AS (
    SELECT 0 AS src, 0::bigint AS ord, m.key, '=' AS op, ARRAY[COALESCE(m.value, '')] AS vals
    FROM jsonb_each_text(CASE WHEN jsonb_typeof(selector->'matchLabels') = 'object'
                              THEN selector->'matchLabels' ELSE '{}'::jsonb END) AS m(key, value)
    UNION ALL
    SELECT 1, x.o, COALESCE(x.e->>'key', ''), COALESCE(x.e->>'operator', ''),
           ARRAY(SELECT COALESCE(v, '')
                 FROM jsonb_array_elements_text(kwatch._printer_array(x.e->'values')) WITH ORDINALITY AS y(v, n)
                 ORDER BY n)
    FROM jsonb_array_elements(kwatch._printer_array(selector->'matchExpressions')) WITH ORDINALITY AS x(e, o)
  ), r AS (
    SELECT src, ord, key,
           kwatch._printer_label_key_valid(key)
           AND CASE WHEN src = 0 THEN true
                    WHEN op IN ('In', 'NotIn') THEN cardinality(vals) > 0
                    WHEN op IN ('Exists', 'DoesNotExist') THEN cardinality(vals) = 0
                    ELSE false END
           AND NOT EXISTS (SELECT FROM unnest(vals) AS v WHERE NOT kwatch._printer_label_value_valid(v)) AS ok,
           CASE WHEN src = 1 AND op = 'DoesNotExist' THEN '!' ELSE '' END || key
           || CASE WHEN src = 0 THEN '=' WHEN op = 'In' THEN ' in (' WHEN op = 'NotIn' THEN ' notin (' ELSE '' END
           || CASE WHEN src = 0 OR op IN ('In', 'NotIn') THEN
                     CASE WHEN cardinality(vals) = 1 THEN vals[1]
                          ELSE (SELECT COALESCE(string_agg(v, ',' ORDER BY v COLLATE "C"), '') FROM unnest(vals) AS v) END
                   ELSE '' END
           || CASE WHEN src = 1 AND op IN ('In', 'NotIn') THEN ')' ELSE '' END AS txt
    FROM req
  )
  SELECT CASE WHEN jsonb_typeof(selector) IS DISTINCT FROM 'object' THEN ''
              WHEN NOT COALESCE(bool_and(ok), true) THEN NULL
              ELSE COALESCE(string_agg(txt, ',' ORDER BY key COLLATE "C", src, ord), '') END
  FROM r
$$;
COMMENT ON FUNCTION kwatch._printer_label_selector(jsonb) IS
'LabelSelector as labels.Selector String() prints it ("a=b,k in (x,y),!z"), "" for nil or empty, NULL when invalid. apimachinery LabelSelectorAsSelector.';

-- _printer_format_label_selector(selector jsonb) -> text: a
-- metav1.LabelSelector as the printers show it: _printer_label_selector's
-- text, NULL (kubectl's "<none>") when that is "" (nil or empty selector), "<error>" when
-- the selector is invalid.  apimachinery meta/v1 FormatLabelSelector.
CREATE OR REPLACE FUNCTION kwatch._printer_format_label_selector(selector jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT CASE WHEN s IS NULL THEN '<error>' WHEN s = '' THEN NULL ELSE s END
  FROM (SELECT kwatch._printer_label_selector(selector) AS s) x
$$;
COMMENT ON FUNCTION kwatch._printer_format_label_selector(jsonb) IS
'LabelSelector as "k=v,k in (a,b)", NULL (kubectl''s "<none>") for nil or empty, "<error>" when invalid. apimachinery metav1.FormatLabelSelector.';
