#!/usr/bin/python3
"""Watch events applied per second, against a synthetic event source
(issue 10, item 2).  Prints a Markdown report, writes JSON; asserts nothing.

usage: evstream.py [--objects 1000] [--bytes 2048] [--seconds 5]
                   [--rates 1000,5000,10000,20000,40000,0] [--max-events 200000]
                   [--perf RATE] [--json FILE]
       (environment: PG* for the PostgreSQL with kwatch preloaded;
        KWATCH_BENCH_DIR for the streamer's build and scratch files)

1. builds evstream.c (a minimal API server in C that replays pre-encoded
   MODIFIED events of --objects ConfigMaps of ~--bytes each, see there) and
   starts it on a free port;
2. on a foreign server of its own (api_server = the streamer, plain http),
   watches configmaps in namespace evbench and waits until the watch is
   healthy with every object;
3. for each offered rate (events/s; 0 = as fast as the socket takes them):
   the streamer sends rate x --seconds events (at most --max-events), each
   stamped with its send time; a LISTENing connection (a thread of this
   process) records when each notification arrives.  Reported: events sent
   and the rate the streamer achieved (a blocked socket slows it: kwatch
   pauses the transfer while it applies a full batch), events applied with
   NOTIFY per second (events / first send -> last notification received),
   the watch's MODIFIED and notification counters, CPU of the worker, of the
   whole PostgreSQL instance and of the streamer (% of a core over the
   phase, and worker microseconds per event), the time the worker was
   runnable but waited for a CPU (/proc/<pid>/schedstat: what other work
   on a shared machine took from it), and the lag send -> NOTIFY
   received (p50, p99, max; matched by resourceVersion, same host clock).
   kwatch "keeps up" at a rate when it applied >= 95% of the offered rate
   and the p99 lag stayed under 1 s; rate 0 shows its ceiling;
   Also the worker's transactions (COMMIT records in the phase's WAL, with
   pg_walinspect when it can be created), so events per transaction, and
   WAL bytes per event.  The whole sweep runs --repeat times; per rate the
   round of median applied events/s is reported (every round in the JSON);
4. with --perf RATE, the first round's phase at that rate also runs `perf
   record -g` on the worker and the apply workers together (a few % of
   overhead on that phase) and keeps the top symbols by self time and by
   time under them in the report;
5. unwatches (dropping the table) and drops the server.
"""
import argparse
import array
import datetime
import os
import re
import select
import shutil
import statistics
import subprocess
import sys
import threading
import time

import psycopg2

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import measure  # noqa: E402
from report import emit, json_path, evstream_markdown  # noqa: E402

SERVER = "evstream"
FIXTURES = os.path.join(HERE, "..", "fixtures", "kube-apiserver-1.20")
RV_RE = re.compile(r'"resource_version":"(\d+)"')


class Listener(threading.Thread):
    """LISTENs on a channel; keeps (receive time ns, payloads) per poll."""

    def __init__(self, channel):
        super().__init__(daemon=True)
        self.conn = psycopg2.connect("")
        self.conn.autocommit = True
        self.conn.cursor().execute('LISTEN "%s"' % channel)
        self.batches = []
        self.count = 0
        self.halt = threading.Event()

    def run(self):
        conn = self.conn
        while not self.halt.is_set():
            if select.select([conn], [], [], 0.1) == ([], [], []):
                continue
            conn.poll()
            if conn.notifies:
                t = time.time_ns()
                got, conn.notifies = conn.notifies, []
                self.batches.append((t, [n.payload for n in got]))
                self.count += len(got)

    def take(self):
        """The batches so far (and forgets them)."""
        b, self.batches = self.batches, []
        return b

    def stop(self):
        self.halt.set()
        self.join()
        self.conn.close()


