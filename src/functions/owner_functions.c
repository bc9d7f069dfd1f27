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
 *		caller's commit with the caller's rights (as_owner.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

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
