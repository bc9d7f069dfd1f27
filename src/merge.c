/*-------------------------------------------------------------------------
 *
 * merge.c
 *		Large relist merges in a background worker of their own, so that
 *		the other watches keep streaming meanwhile.
 *
 * One process (worker.c) serves every watch, and a relist's merge is one
 * transaction (readers never see half a relist): merging 50,000 objects
 * takes about two seconds, during which no other watch's change reached
 * its table.  When a LIST staged at least kwatch.background_merge_objects
 * objects, the worker hands the merge to a dynamic background worker
 * instead (kw_merge_start) and goes on serving the others; the watch
 * itself waits (its WATCH starts from the list's resourceVersion once the
 * merge committed).  The merge runs the same code the worker would
 * (kw_sync_relist_finish: merge, sweep, NOTIFY, event stream, checkpoint)
 * on the staging table the worker filled (kwatch_stage.relist_stage_<id>,
 * a regular unlogged table for this reason, sync.c), as the bootstrap
 * superuser acting as the table's owner, and reports its outcome in the
 * watch's status slot.  The event stream stays in commit order: whoever
 * appends holds the writer lock until its commit (events.c), so the
 * worker waits only for the merge's commit, not for the merge.
 *
 * The merge's own life: started with bgw_notify_pid = the worker, so the
 * worker's latch is set when it exits; never restarted (the worker relists
 * again after a failure); stopped with the watch (kw_merge_stop).  If the
 * worker itself restarts meanwhile, the merge still commits or aborts on
 * its own; the new worker's relist waits for its locks.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "kw_common.h"
#include "kw_worker.h"
#include "kw_events.h"

/*
 * kw_merge_start: starts a background merge of watch `reg`'s staged LIST,
 * whose resourceVersion is `list_rv`, after recording the request in
 * `slot`.  Returns the handle, or NULL when no background worker slot is
 * free (max_worker_processes): the caller then merges in-process.
 */
BackgroundWorkerHandle *
kw_merge_start(KwRegistration *reg, KwWatchStatus *slot, const char *list_rv)
{
	BackgroundWorker bgw;
	BackgroundWorkerHandle *handle;

	LWLockAcquire(kw_shared->lock, LW_EXCLUSIVE);
	strlcpy(slot->merge_rv, list_rv, KW_RV_LEN);
	slot->merge_state = KW_MERGE_RUNNING;
	slot->merge_error[0] = '\0';
	memset(slot->merge_counts, 0, sizeof(slot->merge_counts));
	LWLockRelease(kw_shared->lock);

	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
	bgw.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(bgw.bgw_library_name, BGW_MAXLEN, "kwatch");
	snprintf(bgw.bgw_function_name, BGW_MAXLEN, "kwatch_merge_main");
	snprintf(bgw.bgw_name, BGW_MAXLEN, "kwatch relist merge of watch %d", reg->id);
	snprintf(bgw.bgw_type, BGW_MAXLEN, "kwatch relist merge");
	bgw.bgw_main_arg = Int32GetDatum(reg->id);
	bgw.bgw_notify_pid = MyProcPid;
	if (!RegisterDynamicBackgroundWorker(&bgw, &handle))
	{
		LWLockAcquire(kw_shared->lock, LW_EXCLUSIVE);
		slot->merge_state = KW_MERGE_NONE;
		LWLockRelease(kw_shared->lock);
		return NULL;
	}
	return handle;
}

/*
 * kw_merge_poll: whether the merge behind `handle` has ended; if so, its
 * outcome from `slot`: true with *counts on success, false with *errmsg
 * (palloc'd) and *sqlstate otherwise (also when it died before reporting).
 */
bool
kw_merge_poll(BackgroundWorkerHandle *handle, KwWatchStatus *slot, bool *ok,
			  KwApplyCounts *counts, char **errmsg, int *sqlstate)
{
	pid_t		pid;
	int			state;

	if (GetBackgroundWorkerPid(handle, &pid) != BGWH_STOPPED)
		return false;
	LWLockAcquire(kw_shared->lock, LW_EXCLUSIVE);
	state = slot->merge_state;
	*ok = (state == KW_MERGE_DONE);
	counts->added = slot->merge_counts[0];
	counts->modified = slot->merge_counts[1];
	counts->deleted = slot->merge_counts[2];
	counts->notified = slot->merge_counts[3];
	*errmsg = pstrdup(state == KW_MERGE_FAILED ? slot->merge_error :
					  "the relist merge's background worker exited without committing");
	*sqlstate = slot->merge_sqlstate;
	slot->merge_state = KW_MERGE_NONE;
	LWLockRelease(kw_shared->lock);
	return true;
}

/*
 * kw_merge_stop: asks the merge behind `handle` to stop (its transaction
 * rolls back unless it already committed) and forgets it.
 */
void
kw_merge_stop(BackgroundWorkerHandle *handle)
{
	TerminateBackgroundWorker(handle);
	pfree(handle);
}

