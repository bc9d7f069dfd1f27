"""Initial LIST, then changes streamed by WATCH, with their notifications."""
from conftest import (assert_table_matches_server, create_pods, kubectl, kubectl_json,
                      row_uids, server_uids, sql, sql_one, wait_until, wait_watching, watch,
                      watch_status)


def test_initial_sync(ctx):
    ns = ctx.namespace()
    kubectl("create", "deployment", "web", "--image=registry.invalid/web:1", "--replicas=2", "-n", ns)
    kubectl("create", "deployment", "api", "--image=registry.invalid/api:1", "--replicas=3", "-n", ns)
    bare = create_pods(ns, {"bare-1": {"role": "bare"}, "bare-2": {"role": "bare", "x": "y"},
                            "bare-3": {}})
    # the controllers create two replicasets and five pods
    wait_until(lambda: len(server_uids("pods", "-n", ns)) == 8, 60, "8 pods in " + ns)
    wait_until(lambda: len(server_uids("replicasets.apps", "-n", ns)) == 2, 30, "2 replicasets")

    srv = ctx.server()
    tables = {res: watch(res, srv)
              for res in ("pods", "deployments.apps", "replicasets.apps", "namespaces")}
    assert tables == {"pods": "k8s.pods", "deployments.apps": "k8s.deployments",
                      "replicasets.apps": "k8s.replicasets", "namespaces": "k8s.namespaces"}

    gets = {"pods": ["pods", "-A"], "deployments.apps": ["deployments.apps", "-A"],
            "replicasets.apps": ["replicasets.apps", "-A"], "namespaces": ["namespaces"]}
    for res, args in gets.items():
        assert_table_matches_server(tables[res], srv, args)

    for res in gets:
        st = wait_watching(srv, res)
        assert st["list_calls"] >= 1, st
        assert st["table_name"] == tables[res]
        assert st["channel"] == "kwatch_" + tables[res][len("k8s."):]
        # the status' object count is the number of rows of that server
        wait_until(lambda: (watch_status(srv, res)["objects"]
                            == sql_one("SELECT count(*) FROM %s WHERE cluster = %%s" % tables[res],
                                       (srv,))),
                   20, "objects of %s to equal its row count" % res)
        assert st["http_errors"] == 0 and st["decode_errors"] == 0 and st["database_errors"] == 0, st

    # this namespace's objects specifically, and their typed columns
    pods = sql("SELECT name, phase, labels, owner_references FROM k8s.pods"
               " WHERE cluster = %s AND namespace = %s", (srv, ns))
    assert len(pods) == 8
    assert all(phase == "Pending" for _, phase, _, _ in pods), pods
    owned = [n for n, _, _, refs in pods if refs and refs[0]["kind"] == "ReplicaSet"]
    assert len(owned) == 5, pods
    assert {n: l for n, _, l, _ in pods if n in bare} == {
        "bare-1": {"role": "bare"}, "bare-2": {"role": "bare", "x": "y"}, "bare-3": {}}
    deps = dict(sql("SELECT name, replicas FROM k8s.deployments WHERE cluster = %s AND namespace = %s",
                    (srv, ns)))
    assert deps == {"web": 2, "api": 3}
    rs = sorted(r for r, in sql("SELECT replicas FROM k8s.replicasets"
                                " WHERE cluster = %s AND namespace = %s", (srv, ns)))
    assert rs == [2, 3]
    assert sql("SELECT namespace, phase FROM k8s.namespaces WHERE cluster = %s AND name = %s",
               (srv, ns)) == [(None, "Active")]


