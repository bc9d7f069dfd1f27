/*-------------------------------------------------------------------------
 *
 * live_column.c
 *		The columns of live foreign tables, computed from each listed object
 *		by the same expressions that define the mirror tables' generated
 *		columns.
 *
 * kwatch.live_columns(api_group, plural) (sql/kwatch--0.1.0.sql) turns
 * kwatch.base_columns() and kwatch.typed_columns() into (name, type,
 * expression over `object` and `cluster`) rows.  Here those expression texts
 * are parsed and planned once per backend and resource, as one query
 *
 *	 SELECT (e1)::t1, (e2)::t2, ... FROM (SELECT $1::jsonb AS object,
 *											  $2::text AS cluster) AS s
 *
 * whose planned target list holds each column as an expression tree over
 * PARAM_EXTERN 1 and 2 (the planner pulls the sub-select up).  The foreign
 * scan compiles the trees with ExecInitExpr and evaluates them per object
 * with the object and the server name as parameter values, so a foreign
 * table's column has exactly the value the mirror table's generated column
 * would have, and there is one definition of each column.
 *
 * The texts are parsed with search_path = pg_catalog, as a SECURITY DEFINER
 * function with SET search_path would, so a user's schema cannot capture an
 * operator.  The cache is dropped on any pg_proc change (the extension
 * re-created, a function replaced).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "nodes/nodeFuncs.h"
#include "nodes/plannodes.h"
#include "parser/analyze.h"
#include "parser/parse_coerce.h"
#include "parser/parse_type.h"
#include "tcop/tcopprot.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "kw_common.h"
#include "kw_decode.h"
#include "kw_fdw.h"

/* Backend cache: KwLiveColumns * of resources used so far. */
static MemoryContext live_column_cxt = NULL;
static List *live_column_cache = NIL;
static bool callback_registered = false;

/* Any pg_proc change may invalidate the planned expressions: forget them. */
static void
live_column_invalidate(Datum arg, int cacheid, uint32 hashvalue)
{
	if (live_column_cxt)
		MemoryContextReset(live_column_cxt);
	live_column_cache = NIL;
}

/*
 * load_columns: runs kwatch.live_columns() and plans the expressions;
 * returns a KwLiveColumns palloc'd in `cxt`.  ERRORs (internal_error) when
 * the definitions cannot be parsed, which is a bug in the extension script.
 */
static KwLiveColumns *
load_columns(const char *api_group, const char *plural, MemoryContext cxt)
{
	Oid			argtypes[2] = {TEXTOID, TEXTOID};
	Datum		args[2];
	StringInfoData q;
	List	   *names = NIL;
	List	   *types = NIL;
	KwLiveColumns *cols;
	List	   *raw;
	Query	   *query;
	PlannedStmt *plan;
	Oid			paramtypes[2] = {JSONBOID, TEXTOID};
	int			nestlevel;
	int			i;
	MemoryContext caller = CurrentMemoryContext;
	ListCell   *lc;

	args[0] = CStringGetTextDatum(api_group);
	args[1] = CStringGetTextDatum(plural);

	initStringInfo(&q);
	appendStringInfoString(&q, "SELECT ");

	nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);

	SPI_connect();
	if (SPI_execute_with_args("SELECT column_name, column_type, expression "
							  "FROM kwatch.live_columns($1, $2)",
							  2, argtypes, args, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "kwatch.live_columns() failed");
	MemoryContextSwitchTo(caller);	/* results outlive SPI_finish */
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		char	   *name = SPI_getvalue(tup, desc, 1);
		char	   *type = SPI_getvalue(tup, desc, 2);
		char	   *expr = SPI_getvalue(tup, desc, 3);

		if (name == NULL || type == NULL || expr == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("kwatch.live_columns(%s, %s) returned an incomplete column definition",
							quote_literal_cstr(api_group), quote_literal_cstr(plural))));
		if (r > 0)
			appendStringInfoString(&q, ", ");
		appendStringInfo(&q, "(%s)::%s", expr, type);
		names = lappend(names, pstrdup(name));
		types = lappend(types, pstrdup(type));
	}
	appendStringInfoString(&q, " FROM (SELECT $1::pg_catalog.jsonb AS object, "
						   "$2::pg_catalog.text AS cluster) AS s");
	SPI_finish();

	raw = pg_parse_query(q.data);
	query = parse_analyze_fixedparams(linitial_node(RawStmt, raw), q.data,
									  paramtypes, 2, NULL);
	plan = pg_plan_query(query, q.data, 0, NULL);
	AtEOXact_GUC(true, nestlevel);

	if (!IsA(plan->planTree, Result) || plan->planTree->lefttree != NULL ||
		list_length(plan->planTree->targetlist) != list_length(names))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("unexpected plan for the column expressions of %s", plural),
				 errdetail("Plan node %d, %d columns for %d definitions.",
						   (int) nodeTag(plan->planTree),
						   list_length(plan->planTree->targetlist),
						   list_length(names))));

	cols = MemoryContextAllocZero(cxt, sizeof(KwLiveColumns));
	cols->api_group = MemoryContextStrdup(cxt, api_group);
	cols->plural = MemoryContextStrdup(cxt, plural);
	cols->ncolumns = list_length(names);
	cols->columns = MemoryContextAllocZero(cxt, sizeof(KwLiveColumn) * Max(1, cols->ncolumns));
	i = 0;
	foreach(lc, plan->planTree->targetlist)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);
		MemoryContext old = MemoryContextSwitchTo(cxt);
		KwLiveColumn *c = &cols->columns[i];

		c->name = pstrdup((char *) list_nth(names, i));
		c->expr = copyObject(tle->expr);
		c->type = exprType((Node *) c->expr);
		c->typmod = exprTypmod((Node *) c->expr);
		MemoryContextSwitchTo(old);
		i++;
	}
	return cols;
}

