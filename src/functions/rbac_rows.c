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
 *	 - per query (fn_extra, in the query's memory): the servers met, each
 *	   with its stamp and cluster-wide answer, and the last row's answer;
 *	 - per backend: (role, server, group, resource) -> the cluster-wide
 *	   answer and namespace -> answer, each (allowed, decided_at, stamp),
 *	   used while younger than kwatch.rbac_decision_max_age and while the
 *	   server's RBAC stamp is the one it was decided under, so that a row
 *	   costs one hash probe of its namespace, no copy of its key (the
 *	   policy's cost is what make bench-rbac measures).  The stamp sums
 *	   the change counters of the status slots (kw_status.h) of the watches of roles, rolebindings,
 *	   clusterroles and clusterrolebindings (rbac.authorization.k8s.io) of
 *	   that server, read once per query and server: when one of those
 *	   mirrors takes an event, every decision of the server is made again.
 *	   Only answers are cached; a failure is not.
 *	 - per backend, until the registrations' generation moves: a policy
 *	   table's mirror and resource, and whether a server writes it.
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

/*
 * bytes_equal: memcmp(a, b, len) == 0 for the few bytes of a name, inline:
 * glibc's memcmp for short lengths uses masked vector loads that cost a
 * row of a seq scan more than the rest of the policy together (perf).
 */
static inline bool
bytes_equal(const char *a, const char *b, int len)
{
	for (int i = 0; i < len; i++)
		if (a[i] != b[i])
			return false;
	return true;
}

/*
 * A name (a server's, a namespace's) by its bytes, the key of the hash
 * tables below: lib/simplehash.h, open addressing with the hash stored, so
 * that a row's probe costs hashing its namespace's few bytes and one
 * comparison (dynahash's fixed-size keys cost a memset, a copy and a
 * compare of the whole key per row).  `data` points to memory the table's
 * user keeps (a copy made at insertion, or the row's datum while probing).
 */
typedef struct KwName
{
	const char *data;
	int			len;
} KwName;

typedef struct KwNameEntry
{
	KwName		key;
	uint32		hash;
	char		status;
	void	   *value;
} KwNameEntry;

#define SH_PREFIX kwname
#define SH_ELEMENT_TYPE KwNameEntry
#define SH_KEY_TYPE KwName
#define SH_KEY key
#define SH_HASH_KEY(tb, k) hash_bytes((const unsigned char *) (k).data, (k).len)
#define SH_EQUAL(tb, a, b) ((a).len == (b).len && bytes_equal((a).data, (b).data, (a).len))
#define SH_STORE_HASH
#define SH_GET_HASH(tb, a) ((a)->hash)
#define SH_SCOPE static inline
#define SH_DECLARE
#define SH_DEFINE
#include "lib/simplehash.h"

/* An answer of the API server, as this backend keeps it. */
typedef struct Decision
{
	bool		allowed;
	TimestampTz decided_at;
	uint64		stamp;			/* server_stamp() it was decided under */
} Decision;

/*
 * The backend's answers for one (role, server, group, resource): the
 * cluster-wide one and one per namespace (KwName -> Decision *), in
 * rbac_cxt; kept for the session, each answer reused while
 * decision_valid().  A list: a query finds its set once per server.
 */
typedef struct DecisionSet
{
	struct DecisionSet *next;
	Oid			userid;
	Oid			serverid;
	char	   *group;
	char	   *resource;
	bool		has_wide;
	Decision	wide;
	kwname_hash *namespaces;
} DecisionSet;

static MemoryContext rbac_cxt = NULL;
static DecisionSet *decision_sets = NULL;

/*
 * What the backend knows of the catalog, valid while the registrations'
 * generation (kw_shared->generation, bumped at the commit of every
 * watch() and unwatch(): catalog.c) is `catalog_generation`: a mirror
 * table's resource per policy table (TableInfo, known ones only) and
 * whether a server writes a mirror table (server_writes_table).
 */
typedef struct TableInfo
{
	Oid			tbl;			/* the table the policy is on */
	Oid			mirror;			/* tbl, or the mirror table whose history tbl is */
	char	   *group;
	char	   *resource;
} TableInfo;

typedef struct WritesTable
{
	char		server[NAMEDATALEN];
	Oid			serverid;		/* a server made since under that name is another */
	Oid			mirror;
	bool		writes;
} WritesTable;

static List *table_infos = NIL;		/* TableInfo *, in rbac_cxt */
static List *writes_tables = NIL;	/* WritesTable *, in rbac_cxt */
static uint64 catalog_generation = 0;

/* The watches of RBAC objects, per server (re-read when registrations change). */
typedef struct RbacWatch
{
	int32		id;
	char		server[NAMEDATALEN];
	int			slot;			/* its status slot when last seen, or -1 */
} RbacWatch;

static RbacWatch *rbac_watches = NULL;
static int	n_rbac_watches = 0;
static uint64 rbac_watches_generation = 0;

/* Per query: what is known of a server (the rows' cluster). */
typedef struct QueryServer
{
	const char *name;			/* the server's name (the hash key's copy) */
	bool		usable;			/* a kwatch server (else nothing is visible) */
	Oid			serverid;
	uint64		stamp;
	bool		warned;
	bool		failed;			/* a review failed: no more requests to it */
	int			wide;			/* cluster-wide answer: 1 allowed, else 0 */
	DecisionSet *set;
} QueryServer;

/*
 * Per query (fn_extra, in the query's memory): the table, the role and the
 * bound on a decision's age fixed at the first row, the servers met, and
 * the last row's answer (a mirror's rows come in namespace runs after a
 * list).  A namespace is decided once per query at most: an answer valid
 * at the query's first row stays valid (cutoff and stamps are fixed), one
 * made during the query is younger than the cutoff.
 */
typedef struct QueryState
{
	Oid			tbl;
	Oid			userid;
	bool		known;			/* tbl is a mirror or history table */
	char	   *group;
	char	   *resource;
	Oid			mirror;
	TimestampTz cutoff;			/* a decision older than this is not used */
	kwname_hash *servers;		/* KwName -> QueryServer * */
	/* the last row's */
	QueryServer *last_srv;
	int			last_clen;
	char		last_cluster[NAMEDATALEN];
	bool		last_valid;		/* last_ns/last_visible hold an answer */
	int			last_nlen;
	char		last_ns[NAMEDATALEN + 1];
	bool		last_visible;
} QueryState;

static void catalog_cache_check(void);
static bool table_resource(QueryState *qs, Oid tbl);
static bool history_mirror_resource(TableInfo *ti, Oid tbl);
static bool mirror_resource(TableInfo *ti, Oid relid);
static uint64 server_stamp(const char *server);
static bool server_writes_table(const char *server, Oid serverid, Oid tbl);
static bool read_writes_table(const char *server, Oid tbl);
static QueryServer *query_server(QueryState *qs, const char *cluster, int clen);
static bool decide_namespace(QueryState *qs, QueryServer *srv,
							 const char *ndata, int nlen);
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
 * false.  STABLE within a query (the per-query state), LEAKPROOF.  A row
 * costs a comparison with the last row's cluster and namespace, else a
 * hash probe of its namespace (once its server's cluster-wide answer is
 * "no").
 */
Datum
kwatch_rbac_visible(PG_FUNCTION_ARGS)
{
	QueryState *qs = (QueryState *) fcinfo->flinfo->fn_extra;
	text	   *cluster_t;
	text	   *namespace_t = NULL;
	const char *cdata;
	const char *ndata = NULL;
	QueryServer *srv;
	int			clen;
	int			nlen = 0;
	bool		visible;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_BOOL(false);
	cluster_t = PG_GETARG_TEXT_PP(1);
	clen = VARSIZE_ANY_EXHDR(cluster_t);
	cdata = VARDATA_ANY(cluster_t);
	if (!PG_ARGISNULL(2))
	{
		namespace_t = PG_GETARG_TEXT_PP(2);
		nlen = VARSIZE_ANY_EXHDR(namespace_t);
		ndata = VARDATA_ANY(namespace_t);
	}
	/* server names are names; namespaces DNS labels (63 bytes) */
	if (clen == 0 || clen >= NAMEDATALEN || nlen > NAMEDATALEN)
		PG_RETURN_BOOL(false);

	if (qs == NULL || qs->tbl != PG_GETARG_OID(0) || qs->userid != GetUserId())
	{
		MemoryContext old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);

		qs = palloc0(sizeof(QueryState));
		qs->userid = GetUserId();
		qs->cutoff = GetCurrentTimestamp() -
			(TimestampTz) kw_rbac_decision_max_age_s * USECS_PER_SEC;
		qs->servers = kwname_create(fcinfo->flinfo->fn_mcxt, 8, NULL);
		qs->known = table_resource(qs, PG_GETARG_OID(0));
		MemoryContextSwitchTo(old);
		fcinfo->flinfo->fn_extra = qs;
	}
	if (!qs->known)
		PG_RETURN_BOOL(false);

	/* the row's server: the last row's, mostly */
	if (qs->last_srv != NULL && qs->last_clen == clen &&
		bytes_equal(qs->last_cluster, cdata, clen))
		srv = qs->last_srv;
	else
	{
		srv = query_server(qs, cdata, clen);
		qs->last_srv = srv;
		qs->last_clen = clen;
		memcpy(qs->last_cluster, cdata, clen);
		qs->last_valid = false;
	}
	if (srv->wide == 1)
		PG_RETURN_BOOL(true);
	if (!srv->usable || nlen == 0)
		PG_RETURN_BOOL(false);	/* not cluster-wide: no cluster-scoped row */

	if (qs->last_valid && qs->last_nlen == nlen && bytes_equal(qs->last_ns, ndata, nlen))
		PG_RETURN_BOOL(qs->last_visible);
	visible = decide_namespace(qs, srv, ndata, nlen);
	qs->last_nlen = nlen;
	memcpy(qs->last_ns, ndata, nlen);
	qs->last_visible = visible;
	qs->last_valid = true;
	PG_RETURN_BOOL(visible);
}

/*
 * catalog_cache_check: forgets the backend's TableInfo and WritesTable
 * entries when the registrations' generation moved; returns nothing.
 */
static void
catalog_cache_check(void)
{
	uint64		generation;

	if (kw_shared == NULL)
		return;
	generation = pg_atomic_read_u64(&kw_shared->generation);
	if (generation == catalog_generation)
		return;
	list_free_deep(table_infos);
	table_infos = NIL;
	list_free_deep(writes_tables);
	writes_tables = NIL;
	catalog_generation = generation;
}

/*
 * catalog_cacheable: whether what this transaction reads of kwatch's
 * catalog may be kept past it: kwatch is preloaded (the generation exists)
 * and the transaction wrote nothing (else it may read a registration of
 * its own that a ROLLBACK takes back without moving the generation).
 */
static bool
catalog_cacheable(void)
{
	return kw_shared != NULL &&
		!TransactionIdIsValid(GetTopTransactionIdIfAny());
}

/*
 * rbac_memory: the backend's memory context of the caches above (child of
 * TopMemoryContext), made at first use.
 */
static MemoryContext
rbac_memory(void)
{
	if (rbac_cxt == NULL)
		rbac_cxt = AllocSetContextCreate(TopMemoryContext, "kwatch rbac decisions",
										 ALLOCSET_SMALL_SIZES);
	return rbac_cxt;
}

/*
 * table_resource: qs's mirror table, group and resource for policy table
 * tbl (a mirror table, or a history table: mirror_resource and the
 * history lookup below), from the backend's TableInfo cache or the
 * catalog; false when tbl is neither (not cached: it costs a read per
 * query, and only a policy put on another table by hand meets it).
 */
static bool
table_resource(QueryState *qs, Oid tbl)
{
	ListCell   *lc;
	TableInfo	ti;
	MemoryContext old;
	TableInfo  *copy;

	qs->tbl = tbl;
	catalog_cache_check();
	foreach(lc, table_infos)
	{
		TableInfo  *t = lfirst(lc);

		if (t->tbl == tbl)
		{
			qs->mirror = t->mirror;
			qs->group = t->group;
			qs->resource = t->resource;
			return true;
		}
	}
	memset(&ti, 0, sizeof(ti));
	ti.tbl = tbl;
	if (!history_mirror_resource(&ti, tbl))
		return false;
	qs->mirror = ti.mirror;
	qs->group = ti.group;
	qs->resource = ti.resource;
	if (!catalog_cacheable())
		return true;
	old = MemoryContextSwitchTo(rbac_memory());
	copy = palloc(sizeof(TableInfo));
	copy->tbl = tbl;
	copy->mirror = ti.mirror;
	copy->group = pstrdup(ti.group);
	copy->resource = pstrdup(ti.resource);
	table_infos = lappend(table_infos, copy);
	MemoryContextSwitchTo(old);
	return true;
}

/*
 * history_mirror_resource: the API group and resource (plural) of mirror
 * table tbl, or of the mirror table whose history table tbl is
 * (kwatch.history_tables, by name: the policy on a history table names
 * that table itself, so that it depends on nothing else and a dump
 * restores it by name), from kwatch.tables (readable by everyone), into
 * ti (in the current memory context); false when tbl is neither.
 */
static bool
history_mirror_resource(TableInfo *ti, Oid tbl)
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

	if (mirror_resource(ti, tbl))
		return true;
	relname = get_rel_name(tbl);
	if (!OidIsValid(relid) || !OidIsValid(k8s) || relname == NULL ||
		get_rel_namespace(tbl) != k8s)
		return false;
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
	return OidIsValid(mirror) && mirror_resource(ti, mirror);
}

