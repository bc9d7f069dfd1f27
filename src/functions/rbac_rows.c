/*-------------------------------------------------------------------------
 *
 * rbac_rows.c
 *		Rows that follow Kubernetes RBAC: kwatch.rbac_visible(), the
 *		decision behind the row-level security policy that
 *		kwatch.enable_rbac_rows() puts on a mirror table
 *		(sql/schema/functions/rbac_rows.sql; doc/security.md, "Rows that
 *		follow RBAC").
 *
 * A row of cluster C and namespace N is visible to the role reading
 * (GetUserId()) when that role's own Kubernetes identity on C may `list`
 * the table's resource in N, as the API server answers a
 * SelfSubjectAccessReview made with the role's own credentials (its user
 * mapping, else the server's PUBLIC mapping: kw_cluster_config_for_server;
 * staging/src/k8s.io/api/authorization/v1/types.go,
 * SelfSubjectAccessReviewSpec.resourceAttributes, status.allowed;
 * pkg/registry/authorization/selfsubjectaccessreview/rest.go answers it
 * for the requesting user with the authorizer chain, webhooks and
 * aggregated ClusterRoles included).  First one review without a
 * namespace (may the identity list the resource cluster-wide, as `kubectl
 * get -A` needs): allowed means every row of C; else one review per
 * namespace the query meets, at first sight.  A cluster-scoped object
 * (namespace NULL or '') needs the cluster-wide answer.  Only a server that
 * a watch of the table names decides (server_writes_table): the history
 * rows of a server no longer watched are the owner's alone.
 *
 * Caches:
 *	 - per query (fn_extra, in the query's memory): (cluster, namespace) ->
 *	   bool, so that a row costs one hash probe once its namespace was seen;
 *	 - per backend: (role, server, group, resource, namespace) -> (allowed,
 *	   decided_at, stamp), used while younger than
 *	   kwatch.rbac_decision_max_age and while the server's RBAC stamp is
 *	   the one it was decided under.  The stamp sums the change counters of
 *	   the status slots (kw_status.h) of the watches of roles, rolebindings,
 *	   clusterroles and clusterrolebindings (rbac.authorization.k8s.io) of
 *	   that server, read once per query and server: when one of those
 *	   mirrors takes an event, every decision of the server is made again.
 *	   Only answers are cached; a failure is not.
 *
 * Fail closed: any failure (no usable user mapping, the API server
 * unreachable, an answer that is no review) means "not visible".  The
 * function is LEAKPROOF: it raises no error and emits no message that
 * depends on a row's values; the failures of a query are told by one
 * WARNING per server at most, which names the server and the role, never
 * a namespace.  Errors of the requests are caught in a subtransaction
 * (PL/pgSQL's exception blocks' way, src/pl/plpgsql/src/pl_exec.c exec_stmt_block), which
 * PostgreSQL does not allow in parallel mode (access/transam/xact.c,
 * BeginInternalSubTransaction), hence PARALLEL UNSAFE.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "foreign/foreign.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lwlock.h"
/* fmgrprotos.h declares a json_object() function: keep it out of json-c's way */
#define json_object pg_json_object_fn
#include "utils/builtins.h"
#undef json_object
#include "common/hashfn.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include <json-c/json.h>

#include "kw_common.h"
#include "kw_status.h"
#include "kw_cluster.h"
#include "kw_http.h"

#define RBAC_GROUP "rbac.authorization.k8s.io"

/* Key of the backend's decisions: who, where, what, in which namespace. */
typedef struct DecisionKey
{
	Oid			userid;
	Oid			serverid;
	char		what[512];		/* group "/" resource "/" namespace */
} DecisionKey;

typedef struct Decision
{
	DecisionKey key;			/* hash key (must be first) */
	bool		allowed;
	TimestampTz decided_at;
	uint64		stamp;
} Decision;

static HTAB *decisions = NULL;

/* The watches of RBAC objects, per server (re-read when registrations change). */
typedef struct RbacWatch
{
	int32		id;
	char		server[NAMEDATALEN];
} RbacWatch;

