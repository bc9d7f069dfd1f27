-- kwatch.events: the event stream's foreign table (src/live/events_fdw.c).
-- Deterministic without any watch: plans, pushdown, option validation,
-- privileges.  Rows and sequence numbers are tested in
-- test/integration/test_events.py against a real control plane.
CREATE EXTENSION IF NOT EXISTS kwatch;
\set VERBOSITY terse

-- the wrapper, its server and its table take no options
CREATE SERVER other_events FOREIGN DATA WRAPPER kwatch_events OPTIONS (ring 'big');
ALTER SERVER kwatch_events OPTIONS (ADD size '10');
ALTER FOREIGN TABLE kwatch.events OPTIONS (ADD table_name 'x');
ALTER FOREIGN TABLE kwatch.events ALTER COLUMN seq OPTIONS (ADD column_name 'x');
CREATE USER MAPPING FOR CURRENT_USER SERVER kwatch_events OPTIONS (user 'x');

-- read-only
INSERT INTO kwatch.events (seq) VALUES (1);
DELETE FROM kwatch.events;

-- pushdown: seq ranges (any integer type, either side), text equality on
-- cluster/resource/table_name/type; ORDER BY seq needs no Sort
EXPLAIN (COSTS OFF) SELECT * FROM kwatch.events WHERE seq > 100 ORDER BY seq;
EXPLAIN (COSTS OFF) SELECT * FROM kwatch.events WHERE 100 < seq AND seq <= 200::smallint;
EXPLAIN (COSTS OFF) SELECT * FROM kwatch.events WHERE seq = 7;
EXPLAIN (COSTS OFF) SELECT seq, name FROM kwatch.events
  WHERE seq >= 5 AND cluster = 'prod' AND resource = 'deployments.apps'
    AND table_name = 'deployments' AND type = 'DELETED' AND namespace = 'shop'
  ORDER BY seq;
-- descending order or other columns: sorted by the executor
EXPLAIN (COSTS OFF) SELECT * FROM kwatch.events ORDER BY seq DESC;
EXPLAIN (COSTS OFF) SELECT * FROM kwatch.events WHERE name = 'x' OR seq > 3;
-- parameters: prepared statements keep the pushdown in generic plans
SET plan_cache_mode = force_generic_plan;
PREPARE since(bigint) AS SELECT seq FROM kwatch.events WHERE seq > $1 ORDER BY seq;
EXPLAIN (COSTS OFF) EXECUTE since(42);
EXECUTE since(42);
PREPARE typed(text, int) AS SELECT seq FROM kwatch.events WHERE type = $1 AND seq >= $2;
EXPLAIN (COSTS OFF) EXECUTE typed('ADDED', 1);
EXECUTE typed('ADDED', 1);
RESET plan_cache_mode;
-- a subquery's value is a parameter too
EXPLAIN (COSTS OFF) SELECT seq FROM kwatch.events WHERE seq > (SELECT kwatch.events_last_seq());
SELECT count(*) FROM kwatch.events WHERE seq > (SELECT kwatch.events_last_seq());

-- no watch, no event: empty whatever the quals, including NULL and extremes
SELECT count(*) FROM kwatch.events;
SELECT count(*) FROM kwatch.events WHERE seq > NULL::bigint;
SELECT count(*) FROM kwatch.events WHERE seq > 9223372036854775807;
SELECT count(*) FROM kwatch.events WHERE seq < -9223372036854775808;
SELECT count(*) FROM kwatch.events WHERE type = 'BOOKMARK';
-- the worker may not have restored the sequence yet: NULL or 0 / 1
SELECT kwatch.events_last_seq() IS NULL OR kwatch.events_last_seq() = 0 AS no_events,
       kwatch.events_oldest_seq() IS NULL OR kwatch.events_oldest_seq() = 1 AS starts_at_one;

-- names of every watch's objects: not readable by default
CREATE ROLE kwatch_events_reader;
SET ROLE kwatch_events_reader;
SELECT count(*) FROM kwatch.events;
SELECT kwatch.events_last_seq() IS NULL OR kwatch.events_last_seq() >= 0 AS callable;
RESET ROLE;
GRANT SELECT ON kwatch.events TO kwatch_events_reader;
SET ROLE kwatch_events_reader;
SELECT count(*) FROM kwatch.events;
RESET ROLE;
REVOKE SELECT ON kwatch.events FROM kwatch_events_reader;
DROP ROLE kwatch_events_reader;
