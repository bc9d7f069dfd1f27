"""Fault suite, WATCH streams (issue 3): dropped, stalled, split, packed,
malformed and instantly closed watches against the fake API server
(test/fakeapi).  Every test ends with the mirror equal to the fake's store,
object by object, and checks what the client asked for next."""
from conftest import sql, wait_until, watch, watch_status, settings  # noqa: F401
from faults_support import (cut_watch, watched_pods, recovers,
                            fake, fake_server, pod, wait_converged, wait_status,  # noqa: F401
                            worker_requests, not_probe)


def test_drop_watch_mid_event_resumes_from_last_applied_rv(ctx, fake):
    srv, table = watched_pods(ctx, fake)
    lists = len(worker_requests(fake, "list"))
    f = fake.inject("drop", on="watch", after_events=1, mid_event=True)
    # the open watch sees these; the fault hits the next watch, so cut the current one
    fake.set_down(True)
    fake.set_down(False)
    a = fake.update("pods", "default", "p0", lambda o: o["metadata"]["labels"].update(v="1"))
    b = fake.update("pods", "default", "p1", lambda o: o["metadata"]["labels"].update(v="2"))
    wait_converged(table, srv, fake, "pods")
    assert f.hits, "the drop fault was never used"
    dropped = f.hits[0]
    assert dropped.events == 1
    after = [r for r in worker_requests(fake, "watch") if r.at > dropped.at]
    assert after, "no watch after the dropped one"
    # the first event (p0's update) was applied, the half-sent one was not:
    # the next watch starts right after p0's update
    assert after[0].query["resourceVersion"] == a["metadata"]["resourceVersion"], after
    assert len(worker_requests(fake, "list")) == lists, "a dropped watch must not relist"
    assert b["metadata"]["resourceVersion"] == watch_status(srv, "pods")["resource_version"]


def test_drop_watch_before_headers_backs_off_and_rewatches(ctx, fake):
    srv, table = watched_pods(ctx, fake)
    lists = len(worker_requests(fake, "list"))
    f = fake.inject("drop", on="watch", after_events=0, mid_event=False, times=2)
    cut_watch(fake)
    fake.create("pods", pod("late"))
    wait_converged(table, srv, fake, "pods")
    assert len(f.hits) == 2
    assert len(worker_requests(fake, "list")) == lists
    assert watch_status(srv, "pods")["http_errors"] >= 1


def test_stalled_watch_is_resumed_after_inactivity_timeout(ctx, fake, settings):
    """A WATCH still open and silent kwatch.inactivity_timeout past the
    timeoutSeconds it asked for (2-4 s here) is given up: an HTTP error."""
    settings(watch_timeout="2s", inactivity_timeout="2s")
    srv, table = watched_pods(ctx, fake)
    f = fake.inject("stall", on="watch", after_events=0)
    cut_watch(fake)
    new = fake.create("pods", pod("during-stall"))
    wait_converged(table, srv, fake, "pods")
    assert f.hits, "the stall fault was never used"
    st = wait_status(srv, "pods", lambda s: s["state"] == "watching")
    assert "2 s past the timeoutSeconds" in (st["last_error"] or ""), st
    assert st["http_errors"] >= 1, st
    after = [r for r in worker_requests(fake, "watch") if r.at > f.hits[0].at]
    # resumed from where it stood, not relisted
    assert after and after[0].query["resourceVersion"] == f.hits[0].query["resourceVersion"]
    assert new["metadata"]["uid"] in {r[0] for r in sql(
        "SELECT uid FROM %s WHERE cluster = %%s" % table, (srv,))}


def test_stalled_list_is_started_over(ctx, fake, settings):
    settings(inactivity_timeout="2s")
    srv = fake_server(ctx, fake)
    for i in range(5):
        fake.create("pods", pod("p%d" % i))
    f = fake.inject("stall", on="first_page", resource="pods", when=not_probe)
    table = watch("pods", srv)
    wait_converged(table, srv, fake, "pods")
    assert len(f.hits) == 1
    st = wait_status(srv, "pods", lambda s: s["state"] == "watching")
    assert "LIST received nothing for 2 s" in (st["last_error"] or ""), st
    assert st["list_calls"] == 2 and st["objects"] == 5, st


def test_event_split_across_many_chunks(ctx, fake):
    srv, table = watched_pods(ctx, fake)
    f = fake.inject("split", on="watch", chunk_bytes=7)
    cut_watch(fake)
    for i in range(3):
        fake.create("pods", pod("split-%d" % i, annotations={"big": "x" * 5000}))
    fake.update("pods", "default", "p0", lambda o: o["metadata"]["labels"].update(v="s"))
    fake.delete("pods", "default", "p1")
    wait_converged(table, srv, fake, "pods")
    assert f.hits and f.hits[0].events == 5, f.hits
    assert watch_status(srv, "pods")["decode_errors"] == 0


