/*-------------------------------------------------------------------------
 *
 * apply.c
 *		kwatch.apply() and kwatch.wait_apply(): server-side apply
 *		of one object from SQL, checked by a dry run in the statement and
 *		sent at once or after COMMIT.
 *
 * The request always carries the identity of the role that asked: the
 * current user's credentials, chosen as live tables choose them (its user
 * mapping, else the server's PUBLIC mapping; connection.c), after a check
 * of USAGE on the server.  An apply at commit is recorded in
 * kwatch.apply_queue in the caller's transaction (as the extension's
 * owner: the table is no role's to write; no role's code runs while we
 * act as the owner) with that role's oid, and sent by the request sender
 * (sender/sender.c) with that role's credentials, checked again.  The
 * applies of one object are queued in commit order: apply() locks the
 * object's row of kwatch.apply_objects until the transaction ends, so a
 * later transaction's apply of it gets a larger id and the sender sends
 * them in id order.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_proc.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "utils/acl.h"
/* fmgrprotos.h declares a json_object() function: keep it out of json-c's way */
#define json_object pg_json_object_fn
#include "utils/builtins.h"
#undef json_object
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include <json-c/json.h>

#include "kw_common.h"
#include "kw_status.h"
#include "kw_cluster.h"
#include "kw_http.h"
#include "kw_write.h"
#include "kw_as_owner.h"
#include "kw_functions.h"

/*
 * What this transaction queued that later objects of it may need (the
 * deferral rule): "server\001group\001kind\001name" of each CRD and
 * Namespace applied at commit.  In TopTransactionContext; forgotten at the
 * transaction's end (queued_xact_callback).
 */
static List *queued_parents = NIL;
static bool queued_callback = false;

static void
queued_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_PREPARE)
		queued_parents = NIL;
}

/* A manifest's parts, read with json-c. */
typedef struct Manifest
{
	json_object *doc;
	char	   *text;			/* the manifest as jsonb prints it: the request body */
	const char *api_version;
	const char *kind;
	const char *name;
	const char *namespace;		/* NULL when not given */
	char	   *api_group;		/* "" for the core group */
} Manifest;

/* free_json: a memory context reset callback that frees a json-c object */
static void
free_json(void *arg)
{
	json_object_put((json_object *) arg);
}

/*
 * free_with_call: json-c's memory is malloc'd: `obj` is freed when the
 * call's memory context is reset, on every path, errors included.
 */
static json_object *
free_with_call(json_object *obj)
{
	MemoryContextCallback *cb = palloc0(sizeof(MemoryContextCallback));

	cb->func = free_json;
	cb->arg = obj;
	MemoryContextRegisterResetCallback(CurrentMemoryContext, cb);
	return obj;
}

/* valid_api_version: a group/version or version made of [a-z0-9.-]. */
static bool
valid_api_version(const char *s)
{
	int			slashes = 0;

	if (*s == '\0' || *s == '/' || strstr(s, "..") != NULL || *s == '.' || *s == '-')
		return false;
	for (const char *p = s; *p; p++)
	{
		if (*p == '/')
		{
			if (++slashes > 1 || p[1] == '\0')
				return false;
		}
		else if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '.' || *p == '-'))
			return false;
		else if (p > s && p[-1] == '/' && !((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')))
			return false;
	}
	return true;
}

/*
 * read_manifest: the parts of `manifest`; ERRORs 22023 (before any request)
 * unless it is an object with string apiVersion, kind and metadata.name.
 */
static void
read_manifest(Jsonb *manifest, Manifest *m)
{
	char	   *text = JsonbToCString(NULL, &manifest->root, VARSIZE(manifest));
	json_object *meta;
	const char *slash;

	memset(m, 0, sizeof(*m));
	m->text = text;
	{
		json_tokener *tok = json_tokener_new_ex(256);

		m->doc = json_tokener_parse_ex(tok, text, (int) strlen(text));
		json_tokener_free(tok);
		if (m->doc)
			free_with_call(m->doc);
	}
	if (m->doc == NULL || !json_object_is_type(m->doc, json_type_object))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a manifest must be a JSON object")));
	m->api_version = kw_json_get_string(m->doc, "apiVersion");
	m->kind = kw_json_get_string(m->doc, "kind");
	if (!json_object_object_get_ex(m->doc, "metadata", &meta) ||
		!json_object_is_type(meta, json_type_object))
		meta = NULL;
	m->name = meta ? kw_json_get_string(meta, "name") : NULL;
	m->namespace = meta ? kw_json_get_string(meta, "namespace") : NULL;
	if (m->api_version == NULL || !valid_api_version(m->api_version))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a manifest needs an apiVersion such as \"v1\" or \"apps/v1\""),
				 m->api_version ? errdetail("It has \"%s\".", kw_excerpt(m->api_version)) : 0));
	if (m->kind == NULL || *m->kind == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a manifest needs a kind")));
	if (m->name == NULL || *m->name == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a manifest needs metadata.name"),
				 errhint("kwatch.apply() applies one named object (server-side apply has no generateName).")));
	if (m->namespace && *m->namespace == '\0')
		m->namespace = NULL;
	slash = strchr(m->api_version, '/');
	m->api_group = slash ? pnstrdup(m->api_version, slash - m->api_version) : pstrdup("");
}

