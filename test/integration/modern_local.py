"""A Kubernetes 1.36 API server of this test module's own (issue 23): etcd 3.5 and the generic API
server of k8s.io/apiextensions-apiserver 0.36.4 (custom resources only: no /api, no pods), both from
the cache test/k8s's modern build fills (/var/cache/kwatch-k8s-modern/bin, or
$KWATCH_K8S_MODERN_CACHE).  Started the way that build's reference run.sh starts it (client
certificate with O=system:masters, delegated authentication and authorization pointing at the server
itself, the admission plugins and priority-and-fairness whose resources do not exist here turned
off; readiness is /readyz?exclude=informer-sync).  A stand-in until the suite's own fixture for the
modern control plane is on main; the tests are skipped, saying why, when the binaries are not there.

    modern = ModernPlane(dir); modern.start(); modern.kubectl(...); modern.stop()
"""
import os
import shutil
import ssl
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from common import free_port, run

CACHE = Path(os.environ.get("KWATCH_K8S_MODERN_CACHE", "/var/cache/kwatch-k8s-modern"))
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"


class ModernPlane:
    def __init__(self, directory):
        self.dir = Path(directory)
        self.procs = []
        self.server = None

    def _pki(self):
        pki = self.dir / "pki"
        pki.mkdir(parents=True, exist_ok=True)
        if (pki / "admin.crt").exists():
            return pki
        o = ["openssl"]
        run(o + ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30", "-subj", "/CN=kwatch-test-ca",
                 "-keyout", pki / "ca.key", "-out", pki / "ca.crt"])
        run(o + ["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/O=system:masters/CN=admin",
                 "-keyout", pki / "admin.key", "-out", pki / "admin.csr"])
        run(o + ["x509", "-req", "-in", pki / "admin.csr", "-CA", pki / "ca.crt", "-CAkey", pki / "ca.key",
                 "-CAcreateserial", "-days", "30", "-out", pki / "admin.crt"])
        return pki

    def _launch(self, name, cmd):
        log = open(self.dir / ("%s.log" % name), "a")
        p = subprocess.Popen([str(c) for c in cmd], stdin=subprocess.DEVNULL, stdout=log,
                             stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(p)
        return p

    def _get(self, path, timeout=2):
        ctx = ssl._create_unverified_context()  # the server's self-signed certificate
        ctx.load_cert_chain(str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
        with urllib.request.urlopen(self.server + path, context=ctx, timeout=timeout) as r:
            return r.read().decode()

    def start(self):
        for b in ("etcd", "crd-apiserver"):
            if not (CACHE / "bin" / b).exists():
                pytest.skip("the modern control plane is not built (%s missing: test/k8s's modern "
                            "build fills it)" % (CACHE / "bin" / b))
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        self.pki = self._pki()
        ep, pp, ap = free_port(), free_port(), free_port()
        self._launch("etcd", [CACHE / "bin" / "etcd", "--data-dir", self.dir / "etcd",
                              "--listen-client-urls", "http://127.0.0.1:%d" % ep,
                              "--advertise-client-urls", "http://127.0.0.1:%d" % ep,
                              "--listen-peer-urls", "http://127.0.0.1:%d" % pp,
                              "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % pp,
                              "--initial-cluster", "default=http://127.0.0.1:%d" % pp])
        self.server = "https://127.0.0.1:%d" % ap
        self.kubeconfig = self.dir / "kubeconfig"
        self.kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\n"
            "clusters: [{name: modern, cluster: {server: \"%s\", insecure-skip-tls-verify: true}}]\n"
            "users: [{name: admin, user: {client-certificate: %s, client-key: %s}}]\n"
            "contexts: [{name: modern, context: {cluster: modern, user: admin}}]\n"
            "current-context: modern\n" % (self.server, self.pki / "admin.crt", self.pki / "admin.key"))
        for _ in range(100):
            try:
                urllib.request.urlopen("http://127.0.0.1:%d/health" % ep, timeout=1).read()
                break
            except OSError:
                time.sleep(0.1)
        self._launch("apiserver", [
            CACHE / "bin" / "crd-apiserver", "--etcd-servers", "http://127.0.0.1:%d" % ep,
            "--bind-address", "127.0.0.1", "--secure-port", ap, "--cert-dir", self.dir / "certs",
            "--kubeconfig", self.kubeconfig, "--authentication-kubeconfig", self.kubeconfig,
            "--authorization-kubeconfig", self.kubeconfig, "--authentication-skip-lookup",
            "--client-ca-file", self.pki / "ca.crt",
            "--disable-admission-plugins", "NamespaceLifecycle,MutatingAdmissionWebhook,"
            "ValidatingAdmissionWebhook,ValidatingAdmissionPolicy,MutatingAdmissionPolicy",
            "--enable-priority-and-fairness=false"])
        deadline = time.monotonic() + 90
        while True:
            try:
                self._get("/readyz?exclude=informer-sync")
                break
            except Exception:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("modern API server not ready: %s"
                                       % (self.dir / "apiserver.log").read_text()[-3000:])
                time.sleep(0.2)
        # PostgreSQL runs as `postgres` and reads the kubeconfig and the client key (test only)
        run(["chmod", "-R", "a+rX", self.dir])

    def metrics(self):
        return self._get("/metrics", timeout=10)

    def kubectl(self, *args, input=None, check=True):
        return run([KUBECTL, "--kubeconfig", self.kubeconfig, *args], input=input, check=check)

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.procs = []
