"""test/printers/cases.py: the upstream printer unit tests, ported.

Source: kubernetes/kubernetes pkg/printers/internalversion/printers_test.go
(current master, the version of the reference index, file version 100530230)
and, for human_duration, k8s.io/apimachinery/pkg/util/duration/duration_test.go,
for the label selector helpers, k8s.io/apimachinery/pkg/apis/meta/v1/
helpers_test.go (TestLabelSelectorAsSelector; its cases take the selector
itself as "object").
Each upstream case becomes one entry: the Go object written as the JSON the
API server would return for it (Go zero values written as JSON does: a
container without a name is {"name": ""}), and the expected cells, keyed by
the kwatch function that prints the cell.  "test" names the upstream test
function and the index of the case in its table (or its row, for *List
tests).

Time: the upstream tests build timestamps from time.Now(); here time.Now()
is the fixed instant NOW, every timestamp is NOW plus the same offset, and
the time-relative cells (AGE, RESTARTS' "(10s ago)", DURATION, LAST SEEN,
LAST SCHEDULE) are checked through the functions that take the instant as
an argument (`@at` = NOW).  So no upstream case is skipped for being
time-relative; README.md lists the cells of each test not checked (NAME).
The wide variants of the workload tests check the CONTAINERS, IMAGES and
SELECTOR cells too.
"""
import datetime

NOW = datetime.datetime(2024, 6, 1, 12, 0, 0, tzinfo=datetime.timezone.utc)


def at(seconds=0.0):
    """NOW + seconds as the API server writes a timestamp (RFC 3339, UTC)."""
    t = NOW + datetime.timedelta(seconds=seconds)
    if t.microsecond:
        return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def add_date(years=0, days=0):
    """time.Now().AddDate(years, 0, days)."""
    t = NOW + datetime.timedelta(days=days)
    t = t.replace(year=t.year + years)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


NOW_S = at(0)
DAY = 24 * 3600
YEAR10 = -10 * 365 * DAY

CASES = []


def case(kind, test, obj, expect, at_=NOW_S):
    CASES.append({"kind": kind, "test": test, "object": obj, "at": at_, "expect": expect})


# ---------------------------------------------------------------------------
# Pods
# ---------------------------------------------------------------------------

def containers(n, **kw):
    return [dict({"name": ""}, **kw) for _ in range(n)]


def cs(name="", ready=False, restarts=0, state=None, finished=None, started=None):
    """An api.ContainerStatus as JSON; `finished` is lastState.terminated.finishedAt."""
    c = {"name": name, "ready": ready, "restartCount": restarts, "state": state or {},
         "lastState": {}}
    if finished is not None:
        c["lastState"] = {"terminated": {"exitCode": 0, "finishedAt": finished}}
    if started is not None:
        c["started"] = started
    return c


RUNNING = {"running": {}}


def waiting(reason=None):
    return {"waiting": {"reason": reason} if reason is not None else {}}


def terminated(reason=None, exit_code=0, signal=None):
    t = {"exitCode": exit_code}
    if reason is not None:
        t["reason"] = reason
    if signal is not None:
        t["signal"] = signal
    return {"terminated": t}


def pod(name, spec, status, deleted=None, created=None):
    meta = {"name": name}
    if deleted is not None:
        meta["deletionTimestamp"] = deleted
    if created is not None:
        meta["creationTimestamp"] = created
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def pod_cells(ready, status, restarts, restarts_text, last_restart=None, age="<unknown>"):
    return {"pod_ready_text": ready, "pod_status": status, "pod_restarts": restarts,
            "pod_restarts_text(@at)": restarts_text, "pod_last_restart": last_restart,
            "age(@at)": age}


DELETE_TIME = at(-10)

# TestPrintPod
T = "TestPrintPod"
case("pod", T + "[0] test1", pod("test1", {"containers": containers(2)}, {
    "phase": "podPhase",
    "containerStatuses": [cs(ready=True, restarts=3, state=RUNNING), cs(restarts=3)]}),
    pod_cells("1/2", "podPhase", 6, "6"))
case("pod", T + "[1] test2", pod("test2", {"containers": containers(2)}, {
    "phase": "podPhase",
    "containerStatuses": [cs(ready=True, restarts=3, state=RUNNING),
                          cs(restarts=3, state=waiting("ContainerWaitingReason"))]}),
    pod_cells("1/2", "ContainerWaitingReason", 6, "6"))
case("pod", T + "[2] test3", pod("test3", {"containers": containers(2)}, {
    "phase": "podPhase",
    "containerStatuses": [cs(restarts=3, state=waiting("ContainerWaitingReason")),
                          cs(restarts=3, state=terminated("ContainerTerminatedReason"))]}),
    pod_cells("0/2", "ContainerWaitingReason", 6, "6"))
case("pod", T + "[3] test4", pod("test4", {"containers": containers(2)}, {
    "phase": "podPhase",
    "containerStatuses": [cs(ready=True, restarts=3, state=RUNNING), cs(ready=True, restarts=3)]}),
    pod_cells("1/2", "podPhase", 6, "6"))
case("pod", T + "[4] test5", pod("test5", {"containers": containers(2)}, {
    "reason": "podReason", "phase": "podPhase",
    "containerStatuses": [cs(ready=True, restarts=3, state=RUNNING), cs(ready=True, restarts=3)]}),
    pod_cells("1/2", "podReason", 6, "6"))
case("pod", T + "[5] test6 w/o ready condition", pod("test6", {"containers": containers(2)}, {
    "phase": "Running", "reason": "",
    "containerStatuses": [cs(ready=True, restarts=3, state=terminated("Completed", 0)),
                          cs(ready=True, restarts=3, state=RUNNING)]}),
    pod_cells("1/2", "NotReady", 6, "6"))
case("pod", T + "[6] test6 with ready condition", pod("test6", {"containers": containers(2)}, {
    "phase": "Running", "reason": "",
    "containerStatuses": [cs(ready=True, restarts=3, state=terminated("Completed", 0)),
                          cs(ready=True, restarts=3, state=RUNNING)],
    "conditions": [{"type": "Ready", "status": "True", "lastProbeTime": NOW_S}]}),
    pod_cells("1/2", "Running", 6, "6"))
case("pod", T + "[7] test7", pod("test7", {"initContainers": containers(1), "containers": containers(1)}, {
    "phase": "podPhase",
    "initContainerStatuses": [cs(restarts=3, state=RUNNING, finished=at(-10))],
    "containerStatuses": [cs(restarts=0, state=waiting())]}),
    pod_cells("0/1", "Init:0/1", 3, "3 (10s ago)", at(-10)))
case("pod", T + "[8] test8", pod("test8", {"initContainers": containers(2), "containers": containers(1)}, {
    "phase": "podPhase",
    "initContainerStatuses": [cs(restarts=3, state=RUNNING, finished=at(-10)), cs(state=waiting())],
    "containerStatuses": [cs(state=waiting())]}),
    pod_cells("0/1", "Init:0/2", 3, "3 (10s ago)", at(-10)))
case("pod", T + "[9] test9", pod("test9", {"initContainers": containers(2), "containers": containers(1)}, {
    "phase": "podPhase",
    "initContainerStatuses": [cs(state=terminated()), cs(restarts=3, state=RUNNING, finished=at(-10))],
    "containerStatuses": [cs(state=waiting())]}),
    pod_cells("0/1", "Init:1/2", 3, "3 (10s ago)", at(-10)))
case("pod", T + "[10] test10", pod("test10", {"initContainers": containers(2), "containers": containers(1)}, {
    "phase": "podPhase",
    "initContainerStatuses": [cs(restarts=2, state=terminated(), finished=at(-120)),
                              cs(restarts=3, state=RUNNING, finished=at(-10))],
    "containerStatuses": [cs(state=waiting())]}),
    pod_cells("0/1", "Init:1/2", 5, "5 (10s ago)", at(-10)))
case("pod", T + "[11] test11", pod("test11", {"initContainers": containers(1), "containers": containers(1)}, {
    "phase": "Running",
    "initContainerStatuses": [cs(restarts=2, state=terminated(), finished=at(-120))],
    "containerStatuses": [cs(restarts=4, state=RUNNING, finished=at(-20))]}),
    pod_cells("0/1", "Running", 4, "4 (20s ago)", at(-20)))
case("pod", T + "[12] test12", pod("test12", {"containers": containers(1)}, {
    "phase": "Running",
    "containerStatuses": [cs(ready=True, restarts=3, state=RUNNING, finished=at(-5 * DAY))]}),
    pod_cells("1/1", "Running", 3, "3 (5d ago)", at(-5 * DAY)))
case("pod", T + "[13] test13", pod("test13", {"containers": containers(2)}, {
    "phase": "Running",
    "containerStatuses": [cs(ready=True, restarts=0, state=RUNNING),
                          cs(ready=True, restarts=3, state=RUNNING, finished=at(-10 * DAY))]}),
    pod_cells("2/2", "Running", 3, "3 (10d ago)", at(-10 * DAY)))
case("pod", T + "[14] test14", pod("test14", {"containers": containers(2)}, {
    "phase": "Running",
    "containerStatuses": [cs(ready=True, restarts=6, state=RUNNING, finished=at(-5 * DAY)),
                          cs(ready=True, restarts=3, state=RUNNING, finished=at(-20 * DAY))]}),
    pod_cells("2/2", "Running", 9, "9 (5d ago)", at(-5 * DAY)))
