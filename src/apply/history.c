/*-------------------------------------------------------------------------
 *
 * history.c
 *		Cluster history: why mirror rows change, for the history
 *		trigger, and the worker's pruning of history tables.
 *
 * A mirror table with history (kwatch.history(), watch(history => true);
 * sql/kwatch--0.2.0--0.3.0.sql) has a row trigger, kwatch._history_trigger,
 * that keeps k8s.<table>_history: one row per version of each object, valid
 * over a tstzrange, written in the transaction that changed the mirror row.
 * When a row is deleted the trigger records how the object went; only the
 * process deleting it knows, so sync.c says so here first
 * (kw_change_origin_set) and the trigger asks kwatch._change_origin():
 * a watch's DELETED event, a relist that no longer listed it (client-go's
 * DeletedFinalStateUnknown, PROTOCOL 23), or unwatch removing the watch's
 * rows.  The origin falls back to "watch" at the end of every transaction.
 * Who changed an object (its managedFields' summary, decode.c) goes the
 * same way: sync.c notes each object it writes (kw_change_managers_note)
 * and the trigger asks kwatch._change_managers(uid, resourceVersion).
 *
 * Retention (kwatch.history_tables.retention, max_rows): the worker deletes
 * closed versions older than the retention, and the oldest closed versions
 * beyond max_rows, in batches of KW_HISTORY_PRUNE_BATCH rows per table and
 * transaction, every kwatch.history_prune_interval, as the table's owner
 * (KwAsOwner: an owner's trigger on the history table never runs as the
 * worker).  Open versions (the objects the mirror holds now) are never
 * pruned.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/lsyscache.h"
#include "utils/resowner.h"

#include "kw_common.h"
#include "kw_apply.h"
#include "kw_as_owner.h"

/* Rows deleted from one history table in one transaction, at most. */
#define KW_HISTORY_PRUNE_BATCH 10000

static KwChangeOrigin change_origin = KW_ORIGIN_WATCH;
static bool origin_callback_registered = false;

/*
 * The managedFields summaries (KwObject.managers) of the objects this
 * process writes in this transaction, by uid and resourceVersion, for the
 * history trigger (kwatch._change_managers()); in their own memory, gone at
 * the end of the transaction.
 */
#define KW_MANAGERS_KEY 520			/* uid, a NUL, resourceVersion (decode.c keeps each under 256 bytes) */
typedef struct ManagersEntry
{
	char		key[KW_MANAGERS_KEY];
	char	   *managers;
} ManagersEntry;
static HTAB *change_managers = NULL;
static MemoryContext managers_cxt = NULL;

/* origin_xact_callback: the origin and the summaries last one transaction, whatever its end. */
static void
origin_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT)
	{
		change_origin = KW_ORIGIN_WATCH;
		if (change_managers != NULL)
		{
			/* the table lives in managers_cxt */
			change_managers = NULL;
			MemoryContextReset(managers_cxt);
		}
	}
}

/* managers_key: uid and resourceVersion as one key; false when too long */
static bool
managers_key(const char *uid, const char *rv, char *key)
{
	size_t		u = strlen(uid),
				r = strlen(rv);

	if (u + r + 2 > KW_MANAGERS_KEY)
		return false;
	memset(key, 0, KW_MANAGERS_KEY);
	memcpy(key, uid, u);
	memcpy(key + u + 1, rv, r);
	return true;
}

/*
 * kw_change_managers_note: the mirror row of `obj` that this process
 * writes next in this transaction changes as obj->managers says (the
 * summary of its managedFields, decode.c), for the history trigger; an
 * object without one is not noted.
 */
