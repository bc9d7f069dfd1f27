/*-------------------------------------------------------------------------
 *
 * fdw_deparse.c
 *		WHERE clauses of a live foreign table -> the LIST request: the
 *		namespace path segment, a labelSelector and a fieldSelector.
 *
 * Like classifyConditions/foreign_expr_walker in contrib/postgres_fdw/
 * deparse.c, each restriction clause is examined on its own; unlike
 * postgres_fdw, a clause that becomes part of the request is still checked
 * locally (the scan keeps every clause as a filter), because selector
 * semantics differ from SQL's at the edges: `k!=v` matches objects without
 * the label, a missing field compares as "", and so on.  A term is only ever
 * sent when the server's answer is a superset of the rows the clause keeps.
 * A clause is "exact" when the server's answer is exactly those rows; only
 * when all clauses are exact is LIMIT pushed down (fdw.c).
 *
 * Expressions are recognised by what they read from the object: a column is
 * replaced by its defining expression (live_column.c), and chains of
 * jsonb -> / ->> with constant keys become a path, so `phase`,
 * `object->'status'->>'phase'` and a user's own column defined the same way
 * all are status.phase.
 *
 * Grammars: label selectors as k8s.io/apimachinery/pkg/labels/selector.go
 * (=, !=, in, notin, exists, !exists; keys are qualified names, values at
 * most 63 characters of [A-Za-z0-9_.-] starting and ending alphanumeric);
 * field selectors as k8s.io/apimachinery/pkg/fields/selector.go (=, !=
 * only; values escape \ , = with a backslash).  Fields a resource supports
 * are those of its ToSelectableFields in Kubernetes 1.20
 * (pkg/registry/core/pod/strategy.go and friends); metadata.name for every
 * resource and metadata.namespace for namespaced ones
 * (apiserver/pkg/registry/generic/matcher.go ObjectMetaFieldsSet).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"

#include "kw_common.h"
#include "kw_http.h"
#include "kw_fdw.h"

/* Most LISTs one namespace IN (...) clause becomes. */
#define KW_MAX_NAMESPACE_LISTS 20

/* Field selectors of Kubernetes 1.20 beyond metadata.name/namespace. */
typedef struct FieldSupport
{
	const char *api_group;
	const char *plural;
	const char *field;
} FieldSupport;

static const FieldSupport field_support[] = {
	/* pkg/registry/core/pod/strategy.go PodToSelectableFields */
	{"", "pods", "spec.nodeName"},
	{"", "pods", "spec.restartPolicy"},
	{"", "pods", "spec.schedulerName"},
	{"", "pods", "spec.serviceAccountName"},
	{"", "pods", "status.phase"},
	{"", "pods", "status.podIP"},
	{"", "pods", "status.nominatedNodeName"},
	/* pkg/registry/core/namespace/strategy.go NamespaceToSelectableFields */
	{"", "namespaces", "status.phase"},
	/* pkg/registry/core/secret/strategy.go SelectableFields */
	{"", "secrets", "type"},
	/* pkg/registry/core/event/strategy.go ToSelectableFields */
	{"", "events", "involvedObject.kind"},
	{"", "events", "involvedObject.namespace"},
	{"", "events", "involvedObject.name"},
	{"", "events", "involvedObject.uid"},
	{"", "events", "involvedObject.apiVersion"},
	{"", "events", "involvedObject.resourceVersion"},
	{"", "events", "involvedObject.fieldPath"},
	{"", "events", "reason"},
	{"", "events", "type"},
	/* pkg/registry/certificates/certificates/strategy.go */
	{"certificates.k8s.io", "certificatesigningrequests", "spec.signerName"},
	{NULL, NULL, NULL}
};

typedef struct DeparseCtx
{
	PlannerInfo *root;
	RelOptInfo *baserel;
	KwLiveTable *table;
} DeparseCtx;

/* A path into the object and whether its value is text (->>) or jsonb. */
typedef struct JsonPath
{
	List	   *keys;			/* char * */
	bool		is_text;
	bool		via_labels_column;	/* went through COALESCE(..., '{}') */
} JsonPath;

