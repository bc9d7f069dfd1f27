/*-------------------------------------------------------------------------
 *
 * kwatch.c
 *		Module entry point: preload check, settings, the ProcessUtility hook
 *		(ownership.c), shared memory and the background worker that runs
 *		every watch.
 *
 * kwatch must be in shared_preload_libraries: the worker and its shared
 * status area exist only then.  Loaded any other way (CREATE EXTENSION in a
 * server that did not preload it), the SQL surface still works for
 * registering watches, but nothing syncs; kwatch.watches says so.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"

#include "kw_common.h"
#include "kw_status.h"
#include "kw_worker.h"
#include "kw_as_owner.h"
#include "kw_events.h"
#include "kw_functions.h"
#include "kw_sender.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/*
 * register_process: registers the static background worker whose entry
 * point is kwatch's `function` (bgw_function_name), named `name` (its
 * bgw_name and bgw_type: pg_stat_activity's backend_type), connected to a
 * database, started once recovery has finished, restarted 5 s after it
 * exits abnormally (postmaster/bgworker.h).  Called from _PG_init while
 * shared_preload_libraries is processed; each is one of
 * max_worker_processes.
 */
static void
register_process(const char *function, const char *name)
{
	BackgroundWorker bgw;

	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
	bgw.bgw_restart_time = 5;
	snprintf(bgw.bgw_library_name, BGW_MAXLEN, "kwatch");
	snprintf(bgw.bgw_function_name, BGW_MAXLEN, "%s", function);
	snprintf(bgw.bgw_name, BGW_MAXLEN, "%s", name);
	snprintf(bgw.bgw_type, BGW_MAXLEN, "%s", name);
	RegisterBackgroundWorker(&bgw);
}

/*
 * _PG_init: defines the GUCs, requests shared memory and registers the
 * worker and the request sender.  Does nothing beyond GUCs unless loaded at postmaster start
 * (shared_preload_libraries), and nothing at all under pg_upgrade.
 */
void
_PG_init(void)
{
	if (IsBinaryUpgrade)
		return;

	kw_define_gucs();
	kw_ownership_init();
	kw_relation_guard_init();
	kw_as_owner_init();

	if (!process_shared_preload_libraries_in_progress)
		return;

	kw_shmem_request();
	kw_events_shmem_request();
	/* the transfer (transfer/worker.c) and the request sender (sender/sender.c) */
	register_process("kwatch_worker_main", "kwatch worker");
	register_process("kwatch_sender_main", "kwatch request sender");
}
