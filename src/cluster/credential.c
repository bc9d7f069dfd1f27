/*-------------------------------------------------------------------------
 *
 * credential.c
 *		Where the credentials of a request come from: static tokens, token
 *		files, certificate and CA files (re-read when they change on disk),
 *		and exec credential plugins.
 *
 * Files (PROTOCOL 33): a token file, client certificate, client key and CA
 * bundle are read into a per-process cache keyed by path and re-read when
 * their mtime or size changes, so rotated files (projected service account
 * tokens, cert-manager certificates) are used by the next request without a
 * restart.  A 401 forces the token file to be read again.
 *
 * Exec credential plugins (client-go plugin/pkg/client/auth/exec/exec.go,
 * API client.authentication.k8s.io v1 and v1beta1): the plugin runs as a
 * child process of the PostgreSQL process that needs the credential, with
 * the process's environment plus the kubeconfig's `env` entries and
 * KUBERNETES_EXEC_INFO (an ExecCredential with spec.interactive = false and,
 * with provideClusterInfo, spec.cluster).  stdin is /dev/null: kwatch never
 * runs a plugin interactively (interactiveMode Always is refused before it
 * runs).  Its stdout must be an ExecCredential of the configured apiVersion
 * with status.token or status.clientCertificateData + clientKeyData, and
 * optionally status.expirationTimestamp (RFC 3339).
 *
 * Credentials are cached per process by plugin configuration and API server
 * (client-go's cache key is the exec config and the cluster) until they
 * expire, and after a 401 are dropped once (client-go's
 * Authenticator.maybeRefreshCreds).  The worker never blocks on a plugin:
 * kw_credential_poll() starts a run and says "pending"; the run's stdout and
 * stderr pipes sit in the worker's WaitEventSet (kw_credential_wait_fds);
 * kw_credential_drive() reads them, kills a run that exceeds
 * kwatch.exec_plugin_timeout, and starts refreshes ahead of expiry (a
 * quarter of the lifetime before, at most a minute), so that the next
 * request never waits for a plugin.  Backends (live tables, watch()'s
 * probe) wait for the run, interruptibly.
 *
 * Running a plugin is running a program as the server's OS user: kwatch
 * runs one only for a foreign server whose owner is a superuser or has the
 * privileges of pg_execute_server_program, PostgreSQL's rule for COPY ...
 * PROGRAM (pg_read_server_files, which lets a role name the
 * kubeconfig, is not enough).  The validator refuses such a kubeconfig to
 * other roles (fdw_option.c), connection.c when it resolves the server,
 * and this file again before every run.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>

#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "common/base64.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "kw_common.h"
#include "kw_cluster.h"

extern char **environ;

/* utils/fmgrprotos.h, which json-c's json_object clashes with */
extern Datum timestamptz_in(PG_FUNCTION_ARGS);

/* Largest stdout accepted from a plugin, and stderr kept for messages. */
#define KW_EXEC_STDOUT_MAX	(1024 * 1024)
#define KW_EXEC_STDERR_MAX	4096
/* Largest token, certificate, key or CA file read. */
#define KW_CRED_FILE_MAX	(1024 * 1024)
/* A failed run is reported to every asker for this long before a new run. */
#define KW_EXEC_FAILURE_HOLD_MS 1000
/* Latest refresh ahead of expiry: min(lifetime / 4, this). */
#define KW_EXEC_REFRESH_AHEAD_MAX_MS 60000
/* An entry nobody asked for in this long is not refreshed ahead. */
#define KW_EXEC_IDLE_MS		(10 * 60 * 1000)

/* ---------------------------------------------------------------------
 * files
 * ---------------------------------------------------------------------
 */

typedef struct CredFile
{
	char	   *path;
	struct timespec mtime;
	off_t		size;
	char	   *content;		/* NUL-terminated */
	struct CredFile *next;
} CredFile;

static CredFile *cred_files = NULL;

/*
 * kw_credential_file: the content of a credential file `path` (token,
 * certificate, key, CA bundle; `what` names it in errors), read again when
 * its mtime or size changed or `force` is set.  The result belongs to a
 * per-process cache (valid until the next call for that path).  Token files
 * lose trailing white space.  ERRORs with
 * ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION when the file can't be read,
 * is empty or is larger than 1 MB.
 */
