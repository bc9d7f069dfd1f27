/*-------------------------------------------------------------------------
 *
 * wait_current.c
 *		Read your own writes: waiting until a watch's mirror table
 *		reflects the API server as of now (kwatch.wait_current).
 *
 * After `kubectl apply`, a client that reads the mirror wants it to show
 * the cluster as of at least that moment.  client-go offers the same to a
 * controller (a reflector's LastSyncResourceVersion, an informer's
 * LastStoreSyncResourceVersion, compared with the resourceVersion a write
 * returned).  Here:
 *
 * 1. The server's current resourceVersion R for the watch's collection:
 *    one consistent read, GET <collection>?limit=1 with the watch's
 *    namespace and selectors and no resourceVersion (a quorum read: from
 *    etcd before Kubernetes 1.31, from the watch cache once it has caught
 *    up with etcd since, KEP-2340), asking for metadata only
 *    (PartialObjectMetadataList): about one object's metadata.
 * 2. Proof by checkpoint: the watch's committed resourceVersion (its
 *    status slot, published after the transaction that wrote the rows and
 *    the checkpoint committed; bookmarks advance it too) is >= R.
 *    resourceVersions are compared as Kubernetes 1.35 allows for one
 *    resource (PROTOCOL 28, apimachinery pkg/util/resourceversion
 *    CompareResourceVersion: decimal strings, the longer is greater, then
 *    character by character); they are etcd revisions in practice
 *    (apiserver storage/etcd3 stores ModRevision, APIObjectVersioner
 *    parses it as a uint64).  A resourceVersion that is not such a decimal
 *    string is never compared, and only step 3 can prove anything.
 * 3. Proof by comparison, for a collection that gets no events (its
 *    checkpoint stays below R until the next bookmark, about a minute):
 *    once the checkpoint has not moved for KW_WAIT_QUIET_MS, list the
 *    collection's metadata consistently (R' >= R; 500 a page) and compare
 *    uid -> resourceVersion with the table's rows of the watch (cluster =
 *    its server), read in a fresh snapshot as the caller.  Equal means the
 *    table holds exactly the server's objects at R': every change bumps
 *    an object's resourceVersion, a deletion removes its uid.  Not equal
 *    (events on their way) means wait; the comparison is made again only
 *    after the checkpoint moved and went quiet again.
 * 4. Otherwise sleep on the status condition variable, polling the slot
 *    every KW_WAIT_POLL_MS (the worker broadcasts on state changes only),
 *    until a proof holds or the timeout passes.
 *
 * Cost per call (step 1 always): 1 request of about 1 KB.  A collection
 * with events since R needs nothing more (step 2, usually within the
 * worker's apply latency).  An idle one adds the comparison: 1 + N/500
 * requests carrying N objects' metadata (managedFields included: about
 * 0.4 KB an object written by one client), and a read of N rows (uid,
 * resource_version): at 2,000 objects, 5-6 requests, 0.8-0.9 MB and
 * 0.25-0.28 s in all on the test servers (1.20 and 1.36).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/condition_variable.h"
#include "utils/acl.h"
#include "utils/array.h"
/* fmgrprotos.h declares a json_object() function: keep it out of json-c's way */
#define json_object pg_json_object_fn
#include "utils/builtins.h"
#include "utils/guc.h"
#undef json_object
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include <json-c/json.h>

#include "kw_common.h"
#include "kw_status.h"
#include "kw_cluster.h"
#include "kw_http.h"
#include "kw_apply.h"
#include "kw_as_owner.h"
#include "kw_functions.h"

/* How long the checkpoint must stay still before the comparison (step 3). */
#define KW_WAIT_QUIET_MS 200
/* How often the status slot is read while waiting (step 4). */
#define KW_WAIT_POLL_MS 20
/* Objects a page of the comparison's LIST asks for. */
#define KW_WAIT_PAGE 500

/* Metadata only (client-go metadata client); a server without it sends JSON. */
#define KW_ACCEPT_METADATA \
	"application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"

/* What one wait cost, for the DEBUG1 summary. */
typedef struct WaitCost
{
	int			requests;
	int64		bytes;
	int			comparisons;
} WaitCost;

/* A uid -> resourceVersion entry of the server's listing. */
typedef struct ServerObject
{
	char		uid[KW_UID_KEYLEN];
	char		rv[KW_RV_LEN];
} ServerObject;