/*
 * mirror_resource: history_mirror_resource's lookup of relid in
 * kwatch.tables; true (ti's mirror, group and resource set) when it is
 * there.
 */
static bool
mirror_resource(TableInfo *ti, Oid tbl)
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
		ti->group = TextDatumGetCString(d);
		d = heap_getattr(tup, a_plural, RelationGetDescr(rel), &isnull);
		if (isnull)
			continue;
		ti->resource = TextDatumGetCString(d);
		ti->mirror = tbl;
		break;
	}
	table_endscan(scan);
	UnregisterSnapshot(snap);
	table_close(rel, AccessShareLock);
	return OidIsValid(ti->mirror);
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
		rbac_watches[n_rbac_watches].slot = -1;
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
 * bounds a decision).  A query costs one look per RBAC watch: its slot is
 * remembered, not searched for among kwatch.max_watches.
 */
static uint64
server_stamp(const char *server)
{
	uint64		stamp = 0;

	read_rbac_watches();
	if (kw_shared == NULL || n_rbac_watches == 0)
		return 0;
	LWLockAcquire(kw_shared->lock, LW_SHARED);
	for (int k = 0; k < n_rbac_watches; k++)
	{
		RbacWatch  *w = &rbac_watches[k];
		KwWatchStatus *s;

		if (strcmp(w->server, server) != 0)
			continue;
		/* the slot found last time, else a search (a worker restart moves it) */
		if (w->slot < 0 || w->slot >= kw_shared->nslots ||
			kw_shared->slots[w->slot].watch_id != w->id)
		{
			w->slot = -1;
			for (int i = 0; i < kw_shared->nslots; i++)
				if (kw_shared->slots[i].watch_id == w->id)
				{
					w->slot = i;
					break;
				}
			if (w->slot < 0)
				continue;
		}
		s = &kw_shared->slots[w->slot];
		stamp += (uint64) s->watch_id * 1000003 +
			s->added + s->modified + s->deleted + s->syncs + s->relists;
	}
	LWLockRelease(kw_shared->lock);
	return stamp;
}

