/*-------------------------------------------------------------------------
 *
 * status.c
 *		The SQL functions that read the watches' shared status (shmem.c):
 *		kwatch.watch_status() (under the kwatch.watches view) and
 *		kwatch.worker_pid(), each showing a role only what is its to see.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_authid.h"
#include "fmgr.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "kw_common.h"
#include "kw_status.h"
#include "kw_cluster.h"

/*
 * slot_visible: whether the current user may see watch status `s`: the
 * rule of the kwatch.watches view (a superuser; a member of the role that
 * registered the watch; a role with USAGE on its server).  The error text
 * and counters of other roles' watches are theirs.
 */
static bool
slot_visible(const KwWatchStatus *s)
{
	Oid			user = GetUserId();
	ForeignServer *fs;

	if (superuser_arg(user))
		return true;
	if (OidIsValid(s->owner) &&
		SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(s->owner)) &&
		has_privs_of_role(user, s->owner))
		return true;
	fs = GetForeignServerByName(s->server, true);
	if (fs == NULL)
		return false;
	return kw_server_usage(fs->serverid, user) == ACLCHECK_OK;
}

/* The columns of kwatch.watch_status()'s result. */
#define KW_STATUS_COLUMNS 25

PG_FUNCTION_INFO_V1(kwatch_watch_status);

/*
 * kwatch_watch_status: SQL kwatch.watch_status() -> SETOF record, one row
 * per running watch the current user may see (slot_visible), copied from
 * shared memory, in the KW_STATUS_COLUMNS columns the extension script
 * declares (sql/schema/functions).  Returns no rows when kwatch was not
 * preloaded.  ERRORs: 55000 when the extension is not at the library's
 * version and declares other columns (kw_check_schema_version).
 */
Datum
kwatch_watch_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	KwWatchStatus *copy;
	int			n = 0;

	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != KW_STATUS_COLUMNS)
	{
		/* an older schema declares fewer: say so, with the hint to update */
		kw_check_schema_version();
		elog(ERROR, "kwatch.watch_status() declared with %d columns, not %d",
			 rsinfo->setDesc->natts, KW_STATUS_COLUMNS);
	}
	/* the slots are the watches of kwatch.database's registrations only */
	if (kw_shared == NULL || !kw_serves_this_database())
		return (Datum) 0;

	copy = palloc(sizeof(KwWatchStatus) * kw_shared->nslots);
	LWLockAcquire(kw_shared->lock, LW_SHARED);
	for (int i = 0; i < kw_shared->nslots; i++)
		if (kw_shared->slots[i].watch_id != 0)
			copy[n++] = kw_shared->slots[i];
	LWLockRelease(kw_shared->lock);

	for (int i = 0; i < n; i++)
	{
		KwWatchStatus *s = &copy[i];
		Datum		values[KW_STATUS_COLUMNS];
		bool		nulls[KW_STATUS_COLUMNS];
		int			c = 0;

		if (!slot_visible(s))
			continue;

		memset(nulls, 0, sizeof(nulls));
		values[c++] = Int32GetDatum(s->watch_id);
		values[c++] = CStringGetTextDatum(kw_state_name(s->state));
		values[c++] = BoolGetDatum(s->healthy);
		if (s->resource_version[0])
			values[c] = CStringGetTextDatum(s->resource_version);
		else
			nulls[c] = true;
		c++;
		values[c++] = Int64GetDatum(s->objects);
		if (s->last_sync_at)
			values[c] = TimestampTzGetDatum(s->last_sync_at);
		else
			nulls[c] = true;
		c++;
		values[c++] = TimestampTzGetDatum(s->state_since);
		if (s->last_error[0])
		{
			values[c] = CStringGetTextDatum(s->last_error);
			values[c + 1] = TimestampTzGetDatum(s->last_error_at);
		}
		else
			nulls[c] = nulls[c + 1] = true;
		c += 2;
		values[c++] = Int64GetDatum(s->list_calls);
		values[c++] = Int64GetDatum(s->watch_calls);
		values[c++] = Int64GetDatum(s->relists);
		values[c++] = Int64GetDatum(s->added);
		values[c++] = Int64GetDatum(s->modified);
		values[c++] = Int64GetDatum(s->deleted);
		values[c++] = Int64GetDatum(s->bookmarks);
		values[c++] = Int64GetDatum(s->notifications);
		values[c++] = Int64GetDatum(s->skipped_objects);
		values[c++] = Int64GetDatum(s->sanitized_objects);
		values[c++] = Int64GetDatum(s->errors[KW_ERRSRC_HTTP]);
		values[c++] = Int64GetDatum(s->errors[KW_ERRSRC_DECODE]);
		values[c++] = Int64GetDatum(s->errors[KW_ERRSRC_DATABASE] + s->errors[KW_ERRSRC_CONFIG]);
		values[c++] = BoolGetDatum(s->synced);
		values[c++] = Int64GetDatum(s->syncs);
		values[c++] = Int64GetDatum(s->relist_requests);
		Assert(c == KW_STATUS_COLUMNS);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(kwatch_worker_pid);

/*
 * kwatch_worker_pid: SQL kwatch.worker_pid() -> int, the worker's process
 * id, or NULL when no worker runs for this database (not preloaded,
 * between restarts, or a database other than kwatch.database).
 */
Datum
kwatch_worker_pid(PG_FUNCTION_ARGS)
{
	pid_t		pid = 0;

	if (kw_shared && kw_serves_this_database())
	{
		LWLockAcquire(kw_shared->lock, LW_SHARED);
		pid = kw_shared->worker_pid;
		LWLockRelease(kw_shared->lock);
	}
	if (pid == 0)
		PG_RETURN_NULL();
	PG_RETURN_INT32((int32) pid);
}