static RbacWatch *rbac_watches = NULL;
static int	n_rbac_watches = 0;
static uint64 rbac_watches_generation = 0;

/* Per query: (cluster, namespace) -> visible; and what is known of a server. */
typedef struct RowKey
{
	char		cluster[NAMEDATALEN];
	char		namespace[NAMEDATALEN + 1];
} RowKey;

typedef struct RowDecision
{
	RowKey		key;
	bool		visible;
} RowDecision;

typedef struct QueryServer
{
	char		cluster[NAMEDATALEN];	/* hash key */
	bool		usable;			/* a kwatch server (else nothing is visible) */
	Oid			serverid;
	uint64		stamp;
	bool		warned;
	bool		failed;			/* a review failed: no more rows of it */
} QueryServer;

typedef struct QueryState
{
	Oid			tbl;
	Oid			mirror;			/* tbl, or the mirror table whose history tbl is */
	bool		known;			/* that is a mirror table of kwatch.tables */
	char	   *group;
	char	   *resource;
	HTAB	   *rows;
	HTAB	   *servers;
	/* the last row's answer: a mirror's rows come in namespace runs */
	bool		last_valid;
	bool		last_visible;
	int			last_clen;
	int			last_nlen;
	RowKey		last;
} QueryState;

/*
 * rowkey_hash: dynahash's hash of a RowKey over the bytes it holds (not its
 * zero padding), so that a probe costs hashing a short name or two.
 */
static uint32
rowkey_hash(const void *key, Size keysize)
{
	const RowKey *k = (const RowKey *) key;

	return hash_combine(hash_bytes((const unsigned char *) k->cluster, strlen(k->cluster)),
						hash_bytes((const unsigned char *) k->namespace, strlen(k->namespace)));
}

static void table_resource(QueryState *qs, Oid tbl);
static bool mirror_resource(QueryState *qs, Oid relid);
static uint64 server_stamp(const char *server);
static bool server_writes_table(const char *server, Oid tbl);
static QueryServer *query_server(QueryState *qs, const char *cluster);
static bool decide(QueryState *qs, QueryServer *srv, const char *cluster,
				   const char *namespace);
static int	review(const char *cluster, const char *group, const char *resource,
				   const char *namespace, char **failure);

PG_FUNCTION_INFO_V1(kwatch_rbac_visible);

/*
 * kwatch_rbac_visible
 *		kwatch.rbac_visible(tbl regclass, cluster text, namespace text)
 *		RETURNS boolean: whether the current role (GetUserId()) may read a
 *		row of mirror table tbl (or of the mirror table whose history table
 *		tbl is) of that cluster and namespace, per the file header.
 *
 * Never raises an error: NULL tbl or cluster, a table that is no mirror
 * of kwatch.tables, a cluster that is no kwatch server, a failed review:
 * false.  STABLE within a query (the per-query cache), LEAKPROOF.
 */
