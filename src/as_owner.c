/*-------------------------------------------------------------------------
 *
 * as_owner.c
 *		Acting as a mirror table's owner.
 *
 * The mirror table's writes run as its owner: with the owner's rights,
 * under SECURITY_RESTRICTED_OPERATION, with search_path pinned to
 * pg_catalog, pg_temp; PostgreSQL runs maintenance on a user's table the
 * same way (ExecRefreshMatView, vacuum_rel, index_build in
 * src/backend/commands and catalog/index.c).  A trigger or a rule a
 * table's owner adds then runs with the owner's rights, never the worker's
 * superuser's.  The worker's own tables (registrations, event_state, the
 * staging table) are written outside, as the worker.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "miscadmin.h"
#include "catalog/pg_class.h"
#include "utils/guc.h"
#include "utils/syscache.h"

#include "kw_common.h"
#include "kw_worker.h"

/* kw_rel_owner: the owner of relation `relid`; ERRORs (42P01) when it is gone. */
Oid
kw_rel_owner(Oid relid)
{
	HeapTuple	tp = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tp))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	owner = ((Form_pg_class) GETSTRUCT(tp))->relowner;
	ReleaseSysCache(tp);
	return owner;
}

/*
 * kw_as_owner_begin: from here on, act as `owner` (see KwAsOwner, above):
 * its rights, SECURITY_RESTRICTED_OPERATION, search_path pinned.  Undone by
 * kw_as_owner_end, or by the transaction's abort.
 */
void
kw_as_owner_begin(Oid owner, KwAsOwner *s)
{
	GetUserIdAndSecContext(&s->save_userid, &s->save_sec_context);
	SetUserIdAndSecContext(owner, s->save_sec_context |
						   SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	s->save_nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
							 true, 0, false);
	s->switched = true;
}

/*
 * kw_fire_deferred_triggers: fires the triggers the table owner's
 * constraints deferred to commit (SET CONSTRAINTS ALL IMMEDIATE: trigger.c,
 * AfterTriggerSetState), now, while still acting as that owner: at commit
 * they would run as the worker's superuser, and after the event stream's
 * lock was taken (events.c).  Call before kw_as_owner_end, once the
 * owner's statements are done.  ERRORs: whatever the triggers raise.
 */
void
kw_fire_deferred_triggers(void)
{
	if (SPI_execute("SET CONSTRAINTS ALL IMMEDIATE", false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not fire deferred triggers");
}

/*
 * kw_as_owner_end: back to the worker's identity.  On ERROR nothing is needed:
 * AbortTransaction restores both (xact.c).
 */
void
kw_as_owner_end(KwAsOwner *s)
{
	if (!s->switched)
		return;
	AtEOXact_GUC(false, s->save_nestlevel);
	SetUserIdAndSecContext(s->save_userid, s->save_sec_context);
	s->switched = false;
}
