-- ---------------------------------------------------------------------
-- The event stream kwatch.events (tables/events.sql): where it begins
-- and ends.
-- ---------------------------------------------------------------------

-- events_last_seq(): seq of the newest committed event (0 before the
-- first); NULL while the stream is unavailable (no worker started yet, or
-- kwatch not preloaded).
CREATE OR REPLACE FUNCTION kwatch.events_last_seq() RETURNS bigint
    LANGUAGE c PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'kwatch_events_last_seq';

-- events_oldest_seq(): the oldest seq kwatch.events still holds
-- (events_last_seq() + 1 when none).  A reader whose last seen seq L has
-- events_oldest_seq() > L + 1 missed events: re-read the mirror tables.
CREATE OR REPLACE FUNCTION kwatch.events_oldest_seq() RETURNS bigint
    LANGUAGE c PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'kwatch_events_oldest_seq';