/*
 * shown_object: the object of a 2xx answer as jsonb, as mirror rows hold
 * objects: without metadata.managedFields (decode.c drops it from rows),
 * and a Secret's data and stringData left out (they reach no result row);
 * NULL when the body is not a JSON object.
 */
static Datum
shown_object(const char *body, const Manifest *m, bool *isnull)
{
	json_object *obj = json_tokener_parse(body);
	Datum		d;

	*isnull = true;
	if (obj == NULL)
		return (Datum) 0;
	if (!json_object_is_type(obj, json_type_object))
	{
		json_object_put(obj);
		return (Datum) 0;
	}
	{
		json_object *meta;

		if (json_object_object_get_ex(obj, "metadata", &meta) && json_object_is_type(meta, json_type_object))
			json_object_object_del(meta, "managedFields");
	}
	if (m->api_group[0] == '\0' && strcmp(m->kind, "Secret") == 0)
	{
		json_object_object_del(obj, "data");
		json_object_object_del(obj, "stringData");
	}
	PG_TRY();
	{
		d = DirectFunctionCall1(jsonb_in, CStringGetDatum(json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN |
																								  JSON_C_TO_STRING_NOSLASHESCAPE)));
	}
	PG_FINALLY();
	{
		json_object_put(obj);
	}
	PG_END_TRY();
	*isnull = false;
	return d;
}

/* result: the apply_result composite (id, state, object). */
static Datum
result(FunctionCallInfo fcinfo, Datum id, bool id_null, const char *state,
	   Datum object, bool object_null)
{
	TupleDesc	tupdesc;
	Datum		values[3];
	bool		nulls[3] = {id_null, false, object_null};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "kwatch.apply_result is not a composite type");
	tupdesc = BlessTupleDesc(tupdesc);
	values[0] = id;
	values[1] = CStringGetTextDatum(state);
	values[2] = object;
	return HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls));
}

/* the extension's schema (of the called function), quoted */
static char *
extension_schema(FunctionCallInfo fcinfo)
{
	return pstrdup(quote_identifier(get_namespace_name(get_func_namespace(fcinfo->flinfo->fn_oid))));
}

/* the called function's owner: the extension's */
static Oid
extension_owner(FunctionCallInfo fcinfo)
{
	HeapTuple	tp = SearchSysCache1(PROCOID, ObjectIdGetDatum(fcinfo->flinfo->fn_oid));
	Oid			owner;

	if (!HeapTupleIsValid(tp))
		elog(ERROR, "cache lookup failed for function %u", fcinfo->flinfo->fn_oid);
	owner = ((Form_pg_proc) GETSTRUCT(tp))->proowner;
	ReleaseSysCache(tp);
	return owner;
}

/*
 * as_owner_execute: runs `sql` with `args` through SPI (connected) as the
 * extension's owner (kw_as_owner_begin: SECURITY_RESTRICTED_OPERATION,
 * search_path pinned, no deferral), with lock_timeout 5 s.  The
 * statements touch kwatch's own tables only, which carry no trigger.
 * ERRORs when SPI does not answer `expect`.
 */
