-- ---------------------------------------------------------------------
-- Acting on the cluster with server-side apply.  kwatch.apply() validates
-- every manifest with a dry run in the statement, then applies it at once
-- (at => 'now') or records it in kwatch.apply_queue, in the caller's
-- transaction, for the request sender (a background process,
-- src/sender/sender.c) to send after COMMIT; kwatch.delete() deletes the
-- same ways.  Results: kwatch.applies, kwatch.wait_apply().  Writes through
-- live tables (INSERT, UPDATE, DELETE on a foreign table of a kwatch
-- server; src/live/fdw_modify.c) need no SQL object: every live table takes
-- them, unless its option updatable (or its server's) is 'false'; a role
-- still needs the table's INSERT/UPDATE/DELETE privilege, USAGE on the
-- server and a user mapping, and the cluster's RBAC decides the rest.
-- ---------------------------------------------------------------------

-- kwatch.apply(manifest, server, field_manager, force, dry_run, at,
-- deadline) -> apply_result: server-side apply of one object (PATCH with
-- Content-Type application/apply-patch+yaml, fieldManager, force; the
-- resource found from the manifest's apiVersion and kind by discovery),
-- with the caller's credentials (its user mapping, else the server's
-- PUBLIC one, as live tables choose them).  Always first a dry run
-- (dryRun=All) in the statement; then, by `at`: 'commit' (the default)
-- records it to be sent after COMMIT by the request sender, retried on
-- 429 (Retry-After), 5xx and connection errors until `deadline` after the
-- commit; 'now' sends it in the statement (not undone by ROLLBACK).
-- dry_run => true only validates.  ERRORs (SQLSTATE): 22023 a bad
-- manifest (not an object; no apiVersion, kind or metadata.name) before any
-- request, or an invalid object (the server's causes in DETAIL); 42704 an
-- unknown kind, or not found; KW409 a field-manager conflict (DETAIL: each
-- field and its manager; force => true takes the fields over); 40001 a
-- conflict (a stale resourceVersion in the manifest); 42501 no USAGE on
-- the server, a 403 from the cluster (its reason), or a call from
-- kwatch's own processes; 55000 at commit in a database the worker does
-- not serve; 25006 at commit on a hot standby; what a request raises
-- (08xxx unreachable, 28000 credentials), 54000 a manifest over 3 MB,
-- 55P03 another transaction's uncommitted apply of the object (5 s).  Rule
-- for objects that depend on each other in one transaction: a dry run
-- answered 404 when the same transaction queued the Namespace it names, or
-- an unknown kind when it queued a CRD of its group, does not fail an apply
-- at commit: it is validated when it is sent.
CREATE OR REPLACE FUNCTION kwatch.apply(manifest jsonb, server text DEFAULT NULL::text, field_manager text DEFAULT 'kwatch'::text, force boolean DEFAULT false, dry_run boolean DEFAULT false, at text DEFAULT 'commit'::text, deadline interval DEFAULT '00:10:00'::interval) RETURNS kwatch.apply_result
    LANGUAGE c
    AS 'MODULE_PATHNAME', 'kwatch_apply';

-- kwatch.wait_apply(id, timeout) -> apply_result: waits until apply `id`
-- (made at commit by the caller's role) is applied, and returns it (its
-- object: what the server stored, kept by the request sender without
-- managedFields and a Secret's data; NULL for a delete), or raises its error (its SQLSTATE, the server's message) when it failed.
-- wait_mirror => true then also waits until every watch of that server
-- and resource has committed a checkpoint at or past the applied object's
-- resourceVersion (read your own writes, as wait_current()).  ERRORs:
-- 55000 when the current transaction made the apply ("COMMIT first"),
-- 42704 no such apply visible to the caller, 57014 at the timeout
-- (default: none).
CREATE OR REPLACE FUNCTION kwatch.wait_apply(id bigint, timeout interval DEFAULT NULL::interval, wait_mirror boolean DEFAULT false) RETURNS kwatch.apply_result
    LANGUAGE c
    AS 'MODULE_PATHNAME', 'kwatch_wait_apply';

-- kwatch.delete(resource, name, namespace, server, uid, resource_version,
-- propagation_policy, grace_period, dry_run, at, deadline) -> apply_result:
-- deletes object `name` of `resource` (a name as watch() takes it: "pods",
-- "deployments.apps", a kind) with the caller's credentials, in the same
-- three ways as apply() (a dry run first; at commit through the request
-- sender, or at once).  `uid` and `resource_version` become DeleteOptions
-- preconditions, so the object deleted is the one the caller saw (a
-- different one answers 409: 40001); propagation_policy is 'Orphan',
-- 'Background' or 'Foreground'; grace_period in seconds.  Done means the
-- API server accepted the deletion (200/202): an object with finalizers
-- stays, with metadata.deletionTimestamp set, until they are removed; a
-- send answered 404 counts as done (the object is gone: an earlier attempt
-- whose answer was lost, or another client).  ERRORs: as apply(), and
-- 42704 when the object does not exist at the dry run.
CREATE OR REPLACE FUNCTION kwatch.delete(resource text, name text, namespace text DEFAULT NULL::text, server text DEFAULT NULL::text, uid text DEFAULT NULL::text, resource_version text DEFAULT NULL::text, propagation_policy text DEFAULT NULL::text, grace_period integer DEFAULT NULL::integer, dry_run boolean DEFAULT false, at text DEFAULT 'commit'::text, deadline interval DEFAULT '00:10:00'::interval) RETURNS kwatch.apply_result
    LANGUAGE c
    AS 'MODULE_PATHNAME', 'kwatch_delete';
