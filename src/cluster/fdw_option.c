/*-------------------------------------------------------------------------
 *
 * fdw_option.c
 *		Options of the kwatch foreign-data wrapper: which exist where, who may
 *		set them, and which values and combinations are valid (the
 *		validator), as contrib/postgres_fdw/option.c.  Turning a server and a
 *		user mapping into connection settings is connection.c's.
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
 * a bearer token to an API server of their own.  A kubeconfig whose user
 * has an exec credential plugin makes the server run a program: it needs
 * the privileges of pg_execute_server_program too, as COPY ... PROGRAM
 * (check_exec_plugin; checked again at each use, credential.c).
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
#include "access/xact.h"
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
#include "utils/resowner.h"
#include "utils/syscache.h"
#include "utils/varlena.h"

#include "kw_common.h"
#include "kw_cluster.h"
#include "kw_http.h"

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

static const KwFdwOption fdw_options[] = {
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

	/* SERVER and FOREIGN TABLE: whether live tables take INSERT/UPDATE/DELETE (fdw_modify.c; postgres_fdw's option) */
	{"updatable", ForeignServerRelationId, KW_OPT_BOOL | KW_OPT_PLAIN},
	{"updatable", ForeignTableRelationId, KW_OPT_BOOL | KW_OPT_PLAIN},

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

static const KwFdwOption *find_option(const char *keyword, Oid catalog);
static const char *catalog_name(Oid catalog);
static void report_invalid_option(const char *keyword, Oid catalog)
			pg_attribute_noreturn();
static const char *closest_option(const char *keyword, Oid catalog);
static void check_value(DefElem *def, const KwFdwOption *opt);
static void check_server_options(List *options);
static void check_user_mapping_options(List *options);
static void check_transport_options(List *options);
static void check_exec_plugin(List *options);
static void check_foreign_table_options(List *options);
static void check_conflict(List *options, const char *a, const char *b);

PG_FUNCTION_INFO_V1(kwatch_fdw_validator);

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
		const KwFdwOption *opt = find_option(def->defname, catalog);

		if (opt == NULL)
			report_invalid_option(def->defname, catalog);
		check_value(def, opt);
	}

	if (catalog == ForeignServerRelationId)
		check_server_options(options);
	else if (catalog == UserMappingRelationId)
		check_user_mapping_options(options);
	else if (catalog == ForeignTableRelationId)
		check_foreign_table_options(options);

	PG_RETURN_VOID();
}

/*
 * find_option
 *		The table entry for keyword on objects of catalog, or NULL.
 */
static const KwFdwOption *
find_option(const char *keyword, Oid catalog)
{
	const KwFdwOption *opt;

	for (opt = fdw_options; opt->keyword; opt++)
		if (opt->optcontext == catalog && strcmp(opt->keyword, keyword) == 0)
			return opt;
	return NULL;
}

/*
 * catalog_name
 *		The SQL name of the kind of object stored in catalog, for messages.
 */
static const char *
catalog_name(Oid catalog)
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
 * report_invalid_option
 *		Raise the error for an option not valid on objects of catalog.
 *
 * A secret given to a server gets its own message pointing at user mappings.
 * Otherwise ERRCODE_FDW_INVALID_OPTION_NAME with, in order of preference, a
 * "Perhaps you meant" hint for a near miss (PostgreSQL 16 postgres_fdw), a
 * note where the option does belong, or the list of valid options
 * (PostgreSQL 15 postgres_fdw).
 */
