/*-------------------------------------------------------------------------
 *
 * fdw.c
 *		The kwatch foreign-data wrapper's handler: live foreign tables whose
 *		scans are chunked LISTs against the API server.
 *
 * A live table is a foreign table of a kwatch server with the option
 * `resource` ("pods", "deployments.apps", a CRD's plural.group), created by
 * hand or by IMPORT FOREIGN SCHEMA k8s FROM SERVER s INTO schema, which
 * creates one for every resource discovery says can be listed, with the
 * columns of the mirror tables (live_column.c).
 *
 * Callbacks are named and shaped like contrib/postgres_fdw/postgres_fdw.c's:
 *
 *	 GetForeignRelSize	 resolve the resource, classify the WHERE clauses
 *						 (fdw_deparse.c), estimate the rows
 *	 GetForeignPaths	 one path; LIMIT pushed as the page size when safe
 *	 GetForeignPlan		 every clause stays a local filter (re-check)
 *	 Begin/Iterate/ReScan/EndForeignScan  the streaming LIST (live_scan.c)
 *	 ExplainForeignScan	 the request, e.g. "GET /api/v1/namespaces/shop/
 *						 pods?labelSelector=app=web&limit=500"
 *	 ImportForeignSchema one CREATE FOREIGN TABLE per listable resource
 *	 the write callbacks	 fdw_modify.c (INSERT, UPDATE, DELETE act on the cluster)
 *
 * Row estimates (GetForeignRelSize) aim at "right order of magnitude,
 * cheaply", as postgres_fdw's use_remote_estimate but without a full
 * remote EXPLAIN:
 *	 1. the resource is mirrored on this server without selectors and its
 *		watch is healthy: the mirror's object count (shared memory, free);
 *	 2. else, unless use_remote_estimate is off: a LIST with limit=1 on the
 *		(namespace) path without selectors, whose remainingItemCount plus
 *		its one item is the collection's size (PROTOCOL 6; the server omits
 *		the count when selectors are used, so none are sent), cached per
 *		backend for KW_ESTIMATE_TTL_S;
 *	 3. else 1000 objects, postgres_fdw's default for a table without
 *		statistics.
 * The label and field clauses then scale that by the planner's default
 * selectivities (clauselist_selectivity), and an exact metadata.name match
 * is one row.
 *
 * Parameters: a clause comparing with a generic plan's $n or an InitPlan's
 * value is pushed with a placeholder (fdw_deparse.c); the plan carries the
 * Params in fdw_exprs, and the scan binds their values into the request
 * when it starts (start_scan), so prepared statements keep their pushdown.
 *
 * LIMIT: when the query is a plain scan of this one table (no ORDER BY,
 * grouping, aggregates, DISTINCT, window functions, set operations, SRFs,
 * locking) and every WHERE clause was pushed exactly, LIMIT n (+ OFFSET)
 * becomes the first page's limit=n: the first page then holds all the rows
 * the query needs.  It is always correct, whatever the clauses: the scan
 * follows continue tokens if more rows are pulled.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "catalog/pg_foreign_table.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "foreign/fdwapi.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/planmain.h"
#include "optimizer/restrictinfo.h"
#include "parser/parse_coerce.h"
#include "parser/parsetree.h"
/* fmgrprotos.h declares a json_object() function: keep it out of json-c's way */
#define json_object pg_json_object_fn
#include "utils/builtins.h"
#undef json_object
#include "utils/formatting.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include <json-c/json.h>

#include "kw_common.h"
#include "kw_cluster.h"
#include "kw_http.h"
#include "kw_decode.h"
#include "kw_fdw.h"
#include KW_EXPLAIN_STATE_H
#include KW_EXPLAIN_FORMAT_H

/* How long a remote count is reused. */
#define KW_ESTIMATE_TTL_S 10
/* Objects assumed when nothing better is known (postgres_fdw's default). */
#define KW_DEFAULT_ROWS 1000.0
/* Costs: a request's round trip, and decoding one object. */
#define KW_STARTUP_COST 100.0
#define KW_PER_OBJECT_COST (cpu_tuple_cost * 10)

/* Planner state in baserel->fdw_private. */
typedef struct KwPlanState
{
	KwLiveTable *table;
	KwLiveRequest req;
	Bitmapset  *attrs_used;
} KwPlanState;

