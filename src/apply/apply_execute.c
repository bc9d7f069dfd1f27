/*-------------------------------------------------------------------------
 *
 * apply_execute.c
 *		Running one apply request (kw_apply.h): the step of the data path
 *		that writes mirror tables, in an apply worker (apply_worker.c) or,
 *		without one, in the transfer itself (apply_pool.c).
 *
 * Each request is one transaction (sync.c's kw_apply_*), run under a
 * deadline: kwatch.apply_timeout bounds the transaction (PostgreSQL's
 * STATEMENT_TIMEOUT, which SPI does not arm by itself: postgres.c arms it
 * per client statement) and every lock wait in it (lock_timeout), so a
 * table owner's slow trigger, CHECK or lock costs its own watch a rolled
 * back batch (57014 or 55P03), which the transfer retries after its
 * backoff, and nothing else.
 *
 * Prepared statements (KwSyncPlans) are kept per watch in this process and
 * made again when the watch's table or registration changed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timeout.h"

#include "kw_common.h"
#include "kw_apply.h"
#include "kw_sync.h"
#include "kw_as_owner.h"

/* The longest one lock wait of a batch may last (lock_timeout), in ms. */
#define KW_APPLY_LOCK_TIMEOUT_MS 2000

typedef struct PlanEntry
{
	int32		id;				/* hash key: the watch id */
	char	   *table_name;
	char	   *created_at;
	KwSyncPlans *plans;
} PlanEntry;

static HTAB *plan_cache = NULL;
static MemoryContext plan_cxt = NULL;

static bool
str_same(const char *a, const char *b)
{
	return (a == NULL || b == NULL) ? a == b : strcmp(a, b) == 0;
}