/*
 * server_writes_table: whether a watch of kwatch.registrations writes
 * mirror table tbl (k8s.<table_name>) from server `server` (of OID
 * serverid) (read_writes_table; kept by the backend for that OID until the
 * registrations change, catalog_cache_check).  A row's cluster is only a name: once no watch of
 * that server writes the table (unwatch(), DROP SERVER ... CASCADE: the
 * history rows stay), a new server of that name, which a role with USAGE
 * on the wrapper may create pointing at an API server of its own, must not
 * decide who reads them.  Only while a watch names the server can it not
 * be dropped or renamed (ownership.c), so while it is the server that
 * wrote them.
 */
static bool
server_writes_table(const char *server, Oid serverid, Oid tbl)
{
	ListCell   *lc;
	bool		writes;
	WritesTable *w;
	MemoryContext old;

	catalog_cache_check();
	foreach(lc, writes_tables)
	{
		w = lfirst(lc);
		if (w->mirror == tbl && w->serverid == serverid && strcmp(w->server, server) == 0)
			return w->writes;
	}
	writes = read_writes_table(server, tbl);
	if (!catalog_cacheable())
		return writes;
	old = MemoryContextSwitchTo(rbac_memory());
	w = palloc0(sizeof(WritesTable));
	strlcpy(w->server, server, NAMEDATALEN);
	w->serverid = serverid;
	w->mirror = tbl;
	w->writes = writes;
	writes_tables = lappend(writes_tables, w);
	MemoryContextSwitchTo(old);
	return writes;
}