/* report: publishes the merge's outcome in the slot of watch `id`, if any. */
static void
report(int32 id, bool ok, KwApplyCounts *counts, const char *err, int sqlstate)
{
	LWLockAcquire(kw_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < kw_shared->nslots; i++)
	{
		KwWatchStatus *slot = &kw_shared->slots[i];

		if (slot->watch_id != id || slot->merge_state != KW_MERGE_RUNNING)
			continue;
		slot->merge_state = ok ? KW_MERGE_DONE : KW_MERGE_FAILED;
		if (counts)
		{
			slot->merge_counts[0] = counts->added;
			slot->merge_counts[1] = counts->modified;
			slot->merge_counts[2] = counts->deleted;
			slot->merge_counts[3] = counts->notified;
		}
		strlcpy(slot->merge_error, err ? err : "", KW_ERROR_LEN);
		slot->merge_sqlstate = sqlstate;
	}
	LWLockRelease(kw_shared->lock);
}

/* merge_rv: the list resourceVersion the worker left in watch `id`'s slot. */
static char *
merge_rv(int32 id)
{
	char	   *rv = NULL;

	LWLockAcquire(kw_shared->lock, LW_SHARED);
	for (int i = 0; i < kw_shared->nslots; i++)
		if (kw_shared->slots[i].watch_id == id &&
			kw_shared->slots[i].merge_state == KW_MERGE_RUNNING)
			rv = pstrdup(kw_shared->slots[i].merge_rv);
	LWLockRelease(kw_shared->lock);
	return rv;
}

/*
 * kwatch_merge_main: the background merge's entry point
 * (bgw_function_name); `main_arg` is the watch id.  Connects to
 * kwatch.database as the bootstrap superuser, merges the watch's staged
 * LIST in one transaction (kw_sync_relist_finish), reports the outcome in
 * the watch's status slot and exits.
 */
void
kwatch_merge_main(Datum main_arg)
{
	int32		id = DatumGetInt32(main_arg);
	MemoryContext cxt;
	char	   *rv;
	KwApplyCounts counts = {0};

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(kw_database, NULL, 0);
	pgstat_report_appname("kwatch relist merge");
	kw_events_writer_init();

	/*
	 * As the worker: a lock held on the mirror table (an ALTER TABLE) makes
	 * the merge fail with lock_not_available after 2 s, and the worker
	 * tries again shortly with the same staged list (watch.c,
	 * apply_failed); a statement_timeout set on the database must not cut a
	 * merge short.
	 */
	SetConfigOption("lock_timeout", "2s", PGC_SUSET, PGC_S_SESSION);
	SetConfigOption("statement_timeout", "0", PGC_SUSET, PGC_S_SESSION);
	/* as the worker: nothing a role creates may stand in for pg_catalog's */
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_SESSION);

	cxt = AllocSetContextCreate(TopMemoryContext, "kwatch merge", ALLOCSET_DEFAULT_SIZES);
	rv = merge_rv(id);
	if (rv == NULL)
		proc_exit(0);			/* the watch is gone */

	PG_TRY();
	{
		List	   *regs;
		KwRegistration *reg;
		KwSyncPlans *plans;
		HTAB	   *known;

		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		pgstat_report_activity(STATE_RUNNING, "kwatch relist merge");

		/*
		 * Fence: hold the staging table against a new relist of the same
		 * watch (its TRUNCATE and inserts wait), then make sure the merge
		 * is still wanted -- a worker that restarted or stopped the watch
		 * meanwhile reset the slot -- before reading anything.
		 */
		if (SPI_execute(psprintf("LOCK TABLE kwatch_stage.relist_stage_%d IN SHARE MODE", id),
						false, 0) != SPI_OK_UTILITY)
			elog(ERROR, "could not lock the staging table");
		if (merge_rv(id) == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the merge of watch %d is no longer wanted", id)));
		PushActiveSnapshot(GetTransactionSnapshot());
		regs = kw_registrations_read(id, cxt);
		if (regs == NIL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("watch %d was removed", id)));
		reg = (KwRegistration *) linitial(regs);
		plans = kw_sync_plans_create(reg, cxt);
		known = kw_sync_known_rows(plans, reg, cxt);
		kw_sync_relist_finish(plans, reg, rv, known, &counts);
		kw_sync_plans_free(plans);
		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
		pgstat_report_activity(STATE_IDLE, NULL);
		report(id, true, &counts, NULL, 0);
	}
	PG_CATCH();
	{
		ErrorData  *ed;

		MemoryContextSwitchTo(cxt);
		ed = CopyErrorData();
		FlushErrorState();
		AbortOutOfAnyTransaction();
		report(id, false, NULL, ed->message, ed->sqlerrcode);
		ereport(LOG,
				(errmsg("kwatch: relist merge of watch %d failed: %s", id, ed->message)));
	}
	PG_END_TRY();
	proc_exit(0);
}
