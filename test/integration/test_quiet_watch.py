"""A quiet watch is healthy; a silent connection is not (issue 26).

A WATCH of a resource without changes receives nothing until the API server
ends it at the timeoutSeconds kwatch asked for (kwatch.watch_timeout..2x);
that clean close is a rotation, counted in watch_calls, never in last_error
or an error counter.  A connection that stays open but silent past that
(a hung proxy) is given up kwatch.inactivity_timeout later: bounded by
2 x kwatch.watch_timeout + kwatch.inactivity_timeout (README "Quiet
watches and dead connections").  The times are shortened here so that both take seconds."""
from conftest import kubectl, sql, wait_until, watch, watch_status, settings  # noqa: F401
from faults_support import fake_server, proxy, wait_status  # noqa: F401

ERRORS = ("http_errors", "decode_errors", "database_errors")


def configmap_in(table, srv, ns, name):
    return sql("SELECT 1 FROM %s WHERE cluster = %%s AND namespace = %%s AND name = %%s" % table,
               (srv, ns, name))


def test_quiet_watch_rotates_without_errors(ctx, settings):
    """Watches idle for longer than kwatch.inactivity_timeout, over the real
    API server's HTTP/2: each ends at its timeoutSeconds and the next one
    starts, with last_error NULL and every error counter at 0."""
    # old behaviour: 1 s of silence was a stall; a WATCH now lasts 2-4 s
    settings(watch_timeout="2s", inactivity_timeout="1s")
    ns = ctx.namespace()
    srv = ctx.server()
    kubectl("create", "configmap", "only", "-n", ns)
    table = watch("configmaps", srv, namespace=ns)
    st = wait_status(srv, "configmaps", lambda s: s["state"] == "watching" and s["synced"])
    first = st["watch_calls"]
    # three rotations in a row, each WATCH silent 2-4 s: longer than 1 s
    st = wait_status(srv, "configmaps", lambda s: s["watch_calls"] >= first + 3, timeout=60,
                     msg="three quiet WATCHes ended by the server")
    assert st["last_error"] is None and st["last_error_at"] is None, st
    assert all(st[c] == 0 for c in ERRORS), st
    assert st["relists"] == 0 and st["list_calls"] == 1, st
    assert st["state"] == "watching" and st["healthy"], st
    # and the rotated watch still delivers
    kubectl("create", "configmap", "after-quiet", "-n", ns)
    wait_until(lambda: configmap_in(table, srv, ns, "after-quiet"), 30, "the change after the quiet")
    st = watch_status(srv, "configmaps")
    assert st["last_error"] is None and all(st[c] == 0 for c in ERRORS), st


def test_frozen_connection_is_given_up_past_timeout_seconds(ctx, proxy, settings):
    """A connection through the fault proxy (HTTP/1.1) that stays open but
    passes nothing more -- the kernel still acknowledges, so TCP keepalive
    cannot tell -- is given up once the WATCH is silent
    kwatch.inactivity_timeout past its timeoutSeconds (at most 2 x 2 s + 2 s
    here): an HTTP error, and the watch resumes on a new connection long
    before the freeze (10 minutes) would end it."""
    settings(watch_timeout="2s", inactivity_timeout="2s")
    ns = ctx.namespace()
    srv = fake_server(ctx, proxy)
    kubectl("create", "configmap", "before", "-n", ns)
    table = watch("configmaps", srv, namespace=ns)
    wait_status(srv, "configmaps", lambda s: s["state"] == "watching" and s["synced"])
    wait_until(lambda: configmap_in(table, srv, ns, "before"), 30, "the first row")
    frozen = wait_until(lambda: proxy.freeze(600), 30, "a connection to freeze")
    assert frozen >= 1
    kubectl("create", "configmap", "during-freeze", "-n", ns)
    wait_until(lambda: configmap_in(table, srv, ns, "during-freeze"), 60,
               "the change made during the freeze (the frozen WATCH given up)")
    st = watch_status(srv, "configmaps")
    assert st["http_errors"] >= 1, st
    assert "past the timeoutSeconds" in (st["last_error"] or ""), st
    assert st["relists"] == 0, st
