/*-------------------------------------------------------------------------
 *
 * connection.c
 *		Where a cluster is and who kwatch is there: a kwatch foreign server
 *		plus the caller's user mapping (plus the kubeconfig they name)
 *		resolved into connection settings, cached per process as
 *		contrib/postgres_fdw/connection.c caches connections.
 *
 * Layering: the source (kubeconfig + context, in_cluster, or api_server)
 * first, then the server's overrides, then the user mapping.  Credentials
 * are replaced as a whole by each layer that has any: a client certificate
 * left over from the kubeconfig would otherwise win over a user mapping's
 * token, since kube-apiserver tries x509 authentication before bearer tokens
 * (pkg/kubeapiserver/authenticator).  A role without a user mapping gets the
 * server's own credentials only when it is a superuser (postgres_fdw's rule),
 * and a role's own user mapping must carry a credential of its own.
 *
 * The cache: one entry per (server, user), holding the resolved settings,
 * so that a live-table scan or the worker's next request does not parse a
 * kubeconfig again.  As in postgres_fdw (pgfdw_inval_callback), syscache
 * callbacks on pg_foreign_server and pg_user_mapping drop entries when a
 * server or user mapping changes (ALTER SERVER, CREATE/ALTER/DROP USER
 * MAPPING), and callbacks on pg_authid and pg_auth_members when a role or
 * a membership changes (a role that is no longer superuser must not keep
 * the server's own credentials; USAGE may come through a membership).  A
 * kubeconfig file is looked at (stat: inode, size, mtime) on every use, and
 * read again when it changed.  Errors are never cached.  Files a kubeconfig
 * names (certificates, token files) and exec plugins are credential.c's,
 * which re-reads and re-runs them on its own schedule.
 *
 * The worker keeps its watches' settings across requests: kw_connection_
 * generation() tells it when to compare them with the catalog again
 * (watch.c), and the ProcessUtility hook wakes it at the commit of such a
 * statement (ownership.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/stat.h>

#include "access/reloptions.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "kw_common.h"
#include "kw_cluster.h"

/* Name of our foreign-data wrapper, as created by the extension script. */
#define KW_FDW_NAME "kwatch"

/* Options that carry credentials (replaced as a whole by each layer). */
static const char *const credential_options[] = {
	"token", "token_file", "client_certificate", "client_key",
	"client_certificate_data", "client_key_data", NULL
};

/* What a kubeconfig file looked like when its settings were cached. */
typedef struct FileStamp
{
	char	   *path;
	bool		exists;
	dev_t		dev;
	ino_t		ino;
	off_t		size;
	struct timespec mtime;
} FileStamp;

typedef struct ConnCacheKey
{
	Oid			serverid;
	Oid			userid;
} ConnCacheKey;

typedef struct ConnCacheEntry
{
	ConnCacheKey key;			/* hash key (must be first) */
	bool		valid;			/* false once a callback dropped it */
	MemoryContext cxt;			/* holds cfg and stamps; NULL when empty */
	KwClusterConfig *cfg;		/* transport rules already checked */
	List	   *stamps;			/* FileStamp * of the kubeconfig files */
} ConnCacheEntry;

static HTAB *ConnectionHash = NULL;
static uint64 connection_generation = 0;

static ForeignServer *find_kwatch_server(const char *server_name);
static KwClusterConfig *resolve(ForeignServer *server, Oid userid,
								bool check_transport_rules);
static List *user_mapping_options(Oid userid, ForeignServer *server);
static bool has_credential(List *options);
static void apply_options(KwClusterConfig *cfg, List *options);
static char *strip_slashes(const char *url);
static List *file_stamps(const char *path_list);
static bool stamps_unchanged(List *stamps);
static void conn_inval_callback(Datum arg, int cacheid, uint32 hashvalue);
static void json_string(StringInfo buf, const char *key, const char *value);
static void json_bytes(StringInfo buf, const char *key, const char *data);

PG_FUNCTION_INFO_V1(kwatch_server_config);

