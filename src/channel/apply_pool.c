/*-------------------------------------------------------------------------
 *
 * apply_pool.c
 *		The transfer's side of the apply workers: a pool of dynamic
 *		background workers, each fed through a shm_mq of its own.
 *
 * One DSM segment, created when the transfer starts, holds two queues per
 * possible apply worker (kwatch.max_apply_workers): requests from the
 * transfer and results back, the layout of PostgreSQL's parallel apply
 * (src/backend/replication/logical/applyparallelworker.c, pa_setup_dsm).
 * Workers are started when work finds every running one busy, up to the
 * setting, and live as long as the transfer; a worker that exits (it was
 * terminated, or failed) is replaced on demand with fresh queues.
 *
 * A request is handed to an idle worker (kw_apply_submit) and its result
 * read without blocking (kw_apply_pool_collect, on every pass of the
 * transfer's loop: a worker's send sets the transfer's latch).  The caller
 * (watch.c) keeps at most one request per watch in flight, plus the
 * batches of a list it spreads over workers nobody else needs
 * (kw_apply_spare); different watches proceed in parallel, up to the
 * pool's size.  A worker that ends
 * with a request in flight gives the ticket a failed result with SQLSTATE
 * 57P01 (admin_shutdown): whether it committed is unknown, which the
 * caller must treat as such (watch.c relists).
 *
 * Fairness (doc/security.md, Roles): the requests of one role (the
 * registering role of their watches) hold at most all workers but one
 * (kwatch.max_apply_workers - 1, at least 1), and a request's deadline
 * (kwatch.apply_timeout; never longer, nor none, for a non-superuser's
 * watch: watch_apply.c) plus KW_APPLY_GRACE_MS bounds how long a table
 * owner's code can keep a worker.  So with two or more workers, one role's
 * misbehaving code never delays another role's batch; with one worker, or
 * as many colluding roles as workers, a batch may wait up to that bound per
 * batch ahead of it (the residual risk README states).  Requests never
 * run in the transfer itself (0.6.0 did, with no worker to be had, where
 * no deadline could stop a table owner's code without stopping every
 * watch): when no background worker slot can be had (max_worker_processes)
 * they wait until one can.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "utils/timestamp.h"
#include "postmaster/bgworker.h"
#include "storage/dsm.h"
#include "storage/shm_mq.h"
#include "storage/shm_toc.h"
#include "utils/memutils.h"

#include "kw_common.h"
#include "kw_apply.h"

#define KW_APPLY_REQUEST_QUEUE (1024 * 1024)
#define KW_APPLY_RESULT_QUEUE (64 * 1024)
/*
 * An apply worker still busy this long after its request's deadline (a
 * table owner's code that catches the query_canceled the deadline raises,
 * or sets its own lock_timeout) is terminated: FATAL cannot be caught.
 */
#define KW_APPLY_GRACE_MS 10000

struct KwApplyTicket
{
	int			worker;			/* index in pool[], -1 = ran in-process */
	void	   *owner;			/* the submitter (a watch), for logs */
	int32		watch_id;		/* the request's watch (0: none) */
	Oid			role;			/* its registering role (InvalidOid: kwatch's own) */
	TimestampTz submitted_at;
	int			timeout_ms;		/* the request's kwatch.apply_timeout */
	bool		terminated;		/* overdue: its worker was told to stop */
	bool		done;
	bool		cancelled;		/* the submitter is gone: discard the result */
	StringInfoData result;		/* the encoded KwApplyResult, once done */
};

typedef struct PoolWorker
{
	BackgroundWorkerHandle *handle; /* NULL = not running */
	shm_mq_handle *requests;
	shm_mq_handle *results;
	KwApplyTicket *ticket;		/* the request in flight; NULL = idle */
	bool		failed_start;	/* could not be started last time */
} PoolWorker;

static MemoryContext pool_cxt = NULL;
static dsm_segment *seg = NULL;
static shm_toc *toc = NULL;
static PoolWorker *pool = NULL;
static int	pool_size = 0;

/*
 * kw_apply_pool_init: creates the DSM segment with the queues of
 * kwatch.max_apply_workers workers (none are started yet).  Called once by
 * the transfer at startup, outside a transaction; the segment stays
 * mapped for the process's life.  ERRORs when the segment cannot be
 * created.
 */
