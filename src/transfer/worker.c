/*-------------------------------------------------------------------------
 *
 * worker.c
 *		The kwatch background worker: one process serving every watch of
 *		every server through one libcurl multi handle.
 *
 * The loop waits on a single WaitEventSet holding the process latch,
 * postmaster death and every socket libcurl asked us to watch, with a
 * timeout from libcurl's timer and the watches' own deadlines (backoff,
 * inactivity).  So SIGTERM, SIGHUP and a new or removed watch (catalog.c
 * sets the latch at COMMIT) are acted on at once, however idle the watches
 * are (PostgreSQL's src/test/modules/worker_spi is the skeleton).
 *
 * Each pass: react to signals and registration changes (reload_if_changed)
 * -> prune history tables when due (prune_if_due) -> let libcurl run due
 * timers (run_curl_timer) -> drive exec credential plugins -> take the
 * apply workers' results to their watches (collect_applied) -> start due
 * requests (start_due_requests, so a server prepares the next LIST page
 * while the last one is written) -> hand pending batches to the apply
 * workers (hand_over_batches, one request, a short transaction, per watch)
 * -> wait (wait_for_events).  An ERROR while applying one watch's batch is
 * caught in sync.c and handled by that watch alone.  If the worker itself
 * dies, the postmaster restarts it after 5 seconds and every watch resumes
 * from its checkpoint.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <curl/curl.h>

#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "kw_common.h"
#include "kw_status.h"
#include "kw_cluster.h"
#include "kw_http.h"
#include "kw_apply.h"
#include "kw_worker.h"

/* Registrations are re-read at least this often, in case of missed wakeups. */
#define KW_RELOAD_INTERVAL_MS 10000
#define KW_MAX_WAIT_EVENTS 64
/* Free C heap is handed back to the kernel at most this often, when idle. */
#define KW_TRIM_INTERVAL_MS 10000

typedef struct SockEntry
{
	curl_socket_t fd;
	int			what;			/* CURL_POLL_IN / OUT / INOUT */
} SockEntry;

static CURLM *multi = NULL;
static MemoryContext worker_cxt = NULL;
static MemoryContext loop_cxt = NULL;	/* reset on every pass */
static List *watches = NIL;		/* KwWatch * */
static SockEntry *socks = NULL;
static int	nsocks = 0;
static int	maxsocks = 0;
static WaitEventSet *wes = NULL;	/* rebuilt when wes_dirty */
static bool wes_dirty = true;
static TimestampTz curl_deadline = 0;	/* 0 = no timer */
static TimestampTz next_reload = 0;	/* registrations read again by then */


/* ---------------------------------------------------------------------
 * libcurl multi callbacks
 * ---------------------------------------------------------------------
 */

static int
socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
	int			i;

	for (i = 0; i < nsocks; i++)
		if (socks[i].fd == fd)
			break;
	if (what == CURL_POLL_REMOVE)
	{
		if (i < nsocks)
			socks[i] = socks[--nsocks];
	}
	else
	{
		if (i == nsocks)
		{
			if (nsocks == maxsocks)
			{
				maxsocks = Max(16, maxsocks * 2);
				socks = socks ? repalloc(socks, sizeof(SockEntry) * maxsocks)
					: MemoryContextAlloc(worker_cxt, sizeof(SockEntry) * maxsocks);
			}
			socks[nsocks].fd = fd;
			nsocks++;
		}
		socks[i].what = what;
	}
	wes_dirty = true;
	return 0;
}

static int
timer_cb(CURLM *m, long timeout_ms, void *userp)
{
	if (timeout_ms < 0)
		curl_deadline = 0;
	else
		curl_deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);
	return 0;
}

/* process_completed: hands every finished transfer to its watch. */
static void
process_completed(void)
{
	CURLMsg    *msg;
	int			left;

	while ((msg = curl_multi_info_read(multi, &left)) != NULL)
	{
		KwWatch    *w = NULL;

		if (msg->msg != CURLMSG_DONE)
			continue;
		w = (KwWatch *) kw_http_owner_of(msg->easy_handle);
		if (w)
			kw_watch_transfer_done(w, (int) msg->data.result);
	}
}

