/*-------------------------------------------------------------------------
 *
 * kw_common.h
 *		The common ground every folder of src/ may include (src/README.md):
 *		the version, ASCII classes, settings (guc.c), the vocabulary of a
 *		watch (an object, an event type, a registration, a change), JSON
 *		helpers (json.c), registrations as read (catalog.c), the
 *		transaction runner (transaction.c) and who called (caller.c).
 *		It includes nothing of kwatch's other folders.
 *
 * The data path runs one way (doc/architecture.md):
 *
 *	 cluster/http.c (libcurl) -> decode/ (json-c) -> transfer/ (the
 *	 reflector) -> channel/ -> apply/ (rows + checkpoint, NOTIFY, the
 *	 event ring) -> common/shmem.c (status)
 *
 * Rule numbers ("PROTOCOL 12") refer to the list/watch rules documented in
 * doc/protocol.md, each traced to its Kubernetes source.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KW_COMMON_H
#define KW_COMMON_H

#include "postgres.h"

#include "pg_compat.h"			/* the supported majors' differences */

#include "datatype/timestamp.h"
#include "lib/stringinfo.h"
#include "nodes/parsenodes.h"
#include "nodes/pg_list.h"
#include "utils/acl.h"
#include "utils/hsearch.h"

/*
 * The extension's version, kwatch.control's default_version, given by the
 * Makefile (-DKWATCH_VERSION="x.y.z"): written in one place, so the
 * User-Agent (KWATCH_USER_AGENT) names the version that is installed.
 */
#ifndef KWATCH_VERSION
#error "KWATCH_VERSION is not defined: build with the Makefile (it reads kwatch.control)"
#endif
#define KWATCH_USER_AGENT "kwatch/" KWATCH_VERSION

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

/*
 * kw_dns_label: whether `s` is an RFC 1123 label, as Kubernetes names a
 * namespace: 1-63 of lower-case letters, digits and '-', not at either end
 * (apimachinery validation.IsDNS1123Label).
 */
static inline bool
kw_dns_label(const char *s)
{
	size_t		n = strlen(s);

	if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!kw_ascii_digit((unsigned char) s[i]) && !kw_ascii_lower((unsigned char) s[i]) && s[i] != '-')
			return false;
	return true;
}

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
extern int	kw_max_concurrent_relists;
extern int	kw_watch_timeout_s;
extern int	kw_inactivity_timeout_s;
extern int	kw_health_check_interval_s;
extern int	kw_health_check_timeout_s;
extern int	kw_backoff_initial_ms;
extern int	kw_backoff_max_ms;
extern int	kw_batch_size;
extern int	kw_batch_memory_kb;
extern int	kw_connect_timeout_s;
extern int	kw_apply_send_timeout_s;
extern bool kw_http_compression;
extern bool kw_list_from_watch_cache;
extern char *kw_debug_error_on_object;
extern int	kw_background_merge_objects;
extern int	kw_event_buffer;
extern int	kw_max_apply_workers;
extern int	kw_apply_timeout_ms;
extern int	kw_exec_plugin_timeout_s;
extern int	kw_history_prune_interval_s;
extern int	kw_list_strategy;			/* a KwListStrategy */
extern int	kw_rbac_decision_max_age_s;

extern void kw_define_gucs(void);

/* kwatch.list_strategy: streaming list or LIST, per API server */
typedef enum KwListStrategy
{
	KW_LIST_STRATEGY_AUTO,		/* streaming where served, else LIST */
	KW_LIST_STRATEGY_STREAM,	/* always a streaming list */
	KW_LIST_STRATEGY_LIST		/* always LIST */
} KwListStrategy;

/* ---------------------------------------------------------------------
 * the vocabulary of a watch
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
	char	   *managers;		/* what managedFields said, for history: JSON
								 * text [{"manager", "operation", "time",
								 * "subresource"}, ...], or NULL */
} KwObject;

typedef enum KwEventType
{
	KW_EV_ADDED,
	KW_EV_MODIFIED,
	KW_EV_DELETED,
	KW_EV_BOOKMARK,
	KW_EV_ERROR
} KwEventType;

/* in json.c: small helpers over json-c objects */
extern const char *kw_event_type_name(KwEventType t);
extern const char *kw_json_get_string(void *obj, const char *key);

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
	int			apply_timeout_ms;	/* watch(apply_timeout), ms; -1 = the
									 * kwatch.apply_timeout setting */
	Oid			owner;
	bool		owner_super;	/* owner is a superuser (read with the row):
								 * only then may apply_timeout_ms be 0 or
								 * above kwatch.apply_timeout */
	char	   *resource_version;	/* checkpoint: resume point */
	char	   *created_at;		/* with id, tells a re-created registration apart */
} KwRegistration;

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

/* in catalog.c: kwatch.registrations as the worker reads them */
extern List *kw_registrations_read(int32 only_id, MemoryContext cxt);
extern void kw_wake_worker_at_commit(void);
extern void kw_retry_connect_at_commit(void);
extern void kw_wake_sender_at_commit(void);
extern void kw_lock_registration(int32 id, int mode);
extern bool kw_has_rbac_policy(Oid relid);

/* in yaml_error.c: libyaml's context of a failed parse, as an errdetail */
struct yaml_parser_s;
extern int	kw_errdetail_yaml_context(const struct yaml_parser_s *parser);

/* in schema_version.c: the installed extension is at the library's version */
extern char *kw_installed_version(void);
extern bool kw_schema_is_current(void);
extern void kw_check_schema_version(void);
extern void kw_schema_version_forget(void);

/* in transaction.c: one transaction with SPI and a snapshot */
typedef void (*KwTxnBody) (void *arg);

extern bool kw_run_in_transaction(KwTxnBody body, void *arg, char **errmsg,
								  int *sqlstate);
extern char *kw_in_subxact(KwTxnBody fn, void *arg, int *sqlstate);

/*
 * Called at the start of every kw_run_in_transaction body, when set: the
 * apply side's as_owner.c sets it (kw_as_owner_init) to fire a table
 * owner's deferred triggers as that owner, a hook as PostgreSQL's own
 * (ExecutorStart_hook), so that common/ calls nothing of apply/.
 */
typedef void (*KwTxnStartHook) (void);
extern KwTxnStartHook kw_transaction_start_hook;

/* in caller.c: who called kwatch.watch/unwatch/relist */
extern Oid	kw_current_caller(void);
extern Oid	kw_set_current_caller(Oid caller);

/*
 * kw_is_secret_resource: whether (api_group, plural) names core Secrets,
 * the one resource whose values kwatch redacts (decode/redact.c) and
 * whose values a refused write's message never shows (cluster/write.c).
 */
static inline bool
kw_is_secret_resource(const char *api_group, const char *plural)
{
	return api_group != NULL && api_group[0] == '\0' &&
		plural != NULL && strcmp(plural, "secrets") == 0;
}

#endif							/* KW_COMMON_H */
