/*-------------------------------------------------------------------------
 *
 * kubeconfig.c
 *		Connection settings of a cluster from a kubeconfig file, or from the
 *		environment of a pod (in-cluster configuration).
 *
 * A kubeconfig (PROTOCOL 32; client-go tools/clientcmd/api/v1/types.go) is a
 * YAML or JSON document:
 *
 *	 current-context: dev
 *	 clusters: [{name: c1, cluster: {server: .., certificate-authority(-data):
 *				 .., insecure-skip-tls-verify: .., tls-server-name: ..}}]
 *	 users:    [{name: u1, user: {token: .., tokenFile: .., client-certificate
 *				 (-data): .., client-key(-data): .., exec: .., auth-provider: ..}}]
 *	 contexts: [{name: dev, context: {cluster: c1, user: u1, namespace: ..}}]
 *
 * libyaml loads each file into a node tree (YAML is a superset of JSON, so
 * JSON kubeconfigs need nothing special).  We copy the scalar fields of every
 * named entry into palloc'd lists, free the libyaml tree, and then resolve
 * the selected context into a KwClusterConfig.  Merging of several files
 * (a $KUBECONFIG-style colon list) follows client-go's loader.go: the first
 * file to define a name wins the whole entry, and the first file to set
 * current-context wins it.
 *
 * Everything the parse allocates lives in a private memory context that is
 * deleted before we return (or on error); libyaml's own malloc'd structures
 * are freed in PG_CATCH blocks before the error propagates, so a bad file can
 * neither leak nor crash.  (PG_CATCH + PG_RE_THROW rather than PG_FINALLY:
 * the latter trips gcc's -Wclobbered, which -Wextra -Werror turns fatal.)
 * Only the resulting KwClusterConfig is allocated in the caller's context.
 *
 * Secrets (tokens, keys) never appear in messages: errors name the file,
 * entry and field, never a value.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/stat.h>
#include <unistd.h>

#include <yaml.h>

#include "common/base64.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "kw_common.h"
#include "kw_cluster.h"

/* A kubeconfig larger than this is certainly not one (real ones are KBs). */
#define KC_MAX_FILE_SIZE	(16 * 1024 * 1024)

/*
 * Deepest nesting of mappings and lists accepted.  A real kubeconfig's
 * deepest path (users[].user.exec.env[].name) is 7 levels; the bound keeps
 * libyaml's per-token cost, which grows with depth, small.
 */
#define KC_MAX_DEPTH		64

/* Where a pod finds its service account (PROTOCOL 34). */
#define KC_SA_DIR			"/var/run/secrets/kubernetes.io/serviceaccount"
#define KC_SA_TOKEN_FILE	KC_SA_DIR "/token"
#define KC_SA_CA_FILE		KC_SA_DIR "/ca.crt"
#define KC_SA_NS_FILE		KC_SA_DIR "/namespace"

/*
 * A copied YAML node below an entry's field: a scalar's text, a list's
 * items (of KcNode) or a mapping's pairs (of KcField).
 */
typedef struct KcNode
{
	char	   *value;			/* scalar; NULL for null */
	List	   *items;			/* sequence */
	List	   *pairs;			/* mapping */
	bool		is_seq;
	bool		is_map;
} KcNode;

/* One key of an entry's inner mapping ("server: ...", "exec: {...}"). */
typedef struct KcField
{
	char	   *key;
	char	   *value;			/* NULL for null scalars and non-scalars */
	bool		present;		/* false for explicit nulls */
	KcNode	   *node;			/* lists and mappings (exec, as-groups) */
} KcField;

/* One named entry of clusters[], users[] or contexts[]. */
typedef struct KcEntry
{
	char	   *name;
	char	   *file;			/* kubeconfig file that defined it */
	char	   *dir;			/* that file's directory, for relative paths */
	List	   *fields;			/* of KcField */
} KcEntry;

/* The merged content of all files of one kubeconfig list. */
typedef struct KcConfig
{
	List	   *clusters;		/* of KcEntry */
	List	   *users;
	List	   *contexts;
	char	   *current_context;
	int			nfiles;			/* files actually read */
} KcConfig;

static char *kc_read_file(const char *path, bool missing_ok);
static void kc_read_files(const char *path, KcConfig *kc);
static void kc_pick_context(KcConfig *kc, const char *path, const char *context,
							KcEntry **cluster, KcEntry **user, KwClusterConfig *cfg);
static void kc_apply_cluster(KcEntry *cluster, KwClusterConfig *cfg);
static void kc_apply_user(KcEntry *user, KwClusterConfig *cfg);
static void kc_default_scheme(KcEntry *cluster, KwClusterConfig *cfg);
static void kc_parse_file(const char *path, const char *text, KcConfig *kc);
static void kc_parser_start(yaml_parser_t *parser, const char *text);
static void kc_syntax_error(const char *path, yaml_parser_t *parser)
			pg_attribute_noreturn();
static void kc_walk_document(const char *path, yaml_document_t *doc,
							 KcConfig *kc);
static char *kc_scalar(const char *path, yaml_node_t *node, const char *what);
static char *kc_pair_key(const char *path, yaml_document_t *doc,
						 yaml_node_pair_t *pair, yaml_node_t **value);
static List *kc_collect_entries(const char *path, const char *dir,
								yaml_document_t *doc, yaml_node_t *seq,
								const char *listname, const char *innername);
static List *kc_merge_entries(List *acc, List *add);
static void *kc_find_named(List *list, size_t name_at, const char *name);
static KcEntry *kc_find_entry(List *entries, const char *name);
static char *kc_entry_names(List *entries);
static KcField *kc_field(KcEntry *e, const char *key);
static KcField *kc_find_field(List *fields, const char *key);
static char *kc_string(KcEntry *e, const char *key);
static char *kc_path(KcEntry *e, const char *key);
static char *kc_base64_pem(KcEntry *e, const char *key, const char *kind);
static bool kc_bool(KcEntry *e, const char *key, const char *kind);
static void kc_check_header_safe(KcEntry *e, const char *key,
								 const char *value, const char *kind);
static void kc_field_error(KcEntry *e, const char *key, const char *kind,
						   int sqlerrcode, const char *problem)
			pg_attribute_noreturn();
static KcNode *kc_copy_node(const char *path, yaml_document_t *doc,
							yaml_node_t *n, int depth);
static KwExecConfig *kc_exec(KcEntry *user, KcField *f);
static void kc_impersonation(KcEntry *user, KwClusterConfig *cfg);

