/*-------------------------------------------------------------------------
 *
 * fdw_modify.c
 *		INSERT, UPDATE and DELETE on a live table act on the cluster during
 *		the statement, postgres_fdw style: each row is one request,
 *		sent with the credentials of the role the write is checked as (its
 *		user mapping, else PUBLIC's; connection.c), and a refusal aborts the
 *		statement with the server's words.  Kubernetes has no transaction:
 *		a request that succeeded is not undone by ROLLBACK.
 *
 *	 INSERT	 POST of the object to the collection
 *			 (?fieldManager=kwatch); the row's `object` (required), with
 *			 `labels`, `annotations`, `name` and `namespace` folded into its
 *			 metadata, apiVersion and kind filled in from the table.  An
 *			 object that exists is 42710.
 *	 UPDATE	 PATCH with Content-Type application/merge-patch+json (RFC 7396)
 *			 of what the statement changed: the difference between the row's
 *			 object as read and as the statement leaves it (`object`, then
 *			 `labels` and `annotations` over its metadata), plus the row's
 *			 metadata.resourceVersion, which the API server takes as a
 *			 precondition (apimachinery's "resourceVersion ... optimistic
 *			 concurrency"; PROTOCOL 14): a row read before the object changed
 *			 fails with 409, which is 40001 here, as is an object since
 *			 deleted (404).  A statement that changes nothing sends nothing.
 *	 DELETE	 DELETE with DeleteOptions.preconditions {uid, resourceVersion}
 *			 of the row: an object changed or recreated under the same name
 *			 since it was read is not deleted (409: 40001); one already gone
 *			 (404) counts as no row deleted.
 *
 * The row is identified by its `object` column, which the plan fetches
 * as the junk column "kw_object" (AddForeignUpdateTargets, as postgres_fdw
 * fetches ctid).  Writable columns: UPDATE `object`, `labels`,
 * `annotations`; INSERT those and `name`, `namespace`.  The others are
 * computed from the object, and writing one is 428C9 (as a generated
 * column's).  RETURNING computes every column from the object the server
 * answered with (for a DELETE answered by a Status, the row as read).
 *
 * Refused before any request: a role without USAGE on the server (42501,
 * as kwatch.apply()), a write inside a security-restricted operation
 * (42501), COPY FROM and rows routed to a live partition, a view's WITH
 * CHECK OPTION and INSERT ... ON CONFLICT (0A000: PostgreSQL checks them
 * after the row is written, and Kubernetes cannot take a write back).
 *
 * Secrets read through a redacting table hold "<redacted hmac-...>" in
 * place of each value: such a value is refused (22023) wherever it appears
 * in what would be sent to any Secret, so a digest is never written back
 * as a value.
 * Changes the server does not keep are its to drop: a change of `status`
 * of a resource with a status subresource, of managed fields, or of
 * read-only metadata is ignored by the API server; a JSON merge patch
 * replaces a list whole.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/sysattr.h"
#include "access/table.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "executor/executor.h"
#include "foreign/fdwapi.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "optimizer/appendinfo.h"
#include "optimizer/inherit.h"
#include "optimizer/pathnode.h"
#include "parser/parse_relation.h"
#include "parser/parsetree.h"
/* fmgrprotos.h declares a json_object() function: keep it out of json-c's way */
#define json_object pg_json_object_fn
#include "utils/builtins.h"
#include "utils/jsonb.h"
#undef json_object
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include <json-c/json.h>

#include "kw_common.h"
#include "kw_cluster.h"
#include "kw_http.h"
#include "kw_decode.h"
#include "kw_write.h"
#include "kw_fdw.h"
#include KW_EXPLAIN_STATE_H
#include KW_EXPLAIN_FORMAT_H

/* The field manager of live-table writes (managedFields show it). */
#define KW_LIVE_FIELD_MANAGER "kwatch"
/* Nesting json-c accepts here (its default, 32, refuses deep CRD objects). */
#define KW_JSON_MAX_DEPTH 10000
/* The junk column that identifies the row to UPDATE or DELETE. */
#define KW_JUNK_OBJECT "kw_object"

/* fdw_private of PlanForeignModify, by position. */
enum
{
	ModPrivUpdated,				/* List of String: the columns an UPDATE sets */
	ModPrivReturning,			/* Boolean: RETURNING wants the columns */
	ModPrivRequest				/* String: the request, for EXPLAIN */
};

/* Executor state of one result relation. */
typedef struct KwModifyState
{
	CmdType		operation;
	KwLiveTable *table;
	KwClusterConfig *cfg;
	KwResource	resource;
	List	   *updated;		/* String: columns an UPDATE sets */
	bool		returning;
	AttrNumber	junk_object;	/* resno of kw_object in the subplan's output */
	KwLiveRow  *row;			/* computes RETURNING's columns */
	MemoryContext temp_cxt;		/* per row */
} KwModifyState;

/* modify_state: the state BeginForeignModify made; ERRORs when there is none */
static KwModifyState *
modify_state(ResultRelInfo *rinfo)
{
	if (rinfo->ri_FdwState == NULL)
		elog(ERROR, "live table \"%s\" was not prepared for writing",
			 RelationGetRelationName(rinfo->ri_RelationDesc));
	return (KwModifyState *) rinfo->ri_FdwState;
}

