"""A fault-injecting Kubernetes API server for tests (Python 3 standard library only).

It serves discovery, LIST and WATCH for every resource of the real
kube-apiserver 1.20 discovery documents in test/fixtures/kube-apiserver-1.20/
(pods, namespaces, configmaps, deployments.apps, ...) from an in-memory store
with one resourceVersion counter, with the JSON shapes and rules of the real
server (doc/protocol.md), and does on demand what a real server cannot:
drop, stall, split and pack watch streams, send malformed or hostile bytes,
answer 429/5xx/403/HTML pages, expire continue tokens, forget its history,
go back in time (etcd restore), ...  Plain http by default, https with a
throw-away self-signed certificate (`tls=True`, needs `openssl`).

In-process use (pytest)::

    from fakeapi.server import FakeAPI, RawJSON
    api = FakeAPI().start()              # api.url: "http://127.0.0.1:<port>"
    pod = api.create("pods", {"metadata": {"name": "a", "namespace": "ns1",
                                           "labels": {"app": "web"}}})
    api.update("pods", "ns1", "a", lambda o: o["metadata"]["labels"].update(app="db"))
    api.delete("pods", "ns1", "a")
    api.objects("pods")                  # current objects, as LIST items
    api.inject("status", on="watch", code=429, retry_after=2, times=3)
    api.inject("drop", on="watch", after_events=2)
    api.requests_for(kind="list", resource="pods")   # what the client asked
    api.stop()

Stable API (used by other test modules; extend, do not change):

  FakeAPI(host="127.0.0.1", port=0, tls=False, fixtures=None, cert=None, key=None)
    .start() -> self, .stop(), .url, .ca_file (tls only: the throw-away
    certificate; None when cert/key name the certificate to present)
  store (resource = plural, "plural.group" for other groups, e.g. "pods",
  "namespaces", "deployments.apps"; every call is one write with its own RV):
    .create(resource, obj) -> obj     fills uid, resourceVersion,
                                      creationTimestamp (keeps a given uid)
    .update(resource, ns, name, fn_or_obj) -> obj
                                      fn mutates a copy; an obj replaces it
    .delete(resource, ns, name) -> obj   the last state, with the deletion RV
    .get(resource, ns, name) -> obj or None
    .objects(resource) -> [obj]       current objects (copies), etcd key order
    .resource_version -> str          the current RV (of the last write)
    .compact()                        forget all history: a WATCH or a
                                      `resourceVersion` LIST older than now
                                      gets 410, continue tokens expire
    .snapshot() -> token; .restore(token)   etcd backup/restore: the store,
                                      the RV counter and the history go back;
                                      open watches are dropped; clients that
                                      saw newer RVs get "Too large resource
                                      version" (504) on LIST and WATCH
    .set_down(bool)                   outage: open connections are cut, new
                                      ones closed before any response
    .bookmark_interval = None         seconds between BOOKMARKs on watches
                                      that allow them; None = never (default)
    .event_object_first = False       True: watch events are written as
                                      {"object":..,"extra":{..},"type":..}
                                      (JSON members in any order, and one
                                      a client does not know)
    .too_large_watch = "error"        what a WATCH from an RV newer than the
                                      store gets: "error" (ERROR event, code
                                      504), "http" (HTTP 504), "silent" (the
                                      1.20 watch cache: waits for newer RVs)
    .watch_cache = True               a LIST with resourceVersion=0 is answered
                                      whole, its limit ignored (the watch
                                      cache); False: paged like any other
    .watch_list = "reject"            streaming lists (a WATCH with
                                      sendInitialEvents=true, KEP-3157):
                                      "reject" (before 1.27, as the 1.20
                                      plane: a WATCH with resourceVersionMatch
                                      gets 422 Invalid), "serve" (1.27+: the
                                      state as ADDED events, then a BOOKMARK
                                      annotated k8s.io/initial-events-end,
                                      then the watch), "ignore" (a server that
                                      drops the parameters: a plain WATCH)
  faults (first matching fault with times left applies, then counts down):
    .inject(kind, on="any", resource=None, times=1, when=None, **params) -> Fault
         on: "list" (any LIST page), "first_page", "continue" (a page with a
         continue token), "watch", "watchlist" (a streaming list: a WATCH
         with sendInitialEvents=true), "discovery", "any" (LIST or WATCH,
         not a streaming list), "write" (PATCH, POST, PUT or DELETE: the
         fault proxy only; "status" and "html" faults);
         resource: as above or None for all; when: a predicate on the
         Request (e.g. lambda r: r.query.get("limit") != "1" to spare
         kwatch.watch()'s probe).  times=None: forever.  Fault.hits: the
         requests it hit (Fault.times can be changed at any time).
      kinds and params:
        "status"  code, reason=None, message=None, retry_after=None, details=None
                  -> that HTTP status with a Status body (and Retry-After;
                  details: the Status's details, e.g. causes)
        "html"    code=502 -> a proxy's HTML error page (text/html)
        "drop"    after_events=0, mid_event=True: WATCH: after N events,
                  send the first half of the next event (waiting for one)
                  and cut the connection; mid_event=False: cut right after
                  N events.  LIST: half of the body, then cut.
        "stall"   after_events=0: WATCH: headers and N events, then silence
                  with the socket open until the client leaves.  LIST: the
                  headers and half of the body, then silence.
        "short_watch"  WATCH: 200, then a clean end at once, no events
        "raw"     data (bytes), after_events=0, close=True: WATCH: after N
                  events write `data` as one chunk, then end the stream
                  cleanly (close=True) or go on.  LIST: the body is `data`.
        "split"   chunk_bytes=1: WATCH: every write cut into pieces of that
                  many bytes, each its own HTTP chunk; LIST: the body sent
                  chunked, in pieces of that many bytes
        "pack"    events=0 (0 = all available): WATCH: events waiting are
                  sent together in one chunk
        "too_old" http=False, after_events=None: WATCH: an ERROR event with
                  a 410 Status ("too old resource version"), or an HTTP 410;
                  with after_events=N (a served streaming list), N of its
                  initial events first, then the ERROR event
        "too_large"  LIST/WATCH: HTTP 504 "Too large resource version"
        "slow"    seconds=30: fault proxy only: the answer is held that long
                  (nothing sent, the connection open), then forwarded whole:
                  a LIST that takes the API server 30 s
        "expire_continue"  inconsistent=True: a LIST page with a continue
                  token gets 410 Expired; with inconsistent=True the Status
                  carries metadata.continue (using it is recorded in
                  .inconsistent_continue_used)
    .clear_faults()
    .faults -> [Fault]
  requests (every request, in arrival order):
    .requests -> [Request]  Request: method, path, query (dict: name ->
                 last value), kind ("list", "watch", "watchlist",
                 "discovery", "other"),
                 resource, namespace, status (HTTP status sent, None when
                 cut before), fault (the Fault applied or None), events
                 (watch events sent), at (time.monotonic() on arrival)
    .requests_for(kind=None, resource=None) -> [Request]
    .wait_for_request(pred, timeout=30) -> Request
  RawJSON(bytes or str): a value serialized verbatim (invalid UTF-8,
    nesting deeper than Python's json can write, ...)

Strings holding lone surrogates U+DC80..U+DCFF ("surrogateescape") are sent
as the raw bytes 0x80..0xFF, i.e. invalid UTF-8: "bad\\udcffname".

Rules followed (doc/protocol.md): LIST paging with limit/continue, snapshot
RV shared by all pages (4), continue + resourceVersion -> 400 (3),
resourceVersion=0 ignores limit (5), 410 Expired for continue tokens (7),
504 ResourceVersionTooLarge (8), Status errors (9), watch events with
selectors (ADDED/DELETED when entering/leaving a label selector, 14),
BOOKMARK (15), 410 for a compacted RV (16), timeoutSeconds (17).

Standalone:  python3 test/fakeapi/server.py [--port N] [--pods N] [--tls]

In front of a REAL API server, fakeapi.proxy.FaultProxy(upstream, ca_file=,
token=) offers the same faults, requests log and set_down, plus network
faults: cut, freeze, fail_next (see proxy.py).
"""
import argparse
import base64
import copy
import datetime
import http.server
import json
import os
import select
import shutil
import socket
import socketserver
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kube-apiserver-1.20"