static void
socket_action(curl_socket_t fd, int flags)
{
	int			running;

	curl_multi_socket_action(multi, fd, flags, &running);
	process_completed();
}

/* ---------------------------------------------------------------------
 * registrations
 * ---------------------------------------------------------------------
 */

typedef struct ReadArgs
{
	List	   *regs;			/* KwRegistration *, in reload_cxt */
	bool		installed;
	MemoryContext cxt;
} ReadArgs;

/* read_registrations_body has logged that the schema is not the library's */
static bool schema_mismatch_logged = false;

static void
read_registrations_body(void *arg)
{
	ReadArgs   *a = (ReadArgs *) arg;
	int			rc;

	rc = SPI_execute("SELECT 1 FROM pg_extension WHERE extname = 'kwatch'", true, 1);
	if (rc != SPI_OK_SELECT || SPI_processed == 0)
		return;
	/*
	 * an extension created at another version since the start
	 * (wait_for_schema's case): no watch, logged once
	 */
	if (!kw_schema_is_current())
	{
		if (!schema_mismatch_logged)
			ereport(LOG,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("loaded kwatch library version %s differs from installed extension version %s",
							KWATCH_VERSION, kw_installed_version()),
					 errhint("Run ALTER EXTENSION kwatch UPDATE.")));
		schema_mismatch_logged = true;
		return;
	}
	schema_mismatch_logged = false;
	a->installed = true;
	kw_events_restore();		/* continue the event stream's sequence */
	a->regs = kw_registrations_read(0, a->cxt);
}

/*
 * reload_watches: brings the running watches in line with
 * kwatch.registrations: stops removed or changed ones, starts new ones.
 */
static void
reload_watches(void)
{
	MemoryContext reload_cxt = AllocSetContextCreate(worker_cxt, "kwatch reload",
													 ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(reload_cxt);
	ReadArgs	a;
	char	   *err = NULL;
	List	   *keep = NIL;
	ListCell   *lc;

	memset(&a, 0, sizeof(a));
	a.cxt = reload_cxt;
	if (!kw_run_in_transaction(read_registrations_body, &a, &err, NULL))
	{
		ereport(LOG, (errmsg("kwatch: could not read registrations: %s", err)));
		MemoryContextSwitchTo(old);
		MemoryContextDelete(reload_cxt);
		return;
	}

	foreach(lc, watches)
	{
		KwWatch    *w = (KwWatch *) lfirst(lc);
		bool		wanted = false;
		ListCell   *rc;

		foreach(rc, a.regs)
		{
			if (kw_watch_same_registration(w, (KwRegistration *) lfirst(rc)))
			{
				wanted = true;
				break;
			}
		}
		if (wanted)
			keep = lappend(keep, w);
		else
		{
			ereport(LOG, (errmsg("kwatch: stopping watch %d", kw_watch_id(w))));
			kw_watch_destroy(w);
		}
	}

	foreach(lc, a.regs)
	{
		KwRegistration *r = (KwRegistration *) lfirst(lc);
		bool		running = false;
		ListCell   *wc;

		foreach(wc, keep)
		{
			if (kw_watch_id((KwWatch *) lfirst(wc)) == r->id)
			{
				running = true;
				break;
			}
		}
		if (!running && kw_apply_in_flight(r->id))
		{
			/* its former self's last batch is still being applied: next pass */
			next_reload = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), 1000);
			continue;
		}
		if (!running)
		{
			KwWatch    *w;

			ereport(LOG,
					(errmsg("kwatch: starting watch %d: %s%s%s on server \"%s\"%s",
							r->id, r->plural, r->api_group[0] ? "." : "", r->api_group,
							r->server, r->resource_version ? " (resuming)" : "")));

			MemoryContextSwitchTo(worker_cxt);
			w = kw_watch_create(r, multi, worker_cxt);
			/* the list itself in reload_cxt: copied to `watches` below */
			MemoryContextSwitchTo(reload_cxt);
			keep = lappend(keep, w);
		}
	}

	MemoryContextSwitchTo(worker_cxt);
	list_free(watches);
	watches = list_copy(keep);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(reload_cxt);
}

/* ---------------------------------------------------------------------
 * the wait set and the heap
 * ---------------------------------------------------------------------
 */