/* writable: whether column `name` may be set by `operation`. */
static bool
writable(CmdType operation, const char *name)
{
	if (strcmp(name, "object") == 0 || strcmp(name, "labels") == 0 ||
		strcmp(name, "annotations") == 0)
		return true;
	return operation == CMD_INSERT &&
		(strcmp(name, "name") == 0 || strcmp(name, "namespace") == 0);
}

/* refuse_column: ERRORs 428C9 for a write to computed column `name`. */
static void
refuse_column(CmdType operation, Relation rel, const char *name)
{
	ereport(ERROR,
			(errcode(ERRCODE_GENERATED_ALWAYS),
			 errmsg("column \"%s\" of live table \"%s\" is computed from the object",
					name, RelationGetRelationName(rel)),
			 errdetail("%s on a live table writes %s.",
					   operation == CMD_INSERT ? "INSERT" : "UPDATE",
					   operation == CMD_INSERT ?
					   "object, labels, annotations, name and namespace" :
					   "object, labels and annotations"),
			 operation == CMD_INSERT ?
			 errhint("Put it in the object instead.") :
			 errhint("Change the object instead, e.g. SET object = jsonb_set(object, ...).")));
}

/* object_attno: the attribute number of column "object" of `rel`, 0 if none. */
static AttrNumber
object_attno(Relation rel)
{
	TupleDesc	desc = RelationGetDescr(rel);

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute a = TupleDescAttr(desc, i);

		if (!a->attisdropped && strcmp(NameStr(a->attname), "object") == 0)
			return a->atttypid == JSONBOID ? a->attnum : -1;
	}
	return 0;
}

/*
 * kwatchAddForeignUpdateTargets: the row's object as the junk column
 * kw_object.  ERRORs 0A000 when the table has no `object` column of type
 * jsonb (a hand-made table without it cannot name its rows).
 */
static void
kwatchAddForeignUpdateTargets(PlannerInfo *root, Index rtindex,
							  RangeTblEntry *target_rte, Relation target_relation)
{
	AttrNumber	attno = object_attno(target_relation);

	if (attno <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("live table \"%s\" has no column \"object\" of type jsonb",
						RelationGetRelationName(target_relation)),
				 errdetail("UPDATE and DELETE on a live table name each row by its object.")));
	add_row_identity_var(root, makeVar(rtindex, attno, JSONBOID, -1, InvalidOid, 0),
						 rtindex, KW_JUNK_OBJECT);
}

/* request_text: what EXPLAIN shows for `operation` on `table`. */
static char *
request_text(CmdType operation, KwLiveTable *table)
{
	char	   *collection = kw_live_path(table, table->namespaced ?
										  (table->namespace ? table->namespace : "{namespace}") :
										  NULL);

	switch (operation)
	{
		case CMD_INSERT:
			return psprintf("POST %s", collection);
		case CMD_UPDATE:
			return psprintf("PATCH %s/{name} (merge patch, resourceVersion precondition)",
							collection);
		default:
			return psprintf("DELETE %s/{name} (uid and resourceVersion preconditions)",
							collection);
	}
}

/*
 * plan_user: the role a plan's write is checked as (postgres_fdw's rule),
 * for resolving the table at planning; an inheritance child (16+: no
 * RTEPermissionInfo of its own) takes its base relation's.
 */
static Oid
plan_user(PlannerInfo *root, Index rti, RangeTblEntry *rte)
{
	Oid			user = InvalidOid;

#if PG_VERSION_NUM >= 160000
	if (rte->perminfoindex != 0)
		user = getRTEPermissionInfo(root->parse->rteperminfos, rte)->checkAsUser;
	else if (root->simple_rel_array_size > rti && root->simple_rel_array[rti] != NULL)
		user = root->simple_rel_array[rti]->userid;
#else
	user = rte->checkAsUser;
#endif
	return OidIsValid(user) ? user : GetUserId();
}

/*
 * check_write_access: ERRORs 42501 inside a security-restricted operation
 * (a table owner's code run on another role's behalf, as kwatch.apply()
 * refuses), or when `user`, whom the write acts as, lacks USAGE on the
 * table's server (kwatch.apply()'s rule).  At planning and at execution.
 */
static void
check_write_access(Relation rel, Oid user)
{
	ForeignServer *srv;

	if (InSecurityRestrictedOperation())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("cannot write to live table \"%s\" within a security-restricted operation",
						RelationGetRelationName(rel)),
				 errdetail("Code that runs as a table's owner on another role's behalf (a trigger the kwatch worker fires, say) may not act on a cluster.")));
	srv = GetForeignServer(GetForeignTable(RelationGetRelid(rel))->serverid);
	if (kw_server_usage(srv->serverid, user) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for foreign server %s", srv->servername),
				 errdetail("Writing to live table \"%s\" acts on the cluster as role \"%s\", which needs USAGE on its server.",
						   RelationGetRelationName(rel), GetUserNameFromId(user, false))));
}

/*
 * kwatchPlanForeignModify: checks the access (check_write_access: 42501),
 * refuses a view's WITH CHECK OPTION and ON CONFLICT (0A000: checked after
 * the row is written, too late for a cluster), checks the columns an
 * UPDATE sets (428C9 for a computed one; every writable one when a BEFORE
 * ROW trigger may change them) and returns the fdw_private above.
 * Resolves the table (kw_live_table_resolve's errors) for EXPLAIN's
 * request text.
 */
