"""Network and proxy faults against the REAL kube-apiserver, through the
fault-injecting reverse proxy (test/fakeapi/proxy.py): the mirror still
equals `kubectl get` object by object."""
from conftest import assert_table_matches_server, create_pods, kubectl, watch, watch_status
from faults_support import fake_server, proxy, wait_status, worker_requests, not_probe  # noqa: F401


def test_real_watch_dropped_mid_event_and_5xx(ctx, proxy):
    ns = ctx.namespace()
    srv = fake_server(ctx, proxy)
    create_pods(ns, {"a": {"app": "web"}, "b": {"app": "web"}})
    f = proxy.inject("status", on="first_page", code=503, retry_after=1, when=not_probe)
    watch("pods", srv, namespace=ns)
    assert_table_matches_server("k8s.pods", srv, ["pods", "-n", ns])
    assert len(f.hits) == 1
    d = proxy.inject("drop", on="watch", after_events=1, mid_event=True)
    proxy.set_down(True)
    proxy.set_down(False)
    for name in ("a", "b"):
        kubectl("label", "pod", name, "-n", ns, "round=1")
    create_pods(ns, {"c": {"app": "db"}})
    assert_table_matches_server("k8s.pods", srv, ["pods", "-n", ns])
    assert d.hits, "the drop fault was never used"
    after = [r for r in worker_requests(proxy, "watch") if r.at > d.hits[0].at]
    assert after and not [r for r in worker_requests(proxy, "list") if r.at > d.hits[0].at]
    wait_status(srv, "pods", lambda s: s["state"] == "watching")


def test_real_watch_split_and_html(ctx, proxy):
    ns = ctx.namespace()
    srv = fake_server(ctx, proxy)
    create_pods(ns, {"a": {}})
    watch("pods", srv, namespace=ns)
    assert_table_matches_server("k8s.pods", srv, ["pods", "-n", ns])
    s = proxy.inject("split", on="watch", chunk_bytes=5)
    proxy.set_down(True)
    proxy.set_down(False)
    create_pods(ns, {"b": {}, "c": {}})
    assert_table_matches_server("k8s.pods", srv, ["pods", "-n", ns])
    assert s.hits and s.hits[0].events >= 2
    h = proxy.inject("raw", on="watch", after_events=1,
                     data=b"<html><body>502 Bad Gateway</body></html>\n")
    proxy.set_down(True)
    proxy.set_down(False)
    kubectl("delete", "pod", "a", "-n", ns, "--wait=false")
    create_pods(ns, {"d": {}})
    assert_table_matches_server("k8s.pods", srv, ["pods", "-n", ns])
    assert h.hits
    st = wait_status(srv, "pods", lambda s: s["state"] == "watching")
    assert st["decode_errors"] == 1 and st["relists"] == 0, st
