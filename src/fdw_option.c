/*-------------------------------------------------------------------------
 *
 * fdw_option.c
 *		Options of the kwatch foreign-data wrapper: validation, and turning a
 *		foreign server (plus the user's mapping) into connection settings.
 *
 * A kwatch SERVER says where a cluster is, in exactly one of three ways:
 *
 *	 kubeconfig  'path[:path...]' [context 'name']   a kubeconfig file (list)
 *	 in_cluster  'true'                              the pod's service account
 *	 api_server  'https://host:port'                 explicit, with the options
 *													 below
 *
 * and may override TLS settings (certificate_authority, tls_server_name,
 * insecure_skip_tls_verify) and credentials (token_file, client_certificate,
 * client_key).  A USER MAPPING carries a user's own credentials: token,
 * token_file, client certificate and key as paths or as PEM text.  Secrets
 * (token, client_key_data) are accepted only on user mappings, whose options
 * only their owner and superusers can read; servers' options are public.
 *
 * Options that make the PostgreSQL server read a file of its choosing (every
 * path, and in_cluster, which reads the pod's service-account token) may only
 * be set by roles with the privileges of pg_read_server_files, as file_fdw's
 * "filename": otherwise any user could send the contents of a server file as
 * a bearer token to an API server of their own.
 *
 * Layering, applied by kw_cluster_config_for_server: the source (kubeconfig,
 * in-cluster or api_server) first, then the server's overrides, then the
 * user mapping.  Credentials are replaced as a whole by each layer that has
 * any: a client certificate left over from the kubeconfig would otherwise
 * win over a user mapping's token, since kube-apiserver tries x509
 * authentication before bearer tokens (pkg/kubeapiserver/authenticator).
 *
 * The validator follows contrib/postgres_fdw/option.c: a table of options
 * per catalog, typed values (defGetBoolean), a closest-match hint for typos
 * (PostgreSQL 16's getClosestMatch, rebuilt here on
 * varstr_levenshtein_less_equal because 15 lacks it).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/reloptions.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_foreign_data_wrapper.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_foreign_table.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/hsearch.h"
#include "utils/json.h"
#include "utils/syscache.h"
#include "utils/varlena.h"

#include "kw_common.h"

/* Name of our foreign-data wrapper, as created by the extension script. */
#define KW_FDW_NAME "kwatch"

/* What an option's value is, and who may set it. */
#define KW_OPT_BOOL		0x01	/* boolean (defGetBoolean) */
#define KW_OPT_FILES	0x02	/* makes the server read a file: privileged */
#define KW_OPT_SECRET	0x04	/* secret: user mappings only */
#define KW_OPT_PEM		0x08	/* PEM text */
#define KW_OPT_URL		0x10	/* http(s) URL */
#define KW_OPT_HEADER	0x20	/* goes into a URL or header: no spaces */
#define KW_OPT_PLAIN	0x40	/* boolean that needs no privilege either way */
#define KW_OPT_DNS_LABEL 0x80	/* a namespace name (RFC 1123 label) */

/*
 * Describes one valid option of one kind of object, as PgFdwOption in
 * contrib/postgres_fdw/option.c.
 */
typedef struct KwFdwOption
{
	const char *keyword;
	Oid			optcontext;		/* catalog of the object it may appear on */
	int			flags;			/* KW_OPT_* */
} KwFdwOption;