Datum
kwatch_rbac_visible(PG_FUNCTION_ARGS)
{
	QueryState *qs = (QueryState *) fcinfo->flinfo->fn_extra;
	text	   *cluster_t;
	RowKey		key;
	RowDecision *row;
	QueryServer *srv;
	bool		found;
	int			clen;
	int			nlen = 0;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_BOOL(false);
	cluster_t = PG_GETARG_TEXT_PP(1);
	clen = VARSIZE_ANY_EXHDR(cluster_t);
	if (!PG_ARGISNULL(2))
		nlen = VARSIZE_ANY_EXHDR(PG_GETARG_TEXT_PP(2));
	/* server names are names; namespaces DNS labels (63 bytes) */
	if (clen == 0 || clen >= NAMEDATALEN || nlen > NAMEDATALEN)
		PG_RETURN_BOOL(false);

	if (qs == NULL || qs->tbl != PG_GETARG_OID(0))
	{
		MemoryContext old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
		HASHCTL		ctl;

		qs = palloc0(sizeof(QueryState));
		ctl.keysize = sizeof(RowKey);
		ctl.entrysize = sizeof(RowDecision);
		ctl.hcxt = fcinfo->flinfo->fn_mcxt;
		ctl.hash = rowkey_hash;
		qs->rows = hash_create("kwatch rbac rows", 64, &ctl,
							   HASH_ELEM | HASH_FUNCTION | HASH_CONTEXT);
		ctl.keysize = NAMEDATALEN;
		ctl.entrysize = sizeof(QueryServer);
		qs->servers = hash_create("kwatch rbac servers", 8, &ctl,
								  HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
		table_resource(qs, PG_GETARG_OID(0));
		MemoryContextSwitchTo(old);
		fcinfo->flinfo->fn_extra = qs;
	}
	if (!qs->known)
		PG_RETURN_BOOL(false);

	if (qs->last_valid && qs->last_clen == clen && qs->last_nlen == nlen &&
		memcmp(qs->last.cluster, VARDATA_ANY(cluster_t), clen) == 0 &&
		(nlen == 0 || memcmp(qs->last.namespace, VARDATA_ANY(PG_GETARG_TEXT_PP(2)), nlen) == 0))
		PG_RETURN_BOOL(qs->last_visible);

	memset(&key, 0, sizeof(key));
	memcpy(key.cluster, VARDATA_ANY(cluster_t), clen);
	if (nlen > 0)
		memcpy(key.namespace, VARDATA_ANY(PG_GETARG_TEXT_PP(2)), nlen);
	row = hash_search(qs->rows, &key, HASH_FIND, NULL);
	if (row == NULL)
	{
		bool		visible;

		srv = query_server(qs, key.cluster);
		visible = srv->usable &&
			decide(qs, srv, key.cluster, nlen > 0 ? key.namespace : NULL);
		row = hash_search(qs->rows, &key, HASH_ENTER, &found);
		row->visible = visible;
	}
	qs->last = key;
	qs->last_clen = clen;
	qs->last_nlen = nlen;
	qs->last_visible = row->visible;
	qs->last_valid = true;
	PG_RETURN_BOOL(row->visible);
}

/*
 * table_resource: the API group and resource (plural) of mirror table tbl,
 * or of the mirror table whose history table tbl is (kwatch.history_tables,
 * by name: the policy on a history table names that table itself, so that
 * it depends on nothing else and a dump restores it by name), from
 * kwatch.tables (readable by everyone), into qs (in the current memory
 * context); qs->known false when tbl is neither.
 */
static void
table_resource(QueryState *qs, Oid tbl)
{
	Oid			nsp = get_namespace_oid("kwatch", true);
	Oid			k8s = get_namespace_oid("k8s", true);
	Oid			relid = OidIsValid(nsp) ? get_relname_relid("history_tables", nsp) : InvalidOid;
	char	   *relname;
	Relation	rel;
	Snapshot	snap;
	TableScanDesc scan;
	HeapTuple	tup;
	AttrNumber	a_table,
				a_history;
	Oid			mirror = InvalidOid;

	qs->tbl = tbl;
	qs->mirror = InvalidOid;
	qs->known = false;
	if (mirror_resource(qs, tbl))
		return;
	relname = get_rel_name(tbl);
	if (!OidIsValid(relid) || !OidIsValid(k8s) || relname == NULL ||
		get_rel_namespace(tbl) != k8s)
		return;
	rel = table_open(relid, AccessShareLock);
	a_table = get_attnum(relid, "table_name");
	a_history = get_attnum(relid, "history_table");
	snap = RegisterSnapshot(GetLatestSnapshot());	/* whatever the caller's state */
	scan = table_beginscan(rel, snap, 0, NULL);
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		bool		isnull;
		Datum		d = heap_getattr(tup, a_history, RelationGetDescr(rel), &isnull);

		if (isnull || strcmp(TextDatumGetCString(d), relname) != 0)
			continue;
		d = heap_getattr(tup, a_table, RelationGetDescr(rel), &isnull);
		if (!isnull)
			mirror = get_relname_relid(TextDatumGetCString(d), k8s);
		break;
	}
	table_endscan(scan);
	UnregisterSnapshot(snap);
	table_close(rel, AccessShareLock);
	if (OidIsValid(mirror))
		(void) mirror_resource(qs, mirror);
}

