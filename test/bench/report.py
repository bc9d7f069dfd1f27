#!/usr/bin/python3
"""Renders bench.py's JSON report (issue 10) as Markdown, and regenerates the
"Latest results" table of test/bench/README.md from one or more such reports.

usage: report.py REPORT.json                     print the full Markdown report
       report.py --readme test/bench/README.md A.json [B.json ...] [scale-200.json]
                 [servers-20.json] [evstream.json] [evreal.json]
                 replace the text between the README's markers
                 <!-- make bench: begin --> and <!-- make bench: end -->
                 with the side-by-side table of these runs (one column
                 group per run, e.g. 10,000 and 50,000 pods), a sentence
                 for scale.py's and servers.py's reports, evstream.py's
                 table of rates and evreal.py's lags (each kind recognized
                 by its keys)

Targets checked (issue 10, item 6), from the figures of one run:
  initial sync <= 1.2 x max(LIST floor, COPY floor), the LIST floor being
  the faster of the two LIST rows; kwatch faster than the JSON informer (the
  faster of its two variants); kwatch's peak RSS < 64 MB; 0 rows rewritten
  and 0 notifications on an unchanged relist.
"""
import json
import os
import re
import sys

NAN = float("nan")
BEGIN, END = "<!-- make bench: begin -->", "<!-- make bench: end -->"



def json_path(given, name):
    """Where a bench script writes its JSON: `given` (its --json), else
    `name` in $KWATCH_BENCH_DIR (default /var/tmp/kwatch-bench)."""
    return given or os.path.join(os.environ.get("KWATCH_BENCH_DIR", "/var/tmp/kwatch-bench"), name)


def emit(rep, path, markdown):
    """Writes the report `rep` as JSON to `path`, then prints markdown(rep)
    and where the JSON is."""
    with open(path, "w") as f:
        json.dump(rep, f, indent=1)
    sys.stdout.write(markdown(rep))
    print("\n(JSON: %s)" % path)

def fnum(x, digits=2):
    if x is None:
        return "-"
    if abs(x) >= 1000:
        return "{:,.0f}".format(x)
    return ("{:.%df}" % digits).format(x)


def by_name(rep):
    return {a["name"]: a for a in rep["anchors"]}


def ratios(rep):
    """The issue's ratios from one report's medians."""
    a = rep["anchors"]
    kw = next(x for x in a if x["name"] == "kwatch")
    lists = [x for x in a if x["name"].startswith("LIST floor")]
    copy = [x for x in a if x["name"].startswith("COPY floor")]
    json_inf = [x for x in a if x["name"].startswith("client-go informer, JSON")]
    proto = [x for x in a if x["name"].startswith("client-go informer, protobuf")]
    r = {}
    if lists and copy:
        list_floor = min(x["seconds"] for x in lists)
        floor = max(list_floor, copy[0]["seconds"])
        r["floor_s"] = floor
        r["list_floor_s"] = list_floor
        r["kwatch_over_floor"] = kw["seconds"] / floor
        rv0 = [x for x in lists if "rv=0" in x["name"]]
        if rv0:
            # kwatch's first LIST is the informer's: resourceVersion=0
            r["kwatch_over_its_list"] = kw["seconds"] / rv0[0]["seconds"]
    if json_inf:
        best = min(json_inf, key=lambda x: x["seconds"])
        r["json_informer"] = best["name"]
        r["kwatch_over_json_informer"] = kw["seconds"] / best["seconds"]
        r["kwatch_rss_over_json_informer"] = kw["rss_mb"] / best["rss_mb"]
    if proto:
        r["kwatch_over_protobuf_informer"] = kw["seconds"] / proto[0]["seconds"]
    return r


