-- registrations: one row per watch, written by watch() and unwatch() (as
-- the extension's owner) and read by the worker, which writes the resume
-- point (resource_version) in the same transaction as the rows it
-- reflects.  A watch is one resource on one server into one table:
-- several roles (or one role, for two namespaces) may watch a resource on
-- a server, each into a table of its own; a table receives one watch per
-- server.  Roles see their own through the view kwatch.watches.
CREATE TABLE kwatch.registrations (
    id               serial PRIMARY KEY,
    server           text NOT NULL,     -- foreign server name = cluster column
    resource         text NOT NULL,     -- canonical: plural, or plural.group
    api_group        text NOT NULL,     -- '' for the core group
    api_version      text NOT NULL,
    plural           text NOT NULL,
    kind             text NOT NULL,
    namespaced       boolean NOT NULL,
    namespace        text,              -- NULL: all namespaces
    label_selector   text,
    field_selector   text,
    table_name       text NOT NULL,     -- in schema k8s
    channel          text NOT NULL,     -- NOTIFY channel
    notify           boolean NOT NULL DEFAULT true,
    owner            oid NOT NULL,      -- role whose user mapping is used
    resource_version text,              -- resume point (checkpoint)
    synced_at        timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    -- Secrets are redacted unless the watch opts in (README "Security",
    -- src/decode/redact.c): the values of a Secret's data and stringData,
    -- and its last-applied annotation, are stored as keyed digests
    secret_data      boolean NOT NULL DEFAULT false,
    -- what a NOTIFY says: 'full' (type, cluster, namespace, name, uid,
    -- resource_version, seq) or 'minimal' (seq and type only); channels are
    -- public (anyone may LISTEN), so Secrets default to 'minimal'
    notify_payload   text NOT NULL DEFAULT 'full'
      CHECK (notify_payload IN ('full', 'minimal')),
    -- retry ranges (types.sql): NULL keeps kwatch.backoff_initial ..
    -- kwatch.backoff_max's jittered exponential backoff
    -- (src/transfer/watch.c, schedule_retry)
    retry_relist_after kwatch.interval_range,
    retry_watch_after  kwatch.interval_range,
    -- their bounds in milliseconds for the worker: [relist lower, relist
    -- upper, watch lower, watch upper]
    retry_ms integer[] GENERATED ALWAYS AS (ARRAY[
      (extract(epoch FROM lower(retry_relist_after)) * 1000)::integer,
      (extract(epoch FROM upper(retry_relist_after)) * 1000)::integer,
      (extract(epoch FROM lower(retry_watch_after)) * 1000)::integer,
      (extract(epoch FROM upper(retry_watch_after)) * 1000)::integer]) STORED,
    -- the watch's own kwatch.apply_timeout (NULL: the setting's); a
    -- non-superuser's may not be 0 (none) nor longer than the setting
    -- (the trigger check_apply_timeout, triggers.sql)
    apply_timeout    interval
      CHECK (apply_timeout IS NULL OR apply_timeout >= interval '0'),
    -- the names the resource answers to, as discovery gave them at watch()
    -- (src/cluster/discovery.c, resource_names): plural, kind in lower
    -- case, singular, short names ("po", "cm", "sa"...).  unwatch(),
    -- relist(), the waits and history() resolve a name from them, also
    -- while the cluster is down; '{}' (plural and kind only) for a watch
    -- made before 0.8.0 until it is watched again
    names            text[] NOT NULL DEFAULT '{}',
    UNIQUE (server, api_group, plural, table_name)
);
SELECT pg_catalog.pg_extension_config_dump('kwatch.registrations', '');
SELECT pg_catalog.pg_extension_config_dump('kwatch.registrations_id_seq', '');
