"""Streaming lists (KEP-3157, doc/protocol.md "Streaming lists") against the
fault server (test/fakeapi), for what a real server will not do on demand: a
stream cut before its initial-events-end bookmark, a 410 in the middle of
it, a server that ignores sendInitialEvents, and one that refuses it as
Kubernetes 1.20 does (the fake's default).  The real servers' side
(1.36 streams, 1.20 falls back) is in test_modern_server.py.

Every test ends with the mirror equal to the fake's store, object by
object, and checks the requests kwatch sent."""
import pytest

from conftest import sql, sql_one, wait_until, settings  # noqa: F401
from faults_support import (FakeAPI, fake, fake_server, pod, wait_converged, wait_status,  # noqa: F401
                            watch, watch_status, worker_requests)


@pytest.fixture
def streaming(fake):
    """A fake API server that serves streaming lists (1.27+)."""
    fake.watch_list = "serve"
    return fake


def watched(ctx, api, n=5, resource="pods"):
    srv = fake_server(ctx, api)
    for i in range(n):
        api.create(resource, pod("p%d" % i))
    table = watch(resource, srv)
    wait_status(srv, resource, lambda s: s["state"] == "watching" and s["synced"], msg="watching, synced")
    wait_converged(table, srv, api, resource)
    return srv, table


def events_of(srv, since=0):
    return sql("SELECT type, name, preexisting FROM kwatch.events WHERE cluster = %s AND seq > %s "
               "ORDER BY seq", (srv, since))


def test_initial_sync_is_one_stream_that_goes_on_as_the_watch(ctx, streaming):
    srv, table = watched(ctx, streaming)
    reqs = worker_requests(streaming)
    assert [r.kind for r in reqs] == ["watchlist"], reqs
    q = reqs[0].query
    assert (q["sendInitialEvents"], q["resourceVersionMatch"], q["allowWatchBookmarks"]) == \
        ("true", "NotOlderThan", "true"), q
    assert "resourceVersion" not in q, "the first list is a consistent one"
    st = watch_status(srv, "pods")
    assert (st["list_calls"], st["watch_calls"], st["syncs"], st["objects"]) == (1, 0, 1, 5), st
    assert st["resource_version"] == streaming.resource_version
    assert st["last_error"] is None, st
    # the initial list's rows are preexisting, as a LIST's
    assert [e[2] for e in events_of(srv)] == [True] * 5
    seq = sql_one("SELECT max(seq) FROM kwatch.events")
    # later changes come on the same stream: no new request
    streaming.create("pods", pod("late"))
    streaming.delete("pods", "default", "p0")
    wait_converged(table, srv, streaming, "pods")
    assert len(worker_requests(streaming)) == 1, worker_requests(streaming)
    assert [(t, n, p) for t, n, p in events_of(srv, seq)] == \
        [("ADDED", "late", False), ("DELETED", "p0", False)]


def test_relist_streams_and_rewrites_nothing_unchanged(ctx, streaming):
    srv, table = watched(ctx, streaming)
    before = watch_status(srv, "pods")
    seq = sql_one("SELECT max(seq) FROM kwatch.events")
    streaming.update("pods", "default", "p1", lambda o: o["metadata"]["labels"].update(v="2"))
    wait_converged(table, srv, streaming, "pods")
    sql("SELECT kwatch.relist(%s, %s, wait => true)", ("pods", srv))
    wait_converged(table, srv, streaming, "pods")
    reqs = worker_requests(streaming)
    assert [r.kind for r in reqs] == ["watchlist", "watchlist"], reqs
    assert "resourceVersion" not in reqs[1].query, "kwatch.relist() asks for the newest state"
    st = watch_status(srv, "pods")
    assert st["syncs"] == before["syncs"] + 1 and st["relists"] == before["relists"] + 1, st
    # one event for the one change; the relist found nothing to write
    assert [(t, n) for t, n, _ in events_of(srv, seq)] == [("MODIFIED", "p1")]
    assert st["modified"] == before["modified"] + 1, st