def targets(rep):
    r = ratios(rep)
    kw = by_name(rep)["kwatch"]
    out = []
    if "kwatch_over_floor" in r:
        out.append(("initial sync <= 1.2 x max(LIST floor, COPY floor)",
                    "%.2f x (floor %.2f s)" % (r["kwatch_over_floor"], r["floor_s"]),
                    r["kwatch_over_floor"] <= 1.2))
    if "kwatch_over_json_informer" in r:
        out.append(("faster than the JSON informer", "%.2f x (%s)" % (r["kwatch_over_json_informer"],
                                                                       r["json_informer"]),
                    r["kwatch_over_json_informer"] < 1.0))
    if kw.get("worker_rss_peak_mb") is not None and kw.get("apply_rss_peak_mb") is not None:
        # since 0.7.0 the inserts run in apply workers, processes of their own (issue 36)
        out.append(("every kwatch process < 64 MB (peak RssAnon)",
                    "worker %.0f MB, each apply worker at most %.0f MB (%.0f MB summed)"
                    % (kw["worker_rss_peak_mb"], kw["apply_rss_peak_mb"], kw["rss_mb"]),
                    max(kw["worker_rss_peak_mb"], kw["apply_rss_peak_mb"]) < 64))
    else:
        out.append(("peak worker RSS < 64 MB", "%.0f MB (RssAnon, worker + relist merge)" % kw["rss_mb"],
                    kw["rss_mb"] < 64))
    rel = rep.get("relist")
    if rel:
        out.append(("0 rewrites on an unchanged relist",
                    "%d rewritten, %d inserted, %d deleted, %d notifications"
                    % (rel["rows_rewritten"], rel["rows_inserted"], rel["rows_deleted"],
                       rel["notifications_received"]),
                    rel["rows_rewritten"] == 0 and rel["rows_inserted"] == 0 and rel["rows_deleted"] == 0
                    and rel["notifications_received"] == 0))
    return out


def spread(a):
    runs = a.get("runs") or []
    if len(runs) < 2:
        return ""
    s = [x["seconds"] for x in runs]
    return " (%s-%s)" % (fnum(min(s)), fnum(max(s)))


def anchors_table(rep):
    lines = ["| | seconds | objects/s | peak RSS MB | CPU s | apiserver CPU s |",
             "|---|---|---|---|---|---|"]
    for a in rep["anchors"]:
        lines.append("| %s | %s%s | %s | %s | %s | %s |" % (
            a["name"], fnum(a["seconds"]), spread(a), fnum(a["objects_per_s"], 0), fnum(a["rss_mb"], 0),
            fnum(a["cpu_s"]), fnum(a["apiserver_cpu_s"])))
    return lines