static const KwFdwOption kw_fdw_options[] = {
	/* SERVER: where the cluster is (exactly one of the first three) */
	{"kubeconfig", ForeignServerRelationId, KW_OPT_FILES},
	{"api_server", ForeignServerRelationId, KW_OPT_URL | KW_OPT_HEADER},
	{"in_cluster", ForeignServerRelationId, KW_OPT_BOOL | KW_OPT_FILES},
	{"context", ForeignServerRelationId, 0},
	/* SERVER: TLS and credential overrides */
	{"certificate_authority", ForeignServerRelationId, KW_OPT_FILES},
	{"client_certificate", ForeignServerRelationId, KW_OPT_FILES},
	{"client_key", ForeignServerRelationId, KW_OPT_FILES},
	{"token_file", ForeignServerRelationId, KW_OPT_FILES},
	{"tls_server_name", ForeignServerRelationId, KW_OPT_HEADER},
	{"insecure_skip_tls_verify", ForeignServerRelationId, KW_OPT_BOOL},
	{"allow_insecure_http", ForeignServerRelationId, KW_OPT_BOOL},
	/* SERVER: proxy and impersonation (kubeconfig proxy-url, as, as-uid, as-groups) */
	{"proxy_url", ForeignServerRelationId, KW_OPT_HEADER},
	{"impersonate_user", ForeignServerRelationId, KW_OPT_HEADER},
	{"impersonate_uid", ForeignServerRelationId, KW_OPT_HEADER},
	{"impersonate_groups", ForeignServerRelationId, 0},

	/* USER MAPPING: the user's own credentials */
	{"token", UserMappingRelationId, KW_OPT_SECRET | KW_OPT_HEADER},
	{"token_file", UserMappingRelationId, KW_OPT_FILES},
	{"client_certificate", UserMappingRelationId, KW_OPT_FILES},
	{"client_key", UserMappingRelationId, KW_OPT_FILES},
	{"client_certificate_data", UserMappingRelationId, KW_OPT_PEM},
	{"client_key_data", UserMappingRelationId, KW_OPT_PEM | KW_OPT_SECRET},

	/* SERVER and FOREIGN TABLE: row estimates of live tables (fdw.c) */
	{"use_remote_estimate", ForeignServerRelationId, KW_OPT_BOOL | KW_OPT_PLAIN},
	{"use_remote_estimate", ForeignTableRelationId, KW_OPT_BOOL | KW_OPT_PLAIN},

	/* FOREIGN TABLE: a live table (fdw.c) */
	{"resource", ForeignTableRelationId, KW_OPT_HEADER},
	{"namespace", ForeignTableRelationId, KW_OPT_DNS_LABEL},
	{"api_version", ForeignTableRelationId, KW_OPT_HEADER},
	{"namespaced", ForeignTableRelationId, KW_OPT_BOOL | KW_OPT_PLAIN},
	{"kind", ForeignTableRelationId, KW_OPT_HEADER},
	/* a Secrets table shows values in clear (redact.c) */
	{"secret_data", ForeignTableRelationId, KW_OPT_BOOL | KW_OPT_PLAIN},

	{NULL, InvalidOid, 0}
};

/* Options that carry credentials (replaced as a whole by each layer). */
static const char *const kw_credential_options[] = {
	"token", "token_file", "client_certificate", "client_key",
	"client_certificate_data", "client_key_data", NULL
};

static const KwFdwOption *kw_find_option(const char *keyword, Oid catalog);
static const char *kw_catalog_name(Oid catalog);
static void kw_report_invalid_option(const char *keyword, Oid catalog)
			pg_attribute_noreturn();
static const char *kw_closest_option(const char *keyword, Oid catalog);
static void kw_check_value(DefElem *def, const KwFdwOption *opt);
static void kw_check_server_options(List *options);
static void kw_check_user_mapping_options(List *options);
static void kw_check_transport_options(List *options);
static void kw_check_foreign_table_options(List *options);
static void kw_check_conflict(List *options, const char *a, const char *b);
static DefElem *kw_get_option(List *options, const char *name);
static char *kw_option_string(List *options, const char *name);
static List *kw_user_mapping_options(Oid userid, ForeignServer *server);
static KwClusterConfig *cluster_config(const char *server_name, Oid userid,
									   bool check_transport_rules);
static void check_transport(const char *server_name, const char *api_server,
							bool insecure, bool has_ca, bool allow_http);
static void kw_apply_options(KwClusterConfig *cfg, List *options);
static char *kw_strip_slashes(const char *url);
static void kw_json_string(StringInfo buf, const char *key, const char *value);
static void kw_json_bytes(StringInfo buf, const char *key, const char *data);

PG_FUNCTION_INFO_V1(kwatch_fdw_validator);
PG_FUNCTION_INFO_V1(kwatch_server_config);

/*
 * kwatch_fdw_validator
 *		Validate the options of a FOREIGN DATA WRAPPER, SERVER, USER MAPPING
 *		or FOREIGN TABLE of kwatch (SQL: kwatch_fdw_validator(text[], oid)).
 *
 * Called by CREATE/ALTER with the complete resulting option list (also when
 * it is empty), so cross-option rules are checked here too.  Returns void;
 * raises:
 *	 ERRCODE_FDW_INVALID_OPTION_NAME  unknown option (with a closest-match or
 *									  list hint), or a secret on a server
 *	 ERRCODE_INSUFFICIENT_PRIVILEGE   file options without the privileges of
 *									  pg_read_server_files (file_fdw's rule)
 *	 ERRCODE_INVALID_PARAMETER_VALUE  malformed values
 *	 ERRCODE_SYNTAX_ERROR			  conflicting options (as file_fdw)
 *	 ERRCODE_FDW_DYNAMIC_PARAMETER_VALUE_NEEDED  a server without a source,
 *									  context without kubeconfig, half a
 *									  certificate/key pair
 * Values of secret options never appear in messages.
 */