/* Executor state. */
typedef struct KwScanState
{
	KwLiveTable *table;
	KwClusterConfig *cfg;
	char	   *namespace;		/* template */
	List	   *label_terms;	/* templates */
	List	   *field_terms;
	List	   *param_exprs;	/* the plan's fdw_exprs */
	List	   *param_states;	/* ExprState * of those */
	int			page_size;
	bool		no_rows;		/* a parameter made every clause false */
	KwLiveTable plan_table;		/* the collection the plan was made for */
	List	   *namespaces;		/* namespace IN (...): LISTed in turn */
	int			next_namespace;
	int			pages_done;		/* by the LISTs of earlier namespaces */
	char	   *labels;			/* bound selectors, for the next namespace */
	char	   *fields;
	KwLiveRow  *row;			/* computes the retrieved columns */
	MemoryContext scan_cxt;
	KwLiveScan *scan;
} KwScanState;

/* fdw_private of the ForeignScan plan, by position. */
enum
{
	FdwPrivNamespace,			/* String: namespace or placeholder, "" = none */
	FdwPrivLabels,				/* List of String: label selector terms */
	FdwPrivFields,				/* List of String: field selector terms */
	FdwPrivLimit,
	FdwPrivRetrieved,
	FdwPrivExact,
	FdwPrivGroup,				/* the collection, as resolved at planning */
	FdwPrivVersion,
	FdwPrivPlural,
	FdwPrivNamespaced,
	FdwPrivNamespaces			/* List of String: one LIST each, or NIL */
};

/* plan_table: the parts of the collection path the plan was made for. */
static void
plan_table(List *priv, KwLiveTable *t)
{
	memset(t, 0, sizeof(*t));
	t->api_group = strVal(list_nth(priv, FdwPrivGroup));
	t->api_version = strVal(list_nth(priv, FdwPrivVersion));
	t->plural = strVal(list_nth(priv, FdwPrivPlural));
	t->namespaced = boolVal(list_nth(priv, FdwPrivNamespaced));
}

/* Cache (backend lifetime, TopMemoryContext). */
typedef struct EstimateCacheEntry
{
	Oid			serverid;
	Oid			userid;
	char	   *path;
	double		count;
	TimestampTz at;
} EstimateCacheEntry;

static List *estimate_cache = NIL;

PG_FUNCTION_INFO_V1(kwatch_fdw_handler);

/* ---------------------------------------------------------------------
 * Resolving a foreign table
 * ---------------------------------------------------------------------
 */

/* ---------------------------------------------------------------------
 * Estimates
 * ---------------------------------------------------------------------
 */

/* The object count of a healthy, unselective mirror of the resource, or -1. */
static double
mirror_count(KwLiveTable *t)
{
	Oid			types[2] = {TEXTOID, TEXTOID};
	Datum		args[2];
	double		count = -1;
	char	   *canonical = t->api_group[0] ?
		psprintf("%s.%s", t->plural, t->api_group) : t->plural;

	args[0] = CStringGetTextDatum(t->server);
	args[1] = CStringGetTextDatum(canonical);
	SPI_connect();				/* nothing allocated here outlives SPI_finish */
	if (SPI_execute_with_args("SELECT objects FROM kwatch.watches "
							  "WHERE server = $1 AND resource = $2 AND namespace IS NULL "
							  "AND label_selector IS NULL AND field_selector IS NULL "
							  "AND healthy AND objects IS NOT NULL",
							  2, types, args, NULL, true, 1) == SPI_OK_SELECT &&
		SPI_processed == 1)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		if (!isnull)
			count = (double) DatumGetInt64(d);
	}
	SPI_finish();
	return count;
}

/*
 * remote_count: the size of the collection at `path` from a limit=1 LIST
 * (remainingItemCount + items), or -1 when the server gave no count or
 * refused (the scan reports refusals properly).  Cached briefly.
 */
