/*-------------------------------------------------------------------------
 *
 * yaml_manifest.c
 *		A manifest's text -> the JSON objects `kubectl apply -f` sends:
 *		YAML with several documents, or JSON, parsed with libyaml.
 *
 * kubectl reads a file with apimachinery's YAMLOrJSONDecoder: a text
 * whose first non-space character is '{' is JSON (here: jsonb's own
 * parser), anything else a stream of YAML documents, each converted to
 * JSON by sigs.k8s.io/yaml over go-yaml v2, whose scalars follow YAML 1.1
 * (gopkg.in/yaml.v2 resolve.go; the rules are those of resolve() below):
 *
 *   - a quoted or block (| >) scalar is a string, and so is one tagged
 *     !!str, ! or a tag of its own;
 *   - y Y yes Yes YES true True TRUE on On ON are true, n N no No NO false
 *     False FALSE off Off OFF false; "" ~ null Null NULL null;
 *   - integers as Go's strconv.ParseInt(s, 0, 64) reads them once every
 *     '_' is removed: 0x1F, 0o17, 0777 (octal), 0b101, +12, -3, then
 *     unsigned 64-bit ones; then floats (1e3, .5, 1., 08);
 *   - .inf, -.inf, .nan are floats JSON cannot hold: an error, as in
 *     kubectl ("json: unsupported value: +Inf");
 *   - timestamps (2001-12-14) stay strings, as go-yaml decodes them into
 *     an interface{};
 *   - anchors, aliases, and merge keys (<<: *a, <<: [*a, *b]) as go-yaml v2
 *     merges them: the pairs are applied in order, a later key wins (so a
 *     merge after a key overrides it), a list of maps backwards;
 *   - keys become strings as sigs.k8s.io/yaml's convertToJSONableObject
 *     does: an int's decimal, a float's shortest 32-bit %g form, true /
 *     false; a null, unsigned 64-bit or collection key is an error.
 *
 * Empty documents (nothing, or only comments, or null) are skipped, and a
 * List (a kind ending in "List" with items, as kubectl's builder flattens
 * one) gives its items.  Anything else that is not a mapping is an error.
 *
 * The text is parsed once, as events, into a tree of our own (palloc'd)
 * with its depth bounded (KW_YAML_MAX_DEPTH; libyaml's scanner costs
 * O(depth) per token) and cancellable; aliases share the anchored node,
 * and expanding them is bounded (MAX_VALUES per document).  Errors: 22P02
 * for syntax (libyaml's problem, line and column) and for values JSON
 * cannot hold; 22023 for a document that is not a mapping; 54000 for too
 * deep nesting or expansion, or an anchor name of MAX_ANCHOR bytes or more
 * (the anchors' table is sized by it); 22P05 for a NUL character.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>
#include <math.h>
#include <yaml.h>

#include "common/shortest_dec.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/fmgrprotos.h"
#include "utils/hsearch.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "kw_common.h"
#include "kw_yaml.h"

/* the values one document may expand to through aliases */
#define MAX_VALUES			2000000
#define MAX_ANCHOR			128

#define TAG_PREFIX			"tag:yaml.org,2002:"

typedef enum YKind
{
	Y_SCALAR,
	Y_SEQUENCE,
	Y_MAPPING
} YKind;

/* A node of a document: a scalar, or a collection of nodes (shared by aliases). */
typedef struct YNode
{
	YKind		kind;
	bool		open;			/* started, not ended: an alias to it is a cycle */
	char	   *value;			/* a scalar's text, UTF-8, NUL-terminated */
	size_t		len;
	char	   *tag;			/* NULL when untagged */
	bool		implicit;		/* plain, untagged (libyaml's plain_implicit) */
	int			line;			/* 1-based */
	int			column;
	struct YNode **items;		/* a sequence's items; a mapping's key, value, ... */
	int			n;
	int			cap;
} YNode;

typedef struct Anchor
{
	char		name[MAX_ANCHOR];
	YNode	   *node;
} Anchor;

