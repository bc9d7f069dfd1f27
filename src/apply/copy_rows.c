/*-------------------------------------------------------------------------
 *
 * copy_rows.c
 *		Writing a batch of listed objects with COPY FROM's machinery: the
 *		batch is handed to BeginCopyFrom()/CopyFrom() as a binary COPY
 *		stream read from memory, as logical replication's initial table
 *		sync writes a table (src/backend/replication/logical/tablesync.c,
 *		copy_table() and copy_read_data()).
 *
 * Why: an INSERT ... SELECT FROM unnest(...) inserts a row at a time
 * (a heap WAL record, a buffer lock and a free-space lookup per row, and
 * ON CONFLICT's index probe and speculative insertion), where COPY's
 * multi-insert path (heap_multi_insert) fills a page at a time.  The rows
 * are the same: COPY computes the stored generated columns, fills the
 * owner's defaults, inserts into every index, checks constraints and fires
 * AFTER ROW and statement triggers as an INSERT does.
 *
 * What COPY does not do as an INSERT would, and so where this is not used
 * (kw_copy_rows returns false, nothing done, and the caller runs its
 * INSERT): a table with BEFORE or INSTEAD OF row triggers for INSERT
 * (they may change or drop a row, and the caller reports what it wrote),
 * with rules (COPY ignores them), or with row-level security in force for
 * the writing role (COPY FROM refuses it; an INSERT applies the policies).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "catalog/objectaddress.h"
#include "commands/copy.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/value.h"
#include "parser/parse_node.h"
#include "parser/parse_relation.h"
#include "port/pg_bswap.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"

#include "kw_common.h"
#include "kw_sync.h"

/*
 * The binary COPY stream of one batch, produced as CopyFrom reads it: a
 * small piece (the file header, a row's fields up to its object's text,
 * the trailer) in `head`, then the object's text read in place.  The
 * format: src/backend/commands/copyfromparse.c (ReceiveCopyBinaryHeader,
 * CopyFromBinaryOneRow) and the COPY reference's "Binary Format".
 */
typedef struct CopySource
{
	const KwObject *objs;
	int			nobjs;
	int			next;			/* the next object to write */
	const char *cluster;		/* NULL: no cluster column */
	bool		trailer_done;
	StringInfoData head;
	int			head_off;
	const char *body;			/* the current object's text */
	int			body_len;
	int			body_off;
} CopySource;

/* the columns kwatch writes, in this order, and their types */
const KwMirrorColumn kw_mirror_columns[KW_MIRROR_COLUMNS] = {
	{"cluster", TEXTOID}, {"uid", TEXTOID},
	{"resource_version", TEXTOID}, {"object", JSONBOID}
};

/* copy_data_source_cb takes no argument: the batch being copied */
static CopySource *source;

static void
put_int16(StringInfo s, int16 v)
{
	uint16		n = pg_hton16((uint16) v);

	appendBinaryStringInfo(s, (char *) &n, 2);
}

static void
put_int32(StringInfo s, int32 v)
{
	uint32		n = pg_hton32((uint32) v);

	appendBinaryStringInfo(s, (char *) &n, 4);
}

/* a text field: its length, then its bytes; NULL as length -1 */
static void
put_text(StringInfo s, const char *v)
{
	if (v == NULL)
		put_int32(s, -1);
	else
	{
		int			len = strlen(v);

		put_int32(s, len);
		appendBinaryStringInfo(s, v, len);
	}
}

/*
 * next_piece: puts the next row (or the trailer) into src->head and its
 * object's text into src->body; false when the stream has ended.
 */
static bool
next_piece(CopySource *src)
{
	resetStringInfo(&src->head);
	src->head_off = 0;
	src->body = NULL;
	src->body_len = src->body_off = 0;
	if (src->next < src->nobjs)
	{
		const KwObject *o = &src->objs[src->next++];

		put_int16(&src->head, src->cluster ? 4 : 3);
		if (src->cluster)
			put_text(&src->head, src->cluster);
		put_text(&src->head, o->uid);
		put_text(&src->head, o->resource_version);
		if (o->json == NULL)
			put_int32(&src->head, -1);
		else
		{
			/* jsonb's binary form: version 1, then the text (jsonb_recv) */
			put_int32(&src->head, o->json_len + 1);
			appendStringInfoChar(&src->head, 1);
			src->body = o->json;
			src->body_len = o->json_len;
		}
		return true;
	}
	if (!src->trailer_done)
	{
		put_int16(&src->head, -1);
		src->trailer_done = true;
		return true;
	}
	return false;
}

/*
 * copy_source_read: the copy_data_source_cb: fills outbuf with up to
 * maxread bytes of the stream; 0 at its end.
 */
