"""Process measurements shared by the benchmark scripts (issue 10).

Everything here reads the kernel's own accounting, so that a child program, a
PostgreSQL worker and the API server are measured the same way:

* run_child(launcher, argv): wall time, peak RSS and CPU seconds of one
  child process from wait4 (the kernel's rusage of that child alone:
  ru_maxrss is its peak resident set, utime + stime its CPU), reported by the
  tiny C launcher rusage.c (see there why not os.wait4 from Python);
* Sampler: a thread reading /proc/<pid>/status (RssAnon, the private resident
  memory) of a changing set of processes every few milliseconds and keeping
  the peak of their sum - for processes that are not our children (the
  kwatch worker, the relist merge, a backend);
* cpu_s(pid) and pg_cpu_s(postmaster): CPU seconds from /proc/<pid>/stat
  (utime + stime; for the postmaster also cutime + cstime, the CPU of the
  children it has reaped, which is how a relist merge worker that exits
  during a measurement is still counted).
"""
import hashlib
import json
import os
import platform
import subprocess
import threading
import time

TICK = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid):
    """/proc/<pid>/stat fields after the command name (field 3 is index 0)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def cpu_s(pid):
    """utime + stime of one process, in seconds (0 if it is gone)."""
    try:
        f = _stat_fields(pid)
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(f[11]) + int(f[12])) / TICK


def schedstat(pid):
    """(seconds on a CPU, seconds runnable but waiting for one) of a process
    (/proc/<pid>/schedstat; (0, 0) if it is gone): on a shared machine the
    second says how much of a phase a process lost to others."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            run, wait = f.read().split()[:2]
    except (FileNotFoundError, ProcessLookupError):
        return 0.0, 0.0
    return int(run) / 1e9, int(wait) / 1e9


def children(ppid):
    """Pids whose parent is ppid (the kernel's /proc/<pid>/task/<pid>/children;
    the postmaster is single-threaded)."""
    try:
        with open(f"/proc/{ppid}/task/{ppid}/children") as f:
            return [int(p) for p in f.read().split()]
    except (FileNotFoundError, ProcessLookupError):
        return []


def cmdline(pid):
    """The process title (a PostgreSQL process shows its role there)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return ""


def pg_cpu_s(postmaster):
    """CPU seconds of a whole PostgreSQL instance: the postmaster's own and
    that of its reaped children (cutime + cstime), plus every live child's.
    A delta over a measurement counts a process that started and exited in
    between exactly, and one that exited in between with its whole life."""
    f = _stat_fields(postmaster)
    total = sum(int(x) for x in f[11:15]) / TICK
    return total + sum(cpu_s(p) for p in children(postmaster))


def status_kb(pid):
    """(RssAnon, VmHWM) of a process in kB; (0, 0) if it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            d = dict(line.split(":", 1) for line in f if ":" in line)
    except (FileNotFoundError, ProcessLookupError):
        return 0, 0
    return int(d.get("RssAnon", "0 kB").split()[0]), int(d.get("VmHWM", "0 kB").split()[0])


class Sampler(threading.Thread):
    """Samples the summed RssAnon of pids() every `period` s until stop();
    .peak_kb is the highest sum seen, .peak_by_pid each process's own peak.
    pids is a callable so that processes appearing during the measurement
    (an apply worker started on demand) are picked up."""

    def __init__(self, pids, period=0.01):
        super().__init__(daemon=True)
        self.pids, self.period = pids, period
        self.peak_kb = 0
        self.peak_by_pid = {}
        self.samples = 0
        self._halt = threading.Event()

    def sample(self):
        total = 0
        for p in self.pids():
            kb = status_kb(p)[0]
            self.peak_by_pid[p] = max(self.peak_by_pid.get(p, 0), kb)
            total += kb
        self.peak_kb = max(self.peak_kb, total)
        self.samples += 1

    def run(self):
        while not self._halt.is_set():
            self.sample()
            time.sleep(self.period)

    def stop(self):
        self._halt.set()
        self.join()
        self.sample()
        return self.peak_kb


def build_launcher(bench_dir):
    """Compiles rusage.c into bench_dir/bin/rusage unless it is current."""
    return build_c(bench_dir, "rusage")


def build_c(bench_dir, name, flags=()):
    """Compiles test/bench/NAME.c into bench_dir/bin/NAME unless it is
    current (same source and flags); returns the binary's path."""
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".c")
    out = os.path.join(bench_dir, "bin", name)
    key = hashlib.sha256(open(src, "rb").read() + repr(list(flags)).encode()).hexdigest()
    stamp = out + ".stamp"
    if os.path.exists(out) and os.path.exists(stamp) and open(stamp).read() == key:
        return out
    os.makedirs(os.path.dirname(out), exist_ok=True)
    subprocess.run(["cc", "-O2", "-Wall", "-o", out, src] + list(flags), check=True)
    with open(stamp, "w") as f:
        f.write(key)
    return out


def run_child(launcher, argv, stdout=subprocess.DEVNULL, timeout=3600):
    """Runs argv under the rusage launcher (rusage.c) to completion; returns
    (wall s, peak RSS kB, CPU s, stdout bytes or None).  stdout: DEVNULL,
    PIPE (returned) or a file."""
    p = subprocess.run([launcher] + argv, stdout=stdout, stderr=subprocess.PIPE, timeout=timeout)
    lines = p.stderr.decode(errors="replace").splitlines()
    res = next((json.loads(x.split(" ", 1)[1]) for x in reversed(lines) if x.startswith("kwatch-rusage ")),
               None)
    if res is None or res["status"] != 0:
        raise RuntimeError("%s failed (%s): %s" % (argv[0], res and res["status"], "\n".join(lines[-10:])))
    return res["wall_s"], res["maxrss_kb"], res["user_s"] + res["sys_s"], \
        p.stdout if stdout == subprocess.PIPE else None


def machine():
    """"N cores (model), M GB, Linux release" for the reports."""
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem = int(f.readline().split()[1]) / 1024 / 1024
    return "%d cores (%s), %.0f GB, Linux %s" % (os.cpu_count(), cpu, mem,
                                                     platform.release())


def tcp_established(pid):
    """The ESTABLISHED TCP connections of pid (its socket inodes looked up in
    /proc/net/tcp and tcp6), as (remote address as /proc shows it in hex,
    remote port) pairs."""
    inodes = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            next(f)
            for line in f:
                x = line.split()
                if x[3] == "01" and x[9] in inodes:
                    addr, port = x[2].rsplit(":", 1)
                    out.append((addr, int(port, 16)))
    return out


def tcp_connections_by_port(pid, ports):
    """ESTABLISHED TCP connections of pid, counted by remote port (those in
    `ports` only)."""
    by = {}
    for _, port in tcp_established(pid):
        if port in ports:
            by[port] = by.get(port, 0) + 1
    return by