/* Pipes of running exec credential plugins watched at most (credential.c). */
#define KW_MAX_PLUGIN_FDS 64
static uint64 plugin_fd_generation = 0;

/*
 * build_wait_set: the latch, postmaster death, libcurl's sockets and the
 * stdout/stderr pipes of running exec credential plugins.
 */
static WaitEventSet *
build_wait_set(WaitEventSet *old)
{
	WaitEventSet *wes;
	int			pfds[KW_MAX_PLUGIN_FDS];
	int			npfds = kw_credential_wait_fds(pfds, KW_MAX_PLUGIN_FDS,
											   &plugin_fd_generation);

	if (old)
		FreeWaitEventSet(old);
	/* freed by hand, not by a resource owner */
	wes = KW_CREATE_WAIT_EVENT_SET(worker_cxt, NULL, 2 + nsocks + npfds);
	AddWaitEventToSet(wes, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(wes, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	for (int i = 0; i < nsocks; i++)
	{
		uint32		ev = 0;

		if (socks[i].what == CURL_POLL_IN || socks[i].what == CURL_POLL_INOUT)
			ev |= WL_SOCKET_READABLE;
		if (socks[i].what == CURL_POLL_OUT || socks[i].what == CURL_POLL_INOUT)
			ev |= WL_SOCKET_WRITEABLE;
		if (ev)
			AddWaitEventToSet(wes, ev, socks[i].fd, NULL, NULL);
	}
	for (int i = 0; i < npfds; i++)
		AddWaitEventToSet(wes, WL_SOCKET_READABLE, pfds[i], NULL, (void *) &plugin_fd_generation);
	wes_dirty = false;
	return wes;
}

/*
 * release_free_heap: returns the free pages of the C heap to the kernel.
 *
 * glibc keeps freed heap memory mapped: the worker's resident size would
 * stay at the high-water mark of its largest batch, relist or burst of
 * reconnects (large palloc chunks, libcurl/OpenSSL connection state and
 * json-c tokener stacks are plain malloc), and so creep up over days as
 * rarer peaks come by, though the memory in use is flat (measured with
 * malloc_stats under apiserver restarts: test/bench/README.md).
 * malloc_trim(0) (glibc >= 2.8) madvises every free page of every arena
 * away; on a heap of ~10 MB it takes well under a millisecond.  Elsewhere
 * this does nothing.
 */
static void
release_free_heap(void)
{
#ifdef __GLIBC__
	(void) malloc_trim(0);
#endif
}

/* ---------------------------------------------------------------------
 * startup and shutdown
 * ---------------------------------------------------------------------
 */

/*
 * publish_worker: records this process (pid, latch) as the worker in shared
 * memory, or with 0 and NULL that there is none, and frees every watch's
 * status slot: the watches of a new worker life claim theirs afresh.
 */
static void
publish_worker(pid_t pid, Latch *latch)
{
	LWLockAcquire(kw_shared->lock, LW_EXCLUSIVE);
	kw_shared->worker_pid = pid;
	kw_shared->worker_latch = latch;
	for (int i = 0; i < kw_shared->nslots; i++)
		kw_shared->slots[i].watch_id = 0;
	LWLockRelease(kw_shared->lock);
}

/*
 * worker_shutdown: on exit (before_shmem_exit), no worker any more; its
 * apply workers are stopped (they would also end on their own once they
 * find their queues detached).
 */
static void
worker_shutdown(int code, Datum arg)
{
	kw_apply_pool_shutdown();
	if (kw_shared == NULL)
		return;
	publish_worker(0, NULL);
}

static void
fence_apply_workers_body(void *arg)
{
	if (SPI_execute("SELECT pg_catalog.count(pg_catalog.pg_terminate_backend(a.pid, 30000))"
					" FROM pg_catalog.pg_stat_activity a"
					" WHERE a.backend_type OPERATOR(pg_catalog.=) ANY"
					" (ARRAY['kwatch apply worker', 'kwatch apply', 'kwatch relist merge'])",
					false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not stop the previous worker's apply workers");
}

/*
 * fence_apply_workers: stops the apply workers a previous life of the
 * worker left running (apply_worker.c; and the relist merges of kwatch
 * 0.4.0, during an upgrade) and waits up to 30 s for each to end: their
 * outcome would reach no one, and a batch older than the checkpoint this
 * life resumes from must not commit after it.
 */
static void
fence_apply_workers(void)
{
	char	   *err = NULL;

	if (!kw_run_in_transaction(fence_apply_workers_body, NULL, &err, NULL))
		ereport(LOG, (errmsg("kwatch: could not stop earlier apply workers: %s", err)));
}

/*
 * How often the worker tries again to connect to a kwatch.database that
 * does not exist: each try logs its FATAL; the postmaster restarts the
 * worker every 5 s (bgw_restart_time), so the worker itself waits out the
 * rest of the minute first.
 */
#define KW_MISSING_DATABASE_RETRY_MS 60000

/*
 * connect_error_context: error context callback around the worker's
 * connection: names the setting, and for a database that does not exist
 * (InitPostgres's FATAL, 3D000) says what to do and records the time in
 * shared memory, for the next life's wait (worker_connect).
 */
static void
connect_error_context(void *arg)
{
	errcontext("kwatch worker connecting to kwatch.database \"%s\"", kw_database);
	if (geterrcode() == ERRCODE_UNDEFINED_DATABASE)
	{
		errhint("Create it as a superuser (CREATE DATABASE %s; then CREATE EXTENSION kwatch in it), or set kwatch.database "
				"in postgresql.conf to the database that has the extension and restart. kwatch tries again in a minute.",
				quote_identifier(kw_database));
		pg_atomic_write_u64(&kw_shared->connect_refused_at, (uint64) GetCurrentTimestamp());
	}
}

/*
 * worker_connect: signal handlers, the database connection, the worker's
 * memory contexts and the session settings every statement of the worker
 * runs under.  When the last life's connection was refused because
 * kwatch.database names no database, first waits until a minute has
 * passed since then (so the FATAL is logged once a minute, with a hint),
 * ending on SIGTERM or postmaster death.
 */
static void
worker_connect(void)
{
	ErrorContextCallback errcallback;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/*
	 * While it waits, the latch is published (not the pid: no worker serves
	 * yet), so that a CREATE DATABASE of kwatch.database wakes it at its
	 * commit (kw_wake_worker clears connect_refused_at; ownership.c).
	 */
	LWLockAcquire(kw_shared->lock, LW_EXCLUSIVE);
	kw_shared->worker_latch = MyLatch;
	LWLockRelease(kw_shared->lock);
	{
		TimestampTz refused = (TimestampTz) pg_atomic_read_u64(&kw_shared->connect_refused_at);
		/* at most a minute from now, also when the clock went back */
		TimestampTz until = Min(TimestampTzPlusMilliseconds(refused, KW_MISSING_DATABASE_RETRY_MS),
								TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
															KW_MISSING_DATABASE_RETRY_MS));

		while (refused != 0 &&
			   pg_atomic_read_u64(&kw_shared->connect_refused_at) != 0 &&
			   GetCurrentTimestamp() < until)
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 TimestampDifferenceMilliseconds(GetCurrentTimestamp(), until),
							 PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
	}
	LWLockAcquire(kw_shared->lock, LW_EXCLUSIVE);
	kw_shared->worker_latch = NULL;
	LWLockRelease(kw_shared->lock);

	errcallback.callback = connect_error_context;
	errcallback.arg = NULL;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;
	BackgroundWorkerInitializeConnection(kw_database, NULL, 0);
	error_context_stack = errcallback.previous;
	pg_atomic_write_u64(&kw_shared->connect_refused_at, 0);
	pgstat_report_appname("kwatch worker");

	worker_cxt = AllocSetContextCreate(TopMemoryContext, "kwatch worker",
									   ALLOCSET_DEFAULT_SIZES);
	loop_cxt = AllocSetContextCreate(worker_cxt, "kwatch worker loop",
									 ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(worker_cxt);

	/*
	 * One process serves every watch: a lock held on a mirror table (an
	 * ALTER TABLE, a long transaction) must not stall the others.  A batch
	 * that hits the timeout is kept and retried (watch.c).
	 */
	SetConfigOption("lock_timeout", "2s", PGC_SUSET, PGC_S_SESSION);

	/*
	 * The worker runs as the bootstrap superuser: no function or operator a
	 * role created in a schema on the database's search_path (public, or
	 * one ALTER DATABASE ... SET search_path names) may take the place of
	 * the pg_catalog one a statement means.  (At the session level, as SET
	 * would: a function's own SET clause still applies inside it.)
	 */
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_SESSION);
}

/*
 * multi_init: libcurl's multi handle, which drives every transfer through
 * socket_cb and timer_cb; ERROR when it cannot be created.
 */
static void
multi_init(void)
{
	kw_http_global_init();
	/* exec credential plugins run beside the loop, never blocking it */
	kw_credential_set_nonblocking(true);
	multi = curl_multi_init();
	if (multi == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY),
						errmsg("could not create a libcurl multi handle")));
	curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
	curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, timer_cb);
	/* PROTOCOL 36: share connections; HTTP/2 multiplexes watches */
	curl_multi_setopt(multi, CURLMOPT_PIPELINING, (long) CURLPIPE_MULTIPLEX);

	/*
	 * A name lookup runs inside the transfer that needs it: with libcurl's
	 * threaded (or c-ares) resolver beside the loop, without one in the
	 * loop, so that one server whose DNS stalls would stall every watch
	 * (libcurl's curl_version_info(3): CURL_VERSION_ASYNCHDNS).  Debian's
	 * libcurl has the threaded one; say so when a build has none.
	 */
	if (!(curl_version_info(CURLVERSION_NOW)->features & CURL_VERSION_ASYNCHDNS))
		ereport(WARNING,
				(errmsg("kwatch: libcurl %s resolves host names synchronously",
						curl_version_info(CURLVERSION_NOW)->version),
				 errdetail("A DNS lookup that stalls blocks the kwatch worker, and every watch with it, until it ends."),
				 errhint("Use a libcurl built with its threaded resolver or c-ares (curl --version lists AsynchDNS).")));
}