static void
as_owner_execute(Oid owner, const char *sql, int nargs, Oid *types, Datum *values,
				 const char *nulls, int expect)
{
	KwAsOwner	as;
	int			rc;

	kw_as_owner_begin(owner, &as);
	(void) set_config_option("lock_timeout", "5s", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	PG_TRY();
	{
		rc = SPI_execute_with_args(sql, nargs, types, values, nulls, false, 0);
	}
	PG_CATCH();
	{
		/* the abort restores the identity; a caught error must not leave deferral refused */
		kw_refuse_deferral_end();
		PG_RE_THROW();
	}
	PG_END_TRY();
	kw_as_owner_end(&as);
	if (rc != expect)
		elog(ERROR, "SPI_execute_with_args failed: %s", SPI_result_code_string(rc));
}

/* parent_key: the key of queued_parents */
static char *
parent_key(const char *server, const char *group, const char *kind, const char *name)
{
	return psprintf("%s\001%s\001%s\001%s", server, group, kind, name);
}

/* queued_here: whether this transaction queued an apply of that object at commit */
static bool
queued_here(const char *server, const char *group, const char *kind, const char *name)
{
	char	   *key = parent_key(server, group, kind, name);
	ListCell   *lc;

	foreach(lc, queued_parents)
		if (strcmp((char *) lfirst(lc), key) == 0)
			return true;
	return false;
}

/* note_queued: remembers a CRD or Namespace applied at commit */
static void
note_queued(const char *server, const char *group, const char *kind, const char *name)
{
	MemoryContext old;

	if (!((strcmp(group, "") == 0 && strcmp(kind, "Namespace") == 0) ||
		  (strcmp(group, "apiextensions.k8s.io") == 0 && strcmp(kind, "CustomResourceDefinition") == 0)))
		return;
	if (!queued_callback)
	{
		RegisterXactCallback(queued_xact_callback, NULL);
		queued_callback = true;
	}
	old = MemoryContextSwitchTo(TopTransactionContext);
	queued_parents = lappend(queued_parents, parent_key(server, group, kind, name));
	MemoryContextSwitchTo(old);
}

/*
 * crd_queued_for: whether this transaction queued, at commit, the CRD that
 * would serve `kind` of `api_group` on `server`: a CRD is named
 * <plural>.<group>, so any CRD of that group counts.
 */
static bool
crd_queued_for(const char *server, const char *api_group)
{
	char	   *prefix = psprintf("%s\001apiextensions.k8s.io\001CustomResourceDefinition\001", server);
	char	   *suffix = psprintf(".%s", api_group);
	ListCell   *lc;

	if (*api_group == '\0')
		return false;
	foreach(lc, queued_parents)
	{
		char	   *k = (char *) lfirst(lc);
		size_t		kl = strlen(k);

		if (strncmp(k, prefix, strlen(prefix)) == 0 && kl > strlen(suffix) &&
			strcmp(k + kl - strlen(suffix), suffix) == 0)
			return true;
	}
	return false;
}

/*
 * check_segment: ERRORs 22023 unless `s` may be a path segment of an
 * object's URL: not empty, not "." or "..", no "/" or "%"
 * (apimachinery/pkg/api/validation/path, IsValidPathSegmentName).
 */
static void
check_segment(const char *what, const char *s)
{
	if (*s == '\0' || strcmp(s, ".") == 0 || strcmp(s, "..") == 0 ||
		strchr(s, '/') != NULL || strchr(s, '%') != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s \"%s\" cannot be part of an object's path", what, kw_excerpt(s)),
				 errdetail("A name may not be \".\" or \"..\" nor contain \"/\" or \"%%\" (apimachinery's IsValidPathSegmentName).")));
}

/* check_deadline: a deadline of more than 0 and at most a day (22023) */
static void
check_deadline(Interval *deadline)
{
	Interval	day = {0};
	Interval	zero = {0};

	if (deadline == NULL)
		return;
	day.day = 1;
	if (DatumGetBool(DirectFunctionCall2(interval_le, IntervalPGetDatum(deadline), IntervalPGetDatum(&zero))) ||
		DatumGetBool(DirectFunctionCall2(interval_gt, IntervalPGetDatum(deadline), IntervalPGetDatum(&day))))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("deadline must be more than 0 and at most 1 day")));
}

/* One request to record at commit (kwatch.apply_queue's columns). */
typedef struct QueuedRequest
{
	const char *server;
	const char *api_group;
	const char *api_version;
	const char *resource;		/* NULL: found at the send (deferred) */
	const char *kind;
	const char *namespace;
	const char *name;
	const char *field_manager;
	bool		force;
	const char *verb;			/* "apply" or "delete" */
	Datum		manifest;		/* jsonb, or 0 */
	Datum		delete_options; /* jsonb, or 0 */
	bool		validated;
	Interval   *deadline;		/* NULL: 10 minutes */
} QueuedRequest;

/*
 * queue_request: records `q` for the request sender, as the extension's
 * owner, in the caller's transaction, with the current user as the role it
 * is sent for; first locks the object's row of kwatch.apply_objects (commit
 * order per object, see the file header); wakes the sender at commit.
 * Returns the id (int8 Datum).
 */
