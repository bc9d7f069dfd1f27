"""Support for the exec-plugin, proxy and TLS-failure tests (issue 8).

The test cluster (test/k8s/cluster.sh) runs a token webhook authenticator
that accepts only unexpired tokens minted by test/integration/exec_plugin.py:

    kwexec.<user>.<expiry unix>.<hex hmac-sha256(secret, "<user>|<expiry>")>

with the secret in CLUSTER.env["KWATCH_K8S_WEBHOOK_SECRET"], and logs one
JSON line per TokenReview to CLUSTER.env["KWATCH_K8S_WEBHOOK_LOG"].
NOTE: kube-apiserver 1.20 caches every successful token authentication for
10 s (not configurable), so an expired token keeps working for up to 10 s
after the last review that accepted it; the webhook's own cache is off.

Everything PostgreSQL (the `postgres` OS user) must read or write lives
under AUTH_DIR = $KWATCH_TEST_DIR/auth: the plugin copy (bin/exec_plugin.py),
one directory per ExecPlugin (kubeconfig, control file, log: world-writable,
test only) and the TLS fixtures (tls/).

Fixtures (import them into a test module: `from auth_support import *`
or by name): exec_plugin, tls_files, make_proxy, tls_forwarder.
Helpers: ExecPlugin, mint_token, webhook_reviews, webhook_log_size,
read_plugin_log, curl_api.
"""
import base64
import hashlib
import hmac
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

import conftest
from fakeapi.proxy import FaultProxy
from proxy_support import ConnectProxy, Socks5Proxy

HERE = Path(__file__).resolve().parent
AUTH_DIR = conftest.TEST_DIR / "auth"
PLUGIN_SRC = HERE / "exec_plugin.py"
EXEC_V1 = "client.authentication.k8s.io/v1"
EXEC_V1BETA1 = "client.authentication.k8s.io/v1beta1"
WRONG_HOST = "kubernetes.kwatch.test"


def _auth_dir():
    """AUTH_DIR with a fresh copy of the plugin (executable by everyone)."""
    (AUTH_DIR / "bin").mkdir(parents=True, exist_ok=True)
    os.chmod(AUTH_DIR, 0o755)
    os.chmod(AUTH_DIR / "bin", 0o755)
    dst = AUTH_DIR / "bin" / "exec_plugin.py"
    shutil.copy2(PLUGIN_SRC, str(dst) + ".tmp")
    os.chmod(str(dst) + ".tmp", 0o755)
    os.replace(str(dst) + ".tmp", dst)
    return AUTH_DIR


def plugin_path():
    """Absolute path of the plugin copy PostgreSQL can run."""
    return _auth_dir() / "bin" / "exec_plugin.py"


# ---------------------------------------------------------------- webhook

def webhook_secret():
    return Path(conftest.CLUSTER.env["KWATCH_K8S_WEBHOOK_SECRET"]).read_text().strip()


def mint_token(user="exec-user", ttl=20, now=None):
    """A token the webhook accepts until now + ttl (int seconds, as the plugin mints)."""
    expiry = int(now if now is not None else time.time()) + int(ttl)
    mac = hmac.new(webhook_secret().encode(), ("%s|%d" % (user, expiry)).encode(), hashlib.sha256)
    return "kwexec.%s.%d.%s" % (user, expiry, mac.hexdigest())


def token_sha(token):
    """How the webhook and plugin logs name a token (never logged in clear)."""
    return hashlib.sha256(token.encode()).hexdigest()[:16]


def webhook_log_size():
    """The webhook log's size now: pass it to webhook_reviews(since=) to see later reviews only."""
    try:
        return os.path.getsize(conftest.CLUSTER.env["KWATCH_K8S_WEBHOOK_LOG"])
    except FileNotFoundError:
        return 0


def webhook_reviews(since=0, user=None, token=None):
    """The webhook's TokenReview log lines (dicts: time, unix, user, expiry, accepted,
    reason ok|expired|bad-signature|malformed|not-kwexec|no-secret, token_sha256,
    api_version) from byte offset `since`, optionally only `user`'s or `token`'s."""
    out = []
    with open(conftest.CLUSTER.env["KWATCH_K8S_WEBHOOK_LOG"], "rb") as f:
        f.seek(since)
        for line in f.read().decode().splitlines():
            if line.strip():
                r = json.loads(line)
                if (user is None or r["user"] == user) and \
                        (token is None or r["token_sha256"] == token_sha(token)):
                    out.append(r)
    return out


