/*-------------------------------------------------------------------------
 *
 * ownership.c
 *		A watch belongs to the role that registered it, as an object belongs
 *		to its owner: unwatch checks its caller, and DROP ROLE, DROP OWNED
 *		and REASSIGN OWNED treat watches like the role's other objects.
 *
 * A registration (a row of kwatch.registrations) records its owner's oid.
 * PostgreSQL's own owner dependencies (pg_shdepend) can only name catalog
 * objects, so the rules it enforces for them are enforced here, by a
 * ProcessUtility hook, with the same messages and SQLSTATEs
 * (backend/catalog/pg_shdepend.c, checkSharedDependencies / shdepDropOwned /
 * shdepReassignOwned):
 *
 *   DROP ROLE r        refused (2BP01) while r owns a watch, listing them;
 *                      checked from any database: in kwatch's database by
 *                      reading kwatch.registrations, elsewhere from the
 *                      worker's shared status (which carries each watch's
 *                      owner);
 *   DROP OWNED BY r    in kwatch's database, removes r's watches (with
 *                      kwatch.unwatch's implementation, the rows they
 *                      mirrored included), and the views kubectl.<t> of
 *                      r's tables, before PostgreSQL drops r's
 *                      tables;
 *   REASSIGN OWNED BY r TO s
 *                      in kwatch's database, gives r's watches to s; the
 *                      worker restarts them with s's credentials.
 *
 * A watch also depends on its foreign server, which it names: the name is
 * the `cluster` value of every row the watch writes (the key of every
 * mirror table and the partition key of the partitioning recipe in
 * doc/operations.md), so the hook treats watches as dependents of their
 * server (PostgreSQL's rules for dependents, backend/catalog/dependency.c):
 *
 *   ALTER SERVER s RENAME  refused (55006) while s has a watch;
 *   DROP SERVER s [RESTRICT], DROP OWNED BY its owner [RESTRICT]
 *                      refused (2BP01) while s has a watch, listing them;
 *   ... CASCADE (DROP SERVER, DROP FOREIGN DATA WRAPPER, DROP OWNED)
 *                      removes the watches of every server it dropped, as
 *                      unwatch() removes a watch (rows included);
 *                      the tables stay.
 *
 * Both are checked after PostgreSQL ran the statement (its own privilege
 * checks come first, so no role learns of watches on a server it may not
 * drop), by comparing the watched servers that existed before it with
 * those that exist after (kwatch._servers_gone).
 *
 * The rule: a watch runs with its owner's credentials (the user mapping
 * that applies to the owner, postgres_fdw's rule: connection.c) and no one
 * else's, so its owner must exist.  Without these checks, dropping a role
 * would leave its watches running under an oid no role holds, on
 * credentials that are no longer any owner's.  The worker still
 * refuses a registration whose owner does not exist (a role dropped where
 * kwatch was not loaded): it never falls back to other credentials
 * (fdw_option.c, connection.c user_mapping_options).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_foreign_server.h"
#include "foreign/foreign.h"
#include "storage/lmgr.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "kw_common.h"
#include "kw_status.h"
#include "kw_as_owner.h"
#include "kw_functions.h"

static ProcessUtility_hook_type prev_ProcessUtility = NULL;

/* The kwatch extension in the current database, when there is one. */
typedef struct KwExtension
{
	Oid			owner;
	char	   *schema;			/* quoted */
} KwExtension;

/*
 * extension_here: fills `ext` and returns true when the current database has
 * the kwatch extension with its registrations table.  Reads the catalogs
 * through SPI; the caller has connected.  ERRORs 55000 when the extension
 * is not at the library's version (kw_check_schema_version): the guards
 * of DROP ROLE, DROP OWNED, REASSIGN OWNED and of foreign servers then
 * refuse the statement until ALTER EXTENSION kwatch UPDATE, rather than
 * skip the watches they protect.
 */