static Datum
queue_request(FunctionCallInfo fcinfo, QueuedRequest *q)
{
	char	   *schema = extension_schema(fcinfo);
	Oid			owner = extension_owner(fcinfo);
	char	   *key = psprintf("%s/%s/%s/%s/%s", q->server, q->api_group, q->kind,
							   q->namespace ? q->namespace : "", q->name);
	Oid			types[17] = {TEXTOID, OIDOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID,
	TEXTOID, TEXTOID, TEXTOID, BOOLOID, JSONBOID, BOOLOID, INTERVALOID, TEXTOID, JSONBOID, TEXTOID};
	Datum		values[17];
	char		nulls[17];
	Datum		id;
	bool		isnull;

	/*
	 * The server stays what it is until this transaction ends: ALTER SERVER
	 * ... RENAME and DROP SERVER take AccessExclusiveLock on it
	 * (get_object_address), so they wait, and then see this pending apply
	 * (ownership.c: a rename is refused, a DROP ... CASCADE fails it), as
	 * watch() locks it (kwatch._lock_server).  A server of the same name
	 * made later never receives the apply.
	 */
	{
		ForeignServer *srv = GetForeignServerByName(q->server, false);

		LockDatabaseObject(ForeignServerRelationId, srv->serverid, 0, AccessShareLock);
		(void) GetForeignServerByName(q->server, false);
	}
	memset(nulls, ' ', sizeof(nulls));
	values[0] = CStringGetTextDatum(q->server);
	values[1] = ObjectIdGetDatum(GetUserId());
	values[2] = CStringGetTextDatum(key);
	values[3] = CStringGetTextDatum(q->api_group);
	values[4] = CStringGetTextDatum(q->api_version);
	if (q->resource)
		values[5] = CStringGetTextDatum(q->resource);
	else
		nulls[5] = 'n';
	values[6] = CStringGetTextDatum(q->kind);
	if (q->namespace)
		values[7] = CStringGetTextDatum(q->namespace);
	else
		nulls[7] = 'n';
	values[8] = CStringGetTextDatum(q->name);
	values[9] = CStringGetTextDatum(q->field_manager);
	values[10] = BoolGetDatum(q->force);
	values[11] = q->manifest;
	if (q->manifest == (Datum) 0)
		nulls[11] = 'n';
	values[12] = BoolGetDatum(q->validated);
	if (q->deadline)
		values[13] = IntervalPGetDatum(q->deadline);
	else
		nulls[13] = 'n';
	values[14] = CStringGetTextDatum(q->verb);
	values[15] = q->delete_options;
	if (q->delete_options == (Datum) 0)
		nulls[15] = 'n';
	values[16] = CStringGetTextDatum(GetUserNameFromId(GetUserId(), false));

	SPI_connect();
	/* a role that holds an object's row (an open transaction) delays another's apply 5 s at most */
	as_owner_execute(owner,
					 psprintf("INSERT INTO %s.apply_objects AS o (object_key) VALUES ($3)"
							  " ON CONFLICT (object_key) DO UPDATE SET object_key = o.object_key", schema),
					 17, types, values, nulls, SPI_OK_INSERT);
	as_owner_execute(owner,
					 psprintf("INSERT INTO %s.apply_queue (server, role, object_key, api_group, api_version,"
							  " resource, kind, namespace, name, field_manager, force, manifest, validated,"
							  " deadline, verb, delete_options, role_name)"
							  " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13,"
							  " pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) COALESCE($14, interval '10 minutes'),"
							  " $15, $16, $17)"
							  " RETURNING id", schema),
					 17, types, values, nulls, SPI_OK_INSERT_RETURNING);
	/* read as int64 before SPI_finish: a by-reference Datum where int8 is */
	id = Int64GetDatum(DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)));
	SPI_finish();
	note_queued(q->server, q->api_group, q->kind, q->name);
	kw_wake_sender_at_commit();
	return id;
}

/*
 * check_mode: whether the request goes at commit (not a dry run, at =>
 * 'commit'), after the checks every mode shares: `at` is 'commit' or
 * 'now' (22023); not in a security-restricted operation (42501); at commit
 * not on a hot standby (25006) and in the database the worker serves
 * (55000).
 */
static bool
check_mode(const char *at, bool dry_run, const char *function)
{
	bool		at_commit;

	if (strcmp(at, "commit") != 0 && strcmp(at, "now") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("at must be 'commit' or 'now', not \"%s\"", kw_excerpt(at))));
	at_commit = strcmp(at, "commit") == 0 && !dry_run;
	if (InSecurityRestrictedOperation())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("cannot call %s within a security-restricted operation", function),
				 errdetail("Code that runs as a table's owner on another role's behalf (a trigger the kwatch worker fires, say) may not act on a cluster.")));
	if (at_commit && RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot queue a request on a server in recovery (a hot standby)"),
				 errhint("Call it on the primary, or with at => 'now'.")));
	if (at_commit)
		kw_require_served_database();
	return at_commit;
}

/*
 * resolve_server: `server`, or the only kwatch server when NULL
 * (kwatch._default_server(): 42704 none, 42P08 several); ERRORs 42501
 * unless the current user has USAGE on it (live tables' rule), 42704 when
 * it does not exist.
 */
