-- kwatch_fdw_validator(options text[], catalog oid): checks server, user
-- mapping and foreign table options (src/fdw_option.c).
CREATE OR REPLACE FUNCTION kwatch.kwatch_fdw_validator(text[], oid) RETURNS void
    LANGUAGE c STRICT
    AS 'MODULE_PATHNAME', 'kwatch_fdw_validator';

-- kwatch_fdw_handler(): the callbacks of live foreign tables (src/fdw.c,
-- see "Live foreign tables" below).
CREATE OR REPLACE FUNCTION kwatch.kwatch_fdw_handler() RETURNS fdw_handler
    LANGUAGE c STRICT
    AS 'MODULE_PATHNAME', 'kwatch_fdw_handler';

-- kwatch_events_fdw_handler(): the scan callbacks of kwatch.events.
CREATE OR REPLACE FUNCTION kwatch.kwatch_events_fdw_handler() RETURNS fdw_handler
    LANGUAGE c STRICT
    AS 'MODULE_PATHNAME', 'kwatch_events_fdw_handler';

-- kwatch_events_fdw_validator(options text[], catalog oid): rejects every
-- option (fdw_invalid_option_name): the stream has nothing to configure.
CREATE OR REPLACE FUNCTION kwatch.kwatch_events_fdw_validator(text[], oid) RETURNS void
    LANGUAGE c STRICT
    AS 'MODULE_PATHNAME', 'kwatch_events_fdw_validator';
