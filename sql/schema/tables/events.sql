-- Event stream: every change the worker applied, in order, from a ring in
-- shared memory (src/apply/events.c), as the foreign table kwatch.events of
-- its own wrapper (fdw.sql, src/live/events_fdw.c).  README "Event stream"
-- has the recipe.

-- events: one row per applied change (ADDED, MODIFIED, DELETED, including
-- deletions found by a relist), seq ascending with no holes.  Rows older
-- than events_oldest_seq() are gone (ring of kwatch.event_buffer entries,
-- emptied by a PostgreSQL restart).  truncated: a text field was longer than
-- Kubernetes allows and was cut (never for valid objects).  The last three
-- columns are what client-go tells its event handlers: the origin flags
-- and the previous resourceVersion (src/common/kw_common.h, KwChange; NOTIFY
-- payloads carry the same keys, src/apply/notify.c).
CREATE FOREIGN TABLE kwatch.events (
    seq              bigint NOT NULL,
    at               timestamptz NOT NULL,
    cluster          text NOT NULL,
    resource         text NOT NULL,
    table_name       text NOT NULL,
    type             text NOT NULL,
    namespace        text,
    name             text NOT NULL,
    uid              text NOT NULL,
    resource_version text NOT NULL,
    truncated        boolean NOT NULL,
    preexisting      boolean NOT NULL,
    final_state_unknown boolean NOT NULL,
    previous_resource_version text
) SERVER kwatch_events;
COMMENT ON COLUMN kwatch.events.preexisting IS
  'the change was found by a LIST (initial sync or relist), not a watch event';
COMMENT ON COLUMN kwatch.events.final_state_unknown IS
  'a DELETED inferred by a relist: the object''s last state was not seen (client-go DeletedFinalStateUnknown)';
COMMENT ON COLUMN kwatch.events.previous_resource_version IS
  'on MODIFIED, the resourceVersion the row held before';
-- Names of objects of every watch: readable by superusers and roles
-- granted SELECT, like the mirror tables.
REVOKE ALL ON kwatch.events FROM PUBLIC;

-- event_state: at most one row, the last seq the worker committed, written
-- in the same transaction as the rows; the sequence continues from it after
-- a restart (and after a pg_dump/restore: the row is dumped).
CREATE TABLE kwatch.event_state (
    one      boolean PRIMARY KEY DEFAULT true CHECK (one),
    last_seq bigint NOT NULL
);
SELECT pg_catalog.pg_extension_config_dump('kwatch.event_state', '');