char *
kw_credential_file(const char *path, const char *what, bool force)
{
	CredFile   *e;
	struct stat st;
	int			fd;
	char	   *buf;
	ssize_t		n;
	size_t		len = 0;
	bool		token = (strcmp(what, "token file") == 0);

	for (e = cred_files; e; e = e->next)
		if (strcmp(e->path, path) == 0)
			break;

	if (stat(path, &st) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
				 errmsg("could not stat %s \"%s\": %m", what, path)));
	if (e && !force && e->size == st.st_size &&
		e->mtime.tv_sec == st.st_mtim.tv_sec &&
		e->mtime.tv_nsec == st.st_mtim.tv_nsec)
		return e->content;
	if (st.st_size > KW_CRED_FILE_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
				 errmsg("%s \"%s\" is larger than 1 MB", what, path)));

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
				 errmsg("could not open %s \"%s\": %m", what, path)));
	buf = MemoryContextAlloc(TopMemoryContext, KW_CRED_FILE_MAX + 1);
	while (len < KW_CRED_FILE_MAX &&
		   (n = read(fd, buf + len, KW_CRED_FILE_MAX - len)) != 0)
	{
		if (n < 0)
		{
			if (errno == EINTR)
				continue;
			close(fd);
			pfree(buf);
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
					 errmsg("could not read %s \"%s\": %m", what, path)));
		}
		len += n;
	}
	close(fd);
	buf[len] = '\0';
	if (token)
		while (len > 0 && isspace((unsigned char) buf[len - 1]))
			buf[--len] = '\0';
	if (len == 0)
	{
		pfree(buf);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
				 errmsg("%s \"%s\" is empty", what, path)));
	}
	buf = repalloc(buf, len + 1);

	if (e == NULL)
	{
		e = MemoryContextAllocZero(TopMemoryContext, sizeof(CredFile));
		e->path = MemoryContextStrdup(TopMemoryContext, path);
		e->next = cred_files;
		cred_files = e;
	}
	else
	{
		explicit_bzero(e->content, strlen(e->content));
		pfree(e->content);
	}
	e->content = buf;
	e->mtime = st.st_mtim;
	e->size = st.st_size;
	return e->content;
}

/* ---------------------------------------------------------------------
 * exec plugins: runs
 * ---------------------------------------------------------------------
 */

typedef struct ExecRun
{
	pid_t		pid;
	int			out_fd;			/* -1 once at EOF */
	int			err_fd;
	StringInfoData out;
	StringInfoData err;
	bool		out_overflow;
	bool		waitpid_pending;	/* pipes closed, process not yet exited */
	TimestampTz started;
	TimestampTz deadline;
} ExecRun;

typedef struct ExecEntry
{
	char	   *key;			/* the plugin configuration + API server */
	KwExecConfig *exec;			/* copy, TopMemoryContext */
	char	   *server_name;
	char	   *exec_info;		/* KUBERNETES_EXEC_INFO */
	bool		have_cred;
	KwCredential cred;
	TimestampTz refresh_at;		/* start a refresh from then on */
	ExecRun    *run;
	char	   *error;			/* last run's failure, until a success */
	int			error_sqlstate;
	TimestampTz failed_at;
	TimestampTz last_used;
	struct ExecEntry *next;
} ExecEntry;

static ExecEntry *exec_entries = NULL;
static bool nonblocking = false;
static uint64 fd_generation = 0;
static bool exit_callback_registered = false;

/*
 * kw_credential_set_nonblocking: the worker says it never waits for a
 * plugin: kw_credential_get() then ERRORs instead of waiting, and callers
 * use kw_credential_poll() first.
 */
void
kw_credential_set_nonblocking(bool on)
{
	nonblocking = on;
}

/* Kills the plugins still running when the process exits. */
static void
kill_runs_at_exit(int code, Datum arg)
{
	for (ExecEntry *e = exec_entries; e; e = e->next)
		if (e->run && e->run->pid > 0)
		{
			kill(e->run->pid, SIGKILL);
			(void) waitpid(e->run->pid, NULL, 0);
			e->run->pid = 0;
		}
}

static void
append_json_string(StringInfo buf, const char *key, const char *value, bool *first)
{
	json_object *s = json_object_new_string(value);

	appendStringInfo(buf, "%s\"%s\":%s", *first ? "" : ",", key,
					 json_object_to_json_string_ext(s, JSON_C_TO_STRING_PLAIN));
	json_object_put(s);
	*first = false;
}

/*
 * exec_info: KUBERNETES_EXEC_INFO for a run (client-go exec.go
 * refreshCredsLocked): an ExecCredential of the plugin's apiVersion with
 * spec.interactive false and, with provideClusterInfo, spec.cluster
 * (clientauthentication Cluster: server, tls-server-name,
 * insecure-skip-tls-verify, certificate-authority-data, proxy-url).
 */
static char *
exec_info(KwClusterConfig *cfg)
{
	StringInfoData buf;
	bool		first = true;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "{");
	append_json_string(&buf, "kind", "ExecCredential", &first);
	append_json_string(&buf, "apiVersion", cfg->exec->api_version, &first);
	appendStringInfoString(&buf, ",\"spec\":{\"interactive\":false");
	if (cfg->exec->provide_cluster_info)
	{
		bool		cfirst = true;
		const char *ca = cfg->ca_data;

		appendStringInfoString(&buf, ",\"cluster\":{");
		append_json_string(&buf, "server", cfg->api_server, &cfirst);
		if (cfg->tls_server_name)
			append_json_string(&buf, "tls-server-name", cfg->tls_server_name, &cfirst);
		if (cfg->insecure_skip_tls_verify)
			appendStringInfoString(&buf, ",\"insecure-skip-tls-verify\":true");
		if (ca == NULL && cfg->ca_file)
		{
			MemoryContext cxt = CurrentMemoryContext;

			PG_TRY();
			{
				ca = kw_credential_file(cfg->ca_file, "CA file", false);
			}
			PG_CATCH();
			{
				/* out of ErrorContext first: FlushErrorState resets it */
				MemoryContextSwitchTo(cxt);
				FlushErrorState();	/* the request itself will report it */
				ca = NULL;
			}
			PG_END_TRY();
		}
		if (ca)
		{
			int			len = pg_b64_enc_len(strlen(ca));
			char	   *b64 = palloc(len + 1);

			len = KW_B64_ENCODE(ca, strlen(ca), b64, len);
			b64[Max(len, 0)] = '\0';
			append_json_string(&buf, "certificate-authority-data", b64, &cfirst);
		}
		if (cfg->proxy_url)
			append_json_string(&buf, "proxy-url", cfg->proxy_url, &cfirst);
		appendStringInfoString(&buf, "}");
	}
	appendStringInfoString(&buf, "}}");
	return buf.data;
}