static void
report_invalid_option(const char *keyword, Oid catalog)
{
	const KwFdwOption *opt;
	const char *closest;
	StringInfoData valid;
	StringInfoData elsewhere;

	if (catalog == ForeignServerRelationId)
	{
		opt = find_option(keyword, UserMappingRelationId);
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
	for (opt = fdw_options; opt->keyword; opt++)
	{
		if (opt->optcontext == catalog)
			appendStringInfo(&valid, "%s%s", valid.len > 0 ? ", " : "",
							 opt->keyword);
		else if (strcmp(opt->keyword, keyword) == 0)
			appendStringInfo(&elsewhere, "%s%s",
							 elsewhere.len > 0 ? " or a " : "",
							 catalog_name(opt->optcontext));
	}

	closest = closest_option(keyword, catalog);
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
						   keyword, elsewhere.data, catalog_name(catalog)),
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
 * closest_option
 *		The valid option of catalog nearest to keyword, if near enough.
 *
 * As PostgreSQL 16's getClosestMatch (utils/adt/varlena.c) with the
 * max_d = 4 that postgres_fdw passes: Levenshtein distance at most 4 and at
 * most half of keyword's length; ties go to the first in the table.
 * Returns NULL when nothing qualifies.
 */
static const char *
closest_option(const char *keyword, Oid catalog)
{
	const int	max_d = 4;
	int			klen = strlen(keyword);
	int			best_d = -1;
	const char *best = NULL;
	const KwFdwOption *opt;

	/* varstr_levenshtein's own limit (MAX_LEVENSHTEIN_STRLEN, not exported) */
	if (klen > 255)
		return NULL;

	for (opt = fdw_options; opt->keyword; opt++)
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
 * check_value
 *		Check one option's value by its type, and the caller's right to set
 *		it.  Raises ERRCODE_INVALID_PARAMETER_VALUE (bad values; secret values
 *		are never echoed) or ERRCODE_INSUFFICIENT_PRIVILEGE.
 */
static void
check_value(DefElem *def, const KwFdwOption *opt)
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
							def->defname, kw_excerpt(value)),
					 errhint("The API server's URL starts with \"https://\" (or \"http://\"), like \"https://127.0.0.1:6443\".")));

		if ((opt->flags & KW_OPT_DNS_LABEL) && !kw_dns_label(value))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid namespace name \"%s\"", kw_excerpt(value)),
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
 * check_server_options
 *		Cross-option rules of a server's complete option list: exactly one
 *		source among kubeconfig, api_server and in_cluster 'true'; context
 *		only with kubeconfig; client_certificate and client_key together.
 *		Raises ERRCODE_SYNTAX_ERROR (conflicts) or
 *		ERRCODE_FDW_DYNAMIC_PARAMETER_VALUE_NEEDED (missing options).
 */
static void
check_server_options(List *options)
{
	DefElem    *in_cluster = kw_get_option(options, "in_cluster");
	bool		has_in_cluster = (in_cluster != NULL && defGetBoolean(in_cluster));
	bool		has_kubeconfig = (kw_get_option(options, "kubeconfig") != NULL);
	bool		has_api_server = (kw_get_option(options, "api_server") != NULL);

	if (has_in_cluster)
	{
		check_conflict(options, "in_cluster", "kubeconfig");
		check_conflict(options, "in_cluster", "api_server");
	}
	check_conflict(options, "kubeconfig", "api_server");

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
					 errmsg("invalid value for option \"proxy_url\": \"%s\"", kw_excerpt(proxy)),
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

	check_transport_options(options);
	if (has_kubeconfig)
		check_exec_plugin(options);
}

/*
 * check_exec_plugin
 *		A server's kubeconfig (with its context) whose user runs an exec
 *		credential plugin may be set only by a role that may run programs
 *		(kw_role_may_run_programs: a superuser or a member of
 *		pg_execute_server_program), PostgreSQL's rule for COPY ... PROGRAM;
 *		pg_read_server_files, which lets a role name the file, is not
 *		enough.  A kubeconfig that cannot be read now is left to its first
 *		use, where connection.c and credential.c check the server's owner
 *		the same way.  Raises ERRCODE_INSUFFICIENT_PRIVILEGE.
 */
static void
check_exec_plugin(List *options)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	char	   *volatile command = NULL;
	char	   *volatile source = NULL;

	if (kw_role_may_run_programs(GetUserId()))
		return;

	/* a subtransaction: a kubeconfig that does not load is no error here */
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		KwClusterConfig *cfg = kw_kubeconfig_load(kw_option_string(options, "kubeconfig"),
												  kw_option_string(options, "context"));

		if (cfg->exec)
		{
			command = pstrdup(cfg->exec->command);
			source = pstrdup(cfg->exec->source);
		}
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_END_TRY();

	if (command != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to set a kubeconfig with exec credential plugin \"%s\" (%s)",
						command, source),
				 errdetail("Only superusers and roles with privileges of the \"%s\" role may make the server run programs; \"%s\" only reads files.",
						   "pg_execute_server_program", "pg_read_server_files"),
				 errhint("Ask a superuser to set it, or use a kubeconfig whose user has a token or client certificate.")));
}

