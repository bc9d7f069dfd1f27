/*-------------------------------------------------------------------------
 *
 * sync.c
 *		Applying decoded objects to a mirror table, through SPI plans
 *		prepared once per watch.
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
 * The checkpoint UPDATE of the registration row comes first in every
 * applying transaction: it locks the row, so kwatch.unwatch() (which deletes
 * it) and the worker serialize, and a watch removed meanwhile finds no row
 * and rolls back instead of writing rows nobody owns.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/resowner.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "nodes/makefuncs.h"
#include "pgstat.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "miscadmin.h"
#include "utils/acl.h"

#include "kw_common.h"
#include "kw_apply.h"
#include "kw_sync.h"
#include "kw_as_owner.h"
#include "kw_events.h"


struct KwSyncPlans
{
	SPIPlanPtr	checkpoint;		/* ($1 id, $2 rv) */
	SPIPlanPtr	upsert;			/* ($1 uid[], $2 rv[], $3 json[], $4 cluster) */
	SPIPlanPtr	delete;			/* ($1 cluster, $2 uid[]) */
	SPIPlanPtr	stage;			/* ($1 uid[], $2 rv[], $3 json[]) */
	SPIPlanPtr	merge;			/* ($1 cluster) */
	SPIPlanPtr	merge_distinct; /* ($1 cluster), a uid staged twice */
	SPIPlanPtr	sweep;			/* ($1 cluster) */
	SPIPlanPtr	insert;			/* ($1 uid[], $2 rv[], $3 json[], $4 cluster) */
	SPIPlanPtr	lock;			/* ($1 id) */
	bool		relist_direct;	/* this list goes straight into the mirror */
	char	   *stage_table;	/* kwatch_stage.relist_stage_<id>, qualified */
	char	   *qualified;		/* k8s."table" */
};

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
 * kw_apply_events: kw_sync_apply_events (below) in a transaction of its
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
 * kw_apply_relist_begin: kw_sync_relist_begin (below) in a transaction of
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
 * kw_apply_relist_stage: kw_sync_relist_stage (below) in a transaction of
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
 * kw_apply_relist_finish: kw_sync_relist_finish (below) in a transaction
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
 * kw_apply_count_rows: kw_sync_count_rows (below) in a transaction of its
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

/*
 * mirror_relid: the OID of mirror table k8s.<table_name>, after checking
 * that the columns kwatch writes still have kwatch's types.  An owner who
 * changed, say, cluster to a type of their own with an implicit cast would
 * have the worker run the cast's function; it would run as that owner
 * (KwAsOwner), but the worker refuses such a table outright.  ERRORs:
 * 42P01 (no table), 42804 (a column's type changed).
 */
static Oid
mirror_relid(KwRegistration *reg)
{
	const KwMirrorColumn *cols = kw_mirror_columns;
	Oid			relid = RangeVarGetRelid(makeRangeVar("k8s", reg->table_name, -1),
										 NoLock, false);

	for (int i = 0; i < KW_MIRROR_COLUMNS; i++)
	{
		AttrNumber	att = get_attnum(relid, cols[i].name);

		if (att == InvalidAttrNumber || get_atttype(relid, att) != cols[i].type)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("mirror table k8s.%s has no column \"%s\" of type %s",
							reg->table_name, cols[i].name, format_type_be(cols[i].type)),
					 errhint("kwatch writes cluster, uid, resource_version (text) and object (jsonb); its owner may add columns, not change these.")));
	}
	return relid;
}

/* table_owner: the owner of the mirror table, checked by mirror_relid */
static Oid
table_owner(KwRegistration *reg)
{
	return kw_rel_owner(mirror_relid(reg));
}

static SPIPlanPtr
prepare(const char *sql, int nargs, Oid *argtypes)
{
	SPIPlanPtr	plan = SPI_prepare(sql, nargs, argtypes);

	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed for \"%s\": %s", sql,
			 SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "SPI_keepplan failed");
	return plan;
}

/*
 * kw_sync_plans_create: an empty plan set for the watch `reg`; plans are
 * prepared on first use (inside a transaction).  Lives in `cxt`.
 */
KwSyncPlans *
kw_sync_plans_create(KwRegistration *reg, MemoryContext cxt)
{
	KwSyncPlans *p = MemoryContextAllocZero(cxt, sizeof(KwSyncPlans));

	p->stage_table = MemoryContextStrdup(cxt, psprintf("kwatch_stage.relist_stage_%d", reg->id));
	p->qualified = MemoryContextStrdup(cxt, quote_qualified_identifier("k8s", reg->table_name));
	return p;
}

/*
 * kw_sync_plans_free: releases the saved plans; accepts NULL.
 */
void
kw_sync_plans_free(KwSyncPlans *p)
{
	SPIPlanPtr *all[9];

	if (p == NULL)
		return;
	all[0] = &p->checkpoint;
	all[1] = &p->upsert;
	all[2] = &p->delete;
	all[3] = &p->stage;
	all[4] = &p->merge;
	all[5] = &p->sweep;
	all[6] = &p->insert;
	all[7] = &p->lock;
	all[8] = &p->merge_distinct;
	for (int i = 0; i < lengthof(all); i++)
		if (*all[i])
		{
			SPI_freeplan(*all[i]);
			*all[i] = NULL;
		}
}

/*
 * registration_found: ERRORs (ERRCODE_UNDEFINED_OBJECT) unless the last
 * statement on the watch's registration row found it: the watch was
 * removed, and the whole apply rolls back.
 */
static void
registration_found(KwRegistration *reg)
{
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("watch %d of %s was removed", reg->id, reg->plural)));
}

/*
 * save_checkpoint: stores `rv` as the watch's resume point.  ERRORs
 * (ERRCODE_UNDEFINED_OBJECT) when the registration is gone, which rolls the
 * whole apply back.
 */
