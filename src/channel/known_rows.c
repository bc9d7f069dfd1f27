/*-------------------------------------------------------------------------
 *
 * known_rows.c
 *		What a mirror table held when a LIST began: uid -> resourceVersion
 *		of each row of the watch's cluster (PROTOCOL 23: an object listed
 *		with an unchanged resourceVersion costs nothing).
 *
 * An apply worker reads the rows (sync.c, kw_sync_known_rows) and sends
 * them back with the result of the LIST's first request (kw_apply.h); the
 * transfer consults them while decoding the LIST (watch.c), so that an
 * unchanged object crosses to the apply side without its body.  A hash in
 * a memory context of the caller's; uids longer than KW_UID_KEYLEN - 1
 * (never valid in Kubernetes) are left out, which only costs a rewrite.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/hsearch.h"

#include "kw_common.h"
#include "kw_apply.h"

typedef struct KnownEntry
{
	char		uid[KW_UID_KEYLEN];
	char		rv[KW_RV_LEN];	/* a longer one is cut: it never matches */
} KnownEntry;

/* kw_known_create: an empty hash sized for about `n` rows, in `cxt`. */
HTAB *
kw_known_create(long n, MemoryContext cxt)
{
	HASHCTL		ctl = {.keysize = KW_UID_KEYLEN, .entrysize = sizeof(KnownEntry), .hcxt = cxt};

	return hash_create("kwatch known objects", Max(n, 1024), &ctl,
					   HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
}

/*
 * kw_known_add: records `uid` with resourceVersion `rv` (copied; NULL as
 * "") in `known`.  A resourceVersion of KW_RV_LEN bytes or more (etcd's
 * are about 20) is kept cut, so that it matches nothing: its object is
 * sent whole.
 */
void
kw_known_add(HTAB *known, const char *uid, const char *rv)
{
	KnownEntry *e;

	if (uid == NULL || strlen(uid) >= KW_UID_KEYLEN)
		return;
	e = hash_search(known, uid, HASH_ENTER, NULL);
	if (rv && strlen(rv) >= KW_RV_LEN)
		rv = "";				/* never equal to a listed object's */
	strlcpy(e->rv, rv ? rv : "", KW_RV_LEN);
}

/*
 * kw_known_rv: the resourceVersion `known` has for `uid`, or NULL (also
 * for a NULL hash).
 */
const char *
kw_known_rv(HTAB *known, const char *uid)
{
	KnownEntry *e;

	if (known == NULL || strlen(uid) >= KW_UID_KEYLEN)
		return NULL;
	e = hash_search(known, uid, HASH_FIND, NULL);
	return e ? e->rv : NULL;
}

/*
 * kw_known_export: the entries of `known` as two arrays of *uids and *rvs
 * (pointing into the hash), palloc'd in the current memory context;
 * returns their length (0 for a NULL hash).
 */
int
kw_known_export(HTAB *known, char ***uids, char ***rvs)
{
	HASH_SEQ_STATUS seq;
	KnownEntry *e;
	int			n = 0;
	long		total = known ? hash_get_num_entries(known) : 0;

	*uids = palloc(sizeof(char *) * Max(total, 1));
	*rvs = palloc(sizeof(char *) * Max(total, 1));
	if (known == NULL)
		return 0;
	hash_seq_init(&seq, known);
	while ((e = hash_seq_search(&seq)) != NULL)
	{
		(*uids)[n] = e->uid;
		(*rvs)[n] = e->rv;
		n++;
	}
	return n;
}

/*
 * kw_known_import: a hash in `cxt` from `n` uids and their
 * resourceVersions (kw_known_export's arrays).
 */
HTAB *
kw_known_import(char **uids, char **rvs, int n, MemoryContext cxt)
{
	HTAB	   *known = kw_known_create(n, cxt);

	for (int i = 0; i < n; i++)
		kw_known_add(known, uids[i], rvs[i]);
	return known;
}