__all__ = ["FakeAPI", "RawJSON", "Fault", "Request", "LabelSelectorError"]


# ---------------------------------------------------------------- JSON

class RawJSON:
    """A JSON value written verbatim into responses (bytes or str)."""

    def __init__(self, data):
        self.data = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else bytes(data)

    def __deepcopy__(self, memo):
        return self


def dumps(obj):
    """obj -> JSON bytes as the apiserver writes them (compact, UTF-8,
    lone surrogates as raw bytes, RawJSON verbatim)."""
    raws = []

    def default(o):
        if isinstance(o, RawJSON):
            raws.append(o.data)
            return "\x00kwraw%d\x00" % (len(raws) - 1)
        raise TypeError("not JSON serializable: %r" % (o,))
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, default=default)
    data = text.encode("utf-8", "surrogateescape")
    for i, raw in enumerate(raws):
        # json.dumps escapes the NUL markers as \u0000
        data = data.replace(('"\\u0000kwraw%d\\u0000"' % i).encode(), raw, 1)
    return data


def status_body(code, reason, message, details=None, metadata=None):
    """A metav1.Status, as apimachinery pkg/api/errors builds them."""
    s = {"kind": "Status", "apiVersion": "v1", "metadata": metadata or {},
         "status": "Failure", "message": message, "reason": reason}
    if details is not None:
        s["details"] = details
    s["code"] = code
    return s


# ---------------------------------------------------------------- selectors

class LabelSelectorError(ValueError):
    pass


def parse_label_selector(text):
    """labelSelector -> [(key, op, values)]; op in =, !=, in, notin, exists, !.
    Raises LabelSelectorError with a message like apimachinery's labels.Parse."""
    reqs = []
    if text is None or text.strip() == "":
        return reqs
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    valid = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./")
    for p in parts:
        p = p.strip()
        if not p:
            raise LabelSelectorError("unable to parse requirement: found '', expected: identifier")
        low = p.split()
        if len(low) >= 2 and low[1] in ("in", "notin"):
            key, op = low[0], low[1]
            rest = p[p.index(op, len(key)) + len(op):].strip()
            if not (rest.startswith("(") and rest.endswith(")")):
                raise LabelSelectorError("unable to parse requirement: found '%s', expected: '('" % rest)
            vals = [v.strip() for v in rest[1:-1].split(",")]
            reqs.append((key, op, set(vals)))
        elif p.startswith("!"):
            reqs.append((p[1:].strip(), "!", None))
        elif "!=" in p:
            k, v = p.split("!=", 1)
            reqs.append((k.strip(), "!=", {v.strip()}))
        elif "==" in p:
            k, v = p.split("==", 1)
            reqs.append((k.strip(), "=", {v.strip()}))
        elif "=" in p:
            k, v = p.split("=", 1)
            reqs.append((k.strip(), "=", {v.strip()}))
        else:
            reqs.append((p, "exists", None))
    for key, op, vals in reqs:
        if not key or not set(key) <= valid or key[0] in "-_." or key[-1] in "-_.":
            raise LabelSelectorError(
                "unable to parse requirement: invalid label key \"%s\": name part must consist of "
                "alphanumeric characters, '-', '_' or '.', and must start and end with an "
                "alphanumeric character" % key)
        for v in vals or ():
            if not set(v) <= valid or len(v) > 63:
                raise LabelSelectorError(
                    "unable to parse requirement: invalid label value: \"%s\": a valid label must "
                    "be an empty string or consist of alphanumeric characters, '-', '_' or '.'" % v)
    return reqs


