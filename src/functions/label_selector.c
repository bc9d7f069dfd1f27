/*-------------------------------------------------------------------------
 *
 * label_selector.c
 *		Kubernetes label selectors in SQL: kwatch.matches_labels().
 *
 * kwatch.matches_labels(labels jsonb, selector text) is `kubectl get -l`'s
 * selector: the string grammar of k8s.io/apimachinery/pkg/labels/
 * selector.go (Lexer, Parser, NewRequirement; the keys and values checked
 * by pkg/util/validation's IsQualifiedName and IsValidLabelValue), with
 * its matching (Requirement.Matches: `!=` and `notin` match an object
 * without the key) and its error messages, word for word.
 *
 * kwatch.matches_labels(labels jsonb, selector jsonb) is a metav1
 * LabelSelector (a Deployment's spec.selector, a NetworkPolicy's
 * podSelector): matchLabels and matchExpressions, as pkg/apis/meta/v1/
 * helpers.go LabelSelectorAsSelector reads them (`{}` matches everything,
 * a JSON or SQL null nothing).
 *
 * Both parse a selector once per call site (cached in fn_extra while the
 * selector stays the same).  kwatch_matches_labels_support is their
 * planner support function: a constant selector's equalities (`=`, `==`,
 * `in` of one value, matchLabels) become `labels @> '{...}'`, which the
 * mirror tables' GIN index (jsonb_path_ops) serves, beside a call for the
 * rest of the selector; a selector that is no constant (a join's, a
 * parameter) gets the lossy index condition `labels @>
 * kwatch._label_selector_equalities(selector)`.
 *
 * An invalid selector is ERROR 22023 (invalid_parameter_value), its
 * message apimachinery's, its DETAIL the selector and the character where
 * the parser stopped; what they echo of the selector is cut to
 * KW_ECHO_MAX bytes (kw_excerpt), as every kwatch message that echoes
 * user input.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/pathnodes.h"
#include "nodes/supportnodes.h"
#include "optimizer/optimizer.h"
#include "parser/parse_func.h"
#include "parser/parse_oper.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "kw_http.h"

/* selection.Operator (k8s.io/apimachinery/pkg/selection/operator.go) */
typedef enum SelOp
{
	SEL_IN,
	SEL_NOTIN,
	SEL_EQUALS,
	SEL_DOUBLE_EQUALS,
	SEL_NOT_EQUALS,
	SEL_EXISTS,
	SEL_DOES_NOT_EXIST,
	SEL_GREATER_THAN,
	SEL_LESS_THAN
} SelOp;

/* labels.Requirement: a key, an operator, values (Gt/Lt: one, as int) */
typedef struct SelRequirement
{
	char	   *key;
	SelOp		op;
	int			nvalues;
	char	  **values;
	int64		number;			/* SEL_GREATER_THAN, SEL_LESS_THAN */
} SelRequirement;

/* a parsed selector: labels.Nothing() when nothing, else AND of reqs */
typedef struct LabelSelector
{
	bool		nothing;
	int			nreqs;
	SelRequirement *reqs;
} LabelSelector;

/* what went wrong, in apimachinery's words, and where (byte offset) */
typedef struct SelError
{
	char	   *message;
	int			offset;			/* -1: no position (a LabelSelector) */
} SelError;

/* ---------------------------------------------------------------------
 * util/validation: IsQualifiedName, IsValidLabelValue
 * --------------------------------------------------------------------- */

#define QNAME_FMT "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
#define QNAME_MSG "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
#define QNAME_REGEX_ERROR QNAME_MSG " (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '" QNAME_FMT "')"
#define DNS1123_SUBDOMAIN_FMT "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
#define DNS1123_SUBDOMAIN_ERROR "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '" DNS1123_SUBDOMAIN_FMT "')"
#define LABEL_VALUE_FMT "(" QNAME_FMT ")?"
#define LABEL_VALUE_ERROR "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '" LABEL_VALUE_FMT "')"

static bool
is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* ^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$ */
static bool
qualified_name_ok(const char *s, int len)
{
	int			i;

	if (len == 0 || !is_alnum(s[0]) || !is_alnum(s[len - 1]))
		return false;
	for (i = 1; i < len - 1; i++)
		if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
			return false;
	return true;
}

/* ^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$ */
static bool
dns1123_subdomain_ok(const char *s, int len)
{
	int			start = 0;
	int			i;

	for (i = 0; i <= len; i++)
	{
		if (i == len || s[i] == '.')
		{
			int			n = i - start;
			int			j;

			if (n == 0)
				return false;
			for (j = start; j < i; j++)
			{
				char		c = s[j];
				bool		lower_alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');

				if (!lower_alnum && (c != '-' || j == start || j == i - 1))
					return false;
			}
			start = i + 1;
		}
	}
	return true;
}

/* appends `s` quoted as Go's %q (strconv.Quote) writes it */
static void
append_go_quoted(StringInfo buf, const char *s)
{
	appendStringInfoChar(buf, '"');
	for (; *s; s++)
	{
		unsigned char c = (unsigned char) *s;

		switch (c)
		{
			case '"':
				appendStringInfoString(buf, "\\\"");
				break;
			case '\\':
				appendStringInfoString(buf, "\\\\");
				break;
			case '\a':
				appendStringInfoString(buf, "\\a");
				break;
			case '\b':
				appendStringInfoString(buf, "\\b");
				break;
			case '\f':
				appendStringInfoString(buf, "\\f");
				break;
			case '\n':
				appendStringInfoString(buf, "\\n");
				break;
			case '\r':
				appendStringInfoString(buf, "\\r");
				break;
			case '\t':
				appendStringInfoString(buf, "\\t");
				break;
			case '\v':
				appendStringInfoString(buf, "\\v");
				break;
			default:
				if (c < 0x20 || c == 0x7f)
					appendStringInfo(buf, "\\x%02x", c);
				else
					appendStringInfoChar(buf, (char) c);
		}
	}
	appendStringInfoChar(buf, '"');
}

/*
 * label_key_error: NULL when `key` is a label key (IsQualifiedName), else
 * validateLabelKey's message: invalid label key "k": <errors joined by "; ">.
 */