/* What resolve() makes of a scalar. */
typedef enum RKind
{
	R_NULL,
	R_BOOL,
	R_INT,
	R_UINT,
	R_FLOAT,
	R_STRING,
	R_MERGE
} RKind;

typedef struct Resolved
{
	RKind		kind;
	bool		b;
	int64		i;
	uint64		u;
	double		f;
} Resolved;

typedef struct Convert
{
	long		values;			/* expanded so far in this document */
	int			document;
} Convert;

static JsonbValue *push_value(YNode *n, JsonbParseState **st, JsonbIteratorToken tok, Convert *c);

/* at most 100 bytes of a scalar's UTF-8 text, for an error's message (cut marked "...") */
static char *
excerpt(const char *s)
{
	size_t		len = strlen(s);
	int			cut;

	if (len <= 100)
		return pstrdup(s);
	cut = pg_encoding_mbcliplen(PG_UTF8, s, len, 100);
	return psprintf("%.*s...", cut, s);
}

/* the position of a node, for an error's message */
static char *
where(YNode *n)
{
	return psprintf("line %d, column %d", n->line, n->column);
}

/*
 * parse_integer: Go's strconv.ParseInt(s, 0, 64), then ParseUint(s, 0, 64)
 * (sign, then 0x / 0o / 0b / a leading 0 for octal, digits of that base).
 */
static bool
parse_integer(const char *s, Resolved *r)
{
	bool		neg = false;
	bool		sign = false;
	int			base = 10;
	uint64		v = 0;
	bool		overflow = false;
	const char *p = s;

	if (*p == '+' || *p == '-')
	{
		neg = *p == '-';
		sign = true;
		p++;
	}
	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
		base = 16, p += 2;
	else if (p[0] == '0' && (p[1] == 'o' || p[1] == 'O'))
		base = 8, p += 2;
	else if (p[0] == '0' && (p[1] == 'b' || p[1] == 'B'))
		base = 2, p += 2;
	else if (p[0] == '0' && p[1] != '\0')
		base = 8, p += 1;
	if (*p == '\0')
		return false;
	for (; *p; p++)
	{
		int			d;

		if (*p >= '0' && *p <= '9')
			d = *p - '0';
		else if (*p >= 'a' && *p <= 'f')
			d = *p - 'a' + 10;
		else if (*p >= 'A' && *p <= 'F')
			d = *p - 'A' + 10;
		else
			return false;
		if (d >= base)
			return false;
		if (v > (PG_UINT64_MAX - d) / base)
			overflow = true;
		else
			v = v * base + d;
	}
	if (overflow)
		return false;
	if (neg)
	{
		if (v > (uint64) PG_INT64_MAX + 1)
			return false;
		r->kind = R_INT;
		r->i = v == (uint64) PG_INT64_MAX + 1 ? PG_INT64_MIN : -(int64) v;
		return true;
	}
	if (v <= (uint64) PG_INT64_MAX)
	{
		r->kind = R_INT;
		r->i = (int64) v;
		return true;
	}
	if (sign)					/* ParseUint takes no sign */
		return false;
	r->kind = R_UINT;
	r->u = v;
	return true;
}

/* ^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$ (go-yaml's yamlStyleFloat) */
static bool
yaml_style_float(const char *s)
{
	const char *p = s;

	if (*p == '+' || *p == '-')
		p++;
	if (*p == '.')
	{
		p++;
		if (!isdigit((unsigned char) *p))
			return false;
		while (isdigit((unsigned char) *p))
			p++;
	}
	else
	{
		if (!isdigit((unsigned char) *p))
			return false;
		while (isdigit((unsigned char) *p))
			p++;
		if (*p == '.')
		{
			p++;
			while (isdigit((unsigned char) *p))
				p++;
		}
	}
	if (*p == 'e' || *p == 'E')
	{
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!isdigit((unsigned char) *p))
			return false;
		while (isdigit((unsigned char) *p))
			p++;
	}
	return *p == '\0';
}

