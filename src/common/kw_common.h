/*-------------------------------------------------------------------------
 *
 * kw_common.h
 *		Declarations every part of kwatch uses: settings, the connection
 *		settings of a cluster, HTTP, decoding, redaction, and the vocabulary
 *		of a watch (its registration, the changes it applies).
 *
 * The data path runs one way:
 *
 *	 http.c (libcurl) -> decode.c (json-c) -> watch.c (reflector state
 *	 machine) -> sync.c (SPI: rows + checkpoint) + notify.c (NOTIFY) +
 *	 events.c (event stream) -> shmem.c (status)
 *
 * worker.c drives it from one background worker (kw_worker.h); the live
 * foreign tables (kw_fdw.h) reuse HTTP and decoding in backends; the
 * event stream has its own header (kw_events.h).
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

/* Longest resourceVersion kept in shared memory (etcd revisions are ~20). */
#define KW_RV_LEN 64
/* in wait_current.c: -1, 0, 1, or -2 when not comparable (PROTOCOL 28) */
extern int	kw_rv_compare(const char *a, const char *b);
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
extern int	kw_health_check_interval_s;
extern int	kw_health_check_timeout_s;
extern int	kw_backoff_initial_ms;
extern int	kw_backoff_max_ms;
extern int	kw_batch_size;
extern int	kw_connect_timeout_s;
extern bool kw_http_compression;
extern bool kw_list_from_watch_cache;
extern char *kw_debug_error_on_object;
extern int	kw_background_merge_objects;
extern int	kw_event_buffer;

extern void kw_define_gucs(void);

/* ---------------------------------------------------------------------
 * in list_strategy.c: streaming list or LIST, per API server
 * ---------------------------------------------------------------------
 */
typedef enum KwListStrategy
{
	KW_LIST_STRATEGY_AUTO,		/* streaming where served, else LIST */
	KW_LIST_STRATEGY_STREAM,	/* always a streaming list */
	KW_LIST_STRATEGY_LIST		/* always LIST */
} KwListStrategy;

extern int	kw_list_strategy;
extern bool kw_list_should_stream(const char *api_server);
extern bool kw_list_stream_known(const char *api_server);
extern void kw_list_stream_support(const char *api_server, bool supported,
								   const char *why);

/* ---------------------------------------------------------------------
 * in cluster_config.c: connection settings of one cluster
 * ---------------------------------------------------------------------
 */

/* A name and a value (exec env entries, impersonation extras). */
typedef struct KwKeyValue
{
	char	   *key;
	char	   *value;
} KwKeyValue;

/*
 * KwExecConfig: a kubeconfig user's exec credential plugin
 * (clientcmd/api/v1 ExecConfig).  interactive_mode is NULL, "Never",
 * "IfAvailable" or "Always"; source names the kubeconfig user and file.
 */
typedef struct KwExecConfig
{
	char	   *command;
	List	   *args;			/* of char * */
	List	   *env;			/* of KwKeyValue */
	char	   *api_version;	/* client.authentication.k8s.io/v1 or v1beta1 */
	char	   *install_hint;
	char	   *interactive_mode;
	bool		provide_cluster_info;
	char	   *source;
	/*
	 * Who lets it run: the foreign server's owner, and whether
	 * that role had the privileges of pg_execute_server_program (or was a
	 * superuser) when connection.c resolved the server.  InvalidOid: not
	 * resolved for a server, never run.
	 */
	Oid			server_owner;
	bool		owner_may_run;
} KwExecConfig;

/*
 * KwClusterConfig: everything needed to talk to one API server.  All strings
 * are palloc'd in the context current when the config was built; NULL means
 * "not set".  *_data fields hold decoded PEM text (not base64).  Made by
 * kubeconfig.c and connection.c, used by credential.c and http.c.
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
	KwExecConfig *exec;			/* exec credential plugin, or NULL */
	char	   *proxy_url;		/* http://, https:// or socks5:// proxy */
	/* impersonation (client-go rest.ImpersonationConfig) */
	char	   *as_user;
	char	   *as_uid;
	List	   *as_groups;		/* of char * */
	List	   *as_extra;		/* of KwKeyValue, a key repeated per value */
} KwClusterConfig;

