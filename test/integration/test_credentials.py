"""Real-cluster credentials (issue 8): exec credential plugins through the
real kube-apiserver's token webhook (tokens valid for seconds), proxy-url
(http CONNECT, https, socks5), impersonation headers and TLS failures.

The infrastructure (plugin, webhook, proxies, certificates) is in
auth_support.py; the apiserver caches a successful token check for 10 s,
so expiry is proven from the plugin's and the webhook's logs, not 401s."""
import json
import time

import psycopg2
import pytest
import yaml
from psycopg2 import sql as pgsql

import conftest
from faults_support import fake  # noqa: F401
from auth_support import (EXEC_V1, EXEC_V1BETA1, WRONG_HOST, ExecPlugin, exec_plugin, make_proxy,  # noqa: F401
                          tls_files, tls_forwarder, webhook_log_size, webhook_reviews)
from conftest import (assert_table_matches_server, kubectl, sql, sql_one, wait_until,
                      wait_watching, watch, watch_error, watch_status)


def kubeconfig_server(ctx, path, suffix="", **options):
    name = ctx.base + suffix
    opts = pgsql.SQL(", ").join(
        pgsql.SQL("{} {}").format(pgsql.SQL(k), pgsql.Literal(v))
        for k, v in [("kubeconfig", path), *options.items()])
    sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch OPTIONS ({})").format(
        pgsql.Identifier(name), opts))
    ctx.servers.append(name)
    return name


def cert_server(ctx, suffix, crt, key):
    """A server on the test cluster whose user mapping authenticates with the
    client certificate and key files crt, key; returns its name."""
    name = ctx.base + suffix
    sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch OPTIONS (api_server {},"
                  " certificate_authority {})").format(
        pgsql.Identifier(name), pgsql.Literal(conftest.CLUSTER.server),
        pgsql.Literal(conftest.CLUSTER.ca)))
    ctx.servers.append(name)
    sql(pgsql.SQL("CREATE USER MAPPING FOR CURRENT_USER SERVER {} OPTIONS"
                  " (client_certificate {}, client_key {})").format(
        pgsql.Identifier(name), pgsql.Literal(str(crt)), pgsql.Literal(str(key))))
    return name


def configmaps(ns, *names, **data):
    kubectl("apply", "-f", "-", input=conftest.configmaps_doc(ns, names, **data))


def test_exec_plugin_watch_lives_through_expiries(ctx, exec_plugin, settings):
    """A watch whose token lives 12 s stays healthy and equal to the server
    over several expiries; the plugin ran again before each expiry, with
    the kubeconfig's env and KUBERNETES_EXEC_INFO, never on a terminal."""
    settings(watch_timeout=3)  # re-watches every 3-6 s: each needs a live token
    user = "u" + ctx.base[-8:].replace("-", "")
    exec_plugin.control(ttl=12, user=user)
    kc = exec_plugin.kubeconfig(api_version=EXEC_V1, env={"KWEXEC_MARK": "m1"},
                                provide_cluster_info=True, ca_data=True)
    ns = ctx.namespace()
    srv = kubeconfig_server(ctx, kc)
    configmaps(ns, "a", "b")
    watch("configmaps", srv, namespace=ns)
    wait_watching(srv, "configmaps")
    deadline = time.time() + 40
    i = 0
    while time.time() < deadline:
        configmaps(ns, "c%d" % i, v=str(i))
        i += 1
        time.sleep(2)
    assert_table_matches_server("k8s.configmaps", srv, ["configmaps", "-n", ns])
    st = watch_status(srv, "configmaps")
    assert st["state"] == "watching", st

    runs = [r for r in exec_plugin.runs() if r["done"]]
    assert len(runs) >= 4, runs  # the backend's probe + the worker's refreshes
    info = runs[-1]["exec_info"]
    assert info["apiVersion"] == EXEC_V1 and info["spec"]["interactive"] is False, info
    assert info["spec"]["cluster"]["server"] == conftest.CLUSTER.server, info
    assert info["spec"]["cluster"]["certificate-authority-data"], info
    assert runs[-1]["env"].get("KWEXEC_MARK") == "m1", runs[-1]
    assert not runs[-1]["stdin_isatty"]
    # refreshed ahead: each run of the worker started before the previous token expired
    worker = [r for r in runs if r["pid"] != runs[0]["pid"]][1:]
    for prev, nxt in zip(worker, worker[1:]):
        assert nxt["unix"] < prev["done"]["expiry"], (prev, nxt)
    # the apiserver saw only valid tokens of this user
    reviews = webhook_reviews(user=user)
    assert reviews and all(r["accepted"] for r in reviews), reviews


