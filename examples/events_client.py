#!/usr/bin/python3
"""A kwatch event-stream client that never misses a change (README "Event stream").

It keeps a local cache {(cluster, uid): (namespace, name, resource_version)}
of one mirror table and follows it with LISTEN, catching up from
kwatch.events whenever it may have missed something, and re-reading the
table (a relist) when the events it needs are no longer in the ring.

usage: events_client.py TABLE [SECONDS]    (connection from PG* variables)

    e.g.  PGDATABASE=app examples/events_client.py pods 60

prints one line per change and, at the end, the size of its cache.  The
integration tests (test/integration/test_events.py) drive the EventClient
class directly: disconnect it, change 1,000 objects, reconnect, and compare
its cache with the table.

The recipe, for a client whose last applied event is `last`:
  1. LISTEN kwatch_<table> *before* reading anything, so nothing falls
     between the read and the LISTEN.
  2. upto = kwatch.events_last_seq() (every event up to it is committed; at
     least the seq of the notification that woke us).  Read
            SELECT ... FROM kwatch.events
            WHERE seq > last AND seq <= upto AND table_name = T ORDER BY seq
  3. Then   SELECT kwatch.events_oldest_seq()   (after the read: conservative).
     If it is > last + 1, events were overwritten before we got them: relist.
     Else apply the rows; last = upto.
  4. Relist: L = kwatch.events_last_seq() first, then read the table; the
     cache now reflects at least every event <= L; last = L.  Events > L that
     the table already reflected are re-applied later, which is harmless.
  5. Each NOTIFY is a wake-up and nothing more: go to step 2.  Its payload
     is never read: channels are public, so any role can send a
     notification on one (with any payload, even a plausible seq; from a
     table owner's trigger run by the worker, even with the worker's PID).
     What is applied, and `last`, come only from kwatch.events and
     kwatch.events_last_seq(), which only kwatch writes (issue 22).
"""
import select
import signal
import sys
import time

import psycopg2
import psycopg2.extensions


class EventClient:
    def __init__(self, dsn, table, log=None):
        self.dsn, self.table = dsn, table
        self.channel = "kwatch_" + table
        self.cache = {}          # (cluster, uid) -> (namespace, name, resource_version)
        self.last = None         # seq of the last event reflected in the cache
        self.relists = 0         # how often the ring did not have what we needed
        self.applied = []        # (seq, type, cluster, uid) in the order applied
        self.log = log
        self.conn = None

    # -- connection
    def connect(self):
        """(Re)connects, LISTENs, and catches up (or relists on first use)."""
        self.conn = psycopg2.connect(self.dsn)
        self.conn.autocommit = True
        with self.conn.cursor() as cur:
            cur.execute("LISTEN " + psycopg2.extensions.quote_ident(self.channel, cur))
        if self.last is None:
            self.relist()
        else:
            self.catch_up()

    def disconnect(self):
        if self.conn is not None:
            self.conn.close()
        self.conn = None

    # -- the recipe
    def relist(self):
        """Step 4: the mirror table replaces the cache; last = events_last_seq() read first."""
        with self.conn.cursor() as cur:
            cur.execute("SELECT kwatch.events_last_seq()")
            last = cur.fetchone()[0]
            if last is None:
                raise RuntimeError("the event stream is not available yet (worker not started)")
            cur.execute("SELECT cluster, uid, namespace, name, resource_version FROM k8s.%s"
                        % psycopg2.extensions.quote_ident(self.table, cur))
            self.cache = {(c, u): (ns, n, rv) for c, u, ns, n, rv in cur.fetchall()}
        self.last = last
        self.relists += 1
        if self.log:
            self.log("relist: %d objects, continuing after seq %d" % (len(self.cache), last))

    def catch_up(self):
        """Steps 2 and 3: apply every event after self.last, or relist if some are gone.

        `upto` is read first: every event up to it is committed, so the scan
        sees all of them (those of other tables are skipped past, not lost).
        It is at least the seq of any real notification that woke us: kwatch
        commits an event before its notification is delivered."""
        before = self.last
        with self.conn.cursor() as cur:
            cur.execute("SELECT kwatch.events_last_seq()")
            upto = cur.fetchone()[0]
            if upto is None or upto < before:
                # no stream yet, or a new one (extension re-created after a restart)
                return self.relist()
            cur.execute("SELECT seq, type, cluster, namespace, name, uid, resource_version"
                        " FROM kwatch.events WHERE seq > %s AND seq <= %s AND table_name = %s"
                        " ORDER BY seq", (before, upto, self.table))
            rows = cur.fetchall()
            cur.execute("SELECT kwatch.events_oldest_seq()")
            oldest = cur.fetchone()[0]
        if oldest > before + 1:
            return self.relist()  # some events after `before` were overwritten
        for seq, type_, cluster, ns, name, uid, rv in rows:
            self.apply(seq, type_, cluster, ns, name, uid, rv)
        self.last = upto

    def apply(self, seq, type_, cluster, ns, name, uid, rv):
        if type_ == "DELETED":
            self.cache.pop((cluster, uid), None)
        else:
            self.cache[(cluster, uid)] = (ns, name, rv)
        self.applied.append((seq, type_, cluster, uid))
        self.last = seq
        if self.log:
            self.log("%d %s %s/%s %s" % (seq, type_, ns or "", name, rv))

    def on_notify(self, payload):
        """Step 5: a notification only wakes us; its payload (anyone's, any
        text) is not looked at."""
        self.catch_up()

    def run(self, seconds):
        """Follows notifications for `seconds`."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            # notifications that arrived while a catch-up query ran are already
            # in conn.notifies, not on the socket: look there before waiting,
            # or their wakeup is lost until the next one
            if not self.conn.notifies:
                if select.select([self.conn], [], [],
                                 min(1.0, max(0.0, end - time.monotonic()))) == ([], [], []):
                    continue
                self.conn.poll()
            if self.conn.notifies:
                # one catch-up reads everything the notifications announced
                payloads = [n.payload for n in self.conn.notifies]
                del self.conn.notifies[:]
                self.on_notify(payloads[-1])


def _stop(signum, frame):
    raise KeyboardInterrupt


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    client = EventClient("", sys.argv[1], log=print)
    client.connect()
    # Ctrl-C or a plain kill (SIGTERM): stop and print the summary below (a
    # process started in the background ignores SIGINT, so both are handled)
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        client.run(float(sys.argv[2]) if len(sys.argv) > 2 else 3600)
    except KeyboardInterrupt:      # Ctrl-C: stop, and say where the cache stands
        pass
    print("%d objects cached, last seq %d, %d relists" % (len(client.cache), client.last,
                                                         client.relists))


if __name__ == "__main__":
    main()