extern KwClusterConfig *kw_cluster_config_copy(const KwClusterConfig *src);
extern bool kw_cluster_config_equal(const KwClusterConfig *a,
									const KwClusterConfig *b);
extern List *kw_copy_key_values(List *src);
extern KwExecConfig *kw_exec_config_copy(KwExecConfig *src);
extern bool kw_header_value_safe(const char *value);

/* ---------------------------------------------------------------------
 * in kubeconfig.c: a kubeconfig file or in-cluster config -> settings
 * ---------------------------------------------------------------------
 */
extern KwClusterConfig *kw_kubeconfig_load(const char *path, const char *context);
extern KwClusterConfig *kw_in_cluster_config(void);

/* ---------------------------------------------------------------------
 * in fdw_option.c: the options and their rules
 * ---------------------------------------------------------------------
 */
extern DefElem *kw_get_option(List *options, const char *name);
extern char *kw_option_string(List *options, const char *name);
extern void kw_check_transport(const char *server_name, const char *api_server,
							   bool insecure, bool has_ca, bool allow_http);

/* ---------------------------------------------------------------------
 * in connection.c: server + user mapping -> settings, cached
 * ---------------------------------------------------------------------
 */
extern AclResult kw_server_usage(Oid serverid, Oid role);
extern void kw_check_watch_role(const char *server, Oid role);
extern KwClusterConfig *kw_cluster_config_for_server(const char *server_name,
													 Oid userid);
extern uint64 kw_connection_generation(void);

/* ---------------------------------------------------------------------
 * in credential.c: tokens, certificate files, exec plugins
 * ---------------------------------------------------------------------
 */
typedef struct KwCredential
{
	char	   *token;			/* bearer token, or NULL */
	char	   *client_cert_data;	/* PEM from an exec plugin, or NULL */
	char	   *client_key_data;
	TimestampTz expires;		/* 0 = no expiry */
	TimestampTz obtained;
} KwCredential;

typedef enum KwCredState
{
	KW_CRED_READY,
	KW_CRED_PENDING,
	KW_CRED_FAILED
} KwCredState;

extern int	kw_exec_plugin_timeout_s;
extern char *kw_credential_file(const char *path, const char *what, bool force);
extern void kw_credential_set_nonblocking(bool on);
extern KwCredState kw_credential_poll(KwClusterConfig *cfg, char **error,
									  int *sqlstate);
extern KwCredential *kw_credential_get(KwClusterConfig *cfg);
extern bool kw_role_may_run_programs(Oid role);
extern void kw_check_exec_allowed(KwClusterConfig *cfg);
extern void kw_credential_rejected(KwClusterConfig *cfg,
								   TimestampTz request_started);
extern bool kw_credential_can_refresh(KwClusterConfig *cfg);
extern int	kw_credential_wait_fds(int *fds, int max, uint64 *generation);
extern bool kw_credential_drive(long *timeout_ms);

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

/* Bytes of a non-2xx response body kept for the error message. */
#define KW_HTTP_ERRBODY_MAX (64 * 1024)

/* What a transfer's body consumer says about one chunk of a 200 body. */
typedef enum KwFeedResult
{
	KW_FEED_CONTINUE,			/* consumed: read on */
	KW_FEED_PAUSE,				/* not consumed: offer it again after
								 * kw_http_transfer_resume() */
	KW_FEED_STOP				/* not consumed: end the transfer (*error
								 * says why, or NULL when the consumer
								 * recorded it itself) */
} KwFeedResult;

/*
 * KwHttpFeed: consumes `len` bytes of a 200 body.  Runs inside libcurl's
 * write callback, in the transfer's feed context, under PG_TRY: an ERROR it
 * raises ends the transfer (stop_reason, caught) instead of longjmp'ing
 * through libcurl.
 */
typedef KwFeedResult (*KwHttpFeed) (void *arg, const char *data, size_t len,
									char **error);

/*
 * KwHttpTransfer: one GET to an API server: the libcurl easy handle with the
 * headers it owns, the response status, the start of a non-200 body, and
 * the consumer of a 200 body.  `easy` is a CURL *, kept as void * so that
 * curl.h stays out of this file.
 */
