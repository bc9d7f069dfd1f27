/*-------------------------------------------------------------------------
 *
 * owner_functions.c
 *		SQL functions that run one of kwatch's statements on a mirror table
 *		as that table's owner (as_owner.c): unwatch's delete of a cluster's
 *		rows, watch()'s restore of generated columns, history() and
 *		watch()'s other statements on a role's table.  Called by kwatch's
 *		SECURITY DEFINER functions, which must never run a table owner's
 *		code with their definer's rights; EXECUTE is revoked from PUBLIC.
 *		Each first sets the caller's constraints IMMEDIATE (firing what the
 *		caller had deferred with the caller's rights, kw_current_caller(),
 *		never the extension owner's), for the rest of its transaction, so that nothing the owner's code queues fires at the
 *		caller's commit with the caller's rights (as_owner.c).  as_of()
 *		reads a history table as its owner for a caller that may SELECT it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_policy.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "parser/parse_func.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rls.h"
#include "utils/tuplestore.h"

#include "kw_common.h"
#include "kw_as_owner.h"

PG_FUNCTION_INFO_V1(kwatch_delete_cluster_rows);

/*
 * kwatch_delete_cluster_rows: SQL kwatch._delete_cluster_rows(rel regclass,
 * cluster text) -> bigint, the rows of `cluster` deleted from mirror table
 * `rel` as its owner (KwAsOwner), so that kwatch.unwatch(), a SECURITY
 * DEFINER function, never fires a table owner's DELETE trigger with its
 * definer's rights.  ERRORs: whatever the DELETE raises.
 */
Datum
kwatch_delete_cluster_rows(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	Datum		cluster = PG_GETARG_DATUM(1);
	Oid			type = TEXTOID;
	KwAsOwner	as_owner = {0};
	Oid			owner = kw_rel_owner(relid);
	char	   *sql;
	int64		n;

	sql = psprintf("DELETE FROM %s WHERE cluster = $1",
				   quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
											  get_rel_name(relid)));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	kw_fire_deferred_triggers_as(kw_current_caller());	/* as_owner.c, "Deferred triggers" */
	kw_as_owner_begin(owner, &as_owner);
	PG_TRY();
	{
		kw_change_origin_set(KW_ORIGIN_UNWATCH);	/* for history: history.c */
		if (SPI_execute_with_args(sql, 1, &type, &cluster, NULL, false, 0) != SPI_OK_DELETE)
			elog(ERROR, "could not delete the rows of cluster from %s", get_rel_name(relid));
		n = (int64) SPI_processed;
		kw_change_origin_set(KW_ORIGIN_WATCH);
	}
	PG_CATCH();
	{
		/* the abort restores the identity; a caught error must not leave deferral refused */
		kw_refuse_deferral_end();
		PG_RE_THROW();
	}
	PG_END_TRY();
	kw_as_owner_end(&as_owner);
	SPI_finish();
	PG_RETURN_INT64(n);
}

PG_FUNCTION_INFO_V1(kwatch_restore_columns_as_owner);

/*
 * kwatch_restore_columns_as_owner: SQL kwatch._restore_columns_as_owner(rel
 * regclass, api_group text, plural text) -> void: runs
 * kwatch.restore_generated_columns() on the existing mirror table `rel` as
 * its owner (KwAsOwner).  Its ALTER TABLE evaluates expressions over the
 * table's rows, which the owner can steer (an implicit cast from a column
 * type of their own, say): kwatch.watch() must never run that with the
 * extension owner's rights.  ERRORs: those of ALTER TABLE.
 */