/*
 * entry_key: what identifies a cached credential: the plugin configuration
 * and the cluster it is told about (client-go exec.go cacheKey), so that
 * KUBERNETES_EXEC_INFO is built once per entry.
 */
static char *
entry_key(KwClusterConfig *cfg)
{
	StringInfoData k;
	ListCell   *lc;

	initStringInfo(&k);
	appendStringInfo(&k, "%s\n%s\n%s\n%d\no:%u\n", cfg->api_server, cfg->exec->command,
					 cfg->exec->api_version, cfg->exec->provide_cluster_info,
					 cfg->exec->server_owner);
	foreach(lc, cfg->exec->args)
		appendStringInfo(&k, "a:%s\n", (char *) lfirst(lc));
	foreach(lc, cfg->exec->env)
	{
		KwKeyValue *kv = (KwKeyValue *) lfirst(lc);

		appendStringInfo(&k, "e:%s=%s\n", kv->key, kv->value);
	}
	if (cfg->exec->provide_cluster_info)
		appendStringInfo(&k, "c:%s\n%s\n%s\n%s\n%d\n",
						 cfg->tls_server_name ? cfg->tls_server_name : "",
						 cfg->proxy_url ? cfg->proxy_url : "",
						 cfg->ca_file ? cfg->ca_file : "",
						 cfg->ca_data ? cfg->ca_data : "",
						 cfg->insecure_skip_tls_verify);
	return k.data;
}

static ExecEntry *
find_entry(KwClusterConfig *cfg)
{
	char	   *key = entry_key(cfg);
	ExecEntry  *e;
	MemoryContext old;

	for (e = exec_entries; e; e = e->next)
		if (strcmp(e->key, key) == 0)
			break;
	if (e == NULL)
	{
		old = MemoryContextSwitchTo(TopMemoryContext);
		e = palloc0(sizeof(ExecEntry));
		e->key = pstrdup(key);
		e->exec = kw_exec_config_copy(cfg->exec);
		e->exec_info = exec_info(cfg);
		e->next = exec_entries;
		exec_entries = e;
		MemoryContextSwitchTo(old);
	}
	/* the server name in messages: the newest one to use the entry */
	if (e->server_name == NULL || strcmp(e->server_name, cfg->server_name ? cfg->server_name : "") != 0)
	{
		if (e->server_name)
			pfree(e->server_name);
		e->server_name = MemoryContextStrdup(TopMemoryContext,
											 cfg->server_name ? cfg->server_name : "");
	}
	pfree(key);
	return e;
}

/*
 * kw_role_may_run_programs: whether `role` may make the server run a
 * program of its choice: a superuser, or a role with the privileges of
 * pg_execute_server_program (PostgreSQL's rule for COPY ... PROGRAM,
 * commands/copy.c).  Needs a transaction (catalog lookups).
 */
bool
kw_role_may_run_programs(Oid role)
{
	return superuser_arg(role) ||
		has_privs_of_role(role, ROLE_PG_EXECUTE_SERVER_PROGRAM);
}

/*
 * exec_allowed: whether plugin `x` may run now: its server's owner may run
 * programs, asked of the catalog when a transaction is open, else as
 * connection.c found when it last resolved the server (the worker between
 * transactions; it resolves again after every change to roles).
 */
static bool
exec_allowed(KwExecConfig *x)
{
	if (!OidIsValid(x->server_owner))
		return false;
	if (IsTransactionState())
		return kw_role_may_run_programs(x->server_owner);
	return x->owner_may_run;
}

/* exec_refusal: the message of a plugin exec_allowed refused, palloc'd. */
static char *
exec_refusal(KwExecConfig *x, const char *server_name)
{
	const char *owner = IsTransactionState() && OidIsValid(x->server_owner) ?
		GetUserNameFromId(x->server_owner, true) : NULL;

	return psprintf("exec credential plugin \"%s\" of %s not run for server \"%s\": its owner%s%s%s is not a superuser and lacks the privileges of the \"pg_execute_server_program\" role",
					x->command, x->source, server_name ? server_name : "",
					owner ? ", role \"" : "", owner ? owner : "", owner ? "\"," : "");
}

/*
 * kw_check_exec_allowed: ERRORs (42501 insufficient_privilege, naming the
 * missing role membership) when `cfg` has an exec credential plugin that
 * its server's owner may not have run (kw_role_may_run_programs).  Returns
 * nothing otherwise.
 */
void
kw_check_exec_allowed(KwClusterConfig *cfg)
{
	if (cfg->exec == NULL || exec_allowed(cfg->exec))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("%s", exec_refusal(cfg->exec, cfg->server_name)),
			 errdetail("Running a plugin runs a program as the database server's operating system user, which needs the privileges of \"pg_execute_server_program\" (as COPY ... PROGRAM does); \"pg_read_server_files\" only reads files."),
			 errhint("GRANT pg_execute_server_program TO the server's owner, or give the server credentials that run no program (a user mapping's \"token\").")));
}

