/*-------------------------------------------------------------------------
 *
 * http.c
 *		libcurl handles for API server requests: TLS and credentials, the
 *		synchronous GET used by SQL functions, and the one place where HTTP
 *		and transport failures become SQLSTATEs.
 *
 * Every request is a KwHttpTransfer made by kw_http_transfer_create: the
 * worker's LIST and WATCH streams (watch.c), live scans (live_scan.c) and
 * synchronous GETs (kw_http_get: discovery and registration probes).  One
 * write callback serves them all: it keeps the start of an error body,
 * hands a 200 body to the caller's feed, and catches any ERROR the feed
 * raises so that nothing longjmps through libcurl.
 *
 * Credentials come from credential.c (token, token file, exec plugin,
 * certificate files re-read when they change); TLS verification stays on
 * unless the server says insecure_skip_tls_verify; proxy-url and
 * impersonation headers are set here.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <curl/curl.h>
#include <json-c/json.h>

#include "access/xact.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "kw_common.h"
#include "kw_cluster.h"
#include "kw_http.h"

/* Largest response kw_http_get accepts (discovery, probes): 32 MB. */
#define KW_SYNC_BODY_MAX (32 * 1024 * 1024)
/* Total time a synchronous request may take. */
#define KW_SYNC_TIMEOUT_S 30

/*
 * The longest a request that is not a stream may take, in seconds
 * (CURLOPT_TIMEOUT): KW_SYNC_TIMEOUT_S, or the request sender's
 * kwatch.apply_send_timeout (sender.c sets it in its process).
 */
int			kw_http_sync_timeout_s = KW_SYNC_TIMEOUT_S;

/*
 * The first libcurl whose curl_easy_upkeep may be given a handle with a
 * transfer in progress on a multi handle: 8.22.0 (curl commit 7103a93b05,
 * "connections: use admin handles only for maintenance").  Before 8.10.0
 * it only walks the connections of curl_easy_perform, so it does nothing
 * for the worker's transfers; from 8.10.0 to 8.21 it attaches the handle
 * given to every pooled connection and detaches it, which would cut the
 * handle's own transfer from its connection.
 */
#define KW_CURL_UPKEEP_ON_MULTI 0x081600

static bool curl_initialized = false;
static bool curl_upkeep_on_multi = false;

StaticAssertDecl(CURLE_OK == KW_HTTP_TRANSFER_OK,
				 "KW_HTTP_TRANSFER_OK is libcurl's CURLE_OK");

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
	curl_upkeep_on_multi =
		curl_version_info(CURLVERSION_NOW)->version_num >= KW_CURL_UPKEEP_ON_MULTI;
	curl_initialized = true;
}

/*
 * sockopt_cb: libcurl's CURLOPT_SOCKOPTFUNCTION for every connection: TCP
 * keepalive probes after kwatch.health_check_interval of silence, a third
 * of kwatch.health_check_timeout apart, and TCP_USER_TIMEOUT (RFC 5482;
 * Linux tcp(7)), so that the kernel closes the connection once its peer
 * has answered nothing -- no probe, no data, no acknowledgement of what
 * was sent -- for health_check_interval + health_check_timeout (45 s by
 * default).  That is what tells a dead peer (host gone, packets dropped)
 * from a quiet watch, where probes are answered; client-go's dialer keeps
 * TCP keepalive on for the same reason (k8s.io/apimachinery util/net).
 * With TCP_USER_TIMEOUT the keepalive count no longer decides (tcp(7)); it
 * is set for systems without it.  A failed setsockopt leaves the system's
 * defaults: never a reason to refuse the connection.
 */
static int
sockopt_cb(void *clientp, curl_socket_t fd, curlsocktype purpose)
{
	int			intvl = Max(1, kw_health_check_timeout_s / 3);
	int			cnt = Max(1, (kw_health_check_timeout_s + intvl - 1) / intvl);

	if (purpose != CURLSOCKTYPE_IPCXN)
		return CURL_SOCKOPT_OK;
	(void) setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
#ifdef TCP_KEEPCNT
	(void) setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
#endif
#ifdef TCP_USER_TIMEOUT
	{
		unsigned int ms = (unsigned int) (kw_health_check_interval_s +
										  kw_health_check_timeout_s) * 1000;

		(void) setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof(ms));
	}
#endif
	return CURL_SOCKOPT_OK;
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
set_tls_server_name(KwHttpTransfer *h, const char *url, const char *name)
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
 * set_tls: verification and client credentials.  Files (CA bundle, client
 * certificate and key) are read through credential.c's cache and handed to
 * libcurl as blobs, so a rotated file is used by the next request; an exec
 * plugin's certificate wins over the configured one (client-go exec.go
 * UpdateTransportConfig).
 */