/* strconv.ParseFloat of a yamlStyleFloat text: false when out of range */
static bool
parse_float(const char *s, Resolved *r)
{
	double		f;

	errno = 0;
	f = strtod(s, NULL);
	if (isinf(f))
		return false;
	r->kind = R_FLOAT;
	r->f = f;
	return true;
}

/* go-yaml v2's resolveMap: the words YAML 1.1 reads as a bool, a null, a special float, a merge */
static bool
resolve_word(const char *s, Resolved *r)
{
	static const char *const trues[] = {"y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"};
	static const char *const falses[] = {"n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"};
	static const char *const nulls[] = {"", "~", "null", "Null", "NULL"};

	for (int i = 0; i < lengthof(trues); i++)
		if (strcmp(s, trues[i]) == 0)
		{
			r->kind = R_BOOL;
			r->b = true;
			return true;
		}
	for (int i = 0; i < lengthof(falses); i++)
		if (strcmp(s, falses[i]) == 0)
		{
			r->kind = R_BOOL;
			r->b = false;
			return true;
		}
	for (int i = 0; i < lengthof(nulls); i++)
		if (strcmp(s, nulls[i]) == 0)
		{
			r->kind = R_NULL;
			return true;
		}
	r->kind = R_FLOAT;
	if (strcmp(s, ".nan") == 0 || strcmp(s, ".NaN") == 0 || strcmp(s, ".NAN") == 0)
		r->f = get_float8_nan();
	else if (strcmp(s, ".inf") == 0 || strcmp(s, ".Inf") == 0 || strcmp(s, ".INF") == 0 ||
			 strcmp(s, "+.inf") == 0 || strcmp(s, "+.Inf") == 0 || strcmp(s, "+.INF") == 0)
		r->f = get_float8_infinity();
	else if (strcmp(s, "-.inf") == 0 || strcmp(s, "-.Inf") == 0 || strcmp(s, "-.INF") == 0)
		r->f = -get_float8_infinity();
	else if (strcmp(s, "<<") == 0)
		r->kind = R_MERGE;
	else
		return false;
	return true;
}

/* what a plain scalar is (go-yaml v2's resolve() with no tag) */
static void
resolve_plain(const char *s, Resolved *r)
{
	char		c = s[0];

	r->kind = R_STRING;
	if (resolve_word(s, r))
		return;
	r->kind = R_STRING;
	if (c == '.')
	{
		/* ParseFloat: .5, .5e3 */
		if (yaml_style_float(s))
			(void) parse_float(s, r);
	}
	else if ((c >= '0' && c <= '9') || c == '+' || c == '-')
	{
		/* a timestamp stays a string; ints, then floats, with '_' removed */
		char	   *plain = palloc(strlen(s) + 1);
		char	   *q = plain;

		for (const char *p = s; *p; p++)
			if (*p != '_')
				*q++ = *p;
		*q = '\0';
		if (!parse_integer(plain, r) && yaml_style_float(plain))
			(void) parse_float(plain, r);
		pfree(plain);
	}
}

/*
 * resolve: what a scalar node is, as go-yaml v2's decoder sets it into an
 * interface{}: untagged non-plain scalars and !!str are strings, tags
 * other than YAML's own make strings, and a tag of YAML's own must fit.
 */
