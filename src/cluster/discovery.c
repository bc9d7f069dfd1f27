/*-------------------------------------------------------------------------
 *
 * discovery.c
 *		Resolving a user's resource name through the API server's
 *		discovery documents, and probing a LIST before registering it.
 *
 * PROTOCOL 29 (client-go restmapper/discovery.go): the core group and
 * every group list resources with name (plural), singularName, shortNames,
 * kind, namespaced and verbs; names with a slash are subresources.  A
 * user's name ("pods", "pod", "po", "Pod", "deployments.apps",
 * "crontabs.stable.example.com") is matched against the core group first,
 * then every group in the order the server gives them, the preferred
 * version first.  CustomResourceDefinitions appear there once established,
 * so a CRD created after the worker started is found the same way.  A
 * group version that fails to answer (an aggregated API that is down) is
 * skipped, as kubectl does.
 *
 * Two formats (walk()): aggregated discovery (GET /api and GET /apis with
 * the Accept header of KW_ACCEPT_AGGREGATED, apidiscovery.k8s.io/v2, GA in
 * 1.30, v2beta1 in 1.26-1.29: every group, version and resource in one
 * document each; client-go discovery/aggregated_discovery.go), used when
 * the server answers with it; the legacy documents otherwise (APIGroupList
 * at /apis, an APIResourceList per /apis/<group>/<version>).  The core
 * group is read from /api/v1 on either.  A group-qualified name is resolved
 * through /apis/<group> alone.  A server without /api/v1 (a generic API
 * server that serves custom resources only) has no core group.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
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
#include "kw_cluster.h"
#include "kw_http.h"

/*
 * Accept header of aggregated discovery (client-go discovery_client.go
 * AcceptV2 + AcceptV2Beta1 + plain JSON, in that order of preference): a
 * server of 1.30+ answers apidiscovery.k8s.io/v2, 1.26-1.29 v2beta1 (same
 * fields), an older one its legacy document (APIVersions, APIGroupList).
 */
#define KW_ACCEPT_AGGREGATED \
	"application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList," \
	"application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList," \
	"application/json"

/* What fetch() does with a status other than 200. */
typedef enum FetchMode
{
	FETCH_MUST,					/* raise it */
	FETCH_MUST_OR_404,			/* raise it, except 404: NULL */
	FETCH_SKIP					/* NULL (a group version that fails to answer) */
} FetchMode;

/*
 * fetch: GET `path` with `accept` (NULL: application/json) and parse it.
 * NULL when the status is not 200 and `mode` allows it (a DEBUG1 note for
 * FETCH_SKIP).  ERRORs: the mapped SQLSTATE of the status
 * (kw_http_raise_status), 22032 for a body that is not JSON (except in
 * FETCH_SKIP mode).  Each request is logged at DEBUG2 as "kwatch: discovery
 * GET <path>" (the tests count them).  The caller frees the result with
 * json_object_put.
 */
static json_object *
fetch(KwClusterConfig *cfg, const char *path, const char *accept, FetchMode mode)
{
	KwHttpResponse resp;
	json_object *obj;

	kw_http_get_accept(cfg, path, accept, &resp);
	elog(DEBUG2, "kwatch: discovery GET %s: HTTP %ld, %d bytes", path, resp.status, resp.body.len);
	if (resp.status != 200)
	{
		if (mode == FETCH_MUST || (mode == FETCH_MUST_OR_404 && resp.status != 404))
			kw_http_raise_status(cfg, psprintf("discovery request GET %s", path), &resp);
		if (mode == FETCH_SKIP)
			elog(DEBUG1, "kwatch: skipping %s: HTTP %ld", path, resp.status);
		return NULL;
	}
	obj = json_tokener_parse(resp.body.data);
	if (obj == NULL && mode != FETCH_SKIP)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_JSON_TEXT),
				 errmsg("discovery document %s from server \"%s\" is not valid JSON",
						path, cfg->server_name)));
	return obj;
}