def test_watch_410_relists_by_stream_from_the_last_resource_version(ctx, streaming):
    srv, table = watched(ctx, streaming)
    rv = watch_status(srv, "pods")["resource_version"]
    streaming.set_down(True)          # ends the stream; the next request is a WATCH
    streaming.set_down(False)
    wait_until(lambda: any(r.kind == "watch" for r in worker_requests(streaming)), timeout=30,
               msg="a WATCH after the stream ended")
    streaming.inject("too_old", on="watch")
    streaming.set_down(True)
    streaming.set_down(False)
    streaming.create("pods", pod("after-410"))
    wait_converged(table, srv, streaming, "pods")
    lists = [r for r in worker_requests(streaming) if r.kind == "watchlist"]
    assert len(lists) == 2, worker_requests(streaming)
    assert int(lists[1].query["resourceVersion"]) >= int(rv), lists[1].query


def test_stream_cut_before_initial_events_end_starts_over(ctx, streaming):
    srv = fake_server(ctx, streaming)
    for i in range(6):
        streaming.create("pods", pod("p%d" % i))
    f = streaming.inject("drop", on="watchlist", after_events=3, mid_event=True)
    table = watch("pods", srv)
    wait_converged(table, srv, streaming, "pods")
    st = wait_status(srv, "pods", lambda s: s["state"] == "watching" and s["synced"])
    assert len(f.hits) == 1 and f.hits[0].events == 3
    lists = [r for r in worker_requests(streaming) if r.kind == "watchlist"]
    assert len(lists) == 2 and not any(r.kind == "list" for r in worker_requests(streaming)), \
        "a cut stream is streamed again, not listed"
    assert "streaming list request failed" in (st["last_error"] or ""), st
    assert st["objects"] == 6 and st["syncs"] == 1, st
    # each object announced once
    names = [n for t, n, _ in events_of(srv)]
    assert sorted(names) == ["p%d" % i for i in range(6)], names


def test_410_inside_the_stream_streams_again_without_resource_version(ctx, streaming):
    srv, table = watched(ctx, streaming, n=4)
    f = streaming.inject("too_old", on="watchlist", after_events=2)
    sql("SELECT kwatch.relist(%s, %s)", ("pods", srv))
    streaming.create("pods", pod("new"))
    wait_converged(table, srv, streaming, "pods")
    wait_until(lambda: watch_status(srv, "pods")["syncs"] == 2, timeout=30, msg="the relist merged")
    assert len(f.hits) == 1
    lists = [r for r in worker_requests(streaming) if r.kind == "watchlist"]
    assert len(lists) == 3, lists
    assert "resourceVersion" not in lists[2].query, "after a 410, a consistent stream"
    assert "410" in (watch_status(srv, "pods")["last_error"] or "")


def test_server_ignoring_send_initial_events_gets_list_and_is_remembered(ctx, fake):
    fake.watch_list = "ignore"
    srv, table = watched(ctx, fake)
    kinds = [r.kind for r in worker_requests(fake)]
    # the stream was plain ADDED events with no initial-events-end; a LIST follows
    assert kinds[0] == "watchlist" and "list" in kinds, kinds
    st = watch_status(srv, "pods")
    assert st["last_error"] is None and st["list_calls"] == 1 and st["syncs"] == 1, st
    sql("SELECT kwatch.relist(%s, %s, wait => true)", ("pods", srv))
    wait_converged(table, srv, fake, "pods")
    assert [r.kind for r in worker_requests(fake)].count("watchlist") == 1, \
        "the server's answer is remembered"


def test_server_refusing_streams_is_probed_once_per_server(ctx, fake):
    """The fake's default answers as 1.20: 422 Invalid.  One refused probe
    for the API server, then LIST for every watch on it; no error shown."""
    srv, table = watched(ctx, fake)
    fake.create("configmaps", {"metadata": {"name": "c1", "namespace": "default"}, "data": {"a": "b"}})
    t2 = watch("configmaps", srv)
    wait_status(srv, "configmaps", lambda s: s["state"] == "watching" and s["synced"])
    wait_converged(t2, srv, fake, "configmaps")
    probes = [r for r in fake.requests if r.kind == "watchlist"]
    assert len(probes) == 1 and probes[0].status == 422, probes
    for res in ("pods", "configmaps"):
        st = watch_status(srv, res)
        assert st["last_error"] is None and st["list_calls"] == 1, st
    assert len(worker_requests(fake, "list", "configmaps")) == 1