def test_slow_plugin_never_stalls_other_watches(ctx, exec_plugin):
    """While one server's plugin sleeps, another server's watch keeps
    streaming: the plugin runs beside the worker's loop."""
    user = "s" + ctx.base[-8:].replace("-", "")
    exec_plugin.control(ttl=60, user=user)
    kc = exec_plugin.kubeconfig()
    ns = ctx.namespace()
    other = ctx.server("-other")
    watch("configmaps", other, namespace=ns)
    wait_watching(other, "configmaps")

    slow = kubeconfig_server(ctx, kc, "-slow")
    exec_plugin.update(sleep=15)
    runs_before = len(exec_plugin.runs())
    # watch() probes in this backend (waits for the plugin); the worker then runs it again
    watch("configmaps", slow, namespace=ns, label_selector="none=none")
    wait_until(lambda: len(exec_plugin.runs()) > runs_before + 1, timeout=20,
               msg="the worker started the plugin")
    configmaps(ns, "while-sleeping")
    wait_until(lambda: sql_one("SELECT count(*) FROM k8s.configmaps WHERE cluster = %s"
                               " AND name = 'while-sleeping'", (other,)) == 1,
               timeout=10, msg="the other watch applied while the plugin slept")
    assert exec_plugin.runs()[-1]["done"] is None, "the plugin had already answered"
    wait_watching(slow, "configmaps", timeout=40)


def test_failing_plugin_fails_only_its_watches(ctx, exec_plugin, settings):
    """A plugin that fails puts its own server's watches into failed with
    its stderr in last_error; other servers' watches go on; it recovers."""
    settings(watch_timeout=3)
    user = "f" + ctx.base[-8:].replace("-", "")
    exec_plugin.control(ttl=8, user=user)
    kc = exec_plugin.kubeconfig()
    ns = ctx.namespace()
    srv = kubeconfig_server(ctx, kc)
    other = ctx.server("-other")
    watch("configmaps", srv, namespace=ns)
    watch("configmaps", other, namespace=ns)
    wait_watching(srv, "configmaps")
    exec_plugin.update(fail={"exit": 3, "stderr": "token service unavailable"})
    wait_until(lambda: watch_status(srv, "configmaps")["state"] == "failed", timeout=40,
               msg="the plugin's watch failed")
    st = watch_status(srv, "configmaps")
    assert "token service unavailable" in st["last_error"], st
    assert "exit code 3" in st["last_error"], st
    configmaps(ns, "during-failure")
    assert_table_matches_server("k8s.configmaps", other, ["configmaps", "-n", ns])
    assert watch_status(other, "configmaps")["state"] == "watching"

    exec_plugin.update(fail=None)
    wait_watching(srv, "configmaps", timeout=60)
    assert_table_matches_server("k8s.configmaps", srv, ["configmaps", "-n", ns])


