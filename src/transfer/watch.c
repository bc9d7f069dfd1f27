/*-------------------------------------------------------------------------
 *
 * watch.c
 *		One watch: client-go's reflector loop (PROTOCOL 20-27) for one
 *		resource on one cluster, driven by the worker's event loop.
 *
 *	  LIST (paged) --all pages--> merge into table --> WATCH from list RV
 *		 ^                                              |  clean close: WATCH
 *		 |                                              |  again from last RV
 *		 +---- 410 / ERROR event / malformed stream ----+
 *
 * The watch's place in that loop is one KwWatchPhase (kw_watch.h), changed
 * only by watch_set_phase, which checks the transition.
 *
 * Where the API server serves them (list_strategy.c), the LIST is a
 * streaming list instead (KEP-3157; doc/protocol.md "Streaming lists"): one
 * WATCH with sendInitialEvents=true whose ADDED events, up to the bookmark
 * annotated k8s.io/initial-events-end, are the list's items (staged and
 * merged exactly as a LIST's pages: on_initial_event); the bookmark's
 * resourceVersion is the list's, and the same stream goes on as the WATCH.
 *
 * The worker calls, in each pass of its loop:
 *	 - kw_watch_flush() when kw_watch_has_pending() (watch_apply.c): hands
 *	   what the stream decoded to an apply worker, and kw_watch_collect()
 *	   (watch_result.c) takes the result; both files call this one, never
 *	   the other way;
 *	 - kw_watch_tick(): starts the next request when one is due, aborts a
 *	   stalled watch, and says how long it may sleep;
 *	 - kw_watch_transfer_done() when libcurl reports a transfer finished:
 *	   decides what comes next from the HTTP status (PROTOCOL 7-10, 16-17).
 *
 * http.c hands body bytes to watch_feed (the transfer's KwHttpFeed); the
 * decoders turn them into pending events (in `batch_cxt`) or list items (in
 * `items_cxt`).
 * Once a batch holds kwatch.batch_size entries, or kwatch.batch_memory
 * bytes of objects, the feed pauses the transfer (KW_FEED_PAUSE) until the
 * batch is applied, so memory stays bounded however fast the server sends
 * and however large its objects are.  No feed touches the database.
 *
 * Two resourceVersions are tracked: `resume_rv`, the last one received
 * (events and bookmarks not yet applied included; the next WATCH starts
 * there because the pending batch is always applied before newer events),
 * and the checkpoint in kwatch.registrations, written with the rows.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <json-c/json.h>

#include "common/pg_prng.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "kw_common.h"
#include "kw_status.h"
#include "kw_cluster.h"
#include "kw_http.h"
#include "kw_decode.h"
#include "kw_apply.h"
#include "kw_worker.h"
#include "kw_watch.h"

/* A watch closing faster than this with no events counts as "short". */
#define KW_SHORT_WATCH_MS 1000
/* Consecutive short watches tolerated before backing off (PROTOCOL 17). */
#define KW_SHORT_WATCH_LIMIT 3
/*
 * A first streaming list on a server (a probe) silent this long without
 * its initial-events-end bookmark shows a server that ignored
 * sendInitialEvents: one that serves them sends the bookmark right after
 * the last initial event (client-go's reflector warns after the same 10 s:
 * reflector.go newInitialEventsEndBookmarkTicker).
 */
#define KW_INITIAL_EVENTS_END_WAIT_MS 10000
/* At most this long a small batch of a list waits for more (kw_watch_batch_hold_ms). */
#define KW_LIST_BATCH_HOLD_MS 50

/* Malformed watch streams in a row (no event in between) before relisting. */
#define KW_DECODE_RELIST_AFTER 3

static void start_stream_list(KwWatch *w);

/* set_str: replaces *field (in the watch's context) by a copy of value. */
static void
set_str(KwWatch *w, char **field, const char *value)
{
	char	   *old = *field;

	*field = value ? MemoryContextStrdup(w->cxt, value) : NULL;
	if (old)
		pfree(old);
}

/* ---------------------------------------------------------------------
 * the watch's phase (KwWatchPhase, kw_watch.h): changed here only
 * ---------------------------------------------------------------------
 */

/* phase_name: a KwWatchPhase's name, for messages. */
static const char *
phase_name(KwWatchPhase p)
{
	switch (p)
	{
		case KW_PHASE_LIST_PREPARE:
			return "list prepare";
		case KW_PHASE_LIST_ITEMS:
			return "list items";
		case KW_PHASE_LIST_COMPLETE:
			return "list complete";
		case KW_PHASE_LIST_MERGE:
			return "list merge";
		case KW_PHASE_WATCH:
			return "watch";
	}
	return "unknown";
}

/*
 * Relists the worker runs at once (kwatch.max_concurrent_relists).  A
 * PostgreSQL restart after which the API servers no longer serve the
 * watches' resourceVersions (an etcd compaction while it was down: 410
 * Gone, doc/protocol.md rule 5) makes every watch relist; client-go's
 * reflectors would each list at once, every informer on its own.  One
 * worker holds a fleet's watches, so it admits that many relists at a time
 * and the others wait their turn (state listing): the API servers get the
 * LISTs spread out and the apply workers their items a few lists at a
 * time (test/bench/fleet.py counts them).  A watch's first LIST (no
 * earlier sync, no checkpoint) is not counted: a registration's watches
 * list at once.  A slot is
 * taken when the relist starts (start_list_page) and given back when its
 * items are all in, or it fails (watch_set_phase), or the watch goes
 * (kw_watch_destroy).
 */
static int	relists_running = 0;

/* How often a relist waiting for its turn looks again, in ms. */
#define KW_RELIST_WAIT_MS 250

/* take_relist_slot: whether watch `w` may start its relist now (takes a slot if so). */
static bool
take_relist_slot(KwWatch *w)
{
	/* a LIST after any earlier sync, even before a restart, is a relist */
	if (w->relist_slot || !(w->first_list_done || w->resume_rv))
		return true;
	if (relists_running >= kw_max_concurrent_relists)
		return false;
	relists_running++;
	w->relist_slot = true;
	return true;
}

/* release_relist_slot: gives back watch `w`'s relist slot, if it holds one. */
static void
release_relist_slot(KwWatch *w)
{
	if (!w->relist_slot)
		return;
	w->relist_slot = false;
	relists_running--;
}

/*
 * phase_change_allowed: whether the reflector loop may go from phase
 * `from` to `to` (the transitions kw_watch.h's KwWatchPhase draws; rules
 * 20-23 of doc/protocol.md "The reflector loop"; client-go
 * tools/cache/reflector.go ListAndWatch).
 */
static bool
phase_change_allowed(KwWatchPhase from, KwWatchPhase to)
{
	switch (to)
	{
		case KW_PHASE_LIST_PREPARE:
			return true;		/* relist, from anywhere */
		case KW_PHASE_LIST_ITEMS:
			return from == KW_PHASE_LIST_PREPARE;
		case KW_PHASE_LIST_COMPLETE:
			return from == KW_PHASE_LIST_ITEMS;
		case KW_PHASE_LIST_MERGE:
			return from == KW_PHASE_LIST_COMPLETE;
		case KW_PHASE_WATCH:
			/* a merge sent before its list restarted commits all the same */
			return from == KW_PHASE_LIST_MERGE || from == KW_PHASE_LIST_PREPARE;
	}
	return false;
}

/*
 * watch_set_phase: moves watch `w` to phase `to`, the one place its phase
 * changes.  A transition KwWatchPhase does not allow is a bug in this
 * file: it is reported (WARNING, SQLSTATE XX000, naming both phases) and
 * made all the same, so that the watch goes on as the caller decided
 * rather than stopping the worker.
 */
static void
watch_set_phase(KwWatch *w, KwWatchPhase to)
{
	if (!phase_change_allowed(w->phase, to))
		ereport(WARNING,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg_internal("kwatch: watch %d went from phase \"%s\" to \"%s\", which the reflector loop does not allow",
								 w->reg.id, phase_name(w->phase), phase_name(to))));
	/* a relist's slot is held from its admission until its items are in */
	if (to != KW_PHASE_LIST_ITEMS)
		release_relist_slot(w);
	w->phase = to;
}

/* listing: whether the watch is in one of the list phases (a LIST is due or under way). */
static bool
listing(KwWatch *w)
{
	return w->phase != KW_PHASE_WATCH;
}

/*
 * streaming_list: whether the transfer in flight is a streaming list that
 * has not reached its initial-events-end bookmark (doc/protocol.md
 * "Streaming lists"): a WATCH while the list's items arrive.  Only
 * start_stream_list starts a WATCH in that phase, the bookmark ends it
 * (LIST_COMPLETE: the same stream goes on as the WATCH), and a list
 * restarts only with no transfer in flight.
 */
static bool
streaming_list(KwWatch *w)
{
	return w->xfer == XFER_WATCH && w->phase == KW_PHASE_LIST_ITEMS;
}

/*
 * next_page_first: whether the next LIST page may be requested before what
 * is decoded is applied: the list's items are arriving in pages (a continue
 * token, PROTOCOL 3) and no watch event is pending.  Pending list items
 * need not wait: staged rows follow in order, so the server prepares the
 * page while we write.  Anything else (events, the merge) is applied
 * before the next request.
 */
static bool
next_page_first(KwWatch *w)
{
	return w->phase == KW_PHASE_LIST_ITEMS && w->continue_token != NULL &&
		w->nevents == 0;
}

/* ---------------------------------------------------------------------
 * scheduling
 * ---------------------------------------------------------------------
 */

/*
 * kw_watch_retry_delay: how long to wait before trying again, in ms: exponential
 * backoff from kwatch.backoff_initial to kwatch.backoff_max with up to 50%
 * jitter (PROTOCOL 25), or a delay drawn inside the watch's retry range
 * for the request that comes next when it has one; at least `min_ms` (a
 * Retry-After).  Advances the backoff.
 */