Datum
kwatch_fdw_validator(PG_FUNCTION_ARGS)
{
	List	   *options = untransformRelOptions(PG_GETARG_DATUM(0));
	Oid			catalog = PG_GETARG_OID(1);
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);
		const KwFdwOption *opt = kw_find_option(def->defname, catalog);

		if (opt == NULL)
			kw_report_invalid_option(def->defname, catalog);
		kw_check_value(def, opt);
	}

	if (catalog == ForeignServerRelationId)
		kw_check_server_options(options);
	else if (catalog == UserMappingRelationId)
		kw_check_user_mapping_options(options);
	else if (catalog == ForeignTableRelationId)
		kw_check_foreign_table_options(options);

	PG_RETURN_VOID();
}

/*
 * kw_find_option
 *		The table entry for keyword on objects of catalog, or NULL.
 */
static const KwFdwOption *
kw_find_option(const char *keyword, Oid catalog)
{
	const KwFdwOption *opt;

	for (opt = kw_fdw_options; opt->keyword; opt++)
		if (opt->optcontext == catalog && strcmp(opt->keyword, keyword) == 0)
			return opt;
	return NULL;
}

/*
 * kw_catalog_name
 *		The SQL name of the kind of object stored in catalog, for messages.
 */
static const char *
kw_catalog_name(Oid catalog)
{
	switch (catalog)
	{
		case ForeignDataWrapperRelationId:
			return "foreign-data wrapper";
		case ForeignServerRelationId:
			return "server";
		case UserMappingRelationId:
			return "user mapping";
		case ForeignTableRelationId:
			return "foreign table";
		default:
			return "column";
	}
}

/*
 * kw_report_invalid_option
 *		Raise the error for an option not valid on objects of catalog.
 *
 * A secret given to a server gets its own message pointing at user mappings.
 * Otherwise ERRCODE_FDW_INVALID_OPTION_NAME with, in order of preference, a
 * "Perhaps you meant" hint for a near miss (PostgreSQL 16 postgres_fdw), a
 * note where the option does belong, or the list of valid options
 * (PostgreSQL 15 postgres_fdw).
 */
static void
kw_report_invalid_option(const char *keyword, Oid catalog)
{
	const KwFdwOption *opt;
	const char *closest;
	StringInfoData valid;
	StringInfoData elsewhere;

	if (catalog == ForeignServerRelationId)
	{
		opt = kw_find_option(keyword, UserMappingRelationId);
		if (opt != NULL && (opt->flags & KW_OPT_SECRET))
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
					 errmsg("option \"%s\" is only allowed on a user mapping",
							keyword),
					 errdetail("Server options can be read by every user; user mapping options only by their user and superusers."),
					 errhint("Use CREATE USER MAPPING FOR ... SERVER ... OPTIONS (%s '...').",
							 keyword)));
	}

	initStringInfo(&valid);
	initStringInfo(&elsewhere);
	for (opt = kw_fdw_options; opt->keyword; opt++)
	{
		if (opt->optcontext == catalog)
			appendStringInfo(&valid, "%s%s", valid.len > 0 ? ", " : "",
							 opt->keyword);
		else if (strcmp(opt->keyword, keyword) == 0)
			appendStringInfo(&elsewhere, "%s%s",
							 elsewhere.len > 0 ? " or a " : "",
							 kw_catalog_name(opt->optcontext));
	}

	closest = kw_closest_option(keyword, catalog);
	if (closest != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
				 errmsg("invalid option \"%s\"", keyword),
				 errhint("Perhaps you meant the option \"%s\".", closest)));
	if (elsewhere.len > 0)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
				 errmsg("invalid option \"%s\"", keyword),
				 errdetail("Option \"%s\" is valid on a %s, not on a %s.",
						   keyword, elsewhere.data, kw_catalog_name(catalog)),
				 valid.len > 0
				 ? errhint("Valid options in this context are: %s", valid.data)
				 : errhint("There are no valid options in this context.")));
	ereport(ERROR,
			(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
			 errmsg("invalid option \"%s\"", keyword),
			 valid.len > 0
			 ? errhint("Valid options in this context are: %s", valid.data)
			 : errhint("There are no valid options in this context.")));
}