/*
 * kw_rv_compare: compares resourceVersions `a` and `b` as Kubernetes
 * allows for one resource (apimachinery pkg/util/resourceversion
 * CompareResourceVersion, PROTOCOL 28): decimal strings without leading
 * zeros, the longer is greater, then the first differing character.
 * Returns -1, 0 or 1; -2 when either is not such a string.
 */
int
kw_rv_compare(const char *a, const char *b)
{
	size_t		la,
				lb;
	int			c;

	if (a == NULL || b == NULL)
		return -2;
	la = strlen(a);
	lb = strlen(b);
	if (la == 0 || lb == 0 || strspn(a, "0123456789") != la || strspn(b, "0123456789") != lb ||
		(la > 1 && a[0] == '0') || (lb > 1 && b[0] == '0'))
		return -2;
	if (la != lb)
		return la < lb ? -1 : 1;
	c = strcmp(a, b);
	return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

/* collection_path: the watch's collection, with its namespace and selectors. */
static StringInfo
collection_path(KwRegistration *reg, int limit)
{
	StringInfo	path = makeStringInfo();

	if (reg->api_group[0] == '\0')
		appendStringInfo(path, "/api/%s", reg->api_version);
	else
		appendStringInfo(path, "/apis/%s/%s", reg->api_group, reg->api_version);
	if (reg->namespace)
		appendStringInfo(path, "/namespaces/%s", reg->namespace);
	appendStringInfo(path, "/%s", reg->plural);
	kw_url_append_param(path, "limit", psprintf("%d", limit));
	if (reg->label_selector)
		kw_url_append_param(path, "labelSelector", reg->label_selector);
	if (reg->field_selector)
		kw_url_append_param(path, "fieldSelector", reg->field_selector);
	return path;
}

/*
 * get_page: GET `path` (metadata only) into *resp, counted in `cost` and
 * logged at DEBUG2 ("kwatch: wait_current GET <path>"; the tests count
 * them).  Returns the parsed body of a 200 (free with json_object_put);
 * NULL for a 410 when `gone_ok` (an expired continue token); ERRORs with
 * the mapped SQLSTATE for any other status (kw_http_raise_status: 403 is
 * 42501 when the caller's credentials may not list it), 22032 for a body
 * that is not JSON.
 */
static json_object *
get_page(KwClusterConfig *cfg, const char *path, bool gone_ok, WaitCost *cost)
{
	KwHttpResponse resp;
	json_object *obj;

	kw_http_get_accept(cfg, path, KW_ACCEPT_METADATA, &resp);
	cost->requests++;
	cost->bytes += resp.body.len;
	elog(DEBUG2, "kwatch: wait_current GET %s: HTTP %ld, %d bytes", path, resp.status, resp.body.len);
	if (resp.status == 410 && gone_ok)
		return NULL;
	if (resp.status != 200)
		kw_http_raise_status(cfg, "the consistent read of kwatch.wait_current()", &resp);
	obj = json_tokener_parse(resp.body.data);
	if (obj == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_JSON_TEXT),
				 errmsg("the list from server \"%s\" is not valid JSON", cfg->server_name)));
	return obj;
}

/* list_meta: the list's metadata.<key> (palloc'd), or NULL. */
static char *
list_meta(json_object *list, const char *key)
{
	json_object *meta;
	const char *s;

	if (!json_object_object_get_ex(list, "metadata", &meta))
		return NULL;
	s = kw_json_get_string(meta, key);
	return (s && s[0]) ? pstrdup(s) : NULL;
}

/*
 * current_rv: step 1, the server's current resourceVersion for the
 * watch's collection (a consistent LIST, limit=1).  ERRORs as get_page,
 * and 22023 when the list carries no resourceVersion.
 */
static char *
current_rv(KwClusterConfig *cfg, KwRegistration *reg, WaitCost *cost)
{
	json_object *volatile list = NULL;
	char	   *rv = NULL;

	PG_TRY();
	{
		list = get_page(cfg, collection_path(reg, 1)->data, false, cost);
		rv = list_meta(list, "resourceVersion");
	}
	PG_FINALLY();
	{
		if (list)
			json_object_put(list);
	}
	PG_END_TRY();
	if (rv == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the list of %s from server \"%s\" has no resourceVersion",
						reg->plural, cfg->server_name)));
	return rv;
}