static List *
kwatchPlanForeignModify(PlannerInfo *root, ModifyTable *plan,
						Index resultRelation, int subplan_index)
{
	CmdType		operation = plan->operation;
	RangeTblEntry *rte = planner_rt_fetch(resultRelation, root);
	Relation	rel = table_open(rte->relid, NoLock);
	TupleDesc	desc = RelationGetDescr(rel);
	List	   *updated = NIL;
	bool		returning = plan->returningLists != NIL &&
		list_nth(plan->returningLists, subplan_index) != NIL;
	KwClusterConfig *cfg;
	KwLiveTable *table;

	check_write_access(rel, plan_user(root, resultRelation, rte));
	if (operation != CMD_INSERT && operation != CMD_UPDATE && operation != CMD_DELETE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("live tables take INSERT, UPDATE and DELETE only")));
	/* PostgreSQL checks these after the row is written, too late for a cluster */
	if (plan->withCheckOptionLists != NIL &&
		list_nth(plan->withCheckOptionLists, subplan_index) != NIL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot write to live table \"%s\" through a view WITH CHECK OPTION",
						RelationGetRelationName(rel)),
				 errdetail("The request would reach the cluster before the check: Kubernetes cannot take it back."),
				 errhint("Check the rows in a BEFORE ROW trigger on the foreign table instead.")));
	if (plan->onConflictAction != ONCONFLICT_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("INSERT ... ON CONFLICT is not supported on live tables"),
				 errhint("An object that exists fails the INSERT with 42710; kwatch.apply() creates or updates.")));
	if (operation == CMD_UPDATE)
	{
		Bitmapset  *cols = KW_UPDATED_COLS(root, resultRelation, rte);
		int			col = -1;

		/* a BEFORE ROW trigger may change any column: send every writable one */
		if (rel->trigdesc && rel->trigdesc->trig_update_before_row)
			for (int i = 0; i < desc->natts; i++)
				if (!TupleDescAttr(desc, i)->attisdropped &&
					writable(operation, NameStr(TupleDescAttr(desc, i)->attname)))
					cols = bms_add_member(cols, i + 1 - FirstLowInvalidHeapAttributeNumber);

		while ((col = bms_next_member(cols, col)) >= 0)
		{
			AttrNumber	attno = col + FirstLowInvalidHeapAttributeNumber;
			char	   *name;

			if (attno <= InvalidAttrNumber)
				elog(ERROR, "system-column update is not supported");
			name = NameStr(TupleDescAttr(desc, attno - 1)->attname);
			if (!writable(operation, name))
				refuse_column(operation, rel, name);
			updated = lappend(updated, makeString(pstrdup(name)));
		}
	}
	table_close(rel, NoLock);

	table = kw_live_table_resolve(rte->relid, plan_user(root, resultRelation, rte), &cfg);
	return list_make3(updated, makeBoolean(returning),
					  makeString(request_text(operation, table)));
}

/*
 * kwatchBeginForeignModify: resolves the table for the role the write is
 * checked as, and compiles RETURNING's columns.  ERRORs 42501 inside a
 * security-restricted operation (a table owner's code run on another
 * role's behalf, as kwatch.apply() refuses) or when that role lacks USAGE
 * on the server (kwatch.apply()'s rule), and kw_live_table_resolve's.
 * Refuses (55000) an extension not at the library's version first
 * (kw_check_schema_version).
 */
static void
kwatchBeginForeignModify(ModifyTableState *mtstate, ResultRelInfo *rinfo,
						 List *fdw_private, int subplan_index, int eflags)
{
	EState	   *estate = mtstate->ps.state;
	Relation	rel = rinfo->ri_RelationDesc;
	KwModifyState *st;
	Oid			user;

	kw_check_schema_version();
	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;
	user = KW_MODIFY_USER(rinfo, estate);
	check_write_access(rel, user);

	st = palloc0(sizeof(KwModifyState));
	st->operation = mtstate->operation;
	st->table = kw_live_table_resolve(RelationGetRelid(rel), user, &st->cfg);
	st->resource.api_group = st->table->api_group;
	st->resource.api_version = st->table->api_version;
	st->resource.plural = st->table->plural;
	st->resource.kind = st->table->kind;
	st->resource.namespaced = st->table->namespaced;
	st->updated = (List *) list_nth(fdw_private, ModPrivUpdated);
	st->returning = boolVal(list_nth(fdw_private, ModPrivReturning));
	if (st->operation != CMD_INSERT)
	{
		Plan	   *subplan = outerPlanState(mtstate)->plan;

		st->junk_object = ExecFindJunkAttributeInTlist(subplan->targetlist, KW_JUNK_OBJECT);
		if (!AttributeNumberIsValid(st->junk_object))
			elog(ERROR, "could not find junk column %s", KW_JUNK_OBJECT);
	}
	if (st->returning)
	{
		TupleDesc	desc = RelationGetDescr(rel);
		List	   *all = NIL;

		for (int i = 1; i <= desc->natts; i++)
			if (!TupleDescAttr(desc, i - 1)->attisdropped)
				all = lappend_int(all, i);
		st->row = kw_live_row_begin(st->table, rel, all, estate);
	}
	st->temp_cxt = AllocSetContextCreate(estate->es_query_cxt, "kwatch live write",
										 ALLOCSET_SMALL_SIZES);
	rinfo->ri_FdwState = st;
}