/* has_kind: whether document `doc` says kind `kind`. */
static bool
has_kind(json_object *doc, const char *kind)
{
	const char *k = doc ? kw_json_get_string(doc, "kind") : NULL;

	return k != NULL && strcmp(k, kind) == 0;
}

/*
 * is_aggregated: whether `doc` is an aggregated discovery document
 * (kind APIGroupDiscoveryList of apidiscovery.k8s.io/v2 or v2beta1) rather
 * than a legacy one: the server chose by the Accept header, and a server
 * without aggregated discovery (before 1.26, or with the feature off)
 * answers plain JSON.
 */
static bool
is_aggregated(json_object *doc)
{
	const char *av = doc ? kw_json_get_string(doc, "apiVersion") : NULL;

	return has_kind(doc, "APIGroupDiscoveryList") && av != NULL &&
		strncmp(av, "apidiscovery.k8s.io/", 20) == 0;
}

/*
 * DiscEntry: one resource as discovery lists it, in either format: the
 * KwResource plus what only name matching needs.
 */
typedef struct DiscEntry
{
	KwResource	r;
	const char *singular;		/* "" when not given */
	json_object *short_names;	/* array of strings, or NULL */
} DiscEntry;

/* Called for each resource in discovery order; returns true to stop. */
typedef bool (*DiscVisit) (DiscEntry *e, void *arg);

/* string_list: the strings of json array `arr` (member of `obj`), palloc'd. */
static List *
string_list(json_object *obj, const char *member)
{
	json_object *arr;
	List	   *out = NIL;

	if (obj && json_object_object_get_ex(obj, member, &arr) &&
		json_object_is_type(arr, json_type_array))
	{
		for (size_t j = 0; j < json_object_array_length(arr); j++)
		{
			const char *v = json_object_get_string(json_object_array_get_idx(arr, j));

			if (v)
				out = lappend(out, pstrdup(v));
		}
	}
	return out;
}

/*
 * visit_resource: hands `visit` the DiscEntry of resource object `r`, in
 * either discovery format: what the formats name differently the caller
 * has read (`singular` and `kind` NULL for ""; `namespaced` from
 * namespaced or from scope), what they share (verbs, shortNames) is read
 * here.  Returns what the visitor returns: true to stop.
 */
static bool
visit_resource(json_object *r, const char *group, const char *version,
			   const char *plural, const char *singular, const char *kind,
			   bool namespaced, DiscVisit visit, void *arg)
{
	DiscEntry	e;

	e.r.api_group = pstrdup(group);
	e.r.api_version = pstrdup(version);
	e.r.plural = pstrdup(plural);
	e.r.kind = pstrdup(kind ? kind : "");
	e.r.namespaced = namespaced;
	e.r.verbs = string_list(r, "verbs");
	e.r.names = NIL;
	e.singular = singular ? singular : "";
	if (!json_object_object_get_ex(r, "shortNames", &e.short_names))
		e.short_names = NULL;
	return visit(&e, arg);
}

/*
 * walk_resource_list: visits the resources of a legacy APIResourceList
 * (/api/v1, /apis/<group>/<version>: name, singularName, shortNames, kind,
 * namespaced, verbs); names with a slash are subresources and are skipped.
 * Returns true when the visitor stopped.
 */
static bool
walk_resource_list(json_object *list, const char *group, const char *version,
				   DiscVisit visit, void *arg)
{
	json_object *resources;

	if (!list || !json_object_object_get_ex(list, "resources", &resources) ||
		!json_object_is_type(resources, json_type_array))
		return false;
	for (size_t i = 0; i < json_object_array_length(resources); i++)
	{
		json_object *r = json_object_array_get_idx(resources, i);
		const char *plural = kw_json_get_string(r, "name");
		const char *singular = kw_json_get_string(r, "singularName");
		const char *kind = kw_json_get_string(r, "kind");
		json_object *ns;

		if (plural == NULL || strchr(plural, '/') != NULL)
			continue;			/* subresource */
		if (visit_resource(r, group, version, plural, singular, kind,
						   json_object_object_get_ex(r, "namespaced", &ns) &&
						   json_object_get_boolean(ns),
						   visit, arg))
			return true;
	}
	return false;
}

