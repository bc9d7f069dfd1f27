/*-------------------------------------------------------------------------
 *
 * column_functions.c
 *		The functions mirror tables' generated columns call, in C.
 *
 * Every row a watch writes computes its generated columns (README
 * "Tables"): created_at and deleted_at (k8s_timestamp), a pod's ready and
 * restart_count (condition_true, pod_restart_count), and a CRD's printer
 * columns (jsonb_integer, jsonb_number, jsonb_boolean, jsonb_timestamp).
 * Up to 0.3.0 these were SQL and PL/pgSQL functions that PostgreSQL cannot
 * inline in a generated column: each row ran each of them through the SQL
 * function executor (a plan per call site, an executor per call), and the
 * printer-column helpers also set search_path per call and, for dates,
 * opened a subtransaction.  That was a fifth of the cost of an insert into
 * k8s.pods (test/bench: evstream.py, bench.py).
 *
 * They never raise an error on what an object holds: a generated column
 * that raised would make PostgreSQL reject the whole row, and with it the
 * watch's batch.  A value of an unexpected kind gives NULL (or, for the
 * counts and conditions, is not counted), as the 0.3.0 printer-column
 * helpers already did.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>
#include <math.h>

#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"

#include "pg_compat.h"

/*
 * parse_timestamptz: `str` as timestamptz_in reads it (utils/adt/
 * timestamp.c: ParseDateTime, DecodeDateTime, tm2timestamp), but returning
 * false instead of raising on what it cannot read (a malformed or
 * out-of-range date) and on the special values (epoch, infinity, ...).
 */
static bool
parse_timestamptz(const char *str, TimestampTz *result)
{
	fsec_t		fsec;
	struct pg_tm tt;
	int			tz;
	int			dtype;
	int			nf;
	char	   *field[MAXDATEFIELDS];
	int			ftype[MAXDATEFIELDS];
	char		workbuf[MAXDATELEN + MAXDATEFIELDS];

	if (ParseDateTime(str, workbuf, sizeof(workbuf), field, ftype,
					  MAXDATEFIELDS, &nf) != 0 ||
		KW_DECODE_DATETIME(field, ftype, nf, &dtype, &tt, &fsec, &tz) != 0 ||
		dtype != DTK_DATE ||
		tm2timestamp(&tt, fsec, &tz, result) != 0)
		return false;
	return IS_VALID_TIMESTAMP(*result);
}

/*
 * rfc3339: whether `s` is an RFC 3339 date-time as Kubernetes writes them:
 * YYYY-MM-DD[Tt ]hh:mm:ss[.frac](Z|z|+hh:mm|-hh:mm) (apimachinery
 * pkg/apis/meta/v1/time.go, RFC3339 and RFC3339Micro).
 */
static bool
rfc3339(const char *s, int len)
{
	static const char shape[] = "dddd-dd-ddTdd:dd:dd";
	int			i;

	if (len < 20)
		return false;
	for (i = 0; i < 19; i++)
	{
		char		c = s[i];

		if (shape[i] == 'd' ? !isdigit((unsigned char) c) :
			i == 10 ? (c != 'T' && c != 't' && c != ' ') : c != shape[i])
			return false;
	}
	if (s[i] == '.')
	{
		if (++i >= len || !isdigit((unsigned char) s[i]))
			return false;
		while (i < len && isdigit((unsigned char) s[i]))
			i++;
	}
	if (i < len && (s[i] == 'Z' || s[i] == 'z'))
		return i + 1 == len;
	return i + 6 == len && (s[i] == '+' || s[i] == '-') &&
		isdigit((unsigned char) s[i + 1]) && isdigit((unsigned char) s[i + 2]) &&
		s[i + 3] == ':' &&
		isdigit((unsigned char) s[i + 4]) && isdigit((unsigned char) s[i + 5]);
}

/* object_field: the value of key `key` of `v` when `v` is an object, else NULL. */
static JsonbValue *
object_field(JsonbContainer *c, const char *key)
{
	if (c == NULL || !JsonContainerIsObject(c))
		return NULL;
	return getKeyJsonValueFromContainer(c, key, strlen(key), NULL);
}

/* container: the container a value holds (an object or array), or NULL. */
static JsonbContainer *
container(JsonbValue *v)
{
	return v != NULL && v->type == jbvBinary ? v->val.binary.data : NULL;
}