static void
resolve(YNode *n, Resolved *r)
{
	const char *tag = n->tag;
	const char *t;

	if (tag == NULL || tag[0] == '\0')
	{
		if (n->implicit)
			resolve_plain(n->value, r);
		else
			r->kind = R_STRING;
		return;
	}
	if (strncmp(tag, TAG_PREFIX, strlen(TAG_PREFIX)) != 0)
	{
		r->kind = R_STRING;		/* "!", "!local": not resolvable, left as text */
		return;
	}
	t = tag + strlen(TAG_PREFIX);
	if (strcmp(t, "str") == 0 || strcmp(t, "timestamp") == 0)
	{
		r->kind = R_STRING;
		return;
	}
	if (strcmp(t, "merge") == 0 && strcmp(n->value, "<<") == 0)
	{
		r->kind = R_MERGE;
		return;
	}
	if (strcmp(t, "binary") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("YAML tag !!binary at %s is not supported", where(n)),
				 errhint("Give the value as a base64 string without the tag (a Secret's data takes base64).")));
	if (strcmp(t, "bool") != 0 && strcmp(t, "int") != 0 && strcmp(t, "float") != 0 &&
		strcmp(t, "null") != 0)
	{
		r->kind = R_STRING;
		return;
	}
	resolve_plain(n->value, r);
	if (strcmp(t, "float") == 0 && r->kind == R_INT)
	{
		r->kind = R_FLOAT;
		r->f = (double) r->i;
	}
	else if (strcmp(t, "float") == 0 && r->kind == R_UINT)
	{
		r->kind = R_FLOAT;
		r->f = (double) r->u;
	}
	if (!((strcmp(t, "bool") == 0 && r->kind == R_BOOL) ||
		  (strcmp(t, "int") == 0 && (r->kind == R_INT || r->kind == R_UINT)) ||
		  (strcmp(t, "float") == 0 && r->kind == R_FLOAT) ||
		  (strcmp(t, "null") == 0 && r->kind == R_NULL)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("YAML value \"%s\" at %s cannot be decoded as a !!%s",
						excerpt(n->value), where(n), t)));
}

/* a scalar's text in the server's encoding, refusing NUL (text cannot hold it) */
static char *
server_string(YNode *n, int *len)
{
	char	   *s;

	if (memchr(n->value, '\0', n->len) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNTRANSLATABLE_CHARACTER),
				 errmsg("YAML string at %s holds a NUL character, which text cannot hold", where(n))));
	s = pg_any_to_server(n->value, n->len, PG_UTF8);
	*len = strlen(s);
	return s;
}

/* a double as the shortest numeric that reads back as it */
static Numeric
float_numeric(double f)
{
	char		buf[DOUBLE_SHORTEST_DECIMAL_LEN];

	double_to_shortest_decimal_buf(f, buf);
	return DatumGetNumeric(DirectFunctionCall3(numeric_in, CStringGetDatum(buf),
											   ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1)));
}

/*
 * go_float32_key: strconv.FormatFloat(f, 'g', -1, 32), as
 * sigs.k8s.io/yaml turns a float key into a string: the shortest digits of
 * the float32, %e when the exponent is < -4 or >= 6 (two exponent digits
 * at least), else %f.
 */