case("pod", T + "[15] test15 SchedulingGated", pod("test15", {"containers": containers(2)}, {
    "phase": "podPhase",
    "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}),
    pod_cells("0/2", "SchedulingGated", 0, "0"))
case("pod", T + "[16] test16 succeeded", pod("test16", {"containers": containers(1)}, {
    "phase": "Succeeded",
    "containerStatuses": [cs(state=terminated("Completed", 0))]}),
    pod_cells("0/1", "Completed", 0, "0"))
case("pod", T + "[17] test17 failed", pod("test17", {"containers": containers(1)}, {
    "phase": "Failed",
    "containerStatuses": [cs(state=terminated("Error", 1))]}),
    pod_cells("0/1", "Error", 0, "0"))
case("pod", T + "[18] test18 succeeded with deletion", pod("test18", {"containers": containers(1)}, {
    "phase": "Succeeded",
    "containerStatuses": [cs(state=terminated("Completed", 0))]}, deleted=DELETE_TIME),
    pod_cells("0/1", "Completed", 0, "0"))
case("pod", T + "[19] test19 running with deletion", pod("test19", {"containers": containers(1)}, {
    "phase": "Running",
    "containerStatuses": [cs(state=RUNNING)]}, deleted=DELETE_TIME),
    pod_cells("0/1", "Terminating", 0, "0"))
case("pod", T + "[20] test20 pending with deletion", pod("test20", {"containers": containers(1)}, {
    "phase": "Pending"}, deleted=DELETE_TIME),
    pod_cells("0/1", "Terminating", 0, "0"))

# TestPrintPodWithRestartableInitContainer
T = "TestPrintPodWithRestartableInitContainer"
SIDECARS = [{"name": "restartable-init-1", "restartPolicy": "Always"},
            {"name": "restartable-init-2", "restartPolicy": "Always"}]
case("pod", T + "[0] first running not started", pod("test1", {"initContainers": SIDECARS, "containers": containers(1)}, {
    "phase": "Pending",
    "initContainerStatuses": [cs("restartable-init-1", restarts=3, state=RUNNING, started=False, finished=at(-10)),
                              cs("restartable-init-2", state=waiting(), started=False)],
    "containerStatuses": [cs(state=waiting())],
    "conditions": [{"type": "Initialized", "status": "False"}]}),
    pod_cells("0/3", "Init:0/2", 3, "3 (10s ago)", at(-10)))
case("pod", T + "[1] first started, second not", pod("test1", {"initContainers": SIDECARS, "containers": containers(1)}, {
    "phase": "Pending",
    "initContainerStatuses": [cs("restartable-init-1", restarts=3, state=RUNNING, started=True, finished=at(-10)),
                              cs("restartable-init-2", state=RUNNING, started=False)],
    "containerStatuses": [cs(state=waiting())],
    "conditions": [{"type": "Initialized", "status": "False"}]}),
    pod_cells("0/3", "Init:1/2", 3, "3 (10s ago)", at(-10)))
case("pod", T + "[2] both started, container running", pod("test2", {"initContainers": SIDECARS, "containers": containers(1)}, {
    "phase": "Running",
    "initContainerStatuses": [cs("restartable-init-1", restarts=3, state=RUNNING, started=True, finished=at(-10)),
                              cs("restartable-init-2", state=RUNNING, started=True)],
    "containerStatuses": [cs(ready=True, restarts=4, state=RUNNING, finished=at(-20))],
    "conditions": [{"type": "Initialized", "status": "True"}]}),
    pod_cells("1/3", "Running", 7, "7 (10s ago)", at(-10)))
case("pod", T + "[3] sidecars failed, container completed", pod("test3", {"initContainers": SIDECARS, "containers": containers(1)}, {
    "phase": "Succeeded",
    "initContainerStatuses": [cs("restartable-init-1", restarts=3, state=terminated("Error", 137), started=False, finished=at(-10)),
                              cs("restartable-init-2", state=terminated("Error", 137), started=False)],
    "containerStatuses": [cs(restarts=4, state=terminated("Completed", 0), finished=at(-20))],
    "conditions": [{"type": "Initialized", "status": "True"}]}),
    pod_cells("0/3", "Completed", 7, "7 (10s ago)", at(-10)))
case("pod", T + "[4] statuses of unknown containers", pod("test4", {
    "initContainers": [{"name": "init1", "image": "initimage"},
                       {"name": "sidecar1", "image": "sidecarimage", "restartPolicy": "Always"}],
    "containers": [{"name": "container1", "image": "containerimage"}]}, {
    "phase": "Running",
    "initContainerStatuses": [cs("initinvalid"), cs("init1"), cs("sidecar1")],
    "containerStatuses": [cs("containerinvalid"), cs("container1")]}),
    pod_cells("0/2", "Init:0/2", 0, "0"))

# TestPrintPodwide (wide cells)
T = "TestPrintPodwide"
GATES = [{"conditionType": "condition1"}, {"conditionType": "condition2"}, {"conditionType": "condition3"}]
GATE_CONDITIONS = [{"type": "condition1", "status": "False"}, {"type": "condition2", "status": "True"}]
for n, ips in ((0, [{"ip": "1.1.1.1"}]), (1, [{"ip": "1.1.1.1"}, {"ip": "2001:db8::"}])):
    case("pod", "%s[%d] test1" % (T, n), pod("test1", {"containers": containers(2), "nodeName": "test1", "readinessGates": GATES}, {
        "conditions": GATE_CONDITIONS, "phase": "podPhase", "podIPs": ips,
        "containerStatuses": [cs(ready=True, restarts=3, state=RUNNING), cs(restarts=3)],
        "nominatedNodeName": "node1"}),
        dict(pod_cells("1/2", "podPhase", 6, "6"),
             pod_ip="1.1.1.1", pod_node="test1", pod_nominated_node="node1", pod_readiness_gates="1/3"))
case("pod", T + "[2] test2", pod("test2", {"containers": containers(2), "nodeName": ""}, {
    "phase": "podPhase",
    "containerStatuses": [cs(ready=True, restarts=3, state=RUNNING),
                          cs(restarts=3, state=waiting("ContainerWaitingReason"))]}),
    dict(pod_cells("1/2", "ContainerWaitingReason", 6, "6"),
         pod_ip="<none>", pod_node="<none>", pod_nominated_node="<none>", pod_readiness_gates="<none>"))

# TestPrintPodConditions
T = "TestPrintPodConditions"
for n, (name, phase) in enumerate((("test1", "Running"), ("test1", "Succeeded"), ("test2", "Failed"))):
    case("pod", "%s[%d] %s" % (T, n, phase), pod(name, {"containers": containers(2)}, {
        "phase": phase,
        "containerStatuses": [cs(ready=True, restarts=3, state=RUNNING), cs(restarts=3)]}),
        pod_cells("1/2", phase, 6, "6"))

# TestPrintPodList
T = "TestPrintPodList"
case("pod", T + "[0] row test1", pod("test1", {"containers": containers(2)}, {
    "phase": "podPhase",
    "containerStatuses": [cs(ready=True, restarts=3, state=RUNNING), cs(ready=True, restarts=3, state=RUNNING)]}),
    pod_cells("2/2", "podPhase", 6, "6"))
case("pod", T + "[0] row test2", pod("test2", {"containers": containers(1)}, {
    "phase": "podPhase",
    "containerStatuses": [cs(ready=True, restarts=1, state=RUNNING)]}),
    pod_cells("1/1", "podPhase", 1, "1"))

# TestPrintNonTerminatedPod
T = "TestPrintNonTerminatedPod"
for n, (name, phase, second_ready) in enumerate((("test1", "Running", False), ("test2", "Pending", False),
                                                  ("test3", "Unknown", False), ("test4", "Succeeded", False),
                                                  ("test5", "Failed", True))):
    case("pod", "%s[%d] %s" % (T, n, phase), pod(name, {"containers": containers(2)}, {
        "phase": phase,
        "containerStatuses": [cs(ready=True, restarts=3, state=RUNNING), cs(ready=second_ready, restarts=3)]}),
        pod_cells("1/2", phase, 6, "6"))

# TestTableRowDeepCopyShouldNotPanic, the Pod row: an empty pod.
case("pod", "TestTableRowDeepCopyShouldNotPanic[Pod] empty pod", {"metadata": {}, "spec": {}, "status": {}},
     pod_cells("0/0", "", 0, "0"))

# ---------------------------------------------------------------------------
# Nodes
# ---------------------------------------------------------------------------

def node(name, status=None, spec=None, labels=None):
    meta = {"name": name}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec or {}, "status": status or {}}


def node_cells(status, roles="<none>", version="", age="<unknown>"):
    return {"node_status": status, "node_roles": roles, "node_version": version, "age(@at)": age}


def node_wide(status, internal, external, os_image="<unknown>", kernel="<unknown>", runtime="<unknown>"):
    return dict(node_cells(status), node_internal_ip=internal, node_external_ip=external,
                node_os_image=os_image, node_kernel_version=kernel, node_container_runtime=runtime)


T = "TestPrintNodeStatus"
READY_T = {"type": "Ready", "status": "True"}
READY_F = {"type": "Ready", "status": "False"}
for n, (name, spec, conds, want) in enumerate((
        ("foo1", {}, [READY_T], "Ready"),
        ("foo2", {"unschedulable": True}, [READY_T], "Ready,SchedulingDisabled"),
        ("foo3", {}, [READY_T, READY_T], "Ready"),
        ("foo4", {}, [READY_F], "NotReady"),
        ("foo5", {"unschedulable": True}, [READY_F], "NotReady,SchedulingDisabled"),
        ("foo6", {}, [{"type": "InvalidValue", "status": "True"}], "Unknown"),
        ("foo7", {}, [{"type": "", "status": ""}], "Unknown"),
        ("foo8", {"unschedulable": True}, [{"type": "InvalidValue", "status": "True"}], "Unknown,SchedulingDisabled"),
        ("foo9", {"unschedulable": True}, [{"type": "", "status": ""}], "Unknown,SchedulingDisabled"))):
    case("node", "%s[%d] %s" % (T, n, name), node(name, {"conditions": conds}, spec), node_cells(want))

T = "TestPrintNodeRole"
case("node", T + "[0] foo9", node("foo9"), node_cells("Unknown"))
case("node", T + "[1] foo10", node("foo10", labels={
    "node-role.kubernetes.io/master": "", "node-role.kubernetes.io/control-plane": "",
    "node-role.kubernetes.io/proxy": "", "kubernetes.io/role": "node"}),
    node_cells("Unknown", "control-plane,master,node,proxy"))
case("node", T + "[2] foo11", node("foo11", labels={"kubernetes.io/role": "node"}), node_cells("Unknown", "node"))

EXT = [{"type": "ExternalIP", "address": "1.1.1.1"}]
T = "TestPrintNodeOSImage"
case("node", T + "[0] foo1", node("foo1", {"nodeInfo": {"osImage": "fake-os-image"}, "addresses": EXT}),
     node_wide("Unknown", "<none>", "1.1.1.1", os_image="fake-os-image"))
case("node", T + "[1] foo2", node("foo2", {"nodeInfo": {"kernelVersion": "fake-kernel-version"}, "addresses": EXT}),
     node_wide("Unknown", "<none>", "1.1.1.1", kernel="fake-kernel-version"))
T = "TestPrintNodeKernelVersion"
case("node", T + "[0] foo1", node("foo1", {"nodeInfo": {"kernelVersion": "fake-kernel-version"}, "addresses": EXT}),
     node_wide("Unknown", "<none>", "1.1.1.1", kernel="fake-kernel-version"))
case("node", T + "[1] foo2", node("foo2", {"nodeInfo": {"osImage": "fake-os-image"}, "addresses": EXT}),
     node_wide("Unknown", "<none>", "1.1.1.1", os_image="fake-os-image"))
T = "TestPrintNodeContainerRuntimeVersion"
case("node", T + "[0] foo1", node("foo1", {"nodeInfo": {"containerRuntimeVersion": "foo://1.2.3"}, "addresses": EXT}),
     node_wide("Unknown", "<none>", "1.1.1.1", runtime="foo://1.2.3"))
case("node", T + "[1] foo2", node("foo2", {"nodeInfo": {}, "addresses": EXT}),
     node_wide("Unknown", "<none>", "1.1.1.1"))
T = "TestPrintNodeName"
case("node", T + "[0] 127.0.0.1", node("127.0.0.1"), node_cells("Unknown"))
case("node", T + "[1] empty name", node(""), node_cells("Unknown"))
T = "TestPrintNodeExternalIP"
case("node", T + "[0] foo1", node("foo1", {"addresses": EXT}), node_wide("Unknown", "<none>", "1.1.1.1"))
case("node", T + "[1] foo2", node("foo2", {"addresses": [{"type": "InternalIP", "address": "1.1.1.1"}]}),
     node_wide("Unknown", "1.1.1.1", "<none>"))
case("node", T + "[2] foo3", node("foo3", {"addresses": [
    {"type": "ExternalIP", "address": "2.2.2.2"}, {"type": "InternalIP", "address": "3.3.3.3"},
    {"type": "ExternalIP", "address": "4.4.4.4"}]}), node_wide("Unknown", "3.3.3.3", "2.2.2.2"))
T = "TestPrintNodeInternalIP"
case("node", T + "[0] foo1", node("foo1", {"addresses": [{"type": "InternalIP", "address": "1.1.1.1"}]}),
     node_wide("Unknown", "1.1.1.1", "<none>"))
case("node", T + "[1] foo2", node("foo2", {"addresses": EXT}), node_wide("Unknown", "<none>", "1.1.1.1"))
case("node", T + "[2] foo3", node("foo3", {"addresses": [
    {"type": "InternalIP", "address": "2.2.2.2"}, {"type": "ExternalIP", "address": "3.3.3.3"},
    {"type": "InternalIP", "address": "4.4.4.4"}]}), node_wide("Unknown", "2.2.2.2", "3.3.3.3"))

# ---------------------------------------------------------------------------
# Namespaces, Secrets, ServiceAccounts, ConfigMaps
# ---------------------------------------------------------------------------

case("namespace", "TestPrintNamespace[0] namespace1",
     {"metadata": {"name": "namespace1", "creationTimestamp": at(1.9)}, "status": {"phase": "FooStatus"}},
     {"namespace_status": "FooStatus", "age(@at)": "0s"})
case("namespace", "TestPrintNamespace[1] namespace2", {"metadata": {"name": "namespace2"}},
     {"namespace_status": "", "age(@at)": "<unknown>"})

case("secret", "TestPrintSecret[0] secret1",
     {"metadata": {"name": "secret1", "creationTimestamp": at(1.9)},
      "type": "kubernetes.io/service-account-token", "data": {"token": "c2VjcmV0IGRhdGE="}},
     {"secret_type": "kubernetes.io/service-account-token", "secret_data": 1, "age(@at)": "0s"})
case("secret", "TestPrintSecret[1] secret1 no data",
     {"metadata": {"name": "secret1", "creationTimestamp": at(1.9)}, "type": "kubernetes.io/service-account-token"},
     {"secret_type": "kubernetes.io/service-account-token", "secret_data": 0, "age(@at)": "0s"})

case("serviceaccount", "TestPrintServiceAccount[0] sa1 no secrets",
     {"metadata": {"name": "sa1", "creationTimestamp": at(1.9)}, "secrets": []},
     {"serviceaccount_secrets": 0, "age(@at)": "0s"})
case("serviceaccount", "TestPrintServiceAccount[1] sa1 two secrets",
     {"metadata": {"name": "sa1", "creationTimestamp": at(1.9)}, "secrets": [{"name": "Secret1"}, {"name": "Secret2"}]},
     {"serviceaccount_secrets": 2, "age(@at)": "0s"})

case("configmap", "TestPrintConfigMap[0] configmap1",
     {"metadata": {"name": "configmap1", "creationTimestamp": at(1.9)}},
     {"configmap_data": 0, "age(@at)": "0s"})
case("configmap", "TestPrintConfigMap[1] configmap2",
     {"metadata": {"name": "configmap2", "creationTimestamp": at(1.9)}, "data": {"foo": "bar"}},
     {"configmap_data": 1, "age(@at)": "0s"})
case("configmap", "TestPrintConfigMap[2] configmap3",
     {"metadata": {"name": "configmap3", "creationTimestamp": at(1.9)}, "data": {"foo": "bar"},
      "binaryData": {"bin": "YmluYXJ5IGRhdGE="}},
     {"configmap_data": 2, "age(@at)": "0s"})

# ---------------------------------------------------------------------------
# Label selectors: TestLabelSelectorAsSelector (apimachinery
# apis/meta/v1/helpers_test.go), checked through the helpers the wide
# SELECTOR cells use: _printer_label_selector (LabelSelectorAsSelector +
# String(), NULL for an error) and _printer_format_label_selector
# (FormatLabelSelector).  The "object" of these cases is the selector
# itself (None = a nil *LabelSelector).
# ---------------------------------------------------------------------------

def sel_cells(string, formatted):
    return {"_printer_label_selector": string, "_printer_format_label_selector": formatted}


T = "TestLabelSelectorAsSelector"
BAZ_IN = [{"key": "baz", "operator": "In", "values": ["qux", "norf"]}]
for n, (label, sel, string) in enumerate((
        ("nil", None, ""),
        ("empty", {}, ""),
        ("matchLabels", {"matchLabels": {"foo": "bar"}}, "foo=bar"),
        ("matchExpressions", {"matchExpressions": BAZ_IN}, "baz in (norf,qux)"),
        ("both", {"matchLabels": {"foo": "bar"}, "matchExpressions": BAZ_IN}, "baz in (norf,qux),foo=bar"),
        ("Exists with values", {"matchExpressions": [{"key": "baz", "operator": "Exists", "values": ["qux", "norf"]}]},
         None))):
    formatted = "<error>" if string is None else (string or "<none>")
    case("labelselector", "%s[%d] %s" % (T, n, label), sel, sel_cells(string, formatted))

# Not upstream: the other operators and the rules of labels.NewRequirement
# and Requirement.String, with the text derived from the code.
T = "kwatch:LabelSelectorAsSelector"
for label, sel, string in (
        ("NotIn, Exists, DoesNotExist, sorted by key",
         {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["b", "a", "a"]},
                               {"key": "app", "operator": "Exists"},
                               {"key": "example.com/legacy", "operator": "DoesNotExist", "values": []}]},
         "app,!example.com/legacy,tier notin (a,a,b)"),
        ("one value kept as written, several in byte order",
         {"matchLabels": {"b": "", "a": "x"},
          "matchExpressions": [{"key": "c", "operator": "In", "values": ["z"]},
                               {"key": "d", "operator": "In", "values": ["b", "B", "a"]}]},
         "a=x,b=,c in (z),d in (B,a,b)"),
        ("equal keys keep matchLabels first, then expressions in order",
         {"matchLabels": {"k": "v"},
          "matchExpressions": [{"key": "k", "operator": "NotIn", "values": ["w"]},
                               {"key": "k", "operator": "Exists"}, {"key": "j", "operator": "Exists"}]},
         "j,k=v,k notin (w),k"),
        ("null matchLabels and matchExpressions", {"matchLabels": None, "matchExpressions": None}, ""),
        ("In without values", {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}, None),
        ("unknown operator", {"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["b"]}]}, None),
        ("no operator", {"matchExpressions": [{"key": "a"}]}, None),
        ("invalid key", {"matchLabels": {"Example.com/a": "b"}}, None),
        ("key with two slashes", {"matchLabels": {"a/b/c": "d"}}, None),
        ("name part of 64 bytes", {"matchLabels": {"a" * 64: "b"}}, None),
        ("prefix and name of 63 bytes", {"matchLabels": {"example.com/" + "a" * 63: "b"}},
         "example.com/" + "a" * 63 + "=b"),
        ("invalid value", {"matchLabels": {"a": "-b"}}, None),
        ("invalid expression value", {"matchExpressions": [{"key": "a", "operator": "In", "values": ["b", "c d"]}]},
         None)):
    formatted = "<error>" if string is None else (string or "<none>")
    case("labelselector", "%s %s" % (T, label), sel, sel_cells(string, formatted))

# ---------------------------------------------------------------------------
# Workloads
# ---------------------------------------------------------------------------

TWO_CONTAINERS = [{"name": "fake-container1", "image": "fake-image1"}, {"name": "fake-container2", "image": "fake-image2"}]


def wide(kind, containers="fake-container1,fake-container2", images="fake-image1,fake-image2", selector=None):
    """The wide CONTAINERS, IMAGES (and SELECTOR) cells of a workload kind."""
    cells = {kind + "_containers": containers, kind + "_images": images}
    if selector is not None:
        cells[kind + "_selector"] = selector
    return cells


DEPLOY1 = {"metadata": {"name": "test1", "creationTimestamp": at(1.9)},
           "spec": {"replicas": 5, "template": {"spec": {"containers": TWO_CONTAINERS}},
                    "selector": {"matchLabels": {"foo": "bar"}}},
           "status": {"replicas": 10, "updatedReplicas": 2, "availableReplicas": 1, "unavailableReplicas": 4}}
DEPLOY_CELLS = {"deployment_ready": "0/5", "deployment_up_to_date": 2, "deployment_available": 1, "age(@at)": "0s"}
case("deployment", "TestPrintDeployment[0] test1", DEPLOY1, DEPLOY_CELLS)
case("deployment", "TestPrintDeployment[1] test1 wide", DEPLOY1, dict(DEPLOY_CELLS, **wide("deployment", selector="foo=bar")))

DS1 = {"metadata": {"name": "test1", "creationTimestamp": at(1.9)},
       "spec": {"template": {"spec": {"containers": TWO_CONTAINERS}}, "selector": {"matchLabels": {"foo": "bar"}}},
       "status": {"currentNumberScheduled": 2, "desiredNumberScheduled": 3, "numberReady": 1,
                  "updatedNumberScheduled": 2, "numberAvailable": 0}}


def ds_cells(desired, current, ready, updated, available):
    return {"daemonset_desired": desired, "daemonset_current": current, "daemonset_ready": ready,
            "daemonset_up_to_date": updated, "daemonset_available": available,
            "daemonset_node_selector": "<none>", "age(@at)": "0s"}


case("daemonset", "TestPrintDaemonSet[0] test1", DS1, ds_cells(3, 2, 1, 2, 0))
case("daemonset", "TestPrintDaemonSet[1] test1 wide", DS1, dict(ds_cells(3, 2, 1, 2, 0), **wide("daemonset", selector="foo=bar")))
case("daemonset", "TestPrintDaemonSetList row daemonset1", dict(DS1, metadata={"name": "daemonset1", "creationTimestamp": at(1.9)}),
     ds_cells(3, 2, 1, 2, 0))
case("daemonset", "TestPrintDaemonSetList row daemonset2",
     {"metadata": {"name": "daemonset2", "creationTimestamp": at(1.9)},
      "spec": {"template": {}, "selector": {"matchLabels": {"foo": "bar"}}},
      "status": {"currentNumberScheduled": 4, "desiredNumberScheduled": 2, "numberReady": 9,
                 "updatedNumberScheduled": 3, "numberAvailable": 3}},
     ds_cells(2, 4, 9, 3, 3))

RS1 = {"metadata": {"name": "test1", "creationTimestamp": at(1.9)},
       "spec": {"replicas": 5, "template": {"spec": {"containers": TWO_CONTAINERS}},
                "selector": {"matchLabels": {"foo": "bar"}}},
       "status": {"replicas": 5, "readyReplicas": 2}}
RS_CELLS = {"replicaset_desired": 5, "replicaset_current": 5, "replicaset_ready": 2, "age(@at)": "0s"}
case("replicaset", "TestPrintReplicaSet[0] test1", RS1, RS_CELLS)
case("replicaset", "TestPrintReplicaSet[1] test1 wide", RS1, dict(RS_CELLS, **wide("replicaset", selector="foo=bar")))
case("replicaset", "TestPrintReplicaSetList row replicaset1", dict(RS1, metadata={"name": "replicaset1", "creationTimestamp": at(1.9)}),
     {"replicaset_desired": 5, "replicaset_current": 5, "replicaset_ready": 2, "age(@at)": "0s"})
case("replicaset", "TestPrintReplicaSetList row replicaset2",
     {"metadata": {"name": "replicaset2", "creationTimestamp": at(1.9)},
      "spec": {"replicas": 4, "template": {}, "selector": {"matchLabels": {"foo": "bar"}}},
      "status": {"replicas": 3, "readyReplicas": 1}},
     {"replicaset_desired": 4, "replicaset_current": 3, "replicaset_ready": 1, "age(@at)": "0s"})

def rc(name, replicas, status=None, template=True):
    """TestPrintReplicationController's object: selector and template label a=b, container test/test_image."""
    meta = {"name": name}
    spec = {"replicas": replicas}
    if template:
        spec["selector"] = {"a": "b"}
        spec["template"] = {"metadata": {"labels": {"a": "b"}}, "spec": {
            "containers": [{"name": "test", "image": "test_image", "imagePullPolicy": "IfNotPresent",
                            "terminationMessagePolicy": "File"}],
            "restartPolicy": "Always", "dnsPolicy": "ClusterFirst"}}
    return {"apiVersion": "v1", "kind": "ReplicationController", "metadata": meta, "spec": spec, "status": status or {}}


def rc_cells(desired, current, ready):
    return {"replicationcontroller_desired": desired, "replicationcontroller_current": current,
            "replicationcontroller_ready": ready, "age(@at)": "<unknown>"}


T = "TestPrintReplicationController"
case("replicationcontroller", T + "[0] basic", rc("rc1", 0), rc_cells(0, 0, 0))
case("replicationcontroller", T + "[1] basic with replicas", rc("rc1", 5, {"replicas": 3, "readyReplicas": 1}),
     rc_cells(5, 3, 1))
case("replicationcontroller", T + "[2] wide", rc("rc1", 5, {"replicas": 3, "readyReplicas": 1}),
     dict(rc_cells(5, 3, 1), **wide("replicationcontroller", "test", "test_image", "a=b")))
# The object of a Bookmark event (metav1.InitialEventsAnnotationKey): no name, template or selector.
case("replicationcontroller", T + "[3] no panic",
     dict(rc("", 0, template=False), metadata={"annotations": {"k8s.io/initial-events-end": "true"}}),
     dict(rc_cells(0, 0, 0), **wide("replicationcontroller", "", "", "<none>")))

STS1 = {"metadata": {"name": "test1", "creationTimestamp": at(1.9)},
        "spec": {"replicas": 5, "template": {"spec": {"containers": TWO_CONTAINERS}}},
        "status": {"replicas": 5, "readyReplicas": 2}}
case("statefulset", "TestPrintStatefulSet[0] test1", STS1, {"statefulset_ready": "2/5", "age(@at)": "0s"})
case("statefulset", "TestPrintStatefulSet[1] test1 wide", STS1,
     dict({"statefulset_ready": "2/5", "age(@at)": "0s"}, **wide("statefulset")))

# Not upstream: the wide cells' edge cases, derived from printers.go.
T = "kwatch:layoutContainerCells"
case("deployment", T + " init containers left out, missing image, one container", {
    "metadata": {"name": "d"}, "spec": {"template": {"spec": {
        "initContainers": [{"name": "init", "image": "busybox"}],
        "containers": [{"name": "app", "image": "nginx:1.27"}, {"name": "side"}]}}}},
    wide("deployment", "app,side", "nginx:1.27,"))
case("statefulset", T + " no template", {"metadata": {"name": "s"}, "spec": {}}, wide("statefulset", "", ""))
T = "kwatch:printDeployment selector"
case("deployment", T + " nil prints empty", {"metadata": {"name": "d"}, "spec": {}}, {"deployment_selector": ""})
case("deployment", T + " empty prints empty", {"metadata": {"name": "d"}, "spec": {"selector": {}}},
     {"deployment_selector": ""})
case("deployment", T + " expressions", {"metadata": {"name": "d"}, "spec": {"selector": {
    "matchLabels": {"app": "web"}, "matchExpressions": [{"key": "env", "operator": "In", "values": ["prod", "dev"]}]}}},
    {"deployment_selector": "app=web,env in (dev,prod)"})
case("deployment", T + " invalid", {"metadata": {"name": "d"}, "spec": {"selector": {
    "matchExpressions": [{"key": "env", "operator": "Exists", "values": ["x"]}]}}},
    {"deployment_selector": "<invalid>"})
T = "kwatch:FormatLabelSelector"
case("daemonset", T + " nil", {"metadata": {"name": "d"}, "spec": {}}, {"daemonset_selector": "<none>"})
case("replicaset", T + " empty", {"metadata": {"name": "r"}, "spec": {"selector": {}}}, {"replicaset_selector": "<none>"})
case("replicaset", T + " invalid", {"metadata": {"name": "r"}, "spec": {"selector": {
    "matchExpressions": [{"key": "env", "operator": "Gt", "values": ["1"]}]}}}, {"replicaset_selector": "<error>"})

# ---------------------------------------------------------------------------
# Jobs and CronJobs
# ---------------------------------------------------------------------------

JOB_TEMPLATE = {"spec": {"containers": [{"name": "fake-job-container1", "image": "fake-job-image1"},
                                        {"name": "fake-job-container2", "image": "fake-job-image2"}]}}


def job(name, created, spec=None, status=None, deleted=None):
    meta = {"name": name, "creationTimestamp": created}
    if deleted is not None:
        meta["deletionTimestamp"] = deleted
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec or {}, "status": status or {}}


