/*-------------------------------------------------------------------------
 *
 * import_servers.c
 *		kwatch.import_servers(): a kubeconfig's contexts become foreign
 *		servers in one statement.
 *
 * A fleet's kubeconfig names its clusters as contexts (client-go
 * tools/clientcmd/api/v1/types.go; `kubectl config get-contexts`).  Each
 * context matching the pattern becomes `CREATE SERVER <name> FOREIGN DATA
 * WRAPPER kwatch OPTIONS (kubeconfig '<path>', context '<context>')`, run
 * with the caller's rights as the caller would type it (the FDW validator
 * checks the options as for any CREATE SERVER: a kubeconfig is a file the
 * server reads, so the caller needs pg_read_server_files; a context whose
 * user runs an exec plugin needs pg_execute_server_program when used,
 * credential.c).  Run again, it creates what is new, reports what exists,
 * and reports the servers of contexts no longer in the file without
 * dropping anything (a server may have watches; DROP SERVER is the user's
 * call).  One server's refusal does not stop the others: each CREATE runs
 * in a subtransaction and its error becomes that row's detail.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>

#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "foreign/foreign.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/tuplestore.h"

#include "kw_common.h"
#include "kw_cluster.h"
#include "kw_functions.h"

static char *glob_to_like(const char *glob);

/* A kwatch server made from this kubeconfig (options kubeconfig, context). */
typedef struct ImportedServer
{
	char	   *name;
	char	   *context;
	bool		seen;			/* its context is still in the file */
} ImportedServer;

/*
 * server_name: the name a user can type for context `context`: `prefix`
 * then the context's name lower-cased, every run of characters other than
 * a-z, 0-9 and _ one '_', no '_' at either end ("arn:aws:eks:eu-west-1:
 * 1234:cluster/prod" -> "arn_aws_eks_eu_west_1_1234_cluster_prod"); "c_"
 * first when it would start with a digit; at most NAMEDATALEN - 1 bytes.
 */
static char *
server_name(const char *prefix, const char *context)
{
	StringInfoData b;
	bool		sep = false;

	initStringInfo(&b);
	appendStringInfoString(&b, prefix);
	for (const char *p = context; *p; p++)
	{
		unsigned char c = (unsigned char) *p;

		if (isascii(c) && (isalnum(c) || c == '_'))
		{
			if (sep && b.len > 0 && b.data[b.len - 1] != '_')
				appendStringInfoChar(&b, '_');
			appendStringInfoChar(&b, (char) tolower(c));
			sep = false;
		}
		else
			sep = true;
	}
	while (b.len > 0 && b.data[b.len - 1] == '_')
		b.data[--b.len] = '\0';
	if (b.len == 0)
		appendStringInfoString(&b, "context");
	if (isdigit((unsigned char) b.data[0]))
	{
		char	   *named = psprintf("c_%s", b.data);

		return pnstrdup(named, pg_mbcliplen(named, strlen(named), NAMEDATALEN - 1));
	}
	/* the prefix may hold multi-byte characters: never cut one */
	return pnstrdup(b.data, pg_mbcliplen(b.data, b.len, NAMEDATALEN - 1));
}

/*
 * imported_servers: the kwatch servers whose kubeconfig option is `path`
 * and which name a context, as a List of ImportedServer in `cxt`.  Reads
 * the catalog as the caller (pg_foreign_server's options are readable by
 * everyone).  SPI connected.
 */