static char *
label_key_error(const char *key)
{
	StringInfoData errs;
	StringInfoData msg;
	const char *slash = strchr(key, '/');
	const char *name = key;
	int			len = strlen(key);

	initStringInfo(&errs);
	if (slash && strchr(slash + 1, '/'))
		appendStringInfoString(&errs, "a qualified name " QNAME_REGEX_ERROR
							   " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')");
	else
	{
		if (slash)
		{
			int			plen = slash - key;

			if (plen == 0)
				appendStringInfoString(&errs, "prefix part must be non-empty");
			else
			{
				if (plen > 253)
					appendStringInfoString(&errs, "prefix part must be no more than 253 characters");
				if (!dns1123_subdomain_ok(key, plen))
					appendStringInfo(&errs, "%sprefix part " DNS1123_SUBDOMAIN_ERROR,
									 errs.len ? "; " : "");
			}
			name = slash + 1;
		}
		len = strlen(name);
		if (len == 0)
			appendStringInfo(&errs, "%sname part must be non-empty", errs.len ? "; " : "");
		else if (len > 63)
			appendStringInfo(&errs, "%sname part must be no more than 63 characters",
							 errs.len ? "; " : "");
		if (!qualified_name_ok(name, len))
			appendStringInfo(&errs, "%sname part " QNAME_REGEX_ERROR, errs.len ? "; " : "");
	}
	if (errs.len == 0)
		return NULL;
	initStringInfo(&msg);
	appendStringInfoString(&msg, "invalid label key ");
	append_go_quoted(&msg, kw_excerpt(key));
	appendStringInfo(&msg, ": %s", errs.data);
	return msg.data;
}

/*
 * label_value_error: NULL when `value` is a label value (IsValidLabelValue),
 * else validateLabelValue's message.
 */
static char *
label_value_error(const char *key, const char *value)
{
	StringInfoData msg;
	int			len = strlen(value);
	bool		too_long = len > 63;
	bool		bad = len > 0 && !qualified_name_ok(value, len);

	if (!too_long && !bad)
		return NULL;
	initStringInfo(&msg);
	appendStringInfoString(&msg, "invalid label value: ");
	append_go_quoted(&msg, kw_excerpt(value));
	appendStringInfoString(&msg, ": at key: ");
	append_go_quoted(&msg, kw_excerpt(key));
	appendStringInfoString(&msg, ": ");
	if (too_long)
		appendStringInfoString(&msg, "must be no more than 63 characters");
	if (bad)
		appendStringInfo(&msg, "%s" LABEL_VALUE_ERROR, too_long ? "; " : "");
	return msg.data;
}

/* strconv.ParseInt(s, 10, 64): optional sign, decimal digits, no overflow */
static bool
parse_int64(const char *s, int len, int64 *result)
{
	bool		neg = false;
	uint64		v = 0;
	uint64		limit;
	int			i = 0;

	if (len > 0 && (s[0] == '+' || s[0] == '-'))
	{
		neg = s[0] == '-';
		i = 1;
	}
	if (i == len)
		return false;
	limit = neg ? (uint64) PG_INT64_MAX + 1 : (uint64) PG_INT64_MAX;
	for (; i < len; i++)
	{
		if (s[i] < '0' || s[i] > '9')
			return false;
		if (v > (limit - (s[i] - '0')) / 10)
			return false;
		v = v * 10 + (s[i] - '0');
	}
	*result = neg ? (int64) (0 - v) : (int64) v;
	return true;
}

/*
 * new_requirement: labels.NewRequirement(key, op, vals): NULL and *req set,
 * or its error message.  The values are taken as given (the string parser
 * passes them sorted and without duplicates, as sets.String.List()).
 */
static char *
new_requirement(SelRequirement *req, char *key, SelOp op, char **values, int nvalues)
{
	char	   *err;
	int			i;

	if ((err = label_key_error(key)) != NULL)
		return err;
	switch (op)
	{
		case SEL_IN:
		case SEL_NOTIN:
			if (nvalues == 0)
				return pstrdup("for 'in', 'notin' operators, values set can't be empty");
			break;
		case SEL_EQUALS:
		case SEL_DOUBLE_EQUALS:
		case SEL_NOT_EQUALS:
			if (nvalues != 1)
				return pstrdup("exact-match compatibility requires one single value");
			break;
		case SEL_EXISTS:
		case SEL_DOES_NOT_EXIST:
			if (nvalues != 0)
				return pstrdup("values set must be empty for exists and does not exist");
			break;
		case SEL_GREATER_THAN:
		case SEL_LESS_THAN:
			if (nvalues != 1)
				return pstrdup("for 'Gt', 'Lt' operators, exactly one value is required");
			if (!parse_int64(values[0], strlen(values[0]), &req->number))
				return pstrdup("for 'Gt', 'Lt' operators, the value must be an integer");
			break;
	}
	for (i = 0; i < nvalues; i++)
		if ((err = label_value_error(key, values[i])) != NULL)
			return err;
	req->key = key;
	req->op = op;
	req->values = values;
	req->nvalues = nvalues;
	return NULL;
}

/* ---------------------------------------------------------------------
 * labels/selector.go: Lexer and Parser
 * --------------------------------------------------------------------- */

typedef enum SelToken
{
	TOK_ERROR,
	TOK_EOS,
	TOK_CLOSED_PAR,
	TOK_COMMA,
	TOK_DOES_NOT_EXIST,
	TOK_DOUBLE_EQUALS,
	TOK_EQUALS,
	TOK_GREATER_THAN,
	TOK_IDENTIFIER,
	TOK_IN,
	TOK_LESS_THAN,
	TOK_NOT_EQUALS,
	TOK_NOT_IN,
	TOK_OPEN_PAR
} SelToken;

typedef struct ScannedItem
{
	SelToken	tok;
	char	   *literal;
	int			offset;			/* byte offset of the token in the selector */
} ScannedItem;

typedef struct SelParser
{
	ScannedItem *items;
	int			nitems;
	int			position;
	SelError   *error;
} SelParser;