static void
set_failure(ExecEntry *e, int sqlstate, const char *msg)
{
	if (e->error)
		pfree(e->error);
	e->error = MemoryContextStrdup(TopMemoryContext, msg);
	e->error_sqlstate = sqlstate;
	e->failed_at = GetCurrentTimestamp();
}

/* stderr_text: the run's stderr, trimmed and printable, for messages. */
static char *
stderr_text(ExecRun *r)
{
	StringInfoData s;
	int			end = r->err.len;

	while (end > 0 && isspace((unsigned char) r->err.data[end - 1]))
		end--;
	if (end == 0)
		return pstrdup("");
	initStringInfo(&s);
	appendStringInfoString(&s, ": ");
	for (int i = 0; i < end; i++)
	{
		unsigned char c = (unsigned char) r->err.data[i];

		appendStringInfoChar(&s, (c == '\n' || c == '\t') ? ' ' : (c < 32 ? '?' : (char) c));
	}
	return s.data;
}

/*
 * plugin_argv: the plugin's argv, NULL-terminated: the command, then the
 * kubeconfig's args (palloc'd in CurrentMemoryContext; the strings are
 * the entry's).
 */
static char **
plugin_argv(KwExecConfig *x)
{
	char	  **argv = palloc(sizeof(char *) * (list_length(x->args) + 2));
	int			i = 0;
	ListCell   *lc;

	argv[i++] = x->command;
	foreach(lc, x->args)
		argv[i++] = (char *) lfirst(lc);
	argv[i] = NULL;
	return argv;
}

/*
 * plugin_envp: the plugin's environment, NULL-terminated: ours, then the
 * kubeconfig's env entries (which win over ours), then
 * KUBERNETES_EXEC_INFO (client-go exec.go: the plugin gets the caller's
 * environment plus ExecConfig.Env, and the exec info).  palloc'd in
 * CurrentMemoryContext.
 */
static char **
plugin_envp(ExecEntry *e)
{
	char	  **envp;
	int			nenv = 0,
				i = 0;
	ListCell   *lc;

	while (environ[nenv])
		nenv++;
	envp = palloc(sizeof(char *) * (nenv + list_length(e->exec->env) + 2));
	for (int j = 0; j < nenv; j++)
	{
		bool		overridden = strncmp(environ[j], "KUBERNETES_EXEC_INFO=", 21) == 0;

		foreach(lc, e->exec->env)
		{
			KwKeyValue *kv = (KwKeyValue *) lfirst(lc);
			size_t		kl = strlen(kv->key);

			if (strncmp(environ[j], kv->key, kl) == 0 && environ[j][kl] == '=')
				overridden = true;
		}
		if (!overridden)
			envp[i++] = environ[j];
	}
	foreach(lc, e->exec->env)
	{
		KwKeyValue *kv = (KwKeyValue *) lfirst(lc);

		envp[i++] = psprintf("%s=%s", kv->key, kv->value);
	}
	envp[i++] = psprintf("KUBERNETES_EXEC_INFO=%s", e->exec_info);
	envp[i] = NULL;
	return envp;
}

/*
 * spawn_plugin: posix_spawn of `cmd` (no code of ours runs in the child)
 * in a session of its own, with stdin from /dev/null, stdout on out_fd and
 * stderr on err_fd, every other descriptor closed and signals at their
 * defaults.  A command without a slash is looked up in PATH, as Go's
 * os/exec does.  Returns posix_spawn's result (0, or an errno value) and
 * the child's pid in *pid.
 */
static int
spawn_plugin(const char *cmd, int out_fd, int err_fd, char **argv,
			 char **envp, pid_t *pid)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t	none,
				all;
	int			rc;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
	posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
	/* no client socket, data file or postmaster pipe reaches the plugin */
	posix_spawn_file_actions_addclosefrom_np(&fa, 3);
#endif
	posix_spawnattr_init(&attr);
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &all);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
							 POSIX_SPAWN_SETSID);
	if (strchr(cmd, '/') != NULL)
		rc = posix_spawn(pid, cmd, &fa, &attr, argv, envp);
	else
		rc = posix_spawnp(pid, cmd, &fa, &attr, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	return rc;
}

/*
 * spawn_failed: records in the entry why the plugin could not start
 * (posix_spawn's `rc`): not found (ERRCODE_UNDEFINED_FILE, with the
 * installHint, as client-go's wrapCmdRunErrorLocked), anything else
 * ERRCODE_SYSTEM_ERROR.
 */
static void
spawn_failed(ExecEntry *e, int rc)
{
	const char *cmd = e->exec->command;

	errno = rc;
	if (rc == ENOENT)
		set_failure(e, ERRCODE_UNDEFINED_FILE,
					psprintf("exec credential plugin \"%s\" of %s not found%s%s",
							 cmd, e->exec->source,
							 e->exec->install_hint ? ": " : "",
							 e->exec->install_hint ? e->exec->install_hint : ""));
	else
		set_failure(e, ERRCODE_SYSTEM_ERROR,
					psprintf("could not run exec credential plugin \"%s\" of %s: %m",
							 cmd, e->exec->source));
}

/*
 * new_run: the entry's run of the plugin started as `pid`, reading its
 * stdout and stderr from out_fd and err_fd, given kwatch.exec_plugin_timeout
 * from now (TopMemoryContext: it outlives the caller's transaction).
 */
