/*-------------------------------------------------------------------------
 *
 * write.c
 *		Writes to a cluster: the server-side apply request of one
 *		object and the meaning of its answer.  Used in the statement by
 *		kwatch.apply() (functions/apply.c) and after COMMIT by the request
 *		sender (sender/sender.c); both send with the credentials of the role
 *		that asked (connection.c).
 *
 * Server-side apply: PATCH of the object's path with Content-Type
 * application/apply-patch+yaml (JSON is YAML), ?fieldManager=<manager>,
 * &force=true when asked, &dryRun=All for a dry run
 * (https://kubernetes.io/docs/reference/using-api/server-side-apply/;
 * client-go's typed Apply, rest.Request with types.ApplyPatchType).  The
 * answer is the object as stored (200, or 201 when created), or a Status:
 * kw_write_outcome() maps it to a SQLSTATE as the field's meanings say
 * (apimachinery/pkg/api/errors): 409 with causes of type
 * FieldManagerConflict is a field-manager conflict (KW409, each field and
 * its manager in DETAIL), another 409 a stale resourceVersion (40001),
 * 422 and 400 an invalid object (22023, the causes in DETAIL), 403 forbidden
 * (42501), 404 not found (42704), and the rest as kw_http_status_sqlstate.
 * The meaning goes by the Status's reason before its code: Invalid and
 * BadRequest are 22023 whatever the code, and so is the 500 a 1.20 server
 * answers for an apply patch that does not fit the object's schema (an
 * unknown field, a string for a number: apiserver's fieldmanager
 * structuredmerge.go, "failed to create typed patch object", an error
 * without a reason; later servers answer 400 BadRequest), never retried.
 * A 404 whose details.kind is "namespaces" names the missing namespace
 * and hints at creating it (kw_write_raise).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <json-c/json.h>

#include "lib/stringinfo.h"

#include "kw_common.h"
#include "kw_cluster.h"
#include "kw_http.h"
#include "kw_write.h"

/* append_segment: one path segment, percent-encoded but RFC 3986's unreserved and ':' */
static void
append_segment(StringInfo path, const char *segment)
{
	appendStringInfoChar(path, '/');
	for (const unsigned char *p = (const unsigned char *) segment; *p; p++)
	{
		if (kw_ascii_alnum(*p) || *p == '-' || *p == '.' || *p == '_' || *p == '~' || *p == ':')
			appendStringInfoChar(path, (char) *p);
		else
			appendStringInfo(path, "%%%02X", *p);
	}
}

/*
 * kw_write_path: the URL path of object `name` of resource `r` in
 * `namespace` (NULL or ignored for a cluster-scoped resource):
 * /api/v1/namespaces/<ns>/<plural>/<name> or
 * /apis/<group>/<version>/[namespaces/<ns>/]<plural>/<name>, each segment
 * percent-encoded.  Palloc'd.
 */
char *
kw_write_path(const KwResource *r, const char *namespace, const char *name)
{
	StringInfoData path;

	initStringInfo(&path);
	if (r->api_group[0] == '\0')
		appendStringInfoString(&path, "/api");
	else
	{
		appendStringInfoString(&path, "/apis");
		append_segment(&path, r->api_group);
	}
	append_segment(&path, r->api_version);
	if (r->namespaced && namespace != NULL)
	{
		append_segment(&path, "namespaces");
		append_segment(&path, namespace);
	}
	append_segment(&path, r->plural);
	append_segment(&path, name);
	return path.data;
}

/*
 * kw_write_apply: sends the server-side apply of `body` (the manifest as
 * JSON text) to `path` (kw_write_path) on cluster `cfg`: PATCH
 * ?fieldManager=...[&force=true][&dryRun=All], Content-Type
 * application/apply-patch+yaml; fills *resp (kw_http_request).  ERRORs as
 * kw_http_request (unreachable, TLS, credentials).
 */
void
kw_write_apply(KwClusterConfig *cfg, const char *path, const char *body,
			   const char *field_manager, bool force, bool dry_run,
			   KwHttpResponse *resp)
{
	StringInfoData url;

	initStringInfo(&url);
	appendStringInfoString(&url, path);
	kw_url_append_param(&url, "fieldManager", field_manager);
	if (force)
		kw_url_append_param(&url, "force", "true");
	if (dry_run)
		kw_url_append_param(&url, "dryRun", "All");
	kw_http_request(cfg, "PATCH", url.data, NULL, "application/apply-patch+yaml", body, resp);
}

/*
 * kw_write_delete: sends DELETE of `path` (kw_write_path) on cluster `cfg`
 * with `options` (a DeleteOptions object as JSON text: preconditions,
 * propagationPolicy, gracePeriodSeconds, dryRun) as its body; fills *resp.
 * ERRORs as kw_http_request.
 */