/*
 * kw_cluster_config_for_server
 *		Connection settings of the kwatch server server_name, for userid.
 *
 * The cached settings when neither the catalog nor the kubeconfig files
 * changed since they were resolved, else resolved again (see the file
 * header) and cached.  Must run inside a transaction.  Returns a
 * KwClusterConfig palloc'd in CurrentMemoryContext (a copy: the caller
 * may keep it as long as it likes), with server_name set.
 *
 * Errors: ERRCODE_UNDEFINED_OBJECT if the server does not exist or userid
 * has no user mapping and is not a superuser, ERRCODE_WRONG_OBJECT_TYPE if
 * the server belongs to another foreign-data wrapper,
 * ERRCODE_FDW_DYNAMIC_PARAMETER_VALUE_NEEDED if it names no source,
 * ERRCODE_INVALID_PARAMETER_VALUE for the transport rules
 * (kw_check_transport), and whatever kw_kubeconfig_load /
 * kw_in_cluster_config raise.
 */
KwClusterConfig *
kw_cluster_config_for_server(const char *server_name, Oid userid)
{
	ForeignServer *server = find_kwatch_server(server_name);
	ConnCacheKey key;
	ConnCacheEntry *entry;
	bool		found;
	uint64		generation;
	char	   *kubeconfig;
	List	   *stamps = NIL;
	KwClusterConfig *cfg;
	MemoryContext cxt;
	MemoryContext old;

	if (ConnectionHash == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(ConnCacheKey);
		ctl.entrysize = sizeof(ConnCacheEntry);
		ConnectionHash = hash_create("kwatch connections", 8, &ctl,
									 HASH_ELEM | HASH_BLOBS);
		CacheRegisterSyscacheCallback(FOREIGNSERVEROID, conn_inval_callback, (Datum) 0);
		CacheRegisterSyscacheCallback(USERMAPPINGOID, conn_inval_callback, (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHOID, conn_inval_callback, (Datum) 0);
		/* USAGE held through a role membership (kw_check_watch_role) */
		CacheRegisterSyscacheCallback(AUTHMEMMEMROLE, conn_inval_callback, (Datum) 0);
	}

	memset(&key, 0, sizeof(key));
	key.serverid = server->serverid;
	key.userid = userid;
	entry = hash_search(ConnectionHash, &key, HASH_ENTER, &found);
	if (!found)
	{
		entry->valid = false;
		entry->cxt = NULL;
		entry->cfg = NULL;
		entry->stamps = NIL;
	}
	if (entry->valid && stamps_unchanged(entry->stamps))
	{
		cfg = kw_cluster_config_copy(entry->cfg);
		cfg->server_name = pstrdup(server->servername);	/* RENAME keeps the OID */
		return cfg;
	}

	if (entry->cxt)
		MemoryContextDelete(entry->cxt);
	entry->valid = false;
	entry->cxt = NULL;
	entry->cfg = NULL;
	entry->stamps = NIL;

	/*
	 * The stamps before the files are read: a file changing meanwhile is
	 * read again next time.  Their context hangs under the caller's until
	 * the entry is complete, so an ERROR leaks nothing.
	 */
	cxt = AllocSetContextCreate(CurrentMemoryContext, "kwatch connection",
								ALLOCSET_SMALL_SIZES);
	kubeconfig = kw_option_string(server->options, "kubeconfig");
	if (kubeconfig != NULL)
	{
		old = MemoryContextSwitchTo(cxt);
		stamps = file_stamps(kubeconfig);
		MemoryContextSwitchTo(old);
	}
	generation = connection_generation;
	cfg = resolve(server, userid, true);

	/* in-cluster settings depend on files that come and go: never cached */
	if (generation != connection_generation ||
		(kubeconfig == NULL && kw_option_string(server->options, "api_server") == NULL))
	{
		MemoryContextDelete(cxt);
		return cfg;
	}
	old = MemoryContextSwitchTo(cxt);
	entry->cfg = kw_cluster_config_copy(cfg);
	MemoryContextSwitchTo(old);
	MemoryContextSetParent(cxt, CacheMemoryContext);
	entry->stamps = stamps;
	entry->cxt = cxt;
	entry->valid = true;
	return cfg;
}
/*
 * find_kwatch_server: the kwatch foreign server called server_name.  Errors:
 * ERRCODE_UNDEFINED_OBJECT if there is none, ERRCODE_WRONG_OBJECT_TYPE if it
 * belongs to another foreign-data wrapper.
 */
static ForeignServer *
find_kwatch_server(const char *server_name)
{
	ForeignServer *server;
	ForeignDataWrapper *fdw;

	server = GetForeignServerByName(server_name, true);
	if (server == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("server \"%s\" does not exist", server_name),
				 errhint("Create it with CREATE SERVER %s FOREIGN DATA WRAPPER kwatch OPTIONS (kubeconfig '...').",
						 quote_identifier(server_name))));

	fdw = GetForeignDataWrapper(server->fdwid);
	if (strcmp(fdw->fdwname, KW_FDW_NAME) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("server \"%s\" is not a kwatch server", server_name),
				 errdetail("It uses the foreign-data wrapper \"%s\".",
						   fdw->fdwname)));
	return server;
}