def job_cells(status, completions, duration, age, start=None, completion=None):
    return {"job_status": status, "job_completions": completions, "job_duration(@at)": duration,
            "age(@at)": age, "job_start_time": start, "job_completion_time": completion}


JOB_WIDE = {"containers": "fake-job-container1,fake-job-container2", "images": "fake-job-image1,fake-job-image2"}
T = "TestPrintJob"
# [0] has the upstream's "job-lable-value" (not printed: not wide).
case("job", T + "[0] job1", job("job1", at(1.9), {"completions": 2, "template": JOB_TEMPLATE,
                                                  "selector": {"matchLabels": {"job-label": "job-lable-value"}}},
                                {"succeeded": 1}),
     job_cells("Running", "1/2", "", "0s"))
case("job", T + "[1] job1 wide", job("job1", at(1.9), {"completions": 2, "template": JOB_TEMPLATE,
                                                       "selector": {"matchLabels": {"job-label": "job-label-value"}}},
                                     {"succeeded": 1}),
     dict(job_cells("Running", "1/2", "", "0s"), **wide("job", selector="job-label=job-label-value", **JOB_WIDE)))
case("job", T + "[2] job2 ten-year age", job("job2", add_date(years=-10), {}, {"succeeded": 0}),
     job_cells("Running", "0/1", "", "10y"))