/*
 * walk_aggregated: visits the resources of an APIGroupDiscoveryList
 * (apidiscovery.k8s.io/v2 and v2beta1: items[] of groups, metadata.name ""
 * for the core group; versions[] in order of preference, the first one the
 * preferred version; resources[] with resource, singularResource,
 * shortNames, responseKind.kind, scope Namespaced|Cluster, verbs;
 * subresources apart), in the document's order; only group `only_group`
 * when not NULL.  A version whose freshness is "Stale" (an aggregated API
 * server that did not answer) is skipped, as client-go's
 * aggregated_discovery.go leaves it out and reports it failed.  Returns
 * true when the visitor stopped.
 */
static bool
walk_aggregated(json_object *doc, const char *only_group, DiscVisit visit, void *arg)
{
	json_object *items;

	if (!json_object_object_get_ex(doc, "items", &items) ||
		!json_object_is_type(items, json_type_array))
		return false;
	for (size_t i = 0; i < json_object_array_length(items); i++)
	{
		json_object *g = json_object_array_get_idx(items, i);
		json_object *meta,
				   *versions;
		const char *gname = NULL;

		if (json_object_object_get_ex(g, "metadata", &meta))
			gname = kw_json_get_string(meta, "name");
		if (gname == NULL)
			gname = "";			/* the core group has no name */
		if (only_group && strcmp(gname, only_group) != 0)
			continue;
		if (!json_object_object_get_ex(g, "versions", &versions) ||
			!json_object_is_type(versions, json_type_array))
			continue;
		for (size_t j = 0; j < json_object_array_length(versions); j++)
		{
			json_object *v = json_object_array_get_idx(versions, j);
			const char *version = kw_json_get_string(v, "version");
			const char *fresh = kw_json_get_string(v, "freshness");
			json_object *resources;

			if (version == NULL || (fresh && strcmp(fresh, "Stale") == 0) ||
				!json_object_object_get_ex(v, "resources", &resources) ||
				!json_object_is_type(resources, json_type_array))
				continue;
			for (size_t k = 0; k < json_object_array_length(resources); k++)
			{
				json_object *r = json_object_array_get_idx(resources, k);
				const char *plural = kw_json_get_string(r, "resource");
				const char *singular = kw_json_get_string(r, "singularResource");
				const char *scope = kw_json_get_string(r, "scope");
				const char *kind = NULL;
				json_object *rk;

				if (plural == NULL || strchr(plural, '/') != NULL)
					continue;
				if (json_object_object_get_ex(r, "responseKind", &rk))
					kind = kw_json_get_string(rk, "kind");
				if (visit_resource(r, gname, version, plural, singular, kind,
								   scope != NULL && strcmp(scope, "Namespaced") == 0,
								   visit, arg))
					return true;
			}
		}
	}
	return false;
}

/*
 * walk_legacy_group: visits the resources of the legacy APIGroup `g`
 * (name, versions[], preferredVersion), the preferred version first, then
 * the others in order: one request per version visited
 * (/apis/<group>/<version>); a version that fails to answer is skipped (an
 * aggregated API that is down), as kubectl does.  Returns true when the
 * visitor stopped.
 */
static bool
walk_legacy_group(KwClusterConfig *cfg, json_object *g, DiscVisit visit, void *arg)
{
	const char *gname = kw_json_get_string(g, "name");
	json_object *pref,
			   *versions;
	const char *pv = NULL;

	if (gname == NULL ||
		!json_object_object_get_ex(g, "versions", &versions) ||
		!json_object_is_type(versions, json_type_array))
		return false;
	if (json_object_object_get_ex(g, "preferredVersion", &pref))
		pv = kw_json_get_string(pref, "version");
	for (int pass = 0; pass < 2; pass++)
	{
		for (size_t j = 0; j < json_object_array_length(versions); j++)
		{
			const char *v = kw_json_get_string(json_object_array_get_idx(versions, j), "version");
			json_object *rl;
			volatile bool stop = false;

			if (v == NULL || (pass == 0) != (pv != NULL && strcmp(v, pv) == 0))
				continue;
			rl = fetch(cfg, psprintf("/apis/%s/%s", gname, v), NULL, FETCH_SKIP);
			PG_TRY();
			{
				stop = walk_resource_list(rl, gname, v, visit, arg);
			}
			PG_FINALLY();
			{
				if (rl)
					json_object_put(rl);
			}
			PG_END_TRY();
			if (stop)
				return true;
		}
	}
	return false;
}

