/*-------------------------------------------------------------------------
 *
 * discovery.c
 *		Resolving a user's resource name through the API server's
 *		discovery documents, and probing a LIST before registering it.
 *
 * PROTOCOL 29 (client-go restmapper/discovery.go): /api/v1 and
 * /apis/<group>/<version> list resources with name (plural), singularName,
 * shortNames, kind, namespaced and verbs; names with a slash are
 * subresources.  A user's name ("pods", "pod", "po", "Pod",
 * "deployments.apps", "crontabs.stable.example.com") is matched against the
 * core group first, then every group in the order /apis gives them, the
 * preferred version first.  CustomResourceDefinitions appear there once
 * established, so a CRD created after the worker started is found the same
 * way.  A group version that fails to answer (an aggregated API that is
 * down) is skipped, as kubectl does.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
/* fmgrprotos.h declares a json_object() function: keep it out of json-c's way */
#define json_object pg_json_object_fn
#include "utils/builtins.h"
#undef json_object
#include "utils/formatting.h"

#include <json-c/json.h>

#include "kw_common.h"
#include "kw_worker.h"
#include "kw_fdw.h"

/* get_json: GET `path` and parse it; NULL (with a DEBUG1 note) on failure unless must. */
static json_object *
get_json(KwClusterConfig *cfg, const char *path, bool must)
{
	KwHttpResponse resp;
	json_object *obj;

	kw_http_get(cfg, path, &resp);
	if (resp.status != 200)
	{
		if (must)
			kw_http_raise_status(cfg, psprintf("discovery request GET %s", path), &resp);
		elog(DEBUG1, "kwatch: skipping %s: HTTP %ld", path, resp.status);
		return NULL;
	}
	obj = json_tokener_parse(resp.body.data);
	if (obj == NULL && must)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_JSON_TEXT),
				 errmsg("discovery document %s from server \"%s\" is not valid JSON",
						path, cfg->server_name)));
	return obj;
}

/*
 * match_resource_list: searches an APIResourceList for `name`; fills *out
 * and returns true on a match of plural, singular, short name or kind.
 */
static bool
match_resource_list(json_object *list, const char *name, const char *group,
					const char *version, KwResource *out)
{
	json_object *resources;
	size_t		n;

	if (!list || !json_object_object_get_ex(list, "resources", &resources) ||
		!json_object_is_type(resources, json_type_array))
		return false;
	n = json_object_array_length(resources);
	for (size_t i = 0; i < n; i++)
	{
		json_object *r = json_object_array_get_idx(resources, i);
		const char *plural = kw_json_get_string(r, "name");
		const char *singular = kw_json_get_string(r, "singularName");
		const char *kind = kw_json_get_string(r, "kind");
		json_object *shorts,
				   *verbs,
				   *ns;
		bool		hit = false;

		if (plural == NULL || strchr(plural, '/') != NULL)
			continue;			/* subresource */
		if (strcmp(plural, name) == 0 ||
			(singular && singular[0] && strcmp(singular, name) == 0) ||
			(kind && pg_strcasecmp(kind, name) == 0))
			hit = true;
		if (!hit && json_object_object_get_ex(r, "shortNames", &shorts) &&
			json_object_is_type(shorts, json_type_array))
		{
			for (size_t j = 0; j < json_object_array_length(shorts); j++)
			{
				const char *s = json_object_get_string(json_object_array_get_idx(shorts, j));

				if (s && strcmp(s, name) == 0)
					hit = true;
			}
		}
		if (!hit)
			continue;

		out->api_group = pstrdup(group);
		out->api_version = pstrdup(version);
		out->plural = pstrdup(plural);
		out->kind = pstrdup(kind ? kind : "");
		out->namespaced = json_object_object_get_ex(r, "namespaced", &ns) &&
			json_object_get_boolean(ns);
		out->verbs = NIL;
		if (json_object_object_get_ex(r, "verbs", &verbs) &&
			json_object_is_type(verbs, json_type_array))
		{
			for (size_t j = 0; j < json_object_array_length(verbs); j++)
			{
				const char *v = json_object_get_string(json_object_array_get_idx(verbs, j));

				if (v)
					out->verbs = lappend(out->verbs, pstrdup(v));
			}
		}
		return true;
	}
	return false;
}