static int
copy_source_read(void *outbuf, int minread, int maxread)
{
	char	   *out = outbuf;
	int			got = 0;

	while (got < maxread)
	{
		int			n;

		if (source->head_off < source->head.len)
		{
			n = Min(maxread - got, source->head.len - source->head_off);
			memcpy(out + got, source->head.data + source->head_off, n);
			source->head_off += n;
		}
		else if (source->body_off < source->body_len)
		{
			n = Min(maxread - got, source->body_len - source->body_off);
			memcpy(out + got, source->body + source->body_off, n);
			source->body_off += n;
		}
		else if (!next_piece(source))
			break;
		else
			continue;
		got += n;
	}
	return got;
}

/*
 * copy_usable: whether COPY writes `rel` as an INSERT by the current role
 * would (top of file), and its columns cluster (if `with_cluster`), uid,
 * resource_version and object still have the types the stream is written
 * for (checked by the caller before the table was locked; checked again
 * under the lock).
 */
static bool
copy_usable(Relation rel, bool with_cluster)
{
	TriggerDesc *trig = rel->trigdesc;

	for (int i = with_cluster ? 0 : 1; i < KW_MIRROR_COLUMNS; i++)
	{
		int			att = attnameAttNum(rel, kw_mirror_columns[i].name, false);

		if (att <= 0 ||
			TupleDescAttr(RelationGetDescr(rel), att - 1)->atttypid != kw_mirror_columns[i].type)
			return false;
	}

	if (trig && (trig->trig_insert_before_row || trig->trig_insert_instead_row))
		return false;
	if (rel->rd_rel->relhasrules)
		return false;
	if (check_enable_rls(RelationGetRelid(rel), InvalidOid, true) == RLS_ENABLED)
		return false;
	return true;
}

/*
 * kw_copy_rows: inserts objs[0..nobjs) into the table `relid` as the
 * current role, as rows (cluster, uid, resource_version, object), or
 * (uid, resource_version, object) when `cluster` is NULL (a staging
 * table); an object whose json is NULL gets a NULL object.  The columns
 * are text, text, text and jsonb (the caller checked them).  Returns false,
 * having written nothing, when the table needs an INSERT (top of file);
 * else true, every object written.  Errors: whatever the INSERT would
 * raise (insufficient_privilege without INSERT on the table, a jsonb input
 * error, a unique violation for a uid already there, ...), with nothing
 * written.  The caller runs it in a subtransaction, whose abort frees what
 * an error left (COPY's buffers live in a context under the
 * subtransaction's CurTransactionContext).
 */
bool
kw_copy_rows(Oid relid, const char *cluster, const KwObject *objs, int nobjs)
{
	MemoryContext cxt = AllocSetContextCreate(CurTransactionContext, "kwatch COPY",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext oldcxt = MemoryContextSwitchTo(cxt);
	Relation	rel = table_open(relid, RowExclusiveLock);
	ParseState *pstate;
	List	   *columns = NIL;
	List	   *options;
	CopyFromState cstate;
	CopySource	src = {0};
	uint64		processed;
	AclResult	aclresult;

	if (!copy_usable(rel, cluster != NULL))
	{
		table_close(rel, RowExclusiveLock);
		MemoryContextSwitchTo(oldcxt);
		MemoryContextDelete(cxt);
		return false;
	}
	/* what an INSERT's executor would check (DoCopy checks it for COPY) */
	aclresult = pg_class_aclcheck(relid, GetUserId(), ACL_INSERT);
	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, get_relkind_objtype(rel->rd_rel->relkind),
					   RelationGetRelationName(rel));

	/* the stream's fields, in the order next_piece writes them */
	for (int i = cluster ? 0 : 1; i < KW_MIRROR_COLUMNS; i++)
		columns = lappend(columns, makeString(pstrdup(kw_mirror_columns[i].name)));
	options = list_make1(makeDefElem("format", (Node *) makeString("binary"), -1));

	src.objs = objs;
	src.nobjs = nobjs;
	src.cluster = cluster;
	initStringInfo(&src.head);
	/* the file header: signature, flags, header extension length */
	appendBinaryStringInfo(&src.head, "PGCOPY\n\377\r\n\0", 11);
	put_int32(&src.head, 0);
	put_int32(&src.head, 0);
	source = &src;

	pstate = make_parsestate(NULL);
	(void) addRangeTableEntryForRelation(pstate, rel, RowExclusiveLock, NULL, false, false);
	PushActiveSnapshot(GetTransactionSnapshot());
	cstate = BeginCopyFrom(pstate, rel, NULL, NULL, false, copy_source_read, columns, options);
	processed = CopyFrom(cstate);
	EndCopyFrom(cstate);
	PopActiveSnapshot();
	source = NULL;
	CommandCounterIncrement();

	table_close(rel, NoLock);
	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(cxt);
	if (processed != (uint64) nobjs)
		elog(ERROR, "COPY wrote " UINT64_FORMAT " rows of %d", processed, nobjs);
	return true;
}