def markdown(rep):
    m = rep["meta"]
    L = ["## kwatch beside its peers: %s pods" % "{:,}".format(m["objects"]), "",
         "%s, %s; %s. %s" % (m["date"], m["machine"], m["setup"], m["rounds_note"]), "",
         "### Initial sync, one after another on the same cluster and objects", ""]
    L += anchors_table(rep)
    L += [""] + ["* " + n for n in rep["anchor_notes"]]
    r = ratios(rep)
    L += ["", "Ratios: kwatch / informer (%s) **%.2f**; kwatch / informer (protobuf) %.2f; "
          "kwatch / max(LIST floor %.2f s, COPY floor %.2f s) **%.2f**; kwatch / the LIST it "
          "makes (rv=0) %.2f."
          % (r.get("json_informer", "-"), r.get("kwatch_over_json_informer", NAN),
             r.get("kwatch_over_protobuf_informer", NAN), r.get("list_floor_s", NAN),
             next((a["seconds"] for a in rep["anchors"] if a["name"].startswith("COPY floor")), NAN),
             r.get("kwatch_over_floor", NAN), r.get("kwatch_over_its_list", NAN))]
    kw = by_name(rep).get("kwatch")
    if kw and kw.get("worker_cpu_s") is not None and kw.get("apply_cpu_s") is not None:
        L += ["", "kwatch by process: worker (HTTP, decoding) %.2f CPU s, peak RssAnon %.0f MB; "
              "%d apply worker%s (the inserts) %.2f CPU s, peak RssAnon %.0f MB; the rest of PostgreSQL "
              "(WAL writer, checkpointer, ...) %.2f s; the apiserver serving its LIST %.2f s."
              % (kw["worker_cpu_s"], kw["worker_rss_peak_mb"], kw["apply_workers"],
                 "" if kw["apply_workers"] == 1 else "s", kw["apply_cpu_s"], kw["apply_rss_peak_mb"],
                 kw["cpu_s"] - kw["worker_cpu_s"] - kw["apply_cpu_s"], kw["apiserver_cpu_s"])]
    if kw and kw.get("first_rows_s") is not None and kw.get("all_rows_s") is not None:
        rv0 = next((a for a in rep["anchors"] if a["name"].startswith("LIST floor, rv=0")), {})
        insert_s = kw["all_rows_s"] - kw["first_rows_s"]
        L += ["", "kwatch's phases (issue 36): first batch committed at %.2f s, every row at %.2f s, "
              "the list's merge (`kwatch.wait_synced()` returns) at %.2f s; the apply workers' CPU over the whole sync %.2f "
              "cores (%.2f CPU s / %.2f s), over the insert phase at most %.2f cores; the rv=0 LIST "
              "floor's first byte at %s s, its last at %.2f s."
              % (kw["first_rows_s"], kw["all_rows_s"], kw["seconds"],
                 kw["apply_cpu_s"] / kw["seconds"], kw["apply_cpu_s"], kw["seconds"],
                 kw["apply_cpu_s"] / insert_s if insert_s > 0 else NAN,
                 "%.2f" % rv0["first_byte_s"] if rv0.get("first_byte_s") is not None else "-",
                 rv0.get("seconds", NAN))]
    if kw and kw.get("worker_cpu_s") is not None and kw.get("apply_cpu_s") is None:
        L += ["", "kwatch's CPU: worker %.2f s, the rest of PostgreSQL (relist merge, WAL writer, ...) %.2f s; "
              "the apiserver serving its LIST %.2f s. Worker RssAnon %.0f MB before the sync, %.0f MB after."
              % (kw["worker_cpu_s"], kw["cpu_s"] - kw["worker_cpu_s"], kw["apiserver_cpu_s"],
                 kw["worker_rss_before_mb"], kw["worker_rss_after_mb"])]
    L += ["", "### Targets (issue 10)", "", "| target | this run | met |", "|---|---|---|"]
    for name, val, ok in targets(rep):
        L.append("| %s | %s | %s |" % (name, val, "yes" if ok else "**no**"))

    rel, ev = rep.get("relist"), rep.get("wal_per_event")
    if rel or ev:
        L += ["", "### Cost of a relist and of writes", "", "| | |", "|---|---|"]
    if rel:
        L.append("| relist of %s unchanged pods (`kwatch.relist(wait => true)`) | %.2f s |"
                 % ("{:,}".format(rel["objects"]), rel["seconds"]))
        L.append("| rows rewritten / inserted / deleted | %d / %d / %d |"
                 % (rel["rows_rewritten"], rel["rows_inserted"], rel["rows_deleted"]))
        L.append("| notifications (received / counted) | %d / %d |"
                 % (rel["notifications_received"], rel["notifications_counted"]))
        L.append("| WAL written by the relist | %s bytes%s |" % ("{:,}".format(rel["wal_bytes"]),
                                                             rmgr_note(rel)))
    kw = by_name(rep).get("kwatch", {})
    cp = next((a for a in rep["anchors"] if a["name"].startswith("COPY floor")), None)
    if kw.get("wal_bytes") and cp:
        L.append("| WAL of the initial sync: kwatch / COPY floor | %.1f MB (%s B/object) / %.1f MB (%s B/object) |"
                 % (kw["wal_bytes"] / 1e6, fnum(kw["wal_bytes"] / kw["objects"], 0), cp["wal_bytes"] / 1e6,
                    fnum(cp["wal_bytes"] / cp["objects"], 0)))
        L.append("| table size: kwatch / COPY floor | %.1f MB / %.1f MB |" % (kw["table_mb"], cp["table_mb"]))
    if ev:
        L.append("| WAL per applied event (%d PATCHes of one label, after a CHECKPOINT) | %s bytes "
                 "(%s without full-page images)%s |"
                 % (ev["events"], fnum(ev["wal_bytes_per_event"], 0),
                    fnum(ev["wal_bytes_per_event_without_fpi"], 0), rmgr_note(ev, per=ev["events"])))
        L.append("| those events: sent in / applied in | %.2f s / %.2f s (%.0f events/s, the apiserver's pace) |"
                 % (ev["patch_seconds"], ev["applied_seconds"], ev["events_per_s"]))

    q = rep.get("queries")
    if q:
        L += ["", "### Queries: mirror vs live table vs kubectl", "",
              "| query | mirror (SQL) | live table (LIST per scan) | `kubectl get` | rows |",
              "|---|---|---|---|---|"]
        for x in q:
            rows = {x["mirror_rows"], x["live_rows"], x["kubectl_rows"]}
            L.append("| %s | %s ms | %s ms | %s ms | %s |" % (
                x["query"], fnum(x["mirror_ms"], 2), fnum(x["live_ms"], 0), fnum(x["kubectl_ms"], 0),
                "{:,}".format(x["mirror_rows"]) if len(rows) == 1 else
                "mirror %d, live %d, kubectl %d" % (x["mirror_rows"], x["live_rows"], x["kubectl_rows"])))
        L += ["", "Mirror: median of %d psycopg2 round trips (rows fetched); live and kubectl: median of %d. "
              "Live requests: %s." % (rep["meta"]["mirror_runs"], rep["meta"]["slow_runs"],
                                      "; ".join("`%s`" % x["live_request"] for x in q if x["live_request"]))]

    d = rep.get("notify_delay")
    if d:
        L += ["", "### Event -> NOTIFY delay", "",
              "p50 %.1f ms, p95 %.1f ms, max %.1f ms over %d PATCHes (from the PATCH response to the "
              "notification received)." % (d["p50_ms"], d["p95_ms"], d["max_ms"], d["events"])]
    return "\n".join(L) + "\n"