/*
 * mirror_resource: table_resource's lookup of relid in kwatch.tables;
 * true (qs->known, qs->mirror, group and resource set) when it is there.
 */
static bool
mirror_resource(QueryState *qs, Oid tbl)
{
	Oid			nsp = get_namespace_oid("kwatch", true);
	Oid			relid = OidIsValid(nsp) ? get_relname_relid("tables", nsp) : InvalidOid;
	Relation	rel;
	Snapshot	snap;
	TableScanDesc scan;
	HeapTuple	tup;
	AttrNumber	a_relid,
				a_group,
				a_plural;

	if (!OidIsValid(relid))
		return false;
	rel = table_open(relid, AccessShareLock);
	a_relid = get_attnum(relid, "relid");
	a_group = get_attnum(relid, "api_group");
	a_plural = get_attnum(relid, "plural");
	snap = RegisterSnapshot(GetLatestSnapshot());	/* whatever the caller's state */
	scan = table_beginscan(rel, snap, 0, NULL);
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		bool		isnull;
		Datum		d = heap_getattr(tup, a_relid, RelationGetDescr(rel), &isnull);

		if (isnull || DatumGetObjectId(d) != tbl)
			continue;
		d = heap_getattr(tup, a_group, RelationGetDescr(rel), &isnull);
		if (isnull)
			continue;
		qs->group = TextDatumGetCString(d);
		d = heap_getattr(tup, a_plural, RelationGetDescr(rel), &isnull);
		if (isnull)
			continue;
		qs->resource = TextDatumGetCString(d);
		qs->mirror = tbl;
		qs->known = true;
		break;
	}
	table_endscan(scan);
	UnregisterSnapshot(snap);
	table_close(rel, AccessShareLock);
	return qs->known;
}

/*
 * read_rbac_watches: the ids and servers of the watches of the four RBAC
 * resources, from kwatch.registrations (read here as kwatch's own
 * catalog: no role's privileges apply), cached until the registrations'
 * generation (kw_wake_worker) changes.
 */
static void
read_rbac_watches(void)
{
	uint64		generation;
	Oid			nsp;
	Oid			relid;
	Relation	rel;
	Snapshot	snap;
	TableScanDesc scan;
	HeapTuple	tup;
	AttrNumber	a_id,
				a_server,
				a_group,
				a_plural;
	int			cap = 8;

	if (kw_shared == NULL)
		return;
	generation = pg_atomic_read_u64(&kw_shared->generation);
	if (rbac_watches != NULL && generation == rbac_watches_generation)
		return;
	nsp = get_namespace_oid("kwatch", true);
	relid = OidIsValid(nsp) ? get_relname_relid("registrations", nsp) : InvalidOid;
	if (!OidIsValid(relid))
		return;
	if (rbac_watches == NULL)
		rbac_watches = MemoryContextAlloc(TopMemoryContext, cap * sizeof(RbacWatch));
	else
		cap = Max(cap, n_rbac_watches);
	n_rbac_watches = 0;
	rel = table_open(relid, AccessShareLock);
	a_id = get_attnum(relid, "id");
	a_server = get_attnum(relid, "server");
	a_group = get_attnum(relid, "api_group");
	a_plural = get_attnum(relid, "plural");
	snap = RegisterSnapshot(GetLatestSnapshot());	/* whatever the caller's state */
	scan = table_beginscan(rel, snap, 0, NULL);
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		TupleDesc	desc = RelationGetDescr(rel);
		bool		isnull;
		Datum		d = heap_getattr(tup, a_group, desc, &isnull);
		char	   *plural;
		char	   *server;

		if (isnull || strcmp(TextDatumGetCString(d), RBAC_GROUP) != 0)
			continue;
		d = heap_getattr(tup, a_plural, desc, &isnull);
		if (isnull)
			continue;
		plural = TextDatumGetCString(d);
		if (strcmp(plural, "roles") != 0 && strcmp(plural, "rolebindings") != 0 &&
			strcmp(plural, "clusterroles") != 0 &&
			strcmp(plural, "clusterrolebindings") != 0)
			continue;
		d = heap_getattr(tup, a_server, desc, &isnull);
		if (isnull)
			continue;
		server = TextDatumGetCString(d);
		if (n_rbac_watches == cap)
		{
			cap *= 2;
			rbac_watches = repalloc(rbac_watches, cap * sizeof(RbacWatch));
		}
		rbac_watches[n_rbac_watches].id =
			DatumGetInt32(heap_getattr(tup, a_id, desc, &isnull));
		strlcpy(rbac_watches[n_rbac_watches].server, server, NAMEDATALEN);
		n_rbac_watches++;
	}
	table_endscan(scan);
	UnregisterSnapshot(snap);
	table_close(rel, AccessShareLock);
	rbac_watches_generation = generation;
}