/*
 * kw_kubeconfig_load
 *		Resolve one context of a kubeconfig into connection settings.
 *
 * path is a file name or a colon-separated list of them, as in $KUBECONFIG;
 * context names the context to use, or is NULL/"" for the current-context.
 * Returns a KwClusterConfig palloc'd in CurrentMemoryContext (server_name is
 * left NULL for the caller).
 *
 * Rules (PROTOCOL 32; client-go tools/clientcmd/loader.go and
 * client_config.go): in a list, missing files are skipped, but at least one
 * must exist; a single file must exist.  The first file defining a cluster,
 * user or context name wins the whole entry; current-context comes from the
 * first file that sets one.  *-data fields (base64) win over the matching
 * path, and relative paths resolve against the directory of the file that
 * defined the entry.  A context without a user means no credentials.  The
 * server loses trailing slashes; one without a scheme gets https when TLS
 * settings are present, else http (client-go rest/url_utils.go).
 *
 * Errors: unreadable file (errcode_for_file_access, so a missing file is
 * ERRCODE_UNDEFINED_FILE); YAML syntax or structure errors
 * (ERRCODE_CONFIG_FILE_ERROR); unknown context/cluster/user
 * (ERRCODE_UNDEFINED_OBJECT, naming the defined ones); bad base64
 * (ERRCODE_INVALID_PARAMETER_VALUE); an invalid exec plugin entry, proxy-url
 * or impersonation (kc_exec, kc_impersonation); auth-provider and basic
 * auth (ERRCODE_FEATURE_NOT_SUPPORTED).
 */
KwClusterConfig *
kw_kubeconfig_load(const char *path, const char *context)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	MemoryContext tmpcxt;
	KwClusterConfig *volatile result = NULL;

	if (path == NULL || path[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("kubeconfig path must not be empty")));

	tmpcxt = AllocSetContextCreate(oldcxt, "kwatch kubeconfig",
								   ALLOCSET_SMALL_SIZES);

	PG_TRY();
	{
		KcConfig	kc;
		KcEntry    *cluster;
		KcEntry    *user;
		KwClusterConfig cfg;

		MemoryContextSwitchTo(tmpcxt);
		memset(&kc, 0, sizeof(kc));
		memset(&cfg, 0, sizeof(cfg));

		kc_read_files(path, &kc);
		kc_pick_context(&kc, path, context, &cluster, &user, &cfg);
		kc_apply_cluster(cluster, &cfg);
		if (user != NULL)
			kc_apply_user(user, &cfg);
		kc_default_scheme(cluster, &cfg);

		/* Copy the result out of the temporary context. */
		MemoryContextSwitchTo(oldcxt);
		result = kw_cluster_config_copy(&cfg);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(oldcxt);
		MemoryContextDelete(tmpcxt);
		PG_RE_THROW();
	}
	PG_END_TRY();
	MemoryContextDelete(tmpcxt);

	return result;
}

/*
 * kw_kubeconfig_contexts: the names of the contexts the kubeconfig path
 * list `path` defines (merged as kw_kubeconfig_load merges them: the first
 * file to define a name wins), in the order the files define them, as a
 * List of palloc'd strings in the caller's context; *current (when not
 * NULL) gets current-context or NULL.  Reads no credential file and runs
 * no plugin.  Errors: those of kw_kubeconfig_load's reading and parsing.
 */
List *
kw_kubeconfig_contexts(const char *path, char **current)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	MemoryContext tmpcxt;
	List	   *volatile names = NIL;

	if (path == NULL || path[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("kubeconfig path must not be empty")));
	tmpcxt = AllocSetContextCreate(oldcxt, "kwatch kubeconfig", ALLOCSET_SMALL_SIZES);
	PG_TRY();
	{
		KcConfig	kc;
		ListCell   *lc;

		MemoryContextSwitchTo(tmpcxt);
		memset(&kc, 0, sizeof(kc));
		kc_read_files(path, &kc);
		MemoryContextSwitchTo(oldcxt);
		foreach(lc, kc.contexts)
			names = lappend(names, pstrdup(((KcEntry *) lfirst(lc))->name));
		if (current)
			*current = kc.current_context ? pstrdup(kc.current_context) : NULL;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(oldcxt);
		MemoryContextDelete(tmpcxt);
		PG_RE_THROW();
	}
	PG_END_TRY();
	MemoryContextDelete(tmpcxt);
	return names;
}

/*
 * kc_read_files: reads and parses every file of the kubeconfig path list
 * `path` into *kc, the first definition of each name winning (client-go
 * clientcmd loader.go): empty list elements are skipped (filepath.
 * SplitList), so are missing files of a list (not a single file's).
 * Errors: a list naming no file (22023), none of its files existing
 * (58P01), and those of kc_read_file / kc_parse_file.
 */
static void
kc_read_files(const char *path, KcConfig *kc)
{
	List	   *files = NIL;
	ListCell   *lc;
	bool		single;
	char	   *copy = pstrdup(path);
	char	   *p = copy;

	for (;;)
	{
		char	   *colon = strchr(p, ':');

		if (colon)
			*colon = '\0';
		if (*p != '\0')
			files = lappend(files, p);
		if (!colon)
			break;
		p = colon + 1;
	}
	if (files == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("kubeconfig path \"%s\" names no file", path)));
	single = (list_length(files) == 1);

	foreach(lc, files)
	{
		char	   *file = (char *) lfirst(lc);
		char	   *abs;
		char	   *text;

		/* Absolute, so that entries' relative paths become absolute. */
		abs = make_absolute_path(file);
		file = pstrdup(abs);
		free(abs);

		text = kc_read_file(file, !single);
		if (text == NULL)
			continue;			/* missing list member: skipped */
		kc->nfiles++;
		kc_parse_file(file, text, kc);
	}
	if (kc->nfiles == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FILE),
				 errmsg("none of the kubeconfig files \"%s\" exists",
						path)));
}

/*
 * kc_pick_context: the context `context` (or current-context) of *kc and
 * the cluster and user it names: *cluster always, *user NULL when the
 * context names none (no credentials at all); the context's namespace
 * goes to cfg.  Errors (42704, F0000) name what is missing and list what
 * the kubeconfig has.
 */