int
kw_watch_retry_delay(KwWatch *w, int min_ms)
{
	int			delay;
	const int  *range = listing(w) ? &w->reg.retry_ms[0] : &w->reg.retry_ms[2];

	w->backoff_ms = w->backoff_ms ? Min(w->backoff_ms * 2, kw_backoff_max_ms)
		: kw_backoff_initial_ms;
	if (range[1] > 0)
	{
		/*
		 * The watch's own range for the request that comes next, a LIST or
		 * a WATCH (watch(retry_relist_after, retry_watch_after); client-go's
		 * RetryRelistAfter / RetryWatchAfter): uniform inside it.
		 */
		delay = range[0] + (int) (pg_prng_double(&pg_global_prng_state) * (range[1] - range[0]));
	}
	else
		delay = w->backoff_ms + (int) (pg_prng_double(&pg_global_prng_state) * w->backoff_ms / 2);
	return Max(delay, min_ms);
}

/*
 * kw_watch_schedule_retry: waits kw_watch_retry_delay() before the next request; `st` is
 * the state shown meanwhile (backoff, or failed for errors a retry rarely
 * fixes).
 */
void
kw_watch_schedule_retry(KwWatch *w, int min_ms, KwWatchState st)
{
	w->next_attempt = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												  kw_watch_retry_delay(w, min_ms));
	kw_watch_set_state(w, st);
}

/* kw_watch_retry_now: the next request may start at once. */
void
kw_watch_retry_now(KwWatch *w)
{
	w->next_attempt = 0;
}

/* ---------------------------------------------------------------------
 * the pending batch and the apply request: their state changes here
 * only; watch_apply.c chooses what to hand over, watch_result.c what
 * a result means
 * ---------------------------------------------------------------------
 */

/*
 * kw_watch_finish_ready: whether a list's merge may be sent: its last page
 * arrived (no transfer left), or its streaming list reached
 * initial-events-end (the stream goes on as the WATCH; its events are sent
 * after the merge).
 */
bool
kw_watch_finish_ready(KwWatch *w)
{
	return w->phase == KW_PHASE_LIST_COMPLETE &&
		(w->xfer == XFER_NONE || w->xfer == XFER_WATCH);
}

/*
 * kw_watch_pending_work: whether anything decoded waits to be handed to an
 * apply worker: events, list items, or a completed LIST to merge.
 */
bool
kw_watch_pending_work(KwWatch *w)
{
	return w->nevents > 0 || w->nitems > 0 || kw_watch_finish_ready(w);
}

/*
 * kw_watch_batch_full: whether the pending batch holds kwatch.batch_size
 * entries or kwatch.batch_memory bytes of JSON: the transfer pauses on it
 * (watch_feed), and a full list batch may be spread (watch_apply.c).
 */
bool
kw_watch_batch_full(KwWatch *w)
{
	return w->nevents + w->nitems >= kw_batch_size ||
		w->event_bytes + w->item_bytes >= (int64) kw_batch_memory_kb * 1024;
}

/*
 * kw_watch_batch_hold_ms: how many ms the pending list items may still
 * wait for more before they are handed to an apply worker (0: none).
 * While a list's body is arriving (a LIST page, or a streaming list before
 * its bookmark), a batch under a quarter of kwatch.batch_size entries and
 * of kwatch.batch_memory bytes waits for more, at most
 * KW_LIST_BATCH_HOLD_MS from its first item: handed over the moment a
 * worker is free, a list arriving no faster than it is applied made
 * batches of a dozen objects, a transaction each (3,933 for 50,000 custom
 * resources streamed from a 1.36 server), whose fixed cost took CPU from
 * the API server on the same cores.  Watch events never wait.
 */
long
kw_watch_batch_hold_ms(KwWatch *w, TimestampTz now)
{
	TimestampTz until;

	if (w->nitems == 0 || w->nevents > 0 || w->http == NULL ||
		!(w->xfer == XFER_LIST || streaming_list(w)) ||
		(int64) w->nitems * 4 >= kw_batch_size ||
		w->item_bytes * 4 >= (int64) kw_batch_memory_kb * 1024)
		return 0;
	until = TimestampTzPlusMilliseconds(w->items_since, KW_LIST_BATCH_HOLD_MS);
	return now < until ? (long) ((until - now) / 1000) + 1 : 0;
}

/*
 * kw_watch_unapplied: whether anything decoded is not committed yet: pending, in an
 * apply worker, or a request kept for its retry.
 */
bool
kw_watch_unapplied(KwWatch *w)
{
	return kw_watch_pending_work(w) || w->sent.len > 0 || w->nspread > 0;
}

/*
 * reset_items: forgets the pending list items (sent, or given up); with no
 * events pending, also what decoding left in the batch context.
 */
static void
reset_items(KwWatch *w)
{
	w->item_bytes = 0;
	w->nitems = 0;
	w->items = NULL;
	w->maxitems = 0;
	MemoryContextReset(w->items_cxt);
	if (w->nevents == 0)
		MemoryContextReset(w->batch_cxt);
}

/* reset_events: forgets the pending events (sent, or given up). */
static void
reset_events(KwWatch *w)
{
	w->event_bytes = 0;
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
	reset_events(w);
	reset_items(w);
}

/* kw_watch_forget_request: the request in flight is done with. */
void
kw_watch_forget_request(KwWatch *w)
{
	resetStringInfo(&w->sent);
	set_str(w, &w->sent_rv, NULL);
	w->ticket = NULL;
	w->resubmit_at = 0;
}

/*
 * apply_timeout: the deadline of the watch's batches, ms (0: none): its
 * own (watch(apply_timeout)), else kwatch.apply_timeout.  A watch whose
 * owner is not a superuser never has a longer deadline than
 * kwatch.apply_timeout, nor none while the setting has one: its table
 * owner's code could otherwise hold an apply worker for ever
 * (doc/security.md, Roles; watch() refuses such a value, and the 0.7.0
 * update clamps the ones 0.6.0 let through, but the rule holds here
 * whatever the table says).
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
 * kw_watch_submit_request: hands w->sent to the apply pool; when every apply worker is busy
 * (or its owner holds its share of them) it stays queued and
 * kw_watch_flush tries again on a later pass.
 */
void
kw_watch_submit_request(KwWatch *w)
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
	set_str(w, &w->sent_rv, rv);
	kw_watch_submit_request(w);
}

/*
 * kw_watch_send_spread: hands the pending list items (`req`, a
 * KW_APPLY_RELIST_STAGE of them) to another apply worker, beside the
 * request in flight (watch_apply.c, "Spreading a list"): encoded as
 * kw_watch_send_request does, submitted, and on success forgotten, its
 * ticket kept in w->spread until kw_watch_take_spread_result.  Returns
 * false, changing nothing, when no apply worker took it.
 */
bool
kw_watch_send_spread(KwWatch *w, KwApplyRequest *req)
{
	StringInfoData buf;
	KwApplyTicket *t;

	Assert(req->op == KW_APPLY_RELIST_STAGE && w->nspread < KW_SPREAD_MAX);
	req->reg = w->reg;
	req->timeout_ms = apply_timeout(w);
	req->direct = w->list_direct;
	initStringInfo(&buf);
	kw_apply_request_encode(&buf, req);
	t = kw_apply_submit(&buf, w, w->reg.id, w->reg.owner, req->timeout_ms);
	pfree(buf.data);
	if (t == NULL)
		return false;
	w->spread_gen[w->nspread] = w->list_gen;
	w->spread[w->nspread++] = t;
	reset_items(w);
	return true;
}

/*
 * kw_watch_take_spread_result: takes the result of one of the watch's
 * spread batches (kw_watch_send_spread) that has completed into *res
 * (allocated in `cxt`) and forgets its ticket; false when none has.
 * *current says whether it belongs to the list in progress (not to one
 * that has started over since).
 */
bool
kw_watch_take_spread_result(KwWatch *w, KwApplyResult *res, MemoryContext cxt,
							bool *current)
{
	for (int i = 0; i < w->nspread; i++)
	{
		if (kw_apply_poll(w->spread[i], res, cxt))
		{
			*current = (w->spread_gen[i] == w->list_gen);
			w->nspread--;
			w->spread[i] = w->spread[w->nspread];
			w->spread_gen[i] = w->spread_gen[w->nspread];
			return true;
		}
	}
	return false;
}

/*
 * kw_watch_note_spread_failed: a spread batch was not applied (`err`,
 * `sqlstate`): nothing more is handed over, and once no batch of the watch
 * is in an apply worker the list starts over (watch_result.c), without
 * spreading until a list commits.  The first failure is kept; NULL `err`
 * forgets it (the list was restarted).
 */
void
kw_watch_note_spread_failed(KwWatch *w, const char *err, int sqlstate)
{
	if (err == NULL)
	{
		if (w->spread_error)
			pfree(w->spread_error);
		w->spread_error = NULL;
		w->spread_sqlstate = 0;
	}
	else if (w->spread_error == NULL)
	{
		w->spread_error = MemoryContextStrdup(w->cxt, err);
		w->spread_sqlstate = sqlstate;
		/* the list made again is not spread: what failed may fail again */
		w->spread_off = true;
	}
}

/*
 * kw_watch_note_batch_sent: request `op` (kw_watch_flush's, just sent with
 * kw_watch_send_request) carries a part of the pending batch: forgets that
 * part, so that the stream decodes the next batch meanwhile (PROTOCOL 27).
 * A list's merge (KW_APPLY_RELIST_FINISH) takes the pending finish and the
 * streaming list's changes before its bookmark; list items
 * (KW_APPLY_RELIST_STAGE) the items; watch events the events.  The request
 * itself stays in the watch until its result is taken.
 */