/*
 * kw_closest_option
 *		The valid option of catalog nearest to keyword, if near enough.
 *
 * As PostgreSQL 16's getClosestMatch (utils/adt/varlena.c) with the
 * max_d = 4 that postgres_fdw passes: Levenshtein distance at most 4 and at
 * most half of keyword's length; ties go to the first in the table.
 * Returns NULL when nothing qualifies.
 */
static const char *
kw_closest_option(const char *keyword, Oid catalog)
{
	const int	max_d = 4;
	int			klen = strlen(keyword);
	int			best_d = -1;
	const char *best = NULL;
	const KwFdwOption *opt;

	/* varstr_levenshtein's own limit (MAX_LEVENSHTEIN_STRLEN, not exported) */
	if (klen > 255)
		return NULL;

	for (opt = kw_fdw_options; opt->keyword; opt++)
	{
		int			d;

		if (opt->optcontext != catalog)
			continue;
		d = varstr_levenshtein_less_equal(keyword, klen,
										  opt->keyword, strlen(opt->keyword),
										  1, 1, 1, max_d + 1, true);
		if (d <= max_d && d <= klen / 2 && (best_d < 0 || d < best_d))
		{
			best_d = d;
			best = opt->keyword;
		}
	}
	return best;
}

/*
 * kw_check_value
 *		Check one option's value by its type, and the caller's right to set
 *		it.  Raises ERRCODE_INVALID_PARAMETER_VALUE (bad values; secret values
 *		are never echoed) or ERRCODE_INSUFFICIENT_PRIVILEGE.
 */
static void
kw_check_value(DefElem *def, const KwFdwOption *opt)
{
	const char *value;

	if (opt->flags & KW_OPT_BOOL)
	{
		bool		b = defGetBoolean(def);

		/* in_cluster 'false' reads nothing: no privilege needed. */
		if (!b || (opt->flags & KW_OPT_PLAIN))
			return;
	}
	else
	{
		value = defGetString(def);
		if (value[0] == '\0')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"%s\" must not be empty", def->defname)));

		if (opt->flags & KW_OPT_HEADER)
		{
			const unsigned char *p;

			for (p = (const unsigned char *) value; *p; p++)
				if (*p <= ' ' || *p == 0x7f)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("option \"%s\" must not contain whitespace or control characters",
									def->defname)));
		}

		if ((opt->flags & KW_OPT_URL) &&
			!((pg_strncasecmp(value, "https://", 8) == 0 && value[8] != '\0') ||
			  (pg_strncasecmp(value, "http://", 7) == 0 && value[7] != '\0')))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid value for option \"%s\": \"%s\"",
							def->defname, value),
					 errhint("The API server's URL starts with \"https://\" (or \"http://\"), like \"https://127.0.0.1:6443\".")));

		if ((opt->flags & KW_OPT_DNS_LABEL) &&
			(strlen(value) > 63 ||
			 strspn(value, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(value) ||
			 value[0] == '-' || value[strlen(value) - 1] == '-'))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid namespace name \"%s\"", value),
					 errhint("Namespace names are DNS labels: lower-case letters, digits and \"-\".")));

		if ((opt->flags & KW_OPT_PEM) && strstr(value, "-----BEGIN ") == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"%s\" must be PEM text", def->defname),
					 errhint("PEM text starts with \"-----BEGIN\". A kubeconfig's *-data fields hold it base64-encoded: decode them first (base64 -d).")));
	}

	/*
	 * file_fdw's rule for "filename": only roles with the privileges of
	 * pg_read_server_files (superusers have them all) may make the server
	 * read a file of their choice.
	 */
	if ((opt->flags & KW_OPT_FILES) &&
		!has_privs_of_role(GetUserId(), ROLE_PG_READ_SERVER_FILES))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to set option \"%s\"", def->defname),
				 errdetail("Only superusers and roles with privileges of the \"%s\" role may set options that make the server read files.",
						   "pg_read_server_files"),
				 errhint("Ask a superuser to set it, or pass credentials as the \"token\" or \"client_certificate_data\" and \"client_key_data\" options of a user mapping.")));
}

/*
 * kw_check_server_options
 *		Cross-option rules of a server's complete option list: exactly one
 *		source among kubeconfig, api_server and in_cluster 'true'; context
 *		only with kubeconfig; client_certificate and client_key together.
 *		Raises ERRCODE_SYNTAX_ERROR (conflicts) or
 *		ERRCODE_FDW_DYNAMIC_PARAMETER_VALUE_NEEDED (missing options).
 */
