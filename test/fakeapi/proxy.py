"""The fault proxy: a reverse proxy in front of a REAL Kubernetes API server
that injects the faults a real server never makes on its own.

It forwards every request and can inject on demand
  * the same faults as the fake server (see server.py's docstring for the
    fault kinds, `inject`, `requests`, `set_down`): drop, stall, split or
    pack watch streams, raw bytes, 429/5xx Status answers, HTML pages,
    expired continue tokens, 410 and 504 answers, a LIST held for
    `seconds` before it is forwarded ("slow");
  * network faults: every open connection cut at once (`cut`), every open
    connection frozen (`freeze`: a half-open connection, nothing more
    arrives, nothing is closed until the freeze ends), and the next requests
    answered with 429 + Retry-After, 503 or a proxy's HTML page (`fail_next`).

Clients talk plain http to it by default; with `cert`/`key` (file paths) it
terminates TLS presenting that certificate (for_cluster: the test
cluster's own serving certificate, so that clients keep verifying against
the cluster CA), HTTP/1.1 only.  Upstream it speaks https with `ca_file`,
and authenticates with `token` (or client_cert/client_key) when given,
otherwise with the client's own Authorization header.

    from fakeapi.proxy import FaultProxy
    px = FaultProxy("https://127.0.0.1:6443", ca_file=ca, token=token).start()
    # CREATE SERVER s FOREIGN DATA WRAPPER kwatch OPTIONS (api_server px.url)
    px.inject("drop", on="watch", after_events=3)
    px.inject("status", on="list", code=503, times=2)
    px.stop()

    px = FaultProxy.for_cluster(server_url, pki_dir).start()  # https, px.url
    px.cut()                 # close every open connection now
    px.freeze(seconds)       # open connections go silent (kept open) for s, then are cut
    px.fail_next(n, kind)    # kind: "429", "503", "html"
    px.inject("status", on="write", code=429, retry_after=2)   # writes: PATCH, POST, PUT, DELETE
    px.stats                 # Counter: forwarded, cut, frozen, failed_<kind>

The store methods of FakeAPI (create, update, compact, ...) do not apply
to a proxy; everything under "faults", "requests" and set_down does.
Watch events are forwarded one line (one event) at a time, as the API
server writes them; other answers once complete.  Writes (PATCH, POST, PUT,
DELETE) are forwarded with their body and Content-Type; a request's `body`
(bytes) is kept, and faults "status" and "html" with on="write" answer them
("stall" leaves them unanswered until the client gives up)
instead (e.g. 429 with Retry-After, 409, 422, 503).
"""
import http.client
import os
import ssl
import threading
import time
import urllib.parse
from collections import Counter

from .server import FakeAPI, _Handler, _shutdown, collection_path, dumps, status_body

HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding",
       "te", "trailer", "upgrade", "proxy-authorization", "proxy-authenticate"}

# fail_next kinds -> FakeAPI faults
FAILURES = {"429": ("status", {"code": 429, "retry_after": 1}),
            "503": ("status", {"code": 503}),
            "html": ("html", {"code": 502})}