/*
 * copy_columns: a deep copy of `src` in the current memory context.
 */
static KwLiveColumns *
copy_columns(KwLiveColumns *src)
{
	KwLiveColumns *c = palloc(sizeof(KwLiveColumns));

	c->api_group = pstrdup(src->api_group);
	c->plural = pstrdup(src->plural);
	c->ncolumns = src->ncolumns;
	c->columns = palloc0(sizeof(KwLiveColumn) * Max(1, src->ncolumns));
	for (int i = 0; i < src->ncolumns; i++)
	{
		c->columns[i].name = pstrdup(src->columns[i].name);
		c->columns[i].type = src->columns[i].type;
		c->columns[i].typmod = src->columns[i].typmod;
		c->columns[i].expr = copyObject(src->columns[i].expr);
	}
	return c;
}

/*
 * kw_live_columns: the columns of a live table of resource (api_group,
 * plural), from the backend cache or kwatch.live_columns(), as a copy in
 * the current memory context.  A copy, because the callers look columns up
 * while doing catalog lookups, and any lock taken on a catalog may process
 * a pg_proc invalidation that resets the cache (use after free otherwise).
 * ERRORs as load_columns.
 */
KwLiveColumns *
kw_live_columns(const char *api_group, const char *plural)
{
	ListCell   *lc;
	KwLiveColumns *cols;
	MemoryContext old;

	if (!callback_registered)
	{
		CacheRegisterSyscacheCallback(PROCOID, live_column_invalidate, (Datum) 0);
		live_column_cxt = AllocSetContextCreate(CacheMemoryContext,
												"kwatch live columns",
												ALLOCSET_SMALL_SIZES);
		callback_registered = true;
	}
	foreach(lc, live_column_cache)
	{
		cols = (KwLiveColumns *) lfirst(lc);
		if (strcmp(cols->api_group, api_group) == 0 &&
			strcmp(cols->plural, plural) == 0)
			return copy_columns(cols);
	}
	cols = load_columns(api_group, plural, live_column_cxt);
	old = MemoryContextSwitchTo(live_column_cxt);
	live_column_cache = lappend(live_column_cache, cols);
	MemoryContextSwitchTo(old);
	return copy_columns(cols);
}

/*
 * kw_live_column_find: the column called `name`, or NULL.
 */
KwLiveColumn *
kw_live_column_find(KwLiveColumns *cols, const char *name)
{
	for (int i = 0; i < cols->ncolumns; i++)
		if (strcmp(cols->columns[i].name, name) == 0)
			return &cols->columns[i];
	return NULL;
}

/*
 * kw_live_row_begin: compiles, for the foreign table `rel` resolved as
 * `table`, the column expressions of the attributes `attnos` (a List of
 * int, attribute numbers; the others stay NULL), each coerced to the type
 * the table declares, in an expression context of `estate`.  Returns the
 * builder kw_live_row_store() uses (palloc'd in the current context).
 * ERRORs 42804 when a declared type has no cast from the computed one.
 */