static void
set_tls(KwHttpTransfer *t, KwClusterConfig *cfg, KwCredential *cred,
		const char *url)
{
	CURL	   *easy = (CURL *) t->easy;

	if (cfg->insecure_skip_tls_verify)
	{
		curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (cfg->ca_data)
		set_blob(easy, CURLOPT_CAINFO_BLOB, cfg->ca_data);
	else if (cfg->ca_file)
		set_blob(easy, CURLOPT_CAINFO_BLOB,
				 kw_credential_file(cfg->ca_file, "CA file", false));
	if (cred->client_cert_data && cred->client_key_data)
	{
		set_blob(easy, CURLOPT_SSLCERT_BLOB, cred->client_cert_data);
		set_blob(easy, CURLOPT_SSLKEY_BLOB, cred->client_key_data);
	}
	else
	{
		if (cfg->client_cert_data)
			set_blob(easy, CURLOPT_SSLCERT_BLOB, cfg->client_cert_data);
		else if (cfg->client_cert_file)
			set_blob(easy, CURLOPT_SSLCERT_BLOB,
					 kw_credential_file(cfg->client_cert_file, "client certificate file", false));
		if (cfg->client_key_data)
			set_blob(easy, CURLOPT_SSLKEY_BLOB, cfg->client_key_data);
		else if (cfg->client_key_file)
			set_blob(easy, CURLOPT_SSLKEY_BLOB,
					 kw_credential_file(cfg->client_key_file, "client key file", false));
	}
	if (cfg->client_cert_data || cfg->client_cert_file || cred->client_cert_data)
		curl_easy_setopt(easy, CURLOPT_SSLCERTTYPE, "PEM");
	if (cfg->tls_server_name)
		set_tls_server_name(t, url, cfg->tls_server_name);
}

/*
 * set_proxy: the cluster's proxy-url (http, https or socks5: client-go
 * rest.Config.Proxy; socks5 resolves host names through the proxy, as
 * golang.org/x/net/proxy does), or none at all: without proxy-url kwatch
 * ignores the http_proxy/https_proxy environment of the PostgreSQL server,
 * as a kubeconfig's proxy-url overrides it in client-go.
 */
static void
set_proxy(CURL *easy, KwClusterConfig *cfg)
{
	if (cfg->proxy_url == NULL)
	{
		curl_easy_setopt(easy, CURLOPT_PROXY, "");
		return;
	}
	if (pg_strncasecmp(cfg->proxy_url, "socks5://", 9) == 0)
	{
		char	   *p = psprintf("socks5h://%s", cfg->proxy_url + 9);

		curl_easy_setopt(easy, CURLOPT_PROXY, p);
		pfree(p);
	}
	else
		curl_easy_setopt(easy, CURLOPT_PROXY, cfg->proxy_url);
	/* an https proxy is verified against the cluster's CA like the server */
	if (pg_strncasecmp(cfg->proxy_url, "https://", 8) == 0)
	{
		if (cfg->insecure_skip_tls_verify)
		{
			curl_easy_setopt(easy, CURLOPT_PROXY_SSL_VERIFYPEER, 0L);
			curl_easy_setopt(easy, CURLOPT_PROXY_SSL_VERIFYHOST, 0L);
		}
		if (cfg->ca_data)
			set_blob(easy, CURLOPT_PROXY_CAINFO_BLOB, cfg->ca_data);
		else if (cfg->ca_file)
			set_blob(easy, CURLOPT_PROXY_CAINFO_BLOB,
					 kw_credential_file(cfg->ca_file, "CA file", false));
	}
}

/* add_header: "name: value" appended to the transfer's headers. */
static void
add_header(KwHttpTransfer *t, const char *name, const char *value)
{
	char	   *h = psprintf("%s: %s", name, value);

	t->headers = curl_slist_append(t->headers, h);
	explicit_bzero(h, strlen(h));
	pfree(h);
}

/*
 * set_headers: Accept, the bearer token, and impersonation (client-go
 * transport/round_trippers.go impersonatingRoundTripper: Impersonate-User,
 * Impersonate-Uid, one Impersonate-Group per group, one
 * Impersonate-Extra-<key> per value, the key percent-encoded).
 */
static void
set_headers(KwHttpTransfer *t, KwClusterConfig *cfg, KwCredential *cred)
{
	ListCell   *lc;

	t->headers = curl_slist_append(NULL, "Accept: application/json");
	if (cred->token)
		add_header(t, "Authorization", psprintf("Bearer %s", cred->token));
	if (cfg->as_user)
		add_header(t, "Impersonate-User", cfg->as_user);
	if (cfg->as_uid)
		add_header(t, "Impersonate-Uid", cfg->as_uid);
	foreach(lc, cfg->as_groups)
		add_header(t, "Impersonate-Group", (char *) lfirst(lc));
	foreach(lc, cfg->as_extra)
	{
		KwKeyValue *kv = (KwKeyValue *) lfirst(lc);
		StringInfoData name;

		initStringInfo(&name);
		appendStringInfoString(&name, "Impersonate-Extra-");
		for (const unsigned char *p = (const unsigned char *) kv->key; *p; p++)
		{
			if (kw_ascii_alnum(*p) || *p == '-' || *p == '.' || *p == '_' || *p == '~')
				appendStringInfoChar(&name, *p);
			else
				appendStringInfo(&name, "%%%02X", *p);
		}
		add_header(t, name.data, kv->value);
	}
	curl_easy_setopt((CURL *) t->easy, CURLOPT_HTTPHEADER, t->headers);
}

/*
 * transfer_write_cb: libcurl's write callback for every transfer.  Notes
 * the status when the first bytes arrive; keeps the start of a non-200 body
 * for the error message (KW_HTTP_ERRBODY_MAX); hands a 200 body to the
 * transfer's feed.  libcurl forbids a longjmp through its callbacks, so an
 * ERROR raised by the feed (out of memory, a limit of PostgreSQL's, an
 * injected one) is caught here, kept in t->caught and t->stop_reason, and
 * ends the transfer (returning 0 makes libcurl fail it with
 * CURLE_WRITE_ERROR).  The feed never holds a transaction, lock or buffer,
 * so nothing needs aborting.
 */
static size_t
transfer_write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	KwHttpTransfer *t = (KwHttpTransfer *) userdata;
	size_t		n = size * nmemb;
	MemoryContext old;
	char	   *volatile error = NULL;
	volatile KwFeedResult r = KW_FEED_STOP;

	t->last_data = GetCurrentTimestamp();
	if (t->status == 0)
		curl_easy_getinfo((CURL *) t->easy, CURLINFO_RESPONSE_CODE, &t->status);
	if (t->status < 200 || t->status > 299)
	{
		if (t->errbody.len < KW_HTTP_ERRBODY_MAX)
			appendBinaryStringInfo(&t->errbody, ptr,
								   Min(n, (size_t) (KW_HTTP_ERRBODY_MAX - t->errbody.len)));
		return n;
	}
	if (t->stop_reason || t->caught)
		return 0;

	old = CurrentMemoryContext;
	PG_TRY();
	{
		MemoryContextSwitchTo(t->feed_cxt);
		r = t->feed(t->feed_arg, ptr, n, (char **) &error);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(t->cxt);
		t->caught = CopyErrorData();
		FlushErrorState();
		error = psprintf("ERROR while decoding: %s", t->caught->message);
		r = KW_FEED_STOP;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);

	switch (r)
	{
		case KW_FEED_CONTINUE:
			return n;
		case KW_FEED_PAUSE:
			t->paused = true;
			return CURL_WRITEFUNC_PAUSE;
		case KW_FEED_STOP:
			if (error)
				t->stop_reason = MemoryContextStrdup(t->cxt, error);
			else if (t->stop_reason == NULL)
				t->stop_reason = MemoryContextStrdup(t->cxt, "stopped by its consumer");
			break;
	}
	return 0;
}

