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
 * most one request in flight, so its batches commit in order, except:
 *
 * Spreading a list.  The batches of one LIST (a first sync
 * going straight into the mirror table, or a relist's staging) are
 * independent transactions whose order does not matter: rows of distinct
 * uids, each batch notified as it commits (a first sync's readers see rows
 * arrive batch by batch until wait_synced(), sync.c), the list's merge and
 * checkpoint in one transaction after all of them.  So while a list batch
 * is in flight and the next one is full (the stream would pause), that one
 * goes to another apply worker if one is spare (kw_apply_spare: idle or
 * startable, within the role's share of the pool, and one more left for
 * everybody else), up to KW_SPREAD_MAX at once: the inserts (jsonb input,
 * compression, generated columns, indexes) of a big list run on every core.
 * Each batch is its own request, so the workers go back to the pool
 * between batches.  The merge (KW_APPLY_RELIST_FINISH), and anything after
 * it, waits until every spread batch has reported; a spread batch that
 * failed (any failure: its retry would need the order kept) makes the list
 * start over once none is in flight (watch_result.c), as a failed batch in
 * flight does.  A watch stopped meanwhile cancels them (kw_apply_cancel:
 * they run to their end, a watch removed rolls them back).
 */

/*
 * spread_ready: whether the pending list items should go to another apply
 * worker now: a list batch is in flight, they fill a batch (the stream
 * paused on them), no spread batch failed (nor one of a list that started
 * over since the last commit: spread_off), fewer than KW_SPREAD_MAX are
 * out, and a worker is spare.
 */
static bool
spread_ready(KwWatch *w)
{
	return w->ticket != NULL && w->sent_op == KW_APPLY_RELIST_STAGE &&
		w->nitems > 0 && w->nevents == 0 && w->spread_error == NULL &&
		!w->spread_off &&
		w->nspread < KW_SPREAD_MAX && kw_watch_batch_full(w) &&
		kw_apply_spare(w->reg.owner);
}

/*
 * kw_watch_has_pending: whether kw_watch_flush has something to hand over
 * now: a kept request whose retry time has come, or, with nothing in
 * flight, a pending batch (only list items while spread batches are out;
 * a small list batch while its hold lasts: kw_watch_batch_hold_ms).
 * Called by the worker loop (worker.c) on every pass.
 */
bool
kw_watch_has_pending(KwWatch *w)
{
	if (w->ticket != NULL)
		return false;
	if (w->sent.len > 0)
		return GetCurrentTimestamp() >= w->resubmit_at;
	if (w->spread_error != NULL)
		return false;			/* the list starts over once they are back */
	if (w->nitems > 0 && kw_watch_batch_hold_ms(w, GetCurrentTimestamp()) > 0)
		return false;			/* a small list batch waits for more */
	if (w->nspread > 0)
		return w->nitems > 0;	/* only more items while batches are out */
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

/*
 * kw_watch_spread: with a list batch of the watch in flight, hands its
 * next one, once full, to a spare apply worker (spread_ready; "Spreading a
 * list" above) and resumes the paused transfer.  Returns whether a worker
 * took it.  Called by the worker loop after every watch's kw_watch_flush,
 * so that a watch's ordinary batch is never refused a worker a spread
 * took in the same pass.
 */
bool
kw_watch_spread(KwWatch *w)
{
	KwApplyRequest req;

	if (!spread_ready(w))
		return false;
	memset(&req, 0, sizeof(req));
	req.op = KW_APPLY_RELIST_STAGE;
	req.objs = w->items;
	req.nobjs = w->nitems;
	if (!kw_watch_send_spread(w, &req))
		return false;
	if (w->http)
		kw_http_transfer_resume(w->http);
	return true;
}
