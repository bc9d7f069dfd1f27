/*-------------------------------------------------------------------------
 *
 * catalog.c
 *		Reading registrations, and reacting to their changes
 *		transactionally.
 *
 * kwatch.watch() and kwatch.unwatch() (SQL, in the extension script) change
 * kwatch.registrations and call kwatch._wake_at_commit().  The worker must
 * see the change right after COMMIT and never before, and never at all
 * after a ROLLBACK: so the wake-up is a transaction callback that bumps the
 * registration generation and sets the worker's latch on commit only
 * (pg_net wakes its worker the same way).
 *
 * A registration is also a lockable object (kw_lock_registration): the
 * batches applied for its watch share that lock, and unwatch() takes it
 * exclusively before it deletes the row (kwatch._lock_registration).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_policy.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"

#include "kw_common.h"
#include "kw_status.h"

static bool wake_pending = false;
static bool retry_connect_pending = false;
static bool sender_wake_pending = false;
static bool callback_registered = false;

static void
wake_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			if (retry_connect_pending && kw_shared != NULL)
				pg_atomic_write_u64(&kw_shared->connect_refused_at, 0);
			if (wake_pending || retry_connect_pending)
				kw_wake_worker();
			if (sender_wake_pending)
				kw_wake_sender();
			wake_pending = false;
			retry_connect_pending = false;
			sender_wake_pending = false;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			wake_pending = false;
			retry_connect_pending = false;
			sender_wake_pending = false;
			break;
		default:
			break;
	}
}

/*
 * kw_wake_worker_at_commit: arranges for the worker to be woken (reload
 * registrations, and with them see catalog changes, connection.c) when the
 * current transaction commits; nothing happens if it aborts.  Any backend;
 * harmless when kwatch was not preloaded.
 */
/* register_wake_callback: wake_xact_callback, once per process */
static void
register_wake_callback(void)
{
	if (!callback_registered)
	{
		RegisterXactCallback(wake_xact_callback, NULL);
		callback_registered = true;
	}
}

void
kw_wake_worker_at_commit(void)
{
	register_wake_callback();
	wake_pending = true;
}

/*
 * kw_retry_connect_at_commit: when the current transaction commits (a
 * CREATE DATABASE of kwatch.database, ownership.c), a worker that waits to
 * try its connection again (worker.c) tries at once.  Any backend.
 */
void
kw_retry_connect_at_commit(void)
{
	kw_wake_worker_at_commit();
	retry_connect_pending = true;
}

/*
 * kw_wake_sender_at_commit: when the current transaction commits, the
 * request sender is woken (kwatch.apply() at commit queued an apply).
 * Any backend; nothing happens if it aborts.
 */
void
kw_wake_sender_at_commit(void)
{
	register_wake_callback();
	sender_wake_pending = true;
}

PG_FUNCTION_INFO_V1(kwatch_wake_at_commit);

/*
 * kwatch_wake_at_commit: SQL kwatch._wake_at_commit() -> void.  Arranges
 * for the worker to reload registrations when the current transaction
 * commits.  Warns when kwatch was not preloaded, since then no worker runs
 * and nothing will sync.
 */
Datum
kwatch_wake_at_commit(PG_FUNCTION_ARGS)
{
	kw_wake_worker_at_commit();
	if (kw_shared == NULL)
		ereport(WARNING,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("kwatch is not in shared_preload_libraries, so no worker will sync this watch"),
				 errhint("Add kwatch to shared_preload_libraries, set kwatch.database, and restart PostgreSQL.")));
	PG_RETURN_VOID();
}

static char *
getstr(HeapTuple tup, TupleDesc desc, int col, MemoryContext cxt)
{
	char	   *v = SPI_getvalue(tup, desc, col);

	return v ? MemoryContextStrdup(cxt, v) : NULL;
}

/*
 * kw_registrations_read: the rows of kwatch.registrations (only watch
 * `only_id` unless 0) as a List of KwRegistration structs, in id order,
 * the List and everything it points to allocated in `cxt`, so that it
 * outlives SPI_finish (which frees SPI's procedure context, current while
 * this runs).  Reads the table of the library's own schema (the worker
 * starts once the extension is at the library's version, schema_version.c).
 * Needs a transaction with SPI connected.  ERRORs when the table cannot be
 * read.
 */
