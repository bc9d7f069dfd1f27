/*-------------------------------------------------------------------------
 *
 * shmem.c
 *		Shared status of every watch, the worker's latch, and the
 *		registration generation counter.
 *
 * The worker owns one slot per running watch and writes its state and
 * counters there; kwatch.watch_status() (functions/status.c, behind the
 * kwatch.watches view)
 * copies them out under a shared lock.  Backends that change registrations
 * bump `generation` and set the worker's latch at COMMIT (catalog.c), so a
 * new watch starts syncing right after the registering transaction commits.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "commands/dbcommands.h"
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
#include "kw_status.h"

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
		pg_atomic_init_u64(&kw_shared->connect_refused_at, 0);
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
 * kw_wake_sender: sets the request sender's latch (sender.c): applies were
 * queued, or their results are awaited.  Any backend; nothing when no
 * sender runs.
 */
void
kw_wake_sender(void)
{
	if (kw_shared == NULL)
		return;
	LWLockAcquire(kw_shared->lock, LW_SHARED);
	if (kw_shared->sender_latch)
		SetLatch(kw_shared->sender_latch);
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
 * kw_serves_this_database: whether the kwatch worker serves the current
 * database, the one kwatch.database names.  The worker, its apply
 * workers, the status slots and the event ring are that database's alone:
 * in another database, the SQL functions that read or wait for them show
 * nothing or refuse (kw_require_worker_state).  Needs a
 * transaction (it reads the database's name); cached per backend, whose
 * database never changes.
 */
bool
kw_serves_this_database(void)
{
	static Oid	checked_db = InvalidOid;
	static bool serves = false;

	if (checked_db != MyDatabaseId)
	{
		char	   *here = get_database_name(MyDatabaseId);

		serves = here && kw_database && strcmp(here, kw_database) == 0;
		checked_db = MyDatabaseId;
	}
	return serves;
}
