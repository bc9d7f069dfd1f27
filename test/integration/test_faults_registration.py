"""Fault suite, bad registrations (issue 3 part 4): unknown resource, bad
selector, missing or unreachable server, forbidden — at kwatch.watch() a
clear SQL error with an SQLSTATE; later, a `failed` (or `backoff`) state
with the server's message in last_error, and recovery once it is fixed."""
from psycopg2 import sql as pgsql

from conftest import free_port, sql, sql_one, watch, watch_error, watch_status
from faults_support import (fake, fake_server, pod, recovers, wait_converged,  # noqa: F401
                            wait_status, worker_requests)

FORBIDDEN = ('pods is forbidden: User "system:serviceaccount:default:kwatch" cannot list '
             'resource "pods" in API group "" at the cluster scope')


def registered(server):
    return sql_one("SELECT count(*) FROM kwatch.registrations WHERE server = %s", (server,))


def test_unknown_resource(ctx, fake):
    srv = fake_server(ctx, fake)
    e = watch_error("frobnicators", srv)
    assert e.pgcode == "42704", e.pgerror
    assert 'resource "frobnicators" not found on server "%s"' % srv in e.diag.message_primary
    assert registered(srv) == 0


def test_resource_without_list_and_watch(ctx, fake):
    srv = fake_server(ctx, fake)
    e = watch_error("bindings", srv)          # verbs: ["create"] in the 1.20 discovery
    assert e.pgcode == "0A000", e.pgerror
    assert registered(srv) == 0


def test_bad_label_selector_carries_the_servers_message(ctx, fake):
    srv = fake_server(ctx, fake)
    e = watch_error("pods", srv, label_selector="app in (web")
    assert e.pgcode == "22023", e.pgerror
    assert "unable to parse requirement" in e.diag.message_primary, e.pgerror
    e = watch_error("pods", srv, field_selector="spec.frobs=1")
    assert e.pgcode == "22023" and "field label not supported" in e.diag.message_primary, e.pgerror
    assert registered(srv) == 0


def test_missing_server(ctx, fake):
    e = watch_error("pods", ctx.base + "-nosuchserver")
    assert e.pgcode == "42704" and "does not exist" in e.diag.message_primary, e.pgerror


def test_unreachable_server(ctx):
    name = ctx.base + "-down"
    sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch OPTIONS (api_server {},"
                  " allow_insecure_http 'true')")
        .format(pgsql.Identifier(name), pgsql.Literal("http://127.0.0.1:%d" % free_port())))
    ctx.servers.append(name)
    e = watch_error("pods", name)
    assert e.pgcode == "HV00N", e.pgerror
    assert name in e.diag.message_primary
    assert registered(name) == 0


def test_forbidden_at_registration(ctx, fake):
    srv = fake_server(ctx, fake)
    fake.inject("status", on="list", code=403, message=FORBIDDEN)
    e = watch_error("pods", srv)
    assert e.pgcode == "42501", e.pgerror
    assert FORBIDDEN in e.diag.message_primary, e.pgerror
    assert "RBAC" in (e.diag.message_hint or ""), e.pgerror
    assert registered(srv) == 0


def test_discovery_answered_by_a_proxy_page(ctx, fake):
    srv = fake_server(ctx, fake)
    fake.inject("html", on="discovery", code=502)
    e = watch_error("pods", srv)
    assert e.pgcode not in ("XX000", None), e.pgerror
    assert srv in e.diag.message_primary and "502" in (e.diag.message_detail or e.pgerror), e.pgerror
    assert registered(srv) == 0


def test_forbidden_after_registration_fails_then_recovers(ctx, fake, settings):
    settings(backoff_max="2s")          # failed watches retry at half the maximum backoff
    srv = fake_server(ctx, fake)
    fake.create("pods", pod("p0"))
    table = watch("pods", srv)
    wait_converged(table, srv, fake, "pods")
    # RBAC revoked: every request refused
    f = fake.inject("status", on="any", code=403, message=FORBIDDEN, times=None)
    fake.set_down(True)
    fake.set_down(False)
    st = wait_status(srv, "pods", lambda s: s["state"] == "failed", msg="failed state")
    assert FORBIDDEN in st["last_error"] and "403" in st["last_error"], st
    assert not st["healthy"]
    n = len(f.hits)
    wait_status(srv, "pods", lambda s: len(f.hits) > n, msg="a retry while failed")
    # RBAC granted again: the watch recovers by itself
    recovers(fake, srv, table, "p1")


def test_resource_gone_after_registration_fails_with_message(ctx, fake, settings):
    settings(backoff_max="2s")
    srv = fake_server(ctx, fake)
    table = watch("pods", srv)
    wait_status(srv, "pods", lambda s: s["state"] == "watching")
    fake.inject("status", on="any", code=404, times=None,
                message="the server could not find the requested resource")
    fake.set_down(True)
    fake.set_down(False)
    st = wait_status(srv, "pods", lambda s: s["state"] == "failed", msg="failed state")
    assert "could not find the requested resource" in st["last_error"], st
    fake.clear_faults()
    fake.create("pods", pod("back"))
    wait_converged(table, srv, fake, "pods", timeout=40)


def test_server_down_after_registration_backs_off_then_resumes(ctx, fake):
    srv = fake_server(ctx, fake)
    fake.create("pods", pod("p0"))
    table = watch("pods", srv)
    wait_converged(table, srv, fake, "pods")
    lists = len(worker_requests(fake, "list"))
    fake.set_down(True)
    st = wait_status(srv, "pods", lambda s: s["state"] == "backoff" and s["http_errors"] >= 2,
                     msg="backoff while down")
    assert "WATCH request failed" in st["last_error"], st
    fake.create("pods", pod("p1"))
    fake.set_down(False)
    wait_converged(table, srv, fake, "pods", timeout=40)
    # history kept: resumed by a watch, no relist
    assert len(worker_requests(fake, "list")) == lists
