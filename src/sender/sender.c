/*-------------------------------------------------------------------------
 *
 * sender.c
 *		The request sender: a background process that sends the applies
 *		kwatch.apply() recorded at commit (kwatch.apply_queue), after their
 *		transaction committed, with the credentials of the role that made
 *		each one (pg_net's pattern: a request recorded in the
 *		transaction, sent by a worker after commit).
 *
 * Order: the pending applies of one object are sent one at a time in id
 * order, which apply() made their commit order (functions/apply.c); an
 * apply waiting to be retried holds back the later applies of its object,
 * so a retry never overwrites a later apply.  Applies of different objects
 * go in id order within a role, the roles taking turns (each role's first
 * due apply, then each role's second, ...), each in its own short
 * transaction.
 *
 * Each send: the row is read FOR UPDATE; a role that no longer exists, or
 * has lost USAGE on the server or its user mapping, fails it (never another
 * credential: connection.c); the resource is found by discovery when the
 * dry run was deferred (kw_discover_kind); then the server-side apply
 * (write.c).  The outcome: applied (the object's resourceVersion and uid
 * kept, and for an apply the object, which kwatch.wait_apply() returns),
 * failed (the SQLSTATE, message and causes of write.c), or, for
 * 429 (its Retry-After), 5xx, a connection error, or a deferred apply
 * whose namespace or kind does not exist yet, tried again after a backoff
 * (0.5 s doubling up to 30 s) until its deadline, then failed.  A
 * finished apply's manifest is cleared (a Secret's data stays nowhere) and
 * a NOTIFY kwatch_applies, '<id>' wakes listeners.  Finished applies older
 * than a day are deleted (once a minute).
 *
 * Sending the same apply twice is harmless: a server-side apply of one
 * manifest by one field manager is idempotent (the same fields, the same
 * values, the same owner), so a send whose answer was lost and is tried
 * again changes nothing more.  That is why the outcome of an apply is
 * committed without waiting for its WAL flush (synchronous_commit off, as
 * PostgreSQL allows for data whose loss in a crash is tolerable): a crash
 * within that window leaves the apply pending, and it is sent again.  The
 * window is closed where it would matter: each round begins by flushing
 * the last round's outcomes (an object is sent at most once per round, so
 * its next apply never goes out before its earlier outcome is durable),
 * and kwatch.wait_apply() flushes before it returns an outcome.  The
 * outcome of a delete is flushed at once: sent again after a lost outcome,
 * a delete without a uid precondition could delete an object created
 * since under the same name.  On a failover to a synchronous standby the
 * outcomes of the last round may be lost and sent again.  A delete (kwatch.delete()) is sent with its
 * DeleteOptions; answered 404 it is done (the object is gone: an earlier
 * attempt whose answer was lost, or another client), and its uid
 * precondition keeps a retry from deleting an object recreated under the
 * same name (409: failed, 40001).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "foreign/foreign.h"
#include "common/jsonapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
/* fmgrprotos.h declares a json_object() function: keep it out of json-c's way */
#define json_object pg_json_object_fn
#include "utils/builtins.h"
#undef json_object
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include <json-c/json.h>

#include "kw_common.h"
#include "kw_status.h"
#include "kw_cluster.h"
#include "kw_http.h"
#include "kw_write.h"
#include "kw_sender.h"

#define SENDER_BATCH 50
#define SENDER_ROUND_MS 200		/* a round past this ends at its next turn */
#define SENDER_IDLE_MS 10000
#define SENDER_PRUNE_MS 60000

PGDLLEXPORT void kwatch_sender_main(Datum main_arg);

/* The due applies of one round, picked in one transaction. */
typedef struct DueApplies
{
	int			n;
	int64		ids[SENDER_BATCH];
	int64		turns[SENDER_BATCH];	/* 1 = its role's first of the round, ... */
	long		next_ms;		/* until the next one falls due, or SENDER_IDLE_MS */
} DueApplies;

/*
 * pick_due: the pending applies that are due and first of their object, in
 * id order (at most SENDER_BATCH), and how long until the next one is due.
 */