/* What walk() visits. */
typedef enum DiscScope
{
	SCOPE_ALL,					/* the core group, then every group */
	SCOPE_CORE,					/* the core group only */
	SCOPE_GROUP					/* one named group only */
} DiscScope;

/*
 * walk: visits the resources the cluster serves in discovery order
 * (PROTOCOL 29): the core group first, then the groups in the server's
 * order; within a group the preferred version first.  Stops when the
 * visitor returns true; returns whether it did.
 *
 * The core group has one version, v1, whose document /api/v1 every server
 * with a core group serves in the legacy format: it is read directly (the
 * aggregated /api would hold the same resources, and a legacy server would
 * first answer it with an APIVersions that costs one more request).
 *
 * Requests (each a GET; "modern" is a server with aggregated discovery,
 * 1.26+, "legacy" one without, such as 1.20):
 * - SCOPE_ALL: GET /api/v1, then (unless the visitor stopped there) GET
 *   /apis with the aggregated Accept header: 2 on a modern server (1 for a
 *   core resource).  A legacy server answers /apis with an APIGroupList,
 *   and each group version is one more request until the visitor stops:
 *   2 + the group versions visited (as kwatch did before aggregated
 *   discovery).  A server without a core group (404 on /api/v1: a generic
 *   API server such as apiextensions-apiserver) is not an error.
 * - SCOPE_CORE: GET /api/v1: 1.
 * - SCOPE_GROUP: GET /apis/<group> (its APIGroup, a few hundred bytes on
 *   any server), then /apis/<group>/<version>, the preferred version
 *   first: 2 when the preferred version serves the resource.  Its size
 *   does not grow with the number of groups on the cluster, unlike the
 *   aggregated /apis.  When /apis/<group> is a 404 (no such group, or a
 *   server that serves no group documents), the group is sought in /apis
 *   as for SCOPE_ALL: 2 requests on a modern server.
 * ERRORs: the mapped SQLSTATE of a non-200 answer to /api/v1 (except
 * 404), /apis or /apis/<group> (except 404); 22032 for a document that
 * is not JSON.  json-c memory is freed on ERROR too.
 */