static void
save_checkpoint(KwSyncPlans *p, KwRegistration *reg, const char *rv)
{
	Datum		values[2];
	int			rc;

	if (p->checkpoint == NULL)
	{
		Oid			types[2] = {INT4OID, TEXTOID};

		p->checkpoint = prepare("UPDATE kwatch.registrations "
								"SET resource_version = $2, synced_at = now() "
								"WHERE id = $1", 2, types);
	}
	values[0] = Int32GetDatum(reg->id);
	values[1] = CStringGetTextDatum(rv);
	rc = SPI_execute_plan(p->checkpoint, values, NULL, false, 0);
	if (rc != SPI_OK_UPDATE)
		elog(ERROR, "checkpoint update failed: %s", SPI_result_code_string(rc));
	registration_found(reg);
}

/*
 * lock_registration: locks the watch's registration row, as
 * save_checkpoint does, for a transaction that writes the mirror table
 * without moving the checkpoint (a batch of a list going straight into
 * the table): kwatch.unwatch(), which deletes the row, and the batch
 * serialize, and a watch removed meanwhile rolls the batch back instead of
 * leaving rows nobody owns.  A share lock: the batches of one list spread
 * over several apply workers (watch_apply.c) do not wait for each other,
 * while the list's merge (an UPDATE of the row) waits for them all; the
 * registration's object lock is taken first, so that a DELETE waiting
 * for the batches in progress is not overtaken by the next ones
 * (kw_lock_registration, src/common/catalog.c).  ERRORs (ERRCODE_UNDEFINED_OBJECT) when the
 * registration is gone.
 */
static void
lock_registration(KwSyncPlans *p, KwRegistration *reg)
{
	Datum		id = Int32GetDatum(reg->id);
	int			rc;

	/* first the registration's own lock, which a DELETE takes exclusively */
	kw_lock_registration(reg->id, AccessShareLock);
	if (p->lock == NULL)
	{
		Oid			type = INT4OID;

		p->lock = prepare("SELECT 1 FROM kwatch.registrations WHERE id = $1 FOR SHARE",
						  1, &type);
	}
	rc = SPI_execute_plan(p->lock, &id, NULL, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "registration lock failed: %s", SPI_result_code_string(rc));
	registration_found(reg);
}

/*
 * What one statement of a segment did to one uid (apply_segment).
 */
typedef struct AppliedEntry
{
	char		uid[KW_UID_KEYLEN];
	bool		written;		/* the row was inserted, updated or deleted */
	bool		inserted;
	char	   *previous_rv;	/* an updated row's resourceVersion before */
} AppliedEntry;

static Datum text_array(KwObject *objs, int n, int field);

/*
 * event_plans: the two statements a segment of events runs, prepared once
 * per watch: a multi-row upsert from arrays (skipping rows whose stored
 * resourceVersion is the same) and a multi-row delete by uid.  RETURNING
 * sees the new row only; the row's resourceVersion before (the
 * previous_resource_version of a MODIFIED) comes from a subquery, which
 * reads the statement's snapshot: the row as it was.
 */
static void
event_plans(KwSyncPlans *p)
{
	Oid			types[4] = {TEXTARRAYOID, TEXTARRAYOID, TEXTARRAYOID, TEXTOID};
	Oid			dtypes[2] = {TEXTOID, TEXTARRAYOID};

	if (p->upsert != NULL)
		return;
	p->upsert = prepare(psprintf(
								 "INSERT INTO %s AS t (cluster, uid, resource_version, object) "
								 "SELECT $4, u, r, o::jsonb FROM unnest($1::text[], $2::text[], $3::text[]) AS s(u, r, o) "
								 "ON CONFLICT (cluster, uid) DO UPDATE "
								 "SET resource_version = EXCLUDED.resource_version, object = EXCLUDED.object "
								 "WHERE t.resource_version IS DISTINCT FROM EXCLUDED.resource_version "
								 "RETURNING t.uid, (xmax = 0), (SELECT o.resource_version FROM %s o "
								 "WHERE o.cluster = $4 AND o.uid = t.uid)",
								 p->qualified, p->qualified), 4, types);
	p->delete = prepare(psprintf("DELETE FROM %s WHERE cluster = $1 AND uid = ANY ($2) "
								 "RETURNING uid",
								 p->qualified), 2, dtypes);
}

/*
 * record_applied: enters the uids of the rows the last statement returned
 * (uid first, then, for the upsert, inserted and the previous
 * resourceVersion) into `applied`.
 */
static void
record_applied(HTAB *applied, bool upsert)
{
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		char	   *uid = SPI_getvalue(tup, desc, 1);
		AppliedEntry *e;
		bool		isnull;

		if (uid == NULL)
			continue;
		e = hash_search(applied, uid, HASH_ENTER, NULL);
		e->written = true;
		e->inserted = upsert && DatumGetBool(SPI_getbinval(tup, desc, 2, &isnull));
		e->previous_rv = upsert ? SPI_getvalue(tup, desc, 3) : NULL;
	}
	SPI_freetuptable(SPI_tuptable);
}

/*
 * uid_set: an empty hash of uids (AppliedEntry), sized for n, in the
 * current memory context.  Keys longer than KW_UID_KEYLEN - 1 are cut the
 * same way for every lookup (dynahash's HASH_STRINGS), so two such uids
 * with one prefix only ever land in different segments.
 */
