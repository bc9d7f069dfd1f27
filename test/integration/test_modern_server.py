"""Custom resources on both control planes (issue 23): cert-manager's
Certificate (test/fixtures/certificates-crd.json) watched on the 1.20 plane
and on the modern one (the Kubernetes 1.36 generic API server: WatchList,
consistent lists from the watch cache), each test run once per plane
(conftest's `plane`).  Every test proves the table equals the server object
by object (assert_table_matches_server) and that each change was notified
and recorded in kwatch.events once: the initial sync, changes (spec, labels,
the status subresource, delete), kwatch.relist(), a 410 after compaction
and an API server restart, bookmarks moving the checkpoint, PostgreSQL and
API server restarts, and seeded random changes with faults."""
import json
import os
import time

import pytest
from psycopg2 import sql as pgsql

import conftest
from conftest import (assert_table_matches_server, kubectl, kubectl_json, row_uids, sql, sql_one,
                      wait_until, wait_watching, watch, watch_status)
from modern_support import (CERTS, CertificateWorkload, certificates_get, change_certificate,
                            checkpoint, create_certificates, ensure_certificate_crd, events_of,
                            last_seq, set_ready)


def channel(table):
    return "kwatch_" + table.split(".", 1)[1]


def logged_410(log, server):
    mine = [line for line in log.splitlines() if '"%s"' % server in line]
    return any("410" in line or "too old" in line for line in mine)


def watched_certificates(ctx, certs, **kw):
    """The CRD, a namespace of the test's with Certificates `certs` ({name:
    labels}), a server and a watch of the namespace's Certificates, synced
    and equal to the server.  Returns (ns, server, table, get args, {name: (uid, rv)})."""
    ensure_certificate_crd()
    ns = ctx.namespace()
    srv = ctx.server()
    made = create_certificates(ns, certs)
    table = watch(CERTS, srv, namespace=ns, **kw)
    wait_watching(srv, CERTS)
    get = certificates_get(ns)
    assert_table_matches_server(table, srv, get)
    return ns, srv, table, get, made


def test_certificates_mirrored_with_notifications(plane, ctx):
    ns, srv, table, get, made = watched_certificates(
        ctx, {"example-com": {"tier": "frontend"}, "internal-ca": {}, "api-mtls": {}})
    assert table.startswith("k8s.certificates")
    assert row_uids(table, srv) == {uid for uid, _ in made.values()}
    # the initial LIST's objects were recorded once each, as preexisting ADDED
    evs = events_of(srv)
    assert sorted((e["type"], e["name"], e["resource_version"]) for e in evs) == sorted(
        ("ADDED", n, rv) for n, (_, rv) in made.items()), evs
    # typed columns of the CRD's printer columns: Secret is a plain path
    assert dict(sql("SELECT name, secret FROM %s WHERE cluster = %%s" % table, (srv,))) == {
        "example-com": "example-com-tls", "internal-ca": "internal-ca", "api-mtls": "api-mtls"}

    lst = ctx.listener(channel(table), table)
    from_seq = last_seq()
    new = create_certificates(ns, {"new-one": {"tier": "frontend"}})["new-one"]
    rv_spec = change_certificate(ns, "example-com", renewBefore="720h0m0s")
    rv_status = set_ready(ns, "example-com")
    kubectl("label", CERTS, "internal-ca", "-n", ns, "rotated=yes")
    rv_label = kubectl_json("get", CERTS, "internal-ca", "-n", ns)["metadata"]["resourceVersion"]
    kubectl("delete", CERTS, "api-mtls", "-n", ns, "--wait=false")
    assert_table_matches_server(table, srv, get)

    want = [("ADDED", "new-one", new[1]), ("MODIFIED", "example-com", rv_spec),
            ("MODIFIED", "example-com", rv_status), ("MODIFIED", "internal-ca", rv_label)]
    wait_until(lambda: len(lst.payloads(cluster=srv)) >= 5, 20, "five notifications")
    got = [(p["type"], p["name"], p["resource_version"]) for p in lst.payloads(cluster=srv)]
    assert got[:4] == want and got[4][:2] == ("DELETED", "api-mtls") and len(got) == 5, got
    assert [p["uid"] for p in lst.payloads(cluster=srv, type="DELETED")] == [made["api-mtls"][0]]
    assert lst.visibility_problems(srv) == [], lst.seen
    # each notification is a kwatch.events row, once
    evs = events_of(srv, from_seq)
    assert [(e["type"], e["name"], e["resource_version"]) for e in evs] == got, evs
    assert [e["seq"] for e in evs] == [p["seq"] for p in lst.payloads(cluster=srv)]
    st = watch_status(srv, CERTS)
    assert st["objects"] == 3 and st["decode_errors"] == 0 and st["database_errors"] == 0, st