static double
remote_count(KwClusterConfig *cfg, Oid serverid, Oid userid, const char *path)
{
	ListCell   *lc;
	TimestampTz now = GetCurrentTimestamp();
	KwHttpResponse resp;
	StringInfoData url;
	json_object *obj;
	json_object *meta,
			   *items,
			   *rem;
	double		count = -1;
	EstimateCacheEntry *e;
	MemoryContext old;

	foreach(lc, estimate_cache)
	{
		e = (EstimateCacheEntry *) lfirst(lc);
		if (e->serverid == serverid && e->userid == userid &&
			strcmp(e->path, path) == 0)
		{
			if (!TimestampDifferenceExceeds(e->at, now, KW_ESTIMATE_TTL_S * 1000))
				return e->count;
			estimate_cache = foreach_delete_current(estimate_cache, lc);
			pfree(e->path);
			pfree(e);
		}
	}

	initStringInfo(&url);
	appendStringInfoString(&url, path);
	kw_url_append_param(&url, "limit", "1");
	kw_http_get(cfg, url.data, &resp);
	if (resp.status != 200)
		return -1;
	obj = json_tokener_parse(resp.body.data);
	if (obj && json_object_object_get_ex(obj, "metadata", &meta))
	{
		int			n = 0;
		const char *cont = kw_json_get_string(meta, "continue");

		if (json_object_object_get_ex(obj, "items", &items) &&
			json_object_is_type(items, json_type_array))
			n = json_object_array_length(items);
		if (json_object_object_get_ex(meta, "remainingItemCount", &rem))
			count = n + (double) json_object_get_int64(rem);
		else if (cont == NULL || cont[0] == '\0')
			count = n;
	}
	if (obj)
		json_object_put(obj);

	old = MemoryContextSwitchTo(TopMemoryContext);
	e = palloc0(sizeof(EstimateCacheEntry));
	e->serverid = serverid;
	e->userid = userid;
	e->path = pstrdup(path);
	e->count = count;
	e->at = now;
	estimate_cache = lappend(estimate_cache, e);
	MemoryContextSwitchTo(old);
	return count;
}

/* ---------------------------------------------------------------------
 * Planning
 * ---------------------------------------------------------------------
 */

/* scan_user: the role a scan checks access as, InvalidOid meaning the current user */
static Oid
scan_user(Oid check_as_user)
{
	return OidIsValid(check_as_user) ? check_as_user : GetUserId();
}

/*
 * kwatchGetForeignRelSize: resolves the table, classifies the clauses and
 * estimates the rows (see the file header).
 * Refuses (55000) an extension not at the library's version first
 * (kw_check_schema_version).
 */
static void
kwatchGetForeignRelSize(PlannerInfo *root, RelOptInfo *baserel,
						Oid foreigntableid)
{
	Oid			userid = scan_user(baserel->userid);
	KwPlanState *ps = palloc0(sizeof(KwPlanState));
	KwClusterConfig *cfg;
	double		total = -1;
	List	   *other = NIL;
	Selectivity sel;
	ListCell   *lc;
	char	   *ns;

	kw_check_schema_version();
	ps->table = kw_live_table_resolve(foreigntableid, userid, &cfg);
	kw_classify_conditions(root, baserel, ps->table, &ps->req);
	baserel->fdw_private = ps;

	pull_varattnos((Node *) baserel->reltarget->exprs, baserel->relid,
				   &ps->attrs_used);
	foreach(lc, baserel->baserestrictinfo)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);

		pull_varattnos((Node *) ri->clause, baserel->relid, &ps->attrs_used);
		if (ri != ps->req.namespace_qual)
			other = lappend(other, ri);
	}

	/* a namespace from a parameter is unknown yet: estimate all of them */
	ns = ps->req.namespace && ps->req.namespace[0] != '\x01' ? ps->req.namespace : NULL;
	if (ps->req.namespaces != NIL)
	{
		/* namespace IN (...): the sum of the namespaces' sizes */
		total = 0;
		foreach(lc, ps->req.namespaces)
		{
			double		n = -1;

			if (ps->table->use_remote_estimate)
				n = remote_count(cfg, GetForeignTable(foreigntableid)->serverid, userid,
								 kw_live_path(ps->table, strVal(lfirst(lc))));
			if (n < 0)
			{
				total = -1;
				break;
			}
			total += n;
		}
	}
	else if (ns == NULL)
		total = mirror_count(ps->table);
	if (total < 0 && ps->table->use_remote_estimate && ps->req.namespaces == NIL)
		total = remote_count(cfg, GetForeignTable(foreigntableid)->serverid, userid,
							 kw_live_path(ps->table, ns));
	if (total < 0)
		total = KW_DEFAULT_ROWS;

	sel = clauselist_selectivity(root, other, baserel->relid, JOIN_INNER, NULL);
	baserel->tuples = total;
	baserel->rows = clamp_row_est(total * sel);
	if (ps->req.by_name)
		baserel->rows = 1;
}