static void
kc_pick_context(KcConfig *kc, const char *path, const char *context,
				KcEntry **cluster, KcEntry **user, KwClusterConfig *cfg)
{
	const char *ctxname;
	KcEntry    *ctx;
	char	   *cluster_name;
	char	   *user_name;

	if (context != NULL && context[0] != '\0')
		ctxname = context;
	else if (kc->current_context != NULL)
		ctxname = kc->current_context;
	else
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("kubeconfig \"%s\" sets no current-context", path),
				 errdetail("Available contexts: %s.",
						   kc_entry_names(kc->contexts)),
				 errhint("Set the server option \"context\".")));

	ctx = kc_find_entry(kc->contexts, ctxname);
	if (ctx == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("context \"%s\" not found in kubeconfig \"%s\"",
						ctxname, path),
				 errdetail("Available contexts: %s.",
						   kc_entry_names(kc->contexts))));

	/* The context's cluster: required. */
	cluster_name = kc_string(ctx, "cluster");
	if (cluster_name == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("context \"%s\" in kubeconfig file \"%s\" names no cluster",
						ctx->name, ctx->file)));
	*cluster = kc_find_entry(kc->clusters, cluster_name);
	if (*cluster == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("cluster \"%s\" of context \"%s\" not found in kubeconfig \"%s\"",
						cluster_name, ctx->name, path),
				 errdetail("Available clusters: %s.",
						   kc_entry_names(kc->clusters))));

	/* The context's user: optional (no credentials at all). */
	*user = NULL;
	user_name = kc_string(ctx, "user");
	if (user_name != NULL)
	{
		*user = kc_find_entry(kc->users, user_name);
		if (*user == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("user \"%s\" of context \"%s\" not found in kubeconfig \"%s\"",
							user_name, ctx->name, path),
					 errdetail("Available users: %s.",
							   kc_entry_names(kc->users))));
	}

	cfg->default_namespace = kc_string(ctx, "namespace");
}

/*
 * kc_apply_cluster: a clusters[].cluster entry into cfg: server (trailing
 * slashes stripped: we append "/api/..."), proxy-url (http, https or
 * socks5, as client-go's validation.go), the CA (*-data wins over the
 * path), insecure-skip-tls-verify, tls-server-name.  Errors: F0000.
 */
static void
kc_apply_cluster(KcEntry *cluster, KwClusterConfig *cfg)
{
	char	   *s = kc_string(cluster, "server");
	size_t		len;

	if (s == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("cluster \"%s\" in kubeconfig file \"%s\" has no server",
						cluster->name, cluster->file)));
	len = strlen(s);
	while (len > 0 && s[len - 1] == '/')
		s[--len] = '\0';
	kc_check_header_safe(cluster, "server", s, "cluster");
	cfg->api_server = s;

	cfg->proxy_url = kc_string(cluster, "proxy-url");
	if (cfg->proxy_url != NULL)
	{
		kc_check_header_safe(cluster, "proxy-url", cfg->proxy_url, "cluster");
		if (pg_strncasecmp(cfg->proxy_url, "http://", 7) != 0 &&
			pg_strncasecmp(cfg->proxy_url, "https://", 8) != 0 &&
			pg_strncasecmp(cfg->proxy_url, "socks5://", 9) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_CONFIG_FILE_ERROR),
					 errmsg("proxy-url of cluster \"%s\" in kubeconfig file \"%s\" must be an http, https or socks5 URL",
							cluster->name, cluster->file)));
	}

	cfg->ca_data = kc_base64_pem(cluster, "certificate-authority-data",
								 "cluster");
	if (cfg->ca_data == NULL)
		cfg->ca_file = kc_path(cluster, "certificate-authority");
	cfg->insecure_skip_tls_verify =
		kc_bool(cluster, "insecure-skip-tls-verify", "cluster");
	cfg->tls_server_name = kc_string(cluster, "tls-server-name");
}

/*
 * kc_apply_user: a users[].user entry into cfg: exec plugin,
 * impersonation, token / tokenFile, client certificate and key (*-data
 * wins over the path).  auth-provider and basic auth are refused (0A000):
 * ignoring them would silently connect with other credentials or none.
 */
static void
kc_apply_user(KcEntry *user, KwClusterConfig *cfg)
{
	KcField    *f;

	f = kc_field(user, "exec");
	if (f != NULL && f->present)
		cfg->exec = kc_exec(user, f);
	f = kc_field(user, "auth-provider");
	if (f != NULL && f->present)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("auth-provider credential plugins are not supported"),
				 errdetail("User \"%s\" in kubeconfig file \"%s\" authenticates with an auth-provider.",
						   user->name, user->file),
				 errhint("Use a bearer token instead: a user with \"token\" or \"tokenFile\" in the kubeconfig, or the \"token\" option of a user mapping.")));

	kc_impersonation(user, cfg);

	if (kc_string(user, "password") != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("basic authentication is not supported"),
				 errdetail("User \"%s\" in kubeconfig file \"%s\" sets a password.",
						   user->name, user->file),
				 errhint("Use a bearer token or a client certificate instead.")));

	cfg->token = kc_string(user, "token");
	if (cfg->token != NULL)
		kc_check_header_safe(user, "token", cfg->token, "user");
	cfg->token_file = kc_path(user, "tokenFile");

	cfg->client_cert_data = kc_base64_pem(user, "client-certificate-data",
										  "user");
	if (cfg->client_cert_data == NULL)
		cfg->client_cert_file = kc_path(user, "client-certificate");
	cfg->client_key_data = kc_base64_pem(user, "client-key-data", "user");
	if (cfg->client_key_data == NULL)
		cfg->client_key_file = kc_path(user, "client-key");
}

/*
 * kc_default_scheme: a server without a scheme gets one as in client-go's
 * DefaultServerURL (rest/url_utils.go): https when any TLS setting is
 * present, else http.  Other schemes are errors (F0000).
 */
static void
kc_default_scheme(KcEntry *cluster, KwClusterConfig *cfg)
{
	if (strstr(cfg->api_server, "://") == NULL)
	{
		bool		tls = cfg->ca_data || cfg->ca_file ||
			cfg->client_cert_data || cfg->client_cert_file ||
			cfg->insecure_skip_tls_verify;

		cfg->api_server = psprintf("%s://%s", tls ? "https" : "http",
								   cfg->api_server);
	}
	else if (pg_strncasecmp(cfg->api_server, "https://", 8) != 0 &&
			 pg_strncasecmp(cfg->api_server, "http://", 7) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("server of cluster \"%s\" in kubeconfig file \"%s\" is not an http or https URL",
						cluster->name, cluster->file)));
}

/*
 * kw_in_cluster_config
 *		Connection settings of a pod's own cluster (PROTOCOL 34).
 *
 * Follows client-go rest.InClusterConfig (rest/config.go): the API server is
 * https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT (an IPv6 host in
 * brackets, as net.JoinHostPort), the bearer token is the service account's
 * token file (set as token_file: it rotates and is re-read, PROTOCOL 33), and
 * the CA is ca.crt when it can be read (client-go skips an unreadable one).
 * The namespace file, when readable, gives default_namespace.
 *
 * Returns a KwClusterConfig palloc'd in CurrentMemoryContext.  Errors with
 * ERRCODE_CONFIG_FILE_ERROR when the environment variables are missing.
 */
