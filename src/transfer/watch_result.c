/*-------------------------------------------------------------------------
 *
 * watch_result.c
 *		What an apply result means for a watch's reflector: the outcome of
 *		its request in flight, taken from the pool (kw_apply_poll) as a
 *		value, and acted on: a committed list is the table now, applied
 *		events move the checkpoint, a failure is retried or relisted.
 *
 * The calls run one way: worker.c -> watch_result.c -> watch.c (what comes
 * next) and watch_apply.c (the request done with); neither calls back
 * here, and the channel calls nothing of the reflector.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "kw_common.h"
#include "kw_status.h"
#include "kw_apply.h"
#include "kw_worker.h"
#include "kw_watch.h"

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
	kw_watch_drop_unapplied(w);
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
			kw_watch_forget_request(w);
			kw_watch_schedule_retry(w, 0, KW_STATE_BACKOFF);
		}
		else if (w->sent_op == KW_APPLY_COUNT_ROWS)
		{
			ereport(LOG, (errmsg("kwatch: could not count the rows of watch %d: %s",
								 w->reg.id, res.error)));
			kw_watch_forget_request(w);
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
	kw_watch_forget_request(w);
	return true;
}
