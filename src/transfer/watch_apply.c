/*-------------------------------------------------------------------------
 *
 * watch_apply.c
 *		A watch's decoded batches handed to the apply workers (kw_apply.h):
 *		the pending batch (events, list items, a list's merge) in stream
 *		order, at most one request in flight, a request kept for its retry
 *		after a timeout.  What a result means for the reflector is
 *		watch_result.c's.  The batch and the request are the watch's state,
 *		which watch.c changes: this file reads them and calls watch.c's
 *		functions, and watch.c calls nothing of it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/timestamp.h"

#include "kw_common.h"
#include "kw_http.h"
#include "kw_apply.h"
#include "kw_worker.h"
#include "kw_watch.h"


/*
 * Each decoded batch becomes an apply request (kw_apply.h) run by an apply
 * worker, while the transfer goes on decoding the next batch: the transfer
 * pauses only when that next batch is full too (PROTOCOL 27), so memory
 * stays bounded at about two batches per watch, and a table whose owner's
 * code is slow holds back its own watch and nothing else.  A watch has at
 * most one request in flight, so its batches commit in order.
 */

/*
 * kw_watch_has_pending: whether kw_watch_flush has something to hand over
 * now: a kept request whose retry time has come, or, with nothing in
 * flight, a pending batch.  Called by the worker loop (worker.c) on every
 * pass.
 */
bool
kw_watch_has_pending(KwWatch *w)
{
	if (w->ticket != NULL)
		return false;
	if (w->sent.len > 0)
		return GetCurrentTimestamp() >= w->resubmit_at;
	return kw_watch_pending_work(w);
}

/*
 * kw_watch_flush: hands the pending batch to the apply pool (watch events
 * with their checkpoint; or list items; or the final relist merge), and
 * resumes a paused transfer at once: the next batch is decoded while this
 * one is applied.  A kept request (after a timeout) is sent again instead.
 * Returns whether an apply worker took a request (false: every one was
 * busy; the request waits in the watch).
 */
bool
kw_watch_flush(KwWatch *w)
{
	KwApplyRequest req;

	if (w->sent.len > 0)
	{
		if (w->ticket == NULL)
			kw_watch_submit_request(w);	/* kept, or every worker was busy */
		return w->ticket != NULL;
	}
	/*
	 * In stream order: a list's items, then its merge, then the events after
	 * it (a streaming list has all three at once; see kw_watch_finish_ready).
	 */
	memset(&req, 0, sizeof(req));
	if (w->nitems > 0)
	{
		req.op = KW_APPLY_RELIST_STAGE;
		req.objs = w->items;
		req.nobjs = w->nitems;
	}
	else if (kw_watch_finish_ready(w))
	{
		req.op = KW_APPLY_RELIST_FINISH;
		req.rv = w->list_rv;
		req.events = w->amends; /* a streaming list's changes before its bookmark */
		req.nevents = w->namends;
	}
	else if (w->nevents > 0)
	{
		req.op = KW_APPLY_EVENTS;
		req.events = w->events;
		req.nevents = w->nevents;
		req.rv = w->pending_rv;
	}
	else
		return false;
	kw_watch_send_request(w, &req, req.rv);
	kw_watch_note_batch_sent(w, req.op);

	if (w->http)
		kw_http_transfer_resume(w->http);
	return w->ticket != NULL;
}