static char *
resolve_server(FunctionCallInfo fcinfo, char *server)
{
	ForeignServer *srv;

	if (server == NULL)
	{
		MemoryContext cxt = CurrentMemoryContext;

		SPI_connect();
		if (SPI_execute(psprintf("SELECT %s._default_server()", extension_schema(fcinfo)), true, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not find the default server");
		server = MemoryContextStrdup(cxt, SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
		SPI_finish();
	}
	srv = GetForeignServerByName(server, false);
	if (kw_server_usage(srv->serverid, GetUserId()) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for foreign server %s", server),
				 errhint("kwatch sends with your own credentials: GRANT USAGE ON FOREIGN SERVER %s TO the role, and give it a user mapping.",
						 quote_identifier(server))));
	return server;
}

PG_FUNCTION_INFO_V1(kwatch_apply);

/*
 * kwatch_apply: SQL kwatch.apply(manifest jsonb, server text, field_manager
 * text, force boolean, dry_run boolean, at text, deadline interval) ->
 * kwatch.apply_result.  See the extension script for what it does and its
 * SQLSTATEs; the rules: server-side apply
 * (https://kubernetes.io/docs/reference/using-api/server-side-apply/), the
 * dry run (dryRun=All, kubernetes.io/docs/reference/using-api/api-concepts
 * "Dry-run"), the RESTMapper's kind lookup (kw_discover_kind), the request
 * identity of live tables (connection.c).
 * Refuses (55000) an extension not at the library's version first
 * (kw_check_schema_version).
 */
Datum
kwatch_apply(PG_FUNCTION_ARGS)
{
	Manifest	m;
	char	   *server;
	char	   *field_manager = PG_ARGISNULL(2) ? "kwatch" : text_to_cstring(PG_GETARG_TEXT_PP(2));
	bool		force = PG_ARGISNULL(3) ? false : PG_GETARG_BOOL(3);
	bool		dry_run = PG_ARGISNULL(4) ? false : PG_GETARG_BOOL(4);
	char	   *at = PG_ARGISNULL(5) ? "commit" : text_to_cstring(PG_GETARG_TEXT_PP(5));
	Interval   *deadline = PG_ARGISNULL(6) ? NULL : PG_GETARG_INTERVAL_P(6);
	bool		at_commit;
	KwClusterConfig *cfg;
	KwResource	r;
	bool		known;
	bool		validated = true;
	const char *namespace = NULL;
	char	   *path = NULL;
	char	   *body;
	KwHttpResponse resp;
	Datum		object = (Datum) 0;
	bool		object_null = true;
	char	   *what;

	kw_check_schema_version();
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the manifest of kwatch.apply() must not be NULL")));
	if (*field_manager == '\0' || strlen(field_manager) > 128)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("field_manager must have 1 to 128 characters")));
	at_commit = check_mode(at, dry_run, "kwatch.apply()");

	if (VARSIZE_ANY(PG_GETARG_DATUM(0)) > 3 * 1024 * 1024)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a manifest of more than 3 MB"),
				 errdetail("The API server takes request bodies of up to 3 MB.")));
	check_deadline(deadline);
	read_manifest(PG_GETARG_JSONB_P(0), &m);
	check_segment("name", m.name);
	if (m.namespace)
		check_segment("namespace", m.namespace);

	/* the server, and the caller's right to use it (live tables' rule) */
	server = resolve_server(fcinfo, PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1)));
	cfg = kw_cluster_config_for_server(server, GetUserId());
	/* jsonb's text: JSON's escapes, which YAML's double-quoted strings share (json-c's "\/" is not one) */
	body = m.text;
	what = psprintf("the apply of %s \"%s\"", m.kind, kw_excerpt(m.name));

	/* which resource serves the kind; a dry run of the apply */
	known = kw_discover_kind(cfg, m.api_version, m.kind, &r);
	if (!known)
	{
		if (!(at_commit && crd_queued_for(server, m.api_group)))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("server \"%s\" serves no kind %s in %s", server, kw_excerpt(m.kind),
							kw_excerpt(m.api_version)),
					 errhint("Check apiVersion and kind (kubectl api-resources); a custom resource needs its CRD established first.")));
		validated = false;
	}
	else
	{
		namespace = !r.namespaced ? NULL :
			m.namespace ? m.namespace :
			cfg->default_namespace ? cfg->default_namespace : "default";
		path = kw_write_path(&r, namespace, m.name);
		kw_write_apply(cfg, path, body, field_manager, force, true, &resp);
		if (resp.status < 200 || resp.status > 299)
		{
			if (!(resp.status == 404 && at_commit && namespace != NULL &&
				  queued_here(server, "", "Namespace", namespace)))
				kw_write_raise(cfg, psprintf("%s (dry run)", what), &resp, kw_is_secret_resource(r.api_group, r.plural));
			validated = false;
		}
		else
			object = shown_object(resp.body.data, &m, &object_null);
	}

	if (dry_run)
		PG_RETURN_DATUM(result(fcinfo, (Datum) 0, true, "dry run", object, object_null));

	if (!at_commit)
	{
		kw_write_apply(cfg, path, body, field_manager, force, false, &resp);
		if (resp.status < 200 || resp.status > 299)
			kw_write_raise(cfg, what, &resp, kw_is_secret_resource(r.api_group, r.plural));
		object = shown_object(resp.body.data, &m, &object_null);
		PG_RETURN_DATUM(result(fcinfo, (Datum) 0, true, "applied", object, object_null));
	}

	/* at commit: record it, in commit order per object */
	{
		QueuedRequest q = {0};

		q.server = server;
		q.api_group = m.api_group;
		q.api_version = m.api_version;
		q.resource = known ? r.plural : NULL;
		q.kind = m.kind;
		q.namespace = known ? namespace : m.namespace;
		q.name = m.name;
		q.field_manager = field_manager;
		q.force = force;
		q.verb = "apply";
		q.manifest = PG_GETARG_DATUM(0);
		q.validated = validated;
		q.deadline = deadline;
		PG_RETURN_DATUM(result(fcinfo, queue_request(fcinfo, &q), false, "pending", object, object_null));
	}
}

PG_FUNCTION_INFO_V1(kwatch_delete);

