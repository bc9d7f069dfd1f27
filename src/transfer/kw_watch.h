/*-------------------------------------------------------------------------
 *
 * kw_watch.h
 *		One watch's state (struct KwWatch), shared by the files that make up
 *		the reflector: watch.c (requests, decoding, what comes next),
 *		watch_apply.c (batches to the apply workers), watch_result.c (what
 *		their results mean) and watch_status.c (the shared status).  The
 *		worker sees KwWatch only through kw_worker.h's kw_watch_* functions.
 *		Only watch.c changes a KwWatch: the other files read it and call
 *		watch.c's transition functions, declared below
 *		(test/layout/check_layout.py checks).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KW_WATCH_H
#define KW_WATCH_H

#include "kw_common.h"
#include "kw_status.h"
#include "kw_cluster.h"
#include "kw_http.h"
#include "kw_decode.h"
#include "kw_apply.h"
#include "kw_worker.h"

/* A watch streaming this long is healthy again: backoff resets. */
#define KW_HEALTHY_RESET_MS 10000

typedef enum KwXfer
{
	XFER_NONE,
	XFER_LIST,
	XFER_WATCH
} KwXfer;

/*
 * KwWatchPhase: where a watch is in client-go's reflector loop
 * (doc/protocol.md "The reflector loop", rules 20-23; client-go
 * tools/cache/reflector.go ListAndWatch: list, syncWith, watch), one value
 * at a time, as PostgreSQL's replication/logical/tablesync.c walks one
 * relstate.  Only watch_set_phase (watch.c) changes it, and only along the
 * transitions it allows:
 *
 *	 LIST_PREPARE --table ready--> LIST_ITEMS --last page or
 *	 initial-events-end bookmark--> LIST_COMPLETE --merge sent-->
 *	 LIST_MERGE --merge committed--> WATCH
 *
 * and from any phase back to LIST_PREPARE (kw_watch_restart_list: a 410,
 * an ERROR event, a failed apply, kwatch.relist()).  A merge sent before
 * its list was restarted (a streaming list whose stream failed after its
 * bookmark) still commits, LIST_PREPARE -> WATCH: the table holds that list
 * and the WATCH from its resourceVersion finds out what the failure meant.
 * The phase is the watch's own; the state shown in kwatch.watches
 * (KwWatchState: listing, watching, backoff, ...) is set beside it.
 */
typedef enum KwWatchPhase
{
	KW_PHASE_LIST_PREPARE,		/* a LIST is due: the apply side prepares its
								 * table (KW_APPLY_RELIST_BEGIN) */
	KW_PHASE_LIST_ITEMS,		/* table ready: LIST pages, or a streaming
								 * list's initial events, arrive */
	KW_PHASE_LIST_COMPLETE,		/* all of the list came: its merge waits to be
								 * sent (kw_watch_finish_ready) */
	KW_PHASE_LIST_MERGE,		/* the merge is in an apply worker, or kept for
								 * its retry */
	KW_PHASE_WATCH				/* a list committed, or the watch resumed from
								 * its checkpoint: WATCH from resume_rv */
} KwWatchPhase;

/* Most list batches of one watch in apply workers at once, beside its request */
#define KW_SPREAD_MAX 8

struct KwWatch
{
	MemoryContext cxt;			/* the watch's lifetime */
	MemoryContext batch_cxt;	/* pending events, reset when they are sent */
	MemoryContext items_cxt;	/* pending list items, reset when they are sent */
	MemoryContext list_cxt;		/* relist bookkeeping (known objects) */
	MemoryContext cfg_cxt;		/* cfg, reloaded after 401/403 */
	KwRegistration reg;
	KwClusterConfig *cfg;		/* NULL until loaded */
	uint64		cfg_generation; /* kw_connection_generation() when it was */
	void	   *multi;			/* the worker's transfer set (http.c attaches) */
	KwWatchStatus *slot;
	KwWatchStatus private_slot; /* used when shared slots ran out */
	char	   *object_api_version; /* "group/version": objects' apiVersion */
	bool		redact;			/* a Secret watch without secret_data (redact.c) */

	/* the transfer in flight */
	KwXfer		xfer;
	KwHttpTransfer *http;
	StringInfoData errbody;		/* the last failed response's body */
	KwListDecoder *ldec;
	KwWatchDecoder *wdec;
	char	   *abort_reason;	/* set by callbacks to end the stream */
	KwErrorSource abort_src;
	bool		abort_relist_no_rv;
	TimestampTz xfer_started;
	int64		xfer_events;
	int			watch_timeout_s;	/* timeoutSeconds the WATCH in flight asked */
	/*
	 * A WATCH in phase LIST_ITEMS is a streaming list that has not reached
	 * its initial-events-end (watch.c's streaming_list); of that list:
	 */
	bool		stream_probe;	/* its server's answer is not known yet */
	bool		stream_refused; /* the server turned out not to serve one */
	bool		list_not_streamed;	/* the next list is a LIST all the same */
	KwEvent    *amends;			/* a streaming list's changes before its
								 * bookmark, sent with its merge (list_cxt) */
	int			namends;
	int			maxamends;
	int64		amend_bytes;	/* their JSON bytes */