static bool
walk(KwClusterConfig *cfg, DiscScope scope, const char *group,
	 DiscVisit visit, void *arg)
{
	json_object *volatile doc = NULL;
	volatile bool stop = false;

	PG_TRY();
	{
		if (scope == SCOPE_ALL || scope == SCOPE_CORE)
		{
			doc = fetch(cfg, "/api/v1", NULL, FETCH_MUST_OR_404);
			stop = walk_resource_list(doc, "", "v1", visit, arg);
			if (doc)
				json_object_put(doc);
			doc = NULL;
		}
		if (scope == SCOPE_GROUP)
		{
			doc = fetch(cfg, psprintf("/apis/%s", group), NULL, FETCH_MUST_OR_404);
			if (doc && has_kind(doc, "APIGroup"))
				stop = walk_legacy_group(cfg, doc, visit, arg);
		}
		/* every group; or the one named, when /apis/<group> was a 404 */
		if (!stop && (scope == SCOPE_ALL || (scope == SCOPE_GROUP && doc == NULL)))
		{
			if (doc)
				json_object_put(doc);
			doc = NULL;
			doc = fetch(cfg, "/apis", KW_ACCEPT_AGGREGATED, FETCH_MUST);
			if (is_aggregated(doc))
				stop = walk_aggregated(doc, group, visit, arg);
			else
			{
				json_object *groups;

				if (json_object_object_get_ex(doc, "groups", &groups) &&
					json_object_is_type(groups, json_type_array))
					for (size_t i = 0; !stop && i < json_object_array_length(groups); i++)
					{
						json_object *g = json_object_array_get_idx(groups, i);
						const char *gname = kw_json_get_string(g, "name");

						if (group == NULL || (gname && strcmp(gname, group) == 0))
							stop = walk_legacy_group(cfg, g, visit, arg);
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
	return stop;
}

/* What match_visit looks for and where it puts what it found. */
typedef struct MatchArg
{
	const char *name;			/* lower-cased */
	KwResource *out;
} MatchArg;

/* add_name: `names` with `name` lower-cased appended, unless already there. */
static List *
add_name(List *names, const char *name)
{
	char	   *lower = asc_tolower(name, strlen(name));
	ListCell   *lc;

	foreach(lc, names)
	{
		if (strcmp((char *) lfirst(lc), lower) == 0)
			return names;
	}
	return lappend(names, lower);
}

/*
 * resource_names: the names resource `e` answers to, lower-cased, without
 * repeats: its plural, singular, kind and short names, as kubectl's
 * restmapper matches a name (k8s.io/client-go/restmapper/shortcut.go and
 * discovery.go: plural, singular, kind, shortNames).  kwatch.registrations
 * keeps them (column names) so that unwatch(), relist() and the waits
 * resolve the same names without asking the cluster.
 */
static List *
resource_names(DiscEntry *e)
{
	List	   *out = add_name(NIL, e->r.plural);

	if (e->singular[0])
		out = add_name(out, e->singular);
	if (e->r.kind[0])
		out = add_name(out, e->r.kind);
	if (e->short_names && json_object_is_type(e->short_names, json_type_array))
	{
		for (size_t j = 0; j < json_object_array_length(e->short_names); j++)
		{
			const char *s = json_object_get_string(json_object_array_get_idx(e->short_names, j));

			if (s && s[0])
				out = add_name(out, s);
		}
	}
	return out;
}

/*
 * match_visit: a DiscVisit that stops at the first resource whose plural,
 * singular, short name or kind (case-insensitively) is the name sought
 * (client-go restmapper: the same four).
 */
static bool
match_visit(DiscEntry *e, void *arg)
{
	MatchArg   *m = (MatchArg *) arg;
	bool		hit = false;

	if (strcmp(e->r.plural, m->name) == 0 ||
		(e->singular[0] && strcmp(e->singular, m->name) == 0) ||
		(e->r.kind[0] && pg_strcasecmp(e->r.kind, m->name) == 0))
		hit = true;
	if (!hit && e->short_names && json_object_is_type(e->short_names, json_type_array))
	{
		for (size_t j = 0; !hit && j < json_object_array_length(e->short_names); j++)
		{
			const char *s = json_object_get_string(json_object_array_get_idx(e->short_names, j));

			hit = s && strcmp(s, m->name) == 0;
		}
	}
	if (hit)
	{
		*m->out = e->r;
		m->out->names = resource_names(e);
	}
	return hit;
}

/*
 * resolve: finds `name` (lower-cased, "resource" or "resource.group";
 * "resource.core" and "resource." name the core group) on the cluster.  An
 * unqualified name is sought in the core group, then in every group
 * (SCOPE_ALL); a qualified one in its group only, through /apis/<group>
 * (SCOPE_GROUP).  Returns false when nothing serves it.  Requests: see
 * walk().
 */
static bool
resolve(KwClusterConfig *cfg, const char *name, KwResource *out)
{
	char	   *res = pstrdup(name);
	char	   *dot = strchr(res, '.');
	MatchArg	m;

	m.name = res;
	m.out = out;
	if (dot == NULL)
		return walk(cfg, SCOPE_ALL, NULL, match_visit, &m);
	*dot = '\0';
	if (dot[1] == '\0' || strcmp(dot + 1, "core") == 0)
		return walk(cfg, SCOPE_CORE, NULL, match_visit, &m);
	return walk(cfg, SCOPE_GROUP, dot + 1, match_visit, &m);
}

/*
 * recall: `name` resolved from the watches kwatch already has of the
 * calling role (`caller` or a role it is a member of, on any server:
 * kwatch.registrations keeps each watch's group, version, plural, kind and
 * scope as discovery gave them; another role's, whose server may serve
 * anything under any name, never count), matched as resolve() matches a
 * name: the plural, "plural.group" ("plural.core" or "plural." for the
 * core group), the kind in lower case, or the canonical name the watch was
 * registered by, or one of the names discovery gave it (its column names:
 * singular, short names; "name.group" too: _names_resource).  An exact
 * canonical name first, then the core group, then the oldest watch wins.
 * Returns false when none matches.  Reads kwatch.registrations through SPI
 * (connected here).
 */
static bool
recall(const char *name, Oid caller, KwResource *out)
{
	Oid			argtypes[2] = {TEXTOID, OIDOID};
	Datum		args[2] = {CStringGetTextDatum(name), ObjectIdGetDatum(caller)};
	bool		found = false;
	MemoryContext outer = CurrentMemoryContext;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("SELECT api_group, api_version, plural, kind, namespaced, names"
							  " FROM kwatch.registrations r"
							  " WHERE pg_catalog.pg_has_role($2, r.owner, 'USAGE')"
							  "   AND (kwatch._names_resource($1, r.resource, r.names)"
							  "    OR r.plural OPERATOR(pg_catalog.=) $1"
							  "    OR r.resource OPERATOR(pg_catalog.=) $1"
							  "    OR pg_catalog.lower(r.kind) OPERATOR(pg_catalog.=) $1"
							  "    OR (r.plural OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||)"
							  "        CASE r.api_group WHEN '' THEN 'core' ELSE r.api_group END) OPERATOR(pg_catalog.=) $1"
							  "    OR (r.api_group OPERATOR(pg_catalog.=) '' AND"
							  "        r.plural OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.=) $1))"
							  " ORDER BY (r.resource OPERATOR(pg_catalog.=) $1) DESC,"
							  "   (r.api_group OPERATOR(pg_catalog.=) '') DESC, r.id LIMIT 1",
							  2, argtypes, args, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read kwatch.registrations");
	if (SPI_processed == 1)
	{
		HeapTuple	t = SPI_tuptable->vals[0];
		TupleDesc	d = SPI_tuptable->tupdesc;
		MemoryContext spi = MemoryContextSwitchTo(outer);
		bool		isnull;

		memset(out, 0, sizeof(*out));
		out->api_group = pstrdup(SPI_getvalue(t, d, 1) ? SPI_getvalue(t, d, 1) : "");
		out->api_version = pstrdup(SPI_getvalue(t, d, 2));
		out->plural = pstrdup(SPI_getvalue(t, d, 3));
		out->kind = pstrdup(SPI_getvalue(t, d, 4));
		out->namespaced = DatumGetBool(SPI_getbinval(t, d, 5, &isnull));
		out->verbs = list_make2(pstrdup("list"), pstrdup("watch"));
		out->names = NIL;
		{
			Datum		names = SPI_getbinval(t, d, 6, &isnull);
			Datum	   *elems;
			bool	   *enulls;
			int			n;

			if (!isnull)
			{
				deconstruct_array(DatumGetArrayTypeP(names), TEXTOID, -1, false,
								  TYPALIGN_INT, &elems, &enulls, &n);
				for (int i = 0; i < n; i++)
					if (!enulls[i])
						out->names = lappend(out->names, TextDatumGetCString(elems[i]));
			}
		}
		MemoryContextSwitchTo(spi);
		found = true;
	}
	SPI_finish();
	return found;
}

/*
 * resolve_or_recall: resolve(), or, when the API server of `server` is
 * unreachable right now (kw_http_server_unreachable: its host did not
 * resolve, the connection was refused, or it timed out), recall(), with a
 * NOTICE: the watch is registered all the same and the worker starts it
 * when the server answers, as client-go's informers start and retry.
 * Without a watch to recall the name from, the unreachable server's error
 * stands.  Returns false when the server answered and serves no such
 * resource.
 */
static bool
resolve_or_recall(KwClusterConfig *cfg, const char *server, Oid caller, const char *name,
				  KwResource *out)
{
	MemoryContext cxt = CurrentMemoryContext;
	ErrorData  *volatile failed = NULL;
	volatile bool found = false;

	PG_TRY();
	{
		found = resolve(cfg, name, out);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		if (!kw_http_server_unreachable(server))
			PG_RE_THROW();
		failed = CopyErrorData();
		FlushErrorState();
	}
	PG_END_TRY();
	if (failed == NULL)
		return found;
	if (!recall(name, caller, out))
	{
		failed->hint = pstrdup("Watch it when the server answers, or first on a server of yours that answers: kwatch then registers it on your servers that are down.");
		ReThrowError(failed);
	}
	ereport(NOTICE,
			(errmsg("server \"%s\" is unreachable: %s is registered as kwatch already knows it",
					server, out->api_group[0] ? psprintf("%s.%s", out->plural, out->api_group) : out->plural),
			 errdetail("%s", failed->message),
			 errhint("The worker starts the watch when the server answers; kwatch.watches shows why it waits.")));
	return true;
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

/*
 * get_unless_unreachable: kw_http_get of `path`; false (no response) when
 * the server is unreachable (kw_http_server_unreachable), a NOTICE said so
 * (once: later calls of the transaction return false before any request,
 * and without a NOTICE).
 * Other errors propagate.
 */
static bool
get_unless_unreachable(KwClusterConfig *cfg, const char *server, const char *path,
					   KwHttpResponse *resp)
{
	MemoryContext cxt = CurrentMemoryContext;
	volatile bool ok = true;

	/* found unreachable earlier in this transaction: said so then */
	if (kw_http_server_unreachable(server))
		return false;
	PG_TRY();
	{
		kw_http_get(cfg, path, resp);
	}
	PG_CATCH();
	{
		ErrorData  *e;

		MemoryContextSwitchTo(cxt);
		if (!kw_http_server_unreachable(server))
			PG_RE_THROW();
		e = CopyErrorData();
		FlushErrorState();
		ereport(NOTICE,
				(errmsg("server \"%s\" is unreachable: the watch is registered unchecked", server),
				 errdetail("%s", e->message),
				 errhint("The worker starts the watch when the server answers; kwatch.watches shows why it waits.")));
		ok = false;
	}
	PG_END_TRY();
	return ok;
}

PG_FUNCTION_INFO_V1(kwatch_discover);

/*
 * kwatch_discover: SQL kwatch._discover(server text, resource text) ->
 * (api_group, api_version, plural, kind, namespaced, verbs text[], caller
 * oid, names text[]: plural, kind and the other names the resource
 * answers to, lower-cased, no repeats -- resource_names()).  ERRORs:
 * unknown server (undefined_object), no USAGE on it, the
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
	Datum		values[8];
	bool		nulls[8] = {0};
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
	if (!resolve_or_recall(cfg, server, caller, name, &r))
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
	{
		Datum	   *names = palloc(sizeof(Datum) * (list_length(r.names) + 2));
		int			n = 0;

		/* plural and kind always; then what discovery (or recall) gave */
		names[n++] = CStringGetTextDatum(r.plural);
		if (r.kind[0] && strcmp(asc_tolower(r.kind, strlen(r.kind)), r.plural) != 0)
			names[n++] = CStringGetTextDatum(asc_tolower(r.kind, strlen(r.kind)));
		foreach(lc, r.names)
		{
			char	   *nm = (char *) lfirst(lc);

			if (strcmp(nm, r.plural) != 0 && strcmp(nm, asc_tolower(r.kind, strlen(r.kind))) != 0)
				names[n++] = CStringGetTextDatum(nm);
		}
		values[7] = PointerGetDatum(construct_array(names, n, TEXTOID, -1, false, TYPALIGN_INT));
	}
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

	if (!get_unless_unreachable(cfg, server, path.data, &resp))
		PG_RETURN_NULL();
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
 * Requests: 1 or 2 for a group-qualified name, 1 or 2 for an unqualified
 * one on a server with aggregated discovery (more on a legacy one): walk().
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
 * listable_visit: a DiscVisit that appends (to the List ** `arg`) a copy of
 * each resource with the list verb whose (group, plural) is not there yet:
 * since a group's preferred version is visited first, each resource comes
 * at that version or, when it lacks it, at the first other version serving
 * it.  Never stops.
 */
static bool
listable_visit(DiscEntry *e, void *arg)
{
	List	  **out = (List **) arg;
	KwResource *r;
	ListCell   *lc;

	if (!has_verb(e->r.verbs, "list"))
		return false;
	foreach(lc, *out)
	{
		KwResource *o = (KwResource *) lfirst(lc);

		if (strcmp(o->api_group, e->r.api_group) == 0 &&
			strcmp(o->plural, e->r.plural) == 0)
			return false;
	}
	r = palloc(sizeof(KwResource));
	*r = e->r;
	*out = lappend(*out, r);
	return false;
}

/*
 * kw_discover_listable: every resource of cluster `cfg` that can be listed,
 * as a List of KwResource *: the core group first, then each group in the
 * server's order, each resource at the group's preferred version or, when
 * that version lacks it, the first other version serving it (client-go
 * discovery.ServerPreferredResources, which "kubectl api-resources
 * --verbs=list" shows).  Requests: 2 on a server with aggregated
 * discovery (GET /api/v1, GET /apis); on a legacy one 2 + one per group
 * version (walk(), SCOPE_ALL).  A group version that fails to answer (an
 * aggregated API that is down, a Stale one) is skipped, as kubectl does.
 * ERRORs when /api/v1 (except 404) or /apis cannot be read.
 */
List *
kw_discover_listable(KwClusterConfig *cfg)
{
	List	   *out = NIL;

	walk(cfg, SCOPE_ALL, NULL, listable_visit, &out);
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
	if (!get_unless_unreachable(cfg, server,
								psprintf("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/%s.%s",
										 plural, group), &resp))
		PG_RETURN_NULL();		/* kept as they are: printer_columns */
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

/* kind_visit: stops at the resource whose kind is ((KindMatch *) arg)->kind. */
typedef struct KindMatch
{
	const char *kind;
	KwResource *out;
} KindMatch;

static bool
kind_visit(DiscEntry *e, void *arg)
{
	KindMatch  *m = (KindMatch *) arg;

	if (strcmp(e->r.kind, m->kind) != 0)
		return false;
	*m->out = e->r;
	return true;
}

/*
 * kw_discover_kind: the resource that serves objects of `kind` at
 * `api_version` ("v1", "apps/v1", "example.com/v1alpha1": a manifest's
 * apiVersion) on cluster `cfg`, filling *out: client-go's RESTMapper
 * (apimachinery/pkg/api/meta, RESTMapping(GroupKind, version)) for one
 * group version, read from its APIResourceList (GET /api/v1 or
 * /apis/<group>/<version>, one request; subresources skipped).  Returns
 * false when the server does not serve that group version (404) or the
 * group version has no such kind.  ERRORs as kw_http_get (unreachable,
 * refused), 22032 for a document that is not JSON.
 */
bool
kw_discover_kind(KwClusterConfig *cfg, const char *api_version, const char *kind,
				 KwResource *out)
{
	const char *slash = strchr(api_version, '/');
	char	   *group = slash ? pnstrdup(api_version, slash - api_version) : pstrdup("");
	const char *version = slash ? slash + 1 : api_version;
	char	   *path = slash ? psprintf("/apis/%s", api_version) : psprintf("/api/%s", api_version);
	json_object *doc;
	KindMatch	m = {kind, out};
	bool		found;

	if (*version == '\0' || strchr(version, '/') != NULL || (slash && *group == '\0'))
		return false;
	doc = fetch(cfg, path, NULL, FETCH_MUST_OR_404);
	if (doc == NULL)
		return false;
	found = walk_resource_list(doc, group, version, kind_visit, &m);
	json_object_put(doc);
	return found;
}