static bool expr_path(Node *node, DeparseCtx *ctx, bool in_column, JsonPath *out);

/*
 * const_text: the value of a non-null text Const (possibly relabelled), or
 * NULL.
 */
static char *
const_text(Node *node)
{
	if (node && IsA(node, RelabelType))
		node = (Node *) ((RelabelType *) node)->arg;
	if (node && IsA(node, Const) && !((Const *) node)->constisnull &&
		(((Const *) node)->consttype == TEXTOID ||
		 ((Const *) node)->consttype == VARCHAROID))
		return TextDatumGetCString(((Const *) node)->constvalue);
	return NULL;
}

/*
 * expr_path: whether `node` reads a fixed path of the object; fills *out.
 * Param 1 is the object only inside a column's defining expression
 * (in_column); a Param in the query itself is a query parameter.
 */
static bool
expr_path(Node *node, DeparseCtx *ctx, bool in_column, JsonPath *out)
{
	if (node == NULL)
		return false;
	if (IsA(node, RelabelType))
		return expr_path((Node *) ((RelabelType *) node)->arg, ctx, in_column, out);
	if (IsA(node, Var))
	{
		Var		   *v = (Var *) node;
		char	   *attname;
		KwLiveColumn *col;

		if (in_column || v->varno != ctx->baserel->relid || v->varlevelsup != 0 ||
			v->varattno <= 0)
			return false;
		attname = get_attname(ctx->table->relid, v->varattno, true);
		col = attname ? kw_live_column_find(ctx->table->columns, attname) : NULL;
		/* a column declared with another type is coerced: leave it local */
		if (col == NULL || col->type != v->vartype)
			return false;
		return expr_path((Node *) col->expr, ctx, true, out);
	}
	if (IsA(node, Param))
	{
		Param	   *p = (Param *) node;

		if (!in_column || p->paramkind != PARAM_EXTERN || p->paramid != 1)
			return false;
		out->keys = NIL;
		out->is_text = false;
		out->via_labels_column = false;
		return true;
	}
	if (IsA(node, OpExpr))
	{
		OpExpr	   *op = (OpExpr *) node;
		char	   *key;

		if ((op->opfuncid != F_JSONB_OBJECT_FIELD &&
			 op->opfuncid != F_JSONB_OBJECT_FIELD_TEXT) ||
			list_length(op->args) != 2)
			return false;
		key = const_text(lsecond(op->args));
		if (key == NULL || !expr_path(linitial(op->args), ctx, in_column, out) ||
			out->is_text)
			return false;
		out->keys = lappend(list_copy(out->keys), key);
		out->is_text = (op->opfuncid == F_JSONB_OBJECT_FIELD_TEXT);
		return true;
	}
	if (IsA(node, CoalesceExpr) && in_column)
	{
		/* COALESCE(object->'metadata'->'labels', '{}'): the labels column */
		CoalesceExpr *c = (CoalesceExpr *) node;
		Node	   *dflt = list_length(c->args) == 2 ? lsecond(c->args) : NULL;

		if (dflt && IsA(dflt, Const) && !((Const *) dflt)->constisnull &&
			((Const *) dflt)->consttype == JSONBOID &&
			JB_ROOT_IS_OBJECT(DatumGetJsonbP(((Const *) dflt)->constvalue)) &&
			JB_ROOT_COUNT(DatumGetJsonbP(((Const *) dflt)->constvalue)) == 0 &&
			expr_path(linitial(c->args), ctx, in_column, out) && !out->is_text)
		{
			out->via_labels_column = true;
			return true;
		}
		return false;
	}
	return false;
}

static bool
path_is(JsonPath *p, const char *a, const char *b)
{
	return list_length(p->keys) == 2 &&
		strcmp(linitial(p->keys), a) == 0 && strcmp(lsecond(p->keys), b) == 0;
}

