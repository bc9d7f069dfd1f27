-- ---------------------------------------------------------------------
-- Watches: watch(), unwatch() and relist(), C entry points that check
-- their caller and run their _impl as the extension's owner
-- (src/functions/privileged.c), and what those need: finding the watch a
-- name means for a role, the checks of a registration's owner, retry ranges
-- and deadline, and waking the worker at commit.
-- ---------------------------------------------------------------------

-- _wake_at_commit(): makes the worker reload registrations when (and only
-- if) the current transaction commits.
CREATE OR REPLACE FUNCTION kwatch._wake_at_commit() RETURNS void
    LANGUAGE c
    AS 'MODULE_PATHNAME', 'kwatch_wake_at_commit';
REVOKE ALL ON FUNCTION kwatch._wake_at_commit() FROM PUBLIC;

-- _check_retry_range(name, r): raises invalid_parameter_value unless `r`
-- is NULL or a non-empty range with finite bounds within [10ms, 1 hour].
CREATE OR REPLACE FUNCTION kwatch._check_retry_range(name text, r kwatch.interval_range) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF r IS NOT NULL AND (isempty(r) OR lower_inf(r) OR upper_inf(r)
                        OR lower(r) < interval '10 milliseconds' OR upper(r) > interval '1 hour') THEN
    RAISE EXCEPTION 'invalid % "%"', name, r
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'Give both bounds, between 10ms and 1 hour, e.g. ''[1s,5s]''.';
  END IF;
END
$$;
REVOKE ALL ON FUNCTION kwatch._check_retry_range(text, kwatch.interval_range) FROM PUBLIC;

-- _check_watch_owner(owner, server, resource): raises insufficient_privilege
-- unless the caller of watch/unwatch/relist (src/functions/privileged.c) is
-- a superuser or has the privileges of `owner` (src/functions/ownership.c).
CREATE OR REPLACE FUNCTION kwatch._check_watch_owner(owner oid, server text, resource text) RETURNS void
    LANGUAGE c STRICT
    AS 'MODULE_PATHNAME', 'kwatch_check_watch_owner';
REVOKE ALL ON FUNCTION kwatch._check_watch_owner(oid, text, text) FROM PUBLIC;

-- unwatch(resource, server => NULL, drop_table => false) -> boolean: stops
-- the caller's watch of `resource` on `server` (the default server when
-- NULL) and deletes that server's rows from its mirror table; with
-- drop_table, drops the table when no other server mirrors into it
-- (doc/reference.md).  The work is _unwatch_impl's: a C entry point that
-- checks its caller runs it as the extension's owner
-- (src/functions/privileged.c), as for watch().
CREATE OR REPLACE FUNCTION kwatch.unwatch(resource text, server text DEFAULT NULL::text, drop_table boolean DEFAULT false) RETURNS boolean
    LANGUAGE c
    AS 'MODULE_PATHNAME', 'kwatch_privileged_entry';
REVOKE ALL ON FUNCTION kwatch.unwatch(text, text, boolean) FROM PUBLIC;

-- _request_relist(id) -> bigint: asks the worker to relist watch `id` now;
-- returns the request's number, for _wait_synced
-- (src/functions/sync_wait.c).
CREATE OR REPLACE FUNCTION kwatch._request_relist(id integer) RETURNS bigint
    LANGUAGE c STRICT
    AS 'MODULE_PATHNAME', 'kwatch_request_relist';
REVOKE ALL ON FUNCTION kwatch._request_relist(integer) FROM PUBLIC;

-- relist(resource, server => NULL, wait => false, timeout => NULL) ->
-- boolean: asks the worker to list the caller's watch of `resource` on
-- `server` again now (_relist_impl); a C entry point that checks its
-- caller runs _relist_impl as the extension's owner
-- (src/functions/privileged.c), as for watch().
CREATE OR REPLACE FUNCTION kwatch.relist(resource text, server text DEFAULT NULL::text, wait boolean DEFAULT false, timeout interval DEFAULT NULL::interval) RETURNS boolean
    LANGUAGE c
    AS 'MODULE_PATHNAME', 'kwatch_privileged_entry';
REVOKE ALL ON FUNCTION kwatch.relist(text, text, boolean, interval) FROM PUBLIC;