/*
 * server_stamp: a number that changes whenever a mirror of the RBAC
 * objects of `server` applies a change or a list: the sum, over those
 * watches' status slots, of their watch id and change counters.  0 when
 * kwatch is not preloaded or nothing watches them (then only the age
 * bounds a decision).
 */
static uint64
server_stamp(const char *server)
{
	uint64		stamp = 0;

	read_rbac_watches();
	if (kw_shared == NULL || n_rbac_watches == 0)
		return 0;
	LWLockAcquire(kw_shared->lock, LW_SHARED);
	for (int i = 0; i < kw_shared->nslots; i++)
	{
		KwWatchStatus *s = &kw_shared->slots[i];

		if (s->watch_id == 0)
			continue;
		for (int k = 0; k < n_rbac_watches; k++)
		{
			if (rbac_watches[k].id == s->watch_id &&
				strcmp(rbac_watches[k].server, server) == 0)
			{
				stamp += (uint64) s->watch_id * 1000003 +
					s->added + s->modified + s->deleted + s->syncs + s->relists;
				break;
			}
		}
	}
	LWLockRelease(kw_shared->lock);
	return stamp;
}

/*
 * server_writes_table: whether a watch of kwatch.registrations (read as
 * kwatch's own catalog, with a snapshot of its own) writes mirror table
 * tbl (k8s.<table_name>) from server `server`.  A row's cluster is only a
 * name: once no watch of that server writes the table (unwatch(), DROP
 * SERVER ... CASCADE: the history rows stay), a new server of that name,
 * which a role with USAGE on the wrapper may create pointing at an API
 * server of its own, must not decide who reads them.  Only while a watch
 * names the server can it not be dropped or renamed (ownership.c), so
 * while it is the server that wrote them.
 */
