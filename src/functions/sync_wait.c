/*-------------------------------------------------------------------------
 *
 * sync_wait.c
 *		Sync barriers and relists on demand, for SQL sessions.
 *
 * client-go lets a controller block until its informer's cache is synced
 * (cache.WaitForCacheSync over HasSynced, tools/cache/shared_informer.go)
 * and ask a store to list again.  kwatch's equivalents work on the
 * worker's shared status (shmem.c): each watch's slot says whether its
 * table holds a committed LIST with no relist pending (`synced`), how many
 * LISTs it has merged (`syncs`), how many relists backends asked for
 * (`relist_requests`) and the last one whose LIST committed
 * (`relist_done`).  The worker broadcasts kw_shared->sync_cv whenever
 * `synced` or the state changes, so waiters sleep on the condition
 * variable instead of polling; they wake at least once a second anyway,
 * to notice a worker that died without broadcasting.
 *
 * The SQL functions kwatch.wait_synced() and kwatch.relist() (extension
 * script) resolve names to watch ids and check privileges, then call the
 * two functions here.  kwatch.wait_current() (wait_current.c) waits on the
 * same condition variable.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "kw_common.h"
#include "kw_status.h"
#include "kw_functions.h"

/* A watch a caller waits for. */
typedef struct SyncTarget
{
	int32		id;
	char	   *label;			/* "pods on server \"kind\"", for messages */
	int64		request;		/* a kwatch.relist() request to see served, or 0 */
} SyncTarget;

/*
 * kw_require_served_database: ERRORs 55000 unless this is the database the
 * worker serves (kwatch.database, kw_serves_this_database): elsewhere no
 * watch is ever started nor its status shown, and no request sender sends
 * an apply made at commit.  Without kwatch preloaded (a fleet database
 * that only reads replicated tables: kwatch.database undefined) the error
 * says that, rather than naming an empty database.
 */
void
kw_require_served_database(void)
{
	if (kw_database == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("kwatch is not in shared_preload_libraries, so no kwatch worker or request sender serves database \"%s\"",
						get_database_name(MyDatabaseId)),
				 errdetail("Watches are synced, and applies made at commit sent, by processes the postmaster starts for the database kwatch.database names."),
				 errhint("Add kwatch to shared_preload_libraries, set kwatch.database = '%s', and restart PostgreSQL.",
						 get_database_name(MyDatabaseId))));
	if (!kw_serves_this_database())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the kwatch worker serves database \"%s\", not \"%s\"",
						kw_database ? kw_database : "", get_database_name(MyDatabaseId)),
				 errdetail("kwatch.database names the one database whose watches are synced; watches registered elsewhere are never started."),
				 errhint("Use kwatch in database \"%s\", or set kwatch.database to this database and restart PostgreSQL.",
						 kw_database ? kw_database : "")));
}

/*
 * kw_require_worker_state: ERRORs 55000 unless a worker can sync watches here:
 * kwatch preloaded, this the database kwatch.database names (no
 * database waits on, or reads, another's status), and not a hot standby (the worker starts only once
 * recovery has finished, BgWorkerStart_RecoveryFinished; until then a wait
 * would last until its timeout, or forever).
 */
void
kw_require_worker_state(void)
{
	if (kw_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("kwatch is not in shared_preload_libraries, so no worker syncs any watch"),
				 errhint("Add kwatch to shared_preload_libraries, set kwatch.database, and restart PostgreSQL.")));
	kw_require_served_database();
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("kwatch syncs nothing on a server in recovery (a hot standby)"),
				 errdetail("The standby's mirror tables follow the primary's by replication."),
				 errhint("Call it on the primary.")));
}