	/* reflector state */
	KwWatchPhase phase;			/* changed by watch_set_phase only */
	bool		relist_slot;	/* holds one of kwatch.max_concurrent_relists */
	char	   *resume_rv;		/* last RV received; NULL = must list */
	bool		list_with_rv;	/* relist NotOlderThan resume_rv (PROTOCOL 22) */
	bool		list_rv_seen;	/* some LIST answered with a resourceVersion, or
								 * kwatch.relist() asked for the newest state */
	bool		list_from_cache;	/* the list in progress asked resourceVersion=0 */
	bool		paginated_result;	/* a resourceVersion=0 LIST came in pages */
	bool		list_direct;	/* the list goes straight into the mirror (sync.c) */
	char	   *list_rv;		/* snapshot RV of the list in progress */
	char	   *continue_token; /* the next LIST page's (PROTOCOL 3) */
	HTAB	   *known;			/* uid -> rv at relist start */
	int64		list_items;
	int64		objects;
	bool		first_list_done;
	bool		retried_401;
	int			short_watches;
	int			decode_failures;	/* malformed watch streams in a row */
	int			backoff_ms;
	TimestampTz next_attempt;
	int64		relist_requests_seen;	/* slot->relist_requests acted on */
	int64		list_request;	/* the request the LIST in progress serves */

	/* the apply request in flight or waiting to be (re)submitted */
	StringInfoData sent;		/* encoded request; len 0 = none */
	KwApplyOp	sent_op;
	char	   *sent_rv;		/* EVENTS: resume point; FINISH: list RV */
	KwApplyTicket *ticket;		/* in an apply worker; NULL = not (yet) */
	TimestampTz resubmit_at;	/* a kept request waits for its retry */

	/*
	 * list items applied beside the request in flight, by apply workers
	 * nobody else needs (watch_apply.c, "Spreading a list")
	 */
	KwApplyTicket *spread[KW_SPREAD_MAX];
	int64		spread_gen[KW_SPREAD_MAX];	/* list_gen of each */
	int			nspread;
	char	   *spread_error;	/* one of them failed (cxt); the list restarts */
	int			spread_sqlstate;
	bool		spread_off;		/* not until a list commits (after a failure) */
	int64		list_gen;		/* lists started: a late result of an earlier
								 * list's spread batch is not this list's */

	/* pending batch (batch_cxt) */
	KwEvent    *events;
	int			nevents;
	int			maxevents;
	KwObject   *items;
	int			nitems;
	int			maxitems;
	int64		event_bytes;	/* JSON bytes of the pending events */
	int64		item_bytes;		/* JSON bytes of the pending items */
	TimestampTz items_since;	/* when the first pending item came */
	char	   *pending_rv;		/* RV after the pending events */
};

/* Adds n to the watch's status counter `field`. */
#define KW_WATCH_COUNT(w, field, n) \
	do { \
		LWLockAcquire(kw_shared->lock, LW_EXCLUSIVE); \
		(w)->slot->field += (n); \
		LWLockRelease(kw_shared->lock); \
	} while (0)

/* in watch_status.c */
extern void kw_watch_set_state(KwWatch *w, KwWatchState st);
extern void kw_watch_set_synced(KwWatch *w, bool synced, bool list_done);
extern void kw_watch_publish_progress(KwWatch *w);
extern void kw_watch_count_apply(KwWatch *w, KwApplyCounts *c, bool sync_done);
extern void kw_watch_record_error(KwWatch *w, KwErrorSource src, const char *msg);

/*
 * in watch.c, the only file that changes a KwWatch (called by
 * watch_result.c and watch_apply.c; watch.c calls neither)
 */
extern void kw_watch_stop_transfer(KwWatch *w);
extern void kw_watch_restart_list(KwWatch *w, bool with_rv);
extern int	kw_watch_retry_delay(KwWatch *w, int min_ms);
extern void kw_watch_schedule_retry(KwWatch *w, int min_ms, KwWatchState st);
extern void kw_watch_retry_now(KwWatch *w);

/* in watch.c: the pending batch and the apply request */
extern bool kw_watch_finish_ready(KwWatch *w);
extern bool kw_watch_pending_work(KwWatch *w);
extern bool kw_watch_batch_full(KwWatch *w);
extern long kw_watch_batch_hold_ms(KwWatch *w, TimestampTz now);
extern bool kw_watch_unapplied(KwWatch *w);
extern void kw_watch_forget_request(KwWatch *w);
extern void kw_watch_submit_request(KwWatch *w);
extern void kw_watch_send_request(KwWatch *w, KwApplyRequest *req, const char *rv);
extern void kw_watch_note_batch_sent(KwWatch *w, KwApplyOp op);
extern void kw_watch_drop_unapplied(KwWatch *w);
extern bool kw_watch_take_result(KwWatch *w, KwApplyResult *res, MemoryContext cxt);
extern void kw_watch_keep_request(KwWatch *w);
extern bool kw_watch_send_spread(KwWatch *w, KwApplyRequest *req);
extern bool kw_watch_take_spread_result(KwWatch *w, KwApplyResult *res, MemoryContext cxt,
										bool *current);
extern void kw_watch_note_spread_failed(KwWatch *w, const char *err, int sqlstate);

/* in watch.c: what an apply request's success does to the watch */
extern void kw_watch_note_relist_begun(KwWatch *w, KwApplyResult *res);
extern void kw_watch_note_items_staged(KwWatch *w, KwApplyResult *res);
extern void kw_watch_note_list_committed(KwWatch *w, KwApplyCounts *counts);
extern void kw_watch_note_events_applied(KwWatch *w, KwApplyResult *res);
extern void kw_watch_note_rows_counted(KwWatch *w, int64 rows);

#endif							/* KW_WATCH_H */