static bool
extension_here(KwExtension *ext)
{
	bool		isnull;

	/*
	 * The registrations table is looked up in C: to_regclass() in the query
	 * checked USAGE on every schema the planner happened to try first
	 * (pg_toast), so DROP OWNED BY a role's own name failed for the role.
	 */
	if (SPI_execute("SELECT e.extowner, n.nspname, n.oid FROM pg_catalog.pg_extension e"
					" JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace"
					" WHERE e.extname OPERATOR(pg_catalog.=) 'kwatch'",
					true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up the kwatch extension");
	if (SPI_processed == 0)
		return false;
	if (!OidIsValid(get_relname_relid("registrations",
									  DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
																	 SPI_tuptable->tupdesc, 3, &isnull)))))
		return false;
	/* the statements below read the library's schema only */
	kw_check_schema_version();
	ext->owner = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
												SPI_tuptable->tupdesc, 1, &isnull));
	ext->schema = pstrdup(quote_identifier(SPI_getvalue(SPI_tuptable->vals[0],
														SPI_tuptable->tupdesc, 2)));
	return true;
}

/*
 * lock_registrations_sql: the statement that takes, in id order, the
 * registration locks (kwatch._lock_registration, src/common/catalog.c) of
 * the watches the roles $1 (oid[]) own, run before DROP OWNED or REASSIGN
 * OWNED changes their rows: each waits for its watch's batches in
 * progress, not behind every new one.
 */
static char *
lock_registrations_sql(KwExtension *ext)
{
	return psprintf("SELECT %1$s._lock_registration(r.id) FROM %1$s.registrations r"
					" WHERE r.owner OPERATOR(pg_catalog.=) ANY ($1) ORDER BY r.id",
					ext->schema);
}

/*
 * Runs `sql` with `args` (oid[] then, optionally, oid) as the extension's
 * owner (kw_as_owner_begin).  ERRORs when SPI fails.
 */
static void
execute_as_extension_owner(KwExtension *ext, const char *sql, int nargs,
						   Oid *argtypes, Datum *values, bool read_only)
{
	KwAsOwner	as;
	int			rc;

	kw_as_owner_begin(ext->owner, &as);
	PG_TRY();
	{
		rc = SPI_execute_with_args(sql, nargs, argtypes, values, NULL, read_only, 0);
	}
	PG_CATCH();
	{
		/* the abort restores the identity; a caught error must not leave deferral refused */
		kw_refuse_deferral_end();
		PG_RE_THROW();
	}
	PG_END_TRY();
	kw_as_owner_end(&as);
	if (rc < 0)
		elog(ERROR, "SPI_execute_with_args failed: %s", SPI_result_code_string(rc));
}

/* The oids of the roles a DROP ROLE / DROP OWNED / REASSIGN names. */
static Datum
role_oid_array(List *roles, bool missing_ok, int *n)
{
	Datum	   *oids = palloc(sizeof(Datum) * Max(list_length(roles), 1));
	ListCell   *lc;

	*n = 0;
	foreach(lc, roles)
	{
		Oid			roleid = get_rolespec_oid(lfirst_node(RoleSpec, lc), missing_ok);

		if (OidIsValid(roleid))
			oids[(*n)++] = ObjectIdGetDatum(roleid);
	}
	return PointerGetDatum(construct_array(oids, *n, OIDOID, sizeof(Oid), true,
										   TYPALIGN_INT));
}

/*
 * check_drop_role: ERRORs (2BP01, as pg_shdepend.c's checkSharedDependencies
 * does for a role's tables) when a role that DROP ROLE names owns a watch.
 */