/*
 * kw_refuse_uncommitted: ERRORs 55000 when the current transaction wrote
 * the registration of one of the watches ids[0..n-1] (kwatch.watch() in
 * this transaction, or a re-registration): the worker reads registrations
 * as committed (catalog.c) and starts a watch only once the transaction
 * that registered it commits, so a wait for it here could only end at its
 * timeout.  `labels[i]` names watch ids[i] in the message (NULL:
 * its number), `function` the SQL function for the hint.  Reads the rows
 * with the transaction's snapshot, whatever the caller's rights on
 * kwatch.registrations: it tells only whether the caller's own
 * transaction wrote them.
 */
void
kw_refuse_uncommitted(const int32 *ids, char *const *labels, int n,
					  const char *function)
{
	Oid			nsp = get_namespace_oid("kwatch", true);
	Oid			relid = OidIsValid(nsp) ? get_relname_relid("registrations", nsp) : InvalidOid;
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;
	AttrNumber	idatt;
	int			found = -1;

	if (!OidIsValid(relid) || n == 0)
		return;
	idatt = get_attnum(relid, "id");
	if (idatt == InvalidAttrNumber)
		return;
	rel = table_open(relid, AccessShareLock);
	scan = table_beginscan(rel, ActiveSnapshotSet() ? GetActiveSnapshot() : GetTransactionSnapshot(),
						   0, NULL);
	while (found < 0 && (tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		bool		isnull;
		Datum		d = heap_getattr(tup, idatt, RelationGetDescr(rel), &isnull);

		if (isnull ||
			!TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(tup->t_data)))
			continue;
		for (int i = 0; i < n; i++)
			if (ids[i] == DatumGetInt32(d))
				found = i;
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	if (found >= 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 labels && labels[found] ?
				 errmsg("the watch of %s was registered by this transaction", labels[found]) :
				 errmsg("watch %d was registered by this transaction", ids[found]),
				 errdetail("The worker starts a watch when the transaction that registered it commits."),
				 errhint("COMMIT first, then call %s.", function)));
}

/* find_slot: the status slot of watch `id`, or NULL.  Caller holds the lock. */
static KwWatchStatus *
find_slot(int32 id)
{
	for (int i = 0; i < kw_shared->nslots; i++)
		if (kw_shared->slots[i].watch_id == id)
			return &kw_shared->slots[i];
	return NULL;
}

/*
 * wait_for: sleeps until every target's slot is synced and, for a target
 * with a relist request, that request's LIST has committed (relist_done).
 * A request the worker lost (its status slot was reset: a restart, the
 * watch restarted) is made again.  ERRORs: 55000 when a target's watch is
 * in state "failed" (with its last error), 57014 when `timeout_ms` (>= 0)
 * passes first; statement_timeout and cancel interrupt the sleep as usual.
 */
static void
wait_for(SyncTarget *targets, int n, int64 timeout_ms)
{
	TimestampTz start = GetCurrentTimestamp();

	ConditionVariablePrepareToSleep(&kw_shared->sync_cv);
	for (;;)
	{
		int			pending = -1;
		int			failed = -1;
		bool		asked = false;
		char		last_error[KW_ERROR_LEN] = "";
		long		sleep_ms = 1000;

		LWLockAcquire(kw_shared->lock, LW_EXCLUSIVE);
		for (int i = 0; i < n && failed < 0; i++)
		{
			KwWatchStatus *slot = find_slot(targets[i].id);

			if (slot && targets[i].request > 0 &&
				slot->relist_requests < targets[i].request)
			{
				/* the slot was reset since the request: ask again */
				targets[i].request = ++slot->relist_requests;
				asked = true;
			}
			if (slot && slot->state == KW_STATE_FAILED)
			{
				failed = i;
				strlcpy(last_error, slot->last_error, sizeof(last_error));
			}
			else if (pending < 0 &&
					 (slot == NULL || !slot->synced ||
					  slot->relist_done < targets[i].request))
				pending = i;
		}
		LWLockRelease(kw_shared->lock);
		if (asked)
			kw_poke_worker();

		if (failed >= 0)
		{
			ConditionVariableCancelSleep();
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("watch of %s failed", targets[failed].label),
					 last_error[0] ? errdetail("%s", last_error) : 0,
					 errhint("See kwatch.watches for its state; the worker keeps retrying.")));
		}
		if (pending < 0)
			break;
		if (timeout_ms >= 0)
		{
			long		secs;
			int			usecs;
			int64		elapsed_ms;

			TimestampDifference(start, GetCurrentTimestamp(), &secs, &usecs);
			elapsed_ms = (int64) secs * 1000 + usecs / 1000;
			if (elapsed_ms >= timeout_ms)
			{
				ConditionVariableCancelSleep();
				ereport(ERROR,
						(errcode(ERRCODE_QUERY_CANCELED),
						 errmsg("timed out after " INT64_FORMAT " ms waiting for the watch of %s to sync",
								timeout_ms, targets[pending].label),
						 errhint("See kwatch.watches for its state.")));
			}
			sleep_ms = Min(sleep_ms, timeout_ms - elapsed_ms);
		}
		(void) ConditionVariableTimedSleep(&kw_shared->sync_cv, sleep_ms,
										   PG_WAIT_EXTENSION);
	}
	ConditionVariableCancelSleep();
}

