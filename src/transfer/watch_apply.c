/*-------------------------------------------------------------------------
 *
 * watch_apply.c
 *		A watch's decoded batches handed to the apply workers (kw_apply.h)
 *		and their results taken back: the pending batch (events, list
 *		items, a list's merge) in stream order, at most one request in
 *		flight, a request kept for its retry after a timeout, and what each
 *		result means for the reflector (watch.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "kw_common.h"
#include "kw_worker.h"
#include "kw_apply.h"
#include "kw_watch.h"

/* ---------------------------------------------------------------------
 * applying batches
 * ---------------------------------------------------------------------
 */


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

/* forget_request: the request in flight is done with. */
static void
forget_request(KwWatch *w)
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
 * drop_unapplied: a request failed for good: what was decoded after it is
 * of no use (the relist that follows reads the newest state), nor is the
 * request.
 */
static void
drop_unapplied(KwWatch *w)
{
	forget_request(w);
	reset_batch(w);
}

/*
 * retryable: whether a failed request is worth sending again as it is:
 * the table owner's code or a lock outlasted kwatch.apply_timeout (57014,
 * 55P03), or an apply worker slot was lost before it started.  Anything
 * else (and 57P01: an apply worker ended with the batch in flight, whether
 * it committed is unknown) relists.
 */
static bool
retryable(int sqlstate)
{
	return sqlstate == ERRCODE_QUERY_CANCELED || sqlstate == ERRCODE_LOCK_NOT_AVAILABLE;
}

/*
 * apply_failed: a request could not be applied.  When retrying it may
 * help (a timeout, a lock), it is kept and sent again after the backoff;
 * the stream pauses once the next batch is full.  Otherwise what was
 * decoded is lost, so the table may lag the stream: stop the transfer and
 * relist, from the last RV (PROTOCOL 22), after a backoff.
 */
static void
apply_failed(KwWatch *w, const char *err, int sqlstate)
{
	kw_watch_record_error(w, KW_ERRSRC_DATABASE, err);
	if (retryable(sqlstate) && w->sent.len > 0)
	{
		w->resubmit_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													 kw_watch_retry_delay(w, 0));
		return;
	}
	drop_unapplied(w);
	kw_watch_stop_transfer(w);
	kw_watch_restart_list(w, true);
	kw_watch_schedule_retry(w, 0, KW_STATE_BACKOFF);
}

/*
 * list_committed: a relist's merge has committed: the staged list is the
 * table now; watch from its resourceVersion.
 */
static void
list_committed(KwWatch *w, KwApplyCounts *counts)
{
	w->objects = w->list_items;

	/*
	 * The merged list's resourceVersion, as sent: a streaming list's stream
	 * may have failed meanwhile (restart_list cleared list_rv); the table
	 * holds that list all the same, and the WATCH from its resourceVersion
	 * finds out what the failure meant (a 410 relists).
	 */
	kw_watch_set_str(w, &w->resume_rv, w->sent_rv);
	w->need_list = false;
	w->list_started = false;
	w->list_finish_pending = false;
	w->first_list_done = true;
	w->list_not_streamed = false;
	w->backoff_ms = 0;
	w->short_watches = 0;
	w->decode_failures = 0;
	w->known = NULL;
	MemoryContextReset(w->list_cxt);
	kw_watch_count_apply(w, counts, true);
	LWLockAcquire(kw_shared->lock, LW_EXCLUSIVE);
	w->slot->last_list_at = GetCurrentTimestamp();
	/* kwatch.relist(wait => true) waits for this (sync_wait.c) */
	if (w->list_request > w->slot->relist_done)
		w->slot->relist_done = w->list_request;
	LWLockRelease(kw_shared->lock);
	w->list_request = 0;
	kw_watch_publish_progress(w);
	kw_watch_set_synced(w, true, true);
	/* a streaming list's stream goes on as the WATCH */
	if (w->xfer == XFER_WATCH)
		kw_watch_set_state(w, KW_STATE_WATCHING);
}

/* events_applied: a batch of watch events committed with its checkpoint. */
static void
events_applied(KwWatch *w, KwApplyResult *res)
{
	w->objects += res->counts.added - res->counts.deleted;
	kw_watch_count_apply(w, &res->counts, true);
	if (res->skipped > 0)
		KW_WATCH_COUNT(w, skipped_objects, res->skipped);
	kw_watch_set_str(w, &w->resume_rv, w->sent_rv);
	kw_watch_publish_progress(w);
	if (TimestampDifferenceExceeds(w->xfer_started, GetCurrentTimestamp(),
								   KW_HEALTHY_RESET_MS))
		w->backoff_ms = 0;
}

/*
 * relist_begun: the apply worker prepared the LIST (staging table, or
 * straight into the mirror) and sent the table's uid -> resourceVersion:
 * the first page may be requested.
 */
static void
relist_begun(KwWatch *w, KwApplyResult *res)
{
	MemoryContextReset(w->list_cxt);
	w->known = kw_known_import(res->known_uids, res->known_rvs, res->nknown,
									w->list_cxt);
	w->list_direct = res->direct;
	w->list_started = true;
	w->list_items = 0;
	w->list_rv = NULL;
	w->continue_token = NULL;
	/* a LIST after any earlier sync (even before a restart) is a relist */
	if (w->first_list_done || w->resume_rv)
		KW_WATCH_COUNT(w, relists, 1);
	kw_watch_retry_now(w);
}

/*
 * kw_watch_collect: takes the outcome of the watch's request in flight,
 * once its apply worker has reported it (apply_pool.c), and decides what
 * comes next.  Returns whether there was one.  Called by the worker loop
 * on every pass, after kw_apply_pool_collect.
 */
bool
kw_watch_collect(KwWatch *w, MemoryContext cxt)
{
	KwApplyResult res;

	if (w->ticket == NULL || !kw_apply_poll(w->ticket, &res, cxt))
		return false;
	w->ticket = NULL;
	if (!res.ok)
	{
		if (w->sent_op == KW_APPLY_RELIST_BEGIN)
		{
			kw_watch_record_error(w, KW_ERRSRC_DATABASE, res.error);
			forget_request(w);
			kw_watch_schedule_retry(w, 0, KW_STATE_BACKOFF);
		}
		else if (w->sent_op == KW_APPLY_COUNT_ROWS)
		{
			ereport(LOG, (errmsg("kwatch: could not count the rows of watch %d: %s",
								 w->reg.id, res.error)));
			forget_request(w);
		}
		else
			apply_failed(w, res.error, res.sqlstate);
		return true;
	}
	switch (w->sent_op)
	{
		case KW_APPLY_EVENTS:
			events_applied(w, &res);
			break;
		case KW_APPLY_RELIST_BEGIN:
			relist_begun(w, &res);
			break;
		case KW_APPLY_RELIST_STAGE:
			kw_watch_count_apply(w, &res.counts, false);
			if (res.skipped > 0)
			{
				w->list_items -= res.skipped;	/* not staged: not in the table */
				KW_WATCH_COUNT(w, skipped_objects, res.skipped);
			}
			break;
		case KW_APPLY_RELIST_FINISH:
			list_committed(w, &res.counts);
			break;
		case KW_APPLY_COUNT_ROWS:
			w->objects = res.rows;
			kw_watch_publish_progress(w);
			break;
		case KW_APPLY_PRUNE_HISTORY:
			break;
	}
	forget_request(w);
	return true;
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