def test_rejected_token_runs_the_plugin_once_more(ctx, exec_plugin, settings):
    """A token the API server answers 401 to (revoked: the webhook refuses its
    signature though it has not expired) is dropped and the plugin runs once
    more, as client-go's exec authenticator does after a 401: in watch()'s
    probe and in the worker, which stays watching.  A plugin that hands out
    only refused tokens fails the request (28000) after exactly one more run."""
    settings(watch_timeout=3)  # re-watches every 3-6 s: the next request meets the bad token
    user = "r" + ctx.base[-8:].replace("-", "")
    exec_plugin.control(ttl=12, user=user, revoked_runs=1)
    ns = ctx.namespace()
    srv = kubeconfig_server(ctx, exec_plugin.kubeconfig())
    configmaps(ns, "a")
    since = webhook_log_size()
    watch("configmaps", srv, namespace=ns)  # the probe: run 0 revoked -> 401 -> run 1
    runs = [r["done"] for r in exec_plugin.runs()]
    assert runs[0]["revoked"] and not runs[1]["revoked"], runs
    wait_watching(srv, "configmaps")

    # the worker's next run (its refresh ahead of expiry) hands out a revoked token
    n = len(exec_plugin.runs())
    exec_plugin.update(revoked_runs=n + 1)

    def recovered():
        rs = exec_plugin.runs()[n:]
        bad = [i for i, r in enumerate(rs) if r["done"] and r["done"]["revoked"]]
        return bad and any(r["done"] and not r["done"]["revoked"] for r in rs[bad[0] + 1:])
    wait_until(recovered, timeout=60, msg="the worker refreshed past a revoked token")
    reasons = {r["reason"] for r in webhook_reviews(since=since, user=user)}
    assert {"bad-signature", "ok"} <= reasons, reasons
    configmaps(ns, "b")
    assert_table_matches_server("k8s.configmaps", srv, ["configmaps", "-n", ns])
    assert watch_status(srv, "configmaps")["state"] == "watching"

    # every token refused (a plugin of its own, which no watch runs): one more run, then the error
    refused = ExecPlugin(exec_plugin.dir.name + "-refused")
    refused.control(ttl=300, user=user, revoked_runs=10 ** 6)
    other = kubeconfig_server(ctx, refused.kubeconfig(), "-refused")
    e = watch_error("configmaps", other, namespace=ns)
    assert e.pgcode == "28000", e.pgerror
    assert [r["done"]["revoked"] for r in refused.runs()] == [True, True], refused.runs()


def test_plugin_errors_are_clear(ctx, exec_plugin):
    """watch() on a misconfigured or misbehaving plugin: an SQLSTATE and
    client-go's wording; nothing registered."""
    ns = ctx.namespace()
    missing = exec_plugin.kubeconfig("missing", command="/nonexistent/aws-iam-authenticator",
                                     install_hint="Install aws-iam-authenticator for the postgres user.")
    e = watch_error("configmaps", kubeconfig_server(ctx, missing, "-missing"), namespace=ns)
    assert e.pgcode == "58P01", e.pgerror
    assert "Install aws-iam-authenticator" in e.pgerror, e.pgerror

    always = exec_plugin.kubeconfig("always", interactive_mode="Always")
    e = watch_error("configmaps", kubeconfig_server(ctx, always, "-always"), namespace=ns)
    assert e.pgcode == "0A000", e.pgerror
    assert "interactive" in e.pgerror

    v1_no_mode = exec_plugin.kubeconfig("v1nomode", api_version=EXEC_V1, interactive_mode=None)
    e = watch_error("configmaps", kubeconfig_server(ctx, v1_no_mode, "-nomode"), namespace=ns)
    assert "interactiveMode must be specified" in e.pgerror, e.pgerror

    plain = exec_plugin.kubeconfig("plain")
    srv = kubeconfig_server(ctx, plain, "-plain")
    exec_plugin.control(api_version="client.authentication.k8s.io/v1alpha1")
    e = watch_error("configmaps", srv, namespace=ns)
    assert e.pgcode == "28000", e.pgerror
    assert "plugin returned version client.authentication.k8s.io/v1alpha1" in e.pgerror
    exec_plugin.control(garbage="not json")
    e = watch_error("configmaps", srv, namespace=ns)
    assert "decoding stdout" in e.pgerror, e.pgerror
    exec_plugin.control(fail={"exit": 1, "stderr": "could not get token: AccessDenied"})
    e = watch_error("configmaps", srv, namespace=ns)
    assert "AccessDenied" in e.pgerror and "exit code 1" in e.pgerror, e.pgerror
    assert sql_one("SELECT count(*) FROM kwatch.registrations WHERE server LIKE %s",
                   (ctx.base + "%",)) == 0


def test_exec_plugin_certificate(ctx, exec_plugin, tls_files):
    """A plugin that answers a client certificate (clientCertificateData)."""
    crt, key = tls_files.exec_client
    exec_plugin.control(cert={"cert_file": crt, "key_file": key})
    ns = ctx.namespace()
    srv = kubeconfig_server(ctx, exec_plugin.kubeconfig())
    configmaps(ns, "x")
    watch("configmaps", srv, namespace=ns)
    wait_watching(srv, "configmaps")
    assert_table_matches_server("k8s.configmaps", srv, ["configmaps", "-n", ns])


