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
	kw_as_owner_init();

	if (!process_shared_preload_libraries_in_progress)
		return;

	kw_shmem_request();
	kw_events_shmem_request();
	kw_register_worker();
	kw_register_sender();
}