KwClusterConfig *
kw_in_cluster_config(void)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	KwClusterConfig *cfg;

	if (host == NULL || host[0] == '\0' || port == NULL || port[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("not running inside a Kubernetes pod"),
				 errdetail("The environment variables KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT of the PostgreSQL server are not both set."),
				 errhint("Use the server option \"kubeconfig\" or \"api_server\" instead of \"in_cluster\".")));

	cfg = palloc0(sizeof(KwClusterConfig));
	if (strchr(host, ':') != NULL && host[0] != '[')
		cfg->api_server = psprintf("https://[%s]:%s", host, port);
	else
		cfg->api_server = psprintf("https://%s:%s", host, port);
	cfg->token_file = pstrdup(KC_SA_TOKEN_FILE);
	if (access(KC_SA_CA_FILE, R_OK) == 0)
		cfg->ca_file = pstrdup(KC_SA_CA_FILE);

	/* The namespace is informational: any problem just leaves it unset. */
	if (access(KC_SA_NS_FILE, R_OK) == 0)
	{
		FILE	   *f = AllocateFile(KC_SA_NS_FILE, "r");

		if (f != NULL)
		{
			char		buf[256];
			size_t		n = fread(buf, 1, sizeof(buf) - 1, f);

			FreeFile(f);
			buf[n] = '\0';
			while (n > 0 && isspace((unsigned char) buf[n - 1]))
				buf[--n] = '\0';
			if (n > 0)
				cfg->default_namespace = pstrdup(buf);
		}
	}

	return cfg;
}

/*
 * kc_read_file
 *		Read a whole kubeconfig file into a palloc'd NUL-terminated string.
 *
 * Returns NULL when the file does not exist and missing_ok (a member of a
 * $KUBECONFIG list: client-go loader.go skips those).  Other failures raise
 * errcode_for_file_access(); files over KC_MAX_FILE_SIZE, or containing NUL
 * bytes, raise ERRCODE_CONFIG_FILE_ERROR.
 */
static char *
kc_read_file(const char *path, bool missing_ok)
{
	FILE	   *f;
	StringInfoData buf;
	char		chunk[8192];
	size_t		n;

	f = AllocateFile(path, "r");
	if (f == NULL)
	{
		if (missing_ok && errno == ENOENT)
			return NULL;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open kubeconfig file \"%s\": %m", path)));
	}

	initStringInfo(&buf);
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
	{
		if (buf.len + n > KC_MAX_FILE_SIZE)
		{
			FreeFile(f);
			ereport(ERROR,
					(errcode(ERRCODE_CONFIG_FILE_ERROR),
					 errmsg("kubeconfig file \"%s\" is larger than %d bytes",
							path, KC_MAX_FILE_SIZE)));
		}
		appendBinaryStringInfo(&buf, chunk, n);
	}
	if (ferror(f))
	{
		int			save_errno = errno;

		FreeFile(f);
		errno = save_errno;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read kubeconfig file \"%s\": %m", path)));
	}
	FreeFile(f);

	if (memchr(buf.data, '\0', buf.len) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("kubeconfig file \"%s\" contains a NUL byte", path)));
	return buf.data;
}

/*
 * kc_parse_file
 *		Load one file's YAML document and merge its entries into kc.
 *
 * Two passes over the text.  The first walks libyaml's event stream only to
 * bound nesting (KC_MAX_DEPTH) and to stay cancellable: libyaml's scanner
 * costs O(depth) per token, so a file of 200,000 nested "[" keeps
 * yaml_parser_load busy for minutes, uninterruptibly.  The second loads the
 * node tree for kc_walk_document.  Only the first document of a stream is
 * read, as yaml_parser_load does.  An empty file is an empty kubeconfig.
 *
 * libyaml's parser and document are malloc'd by libyaml: they are
 * freed also when an error propagates (PG_CATCH), so nothing leaks.  Syntax
 * errors raise ERRCODE_CONFIG_FILE_ERROR with libyaml's problem and its
 * 1-based line and column; too deep nesting raises it as well.
 */
static void
kc_parse_file(const char *path, const char *text, KcConfig *kc)
{
	yaml_parser_t parser;
	yaml_event_t event;
	yaml_document_t doc;
	volatile bool parser_ok = false;
	volatile bool doc_ok = false;

	PG_TRY();
	{
		int			depth = 0;
		bool		done = false;

		/* Pass 1: events, to bound the nesting depth. */
		kc_parser_start(&parser, text);
		parser_ok = true;
		while (!done)
		{
			yaml_event_type_t type;

			CHECK_FOR_INTERRUPTS();
			if (!yaml_parser_parse(&parser, &event))
				kc_syntax_error(path, &parser);
			type = event.type;
			yaml_event_delete(&event);	/* nothing can throw in between */

			switch (type)
			{
				case YAML_SEQUENCE_START_EVENT:
				case YAML_MAPPING_START_EVENT:
					if (++depth > KC_MAX_DEPTH)
						ereport(ERROR,
								(errcode(ERRCODE_CONFIG_FILE_ERROR),
								 errmsg("kubeconfig file \"%s\" is nested more than %d levels deep",
										path, KC_MAX_DEPTH)));
					break;
				case YAML_SEQUENCE_END_EVENT:
				case YAML_MAPPING_END_EVENT:
					depth--;
					break;
				case YAML_DOCUMENT_END_EVENT:
				case YAML_STREAM_END_EVENT:
					done = true;
					break;
				default:
					break;
			}
		}
		yaml_parser_delete(&parser);
		parser_ok = false;

		/* Pass 2: the node tree. */
		kc_parser_start(&parser, text);
		parser_ok = true;
		if (!yaml_parser_load(&parser, &doc))
			kc_syntax_error(path, &parser);	/* the partial document is
											 * already freed */
		doc_ok = true;

		kc_walk_document(path, &doc, kc);
	}
	PG_CATCH();
	{
		if (doc_ok)
			yaml_document_delete(&doc);
		if (parser_ok)
			yaml_parser_delete(&parser);
		PG_RE_THROW();
	}
	PG_END_TRY();
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
}

/*
 * kc_parser_start
 *		Initialize a libyaml parser reading the NUL-terminated text.  On
 *		success the caller owns the parser (yaml_parser_delete); on failure
 *		raises ERRCODE_OUT_OF_MEMORY with nothing to free.
 */
static void
kc_parser_start(yaml_parser_t *parser, const char *text)
{
	if (!yaml_parser_initialize(parser))
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory"),
				 errdetail("Could not initialize the YAML parser.")));
	yaml_parser_set_input_string(parser, (const unsigned char *) text,
								 strlen(text));
}