void
kw_watch_note_batch_sent(KwWatch *w, KwApplyOp op)
{
	if (op == KW_APPLY_RELIST_FINISH)
	{
		watch_set_phase(w, KW_PHASE_LIST_MERGE);
		/* sent; kw_watch_note_list_committed resets list_cxt */
		w->amends = NULL;
		w->namends = w->maxamends = 0;
		w->amend_bytes = 0;
	}
	else if (op == KW_APPLY_RELIST_STAGE)
		reset_items(w);
	else
		reset_events(w);
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
 * kw_watch_take_result: once the apply worker of the watch's request has
 * reported (kw_apply_poll), takes its result into *res (allocated in
 * `cxt`): the request is in no apply worker any more, but stays in the
 * watch (sent, sent_op, sent_rv) until the result's reader forgets or keeps
 * it.  Returns false, changing nothing, when no request is in an apply
 * worker or its result has not come yet.
 */
bool
kw_watch_take_result(KwWatch *w, KwApplyResult *res, MemoryContext cxt)
{
	if (w->ticket == NULL || !kw_apply_poll(w->ticket, res, cxt))
		return false;
	w->ticket = NULL;
	return true;
}

/*
 * kw_watch_keep_request: the request failed in a way that sending it again
 * may fix (watch_result.c judges): it is kept, and kw_watch_has_pending
 * offers it again once kw_watch_retry_delay (which advances the backoff)
 * has passed.
 */
void
kw_watch_keep_request(KwWatch *w)
{
	w->resubmit_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												 kw_watch_retry_delay(w, 0));
}

/* ---------------------------------------------------------------------
 * what an apply request's success does to the watch (watch_result.c
 * takes the result and says which)
 * ---------------------------------------------------------------------
 */

/*
 * kw_watch_note_relist_begun: the apply worker prepared the LIST (staging
 * table, or straight into the mirror: res->direct) and sent the table's
 * uid -> resourceVersion (res->known_*): the first page may be requested.
 */
void
kw_watch_note_relist_begun(KwWatch *w, KwApplyResult *res)
{
	MemoryContextReset(w->list_cxt);
	w->known = kw_known_import(res->known_uids, res->known_rvs, res->nknown,
							   w->list_cxt);
	w->list_direct = res->direct;
	watch_set_phase(w, KW_PHASE_LIST_ITEMS);
	w->list_items = 0;
	w->list_rv = NULL;
	w->continue_token = NULL;
	/* a LIST after any earlier sync (even before a restart) is a relist */
	if (w->first_list_done || w->resume_rv)
		KW_WATCH_COUNT(w, relists, 1);
	kw_watch_retry_now(w);
}

/*
 * kw_watch_note_items_staged: a page of list items (KW_APPLY_RELIST_STAGE)
 * is staged, as `res` counts it; an item the apply worker skipped is not
 * in the table, nor in the list's count.
 */
void
kw_watch_note_items_staged(KwWatch *w, KwApplyResult *res)
{
	kw_watch_count_apply(w, &res->counts, false);
	if (res->skipped > 0)
	{
		w->list_items -= res->skipped;	/* not staged: not in the table */
		KW_WATCH_COUNT(w, skipped_objects, res->skipped);
	}
}

/*
 * kw_watch_note_rows_counted: an apply worker counted the rows of the
 * watch's table (KW_APPLY_COUNT_ROWS, sent when a watch resumes from its
 * checkpoint): `rows` objects, shown with the checkpoint.
 */
void
kw_watch_note_rows_counted(KwWatch *w, int64 rows)
{
	w->objects = rows;
	kw_watch_publish_progress(w);
}

/*
 * kw_watch_note_list_committed: a relist's merge (KW_APPLY_RELIST_FINISH)
 * has committed, changing the rows as `counts` says: the staged list is the
 * table now; watch from its resourceVersion.  Called with the request
 * still in the watch (its sent_rv is the list's resourceVersion).
 */
void
kw_watch_note_list_committed(KwWatch *w, KwApplyCounts *counts)
{
	w->objects = w->list_items;

	/*
	 * The merged list's resourceVersion, as sent: a streaming list's stream
	 * may have failed meanwhile (kw_watch_restart_list cleared list_rv);
	 * the table holds that list all the same, and the WATCH from its
	 * resourceVersion finds out what the failure meant (a 410 relists).
	 */
	set_str(w, &w->resume_rv, w->sent_rv);
	watch_set_phase(w, KW_PHASE_WATCH);
	w->first_list_done = true;
	w->spread_off = false;		/* a list committed: spreading is safe again */
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

/*
 * kw_watch_note_events_applied: a batch of watch events (KW_APPLY_EVENTS)
 * committed with its checkpoint, the request's sent_rv, which becomes the
 * watch's resume resourceVersion; `res` says what changed and what was
 * skipped.  A transfer that has streamed KW_HEALTHY_RESET_MS is healthy
 * again: the backoff resets.
 */
void
kw_watch_note_events_applied(KwWatch *w, KwApplyResult *res)
{
	w->objects += res->counts.added - res->counts.deleted;
	kw_watch_count_apply(w, &res->counts, true);
	if (res->skipped > 0)
		KW_WATCH_COUNT(w, skipped_objects, res->skipped);
	set_str(w, &w->resume_rv, w->sent_rv);
	kw_watch_publish_progress(w);
	if (TimestampDifferenceExceeds(w->xfer_started, GetCurrentTimestamp(),
								   KW_HEALTHY_RESET_MS))
		w->backoff_ms = 0;
}

/* ---------------------------------------------------------------------
 * URLs
 * ---------------------------------------------------------------------
 */

/* collection_url: the resource's collection URL with the selectors (PROTOCOL 1, 2). */
static void
collection_url(KwWatch *w, StringInfo url)
{
	KwRegistration *r = &w->reg;

	appendStringInfoString(url, w->cfg->api_server);
	if (r->api_group[0] == '\0')
		appendStringInfo(url, "/api/%s", r->api_version);
	else
		appendStringInfo(url, "/apis/%s/%s", r->api_group, r->api_version);
	if (r->namespace)
		appendStringInfo(url, "/namespaces/%s", r->namespace);
	appendStringInfo(url, "/%s", r->plural);
	if (r->label_selector)
		kw_url_append_param(url, "labelSelector", r->label_selector);
	if (r->field_selector)
		kw_url_append_param(url, "fieldSelector", r->field_selector);
}

/* ---------------------------------------------------------------------
 * the transfer's feed (run inside libcurl's write callback): decode only,
 * never touch the database
 * ---------------------------------------------------------------------
 */

static void
push_event(KwWatch *w, KwEventType t, KwObject *obj)
{
	if (w->nevents == w->maxevents)
	{
		int			n = Max(64, w->maxevents * 2);

		w->events = w->events ? repalloc(w->events, sizeof(KwEvent) * n)
			: palloc(sizeof(KwEvent) * n);
		w->maxevents = n;
	}
	w->events[w->nevents].type = t;
	w->events[w->nevents].obj = *obj;
	w->nevents++;
	w->event_bytes += obj->json_len;
}

static void
push_item(KwWatch *w, KwObject *obj)
{
	if (w->nitems == w->maxitems)
	{
		int			n = Max(64, w->maxitems * 2);

		w->items = w->items ? repalloc(w->items, sizeof(KwObject) * n)
			: palloc(sizeof(KwObject) * n);
		w->maxitems = n;
	}
	if (w->nitems == 0)
		w->items_since = GetCurrentTimestamp();
	w->items[w->nitems++] = *obj;
	w->item_bytes += obj->json_len;
}

static void
skip_object(KwWatch *w, const char *why)
{
	KW_WATCH_COUNT(w, skipped_objects, 1);
	ereport(WARNING,
			(errcode(ERRCODE_DATA_EXCEPTION),
			 errmsg("kwatch: skipped an object of %s from server \"%s\": %s",
					w->reg.plural, w->reg.server, why)));
}

static void
note_sanitized(KwWatch *w, KwObject *obj)
{
	KW_WATCH_COUNT(w, sanitized_objects, 1);
	ereport(LOG,
			(errmsg("kwatch: object %s%s%s (uid %s) of %s had text jsonb cannot store; stored with \\u0000 escaped and invalid UTF-8 replaced",
					obj->namespace ? obj->namespace : "", obj->namespace ? "/" : "",
					obj->name, obj->uid, w->reg.plural)));
}

/*
 * inject_error: raises an ERROR when `name` is the object name set in the
 * developer setting kwatch.debug_error_on_object (tests only: it proves
 * that an ERROR inside libcurl's write callback, in watch_feed, ends the
 * transfer and leaves the worker running: http.c's transfer_write_cb
 * catches it).
 */
static void
inject_error(const char *name)
{
	if (kw_debug_error_on_object && kw_debug_error_on_object[0] && name &&
		strcmp(name, kw_debug_error_on_object) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("injected error for object \"%s\" (kwatch.debug_error_on_object)",
						name)));
}

/*
 * item_object: an object as the framer cut it out (`item`: a LIST item, or
 * a watch event's object) -> *obj, in the current memory context: its
 * identity, and with `body` its text, sanitized (once: the decoder did it
 * for an event, see kw_watch_decoder_feed) and redacted for a Secret watch
 * without secret_data.  `what` names it in messages ("list item",
 * "object").  Returns false when the object cannot be stored: over a limit,
 * without metadata.uid, name or resourceVersion, or with one of them not
 * plain UTF-8 text (the framer sees them raw, escapes undecoded), or a
 * Secret that is not a JSON object (counted and logged by skip_object).
 */
static bool
item_object(KwWatch *w, KwListItem *item, const char *what, bool body,
			KwObject *obj)
{
	if (item->skip_reason)
	{
		skip_object(w, psprintf("%s %s%s%s (uid %s) is %s", what,
								item->namespace ? item->namespace : "",
								item->namespace ? "/" : "",
								item->name ? item->name : "(unnamed)",
								item->uid ? item->uid : "unknown", item->skip_reason));
		return false;
	}
	if (item->uid == NULL || item->name == NULL || item->resource_version == NULL)
	{
		skip_object(w, psprintf("%s %s%s%s has no %s", what,
								item->namespace ? item->namespace : "",
								item->namespace ? "/" : "",
								item->name ? item->name : "(unnamed)",
								item->uid == NULL ? "metadata.uid" :
								item->name == NULL ? "metadata.name" :
								"metadata.resourceVersion"));
		return false;
	}
	if (!kw_valid_identity(item->uid) || !kw_valid_identity(item->name) ||
		!kw_valid_identity(item->resource_version) ||
		(item->namespace && !kw_valid_identity(item->namespace)) ||
		strchr(item->uid, '\\') || strchr(item->name, '\\') ||
		strchr(item->resource_version, '\\') ||
		(item->namespace && strchr(item->namespace, '\\')))
	{
		skip_object(w, psprintf("a%s %s's metadata.uid, name, namespace or resourceVersion is not plain UTF-8 text",
								what[0] == 'o' ? "n" : "", what));
		return false;
	}
	inject_error(item->name);
	memset(obj, 0, sizeof(*obj));
	obj->uid = pstrdup(item->uid);
	obj->namespace = item->namespace ? pstrdup(item->namespace) : NULL;
	obj->name = pstrdup(item->name);
	obj->resource_version = pstrdup(item->resource_version);
	if (!body)
		return true;
	obj->json = pnstrdup(item->json, item->json_len);
	obj->json_len = item->json_len;
	obj->managers = item->managers ? pstrdup(item->managers) : NULL;
	/* an event's text was made storable by its decoder, before its check */
	if (item->event_type != NULL ? item->sanitized :
		kw_sanitize_json(&obj->json, &obj->json_len))
		note_sanitized(w, obj);
	if (w->redact && !kw_redact_secret_json(&obj->json, &obj->json_len))
	{
		/* never stored unless redacted: it may hold values in clear */
		skip_object(w, psprintf("%s %s%s%s (uid %s) is not a JSON object", what,
								obj->namespace ? obj->namespace : "",
								obj->namespace ? "/" : "", obj->name, obj->uid));
		return false;
	}
	return true;
}