/*
 * kwatch_delete: SQL kwatch.delete(resource text, name text, namespace
 * text, server text, uid text, resource_version text, propagation_policy
 * text, grace_period integer, dry_run boolean, at text, deadline interval)
 * -> kwatch.apply_result.  See the extension script for what it does and
 * its SQLSTATEs; the rules: DELETE with DeleteOptions (preconditions,
 * propagationPolicy, gracePeriodSeconds, dryRun;
 * kubernetes.io/docs/reference/kubernetes-api/common-definitions/delete-options/),
 * the resource resolved as watch() resolves it (kw_discover_resource).
 * Refuses (55000) an extension not at the library's version first
 * (kw_check_schema_version).
 */
Datum
kwatch_delete(PG_FUNCTION_ARGS)
{
	char	   *resource_name;
	char	   *name;
	char	   *namespace = PG_ARGISNULL(2) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(2));
	char	   *server;
	char	   *uid = PG_ARGISNULL(4) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(4));
	char	   *rv = PG_ARGISNULL(5) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(5));
	char	   *policy = PG_ARGISNULL(6) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(6));
	bool		dry_run = PG_ARGISNULL(8) ? false : PG_GETARG_BOOL(8);
	char	   *at = PG_ARGISNULL(9) ? "commit" : text_to_cstring(PG_GETARG_TEXT_PP(9));
	Interval   *deadline = PG_ARGISNULL(10) ? NULL : PG_GETARG_INTERVAL_P(10);
	bool		at_commit;
	KwClusterConfig *cfg;
	KwResource	r;
	char	   *path;
	json_object *options;
	json_object *pre;
	char	   *what;
	KwHttpResponse resp;

	kw_check_schema_version();
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("kwatch.delete() needs a resource and a name")));
	resource_name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	name = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (*name == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("kwatch.delete() needs a name")));
	if (policy && strcmp(policy, "Orphan") != 0 && strcmp(policy, "Background") != 0 &&
		strcmp(policy, "Foreground") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("propagation_policy must be 'Orphan', 'Background' or 'Foreground'")));
	if (!PG_ARGISNULL(7) && PG_GETARG_INT32(7) < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("grace_period must not be negative")));
	check_segment("name", name);
	if (namespace)
		check_segment("namespace", namespace);
	check_deadline(deadline);
	at_commit = check_mode(at, dry_run, "kwatch.delete()");
	server = resolve_server(fcinfo, PG_ARGISNULL(3) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(3)));
	cfg = kw_cluster_config_for_server(server, GetUserId());
	{
		char	   *lower = pstrdup(resource_name);

		for (char *p = lower; *p; p++)
			if (*p >= 'A' && *p <= 'Z')
				*p += 'a' - 'A';
		if (!kw_discover_resource(cfg, lower, &r))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("server \"%s\" serves no resource \"%s\"", server, kw_excerpt(resource_name))));
	}
	if (!r.namespaced)
		namespace = NULL;
	else if (namespace == NULL)
		namespace = cfg->default_namespace ? cfg->default_namespace : "default";
	path = kw_write_path(&r, namespace, name);
	what = psprintf("the delete of %s \"%s\"", r.kind, kw_excerpt(name));

	options = free_with_call(json_object_new_object());
	json_object_object_add(options, "kind", json_object_new_string("DeleteOptions"));
	json_object_object_add(options, "apiVersion", json_object_new_string("v1"));
	if (uid || rv)
	{
		pre = json_object_new_object();
		if (uid)
			json_object_object_add(pre, "uid", json_object_new_string(uid));
		if (rv)
			json_object_object_add(pre, "resourceVersion", json_object_new_string(rv));
		json_object_object_add(options, "preconditions", pre);
	}
	if (policy)
		json_object_object_add(options, "propagationPolicy", json_object_new_string(policy));
	if (!PG_ARGISNULL(7))
		json_object_object_add(options, "gracePeriodSeconds", json_object_new_int(PG_GETARG_INT32(7)));

	/* the dry run, then by mode */
	{
		json_object *dry = NULL;
		char	   *real = pstrdup(json_object_to_json_string_ext(options, JSON_C_TO_STRING_PLAIN |
																  JSON_C_TO_STRING_NOSLASHESCAPE));

		json_object_deep_copy(options, &dry, NULL);
		json_object_object_add(dry, "dryRun", json_object_new_array());
		json_object_array_add(json_object_object_get(dry, "dryRun"), json_object_new_string("All"));
		kw_write_delete(cfg, path, json_object_to_json_string_ext(dry, JSON_C_TO_STRING_PLAIN |
																  JSON_C_TO_STRING_NOSLASHESCAPE), &resp);
		json_object_put(dry);
		if (resp.status < 200 || resp.status > 299)
			kw_write_raise(cfg, psprintf("%s (dry run)", what), &resp, kw_is_secret_resource(r.api_group, r.plural));
		if (dry_run)
			PG_RETURN_DATUM(result(fcinfo, (Datum) 0, true, "dry run", (Datum) 0, true));
		if (!at_commit)
		{
			kw_write_delete(cfg, path, real, &resp);
			if (resp.status < 200 || resp.status > 299)
				kw_write_raise(cfg, what, &resp, kw_is_secret_resource(r.api_group, r.plural));
			PG_RETURN_DATUM(result(fcinfo, (Datum) 0, true, "applied", (Datum) 0, true));
		}
		{
			QueuedRequest q = {0};

			q.server = server;
			q.api_group = r.api_group;
			q.api_version = r.api_group[0] ? psprintf("%s/%s", r.api_group, r.api_version) : r.api_version;
			q.resource = r.plural;
			q.kind = r.kind;
			q.namespace = namespace;
			q.name = name;
			q.field_manager = "kwatch";
			q.force = false;
			q.verb = "delete";
			q.delete_options = DirectFunctionCall1(jsonb_in, CStringGetDatum(real));
			q.validated = true;
			q.deadline = deadline;
			PG_RETURN_DATUM(result(fcinfo, queue_request(fcinfo, &q), false, "pending", (Datum) 0, true));
		}
	}
}

