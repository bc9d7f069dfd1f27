/*-------------------------------------------------------------------------
 *
 * kw_apply.h
 *		Applying decoded batches in a pool of apply workers, apart from the
 *		transfer (the worker that runs HTTP and decoding for every watch).
 *
 * The data path crosses one process boundary:
 *
 *	 transfer (worker.c, watch.c: HTTP -> decode -> batch)
 *		 --KwApplyRequest over a shm_mq--> apply worker (apply_worker.c:
 *		 apply_execute.c -> sync.c: rows, checkpoint, NOTIFY, event stream)
 *		 --KwApplyResult over a shm_mq--> transfer (status, what comes next)
 *
 * as PostgreSQL's logical replication hands changes from the leader apply
 * worker to parallel apply workers (src/backend/replication/logical/
 * applyparallelworker.c: one DSM segment, a shm_mq each way per worker).
 * A watch has at most one request in flight, so its batches commit in
 * order, except the batches of one list, which may be spread over spare
 * workers (kw_apply_spare; transfer/watch_apply.c); the transfer never
 * runs a table owner's code nor waits on a mirror table's lock.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KW_APPLY_H
#define KW_APPLY_H

#include "kw_common.h"

/* One event of a watch's batch. */
typedef struct KwEvent
{
	KwEventType type;
	KwObject	obj;
} KwEvent;

/* What one apply did, for the status counters. */
typedef struct KwApplyCounts
{
	int64		added;
	int64		modified;
	int64		deleted;
	int64		notified;
} KwApplyCounts;

/* apply_pool.c's shm_toc: request queue 2i, result queue 2i + 1 */
#define KW_APPLY_TOC_MAGIC 0x6b776170	/* "kwap" */

/* What an apply request asks (apply_execute.c runs each). */
typedef enum KwApplyOp
{
	KW_APPLY_EVENTS = 1,		/* watch events + checkpoint */
	KW_APPLY_RELIST_BEGIN,		/* prepare a LIST: staging table, known rows */
	KW_APPLY_RELIST_STAGE,		/* one batch of LIST items */
	KW_APPLY_RELIST_FINISH,		/* merge the staged LIST, checkpoint */
	KW_APPLY_COUNT_ROWS,		/* rows of the watch's cluster in its table */
	KW_APPLY_PRUNE_HISTORY		/* one history table's retention (no watch) */
} KwApplyOp;

/*
 * One unit of apply work: a watch's registration (as the transfer runs it)
 * and the batch.  Strings and arrays live in the memory context the request
 * was built or decoded in.
 */
typedef struct KwApplyRequest
{
	KwApplyOp	op;
	KwRegistration reg;			/* id 0 for KW_APPLY_PRUNE_HISTORY */
	int			timeout_ms;		/* deadline per statement; 0 = none */
	bool		direct;			/* the LIST goes straight into the mirror */
	bool		allow_direct;	/* RELIST_BEGIN: a first sync may go direct */
	bool		forget_checkpoint;	/* RELIST_BEGIN: kwatch.relist() asked */
	char	   *rv;				/* EVENTS: resume point; FINISH: list RV */
	KwEvent    *events;			/* EVENTS; FINISH: a streaming list's changes
								 * before its initial-events-end bookmark */
	int			nevents;
	KwObject   *objs;			/* RELIST_STAGE */
	int			nobjs;
	Oid			history_oid;	/* PRUNE_HISTORY: the history table */
} KwApplyRequest;

/* What became of a request. */
typedef struct KwApplyResult
{
	bool		ok;				/* committed */
	int			sqlstate;		/* when !ok */
	char	   *error;			/* when !ok */
	KwApplyCounts counts;
	int			skipped;		/* objects PostgreSQL rejected (skipped) */
	bool		direct;			/* RELIST_BEGIN: the list goes direct */
	bool		behind;			/* PRUNE_HISTORY: a round filled its batch */
	int64		rows;			/* COUNT_ROWS */
	int			nknown;			/* RELIST_BEGIN: the table's uid -> rv */
	char	  **known_uids;
	char	  **known_rvs;
} KwApplyResult;

/*
 * Longest uid (with its NUL) kept in a hash of uids; Kubernetes uids are 36
 * bytes.  A longer one is never a real object's.
 */
#define KW_UID_KEYLEN 128

/* in known_rows.c: uid -> resourceVersion of a table's rows at a LIST's start */
extern struct HTAB *kw_known_create(long n, MemoryContext cxt);
extern void kw_known_add(struct HTAB *known, const char *uid, const char *rv);
extern const char *kw_known_rv(struct HTAB *known, const char *uid);
extern int	kw_known_export(struct HTAB *known, char ***uids, char ***rvs);
extern struct HTAB *kw_known_import(char **uids, char **rvs, int n, MemoryContext cxt);

/* in apply_message.c: requests and results as bytes (one shm_mq message) */
extern void kw_apply_request_encode(StringInfo buf, const KwApplyRequest *req);
extern void kw_apply_request_decode(const char *data, Size len, KwApplyRequest *req);
extern void kw_apply_result_encode(StringInfo buf, const KwApplyResult *res);
extern void kw_apply_result_decode(const char *data, Size len, KwApplyResult *res);

/* in apply_worker.c */
PGDLLEXPORT void kwatch_apply_main(Datum main_arg);

/* in apply_pool.c: the transfer's side of the pool */
typedef struct KwApplyTicket KwApplyTicket;

extern void kw_apply_pool_init(void);
extern KwApplyTicket *kw_apply_submit(StringInfo request, void *owner,
									  int32 watch_id, Oid role, int timeout_ms);
extern bool kw_apply_in_flight(int32 watch_id);
extern bool kw_apply_spare(Oid role);
extern bool kw_apply_poll(KwApplyTicket *ticket, KwApplyResult *res,
						  MemoryContext cxt);
extern void kw_apply_cancel(KwApplyTicket *ticket);
extern bool kw_apply_pool_collect(void);
extern void kw_apply_pool_shutdown(void);

/*
 * What the worker's process calls of apply/ directly, the only calls that
 * cross between transfer/ and apply/ outside a request (src/README.md,
 * "Rules between folders"; test/layout/check_layout.py names the same):
 * at its start, the event ring's writer and its restore from
 * kwatch.events (events.c); between rounds, which history tables are due
 * for pruning (history.c; each is then pruned by a request of its own).
 */
extern void kw_events_writer_init(void);
extern void kw_events_restore(void);

typedef struct KwPruneTarget
{
	Oid			history_oid;
	Oid			owner;			/* the pool's role for the request */
} KwPruneTarget;

extern List *kw_history_prune_targets(MemoryContext cxt);

#endif							/* KW_APPLY_H */
