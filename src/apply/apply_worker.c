/*-------------------------------------------------------------------------
 *
 * apply_worker.c
 *		An apply worker: a dynamic background worker that receives apply
 *		requests from the transfer over a shm_mq, runs each
 *		(apply_execute.c) and sends its result back.
 *
 * Started by the transfer (apply_pool.c) with the DSM segment's handle as
 * bgw_main_arg and its place in the pool in bgw_extra.  It connects to
 * kwatch.database as the bootstrap superuser, like the transfer, and
 * writes each mirror table as that table's owner (sync.c, KwAsOwner).  It
 * ends when the transfer detaches from its queues (the transfer exited),
 * on SIGTERM, or with the postmaster.  A new life of the transfer stops
 * the workers of the last one before it resumes any watch (worker.c,
 * fence_apply_workers): a batch of an older life must not commit after the
 * checkpoints the new one starts from were read.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/dsm.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shm_mq.h"
#include "storage/shm_toc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "kw_common.h"
#include "kw_apply.h"
#include "kw_sync.h"

/*
 * attach_queues: the request queue (we receive) and result queue (we send)
 * of place `i` in the pool's segment `handle`.  Exits quietly when the
 * segment is gone (the transfer exited before we started).
 */
static void
attach_queues(dsm_handle handle, int i, shm_mq_handle **requests,
			  shm_mq_handle **results)
{
	dsm_segment *seg = dsm_attach(handle);
	shm_toc    *toc;
	shm_mq	   *rq,
			   *sq;

	if (seg == NULL)
		proc_exit(0);
	dsm_pin_mapping(seg);
	toc = shm_toc_attach(KW_APPLY_TOC_MAGIC, dsm_segment_address(seg));
	if (toc == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("kwatch apply worker: bad magic number in its shared memory segment")));
	rq = shm_toc_lookup(toc, 2 * i, false);
	sq = shm_toc_lookup(toc, 2 * i + 1, false);
	shm_mq_set_receiver(rq, MyProc);
	shm_mq_set_sender(sq, MyProc);
	*requests = shm_mq_attach(rq, seg, NULL);
	*results = shm_mq_attach(sq, seg, NULL);
}

/*
 * kwatch_apply_main: an apply worker's entry point (bgw_function_name);
 * `main_arg` is the pool's DSM handle, bgw_extra the worker's place in it.
 * Serves requests one at a time until the transfer goes away.
 */
void
kwatch_apply_main(Datum main_arg)
{
	int			place;
	shm_mq_handle *requests;
	shm_mq_handle *results;
	MemoryContext request_cxt;

	memcpy(&place, MyBgworkerEntry->bgw_extra, sizeof(place));
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(kw_database, NULL, 0);
	pgstat_report_appname("kwatch apply worker");
	kw_events_writer_init();

	/* as the transfer: nothing a role creates may stand in for pg_catalog's */
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_SESSION);
	/* kwatch.apply_timeout is the deadline (apply_execute.c), not this */
	SetConfigOption("statement_timeout", "0", PGC_SUSET, PGC_S_SESSION);
	/*
	 * Text arrives in the database's encoding: a list's batches are written
	 * by binary COPY (copy_rows.c), whose text input converts from the
	 * client encoding, which a postgresql.conf or ALTER DATABASE may set
	 */
	SetConfigOption("client_encoding", GetDatabaseEncodingName(), PGC_SUSET, PGC_S_SESSION);

	attach_queues(DatumGetUInt32(main_arg), place, &requests, &results);
	request_cxt = AllocSetContextCreate(TopMemoryContext, "kwatch apply request",
										ALLOCSET_DEFAULT_SIZES);

	for (;;)
	{
		Size		len;
		void	   *data;
		shm_mq_result r;
		KwApplyRequest req;
		KwApplyResult res;
		StringInfoData buf;

		pgstat_report_activity(STATE_IDLE, NULL);
		r = shm_mq_receive(requests, &len, &data, false);
		if (r != SHM_MQ_SUCCESS)
			break;				/* the transfer is gone */
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		MemoryContextReset(request_cxt);
		MemoryContextSwitchTo(request_cxt);
		kw_apply_request_decode(data, len, &req);
		pgstat_report_activity(STATE_RUNNING, psprintf("kwatch apply: watch %d", req.reg.id));
		kw_apply_execute(&req, &res);

		initStringInfo(&buf);
		kw_apply_result_encode(&buf, &res);
		if (shm_mq_send(results, buf.len, buf.data, false, true) != SHM_MQ_SUCCESS)
			break;
	}
	proc_exit(0);
}
