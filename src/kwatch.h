/*-------------------------------------------------------------------------
 *
 * kwatch.h
 *		Shared declarations of kwatch: Kubernetes resources mirrored into
 *		PostgreSQL tables by list+watch.
 *
 * The data path runs one way:
 *
 *	 http.c (libcurl multi) -> decode.c (json-c) -> watch.c (reflector state
 *	 machine) -> sync.c (SPI: rows + checkpoint) + notify.c (NOTIFY) -> shmem.c
 *	 (status)
 *
 * worker.c drives it all from one background worker; catalog.c and
 * discovery.c serve the SQL functions that register watches; kubeconfig.c and
 * fdw_option.c turn a foreign server into connection settings.
 *
 * Rule numbers ("PROTOCOL 12") refer to the list/watch rules documented in
 * doc/protocol.md, each traced to its Kubernetes source.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KWATCH_H
#define KWATCH_H

#include "postgres.h"

#if PG_VERSION_NUM < 150000
#error "kwatch requires PostgreSQL 15 or later"
#endif

#include "datatype/timestamp.h"
#include "lib/stringinfo.h"
#include "nodes/pg_list.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "utils/hsearch.h"

#define KWATCH_VERSION "0.2.0"

/*
 * ASCII-only character classes.  Kubernetes' grammars (DNS labels and
 * subdomains, label keys and values: k8s.io/apimachinery/pkg/util/validation)
 * and URL escaping (RFC 3986 unreserved) are defined on ASCII; <ctype.h>'s
 * isalnum() and friends follow the server's locale and would accept e.g.
 * Latin-1 letters in a non-C locale.
 */
static inline bool
kw_ascii_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static inline bool
kw_ascii_lower(unsigned char c)
{
	return c >= 'a' && c <= 'z';
}

static inline bool
kw_ascii_alnum(unsigned char c)
{
	return kw_ascii_digit(c) || kw_ascii_lower(c) || (c >= 'A' && c <= 'Z');
}
#define KWATCH_USER_AGENT "kwatch/" KWATCH_VERSION

/* Longest resourceVersion kept in shared memory (etcd revisions are ~20). */
#define KW_RV_LEN 64
/* Longest last_error kept in shared memory. */
#define KW_ERROR_LEN 512
#define KW_NAME_LEN 64

/* ---------------------------------------------------------------------
 * in guc.c
 * ---------------------------------------------------------------------
 */
extern char *kw_database;
extern int	kw_max_watches;
extern int	kw_list_page_size;
extern int	kw_watch_timeout_s;
extern int	kw_inactivity_timeout_s;
extern int	kw_backoff_initial_ms;
extern int	kw_backoff_max_ms;
extern int	kw_batch_size;
extern int	kw_connect_timeout_s;
extern bool kw_http_compression;
extern char *kw_debug_error_on_object;

extern void kw_define_gucs(void);

/* ---------------------------------------------------------------------
 * in kubeconfig.c: connection settings of one cluster
 * ---------------------------------------------------------------------
 */

/*
 * KwClusterConfig: everything needed to talk to one API server.  All strings
 * are palloc'd in the context current when the config was built; NULL means
 * "not set".  *_data fields hold decoded PEM text (not base64).
 */
typedef struct KwClusterConfig
{
	char	   *server_name;	/* foreign server name: the "cluster" column */
	char	   *api_server;		/* "https://host:port", no trailing slash */
	char	   *ca_file;
	char	   *ca_data;
	char	   *client_cert_file;
	char	   *client_cert_data;
	char	   *client_key_file;
	char	   *client_key_data;
	char	   *token;			/* static bearer token */
	char	   *token_file;		/* re-read when it changes and after a 401 */
	char	   *tls_server_name;
	char	   *default_namespace;	/* context's namespace, informational */
	bool		insecure_skip_tls_verify;
} KwClusterConfig;

extern KwClusterConfig *kw_kubeconfig_load(const char *path, const char *context);
extern KwClusterConfig *kw_in_cluster_config(void);

/* ---------------------------------------------------------------------
 * in fdw_option.c
 * ---------------------------------------------------------------------
 */
extern KwClusterConfig *kw_cluster_config_for_server(const char *server_name,
													 Oid userid);

/* ---------------------------------------------------------------------
 * in http.c
 * ---------------------------------------------------------------------
 */
