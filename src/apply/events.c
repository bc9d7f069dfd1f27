/*-------------------------------------------------------------------------
 *
 * events.c
 *		The event stream: a bounded ring in shared memory holding every
 *		change the worker applied, numbered by a sequence that only grows.
 *		kwatch.events (events_fdw.c) reads it.
 *
 * Writers: the apply workers (apply_worker.c), any number at once, each
 * one transaction at a time.  While a transaction applies, each
 * ADDED/MODIFIED/DELETED it makes (watch events and relist merges and
 * sweeps alike, sync.c) is only queued in that transaction's memory
 * (kw_events_add).  At its end, after the table owner's code has run
 * (deferred triggers included, sync.c), kw_events_checkpoint takes SHARE
 * ROW EXCLUSIVE on kwatch.event_state (a mode that conflicts with itself
 * only among the writers' modes, not with readers of the table) and holds
 * it until the transaction ends: it numbers the queued changes, writes
 * each into slot seq % kwatch.event_buffer stamped with the transaction's
 * xid, queues its NOTIFY carrying the same seq, and stores the last seq in
 * kwatch.event_state, all in that transaction.  Seqs are so handed out in
 * commit order, which readers rely on (a scan ends at the first event not
 * committed), and the lock is held across the commit only, never across
 * an owner's trigger: a slow table delays no other watch's events.
 * Nothing is WAL-logged here.
 *
 * Visibility: `published` is the last seq of a committed transaction, set by
 * the worker's XACT_EVENT_COMMIT callback.  That callback runs after
 * ProcArrayEndTransaction() in CommitTransaction() (PostgreSQL's
 * src/backend/access/transam/xact.c), i.e. after listeners can already read
 * the transaction's NOTIFYs (commands/async.c delivers an entry as soon as
 * its xid is no longer in the reader's snapshot).  To close that window a
 * reader also accepts a slot above `published` whose xid pg_xact already
 * records as committed (TransactionIdDidCommit, which async.c's readers rely
 * on too).  So when a listener gets a NOTIFY with seq N, WHERE seq = N finds
 * the event.  On abort the worker's callback moves `written` back to
 * `published`: the aborted events' seqs are reused by the next transaction
 * (no holes); a reader that copied one of their slots sees an aborted xid
 * and stops there.
 *
 * Slots: fixed size, each guarded by a change counter used as a seqlock,
 * the protocol of PgBackendStatus.st_changecount
 * (src/include/utils/backend_status.h): the writer makes it odd, writes,
 * makes it even, with write barriers between; a reader copies the slot and
 * retries while the counter was odd or changed.  Readers take no lock, so
 * they never block the worker, and never return a half-written entry.
 *
 * Sequence numbers never repeat: the worker continues from
 * max(kwatch.event_state.last_seq, the shared counter) + 1, so they survive
 * PostgreSQL restarts (table) and DROP/CREATE EXTENSION while the
 * postmaster runs (shared counter).  After a restart the ring is empty and
 * events_oldest_seq() is last_seq + 1: a reader that had seen everything
 * continues seamlessly, one that was behind sees the gap.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "nodes/makefuncs.h"
#include "storage/ipc.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

#include "kw_common.h"
#include "kw_apply.h"
#include "kw_as_owner.h"
#include "kw_events.h"
#include "utils/memutils.h"

typedef struct KwEventSlot
{
	pg_atomic_uint32 changecount;	/* odd while the worker writes */
	KwEventRecord rec;
} KwEventSlot;

typedef struct KwEventRing
{
	pg_atomic_uint64 published; /* last seq of a committed transaction */
	pg_atomic_uint64 written;	/* last seq written (committed or in flight) */
	pg_atomic_uint64 high_water;	/* highest seq ever written to a slot */
	pg_atomic_uint64 first;		/* first seq of this ring's life */
	pg_atomic_uint32 ready;		/* worker restored the counter */
	int			nslots;
	KwEventSlot slots[FLEXIBLE_ARRAY_MEMBER];
} KwEventRing;

static KwEventRing *ring = NULL;

static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
static shmem_request_hook_type prev_shmem_request_hook = NULL;