/*
 * server_objects: lists the collection's metadata consistently, page by
 * page, into a uid -> resourceVersion table; *rv gets the list's
 * resourceVersion.  NULL when the listing cannot be had whole (a continue
 * token expired: 410; a uid too long for a mirror row's key).  ERRORs as
 * get_page.
 */
static HTAB *
server_objects(KwClusterConfig *cfg, KwRegistration *reg, char **rv, WaitCost *cost)
{
	HASHCTL		ctl;
	HTAB	   *objs;
	char	   *token = NULL;
	volatile bool whole = true;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = KW_UID_KEYLEN;
	ctl.entrysize = sizeof(ServerObject);
	ctl.hcxt = CurrentMemoryContext;
	objs = hash_create("kwatch wait_current objects", 1024, &ctl,
					   HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	*rv = NULL;
	do
	{
		StringInfo	path = collection_path(reg, KW_WAIT_PAGE);
		json_object *volatile page = NULL;

		if (token)
			kw_url_append_param(path, "continue", token);
		PG_TRY();
		{
			json_object *items;

			page = get_page(cfg, path->data, token != NULL, cost);
			if (page == NULL)
				whole = false;
			else
			{
				if (*rv == NULL)
					*rv = list_meta(page, "resourceVersion");
				token = list_meta(page, "continue");
				if (json_object_object_get_ex(page, "items", &items) &&
					json_object_is_type(items, json_type_array))
				{
					for (size_t i = 0; whole && i < json_object_array_length(items); i++)
					{
						json_object *meta;
						const char *uid = NULL,
								   *orv = NULL;
						ServerObject *e;

						if (json_object_object_get_ex(json_object_array_get_idx(items, i),
													  "metadata", &meta))
						{
							uid = kw_json_get_string(meta, "uid");
							orv = kw_json_get_string(meta, "resourceVersion");
						}
						if (uid == NULL || orv == NULL || strlen(uid) >= KW_UID_KEYLEN ||
							strlen(orv) >= KW_RV_LEN)
						{
							whole = false;
							break;
						}
						e = hash_search(objs, uid, HASH_ENTER, NULL);
						strlcpy(e->rv, orv, KW_RV_LEN);
					}
				}
			}
		}
		PG_FINALLY();
		{
			if (page)
				json_object_put(page);
		}
		PG_END_TRY();
	} while (whole && token != NULL);
	if (!whole || *rv == NULL)
		return NULL;
	return objs;
}

/*
 * mirror_table_shaped: whether relation `relid` is a table (plain or
 * partitioned) with kwatch's text columns cluster, uid and
 * resource_version, as the worker writes them (sync.c table_owner): a
 * view, a foreign table or a column of its owner's type is never read.
 */
static bool
mirror_table_shaped(Oid relid)
{
	static const char *const cols[] = {"cluster", "uid", "resource_version"};
	char		kind = get_rel_relkind(relid);

	if (kind != RELKIND_RELATION && kind != RELKIND_PARTITIONED_TABLE)
		return false;
	for (int i = 0; i < lengthof(cols); i++)
	{
		AttrNumber	att = get_attnum(relid, cols[i]);

		if (att == InvalidAttrNumber || get_atttype(relid, att) != TEXTOID)
			return false;
	}
	return true;
}

/*
 * table_matches: whether the mirror table's rows of the watch (cluster =
 * its server) are exactly `objs` (uid and resourceVersion).  The caller
 * may SELECT from the table (checked by the caller), but the rows are read
 * as the table's owner, under SECURITY_RESTRICTED_OPERATION with
 * search_path pinned, from that table ONLY, after its shape is checked
 * (mirror_table_shaped): whatever code of the owner's the read may run (a
 * policy, a child table) runs with the owner's rights, never the
 * caller's (README "Roles").  Deferred triggers of the caller's fire first
 * (as_owner.c, "Deferred triggers"), so the caller's transaction is left
 * with its constraints IMMEDIATE.  Connects SPI itself.
 */
static bool
table_matches(KwRegistration *reg, HTAB *objs)
{
	Oid			argtype = TEXTOID;
	Datum		arg = CStringGetTextDatum(reg->server);
	Oid			nsp = get_namespace_oid("k8s", true);
	Oid			relid = OidIsValid(nsp) ? get_relname_relid(reg->table_name, nsp) : InvalidOid;
	KwAsOwner	as_owner = {0};
	bool		equal;
	int			rc;

	if (!OidIsValid(relid) || !mirror_table_shaped(relid))
		return false;
	SPI_connect();
	kw_fire_deferred_triggers();
	kw_as_owner_begin(kw_rel_owner(relid), &as_owner);
	/* not read_only: a fresh snapshot, so rows committed since the call began count */
	rc = SPI_execute_with_args(psprintf("SELECT uid, resource_version FROM ONLY k8s.%s"
										" WHERE cluster OPERATOR(pg_catalog.=) $1",
										quote_identifier(reg->table_name)),
							   1, &argtype, &arg, NULL, false, 0);
	kw_as_owner_end(&as_owner);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not read k8s.%s: %s", reg->table_name, SPI_result_code_string(rc));
	equal = (SPI_processed == (uint64) hash_get_num_entries(objs));
	for (uint64 i = 0; equal && i < SPI_processed; i++)
	{
		char	   *uid = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		char	   *rv = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2);
		ServerObject *e;

		if (uid == NULL || rv == NULL || strlen(uid) >= KW_UID_KEYLEN)
			equal = false;
		else
		{
			e = hash_search(objs, uid, HASH_FIND, NULL);
			equal = (e != NULL && strcmp(e->rv, rv) == 0);
		}
	}
	SPI_finish();
	return equal;
}