Datum
kwatch_restore_columns_as_owner(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	Datum		args[3];
	Oid			types[3] = {TEXTOID, TEXTOID, TEXTOID};
	KwAsOwner	as_owner = {0};

	args[0] = CStringGetTextDatum(get_rel_name(relid));
	args[1] = PG_GETARG_DATUM(1);
	args[2] = PG_GETARG_DATUM(2);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	kw_fire_deferred_triggers_as(kw_current_caller());	/* as_owner.c, "Deferred triggers" */
	kw_as_owner_begin(kw_rel_owner(relid), &as_owner);
	PG_TRY();
	{
		if (SPI_execute_with_args("SELECT kwatch.restore_generated_columns($1, $2, $3)",
								  3, types, args, NULL, false, 0) != SPI_OK_SELECT)
			elog(ERROR, "could not restore the generated columns of %s", get_rel_name(relid));
	}
	PG_CATCH();
	{
		kw_refuse_deferral_end();
		PG_RE_THROW();
	}
	PG_END_TRY();
	kw_as_owner_end(&as_owner);
	SPI_finish();
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(kwatch_execute_as_owner);

/*
 * kwatch_execute_as_owner: SQL kwatch._execute_as_owner(rel regclass, sql
 * text) -> bigint: runs the statement `sql` (built by kwatch's own
 * functions, never by a user: EXECUTE is revoked from PUBLIC) as the owner
 * of relation `rel` under SECURITY_RESTRICTED_OPERATION with search_path
 * pinned (KwAsOwner), and returns the number of rows it processed.  For the
 * statements of history() and watch() that read or alter a role's mirror
 * table -- the first versions of a new history table, dropping a CRD's
 * former printer column -- which must never run the table owner's code (a
 * cast from a column type of theirs, a foreign table inheriting from the
 * mirror, a trigger) with the extension owner's rights.  ERRORs: those of
 * the statement.
 */
Datum
kwatch_execute_as_owner(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	char	   *sql = text_to_cstring(PG_GETARG_TEXT_PP(1));
	KwAsOwner	as_owner = {0};
	int64		n;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	kw_fire_deferred_triggers_as(kw_current_caller());	/* as_owner.c, "Deferred triggers" */
	kw_as_owner_begin(kw_rel_owner(relid), &as_owner);
	PG_TRY();
	{
		if (SPI_execute(sql, false, 0) < 0)
			elog(ERROR, "could not run a statement on %s as its owner", get_rel_name(relid));
		n = (int64) SPI_processed;
	}
	PG_CATCH();
	{
		kw_refuse_deferral_end();
		PG_RE_THROW();
	}
	PG_END_TRY();
	kw_as_owner_end(&as_owner);
	SPI_finish();
	PG_RETURN_INT64(n);
}

/* The columns as_of() returns, as a history table has them (history.c). */
static const struct
{
	const char *name;
	Oid			type;
}			history_columns[] = {
	{"cluster", TEXTOID}, {"namespace", TEXTOID}, {"name", TEXTOID},
	{"uid", TEXTOID}, {"resource_version", TEXTOID}, {"object", JSONBOID},
	{"valid", TSTZRANGEOID},
};

/*
 * history_table_of: the OID of the history table kwatch made for mirror
 * table `relid` (kwatch.history_tables, its history_oid checked against
 * pg_class by name and schema, so a table that merely has the name is never
 * taken), or InvalidOid when it has none.  Reads kwatch's own catalog as the
 * caller (readable by PUBLIC).  ERRORs when SPI fails.
 */
static Oid
history_table_of(Oid relid)
{
	Oid			k8s = get_namespace_oid("k8s", true);
	Oid			argtypes[2] = {TEXTOID, OIDOID};
	Datum		args[2];
	Oid			hoid = InvalidOid;
	bool		isnull;

	if (!OidIsValid(k8s) || get_rel_namespace(relid) != k8s)
		return InvalidOid;
	args[0] = CStringGetTextDatum(get_rel_name(relid));
	args[1] = ObjectIdGetDatum(k8s);
	if (SPI_execute_with_args("SELECT h.history_oid FROM kwatch.history_tables h"
							  " JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) h.history_oid"
							  "  AND c.relname OPERATOR(pg_catalog.=) h.history_table"
							  "  AND c.relnamespace OPERATOR(pg_catalog.=) $2"
							  " WHERE h.table_name OPERATOR(pg_catalog.=) $1",
							  2, argtypes, args, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read kwatch.history_tables");
	if (SPI_processed == 1)
		hoid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	return hoid;
}

/*
 * only_rbac_policy: whether the policies of table hoid are kwatch_rbac
 * alone (sql/schema/functions/rbac_rows.sql).
 */
static bool
only_rbac_policy(Oid hoid)
{
	Relation	rel = table_open(PolicyRelationId, AccessShareLock);
	ScanKeyData skey;
	SysScanDesc scan;
	HeapTuple	tup;
	int			n = 0;
	bool		rbac = false;

	ScanKeyInit(&skey, Anum_pg_policy_polrelid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(hoid));
	scan = systable_beginscan(rel, PolicyPolrelidPolnameIndexId, true, NULL, 1, &skey);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		n++;
		rbac = strcmp(NameStr(((Form_pg_policy) GETSTRUCT(tup))->polname), "kwatch_rbac") == 0;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return n == 1 && rbac;
}

/*
 * check_history_table: ERRORs unless `hoid` is a plain table with the
 * columns as_of() returns, of their types (42809: a view, a table turned
 * into one by a _RETURN rule, or a column of its owner's type is never
 * read), and unless the caller may SELECT them (42501), as it must to read
 * the table itself.  Row security the caller is subject to cannot be
 * applied by a read as the owner (who is exempt): refused (0A000), but for
 * the policy kwatch_rbac alone (kwatch.enable_rbac_rows), whose decision
 * as_of() applies itself: then returns true.
 */
static bool
check_history_table(Oid relid, Oid hoid)
{
	Oid			user = GetUserId();
	bool		all_columns = pg_class_aclcheck(hoid, user, ACL_SELECT) == ACLCHECK_OK;

	if (get_rel_relkind(hoid) != RELKIND_RELATION)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("history of %s is not a table: \"%s\"",
						get_rel_name(relid), get_rel_name(hoid)),
				 errdetail("kwatch reads only the table it made; its owner has replaced it.")));
	for (int i = 0; i < lengthof(history_columns); i++)
	{
		AttrNumber	att = get_attnum(hoid, history_columns[i].name);

		if (att == InvalidAttrNumber || get_atttype(hoid, att) != history_columns[i].type)
			ereport(ERROR,
					(errcode(ERRCODE_WRONG_OBJECT_TYPE),
					 errmsg("history table \"%s\" has no column \"%s\" of type %s",
							get_rel_name(hoid), history_columns[i].name,
							format_type_be(history_columns[i].type))));
		if (!all_columns && pg_attribute_aclcheck(hoid, att, user, ACL_SELECT) != ACLCHECK_OK)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied for table %s", get_rel_name(hoid))));
	}
	if (check_enable_rls(hoid, InvalidOid, true) != RLS_ENABLED)
		return false;
	if (only_rbac_policy(hoid))
		return true;
	ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("as_of() cannot apply the row security of \"%s\"", get_rel_name(hoid)),
				 errhint("Query k8s.%s directly: SELECT ... WHERE valid @> timestamptz '...'.",
						 quote_identifier(get_rel_name(hoid)))));
	return false;				/* not reached */
}