def test_many_events_packed_into_one_chunk(ctx, fake):
    srv, table = watched_pods(ctx, fake)
    f = fake.inject("pack", on="watch", events=6)
    cut_watch(fake)
    for i in range(4):
        fake.create("pods", pod("packed-%d" % i))
    fake.update("pods", "default", "packed-0", lambda o: o["metadata"]["labels"].update(v="p"))
    fake.delete("pods", "default", "p2")
    wait_converged(table, srv, fake, "pods")
    assert f.hits and f.hits[0].events == 6, f.hits
    assert watch_status(srv, "pods")["decode_errors"] == 0


def test_one_batch_deletes_and_recreates_a_name(ctx, fake):
    """One chunk, one batch: p1 deleted and created again under a new uid,
    p0 modified twice.  The batch is applied a segment per statement
    (src/apply/sync_events.c): deletes before upserts, so an owner's unique index on the
    name never sees two rows of it; both MODIFIEDs are notified, in order,
    each with the resourceVersion it replaced.  Then the same for a relist
    (after a 410): its sweep runs before its merge."""
    srv, table = watched_pods(ctx, fake)
    index = ("uniq_" + ctx.base)[:63].replace("-", "_")
    sql("CREATE UNIQUE INDEX %s ON %s (cluster, namespace, name)" % (index, table))
    try:
        lst = ctx.listener("kwatch_pods", table)
        f = fake.inject("pack", on="watch", events=4)
        cut_watch(fake)
        rv0 = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in fake.objects("pods")}
        fake.delete("pods", "default", "p1")
        new = fake.create("pods", pod("p1"))
        m1 = fake.update("pods", "default", "p0", lambda o: o["metadata"]["labels"].update(v="1"))
        m2 = fake.update("pods", "default", "p0", lambda o: o["metadata"]["labels"].update(v="2"))
        wait_converged(table, srv, fake, "pods")
        assert f.hits and f.hits[0].events == 4, f.hits
        st = watch_status(srv, "pods")
        assert st["relists"] == 0 and st["database_errors"] == 0, st
        wait_until(lambda: len(lst.payloads(cluster=srv)) >= 4, 20, "4 notifications")
        got = [(p["type"], p["name"], p["resource_version"], p.get("previous_resource_version"))
               for p in lst.payloads(cluster=srv)]
        assert got == [("DELETED", "p1", got[0][2], None),
                       ("ADDED", "p1", new["metadata"]["resourceVersion"], None),
                       ("MODIFIED", "p0", m1["metadata"]["resourceVersion"], rv0["p0"]),
                       ("MODIFIED", "p0", m2["metadata"]["resourceVersion"],
                        m1["metadata"]["resourceVersion"])], got

        # a relist finds p2 created again under a new uid
        old_p2 = [o for o in fake.objects("pods") if o["metadata"]["name"] == "p2"][0]
        fake.inject("too_old", on="watch")
        fake.set_down(True)     # the change lands in the gap the 410 closes
        fake.delete("pods", "default", "p2")
        new_p2 = fake.create("pods", pod("p2"))
        fake.set_down(False)
        wait_converged(table, srv, fake, "pods")
        st = wait_status(srv, "pods", lambda s: s["relists"] == 1 and s["state"] == "watching")
        assert st["database_errors"] == 0, st
        p = lst.wait_for(type="ADDED", cluster=srv, uid=new_p2["metadata"]["uid"])
        d = lst.wait_for(type="DELETED", cluster=srv, uid=old_p2["metadata"]["uid"])
        assert p["preexisting"] and d["final_state_unknown"], (p, d)
    finally:
        sql("DROP INDEX IF EXISTS k8s.%s" % index)


def malformed_case(ctx, fake, data, what):
    """The stream carries one good event, then `data`: the good event is
    applied, the stream abandoned (a decode error), and the watch resumes from
    the good event's resourceVersion."""
    srv, table = watched_pods(ctx, fake)
    before = watch_status(srv, "pods")
    f = fake.inject("raw", on="watch", after_events=1, data=data)
    cut_watch(fake)
    good = fake.update("pods", "default", "p0", lambda o: o["metadata"]["labels"].update(v="g"))
    wait_status(srv, "pods", lambda s: s["decode_errors"] > before["decode_errors"],
                msg="a decode error")
    later = fake.create("pods", pod("after-" + what))
    wait_converged(table, srv, fake, "pods")
    assert f.hits and f.hits[0].events == 1
    after = [r for r in worker_requests(fake) if r.at > f.hits[0].at]
    assert after, "nothing requested after the malformed stream"
    # watched again from the last good event, after a backoff, without relisting
    assert after[0].kind == "watch", after
    assert after[0].query.get("resourceVersion") == good["metadata"]["resourceVersion"], after
    assert not [r for r in after if r.kind == "list"], after
    st = watch_status(srv, "pods")
    assert st["state"] == "watching" and st["relists"] == 0 and st["decode_errors"] == 1, st
    assert st["resource_version"] == later["metadata"]["resourceVersion"]
    return st, after