def rmgr_note(x, per=None):
    by = x.get("wal_by_rmgr") or {}
    if not by:
        return ""
    top = sorted(by.items(), key=lambda kv: -kv[1]["bytes"])[:4]
    if per:
        return "; per event: " + ", ".join("%s %s" % (k, fnum(v["bytes"] / per, 0)) for k, v in top)
    return "; " + ", ".join("%s %s" % (k, "{:,}".format(v["bytes"])) for k, v in top)


def scale_markdown(rep):
    """scale.py's report as Markdown."""
    r, m = rep["result"], rep["meta"]
    L = ["", "## %d watched resources (CRDs) on one server" % r["watches"], "",
         "%s, %s; %d objects of each (%d in all)." % (m["date"], m["machine"], m["objects_per_crd"],
                                                       r["objects"]), "",
         "| | |", "|---|---|",
         "| `watch()` calls (each creates its table) | %.1f s for %d |" % (r["register_s"], r["watches"]),
         "| time to all synced (from the first call) | %.1f s |" % r["all_synced_s"],
         "| kwatch processes | %d |" % r["kwatch_processes"],
         "| worker TCP connections to the API server | %d |" % r["tcp_connections"],
         "| worker RssAnon before / peak / after | %.0f / %.0f / %.0f MB |"
         % (r["worker_rss_before_mb"], r["worker_rss_peak_mb"], r["worker_rss_after_mb"]),
         "| worker CPU while syncing | %.2f s (apiserver %.2f s) |" % (r["sync_worker_cpu_s"],
                                                                     r["sync_apiserver_cpu_s"]),
         "| worker CPU idle, all watches open | %.2f%% of a core over %.0f s |"
         % (r["idle_worker_cpu_pct"], r["idle_seconds"]),
         "| API server CPU meanwhile / before the watches | %.0f%% / %.0f%% of a core |"
         % (r["idle_apiserver_cpu_pct"], r.get("idle_apiserver_cpu_pct_before_watches", NAN)),
         "| WATCH / LIST requests, relists, unhealthy after the idle period | %d / %d, %d, %d |"
         % (r["watch_calls"], r["list_calls"], r["relists"], r["unhealthy_after_idle"]),
         "| PATCH of an object of the last resource -> its row changed | %.1f ms |" % r["change_to_row_ms"]]
    return "\n".join(L) + "\n"


def scale_line(s):
    """One sentence from scale.py's JSON."""
    r, m = s["result"], s["meta"]
    return ("%d watched CRDs on one server (%d objects each; %s, `scale.py`): all synced %.1f s after the "
            "first `watch()` call (the calls themselves, each creating its table, took %.1f s); %d kwatch "
            "process, %d TCP connections to the API server; worker RssAnon %.0f MB before, %.0f MB peak, "
            "%.0f MB after; worker CPU idle %.2f%% of a core; a change on the last resource reached its row "
            "in %.0f ms."
            % (r["watches"], m["objects_per_crd"], m["date"], r["all_synced_s"], r["register_s"],
               r["kwatch_processes"], r["tcp_connections"], r["worker_rss_before_mb"], r["worker_rss_peak_mb"],
               r["worker_rss_after_mb"], r["idle_worker_cpu_pct"], r["change_to_row_ms"]))