static ExecRun *
new_run(pid_t pid, int out_fd, int err_fd)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	ExecRun    *r = palloc0(sizeof(ExecRun));

	r->pid = pid;
	r->out_fd = out_fd;
	r->err_fd = err_fd;
	initStringInfo(&r->out);
	initStringInfo(&r->err);
	r->started = GetCurrentTimestamp();
	r->deadline = TimestampTzPlusMilliseconds(r->started,
											  (int64) kw_exec_plugin_timeout_s * 1000);
	MemoryContextSwitchTo(old);
	return r;
}

/*
 * start_run: starts the entry's plugin (spawn_plugin) with its argv and
 * environment (plugin_argv, plugin_envp), stdout and stderr into
 * non-blocking pipes the worker polls.  Returns false with the failure
 * recorded in the entry when it can't start (spawn_failed; pipes:
 * ERRCODE_INSUFFICIENT_RESOURCES).
 */
static bool
start_run(ExecEntry *e)
{
	int			outp[2] = {-1, -1},
				errp[2] = {-1, -1};
	char	  **argv;
	char	  **envp;
	pid_t		pid;
	int			rc;
	char	   *cmd = e->exec->command;

	/* the last word before a program runs */
	if (!exec_allowed(e->exec))
	{
		set_failure(e, ERRCODE_INSUFFICIENT_PRIVILEGE, exec_refusal(e->exec, e->server_name));
		return false;
	}

	if (!exit_callback_registered)
	{
		on_proc_exit(kill_runs_at_exit, (Datum) 0);
		exit_callback_registered = true;
	}
	argv = plugin_argv(e->exec);
	envp = plugin_envp(e);

	if (pipe2(outp, O_CLOEXEC | O_NONBLOCK) != 0 || pipe2(errp, O_CLOEXEC | O_NONBLOCK) != 0)
	{
		set_failure(e, ERRCODE_INSUFFICIENT_RESOURCES,
					psprintf("could not create pipes for exec credential plugin \"%s\": %m", cmd));
		if (outp[0] >= 0)
		{
			close(outp[0]);
			close(outp[1]);
		}
		return false;
	}
	rc = spawn_plugin(cmd, outp[1], errp[1], argv, envp, &pid);
	close(outp[1]);
	close(errp[1]);
	if (rc != 0)
	{
		close(outp[0]);
		close(errp[0]);
		spawn_failed(e, rc);
		return false;
	}

	e->run = new_run(pid, outp[0], errp[0]);
	fd_generation++;
	elog(DEBUG1, "kwatch: started exec credential plugin \"%s\" (pid %d) for server \"%s\"",
		 cmd, (int) pid, e->server_name);
	return true;
}

/* read_pipe: reads what `fd` holds now into buf; closes it at EOF. */
static void
read_pipe(int *fd, StringInfo buf, int max, bool *overflow)
{
	char		chunk[8192];

	while (*fd >= 0)
	{
		ssize_t		n = read(*fd, chunk, sizeof(chunk));

		if (n > 0)
		{
			if (buf->len + n <= max)
				appendBinaryStringInfo(buf, chunk, n);
			else if (overflow)
				*overflow = true;
			else if (buf->len < max)
				appendBinaryStringInfo(buf, chunk, max - buf->len);
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n < 0 && errno == EINTR)
			continue;
		close(*fd);				/* EOF or an error: either way, done */
		*fd = -1;
		fd_generation++;
	}
}

/*
 * parse_credential: the ExecCredential on a run's stdout -> e->cred
 * (client-go exec.go refreshCredsLocked's checks, same wording).  Returns
 * false with the failure recorded.
 */
