/*-------------------------------------------------------------------------
 *
 * http.c
 *		libcurl handles for API server requests: TLS and credentials, the
 *		synchronous GET used by SQL functions, and the one place where HTTP
 *		and transport failures become SQLSTATEs.
 *
 * The worker drives its handles through a curl multi handle (worker.c);
 * backends running kwatch.watch() use kw_http_get(), which checks for query
 * cancel while the request is in flight.
 *
 * Credentials: a static token, or a token file re-read when its mtime
 * changes and on demand after a 401 (PROTOCOL 33); client certificates and
 * CA as files or in-memory PEM blobs; TLS verification stays on unless the
 * server says insecure_skip_tls_verify.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/stat.h>

#include <curl/curl.h>
#include <json-c/json.h>

#include "miscadmin.h"
#include "utils/memutils.h"

#include "kw_common.h"

/* Largest response kw_http_get accepts (discovery, probes): 32 MB. */
#define KW_SYNC_BODY_MAX (32 * 1024 * 1024)
/* Total time a synchronous request may take. */
#define KW_SYNC_TIMEOUT_S 30

static bool curl_initialized = false;

/* Cache of token files: path -> content, reloaded when mtime changes. */
typedef struct TokenFileCache
{
	char	   *path;
	struct timespec mtime;
	char	   *token;
	struct TokenFileCache *next;
} TokenFileCache;

static TokenFileCache *token_cache = NULL;

/*
 * kw_http_global_init: initializes libcurl once per process.
 */
void
kw_http_global_init(void)
{
	if (curl_initialized)
		return;
	if (curl_global_init(CURL_GLOBAL_ALL) != CURLE_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not initialize libcurl")));
	curl_initialized = true;
}

/*
 * read_token_file: returns the trimmed content of a token file (a pointer
 * into the process-lifetime cache, valid until the next call), reading the
 * file again when its mtime changed or `force` is set.  ERRORs with
 * ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION when unreadable or empty.
 */
static char *
read_token_file(const char *path, bool force)
{
	TokenFileCache *e;
	struct stat st;
	FILE	   *f;
	StringInfoData buf;
	char		chunk[1024];
	size_t		n;
	MemoryContext old;

	for (e = token_cache; e; e = e->next)
		if (strcmp(e->path, path) == 0)
			break;

	if (stat(path, &st) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
				 errmsg("could not stat token file \"%s\": %m", path)));
	if (e && !force && e->mtime.tv_sec == st.st_mtim.tv_sec &&
		e->mtime.tv_nsec == st.st_mtim.tv_nsec)
		return e->token;

	f = fopen(path, "r");
	if (f == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
				 errmsg("could not open token file \"%s\": %m", path)));
	old = MemoryContextSwitchTo(TopMemoryContext);
	initStringInfo(&buf);
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0 && buf.len < 65536)
		appendBinaryStringInfo(&buf, chunk, n);
	fclose(f);
	while (buf.len > 0 && isspace((unsigned char) buf.data[buf.len - 1]))
		buf.data[--buf.len] = '\0';
	if (e == NULL)
	{
		e = palloc0(sizeof(TokenFileCache));
		e->path = pstrdup(path);
		e->next = token_cache;
		token_cache = e;
	}
	else
		pfree(e->token);
	e->token = buf.data;
	e->mtime = st.st_mtim;
	MemoryContextSwitchTo(old);

	if (e->token[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
				 errmsg("token file \"%s\" is empty", path)));
	return e->token;
}

/*
 * kw_http_bearer_token: the bearer token to send for `cfg`, or NULL when it
 * authenticates otherwise.  A token file wins over a static token (client-go
 * rest.Config.BearerTokenFile) and is re-read when it changed, or always
 * with force_reread (after a 401, PROTOCOL 33).  The result belongs to a
 * cache: copy it if it must outlive the next call.
 */
char *
kw_http_bearer_token(KwClusterConfig *cfg, bool force_reread)
{
	if (cfg->token_file)
		return read_token_file(cfg->token_file, force_reread);
	return cfg->token;
}

static void
set_blob(CURL *easy, CURLoption opt, const char *pem)
{
	struct curl_blob blob;

	blob.data = (void *) pem;
	blob.len = strlen(pem);
	blob.flags = CURL_BLOB_COPY;
	curl_easy_setopt(easy, opt, &blob);
}

