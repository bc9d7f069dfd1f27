/*-------------------------------------------------------------------------
 *
 * events_fdw.c
 *		The kwatch_events foreign-data wrapper: kwatch.events, the event
 *		stream ring (events.c) as a foreign table.
 *
 *	 SELECT * FROM kwatch.events WHERE seq > $1 ORDER BY seq;
 *
 * The scan walks the ring from the lowest seq the quals allow, in seq
 * order, so `seq > $last` costs the number of events returned, not the
 * ring's size, and ORDER BY seq needs no sort (the path declares the
 * ordering).  Pushed down from baserestrictinfo (Var op Const/Param, either
 * side; classified by events_deparse.c, as postgres_fdw's deparse.c does
 * for it): seq with <, <=, =, >=, > (any integer type on the other side,
 * the integer_ops btree family), and text equality on cluster, resource,
 * table_name and type.  Every qual is still rechecked by the executor; the
 * pushdown only skips work.  EXPLAIN shows what was pushed down.
 *
 * An event of a mirror table whose rows follow RBAC for the reader (the
 * policy kwatch_rbac, kwatch.enable_rbac_rows, and row security in force
 * for the reader: check_enable_rls) is returned only when the table's
 * decision, the SQL function kwatch.rbac_visible (functions/rbac_rows.c,
 * called through fmgr, one FmgrInfo and so one per-query cache per table),
 * shows its row's cluster and namespace to the reader.
 *
 * Callbacks follow contrib/postgres_fdw/postgres_fdw.c (names, where
 * params are evaluated: ExecInitExprList in BeginForeignScan, values at
 * the first IterateForeignScan after a (re)scan).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/reloptions.h"
#include "access/stratnum.h"
#include "access/genam.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_policy.h"
#include "catalog/pg_type.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "foreign/fdwapi.h"
#include "foreign/foreign.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/planmain.h"
#include "optimizer/restrictinfo.h"
#include "parser/parse_func.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/timestamp.h"

#include "kw_common.h"
#include "kw_status.h"
#include "kw_events.h"

#include KW_EXPLAIN_STATE_H
#include KW_EXPLAIN_FORMAT_H

/*
 * ring_here: whether this backend may read the event ring: it exists and
 * is restored, and this is the database whose watches write it
 * (kwatch.database: another database's kwatch.events is empty).
 */
static bool
ring_here(void)
{
	return kw_events_available() && kw_serves_this_database();
}

/* Planner state in baserel->fdw_private. */
typedef struct EvPlanState
{
	AttrNumber	seq_attno;		/* 0 if the table has no seq column */
	List	   *conds;			/* IntList of codes */
	List	   *values;			/* Expr per cond */
	List	   *descs;			/* text per cond, for EXPLAIN */
	int64		lower_const;	/* lowest seq allowed by Consts, for costs */
	bool		has_lower;
} EvPlanState;

/* Executor state. */
typedef struct EvScanState
{
	int			natts;
	EvColumn   *att_cols;		/* per attribute of the foreign table */
	List	   *conds;			/* IntList */
	List	   *value_states;	/* ExprState per cond */
	bool		started;
	bool		empty;			/* a condition can never be true */
	int64		next_seq;
	int64		upper;			/* last seq to return */
	char	  **text_eq;		/* per EvColumn: required value, or NULL */
	int			type_eq;		/* required KwEventType, -1 for any */
	List	   *rbac_tables;	/* EvRbacTable *: the tables met so far */
	MemoryContext cxt;			/* the query's: the decisions' caches */
} EvScanState;

/* A mirror table met by the scan, and whether its rows follow RBAC here. */
typedef struct EvRbacTable
{
	char		table_name[NAMEDATALEN];
	Oid			relid;			/* InvalidOid: not filtered */
	FmgrInfo	decide;			/* kwatch.rbac_visible, its fn_extra per table */
} EvRbacTable;


/* ---------------------------------------------------------------------
 * planning
 * ---------------------------------------------------------------------
 */