/*
 * limit_to_push: LIMIT + OFFSET of the query when the scan of `baserel` is
 * all there is between it and the LIMIT (see the file header), else 0.
 * As postgres_fdw's add_foreign_final_paths checks, but for a base scan.
 */
static int
limit_to_push(PlannerInfo *root, RelOptInfo *baserel)
{
	Query	   *parse = root->parse;
	int64		count,
				offset = 0;

	if (baserel->reloptkind != RELOPT_BASEREL ||
		bms_membership(root->all_baserels) != BMS_SINGLETON ||
		parse->limitCount == NULL || parse->limitOption != LIMIT_OPTION_COUNT ||
		parse->sortClause || parse->groupClause || parse->groupingSets ||
		parse->hasAggs || parse->hasWindowFuncs || parse->distinctClause ||
		parse->setOperations || parse->havingQual || parse->hasTargetSRFs ||
		parse->rowMarks || parse->hasSubLinks)
		return 0;
	if (!IsA(parse->limitCount, Const) || ((Const *) parse->limitCount)->constisnull)
		return 0;
	count = DatumGetInt64(((Const *) parse->limitCount)->constvalue);
	if (parse->limitOffset)
	{
		if (!IsA(parse->limitOffset, Const) || ((Const *) parse->limitOffset)->constisnull)
			return 0;
		offset = DatumGetInt64(((Const *) parse->limitOffset)->constvalue);
	}
	if (count <= 0 || offset < 0 || count + offset > 100000)
		return 0;
	return (int) (count + offset);
}

/*
 * kwatchGetForeignPaths: the one path: a LIST.  Each page costs a round trip
 * (KW_STARTUP_COST), each object returned its transfer and decoding
 * (KW_PER_OBJECT_COST), and the server looks at every object of the
 * collection to apply the selectors (a tenth of cpu_tuple_cost each), so
 * a selective request is cheaper than a full one, but never free.
 */
static void
kwatchGetForeignPaths(PlannerInfo *root, RelOptInfo *baserel,
					  Oid foreigntableid)
{
	KwPlanState *ps = (KwPlanState *) baserel->fdw_private;
	int			limit = ps->req.all_exact ? limit_to_push(root, baserel) : 0;
	double		pages = kw_list_page_size > 0 ? ceil(baserel->rows / kw_list_page_size) : 1;
	Cost		startup = KW_STARTUP_COST;
	Cost		total = startup + Max(pages - 1, 0) * KW_STARTUP_COST +
		baserel->rows * KW_PER_OBJECT_COST + baserel->tuples * cpu_tuple_cost * 0.1;

	add_path(baserel, (Path *)
			 KW_CREATE_FOREIGNSCAN_PATH(root, baserel, NULL, baserel->rows,
									 startup, total, NIL, NULL, NULL,
									 list_make1(makeInteger(limit))));
}

/*
 * kwatchGetForeignPlan: a ForeignScan whose qual is every restriction clause
 * (pushed ones are re-checked locally; see fdw_deparse.c), and whose
 * fdw_private describes the request.
 */
static ForeignScan *
kwatchGetForeignPlan(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid,
					 ForeignPath *best_path, List *tlist, List *scan_clauses,
					 Plan *outer_plan)
{
	KwPlanState *ps = (KwPlanState *) baserel->fdw_private;
	List	   *labels = NIL;
	List	   *fields = NIL;
	List	   *retrieved = NIL;
	Relation	rel = table_open(foreigntableid, NoLock);
	TupleDesc	desc = RelationGetDescr(rel);
	bool		whole_row = bms_is_member(0 - FirstLowInvalidHeapAttributeNumber,
										  ps->attrs_used);
	List	   *fdw_private;
	ListCell   *lc;

	foreach(lc, ps->req.label_terms)
		labels = lappend(labels, makeString(lfirst(lc)));
	foreach(lc, ps->req.field_terms)
		fields = lappend(fields, makeString(lfirst(lc)));
	for (int i = 1; i <= desc->natts; i++)
	{
		if (TupleDescAttr(desc, i - 1)->attisdropped)
			continue;
		if (whole_row ||
			bms_is_member(i - FirstLowInvalidHeapAttributeNumber, ps->attrs_used))
			retrieved = lappend_int(retrieved, i);
	}
	table_close(rel, NoLock);

	fdw_private = list_make5(makeString(ps->req.namespace ? ps->req.namespace : pstrdup("")),
							 labels, fields, linitial(best_path->fdw_private),
							 retrieved);
	fdw_private = lappend(fdw_private, makeBoolean(ps->req.all_exact));
	fdw_private = lappend(fdw_private, makeString(ps->table->api_group));
	fdw_private = lappend(fdw_private, makeString(ps->table->api_version));
	fdw_private = lappend(fdw_private, makeString(ps->table->plural));
	fdw_private = lappend(fdw_private, makeBoolean(ps->table->namespaced));
	fdw_private = lappend(fdw_private, ps->req.namespaces);

	/* parameters go in fdw_exprs, so that setrefs.c fixes them up */
	return make_foreignscan(tlist, extract_actual_clauses(scan_clauses, false),
							baserel->relid, (List *) copyObject(ps->req.param_exprs), fdw_private,
							NIL, NIL, outer_plan);
}