static bool
is_whitespace(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static bool
is_special_symbol(char c)
{
	return c == '=' || c == '!' || c == '(' || c == ')' || c == ',' || c == '>' || c == '<';
}

/* string2token: the token a literal is, TOK_IDENTIFIER if none */
static SelToken
string2token(const char *s, int len)
{
	static const struct
	{
		const char *lit;
		SelToken	tok;
	}			map[] = {
		{")", TOK_CLOSED_PAR}, {",", TOK_COMMA}, {"!", TOK_DOES_NOT_EXIST},
		{"==", TOK_DOUBLE_EQUALS}, {"=", TOK_EQUALS}, {">", TOK_GREATER_THAN},
		{"in", TOK_IN}, {"<", TOK_LESS_THAN}, {"!=", TOK_NOT_EQUALS},
		{"notin", TOK_NOT_IN}, {"(", TOK_OPEN_PAR}
	};
	int			i;

	for (i = 0; i < lengthof(map); i++)
		if (strlen(map[i].lit) == len && memcmp(map[i].lit, s, len) == 0)
			return map[i].tok;
	return TOK_IDENTIFIER;
}

/* Parser.scan: every token of `s` (Lexer.Lex until the end of string) */
static void
sel_scan(SelParser *p, const char *s, int len)
{
	int			pos = 0;
	int			cap = 8;

	p->items = palloc(cap * sizeof(ScannedItem));
	p->nitems = 0;
	for (;;)
	{
		ScannedItem it;
		int			start;

		while (pos < len && is_whitespace(s[pos]))
			pos++;
		start = pos;
		it.offset = start;
		if (pos >= len)
		{
			it.tok = TOK_EOS;
			it.literal = "";
		}
		else if (is_special_symbol(s[pos]))
		{
			/* scanSpecialSymbol: the longest run of symbols that is a token */
			SelToken	last = TOK_ERROR;
			int			lastlen = 0;

			while (pos < len && is_special_symbol(s[pos]))
			{
				SelToken	t = string2token(s + start, pos - start + 1);

				if (t != TOK_IDENTIFIER)
				{
					last = t;
					lastlen = pos - start + 1;
				}
				else if (last != TOK_ERROR)
					break;
				pos++;
			}
			if (last == TOK_ERROR)
			{
				it.tok = TOK_ERROR;
				it.literal = psprintf("error expected: keyword found '%s'",
									  pnstrdup(s + start, pos - start));
			}
			else
			{
				pos = start + lastlen;
				it.tok = last;
				it.literal = pnstrdup(s + start, lastlen);
			}
		}
		else
		{
			/* scanIDOrKeyword */
			while (pos < len && !is_special_symbol(s[pos]) && !is_whitespace(s[pos]))
				pos++;
			it.literal = pnstrdup(s + start, pos - start);
			it.tok = string2token(s + start, pos - start);
		}
		if (p->nitems == cap)
		{
			cap *= 2;
			p->items = repalloc(p->items, cap * sizeof(ScannedItem));
		}
		p->items[p->nitems++] = it;
		if (it.tok == TOK_EOS)
			break;
	}
}

/* Parser.lookahead / consume: in the Values context, in and notin are identifiers */
static ScannedItem *
sel_peek(SelParser *p, bool values, SelToken *tok)
{
	ScannedItem *it = &p->items[Min(p->position, p->nitems - 1)];

	*tok = it->tok;
	if (values && (*tok == TOK_IN || *tok == TOK_NOT_IN))
		*tok = TOK_IDENTIFIER;
	return it;
}

static ScannedItem *
sel_consume(SelParser *p, bool values, SelToken *tok)
{
	ScannedItem *it = sel_peek(p, values, tok);

	if (p->position < p->nitems - 1)
		p->position++;
	return it;
}

/* sets an error at the token `it`; returns false */
static bool
sel_fail(SelParser *p, ScannedItem *it, char *message)
{
	p->error->message = message;
	p->error->offset = it->offset;
	return false;
}

static int
cmp_cstring(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/* a sets.String's List(): sorted, without duplicates */
static int
sort_unique(char **values, int n)
{
	int			i,
				out = 0;

	if (n == 0)
		return 0;
	qsort(values, n, sizeof(char *), cmp_cstring);
	for (i = 0; i < n; i++)
		if (out == 0 || strcmp(values[out - 1], values[i]) != 0)
			values[out++] = values[i];
	return out;
}

/* appends a value to the growing array *values of *n (capacity *cap) */
static void
push_value(char ***values, int *n, int *cap, char *value)
{
	if (*n == *cap)
	{
		*cap *= 2;
		*values = repalloc(*values, *cap * sizeof(char *));
	}
	(*values)[(*n)++] = value;
}

/* parseIdentifiersList, after `(`: values appended to *values */
static bool
sel_parse_identifiers(SelParser *p, char ***values, int *n, int *cap)
{
	for (;;)
	{
		SelToken	tok,
					tok2;
		ScannedItem *it = sel_consume(p, true, &tok);
		ScannedItem *it2;

		switch (tok)
		{
			case TOK_IDENTIFIER:
				push_value(values, n, cap, it->literal);
				it2 = sel_peek(p, true, &tok2);
				if (tok2 == TOK_COMMA)
					continue;
				if (tok2 == TOK_CLOSED_PAR)
					return true;
				return sel_fail(p, it2, psprintf("found '%s', expected: ',' or ')'",
													kw_excerpt(it2->literal)));
			case TOK_COMMA:
				if (*n == 0)
					push_value(values, n, cap, "");
				sel_peek(p, true, &tok2);
				if (tok2 == TOK_CLOSED_PAR)
				{
					push_value(values, n, cap, "");
					return true;
				}
				if (tok2 == TOK_COMMA)
				{
					sel_consume(p, true, &tok2);
					push_value(values, n, cap, "");
				}
				break;
			default:
				return sel_fail(p, it, psprintf("found '%s', expected: ',', or identifier",
													kw_excerpt(it->literal)));
		}
	}
}

/* parseRequirement: one requirement into *req */
static bool
sel_parse_requirement(SelParser *p, SelRequirement *req)
{
	SelToken	tok;
	ScannedItem *it;
	ScannedItem *keyitem;
	SelOp		op = SEL_IN;
	bool		unary = false;
	char	  **values;
	int			nvalues = 0;
	int			cap = 4;
	char	   *err;

	/* parseKeyAndInferOperator */
	it = sel_consume(p, true, &tok);
	if (tok == TOK_DOES_NOT_EXIST)
	{
		op = SEL_DOES_NOT_EXIST;
		unary = true;
		it = sel_consume(p, true, &tok);
	}
	if (tok != TOK_IDENTIFIER)
		return sel_fail(p, it, psprintf("found '%s', expected: identifier",
											kw_excerpt(it->literal)));
	keyitem = it;
	if ((err = label_key_error(it->literal)) != NULL)
		return sel_fail(p, it, err);
	sel_peek(p, true, &tok);
	if (tok == TOK_EOS || tok == TOK_COMMA)
	{
		if (!unary)
			op = SEL_EXISTS;
		unary = true;
	}
	if (unary)
	{
		if ((err = new_requirement(req, keyitem->literal, op, NULL, 0)) != NULL)
			return sel_fail(p, keyitem, err);
		return true;
	}

	/* parseOperator */
	it = sel_consume(p, false, &tok);
	switch (tok)
	{
		case TOK_IN:
			op = SEL_IN;
			break;
		case TOK_EQUALS:
			op = SEL_EQUALS;
			break;
		case TOK_DOUBLE_EQUALS:
			op = SEL_DOUBLE_EQUALS;
			break;
		case TOK_GREATER_THAN:
			op = SEL_GREATER_THAN;
			break;
		case TOK_LESS_THAN:
			op = SEL_LESS_THAN;
			break;
		case TOK_NOT_IN:
			op = SEL_NOTIN;
			break;
		case TOK_NOT_EQUALS:
			op = SEL_NOT_EQUALS;
			break;
		default:
			return sel_fail(p, it, psprintf("found '%s', expected: '=', '!=', '==', 'in', notin'",
												kw_excerpt(it->literal)));
	}

	values = palloc(cap * sizeof(char *));
	if (op == SEL_IN || op == SEL_NOTIN)
	{
		/* parseValues */
		it = sel_consume(p, true, &tok);
		if (tok != TOK_OPEN_PAR)
			return sel_fail(p, it, psprintf("found '%s' expected: '('",
												kw_excerpt(it->literal)));
		it = sel_peek(p, true, &tok);
		if (tok == TOK_IDENTIFIER || tok == TOK_COMMA)
		{
			if (!sel_parse_identifiers(p, &values, &nvalues, &cap))
				return false;
			sel_consume(p, true, &tok);
			if (tok != TOK_CLOSED_PAR)
				return sel_fail(p, it, psprintf("found '%s', expected: ')'",
													kw_excerpt(it->literal)));
		}
		else if (tok == TOK_CLOSED_PAR)
		{
			sel_consume(p, true, &tok);
			push_value(&values, &nvalues, &cap, "");
		}
		else
			return sel_fail(p, it, psprintf("found '%s', expected: ',', ')' or identifier",
												kw_excerpt(it->literal)));
	}
	else
	{
		/* parseExactValue */
		sel_peek(p, true, &tok);
		if (tok == TOK_EOS || tok == TOK_COMMA)
			push_value(&values, &nvalues, &cap, "");
		else
		{
			it = sel_consume(p, true, &tok);
			if (tok != TOK_IDENTIFIER)
				return sel_fail(p, it, psprintf("found '%s', expected: identifier",
													kw_excerpt(it->literal)));
			push_value(&values, &nvalues, &cap, it->literal);
		}
	}
	nvalues = sort_unique(values, nvalues);
	if ((err = new_requirement(req, keyitem->literal, op, values, nvalues)) != NULL)
		return sel_fail(p, keyitem, err);
	return true;
}

static int
cmp_requirement_key(const void *a, const void *b)
{
	return strcmp(((const SelRequirement *) a)->key, ((const SelRequirement *) b)->key);
}

/*
 * parse_selector: labels.Parse(s) into *sel; false with *error set on an
 * invalid selector (messages as parse() and parseRequirement() write them).
 * Requirements are sorted by key (a stable sort, as sort.Sort(ByKey) is not
 * guaranteed to be, which only changes the order of equal keys).
 */
static bool
parse_selector(const char *s, int len, LabelSelector *sel, SelError *error)
{
	SelParser	p = {0};

	p.error = error;
	sel_scan(&p, s, len);
	sel->nothing = false;
	sel->nreqs = 0;
	sel->reqs = palloc(p.nitems * sizeof(SelRequirement));
	for (;;)
	{
		SelToken	tok;
		ScannedItem *it = sel_peek(&p, true, &tok);

		if (tok == TOK_EOS)
			break;
		if (tok != TOK_IDENTIFIER && tok != TOK_DOES_NOT_EXIST)
			return sel_fail(&p, it, psprintf("found '%s', expected: !, identifier, or 'end of string'",
												kw_excerpt(it->literal)));
		if (!sel_parse_requirement(&p, &sel->reqs[sel->nreqs]))
		{
			error->message = psprintf("unable to parse requirement: %s", error->message);
			return false;
		}
		sel->nreqs++;
		it = sel_consume(&p, true, &tok);
		if (tok == TOK_EOS)
			break;
		if (tok != TOK_COMMA)
			return sel_fail(&p, it, psprintf("found '%s', expected: ',' or 'end of string'",
												kw_excerpt(it->literal)));
		it = sel_peek(&p, true, &tok);
		if (tok != TOK_IDENTIFIER && tok != TOK_DOES_NOT_EXIST)
			return sel_fail(&p, it, psprintf("found '%s', expected: identifier after ','",
												kw_excerpt(it->literal)));
	}
	if (sel->nreqs > 1)
		qsort(sel->reqs, sel->nreqs, sizeof(SelRequirement), cmp_requirement_key);
	return true;
}

/* ---------------------------------------------------------------------
 * meta/v1 helpers.go: LabelSelectorAsSelector
 * --------------------------------------------------------------------- */

static JsonbValue *
object_field(JsonbContainer *c, const char *key)
{
	return getKeyJsonValueFromContainer(c, key, strlen(key), NULL);
}

static char *
jsonb_string(JsonbValue *v)
{
	return pnstrdup(v->val.string.val, v->val.string.len);
}

/* fails with a message about the LabelSelector's shape */
static bool
shape_fail(SelError *error, const char *message)
{
	error->message = pstrdup(message);
	error->offset = -1;
	return false;
}

/*
 * label_selector_from_jsonb: LabelSelectorAsSelector of a metav1
 * LabelSelector given as JSON: JSON null is labels.Nothing(), an object
 * with neither matchLabels nor matchExpressions (or both empty)
 * labels.Everything().  Fields other than these two are ignored, as
 * encoding/json ignores them.  False with *error on a value
 * NewRequirement rejects, an unknown operator, or JSON of another shape.
 */
static bool
label_selector_from_jsonb(Jsonb *jb, LabelSelector *sel, SelError *error)
{
	JsonbValue *ml = NULL;
	JsonbValue *me = NULL;
	int			nml = 0,
				nme = 0;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken r;
	char	   *err;

	sel->nothing = false;
	sel->nreqs = 0;
	sel->reqs = NULL;
	if (JB_ROOT_IS_SCALAR(jb))
	{
		JsonbValue	scalar;

		if (JsonbExtractScalar(&jb->root, &scalar) && scalar.type == jbvNull)
		{
			sel->nothing = true;
			return true;
		}
	}
	if (!JB_ROOT_IS_OBJECT(jb))
		return shape_fail(error, "a label selector must be a JSON object (with matchLabels and matchExpressions) or null");
	ml = object_field(&jb->root, "matchLabels");
	me = object_field(&jb->root, "matchExpressions");
	if (ml && ml->type == jbvNull)
		ml = NULL;
	if (me && me->type == jbvNull)
		me = NULL;
	if (ml && (ml->type != jbvBinary || !JsonContainerIsObject(ml->val.binary.data)))
		return shape_fail(error, "matchLabels must be a JSON object of label keys and values");
	if (me && (me->type != jbvBinary || !JsonContainerIsArray(me->val.binary.data)))
		return shape_fail(error, "matchExpressions must be a JSON array");
	if (ml)
		nml = JsonContainerSize(ml->val.binary.data);
	if (me)
		nme = JsonContainerSize(me->val.binary.data);
	if (nml + nme == 0)
		return true;			/* labels.Everything() */
	sel->reqs = palloc((nml + nme) * sizeof(SelRequirement));

	if (ml)
	{
		char	   *key = NULL;

		it = JsonbIteratorInit(ml->val.binary.data);
		while ((r = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
		{
			if (r == WJB_KEY)
				key = jsonb_string(&v);
			else if (r == WJB_VALUE)
			{
				char	  **values = palloc(sizeof(char *));

				if (v.type != jbvString)
					return shape_fail(error, "matchLabels must be a JSON object of label keys and values");
				values[0] = jsonb_string(&v);
				if ((err = new_requirement(&sel->reqs[sel->nreqs], key, SEL_EQUALS, values, 1)) != NULL)
				{
					error->message = err;
					error->offset = -1;
					return false;
				}
				sel->nreqs++;
			}
		}
	}
	if (me)
	{
		it = JsonbIteratorInit(me->val.binary.data);
		while ((r = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
		{
			JsonbContainer *expr;
			JsonbValue *key;
			JsonbValue *op;
			JsonbValue *vals;
			char	   *opname;
			SelOp		selop;
			char	  **values = NULL;
			int			nvalues = 0;

			if (r != WJB_ELEM)
				continue;
			if (v.type != jbvBinary || !JsonContainerIsObject(v.val.binary.data))
				return shape_fail(error, "each of matchExpressions must be a JSON object (key, operator, values)");
			expr = v.val.binary.data;
			key = object_field(expr, "key");
			op = object_field(expr, "operator");
			vals = object_field(expr, "values");
			if ((key && key->type != jbvString && key->type != jbvNull) ||
				(op && op->type != jbvString && op->type != jbvNull))
				return shape_fail(error, "a match expression's key and operator must be strings");
			opname = op && op->type == jbvString ? jsonb_string(op) : "";
			if (strcmp(opname, "In") == 0)
				selop = SEL_IN;
			else if (strcmp(opname, "NotIn") == 0)
				selop = SEL_NOTIN;
			else if (strcmp(opname, "Exists") == 0)
				selop = SEL_EXISTS;
			else if (strcmp(opname, "DoesNotExist") == 0)
				selop = SEL_DOES_NOT_EXIST;
			else
			{
				StringInfoData msg;

				initStringInfo(&msg);
				append_go_quoted(&msg, kw_excerpt(opname));
				appendStringInfoString(&msg, " is not a valid pod selector operator");
				error->message = msg.data;
				error->offset = -1;
				return false;
			}
			if (vals && vals->type != jbvNull)
			{
				JsonbIterator *vit;
				JsonbValue	vv;

				if (vals->type != jbvBinary || !JsonContainerIsArray(vals->val.binary.data))
					return shape_fail(error, "a match expression's values must be a JSON array of strings");
				values = palloc((JsonContainerSize(vals->val.binary.data) + 1) * sizeof(char *));
				vit = JsonbIteratorInit(vals->val.binary.data);
				while ((r = JsonbIteratorNext(&vit, &vv, true)) != WJB_DONE)
				{
					if (r != WJB_ELEM)
						continue;
					if (vv.type != jbvString)
						return shape_fail(error, "a match expression's values must be a JSON array of strings");
					values[nvalues++] = jsonb_string(&vv);
				}
			}
			if ((err = new_requirement(&sel->reqs[sel->nreqs],
									   key && key->type == jbvString ? jsonb_string(key) : "",
									   selop, values, nvalues)) != NULL)
			{
				error->message = err;
				error->offset = -1;
				return false;
			}
			sel->nreqs++;
		}
	}
	if (sel->nreqs > 1)
		qsort(sel->reqs, sel->nreqs, sizeof(SelRequirement), cmp_requirement_key);
	return true;
}

/* ---------------------------------------------------------------------
 * Matching: Requirement.Matches, internalSelector.Matches
 * --------------------------------------------------------------------- */

static bool
requirement_matches(SelRequirement *req, Jsonb *labels)
{
	JsonbValue	vbuf;
	JsonbValue *v = NULL;
	int			i;
	int64		n;

	if (JB_ROOT_IS_OBJECT(labels))
		v = getKeyJsonValueFromContainer(&labels->root, req->key, strlen(req->key), &vbuf);

	switch (req->op)
	{
		case SEL_IN:
		case SEL_EQUALS:
		case SEL_DOUBLE_EQUALS:
		case SEL_NOTIN:
		case SEL_NOT_EQUALS:
			{
				bool		positive = req->op == SEL_IN || req->op == SEL_EQUALS ||
					req->op == SEL_DOUBLE_EQUALS;
				bool		found = false;

				if (v == NULL)
					return !positive;
				if (v->type == jbvString)
					for (i = 0; i < req->nvalues && !found; i++)
						found = strlen(req->values[i]) == v->val.string.len &&
							memcmp(req->values[i], v->val.string.val, v->val.string.len) == 0;
				return positive ? found : !found;
			}
		case SEL_EXISTS:
			return v != NULL;
		case SEL_DOES_NOT_EXIST:
			return v == NULL;
		case SEL_GREATER_THAN:
		case SEL_LESS_THAN:
			if (v == NULL || v->type != jbvString ||
				!parse_int64(v->val.string.val, v->val.string.len, &n))
				return false;
			return req->op == SEL_GREATER_THAN ? n > req->number : n < req->number;
	}
	return false;
}

static bool
selector_matches(LabelSelector *sel, Jsonb *labels)
{
	int			i;

	if (sel->nothing)
		return false;
	for (i = 0; i < sel->nreqs; i++)
		if (!requirement_matches(&sel->reqs[i], labels))
			return false;
	return true;
}

/* appends Requirement.String() (values sorted, as safeSort does) */
static void
append_requirement(StringInfo buf, SelRequirement *req)
{
	static const char *const opstr[] = {
		[SEL_IN] = " in ", [SEL_NOTIN] = " notin ", [SEL_EQUALS] = "=",
		[SEL_DOUBLE_EQUALS] = "==", [SEL_NOT_EQUALS] = "!=", [SEL_EXISTS] = "",
		[SEL_DOES_NOT_EXIST] = "", [SEL_GREATER_THAN] = ">", [SEL_LESS_THAN] = "<"
	};
	char	  **sorted;
	int			i;

	if (req->op == SEL_DOES_NOT_EXIST)
		appendStringInfoChar(buf, '!');
	appendStringInfoString(buf, req->key);
	if (req->op == SEL_EXISTS || req->op == SEL_DOES_NOT_EXIST)
		return;
	appendStringInfoString(buf, opstr[req->op]);
	if (req->op == SEL_IN || req->op == SEL_NOTIN)
		appendStringInfoChar(buf, '(');
	sorted = palloc((req->nvalues + 1) * sizeof(char *));
	memcpy(sorted, req->values, req->nvalues * sizeof(char *));
	qsort(sorted, req->nvalues, sizeof(char *), cmp_cstring);
	for (i = 0; i < req->nvalues; i++)
		appendStringInfo(buf, "%s%s", i ? "," : "", sorted[i]);
	if (req->op == SEL_IN || req->op == SEL_NOTIN)
		appendStringInfoChar(buf, ')');
}

/* ---------------------------------------------------------------------
 * The SQL functions
 * --------------------------------------------------------------------- */

/*
 * a call site's parsed selector, kept while its selector is the same; the
 * parse lives in its own context, emptied when the selector changes (a
 * join's selector may change at every row)
 */
typedef struct SelectorCache
{
	MemoryContext cxt;
	int			len;
	char	   *bytes;
	LabelSelector sel;
} SelectorCache;

static void
report_selector_error(SelError *error, const char *selector, int len, bool is_text)
{
	if (error->offset < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s", error->message),
				 errdetail("The label selector is %s.", kw_excerpt(selector))));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("%s", error->message),
			 errdetail("The label selector \"%s\" is invalid at character %d.",
					   kw_excerpt(selector), pg_mbstrlen_with_len(selector, error->offset) + 1),
			 (len > 0 && selector[0] == '{') ?
			 errhint("A LabelSelector object (matchLabels, matchExpressions) is passed as jsonb: cast it with ::jsonb.") :
			 errhint("Label selectors are written as kubectl -l takes them: key=value, key!=value, key in (a,b), key notin (a,b), key, !key, joined by commas.")));
}

/*
 * cached_selector: the parsed selector of this call site for these bytes
 * (a text selector, or a jsonb LabelSelector when !is_text; argument
 * `argno` of the call), parsed anew into the cache's context on a change.
 * An invalid selector is ERROR 22023 when the argument is a constant or a
 * parameter (get_fn_expr_arg_stable: the query's author wrote it), and a
 * selector that selects nothing otherwise: one computed from a row (a
 * column, a join's) must raise no error that shows the row's value, so
 * that the functions can be LEAKPROOF and keep their index under
 * row-level security (optimizer/util/restrictinfo.c,
 * restriction_is_securely_promotable; src/functions/rbac_rows.c).
 */
static LabelSelector *
cached_selector(FunctionCallInfo fcinfo, const char *bytes, int len, Datum d, bool is_text,
				int argno)
{
	SelectorCache *cache = (SelectorCache *) fcinfo->flinfo->fn_extra;
	MemoryContext old;
	SelError	error = {0};
	LabelSelector sel;
	bool		ok;

	if (cache && cache->len == len && memcmp(cache->bytes, bytes, len) == 0)
		return &cache->sel;
	if (cache == NULL)
	{
		cache = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(SelectorCache));
		cache->cxt = AllocSetContextCreate(fcinfo->flinfo->fn_mcxt, "kwatch label selector",
										   ALLOCSET_SMALL_SIZES);
		fcinfo->flinfo->fn_extra = cache;
	}
	cache->len = -1;
	MemoryContextReset(cache->cxt);
	old = MemoryContextSwitchTo(cache->cxt);
	if (is_text)
		ok = parse_selector(bytes, len, &sel, &error);
	else
		ok = label_selector_from_jsonb(DatumGetJsonbP(d), &sel, &error);
	MemoryContextSwitchTo(old);
	if (!ok && !get_fn_expr_arg_stable(fcinfo->flinfo, argno))
	{
		sel.nothing = true;
		sel.nreqs = 0;
		sel.reqs = NULL;
	}
	else if (!ok)
	{
		if (is_text)
			report_selector_error(&error, pnstrdup(bytes, len), len, true);
		else
			report_selector_error(&error, JsonbToCString(NULL, &DatumGetJsonbP(d)->root, VARSIZE(d)),
								  0, false);
	}
	cache->bytes = MemoryContextAlloc(cache->cxt, len + 1);
	memcpy(cache->bytes, bytes, len);
	cache->sel = sel;
	cache->len = len;
	return &cache->sel;
}

/*
 * kwatch.matches_labels(labels jsonb, selector text) -> boolean: whether
 * an object with these labels (a JSON object of strings; anything else
 * is an object without labels) is selected by `selector`, as `kubectl get
 * -l selector` selects (apimachinery labels.Parse, Selector.Matches):
 * requirements joined by commas (AND), `k=v`, `k==v`, `k!=v`, `k in
 * (v1,v2)`, `k notin (v1,v2)`, `k`, `!k`, `k>n`, `k<n`; `!=` and `notin`
 * match an object without the key; '' matches everything.  STRICT.
 * ERROR 22023 (invalid_parameter_value) on an invalid selector, with
 * apimachinery's message and the character in DETAIL.
 */
PG_FUNCTION_INFO_V1(kwatch_matches_labels);
Datum
kwatch_matches_labels(PG_FUNCTION_ARGS)
{
	Jsonb	   *labels = PG_GETARG_JSONB_P(0);
	text	   *selector = PG_GETARG_TEXT_PP(1);
	LabelSelector *sel = cached_selector(fcinfo, VARDATA_ANY(selector),
										 VARSIZE_ANY_EXHDR(selector), 0, true, 1);

	PG_RETURN_BOOL(selector_matches(sel, labels));
}

/*
 * kwatch.matches_labels(labels jsonb, selector jsonb) -> boolean: the same
 * for a metav1 LabelSelector (apimachinery pkg/apis/meta/v1/helpers.go
 * LabelSelectorAsSelector): matchLabels (equalities) and matchExpressions
 * ({key, operator: In|NotIn|Exists|DoesNotExist, values}), all of them.
 * `{}` matches everything; a SQL NULL or JSON null selector nothing
 * (false); NULL labels give NULL.  ERROR 22023 on an invalid selector
 * (NewRequirement's messages; `"X" is not a valid pod selector operator`).
 */
PG_FUNCTION_INFO_V1(kwatch_matches_label_selector);
Datum
kwatch_matches_label_selector(PG_FUNCTION_ARGS)
{
	Jsonb	   *labels;
	Datum		d;
	LabelSelector *sel;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	if (PG_ARGISNULL(1))
		PG_RETURN_BOOL(false);
	labels = PG_GETARG_JSONB_P(0);
	d = PointerGetDatum(PG_GETARG_JSONB_P(1));
	sel = cached_selector(fcinfo, VARDATA(DatumGetPointer(d)),
						  VARSIZE(DatumGetPointer(d)) - VARHDRSZ, d, false, 1);
	PG_RETURN_BOOL(selector_matches(sel, labels));
}

/*
 * selector_split: of a valid constant selector, the equalities (`=`,
 * `==`, `in` of one value, matchLabels) as a jsonb object for `@>`
 * (*contains; NULL when none; a key seen twice goes to the rest) and the
 * rest as a selector string (*rest, "" when nothing is left).
 */
static void
selector_split(LabelSelector *sel, Jsonb **contains, char **rest)
{
	JsonbParseState *state = NULL;
	JsonbValue *res;
	StringInfoData buf;
	int			i,
				j,
				neq = 0;

	initStringInfo(&buf);
	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	for (i = 0; i < sel->nreqs; i++)
	{
		SelRequirement *req = &sel->reqs[i];
		bool		eq = (req->op == SEL_EQUALS || req->op == SEL_DOUBLE_EQUALS ||
						  req->op == SEL_IN) && req->nvalues == 1;

		for (j = 0; eq && j < i; j++)
			if (strcmp(sel->reqs[j].key, req->key) == 0)
				eq = false;
		if (eq)
		{
			JsonbValue	k,
						v;

			k.type = jbvString;
			k.val.string.val = req->key;
			k.val.string.len = strlen(req->key);
			v.type = jbvString;
			v.val.string.val = req->values[0];
			v.val.string.len = strlen(req->values[0]);
			pushJsonbValue(&state, WJB_KEY, &k);
			pushJsonbValue(&state, WJB_VALUE, &v);
			neq++;
		}
		else
		{
			if (buf.len)
				appendStringInfoChar(&buf, ',');
			append_requirement(&buf, req);
		}
	}
	res = pushJsonbValue(&state, WJB_END_OBJECT, NULL);
	*contains = neq ? JsonbValueToJsonb(res) : NULL;
	*rest = buf.data;
}

/*
 * kwatch._label_selector_equalities(selector text | jsonb) -> jsonb: the
 * equalities of a selector (`=`, `==`, `in` of one value, matchLabels) as
 * the object `labels @>` takes, `{}` when it has none, NULL for a selector
 * that selects nothing (JSON null).  Every object the selector selects
 * contains it: the index condition the support function gives a selector
 * that is not a constant (a join's, a parameter).  STRICT.  ERROR 22023 on
 * an invalid selector, as matches_labels.
 */
PG_FUNCTION_INFO_V1(kwatch_label_selector_equalities);
Datum
kwatch_label_selector_equalities(PG_FUNCTION_ARGS)
{
	Oid			argtype = get_fn_expr_argtype(fcinfo->flinfo, 0);
	LabelSelector *sel;
	Jsonb	   *contains;
	char	   *rest;

	if (argtype == JSONBOID)
	{
		Datum		d = PointerGetDatum(PG_GETARG_JSONB_P(0));

		sel = cached_selector(fcinfo, VARDATA(DatumGetPointer(d)),
							  VARSIZE(DatumGetPointer(d)) - VARHDRSZ, d, false, 0);
	}
	else
	{
		text	   *t = PG_GETARG_TEXT_PP(0);

		sel = cached_selector(fcinfo, VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), 0, true, 0);
	}
	if (sel->nothing)
		PG_RETURN_NULL();
	selector_split(sel, &contains, &rest);
	if (contains == NULL)
	{
		JsonbParseState *state = NULL;

		pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
		contains = JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_OBJECT, NULL));
	}
	PG_RETURN_JSONB_P(contains);
}