-- watch(resource, server, namespace, label_selector, field_selector,
-- notify, table_name, secret_data, notify_payload, retry_relist_after,
-- retry_watch_after, history, history_retention, history_max_rows,
-- apply_timeout) -> regclass: registers a watch of `resource` ("pods",
-- "pod", "po", "deployments.apps", a CRD's plural...) on foreign server
-- `server` (the only kwatch server when NULL) and returns its mirror table;
-- syncing starts when the calling transaction commits.  The arguments and
-- errors are _watch_impl's (doc/reference.md describes each).  A C function
-- that runs with its caller's identity, checks it, and runs _watch_impl as
-- the extension's owner (src/functions/privileged.c): a SECURITY DEFINER
-- function could not tell its caller from the session's role.  Refused
-- (42501) inside a security-restricted operation, e.g. from a trigger on a
-- mirror table.  EXECUTE is revoked from PUBLIC: a superuser grants it to
-- the roles that may watch (doc/security.md).
CREATE OR REPLACE FUNCTION kwatch.watch(resource text, server text DEFAULT NULL::text, namespace text DEFAULT NULL::text, label_selector text DEFAULT NULL::text, field_selector text DEFAULT NULL::text, notify boolean DEFAULT true, table_name text DEFAULT NULL::text, secret_data boolean DEFAULT false, notify_payload text DEFAULT NULL::text, retry_relist_after kwatch.interval_range DEFAULT NULL::kwatch.interval_range, retry_watch_after kwatch.interval_range DEFAULT NULL::kwatch.interval_range, history boolean DEFAULT false, history_retention interval DEFAULT NULL::interval, history_max_rows bigint DEFAULT NULL::bigint, apply_timeout interval DEFAULT NULL::interval) RETURNS regclass
    LANGUAGE c
    AS 'MODULE_PATHNAME', 'kwatch_privileged_entry';
REVOKE ALL ON FUNCTION kwatch.watch(text, text, text, text, text, boolean, text, boolean, text, kwatch.interval_range, kwatch.interval_range, boolean, interval, bigint, interval) FROM PUBLIC;

-- _check_apply_timeout() -> trigger: BEFORE INSERT OR UPDATE OF
-- apply_timeout, owner on kwatch.registrations: refuses (42501) a deadline
-- of 0 (none) or longer than kwatch.apply_timeout for a watch whose owner
-- is not a superuser, while the setting has a deadline at all (README
-- "Roles": a table owner's code may not hold an apply worker past
-- kwatch.apply_timeout + 10 s).  kwatch.apply_timeout is a sighup setting:
-- a role cannot raise it for its session.
CREATE OR REPLACE FUNCTION kwatch._check_apply_timeout() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  limit_ interval := pg_catalog.current_setting('kwatch.apply_timeout', true)::interval;
BEGIN
  IF NEW.apply_timeout IS NULL OR limit_ IS NULL OR limit_ = interval '0'
     OR (SELECT a.rolsuper FROM pg_catalog.pg_roles a WHERE a.oid = NEW.owner) THEN
    RETURN NEW;
  END IF;
  IF NEW.apply_timeout = interval '0' OR NEW.apply_timeout > limit_ THEN
    -- a watch given to another role (REASSIGN OWNED): the setting's deadline
    IF TG_OP = 'UPDATE' AND NEW.owner IS DISTINCT FROM OLD.owner
       AND NEW.apply_timeout IS NOT DISTINCT FROM OLD.apply_timeout THEN
      NEW.apply_timeout := NULL;
      RETURN NEW;
    END IF;
    RAISE EXCEPTION 'apply_timeout % is longer than kwatch.apply_timeout (%)',
                    CASE WHEN NEW.apply_timeout = interval '0' THEN '0 (no limit)'
                         ELSE NEW.apply_timeout::text END, limit_
      USING ERRCODE = 'insufficient_privilege',
            DETAIL = 'Only a superuser''s watch may have no deadline or a longer one: its table owner''s code would hold an apply worker from every other watch.',
            HINT = 'Leave apply_timeout out (the setting), or pass a shorter one.';
  END IF;
  RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION kwatch._check_apply_timeout() FROM PUBLIC;

-- _watch_impl(...): watch()'s work, run as the extension's owner for the
-- caller that watch() checked (_caller()).  The resource is resolved
-- through discovery (_discover), the selectors probed with a LIST as the
-- caller (_probe), the table chosen, made or joined, the registration
-- stored and, with `history`, history enabled (also for a watch that
-- exists already).  The watch a call names is the one into table_name when
-- given, else the caller's own of the resource on the server (of several,
-- the one with the same settings; none such: 42P08), else another
-- role's (42710: table_name => for a table of one's own); a table_name
-- that no watch of the resource uses makes a new watch into it.  A watch
-- uses an existing table only when kwatch made it for that resource
-- (kwatch.tables) and the caller owns it (or has its owner's privileges),
-- and a superuser's watch never one a non-superuser owns; joining one says
-- so (NOTICE).  The same call again returns the table.
-- A watch of Secrets stores each value of data and stringData, and the
-- last-applied annotation, as a keyed digest (src/decode/redact.c) unless
-- secret_data => true: the mirror's readers are not the cluster's.
-- notify_payload: 'full' or 'minimal' (seq and type: anyone may LISTEN on
-- a channel); default 'minimal' for Secrets, 'full' otherwise.
-- retry_relist_after, retry_watch_after: ranges ('[1s,5s]') the delay
-- before the next LIST or WATCH after a failure is drawn from; NULL for
-- the settings' backoff.  apply_timeout: the watch's own
-- kwatch.apply_timeout (the trigger check_apply_timeout bounds it).
-- ERRORs: 22023 bad arguments (a selector the API server refuses, a retry
-- range outside [10ms, 1 hour], history_retention without history...),
-- 0A000 a resource without list and watch, 42704 an unknown server or
-- resource, 42P08 several watches of the caller's of the resource on the
-- server and no table_name, 42710 the resource already watched into that table with other
-- settings, or another role's watch of it on the server, 42P07 a table name
-- taken by a table kwatch did not make for this resource, 42501 an existing
-- mirror table the caller may not have the worker write, 42622 a table
-- name too long.
CREATE OR REPLACE FUNCTION kwatch._watch_impl(resource text, server text DEFAULT NULL::text, namespace text DEFAULT NULL::text, label_selector text DEFAULT NULL::text, field_selector text DEFAULT NULL::text, notify boolean DEFAULT true, table_name text DEFAULT NULL::text, secret_data boolean DEFAULT false, notify_payload text DEFAULT NULL::text, retry_relist_after kwatch.interval_range DEFAULT NULL::kwatch.interval_range, retry_watch_after kwatch.interval_range DEFAULT NULL::kwatch.interval_range, history boolean DEFAULT false, history_retention interval DEFAULT NULL::interval, history_max_rows bigint DEFAULT NULL::bigint, apply_timeout interval DEFAULT NULL::interval) RETURNS regclass
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
  srv text := COALESCE(server, kwatch._default_server());
  d record;
  existing kwatch.registrations;
  tbl text;
  canonical text;
  rel regclass;
  owner oid;
  skipped text[];
  caller_super boolean;
BEGIN
  IF NOT COALESCE(history, false) AND (history_retention IS NOT NULL OR history_max_rows IS NOT NULL) THEN
    RAISE EXCEPTION 'history_retention and history_max_rows need history => true'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  label_selector := NULLIF(btrim(label_selector), '');
  field_selector := NULLIF(btrim(field_selector), '');
  namespace := NULLIF(btrim(namespace), '');

  IF namespace IS NOT NULL AND namespace !~ '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$' THEN
    RAISE EXCEPTION 'invalid namespace name "%"', kwatch._excerpt(namespace)
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'Namespace names are DNS labels: lower-case letters, digits and "-".';
  END IF;

  -- the server stays until this transaction ends: a concurrent DROP
  -- SERVER waits, and then sees this watch
  PERFORM kwatch._lock_server(srv);
  d := kwatch._discover(srv, resource);
  caller_super := COALESCE((SELECT a.rolsuper FROM pg_roles a WHERE a.oid = d.caller), false);
  IF NOT (d.verbs @> ARRAY['list', 'watch']) THEN
    RAISE EXCEPTION 'resource "%" cannot be watched', resource
      USING ERRCODE = 'feature_not_supported',
            DETAIL = format('The API server allows only these verbs on %s: %s.',
                            d.plural, array_to_string(d.verbs, ', ')),
            HINT = 'kwatch needs the list and watch verbs.';
  END IF;
  IF namespace IS NOT NULL AND NOT d.namespaced THEN
    RAISE EXCEPTION 'resource "%" is cluster-scoped', d.plural
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'Leave out namespace => for cluster-scoped resources.';
  END IF;
  canonical := CASE d.api_group WHEN '' THEN d.plural ELSE d.plural || '.' || d.api_group END;
  notify_payload := COALESCE(notify_payload,
                             CASE WHEN d.api_group = '' AND d.plural = 'secrets' THEN 'minimal'
                                  ELSE 'full' END);
  IF notify_payload NOT IN ('full', 'minimal') THEN
    RAISE EXCEPTION 'invalid notify_payload "%"', kwatch._excerpt(notify_payload)
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'Use ''full'' (identity of each change) or ''minimal'' (seq and type only).';
  END IF;

  PERFORM kwatch._check_retry_range('retry_relist_after', retry_relist_after);
  PERFORM kwatch._check_retry_range('retry_watch_after', retry_watch_after);
  IF _watch_impl.apply_timeout < interval '0' THEN
    RAISE EXCEPTION 'invalid apply_timeout "%"', _watch_impl.apply_timeout
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'A length of time, 0 for no limit, or NULL for kwatch.apply_timeout.';
  END IF;

  -- The watch this call names: the one into table_name when given (none
  -- there: a new watch, whatever other tables mirror the resource), else
  -- the caller's own watch of the resource on the server (its role or one
  -- it is a member of), else another role's.
  -- Several of the caller's own and no table_name: the one with these
  -- very settings (the same call again), else none is picked (42P08).
  IF _watch_impl.table_name IS NULL
     AND (SELECT count(*) FROM kwatch.registrations r
          WHERE r.server = srv AND r.api_group = d.api_group AND r.plural = d.plural
            AND kwatch._acts_for(d.caller, r.owner)) > 1 THEN
    SELECT r.table_name INTO tbl FROM kwatch.registrations r
    WHERE r.server = srv AND r.api_group = d.api_group AND r.plural = d.plural
      AND kwatch._acts_for(d.caller, r.owner)
      AND r.namespace IS NOT DISTINCT FROM _watch_impl.namespace
      AND r.label_selector IS NOT DISTINCT FROM _watch_impl.label_selector
      AND r.field_selector IS NOT DISTINCT FROM _watch_impl.field_selector
      AND r.notify = _watch_impl.notify
      AND r.secret_data = COALESCE(_watch_impl.secret_data, false)
      AND r.notify_payload = _watch_impl.notify_payload
      AND r.retry_relist_after IS NOT DISTINCT FROM _watch_impl.retry_relist_after
      AND r.retry_watch_after IS NOT DISTINCT FROM _watch_impl.retry_watch_after
      AND r.apply_timeout IS NOT DISTINCT FROM _watch_impl.apply_timeout
    ORDER BY r.id LIMIT 1;
    IF NOT FOUND THEN
      RAISE EXCEPTION '% has % watches of yours on server "%"', canonical,
                      (SELECT count(*) FROM kwatch.registrations r
                       WHERE r.server = srv AND r.api_group = d.api_group AND r.plural = d.plural
                         AND kwatch._acts_for(d.caller, r.owner)), srv
        USING ERRCODE = 'ambiguous_parameter',
              DETAIL = format('They write %s.',
                              (SELECT string_agg(format('k8s.%I (%s)', r.table_name,
                                                        kwatch._watch_label(r.resource, r.namespace,
                                                                            r.label_selector, r.field_selector)),
                                                 ', ' ORDER BY r.id)
                               FROM kwatch.registrations r
                               WHERE r.server = srv AND r.api_group = d.api_group AND r.plural = d.plural
                                 AND kwatch._acts_for(d.caller, r.owner))),
              HINT = 'Pass table_name => to name one of them, or a new table for another watch.';
    END IF;
    _watch_impl.table_name := tbl;
    tbl := NULL;
  END IF;
  SELECT r.* INTO existing FROM kwatch.registrations r
  WHERE r.server = srv AND r.api_group = d.api_group AND r.plural = d.plural
    AND (_watch_impl.table_name IS NULL OR r.table_name = _watch_impl.table_name)
  ORDER BY kwatch._acts_for(d.caller, r.owner) DESC, r.id
  LIMIT 1;
  IF FOUND THEN
    -- Another role's watch: one without that role's privileges learns who
    -- holds it and nothing else; the answer is the same whatever settings
    -- it passed, so it cannot probe the other watch's selectors.  It may
    -- watch the resource into a table of its own.
    IF NOT kwatch._acts_for(d.caller, existing.owner) THEN
      RAISE EXCEPTION '% is already watched on server "%" by role %', canonical, srv,
                      existing.owner::regrole
        USING ERRCODE = 'duplicate_object',
              DETAIL = format('Its watch writes table k8s.%I; nothing was registered for you. Every role with USAGE on server "%s" sees that watch, its settings included, in kwatch.watches.',
                              existing.table_name, srv),
              HINT = 'Pass table_name => for a table of your own, or ask that role to share its table (GRANT SELECT).';
    END IF;
    IF existing.namespace IS NOT DISTINCT FROM namespace
       AND existing.label_selector IS NOT DISTINCT FROM label_selector
       AND existing.field_selector IS NOT DISTINCT FROM field_selector
       AND existing.notify = _watch_impl.notify
       AND existing.secret_data = COALESCE(_watch_impl.secret_data, false)
       AND existing.notify_payload = _watch_impl.notify_payload
       AND existing.retry_relist_after IS NOT DISTINCT FROM _watch_impl.retry_relist_after
       AND existing.retry_watch_after IS NOT DISTINCT FROM _watch_impl.retry_watch_after
       AND existing.apply_timeout IS NOT DISTINCT FROM _watch_impl.apply_timeout
       AND (_watch_impl.table_name IS NULL OR existing.table_name = _watch_impl.table_name) THEN
      rel := format('k8s.%I', existing.table_name)::regclass;
      IF existing.owner <> d.caller THEN
        RAISE NOTICE '% on server "%" is already watched by role %, into %: nothing was registered',
                     canonical, srv, existing.owner::regrole, rel;
      END IF;
      -- watching again picks up a CRD's changed printer columns, on a
      -- table the caller may alter (its owner's role or a member)
      IF d.api_group <> '' AND pg_has_role(d.caller, (SELECT c.relowner FROM pg_class c
                                                      WHERE c.oid = rel), 'USAGE') THEN
        PERFORM kwatch._refresh_printer_columns(srv, d.api_group, d.plural, d.api_version,
                                                     existing.table_name);
        PERFORM kwatch._restore_columns_as_owner(rel, d.api_group, d.plural);
      END IF;
      -- its view kubectl.<t>, made anew where a CRD's columns
      -- changed, on a table the caller may alter
      IF pg_has_role(d.caller, (SELECT c.relowner FROM pg_class c WHERE c.oid = rel), 'USAGE') THEN
        PERFORM kwatch._make_printed_view(rel);
      END IF;
      IF _watch_impl.history THEN
        PERFORM kwatch._history_impl(rel, true, history_retention, history_max_rows);
      END IF;
      RETURN rel;
    END IF;
    RAISE EXCEPTION '% is already watched on server "%" into k8s.% with other settings', canonical, srv,
                    existing.table_name
      USING ERRCODE = 'duplicate_object',
            HINT = format('Call kwatch.unwatch(%L, server => %L) first, or pass table_name => for a second table.',
                          format('k8s.%I', existing.table_name), srv);
  END IF;

  -- The server validates selectors, namespace and permissions for us.
  PERFORM kwatch._probe(srv, d.api_group, d.api_version, d.plural, namespace,
                        label_selector, field_selector);

  -- Table: the one this resource already has (watched on another server;
  -- one the caller may join first), else the plural, else the plural
  -- qualified by the group on a collision.  table_name => names any table
  -- of this resource, or a new one: several tables may mirror one resource
  -- (a role's own).  A name is this resource's only when
  -- kwatch made the table of that name for it (kwatch.tables), whatever
  -- the table's comment says.
  SELECT r.table_name INTO tbl FROM kwatch.registrations r
  WHERE r.api_group = d.api_group AND r.plural = d.plural
  ORDER BY kwatch._acts_for(d.caller, r.owner) DESC, r.id
  LIMIT 1;
  IF _watch_impl.table_name IS NOT NULL THEN
    IF EXISTS (SELECT 1 FROM kwatch.registrations r
               WHERE r.table_name = _watch_impl.table_name
                 AND (r.api_group, r.plural) <> (d.api_group, d.plural))
       OR (to_regclass(format('k8s.%I', _watch_impl.table_name)) IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM kwatch._mirror_table(
                                           to_regclass(format('k8s.%I', _watch_impl.table_name))) t
                           WHERE (t.api_group, t.plural) = (d.api_group, d.plural))) THEN
      RAISE EXCEPTION 'table k8s.% is not a mirror of %', kwatch._excerpt(_watch_impl.table_name), canonical
        USING ERRCODE = 'duplicate_table',
              DETAIL = 'kwatch did not make that table for this resource.',
              HINT = 'Choose another table_name; one table mirrors one resource.';
    END IF;
    tbl := _watch_impl.table_name;
  ELSIF tbl IS NULL THEN
    tbl := d.plural;
    IF EXISTS (SELECT 1 FROM kwatch.registrations r
               WHERE r.table_name = tbl AND (r.api_group, r.plural) <> (d.api_group, d.plural))
       OR (to_regclass(format('k8s.%I', tbl)) IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM kwatch._mirror_table(to_regclass(format('k8s.%I', tbl))) t
                           WHERE (t.api_group, t.plural) = (d.api_group, d.plural))) THEN
      tbl := d.plural || '_' || replace(replace(d.api_group, '.', '_'), '-', '_');
      IF d.api_group = '' THEN
        tbl := d.plural || '_core';
      END IF;
    END IF;
  END IF;
  -- in bytes: the channel 'kwatch_' || tbl must fit in an identifier
  -- (NAMEDATALEN - 1 = 63 bytes), and a longer table name would be cut
  IF octet_length(tbl) > 56 THEN
    RAISE EXCEPTION 'table name "%" is too long', kwatch._excerpt(tbl)
      USING ERRCODE = 'name_too_long', HINT = 'Pass a shorter table_name => ''...''.';
  END IF;

  -- A new mirror table belongs to the registering role: the worker writes
  -- it as its owner (src/apply/sync.c), so a trigger on it runs with the owner's
  -- rights, never a superuser's.  An existing table is joined only when
  -- kwatch made it for this resource and the caller owns it (or has its
  -- owner's privileges); a superuser's watch never joins a table a
  -- non-superuser owns, whose triggers would see everything the superuser's
  -- credentials can list.
  IF to_regclass(format('k8s.%I', tbl)) IS NULL THEN
    -- a table other roles' watches still name (its owner dropped it): made
    -- anew by this caller, it would receive their rows as its owner
    IF EXISTS (SELECT 1 FROM kwatch.registrations r
               WHERE r.table_name = tbl
                 AND NOT kwatch._acts_for(d.caller, r.owner)) THEN
      RAISE EXCEPTION 'table k8s.% is gone, and watches of another role still name it', tbl
        USING ERRCODE = 'insufficient_privilege',
              DETAIL = 'A table made now would be yours, and the worker would write their rows into it.',
              HINT = 'Pass table_name => for a table of your own.';
    END IF;
    rel := kwatch.create_mirror_table(tbl, d.api_group, d.api_version, d.plural);
    EXECUTE format('ALTER TABLE %s OWNER TO %s', rel, d.caller::regrole);
    EXECUTE format('GRANT USAGE ON SCHEMA k8s TO %s', d.caller::regrole);
    UPDATE kwatch.tables t SET made_by = d.caller::regrole WHERE t.relid = rel;
  ELSE
    rel := format('k8s.%I', tbl)::regclass;
    owner := (SELECT c.relowner FROM pg_class c WHERE c.oid = rel);
    IF NOT EXISTS (SELECT 1 FROM kwatch._mirror_table(rel) t
                   WHERE (t.api_group, t.plural) = (d.api_group, d.plural)) THEN
      RAISE EXCEPTION 'table % is not a mirror of %', rel, canonical
        USING ERRCODE = 'duplicate_table',
              DETAIL = 'kwatch did not make that table for this resource.',
              HINT = 'Pass table_name => for a table of your own.';
    END IF;
    IF NOT pg_has_role(d.caller, owner, 'USAGE') THEN
      RAISE EXCEPTION 'permission denied for table %', rel
        USING ERRCODE = 'insufficient_privilege',
              DETAIL = format('%s mirrors %s for role %s; the worker would write your rows as its owner.',
                              rel, canonical, owner::regrole),
              HINT = 'Pass table_name => for a table of your own.';
    END IF;
    IF caller_super AND NOT (SELECT a.rolsuper FROM pg_roles a WHERE a.oid = owner) THEN
      RAISE EXCEPTION 'a superuser''s watch does not write table %, which role % owns', rel, owner::regrole
        USING ERRCODE = 'insufficient_privilege',
              DETAIL = 'Its owner''s triggers and rules would see every object your credentials can list.',
              HINT = 'Pass table_name => for a table of your own, or take the table over first (ALTER TABLE ... OWNER TO).';
    END IF;
    RAISE NOTICE 'the watch of % on server "%" joins table %, owned by role %', canonical, srv,
                 rel, owner::regrole;
    -- as the table's owner: its rows feed the ALTER TABLE's expressions
    PERFORM kwatch._restore_columns_as_owner(rel, d.api_group, d.plural);
  END IF;

  -- A custom resource's printer columns (the columns `kubectl get` shows)
  -- become typed columns of the table (typed_columns()), when the caller
  -- may alter it: its owner's role or a member.
  IF d.api_group <> '' AND pg_has_role(d.caller, (SELECT c.relowner FROM pg_class c
                                                  WHERE c.oid = rel), 'USAGE') THEN
    skipped := kwatch._refresh_printer_columns(srv, d.api_group, d.plural, d.api_version, tbl);
    PERFORM kwatch._restore_columns_as_owner(rel, d.api_group, d.plural);
    IF cardinality(skipped) > 0 THEN
      RAISE NOTICE 'printer columns of % left out of k8s.%: %', canonical, tbl,
                   array_to_string(skipped, '; ');
    END IF;
  END IF;

  INSERT INTO kwatch.registrations
    (server, resource, api_group, api_version, plural, kind, namespaced,
     namespace, label_selector, field_selector, table_name, channel, notify, owner,
     secret_data, notify_payload, retry_relist_after, retry_watch_after, apply_timeout, names)
  VALUES (srv, canonical, d.api_group, d.api_version, d.plural, d.kind, d.namespaced,
          namespace, label_selector, field_selector, tbl, 'kwatch_' || tbl,
          _watch_impl.notify, d.caller, COALESCE(_watch_impl.secret_data, false), _watch_impl.notify_payload,
          _watch_impl.retry_relist_after, _watch_impl.retry_watch_after, _watch_impl.apply_timeout,
          d.names);

  -- what kubectl get -o wide shows, as view kubectl.<t>
  PERFORM kwatch._make_printed_view(rel);
  IF _watch_impl.history THEN
    PERFORM kwatch._history_impl(rel, true, history_retention, history_max_rows);
  END IF;
  PERFORM kwatch._wake_at_commit();
  RETURN rel;
END
$_$;
REVOKE ALL ON FUNCTION kwatch._watch_impl(text, text, text, text, text, boolean, text, boolean, text, kwatch.interval_range, kwatch.interval_range, boolean, interval, bigint, interval) FROM PUBLIC;

-- _names_resource(name, resource, names) -> boolean: whether `name`, as
-- a user types it, names the resource of a watch registered as `resource`
-- (its plural, or plural.group) that answers to `names` (its column
-- kwatch.registrations.names: plural, singular, kind and short names as
-- discovery gave them at watch()).  The forms kubectl accepts
-- (k8s.io/cli-runtime/pkg/resource/builder.go, ResourceOrKindArgs):
-- "name" or "name.group", where name is the plural, the singular, the
-- kind (any case) or a short name ("sa", "cm", "deploy", "po"); the core
-- group is "", "core" or left out.  Lower-cased; NULL names: the plural only.
CREATE OR REPLACE FUNCTION kwatch._names_resource(name text, resource text, names text[]) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
SELECT (split_part(x.n, '.', 1) = split_part(resource, '.', 1)
        OR split_part(x.n, '.', 1) = ANY (COALESCE(names, '{}')))
   AND (strpos(x.n, '.') = 0
        OR (strpos(resource, '.') > 0
            AND substr(x.n, strpos(x.n, '.') + 1) = substr(resource, strpos(resource, '.') + 1))
        OR (strpos(resource, '.') = 0 AND substr(x.n, strpos(x.n, '.') + 1) IN ('', 'core')))
FROM (SELECT lower(btrim(name)) AS n) x
$$;

-- _table_forms(name) -> text[]: the mirror table names (in schema k8s,
-- unqualified) `name` may mean: `name` itself (as kwatch.watches.table_name
-- shows it without "k8s."), and `name` read as an SQL identifier, as a
-- regclass reads one -- "k8s.x", "x", "\"My table\"", "k8s.\"My table\"".
-- Mirror tables live in schema k8s only, so a name of another schema
-- means none.  Never errors.
CREATE OR REPLACE FUNCTION kwatch._table_forms(name text) RETURNS text[]
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  p text[];
BEGIN
  IF name IS NULL THEN
    RETURN '{}';
  END IF;
  BEGIN
    p := parse_ident(name);
  EXCEPTION WHEN OTHERS THEN
    RETURN ARRAY[name];
  END;
  IF cardinality(p) = 1 THEN
    RETURN ARRAY[name, p[1]];
  ELSIF cardinality(p) = 2 AND p[1] = 'k8s' THEN
    RETURN ARRAY[name, p[2]];
  END IF;
  RETURN ARRAY[name];
END
$$;

-- _server_named(server, caller => NULL) -> text: `server`, or the
-- default server when NULL (_default_server), checked to exist as
-- PostgreSQL checks a server's name: ERROR 42704 'server "x" does not
-- exist' otherwise -- unless `caller` (given by unwatch()) still has
-- watches registered under that name (a server dropped before kwatch
-- followed servers: unwatch() removes them).  The check every function
-- taking a server makes (watch() through _discover).
CREATE OR REPLACE FUNCTION kwatch._server_named(server text, caller oid DEFAULT NULL) RETURNS text
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  srv text := COALESCE(server, kwatch._default_server());
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_foreign_server s WHERE s.srvname = srv)
     AND (caller IS NULL
          OR NOT EXISTS (SELECT 1 FROM kwatch.registrations r
                         WHERE r.server = srv AND kwatch._acts_for(caller, r.owner))) THEN
    RAISE EXCEPTION 'server "%" does not exist', srv
      USING ERRCODE = 'undefined_object',
            HINT = 'kwatch.watches lists the servers of the watches you may see.';
  END IF;
  RETURN srv;