/* json_text: a datum of type `type` (jsonb, json or text) as JSON text. */
static char *
json_text(Datum value, Oid type)
{
	if (type == JSONBOID)
		return JsonbToCString(NULL, &DatumGetJsonbP(value)->root, VARSIZE_ANY(DatumGetPointer(value)));
	if (type == JSONOID || type == TEXTOID)
		return TextDatumGetCString(value);
	ereport(ERROR,
			(errcode(ERRCODE_DATATYPE_MISMATCH),
			 errmsg("a live table's object, labels and annotations are written as jsonb, not %s",
					format_type_be(type))));
}

/*
 * parse_object: JSON text `text` as a json-c object (a new reference),
 * ERRORing 22023 naming `what` unless it is a JSON object.
 */
static json_object *
parse_object(const char *text, const char *what)
{
	json_tokener *tok = json_tokener_new_ex(KW_JSON_MAX_DEPTH);
	size_t		len = strlen(text);
	json_object *o;
	enum json_tokener_error err;

	if (tok == NULL)
		elog(ERROR, "out of memory");
	o = json_tokener_parse_ex(tok, text, len);
	err = json_tokener_get_error(tok);
	if (err == json_tokener_success && json_tokener_get_parse_end(tok) < len &&
		text[json_tokener_get_parse_end(tok) + strspn(text + json_tokener_get_parse_end(tok), " \t\r\n")] != '\0')
		err = json_tokener_error_parse_unexpected;
	json_tokener_free(tok);
	if (err != json_tokener_success)
	{
		if (o)
			json_object_put(o);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("%s is not valid JSON: %s", what, json_tokener_error_desc(err))));
	}
	if (o == NULL || !json_object_is_type(o, json_type_object))
	{
		if (o)
			json_object_put(o);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a JSON object", what)));
	}
	return o;
}

/* metadata_of: obj.metadata, made an empty object when absent. */
static json_object *
metadata_of(json_object *obj)
{
	json_object *m;

	if (!json_object_object_get_ex(obj, "metadata", &m) ||
		!json_object_is_type(m, json_type_object))
	{
		m = json_object_new_object();
		json_object_object_add(obj, "metadata", m);
	}
	return m;
}

/* set_map: metadata.<key> = the JSON object of column `value` (NULL: removed). */
static void
set_map(json_object *obj, const char *key, Datum value, bool isnull, Oid type)
{
	json_object *m = metadata_of(obj);

	if (isnull)
		json_object_object_del(m, key);
	else
		json_object_object_add(m, key, parse_object(json_text(value, type), key));
}

/*
 * same_as_read: whether the value of column `key` (labels, annotations)
 * equals what the row showed as read from `from`: its metadata.<key>, or
 * {} without one (the columns' definition).  Such a column is left out of
 * the patch, so that an object changed through `object` keeps its change
 * when the column is set to itself (or sent because a BEFORE ROW trigger
 * might have changed it).
 */
static bool
same_as_read(json_object *from, const char *key, Datum value, bool isnull, Oid type)
{
	json_object *m;
	json_object *was = NULL;
	json_object *now;
	bool		same;

	if (isnull)
		return false;
	if (json_object_object_get_ex(from, "metadata", &m))
		json_object_object_get_ex(m, key, &was);
	now = parse_object(json_text(value, type), key);
	if (was == NULL)
		same = json_object_object_length(now) == 0;
	else
		same = json_object_equal(was, now);
	json_object_put(now);
	return same;
}

/*
 * merge_diff: the JSON merge patch (RFC 7396) that turns `from` into `to`
 * (NULL is JSON null): objects compared key by key (a removed key becomes
 * null), anything else replaced whole when it differs.  Returns false when
 * they are equal; else true with *patch a new reference (or NULL for null).
 */
static bool
merge_diff(json_object *from, json_object *to, json_object **patch)
{
	check_stack_depth();
	*patch = NULL;
	if (from && to && json_object_is_type(from, json_type_object) &&
		json_object_is_type(to, json_type_object))
	{
		json_object *d = json_object_new_object();
		bool		any = false;

		json_object_object_foreach(to, key, val)
		{
			json_object *was;
			json_object *sub;

			if (json_object_object_get_ex(from, key, &was))
			{
				if (merge_diff(was, val, &sub))
				{
					json_object_object_add(d, key, sub);
					any = true;
				}
			}
			else
			{
				json_object_object_add(d, key, json_object_get(val));
				any = true;
			}
		}
		{
			json_object_object_foreach(from, gone, unused)
			{
				(void) unused;
				if (!json_object_object_get_ex(to, gone, NULL))
				{
					json_object_object_add(d, gone, NULL);
					any = true;
				}
			}
		}
		if (!any)
		{
			json_object_put(d);
			return false;
		}
		*patch = d;
		return true;
	}
	if (json_object_equal(from, to))
		return false;
	*patch = json_object_get(to);
	return true;
}

/* string_at: obj.<key> (or obj.metadata.<key> when `meta`) as a string, NULL if absent */
static const char *
string_at(json_object *obj, bool meta, const char *key)
{
	json_object *m = obj;

	if (meta && !json_object_object_get_ex(obj, "metadata", &m))
		return NULL;
	return kw_json_get_string(m, key);
}