/*
 * set_tls_server_name: makes libcurl send `name` as SNI and verify the
 * certificate against it while still connecting to the host of `url`
 * (kubeconfig tls-server-name): the request goes to https://name:port/...
 * and CURLOPT_CONNECT_TO maps name:port to the real host:port.
 */
static void
set_tls_server_name(KwHttpHandle *h, const char *url, const char *name)
{
	CURLU	   *u = curl_url();
	char	   *host = NULL,
			   *port = NULL,
			   *rewritten = NULL;

	if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
		curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
		curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK &&
		curl_url_set(u, CURLUPART_HOST, name, 0) == CURLUE_OK &&
		curl_url_get(u, CURLUPART_URL, &rewritten, 0) == CURLUE_OK)
	{
		char	   *map = psprintf("%s:%s:%s:%s", name, port, host, port);

		h->connect_to = curl_slist_append(NULL, map);
		curl_easy_setopt((CURL *) h->easy, CURLOPT_URL, rewritten);
		curl_easy_setopt((CURL *) h->easy, CURLOPT_CONNECT_TO, h->connect_to);
		pfree(map);
	}
	curl_free(host);
	curl_free(port);
	curl_free(rewritten);
	curl_url_cleanup(u);
}

/*
 * kw_http_handle_create: a configured easy handle for GET `url` on the
 * cluster `cfg`.  `stream` handles (LIST pages and WATCH) have no overall
 * timeout; the caller sets the write callback.  The handle is palloc'd in
 * the current context; the curl parts are freed by kw_http_handle_destroy.
 * ERRORs when the token file can't be read.
 */
KwHttpHandle *
kw_http_handle_create(KwClusterConfig *cfg, const char *url, bool stream)
{
	KwHttpHandle *h;
	CURL	   *easy;
	char	   *token;

	kw_http_global_init();
	token = kw_http_bearer_token(cfg, false);

	h = palloc0(sizeof(KwHttpHandle));
	easy = curl_easy_init();
	if (easy == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("could not create a libcurl handle")));
	h->easy = easy;

	curl_easy_setopt(easy, CURLOPT_URL, url);
	curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, h->errbuf);
	curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
	/* PROTOCOL 37: our own agent; curl's would get pretty-printed JSON. */
	curl_easy_setopt(easy, CURLOPT_USERAGENT, KWATCH_USER_AGENT);
	curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT, (long) kw_connect_timeout_s);
	/* PROTOCOL 26: keepalive probes find half-open connections. */
	curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(easy, CURLOPT_TCP_KEEPIDLE, 30L);
	curl_easy_setopt(easy, CURLOPT_TCP_KEEPINTVL, 10L);
	curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "https,http");
	curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, (long) CURL_HTTP_VERSION_2TLS);
	if (kw_http_compression)
		curl_easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, "gzip");
	if (!stream)
		curl_easy_setopt(easy, CURLOPT_TIMEOUT, (long) KW_SYNC_TIMEOUT_S);

	/* TLS */
	if (cfg->insecure_skip_tls_verify)
	{
		curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (cfg->ca_data)
		set_blob(easy, CURLOPT_CAINFO_BLOB, cfg->ca_data);
	else if (cfg->ca_file)
		curl_easy_setopt(easy, CURLOPT_CAINFO, cfg->ca_file);
	if (cfg->client_cert_data)
		set_blob(easy, CURLOPT_SSLCERT_BLOB, cfg->client_cert_data);
	else if (cfg->client_cert_file)
		curl_easy_setopt(easy, CURLOPT_SSLCERT, cfg->client_cert_file);
	if (cfg->client_key_data)
		set_blob(easy, CURLOPT_SSLKEY_BLOB, cfg->client_key_data);
	else if (cfg->client_key_file)
		curl_easy_setopt(easy, CURLOPT_SSLKEY, cfg->client_key_file);
	if (cfg->tls_server_name)
		set_tls_server_name(h, url, cfg->tls_server_name);

	h->headers = curl_slist_append(NULL, "Accept: application/json");
	if (token)
	{
		char	   *auth = psprintf("Authorization: Bearer %s", token);

		h->headers = curl_slist_append(h->headers, auth);
		/* don't leave the token in palloc'd memory longer than needed */
		memset(auth, 0, strlen(auth));
		pfree(auth);
	}
	curl_easy_setopt(easy, CURLOPT_HTTPHEADER, h->headers);
	return h;
}

/*
 * kw_http_handle_destroy: frees the curl handle and its header list.  The
 * caller removes it from any multi handle first.  Accepts NULL.
 */