static void
check_drop_role(DropRoleStmt *stmt)
{
	KwExtension ext;
	int			nroles;
	Datum		roles;
	StringInfoData detail;
	int			nwatches = 0;
	Oid			first_owner = InvalidOid;
	bool		here = false;

	roles = role_oid_array(stmt->roles, true, &nroles);
	if (nroles == 0)
		return;
	initStringInfo(&detail);

	SPI_connect();
	if (extension_here(&ext))
	{
		char	   *sql = psprintf("SELECT owner, format('owner of watch of %%s on server \"%%s\"',"
								   " resource, server) FROM %s.registrations"
								   " WHERE owner OPERATOR(pg_catalog.=) ANY ($1) ORDER BY id",
								   ext.schema);
		Oid			argtypes[1] = {OIDARRAYOID};

		here = true;
		execute_as_extension_owner(&ext, sql, 1, argtypes, &roles, true);
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			bool		isnull;

			if (nwatches == 0)
				first_owner = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
															 SPI_tuptable->tupdesc, 1, &isnull));
			appendStringInfo(&detail, "%s%s", nwatches++ ? "\n" : "",
							 SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2));
		}
	}
	SPI_finish();

	/*
	 * Another database: the worker's shared status knows the owner of every
	 * watch it runs (watch.c fills KwWatchStatus.owner).
	 */
	if (kw_shared != NULL &&
		!(here && kw_serves_this_database()))
	{
		ArrayType  *arr = DatumGetArrayTypeP(roles);
		Oid		   *oids = (Oid *) ARR_DATA_PTR(arr);

		LWLockAcquire(kw_shared->lock, LW_SHARED);
		for (int i = 0; i < kw_shared->nslots; i++)
		{
			KwWatchStatus *slot = &kw_shared->slots[i];

			if (slot->watch_id == 0)
				continue;
			for (int j = 0; j < nroles; j++)
				if (slot->owner == oids[j])
				{
					if (nwatches == 0)
						first_owner = slot->owner;
					appendStringInfo(&detail, "%sowner of watch %d in database \"%s\"",
									 nwatches++ ? "\n" : "", slot->watch_id,
									 kw_database ? kw_database : "?");
				}
		}
		LWLockRelease(kw_shared->lock);
	}

	if (nwatches > 0)
		ereport(ERROR,
				(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
				 errmsg("role \"%s\" cannot be dropped because some objects depend on it",
						GetUserNameFromId(first_owner, false)),
				 errdetail_internal("%s", detail.data),
				 errhint("Remove the watches with kwatch.unwatch(), or run REASSIGN OWNED or DROP OWNED in database \"%s\" first.",
						 kw_database ? kw_database : "?")));
}

/*
 * drop_owned_watches: DROP OWNED BY: removes the watches of the named roles
 * the caller may act for (PostgreSQL checks the same, has_privs_of_role,
 * and refuses the statement otherwise): watches into the roles' own
 * tables by deleting their registrations (the tables go with DROP OWNED),
 * the others through kwatch.unwatch's implementation, for the issuer, so
 * that the rows they mirrored go with them.  Runs before PostgreSQL drops
 * the roles' tables, in the statement's transaction.
 */
static void
drop_owned_watches(DropOwnedStmt *stmt)
{
	KwExtension ext;
	int			nroles;
	Datum		roles = role_oid_array(stmt->roles, false, &nroles);
	ArrayType  *arr = DatumGetArrayTypeP(roles);
	Oid		   *oids = (Oid *) ARR_DATA_PTR(arr);

	for (int i = 0; i < nroles; i++)
		if (!has_privs_of_role(GetUserId(), oids[i]))
			return;				/* PostgreSQL's own check will refuse it */

	SPI_connect();
	if (extension_here(&ext))
	{
		/*
		 * Watches into tables the roles own: DROP OWNED drops the tables, so
		 * the registrations only go (deleting the rows first would run the
		 * owner's DELETE triggers, which could refuse and block the DROP).
		 */
		char	   *own_tables = psprintf("WITH d AS (DELETE FROM %1$s.registrations r"
										  " WHERE r.owner OPERATOR(pg_catalog.=) ANY ($1)"
										  " AND (SELECT c.relowner FROM pg_catalog.pg_class c"
										  "      WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass("
										  "        pg_catalog.format('k8s.%%I', r.table_name)))"
										  "     OPERATOR(pg_catalog.=) ANY ($1) RETURNING r.id)"
										  " SELECT %1$s._drop_relist_stage(d.id), %1$s._wake_at_commit() FROM d",
										  ext.schema);
		/*
		 * Their registrations' locks first: the DELETE waits for
		 * the watches' batches in progress, not behind every new one.
		 */
		char	   *lock_own = lock_registrations_sql(&ext);
		char	   *others = psprintf("SELECT %1$s._unwatch_impl(r.resource, r.server, false)"
									  " FROM %1$s.registrations r"
									  " WHERE r.owner OPERATOR(pg_catalog.=) ANY ($1) ORDER BY r.id",
									  ext.schema);
		/*
		 * The views kubectl.<t> of the roles' tables belong to
		 * the extension's owner and depend on the tables: they go first, or
		 * PostgreSQL's DROP OWNED would refuse to drop the tables.
		 */
		char	   *views = psprintf("SELECT %1$s._drop_printed_views_of($1)", ext.schema);
		Oid			argtypes[1] = {OIDARRAYOID};
		Oid			save_caller = kw_set_current_caller(GetUserId());

		/*
		 * What the issuer deferred fires now, as the issuer, before anything
		 * runs as the extension owner (_unwatch_impl deletes rows through
		 * owner_functions.c; doc/security.md, Roles).
		 */
		/* unwatch's implementation, checking the issuer of DROP OWNED */
		kw_refuse_deferral_begin();
		PG_TRY();
		{
			kw_fire_deferred_triggers();
			execute_as_extension_owner(&ext, lock_own, 1, argtypes, &roles, false);
			execute_as_extension_owner(&ext, own_tables, 1, argtypes, &roles, false);
			execute_as_extension_owner(&ext, others, 1, argtypes, &roles, false);
			execute_as_extension_owner(&ext, views, 1, argtypes, &roles, false);
		}
		PG_FINALLY();
		{
			kw_set_current_caller(save_caller);
			kw_refuse_deferral_end();
		}
		PG_END_TRY();
	}
	SPI_finish();
}