static bool
parse_credential(ExecEntry *e, ExecRun *r)
{
	json_tokener *tok = json_tokener_new();
	json_object *o = json_tokener_parse_ex(tok, r->out.data, r->out.len);
	enum json_tokener_error jerr = json_tokener_get_error(tok);
	json_object *status = NULL;
	const char *kind,
			   *apiv,
			   *token,
			   *cert,
			   *key,
			   *exp;
	char	   *fail = NULL;
	TimestampTz expires = 0;
	MemoryContext old;

	json_tokener_free(tok);
	if (o == NULL || jerr != json_tokener_success || !json_object_is_type(o, json_type_object))
		fail = psprintf("decoding stdout: %s", o == NULL || jerr != json_tokener_success ?
						json_tokener_error_desc(jerr) : "not a JSON object");
	else
	{
		kind = kw_json_get_string(o, "kind");
		apiv = kw_json_get_string(o, "apiVersion");
		json_object_object_get_ex(o, "status", &status);
		token = kw_json_get_string(status, "token");
		cert = kw_json_get_string(status, "clientCertificateData");
		key = kw_json_get_string(status, "clientKeyData");
		exp = kw_json_get_string(status, "expirationTimestamp");
		if (token && !token[0])
			token = NULL;
		if (cert && !cert[0])
			cert = NULL;
		if (key && !key[0])
			key = NULL;
		if (kind == NULL || strcmp(kind, "ExecCredential") != 0)
			fail = psprintf("decoding stdout: kind is \"%s\", not \"ExecCredential\"", kind ? kind : "");
		else if (apiv == NULL || strcmp(apiv, e->exec->api_version) != 0)
			fail = psprintf("exec plugin is configured to use API version %s, plugin returned version %s",
							e->exec->api_version, apiv ? apiv : "(none)");
		else if (status == NULL || !json_object_is_type(status, json_type_object))
			fail = pstrdup("exec plugin didn't return a status field");
		else if (token == NULL && cert == NULL && key == NULL)
			fail = pstrdup("exec plugin didn't return a token or cert/key pair");
		else if ((cert == NULL) != (key == NULL))
			fail = pstrdup("exec plugin returned only certificate or key, not both");
		else if (token && !kw_header_value_safe(token))
			fail = pstrdup("exec plugin returned a token with characters an HTTP header cannot hold");
		else if (exp && exp[0])
		{
			MemoryContext cxt = CurrentMemoryContext;

			PG_TRY();
			{
				expires = DatumGetTimestampTz(DirectFunctionCall3(timestamptz_in,
																  CStringGetDatum(exp),
																  ObjectIdGetDatum(InvalidOid),
																  Int32GetDatum(-1)));
			}
			PG_CATCH();
			{
				MemoryContextSwitchTo(cxt);
				FlushErrorState();
				fail = psprintf("exec plugin returned an expirationTimestamp that is not RFC 3339: \"%s\"", exp);
			}
			PG_END_TRY();
		}
		if (fail == NULL)
		{
			TimestampTz now = GetCurrentTimestamp();
			int64		life_ms = expires ? (expires - now) / 1000 : 0;

			old = MemoryContextSwitchTo(TopMemoryContext);
			if (e->have_cred)
			{
				if (e->cred.token)
				{
					explicit_bzero(e->cred.token, strlen(e->cred.token));
					pfree(e->cred.token);
				}
				if (e->cred.client_key_data)
				{
					explicit_bzero(e->cred.client_key_data, strlen(e->cred.client_key_data));
					pfree(e->cred.client_key_data);
				}
				if (e->cred.client_cert_data)
					pfree(e->cred.client_cert_data);
			}
			memset(&e->cred, 0, sizeof(e->cred));
			e->cred.token = token ? pstrdup(token) : NULL;
			e->cred.client_cert_data = cert ? pstrdup(cert) : NULL;
			e->cred.client_key_data = key ? pstrdup(key) : NULL;
			e->cred.expires = expires;
			e->cred.obtained = now;
			e->have_cred = true;
			e->refresh_at = expires ?
				expires - Min(Max(life_ms, 0) / 4, KW_EXEC_REFRESH_AHEAD_MAX_MS) * 1000 : 0;
			MemoryContextSwitchTo(old);
			if (e->error)
				pfree(e->error);
			e->error = NULL;
		}
	}
	if (o)
		json_object_put(o);
	if (fail)
		set_failure(e, ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION,
					psprintf("exec credential plugin \"%s\" of %s: %s",
							 e->exec->command, e->exec->source, fail));
	return fail == NULL;
}

/* end_run: frees the run (its pipes are closed, its process reaped). */
static void
end_run(ExecEntry *e)
{
	ExecRun    *r = e->run;

	if (r->out_fd >= 0)
		close(r->out_fd);
	if (r->err_fd >= 0)
		close(r->err_fd);
	explicit_bzero(r->out.data, r->out.len);
	pfree(r->out.data);
	pfree(r->err.data);
	pfree(r);
	e->run = NULL;
	fd_generation++;
}

/*
 * step_run: reads what the run's pipes hold; when both are at EOF and the
 * process has exited, takes its result; kills it past its deadline.
 * Returns true when the run is over (e->run is NULL then).
 */
static bool
step_run(ExecEntry *e, TimestampTz now)
{
	ExecRun    *r = e->run;
	int			wstatus;
	pid_t		p;

	read_pipe(&r->out_fd, &r->out, KW_EXEC_STDOUT_MAX, &r->out_overflow);
	read_pipe(&r->err_fd, &r->err, KW_EXEC_STDERR_MAX, NULL);

	if (now >= r->deadline)
	{
		kill(r->pid, SIGKILL);
		(void) waitpid(r->pid, NULL, 0);
		set_failure(e, ERRCODE_CONNECTION_FAILURE,
					psprintf("exec credential plugin \"%s\" of %s did not finish within %d s (kwatch.exec_plugin_timeout)%s",
							 e->exec->command, e->exec->source,
							 kw_exec_plugin_timeout_s, stderr_text(r)));
		end_run(e);
		return true;
	}
	if (r->out_fd >= 0 || r->err_fd >= 0)
		return false;
	p = waitpid(r->pid, &wstatus, WNOHANG);
	if (p == 0)
	{
		r->waitpid_pending = true;	/* closed its pipes, still running */
		return false;
	}
	if (p < 0)
		wstatus = 0;			/* reaped elsewhere: judge by its output */

	if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0)
	{
		if (r->out_overflow)
			set_failure(e, ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION,
						psprintf("exec credential plugin \"%s\" of %s wrote more than 1 MB",
								 e->exec->command, e->exec->source));
		else
			(void) parse_credential(e, r);
	}
	else if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 127 && r->err.len == 0)
		set_failure(e, ERRCODE_UNDEFINED_FILE,
					psprintf("exec credential plugin \"%s\" of %s could not be run%s%s",
							 e->exec->command, e->exec->source,
							 e->exec->install_hint ? ": " : "",
							 e->exec->install_hint ? e->exec->install_hint : ""));
	else if (WIFEXITED(wstatus))
		set_failure(e, ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION,
					psprintf("exec credential plugin \"%s\" of %s failed with exit code %d%s",
							 e->exec->command, e->exec->source,
							 WEXITSTATUS(wstatus), stderr_text(r)));
	else
		set_failure(e, ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION,
					psprintf("exec credential plugin \"%s\" of %s was killed by signal %d%s",
							 e->exec->command, e->exec->source,
							 WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0, stderr_text(r)));
	end_run(e);
	return true;
}