/*
 * kwatchEventsGetForeignRelSize: finds the conditions the scan can apply and
 * estimates the rows: the events above a constant lower bound on seq, else
 * a tenth of the ring.
 * Refuses (55000) an extension not at the library's version first
 * (kw_check_schema_version).
 */
static void
kwatchEventsGetForeignRelSize(PlannerInfo *root, RelOptInfo *baserel,
							  Oid foreigntableid)
{
	EvPlanState *ps = palloc0(sizeof(EvPlanState));
	Relation	rel = table_open(foreigntableid, NoLock);
	TupleDesc	desc = RelationGetDescr(rel);
	ListCell   *lc;
	double		rows;
	int64		last = ring_here() ? kw_events_last_seq() : 0;
	int			nslots = Max(kw_events_ring_slots(), 1);

	kw_check_schema_version();
	for (int i = 0; i < desc->natts; i++)
		if (!TupleDescAttr(desc, i)->attisdropped &&
			kw_ev_column_by_name(NameStr(TupleDescAttr(desc, i)->attname), NULL) == EV_SEQ)
			ps->seq_attno = i + 1;

	foreach(lc, baserel->baserestrictinfo)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);
		int			code;
		Expr	   *value;
		char	   *d;

		if (!kw_ev_classify_clause(ri->clause, baserel->relid, rel, &code, &value, &d))
			continue;
		ps->conds = lappend_int(ps->conds, code);
		ps->values = lappend(ps->values, value);
		ps->descs = lappend(ps->descs, makeString(d));
		if (COND_COL(code) == EV_SEQ && IsA(value, Const) &&
			!((Const *) value)->constisnull &&
			(COND_STRAT(code) == BTGreaterStrategyNumber ||
			 COND_STRAT(code) == BTGreaterEqualStrategyNumber ||
			 COND_STRAT(code) == BTEqualStrategyNumber))
		{
			Const	   *c = (Const *) value;
			int64		v = c->consttype == INT8OID ? DatumGetInt64(c->constvalue) :
			c->consttype == INT4OID ? DatumGetInt32(c->constvalue) :
			DatumGetInt16(c->constvalue);

			if (!ps->has_lower || v > ps->lower_const)
				ps->lower_const = v;
			ps->has_lower = true;
		}
	}
	table_close(rel, NoLock);

	if (ps->has_lower)
		rows = Max(0.0, Min((double) nslots, (double) (last - ps->lower_const)));
	else
		rows = nslots / 10.0;
	baserel->rows = clamp_row_est(rows);
	baserel->fdw_private = ps;
}

/*
 * seq_pathkeys: the query's ORDER BY when it is `seq` ascending (the
 * scan's natural order), else NIL.
 */
static List *
seq_pathkeys(PlannerInfo *root, RelOptInfo *baserel, EvPlanState *ps)
{
	PathKey    *pk;
	ListCell   *lc;

	if (ps->seq_attno == 0 || list_length(root->query_pathkeys) != 1)
		return NIL;
	pk = linitial(root->query_pathkeys);
	if (!KW_PATHKEY_ASCENDING(pk) || pk->pk_nulls_first ||
		pk->pk_opfamily != INTEGER_BTREE_FAM_OID || pk->pk_eclass->ec_has_volatile)
		return NIL;
	foreach(lc, pk->pk_eclass->ec_members)
	{
		EquivalenceMember *em = lfirst(lc);
		Expr	   *e = em->em_expr;

		while (IsA(e, RelabelType))
			e = ((RelabelType *) e)->arg;
		if (IsA(e, Var) && ((Var *) e)->varno == baserel->relid &&
			((Var *) e)->varattno == ps->seq_attno && ((Var *) e)->varlevelsup == 0)
			return list_make1(pk);
	}
	return NIL;
}

/*
 * kwatchEventsGetForeignPaths: one path, ordered by seq; costs are per event
 * read (a slot copy), nothing at startup.
 */
