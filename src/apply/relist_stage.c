/*-------------------------------------------------------------------------
 *
 * relist_stage.c
 *		The start and the pages of a relist: the staging table made ready,
 *		each page of the LIST staged (or, for the first LIST into an empty
 *		table, inserted straight into the mirror table).
 *
 * A page is staged in a subtransaction (kw_in_subxact), by COPY where it
 * can write the table (copy_rows.c), else by an INSERT; a page PostgreSQL
 * rejects is staged object by object and the rejected ones skipped.  The
 * merge that ends the relist is merge.c's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "kw_common.h"
#include "kw_apply.h"
#include "kw_sync.h"
#include "kw_sync_plans.h"
#include "kw_as_owner.h"
#include "kw_events.h"

/*
 * kw_sync_relist_begin: prepares a relist: creates (once) and empties the
 * watch's staging table, and returns a hash of uid -> resourceVersion of
 * the rows the mirror table holds now (allocated in `cxt`), so unchanged
 * objects can be staged without their body.  With `allow_direct` (the
 * watch's first LIST, no checkpoint) and no row of the watch's cluster in
 * the table, the list goes straight into the mirror table instead
 * (sync.c, top of file) and no staging table is needed.
 *
 * The staging table is kwatch_stage.relist_stage_<watch id>
 * (kw_stage_table_prepare, stage_table.c, says what it is).
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
	HTAB	   *known = kw_sync_known_rows(p, reg, cxt);

	if (forget_checkpoint)
	{
		Datum		id = Int32GetDatum(reg->id);
		Oid			type = INT4OID;

		if (SPI_execute_with_args("UPDATE kwatch.registrations SET resource_version = NULL"
								  " WHERE id = $1", 1, &type, &id, NULL, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "could not clear the checkpoint of watch %d", reg->id);
		kw_sync_registration_found(reg);
	}

	/* nothing to replace: straight into the mirror table (sync.c, top of file) */
	p->relist_direct = allow_direct && hash_get_num_entries(known) == 0;
	if (p->relist_direct)
		return known;

	kw_stage_table_prepare(p->stage_table);
	return known;
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
	values[0] = kw_sync_text_array(a->objs, a->n, 0);
	values[1] = kw_sync_text_array(a->objs, a->n, 1);
	values[2] = kw_sync_text_array(a->objs, a->n, 2);
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

	return kw_in_subxact(stage_run, &a, sqlstate);
}

/*
 * insert_plan: the statement kw_sync_relist_stage runs for a batch: into
 * the staging table, or for a list going straight into the mirror table
 * the relist merge's INSERT (kw_sync_relist_finish) reading the batch
 * instead of the staging table.
 */
static SPIPlanPtr
insert_plan(KwSyncPlans *p)
{
	Oid			types[4] = {TEXTARRAYOID, TEXTARRAYOID, TEXTARRAYOID, TEXTOID};

	if (!p->relist_direct && p->stage == NULL)
		p->stage = kw_sync_prepare(psprintf("INSERT INTO %s (uid, resource_version, object) "
									"SELECT u, r, o::jsonb FROM unnest($1::text[], $2::text[], $3::text[]) AS t(u, r, o)",
									p->stage_table), 4, types);
	else if (p->relist_direct && p->insert == NULL)
		p->insert = kw_sync_prepare(psprintf("INSERT INTO %s AS t (cluster, uid, resource_version, object) "
									 "SELECT $4, u, r, o::jsonb FROM unnest($1::text[], $2::text[], $3::text[]) AS s(u, r, o) "
									 "ON CONFLICT (cluster, uid) DO UPDATE "
									 "SET resource_version = EXCLUDED.resource_version, object = EXCLUDED.object "
									 "WHERE t.resource_version IS DISTINCT FROM EXCLUDED.resource_version "
									 "RETURNING (xmax = 0), namespace, name, uid, resource_version",
									 p->qualified), 4, types);
	return p->relist_direct ? p->insert : p->stage;
}

/*
 * notify_objects: kw_sync_report_rows for the `n` objects a COPY has just
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
		kw_sync_report_listed(reg, &c, counts);
	}
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
		relid = kw_sync_mirror_relid(reg);
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
			kw_sync_report_rows(reg, rows, nrows, KW_EV_ADDED, true, NULL, counts);
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
		kw_sync_lock_registration(p, reg);
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
