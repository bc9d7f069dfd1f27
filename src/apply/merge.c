/*-------------------------------------------------------------------------
 *
 * merge.c
 *		The end of a relist: the staged list merged into the mirror table
 *		and the rows it no longer has swept, with their plans, and the
 *		report of the changes a LIST found.
 *
 * The relist's pages were staged into the watch's staging table
 * (relist_stage.c, stage_table.c) over several short transactions; one
 * transaction merges them here, so readers see the old table or the new
 * one, never a mix (doc/protocol.md, rule 23).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"

#include "kw_common.h"
#include "kw_apply.h"
#include "kw_sync.h"
#include "kw_sync_plans.h"
#include "kw_as_owner.h"
#include "kw_events.h"

/*
 * kw_sync_report_listed: counts change `c` a LIST found in *counts and adds it to
 * the event stream, notified when the watch notifies (kw_sync_report_rows,
 * notify_objects).
 */
void
kw_sync_report_listed(KwRegistration *reg, const KwChange *c, KwApplyCounts *counts)
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
 * kw_sync_report_rows: reports each of the `nrows` rows a relist statement returned (`rows`:
 * [inserted,] namespace, name, uid, resource_version) to the event stream
 * and NOTIFY, as changes a LIST found (preexisting).  `fixed` is the type
 * unless first_is_inserted (the merge: ADDED or MODIFIED, with the row's
 * previous resourceVersion from `known`); the sweep's DELETEDs are
 * inferred, their final state unknown.
 */
void
kw_sync_report_rows(KwRegistration *reg, SPITupleTable *rows, uint64 nrows,
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

		kw_sync_report_listed(reg, &c, counts);
		pfree(uid);
		pfree(rv);
		if (namespace)
			pfree(namespace);
		if (name)
			pfree(name);
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

	kw_sync_save_checkpoint(p, reg, list_rv);
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
	owner = kw_sync_table_owner(reg);
	kw_stage_table_grant(stage, owner);
	kw_as_owner_begin(owner, &as_owner);	/* planning included */
	/* each on its own: a relist cut off between the two prepares them later */
	if (p->sweep == NULL)
		p->sweep = kw_sync_prepare(psprintf(
									"DELETE FROM %s t WHERE t.cluster = $1 "
									"AND NOT EXISTS (SELECT 1 FROM %s s WHERE s.uid = t.uid) "
									"RETURNING namespace, name, uid, resource_version",
									p->qualified, stage), 1, &cluster_type);
	if (p->merge == NULL)
		p->merge = kw_sync_prepare(merge_statement(p, false), 1, &cluster_type);

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
		char	   *err = kw_in_subxact(merge_run, &m, &sqlstate);

		/*
		 * A uid staged twice (an API server's bug: 21000, "ON CONFLICT DO
		 * UPDATE command cannot affect row a second time") would fail
		 * every relist again: the merge then writes one of the two.  Only
		 * then, so that a relist pays no sort for it, and only when the
		 * staging table (kwatch's, which runs no owner's code) holds one:
		 * a 21000 the owner's trigger raised is the batch's error.
		 */
		if (err && sqlstate == ERRCODE_CARDINALITY_VIOLATION && kw_stage_table_staged_twice(stage))
		{
			ereport(WARNING,
					(errcode(ERRCODE_CARDINALITY_VIOLATION),
					 errmsg("kwatch: the list of %s from server \"%s\" names a uid twice; one of its objects is kept",
							reg->plural, reg->server)));
			if (p->merge_distinct == NULL)
				p->merge_distinct = kw_sync_prepare(merge_statement(p, true), 1, &cluster_type);
			m.plan = p->merge_distinct;
			merge_run(&m);
		}
		else if (err)
			ereport(ERROR, (errcode(sqlstate), errmsg("%s", err)));
	}
	merged = SPI_tuptable;
	nmerged = SPI_processed;
	kw_as_owner_end(&as_owner);

	kw_sync_report_rows(reg, swept, nswept, KW_EV_DELETED, false, known, counts);
	SPI_freetuptable(swept);
	kw_sync_report_rows(reg, merged, nmerged, KW_EV_ADDED, true, known, counts);
	SPI_freetuptable(merged);

	/* before the event stream's lock (events.c): the owner may read this table */
	kw_stage_table_empty(stage);
}