void
kw_apply_pool_init(void)
{
	shm_toc_estimator e;
	Size		size;

	pool_cxt = AllocSetContextCreate(TopMemoryContext, "kwatch apply pool",
									 ALLOCSET_SMALL_SIZES);
	pool_size = Max(kw_max_apply_workers, 1);
	pool = MemoryContextAllocZero(pool_cxt, sizeof(PoolWorker) * pool_size);

	shm_toc_initialize_estimator(&e);
	for (int i = 0; i < pool_size; i++)
	{
		shm_toc_estimate_chunk(&e, KW_APPLY_REQUEST_QUEUE);
		shm_toc_estimate_chunk(&e, KW_APPLY_RESULT_QUEUE);
	}
	shm_toc_estimate_keys(&e, 2 * pool_size);
	size = shm_toc_estimate(&e);

	seg = dsm_create(size, 0);
	dsm_pin_mapping(seg);
	toc = shm_toc_create(KW_APPLY_TOC_MAGIC, dsm_segment_address(seg), size);
	for (int i = 0; i < pool_size; i++)
	{
		shm_toc_insert(toc, 2 * i, shm_toc_allocate(toc, KW_APPLY_REQUEST_QUEUE));
		shm_toc_insert(toc, 2 * i + 1, shm_toc_allocate(toc, KW_APPLY_RESULT_QUEUE));
	}
}

/*
 * worker_stop: forgets worker `i` (exited, or being stopped): detaches its
 * queues; a request in flight fails as "outcome unknown" (57P01).
 */
static void
worker_stop(int i, const char *why)
{
	PoolWorker *pw = &pool[i];

	if (pw->ticket)
	{
		KwApplyResult res = {0};
		MemoryContext old = MemoryContextSwitchTo(pool_cxt);

		res.ok = false;
		res.sqlstate = ERRCODE_ADMIN_SHUTDOWN;
		res.error = (char *) why;
		initStringInfo(&pw->ticket->result);
		kw_apply_result_encode(&pw->ticket->result, &res);
		MemoryContextSwitchTo(old);
		pw->ticket->done = true;
		if (pw->ticket->cancelled)
		{
			pfree(pw->ticket->result.data);
			pfree(pw->ticket);
		}
		pw->ticket = NULL;
	}
	if (pw->requests)
		shm_mq_detach(pw->requests);
	if (pw->results)
		shm_mq_detach(pw->results);
	pw->requests = pw->results = NULL;
	if (pw->handle)
	{
		TerminateBackgroundWorker(pw->handle);
		pfree(pw->handle);
	}
	pw->handle = NULL;
}

/*
 * worker_start: starts apply worker `i` on fresh queues.  Returns false
 * when no background worker slot is free (max_worker_processes).
 */
static bool
worker_start(int i)
{
	PoolWorker *pw = &pool[i];
	BackgroundWorker bgw;
	shm_mq	   *rq,
			   *sq;
	MemoryContext old = MemoryContextSwitchTo(pool_cxt);

	rq = shm_mq_create(shm_toc_lookup(toc, 2 * i, false), KW_APPLY_REQUEST_QUEUE);
	sq = shm_mq_create(shm_toc_lookup(toc, 2 * i + 1, false), KW_APPLY_RESULT_QUEUE);
	shm_mq_set_sender(rq, MyProc);
	shm_mq_set_receiver(sq, MyProc);

	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
	bgw.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(bgw.bgw_library_name, BGW_MAXLEN, "kwatch");
	snprintf(bgw.bgw_function_name, BGW_MAXLEN, "kwatch_apply_main");
	snprintf(bgw.bgw_name, BGW_MAXLEN, "kwatch apply worker %d", i + 1);
	snprintf(bgw.bgw_type, BGW_MAXLEN, "kwatch apply worker");
	bgw.bgw_main_arg = UInt32GetDatum(dsm_segment_handle(seg));
	memcpy(bgw.bgw_extra, &i, sizeof(i));
	bgw.bgw_notify_pid = MyProcPid;
	if (!RegisterDynamicBackgroundWorker(&bgw, &pw->handle))
	{
		MemoryContextSwitchTo(old);
		pw->handle = NULL;
		if (!pw->failed_start)
			ereport(WARNING,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("kwatch: could not start apply worker %d", i + 1),
					 errhint("Raise max_worker_processes, or lower kwatch.max_apply_workers.")));
		pw->failed_start = true;
		return false;
	}
	pw->failed_start = false;
	pw->requests = shm_mq_attach(rq, seg, pw->handle);
	pw->results = shm_mq_attach(sq, seg, pw->handle);
	MemoryContextSwitchTo(old);
	return true;
}

