/*-------------------------------------------------------------------------
 *
 * live_scan.c
 *		A chunked LIST run inside a backend for a foreign scan: items are
 *		handed out as the framer cuts them from the response, pages follow
 *		`continue` tokens, and the backend stays interruptible throughout.
 *
 * PROTOCOL 3: each page is GET <path>?labelSelector=..&fieldSelector=..
 * &limit=n, the next one adds continue=<token> and repeats the selectors;
 * continue requests carry no resourceVersion.  PROTOCOL 5/6: the body is
 * framed by decode.c's LIST decoder, so memory never depends on the page's
 * size.
 *
 * Memory: the transfer is only driven when every item already framed has
 * been consumed; then the item context is reset.  So at most what one
 * kw_http_multi_run() delivers (a few socket reads) is buffered, whatever
 * the size of the list, and TCP flow control holds the server back while
 * the executor is busy elsewhere.
 *
 * Cancel: the transfer runs on a curl multi handle polled for at most
 * KW_LIVE_POLL_MS at a time, with CHECK_FOR_INTERRUPTS() between polls, so
 * statement_timeout and Ctrl-C end a LIST in flight within that time.  The
 * curl handles are freed by a reset callback of the scan's memory context,
 * which runs on ERROR too (the executor's query context is deleted at
 * abort), so an interrupted scan leaks nothing.
 *
 * Stalls: kwatch.inactivity_timeout bounds how long the scan waits without
 * receiving a byte (counted only while it waits, not while the executor
 * works on rows already delivered); kwatch.connect_timeout bounds connecting.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "kw_common.h"
#include "kw_cluster.h"
#include "kw_http.h"
#include "kw_decode.h"
#include "kw_fdw.h"

/* Longest wait for data before checking for interrupts. */
#define KW_LIVE_POLL_MS 100
/* PROTOCOL 10: retries of one page after 429/5xx with Retry-After. */
#define KW_LIVE_MAX_RETRIES 3
/* Longest Retry-After honoured inside a query, in seconds. */
#define KW_LIVE_MAX_RETRY_AFTER_S 10

typedef struct LiveItem
{
	char	   *json;
	int			len;
} LiveItem;

struct KwLiveScan
{
	KwClusterConfig *cfg;
	char	   *path;
	char	   *label_selector;
	char	   *field_selector;
	int			limit;
	char	   *what;			/* "pods", for messages */
	char	   *api_version;	/* "group/version" and kind of the objects */
	char	   *kind;
	MemoryContext cxt;			/* the scan's; its reset callback frees curl */
	MemoryContext item_cxt;		/* framed items not yet handed out */
	MemoryContextCallback cleanup;

	void	   *multi;			/* kw_http_multi_create */
	KwHttpTransfer *handle;		/* current page, NULL between pages */
	char	   *url;			/* of the current page */
	char	   *continue_token; /* of the current page, NULL for the first */
	int			retries;		/* of the current page */
	bool		token_reread;	/* after a 401, once (PROTOCOL 33) */
	TimestampTz page_started;
	KwListDecoder *dec;
	long		status;			/* HTTP status of the current page, 0 = unknown */
	char	   *decode_error;
	bool		transfer_done;
	int			result;			/* of the page's transfer (KwHttpDone) */
	bool		finished;
	TimestampTz waiting_since;	/* start of the current wait for bytes */

	LiveItem   *items;
	int			nitems;
	int			maxitems;
	int			next;

	int			pages;
	int64		total_items;
	char	   *list_rv;		/* first page's resourceVersion (PROTOCOL 4) */
};

/* Frees the curl parts; safe to call twice.  No palloc/pfree here. */
static void
free_curl(KwLiveScan *scan)
{
	if (scan->handle)
	{
		if (scan->multi)
			kw_http_transfer_detach(scan->multi, scan->handle);
		kw_http_transfer_release(scan->handle);
		scan->handle = NULL;
	}
	kw_http_multi_destroy(scan->multi);
	scan->multi = NULL;
}

static void
cleanup_callback(void *arg)
{
	free_curl((KwLiveScan *) arg);
}