static void
pick_due(void *arg)
{
	DueApplies *d = (DueApplies *) arg;

	d->n = 0;
	d->next_ms = SENDER_IDLE_MS;
	/*
	 * roles take turns: each role's first due apply, then each role's
	 * second, ...; the round ends at a turn's end once it has run for
	 * SENDER_ROUND_MS (kwatch_sender_main), so a role's slow server delays
	 * another role's next request by at most one request
	 */
	if (SPI_execute("SELECT x.id, x.turn FROM (SELECT q.id, pg_catalog.row_number() OVER (PARTITION BY q.role ORDER BY q.id) AS turn"
					" FROM kwatch.apply_queue q"
					" WHERE q.state = 'pending' AND q.next_attempt_at <= pg_catalog.now()"
					" AND NOT EXISTS (SELECT 1 FROM kwatch.apply_queue p WHERE p.state = 'pending'"
					"                 AND p.object_key = q.object_key AND p.id < q.id)) x"
					" ORDER BY x.turn, x.id LIMIT " CppAsString2(SENDER_BATCH), true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read kwatch.apply_queue");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;

		d->ids[d->n] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
		d->turns[d->n++] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
	}
	/*
	 * No row when nothing is pending: the sender then sleeps
	 * SENDER_IDLE_MS (GREATEST ignores a NULL: without the HAVING an empty
	 * queue's min() made it due at once, and the sender woke every 50 ms
	 * for nothing).  GREATEST with now() keeps a '-infinity' due time
	 * (kwatch.apply's "at once") out of the subtraction.
	 */
	if (SPI_execute("SELECT GREATEST(0, LEAST(" CppAsString2(SENDER_IDLE_MS) ", ceil(extract(epoch FROM GREATEST(min(q.next_attempt_at), pg_catalog.now()) - pg_catalog.now()) * 1000)))::int8"
					" FROM kwatch.apply_queue q WHERE q.state = 'pending'"
					" AND NOT EXISTS (SELECT 1 FROM kwatch.apply_queue p WHERE p.state = 'pending'"
					"                 AND p.object_key = q.object_key AND p.id < q.id)"
					" HAVING pg_catalog.count(*) > 0", true, 1) == SPI_OK_SELECT &&
		SPI_processed == 1)
	{
		bool		isnull;
		Datum		v = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		if (!isnull)
			d->next_ms = Max(50, (long) DatumGetInt64(v));
	}
}

/*
 * clean_text: `s` as valid text of the database's encoding: an API server's
 * words are stored as they came only when they are; else their bytes
 * outside ASCII become '?' (a row that cannot be written would be tried
 * again for ever).
 */
static char *
clean_text(const char *s)
{
	char	   *c;

	if (pg_verifymbstr(s, strlen(s), true))
		return (char *) s;
	c = pstrdup(s);
	for (char *p = c; *p; p++)
		if ((unsigned char) *p >= 0x80)
			*p = '?';
	return c;
}

/*
 * record: records the outcome of apply `id`; `state` 'applied' or 'failed'
 * or 'pending' (retry in retry_ms); `object` the JSON text of what the
 * server stored (shown_object), or NULL.
 */
static void
record(int64 id, const char *state, long http_status, const char *sqlstate,
	   const char *message, const char *detail, const char *rv, const char *uid,
	   long retry_ms, const char *object)
{
	Oid			types[10] = {INT8OID, TEXTOID, INT4OID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT8OID,
	TEXTOID};
	Datum		values[10];
	char		nulls[10];

	memset(nulls, ' ', sizeof(nulls));
	values[0] = Int64GetDatum(id);
	values[1] = CStringGetTextDatum(state);
	values[2] = Int32GetDatum((int32) http_status);
	if (http_status == 0)
		nulls[2] = 'n';
#define TEXT_OR_NULL(i, s) do { if (s) values[i] = CStringGetTextDatum(clean_text(s)); else nulls[i] = 'n'; } while (0)
	TEXT_OR_NULL(3, sqlstate);
	TEXT_OR_NULL(4, message);
	TEXT_OR_NULL(5, detail);
	TEXT_OR_NULL(6, rv);
	TEXT_OR_NULL(7, uid);
	values[8] = Int64GetDatum(retry_ms);
	if (object)
		values[9] = CStringGetTextDatum(object);
	else
		nulls[9] = 'n';
	if (SPI_execute_with_args("UPDATE kwatch.apply_queue SET state = $2, http_status = $3, sqlstate = $4,"
							  " message = $5, detail = $6, resource_version = $7, uid = $8,"
							  " attempts = attempts + 1,"
							  /* from the request's end, not the transaction's start
							   * (now()): a request that took longer than the backoff
							   * would be due again at once, every round */
							  " next_attempt_at = pg_catalog.clock_timestamp() + $9 * interval '1 millisecond',"
							  " finished_at = CASE WHEN $2 = 'pending' THEN NULL ELSE pg_catalog.now() END,"
							  " manifest = CASE WHEN $2 = 'pending' THEN manifest END,"
							  " object = $10::jsonb"
							  " WHERE id = $1",
							  10, types, values, nulls, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not record the outcome of apply " INT64_FORMAT, id);
	if (strcmp(state, "pending") != 0 &&
		SPI_execute_with_args("SELECT pg_catalog.pg_notify('kwatch_applies', $1::text)",
							  1, types, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not notify kwatch_applies");
}

/*
 * defer_server: the other pending applies of the same role to server
 * `server` wait at least `wait_ms` too, as apply `id` does after its
 * request could not reach the
 * server (refused, unresolved, or timed out after kwatch.apply_send_timeout):
 * a server that stalls costs the sender one request per backoff, not one
 * per apply and round, so it holds the other servers' applies for at most
 * kwatch.apply_send_timeout now and then (their roles' turns come between).
 */
static void
defer_server(const char *server, int64 id, long wait_ms)
{
	Oid			types[3] = {TEXTOID, INT8OID, INT8OID};
	Datum		values[3] = {CStringGetTextDatum(server), Int64GetDatum(id), Int64GetDatum(wait_ms)};

	/* the same role's only: one role's stalling requests (a webhook of its
	 * own, say) must not delay another role's applies to the server */
	if (SPI_execute_with_args("UPDATE kwatch.apply_queue SET next_attempt_at ="
							  " GREATEST(next_attempt_at, pg_catalog.clock_timestamp() + $3 * interval '1 millisecond')"
							  " WHERE state = 'pending' AND server = $1 AND id <> $2"
							  " AND role = (SELECT q.role FROM kwatch.apply_queue q WHERE q.id = $2)",
							  3, types, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not defer the applies to server %s", server);
}

/*
 * shown_object: the JSON text (palloc'd) of `obj`, the object of an apply's
 * 2xx answer, as kwatch.apply(at => 'now') returns it (functions/apply.c):
 * without metadata.managedFields (as mirror rows), and for a Secret
 * (`secret`) without data and stringData; modifies `obj`.  NULL when it is
 * no JSON object, or its text would not be valid jsonb in the database
 * (bytes invalid in its encoding, a \u0000 or lone surrogate escape, a
 * non-ASCII escape in another encoding than UTF-8): the outcome is then
 * recorded without it.
 */
static char *
shown_object(json_object *obj, bool secret)
{
	json_object *meta;
	char	   *copy;
	JsonLexContext *lex;
	JsonParseErrorType parsed;

	if (!json_object_is_type(obj, json_type_object))
		return NULL;
	if (json_object_object_get_ex(obj, "metadata", &meta) && json_object_is_type(meta, json_type_object))
		json_object_object_del(meta, "managedFields");
	if (secret)
	{
		json_object_object_del(obj, "data");
		json_object_object_del(obj, "stringData");
	}
	copy = pstrdup(json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	/*
	 * what jsonb input would refuse (its bytes in the database's encoding,
	 * then JSON with escapes jsonb can hold: no \u0000, no lone surrogate),
	 * checked without an ERROR, which would leave the outcome unrecorded
	 */
	if (!pg_verifymbstr(copy, strlen(copy), true))
		return NULL;
	lex = KW_MAKE_JSON_LEX_ESCAPES(copy, strlen(copy), GetDatabaseEncoding());
	parsed = pg_parse_json(lex, &nullSemAction);
	KW_FREE_JSON_LEX(lex);
	if (parsed != JSON_SUCCESS)
		return NULL;
	return copy;
}

/* backoff_ms: 0.5 s doubling per attempt, at most 30 s; Retry-After when given */
static long
backoff_ms(int attempts, int retry_after_s)
{
	long		ms = 500L << Min(attempts, 6);

	if (retry_after_s >= 0)
		return Min((long) retry_after_s * 1000L, 300000L);
	return Min(ms, 30000L);
}

/*
 * send_one: sends apply *(int64 *) arg when it is still pending (the row
 * read FOR UPDATE), and records the outcome; see the file header.
 */
static void
send_one(void *arg)
{
	int64		id = *(int64 *) arg;
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(id)};
	HeapTuple	row;
	TupleDesc	desc;
	char	   *server;
	Oid			role;
	char	   *api_version;
	char	   *resource;
	char	   *kind;
	char	   *namespace;
	char	   *name;
	char	   *field_manager;
	bool		force;
	char	   *manifest;
	bool		validated;
	bool		is_delete;
	char	   *delete_options;
	bool		past_deadline;
	int			attempts;
	bool		isnull;
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	KwHttpResponse resp;
	volatile bool withhold_values;	/* a Secret: the server's messages withheld (write.c) */
	ErrorData  *volatile caught = NULL;

	if (SPI_execute_with_args("SELECT server, role, api_version, resource, kind, namespace, name,"
							  " field_manager, force, manifest::text, validated,"
							  " pg_catalog.now() > deadline, attempts, message, verb, delete_options::text, role_name"
							  " FROM kwatch.apply_queue WHERE id = $1 AND state = 'pending' FOR UPDATE",
							  1, types, values, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read apply " INT64_FORMAT, id);
	if (SPI_processed == 0)
		return;
	row = SPI_copytuple(SPI_tuptable->vals[0]);
	desc = CreateTupleDescCopy(SPI_tuptable->tupdesc);
	server = SPI_getvalue(row, desc, 1);
	role = DatumGetObjectId(SPI_getbinval(row, desc, 2, &isnull));
	api_version = SPI_getvalue(row, desc, 3);
	resource = SPI_getvalue(row, desc, 4);
	kind = SPI_getvalue(row, desc, 5);
	namespace = SPI_getvalue(row, desc, 6);
	name = SPI_getvalue(row, desc, 7);
	field_manager = SPI_getvalue(row, desc, 8);
	force = DatumGetBool(SPI_getbinval(row, desc, 9, &isnull));
	manifest = SPI_getvalue(row, desc, 10);
	validated = DatumGetBool(SPI_getbinval(row, desc, 11, &isnull));
	past_deadline = DatumGetBool(SPI_getbinval(row, desc, 12, &isnull));
	attempts = DatumGetInt32(SPI_getbinval(row, desc, 13, &isnull));
	is_delete = strcmp(SPI_getvalue(row, desc, 15), "delete") == 0;
	delete_options = SPI_getvalue(row, desc, 16);
	/* the outcome of an apply may be lost in a crash (see the file header) */
	(void) set_config_option("synchronous_commit", is_delete ? "on" : "off", PGC_SUSET,
							 PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0, false);

	if (past_deadline)
	{
		char	   *last = SPI_getvalue(row, desc, 14);

		record(id, "failed", 0, "57014", "the apply was not sent before its deadline",
			   last ? psprintf("The last attempt: %s", last) : NULL, NULL, NULL, 0, NULL);
		return;
	}
	if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(role)) ||
		strcmp(GetUserNameFromId(role, false), SPI_getvalue(row, desc, 17)) != 0)
	{
		record(id, "failed", 0, "42501", "the role that made the apply no longer exists",
			   NULL, NULL, NULL, 0, NULL);
		return;
	}

	/* its server is gone (dropped, or renamed where kwatch was not loaded):
	 * failed, never retried, so that a server made later under the same
	 * name never receives it */
	if (GetForeignServerByName(server, true) == NULL)
	{
		record(id, "failed", 0, "42704", psprintf("server \"%s\" no longer exists", server),
			   NULL, NULL, NULL, 0, NULL);
		return;
	}

	/* the request, in a subtransaction: its ERROR is this apply's outcome */
	kw_http_sync_timeout_s = kw_apply_send_timeout_s;
	memset(&resp, 0, sizeof(resp));
	withhold_values = false;
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		ForeignServer *srv = GetForeignServerByName(server, false);
		KwClusterConfig *cfg;
		KwResource	r;
		char	   *path;

		if (kw_server_usage(srv->serverid, role) != ACLCHECK_OK)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("role \"%s\" no longer has USAGE on foreign server %s",
							GetUserNameFromId(role, false), server)));
		cfg = kw_cluster_config_for_server(server, role);
		if (resource == NULL)
		{
			if (!kw_discover_kind(cfg, api_version, kind, &r))
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_OBJECT),
						 errmsg("server \"%s\" serves no kind %s in %s", server, kind, api_version)));
			if (!r.namespaced)
				namespace = NULL;
			else if (namespace == NULL)
				namespace = cfg->default_namespace ? cfg->default_namespace : "default";
		}
		else
		{
			memset(&r, 0, sizeof(r));
			r.api_version = strchr(api_version, '/') ? strchr(api_version, '/') + 1 : api_version;
			r.api_group = strchr(api_version, '/') ? pnstrdup(api_version, strchr(api_version, '/') - api_version) : "";
			r.plural = resource;
			r.namespaced = namespace != NULL;
		}
		path = kw_write_path(&r, namespace, name);
		withhold_values = kw_is_secret_resource(r.api_group, r.plural);
		if (is_delete)
			kw_write_delete(cfg, path, delete_options, &resp);
		else
			kw_write_apply(cfg, path, manifest, field_manager, force, false, &resp);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		caught = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_END_TRY();

	if (caught != NULL)
	{
		int			code = caught->sqlerrcode;
		/* transport failures (kw_http_curl_sqlstate), and a deferred CRD's kind not served yet */
		bool		retry = ERRCODE_TO_CATEGORY(code) == ERRCODE_CONNECTION_EXCEPTION ||
			code == ERRCODE_FDW_UNABLE_TO_ESTABLISH_CONNECTION || code == ERRCODE_FDW_ERROR ||
			(!validated && code == ERRCODE_UNDEFINED_OBJECT);

		if (retry)
		{
			long		wait_ms = backoff_ms(attempts, -1);

			record(id, "pending", 0, unpack_sql_state(code), caught->message, caught->detail,
				   NULL, NULL, wait_ms, NULL);
			if (code == ERRCODE_FDW_UNABLE_TO_ESTABLISH_CONNECTION ||
				ERRCODE_TO_CATEGORY(code) == ERRCODE_CONNECTION_EXCEPTION)
				defer_server(server, id, wait_ms);
		}
		else
			record(id, "failed", 0, unpack_sql_state(code), caught->message, caught->detail,
				   NULL, NULL, 0, NULL);
		return;
	}
	{
		int			sqlstate;
		char	   *message;
		char	   *detail;
		bool		retry;

		if (kw_write_outcome(&resp, withhold_values, &sqlstate, &message, &detail, &retry))
		{
			json_object *obj = json_tokener_parse(resp.body.data);
			json_object *meta = NULL;
			const char *rv = NULL;
			const char *uid = NULL;

			char	   *shown = NULL;

			if (obj && json_object_object_get_ex(obj, "metadata", &meta))
			{
				rv = kw_json_get_string(meta, "resourceVersion");
				uid = kw_json_get_string(meta, "uid");
			}
			if (obj && !is_delete)
				shown = shown_object(obj, withhold_values);
			record(id, "applied", resp.status, NULL, NULL, NULL, rv ? pstrdup(rv) : NULL,
				   uid ? pstrdup(uid) : NULL, 0, shown);
			if (obj)
				json_object_put(obj);
			return;
		}
		/* a delete answered 404: the object is gone (an earlier attempt, or another client) */
		if (is_delete && resp.status == 404)
		{
			record(id, "applied", resp.status, NULL, NULL, NULL, NULL, NULL, 0, NULL);
			return;
		}
		/* a deferred apply whose namespace does not exist yet waits for it */
		if (!validated && resp.status == 404)
			retry = true;
		record(id, retry ? "pending" : "failed", resp.status, unpack_sql_state(sqlstate),
			   message, detail, NULL, NULL, retry ? backoff_ms(attempts, resp.retry_after_s) : 0, NULL);
	}
}

/* prune: finished applies older than a day go */
static void
prune(void *arg)
{
	if (SPI_execute("DELETE FROM kwatch.apply_queue WHERE state <> 'pending'"
					" AND finished_at < pg_catalog.now() - interval '1 day'", false, 0) != SPI_OK_DELETE)
		elog(ERROR, "could not prune kwatch.apply_queue");
}

/*
 * has_queue: whether this database has kwatch's apply queue: the extension
 * is installed and at the library's version (kw_schema_is_current; before
 * ALTER EXTENSION kwatch UPDATE the sender waits, as the worker does).
 */
static void
has_queue(void *arg)
{
	*(bool *) arg = OidIsValid(get_relname_relid("apply_queue", get_namespace_oid("kwatch", true))) &&
		kw_schema_is_current();
}

static void
sender_shutdown(int code, Datum arg)
{
	LWLockAcquire(kw_shared->lock, LW_EXCLUSIVE);
	if (kw_shared->sender_latch == MyLatch)
		kw_shared->sender_latch = NULL;
	LWLockRelease(kw_shared->lock);
}

/*
 * kwatch_sender_main: the request sender's entry point (bgw_function_name).
 * Waits until the kwatch worker has connected (so that kwatch.database
 * exists; the worker logs it when it does not), connects to the same
 * database, then sends due applies, woken by kw_wake_sender (a commit that
 * queued one) or its next due time, at least every 10 s.  Ends on SIGTERM
 * or postmaster death; the postmaster restarts it after 5 s if it fails.
 */
void
kwatch_sender_main(Datum main_arg)
{
	TimestampTz last_prune = 0;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	while (kw_shared->worker_pid == 0)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 1000,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	BackgroundWorkerInitializeConnection(kw_database, NULL, 0);
	pgstat_report_appname("kwatch request sender");
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_SESSION);
	SetConfigOption("lock_timeout", "5s", PGC_SUSET, PGC_S_SESSION);
	kw_http_keep_connections();
	before_shmem_exit(sender_shutdown, (Datum) 0);
	LWLockAcquire(kw_shared->lock, LW_EXCLUSIVE);
	kw_shared->sender_latch = MyLatch;
	LWLockRelease(kw_shared->lock);
	ereport(LOG, (errmsg("kwatch request sender started in database \"%s\"", kw_database)));

	for (;;)
	{
		DueApplies due;
		char	   *err = NULL;
		bool		here = false;
		long		wait_ms = SENDER_IDLE_MS;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		/*
		 * the outcomes of the last round are durable before this round
		 * sends: an object's next apply never goes out while a crash could
		 * still make its earlier one pending again (and sent after it)
		 */
		if (!XLogRecPtrIsInvalid(XactLastCommitEnd))
			XLogFlush(XactLastCommitEnd);
		(void) kw_run_in_transaction(has_queue, &here, NULL, NULL);
		if (here)
		{
			if (kw_run_in_transaction(pick_due, &due, &err, NULL))
			{
				TimestampTz round_start = GetCurrentTimestamp();

				for (int i = 0; i < due.n; i++)
				{
					CHECK_FOR_INTERRUPTS();
					/*
					 * a slow server must not hold back other roles for more
					 * than one request of each turn: past the round's budget,
					 * a new turn starts a new round (which picks again, and
					 * sees what was queued meanwhile)
					 */
					if (i > 0 && due.turns[i] != due.turns[i - 1] &&
						TimestampDifferenceExceeds(round_start, GetCurrentTimestamp(), SENDER_ROUND_MS))
						break;
					if (!kw_run_in_transaction(send_one, &due.ids[i], &err, NULL))
						ereport(LOG, (errmsg("kwatch request sender: apply " INT64_FORMAT ": %s",
											 due.ids[i], err)));
				}
				/* go round again at once while any was due */
				wait_ms = due.n > 0 ? 0 : due.next_ms;
			}
			else
				ereport(LOG, (errmsg("kwatch request sender: %s", err)));
			if (TimestampDifferenceExceeds(last_prune, GetCurrentTimestamp(), SENDER_PRUNE_MS))
			{
				(void) kw_run_in_transaction(prune, NULL, NULL, NULL);
				last_prune = GetCurrentTimestamp();
			}
		}
		if (wait_ms > 0)
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, wait_ms,
							 PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
		}
	}
}

