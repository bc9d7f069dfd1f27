"""Fault suite, server behaviour (issue 3): 429 with Retry-After, 5xx storms,
HTML error pages, truncated and malformed LIST bodies, expired continue
tokens (with and without an inconsistent token), an etcd restore that sets
the resourceVersion back ("Too large resource version"), an object
re-created under the same name during an outage, objects moving out of and
into a label selector.  Each ends with the mirror equal to the fake's store."""
from conftest import sql, watch, watch_status, settings  # noqa: F401
from faults_support import (cut_watch, watched_pods, watch_fault_survived,
                            fake, fake_server, gaps_after, pod, wait_converged,  # noqa: F401
                            wait_status, worker_requests, not_probe)


def test_429_on_watch_waits_for_retry_after(ctx, fake):
    srv, table = watched_pods(ctx, fake)
    lists = len(worker_requests(fake, "list"))
    f = fake.inject("status", on="watch", code=429, retry_after=2, times=2)
    cut_watch(fake)
    fake.create("pods", pod("after-429"))
    wait_converged(table, srv, fake, "pods", timeout=40)
    assert len(f.hits) == 2
    # kwatch.backoff_initial is 200ms in tests: only Retry-After explains 2 s
    gaps = gaps_after(f.hits, worker_requests(fake))
    assert len(gaps) == 2 and min(gaps) >= 1.9, gaps
    # the same watch again (PROTOCOL 25): no relist, from the same RV
    assert len(worker_requests(fake, "list")) == lists
    assert {h.query["resourceVersion"] for h in f.hits} == {f.hits[0].query["resourceVersion"]}
    st = watch_status(srv, "pods")
    assert st["relists"] == 0 and st["http_errors"] >= 2
    assert "429" in st["last_error"] or "Too many requests" in st["last_error"], st


def test_429_on_list_waits_for_retry_after(ctx, fake):
    srv = fake_server(ctx, fake)
    for i in range(4):
        fake.create("pods", pod("p%d" % i))
    f = fake.inject("status", on="list", code=429, retry_after=2, times=1, when=not_probe)
    table = watch("pods", srv)
    wait_converged(table, srv, fake, "pods", timeout=40)
    gaps = gaps_after(f.hits, worker_requests(fake))
    assert len(f.hits) == 1 and gaps and gaps[0] >= 1.9, gaps


def test_5xx_storm_backs_off_exponentially_then_converges(ctx, fake):
    srv, table, f = watch_fault_survived(ctx, fake, "status", "after-storm", timeout=60,
                                         code=503, times=5)
    assert len(f.hits) == 5
    gaps = gaps_after(f.hits, worker_requests(fake))
    # each delay is in [b, 1.5b) and b doubles: never shorter than the one before
    assert all(b >= a * 0.95 for a, b in zip(gaps, gaps[1:])), gaps
    assert gaps[-1] >= 2 * gaps[0], gaps
    st = wait_status(srv, "pods", lambda s: s["state"] == "watching")
    assert st["http_errors"] >= 5 and st["relists"] == 0, st


def test_5xx_storm_on_list_pages(ctx, fake, settings):
    settings(list_from_watch_cache="off", list_page_size=2)
    srv = fake_server(ctx, fake)
    for i in range(7):
        fake.create("pods", pod("p%d" % i))
    f = fake.inject("status", on="continue", code=500, times=3)
    g = fake.inject("status", on="first_page", code=502, times=2, when=not_probe)
    table = watch("pods", srv)
    wait_converged(table, srv, fake, "pods", timeout=60)
    assert len(f.hits) == 3 and len(g.hits) == 2
    st = wait_status(srv, "pods", lambda s: s["state"] == "watching")
    assert st["objects"] == 7, st


def test_html_error_page_from_a_proxy(ctx, fake):
    srv, table, f = watch_fault_survived(ctx, fake, "html", "after-html", code=502, times=2)
    assert len(f.hits) == 2
    st = watch_status(srv, "pods")
    assert "502" in st["last_error"], st


def first_list_page_is(ctx, fake, names, data):
    """Pods `names` on the fake and a watch on them whose first LIST page
    (the registration probe aside) has the body `data`, converged after
    that one bad page; returns the server."""
    srv = fake_server(ctx, fake)
    for name in names:
        fake.create("pods", pod(name))
    f = fake.inject("raw", on="first_page", when=not_probe, data=data)
    table = watch("pods", srv)
    wait_converged(table, srv, fake, "pods", timeout=40)
    assert len(f.hits) == 1
    return srv


def test_html_page_as_list_body(ctx, fake):
    srv = first_list_page_is(ctx, fake, ["p0"], b"<html><body>Service Unavailable</body></html>")
    assert watch_status(srv, "pods")["decode_errors"] == 1


def test_truncated_list_body(ctx, fake, settings):
    settings(list_from_watch_cache="off", list_page_size=2)
    srv = fake_server(ctx, fake)
    for i in range(5):
        fake.create("pods", pod("p%d" % i, annotations={"pad": "y" * 2000}))
    f = fake.inject("drop", on="continue", times=1)
    table = watch("pods", srv)
    wait_converged(table, srv, fake, "pods", timeout=40)
    assert len(f.hits) == 1
    st = wait_status(srv, "pods", lambda s: s["state"] == "watching")
    assert st["objects"] == 5 and st["http_errors"] + st["decode_errors"] >= 1, st


