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

#include "access/xact.h"
#include "miscadmin.h"
#include "catalog/pg_class.h"
#include "commands/trigger.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/guc.h"
#include "utils/syscache.h"

#include "kw_common.h"
#include "kw_as_owner.h"

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
 * Deferred triggers.  A trigger the owner's code queues is fired by
 * PostgreSQL as whoever is the current user when it fires (before
 * PostgreSQL 18 the queuing role is not recorded): a deferred one would
 * fire at commit as kwatch's role, the superuser of an apply worker or the
 * caller of unwatch().  So kwatch sets every constraint IMMEDIATE before it
 * acts as an owner (kw_fire_deferred_triggers: what the caller had deferred
 * fires then, as the caller), whereupon the owner's deferrable triggers
 * fire at the end of each of its statements, as the owner; and while it
 * acts as an owner, SET CONSTRAINTS ... DEFERRED is refused (a utility
 * hook), so the owner's code cannot defer them again.
 */
static int	owner_depth = 0;	/* refusals of deferral not yet ended (kw_refuse_deferral_begin) */
static bool callback_registered = false;
static ProcessUtility_hook_type prev_utility = NULL;

static void
owner_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT)
		owner_depth = 0;
}

static void
refuse_deferral(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
				ProcessUtilityContext context, ParamListInfo params,
				QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *stmt = pstmt->utilityStmt;

	if (owner_depth > 0 && IsA(stmt, ConstraintsSetStmt) &&
		((ConstraintsSetStmt *) stmt)->deferred)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("cannot defer constraints while kwatch writes a mirror table as its owner"),
				 errdetail("A deferred trigger would fire at commit with the rights of another role.")));
	if (prev_utility)
		prev_utility(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
								queryEnv, dest, qc);
}

/*
 * kw_as_owner_init: installs the hook that refuses SET CONSTRAINTS ...
 * DEFERRED while kwatch acts as a table's owner, and the transaction
 * runner's start hook (kw_common.h).  Called by _PG_init in every process
 * that loads kwatch.
 */
void
kw_as_owner_init(void)
{
	prev_utility = ProcessUtility_hook;
	ProcessUtility_hook = refuse_deferral;
	/* every kw_run_in_transaction body starts with the owners' deferred
	 * triggers fired and constraints IMMEDIATE (transaction.c) */
	kw_transaction_start_hook = kw_fire_deferred_triggers;
}

/*
 * kw_as_owner_begin: from here on, act as `owner` (see KwAsOwner, above):
 * its rights, SECURITY_RESTRICTED_OPERATION, search_path pinned, no
 * deferral of constraints (above; the caller has set them IMMEDIATE with
 * kw_fire_deferred_triggers).  Undone by kw_as_owner_end, or by the
 * transaction's abort.
 */
void
kw_as_owner_begin(Oid owner, KwAsOwner *s)
{
	kw_refuse_deferral_begin();
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
 * kw_fire_deferred_triggers: SET CONSTRAINTS ALL IMMEDIATE (trigger.c,
 * AfterTriggerSetState): fires now, as the current user, every trigger
 * deferred so far in the transaction, and makes every later one fire at
 * the end of its statement.  kwatch calls it before it acts as a table's
 * owner (above: at the start of every transaction of its own,
 * transaction.c, and in the SQL functions of owner_functions.c, where the
 * caller's transaction keeps the IMMEDIATE mode).  Needs a transaction.
 * ERRORs: whatever the triggers raise.
 */
void
kw_fire_deferred_triggers(void)
{
	ConstraintsSetStmt stmt = {.type = T_ConstraintsSetStmt, .constraints = NIL,
	.deferred = false};

	/* what the statement runs, without parsing one per transaction */
	AfterTriggerSetState(&stmt);
}

/*
 * kw_refuse_deferral_begin / kw_refuse_deferral_end: from begin to end,
 * SET CONSTRAINTS ... DEFERRED is refused (42501), as while kwatch acts as
 * a table's owner.  kwatch's privileged entry points (privileged.c, the
 * DROP OWNED hook in ownership.c) hold it from before they fire what the
 * caller deferred until they return: a trigger of the caller's that fires
 * then could otherwise defer another one, which would fire later, inside
 * the implementation, under the extension owner's identity
 * (doc/security.md, Roles).  Nested calls count; a transaction's end
 * resets the count.
 */
void
kw_refuse_deferral_begin(void)
{
	if (!callback_registered)
	{
		RegisterXactCallback(owner_xact_callback, NULL);
		callback_registered = true;
	}
	owner_depth++;
}

void
kw_refuse_deferral_end(void)
{
	if (owner_depth > 0)
		owner_depth--;
}

/*
 * kw_fire_deferred_triggers_as: kw_fire_deferred_triggers() with `role`'s
 * rights, then back to the current identity.  For code that already runs
 * under a raised identity on behalf of `role` (owner_functions.c, called
 * by kwatch's privileged entry points as the extension owner): whatever
 * is still deferred fires as the role that deferred it, never as the
 * extension owner (doc/security.md, Roles).  The entry points fire first,
 * before they switch, and refuse deferral until they return (privileged.c,
 * ownership.c), so this normally finds nothing; should anything be left,
 * it fires under SECURITY_RESTRICTED_OPERATION in a GUC nest level of its
 * own, so that it can leave nothing behind (a search_path, a temporary
 * object) for the code that runs with raised rights after it.
 * ERRORs: whatever the triggers raise (an abort restores the identity).
 */
void
kw_fire_deferred_triggers_as(Oid role)
{
	Oid			save_userid;
	int			save_sec_context;
	int			save_nestlevel;

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(OidIsValid(role) ? role : save_userid,
						   save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	save_nestlevel = NewGUCNestLevel();
	kw_fire_deferred_triggers();
	AtEOXact_GUC(false, save_nestlevel);
	SetUserIdAndSecContext(save_userid, save_sec_context);
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
	kw_refuse_deferral_end();
	AtEOXact_GUC(false, s->save_nestlevel);
	SetUserIdAndSecContext(s->save_userid, s->save_sec_context);
	s->switched = false;
}