@pytest.mark.parametrize("kind", ["http", "https", "socks5"])
def test_proxy_url(ctx, exec_plugin, make_proxy, tls_files, kind):
    """proxy-url in the kubeconfig, or the server option: every request goes
    through the proxy (CONNECT, TLS to the proxy, SOCKS5)."""
    exec_plugin.control(ttl=300, user="p" + kind)
    px = make_proxy(kind)
    ca = tls_files.proxy_ca if kind == "https" else None
    ns = ctx.namespace()
    kc = exec_plugin.kubeconfig(proxy_url=px.url)
    srv = kubeconfig_server(ctx, kc)
    if ca:
        # the https proxy's certificate comes from its own CA: trust both
        bundle = exec_plugin.dir / "bundle.crt"
        bundle.write_text(open(conftest.CLUSTER.ca).read() + open(ca).read())
        bundle.chmod(0o644)
        sql(pgsql.SQL("ALTER SERVER {} OPTIONS (ADD certificate_authority {})").format(
            pgsql.Identifier(srv), pgsql.Literal(str(bundle))))
    configmaps(ns, "via-proxy")
    watch("configmaps", srv, namespace=ns)
    wait_watching(srv, "configmaps")
    assert_table_matches_server("k8s.configmaps", srv, ["configmaps", "-n", ns])
    api = conftest.CLUSTER.server.split("://")[1]
    assert api in px.targets, px.targets

    # the server option, on a plain token server
    px2 = make_proxy(kind)
    srv2 = ctx.server("-opt", auth="token")
    opts = [("proxy_url", px2.url)]
    if ca:
        opts = [("proxy_url", px2.url)]
        sql(pgsql.SQL("ALTER SERVER {} OPTIONS (SET certificate_authority {})").format(
            pgsql.Identifier(srv2), pgsql.Literal(str(bundle))))
    for k, v in opts:
        sql(pgsql.SQL("ALTER SERVER {} OPTIONS (ADD {} {})").format(
            pgsql.Identifier(srv2), pgsql.SQL(k), pgsql.Literal(v)))
    watch("configmaps", srv2, namespace=ns)
    wait_watching(srv2, "configmaps")
    assert api in px2.targets, px2.targets


def test_tls_failures_name_the_server_and_the_cause(ctx, tls_forwarder, tls_files):
    """Wrong CA, expired certificate, wrong host name (tls_server_name
    fixes it), a client certificate the API server does not accept."""
    ns = ctx.namespace()

    def server_at(fw, suffix, **extra):
        name = ctx.base + suffix
        opts = {"api_server": fw.url, "certificate_authority": conftest.CLUSTER.ca, **extra}
        sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch OPTIONS ({})").format(
            pgsql.Identifier(name), pgsql.SQL(", ").join(
                pgsql.SQL("{} {}").format(pgsql.SQL(k), pgsql.Literal(v)) for k, v in opts.items())))
        sql(pgsql.SQL("CREATE USER MAPPING FOR CURRENT_USER SERVER {} OPTIONS (token {})")
            .format(pgsql.Identifier(name), pgsql.Literal(conftest.CLUSTER.token)))
        ctx.servers.append(name)
        return name

    for which, suffix, words in [("wrong_ca", "-ca", "certificate authority"),
                                 ("expired", "-expired", "expired"),
                                 ("wrong_host", "-host", "tls-server-name")]:
        fw = tls_forwarder(which)
        srv = server_at(fw, suffix)
        e = watch_error("configmaps", srv, namespace=ns)
        assert e.pgcode == "HV00N", e.pgerror
        assert srv in e.diag.message_primary and "TLS handshake failed" in e.pgerror, e.pgerror
        assert words in (e.diag.message_hint or ""), (which, e.pgerror, e.diag.message_hint)
        if which == "wrong_host":
            fixed = server_at(fw, "-host-fixed", tls_server_name=WRONG_HOST)
            watch("configmaps", fixed, namespace=ns)
            wait_watching(fixed, "configmaps")

    crt, key = tls_files.unknown_client
    name = cert_server(ctx, "-client", crt, key)
    e = watch_error("configmaps", name, namespace=ns)
    assert e.pgcode == "28000", e.pgerror
    assert "client certificate" in (e.diag.message_hint or ""), e.pgerror