def labels_match(reqs, obj):
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for key, op, vals in reqs:
        has = key in labels
        if op == "=" and not (has and labels[key] in vals):
            return False
        if op == "!=" and has and labels[key] in vals:
            return False
        if op == "in" and not (has and labels[key] in vals):
            return False
        if op == "notin" and has and labels[key] in vals:
            return False
        if op == "exists" and not has:
            return False
        if op == "!" and has:
            return False
    return True


def parse_field_selector(text):
    """fieldSelector -> [(field, op, value)] for metadata.name/metadata.namespace."""
    reqs = []
    if not text:
        return reqs
    for p in text.split(","):
        for op in ("!=", "==", "="):
            if op in p:
                f, v = p.split(op, 1)
                break
        else:
            raise LabelSelectorError("invalid selector: '%s'; can't understand '%s'" % (text, p))
        f = f.strip()
        if f not in ("metadata.name", "metadata.namespace"):
            raise LabelSelectorError("field label not supported: %s" % f)
        reqs.append((f, "!=" if op == "!=" else "=", v.strip()))
    return reqs


def fields_match(reqs, obj):
    meta = obj.get("metadata") or {}
    for f, op, v in reqs:
        have = meta.get(f.split(".", 1)[1]) or ""
        if (have == v) != (op == "="):
            return False
    return True


# ---------------------------------------------------------------- records

class Fault:
    """One injected fault (see the module docstring for kinds and params)."""

    def __init__(self, kind, on="any", resource=None, times=1, when=None, **params):
        self.kind = kind
        self.on = on
        self.resource = resource
        self.times = times
        self.when = when
        self.params = params
        self.hits = []

    def matches(self, req):
        if self.times is not None and self.times <= 0:
            return False
        if self.resource is not None and req.resource != self.resource:
            return False
        if self.when is not None and not self.when(req):
            return False
        if self.on == "any":
            return req.kind in ("list", "watch")
        if self.on == "first_page":
            return req.kind == "list" and "continue" not in req.query
        if self.on == "continue":
            return req.kind == "list" and "continue" in req.query
        return req.kind == self.on

    def __repr__(self):
        return "Fault(%r, on=%r, resource=%r, times=%r, %r, hits=%d)" % (
            self.kind, self.on, self.resource, self.times, self.params, len(self.hits))


class Request:
    """One request as the fake received it."""

    def __init__(self, method, raw_path):
        self.method = method
        self.raw_path = raw_path
        u = urllib.parse.urlsplit(raw_path)
        self.path = u.path
        self.query = dict(urllib.parse.parse_qsl(u.query, keep_blank_values=True))
        self.kind = "other"
        self.resource = None
        self.namespace = None
        self.status = None
        self.fault = None
        self.events = 0
        self.at = time.monotonic()

    def __repr__(self):
        return "<%s %s %s -> %s%s>" % (self.kind, self.method, self.raw_path, self.status,
                                       " fault=%s" % self.fault.kind if self.fault else "")


def _skey(k):
    """(namespace, name) -> the etcd key order ("ns/name", or "name")."""
    return "%s/%s" % k if k[0] else k[1]


def _sorted(objs):
    """{(ns, name): obj} -> [(key, obj)] in etcd key order."""
    return sorted(objs.items(), key=lambda kv: _skey(kv[0]))


class Cut(Exception):
    """The handler cut the connection on purpose."""


def _shutdown(sock):
    """Shuts a socket down both ways from any thread (on the plain socket:
    SSLSocket.shutdown would drop its SSL object under a writing thread)."""
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except (OSError, ValueError):
        pass


def collection_path(path):
    """/api/v1[/namespaces/<ns>]/<plural> or /apis/<g>/<v>[/namespaces/<ns>]/<plural>
    -> (resource key: plural or plural.group, version, namespace or None);
    (None, None, None) for any other path."""
    parts = path.strip("/").split("/")
    if len(parts) >= 3 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 4 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None, None, None
    ns = None
    if len(rest) == 3 and rest[0] == "namespaces":
        ns, rest = rest[1], rest[2:]
    if len(rest) != 1:
        return None, None, None
    return (rest[0] if not group else "%s.%s" % (rest[0], group)), version, ns


# ---------------------------------------------------------------- the server

class _Resource:
    def __init__(self, group, version, doc):
        self.group = group
        self.version = version
        self.plural = doc["name"]
        self.kind = doc["kind"]
        self.namespaced = doc["namespaced"]
        self.verbs = doc.get("verbs", [])
        self.key = self.plural if not group else "%s.%s" % (self.plural, group)
        self.api_version = version if not group else "%s/%s" % (group, version)