static void
kw_check_server_options(List *options)
{
	DefElem    *in_cluster = kw_get_option(options, "in_cluster");
	bool		has_in_cluster = (in_cluster != NULL && defGetBoolean(in_cluster));
	bool		has_kubeconfig = (kw_get_option(options, "kubeconfig") != NULL);
	bool		has_api_server = (kw_get_option(options, "api_server") != NULL);

	if (has_in_cluster)
	{
		kw_check_conflict(options, "in_cluster", "kubeconfig");
		kw_check_conflict(options, "in_cluster", "api_server");
	}
	kw_check_conflict(options, "kubeconfig", "api_server");

	if (!has_in_cluster && !has_kubeconfig && !has_api_server)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_DYNAMIC_PARAMETER_VALUE_NEEDED),
				 errmsg("a kwatch server needs one of the options \"kubeconfig\", \"api_server\" or \"in_cluster\""),
				 errhint("For example: CREATE SERVER k8s FOREIGN DATA WRAPPER kwatch OPTIONS (kubeconfig '/etc/kubernetes/admin.conf').")));

	if (kw_get_option(options, "context") != NULL && !has_kubeconfig)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_DYNAMIC_PARAMETER_VALUE_NEEDED),
				 errmsg("option \"context\" requires option \"kubeconfig\"")));

	{
		char	   *proxy = kw_option_string(options, "proxy_url");

		if (proxy &&
			pg_strncasecmp(proxy, "http://", 7) != 0 &&
			pg_strncasecmp(proxy, "https://", 8) != 0 &&
			pg_strncasecmp(proxy, "socks5://", 9) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid value for option \"proxy_url\": \"%s\"", proxy),
					 errhint("A proxy URL starts with \"http://\", \"https://\" or \"socks5://\".")));
	}
	if ((kw_get_option(options, "impersonate_uid") != NULL ||
		 kw_get_option(options, "impersonate_groups") != NULL) &&
		kw_get_option(options, "impersonate_user") == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_DYNAMIC_PARAMETER_VALUE_NEEDED),
				 errmsg("options \"impersonate_uid\" and \"impersonate_groups\" require option \"impersonate_user\"")));

	if ((kw_get_option(options, "client_certificate") != NULL) !=
		(kw_get_option(options, "client_key") != NULL))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_DYNAMIC_PARAMETER_VALUE_NEEDED),
				 errmsg("options \"client_certificate\" and \"client_key\" must be set together")));

	kw_check_transport_options(options);
}

/*
 * kw_check_transport_options
 *		The transport rules of a server's own options (README "Security"):
 *		the options that weaken transport security, insecure_skip_tls_verify
 *		and allow_insecure_http, are a superuser's to set, as postgres_fdw
 *		keeps password_required 'false' to superusers; a CA and skipping
 *		verification exclude each other, as kubectl refuses them together
 *		(k8s.io/client-go/transport/transport.go: "specifying a root
 *		certificates file with the insecure flag is not allowed"); a plain
 *		http api_server needs allow_insecure_http, since credentials would
 *		travel in clear (check_transport).  Raises
 *		ERRCODE_INSUFFICIENT_PRIVILEGE or ERRCODE_INVALID_PARAMETER_VALUE.
 */
static void
kw_check_transport_options(List *options)
{
	DefElem    *insecure = kw_get_option(options, "insecure_skip_tls_verify");
	DefElem    *http = kw_get_option(options, "allow_insecure_http");
	char	   *api_server = kw_option_string(options, "api_server");
	const char *weak[2] = {NULL, NULL};

	if (insecure && defGetBoolean(insecure))
		weak[0] = "insecure_skip_tls_verify";
	if (http && defGetBoolean(http))
		weak[1] = "allow_insecure_http";
	for (int i = 0; i < 2; i++)
		if (weak[i] && !superuser())
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("only superusers can set option \"%s\"", weak[i]),
					 errdetail("It lets credentials reach a server whose identity is not checked or travel in clear.")));

	check_transport(NULL, api_server, weak[0] != NULL,
					kw_get_option(options, "certificate_authority") != NULL,
					weak[1] != NULL);
}

/*
 * check_transport: the two transport rules any role is held to, on a
 * server's own options (the validator, server_name NULL) and again on the
 * settings it resolves to, which a kubeconfig may have supplied
 * (cluster_config): no skipping TLS verification with a CA, no plain http
 * API server without allow_insecure_http.  Raises
 * ERRCODE_INVALID_PARAMETER_VALUE.
 */
