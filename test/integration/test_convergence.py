"""The convergence property (issue 3, part 5): after any seeded sequence of
cluster changes interleaved with faults, once things are quiet, every mirror
table equals the server's LIST object by object (uid, resourceVersion,
content) and the last notification of every object matches its final state
(DELETED for objects gone).

    KWATCH_SEED=n               replay a sequence (printed in every failure)
    KWATCH_CONVERGE_SECONDS=s   length of the run (default 60: the CI run)
    KWATCH_CONVERGE_OPS=n       changes per round (default 40; soak 800)
    KWATCH_CONVERGE_PACE=x      each round spreads its changes over 2-6 s times x
                                (default 1)
    KWATCH_CONVERGE_FAULTS=a,b  only these faults (names: converge_support.Faults.MENU)
    KWATCH_SOAK=1               soak mode (test/bench/soak.sh): keep going after
                                a mismatch, print a report, fail at the end
"""
import os
import time

import pytest

from converge_support import Engine, seed_from_env


def test_convergence_under_faults(ctx, settings):
    seed = seed_from_env()
    seconds = float(os.environ.get("KWATCH_CONVERGE_SECONDS", "60"))
    soak = os.environ.get("KWATCH_SOAK") == "1"
    ops = int(os.environ.get("KWATCH_CONVERGE_OPS", "800" if soak else "40"))
    pace = float(os.environ.get("KWATCH_CONVERGE_PACE", "1"))
    threads = int(os.environ.get("KWATCH_CONVERGE_THREADS", "24" if soak else "6"))
    report_path = os.environ.get("KWATCH_SOAK_REPORT")
    print("convergence: seed %d (replay with KWATCH_SEED=%d)" % (seed, seed))
    # short watches: many re-watches from a checkpoint, where 410s come from
    # and a short inactivity deadline, so that the proxy's frozen
    # connections are noticed (inactivity_timeout past a WATCH's
    # timeoutSeconds) or cut within a round
    settings(watch_timeout="10s", inactivity_timeout="5s")
    menu = [f for f in os.environ.get("KWATCH_CONVERGE_FAULTS", "").split(",") if f] or None
    eng = Engine(ctx, seed, faults=menu, ops_per_round=ops, threads=threads, slots=60 if soak else 12,
                 pace=pace, inactivity_s=5,
                 log=lambda m: print(time.strftime("%H:%M:%S"), m, flush=True))
    failures = []
    try:
        eng.setup()
        t0 = time.monotonic()
        busy = 0.0
        while time.monotonic() - t0 < seconds:
            elapsed, faults = eng.round()
            busy += elapsed
            problems, took = eng.check()
            eng.log("%s %d changes in %.1f s, faults %s, converged in %.1f s%s"
                    % (eng.tag(), eng.ops_per_round, elapsed, faults or "none", took,
                       "" if not problems else ": %d PROBLEMS" % len(problems)))
            if problems:
                eng.mismatches += len(problems)
                failures.append("%s after faults %s: %s" % (eng.tag(), faults, problems[:10]))
                if not soak:
                    break
        total = time.monotonic() - t0
        changes = sum(eng.workload.ops.values())
        report = [
            "seed %d: %d rounds in %.0f s" % (seed, eng.rounds, total),
            "cluster changes: %d (%s; refused as stale: %s), %.0f/s while changing"
            % (changes, dict(eng.workload.ops), dict(eng.workload.errors), changes / max(busy, 1e-9)),
            "notifications received: %d (%.0f/s over the run), listener resyncs after restarts: %d"
            % (eng.tracker.count, eng.tracker.count / max(total, 1e-9), eng.tracker.resyncs),
            "rows at the end: %d" % eng.counts(),
            "faults injected: %d %s" % (sum(eng.faults.injected.values()), dict(eng.faults.injected)),
            "proxy: %s" % dict(eng.proxy.stats),
            "mismatches: %d" % eng.mismatches,
            "worker RssAnon: %s" % eng.memory.report(),
        ]
        print("\n".join(["convergence report:"] + ["  " + r for r in report]))
        if report_path:
            with open(report_path, "w") as f:
                f.write("\n".join(report) + "\n")
                f.write("\n".join(failures) + "\n")
    finally:
        eng.close()
    if failures:
        pytest.fail("seed %d (replay with KWATCH_SEED=%d): tables or notifications did not converge:\n%s"
                    % (seed, seed, "\n".join(failures)), pytrace=False)
    assert eng.rounds > 0 and sum(eng.workload.ops.values()) > 0, "seed %d: nothing ran" % seed