/* plans_for: this process's prepared statements for watch `reg`. */
static KwSyncPlans *
plans_for(const KwRegistration *reg)
{
	PlanEntry  *e;
	bool		found;

	if (plan_cache == NULL)
	{
		HASHCTL		ctl = {.keysize = sizeof(int32), .entrysize = sizeof(PlanEntry)};

		plan_cxt = AllocSetContextCreate(TopMemoryContext, "kwatch apply plans",
										 ALLOCSET_DEFAULT_SIZES);
		ctl.hcxt = plan_cxt;
		plan_cache = hash_create("kwatch apply plans", 64, &ctl,
								 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	e = hash_search(plan_cache, &reg->id, HASH_ENTER, &found);
	if (found && (!str_same(e->table_name, reg->table_name) ||
				  !str_same(e->created_at, reg->created_at)))
	{
		kw_sync_plans_free(e->plans);
		found = false;
	}
	if (!found)
	{
		e->table_name = MemoryContextStrdup(plan_cxt, reg->table_name);
		e->created_at = reg->created_at ? MemoryContextStrdup(plan_cxt, reg->created_at) : NULL;
		e->plans = kw_sync_plans_create((KwRegistration *) reg, plan_cxt);
	}
	return e->plans;
}

/*
 * object_error: whether an error applying objects is the objects' fault: a
 * data exception (class 22: text jsonb refuses, like a lone surrogate
 * escape) or a limit (class 54: nesting beyond max_stack_depth, a value
 * over 255 MB).  Anything else (disk full, a lock, a timeout) is not.
 */
static bool
object_error(int sqlstate)
{
	return ERRCODE_TO_CATEGORY(sqlstate) == ERRCODE_DATA_EXCEPTION ||
		ERRCODE_TO_CATEGORY(sqlstate) == ERRCODE_PROGRAM_LIMIT_EXCEEDED;
}

static void
add_counts(KwApplyCounts *to, const KwApplyCounts *c)
{
	to->added += c->added;
	to->modified += c->modified;
	to->deleted += c->deleted;
	to->notified += c->notified;
}

/*
 * partly_committed: the batch failed after some of its events committed
 * one by one: sending it again would apply those again (older versions
 * over newer ones, notified twice), so its failure is never one to retry
 * (SQLSTATE 55000, whatever the cause was): the watch relists.
 */
static void
partly_committed(KwApplyResult *res)
{
	res->error = psprintf("part of the batch was committed before: %s", res->error);
	res->sqlstate = ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE;
}

/*
 * apply_events_singly: applies the events one per transaction after their
 * batch failed on an object PostgreSQL rejects.  A rejected object is
 * skipped: counted, logged with its identity, and its row (an older
 * version) deleted in its place, so the table holds what a relist would
 * (the LIST path skips such objects too).  Fills res; res->ok false with
 * the error on any other error.
 */
static void
apply_events_singly(KwSyncPlans *plans, const KwApplyRequest *req, KwApplyResult *res)
{
	KwRegistration *reg = (KwRegistration *) &req->reg;

	memset(&res->counts, 0, sizeof(res->counts));
	for (int i = 0; i < req->nevents; i++)
	{
		KwEvent		one = req->events[i];
		KwApplyCounts c = {0};

		if (!kw_apply_events(plans, reg, &one, 1, one.obj.resource_version, &c,
							 &res->error, &res->sqlstate))
		{
			if (!object_error(res->sqlstate))
			{
				if (i > 0)
					partly_committed(res);
				return;
			}
			res->skipped++;
			ereport(WARNING,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("kwatch: skipped object %s%s%s (uid %s) of %s from server \"%s\" at resourceVersion %s: %s",
							one.obj.namespace ? one.obj.namespace : "",
							one.obj.namespace ? "/" : "", one.obj.name,
							one.obj.uid, reg->plural, reg->server,
							one.obj.resource_version, res->error)));
			memset(&c, 0, sizeof(c));
			one.type = KW_EV_DELETED;
			if (!kw_apply_events(plans, reg, &one, 1, one.obj.resource_version, &c,
								 &res->error, &res->sqlstate))
			{
				if (i > 0)
					partly_committed(res);
				return;
			}
		}
		add_counts(&res->counts, &c);
	}
	/* the last event may be a bookmark's: its resourceVersion is the checkpoint */
	if (!kw_apply_events(plans, reg, NULL, 0, req->rv, &res->counts,
						 &res->error, &res->sqlstate))
	{
		partly_committed(res);
		return;
	}
	res->ok = true;
	res->error = NULL;
}

/* run_events: a batch of watch events, one by one if an object is refused */
static void
run_events(KwSyncPlans *plans, const KwApplyRequest *req, KwApplyResult *res)
{
	res->ok = kw_apply_events(plans, (KwRegistration *) &req->reg, req->events,
							  req->nevents, req->rv, &res->counts,
							  &res->error, &res->sqlstate);
	if (!res->ok && object_error(res->sqlstate))
		apply_events_singly(plans, req, res);
}

/* run_relist_begin: prepares a LIST; the table's uid -> rv go back */
static void
run_relist_begin(KwSyncPlans *plans, const KwApplyRequest *req, KwApplyResult *res)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "kwatch known rows",
											  ALLOCSET_DEFAULT_SIZES);
	HTAB	   *known = NULL;

	res->ok = kw_apply_relist_begin(plans, (KwRegistration *) &req->reg, cxt,
									req->allow_direct, req->forget_checkpoint,
									&known, &res->direct, &res->error, &res->sqlstate);
	if (res->ok)
		res->nknown = kw_known_export(known, &res->known_uids, &res->known_rvs);
}

/*
 * apply_deadline_begin: arms kwatch.apply_timeout (`ms`, 0 = none) for the
 * transaction about to run (STATEMENT_TIMEOUT for its whole length), and
 * lock_timeout for each lock wait in it: KW_APPLY_LOCK_TIMEOUT_MS, or the
 * deadline when that is shorter.  A table locked by its owner (a long
 * ALTER TABLE, LOCK) so holds an apply worker briefly, and the batch is
 * tried again after the watch's backoff, while the pool serves others.
 */