END
$$;

-- _watch_label(resource, namespace, label_selector, field_selector) ->
-- text: a watch as a 42P08 DETAIL lists it, e.g. "configmaps in namespace
-- a, label selector app=x".
CREATE OR REPLACE FUNCTION kwatch._watch_label(resource text, namespace text, label_selector text, field_selector text) RETURNS text
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
SELECT resource || COALESCE(' in namespace ' || namespace, ' in all namespaces')
       || COALESCE(', label selector ' || label_selector, '')
       || COALESCE(', field selector ' || field_selector, '')
$$;

-- _find_watch(name, server, caller) -> registrations: the watch `name`
-- means on `server` for role `caller` (unwatch(), relist()): a watch whose
-- resource `name` names (_names_resource: plural, singular, kind, short
-- name, with or without its group) or whose table it names (_table_forms:
-- with or without "k8s."; a table receives one watch per server, so its
-- name with the schema, "k8s.x", which no resource name matches, always
-- tells one).  A name without its group means the core group's resource
-- when a core watch matches (kubectl's priority: core first).  The caller's own watches only (its role or one
-- it has USAGE of; every watch for a superuser); when it has none, the
-- oldest match of another role, which the caller's check then refuses
-- (42501).  NULL (all fields) when nothing matches.  ERRORs: 42P08 several
-- of the caller's watches match (DETAIL: each one's table, namespace and
-- selectors; HINT: name one by its table) -- never one picked silently.
CREATE OR REPLACE FUNCTION kwatch._find_watch(name text, server text, caller oid) RETURNS kwatch.registrations
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  forms text[] := kwatch._table_forms(name);
  own_ids integer[];
  other_id integer;
  listed text[];
  r kwatch.registrations;