/* ---------------------------------------------------------------------
 * the steps of one pass
 * ---------------------------------------------------------------------
 */

/* The loop's schedule, kept across passes. */
static uint64 seen_generation = 0;	/* of kw_shared->generation */
static TimestampTz last_prune = 0;
static bool prune_behind = false;	/* the last round filled a batch */
static TimestampTz polled_at = 0;	/* when the last wait returned */
static TimestampTz next_trim = 0;

/* ms_until: milliseconds from now until t, 0 when t has passed. */
static long
ms_until(TimestampTz t, TimestampTz now)
{
	return Max(0, (long) ((t - now) / 1000));
}

/*
 * reload_if_changed: reloads the registrations when they changed
 * (kw_shared->generation moved) or the reload interval has passed.
 */
static void
reload_if_changed(TimestampTz now)
{
	uint64		gen = pg_atomic_read_u64(&kw_shared->generation);

	if (gen != seen_generation || now >= next_reload)
	{
		seen_generation = gen;
		next_reload = TimestampTzPlusMilliseconds(now, KW_RELOAD_INTERVAL_MS);
		reload_watches();
	}
}

/* prune_after: when the next pruning round is due after one at `from`. */
static TimestampTz
prune_after(TimestampTz from)
{
	return TimestampTzPlusMilliseconds(from, prune_behind ? 1000 :
									   (int64) kw_history_prune_interval_s * 1000);
}

