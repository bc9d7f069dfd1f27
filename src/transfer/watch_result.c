/*-------------------------------------------------------------------------
 *
 * watch_result.c
 *		What an apply result means for a watch's reflector: the outcome of
 *		its request in flight, taken from the pool (kw_watch_take_result)
 *		as a value, and acted on: a committed list is the table now, applied
 *		events move the checkpoint, a failure is retried or relisted.  The
 *		watch's state changes in watch.c only: this file says which of its
 *		transitions follows (kw_watch_note_*, kw_watch_keep_request, ...).
 *
 * The calls run one way: worker.c -> watch_result.c -> watch.c (what comes
 * next, the request done with); watch.c never calls back here, and the
 * channel calls nothing of the reflector.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "kw_common.h"
#include "kw_status.h"
#include "kw_apply.h"
#include "kw_worker.h"
#include "kw_watch.h"

static void took_result(KwWatch *w, KwApplyResult *r);

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
	if (retryable(sqlstate) && w->sent.len > 0 && w->spread_error == NULL)
	{
		kw_watch_keep_request(w);
		return;
	}
	kw_watch_note_spread_failed(w, NULL, 0);	/* the list starts over anyway */
	kw_watch_drop_unapplied(w);
	kw_watch_stop_transfer(w);
	kw_watch_restart_list(w, true);
	kw_watch_schedule_retry(w, 0, KW_STATE_BACKOFF);
}

/*
 * kw_watch_collect: takes the outcome of the watch's request in flight,
 * once its apply worker has reported it (apply_pool.c), and of its spread
 * list batches (watch_apply.c), and decides what comes next.  Returns
 * whether there was one.  Called by the worker loop
 * on every pass, after kw_apply_pool_collect.
 */
bool
kw_watch_collect(KwWatch *w, MemoryContext cxt)
{
	KwApplyResult res;
	bool		any = false;
	bool		current;

	/* the list batches spread over other apply workers (watch_apply.c) */
	while (kw_watch_take_spread_result(w, &res, cxt, &current))
	{
		any = true;
		if (res.ok)
			kw_watch_note_items_staged(w, &res);
		else if (current)
			kw_watch_note_spread_failed(w, res.error ? res.error : "an apply worker failed",
										res.sqlstate);
		/* a failure of a list that has started over since: nothing left to do */
	}
	if (kw_watch_take_result(w, &res, cxt))
	{
		any = true;
		took_result(w, &res);
	}
	if (w->spread_error != NULL && w->nspread == 0 && w->ticket == NULL)
	{
		/* every batch is back: the list starts over, as after its own failure */
		apply_failed(w, pstrdup(w->spread_error), w->spread_sqlstate);
	}
	return any;
}

/*
 * took_result: acts on the result of the watch's request in flight,
 * taken by kw_watch_collect.
 */
static void
took_result(KwWatch *w, KwApplyResult *r)
{
	KwApplyResult res = *r;

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
		return;
	}
	switch (w->sent_op)
	{
		case KW_APPLY_EVENTS:
			kw_watch_note_events_applied(w, &res);
			break;
		case KW_APPLY_RELIST_BEGIN:
			kw_watch_note_relist_begun(w, &res);
			break;
		case KW_APPLY_RELIST_STAGE:
			kw_watch_note_items_staged(w, &res);
			break;
		case KW_APPLY_RELIST_FINISH:
			kw_watch_note_list_committed(w, &res.counts);
			break;
		case KW_APPLY_COUNT_ROWS:
			kw_watch_note_rows_counted(w, res.rows);
			break;
		case KW_APPLY_PRUNE_HISTORY:
			break;
	}
	kw_watch_forget_request(w);
}