/*
 * resolve: finds `name` (lower-cased, optionally "resource.group") on the
 * cluster.  Returns false when no group serves it.  Frees json-c memory
 * even on ERROR.
 */
static bool
resolve(KwClusterConfig *cfg, const char *name, KwResource *out)
{
	char	   *res = pstrdup(name);
	char	   *group = NULL;
	char	   *dot = strchr(res, '.');
	json_object *volatile doc = NULL;
	volatile bool found = false;

	if (dot)
	{
		*dot = '\0';
		group = dot + 1;
	}

	PG_TRY();
	{
		/* core group: /api/v1 (PROTOCOL 29: core first) */
		if (group == NULL || strcmp(group, "core") == 0 || group[0] == '\0')
		{
			doc = get_json(cfg, "/api/v1", true);
			found = match_resource_list(doc, res, "", "v1", out);
			json_object_put(doc);
			doc = NULL;
		}
		if (!found && !(group && (strcmp(group, "core") == 0 || group[0] == '\0')))
		{
			json_object *groups;
			json_object *list = get_json(cfg, "/apis", true);

			doc = list;
			if (json_object_object_get_ex(list, "groups", &groups) &&
				json_object_is_type(groups, json_type_array))
			{
				for (size_t i = 0; !found && i < json_object_array_length(groups); i++)
				{
					json_object *g = json_object_array_get_idx(groups, i);
					const char *gname = kw_json_get_string(g, "name");
					json_object *pref,
							   *versions;
					const char *pv = NULL;

					if (gname == NULL || (group && strcmp(group, gname) != 0))
						continue;
					if (json_object_object_get_ex(g, "preferredVersion", &pref))
						pv = kw_json_get_string(pref, "version");
					if (!json_object_object_get_ex(g, "versions", &versions) ||
						!json_object_is_type(versions, json_type_array))
						continue;
					/* preferred version first, then the others in order */
					for (int pass = 0; !found && pass < 2; pass++)
					{
						for (size_t j = 0; !found && j < json_object_array_length(versions); j++)
						{
							const char *v = kw_json_get_string(json_object_array_get_idx(versions, j), "version");
							json_object *rl;

							if (v == NULL)
								continue;
							if ((pass == 0) != (pv != NULL && strcmp(v, pv) == 0))
								continue;
							rl = get_json(cfg, psprintf("/apis/%s/%s", gname, v), false);
							found = match_resource_list(rl, res, gname, v, out);
							if (rl)
								json_object_put(rl);
						}
					}
				}
			}
		}
	}
	PG_FINALLY();
	{
		if (doc)
			json_object_put(doc);
	}
	PG_END_TRY();
	return found;
}

/*
 * server_config_checked: the cluster config of foreign server `server` for
 * the role calling kwatch.watch() (kw_current_caller, privileged.c), after
 * checking that role has USAGE on the server.
 */
static KwClusterConfig *
server_config_checked(const char *server, Oid *caller)
{
	ForeignServer *fs = GetForeignServerByName(server, false);
	Oid			user = kw_current_caller();
	AclResult	aclresult = kw_server_usage(fs->serverid, user);

	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, OBJECT_FOREIGN_SERVER, fs->servername);
	if (caller)
		*caller = user;
	return kw_cluster_config_for_server(server, user);
}

PG_FUNCTION_INFO_V1(kwatch_discover);

/*
 * kwatch_discover: SQL kwatch._discover(server text, resource text) ->
 * (api_group, api_version, plural, kind, namespaced, verbs text[], caller
 * oid).  ERRORs: unknown server (undefined_object), no USAGE on it, the
 * API server unreachable or refusing discovery (see http.c), the resource
 * not served (undefined_object, with a hint).
 */