/* writers only: the current transaction's changes, queued until its end */
typedef struct PendingChange
{
	KwRegistration *reg;		/* outlives the transaction (the caller's) */
	KwChange	c;				/* strings copied */
	bool		notify;
} PendingChange;

static List *xact_pending = NIL;	/* PendingChange *, TopTransactionContext */
static int64 xact_last_seq = 0;		/* numbered by kw_events_checkpoint */
static SPIPlanPtr checkpoint_plan = NULL;

/* event_state_relid: kwatch.event_state's oid; ERRORs when it is missing. */
static Oid
event_state_relid(void)
{
	return RangeVarGetRelid(makeRangeVar("kwatch", "event_state", -1), NoLock, false);
}

static Size
ring_size(void)
{
	return add_size(offsetof(KwEventRing, slots),
					mul_size(sizeof(KwEventSlot), kw_event_buffer));
}

static void
events_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(ring_size());
}

static void
events_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	ring = ShmemInitStruct("kwatch events", ring_size(), &found);
	if (!found)
	{
		ring->nslots = kw_event_buffer;
		pg_atomic_init_u64(&ring->published, 0);
		pg_atomic_init_u64(&ring->written, 0);
		pg_atomic_init_u64(&ring->high_water, 0);
		pg_atomic_init_u64(&ring->first, 1);
		pg_atomic_init_u32(&ring->ready, 0);
		for (int i = 0; i < ring->nslots; i++)
		{
			pg_atomic_init_u32(&ring->slots[i].changecount, 0);
			ring->slots[i].rec.seq = 0;
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * kw_events_shmem_request: installs the hooks that size and create the
 * ring (kwatch.event_buffer slots of sizeof(KwEventSlot) bytes: 1000 on
 * x86-64).
 * Only called while shared_preload_libraries is processed.
 */
void
kw_events_shmem_request(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = events_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = events_shmem_startup;
}

/* ---------------------------------------------------------------------
 * writer (the worker)
 * ---------------------------------------------------------------------
 */

static void
events_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_PRE_COMMIT && xact_pending != NIL)
	{
		/*
		 * Changes never numbered nor saved in event_state would be lost
		 * from the stream, or let a restart reuse their numbers: refuse
		 * (rolls back).
		 */
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("kwatch: %d changes were not written to the event stream",
						list_length(xact_pending))));
	}
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT)
		xact_pending = NIL;		/* its memory goes with the transaction */
	if (ring == NULL || xact_last_seq == 0)
		return;
	switch (event)
	{
		case XACT_EVENT_COMMIT:
			pg_write_barrier();
			pg_atomic_write_u64(&ring->published, (uint64) xact_last_seq);
			break;
		case XACT_EVENT_ABORT:
			/* the next transaction reuses these seqs */
			pg_atomic_write_u64(&ring->written,
								pg_atomic_read_u64(&ring->published));
			break;
		default:
			return;
	}
	xact_last_seq = 0;
}

/*
 * kw_events_writer_init: registers the transaction callback of a process
 * that appends events (the worker, worker.c, and each apply worker,
 * apply_worker.c): it checks the last seq was saved (PRE_COMMIT, else
 * ERROR), publishes (COMMIT) or discards (ABORT) the events a transaction
 * appended.  Once per process.
 */
void
kw_events_writer_init(void)
{
	RegisterXactCallback(events_xact_callback, NULL);
}

/*
 * kw_events_restore: continues the sequence from
 * max(kwatch.event_state.last_seq, the shared counter) + 1.  Reads the
 * table through SPI, so it must run in a transaction with SPI connected
 * (the worker's registration reload), under the writers' lock (taken here:
 * it waits for a committing writer).  Repeated calls are cheap no-ops once
 * the ring is ready, unless the table is ahead of shared memory (restored
 * from a dump), in which case the ring restarts after the table's value.
 */