PG_FUNCTION_INFO_V1(kwatch_wait_apply);

/*
 * kwatch_wait_apply: SQL kwatch.wait_apply(id bigint, timeout interval,
 * wait_mirror boolean) -> kwatch.apply_result: waits (reading the row again
 * every 50 ms, in READ COMMITTED: a new snapshot each time) until apply
 * `id` is no longer pending; returns it when applied (its object: what
 * the server stored, kept by the request sender without managedFields and
 * a Secret's data, as apply(at => 'now') returns it; NULL for a delete),
 * raises its error when it failed.  With wait_mirror,
 * then waits with kwatch.wait_current() for every watch of the caller's
 * that mirrors that resource on that server (read your own writes); where
 * the caller sees no such watch (a fleet database, whose rows come by
 * logical replication from the cluster database that watches it), until
 * the row of that server in the table kwatch._replicated_table() finds
 * shows the applied resourceVersion or a newer one, or for a delete is
 * gone (kwatch._wait_replicated, functions/fleet_waits.sql: 42P01 no such
 * table, 57014 at the timeout, which counts from the call).
 * ERRORs: 42704 no such apply for the caller (another role's is not
 * shown), 55000 made by the current transaction (COMMIT first), 0A000 in
 * REPEATABLE READ or SERIALIZABLE (the row would never change), 57014 at
 * the timeout, and the apply's own SQLSTATE when it failed.
 * Refuses (55000) an extension not at the library's version first
 * (kw_check_schema_version).
 */