/*
 * reassign_owned_watches: REASSIGN OWNED BY ... TO s: after PostgreSQL has
 * reassigned the roles' objects (and checked the caller may), gives their
 * watches to s and wakes the worker at commit, which restarts them with
 * s's user mapping (kw_watch_same_registration compares owners).
 */
static void
reassign_owned_watches(ReassignOwnedStmt *stmt)
{
	KwExtension ext;
	int			nroles;
	Datum		values[2];
	Oid			argtypes[2] = {OIDARRAYOID, OIDOID};

	values[0] = role_oid_array(stmt->roles, false, &nroles);
	values[1] = ObjectIdGetDatum(get_rolespec_oid(stmt->newrole, false));

	SPI_connect();
	if (extension_here(&ext))
	{
		char	   *sql = psprintf("WITH u AS (UPDATE %1$s.registrations SET owner = $2"
								   " WHERE owner OPERATOR(pg_catalog.=) ANY ($1) RETURNING 1)"
								   " SELECT %1$s._wake_at_commit() FROM u LIMIT 1",
								   ext.schema);
		/* as DROP OWNED: the registrations' locks first */
		char	   *lock = lock_registrations_sql(&ext);

		execute_as_extension_owner(&ext, lock, 1, argtypes, values, false);
		execute_as_extension_owner(&ext, sql, 2, argtypes, values, false);
	}
	SPI_finish();
}

/*
 * may_remove_servers: whether a statement can drop or rename a foreign
 * server (directly, or by cascade: a foreign-data wrapper's servers, a
 * role's servers), and how it treats dependents: "rename", "restrict" or
 * "cascade"; NULL for every other statement.
 */
static const char *
may_remove_servers(Node *parsetree)
{
	switch (nodeTag(parsetree))
	{
		case T_RenameStmt:
			return ((RenameStmt *) parsetree)->renameType == OBJECT_FOREIGN_SERVER ?
				"rename" : NULL;
		case T_DropStmt:
			{
				DropStmt   *stmt = (DropStmt *) parsetree;

				if (stmt->removeType != OBJECT_FOREIGN_SERVER &&
					stmt->removeType != OBJECT_FDW)
					return NULL;
				return stmt->behavior == DROP_CASCADE ? "cascade" : "restrict";
			}
		case T_DropOwnedStmt:
			return ((DropOwnedStmt *) parsetree)->behavior == DROP_CASCADE ?
				"cascade" : "restrict";
		default:
			return NULL;
	}
}

/*
 * lock_named_servers: AccessExclusiveLock on each foreign server an ALTER
 * SERVER ... RENAME or DROP SERVER names (the lock the statement takes
 * itself, get_object_address), taken before watched_servers looks: a
 * transaction that queued an apply to the server holds AccessShareLock on
 * it until it ends (functions/apply.c), so the statement waits for it
 * here, and the look that follows (with a new snapshot) sees its apply.
 * Servers that do not exist are left to the statement's own error.
 */
