/*-------------------------------------------------------------------------
 *
 * apply_manifest.c
 *		kwatch.apply(manifest text, ...): a manifest as `kubectl apply -f`
 *		takes it (YAML with several documents, or JSON), each object
 *		applied in order by kwatch.apply(manifest jsonb, ...), and
 *		kwatch.manifest_objects(text): the objects it would apply.
 *
 * The text becomes objects in decode/yaml_manifest.c (kubectl's YAML 1.1
 * rules).  Each object goes through the jsonb function itself, called
 * through fmgr as SQL would call it (its checks, dry run, queue), with an
 * error context naming the document: at 'commit' every object is queued in
 * the caller's transaction, so an error leaves none; at 'now' the objects
 * before the failing one stay applied, as with `kubectl apply -f`.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "parser/parse_func.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/tuplestore.h"

#include "kw_common.h"
#include "kw_http.h"
#include "kw_yaml.h"
#include "kw_functions.h"

PG_FUNCTION_INFO_V1(kwatch_apply_text);
PG_FUNCTION_INFO_V1(kwatch_manifest_objects);

/* What the error context of one object says. */
typedef struct ObjectContext
{
	KwManifestObject *object;
	int			count;
} ObjectContext;

/* a string member of an object (kind, metadata.name), or NULL */
static char *
member(Jsonb *j, const char *outer, const char *key)
{
	JsonbContainer *c = &j->root;
	JsonbValue *v;

	if (outer)
	{
		v = getKeyJsonValueFromContainer(c, outer, strlen(outer), NULL);
		if (v == NULL || v->type != jbvBinary || !JsonContainerIsObject(v->val.binary.data))
			return NULL;
		c = v->val.binary.data;
	}
	v = getKeyJsonValueFromContainer(c, key, strlen(key), NULL);
	if (v == NULL || v->type != jbvString)
		return NULL;
	return kw_excerpt(pnstrdup(v->val.string.val, v->val.string.len));
}

/* "YAML document 2 (line 12), Deployment "web"" */
static void
object_context(void *arg)
{
	ObjectContext *oc = arg;
	KwManifestObject *o = oc->object;
	char	   *kind = member(o->object, NULL, "kind");
	char	   *name = member(o->object, "metadata", "name");
	char	   *what = psprintf("%s %s%s%s", kind ? kind : "(no kind)",
								name ? "\"" : "(no name)", name ? name : "", name ? "\"" : "");

	if (o->item > 0)
		errcontext("item %d of the List in YAML document %d (line %d) of the manifest: %s",
				   o->item, o->document, o->line, what);
	else
		errcontext("YAML document %d (line %d) of the manifest: %s",
				   o->document, o->line, what);
}

/* kwatch.apply(manifest jsonb, ...) in the schema of the called function */
static Oid
jsonb_apply_oid(FunctionCallInfo fcinfo)
{
	Oid			types[7] = {JSONBOID, TEXTOID, TEXTOID, BOOLOID, BOOLOID, TEXTOID, INTERVALOID};
	char	   *schema = get_namespace_name(get_func_namespace(fcinfo->flinfo->fn_oid));
	List	   *name = list_make2(makeString(schema), makeString("apply"));

	return LookupFuncName(name, 7, types, false);
}

/*
 * kwatch_apply_text: SQL kwatch.apply(manifest text, server text,
 * field_manager text, force boolean, dry_run boolean, at text, deadline
 * interval) -> SETOF kwatch.apply_result, one row per object of the
 * manifest in its order (kw_manifest_objects), each the result of
 * kwatch.apply(manifest jsonb, ...) with the same other arguments.
 * ERRORs: those of kw_manifest_objects (22P02 syntax, with its line and
 * column; 22023 a document that is not an object; 54000), 22023 a
 * manifest of no object, 42501 without EXECUTE on the jsonb form, and
 * each object's, with a CONTEXT line naming
 * its document, line, kind and name.  Rules: `kubectl apply -f`
 * (kubectl/pkg/cmd/apply, the resource builder's document stream and
 * List flattening).
 * Refuses (55000) an extension not at the library's version first
 * (kw_check_schema_version).
 */
Datum
kwatch_apply_text(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	text	   *manifest;
	List	   *objects;
	FmgrInfo	flinfo;
	Oid			jsonb_apply;
	ListCell   *lc;
	int			i = 0;

	kw_check_schema_version();
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the manifest of kwatch.apply() must not be NULL")));
	manifest = PG_GETARG_TEXT_PP(0);
	objects = kw_manifest_objects(VARDATA_ANY(manifest), VARSIZE_ANY_EXHDR(manifest));
	if (objects == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the manifest holds no object"),
				 errdetail("Its YAML documents are all empty.")));

	/* as if the caller called it: its EXECUTE privilege too (a REVOKE on it holds here) */
	jsonb_apply = jsonb_apply_oid(fcinfo);
	if (KW_FUNCTION_EXECUTE(jsonb_apply, GetUserId()) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_FUNCTION, get_func_name(jsonb_apply));
	InitMaterializedSRF(fcinfo, 0);
	fmgr_info(jsonb_apply, &flinfo);
	foreach(lc, objects)
	{
		LOCAL_FCINFO(call, 7);
		ObjectContext oc;
		ErrorContextCallback cb;
		Datum		row;
		HeapTupleHeader th;
		HeapTupleData tuple;

		oc.object = lfirst(lc);
		oc.count = ++i;
		cb.callback = object_context;
		cb.arg = &oc;
		cb.previous = error_context_stack;
		error_context_stack = &cb;

		InitFunctionCallInfoData(*call, &flinfo, 7, PG_GET_COLLATION(), NULL, NULL);
		call->args[0].value = JsonbPGetDatum(oc.object->object);
		call->args[0].isnull = false;
		for (int a = 1; a < 7; a++)
			call->args[a] = fcinfo->args[a];
		row = FunctionCallInvoke(call);
		if (call->isnull)
			elog(ERROR, "kwatch.apply(jsonb) returned NULL");

		th = DatumGetHeapTupleHeader(row);
		tuple.t_len = HeapTupleHeaderGetDatumLength(th);
		ItemPointerSetInvalid(&tuple.t_self);
		tuple.t_tableOid = InvalidOid;
		tuple.t_data = th;
		tuplestore_puttuple(rsinfo->setResult, &tuple);

		error_context_stack = cb.previous;
	}
	return (Datum) 0;
}

/*
 * kwatch_manifest_objects: SQL kwatch.manifest_objects(manifest text) ->
 * SETOF jsonb: the objects kwatch.apply(manifest text) would apply, in
 * order (kw_manifest_objects: YAML as kubectl converts it, empty documents
 * skipped, Lists flattened).  ERRORs as kw_manifest_objects.
 */
Datum
kwatch_manifest_objects(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	text	   *manifest = PG_GETARG_TEXT_PP(0);
	List	   *objects;
	ListCell   *lc;

	objects = kw_manifest_objects(VARDATA_ANY(manifest), VARSIZE_ANY_EXHDR(manifest));
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	foreach(lc, objects)
	{
		KwManifestObject *o = lfirst(lc);
		Datum		value = JsonbPGetDatum(o->object);
		bool		isnull = false;

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &value, &isnull);
	}
	return (Datum) 0;
}