List *
kw_registrations_read(int32 only_id, MemoryContext cxt)
{
	List	   *regs = NIL;
	Oid			argtype = INT4OID;
	Datum		arg = Int32GetDatum(only_id);
	MemoryContext old;
	int			rc;

	rc = SPI_execute_with_args("SELECT id, server, api_group, api_version, plural, kind, namespaced,"
					 " namespace, label_selector, field_selector, table_name, channel,"
					 " notify, owner, resource_version, created_at,"
					 " secret_data, notify_payload = 'minimal',"
					 " retry_ms[1], retry_ms[2], retry_ms[3], retry_ms[4],"
	/* the watch's own kwatch.apply_timeout, in ms (NULL: none) */
					 " (SELECT LEAST(ms, 2147483647)::int FROM (SELECT extract(epoch FROM"
					 "   apply_timeout) * 1000 AS ms) t WHERE ms IS NOT NULL),"
	/* whether the owner is a superuser (the deadline's bounds) */
					 " COALESCE((SELECT a.rolsuper FROM pg_catalog.pg_roles a"
					 "   WHERE a.oid OPERATOR(pg_catalog.=) r.owner), false)"
					 " FROM kwatch.registrations r"
					 " WHERE $1 = 0 OR id = $1 ORDER BY id",
							   1, &argtype, &arg, NULL, true, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not read kwatch.registrations: %s", SPI_result_code_string(rc));
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	t = SPI_tuptable->vals[i];
		TupleDesc	d = SPI_tuptable->tupdesc;
		KwRegistration *r = MemoryContextAllocZero(cxt, sizeof(KwRegistration));
		bool		isnull;

		r->id = DatumGetInt32(SPI_getbinval(t, d, 1, &isnull));
		r->server = getstr(t, d, 2, cxt);
		r->api_group = getstr(t, d, 3, cxt);
		r->api_version = getstr(t, d, 4, cxt);
		r->plural = getstr(t, d, 5, cxt);
		r->kind = getstr(t, d, 6, cxt);
		r->namespaced = DatumGetBool(SPI_getbinval(t, d, 7, &isnull));
		r->namespace = getstr(t, d, 8, cxt);
		r->label_selector = getstr(t, d, 9, cxt);
		r->field_selector = getstr(t, d, 10, cxt);
		r->table_name = getstr(t, d, 11, cxt);
		r->channel = getstr(t, d, 12, cxt);
		r->notify = DatumGetBool(SPI_getbinval(t, d, 13, &isnull));
		r->owner = DatumGetObjectId(SPI_getbinval(t, d, 14, &isnull));
		r->resource_version = getstr(t, d, 15, cxt);
		r->created_at = getstr(t, d, 16, cxt);
		r->secret_data = DatumGetBool(SPI_getbinval(t, d, 17, &isnull));
		r->notify_minimal = DatumGetBool(SPI_getbinval(t, d, 18, &isnull));
		for (int k = 0; k < 4; k++)
		{
			Datum		ms = SPI_getbinval(t, d, 19 + k, &isnull);

			r->retry_ms[k] = isnull ? 0 : DatumGetInt32(ms);
		}
		{
			Datum		ms = SPI_getbinval(t, d, 23, &isnull);

			r->apply_timeout_ms = isnull ? -1 : DatumGetInt32(ms);
		}
		r->owner_super = DatumGetBool(SPI_getbinval(t, d, 24, &isnull));
		/* the List's cells in `cxt` too: SPI_finish frees SPI's context */
		old = MemoryContextSwitchTo(cxt);
		regs = lappend(regs, r);
		MemoryContextSwitchTo(old);
	}
	return regs;
}

/*
 * kw_lock_registration: takes `mode` on watch `id`'s registration as a
 * database object (the lock manager's tag: kwatch.registrations' relid and
 * the id), held until the transaction ends.  The batches of a watch take
 * AccessShareLock before they lock the registration row (src/apply/sync.c)
 * and write its table; unwatch() and DROP SERVER ... CASCADE take
 * AccessExclusiveLock before they DELETE the row (kwatch_lock_registration).  The row's own FOR SHARE lock would not
 * do alone: a new share locker never waits behind a waiting DELETE
 * (heap_lock_tuple, src/backend/access/heap/heapam.c), so while the batches
 * of a list spread over several apply workers overlap, unwatch() could
 * wait for the whole list; the lock manager queues a new share request
 * behind a waiting exclusive one (lock.c, LockCheckConflicts and the wait
 * queue), so unwatch() waits for the batches running only.  Any backend;
 * ERRORs only as the lock manager does (deadlock, lock_timeout); nothing
 * when kwatch.registrations does not exist (the extension is not here).
 */
void
kw_lock_registration(int32 id, int mode)
{
	Oid			nsp = get_namespace_oid("kwatch", true);
	Oid			relid = OidIsValid(nsp) ? get_relname_relid("registrations", nsp) : InvalidOid;

	if (OidIsValid(relid))
		LockDatabaseObject(relid, (Oid) id, 0, mode);
}

PG_FUNCTION_INFO_V1(kwatch_lock_registration);

/*
 * kwatch_lock_registration: SQL kwatch._lock_registration(id integer) ->
 * void: takes watch `id`'s registration lock exclusively
 * (kw_lock_registration), held until the transaction ends.  unwatch() and
 * DROP SERVER ... CASCADE call it before they DELETE the registration row:
 * it waits for the watch's batches in progress, and the next ones wait
 * behind it, so the DELETE (whose own row lock a new batch's FOR SHARE
 * would overtake) finds no batch in its way; a batch that starts after
 * the DELETE commits finds no row and rolls back (src/apply/sync.c).  A
 * BEFORE DELETE trigger could not do it: the row is locked before a
 * BEFORE ROW trigger runs (GetTupleForTrigger, commands/trigger.c).
 * EXECUTE is revoked from PUBLIC: a role holding the lock would stall the
 * watch.  ERRORs only as the lock manager does.
 */
Datum
kwatch_lock_registration(PG_FUNCTION_ARGS)
{
	if (!PG_ARGISNULL(0))
		kw_lock_registration(PG_GETARG_INT32(0), AccessExclusiveLock);
	PG_RETURN_VOID();
}

/*
 * kw_has_rbac_policy: whether table relid carries the policy kwatch_rbac
 * (kwatch.enable_rbac_rows, sql/schema/functions/rbac_rows.sql): its
 * readers see only the rows their own Kubernetes identity may list.  One
 * index probe of pg_policy; never ERRORs for a table that is gone (false).
 */
bool
kw_has_rbac_policy(Oid relid)
{
	Relation	rel = table_open(PolicyRelationId, AccessShareLock);
	ScanKeyData skey[2];
	SysScanDesc scan;
	bool		found;

	ScanKeyInit(&skey[0], Anum_pg_policy_polrelid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	ScanKeyInit(&skey[1], Anum_pg_policy_polname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum("kwatch_rbac"));
	scan = systable_beginscan(rel, PolicyPolrelidPolnameIndexId, true, NULL, 2, skey);
	found = HeapTupleIsValid(systable_getnext(scan));
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return found;
}
