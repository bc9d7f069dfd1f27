/*-------------------------------------------------------------------------
 *
 * watch_status.c
 *		What a watch publishes in its shared status slot (kw_worker.h
 *		KwWatchStatus: kwatch.watches, wait_synced(), the metrics): its
 *		state, progress, counters and last error.  Called by watch.c and
 *		watch_result.c, in the worker; it reads the watch and writes only
 *		its slot.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/timestamp.h"

#include "kw_common.h"
#include "kw_status.h"
#include "kw_apply.h"
#include "kw_worker.h"
#include "kw_watch.h"

/*
 * kw_watch_set_state: shows `st` as the watch's state (since now, when it
 * changed; healthy while watching) and wakes wait_synced() on a change.
 */
void
kw_watch_set_state(KwWatch *w, KwWatchState st)
{
	bool		changed;

	LWLockAcquire(kw_shared->lock, LW_EXCLUSIVE);
	changed = (w->slot->state != st);
	if (changed)
	{
		w->slot->state = st;
		w->slot->state_since = GetCurrentTimestamp();
	}
	w->slot->healthy = (st == KW_STATE_WATCHING);
	LWLockRelease(kw_shared->lock);
	if (changed)
		kw_status_broadcast();	/* wait_synced fails on "failed" */
}

/*
 * kw_watch_set_synced: publishes whether the table holds a committed LIST with no
 * relist pending (kwatch.wait_synced, client-go's HasSynced); `list_done`
 * counts a LIST merged and committed.
 */
void
kw_watch_set_synced(KwWatch *w, bool synced, bool list_done)
{
	LWLockAcquire(kw_shared->lock, LW_EXCLUSIVE);
	w->slot->synced = synced;
	if (list_done)
		w->slot->syncs++;
	LWLockRelease(kw_shared->lock);
	kw_status_broadcast();
}

/*
 * kw_watch_publish_progress: shows the watch's resume resourceVersion (its
 * committed checkpoint: called only after a commit or when the watch is
 * loaded) and object count, and wakes kwatch.wait_current() (wait_current.c),
 * which waits for that checkpoint to reach the server's resourceVersion.
 */
void
kw_watch_publish_progress(KwWatch *w)
{
	LWLockAcquire(kw_shared->lock, LW_EXCLUSIVE);
	strlcpy(w->slot->resource_version, w->resume_rv ? w->resume_rv : "",
			KW_RV_LEN);
	w->slot->objects = w->objects;
	LWLockRelease(kw_shared->lock);
	kw_status_broadcast();
}

/*
 * kw_watch_count_apply: adds what one apply did (rows added, modified,
 * deleted, notifications) to the counters; `sync_done` stamps last_sync_at.
 */
void
kw_watch_count_apply(KwWatch *w, KwApplyCounts *c, bool sync_done)
{
	LWLockAcquire(kw_shared->lock, LW_EXCLUSIVE);
	w->slot->added += c->added;
	w->slot->modified += c->modified;
	w->slot->deleted += c->deleted;
	w->slot->notifications += c->notified;
	if (sync_done)
		w->slot->last_sync_at = GetCurrentTimestamp();
	LWLockRelease(kw_shared->lock);
}

/*
 * kw_watch_record_error: counts an error by source, shows it in last_error and logs
 * it with the watch's identity.
 */
void
kw_watch_record_error(KwWatch *w, KwErrorSource src, const char *msg)
{
	LWLockAcquire(kw_shared->lock, LW_EXCLUSIVE);
	w->slot->errors[src]++;
	strlcpy(w->slot->last_error, msg, KW_ERROR_LEN);
	w->slot->last_error_at = GetCurrentTimestamp();
	LWLockRelease(kw_shared->lock);
	ereport(LOG,
			(errmsg("kwatch: %s on server \"%s\": %s",
					w->reg.api_group[0] ? psprintf("%s.%s", w->reg.plural, w->reg.api_group) : w->reg.plural,
					w->reg.server, msg)));
}
