/*-------------------------------------------------------------------------
 *
 * cluster_config.c
 *		The connection settings of one cluster (KwClusterConfig, with its
 *		exec credential plugin, KwExecConfig): copying and comparing them,
 *		and the check every value bound for an HTTP header passes.
 *
 * The settings are made by kubeconfig.c (a kubeconfig file, in-cluster
 * config) and connection.c (a foreign server and user mapping layered on
 * top), used by credential.c (tokens, exec plugins) and http.c (requests).
 * This file depends on none of them, so the arrows among the four point
 * one way: http -> credential -> cluster_config, kubeconfig ->
 * cluster_config, connection -> kubeconfig.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "nodes/pg_list.h"

#include "kw_common.h"
#include "kw_cluster.h"

/* a NULL-keeping pstrdup */
static char *
copy_string(const char *s)
{
	return s ? pstrdup(s) : NULL;
}

/* a deep copy of a List of char * (NIL stays NIL) */
static List *
copy_strings(List *src)
{
	List	   *r = NIL;
	ListCell   *lc;

	foreach(lc, src)
		r = lappend(r, pstrdup((char *) lfirst(lc)));
	return r;
}

/*
 * kw_header_value_safe: whether `value` (NUL-terminated) can be sent in an
 * HTTP header as is: printable ASCII, spaces and tabs only, so no CR or LF
 * that would split it into more headers (RFC 9110 section 5.5: a field
 * value has no control characters but HTAB).  Never raises an error; the
 * callers (kubeconfig.c's fields, credential.c's exec plugin tokens) say
 * what was refused, without the value.
 */
bool
kw_header_value_safe(const char *value)
{
	for (const unsigned char *p = (const unsigned char *) value; *p; p++)
		if ((*p < 32 && *p != '\t') || *p == 127)
			return false;
	return true;
}

/*
 * kw_copy_key_values: a deep copy of a List of KwKeyValue (exec env
 * entries, impersonation extras) in CurrentMemoryContext; NIL stays NIL.
 * Errors only when out of memory.
 */
List *
kw_copy_key_values(List *src)
{
	List	   *r = NIL;
	ListCell   *lc;

	foreach(lc, src)
	{
		KwKeyValue *s = (KwKeyValue *) lfirst(lc);
		KwKeyValue *kv = palloc(sizeof(KwKeyValue));

		kv->key = pstrdup(s->key);
		kv->value = pstrdup(s->value);
		r = lappend(r, kv);
	}
	return r;
}

/*
 * kw_exec_config_copy: a deep copy of an exec plugin configuration
 * (clientcmd/api/v1 ExecConfig as kubeconfig.c read it) in
 * CurrentMemoryContext, for credential.c's per-plugin cache and
 * kw_cluster_config_copy.  Errors only when out of memory.
 */
KwExecConfig *
kw_exec_config_copy(KwExecConfig *src)
{
	KwExecConfig *x = palloc0(sizeof(KwExecConfig));

	x->command = pstrdup(src->command);
	x->args = copy_strings(src->args);
	x->env = kw_copy_key_values(src->env);
	x->api_version = pstrdup(src->api_version);
	x->install_hint = copy_string(src->install_hint);
	x->interactive_mode = copy_string(src->interactive_mode);
	x->provide_cluster_info = src->provide_cluster_info;
	x->server_owner = src->server_owner;
	x->owner_may_run = src->owner_may_run;
	x->source = pstrdup(src->source);
	return x;
}

/*
 * kw_cluster_config_copy: a deep copy of `src`, the exec plugin included,
 * in CurrentMemoryContext: the connection cache (connection.c) keeps one in
 * its own context, and kubeconfig.c copies its result out of the parser's
 * context.  Errors only when out of memory.
 */