def inum(x):
    """An integer figure with thousands separators ("-" for None)."""
    return "-" if x is None else "{:,.0f}".format(x)


def _rate(r):
    return "unlimited" if not r["offered_per_s"] else "{:,}".format(int(r["offered_per_s"]))


def evstream_table(rows, compact=False):
    """The rates as Markdown; compact (the README's): fewer columns."""
    if compact:
        L = ["| offered events/s | applied with NOTIFY/s | worker CPU (waiting for a CPU) | worker µs/event | "
             "events/transaction | lag p50 / p99 | kept up |", "|---|---|---|---|---|---|---|"]
    else:
        L = ["| offered events/s | sent | sent/s | applied with NOTIFY/s | worker CPU | worker waiting for a CPU | "
             "PostgreSQL CPU | worker µs/event | events/transaction | lag p50 | lag p99 | lag max | kept up |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        runs = r.get("runs") or []
        kept = ("yes" if r["kept_up"] else "**no**") if not runs or len(runs) < 2 else \
            "%s (%d of %d rounds)" % ("yes" if r["kept_up"] else "**no**", r["rounds_kept_up"], len(runs))
        kept = "-" if not r["offered_per_s"] else kept
        wait = "%.0f%%" % r["worker_runqueue_pct"] if "worker_runqueue_pct" in r else "-"
        if compact:
            L.append("| %s | %s | %.0f%% (%s) | %s | %s | %s / %s ms | %s |" % (
                _rate(r), inum(r["applied_per_s"]), r["worker_cpu_pct"], wait,
                fnum(r["worker_cpu_us_per_event"], 0), fnum(r.get("events_per_transaction"), 1),
                fnum(r["lag_p50_ms"], 1), fnum(r["lag_p99_ms"], 1), kept))
            continue
        L.append("| %s | %s | %s | %s | %.0f%% | %s | %.0f%% | %s | %s | %s ms | %s ms | %s ms | %s |" % (
            _rate(r), "{:,}".format(r["sent"]), inum(r["sent_per_s"]), inum(r["applied_per_s"]),
            r["worker_cpu_pct"], wait, r["pg_cpu_pct"], fnum(r["worker_cpu_us_per_event"], 0),
            fnum(r.get("events_per_transaction"), 1),
            fnum(r["lag_p50_ms"], 1), fnum(r["lag_p99_ms"], 1), fnum(r["lag_max_ms"], 1), kept))
    return L


def evstream_summary(rep):
    """(highest offered rate kept up with, the unlimited row's applied/s)."""
    rows = rep["evstream"]
    kept = [r["offered_per_s"] for r in rows if r["offered_per_s"] and r["kept_up"]]
    ceiling = max([r["applied_per_s"] or 0 for r in rows] or [0])
    return (max(kept) if kept else None), ceiling


def evstream_markdown(rep):
    """evstream.py's report as Markdown."""
    m, rows = rep["meta"], rep["evstream"]
    kept, ceiling = evstream_summary(rep)
    L = ["", "## Watch events applied per second (synthetic event source, `evstream.py`)", "",
         "%s, %s; one watch on %s ConfigMaps, MODIFIED events of %s bytes each (as framed on the wire), "
         "kwatch.batch_size %d; %s s per rate; %s. Lag: send time stamped by the streamer -> notification "
         "received on a LISTENing connection. CPU in %% of one core over the phase; \"waiting for a CPU\": "
         "runnable but not running (other work on the machine)."
         % (m["date"], m["machine"], "{:,}".format(m["objects"]), "{:,}".format(m["event_bytes"]), m["batch_size"],
            fnum(m["seconds_per_rate"], 0),
            "the round of median applied events/s of %d" % m["rounds"] if m.get("rounds", 1) > 1
            else "one round"), ""]
    L += evstream_table(rows)
    L += ["", "Highest offered rate kept up with: %s; most applied with NOTIFY: %s events/s. "
          "Target (issue 10): >= 20,000 events/s applied with NOTIFY on 2 cores: %s."
          % ("{:,} events/s".format(int(kept)) if kept else "none", inum(ceiling),
             "met" if ceiling >= 20000 else "**not met**")]
    busy = [r for r in rows if r.get("harness_cpu_pct", 0) > 80]
    if busy:
        L.append("The LISTENing harness used over 80%% of a core at %s events/s: the lag there is partly its own."
                 % ", ".join(_rate(r) for r in busy))
    odd = [r for r in rows if r["relists"] or r["notifications_received"] != r["sent"]]
    for r in odd:
        L.append("At %s events/s: %d relists, %d of %d notifications received." % (
            _rate(r), r["relists"], r["notifications_received"], r["sent"]))
    for r in rows:
        if r.get("perf_top"):
            L += ["", "Where the worker spends CPU at %s events/s (`perf record`, self time):" % _rate(r), "",
                  "| % | object | symbol |", "|---|---|---|"]
            for x in r["perf_top"][:15]:
                L.append("| %.1f | %s | `%s` |" % (x["pct"], x["dso"], x["symbol"]))
            if r.get("perf_inclusive"):
                L += ["", "Time under each function (`perf report --children`; kwatch.so's own frames "
                      "need its symbols):", "", "| % | object | function |", "|---|---|---|"]
                for x in r["perf_inclusive"][:20]:
                    L.append("| %.1f | %s | `%s` |" % (x["pct"], x["dso"], x["symbol"]))
    return "\n".join(L) + "\n"


def evstream_line(rep):
    m = rep["meta"]
    kept, ceiling = evstream_summary(rep)
    return ("Watch events applied with NOTIFY (%s, `evstream.py`: a C streamer replaying pre-encoded "
            "MODIFIED events of %s bytes on %s ConfigMaps to one watch, %s; lag from send to notification "
            "received; CPU in %% of one core): kept up with up to %s events/s, at most %s events/s applied "
            "(issue 10's target, >= 20,000 events/s on 2 cores: %s)."
            % (m["date"], "{:,}".format(m["event_bytes"]), "{:,}".format(m["objects"]),
               "median round of %d" % m["rounds"] if m.get("rounds", 1) > 1 else "one round",
               "{:,}".format(int(kept)) if kept else "none", inum(ceiling),
               "met" if ceiling >= 20000 else "not met"))


def servers_markdown(rep):
    """servers.py's report as Markdown."""
    r, m = rep["servers"], rep["meta"]
    L = ["", "## %d API servers at once, one watch each (`servers.py`)" % r["servers"], "",
         "%s, %s; %d ConfigMaps on each fake API server (test/fakeapi, %s), %s in all."
         % (m["date"], m["machine"], m["objects_per_server"], m["fake_processes_note"], "{:,}".format(r["objects"])), "",
         "| | |", "|---|---|",
         "| `watch()` calls | %.1f s for %d |" % (r["register_s"], r["servers"]),
         "| time to all synced (from the first call) | %.1f s |" % r["all_synced_s"],
         "| kwatch processes | %d |" % r["kwatch_processes"],
         "| worker TCP connections to the API servers | %d (%d servers with one) |"
         % (r["tcp_connections"], r["servers_connected"]),
         "| worker RssAnon before / peak / after | %.0f / %.0f / %.0f MB |"
         % (r["worker_rss_before_mb"], r["worker_rss_peak_mb"], r["worker_rss_after_mb"]),
         "| worker CPU while syncing | %.2f s |" % r["sync_worker_cpu_s"],
         "| worker CPU idle, all watches open | %.2f%% of a core over %.0f s |"
         % (r["idle_worker_cpu_pct"], r["idle_seconds"]),
         "| WATCH / LIST requests, relists, unhealthy after the idle period | %d / %d, %d, %d |"
         % (r["watch_calls"], r["list_calls"], r["relists"], r["unhealthy_after_idle"]),
         "| a change on the last server -> its NOTIFY | %.1f ms |" % r["change_to_notify_ms"]]
    return "\n".join(L) + "\n"


def servers_line(s):
    r, m = s["servers"], s["meta"]
    return ("%d API servers at once, one watch each (%d ConfigMaps each; %s, `servers.py`, fake API "
            "servers): all synced %.1f s after the first `watch()` call; %d kwatch process, %d TCP "
            "connections (one per server); worker RssAnon %.0f MB before, %.0f MB peak, %.0f MB after; "
            "worker CPU idle %.2f%% of a core; a change on the last server reached its NOTIFY in %.0f ms."
            % (r["servers"], m["objects_per_server"], m["date"], r["all_synced_s"], r["kwatch_processes"],
               r["tcp_connections"], r["worker_rss_before_mb"], r["worker_rss_peak_mb"],
               r["worker_rss_after_mb"], r["idle_worker_cpu_pct"], r["change_to_notify_ms"]))


def evreal_table(rows):
    L = ["| phase | PATCHes | PATCHes/s | kwatch lag p50 / p99 / max | client-go lag p50 / p99 / max | "
         "kwatch p50 - client-go p50 | worker CPU | informer CPU | apiserver CPU |",
         "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        k, c = r["kwatch"], r["client_go"]

        def lag(x):
            if not x.get("received"):
                return "none received"
            miss = "" if x["received"] == x["events"] else " (%d of %d)" % (x["received"], x["events"])
            return "%s / %s / %s ms%s" % (fnum(x["p50_ms"], 1), fnum(x["p99_ms"], 1), fnum(x["max_ms"], 1), miss)
        L.append("| %s | %s | %s | %s | %s | %+.1f ms | %.0f%% | %.0f%% | %.0f%% |" % (
            r["phase"], "{:,}".format(r["events"]), inum(r["patches_per_s"]), lag(k), lag(c),
            r["p50_diff_ms"], r["worker_cpu_pct"], r["informer_cpu_pct"], r["apiserver_cpu_pct"]))
    return L


def evreal_markdown(rep):
    """evreal.py's report as Markdown."""
    m, rows = rep["meta"], rep["evreal"]
    L = ["", "## Lag from the real API server: kwatch beside client-go (`evreal.py`)", "",
         "%s, %s; %d ConfigMaps; paced: one PATCH at a time; ceiling: %d client processes PATCHing as fast "
         "as the API server answers for %s s. Lag: just before the PATCH -> notification received "
         "(kwatch) / UpdateFunc called (client-go informer). CPU in %% of one core."
         % (m["date"], m["machine"], m["objects"], m["clients"], fnum(m["seconds"], 0)), ""]
    L += evreal_table(rows)
    worst = max((r["p50_diff_ms"] for r in rows), default=float("nan"))
    L += ["", "Target (issue 10): kwatch's lag p50 within 5 ms of client-go's: %s (largest difference "
          "%+.1f ms)." % ("met" if worst <= 5 else "**not met**", worst)]
    return "\n".join(L) + "\n"


def evreal_line(rep):
    m = rep["meta"]
    worst = max((r["p50_diff_ms"] for r in rep["evreal"]), default=float("nan"))
    return ("Lag from the real API server (%s, `evreal.py`, %d ConfigMaps; ceiling: %d PATCH clients): "
            "kwatch's notification beside a client-go informer's UpdateFunc, from just before the PATCH "
            "(issue 10's target, p50 within 5 ms of client-go's: %s, %+.1f ms at most):"
            % (m["date"], m["objects"], m["clients"], "met" if worst <= 5 else "not met", worst))


def readme_section(reps):
    """The README's table: the anchors of each run side by side; scale.py's
    reports (recognized by their "result") and servers.py's ("servers")
    become one sentence each, evstream.py's ("evstream") a sentence and its
    table of rates."""
    scales = [r for r in reps if "result" in r]
    evs = [r for r in reps if "evstream" in r]
    multi = [r for r in reps if "servers" in r]
    real = [r for r in reps if "evreal" in r]
    reps = [r for r in reps if "anchors" in r]
    names = []
    for rep in reps:
        for a in rep["anchors"]:
            if a["name"] not in names:
                names.append(a["name"])
    L = []
    head = "| |" + "".join(" %s pods: s | obj/s | RSS MB | CPU s |" % "{:,}".format(r["meta"]["objects"])
                           for r in reps)
    if reps:
        L += [head, "|---|" + "---|---|---|---|" * len(reps)]
    for n in names:
        cells = ""
        for rep in reps:
            a = by_name(rep).get(n)
            cells += (" %s | %s | %s | %s |" % (fnum(a["seconds"]), fnum(a["objects_per_s"], 0),
                                                 fnum(a["rss_mb"], 0), fnum(a["cpu_s"]))) if a else " | | | |"
        L.append("| %s |%s" % (n, cells))
    if reps:
        L.append("")
    for rep in reps:
        m, r = rep["meta"], ratios(rep)
        rel, ev = rep.get("relist") or {}, rep.get("wal_per_event") or {}
        L.append("%s pods (%s, %s, `make bench PODS=%d`, %s): kwatch / JSON informer **%.2f**, "
                 "kwatch / max(LIST floor, COPY floor) **%.2f**, kwatch / the LIST it makes (rv=0) %.2f. "
                 "An unchanged relist rewrote %s rows, sent %s notifications and wrote %s bytes of WAL; "
                 "an applied change wrote %s bytes of WAL (%s without full-page images)."
                 % ("{:,}".format(m["objects"]), m["date"], m["machine"], m["pods_arg"], m["rounds_note"],
                    r.get("kwatch_over_json_informer", NAN), r.get("kwatch_over_floor", NAN),
                    r.get("kwatch_over_its_list", NAN), rel.get("rows_rewritten", "-"),
                    rel.get("notifications_received", "-"),
                    "{:,}".format(rel["wal_bytes"]) if rel else "-",
                    fnum(ev.get("wal_bytes_per_event"), 0), fnum(ev.get("wal_bytes_per_event_without_fpi"), 0)))
        L.append("")
    q = next((rep["queries"] for rep in reps if rep.get("queries")), None)
    if q:
        rep = next(rep for rep in reps if rep.get("queries"))
        L += ["| query (%s pods) | mirror (SQL) | live table | `kubectl get` | rows |"
              % "{:,}".format(rep["meta"]["objects"]), "|---|---|---|---|---|"]
        for x in q:
            L.append("| %s | %s ms | %s ms | %s ms | %s |" % (
                x["query"], fnum(x["mirror_ms"], 2), fnum(x["live_ms"], 0), fnum(x["kubectl_ms"], 0),
                "{:,}".format(x["mirror_rows"])))
        L.append("")
    for s in scales:
        L += [scale_line(s), ""]
    for s in multi:
        L += [servers_line(s), ""]
    for e in evs:
        L += [evstream_line(e), ""] + evstream_table(e["evstream"], compact=True) + [""]
    for e in real:
        L += [evreal_line(e), ""] + evreal_table(e["evreal"]) + [""]
    return "\n".join(L).rstrip() + "\n"


def selectors_markdown(rep):
    """label_selectors.py's report as Markdown."""
    m = rep["meta"]
    L = ["", "## Label selectors (`label_selectors.py`)", "",
         "%s, %s; %s pods-shaped rows, GIN (jsonb_path_ops) on labels, %d rounds interleaved, medians."
         % (m["date"], m["machine"], "{:,}".format(m["rows"]), m["rounds"]), "",
         "| `kwatch.matches_labels(labels, ...)` | rows | selector | hand-written | ratio (target <= 1.5) | scans |",
         "|---|---|---|---|---|---|"]
    for r in rep["selectors"]:
        L.append("| `%s` | %d%s | %.2f ms | %.2f ms | %.2f x | %s / %s |"
                 % (r["selector"], r["rows"], "" if r["rows"] == r["rows_hand_written"]
                    else " (hand-written: %d)" % r["rows_hand_written"], r["selector_ms"],
                    r["hand_written_ms"], r["ratio"], r["selector_scan"], r["hand_written_scan"]))
    L += ["", "The plan of the second:", "", "```"] + rep["plan"] + ["```"]
    return "\n".join(L) + "\n"


def main():
    args = sys.argv[1:]
    if len(args) >= 3 and args[0] == "--readme":
        reps = [json.load(open(p)) for p in args[2:]]
        text = open(args[1]).read()
        if BEGIN not in text or END not in text:
            sys.exit("%s has no %s ... %s markers" % (args[1], BEGIN, END))
        new = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END),
                     lambda _: BEGIN + "\n" + readme_section(reps) + END, text, flags=re.S)
        open(args[1], "w").write(new)
    elif len(args) == 1:
        rep = json.load(open(args[0]))
        sys.stdout.write(scale_markdown(rep) if "result" in rep else evstream_markdown(rep) if "evstream" in rep
                         else servers_markdown(rep) if "servers" in rep
                         else selectors_markdown(rep) if "selectors" in rep
                         else evreal_markdown(rep) if "evreal" in rep else markdown(rep))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