static void list_item(KwWatch *w, KwListItem *item);

/*
 * stream_refused: the streaming list in flight shows that its server does
 * not serve streaming lists (`why`): end it; stream_ended_by_us lists with
 * LIST instead.
 */
static void
stream_refused(KwWatch *w, const char *why)
{
	w->abort_reason = MemoryContextStrdup(w->cxt, why);
	w->abort_src = KW_ERRSRC_HTTP;
	w->stream_refused = true;
}

/* initial_events_end: whether a BOOKMARK's object carries k8s.io/initial-events-end: "true". */
static bool
initial_events_end(json_object *o)
{
	json_object *meta,
			   *ann;
	const char *v;

	if (!json_object_object_get_ex(o, "metadata", &meta) ||
		!json_object_object_get_ex(meta, "annotations", &ann))
		return false;
	v = kw_json_get_string(ann, "k8s.io/initial-events-end");
	return v != NULL && strcmp(v, "true") == 0;
}

/*
 * on_initial_event: one event of a streaming list before its
 * initial-events-end bookmark (doc/protocol.md "Streaming lists";
 * apimachinery meta/v1 ListOptions.SendInitialEvents, client-go
 * reflector.go watchList).  An ADDED event is a list item, staged like a
 * LIST's (an object whose resourceVersion the table holds goes without its
 * body, PROTOCOL 23); a MODIFIED or DELETED (a change after the snapshot)
 * is kept for the merge; the bookmark ends the list at its resourceVersion
 * and the merge becomes pending while the stream goes on as the WATCH.  A
 * bookmark without the annotation first is a server that ignored
 * sendInitialEvents: stream_refused.
 */
static void
on_initial_event(KwWatch *w, KwEventType t, KwListItem *item, json_object *o)
{
	KwObject	obj;

	if (t == KW_EV_BOOKMARK)
	{
		json_object *meta = NULL;
		const char *rv;

		if (!initial_events_end(o))
		{
			stream_refused(w, "a BOOKMARK without k8s.io/initial-events-end came first: the server ignored sendInitialEvents");
			return;
		}
		json_object_object_get_ex(o, "metadata", &meta);
		rv = kw_json_get_string(meta, "resourceVersion");
		if (rv == NULL || rv[0] == '\0')
		{
			w->abort_reason = MemoryContextStrdup(w->cxt, "the initial-events-end BOOKMARK has no resourceVersion");
			w->abort_src = KW_ERRSRC_DECODE;
			return;
		}
		KW_WATCH_COUNT(w, bookmarks, 1);
		set_str(w, &w->list_rv, rv);
		w->list_rv_seen = true;
		watch_set_phase(w, KW_PHASE_LIST_COMPLETE);
		if (w->stream_probe)
		{
			KW_WATCH_COUNT(w, list_calls, 1);
			w->stream_probe = false;
		}
		kw_list_stream_support(w->cfg->api_server, true, NULL);
		return;
	}
	if (t != KW_EV_ADDED && (w->namends >= kw_batch_size ||
							 w->amend_bytes >= (int64) kw_batch_memory_kb * 1024))
	{
		/*
		 * A collection this busy is listed with LIST this time: the changes
		 * are held until the merge, at most a batch of them (kwatch.batch_size
		 * and kwatch.batch_memory), as any batch.
		 */
		w->abort_reason = MemoryContextStrdup(w->cxt,
											  psprintf("more than %d changes or %d kB of them came before the streaming list's initial-events-end bookmark; listing with LIST this time",
													   kw_batch_size, kw_batch_memory_kb));
		w->abort_src = KW_ERRSRC_HTTP;
		w->list_not_streamed = true;
		return;
	}

	if (t == KW_EV_ADDED)
	{
		list_item(w, item);
		return;
	}
	/* the list's own memory: kept until its merge is sent */
	MemoryContextSwitchTo(w->list_cxt);
	if (!item_object(w, item, "object", true, &obj))
		return;
	/*
	 * A change after the snapshot's ADDED events and before the bookmark
	 * (the server sends the bookmark at its next bookmark tick): part of
	 * the list, applied with its merge in one transaction
	 * (kw_apply_relist_finish), as client-go's watchList applies it to
	 * its temporary store.
	 */
	if (w->namends == w->maxamends)
	{
		int			n = Max(16, w->maxamends * 2);

		w->amends = w->amends ? repalloc(w->amends, sizeof(KwEvent) * n)
			: palloc(sizeof(KwEvent) * n);
		w->maxamends = n;
	}
	w->amends[w->namends].type = t;
	w->amends[w->namends].obj = obj;
	w->namends++;
	w->amend_bytes += obj.json_len;
	if (t == KW_EV_DELETED)
		w->list_items--;	/* an object of the list, gone by its end */
}

/* on_watch_event: one decoded watch event -> pending batch (PROTOCOL 14-16). */
static void
on_watch_event(void *arg, KwEventType t, KwListItem *item, void *jobj)
{
	KwWatch    *w = (KwWatch *) arg;
	json_object *o = (json_object *) jobj;
	KwObject	obj;

	if (w->abort_reason)
		return;
	w->xfer_events++;

	if (streaming_list(w) && t != KW_EV_ERROR)
	{
		MemoryContext old = MemoryContextSwitchTo(w->items_cxt);

		on_initial_event(w, t, item, o);
		MemoryContextSwitchTo(old);
		return;
	}

	if (t == KW_EV_BOOKMARK)
	{
		json_object *meta = NULL;
		const char *rv;

		json_object_object_get_ex(o, "metadata", &meta);
		rv = kw_json_get_string(meta, "resourceVersion");

		KW_WATCH_COUNT(w, bookmarks, 1);
		if (rv && rv[0])
		{
			memset(&obj, 0, sizeof(obj));
			obj.resource_version = pstrdup(rv);
			push_event(w, KW_EV_BOOKMARK, &obj);
			w->pending_rv = obj.resource_version;
		}
		return;
	}
	if (t == KW_EV_ERROR)
	{
		json_object *code;
		int			c = 0;
		const char *msg = kw_json_get_string(o, "message");

		if (json_object_object_get_ex(o, "code", &code))
			c = json_object_get_int(code);
		/* in the watch's context: a flush may reset the batch before use */
		w->abort_reason = MemoryContextStrdup(w->cxt,
											  psprintf("watch ERROR event (code %d): %s", c,
													   msg ? msg : "(no message)"));
		w->abort_src = KW_ERRSRC_HTTP;
		/* "Too large resource version": our RV is newer than the server's */
		w->abort_relist_no_rv = (c == 504 ||
								 (msg && strstr(msg, "Too large resource version")) ||
		/* a streaming list's 410: a consistent one next (reflector.go watchList) */
								 (streaming_list(w) && c == 410));
		return;
	}

	if (!item_object(w, item, "object", true, &obj))
		return;
	push_event(w, t, &obj);
	w->pending_rv = obj.resource_version;
}

/*
 * on_list_item: one LIST item -> pending staging batch.  An object whose
 * resourceVersion equals the one the table holds is staged without its body
 * (PROTOCOL 23: unchanged objects cost nothing).
 */
static void
on_list_item(void *arg, KwListItem *item)
{
	KwWatch    *w = (KwWatch *) arg;
	MemoryContext old = MemoryContextSwitchTo(w->items_cxt);

	list_item(w, item);
	MemoryContextSwitchTo(old);
}

/*
 * list_item: one item of a list (a LIST's, or an ADDED event of a streaming
 * list) -> pending staging batch, in the items' context; an object whose
 * resourceVersion the table holds goes without its body (PROTOCOL 23).
 */
static void
list_item(KwWatch *w, KwListItem *item)
{
	const char *known = item->uid ? kw_known_rv(w->known, item->uid) : NULL;
	bool		unchanged = known != NULL && item->resource_version != NULL &&
		strcmp(known, item->resource_version) == 0;
	KwObject	obj;

	if (!item_object(w, item, "list item", !unchanged, &obj))
		return;
	push_item(w, &obj);
	w->list_items++;
}

/*
 * watch_feed: the transfer's consumer of a 200 body (KwHttpFeed): decodes
 * into the pending batch; pauses the transfer once the batch holds
 * kwatch.batch_size entries or kwatch.batch_memory bytes of objects
 * (PROTOCOL 27) and ends it when the stream is
 * malformed or a decoded event said so (abort_reason).  http.c runs it
 * under PG_TRY in batch_cxt.
 */
static KwFeedResult
watch_feed(void *arg, const char *data, size_t len, char **error)
{
	KwWatch    *w = (KwWatch *) arg;
	char	   *err = NULL;
	bool		ok;

	if (w->abort_reason)
		return KW_FEED_STOP;
	if (kw_watch_batch_full(w))
		return KW_FEED_PAUSE;	/* apply what we have, then read on */
	if (w->xfer == XFER_LIST)
		ok = kw_list_decoder_feed(w->ldec, (char *) data, len, on_list_item, w, &err);
	else
		ok = kw_watch_decoder_feed(w->wdec, (char *) data, len, on_watch_event, w, &err);
	if (!ok)
	{
		w->abort_reason = MemoryContextStrdup(w->cxt, err);
		w->abort_src = KW_ERRSRC_DECODE;
	}
	return w->abort_reason ? KW_FEED_STOP : KW_FEED_CONTINUE;
}