def test_rotated_client_certificate_is_used_without_restart(ctx, tls_files):
    """Client certificate and key files are read again when they change: a
    watch failing with a certificate the server rejects recovers once the
    files hold a good one, with no restart and no ALTER."""
    bad_crt, bad_key = tls_files.unknown_client
    good_crt, good_key = tls_files.exec_client
    d = conftest.TEST_DIR / "auth" / ("rot-" + ctx.base[-12:])
    d.mkdir(parents=True, exist_ok=True)
    crt, key = d / "client.crt", d / "client.key"
    for src, dst in ((bad_crt, crt), (bad_key, key)):
        dst.write_bytes(open(src, "rb").read())
        dst.chmod(0o644)
    ns = ctx.namespace()
    name = cert_server(ctx, "", crt, key)
    e = watch_error("configmaps", name, namespace=ns)
    assert e.pgcode == "28000", e.pgerror
    for src, dst in ((good_crt, crt), (good_key, key)):
        tmp = dst.with_suffix(".new")
        tmp.write_bytes(open(src, "rb").read())
        tmp.chmod(0o644)
        tmp.replace(dst)
    configmaps(ns, "after-rotation")
    watch("configmaps", name, namespace=ns)
    wait_watching(name, "configmaps")
    assert_table_matches_server("k8s.configmaps", name, ["configmaps", "-n", ns])


def pods_request_headers(fake, srv):
    """Watches pods on `srv` (the fake API server, which gets one pod) until
    watching; returns the headers of every pods request the fake recorded,
    each a list of (lower-case name, value)."""
    from faults_support import pod
    fake.create("pods", pod("p0"))
    watch("pods", srv)
    wait_watching(srv, "pods")
    reqs = [r for r in fake.requests if r.resource == "pods"]
    assert reqs
    return [[(k.lower(), v) for k, v in r.headers] for r in reqs]


def test_impersonation_headers(ctx, fake):
    """Server options impersonate_user/uid/groups become Impersonate-*
    headers on every request (client-go impersonatingRoundTripper); the fake
    API server records them (the real one would need RBAC to show them)."""
    from faults_support import fake_server
    srv = fake_server(ctx, fake)
    sql(pgsql.SQL("ALTER SERVER {} OPTIONS (ADD impersonate_user 'jane@example.com',"
                  " ADD impersonate_uid 'u-42', ADD impersonate_groups 'devs, system:authenticated')")
        .format(pgsql.Identifier(srv)))
    for h in pods_request_headers(fake, srv):
        assert ("impersonate-user", "jane@example.com") in h, h
        assert ("impersonate-uid", "u-42") in h, h
        assert [v for k, v in h if k == "impersonate-group"] == ["devs", "system:authenticated"], h

    e = None
    try:
        sql(pgsql.SQL("ALTER SERVER {} OPTIONS (DROP impersonate_user)").format(pgsql.Identifier(srv)))
    except Exception as ex:  # groups without a user to impersonate
        e = ex
    assert e is not None and "require option \"impersonate_user\"" in str(e), e


def test_user_agent_names_the_installed_version(ctx, fake):
    """Every request, from a backend (kwatch.watch()'s probe: a LIST with
    limit=1) and from the worker (LIST, WATCH), says User-Agent
    kwatch/<version>, <version> being the installed extension's
    (pg_extension.extversion): the library takes it from kwatch.control's
    default_version at build time, the one place it is written."""
    from faults_support import fake_server
    version = sql_one("SELECT extversion FROM pg_extension WHERE extname = 'kwatch'")
    srv = fake_server(ctx, fake)
    pods_request_headers(fake, srv)
    # "watching" is shown as the WATCH is sent: wait until the fake has it
    fake.wait_for_request(lambda r: r.resource == "pods" and r.kind == "watch")
    reqs = [r for r in fake.requests if r.resource == "pods"]
    kinds = {(r.kind, r.query.get("limit") == "1") for r in reqs}
    assert {("list", True), ("list", False), ("watch", False)} <= kinds, kinds
    for r in reqs:
        assert [v for k, v in r.headers if k.lower() == "user-agent"] == ["kwatch/" + version], r