static void
kwatchEventsGetForeignPaths(PlannerInfo *root, RelOptInfo *baserel,
							Oid foreigntableid)
{
	EvPlanState *ps = (EvPlanState *) baserel->fdw_private;
	Cost		total = 1.0 + baserel->rows * (cpu_tuple_cost + cpu_operator_cost);

	add_path(baserel, (Path *)
			 KW_CREATE_FOREIGNSCAN_PATH(root, baserel, NULL, baserel->rows,
									 0.0, total, seq_pathkeys(root, baserel, ps),
									 baserel->lateral_relids, NULL, NIL));
}

/*
 * kwatchEventsGetForeignPlan: a ForeignScan whose fdw_exprs are the pushed-down
 * comparison values and fdw_private (codes IntList, descriptions); every
 * qual stays in the plan's qual for the executor to recheck.
 */
static ForeignScan *
kwatchEventsGetForeignPlan(PlannerInfo *root, RelOptInfo *baserel,
						   Oid foreigntableid, ForeignPath *best_path,
						   List *tlist, List *scan_clauses, Plan *outer_plan)
{
	EvPlanState *ps = (EvPlanState *) baserel->fdw_private;

	scan_clauses = extract_actual_clauses(scan_clauses, false);
	return make_foreignscan(tlist, scan_clauses, baserel->relid,
							ps->values, list_make2(ps->conds, ps->descs),
							NIL, NIL, outer_plan);
}

/*
 * kwatchEventsExplainForeignScan: "Pushed Down: seq > $1, cluster = prod" and
 * the ring's size.
 */
static void
kwatchEventsExplainForeignScan(ForeignScanState *node, ExplainState *es)
{
	List	   *descs = lsecond(((ForeignScan *) node->ss.ps.plan)->fdw_private);
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	foreach(lc, descs)
	{
		if (buf.len)
			appendStringInfoString(&buf, ", ");
		appendStringInfoString(&buf, strVal(lfirst(lc)));
	}
	ExplainPropertyText("Pushed Down", buf.len ? buf.data : "(none)", es);
}

/* ---------------------------------------------------------------------
 * execution
 * ---------------------------------------------------------------------
 */

/*
 * kwatchEventsBeginForeignScan: maps the table's columns, prepares the
 * comparison values for evaluation.
 */
static void
kwatchEventsBeginForeignScan(ForeignScanState *node, int eflags)
{
	ForeignScan *fs = (ForeignScan *) node->ss.ps.plan;
	TupleDesc	desc = RelationGetDescr(node->ss.ss_currentRelation);
	EvScanState *st = palloc0(sizeof(EvScanState));

	st->natts = desc->natts;
	st->att_cols = palloc0(sizeof(EvColumn) * desc->natts);
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		Oid			type = InvalidOid;
		EvColumn	c = att->attisdropped ? EV_NONE :
			kw_ev_column_by_name(NameStr(att->attname), &type);

		if (c != EV_NONE && type != att->atttypid)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
					 errmsg("column \"%s\" of kwatch.events must have type %s",
							NameStr(att->attname), format_type_be(type))));
		st->att_cols[i] = c;
	}
	st->conds = linitial(fs->fdw_private);
	st->text_eq = palloc0(sizeof(char *) * (EV_PREVIOUS_RESOURCE_VERSION + 1));
	st->cxt = CurrentMemoryContext;
	node->fdw_state = st;
	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;
	st->value_states = ExecInitExprList(fs->fdw_exprs, (PlanState *) node);
}

static int64
int_datum(Datum d, Oid type)
{
	if (type == INT8OID)
		return DatumGetInt64(d);
	if (type == INT4OID)
		return DatumGetInt32(d);
	return DatumGetInt16(d);
}

