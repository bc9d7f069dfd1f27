#!/usr/bin/python3
"""A token webhook authenticator for the test control plane (issue 8), the
way EKS's aws-iam-authenticator sits behind kube-apiserver's
--authentication-token-webhook-config-file.  Python 3 stdlib only.

It accepts only tokens minted by the test exec credential plugin
(test/integration/exec_plugin.py) and only until they expire:

    kwexec.<user>.<expiry unix seconds>.<hex hmac-sha256(secret, "<user>|<expiry>")>

<user> is [A-Za-z0-9_-]+, the secret is the stripped text of --secret-file
(read on every review, so it can be rotated).  Every other token is refused
(authenticated=false, no error: the apiserver answers 401).  The answer
carries the apiVersion of the request (authentication.k8s.io/v1beta1 is what
kube-apiserver 1.20 sends by default; v1 works too).

Every review appends one JSON line to --review-log:
    {"time": RFC3339, "unix": float, "user": str|null, "expiry": int|null,
     "accepted": bool, "reason": "ok"|"expired"|"bad-signature"|"malformed"|
     "not-kwexec"|"no-secret", "token_sha256": first 16 hex of sha256(token),
     "api_version": str}

    authn_webhook.py --port P --cert C --key K --secret-file S --review-log L
Serves HTTPS on 127.0.0.1:P (any path) until SIGTERM.
"""
import argparse
import datetime
import hashlib
import hmac
import json
import re
import signal
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOKEN_RE = re.compile(r"^kwexec\.([A-Za-z0-9_-]+)\.(-?[0-9]+)\.([0-9a-f]{64})$")
LOG_LOCK = threading.Lock()


def sign(secret, user, expiry):
    return hmac.new(secret.encode(), ("%s|%d" % (user, expiry)).encode(), hashlib.sha256).hexdigest()


def review(token, secret, now):
    """(accepted, reason, user, expiry) for a bearer token."""
    if not token.startswith("kwexec."):
        return False, "not-kwexec", None, None
    m = TOKEN_RE.match(token)
    if not m:
        return False, "malformed", None, None
    user, expiry, mac = m.group(1), int(m.group(2)), m.group(3)
    if secret is None:
        return False, "no-secret", user, expiry
    if not hmac.compare_digest(mac, sign(secret, user, expiry)):
        return False, "bad-signature", user, expiry
    if now >= expiry:
        return False, "expired", user, expiry
    return True, "ok", user, expiry


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # access log to stderr, short
        sys.stderr.write("%s %s\n" % (time.strftime("%H:%M:%S"), fmt % args))

    def do_GET(self):  # readiness probe of cluster.sh
        data = b"ok"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        cfg = self.server.cfg
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        except ValueError:
            self._send(400, {"error": "request body is not JSON"})
            return
        api_version = body.get("apiVersion") or "authentication.k8s.io/v1beta1"
        token = ((body.get("spec") or {}).get("token")) or ""
        try:
            with open(cfg.secret_file) as f:
                secret = f.read().strip() or None
        except OSError:
            secret = None
        now = time.time()
        accepted, reason, user, expiry = review(token, secret, now)
        status = {"authenticated": accepted}
        if accepted:
            status["user"] = {"username": user, "uid": "kwexec-" + user,
                              "groups": ["system:authenticated", "kwexec"]}
            auds = (body.get("spec") or {}).get("audiences")
            if auds:
                status["audiences"] = auds
        line = {"time": datetime.datetime.fromtimestamp(now, datetime.timezone.utc)
                .strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                "unix": now, "user": user, "expiry": expiry, "accepted": accepted, "reason": reason,
                "token_sha256": hashlib.sha256(token.encode()).hexdigest()[:16],
                "api_version": api_version}
        with LOG_LOCK, open(cfg.review_log, "a") as f:
            f.write(json.dumps(line) + "\n")
        self._send(200, {"apiVersion": api_version, "kind": "TokenReview", "status": status})

    def _send(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--secret-file", required=True)
    ap.add_argument("--review-log", required=True)
    cfg = ap.parse_args()
    ThreadingHTTPServer.allow_reuse_address = True
    ThreadingHTTPServer.daemon_threads = True
    srv = ThreadingHTTPServer((cfg.host, cfg.port), Handler)
    srv.cfg = cfg
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cfg.cert, cfg.key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=srv.shutdown).start())
    print("authn webhook listening on https://%s:%d" % (cfg.host, cfg.port), flush=True)
    srv.serve_forever()
    print("authn webhook stopped", flush=True)


if __name__ == "__main__":
    main()