def test_list_body_cut_at_a_clean_end(ctx, fake):
    """A LIST body that ends (Content-Length honoured) in the middle of the JSON."""
    srv = first_list_page_is(ctx, fake, ["p0", "p1"], b'{"kind":"PodList","apiVersion":"v1",'
                             b'"metadata":{"resourceVersion":"5"},"items":[{"metadata":{"name":"p0"')
    st = watch_status(srv, "pods")
    assert st["decode_errors"] == 1 and "truncated" in (st["last_error"] or ""), st


def expired_continue_case(ctx, fake, settings, inconsistent):
    settings(list_from_watch_cache="off", list_page_size=2)
    srv = fake_server(ctx, fake)
    for i in range(7):
        fake.create("pods", pod("p%d" % i))
    def churn(req):
        # between the first page and the expired token, the collection changes
        if req.kind == "list" and "continue" in req.query and not getattr(churn, "done", False):
            churn.done = True
            fake.delete("pods", "default", "p5")
            fake.create("pods", pod("p9-new"))
            fake.update("pods", "default", "p6", lambda o: o["metadata"]["labels"].update(v="x"))
        return False
    fake.inject("status", on="continue", code=500, when=churn)   # never fires; a hook
    f = fake.inject("expire_continue", on="continue", inconsistent=inconsistent)
    table = watch("pods", srv)
    wait_converged(table, srv, fake, "pods", timeout=40)
    assert len(f.hits) == 1 and churn.done
    assert fake.inconsistent_continue_used == [], "kwatch used an inconsistent continue token"
    later = [r for r in worker_requests(fake, "list") if r.at > f.hits[0].at]
    # the list started over: a first page, consistent read (PROTOCOL 7)
    assert later and "continue" not in later[0].query and "resourceVersion" not in later[0].query, later
    st = wait_status(srv, "pods", lambda s: s["state"] == "watching")
    assert st["objects"] == 7 and "410" in st["last_error"], st


def test_expired_continue_token_with_inconsistent_token(ctx, fake, settings):
    expired_continue_case(ctx, fake, settings, inconsistent=True)


def test_expired_continue_token_without_inconsistent_token(ctx, fake, settings):
    expired_continue_case(ctx, fake, settings, inconsistent=False)


def restore_case(ctx, fake, mode):
    """etcd restored from a backup: the RV counter goes back below what the
    client has seen; objects created after the backup are gone."""
    fake.too_large_watch = mode
    srv, table = watched_pods(ctx, fake)
    backup = fake.snapshot()
    for i in range(3):
        fake.create("pods", pod("after-backup-%d" % i))
    fake.update("pods", "default", "p0", lambda o: o["metadata"]["labels"].update(v="new"))
    wait_converged(table, srv, fake, "pods")
    seen = watch_status(srv, "pods")["resource_version"]
    fake.restore(backup)        # drops the watch; RVs start again from the backup's
    assert int(fake.resource_version) < int(seen)
    wait_converged(table, srv, fake, "pods", timeout=40)
    # a later write reuses RVs the client saw before the restore: still applied
    fake.create("pods", pod("after-restore"))
    wait_converged(table, srv, fake, "pods", timeout=40)
    too_large = [r for r in worker_requests(fake) if r.query.get("resourceVersion") == seen]
    assert too_large, "the client never asked from the RV it had seen"
    lists = [r for r in worker_requests(fake, "list") if r.at > too_large[0].at]
    # PROTOCOL 8, 22: relisted without a resourceVersion
    assert any("resourceVersion" not in r.query for r in lists), lists
    return srv


def test_etcd_restore_too_large_rv_error_event(ctx, fake):
    restore_case(ctx, fake, "error")


def test_etcd_restore_too_large_rv_http_504(ctx, fake):
    restore_case(ctx, fake, "http")


def test_recreated_under_same_name_during_outage(ctx, fake):
    srv, table = watched_pods(ctx, fake)
    old = fake.get("pods", "default", "p1")
    fake.set_down(True)
    fake.delete("pods", "default", "p1")
    new = fake.create("pods", pod("p1", labels={"app": "web", "gen": "2"}))
    fake.delete("pods", "default", "p2")
    fake.compact()              # the outage outlived the history: 410 on resume
    fake.set_down(False)
    wait_converged(table, srv, fake, "pods", timeout=40)
    rows = {r[0]: r[1] for r in sql("SELECT uid, name FROM %s WHERE cluster = %%s" % table, (srv,))}
    assert old["metadata"]["uid"] not in rows and rows[new["metadata"]["uid"]] == "p1"
    st = watch_status(srv, "pods")
    assert st["relists"] == 1, st