/* ---------------------------------------------------------------------
 * transfers
 * ---------------------------------------------------------------------
 */

static void
start_transfer(KwWatch *w, KwXfer kind, const char *url)
{
	MemoryContext old = MemoryContextSwitchTo(w->cxt);

	w->http = kw_http_transfer_create(w->cfg, url, true, watch_feed, w, w->batch_cxt);
	w->xfer = kind;
	resetStringInfo(&w->errbody);
	set_str(w, &w->abort_reason, NULL);
	w->abort_relist_no_rv = false;
	w->xfer_started = GetCurrentTimestamp();
	w->xfer_events = 0;
	/* with the managedFields' summaries: who changed each object, for history */
	if (kind == XFER_LIST)
	{
		w->ldec = kw_list_decoder_create(w->object_api_version, w->reg.kind);
		kw_list_decoder_keep_managers(w->ldec);
	}
	else
	{
		w->wdec = kw_watch_decoder_create(w->object_api_version, w->reg.kind);
		kw_watch_decoder_keep_managers(w->wdec);
	}
	MemoryContextSwitchTo(old);

	kw_http_transfer_attach(w->multi, w->http, w);
}

/* kw_watch_stop_transfer: removes and frees the transfer in flight, if any. */
void
kw_watch_stop_transfer(KwWatch *w)
{
	if (w->http)
	{
		kw_http_transfer_detach(w->multi, w->http);
		kw_http_transfer_destroy(w->http);
		w->http = NULL;
	}
	kw_list_decoder_free(w->ldec);
	w->ldec = NULL;
	kw_watch_decoder_free(w->wdec);
	w->wdec = NULL;
	w->xfer = XFER_NONE;
}

/*
 * list_parameters: appends the LIST's limit, continue and resourceVersion
 * parameters to `url`, as client-go's reflector chooses them
 * (staging/src/k8s.io/client-go/tools/cache/reflector.go, ListAndWatch;
 * PROTOCOL 3, 5, 22):
 *  - a continue request carries the token and the limit, no resourceVersion;
 *  - the first LIST of a watch that has seen no resourceVersion, into a
 *    table without its rows (a LIST cut short may have written some: one
 *    of them may be newer than what another server's cache holds), asks
 *    resourceVersion=0 (with kwatch.list_from_watch_cache): the API
 *    server's watch cache answers it whole, ignoring the limit, for a
 *    fraction of a consistent read's cost (apiserver
 *    pkg/storage/cacher/cacher.go GetToList); a server without a watch
 *    cache pages it as usual;
 *  - a relist from the last resourceVersion (NotOlderThan) sends no limit
 *    unless that first LIST came in pages, so that the watch cache serves
 *    it too rather than etcd (it only serves lists without a limit);
 *  - anything else (a relist after a 410 or 504, kwatch.relist()) is a
 *    consistent read, paged: no resourceVersion, which etcd answers.
 * Never resourceVersion=0 once a newer one was seen (PROTOCOL 22).
 */
static void
list_parameters(KwWatch *w, StringInfo url)
{
	bool		limit = kw_list_page_size > 0;

	w->list_from_cache = false;
	if (w->continue_token)
		kw_url_append_param(url, "continue", w->continue_token);	/* no RV: PROTOCOL 3 */
	else if (w->list_with_rv && w->resume_rv)
	{
		kw_url_append_param(url, "resourceVersion", w->resume_rv);
		kw_url_append_param(url, "resourceVersionMatch", "NotOlderThan");
		if (kw_list_from_watch_cache && !w->paginated_result)
			limit = false;
	}
	else if (kw_list_from_watch_cache && !w->first_list_done &&
			 w->resume_rv == NULL && !w->list_rv_seen && w->list_direct)
	{
		kw_url_append_param(url, "resourceVersion", "0");
		w->list_from_cache = true;
	}
	if (limit)
		kw_url_append_param(url, "limit", psprintf("%d", kw_list_page_size));
}

/* start_list_page: GET one LIST page (PROTOCOL 2-4, 22). */
static void
start_list_page(KwWatch *w)
{
	StringInfoData url;

	if (w->phase == KW_PHASE_LIST_PREPARE)
	{
		/* first the apply side prepares the table (kw_watch_note_relist_begun) */
		KwApplyRequest req = {.op = KW_APPLY_RELIST_BEGIN,
			/* only a first sync with no checkpoint may skip staging (sync.c) */
		.allow_direct = !w->first_list_done && w->resume_rv == NULL,
		/* kwatch.relist(): a crash before the LIST commits must not forget it */
		.forget_checkpoint = w->list_request > 0};

		if (w->sent.len == 0)
			kw_watch_send_request(w, &req, NULL);
		kw_watch_set_state(w, KW_STATE_LISTING);
		return;
	}

	if (w->continue_token == NULL && !w->list_not_streamed &&
		kw_list_should_stream(w->cfg->api_server))
	{
		start_stream_list(w);
		return;
	}
	initStringInfo(&url);
	collection_url(w, &url);
	list_parameters(w, &url);
	kw_watch_set_state(w, KW_STATE_LISTING);
	start_transfer(w, XFER_LIST, url.data);
	KW_WATCH_COUNT(w, list_calls, 1);
	pfree(url.data);
}

/*
 * watch_timeout: timeoutSeconds for the next WATCH: random in [min, 2*min)
 * to spread reconnects, as client-go's reflector (minWatchTimeout).
 */
static int
watch_timeout(void)
{
	return kw_watch_timeout_s +
		(int) (pg_prng_double(&pg_global_prng_state) * kw_watch_timeout_s);
}

/*
 * start_stream_list: the list as a streaming list (doc/protocol.md
 * "Streaming lists"), with the parameters of client-go's reflector
 * (reflector.go watchList): watch, sendInitialEvents=true,
 * resourceVersionMatch=NotOlderThan, allowWatchBookmarks and a
 * timeoutSeconds; resourceVersion is the last one seen for a relist from it
 * (data at least that new), and absent otherwise, which asks for a
 * consistent snapshot (the state as of the request, as a quorum read) --
 * after a 410 or 504, for kwatch.relist(), and for the first list.
 */
static void
start_stream_list(KwWatch *w)
{
	StringInfoData url;
	int			timeout = watch_timeout();

	initStringInfo(&url);
	collection_url(w, &url);
	kw_url_append_param(&url, "watch", "true");
	kw_url_append_param(&url, "sendInitialEvents", "true");
	kw_url_append_param(&url, "resourceVersionMatch", "NotOlderThan");
	if (w->list_with_rv && w->resume_rv)
		kw_url_append_param(&url, "resourceVersion", w->resume_rv);
	kw_url_append_param(&url, "allowWatchBookmarks", "true");
	kw_url_append_param(&url, "timeoutSeconds", psprintf("%d", timeout));
	kw_watch_set_state(w, KW_STATE_LISTING);
	start_transfer(w, XFER_WATCH, url.data);
	w->watch_timeout_s = timeout;
	Assert(streaming_list(w));
	w->stream_refused = false;
	/* a probe (the server's answer is not known) counts once it is served */
	w->stream_probe = !kw_list_stream_known(w->cfg->api_server);
	if (!w->stream_probe)
		KW_WATCH_COUNT(w, list_calls, 1);
	pfree(url.data);
}

/* start_watch: GET ?watch=true from resume_rv (PROTOCOL 12, 17). */
static void
start_watch(KwWatch *w)
{
	StringInfoData url;
	int			timeout;

	initStringInfo(&url);
	collection_url(w, &url);
	timeout = watch_timeout();
	kw_url_append_param(&url, "watch", "true");
	kw_url_append_param(&url, "resourceVersion", w->resume_rv);
	kw_url_append_param(&url, "allowWatchBookmarks", "true");
	kw_url_append_param(&url, "timeoutSeconds", psprintf("%d", timeout));
	kw_watch_set_state(w, KW_STATE_WATCHING);
	start_transfer(w, XFER_WATCH, url.data);
	w->watch_timeout_s = timeout;
	KW_WATCH_COUNT(w, watch_calls, 1);
	pfree(url.data);
}

/* kw_watch_restart_list: the next request is the first page of a fresh LIST. */
void
kw_watch_restart_list(KwWatch *w, bool with_rv)
{
	/*
	 * A streaming list given up after its bookmark, its merge not sent: the
	 * events decoded after the bookmark follow a list the table never got,
	 * and their checkpoint would cover it.  Once the merge is sent (in
	 * flight) they are kept: they follow it.
	 */
	if (w->phase == KW_PHASE_LIST_COMPLETE)
		reset_events(w);
	watch_set_phase(w, KW_PHASE_LIST_PREPARE);
	w->list_gen++;			/* spread batches still out are the old list's */
	if (w->slot->synced)
		kw_watch_set_synced(w, false, false);
	w->list_with_rv = with_rv && w->resume_rv != NULL;
	set_str(w, &w->continue_token, NULL);
	set_str(w, &w->list_rv, NULL);
	/* staged rows are emptied by kw_sync_relist_begin */
	reset_items(w);
	/* in list_cxt, reset by kw_watch_note_relist_begun */
	w->amends = NULL;
	w->namends = w->maxamends = 0;
	w->amend_bytes = 0;
}

/*
 * stream_not_served: the streaming list in flight was refused or ignored
 * (`why`).  With kwatch.list_strategy = auto, the server is remembered as
 * one without streaming lists (list_strategy.c) and the list starts over
 * at once with LIST, as client-go's reflector falls back (reflector.go
 * ListAndWatch): returns true.  With stream, it is an error like any other
 * (false): the caller records it and retries.
 */