void
kw_events_restore(void)
{
	int64		persisted = 0;
	uint64		published;
	bool		isnull;

	if (ring == NULL)
		return;
	/* no writer between its commit and its COMMIT callback meanwhile */
	LockRelationOid(event_state_relid(), ShareRowExclusiveLock);
	if (SPI_execute("SELECT max(last_seq) FROM kwatch.event_state", true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read kwatch.event_state");
	if (SPI_processed > 0)
	{
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		if (!isnull)
			persisted = DatumGetInt64(d);
	}
	published = pg_atomic_read_u64(&ring->published);
	if (persisted > 0 && (uint64) persisted > published)
	{
		/* a restart (empty ring) or a table ahead of us: start after it */
		pg_atomic_write_u64(&ring->first, (uint64) persisted + 1);
		pg_atomic_write_u64(&ring->high_water, (uint64) persisted);
		pg_atomic_write_u64(&ring->written, (uint64) persisted);
		pg_write_barrier();
		pg_atomic_write_u64(&ring->published, (uint64) persisted);
	}
	pg_atomic_write_u32(&ring->ready, 1);
}

static bool
copy_field(char *dst, size_t size, const char *src)
{
	size_t		len;

	if (src == NULL)
	{
		dst[0] = '\0';
		return false;
	}
	len = strlen(src);
	if (len < size)
	{
		memcpy(dst, src, len + 1);
		return false;
	}
	/* cut on a character boundary; the row says "truncated" */
	len = pg_mbcliplen(src, len, size - 1);
	memcpy(dst, src, len);
	dst[len] = '\0';
	return true;
}

/*
 * kw_events_add: queues change `c` of watch `reg` (its identity and flags,
 * KwChange; strings are copied, `reg` must outlive the transaction) for
 * the event stream and, when `notify`, for a NOTIFY on the watch's channel
 * (notify.c), both numbered and written by kw_events_checkpoint at the end
 * of the applying transaction.  Must run inside that transaction, after
 * the row change.  Takes no lock.
 */
void
kw_events_add(KwRegistration *reg, const KwChange *c, bool notify)
{
	MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
	PendingChange *p = palloc(sizeof(PendingChange));

	p->reg = reg;
	p->notify = notify;
	p->c = *c;
	p->c.namespace = c->namespace ? pstrdup(c->namespace) : NULL;
	p->c.name = c->name ? pstrdup(c->name) : NULL;
	p->c.uid = c->uid ? pstrdup(c->uid) : NULL;
	p->c.resource_version = c->resource_version ? pstrdup(c->resource_version) : NULL;
	p->c.previous_resource_version = c->previous_resource_version ?
		pstrdup(c->previous_resource_version) : NULL;
	xact_pending = lappend(xact_pending, p);
	MemoryContextSwitchTo(old);
}

/*
 * write_slot: writes change `c` of watch `reg` into the ring as the next
 * seq and returns it.  The caller holds the writers' lock.  Text longer
 * than a slot field (never for valid Kubernetes objects) is cut on a
 * character boundary and the row marked truncated.
 */
static int64
write_slot(KwRegistration *reg, const KwChange *c)
{
	KwEventSlot *slot;
	KwEventRecord *r;
	uint64		seq;
	char		resource[KW_EV_RESOURCE_LEN + 64];
	bool		cut = false;

	if (reg->api_group && reg->api_group[0])
		snprintf(resource, sizeof(resource), "%s.%s", reg->plural, reg->api_group);
	else
		snprintf(resource, sizeof(resource), "%s", reg->plural);

	seq = pg_atomic_read_u64(&ring->written) + 1;
	slot = &ring->slots[seq % (uint64) ring->nslots];
	r = &slot->rec;

	/* seqlock write: odd counter, data, even counter (backend_status.h) */
	pg_atomic_fetch_add_u32(&slot->changecount, 1);
	pg_write_barrier();
	r->seq = (int64) seq;
	r->xid = GetTopTransactionId();
	r->at = GetCurrentTimestamp();
	r->type = (uint8) c->type;
	cut |= copy_field(r->cluster, sizeof(r->cluster), reg->server);
	cut |= copy_field(r->resource, sizeof(r->resource), resource);
	cut |= copy_field(r->table_name, sizeof(r->table_name), reg->table_name);
	r->has_namespace = (c->namespace != NULL);
	cut |= copy_field(r->namespace, sizeof(r->namespace), c->namespace);
	cut |= copy_field(r->name, sizeof(r->name), c->name);
	cut |= copy_field(r->uid, sizeof(r->uid), c->uid);
	cut |= copy_field(r->resource_version, sizeof(r->resource_version), c->resource_version);
	r->preexisting = c->preexisting;
	r->final_state_unknown = c->final_state_unknown;
	r->has_previous = (c->previous_resource_version != NULL);
	cut |= copy_field(r->previous_resource_version, sizeof(r->previous_resource_version),
					  c->previous_resource_version);
	r->truncated = cut;
	pg_write_barrier();
	pg_atomic_fetch_add_u32(&slot->changecount, 1);

	pg_atomic_write_u64(&ring->written, seq);
	if (seq > pg_atomic_read_u64(&ring->high_water))
		pg_atomic_write_u64(&ring->high_water, seq);
	return (int64) seq;
}

/*
 * kw_events_checkpoint: numbers the changes the current transaction
 * queued (kw_events_add), in order: writes each into the ring and queues
 * its NOTIFY with its seq (seq 0 when kwatch is not preloaded: no ring),
 * then stores the last seq in kwatch.event_state (same transaction as the
 * rows), so the sequence continues after a restart.  From here until the
 * transaction ends this process is the only writer (see the file header):
 * call it last, after every statement that may run a table owner's code.
 * No-op when nothing was queued.  Needs SPI connected.  ERRORs roll the
 * apply back; so does committing queued changes without calling this (the
 * PRE_COMMIT check).
 */
void
kw_events_checkpoint(void)
{
	Datum		arg;
	int			rc;
	ListCell   *lc;

	if (xact_pending == NIL)
		return;
	if (ring != NULL)
	{
		if (pg_atomic_read_u32(&ring->ready) == 0)
			elog(ERROR, "kwatch event ring used before its sequence was restored");
		if (xact_last_seq == 0)
		{
			/*
			 * Become the only writer until the transaction ends (released
			 * with its locks, after the COMMIT/ABORT callback).  As the only
			 * writer, anything written but not published is an aborted
			 * transaction's: reuse those seqs.
			 */
			int			save_lock_timeout = LockTimeout;

			/*
			 * Waited for as long as it takes: only kwatch's writers take it,
			 * each for its commit only.
			 */
			LockTimeout = 0;
			PG_TRY();
			{
				LockRelationOid(event_state_relid(), ShareRowExclusiveLock);
			}
			PG_FINALLY();
			{
				LockTimeout = save_lock_timeout;
			}
			PG_END_TRY();
			pg_atomic_write_u64(&ring->written, pg_atomic_read_u64(&ring->published));
		}
	}
	foreach(lc, xact_pending)
	{
		PendingChange *p = (PendingChange *) lfirst(lc);
		int64		seq = ring ? write_slot(p->reg, &p->c) : 0;

		if (seq > 0)
			xact_last_seq = seq;
		if (p->notify)
			kw_notify(p->reg, &p->c, seq);
	}
	xact_pending = NIL;
	if (xact_last_seq == 0)
		return;

	if (checkpoint_plan == NULL)
	{
		Oid			type = INT8OID;

		checkpoint_plan = SPI_prepare("INSERT INTO kwatch.event_state AS s (one, last_seq) "
									  "VALUES (true, $1) ON CONFLICT (one) "
									  "DO UPDATE SET last_seq = GREATEST(s.last_seq, EXCLUDED.last_seq)",
									  1, &type);
		if (checkpoint_plan == NULL || SPI_keepplan(checkpoint_plan) != 0)
			elog(ERROR, "could not prepare the event_state update");
	}
	arg = Int64GetDatum(xact_last_seq);
	rc = SPI_execute_plan(checkpoint_plan, &arg, NULL, false, 0);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "event_state update failed: %s", SPI_result_code_string(rc));
}

/* ---------------------------------------------------------------------
 * readers (any backend)
 * ---------------------------------------------------------------------
 */

/*
 * kw_events_available: whether this server has a ring whose sequence the
 * worker has restored (false when kwatch is not preloaded, or before the
 * worker's first start).
 */
bool
kw_events_available(void)
{
	return ring != NULL && pg_atomic_read_u32(&ring->ready) != 0;
}

/*
 * kw_events_last_seq: seq of the last event of a committed transaction
 * (0 before the first one ever).  Beyond `published` (set by the writer's
 * COMMIT callback), also the events of a transaction pg_xact already
 * records as committed (kw_events_read): a listener can receive a
 * transaction's NOTIFY before its writer's callback ran (async.c delivers
 * an entry once its xid committed), and must then find events_last_seq()
 * at least the notified seq.
 */
int64
kw_events_last_seq(void)
{
	uint64		last = pg_atomic_read_u64(&ring->published);
	uint64		written = pg_atomic_read_u64(&ring->written);
	KwEventRecord rec;

	while (last < written && kw_events_read((int64) last + 1, &rec) == KW_EVREAD_OK)
		last++;
	return (int64) last;
}

/*
 * kw_events_oldest_seq: the oldest seq the ring may still return; events
 * below it were overwritten or predate the last restart.  When nothing is
 * retained this is kw_events_last_seq() + 1 (the next event).  Conservative:
 * right after an aborted transaction it may be higher than strictly needed.
 */
int64
kw_events_oldest_seq(void)
{
	uint64		first = pg_atomic_read_u64(&ring->first);
	uint64		hw = pg_atomic_read_u64(&ring->high_water);
	uint64		oldest = first;

	if (hw >= (uint64) ring->nslots && hw - ring->nslots + 1 > oldest)
		oldest = hw - ring->nslots + 1;
	return (int64) oldest;
}

/*
 * kw_events_scan_bound: the highest seq a scan starting now may return
 * (events above it are not written yet).
 */
int64
kw_events_scan_bound(void)
{
	return (int64) pg_atomic_read_u64(&ring->written);
}

/*
 * kw_events_read: copies the event with sequence number `seq` into *out.
 * Returns KW_EVREAD_OK, KW_EVREAD_GONE (overwritten: the caller continues
 * from kw_events_oldest_seq()), or KW_EVREAD_NOT_YET (not written, or
 * written by a transaction that has not committed or aborted: the scan
 * ends).  Never blocks the writer: retries while the slot changes under it.
 */
KwEventReadResult
kw_events_read(int64 seq, KwEventRecord *out)
{
	KwEventSlot *slot = &ring->slots[(uint64) seq % (uint64) ring->nslots];
	uint64		published;

	/*
	 * Read `published` before the slot: if seq was published by then, the
	 * slot can only have been rewritten since with seq + k * nslots (which
	 * the seq check below sees), never with an aborted transaction's data.
	 */
	published = pg_atomic_read_u64(&ring->published);
	pg_read_barrier();
	for (;;)
	{
		uint32		before = pg_atomic_read_u32(&slot->changecount);
		uint32		after;

		pg_read_barrier();
		memcpy(out, &slot->rec, sizeof(KwEventRecord));
		pg_read_barrier();
		after = pg_atomic_read_u32(&slot->changecount);
		if (before == after && (before & 1) == 0)
			break;
		CHECK_FOR_INTERRUPTS();
		pg_spin_delay();
	}

	if (out->seq > seq)
		return KW_EVREAD_GONE;
	if (out->seq < seq)
		return KW_EVREAD_NOT_YET;
	if ((uint64) seq <= published)
		return KW_EVREAD_OK;

	/*
	 * Above published: the worker's COMMIT callback has not run yet, or the
	 * transaction is in flight or aborted.  Visible once pg_xact records its
	 * xid as committed (a recent xid: such slots never outlive the worker's
	 * next transaction).
	 */
	if (TransactionIdIsValid(out->xid) && TransactionIdDidCommit(out->xid))
		return KW_EVREAD_OK;
	return KW_EVREAD_NOT_YET;
}

/*
 * kw_events_ring_slots: kwatch.event_buffer as sized at postmaster start.
 */
int
kw_events_ring_slots(void)
{
	return ring ? ring->nslots : 0;
}