/*
 * resolve: the connection settings of `server` for userid, built from the
 * catalog and the kubeconfig files as the file header says, in
 * CurrentMemoryContext.  `check_transport_rules` false only for
 * kwatch.server_config(), which shows what a server resolves to, refused
 * settings included, and connects to nothing.  Errors: as
 * kw_cluster_config_for_server.
 */
static KwClusterConfig *
resolve(ForeignServer *server, Oid userid, bool check_transport_rules)
{
	KwClusterConfig *cfg;
	List	   *opts;
	char	   *kubeconfig;
	char	   *api_server;
	DefElem    *in_cluster;

	opts = server->options;
	kubeconfig = kw_option_string(opts, "kubeconfig");
	api_server = kw_option_string(opts, "api_server");
	in_cluster = kw_get_option(opts, "in_cluster");

	if (kubeconfig != NULL)
		cfg = kw_kubeconfig_load(kubeconfig, kw_option_string(opts, "context"));
	else if (in_cluster != NULL && defGetBoolean(in_cluster))
		cfg = kw_in_cluster_config();
	else if (api_server != NULL)
	{
		cfg = palloc0(sizeof(KwClusterConfig));
		cfg->api_server = strip_slashes(api_server);
	}
	else
		ereport(ERROR,
				(errcode(ERRCODE_FDW_DYNAMIC_PARAMETER_VALUE_NEEDED),
				 errmsg("server \"%s\" names no cluster", server->servername),
				 errhint("Set one of the options \"kubeconfig\", \"api_server\" or \"in_cluster\" with ALTER SERVER.")));

	apply_options(cfg, opts);
	apply_options(cfg, user_mapping_options(userid, server));
	cfg->server_name = pstrdup(server->servername);

	/*
	 * A plugin the kubeconfig names is a program the server would run:
	 * only on a server whose owner may run programs (COPY ... PROGRAM's
	 * rule; checked again by credential.c before it runs).
	 */
	if (cfg->exec)
	{
		cfg->exec->server_owner = server->owner;
		cfg->exec->owner_may_run = kw_role_may_run_programs(server->owner);
		if (check_transport_rules)
			kw_check_exec_allowed(cfg);
	}

	/* the transport rules again, on what a kubeconfig may have supplied */
	if (check_transport_rules)
	{
		DefElem    *http = kw_get_option(opts, "allow_insecure_http");

		kw_check_transport(server->servername, cfg->api_server,
						cfg->insecure_skip_tls_verify,
						cfg->ca_file != NULL || cfg->ca_data != NULL,
						http != NULL && defGetBoolean(http));
	}

	return cfg;
}

