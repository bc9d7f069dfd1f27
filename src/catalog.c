/*-------------------------------------------------------------------------
 *
 * catalog.c
 *		Reacting to registration changes transactionally.
 *
 * kwatch.watch() and kwatch.unwatch() (SQL, in the extension script) change
 * kwatch.registrations and call kwatch._wake_at_commit().  The worker must
 * see the change right after COMMIT and never before, and never at all
 * after a ROLLBACK: so the wake-up is a transaction callback that bumps the
 * registration generation and sets the worker's latch on commit only
 * (pg_net wakes its worker the same way).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "fmgr.h"
#include "miscadmin.h"

#include "kwatch.h"

static bool wake_pending = false;
static bool callback_registered = false;

static void
wake_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			if (wake_pending)
				kw_wake_worker();
			wake_pending = false;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			wake_pending = false;
			break;
		default:
			break;
	}
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
	if (!callback_registered)
	{
		RegisterXactCallback(wake_xact_callback, NULL);
		callback_registered = true;
	}
	wake_pending = true;
	if (kw_shared == NULL)
		ereport(WARNING,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("kwatch is not in shared_preload_libraries, so no worker will sync this watch"),
				 errhint("Add kwatch to shared_preload_libraries, set kwatch.database, and restart PostgreSQL.")));
	PG_RETURN_VOID();
}
