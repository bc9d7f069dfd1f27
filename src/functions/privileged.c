/*-------------------------------------------------------------------------
 *
 * privileged.c
 *		The SQL entry points that act for their caller with the extension
 *		owner's rights: kwatch.watch(), kwatch.unwatch(), kwatch.relist().
 *
 * These functions need rights their callers lack (the registrations table,
 * other roles' credentials through the worker) and must check what the
 * caller may do.  A SECURITY DEFINER function cannot tell who called it:
 * inside, the current user is the definer, and the session's role
 * (GetOuterUserId) is not the caller whenever the call comes from code
 * running under another identity -- a table owner's trigger, rule or
 * CHECK constraint executed by the worker, or a role's SECURITY DEFINER
 * function called by a superuser -- so a check against it lets that code
 * act with the session's rights.
 *
 * So the public functions are C functions that run with their caller's
 * identity: kwatch_privileged_entry() notes the current user (GetUserId:
 * the role whose rights the calling code has), refuses to run inside a
 * security-restricted operation (code that PostgreSQL or kwatch runs as a
 * table's owner on someone else's behalf, miscadmin.h), and calls the
 * implementation _<name>_impl() -- same arguments, plpgsql, not executable
 * by PUBLIC -- as its owner, the extension's owner.  The implementation's
 * privilege checks ask kw_current_caller() who the caller is.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xlog.h"
#include "catalog/pg_proc.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/value.h"
#include "parser/parse_func.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "kw_common.h"
#include "kw_status.h"
#include "kw_as_owner.h"
#include "kw_functions.h"

PG_FUNCTION_INFO_V1(kwatch_privileged_entry);

/*
 * check_watch_limit: ERRORs (53400) when kwatch.registrations, with the
 * caller's new rows, holds more watches than the worker has status slots
 * (kwatch.max_watches, shared memory sized at start): a watch beyond them
 * would run with no status that kwatch.watches or wait_synced() could
 * read.  Nothing when kwatch is not preloaded (no worker, no slots).  Runs
 * as the implementation's owner, who may read the registrations.
 */
static void
check_watch_limit(const char *nspname)
{
	int64		n;
	bool		isnull;

	if (kw_shared == NULL)
		return;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute(psprintf("SELECT count(*) FROM %s.registrations", quote_identifier(nspname)),
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not count the registrations");
	n = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	SPI_finish();
	if (n > kw_shared->nslots)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many watches: %lld registered, kwatch.max_watches is %d",
						(long long) n, kw_shared->nslots),
				 errdetail("Each watch needs a status slot in shared memory, sized when PostgreSQL starts."),
				 errhint("Raise kwatch.max_watches (about 850 bytes of shared memory each) and restart PostgreSQL, or unwatch what is no longer needed.")));
}

/*
 * kwatch_privileged_entry: the C body of kwatch.watch(), kwatch.unwatch()
 * and kwatch.relist() (extension script).  Calls kwatch._<name>_impl()
 * with the same arguments as that function's owner, with
 * kw_current_caller() returning the calling role, and returns its result.
 * First fires, as the caller, every trigger the caller had deferred in its
 * transaction and sets its constraints IMMEDIATE (kw_fire_deferred_triggers),
 * so that no code of the caller's ever runs with the owner's rights
 * (doc/security.md, Roles: in 0.6.0 a deferred constraint trigger fired
 * under the raised identity made its role superuser).
 * ERRORs: 42501 inside a security-restricted operation (e.g. from a
 * trigger the worker fires as a mirror table's owner); 25006 on a hot
 * standby (watch, unwatch: relist's 55000 comes from the worker's check);
 * 55000 for watch() and relist() in a database other than
 * kwatch.database's (unwatch() still removes what is registered there);
 * 53400 for watch() beyond kwatch.max_watches (check_watch_limit);
 * 55000 when the installed extension is not at the library's version
 * (kw_check_schema_version);
 * whatever the caller's deferred triggers or the implementation raise.
 */
