"""Watches scoped by namespace and by label selector."""
from conftest import (assert_table_matches_server, create_pods, kubectl, row_uids, sql,
                      wait_until, wait_watching, watch)


def test_namespace_and_label_selector_scopes(ctx):
    ns_a, ns_b = ctx.namespace("-a"), ctx.namespace("-b")
    tag = ctx.base  # confines the label selector to this test's pods
    by_ns, by_label = ctx.server("-ns"), ctx.server("-lbl")
    # a set-based selector: spaces, parentheses and commas must reach the server intact
    selector = "tier in (front, edge),kwsel=%s" % tag
    a = create_pods(ns_a, {"a1": {"tier": "front", "kwsel": tag},
                           "a2": {"tier": "back", "kwsel": tag}})
    b = create_pods(ns_b, {"b1": {"tier": "front", "kwsel": tag},
                           "b2": {"tier": "edge", "kwsel": tag},
                           "b3": {}})

    assert watch("pods", by_ns, namespace=ns_a) == "k8s.pods"
    assert watch("pods", by_label, label_selector=selector) == "k8s.pods"
    wait_watching(by_ns, "pods")
    st = wait_watching(by_label, "pods")
    assert st["label_selector"] == selector and st["namespace"] is None

    assert_table_matches_server("k8s.pods", by_ns, ["pods", "-n", ns_a])
    assert_table_matches_server("k8s.pods", by_label, ["pods", "-A", "-l", selector])
    assert row_uids("k8s.pods", by_ns) == {a["a1"], a["a2"]}
    assert row_uids("k8s.pods", by_label) == {a["a1"], b["b1"], b["b2"]}

    lst = ctx.listener("kwatch_pods", "k8s.pods")

    # b1 leaves the selector: DELETED for the label watch, row gone
    kubectl("label", "pod", "b1", "-n", ns_b, "tier=back", "--overwrite")
    gone = lst.wait_for(cluster=by_label, type="DELETED", uid=b["b1"])
    assert (gone["namespace"], gone["name"]) == (ns_b, "b1")
    assert row_uids("k8s.pods", by_label) == {a["a1"], b["b2"]}

    # b1 comes back: ADDED, row present with its new resourceVersion and labels
    kubectl("label", "pod", "b1", "-n", ns_b, "tier=front", "--overwrite")
    back = lst.wait_for(cluster=by_label, type="ADDED", uid=b["b1"])
    assert sql("SELECT resource_version, labels->>'tier' FROM k8s.pods WHERE cluster = %s AND uid = %s",
               (by_label, b["b1"])) == [(back["resource_version"], "front")]
    assert_table_matches_server("k8s.pods", by_label, ["pods", "-A", "-l", selector])

    # changes outside a scope never show up in it: a new pod in ns_b, then a
    # barrier change in ns_a that the namespace watch must see after it
    b4 = create_pods(ns_b, {"b4": {"tier": "front", "kwsel": tag}})["b4"]
    a3 = create_pods(ns_a, {"a3": {"tier": "other"}})["a3"]
    lst.wait_for(cluster=by_ns, type="ADDED", uid=a3)
    lst.wait_for(cluster=by_label, type="ADDED", uid=b4)
    assert_table_matches_server("k8s.pods", by_ns, ["pods", "-n", ns_a])
    assert_table_matches_server("k8s.pods", by_label, ["pods", "-A", "-l", selector])
    assert row_uids("k8s.pods", by_ns) == {a["a1"], a["a2"], a3}
    assert row_uids("k8s.pods", by_label) == {a["a1"], b["b1"], b["b2"], b4}
    # nothing about b1's relabelling reached the namespace watch's cluster
    assert lst.payloads(cluster=by_ns, uid=b["b1"]) == []
    assert lst.payloads(cluster=by_label, uid=a3) == []
    assert lst.visibility_problems(by_ns) == [] and lst.visibility_problems(by_label) == []
    # objects counts follow objects leaving and entering the selector
    assert wait_watching(by_ns, "pods")["objects"] == 3
    assert wait_watching(by_label, "pods")["objects"] == 4


def test_field_selector(ctx):
    ns_a, ns_b = ctx.namespace("-a"), ctx.namespace("-b")
    srv = ctx.server()
    selector = "metadata.namespace=%s,metadata.name!=b2" % ns_b
    create_pods(ns_a, {"a1": {}})
    create_pods(ns_b, {"b1": {}, "b2": {}})
    watch("pods", srv, field_selector=selector)
    wait_watching(srv, "pods")
    get = ["pods", "-A", "--field-selector", selector]
    assert_table_matches_server("k8s.pods", srv, get)
    assert {r[0] for r in sql("SELECT name FROM k8s.pods WHERE cluster = %s", (srv,))} == {"b1"}
    create_pods(ns_b, {"b3": {}})
    create_pods(ns_a, {"a2": {}})
    wait_until(lambda: len(row_uids("k8s.pods", srv)) == 2, 20, "b3's row")
    assert_table_matches_server("k8s.pods", srv, get)


def test_namespace_created_after_the_watch(ctx):
    srv = ctx.server()
    ns = ctx.base + "-later"
    # a namespace that does not exist yet lists as empty
    watch("pods", srv, namespace=ns)
    st = wait_watching(srv, "pods")
    assert st["objects"] == 0
    ctx.namespaces.append(ns)
    kubectl("create", "namespace", ns)
    uids = create_pods(ns, {"p1": {}, "p2": {}})
    wait_until(lambda: row_uids("k8s.pods", srv) == set(uids.values()), 20, "the new namespace's pods")
    assert_table_matches_server("k8s.pods", srv, ["pods", "-n", ns])
