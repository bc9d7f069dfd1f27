/*-------------------------------------------------------------------------
 *
 * sync_events.c
 *		Watch events applied to a mirror table: ADDED/MODIFIED upserted,
 *		DELETED deleted, in segments of distinct uids, one multi-row
 *		statement per kind.
 *
 * Each event's change goes to the event stream (events.c) and NOTIFY in
 * the transaction that writes it; the checkpoint (the resume
 * resourceVersion) is written first, in the same transaction
 * (kw_sync_save_checkpoint, sync_plans.c), so a restart resumes exactly
 * there (doc/protocol.md, rule 21).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"

#include "kw_common.h"
#include "kw_apply.h"
#include "kw_sync.h"
#include "kw_sync_plans.h"
#include "kw_as_owner.h"
#include "kw_events.h"

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
	p->upsert = kw_sync_prepare(psprintf(
								 "INSERT INTO %s AS t (cluster, uid, resource_version, object) "
								 "SELECT $4, u, r, o::jsonb FROM unnest($1::text[], $2::text[], $3::text[]) AS s(u, r, o) "
								 "ON CONFLICT (cluster, uid) DO UPDATE "
								 "SET resource_version = EXCLUDED.resource_version, object = EXCLUDED.object "
								 "WHERE t.resource_version IS DISTINCT FROM EXCLUDED.resource_version "
								 "RETURNING t.uid, (xmax = 0), (SELECT o.resource_version FROM %s o "
								 "WHERE o.cluster = $4 AND o.uid = t.uid)",
								 p->qualified, p->qualified), 4, types);
	p->delete = kw_sync_prepare(psprintf("DELETE FROM %s WHERE cluster = $1 AND uid = ANY ($2) "
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
		Datum		values[2] = {cluster, kw_sync_text_array(dels, ndels, 0)};

		rc = SPI_execute_plan(p->delete, values, NULL, false, 0);
		if (rc != SPI_OK_DELETE_RETURNING)
			elog(ERROR, "delete failed: %s", SPI_result_code_string(rc));
		record_applied(applied, false);
	}
	if (nups > 0)
	{
		Datum		values[4] = {kw_sync_text_array(ups, nups, 0), kw_sync_text_array(ups, nups, 1),
		kw_sync_text_array(ups, nups, 2), cluster};

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

	kw_sync_save_checkpoint(p, reg, resume_rv);

	/*
	 * As the table's owner from here on, planning included: the statements
	 * are analyzed (and re-analyzed after invalidations) as the role that
	 * runs them.
	 */
	kw_as_owner_begin(kw_sync_table_owner(reg), &as_owner);
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