/* Called by the LIST decoder for each framed item: queue a copy. */
static void
on_item(void *arg, KwListItem *item)
{
	KwLiveScan *scan = (KwLiveScan *) arg;
	LiveItem   *it;

	if (scan->nitems == scan->maxitems)
	{
		int			n = Max(16, scan->maxitems * 2);

		scan->items = scan->items ?
			repalloc(scan->items, sizeof(LiveItem) * n) :
			MemoryContextAlloc(scan->item_cxt, sizeof(LiveItem) * n);
		scan->maxitems = n;
	}
	it = &scan->items[scan->nitems++];
	it->json = MemoryContextAlloc(scan->item_cxt, item->json_len + 1);
	memcpy(it->json, item->json, item->json_len);
	it->json[item->json_len] = '\0';
	it->len = item->json_len;
}

/*
 * scan_feed: the transfer's consumer of a 200 body (KwHttpFeed): frames
 * LIST items into item_cxt.  An ERROR here (out of memory) is caught by
 * http.c and raised again by drive() once libcurl has returned.
 */
static KwFeedResult
scan_feed(void *arg, const char *data, size_t len, char **error)
{
	KwLiveScan *scan = (KwLiveScan *) arg;

	scan->waiting_since = GetCurrentTimestamp();
	if (!kw_list_decoder_feed(scan->dec, (char *) data, len, on_item, scan,
							  &scan->decode_error))
		return KW_FEED_STOP;
	return KW_FEED_CONTINUE;
}

/* start_page: sends the request for the next page (continue token or none). */
static void
start_page(KwLiveScan *scan, const char *continue_token)
{
	MemoryContext old = MemoryContextSwitchTo(scan->cxt);
	StringInfoData url;

	initStringInfo(&url);
	appendStringInfo(&url, "%s%s", scan->cfg->api_server,
					 kw_live_request_text(scan->path, scan->label_selector,
										  scan->field_selector, scan->limit,
										  true));
	if (continue_token)
		kw_url_append_param(&url, "continue", continue_token);
	scan->url = url.data;
	scan->continue_token = continue_token ? pstrdup(continue_token) : NULL;

	if (scan->dec)
		kw_list_decoder_free(scan->dec);
	scan->dec = kw_list_decoder_create(scan->api_version, scan->kind);
	scan->status = 0;
	scan->transfer_done = false;
	scan->result = KW_HTTP_TRANSFER_OK;

	elog(DEBUG1, "kwatch: live scan of %s: GET %s", scan->what, scan->url);
	scan->handle = kw_http_transfer_create(scan->cfg, scan->url, true,
										   scan_feed, scan, scan->cxt);
	/* after the credential was obtained (by the transfer's headers) */
	scan->page_started = GetCurrentTimestamp();
	kw_http_transfer_attach(scan->multi, scan->handle, scan);
	scan->pages++;
	scan->waiting_since = GetCurrentTimestamp();
	MemoryContextSwitchTo(old);
}

/* The request of the current page, for errcontext (path and query only). */
static const char *
request_of(KwLiveScan *scan)
{
	size_t		n = strlen(scan->cfg->api_server);

	return kw_excerpt(strncmp(scan->url, scan->cfg->api_server, n) == 0 ?
					  scan->url + n : scan->url);
}

/*
 * retry_page: whether the failed page should be requested again: once
 * after a 401 when the token comes from a file, re-read (PROTOCOL 33), and
 * up to KW_LIVE_MAX_RETRIES times after a 429 or 5xx carrying Retry-After,
 * waiting as told (at most KW_LIVE_MAX_RETRY_AFTER_S), interruptibly
 * (PROTOCOL 10).  A non-200 response delivered no items, so the same page
 * (same continue token) can simply be asked for again.
 */
static bool
retry_page(KwLiveScan *scan)
{
	int			ra = kw_http_transfer_retry_after(scan->handle);

	if (scan->status == 401 && kw_credential_can_refresh(scan->cfg) && !scan->token_reread)
	{
		scan->token_reread = true;
		kw_credential_rejected(scan->cfg, scan->page_started);
		return true;
	}
	if ((scan->status == 429 || (scan->status >= 500 && scan->status != 504)) &&
		scan->retries < KW_LIVE_MAX_RETRIES && ra > 0)
	{
		TimestampTz until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														Min(ra, KW_LIVE_MAX_RETRY_AFTER_S) * 1000);

		for (;;)
		{
			long		ms = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), until);

			if (ms <= 0)
				break;
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 ms, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
		scan->retries++;
		return true;
	}
	return false;
}