/* start_scan: evaluates the conditions into a seq range and filters. */
static void
start_scan(ForeignScanState *node, EvScanState *st)
{
	ExprContext *econtext = node->ss.ps.ps_ExprContext;
	ListCell   *lc,
			   *vc;
	int64		lower = 1;
	int64		upper = PG_INT64_MAX;
	MemoryContext old = MemoryContextSwitchTo(econtext->ecxt_per_query_memory);

	st->started = true;
	st->empty = false;
	st->type_eq = -1;
	memset(st->text_eq, 0, sizeof(char *) * (EV_PREVIOUS_RESOURCE_VERSION + 1));
	forboth(lc, st->conds, vc, st->value_states)
	{
		int			code = lfirst_int(lc);
		ExprState  *es = (ExprState *) lfirst(vc);
		bool		isnull;
		Datum		d = ExecEvalExpr(es, econtext, &isnull);
		EvColumn	col = COND_COL(code);

		if (isnull)
		{
			st->empty = true;	/* comparison with NULL is never true */
			continue;
		}
		if (col == EV_SEQ)
		{
			int64		v = int_datum(d, exprType((Node *) es->expr));

			switch (COND_STRAT(code))
			{
				case BTLessStrategyNumber:
					if (v == PG_INT64_MIN)
						st->empty = true;
					else
						upper = Min(upper, v - 1);
					break;
				case BTLessEqualStrategyNumber:
					upper = Min(upper, v);
					break;
				case BTEqualStrategyNumber:
					lower = Max(lower, v);
					upper = Min(upper, v);
					break;
				case BTGreaterEqualStrategyNumber:
					lower = Max(lower, v);
					break;
				case BTGreaterStrategyNumber:
					if (v == PG_INT64_MAX)
						st->empty = true;
					else
						lower = Max(lower, v + 1);
					break;
			}
		}
		else
		{
			char	   *s = TextDatumGetCString(d);

			if (col == EV_TYPE)
			{
				int			t = strcmp(s, "ADDED") == 0 ? KW_EV_ADDED :
				strcmp(s, "MODIFIED") == 0 ? KW_EV_MODIFIED :
				strcmp(s, "DELETED") == 0 ? KW_EV_DELETED : -1;

				if (t < 0 || (st->type_eq >= 0 && st->type_eq != t))
					st->empty = true;
				st->type_eq = t;
			}
			else if (st->text_eq[col] && strcmp(st->text_eq[col], s) != 0)
				st->empty = true;
			else
				st->text_eq[col] = s;
		}
	}
	MemoryContextSwitchTo(old);

	if (!ring_here())
		st->empty = true;
	else
	{
		lower = Max(lower, kw_events_oldest_seq());
		upper = Min(upper, kw_events_scan_bound());
	}
	if (lower > upper)
		st->empty = true;
	st->next_seq = lower;
	st->upper = upper;
}

static bool
record_matches(EvScanState *st, KwEventRecord *r)
{
	if (st->type_eq >= 0 && r->type != st->type_eq)
		return false;
	if (st->text_eq[EV_CLUSTER] && strcmp(st->text_eq[EV_CLUSTER], r->cluster) != 0)
		return false;
	if (st->text_eq[EV_RESOURCE] && strcmp(st->text_eq[EV_RESOURCE], r->resource) != 0)
		return false;
	if (st->text_eq[EV_TABLE_NAME] && strcmp(st->text_eq[EV_TABLE_NAME], r->table_name) != 0)
		return false;
	return true;
}

/*
 * event_visible: whether event r may be shown to the reader: always,
 * unless its table's rows follow RBAC for the reader (file header); then
 * kwatch.rbac_visible's answer for its cluster and namespace ('' for a
 * cluster-scoped object), false when that function is missing.
 */
