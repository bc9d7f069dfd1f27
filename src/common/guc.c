/*-------------------------------------------------------------------------
 *
 * guc.c
 *		kwatch's settings (GUCs).  README.md has the same table for users.
 *
 * The database the worker connects to is fixed at postmaster start; every
 * timing can change with a reload (SIGHUP), which the worker picks up before
 * its next request.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "miscadmin.h"
#include "utils/guc.h"

#include "kw_common.h"

char	   *kw_database = NULL;
int			kw_max_watches = 4096;
int			kw_list_page_size = 500;
int			kw_max_concurrent_relists = 16;
int			kw_background_merge_objects = 5000;
int			kw_watch_timeout_s = 300;
int			kw_inactivity_timeout_s = 120;
int			kw_health_check_interval_s = 30;
int			kw_health_check_timeout_s = 15;
int			kw_backoff_initial_ms = 800;
int			kw_backoff_max_ms = 30000;
int			kw_batch_size = 1000;
int			kw_batch_memory_kb = 16384;
int			kw_connect_timeout_s = 10;
int			kw_apply_send_timeout_s = 10;
bool		kw_http_compression = false;
bool		kw_list_from_watch_cache = true;
int			kw_event_buffer = 10000;
char	   *kw_debug_error_on_object = NULL;
int			kw_max_apply_workers = 4;
int			kw_apply_timeout_ms = 60000;
int			kw_exec_plugin_timeout_s = 60;
int			kw_history_prune_interval_s = 60;
int			kw_list_strategy = KW_LIST_STRATEGY_AUTO;
int			kw_rbac_decision_max_age_s = 60;

static const struct config_enum_entry list_strategy_options[] = {
	{"auto", KW_LIST_STRATEGY_AUTO, false},
	{"stream", KW_LIST_STRATEGY_STREAM, false},
	{"list", KW_LIST_STRATEGY_LIST, false},
	{NULL, 0, false}
};

/*
 * kw_define_gucs: defines every kwatch.* setting and reserves the prefix so
 * that typos ("kwatch.databse") are reported.  Called once from _PG_init.
 * Settings of context postmaster can only be defined while the postmaster
 * loads the library (shared_preload_libraries): PostgreSQL refuses them
 * later with a FATAL error, which would end any session that loads kwatch
 * without preloading it (a fleet database that only holds replicated mirror
 * tables); there they keep their defaults.
 */