/* cred_usable: the entry holds a credential that has not expired. */
static bool
cred_usable(ExecEntry *e, TimestampTz now)
{
	return e->have_cred && (e->cred.expires == 0 || now < e->cred.expires);
}

/* check_interactive: interactiveMode Always can't be honoured (no TTY). */
static void
check_interactive(KwExecConfig *x)
{
	if (x->interactive_mode && strcmp(x->interactive_mode, "Always") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("exec credential plugin \"%s\" of %s requires interactive mode",
						x->command, x->source),
				 errdetail("interactiveMode is \"Always\"; kwatch runs plugins without a terminal (client-go: standard input is not a terminal)."),
				 errhint("Use a plugin configuration with interactiveMode \"Never\" or \"IfAvailable\".")));
}

/*
 * kw_credential_poll: for the worker, before it starts a request on `cfg`:
 * KW_CRED_READY when the request can be made now (no plugin, or a cached
 * credential that has not expired: a refresh ahead of expiry runs
 * meanwhile), KW_CRED_PENDING when a plugin run was started or is running
 * (call again once kw_credential_drive() saw it end), KW_CRED_FAILED with
 * *error (palloc'd, the plugin's stderr included) and *sqlstate when the
 * last run failed less than a second ago.  Never blocks.
 */
KwCredState
kw_credential_poll(KwClusterConfig *cfg, char **error, int *sqlstate)
{
	ExecEntry  *e;
	TimestampTz now = GetCurrentTimestamp();

	if (cfg->exec == NULL)
		return KW_CRED_READY;
	check_interactive(cfg->exec);
	e = find_entry(cfg);
	e->last_used = now;
	e->exec->owner_may_run = cfg->exec->owner_may_run;
	if (!exec_allowed(cfg->exec))
	{
		*error = exec_refusal(cfg->exec, cfg->server_name);
		*sqlstate = ERRCODE_INSUFFICIENT_PRIVILEGE;
		return KW_CRED_FAILED;
	}
	if (e->run)
		step_run(e, now);
	if (cred_usable(e, now))
	{
		if (e->refresh_at && now >= e->refresh_at && e->run == NULL &&
			!(e->error && now < TimestampTzPlusMilliseconds(e->failed_at, KW_EXEC_FAILURE_HOLD_MS)))
			(void) start_run(e);
		return KW_CRED_READY;
	}
	if (e->run)
		return KW_CRED_PENDING;
	if (e->error && now < TimestampTzPlusMilliseconds(e->failed_at, KW_EXEC_FAILURE_HOLD_MS))
	{
		*error = pstrdup(e->error);
		*sqlstate = e->error_sqlstate;
		return KW_CRED_FAILED;
	}
	if (!start_run(e))
	{
		*error = pstrdup(e->error);
		*sqlstate = e->error_sqlstate;
		return KW_CRED_FAILED;
	}
	return KW_CRED_PENDING;
}

/*
 * wait_run: waits (interruptibly) for the entry's run to end, in a
 * backend.  A query cancel or any ERROR kills the plugin first.
 */