typedef struct KwHttpResponse
{
	long		status;			/* HTTP status, 0 if none was received */
	StringInfoData body;
	int			retry_after_s;	/* Retry-After in seconds, -1 if absent */
} KwHttpResponse;

/*
 * KwHttpHandle: one libcurl easy handle with the request headers it owns.
 * `easy` is a CURL *, kept as void * so that curl.h stays out of this file.
 */
typedef struct KwHttpHandle
{
	void	   *easy;
	struct curl_slist *headers;
	struct curl_slist *connect_to;	/* tls_server_name mapping, or NULL */
	char		errbuf[256];	/* CURL_ERROR_SIZE */
} KwHttpHandle;

extern void kw_http_global_init(void);
extern KwHttpHandle *kw_http_handle_create(KwClusterConfig *cfg,
										   const char *url, bool stream);
extern void kw_http_handle_destroy(KwHttpHandle *h);
extern char *kw_http_bearer_token(KwClusterConfig *cfg, bool force_reread);
extern void kw_http_get(KwClusterConfig *cfg, const char *path,
						KwHttpResponse *resp);
extern void kw_http_raise_status(KwClusterConfig *cfg, const char *what,
								 KwHttpResponse *resp) pg_attribute_noreturn();
extern int	kw_http_status_sqlstate(long status);
extern int	kw_http_curl_sqlstate(int curlcode);
extern char *kw_status_message(const char *body, size_t len, char **reason);
extern void kw_url_append_param(StringInfo url, const char *key,
								const char *value);

/* ---------------------------------------------------------------------
 * in decode.c: JSON stream -> objects
 * ---------------------------------------------------------------------
 */

/* One Kubernetes object, ready to store. */
typedef struct KwObject
{
	char	   *uid;
	char	   *namespace;		/* NULL for cluster-scoped objects */
	char	   *name;
	char	   *resource_version;
	char	   *json;			/* object text, managedFields removed */
	int			json_len;
} KwObject;

typedef enum KwEventType
{
	KW_EV_ADDED,
	KW_EV_MODIFIED,
	KW_EV_DELETED,
	KW_EV_BOOKMARK,
	KW_EV_ERROR
} KwEventType;

typedef enum KwDecodeResult
{
	KW_DECODE_OK,
	KW_DECODE_SANITIZED,		/* stored with \u0000 escaped */
	KW_DECODE_SKIP				/* object can't be stored: skip it */
} KwDecodeResult;

extern const char *kw_event_type_name(KwEventType t);
extern const char *kw_json_get_string(void *obj, const char *key);
extern KwDecodeResult kw_decode_object(void *jobj, const char *api_version,
										const char *kind, KwObject *out,
										char **why);
extern char *kw_api_version_string(const char *api_group, const char *version);
extern bool kw_valid_identity(const char *s);

/* Watch stream decoder (PROTOCOL 12, 13). */
typedef struct KwWatchDecoder KwWatchDecoder;
typedef void (*KwWatchEventCallback) (void *arg, KwEventType type,
									  void *jobj);

extern KwWatchDecoder *kw_watch_decoder_create(void);
extern void kw_watch_decoder_free(KwWatchDecoder *dec);
extern bool kw_watch_decoder_feed(KwWatchDecoder *dec, const char *data,
								  size_t len, KwWatchEventCallback cb,
								  void *arg, char **error);
extern bool kw_watch_decoder_event_sanitized(KwWatchDecoder *dec);
extern bool kw_watch_decoder_finish(KwWatchDecoder *dec, char **error);

extern bool kw_sanitize_json(char **json, int *len);

/* redact.c: Secret values kept out unless opted in */
extern bool kw_is_secret_resource(const char *api_group, const char *plural);
extern void kw_redact_secret_object(void *obj);
extern bool kw_redact_secret_json(char **json, int *len);

/* Paged LIST decoder (PROTOCOL 5, 6). */
typedef struct KwListDecoder KwListDecoder;

/* One LIST item as the framer saw it: raw text, managedFields cut out. */
typedef struct KwListItem
{
	char	   *uid;			/* NULL when absent */
	char	   *namespace;
	char	   *name;
	char	   *resource_version;
	char	   *json;			/* valid during the callback only */
	int			json_len;
	const char *skip_reason;	/* non-NULL: the item cannot be decoded (too
								 * deep or too large); json is empty */
} KwListItem;

typedef void (*KwListItemCallback) (void *arg, KwListItem *item);