/*
 * read_writes_table: server_writes_table's read of kwatch.registrations
 * (as kwatch's own catalog, with a snapshot of its own).
 */
static bool
read_writes_table(const char *server, Oid tbl)
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
 * decision_set: the backend's DecisionSet of (the current role, server
 * serverid, group, resource), made empty at first use.
 */
static DecisionSet *
decision_set(Oid serverid, const char *group, const char *resource)
{
	Oid			userid = GetUserId();
	DecisionSet *set;
	MemoryContext old;

	for (set = decision_sets; set != NULL; set = set->next)
		if (set->userid == userid && set->serverid == serverid &&
			strcmp(set->group, group) == 0 && strcmp(set->resource, resource) == 0)
			return set;
	old = MemoryContextSwitchTo(rbac_memory());
	set = palloc0(sizeof(DecisionSet));
	set->userid = userid;
	set->serverid = serverid;
	set->group = pstrdup(group);
	set->resource = pstrdup(resource);
	set->namespaces = kwname_create(rbac_cxt, 64, NULL);
	set->next = decision_sets;
	decision_sets = set;
	MemoryContextSwitchTo(old);
	return set;
}

/*
 * decision_valid: whether answer d may be used by query qs for a server
 * of RBAC stamp `stamp`: made under that stamp and not before the query's
 * cutoff (kwatch.rbac_decision_max_age before its first row).
 */