/*
 * compare_now: step 3.  Returns the server's resourceVersion R' at which
 * the table equals the server, or NULL when it does not (yet).
 */
static char *
compare_now(KwClusterConfig *cfg, KwRegistration *reg, WaitCost *cost)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "kwatch wait_current",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	char	   *rv;
	HTAB	   *objs;
	char	   *result = NULL;

	cost->comparisons++;
	objs = server_objects(cfg, reg, &rv, cost);
	if (objs && table_matches(reg, objs))
		result = MemoryContextStrdup(old, rv);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	return result;
}

/* elapsed_ms: milliseconds since `start`. */
static int64
elapsed_ms(TimestampTz start)
{
	long		secs;
	int			usecs;

	TimestampDifference(start, GetCurrentTimestamp(), &secs, &usecs);
	return (int64) secs * 1000 + usecs / 1000;
}

/*
 * wait_one: steps 2-4 for watch `reg` and the server's resourceVersion
 * `target`.  Returns the resourceVersion proven (target, or the
 * comparison's R' >= target), with *how "checkpoint" or "comparison".
 * ERRORs: 55000 when the watch is failed,
 * 57014 when `timeout_ms` (>= 0) passes first.
 */
static char *
wait_one(KwClusterConfig *cfg, KwRegistration *reg, const char *label,
		 const char *target, bool can_compare, int64 timeout_ms,
		 TimestampTz start, WaitCost *cost, const char **how)
{
	char		seen[KW_RV_LEN] = "";
	char		compared[KW_RV_LEN] = "";
	bool		have_compared = false;
	TimestampTz seen_since = GetCurrentTimestamp();

	for (;;)
	{
		KwWatchStatus *slot = NULL;
		bool		found = false;
		bool		failed = false;
		char		rv[KW_RV_LEN] = "";
		char		last_error[KW_ERROR_LEN] = "";
		long		sleep_ms = KW_WAIT_POLL_MS;

		LWLockAcquire(kw_shared->lock, LW_SHARED);
		for (int i = 0; i < kw_shared->nslots && !found; i++)
			if (kw_shared->slots[i].watch_id == reg->id)
			{
				slot = &kw_shared->slots[i];
				found = true;
				failed = (slot->state == KW_STATE_FAILED);
				strlcpy(rv, slot->resource_version, sizeof(rv));
				strlcpy(last_error, slot->last_error, sizeof(last_error));
			}
		LWLockRelease(kw_shared->lock);

		if (failed)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("watch of %s failed", label),
					 last_error[0] ? errdetail("%s", last_error) : 0,
					 errhint("See kwatch.watches for its state; the worker keeps retrying.")));
		/* step 2: the checkpoint */
		if (found && kw_rv_compare(rv, target) >= 0)
		{
			*how = "checkpoint";
			return pstrdup(target);
		}
		if (strcmp(rv, seen) != 0)
		{
			strlcpy(seen, rv, sizeof(seen));
			seen_since = GetCurrentTimestamp();
		}
		/* step 3: the comparison, once per quiet checkpoint */
		if (found && can_compare && rv[0] &&
			(!have_compared || strcmp(compared, rv) != 0) &&
			TimestampDifferenceExceeds(seen_since, GetCurrentTimestamp(), KW_WAIT_QUIET_MS))
		{
			char	   *proven;

			strlcpy(compared, rv, sizeof(compared));
			have_compared = true;
			proven = compare_now(cfg, reg, cost);
			if (proven)
			{
				*how = "comparison";
				return proven;
			}
		}
		if (timeout_ms >= 0)
		{
			int64		ms = elapsed_ms(start);

			if (ms >= timeout_ms)
				ereport(ERROR,
						(errcode(ERRCODE_QUERY_CANCELED),
						 errmsg("timed out after " INT64_FORMAT " ms waiting for the watch of %s to reflect resourceVersion %s",
								timeout_ms, label, target),
						 errdetail("The watch's checkpoint is %s.", seen[0] ? seen : "not set yet"),
						 errhint("See kwatch.watches for its state.")));
			sleep_ms = Min(sleep_ms, timeout_ms - ms);
		}
		/* step 4: woken early by a state change (the worker's broadcast) */
		ConditionVariablePrepareToSleep(&kw_shared->sync_cv);
		(void) ConditionVariableTimedSleep(&kw_shared->sync_cv, Max(sleep_ms, 1),
										   PG_WAIT_EXTENSION);
		ConditionVariableCancelSleep();
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * read_registration: watch `id`'s registration, read with the rights of
 * the bootstrap superuser (kwatch.registrations is not readable by PUBLIC)
 * by a fixed query over kwatch's own table; the caller has already been
 * shown the watch by kwatch.watches.  NULL when it is gone.  The query's
 * operators and functions are resolved with search_path pinned to
 * pg_catalog, pg_temp (pg_temp is never searched for operators or
 * functions), under SECURITY_RESTRICTED_OPERATION: a caller's schema can
 * put nothing of its own in the superuser's way (as a SECURITY DEFINER
 * function with SET search_path).
 */