typedef struct KwHttpTransfer
{
	void	   *easy;
	struct curl_slist *headers;
	struct curl_slist *connect_to;	/* tls_server_name mapping, or NULL */
	char		errbuf[256];	/* CURL_ERROR_SIZE */
	const char *server_name;	/* for messages */
	MemoryContext cxt;			/* where the transfer lives */
	long		status;			/* HTTP status, 0 until the headers arrived */
	StringInfoData errbody;		/* non-200 body, first KW_HTTP_ERRBODY_MAX bytes */
	KwHttpFeed	feed;
	void	   *feed_arg;
	MemoryContext feed_cxt;
	char	   *stop_reason;	/* why the feed ended the transfer, or NULL */
	ErrorData  *caught;			/* an ERROR raised by the feed, or NULL */
	bool		paused;
	TimestampTz last_data;		/* when bytes last arrived (or the start) */
	void	   *owner;			/* who kw_http_transfer_attach ran it for */
} KwHttpTransfer;

/*
 * The result code of a transfer that completed (libcurl's CURLE_OK), as the
 * worker hands it to kw_watch_transfer_done; any other code is a transport
 * failure for kw_http_transport_error.
 */
#define KW_HTTP_TRANSFER_OK 0

extern void kw_http_global_init(void);
extern KwHttpTransfer *kw_http_transfer_create(KwClusterConfig *cfg,
											   const char *url, bool stream,
											   KwHttpFeed feed, void *feed_arg,
											   MemoryContext feed_cxt);
extern void kw_http_transfer_attach(void *multi, KwHttpTransfer *t,
									void *owner);
extern void kw_http_transfer_detach(void *multi, KwHttpTransfer *t);
extern void *kw_http_transfer_owner(KwHttpTransfer *t);
extern void *kw_http_owner_of(void *easy);

/* Called by kw_http_multi_run for a finished transfer of `owner`. */
typedef void (*KwHttpDone) (void *owner, int result);

extern void *kw_http_multi_create(void);
extern void kw_http_multi_destroy(void *multi);
extern void kw_http_multi_finished(void *multi, KwHttpDone done);
extern void kw_http_multi_run(void *multi, KwHttpDone done);
extern void kw_http_multi_wait(void *multi, int timeout_ms);
extern void kw_http_transfer_resume(KwHttpTransfer *t);
extern void kw_http_transfer_upkeep(KwHttpTransfer *t);
extern long kw_http_transfer_status(KwHttpTransfer *t);
extern int	kw_http_transfer_retry_after(KwHttpTransfer *t);
extern char *kw_http_transport_error(KwHttpTransfer *t, int curlcode,
									 int *sqlstate, char **detail,
									 char **hint);
extern void kw_http_transfer_release(KwHttpTransfer *t);
extern void kw_http_transfer_destroy(KwHttpTransfer *t);
extern void kw_http_get(KwClusterConfig *cfg, const char *path,
						KwHttpResponse *resp);
extern void kw_http_get_accept(KwClusterConfig *cfg, const char *path,
							   const char *accept, KwHttpResponse *resp);
extern void kw_http_raise_status(KwClusterConfig *cfg, const char *what,
								 KwHttpResponse *resp) pg_attribute_noreturn();
extern int	kw_http_status_sqlstate(long status);
extern int	kw_http_curl_sqlstate(int curlcode);
extern char *kw_status_message(const char *body, size_t len, char **reason);

/*
 * Every message that echoes user input (a URL with its selectors, a name,
 * an option's value, the API server's message, which quotes the request)
 * shows at most this many bytes of it, marked as cut (kw_excerpt).
 */
#define KW_ECHO_MAX 300
extern char *kw_excerpt(const char *s);
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
 * the vocabulary of a watch
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
	int			apply_timeout_ms;	/* watch(apply_timeout), ms; -1 = the
									 * kwatch.apply_timeout setting */
	Oid			owner;
	bool		owner_super;	/* owner is a superuser (read with the row):
								 * only then may apply_timeout_ms be 0 or
								 * above kwatch.apply_timeout (issue 30) */
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

#endif							/* KW_COMMON_H */