static void
lock_named_servers(Node *parsetree)
{
	List	   *names = NIL;
	ListCell   *lc;

	if (IsA(parsetree, RenameStmt) &&
		((RenameStmt *) parsetree)->renameType == OBJECT_FOREIGN_SERVER)
		names = list_make1(((RenameStmt *) parsetree)->object);
	else if (IsA(parsetree, DropStmt) &&
			 ((DropStmt *) parsetree)->removeType == OBJECT_FOREIGN_SERVER)
		names = ((DropStmt *) parsetree)->objects;
	foreach(lc, names)
	{
		ForeignServer *srv = GetForeignServerByName(strVal(lfirst(lc)), true);

		/* only for who may rename or drop it: anyone else's statement is
		 * refused by PostgreSQL and must not queue a lock that holds up
		 * the server's watch() and apply() callers meanwhile */
		if (srv != NULL && has_privs_of_role(GetUserId(), srv->owner))
			LockDatabaseObject(ForeignServerRelationId, srv->serverid, 0, AccessExclusiveLock);
	}
}

/*
 * watched_servers: the names (text[]) of the foreign servers that exist and
 * have a watch in this database, copied into `cxt`; (Datum) 0 when none or
 * without the extension.
 */
static Datum
watched_servers(MemoryContext cxt)
{
	KwExtension ext;
	Datum		result = (Datum) 0;

	SPI_connect();
	if (extension_here(&ext))
	{
		/* servers with a watch or a pending apply (kwatch.apply() at commit) */
		char	   *sql = psprintf("SELECT pg_catalog.array_agg(DISTINCT x.server) FROM"
								   " (SELECT r.server FROM %1$s.registrations r"
								   "  UNION ALL SELECT q.server FROM %1$s.apply_queue q"
								   "  WHERE q.state OPERATOR(pg_catalog.=) 'pending') x"
								   " WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_foreign_server s"
								   "               WHERE s.srvname OPERATOR(pg_catalog.=) x.server)",
								   ext.schema);
		bool		isnull;
		Datum		servers;

		/* not read_only: a new snapshot, after lock_named_servers waited */
		execute_as_extension_owner(&ext, sql, 0, NULL, NULL, false);
		servers = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		if (!isnull)
		{
			MemoryContext old = MemoryContextSwitchTo(cxt);

			result = PointerGetDatum(DatumGetArrayTypePCopy(servers));
			MemoryContextSwitchTo(old);
		}
	}
	SPI_finish();
	return result;
}

/*
 * servers_gone: after a statement may_remove_servers() named: for the
 * servers of `before` (watched_servers()) that no longer exist, refuses the
 * statement (55006 for a rename, 2BP01 for a drop without CASCADE, with
 * PostgreSQL's words: backend/catalog/dependency.c, reportDependentObjects)
 * or removes their watches (CASCADE), by `how` (kwatch._servers_gone, as
 * the extension's owner).  Only a CASCADE that removes watches fires the
 * caller's deferred triggers and acts for the issuer as kw_current_caller
 * (the rows go as each table's owner, owner_functions.c); the checks run
 * nothing of any role's.
 */
static void
servers_gone(Datum before, const char *how)
{
	KwExtension ext;

	SPI_connect();
	if (extension_here(&ext))
	{
		char	   *check = psprintf("SELECT r[1], r[2] FROM %s._servers_gone($1, 'check') r", ext.schema);
		char	   *cascade = psprintf("SELECT %s._servers_gone($1, 'cascade')", ext.schema);
		Oid			argtypes[1] = {TEXTARRAYOID};
		char	   *server;
		char	   *detail;

		execute_as_extension_owner(&ext, check, 1, argtypes, &before, false);
		server = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
		detail = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
		if (server != NULL && strcmp(how, "rename") == 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("cannot rename server \"%s\" because kwatch watches it", server),
					 errdetail_internal("%s\nThe server's name is the cluster value of the rows these watches write.",
										detail),
					 errhint("Remove the watches first (kwatch.unwatch(..., server => %s)), or create a server with the new name and watch from it.",
							 quote_literal_cstr(server))));
		if (server != NULL && strcmp(how, "cascade") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
					 errmsg("cannot drop server %s because other objects depend on it", server),
					 errdetail_internal("%s", detail),
					 errhint("Use DROP ... CASCADE to drop the dependent objects too: the watches and the rows they wrote.")));
		if (server != NULL)
		{
			Oid			save_caller = kw_set_current_caller(GetUserId());

			kw_refuse_deferral_begin();
			PG_TRY();
			{
				kw_fire_deferred_triggers();
				execute_as_extension_owner(&ext, cascade, 1, argtypes, &before, false);
			}
			PG_FINALLY();
			{
				kw_set_current_caller(save_caller);
				kw_refuse_deferral_end();
			}
			PG_END_TRY();
		}
	}
	SPI_finish();
}