static inline bool
decision_valid(const QueryState *qs, const Decision *d, uint64 stamp)
{
	return d->stamp == stamp && d->decided_at >= qs->cutoff;
}

/*
 * warn_failure: the one WARNING per query and server of a failed review,
 * naming the server and the role, never a namespace.
 */
static void
warn_failure(QueryServer *srv, const char *cluster, const char *failure)
{
	if (srv->warned)
		return;
	srv->warned = true;
	ereport(WARNING,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("rows of server \"%s\" are hidden from role \"%s\": %s",
					cluster, GetUserNameFromId(GetUserId(), true), failure),
			 errdetail("kwatch.rbac_visible() shows a row only when the role's own Kubernetes identity may list it; a failed decision counts as \"no\".")));
}

/*
 * query_server: what query qs knows of server `cluster` (clen bytes, not
 * terminated): whether it is a kwatch foreign server the current role has
 * USAGE on and one that writes the table (server_writes_table; else no
 * row of it is visible), its OID and RBAC stamp, and its cluster-wide
 * answer (srv->wide: the backend's if valid, else a review's); made at the
 * query's first row of that server.
 */
static QueryServer *
query_server(QueryState *qs, const char *cdata, int clen)
{
	KwName		key = {cdata, clen};
	KwNameEntry *e;
	bool		found;
	QueryServer *srv;
	char		cluster[NAMEDATALEN];
	ForeignServer *server;
	DecisionSet *set;
	char	   *failure = NULL;
	int			answer;

	e = kwname_lookup(qs->servers, key);
	if (e != NULL)
		return (QueryServer *) e->value;

	memcpy(cluster, cdata, clen);
	cluster[clen] = '\0';
	srv = MemoryContextAllocZero(qs->servers->ctx, sizeof(QueryServer));
	srv->wide = 0;
	e = kwname_insert(qs->servers, key, &found);
	e->key.data = srv->name = MemoryContextStrdup(qs->servers->ctx, cluster);
	e->value = srv;

	server = GetForeignServerByName(cluster, true);
	/* USAGE on the server, as a live table's read needs it (connection.c) */
	if (server == NULL ||
		strcmp(GetForeignDataWrapper(server->fdwid)->fdwname, "kwatch") != 0 ||
		kw_server_usage(server->serverid, GetUserId()) != ACLCHECK_OK ||
		!server_writes_table(cluster, server->serverid, qs->mirror))
		return srv;
	srv->usable = true;
	srv->serverid = server->serverid;
	srv->stamp = server_stamp(cluster);
	srv->set = set = decision_set(server->serverid, qs->group, qs->resource);

	if (set->has_wide && decision_valid(qs, &set->wide, srv->stamp))
	{
		srv->wide = set->wide.allowed ? 1 : 0;
		return srv;
	}
	answer = review(cluster, qs->group, qs->resource, NULL, &failure);
	if (answer < 0)
	{
		/* fail closed: a stale answer is not kept, and no row of it shows */
		set->has_wide = false;
		srv->failed = true;
		warn_failure(srv, cluster, failure);
		return srv;
	}
	set->has_wide = true;
	set->wide.allowed = answer == 1;
	set->wide.decided_at = GetCurrentTimestamp();
	set->wide.stamp = srv->stamp;
	srv->wide = answer;
	return srv;
}