void
kw_change_managers_note(const KwObject *obj)
{
	char		key[KW_MANAGERS_KEY];
	ManagersEntry *e;
	MemoryContext old;

	if (obj->managers == NULL || obj->uid == NULL || obj->resource_version == NULL ||
		!managers_key(obj->uid, obj->resource_version, key))
		return;
	if (!origin_callback_registered)
	{
		RegisterXactCallback(origin_xact_callback, NULL);
		origin_callback_registered = true;
	}
	if (managers_cxt == NULL)
		managers_cxt = AllocSetContextCreate(TopMemoryContext, "kwatch change managers",
											 ALLOCSET_DEFAULT_SIZES);
	if (change_managers == NULL)
	{
		HASHCTL		ctl = {0};

		ctl.keysize = KW_MANAGERS_KEY;
		ctl.entrysize = sizeof(ManagersEntry);
		ctl.hcxt = managers_cxt;
		change_managers = hash_create("kwatch change managers", 256, &ctl,
									  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	e = hash_search(change_managers, key, HASH_ENTER, NULL);
	old = MemoryContextSwitchTo(managers_cxt);
	e->managers = pstrdup(obj->managers);
	MemoryContextSwitchTo(old);
}

PG_FUNCTION_INFO_V1(kwatch_change_managers);

/*
 * kwatch_change_managers: SQL kwatch._change_managers(uid text,
 * resource_version text) -> jsonb: the summary of the metadata.managedFields
 * of that version of an object (an array of {manager, operation, time,
 * subresource}), when this process is writing it in this transaction (the
 * kwatch worker: kw_change_managers_note), else NULL (another session's
 * write, a version a relist merged).  For the history trigger.
 */
Datum
kwatch_change_managers(PG_FUNCTION_ARGS)
{
	char		key[KW_MANAGERS_KEY];
	ManagersEntry *e;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || change_managers == NULL ||
		!managers_key(text_to_cstring(PG_GETARG_TEXT_PP(0)), text_to_cstring(PG_GETARG_TEXT_PP(1)), key))
		PG_RETURN_NULL();
	e = hash_search(change_managers, key, HASH_FIND, NULL);
	if (e == NULL)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(e->managers)));
}

/*
 * kw_change_origin_set: the mirror rows this process changes next, until
 * another call or the end of the transaction, change for `origin`.
 */
void
kw_change_origin_set(KwChangeOrigin origin)
{
	if (!origin_callback_registered)
	{
		RegisterXactCallback(origin_xact_callback, NULL);
		origin_callback_registered = true;
	}
	change_origin = origin;
}

PG_FUNCTION_INFO_V1(kwatch_change_origin);

/*
 * kwatch_change_origin: SQL kwatch._change_origin() -> text, 'watch',
 * 'relist' or 'unwatch': why this process changes mirror rows now (see the
 * file header).  Says nothing about other sessions.
 */
Datum
kwatch_change_origin(PG_FUNCTION_ARGS)
{
	static const char *const names[] = {"watch", "relist", "unwatch"};

	PG_RETURN_TEXT_P(cstring_to_text(names[change_origin]));
}

typedef struct PruneTarget
{
	char	   *history_table;	/* quoted, qualified */
	Oid			history_oid;
	Oid			owner;
	char	   *retention;		/* interval as text, or NULL */
	char	   *max_rows;		/* bigint as text, or NULL */
} PruneTarget;

typedef struct PruneArgs
{
	bool		more;			/* a batch was full: prune again soon */
	Oid			only;			/* read_targets: this history table, or any */
	List	   *targets;		/* read_targets' result, in the round's memory */
	MemoryContext cxt;			/* where targets live */
	PruneTarget *current;		/* the table prune_table_body works on */
} PruneArgs;

static void prune_one(PruneTarget *pt, PruneArgs *a);
static void prune_batch(PruneTarget *pt, PruneArgs *a, const char *which, Oid type,
						Datum value);

/*
 * read_targets: the history tables of kwatch.history_tables to prune this
 * round, into a->targets: the history table kwatch made (by OID), while it
 * and its mirror table have one owner (retention is the mirror owner's to
 * set, history(), never for another role's table that took the name), and
 * with a rule.  Tables whose last pruning began and never finished (its
 * owner's code outlasted the deadline and its apply worker was terminated)
 * come last, so that no table's code delays another's pruning
 * (doc/security.md, Roles); the others in random order.  A transaction
 * body (kw_run_in_transaction).
 */