case("job", T + "[3] job3 with duration", job("job3", at(YEAR10), {},
                                            {"succeeded": 0, "startTime": at(60), "completionTime": at(31 * 60)}),
     job_cells("Running", "0/1", "30m", "10y", at(60), at(31 * 60)))
case("job", T + "[4] job4 running", job("job4", at(YEAR10), {}, {"succeeded": 0, "startTime": at(-20 * 60)}),
     job_cells("Running", "0/1", "20m", "10y", at(-20 * 60)))
for n, (name, ctype, want) in enumerate((("job5", "Complete", "Complete"), ("job6", "Failed", "Failed"),
                                         ("job7", "Suspended", "Suspended"), ("job8", "FailureTarget", "FailureTarget")), 5):
    case("job", "%s[%d] %s" % (T, n, name), job(name, at(1.9), {},
                                                {"succeeded": 0, "conditions": [{"type": ctype, "status": "True"}]}),
         job_cells(want, "0/1", "", "0s"))
case("job", T + "[9] job9 terminating", job("job9", at(1.9), {}, {}, deleted=at(1.9)),
     job_cells("Terminating", "0/1", "", "0s"))
case("job", "TestPrintJobList row job1", job("job1", at(1.9), {"completions": 2, "template": JOB_TEMPLATE}, {"succeeded": 1}),
     job_cells("Running", "1/2", "", "0s"))
