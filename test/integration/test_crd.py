"""A CustomResourceDefinition created after the worker started, then watched."""
import json

import psycopg2
import pytest

import cluster
import conftest
from conftest import (assert_table_matches_server, kubectl, row_uids, server_uids, sql_one,
                      wait_until, wait_watching, watch, watch_status)


def crd_manifest(group):
    """The CronTab CRD of the Kubernetes documentation, in `group`."""
    return cluster.crd_manifest(group, "crontabs", "CronTab", short_names=["ct"], schema={
        "type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "cronSpec": {"type": "string"},
                "image": {"type": "string"},
                "replicas": {"type": "integer"}}}}})


def crontab(group, name, spec, labels=None):
    return {"apiVersion": group + "/v1", "kind": "CronTab",
            "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def test_crd_created_after_worker_start(ctx):
    ns = ctx.namespace()
    srv = ctx.server()
    # a group of this run only: a kept cluster may hold earlier runs' CRDs
    group = "new%s.example.com" % conftest.RUN_ID
    resource = "crontabs." + group

    # unknown before the CRD exists (and this backend has used discovery)
    with pytest.raises(psycopg2.Error) as e:
        watch(resource, srv, namespace=ns)
    assert e.value.pgcode == "42704", e.value.pgerror

    ctx.crds.append(resource)
    kubectl("apply", "-f", "-", input=json.dumps(crd_manifest(group)))
    kubectl("wait", "--for", "condition=established", "--timeout=60s", "crd/" + resource)
    # the API server publishes the new group in discovery shortly after
    wait_until(lambda: kubectl("get", "--raw", "/apis/%s/v1" % group, check=False).strip(),
               30, "discovery of " + group)
    for name, spec, labels in (("every-minute", {"cronSpec": "* * * * *", "image": "a:1"}, {"k": "1"}),
                               ("hourly", {"cronSpec": "0 * * * *", "replicas": 2}, {})):
        kubectl("create", "-n", ns, "-f", "-", input=json.dumps(crontab(group, name, spec, labels)))

    taken = sql_one("SELECT to_regclass('k8s.crontabs')") is not None
    table = watch(resource, srv, namespace=ns)
    # another test's crontabs of another group may own k8s.crontabs already
    assert table == ("k8s.crontabs_" + group.replace(".", "_") if taken else "k8s.crontabs")
    st = wait_watching(srv, resource)
    assert st["resource"] == resource
    get = [resource, "-n", ns]
    assert_table_matches_server(table, srv, get)
    assert len(row_uids(table, srv)) == 2

    kubectl("create", "-n", ns, "-f", "-",
            input=json.dumps(crontab(group, "daily", {"cronSpec": "0 0 * * *"}, {"k": "3"})))
    wait_until(lambda: len(row_uids(table, srv)) == 3, 20, "the third CronTab row")
    assert_table_matches_server(table, srv, get)
    assert row_uids(table, srv) == server_uids(*get)


def test_crd_deleted_and_recreated_while_watched(ctx):
    ns = ctx.namespace()
    srv = ctx.server()
    group = "del%s.example.com" % conftest.RUN_ID
    resource = "crontabs." + group
    get = [resource, "-n", ns]

    def create_crd():
        kubectl("apply", "-f", "-", input=json.dumps(crd_manifest(group)))
        kubectl("wait", "--for", "condition=established", "--timeout=60s", "crd/" + resource)
        wait_until(lambda: kubectl("get", "--raw", "/apis/%s/v1" % group, check=False).strip(),
                   30, "discovery of " + group)

    def create_crontab(name):
        # the CR endpoint may answer 404 for a moment after discovery shows it
        wait_until(lambda: kubectl("create", "-n", ns, "-f", "-", check=False,
                                   input=json.dumps(crontab(group, name, {"cronSpec": "* * * * *"}))),
                   30, "creating CronTab " + name)

    ctx.crds.append(resource)
    create_crd()
    create_crontab("one")
    table = watch(resource, srv, namespace=ns)
    wait_watching(srv, resource)
    assert_table_matches_server(table, srv, get)

    # deleting the CRD deletes its objects: their rows go
    kubectl("delete", "crd", resource, "--timeout=60s")
    wait_until(lambda: row_uids(table, srv) == set(), 30, "the CronTab rows to go")
    # the watch reports the missing resource instead of claiming health
    wait_until(lambda: not watch_status(srv, resource)["healthy"], 30, "an unhealthy watch")

    # the CRD comes back: the watch picks up the new objects by itself
    create_crd()
    create_crontab("two")
    wait_until(lambda: len(row_uids(table, srv)) == 1, 60, "the new CronTab row")
    assert_table_matches_server(table, srv, get)
    wait_watching(srv, resource, timeout=60)