/*
 * kw_http_transfer_create: a configured GET of `url` on the cluster `cfg`,
 * not yet started: the caller runs it, on a curl multi handle
 * (kw_http_transfer_attach) or with curl_easy_perform.  A 200 body
 * goes to `feed(feed_arg, ...)` called in `feed_cxt` (see KwHttpFeed); any
 * other body is kept in t->errbody.  `stream` transfers (LIST pages and
 * WATCH) have no overall timeout.  The transfer is palloc'd in the current
 * context; its curl parts are freed by kw_http_transfer_destroy (or
 * kw_http_transfer_release, which frees nothing palloc'd).
 * ERRORs when the credentials can't be had (an unreadable token file, an
 * exec plugin that failed: credential.c) or libcurl can't make a handle.
 */
KwHttpTransfer *
kw_http_transfer_create(KwClusterConfig *cfg, const char *url, bool stream,
						KwHttpFeed feed, void *feed_arg, MemoryContext feed_cxt)
{
	KwHttpTransfer *t;
	CURL	   *easy;
	KwCredential *cred;

	kw_http_global_init();
	cred = kw_credential_get(cfg);

	t = palloc0(sizeof(KwHttpTransfer));
	t->cxt = CurrentMemoryContext;
	t->server_name = cfg->server_name ? pstrdup(cfg->server_name) : pstrdup(cfg->api_server);
	initStringInfo(&t->errbody);
	t->feed = feed;
	t->feed_arg = feed_arg;
	t->feed_cxt = feed_cxt ? feed_cxt : CurrentMemoryContext;
	t->last_data = GetCurrentTimestamp();
	easy = curl_easy_init();
	if (easy == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("could not create a libcurl handle")));
	t->easy = easy;

	curl_easy_setopt(easy, CURLOPT_URL, url);
	curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, t->errbuf);
	curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
#if LIBCURL_VERSION_NUM >= 0x075700
	/*
	 * A name lookup given up (CURLOPT_CONNECTTIMEOUT covers resolving) must
	 * not be waited for: without CURLOPT_QUICK_EXIT (libcurl 7.87.0) the
	 * threaded resolver joins its lookup thread when the transfer ends
	 * (lib/asyn-thread.c, Curl_resolver_kill), so a lookup that stalls
	 * (a nameserver that never answers: resolv.conf(5) timeout x attempts)
	 * held the worker's loop, and every other server's watches, or the
	 * backend registering a watch, until getaddrinfo returned.  With it the
	 * thread is detached and frees itself when the lookup ends
	 * (test_fleet.py, test_one_cluster_never_holds_up_the_fleet).
	 */
	curl_easy_setopt(easy, CURLOPT_QUICK_EXIT, 1L);