/* same_string: both NULL, or equal */
static bool
same_string(const char *a, const char *b)
{
	return (a == NULL && b == NULL) || (a && b && strcmp(a, b) == 0);
}

/*
 * send_write: sends `method` of `path` (?fieldManager=kwatch added for a
 * POST or PATCH) with `body` of `content_type`; fills *resp.  ERRORs as
 * kw_http_request (transport, credentials).
 */
static void
send_write(KwModifyState *st, const char *method, const char *path,
		   const char *content_type, const char *body, KwHttpResponse *resp)
{
	StringInfoData url;

	initStringInfo(&url);
	appendStringInfoString(&url, path);
	if (strcmp(method, "DELETE") != 0)
		kw_url_append_param(&url, "fieldManager", KW_LIVE_FIELD_MANAGER);
	kw_http_request(st->cfg, method, url.data, NULL, content_type, body, resp);
}

/*
 * returning_row: for RETURNING, the row of the object `json` (the server's
 * answer) in `slot`; the slot unchanged without RETURNING.
 */
static TupleTableSlot *
returning_row(KwModifyState *st, char *json, int len, TupleTableSlot *slot)
{
	if (st->returning)
		kw_live_row_store(st->row, json, len, slot);
	return slot;
}

/*
 * check_not_redacted: ERRORs 22023 when a write of a Secret would send a
 * redacted value (see the file header), through a redacting table or not
 * (a value copied from a mirror table or another live table).
 */
static void
check_not_redacted(KwModifyState *st, json_object *sent)
{
	if (kw_is_secret_resource(st->table->api_group, st->table->plural) &&
		kw_redacted_value_in(sent))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a redacted value cannot be written to a Secret"),
				 errdetail("Live table rows of Secrets show \"%s...>\" in place of each value; that text is not the value.",
						   KW_REDACTED_PREFIX),
				 errhint("Write the real value, or use a table with the option secret_data.")));
}

/*
 * build_insert: the object to create from the row in `slot`, as JSON text;
 * *ns its namespace (NULL for a cluster-scoped resource).  ERRORs 428C9 for
 * a computed column that is set, 22023 for a missing or malformed object,
 * name, namespace, apiVersion or kind, or a redacted value.
 */
static char *
build_insert(KwModifyState *st, Relation rel, TupleTableSlot *slot, char **ns)
{
	TupleDesc	desc = RelationGetDescr(rel);
	json_object *volatile obj = NULL;
	char	   *out = NULL;

	slot_getallattrs(slot);
	PG_TRY();
	{
		json_object *m;
		const char *name = NULL;
		const char *namespace = NULL;
		const char *api_version;
		const char *kind;
		char	   *want_version = kw_api_version_string(st->table->api_group,
														 st->table->api_version);

		for (int i = 0; i < desc->natts; i++)
		{
			Form_pg_attribute a = TupleDescAttr(desc, i);

			if (!a->attisdropped && !slot->tts_isnull[i] &&
				!writable(CMD_INSERT, NameStr(a->attname)))
				refuse_column(CMD_INSERT, rel, NameStr(a->attname));
		}
		for (int i = 0; i < desc->natts; i++)
		{
			Form_pg_attribute a = TupleDescAttr(desc, i);

			if (!a->attisdropped && strcmp(NameStr(a->attname), "object") == 0 &&
				!slot->tts_isnull[i])
				obj = parse_object(json_text(slot->tts_values[i], a->atttypid), "object");
		}
		if (obj == NULL)
			obj = json_object_new_object();
		for (int i = 0; i < desc->natts; i++)
		{
			Form_pg_attribute a = TupleDescAttr(desc, i);
			const char *col = NameStr(a->attname);

			if (a->attisdropped || slot->tts_isnull[i])
				continue;
			if (strcmp(col, "labels") == 0 || strcmp(col, "annotations") == 0)
				set_map(obj, col, slot->tts_values[i], false, a->atttypid);
			else if (strcmp(col, "name") == 0 || strcmp(col, "namespace") == 0)
			{
				Oid			out;
				bool		varlena;

				getTypeOutputInfo(a->atttypid, &out, &varlena);
				json_object_object_add(metadata_of(obj), col,
									   json_object_new_string(OidOutputFunctionCall(out, slot->tts_values[i])));
			}
		}
		m = metadata_of(obj);
		api_version = kw_json_get_string(obj, "apiVersion");
		kind = kw_json_get_string(obj, "kind");
		if (api_version == NULL)
			json_object_object_add(obj, "apiVersion", json_object_new_string(want_version));
		else if (strcmp(api_version, want_version) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("object of apiVersion \"%s\" cannot be inserted into live table \"%s\" of %s",
							kw_excerpt(api_version), RelationGetRelationName(rel), want_version)));
		if (kind == NULL && st->table->kind)
			json_object_object_add(obj, "kind", json_object_new_string(st->table->kind));
		else if (kind && st->table->kind && strcmp(kind, st->table->kind) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("object of kind \"%s\" cannot be inserted into live table \"%s\" of %s",
							kw_excerpt(kind), RelationGetRelationName(rel), st->table->kind)));
		name = kw_json_get_string(m, "name");
		if (name == NULL && kw_json_get_string(m, "generateName") == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("object to insert into live table \"%s\" has no name",
							RelationGetRelationName(rel)),
					 errhint("Set the column name, or metadata.name or metadata.generateName of the object.")));
		namespace = kw_json_get_string(m, "namespace");
		*ns = NULL;
		if (st->table->namespaced)
		{
			if (namespace == NULL && st->table->namespace)
			{
				namespace = st->table->namespace;
				json_object_object_add(m, "namespace", json_object_new_string(namespace));
			}
			if (namespace == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("object to insert into live table \"%s\" has no namespace",
								RelationGetRelationName(rel)),
						 errhint("Set the column namespace, or metadata.namespace of the object.")));
			if (!kw_dns_label(namespace))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid namespace name \"%s\"", kw_excerpt(namespace)),
						 errhint("Namespace names are DNS labels: lower-case letters, digits and \"-\".")));
			if (st->table->namespace && strcmp(namespace, st->table->namespace) != 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("live table \"%s\" holds namespace \"%s\" only, not \"%s\"",
								RelationGetRelationName(rel), st->table->namespace,
								kw_excerpt(namespace))));
			*ns = pstrdup(namespace);
		}
		check_not_redacted(st, obj);
		out = pstrdup(json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN));
	}
	PG_FINALLY();
	{
		if (obj)
			json_object_put(obj);
	}
	PG_END_TRY();
	return out;
}