/*
 * new_server_name: the name a statement gives a foreign server (CREATE
 * SERVER, ALTER SERVER ... RENAME TO), or NULL.
 */
static const char *
new_server_name(Node *parsetree)
{
	if (IsA(parsetree, CreateForeignServerStmt))
		return ((CreateForeignServerStmt *) parsetree)->servername;
	if (IsA(parsetree, RenameStmt) &&
		((RenameStmt *) parsetree)->renameType == OBJECT_FOREIGN_SERVER)
		return ((RenameStmt *) parsetree)->newname;
	return NULL;
}

/*
 * check_server_name_held: refuses (42710) a new server name that
 * registrations still hold (their server was dropped before 0.7.0 followed
 * servers) when they belong to roles the issuer may not act for, unless the
 * issuer is a superuser: the server would take those watches over, and
 * its DROP ... CASCADE would remove them (kwatch._server_name_held).
 */
static void
check_server_name_held(const char *name)
{
	KwExtension ext;
	char	   *held = NULL;

	if (superuser())
		return;
	SPI_connect();
	if (extension_here(&ext))
	{
		char	   *sql = psprintf("SELECT %s._server_name_held($1, $2)", ext.schema);
		Oid			argtypes[2] = {TEXTOID, OIDOID};
		Datum		values[2] = {CStringGetTextDatum(name), ObjectIdGetDatum(GetUserId())};

		execute_as_extension_owner(&ext, sql, 2, argtypes, values, true);
		held = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	}
	if (held != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("server name \"%s\" is held by the watches of other roles", name),
				 errdetail_internal("%s", held),
				 errhint("Their server was dropped before kwatch followed servers; a superuser can remove them with kwatch.unwatch(..., server => %s), or choose another name.",
						 quote_literal_cstr(name))));
	SPI_finish();
}

PG_FUNCTION_INFO_V1(kwatch_lock_server);

/*
 * kwatch_lock_server: SQL kwatch._lock_server(name text) -> void: locks
 * foreign server `name` (AccessShareLock on the object until the end of
 * the transaction, lmgr.c LockDatabaseObject), then checks that it still
 * exists, so that a watch() and a concurrent DROP SERVER serialize: the
 * DROP, which takes AccessExclusiveLock on the server (get_object_address),
 * waits for the watch's transaction and then sees its registration.
 * ERRORs: 42704 when there is no such server.
 */
Datum
kwatch_lock_server(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	ForeignServer *srv = GetForeignServerByName(name, false);

	LockDatabaseObject(ForeignServerRelationId, srv->serverid, 0, AccessShareLock);
	(void) GetForeignServerByName(name, false);
	PG_RETURN_VOID();
}

/*
 * changes_connections: whether a statement may change the settings or the
 * rights a watch connects with (connection.c): ALTER SERVER, CREATE/ALTER/
 * DROP USER MAPPING, GRANT/REVOKE on a foreign server, ALTER ROLE (superuser
 * or not decides whether a role may go without a user mapping), GRANT/REVOKE
 * of a role (USAGE may come through a membership).  The
 * worker, woken at commit, reads such a watch's settings again at once
 * instead of at its next periodic reload.
 */