#endif
	curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, transfer_write_cb);
	curl_easy_setopt(easy, CURLOPT_WRITEDATA, t);
	/* PROTOCOL 37: our own agent; curl's would get pretty-printed JSON. */
	curl_easy_setopt(easy, CURLOPT_USERAGENT, KWATCH_USER_AGENT);
	curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT, (long) kw_connect_timeout_s);
	/* PROTOCOL 26: keepalive probes find half-open connections (sockopt_cb). */
	curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(easy, CURLOPT_TCP_KEEPIDLE, (long) kw_health_check_interval_s);
	curl_easy_setopt(easy, CURLOPT_TCP_KEEPINTVL, (long) Max(1, kw_health_check_timeout_s / 3));
	curl_easy_setopt(easy, CURLOPT_SOCKOPTFUNCTION, sockopt_cb);
	/* HTTP/2 PINGs on a silent connection (kw_http_transfer_upkeep) */
	curl_easy_setopt(easy, CURLOPT_UPKEEP_INTERVAL_MS, (long) kw_health_check_interval_s * 1000L);
	curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "https,http");
	curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, (long) CURL_HTTP_VERSION_2TLS);
	/*
	 * PROTOCOL 36: a server's watches share HTTP/2 connections, as
	 * client-go's do.  Without PIPEWAIT the watches a registration starts
	 * at once each opened a connection of their own (4 watches of one
	 * server: 4 connections, test/bench/fleet.py), because none had
	 * learned yet that the first one multiplexes; with it a transfer waits
	 * for a connection being set up to say so.  libcurl opens another one
	 * once the server's SETTINGS_MAX_CONCURRENT_STREAMS are in use.
	 */
	curl_easy_setopt(easy, CURLOPT_PIPEWAIT, 1L);
	if (kw_http_compression)
		curl_easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, "gzip");
	if (!stream)
		curl_easy_setopt(easy, CURLOPT_TIMEOUT, (long) kw_http_sync_timeout_s);

	set_tls(t, cfg, cred, url);
	set_proxy(easy, cfg);
	set_headers(t, cfg, cred);
	return t;
}

/*
 * kw_http_transfer_attach: starts transfer `t` on the libcurl multi handle
 * `multi` (a CURLM *: the worker's, which its event loop drives) on behalf
 * of `owner`, which kw_http_transfer_owner(t) and kw_http_owner_of(easy)
 * return from then on, so that the loop can hand a finished transfer back
 * to its owner.  The owner is kept as the easy handle's CURLOPT_PRIVATE
 * (what kw_http_owner_of reads).  ERRCODE_OUT_OF_MEMORY when libcurl runs
 * out of memory, ERRCODE_INTERNAL_ERROR when it refuses the handle
 * otherwise (already attached).
 */
void
kw_http_transfer_attach(void *multi, KwHttpTransfer *t, void *owner)
{
	CURL	   *easy = (CURL *) t->easy;
	CURLMcode	rc;

	t->owner = owner;
	curl_easy_setopt(easy, CURLOPT_PRIVATE, owner);
	rc = curl_multi_add_handle((CURLM *) multi, easy);
	if (rc != CURLM_OK)
		ereport(ERROR,
				(errcode(rc == CURLM_OUT_OF_MEMORY ? ERRCODE_OUT_OF_MEMORY :
						 ERRCODE_INTERNAL_ERROR),
				 errmsg("could not start a request with libcurl"),
				 errdetail("%s", curl_multi_strerror(rc))));
}

/*
 * kw_http_transfer_detach: takes transfer `t` off the multi handle `multi`
 * (stopping it if it was still running) and forgets its owner; the caller
 * frees it afterwards (kw_http_transfer_destroy).  Safe on a transfer that
 * was never attached, or already detached.  Never raises an error.
 */
void
kw_http_transfer_detach(void *multi, KwHttpTransfer *t)
{
	if (t->easy)
	{
		curl_multi_remove_handle((CURLM *) multi, (CURL *) t->easy);
		curl_easy_setopt((CURL *) t->easy, CURLOPT_PRIVATE, NULL);
	}
	t->owner = NULL;
}

/*
 * kw_http_multi_create: an empty set of transfers driven together (a
 * libcurl multi handle), for a backend that runs its own (live_scan.c);
 * the worker's is worker.c's.  Freed by kw_http_multi_destroy, not by
 * memory context cleanup.  ERRCODE_OUT_OF_MEMORY when libcurl can't make
 * one.
 */
void *
kw_http_multi_create(void)
{
	CURLM	   *multi;

	kw_http_global_init();
	multi = curl_multi_init();
	if (multi == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("could not create a libcurl multi handle")));
	return multi;
}

/*
 * kw_http_multi_destroy: frees a multi handle of kw_http_multi_create
 * (detach its transfers first).  Allocates nothing, so it is safe in a
 * memory context reset callback.  Accepts NULL.
 */