/*
 * kwatchExecForeignInsert: creates the row's object (POST); RETURNING gets
 * the object as stored.  ERRORs: build_insert's; the server's refusal as
 * kw_write_raise (42710 exists, 22023 invalid, 42501 forbidden, ...).
 */
static TupleTableSlot *
kwatchExecForeignInsert(EState *estate, ResultRelInfo *rinfo,
						TupleTableSlot *slot, TupleTableSlot *planSlot)
{
	KwModifyState *st = modify_state(rinfo);
	MemoryContext old;
	KwHttpResponse resp;
	char	   *ns;
	char	   *body;

	MemoryContextReset(st->temp_cxt);
	old = MemoryContextSwitchTo(st->temp_cxt);
	body = build_insert(st, rinfo->ri_RelationDesc, slot, &ns);
	send_write(st, "POST", kw_live_path(st->table, ns), "application/json", body, &resp);
	if (resp.status < 200 || resp.status > 299)
		kw_write_raise(st->cfg, psprintf("the INSERT into live table \"%s\"",
										 RelationGetRelationName(rinfo->ri_RelationDesc)),
					   &resp, kw_is_secret_resource(st->table->api_group, st->table->plural));
	MemoryContextSwitchTo(old);
	return returning_row(st, resp.body.data, resp.body.len, slot);
}

/*
 * old_object: the row's object as read (the junk column), as JSON text.
 */
static char *
old_object(KwModifyState *st, TupleTableSlot *planSlot)
{
	bool		isnull;
	Datum		d = ExecGetJunkAttribute(planSlot, st->junk_object, &isnull);

	if (isnull)
		elog(ERROR, "the row to write has no object");
	return json_text(d, JSONBOID);
}

/* what: "the UPDATE of pods shop/web-1" for messages */
static char *
what_of(const char *verb, KwModifyState *st, const char *ns, const char *name)
{
	return psprintf("the %s of %s %s%s%s", verb, st->table->plural,
					ns ? kw_excerpt(ns) : "", ns ? "/" : "", kw_excerpt(name));
}

/*
 * build_patch: the merge patch of the UPDATE of the row whose object was
 * `old_text` into the values of `slot`, as JSON text, or NULL when it
 * changes nothing; *ns and *name the object's.  ERRORs 22023 for a change
 * of apiVersion, kind, name, namespace or uid, a new object or map that is
 * not a JSON object, or a redacted value.
 */