Datum
kwatch_discover(PG_FUNCTION_ARGS)
{
	char	   *server = text_to_cstring(PG_GETARG_TEXT_PP(0));
	char	   *resource = text_to_cstring(PG_GETARG_TEXT_PP(1));
	char	   *name;
	KwClusterConfig *cfg;
	KwResource	r;
	Oid			caller;
	TupleDesc	tupdesc;
	Datum		values[7];
	bool		nulls[7] = {0};
	Datum	   *verbs;
	int			i = 0;
	ListCell   *lc;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	name = asc_tolower(resource, strlen(resource));
	if (name[0] == '\0' || strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-.") != strlen(name))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid resource name \"%s\"", kw_excerpt(resource)),
				 errhint("Use a resource name such as \"pods\", \"deploy\" or \"deployments.apps\".")));

	cfg = server_config_checked(server, &caller);
	if (!resolve(cfg, name, &r))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("resource \"%s\" not found on server \"%s\"", kw_excerpt(resource), server),
				 errhint("\"kubectl api-resources\" lists the resources the cluster serves; a CustomResourceDefinition must be established first.")));

	verbs = palloc(sizeof(Datum) * Max(1, list_length(r.verbs)));
	foreach(lc, r.verbs)
		verbs[i++] = CStringGetTextDatum((char *) lfirst(lc));

	values[0] = CStringGetTextDatum(r.api_group);
	values[1] = CStringGetTextDatum(r.api_version);
	values[2] = CStringGetTextDatum(r.plural);
	values[3] = CStringGetTextDatum(r.kind);
	values[4] = BoolGetDatum(r.namespaced);
	values[5] = PointerGetDatum(construct_array(verbs, i, TEXTOID, -1, false, TYPALIGN_INT));
	values[6] = ObjectIdGetDatum(caller);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls)));
}

PG_FUNCTION_INFO_V1(kwatch_probe);

/*
 * kwatch_probe: SQL kwatch._probe(server, api_group, api_version, plural,
 * namespace, label_selector, field_selector) -> text.  Sends the LIST the
 * watch will send, with limit=1, as the calling role; returns the list's
 * resourceVersion.  ERRORs with the API server's message and a mapped
 * SQLSTATE when it refuses (a bad selector is 400 -> invalid_parameter_value,
 * RBAC is 403 -> insufficient_privilege).
 */
Datum
kwatch_probe(PG_FUNCTION_ARGS)
{
	char	   *server,
			   *group,
			   *version,
			   *plural;
	KwClusterConfig *cfg;
	StringInfoData path;
	KwHttpResponse resp;
	json_object *obj;
	json_object *meta;
	char	   *rv = NULL;

	for (int i = 0; i < 4; i++)
		if (PG_ARGISNULL(i))
			elog(ERROR, "kwatch._probe: argument %d is null", i + 1);
	server = text_to_cstring(PG_GETARG_TEXT_PP(0));
	group = text_to_cstring(PG_GETARG_TEXT_PP(1));
	version = text_to_cstring(PG_GETARG_TEXT_PP(2));
	plural = text_to_cstring(PG_GETARG_TEXT_PP(3));

	cfg = server_config_checked(server, NULL);
	initStringInfo(&path);
	if (group[0] == '\0')
		appendStringInfo(&path, "/api/%s", version);
	else
		appendStringInfo(&path, "/apis/%s/%s", group, version);
	if (!PG_ARGISNULL(4))
		appendStringInfo(&path, "/namespaces/%s", text_to_cstring(PG_GETARG_TEXT_PP(4)));
	appendStringInfo(&path, "/%s", plural);
	kw_url_append_param(&path, "limit", "1");
	if (!PG_ARGISNULL(5))
		kw_url_append_param(&path, "labelSelector", text_to_cstring(PG_GETARG_TEXT_PP(5)));
	if (!PG_ARGISNULL(6))
		kw_url_append_param(&path, "fieldSelector", text_to_cstring(PG_GETARG_TEXT_PP(6)));

	kw_http_get(cfg, path.data, &resp);
	if (resp.status != 200)
		kw_http_raise_status(cfg, psprintf("listing %s", plural), &resp);

	obj = json_tokener_parse(resp.body.data);
	if (obj && json_object_object_get_ex(obj, "metadata", &meta))
	{
		const char *s = kw_json_get_string(meta, "resourceVersion");

		if (s)
			rv = pstrdup(s);
	}
	if (obj)
		json_object_put(obj);
	if (rv == NULL)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(rv));
}