/* The label key of path metadata.labels.<key>, or NULL. */
static char *
label_key_of(JsonPath *p)
{
	if (list_length(p->keys) == 3 && p->is_text &&
		strcmp(linitial(p->keys), "metadata") == 0 &&
		strcmp(lsecond(p->keys), "labels") == 0)
		return (char *) lthird(p->keys);
	return NULL;
}

static bool
is_labels_object(JsonPath *p)
{
	return !p->is_text && path_is(p, "metadata", "labels");
}

/* name: at most `max` of [A-Za-z0-9_.-], alphanumeric at both ends (or empty if allowed). */
static bool
valid_label_name(const char *s, int max, bool allow_empty)
{
	int			n = strlen(s);

	if (n == 0)
		return allow_empty;
	if (n > max || !kw_ascii_alnum(s[0]) || !kw_ascii_alnum(s[n - 1]))
		return false;
	for (int i = 0; i < n; i++)
		if (!kw_ascii_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
			return false;
	return true;
}

/*
 * valid_label_key: a qualified name, [prefix/]name, with a DNS-subdomain
 * prefix (validation.IsQualifiedName, IsDNS1123Subdomain: dot-separated
 * labels of [a-z0-9-], each starting and ending alphanumeric).  The server
 * rejects a selector with any other key (400), so such keys stay local.
 */
static bool
valid_label_key(const char *key)
{
	const char *slash = strchr(key, '/');
	const char *label;

	if (slash == NULL)
		return valid_label_name(key, 63, false);
	if (slash == key || slash - key > 253 || strchr(slash + 1, '/'))
		return false;
	label = key;
	for (const char *p = key; p <= slash; p++)
	{
		if (p == slash || *p == '.')
		{
			/* the label [label, p) must be non-empty, alphanumeric at both ends */
			if (p == label || p[-1] == '-' || *label == '-')
				return false;
			label = p + 1;
		}
		else if (!(kw_ascii_lower(*p) || kw_ascii_digit(*p) ||
				   *p == '-'))
			return false;
	}
	return valid_label_name(slash + 1, 63, false);
}

static bool
valid_label_value(const char *v)
{
	return valid_label_name(v, 63, true);
}

/* The dotted field path of p if the resource supports it as a field selector. */
static char *
field_of(JsonPath *p, DeparseCtx *ctx)
{
	StringInfoData s;
	ListCell   *lc;

	if (!p->is_text || p->keys == NIL)
		return NULL;
	initStringInfo(&s);
	foreach(lc, p->keys)
	{
		const char *k = (const char *) lfirst(lc);

		if (k[0] == '\0' || strpbrk(k, ".,=!\\ ") != NULL)
			return NULL;
		if (s.len > 0)
			appendStringInfoChar(&s, '.');
		appendStringInfoString(&s, k);
	}
	if (strcmp(s.data, "metadata.name") == 0)
		return s.data;
	if (strcmp(s.data, "metadata.namespace") == 0)
		return ctx->table->namespaced ? s.data : NULL;
	for (const FieldSupport *f = field_support; f->field; f++)
		if (strcmp(f->api_group, ctx->table->api_group) == 0 &&
			strcmp(f->plural, ctx->table->plural) == 0 &&
			strcmp(f->field, s.data) == 0)
			return s.data;
	return NULL;
}

/* field selector value escaping (fields.EscapeValue): \ , = */
static char *
escape_field_value(const char *v)
{
	StringInfoData s;

	initStringInfo(&s);
	for (; *v; v++)
	{
		if (*v == '\\' || *v == ',' || *v == '=')
			appendStringInfoChar(&s, '\\');
		appendStringInfoChar(&s, *v);
	}
	return s.data;
}

/* Text comparisons are only pushed with a deterministic collation. */
static bool
collation_ok(Oid collid)
{
	return !OidIsValid(collid) || collid == C_COLLATION_OID ||
		collid == DEFAULT_COLLATION_OID || get_collation_isdeterministic(collid);
}

/*
 * param_text: `node` as a text query parameter (PARAM_EXTERN, a generic
 * plan's $1) or a subquery's result (PARAM_EXEC), known only at execution.
 */
static Param *
param_text(Node *node)
{
	if (node && IsA(node, RelabelType))
		node = (Node *) ((RelabelType *) node)->arg;
	if (node && IsA(node, Param) &&
		(((Param *) node)->paramkind == PARAM_EXTERN ||
		 ((Param *) node)->paramkind == PARAM_EXEC) &&
		(((Param *) node)->paramtype == TEXTOID ||
		 ((Param *) node)->paramtype == VARCHAROID))
		return (Param *) node;
	return NULL;
}

/*
 * placeholder: a marker for the value of `param` in a term, bound at
 * execution by kw_live_bind: \x01 <kind> <index into param_exprs> \x02.
 */
static char *
placeholder(KwLiveRequest *req, Param *param, char kind)
{
	req->param_exprs = lappend(req->param_exprs, param);
	return psprintf("\x01%c%d\x02", kind, list_length(req->param_exprs) - 1);
}

/*
 * comparison_term: a text = / <> between an object path and a constant or
 * a parameter.  Returns false when it can't be sent.
 */
static bool
comparison_term(OpExpr *op, DeparseCtx *ctx, KwLiveRequest *req, bool *exact)
{
	Node	   *l = linitial(op->args),
			   *r = lsecond(op->args);
	JsonPath	p;
	char	   *value;
	Param	   *param = NULL;
	bool		eq = (op->opfuncid == F_TEXTEQ);
	char	   *key;
	char	   *field;

	if (!collation_ok(op->inputcollid))
		return false;
	value = const_text(r);
	param = value ? NULL : param_text(r);
	if ((value == NULL && param == NULL) || !expr_path(l, ctx, false, &p))
	{
		value = const_text(l);
		param = value ? NULL : param_text(l);
		if ((value == NULL && param == NULL) || !expr_path(r, ctx, false, &p))
			return false;
	}
	if (!p.is_text || (value && strchr(value, '\x01')))
		return false;

	if ((key = label_key_of(&p)) != NULL)
	{
		if (!valid_label_key(key))
			return false;
		if (param)
			value = placeholder(req, param, 'L');
		else if (!valid_label_value(value) || (eq && value[0] == '\0'))
			return false;
		req->label_terms = lappend(req->label_terms,
								   psprintf("%s%s%s", key, eq ? "=" : "!=", value));
		*exact = eq;			/* k!=v also matches objects without k */
		return true;
	}
	if (eq && path_is(&p, "metadata", "namespace") && ctx->table->namespaced &&
		req->namespace == NULL &&
		(param || (value[0] != '\0' && valid_label_name(value, 63, false))))
	{
		req->namespace = param ? placeholder(req, param, 'N') : pstrdup(value);
		*exact = true;
		return true;
	}
	if ((field = field_of(&p, ctx)) != NULL)
	{
		bool		meta = strncmp(field, "metadata.", 9) == 0;

		/* a missing field compares as "": only "= nonempty" is safe */
		if (!param && eq && value[0] == '\0' && !meta)
			return false;
		req->field_terms = lappend(req->field_terms,
								   psprintf("%s%s%s", field, eq ? "=" : "!=",
											param ? placeholder(req, param, eq && !meta ? 'E' : 'F') :
											escape_field_value(value)));
		if (eq && strcmp(field, "metadata.name") == 0)
			req->by_name = true;
		/* metadata.name/namespace are always present; other fields may be absent */
		*exact = meta;
		return true;
	}
	return false;
}

/*
 * kw_live_bind: `tmpl` (a term or namespace from kw_classify_conditions)
 * with its placeholders replaced by the parameter values (text datums;
 * values[i]/nulls[i] for param_exprs[i]), or, for display (values NULL),
 * by "$<paramid>".  Sets *drop when the term can't be sent with this value
 * (an invalid label value or namespace, "" for a field that may be missing:
 * the filter alone decides then), and *none when no row can match (a NULL
 * compared with = or <> is never true), in which case no request is needed.
 */
char *
kw_live_bind(const char *tmpl, List *param_exprs, Datum *values, bool *nulls,
			 bool *drop, bool *none)
{
	StringInfoData s;

	*drop = false;
	initStringInfo(&s);
	for (const char *c = tmpl; *c; c++)
	{
		char		kind;
		int			idx;
		char	   *v;

		if (*c != '\x01')
		{
			appendStringInfoChar(&s, *c);
			continue;
		}
		kind = c[1];
		idx = atoi(c + 2);
		c = strchr(c, '\x02');
		Assert(c != NULL && idx < list_length(param_exprs));
		if (values == NULL)
		{
			appendStringInfo(&s, "$%d", ((Param *) list_nth(param_exprs, idx))->paramid);
			continue;
		}
		if (nulls[idx])
		{
			*none = true;
			*drop = true;
			continue;
		}
		v = TextDatumGetCString(values[idx]);
		if ((kind == 'L' && (!valid_label_value(v) || v[0] == '\0')) ||
			(kind == 'N' && !valid_label_name(v, 63, false)) ||
			(kind == 'E' && v[0] == '\0'))
			*drop = true;
		appendStringInfoString(&s, kind == 'E' || kind == 'F' ? escape_field_value(v) : v);
	}
	return s.data;
}

/* labels->>'k' IN (...) / NOT IN (...) */
static bool
in_list_term(ScalarArrayOpExpr *sa, DeparseCtx *ctx, KwLiveRequest *req,
			 bool *exact)
{
	JsonPath	p;
	Const	   *arr;
	char	   *key;
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	StringInfoData s;

	if (!((sa->useOr && sa->opfuncid == F_TEXTEQ) ||
		  (!sa->useOr && sa->opfuncid == F_TEXTNE)) ||
		!collation_ok(sa->inputcollid) || list_length(sa->args) != 2)
		return false;
	arr = (Const *) lsecond(sa->args);
	if (!IsA(arr, Const) || arr->constisnull ||
		ARR_ELEMTYPE(DatumGetArrayTypeP(arr->constvalue)) != TEXTOID ||
		!expr_path(linitial(sa->args), ctx, false, &p) || !p.is_text)
		return false;
	deconstruct_array(DatumGetArrayTypeP(arr->constvalue), TEXTOID, -1, false,
					  TYPALIGN_INT, &elems, &nulls, &n);
	if (n == 0)
		return false;

	/*
	 * namespace IN (...): one LIST per namespace (the namespaces are disjoint,
	 * so the union has no duplicates); at most KW_MAX_NAMESPACE_LISTS.
	 */
	if (sa->useOr && path_is(&p, "metadata", "namespace") &&
		ctx->table->namespaced && req->namespace == NULL &&
		req->namespaces == NIL && n <= KW_MAX_NAMESPACE_LISTS)
	{
		List	   *nss = NIL;

		for (int i = 0; i < n; i++)
		{
			char	   *v;

			if (nulls[i])
				return false;
			v = TextDatumGetCString(elems[i]);
			if (!valid_label_name(v, 63, false))
				return false;
			if (!list_member(nss, makeString(v)))
				nss = lappend(nss, makeString(v));
		}
		req->namespaces = nss;
		*exact = true;
		return true;
	}
	if ((key = label_key_of(&p)) == NULL || !valid_label_key(key))
		return false;
	initStringInfo(&s);
	appendStringInfo(&s, "%s %s (", key, sa->useOr ? "in" : "notin");
	for (int i = 0; i < n; i++)
	{
		char	   *v;

		if (nulls[i])
			return false;		/* SQL's NULL semantics: leave it local */
		v = TextDatumGetCString(elems[i]);
		if (!valid_label_value(v) || (sa->useOr && v[0] == '\0'))
			return false;
		appendStringInfo(&s, "%s%s", i ? "," : "", v);
	}
	appendStringInfoChar(&s, ')');
	req->label_terms = lappend(req->label_terms, s.data);
	*exact = sa->useOr;
	return true;
}

/* labels ? 'k' (negated: NOT (labels ? 'k')) */
static bool
exists_term(OpExpr *op, bool negated, DeparseCtx *ctx, KwLiveRequest *req,
			bool *exact)
{
	JsonPath	p;
	char	   *key;

	if (op->opfuncid != F_JSONB_EXISTS || list_length(op->args) != 2)
		return false;
	key = const_text(lsecond(op->args));
	if (key == NULL || !valid_label_key(key) ||
		!expr_path(linitial(op->args), ctx, false, &p) || !is_labels_object(&p))
		return false;
	req->label_terms = lappend(req->label_terms,
							   psprintf("%s%s", negated ? "!" : "", key));
	/* NOT on a NULL labels object is NULL: exact only via the labels column */
	*exact = !negated || p.via_labels_column;
	return true;
}

/* labels @> '{"k":"v",...}' */
static bool
contains_term(OpExpr *op, DeparseCtx *ctx, KwLiveRequest *req, bool *exact)
{
	JsonPath	p;
	Const	   *c;
	Jsonb	   *jb;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	List	   *terms = NIL;
	char	   *key = NULL;

	if (op->opfuncid != F_JSONB_CONTAINS || list_length(op->args) != 2)
		return false;
	c = (Const *) lsecond(op->args);
	if (!IsA(c, Const) || c->constisnull || c->consttype != JSONBOID ||
		!expr_path(linitial(op->args), ctx, false, &p) || !is_labels_object(&p))
		return false;
	jb = DatumGetJsonbP(c->constvalue);
	if (!JB_ROOT_IS_OBJECT(jb) || JB_ROOT_COUNT(jb) == 0)
		return false;
	it = JsonbIteratorInit(&jb->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
			key = pnstrdup(v.val.string.val, v.val.string.len);
		else if (tok == WJB_VALUE)
		{
			char	   *val;

			if (v.type != jbvString)
				return false;
			val = pnstrdup(v.val.string.val, v.val.string.len);
			if (key == NULL || !valid_label_key(key) || !valid_label_value(val) ||
				val[0] == '\0')
				return false;
			terms = lappend(terms, psprintf("%s=%s", key, val));
		}
	}
	req->label_terms = list_concat(req->label_terms, terms);
	*exact = true;
	return true;
}

/* labels->>'k' IS [NOT] NULL */
static bool
null_test_term(NullTest *nt, DeparseCtx *ctx, KwLiveRequest *req, bool *exact)
{
	JsonPath	p;
	char	   *key;

	if (nt->argisrow || !expr_path((Node *) nt->arg, ctx, false, &p) ||
		(key = label_key_of(&p)) == NULL || !valid_label_key(key))
		return false;
	req->label_terms = lappend(req->label_terms,
							   psprintf("%s%s", nt->nulltesttype == IS_NULL ? "!" : "", key));
	*exact = true;
	return true;
}

/* clause_term: turns one clause into request terms; false if it can't. */
static bool
clause_term(Expr *clause, DeparseCtx *ctx, KwLiveRequest *req, bool *exact)
{
	*exact = false;
	if (IsA(clause, OpExpr))
	{
		OpExpr	   *op = (OpExpr *) clause;

		if (list_length(op->args) != 2)
			return false;
		if (op->opfuncid == F_TEXTEQ || op->opfuncid == F_TEXTNE)
			return comparison_term(op, ctx, req, exact);
		if (op->opfuncid == F_JSONB_EXISTS)
			return exists_term(op, false, ctx, req, exact);
		if (op->opfuncid == F_JSONB_CONTAINS)
			return contains_term(op, ctx, req, exact);
		return false;
	}
	if (IsA(clause, ScalarArrayOpExpr))
		return in_list_term((ScalarArrayOpExpr *) clause, ctx, req, exact);
	if (IsA(clause, NullTest))
		return null_test_term((NullTest *) clause, ctx, req, exact);
	if (is_notclause(clause))
	{
		Expr	   *arg = get_notclausearg(clause);

		if (IsA(arg, OpExpr) && ((OpExpr *) arg)->opfuncid == F_JSONB_EXISTS)
			return exists_term((OpExpr *) arg, true, ctx, req, exact);
	}
	return false;
}

/*
 * kw_classify_conditions: turns the restriction clauses of `baserel` (a live
 * table resolved as `table`) into the request *req: namespace segment,
 * label and field selector terms, the clauses that were pushed, and whether
 * every clause was pushed exactly.  Never ERRORs on a clause it does not
 * understand: that clause is simply evaluated locally.  Clauses that
 * contain a volatile function or a parameter are never pushed.
 */
void
kw_classify_conditions(PlannerInfo *root, RelOptInfo *baserel,
					   KwLiveTable *table, KwLiveRequest *req)
{
	DeparseCtx	ctx;
	ListCell   *lc;

	memset(req, 0, sizeof(*req));
	req->all_exact = true;
	req->namespace = table->namespace;
	ctx.root = root;
	ctx.baserel = baserel;
	ctx.table = table;

	foreach(lc, baserel->baserestrictinfo)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);
		bool		exact = false;
		bool		had_namespaces = (req->namespaces != NIL);

		/* clause_term adds terms only when it succeeds */
		if (contain_volatile_functions((Node *) ri->clause) ||
			!clause_term(ri->clause, &ctx, req, &exact))
		{
			req->all_exact = false;
			continue;
		}
		req->pushed_quals = lappend(req->pushed_quals, ri);
		/* namespace = 'x' after namespace IN (...): the path wins */
		if (had_namespaces && req->namespace != NULL)
		{
			req->namespaces = NIL;
			req->namespace_qual = NULL;
		}
		if (((req->namespace != NULL && req->namespace[0] != '\x01') ||
			 req->namespaces != NIL) &&
			req->namespace_qual == NULL && table->namespace == NULL)
			req->namespace_qual = ri;
		if (!exact)
			req->all_exact = false;
	}
}