def test_relist_on_demand(plane, ctx):
    """kwatch.relist(): a row the server does not have (a missed deletion)
    goes with one DELETED, unchanged objects are not notified again."""
    ns, srv, table, get, made = watched_certificates(ctx, {"a": {}, "b": {}})
    before = watch_status(srv, CERTS)
    lst = ctx.listener(channel(table), table)
    sql(pgsql.SQL("INSERT INTO {} (cluster, uid, resource_version, object) VALUES (%s, 'stale-uid', '1',"
                  " jsonb_build_object('metadata', jsonb_build_object('name', 'stale', 'namespace', %s,"
                  " 'uid', 'stale-uid', 'resourceVersion', '1')))").format(pgsql.SQL(table)), (srv, ns))
    from_seq = last_seq()
    assert sql_one("SELECT kwatch.relist(%s, server => %s, wait => true, timeout => '60s')",
                   (CERTS, srv)) is True
    assert sql_one(pgsql.SQL("SELECT count(*) FROM {} WHERE uid = 'stale-uid'")
                   .format(pgsql.SQL(table))) == 0
    assert_table_matches_server(table, srv, get)
    st = watch_status(srv, CERTS)
    assert st["relist_requests"] == before["relist_requests"] + 1, st
    assert st["relists"] == before["relists"] + 1, st
    p = lst.wait_for(type="DELETED", cluster=srv, name="stale")
    assert (p["preexisting"], p["final_state_unknown"]) == (True, True), p
    assert [(e["type"], e["name"]) for e in events_of(srv, from_seq)] == [("DELETED", "stale")]
    assert lst.payloads(cluster=srv, name="a") == [] and lst.payloads(cluster=srv, name="b") == []


def test_relist_after_410(plane, ctx):
    """PostgreSQL down while Certificates change, etcd compacted and the
    API server restarted (its watch cache starts above the checkpoint): the
    WATCH from the checkpoint gets 410, the relist finds every change once."""
    pg = conftest.PG
    ns, srv, table, get, made = watched_certificates(ctx, {"keep": {}, "change": {}, "gone": {},
                                                            "again": {}})
    old_rv = wait_until(lambda: checkpoint(srv), 10, "a checkpoint")
    from_seq = last_seq()
    pg.stop()
    try:
        kubectl("delete", CERTS, "gone", "again", "-n", ns, "--wait=false")
        new = create_certificates(ns, {"new": {}, "again": {"v": "2"}})
        rv_change = change_certificate(ns, "change", duration="4320h0m0s")
        plane.compact()
        plane.restart_apiserver()
        log_from = pg.log_size()
    finally:
        pg.start()
    assert_table_matches_server(table, srv, get, timeout=60)
    st = wait_watching(srv, CERTS, timeout=60)
    assert st["relists"] >= 1 and st["list_calls"] >= 1, st
    wait_until(lambda: logged_410(pg.log_since(log_from), srv), 20, "a 410 in the log")
    assert checkpoint(srv) != old_rv
    evs = events_of(srv, from_seq)
    got = {(e["type"], e["name"], e["uid"]): e["resource_version"] for e in evs}
    assert len(got) == len(evs), ("an event twice", evs)
    assert got == {("ADDED", "new", new["new"][0]): new["new"][1],
                   ("ADDED", "again", new["again"][0]): new["again"][1],
                   ("MODIFIED", "change", made["change"][0]): rv_change,
                   # a deletion inferred by the relist: the row's last resourceVersion
                   ("DELETED", "again", made["again"][0]): made["again"][1],
                   ("DELETED", "gone", made["gone"][0]): made["gone"][1]}, evs
    assert not [e for e in evs if e["name"] == "keep"], "keep did not change"