void
kw_define_gucs(void)
{
	/* PGC_POSTMASTER: only while the postmaster loads us (else FATAL) */
	if (process_shared_preload_libraries_in_progress)
	{
		DefineCustomStringVariable("kwatch.database",
								   "Database the kwatch worker connects to.",
								   "Watches are registered with CREATE EXTENSION kwatch in this database.",
								   &kw_database, "postgres",
								   PGC_POSTMASTER, 0, NULL, NULL, NULL);

		/* sized for fleets: 4096 slots of about 850 bytes are 3.4 MB of shared memory */
		DefineCustomIntVariable("kwatch.max_watches",
								"Maximum number of watches (status slots in shared memory).",
								"Each costs about 850 bytes of shared memory (x86-64); watch() refuses a registration beyond it.",
								&kw_max_watches, 4096, 1, 100000,
								PGC_POSTMASTER, 0, NULL, NULL, NULL);

		/* the event stream's ring (events.c); 1000 bytes of shared memory per slot */
		DefineCustomIntVariable("kwatch.event_buffer",
								"Number of recent changes kept for kwatch.events.",
								"Each costs 1000 bytes of shared memory (x86-64).",
								&kw_event_buffer, 10000, 16, 1000000,
								PGC_POSTMASTER, 0, NULL, NULL, NULL);

		/* apply_pool.c sizes its shared memory segment by it */
		DefineCustomIntVariable("kwatch.max_apply_workers",
								"Maximum number of apply workers (background workers writing mirror tables).",
								"Started on demand, counted against max_worker_processes; "
								"one role's watches hold at most all but one of them.",
								&kw_max_apply_workers, 4, 1, 64,
								PGC_POSTMASTER, 0, NULL, NULL, NULL);
	}

	DefineCustomIntVariable("kwatch.apply_timeout",
							"Longest a batch may take to apply to its table, lock waits included.",
							"A batch past it is rolled back and retried after the watch's backoff; "
							"0 means no limit.",
							&kw_apply_timeout_ms, 60000, 0, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);

	DefineCustomIntVariable("kwatch.list_page_size",
							"Objects per LIST page (the limit parameter).",
							"0 disables chunking.",
							&kw_list_page_size, 500, 0, 100000,
							PGC_SIGHUP, 0, NULL, NULL, NULL);

	DefineCustomIntVariable("kwatch.max_concurrent_relists",
							"Relists (a LIST after a watch's first) the worker runs at once.",
							"Others wait their turn, so that a restart after which many watches get "
							"410 Gone spreads their LISTs over the API servers; a watch's first LIST "
							"is not counted.",
							&kw_max_concurrent_relists, 16, 1, 10000,
							PGC_SIGHUP, 0, NULL, NULL, NULL);

	DefineCustomBoolVariable("kwatch.list_from_watch_cache",
							 "Lets the API server's watch cache answer the initial LIST and relists.",
							 "As client-go's reflector: the first LIST asks resourceVersion=0 and a relist "
							 "from the last resourceVersion sends no limit. Off: every LIST is a paged, "
							 "consistent read from etcd.",
							 &kw_list_from_watch_cache, true,
							 PGC_SIGHUP, 0, NULL, NULL, NULL);

	DefineCustomEnumVariable("kwatch.list_strategy",
							 "How a watch lists: a streaming list (sendInitialEvents) or a LIST.",
							 "auto: a streaming list where the API server serves one (Kubernetes 1.27+ "
							 "with WatchList on; on by default since 1.32), else LIST, decided once per "
							 "server; stream or list force either.",
							 &kw_list_strategy, KW_LIST_STRATEGY_AUTO, list_strategy_options,
							 PGC_SIGHUP, 0, NULL, NULL, NULL);

	DefineCustomIntVariable("kwatch.watch_timeout",
							"Base server-side timeout of one WATCH request.",
							"Each request uses a random value between this and twice this, as client-go does.",
							&kw_watch_timeout_s, 300, 1, 3600,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);

	/*
	 * The last resort against a connection that stays open but silent (a
	 * hung proxy): a quiet WATCH is normal until the server closes it at
	 * its timeoutSeconds, so a WATCH only counts as stalled this long past
	 * that (watch.c, kw_watch_tick); a LIST, this long after its last byte.
	 */
	DefineCustomIntVariable("kwatch.inactivity_timeout",
							"A LIST silent this long, or a WATCH still open and silent this long after its timeoutSeconds, is treated as stalled.",
							"The WATCH resumes from its resourceVersion, the LIST starts over; both count an HTTP error.",
							&kw_inactivity_timeout_s, 120, 1, 86400,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);

	/*
	 * Health checks of the connection itself, as client-go's HTTP/2
	 * transport does (k8s.io/apimachinery/pkg/util/net/http.go:
	 * ReadIdleTimeout 30 s, PingTimeout 15 s) and its dialer's TCP
	 * keepalive (http.c, sockopt_cb).
	 */
	DefineCustomIntVariable("kwatch.health_check_interval",
							"Silence on a connection after which its peer is probed (TCP keepalive; HTTP/2 PING where libcurl allows).",
							NULL, &kw_health_check_interval_s, 30, 1, 3600,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);

	DefineCustomIntVariable("kwatch.health_check_timeout",
							"How long an unanswered probe or unacknowledged data may wait before the connection is closed.",
							"A connection whose peer is gone is closed within kwatch.health_check_interval plus this.",
							&kw_health_check_timeout_s, 15, 1, 3600,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);

	DefineCustomIntVariable("kwatch.backoff_initial",
							"First retry delay after a failed LIST or WATCH.",
							"Doubles on each failure, with jitter, up to kwatch.backoff_max.",
							&kw_backoff_initial_ms, 800, 10, 600000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);

	DefineCustomIntVariable("kwatch.backoff_max",
							"Longest retry delay after repeated failures.",
							NULL, &kw_backoff_max_ms, 30000, 100, 3600000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);

	DefineCustomIntVariable("kwatch.batch_size",
							"Maximum watch events or LIST items applied in one transaction.",
							NULL, &kw_batch_size, 1000, 1, 1000000,
							PGC_SIGHUP, 0, NULL, NULL, NULL);

	DefineCustomIntVariable("kwatch.batch_memory",
							"Maximum bytes of objects (as JSON) in one batch of watch events or LIST items.",
							"A batch ends at kwatch.batch_size entries or at this many bytes, whichever comes first.",
							&kw_batch_memory_kb, 16384, 64, 524288,
							PGC_SIGHUP, GUC_UNIT_KB, NULL, NULL, NULL);

	DefineCustomIntVariable("kwatch.background_merge_objects",
							"Ignored since kwatch 0.5.0: every relist merge runs in an apply worker.",
							"Kept so that configurations that set it still load.",
							&kw_background_merge_objects, 5000, 0, INT_MAX,
							PGC_SIGHUP, 0, NULL, NULL, NULL);

	DefineCustomIntVariable("kwatch.exec_plugin_timeout",
							"Longest an exec credential plugin may run.",
							"A plugin still running after this is killed and its watches retry later.",
							&kw_exec_plugin_timeout_s, 60, 1, 3600,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);

	DefineCustomIntVariable("kwatch.connect_timeout",
							"Timeout for connecting to an API server.",
							NULL, &kw_connect_timeout_s, 10, 1, 600,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);

	/* sender.c: a server that stalls writes holds the others this long at most */
	DefineCustomIntVariable("kwatch.apply_send_timeout",
							"Longest the request sender waits for one request of an apply made at commit.",
							"A request that takes longer is tried again later, and the other pending applies to its server wait with it, so that a server that stalls holds no other server's applies for longer.",
							&kw_apply_send_timeout_s, 10, 1, 300,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);

	DefineCustomBoolVariable("kwatch.http_compression",
							 "Ask API servers for gzip-compressed responses.",
							 "Saves bandwidth on remote clusters; costs CPU on both ends.",
							 &kw_http_compression, false,
							 PGC_SIGHUP, 0, NULL, NULL, NULL);

	/* history tables' retention (history.c) */
	DefineCustomIntVariable("kwatch.history_prune_interval",
							"How often the worker prunes history tables past their retention.",
							NULL, &kw_history_prune_interval_s, 60, 1, 86400,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);

	/* a developer setting for the test suite (watch.c, inject_error) */
	DefineCustomStringVariable("kwatch.debug_error_on_object",
							   "Raise an ERROR in the worker while decoding an object of this name (testing only).",
							   NULL, &kw_debug_error_on_object, "",
							   PGC_SUSET, GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE,
							   NULL, NULL, NULL);

	/* rows that follow RBAC (functions/rbac_rows.c); SUSET: a role may not lengthen it */
	DefineCustomIntVariable("kwatch.rbac_decision_max_age",
							"Longest a backend reuses a Kubernetes access decision of kwatch.rbac_visible().",
							"Past it the API server is asked again; an unanswered question counts as \"no\". "
							"A change of the watched RBAC objects of the server ends it earlier.",
							&kw_rbac_decision_max_age_s, 60, 0, 86400,
							PGC_SUSET, GUC_UNIT_S, NULL, NULL, NULL);

	MarkGUCPrefixReserved("kwatch");
}