void
kw_http_handle_destroy(KwHttpHandle *h)
{
	if (h == NULL)
		return;
	if (h->easy)
		curl_easy_cleanup((CURL *) h->easy);
	if (h->headers)
		curl_slist_free_all(h->headers);
	if (h->connect_to)
		curl_slist_free_all(h->connect_to);
	pfree(h);
}

/*
 * kw_url_append_param: appends "?key=value" or "&key=value" to `url` with
 * the value percent-encoded (RFC 3986 unreserved characters kept).
 */
void
kw_url_append_param(StringInfo url, const char *key, const char *value)
{
	appendStringInfoChar(url, strchr(url->data, '?') ? '&' : '?');
	appendStringInfoString(url, key);
	appendStringInfoChar(url, '=');
	for (const unsigned char *p = (const unsigned char *) value; *p; p++)
	{
		if (kw_ascii_alnum((unsigned char) *p) || *p == '-' || *p == '.' || *p == '_' || *p == '~')
			appendStringInfoChar(url, *p);
		else
			appendStringInfo(url, "%%%02X", *p);
	}
}

typedef struct SyncBody
{
	StringInfo	buf;
	bool		overflow;
} SyncBody;

static size_t
sync_write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	SyncBody   *b = (SyncBody *) userdata;
	size_t		n = size * nmemb;

	if (b->buf->len + n > KW_SYNC_BODY_MAX)
	{
		b->overflow = true;
		return 0;				/* aborts the transfer */
	}
	appendBinaryStringInfo(b->buf, ptr, n);
	return n;
}

static int
sync_progress_cb(void *clientp, curl_off_t dltotal, curl_off_t dlnow,
				 curl_off_t ultotal, curl_off_t ulnow)
{
	/* abort the transfer on query cancel; reported after it returns */
	return (InterruptPending && (QueryCancelPending || ProcDiePending)) ? 1 : 0;
}

/*
 * kw_http_get: GET `path` (e.g. "/api/v1") from the cluster `cfg`
 * synchronously, filling `resp` (body palloc'd in the current context).
 * Any HTTP status is returned, not raised; transport failures (refused,
 * TLS, timeout) ERROR with the SQLSTATE of kw_http_curl_sqlstate.  Query
 * cancel interrupts the request.  Retries once after a 401 when the token
 * comes from a file, re-reading it (PROTOCOL 33).
 */
void
kw_http_get(KwClusterConfig *cfg, const char *path, KwHttpResponse *resp)
{
	for (int attempt = 0; attempt < 2; attempt++)
	{
		KwHttpHandle *volatile h = NULL;
		char	   *url = psprintf("%s%s", cfg->api_server, path);
		SyncBody	body;
		CURLcode	rc;

		memset(resp, 0, sizeof(*resp));
		initStringInfo(&resp->body);
		resp->retry_after_s = -1;
		body.buf = &resp->body;
		body.overflow = false;

		if (attempt == 1)
			(void) kw_http_bearer_token(cfg, true);

		PG_TRY();
		{
			CURL	   *easy;
			curl_off_t	ra = -1;

			h = kw_http_handle_create(cfg, url, false);
			easy = (CURL *) h->easy;
			curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, sync_write_cb);
			curl_easy_setopt(easy, CURLOPT_WRITEDATA, &body);
			curl_easy_setopt(easy, CURLOPT_NOPROGRESS, 0L);
			curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, sync_progress_cb);

			rc = curl_easy_perform(easy);
			CHECK_FOR_INTERRUPTS();
			if (body.overflow)
				ereport(ERROR,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("response from %s is larger than %d MB",
								url, KW_SYNC_BODY_MAX / (1024 * 1024))));
			if (rc != CURLE_OK)
				ereport(ERROR,
						(errcode(kw_http_curl_sqlstate(rc)),
						 errmsg("could not reach Kubernetes API server of \"%s\": %s",
								cfg->server_name ? cfg->server_name : cfg->api_server,
								h->errbuf[0] ? h->errbuf : curl_easy_strerror(rc)),
						 errdetail("GET %s", url)));
			curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &resp->status);
			if (curl_easy_getinfo(easy, CURLINFO_RETRY_AFTER, &ra) == CURLE_OK && ra > 0)
				resp->retry_after_s = (int) ra;
		}
		PG_FINALLY();
		{
			kw_http_handle_destroy(h);
		}
		PG_END_TRY();

		if (resp->status != 401 || cfg->token_file == NULL)
			return;
	}
}

