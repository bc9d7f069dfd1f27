/*-------------------------------------------------------------------------
 *
 * sync_plans.c
 *		A watch's prepared statements (KwSyncPlans, kw_sync_plans.h) and
 *		what every write of its mirror table does first: find the table,
 *		check kwatch's columns, lock or move the registration row.
 *
 * The plans are prepared on first use, inside the transaction of the
 * statement that needs them (SPI_keepplan), as their owner when the
 * statement runs as the mirror table's owner (as_owner.c).  The files that
 * run them: sync_events.c (watch events), relist_stage.c (a LIST's
 * batches), merge.c (the relist merge and sweep).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "nodes/makefuncs.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "storage/lockdefs.h"

#include "kw_common.h"
#include "kw_apply.h"
#include "kw_sync.h"
#include "kw_sync_plans.h"
#include "kw_as_owner.h"

/*
 * kw_sync_mirror_relid: the OID of mirror table k8s.<table_name>, after checking
 * that the columns kwatch writes still have kwatch's types.  An owner who
 * changed, say, cluster to a type of their own with an implicit cast would
 * have the worker run the cast's function; it would run as that owner
 * (KwAsOwner), but the worker refuses such a table outright.  ERRORs:
 * 42P01 (no table), 42804 (a column's type changed).
 */
Oid
kw_sync_mirror_relid(KwRegistration *reg)
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

/*
 * table_owner: the owner of the mirror table, checked by kw_sync_mirror_relid
 * (whose errors it raises): the role the writes run as (as_owner.c).
 */
Oid
kw_sync_table_owner(KwRegistration *reg)
{
	return kw_rel_owner(kw_sync_mirror_relid(reg));
}

/*
 * prepare: `sql` with `nargs` parameters of types `argtypes`, prepared and
 * kept (SPI_keepplan) for the life of the watch's KwSyncPlans.  ERRORs
 * (XX000) when SPI cannot prepare it.
 */
SPIPlanPtr
kw_sync_prepare(const char *sql, int nargs, Oid *argtypes)
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
 * kw_sync_registration_found: ERRORs (ERRCODE_UNDEFINED_OBJECT) unless the last
 * statement on the watch's registration row found it: the watch was
 * removed, and the whole apply rolls back.
 */
void
kw_sync_registration_found(KwRegistration *reg)
{
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("watch %d of %s was removed", reg->id, reg->plural)));
}

/*
 * kw_sync_save_checkpoint: stores `rv` as the watch's resume point.  ERRORs
 * (ERRCODE_UNDEFINED_OBJECT) when the registration is gone, which rolls the
 * whole apply back.
 */
void
kw_sync_save_checkpoint(KwSyncPlans *p, KwRegistration *reg, const char *rv)
{
	Datum		values[2];
	int			rc;

	if (p->checkpoint == NULL)
	{
		Oid			types[2] = {INT4OID, TEXTOID};

		p->checkpoint = kw_sync_prepare("UPDATE kwatch.registrations "
								"SET resource_version = $2, synced_at = now() "
								"WHERE id = $1", 2, types);
	}
	values[0] = Int32GetDatum(reg->id);
	values[1] = CStringGetTextDatum(rv);
	rc = SPI_execute_plan(p->checkpoint, values, NULL, false, 0);
	if (rc != SPI_OK_UPDATE)
		elog(ERROR, "checkpoint update failed: %s", SPI_result_code_string(rc));
	kw_sync_registration_found(reg);
}

/*
 * kw_sync_lock_registration: locks the watch's registration row, as
 * kw_sync_save_checkpoint does, for a transaction that writes the mirror table
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
void
kw_sync_lock_registration(KwSyncPlans *p, KwRegistration *reg)
{
	Datum		id = Int32GetDatum(reg->id);
	int			rc;

	/* first the registration's own lock, which a DELETE takes exclusively */
	kw_lock_registration(reg->id, AccessShareLock);
	if (p->lock == NULL)
	{
		Oid			type = INT4OID;

		p->lock = kw_sync_prepare("SELECT 1 FROM kwatch.registrations WHERE id = $1 FOR SHARE",
						  1, &type);
	}
	rc = SPI_execute_plan(p->lock, &id, NULL, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "registration lock failed: %s", SPI_result_code_string(rc));
	kw_sync_registration_found(reg);
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
	kw_as_owner_begin(kw_sync_table_owner(reg), &as_owner);
	rc = SPI_execute_with_args(sql, 1, &type, &arg, NULL, true, 1);
	kw_as_owner_end(&as_owner);
	if (rc != SPI_OK_SELECT)
		return 0;
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
									   1, &isnull));
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

	kw_as_owner_begin(kw_sync_table_owner(reg), &as_owner);
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

/*
 * kw_sync_text_array: a one-dimensional text[] of field `field` of
 * objs[0..n): 0 the uid, 1 the resourceVersion, 2 the object's JSON
 * (json_len bytes); a NULL field is a NULL element (an unchanged object
 * staged without its body).  Palloc'd in the current context.
 */
Datum
kw_sync_text_array(KwObject *objs, int n, int field)
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