static bool
event_visible(EvScanState *st, KwEventRecord *r)
{
	EvRbacTable *t = NULL;
	ListCell   *lc;

	foreach(lc, st->rbac_tables)
	{
		EvRbacTable *x = (EvRbacTable *) lfirst(lc);

		if (strcmp(x->table_name, r->table_name) == 0)
		{
			t = x;
			break;
		}
	}
	if (t == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(st->cxt);
		Oid			nsp = get_namespace_oid("k8s", true);
		Oid			relid = OidIsValid(nsp) ? get_relname_relid(r->table_name, nsp) : InvalidOid;

		t = palloc0(sizeof(EvRbacTable));
		strlcpy(t->table_name, r->table_name, NAMEDATALEN);
		t->relid = InvalidOid;
		if (OidIsValid(relid) && check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED &&
			kw_has_rbac_policy(relid))
		{
			Oid			argtypes[3] = {REGCLASSOID, TEXTOID, TEXTOID};
			Oid			fn = LookupFuncName(list_make2(makeString("kwatch"),
													   makeString("rbac_visible")),
											3, argtypes, true);

			t->relid = relid;
			if (OidIsValid(fn))
				fmgr_info_cxt(fn, &t->decide, st->cxt);
		}
		st->rbac_tables = lappend(st->rbac_tables, t);
		MemoryContextSwitchTo(old);
	}
	if (!OidIsValid(t->relid))
		return true;
	if (t->decide.fn_addr == NULL)
		return false;
	return DatumGetBool(FunctionCall3(&t->decide, ObjectIdGetDatum(t->relid),
									  CStringGetTextDatum(r->cluster),
									  CStringGetTextDatum(r->has_namespace ? r->namespace : "")));
}

/*
 * kwatchEventsIterateForeignScan: the next event in seq order within the
 * range, skipping those the pushed-down filters reject.  An event
 * overwritten while the scan ran is skipped by jumping to the ring's
 * oldest seq: the caller sees the gap as a jump in seq.  Ends at the first
 * event not yet committed.
 */
static TupleTableSlot *
kwatchEventsIterateForeignScan(ForeignScanState *node)
{
	EvScanState *st = (EvScanState *) node->fdw_state;
	TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;
	KwEventRecord r;

	ExecClearTuple(slot);
	if (!st->started)
		start_scan(node, st);
	if (st->empty)
		return slot;

	while (st->next_seq <= st->upper)
	{
		KwEventReadResult res = kw_events_read(st->next_seq, &r);

		if (res == KW_EVREAD_GONE)
		{
			st->next_seq = Max(st->next_seq + 1, kw_events_oldest_seq());
			continue;
		}
		if (res == KW_EVREAD_NOT_YET)
		{
			st->empty = true;
			return slot;
		}
		st->next_seq++;
		if (!record_matches(st, &r) || !event_visible(st, &r))
			continue;

		for (int i = 0; i < st->natts; i++)
		{
			Datum		d = (Datum) 0;
			bool		isnull = false;

			switch (st->att_cols[i])
			{
				case EV_SEQ:
					d = Int64GetDatum(r.seq);
					break;
				case EV_AT:
					d = TimestampTzGetDatum(r.at);
					break;
				case EV_CLUSTER:
					d = CStringGetTextDatum(r.cluster);
					break;
				case EV_RESOURCE:
					d = CStringGetTextDatum(r.resource);
					break;
				case EV_TABLE_NAME:
					d = CStringGetTextDatum(r.table_name);
					break;
				case EV_TYPE:
					d = CStringGetTextDatum(kw_event_type_name((KwEventType) r.type));
					break;
				case EV_NAMESPACE:
					if (r.has_namespace)
						d = CStringGetTextDatum(r.namespace);
					else
						isnull = true;
					break;
				case EV_NAME:
					d = CStringGetTextDatum(r.name);
					break;
				case EV_UID:
					d = CStringGetTextDatum(r.uid);
					break;
				case EV_RESOURCE_VERSION:
					d = CStringGetTextDatum(r.resource_version);
					break;
				case EV_TRUNCATED:
					d = BoolGetDatum(r.truncated);
					break;
				case EV_PREEXISTING:
					d = BoolGetDatum(r.preexisting);
					break;
				case EV_FINAL_STATE_UNKNOWN:
					d = BoolGetDatum(r.final_state_unknown);
					break;
				case EV_PREVIOUS_RESOURCE_VERSION:
					if (r.has_previous)
						d = CStringGetTextDatum(r.previous_resource_version);
					else
						isnull = true;
					break;
				case EV_NONE:
					isnull = true;
					break;
			}
			slot->tts_values[i] = d;
			slot->tts_isnull[i] = isnull;
		}
		ExecStoreVirtualTuple(slot);
		return slot;
	}
	return slot;
}

