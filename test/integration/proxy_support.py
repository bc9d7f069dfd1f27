"""Forward proxies on loopback for the proxy-url tests (issue 8), python3
stdlib, one thread per connection.

    p = ConnectProxy().start()                      # http://127.0.0.1:N
    p = ConnectProxy(auth="user:secret").start()    # requires Proxy-Authorization: Basic
    p = ConnectProxy(refuse=True).start()           # answers every CONNECT 403
    p = ConnectProxy(tls=(cert_file, key_file)).start()  # https://127.0.0.1:N (TLS to the proxy)
    p = Socks5Proxy().start()                       # socks5://127.0.0.1:N (no auth, CONNECT)
    p.url; p.targets  # ["127.0.0.1:6443", ...]: each tunnel asked for, refused ones included
    p.requests        # one dict per request: target, accepted, status, proxy_authorization
    p.stop()

ConnectProxy speaks HTTP CONNECT only (what libcurl and Go use for https
targets); any other method gets 405.  After "200 Connection established"
it pipes bytes both ways until either side closes.  With auth, a CONNECT
without the right Basic credentials gets 407 with
`Proxy-Authenticate: Basic realm="kwatch-test"`.  Socks5Proxy accepts
method 0 (no authentication) and command CONNECT with IPv4, IPv6 or domain
addresses (socks5h), as RFC 1928 says; refuse=True answers 0x02 (not
allowed by ruleset).
"""
import base64
import select
import socket
import ssl
import struct
import threading


class _Proxy:
    scheme = None

    def __init__(self, host="127.0.0.1", refuse=False):
        self.refuse = refuse
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind((host, 0))
        self.lsock.listen(64)
        self.host, self.port = host, self.lsock.getsockname()[1]
        self.url = "%s://%s:%d" % (self.scheme, host, self.port)
        self.lock = threading.Lock()
        self.targets = []
        self.requests = []
        self.open = set()
        self.stopping = False

    def start(self):
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def stop(self):
        self.stopping = True
        _close(self.lsock)
        with self.lock:
            socks = list(self.open)
            self.open.clear()
        for s in socks:
            _close(s)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def _accept(self):
        while not self.stopping:
            try:
                raw, _ = self.lsock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve_guarded, args=(raw,), daemon=True).start()

    def _serve_guarded(self, raw):
        with self.lock:
            self.open.add(raw)
        try:
            self._serve(raw)
        except (OSError, ssl.SSLError, ValueError, struct.error):
            pass
        finally:
            with self.lock:
                self.open.discard(raw)
            _close(raw)

    def _record(self, target, accepted, **kw):
        with self.lock:
            self.targets.append(target)
            self.requests.append(dict(target=target, accepted=accepted, **kw))

    def _connect(self, host, port):
        up = socket.create_connection((host, port), 10)
        with self.lock:
            self.open.add(up)
        return up

    def _pipe(self, a, b):
        """Bytes both ways until either side closes (one thread: an SSL socket
        is not for concurrent use; its buffered bytes count as readable)."""
        a.settimeout(None)
        b.settimeout(None)
        try:
            while not self.stopping:
                ready = [s for s in (a, b) if isinstance(s, ssl.SSLSocket) and s.pending()]
                if not ready:
                    ready, _, _ = select.select([a, b], [], [], 1.0)
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    (b if s is a else a).sendall(data)
        except (OSError, ssl.SSLError):
            return
        finally:
            with self.lock:
                self.open.discard(b)
            _close(b)


class ConnectProxy(_Proxy):
    def __init__(self, host="127.0.0.1", auth=None, refuse=False, tls=None):
        self.scheme = "https" if tls else "http"
        super().__init__(host, refuse)
        self.auth = auth
        self.ctx = None
        if tls:
            self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.ctx.load_cert_chain(*tls)

    def _serve(self, raw):
        raw.settimeout(30)
        if not self.ctx:
            return self._serve_conn(raw)
        # the SSL socket takes over raw's descriptor: it is the one to close
        c = self.ctx.wrap_socket(raw, server_side=True)
        with self.lock:
            self.open.add(c)
        try:
            self._serve_conn(c)
        finally:
            with self.lock:
                self.open.discard(c)
            _close(c)

    def _serve_conn(self, c):
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = c.recv(65536)
            if not chunk or len(head) > 1 << 16:
                return
            head += chunk
        lines = head.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
        method, target = (lines[0].split(" ") + ["", ""])[:2]
        hdrs = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            hdrs[k.strip().lower()] = v.strip()
        pa = hdrs.get("proxy-authorization")
        if method != "CONNECT":
            self._record(target, False, status=405, method=method, proxy_authorization=pa)
            return self._answer(c, "405 Method Not Allowed")
        if self.refuse:
            self._record(target, False, status=403, method=method, proxy_authorization=pa)
            return self._answer(c, "403 Forbidden")
        if self.auth:
            want = "Basic " + base64.b64encode(self.auth.encode()).decode()
            if pa != want:
                self._record(target, False, status=407, method=method, proxy_authorization=pa)
                return self._answer(c, "407 Proxy Authentication Required",
                                    'Proxy-Authenticate: Basic realm="kwatch-test"\r\n')
        host, _, port = target.rpartition(":")
        try:
            up = self._connect(host.strip("[]"), int(port))
        except (OSError, ValueError):
            self._record(target, False, status=502, method=method, proxy_authorization=pa)
            return self._answer(c, "502 Bad Gateway")
        self._record(target, True, status=200, method=method, proxy_authorization=pa)
        c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        self._pipe(c, up)

    @staticmethod
    def _answer(c, status, extra=""):
        c.sendall(("HTTP/1.1 %s\r\n%sContent-Length: 0\r\nConnection: close\r\n\r\n"
                   % (status, extra)).encode())


class Socks5Proxy(_Proxy):
    scheme = "socks5"

    def _serve(self, c):
        c.settimeout(30)
        ver, n = _recvn(c, 2)
        methods = _recvn(c, n)
        if ver != 5:
            return
        if 0 not in methods:
            c.sendall(b"\x05\xff")
            return
        c.sendall(b"\x05\x00")
        ver, cmd, _, atyp = _recvn(c, 4)
        if atyp == 1:
            host = socket.inet_ntop(socket.AF_INET, _recvn(c, 4))
        elif atyp == 4:
            host = socket.inet_ntop(socket.AF_INET6, _recvn(c, 16))
        elif atyp == 3:
            host = _recvn(c, _recvn(c, 1)[0]).decode("idna")
        else:
            c.sendall(b"\x05\x08\x00\x01" + bytes(6))
            return
        port = struct.unpack("!H", _recvn(c, 2))[0]
        target = ("[%s]:%d" if ":" in host else "%s:%d") % (host, port)
        if cmd != 1:
            self._record(target, False, reply=7, atyp=atyp)
            c.sendall(b"\x05\x07\x00\x01" + bytes(6))
            return
        if self.refuse:
            self._record(target, False, reply=2, atyp=atyp)
            c.sendall(b"\x05\x02\x00\x01" + bytes(6))
            return
        try:
            up = self._connect(host, port)
        except OSError:
            self._record(target, False, reply=5, atyp=atyp)
            c.sendall(b"\x05\x05\x00\x01" + bytes(6))
            return
        self._record(target, True, reply=0, atyp=atyp)
        c.sendall(b"\x05\x00\x00\x01" + bytes(6))
        self._pipe(c, up)


def _recvn(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed")
        buf += chunk
    return buf


def _close(s):
    try:
        s.close()
    except Exception:
        pass