static bool
stream_not_served(KwWatch *w, const char *why)
{
	if (kw_list_strategy != KW_LIST_STRATEGY_AUTO)
		return false;
	kw_list_stream_support(w->cfg->api_server, false, why);
	kw_watch_restart_list(w, true);
	kw_watch_retry_now(w);
	return true;
}

/*
 * stream_ended_by_us: the transfer was ended by its callbacks, for
 * malformed data or an ERROR event (w->abort_reason).  A malformed watch
 * stream (a proxy's page, a cut or corrupt event): the events before it are
 * applied, so watch again from the last good resourceVersion after a
 * backoff, as client-go's reflector retries a watch on an internal error.
 * The same failure again and again, with no event in between, relists
 * (PROTOCOL 13), whose LIST skips an object it cannot read.  Anything else
 * (an ERROR event, a malformed LIST or streaming list) relists.  A
 * streaming list that showed its server ignores sendInitialEvents lists
 * again at once with LIST (stream_not_served).
 */
static void
stream_ended_by_us(KwWatch *w, KwXfer kind, bool streaming)
{
	if (streaming && w->stream_refused && stream_not_served(w, w->abort_reason))
		return;
	kw_watch_record_error(w, w->abort_src, w->abort_reason);
	if (kind == XFER_WATCH && !streaming && w->abort_src == KW_ERRSRC_DECODE)
	{
		w->decode_failures = w->xfer_events > 0 ? 1 : w->decode_failures + 1;
		if (w->decode_failures < KW_DECODE_RELIST_AFTER)
		{
			kw_watch_schedule_retry(w, 0, KW_STATE_BACKOFF);
			return;
		}
		w->decode_failures = 0;
	}
	kw_watch_restart_list(w, !w->abort_relist_no_rv);
	if (w->abort_src == KW_ERRSRC_DECODE)
		kw_watch_schedule_retry(w, 0, KW_STATE_BACKOFF);
	else if (w->short_watches++ > 0)	/* repeated 410s: slow down */
		kw_watch_schedule_retry(w, 0, KW_STATE_BACKOFF);
	else
		kw_watch_retry_now(w);
}

/*
 * list_page_done: a LIST page arrived whole (HTTP 200): remember the list's
 * resourceVersion (the first page's, PROTOCOL 5) and the continue token;
 * without one the list is complete and its merge is pending.
 */
static void
list_page_done(KwWatch *w, const char *rv, const char *cont)
{
	if (w->list_rv == NULL)
		set_str(w, &w->list_rv, rv);
	w->list_rv_seen = true;
	if (cont != NULL && w->list_from_cache)
		w->paginated_result = true; /* no watch cache: keep paging */
	set_str(w, &w->continue_token, cont);
	if (cont == NULL)
		watch_set_phase(w, KW_PHASE_LIST_COMPLETE);
	kw_watch_retry_now(w);
}

/*
 * watch_closed: a watch ended cleanly (timeoutSeconds): re-watch at once
 * (PROTOCOL 17), unless watches keep closing instantly without events.
 */
static void
watch_closed(KwWatch *w, long elapsed_ms)
{
	if (w->xfer_events == 0 && elapsed_ms < KW_SHORT_WATCH_MS)
	{
		if (++w->short_watches >= KW_SHORT_WATCH_LIMIT)
		{
			kw_watch_record_error(w, KW_ERRSRC_HTTP,
						 psprintf("watch closed after %ld ms without events, %d times in a row",
								  elapsed_ms, w->short_watches));
			kw_watch_schedule_retry(w, 0, KW_STATE_BACKOFF);
			return;
		}
	}
	else
		w->short_watches = 0;
	kw_watch_retry_now(w);
}

/*
 * error_status: the server answered `status` (not 200); the body is a
 * Status object, or a proxy's page.  410 relists (a LIST with a
 * resourceVersion or an expired continue token starts over without one,
 * PROTOCOL 7, 8, 16, 22); 429/5xx wait for Retry-After or the backoff and
 * repeat the same request (PROTOCOL 10, 25); a 401 re-reads the token file
 * once (PROTOCOL 33); other 4xx are failures retried at the backoff's pace.
 */
static void
error_status(KwWatch *w, KwXfer kind, bool streaming, long status, int retry_after)
{
	char	   *reason = NULL;
	char	   *msg = kw_status_message(w->errbody.data, w->errbody.len, &reason);
	char	   *full = psprintf("%s returned HTTP %ld: %s",
								streaming ? "streaming list" :
								kind == XFER_LIST ? "LIST" : "WATCH", status, msg);
	bool		too_large = (status == 504 ||
							 (msg && strstr(msg, "Too large resource version")));
	bool		listing = (kind == XFER_LIST || streaming);

	/*
	 * A server before streaming lists refuses the request as invalid (400,
	 * 422: resourceVersionMatch is forbidden for watch); one whose storage
	 * cannot serve them says so with a 500 (RequestWatchProgress, etcd <
	 * 3.5.13).
	 */
	if (streaming && (status == 400 || status == 422 ||
					  (status == 500 && msg && strstr(msg, "RequestWatchProgress"))) &&
		stream_not_served(w, full))
		return;
	kw_watch_record_error(w, KW_ERRSRC_HTTP, full);
	if (status == 410 || (too_large && ((kind == XFER_WATCH && !streaming) || w->list_with_rv)))
	{
		if (listing)
		{
			/*
			 * Expired continue token (PROTOCOL 7) or a resourceVersion the
			 * server can't serve (PROTOCOL 8, 22): list again from scratch,
			 * consistent read.  Never use an inconsistent token.
			 */
			kw_watch_restart_list(w, false);
			w->list_with_rv = false;
		}
		else
			kw_watch_restart_list(w, !too_large);
		if (w->short_watches++ > 0)
			kw_watch_schedule_retry(w, 0, KW_STATE_BACKOFF);
		else
			kw_watch_retry_now(w);
		return;
	}
	if (status == 401 && kw_credential_can_refresh(w->cfg) && !w->retried_401)
	{
		/* token file read again, exec plugin run again (PROTOCOL 33) */
		kw_credential_rejected(w->cfg, w->xfer_started);
		w->retried_401 = true;
		kw_watch_retry_now(w);
		return;
	}
	if (status == 429 || status >= 500)
	{
		/* same request again after Retry-After / backoff (PROTOCOL 10) */
		kw_watch_schedule_retry(w, retry_after > 0 ? retry_after * 1000 : 0,
					   KW_STATE_BACKOFF);
		return;
	}
	/* 401 after re-reading, 403, 404, 400...: retried slowly */
	if (listing)
		kw_watch_restart_list(w, true);
	if (status == 401 || status == 403)
	{
		/* re-read server, user mapping and kubeconfig next time */
		MemoryContextReset(w->cfg_cxt);
		w->cfg = NULL;
	}
	w->backoff_ms = Max(w->backoff_ms, kw_backoff_max_ms / 2);
	kw_watch_schedule_retry(w, 0, KW_STATE_FAILED);
}

/*
 * kw_watch_transfer_done: libcurl finished the transfer of `w` with
 * `curlcode`; collects its outcome (HTTP status, Retry-After, the
 * decoders' last word) and hands it to the one function that decides what
 * comes next: stream_ended_by_us, a transport failure (retried after the
 * backoff; a LIST starts over), list_page_done, watch_closed or
 * error_status.
 */
void
kw_watch_transfer_done(KwWatch *w, int curlcode)
{
	KwXfer		kind = w->xfer;
	bool		streaming = streaming_list(w);
	long		status = kw_http_transfer_status(w->http);
	int			retry_after = kw_http_transfer_retry_after(w->http);
	char	   *curlerr = NULL;
	char	   *rv = NULL,
			   *cont = NULL,
			   *err = NULL;
	TimestampTz now = GetCurrentTimestamp();
	long		elapsed_ms = (long) ((now - w->xfer_started) / 1000);

	if (w->http->stop_reason && !w->abort_reason)
	{
		/* an ERROR raised while decoding, caught by http.c */
		w->abort_reason = MemoryContextStrdup(w->cxt, w->http->stop_reason);
		w->abort_src = KW_ERRSRC_DECODE;
	}
	if (curlcode != KW_HTTP_TRANSFER_OK)
	{
		int			sqlstate;
		char	   *detail;
		char	   *hint;

		(void) kw_http_transport_error(w->http, curlcode, &sqlstate, &detail, &hint);
		curlerr = hint ? psprintf("%s (%s)", detail, hint) : detail;
	}
	appendBinaryStringInfo(&w->errbody, w->http->errbody.data, w->http->errbody.len);
	if (curlcode == KW_HTTP_TRANSFER_OK && status == 200 && !w->abort_reason)
	{
		bool		ok = (kind == XFER_LIST) ?
			kw_list_decoder_finish(w->ldec, &rv, &cont, &err) :
			kw_watch_decoder_finish(w->wdec, &err);

		if (!ok)
		{
			w->abort_reason = MemoryContextStrdup(w->cxt, err);
			w->abort_src = KW_ERRSRC_DECODE;
		}
	}
	kw_watch_stop_transfer(w);

	if (w->abort_reason)
		stream_ended_by_us(w, kind, streaming);
	else if (curlcode != KW_HTTP_TRANSFER_OK)
	{
		/* refused, reset, TLS, timeout */
		kw_watch_record_error(w, KW_ERRSRC_HTTP, psprintf("%s request failed: %s",
												 streaming ? "streaming list" :
												 kind == XFER_LIST ? "LIST" : "WATCH", curlerr));
		if (kind == XFER_LIST || streaming)
			kw_watch_restart_list(w, true);
		kw_watch_schedule_retry(w, 0, KW_STATE_BACKOFF);
	}
	else if (status == 200 && streaming)
	{
		/*
		 * The stream ended cleanly before its initial-events-end bookmark.
		 * On a server not known to stream: one that ignored sendInitialEvents
		 * and watched until timeoutSeconds (client-go would wait for the
		 * bookmark again and again).  On one that streams (a graceful
		 * shutdown, or a long initial phase past timeoutSeconds): a list cut
		 * short, started over.
		 */
		if (!w->stream_probe ||
			!stream_not_served(w, "the stream ended before an initial-events-end bookmark"))
		{
			kw_watch_record_error(w, KW_ERRSRC_HTTP, "streaming list ended before its initial-events-end bookmark");
			kw_watch_restart_list(w, true);
			kw_watch_schedule_retry(w, 0, KW_STATE_BACKOFF);
		}
	}
	else if (status == 200)
	{
		w->retried_401 = false;
		if (kind == XFER_LIST)
			list_page_done(w, rv, cont);
		else
			watch_closed(w, elapsed_ms);
	}
	else
		error_status(w, kind, streaming, status, retry_after);
}