void
kw_write_delete(KwClusterConfig *cfg, const char *path, const char *options,
				KwHttpResponse *resp)
{
	kw_http_request(cfg, "DELETE", path, NULL, "application/json", options, resp);
}

/*
 * causes: the lines of a Status's details.causes[], "field: message", or
 * with `withhold_values` "field: reason" (a cause's message may quote the
 * value: "Invalid value: \"...\"", apimachinery/pkg/util/validation/field)
 */
static void
append_causes(StringInfo out, json_object *status, bool withhold_values, bool *conflict)
{
	json_object *details;
	json_object *causes;

	*conflict = false;
	if (!json_object_object_get_ex(status, "details", &details) ||
		!json_object_object_get_ex(details, "causes", &causes) ||
		!json_object_is_type(causes, json_type_array))
		return;
	for (size_t i = 0; i < json_object_array_length(causes); i++)
	{
		json_object *c = json_object_array_get_idx(causes, i);
		const char *type = kw_json_get_string(c, "reason");
		const char *field = kw_json_get_string(c, "field");
		const char *message = kw_json_get_string(c, "message");

		if (type && strcmp(type, "FieldManagerConflict") == 0)
			*conflict = true;
		if (out->len > 0)
			appendStringInfoChar(out, '\n');
		if (field && *field)
			appendStringInfo(out, "%s: ", kw_excerpt(field));
		if (withhold_values)
			appendStringInfoString(out, type ? kw_excerpt(type) : "(no reason)");
		else
			appendStringInfoString(out, message ? kw_excerpt(message) : "(no message)");
	}
}

/* what a 1.20 server's 500 for an apply patch that does not fit the schema begins with */
#define TYPED_PATCH_REFUSED "failed to create typed patch object"

/*
 * typed_patch_refused: whether `resp` (a 500) is the 1.20 server's refusal
 * of an apply patch that does not fit the object's schema; if so *detail
 * says which field and why ("Field .spec.bogus: field not declared in
 * schema."), the field only with `withhold_values`.
 */
static bool
typed_patch_refused(KwHttpResponse *resp, bool withhold_values, char **detail)
{
	char	   *reason = NULL;
	char	   *message = kw_status_message(resp->body.data, resp->body.len, &reason);
	const char *rest;
	const char *colon;

	if (reason != NULL && strcmp(reason, "InternalError") != 0)
		return false;
	if (strncmp(message, TYPED_PATCH_REFUSED, strlen(TYPED_PATCH_REFUSED)) != 0)
		return false;
	rest = message + strlen(TYPED_PATCH_REFUSED);
	while (*rest == ':' || *rest == ' ')
		rest++;
	colon = strstr(rest, ": ");
	if (colon == NULL)
		*detail = psprintf("HTTP status 500: the object does not fit its schema.");
	else if (withhold_values)
		*detail = psprintf("Field %s does not fit its schema (HTTP status 500).",
						   kw_excerpt(pnstrdup(rest, colon - rest)));
	else
		*detail = psprintf("Field %s: %s (HTTP status 500).",
						   kw_excerpt(pnstrdup(rest, colon - rest)), kw_excerpt(colon + 2));
	return true;
}

/*
 * missing_namespace: the namespace a 404's Status names in its details
 * (kind "namespaces", apimachinery's NewNotFound for the namespace of a
 * namespaced object), or NULL
 */