class FaultProxy(FakeAPI):
    """See the module docstring.  upstream: "https://host:port"; ca_file,
    token, client_cert/client_key: the upstream's CA and credentials;
    insecure=True skips TLS verification; cert/key: the certificate the
    proxy presents to its clients (plain http without them)."""

    def __init__(self, upstream, ca_file=None, token=None, client_cert=None, client_key=None,
                 insecure=False, host="127.0.0.1", port=0, cert=None, key=None):
        super().__init__(host=host, port=port, cert=cert, key=key)
        u = urllib.parse.urlsplit(upstream)
        self.upstream_https = u.scheme == "https"
        self.upstream_host = u.hostname
        self.upstream_port = u.port or (443 if self.upstream_https else 80)
        self.token = token
        self.ssl_ctx = None
        if self.upstream_https:
            self.ssl_ctx = ssl.create_default_context(cafile=ca_file)
            if insecure:
                self.ssl_ctx.check_hostname = False
                self.ssl_ctx.verify_mode = ssl.CERT_NONE
            if client_cert:
                self.ssl_ctx.load_cert_chain(client_cert, client_key)
        self.handlers = set()  # the client connections open now
        self._counts = Counter()
        self._failures = []  # (kind, Fault) of fail_next

    @classmethod
    def for_cluster(cls, upstream, pki_dir, cert=None, key=None, **kw):
        """An https proxy in front of the test cluster (test/k8s/cluster.sh's
        pki_dir): it verifies the API server against the cluster CA and
        presents cert/key, by default the API server's own certificate."""
        return cls(upstream, ca_file=os.path.join(pki_dir, "ca.crt"),
                   cert=cert or os.path.join(pki_dir, "apiserver.crt"),
                   key=key or os.path.join(pki_dir, "apiserver.key"), **kw)

    def _handler_base(self):
        return _ProxyHandler

    def _connect(self, timeout):
        if self.upstream_https:
            return http.client.HTTPSConnection(self.upstream_host, self.upstream_port,
                                               context=self.ssl_ctx, timeout=timeout)
        return http.client.HTTPConnection(self.upstream_host, self.upstream_port, timeout=timeout)

    # ---- network faults
    def cut(self):
        """Closes every open connection, both sides, now; returns how many."""
        with self.cond:
            n = len(self.handlers)
            self.epoch += 1  # a stalled answer ends too
            self.cond.notify_all()
        self._cut_all()
        self._counts["cut"] += n
        return n

    def freeze(self, seconds):
        """The connections open now stop passing bytes for `seconds`, then
        are cut (a half-open connection never recovers); returns how many."""
        until = time.monotonic() + seconds
        with self.lock:
            frozen = list(self.handlers)
            for h in frozen:
                h.frozen_until = until
        self._counts["frozen"] += len(frozen)
        t = threading.Timer(seconds, lambda: [h.cut_now() for h in frozen])
        t.daemon = True
        t.start()
        return len(frozen)

    def fail_next(self, n, kind):
        """The next n LISTs or WATCHes get 429 (Retry-After: 1), 503 or a
        proxy's HTML error page (kind "429", "503", "html")."""
        fault, params = FAILURES[kind]
        self._failures.append((kind, self.inject(fault, on="any", times=n, **params)))

    @property
    def stats(self):
        c = Counter(self._counts)
        for kind, f in self._failures:
            c["failed_" + kind] += len(f.hits)
        return c