/*
 * kw_discover_resource: resolves a user's resource name (lower-cased,
 * "pods", "po", "deployments.apps", ...) on cluster `cfg` as
 * kwatch._discover does (PROTOCOL 29), filling *out (palloc'd in the
 * current context).  Returns false when no group serves it; ERRORs as
 * kw_http_get when the API server is unreachable or refuses discovery.
 */
bool
kw_discover_resource(KwClusterConfig *cfg, const char *name, KwResource *out)
{
	KwResource	r;

	if (!resolve(cfg, name, &r))
		return false;
	*out = r;
	return true;
}

/* has_verb: whether the list of char * verbs holds `verb`. */
static bool
has_verb(List *verbs, const char *verb)
{
	ListCell   *lc;

	foreach(lc, verbs)
		if (strcmp((char *) lfirst(lc), verb) == 0)
			return true;
	return false;
}

/*
 * add_listable: appends to *out a KwResource for every resource of the
 * APIResourceList `list` (group/version) that has the list verb; names with
 * a slash are subresources and are skipped (PROTOCOL 29).
 */
static void
add_listable(json_object *list, const char *group, const char *version,
			 List **out)
{
	json_object *resources;

	if (!list || !json_object_object_get_ex(list, "resources", &resources) ||
		!json_object_is_type(resources, json_type_array))
		return;
	for (size_t i = 0; i < json_object_array_length(resources); i++)
	{
		json_object *r = json_object_array_get_idx(resources, i);
		const char *plural = kw_json_get_string(r, "name");
		KwResource	one;
		KwResource *res;

		if (plural == NULL || strchr(plural, '/') != NULL)
			continue;
		if (!match_resource_list(list, plural, group, version, &one) ||
			!has_verb(one.verbs, "list"))
			continue;
		res = palloc(sizeof(KwResource));
		*res = one;
		*out = lappend(*out, res);
	}
}

/*
 * kw_discover_listable: every resource of cluster `cfg` that can be listed,
 * as a List of KwResource *: the core group (/api/v1) first, then each
 * group of /apis in the server's order, each resource at the group's
 * preferred version or, when that version lacks it, the first other version
 * serving it (client-go discovery.ServerPreferredResources, which "kubectl
 * api-resources --verbs=list" shows).  A group version that
 * fails to answer is skipped (an aggregated API that is down), as kubectl
 * does.  ERRORs when /api/v1 or /apis cannot be read.
 */
List *
kw_discover_listable(KwClusterConfig *cfg)
{
	List	   *out = NIL;
	json_object *volatile doc = NULL;

	PG_TRY();
	{
		json_object *groups;

		doc = get_json(cfg, "/api/v1", true);
		add_listable(doc, "", "v1", &out);
		json_object_put(doc);
		doc = NULL;
		doc = get_json(cfg, "/apis", true);
		if (json_object_object_get_ex(doc, "groups", &groups) &&
			json_object_is_type(groups, json_type_array))
		{
			for (size_t i = 0; i < json_object_array_length(groups); i++)
			{
				json_object *g = json_object_array_get_idx(groups, i);
				const char *gname = kw_json_get_string(g, "name");
				json_object *pref,
						   *versions;
				const char *pv = NULL;

				if (json_object_object_get_ex(g, "preferredVersion", &pref))
					pv = kw_json_get_string(pref, "version");
				if (gname == NULL || pv == NULL ||
					!json_object_object_get_ex(g, "versions", &versions) ||
					!json_object_is_type(versions, json_type_array))
					continue;
				/* preferred version first, then the others for what it lacks */
				for (int pass = 0; pass < 2; pass++)
				{
					for (size_t j = 0; j < json_object_array_length(versions); j++)
					{
						const char *v = kw_json_get_string(json_object_array_get_idx(versions, j), "version");
						json_object *rl;
						List	   *found = NIL;
						ListCell   *lc;

						if (v == NULL || (pass == 0) != (strcmp(v, pv) == 0))
							continue;
						rl = get_json(cfg, psprintf("/apis/%s/%s", gname, v), false);
						add_listable(rl, gname, v, &found);
						if (rl)
							json_object_put(rl);
						foreach(lc, found)
						{
							KwResource *r = (KwResource *) lfirst(lc);
							bool		seen = false;
							ListCell   *lc2;

							foreach(lc2, out)
							{
								KwResource *o = (KwResource *) lfirst(lc2);

								if (strcmp(o->api_group, r->api_group) == 0 &&
									strcmp(o->plural, r->plural) == 0)
									seen = true;
							}
							if (!seen)
								out = lappend(out, r);
						}
					}
				}
			}
		}
	}
	PG_FINALLY();
	{
		if (doc)
			json_object_put(doc);
	}
	PG_END_TRY();
	return out;
}

