/*-------------------------------------------------------------------------
 *
 * watch_apply.c
 *		A watch's decoded batches handed to the apply workers (kw_apply.h):
 *		the pending batch (events, list items, a list's merge) in stream
 *		order, at most one request in flight, a request kept for its retry
 *		after a timeout.  What a result means for the reflector is
 *		watch_result.c's; this file calls nothing of watch.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"
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
 * finish_ready: whether a list's merge may be sent: its last page arrived
 * (no transfer left), or its streaming list reached initial-events-end
 * (the stream goes on as the WATCH; its events are sent after the merge).
 */
static bool
finish_ready(KwWatch *w)
{
	return w->list_finish_pending &&
		(w->xfer == XFER_NONE || (w->xfer == XFER_WATCH && !w->streaming));
}

/*
 * pending_work: whether anything decoded waits to be handed to an apply
 * worker: events, list items, or a completed LIST to merge.
 */
static bool
pending_work(KwWatch *w)
{
	return w->nevents > 0 || w->nitems > 0 || finish_ready(w);
}

/*
 * kw_watch_unapplied: whether anything decoded is not committed yet: pending, in an
 * apply worker, or a request kept for its retry.
 */
bool
kw_watch_unapplied(KwWatch *w)
{
	return pending_work(w) || w->sent.len > 0;
}

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
	return pending_work(w);
}

/*
 * kw_watch_reset_items: forgets the pending list items (sent, or given up); with no
 * events pending, also what decoding left in the batch context.
 */
void
kw_watch_reset_items(KwWatch *w)
{
	w->nitems = 0;
	w->items = NULL;
	w->maxitems = 0;
	MemoryContextReset(w->items_cxt);
	if (w->nevents == 0)
		MemoryContextReset(w->batch_cxt);
}

/* kw_watch_reset_events: forgets the pending events (sent, or given up). */
void
kw_watch_reset_events(KwWatch *w)
{
	w->nevents = 0;
	w->events = NULL;
	w->maxevents = 0;
	w->pending_rv = NULL;
	MemoryContextReset(w->batch_cxt);
}

/* reset_batch: forgets the pending batch (applied, or given up). */
static void
reset_batch(KwWatch *w)
{
	kw_watch_reset_events(w);
	kw_watch_reset_items(w);
}

/* kw_watch_forget_request: the request in flight is done with. */
void
kw_watch_forget_request(KwWatch *w)
{
	resetStringInfo(&w->sent);
	kw_watch_set_str(w, &w->sent_rv, NULL);
	w->ticket = NULL;
	w->resubmit_at = 0;
}

/*
 * apply_timeout: the deadline of the watch's batches, ms (0: none): its
 * own (watch(apply_timeout)), else kwatch.apply_timeout.  A watch whose
 * owner is not a superuser never has a longer deadline than
 * kwatch.apply_timeout, nor none while the setting has one: its table
 * owner's code could otherwise hold an apply worker for ever (issue 30;
 * watch() refuses such a value, and the 0.7.0 update clamps the ones 0.6.0
 * let through, but the rule holds here whatever the table says).
 */
static int
apply_timeout(KwWatch *w)
{
	int			own = w->reg.apply_timeout_ms;

	if (own < 0)
		return kw_apply_timeout_ms;
	if (!w->reg.owner_super && kw_apply_timeout_ms > 0 &&
		(own == 0 || own > kw_apply_timeout_ms))
		return kw_apply_timeout_ms;
	return own;
}

/*
 * submit: hands w->sent to the apply pool; when every apply worker is busy
 * (or its owner holds its share of them) it stays queued and
 * kw_watch_flush tries again on a later pass.
 */
static void
submit(KwWatch *w)
{
	w->ticket = kw_apply_submit(&w->sent, w, w->reg.id, w->reg.owner, apply_timeout(w));
}

/*
 * kw_watch_send_request: encodes `req` (op and batch; the registration and deadline
 * are the watch's) as the watch's request and submits it.  `rv` is kept
 * for the result (a copy).
 */
void
kw_watch_send_request(KwWatch *w, KwApplyRequest *req, const char *rv)
{
	Assert(w->sent.len == 0 && w->ticket == NULL);
	req->reg = w->reg;
	req->timeout_ms = apply_timeout(w);
	req->direct = w->list_direct;
	kw_apply_request_encode(&w->sent, req);
	w->sent_op = req->op;
	kw_watch_set_str(w, &w->sent_rv, rv);
	submit(w);
}

/*
 * kw_watch_drop_unapplied: a request failed for good: what was decoded after it is
 * of no use (the relist that follows reads the newest state), nor is the
 * request.
 */
void
kw_watch_drop_unapplied(KwWatch *w)
{
	kw_watch_forget_request(w);
	reset_batch(w);
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
			submit(w);			/* kept, or every worker was busy */
		return w->ticket != NULL;
	}
	/*
	 * In stream order: a list's items, then its merge, then the events after
	 * it (a streaming list has all three at once; see finish_ready).
	 */
	memset(&req, 0, sizeof(req));
	if (w->nitems > 0)
	{
		req.op = KW_APPLY_RELIST_STAGE;
		req.objs = w->items;
		req.nobjs = w->nitems;
	}
	else if (finish_ready(w))
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
	if (req.op == KW_APPLY_RELIST_FINISH)
	{
		w->list_finish_pending = false;
		w->amends = NULL;		/* sent; list_committed resets list_cxt */
		w->namends = w->maxamends = 0;
	}
	else if (req.op == KW_APPLY_RELIST_STAGE)
		kw_watch_reset_items(w);
	else
		kw_watch_reset_events(w);

	if (w->http)
		kw_http_transfer_resume(w->http);
	return w->ticket != NULL;
}