/*
 * kw_timeout_ms: argument `argno` of the SQL function being called, a
 * timeout interval, in milliseconds; -1 for NULL (none).  ERRORs 22023
 * when negative.  Used by wait_synced() and wait_current().
 */
int64
kw_timeout_ms(FunctionCallInfo fcinfo, int argno)
{
	Interval   *iv;
	int64		ms;

	if (PG_ARGISNULL(argno))
		return -1;
	iv = PG_GETARG_INTERVAL_P(argno);
	ms = iv->time / 1000 + ((int64) iv->day * SECS_PER_DAY +
							(int64) iv->month * DAYS_PER_MONTH * SECS_PER_DAY) * 1000;
	if (ms < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("timeout must not be negative")));
	return ms;
}

/*
 * visible_labels: fills each target's label from kwatch.watches (one read
 * for all of `ids`, the same ids as an int[] Datum), read as the current
 * user, whose view shows only the watches that user may know of; labels
 * are allocated in `outer`.  ERRORs 42704 for an id it does not show: the
 * wait would tell its state and last error to someone who may not see
 * them.
 */
static void
visible_labels(SyncTarget *targets, int n, Datum ids, MemoryContext outer)
{
	Oid			argtype = INT4ARRAYOID;

	if (SPI_execute_with_args("SELECT w.id, pg_catalog.format('%s on server \"%s\"', w.resource, w.server)"
							  " FROM kwatch.watches w WHERE w.id OPERATOR(pg_catalog.=) ANY ($1)",
							  1, &argtype, &ids, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read kwatch.watches");
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool		isnull;
		int32		id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[r],
													 SPI_tuptable->tupdesc, 1, &isnull));

		for (int i = 0; i < n; i++)
			if (targets[i].id == id)
				targets[i].label = MemoryContextStrdup(outer,
													   SPI_getvalue(SPI_tuptable->vals[r],
																	SPI_tuptable->tupdesc, 2));
	}
	for (int i = 0; i < n; i++)
		if (targets[i].label == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("no watch %d", targets[i].id),
					 errhint("kwatch.watches lists the watches you may see.")));
}

PG_FUNCTION_INFO_V1(kwatch_wait_synced);

/*
 * kwatch_wait_synced: SQL kwatch._wait_synced(ids int[], requests
 * bigint[], timeout interval) -> void.  Returns once each watch ids[i] has
 * a committed LIST and no relist pending -- its table then holds a LIST
 * plus the watch events since, as client-go's HasSynced promises -- and,
 * when requests[i] > 0 (a number kwatch._request_relist() returned), once
 * the LIST that request asked for has committed.  timeout NULL waits until statement_timeout or
 * cancel.  ERRORs: 42704 (an id kwatch.watches does not show the caller),
 * 55000 (not preloaded; a watch in state "failed", with its last error;
 * a watch registered by the current transaction, at once:
 * kw_refuse_uncommitted), 57014 (timeout), 22023 (arrays of different
 * lengths).
 * Refuses (55000) an extension not at the library's version first
 * (kw_check_schema_version).
 */