/*
 * Pruning (doc/security.md, Roles): one request per history table, each
 * under its owner's share of the apply pool.  A round lists the tables;
 * those not yet handed over wait in prune_pending (a busy pool, an owner's
 * share used); a table whose last request has not come back (its owner's
 * code still runs) is left out of later rounds until it does, and never
 * holds up another table's.
 */
typedef struct PruneInFlight
{
	Oid			history_oid;
	KwApplyTicket *ticket;
} PruneInFlight;

static MemoryContext prune_cxt = NULL;	/* prune_inflight's */
static MemoryContext prune_round_cxt = NULL;	/* prune_pending's */
static List *prune_pending = NIL;	/* KwPruneTarget *, to hand over */
static List *prune_inflight = NIL;	/* PruneInFlight *, handed over */

/* prune_collect: takes the outcome of every pruning request that has ended. */
static void
prune_collect(void)
{
	ListCell   *lc;

	foreach(lc, prune_inflight)
	{
		PruneInFlight *f = (PruneInFlight *) lfirst(lc);
		KwApplyResult res;

		if (kw_apply_poll(f->ticket, &res, loop_cxt))
		{
			prune_behind |= res.behind;
			prune_inflight = foreach_delete_current(prune_inflight, lc);
			pfree(f);
		}
	}
}