def test_bookmarks_move_the_checkpoint(plane, ctx, settings):
    """Writes the watch does not see (another namespace) move the server's
    resourceVersion; the bookmarks the watch cache sends shortly before a
    WATCH's timeoutSeconds carry it into the checkpoint, with no row change,
    notification or event."""
    settings(watch_timeout=3)  # WATCHes of 3-6 s: a bookmark ~2 s before each ends
    ns, srv, table, get, made = watched_certificates(ctx, {"quiet": {}})
    before = watch_status(srv, CERTS)
    lst = ctx.listener(channel(table), table)
    from_seq = last_seq()
    other = ctx.namespace("-other")
    moved = create_certificates(other, {"elsewhere": {}})["elsewhere"][1]
    wait_until(lambda: int(checkpoint(srv) or 0) >= int(moved), 60,
               "the checkpoint to pass resourceVersion %s by a bookmark" % moved)
    st = watch_status(srv, CERTS)
    assert st["bookmarks"] > before["bookmarks"], (before, st)
    assert_table_matches_server(table, srv, get)
    assert lst.payloads(cluster=srv) == [] and events_of(srv, from_seq) == []
    assert st["relists"] == before["relists"], (before, st)


def test_postgres_restart_resumes_from_checkpoint(plane, ctx):
    """A PostgreSQL restart resumes by WATCH from the checkpoint, without a LIST."""
    pg = conftest.PG
    ns, srv, table, get, made = watched_certificates(ctx, {"a": {}})
    rv = change_certificate(ns, "a", renewBefore="100h0m0s")
    assert_table_matches_server(table, srv, get)
    wait_until(lambda: checkpoint(srv) == rv, 10, "the checkpoint to reach the last event's RV")
    from_seq = last_seq()
    log_from = pg.log_size()
    pg.restart()
    wait_until(lambda: sql_one("SELECT kwatch.worker_pid()"), 20, "the worker after restart")
    b = create_certificates(ns, {"b": {}})["b"]
    rv2 = change_certificate(ns, "a", renewBefore="200h0m0s")
    assert_table_matches_server(table, srv, get)
    st = wait_watching(srv, CERTS)
    assert st["list_calls"] == 0 and st["relists"] == 0, ("resumed with a LIST", st,
                                                          pg.log_since(log_from)[-3000:])
    assert st["objects"] == 2, st
    assert [(e["type"], e["name"], e["resource_version"]) for e in events_of(srv, from_seq)] == [
        ("ADDED", "b", b[1]), ("MODIFIED", "a", rv2)]


def test_apiserver_restart_while_watching(plane, ctx):
    ns, srv, table, get, made = watched_certificates(ctx, {"a": {}, "b": {}})
    errors_before = watch_status(srv, CERTS)["http_errors"]
    from_seq = last_seq()
    plane.restart_apiserver()
    c = create_certificates(ns, {"c": {}})["c"]
    rv = set_ready(ns, "a")
    kubectl("delete", CERTS, "b", "-n", ns, "--wait=false")
    assert_table_matches_server(table, srv, get, timeout=60)
    st = wait_watching(srv, CERTS, timeout=60)
    assert st["http_errors"] > errors_before, ("the outage went unnoticed", st)
    assert st["objects"] == 2, st
    evs = [(e["type"], e["name"]) for e in events_of(srv, from_seq)]
    # a relist (if the re-watch was refused) may add nothing: every change once
    assert sorted(evs) == [("ADDED", "c"), ("DELETED", "b"), ("MODIFIED", "a")], evs
    assert [e["resource_version"] for e in events_of(srv, from_seq) if e["name"] == "a"] == [rv]
    assert c[0] in row_uids(table, srv)


def test_etcd_stopped_for_a_while(plane, ctx):
    """etcd down for a while under a watch (the API server answers errors or
    nothing), then back: the changes made after are mirrored, each once."""
    ns, srv, table, get, made = watched_certificates(ctx, {"keep": {}, "gone": {}})
    from_seq = last_seq()
    plane.stop_etcd()
    try:
        time.sleep(8)  # the outage
    finally:
        plane.start_etcd()
    wait_until(plane.ready, 60, "the API server to be ready again")
    kubectl("delete", CERTS, "gone", "-n", ns, "--wait=false")
    new = create_certificates(ns, {"new": {}})["new"]
    rv = change_certificate(ns, "keep", renewBefore="48h0m0s")
    assert_table_matches_server(table, srv, get, timeout=90)
    wait_watching(srv, CERTS, timeout=60)
    evs = {(e["type"], e["name"]): e["resource_version"] for e in events_of(srv, from_seq)}
    assert len(evs) == len(events_of(srv, from_seq)), ("an event twice", events_of(srv, from_seq))
    assert evs == {("DELETED", "gone"): evs.get(("DELETED", "gone")), ("ADDED", "new"): new[1],
                   ("MODIFIED", "keep"): rv}, evs