static char *
go_float32_key(double f)
{
	char		buf[FLOAT_SHORTEST_DECIMAL_LEN];
	char		digits[FLOAT_SHORTEST_DECIMAL_LEN];
	int			nd = 0;
	int			dp = 0;			/* digits before the decimal point */
	bool		neg = false;
	bool		seen_point = false;
	int			exp10 = 0;
	const char *p;
	StringInfoData out;

	if (isnan(f))
		return ".nan";
	if (isinf(f))
		return f > 0 ? ".inf" : "-.inf";
	float_to_shortest_decimal_buf((float) f, buf);
	p = buf;
	if (*p == '-')
		neg = true, p++;
	for (; *p && *p != 'e' && *p != 'E'; p++)
	{
		if (*p == '.')
			seen_point = true;
		else if (nd == 0 && *p == '0')
		{
			if (seen_point)
				dp--;
		}
		else
		{
			digits[nd++] = *p;
			if (!seen_point)
				dp++;
		}
	}
	if (*p)
		exp10 = atoi(p + 1);
	while (nd > 0 && digits[nd - 1] == '0')
		nd--;
	initStringInfo(&out);
	if (neg)
		appendStringInfoChar(&out, '-');
	if (nd == 0)
	{
		appendStringInfoChar(&out, '0');
		return out.data;
	}
	dp += exp10;
	if (dp - 1 < -4 || dp - 1 >= 6)
	{
		int			e = dp - 1;

		appendStringInfoChar(&out, digits[0]);
		if (nd > 1)
		{
			appendStringInfoChar(&out, '.');
			appendBinaryStringInfo(&out, digits + 1, nd - 1);
		}
		appendStringInfo(&out, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
		return out.data;
	}
	if (dp <= 0)
	{
		appendStringInfoString(&out, "0.");
		for (int i = dp; i < 0; i++)
			appendStringInfoChar(&out, '0');
		appendBinaryStringInfo(&out, digits, nd);
	}
	else
	{
		for (int i = 0; i < Max(dp, nd); i++)
		{
			if (i == dp)
				appendStringInfoChar(&out, '.');
			appendStringInfoChar(&out, i < nd ? digits[i] : '0');
		}
	}
	return out.data;
}

/* a mapping key as the string JSON needs (sigs.k8s.io/yaml's rule) */
static void
key_string(YNode *k, JsonbValue *v)
{
	Resolved	r;

	if (k->kind != Y_SCALAR)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("YAML %s at %s cannot be a key of a JSON object",
						k->kind == Y_MAPPING ? "mapping" : "sequence", where(k))));
	resolve(k, &r);
	v->type = jbvString;
	switch (r.kind)
	{
		case R_STRING:
		case R_MERGE:
			v->val.string.val = server_string(k, &v->val.string.len);
			return;
		case R_BOOL:
			v->val.string.val = r.b ? "true" : "false";
			break;
		case R_INT:
			v->val.string.val = psprintf(INT64_FORMAT, r.i);
			break;
		case R_FLOAT:
			v->val.string.val = go_float32_key(r.f);
			break;
		case R_NULL:
		case R_UINT:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
					 errmsg("YAML key \"%s\" at %s cannot be a key of a JSON object",
							excerpt(k->value), where(k)),
					 errdetail("A key must be a string, a bool, a number of 64 bits, or a float.")));
	}
	v->val.string.len = strlen(v->val.string.val);
}

static bool
is_merge(YNode *k)
{
	Resolved	r;

	if (k->kind != Y_SCALAR || strcmp(k->value, "<<") != 0)
		return false;
	resolve(k, &r);
	return r.kind == R_MERGE;
}

static void
want_map(YNode *n)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
			 errmsg("YAML merge key at %s takes a mapping or a sequence of mappings", where(n))));
}

/*
 * counts one value (or merged mapping) of the document against MAX_VALUES;
 * cancellable
 */
static void
count_value(Convert *c)
{
	CHECK_FOR_INTERRUPTS();
	if (++c->values > MAX_VALUES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("YAML document %d expands to more than %d values", c->document, MAX_VALUES),
				 errdetail("Its aliases repeat the nodes they name.")));
}

/*
 * the pairs of mapping `m` into the object being built, merges included
 * (each merged mapping counts as a value: merges of empty mappings through
 * aliases push no value, but would otherwise multiply without bound)
 */
static void
push_pairs(YNode *m, JsonbParseState **st, Convert *c)
{
	check_stack_depth();
	for (int i = 0; i + 1 < m->n; i += 2)
	{
		YNode	   *k = m->items[i];
		YNode	   *v = m->items[i + 1];
		JsonbValue	key;

		if (is_merge(k))
		{
			if (v->kind == Y_MAPPING)
			{
				count_value(c);
				push_pairs(v, st, c);
			}
			else if (v->kind == Y_SEQUENCE)
			{
				/* backwards: earlier maps take precedence (go-yaml v2's merge) */
				for (int j = v->n - 1; j >= 0; j--)
				{
					if (v->items[j]->kind != Y_MAPPING)
						want_map(v->items[j]);
					count_value(c);
					push_pairs(v->items[j], st, c);
				}
			}
			else
				want_map(v);
			continue;
		}
		key_string(k, &key);
		(void) pushJsonbValue(st, WJB_KEY, &key);
		push_value(v, st, WJB_VALUE, c);
	}
}

