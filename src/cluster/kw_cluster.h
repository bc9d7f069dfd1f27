/*-------------------------------------------------------------------------
 *
 * kw_cluster.h
 *		Cluster access but HTTP (kw_http.h): the connection settings of a
 *		cluster (cluster_config.c), kubeconfig (kubeconfig.c), server and
 *		user mapping options (fdw_option.c, connection.c), credentials
 *		(credential.c) and discovery (discovery.c).  Includes only the
 *		common ground.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KW_CLUSTER_H
#define KW_CLUSTER_H

#include "kw_common.h"

/* ---------------------------------------------------------------------
 * in cluster_config.c: connection settings of one cluster
 * ---------------------------------------------------------------------
 */

/* A name and a value (exec env entries, impersonation extras). */
typedef struct KwKeyValue
{
	char	   *key;
	char	   *value;
} KwKeyValue;

/*
 * KwExecConfig: a kubeconfig user's exec credential plugin
 * (clientcmd/api/v1 ExecConfig).  interactive_mode is NULL, "Never",
 * "IfAvailable" or "Always"; source names the kubeconfig user and file.
 */
typedef struct KwExecConfig
{
	char	   *command;
	List	   *args;			/* of char * */
	List	   *env;			/* of KwKeyValue */
	char	   *api_version;	/* client.authentication.k8s.io/v1 or v1beta1 */
	char	   *install_hint;
	char	   *interactive_mode;
	bool		provide_cluster_info;
	char	   *source;
	/*
	 * Who lets it run: the foreign server's owner, and whether
	 * that role had the privileges of pg_execute_server_program (or was a
	 * superuser) when connection.c resolved the server.  InvalidOid: not
	 * resolved for a server, never run.
	 */
	Oid			server_owner;
	bool		owner_may_run;
} KwExecConfig;

/*
 * KwClusterConfig: everything needed to talk to one API server.  All strings
 * are palloc'd in the context current when the config was built; NULL means
 * "not set".  *_data fields hold decoded PEM text (not base64).  Made by
 * kubeconfig.c and connection.c, used by credential.c and http.c.
 */
typedef struct KwClusterConfig
{
	char	   *server_name;	/* foreign server name: the "cluster" column */
	char	   *api_server;		/* "https://host:port", no trailing slash */
	char	   *ca_file;
	char	   *ca_data;
	char	   *client_cert_file;
	char	   *client_cert_data;
	char	   *client_key_file;
	char	   *client_key_data;
	char	   *token;			/* static bearer token */
	char	   *token_file;		/* re-read when it changes and after a 401 */
	char	   *tls_server_name;
	char	   *default_namespace;	/* context's namespace, informational */
	bool		insecure_skip_tls_verify;
	KwExecConfig *exec;			/* exec credential plugin, or NULL */
	char	   *proxy_url;		/* http://, https:// or socks5:// proxy */
	/* impersonation (client-go rest.ImpersonationConfig) */
	char	   *as_user;
	char	   *as_uid;
	List	   *as_groups;		/* of char * */
	List	   *as_extra;		/* of KwKeyValue, a key repeated per value */
} KwClusterConfig;

extern KwClusterConfig *kw_cluster_config_copy(const KwClusterConfig *src);
extern bool kw_cluster_config_equal(const KwClusterConfig *a,
									const KwClusterConfig *b);
extern List *kw_copy_key_values(List *src);
extern KwExecConfig *kw_exec_config_copy(KwExecConfig *src);
extern bool kw_header_value_safe(const char *value);

/* ---------------------------------------------------------------------
 * in kubeconfig.c: a kubeconfig file or in-cluster config -> settings
 * ---------------------------------------------------------------------
 */
extern KwClusterConfig *kw_kubeconfig_load(const char *path, const char *context);
extern List *kw_kubeconfig_contexts(const char *path, char **current);
extern KwClusterConfig *kw_in_cluster_config(void);

/* ---------------------------------------------------------------------
 * in fdw_option.c: the options and their rules
 * ---------------------------------------------------------------------
 */
extern DefElem *kw_get_option(List *options, const char *name);
extern char *kw_option_string(List *options, const char *name);
extern void kw_check_transport(const char *server_name, const char *api_server,
							   bool insecure, bool has_ca, bool allow_http);

/* ---------------------------------------------------------------------
 * in connection.c: server + user mapping -> settings, cached
 * ---------------------------------------------------------------------
 */
extern AclResult kw_server_usage(Oid serverid, Oid role);
extern void kw_check_watch_role(const char *server, Oid role);
extern KwClusterConfig *kw_cluster_config_for_server(const char *server_name,
													 Oid userid);
extern uint64 kw_connection_generation(void);

/* ---------------------------------------------------------------------
 * in credential.c: tokens, certificate files, exec plugins
 * ---------------------------------------------------------------------
 */
typedef struct KwCredential
{
	char	   *token;			/* bearer token, or NULL */
	char	   *client_cert_data;	/* PEM from an exec plugin, or NULL */
	char	   *client_key_data;
	TimestampTz expires;		/* 0 = no expiry */
	TimestampTz obtained;
} KwCredential;

typedef enum KwCredState
{
	KW_CRED_READY,
	KW_CRED_PENDING,
	KW_CRED_FAILED
} KwCredState;

extern char *kw_credential_file(const char *path, const char *what, bool force);
extern void kw_credential_set_nonblocking(bool on);
extern KwCredState kw_credential_poll(KwClusterConfig *cfg, char **error,
									  int *sqlstate);
extern KwCredential *kw_credential_get(KwClusterConfig *cfg);
extern bool kw_role_may_run_programs(Oid role);
extern void kw_check_exec_allowed(KwClusterConfig *cfg);
extern void kw_credential_rejected(KwClusterConfig *cfg,
								   TimestampTz request_started);
extern bool kw_credential_can_refresh(KwClusterConfig *cfg);
extern int	kw_credential_wait_fds(int *fds, int max, uint64 *generation);
extern bool kw_credential_drive(long *timeout_ms);

/* ---------------------------------------------------------------------
 * in discovery.c: what a cluster serves
 * ---------------------------------------------------------------------
 */
/* One resource as discovery describes it (PROTOCOL 29). */
typedef struct KwResource
{
	char	   *api_group;		/* "" for core */
	char	   *api_version;
	char	   *plural;
	char	   *kind;
	bool		namespaced;
	List	   *verbs;			/* char * */
	List	   *names;			/* char *: the lower-case names it answers
								 * to (plural, singular, kind, shortNames);
								 * set by resolution only (discovery.c) */
} KwResource;

extern bool kw_discover_resource(KwClusterConfig *cfg, const char *name,
								 KwResource *out);
extern List *kw_discover_listable(KwClusterConfig *cfg);
extern bool kw_discover_kind(KwClusterConfig *cfg, const char *api_version,
							 const char *kind, KwResource *out);

#endif							/* KW_CLUSTER_H */
