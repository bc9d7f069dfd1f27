-- Clusters are foreign servers of the kwatch foreign data wrapper: CREATE
-- SERVER prod FOREIGN DATA WRAPPER kwatch OPTIONS (kubeconfig '...')
-- (doc/clusters.md).  Its handler serves live foreign tables
-- (src/live/fdw.c); its validator checks server, user mapping and foreign
-- table options (src/cluster/fdw_option.c).
CREATE FOREIGN DATA WRAPPER kwatch
  HANDLER kwatch.kwatch_fdw_handler VALIDATOR kwatch.kwatch_fdw_validator;

-- The event stream's own wrapper and server: kwatch.events
-- (tables/events.sql) reads the ring in shared memory (src/apply/events.c)
-- through it (src/live/events_fdw.c).
CREATE FOREIGN DATA WRAPPER kwatch_events
  HANDLER kwatch.kwatch_events_fdw_handler VALIDATOR kwatch.kwatch_events_fdw_validator;
CREATE SERVER kwatch_events FOREIGN DATA WRAPPER kwatch_events;
