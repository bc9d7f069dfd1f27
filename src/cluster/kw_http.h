/*-------------------------------------------------------------------------
 *
 * kw_http.h
 *		HTTP to a cluster's API server (http.c, libcurl): single requests
 *		and the worker's long-lived transfers.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KW_HTTP_H
#define KW_HTTP_H

#include "kw_common.h"
#include "kw_cluster.h"

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
extern void kw_http_keep_connections(void);
extern void kw_http_request(KwClusterConfig *cfg, const char *method,
							const char *path, const char *accept,
							const char *content_type, const char *body,
							KwHttpResponse *resp);
extern void kw_http_raise_status(KwClusterConfig *cfg, const char *what,
								 KwHttpResponse *resp) pg_attribute_noreturn();
extern int	kw_http_status_sqlstate(long status);
extern int	kw_http_curl_sqlstate(int curlcode);
extern bool kw_http_server_unreachable(const char *name);
extern int	kw_http_sync_timeout_s;
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

#endif							/* KW_HTTP_H */
