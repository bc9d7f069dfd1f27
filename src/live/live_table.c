/*-------------------------------------------------------------------------
 *
 * live_table.c
 *		A live foreign table resolved for a user: its resource (from the
 *		options IMPORT FOREIGN SCHEMA writes, else by discovery, cached per
 *		backend), its columns, and the cluster settings of its server for
 *		that user.  Used by the scan (fdw.c) and the writes (fdw_modify.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "utils/builtins.h"
#include "utils/formatting.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "kw_common.h"
#include "kw_cluster.h"
#include "kw_http.h"
#include "kw_decode.h"
#include "kw_fdw.h"

/* How long a discovery result is reused. */
#define KW_DISCOVERY_TTL_S 60

/* Cache (backend lifetime, TopMemoryContext). */
typedef struct DiscoveryCacheEntry
{
	Oid			serverid;
	Oid			userid;
	char	   *resource;
	KwResource	res;
	TimestampTz at;
} DiscoveryCacheEntry;

static List *discovery_cache = NIL;

/*
 * discover_cached: kw_discover_resource through a per-backend cache of
 * KW_DISCOVERY_TTL_S.  ERRORs 42704 when the cluster does not serve it.
 */
static void
discover_cached(KwClusterConfig *cfg, Oid serverid, Oid userid,
				const char *resource, KwResource *out)
{
	ListCell   *lc;
	TimestampTz now = GetCurrentTimestamp();
	DiscoveryCacheEntry *e;
	MemoryContext old;
	KwResource	r;
	char	   *name;

	foreach(lc, discovery_cache)
	{
		e = (DiscoveryCacheEntry *) lfirst(lc);
		if (e->serverid == serverid && e->userid == userid &&
			strcmp(e->resource, resource) == 0 &&
			!TimestampDifferenceExceeds(e->at, now, KW_DISCOVERY_TTL_S * 1000))
		{
			*out = e->res;
			return;
		}
	}
	name = asc_tolower(resource, strlen(resource));
	if (!kw_discover_resource(cfg, name, &r))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("resource \"%s\" not found on server \"%s\"",
						kw_excerpt(resource), cfg->server_name),
				 errhint("\"kubectl api-resources\" lists the resources the cluster serves; fix the foreign table's option \"resource\".")));
	{
		bool		can_list = false;

		foreach(lc, r.verbs)
			if (strcmp((char *) lfirst(lc), "list") == 0)
				can_list = true;
		if (!can_list)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("resource \"%s\" cannot be listed", resource)));
	}
	old = MemoryContextSwitchTo(TopMemoryContext);
	e = palloc0(sizeof(DiscoveryCacheEntry));
	e->serverid = serverid;
	e->userid = userid;
	e->resource = pstrdup(resource);
	e->res.api_group = pstrdup(r.api_group);
	e->res.api_version = pstrdup(r.api_version);
	e->res.plural = pstrdup(r.plural);
	e->res.kind = pstrdup(r.kind);
	e->res.namespaced = r.namespaced;
	e->at = now;
	/* drop expired entries of the same key */
	foreach(lc, discovery_cache)
	{
		DiscoveryCacheEntry *x = (DiscoveryCacheEntry *) lfirst(lc);

		if (x->serverid == serverid && x->userid == userid &&
			strcmp(x->resource, resource) == 0)
			discovery_cache = foreach_delete_current(discovery_cache, lc);
	}
	discovery_cache = lappend(discovery_cache, e);
	MemoryContextSwitchTo(old);
	*out = e->res;
}

/*
 * kw_live_table_resolve: the live table `relid` as user `userid` sees it, and the
 * cluster config (*cfg) for its server and that user.  With options
 * api_version and namespaced (as IMPORT FOREIGN SCHEMA writes them) the
 * resource option is taken as plural[.group] without asking the server;
 * otherwise it is resolved by discovery (cached).  The objects' kind comes
 * from the option kind (IMPORT writes it too), else from discovery when it
 * was asked anyway; NULL otherwise (a table made by hand or imported by
 * kwatch 0.1.0: the scan takes it from the LIST, kw_list_decoder_create).  ERRORs: 42704 unknown resource,
 * 42703 a column no live table has, and whatever the server config raises.
 */
KwLiveTable *
kw_live_table_resolve(Oid relid, Oid userid, KwClusterConfig **cfg)
{
	ForeignTable *ft = GetForeignTable(relid);
	ForeignServer *srv = GetForeignServer(ft->serverid);
	KwLiveTable *t = palloc0(sizeof(KwLiveTable));
	char	   *resource = kw_option_string(ft->options, "resource");
	char	   *api_version = kw_option_string(ft->options, "api_version");
	DefElem    *namespaced = kw_get_option(ft->options, "namespaced");
	char	   *kind = kw_option_string(ft->options, "kind");
	DefElem    *estimate = kw_get_option(ft->options, "use_remote_estimate");
	Relation	rel;
	TupleDesc	desc;

	if (resource == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("foreign table \"%s\" has no option \"resource\"",
						get_rel_name(relid))));
	if (estimate == NULL)
		estimate = kw_get_option(srv->options, "use_remote_estimate");

	t->relid = relid;
	t->server = pstrdup(srv->servername);
	t->namespace = kw_option_string(ft->options, "namespace");
	t->use_remote_estimate = estimate ? defGetBoolean(estimate) : true;
	*cfg = kw_cluster_config_for_server(srv->servername, userid);

	if (api_version && namespaced)
	{
		char	   *dot = strchr(resource, '.');

		t->plural = dot ? pnstrdup(resource, dot - resource) : pstrdup(resource);
		t->api_group = dot ? pstrdup(dot + 1) : pstrdup("");
		t->api_version = pstrdup(api_version);
		t->namespaced = defGetBoolean(namespaced);
		t->kind = kind ? pstrdup(kind) : NULL;
	}
	else
	{
		KwResource	r;

		discover_cached(*cfg, srv->serverid, userid, resource, &r);
		t->plural = r.plural;
		t->api_group = r.api_group;
		t->api_version = api_version ? pstrdup(api_version) : r.api_version;
		t->namespaced = r.namespaced;
		t->kind = kind ? pstrdup(kind) : r.kind;
	}
	{
		DefElem    *secret_data = kw_get_option(ft->options, "secret_data");

		t->redact = kw_is_secret_resource(t->api_group, t->plural) &&
			!(secret_data && defGetBoolean(secret_data));
	}
	if (t->namespace && !t->namespaced)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
				 errmsg("resource \"%s\" is cluster-scoped", resource),
				 errhint("Drop the foreign table's option \"namespace\".")));
	t->columns = kw_live_columns(t->api_group, t->plural);

	/* every column must be one a live table can compute */
	rel = table_open(relid, NoLock);
	desc = RelationGetDescr(rel);
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute a = TupleDescAttr(desc, i);

		if (a->attisdropped)
			continue;
		if (kw_live_column_find(t->columns, NameStr(a->attname)) == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("column \"%s\" of foreign table \"%s\" is not a column of live %s tables",
							NameStr(a->attname), RelationGetRelationName(rel), t->plural),
					 errhint("Live tables have the columns of the mirror tables; see kwatch.live_columns(%s, %s).",
							 quote_literal_cstr(t->api_group), quote_literal_cstr(t->plural))));
	}
	table_close(rel, NoLock);
	return t;
}