static void
wait_run(ExecEntry *e)
{
	PG_TRY();
	{
		while (e->run)
		{
			WaitEventSet *wes;
			WaitEvent	ev;
			TimestampTz now = GetCurrentTimestamp();
			long		ms;

			if (step_run(e, now))
				break;
			ms = Max(1, Min(TimestampDifferenceMilliseconds(now, e->run->deadline), 100));
			wes = KW_CREATE_WAIT_EVENT_SET(CurrentMemoryContext, CurrentResourceOwner, 4);
			AddWaitEventToSet(wes, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
			AddWaitEventToSet(wes, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
			if (e->run->out_fd >= 0)
				AddWaitEventToSet(wes, WL_SOCKET_READABLE, e->run->out_fd, NULL, NULL);
			if (e->run->err_fd >= 0)
				AddWaitEventToSet(wes, WL_SOCKET_READABLE, e->run->err_fd, NULL, NULL);
			(void) WaitEventSetWait(wes, ms, &ev, 1, PG_WAIT_EXTENSION);
			FreeWaitEventSet(wes);
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
	}
	PG_CATCH();
	{
		if (e->run)
		{
			kill(e->run->pid, SIGKILL);
			(void) waitpid(e->run->pid, NULL, 0);
			end_run(e);
		}
		PG_RE_THROW();
	}
	PG_END_TRY();
}

/*
 * kw_credential_get: the credential for a request on `cfg` now: a token
 * (from the token file, re-read when it changed, or the static one) or the
 * exec plugin's token or certificate.  The result points into caches: use
 * it before the next call.  In a backend a plugin run is waited for
 * (interruptibly); in the worker (nonblocking) the caller must have seen
 * KW_CRED_READY from kw_credential_poll.  ERRORs: an unreadable token file
 * (28000), a plugin that failed (its SQLSTATE, stderr in the message),
 * interactiveMode Always (0A000).
 */
KwCredential *
kw_credential_get(KwClusterConfig *cfg)
{
	static KwCredential plain;
	ExecEntry  *e;
	TimestampTz now;

	if (cfg->exec == NULL)
	{
		memset(&plain, 0, sizeof(plain));
		plain.token = cfg->token_file ?
			kw_credential_file(cfg->token_file, "token file", false) : cfg->token;
		return &plain;
	}
	check_interactive(cfg->exec);
	kw_check_exec_allowed(cfg);
	e = find_entry(cfg);
	now = GetCurrentTimestamp();
	e->last_used = now;
	e->exec->owner_may_run = cfg->exec->owner_may_run;
	if (!cred_usable(e, now))
	{
		if (nonblocking)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the credential of exec plugin \"%s\" for server \"%s\" is not ready",
							cfg->exec->command, e->server_name)));
		if (e->run == NULL && !start_run(e))
			ereport(ERROR,
					(errcode(e->error_sqlstate),
					 errmsg("%s", e->error)));
		wait_run(e);
		if (!cred_usable(e, GetCurrentTimestamp()))
			ereport(ERROR,
					(errcode(e->error ? e->error_sqlstate : ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
					 errmsg("%s", e->error ? e->error :
							psprintf("exec credential plugin \"%s\" of %s returned a credential that has already expired",
									 cfg->exec->command, cfg->exec->source))));
	}
	return &e->cred;
}

/*
 * kw_credential_rejected: the API server answered 401 to a request on
 * `cfg` started at `request_started`: the token file is read again at the
 * next use, and an exec credential obtained before the request is dropped
 * so that the next request runs the plugin again (client-go exec.go
 * maybeRefreshCreds).  Errors reading the file are left to that use.
 */
void
kw_credential_rejected(KwClusterConfig *cfg, TimestampTz request_started)
{
	if (cfg->exec)
	{
		ExecEntry  *e = find_entry(cfg);

		if (e->have_cred && e->cred.obtained <= request_started)
			e->cred.expires = e->cred.obtained;	/* expired: run again */
		return;
	}
	if (cfg->token_file)
	{
		MemoryContext cxt = CurrentMemoryContext;

		PG_TRY();
		{
			(void) kw_credential_file(cfg->token_file, "token file", true);
		}
		PG_CATCH();
		{
			MemoryContextSwitchTo(cxt);
			FlushErrorState();
		}
		PG_END_TRY();
	}
}

/*
 * kw_credential_can_refresh: whether a 401 on `cfg` can be cured by
 * getting the credential again (a token file or an exec plugin).
 */
bool
kw_credential_can_refresh(KwClusterConfig *cfg)
{
	return cfg->exec != NULL || cfg->token_file != NULL;
}

/*
 * kw_credential_wait_fds: the pipes of running plugins, for the worker's
 * WaitEventSet: fills fds (at most max) and returns how many.  *generation
 * changes whenever the set changes, so the worker knows to rebuild.
 */
int
kw_credential_wait_fds(int *fds, int max, uint64 *generation)
{
	int			n = 0;

	for (ExecEntry *e = exec_entries; e; e = e->next)
	{
		if (e->run == NULL)
			continue;
		if (e->run->out_fd >= 0 && n < max)
			fds[n++] = e->run->out_fd;
		if (e->run->err_fd >= 0 && n < max)
			fds[n++] = e->run->err_fd;
	}
	*generation = fd_generation;
	return n;
}

/*
 * kw_credential_drive: for the worker, each pass of its loop: advances the
 * running plugins (reads their pipes, reaps them, kills those past
 * kwatch.exec_plugin_timeout) and starts the refreshes that are due for
 * credentials in use.  Returns true when a run ended (watches waiting for
 * it can go on), and lowers *timeout_ms to the next deadline.
 */
bool
kw_credential_drive(long *timeout_ms)
{
	TimestampTz now = GetCurrentTimestamp();
	bool		ended = false;

	for (ExecEntry *e = exec_entries; e; e = e->next)
	{
		TimestampTz next = 0;

		if (e->run && step_run(e, now))
			ended = true;
		if (e->run == NULL && e->have_cred && e->refresh_at && now >= e->refresh_at &&
			now - e->last_used < (int64) KW_EXEC_IDLE_MS * 1000 &&
			!(e->error && now < TimestampTzPlusMilliseconds(e->failed_at, KW_EXEC_FAILURE_HOLD_MS)))
		{
			if (!start_run(e))
				ereport(LOG, (errmsg("kwatch: %s", e->error)));
		}
		if (e->run)
			next = e->run->waitpid_pending ? now + 50 * 1000 : e->run->deadline;
		else if (e->have_cred && e->refresh_at > now &&
				 now - e->last_used < (int64) KW_EXEC_IDLE_MS * 1000)
			next = e->refresh_at;
		else if (e->error && e->have_cred && e->refresh_at && e->refresh_at <= now)
			next = TimestampTzPlusMilliseconds(e->failed_at, KW_EXEC_FAILURE_HOLD_MS);
		if (next)
			*timeout_ms = Min(*timeout_ms, Max(0, (long) ((next - now) / 1000) + 1));
	}
	return ended;
}
