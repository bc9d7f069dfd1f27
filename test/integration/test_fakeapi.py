"""The fake API server (test/fakeapi) answers like the real kube-apiserver
1.20 recorded in test/fixtures/kube-apiserver-1.20/: same discovery bytes,
same shapes of lists, pages, watch events and Status errors, and the rules
of doc/protocol.md.  These tests talk to the fake with urllib only."""
import base64
import json
import urllib.error
import urllib.request
from pathlib import Path

from faults_support import fake, pod  # noqa: F401

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "kube-apiserver-1.20"


def get(api, path):
    """(status, headers, body bytes)"""
    try:
        with urllib.request.urlopen(api.url + path, timeout=10) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def shape(v):
    """The structure of a JSON value: dict keys (recursively), list of the first item's shape."""
    if isinstance(v, dict):
        return {k: shape(x) for k, x in v.items()}
    if isinstance(v, list):
        return [shape(v[0])] if v else []
    return type(v).__name__


def test_discovery_is_the_recorded_one(fake):
    for path, name in (("/api", "api.json"), ("/api/v1", "api_v1.json"), ("/apis", "apis.json"),
                       ("/apis/apps/v1", "apis_apps_v1.json"), ("/version", "version.json")):
        status, headers, body = get(fake, path)
        assert status == 200 and headers["Content-Type"] == "application/json"
        assert json.loads(body) == json.loads((REAL / name).read_text()), path


def test_paged_list_has_the_real_shape(fake):
    real = json.loads((REAL / "pods-list-limit2.json").read_text())
    for i in range(5):
        fake.create("pods", pod("p%d" % i, namespace="demo"))
    status, _, body = get(fake, "/api/v1/pods?limit=2")
    page = json.loads(body)
    assert status == 200
    assert list(page) == list(real) == ["kind", "apiVersion", "metadata", "items"]
    assert (page["kind"], page["apiVersion"]) == (real["kind"], real["apiVersion"])
    assert set(page["metadata"]) == set(real["metadata"]) == {"resourceVersion", "continue",
                                                              "remainingItemCount"}
    assert page["metadata"]["remainingItemCount"] == 3 and len(page["items"]) == 2
    # items carry no kind/apiVersion, like the real ones
    for items in (page["items"], real["items"]):
        assert "kind" not in items[0] and "apiVersion" not in items[0]
    # the continue token decodes like the real one: {"v", "rv", "start"}
    def tok(t):
        return json.loads(base64.urlsafe_b64decode(t + "=" * (-len(t) % 4)))
    assert set(tok(page["metadata"]["continue"])) == set(tok(real["metadata"]["continue"]))
    # every page shares the snapshot RV; the last page has no token (PROTOCOL 3, 4)
    rv, cont, names = page["metadata"]["resourceVersion"], page["metadata"]["continue"], []
    names += [i["metadata"]["name"] for i in page["items"]]
    fake.create("pods", pod("p9-after-snapshot", namespace="demo"))
    while cont:
        _, _, body = get(fake, "/api/v1/pods?limit=2&continue=" + cont)
        page = json.loads(body)
        assert page["metadata"]["resourceVersion"] == rv
        cont = page["metadata"].get("continue")
        names += [i["metadata"]["name"] for i in page["items"]]
    assert names == ["p%d" % i for i in range(5)]
    # continue with a resourceVersion is refused (PROTOCOL 3)
    status, _, body = get(fake, "/api/v1/pods?limit=2&resourceVersion=1&continue=" +
                          json.loads(get(fake, "/api/v1/pods?limit=2")[2])["metadata"]["continue"])
    assert status == 400 and json.loads(body)["reason"] == "BadRequest"


def test_watch_events_have_the_real_shape(fake):
    real = [json.loads(line) for line in (REAL / "pods-watch-too-old.ndjson").read_text().splitlines()]
    fake.create("pods", pod("a"))
    fake.compact()
    status, headers, body = get(fake, "/api/v1/pods?watch=true&resourceVersion=50&timeoutSeconds=1")
    assert status == 200 and headers["Transfer-Encoding"] == "chunked"
    got = [json.loads(line) for line in body.decode().splitlines()]
    assert len(got) == 1 and shape(got) == shape(real)
    assert got[0]["object"]["message"].startswith("too old resource version: 50 (")
    # events from "now" carry kind and apiVersion, as the real ones do
    status, _, body = get(fake, "/api/v1/pods?watch=true&timeoutSeconds=1")
    ev = json.loads(body.decode().splitlines()[0])
    assert ev["type"] == "ADDED" and ev["object"]["kind"] == "Pod" and ev["object"]["apiVersion"] == "v1"


def test_status_errors_have_the_real_shape(fake):
    real404 = json.loads((REAL / "status-404.json").read_text())
    status, _, body = get(fake, "/api/v1/frobnicators")
    assert status == 404 and json.loads(body) == real404
    real401 = json.loads((REAL / "status-401.json").read_text())
    fake.inject("status", on="list", code=401, message="Unauthorized")
    status, _, body = get(fake, "/api/v1/pods")
    assert status == 401 and json.loads(body) == real401


def test_too_large_resource_version_is_504(fake):
    status, _, body = get(fake, "/api/v1/pods?resourceVersion=99999&resourceVersionMatch=NotOlderThan")
    s = json.loads(body)
    assert status == 504 and s["reason"] == "Timeout" and s["code"] == 504
    assert s["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"


def test_resource_version_zero_ignores_limit(fake):
    for i in range(4):
        fake.create("pods", pod("p%d" % i))
    page = json.loads(get(fake, "/api/v1/pods?limit=2&resourceVersion=0")[2])
    assert len(page["items"]) == 4 and "continue" not in page["metadata"]


def test_label_selector_watch_sends_deleted_and_added_on_moves(fake):
    p = fake.create("pods", pod("m", labels={"app": "web"}))
    rv = p["metadata"]["resourceVersion"]
    fake.update("pods", "default", "m", lambda o: o["metadata"]["labels"].update(app="db"))
    fake.update("pods", "default", "m", lambda o: o["metadata"]["labels"].update(app="web"))
    _, _, body = get(fake, "/api/v1/pods?watch=true&labelSelector=app%%3Dweb&resourceVersion=%s"
                     "&timeoutSeconds=1" % rv)
    evs = [json.loads(line) for line in body.decode().splitlines()]
    assert [e["type"] for e in evs] == ["DELETED", "ADDED"]
    # DELETED carries the last matching state with the RV of the change (PROTOCOL 14)
    assert evs[0]["object"]["metadata"]["labels"]["app"] == "web"
    assert int(evs[0]["object"]["metadata"]["resourceVersion"]) == int(rv) + 1


def test_invalid_utf8_and_raw_values_go_out_as_bytes(fake):
    from faults_support import RawJSON
    fake.create("pods", pod("x", annotations={"a": "\udcff", "b": RawJSON(b"[[1]]"), "c": "\x00"}))
    body = get(fake, "/api/v1/pods")[2]
    assert b'"a":"\xff"' in body and b'"b":[[1]]' in body and b'"c":"\\u0000"' in body
