"""A small HTTPS client for the test cluster's API server (standard library
only): the admin token, the cluster CA, one keep-alive connection per
thread, and retries while the API server or etcd is down.  Used by the
convergence engine (converge_support.py) and test/bench/recovery.py."""
import http.client
import json
import ssl
import threading
import time
import urllib.parse


class ApiError(Exception):
    def __init__(self, status, body):
        super().__init__("HTTP %s: %s" % (status, body[:300]))
        self.status = status
        self.body = body


class Api:
    """HTTPS to the test cluster's API server with the admin token.

    request() retries transport errors, 5xx and 429 until `patience`
    seconds have passed (the API server may be restarting, etcd stopped);
    it returns (status, decoded body) for any other answer."""

    def __init__(self, server, token, ca, patience=120):
        u = urllib.parse.urlsplit(server)
        self.host, self.port = u.hostname, u.port or 443
        self.token = token
        self.ctx = ssl.create_default_context(cafile=ca)
        self.patience = patience
        self.local = threading.local()

    def _conn(self):
        c = getattr(self.local, "conn", None)
        if c is None:
            c = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=30)
            self.local.conn = c
        return c

    def _drop(self):
        c = getattr(self.local, "conn", None)
        if c is not None:
            c.close()
        self.local.conn = None

    def request(self, method, path, body=None, ctype="application/json"):
        deadline = time.monotonic() + self.patience
        delay = 0.1
        while True:
            try:
                c = self._conn()
                headers = {"Authorization": "Bearer " + self.token, "Accept": "application/json",
                           "User-Agent": "kwatch-converge"}
                data = None
                if body is not None:
                    data = json.dumps(body).encode()
                    headers["Content-Type"] = ctype
                c.request(method, path, body=data, headers=headers)
                r = c.getresponse()
                raw = r.read()
                status = r.status
                if status < 500 and status != 429:
                    try:
                        return status, json.loads(raw) if raw else None
                    except ValueError:
                        return status, raw.decode("utf-8", "replace")
                err = "HTTP %d: %s" % (status, raw[:200])
            except (OSError, http.client.HTTPException) as e:
                self._drop()
                err = repr(e)
            if time.monotonic() > deadline:
                raise ApiError(-1, "%s %s: gave up after %ss: %s" % (method, path, self.patience, err))
            time.sleep(delay)
            delay = min(delay * 2, 2.0)

    def list(self, path, label_selector=None):
        """All items of a collection (one consistent LIST) and its resourceVersion."""
        q = "?labelSelector=" + urllib.parse.quote(label_selector) if label_selector else ""
        status, body = self.request("GET", path + q)
        if status != 200:
            raise ApiError(status, json.dumps(body))
        return body.get("items") or [], body["metadata"]["resourceVersion"]