/*
 * node `n` as a JSON value, pushed as `tok` (WJB_VALUE, WJB_ELEM; a
 * collection as its BEGIN and END); returns what the last push returned
 * (the whole value once the outermost collection ends)
 */
static JsonbValue *
push_value(YNode *n, JsonbParseState **st, JsonbIteratorToken tok, Convert *c)
{
	JsonbValue	v;
	Resolved	r;

	check_stack_depth();
	count_value(c);
	switch (n->kind)
	{
		case Y_SEQUENCE:
			(void) pushJsonbValue(st, WJB_BEGIN_ARRAY, NULL);
			for (int i = 0; i < n->n; i++)
				push_value(n->items[i], st, WJB_ELEM, c);
			return pushJsonbValue(st, WJB_END_ARRAY, NULL);
		case Y_MAPPING:
			(void) pushJsonbValue(st, WJB_BEGIN_OBJECT, NULL);
			push_pairs(n, st, c);
			return pushJsonbValue(st, WJB_END_OBJECT, NULL);
		case Y_SCALAR:
			break;
	}
	resolve(n, &r);
	switch (r.kind)
	{
		case R_NULL:
			v.type = jbvNull;
			break;
		case R_BOOL:
			v.type = jbvBool;
			v.val.boolean = r.b;
			break;
		case R_INT:
			v.type = jbvNumeric;
			v.val.numeric = int64_to_numeric(r.i);
			break;
		case R_UINT:
			v.type = jbvNumeric;
			v.val.numeric = DatumGetNumeric(DirectFunctionCall3(numeric_in,
																CStringGetDatum(psprintf(UINT64_FORMAT, r.u)),
																ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1)));
			break;
		case R_FLOAT:
			if (isnan(r.f) || isinf(r.f))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
						 errmsg("YAML value \"%s\" at %s is not representable in JSON",
								excerpt(n->value), where(n)),
						 errhint("Quote it to make it a string.")));
			v.type = jbvNumeric;
			v.val.numeric = float_numeric(r.f);
			break;
		case R_STRING:
		case R_MERGE:
			v.type = jbvString;
			v.val.string.val = server_string(n, &v.val.string.len);
			break;
	}
	return pushJsonbValue(st, tok, &v);
}

/* libyaml's failure as an ERROR: 22P02 with its problem and position */
static void
syntax_error(yaml_parser_t *parser)
{
	if (parser->error == YAML_MEMORY_ERROR)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory while parsing a YAML manifest")));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
			 errmsg("YAML syntax error at line %lu, column %lu: %s",
					(unsigned long) parser->problem_mark.line + 1,
					(unsigned long) parser->problem_mark.column + 1,
					parser->problem ? parser->problem : "unknown error"),
			 kw_errdetail_yaml_context(parser)));
}

static YNode *
new_node(YKind kind, yaml_mark_t mark, const yaml_char_t *tag)
{
	YNode	   *n = palloc0(sizeof(YNode));

	n->kind = kind;
	n->line = (int) mark.line + 1;
	n->column = (int) mark.column + 1;
	n->tag = tag ? pstrdup((const char *) tag) : NULL;
	return n;
}

static void
add_item(YNode *parent, YNode *child)
{
	if (parent->n == parent->cap)
	{
		parent->cap = parent->cap ? parent->cap * 2 : 8;
		parent->items = parent->items ? repalloc(parent->items, parent->cap * sizeof(YNode *)) :
			palloc(parent->cap * sizeof(YNode *));
	}
	parent->items[parent->n++] = child;
}

static void
note_anchor(HTAB *anchors, const yaml_char_t *anchor, YNode *n)
{
	Anchor	   *a;
	bool		found;

	if (anchor == NULL)
		return;
	if (strlen((const char *) anchor) >= MAX_ANCHOR)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("YAML anchor at %s is longer than %d bytes", where(n), MAX_ANCHOR - 1)));
	a = hash_search(anchors, anchor, HASH_ENTER, &found);
	a->node = n;				/* a later anchor of the same name replaces it */
}