static void
apply_deadline_begin(int ms)
{
	int			lock_ms = (ms > 0) ? Min(ms, KW_APPLY_LOCK_TIMEOUT_MS) : KW_APPLY_LOCK_TIMEOUT_MS;

	SetConfigOption("lock_timeout", psprintf("%d", lock_ms), PGC_SUSET, PGC_S_SESSION);
	if (ms > 0)
		enable_timeout_after(STATEMENT_TIMEOUT, ms);
}

/*
 * apply_deadline_end: disarms the deadline; a timeout that fired after the
 * transaction ended is forgotten (it must not cancel what comes next).
 */
static void
apply_deadline_end(void)
{
	disable_timeout(STATEMENT_TIMEOUT, false);
	if (get_timeout_indicator(STATEMENT_TIMEOUT, true))
		QueryCancelPending = false;
}

/*
 * kw_apply_execute: runs `req` (kw_apply.h) in this process, in its own
 * transaction(s), under its deadline, and describes the outcome in *res
 * (allocated in the current memory context): ok, or the error's message
 * and SQLSTATE (57014 past the deadline, 55P03 a lock wait past it, 42501
 * and others from the table owner's code; the transaction rolled back).
 * Never ERRORs for a failure of the request itself.
 */
void
kw_apply_execute(const KwApplyRequest *req, KwApplyResult *res)
{
	KwSyncPlans *plans = NULL;
	KwRegistration *reg = (KwRegistration *) &req->reg;

	memset(res, 0, sizeof(*res));
	if (req->op != KW_APPLY_PRUNE_HISTORY)
	{
		plans = plans_for(reg);
		kw_sync_plans_set_direct(plans, req->direct);
	}
	apply_deadline_begin(req->timeout_ms);
	switch (req->op)
	{
		case KW_APPLY_EVENTS:
			run_events(plans, req, res);
			break;
		case KW_APPLY_RELIST_BEGIN:
			run_relist_begin(plans, req, res);
			break;
		case KW_APPLY_RELIST_STAGE:
			res->ok = kw_apply_relist_stage(plans, reg, req->objs, req->nobjs,
											&res->skipped, &res->counts,
											&res->error, &res->sqlstate);
			break;
		case KW_APPLY_RELIST_FINISH:
			res->ok = kw_apply_relist_finish(plans, reg, req->rv, NULL,
											 req->events, req->nevents, &res->counts,
											 &res->error, &res->sqlstate);
			break;
		case KW_APPLY_COUNT_ROWS:
			res->ok = kw_apply_count_rows(reg, &res->rows, &res->error, &res->sqlstate);
			break;
		case KW_APPLY_PRUNE_HISTORY:
			res->behind = kw_history_prune_table(req->history_oid);
			res->ok = true;
			break;
	}
	apply_deadline_end();
	/* a table owner's RAISE may be long: the status slot keeps KW_ERROR_LEN */
	if (res->error && strlen(res->error) >= KW_ERROR_LEN)
		res->error[pg_mbcliplen(res->error, strlen(res->error), KW_ERROR_LEN - 1)] = '\0';
	if (!res->ok && (res->sqlstate == ERRCODE_QUERY_CANCELED ||
					 res->sqlstate == ERRCODE_LOCK_NOT_AVAILABLE))
		res->error = res->sqlstate == ERRCODE_LOCK_NOT_AVAILABLE ?
			psprintf("k8s.%s stayed locked longer than %d ms: %s",
					 req->reg.table_name ? req->reg.table_name : "(history)",
					 req->timeout_ms > 0 ? Min(req->timeout_ms, KW_APPLY_LOCK_TIMEOUT_MS) :
					 KW_APPLY_LOCK_TIMEOUT_MS, res->error) :
			psprintf("applying to k8s.%s took longer than kwatch.apply_timeout (%d ms): %s",
					 req->reg.table_name ? req->reg.table_name : "(history)",
					 req->timeout_ms, res->error);
}
