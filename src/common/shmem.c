/*-------------------------------------------------------------------------
 *
 * shmem.c
 *		Shared status of every watch, the worker's latch, and the
 *		registration generation counter.
 *
 * The worker owns one slot per running watch and writes its state and
 * counters there; kwatch.watch_status() (behind the kwatch.watches view)
 * copies them out under a shared lock.  Backends that change registrations
 * bump `generation` and set the worker's latch at COMMIT (catalog.c), so a
 * new watch starts syncing right after the registering transaction commits.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "fmgr.h"
#include "catalog/pg_authid.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/shmem.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "kw_common.h"
#include "kw_worker.h"

KwSharedState *kw_shared = NULL;

static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
static shmem_request_hook_type prev_shmem_request_hook = NULL;

static Size
status_shmem_size(void)
{
	return add_size(offsetof(KwSharedState, slots),
					mul_size(sizeof(KwWatchStatus), kw_max_watches));
}

static void
status_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(status_shmem_size());
	RequestNamedLWLockTranche("kwatch", 1);
}

static void
status_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	kw_shared = ShmemInitStruct("kwatch", status_shmem_size(), &found);
	if (!found)
	{
		memset(kw_shared, 0, status_shmem_size());
		kw_shared->lock = &(GetNamedLWLockTranche("kwatch"))->lock;
		pg_atomic_init_u64(&kw_shared->generation, 1);
		ConditionVariableInit(&kw_shared->sync_cv);
		kw_shared->nslots = kw_max_watches;
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * kw_shmem_request: installs the hooks that size and create the shared
 * state.  Only called while shared_preload_libraries is processed.
 */
void
kw_shmem_request(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = status_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = status_shmem_startup;
}

/*
 * kw_state_name: the text shown in kwatch.watches.state for a state.
 */
const char *
kw_state_name(KwWatchState s)
{
	switch (s)
	{
		case KW_STATE_STARTING:
			return "starting";
		case KW_STATE_LISTING:
			return "listing";
		case KW_STATE_WATCHING:
			return "watching";
		case KW_STATE_BACKOFF:
			return "backoff";
		case KW_STATE_FAILED:
			return "failed";
	}
	return "unknown";
}

/*
 * kw_status_acquire: claims (and zeroes) a status slot for watch_id, or
 * returns the slot it already has.  Returns NULL when all kwatch.max_watches
 * slots are taken; the caller reports that.  Worker only.
 */
KwWatchStatus *
kw_status_acquire(int32 watch_id)
{
	KwWatchStatus *slot = NULL;

	if (kw_shared == NULL)
		return NULL;
	LWLockAcquire(kw_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < kw_shared->nslots; i++)
	{
		if (kw_shared->slots[i].watch_id == watch_id)
		{
			slot = &kw_shared->slots[i];
			break;
		}
		if (slot == NULL && kw_shared->slots[i].watch_id == 0)
			slot = &kw_shared->slots[i];
	}
	if (slot && slot->watch_id != watch_id)
	{
		memset(slot, 0, sizeof(*slot));
		slot->watch_id = watch_id;
		slot->state = KW_STATE_STARTING;
		slot->state_since = GetCurrentTimestamp();
	}
	LWLockRelease(kw_shared->lock);
	return slot;
}

/*
 * kw_status_release: frees a slot taken by kw_status_acquire.
 */
void
kw_status_release(KwWatchStatus *slot)
{
	if (slot == NULL)
		return;
	LWLockAcquire(kw_shared->lock, LW_EXCLUSIVE);
	slot->watch_id = 0;
	LWLockRelease(kw_shared->lock);
}

/*
 * kw_wake_worker: sets the worker's latch if a worker runs.  Safe to call
 * from any backend; a no-op when kwatch was not preloaded.
 */
void
kw_wake_worker(void)
{
	if (kw_shared == NULL)
		return;
	pg_atomic_fetch_add_u64(&kw_shared->generation, 1);
	LWLockAcquire(kw_shared->lock, LW_SHARED);
	if (kw_shared->worker_latch)
		SetLatch(kw_shared->worker_latch);
	LWLockRelease(kw_shared->lock);
}

/*
 * kw_poke_worker: sets the worker's latch without asking it to reload
 * registrations (a relist request, sync_wait.c).  Any backend.
 */
void
kw_poke_worker(void)
{
	if (kw_shared == NULL)
		return;
	LWLockAcquire(kw_shared->lock, LW_SHARED);
	if (kw_shared->worker_latch)
		SetLatch(kw_shared->worker_latch);
	LWLockRelease(kw_shared->lock);
}

/*
 * kw_status_broadcast: wakes the backends waiting in kwatch.wait_synced()
 * or kwatch.relist(wait => true) (sync_wait.c) after a slot's synced flag
 * or state changed.  Worker only.
 */
void
kw_status_broadcast(void)
{
	if (kw_shared != NULL)
		ConditionVariableBroadcast(&kw_shared->sync_cv);
}