/* prune_in_flight: whether history table `oid` has a request out. */
static bool
prune_in_flight(Oid oid)
{
	ListCell   *lc;

	foreach(lc, prune_inflight)
		if (((PruneInFlight *) lfirst(lc))->history_oid == oid)
			return true;
	return false;
}

/*
 * prune_if_due: has apply workers prune history tables past their
 * retention (history.c, as each table's owner) when due: the tables
 * kw_history_prune_targets lists, one request per table, each counted
 * against its owner's share of the pool and bounded by
 * kwatch.apply_timeout on its own, so that no table's owner's code holds
 * up another table's pruning; sooner while behind; the interval as it is
 * set now (a SIGHUP may change it).  Returns when the loop should come
 * back.
 */
static TimestampTz
prune_if_due(TimestampTz now)
{
	ListCell   *lc;

	prune_collect();
	if (now >= prune_after(last_prune))
	{
		if (prune_cxt == NULL)
			prune_cxt = AllocSetContextCreate(TopMemoryContext, "kwatch prune",
											  ALLOCSET_SMALL_SIZES);
		if (prune_round_cxt != NULL)
			MemoryContextDelete(prune_round_cxt);
		prune_round_cxt = AllocSetContextCreate(prune_cxt, "kwatch prune round",
												ALLOCSET_SMALL_SIZES);
		prune_pending = kw_history_prune_targets(prune_round_cxt);
		prune_behind = false;
		last_prune = now;
	}
	foreach(lc, prune_pending)
	{
		KwPruneTarget *t = (KwPruneTarget *) lfirst(lc);
		KwApplyRequest req = {.op = KW_APPLY_PRUNE_HISTORY,
			.timeout_ms = kw_apply_timeout_ms,
		.history_oid = t->history_oid};
		StringInfoData buf;
		KwApplyTicket *ticket;
		PruneInFlight *f;

		if (!prune_in_flight(t->history_oid))
		{
			initStringInfo(&buf);
			kw_apply_request_encode(&buf, &req);
			ticket = kw_apply_submit(&buf, NULL, 0, t->owner, kw_apply_timeout_ms);
			pfree(buf.data);
			if (ticket == NULL)
				continue;		/* busy, or its owner's share is used: later */
			f = MemoryContextAlloc(prune_cxt, sizeof(PruneInFlight));
			f->history_oid = t->history_oid;
			f->ticket = ticket;
			{
				MemoryContext old = MemoryContextSwitchTo(prune_cxt);

				prune_inflight = lappend(prune_inflight, f);
				MemoryContextSwitchTo(old);
			}
		}
		/* handed over now, or still running since an earlier round */
		prune_pending = foreach_delete_current(prune_pending, lc);
	}
	if (prune_pending != NIL)
		return TimestampTzPlusMilliseconds(now, 1000);	/* try the rest again */
	return prune_after(last_prune);
}

/* run_curl_timer: lets libcurl act on its timer when it has expired. */
static void
run_curl_timer(void)
{
	if (curl_deadline != 0 && GetCurrentTimestamp() >= curl_deadline)
	{
		curl_deadline = 0;
		socket_action(CURL_SOCKET_TIMEOUT, 0);
	}
}

/*
 * start_due_requests: lets every watch start what is due (kw_watch_tick);
 * returns `timeout` lowered to the nearest watch deadline.
 */
static long
start_due_requests(long timeout)
{
	TimestampTz now = GetCurrentTimestamp();
	ListCell   *lc;

	foreach(lc, watches)
		timeout = Min(timeout, kw_watch_tick((KwWatch *) lfirst(lc), now, polled_at));
	return timeout;
}

