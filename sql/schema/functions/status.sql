-- ---------------------------------------------------------------------
-- Status: the worker's state per watch (watch_status, read by the view
-- kwatch.watches) and the metrics in Prometheus' text exposition format
-- (version 0.0.4): the counters client-go's informer exports per watch,
-- with labels server, resource and namespace ("" for all namespaces), from
-- kwatch.watches -- so a role sees the metrics of the watches it may see
-- there.
-- ---------------------------------------------------------------------

-- worker_pid(): the kwatch worker's process id, NULL when none runs.
CREATE OR REPLACE FUNCTION kwatch.worker_pid() RETURNS integer
    LANGUAGE c STRICT
    AS 'MODULE_PATHNAME', 'kwatch_worker_pid';

-- watch_status(): one row per watch the worker runs, from shared memory.
CREATE OR REPLACE FUNCTION kwatch.watch_status(OUT watch_id integer, OUT state text, OUT healthy boolean, OUT resource_version text, OUT objects bigint, OUT last_sync_at timestamp with time zone, OUT state_since timestamp with time zone, OUT last_error text, OUT last_error_at timestamp with time zone, OUT list_calls bigint, OUT watch_calls bigint, OUT relists bigint, OUT added bigint, OUT modified bigint, OUT deleted bigint, OUT bookmarks bigint, OUT notifications bigint, OUT skipped_objects bigint, OUT sanitized_objects bigint, OUT http_errors bigint, OUT decode_errors bigint, OUT database_errors bigint, OUT synced boolean, OUT syncs bigint, OUT relist_requests bigint) RETURNS SETOF record
    LANGUAGE c STRICT
    AS 'MODULE_PATHNAME', 'kwatch_watch_status';

-- _prometheus_label(v) -> text: `v` as a label value: backslash, double
-- quote and line feed escaped, NULL as "".
CREATE OR REPLACE FUNCTION kwatch._prometheus_label(v text) RETURNS text
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT '"' || replace(replace(replace(COALESCE(v, ''), '\', '\\'), '"', '\"'), E'\n', '\n') || '"'
$$;

-- metrics() -> text: one metric family per counter or gauge, each with
-- # HELP and # TYPE lines, a sample per watch the worker runs (watches
-- not yet started have none).  Scraped by postgres_exporter with
-- test/prometheus/queries.yaml, or by anything that can run a query.
CREATE OR REPLACE FUNCTION kwatch.metrics() RETURNS text
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
WITH w AS (
  SELECT format('server=%s,resource=%s,namespace=%s',
                kwatch._prometheus_label(server), kwatch._prometheus_label(resource),
                kwatch._prometheus_label(namespace)) AS l, *
  FROM kwatch.watches
  WHERE syncs IS NOT NULL
),
family(ord, name, type, help) AS (VALUES
  (1,  'kwatch_client_calls_total', 'counter', 'LIST and WATCH requests sent to the API server, by verb.'),
  (2,  'kwatch_relist_requests_total', 'counter', 'Relists asked for with kwatch.relist().'),
  (3,  'kwatch_relists_total', 'counter', 'LISTs after the first: after a 410, an apply failure or a request.'),
  (4,  'kwatch_events_total', 'counter', 'Changes applied to the mirror table, by type.'),
  (5,  'kwatch_notifications_total', 'counter', 'NOTIFY messages sent.'),
  (6,  'kwatch_errors_total', 'counter', 'Errors, by source: http (connection, TLS, status), decode, database.'),
  (7,  'kwatch_skipped_objects_total', 'counter', 'Objects skipped because they could not be stored.'),
  (8,  'kwatch_alive_current', 'gauge', '1 while the watch streams (state watching), else 0.'),
  (9,  'kwatch_failing_current', 'gauge', '1 while the watch is failing (state backoff or failed), else 0.'),
  (10, 'kwatch_synced', 'gauge', '1 once the table holds a committed LIST and no relist is pending.'),
  (11, 'kwatch_objects', 'gauge', 'Rows of this watch in its mirror table.'),
  (12, 'kwatch_sync_lag_seconds', 'gauge', 'Seconds since the table last caught up with the stream (an event, bookmark or relist applied).'),
  (13, 'kwatch_event_ring_oldest_seq', 'gauge', 'Oldest seq kwatch.events still holds.'),
  (14, 'kwatch_event_ring_last_seq', 'gauge', 'Newest committed seq of kwatch.events.')
),
sample(ord, labels, value) AS (
  SELECT 1, l || ',verb="list"', list_calls::float8 FROM w
  UNION ALL SELECT 1, l || ',verb="watch"', watch_calls FROM w
  UNION ALL SELECT 2, l, relist_requests FROM w
  UNION ALL SELECT 3, l, relists FROM w
  UNION ALL SELECT 4, l || ',type="ADDED"', added FROM w
  UNION ALL SELECT 4, l || ',type="MODIFIED"', modified FROM w
  UNION ALL SELECT 4, l || ',type="DELETED"', deleted FROM w
  UNION ALL SELECT 4, l || ',type="BOOKMARK"', bookmarks FROM w
  UNION ALL SELECT 5, l, notifications FROM w
  UNION ALL SELECT 6, l || ',source="http"', http_errors FROM w
  UNION ALL SELECT 6, l || ',source="decode"', decode_errors FROM w
  UNION ALL SELECT 6, l || ',source="database"', database_errors FROM w
  UNION ALL SELECT 7, l, skipped_objects FROM w
  UNION ALL SELECT 8, l, (state = 'watching')::int FROM w
  UNION ALL SELECT 9, l, (state IN ('backoff', 'failed'))::int FROM w
  UNION ALL SELECT 10, l, synced::int FROM w
  UNION ALL SELECT 11, l, objects FROM w
  UNION ALL SELECT 12, l, extract(epoch FROM now() - last_sync_at)::float8 FROM w
                          WHERE last_sync_at IS NOT NULL
  UNION ALL SELECT 13, NULL, kwatch.events_oldest_seq() WHERE kwatch.events_oldest_seq() IS NOT NULL
  UNION ALL SELECT 14, NULL, kwatch.events_last_seq() WHERE kwatch.events_last_seq() IS NOT NULL
)
SELECT COALESCE(string_agg(block, '' ORDER BY ord), '')
FROM (
  SELECT f.ord,
         format(E'# HELP %s %s\n# TYPE %s %s\n', f.name, f.help, f.name, f.type)
         || string_agg(f.name || COALESCE('{' || s.labels || '}', '') || ' '
                       || CASE WHEN s.value = trunc(s.value) AND abs(s.value) < 1e15
                               THEN trunc(s.value)::bigint::text ELSE s.value::text END
                       || E'\n', '' ORDER BY s.labels) AS block
  FROM family f JOIN sample s ON s.ord = f.ord
  GROUP BY f.ord, f.name, f.type, f.help
) b
$$;