/*
 * kc_syntax_error
 *		Raise the error of a failed yaml_parser_parse/yaml_parser_load:
 *		ERRCODE_OUT_OF_MEMORY for libyaml's allocation failures, else
 *		ERRCODE_CONFIG_FILE_ERROR with libyaml's problem, 1-based position
 *		and context.  Does not return.
 */
static void
kc_syntax_error(const char *path, yaml_parser_t *parser)
{
	if (parser->error == YAML_MEMORY_ERROR)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory while parsing kubeconfig file \"%s\"",
						path)));
	ereport(ERROR,
			(errcode(ERRCODE_CONFIG_FILE_ERROR),
			 errmsg("syntax error in kubeconfig file \"%s\" at line %lu, column %lu: %s",
					path,
					(unsigned long) parser->problem_mark.line + 1,
					(unsigned long) parser->problem_mark.column + 1,
					parser->problem ? parser->problem : "unknown error"),
			 kw_errdetail_yaml_context(parser)));
}

/*
 * kc_walk_document
 *		Copy the kubeconfig's entries out of a libyaml document into kc.
 *
 * Unknown top-level keys (apiVersion, kind, preferences, extensions) are
 * ignored, as client-go does.  Entries whose name an earlier file already
 * defined are dropped (first definition wins, loader.go).  Structure errors
 * raise ERRCODE_CONFIG_FILE_ERROR.
 */
static void
kc_walk_document(const char *path, yaml_document_t *doc, KcConfig *kc)
{
	yaml_node_t *root = yaml_document_get_root_node(doc);
	yaml_node_pair_t *pair;
	char	   *dir;

	if (root == NULL)
		return;					/* empty file: empty config */
	if (root->type == YAML_SCALAR_NODE &&
		kc_scalar(path, root, "document") == NULL)
		return;					/* "null" or "~": empty config as well */
	if (root->type != YAML_MAPPING_NODE)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("kubeconfig file \"%s\" is not a mapping", path),
				 errdetail("A kubeconfig has keys such as \"clusters\", \"users\" and \"contexts\" at its top level.")));

	dir = pstrdup(path);
	get_parent_directory(dir);

	for (pair = root->data.mapping.pairs.start;
		 pair < root->data.mapping.pairs.top; pair++)
	{
		yaml_node_t *v;
		char	   *key = kc_pair_key(path, doc, pair, &v);

		if (key == NULL)
			continue;

		if (strcmp(key, "clusters") == 0)
			kc->clusters = kc_merge_entries(kc->clusters,
											kc_collect_entries(path, dir, doc, v,
															   "clusters",
															   "cluster"));
		else if (strcmp(key, "users") == 0)
			kc->users = kc_merge_entries(kc->users,
										 kc_collect_entries(path, dir, doc, v,
															"users", "user"));
		else if (strcmp(key, "contexts") == 0)
			kc->contexts = kc_merge_entries(kc->contexts,
											kc_collect_entries(path, dir, doc, v,
															   "contexts",
															   "context"));
		else if (strcmp(key, "current-context") == 0)
		{
			char	   *cur = kc_scalar(path, v, "current-context");

			if (cur != NULL && kc->current_context == NULL)
				kc->current_context = cur;
		}
	}
}

/*
 * kc_scalar
 *		The text of a scalar node, palloc'd; NULL for YAML nulls.
 *
 * Plain (unquoted) "", "~" and "null"/"Null"/"NULL" are nulls (YAML core
 * schema, which sigs.k8s.io/yaml follows); an empty string counts as unset,
 * as client-go treats "" fields.  A non-scalar raises
 * ERRCODE_CONFIG_FILE_ERROR naming "what" and the line.
 */
static char *
kc_scalar(const char *path, yaml_node_t *node, const char *what)
{
	const char *v;
	size_t		len;

	if (node->type != YAML_SCALAR_NODE)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("%s in kubeconfig file \"%s\" at line %lu must be a single value",
						what, path,
						(unsigned long) node->start_mark.line + 1)));

	v = (const char *) node->data.scalar.value;
	len = node->data.scalar.length;
	if (len == 0)
		return NULL;
	if (node->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
		((len == 1 && v[0] == '~') ||
		 (len == 4 && (strncmp(v, "null", 4) == 0 ||
					   strncmp(v, "Null", 4) == 0 ||
					   strncmp(v, "NULL", 4) == 0))))
		return NULL;
	if (memchr(v, '\0', len) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("%s in kubeconfig file \"%s\" at line %lu contains a NUL character",
						what, path,
						(unsigned long) node->start_mark.line + 1)));
	return pnstrdup(v, len);
}

/*
 * kc_pair_key
 *		The key of a mapping's pair as text (kc_scalar), with the pair's value
 *		node in *value; NULL when either node is missing, the key is not a
 *		scalar or is a YAML null: such a pair is passed over.
 */
static char *
kc_pair_key(const char *path, yaml_document_t *doc, yaml_node_pair_t *pair,
			yaml_node_t **value)
{
	yaml_node_t *k = yaml_document_get_node(doc, pair->key);

	*value = yaml_document_get_node(doc, pair->value);
	if (k == NULL || *value == NULL || k->type != YAML_SCALAR_NODE)
		return NULL;
	return kc_scalar(path, k, "key");
}

/*
 * kc_collect_entries
 *		Copy one file's clusters[], users[] or contexts[] list.
 *
 * seq must be a sequence (or null) of mappings {name: .., <innername>: {..}}.
 * Every key of the inner mapping becomes a KcField: scalars with their text,
 * other nodes (exec: {...}, as-groups: [...]) as present without a value.
 * A name defined twice in one file is an error, as in client-go's v1
 * conversion (Convert_Slice_v1_NamedCluster_To_Map_string_To_Pointer_api_Cluster).
 * Returns a List of KcEntry in file order.
 */