KwLiveRow *
kw_live_row_begin(KwLiveTable *table, Relation rel, List *attnos, EState *estate)
{
	TupleDesc	desc = RelationGetDescr(rel);
	KwLiveRow  *row = palloc0(sizeof(KwLiveRow));
	ListCell   *lc;

	row->table = table;
	row->params = makeParamList(2);
	row->params->numParams = 2;
	row->params->params[0].ptype = JSONBOID;
	row->params->params[0].pflags = PARAM_FLAG_CONST;
	row->params->params[0].isnull = true;
	row->params->params[1].ptype = TEXTOID;
	row->params->params[1].pflags = PARAM_FLAG_CONST;
	row->params->params[1].value = CStringGetTextDatum(table->server);
	row->params->params[1].isnull = false;
	row->econtext = CreateExprContext(estate);
	row->econtext->ecxt_param_list_info = row->params;

	row->natts = desc->natts;
	row->exprs = palloc0(sizeof(ExprState *) * Max(1, desc->natts));
	foreach(lc, attnos)
	{
		int			attno = lfirst_int(lc);
		Form_pg_attribute a = TupleDescAttr(desc, attno - 1);
		KwLiveColumn *col = kw_live_column_find(table->columns, NameStr(a->attname));
		Node	   *expr;

		Assert(col != NULL);
		expr = (Node *) copyObject(col->expr);
		if (col->type != a->atttypid || (a->atttypmod >= 0 && col->typmod != a->atttypmod))
		{
			Node	   *coerced = coerce_to_target_type(NULL, expr, col->type,
														a->atttypid, a->atttypmod,
														COERCION_EXPLICIT,
														COERCE_EXPLICIT_CAST, -1);

			if (coerced == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("column \"%s\" of foreign table \"%s\" has type %s, but live tables compute %s",
								NameStr(a->attname), RelationGetRelationName(rel),
								format_type_be(a->atttypid), format_type_be(col->type))));
			expr = coerced;
		}
		/* own ParamListInfo: a plpgsql caller's paramCompile hook must not see $1 */
		row->exprs[attno - 1] = ExecInitExprWithParams((Expr *) expr, row->params);
	}
	return row;
}

/*
 * kw_live_row_store: stores in `slot` (cleared first) the row of the object
 * `json` (`len` bytes of JSON text, as the API server sent it; modified in
 * place: invalid UTF-8 replaced, a Secret's values redacted when the table
 * redacts), without metadata.managedFields, as scanned and mirror rows.  Values live in the builder's per-tuple memory, valid until the
 * next call.  ERRORs HV004 when a Secret to redact is not a JSON object,
 * 22P02 when the text is not JSON.
 */
void
kw_live_row_store(KwLiveRow *row, char *json, int len, TupleTableSlot *slot)
{
	MemoryContext old;

	ExecClearTuple(slot);
	ResetExprContext(row->econtext);
	old = MemoryContextSwitchTo(row->econtext->ecxt_per_tuple_memory);
	(void) kw_sanitize_json(&json, &len);
	if (row->table->redact && !kw_redact_secret_json(&json, &len))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
				 errmsg("malformed Secret in the answer of server \"%s\": not a JSON object",
						row->table->server)));
	row->params->params[0].value = DirectFunctionCall1(jsonb_in, CStringGetDatum(json));
	/*
	 * an answer to a write (RETURNING) has metadata.managedFields, which a
	 * scanned row (decode.c) and a mirror row never have: left out too
	 */
	if (strstr(json, "\"managedFields\"") != NULL)
	{
		Datum		path[2] = {CStringGetTextDatum("metadata"), CStringGetTextDatum("managedFields")};

		row->params->params[0].value =
			DirectFunctionCall2(jsonb_delete_path, row->params->params[0].value,
								PointerGetDatum(construct_array(path, 2, TEXTOID, -1, false, TYPALIGN_INT)));
	}
	row->params->params[0].isnull = false;
	for (int i = 0; i < row->natts; i++)
	{
		if (row->exprs[i])
			slot->tts_values[i] = ExecEvalExpr(row->exprs[i], row->econtext,
											   &slot->tts_isnull[i]);
		else
		{
			slot->tts_values[i] = (Datum) 0;
			slot->tts_isnull[i] = true;
		}
	}
	MemoryContextSwitchTo(old);
	ExecStoreVirtualTuple(slot);
}