void
kw_http_multi_destroy(void *multi)
{
	if (multi)
		curl_multi_cleanup((CURLM *) multi);
}

/*
 * kw_http_multi_finished: calls done(owner, result) for each transfer on
 * `multi` that finished since the last call (curl_multi_info_read), with
 * the owner it was attached for and `result` KW_HTTP_TRANSFER_OK or the
 * failure for kw_http_transport_error.  For whatever drives the multi
 * handle (kw_http_multi_run here; the worker's socket actions).  Raises no
 * error of its own.
 */
void
kw_http_multi_finished(void *multi, KwHttpDone done)
{
	int			left;
	CURLMsg    *msg;

	while ((msg = curl_multi_info_read((CURLM *) multi, &left)) != NULL)
		if (msg->msg == CURLMSG_DONE)
			done(kw_http_owner_of(msg->easy_handle), (int) msg->data.result);
}

/*
 * kw_http_multi_run: lets libcurl do, without waiting, what the transfers
 * on `multi` can do now (curl_multi_perform: a feed may run), then reports
 * the finished ones (kw_http_multi_finished).  Raises no error of its own;
 * an ERROR a feed raised is kept in the transfer (t->caught) for the
 * caller.
 */
void
kw_http_multi_run(void *multi, KwHttpDone done)
{
	int			running = 0;

	curl_multi_perform((CURLM *) multi, &running);
	kw_http_multi_finished(multi, done);
}

/*
 * kw_http_multi_wait: waits at most timeout_ms for something to do on the
 * transfers of `multi` (curl_multi_wait), not for the latch: callers poll
 * in short steps and CHECK_FOR_INTERRUPTS() in between.  Never raises an
 * error.
 */
void
kw_http_multi_wait(void *multi, int timeout_ms)
{
	int			numfds;

	curl_multi_wait((CURLM *) multi, NULL, 0, timeout_ms, &numfds);
}

/*
 * kw_http_transfer_owner: the owner `t` was attached for, or NULL when it is
 * not attached.
 */
void *
kw_http_transfer_owner(KwHttpTransfer *t)
{
	return t->owner;
}

/*
 * kw_http_owner_of: the owner of the transfer whose libcurl easy handle is
 * `easy` (a CURL *, as a multi handle reports a finished transfer), or NULL
 * when it is not attached (kw_http_transfer_attach).
 */
void *
kw_http_owner_of(void *easy)
{
	void	   *owner = NULL;

	curl_easy_getinfo((CURL *) easy, CURLINFO_PRIVATE, (char **) &owner);
	return owner;
}

/*
 * kw_http_transfer_resume: lets a transfer paused by its feed
 * (KW_FEED_PAUSE) deliver again; the paused chunk is offered first.
 */
void
kw_http_transfer_resume(KwHttpTransfer *t)
{
	if (t->paused)
	{
		t->paused = false;
		t->last_data = GetCurrentTimestamp();
		curl_easy_pause((CURL *) t->easy, CURLPAUSE_CONT);
	}
}

/*
 * kw_http_transfer_upkeep: connection upkeep for a transfer running on a
 * multi handle that has been silent for kwatch.health_check_interval: an
 * HTTP/2 PING on each connection of the handle's pool that has had none for
 * that long (CURLOPT_UPKEEP_INTERVAL_MS; client-go's ReadIdleTimeout), so
 * that a connection whose peer is gone has unacknowledged data and is
 * closed by TCP_USER_TIMEOUT (sockopt_cb), and idle timers of middleboxes
 * see traffic.  libcurl does not watch for the PING's answer, so
 * client-go's PingTimeout is the kernel's here.  Does nothing with a
 * libcurl older than KW_CURL_UPKEEP_ON_MULTI, where TCP keepalive alone
 * probes the peer.  Never ERRORs.
 */
void
kw_http_transfer_upkeep(KwHttpTransfer *t)
{
	if (curl_upkeep_on_multi && t != NULL && t->easy != NULL)
		(void) curl_easy_upkeep((CURL *) t->easy);
}

/* kw_http_transfer_status: the HTTP status, 0 when none was received. */
long
kw_http_transfer_status(KwHttpTransfer *t)
{
	if (t->status == 0)
		curl_easy_getinfo((CURL *) t->easy, CURLINFO_RESPONSE_CODE, &t->status);
	return t->status;
}

/*
 * kw_http_transfer_retry_after: the response's Retry-After in seconds
 * (PROTOCOL 10), or -1 when absent.
 */
int
kw_http_transfer_retry_after(KwHttpTransfer *t)
{
	curl_off_t	ra = -1;

	if (curl_easy_getinfo((CURL *) t->easy, CURLINFO_RETRY_AFTER, &ra) != CURLE_OK ||
		ra <= 0)
		return -1;
	return (int) Min(ra, 3600);
}