/* page_size: the first page's limit: the pushed LIMIT, else the GUC. */
static int
page_size(int pushed_limit)
{
	if (pushed_limit > 0 && (kw_list_page_size == 0 || pushed_limit < kw_list_page_size))
		return pushed_limit;
	return kw_list_page_size;
}

/* ---------------------------------------------------------------------
 * Execution
 * ---------------------------------------------------------------------
 */

/*
 * kwatchBeginForeignScan: resolves the table again (cached), compiles the
 * column expressions of the retrieved columns.  The LIST starts at the
 * first row fetched.  EXPLAIN without ANALYZE contacts nobody.
 */
static void
kwatchBeginForeignScan(ForeignScanState *node, int eflags)
{
	ForeignScan *fsplan = (ForeignScan *) node->ss.ps.plan;
	EState	   *estate = node->ss.ps.state;
	Relation	rel = node->ss.ss_currentRelation;
	KwScanState *st;

	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;

	st = palloc0(sizeof(KwScanState));
	node->fdw_state = st;
	st->table = kw_live_table_resolve(RelationGetRelid(rel),
							  scan_user(KW_FOREIGN_SCAN_USER(fsplan, estate)), &st->cfg);
	st->namespace = strVal(list_nth(fsplan->fdw_private, FdwPrivNamespace));
	st->label_terms = (List *) list_nth(fsplan->fdw_private, FdwPrivLabels);
	st->field_terms = (List *) list_nth(fsplan->fdw_private, FdwPrivFields);
	st->param_exprs = fsplan->fdw_exprs;
	plan_table(fsplan->fdw_private, &st->plan_table);
	st->namespaces = (List *) list_nth(fsplan->fdw_private, FdwPrivNamespaces);
	st->param_states = ExecInitExprList(fsplan->fdw_exprs, (PlanState *) node);
	st->page_size = page_size(intVal(list_nth(fsplan->fdw_private, FdwPrivLimit)));
	st->scan_cxt = estate->es_query_cxt;

	st->row = kw_live_row_begin(st->table, rel,
								(List *) list_nth(fsplan->fdw_private, FdwPrivRetrieved),
								estate);
}

/* bind_terms: the selector of `terms` with parameter values bound. */
static char *
bind_terms(List *terms, List *param_exprs, Datum *values, bool *nulls,
		   bool *none)
{
	List	   *out = NIL;
	ListCell   *lc;

	foreach(lc, terms)
	{
		bool		drop;
		char	   *t = kw_live_bind(strVal(lfirst(lc)), param_exprs, values, nulls,
									 &drop, none);

		if (!drop)
			out = lappend(out, t);
	}
	return kw_live_selector(out);
}

/*
 * start_scan: binds the parameters (evaluated now, in the node's
 * expression context) into the request and starts the LIST.  Returns false
 * when a parameter makes every row fail the clauses (no request then).
 */