static HTAB *
uid_set(const char *name, int n)
{
	HASHCTL		ctl = {.keysize = KW_UID_KEYLEN, .entrysize = sizeof(AppliedEntry),
	.hcxt = CurrentMemoryContext};

	return hash_create(name, Max(n, 16), &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
}

/*
 * apply_segment: applies events[0..n), whose uids are all different, with
 * at most two statements, their deletes then their upserts (on different
 * uids they commute for the table; deletes first, a name deleted and
 * created again under a new uid is never held by two rows at once, for a
 * unique index or a history reader), then reports each row written, in
 * the events' order, to the event stream and NOTIFY.  Runs as the table's
 * owner (the caller's).
 */
static void
apply_segment(KwSyncPlans *p, KwRegistration *reg, Datum cluster, KwEvent **events,
			  int n, KwApplyCounts *counts)
{
	HTAB	   *applied = uid_set("kwatch applied rows", n);
	KwObject   *ups = palloc(sizeof(KwObject) * n);
	KwObject   *dels = palloc(sizeof(KwObject) * n);
	int			nups = 0,
				ndels = 0;
	int			rc;

	for (int i = 0; i < n; i++)
	{
		if (events[i]->type == KW_EV_DELETED)
			dels[ndels++] = events[i]->obj;
		else
			ups[nups++] = events[i]->obj;
	}
	if (ndels > 0)
	{
		Datum		values[2] = {cluster, text_array(dels, ndels, 0)};

		rc = SPI_execute_plan(p->delete, values, NULL, false, 0);
		if (rc != SPI_OK_DELETE_RETURNING)
			elog(ERROR, "delete failed: %s", SPI_result_code_string(rc));
		record_applied(applied, false);
	}
	if (nups > 0)
	{
		Datum		values[4] = {text_array(ups, nups, 0), text_array(ups, nups, 1),
		text_array(ups, nups, 2), cluster};

		rc = SPI_execute_plan(p->upsert, values, NULL, false, 0);
		if (rc != SPI_OK_INSERT_RETURNING)
			elog(ERROR, "upsert failed: %s", SPI_result_code_string(rc));
		record_applied(applied, true);
	}

	for (int i = 0; i < n; i++)
	{
		KwEvent    *ev = events[i];
		AppliedEntry *e = hash_search(applied, ev->obj.uid, HASH_FIND, NULL);
		KwChange	c = {.namespace = ev->obj.namespace, .name = ev->obj.name,
			.uid = ev->obj.uid, .resource_version = ev->obj.resource_version};

		if (e == NULL || !e->written)
			continue;			/* unchanged, or deleted already */
		if (ev->type == KW_EV_DELETED)
		{
			c.type = KW_EV_DELETED;
			counts->deleted++;
		}
		else if (e->inserted)
		{
			c.type = KW_EV_ADDED;
			counts->added++;
		}
		else
		{
			c.type = KW_EV_MODIFIED;
			c.previous_resource_version = e->previous_rv;
			counts->modified++;
		}
		kw_events_add(reg, &c, reg->notify);
		counts->notified += reg->notify ? 1 : 0;
	}
	hash_destroy(applied);
	pfree(ups);
	pfree(dels);
}

/*
 * kw_sync_apply_events: applies `nevents` watch events in order to the
 * mirror table with one NOTIFY per row changed, then stores `resume_rv`
 * (the last event's or bookmark's resourceVersion).  ADDED/MODIFIED upsert
 * (skipped when the stored resourceVersion is the same), DELETED deletes by
 * uid, BOOKMARK changes no row (PROTOCOL 14, 15, 21).  The events are cut
 * into segments in which no uid repeats, and each segment is applied with
 * one multi-row statement per kind (apply_segment): the same rows and
 * notifications, in the same order, as one statement per event, at a
 * fraction of the executor setup.  Counts land in *counts.  ERRORs roll
 * the transaction back; the caller applies the events one by one then.
 */
void
kw_sync_apply_events(KwSyncPlans *p, KwRegistration *reg, KwEvent *events,
					 int nevents, const char *resume_rv, KwApplyCounts *counts)
{
	Datum		cluster = CStringGetTextDatum(reg->server);
	KwAsOwner	as_owner = {0};
	KwEvent   **segment = palloc(sizeof(KwEvent *) * Max(nevents, 1));
	int			n = 0;
	HTAB	   *in_segment = uid_set("kwatch segment uids", nevents);

	save_checkpoint(p, reg, resume_rv);

	/*
	 * As the table's owner from here on, planning included: the statements
	 * are analyzed (and re-analyzed after invalidations) as the role that
	 * runs them.
	 */
	kw_as_owner_begin(table_owner(reg), &as_owner);
	event_plans(p);
	for (int i = 0; i < nevents; i++)
	{
		KwEvent    *ev = &events[i];
		bool		found = false;

		if (ev->type == KW_EV_BOOKMARK)
			continue;
		/* who changed it, for the history trigger (history.c) */
		if (ev->type != KW_EV_DELETED)
			kw_change_managers_note(&ev->obj);
		hash_search(in_segment, ev->obj.uid, HASH_ENTER, &found);
		if (found)
		{
			/* the uid again: what came before it first */
			apply_segment(p, reg, cluster, segment, n, counts);
			n = 0;
			hash_destroy(in_segment);
			in_segment = uid_set("kwatch segment uids", nevents - i);
			hash_search(in_segment, ev->obj.uid, HASH_ENTER, NULL);
		}
		segment[n++] = ev;
	}
	if (n > 0)
		apply_segment(p, reg, cluster, segment, n, counts);
	kw_as_owner_end(&as_owner);
	kw_events_checkpoint();
}

/*
 * kw_sync_count_rows: number of rows of the watch's cluster in its mirror
 * table (0 when the table is missing).  Used when a watch resumes without a
 * relist.
 */
int64
kw_sync_count_rows(KwRegistration *reg)
{
	char	   *sql;
	Datum		arg = CStringGetTextDatum(reg->server);
	Oid			type = TEXTOID;
	bool		isnull;
	int			rc;
	KwAsOwner	as_owner = {0};

	if (!OidIsValid(RangeVarGetRelid(makeRangeVar("k8s", reg->table_name, -1),
									 NoLock, true)))
		return 0;
	sql = psprintf("SELECT count(*) FROM %s WHERE cluster = $1",
				   quote_qualified_identifier("k8s", reg->table_name));
	/* as the owner: every statement on a mirror table (see KwAsOwner) */
	kw_as_owner_begin(table_owner(reg), &as_owner);
	rc = SPI_execute_with_args(sql, 1, &type, &arg, NULL, true, 1);
	kw_as_owner_end(&as_owner);
	if (rc != SPI_OK_SELECT)
		return 0;
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
									   1, &isnull));
}

