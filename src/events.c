/*-------------------------------------------------------------------------
 *
 * events.c
 *		The event stream: a bounded ring in shared memory holding every
 *		change the worker applied, numbered by a sequence that only grows.
 *		kwatch.events (events_fdw.c) reads it.
 *
 * Writers: the worker, and the background merges it starts for large
 * relists (merge.c), one transaction at a time.  A transaction that
 * appends holds SHARE ROW EXCLUSIVE on kwatch.event_state (a mode that
 * conflicts with itself only among the writers' modes, not with readers of
 * the table) from its first append until it ends: seqs are then handed out
 * in commit order, which readers rely on (a scan ends at the first event
 * not committed).  Each applied ADDED/MODIFIED/DELETED (watch events and
 * relist merges and sweeps alike, sync.c) takes the next seq and is written
 * straight into slot seq % kwatch.event_buffer, stamped with the applying
 * transaction's xid; its NOTIFY carries the same seq.  Nothing is
 * WAL-logged here; only the last seq of each applying transaction is
 * stored, in kwatch.event_state, in that same transaction
 * (kw_events_checkpoint).
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
#include "storage/shmem.h"
#include "utils/timestamp.h"

#include "kw_common.h"
#include "kw_events.h"

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

/* worker only: seqs appended by the current transaction */
static int64 xact_last_seq = 0;
static int64 xact_saved_seq = 0;	/* written to kwatch.event_state */
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
	if (ring == NULL || xact_last_seq == 0)
		return;
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:

			/*
			 * Committing events whose last seq is not in event_state would
			 * let a restart reuse their numbers: refuse (rolls back).
			 */
			if (xact_saved_seq != xact_last_seq)
				ereport(ERROR,
						(errcode(ERRCODE_INTERNAL_ERROR),
						 errmsg("kwatch: events up to seq " INT64_FORMAT " were not saved in kwatch.event_state",
								xact_last_seq)));
			return;
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
	xact_last_seq = xact_saved_seq = 0;
}

/*
 * kw_events_writer_init: registers the transaction callback of a process
 * that appends events (the worker, a background merge, merge.c): it checks
 * the last seq was saved (PRE_COMMIT, else ERROR), publishes (COMMIT) or
 * discards (ABORT) the events a transaction appended.  Once per process.
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
 * (the worker's registration reload).  Repeated calls are cheap no-ops once
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
 * kw_events_append: appends change `c` of watch `reg` (its identity and
 * flags, KwChange) to the ring and returns its seq (> 0), or 0 when there
 * is no ring (kwatch not preloaded).  Must run inside the applying
 * transaction, after the row change (the slot carries its xid; the event is
 * published at COMMIT and its seq reused on abort).  c->namespace and
 * c->previous_resource_version may be NULL; text
 * longer than a slot field (never for valid Kubernetes objects) is cut on
 * a character boundary and the row marked truncated.  Worker only.
 */
int64
kw_events_append(KwRegistration *reg, const KwChange *c)
{
	KwEventSlot *slot;
	KwEventRecord *r;
	uint64		seq;
	char		resource[KW_EV_RESOURCE_LEN + 64];
	bool		cut = false;

	if (ring == NULL)
		return 0;
	if (pg_atomic_read_u32(&ring->ready) == 0)
		elog(ERROR, "kwatch event ring used before its sequence was restored");
	if (xact_last_seq == 0)
	{
		/*
		 * The first append of this transaction: become the only writer
		 * until it ends (released with the transaction's locks, after the
		 * COMMIT/ABORT callback below).  As the only writer, anything
		 * written but not published is an aborted transaction's: reuse
		 * those seqs (its ABORT callback did the same, but a writer that
		 * died uncleanly took the server down with it anyway).
		 */
		LockRelationOid(event_state_relid(), ShareRowExclusiveLock);
		pg_atomic_write_u64(&ring->written, pg_atomic_read_u64(&ring->published));
	}

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

	xact_last_seq = (int64) seq;
	return (int64) seq;
}

/*
 * kw_events_checkpoint: stores the last seq appended by the current
 * transaction in kwatch.event_state (same transaction as the rows), so the
 * sequence continues after a restart.  No-op when nothing was appended.
 * Needs SPI connected.  ERRORs roll the apply back; so does committing
 * appended events without calling this (the PRE_COMMIT check).
 */
void
kw_events_checkpoint(void)
{
	Datum		arg;
	int			rc;

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
	xact_saved_seq = xact_last_seq;
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
 * (0 before the first one ever).
 */
int64
kw_events_last_seq(void)
{
	return (int64) pg_atomic_read_u64(&ring->published);
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