KwClusterConfig *
kw_cluster_config_copy(const KwClusterConfig *src)
{
	KwClusterConfig *r = palloc0(sizeof(KwClusterConfig));

	r->server_name = copy_string(src->server_name);
	r->api_server = copy_string(src->api_server);
	r->ca_file = copy_string(src->ca_file);
	r->ca_data = copy_string(src->ca_data);
	r->client_cert_file = copy_string(src->client_cert_file);
	r->client_cert_data = copy_string(src->client_cert_data);
	r->client_key_file = copy_string(src->client_key_file);
	r->client_key_data = copy_string(src->client_key_data);
	r->token = copy_string(src->token);
	r->token_file = copy_string(src->token_file);
	r->tls_server_name = copy_string(src->tls_server_name);
	r->default_namespace = copy_string(src->default_namespace);
	r->insecure_skip_tls_verify = src->insecure_skip_tls_verify;
	r->exec = src->exec ? kw_exec_config_copy(src->exec) : NULL;
	r->proxy_url = copy_string(src->proxy_url);
	r->as_user = copy_string(src->as_user);
	r->as_uid = copy_string(src->as_uid);
	r->as_groups = copy_strings(src->as_groups);
	r->as_extra = kw_copy_key_values(src->as_extra);
	return r;
}

static bool
same_string(const char *a, const char *b)
{
	return (a == NULL || b == NULL) ? a == b : strcmp(a, b) == 0;
}

static bool
same_strings(List *a, List *b)
{
	ListCell   *la,
			   *lb;

	if (list_length(a) != list_length(b))
		return false;
	forboth(la, a, lb, b)
		if (strcmp((char *) lfirst(la), (char *) lfirst(lb)) != 0)
		return false;
	return true;
}

static bool
same_key_values(List *a, List *b)
{
	ListCell   *la,
			   *lb;

	if (list_length(a) != list_length(b))
		return false;
	forboth(la, a, lb, b)
	{
		KwKeyValue *x = (KwKeyValue *) lfirst(la);
		KwKeyValue *y = (KwKeyValue *) lfirst(lb);

		if (strcmp(x->key, y->key) != 0 || strcmp(x->value, y->value) != 0)
			return false;
	}
	return true;
}

/*
 * kw_cluster_config_equal: whether two settings would make the same
 * requests with the same credentials: every field compared, the exec
 * plugin's too (server_name is the same server under another name after
 * ALTER SERVER RENAME, which changes nothing on the wire).  The worker
 * asks when the connection generation moved (watch.c), to restart only the
 * watches whose settings changed.  Never raises an error.
 */
bool
kw_cluster_config_equal(const KwClusterConfig *a, const KwClusterConfig *b)
{
	if (!same_string(a->api_server, b->api_server) ||
		!same_string(a->ca_file, b->ca_file) ||
		!same_string(a->ca_data, b->ca_data) ||
		!same_string(a->client_cert_file, b->client_cert_file) ||
		!same_string(a->client_cert_data, b->client_cert_data) ||
		!same_string(a->client_key_file, b->client_key_file) ||
		!same_string(a->client_key_data, b->client_key_data) ||
		!same_string(a->token, b->token) ||
		!same_string(a->token_file, b->token_file) ||
		!same_string(a->tls_server_name, b->tls_server_name) ||
		!same_string(a->default_namespace, b->default_namespace) ||
		a->insecure_skip_tls_verify != b->insecure_skip_tls_verify ||
		!same_string(a->proxy_url, b->proxy_url) ||
		!same_string(a->as_user, b->as_user) ||
		!same_string(a->as_uid, b->as_uid) ||
		!same_strings(a->as_groups, b->as_groups) ||
		!same_key_values(a->as_extra, b->as_extra))
		return false;
	if (a->exec == NULL || b->exec == NULL)
		return a->exec == b->exec;
	return same_string(a->exec->command, b->exec->command) &&
		same_strings(a->exec->args, b->exec->args) &&
		same_key_values(a->exec->env, b->exec->env) &&
		same_string(a->exec->api_version, b->exec->api_version) &&
		same_string(a->exec->install_hint, b->exec->install_hint) &&
		same_string(a->exec->interactive_mode, b->exec->interactive_mode) &&
		a->exec->provide_cluster_info == b->exec->provide_cluster_info &&
		a->exec->server_owner == b->exec->server_owner &&
		a->exec->owner_may_run == b->exec->owner_may_run;
}