def test_persistently_malformed_watch_relists(ctx, fake):
    """The same malformed stream on every watch: after 3 attempts from the
    last good RV, a relist (PROTOCOL 13)."""
    srv, table = watched_pods(ctx, fake)
    f = fake.inject("raw", on="watch", times=3, data=b'{"type":"ADDED","object":{"metadata":{"name":"x"}}\n')
    cut_watch(fake)
    fake.create("pods", pod("after"))
    wait_converged(table, srv, fake, "pods")
    st = wait_status(srv, "pods", lambda s: s["relists"] == 1 and s["state"] == "watching")
    assert st["decode_errors"] == 3 and len(f.hits) == 3, st
    rvs = {r.query.get("resourceVersion") for r in f.hits}
    assert len(rvs) == 1, f.hits      # each retry from the same, last good RV
    lst = [r for r in worker_requests(fake, "list") if r.at > f.hits[-1].at]
    assert lst and lst[0].query.get("resourceVersion") == rvs.pop() and \
        lst[0].query.get("resourceVersionMatch") == "NotOlderThan", lst


def test_malformed_json_in_watch_stream(ctx, fake):
    st, _ = malformed_case(ctx, fake, b'{"type":"MODIFIED","object":{"metadata":{"name":}}}\n', "json")
    assert "malformed JSON" in st["last_error"] or "watch stream" in st["last_error"], st


def test_malformed_event_envelope_in_watch_stream(ctx, fake):
    """The event's own members break JSON's grammar (a missing comma), its
    object being valid: malformed all the same (PROTOCOL 13)."""
    st, _ = malformed_case(ctx, fake, b'{"type":"MODIFIED" "object":{"metadata":{"name":"x"}}}\n', "envelope")
    assert "malformed JSON in watch stream" in st["last_error"], st


def test_watch_event_over_64mb_ends_the_stream_at_the_limit(ctx, fake):
    """An event whose object grows past the decoder's limit (64 MB,
    src/decode/decode.c) inside one string: the stream is malformed as soon
    as the limit is passed, not at the event's end (PROTOCOL 13)."""
    data = b'{"type":"ADDED","object":{"metadata":{"name":"big"},"note":"' + b"x" * (65 << 20) + b'"}}\n'
    st, _ = malformed_case(ctx, fake, data, "big")
    assert "watch event larger than 64 MB" in st["last_error"], st


def test_event_members_in_any_order_are_read(ctx, fake):
    """A watch event's members may come in any order, with one a client
    does not know (JSON objects are unordered; PROTOCOL 12): every event,
    bookmarks included, written as {"object":..,"extra":..,"type":..}."""
    fake.event_object_first = True
    fake.bookmark_interval = 0.2
    srv, table = watched_pods(ctx, fake)
    fake.update("pods", "default", "p0", lambda o: o["metadata"]["labels"].update(v="reordered"))
    fake.create("pods", pod("later"))
    fake.delete("pods", "default", "p1")
    wait_converged(table, srv, fake, "pods")
    st = wait_status(srv, "pods", lambda s: s["bookmarks"] > 0, msg="a bookmark read")
    assert st["decode_errors"] == 0 and st["relists"] == 0 and st["state"] == "watching", st


def test_unknown_event_type_in_watch_stream(ctx, fake):
    st, _ = malformed_case(ctx, fake, b'{"type":"FROBNICATED","object":{"metadata":{}}}\n', "type")
    assert "unknown watch event type" in st["last_error"], st


def test_html_page_in_watch_stream(ctx, fake):
    st, _ = malformed_case(ctx, fake, b"<html><body><h1>502 Bad Gateway</h1></body></html>\n", "html")


def test_event_without_object_in_watch_stream(ctx, fake):
    malformed_case(ctx, fake, b'{"type":"ADDED"}\n', "noobj")


def test_very_short_watches_back_off(ctx, fake):
    srv, table = watched_pods(ctx, fake)
    f = fake.inject("short_watch", on="watch", times=None)
    cut_watch(fake)
    st = wait_status(srv, "pods", lambda s: "without events" in (s["last_error"] or ""),
                     msg="short watches reported")
    assert len(f.hits) >= 3
    # backing off: the watches after the third short one are spaced by the backoff
    hits = [r.at for r in f.hits]
    gaps = [b - a for a, b in zip(hits[2:], hits[3:])]
    assert not gaps or max(gaps) >= 0.15, gaps   # kwatch.backoff_initial is 200ms in tests
    recovers(fake, srv, table, "after-short")