/*
 * user_mapping_options
 *		The options of userid's mapping for `server`, else of its PUBLIC
 *		mapping (GetUserMapping's two syscache lookups, foreign/foreign.c).
 *
 * Without either, only a superuser goes on with the server's own
 * credentials (its kubeconfig's, token_file, ...): any other role would
 * gain them just by having USAGE on the server, so it gets postgres_fdw's
 * error instead (ERRCODE_UNDEFINED_OBJECT, "user mapping not found"); a
 * PUBLIC mapping, even an empty one, is how an admin shares them on
 * purpose.  A role's own mapping without a credential is refused to a
 * role that is not a superuser (ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
 * neither the server's nor PUBLIC's credentials standing in.  A role that
 * no longer exists (a watch registered by a dropped role) is refused too,
 * never re-homed to PUBLIC's or the server's credentials.  Returns a list of DefElem palloc'd in CurrentMemoryContext.
 */
static List *
user_mapping_options(Oid userid, ForeignServer *server)
{
	Oid			serverid = server->serverid;
	HeapTuple	tp;
	Datum		datum;
	bool		isnull;
	bool		own = true;
	List	   *options = NIL;

	if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(userid)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("role with OID %u does not exist", userid),
				 errdetail("It registered a watch on server \"%s\"; its credentials are not handed to anyone else.",
						   server->servername),
				 errhint("Unwatch it and watch it again as an existing role.")));

	tp = SearchSysCache2(USERMAPPINGUSERSERVER,
						 ObjectIdGetDatum(userid),
						 ObjectIdGetDatum(serverid));
	if (!HeapTupleIsValid(tp))
	{
		own = false;
		tp = SearchSysCache2(USERMAPPINGUSERSERVER,
							 ObjectIdGetDatum(InvalidOid),
							 ObjectIdGetDatum(serverid));
	}
	if (!HeapTupleIsValid(tp))
	{
		if (superuser_arg(userid))
			return NIL;
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("user mapping not found for user \"%s\", server \"%s\"",
						GetUserNameFromId(userid, false), server->servername),
				 errdetail("Without one, only superusers use the server's own credentials."),
				 errhint("CREATE USER MAPPING FOR %s SERVER %s OPTIONS (token '...'), or FOR PUBLIC to share the server's credentials.",
						 quote_identifier(GetUserNameFromId(userid, false)),
						 quote_identifier(server->servername))));
	}

	datum = SysCacheGetAttr(USERMAPPINGUSERSERVER, tp,
							Anum_pg_user_mapping_umoptions, &isnull);
	if (!isnull)
		options = untransformRelOptions(datum);
	ReleaseSysCache(tp);

	/*
	 * A role's own mapping must carry a credential of its own: PostgreSQL
	 * lets any role with USAGE create or alter its own mapping
	 * (user_mapping_ddl_aclcheck, commands/foreigncmds.c), so an empty one
	 * would hand it the server's credentials.  Only the server's owner can
	 * make a PUBLIC mapping, so an empty PUBLIC mapping stays the way to
	 * share them on purpose; the empty own mapping never falls back to it.
	 * postgres_fdw's password_required is the same rule
	 * (contrib/postgres_fdw/connection.c, check_conn_params).
	 */
	if (own && !has_credential(options) && !superuser_arg(userid))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
				 errmsg("user mapping for \"%s\" on server \"%s\" has no credential",
						GetUserNameFromId(userid, false), server->servername),
				 errdetail("A user mapping of a role that is not a superuser must carry its own token, token_file, client_certificate and client_key, or client_certificate_data and client_key_data; it never uses the server's credentials."),
				 errhint("ALTER USER MAPPING FOR %s SERVER %s OPTIONS (ADD token '...'), or have the server's owner share its credentials with CREATE USER MAPPING FOR PUBLIC and drop this mapping.",
						 quote_identifier(GetUserNameFromId(userid, false)),
						 quote_identifier(server->servername))));

	return options;
}

/*
 * has_credential
 *		Whether the options (a user mapping's DefElems) hold any of
 *		credential_options.
 */