/*
 * idle_worker: the index of a running idle worker, else of a worker
 * started now in a free place of the pool; -1 when every worker is busy
 * or none can be started.
 */
static int
idle_worker(void)
{
	int			free_place = -1;

	for (int i = 0; i < pool_size; i++)
	{
		if (pool[i].handle != NULL && pool[i].ticket == NULL)
			return i;
		if (pool[i].handle == NULL && free_place < 0)
			free_place = i;
	}
	if (free_place >= 0 && worker_start(free_place))
		return free_place;
	return -1;
}

/*
 * role_share_used: whether `role` holds as many workers as one role may
 * (all but one, at least one; see the header comment).  kwatch's own
 * requests (InvalidOid) are not counted.
 */
static bool
role_share_used(Oid role)
{
	int			held = 0;

	if (!OidIsValid(role))
		return false;
	for (int i = 0; i < pool_size; i++)
		if (pool[i].ticket != NULL && pool[i].ticket->role == role)
			held++;
	return held >= Max(1, pool_size - 1);
}

/*
 * kw_apply_spare: whether a request of `role` handed over now would leave
 * at least one more worker (idle, or a free place where one could start)
 * for the requests of others, and one more place in the role's own share
 * (role_share_used) for its other watches: a watch spreads one list over
 * several workers (watch_apply.c) only with workers nobody else needs, so
 * a big list takes idle workers and never the last one.
 */
bool
kw_apply_spare(Oid role)
{
	int			free_workers = 0;
	int			held = 0;

	for (int i = 0; i < pool_size; i++)
	{
		if (pool[i].handle != NULL ? pool[i].ticket == NULL : !pool[i].failed_start)
			free_workers++;
		if (OidIsValid(role) && pool[i].ticket != NULL && pool[i].ticket->role == role)
			held++;
	}
	/* one more worker for the role's other watches, and one for everybody */
	if (OidIsValid(role) && held + 1 >= Max(1, pool_size - 1))
		return false;
	return free_workers >= 2;
}

/*
 * kw_apply_submit: hands `request` (kw_apply_request_encode's bytes; the
 * caller keeps them) to an idle apply worker (starting one when
 * all are busy and the pool has room) and returns its ticket, to be polled
 * with kw_apply_poll; NULL when every worker is busy, when `role` already
 * holds its share of them, or when no worker can be started (try again on
 * a later pass).  `owner` is the submitter, kept for its own use;
 * `watch_id` the request's watch (kw_apply_in_flight); `role` its
 * registering role (InvalidOid: kwatch's own, e.g. pruning); `timeout_ms`
 * its deadline (kwatch.apply_timeout, 0 none), past which, and
 * KW_APPLY_GRACE_MS more, its worker is terminated.  Blocks only while the
 * worker copies the request out of its queue.
 */
KwApplyTicket *
kw_apply_submit(StringInfo request, void *owner, int32 watch_id, Oid role, int timeout_ms)
{
	int			i;

	if (role_share_used(role))
		return NULL;

	/* at most two tries: a worker that keeps dying at start is not retried in a loop */
	for (int attempt = 0; attempt < 2 && (i = idle_worker()) >= 0; attempt++)
	{
		PoolWorker *pw = &pool[i];
		shm_mq_result r;

		r = shm_mq_send(pw->requests, request->len, request->data, false, true);
		if (r == SHM_MQ_SUCCESS)
		{
			KwApplyTicket *t = MemoryContextAllocZero(pool_cxt, sizeof(KwApplyTicket));

			t->worker = i;
			t->owner = owner;
			t->watch_id = watch_id;
			t->role = role;
			t->submitted_at = GetCurrentTimestamp();
			t->timeout_ms = timeout_ms;
			pw->ticket = t;
			return t;
		}
		/* it exited meanwhile: replace it */
		ereport(LOG, (errmsg("kwatch: apply worker %d has exited; starting another", i + 1)));
		worker_stop(i, "the apply worker exited");
	}
	return NULL;
}