/*
 * collect_applied: takes the results the apply workers reported since the
 * last pass (apply_pool.c) to their watches; returns 0 when there was one
 * (what comes next may be due now), else `timeout`.
 */
static long
collect_applied(long timeout)
{
	ListCell   *lc;
	bool		any = false;

	(void) kw_apply_pool_collect();
	/* also the requests run here, without apply workers (apply_pool.c) */
	foreach(lc, watches)
		any |= kw_watch_collect((KwWatch *) lfirst(lc), loop_cxt);
	prune_collect();
	return any ? 0 : timeout;
}

/*
 * hand_over_batches: hands what the streams delivered to the apply
 * workers, a request per watch, then, with the workers no watch asked for,
 * more batches of the lists being made (kw_watch_spread); returns 0 when anything was
 * handed over, else `timeout` (a batch no apply worker was free for waits
 * for a result to set the latch).
 */
static long
hand_over_batches(long timeout)
{
	ListCell   *lc;

	foreach(lc, watches)
	{
		KwWatch    *w = (KwWatch *) lfirst(lc);

		if (kw_watch_has_pending(w) && kw_watch_flush(w))
			timeout = 0;
		CHECK_FOR_INTERRUPTS();
	}
	/* then the batches of big lists, with the workers left spare */
	foreach(lc, watches)
	{
		if (kw_watch_spread((KwWatch *) lfirst(lc)))
			timeout = 0;
	}
	return timeout;
}

/* plugin_fds_changed: whether plugins' pipes came or went since build_wait_set. */
static bool
plugin_fds_changed(void)
{
	int			dummy[1];
	uint64		g;

	(void) kw_credential_wait_fds(dummy, 0, &g);
	return g != plugin_fd_generation;
}

/*
 * wait_for_events: sleeps up to `timeout` ms on the wait set (rebuilt in
 * worker_cxt when libcurl's sockets or the plugins' pipes changed), then
 * hands each ready socket to libcurl.  The latch only wakes the loop; a
 * plugin's pipe is read on the next pass.
 */
static void
wait_for_events(long timeout)
{
	WaitEvent	events[KW_MAX_WAIT_EVENTS];
	int			n;

	if (plugin_fds_changed())
		wes_dirty = true;
	if (wes == NULL || wes_dirty)
	{
		MemoryContextSwitchTo(worker_cxt);
		wes = build_wait_set(wes);
		MemoryContextSwitchTo(loop_cxt);
	}
	n = WaitEventSetWait(wes, timeout, events, KW_MAX_WAIT_EVENTS, PG_WAIT_EXTENSION);
	polled_at = GetCurrentTimestamp();
	for (int i = 0; i < n; i++)
	{
		WaitEvent  *ev = &events[i];

		if (ev->events & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			continue;
		}
		if (ev->user_data == (void *) &plugin_fd_generation)
			continue;			/* a plugin's pipe: kw_credential_drive reads it */
		if (ev->events & (WL_SOCKET_READABLE | WL_SOCKET_WRITEABLE))
		{
			int			flags = 0;

			if (ev->events & WL_SOCKET_READABLE)
				flags |= CURL_CSELECT_IN;
			if (ev->events & WL_SOCKET_WRITEABLE)
				flags |= CURL_CSELECT_OUT;
			socket_action(ev->fd, flags);
		}
	}
}

/* How often the worker looks again for ALTER EXTENSION kwatch UPDATE. */
#define KW_SCHEMA_RECHECK_MS 5000

/* installed_version_body: a transaction body: the extension's version, or NULL. */
static void
installed_version_body(void *arg)
{
	char	  **version = (char **) arg;
	char	   *v = kw_installed_version();

	*version = v ? MemoryContextStrdup(worker_cxt, v) : NULL;
}

/*
 * wait_for_schema: returns once the kwatch extension in kwatch.database is
 * at the library's version (KWATCH_VERSION), or is not installed (then the
 * loop finds it when CREATE EXTENSION has run, reload_watches).  Between a
 * restart with a new library and ALTER EXTENSION kwatch UPDATE it LOGs the
 * mismatch once, then looks again every KW_SCHEMA_RECHECK_MS or when its
 * latch is set (at the commit of ALTER EXTENSION kwatch UPDATE), and never
 * exits: an exit would make the postmaster restart
 * the worker every 5 s, each life logging again (Citus refuses a
 * mismatched schema the same way, in
 * src/backend/distributed/metadata/metadata_cache.c, CheckInstalledVersion).
 * Ends on SIGTERM or postmaster death.  A version that cannot be read (an
 * ERROR) is LOGged and read again.
 */
