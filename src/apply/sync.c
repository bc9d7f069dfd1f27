/*-------------------------------------------------------------------------
 *
 * sync.c
 *		Applying decoded objects to a mirror table, through SPI plans
 *		prepared once per watch: the transaction shell, one short
 *		transaction per step (kw_apply_*).
 *
 * Every function here runs inside the short transaction opened by
 * kw_run_in_transaction(): the worker never holds a transaction open while
 * it waits on the network: a lock or a snapshot held across a slow stream
 * would hold back VACUUM and block DDL on the mirror tables.
 *
 *	- Watch events: one upsert or delete per event, in order, each with its
 *	  event-stream entry (events.c) and NOTIFY, then the resume
 *	  resourceVersion written to kwatch.registrations in the same
 *	  transaction (so a restart resumes exactly there).
 *
 *	- Relist (PROTOCOL 20, 23): pages are staged into a staging table over
 *	  several short transactions; one final transaction merges the staged
 *	  list into the mirror table (insert new, update changed, delete missing,
 *	  each with its event-stream entry and NOTIFY) and stores the list's resourceVersion.  Readers see the
 *	  old table or the new one, never a mix.  Objects whose resourceVersion
 *	  did not change are staged without their body and never rewritten.
 *
 *	- The initial sync of a watch into a table that holds no row of its
 *	  cluster has nothing to replace: each batch of the LIST is inserted
 *	  straight into the mirror table, notified as it commits, and the last
 *	  transaction stores the list's resourceVersion.  Readers see the
 *	  cluster's rows arrive batch by batch until kwatch.wait_synced()
 *	  returns, as a client-go informer's store fills before HasSynced
 *	  (staging/src/k8s.io/client-go/tools/cache/shared_informer.go); a
 *	  LIST that starts over finds those rows and is a relist like any other.
 *
 * Where each step is: the statements a watch prepares and the registration
 * row (sync_plans.c), watch events (sync_events.c), a relist's start and
 * pages (relist_stage.c) in its staging table (stage_table.c), its merge
 * and sweep (merge.c).
 *
 * The checkpoint UPDATE of the registration row comes first in every
 * applying transaction: it locks the row, so kwatch.unwatch() (which deletes
 * it) and the worker serialize, and a watch removed meanwhile finds no row
 * and rolls back instead of writing rows nobody owns.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/hsearch.h"

#include "kw_common.h"
#include "kw_apply.h"
#include "kw_sync.h"
#include "kw_sync_plans.h"
#include "kw_events.h"

/* ---------------------------------------------------------------------
 * The apply step of the data path (stream -> decode -> apply -> status):
 * each operation in a transaction of its own, so that the reflector
 * (watch.c) calls one function per step and reads its outcome.  They
 * return false, with the error's message (palloc'd in the caller's
 * context) and SQLSTATE, when the transaction rolled back.
 * ---------------------------------------------------------------------
 */
typedef struct ApplyArgs
{
	KwSyncPlans *plans;
	KwRegistration *reg;
	KwEvent    *events;
	int			nevents;
	KwObject   *objs;
	int			nobjs;
	const char *rv;
	MemoryContext cxt;
	HTAB	   *known;
	bool		allow_direct;
	bool		forget_checkpoint;
	int			skipped;
	int64		rows;
	KwApplyCounts *counts;
} ApplyArgs;

static void
apply_events_body(void *arg)
{
	ApplyArgs  *a = (ApplyArgs *) arg;

	kw_sync_apply_events(a->plans, a->reg, a->events, a->nevents, a->rv, a->counts);
}

/*
 * kw_apply_events: kw_sync_apply_events (sync_events.c) in a transaction of its
 * own: the `nevents` watch events, their NOTIFYs and event-stream entries,
 * and the checkpoint `resume_rv`.  Counts land in *counts.
 */
bool
kw_apply_events(KwSyncPlans *plans, KwRegistration *reg, KwEvent *events, int nevents,
				const char *resume_rv, KwApplyCounts *counts, char **err, int *sqlstate)
{
	ApplyArgs	a = {.plans = plans, .reg = reg, .events = events, .nevents = nevents,
		.rv = resume_rv, .counts = counts};

	return kw_run_in_transaction(apply_events_body, &a, err, sqlstate);
}

static void
relist_begin_body(void *arg)
{
	ApplyArgs  *a = (ApplyArgs *) arg;

	a->known = kw_sync_relist_begin(a->plans, a->reg, a->cxt, a->allow_direct,
									a->forget_checkpoint);
}