static List *
kc_collect_entries(const char *path, const char *dir, yaml_document_t *doc,
				   yaml_node_t *seq, const char *listname,
				   const char *innername)
{
	List	   *result = NIL;
	yaml_node_item_t *item;

	if (seq->type == YAML_SCALAR_NODE && kc_scalar(path, seq, listname) == NULL)
		return NIL;				/* "users: null" */
	if (seq->type != YAML_SEQUENCE_NODE)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("\"%s\" in kubeconfig file \"%s\" at line %lu must be a list",
						listname, path,
						(unsigned long) seq->start_mark.line + 1)));

	for (item = seq->data.sequence.items.start;
		 item < seq->data.sequence.items.top; item++)
	{
		yaml_node_t *n = yaml_document_get_node(doc, *item);
		yaml_node_pair_t *pair;
		KcEntry    *e;
		yaml_node_t *inner = NULL;

		if (n == NULL || n->type != YAML_MAPPING_NODE)
			ereport(ERROR,
					(errcode(ERRCODE_CONFIG_FILE_ERROR),
					 errmsg("entry of \"%s\" in kubeconfig file \"%s\" at line %lu must be a mapping",
							listname, path,
							(unsigned long) (n ? n->start_mark.line + 1 : 0))));

		e = palloc0(sizeof(KcEntry));
		e->file = pstrdup(path);
		e->dir = pstrdup(dir);

		for (pair = n->data.mapping.pairs.start;
			 pair < n->data.mapping.pairs.top; pair++)
		{
			yaml_node_t *v;
			char	   *key = kc_pair_key(path, doc, pair, &v);

			if (key == NULL)
				continue;
			if (strcmp(key, "name") == 0)
				e->name = kc_scalar(path, v, "name");
			else if (strcmp(key, innername) == 0)
				inner = v;
		}

		if (e->name == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_CONFIG_FILE_ERROR),
					 errmsg("entry of \"%s\" in kubeconfig file \"%s\" at line %lu has no name",
							listname, path,
							(unsigned long) n->start_mark.line + 1)));
		if (kc_find_entry(result, e->name) != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_CONFIG_FILE_ERROR),
					 errmsg("duplicate name \"%s\" in \"%s\" of kubeconfig file \"%s\"",
							e->name, listname, path)));

		if (inner != NULL &&
			!(inner->type == YAML_SCALAR_NODE &&
			  kc_scalar(path, inner, innername) == NULL))
		{
			if (inner->type != YAML_MAPPING_NODE)
				ereport(ERROR,
						(errcode(ERRCODE_CONFIG_FILE_ERROR),
						 errmsg("\"%s\" of %s \"%s\" in kubeconfig file \"%s\" must be a mapping",
								innername, innername, e->name, path)));
			e->fields = kc_copy_node(path, doc, inner, 0)->pairs;
		}

		result = lappend(result, e);
	}

	return result;
}

/*
 * kc_merge_entries
 *		Append the entries of "add" whose names "acc" does not hold yet.
 *
 * First definition wins (client-go loader.go: "the first file to set a
 * particular map key wins and map key's value is never changed").
 * Returns the extended list.
 */
static List *
kc_merge_entries(List *acc, List *add)
{
	ListCell   *lc;

	foreach(lc, add)
	{
		KcEntry    *e = (KcEntry *) lfirst(lc);

		if (kc_find_entry(acc, e->name) == NULL)
			acc = lappend(acc, e);
	}
	return acc;
}

/*
 * kc_find_named
 *		The first element of a List of structs whose string member at
 *		offset name_at (an entry's name, a field's key) is name, or NULL.
 */
static void *
kc_find_named(List *list, size_t name_at, const char *name)
{
	ListCell   *lc;

	foreach(lc, list)
	{
		char	   *elem = (char *) lfirst(lc);

		if (strcmp(*(char **) (elem + name_at), name) == 0)
			return elem;
	}
	return NULL;
}

/*
 * kc_find_entry
 *		The entry called name, or NULL.
 */
static KcEntry *
kc_find_entry(List *entries, const char *name)
{
	return (KcEntry *) kc_find_named(entries, offsetof(KcEntry, name), name);
}

/*
 * kc_entry_names
 *		Comma-separated quoted names of entries, for errdetail; "none" if
 *		there are none.  palloc'd.
 */
static char *
kc_entry_names(List *entries)
{
	StringInfoData buf;
	ListCell   *lc;

	if (entries == NIL)
		return pstrdup("none");
	initStringInfo(&buf);
	foreach(lc, entries)
	{
		KcEntry    *e = (KcEntry *) lfirst(lc);

		appendStringInfo(&buf, "%s\"%s\"", buf.len > 0 ? ", " : "", e->name);
	}
	return buf.data;
}

/*
 * kc_field
 *		The field "key" of an entry's inner mapping, or NULL if absent.
 */
static KcField *
kc_field(KcEntry *e, const char *key)
{
	return kc_find_field(e->fields, key);
}

/* kc_find_field: the KcField called `key` in a List of them, or NULL. */
static KcField *
kc_find_field(List *fields, const char *key)
{
	return (KcField *) kc_find_named(fields, offsetof(KcField, key), key);
}

/*
 * kc_string
 *		The scalar text of field "key", or NULL if absent, null or empty.
 *
 * A non-scalar value where a string belongs raises
 * ERRCODE_CONFIG_FILE_ERROR.
 */
static char *
kc_string(KcEntry *e, const char *key)
{
	KcField    *f = kc_field(e, key);

	if (f == NULL || !f->present)
		return NULL;
	if (f->value == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("field \"%s\" of \"%s\" in kubeconfig file \"%s\" must be a single value",
						key, e->name, e->file)));
	return f->value;
}

/*
 * kc_path
 *		Field "key" as a file path, relative paths made relative to the
 *		directory of the kubeconfig that defined the entry (client-go
 *		loader.go ResolvePaths).  palloc'd, or NULL if unset.
 */
static char *
kc_path(KcEntry *e, const char *key)
{
	char	   *p = kc_string(e, key);
	char		buf[MAXPGPATH];

	if (p == NULL || is_absolute_path(p))
		return p;
	if (strlen(e->dir) + strlen(p) + 2 > MAXPGPATH)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("path in field \"%s\" of \"%s\" in kubeconfig file \"%s\" is too long",
						key, e->name, e->file)));
	join_path_components(buf, e->dir, p);
	canonicalize_path(buf);
	return pstrdup(buf);
}

/*
 * kc_base64_pem
 *		Field "key" (certificate-authority-data, client-certificate-data,
 *		client-key-data) decoded from base64 into PEM text.
 *
 * Whitespace inside the value is ignored (block scalars wrap long values).
 * Returns palloc'd NUL-terminated text, or NULL if unset.  Invalid base64, or
 * data that decodes to something with NUL bytes, raises
 * ERRCODE_INVALID_PARAMETER_VALUE; the value itself is never shown.
 */
static char *
kc_base64_pem(KcEntry *e, const char *key, const char *kind)
{
	char	   *v = kc_string(e, key);
	char	   *clean;
	char	   *out;
	int			len = 0;
	int			outlen;
	const char *p;

	if (v == NULL)
		return NULL;

	clean = palloc(strlen(v) + 1);
	for (p = v; *p; p++)
		if (!isspace((unsigned char) *p))
			clean[len++] = *p;
	clean[len] = '\0';

	out = palloc(pg_b64_dec_len(len) + 1);
	outlen = KW_B64_DECODE(clean, len, out, pg_b64_dec_len(len));
	if (outlen < 0)
		kc_field_error(e, key, kind, ERRCODE_INVALID_PARAMETER_VALUE,
					   "is not valid base64");
	out[outlen] = '\0';
	if (outlen == 0 || strlen(out) != (size_t) outlen)
		kc_field_error(e, key, kind, ERRCODE_INVALID_PARAMETER_VALUE,
					   "does not decode to PEM text");
	return out;
}