case("job", "TestPrintJobList row job2", job("job2", at(1.9), {"completions": 2, "template": JOB_TEMPLATE},
                                            {"succeeded": 2, "startTime": at(-20 * 60)}),
     job_cells("Running", "2/2", "20m", "0s", at(-20 * 60)))


def cronjob(name, created, spec, status):
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name, "creationTimestamp": created},
            "spec": spec, "status": status}


def cron_cells(schedule, tz, suspend, active, last, age, last_ts):
    return {"cronjob_schedule": schedule, "cronjob_timezone": tz, "cronjob_suspend": suspend,
            "cronjob_active": active, "cronjob_last_schedule_text(@at)": last, "age(@at)": age,
            "cronjob_last_schedule": last_ts}


CJ_JOB = {"spec": {"completions": 2, "template": JOB_TEMPLATE, "selector": {"matchLabels": {"a": "b"}}}}
T = "TestPrintCronJob"
case("cronjob", T + "[0] cronjob1", cronjob("cronjob1", at(1.9), {"schedule": "0/5 * * * ?", "suspend": False, "jobTemplate": CJ_JOB},
                                            {"lastScheduleTime": at(1.9)}),
     cron_cells("0/5 * * * ?", "<none>", "False", 0, "0s", "0s", at(1.9)))
case("cronjob", T + "[1] cronjob1 with timezone", cronjob("cronjob1", at(1.9), {"schedule": "0/5 * * * ?", "timeZone": "LOCAL",
                                                                                "suspend": False, "jobTemplate": CJ_JOB},
                                                          {"lastScheduleTime": at(1.9)}),
     cron_cells("0/5 * * * ?", "LOCAL", "False", 0, "0s", "0s", at(1.9)))
case("cronjob", T + "[2] cronjob1 wide", cronjob("cronjob1", at(1.9), {"schedule": "0/5 * * * ?", "suspend": False, "jobTemplate": CJ_JOB},
                                                 {"lastScheduleTime": at(1.9)}),
     dict(cron_cells("0/5 * * * ?", "<none>", "False", 0, "0s", "0s", at(1.9)), **wide("cronjob", selector="a=b", **JOB_WIDE)))
case("cronjob", T + "[3] cronjob2", cronjob("cronjob2", at(-300), {"schedule": "0/5 * * * ?", "suspend": False},
                                            {"lastScheduleTime": at(-30)}),
     cron_cells("0/5 * * * ?", "<none>", "False", 0, "30s", "5m", at(-30)))
case("cronjob", T + "[4] cronjob3 never scheduled", cronjob("cronjob3", at(-300), {"schedule": "0/5 * * * ?", "suspend": False}, {}),
     cron_cells("0/5 * * * ?", "<none>", "False", 0, "<none>", "5m", None))
case("cronjob", "TestPrintCronJobList row cronjob1",
     cronjob("cronjob1", at(1.9), {"schedule": "0/5 * * * ?", "timeZone": "LOCAL", "suspend": False,
                                   "jobTemplate": {"spec": {"completions": 2, "selector": {"matchLabels": {"a": "b"}}}}},
             {"lastScheduleTime": at(1.9)}),
     cron_cells("0/5 * * * ?", "LOCAL", "False", 0, "0s", "0s", at(1.9)))
case("cronjob", "TestPrintCronJobList row cronjob2",
     cronjob("cronjob2", at(1.9), {"schedule": "4/5 1 1 1 ?", "suspend": False,
                                   "jobTemplate": {"spec": {"completions": 2, "selector": {"matchLabels": {"a": "b"}}}}},
             {"lastScheduleTime": at(-20 * 60)}),
     cron_cells("4/5 1 1 1 ?", "<none>", "False", 0, "20m", "0s", at(-20 * 60)))

# Not upstream: what the API server stores, derived from printers.go.
case("job", "kwatch:printJob generated selector", job("pi", at(-60), {
    "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "5d9d2b3c-0000-4000-8000-000000000001"}},
    "template": {"spec": {"containers": [{"name": "pi", "image": "perl:5.34.0"}]}}}, {}),
    wide("job", "pi", "perl:5.34.0", "batch.kubernetes.io/controller-uid=5d9d2b3c-0000-4000-8000-000000000001"))
case("cronjob", "kwatch:printCronJob job template without selector or containers",
     cronjob("c", at(-60), {"schedule": "@hourly", "jobTemplate": {"spec": {}}}, {}),
     wide("cronjob", "", "", "<none>"))

# ---------------------------------------------------------------------------
# Services
# ---------------------------------------------------------------------------

def svc(name, spec, status=None):
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec, "status": status or {}}


def svc_cells(type_, cluster_ip, external_ip, ports, wide=False, selector=None):
    c = {"service_type": type_, "service_cluster_ip": cluster_ip,
         "service_external_ip(wide => %s)" % ("true" if wide else "false"): external_ip,
         "service_ports": ports, "age(@at)": "<unknown>"}
    if selector is not None:
        c["service_selector"] = selector
    return c


T = "TestPrintServiceLoadBalancer"
P80 = [{"port": 80, "protocol": "TCP"}]
P3 = [{"port": 80, "protocol": "TCP"}, {"port": 8090, "protocol": "UDP"}, {"port": 8000, "protocol": "TCP"}]
LB3 = {"loadBalancer": {"ingress": [{"ip": "2.3.4.5"}, {"ip": "3.4.5.6"}, {"ip": "5.6.7.8", "hostname": "host5678"}]}}
case("service", T + "[0] service1", svc("service1", {"clusterIPs": ["1.2.3.4"], "type": "LoadBalancer", "ports": P80},
                                        {"loadBalancer": {"ingress": [{"ip": "2.3.4.5"}, {"ip": "3.4.5.6"}]}}),
     svc_cells("LoadBalancer", "1.2.3.4", "2.3.4.5,3.4.5.6", "80/TCP"))
case("service", T + "[1] service2 pending", svc("service2", {"clusterIPs": ["1.3.4.5"], "type": "LoadBalancer", "ports": [
    {"port": 80, "protocol": "TCP"}, {"port": 8090, "protocol": "UDP"}, {"port": 8000, "protocol": "TCP"},
    {"port": 7777, "protocol": "SCTP"}]}),
    svc_cells("LoadBalancer", "1.3.4.5", "<pending>", "80/TCP,8090/UDP,8000/TCP,7777/SCTP"))
case("service", T + "[2] service3", svc("service3", {"clusterIPs": ["1.4.5.6"], "type": "LoadBalancer", "ports": P3},
                                        {"loadBalancer": {"ingress": [{"ip": "2.3.4.5"}]}}),
     svc_cells("LoadBalancer", "1.4.5.6", "2.3.4.5", "80/TCP,8090/UDP,8000/TCP"))
case("service", T + "[3] service4 elided", svc("service4", {"clusterIPs": ["1.5.6.7"], "type": "LoadBalancer", "ports": P3}, LB3),
     svc_cells("LoadBalancer", "1.5.6.7", "2.3.4.5,3.4.5...", "80/TCP,8090/UDP,8000/TCP"))
case("service", T + "[4] service4 wide", svc("service4", {"clusterIPs": ["1.5.6.7"], "type": "LoadBalancer", "ports": P3,
                                                          "selector": {"foo": "bar"}}, LB3),
     svc_cells("LoadBalancer", "1.5.6.7", "2.3.4.5,3.4.5.6,5.6.7.8", "80/TCP,8090/UDP,8000/TCP", wide=True, selector="foo=bar"))

T = "TestPrintService"
case("service", T + "[0] test1", svc("test1", {"type": "ClusterIP", "ports": [{"protocol": "tcp", "port": 2233}],
                                               "clusterIPs": ["10.9.8.7"], "selector": {"foo": "bar"}}),
     svc_cells("ClusterIP", "10.9.8.7", "<none>", "2233/tcp"))
case("service", T + "[1] test1 wide", svc("test1", {"type": "ClusterIP", "ports": [{"protocol": "tcp", "port": 2233}],
                                                    "clusterIPs": ["10.9.8.7"], "selector": {"foo": "bar"}}),
     svc_cells("ClusterIP", "10.9.8.7", "<none>", "2233/tcp", wide=True, selector="foo=bar"))
case("service", T + "[2] test2 NodePort", svc("test2", {"type": "NodePort", "ports": [{"protocol": "tcp", "port": 8888, "nodePort": 9999}],
                                                        "clusterIPs": ["10.9.8.7"]}),
     svc_cells("NodePort", "10.9.8.7", "<none>", "8888:9999/tcp"))
case("service", T + "[3] test3 LoadBalancer", svc("test3", {"type": "LoadBalancer", "ports": [{"protocol": "tcp", "port": 8888}],
                                                            "clusterIPs": ["10.9.8.7"]}),
     svc_cells("LoadBalancer", "10.9.8.7", "<pending>", "8888/tcp"))
case("service", T + "[4] test4 externalIP, no LB status", svc("test4", {"type": "LoadBalancer", "ports": [{"protocol": "tcp", "port": 8888}],
                                                                        "clusterIPs": ["10.9.8.7"], "externalIPs": ["80.11.12.10"]}),
     svc_cells("LoadBalancer", "10.9.8.7", "80.11.12.10", "8888/tcp"))
case("service", T + "[5] test5 externalIP", svc("test5", {"type": "LoadBalancer", "ports": [{"protocol": "tcp", "port": 8888}],
                                                          "clusterIPs": ["10.9.8.7"], "externalIPs": ["80.11.12.10"]},
                                                {"loadBalancer": {"ingress": [{"ip": "3.4.5.6", "hostname": "test.cluster.com"}]}}),
     svc_cells("LoadBalancer", "10.9.8.7", "3.4.5.6,80.11.12.10", "8888/tcp"))
case("service", T + "[6] test6 externalIPs", svc("test6", {"type": "LoadBalancer", "ports": [{"protocol": "tcp", "port": 8888}],
                                                           "clusterIPs": ["10.9.8.7"], "externalIPs": ["80.11.12.10", "80.11.12.11"]},
                                                 {"loadBalancer": {"ingress": [{"ip": "2.3.4.5", "hostname": "test.cluster.local"},
                                                                               {"ip": "3.4.5.6", "hostname": "test.cluster.com"}]}}),
     svc_cells("LoadBalancer", "10.9.8.7", "2.3.4.5,3.4.5.6,80.11.12.10,80.11.12.11", "8888/tcp"))