extern KwListDecoder *kw_list_decoder_create(const char *api_version,
											 const char *kind);
extern void kw_list_decoder_free(KwListDecoder *dec);
extern bool kw_list_decoder_feed(KwListDecoder *dec, const char *data,
								 size_t len, KwListItemCallback cb, void *arg,
								 char **error);
extern bool kw_list_decoder_finish(KwListDecoder *dec, char **resource_version,
								   char **continue_token, char **error);

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

#define KW_MERGE_NONE 0
#define KW_MERGE_RUNNING 1
#define KW_MERGE_DONE 2
#define KW_MERGE_FAILED 3

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
	/* a relist merge in a background worker (merge.c) */
	int			merge_state;	/* KW_MERGE_* */
	char		merge_rv[KW_RV_LEN];	/* the LIST's resourceVersion */
	int64		merge_counts[4];	/* added, modified, deleted, notified */
	char		merge_error[KW_ERROR_LEN];
	int			merge_sqlstate;
	bool		synced;			/* a LIST committed, no relist pending */
	int64		syncs;			/* LISTs merged and committed */
	int64		relist_requests;	/* kwatch.relist() calls (backends) */
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

/* ---------------------------------------------------------------------
 * in watch.c: per-watch reflector state machine
 * ---------------------------------------------------------------------
 */

/* A registration row of kwatch.registrations, as the worker sees it. */
typedef struct KwRegistration
{
	int32		id;
	char	   *server;
	char	   *api_group;		/* "" for core */
	char	   *api_version;
	char	   *plural;
	char	   *kind;
	bool		namespaced;
	char	   *namespace;		/* NULL = all namespaces */
	char	   *label_selector;
	char	   *field_selector;
	char	   *table_name;		/* in schema k8s */
	char	   *channel;
	bool		notify;
	bool		secret_data;	/* store a Secret's values in clear (redact.c) */
	bool		notify_minimal; /* notify_payload 'minimal': seq and type only */
	int			retry_ms[4];	/* retry ranges, ms: relist lower, upper,
								 * watch lower, upper; 0 = the GUCs' backoff */
	Oid			owner;
	char	   *resource_version;	/* checkpoint: resume point */
	char	   *created_at;		/* with id, tells a re-created registration apart */
} KwRegistration;

typedef struct KwWatch KwWatch;

/* in catalog.c */
extern List *kw_registrations_read(int32 only_id, MemoryContext cxt);

extern KwWatch *kw_watch_create(KwRegistration *reg, void *multi,
								MemoryContext parent);
extern void kw_watch_destroy(KwWatch *w);
extern bool kw_watch_same_registration(KwWatch *w, KwRegistration *reg);
extern int32 kw_watch_id(KwWatch *w);
extern void kw_watch_transfer_done(KwWatch *w, int curlcode);
extern long kw_watch_tick(KwWatch *w, TimestampTz now, TimestampTz polled_at);
extern bool kw_watch_has_pending(KwWatch *w);
extern void kw_watch_flush(KwWatch *w);

/* ---------------------------------------------------------------------
 * in sync.c: applying to tables (one transaction per call, caller's)
 * ---------------------------------------------------------------------
 */
typedef struct KwEvent
{
	KwEventType type;
	KwObject	obj;
} KwEvent;

typedef struct KwSyncPlans KwSyncPlans;

/*
 * One change applied to a mirror row, as the event stream (events.c) and
 * NOTIFY (notify.c) report it.  The flags are client-go's event handler
 * arguments (tools/cache/controller.go, ResourceEventHandler): preexisting
 * is AddFunc's isInInitialList, widened to every change a LIST found
 * (initial sync or relist) rather than a watch event; final_state_unknown
 * is DeleteFunc's DeletedFinalStateUnknown, a deletion inferred by a
 * relist whose last state was never seen; previous_resource_version is the
 * row's resourceVersion before a MODIFIED (UpdateFunc's oldObj).
 */
typedef struct KwChange
{
	KwEventType type;			/* ADDED, MODIFIED or DELETED */
	const char *namespace;		/* NULL: cluster-scoped */
	const char *name;
	const char *uid;
	const char *resource_version;
	const char *previous_resource_version;	/* MODIFIED only, else NULL */
	bool		preexisting;
	bool		final_state_unknown;
} KwChange;

