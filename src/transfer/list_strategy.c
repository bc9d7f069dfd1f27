/*-------------------------------------------------------------------------
 *
 * list_strategy.c
 *		How a watch lists: a streaming list (a WATCH with
 *		sendInitialEvents=true, KEP-3157 "WatchList") or a LIST, decided once
 *		per API server and remembered for the worker's life.
 *
 * kwatch.list_strategy = auto (the default) tries a streaming list first on
 * every API server, as client-go's reflector does with its WatchListClient
 * feature (staging/src/k8s.io/client-go/tools/cache/reflector.go,
 * ListAndWatch and watchList); a server that refuses it (Kubernetes before
 * 1.27 answers 422 Invalid: "resourceVersionMatch is forbidden for watch",
 * apimachinery pkg/apis/meta/internalversion/validation ValidateListOptions)
 * or ignores it (no "k8s.io/initial-events-end" bookmark before other
 * events) is remembered here, and its watches list with LIST from then on
 * (doc/protocol.md, "Streaming lists").  client-go falls back on every
 * attempt and tries again at the next relist; kwatch remembers the
 * answer, so a 1.20 server costs one refused request per worker life.
 * `stream` and `list` force either.
 *
 * Only the worker process uses this; the memory is its own.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "nodes/pg_list.h"
#include "utils/memutils.h"

#include "kw_common.h"
#include "kw_worker.h"

/* What one API server (its URL) answered to a streaming list. */
typedef struct StreamSupport
{
	char	   *api_server;
	bool		supported;
} StreamSupport;

static List *known_servers = NIL;	/* of StreamSupport *, TopMemoryContext */

static StreamSupport *
find_server(const char *api_server)
{
	ListCell   *lc;

	foreach(lc, known_servers)
	{
		StreamSupport *s = (StreamSupport *) lfirst(lc);

		if (strcmp(s->api_server, api_server) == 0)
			return s;
	}
	return NULL;
}

/*
 * kw_list_should_stream: whether the next list of a watch on the API server
 * at URL `api_server` is a streaming list: always with
 * kwatch.list_strategy = stream, never with list, and with auto unless that
 * server was found not to serve streaming lists (kw_list_stream_support).
 */
bool
kw_list_should_stream(const char *api_server)
{
	StreamSupport *s;

	if (kw_list_strategy == KW_LIST_STRATEGY_LIST)
		return false;
	if (kw_list_strategy == KW_LIST_STRATEGY_STREAM)
		return true;
	s = find_server(api_server);
	return s == NULL || s->supported;
}

/*
 * kw_list_stream_known: whether the answer of `api_server` to a streaming
 * list is known (a first streaming list is a probe: its refusal is not an
 * error, nor a list call).
 */
bool
kw_list_stream_known(const char *api_server)
{
	return find_server(api_server) != NULL;
}

/*
 * kw_list_stream_support: records that the API server at `api_server`
 * serves streaming lists (`supported`) or not, with `why` (logged once, when
 * the answer is new or changes).  A server upgraded while the worker runs
 * is tried again after a worker restart.
 */
void
kw_list_stream_support(const char *api_server, bool supported, const char *why)
{
	StreamSupport *s = find_server(api_server);

	if (s != NULL && s->supported == supported)
		return;
	if (s == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		s = palloc(sizeof(StreamSupport));
		s->api_server = pstrdup(api_server);
		known_servers = lappend(known_servers, s);
		MemoryContextSwitchTo(old);
	}
	s->supported = supported;
	if (supported)
		ereport(LOG,
				(errmsg("kwatch: API server %s serves streaming lists (sendInitialEvents); lists are streamed",
						api_server)));
	else
		ereport(LOG,
				(errmsg("kwatch: API server %s does not serve streaming lists: %s; listing with LIST",
						api_server, why ? why : "refused")));
}
