"""What a relist and a change cost in writes (issue 10, item 4).  Imported by
bench.py; every function returns a dict.

relist_unchanged: kwatch.relist('pods', wait => true) of N objects none of
  which changed since the last sync.  Rows rewritten = rows whose (xmin,
  ctid) differ afterwards, or that appeared or vanished (a snapshot of every
  row's xmin and ctid is taken first: an UPDATE, even to the same value, gives
  the row a new xmin); notifications = those received on a LISTENing
  connection plus the watch's `notifications` counter delta; WAL = bytes
  between pg_current_wal_insert_lsn() before and after, broken down by
  resource manager with pg_walinspect (full-page images counted apart).
wal_per_event: M merge-PATCHes of M pods (one label each, 8 clients at a
  time) right after a CHECKPOINT, waited for until the watch counted M more
  MODIFIED events; WAL bytes / M, with the full-page-image share (the first
  change of a page after a checkpoint logs the whole page).
Both run after VACUUM ANALYZE of the mirror, so that autovacuum has nothing to
write meanwhile.
"""
import concurrent.futures
import json
import select
import time

import psycopg2

from bench import NS, api


def walinspect(cur):
    """True when pg_walinspect (PostgreSQL 15 contrib) could be created."""
    try:
        cur.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        return True
    except psycopg2.Error:
        return False


def wal_since(cur, start, have_walinspect):
    """(bytes, full-page-image bytes, {rmgr: bytes}) from start to now.  The
    breakdown needs the WAL flushed: it reads up to the flush LSN, which a
    commit (synchronous_commit is on) moves past its own records."""
    cur.execute("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s)::bigint", (start,))
    total = cur.fetchone()[0]
    if not have_walinspect:
        return total, None, {}
    cur.execute('SELECT "resource_manager/record_type", count, combined_size, fpi_size'
                " FROM pg_get_wal_stats(%s, pg_current_wal_flush_lsn()) WHERE count > 0", (start,))
    by = {}
    fpi = 0
    for rmgr, count, size, fpi_size in cur.fetchall():
        by[rmgr] = {"records": count, "bytes": size, "fpi_bytes": fpi_size}
        fpi += fpi_size
    return total, fpi, by


def watch_counters(cur, server):
    cur.execute("SELECT added, modified, deleted, notifications, relists, list_calls"
                " FROM kwatch.watches WHERE server = %s AND resource = 'pods'", (server,))
    return dict(zip(("added", "modified", "deleted", "notifications", "relists", "list_calls"),
                    cur.fetchone()))


def drain(lconn, wait):
    """Notifications arriving on lconn within `wait` s of silence."""
    got = 0
    while select.select([lconn], [], [], wait) != ([], [], []):
        lconn.poll()
        got += len(lconn.notifies)
        lconn.notifies.clear()
    return got


def prepare(cur):
    cur.execute("VACUUM ANALYZE k8s.pods")
    cur.execute("CHECKPOINT")


def relist_unchanged(conn, server):
    cur = conn.cursor()
    have_wi = walinspect(cur)
    prepare(cur)
    cur.execute("DROP TABLE IF EXISTS pg_temp.before_relist")
    cur.execute("CREATE TEMP TABLE before_relist AS SELECT uid, xmin::text AS x, ctid AS c FROM k8s.pods"
                " WHERE cluster = %s", (server,))
    n = cur.rowcount
    lconn = psycopg2.connect("")
    lconn.autocommit = True
    lconn.cursor().execute("LISTEN kwatch_pods")
    c0 = watch_counters(cur, server)
    cur.execute("SELECT pg_current_wal_insert_lsn()")
    lsn = cur.fetchone()[0]
    t0 = time.monotonic()
    cur.execute("SELECT kwatch.relist('pods', server => %s, wait => true)", (server,))
    took = time.monotonic() - t0
    notified = drain(lconn, 1.0)
    lconn.close()
    c1 = watch_counters(cur, server)
    wal, fpi, by = wal_since(cur, lsn, have_wi)
    cur.execute("""SELECT count(*) FILTER (WHERE b.uid IS NULL),
                          count(*) FILTER (WHERE p.uid IS NULL),
                          count(*) FILTER (WHERE b.uid IS NOT NULL AND p.uid IS NOT NULL
                                             AND (b.x <> p.xmin::text OR b.c <> p.ctid))
                     FROM (SELECT uid, xmin, ctid FROM k8s.pods WHERE cluster = %s) p
                     FULL JOIN pg_temp.before_relist b USING (uid)""", (server,))
    inserted, deleted, updated = cur.fetchone()
    cur.execute("DROP TABLE pg_temp.before_relist")
    return {"objects": n, "seconds": took, "rows_rewritten": updated, "rows_inserted": inserted,
            "rows_deleted": deleted, "notifications_received": notified,
            "notifications_counted": c1["notifications"] - c0["notifications"],
            "list_calls": c1["list_calls"] - c0["list_calls"],
            "events_counted": sum(c1[k] - c0[k] for k in ("added", "modified", "deleted")),
            "wal_bytes": wal, "wal_fpi_bytes": fpi, "wal_by_rmgr": by}


def wal_per_event(conn, server, m, clients=8):
    cur = conn.cursor()
    have_wi = walinspect(cur)
    prepare(cur)
    cur.execute("SELECT namespace, name FROM k8s.pods WHERE cluster = %s AND namespace = %s"
                " ORDER BY name LIMIT %s", (server, NS, m))
    targets = cur.fetchall()
    c0 = watch_counters(cur, server)
    cur.execute("SELECT pg_current_wal_insert_lsn()")
    lsn = cur.fetchone()[0]
    stamp = str(time.time_ns())
    t0 = time.monotonic()

    def patch(t):
        s, b = api("PATCH", "/api/v1/namespaces/%s/pods/%s" % t,
                   {"metadata": {"labels": {"bench-wal": stamp}}}, ctype="application/merge-patch+json")
        if s != 200:
            raise RuntimeError("PATCH %s: %d %s" % (t[1], s, b[:200]))
    with concurrent.futures.ThreadPoolExecutor(clients) as ex:
        list(ex.map(patch, targets))
    sent = time.monotonic() - t0
    while True:
        c1 = watch_counters(cur, server)
        if c1["modified"] - c0["modified"] >= len(targets):
            break
        if time.monotonic() - t0 > 300:
            raise RuntimeError("the PATCHes were not all applied within 300 s")
        time.sleep(0.05)
    applied = time.monotonic() - t0
    wal, fpi, by = wal_since(cur, lsn, have_wi)
    events = c1["modified"] - c0["modified"]
    return {"events": events, "patch_seconds": sent, "applied_seconds": applied,
            "events_per_s": events / applied, "wal_bytes": wal, "wal_fpi_bytes": fpi,
            "wal_bytes_per_event": wal / events,
            "wal_bytes_per_event_without_fpi": (wal - fpi) / events if fpi is not None else None,
            "notifications": c1["notifications"] - c0["notifications"], "wal_by_rmgr": by}


if __name__ == "__main__":
    c = psycopg2.connect("")
    c.autocommit = True
    print(json.dumps({"relist": relist_unchanged(c, "bench"), "events": wal_per_event(c, "bench", 200)},
                     indent=1))