PG_FUNCTION_INFO_V1(kwatch_as_of);

/*
 * kwatch_as_of: SQL kwatch.as_of(table_name regclass, at timestamptz) ->
 * TABLE (cluster text, namespace text, name text, uid text,
 * resource_version text, object jsonb, valid tstzrange): the versions of
 * mirror table `table_name`'s objects valid at `at`, from the history table
 * kwatch made for it (history_table_of), one row per object.  The caller
 * needs SELECT on the history table (check_history_table), but the rows are
 * read as that table's owner, under SECURITY_RESTRICTED_OPERATION with
 * search_path pinned (KwAsOwner), from that table ONLY, after its kind and
 * column types are checked: whatever code of the owner's the read may run
 * runs with the owner's rights, never the caller's (as wait_current's
 * table_matches, wait_current.c).  ERRORs: 42P01 the table has no history;
 * 42809, 42501, 0A000 (check_history_table).
 */
Datum
kwatch_as_of(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	Datum		at = PG_GETARG_DATUM(1);
	Oid			argtype = TIMESTAMPTZOID;
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	KwAsOwner	as_owner = {0};
	Oid			hoid;
	char	   *sql;
	int			rc;
	bool		rbac;
	FmgrInfo	decide = {0};

	InitMaterializedSRF(fcinfo, 0);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	/*
	 * The caller's deferred triggers first (as_owner.c, "Deferred
	 * triggers"): one fired after the checks could change the table they
	 * checked (a column's type) before it is read.
	 */
	kw_fire_deferred_triggers_as(kw_current_caller());
	hoid = history_table_of(relid);
	if (!OidIsValid(hoid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("%s has no history", get_rel_name(relid)),
				 errhint("Turn it on with kwatch.history(table) or kwatch.watch(..., history => true).")));
	/* no other session alters it between the checks and the read */
	LockRelationOid(hoid, AccessShareLock);
	rbac = check_history_table(relid, hoid);
	sql = psprintf("SELECT cluster, namespace, name, uid, resource_version, object, valid"
				   " FROM ONLY k8s.%s WHERE valid OPERATOR(pg_catalog.@>) $1",
				   quote_identifier(get_rel_name(hoid)));
	kw_as_owner_begin(kw_rel_owner(hoid), &as_owner);
	PG_TRY();
	{
		rc = SPI_execute_with_args(sql, 1, &argtype, &at, NULL, true, 0);
	}
	PG_CATCH();
	{
		kw_refuse_deferral_end();
		PG_RE_THROW();
	}
	PG_END_TRY();
	kw_as_owner_end(&as_owner);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not read %s: %s", get_rel_name(hoid), SPI_result_code_string(rc));
	/* the rows are what the result declares, whatever ran meanwhile */
	if (SPI_tuptable->tupdesc->natts != lengthof(history_columns))
		elog(ERROR, "history table %s changed while it was read", get_rel_name(hoid));
	for (int k = 0; k < lengthof(history_columns); k++)
		if (TupleDescAttr(SPI_tuptable->tupdesc, k)->atttypid != history_columns[k].type)
			ereport(ERROR,
					(errcode(ERRCODE_WRONG_OBJECT_TYPE),
					 errmsg("history table \"%s\" changed while it was read", get_rel_name(hoid))));
	/* the caller's own decision (kwatch.rbac_visible), as the policy would apply it */
	if (rbac)
	{
		Oid			argtypes[3] = {REGCLASSOID, TEXTOID, TEXTOID};
		Oid			fn = LookupFuncName(list_make2(makeString("kwatch"), makeString("rbac_visible")),
										3, argtypes, false);

		fmgr_info(fn, &decide);
	}
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		Datum		values[lengthof(history_columns)];
		bool		nulls[lengthof(history_columns)];

		heap_deform_tuple(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, values, nulls);
		if (rbac &&
			(nulls[0] ||
			 !DatumGetBool(FunctionCall3(&decide, ObjectIdGetDatum(relid), values[0],
										 nulls[1] ? CStringGetTextDatum("") : values[1]))))
			continue;
		/* copied into the tuplestore's own memory, which outlives SPI_finish */
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	SPI_finish();
	return (Datum) 0;
}