# ---------------------------------------------------------------- exec plugin

def read_plugin_log(path):
    """The plugin's runs, oldest first: each the "start" line (time, unix, pid, uid, argv,
    exec_info, env, stdin_isatty, stdout_isatty, control) with its "done" line under
    "done" (outcome token|cert|fail|garbage, api_version, user, expiry, token_sha256;
    None for a run still sleeping or killed)."""
    runs, by_pid = [], {}
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return []
    for line in text.splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        if r["event"] == "start":
            r["done"] = None
            runs.append(r)
            by_pid[r["pid"]] = r
        elif r["pid"] in by_pid and by_pid[r["pid"]]["done"] is None:
            by_pid[r["pid"]]["done"] = r
    return runs


class ExecPlugin:
    """One exec-plugin setup in AUTH_DIR/<name>/: control.json, plugin.log and the
    kubeconfigs written by kubeconfig(), all readable (the log and control file
    writable) by the postgres OS user.

        p = ExecPlugin("t1")
        p.control(ttl=20, user="alice")        # replaces the control file
        p.update(sleep=5)                      # changes some keys
        kc = p.kubeconfig(api_version=EXEC_V1, interactive_mode="Never")
        p.runs()                               # read_plugin_log(p.log)
    """

    def __init__(self, name):
        self.dir = _auth_dir() / name
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        os.chmod(self.dir, 0o777)
        self.plugin = plugin_path()
        self.control_path = self.dir / "control.json"
        self.log = self.dir / "plugin.log"
        self.log.touch()
        os.chmod(self.log, 0o666)
        self.control()

    def control(self, **settings):
        """Replaces the control file with `settings` (see exec_plugin.py; unset keys take
        their defaults: user exec-user, ttl 20, no sleep, a token).  Returns them."""
        tmp = self.control_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(settings))
        os.chmod(tmp, 0o666)
        os.replace(tmp, self.control_path)
        return settings

    def update(self, **settings):
        """Changes some keys of the control file (None removes a key)."""
        cur = json.loads(self.control_path.read_text())
        cur.update(settings)
        return self.control(**{k: v for k, v in cur.items() if v is not None})

    def args(self):
        return ["--control", str(self.control_path), "--log", str(self.log),
                "--secret", conftest.CLUSTER.env["KWATCH_K8S_WEBHOOK_SECRET"]]

    def exec_config(self, api_version=EXEC_V1BETA1, env=None, provide_cluster_info=False,
                    interactive_mode="Never", install_hint=None, command=None, args=None):
        """The users[].user.exec mapping. env: {name: value} (names KWEXEC_* are
        logged by the plugin); interactive_mode None leaves the key out (required for
        v1, defaults to IfAvailable for v1beta1); command defaults to the plugin."""
        ex = {"apiVersion": api_version, "command": str(command or self.plugin),
              "args": list(args if args is not None else self.args())}
        if env:
            ex["env"] = [{"name": k, "value": v} for k, v in env.items()]
        if provide_cluster_info:
            ex["provideClusterInfo"] = True
        if interactive_mode is not None:
            ex["interactiveMode"] = interactive_mode
        if install_hint is not None:
            ex["installHint"] = install_hint
        return ex

    def kubeconfig(self, filename="kubeconfig", server=None, ca_file=None, ca_data=False,
                   tls_server_name=None, proxy_url=None, insecure=False, **exec_kw):
        """Writes an exec-plugin kubeconfig (cluster kwatch-exec, user kwatch-exec-user,
        context kwatch-exec, current) to <dir>/<filename>; returns its path (str).
        server/ca_file default to the test cluster's; ca_data=True embeds the CA as
        certificate-authority-data (as EKS/GKE/AKS kubeconfigs do); exec_kw goes to
        exec_config()."""
        cluster = {"server": server or conftest.CLUSTER.server}
        ca = ca_file or conftest.CLUSTER.ca
        if insecure:
            cluster["insecure-skip-tls-verify"] = True
        elif ca_data:
            cluster["certificate-authority-data"] = base64.b64encode(Path(ca).read_bytes()).decode()
        else:
            cluster["certificate-authority"] = str(ca)
        if tls_server_name:
            cluster["tls-server-name"] = tls_server_name
        if proxy_url:
            cluster["proxy-url"] = proxy_url
        doc = {
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "kwatch-exec", "cluster": cluster}],
            "users": [{"name": "kwatch-exec-user", "user": {"exec": self.exec_config(**exec_kw)}}],
            "contexts": [{"name": "kwatch-exec", "context": {
                "cluster": "kwatch-exec", "user": "kwatch-exec-user", "namespace": "default"}}],
            "current-context": "kwatch-exec",
            "preferences": {},
        }
        path = self.dir / filename
        tmp = path.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump(doc, sort_keys=False))
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        return str(path)

    def runs(self):
        return read_plugin_log(self.log)


