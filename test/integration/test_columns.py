"""Typed columns derived from the objects, and table names on a plural collision."""
import json

import psycopg2
import pytest

from conftest import (assert_table_matches_server, create_pods, kubectl, kubectl_json, sql,
                      sql_one, wait_until, wait_watching, watch)


def one_row(table, cluster, name, columns):
    rows = sql("SELECT %s FROM %s WHERE cluster = %%s AND name = %%s" % (columns, table),
               (cluster, name))
    return rows[0] if len(rows) == 1 else rows


def test_typed_columns_follow_the_object(ctx):
    ns = ctx.namespace()
    srv = ctx.server()
    create_pods(ns, {"p": {}})
    kubectl("create", "service", "clusterip", "svc", "--tcp=80:8080", "-n", ns)
    node = ctx.base + "-node"
    kubectl("create", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": node, "labels": {"kwtest": ctx.base}},
        "spec": {"podCIDR": "10.99.0.0/24", "unschedulable": True}}))
    try:
        for res, kw in (("pods", {"namespace": ns}), ("services", {"namespace": ns}),
                        ("nodes", {"label_selector": "kwtest=" + ctx.base})):
            watch(res, srv, **kw)
            wait_watching(srv, res)
        assert_table_matches_server("k8s.pods", srv, ["pods", "-n", ns])
        assert_table_matches_server("k8s.services", srv, ["services", "-n", ns])
        assert_table_matches_server("k8s.nodes", srv, ["nodes", "-l", "kwtest=" + ctx.base])

        cols = "phase, node_name, pod_ip, host_ip, ready, restart_count, service_account"
        assert one_row("k8s.pods", srv, "p", cols) == ("Pending", None, None, None, False, 0, None)
        svc = kubectl_json("get", "service", "svc", "-n", ns)
        assert one_row("k8s.services", srv, "svc", "type, cluster_ip") == (
            "ClusterIP", svc["spec"]["clusterIP"])
        kv = kubectl_json("get", "node", node)["status"].get("nodeInfo", {}).get("kubeletVersion")
        assert one_row("k8s.nodes", srv, node, "ready, unschedulable, kubelet_version, pod_cidr") == (
            False, True, kv, "10.99.0.0/24")

        # status changes arrive as watch events and the columns follow
        kubectl("patch", "pod", "p", "-n", ns, "--subresource=status", "--type=merge", "-p", json.dumps({
            "status": {"phase": "Running", "podIP": "10.1.2.3", "hostIP": "192.168.0.9",
                       "conditions": [{"type": "Ready", "status": "True"}],
                       "containerStatuses": [{"name": "c", "image": "x", "imageID": "", "ready": True,
                                              "restartCount": 3, "state": {}},
                                             {"name": "d", "image": "x", "imageID": "", "ready": True,
                                              "restartCount": 2, "state": {}}]}}))
        wait_until(lambda: one_row("k8s.pods", srv, "p", "phase") == ("Running",), 20,
                   "the pod's new phase")
        assert one_row("k8s.pods", srv, "p", cols) == (
            "Running", None, "10.1.2.3", "192.168.0.9", True, 5, None)
        kubectl("patch", "node", node, "--subresource=status", "--type=merge", "-p", json.dumps({
            "status": {"nodeInfo": {"kubeletVersion": "v1.20.99", "machineID": "", "systemUUID": "",
                                    "bootID": "", "kernelVersion": "", "osImage": "",
                                    "containerRuntimeVersion": "", "kubeProxyVersion": "",
                                    "operatingSystem": "linux", "architecture": "amd64"}}}))
        kubectl("patch", "node", node, "--type=merge", "-p", '{"spec":{"unschedulable":false}}')
        wait_until(lambda: one_row("k8s.nodes", srv, node, "unschedulable, kubelet_version")
                   == (False, "v1.20.99"), 20, "the node's new columns")
        assert_table_matches_server("k8s.pods", srv, ["pods", "-n", ns])
        assert_table_matches_server("k8s.nodes", srv, ["nodes", "-l", "kwtest=" + ctx.base])
    finally:
        kubectl("delete", "node", node, "--wait=false", "--ignore-not-found", check=False)


def test_same_plural_in_two_groups(ctx):
    # core "events" and "events.events.k8s.io": two resources, two tables
    ns = ctx.namespace()
    srv = ctx.server()
    kubectl("create", "deployment", "web", "--image=registry.invalid/web:1", "-n", ns)
    # the deployment controller records a ScalingReplicaSet event
    wait_until(lambda: kubectl_json("get", "events", "-n", ns)["items"], 60, "an event in " + ns)
    core = watch("events", srv, namespace=ns)
    grouped = watch("events.events.k8s.io", srv, namespace=ns)
    assert core != grouped
    assert {core, grouped} == {"k8s.events", "k8s.events_events_k8s_io"}, (core, grouped)
    wait_watching(srv, "events")
    wait_watching(srv, "events.events.k8s.io")
    assert_table_matches_server(core, srv, ["events", "-n", ns])
    assert_table_matches_server(grouped, srv, ["events.events.k8s.io", "-n", ns])
    # the same objects through two API versions: same uids, different shapes
    uids = lambda t: {r[0] for r in sql("SELECT uid FROM %s WHERE cluster = %%s" % t, (srv,))}
    assert uids(core) == uids(grouped) != set()

    # unwatch by the name kwatch.watches shows (resource = 'events') stops
    # exactly that watch; the other group's watch and rows stay
    st = {r[0]: r[1] for r in sql("SELECT resource, table_name FROM kwatch.watches WHERE server = %s",
                                  (srv,))}
    assert st == {"events": core, "events.events.k8s.io": grouped}
    try:
        done = sql_one("SELECT kwatch.unwatch('events', server => %s)", (srv,))
    except psycopg2.Error as e:
        pytest.fail("kwatch.unwatch('events') failed with SQLSTATE %s: %s -- its name match"
                    " (resource, plural, kind or table name) also hits events.events.k8s.io,"
                    " and DELETE ... RETURNING INTO cannot take two rows; the exact resource"
                    " name should win" % (e.pgcode, e.diag.message_primary), pytrace=False)
    assert done is True
    assert [r[0] for r in sql("SELECT resource FROM kwatch.watches WHERE server = %s", (srv,))] \
        == ["events.events.k8s.io"]
    assert uids(core) == set() and uids(grouped) != set()
