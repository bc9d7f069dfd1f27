/*-------------------------------------------------------------------------
 *
 * relation_guard.c
 *		Keeps kwatch's mirror and history tables tables: a ProcessUtility
 *		hook refuses CREATE RULE ... ON SELECT on them to anyone but a
 *		superuser.
 *
 * On PostgreSQL 15 an ON SELECT rule named "_RETURN" turns a table into a
 * view in place, its OID kept (DefineQueryRewrite, rewrite/rewriteDefine.c;
 * PostgreSQL 16 removed the conversion).  kwatch reads a role's tables in
 * other roles' queries by OID: the views kubectl.<t> over a mirror table,
 * as_of() over a history table.  A table's owner that made it a view
 * would have its view's expressions (its functions) run by whoever reads
 * through kwatch, a superuser included: functions in a view run as the
 * querying role, only the view's table accesses are checked as its owner.
 * No ON SELECT rule other than "_RETURN" may exist on a table, so refusing
 * them all refuses just the conversion; rules on INSERT, UPDATE and DELETE,
 * which the worker runs as the owner, stay the owner's to make.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/lsyscache.h"

#include "kw_common.h"
#include "kw_functions.h"

static ProcessUtility_hook_type prev_ProcessUtility = NULL;

/*
 * is_kwatch_table: whether `relid` is a mirror table kwatch made
 * (kwatch.tables) or a history table (kwatch.history_tables), by OID.
 * False where the extension is not installed.  ERRORs when SPI fails.
 */
static bool
is_kwatch_table(Oid relid)
{
	Oid			nsp = get_namespace_oid("kwatch", true);
	Oid			argtype = OIDOID;
	Datum		arg = ObjectIdGetDatum(relid);
	bool		found;

	if (!OidIsValid(nsp) || !OidIsValid(get_relname_relid("tables", nsp)) ||
		!OidIsValid(get_relname_relid("history_tables", nsp)))
		return false;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("SELECT 1 FROM kwatch.tables WHERE relid OPERATOR(pg_catalog.=) $1"
							  " UNION ALL SELECT 1 FROM kwatch.history_tables"
							  " WHERE history_oid OPERATOR(pg_catalog.=) $1",
							  1, &argtype, &arg, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read kwatch.tables");
	found = SPI_processed > 0;
	SPI_finish();
	return found;
}

/*
 * check_rule: ERRORs (42501) when a role that is not a superuser creates an
 * ON SELECT rule on one of kwatch's tables (see the file header).
 */
static void
check_rule(RuleStmt *stmt)
{
	Oid			relid;

	if (stmt->event != CMD_SELECT || superuser())
		return;
	/*
	 * With the lock DefineRule takes (rewriteDefine.c), held to the end of
	 * the transaction: the name cannot come to mean another relation
	 * between this look and the statement's own (a decoy earlier in the
	 * search_path dropped while the statement waits)
	 */
	relid = RangeVarGetRelidExtended(stmt->relation, AccessExclusiveLock, RVR_MISSING_OK, NULL, NULL);
	if (OidIsValid(relid) && is_kwatch_table(relid))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("cannot create an ON SELECT rule on \"%s\": it is a table kwatch reads for other roles",
						get_rel_name(relid)),
				 errdetail("A rule would turn it into a view whose code runs for whoever reads it through kwatch.")));
}

/*
 * relation_guard_hook: the ProcessUtility hook (tcop/utility.h signature):
 * check_rule for CREATE RULE, then the statement as it came.
 */
static void
relation_guard_hook(PlannedStmt *pstmt, const char *queryString,
					bool readOnlyTree, ProcessUtilityContext context,
					ParamListInfo params, QueryEnvironment *queryEnv,
					DestReceiver *dest, QueryCompletion *qc)
{
	if (IsA(pstmt->utilityStmt, RuleStmt))
		check_rule((RuleStmt *) pstmt->utilityStmt);
	if (prev_ProcessUtility)
		prev_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
							queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
}

/*
 * kw_relation_guard_init: installs the hook; called by _PG_init in every
 * process that loads kwatch.
 */
void
kw_relation_guard_init(void)
{
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = relation_guard_hook;
}
