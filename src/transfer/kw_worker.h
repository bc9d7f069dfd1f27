/*-------------------------------------------------------------------------
 *
 * kw_worker.h
 *		The transfer's side: the reflector of each watch as the worker's
 *		loop (worker.c) drives it (watch.c), the list strategy per API
 *		server (list_strategy.c), and the worker's registration.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KW_WORKER_H
#define KW_WORKER_H

#include "kw_common.h"

#include "fmgr.h"

typedef struct KwWatch KwWatch;

extern KwWatch *kw_watch_create(KwRegistration *reg, void *multi,
								MemoryContext parent);
extern void kw_watch_destroy(KwWatch *w);
extern bool kw_watch_same_registration(KwWatch *w, KwRegistration *reg);
extern int32 kw_watch_id(KwWatch *w);
extern void kw_watch_transfer_done(KwWatch *w, int curlcode);
extern long kw_watch_tick(KwWatch *w, TimestampTz now, TimestampTz polled_at);
extern bool kw_watch_has_pending(KwWatch *w);
extern bool kw_watch_flush(KwWatch *w);
extern bool kw_watch_spread(KwWatch *w);
extern bool kw_watch_collect(KwWatch *w, MemoryContext cxt);

/* in list_strategy.c: streaming list or LIST, per API server */
extern bool kw_list_should_stream(const char *api_server);
extern bool kw_list_stream_known(const char *api_server);
extern void kw_list_stream_support(const char *api_server, bool supported,
								   const char *why);

/* in worker.c */
PGDLLEXPORT void kwatch_worker_main(Datum arg);

#endif							/* KW_WORKER_H */