/*
 * kw_apply_pool_collect: reads, without waiting, the results that arrived
 * from every busy worker, and notices workers that exited.  Returns true
 * when any request completed.  Called on every pass of the transfer's loop.
 */
bool
kw_apply_pool_collect(void)
{
	bool		any = false;

	for (int i = 0; i < pool_size; i++)
	{
		PoolWorker *pw = &pool[i];
		shm_mq_result r;
		Size		len;
		void	   *data;

		if (pw->handle == NULL || pw->ticket == NULL)
			continue;
		r = shm_mq_receive(pw->results, &len, &data, true);
		if (r == SHM_MQ_WOULD_BLOCK)
		{
			KwApplyTicket *t = pw->ticket;

			if (t->timeout_ms > 0 && !t->terminated &&
				GetCurrentTimestamp() - t->submitted_at >
				((int64) t->timeout_ms + KW_APPLY_GRACE_MS) * 1000)
			{
				ereport(WARNING,
						(errcode(ERRCODE_QUERY_CANCELED),
						 errmsg("kwatch: apply worker %d is still busy with watch %d %d ms past kwatch.apply_timeout; terminating it",
								i + 1, t->watch_id, KW_APPLY_GRACE_MS)));
				TerminateBackgroundWorker(pw->handle);
				t->terminated = true;
			}
			continue;
		}
		any = true;
		if (r == SHM_MQ_DETACHED)
		{
			ereport(LOG, (errmsg("kwatch: apply worker %d exited with a batch in flight", i + 1)));
			worker_stop(i, "the apply worker exited before reporting whether its batch committed");
			continue;
		}
		if (pw->ticket->cancelled)
			pfree(pw->ticket);
		else
		{
			MemoryContext old = MemoryContextSwitchTo(pool_cxt);

			initStringInfo(&pw->ticket->result);
			appendBinaryStringInfo(&pw->ticket->result, data, len);
			pw->ticket->done = true;
			MemoryContextSwitchTo(old);
		}
		pw->ticket = NULL;
	}
	return any;
}

/*
 * kw_apply_in_flight: whether a request of watch `watch_id` is still being
 * applied (also one whose submitter is gone: a watch stopped and started
 * again must not overlap its former self's last batch).
 */
bool
kw_apply_in_flight(int32 watch_id)
{
	for (int i = 0; i < pool_size; i++)
		if (pool[i].ticket != NULL && pool[i].ticket->watch_id == watch_id)
			return true;
	return false;
}

/*
 * kw_apply_poll: whether `ticket`'s request has completed; if so decodes
 * its result into *res (allocated in `cxt`) and frees the ticket.
 */
bool
kw_apply_poll(KwApplyTicket *ticket, KwApplyResult *res, MemoryContext cxt)
{
	MemoryContext old;

	if (!ticket->done)
		return false;
	old = MemoryContextSwitchTo(cxt);
	kw_apply_result_decode(ticket->result.data, ticket->result.len, res);
	MemoryContextSwitchTo(old);
	pfree(ticket->result.data);
	pfree(ticket);
	return true;
}

/*
 * kw_apply_cancel: the submitter of `ticket` is gone (its watch stopped):
 * the request still runs to its end (a watch removed meanwhile rolls it
 * back, sync.c), and its result is discarded.
 */
void
kw_apply_cancel(KwApplyTicket *ticket)
{
	if (ticket->done)
	{
		pfree(ticket->result.data);
		pfree(ticket);
		return;
	}
	ticket->cancelled = true;
}

/*
 * kw_apply_pool_shutdown: stops every apply worker (the transfer exits).
 */
void
kw_apply_pool_shutdown(void)
{
	for (int i = 0; i < pool_size; i++)
		if (pool[i].handle)
			TerminateBackgroundWorker(pool[i].handle);
}