/* end_transfer: takes the page's transfer off the multi handle, frees it. */
static void
end_transfer(KwLiveScan *scan)
{
	kw_http_transfer_detach(scan->multi, scan->handle);
	kw_http_transfer_destroy(scan->handle);
	scan->handle = NULL;
}

/*
 * finish_page: after a page's transfer ended: raise what went wrong, or
 * start the next page, or mark the list finished.
 */
static void
finish_page(KwLiveScan *scan)
{
	char	   *rv = NULL,
			   *cont = NULL,
			   *error = NULL;
	int			rc = scan->result;
	MemoryContext old;

	if (scan->decode_error)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
				 errmsg("malformed LIST response for %s from server \"%s\": %s",
						scan->what, scan->cfg->server_name, scan->decode_error),
				 errcontext("GET %s", request_of(scan))));
	if (rc != KW_HTTP_TRANSFER_OK)
	{
		int			sqlstate;
		char	   *detail;
		char	   *hint;
		char	   *msg = kw_http_transport_error(scan->handle, rc, &sqlstate,
												  &detail, &hint);

		ereport(ERROR,
				(errcode(sqlstate),
				 errmsg("could not list %s on server \"%s\": %s",
						scan->what, scan->cfg->server_name, msg),
				 errdetail("%s", detail),
				 hint ? errhint("%s", hint) : 0,
				 errcontext("GET %s", request_of(scan))));
	}
	if (scan->status != 200 && retry_page(scan))
	{
		char	   *retry_token = scan->continue_token;
		int			retries = scan->retries;

		end_transfer(scan);
		start_page(scan, retry_token);
		scan->retries = retries;
		return;
	}
	if (scan->status != 200)
	{
		char	   *reason;
		char	   *msg = kw_status_message(scan->handle->errbody.data,
											scan->handle->errbody.len, &reason);

		ereport(ERROR,
				(errcode(kw_http_status_sqlstate(scan->status)),
				 errmsg("could not list %s on server \"%s\": HTTP %ld%s%s",
						scan->what, scan->cfg->server_name, scan->status,
						reason ? " " : "", reason ? reason : ""),
				 errdetail("%s", kw_excerpt(msg)),
				 scan->status == 401 ?
				 errhint("Check the token or client certificate of the server or its user mapping.") :
				 scan->status == 403 ?
				 errhint("The Kubernetes user needs the list verb on this resource (RBAC).") :
				 scan->status == 410 ?
				 errhint("The list took longer than the API server keeps its snapshot; run the query again.") : 0,
				 errcontext("GET %s", request_of(scan))));
	}
	old = MemoryContextSwitchTo(scan->cxt);
	if (!kw_list_decoder_finish(scan->dec, &rv, &cont, &error))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
				 errmsg("malformed LIST response for %s from server \"%s\": %s",
						scan->what, scan->cfg->server_name, error),
				 errcontext("GET %s", request_of(scan))));
	if (scan->list_rv == NULL)
		scan->list_rv = rv;
	MemoryContextSwitchTo(old);

	end_transfer(scan);
	scan->retries = 0;
	if (cont)
		start_page(scan, cont);
	else
		scan->finished = true;
}

/* page_done: the page's transfer finished with `result` (KwHttpDone). */
static void
page_done(void *owner, int result)
{
	KwLiveScan *scan = (KwLiveScan *) owner;

	scan->transfer_done = true;
	scan->result = result;
	scan->status = kw_http_transfer_status(scan->handle);
}