/*
 * stage_schema_check: ERRORs (42501) unless schema kwatch_stage belongs to
 * a superuser: a role with CREATE on the database could have made it
 * first, and as its owner drop or replace what kwatch keeps there.
 */
static void
stage_schema_check(void)
{
	HeapTuple	tup = SearchSysCache1(NAMESPACEOID,
									  ObjectIdGetDatum(get_namespace_oid("kwatch_stage", false)));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for schema kwatch_stage");
	owner = ((Form_pg_namespace) GETSTRUCT(tup))->nspowner;
	ReleaseSysCache(tup);
	if (!superuser_arg(owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("schema kwatch_stage is owned by role \"%s\", not a superuser",
						GetUserNameFromId(owner, false)),
				 errhint("kwatch keeps its staging tables there: drop that schema, or have a superuser own it.")));
}

/*
 * kw_sync_relist_begin: prepares a relist: creates (once) and empties the
 * watch's staging table, and returns a hash of uid -> resourceVersion of
 * the rows the mirror table holds now (allocated in `cxt`), so unchanged
 * objects can be staged without their body.  With `allow_direct` (the
 * watch's first LIST, no checkpoint) and no row of the watch's cluster in
 * the table, the list goes straight into the mirror table instead (top of
 * file) and no staging table is needed.
 *
 * The staging table is kwatch_stage.relist_stage_<watch id>: unlogged
 * (what it holds is rebuilt by the next LIST after a crash), a regular
 * table rather than a temporary one because a relist's batches and its
 * merge are apply requests any apply worker may run (apply_worker.c), and
 * the one that merges must read what the others staged, and outside
 * the extension (ALTER EXTENSION ADD/DROP would make every relist wait for
 * any open transaction that called unwatch, which drops the table).  Its
 * schema is the worker's; the mirror table's owner is granted SELECT on
 * the table for the merge.
 *
 * With `forget_checkpoint` (kwatch.relist() asked for this LIST), the
 * watch's checkpoint is cleared in the same transaction: a worker that
 * restarts before the LIST commits (a crash) lists again instead of
 * resuming from a checkpoint whose table the request said was stale.
 */
HTAB *
kw_sync_relist_begin(KwSyncPlans *p, KwRegistration *reg, MemoryContext cxt,
					 bool allow_direct, bool forget_checkpoint)
{
	const char *stage = p->stage_table;
	int			rc;
	bool		isnull;
	HTAB	   *known = kw_sync_known_rows(p, reg, cxt);

	if (forget_checkpoint)
	{
		Datum		id = Int32GetDatum(reg->id);
		Oid			type = INT4OID;

		if (SPI_execute_with_args("UPDATE kwatch.registrations SET resource_version = NULL"
								  " WHERE id = $1", 1, &type, &id, NULL, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "could not clear the checkpoint of watch %d", reg->id);
		registration_found(reg);
	}

	/* nothing to replace: straight into the mirror table (top of file) */
	p->relist_direct = allow_direct && hash_get_num_entries(known) == 0;
	if (p->relist_direct)
		return known;

	/*
	 * The staging table holds jsonb stored inline and uncompressed (STORAGE
	 * EXTERNAL, largest toast_tuple_target): it is read once, by the merge,
	 * and compressing it would only cost CPU.
	 */
	/*
	 * The extension script creates schema kwatch_stage (0.7.0); a database
	 * where it was dropped since gets it again here, once: apply workers
	 * beginning relists at once wait for each other on a lock of kwatch's
	 * own table kwatch.tables (SHARE UPDATE EXCLUSIVE: it conflicts with
	 * itself, not with reads or writes), which no other role can take, as
	 * it needs UPDATE on the table (0.6.0 took an advisory lock any role
	 * could hold; doc/security.md, Roles).
	 */
	if (!OidIsValid(get_namespace_oid("kwatch_stage", true)))
	{
		/* (a schema older than 0.5.0 has no kwatch.tables: its registrations then) */
		if (SPI_execute(OidIsValid(get_relname_relid("tables", get_namespace_oid("kwatch", false))) ?
						"LOCK TABLE kwatch.tables IN SHARE UPDATE EXCLUSIVE MODE" :
						"LOCK TABLE kwatch.registrations IN SHARE UPDATE EXCLUSIVE MODE",
						false, 0) != SPI_OK_UTILITY)
			elog(ERROR, "could not lock the creation of schema kwatch_stage");
		AcceptInvalidationMessages();	/* see a schema made meanwhile */
		if (!OidIsValid(get_namespace_oid("kwatch_stage", true)) &&
			(SPI_execute("CREATE SCHEMA kwatch_stage", false, 0) != SPI_OK_UTILITY ||
			 SPI_execute("GRANT USAGE ON SCHEMA kwatch_stage TO PUBLIC", false, 0) != SPI_OK_UTILITY))
			elog(ERROR, "could not create schema kwatch_stage");
	}
	stage_schema_check();
	rc = SPI_execute(psprintf("SELECT to_regclass('%s') IS NULL", stage), true, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not look up staging table");
	if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
	{
		/*
		 * The index on uid makes the sweep in kw_sync_relist_finish linear
		 * whatever the mirror table's statistics say (see there).
		 */
		if (SPI_execute(psprintf("CREATE UNLOGGED TABLE %s (uid text, resource_version text, object jsonb) "
								 "WITH (toast_tuple_target = 8160, autovacuum_enabled = false)",
								 stage), false, 0) != SPI_OK_UTILITY ||
			SPI_execute(psprintf("ALTER TABLE %s ALTER COLUMN object SET STORAGE EXTERNAL",
								 stage), false, 0) != SPI_OK_UTILITY ||
			SPI_execute(psprintf("CREATE INDEX ON %s (uid)", stage), false, 0) != SPI_OK_UTILITY)
			elog(ERROR, "could not create staging table");
	}
	else if (SPI_execute(psprintf("TRUNCATE %s", stage), false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not empty staging table");
	return known;
}

/*
 * kw_sync_known_rows: a hash of uid -> resourceVersion (known_rows.c) of
 * the rows of the watch's cluster in its mirror table (read as the table's
 * owner), allocated in `cxt`.
 */
HTAB *
kw_sync_known_rows(KwSyncPlans *p, KwRegistration *reg, MemoryContext cxt)
{
	HTAB	   *known;
	Datum		arg = CStringGetTextDatum(reg->server);
	Oid			type = TEXTOID;
	int			rc;
	KwAsOwner	as_owner = {0};

	kw_as_owner_begin(table_owner(reg), &as_owner);
	/* what a real object can hold: an owner's oversized rows are not sent back */
	rc = SPI_execute_with_args(psprintf("SELECT uid, resource_version FROM %s WHERE cluster = $1"
										" AND octet_length(uid) < %d"
										" AND octet_length(resource_version) < %d",
										p->qualified, KW_UID_KEYLEN, KW_RV_LEN), 1, &type, &arg, NULL, true, 0);
	kw_as_owner_end(&as_owner);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not read current rows: %s", SPI_result_code_string(rc));
	known = kw_known_create((long) SPI_processed, cxt);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		char	   *uid = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		char	   *rv = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2);

		kw_known_add(known, uid, rv);
		if (uid)
			pfree(uid);
		if (rv)
			pfree(rv);
	}
	SPI_freetuptable(SPI_tuptable);
	return known;
}

/*
 * kw_sync_plans_set_direct: whether the LIST in progress goes straight
 * into the mirror table (kw_sync_relist_begin decided; an apply worker
 * other than the one that began it is told so with the batch).
 */
void
kw_sync_plans_set_direct(KwSyncPlans *p, bool direct)
{
	p->relist_direct = direct;
}

static Datum
text_array(KwObject *objs, int n, int field)
{
	Datum	   *elems = palloc(sizeof(Datum) * n);
	bool	   *nulls = palloc(sizeof(bool) * n);
	int			dims[1] = {n};
	int			lbs[1] = {1};

	for (int i = 0; i < n; i++)
	{
		const char *v = field == 0 ? objs[i].uid :
		field == 1 ? objs[i].resource_version : objs[i].json;

		nulls[i] = (v == NULL);
		if (v == NULL)
			elems[i] = (Datum) 0;
		else if (field == 2)
			elems[i] = PointerGetDatum(cstring_to_text_with_len(v, objs[i].json_len));
		else
			elems[i] = CStringGetTextDatum(v);
	}
	return PointerGetDatum(construct_md_array(elems, nulls, 1, dims, lbs,
											  TEXTOID, -1, false, TYPALIGN_INT));
}

/*
 * in_subxact: runs fn(arg) inside a subtransaction.  Returns NULL when it
 * returned (the subtransaction released: SPI_tuptable holds what its last
 * statement returned), else the error's message, its SQLSTATE in
 * *sqlstate, the subtransaction rolled back and the outer transaction
 * usable (the pattern of PL/pgSQL's exception blocks, pl_exec.c).
 */
static char *
in_subxact(void (*fn) (void *), void *arg, int *sqlstate)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	char	   *volatile err = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);
	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		ErrorData  *ed;

		MemoryContextSwitchTo(oldcxt);
		ed = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
		err = pstrdup(ed->message);
		*sqlstate = ed->sqlerrcode;
		FreeErrorData(ed);
	}
	PG_END_TRY();
	return err;
}