static char *
missing_namespace(KwHttpResponse *resp)
{
	json_object *status;
	json_object *details;
	char	   *ns = NULL;
	json_tokener *tok;

	if (resp->status != 404 || resp->body.len == 0)
		return NULL;
	tok = json_tokener_new();
	status = json_tokener_parse_ex(tok, resp->body.data, resp->body.len);
	json_tokener_free(tok);
	if (status && json_object_is_type(status, json_type_object) &&
		json_object_object_get_ex(status, "details", &details) &&
		json_object_is_type(details, json_type_object))
	{
		const char *kind = kw_json_get_string(details, "kind");
		const char *name = kw_json_get_string(details, "name");

		if (kind && strcmp(kind, "namespaces") == 0 && name && *name && strlen(name) <= 63 &&
			strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-") == strlen(name))
			ns = pstrdup(name);	/* a DNS label: safe inside the hint's SQL literal */
	}
	if (status)
		json_object_put(status);
	return ns;
}

/*
 * kw_write_outcome: what the answer `resp` to a write means.  Returns true
 * for a 2xx (the object in resp->body); else false with *sqlstate (see the
 * file header), *message (the server's message, at most KW_ECHO_MAX bytes
 * of it), *detail (the causes, one per line, or the HTTP status and
 * reason; palloc'd) and *retry (whether sending it again later may
 * succeed: 429, 500, 502, 503, 504).  With `withhold_values` (a write of
 * a Secret) the server's message, which may quote the object it refused
 * (a 422 quotes the patched object, values included), is replaced by its
 * reason, and each cause by its field and reason: no value reaches the
 * error, its DETAIL, the log or kwatch.applies.
 */
bool
kw_write_outcome(KwHttpResponse *resp, bool withhold_values, int *sqlstate,
				 char **message, char **detail, bool *retry)
{
	json_object *status = NULL;
	char	   *reason = NULL;
	StringInfoData causes;
	bool		conflict = false;

	*retry = false;
	if (resp->status >= 200 && resp->status <= 299)
		return true;

	*message = kw_excerpt(kw_status_message(resp->body.data, resp->body.len, &reason));
	if (withhold_values)
		*message = psprintf("%s (the server's message is not shown: it may quote the Secret's values)",
							reason ? kw_excerpt(reason) : "refused");
	initStringInfo(&causes);
	if (resp->body.len > 0)
	{
		json_tokener *tok = json_tokener_new();

		status = json_tokener_parse_ex(tok, resp->body.data, resp->body.len);
		json_tokener_free(tok);
		if (status && json_object_is_type(status, json_type_object))
			append_causes(&causes, status, withhold_values, &conflict);
		if (status)
			json_object_put(status);
	}

	if (reason && (strcmp(reason, "Invalid") == 0 || strcmp(reason, "BadRequest") == 0))
	{
		*sqlstate = ERRCODE_INVALID_PARAMETER_VALUE;
		if (causes.len > 0)
			*detail = causes.data;
		else
			*detail = psprintf("HTTP status %ld, reason %s.", resp->status, reason);
		return false;
	}
	if (resp->status == 500 && typed_patch_refused(resp, withhold_values, detail))
	{
		*sqlstate = ERRCODE_INVALID_PARAMETER_VALUE;
		return false;
	}

	switch (resp->status)
	{
		case 409:
			if (conflict)
				*sqlstate = ERRCODE_KW_FIELD_MANAGER_CONFLICT;
			else if (reason && strcmp(reason, "AlreadyExists") == 0)
				*sqlstate = ERRCODE_DUPLICATE_OBJECT;
			else
				*sqlstate = ERRCODE_T_R_SERIALIZATION_FAILURE;
			break;
		case 400:
		case 415:
		case 422:
			*sqlstate = ERRCODE_INVALID_PARAMETER_VALUE;
			break;
		case 403:
			*sqlstate = ERRCODE_INSUFFICIENT_PRIVILEGE;
			break;
		case 404:
		case 410:
			*sqlstate = ERRCODE_UNDEFINED_OBJECT;
			break;
		default:
			*sqlstate = kw_http_status_sqlstate(resp->status);
			break;
	}
	*retry = resp->status == 429 || resp->status == 500 || resp->status == 502 ||
		resp->status == 503 || resp->status == 504;
	if (causes.len > 0)
		*detail = causes.data;
	else
		*detail = psprintf("HTTP status %ld%s%s.", resp->status,
						   reason ? ", reason " : "", reason ? kw_excerpt(reason) : "");
	return false;
}

/*
 * kw_write_raise: ERRORs with the meaning of a failed write's answer
 * (kw_write_outcome): "Kubernetes API server of "<server>" refused <what>:
 * <message>", its SQLSTATE and DETAIL, and for a field-manager conflict a
 * hint about force; `withhold_values` as kw_write_outcome.  Never returns.
 */
void
kw_write_raise(KwClusterConfig *cfg, const char *what, KwHttpResponse *resp,
			   bool withhold_values)
{
	int			sqlstate;
	char	   *message;
	char	   *detail;
	bool		retry;

	char	   *namespace;

	if (kw_write_outcome(resp, withhold_values, &sqlstate, &message, &detail, &retry))
		elog(ERROR, "kw_write_raise called for a successful write");
	namespace = missing_namespace(resp);
	if (namespace)
		ereport(ERROR,
				(errcode(sqlstate),
				 errmsg("Kubernetes API server of \"%s\" refused %s: namespace \"%s\" does not exist",
						cfg->server_name ? cfg->server_name : cfg->api_server, what, namespace),
				 errdetail_internal("%s", detail),
				 errhint("Create it first, in the same transaction or before: SELECT kwatch.apply('{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"%s\"}}');",
						 namespace)));
	ereport(ERROR,
			(errcode(sqlstate),
			 errmsg("Kubernetes API server of \"%s\" refused %s: %s",
					cfg->server_name ? cfg->server_name : cfg->api_server, what, message),
			 errdetail_internal("%s", detail),
			 sqlstate == ERRCODE_KW_FIELD_MANAGER_CONFLICT ?
			 errhint("Another field manager owns these fields: leave them out of the manifest, or take them over with force => true.") :
			 resp->status == 401 ?
			 errhint("Check the token or client certificate of the server or its user mapping.") : 0));
}