static bool
server_writes_table(const char *server, Oid tbl)
{
	char	   *relname = get_rel_name(tbl);
	Oid			nsp = get_namespace_oid("kwatch", true);
	Oid			relid = OidIsValid(nsp) ? get_relname_relid("registrations", nsp) : InvalidOid;
	Relation	rel;
	Snapshot	snap;
	TableScanDesc scan;
	HeapTuple	tup;
	AttrNumber	a_server,
				a_table;
	bool		found = false;

	if (relname == NULL || !OidIsValid(relid))
		return false;
	rel = table_open(relid, AccessShareLock);
	a_server = get_attnum(relid, "server");
	a_table = get_attnum(relid, "table_name");
	snap = RegisterSnapshot(GetLatestSnapshot());	/* whatever the caller's state */
	scan = table_beginscan(rel, snap, 0, NULL);
	while (!found && (tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		TupleDesc	desc = RelationGetDescr(rel);
		bool		isnull;
		bool		isnull2;
		Datum		s = heap_getattr(tup, a_server, desc, &isnull);
		Datum		t = heap_getattr(tup, a_table, desc, &isnull2);

		found = !isnull && !isnull2 &&
			strcmp(TextDatumGetCString(s), server) == 0 &&
			strcmp(TextDatumGetCString(t), relname) == 0;
	}
	table_endscan(scan);
	UnregisterSnapshot(snap);
	table_close(rel, AccessShareLock);
	return found;
}

/*
 * query_server: what this query knows of server `cluster`: whether it is a
 * kwatch foreign server the current role has USAGE on and one that writes
 * the table (server_writes_table; else no row of it is visible), its OID
 * and RBAC stamp (read once per query).
 */
static QueryServer *
query_server(QueryState *qs, const char *cluster)
{
	QueryServer *srv;
	bool		found;

	srv = hash_search(qs->servers, cluster, HASH_ENTER, &found);
	if (!found)
	{
		ForeignServer *server = GetForeignServerByName(cluster, true);

		srv->usable = false;
		srv->warned = false;
		srv->failed = false;
		srv->serverid = InvalidOid;
		srv->stamp = 0;
		/* USAGE on the server, as a live table's read needs it (connection.c) */
		if (server != NULL &&
			strcmp(GetForeignDataWrapper(server->fdwid)->fdwname, "kwatch") == 0 &&
			kw_server_usage(server->serverid, GetUserId()) == ACLCHECK_OK &&
			server_writes_table(cluster, qs->mirror))
		{
			srv->usable = true;
			srv->serverid = server->serverid;
			srv->stamp = server_stamp(cluster);
		}
	}
	return srv;
}

/*
 * backend_decision: the cached answer for (the current role, srv,
 * resource, namespace or "" for cluster-wide), or a new review's; -1 when
 * the review failed (*failure says why, in general terms).
 */
static int
backend_decision(QueryState *qs, QueryServer *srv, const char *cluster,
				 const char *namespace, char **failure)
{
	DecisionKey key;
	Decision   *d;
	bool		found;
	int			answer;
	TimestampTz now = GetCurrentTimestamp();

	if (decisions == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(DecisionKey);
		ctl.entrysize = sizeof(Decision);
		decisions = hash_create("kwatch rbac decisions", 64, &ctl,
								HASH_ELEM | HASH_BLOBS);
	}
	memset(&key, 0, sizeof(key));
	key.userid = GetUserId();
	key.serverid = srv->serverid;
	snprintf(key.what, sizeof(key.what), "%s/%s/%s", qs->group, qs->resource,
			 namespace ? namespace : "");
	d = hash_search(decisions, &key, HASH_FIND, NULL);
	if (d != NULL && d->stamp == srv->stamp &&
		!TimestampDifferenceExceeds(d->decided_at, now,
									kw_rbac_decision_max_age_s * 1000))
		return d->allowed ? 1 : 0;

	answer = review(cluster, qs->group, qs->resource, namespace, failure);
	if (answer < 0)
	{
		/* fail closed: a stale answer is not kept */
		if (d != NULL)
			hash_search(decisions, &key, HASH_REMOVE, NULL);
		return -1;
	}
	d = hash_search(decisions, &key, HASH_ENTER, &found);
	d->allowed = answer == 1;
	d->decided_at = now;
	d->stamp = srv->stamp;
	return answer;
}

/*
 * decide: whether rows of (cluster, namespace) are visible: the
 * cluster-wide answer, else (a namespaced row) the namespace's.  A failure
 * warns once per query and server, naming no namespace.
 */
static bool
decide(QueryState *qs, QueryServer *srv, const char *cluster,
	   const char *namespace)
{
	char	   *failure = NULL;
	int			answer;

	/* after a failed review, no more requests to the server this query */
	if (srv->failed)
		return false;
	answer = backend_decision(qs, srv, cluster, NULL, &failure);
	if (answer < 0)
		srv->failed = true;
	if (answer < 0 && !srv->warned)
	{
		srv->warned = true;
		ereport(WARNING,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("rows of server \"%s\" are hidden from role \"%s\": %s",
						cluster, GetUserNameFromId(GetUserId(), true), failure),
				 errdetail("kwatch.rbac_visible() shows a row only when the role's own Kubernetes identity may list it; a failed decision counts as \"no\".")));
	}
	if (answer == 1)
		return true;
	if (answer < 0 || namespace == NULL)
		return false;
	failure = NULL;
	answer = backend_decision(qs, srv, cluster, namespace, &failure);
	if (answer < 0)
		srv->failed = true;		/* the server's other namespaces too, this query */
	if (answer < 0 && !srv->warned)
	{
		srv->warned = true;
		ereport(WARNING,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("rows of server \"%s\" are hidden from role \"%s\": %s",
						cluster, GetUserNameFromId(GetUserId(), true), failure),
				 errdetail("kwatch.rbac_visible() shows a row only when the role's own Kubernetes identity may list it; a failed decision counts as \"no\".")));
	}
	return answer == 1;
}