/* path_array: the array at obj.k1.k2, or NULL when any step is missing or of another kind. */
static JsonbContainer *
path_array(Jsonb *obj, const char *k1, const char *k2)
{
	JsonbContainer *c = container(object_field(&obj->root, k1));

	c = container(object_field(c, k2));
	return c != NULL && JsonContainerIsArray(c) ? c : NULL;
}

/* string_equals: whether `v` is the JSON string `s`. */
static bool
string_equals(JsonbValue *v, const char *s, int len)
{
	return v != NULL && v->type == jbvString && v->val.string.len == len &&
		memcmp(v->val.string.val, s, len) == 0;
}

/*
 * int32_of: a count (a JSON number, or a string of digits, as
 * (value->>'key')::integer read them) as int32; false when it is not a
 * whole number in int32's range.
 */
static bool
int32_of(JsonbValue *v, int32 *out)
{
	char	   *text;
	char	   *end;
	long		n;

	if (v == NULL)
		return false;
	if (v->type == jbvNumeric)
		text = DatumGetCString(DirectFunctionCall1(numeric_out,
												   NumericGetDatum(v->val.numeric)));
	else if (v->type == jbvString)
		text = pnstrdup(v->val.string.val, v->val.string.len);
	else
		return false;
	errno = 0;
	n = strtol(text, &end, 10);
	if (errno != 0 || end == text || *end != '\0' || n < PG_INT32_MIN || n > PG_INT32_MAX)
		return false;
	*out = (int32) n;
	return true;
}

PG_FUNCTION_INFO_V1(kwatch_k8s_timestamp);

/*
 * kwatch_k8s_timestamp: SQL kwatch.k8s_timestamp(text) -> timestamptz, an
 * RFC 3339 timestamp as the API server writes them
 * ("2024-05-01T10:00:00Z"), read as timestamptz_in reads it; NULL for NULL
 * and for anything else (0.3.0 read any timestamptz input, and raised
 * 22007/22008 on what it could not read).
 */
Datum
kwatch_k8s_timestamp(PG_FUNCTION_ARGS)
{
	text	   *t = PG_GETARG_TEXT_PP(0);
	TimestampTz ts;

	if (!rfc3339(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t)) ||
		!parse_timestamptz(text_to_cstring(t), &ts))
		PG_RETURN_NULL();
	PG_RETURN_TIMESTAMPTZ(ts);
}

PG_FUNCTION_INFO_V1(kwatch_pod_restart_count);

/*
 * kwatch_pod_restart_count: SQL kwatch.pod_restart_count(pod jsonb) ->
 * integer, the sum of status.containerStatuses[].restartCount (0 without
 * any; a count that is not a whole int32 is left out; NULL when the sum
 * leaves int32).  Kubernetes: core/v1 ContainerStatus.restartCount.
 */
Datum
kwatch_pod_restart_count(PG_FUNCTION_ARGS)
{
	JsonbContainer *arr;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int64		sum = 0;

	if (PG_ARGISNULL(0))
		PG_RETURN_INT32(0);
	arr = path_array(PG_GETARG_JSONB_P(0), "status", "containerStatuses");
	if (arr == NULL)
		PG_RETURN_INT32(0);
	it = JsonbIteratorInit(arr);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		int32		n;

		if (tok == WJB_ELEM &&
			int32_of(object_field(container(&v), "restartCount"), &n))
			sum += n;
	}
	if (sum < PG_INT32_MIN || sum > PG_INT32_MAX)
		PG_RETURN_NULL();
	PG_RETURN_INT32((int32) sum);
}

PG_FUNCTION_INFO_V1(kwatch_condition_true);

/*
 * kwatch_condition_true: SQL kwatch.condition_true(object jsonb, type
 * text) -> boolean, whether status.conditions holds a condition whose
 * type is `type` and whose status is "True" (apimachinery's Condition:
 * Pod Ready, Node Ready, ...); false for NULL arguments and when there are
 * no conditions.
 */
Datum
kwatch_condition_true(PG_FUNCTION_ARGS)
{
	JsonbContainer *arr;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	text	   *type;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_BOOL(false);
	type = PG_GETARG_TEXT_PP(1);
	arr = path_array(PG_GETARG_JSONB_P(0), "status", "conditions");
	if (arr == NULL)
		PG_RETURN_BOOL(false);
	it = JsonbIteratorInit(arr);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		JsonbContainer *c;

		if (tok != WJB_ELEM || (c = container(&v)) == NULL)
			continue;
		if (string_equals(object_field(c, "type"), VARDATA_ANY(type), VARSIZE_ANY_EXHDR(type)) &&
			string_equals(object_field(c, "status"), "True", 4))
			PG_RETURN_BOOL(true);
	}
	PG_RETURN_BOOL(false);
}