typedef struct StageArgs
{
	SPIPlanPtr	plan;
	Oid			copy_relid;
	const char *cluster;
	KwObject   *objs;
	int			n;
	bool	   *copied;
} StageArgs;

static void
stage_run(void *arg)
{
	StageArgs  *a = (StageArgs *) arg;
	Datum		values[4];
	int			rc;

	if (OidIsValid(a->copy_relid))
	{
		*a->copied = kw_copy_rows(a->copy_relid, a->cluster, a->objs, a->n);
		return;
	}
	values[0] = text_array(a->objs, a->n, 0);
	values[1] = text_array(a->objs, a->n, 1);
	values[2] = text_array(a->objs, a->n, 2);
	values[3] = CStringGetTextDatum(a->cluster);
	rc = SPI_execute_plan(a->plan, values, NULL, false, 0);
	if (rc != SPI_OK_INSERT && rc != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "staging failed: %s", SPI_result_code_string(rc));
}

/*
 * stage_try: inserts objs[0..n) inside a subtransaction: with COPY into
 * `copy_relid` when it is valid (kw_copy_rows, with `cluster` as its
 * cluster column when that is not NULL; *copied says whether COPY could
 * write the table, if not nothing was done), else with `plan` (the staging
 * table's insert or the direct insert into the mirror table, whose 4th
 * parameter is the cluster).  Returns NULL on success, with SPI_tuptable
 * holding what the plan returned, else the error message (the
 * subtransaction rolled back, the outer transaction usable).
 */
static char *
stage_try(SPIPlanPtr plan, Oid copy_relid, const char *cluster, KwObject *objs, int n,
		  int *sqlstate, bool *copied)
{
	StageArgs	a = {plan, copy_relid, cluster, objs, n, copied};

	return in_subxact(stage_run, &a, sqlstate);
}

/*
 * insert_plan: the statement kw_sync_relist_stage runs for a batch: into
 * the staging table, or for a list going straight into the mirror table
 * the relist merge's INSERT (kw_sync_relist_finish) reading the batch
 * instead of the staging table.
 */
static void notify_rows(KwRegistration *reg, SPITupleTable *rows, uint64 nrows,
						KwEventType fixed, bool first_is_inserted, HTAB *known,
						KwApplyCounts *counts);
static void notify_objects(KwRegistration *reg, const KwObject *objs, int n,
						   KwApplyCounts *counts);

