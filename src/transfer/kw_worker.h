/*-------------------------------------------------------------------------
 *
 * kw_worker.h
 *		The worker's side: shared status of every watch (also read by SQL
 *		functions), the reflector, transactions and acting as a table's
 *		owner, NOTIFY, registrations and who may act on them.  Applying to
 *		tables is kw_sync.h's (apply workers only); the pool between the
 *		two sides is kw_apply.h's.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KW_WORKER_H
#define KW_WORKER_H

#include "kw_common.h"

#include "fmgr.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "storage/lwlock.h"

/* ---------------------------------------------------------------------
 * in shmem.c: shared status of every watch
 * ---------------------------------------------------------------------
 */
typedef enum KwWatchState
{
	KW_STATE_STARTING,
	KW_STATE_LISTING,
	KW_STATE_WATCHING,
	KW_STATE_BACKOFF,
	KW_STATE_FAILED
} KwWatchState;

typedef enum KwErrorSource
{
	KW_ERRSRC_HTTP,				/* connection, TLS, HTTP status */
	KW_ERRSRC_DECODE,			/* malformed stream or object */
	KW_ERRSRC_DATABASE,			/* applying changes failed */
	KW_ERRSRC_CONFIG,			/* credentials, kubeconfig */
	KW_N_ERRSRC
} KwErrorSource;

typedef struct KwWatchStatus
{
	int32		watch_id;		/* 0 = slot free */
	Oid			owner;			/* registering role (ownership.c) */
	char		server[NAMEDATALEN];	/* foreign server: who may see the slot */
	KwWatchState state;
	bool		healthy;
	char		resource_version[KW_RV_LEN];
	int64		objects;
	TimestampTz last_sync_at;	/* last successful apply or relist */
	TimestampTz last_list_at;
	TimestampTz state_since;
	char		last_error[KW_ERROR_LEN];
	TimestampTz last_error_at;
	int64		list_calls;
	int64		watch_calls;
	int64		relists;
	int64		added;
	int64		modified;
	int64		deleted;
	int64		bookmarks;
	int64		skipped_objects;
	int64		sanitized_objects;
	int64		errors[KW_N_ERRSRC];
	int64		notifications;
	bool		synced;			/* a LIST committed, no relist pending */
	int64		syncs;			/* LISTs merged and committed */
	int64		relist_requests;	/* kwatch.relist() calls (backends) */
	int64		relist_done;	/* the last request whose LIST has committed */
} KwWatchStatus;

typedef struct KwSharedState
{
	LWLock	   *lock;			/* protects slots[] */
	pg_atomic_uint64 generation;	/* bumped when registrations change */
	pid_t		worker_pid;
	Latch	   *worker_latch;	/* set under lock */
	ConditionVariable sync_cv;	/* broadcast when a slot's synced or state changes */
	int			nslots;
	KwWatchStatus slots[FLEXIBLE_ARRAY_MEMBER];
} KwSharedState;

extern KwSharedState *kw_shared;

extern void kw_shmem_request(void);
extern void kw_shmem_startup(void);
extern const char *kw_state_name(KwWatchState s);
extern KwWatchStatus *kw_status_acquire(int32 watch_id);
extern void kw_status_release(KwWatchStatus *slot);
extern void kw_wake_worker(void);
extern void kw_poke_worker(void);
extern void kw_status_broadcast(void);

/* in sync_wait.c: ERRORs 55000 unless a worker can sync watches here */
extern void kw_require_worker_state(void);
extern int64 kw_timeout_ms(FunctionCallInfo fcinfo, int argno);

/* ---------------------------------------------------------------------
 * in watch.c: per-watch reflector state machine
 * ---------------------------------------------------------------------
 */


typedef struct KwWatch KwWatch;

/* in catalog.c */
extern List *kw_registrations_read(int32 only_id, MemoryContext cxt);

/* in history.c: why mirror rows change now; history retention */
typedef enum KwChangeOrigin
{
	KW_ORIGIN_WATCH = 0,		/* an event, or a LIST that found the object */
	KW_ORIGIN_RELIST,			/* rows a LIST no longer had */
	KW_ORIGIN_UNWATCH			/* rows of a watch being removed */
} KwChangeOrigin;

extern int	kw_history_prune_interval_s;
extern void kw_change_origin_set(KwChangeOrigin origin);
/* a history table to prune, and its owner (the pool's role for the request) */
typedef struct KwPruneTarget
{
	Oid			history_oid;
	Oid			owner;
} KwPruneTarget;

extern List *kw_history_prune_targets(MemoryContext cxt);
extern bool kw_history_prune_table(Oid history_oid);
extern void kw_wake_worker_at_commit(void);

extern KwWatch *kw_watch_create(KwRegistration *reg, void *multi,
								MemoryContext parent);
extern void kw_watch_destroy(KwWatch *w);
extern bool kw_watch_same_registration(KwWatch *w, KwRegistration *reg);
extern int32 kw_watch_id(KwWatch *w);
extern void kw_watch_transfer_done(KwWatch *w, int curlcode);
extern long kw_watch_tick(KwWatch *w, TimestampTz now, TimestampTz polled_at);
extern bool kw_watch_has_pending(KwWatch *w);
extern bool kw_watch_flush(KwWatch *w);
extern bool kw_watch_collect(KwWatch *w, MemoryContext cxt);

/* ---------------------------------------------------------------------
 * in transaction.c and as_owner.c: what every writer of kwatch uses
 * ---------------------------------------------------------------------
 */
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

typedef void (*KwTxnBody) (void *arg);

extern bool kw_run_in_transaction(KwTxnBody body, void *arg, char **errmsg,
								  int *sqlstate);

/* Acting as a mirror table's owner (as_owner.c). */
typedef struct KwAsOwner
{
	Oid			save_userid;
	int			save_sec_context;
	int			save_nestlevel;
	bool		switched;
} KwAsOwner;

extern Oid	kw_rel_owner(Oid relid);
extern void kw_as_owner_begin(Oid owner, KwAsOwner *s);
extern void kw_as_owner_end(KwAsOwner *s);
extern void kw_fire_deferred_triggers(void);
extern void kw_fire_deferred_triggers_as(Oid role);
extern void kw_refuse_deferral_begin(void);
extern void kw_refuse_deferral_end(void);
extern void kw_as_owner_init(void);

/* ---------------------------------------------------------------------
 * in notify.c
 * ---------------------------------------------------------------------
 */
extern void kw_notify(KwRegistration *reg, const KwChange *c, int64 seq);
extern char *kw_notify_payload(int64 seq, const char *cluster,
							   const KwChange *c, bool with_names);

/* ---------------------------------------------------------------------
 * in worker.c
 * ---------------------------------------------------------------------
 */
extern void kw_register_worker(void);

/* ---------------------------------------------------------------------
 * in ownership.c: watches under DROP ROLE / DROP OWNED / REASSIGN OWNED
 * ---------------------------------------------------------------------
 */
extern void kw_ownership_init(void);

/* in privileged.c: who called kwatch.watch/unwatch/relist */
extern Oid	kw_current_caller(void);
extern Oid	kw_set_current_caller(Oid caller);
PGDLLEXPORT void kwatch_worker_main(Datum arg);

#endif							/* KW_WORKER_H */