static void
read_targets(void *arg)
{
	PruneArgs  *a = (PruneArgs *) arg;
	MemoryContext old;
	Oid			only_type = OIDOID;
	Datum		only = ObjectIdGetDatum(a->only);

	/* no extension here yet, or one not at the library's version: nothing */
	if (kw_installed_version() == NULL || !kw_schema_is_current())
		return;
	if (SPI_execute_with_args("SELECT c.oid::pg_catalog.regclass::text, c.relowner,"
					" h.retention::text, h.max_rows::text, c.oid"
					" FROM kwatch.history_tables h"
					" JOIN pg_catalog.pg_class c ON c.oid = h.history_oid"
					" JOIN pg_catalog.pg_class m"
					"   ON m.oid = pg_catalog.to_regclass(pg_catalog.format('k8s.%I', h.table_name))"
					" WHERE h.enabled AND m.relowner = c.relowner"
					"   AND (h.retention IS NOT NULL OR h.max_rows IS NOT NULL)"
					"   AND ($1 OPERATOR(pg_catalog.=) 0::pg_catalog.oid OR c.oid OPERATOR(pg_catalog.=) $1)"
					" ORDER BY (h.prune_started_at OPERATOR(pg_catalog.>)"
					"   COALESCE(h.pruned_at, '-infinity')) IS TRUE, pg_catalog.random()",
					1, &only_type, &only, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read kwatch.history_tables");
	old = MemoryContextSwitchTo(a->cxt);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	t = SPI_tuptable->vals[i];
		TupleDesc	d = SPI_tuptable->tupdesc;
		PruneTarget *pt = palloc0(sizeof(PruneTarget));
		bool		isnull;

		pt->history_table = SPI_getvalue(t, d, 1);
		pt->owner = DatumGetObjectId(SPI_getbinval(t, d, 2, &isnull));
		pt->retention = SPI_getvalue(t, d, 3);
		pt->max_rows = SPI_getvalue(t, d, 4);
		pt->history_oid = DatumGetObjectId(SPI_getbinval(t, d, 5, &isnull));
		a->targets = lappend(a->targets, pt);
	}
	MemoryContextSwitchTo(old);
}

/* mark_pruning: notes (as the worker) that a->current's pruning begins or ended. */
static void
mark_pruning(PruneArgs *a, const char *column)
{
	Oid			type = OIDOID;
	Datum		value = ObjectIdGetDatum(a->current->history_oid);

	if (SPI_execute_with_args(psprintf("UPDATE kwatch.history_tables SET %s = pg_catalog.clock_timestamp()"
									   " WHERE history_oid OPERATOR(pg_catalog.=) $1", column),
							  1, &type, &value, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not note the pruning of %s", a->current->history_table);
}

/* prune_begin_body: a transaction body: a->current's pruning begins. */
static void
prune_begin_body(void *arg)
{
	mark_pruning((PruneArgs *) arg, "prune_started_at");
}

/*
 * prune_table_body: a transaction body: one batch of each of a->current's
 * rules (prune_one, as its owner), then, as the worker, that it finished.
 */
static void
prune_table_body(void *arg)
{
	PruneArgs  *a = (PruneArgs *) arg;

	prune_one(a->current, a);
	mark_pruning(a, "pruned_at");
}

/*
 * prune_one: one batch of each of `pt`'s retention rules, as the history
 * table's owner (KwAsOwner).  Sets a->more when a batch was full.
 */
static void
prune_one(PruneTarget *pt, PruneArgs *a)
{
	KwAsOwner	as_owner = {0};

	kw_as_owner_begin(pt->owner, &as_owner);
	if (pt->retention)
		prune_batch(pt, a, "valid OPERATOR(pg_catalog.<<)"
					" pg_catalog.tstzrange(pg_catalog.now() OPERATOR(pg_catalog.-) $1, NULL)"
					" LIMIT %2$d",
					INTERVALOID,
					DirectFunctionCall3(interval_in, CStringGetDatum(pt->retention),
										ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1)));
	if (pt->max_rows)
		prune_batch(pt, a, "NOT pg_catalog.upper_inf(valid) ORDER BY id"
					" LIMIT LEAST(%2$d, GREATEST(0,"
					"  (SELECT pg_catalog.count(*) FROM %1$s) OPERATOR(pg_catalog.-) $1))",
					INT8OID, DirectFunctionCall1(int8in, CStringGetDatum(pt->max_rows)));
	kw_as_owner_end(&as_owner);
}

/*
 * prune_batch: deletes the rows of `pt`'s history table that `which`
 * selects (a WHERE clause of closed versions with its ORDER BY and LIMIT:
 * %1$s the table, %2$d the batch size, $1 the rule's value of type
 * `type`).  Sets a->more when the batch was full.
 */
static void
prune_batch(PruneTarget *pt, PruneArgs *a, const char *which, Oid type, Datum value)
{
	char	   *sql = psprintf(psprintf("DELETE FROM %%1$s WHERE (cluster, id) IN"
										" (SELECT cluster, id FROM %%1$s WHERE %s)", which),
							   pt->history_table, KW_HISTORY_PRUNE_BATCH);

	if (SPI_execute_with_args(sql, 1, &type, &value, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "could not prune %s", pt->history_table);
	a->more |= SPI_processed >= KW_HISTORY_PRUNE_BATCH;
}

/*
 * kw_history_prune_targets: the history tables to prune this round
 * (read_targets, in a transaction of its own), as a List of
 * KwPruneTarget allocated in `cxt`, unfinished ones last.  The transfer
 * process hands each to an apply worker as a request of its own, under
 * its owner's share of the pool (doc/security.md, Roles: one table's
 * owner's code, failing or outlasting its deadline, never holds up
 * another table's pruning, and pruning counts against its owner's
 * share).  NIL, with a LOG line, when the list cannot be read.
 */
List *
kw_history_prune_targets(MemoryContext cxt)
{
	MemoryContext round = AllocSetContextCreate(CurrentMemoryContext, "kwatch prune targets",
												ALLOCSET_SMALL_SIZES);
	PruneArgs	a = {.more = false, .only = InvalidOid, .targets = NIL, .cxt = round};
	char	   *err = NULL;
	List	   *result = NIL;
	ListCell   *lc;

	if (!kw_run_in_transaction(read_targets, &a, &err, NULL))
		elog(LOG, "kwatch: reading the history tables to prune failed: %s", err);
	foreach(lc, a.targets)
	{
		PruneTarget *pt = (PruneTarget *) lfirst(lc);
		MemoryContext old = MemoryContextSwitchTo(cxt);
		KwPruneTarget *t = palloc(sizeof(KwPruneTarget));

		t->history_oid = pt->history_oid;
		t->owner = pt->owner;
		result = lappend(result, t);
		MemoryContextSwitchTo(old);
	}
	MemoryContextDelete(round);
	return result;
}

/*
 * kw_history_prune_table: prunes history table `history_oid` (one batch
 * of each of its rules, see the file header), read again from
 * kwatch.history_tables in a transaction of its own (it may have changed
 * or gone since the list was made: then nothing), its pruning noted as
 * begun and, in the same transaction as the deletes, as finished.  Run by
 * an apply worker (KW_APPLY_PRUNE_HISTORY).  Returns true when a batch
 * was full, so that the next round comes soon rather than after
 * kwatch.history_prune_interval.  An error (the table locked past
 * lock_timeout, its owner's trigger) is logged, not raised.
 */
bool
kw_history_prune_table(Oid history_oid)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "kwatch prune",
											  ALLOCSET_SMALL_SIZES);
	PruneArgs	a = {.more = false, .only = history_oid, .targets = NIL, .cxt = cxt};
	char	   *err = NULL;

	if (!kw_run_in_transaction(read_targets, &a, &err, NULL))
		elog(LOG, "kwatch: pruning history table %u failed: %s", history_oid, err);
	else if (a.targets != NIL)
	{
		a.current = (PruneTarget *) linitial(a.targets);
		if (!kw_run_in_transaction(prune_begin_body, &a, &err, NULL) ||
			!kw_run_in_transaction(prune_table_body, &a, &err, NULL))
			elog(LOG, "kwatch: pruning %s failed: %s", a.current->history_table, err);
	}
	MemoryContextDelete(cxt);
	return a.more;
}
