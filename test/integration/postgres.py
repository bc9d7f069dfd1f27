"""The throwaway PostgreSQL of test/drivers/pg.sh: the session's Postgres (PG, set
by conftest's session fixture), statements on its shared connection, and a
LISTENing connection that collects notifications."""
import json
import os
import select
import threading
import time
from pathlib import Path

import psycopg2
from psycopg2 import sql as pgsql

from common import SCRIPTS, TEST_DIR, run, wait_until

PG_DIR = TEST_DIR / "pg"
PG_SH = SCRIPTS / "pg.sh"
DB = "kwatch_it"

PG = None  # Postgres, set by the session fixture


class Postgres:
    """The throwaway PostgreSQL of test/drivers/pg.sh, plus one shared autocommit
    connection.  `conf`: more postgresql.conf lines for its initdb (pg.sh's
    KWATCH_PG_CONF), e.g. "wal_level = logical"; `db`: the database created,
    connected to and served by the worker (kwatch.database)."""

    def __init__(self, directory, port, conf=(), db=DB):
        self.dir = Path(directory)
        self.port = port
        self.conf = list(conf)
        self.db = db
        self._conn = None

    @property
    def log_path(self):
        return self.dir / "postgres.log"

    def start(self):
        """initdb (the first time, with self.conf), start, create the database."""
        env = dict(os.environ, KWATCH_PG_CONF="\n".join(self.conf)) if self.conf else None
        run(["bash", PG_SH, "start", self.dir, self.port, self.db], env=env)

    def stop(self):
        self.close()
        run(["bash", PG_SH, "stop", self.dir])

    def restart(self):
        self.close()
        run(["bash", PG_SH, "restart", self.dir])

    def running(self):
        try:
            psycopg2.connect(**self.dsn(connect_timeout=2)).close()
            return True
        except psycopg2.OperationalError:
            return False

    def dsn(self, **kw):
        d = dict(host=str(self.dir), port=self.port, dbname=self.db, user="postgres")
        d.update(kw)
        return d

    def connect(self, autocommit=True):
        conn = psycopg2.connect(**self.dsn())
        conn.autocommit = autocommit
        return conn

    @property
    def conn(self):
        if self._conn is None or self._conn.closed:
            self._conn = self.connect()
        return self._conn

    def close(self):
        if self._conn is not None and not self._conn.closed:
            self._conn.close()
        self._conn = None

    def log_size(self):
        try:
            return self.log_path.stat().st_size
        except FileNotFoundError:
            return 0

    def log_since(self, offset=0):
        """The PostgreSQL log from byte `offset` (see log_size)."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""


def sql(query, params=None, conn=None):
    """Runs a statement (autocommit on the shared connection unless conn); returns all rows."""
    c = conn if conn is not None else PG.conn
    with c.cursor() as cur:
        cur.execute(query, params)
        return cur.fetchall() if cur.description is not None else []


def sql_one(query, params=None, conn=None):
    """The first column of the first row (None when there is no row)."""
    rows = sql(query, params, conn)
    return rows[0][0] if rows else None


def quietly(fn):
    """fn() made safe to poll across a PostgreSQL restart: None on a
    database error (the session's connection is dropped, to reconnect)."""
    def call():
        try:
            return fn()
        except psycopg2.Error:
            PG.close()
            return None
    return call


class Listener:
    """LISTENs on a channel in its own connection and collects payloads.

    When `table` is given, each notification is followed at once, on the
    listener's connection, by a SELECT of the row it names; `seen` holds
    (payload, resource_version of the row or None) in arrival order, which
    tells whether the row was visible when the notification arrived.
    """

    def __init__(self, channel, table=None):
        self.channel = channel
        self.table = table
        self.conn = PG.connect()
        self.seen = []
        with self.conn.cursor() as cur:
            cur.execute(pgsql.SQL("LISTEN {}").format(pgsql.Identifier(channel)))

    def poll(self, timeout=0.0):
        if select.select([self.conn], [], [], timeout)[0] or timeout == 0:
            self.conn.poll()
        while self.conn.notifies:
            n = self.conn.notifies.pop(0)
            payload = json.loads(n.payload)
            row_rv = None
            if self.table:
                with self.conn.cursor() as cur:
                    cur.execute("SELECT resource_version FROM %s WHERE cluster = %%s AND uid = %%s"
                                % self.table, (payload.get("cluster"), payload.get("uid")))
                    r = cur.fetchone()
                    row_rv = r[0] if r else None
            self.seen.append((payload, row_rv))

    def payloads(self, cluster=None, type=None, uid=None, name=None):
        self.poll()
        return [p for p, _ in self.seen
                if (cluster is None or p.get("cluster") == cluster)
                and (type is None or p.get("type") == type)
                and (uid is None or p.get("uid") == uid)
                and (name is None or p.get("name") == name)]

    def wait_for(self, timeout=20, msg="notification", **match):
        """Waits for the first payload matching **match (cluster=, type=, uid=, name=)."""
        def found():
            self.poll(0.1)
            got = self.payloads(**match)
            return got[0] if got else None
        return wait_until(found, timeout, "%s %r on %s (got: %r)"
                          % (msg, match, self.channel, [p for p, _ in self.seen][-10:]),
                          interval=0)

    def visibility_problems(self, cluster):
        """Notifications of `cluster` whose row was not as announced when they arrived:
        ADDED/MODIFIED -> row present with the payload's resource_version (or a
        later notification of the same uid explains a newer one); DELETED -> no row."""
        self.poll()
        problems = []
        seen = [(p, rv) for p, rv in self.seen if p.get("cluster") == cluster]
        for i, (p, rv) in enumerate(seen):
            later = [q for q, _ in seen[i + 1:] if q.get("uid") == p.get("uid")]
            later_rvs = [q["resource_version"] for q in later]
            if p["type"] in ("ADDED", "MODIFIED"):
                if rv is None:
                    if not any(q["type"] == "DELETED" for q in later):
                        problems.append((p, rv))
                elif rv != p["resource_version"] and rv not in later_rvs:
                    problems.append((p, rv))
            elif p["type"] == "DELETED":
                if rv is not None and rv not in later_rvs:
                    problems.append((p, rv))
        return problems

    def close(self):
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Reader(threading.Thread):
    """A daemon thread that calls self.read_once() on a connection of its
    own (self.conn) every `interval` seconds until finish(), and once more
    after the stop when `final_read`.  finish() stops it, closes the
    connection and fails on the error the thread met."""

    interval = 0.005
    final_read = False
    join_timeout = 10

    def __init__(self):
        super().__init__(daemon=True)
        self.conn = PG.connect()
        self.stop = threading.Event()
        self.error = None

    def read_once(self):
        raise NotImplementedError

    def run(self):
        try:
            while not self.stop.is_set():
                self.read_once()
                time.sleep(self.interval)
            if self.final_read:
                self.read_once()
        except Exception as e:  # reported by finish()
            self.error = e

    def finish(self):
        self.stop.set()
        self.join(self.join_timeout)
        self.conn.close()
        assert self.error is None, self.error