static List *
imported_servers(const char *path, MemoryContext cxt)
{
	Oid			argtype = TEXTOID;
	Datum		arg = CStringGetTextDatum(path);
	List	   *servers = NIL;

	if (SPI_execute_with_args("SELECT s.srvname::text, c.option_value"
							  " FROM pg_catalog.pg_foreign_server s"
							  " JOIN pg_catalog.pg_foreign_data_wrapper w ON w.oid OPERATOR(pg_catalog.=) s.srvfdw"
							  " CROSS JOIN LATERAL pg_catalog.pg_options_to_table(s.srvoptions) k"
							  " CROSS JOIN LATERAL pg_catalog.pg_options_to_table(s.srvoptions) c"
							  " WHERE w.fdwname OPERATOR(pg_catalog.=) 'kwatch'"
							  "   AND k.option_name OPERATOR(pg_catalog.=) 'kubeconfig'"
							  "   AND k.option_value OPERATOR(pg_catalog.=) $1"
							  "   AND c.option_name OPERATOR(pg_catalog.=) 'context'"
							  " ORDER BY 1",
							  1, &argtype, &arg, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read pg_foreign_server");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		MemoryContext old = MemoryContextSwitchTo(cxt);
		ImportedServer *s = palloc0(sizeof(ImportedServer));

		s->name = pstrdup(SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
		s->context = pstrdup(SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2));
		servers = lappend(servers, s);
		MemoryContextSwitchTo(old);
	}
	return servers;
}

/* server_exists: whether a foreign server (of any wrapper) is named `name`. */
static bool
server_exists(const char *name)
{
	return GetForeignServerByName(name, true) != NULL;
}

/*
 * create_server: runs CREATE SERVER for `context` as the caller in a
 * subtransaction; NULL when it was made, else the error's message (in
 * `cxt`).  SPI connected.
 */
static char *
create_server(const char *name, const char *path, const char *context, MemoryContext cxt)
{
	ResourceOwner owner = CurrentResourceOwner;
	char	   *volatile failure = NULL;
	char	   *sql = psprintf("CREATE SERVER %s FOREIGN DATA WRAPPER kwatch OPTIONS (kubeconfig %s, context %s)",
							   quote_identifier(name), quote_literal_cstr(path),
							   quote_literal_cstr(context));

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		if (SPI_execute(sql, false, 0) != SPI_OK_UTILITY)
			elog(ERROR, "CREATE SERVER %s failed", quote_identifier(name));
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		ErrorData  *e;

		MemoryContextSwitchTo(cxt);
		e = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		/* a cancel or a timeout is the statement's, not this server's */
		if (e->sqlerrcode == ERRCODE_QUERY_CANCELED || e->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN)
			ReThrowError(e);
		failure = psprintf("%s (SQLSTATE %s)", e->message, unpack_sql_state(e->sqlerrcode));
	}
	PG_END_TRY();
	return failure;
}