static bool
has_credential(List *options)
{
	for (const char *const *cred = credential_options; *cred; cred++)
	{
		if (kw_get_option(options, *cred) != NULL)
			return true;
	}
	return false;
}

/*
 * apply_options
 *		Lay a server's or user mapping's options over cfg.
 *
 * TLS settings replace field by field; a path replaces the matching *-data
 * too (certificate_authority clears ca_data), since *-data would win.  If
 * options hold any credential, all earlier credentials are dropped first.
 * Strings are copied into CurrentMemoryContext.
 */
static void
apply_options(KwClusterConfig *cfg, List *options)
{
	char	   *v;
	DefElem    *def;

	if (has_credential(options))
	{
		cfg->token = NULL;
		cfg->token_file = NULL;
		cfg->client_cert_file = NULL;
		cfg->client_cert_data = NULL;
		cfg->client_key_file = NULL;
		cfg->client_key_data = NULL;
		cfg->exec = NULL;		/* the kubeconfig's plugin is a credential too */
	}

	if ((v = kw_option_string(options, "certificate_authority")) != NULL)
	{
		cfg->ca_file = pstrdup(v);
		cfg->ca_data = NULL;
	}
	if ((v = kw_option_string(options, "tls_server_name")) != NULL)
		cfg->tls_server_name = pstrdup(v);
	if ((def = kw_get_option(options, "insecure_skip_tls_verify")) != NULL)
		cfg->insecure_skip_tls_verify = defGetBoolean(def);
	if ((v = kw_option_string(options, "proxy_url")) != NULL)
		cfg->proxy_url = pstrdup(v);
	if ((v = kw_option_string(options, "impersonate_user")) != NULL)
	{
		/* the server's impersonation replaces the kubeconfig's whole */
		cfg->as_user = pstrdup(v);
		cfg->as_uid = NULL;
		cfg->as_groups = NIL;
		cfg->as_extra = NIL;
		if ((v = kw_option_string(options, "impersonate_uid")) != NULL)
			cfg->as_uid = pstrdup(v);
		if ((v = kw_option_string(options, "impersonate_groups")) != NULL)
		{
			/* comma-separated, spaces around names ignored, case kept */
			char	   *copy = pstrdup(v);
			char	   *tok;
			char	   *save = NULL;

			for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
			{
				char	   *end = tok + strlen(tok);

				while (*tok == ' ')
					tok++;
				while (end > tok && end[-1] == ' ')
					*--end = '\0';
				if (*tok)
					cfg->as_groups = lappend(cfg->as_groups, pstrdup(tok));
			}
		}
	}

	if ((v = kw_option_string(options, "token")) != NULL)
		cfg->token = pstrdup(v);
	if ((v = kw_option_string(options, "token_file")) != NULL)
		cfg->token_file = pstrdup(v);
	if ((v = kw_option_string(options, "client_certificate")) != NULL)
		cfg->client_cert_file = pstrdup(v);
	if ((v = kw_option_string(options, "client_certificate_data")) != NULL)
		cfg->client_cert_data = pstrdup(v);
	if ((v = kw_option_string(options, "client_key")) != NULL)
		cfg->client_key_file = pstrdup(v);
	if ((v = kw_option_string(options, "client_key_data")) != NULL)
		cfg->client_key_data = pstrdup(v);
}

/*
 * strip_slashes
 *		palloc'd copy of url without trailing slashes (we append "/api/...").
 */
static char *
strip_slashes(const char *url)
{
	char	   *s = pstrdup(url);
	size_t		len = strlen(s);

	while (len > 0 && s[len - 1] == '/')
		s[--len] = '\0';
	return s;
}

/*
 * kwatch_server_config
 *		SQL kwatch.server_config(server text) RETURNS jsonb: the resolved
 *		connection settings of a kwatch server for the current user, secrets
 *		redacted, for debugging a configuration.
 *
 * token shows as "<redacted>", *_data fields as "<N bytes>", unset fields as
 * null.  Errors are those of kw_cluster_config_for_server.  Reads the
 * catalog and files afresh: the cache is for connections.  The extension
 * script revokes EXECUTE from PUBLIC: it shows file paths and reads files
 * named by servers.
 */