def test_strategy_setting_forces_either(ctx, streaming, settings):
    settings(list_strategy="list")
    srv, table = watched(ctx, streaming)
    assert [r.kind for r in worker_requests(streaming)][:1] == ["list"]
    assert not any(r.kind == "watchlist" for r in streaming.requests)
    settings(list_strategy="stream")
    old = FakeAPI().start()           # refuses streaming lists, as 1.20
    try:
        srv2 = fake_server(ctx, old, "_b")
        old.create("pods", pod("x"))
        watch("pods", srv2)
        st = wait_status(srv2, "pods", lambda s: "streaming list returned HTTP 422" in (s["last_error"] or ""),
                         msg="the refusal shown")
        assert not st["synced"] and not worker_requests(old, "list"), "stream forced: no LIST"
        sql("SELECT kwatch.unwatch(%s, %s)", ("pods", srv2))
    finally:
        old.stop()


def _wire(api, type_, obj):
    """One watch event line as the fake writes it (kind and apiVersion first)."""
    import json
    api_version, kind = api.type_meta("pods")
    o = dict(kind=kind, apiVersion=api_version, **{k: v for k, v in obj.items()
                                                   if k not in ("kind", "apiVersion")})
    return (json.dumps({"type": type_, "object": o}, separators=(",", ":")) + "\n").encode()


def test_error_after_initial_events_end_never_applies_events_without_their_list(ctx, streaming):
    """Review (doc/protocol.md rule 19, 21): a streaming list's items, its
    initial-events-end bookmark, one event after it and then an ERROR 410,
    all in one chunk.  The list is complete at the bookmark; the event
    belongs after its merge.  Neither may the event be committed (with its
    checkpoint) on a table that lacks the list: after a worker restart the
    watch resumes from that checkpoint and nothing ever brings the missing
    objects back."""
    srv = fake_server(ctx, streaming)
    for i in range(3):
        streaming.create("pods", pod("p%d" % i))
    at_list = streaming.objects("pods")           # the state the list shows
    list_rv = streaming.resource_version
    streaming.update("pods", "default", "p0", lambda o: o["metadata"]["labels"].update(v="2"))
    p0 = [o for o in streaming.objects("pods") if o["metadata"]["name"] == "p0"][0]
    data = b"".join([_wire(streaming, "ADDED", o) for o in at_list] + [
        _wire(streaming, "BOOKMARK", {"metadata": {
            "resourceVersion": list_rv, "annotations": {"k8s.io/initial-events-end": "true"}}}),
        _wire(streaming, "MODIFIED", p0),
        (b'{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure",'
         b'"message":"too old resource version: 1 (2)","reason":"Expired","code":410}}\n')])
    streaming.inject("raw", on="watchlist", data=data, after_events=0, close=True)
    # the streams after it fail: what the first one left committed stays visible
    later = streaming.inject("status", on="watchlist", code=503, times=None)
    table = watch("pods", srv)
    wait_until(lambda: len(later.hits) >= 1, timeout=30, msg="the stream after the ERROR")
    rows = sql("SELECT name FROM %s WHERE cluster = %%s ORDER BY name" % table, (srv,))
    ck = sql_one("SELECT resource_version FROM kwatch.registrations WHERE server = %s"
                 " AND resource = 'pods'", (srv,))
    seen = "checkpoint %r with rows %r" % (ck, [r[0] for r in rows])
    # a restart resumes from the checkpoint: the table must still come to the server's state
    worker = sql_one("SELECT kwatch.worker_pid()")
    streaming.clear_faults()
    sql("SELECT pg_terminate_backend(%s)", (worker,))
    wait_until(lambda: sql_one("SELECT kwatch.worker_pid()") not in (None, worker), 30, "a new worker")
    try:
        wait_converged(table, srv, streaming, "pods", timeout=30)
    except AssertionError as e:
        raise AssertionError("after the ERROR: %s; %s" % (seen, e))
    assert ck is None or len(rows) == 3, "a checkpoint committed on a table without its list: " + seen