/* kwatchEventsReScanForeignScan: re-evaluates the params at the next fetch. */
static void
kwatchEventsReScanForeignScan(ForeignScanState *node)
{
	((EvScanState *) node->fdw_state)->started = false;
}

/* kwatchEventsEndForeignScan: nothing to release (memory is the query's). */
static void
kwatchEventsEndForeignScan(ForeignScanState *node)
{
}

PG_FUNCTION_INFO_V1(kwatch_events_fdw_handler);

/*
 * kwatch_events_fdw_handler: SQL kwatch_events_fdw_handler() ->
 * fdw_handler, the scan callbacks of the kwatch_events wrapper (read-only:
 * no modify callbacks, so INSERT/UPDATE/DELETE fail with PostgreSQL's
 * "cannot insert into foreign table" error, 55000).
 */
Datum
kwatch_events_fdw_handler(PG_FUNCTION_ARGS)
{
	FdwRoutine *r = makeNode(FdwRoutine);

	r->GetForeignRelSize = kwatchEventsGetForeignRelSize;
	r->GetForeignPaths = kwatchEventsGetForeignPaths;
	r->GetForeignPlan = kwatchEventsGetForeignPlan;
	r->BeginForeignScan = kwatchEventsBeginForeignScan;
	r->IterateForeignScan = kwatchEventsIterateForeignScan;
	r->ReScanForeignScan = kwatchEventsReScanForeignScan;
	r->EndForeignScan = kwatchEventsEndForeignScan;
	r->ExplainForeignScan = kwatchEventsExplainForeignScan;
	PG_RETURN_POINTER(r);
}

PG_FUNCTION_INFO_V1(kwatch_events_fdw_validator);

/*
 * kwatch_events_fdw_validator: SQL kwatch_events_fdw_validator(text[], oid)
 * -> void.  The wrapper, its server, user mappings and foreign tables take
 * no options: any option is an error, HV00D fdw_invalid_option_name.
 */
Datum
kwatch_events_fdw_validator(PG_FUNCTION_ARGS)
{
	List	   *options = untransformRelOptions(PG_GETARG_DATUM(0));

	if (options != NIL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
				 errmsg("invalid option \"%s\"", ((DefElem *) linitial(options))->defname),
				 errhint("The kwatch_events foreign-data wrapper takes no options.")));
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(kwatch_events_last_seq);

/*
 * kwatch_events_last_seq: SQL kwatch.events_last_seq() -> bigint, the seq
 * of the newest committed event (0 before the first); NULL while the
 * stream is unavailable (kwatch not preloaded, or the worker has not
 * started since the server did).
 */
Datum
kwatch_events_last_seq(PG_FUNCTION_ARGS)
{
	if (!ring_here())
		PG_RETURN_NULL();
	PG_RETURN_INT64(kw_events_last_seq());
}

PG_FUNCTION_INFO_V1(kwatch_events_oldest_seq);

/*
 * kwatch_events_oldest_seq: SQL kwatch.events_oldest_seq() -> bigint, the
 * oldest seq kwatch.events can still return (events_last_seq() + 1 when it
 * holds none; above that while a transaction larger than the ring is being
 * applied, whose first events are already overwritten).  A reader whose last seen seq is below this minus one has
 * lost events and must re-read the mirror tables.  NULL while unavailable,
 * as events_last_seq().
 */
Datum
kwatch_events_oldest_seq(PG_FUNCTION_ARGS)
{
	if (!ring_here())
		PG_RETURN_NULL();
	PG_RETURN_INT64(kw_events_oldest_seq());
}