/*
 * kc_bool
 *		Field "key" as a boolean; false if unset.
 *
 * Accepts what parse_bool accepts (true/false, yes/no, on/off, 1/0), a
 * superset of YAML 1.1 booleans as sigs.k8s.io/yaml reads them.  Anything
 * else raises ERRCODE_CONFIG_FILE_ERROR.
 */
static bool
kc_bool(KcEntry *e, const char *key, const char *kind)
{
	char	   *v = kc_string(e, key);
	bool		result;

	if (v == NULL)
		return false;
	if (!parse_bool(v, &result))
		kc_field_error(e, key, kind, ERRCODE_CONFIG_FILE_ERROR,
					   "must be true or false");
	return result;
}

/*
 * kc_check_header_safe
 *		Refuse control characters and spaces in a value that goes into an
 *		HTTP request line or header (server URL, bearer token): a newline
 *		there would inject headers.  Raises ERRCODE_CONFIG_FILE_ERROR without
 *		showing the value.
 */
static void
kc_check_header_safe(KcEntry *e, const char *key, const char *value,
					 const char *kind)
{
	const unsigned char *p;

	for (p = (const unsigned char *) value; *p; p++)
		if (*p <= ' ' || *p == 0x7f)
			kc_field_error(e, key, kind, ERRCODE_CONFIG_FILE_ERROR,
						   "contains whitespace or control characters");
}

/*
 * kc_field_error
 *		Raises sqlerrcode: field "key" of kind "name" in kubeconfig file
 *		"file", then the problem; the value itself is never shown.
 */
static void
kc_field_error(KcEntry *e, const char *key, const char *kind, int sqlerrcode,
			   const char *problem)
{
	ereport(ERROR,
			(errcode(sqlerrcode),
			 errmsg("field \"%s\" of %s \"%s\" in kubeconfig file \"%s\" %s",
					key, kind, e->name, e->file, problem)));
}

/*
 * kc_copy_node
 *		Copy a YAML list or mapping (and what it holds) out of libyaml's tree.
 */
static KcNode *
kc_copy_node(const char *path, yaml_document_t *doc, yaml_node_t *n, int depth)
{
	KcNode	   *r = palloc0(sizeof(KcNode));

	if (depth > KC_MAX_DEPTH)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("kubeconfig file \"%s\" is nested too deeply", path)));
	if (n->type == YAML_SCALAR_NODE)
		r->value = kc_scalar(path, n, "value");
	else if (n->type == YAML_SEQUENCE_NODE)
	{
		r->is_seq = true;
		for (yaml_node_item_t *it = n->data.sequence.items.start;
			 it < n->data.sequence.items.top; it++)
		{
			yaml_node_t *c = yaml_document_get_node(doc, *it);

			if (c)
				r->items = lappend(r->items, kc_copy_node(path, doc, c, depth + 1));
		}
	}
	else if (n->type == YAML_MAPPING_NODE)
	{
		r->is_map = true;
		for (yaml_node_pair_t *pr = n->data.mapping.pairs.start;
			 pr < n->data.mapping.pairs.top; pr++)
		{
			yaml_node_t *v;
			char	   *key = kc_pair_key(path, doc, pr, &v);
			KcField    *f;

			if (key == NULL)
				continue;
			f = palloc0(sizeof(KcField));
			f->key = key;
			if (v->type == YAML_SCALAR_NODE)
			{
				f->value = kc_scalar(path, v, f->key);
				f->present = (f->value != NULL);
			}
			else
			{
				f->present = true;
				f->node = kc_copy_node(path, doc, v, depth + 1);
			}
			r->pairs = lappend(r->pairs, f);
		}
	}
	return r;
}

/* kc_node_field: the field `key` of a copied mapping, or NULL. */
static KcField *
kc_node_field(KcNode *map, const char *key)
{
	if (map == NULL || !map->is_map)
		return NULL;
	return kc_find_field(map->pairs, key);
}

/*
 * kc_node_strings
 *		A field holding a list of strings (exec args, as-groups) as a List of
 *		char *; NIL when absent or null.  Anything else is
 *		ERRCODE_CONFIG_FILE_ERROR naming `what`.
 */
static List *
kc_node_strings(KcField *f, KcEntry *user, const char *what)
{
	List	   *r = NIL;
	ListCell   *lc;

	if (f == NULL || !f->present)
		return NIL;
	if (f->node == NULL || !f->node->is_seq)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("%s of user \"%s\" in kubeconfig file \"%s\" must be a list of strings",
						what, user->name, user->file)));
	foreach(lc, f->node->items)
	{
		KcNode	   *n = (KcNode *) lfirst(lc);

		if (n->is_seq || n->is_map || n->value == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_CONFIG_FILE_ERROR),
					 errmsg("%s of user \"%s\" in kubeconfig file \"%s\" must be a list of strings",
							what, user->name, user->file)));
		r = lappend(r, n->value);
	}
	return r;
}

/* kc_node_string: a scalar field of a copied mapping, NULL when absent. */
static char *
kc_node_string(KcNode *map, const char *key, KcEntry *user, const char *what)
{
	KcField    *f = kc_node_field(map, key);

	if (f == NULL || !f->present)
		return NULL;
	if (f->value == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("%s.%s of user \"%s\" in kubeconfig file \"%s\" must be a single value",
						what, key, user->name, user->file)));
	return f->value;
}

/*
 * kc_exec
 *		A user's exec credential plugin (clientcmd/api/v1 ExecConfig),
 *		checked as client-go's clientcmd validation.go validateAuthInfo
 *		does: command and apiVersion required; env entries need a name and
 *		a value; interactiveMode, required by v1, is Never, IfAvailable or
 *		Always (v1beta1 defaults to IfAvailable).  Versions other than
 *		client.authentication.k8s.io/v1 and v1beta1 are refused (v1alpha1
 *		is gone since Kubernetes 1.24).  Relative commands with a slash
 *		resolve against the kubeconfig's directory (loader.go ResolvePaths);
 *		bare names are looked up in PATH when the plugin runs.
 *		ERRCODE_CONFIG_FILE_ERROR or ERRCODE_FEATURE_NOT_SUPPORTED.
 */