/* What one apply did, for the status counters. */
typedef struct KwApplyCounts
{
	int64		added;
	int64		modified;
	int64		deleted;
	int64		notified;
} KwApplyCounts;

typedef void (*KwTxnBody) (void *arg);

extern bool kw_sync_in_transaction(KwTxnBody body, void *arg, char **errmsg,
								   int *sqlstate);
extern KwSyncPlans *kw_sync_plans_create(KwRegistration *reg,
										 MemoryContext cxt);
extern void kw_sync_plans_free(KwSyncPlans *plans);
extern void kw_sync_apply_events(KwSyncPlans *plans, KwRegistration *reg,
								 KwEvent *events, int nevents,
								 const char *resume_rv, KwApplyCounts *counts);
extern int64 kw_sync_count_rows(KwRegistration *reg);
extern struct HTAB *kw_sync_relist_begin(KwSyncPlans *plans,
										 KwRegistration *reg,
										 MemoryContext cxt);
extern int	kw_sync_relist_stage(KwSyncPlans *plans, KwRegistration *reg,
								 KwObject *objs, int nobjs);
extern void kw_sync_relist_finish(KwSyncPlans *plans, KwRegistration *reg,
								  const char *list_rv, struct HTAB *known,
								  KwApplyCounts *counts);
extern struct HTAB *kw_sync_known_rows(KwSyncPlans *plans, KwRegistration *reg,
										MemoryContext cxt);
extern const char *kw_sync_known_rv(struct HTAB *known, const char *uid);

/* ---------------------------------------------------------------------
 * in merge.c: large relist merges in a background worker
 * ---------------------------------------------------------------------
 */
struct BackgroundWorkerHandle;
extern int	kw_background_merge_objects;	/* GUC (guc.c) */
extern struct BackgroundWorkerHandle *kw_merge_start(KwRegistration *reg,
													 KwWatchStatus *slot,
													 const char *list_rv);
extern bool kw_merge_poll(struct BackgroundWorkerHandle *handle,
						  KwWatchStatus *slot, bool *ok, KwApplyCounts *counts,
						  char **errmsg, int *sqlstate);
extern void kw_merge_stop(struct BackgroundWorkerHandle *handle);
PGDLLEXPORT void kwatch_merge_main(Datum main_arg);

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

/* ---------------------------------------------------------------------
 * in events.c: the event stream ring (read by events_fdw.c)
 * ---------------------------------------------------------------------
 */
extern int	kw_event_buffer;	/* GUC kwatch.event_buffer (guc.c) */

/*
 * Field sizes of one ring slot, from Kubernetes' limits: names are DNS
 * subdomains (253 bytes), namespaces DNS labels (63); a resource is
 * plural (a DNS label) '.' group (a DNS subdomain); cluster and table_name
 * are PostgreSQL identifiers.  Longer text is cut and flagged, never
 * silently.
 */
#define KW_EV_RESOURCE_LEN 320
#define KW_EV_NAME_LEN 256
#define KW_EV_SHORT_LEN 64

typedef struct KwEventRecord
{
	int64		seq;
	TransactionId xid;			/* applying transaction (visibility) */
	TimestampTz at;				/* when the worker applied it */
	uint8		type;			/* KwEventType: ADDED, MODIFIED, DELETED */
	bool		has_namespace;	/* false: cluster-scoped (NULL namespace) */
	bool		truncated;
	char		cluster[NAMEDATALEN];
	char		resource[KW_EV_RESOURCE_LEN];
	char		table_name[NAMEDATALEN];
	char		namespace[KW_EV_SHORT_LEN];
	char		name[KW_EV_NAME_LEN];
	char		uid[KW_EV_SHORT_LEN];
	char		resource_version[KW_RV_LEN];
	bool		preexisting;	/* KwChange's flags */
	bool		final_state_unknown;
	bool		has_previous;	/* false: previous_resource_version NULL */
	char		previous_resource_version[KW_RV_LEN];
} KwEventRecord;

typedef enum KwEventReadResult
{
	KW_EVREAD_OK,
	KW_EVREAD_GONE,				/* overwritten by a newer event */
	KW_EVREAD_NOT_YET			/* not written or not committed */
} KwEventReadResult;

