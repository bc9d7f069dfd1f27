"""The benchmarks' PostgreSQL side, shared by the scripts of test/bench: an
autocommit connection (the PG* environment names the database), the pods
bench.py left in k8s.pods, and a fresh kwatch foreign server."""
import os
import time

import psycopg2


def connect():
    """An autocommit connection to the database the PG* variables name."""
    conn = psycopg2.connect("")
    conn.autocommit = True
    return conn


def bench_pods():
    """(a cursor of a new autocommit connection, the number of pods mirrored
    from server bench), for the scripts that run after bench.py."""
    cur = connect().cursor()
    cur.execute("SELECT count(*) FROM k8s.pods WHERE cluster = 'bench'")
    return cur, cur.fetchone()[0]


def fresh_server(cur, server, wait_s):
    """Creates the extension if missing and the foreign server `server` on
    $KUBECONFIG afresh (its watches and their tables dropped first); waits up
    to wait_s seconds for the worker.  Returns (the worker's pid, None when
    it did not come; the postmaster's pid)."""
    cur.execute("CREATE EXTENSION IF NOT EXISTS kwatch")
    cur.execute("SELECT kwatch.unwatch(resource, server => server, drop_table => true)"
                " FROM kwatch.registrations WHERE server = %s", (server,))
    cur.execute("DROP SERVER IF EXISTS %s CASCADE" % server)
    cur.execute("CREATE SERVER %s FOREIGN DATA WRAPPER kwatch OPTIONS (kubeconfig %%s)" % server,
                (os.environ["KUBECONFIG"],))
    # pg.sh creates the database after the postmaster started: the worker's
    # first attempt may have failed, and the postmaster retries after 5 s
    worker, t0 = None, time.time()
    while worker is None and time.time() - t0 < wait_s:
        cur.execute("SELECT kwatch.worker_pid()")
        worker = cur.fetchone()[0] or time.sleep(0.2)
    cur.execute("SELECT current_setting('data_directory')")
    with open(os.path.join(cur.fetchone()[0], "postmaster.pid")) as f:
        return worker, int(f.readline())