/* drive: one step of the transfer: run it, then wait briefly for data. */
static void
drive(KwLiveScan *scan)
{
	CHECK_FOR_INTERRUPTS();
	kw_http_multi_run(scan->multi, page_done);
	if (scan->handle && scan->handle->caught)
		ReThrowError(scan->handle->caught);
	if (scan->transfer_done || scan->nitems > 0)
		return;

	if (TimestampDifferenceExceeds(scan->waiting_since, GetCurrentTimestamp(),
								   kw_inactivity_timeout_s * 1000))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_UNABLE_TO_ESTABLISH_CONNECTION),
				 errmsg("could not list %s on server \"%s\": timed out",
						scan->what, scan->cfg->server_name),
				 errdetail("Nothing arrived from the API server for %d s (kwatch.inactivity_timeout).",
						   kw_inactivity_timeout_s),
				 errcontext("GET %s", request_of(scan))));
	kw_http_multi_wait(scan->multi, KW_LIVE_POLL_MS);
	CHECK_FOR_INTERRUPTS();
}

/*
 * kw_live_scan_begin: starts listing `path` ("/api/v1/namespaces/x/pods")
 * on cluster `cfg` with the given selectors (NULL for none) and page size
 * `limit` (0 = unchunked), in a new memory context under the current one.
 * `what` names the resource in messages.  Each object gets `api_version`
 * ("group/version") and `kind` when it lacks them (kw_list_decoder_create).
 * ERRORs when the token file is unreadable or libcurl fails to start.
 */
KwLiveScan *
kw_live_scan_begin(KwClusterConfig *cfg, const char *path,
				   const char *label_selector, const char *field_selector,
				   int limit, const char *what, const char *api_version,
				   const char *kind)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext,
											  "kwatch live scan",
											  ALLOCSET_DEFAULT_SIZES);
	KwLiveScan *scan = MemoryContextAllocZero(cxt, sizeof(KwLiveScan));
	MemoryContext old = MemoryContextSwitchTo(cxt);

	scan->cxt = cxt;
	scan->item_cxt = AllocSetContextCreate(cxt, "kwatch live items",
										   ALLOCSET_DEFAULT_SIZES);
	scan->cfg = cfg;
	scan->path = pstrdup(path);
	scan->label_selector = label_selector ? pstrdup(label_selector) : NULL;
	scan->field_selector = field_selector ? pstrdup(field_selector) : NULL;
	scan->limit = limit;
	scan->what = pstrdup(what);
	scan->api_version = api_version ? pstrdup(api_version) : NULL;
	scan->kind = kind ? pstrdup(kind) : NULL;
	scan->cleanup.func = cleanup_callback;
	scan->cleanup.arg = scan;
	MemoryContextRegisterResetCallback(cxt, &scan->cleanup);

	scan->multi = kw_http_multi_create();
	MemoryContextSwitchTo(old);
	start_page(scan, NULL);
	return scan;
}

/*
 * kw_live_scan_next: the next listed object's JSON text (NUL-terminated,
 * managedFields removed; valid until the next call) in *json and *len.
 * Returns false when the list is complete.  ERRORs: transport failures and
 * timeouts (08001 and friends, kw_http_curl_sqlstate), HTTP errors (the
 * status's SQLSTATE, kw_http_status_sqlstate, with the server's message as
 * detail), malformed responses (HV005), query cancel (57014); the request
 * is in the error context.
 */
bool
kw_live_scan_next(KwLiveScan *scan, char **json, int *len)
{
	for (;;)
	{
		if (scan->next < scan->nitems)
		{
			LiveItem   *it = &scan->items[scan->next++];

			*json = it->json;
			*len = it->len;
			scan->total_items++;
			return true;
		}
		if (scan->finished)
			return false;
		/* everything framed so far was consumed: drop it */
		MemoryContextReset(scan->item_cxt);
		scan->items = NULL;
		scan->nitems = scan->maxitems = scan->next = 0;
		if (scan->transfer_done)
			finish_page(scan);
		else
			drive(scan);
	}
}

/* kw_live_scan_counts: pages requested and items returned so far. */
void
kw_live_scan_counts(KwLiveScan *scan, int *pages, int64 *items)
{
	*pages = scan->pages;
	*items = scan->total_items;
}

/*
 * kw_live_scan_end: stops the transfer (if any) and frees everything.
 * Accepts NULL.
 */
void
kw_live_scan_end(KwLiveScan *scan)
{
	if (scan == NULL)
		return;
	MemoryContextDelete(scan->cxt);	/* runs cleanup_callback */
}