Datum
kwatch_wait_synced(PG_FUNCTION_ARGS)
{
	ArrayType  *ids;
	ArrayType  *mins;
	int64		timeout_ms = kw_timeout_ms(fcinfo, 2);
	Datum	   *idv,
			   *minv;
	bool	   *idnull,
			   *minnull;
	int			n,
				nm;
	SyncTarget *targets;

	kw_check_schema_version();
	kw_require_worker_state();
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("ids and requests must not be null")));
	ids = PG_GETARG_ARRAYTYPE_P(0);
	mins = PG_GETARG_ARRAYTYPE_P(1);
	deconstruct_array(ids, INT4OID, 4, true, TYPALIGN_INT, &idv, &idnull, &n);
	deconstruct_array(mins, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &minv, &minnull, &nm);
	if (n != nm)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ids and requests must have the same length")));
	targets = palloc0(sizeof(SyncTarget) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		if (idnull[i] || minnull[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("ids and requests must not contain nulls")));
		targets[i].id = DatumGetInt32(idv[i]);
		targets[i].request = DatumGetInt64(minv[i]);
	}
	{
		MemoryContext outer = CurrentMemoryContext;

		SPI_connect();
		visible_labels(targets, n, PointerGetDatum(ids), outer);	/* labels outlive SPI */
		SPI_finish();
	}
	{
		int32	   *idlist = palloc(sizeof(int32) * Max(n, 1));
		char	  **labels = palloc(sizeof(char *) * Max(n, 1));

		for (int i = 0; i < n; i++)
		{
			idlist[i] = targets[i].id;
			labels[i] = targets[i].label;
		}
		kw_refuse_uncommitted(idlist, labels, n,
							  "kwatch.wait_synced() or kwatch.relist(wait => true)");
	}
	wait_for(targets, n, timeout_ms);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(kwatch_request_relist);

/*
 * kwatch_request_relist: SQL kwatch._request_relist(id int) -> bigint.
 * Asks the worker to list watch `id` again now (it ends the watch stream
 * in flight and lists without a resourceVersion, a consistent read) and
 * returns the request's number: the LIST it asked for has committed once
 * the slot's relist_done reaches it (kwatch.relist(wait => true) waits for
 * that with kwatch._wait_synced).  Counted in relist_requests.  ERRORs: 55000 when
 * the worker does not run the watch (not preloaded, no worker, registered
 * by the current transaction, or not yet started after its registration
 * committed).
 * Refuses (55000) an extension not at the library's version first
 * (kw_check_schema_version).
 */
Datum
kwatch_request_relist(PG_FUNCTION_ARGS)
{
	int32		id = PG_GETARG_INT32(0);
	KwWatchStatus *slot;
	int64		request = -1;

	kw_check_schema_version();
	kw_require_worker_state();
	LWLockAcquire(kw_shared->lock, LW_EXCLUSIVE);
	slot = find_slot(id);
	if (slot)
		request = ++slot->relist_requests;
	LWLockRelease(kw_shared->lock);
	/*
	 * A running watch takes the request whatever this transaction wrote to
	 * its row (the 0.7.0 update clears a checkpoint and relists in one
	 * transaction); one the worker does not run yet may be this
	 * transaction's own registration, which only COMMIT starts.
	 */
	if (request < 0)
		kw_refuse_uncommitted(&id, NULL, 1, "kwatch.relist()");
	if (request < 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the worker does not run watch %d yet", id),
				 errhint("A new watch starts when its transaction commits; kwatch.watches shows its state.")));
	kw_poke_worker();
	PG_RETURN_INT64(request);
}