def test_impersonation_from_kubeconfig(ctx, fake):
    """A kubeconfig user's as, as-uid, as-groups and as-user-extra become the
    same Impersonate-* headers, one Impersonate-Extra-<key> per value with
    the key percent-encoded (client-go transport/round_trippers.go
    impersonatingRoundTripper, headerKeyEscape)."""
    from auth_support import _auth_dir
    doc = {
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": fake.url}}],
        "users": [{"name": "impersonator", "user": {
            "token": "t0k3n", "as": "system:serviceaccount:ops:deployer", "as-uid": "u-7",
            "as-groups": ["ops", "system:authenticated"],
            "as-user-extra": {"scopes": ["view", "edit"], "example.com/team": ["sre"]}}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "impersonator"}}],
    }
    path = _auth_dir() / ("impersonate-%s.yaml" % ctx.base[-12:])
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o644)
    name = ctx.base
    sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch OPTIONS (kubeconfig {},"
                  " allow_insecure_http 'true')").format(pgsql.Identifier(name), pgsql.Literal(str(path))))
    ctx.servers.append(name)
    for h in pods_request_headers(fake, name):
        assert ("authorization", "Bearer t0k3n") in h, h
        assert ("impersonate-user", "system:serviceaccount:ops:deployer") in h, h
        assert ("impersonate-uid", "u-7") in h, h
        assert [v for k, v in h if k == "impersonate-group"] == ["ops", "system:authenticated"], h
        assert [v for k, v in h if k == "impersonate-extra-scopes"] == ["view", "edit"], h
        assert [v for k, v in h if k == "impersonate-extra-example.com%2fteam"] == ["sre"], h


def test_demo_with_an_exec_plugin_kubeconfig(ctx, exec_plugin):
    """`make demo KUBECONFIG=<an EKS-style kubeconfig>` works unchanged: its
    exec plugin (v1, provideClusterInfo, the CA embedded) runs for kubectl as
    the caller and for the server as postgres, the four demo watches sync
    and k8s.namespaces holds the cluster's namespaces, uid for uid."""
    import os
    import re
    import shutil
    import psycopg2
    from conftest import REPO, kubectl_json
    exec_plugin.control(ttl=600, user="demo" + ctx.base[-6:].replace("-", ""))
    kc = exec_plugin.kubeconfig(api_version=EXEC_V1, ca_data=True, provide_cluster_info=True)
    state = conftest.TEST_DIR / "demo-exec"
    env = dict(os.environ, KWATCH_DEMO_KUBECONFIG=kc, KWATCH_DEMO_DIR=str(state),
               KWATCH_DEMO_ENV=str(state / "env"))
    # a demo left by an earlier run (another cluster, another port) is not this one
    conftest.run(["bash", REPO / "test/demo/demo.sh", "stop"], env=env, check=False)
    shutil.rmtree(state, ignore_errors=True)
    try:
        out = conftest.run(["bash", REPO / "test/demo/demo.sh", "start"], env=env, timeout=600, check=False)
        assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
        assert "exec credential plugins, run by the PostgreSQL server as the postgres user" in out.stderr
        pgenv = dict(re.findall(r"export (PG\w+)='?([^'\n]*)'?", (state / "env").read_text()))
        conn = psycopg2.connect(host=pgenv["PGHOST"], port=pgenv["PGPORT"],
                                dbname=pgenv["PGDATABASE"], user=pgenv["PGUSER"])
        conn.autocommit = True
        cur = conn.cursor()

        def synced():
            cur.execute("SELECT count(*) FILTER (WHERE state = 'watching'), count(*) FROM kwatch.watches")
            return cur.fetchone() == (4, 4)
        wait_until(synced, timeout=60, msg="the demo's four watches are watching")
        def namespaces_equal():
            want = {o["metadata"]["uid"] for o in kubectl_json("get", "namespaces")["items"]}
            cur.execute("SELECT uid FROM k8s.namespaces")
            return {r[0] for r in cur.fetchall()} == want
        wait_until(namespaces_equal, timeout=30, msg="k8s.namespaces = the cluster's")
        runs = [r for r in exec_plugin.runs() if r["done"]]
        assert {r["uid"] for r in runs} >= {0, int(conftest.run(["id", "-u", "postgres"]).stdout)}, runs
        conn.close()
    finally:
        conftest.run(["bash", REPO / "test/demo/demo.sh", "stop"], env=env, check=False)
        shutil.rmtree(state, ignore_errors=True)