static KwExecConfig *
kc_exec(KcEntry *user, KcField *f)
{
	KwExecConfig *x = palloc0(sizeof(KwExecConfig));
	KcNode	   *m = f->node;
	KcField    *env;
	char	   *pic;

	if (m == NULL || !m->is_map)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("exec of user \"%s\" in kubeconfig file \"%s\" must be a mapping",
						user->name, user->file)));
	x->source = psprintf("user \"%s\" in kubeconfig file \"%s\"", user->name, user->file);
	x->command = kc_node_string(m, "command", user, "exec");
	if (x->command == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("exec of user \"%s\" in kubeconfig file \"%s\" has no command",
						user->name, user->file)));
	if (strchr(x->command, '/') != NULL && !is_absolute_path(x->command))
	{
		char		buf[MAXPGPATH];

		join_path_components(buf, user->dir, x->command);
		canonicalize_path(buf);
		x->command = pstrdup(buf);
	}
	x->api_version = kc_node_string(m, "apiVersion", user, "exec");
	if (x->api_version == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("exec of user \"%s\" in kubeconfig file \"%s\" has no apiVersion",
						user->name, user->file)));
	if (strcmp(x->api_version, "client.authentication.k8s.io/v1") != 0 &&
		strcmp(x->api_version, "client.authentication.k8s.io/v1beta1") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("exec plugin apiVersion \"%s\" of user \"%s\" in kubeconfig file \"%s\" is not supported",
						x->api_version, user->name, user->file),
				 errhint("Use client.authentication.k8s.io/v1 or client.authentication.k8s.io/v1beta1.")));
	x->args = kc_node_strings(kc_node_field(m, "args"), user, "exec.args");
	env = kc_node_field(m, "env");
	if (env && env->present)
	{
		ListCell   *lc;

		if (env->node == NULL || !env->node->is_seq)
			ereport(ERROR,
					(errcode(ERRCODE_CONFIG_FILE_ERROR),
					 errmsg("exec.env of user \"%s\" in kubeconfig file \"%s\" must be a list of {name, value}",
							user->name, user->file)));
		foreach(lc, env->node->items)
		{
			KcNode	   *e = (KcNode *) lfirst(lc);
			KwKeyValue *kv = palloc0(sizeof(KwKeyValue));

			kv->key = kc_node_string(e, "name", user, "exec.env");
			kv->value = kc_node_string(e, "value", user, "exec.env");
			if (kv->key == NULL || strchr(kv->key, '=') != NULL)
				ereport(ERROR,
						(errcode(ERRCODE_CONFIG_FILE_ERROR),
						 errmsg("exec.env of user \"%s\" in kubeconfig file \"%s\" has an entry without a valid name",
								user->name, user->file)));
			if (kv->value == NULL)
				kv->value = "";
			x->env = lappend(x->env, kv);
		}
	}
	x->install_hint = kc_node_string(m, "installHint", user, "exec");
	pic = kc_node_string(m, "provideClusterInfo", user, "exec");
	if (pic && !parse_bool(pic, &x->provide_cluster_info))
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("exec.provideClusterInfo of user \"%s\" in kubeconfig file \"%s\" must be true or false",
						user->name, user->file)));
	x->interactive_mode = kc_node_string(m, "interactiveMode", user, "exec");
	if (x->interactive_mode == NULL)
	{
		if (strcmp(x->api_version, "client.authentication.k8s.io/v1") == 0)
			ereport(ERROR,
					(errcode(ERRCODE_CONFIG_FILE_ERROR),
					 errmsg("interactiveMode must be specified for user \"%s\" in kubeconfig file \"%s\" to use exec authentication plugin",
							user->name, user->file)));
		x->interactive_mode = "IfAvailable";
	}
	else if (strcmp(x->interactive_mode, "Never") != 0 &&
			 strcmp(x->interactive_mode, "IfAvailable") != 0 &&
			 strcmp(x->interactive_mode, "Always") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("invalid interactiveMode \"%s\" for user \"%s\" in kubeconfig file \"%s\"",
						x->interactive_mode, user->name, user->file),
				 errhint("Valid values are \"Never\", \"IfAvailable\" and \"Always\".")));
	return x;
}

/*
 * kc_impersonation
 *		A user's as, as-uid, as-groups and as-user-extra (clientcmd/api/v1
 *		AuthInfo; sent as Impersonate-* headers, client-go
 *		transport/round_trippers.go).  client-go refuses groups or extras
 *		without a user to impersonate (rest/transport.go); so do we, with
 *		ERRCODE_CONFIG_FILE_ERROR.  Values must fit an HTTP header.
 */
static void
kc_impersonation(KcEntry *user, KwClusterConfig *cfg)
{
	KcField    *extra = kc_field(user, "as-user-extra");
	ListCell   *lc;

	cfg->as_user = kc_string(user, "as");
	cfg->as_uid = kc_string(user, "as-uid");
	cfg->as_groups = kc_node_strings(kc_field(user, "as-groups"), user, "as-groups");
	if (extra && extra->present)
	{
		if (extra->node == NULL || !extra->node->is_map)
			ereport(ERROR,
					(errcode(ERRCODE_CONFIG_FILE_ERROR),
					 errmsg("as-user-extra of user \"%s\" in kubeconfig file \"%s\" must be a mapping of lists",
							user->name, user->file)));
		foreach(lc, extra->node->pairs)
		{
			KcField    *f = (KcField *) lfirst(lc);
			ListCell   *lv;

			foreach(lv, kc_node_strings(f, user, "as-user-extra"))
			{
				KwKeyValue *kv = palloc(sizeof(KwKeyValue));

				kv->key = f->key;
				kv->value = (char *) lfirst(lv);
				cfg->as_extra = lappend(cfg->as_extra, kv);
			}
		}
	}
	if (cfg->as_user == NULL && (cfg->as_uid || cfg->as_groups || cfg->as_extra))
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("user \"%s\" in kubeconfig file \"%s\" sets as-uid, as-groups or as-user-extra without as",
						user->name, user->file),
				 errdetail("Impersonating groups or extra fields requires a user to impersonate (client-go).")));
	if (cfg->as_user)
		kc_check_header_safe(user, "as", cfg->as_user, "user");
	if (cfg->as_uid)
		kc_check_header_safe(user, "as-uid", cfg->as_uid, "user");
	foreach(lc, cfg->as_groups)
		if (!kw_header_value_safe((char *) lfirst(lc)))
			kc_check_header_safe(user, "as-groups", (char *) lfirst(lc), "user");
	foreach(lc, cfg->as_extra)
		if (!kw_header_value_safe(((KwKeyValue *) lfirst(lc))->value))
			kc_check_header_safe(user, "as-user-extra", ((KwKeyValue *) lfirst(lc))->value, "user");
}
