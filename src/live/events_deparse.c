/*-------------------------------------------------------------------------
 *
 * events_deparse.c
 *		Which WHERE clauses the kwatch.events scan (events_fdw.c) can apply
 *		itself: the columns of the event stream and the classification of a
 *		baserestrictinfo clause, as fdw_deparse.c is for live tables and
 *		deparse.c for postgres_fdw.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/stratnum.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "kw_common.h"
#include "kw_events.h"

static const struct
{
	const char *name;
	EvColumn	col;
	Oid			type;
}			ev_columns[] =
{
	{"seq", EV_SEQ, INT8OID},
	{"at", EV_AT, TIMESTAMPTZOID},
	{"cluster", EV_CLUSTER, TEXTOID},
	{"resource", EV_RESOURCE, TEXTOID},
	{"table_name", EV_TABLE_NAME, TEXTOID},
	{"type", EV_TYPE, TEXTOID},
	{"namespace", EV_NAMESPACE, TEXTOID},
	{"name", EV_NAME, TEXTOID},
	{"uid", EV_UID, TEXTOID},
	{"resource_version", EV_RESOURCE_VERSION, TEXTOID},
	{"truncated", EV_TRUNCATED, BOOLOID},
	{"preexisting", EV_PREEXISTING, BOOLOID},
	{"final_state_unknown", EV_FINAL_STATE_UNKNOWN, BOOLOID},
	{"previous_resource_version", EV_PREVIOUS_RESOURCE_VERSION, TEXTOID},
};

/*
 * kw_ev_column_by_name: the event column called `name` (EV_NONE for none),
 * and its type in *type when type is not NULL.
 */
EvColumn
kw_ev_column_by_name(const char *name, Oid *type)
{
	for (int i = 0; i < lengthof(ev_columns); i++)
		if (strcmp(ev_columns[i].name, name) == 0)
		{
			if (type)
				*type = ev_columns[i].type;
			return ev_columns[i].col;
		}
	return EV_NONE;
}

/*
 * kw_ev_classify_clause: whether `clause` (a baserestrictinfo clause of
 * kwatch.events, relation `rel` with range table index `relid`) is
 * "column op value" that the scan can apply; on success sets *code
 * (COND_CODE), *value (the Const or Param side) and *desc (for EXPLAIN).
 */
bool
kw_ev_classify_clause(Expr *clause, Index relid, Relation rel, int *code,
				Expr **value, char **desc)
{
	OpExpr	   *op;
	Node	   *left,
			   *right;
	Var		   *var;
	Expr	   *other;
	Oid			opno;
	EvColumn	col;
	int			strat;
	char	   *attname;

	if (!IsA(clause, OpExpr))
		return false;
	op = (OpExpr *) clause;
	if (list_length(op->args) != 2)
		return false;
	left = strip_implicit_coercions(linitial(op->args));
	right = strip_implicit_coercions(lsecond(op->args));
	opno = op->opno;
	if (IsA(left, Var) && (IsA(right, Const) || IsA(right, Param)))
	{
		var = (Var *) left;
		other = (Expr *) lsecond(op->args);
	}
	else if (IsA(right, Var) && (IsA(left, Const) || IsA(left, Param)))
	{
		var = (Var *) right;
		other = (Expr *) linitial(op->args);
		opno = get_commutator(opno);
		if (!OidIsValid(opno))
			return false;
	}
	else
		return false;
	if (var->varno != relid || var->varlevelsup != 0 || var->varattno <= 0)
		return false;

	attname = NameStr(TupleDescAttr(RelationGetDescr(rel), var->varattno - 1)->attname);
	col = kw_ev_column_by_name(attname, NULL);
	if (col == EV_SEQ)
	{
		Oid			t = exprType((Node *) other);

		if (t != INT8OID && t != INT4OID && t != INT2OID)
			return false;
		strat = get_op_opfamily_strategy(opno, INTEGER_BTREE_FAM_OID);
		if (strat < BTLessStrategyNumber || strat > BTGreaterStrategyNumber)
			return false;
	}
	else if (col == EV_CLUSTER || col == EV_RESOURCE || col == EV_TABLE_NAME ||
			 col == EV_TYPE)
	{
		/*
		 * The scan compares bytes: right for texteq under a deterministic
		 * collation, not under a nondeterministic one (case-insensitive ICU
		 * collations), which is left to the executor.
		 */
		if (opno != TextEqualOperator || exprType((Node *) other) != TEXTOID)
			return false;
		if (OidIsValid(op->inputcollid) && !get_collation_isdeterministic(op->inputcollid))
			return false;
		strat = BTEqualStrategyNumber;
	}
	else
		return false;

	*code = COND_CODE(col, strat);
	*value = other;
	{
		static const char *const ops[] = {"", "<", "<=", "=", ">=", ">"};
		StringInfoData buf;

		initStringInfo(&buf);
		appendStringInfo(&buf, "%s %s ", attname, ops[strat]);
		if (IsA(other, Param))
			appendStringInfo(&buf, "$%d", ((Param *) other)->paramid);
		else if (((Const *) other)->constisnull)
			appendStringInfoString(&buf, "NULL");
		else
		{
			Const	   *c = (Const *) other;
			Oid			outfn;
			bool		varlena;

			getTypeOutputInfo(c->consttype, &outfn, &varlena);
			if (col == EV_SEQ)
				appendStringInfoString(&buf, OidOutputFunctionCall(outfn, c->constvalue));
			else
				appendStringInfoString(&buf, quote_literal_cstr(OidOutputFunctionCall(outfn, c->constvalue)));
		}
		*desc = buf.data;
	}
	return true;
}