/*
 * index_condition: for SupportRequestIndexCondition, a call whose labels
 * argument is the column of an index with jsonb's `@>` (GIN jsonb_path_ops
 * or jsonb_ops) and whose selector is not a constant (a constant one was
 * rewritten already, except under row-level security: then its
 * equalities, lossy) but reads nothing of the indexed table: the lossy
 * index clause `labels @> kwatch._label_selector_equalities(selector)`,
 * evaluated once per scan (per outer row of a nested loop: a Deployment's
 * pods by the Deployment's spec.selector).  NIL otherwise.
 */
static List *
index_condition(SupportRequestIndexCondition *req)
{
	FuncExpr   *fexpr;
	Node	   *selector;
	Oid			opno;
	Oid			eqfn;
	Oid			argtypes[1];
	char	   *nsp;
	Expr	   *cond;

	if (!IsA(req->node, FuncExpr) || req->indexarg != 0)
		return NIL;
	fexpr = (FuncExpr *) req->node;
	if (list_length(fexpr->args) != 2)
		return NIL;
	selector = lsecond(fexpr->args);
	argtypes[0] = exprType(selector);
	if ((argtypes[0] != TEXTOID && argtypes[0] != JSONBOID) ||
		(IsA(selector, Const) && !req->root->parse->hasRowSecurity) ||
		!is_pseudo_constant_for_index(req->root, selector, req->index))
		return NIL;
	opno = get_opfamily_member(req->opfamily, JSONBOID, JSONBOID, JsonbContainsStrategyNumber);
	if (!OidIsValid(opno))
		return NIL;
	if (IsA(selector, Const))
	{
		/*
		 * A constant selector left as a call (under row-level security, see
		 * kwatch_matches_labels_support): its equalities, as the
		 * simplification would have made them.
		 */
		Const	   *c = (Const *) selector;
		LabelSelector sel;
		SelError	error = {0};
		Jsonb	   *contains;
		char	   *rest;
		bool		ok;

		if (c->constisnull)
			return NIL;
		if (c->consttype == TEXTOID)
		{
			text	   *t = DatumGetTextPP(c->constvalue);

			ok = parse_selector(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), &sel, &error);
		}
		else
			ok = label_selector_from_jsonb(DatumGetJsonbP(c->constvalue), &sel, &error);
		if (!ok || sel.nothing)
			return NIL;
		selector_split(&sel, &contains, &rest);
		if (contains == NULL)
			return NIL;
		cond = make_opclause(opno, BOOLOID, false, (Expr *) copyObject(linitial(fexpr->args)),
							 (Expr *) makeConst(JSONBOID, -1, InvalidOid, -1,
												PointerGetDatum(contains), false, false),
							 InvalidOid, InvalidOid);
		((OpExpr *) cond)->opfuncid = get_opcode(opno);
		req->lossy = true;
		return list_make1(cond);
	}
	nsp = get_namespace_name(get_func_namespace(fexpr->funcid));
	eqfn = LookupFuncName(list_make2(makeString(nsp), makeString("_label_selector_equalities")),
						  1, argtypes, true);
	if (!OidIsValid(eqfn))
		return NIL;
	cond = make_opclause(opno, BOOLOID, false, (Expr *) copyObject(linitial(fexpr->args)),
						 (Expr *) makeFuncExpr(eqfn, JSONBOID, list_make1(copyObject(selector)),
											   InvalidOid, exprCollation(selector),
											   COERCE_EXPLICIT_CALL),
						 InvalidOid, InvalidOid);
	((OpExpr *) cond)->opfuncid = get_opcode(opno);
	req->lossy = true;
	return list_make1(cond);
}

