-- ---------------------------------------------------------------------
-- The handler and validator functions of kwatch's two foreign data
-- wrappers (fdw.sql makes the wrappers): kwatch, whose servers are the
-- clusters and whose foreign tables are live tables, and kwatch_events,
-- whose one server serves the event stream kwatch.events.
-- ---------------------------------------------------------------------

-- kwatch_fdw_validator(options text[], catalog oid): checks server, user
-- mapping and foreign table options (src/cluster/fdw_option.c).
CREATE OR REPLACE FUNCTION kwatch.kwatch_fdw_validator(text[], oid) RETURNS void
    LANGUAGE c STRICT
    AS 'MODULE_PATHNAME', 'kwatch_fdw_validator';

-- kwatch_fdw_handler(): the callbacks of live foreign tables
-- (src/live/fdw.c): scans that turn WHERE clauses into label and field
-- selectors, and INSERT, UPDATE and DELETE sent to the API server
-- (src/live/fdw_modify.c).
CREATE OR REPLACE FUNCTION kwatch.kwatch_fdw_handler() RETURNS fdw_handler
    LANGUAGE c STRICT
    AS 'MODULE_PATHNAME', 'kwatch_fdw_handler';

-- kwatch_events_fdw_handler(): the scan callbacks of kwatch.events
-- (src/live/events_fdw.c).
CREATE OR REPLACE FUNCTION kwatch.kwatch_events_fdw_handler() RETURNS fdw_handler
    LANGUAGE c STRICT
    AS 'MODULE_PATHNAME', 'kwatch_events_fdw_handler';

-- kwatch_events_fdw_validator(options text[], catalog oid): rejects every
-- option (fdw_invalid_option_name): the stream has nothing to configure.
CREATE OR REPLACE FUNCTION kwatch.kwatch_events_fdw_validator(text[], oid) RETURNS void
    LANGUAGE c STRICT
    AS 'MODULE_PATHNAME', 'kwatch_events_fdw_validator';