static SPIPlanPtr
insert_plan(KwSyncPlans *p)
{
	Oid			types[4] = {TEXTARRAYOID, TEXTARRAYOID, TEXTARRAYOID, TEXTOID};

	if (!p->relist_direct && p->stage == NULL)
		p->stage = prepare(psprintf("INSERT INTO %s (uid, resource_version, object) "
									"SELECT u, r, o::jsonb FROM unnest($1::text[], $2::text[], $3::text[]) AS t(u, r, o)",
									p->stage_table), 4, types);
	else if (p->relist_direct && p->insert == NULL)
		p->insert = prepare(psprintf("INSERT INTO %s AS t (cluster, uid, resource_version, object) "
									 "SELECT $4, u, r, o::jsonb FROM unnest($1::text[], $2::text[], $3::text[]) AS s(u, r, o) "
									 "ON CONFLICT (cluster, uid) DO UPDATE "
									 "SET resource_version = EXCLUDED.resource_version, object = EXCLUDED.object "
									 "WHERE t.resource_version IS DISTINCT FROM EXCLUDED.resource_version "
									 "RETURNING (xmax = 0), namespace, name, uid, resource_version",
									 p->qualified), 4, types);
	return p->relist_direct ? p->insert : p->stage;
}

/*
 * stage_batch: stage_try of objs[0..n), with COPY (copy_rows.c) where it
 * can write the table, else, or when COPY met a uid already there (listed
 * twice), with the batch's INSERT, whose outcome is then the batch's.  A
 * list going straight into the mirror table runs it as the table's owner
 * and notifies the rows it wrote (as a relist merge does: ADDED,
 * preexisting), counted in *counts.
 */
static char *
stage_batch(KwSyncPlans *p, KwRegistration *reg, KwObject *objs, int n,
			int *sqlstate, KwApplyCounts *counts)
{
	KwAsOwner	as_owner = {0};
	char	   *err;
	bool		copied = false;
	Oid			relid;

	if (p->relist_direct)
	{
		relid = mirror_relid(reg);
		kw_as_owner_begin(kw_rel_owner(relid), &as_owner);	/* planning included */
	}
	else
		relid = DatumGetObjectId(DirectFunctionCall1(regclassin,
													 CStringGetDatum(p->stage_table)));
	err = stage_try(NULL, relid, p->relist_direct ? reg->server : NULL, objs, n,
					sqlstate, &copied);
	if (err == NULL && copied)
	{
		if (p->relist_direct)
		{
			kw_as_owner_end(&as_owner);
			notify_objects(reg, objs, n, counts);
		}
	}

	/*
	 * The INSERT where COPY cannot write the table, or met a uid already
	 * in it (ON CONFLICT writes that one); any other error is the batch's
	 * (stage_singly takes the objects' data errors one by one and raises
	 * the rest: a cancel, kwatch.apply_timeout, a lock timeout is not run
	 * again).
	 */
	else if (err == NULL || *sqlstate == ERRCODE_UNIQUE_VIOLATION)
	{
		err = stage_try(insert_plan(p), InvalidOid, reg->server, objs, n, sqlstate, NULL);
		if (err == NULL && p->relist_direct)
		{
			SPITupleTable *rows = SPI_tuptable;
			uint64		nrows = SPI_processed;

			kw_as_owner_end(&as_owner);
			notify_rows(reg, rows, nrows, KW_EV_ADDED, true, NULL, counts);
			SPI_freetuptable(rows);
		}
	}
	kw_as_owner_end(&as_owner);	/* nothing when not begun or ended */
	return err;
}

/*
 * stage_singly: after the batch objs[0..nobjs) failed with `err`
 * (`sqlstate`), stages its objects one by one, skipping (and logging) the
 * ones PostgreSQL rejects.  Only data errors (an object jsonb cannot store:
 * class 22, or one over a limit: class 54) are the objects' fault, and a
 * uid the batch names twice (an API server's bug; class 21, "ON CONFLICT
 * DO UPDATE command cannot affect row a second time"), whose objects one
 * by one are each written, the later one last, as client-go's store keeps
 * the later of two items with one key; anything else (disk full, out of
 * memory) is raised, so the relist is retried rather than committed
 * without these objects.  Returns the number skipped.
 */
static int
stage_singly(KwSyncPlans *p, KwRegistration *reg, KwObject *objs, int nobjs,
			 char *err, int sqlstate, KwApplyCounts *counts)
{
	int			skipped = 0;

	if (ERRCODE_TO_CATEGORY(sqlstate) != ERRCODE_DATA_EXCEPTION &&
		ERRCODE_TO_CATEGORY(sqlstate) != ERRCODE_PROGRAM_LIMIT_EXCEEDED &&
		sqlstate != ERRCODE_CARDINALITY_VIOLATION)
		ereport(ERROR, (errcode(sqlstate), errmsg("%s", err)));

	for (int i = 0; i < nobjs; i++)
	{
		err = stage_batch(p, reg, &objs[i], 1, &sqlstate, counts);

		if (err)
		{
			skipped++;
			ereport(WARNING,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("kwatch: skipped object %s%s%s (uid %s) of %s from server \"%s\": %s",
							objs[i].namespace ? objs[i].namespace : "",
							objs[i].namespace ? "/" : "", objs[i].name,
							objs[i].uid, reg->plural, reg->server, err)));
		}
	}
	return skipped;
}

/*
 * kw_sync_relist_stage: appends `nobjs` listed objects to the staging
 * table, or inserts them into the mirror table when the list goes straight
 * there (kw_sync_relist_begin), adding what they changed to *counts;
 * objects with json == NULL are unchanged ones (kept, not rewritten).
 * One statement for the batch; if PostgreSQL rejects it (an object jsonb
 * cannot store), the objects are staged one by one and the rejected ones
 * skipped, logged with their identity and returned in the count.  Returns
 * the number of objects skipped.
 */
int
kw_sync_relist_stage(KwSyncPlans *p, KwRegistration *reg, KwObject *objs,
					 int nobjs, KwApplyCounts *counts)
{
	int			skipped = 0;
	char	   *err;
	int			sqlstate = 0;

	if (nobjs == 0)
		return 0;
	if (p->relist_direct)
	{
		lock_registration(p, reg);
		/* written into the mirror table in this transaction: for history */
		for (int i = 0; i < nobjs; i++)
			kw_change_managers_note(&objs[i]);
	}
	if ((err = stage_batch(p, reg, objs, nobjs, &sqlstate, counts)) != NULL)
		skipped = stage_singly(p, reg, objs, nobjs, err, sqlstate, counts);
	if (p->relist_direct)
		kw_events_checkpoint();
	return skipped;
}