def test_objects_move_out_of_and_into_the_label_selector(ctx, fake):
    srv, table = watched_pods(ctx, fake, label_selector="app=web")
    fake.create("pods", pod("db-0", labels={"app": "db"}))
    sel = dict(label_selector="app=web")
    wait_converged(table, srv, fake, "pods", **sel)
    fake.update("pods", "default", "p0", lambda o: o["metadata"]["labels"].update(app="db"))
    wait_converged(table, srv, fake, "pods", **sel)
    assert watch_status(srv, "pods")["deleted"] == 1
    fake.update("pods", "default", "db-0", lambda o: o["metadata"]["labels"].update(app="web"))
    fake.update("pods", "default", "p0", lambda o: o["metadata"]["labels"].update(app="web"))
    wait_converged(table, srv, fake, "pods", **sel)
    # every request carried the selector (PROTOCOL 2)
    assert all(r.query.get("labelSelector") == "app=web" for r in worker_requests(fake)), \
        [r for r in worker_requests(fake) if r.query.get("labelSelector") != "app=web"]
    st = watch_status(srv, "pods")
    assert st["relists"] == 0 and st["objects"] == 4, st


def test_objects_move_across_the_label_selector_during_an_outage(ctx, fake):
    srv, table = watched_pods(ctx, fake, label_selector="app=web")
    fake.create("pods", pod("db-0", labels={"app": "db"}))
    sel = dict(label_selector="app=web")
    wait_converged(table, srv, fake, "pods", **sel)
    fake.set_down(True)
    fake.update("pods", "default", "p0", lambda o: o["metadata"]["labels"].update(app="db"))
    fake.update("pods", "default", "db-0", lambda o: o["metadata"]["labels"].update(app="web"))
    fake.compact()
    fake.set_down(False)
    wait_converged(table, srv, fake, "pods", timeout=40, **sel)
    assert watch_status(srv, "pods")["relists"] == 1


def list_requests_after(fake, t):
    return [r for r in worker_requests(fake, "list") if r.at > t]


def relist_after_410(fake, srv, table):
    """A watch's 410 (too old): the LIST requests of the relist it causes."""
    f = fake.inject("too_old", on="watch")
    cut_watch(fake)
    fake.create("pods", pod("after-410"))
    wait_converged(table, srv, fake, "pods")
    assert f.hits
    return list_requests_after(fake, f.hits[0].at)


def five_pods_watched(ctx, fake, settings):
    """Five pods on the fake, LIST pages of 2, a watch synced: (server,
    table, the worker's LIST requests so far)."""
    settings(list_page_size=2)
    srv = fake_server(ctx, fake)
    for i in range(5):
        fake.create("pods", pod("p%d" % i))
    table = watch("pods", srv)
    wait_converged(table, srv, fake, "pods")
    return srv, table, worker_requests(fake, "list")


def test_lists_are_answered_by_the_watch_cache(ctx, fake, settings):
    """As client-go's reflector (tools/cache/reflector.go ListAndWatch): the
    first LIST asks resourceVersion=0, which a watch cache answers whole
    whatever the limit (PROTOCOL 5); a relist from the last resourceVersion
    then sends no limit, so that the cache answers it too (a 1.20 apiserver
    sends a LIST with a limit and a resourceVersion other than 0 to etcd)."""
    srv, table, first = five_pods_watched(ctx, fake, settings)
    assert [(r.query.get("resourceVersion"), r.query.get("limit")) for r in first] == [("0", "2")], first
    seen = watch_status(srv, "pods")["resource_version"]
    relist = relist_after_410(fake, srv, table)
    assert len(relist) == 1, relist
    q = relist[0].query
    assert q.get("resourceVersionMatch") == "NotOlderThan" and "limit" not in q, q
    assert int(q["resourceVersion"]) >= int(seen), (q, seen)
    # kwatch.relist() asks for the newest state: a consistent read, paged
    t = relist[-1].at
    sql("SELECT kwatch.relist('pods', server => %s, wait => true)", (srv,))
    forced = list_requests_after(fake, t)
    assert len(forced) == 3 and "resourceVersion" not in forced[0].query, forced
    assert forced[0].query.get("limit") == "2", forced


def test_lists_stay_paged_without_a_watch_cache(ctx, fake, settings):
    """A server without a watch cache pages the resourceVersion=0 LIST; the
    relists keep the limit then (client-go's paginatedResult), and with
    kwatch.list_from_watch_cache off no LIST asks resourceVersion=0."""
    fake.watch_cache = False
    srv, table, first = five_pods_watched(ctx, fake, settings)
    assert first[0].query.get("resourceVersion") == "0" and len(first) == 3, first
    relist = relist_after_410(fake, srv, table)
    assert len(relist) == 3 and relist[0].query.get("limit") == "2", relist
    assert relist[0].query.get("resourceVersionMatch") == "NotOlderThan", relist

    settings(list_from_watch_cache="off")
    srv2 = fake_server(ctx, fake, "-etcd")
    table = watch("pods", srv2)
    wait_converged(table, srv2, fake, "pods")
    assert all(r.query.get("resourceVersion") != "0" for r in worker_requests(fake, "list")
               if r.at > relist[-1].at), fake.requests[-10:]