static bool
start_scan(ForeignScanState *node, KwScanState *st)
{
	ExprContext *econtext = node->ss.ps.ps_ExprContext;
	int			n = list_length(st->param_states);
	Datum	   *values = palloc0(sizeof(Datum) * Max(1, n));
	bool	   *nulls = palloc0(sizeof(bool) * Max(1, n));
	bool		none = false;
	bool		drop = false;
	char	   *ns = NULL;
	char	   *labels;
	char	   *fields;
	int			i = 0;
	ListCell   *lc;

	foreach(lc, st->param_states)
	{
		MemoryContext old = MemoryContextSwitchTo(econtext->ecxt_per_tuple_memory);
		Datum		v = ExecEvalExpr((ExprState *) lfirst(lc), econtext, &nulls[i]);

		MemoryContextSwitchTo(old);
		values[i] = nulls[i] ? (Datum) 0 : PointerGetDatum(PG_DETOAST_DATUM_COPY(v));
		i++;
	}
	if (st->namespace[0])
	{
		ns = kw_live_bind(st->namespace, st->param_exprs, values, nulls, &drop, &none);
		if (drop)
			ns = NULL;
	}
	labels = bind_terms(st->label_terms, st->param_exprs, values, nulls, &none);
	fields = bind_terms(st->field_terms, st->param_exprs, values, nulls, &none);
	if (none)
		return false;
	st->labels = labels;
	st->fields = fields;
	st->next_namespace = 0;
	if (ns == NULL && st->namespaces != NIL)
		ns = strVal(list_nth(st->namespaces, st->next_namespace++));
	st->scan = kw_live_scan_begin(st->cfg, kw_live_path(&st->plan_table, ns), labels,
								  fields, st->page_size, st->plan_table.plural,
								  kw_api_version_string(st->plan_table.api_group,
														st->plan_table.api_version),
								  st->table->kind);
	return true;
}

/*
 * kwatchIterateForeignScan: the next object as a row; an empty slot at the end.
 */
static TupleTableSlot *
kwatchIterateForeignScan(ForeignScanState *node)
{
	KwScanState *st = (KwScanState *) node->fdw_state;
	TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;
	char	   *json;
	int			len;
	MemoryContext old;

	ExecClearTuple(slot);
	if (st->no_rows)
		return slot;
	if (st->scan == NULL)
	{
		old = MemoryContextSwitchTo(st->scan_cxt);
		if (!start_scan(node, st))
		{
			st->no_rows = true;
			MemoryContextSwitchTo(old);
			return slot;
		}
		MemoryContextSwitchTo(old);
	}
	while (!kw_live_scan_next(st->scan, &json, &len))
	{
		KwLiveScan *next;

		/* namespace IN (...): the next namespace's LIST, else the end */
		if (st->next_namespace == 0 || st->next_namespace >= list_length(st->namespaces))
			return slot;
		old = MemoryContextSwitchTo(st->scan_cxt);
		next = kw_live_scan_begin(st->cfg,
								  kw_live_path(&st->plan_table,
											   strVal(list_nth(st->namespaces,
															   st->next_namespace++))),
								  st->labels, st->fields, st->page_size,
								  st->plan_table.plural,
								  kw_api_version_string(st->plan_table.api_group,
														st->plan_table.api_version),
								  st->table->kind);
		MemoryContextSwitchTo(old);
		{
			int			pages;
			int64		items;

			kw_live_scan_counts(st->scan, &pages, &items);
			st->pages_done += pages;
		}
		kw_live_scan_end(st->scan);
		st->scan = next;
	}

	kw_live_row_store(st->row, json, len, slot);
	return slot;
}

/* kwatchReScanForeignScan: the next fetch starts a new LIST. */
static void
kwatchReScanForeignScan(ForeignScanState *node)
{
	KwScanState *st = (KwScanState *) node->fdw_state;

	if (st && st->scan)
	{
		kw_live_scan_end(st->scan);
		st->scan = NULL;
	}
	if (st)
	{
		st->no_rows = false;	/* parameters may have changed */
		st->pages_done = 0;
	}
}

/* kwatchEndForeignScan: stops any transfer still running. */
static void
kwatchEndForeignScan(ForeignScanState *node)
{
	KwScanState *st = (KwScanState *) node->fdw_state;

	if (st && st->scan)
	{
		kw_live_scan_end(st->scan);
		st->scan = NULL;
	}
}

/*
 * kwatchExplainForeignScan: "Kubernetes Request: GET
 * <path>?<selectors>&limit=n" (values as written, not percent-encoded), and
 * with ANALYZE the pages requested.
 */