static bool
changes_connections(Node *parsetree)
{
	switch (nodeTag(parsetree))
	{
		case T_AlterForeignServerStmt:
		case T_CreateUserMappingStmt:
		case T_AlterUserMappingStmt:
		case T_DropUserMappingStmt:
		case T_AlterRoleStmt:
		case T_GrantRoleStmt:
			return true;
		case T_GrantStmt:
			return ((GrantStmt *) parsetree)->objtype == OBJECT_FOREIGN_SERVER;
		default:
			return false;
	}
}

/*
 * creates_served_database: whether a statement creates the database
 * kwatch.database names (CREATE DATABASE, ALTER DATABASE ... RENAME TO it):
 * the worker, when it waits to try again (worker.c), is woken at commit.
 */
static bool
creates_served_database(Node *parsetree)
{
	if (kw_database == NULL)
		return false;
	if (IsA(parsetree, CreatedbStmt))
		return strcmp(((CreatedbStmt *) parsetree)->dbname, kw_database) == 0;
	if (IsA(parsetree, RenameStmt) &&
		((RenameStmt *) parsetree)->renameType == OBJECT_DATABASE)
		return strcmp(((RenameStmt *) parsetree)->newname, kw_database) == 0;
	return false;
}

/*
 * updates_kwatch: whether a statement is ALTER EXTENSION kwatch UPDATE: a
 * worker that waits for the library's schema (worker.c, wait_for_schema)
 * is woken at its commit rather than at its next look.
 */
static bool
updates_kwatch(Node *parsetree)
{
	return IsA(parsetree, AlterExtensionStmt) &&
		strcmp(((AlterExtensionStmt *) parsetree)->extname, "kwatch") == 0;
}

/*
 * ownership_utility_hook: the ProcessUtility hook (tcop/utility.h signature).
 * Applies the rules above around PostgreSQL's own processing of DROP ROLE,
 * DROP OWNED, REASSIGN OWNED and the statements that drop or rename a
 * foreign server; passes every statement on unchanged.
 */
static void
ownership_utility_hook(PlannedStmt *pstmt, const char *queryString,
					   bool readOnlyTree, ProcessUtilityContext context,
					   ParamListInfo params, QueryEnvironment *queryEnv,
					   DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;
	const char *servers_how = may_remove_servers(parsetree);
	Datum		servers_before = (Datum) 0;

	/* before DROP OWNED removes the roles' own watches: see servers_gone */
	if (servers_how != NULL)
	{
		lock_named_servers(parsetree);
		servers_before = watched_servers(CurrentMemoryContext);
	}

	if (IsA(parsetree, DropRoleStmt))
		check_drop_role((DropRoleStmt *) parsetree);
	else if (IsA(parsetree, DropOwnedStmt))
		drop_owned_watches((DropOwnedStmt *) parsetree);

	if (prev_ProcessUtility)
		prev_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
							queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);

	if (servers_before != (Datum) 0)
		servers_gone(servers_before, servers_how);
	if (new_server_name(parsetree) != NULL)
		check_server_name_held(new_server_name(parsetree));
	if (IsA(parsetree, ReassignOwnedStmt))
		reassign_owned_watches((ReassignOwnedStmt *) parsetree);
	else if (creates_served_database(parsetree))
		kw_retry_connect_at_commit();
	else if (changes_connections(parsetree) || updates_kwatch(parsetree))
		kw_wake_worker_at_commit();
	/* pg_extension may have changed: the next check reads it again */
	if (IsA(parsetree, CreateExtensionStmt) || IsA(parsetree, AlterExtensionStmt) ||
		(IsA(parsetree, DropStmt) && ((DropStmt *) parsetree)->removeType == OBJECT_EXTENSION))
		kw_schema_version_forget();
}

/*
 * kw_ownership_init: installs the ProcessUtility hook; called by _PG_init
 * in every process that loads kwatch.
 */
void
kw_ownership_init(void)
{
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = ownership_utility_hook;
}

PG_FUNCTION_INFO_V1(kwatch_check_watch_owner);

/*
 * kwatch_check_watch_owner: SQL kwatch._check_watch_owner(owner oid,
 * server text, resource text) -> void, called by kwatch.unwatch() and
 * kwatch.relist() before they act on a watch.  The caller (the role that
 * called them, kw_current_caller, privileged.c) may when it is a
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
	Oid			caller = kw_current_caller();
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