static char *
build_patch(KwModifyState *st, Relation rel, const char *old_text,
			TupleTableSlot *slot, char **ns, char **name)
{
	TupleDesc	desc = RelationGetDescr(rel);
	json_object *volatile from = NULL;
	json_object *volatile to = NULL;
	json_object *volatile patch = NULL;
	char	   *out = NULL;

	slot_getallattrs(slot);
	PG_TRY();
	{
		ListCell   *lc;
		json_object *p;
		const char *rv;
		static const char *const fixed[][2] = {
			{"", "apiVersion"}, {"", "kind"}, {"m", "name"}, {"m", "namespace"}, {"m", "uid"}
		};

		from = parse_object(old_text, "the row's object");
		{
			json_object *copy = NULL;

			if (json_object_deep_copy(from, &copy, NULL) != 0)
				elog(ERROR, "could not copy a JSON object");
			to = copy;
		}
		/* the object first, then labels and annotations over its metadata */
		for (int pass = 0; pass < 2; pass++)
			foreach(lc, st->updated)
			{
				const char *col = strVal(lfirst(lc));
				int			i;

				if ((strcmp(col, "object") == 0) != (pass == 0))
					continue;
				for (i = 0; i < desc->natts; i++)
					if (!TupleDescAttr(desc, i)->attisdropped &&
						strcmp(NameStr(TupleDescAttr(desc, i)->attname), col) == 0)
						break;
				if (i >= desc->natts)
					elog(ERROR, "column \"%s\" of the UPDATE not found", col);
				if (pass == 0)
				{
					json_object *replaced;

					if (slot->tts_isnull[i])
						ereport(ERROR,
								(errcode(ERRCODE_NOT_NULL_VIOLATION),
								 errmsg("object of a live table row cannot be NULL"),
								 errhint("DELETE the row to delete the object.")));
					replaced = parse_object(json_text(slot->tts_values[i],
													  TupleDescAttr(desc, i)->atttypid),
											"object");
					json_object_put(to);
					to = replaced;
				}
				else if (!same_as_read(from, col, slot->tts_values[i], slot->tts_isnull[i],
									   TupleDescAttr(desc, i)->atttypid))
					set_map(to, col, slot->tts_values[i], slot->tts_isnull[i],
							TupleDescAttr(desc, i)->atttypid);
			}

		for (int f = 0; f < lengthof(fixed); f++)
		{
			bool		meta = fixed[f][0][0] == 'm';
			const char *was = string_at(from, meta, fixed[f][1]);

			if (!same_string(was, string_at(to, meta, fixed[f][1])))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("UPDATE of a live table cannot change %s%s of an object",
								meta ? "metadata." : "", fixed[f][1]),
						 errhint("INSERT the new object and DELETE the old one.")));
		}
		*ns = string_at(from, true, "namespace") ? pstrdup(string_at(from, true, "namespace")) : NULL;
		*name = pstrdup(string_at(from, true, "name") ? string_at(from, true, "name") : "");
		rv = string_at(from, true, "resourceVersion");
		if (rv == NULL)
			elog(ERROR, "the row's object has no resourceVersion");
		rv = pstrdup(rv);

		/* the row's resourceVersion is the precondition, whatever the new object says */
		json_object_object_del(metadata_of(to), "resourceVersion");
		json_object_object_del(metadata_of(from), "resourceVersion");
		if (merge_diff(from, to, &p))
		{
			patch = p;
			if (patch == NULL || !json_object_is_type(patch, json_type_object))
				elog(ERROR, "the merge patch of an object is not an object");
			check_not_redacted(st, patch);
			json_object_object_add(metadata_of(patch), "resourceVersion",
								   json_object_new_string(rv));
			out = pstrdup(json_object_to_json_string_ext(patch, JSON_C_TO_STRING_PLAIN));
		}
	}
	PG_FINALLY();
	{
		if (to)
			json_object_put(to);
		if (from)
			json_object_put(from);
		if (patch)
			json_object_put(patch);
	}
	PG_END_TRY();
	return out;
}

/*
 * kwatchExecForeignUpdate: sends the merge patch of the row's changes with
 * its resourceVersion as precondition; RETURNING gets the object as stored.
 * ERRORs: build_patch's; 40001 when the object changed or was deleted since
 * the row was read; the server's other refusals as kw_write_raise.
 */
static TupleTableSlot *
kwatchExecForeignUpdate(EState *estate, ResultRelInfo *rinfo,
						TupleTableSlot *slot, TupleTableSlot *planSlot)
{
	KwModifyState *st = modify_state(rinfo);
	MemoryContext old;
	KwHttpResponse resp;
	char	   *ns;
	char	   *name;
	char	   *patch;

	MemoryContextReset(st->temp_cxt);
	old = MemoryContextSwitchTo(st->temp_cxt);
	patch = build_patch(st, rinfo->ri_RelationDesc, old_object(st, planSlot), slot, &ns, &name);
	if (patch == NULL)
	{
		/* nothing changed: nothing to send; the row stays as it is */
		MemoryContextSwitchTo(old);
		return slot;
	}
	send_write(st, "PATCH", kw_write_path(&st->resource, ns, name),
			   "application/merge-patch+json", patch, &resp);
	if (resp.status == 404)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("Kubernetes API server of \"%s\" refused %s: the object was deleted since the row was read",
						st->cfg->server_name, what_of("UPDATE", st, ns, name)),
				 errhint("Read the row again.")));
	if (resp.status < 200 || resp.status > 299)
		kw_write_raise(st->cfg, what_of("UPDATE", st, ns, name), &resp,
					   kw_is_secret_resource(st->table->api_group, st->table->plural));
	MemoryContextSwitchTo(old);
	return returning_row(st, resp.body.data, resp.body.len, slot);
}

/*
 * kwatchExecForeignDelete: deletes the row's object with its uid and
 * resourceVersion as preconditions.  Returns NULL (no row deleted) when the
 * object is already gone; RETURNING gets the object the server answered
 * with, or the row as read when it answered with a Status.  ERRORs 40001
 * when the object changed or was recreated since the row was read; the
 * server's other refusals as kw_write_raise.
 */