case("service", T + "[7] test7 ExternalName", svc("test7", {"type": "ExternalName", "externalName": "my.database.example.com"}),
     svc_cells("ExternalName", "<none>", "my.database.example.com", "<none>"))
case("service", "TestPrintServiceList row service1", svc("service1", {"type": "ClusterIP", "ports": [{"protocol": "tcp", "port": 2233}],
                                                                      "clusterIPs": ["10.9.8.7"]}),
     svc_cells("ClusterIP", "10.9.8.7", "<none>", "2233/tcp"))
case("service", "TestPrintServiceList row service2", svc("service2", {"type": "NodePort", "ports": [{"protocol": "udp", "port": 5566}],
                                                                      "clusterIPs": ["1.2.3.4"]}),
     svc_cells("NodePort", "1.2.3.4", "<none>", "5566/udp"))

# ---------------------------------------------------------------------------
# Endpoints, Ingresses
# ---------------------------------------------------------------------------

T = "TestPrintEndpoint"
case("endpoints", T + "[0] endpoint1 no IPs", {"metadata": {"name": "endpoint1", "creationTimestamp": at(1.9)}},
     {"endpoints_endpoints": "<none>", "age(@at)": "0s"})
case("endpoints", T + "[1] endpoint3 no ports", {"metadata": {"name": "endpoint3", "creationTimestamp": at(-300)},
                                                 "subsets": [{"addresses": [{"ip": "1.2.3.4"}, {"ip": "5.6.7.8"}]}]},
     {"endpoints_endpoints": "1.2.3.4,5.6.7.8", "age(@at)": "5m"})
case("endpoints", T + "[2] endpoint2 one port", {"metadata": {"name": "endpoint2", "creationTimestamp": at(1.9)},
                                                 "subsets": [{"addresses": [{"ip": "1.2.3.4"}, {"ip": "5.6.7.8"}],
                                                              "ports": [{"port": 8001, "protocol": "tcp"}]}]},
     {"endpoints_endpoints": "1.2.3.4:8001,5.6.7.8:8001", "age(@at)": "0s"})
case("endpoints", T + "[3] endpoint2 more", {"metadata": {"name": "endpoint2", "creationTimestamp": at(1.9)},
                                             "subsets": [{"addresses": [{"ip": "1.2.3.4"}, {"ip": "5.6.7.8"}, {"ip": "9.8.7.6"}, {"ip": "6.6.6.6"}],
                                                          "ports": [{"port": 8001, "protocol": "tcp"}]}]},
     {"endpoints_endpoints": "1.2.3.4:8001,5.6.7.8:8001,9.8.7.6:8001 + 1 more...", "age(@at)": "0s"})

case("ingress", "TestPrintIngress[0] test1",
     {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
      "metadata": {"name": "test1", "creationTimestamp": at(YEAR10)},
      "spec": {"ingressClassName": "foo",
               "defaultBackend": {"service": {"name": "default-backend", "port": {"name": "default-backend", "number": 80}}}},
      "status": {"loadBalancer": {"ingress": [{"ip": "2.3.4.5", "hostname": "localhost.localdomain"}]}}},
     {"ingress_class": "foo", "ingress_hosts": "*", "ingress_address": "2.3.4.5",
      "ingress_address(wide => false)": "2.3.4.5", "ingress_ports": "80", "age(@at)": "10y"})

# ---------------------------------------------------------------------------
# PersistentVolumes and claims
# ---------------------------------------------------------------------------

CLAIM = {"name": "test", "namespace": "default"}
T = "TestPrintPersistentVolume"
for n, (name, mode, size, phase, scn, vacn) in enumerate((
        ("test1", "ReadOnlyMany", "4Gi", "Bound", None, None),
        ("test2", "ReadOnlyMany", "4Gi", "Failed", None, None),
        ("test3", "ReadWriteMany", "10Gi", "Pending", None, None),
        ("test4", "ReadWriteOnce", "10Gi", "Pending", "my-scn", None),
        ("test4", "ReadWriteOnce", "10Gi", "Pending", "my-scn", "my-vacn"),
        ("test5", "ReadWriteOnce", "10Gi", "Available", "my-scn", None),
        ("test6", "ReadWriteOnce", "10Gi", "Released", "my-scn", None))):
    spec = {"claimRef": CLAIM, "accessModes": [mode], "capacity": {"storage": size}}
    if scn:
        spec["storageClassName"] = scn
    if vacn:
        spec["volumeAttributesClassName"] = vacn
    case("persistentvolume", "%s[%d] %s %s" % (T, n, name, phase),
         {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec, "status": {"phase": phase}},
         {"persistentvolume_capacity": size,
          "persistentvolume_access_modes": {"ReadOnlyMany": "ROX", "ReadWriteMany": "RWX", "ReadWriteOnce": "RWO"}[mode],
          "persistentvolume_reclaim_policy": "", "persistentvolume_status": phase,
          "persistentvolume_claim": "default/test", "persistentvolume_storageclass": scn or "",
          "persistentvolume_volumeattributesclass": vacn or "<unset>", "persistentvolume_reason": "",
          "age(@at)": "<unknown>", "persistentvolume_volume_mode": "<unset>"})

T = "TestPrintPersistentVolumeClaim"
for n, (name, volume, phase, mode, size, scn, vacn, vmode, want) in enumerate((
        ("test1", "my-volume", "Bound", "ReadOnlyMany", "4Gi", None, None, "Filesystem", ("my-volume", "4Gi", "ROX")),
        ("test2", None, "Lost", "ReadOnlyMany", "4Gi", None, None, "Filesystem", ("", "", "")),
        ("test3", "my-volume", "Pending", "ReadWriteMany", "10Gi", None, None, "Filesystem", ("my-volume", "10Gi", "RWX")),
        ("test4", "my-volume", "Pending", "ReadWriteOnce", "10Gi", "my-scn", None, "Filesystem", ("my-volume", "10Gi", "RWO")),
        ("test5", "my-volume", "Pending", "ReadWriteOnce", "10Gi", "my-scn", None, None, ("my-volume", "10Gi", "RWO")),
        ("test5", "my-volume", "Pending", "ReadWriteOnce", "10Gi", "my-scn", "my-vacn", None, ("my-volume", "10Gi", "RWO")))):
    spec = {}
    if volume:
        spec["volumeName"] = volume
    if scn:
        spec["storageClassName"] = scn
    if vacn:
        spec["volumeAttributesClassName"] = vacn
    if vmode:
        spec["volumeMode"] = vmode
    case("persistentvolumeclaim", "%s[%d] %s %s" % (T, n, name, phase),
         {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name}, "spec": spec,
          "status": {"phase": phase, "accessModes": [mode], "capacity": {"storage": size}}},
         {"persistentvolumeclaim_status": phase, "persistentvolumeclaim_volume": want[0],
          "persistentvolumeclaim_capacity": want[1], "persistentvolumeclaim_access_modes": want[2],
          "persistentvolumeclaim_storageclass": scn or "",
          "persistentvolumeclaim_volumeattributesclass": vacn or "<unset>",
          "age(@at)": "<unknown>", "persistentvolumeclaim_volume_mode": vmode or "<unset>"})

# ---------------------------------------------------------------------------
# Events
# ---------------------------------------------------------------------------

def event(name, kind, obj_name, type_, extra):
    e = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
         "involvedObject": {"kind": kind, "name": obj_name, "fieldPath": "spec.containers{foo}"},
         "reason": "Event Reason", "message": "Message Data", "type": type_}
    e.update(extra)
    return e


def event_cells(last, type_, obj, first, count, source, last_ts, first_ts):
    return {"event_last_seen_text(@at)": last, "event_type": type_, "event_reason": "Event Reason",
            "event_object": obj, "event_subobject": "spec.containers{foo}", "event_source": source,
            "event_message": "Message Data", "event_first_seen_text(@at)": first, "event_count": count,
            "event_last_seen": last_ts, "event_first_seen": first_ts}


T = "TestPrintEvent"
D2, D3 = add_date(days=-2), add_date(days=-3)
MICRO3 = at(-3 * DAY - 0.000123)   # eventTime is a MicroTime
case("event", T + "[0] basic", event("event1", "Pod", "Pod Name", "Normal", {
    "source": {"component": "kubelet"}, "firstTimestamp": D3, "lastTimestamp": D2, "count": 6}),
    event_cells("2d", "Normal", "pod/Pod Name", "3d", 6, "kubelet", D2, D3))
case("event", T + "[1] wide", event("event2", "Deployment", "Deployment Name", "Warning", {
    "source": {"component": "kubelet", "host": "Node1"}, "firstTimestamp": D3, "lastTimestamp": D2, "count": 6}),
    event_cells("2d", "Warning", "deployment/Deployment Name", "3d", 6, "kubelet, Node1", D2, D3))
case("event", T + "[2] w/o FirstTimestamp", event("event3", "Deployment", "Deployment Name", "Warning", {
    "source": {"component": "kubelet", "host": "Node1"}, "eventTime": MICRO3, "lastTimestamp": D3, "count": 1}),
    event_cells("3d", "Warning", "deployment/Deployment Name", "3d", 1, "kubelet, Node1", D3, MICRO3))
case("event", T + "[3] w/o LastTimestamp", event("event4", "Deployment", "Deployment Name", "Warning", {
    "source": {"component": "kubelet", "host": "Node1"}, "eventTime": MICRO3, "firstTimestamp": D3, "count": 1}),
    event_cells("3d", "Warning", "deployment/Deployment Name", "3d", 1, "kubelet, Node1", D3, D3))
case("event", T + "[4] w/o First and LastTimestamp", event("event5", "Deployment", "Deployment Name", "Warning", {
    "source": {"component": "kubelet", "host": "Node1"}, "eventTime": MICRO3, "count": 1}),
    event_cells("3d", "Warning", "deployment/Deployment Name", "3d", 1, "kubelet, Node1", MICRO3, MICRO3))
SERIES2 = at(-2 * DAY - 0.000456)
case("event", T + "[5] series", event("event6", "Deployment", "Deployment Name", "Warning", {
    "source": {"component": "kubelet", "host": "Node1"}, "eventTime": MICRO3,
    "series": {"count": 2, "lastObservedTime": SERIES2}}),
    event_cells("2d", "Warning", "deployment/Deployment Name", "3d", 2, "kubelet, Node1", SERIES2, MICRO3))
