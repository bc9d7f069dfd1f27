/*-------------------------------------------------------------------------
 *
 * kw_status.h
 *		Shared memory (shmem.c): each watch's status slot, written by the
 *		worker's reflector and read by SQL functions, and how a backend
 *		wakes the worker.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KW_STATUS_H
#define KW_STATUS_H

#include "kw_common.h"

#include "datatype/timestamp.h"
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
	Latch	   *sender_latch;	/* the request sender's (sender.c), under lock */
	ConditionVariable sync_cv;	/* broadcast when a slot's synced or state changes */
	pg_atomic_uint64 connect_refused_at;	/* worker: kwatch.database named
											 * no database at this
											 * TimestampTz; 0: try at once
											 * (worker.c) */
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
extern void kw_wake_sender(void);
extern void kw_status_broadcast(void);
extern bool kw_serves_this_database(void);

#endif							/* KW_STATUS_H */
