"""A fault-injecting reverse proxy in front of a REAL Kubernetes API server.

It forwards every request (adding the upstream credentials) and can inject
on demand the same faults as the fake server (see server.py's docstring for
the fault kinds, `inject`, `requests`, `set_down`): drop, stall, split or
pack watch streams, raw bytes, 429/5xx Status answers, HTML pages, expired
continue tokens, 410 and 504 answers — so a test against the real
kube-apiserver can suffer network and proxy faults.  Clients talk plain
http to the proxy and need no credentials.

    from fakeapi.proxy import FaultProxy
    px = FaultProxy("https://127.0.0.1:6443", ca_file=ca, token=token).start()
    # CREATE SERVER s FOREIGN DATA WRAPPER kwatch OPTIONS (api_server px.url)
    px.inject("drop", on="watch", after_events=3)
    px.inject("status", on="list", code=503, times=2)
    px.stop()

The store methods of FakeAPI (create, update, compact, ...) do not apply
to a proxy; everything under "faults", "requests" and set_down does.
Watch events are forwarded one line (one event) at a time, as the API
server writes them.
"""
import http.client
import ssl
import urllib.parse

from .server import FakeAPI, _Handler, Request, Cut  # noqa: F401

HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding",
       "te", "trailer", "upgrade", "proxy-authorization", "proxy-authenticate"}


class FaultProxy(FakeAPI):
    """See the module docstring.  upstream: "https://host:port"; ca_file,
    token, client_cert/client_key: the upstream's credentials;
    insecure=True skips TLS verification."""

    def __init__(self, upstream, ca_file=None, token=None, client_cert=None, client_key=None,
                 insecure=False, host="127.0.0.1", port=0):
        super().__init__(host=host, port=port)
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

    def _handler_base(self):
        return _ProxyHandler

    def _connect(self, timeout):
        if self.upstream_https:
            return http.client.HTTPSConnection(self.upstream_host, self.upstream_port,
                                               context=self.ssl_ctx, timeout=timeout)
        return http.client.HTTPConnection(self.upstream_host, self.upstream_port, timeout=timeout)


class _ProxyHandler(_Handler):
    def do_GET(self):
        fake = self.fake
        req = self.req = Request("GET", self.path)
        self._fault_spent = False
        with fake.lock:
            fake.requests.append(req)
        if fake.down:
            self._cut()
        path = req.path.rstrip("/") or "/"
        parts = path.strip("/").split("/")
        if path in ("/api", "/apis", "/version") or (parts[0] in ("api", "apis") and
                                                      len(parts) == (2 if parts[0] == "api" else 3)):
            req.kind = "discovery"
        else:
            res, ns = self._split(parts)
            if res:
                req.resource, req.namespace = res, ns
                req.kind = "watch" if req.query.get("watch") in ("true", "1") else "list"
        f = fake._take_fault(req)
        if f and f.kind in ("status", "html"):
            return self._simple_fault(f)
        if f and f.kind == "too_large":
            return self._too_large(req.query.get("resourceVersion") or "?")
        if f and f.kind == "expire_continue" and "continue" in req.query:
            return self._expired_continue(req.query["continue"], f.params.get("inconsistent", True))
        if f and f.kind == "too_old" and req.kind == "watch":
            if f.params.get("http"):
                return self._status(410, "Expired", "too old resource version: %s (0)"
                                    % req.query.get("resourceVersion"))
            self._start_stream()
            from .server import dumps, status_body
            self._chunk(dumps({"type": "ERROR", "object": status_body(
                410, "Expired", "too old resource version: %s (0)"
                % req.query.get("resourceVersion"))}) + b"\n")
            return self._end()
        if f and f.kind == "short_watch" and req.kind == "watch":
            self._start_stream()
            return self._end()
        return self._forward(f)

    @staticmethod
    def _split(parts):
        if len(parts) >= 3 and parts[0] == "api":
            group, rest = "", parts[2:]
        elif len(parts) >= 4 and parts[0] == "apis":
            group, rest = parts[1], parts[3:]
        else:
            return None, None
        ns = None
        if len(rest) == 3 and rest[0] == "namespaces":
            ns, rest = rest[1], rest[2:]
        if len(rest) != 1:
            return None, None
        return (rest[0] if not group else "%s.%s" % (rest[0], group)), ns

    def _start_stream(self, status=200, headers=()):
        self.req.status = status
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _forward(self, f):
        fake, req = self.fake, self.req
        watching = req.kind == "watch"
        conn = fake._connect(timeout=None if watching else 60)
        headers = {"Accept": self.headers.get("Accept", "application/json"),
                   "User-Agent": self.headers.get("User-Agent", "fakeapi-proxy")}
        if fake.token:
            headers["Authorization"] = "Bearer " + fake.token
        try:
            conn.request("GET", self.path, headers=headers)
            up = conn.getresponse()
        except OSError as e:
            return self._send(502, ("upstream unreachable: %s" % e).encode(), ctype="text/plain")
        with fake.lock:
            fake._conns.add(conn.sock)
        try:
            passthrough = [(k, v) for k, v in up.getheaders() if k.lower() not in HOP
                           and k.lower() != "content-type"]
            if not watching or up.status != 200:
                body = up.read()
                if f and f.kind == "raw":
                    body = f.params["data"]
                if f and f.kind in ("drop", "stall") and up.status == 200:
                    self.req.status = 200
                    self.send_response(200)
                    self.send_header("Content-Type", up.getheader("Content-Type", "application/json"))
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body[:len(body) // 2])
                    if f.kind == "stall":
                        self._stall()
                    self._cut()
                return self._send(up.status, body,
                                  ctype=up.getheader("Content-Type", "application/json"),
                                  headers=dict(passthrough))
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
            conn.close()