@pytest.fixture
def exec_plugin(request):
    """An ExecPlugin named after the test (its directory is replaced, not removed)."""
    h = hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:6]
    return ExecPlugin("%s-%s" % (conftest._slug(request.node.name), h))


# ---------------------------------------------------------------- TLS fixtures

class TlsFiles:
    """Certificates made with openssl in AUTH_DIR/tls (EC P-256 keys, world-readable:
    test only).  Each attribute is a (cert, key) pair of paths (str), except the CAs'
    .crt paths unknown_ca / proxy_ca:
      wrong_ca      serving cert for 127.0.0.1/localhost from a CA the cluster does not know
      expired       serving cert for 127.0.0.1/localhost from the cluster CA, expired in 2020
      wrong_host    serving cert from the cluster CA for DNS:kubernetes.kwatch.test only
      unknown_client  client cert (CN intruder) from the unknown CA: the apiserver answers 401
      exec_client   client cert (CN exec-cert-user, O kwexec) from the cluster CA
      proxy_server  serving cert for 127.0.0.1/localhost from proxy_ca (for https proxies)
    """

    def __init__(self, directory, cluster_pki):
        self.dir = Path(directory)
        self.cluster_pki = Path(cluster_pki)
        self.unknown_ca = str(self.dir / "unknown-ca.crt")
        self.proxy_ca = str(self.dir / "proxy-ca.crt")
        for n in ("wrong_ca", "expired", "wrong_host", "unknown_client", "exec_client",
                  "proxy_server"):
            setattr(self, n, (str(self.dir / (n + ".crt")), str(self.dir / (n + ".key"))))

    def _ossl(self, *args):
        conftest.run(["openssl", *args])

    def _ca(self, name, cn):
        self._ossl("req", "-x509", "-new", "-nodes", "-newkey", "ec", "-pkeyopt",
                   "ec_paramgen_curve:P-256", "-keyout", self.dir / (name + ".key"),
                   "-out", self.dir / (name + ".crt"), "-days", "3650", "-subj", "/CN=" + cn,
                   "-config", self.dir / "openssl.cnf", "-extensions", "v3_ca")

    def _leaf(self, name, subj, ext, ca_crt, ca_key, start=None, end=None):
        csr = self.dir / (name + ".csr")
        self._ossl("req", "-new", "-nodes", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                   "-keyout", self.dir / (name + ".key"), "-out", csr, "-subj", subj,
                   "-config", self.dir / "openssl.cnf")
        # `openssl ca` takes explicit start and end dates (an expired certificate)
        db = self.dir / "db"
        self._ossl("ca", "-batch", "-config", self.dir / "openssl.cnf", "-cert", ca_crt,
                   "-keyfile", ca_key, "-in", csr, "-out", self.dir / (name + ".crt"),
                   "-extensions", ext, "-notext", "-outdir", db,
                   "-startdate", start or time.strftime("%Y%m%d%H%M%SZ", time.gmtime(time.time() - 3600)),
                   "-enddate", end or "20351231000000Z")
        csr.unlink()

    def generate(self):
        shutil.rmtree(self.dir, ignore_errors=True)
        (self.dir / "db").mkdir(parents=True)
        (self.dir / "db" / "index.txt").write_text("")
        (self.dir / "db" / "serial").write_text("%016x\n" % int(time.time() * 1000))
        (self.dir / "openssl.cnf").write_text(OPENSSL_CNF % {"db": self.dir / "db"})
        cca, ckey = self.cluster_pki / "ca.crt", self.cluster_pki / "ca.key"
        self._ca("unknown-ca", "kwatch-unknown-ca")
        self._ca("proxy-ca", "kwatch-proxy-ca")
        uca, ukey = self.dir / "unknown-ca.crt", self.dir / "unknown-ca.key"
        self._leaf("wrong_ca", "/CN=kube-apiserver", "server_ip", uca, ukey)
        self._leaf("expired", "/CN=kube-apiserver", "server_ip", cca, ckey,
                   "20200101000000Z", "20200102000000Z")
        self._leaf("wrong_host", "/CN=" + WRONG_HOST, "server_dns", cca, ckey)
        self._leaf("unknown_client", "/CN=intruder", "client", uca, ukey)
        self._leaf("exec_client", "/O=kwexec/CN=exec-cert-user", "client", cca, ckey)
        self._leaf("proxy_server", "/CN=kwatch-test-proxy", "server_ip",
                   self.dir / "proxy-ca.crt", self.dir / "proxy-ca.key")
        # the expired one really is
        p = conftest.run(["openssl", "x509", "-checkend", "0", "-noout", "-in", self.expired[0]],
                         check=False)
        assert p.returncode == 1, "the 'expired' certificate is not expired"
        conftest.run(["chmod", "-R", "a+rX", self.dir])
        return self