def test_watch_timeout_rewatches_from_last_rv(ctx, fake, settings):
    settings(watch_timeout="1s")
    srv, table = watched_pods(ctx, fake)
    lists = len(worker_requests(fake, "list"))
    fake.wait_for_request(lambda r: r.kind == "watch" and r.resource == "pods"
                          and r.status == 200 and len(worker_requests(fake, "watch")) >= 3,
                          timeout=30)
    fake.create("pods", pod("after-timeouts"))
    wait_converged(table, srv, fake, "pods")
    assert len(worker_requests(fake, "list")) == lists


def test_no_bookmarks_then_compaction_relists(ctx, fake, settings):
    """A server that never sends bookmarks: a quiet watch's RV falls behind
    while other resources change; after a compaction the next watch gets 410
    and the watch relists (PROTOCOL 15, 16)."""
    settings(watch_timeout="1s")
    fake.bookmark_interval = None
    srv, table = watched_pods(ctx, fake)
    quiet_rv = watch_status(srv, "pods")["resource_version"]
    for i in range(3):
        fake.create("namespaces", {"metadata": {"name": "ns-%d" % i}})   # other resource
    fake.compact()
    st = wait_status(srv, "pods", lambda s: s["relists"] == 1 and s["state"] == "watching",
                     msg="a relist after the 410")
    assert st["bookmarks"] == 0, st
    assert any(r.query.get("resourceVersion") == quiet_rv for r in worker_requests(fake, "watch"))
    fake.delete("pods", "default", "p1")
    wait_converged(table, srv, fake, "pods")


def test_bookmarks_move_the_resume_point(ctx, fake, settings):
    """With bookmarks the quiet watch's RV follows the store: a compaction
    then costs no relist."""
    settings(watch_timeout="1s")
    fake.bookmark_interval = 0.3
    srv, table = watched_pods(ctx, fake)
    fake.create("namespaces", {"metadata": {"name": "bm-other"}})   # RV moves, no pod event
    rv = fake.resource_version
    st = wait_status(srv, "pods", lambda s: s["resource_version"] == rv and s["bookmarks"] > 0,
                     msg="a bookmark to move the resume point")
    assert st["added"] == 3
    # the checkpoint moved with it
    assert sql("SELECT resource_version FROM kwatch.registrations WHERE server = %s", (srv,))[0][0] == rv
    fake.compact()
    n = len(worker_requests(fake, "watch"))
    fake.wait_for_request(lambda r: r.kind == "watch" and len(worker_requests(fake, "watch")) > n + 1)
    fake.create("pods", pod("after-compaction"))
    wait_converged(table, srv, fake, "pods")
    assert watch_status(srv, "pods")["relists"] == 0


def test_watch_too_old_error_event_relists(ctx, fake):
    srv, table = watched_pods(ctx, fake)
    f = fake.inject("too_old", on="watch")
    cut_watch(fake)
    fake.create("pods", pod("after-410"))
    wait_converged(table, srv, fake, "pods")
    assert f.hits
    lists = [r for r in worker_requests(fake, "list") if r.at > f.hits[0].at]
    assert lists and lists[0].query.get("resourceVersionMatch") == "NotOlderThan"


def test_watch_too_old_http_410_relists(ctx, fake):
    srv, table = watched_pods(ctx, fake)
    f = fake.inject("too_old", on="watch", http=True)
    cut_watch(fake)
    fake.create("pods", pod("after-410"))
    wait_converged(table, srv, fake, "pods")
    assert f.hits and f.hits[0].status == 410


def test_fake_over_tls_with_a_dropped_watch(ctx):
    """The fake over https (its own throw-away CA): kwatch verifies it."""
    from psycopg2 import sql as pgsql
    from faults_support import FakeAPI
    api = FakeAPI(tls=True).start()
    try:
        srv = ctx.base
        sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch OPTIONS "
                      "(api_server {}, certificate_authority {})").format(
            pgsql.Identifier(srv), pgsql.Literal(api.url), pgsql.Literal(api.ca_file)))
        ctx.servers.append(srv)
        api.create("pods", pod("tls-0"))
        table = watch("pods", srv)
        wait_converged(table, srv, api, "pods")
        f = api.inject("drop", on="watch", after_events=1)
        cut_watch(api)
        api.create("pods", pod("tls-1"))
        api.create("pods", pod("tls-2"))
        wait_converged(table, srv, api, "pods")
        assert f.hits and api.url.startswith("https://")
    finally:
        api.stop()