def test_changes_are_mirrored_with_notifications(ctx):
    ns = ctx.namespace()
    srv = ctx.server()
    lst = ctx.listener("kwatch_pods", "k8s.pods")
    table = watch("pods", srv, namespace=ns)
    assert table == "k8s.pods"
    wait_watching(srv, "pods")

    # create
    uid = create_pods(ns, {"p1": {"app": "one"}})["p1"]
    added = lst.wait_for(cluster=srv, type="ADDED", uid=uid)
    pod = kubectl_json("get", "pod", "p1", "-n", ns)
    assert added == {"seq": added["seq"], "type": "ADDED", "cluster": srv, "namespace": ns,
                     "name": "p1", "uid": uid,
                     "resource_version": pod["metadata"]["resourceVersion"],
                     "preexisting": False, "final_state_unknown": False}
    assert isinstance(added["seq"], int) and added["seq"] > 0  # kwatch.events (test_events.py)
    assert sql("SELECT name, resource_version, labels FROM k8s.pods WHERE cluster = %s AND uid = %s",
               (srv, uid)) == [("p1", added["resource_version"], {"app": "one"})]

    # modify
    kubectl("label", "pod", "p1", "-n", ns, "color=blue")
    modified = lst.wait_for(cluster=srv, type="MODIFIED", uid=uid)
    pod = kubectl_json("get", "pod", "p1", "-n", ns)
    assert modified["resource_version"] == pod["metadata"]["resourceVersion"]
    assert modified["resource_version"] != added["resource_version"]
    assert (modified["namespace"], modified["name"]) == (ns, "p1")
    assert modified["previous_resource_version"] in (added["resource_version"],) + tuple(
        p["resource_version"] for p in lst.payloads(cluster=srv, uid=uid, type="MODIFIED")
        if p["seq"] < modified["seq"])
    assert sql("SELECT resource_version, labels FROM k8s.pods WHERE cluster = %s AND uid = %s",
               (srv, uid)) == [(modified["resource_version"], {"app": "one", "color": "blue"})]

    # delete
    kubectl("delete", "pod", "p1", "-n", ns, "--wait=false")
    deleted = lst.wait_for(cluster=srv, type="DELETED", uid=uid)
    assert (deleted["namespace"], deleted["name"]) == (ns, "p1")
    assert row_uids(table, srv) == set()

    types = [p["type"] for p in lst.payloads(cluster=srv)]
    assert types[0] == "ADDED" and types[-1] == "DELETED" and types.count("ADDED") == 1, types
    assert types.count("DELETED") == 1 and "MODIFIED" in types, types
    # each row change was visible to the listener when its notification arrived
    assert lst.visibility_problems(srv) == [], lst.seen

    st = watch_status(srv, "pods")
    assert st["added"] >= 1 and st["modified"] >= 1 and st["deleted"] >= 1, st
    assert st["notifications"] >= len(types), st


def test_notify_false_sends_no_notifications(ctx):
    ns = ctx.namespace()
    quiet, loud = ctx.server("-quiet"), ctx.server("-loud")
    lst = ctx.listener("kwatch_pods")
    watch("pods", quiet, namespace=ns, notify=False)
    watch("pods", loud, namespace=ns)
    wait_watching(quiet, "pods")
    wait_watching(loud, "pods")
    uid = create_pods(ns, {"q": {}})["q"]
    lst.wait_for(cluster=loud, type="ADDED", uid=uid)
    wait_until(lambda: row_uids("k8s.pods", quiet) == {uid}, 20, "the pod row of " + quiet)
    assert lst.payloads(cluster=quiet) == []
    assert watch_status(quiet, "pods")["notifications"] == 0


def test_deployment_scaling(ctx):
    ns = ctx.namespace()
    srv = ctx.server(auth="token")  # api_server + CA options and a user mapping with the token
    pods = ["pods", "-n", ns]
    kubectl("create", "deployment", "web", "--image=registry.invalid/web:1", "--replicas=2", "-n", ns)
    wait_until(lambda: len(server_uids(*pods)) == 2, 60, "2 pods")
    table = watch("pods", srv, namespace=ns)
    wait_watching(srv, "pods")
    assert_table_matches_server(table, srv, pods)
    before = server_uids(*pods)
    lst = ctx.listener("kwatch_pods", table)

    kubectl("scale", "deployment", "web", "--replicas=5", "-n", ns)
    wait_until(lambda: len(server_uids(*pods)) == 5, 60, "5 pods")
    assert_table_matches_server(table, srv, pods)
    after_up = server_uids(*pods)
    created = after_up - before
    assert len(created) == 3
    wait_until(lambda: {p["uid"] for p in lst.payloads(cluster=srv, type="ADDED")} == created,
               20, "ADDED notifications for exactly the 3 new pods")

    kubectl("scale", "deployment", "web", "--replicas=1", "-n", ns)
    wait_until(lambda: len(server_uids(*pods)) == 1, 60, "1 pod")
    assert_table_matches_server(table, srv, pods)
    removed = after_up - server_uids(*pods)
    assert len(removed) == 4
    wait_until(lambda: {p["uid"] for p in lst.payloads(cluster=srv, type="DELETED")} == removed,
               20, "DELETED notifications for exactly the 4 removed pods")
    added = [p["uid"] for p in lst.payloads(cluster=srv, type="ADDED")]
    assert sorted(added) == sorted(created), "one ADDED per created pod, no more"
    deleted = [p["uid"] for p in lst.payloads(cluster=srv, type="DELETED")]
    assert sorted(deleted) == sorted(removed), "one DELETED per removed pod, no more"
    assert lst.visibility_problems(srv) == []