/*
 * review: one SelfSubjectAccessReview (POST
 * /apis/authorization.k8s.io/v1/selfsubjectaccessreviews, verb "list")
 * made with the current role's credentials on server `cluster`
 * (kw_cluster_config_for_server(cluster, GetUserId()): its user mapping,
 * else the PUBLIC mapping).  Returns 1 allowed, 0 not, -1 failed, with
 * *failure a palloc'd message that names neither the namespace nor an
 * object (the error's primary message, or the HTTP status).  Errors are
 * caught in a subtransaction; a server found unreachable stays so for
 * the transaction (http.c's memo), so a query waits once at most.
 */
static int
review(const char *cluster, const char *group, const char *resource,
	   const char *namespace, char **failure)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile int answer = -1;
	char	   *volatile message = NULL;

	if (kw_http_server_unreachable(cluster))
	{
		*failure = pstrdup("the API server is unreachable (an earlier request of this transaction)");
		return -1;
	}
	/*
	 * A role that may not list cluster-wide costs one review per namespace:
	 * over one kept connection (and TLS session) each, not a handshake per
	 * review (http.c; the request sender's way).  ERRORs only when out of
	 * memory.
	 */
	kw_http_keep_connections();
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		KwClusterConfig *cfg = kw_cluster_config_for_server(cluster, GetUserId());
		json_object *body = json_object_new_object();
		json_object *spec = json_object_new_object();
		json_object *attrs = json_object_new_object();
		KwHttpResponse resp;
		char	   *text;

		if (namespace != NULL)
			json_object_object_add(attrs, "namespace", json_object_new_string(namespace));
		json_object_object_add(attrs, "verb", json_object_new_string("list"));
		json_object_object_add(attrs, "group", json_object_new_string(group));
		json_object_object_add(attrs, "resource", json_object_new_string(resource));
		json_object_object_add(spec, "resourceAttributes", attrs);
		json_object_object_add(body, "apiVersion",
							   json_object_new_string("authorization.k8s.io/v1"));
		json_object_object_add(body, "kind", json_object_new_string("SelfSubjectAccessReview"));
		json_object_object_add(body, "spec", spec);
		text = pstrdup(json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN));
		json_object_put(body);

		kw_http_request(cfg, "POST",
						"/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
						"application/json", "application/json", text, &resp);
		if (resp.status == 201 || resp.status == 200)
		{
			json_object *obj = json_tokener_parse(resp.body.data);
			json_object *status;
			json_object *allowed;

			if (obj != NULL &&
				json_object_object_get_ex(obj, "status", &status) &&
				json_object_is_type(status, json_type_object))
			{
				/* status.allowed is omitted by no encoder, but false if so */
				answer = json_object_object_get_ex(status, "allowed", &allowed) &&
					json_object_get_boolean(allowed) ? 1 : 0;
			}
			else
				message = psprintf("the API server's answer is no SelfSubjectAccessReview");
			if (obj)
				json_object_put(obj);
		}
		else
			message = psprintf("the API server answered HTTP %ld to a SelfSubjectAccessReview",
							   resp.status);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		message = pstrdup(edata->message);
		FreeErrorData(edata);
		answer = -1;
	}
	PG_END_TRY();
	if (answer < 0)
		*failure = message ? message : pstrdup("no decision");
	return answer;
}