/*
 * report_listed: counts change `c` a LIST found in *counts and adds it to
 * the event stream, notified when the watch notifies (notify_rows,
 * notify_objects).
 */
static void
report_listed(KwRegistration *reg, const KwChange *c, KwApplyCounts *counts)
{
	if (c->type == KW_EV_ADDED)
		counts->added++;
	else if (c->type == KW_EV_MODIFIED)
		counts->modified++;
	else
		counts->deleted++;
	/* every change goes to the event stream, notified or not */
	kw_events_add(reg, c, reg->notify);
	if (reg->notify)
		counts->notified++;
}

/*
 * notify_rows: reports each of the `nrows` rows a relist statement returned (`rows`:
 * [inserted,] namespace, name, uid, resource_version) to the event stream
 * and NOTIFY, as changes a LIST found (preexisting).  `fixed` is the type
 * unless first_is_inserted (the merge: ADDED or MODIFIED, with the row's
 * previous resourceVersion from `known`); the sweep's DELETEDs are
 * inferred, their final state unknown.
 */
static void
notify_rows(KwRegistration *reg, SPITupleTable *rows, uint64 nrows,
			KwEventType fixed, bool first_is_inserted, HTAB *known,
			KwApplyCounts *counts)
{
	TupleDesc	desc = rows->tupdesc;
	int			off = first_is_inserted ? 1 : 0;

	for (uint64 i = 0; i < nrows; i++)
	{
		HeapTuple	tup = rows->vals[i];
		KwChange	c = {.type = fixed};
		char	   *namespace = SPI_getvalue(tup, desc, off + 1);
		char	   *name = SPI_getvalue(tup, desc, off + 2);
		char	   *uid = SPI_getvalue(tup, desc, off + 3);
		char	   *rv = SPI_getvalue(tup, desc, off + 4);
		if (first_is_inserted)
		{
			bool		isnull;

			c.type = DatumGetBool(SPI_getbinval(tup, desc, 1, &isnull)) ?
				KW_EV_ADDED : KW_EV_MODIFIED;
		}
		c.namespace = namespace;
		c.name = name;
		c.uid = uid;
		c.resource_version = rv;
		c.preexisting = true;
		c.final_state_unknown = (c.type == KW_EV_DELETED);
		if (c.type == KW_EV_MODIFIED)
			c.previous_resource_version = kw_known_rv(known, uid);

		report_listed(reg, &c, counts);
		pfree(uid);
		pfree(rv);
		if (namespace)
			pfree(namespace);
		if (name)
			pfree(name);
	}
}

/*
 * notify_objects: notify_rows for the `n` objects a COPY has just
 * inserted into an empty mirror table (stage_batch): each ADDED, found by
 * a LIST (preexisting), named as the object's metadata names it (the
 * namespace and name columns are generated from it).
 */
static void
notify_objects(KwRegistration *reg, const KwObject *objs, int n, KwApplyCounts *counts)
{
	for (int i = 0; i < n; i++)
	{
		KwChange	c = {.type = KW_EV_ADDED};

		c.namespace = objs[i].namespace;
		c.name = objs[i].name;
		c.uid = objs[i].uid;
		c.resource_version = objs[i].resource_version;
		c.preexisting = true;
		report_listed(reg, &c, counts);
	}
}

/*
 * merge_statement: the relist merge (kw_sync_relist_finish), ($1 cluster):
 * inserts the staged objects that are new, updates the changed ones
 * (unchanged ones are staged without their object, and a row whose
 * resourceVersion is the same is not rewritten: PROTOCOL 23), returning
 * (inserted, namespace, name, uid, resource_version) of each row written.
 * `distinct` keeps one row per uid (whichever of them the sort by uid
 * puts first: which one of an API server's twins is the later is not
 * known once several apply workers staged them) for a list that named a
 * uid twice.
 */
static char *
merge_statement(KwSyncPlans *p, bool distinct)
{
	return psprintf("INSERT INTO %s AS t (cluster, uid, resource_version, object) "
					"SELECT %s$1, s.uid, s.resource_version, s.object "
					"FROM %s s WHERE s.object IS NOT NULL %s"
					"ON CONFLICT (cluster, uid) DO UPDATE "
					"SET resource_version = EXCLUDED.resource_version, object = EXCLUDED.object "
					"WHERE t.resource_version IS DISTINCT FROM EXCLUDED.resource_version "
					"RETURNING (xmax = 0), namespace, name, uid, resource_version",
					p->qualified, distinct ? "DISTINCT ON (s.uid) " : "", p->stage_table,
					distinct ? "ORDER BY s.uid " : "");
}