case("event", T + "[6] singleton", event("event7", "Deployment", "Deployment Name", "Warning", {
    "source": {"component": "kubelet", "host": "Node1"}, "eventTime": MICRO3}),
    event_cells("3d", "Warning", "deployment/Deployment Name", "3d", 1, "kubelet, Node1", MICRO3, MICRO3))
case("event", T + "[7] empty Source", event("event2", "Deployment", "Deployment Name", "Warning", {
    "reportingComponent": "kubelet", "reportingInstance": "test",
    "firstTimestamp": D3, "lastTimestamp": D2, "count": 6}),
    event_cells("2d", "Warning", "deployment/Deployment Name", "3d", 6, "kubelet, test", D2, D3))
# strings.TrimSpace trims white space only: a message ending in "v" (PostgreSQL's
# E'\v' is a plain "v", which the first port trimmed) keeps it; a vertical tab goes
for msg, shown in (("Created pod: web-6bc9f8778c-cqnwv", "Created pod: web-6bc9f8778c-cqnwv"),
                   ("\x0bvolume v\x0b\t ", "volume v")):
    case("event", "kwatch: message " + repr(msg), event("event8", "Pod", "p", "Normal", {"message": msg}),
         {"event_message": shown})

# ---------------------------------------------------------------------------
# HorizontalPodAutoscalers (autoscaling/v2 JSON)
# ---------------------------------------------------------------------------

def hpa(metrics=None, current=None, min_replicas=2):
    spec = {"scaleTargetRef": {"name": "some-rc", "kind": "ReplicationController"}, "maxReplicas": 10}
    if min_replicas is not None:
        spec["minReplicas"] = min_replicas
    if metrics is not None:
        spec["metrics"] = metrics
    status = {"currentReplicas": 4, "desiredReplicas": 5}
    if current is not None:
        status["currentMetrics"] = current
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "some-hpa"},
            "spec": spec, "status": status}


def hpa_cells(targets, minpods="2"):
    return {"horizontalpodautoscaler_reference": "ReplicationController/some-rc",
            "horizontalpodautoscaler_targets": targets, "horizontalpodautoscaler_minpods": minpods,
            "horizontalpodautoscaler_maxpods": 10, "horizontalpodautoscaler_replicas": 4, "age(@at)": "<unknown>"}


SEL = {"matchLabels": {"label": "value"}}
AVG100 = {"type": "AverageValue", "averageValue": "100m"}
VAL100 = {"type": "Value", "value": "100m"}
UTIL80 = {"type": "Utilization", "averageUtilization": 80}
T = "TestPrintHPA"
HPA_CASES = [
    ("minReplicas unset", hpa(min_replicas=None), "<none>", "<unset>"),
    ("external avg (no current)", hpa([{"type": "External", "external": {
        "metric": {"name": "some-external-metric", "selector": SEL}, "target": AVG100}}]), "<unknown>/100m (avg)", "2"),
    ("external avg", hpa([{"type": "External", "external": {
        "metric": {"name": "some-external-metric", "selector": SEL}, "target": AVG100}}],
        [{"type": "External", "external": {"metric": {"name": "some-external-metric", "selector": SEL},
                                           "current": {"averageValue": "50m"}}}]), "50m/100m (avg)", "2"),
    ("external value (no current)", hpa([{"type": "External", "external": {
        "metric": {"name": "some-service-metric", "selector": SEL}, "target": VAL100}}]), "<unknown>/100m", "2"),
    ("external value", hpa([{"type": "External", "external": {
        "metric": {"name": "some-external-metric", "selector": SEL}, "target": VAL100}}],
        [{"type": "External", "external": {"metric": {"name": "some-external-metric"},
                                           "current": {"value": "50m"}}}]), "50m/100m", "2"),
    ("pods (no current)", hpa([{"type": "Pods", "pods": {"metric": {"name": "some-pods-metric"}, "target": AVG100}}]),
     "<unknown>/100m", "2"),
    ("pods", hpa([{"type": "Pods", "pods": {"metric": {"name": "some-pods-metric"}, "target": AVG100}}],
                 [{"type": "Pods", "pods": {"metric": {"name": "some-pods-metric"}, "current": {"averageValue": "50m"}}}]),
     "50m/100m", "2"),
    ("object (no current)", hpa([{"type": "Object", "object": {
        "describedObject": {"name": "some-service", "kind": "Service"},
        "metric": {"name": "some-service-metric"}, "target": VAL100}}]), "<unknown>/100m", "2"),
    ("object", hpa([{"type": "Object", "object": {
        "describedObject": {"name": "some-service", "kind": "Service"},
        "metric": {"name": "some-service-metric"}, "target": VAL100}}],
        [{"type": "Object", "object": {"describedObject": {"name": "some-service", "kind": "Service"},
                                       "metric": {"name": "some-service-metric"}, "current": {"value": "50m"}}}]),
     "50m/100m", "2"),
    ("resource targetVal (no current)", hpa([{"type": "Resource", "resource": {"name": "cpu", "target": AVG100}}]),
     "cpu: <unknown>/100m", "2"),
    ("resource targetVal", hpa([{"type": "Resource", "resource": {"name": "cpu", "target": AVG100}}],
                               [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageValue": "50m"}}}]),
     "cpu: 50m/100m", "2"),
    ("resource targetUtil (no current)", hpa([{"type": "Resource", "resource": {"name": "cpu", "target": UTIL80}}]),
     "cpu: <unknown>/80%", "2"),
    ("resource targetUtil", hpa([{"type": "Resource", "resource": {"name": "cpu", "target": UTIL80}}],
                                [{"type": "Resource", "resource": {"name": "cpu", "current": {
                                    "averageUtilization": 50, "averageValue": "40m"}}}]),
     "cpu: 50%/80%", "2"),
    ("container resource targetVal (no current)", hpa([{"type": "ContainerResource", "containerResource": {
        "name": "cpu", "container": "application", "target": AVG100}}]), "cpu: <unknown>/100m", "2"),
    ("container resource targetVal", hpa([{"type": "ContainerResource", "containerResource": {
        "name": "cpu", "container": "", "target": AVG100}}],
        [{"type": "ContainerResource", "containerResource": {"name": "cpu", "container": "application",
                                                             "current": {"averageValue": "50m"}}}]),
     "cpu: 50m/100m", "2"),
    ("container resource targetUtil (no current)", hpa([{"type": "ContainerResource", "containerResource": {
        "name": "cpu", "container": "application", "target": UTIL80}}]), "cpu: <unknown>/80%", "2"),
    ("container resource targetUtil", hpa([{"type": "ContainerResource", "containerResource": {
        "name": "cpu", "container": "", "target": UTIL80}}],
        [{"type": "ContainerResource", "containerResource": {"name": "cpu", "container": "application", "current": {
            "averageUtilization": 50, "averageValue": "40m"}}}]),
     "cpu: 50%/80%", "2"),
    ("multiple specs", hpa([
        {"type": "Pods", "pods": {"metric": {"name": "some-pods-metric"}, "target": AVG100}},
        {"type": "Resource", "resource": {"name": "cpu", "target": UTIL80}},
        {"type": "Pods", "pods": {"metric": {"name": "other-pods-metric"},
                                  "target": {"type": "AverageValue", "averageValue": "400m"}}}],
        [{"type": "Pods", "pods": {"metric": {"name": "some-pods-metric"}, "current": {"averageValue": "50m"}}},
         {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 50, "averageValue": "40m"}}}]),
     "50m/100m, cpu: 50%/80% + 1 more...", "2"),
]
for n, (label, obj, targets, minpods) in enumerate(HPA_CASES):
    case("horizontalpodautoscaler", "%s[%d] %s" % (T, n, label), obj, hpa_cells(targets, minpods))

# ---------------------------------------------------------------------------
# human_duration / translate_timestamp_since: TestTranslateTimestampSince
# (printers_test.go) and TestHumanDuration, TestHumanDurationBoundaries
# (apimachinery util/duration/duration_test.go)
# ---------------------------------------------------------------------------

for name, ts, want in (("a while from now", at(2.1), "<invalid>"), ("almost now", at(1.9), "0s"), ("now", at(0), "0s"),
                       ("unknown", None, "<unknown>"), ("30 seconds ago", at(-30), "30s"),
                       ("5 minutes ago", at(-300), "5m"), ("an hour ago", at(-6000), "100m"),
                       ("2 days ago", add_date(days=-2), "2d"), ("months ago", add_date(days=-90), "90d"),
                       ("10 years ago", at(YEAR10), "10y")):
    meta = {"name": "x"}
    if ts is not None:
        meta["creationTimestamp"] = ts
    case("duration", "TestTranslateTimestampSince " + name, {"metadata": meta}, {"age(@at)": want})

MS = 0.001
H = 3600
for test, seconds, want in [("TestHumanDuration", s, w) for s, w in (
        (1, "1s"), (70, "70s"), (190, "3m10s"), (70 * 60, "70m"), (47 * H, "47h"), (49 * H, "2d1h"),
        ((8 * 24 + 2) * H, "8d"), (367 * 24 * H, "367d"), ((365 * 2 * 24 + 25) * H, "2y1d"),
        ((365 * 8 * 24 + 2) * H, "8y"))] + [("TestHumanDurationBoundaries", s, w) for s, w in (
        (-2, "<invalid>"), (-2 + 0.000001, "0s"), (0, "0s"), (1 - MS, "0s"), (120 - MS, "119s"), (120, "2m"),
        (121, "2m1s"), (600 - MS, "9m59s"), (600, "10m"), (601, "10m"), (3 * H - MS, "179m"), (3 * H, "3h"),
        (3 * H + 60, "3h1m"), (8 * H - MS, "7h59m"), (8 * H, "8h"), (8 * H + 59 * 60, "8h"), (48 * H - MS, "47h"),
        (48 * H, "2d"), (49 * H, "2d1h"), (8 * 24 * H - MS, "7d23h"), (8 * 24 * H, "8d"), (8 * 24 * H + 23 * H, "8d"),
        (2 * 365 * 24 * H - MS, "729d"), (2 * 365 * 24 * H, "2y"), (2 * 365 * 24 * H + 23 * H, "2y"),
        (2 * 365 * 24 * H + 23 * H + 59 * 60, "2y"), (2 * 365 * 24 * H + 24 * H - MS, "2y"),
        (2 * 365 * 24 * H + 24 * H, "2y1d"), (3 * 365 * 24 * H, "3y"), (4 * 365 * 24 * H, "4y"),
        (5 * 365 * 24 * H, "5y"), (6 * 365 * 24 * H, "6y"), (7 * 365 * 24 * H, "7y"),
        (8 * 365 * 24 * H - MS, "7y364d"), (8 * 365 * 24 * H, "8y"), (8 * 365 * 24 * H + 364 * 24 * H, "8y"),
        (9 * 365 * 24 * H, "9y"))]:
    # The creation time is `seconds` before NOW: AGE = human_duration(seconds).
    case("duration", "%s %ss" % (test, seconds), {"metadata": {"name": "x", "creationTimestamp": at(-seconds)}},
         {"age(@at)": want})