static void
check_transport(const char *server_name, const char *api_server, bool insecure,
				bool has_ca, bool allow_http)
{
	if (insecure && has_ca)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("TLS verification cannot be skipped for a server with a certificate authority"),
				 server_name ? errdetail("Server \"%s\".", server_name) : 0,
				 errhint("kubectl refuses this pair too: drop insecure_skip_tls_verify (insecure-skip-tls-verify in a kubeconfig) or the CA.")));
	if (api_server && pg_strncasecmp(api_server, "http://", 7) == 0 && !allow_http)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("API server \"%s\" is plain http: credentials would travel in clear", api_server),
				 server_name ? errdetail("Server \"%s\".", server_name) : 0,
				 errhint("Use https, or have a superuser add OPTIONS (allow_insecure_http 'true') to the server.")));
}

/*
 * kw_check_user_mapping_options
 *		Cross-option rules of a user mapping: a path and a PEM value of the
 *		same thing, or token and token_file, exclude each other; a client
 *		certificate needs its key and the other way round.  Raises
 *		ERRCODE_SYNTAX_ERROR or ERRCODE_FDW_DYNAMIC_PARAMETER_VALUE_NEEDED.
 */
static void
kw_check_user_mapping_options(List *options)
{
	bool		has_cert;
	bool		has_key;

	kw_check_conflict(options, "token", "token_file");
	kw_check_conflict(options, "client_certificate", "client_certificate_data");
	kw_check_conflict(options, "client_key", "client_key_data");

	has_cert = kw_get_option(options, "client_certificate") != NULL ||
		kw_get_option(options, "client_certificate_data") != NULL;
	has_key = kw_get_option(options, "client_key") != NULL ||
		kw_get_option(options, "client_key_data") != NULL;
	if (has_cert != has_key)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_DYNAMIC_PARAMETER_VALUE_NEEDED),
				 errmsg("a client certificate and its key must be set together"),
				 errhint("Set \"client_certificate\" or \"client_certificate_data\" together with \"client_key\" or \"client_key_data\".")));
}

/*
 * kw_check_foreign_table_options
 *		A live table (fdw.c) names its resource: "pods", "deploy",
 *		"deployments.apps", a CRD's plural.group.  Raises
 *		ERRCODE_FDW_DYNAMIC_PARAMETER_VALUE_NEEDED without one and
 *		ERRCODE_INVALID_PARAMETER_VALUE for a malformed name or api_version.  Whether the
 *		cluster serves it is only known when the table is used (42704 then).
 */
static void
kw_check_foreign_table_options(List *options)
{
	char	   *resource = kw_option_string(options, "resource");
	char	   *api_version;

	if (resource == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_DYNAMIC_PARAMETER_VALUE_NEEDED),
				 errmsg("a kwatch foreign table needs the option \"resource\""),
				 errhint("For example: OPTIONS (resource 'deployments.apps').")));
	for (const char *p = resource; *p; p++)
		if (!(kw_ascii_alnum(*p) || *p == '-' || *p == '.'))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid resource name \"%s\"", resource),
					 errhint("Use a resource name such as \"pods\", \"deploy\" or \"deployments.apps\".")));

	/*
	 * api_version goes into the request path (fdw.c kw_live_path): only a
	 * version name, a DNS-1035 label as apiextensions validates CRD versions
	 * ("v1", "v1beta1"), so that no '/', '?', '#' or '&' can change the
	 * request.
	 */
	api_version = kw_option_string(options, "api_version");
	if (api_version != NULL &&
		(strlen(api_version) > 63 ||
		 strspn(api_version, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(api_version) ||
		 !(api_version[0] >= 'a' && api_version[0] <= 'z') ||
		 api_version[strlen(api_version) - 1] == '-'))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid API version \"%s\"", api_version),
				 errhint("Use the version part of the resource's apiVersion, such as \"v1\" or \"v1beta1\".")));
}

/*
 * kw_check_conflict
 *		Raise ERRCODE_SYNTAX_ERROR if options a and b are both present
 *		(file_fdw reports "filename" with "program" the same way).
 */
static void
kw_check_conflict(List *options, const char *a, const char *b)
{
	if (kw_get_option(options, a) != NULL && kw_get_option(options, b) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("conflicting options \"%s\" and \"%s\"", a, b),
				 errdetail("Only one of them may be set.")));
}