@pytest.mark.parametrize("seed", [int(os.environ.get("KWATCH_SEED", "23"))])
def test_certificates_converge_under_faults(plane, ctx, seed):
    """Seeded random changes of Certificates over two namespaces, watched
    cluster-wide (server A) and by label selector in one namespace (server
    B), with an API server restart, a compaction + restart and a PostgreSQL
    restart between rounds: after each round both tables equal the server
    object by object and every object's last event is its final state."""
    pg = conftest.PG
    ensure_certificate_crd()
    n1, n2 = ctx.namespace("-1"), ctx.namespace("-2")
    wl = CertificateWorkload([n1, n2], seed)
    wl.round(6)
    from_seq = last_seq()
    every = ctx.server("-all")
    sel = ctx.server("-sel")
    table = watch(CERTS, every)
    assert watch(CERTS, sel, namespace=n1, label_selector="sel=yes") == table
    views = {every: certificates_get(), sel: certificates_get(n1, "sel=yes")}
    for srv, get in views.items():
        wait_watching(srv, CERTS)
        assert_table_matches_server(table, srv, get, timeout=60)
    faults = [("apiserver restart", plane.restart_apiserver),
              ("compaction and apiserver restart", lambda: (plane.compact(), plane.restart_apiserver())),
              ("postgres restart", pg.restart)]
    # kwatch.events is a ring in shared memory (kwatch.event_buffer): a
    # PostgreSQL restart empties it (seq goes on), so the events are read
    # after every round, before the next fault
    last = {srv: {} for srv in views}   # srv -> uid -> its last event
    read_to = {srv: from_seq for srv in views}

    def converged_and_read(what):
        for srv, get in views.items():
            assert_table_matches_server(table, srv, get, timeout=90)
            evs = events_of(srv, read_to[srv])
            for e in evs:
                if e["namespace"] in (n1, n2):
                    last[srv][e["uid"]] = e
            if evs:
                read_to[srv] = evs[-1]["seq"]
        # every object a view shows has its final state as its last event;
        # every other object of the view's past has DELETED last
        for srv, get in views.items():
            shown = {i["metadata"]["uid"]: i["metadata"]["resourceVersion"]
                     for i in kubectl_json("get", *get)["items"]
                     if i["metadata"]["namespace"] in (n1, n2)}
            mine = last[srv]
            wrong = {u: (mine.get(u, {}).get("type"), mine.get(u, {}).get("resource_version"), rv)
                     for u, rv in shown.items()
                     if u not in mine or mine[u]["type"] == "DELETED"
                     or mine[u]["resource_version"] != rv}
            wrong.update({u: (e["type"], e["name"]) for u, e in mine.items()
                          if u not in shown and e["type"] != "DELETED"})
            assert wrong == {}, "seed %d, %s: last events of %s differ from the server: %s" \
                % (seed, what, srv, wrong)

    converged_and_read("after the initial sync")
    for what, fault in faults:
        wl.round(8)
        converged_and_read("before the " + what)
        fault()
        wl.round(8)
        converged_and_read("after the " + what)
        wait_watching(every, CERTS, timeout=60)


def test_modern_plane_streams_lists_and_counts_them(modern, ctx):
    """The infrastructure, without kwatch: the modern plane answers a WATCH
    with sendInitialEvents=true by streaming the objects as ADDED events and
    a BOOKMARK annotated k8s.io/initial-events-end, and its /metrics count it
    (ModernCluster.watch_list_count: the streaming tests' proof)."""
    ensure_certificate_crd()
    ns = ctx.namespace()
    made = create_certificates(ns, {"a": {}, "b": {}})
    before = modern.watch_list_count("cert-manager.io", "certificates")
    status, body = modern.get("/apis/cert-manager.io/v1/namespaces/%s/certificates?watch=1"
                              "&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
                              "&allowWatchBookmarks=true&timeoutSeconds=2" % ns)
    assert status == 200, body[:500]
    events = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
    added = {e["object"]["metadata"]["name"]: e["object"]["metadata"]["uid"]
             for e in events if e["type"] == "ADDED"}
    assert added == {n: uid for n, (uid, _) in made.items()}, events
    ends = [e for e in events if e["type"] == "BOOKMARK" and
            e["object"]["metadata"].get("annotations", {}).get("k8s.io/initial-events-end") == "true"]
    assert len(ends) == 1, events
    assert [e["type"] for e in events].index("BOOKMARK") == 2, "the bookmark follows the objects"
    wait_until(lambda: modern.watch_list_count("cert-manager.io", "certificates") >= before + 1, 10,
               "apiserver_watch_list_duration_seconds_count to count the streaming list")
    # no core API, no Namespace objects: what ctx.namespace() relies on
    status, _ = modern.get("/api/v1/namespaces")
    assert status == 404