/* staged_twice: whether staging table `stage` holds a uid twice (with its object) */
static bool
staged_twice(const char *stage)
{
	if (SPI_execute(psprintf("SELECT 1 FROM %s WHERE object IS NOT NULL "
							 "GROUP BY uid HAVING pg_catalog.count(*) > 1 LIMIT 1", stage),
					true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read staging table");
	return SPI_processed == 1;
}

typedef struct MergeArgs
{
	SPIPlanPtr	plan;
	Datum		cluster;
} MergeArgs;

static void
merge_run(void *arg)
{
	MergeArgs  *m = (MergeArgs *) arg;
	int			rc = SPI_execute_plan(m->plan, &m->cluster, NULL, false, 0);

	if (rc != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "relist merge failed: %s", SPI_result_code_string(rc));
}

/*
 * kw_sync_relist_finish: merges the staged list into the mirror table in
 * the current transaction: inserts new objects, updates changed ones,
 * deletes rows missing from the list (client-go's DeletedFinalStateUnknown,
 * PROTOCOL 23, 24), notifies each (as found by a LIST, with the previous
 * resourceVersion of a MODIFIED from `known`, kw_sync_relist_begin's hash),
 * and stores `list_rv` as the resume point.  The caller numbers the changes
 * (kw_events_checkpoint) once nothing else runs a table owner's code.
 */
void
kw_sync_relist_finish(KwSyncPlans *p, KwRegistration *reg, const char *list_rv,
					  HTAB *known, KwApplyCounts *counts)
{
	Datum		cluster = CStringGetTextDatum(reg->server);
	int			rc;
	const char *stage = p->stage_table;
	Oid			owner;
	KwAsOwner	as_owner = {0};
	Oid			cluster_type = TEXTOID;
	SPITupleTable *merged,
			   *swept;
	uint64		nmerged,
				nswept;

	save_checkpoint(p, reg, list_rv);
	if (p->relist_direct)
		return;					/* every batch is in the table already */

	/*
	 * Plans that do not depend on the planner's luck.  The mirror table's
	 * statistics often describe another table than the one being merged
	 * into: the first sync of a second cluster, or of a namespace-scoped
	 * watch, into a populated and analyzed table; a relist after the table
	 * grew 100x since its last ANALYZE; a relist right after a restore.
	 * They then say the watch's cluster has about one row, and without an
	 * index on the staging table's uid the sweep below was planned as
	 *
	 *	 Delete on pods t
	 *	   ->  Nested Loop Anti Join  (Join Filter: s.uid = t.uid)
	 *			 ->  Index Scan using pods_pkey on pods t  (rows=1 estimated)
	 *			 ->  Seq Scan on kwatch_stage_N s          (rows=10000)
	 *
	 * which scans the whole staging table once for every row the merge has
	 * just inserted: quadratic, 193 s for 10,000 pods.  With the index
	 * (created with the staging table) every plan the planner can choose
	 * is linear or n log n in the objects listed: a nested loop probes the
	 * index once per mirror row, a hash or merge anti join reads each side
	 * once; the merge itself probes the mirror table's primary key once per
	 * staged object.  The staging table is never analyzed: the planner
	 * takes a never-analyzed table's size from its current number of pages
	 * (estimate_rel_size), which is right, and ANALYZE would cost more than
	 * it tells: even for the uid column alone it reads a sample of up to
	 * 30,000 whole rows into memory, objects included (150 MB for 30,000
	 * pods: it was the worker's peak memory).  test_relist_plans.py checks
	 * the shape of the plan the worker runs.
	 */

	/* the owner reads the staging table in the merge and the sweep */
	owner = table_owner(reg);
	if (!superuser_arg(owner) &&
		SPI_execute(psprintf("GRANT SELECT ON %s TO %s", stage,
							 quote_identifier(GetUserNameFromId(owner, false))),
					false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not grant the staging table to the mirror's owner");
	kw_as_owner_begin(owner, &as_owner);	/* planning included */
	/* each on its own: a relist cut off between the two prepares them later */
	if (p->sweep == NULL)
		p->sweep = prepare(psprintf(
									"DELETE FROM %s t WHERE t.cluster = $1 "
									"AND NOT EXISTS (SELECT 1 FROM %s s WHERE s.uid = t.uid) "
									"RETURNING namespace, name, uid, resource_version",
									p->qualified, stage), 1, &cluster_type);
	if (p->merge == NULL)
		p->merge = prepare(merge_statement(p, false), 1, &cluster_type);

	/*
	 * Both statements first, their changes reported after: the first
	 * report takes the event stream's writer lock until commit (events.c),
	 * which must not wait on the owner's triggers the statements fire.  The
	 * sweep before the merge (on different uids they commute): an object
	 * deleted and created again under its name while the watch was away is
	 * never held by two rows at once, which an owner's unique index on the
	 * name would refuse (and a history reader would see); notified in the
	 * same order.
	 */
	kw_change_origin_set(KW_ORIGIN_RELIST); /* for history: history.c */
	rc = SPI_execute_plan(p->sweep, &cluster, NULL, false, 0);
	if (rc != SPI_OK_DELETE_RETURNING)
		elog(ERROR, "relist sweep failed: %s", SPI_result_code_string(rc));
	kw_change_origin_set(KW_ORIGIN_WATCH);
	swept = SPI_tuptable;
	nswept = SPI_processed;
	{
		MergeArgs	m = {p->merge, cluster};
		int			sqlstate;
		char	   *err = in_subxact(merge_run, &m, &sqlstate);

		/*
		 * A uid staged twice (an API server's bug: 21000, "ON CONFLICT DO
		 * UPDATE command cannot affect row a second time") would fail
		 * every relist again: the merge then writes one of the two.  Only
		 * then, so that a relist pays no sort for it, and only when the
		 * staging table (kwatch's, which runs no owner's code) holds one:
		 * a 21000 the owner's trigger raised is the batch's error.
		 */
		if (err && sqlstate == ERRCODE_CARDINALITY_VIOLATION && staged_twice(stage))
		{
			ereport(WARNING,
					(errcode(ERRCODE_CARDINALITY_VIOLATION),
					 errmsg("kwatch: the list of %s from server \"%s\" names a uid twice; one of its objects is kept",
							reg->plural, reg->server)));
			if (p->merge_distinct == NULL)
				p->merge_distinct = prepare(merge_statement(p, true), 1, &cluster_type);
			m.plan = p->merge_distinct;
			merge_run(&m);
		}
		else if (err)
			ereport(ERROR, (errcode(sqlstate), errmsg("%s", err)));
	}
	merged = SPI_tuptable;
	nmerged = SPI_processed;
	kw_as_owner_end(&as_owner);

	notify_rows(reg, swept, nswept, KW_EV_DELETED, false, known, counts);
	SPI_freetuptable(swept);
	notify_rows(reg, merged, nmerged, KW_EV_ADDED, true, known, counts);
	SPI_freetuptable(merged);

	/* before the event stream's lock (events.c): the owner may read this table */
	if (SPI_execute(psprintf("TRUNCATE %s", stage), false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not empty staging table");
}