/*
 * kw_get_option
 *		The DefElem called name in options, or NULL.
 */
static DefElem *
kw_get_option(List *options, const char *name)
{
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		if (strcmp(def->defname, name) == 0)
			return def;
	}
	return NULL;
}

/*
 * kw_option_string
 *		The value of option name as a string (owned by the list), or NULL.
 */
static char *
kw_option_string(List *options, const char *name)
{
	DefElem    *def = kw_get_option(options, name);

	return def ? defGetString(def) : NULL;
}

/*
 * kw_cluster_config_for_server
 *		Connection settings of the kwatch server server_name, for userid.
 *
 * Builds the source (kubeconfig + context, in_cluster, or api_server), lays
 * the server's overrides over it, then the options of userid's user mapping
 * (or the PUBLIC one; having none is fine).  Credentials are replaced as a
 * whole by any layer that has some (see the file header).  Must run inside a
 * transaction.  Returns a KwClusterConfig palloc'd in CurrentMemoryContext,
 * with server_name set.
 *
 * Errors: ERRCODE_UNDEFINED_OBJECT if the server does not exist,
 * ERRCODE_WRONG_OBJECT_TYPE if it belongs to another foreign-data wrapper,
 * ERRCODE_FDW_DYNAMIC_PARAMETER_VALUE_NEEDED if it names no source, and
 * whatever kw_kubeconfig_load / kw_in_cluster_config raise.
 */
KwClusterConfig *
kw_cluster_config_for_server(const char *server_name, Oid userid)
{
	return cluster_config(server_name, userid, true);
}

/*
 * cluster_config: kw_cluster_config_for_server's work; `check_transport_rules`
 * false only for kwatch.server_config(), which shows what a server resolves
 * to, refused settings included, and connects to nothing.
 */
static KwClusterConfig *
cluster_config(const char *server_name, Oid userid, bool check_transport_rules)
{
	ForeignServer *server;
	ForeignDataWrapper *fdw;
	KwClusterConfig *cfg;
	List	   *opts;
	char	   *kubeconfig;
	char	   *api_server;
	DefElem    *in_cluster;

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
		cfg->api_server = kw_strip_slashes(api_server);
	}
	else
		ereport(ERROR,
				(errcode(ERRCODE_FDW_DYNAMIC_PARAMETER_VALUE_NEEDED),
				 errmsg("server \"%s\" names no cluster", server_name),
				 errhint("Set one of the options \"kubeconfig\", \"api_server\" or \"in_cluster\" with ALTER SERVER.")));

	kw_apply_options(cfg, opts);
	kw_apply_options(cfg, kw_user_mapping_options(userid, server));

	/* the transport rules again, on what a kubeconfig may have supplied */
	if (check_transport_rules)
	{
		DefElem    *http = kw_get_option(opts, "allow_insecure_http");

		check_transport(server->servername, cfg->api_server,
						cfg->insecure_skip_tls_verify,
						cfg->ca_file != NULL || cfg->ca_data != NULL,
						http != NULL && defGetBoolean(http));
	}

	cfg->server_name = pstrdup(server->servername);
	return cfg;
}

/*
 * kw_user_mapping_options
 *		The options of userid's mapping for `server`, else of its PUBLIC
 *		mapping (GetUserMapping's two syscache lookups, foreign/foreign.c).
 *
 * Without either, only a superuser goes on with the server's own
 * credentials (its kubeconfig's, token_file, ...): any other role would
 * gain them just by having USAGE on the server, so it gets postgres_fdw's
 * error instead (ERRCODE_UNDEFINED_OBJECT, "user mapping not found"); a
 * PUBLIC mapping, even an empty one, is how an admin shares them on
 * purpose.  A role that no longer exists (a watch registered by a dropped
 * role) is refused too, never re-homed to PUBLIC's or the server's
 * credentials.  Returns a list of DefElem palloc'd in CurrentMemoryContext.
 */
static List *
kw_user_mapping_options(Oid userid, ForeignServer *server)
{
	Oid			serverid = server->serverid;
	HeapTuple	tp;
	Datum		datum;
	bool		isnull;
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
		tp = SearchSysCache2(USERMAPPINGUSERSERVER,
							 ObjectIdGetDatum(InvalidOid),
							 ObjectIdGetDatum(serverid));
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

	return options;
}