/*
 * check_transport_options
 *		The transport rules of a server's own options (README "Security"):
 *		the options that weaken transport security, insecure_skip_tls_verify
 *		and allow_insecure_http, are a superuser's to set, as postgres_fdw
 *		keeps password_required 'false' to superusers; a CA and skipping
 *		verification exclude each other, as kubectl refuses them together
 *		(k8s.io/client-go/transport/transport.go: "specifying a root
 *		certificates file with the insecure flag is not allowed"); a plain
 *		http api_server needs allow_insecure_http, since credentials would
 *		travel in clear (kw_check_transport).  Raises
 *		ERRCODE_INSUFFICIENT_PRIVILEGE or ERRCODE_INVALID_PARAMETER_VALUE.
 */
static void
check_transport_options(List *options)
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

	kw_check_transport(NULL, api_server, weak[0] != NULL,
					kw_get_option(options, "certificate_authority") != NULL,
					weak[1] != NULL);
}

/*
 * kw_check_transport: the two transport rules any role is held to, on a
 * server's own options (the validator, server_name NULL) and again on the
 * settings it resolves to, which a kubeconfig may have supplied
 * (connection.c): no skipping TLS verification with a CA (kubectl's rule,
 * client-go transport/transport.go), no plain http API server without
 * allow_insecure_http.  Returns nothing; raises
 * ERRCODE_INVALID_PARAMETER_VALUE, naming server_name when not NULL.
 */
void
kw_check_transport(const char *server_name, const char *api_server, bool insecure,
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
				 errmsg("API server \"%s\" is plain http: credentials would travel in clear", kw_excerpt(api_server)),
				 server_name ? errdetail("Server \"%s\".", server_name) : 0,
				 errhint("Use https, or have a superuser add OPTIONS (allow_insecure_http 'true') to the server.")));
}

/*
 * check_user_mapping_options
 *		Cross-option rules of a user mapping: a path and a PEM value of the
 *		same thing, or token and token_file, exclude each other; a client
 *		certificate needs its key and the other way round.  Raises
 *		ERRCODE_SYNTAX_ERROR or ERRCODE_FDW_DYNAMIC_PARAMETER_VALUE_NEEDED.
 */
static void
check_user_mapping_options(List *options)
{
	bool		has_cert;
	bool		has_key;

	check_conflict(options, "token", "token_file");
	check_conflict(options, "client_certificate", "client_certificate_data");
	check_conflict(options, "client_key", "client_key_data");

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
 * check_foreign_table_options
 *		A live table (fdw.c) names its resource: "pods", "deploy",
 *		"deployments.apps", a CRD's plural.group.  Raises
 *		ERRCODE_FDW_DYNAMIC_PARAMETER_VALUE_NEEDED without one and
 *		ERRCODE_INVALID_PARAMETER_VALUE for a malformed name or api_version.  Whether the
 *		cluster serves it is only known when the table is used (42704 then).
 */
static void
check_foreign_table_options(List *options)
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
					 errmsg("invalid resource name \"%s\"", kw_excerpt(resource)),
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
				 errmsg("invalid API version \"%s\"", kw_excerpt(api_version)),
				 errhint("Use the version part of the resource's apiVersion, such as \"v1\" or \"v1beta1\".")));
}

/*
 * check_conflict
 *		Raise ERRCODE_SYNTAX_ERROR if options a and b are both present
 *		(file_fdw reports "filename" with "program" the same way).
 */
static void
check_conflict(List *options, const char *a, const char *b)
{
	if (kw_get_option(options, a) != NULL && kw_get_option(options, b) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("conflicting options \"%s\" and \"%s\"", a, b),
				 errdetail("Only one of them may be set.")));
}

/*
 * kw_get_option
 *		The DefElem called name in options (a server's, user mapping's or
 *		foreign table's option list), or NULL.
 */
DefElem *
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
 *		The value of option name in options as a string (owned by the
 *		list), or NULL when it is not set.
 */
char *
kw_option_string(List *options, const char *name)
{
	DefElem    *def = kw_get_option(options, name);

	return def ? defGetString(def) : NULL;
}