extern void kw_events_shmem_request(void);
extern void kw_events_writer_init(void);
extern void kw_events_restore(void);
extern int64 kw_events_append(KwRegistration *reg, const KwChange *c);
extern void kw_events_checkpoint(void);
extern bool kw_events_available(void);
extern int64 kw_events_last_seq(void);
extern int64 kw_events_oldest_seq(void);
extern int64 kw_events_scan_bound(void);
extern KwEventReadResult kw_events_read(int64 seq, KwEventRecord *out);
extern int	kw_events_ring_slots(void);

/* ---------------------------------------------------------------------
 * Live foreign tables (issue 4, part 2): discovery.c, live_column.c,
 * fdw_deparse.c, live_scan.c, fdw.c
 * ---------------------------------------------------------------------
 */
#include "nodes/pathnodes.h"
#include "nodes/primnodes.h"

/* One resource as discovery describes it (PROTOCOL 29). */
typedef struct KwResource
{
	char	   *api_group;		/* "" for core */
	char	   *api_version;
	char	   *plural;
	char	   *kind;
	bool		namespaced;
	List	   *verbs;			/* char * */
} KwResource;

extern bool kw_discover_resource(KwClusterConfig *cfg, const char *name,
								 KwResource *out);
extern List *kw_discover_listable(KwClusterConfig *cfg);

/*
 * One column a live table can have: its name, type and the expression that
 * computes it, over PARAM_EXTERN 1 (the object, jsonb) and 2 (the cluster,
 * text).  From kwatch.live_columns(), so mirror and live tables share one
 * definition of every column.
 */
typedef struct KwLiveColumn
{
	char	   *name;
	Oid			type;
	int32		typmod;
	Expr	   *expr;
} KwLiveColumn;

typedef struct KwLiveColumns
{
	char	   *api_group;
	char	   *plural;
	int			ncolumns;
	KwLiveColumn *columns;
} KwLiveColumns;

extern KwLiveColumns *kw_live_columns(const char *api_group,
									  const char *plural);
extern KwLiveColumn *kw_live_column_find(KwLiveColumns *cols,
										 const char *name);

/* A resolved live foreign table (fdw.c). */
typedef struct KwLiveTable
{
	Oid			relid;
	char	   *server;			/* foreign server name = cluster column */
	char	   *api_group;
	char	   *api_version;
	char	   *plural;
	char	   *kind;			/* the objects' kind (option or discovery) */
	bool		namespaced;
	char	   *namespace;		/* table option: always this namespace */
	bool		use_remote_estimate;
	bool		redact;			/* Secrets without option secret_data (redact.c) */
	KwLiveColumns *columns;
} KwLiveTable;

/* What the WHERE clauses became (fdw_deparse.c). */
typedef struct KwLiveRequest
{
	char	   *namespace;		/* path segment, NULL = all namespaces */
	List	   *namespaces;		/* String *: one LIST each (namespace IN) */
	List	   *label_terms;	/* char *: requirements, ANDed */
	List	   *field_terms;	/* char *: requirements, ANDed */
	List	   *pushed_quals;	/* RestrictInfo * that became a term */
	RestrictInfo *namespace_qual;	/* the one that became the namespace */
	bool		all_exact;		/* every qual is pushed with SQL's meaning */
	bool		by_name;		/* an exact metadata.name=... is pushed */
	List	   *param_exprs;	/* Param *: values bound at execution */
} KwLiveRequest;

extern void kw_classify_conditions(PlannerInfo *root, RelOptInfo *baserel,
								   KwLiveTable *table, KwLiveRequest *req);
extern char *kw_live_bind(const char *tmpl, List *param_exprs, Datum *values,
						  bool *nulls, bool *drop, bool *none);
extern char *kw_live_path(KwLiveTable *table, const char *namespace);
extern char *kw_live_selector(List *terms);
extern char *kw_live_request_text(const char *path, const char *labels,
								  const char *fields, int limit,
								  bool encode);

/* Streaming chunked LIST (live_scan.c). */
typedef struct KwLiveScan KwLiveScan;

extern KwLiveScan *kw_live_scan_begin(KwClusterConfig *cfg, const char *path,
									  const char *label_selector,
									  const char *field_selector, int limit,
									  const char *what,
									  const char *api_version,
									  const char *kind);
extern bool kw_live_scan_next(KwLiveScan *scan, char **json, int *len);
extern void kw_live_scan_end(KwLiveScan *scan);
extern void kw_live_scan_counts(KwLiveScan *scan, int *pages, int64 *items);

#endif							/* KWATCH_H */