/*
 * kwatch._matches_labels_support(internal) -> internal: the planner
 * support function of both matches_labels (PostgreSQL's
 * nodes/supportnodes.h, SupportRequestSimplify).  A call whose selector is
 * a constant, valid selector with equalities, and whose labels argument
 * is not volatile, becomes `labels @> '<the equalities>'::jsonb AND
 * kwatch.matches_labels(labels, '<the rest>')` (or the `@>` alone): the
 * first is what a GIN index on labels (jsonb_path_ops, the mirror
 * tables') serves.  Same result for every row: an equality is containment
 * of that key's string, and the rest is checked as before (re-simplified,
 * the rest has no equality and stays).  Anything else is left as it is
 * (an invalid selector raises its error when the call runs).  For
 * SupportRequestIndexCondition, a selector that is no constant:
 * index_condition.
 */
PG_FUNCTION_INFO_V1(kwatch_matches_labels_support);
Datum
kwatch_matches_labels_support(PG_FUNCTION_ARGS)
{
	Node	   *rawreq = (Node *) PG_GETARG_POINTER(0);
	SupportRequestSimplify *req;
	FuncExpr   *fexpr;
	Node	   *labels;
	Const	   *c;
	LabelSelector sel;
	SelError	error = {0};
	Jsonb	   *contains;
	char	   *rest;
	Oid			opno;
	Expr	   *cond;
	bool		ok;

	if (IsA(rawreq, SupportRequestIndexCondition))
		PG_RETURN_POINTER(index_condition((SupportRequestIndexCondition *) rawreq));
	if (!IsA(rawreq, SupportRequestSimplify))
		PG_RETURN_POINTER(NULL);
	req = (SupportRequestSimplify *) rawreq;
	/*
	 * Under row-level security the call stays a call: `@>` is not
	 * LEAKPROOF, so the rewritten clause could not be an index qual ahead
	 * of the policies (restriction_is_securely_promotable), while the
	 * LEAKPROOF call can, through index_condition.  A pulled-up view's
	 * policies count too (pull_up_simple_subquery sets hasRowSecurity).
	 */
	if (req->root != NULL && req->root->parse != NULL && req->root->parse->hasRowSecurity)
		PG_RETURN_POINTER(NULL);
	fexpr = req->fcall;
	if (list_length(fexpr->args) != 2 || !IsA(lsecond(fexpr->args), Const))
		PG_RETURN_POINTER(NULL);
	labels = linitial(fexpr->args);
	c = (Const *) lsecond(fexpr->args);
	if (c->constisnull || exprType(labels) != JSONBOID || contain_volatile_functions(labels))
		PG_RETURN_POINTER(NULL);
	if (c->consttype == TEXTOID)
	{
		text	   *t = DatumGetTextPP(c->constvalue);

		ok = parse_selector(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), &sel, &error);
	}
	else if (c->consttype == JSONBOID)
		ok = label_selector_from_jsonb(DatumGetJsonbP(c->constvalue), &sel, &error);
	else
		PG_RETURN_POINTER(NULL);
	if (!ok || sel.nothing)
		PG_RETURN_POINTER(NULL);
	selector_split(&sel, &contains, &rest);
	if (contains == NULL)
		PG_RETURN_POINTER(NULL);

	opno = LookupOperName(NULL, list_make2(makeString("pg_catalog"), makeString("@>")),
						  JSONBOID, JSONBOID, false, -1);
	cond = make_opclause(opno, BOOLOID, false, (Expr *) copyObject(labels),
						 (Expr *) makeConst(JSONBOID, -1, InvalidOid, -1,
											PointerGetDatum(contains), false, false),
						 InvalidOid, InvalidOid);
	((OpExpr *) cond)->opfuncid = get_opcode(opno);
	if (rest[0] != '\0')
	{
		Oid			textfn = fexpr->funcid;
		FuncExpr   *residual;

		if (c->consttype != TEXTOID)
		{
			/* the text overload, in this function's schema */
			Oid			argtypes[2] = {JSONBOID, TEXTOID};
			char	   *nsp = get_namespace_name(get_func_namespace(fexpr->funcid));

			textfn = LookupFuncName(list_make2(makeString(nsp), makeString("matches_labels")),
									2, argtypes, true);
			if (!OidIsValid(textfn))
				PG_RETURN_POINTER(NULL);
		}
		residual = makeFuncExpr(textfn, BOOLOID,
								list_make2(copyObject(labels),
										   makeConst(TEXTOID, -1, DEFAULT_COLLATION_OID, -1,
													 PointerGetDatum(cstring_to_text(rest)),
													 false, false)),
								InvalidOid, DEFAULT_COLLATION_OID, COERCE_EXPLICIT_CALL);
		residual->location = fexpr->location;
		cond = make_andclause(list_make2(cond, residual));
	}
	PG_RETURN_POINTER(cond);
}