BEGIN
  WITH c0 AS (
    SELECT x.*,
           kwatch._names_resource(name, x.resource, x.names || lower(x.kind)) AS by_resource,
           x.table_name = ANY (forms) AS by_table
    FROM kwatch.registrations x
    WHERE x.server = _find_watch.server),
  c AS (
    SELECT c0.*, kwatch._acts_for(caller, c0.owner) AS own
    FROM c0 WHERE c0.by_resource OR c0.by_table),
  -- kubectl's order: a name without its group means the core group's
  -- resource when there is one (restmapper's PriorityRESTMapper)
  m AS (
    SELECT c.* FROM c
    WHERE c.by_table
       OR (c.by_resource
           AND (c.api_group = '' OR strpos(name, '.') > 0
                OR NOT EXISTS (SELECT 1 FROM c c2
                               WHERE c2.by_resource AND c2.api_group = '' AND c2.own = c.own))))
  SELECT array_agg(m.id ORDER BY m.id) FILTER (WHERE m.own),
         min(m.id) FILTER (WHERE NOT m.own)
  INTO own_ids, other_id
  FROM m;
  IF cardinality(own_ids) > 1 THEN
    SELECT array_agg(format('k8s.%I (%s)', x.table_name,
                            kwatch._watch_label(x.resource, x.namespace, x.label_selector,
                                                x.field_selector)) ORDER BY x.id)
    INTO listed
    FROM kwatch.registrations x WHERE x.id = ANY (own_ids);
    RAISE EXCEPTION '"%" matches % of your watches on server "%"', name, cardinality(own_ids), server
      USING ERRCODE = 'ambiguous_parameter',
            DETAIL = format('They write %s.', array_to_string(listed, ', ')),
            HINT = format('Name the watch by its table with its schema, e.g. %L, as kwatch.watches.table_name shows it.',
                          (SELECT format('k8s.%I', x.table_name) FROM kwatch.registrations x
                           WHERE x.id = own_ids[1]));
  END IF;
  SELECT * INTO r FROM kwatch.registrations x WHERE x.id = COALESCE(own_ids[1], other_id);
  RETURN r;
END
$$;
REVOKE ALL ON FUNCTION kwatch._find_watch(text, text, oid) FROM PUBLIC;

-- _unwatch_impl(resource, server, drop_table) -> boolean: unwatch()'s
-- work, run as the extension's owner for the caller: stops the watch
-- _find_watch() finds for the caller (its resource as registered,
-- "deployments.apps", its kind, plural or table name), deletes that
-- server's rows from the mirror table as the table's owner, and with
-- drop_table drops the table (and its view kubectl.<t>) when no other
-- server still mirrors into it; the rows are deleted also before the drop,
-- so that a logical-replication subscriber receives the deletes
-- (doc/operations.md, the fleet recipe).  A table other watches still
-- write is kept, with a WARNING that says so (DETAIL: the caller's own
-- such watches by server; others' only counted), as DROP TABLE ...
-- IF EXISTS warns rather than fails: the watch and its rows go all the
-- same, and the last unwatch(..., drop_table => true) drops the table.
-- Returns false when there is no such watch.  ERRORs: 42704 unknown
-- server (_server_named), 42P08 (_find_watch), 42501 another role's
-- watch, or drop_table of a table the caller does not own.
CREATE OR REPLACE FUNCTION kwatch._unwatch_impl(resource text, server text DEFAULT NULL::text, drop_table boolean DEFAULT false) RETURNS boolean
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  srv text := kwatch._server_named(server, kwatch._caller());
  r kwatch.registrations;
  rel regclass;
  drop_it boolean;
  mine text[];
  others bigint;
BEGIN
  r := kwatch._find_watch(resource, srv, kwatch._caller());
  IF r.id IS NULL THEN
    RETURN false;
  END IF;
  PERFORM kwatch._check_watch_owner(r.owner, srv, r.resource);
  -- the watch's batches in progress end first; later ones wait
  PERFORM kwatch._lock_registration(r.id);
  DELETE FROM kwatch.registrations x WHERE x.id = r.id
  RETURNING * INTO r;
  IF NOT FOUND THEN
    RETURN false;   -- a concurrent unwatch removed it first
  END IF;
  PERFORM kwatch._drop_relist_stage(r.id);
  rel := to_regclass(format('k8s.%I', r.table_name));
  IF rel IS NOT NULL THEN
    drop_it := drop_table AND NOT EXISTS (SELECT 1 FROM kwatch.registrations x
                                          WHERE x.table_name = r.table_name);
    IF drop_table AND NOT drop_it THEN
      SELECT array_agg(DISTINCT format('"%s"', x.server)) FILTER (WHERE kwatch._acts_for(kwatch._caller(), x.owner)),
             count(*) FILTER (WHERE NOT kwatch._acts_for(kwatch._caller(), x.owner))
      INTO mine, others
      FROM kwatch.registrations x WHERE x.table_name = r.table_name;
      RAISE WARNING 'table k8s.% is kept: other watches still write it', r.table_name
        USING DETAIL = concat_ws(' ',
                         CASE cardinality(mine)
                              WHEN 1 THEN format('Your watch on server %s writes it.', mine[1])
                              WHEN 0 THEN NULL
                              ELSE format('Your watches on servers %s write it.', array_to_string(mine, ', ')) END,
                         CASE others
                              WHEN 0 THEN NULL
                              WHEN 1 THEN 'A watch of another role writes it.'
                              ELSE format('%s watches of other roles write it.', others) END),
              HINT = 'The watch and its rows on this server are gone; the last unwatch(..., drop_table => true) of the table drops it.';
    END IF;
    -- only its owner's (or a member's) table: another role may have
    -- watched into it with INSERT, UPDATE and DELETE granted; checked
    -- before anything is deleted
    IF drop_it AND NOT pg_has_role(kwatch._caller(),
                                   (SELECT c.relowner FROM pg_class c WHERE c.oid = rel), 'USAGE') THEN
      RAISE EXCEPTION 'must be owner of table k8s.% to drop it', r.table_name
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'Leave out drop_table => true: the watch and its rows can go without the table.';
    END IF;
    -- the rows go first, as deletes, also when the table is dropped next:
    -- a logical-replication subscriber (the fleet recipe)
    -- receives the deletes, whereas a DROP TABLE is not replicated and
    -- would leave it this cluster's rows for ever.  As the table's owner:
    -- its DELETE triggers never run as the definer.
    PERFORM kwatch._delete_cluster_rows(rel, srv);
    IF drop_it THEN
      PERFORM kwatch._drop_printed_view(rel);
      EXECUTE format('DROP TABLE %s', rel);
    END IF;
  END IF;
  PERFORM kwatch._wake_at_commit();
  RETURN true;
END
$$;
REVOKE ALL ON FUNCTION kwatch._unwatch_impl(text, text, boolean) FROM PUBLIC;

-- _relist_impl(resource, server, wait, timeout) -> boolean: relist()'s
-- work, run as the extension's owner for the caller: asks the worker to
-- list the watch _find_watch() finds for the caller again now (client-go's
-- Store.Resync on demand): it ends the watch stream and merges a fresh,
-- consistent LIST in one transaction, notifying what changed (as
-- preexisting; deletions it finds as final_state_unknown).  With wait,
-- returns once that relist has committed (see wait_synced for the errors
-- and timeout).  Counted in kwatch.watches.relist_requests.  Returns true.
-- ERRORs: 42704 no such watch or server, 42P08 (_find_watch), 42501 another role's
-- watch, 55000 when the worker does not run it yet, and wait_synced()'s
-- when waiting.
CREATE OR REPLACE FUNCTION kwatch._relist_impl(resource text, server text DEFAULT NULL::text, wait boolean DEFAULT false, timeout interval DEFAULT NULL::interval) RETURNS boolean
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  srv text := kwatch._server_named(server);
  r kwatch.registrations;
  request bigint;
BEGIN
  r := kwatch._find_watch(resource, srv, kwatch._caller());
  IF r.id IS NULL THEN
    RAISE EXCEPTION 'no watch of % on server "%"', resource, srv
      USING ERRCODE = 'undefined_object';
  END IF;
  PERFORM kwatch._check_watch_owner(r.owner, srv, r.resource);
  request := kwatch._request_relist(r.id);
  IF wait THEN
    PERFORM kwatch._wait_synced(ARRAY[r.id], ARRAY[request], timeout);
  END IF;
  RETURN true;
END
$$;
REVOKE ALL ON FUNCTION kwatch._relist_impl(text, text, boolean, interval) FROM PUBLIC;

-- _watch_ids(resource, server) -> integer[]: the watches `resource` means
-- for wait_synced() and wait_current(), among those kwatch.watches shows
-- the caller on `server`.  NULL `resource`: the caller's own watches (its
-- role's, or a role's it is a member of -- a superuser's too, without the
-- superuser's bypass) when it has any, else all.  Else the watches whose
-- resource `resource` names or whose table it names, as _find_watch()
-- matches them (kwatch.watches.names: plural, singular, kind, short names,
-- "name.group", a name without its group meaning the core group's
-- resource when the core group has one, as kubectl means it; a table with
-- or without "k8s."): the caller's own when it
-- has any -- all of them, as waiting for several is no choice made for the
-- caller -- else one other role's.  NULL when none.  ERRORs: 42P08 the
-- matches are several other roles' (DETAIL: their tables, which
-- kwatch.watches shows the caller; name one by its table) -- another
-- role's watch never joins what the caller waits for unnoticed.
CREATE OR REPLACE FUNCTION kwatch._watch_ids(resource text, server text) RETURNS integer[]
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  forms text[] := ARRAY(SELECT format('k8s.%I', f) FROM unnest(kwatch._table_forms(resource)) f);
  ids integer[];
  owners integer;
  tables text[];