class FakeAPI:
    """See the module docstring."""

    def __init__(self, host="127.0.0.1", port=0, tls=False, fixtures=None, cert=None, key=None):
        self.host = host
        self.port = port
        self.tls = tls or cert is not None
        self.cert, self.key = cert, key
        self.fixtures = Path(fixtures) if fixtures else FIXTURES
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self.rv = 100                  # like a fresh cluster: RVs don't start at 1
        self.floor = 0                 # oldest RV a watch may start from (compaction)
        self.history = []              # [(rv, resource key, type, obj, old obj)]
        self.store = {}                # resource key -> {(ns, name): obj}
        self.snapshots = {}            # rv -> {resource key: sorted [(key, obj)]}
        self.bookmark_interval = None
        self.event_object_first = False
        self.too_large_watch = "error"
        self.watch_cache = True        # False: resourceVersion=0 LISTs are paged too
        self.watch_list = "reject"     # streaming lists: "reject", "serve", "ignore"
        self.inconsistent_continue_used = []
        self.faults = []
        self.requests = []
        self.down = False
        self.epoch = 0                 # bumped by restore/set_down: cuts open watches
        self.stopping = False
        self._conns = set()
        self._httpd = None
        self._thread = None
        self._tmp = None
        self.ca_file = None
        self.discovery = {}
        self.resources = {}
        self._load_discovery()

    # ---- discovery
    def _load_discovery(self):
        for name, path in (("api.json", "/api"), ("api_v1.json", "/api/v1"),
                           ("apis.json", "/apis"), ("apis_apps_v1.json", "/apis/apps/v1"),
                           ("version.json", "/version")):
            self.discovery[path] = json.loads((self.fixtures / name).read_text())
        for path, doc in self.discovery.items():
            if doc.get("kind") != "APIResourceList":
                continue
            gv = doc["groupVersion"]
            group, version = gv.split("/") if "/" in gv else ("", gv)
            for r in doc["resources"]:
                if "/" in r["name"]:
                    continue
                res = _Resource(group, version, r)
                self.resources[res.key] = res
                self.store.setdefault(res.key, {})

    def _resource(self, key):
        if key not in self.resources:
            raise KeyError("the fake serves no resource %r (have: %s)"
                           % (key, ", ".join(sorted(self.resources))))
        return self.resources[key]

    # ---- lifecycle
    @property
    def url(self):
        return "%s://%s:%d" % ("https" if self.tls else "http", self.host, self.port)

    def start(self):
        api = self

        class Handler(self._handler_base()):
            fake = api

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            allow_reuse_address = True
            request_queue_size = 64

            def get_request(self):
                sock, addr = super().get_request()
                if api.tls:
                    sock = api._ssl_ctx.wrap_socket(sock, server_side=True,
                                                    do_handshake_on_connect=False)
                return sock, addr

        if self.tls:
            self._tls_context()
        self._httpd = Server((self.host, self.port), Handler)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.1},
                                        name="fakeapi", daemon=True)
        self._thread.start()
        return self

    def _handler_base(self):
        return _Handler

    def stop(self):
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
        if self._httpd:
            self._httpd.shutdown()
            self._httpd.server_close()
        self._cut_all()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def _tls_context(self):
        """The server side of TLS: the given cert/key, or a throw-away
        self-signed certificate (then also ca_file); HTTP/1.1 only (ALPN)."""
        crt, key = self.cert, self.key
        if crt is None:
            self._tmp = tempfile.mkdtemp(prefix="fakeapi-")
            os.chmod(self._tmp, 0o755)
            key, crt = os.path.join(self._tmp, "key.pem"), os.path.join(self._tmp, "crt.pem")
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                            "-subj", "/CN=fakeapi",
                            "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                            "-keyout", key, "-out", crt], check=True, capture_output=True)
            os.chmod(crt, 0o644)
            self.ca_file = crt
        self._ssl_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._ssl_ctx.load_cert_chain(crt, key)
        self._ssl_ctx.set_alpn_protocols(["http/1.1"])

    def _cut_all(self):
        with self.lock:
            conns = list(self._conns)
        for c in conns:
            _shutdown(c)

    def set_down(self, down=True):
        """An outage: cut every open connection; while down, close new ones at once."""
        with self.cond:
            self.down = down
            if down:
                # only going down cuts watches: coming back up must not cut
                # one that started in between (it would end with no event)
                self.epoch += 1
            self.cond.notify_all()
        if down:
            self._cut_all()

    # ---- store
    @property
    def resource_version(self):
        with self.lock:
            return str(self.rv)

    def _write(self, res, type_, o, old):
        """One write of o (already in the store, or gone for DELETED): the
        next resourceVersion, recorded in the history; returns a copy."""
        self.rv += 1
        o["metadata"]["resourceVersion"] = str(self.rv)
        self._record(res.key, type_, o, old)
        return copy.deepcopy(o)

    def _record(self, key, type_, obj, old):
        self.history.append((self.rv, key, type_, obj, old))
        self.cond.notify_all()

    def create(self, resource, obj):
        res = self._resource(resource)
        with self.cond:
            o = copy.deepcopy(obj)
            meta = o.setdefault("metadata", {})
            ns = meta.get("namespace") if res.namespaced else None
            if res.namespaced and not ns:
                ns = meta["namespace"] = "default"
            k = (ns or "", meta["name"])
            if k in self.store[res.key]:
                raise KeyError("%s %s/%s already exists" % (resource, ns, meta["name"]))
            self.rv += 1
            meta.setdefault("uid", str(uuid.uuid4()))
            meta["resourceVersion"] = str(self.rv)
            meta.setdefault("creationTimestamp",
                            datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
            self.store[res.key][k] = o
            self._record(res.key, "ADDED", o, None)
            return copy.deepcopy(o)

    def update(self, resource, namespace, name, fn_or_obj):
        res = self._resource(resource)
        with self.cond:
            k = (namespace or "", name)
            old = self.store[res.key][k]
            if callable(fn_or_obj):
                o = copy.deepcopy(old)
                fn_or_obj(o)
            else:
                o = copy.deepcopy(fn_or_obj)
                o.setdefault("metadata", {})
                for f in ("uid", "name", "namespace", "creationTimestamp"):
                    if f in old["metadata"]:
                        o["metadata"].setdefault(f, old["metadata"][f])
            self.store[res.key][k] = o
            return self._write(res, "MODIFIED", o, old)

    def delete(self, resource, namespace, name):
        res = self._resource(resource)
        with self.cond:
            old = self.store[res.key].pop((namespace or "", name))
            return self._write(res, "DELETED", copy.deepcopy(old), old)

    def get(self, resource, namespace, name):
        res = self._resource(resource)
        with self.lock:
            o = self.store[res.key].get((namespace or "", name))
            return copy.deepcopy(o) if o is not None else None

    def objects(self, resource):
        res = self._resource(resource)
        with self.lock:
            return [copy.deepcopy(o) for _, o in _sorted(self.store[res.key])]

    def type_meta(self, resource):
        """(apiVersion, kind) of the resource's objects."""
        res = self._resource(resource)
        return res.api_version, res.kind

    def compact(self):
        """Forget the history up to now (etcd compaction + watch cache turnover)."""
        with self.cond:
            self.floor = self.rv
            self.history = []
            self.snapshots = {}

    def snapshot(self):
        """An etcd backup: restore() brings store, counter and history back to it."""
        with self.lock:
            return (self.rv, self.floor, list(self.history), copy.deepcopy(self.store))

    def restore(self, token):
        with self.cond:
            self.rv, self.floor, history, store = token
            self.history = list(history)
            self.store = copy.deepcopy(store)
            self.snapshots = {}
            self.epoch += 1
            self.cond.notify_all()
        self._cut_all()

    # ---- faults and requests
    def inject(self, kind, on="any", resource=None, times=1, when=None, **params):
        kinds = ("status", "html", "drop", "stall", "short_watch", "raw", "split", "pack",
                 "too_old", "too_large", "expire_continue", "slow")
        if kind not in kinds:
            raise ValueError("unknown fault kind %r (one of %s)" % (kind, ", ".join(kinds)))
        if on not in ("list", "first_page", "continue", "watch", "watchlist", "discovery", "any",
                      "write"):
            raise ValueError("unknown 'on' %r" % on)
        f = Fault(kind, on, resource, times, when, **params)
        with self.lock:
            self.faults.append(f)
        return f

    def clear_faults(self):
        with self.lock:
            self.faults = []

    def _take_fault(self, req):
        with self.lock:
            for f in self.faults:
                if f.matches(req):
                    if f.times is not None:
                        f.times -= 1
                    f.hits.append(req)
                    req.fault = f
                    return f
        return None

    def requests_for(self, kind=None, resource=None):
        with self.lock:
            return [r for r in self.requests
                    if (kind is None or r.kind == kind) and (resource is None or r.resource == resource)]

    def wait_for_request(self, pred, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                for r in self.requests:
                    if pred(r):
                        return r
            time.sleep(0.05)
        raise TimeoutError("no request matched within %ss; got %r" % (timeout, self.requests[-20:]))


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake = None  # set by FakeAPI.start
    server_version = "fakeapi"
    sys_version = ""

    def log_message(self, fmt, *args):
        pass

    def setup(self):
        super().setup()
        with self.fake.lock:
            self.fake._conns.add(self.connection)

    def finish(self):
        try:
            super().finish()
        except OSError:
            pass
        with self.fake.lock:
            self.fake._conns.discard(self.connection)

    def handle_one_request(self):
        try:
            super().handle_one_request()
        except (Cut, ConnectionError, ssl.SSLError, OSError):
            self.close_connection = True

    # ---- output helpers
    def _send(self, code, body, ctype="application/json", headers=None):
        self.req.status = code
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _status(self, code, reason, message, details=None, metadata=None, headers=None):
        self._send(code, dumps(status_body(code, reason, message, details, metadata)),
                   headers=headers)

    def _cut(self):
        try:
            self.wfile.flush()
        except OSError:
            pass
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.close_connection = True
        raise Cut()

    def _start_stream(self, status=200, headers=()):
        """The head of a chunked watch stream."""
        self.req.status = status
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _chunk(self, data):
        if data:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _client_gone(self):
        try:
            r, _, _ = select.select([self.connection], [], [], 0)
            if r:
                # the raw socket (under TLS too): EOF means the client left
                return socket.socket.recv(self.connection, 1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True
        return False

    def _stall(self):
        """Keeps the socket open and silent until the client leaves or the fake stops."""
        epoch = self.fake.epoch
        while not self.fake.stopping and self.fake.epoch == epoch:
            if self._client_gone():
                break
            time.sleep(0.1)
        self._cut()

    # ---- dispatch
    def _begin(self):
        """Records the request (self.req); cuts it while the server is down.
        Returns its path without a trailing slash."""
        fake = self.fake
        req = self.req = Request("GET", self.path)
        req.headers = list(self.headers.items())  # (name, value), repeats kept
        self._fault_spent = False
        with fake.lock:
            fake.requests.append(req)
        if fake.down:
            self._cut()
        return req.path.rstrip("/") or "/"

    def do_GET(self):
        fake = self.fake
        path = self._begin()
        req = self.req
        if path in fake.discovery:
            req.kind = "discovery"
            f = fake._take_fault(req)
            if f:
                return self._simple_fault(f)
            return self._send(200, dumps(fake.discovery[path]))
        res, ns = self._parse_collection(path)
        if res is None:
            return self._send(404, dumps(status_body(404, "NotFound",
                                                     "the server could not find the requested resource",
                                                     details={})))
        req.resource, req.namespace = res.key, ns
        req.kind = "watch" if req.query.get("watch") in ("true", "1") else "list"
        if req.kind == "watch" and req.query.get("sendInitialEvents") == "true":
            req.kind = "watchlist"
        f = fake._take_fault(req)
        if f and f.kind in ("status", "html"):
            return self._simple_fault(f)
        try:
            lsel = parse_label_selector(req.query.get("labelSelector"))
            fsel = parse_field_selector(req.query.get("fieldSelector"))
        except LabelSelectorError as e:
            return self._status(400, "BadRequest", str(e))

        def match(o):
            meta = o.get("metadata") or {}
            return ((ns is None or meta.get("namespace") == ns)
                    and labels_match(lsel, o) and fields_match(fsel, o))
        if req.kind in ("watch", "watchlist"):
            if "watch" not in res.verbs:
                return self._status(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
            return self._watch(res, match, f)
        if "list" not in res.verbs:
            return self._status(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        return self._list(res, match, f)

    def _simple_fault(self, f):
        p = f.params
        if f.kind == "html":
            code = p.get("code", 502)
            body = ("<html>\r\n<head><title>%d Bad Gateway</title></head>\r\n<body>\r\n"
                    "<center><h1>%d Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n"
                    "</body>\r\n</html>\r\n" % (code, code)).encode()
            return self._send(code, body, ctype="text/html")
        code = p["code"]
        reasons = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
                   409: "Conflict", 410: "Expired", 429: "TooManyRequests",
                   500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}
        reason = p.get("reason") or reasons.get(code, "Unknown")
        message = p.get("message") or {
            403: 'pods is forbidden: User "system:serviceaccount:default:kwatch" cannot list '
                 'resource "pods" in API group "" at the cluster scope',
            429: "Too many requests, please try again later.",
            500: "Internal error occurred: fake",
            503: "The server is currently unable to handle the request"}.get(code, "fault %d" % code)
        details, headers = p.get("details"), {}
        if p.get("retry_after") is not None:
            headers["Retry-After"] = str(p["retry_after"])
            details = {"retryAfterSeconds": int(p["retry_after"])}
        return self._status(code, reason, message, details=details, headers=headers)

    def _parse_collection(self, path):
        """The served resource and namespace of a collection path (collection_path)."""
        key, version, ns = collection_path(path)
        res = self.fake.resources.get(key)
        if res is None or res.version != version or (ns is not None and not res.namespaced):
            return None, None
        return res, ns

    # ---- LIST
    def _list(self, res, match, f):
        fake, q = self.fake, self.req.query
        cont = q.get("continue")
        rv = q.get("resourceVersion")
        limit = int(q.get("limit") or 0)
        if cont and (rv or q.get("resourceVersionMatch")):
            return self._status(400, "BadRequest",
                                "specifying resource version is not allowed when using continue")
        if f and f.kind == "too_large":
            return self._too_large(rv or fake.resource_version)
        with fake.lock:
            cur = fake.rv
            if cont:
                if f and f.kind == "expire_continue":
                    return self._expired_continue(cont, f.params.get("inconsistent", True))
                try:
                    tok = json.loads(base64.urlsafe_b64decode(cont + "=" * (-len(cont) % 4)))
                    snap_rv, start = int(tok["rv"]), tok["start"]
                except (ValueError, KeyError, TypeError):
                    return self._status(400, "BadRequest", "continue key is not valid: bad token")
                if snap_rv == -1:     # an inconsistent token: the current state
                    fake.inconsistent_continue_used.append(self.req)
                    snap_rv = cur
                    items = _sorted(fake.store[res.key])
                else:
                    if snap_rv not in fake.snapshots or res.key not in fake.snapshots[snap_rv]:
                        return self._expired_continue(cont, True)
                    items = fake.snapshots[snap_rv][res.key]
                items = [(k, o) for k, o in items if _skey(k) >= start]
            else:
                if rv not in (None, "", "0"):
                    try:
                        want = int(rv)
                    except ValueError:
                        return self._status(400, "BadRequest", "invalid resource version: %s" % rv)
                    if want > cur:
                        return self._too_large(rv)
                    match_ = q.get("resourceVersionMatch")
                    if match_ == "Exact" and want < fake.floor:
                        return self._status(410, "Expired",
                                            "The resourceVersion for the provided list is too old.")
                if rv == "0" and fake.watch_cache:
                    limit = 0          # served from the watch cache: limit ignored (PROTOCOL 5)
                snap_rv = cur
                items = _sorted(fake.store[res.key])
                if limit:
                    fake.snapshots.setdefault(cur, {})[res.key] = items
            items = [(k, o) for k, o in items if match(o)]
            page, more = (items[:limit], len(items) > limit) if limit else (items, False)
            meta = {"resourceVersion": str(snap_rv)}
            if more:
                last = _skey(page[-1][0]) if page else ""
                meta["continue"] = base64.urlsafe_b64encode(json.dumps(
                    {"v": "meta.k8s.io/v1", "rv": snap_rv, "start": last + "\x00"},
                    separators=(",", ":")).encode()).decode().rstrip("=")
                meta["remainingItemCount"] = len(items) - len(page)
            body = {"kind": res.kind + "List", "apiVersion": res.api_version, "metadata": meta,
                    "items": [o for _, o in page]}
        self._send_body(f, 200, dumps(body))

    def _send_body(self, f, code, data, ctype="application/json", headers=None):
        """A LIST answer under fault f: "raw" replaces the body; "split" (on
        a 200) sends it chunked in pieces; "drop" and "stall" (on a 200) send
        half of it, then cut or go silent."""
        if f and f.kind == "raw":
            data = f.params["data"]
        if f and f.kind == "split" and code == 200:
            self._start_stream(200)
            n = max(1, f.params.get("chunk_bytes", 1))
            for i in range(0, len(data), n):
                self._chunk(data[i:i + n])
            self.wfile.write(b"0\r\n\r\n")
            return
        if f and f.kind in ("drop", "stall") and code == 200:
            self.req.status = 200
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[:len(data) // 2])
            if f.kind == "stall":
                self._stall()
            self._cut()
        self._send(code, data, ctype=ctype, headers=headers)

    def _expired_continue(self, cont, inconsistent):
        meta = {}
        if inconsistent:
            try:
                tok = json.loads(base64.urlsafe_b64decode(cont + "=" * (-len(cont) % 4)))
                tok["rv"] = -1
            except (ValueError, TypeError):
                tok = {"v": "meta.k8s.io/v1", "rv": -1, "start": ""}
            meta["continue"] = base64.urlsafe_b64encode(json.dumps(
                tok, separators=(",", ":")).encode()).decode().rstrip("=")
        # apiserver pkg/storage/etcd3/errors.go interpretListError
        return self._status(
            410, "Expired",
            "The provided continue parameter is too old to display a consistent list result. "
            "You can start a new list without the continue parameter, or use the continue token "
            "in this response to retrieve the remainder of the results. Continuing with the "
            "provided token results in an inconsistent list - objects that were created, "
            "modified, or deleted between the time the first chunk was returned and now may "
            "show up in the list.", metadata=meta)

    def _too_large(self, rv):
        # apiserver pkg/storage/errors.go NewTooLargeResourceVersionError
        return self._status(
            504, "Timeout", "Too large resource version: %s, current: %s" % (rv, self.fake.rv),
            details={"causes": [{"reason": "ResourceVersionTooLarge",
                                 "message": "Too large resource version"}],
                     "retryAfterSeconds": 1})

    # ---- WATCH
    def _watch(self, res, match, f):
        fake, q = self.fake, self.req.query
        rv = q.get("resourceVersion")
        try:
            timeout = float(q.get("timeoutSeconds") or 1800)
        except ValueError:
            return self._status(400, "BadRequest", "invalid timeoutSeconds")
        bookmarks = q.get("allowWatchBookmarks") == "true"
        streamed = False              # a served streaming list (watch_list = "serve")
        if q.get("resourceVersionMatch") or q.get("sendInitialEvents"):
            invalid = None
            if fake.watch_list == "reject":
                # 1.20 apimachinery internalversion/validation ValidateListOptions
                invalid = "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch"
            elif fake.watch_list == "serve":
                # 1.27+ ValidateListOptions: sendInitialEvents needs NotOlderThan and bookmarks
                if q.get("sendInitialEvents") == "true":
                    if q.get("resourceVersionMatch") != "NotOlderThan":
                        invalid = ("resourceVersionMatch: Forbidden: sendInitialEvents requires "
                                   "setting resourceVersionMatch to NotOlderThan")
                    elif not bookmarks:
                        invalid = ("allowWatchBookmarks: Forbidden: sendInitialEvents requires "
                                   "setting allowWatchBookmarks to true")
                    streamed = True
                else:
                    invalid = "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch"
            if invalid:
                return self._status(422, "Invalid", 'ListOptions.meta.k8s.io "" is invalid: ' + invalid,
                                    details={"group": "meta.k8s.io", "kind": "ListOptions",
                                             "causes": [{"reason": "FieldValueForbidden",
                                                         "message": invalid.split(": ", 1)[1]}]})
        if f and f.kind == "too_large":
            return self._too_large(rv)
        if f and f.kind == "too_old" and f.params.get("http"):
            return self._status(410, "Expired", "too old resource version: %s (%s)" % (rv, fake.rv))
        with fake.lock:
            epoch = fake.epoch
            initial = []
            if streamed:
                # the state at the newest RV (NotOlderThan any RV asked for)
                if rv not in (None, ""):
                    try:
                        want = int(rv)
                    except ValueError:
                        return self._status(400, "BadRequest", "invalid resource version: %s" % rv)
                    if want > fake.rv:
                        return self._too_large(rv)
                since = fake.rv
                for _, o in _sorted(fake.store[res.key]):
                    if match(o):
                        initial.append(("ADDED", o))
                error = None
            elif rv in (None, "", "0"):
                # a watch from "any": synthetic ADDED for what exists (the watch cache)
                since = fake.rv
                for _, o in _sorted(fake.store[res.key]):
                    if match(o):
                        initial.append(("ADDED", o))
                error = None
            else:
                try:
                    since = int(rv)
                except ValueError:
                    return self._status(400, "BadRequest", "invalid resource version: %s" % rv)
                error = None
                if f and f.kind == "too_old":
                    error = status_body(410, "Expired", "too old resource version: %s (%s)"
                                        % (rv, fake.floor))
                elif since < fake.floor:
                    # apiserver pkg/storage/cacher/watch_cache.go: too old
                    error = status_body(410, "Expired", "too old resource version: %d (%d)"
                                        % (since, fake.floor))
                elif since > fake.rv and fake.too_large_watch != "silent":
                    if fake.too_large_watch == "http":
                        return self._too_large(rv)
                    error = status_body(504, "Timeout", "Too large resource version: %s, current: %s"
                                        % (rv, fake.rv),
                                        details={"causes": [{"reason": "ResourceVersionTooLarge",
                                                             "message": "Too large resource version"}],
                                                 "retryAfterSeconds": 1})
        self._start_stream()
        if f and f.kind == "short_watch":
            return self._end()
        if streamed and f and f.kind == "too_old" and f.params.get("after_events") is not None:
            initial = initial[:f.params["after_events"]]
            error = status_body(410, "Expired", "too old resource version: %s (%s)" % (rv, fake.floor))
        if error is not None and not initial:   # else after the initial events, below
            self._chunk(dumps({"type": "ERROR", "object": error}) + b"\n")
            return self._end()

        def event(type_, o):
            if fake.event_object_first:
                return dumps({"object": o, "extra": {"note": ["ignored"]}, "type": type_}) + b"\n"
            return dumps({"type": type_, "object": o}) + b"\n"

        def wire(type_, o):
            o = dict(o)
            o["kind"], o["apiVersion"] = res.kind, res.api_version
            o = {k: o[k] for k in ["kind", "apiVersion"] + [k for k in o if k not in ("kind", "apiVersion")]}
            return event(type_, o)

        pending = [wire(t, o) for t, o in initial]
        if error is not None:
            pending.append(dumps({"type": "ERROR", "object": error}) + b"\n")
            self._write_events(pending, f, final=True)
            return self._end()
        if streamed:
            # apiserver pkg/storage/cacher/cache_watcher.go: the bookmark
            # that ends the initial events (meta/v1 InitialEventsAnnotationKey)
            pending.append(event("BOOKMARK", {
                "kind": res.kind, "apiVersion": res.api_version,
                "metadata": {"resourceVersion": str(since),
                             "annotations": {"k8s.io/initial-events-end": "true"}}}))
        deadline = time.monotonic() + timeout
        next_bookmark = time.monotonic() + (fake.bookmark_interval or 0)
        pos = since
        while True:
            pending = self._write_events(pending, f)
            with fake.cond:
                now = time.monotonic()
                if fake.stopping or fake.epoch != epoch or fake.down:
                    self._cut()
                new = [h for h in fake.history if h[0] > pos and h[1] == res.key]
                pos = max(pos, fake.rv)
                if not new:
                    if now >= deadline:
                        break
                    wait = deadline - now
                    if bookmarks and fake.bookmark_interval:
                        if now >= next_bookmark:
                            next_bookmark = now + fake.bookmark_interval
                            pending.append(event("BOOKMARK", {
                                "kind": res.kind, "apiVersion": res.api_version,
                                "metadata": {"resourceVersion": str(fake.rv)}}))
                            continue
                        wait = min(wait, next_bookmark - now)
                    fake.cond.wait(min(wait, 0.2))
                    if self._client_gone():
                        self._cut()
                    continue
                for hrv, _, type_, o, old in new:
                    now_in = match(o) if type_ != "DELETED" else False
                    was_in = old is not None and match(old)
                    if type_ == "DELETED":
                        if was_in:
                            pending.append(wire("DELETED", o))
                    elif now_in and was_in:
                        pending.append(wire("MODIFIED", o))
                    elif now_in:
                        pending.append(wire("ADDED", o))
                    elif was_in:
                        # left the selector: the old object with the new RV (cache_watcher.go)
                        gone = copy.deepcopy(old)
                        gone["metadata"]["resourceVersion"] = str(hrv)
                        pending.append(wire("DELETED", gone))
        self._write_events(pending, f, final=True)
        self._end()

    def _write_events(self, pending, f, final=False):
        """Writes the pending events (newline-terminated JSON), applying the
        watch's fault; returns the events kept back (pack waiting for more)."""
        req = self.req
        kind = f.kind if f and not getattr(self, "_fault_spent", False) else None
        p = f.params if f else {}
        if kind == "pack":
            n = p.get("events") or len(pending)
            while pending and (len(pending) >= n or final):
                self._chunk(b"".join(pending[:n]))
                req.events += len(pending[:n])
                pending = pending[n:]
            return pending
        after = p.get("after_events", 0)
        eager = kind in ("raw", "stall") or (kind == "drop" and not p.get("mid_event", True))
        while True:
            if eager and req.events >= after:
                kind = self._fire(f, kind)
                eager = False
            if not pending:
                break
            ev = pending.pop(0)
            if kind == "drop" and req.events >= after:
                self._chunk(ev[:max(1, len(ev) // 2)])     # half an event, then cut
                self._cut()
            if kind == "split":
                n = max(1, p.get("chunk_bytes", 1))
                for i in range(0, len(ev), n):
                    self._chunk(ev[i:i + n])
            else:
                self._chunk(ev)
            req.events += 1
        if final and kind == "drop":
            self._cut()           # mid_event but no event came: cut at the end
        return pending

    def _fire(self, f, kind):
        """Applies a drop/stall/raw fault now; returns the kind still in force."""
        if kind == "drop":
            self._cut()
        if kind == "stall":
            self._stall()
        self._chunk(f.params["data"])
        self._fault_spent = True
        if f.params.get("close", True):
            self._end()
            self._cut()
        return None

    def _end(self):
        try:
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass


# ---------------------------------------------------------------- CLI

def main(argv=None):
    ap = argparse.ArgumentParser(description="fake Kubernetes API server for kwatch tests")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--pods", type=int, default=3, help="pods to create in namespace 'default'")
    ap.add_argument("--tls", action="store_true")
    ap.add_argument("--bookmarks", type=float, default=None, help="bookmark interval (s)")
    a = ap.parse_args(argv)
    api = FakeAPI(a.host, a.port, tls=a.tls)
    api.bookmark_interval = a.bookmarks
    api.start()
    for i in range(a.pods):
        api.create("pods", {"metadata": {"name": "pod-%d" % i, "namespace": "default",
                                         "labels": {"app": "demo"}},
                            "spec": {"containers": [{"name": "c", "image": "pause"}]}})
    print(api.url + ((" ca=%s" % api.ca_file) if api.tls else ""), flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        api.stop()


if __name__ == "__main__":
    sys.exit(main())