PG_FUNCTION_INFO_V1(kwatch_printer_columns);

/*
 * kwatch_printer_columns: SQL kwatch._printer_columns(server, api_group,
 * plural, api_version) -> jsonb.  When (api_group, plural) is a custom
 * resource, the additionalPrinterColumns of its version `api_version`
 * (apiextensions.k8s.io/v1 CustomResourceDefinition
 * spec.versions[].additionalPrinterColumns, the columns `kubectl get`
 * shows: [{name, type, jsonPath, ...}]), as the calling role reads the
 * CRD; an empty array when the version has none; NULL when there is no
 * such CRD (a built-in group: 404) or the role may not read CRDs (403:
 * RBAC's view role does not include them), since printer columns are a
 * convenience that must not stop a watch.  Other statuses and transport
 * failures ERROR as kw_http_get / kw_http_raise_status.
 */
Datum
kwatch_printer_columns(PG_FUNCTION_ARGS)
{
	char	   *server = text_to_cstring(PG_GETARG_TEXT_PP(0));
	char	   *group = text_to_cstring(PG_GETARG_TEXT_PP(1));
	char	   *plural = text_to_cstring(PG_GETARG_TEXT_PP(2));
	char	   *version = text_to_cstring(PG_GETARG_TEXT_PP(3));
	KwClusterConfig *cfg;
	KwHttpResponse resp;
	json_object *volatile doc = NULL;
	char	   *result = NULL;

	if (group[0] == '\0')
		PG_RETURN_NULL();		/* the core group has no CRDs */
	cfg = server_config_checked(server, NULL);
	kw_http_get(cfg, psprintf("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/%s.%s",
							  plural, group), &resp);
	if (resp.status == 404 || resp.status == 403)
		PG_RETURN_NULL();
	if (resp.status != 200)
		kw_http_raise_status(cfg, psprintf("reading the CustomResourceDefinition %s.%s", plural, group),
							 &resp);

	PG_TRY();
	{
		json_object *spec,
				   *versions;

		doc = json_tokener_parse(resp.body.data);
		if (doc && json_object_object_get_ex(doc, "spec", &spec) &&
			json_object_object_get_ex(spec, "versions", &versions) &&
			json_object_is_type(versions, json_type_array))
		{
			for (size_t i = 0; i < json_object_array_length(versions); i++)
			{
				json_object *v = json_object_array_get_idx(versions, i);
				const char *name = kw_json_get_string(v, "name");
				json_object *cols;

				if (name == NULL || strcmp(name, version) != 0)
					continue;
				if (json_object_object_get_ex(v, "additionalPrinterColumns", &cols) &&
					json_object_is_type(cols, json_type_array))
					result = pstrdup(json_object_to_json_string_ext(cols, JSON_C_TO_STRING_PLAIN));
				else
					result = pstrdup("[]");
			}
		}
	}
	PG_FINALLY();
	{
		if (doc)
			json_object_put(doc);
	}
	PG_END_TRY();
	if (result == NULL)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(result)));
}