BEGIN
  WITH RECURSIVE mine(role) AS (
    SELECT a.oid FROM pg_roles a WHERE a.rolname = current_user
    UNION
    SELECT m.roleid FROM pg_auth_members m JOIN mine ON m.member = mine.role),
  c AS (
    SELECT w.id, w.owner::oid AS owner, w.table_name, w.resource,
           kwatch._watch_label(w.resource, w.namespace, w.label_selector, w.field_selector) AS label,
           w.owner::oid IN (SELECT role FROM mine) AS own,
           kwatch._names_resource(_watch_ids.resource, w.resource, w.names) AS by_resource,
           w.table_name = ANY (forms) AS by_table
    FROM kwatch.watches w
    WHERE w.server = _watch_ids.server),
  -- as _find_watch: a name without its group means the core group's
  m AS (
    SELECT c.* FROM c
    WHERE _watch_ids.resource IS NULL OR c.by_table
       OR (c.by_resource
           AND (strpos(c.resource, '.') = 0 OR strpos(_watch_ids.resource, '.') > 0
                OR NOT EXISTS (SELECT 1 FROM c c2
                               WHERE c2.by_resource AND strpos(c2.resource, '.') = 0
                                 AND c2.own = c.own)))),
  best AS (SELECT * FROM m ORDER BY own DESC LIMIT 1)
  SELECT array_agg(m.id ORDER BY m.id), count(DISTINCT m.owner),
         array_agg(format('%s (%s, role %s)', m.table_name, m.label, m.owner::regrole) ORDER BY m.id)
  INTO ids, owners, tables
  FROM m JOIN best b ON m.own = b.own;
  IF resource IS NOT NULL AND owners > 1 THEN
    RAISE EXCEPTION '"%" matches watches of several roles on server "%"', resource, server
      USING ERRCODE = 'ambiguous_parameter',
            DETAIL = format('They write %s.', array_to_string(tables, ', ')),
            HINT = 'Name the watch by its table with its schema, as kwatch.watches.table_name shows it.';
  END IF;
  RETURN ids;
END
$$;

-- _lock_registration(id) -> void (C, src/common/catalog.c): takes watch
-- id's registration lock exclusively until the transaction ends, waiting
-- for the watch's batches in progress; the next ones wait behind it.
-- unwatch() and DROP SERVER ... CASCADE take it before they delete the
-- registration: while a list's batches are spread over several apply
-- workers, their share locks on the row overlap, and a DELETE waiting on
-- the row alone would wait for the whole list.  EXECUTE is revoked from
-- PUBLIC (a role holding it would stall the watch).
CREATE OR REPLACE FUNCTION kwatch._lock_registration(id integer) RETURNS void
    LANGUAGE c STRICT
    AS 'MODULE_PATHNAME', 'kwatch_lock_registration';
REVOKE ALL ON FUNCTION kwatch._lock_registration(integer) FROM PUBLIC;