static void
wait_for_schema(void)
{
	bool		logged = false;

	/*
	 * The latch is published meanwhile (not the pid: no worker serves yet),
	 * so that ALTER EXTENSION kwatch UPDATE wakes it at its commit
	 * (ownership.c), as worker_connect's wait does.
	 */
	LWLockAcquire(kw_shared->lock, LW_EXCLUSIVE);
	kw_shared->worker_latch = MyLatch;
	LWLockRelease(kw_shared->lock);
	for (;;)
	{
		char	   *installed = NULL;
		char	   *err = NULL;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		if (!kw_run_in_transaction(installed_version_body, &installed, &err, NULL))
			ereport(LOG, (errmsg("kwatch: could not read the extension's version: %s", err)));
		else if (installed == NULL || strcmp(installed, KWATCH_VERSION) == 0)
		{
			if (logged)
				ereport(LOG, (errmsg("kwatch: extension kwatch is now at version %s, the library's",
									 KWATCH_VERSION)));
			break;
		}
		else if (!logged)
		{
			ereport(LOG,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("loaded kwatch library version %s differs from installed extension version %s",
							KWATCH_VERSION, installed),
					 errdetail("The kwatch worker starts no watch in database \"%s\" until the extension is updated; it looks again every %d seconds.",
							   kw_database, KW_SCHEMA_RECHECK_MS / 1000),
					 errhint("Run ALTER EXTENSION kwatch UPDATE.")));
			logged = true;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 KW_SCHEMA_RECHECK_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	LWLockAcquire(kw_shared->lock, LW_EXCLUSIVE);
	kw_shared->worker_latch = NULL;
	LWLockRelease(kw_shared->lock);
}

/*
 * kwatch_worker_main: the worker's entry point (bgw_function_name).
 * Connects to kwatch.database as the bootstrap superuser, waits until its
 * extension is at the library's version (wait_for_schema) and runs the loop
 * (the passes the file's header lists) until SIGTERM or postmaster death;
 * worker_shutdown runs on the way out.
 */
void
kwatch_worker_main(Datum main_arg)
{
	worker_connect();
	wait_for_schema();
	kw_events_writer_init();
	before_shmem_exit(worker_shutdown, (Datum) 0);
	publish_worker(MyProcPid, MyLatch);
	fence_apply_workers();
	multi_init();
	kw_apply_pool_init();

	ereport(LOG, (errmsg("kwatch worker started in database \"%s\"", kw_database)));

	for (;;)
	{
		TimestampTz now;
		TimestampTz next_prune;
		long		timeout = KW_RELOAD_INTERVAL_MS;

		/* everything transient of one pass lives in loop_cxt */
		MemoryContextReset(loop_cxt);
		MemoryContextSwitchTo(loop_cxt);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		now = GetCurrentTimestamp();
		reload_if_changed(now);
		next_prune = prune_if_due(now);
		run_curl_timer();

		/* exec credential plugins: read their pipes, reap, refresh ahead */
		(void) kw_credential_drive(&timeout);

		/* results first: they decide what each watch does next */
		timeout = collect_applied(timeout);
		/* start due requests first, so servers work while batches apply */
		timeout = start_due_requests(timeout);
		timeout = hand_over_batches(timeout);

		now = GetCurrentTimestamp();
		if (curl_deadline != 0)
			timeout = Min(timeout, ms_until(curl_deadline, now));
		timeout = Min(timeout, ms_until(next_reload, now));
		timeout = Min(timeout, ms_until(next_prune, now));

		/* about to sleep: give back what the last batches freed */
		if (timeout > 0 && now >= next_trim)
		{
			release_free_heap();
			next_trim = TimestampTzPlusMilliseconds(now, KW_TRIM_INTERVAL_MS);
		}

		wait_for_events(timeout);
	}
}
