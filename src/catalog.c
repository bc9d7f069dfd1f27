/*-------------------------------------------------------------------------
 *
 * catalog.c
 *		Reacting to registration changes transactionally.
 *
 * kwatch.watch() and kwatch.unwatch() (SQL, in the extension script) change
 * kwatch.registrations and call kwatch._wake_at_commit().  The worker must
 * see the change right after COMMIT and never before, and never at all
 * after a ROLLBACK: so the wake-up is a transaction callback that bumps the
 * registration generation and sets the worker's latch on commit only
 * (pg_net wakes its worker the same way).
 *
 * kwatch._check_watch_owner() is the privilege check of kwatch.unwatch():
 * a SECURITY DEFINER function must check its caller itself.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/syscache.h"

#include "kwatch.h"

static bool wake_pending = false;
static bool callback_registered = false;

static void
wake_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			if (wake_pending)
				kw_wake_worker();
			wake_pending = false;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			wake_pending = false;
			break;
		default:
			break;
	}
}

PG_FUNCTION_INFO_V1(kwatch_wake_at_commit);

/*
 * kwatch_wake_at_commit: SQL kwatch._wake_at_commit() -> void.  Arranges
 * for the worker to reload registrations when the current transaction
 * commits.  Warns when kwatch was not preloaded, since then no worker runs
 * and nothing will sync.
 */
Datum
kwatch_wake_at_commit(PG_FUNCTION_ARGS)
{
	if (!callback_registered)
	{
		RegisterXactCallback(wake_xact_callback, NULL);
		callback_registered = true;
	}
	wake_pending = true;
	if (kw_shared == NULL)
		ereport(WARNING,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("kwatch is not in shared_preload_libraries, so no worker will sync this watch"),
				 errhint("Add kwatch to shared_preload_libraries, set kwatch.database, and restart PostgreSQL.")));
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(kwatch_check_watch_owner);

/*
 * kwatch_check_watch_owner: SQL kwatch._check_watch_owner(owner oid,
 * server text, resource text) -> void, called by the SECURITY DEFINER
 * kwatch.unwatch() before it removes a watch.  The caller (the role outside
 * the SECURITY DEFINER call, GetOuterUserId) may remove it when it is a
 * superuser or has the privileges of `owner`, the role that registered the
 * watch (PostgreSQL's rule for dropping an object: ownership or membership
 * in the owning role, has_privs_of_role).  A watch whose owner role no
 * longer exists can be removed by superusers only.  ERRORs: 42501.
 */
Datum
kwatch_check_watch_owner(PG_FUNCTION_ARGS)
{
	Oid			owner = PG_GETARG_OID(0);
	char	   *server = text_to_cstring(PG_GETARG_TEXT_PP(1));
	char	   *resource = text_to_cstring(PG_GETARG_TEXT_PP(2));
	Oid			caller = GetOuterUserId();
	bool		owner_exists = SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(owner));

	if (superuser_arg(caller))
		PG_RETURN_VOID();
	if (owner_exists && has_privs_of_role(caller, owner))
		PG_RETURN_VOID();
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("must be owner of the watch of %s on server \"%s\"", resource, server),
			 owner_exists ?
			 errdetail("The watch belongs to role \"%s\".", GetUserNameFromId(owner, false)) :
			 errdetail("The role that registered the watch no longer exists; only a superuser can remove it.")));
	PG_RETURN_VOID();
}