Datum
kwatch_wait_apply(PG_FUNCTION_ARGS)
{
	int64		id = PG_GETARG_INT64(0);
	Interval   *timeout = PG_ARGISNULL(1) ? NULL : PG_GETARG_INTERVAL_P(1);
	bool		wait_mirror = PG_ARGISNULL(2) ? false : PG_GETARG_BOOL(2);
	char	   *schema = extension_schema(fcinfo);
	Oid			owner = extension_owner(fcinfo);
	TimestampTz until = 0;
	Oid			types[2] = {INT8OID, OIDOID};
	Datum		values[2] = {Int64GetDatum(id), ObjectIdGetDatum(GetUserId())};
	char	   *query = psprintf("SELECT q.state, q.sqlstate, q.message, q.detail, q.xmin::text,"
								 " q.server, q.api_group, q.resource, q.object,"
								 " q.verb, q.namespace, q.name,"
								 " COALESCE(q.uid, q.delete_options->'preconditions'->>'uid'), q.resource_version"
								 " FROM %s.apply_queue q WHERE q.id OPERATOR(pg_catalog.=) $1"
								 " AND (pg_catalog.pg_has_role($2, q.role, 'USAGE')"
								 "      OR (SELECT a.rolsuper FROM pg_catalog.pg_roles a WHERE a.oid OPERATOR(pg_catalog.=) $2))",
								 schema);
	bool		first = true;
	MemoryContext outer = CurrentMemoryContext;

	kw_check_schema_version();
	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("kwatch.wait_apply() needs READ COMMITTED"),
				 errdetail("Its transaction's snapshot would never see the apply finish.")));
	if (timeout)
		until = DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
														TimestampTzGetDatum(GetCurrentTimestamp()),
														IntervalPGetDatum(timeout)));
	for (;;)
	{
		char	   *state;
		char	   *sqlstate;
		char	   *message;
		char	   *detail;
		char	   *server;
		char	   *group;
		char	   *resource;
		char	   *outcome[5];

		CHECK_FOR_INTERRUPTS();
		SPI_connect();
		as_owner_execute(owner, query, 2, types, values, NULL, SPI_OK_SELECT);
		if (SPI_processed == 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("no apply %lld of your role", (long long) id),
					 errhint("kwatch.applies shows your role's applies made at commit; an apply at => 'now' or a dry run has no id.")));
		state = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
		sqlstate = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
		message = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3);
		detail = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4);
		if (first &&
			TransactionIdIsCurrentTransactionId((TransactionId) strtoul(SPI_getvalue(SPI_tuptable->vals[0],
																					  SPI_tuptable->tupdesc, 5),
																		 NULL, 10)))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("apply %lld was made by this transaction", (long long) id),
					 errdetail("It is sent after the transaction that made it commits."),
					 errhint("COMMIT first, then call kwatch.wait_apply().")));
		first = false;
		server = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 6);
		group = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 7);
		resource = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 8);
		/*
		 * the sender commits outcomes without waiting for their WAL flush
		 * (sender.c): make the one seen here durable before the caller acts
		 * on it
		 */
		if (strcmp(state, "pending") != 0 && !RecoveryInProgress())
			XLogFlush(GetXLogInsertRecPtr());
		if (strcmp(state, "failed") == 0)
		{
			int			code = sqlstate && strlen(sqlstate) == 5 ?
				MAKE_SQLSTATE(sqlstate[0], sqlstate[1], sqlstate[2], sqlstate[3], sqlstate[4]) :
				ERRCODE_FDW_ERROR;

			ereport(ERROR,
					(errcode(code),
					 errmsg("apply %lld failed: %s", (long long) id, message ? message : "(no message)"),
					 detail ? errdetail_internal("%s", detail) : 0));
		}
		if (strcmp(state, "applied") == 0)
		{
			Datum		v[3] = {0};
			bool		object_null;
			Datum		object = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 9, &object_null);
			MemoryContext spi_cxt = MemoryContextSwitchTo(outer);

			if (!object_null)
				object = PointerGetDatum(PG_DETOAST_DATUM_COPY(object));
			MemoryContextSwitchTo(spi_cxt);

			/*
			 * copied into the caller's context before SPI_finish, which frees
			 * SPI's (current here), where SPI_getvalue made the strings
			 */
			if (resource != NULL)
			{
				MemoryContext spi = MemoryContextSwitchTo(outer);

				v[0] = CStringGetTextDatum(server);
				v[1] = CStringGetTextDatum(group ? group : "");
				v[2] = CStringGetTextDatum(resource);
				for (int i = 0; i < 5; i++)
				{
					char	   *s = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 10 + i);

					outcome[i] = s ? pstrdup(s) : NULL;
				}
				MemoryContextSwitchTo(spi);
			}
			SPI_finish();
			if (wait_mirror && resource != NULL)
			{
				Oid			t[3] = {TEXTOID, TEXTOID, TEXTOID};
				bool		watched;
				bool		isnull;

				/* as the caller: wait_current() checks what it may see */
				SPI_connect();
				if (SPI_execute_with_args(psprintf("SELECT EXISTS (SELECT 1 FROM %1$s.watches x WHERE x.server = $1"
												   " AND x.resource = CASE WHEN $2 = '' THEN $3 ELSE $3 || '.' || $2 END)",
												   schema),
										  3, t, v, NULL, true, 1) != SPI_OK_SELECT)
					elog(ERROR, "could not look for the watches of the mirror");
				watched = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
				if (!watched)
				{
					/*
					 * a fleet database: the rows come by logical replication
					 * from the cluster database that watches it
					 * (functions/fleet_waits.sql)
					 */
					Oid			rt[9] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID,
					TEXTOID, TIMESTAMPTZOID};
					Datum		rv[9];
					char		rn[9];

					memset(rn, ' ', sizeof(rn));
					rv[0] = v[0];
					rv[1] = v[1];
					rv[2] = v[2];
					for (int i = 0; i < 5; i++)
					{
						if (outcome[i])
							rv[3 + i] = CStringGetTextDatum(outcome[i]);
						else
							rn[3 + i] = 'n';
					}
					rv[8] = TimestampTzGetDatum(until);
					if (until == 0)
						rn[8] = 'n';
					if (SPI_execute_with_args(psprintf("SELECT %s._wait_replicated($1, $2, $3, $4, $5, $6, $7, $8, $9)",
													   schema),
											  9, rt, rv, rn, false, 0) != SPI_OK_SELECT)
						elog(ERROR, "could not wait for the replicated mirror");
				}
				else if (SPI_execute_with_args(psprintf("SELECT %1$s.wait_current(x.resource, server => x.server,"
												   " timeout => %2$s)"
												   " FROM %1$s.watches x WHERE x.server = $1"
												   " AND x.resource = CASE WHEN $2 = '' THEN $3 ELSE $3 || '.' || $2 END",
												   schema,
												   timeout ? quote_literal_cstr(DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(timeout)))) : "NULL"),
										  3, t, v, NULL, false, 0) < 0)
					elog(ERROR, "could not wait for the mirror");
				SPI_finish();
			}
			PG_RETURN_DATUM(result(fcinfo, Int64GetDatum(id), false, "applied", object, object_null));
		}
		SPI_finish();
		if (until != 0 && GetCurrentTimestamp() >= until)
			ereport(ERROR,
					(errcode(ERRCODE_QUERY_CANCELED),
					 errmsg("apply %lld is still pending at the timeout", (long long) id),
					 errhint("See kwatch.applies: attempts, the last error and next_attempt_at.")));
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 50,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