/*
 * slot_visible: whether the current user may see watch status `s`: the
 * rule of the kwatch.watches view (a superuser; a member of the role that
 * registered the watch; a role with USAGE on its server).  The error text
 * and counters of other roles' watches are theirs.
 */
static bool
slot_visible(const KwWatchStatus *s)
{
	Oid			user = GetUserId();
	ForeignServer *fs;

	if (superuser_arg(user))
		return true;
	if (OidIsValid(s->owner) &&
		SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(s->owner)) &&
		has_privs_of_role(user, s->owner))
		return true;
	fs = GetForeignServerByName(s->server, true);
	if (fs == NULL)
		return false;
	return kw_server_usage(fs->serverid, user) == ACLCHECK_OK;
}

PG_FUNCTION_INFO_V1(kwatch_watch_status);

/*
 * kwatch_watch_status: SQL kwatch.watch_status() -> SETOF record, one row
 * per running watch the current user may see (slot_visible), copied from
 * shared memory.  Columns are declared in the
 * extension script: 22 in 0.1.0, 25 since 0.2.0 (synced, syncs,
 * relist_requests).  Returns no rows
 * when kwatch was not preloaded.
 */
Datum
kwatch_watch_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	KwWatchStatus *copy;
	int			n = 0;

	InitMaterializedSRF(fcinfo, 0);
	if (kw_shared == NULL)
		return (Datum) 0;

	copy = palloc(sizeof(KwWatchStatus) * kw_shared->nslots);
	LWLockAcquire(kw_shared->lock, LW_SHARED);
	for (int i = 0; i < kw_shared->nslots; i++)
		if (kw_shared->slots[i].watch_id != 0)
			copy[n++] = kw_shared->slots[i];
	LWLockRelease(kw_shared->lock);

	for (int i = 0; i < n; i++)
	{
		KwWatchStatus *s = &copy[i];
		Datum		values[25];
		bool		nulls[25];
		int			c = 0;

		if (!slot_visible(s))
			continue;

		memset(nulls, 0, sizeof(nulls));
		values[c++] = Int32GetDatum(s->watch_id);
		values[c++] = CStringGetTextDatum(kw_state_name(s->state));
		values[c++] = BoolGetDatum(s->healthy);
		if (s->resource_version[0])
			values[c] = CStringGetTextDatum(s->resource_version);
		else
			nulls[c] = true;
		c++;
		values[c++] = Int64GetDatum(s->objects);
		if (s->last_sync_at)
			values[c] = TimestampTzGetDatum(s->last_sync_at);
		else
			nulls[c] = true;
		c++;
		values[c++] = TimestampTzGetDatum(s->state_since);
		if (s->last_error[0])
		{
			values[c] = CStringGetTextDatum(s->last_error);
			values[c + 1] = TimestampTzGetDatum(s->last_error_at);
		}
		else
			nulls[c] = nulls[c + 1] = true;
		c += 2;
		values[c++] = Int64GetDatum(s->list_calls);
		values[c++] = Int64GetDatum(s->watch_calls);
		values[c++] = Int64GetDatum(s->relists);
		values[c++] = Int64GetDatum(s->added);
		values[c++] = Int64GetDatum(s->modified);
		values[c++] = Int64GetDatum(s->deleted);
		values[c++] = Int64GetDatum(s->bookmarks);
		values[c++] = Int64GetDatum(s->notifications);
		values[c++] = Int64GetDatum(s->skipped_objects);
		values[c++] = Int64GetDatum(s->sanitized_objects);
		values[c++] = Int64GetDatum(s->errors[KW_ERRSRC_HTTP]);
		values[c++] = Int64GetDatum(s->errors[KW_ERRSRC_DECODE]);
		values[c++] = Int64GetDatum(s->errors[KW_ERRSRC_DATABASE] + s->errors[KW_ERRSRC_CONFIG]);
		values[c++] = BoolGetDatum(s->synced);
		values[c++] = Int64GetDatum(s->syncs);
		values[c++] = Int64GetDatum(s->relist_requests);
		Assert(c == 25);
		/* the extension at 0.1.0 declares the first 22 columns only */
		if (rsinfo->setDesc->natts != 22 && rsinfo->setDesc->natts != 25)
			elog(ERROR, "kwatch.watch_status() declared with %d columns",
				 rsinfo->setDesc->natts);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(kwatch_worker_pid);

/*
 * kwatch_worker_pid: SQL kwatch.worker_pid() -> int, the worker's process
 * id, or NULL when no worker runs (not preloaded, or between restarts).
 */
Datum
kwatch_worker_pid(PG_FUNCTION_ARGS)
{
	pid_t		pid = 0;

	if (kw_shared)
	{
		LWLockAcquire(kw_shared->lock, LW_SHARED);
		pid = kw_shared->worker_pid;
		LWLockRelease(kw_shared->lock);
	}
	if (pid == 0)
		PG_RETURN_NULL();
	PG_RETURN_INT32((int32) pid);
}
