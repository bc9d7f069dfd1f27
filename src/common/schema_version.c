/*-------------------------------------------------------------------------
 *
 * schema_version.c
 *		The one schema the library targets: the installed extension's
 *		version must be the library's own.
 *
 * The library is built for the schema of its own version (KWATCH_VERSION,
 * kwatch.control's default_version, given by the Makefile) and reads that
 * schema only: no run-time branch tolerates an older one.  Between a
 * restart with a new library and ALTER EXTENSION kwatch UPDATE the
 * installed schema is older, so the entry points that read or write
 * kwatch's objects check first (Citus does the same:
 * src/backend/distributed/metadata/metadata_cache.c, CheckInstalledVersion)
 * and refuse with a hint to update.  The IMMUTABLE helpers that generated
 * columns call per row are not checked (their results must not depend on
 * the catalog), nor is anything while an extension script runs
 * (creating_extension): the update scripts call the library in between.
 *
 * pg_extension has no syscache, and ALTER EXTENSION UPDATE sends no
 * invalidation a backend could catch, so the answer is kept until the
 * transaction ends (a callback forgets it) or this backend runs an
 * extension statement (kw_schema_version_forget): one index scan of
 * pg_extension per transaction that calls a checked entry point, none per
 * row.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"

#include "kw_common.h"

/* This transaction's answer: 0 unknown, 1 current, -1 not current. */
static int	schema_known = 0;
static bool callback_registered = false;

static void
forget_at_xact_end(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			schema_known = 0;
			break;
		default:
			break;
	}
}

/*
 * kw_schema_version_forget: forgets this transaction's answer, after a
 * statement that may have changed pg_extension (CREATE, ALTER or DROP
 * EXTENSION, ownership.c's utility hook), so that the next check in the
 * same transaction reads it again.  Any backend; no ERROR.
 */
void
kw_schema_version_forget(void)
{
	schema_known = 0;
}

/*
 * kw_installed_version: pg_extension.extversion of kwatch in the current
 * database, palloc'd in the current memory context, or NULL when the
 * extension is not installed here.  Needs a transaction.  ERRORs only as
 * a catalog scan does.
 */
char *
kw_installed_version(void)
{
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	char	   *version = NULL;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum("kwatch"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
	{
		bool		isnull;
		Datum		d = heap_getattr(tup, Anum_pg_extension_extversion,
									 RelationGetDescr(rel), &isnull);

		if (!isnull)
			version = text_to_cstring(DatumGetTextPP(d));
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return version;
}

/*
 * kw_schema_is_current: whether the installed kwatch extension is at the
 * library's version (KWATCH_VERSION); true while an extension script runs
 * (creating_extension) and when the extension is not installed here (there
 * is nothing of it to read; callers that need it find it missing as
 * before).  The answer is kept until the transaction ends.  Needs a
 * transaction; no ERROR of its own.
 */
bool
kw_schema_is_current(void)
{
	char	   *installed;

	if (creating_extension)
		return true;
	if (schema_known != 0)
		return schema_known > 0;
	if (!callback_registered)
	{
		RegisterXactCallback(forget_at_xact_end, NULL);
		callback_registered = true;
	}
	installed = kw_installed_version();
	schema_known = (installed == NULL || strcmp(installed, KWATCH_VERSION) == 0) ? 1 : -1;
	if (installed)
		pfree(installed);
	return schema_known > 0;
}

/*
 * kw_check_schema_version: ERROR unless the installed kwatch extension is
 * at the library's version (kw_schema_is_current).  Called first by the
 * entry points that read or write kwatch's objects: kwatch_privileged_entry
 * (watch, unwatch, relist, history), apply() and its kin, the waits, the
 * live and events foreign tables' planning and modify entry points.
 * ERRORs: 55000 (object_not_in_prerequisite_state) naming both versions,
 * with the hint to run ALTER EXTENSION kwatch UPDATE (Citus,
 * src/backend/distributed/metadata/metadata_cache.c, CheckInstalledVersion).
 */
void
kw_check_schema_version(void)
{
	char	   *installed;

	if (kw_schema_is_current())
		return;
	installed = kw_installed_version();
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("loaded kwatch library version %s differs from installed extension version %s",
					KWATCH_VERSION, installed ? installed : "(none)"),
			 errdetail("The library reads the schema of kwatch %s only; this database's extension is still at %s.",
					   KWATCH_VERSION, installed ? installed : "(none)"),
			 errhint("Run ALTER EXTENSION kwatch UPDATE.")));
}