Datum
kwatch_server_config(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	KwClusterConfig *cfg = resolve(find_kwatch_server(name), GetUserId(),
								   false);
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	json_string(&buf, "server", cfg->server_name);
	json_string(&buf, "api_server", cfg->api_server);
	json_string(&buf, "ca_file", cfg->ca_file);
	json_bytes(&buf, "ca_data", cfg->ca_data);
	json_string(&buf, "client_certificate", cfg->client_cert_file);
	json_bytes(&buf, "client_certificate_data", cfg->client_cert_data);
	json_string(&buf, "client_key", cfg->client_key_file);
	json_bytes(&buf, "client_key_data", cfg->client_key_data);
	json_string(&buf, "token", cfg->token ? "<redacted>" : NULL);
	json_string(&buf, "token_file", cfg->token_file);
	json_string(&buf, "tls_server_name", cfg->tls_server_name);
	appendStringInfo(&buf, ", \"insecure_skip_tls_verify\": %s",
					 cfg->insecure_skip_tls_verify ? "true" : "false");
	json_string(&buf, "namespace", cfg->default_namespace);
	json_string(&buf, "proxy_url", cfg->proxy_url);
	json_string(&buf, "impersonate_user", cfg->as_user);
	if (cfg->as_groups)
	{
		ListCell   *lc;
		StringInfoData g;

		initStringInfo(&g);
		foreach(lc, cfg->as_groups)
			appendStringInfo(&g, "%s%s", g.len ? "," : "", (char *) lfirst(lc));
		json_string(&buf, "impersonate_groups", g.data);
	}
	if (cfg->exec)
	{
		/* env values may be secrets (AWS_PROFILE is not, a token would be) */
		ListCell   *lc;
		StringInfoData x;

		initStringInfo(&x);
		appendStringInfoChar(&x, '{');
		json_string(&x, "command", cfg->exec->command);
		json_string(&x, "apiVersion", cfg->exec->api_version);
		json_string(&x, "interactiveMode", cfg->exec->interactive_mode);
		appendStringInfo(&x, ", \"provideClusterInfo\": %s, \"args\": %d, \"env\": [",
						 cfg->exec->provide_cluster_info ? "true" : "false",
						 list_length(cfg->exec->args));
		foreach(lc, cfg->exec->env)
		{
			if (foreach_current_index(lc) > 0)
				appendStringInfoString(&x, ", ");
			escape_json(&x, ((KwKeyValue *) lfirst(lc))->key);
		}
		appendStringInfoString(&x, "]}");
		appendStringInfo(&buf, ", \"exec\": %s", x.data);
	}
	appendStringInfoChar(&buf, '}');

	PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data)));
}

/*
 * json_string
 *		Append "key": "value" (or null) to a JSON object being built in buf.
 */
static void
json_string(StringInfo buf, const char *key, const char *value)
{
	if (buf->len > 1)
		appendStringInfoString(buf, ", ");
	escape_json(buf, key);
	appendStringInfoString(buf, ": ");
	if (value != NULL)
		escape_json(buf, value);
	else
		appendStringInfoString(buf, "null");
}

/*
 * json_bytes
 *		Append "key": "<N bytes>" (or null): the size of a PEM value, never
 *		its content.
 */
static void
json_bytes(StringInfo buf, const char *key, const char *data)
{
	char	   *v = data ? psprintf("<%zu bytes>", strlen(data)) : NULL;

	json_string(buf, key, v);
}

/*
 * kw_server_usage: whether `role` has USAGE on foreign server `serverid`
 * (PostgreSQL's aclcheck, whose name changed in 16).  kwatch checks it for
 * the role calling watch() (discovery.c), for the watch's role each time
 * the worker loads its credentials (kw_check_watch_role), and for the
 * readers of kwatch.watch_status() (shmem.c).
 */