/*
 * decide_namespace: whether rows of server srv in namespace ndata (nlen
 * bytes, not terminated) are visible, its server's cluster-wide answer
 * being "no": the backend's valid answer, else a review's (none after a
 * failed one this query: then "no").
 */
static bool
decide_namespace(QueryState *qs, QueryServer *srv, const char *ndata, int nlen)
{
	KwName		key = {ndata, nlen};
	KwNameEntry *e;
	Decision   *d;
	bool		found;
	char		namespace[NAMEDATALEN + 1];
	char	   *failure = NULL;
	int			answer;

	e = kwname_lookup(srv->set->namespaces, key);
	d = e ? (Decision *) e->value : NULL;
	if (d != NULL && decision_valid(qs, d, srv->stamp))
		return d->allowed;
	if (srv->failed)
		return false;
	memcpy(namespace, ndata, nlen);
	namespace[nlen] = '\0';
	answer = review(srv->name, qs->group, qs->resource, namespace, &failure);
	if (answer < 0)
	{
		srv->failed = true;		/* the server's other namespaces too, this query */
		warn_failure(srv, srv->name, failure);
		if (d != NULL)
			d->decided_at = DT_NOBEGIN; /* a stale answer is not kept */
		return false;
	}
	if (d == NULL)
	{
		e = kwname_insert(srv->set->namespaces, key, &found);
		e->key.data = MemoryContextStrdup(rbac_cxt, namespace);
		d = MemoryContextAlloc(rbac_cxt, sizeof(Decision));
		e->value = d;
	}
	d->allowed = answer == 1;
	d->decided_at = GetCurrentTimestamp();
	d->stamp = srv->stamp;
	return d->allowed;
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
