"""A fault-injecting HTTPS proxy in front of the real kube-apiserver, for
network faults the real server never makes on its own (issue 3): every open
connection cut at once, every open connection frozen (a half-open
connection: nothing more arrives, nothing is closed), and the next requests
answered with 429 + Retry-After, 503 or a proxy's HTML error page.

It terminates TLS with the test cluster's own serving certificate (so
clients keep verifying against the cluster CA), offers only HTTP/1.1 (ALPN),
reads one request head per client connection, and either answers it itself
(an injected error) or forwards it upstream over TLS with
`Connection: close` and pipes the bytes both ways until either side closes.
One request per connection keeps it a byte pipe with no HTTP parsing of
responses (watch streams and chunked LIST bodies pass untouched).  Request
bodies beyond the first read are not forwarded: kwatch sends only GETs.

    p = FaultProxy("https://127.0.0.1:6443", pki_dir).start()   # p.url
    p.cut()                 # close every open connection now
    p.freeze(seconds)       # open connections go silent (kept open) for s
    p.fail_next(n, kind)    # kind: "429", "503", "html"
    p.stop()

cert_file/key_file present another serving certificate instead (the TLS
failure tests of issue 8: an expired one, one for another host name, one
from a CA the client does not trust); the upstream side still verifies the
real apiserver against the cluster CA.
"""
import socket
import ssl
import threading
import time
import urllib.parse
from collections import Counter

HTML_502 = (b"<html><head><title>502 Bad Gateway</title></head><body>"
            b"<center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>\n")


class FaultProxy:
    def __init__(self, upstream, pki_dir, host="127.0.0.1", cert_file=None, key_file=None):
        u = urllib.parse.urlsplit(upstream)
        self.up_host, self.up_port = u.hostname, u.port
        self.server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.server_ctx.load_cert_chain(cert_file or "%s/apiserver.crt" % pki_dir,
                                        key_file or "%s/apiserver.key" % pki_dir)
        self.server_ctx.set_alpn_protocols(["http/1.1"])
        self.client_ctx = ssl.create_default_context(cafile="%s/ca.crt" % pki_dir)
        self.client_ctx.set_alpn_protocols(["http/1.1"])
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind((host, 0))
        self.lsock.listen(64)
        self.url = "https://%s:%d" % (host, self.lsock.getsockname()[1])
        self.lock = threading.Lock()
        self.conns = set()  # (client, upstream) pairs being piped
        self.frozen_until = {}  # pair -> monotonic time
        self.failures = []  # kinds for the next requests
        self.stats = Counter()
        self.stopping = False

    def start(self):
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def stop(self):
        self.stopping = True
        try:
            self.lsock.close()
        except OSError:
            pass
        self.cut()

    # ---- faults
    def cut(self):
        """Closes every open connection, both sides, now."""
        with self.lock:
            pairs = list(self.conns)
            self.conns.clear()
        for pair in pairs:
            for s in pair:
                _close(s)
        self.stats["cut"] += len(pairs)
        return len(pairs)

    def freeze(self, seconds):
        """The connections open now stop passing bytes for `seconds` (then
        they are cut: a half-open connection never recovers)."""
        until = time.monotonic() + seconds
        with self.lock:
            for pair in self.conns:
                self.frozen_until[pair] = until
            n = len(self.conns)
        self.stats["frozen"] += n
        return n

    def fail_next(self, n, kind):
        with self.lock:
            self.failures.extend([kind] * n)

    # ---- plumbing
    def _accept(self):
        while not self.stopping:
            try:
                raw, _ = self.lsock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw):
        try:
            raw.settimeout(30)
            client = self.server_ctx.wrap_socket(raw, server_side=True)
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = client.recv(65536)
                if not chunk:
                    _close(client)
                    return
                head += chunk
                if len(head) > 1 << 20:
                    _close(client)
                    return
        except (OSError, ssl.SSLError):
            _close(raw)
            return
        with self.lock:
            kind = self.failures.pop(0) if self.failures else None
        if kind:
            self.stats["failed_" + kind] += 1
            self._answer(client, kind)
            return
        head_end = head.index(b"\r\n\r\n")
        lines = head[:head_end].split(b"\r\n")
        lines = [ln for ln in lines if not ln.lower().startswith((b"connection:", b"keep-alive:"))]
        lines.append(b"Connection: close")
        request = b"\r\n".join(lines) + b"\r\n\r\n" + head[head_end + 4:]
        try:
            up = self.client_ctx.wrap_socket(socket.create_connection((self.up_host, self.up_port), 10),
                                             server_hostname=self.up_host)
            up.sendall(request)
        except (OSError, ssl.SSLError):
            self._answer(client, "503")
            return
        pair = (client, up)
        with self.lock:
            self.conns.add(pair)
        self.stats["forwarded"] += 1
        # kwatch sends GETs only: once the request is forwarded, bytes flow
        # upstream -> client alone (one thread per TLS socket: OpenSSL
        # objects are not for concurrent use); a client that left is
        # noticed at the next write
        client.settimeout(30)
        up.settimeout(0.2)
        self._pipe(pair, up, client)
        with self.lock:
            self.conns.discard(pair)
            self.frozen_until.pop(pair, None)
        _close(client)
        _close(up)

    def _pipe(self, pair, src, dst):
        while True:
            with self.lock:
                alive = pair in self.conns
                until = self.frozen_until.get(pair)
            if not alive or self.stopping:
                return
            if until is not None:
                if time.monotonic() < until:
                    time.sleep(0.1)
                    continue
                with self.lock:
                    self.conns.discard(pair)
                _close(src)
                _close(dst)
                return
            try:
                data = src.recv(65536)
            except socket.timeout:
                continue
            except (OSError, ssl.SSLError):
                data = b""
            if not data:
                with self.lock:
                    self.conns.discard(pair)
                return
            # a freeze that began while we read holds these bytes back too
            with self.lock:
                until = self.frozen_until.get(pair)
            if until is not None:
                continue
            try:
                dst.sendall(data)
            except (OSError, ssl.SSLError):
                with self.lock:
                    self.conns.discard(pair)
                return

    def _answer(self, client, kind):
        if kind == "429":
            body = (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                    b'"message":"too many requests, please try again later","reason":"TooManyRequests",'
                    b'"details":{"retryAfterSeconds":1},"code":429}')
            head = b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\nContent-Type: application/json\r\n"
        elif kind == "503":
            body = (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                    b'"message":"service unavailable","reason":"ServiceUnavailable","code":503}')
            head = b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        else:
            body = HTML_502
            head = b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/html\r\n"
        try:
            client.sendall(head + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
        except (OSError, ssl.SSLError):
            pass
        _close(client)


def _close(s):
    try:
        s.close()
    except Exception:
        pass