/* ---------------------------------------------------------------------
 * lifecycle
 * ---------------------------------------------------------------------
 */

typedef struct LoadArgs
{
	KwWatch    *w;
} LoadArgs;

static void
load_config_body(void *arg)
{
	KwWatch    *w = ((LoadArgs *) arg)->w;
	MemoryContext old;

	MemoryContextReset(w->cfg_cxt);
	kw_check_watch_role(w->reg.server, w->reg.owner);
	w->cfg_generation = kw_connection_generation();
	old = MemoryContextSwitchTo(w->cfg_cxt);
	w->cfg = kw_cluster_config_for_server(w->reg.server, w->reg.owner);
	MemoryContextSwitchTo(old);
}

/*
 * What a recheck read of one (server, owner)'s settings found, kept for the
 * connection generation it was read at: every watch of that server and
 * owner compares its settings with that one read instead of a transaction
 * of its own.  One catalog change (or a reset of the caches, which a busy
 * worker gets after a burst of DDL) otherwise cost a transaction per watch:
 * 1,000 of them at once for a fleet of 250 servers (test/bench/fleet.py).
 */
typedef struct RecheckMemo
{
	char		server[NAMEDATALEN];
	Oid			owner;
	bool		ok;				/* the settings could be read */
	KwClusterConfig *cfg;		/* in recheck_cxt; NULL unless ok */
} RecheckMemo;

static MemoryContext recheck_cxt = NULL;
static uint64 recheck_generation = 0;	/* the memos' */
static List *recheck_memos = NIL;	/* of RecheckMemo, in recheck_cxt */

typedef struct RecheckArgs
{
	KwWatch    *w;
	RecheckMemo *memo;
} RecheckArgs;

static void
recheck_config_body(void *arg)
{
	RecheckArgs *a = (RecheckArgs *) arg;
	KwWatch    *w = a->w;
	KwClusterConfig *cfg;
	MemoryContext old;

	kw_check_watch_role(w->reg.server, w->reg.owner);
	cfg = kw_cluster_config_for_server(w->reg.server, w->reg.owner);
	old = MemoryContextSwitchTo(recheck_cxt);
	a->memo->cfg = kw_cluster_config_copy(cfg);
	MemoryContextSwitchTo(old);
	a->memo->ok = true;
}

/*
 * recheck_memo: the memo of w's (server, owner) for the connection
 * generation `generation`, read now (a transaction) unless another watch's
 * recheck read it already.
 */
static RecheckMemo *
recheck_memo(KwWatch *w, uint64 generation)
{
	ListCell   *lc;
	RecheckMemo *memo;
	RecheckArgs a;
	MemoryContext old;

	if (recheck_cxt == NULL)
		recheck_cxt = AllocSetContextCreate(TopMemoryContext, "kwatch recheck",
											ALLOCSET_SMALL_SIZES);
	if (generation != recheck_generation)
	{
		MemoryContextReset(recheck_cxt);
		recheck_memos = NIL;
		recheck_generation = generation;
	}
	foreach(lc, recheck_memos)
	{
		memo = (RecheckMemo *) lfirst(lc);
		if (memo->owner == w->reg.owner && strcmp(memo->server, w->reg.server) == 0)
			return memo;
	}
	memo = MemoryContextAllocZero(recheck_cxt, sizeof(RecheckMemo));
	strlcpy(memo->server, w->reg.server, NAMEDATALEN);
	memo->owner = w->reg.owner;
	a.w = w;
	a.memo = memo;
	if (!kw_run_in_transaction(recheck_config_body, &a, NULL, NULL))
		memo->ok = false;
	old = MemoryContextSwitchTo(recheck_cxt);
	recheck_memos = lappend(recheck_memos, memo);
	MemoryContextSwitchTo(old);
	return memo;
}

/*
 * recheck_config: ALTER SERVER, a user mapping or a role changed in this
 * process's view since w's settings were read (connection.c).  Reads them
 * again (once per server and owner for all its watches: recheck_memo);
 * when they differ, or can no longer be read (server dropped, USAGE
 * revoked, a broken kubeconfig), ends the request in flight -- a WATCH
 * resumes from its resourceVersion, a LIST starts over -- and drops the
 * settings, so the next request is made with what the catalog says now
 * (or fails with its error) instead of with credentials it no longer
 * names.  Unchanged settings change nothing.
 */
static void
recheck_config(KwWatch *w)
{
	/* the generation before the read: a change during it rechecks again */
	uint64		generation = kw_connection_generation();
	RecheckMemo *memo = recheck_memo(w, generation);

	w->cfg_generation = generation;
	if (memo->ok && kw_cluster_config_equal(w->cfg, memo->cfg))
		return;
	if (w->xfer == XFER_LIST || streaming_list(w))
	{
		kw_watch_stop_transfer(w);
		kw_watch_restart_list(w, true);
	}
	else if (w->xfer != XFER_NONE)
		kw_watch_stop_transfer(w);
	MemoryContextReset(w->cfg_cxt);
	w->cfg = NULL;
	kw_watch_retry_now(w);
}

/*
 * kw_watch_tick: starts the next request when none is in flight and its
 * time has come, and aborts a transfer that stays open but silent
 * (PROTOCOL 26).  A quiet WATCH is normal: the resource has no changes, and
 * the API server ends the request at the timeoutSeconds it asked for
 * (start_watch), a clean close that watch_closed turns into the next WATCH
 * (counted in watch_calls, never an error).  So a WATCH is only given up
 * once it is still silent kwatch.inactivity_timeout past that
 * timeoutSeconds -- a bound of at most 2 x kwatch.watch_timeout +
 * kwatch.inactivity_timeout -- and a LIST once it has received nothing for
 * kwatch.inactivity_timeout (it is started over).  A dead peer is found
 * sooner, by the connection's health checks (http.c: TCP keepalive and
 * TCP_USER_TIMEOUT, and HTTP/2 PINGs through kw_http_transfer_upkeep,
 * called here once a transfer has been silent for
 * kwatch.health_check_interval, as client-go's ReadIdleTimeout); the
 * transfer then ends with a transport error.  `polled_at` is when the
 * worker last polled the sockets: silence is only believed once a poll
 * after the deadline found nothing.  Returns how many milliseconds the
 * worker may sleep before calling again.
 */