/*
 * add_jsonb: object `j` of document `document` appended to *out, or the
 * items of a List (a kind ending in "List" with an array of items, as
 * kubectl's builder flattens one: its FlattenListVisitor), each an object.
 */
static void
add_jsonb(List **out, Jsonb *j, int document, int line)
{
	JsonbValue *kind = getKeyJsonValueFromContainer(&j->root, "kind", 4, NULL);
	JsonbValue *items = getKeyJsonValueFromContainer(&j->root, "items", 5, NULL);
	KwManifestObject *o;

	if (kind && kind->type == jbvString && kind->val.string.len >= 4 &&
		memcmp(kind->val.string.val + kind->val.string.len - 4, "List", 4) == 0 &&
		items && items->type == jbvBinary && JsonContainerIsArray(items->val.binary.data))
	{
		uint32		n = JsonContainerSize(items->val.binary.data);

		for (uint32 i = 0; i < n; i++)
		{
			JsonbValue *e = getIthJsonbValueFromContainer(items->val.binary.data, i);

			if (e->type != jbvBinary || !JsonContainerIsObject(e->val.binary.data))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("item %u of the List in YAML document %d (line %d) is not an object",
								i + 1, document, line)));
			o = palloc(sizeof(KwManifestObject));
			o->object = JsonbValueToJsonb(e);
			o->document = document;
			o->item = (int) i + 1;
			o->line = line;
			*out = lappend(*out, o);
		}
		return;
	}
	o = palloc(sizeof(KwManifestObject));
	o->object = j;
	o->document = document;
	o->item = 0;
	o->line = line;
	*out = lappend(*out, o);
}

/*
 * add_document: document `root` (number `document`) as the objects it
 * holds (add_jsonb), none for an empty one.  22023 for
 * one that is not a mapping.
 */
static void
add_document(List **out, YNode *root, int document)
{
	Convert		c = {0, document};
	JsonbParseState *st = NULL;
	int			line;

	if (root == NULL)
		return;
	line = root->line;			/* past any "---" and comments */
	if (root->kind == Y_SCALAR)
	{
		Resolved	r;

		resolve(root, &r);
		if (r.kind == R_NULL)
			return;
	}
	if (root->kind != Y_MAPPING)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("YAML document %d (line %d) is a %s, not an object", document, line,
						root->kind == Y_SEQUENCE ? "sequence" : "scalar"),
				 errhint("A manifest's documents are objects with apiVersion, kind and metadata.")));
	add_jsonb(out, JsonbValueToJsonb(push_value(root, &st, WJB_VALUE, &c)), document, line);
}

/* one event's node into the document: its root, or the next item of the open collection */
static void
attach(YNode **stack, int depth, YNode **root, YNode *n)
{
	if (depth == 0)
		*root = n;
	else
		add_item(stack[depth - 1], n);
}

/*
 * kw_manifest_objects: the objects of manifest `text` (`len` bytes, in the
 * server's encoding), in order, as a List of KwManifestObject (palloc'd in
 * the current context): see the file header for the rules and the
 * ERRORs.
 */