# ---------------------------------------------------------------------------
# Not upstream: statuses the issue names that printers_test.go has no case
# for, with the cell printPod gives them (derived from the code, marked
# "kwatch:" so the summary keeps them apart from the ported cases).
# ---------------------------------------------------------------------------

T = "kwatch:printPod"
case("pod", T + " CrashLoopBackOff", pod("p", {"containers": containers(1)}, {
    "phase": "Running",
    "containerStatuses": [cs(restarts=7, state=waiting("CrashLoopBackOff"), finished=at(-180))]}),
    pod_cells("0/1", "CrashLoopBackOff", 7, "7 (3m ago)", at(-180)))
case("pod", T + " ContainerCreating", pod("p", {"containers": containers(1)}, {
    "phase": "Pending", "containerStatuses": [cs(state=waiting("ContainerCreating"))]}),
    pod_cells("0/1", "ContainerCreating", 0, "0"))
case("pod", T + " OOMKilled", pod("p", {"containers": containers(1)}, {
    "phase": "Running", "containerStatuses": [cs(restarts=1, state=terminated("OOMKilled", 137))]}),
    pod_cells("0/1", "OOMKilled", 1, "1"))
case("pod", T + " Signal:9", pod("p", {"containers": containers(1)}, {
    "phase": "Running", "containerStatuses": [cs(state=terminated(None, 137, 9))]}),
    pod_cells("0/1", "Signal:9", 0, "0"))
case("pod", T + " ExitCode:1", pod("p", {"containers": containers(1)}, {
    "phase": "Running", "containerStatuses": [cs(state=terminated(None, 1))]}),
    pod_cells("0/1", "ExitCode:1", 0, "0"))
case("pod", T + " Init:CrashLoopBackOff", pod("p", {"initContainers": containers(2), "containers": containers(1)}, {
    "phase": "Pending",
    "initContainerStatuses": [cs(state=terminated("Completed", 0)), cs(restarts=4, state=waiting("CrashLoopBackOff"))],
    "containerStatuses": [cs(state=waiting("PodInitializing"))]}),
    pod_cells("0/1", "Init:CrashLoopBackOff", 4, "4"))
case("pod", T + " Init:Error", pod("p", {"initContainers": containers(1), "containers": containers(1)}, {
    "phase": "Pending", "initContainerStatuses": [cs(state=terminated("Error", 2))]}),
    pod_cells("0/1", "Init:Error", 0, "0"))
case("pod", T + " Init:ExitCode:2", pod("p", {"initContainers": containers(1), "containers": containers(1)}, {
    "phase": "Pending", "initContainerStatuses": [cs(state=terminated(None, 2))]}),
    pod_cells("0/1", "Init:ExitCode:2", 0, "0"))
case("pod", T + " Init:Signal:15", pod("p", {"initContainers": containers(1), "containers": containers(1)}, {
    "phase": "Pending", "initContainerStatuses": [cs(state=terminated(None, 143, 15))]}),
    pod_cells("0/1", "Init:Signal:15", 0, "0"))
case("pod", T + " PodInitializing waiting init is Init:0/1", pod("p", {"initContainers": containers(1), "containers": containers(1)}, {
    "phase": "Pending", "initContainerStatuses": [cs(state=waiting("PodInitializing"))]}),
    pod_cells("0/1", "Init:0/1", 0, "0"))
case("pod", T + " PodInitializing after init", pod("p", {"initContainers": containers(1), "containers": containers(1)}, {
    "phase": "Pending", "initContainerStatuses": [cs(state=terminated("Completed", 0))],
    "containerStatuses": [cs(state=waiting("PodInitializing"))]}),
    pod_cells("0/1", "PodInitializing", 0, "0"))
case("pod", T + " NodeLost deleted is Unknown", pod("p", {"containers": containers(1)}, {
    "phase": "Running", "reason": "NodeLost", "containerStatuses": [cs(ready=True, state=RUNNING)]}, deleted=DELETE_TIME),
    pod_cells("1/1", "Unknown", 0, "0"))
case("pod", T + " NodeLost not deleted", pod("p", {"containers": containers(1)}, {
    "phase": "Running", "reason": "NodeLost", "containerStatuses": [cs(ready=True, state=RUNNING)]}),
    pod_cells("1/1", "NodeLost", 0, "0"))
case("pod", T + " Failed and deleted keeps Error", pod("p", {"containers": containers(1)}, {
    "phase": "Failed", "containerStatuses": [cs(state=terminated("Error", 1))]}, deleted=DELETE_TIME),
    pod_cells("0/1", "Error", 0, "0"))
case("pod", T + " restart time but no restarts", pod("p", {"containers": containers(1)}, {
    "phase": "Running", "containerStatuses": [cs(ready=True, restarts=0, state=RUNNING, finished=at(-60))]}),
    pod_cells("1/1", "Running", 0, "0", at(-60)))
case("pod", T + " IPv6 endpoints and readiness gate missing", pod("p", {"containers": containers(1),
                                                                     "readinessGates": [{"conditionType": "x"}]}, {
    "phase": "Running", "podIPs": [{"ip": "fd00::1"}], "containerStatuses": [cs(ready=True, state=RUNNING)]}),
    dict(pod_cells("1/1", "Running", 0, "0"), pod_ip="fd00::1", pod_readiness_gates="0/1"))
case("endpoints", "kwatch:formatEndpoints IPv6 host and two subsets", {"metadata": {"name": "e"}, "subsets": [
    {"addresses": [{"ip": "fd00::1"}], "ports": [{"port": 80}, {"port": 443}]},
    {"addresses": [{"ip": "10.0.0.2"}, {"ip": "10.0.0.3"}], "ports": [{"port": 80}]}]},
    {"endpoints_endpoints": "[fd00::1]:80,[fd00::1]:443,10.0.0.2:80 + 1 more..."})
case("ingress", "kwatch:formatHosts more than three rules", {"metadata": {"name": "i"}, "spec": {
    "rules": [{"host": "a"}, {}, {"host": "b"}, {"host": "c"}, {"host": "d"}], "tls": [{"hosts": ["a"]}]},
    "status": {"loadBalancer": {"ingress": [{"hostname": "lb.example.com"}, {"ip": "10.1.2.3"}, {"ip": "10.1.2.3"}]}}},
    {"ingress_hosts": "a,b,c + 2 more...", "ingress_ports": "80, 443", "ingress_class": "<none>",
     "ingress_address": "10.1.2.3,lb.example.com", "ingress_address(wide => false)": "10.1.2.3,lb.e..."})
case("horizontalpodautoscaler", "kwatch:autoscaling/v1 CPU target", {
    "apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
    "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "minReplicas": 1, "maxReplicas": 5,
             "targetCPUUtilizationPercentage": 80},
    "status": {"currentReplicas": 2, "currentCPUUtilizationPercentage": 35}},
    {"horizontalpodautoscaler_reference": "Deployment/web", "horizontalpodautoscaler_targets": "cpu: 35%/80%",
     "horizontalpodautoscaler_minpods": "1", "horizontalpodautoscaler_maxpods": 5, "horizontalpodautoscaler_replicas": 2})
case("horizontalpodautoscaler", "kwatch:autoscaling/v1 metrics annotation (v1 conversion.go)", {
    "apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web", "annotations": {
        "autoscaling.alpha.kubernetes.io/metrics":
            '[{"type":"Resource","resource":{"name":"memory","targetAverageValue":"100Mi"}},'
            '{"type":"Pods","pods":{"metricName":"qps","targetAverageValue":"10"}}]',
        "autoscaling.alpha.kubernetes.io/current-metrics":
            '[{"type":"Resource","resource":{"name":"memory","currentAverageValue":"60Mi"}}]'}},
    "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 5,
             "targetCPUUtilizationPercentage": 50},
    "status": {"currentReplicas": 2, "currentCPUUtilizationPercentage": 20}},
    {"horizontalpodautoscaler_targets": "memory: 60Mi/100Mi, <unknown>/10 + 1 more..."})
case("horizontalpodautoscaler", "kwatch:autoscaling/v1 without target: cpu 80% (v1 conversion.go)", {
    "apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
    "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 5},
    "status": {"currentReplicas": 1}},
    {"horizontalpodautoscaler_targets": "cpu: <unknown>/80%"})
case("horizontalpodautoscaler", "kwatch:autoscaling/v1 annotation that is no JSON is ignored", {
    "apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web", "annotations": {
        "autoscaling.alpha.kubernetes.io/metrics": "[{not json"}},
    "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 5,
             "targetCPUUtilizationPercentage": 50},
    "status": {"currentReplicas": 2, "currentCPUUtilizationPercentage": 20}},
    {"horizontalpodautoscaler_targets": "cpu: 20%/50%"})
case("persistentvolume", "kwatch:GetAccessModesAsString order, RWOP, beta class annotation, Terminating", {
    "metadata": {"name": "pv", "deletionTimestamp": DELETE_TIME,
                 "annotations": {"volume.beta.kubernetes.io/storage-class": "beta"}},
    "spec": {"accessModes": ["ReadWriteOncePod", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOnce"],
             "storageClassName": "ignored", "persistentVolumeReclaimPolicy": "Retain", "volumeMode": "Block"},
    "status": {"phase": "Bound", "reason": "r"}},
    {"persistentvolume_access_modes": "RWO,RWX,RWOP", "persistentvolume_storageclass": "beta",
     "persistentvolume_status": "Terminating", "persistentvolume_capacity": "0", "persistentvolume_claim": "",
     "persistentvolume_reclaim_policy": "Retain", "persistentvolume_reason": "r", "persistentvolume_volume_mode": "Block"})