def test_legacy_plane_audit_log_shows_kwatch_requests(ctx, settings):
    """The 1.20 plane's audit log (cluster.sh) gives the requests kwatch
    sent: a streaming list (sendInitialEvents=true), if tried, is refused by
    a 1.20 server, the objects come by a LIST, then WATCHes from a
    resourceVersion without sendInitialEvents.  A WATCH is logged when it
    ends (kube-apiserver 1.20 writes its ResponseStarted stage late): short
    WATCHes here."""
    settings(watch_timeout=2)
    legacy = conftest.CLUSTER
    assert not legacy.modern
    ensure_certificate_crd()
    ns = ctx.namespace()
    srv = ctx.server()
    create_certificates(ns, {"a": {}})
    since = legacy.audit_size()
    table = watch(CERTS, srv, namespace=ns)
    wait_watching(srv, CERTS)
    assert_table_matches_server(table, srv, certificates_get(ns))
    path = "/apis/cert-manager.io/v1/namespaces/%s/certificates?" % ns

    def calls():
        return [c for c in legacy.audit_calls(since) if c[2].startswith(path)]
    wait_until(lambda: [c for c in calls() if c[0] == "watch" and c[1] == 200], 20,
               "kwatch's WATCH in the audit log", interval=0.5)
    got = calls()
    streams = [i for i, (_, _, uri) in enumerate(got) if "sendInitialEvents=true" in uri]
    assert all(got[i][1] != 200 for i in streams), ("a 1.20 server accepted a streaming list", got)
    lists = [i for i, (verb, code, uri) in enumerate(got)
             if verb == "list" and code == 200 and "limit=1&" not in uri + "&"]
    assert lists and lists[-1] > max(streams, default=-1), ("no LIST after the refusal", got)
    watches = [i for i, (verb, code, uri) in enumerate(got) if verb == "watch" and code == 200]
    assert watches and watches[0] > lists[-1], got
    assert all("resourceVersion=" in got[i][2] and "sendInitialEvents" not in got[i][2]
               for i in watches), got


@pytest.mark.parametrize("strategy", ["auto", "list"])
def test_how_the_objects_came(plane, ctx, settings, strategy):
    """kwatch.list_strategy against the real servers: on 1.36 `auto` fills
    the table by one streaming list (the server's
    apiserver_watch_list_duration_seconds counts it) and no LIST beyond the
    `limit=1` check; `list` by LIST, with no streaming list.  On 1.20 either
    way the objects come by LIST, a streaming list if tried being refused
    (its audit log).  The table equals the server both ways."""
    settings(list_strategy=strategy)
    ensure_certificate_crd()
    ns = ctx.namespace()
    made = create_certificates(ns, {"a": {}, "b": {}, "c": {}})
    srv = ctx.server()
    if plane.modern:
        streams0 = plane.watch_list_count("cert-manager.io", "certificates")
        lists0 = plane.metric("apiserver_request_total", verb="LIST", group="cert-manager.io",
                              resource="certificates")
    else:
        since = plane.audit_size()
    table = watch(CERTS, srv, namespace=ns)
    wait_watching(srv, CERTS)
    # the rows are all there (read before kubectl's own LISTs count)
    wait_until(lambda: row_uids(table, srv) == {uid for uid, _ in made.values()}, 20, "the rows")
    text = plane.metrics() if plane.modern else None
    assert_table_matches_server(table, srv, certificates_get(ns))
    if plane.modern:
        streams = plane.watch_list_count("cert-manager.io", "certificates", text=text) - streams0
        lists = plane.metric("apiserver_request_total", text, verb="LIST", group="cert-manager.io",
                             resource="certificates") - lists0
        if strategy == "auto":
            assert streams >= 1 and lists <= 1, (streams, lists)
        else:
            assert streams == 0 and lists >= 2, (streams, lists)
    else:
        path = "/apis/cert-manager.io/v1/namespaces/%s/certificates?" % ns
        calls = [c for c in plane.audit_calls(since) if c[2].startswith(path)]
        assert not [c for c in calls if "sendInitialEvents=true" in c[2] and c[1] == 200], calls
        assert [c for c in calls if c[0] == "list" and c[1] == 200 and "limit=1&" not in c[2] + "&"], calls
        if strategy == "list":
            assert not [c for c in calls if "sendInitialEvents" in c[2]], calls