/*
 * scalar: the scalar a jsonb value holds (jsonb stores a top-level scalar
 * as a one-element raw-scalar array), or false for an object or array.
 */
static bool
scalar(Jsonb *j, JsonbValue *v)
{
	return JsonbExtractScalar(&j->root, v);
}

PG_FUNCTION_INFO_V1(kwatch_jsonb_integer);

/*
 * kwatch_jsonb_integer: SQL kwatch.jsonb_integer(value jsonb) -> bigint, a
 * JSON number truncated toward zero, NULL for anything else or outside
 * bigint (a printer column of type integer, README "Custom resources").
 */
Datum
kwatch_jsonb_integer(PG_FUNCTION_ARGS)
{
	JsonbValue	v;
	Datum		n;

	if (!scalar(PG_GETARG_JSONB_P(0), &v) || v.type != jbvNumeric ||
		numeric_is_nan(v.val.numeric) || numeric_is_inf(v.val.numeric))
		PG_RETURN_NULL();
	n = NumericGetDatum(v.val.numeric);
	if (DatumGetBool(DirectFunctionCall2(numeric_gt, n,
										 DirectFunctionCall1(int8_numeric, Int64GetDatum(PG_INT64_MAX)))) ||
		DatumGetBool(DirectFunctionCall2(numeric_lt, n,
										 DirectFunctionCall1(int8_numeric, Int64GetDatum(PG_INT64_MIN)))))
		PG_RETURN_NULL();
	PG_RETURN_DATUM(DirectFunctionCall1(numeric_int8,
										DirectFunctionCall2(numeric_trunc, n, Int32GetDatum(0))));
}

PG_FUNCTION_INFO_V1(kwatch_jsonb_number);

/*
 * kwatch_jsonb_number: SQL kwatch.jsonb_number(value jsonb) -> double
 * precision, a JSON number whose magnitude is below 1e300, else NULL (a
 * printer column of type number).
 */
Datum
kwatch_jsonb_number(PG_FUNCTION_ARGS)
{
	JsonbValue	v;
	float8		d;

	if (!scalar(PG_GETARG_JSONB_P(0), &v) || v.type != jbvNumeric || numeric_is_nan(v.val.numeric) ||
		numeric_is_inf(v.val.numeric))
		PG_RETURN_NULL();
	d = DatumGetFloat8(DirectFunctionCall1(numeric_float8_no_overflow,
										   NumericGetDatum(v.val.numeric)));
	if (isnan(d) || fabs(d) >= 1e300)
		PG_RETURN_NULL();
	PG_RETURN_FLOAT8(d);
}

PG_FUNCTION_INFO_V1(kwatch_jsonb_boolean);

/*
 * kwatch_jsonb_boolean: SQL kwatch.jsonb_boolean(value jsonb) -> boolean,
 * a JSON true or false, else NULL (a printer column of type boolean).
 */
Datum
kwatch_jsonb_boolean(PG_FUNCTION_ARGS)
{
	JsonbValue	v;

	if (!scalar(PG_GETARG_JSONB_P(0), &v) || v.type != jbvBool)
		PG_RETURN_NULL();
	PG_RETURN_BOOL(v.val.boolean);
}

PG_FUNCTION_INFO_V1(kwatch_jsonb_timestamp);

/*
 * kwatch_jsonb_timestamp: SQL kwatch.jsonb_timestamp(value jsonb) ->
 * timestamptz, a JSON string holding an RFC 3339 date-time (rfc3339), else
 * NULL, as is one out of range (a printer column of type date).
 */
Datum
kwatch_jsonb_timestamp(PG_FUNCTION_ARGS)
{
	JsonbValue	v;
	TimestampTz ts;

	if (!scalar(PG_GETARG_JSONB_P(0), &v) || v.type != jbvString ||
		!rfc3339(v.val.string.val, v.val.string.len) ||
		!parse_timestamptz(pnstrdup(v.val.string.val, v.val.string.len), &ts))
		PG_RETURN_NULL();
	PG_RETURN_TIMESTAMPTZ(ts);
}
