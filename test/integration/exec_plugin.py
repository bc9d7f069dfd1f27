#!/usr/bin/python3
"""A client-go exec credential plugin for the tests (issue 8), python3 stdlib only.

    exec_plugin.py --control FILE --log FILE [--secret FILE] [--api-version V]

It prints an ExecCredential on stdout, as `aws eks get-token` or
`kubelogin` do, with a token the test cluster's webhook authenticator
(test/k8s/authn_webhook.py) accepts until it expires:

    kwexec.<user>.<expiry unix>.<hex hmac-sha256(secret, "<user>|<expiry>")>

apiVersion: the one of KUBERNETES_EXEC_INFO (client-go sets it to the
kubeconfig's exec.apiVersion), else --api-version, else
client.authentication.k8s.io/v1beta1.

Its behaviour comes from the JSON control FILE, read on every run (a missing
file or key means the default), so a test changes it between runs without
touching the kubeconfig:
    user         "exec-user"   the token's user ([A-Za-z0-9_-]+)
    ttl          20            seconds until expiry (may be <= 0: an expired token)
    expiration   true          false: no status.expirationTimestamp
    sleep        0             seconds to sleep before answering
    fail         null          {"exit": N, "stderr": "text"}: print text on stderr, exit N
    garbage      null          "text": print text on stdout instead of an ExecCredential, exit 0
    cert         null          {"cert_file": F, "key_file": K}: answer clientCertificateData/
                               clientKeyData (PEM) instead of a token
    token        null          "text": answer this token instead of a minted one
    revoked_runs 0             the first N runs of this log answer a well-formed,
                               unexpired token signed with a wrong secret: one the
                               webhook refuses (bad-signature), as a revoked token is
    api_version  null          answer this apiVersion instead (a wrong one)
    stderr       null          "text" printed on stderr on success too
    secret_file  null          overrides --secret
    log_env      []            more environment variable names to log

Every run appends to the log FILE one JSON line when it starts
({"event": "start", ...}: time, unix, pid, uid, argv, exec_info (the parsed
KUBERNETES_EXEC_INFO, or {"unparsable": text}, or null), env (KWEXEC_*,
KWATCH_*, HOME, USER, LOGNAME, PATH, LANG and log_env), stdin_isatty,
stdout_isatty, control) and one when it answers ({"event": "done", pid,
unix, outcome: token|cert|fail|garbage, api_version, token_sha256, user,
expiry}).  A run killed while sleeping has a start line only.
"""
import argparse
import datetime
import hashlib
import hmac
import json
import os
import sys
import time

DEFAULT_VERSION = "client.authentication.k8s.io/v1beta1"


def log(path, obj):
    with open(path, "a") as f:
        f.write(json.dumps(obj) + "\n")


def run_count(path):
    """How many runs the log FILE holds already (its "start" lines)."""
    try:
        with open(path) as f:
            return sum(1 for line in f if '"event": "start"' in line)
    except FileNotFoundError:
        return 0


def rfc3339(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--control", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--secret")
    ap.add_argument("--api-version")
    args = ap.parse_args()
    start = time.time()
    try:
        with open(args.control) as f:
            ctl = json.load(f) or {}
    except FileNotFoundError:
        ctl = {}
    raw = os.environ.get("KUBERNETES_EXEC_INFO")
    if raw is None:
        info = None
    else:
        try:
            info = json.loads(raw)
        except ValueError:
            info = {"unparsable": raw}
    names = {"HOME", "USER", "LOGNAME", "PATH", "LANG", *ctl.get("log_env", [])}
    env = {k: v for k, v in os.environ.items()
           if k in names or k.startswith(("KWEXEC_", "KWATCH_"))}
    pid = os.getpid()
    ordinal = run_count(args.log)
    log(args.log, {"event": "start", "time": rfc3339(start), "unix": start, "pid": pid,
                   "uid": os.getuid(), "argv": sys.argv, "exec_info": info, "env": env,
                   "stdin_isatty": os.isatty(0), "stdout_isatty": os.isatty(1), "control": ctl})

    if ctl.get("sleep"):
        time.sleep(float(ctl["sleep"]))

    done = {"event": "done", "pid": pid, "unix": time.time()}
    fail = ctl.get("fail")
    if fail:
        done["outcome"] = "fail"
        log(args.log, done)
        sys.stderr.write(fail.get("stderr", "exec plugin failed"))
        sys.stderr.flush()
        sys.exit(int(fail.get("exit", 1)))
    if ctl.get("garbage") is not None:
        done["outcome"] = "garbage"
        log(args.log, done)
        sys.stdout.write(ctl["garbage"])
        return

    version = (info or {}).get("apiVersion") or args.api_version or DEFAULT_VERSION
    version = ctl.get("api_version") or version
    now = int(time.time())
    expiry = now + int(ctl.get("ttl", 20))
    status = {}
    if ctl.get("expiration", True):
        status["expirationTimestamp"] = rfc3339(expiry)
    cert = ctl.get("cert")
    if cert:
        with open(cert["cert_file"]) as f:
            status["clientCertificateData"] = f.read()
        with open(cert["key_file"]) as f:
            status["clientKeyData"] = f.read()
        done.update(outcome="cert", api_version=version, expiry=expiry)
    else:
        user = ctl.get("user", "exec-user")
        token = ctl.get("token")
        revoked = token is None and ordinal < int(ctl.get("revoked_runs", 0))
        if token is None:
            with open(ctl.get("secret_file") or args.secret) as f:
                secret = f.read().strip()
            if revoked:
                secret = "revoked-" + secret
            mac = hmac.new(secret.encode(), ("%s|%d" % (user, expiry)).encode(), hashlib.sha256)
            token = "kwexec.%s.%d.%s" % (user, expiry, mac.hexdigest())
        status["token"] = token
        done.update(outcome="token", api_version=version, user=user, expiry=expiry,
                    revoked=revoked,
                    token_sha256=hashlib.sha256(token.encode()).hexdigest()[:16])
    log(args.log, done)
    if ctl.get("stderr"):
        sys.stderr.write(ctl["stderr"])
    sys.stdout.write(json.dumps({"apiVersion": version, "kind": "ExecCredential", "spec": {},
                                 "status": status}) + "\n")


if __name__ == "__main__":
    main()