/*
 * kw_http_transport_error: what went wrong with a transfer that libcurl
 * ended with `curlcode` (not CURLE_OK): returns a short palloc'd message
 * ("TLS handshake failed: <libcurl's words>"), with libcurl's own detailed
 * message in *detail, the SQLSTATE in *sqlstate and, for TLS failures, a
 * hint in *hint (NULL when there is none): the certificate authority, an
 * expired certificate, a host name the certificate does not name
 * (kubeconfig tls-server-name, client-go rest.TLSClientConfig.ServerName),
 * a client certificate or key that can't be used.
 */
char *
kw_http_transport_error(KwHttpTransfer *t, int curlcode, int *sqlstate,
						char **detail, char **hint)
{
	const char *d = t->errbuf[0] ? t->errbuf : curl_easy_strerror((CURLcode) curlcode);
	bool		tls = false;

	*sqlstate = kw_http_curl_sqlstate(curlcode);
	*detail = pstrdup(d);
	*hint = NULL;
	switch ((CURLcode) curlcode)
	{
		case CURLE_PEER_FAILED_VERIFICATION:
		case CURLE_SSL_CONNECT_ERROR:
		case CURLE_SSL_CACERT_BADFILE:
		case CURLE_SSL_CERTPROBLEM:
		case CURLE_SSL_CIPHER:
			tls = true;
			if (strstr(d, "expired"))
				*hint = pstrdup("The API server's certificate has expired (or the machine's clock is wrong).");
			else if (strstr(d, "subject name") || strstr(d, "host name") ||
					 strstr(d, "hostname"))
				*hint = pstrdup("The API server's certificate does not name the host kwatch connects to; set tls-server-name in the kubeconfig (or the server option tls_server_name) to a name the certificate holds.");
			else if (strstr(d, "issuer") || strstr(d, "self-signed") ||
					 strstr(d, "self signed") || strstr(d, "CA"))
				*hint = pstrdup("The API server's certificate is not signed by the configured certificate authority; check certificate-authority(-data) in the kubeconfig or the server option certificate_authority.");
			else if ((CURLcode) curlcode == CURLE_SSL_CERTPROBLEM)
				*hint = pstrdup("The client certificate or key could not be used; check client-certificate and client-key.");
			break;
		default:
			break;
	}
	if (tls)
		return psprintf("TLS handshake failed: %s", d);
	return pstrdup(curl_easy_strerror((CURLcode) curlcode));
}

/*
 * kw_http_transfer_release: frees the transfer's libcurl parts (the caller
 * removed it from any multi handle first) but no palloc'd memory, so it is
 * safe in a memory context reset callback.  Safe to call twice.
 */
void
kw_http_transfer_release(KwHttpTransfer *t)
{
	if (t == NULL)
		return;
	if (t->easy)
		curl_easy_cleanup((CURL *) t->easy);
	if (t->headers)
		curl_slist_free_all(t->headers);
	if (t->connect_to)
		curl_slist_free_all(t->connect_to);
	t->easy = NULL;
	t->headers = NULL;
	t->connect_to = NULL;
}

/*
 * kw_http_transfer_destroy: kw_http_transfer_release, then frees the
 * transfer.  Accepts NULL.
 */