static void
kwatchExplainForeignScan(ForeignScanState *node, ExplainState *es)
{
	ForeignScan *fsplan = (ForeignScan *) node->ss.ps.plan;
	List	   *priv = fsplan->fdw_private;
	KwScanState *st = (KwScanState *) node->fdw_state;
	int			limit = intVal(list_nth(priv, FdwPrivLimit));

	{
		List	   *params = fsplan->fdw_exprs;
		char	   *ns = strVal(list_nth(priv, FdwPrivNamespace));
		bool		drop,
					none;
		char	   *labels = bind_terms((List *) list_nth(priv, FdwPrivLabels), params,
										NULL, NULL, &none);
		char	   *fields = bind_terms((List *) list_nth(priv, FdwPrivFields), params,
										NULL, NULL, &none);
		KwLiveTable t;

		List	   *nss = (List *) list_nth(priv, FdwPrivNamespaces);
		StringInfoData req;
		ListCell   *lc;

		plan_table(priv, &t);
		initStringInfo(&req);
		if (nss == NIL)
			appendStringInfo(&req, "GET %s",
							 kw_live_request_text(kw_live_path(&t, ns[0] ?
															   kw_live_bind(ns, params, NULL, NULL, &drop, &none) :
															   NULL),
												  labels, fields, page_size(limit), false));
		foreach(lc, nss)
			appendStringInfo(&req, "%sGET %s", req.len ? "; " : "",
							 kw_live_request_text(kw_live_path(&t, strVal(lfirst(lc))),
												  labels, fields, page_size(limit), false));
		ExplainPropertyText("Kubernetes Request", req.data, es);
	}
	if (es->verbose)
	{
		ExplainPropertyBool("All Conditions Pushed Exactly",
							boolVal(list_nth(priv, FdwPrivExact)), es);
		if (limit > 0)
			ExplainPropertyInteger("Pushed Limit", NULL, limit, es);
	}
	if (es->analyze && st && st->scan)
	{
		int			pages;
		int64		items;

		kw_live_scan_counts(st->scan, &pages, &items);
		ExplainPropertyInteger("Kubernetes Pages", NULL, st->pages_done + pages, es);
	}
}

/* ---------------------------------------------------------------------
 * IMPORT FOREIGN SCHEMA
 * ---------------------------------------------------------------------
 */

/* Whether `name` is in `taken` (a List of char *). */
static bool
name_taken(List *taken, const char *name)
{
	ListCell   *lc;

	foreach(lc, taken)
		if (strcmp((char *) lfirst(lc), name) == 0)
			return true;
	return false;
}

/*
 * import_table_name: the foreign table name of resource `r` (palloc'd):
 * its plural; on a collision with `taken`, plural_<group> (dots and dashes
 * as underscores, "core" for the core group); then _2, _3, ... until it is
 * free.  Always fits an identifier (NAMEDATALEN - 1 bytes, clipped on a
 * character boundary, pg_mbcliplen): a CRD group may be 253 characters, and
 * PostgreSQL would otherwise truncate two long names to the same one and
 * fail the whole IMPORT with "relation already exists".
 */
static char *
import_table_name(KwResource *r, List *taken)
{
	char	   *base = pstrdup(r->plural);
	char	   *name;

	if (name_taken(taken, base))
	{
		char	   *g = r->api_group[0] ? pstrdup(r->api_group) : pstrdup("core");

		for (char *p = g; *p; p++)
			if (*p == '.' || *p == '-')
				*p = '_';
		base = psprintf("%s_%s", r->plural, g);
	}
	base[pg_mbcliplen(base, strlen(base), NAMEDATALEN - 1)] = '\0';
	name = base;
	for (int n = 2; name_taken(taken, name); n++)
	{
		char		suffix[16];
		int			keep;

		snprintf(suffix, sizeof(suffix), "_%d", n);
		keep = pg_mbcliplen(base, strlen(base), NAMEDATALEN - 1 - strlen(suffix));
		name = psprintf("%.*s%s", keep, base, suffix);
	}
	return name;
}

/*
 * kwatchImportForeignSchema: IMPORT FOREIGN SCHEMA k8s FROM SERVER s INTO x
 * [LIMIT TO (...) | EXCEPT (...)]: one CREATE FOREIGN TABLE per resource
 * that can be listed (kw_discover_listable), named as mirror tables are
 * (plural, group-qualified on a collision), with the mirror tables'
 * columns and options resource/api_version/namespaced/kind so that scans need
 * no discovery.  PostgreSQL applies LIMIT TO/EXCEPT to the table names.
 * Secrets are left out unless asked for: named in LIMIT TO (their values
 * redacted) or with OPTIONS (secret_data 'true') (values in clear).
 * ERRORs: 3F000 for a remote schema other than "k8s", HV00D for options,
 * and the discovery errors (http.c); 55000 when the extension is not at
 * the library's version (kw_check_schema_version).
 */