class Streamer:
    def __init__(self, binary, objects, nbytes):
        self.p = subprocess.Popen([binary, FIXTURES, str(objects), str(nbytes)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, bufsize=1)
        first = self.p.stdout.readline().split()
        self.port, self.event_bytes = int(first[1]), int(first[3])

    def run(self, rate, count, path):
        self.p.stdin.write("run %g %d %s\n" % (rate, count, path))
        self.p.stdin.flush()
        line = self.p.stdout.readline().split()
        if not line or line[0] != "done":
            raise RuntimeError("streamer: %s" % " ".join(line))
        return int(line[1]), float(line[2])

    def stop(self):
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.close()
            self.p.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            self.p.kill()


def counters(cur):
    cur.execute("SELECT modified, notifications, relists, watch_calls, healthy FROM kwatch.watches"
                " WHERE server = %s", (SERVER,))
    return cur.fetchone()


def wal_commits(cur, start):
    """(WAL bytes since `start`, COMMIT records among them or None): the
    transactions the worker committed in a phase (nothing else writes then),
    read with pg_walinspect up to the flush LSN; None when it is missing or
    a checkpoint already recycled the segments."""
    cur.execute("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s)::bigint", (start,))
    total = cur.fetchone()[0]
    try:
        cur.execute("SELECT coalesce(sum(count), 0)::bigint FROM pg_get_wal_stats(%s, pg_current_wal_flush_lsn(), true)"
                    " WHERE \"resource_manager/record_type\" = 'Transaction/COMMIT'", (start,))
        return total, cur.fetchone()[0]
    except psycopg2.Error:
        return total, None


def pct(xs, p):
    return xs[min(len(xs) - 1, max(0, int(round(len(xs) * p)) - 1))]


def perf_top(pids, seconds, out_dir):
    """Starts `perf record -g` of the processes `pids` (the worker, which
    decodes, and the apply workers, which write: where an event's time
    goes, issue 36) for `seconds`; (the process, its data file) or None
    without perf."""
    if not shutil.which("perf"):
        return None
    data = os.path.join(out_dir, "evstream-perf.data")
    rec = subprocess.Popen(["perf", "record", "-q", "-g", "-p", ",".join(str(p) for p in pids),
                            "-o", data, "--", "sleep",
                            str(seconds)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return rec, data


def perf_report(data, children=False, top=25):
    """perf report's symbols (self time, or with children the time under
    each function), those with a name, highest first."""
    r = subprocess.run(["perf", "report", "-i", data, "--children" if children else "--no-children",
                        "--stdio", "--sort", "dso,symbol", "-g", "none", "--percent-limit", "1"],
                       capture_output=True, text=True)
    rows = []
    for line in r.stdout.splitlines():
        m = re.match(r"\s+([\d.]+)%\s+(?:([\d.]+)%\s+)?(.+?)\s+\[(.)\]\s+(.*)", line)
        if not m:
            continue
        sym = re.sub(r"(\s+-)+\s*$", "", m.group(5)).strip()
        if sym.startswith("0x") or sym in ("main", "__libc_start_call_main", "PostmasterMain",
                                           "StartBackgroundWorker"):
            continue
        rows.append({"pct": float(m.group(1)), "dso": m.group(3).replace("(deleted)", "").strip(),
                     "symbol": sym})
    return rows[:top]


def phase(cur, streamer, listener, rate, count, worker, postmaster, scratch, perf=False):
    """One offered rate; returns its row."""
    path = os.path.join(scratch, "evstream-sent.bin")
    before = counters(cur)
    cur.execute("SELECT pg_current_wal_insert_lsn()")
    lsn0 = cur.fetchone()[0]
    listener.take()
    w0, pg0, s0, q0, h0, t0 = (measure.cpu_s(worker), measure.pg_cpu_s(postmaster),
                               measure.cpu_s(streamer.p.pid), measure.schedstat(worker)[1],
                               measure.cpu_s(os.getpid()), time.monotonic())
    applies = [p for p in measure.children(postmaster) if "kwatch apply" in measure.cmdline(p)]
    prof = perf_top([worker] + applies, max(2, count / rate if rate else 3), scratch) if perf else None
    sent, send_s = streamer.run(rate, count, path)
    # wait until the watch counted every event and the notifications arrived
    deadline = time.monotonic() + 60 + send_s
    while time.monotonic() < deadline:
        c = counters(cur)
        if c[0] - before[0] >= sent and c[1] - before[1] >= sent and listener.count >= sent:
            break
        time.sleep(0.02)
    time.sleep(0.2)
    wall = time.monotonic() - t0
    w1, pg1, s1, q1, h1 = (measure.cpu_s(worker), measure.pg_cpu_s(postmaster), measure.cpu_s(streamer.p.pid),
                           measure.schedstat(worker)[1], measure.cpu_s(os.getpid()))
    after = counters(cur)
    wal, commits = wal_commits(cur, lsn0)
    top = None
    if prof:
        prof[0].wait()
        top = perf_report(prof[1])
        under = perf_report(prof[1], children=True)
    a = array.array("q")
    with open(path, "rb") as f:
        a.frombytes(f.read())
    sent_at = {a[i]: a[i + 1] for i in range(0, len(a), 2)}
    first_sent = a[1] if len(a) else 0
    lags, last_recv = [], 0
    for t, payloads in listener.take():
        for p in payloads:
            m = RV_RE.search(p)
            s = sent_at.get(int(m.group(1))) if m else None
            if s is not None:
                lags.append((t - s) / 1e6)
                last_recv = max(last_recv, t)
    lags.sort()
    applied_s = (last_recv - first_sent) / 1e9 if lags else None
    row = {
        "offered_per_s": rate, "events": count, "sent": sent, "send_s": send_s,
        "sent_per_s": sent / send_s if send_s else None,
        "modified_counted": after[0] - before[0], "notifications_counted": after[1] - before[1],
        "notifications_received": len(lags), "relists": after[2] - before[2],
        "watch_calls": after[3] - before[3], "healthy": after[4],
        "applied_s": applied_s,
        "applied_per_s": len(lags) / applied_s if applied_s else None,
        "worker_cpu_pct": (w1 - w0) / wall * 100, "pg_cpu_pct": (pg1 - pg0) / wall * 100,
        "streamer_cpu_pct": (s1 - s0) / wall * 100, "phase_wall_s": wall,
        "worker_runqueue_pct": (q1 - q0) / wall * 100,
        # this process: mostly the LISTENing thread (were it saturated, the lag would be its own)
        "harness_cpu_pct": (h1 - h0) / wall * 100,
        "worker_cpu_us_per_event": (w1 - w0) / sent * 1e6 if sent else None,
        "pg_cpu_us_per_event": (pg1 - pg0) / sent * 1e6 if sent else None,
        "lag_p50_ms": statistics.median(lags) if lags else None,
        "lag_p99_ms": pct(lags, 0.99) if lags else None,
        "lag_max_ms": lags[-1] if lags else None,
        "wal_bytes_per_event": wal / sent if sent else None, "transactions": commits,
        "events_per_transaction": sent / commits if commits else None,
    }
    row["kept_up"] = bool(rate and lags and len(lags) == sent and row["applied_per_s"] >= 0.95 * rate
                          and row["lag_p99_ms"] < 1000)
    if top is not None:
        row["perf_top"], row["perf_inclusive"] = top, under
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, default=1000)
    ap.add_argument("--bytes", type=int, default=2048)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--rates", default="1000,5000,10000,20000,40000,0")
    ap.add_argument("--max-events", type=int, default=200000)
    ap.add_argument("--repeat", type=int, default=3, help="rounds of the whole sweep; medians reported")
    ap.add_argument("--perf", type=float, default=None, help="profile the worker at this offered rate")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    bench_dir = os.environ.get("KWATCH_BENCH_DIR", "/var/tmp/kwatch-bench")
    out_json = json_path(a.json, "evstream.json")
    scratch = os.path.join(bench_dir, "evstream")
    os.makedirs(scratch, exist_ok=True)
    binary = measure.build_c(bench_dir, "evstream", ["-pthread"])
    streamer = Streamer(binary, a.objects, a.bytes)

    conn = psycopg2.connect("")
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("CREATE EXTENSION IF NOT EXISTS kwatch")
    try:
        cur.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
    except psycopg2.Error:
        pass
    cur.execute("SELECT kwatch.unwatch(resource, server => server, drop_table => true)"
                " FROM kwatch.registrations WHERE server = %s", (SERVER,))
    cur.execute("DROP SERVER IF EXISTS %s CASCADE" % SERVER)
    cur.execute("CREATE SERVER %s FOREIGN DATA WRAPPER kwatch OPTIONS (api_server %%s,"
                " allow_insecure_http 'true')" % SERVER, ("http://127.0.0.1:%d" % streamer.port,))
    t0 = time.monotonic()
    cur.execute("SELECT kwatch.watch('configmaps', server => %s, namespace => 'evbench',"
                " table_name => 'evstream_configmaps')", (SERVER,))
    while True:
        cur.execute("SELECT healthy, objects, channel FROM kwatch.watches WHERE server = %s", (SERVER,))
        healthy, objects, channel = cur.fetchone()
        if healthy and objects is not None and objects >= a.objects:
            break
        if time.monotonic() - t0 > 120:
            sys.exit("the watch did not sync in 120 s")
        time.sleep(0.05)
    sync_s = time.monotonic() - t0
    cur.execute("SELECT kwatch.worker_pid()")
    worker = cur.fetchone()[0]
    cur.execute("SELECT current_setting('data_directory'), current_setting('kwatch.batch_size')")
    ddir, batch = cur.fetchone()
    with open(os.path.join(ddir, "postmaster.pid")) as f:
        postmaster = int(f.readline())

    listener = Listener(channel)
    listener.start()
    rates = [float(x) for x in a.rates.split(",")]
    runs = {r: [] for r in rates}
    try:
        for rnd in range(a.repeat):
            for r in rates:
                count = min(a.max_events, int(r * a.seconds)) if r else a.max_events
                time.sleep(1)
                print("round %d, offered %s events/s: %d events..." % (rnd + 1, int(r) or "unlimited", count),
                      flush=True)
                try:
                    row = phase(cur, streamer, listener, r, count, worker, postmaster, scratch,
                                perf=a.perf is not None and r == a.perf and rnd == 0)
                except RuntimeError as e:
                    # e.g. kwatch reconnected mid-phase (the streamer writes to the watch it had)
                    print("  failed: %s" % e, flush=True)
                    continue
                runs[r].append(row)
                print("  applied %s/s, lag p50 %s ms" % (row["applied_per_s"] and int(row["applied_per_s"]),
                                                         row["lag_p50_ms"] and round(row["lag_p50_ms"], 1)),
                      flush=True)
                if not row["healthy"]:
                    print("  the watch is not healthy after this rate", flush=True)
    finally:
        listener.stop()
        cur.execute("SELECT kwatch.unwatch('configmaps', server => %s, drop_table => true)", (SERVER,))
        cur.execute("DROP SERVER %s CASCADE" % SERVER)
        streamer.stop()

    rows = []
    for r in rates:
        done = sorted(runs[r], key=lambda x: x["applied_per_s"] or 0)
        if not done:
            continue
        med = dict(done[(len(done) - 1) // 2])
        med["rounds_kept_up"] = sum(1 for x in done if x["kept_up"])
        med["perf_top"] = next((x["perf_top"] for x in done if x.get("perf_top")), None)
        med["perf_inclusive"] = next((x["perf_inclusive"] for x in done if x.get("perf_inclusive")), None)
        med["runs"] = [{k: v for k, v in x.items() if not k.startswith("perf_")} for x in done]
        rows.append(med)
    rep = {"evstream": rows, "meta": {
        "date": datetime.date.today().isoformat(), "machine": measure.machine(), "objects": a.objects,
        "event_bytes": streamer.event_bytes, "seconds_per_rate": a.seconds, "batch_size": int(batch),
        "initial_sync_s": sync_s, "rounds": a.repeat}}
    emit(rep, out_json, evstream_markdown)


if __name__ == "__main__":
    main()