OPENSSL_CNF = """\
[req]
distinguished_name = dn
prompt = no
[dn]
CN = placeholder
[ca]
default_ca = kw
[kw]
database = %(db)s/index.txt
new_certs_dir = %(db)s
serial = %(db)s/serial
default_md = sha256
policy = any
copy_extensions = none
unique_subject = no
[any]
organizationName = optional
commonName = supplied
[v3_ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign, digitalSignature
subjectKeyIdentifier = hash
[server_ip]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
authorityKeyIdentifier = keyid
[server_dns]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = DNS:""" + WRONG_HOST + """
authorityKeyIdentifier = keyid
[client]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
authorityKeyIdentifier = keyid
"""


@pytest.fixture(scope="session")
def tls_files():
    """TlsFiles, generated once per session (against this session's cluster CA)."""
    return TlsFiles(_auth_dir() / "tls", conftest.CLUSTER.dir / "pki").generate()


# ---------------------------------------------------------------- proxies, forwarder

@pytest.fixture
def make_proxy(tls_files):
    """make_proxy(kind, **kw) -> a started proxy, stopped after the test.
    kind "http" / "https" (TLS to the proxy with tls_files.proxy_server; clients trust
    tls_files.proxy_ca): ConnectProxy(auth="user:pw", refuse=True); "socks5":
    Socks5Proxy(refuse=True).  .url, .targets, .requests (see proxy_support.py)."""
    started = []

    def make(kind="http", **kw):
        if kind == "http":
            p = ConnectProxy(**kw)
        elif kind == "https":
            p = ConnectProxy(tls=tls_files.proxy_server, **kw)
        elif kind == "socks5":
            p = Socks5Proxy(**kw)
        else:
            raise ValueError(kind)
        started.append(p)
        return p.start()
    yield make
    for p in started:
        p.stop()


@pytest.fixture
def tls_forwarder(tls_files):
    """tls_forwarder(which) -> a started fakeapi.proxy.FaultProxy on loopback presenting
    tls_files.<which> ("wrong_ca", "expired", "wrong_host"; None: the cluster's own
    serving cert) and forwarding to the real apiserver; stopped after the test.
    Its .url is https://127.0.0.1:<port>."""
    started = []

    def make(which=None):
        cert, key = getattr(tls_files, which) if which else (None, None)
        p = FaultProxy.for_cluster(conftest.CLUSTER.server, str(conftest.CLUSTER.dir / "pki"),
                                   cert=cert, key=key)
        started.append(p)
        return p.start()
    yield make
    for p in started:
        p.stop()


def curl_api(path="/version", server=None, token=None, ca=None, extra=(), timeout=10):
    """curl -sS <server><path> with the admin token (or `token`; "" for none) and the
    cluster CA (or `ca`); returns (exit code, HTTP status or 0, body, stderr)."""
    server = server or conftest.CLUSTER.server
    tok = conftest.CLUSTER.token if token is None else token
    cmd = ["curl", "-sS", "--max-time", str(timeout), "--cacert", ca or conftest.CLUSTER.ca,
           "-o", "-", "-w", "\n%{http_code}", *extra]
    if tok:
        cmd += ["-H", "Authorization: Bearer " + tok]
    p = subprocess.run(cmd + [server + path], capture_output=True, text=True, timeout=timeout + 5)
    body, _, code = p.stdout.rpartition("\n")
    return p.returncode, int(code or 0), body, p.stderr