/*
 * kw_apply_relist_begin: kw_sync_relist_begin (relist_stage.c) in a transaction of
 * its own; *known gets the table's uid -> resourceVersion hash, in `cxt`;
 * *direct whether the list goes straight into the mirror table (only when
 * `allow_direct`, see there); `forget_checkpoint` as there.
 */
bool
kw_apply_relist_begin(KwSyncPlans *plans, KwRegistration *reg, MemoryContext cxt,
					  bool allow_direct, bool forget_checkpoint, HTAB **known,
					  bool *direct, char **err, int *sqlstate)
{
	ApplyArgs	a = {.plans = plans, .reg = reg, .cxt = cxt, .allow_direct = allow_direct,
	.forget_checkpoint = forget_checkpoint};

	if (!kw_run_in_transaction(relist_begin_body, &a, err, sqlstate))
		return false;
	*known = a.known;
	*direct = plans->relist_direct;
	return true;
}

static void
relist_stage_body(void *arg)
{
	ApplyArgs  *a = (ApplyArgs *) arg;

	a->skipped = kw_sync_relist_stage(a->plans, a->reg, a->objs, a->nobjs, a->counts);
}

/*
 * kw_apply_relist_stage: kw_sync_relist_stage (relist_stage.c) in a transaction of
 * its own; *skipped gets the number of objects PostgreSQL rejected, and
 * *counts what a list going straight into the mirror table changed.
 */
bool
kw_apply_relist_stage(KwSyncPlans *plans, KwRegistration *reg, KwObject *objs, int nobjs,
					  int *skipped, KwApplyCounts *counts, char **err, int *sqlstate)
{
	ApplyArgs	a = {.plans = plans, .reg = reg, .objs = objs, .nobjs = nobjs,
		.counts = counts};

	if (!kw_run_in_transaction(relist_stage_body, &a, err, sqlstate))
		return false;
	*skipped = a.skipped;
	return true;
}

static void
relist_finish_body(void *arg)
{
	ApplyArgs  *a = (ApplyArgs *) arg;
	HTAB	   *known = a->known;

	/* the rows as they are now: a MODIFIED's previous resourceVersion */
	if (known == NULL && !a->plans->relist_direct)
		known = kw_sync_known_rows(a->plans, a->reg, CurrentMemoryContext);
	kw_sync_relist_finish(a->plans, a->reg, a->rv, known, a->counts);
	/* a streaming list's changes before its bookmark: part of the same list */
	if (a->nevents > 0)
		kw_sync_apply_events(a->plans, a->reg, a->events, a->nevents, a->rv, a->counts);
	else
		kw_events_checkpoint();
}

/*
 * kw_apply_relist_finish: kw_sync_relist_finish (merge.c) in a transaction
 * of its own: the staged list merged into the mirror table, its changes
 * notified, `list_rv` the checkpoint.  `known` NULL reads the table's
 * rows in that transaction (kw_sync_known_rows).  The `nevents` events a
 * streaming list received between its initial events and its
 * initial-events-end bookmark (MODIFIED, DELETED: client-go's watchList
 * applies them to its temporary store) are applied after the merge in the
 * same transaction (kw_sync_apply_events), so the checkpoint never covers
 * a change the table lacks (doc/protocol.md rule 19).
 */
bool
kw_apply_relist_finish(KwSyncPlans *plans, KwRegistration *reg, const char *list_rv,
					   HTAB *known, KwEvent *events, int nevents,
					   KwApplyCounts *counts, char **err, int *sqlstate)
{
	ApplyArgs	a = {.plans = plans, .reg = reg, .rv = list_rv, .known = known,
		.events = events, .nevents = nevents, .counts = counts};

	return kw_run_in_transaction(relist_finish_body, &a, err, sqlstate);
}

static void
count_rows_body(void *arg)
{
	ApplyArgs  *a = (ApplyArgs *) arg;

	a->rows = kw_sync_count_rows(a->reg);
}

/*
 * kw_apply_count_rows: kw_sync_count_rows (sync_plans.c) in a transaction of its
 * own; *rows gets the number of rows of the watch's cluster in its table.
 */
bool
kw_apply_count_rows(KwRegistration *reg, int64 *rows, char **err, int *sqlstate)
{
	ApplyArgs	a = {.reg = reg};

	if (!kw_run_in_transaction(count_rows_body, &a, err, sqlstate))
		return false;
	*rows = a.rows;
	return true;
}