/*
 * kw_apply_options
 *		Lay a server's or user mapping's options over cfg.
 *
 * TLS settings replace field by field; a path replaces the matching *-data
 * too (certificate_authority clears ca_data), since *-data would win.  If
 * options hold any credential, all earlier credentials are dropped first.
 * Strings are copied into CurrentMemoryContext.
 */
static void
kw_apply_options(KwClusterConfig *cfg, List *options)
{
	const char *const *cred;
	char	   *v;
	DefElem    *def;

	for (cred = kw_credential_options; *cred; cred++)
	{
		if (kw_get_option(options, *cred) != NULL)
		{
			cfg->token = NULL;
			cfg->token_file = NULL;
			cfg->client_cert_file = NULL;
			cfg->client_cert_data = NULL;
			cfg->client_key_file = NULL;
			cfg->client_key_data = NULL;
			cfg->exec = NULL;	/* the kubeconfig's plugin is a credential too */
			break;
		}
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
 * kw_strip_slashes
 *		palloc'd copy of url without trailing slashes (we append "/api/...").
 */
static char *
kw_strip_slashes(const char *url)
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
 * null.  Errors are those of kw_cluster_config_for_server.  The extension
 * script revokes EXECUTE from PUBLIC: it shows file paths and reads files
 * named by servers.
 */
Datum
kwatch_server_config(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	KwClusterConfig *cfg = cluster_config(name, GetUserId(), false);
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	kw_json_string(&buf, "server", cfg->server_name);
	kw_json_string(&buf, "api_server", cfg->api_server);
	kw_json_string(&buf, "ca_file", cfg->ca_file);
	kw_json_bytes(&buf, "ca_data", cfg->ca_data);
	kw_json_string(&buf, "client_certificate", cfg->client_cert_file);
	kw_json_bytes(&buf, "client_certificate_data", cfg->client_cert_data);
	kw_json_string(&buf, "client_key", cfg->client_key_file);
	kw_json_bytes(&buf, "client_key_data", cfg->client_key_data);
	kw_json_string(&buf, "token", cfg->token ? "<redacted>" : NULL);
	kw_json_string(&buf, "token_file", cfg->token_file);
	kw_json_string(&buf, "tls_server_name", cfg->tls_server_name);
	appendStringInfo(&buf, ", \"insecure_skip_tls_verify\": %s",
					 cfg->insecure_skip_tls_verify ? "true" : "false");
	kw_json_string(&buf, "namespace", cfg->default_namespace);
	kw_json_string(&buf, "proxy_url", cfg->proxy_url);
	kw_json_string(&buf, "impersonate_user", cfg->as_user);
	if (cfg->as_groups)
	{
		ListCell   *lc;
		StringInfoData g;

		initStringInfo(&g);
		foreach(lc, cfg->as_groups)
			appendStringInfo(&g, "%s%s", g.len ? "," : "", (char *) lfirst(lc));
		kw_json_string(&buf, "impersonate_groups", g.data);
	}
	if (cfg->exec)
	{
		/* env values may be secrets (AWS_PROFILE is not, a token would be) */
		ListCell   *lc;
		StringInfoData x;

		initStringInfo(&x);
		appendStringInfoChar(&x, '{');
		kw_json_string(&x, "command", cfg->exec->command);
		kw_json_string(&x, "apiVersion", cfg->exec->api_version);
		kw_json_string(&x, "interactiveMode", cfg->exec->interactive_mode);
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
 * kw_json_string
 *		Append "key": "value" (or null) to a JSON object being built in buf.
 */
static void
kw_json_string(StringInfo buf, const char *key, const char *value)
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
 * kw_json_bytes
 *		Append "key": "<N bytes>" (or null): the size of a PEM value, never
 *		its content.
 */
static void
kw_json_bytes(StringInfo buf, const char *key, const char *data)
{
	char	   *v = data ? psprintf("<%zu bytes>", strlen(data)) : NULL;

	kw_json_string(buf, key, v);
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
#if PG_VERSION_NUM >= 160000
	return object_aclcheck(ForeignServerRelationId, serverid, role, ACL_USAGE);
#else
	return pg_foreign_server_aclcheck(serverid, role, ACL_USAGE);
#endif
}

/*
 * kw_check_watch_role: ERRORs (42501) unless `role`, the role of a watch
 * on foreign server `server`, may still use it: USAGE, as kwatch.watch()
 * checked at registration, may have been revoked since, or the watch
 * handed to another role by REASSIGN OWNED (ownership.c).  A role that no
 * longer exists is refused by kw_user_mapping_options, with its own
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
