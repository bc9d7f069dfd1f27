/*-------------------------------------------------------------------------
 *
 * stage_table.c
 *		Schema kwatch_stage and the relist staging tables in it: the DDL the
 *		apply side runs at run time.
 *
 * A watch's staging table is kwatch_stage.relist_stage_<watch id>:
 * unlogged (what it holds is rebuilt by the next LIST after a crash), a
 * regular table rather than a temporary one because a relist's batches
 * and its merge are apply requests any apply worker may run
 * (apply_worker.c), and the one that merges must read what the others
 * staged, and outside the extension (ALTER EXTENSION ADD/DROP would make
 * every relist wait for any open transaction that called unwatch, which
 * drops the table: sql/schema/functions/mirror_tables.sql).  Its schema is
 * the worker's; the mirror table's owner is granted SELECT on the table
 * for the merge (merge.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/syscache.h"

#include "kw_common.h"
#include "kw_sync_plans.h"

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
 * stage_schema_ensure: schema kwatch_stage, made again if it was dropped.
 * The extension script creates it (sql/schema/schemas.sql); a database
 * where it was dropped since gets it again here, once: apply workers
 * beginning relists at once wait for each other on a lock of kwatch's own
 * table kwatch.tables (SHARE UPDATE EXCLUSIVE: it conflicts with itself,
 * not with reads or writes), which no other role can take, as it needs
 * UPDATE on the table (an advisory lock any role could hold would not do;
 * doc/security.md, Roles).
 */
static void
stage_schema_ensure(void)
{
	if (OidIsValid(get_namespace_oid("kwatch_stage", true)))
		return;
	if (SPI_execute("LOCK TABLE kwatch.tables IN SHARE UPDATE EXCLUSIVE MODE",
					false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not lock the creation of schema kwatch_stage");
	AcceptInvalidationMessages();	/* see a schema made meanwhile */
	if (!OidIsValid(get_namespace_oid("kwatch_stage", true)) &&
		(SPI_execute("CREATE SCHEMA kwatch_stage", false, 0) != SPI_OK_UTILITY ||
		 SPI_execute("GRANT USAGE ON SCHEMA kwatch_stage TO PUBLIC", false, 0) != SPI_OK_UTILITY))
		elog(ERROR, "could not create schema kwatch_stage");
}

/*
 * kw_stage_table_prepare: staging table `stage` (qualified,
 * kwatch_stage.relist_stage_<id>) created if it is missing, else emptied,
 * in the current transaction, after making sure schema kwatch_stage exists
 * and belongs to a superuser.  ERRORs: 42501 (the schema's owner is not a
 * superuser), XX000 (the DDL failed).
 *
 * The table holds jsonb stored inline and uncompressed (STORAGE EXTERNAL,
 * largest toast_tuple_target): it is read once, by the merge, and
 * compressing it would only cost CPU.  The index on uid makes the sweep
 * (merge.c, kw_sync_relist_finish) linear whatever the mirror table's
 * statistics say (see there).
 */
void
kw_stage_table_prepare(const char *stage)
{
	int			rc;
	bool		isnull;

	stage_schema_ensure();
	stage_schema_check();
	rc = SPI_execute(psprintf("SELECT to_regclass('%s') IS NULL", stage), true, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not look up staging table");
	if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
	{
		if (SPI_execute(psprintf("CREATE UNLOGGED TABLE %s (uid text, resource_version text, object jsonb) "
								 "WITH (toast_tuple_target = 8160, autovacuum_enabled = false)",
								 stage), false, 0) != SPI_OK_UTILITY ||
			SPI_execute(psprintf("ALTER TABLE %s ALTER COLUMN object SET STORAGE EXTERNAL",
								 stage), false, 0) != SPI_OK_UTILITY ||
			SPI_execute(psprintf("CREATE INDEX ON %s (uid)", stage), false, 0) != SPI_OK_UTILITY)
			elog(ERROR, "could not create staging table");
	}
	else
		kw_stage_table_empty(stage);
}

/*
 * kw_stage_table_grant: SELECT on staging table `stage` granted to role
 * `owner` (the mirror table's owner, who reads it in the merge and the
 * sweep); nothing for a superuser.  ERRORs (XX000) when the GRANT fails.
 */
void
kw_stage_table_grant(const char *stage, Oid owner)
{
	if (!superuser_arg(owner) &&
		SPI_execute(psprintf("GRANT SELECT ON %s TO %s", stage,
							 quote_identifier(GetUserNameFromId(owner, false))),
					false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not grant the staging table to the mirror's owner");
}

/*
 * kw_stage_table_empty: TRUNCATE of staging table `stage`.  ERRORs
 * (XX000) when it fails.
 */
void
kw_stage_table_empty(const char *stage)
{
	if (SPI_execute(psprintf("TRUNCATE %s", stage), false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not empty staging table");
}

/*
 * kw_stage_table_staged_twice: whether staging table `stage` holds a uid
 * twice (with its object).  ERRORs (XX000) when it cannot be read.
 */
bool
kw_stage_table_staged_twice(const char *stage)
{
	if (SPI_execute(psprintf("SELECT 1 FROM %s WHERE object IS NOT NULL "
							 "GROUP BY uid HAVING pg_catalog.count(*) > 1 LIMIT 1", stage),
					true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read staging table");
	return SPI_processed == 1;
}
