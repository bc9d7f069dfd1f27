"""Helpers for the fault suite: kwatch servers pointed at the fake API server
(test/fakeapi/server.py) and object-by-object comparison of a mirror table
with the fake's store.

    def test_x(ctx, fake):                      # fake: a started FakeAPI
        srv = fake_server(ctx, fake)            # CREATE SERVER ... api_server
        fake.create("pods", pod("a"))
        table = watch("pods", srv)
        wait_converged(table, srv, fake, "pods")
        srv, table = watched_pods(ctx, fake)    # the same with 3 pods, watching
"""
import pytest
from psycopg2 import sql as pgsql

import cluster
import postgres
from compare import mirror_rows, rows_diff, wait_same
from postgres import sql
from watches import wait_status, watch, watch_status  # noqa: F401  (re-exported)

from fakeapi.server import FakeAPI, RawJSON, parse_label_selector, labels_match  # noqa: F401
from fakeapi.proxy import FaultProxy  # noqa: F401


@pytest.fixture
def fake():
    """A started FakeAPI, stopped after the test."""
    api = FakeAPI().start()
    yield api
    api.stop()


@pytest.fixture
def proxy():
    """A started FaultProxy in front of the test cluster's kube-apiserver."""
    px = FaultProxy(cluster.CLUSTER.server, ca_file=cluster.CLUSTER.ca,
                    token=cluster.CLUSTER.token).start()
    yield px
    px.stop()


def fake_server(ctx, api, suffix=""):
    """CREATE SERVER <test name><suffix> with api_server = the fake's (or a
    FaultProxy's) URL;
    dropped by ctx's cleanup.  Returns its name (the rows' cluster)."""
    name = ctx.base + suffix
    # the fake speaks plain http: a superuser's explicit opt-in (README "Security")
    sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch OPTIONS (api_server {}{})")
        .format(pgsql.Identifier(name), pgsql.Literal(api.url),
                pgsql.SQL(", allow_insecure_http 'true'" if api.url.startswith("http:") else "")))
    ctx.servers.append(name)
    return name


def watched_pods(ctx, fake, n=3, **kw):
    """n pods p0..p<n-1> on the fake, a watch on them (kwatch.watch **kw),
    converged and watching; returns (server, table)."""
    srv = fake_server(ctx, fake)
    for i in range(n):
        fake.create("pods", pod("p%d" % i))
    table = watch("pods", srv, **kw)
    wait_status(srv, "pods", lambda s: s["state"] == "watching", msg="watching")
    wait_converged(table, srv, fake, "pods")
    return srv, table


def cut_watch(fake):
    """Ends the open watch (a brief outage), so that a fault injected now hits the next one."""
    fake.set_down(True)
    fake.set_down(False)


def recovers(fake, srv, table, name, timeout=40):
    """With the faults cleared, a new pod `name` reaches the mirror and the
    watch is watching again; returns its status."""
    fake.clear_faults()
    fake.create("pods", pod(name))
    wait_converged(table, srv, fake, "pods", timeout=timeout)
    return wait_status(srv, "pods", lambda s: s["state"] == "watching")


def watch_fault_survived(ctx, fake, kind, name, timeout=40, **params):
    """A watched fake (watched_pods) whose next watch suffers the fault
    inject(kind, on="watch", **params); a pod `name` created after it
    reaches the mirror.  Returns (server, table, fault)."""
    srv, table = watched_pods(ctx, fake)
    f = fake.inject(kind, on="watch", **params)
    cut_watch(fake)
    fake.create("pods", pod(name))
    wait_converged(table, srv, fake, "pods", timeout=timeout)
    return srv, table, f


def pod(name, namespace="default", labels=None, **extra):
    """A pod manifest for FakeAPI.create; extra keys go to metadata
    (annotations=...) or, for spec/status, to the top level."""
    o = {"metadata": {"name": name, "namespace": namespace, "labels": labels or {"app": "web"}},
         "spec": {"containers": [{"name": "c", "image": "registry.invalid/pause:1"}]}}
    for k, v in extra.items():
        if k in ("spec", "status"):
            o[k] = v
        else:
            o["metadata"][k] = v
    return o


def expected_objects(api, resource, namespace=None, label_selector=None, exclude=()):
    """{uid: object} the mirror should hold: the fake's objects of `resource`
    matching the watch's namespace and label selector, minus uids in exclude."""
    reqs = parse_label_selector(label_selector)
    out = {}
    for o in api.objects(resource):
        m = o["metadata"]
        if namespace is not None and m.get("namespace") != namespace:
            continue
        if not labels_match(reqs, o) or m["uid"] in exclude:
            continue
        out[m["uid"]] = o
    return out


def fake_diff(table, cluster, api, resource, namespace=None, label_selector=None,
              exclude=(), transform=None):
    """None when the rows of `cluster` in `table` equal the fake's objects
    object by object (uid, resourceVersion, namespace, name, labels, whole
    object); else a description.  `transform(obj)` maps a server object to
    what kwatch is expected to store (for sanitized text)."""
    want = expected_objects(api, resource, namespace, label_selector, exclude)
    if transform:
        want = {u: transform(o) for u, o in want.items()}
    return rows_diff(mirror_rows(table, cluster), want, *api.type_meta(resource))


def wait_converged(table, cluster, api, resource, timeout=30, **kw):
    """Waits until fake_diff is None; fails with the last difference and the watch's status."""
    wait_same(lambda: fake_diff(table, cluster, api, resource, **kw), timeout, 0.1,
              lambda last: "%s (cluster %s) does not match the fake's %s after %ss: %s\n"
              "status: %s\nrequests: %s" % (table, cluster, resource, timeout, last,
                                             watch_status(cluster, resource), api.requests[-15:]))


def not_probe(req):
    """For FakeAPI.inject(when=...): any request but kwatch.watch()'s
    registration probe (a LIST with limit=1)."""
    return not (req.kind == "list" and req.query.get("limit") == "1")


def worker_requests(api, kind=None, resource="pods"):
    """The fake's requests from the worker (the registration probe, a LIST
    with limit=1 sent by kwatch.watch(), left out)."""
    return [r for r in api.requests_for(kind, resource)
            if not (r.kind == "list" and r.query.get("limit") == "1")]


def log_mark():
    return postgres.PG.log_size()


def log_since(mark):
    return postgres.PG.log_since(mark)


def gaps_after(hits, requests):
    """For each fault hit, the seconds until the worker's next request."""
    out = []
    for h in hits:
        nxt = [r.at for r in requests if r.at > h.at]
        if nxt:
            out.append(min(nxt) - h.at)
    return out