long
kw_watch_tick(KwWatch *w, TimestampTz now, TimestampTz polled_at)
{
	char	   *volatile err = NULL;
	volatile KwCredState cred = KW_CRED_READY;
	int			sqlstate;
	MemoryContext loopcxt = CurrentMemoryContext;

	/*
	 * kwatch.relist() asked for a fresh LIST (client-go's Store.Resync /
	 * Relist on demand): once what was decoded is applied, end the
	 * transfer in flight and list without a resourceVersion, a consistent
	 * read of the newest state (PROTOCOL 22).  Requests coalesce
	 * (doc/security.md, Roles): while the LIST of an earlier request has
	 * not committed, newer ones wait for it and are then served by one
	 * LIST begun after all of them, so a role calling relist() in a loop
	 * makes one LIST at a time, not one per call.
	 */
	if (w->slot->relist_requests != w->relist_requests_seen && !kw_watch_unapplied(w) &&
		w->list_request <= w->slot->relist_done)
	{
		w->relist_requests_seen = w->slot->relist_requests;
		w->list_request = w->relist_requests_seen;
		kw_watch_stop_transfer(w);
		kw_watch_restart_list(w, false);
		w->list_rv_seen = true; /* never resourceVersion=0 */
		kw_watch_retry_now(w);
	}

	/* the server's or user mapping's settings changed: use the new ones */
	if (w->cfg != NULL && w->cfg_generation != kw_connection_generation() &&
		!kw_watch_unapplied(w))
		recheck_config(w);

	if (w->xfer != XFER_NONE && !w->http->paused)
	{
		int64		grace_ms = (int64) kw_inactivity_timeout_s * 1000;
		TimestampTz deadline = TimestampTzPlusMilliseconds(w->http->last_data, grace_ms);
		TimestampTz probe_at = TimestampTzPlusMilliseconds(w->http->last_data,
														   (int64) kw_health_check_interval_s * 1000);

		/* a WATCH may be silent until the server closes it; a list may not */
		if (w->xfer == XFER_WATCH && !streaming_list(w))
			deadline = Max(deadline,
						   TimestampTzPlusMilliseconds(w->xfer_started,
													   (int64) w->watch_timeout_s * 1000 + grace_ms));
		/* silence after the first event: a slow first byte is a busy server */
		if (streaming_list(w) && w->stream_probe && w->xfer_events > 0 &&
			kw_list_strategy == KW_LIST_STRATEGY_AUTO)
		{
			TimestampTz given_up = TimestampTzPlusMilliseconds(w->http->last_data,
															   KW_INITIAL_EVENTS_END_WAIT_MS);

			if (now >= given_up && polled_at >= given_up)
			{
				kw_watch_stop_transfer(w);
				stream_not_served(w, psprintf("no initial-events-end bookmark within %d s of the last event: the server ignored sendInitialEvents",
											  KW_INITIAL_EVENTS_END_WAIT_MS / 1000));
				return 0;
			}
			deadline = Min(deadline, given_up);
		}
		if (now >= probe_at)
		{
			kw_http_transfer_upkeep(w->http);
			probe_at = TimestampTzPlusMilliseconds(now, (int64) kw_health_check_interval_s * 1000);
		}
		if (now < deadline)
			return (long) ((Min(deadline, probe_at) - now) / 1000) + 1;
		/* only a socket poll after the deadline proves the silence (the worker may have been busy) */
		if (polled_at < deadline)
			return 0;
		if (w->xfer == XFER_WATCH && !streaming_list(w))
		{
			kw_watch_record_error(w, KW_ERRSRC_HTTP,
						 psprintf("watch received nothing for %ld s, %d s past the timeoutSeconds=%d the server should have closed it at; resuming from resourceVersion %s",
								  (long) ((now - w->http->last_data) / USECS_PER_SEC),
								  kw_inactivity_timeout_s, w->watch_timeout_s, w->resume_rv));
			kw_watch_stop_transfer(w);
			kw_watch_retry_now(w);
		}
		else
		{
			kw_watch_record_error(w, KW_ERRSRC_HTTP,
						 psprintf("%s received nothing for %d s; listing again",
								  streaming_list(w) ? "streaming list" : "LIST",
								  kw_inactivity_timeout_s));
			kw_watch_stop_transfer(w);
			kw_watch_restart_list(w, true);
			kw_watch_schedule_retry(w, 0, KW_STATE_BACKOFF);
		}
	}
	if (w->xfer != XFER_NONE)
	{
		/* a small list batch held for more: handed over when the hold ends */
		long		hold = kw_watch_batch_hold_ms(w, now);

		return hold > 0 ? hold : 1000;
	}
	/* what is decoded is applied before the next request, but a LIST page */
	if (kw_watch_unapplied(w) && !next_page_first(w))
	{
		/* in an apply worker: its result sets our latch */
		if (w->ticket != NULL)
			return 1000;
		/* a kept request: once its retry time has come */
		if (w->sent.len > 0 && w->resubmit_at > now)
			return (long) ((w->resubmit_at - now) / 1000) + 1;
		/* waiting for a free apply worker, or for spread batches: a result sets our latch */
		if (w->sent.len > 0 || w->nspread > 0)
			return 1000;
		return 0;
	}
	if (now < w->next_attempt)
		return (long) ((w->next_attempt - now) / 1000) + 1;

	if (w->cfg == NULL)
	{
		LoadArgs	a = {w};

		if (!kw_run_in_transaction(load_config_body, &a, (char **) &err, NULL))
		{
			kw_watch_record_error(w, KW_ERRSRC_CONFIG, err);
			w->backoff_ms = Max(w->backoff_ms, kw_backoff_max_ms / 2);
			kw_watch_schedule_retry(w, 0, KW_STATE_FAILED);
			return (long) ((w->next_attempt - now) / 1000) + 1;
		}
		kw_watch_publish_progress(w);
		if (w->resume_rv && w->sent.len == 0)
		{
			/* resuming: how many rows the table holds (an apply worker counts) */
			KwApplyRequest req = {.op = KW_APPLY_COUNT_ROWS};

			kw_watch_send_request(w, &req, NULL);
			return 0;
		}
	}

	/* a relist waits for its turn (kwatch.max_concurrent_relists) */
	if (w->phase == KW_PHASE_LIST_PREPARE && w->sent.len == 0 && !take_relist_slot(w))
	{
		kw_watch_set_state(w, KW_STATE_LISTING);
		return KW_RELIST_WAIT_MS;
	}

	PG_TRY();
	{
		/* an exec plugin's credential first; its run never blocks us */
		cred = kw_credential_poll(w->cfg, (char **) &err, &sqlstate);
		if (cred == KW_CRED_READY && listing(w))
			start_list_page(w);
		else if (cred == KW_CRED_READY)
			start_watch(w);
	}
	PG_CATCH();
	{
		ErrorData  *ed;

		MemoryContextSwitchTo(loopcxt);
		ed = CopyErrorData();
		FlushErrorState();
		kw_watch_stop_transfer(w);
		cred = KW_CRED_FAILED;
		err = ed->message;
	}
	PG_END_TRY();
	if (cred == KW_CRED_PENDING)
		return 1000;			/* kw_credential_drive() wakes us when it ends */
	if (cred == KW_CRED_FAILED)
	{
		kw_watch_record_error(w, KW_ERRSRC_CONFIG, err);
		kw_watch_schedule_retry(w, 0, KW_STATE_FAILED);
	}
	return 0;
}

/*
 * kw_watch_create: a watch for registration `reg` (copied) that will run
 * its transfers on the worker's transfer set `multi` (a libcurl multi
 * handle, opaque here: kw_http_transfer_attach).  Nothing happens until
 * the first kw_watch_tick.  Memory lives in a child of `parent`.
 */
KwWatch *
kw_watch_create(KwRegistration *reg, void *multi, MemoryContext parent)
{
	MemoryContext cxt = AllocSetContextCreate(parent, "kwatch watch",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	KwWatch    *w = palloc0(sizeof(KwWatch));
	KwRegistration *r = &w->reg;

	w->cxt = cxt;
	/*
	 * These three are empty while a watch idles, which is most of its life:
	 * a 1 kB first block each (an 8 kB one, ALLOCSET_DEFAULT_SIZES', was
	 * 24 kB an idle watch at fleet sizes: test/bench/fleet.py), and blocks
	 * still doubling up to ALLOCSET_DEFAULT_MAXSIZE for a big list.
	 */
	w->batch_cxt = AllocSetContextCreate(cxt, "kwatch batch", 0, 1024,
										 ALLOCSET_DEFAULT_MAXSIZE);
	w->items_cxt = AllocSetContextCreate(cxt, "kwatch list items", 0, 1024,
										 ALLOCSET_DEFAULT_MAXSIZE);
	w->list_cxt = AllocSetContextCreate(cxt, "kwatch relist", 0, 1024,
										ALLOCSET_DEFAULT_MAXSIZE);
	w->cfg_cxt = AllocSetContextCreate(cxt, "kwatch cluster config", ALLOCSET_SMALL_SIZES);
	w->multi = multi;
	initStringInfo(&w->errbody);
	initStringInfo(&w->sent);

	r->id = reg->id;
	r->server = pstrdup(reg->server);
	r->api_group = pstrdup(reg->api_group);
	r->api_version = pstrdup(reg->api_version);
	r->plural = pstrdup(reg->plural);
	r->kind = pstrdup(reg->kind);
	r->namespaced = reg->namespaced;
	r->namespace = reg->namespace ? pstrdup(reg->namespace) : NULL;
	r->label_selector = reg->label_selector ? pstrdup(reg->label_selector) : NULL;
	r->field_selector = reg->field_selector ? pstrdup(reg->field_selector) : NULL;
	r->table_name = pstrdup(reg->table_name);
	r->channel = pstrdup(reg->channel);
	r->notify = reg->notify;
	r->secret_data = reg->secret_data;
	r->notify_minimal = reg->notify_minimal;
	memcpy(r->retry_ms, reg->retry_ms, sizeof(r->retry_ms));
	r->apply_timeout_ms = reg->apply_timeout_ms;
	r->owner = reg->owner;
	r->owner_super = reg->owner_super;
	r->resource_version = NULL;
	r->created_at = reg->created_at ? pstrdup(reg->created_at) : NULL;

	w->object_api_version = kw_api_version_string(r->api_group, r->api_version);
	w->redact = kw_is_secret_resource(r->api_group, r->plural) && !r->secret_data;
	w->slot = kw_status_acquire(r->id);
	if (w->slot == NULL)
	{
		ereport(WARNING,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("kwatch: more watches than kwatch.max_watches (%d); watch %d runs without status",
						kw_max_watches, r->id)));
		w->slot = &w->private_slot;
	}
	w->slot->owner = r->owner;
	strlcpy(w->slot->server, r->server, NAMEDATALEN);
	w->relist_requests_seen = w->slot->relist_requests;

	/*
	 * After a restart (worker or server), resume from the checkpoint written
	 * with the rows, without relisting: the rows and the checkpoint agree
	 * (PROTOCOL 21), and a 410 there relists as usual (PROTOCOL 16, 22).
	 */
	if (reg->resource_version && reg->resource_version[0])
	{
		w->resume_rv = pstrdup(reg->resource_version);
		w->phase = KW_PHASE_WATCH;	/* the initial phase */
	}
	else
		w->phase = KW_PHASE_LIST_PREPARE;	/* the initial phase */
	MemoryContextSwitchTo(old);
	/* a checkpoint means a LIST was committed: the table is usable */
	kw_watch_set_synced(w, !listing(w), false);
	return w;
}

/*
 * kw_watch_destroy: stops the transfer, forgets its apply request (which
 * still runs to its end), frees its status slot and memory.  The mirror
 * table is left alone.
 */
void
kw_watch_destroy(KwWatch *w)
{
	if (w->ticket)
		kw_apply_cancel(w->ticket);
	for (int i = 0; i < w->nspread; i++)
		kw_apply_cancel(w->spread[i]);
	kw_watch_stop_transfer(w);
	release_relist_slot(w);
	if (w->slot != &w->private_slot)
		kw_status_release(w->slot);
	MemoryContextDelete(w->cxt);
}

/* kw_watch_id: the registration id of a watch. */
int32
kw_watch_id(KwWatch *w)
{
	return w->reg.id;
}

static bool
str_eq(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

/*
 * kw_watch_same_registration: whether `reg` describes the watch `w` runs
 * (everything but the checkpoint); if not, the worker restarts the watch.
 */
bool
kw_watch_same_registration(KwWatch *w, KwRegistration *reg)
{
	KwRegistration *r = &w->reg;

	return r->id == reg->id && str_eq(r->created_at, reg->created_at) &&
		str_eq(r->server, reg->server) &&
		str_eq(r->api_group, reg->api_group) &&
		str_eq(r->api_version, reg->api_version) &&
		str_eq(r->plural, reg->plural) &&
		str_eq(r->namespace, reg->namespace) &&
		str_eq(r->label_selector, reg->label_selector) &&
		str_eq(r->field_selector, reg->field_selector) &&
		str_eq(r->table_name, reg->table_name) &&
		str_eq(r->channel, reg->channel) &&
		r->notify == reg->notify && r->owner == reg->owner &&
		r->owner_super == reg->owner_super &&
		r->secret_data == reg->secret_data &&
		r->notify_minimal == reg->notify_minimal &&
		memcmp(r->retry_ms, reg->retry_ms, sizeof(r->retry_ms)) == 0 &&
		r->apply_timeout_ms == reg->apply_timeout_ms;
}