static TupleTableSlot *
kwatchExecForeignDelete(EState *estate, ResultRelInfo *rinfo,
						TupleTableSlot *slot, TupleTableSlot *planSlot)
{
	KwModifyState *st = modify_state(rinfo);
	MemoryContext old;
	KwHttpResponse resp;
	char	   *was;
	json_object *from;
	char	   *ns;
	char	   *name;
	char	   *options;
	bool		answered_object;

	MemoryContextReset(st->temp_cxt);
	old = MemoryContextSwitchTo(st->temp_cxt);
	was = old_object(st, planSlot);
	from = parse_object(was, "the row's object");
	{
		json_object *opts = json_object_new_object();
		json_object *pre = json_object_new_object();
		const char *uid = string_at(from, true, "uid");
		const char *rv = string_at(from, true, "resourceVersion");

		ns = string_at(from, true, "namespace") ? pstrdup(string_at(from, true, "namespace")) : NULL;
		name = pstrdup(string_at(from, true, "name") ? string_at(from, true, "name") : "");
		json_object_object_add(opts, "apiVersion", json_object_new_string("v1"));
		json_object_object_add(opts, "kind", json_object_new_string("DeleteOptions"));
		if (uid)
			json_object_object_add(pre, "uid", json_object_new_string(uid));
		if (rv)
			json_object_object_add(pre, "resourceVersion", json_object_new_string(rv));
		json_object_object_add(opts, "preconditions", pre);
		options = pstrdup(json_object_to_json_string_ext(opts, JSON_C_TO_STRING_PLAIN));
		json_object_put(opts);
		json_object_put(from);
	}
	kw_write_delete(st->cfg, kw_write_path(&st->resource, ns, name), options, &resp);
	if (resp.status == 404)
	{
		MemoryContextSwitchTo(old);
		return NULL;
	}
	if (resp.status < 200 || resp.status > 299)
		kw_write_raise(st->cfg, what_of("DELETE", st, ns, name), &resp,
					   kw_is_secret_resource(st->table->api_group, st->table->plural));
	MemoryContextSwitchTo(old);
	if (!st->returning)
		return slot;

	/* the object as the server left it (finalizers, grace), else the row as read */
	{
		json_tokener *tok = json_tokener_new_ex(KW_JSON_MAX_DEPTH);
		json_object *answer = tok ? json_tokener_parse_ex(tok, resp.body.data, resp.body.len) : NULL;
		const char *kind = answer ? kw_json_get_string(answer, "kind") : NULL;

		answered_object = kind && strcmp(kind, "Status") != 0;
		if (tok)
			json_tokener_free(tok);
		if (answer)
			json_object_put(answer);
	}
	if (answered_object)
		return returning_row(st, resp.body.data, resp.body.len, slot);
	{
		/* already redacted when the table redacts: store it as it is */
		bool		redact = st->table->redact;

		st->table->redact = false;
		kw_live_row_store(st->row, was, strlen(was), slot);
		st->table->redact = redact;
	}
	return slot;
}

/*
 * kwatchBeginForeignInsert: COPY FROM into a live table, and rows routed to
 * a live table that is a partition, are refused (0A000): one request per
 * row of a bulk load, with no statement-level checks, is not what either
 * means.
 */
static void
kwatchBeginForeignInsert(ModifyTableState *mtstate, ResultRelInfo *rinfo)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("cannot COPY into live table \"%s\" or route rows to it as a partition",
					RelationGetRelationName(rinfo->ri_RelationDesc)),
			 errhint("INSERT INTO the live table itself.")));
}

/* kwatchEndForeignInsert: nothing to end (BeginForeignInsert refuses). */
static void
kwatchEndForeignInsert(EState *estate, ResultRelInfo *rinfo)
{
}

/* kwatchEndForeignModify: nothing is held between rows. */
static void
kwatchEndForeignModify(EState *estate, ResultRelInfo *rinfo)
{
}

/*
 * kwatchIsForeignRelUpdatable: INSERT, UPDATE and DELETE unless the table's
 * (else the server's) option updatable is false, as postgres_fdw.
 */
static int
kwatchIsForeignRelUpdatable(Relation rel)
{
	ForeignTable *ft = GetForeignTable(RelationGetRelid(rel));
	DefElem    *opt = kw_get_option(ft->options, "updatable");

	if (opt == NULL)
		opt = kw_get_option(GetForeignServer(ft->serverid)->options, "updatable");
	if (opt && !defGetBoolean(opt))
		return 0;
	return (1 << CMD_INSERT) | (1 << CMD_UPDATE) | (1 << CMD_DELETE);
}

/* kwatchExplainForeignModify: "Kubernetes Request: PATCH ..." */
static void
kwatchExplainForeignModify(ModifyTableState *mtstate, ResultRelInfo *rinfo,
						   List *fdw_private, int subplan_index, ExplainState *es)
{
	ExplainPropertyText("Kubernetes Request", strVal(list_nth(fdw_private, ModPrivRequest)), es);
}

/*
 * kw_live_modify_routine: sets the write callbacks of the kwatch wrapper's
 * FdwRoutine `routine` (foreign/fdwapi.h, "FDW Routines for Updating
 * Foreign Tables").
 */
void
kw_live_modify_routine(FdwRoutine *routine)
{
	routine->AddForeignUpdateTargets = kwatchAddForeignUpdateTargets;
	routine->PlanForeignModify = kwatchPlanForeignModify;
	routine->BeginForeignModify = kwatchBeginForeignModify;
	routine->ExecForeignInsert = kwatchExecForeignInsert;
	routine->ExecForeignUpdate = kwatchExecForeignUpdate;
	routine->ExecForeignDelete = kwatchExecForeignDelete;
	routine->EndForeignModify = kwatchEndForeignModify;
	routine->BeginForeignInsert = kwatchBeginForeignInsert;
	routine->EndForeignInsert = kwatchEndForeignInsert;
	routine->IsForeignRelUpdatable = kwatchIsForeignRelUpdatable;
	routine->ExplainForeignModify = kwatchExplainForeignModify;
}
