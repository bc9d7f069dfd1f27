"""Fault suite, bad objects (issue 3 part 4): text PostgreSQL cannot store as
given (\\u0000, invalid UTF-8, lone surrogate escapes), a 2 MB object, nesting
10,000 levels deep (the most Kubernetes' own JSON encoder writes) and deeper,
objects without identity.  Each arrives once in a LIST page and once in a
WATCH stream between good objects: the good objects are all stored, the bad
one is stored sanitized or skipped (README "Objects PostgreSQL cannot
store"), counted in kwatch.watches, logged with its identity, and the watch
goes on."""
import re

from conftest import sql, watch, watch_status
from faults_support import (fake, fake_server, pod, wait_converged, wait_status,  # noqa: F401
                            RawJSON, log_mark, log_since)


def sanitized(obj):
    """What kwatch stores for obj: NUL written as the six characters \\u0000,
    each invalid UTF-8 byte (a lone surrogate from surrogateescape) as U+FFFD."""
    if isinstance(obj, dict):
        return {sanitized(k): sanitized(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [sanitized(v) for v in obj]
    if isinstance(obj, str):
        return re.sub("[\udc80-\udcff]", "\ufffd", obj.replace("\x00", "\\u0000"))
    return obj


def run_case(ctx, fake, bad_pod, path, expect, transform=sanitized):
    """Good pods around one bad pod, delivered by `path` ("list": present
    before the watch starts; "watch": created while watching).  expect:
    "sanitized" (stored as transform(obj)) or "skipped" (absent).  Returns
    (server, table, status, bad object, log text)."""
    srv = fake_server(ctx, fake)
    mark = log_mark()
    fake.create("pods", pod("good-a"))
    if path == "list":
        bad = fake.create("pods", bad_pod)
        fake.create("pods", pod("good-z"))
        table = watch("pods", srv)
    else:
        table = watch("pods", srv)
        wait_status(srv, "pods", lambda s: s["state"] == "watching")
        fake.create("pods", pod("good-b"))
        bad = fake.create("pods", bad_pod)
        fake.create("pods", pod("good-z"))
    exclude = (bad["metadata"]["uid"],) if expect == "skipped" else ()
    wait_converged(table, srv, fake, "pods", exclude=exclude, transform=transform)
    field = "sanitized_objects" if expect == "sanitized" else "skipped_objects"
    st = wait_status(srv, "pods", lambda s: s[field] >= 1 and s["state"] == "watching",
                     msg=field)
    assert st[field] == 1, st
    # the others went on: one LIST, no relist, no failed batch
    assert st["relists"] == 0 and st["database_errors"] == 0, st
    if path == "list":
        # each stored object reported ADDED once: none for a batch that
        # failed on the bad object and was written again object by object
        rows = sql("SELECT count(*) FROM %s WHERE cluster = %%s" % table, (srv,))[0][0]
        st = wait_status(srv, "pods", lambda s: s["added"] >= rows, msg="added >= %d" % rows)
        assert st["added"] == rows, (st["added"], rows)
    log = log_since(mark)
    m = bad["metadata"]
    assert re.search(r"%s/%s \(uid %s\)" % (m["namespace"], re.escape(m["name"]), m["uid"]), log), \
        "the log does not name the object: %s" % log[-3000:]
    # the watch is still live
    later = fake.create("pods", pod("good-later"))
    wait_converged(table, srv, fake, "pods", exclude=exclude, transform=transform)
    # the status shows the batch's resourceVersion once the worker has
    # collected its result, a pass of its loop after the rows committed
    # (the table may equal the server a moment before: CI's stop 39 run)
    rv = later["metadata"]["resourceVersion"]
    wait_status(srv, "pods", lambda s: s["resource_version"] == rv, msg="resource_version " + rv)
    return srv, table, st, bad, log


def nul_pod():
    return pod("nul", annotations={"note": "before\x00after", "k\x00ey": "v"})


def utf8_pod():
    return pod("badutf8", annotations={"note": "caf\udce9 \udcff\udcfe end"},
               labels={"app": "web"})


def stored_note(table, srv, obj):
    """The annotation `note` of obj's row, as stored."""
    return sql("SELECT object->'metadata'->'annotations'->>'note' FROM %s WHERE cluster = %%s "
               "AND uid = %%s" % table, (srv, obj["metadata"]["uid"]))[0][0]


def test_nul_escape_in_list_is_stored_escaped(ctx, fake):
    srv, table, st, bad, _ = run_case(ctx, fake, nul_pod(), "list", "sanitized")
    assert stored_note(table, srv, bad) == "before\\u0000after"


def test_nul_escape_in_watch_is_stored_escaped(ctx, fake):
    run_case(ctx, fake, nul_pod(), "watch", "sanitized")


def test_invalid_utf8_in_list_is_replaced(ctx, fake):
    srv, table, st, bad, _ = run_case(ctx, fake, utf8_pod(), "list", "sanitized")
    assert stored_note(table, srv, bad) == "caf\ufffd \ufffd\ufffd end"


def test_invalid_utf8_in_watch_is_replaced(ctx, fake):
    run_case(ctx, fake, utf8_pod(), "watch", "sanitized")


def surrogate_pod():
    # lone UTF-16 surrogate escapes: valid JSON, refused by jsonb (22P05);
    # stored as U+FFFD, as Go's encoding/json and json-c decode them
    return pod("surrogate", annotations={"high": RawJSON(b'"\\ud800 alone"'),
                                         "low": RawJSON(b'"x\\udfff"'),
                                         "pair": RawJSON(b'"\\ud83d\\ude00"')})


def unsurrogate(obj):
    o = sanitized(obj)
    if o["metadata"]["name"] != "surrogate":
        return o
    o["metadata"]["annotations"] = {"high": "\ufffd alone", "low": "x\ufffd",
                                    "pair": "\U0001F600"}
    return o


def test_lone_surrogate_in_list_is_replaced(ctx, fake):
    run_case(ctx, fake, surrogate_pod(), "list", "sanitized", transform=unsurrogate)


def test_lone_surrogate_in_watch_is_replaced(ctx, fake):
    run_case(ctx, fake, surrogate_pod(), "watch", "sanitized", transform=unsurrogate)


def overflow_pod():
    # valid JSON that jsonb refuses: "value overflows numeric format" (22003)
    return pod("overflow", spec={"containers": [], "n": RawJSON(b"1e1000000")})


def test_object_jsonb_refuses_in_list_is_skipped(ctx, fake):
    run_case(ctx, fake, overflow_pod(), "list", "skipped")


def test_object_jsonb_refuses_in_watch_is_skipped(ctx, fake):
    run_case(ctx, fake, overflow_pod(), "watch", "skipped")


def test_object_modified_into_one_jsonb_refuses_loses_its_stale_row(ctx, fake):
    """An object stored fine, then modified into something PostgreSQL cannot
    store: skipped objects are absent from the table, as after a relist."""
    srv = fake_server(ctx, fake)
    p = fake.create("pods", pod("turns-bad"))
    fake.create("pods", pod("good"))
    table = watch("pods", srv)
    wait_converged(table, srv, fake, "pods")
    fake.update("pods", "default", "turns-bad", lambda o: o["spec"].update(n=RawJSON(b"-1e999999")))
    fake.create("pods", pod("good-after"))
    wait_converged(table, srv, fake, "pods", exclude=(p["metadata"]["uid"],))
    st = watch_status(srv, "pods")
    assert st["skipped_objects"] == 1 and st["relists"] == 0 and st["deleted"] == 1, st
    # and when it becomes storable again, it is back
    fake.update("pods", "default", "turns-bad", lambda o: o["spec"].pop("n"))
    wait_converged(table, srv, fake, "pods")


def big_pod():
    return pod("big", annotations={"blob": "x" * (2 * 1024 * 1024)})


def test_2mb_object_in_list(ctx, fake):
    srv, table, st, bad, _ = run_case_stored(ctx, fake, big_pod(), "list")


def test_2mb_object_in_watch(ctx, fake):
    run_case_stored(ctx, fake, big_pod(), "watch")


def run_case_stored(ctx, fake, p, path):
    """Like run_case for an object stored as is (no counter moves)."""
    srv = fake_server(ctx, fake)
    fake.create("pods", pod("good-a"))
    if path == "list":
        bad = fake.create("pods", p)
        table = watch("pods", srv)
    else:
        table = watch("pods", srv)
        wait_status(srv, "pods", lambda s: s["state"] == "watching")
        bad = fake.create("pods", p)
    fake.create("pods", pod("good-z"))
    wait_converged(table, srv, fake, "pods", timeout=60)
    st = watch_status(srv, "pods")
    assert st["skipped_objects"] == 0 and st["decode_errors"] == 0 and st["relists"] == 0, st
    return srv, table, st, bad, None


def deep_pod(depth):
    return pod("deep-%d" % depth,
               spec={"containers": [], "deep": RawJSON(b"[" * depth + b"]" * depth)})


def deep_case(ctx, fake, depth, path):
    srv = fake_server(ctx, fake)
    mark = log_mark()
    fake.create("pods", pod("good-a"))
    if path == "list":
        bad = fake.create("pods", deep_pod(depth))
        table = watch("pods", srv)
    else:
        table = watch("pods", srv)
        wait_status(srv, "pods", lambda s: s["state"] == "watching")
        bad = fake.create("pods", deep_pod(depth))
    fake.create("pods", pod("good-z"))
    uid = bad["metadata"]["uid"]
    # psycopg2 cannot load 10,000 nested arrays: compare without spec.deep
    def rows():
        return {r[0]: r[1] for r in sql("SELECT uid, resource_version FROM %s WHERE cluster = %%s"
                                        % table, (srv,))}
    want = {o["metadata"]["uid"]: o["metadata"]["resourceVersion"] for o in fake.objects("pods")}
    return srv, table, bad, uid, rows, want, mark


def test_10k_deep_object_in_list_is_stored(ctx, fake):
    srv, table, bad, uid, rows, want, _ = deep_case(ctx, fake, 10000, "list")
    from conftest import wait_until
    wait_until(lambda: rows() == want, 30, "all rows, the deep one included")
    depth = sql("SELECT length(object->'spec'->>'deep') FROM %s WHERE cluster = %%s AND uid = %%s"
                % table, (srv, uid))[0][0]
    assert depth == 20000
    st = watch_status(srv, "pods")
    assert st["skipped_objects"] == 0 and st["decode_errors"] == 0 and st["relists"] == 0, st


def test_10k_deep_object_in_watch_is_stored(ctx, fake):
    srv, table, bad, uid, rows, want, _ = deep_case(ctx, fake, 10000, "watch")
    from conftest import wait_until
    wait_until(lambda: rows() == want, 30, "all rows, the deep one included")
    st = watch_status(srv, "pods")
    assert st["skipped_objects"] == 0 and st["decode_errors"] == 0 and st["relists"] == 0, st


def test_100k_deep_object_in_list_is_skipped(ctx, fake):
    srv, table, bad, uid, rows, want, mark = deep_case(ctx, fake, 100000, "list")
    del want[uid]
    from conftest import wait_until
    wait_until(lambda: rows() == want, 30, "all rows but the deep one")
    st = wait_status(srv, "pods", lambda s: s["skipped_objects"] == 1 and s["state"] == "watching")
    assert st["relists"] == 0, st
    assert "default/deep-100000 (uid %s)" % uid in log_since(mark)


def test_100k_deep_object_in_watch_is_skipped(ctx, fake):
    srv, table, bad, uid, rows, want, mark = deep_case(ctx, fake, 100000, "watch")
    del want[uid]
    from conftest import wait_until
    wait_until(lambda: rows() == want, 60, "all rows but the deep one")
    st = wait_status(srv, "pods", lambda s: s["skipped_objects"] >= 1 and s["state"] == "watching")
    # a watch event over the decoder's depth limit makes the stream malformed:
    # the watch is retried from the last good RV, then (the same failure
    # three times) relists; the LIST skips the object
    assert st["decode_errors"] == 3 and st["relists"] == 1 and st["skipped_objects"] == 1, st
    assert "watch event nested deeper than" in log_since(mark)
    later = fake.create("pods", pod("good-later"))
    wait_until(lambda: later["metadata"]["uid"] in rows(), 30, "the watch to go on")


def test_object_over_64mb_in_list_is_skipped(ctx, fake):
    """An item larger than the decoder's limit (64 MB, src/decode/decode.c) whose
    last member is the string that makes it so: the item ends right after
    the string, and is skipped all the same, the others stored."""
    huge = pod("huge")
    huge["zzNote"] = "x" * (65 << 20)
    _, _, st, _, log = run_case(ctx, fake, huge, "list", "skipped")
    assert "larger than 64 MB" in log, log[-2000:]


def test_object_without_uid_is_skipped(ctx, fake):
    srv = fake_server(ctx, fake)
    mark = log_mark()
    fake.create("pods", pod("good-a"))
    nouid = fake.create("pods", pod("no-uid"))
    fake.update("pods", "default", "no-uid", lambda o: o["metadata"].pop("uid"))
    table = watch("pods", srv)
    wait_converged(table, srv, fake, "pods", exclude=(None,), timeout=30) if False else None
    from conftest import wait_until
    wait_until(lambda: sql("SELECT count(*) FROM %s WHERE cluster = %%s" % table, (srv,))[0][0] == 1,
               30, "the good pod")
    st = wait_status(srv, "pods", lambda s: s["skipped_objects"] == 1 and s["state"] == "watching")
    assert "default/no-uid has no metadata.uid" in log_since(mark)
    fake.update("pods", "default", "no-uid", lambda o: o["metadata"].update(labels={"x": "y"}))
    fake.create("pods", pod("good-b"))
    wait_until(lambda: sql("SELECT count(*) FROM %s WHERE cluster = %%s" % table, (srv,))[0][0] == 2,
               30, "the second good pod")
    wait_status(srv, "pods", lambda s: s["skipped_objects"] == 2)
    assert nouid


def test_escapes_split_across_chunks_in_watch(ctx, fake):
    """\\u0000, surrogate escapes and invalid UTF-8 arriving one byte per chunk."""
    srv = fake_server(ctx, fake)
    table = watch("pods", srv)
    wait_status(srv, "pods", lambda s: s["state"] == "watching")
    f = fake.inject("split", on="watch", chunk_bytes=1)
    fake.set_down(True)
    fake.set_down(False)
    fake.create("pods", pod("good-a"))
    fake.create("pods", nul_pod())
    fake.create("pods", utf8_pod())
    fake.create("pods", surrogate_pod())
    fake.create("pods", pod("esc", annotations={"q": 'a\\"b\\\\u0000c\\\\', "u": "\u00e9\u20ac"}))

    def expected(o):
        return unsurrogate(sanitized(o))
    wait_converged(table, srv, fake, "pods", transform=expected)
    assert f.hits and f.hits[0].events == 5
    st = watch_status(srv, "pods")
    assert st["sanitized_objects"] == 3 and st["decode_errors"] == 0, st


def counted_pod(name):
    """A pod whose bytes the framer only counts (issue 36's fast path) hold
    what it must still follow: escaped quotes and backslashes in strings
    nested in spec, status and metadata.annotations, arrays of objects,
    empty containers, and a managedFields entry, which is dropped."""
    tricky = 'q\\"}]{[,: \\\\ "x"'
    return pod(name, annotations={"a": tricky, "b\\\"]}": "{[\\"},
               managedFields=[{"manager": "m", "operation": "Update", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                                            "f:spec": {"f:containers": {'k:{"name":"c"}': {}}}}}],
               status={"phase": "Running", "conditions": [
                   {"type": "Ready", "status": "True", "message": tricky},
                   {"type": "x", "deep": {"a": [[], {}, [{"b": [1, 2.5e3, -0.1, True, None]}]]}}]},
               spec={"containers": [{"name": "c", "image": "registry.invalid/pause:1",
                                     "args": [tricky, "]", "}", "\\"]}], "nodeName": "n"})


def test_list_split_across_chunks(ctx, fake):
    """A LIST body arriving 1 byte, then 3 bytes per chunk (the framer's
    state carried across every boundary: inside strings, right after a
    backslash, between nesting levels it only counts) stores what an
    unsplit body stores: escapes in deep strings, sanitized text, and no
    managedFields."""
    fake.create("pods", nul_pod())
    fake.create("pods", surrogate_pod())
    for size in (1, 3):
        srv = fake_server(ctx, fake, suffix="_%d" % size)
        for i in range(3):
            fake.create("pods", counted_pod("counted-%d-%d" % (size, i)))
        f = fake.inject("split", on="list", chunk_bytes=size)
        table = watch("pods", srv)
        wait_converged(table, srv, fake, "pods", transform=unsurrogate)
        assert f.hits, "the LIST was not split"
        st = watch_status(srv, "pods")
        assert st["decode_errors"] == 0 and st["skipped_objects"] == 0, st
        assert st["list_calls"] == 1, st
        assert sql("SELECT count(*) FROM %s WHERE cluster = %%s AND object->'metadata' ? 'managedFields'"
                   % table, (srv,))[0][0] == 0


def test_error_inside_the_decoder_leaves_the_worker_running(ctx, settings):
    """An ERROR raised while the worker decodes a stream (here injected by the
    developer setting kwatch.debug_error_on_object; in life out of memory or
    a limit of PostgreSQL's) happens inside libcurl's write callback, which
    must never be left by a longjmp.  It ends that transfer like malformed
    data, on the LIST path and on the WATCH path: the worker process
    survives, the other watches go on, and once the error stops the table
    converges."""
    from conftest import (assert_table_matches_server, kubectl, sql_one, wait_until,
                          wait_watching)
    ns = ctx.namespace()
    srv = ctx.server()
    other = watch("serviceaccounts", srv, namespace=ns)
    wait_watching(srv, "serviceaccounts")
    worker = sql_one("SELECT kwatch.worker_pid()")

    def failing(n):
        def check():
            st = watch_status(srv, "configmaps")
            # (no counters yet while the worker has not picked the watch up)
            return st if st and (st["decode_errors"] or 0) >= n else None
        st = wait_until(check, 60, "%d decode errors" % n)
        assert "injected error" in st["last_error"], st
        assert not st["healthy"] or st["state"] != "watching", st
        return st

    def others_go_on(name):
        kubectl("create", "serviceaccount", name, "-n", ns)
        assert_table_matches_server(other, srv, ["serviceaccounts", "-n", ns])
        assert sql_one("SELECT kwatch.worker_pid()") == worker

    # 1. the LIST: the object exists when the watch starts
    settings(debug_error_on_object="poison-listed")
    kubectl("create", "configmap", "poison-listed", "-n", ns, "--from-literal=a=b")
    table = watch("configmaps", srv, namespace=ns)
    failing(2)
    others_go_on("during-list-fault")
    settings(debug_error_on_object="")
    wait_watching(srv, "configmaps", timeout=60)
    assert_table_matches_server(table, srv, ["configmaps", "-n", ns], timeout=60)

    # 2. a WATCH event
    errors = watch_status(srv, "configmaps")["decode_errors"] or 0
    settings(debug_error_on_object="poison-watched")
    kubectl("create", "configmap", "poison-watched", "-n", ns, "--from-literal=a=b")
    failing(errors + 2)
    others_go_on("during-watch-fault")
    settings(debug_error_on_object="")
    wait_watching(srv, "configmaps", timeout=60)
    assert_table_matches_server(table, srv, ["configmaps", "-n", ns], timeout=60)
    assert sql_one("SELECT count(*) FROM %s WHERE cluster = %%s AND name LIKE 'poison-%%%%'"
                   % table, (srv,)) == 2
    assert sql_one("SELECT kwatch.worker_pid()") == worker


def test_uid_listed_twice_keeps_the_later_object(ctx, fake):
    """A LIST that names one uid twice (an API server's bug: no two objects
    share a uid).  A first sync writes a list's batches with COPY
    (src/apply/copy_rows.c), which the table's primary key (cluster, uid)
    stops; the batch is then written by its INSERT ... ON CONFLICT, as
    before COPY: the later object is stored, the other objects too, nothing
    is skipped or counted as a database error, and the watch goes on."""
    from common import wait_until
    srv = fake_server(ctx, fake)
    fake.create("pods", pod("good-a"))
    first = fake.create("pods", pod("twin-1"))
    second = fake.create("pods", pod("twin-2", uid=first["metadata"]["uid"]))
    fake.create("pods", pod("good-z"))
    assert second["metadata"]["uid"] == first["metadata"]["uid"]
    table = watch("pods", srv)
    st = wait_status(srv, "pods", lambda s: s["state"] == "watching")
    rows = sql("SELECT name, resource_version FROM %s WHERE cluster = %%s ORDER BY name" % table, (srv,))
    assert rows == [("good-a", rows[0][1]), ("good-z", rows[1][1]),
                    ("twin-2", second["metadata"]["resourceVersion"])], rows
    assert st["skipped_objects"] == 0 and st["database_errors"] == 0 and st["relists"] == 0, st
    fake.create("pods", pod("good-later"))
    wait_until(lambda: sql("SELECT count(*) FROM %s WHERE cluster = %%s AND name = 'good-later'"
                           % table, (srv,))[0][0] == 1, 30, "good-later mirrored")


def test_uid_listed_twice_in_a_relist_keeps_one_object(ctx, fake):
    """The same API server's bug met by a relist into a populated table:
    the list is staged, and its merge (INSERT ... SELECT FROM the staging
    table ON CONFLICT) would fail with 21000 ("ON CONFLICT DO UPDATE command
    cannot affect row a second time") on every relist, the watch stuck
    behind it.  The merge is then run again keeping one object per uid
    (src/apply/merge.c, kw_sync_relist_finish): the relist commits, the table
    holds one row for the uid and every other object, a WARNING names the
    list, and the watch goes on."""
    from common import wait_until
    srv = fake_server(ctx, fake)
    fake.create("pods", pod("good-a"))
    first = fake.create("pods", pod("twin-1"))
    table = watch("pods", srv)
    wait_status(srv, "pods", lambda s: s["state"] == "watching")
    # while watched: the second object's ADDED updates the uid's row
    second = fake.create("pods", pod("twin-2", uid=first["metadata"]["uid"]))
    fake.create("pods", pod("good-z"))
    wait_until(lambda: sql("SELECT count(*) FROM %s WHERE cluster = %%s AND name = 'good-z'"
                           % table, (srv,))[0][0] == 1, 30, "good-z mirrored")
    before = watch_status(srv, "pods")
    # stale rows: both twins are staged whole (an unchanged object is not)
    sql("UPDATE %s SET resource_version = '1' WHERE cluster = %%s" % table, (srv,))
    mark = log_mark()
    sql("SELECT kwatch.relist('pods', server => %s, wait => true, timeout => '60s')", (srv,))
    st = wait_status(srv, "pods", lambda s: s["state"] == "watching"
                     and s["relists"] > before["relists"])
    rows = sql("SELECT name, uid, resource_version FROM %s WHERE cluster = %%s ORDER BY name" % table, (srv,))
    names = [r[0] for r in rows]
    assert names in (["good-a", "good-z", "twin-1"], ["good-a", "good-z", "twin-2"]), rows
    twin = [r for r in rows if r[0].startswith("twin-")][0]
    assert twin[1] == first["metadata"]["uid"], rows
    assert twin[2] in (first["metadata"]["resourceVersion"], second["metadata"]["resourceVersion"]), rows
    # the stale rows were rewritten by the merge that kept one twin
    assert "1" not in [r[2] for r in rows], rows
    assert st["last_error"] is None or "second time" not in st["last_error"], st
    assert "names a uid twice" in log_since(mark), "no WARNING for the twice-listed uid"
    fake.create("pods", pod("good-later"))
    wait_until(lambda: sql("SELECT count(*) FROM %s WHERE cluster = %%s AND name = 'good-later'"
                           % table, (srv,))[0][0] == 1, 30, "good-later mirrored")


def test_an_owners_21000_is_not_taken_for_a_uid_listed_twice(ctx, fake):
    """The merge is run again keeping one object per uid only when the
    staging table (kwatch's own) holds a uid twice: a 21000 that the table
    owner's trigger raises is the relist's error, shown in last_error as any
    other, and nothing is written until the trigger is gone."""
    from common import wait_until
    srv = fake_server(ctx, fake)
    fake.create("pods", pod("a"))
    fake.create("pods", pod("b"))
    table = watch("pods", srv)
    wait_status(srv, "pods", lambda s: s["state"] == "watching")
    sql("UPDATE %s SET resource_version = '1' WHERE cluster = %%s" % table, (srv,))
    sql("""CREATE FUNCTION public.kw_test_owner_says_no() RETURNS trigger LANGUAGE plpgsql AS $$
           BEGIN RAISE EXCEPTION 'the owner says no' USING ERRCODE = '21000'; END $$""")
    try:
        sql("CREATE TRIGGER no_update BEFORE UPDATE ON %s FOR EACH ROW "
            "EXECUTE FUNCTION public.kw_test_owner_says_no()" % table)
        mark = log_mark()
        sql("SELECT kwatch.relist('pods', server => %s)", (srv,))
        wait_status(srv, "pods", lambda s: "the owner says no" in (s["last_error"] or ""))
        assert "names a uid twice" not in log_since(mark), "an owner's 21000 taken for a uid listed twice"
        assert sql("SELECT count(*) FROM %s WHERE cluster = %%s AND resource_version = '1'"
                   % table, (srv,))[0][0] == 2, "the failed relist wrote rows"
    finally:
        sql("DROP FUNCTION public.kw_test_owner_says_no() CASCADE")
    wait_until(lambda: sql("SELECT count(*) FROM %s WHERE cluster = %%s AND resource_version = '1'"
                           % table, (srv,))[0][0] == 0, 120, "the relist done once the trigger is gone")


def test_events_after_a_big_event_in_watch(ctx, fake):
    """After an event over 64 kB a watch's decoder gives its capture buffer
    back and takes a small one (src/decode/decode.c emit_item): in its own
    context, not in the batch's, which is reset after each batch (the next
    events were captured into freed memory).  Big and small events in turn,
    each batch applied before the next event: every object stored as sent.
    (Before the fix the worker crashed with MALLOC_PERTURB_=165 in the
    environment of the tests' PostgreSQL; without it the reuse went
    unseen.)"""
    srv = fake_server(ctx, fake)
    table = watch("pods", srv)
    wait_status(srv, "pods", lambda s: s["state"] == "watching")
    for i in range(6):
        fake.create("pods", pod("big-%d" % i, annotations={"blob": chr(97 + i) * (100 * 1024)}))
        for j in range(3):
            fake.create("pods", pod("small-%d-%d" % (i, j), annotations={"n": "v" * (j * 3000)}))
        wait_converged(table, srv, fake, "pods", timeout=30)
    st = watch_status(srv, "pods")
    assert st["skipped_objects"] == 0 and st["decode_errors"] == 0 and st["relists"] == 0, st