static List *
kwatchImportForeignSchema(ImportForeignSchemaStmt *stmt, Oid serverOid)
{
	ForeignServer *srv = GetForeignServer(serverOid);
	KwClusterConfig *cfg;
	List	   *resources;
	List	   *taken = NIL;
	List	   *commands = NIL;
	ListCell   *lc;
	bool		secret_data = false;
	bool		secrets_named = false;

	kw_check_schema_version();
	if (strcmp(stmt->remote_schema, "k8s") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_SCHEMA_NAME),
				 errmsg("kwatch servers have one remote schema, \"k8s\"; not \"%s\"",
						stmt->remote_schema),
				 errhint("IMPORT FOREIGN SCHEMA k8s FROM SERVER %s INTO ...; restrict with LIMIT TO (pods, ...).",
						 quote_identifier(srv->servername))));
	foreach(lc, stmt->options)
	{
		DefElem    *d = (DefElem *) lfirst(lc);

		if (strcmp(d->defname, "secret_data") == 0)
			secret_data = defGetBoolean(d);
		else
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
					 errmsg("invalid option \"%s\"", d->defname),
					 errhint("IMPORT FOREIGN SCHEMA of kwatch takes one option, secret_data.")));
	}
	/* LIMIT TO (secrets): asked for by name */
	if (stmt->list_type == FDW_IMPORT_SCHEMA_LIMIT_TO)
		foreach(lc, stmt->table_list)
			if (strcmp(((RangeVar *) lfirst(lc))->relname, "secrets") == 0)
				secrets_named = true;

	cfg = kw_cluster_config_for_server(srv->servername, GetUserId());
	resources = kw_discover_listable(cfg);
	foreach(lc, resources)
	{
		KwResource *r = (KwResource *) lfirst(lc);
		bool		secrets = kw_is_secret_resource(r->api_group, r->plural);
		char	   *table;
		KwLiveColumns *cols;
		StringInfoData s;

		/*
		 * Secrets only when asked for: by OPTIONS (secret_data 'true'), which
		 * shows their values, or by name in LIMIT TO, redacted (redact.c).
		 */
		if (secrets && !secret_data && !secrets_named)
			continue;
		table = import_table_name(r, taken);
		cols = kw_live_columns(r->api_group, r->plural);

		taken = lappend(taken, table);
		initStringInfo(&s);
		appendStringInfo(&s, "CREATE FOREIGN TABLE %s (",
						 quote_identifier(table));
		for (int i = 0; i < cols->ncolumns; i++)
			appendStringInfo(&s, "%s%s %s", i ? ", " : "",
							 quote_identifier(cols->columns[i].name),
							 format_type_with_typemod(cols->columns[i].type,
													  cols->columns[i].typmod));
		appendStringInfo(&s, ") SERVER %s OPTIONS (resource %s, api_version %s, namespaced %s, kind %s%s)",
						 quote_identifier(srv->servername),
						 quote_literal_cstr(r->api_group[0] ?
											psprintf("%s.%s", r->plural, r->api_group) :
											r->plural),
						 quote_literal_cstr(r->api_version),
						 r->namespaced ? "'true'" : "'false'",
						 quote_literal_cstr(r->kind),
						 secrets && secret_data ? ", secret_data 'true'" : "");
		commands = lappend(commands, s.data);
	}
	return commands;
}

/*
 * kwatch_fdw_handler: SQL kwatch_fdw_handler() -> fdw_handler, the
 * FdwRoutine of the kwatch wrapper (foreign/fdwapi.h).
 */
Datum
kwatch_fdw_handler(PG_FUNCTION_ARGS)
{
	FdwRoutine *routine = makeNode(FdwRoutine);

	routine->GetForeignRelSize = kwatchGetForeignRelSize;
	routine->GetForeignPaths = kwatchGetForeignPaths;
	routine->GetForeignPlan = kwatchGetForeignPlan;
	routine->BeginForeignScan = kwatchBeginForeignScan;
	routine->IterateForeignScan = kwatchIterateForeignScan;
	routine->ReScanForeignScan = kwatchReScanForeignScan;
	routine->EndForeignScan = kwatchEndForeignScan;
	routine->ExplainForeignScan = kwatchExplainForeignScan;
	kw_live_modify_routine(routine);	/* INSERT, UPDATE, DELETE: fdw_modify.c */
	routine->ImportForeignSchema = kwatchImportForeignSchema;
	PG_RETURN_POINTER(routine);
}
