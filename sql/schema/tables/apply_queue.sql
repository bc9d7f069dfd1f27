-- apply_queue: the applies to send after COMMIT, one row per kwatch.apply()
-- (or kwatch.delete()) at commit, and their outcome.  Written only through
-- kwatch.apply() (as the extension's owner) and the request sender
-- (src/sender/sender.c); no role but the extension's owner reads it (a
-- pending Secret manifest is here until it is sent, then the manifest is
-- cleared); roles see their own through the view kwatch.applies.
-- `object_key` orders the applies of one object: apply() locks
-- kwatch.apply_objects' row of the object, so two transactions applying
-- one object commit in the order of their ids.
CREATE TABLE kwatch.apply_queue (
  id bigserial PRIMARY KEY,
  server text NOT NULL,
  role oid NOT NULL,                         -- who asked: its credentials send it
  role_name text NOT NULL,                   -- and its name then (an oid reused by a new role sends nothing)
  object_key text NOT NULL,                  -- server/group/kind/namespace/name
  api_group text NOT NULL,
  api_version text NOT NULL,
  resource text,                             -- the plural; NULL: found at the send (a CRD of the same transaction)
  kind text NOT NULL,
  namespace text,
  name text NOT NULL,
  field_manager text NOT NULL,
  force boolean NOT NULL,
  verb text NOT NULL DEFAULT 'apply' CHECK (verb IN ('apply', 'delete')),
  delete_options jsonb,                      -- DeleteOptions of a delete
  manifest jsonb,                            -- NULL once finished
  validated boolean NOT NULL,                -- false: the dry run was deferred to the send
  state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'applied', 'failed')),
  http_status integer,
  sqlstate text,
  message text,
  detail text,
  attempts integer NOT NULL DEFAULT 0,
  resource_version text,                     -- of the object the server returned
  uid text,
  created_at timestamptz NOT NULL DEFAULT now(),
  deadline timestamptz NOT NULL,
  next_attempt_at timestamptz NOT NULL DEFAULT '-infinity',
  finished_at timestamptz,
  -- what the server stored, once applied (an apply, not a delete), as
  -- apply(at => 'now') returns it: without metadata.managedFields, a
  -- Secret without data and stringData; kwatch.wait_apply() returns it
  object jsonb
);
CREATE INDEX apply_queue_pending ON kwatch.apply_queue (id) WHERE state = 'pending';
-- the sender's "first pending apply of its object" test
CREATE INDEX apply_queue_pending_object ON kwatch.apply_queue (object_key, id) WHERE state = 'pending';
CREATE INDEX apply_queue_finished ON kwatch.apply_queue (finished_at) WHERE state <> 'pending';
REVOKE ALL ON kwatch.apply_queue FROM PUBLIC;
REVOKE ALL ON SEQUENCE kwatch.apply_queue_id_seq FROM PUBLIC;

-- apply_objects: one row per object ever applied at commit: apply() locks
-- it (FOR UPDATE) in the caller's transaction, so that the applies of one
-- object are queued in commit order (see apply_queue).
CREATE TABLE kwatch.apply_objects (
  object_key text PRIMARY KEY
);
REVOKE ALL ON kwatch.apply_objects FROM PUBLIC;