def test_reading_files_is_not_running_programs(ctx, exec_plugin):
    """Issue 22, hole 2, replayed: a role with pg_read_server_files (not
    pg_execute_server_program) sets a kubeconfig whose exec plugin is
    /bin/sh -c 'id > FILE' and watches: 0.4.0 ran it as the server's OS
    user.  Now the kubeconfig is refused where it is set (42501, naming
    pg_execute_server_program), and a server handed to such a role after a
    superuser set it runs nothing either: not for watch(), not for a live
    table, not in the worker, whose running watch fails with 42501."""
    filer = ("kwr_filer_" + conftest.RUN_ID).lower()
    marker = exec_plugin.dir / "ran-as"
    evil = exec_plugin.kubeconfig("evil.yaml", command="/bin/sh",
                                  args=["-c", "id > %s" % marker])
    good = exec_plugin.kubeconfig()
    r = pgsql.Identifier(filer)
    sql(pgsql.SQL("CREATE ROLE {} IN ROLE pg_read_server_files").format(r))
    try:
        sql(pgsql.SQL("GRANT USAGE ON FOREIGN DATA WRAPPER kwatch TO {};"
                      " GRANT EXECUTE ON FUNCTION kwatch.watch, kwatch.unwatch TO {}").format(r, r))
        conn = conftest.PG.connect(autocommit=True)
        try:
            with conn.cursor() as cur:
                cur.execute(pgsql.SQL("SET ROLE {}").format(r))
                with pytest.raises(psycopg2.Error) as e:
                    cur.execute(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch"
                                          " OPTIONS (kubeconfig {})").format(
                        pgsql.Identifier(ctx.base + "-evil"), pgsql.Literal(evil)))
                assert e.value.pgcode == "42501", e.value.pgerror
                assert "pg_execute_server_program" in e.value.diag.message_detail, e.value.pgerror
        finally:
            conn.close()

        # a superuser's server handed to the role: nothing runs for it
        srv = kubeconfig_server(ctx, evil, "-handed")
        sql(pgsql.SQL("ALTER SERVER {} OWNER TO {}").format(pgsql.Identifier(srv), r))
        e = watch_error("pods", srv)
        assert e.pgcode == "42501", e.pgerror
        assert "pg_execute_server_program" in e.diag.message_primary, e.pgerror
        schema = pgsql.Identifier(filer + "_live")
        sql(pgsql.SQL("CREATE SCHEMA {}").format(schema))
        try:
            sql(pgsql.SQL("CREATE FOREIGN TABLE {}.pods (name text) SERVER {}"
                          " OPTIONS (resource 'pods', use_remote_estimate 'false')").format(
                schema, pgsql.Identifier(srv)))
            with pytest.raises(psycopg2.Error) as e:
                sql(pgsql.SQL("SELECT name FROM {}.pods").format(schema))
            assert e.value.pgcode == "42501", e.value.pgerror
        finally:
            sql(pgsql.SQL("DROP SCHEMA {} CASCADE").format(schema))
        assert not marker.exists(), "the plugin ran"

        # a running watch whose server is handed over: the worker, which
        # compares its settings with the catalog at that commit, fails it
        ns = ctx.namespace()
        srv2 = kubeconfig_server(ctx, good, "-running")
        watch("configmaps", srv2, namespace=ns)
        wait_watching(srv2, "configmaps")
        sql(pgsql.SQL("ALTER SERVER {} OWNER TO {}").format(pgsql.Identifier(srv2), r))
        st = conftest.wait_status(srv2, "configmaps", lambda s: s["state"] == "failed", timeout=40,
                                  msg="the watch of a server handed to the role to fail")
        assert "pg_execute_server_program" in st["last_error"], st
        assert not marker.exists(), "the plugin ran"
    finally:
        for s in list(ctx.servers):
            sql(pgsql.SQL("ALTER SERVER {} OWNER TO CURRENT_USER").format(pgsql.Identifier(s)))
        sql(pgsql.SQL("DROP OWNED BY {} CASCADE").format(r))
        sql(pgsql.SQL("DROP ROLE {}").format(r))