/*
 * kw_live_path: the collection path of `table` (PROTOCOL 1): /api/v1[...]
 * or /apis/<group>/<version>[/namespaces/<ns>]/<plural>.
 */
char *
kw_live_path(KwLiveTable *table, const char *namespace)
{
	StringInfoData s;

	initStringInfo(&s);
	if (table->api_group[0] == '\0')
		appendStringInfo(&s, "/api/%s", table->api_version);
	else
		appendStringInfo(&s, "/apis/%s/%s", table->api_group, table->api_version);
	if (namespace && table->namespaced)
		appendStringInfo(&s, "/namespaces/%s", namespace);
	appendStringInfo(&s, "/%s", table->plural);
	return s.data;
}

/* kw_live_selector: terms joined with "," (AND), or NULL for none. */
char *
kw_live_selector(List *terms)
{
	StringInfoData s;
	ListCell   *lc;

	if (terms == NIL)
		return NULL;
	initStringInfo(&s);
	foreach(lc, terms)
	{
		if (s.len > 0)
			appendStringInfoChar(&s, ',');
		appendStringInfoString(&s, (char *) lfirst(lc));
	}
	return s.data;
}

/*
 * kw_live_request_text: "path?labelSelector=..&fieldSelector=..&limit=n",
 * the first page's request.  With `encode` the values are percent-encoded
 * (the real URL); without, they are shown as written (EXPLAIN).
 */
char *
kw_live_request_text(const char *path, const char *labels,
					 const char *fields, int limit, bool encode)
{
	StringInfoData s;
	char		num[32];
	const char *keys[3] = {"labelSelector", "fieldSelector", "limit"};
	const char *vals[3];

	snprintf(num, sizeof(num), "%d", limit);
	vals[0] = labels && labels[0] ? labels : NULL;
	vals[1] = fields && fields[0] ? fields : NULL;
	vals[2] = limit > 0 ? num : NULL;
	initStringInfo(&s);
	appendStringInfoString(&s, path);
	for (int i = 0; i < 3; i++)
	{
		if (vals[i] == NULL)
			continue;
		if (encode)
			kw_url_append_param(&s, keys[i], vals[i]);
		else
			appendStringInfo(&s, "%c%s=%s", strchr(s.data, '?') ? '&' : '?',
							 keys[i], vals[i]);
	}
	return s.data;
}