List *
kw_manifest_objects(const char *text, size_t len)
{
	List	   *out = NIL;
	const char *p = text;
	char	   *utf8;
	yaml_parser_t parser;
	yaml_event_t event;
	volatile bool parser_live = false;
	volatile bool event_live = false;

	while (p < text + len && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	if (p < text + len && *p == '{')
	{
		/* JSON, as YAMLOrJSONDecoder reads it: jsonb's parser */
		char	   *s = pnstrdup(text, len);

		add_jsonb(&out, DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(s))), 1, 1);
		return out;
	}

	utf8 = pg_server_to_any(text, len, PG_UTF8);
	if (utf8 != text)
		len = strlen(utf8);
	PG_TRY();
	{
		HASHCTL		ctl;
		HTAB	   *anchors = NULL;
		YNode	   *stack[KW_YAML_MAX_DEPTH];
		int			depth = 0;
		YNode	   *root = NULL;
		int			document = 0;
		bool		done = false;

		if (!yaml_parser_initialize(&parser))
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory"),
					 errdetail("Could not initialize the YAML parser.")));
		parser_live = true;
		yaml_parser_set_input_string(&parser, (const unsigned char *) utf8, len);
		yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING);
		while (!done)
		{
			YNode	   *n = NULL;

			CHECK_FOR_INTERRUPTS();
			if (!yaml_parser_parse(&parser, &event))
				syntax_error(&parser);
			event_live = true;
			switch (event.type)
			{
				case YAML_DOCUMENT_START_EVENT:
					document++;
					root = NULL;
					depth = 0;
					if (anchors)
						hash_destroy(anchors);
					memset(&ctl, 0, sizeof(ctl));
					ctl.keysize = MAX_ANCHOR;
					ctl.entrysize = sizeof(Anchor);
					ctl.hcxt = CurrentMemoryContext;
					anchors = hash_create("kwatch YAML anchors", 16, &ctl,
										  HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
					break;
				case YAML_SCALAR_EVENT:
					n = new_node(Y_SCALAR, event.start_mark, event.data.scalar.tag);
					n->len = event.data.scalar.length;
					n->value = palloc(n->len + 1);
					memcpy(n->value, event.data.scalar.value, n->len);
					n->value[n->len] = '\0';
					n->implicit = event.data.scalar.plain_implicit;
					note_anchor(anchors, event.data.scalar.anchor, n);
					attach(stack, depth, &root, n);
					break;
				case YAML_SEQUENCE_START_EVENT:
				case YAML_MAPPING_START_EVENT:
					if (event.type == YAML_SEQUENCE_START_EVENT)
					{
						n = new_node(Y_SEQUENCE, event.start_mark, event.data.sequence_start.tag);
						note_anchor(anchors, event.data.sequence_start.anchor, n);
					}
					else
					{
						n = new_node(Y_MAPPING, event.start_mark, event.data.mapping_start.tag);
						note_anchor(anchors, event.data.mapping_start.anchor, n);
					}
					if (depth >= KW_YAML_MAX_DEPTH)
						ereport(ERROR,
								(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
								 errmsg("YAML document %d is nested more than %d levels deep (at %s)",
										document, KW_YAML_MAX_DEPTH, where(n))));
					attach(stack, depth, &root, n);
					n->open = true;
					stack[depth++] = n;
					break;
				case YAML_SEQUENCE_END_EVENT:
				case YAML_MAPPING_END_EVENT:
					stack[--depth]->open = false;
					break;
				case YAML_ALIAS_EVENT:
					{
						Anchor	   *a = NULL;

						n = new_node(Y_SCALAR, event.start_mark, NULL);
						if (strlen((const char *) event.data.alias.anchor) < MAX_ANCHOR)
							a = hash_search(anchors, event.data.alias.anchor, HASH_FIND, NULL);
						if (a == NULL)
							ereport(ERROR,
									(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
									 errmsg("YAML alias \"*%s\" at %s names no anchor before it",
											excerpt((const char *) event.data.alias.anchor), where(n))));
						if (a->node->open)
							ereport(ERROR,
									(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
									 errmsg("YAML alias \"*%s\" at %s is inside the node it names",
											excerpt((const char *) event.data.alias.anchor), where(n))));
						attach(stack, depth, &root, a->node);
					}
					break;
				case YAML_DOCUMENT_END_EVENT:
					add_document(&out, root, document);
					root = NULL;
					break;
				case YAML_STREAM_END_EVENT:
					done = true;
					break;
				default:
					break;
			}
			yaml_event_delete(&event);
			event_live = false;
		}
	}
	PG_CATCH();
	{
		if (event_live)
			yaml_event_delete(&event);
		if (parser_live)
			yaml_parser_delete(&parser);
		PG_RE_THROW();
	}
	PG_END_TRY();
	yaml_parser_delete(&parser);
	return out;
}