class _ProxyHandler(_Handler):
    frozen_until = None
    upstream = None

    def setup(self):
        super().setup()
        with self.fake.lock:
            self.fake.handlers.add(self)

    def finish(self):
        with self.fake.lock:
            self.fake.handlers.discard(self)
        super().finish()

    def cut_now(self):
        """Shuts both sides of this connection down (from any thread)."""
        for s in (self.connection, self.upstream):
            if s is not None:
                _shutdown(s)

    def _hold(self):
        """While frozen nothing is written; a freeze that ended cuts."""
        while self.frozen_until is not None:
            if self.fake.stopping or time.monotonic() >= self.frozen_until:
                self._cut()
            time.sleep(0.1)

    def _chunk(self, data):
        self._hold()
        super()._chunk(data)

    def _send(self, code, body, ctype="application/json", headers=None):
        self._hold()
        super()._send(code, body, ctype, headers)

    def _end(self):
        self._hold()
        super()._end()

    def do_GET(self):
        fake = self.fake
        path = self._begin()
        req = self.req
        parts = path.strip("/").split("/")
        if path in ("/api", "/apis", "/version") or (
                parts[0] in ("api", "apis") and len(parts) == (2 if parts[0] == "api" else 3)):
            req.kind = "discovery"
        else:
            key, _, ns = collection_path(path)
            if key:
                req.resource, req.namespace = key, ns
                req.kind = "watch" if req.query.get("watch") in ("true", "1") else "list"
        f = fake._take_fault(req)
        if f and f.kind in ("status", "html"):
            return self._simple_fault(f)
        if f and f.kind == "too_large":
            return self._too_large(req.query.get("resourceVersion") or "?")
        if f and f.kind == "expire_continue" and "continue" in req.query:
            return self._expired_continue(req.query["continue"], f.params.get("inconsistent", True))
        if f and f.kind == "too_old" and req.kind == "watch":
            message = "too old resource version: %s (0)" % req.query.get("resourceVersion")
            if f.params.get("http"):
                return self._status(410, "Expired", message)
            self._start_stream()
            self._chunk(dumps({"type": "ERROR", "object": status_body(410, "Expired", message)})
                        + b"\n")
            return self._end()
        if f and f.kind == "short_watch" and req.kind == "watch":
            self._start_stream()
            return self._end()
        if f and f.kind == "slow":
            held_until = time.monotonic() + f.params.get("seconds", 30)
            while time.monotonic() < held_until and not fake.stopping:
                time.sleep(0.1)
        return self._forward(f)

    def _write(self, method):
        """PATCH/POST/PUT/DELETE: recorded (kind "write", its body kept),
        answered by a due write fault, else forwarded."""
        path = self._begin()
        req = self.req
        req.method = method
        req.kind = "write"
        n = int(self.headers.get("Content-Length") or 0)
        req.body = self.rfile.read(n) if n else b""
        parts = path.strip("/").split("/")
        key, _, ns = collection_path("/".join([""] + parts[:-1]))
        if not key:
            key, _, ns = collection_path(path)
        req.resource, req.namespace = key, ns
        f = self.fake._take_fault(req)
        if f and f.kind in ("status", "html"):
            return self._simple_fault(f)
        if f and f.kind == "stall":
            return self._stall()            # a server that never answers the write
        return self._forward(None, method, req.body)

    def do_PATCH(self):
        self._write("PATCH")

    def do_POST(self):
        self._write("POST")

    def do_PUT(self):
        self._write("PUT")

    def do_DELETE(self):
        self._write("DELETE")

    def _forward(self, f, method="GET", body=None):
        fake, req = self.fake, self.req
        watching = req.kind == "watch"
        conn = fake._connect(timeout=None if watching else 60)
        headers = {"Accept": self.headers.get("Accept", "application/json"),
                   "User-Agent": self.headers.get("User-Agent", "fakeapi-proxy")}
        if fake.token:
            headers["Authorization"] = "Bearer " + fake.token
        elif self.headers.get("Authorization"):
            headers["Authorization"] = self.headers["Authorization"]
        if body is not None and self.headers.get("Content-Type"):
            headers["Content-Type"] = self.headers["Content-Type"]
        try:
            conn.request(method, self.path, body=body, headers=headers)
            up = conn.getresponse()
        except OSError as e:
            return self._send(502, ("upstream unreachable: %s" % e).encode(), ctype="text/plain")
        self.upstream = conn.sock
        with fake.lock:
            fake._conns.add(conn.sock)
            fake._counts["forwarded"] += 1
        try:
            passthrough = [(k, v) for k, v in up.getheaders() if k.lower() not in HOP
                           and k.lower() != "content-type"]
            if not watching or up.status != 200:
                body = up.read()
                return self._send_body(f, up.status, body,
                                       ctype=up.getheader("Content-Type", "application/json"),
                                       headers=dict(passthrough))
            self._hold()
            self._start_stream(200, passthrough)
            pending = []
            pending = self._write_events(pending, f)     # faults due before any event
            while True:
                line = up.readline()
                if not line:
                    break
                if fake.down or fake.stopping:
                    self._cut()
                pending.append(line if line.endswith(b"\n") else line + b"\n")
                pending = self._write_events(pending, f)
            self._write_events(pending, f, final=True)
            self._end()
        finally:
            with fake.lock:
                fake._conns.discard(conn.sock)
            self.upstream = None
            conn.close()