static KwRegistration *
read_registration(int32 id)
{
	Oid			save_userid;
	int			save_sec_context;
	int			save_nestlevel;
	List	   *regs;
	MemoryContext outer = CurrentMemoryContext;

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID, save_sec_context |
						   SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	save_nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
							 true, 0, false);
	PG_TRY();
	{
		SPI_connect();
		regs = kw_registrations_read(id, outer);
		SPI_finish();
	}
	PG_FINALLY();
	{
		AtEOXact_GUC(false, save_nestlevel);
		SetUserIdAndSecContext(save_userid, save_sec_context);
	}
	PG_END_TRY();
	return regs ? (KwRegistration *) linitial(regs) : NULL;
}

/*
 * visible_label: "<resource> on server "<server>"" for watch `id` as
 * kwatch.watches shows it to the current user; ERRORs 42704 when it does
 * not (the wait would tell its state to someone who may not see it).
 */
static char *
visible_label(int32 id)
{
	Oid			argtype = INT4OID;
	Datum		arg = Int32GetDatum(id);
	char	   *label = NULL;
	MemoryContext outer = CurrentMemoryContext;

	SPI_connect();
	if (SPI_execute_with_args("SELECT pg_catalog.format('%s on server \"%s\"', w.resource, w.server)"
							  " FROM kwatch.watches w WHERE w.id OPERATOR(pg_catalog.=) $1",
							  1, &argtype, &arg, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read kwatch.watches");
	if (SPI_processed == 1)
		label = MemoryContextStrdup(outer, SPI_getvalue(SPI_tuptable->vals[0],
														SPI_tuptable->tupdesc, 1));
	SPI_finish();
	if (label == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("no watch %d", id),
				 errhint("kwatch.watches lists the watches you may see.")));
	return label;
}

PG_FUNCTION_INFO_V1(kwatch_wait_current);

/*
 * kwatch_wait_current: SQL kwatch._wait_current(ids int[], timeout
 * interval) -> text.  For each watch ids[i] in turn: reads the server's
 * current resourceVersion R of its collection (with the current user's
 * credentials for its server) and returns once the mirror table provably
 * reflects at least R (steps 1-4 above).  Returns the resourceVersion
 * proven for the last watch (R, or the comparison's R' >= R): the
 * highest, since each read is later.  timeout NULL waits until
 * statement_timeout or cancel; the timeout covers all the watches.
 *
 * Rights: only watches kwatch.watches shows the current user (42704
 * otherwise); USAGE on the watch's server (42501 otherwise, as
 * kwatch.watch() requires) and that user's credentials for it (user
 * mapping or kubeconfig: what it may list is what the API server lets it);
 * the comparison needs no right on the table: it reads the table as its
 * owner (table_matches) and tells the caller only whether the rows equal
 * the objects the caller's own credentials just listed (which it may see
 * anyway), so a caller without SELECT is not left waiting for the next
 * event or bookmark of an idle collection.  ERRORs: 42501
 * also inside a security-restricted operation (a trigger the worker fires
 * would wait on the worker itself); 25000 in a REPEATABLE READ or
 * SERIALIZABLE transaction (its snapshot would not show the rows
 * waited for); 55000 kwatch not preloaded, a hot standby, the watch
 * registered by the current transaction (at once), or the watch failed
 * (DETAIL: its last error); 57014 timeout; 22004 null arguments;
 * the API server's refusals mapped as kw_http_raise_status does.
 * Refuses (55000) an extension not at the library's version first
 * (kw_check_schema_version).
 */
Datum
kwatch_wait_current(PG_FUNCTION_ARGS)
{
	ArrayType  *ids;
	Datum	   *idv;
	bool	   *idnull;
	int			n;
	int64		timeout_ms = kw_timeout_ms(fcinfo, 1);
	TimestampTz start = GetCurrentTimestamp();
	char	   *result = NULL;

	kw_check_schema_version();
	if (InSecurityRestrictedOperation())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("kwatch.wait_current() cannot run inside a security-restricted operation")));
	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("kwatch.wait_current() needs READ COMMITTED"),
				 errdetail("A REPEATABLE READ or SERIALIZABLE transaction keeps the snapshot of its first query, which would not show the rows waited for."),
				 errhint("Call it in a READ COMMITTED transaction, or before this transaction begins.")));
	kw_require_worker_state();
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("ids must not be null")));
	ids = PG_GETARG_ARRAYTYPE_P(0);
	deconstruct_array(ids, INT4OID, 4, true, TYPALIGN_INT, &idv, &idnull, &n);
	for (int i = 0; i < n; i++)
	{
		int32		id;
		char	   *label;
		KwRegistration *reg;
		ForeignServer *fs;
		AclResult	acl;
		KwClusterConfig *cfg;
		char	   *target;
		bool		can_compare;
		Oid			nsp,
					relid;
		WaitCost	cost = {0};
		const char *how = NULL;
		TimestampTz began = GetCurrentTimestamp();

		if (idnull[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("ids must not contain nulls")));
		id = DatumGetInt32(idv[i]);
		label = visible_label(id);
		kw_refuse_uncommitted(&id, &label, 1, "kwatch.wait_current()");
		reg = read_registration(id);
		if (reg == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("no watch %d", id)));
		fs = GetForeignServerByName(reg->server, false);
		acl = kw_server_usage(fs->serverid, GetUserId());
		if (acl != ACLCHECK_OK)
			aclcheck_error(acl, OBJECT_FOREIGN_SERVER, fs->servername);
		cfg = kw_cluster_config_for_server(reg->server, GetUserId());

		nsp = get_namespace_oid("k8s", true);
		relid = OidIsValid(nsp) ? get_relname_relid(reg->table_name, nsp) : InvalidOid;
		can_compare = OidIsValid(relid);

		target = current_rv(cfg, reg, &cost);
		result = wait_one(cfg, reg, label, target, can_compare, timeout_ms, start, &cost, &how);
		elog(DEBUG1, "kwatch: wait_current: %s reflects resourceVersion %s (server's %s) by %s"
			 " after %ld ms, %d requests, " INT64_FORMAT " bytes, %d comparisons",
			 label, result, target, how, (long) elapsed_ms(began), cost.requests, cost.bytes,
			 cost.comparisons);
	}
	if (result == NULL)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(result));
}