/* put_row: one (server, context, action, detail) row of the result. */
static void
put_row(ReturnSetInfo *rsinfo, const char *server, const char *context,
		const char *action, const char *detail)
{
	Datum		values[4];
	bool		nulls[4] = {server == NULL, context == NULL, false, detail == NULL};

	values[0] = server ? CStringGetTextDatum(server) : (Datum) 0;
	values[1] = context ? CStringGetTextDatum(context) : (Datum) 0;
	values[2] = CStringGetTextDatum(action);
	values[3] = detail ? CStringGetTextDatum(detail) : (Datum) 0;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

PG_FUNCTION_INFO_V1(kwatch_import_servers);

/*
 * kwatch_import_servers: SQL kwatch.import_servers(kubeconfig text,
 * contexts text DEFAULT '*', prefix text DEFAULT '') -> TABLE (server text,
 * context text, action text, detail text): one row per context of the
 * kubeconfig (a path or a colon-separated list, as the server option)
 * whose name matches `contexts` (a pattern: * any run, ? one character),
 * in the file's order, then one per server of this kubeconfig whose
 * context is gone.  action: 'created' (CREATE SERVER ran), 'exists' (a
 * kwatch server of this kubeconfig and context exists: it is named),
 * 'collision' (the name is another server's: nothing made; pass a prefix),
 * 'refused' (CREATE SERVER failed: detail has its error), 'gone' (the
 * server's context is no longer in the file: kept).  Runs with the
 * caller's rights (see the file header).  ERRORs: 42501 without the
 * privileges of pg_read_server_files; reading or parsing the kubeconfig
 * (kw_kubeconfig_contexts); 22023 a NULL argument.
 */
Datum
kwatch_import_servers(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *path;
	char	   *pattern;
	char	   *prefix;
	List	   *contexts;
	List	   *existing;
	List	   *made = NIL;
	ListCell   *lc;
	MemoryContext cxt = CurrentMemoryContext;
	Datum		like;			/* `pattern` as LIKE's */

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("kubeconfig, contexts and prefix must not be NULL")));
	path = text_to_cstring(PG_GETARG_TEXT_PP(0));
	pattern = text_to_cstring(PG_GETARG_TEXT_PP(1));
	prefix = text_to_cstring(PG_GETARG_TEXT_PP(2));
	/* the FDW validator's rule for the option (fdw_option.c), before reading the file */
	if (!has_privs_of_role(GetUserId(), ROLE_PG_READ_SERVER_FILES))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to read kubeconfig \"%s\"", path),
				 errdetail("Only superusers and roles with privileges of the \"%s\" role may make the server read files.",
						   "pg_read_server_files")));

	like = CStringGetTextDatum(glob_to_like(pattern));
	InitMaterializedSRF(fcinfo, 0);
	contexts = kw_kubeconfig_contexts(path, NULL);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	existing = imported_servers(path, cxt);
	foreach(lc, contexts)
	{
		char	   *context = (char *) lfirst(lc);
		ImportedServer *have = NULL;
		ListCell   *sc;
		char	   *name;
		char	   *failure;

		if (!DatumGetBool(DirectFunctionCall2(textlike, CStringGetTextDatum(context),
											  like)))
			continue;
		foreach(sc, existing)
		{
			ImportedServer *s = (ImportedServer *) lfirst(sc);

			if (strcmp(s->context, context) == 0)
			{
				s->seen = true;
				if (have == NULL)
					have = s;
			}
		}
		if (have != NULL)
		{
			put_row(rsinfo, have->name, context, "exists", NULL);
			continue;
		}
		name = server_name(prefix, context);
		if (server_exists(name) || list_member(made, makeString(name)))
		{
			put_row(rsinfo, name, context, "collision",
					psprintf("A server named \"%s\" exists with other settings; nothing was made: pass prefix => to name these apart.", name));
			continue;
		}
		failure = create_server(name, path, context, cxt);
		if (failure)
			put_row(rsinfo, name, context, "refused", failure);
		else
		{
			made = lappend(made, makeString(name));
			put_row(rsinfo, name, context, "created", NULL);
		}
	}
	/* the servers of contexts that are gone (only those the pattern covers) */
	foreach(lc, existing)
	{
		ImportedServer *s = (ImportedServer *) lfirst(lc);
		bool		in_file = false;
		ListCell   *cc;

		foreach(cc, contexts)
			in_file |= strcmp((char *) lfirst(cc), s->context) == 0;
		if (!in_file &&
			DatumGetBool(DirectFunctionCall2(textlike, CStringGetTextDatum(s->context),
											 like)))
			put_row(rsinfo, s->name, s->context, "gone",
					"The context is no longer in the kubeconfig; the server is kept (DROP SERVER ... CASCADE removes it and its watches).");
	}
	SPI_finish();
	return (Datum) 0;
}

/*
 * glob_to_like: a pattern with * (any run) and ? (one character) as a
 * LIKE pattern: % and _ and the escape \ taken literally.
 */
static char *
glob_to_like(const char *glob)
{
	StringInfoData b;

	initStringInfo(&b);
	for (const char *p = glob; *p; p++)
	{
		if (*p == '*')
			appendStringInfoChar(&b, '%');
		else if (*p == '?')
			appendStringInfoChar(&b, '_');
		else
		{
			if (*p == '%' || *p == '_' || *p == '\\')
				appendStringInfoChar(&b, '\\');
			appendStringInfoChar(&b, *p);
		}
	}
	return b.data;
}