AclResult
kw_server_usage(Oid serverid, Oid role)
{
	return KW_SERVER_USAGE(serverid, role);
}

/*
 * kw_check_watch_role: ERRORs (42501) unless `role`, the role of a watch
 * on foreign server `server`, may still use it: USAGE, as kwatch.watch()
 * checked at registration, may have been revoked since, or the watch
 * handed to another role by REASSIGN OWNED (ownership.c).  A role that no
 * longer exists is refused by user_mapping_options, with its own
 * message.  Needs a transaction.
 */
void
kw_check_watch_role(const char *server, Oid role)
{
	ForeignServer *fs = GetForeignServerByName(server, false);

	if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(role)) || superuser_arg(role))
		return;
	if (kw_server_usage(fs->serverid, role) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("role \"%s\" of this watch has no USAGE on foreign server \"%s\"",
						GetUserNameFromId(role, false), server),
				 errhint("Grant that role USAGE on the server again, or remove the watch with kwatch.unwatch().")));
}
/*
 * kw_connection_generation: a number that changes whenever this process
 * learns that a foreign server, a user mapping or a role changed (its
 * syscache callbacks ran), so that settings resolved before may be stale.
 * The worker compares it with the one it saw when it read a watch's
 * settings (watch.c).  0 until the first kw_cluster_config_for_server.
 */
uint64
kw_connection_generation(void)
{
	return connection_generation;
}

/*
 * conn_inval_callback: syscache callback (utils/inval.h signature) for
 * pg_foreign_server, pg_user_mapping and pg_authid: every cached entry is
 * dropped at its next use.  postgres_fdw's pgfdw_inval_callback matches
 * hash values; these catalogs change rarely, and a user mapping created
 * for a role that used PUBLIC's has a hash value nobody could have kept,
 * so all entries go.
 */
static void
conn_inval_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	HASH_SEQ_STATUS scan;
	ConnCacheEntry *entry;

	connection_generation++;
	hash_seq_init(&scan, ConnectionHash);
	while ((entry = (ConnCacheEntry *) hash_seq_search(&scan)) != NULL)
		entry->valid = false;
}

/*
 * file_stamps: a FileStamp (inode, size, mtime, or that it is missing) of
 * each file of a kubeconfig path list (colon-separated, as $KUBECONFIG),
 * palloc'd in CurrentMemoryContext.
 */
static List *
file_stamps(const char *path_list)
{
	List	   *stamps = NIL;
	char	   *copy = pstrdup(path_list);
	char	   *save = NULL;

	for (char *p = strtok_r(copy, ":", &save); p; p = strtok_r(NULL, ":", &save))
	{
		FileStamp  *fs = palloc0(sizeof(FileStamp));
		struct stat st;

		fs->path = pstrdup(p);
		if (stat(p, &st) == 0)
		{
			fs->exists = true;
			fs->dev = st.st_dev;
			fs->ino = st.st_ino;
			fs->size = st.st_size;
			fs->mtime = st.st_mtim;
		}
		stamps = lappend(stamps, fs);
	}
	return stamps;
}

/*
 * stamps_unchanged: whether every file of `stamps` still looks as it did
 * (a file replaced by rename has another inode; one rewritten in place
 * another mtime or size).
 */
static bool
stamps_unchanged(List *stamps)
{
	ListCell   *lc;

	foreach(lc, stamps)
	{
		FileStamp  *fs = (FileStamp *) lfirst(lc);
		struct stat st;
		bool		exists = stat(fs->path, &st) == 0;

		if (exists != fs->exists)
			return false;
		if (exists && (st.st_dev != fs->dev || st.st_ino != fs->ino ||
					   st.st_size != fs->size ||
					   st.st_mtim.tv_sec != fs->mtime.tv_sec ||
					   st.st_mtim.tv_nsec != fs->mtime.tv_nsec))
			return false;
	}
	return true;
}