Datum
kwatch_privileged_entry(PG_FUNCTION_ARGS)
{
	Oid			self = fcinfo->flinfo->fn_oid;
	HeapTuple	tp;
	Form_pg_proc proc;
	char	   *name;
	char	   *nspname;
	Oid			impl;
	Oid			impl_owner;
	FmgrInfo	flinfo;
	FunctionCallInfo impl_fcinfo;
	Oid			save_userid;
	int			save_sec_context;
	Oid			save_caller;
	Datum		result;
	bool		isnull;

	kw_check_schema_version();
	tp = SearchSysCache1(PROCOID, ObjectIdGetDatum(self));
	if (!HeapTupleIsValid(tp))
		elog(ERROR, "cache lookup failed for function %u", self);
	proc = (Form_pg_proc) GETSTRUCT(tp);
	name = pstrdup(NameStr(proc->proname));
	nspname = get_namespace_name(proc->pronamespace);
	impl = LookupFuncName(list_make2(makeString(nspname),
									 makeString(psprintf("_%s_impl", name))),
						  proc->pronargs, proc->proargtypes.values, false);
	ReleaseSysCache(tp);

	if (InSecurityRestrictedOperation())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("cannot call %s.%s() within a security-restricted operation",
						nspname, name),
				 errdetail("Code that runs as a table's owner on another role's behalf (a trigger, rule or constraint the kwatch worker fires, say) may not register or remove watches.")));

	/*
	 * Before any request to a cluster (discovery) and any write:
	 * a hot standby cannot register or remove a watch, and a
	 * database the worker does not serve would register a watch nothing
	 * ever starts.
	 */
	if (RecoveryInProgress() && strcmp(name, "relist") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot call %s.%s() on a server in recovery (a hot standby)", nspname, name),
				 errdetail("The standby's mirror tables follow the primary's by replication."),
				 errhint("Call it on the primary.")));
	if (strcmp(name, "unwatch") != 0 && kw_shared != NULL)
		kw_require_served_database();

	tp = SearchSysCache1(PROCOID, ObjectIdGetDatum(impl));
	if (!HeapTupleIsValid(tp))
		elog(ERROR, "cache lookup failed for function %u", impl);
	impl_owner = ((Form_pg_proc) GETSTRUCT(tp))->proowner;
	ReleaseSysCache(tp);

	fmgr_info(impl, &flinfo);
	impl_fcinfo = palloc0(SizeForFunctionCallInfo(fcinfo->nargs));
	InitFunctionCallInfoData(*impl_fcinfo, &flinfo, fcinfo->nargs,
							 fcinfo->fncollation, NULL, NULL);
	for (int i = 0; i < fcinfo->nargs; i++)
		impl_fcinfo->args[i] = fcinfo->args[i];

	/*
	 * What the caller deferred fires now, as the caller, before any identity
	 * switch: SET CONSTRAINTS ALL IMMEDIATE for the rest of the transaction
	 * (as_owner.c, "Deferred triggers").  Once the implementation runs as
	 * its owner, a deferred trigger fired by it (owner_functions.c) or at
	 * the end of one of its statements would run with the owner's rights.
	 */
	save_caller = kw_set_current_caller(GetUserId());
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	kw_refuse_deferral_begin();
	PG_TRY();
	{
		/* no trigger fired now may defer another: refused until we return */
		kw_fire_deferred_triggers();
		SetUserIdAndSecContext(impl_owner, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
		result = FunctionCallInvoke(impl_fcinfo);
		isnull = impl_fcinfo->isnull;
		if (strcmp(name, "watch") == 0)
			check_watch_limit(nspname);
	}
	PG_FINALLY();
	{
		SetUserIdAndSecContext(save_userid, save_sec_context);
		kw_set_current_caller(save_caller);
		kw_refuse_deferral_end();
	}
	PG_END_TRY();

	if (isnull)
		PG_RETURN_NULL();
	return result;
}

PG_FUNCTION_INFO_V1(kwatch_caller);

/*
 * kwatch_caller: SQL kwatch._caller() -> oid, kw_current_caller(): the
 * role the implementations of watch/unwatch/relist check.  Not for PUBLIC.
 */
Datum
kwatch_caller(PG_FUNCTION_ARGS)
{
	PG_RETURN_OID(kw_current_caller());
}
