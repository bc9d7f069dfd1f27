"""Helpers for the fault suite: kwatch servers pointed at the fake API server
(test/fakeapi/server.py) and object-by-object comparison of a mirror table
with the fake's store.

    def test_x(ctx, fake):                      # fake: a started FakeAPI
        srv = fake_server(ctx, fake)            # CREATE SERVER ... api_server
        fake.create("pods", pod("a"))
        table = watch("pods", srv)
        wait_converged(table, srv, fake, "pods")
"""
import json
import sys
import time
from pathlib import Path

import pytest
from psycopg2 import sql as pgsql

import conftest
from conftest import mirror_rows, normalise, sql, wait_until, watch_status

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fakeapi.server import FakeAPI, RawJSON, parse_label_selector, labels_match  # noqa: E402,F401
from fakeapi.proxy import FaultProxy  # noqa: E402,F401


@pytest.fixture
def fake():
    """A started FakeAPI, stopped after the test."""
    api = FakeAPI().start()
    yield api
    api.stop()


@pytest.fixture
def proxy():
    """A started FaultProxy in front of the test cluster's kube-apiserver."""
    px = FaultProxy(conftest.CLUSTER.server, ca_file=conftest.CLUSTER.ca,
                    token=conftest.CLUSTER.token).start()
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
    rows = mirror_rows(table, cluster)
    problems = []
    for u in sorted(set(want) - set(rows)):
        m = want[u]["metadata"]
        problems.append("missing row %s/%s uid %s rv %s" % (m.get("namespace"), m["name"], u,
                                                           m["resourceVersion"]))
    for u in sorted(set(rows) - set(want)):
        r = rows[u]
        problems.append("extra row %s/%s uid %s rv %s" % (r["namespace"], r["name"], u,
                                                         r["resource_version"]))
    for u in sorted(set(want) & set(rows)):
        s, r = want[u], rows[u]
        m = s["metadata"]
        what = "%s/%s" % (m.get("namespace"), m["name"])
        if r["resource_version"] != m["resourceVersion"]:
            problems.append("%s: resource_version %s, server %s"
                            % (what, r["resource_version"], m["resourceVersion"]))
            continue
        for col, v in (("namespace", m.get("namespace")), ("name", m["name"]),
                       ("labels", m.get("labels") or {})):
            if r[col] != v:
                problems.append("%s: column %s = %r, server %r" % (what, col, r[col], v))
        so = normalise(transform(s) if transform else s, *api.type_meta(resource))
        ro = normalise(r["object"])
        if so != ro:
            keys = sorted(k for k in set(so) | set(ro) if so.get(k) != ro.get(k))
            problems.append("%s: object differs in %s: row %s vs server %s"
                            % (what, keys, json.dumps({k: ro.get(k) for k in keys})[:400],
                               json.dumps({k: so.get(k) for k in keys}, default=repr)[:400]))
    return "; ".join(problems) if problems else None


def wait_converged(table, cluster, api, resource, timeout=30, **kw):
    """Waits until fake_diff is None; fails with the last difference and the watch's status."""
    last = [None]

    def same():
        last[0] = fake_diff(table, cluster, api, resource, **kw)
        return last[0] is None
    deadline = time.monotonic() + timeout
    while not same():
        if time.monotonic() >= deadline:
            pytest.fail("%s (cluster %s) does not match the fake's %s after %ss: %s\nstatus: %s\n"
                        "requests: %s" % (table, cluster, resource, timeout, last[0],
                                          watch_status(cluster, resource),
                                          api.requests[-15:]), pytrace=False)
        time.sleep(0.1)


def wait_status(cluster, resource, pred, timeout=30, msg="status"):
    """Waits until pred(status row) is true; returns the row."""
    def ok():
        st = watch_status(cluster, resource)
        return st if st and pred(st) else False
    try:
        return wait_until(ok, timeout, msg)
    except BaseException:
        print("status:", watch_status(cluster, resource))
        raise


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
    return conftest.PG.log_size()


def log_since(mark):
    return conftest.PG.log_since(mark)


def gaps_after(hits, requests):
    """For each fault hit, the seconds until the worker's next request."""
    out = []
    for h in hits:
        nxt = [r.at for r in requests if r.at > h.at]
        if nxt:
            out.append(min(nxt) - h.at)
    return out