/*
 * kw_http_status_sqlstate: the SQLSTATE for an HTTP status from an API
 * server (Kubernetes' meanings, AM pkg/api/errors/errors.go).
 */
int
kw_http_status_sqlstate(long status)
{
	switch (status)
	{
		case 400:
		case 422:
			return ERRCODE_INVALID_PARAMETER_VALUE;
		case 401:
			return ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION;
		case 403:
			return ERRCODE_INSUFFICIENT_PRIVILEGE;
		case 404:
			return ERRCODE_UNDEFINED_OBJECT;
		case 409:
			return ERRCODE_UNIQUE_VIOLATION;
		case 410:
			return ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE;
		case 429:
			return ERRCODE_CONFIGURATION_LIMIT_EXCEEDED;
		case 504:
			return ERRCODE_FDW_UNABLE_TO_ESTABLISH_CONNECTION;
		default:
			return ERRCODE_FDW_ERROR;
	}
}

/*
 * kw_http_curl_sqlstate: the SQLSTATE for a libcurl transport failure:
 * resolve/connect/TLS/timeouts are "unable to establish connection",
 * everything else is a generic FDW error.
 */
int
kw_http_curl_sqlstate(int curlcode)
{
	switch ((CURLcode) curlcode)
	{
		case CURLE_COULDNT_RESOLVE_HOST:
		case CURLE_COULDNT_CONNECT:
		case CURLE_OPERATION_TIMEDOUT:
		case CURLE_SSL_CONNECT_ERROR:
		case CURLE_PEER_FAILED_VERIFICATION:
		case CURLE_SSL_CERTPROBLEM:
		case CURLE_SSL_CACERT_BADFILE:
		case CURLE_SSL_CIPHER:
		case CURLE_URL_MALFORMAT:
			return ERRCODE_FDW_UNABLE_TO_ESTABLISH_CONNECTION;
		case CURLE_ABORTED_BY_CALLBACK:
			return ERRCODE_QUERY_CANCELED;
		default:
			return ERRCODE_FDW_ERROR;
	}
}

/*
 * kw_status_message: the `message` of a Kubernetes Status object in `body`
 * (palloc'd), with its `reason` in *reason when asked (NULL if absent).
 * A body that is not a Status (an HTML page from a proxy, say) yields its
 * first 200 printable characters instead.
 */
char *
kw_status_message(const char *body, size_t len, char **reason)
{
	json_tokener *tok;
	json_object *obj;
	char	   *msg = NULL;

	if (reason)
		*reason = NULL;
	if (body == NULL || len == 0)
		return pstrdup("(empty response)");

	tok = json_tokener_new();
	obj = json_tokener_parse_ex(tok, body, (int) len);
	json_tokener_free(tok);
	if (obj && json_object_is_type(obj, json_type_object))
	{
		const char *m = kw_json_get_string(obj, "message");
		const char *r = kw_json_get_string(obj, "reason");

		if (m)
			msg = pstrdup(m);
		if (reason && r)
			*reason = pstrdup(r);
	}
	if (obj)
		json_object_put(obj);

	if (msg == NULL)
	{
		StringInfoData s;

		initStringInfo(&s);
		for (size_t i = 0; i < len && s.len < 200; i++)
		{
			unsigned char c = (unsigned char) body[i];

			appendStringInfoChar(&s, (c >= 32 && c < 127) ? (char) c : ' ');
		}
		msg = s.data;
	}
	return msg;
}

/*
 * kw_http_raise_status: ERRORs for a failed request `what` ("discovery of
 * /api/v1") with the HTTP status mapped to an SQLSTATE and the API server's
 * own message.  Never returns.
 */
void
kw_http_raise_status(KwClusterConfig *cfg, const char *what,
					 KwHttpResponse *resp)
{
	char	   *reason;
	char	   *msg = kw_status_message(resp->body.data, resp->body.len, &reason);

	ereport(ERROR,
			(errcode(kw_http_status_sqlstate(resp->status)),
			 errmsg("Kubernetes API server of \"%s\" refused %s: %s",
					cfg->server_name ? cfg->server_name : cfg->api_server,
					what, msg),
			 errdetail("HTTP status %ld%s%s.", resp->status,
					   reason ? ", reason " : "", reason ? reason : ""),
			 resp->status == 401 ?
			 errhint("Check the token or client certificate of the server or its user mapping.") :
			 resp->status == 403 ?
			 errhint("The Kubernetes user needs the list and watch verbs on this resource (RBAC).") : 0));
}