void
kw_http_transfer_destroy(KwHttpTransfer *t)
{
	if (t == NULL)
		return;
	kw_http_transfer_release(t);
	if (t->errbody.data)
		pfree(t->errbody.data);
	pfree(t);
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

/* feed of kw_http_get: the whole body, up to KW_SYNC_BODY_MAX. */
static KwFeedResult
sync_feed(void *arg, const char *data, size_t len, char **error)
{
	StringInfo	buf = (StringInfo) arg;

	if (buf->len + len > KW_SYNC_BODY_MAX)
	{
		*error = psprintf("response is larger than %d MB",
						  KW_SYNC_BODY_MAX / (1024 * 1024));
		return KW_FEED_STOP;
	}
	appendBinaryStringInfo(buf, data, len);
	return KW_FEED_CONTINUE;
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
 * synchronously, filling `resp` (body palloc'd in the current context; for
 * a non-200 status its first KW_HTTP_ERRBODY_MAX bytes).  Any HTTP status
 * is returned, not raised; transport failures (refused, TLS, timeout) ERROR
 * with the SQLSTATE and hint of kw_http_transport_error.  Query cancel
 * interrupts the request.  After a 401, retries once with the credential
 * obtained again when it can be (token file, exec plugin: PROTOCOL 33).
 */
void
kw_http_get(KwClusterConfig *cfg, const char *path, KwHttpResponse *resp)
{
	kw_http_get_accept(cfg, path, NULL, resp);
}

/*
 * set_accept: replaces the transfer's Accept header (the first one
 * set_headers made, "application/json") with "Accept: `accept`".
 */
static void
set_accept(KwHttpTransfer *t, const char *accept)
{
	struct curl_slist *h = curl_slist_append(NULL, psprintf("Accept: %s", accept));

	for (struct curl_slist *p = t->headers ? t->headers->next : NULL; p; p = p->next)
		h = curl_slist_append(h, p->data);
	curl_slist_free_all(t->headers);
	t->headers = h;
	curl_easy_setopt((CURL *) t->easy, CURLOPT_HTTPHEADER, h);
}

/*
 * kw_http_get_accept: kw_http_get with the request's Accept header
 * `accept` (a media type list such as aggregated discovery's
 * "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,
 * application/json"); NULL: application/json.  Same results and errors as
 * kw_http_get.
 */
void
kw_http_get_accept(KwClusterConfig *cfg, const char *path, const char *accept,
				   KwHttpResponse *resp)
{
	kw_http_request(cfg, "GET", path, accept, NULL, NULL, resp);
}

/*
 * Connections kept between requests of one process (kw_http_keep_connections):
 * a libcurl share of its connection cache and TLS sessions.  The process is
 * single-threaded, so the share needs no lock callbacks.
 */
static CURLSH *sync_share = NULL;

/*
 * kw_http_keep_connections: from now on the requests of kw_http_request in
 * this process reuse their connections (keep-alive, TLS sessions) instead
 * of one connection each; libcurl reuses a connection only for the same
 * host, port, proxy and TLS settings (client certificate included), and
 * every request carries its own Authorization.  Called by the request
 * sender, which sends many requests to few servers.  ERRORs 53200 when
 * libcurl cannot make the share.
 */
void
kw_http_keep_connections(void)
{
	if (sync_share != NULL)
		return;
	kw_http_global_init();
	sync_share = curl_share_init();
	if (sync_share == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("could not create a libcurl share")));
	curl_share_setopt(sync_share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
	curl_share_setopt(sync_share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
	curl_share_setopt(sync_share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
}

/*
 * Servers found unreachable in the current transaction: a blocking request
 * that failed to resolve the host, to connect, or timed out (a listener
 * that accepts and never answers stalls the TLS handshake until the
 * connect timeout).  Later requests of the same transaction to such a
 * server fail at once with the same error instead of waiting again, so a
 * statement that registers watches on many servers waits for each server
 * that is down once at most (kwatch.watch() over a fleet); and
 * kwatch.watch() registers a watch of such a server from what kwatch
 * already knows (discovery.c).  Names in TopTransactionContext; forgotten
 * at the transaction's end.
 */
typedef struct UnreachableServer
{
	char	   *name;
	char	   *message;		/* the error's message, DETAIL and SQLSTATE */
	char	   *detail;
	int			sqlstate;
} UnreachableServer;

static List *unreachable = NIL;
static bool unreachable_callback = false;

static void
unreachable_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_PREPARE)
		unreachable = NIL;
}

/* find_unreachable: the memo's entry of server `name`, or NULL. */
static UnreachableServer *
find_unreachable(const char *name)
{
	ListCell   *lc;

	if (name == NULL)
		return NULL;
	foreach(lc, unreachable)
	{
		UnreachableServer *u = (UnreachableServer *) lfirst(lc);

		if (strcmp(u->name, name) == 0)
			return u;
	}
	return NULL;
}

/* note_unreachable: remembers server `name` as unreachable (see above). */
static void
note_unreachable(const char *name, int curlcode, int sqlstate, const char *message,
				 const char *detail)
{
	MemoryContext old;
	UnreachableServer *u;

	if (name == NULL || !IsTransactionState() || find_unreachable(name) != NULL ||
		!(curlcode == CURLE_COULDNT_RESOLVE_HOST || curlcode == CURLE_COULDNT_CONNECT ||
		  curlcode == CURLE_OPERATION_TIMEDOUT))
		return;
	if (!unreachable_callback)
	{
		RegisterXactCallback(unreachable_xact_callback, NULL);
		unreachable_callback = true;
	}
	old = MemoryContextSwitchTo(TopTransactionContext);
	u = palloc(sizeof(UnreachableServer));
	u->name = pstrdup(name);
	u->message = pstrdup(message);
	u->detail = pstrdup(detail);
	u->sqlstate = sqlstate;
	unreachable = lappend(unreachable, u);
	MemoryContextSwitchTo(old);
}

/*
 * kw_http_server_unreachable: whether a request of this transaction to the
 * foreign server `name` failed to resolve its host, to connect, or timed
 * out (see above).
 */
bool
kw_http_server_unreachable(const char *name)
{
	return find_unreachable(name) != NULL;
}

/*
 * kw_http_request: one request `method` ("GET", "PATCH", "POST", "DELETE")
 * of `path` to cfg's API server, with `body` (NULL: none) of media type
 * `content_type` (e.g. "application/apply-patch+yaml" for server-side
 * apply, "application/merge-patch+json"), read whole into resp (a 2xx body
 * through sync_feed, any other status's first KW_HTTP_ERRBODY_MAX bytes).
 * `accept` as kw_http_get_accept.  Same results and errors as kw_http_get
 * (a transport failure ERRORs, an HTTP status is the caller's to judge),
 * the 401 retry included: the request carries its body again.
 */
void
kw_http_request(KwClusterConfig *cfg, const char *method, const char *path,
				const char *accept, const char *content_type, const char *body,
				KwHttpResponse *resp)
{
	UnreachableServer *down = find_unreachable(cfg->server_name);

	if (down != NULL)
		ereport(ERROR,
				(errcode(down->sqlstate),
				 errmsg("%s", down->message),
				 errdetail("%s (an earlier request of this transaction; not sent again)", down->detail)));
	for (int attempt = 0; attempt < 2; attempt++)
	{
		KwHttpTransfer *volatile t = NULL;
		char	   *url = psprintf("%s%s", cfg->api_server, path);
		volatile TimestampTz started = 0;

		memset(resp, 0, sizeof(*resp));
		initStringInfo(&resp->body);
		resp->retry_after_s = -1;

		PG_TRY();
		{
			CURL	   *easy;
			CURLcode	rc;

			t = kw_http_transfer_create(cfg, url, false, sync_feed, &resp->body, NULL);
			if (accept)
				set_accept(t, accept);
			if (sync_share != NULL)
				curl_easy_setopt((CURL *) t->easy, CURLOPT_SHARE, sync_share);
			if (strcmp(method, "GET") != 0)
			{
				curl_easy_setopt((CURL *) t->easy, CURLOPT_CUSTOMREQUEST, method);
				if (body != NULL)
				{
					t->headers = curl_slist_append(t->headers,
												   psprintf("Content-Type: %s", content_type));
					curl_easy_setopt((CURL *) t->easy, CURLOPT_HTTPHEADER, t->headers);
					curl_easy_setopt((CURL *) t->easy, CURLOPT_POSTFIELDSIZE, (long) strlen(body));
					curl_easy_setopt((CURL *) t->easy, CURLOPT_POSTFIELDS, body);
				}
			}
			/* after the credential was obtained (by the transfer's headers) */
			started = GetCurrentTimestamp();
			easy = (CURL *) t->easy;
			curl_easy_setopt(easy, CURLOPT_NOPROGRESS, 0L);
			curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, sync_progress_cb);

			rc = curl_easy_perform(easy);
			CHECK_FOR_INTERRUPTS();
			if (t->caught)
				ReThrowError(t->caught);
			if (t->stop_reason)
				ereport(ERROR,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("response from %s: %s", kw_excerpt(url), t->stop_reason)));
			if (rc != CURLE_OK)
			{
				int			sqlstate;
				char	   *detail;
				char	   *hint;
				char	   *msg = kw_http_transport_error(t, rc, &sqlstate, &detail, &hint);

				note_unreachable(t->server_name, rc, sqlstate,
								 psprintf("could not reach Kubernetes API server of \"%s\": %s",
										  t->server_name, msg),
								 psprintf("%s (%s %s)", detail, method, kw_excerpt(url)));
				ereport(ERROR,
						(errcode(sqlstate),
						 errmsg("could not reach Kubernetes API server of \"%s\": %s",
								t->server_name, msg),
						 errdetail("%s (%s %s)", detail, method, kw_excerpt(url)),
						 hint ? errhint("%s", hint) : 0));
			}
			resp->status = kw_http_transfer_status(t);
			resp->retry_after_s = kw_http_transfer_retry_after(t);
			if (resp->status < 200 || resp->status > 299)
				appendBinaryStringInfo(&resp->body, t->errbody.data, t->errbody.len);
		}
		PG_FINALLY();
		{
			kw_http_transfer_destroy(t);
		}
		PG_END_TRY();

		if (resp->status != 401 || attempt == 1 || !kw_credential_can_refresh(cfg))
			return;
		kw_credential_rejected(cfg, started);
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
 * kw_excerpt: `s` for an error message that echoes it: a palloc'd copy of
 * at most KW_ECHO_MAX bytes, cut at a character boundary of the database
 * encoding and marked "... (N bytes, cut)" when longer; NULL stays NULL.
 * PostgreSQL itself bounds what it echoes the same way (a statement in
 * log_min_error_statement's context is whole, but parameters are cut by
 * log_parameter_max_length_on_error); a 200 KB label selector must not
 * become a 200 KB DETAIL, log line or last_error.
 */
char *
kw_excerpt(const char *s)
{
	size_t		len;
	int			keep;

	if (s == NULL)
		return NULL;
	len = strlen(s);
	if (len <= KW_ECHO_MAX)
		return pstrdup(s);
	keep = pg_mbcliplen(s, (int) len, KW_ECHO_MAX);
	return psprintf("%.*s... (%zu bytes, cut)", keep, s, len);
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

	/* the API server's message quotes the request (a bad selector, whole) */
	ereport(ERROR,
			(errcode(kw_http_status_sqlstate(resp->status)),
			 errmsg("Kubernetes API server of \"%s\" refused %s: %s",
					cfg->server_name ? cfg->server_name : cfg->api_server,
					kw_excerpt(what), kw_excerpt(msg)),
			 errdetail("HTTP status %ld%s%s.", resp->status,
					   reason ? ", reason " : "", reason ? kw_excerpt(reason) : ""),
			 resp->status == 401 ?
			 errhint("Check the token or client certificate of the server or its user mapping.") :
			 resp->status == 403 ?
			 errhint("The Kubernetes user needs the list and watch verbs on this resource (RBAC).") : 0));
}
