"""Protocol paths the defaults rarely exercise: paged LISTs, small batches
(paused transfers), watches that end and resume, large objects."""
import json
import time
from collections import Counter

import pytest

from conftest import (assert_table_matches_server, create_pods, kubectl, server_uids,
                      sql, sql_one, wait_until, wait_watching, watch, watch_status)


def test_paged_list_and_small_batches(ctx, settings):
    settings(list_from_watch_cache="off", list_page_size=3, batch_size=2)
    ns = ctx.namespace()
    srv = ctx.server()
    pods = ["pods", "-n", ns]
    create_pods(ns, {"p%02d" % i: {"i": str(i)} for i in range(10)})
    table = watch("pods", srv, namespace=ns)
    st = wait_watching(srv, "pods")
    assert_table_matches_server(table, srv, pods)
    st = watch_status(srv, "pods")
    assert st["list_calls"] >= 4, ("10 objects in pages of 3", st)
    assert st["objects"] == 10, st

    # a burst of events, applied two per transaction
    before = server_uids(*pods)
    lst = ctx.listener("kwatch_pods", table)
    kubectl("create", "deployment", "web", "--image=registry.invalid/web:1", "--replicas=7", "-n", ns)
    kubectl("label", "pods", "-n", ns, "-l", "i", "burst=yes")
    wait_until(lambda: len(server_uids(*pods)) == 17, 60, "17 pods")
    assert_table_matches_server(table, srv, pods)
    new = server_uids(*pods) - before
    wait_until(lambda: {p["uid"] for p in lst.payloads(cluster=srv, type="ADDED")} == new,
               20, "ADDED for the 7 deployment pods")
    assert lst.visibility_problems(srv) == []
    st = wait_watching(srv, "pods")
    assert st["objects"] == 17, st
    assert st["relists"] == 0 and st["decode_errors"] == 0 and st["database_errors"] == 0, st


def test_watch_resumes_after_server_closes_it(ctx, settings):
    # every WATCH request ends after 1-2 s (timeoutSeconds): the worker must
    # watch again from the last resourceVersion, without LIST, losing and
    # repeating nothing
    settings(watch_timeout="1s")
    ns = ctx.namespace()
    srv = ctx.server()
    pods = ["pods", "-n", ns]
    table = watch("pods", srv, namespace=ns)
    wait_watching(srv, "pods")
    lst = ctx.listener("kwatch_pods", table)
    uids = {}
    for i in range(4):
        uids.update(create_pods(ns, {"p%d" % i: {}}))
        kubectl("label", "pod", "p%d" % i, "-n", ns, "step=%d" % i)
        time.sleep(0.7)  # spread the changes over several watch requests
    wait_until(lambda: watch_status(srv, "pods")["watch_calls"] >= 4, 30, "four WATCH requests")
    assert_table_matches_server(table, srv, pods)
    st = watch_status(srv, "pods")
    assert st["list_calls"] == 1 and st["relists"] == 0, st
    wait_until(lambda: {p["uid"] for p in lst.payloads(cluster=srv, type="ADDED")} == set(uids.values()),
               20, "one ADDED per pod")
    mine = lst.payloads(cluster=srv)
    repeated = [k for k, n in Counter((p["uid"], p["resource_version"], p["type"]) for p in mine).items()
                if n > 1]
    assert repeated == [], "events applied twice: %s" % repeated
    assert Counter(p["type"] for p in mine)["ADDED"] == 4, mine


@pytest.mark.parametrize("compression", ["off", "on"])
def test_large_objects(ctx, settings, compression):
    # with compression the API server gzips responses above 128 KiB (PROTOCOL 11)
    settings(http_compression=compression)
    ns = ctx.namespace()
    srv = ctx.server()
    cms = ["configmaps", "-n", ns]
    big = "".join(chr(0x41 + i % 26) for i in range(300_000))
    doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big", "namespace": ns},
           "data": {"big": big, "unicode": "h\u00e9llo w\u00f6rld \u2603 \U0001F600 \"q\" \\ \t"}}
    kubectl("create", "-f", "-", input=json.dumps(doc))
    table = watch("configmaps", srv, namespace=ns)
    wait_watching(srv, "configmaps")
    assert_table_matches_server(table, srv, cms)
    # the same size as a watch event
    doc["data"]["big"] = big[::-1]
    doc["metadata"]["labels"] = {"v": "2"}
    kubectl("replace", "-f", "-", input=json.dumps(doc))
    wait_until(lambda: sql("SELECT labels FROM k8s.configmaps WHERE cluster = %s AND name = 'big'",
                           (srv,)) == [({"v": "2"},)], 20, "the modified big configmap")
    assert_table_matches_server(table, srv, cms)
    st = watch_status(srv, "configmaps")
    assert st["decode_errors"] == 0 and st["skipped_objects"] == 0, st


def test_batches_are_bounded_by_bytes(ctx, settings):
    """kwatch.batch_memory (issue 36): a list of large objects is applied a
    few objects per transaction, not kwatch.batch_size of them, so no
    process holds more than about that many bytes of objects; the rows
    equal the server's all the same.  Each first-sync batch commits on its
    own, so the rows' xmin tell the batches apart (a batch may also end
    sooner, when an apply worker is free: the bound is what is tested)."""
    ns = ctx.namespace()
    big = "x" * 100_000
    doc = {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big-%02d" % i, "namespace": ns},
         "data": {"blob": big}} for i in range(12)]}
    kubectl("apply", "-f", "-", input=json.dumps(doc))
    for memory in ("256kB", "16MB"):
        settings(batch_memory=memory)
        srv = ctx.server("-" + memory.lower())
        table = watch("configmaps", srv, namespace=ns, table_name="cm_" + memory.lower())
        wait_watching(srv, "configmaps")
        assert_table_matches_server(table, srv, ["configmaps", "-n", ns])
        per_batch = [n for (n,) in sql("SELECT count(*) FROM %s WHERE cluster = %%s AND name LIKE 'big-%%%%'"
                                       " GROUP BY xmin::text" % table, (srv,))]
        assert sum(per_batch) == 12, per_batch
        if memory == "256kB":
            # a batch ends with the object that reaches 256 kB: at most 3 of
            # ~100 kB (libcurl hands over at most 16 kB at a time)
            assert max(per_batch) <= 3 and len(per_batch) >= 4, per_batch