def test_change_between_initial_events_and_their_bookmark_is_part_of_the_list(ctx, streaming):
    """Review (doc/protocol.md rule 19): a serving API server sends the
    initial-events-end bookmark at its next bookmark tick (about a second,
    apiserver cacher dispatchEvents), so on a busy collection a MODIFIED or
    DELETED can come between the last initial ADDED and the bookmark;
    client-go's reflector applies them to its temporary store (watchList,
    handleListWatch) and does not fall back.  kwatch must neither take the
    server for one that ignores sendInitialEvents (and LIST from it for the
    worker's life) nor lose the change."""
    srv = fake_server(ctx, streaming)
    for i in range(3):
        streaming.create("pods", pod("p%d" % i))
    at_list = streaming.objects("pods")
    streaming.update("pods", "default", "p0", lambda o: o["metadata"]["labels"].update(v="2"))
    p0 = [o for o in streaming.objects("pods") if o["metadata"]["name"] == "p0"][0]
    data = b"".join([_wire(streaming, "ADDED", o) for o in at_list] + [
        _wire(streaming, "MODIFIED", p0),
        _wire(streaming, "BOOKMARK", {"metadata": {
            "resourceVersion": streaming.resource_version,
            "annotations": {"k8s.io/initial-events-end": "true"}}})])
    streaming.inject("raw", on="watchlist", data=data, after_events=0, close=True)
    table = watch("pods", srv)
    wait_converged(table, srv, streaming, "pods")
    wait_status(srv, "pods", lambda s: s["state"] == "watching" and s["synced"], msg="watching, synced")
    kinds = [r.kind for r in worker_requests(streaming)]
    assert "list" not in kinds, "a serving server was taken for one that ignores streaming lists: %s" % kinds
    sql("SELECT kwatch.relist(%s, %s, wait => true)", ("pods", srv))
    kinds = [r.kind for r in worker_requests(streaming)]
    assert kinds.count("watchlist") == 2 and "list" not in kinds, kinds


def test_changes_before_the_bookmark_are_merged_with_the_list_in_one_transaction(ctx, streaming):
    """A MODIFIED and a DELETED between the initial ADDED events and the
    bookmark: the merge and those changes commit together (one checkpoint,
    the bookmark's), each change notified once, the deleted object never
    left behind, the object count right."""
    srv = fake_server(ctx, streaming)
    for i in range(4):
        streaming.create("pods", pod("p%d" % i))
    at_list = streaming.objects("pods")
    p0 = streaming.update("pods", "default", "p0", lambda o: o["metadata"]["labels"].update(v="2"))
    gone = [o for o in streaming.objects("pods") if o["metadata"]["name"] == "p3"][0]
    streaming.delete("pods", "default", "p3")
    gone = dict(gone, metadata=dict(gone["metadata"], resourceVersion=streaming.resource_version))
    data = b"".join([_wire(streaming, "ADDED", o) for o in at_list] + [
        _wire(streaming, "MODIFIED", p0), _wire(streaming, "DELETED", gone),
        _wire(streaming, "BOOKMARK", {"metadata": {
            "resourceVersion": streaming.resource_version,
            "annotations": {"k8s.io/initial-events-end": "true"}}})])
    streaming.inject("raw", on="watchlist", data=data, after_events=0, close=False)
    table = watch("pods", srv)
    st = wait_status(srv, "pods", lambda s: s["synced"] and s["syncs"] == 1, msg="synced")
    wait_converged(table, srv, streaming, "pods")
    assert st["resource_version"] == streaming.resource_version, st
    assert st["objects"] == 3 and st["last_error"] is None, st
    evs = [(t, n) for t, n, _ in events_of(srv)]
    assert sorted(evs[:4]) == [("ADDED", "p%d" % i) for i in range(4)], evs
    assert evs[4:] == [("MODIFIED", "p0"), ("DELETED", "p3")], evs
    assert "list" not in [r.kind for r in worker_requests(streaming)]
