"""The node tier itself: real pods from the test image on the real kubelet, Deployments rolling out, a crash loop,
an OOM kill, the garbage collector, ClusterIP Services through kube-proxy, and a host left as it was."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.testbed import hoststate
from tests.testbed.node import (
    BRIDGE,
    BRIDGE_MAC,
    NODE_IP,
    POD_CIDR,
    NodeTestBed,
    RequestFailed,
    has_condition,
    start_node,
)
from tests.testbed.procs import wait_for
from tests.testbed.testapp import build_test_app

pytestmark = [pytest.mark.node, pytest.mark.testbed]

REPO = Path(__file__).resolve().parents[2]


def container(image: str, mode: str = "serve", message: str = "hello", **extra: Any) -> dict[str, Any]:
    return {"name": "app", "image": image, "imagePullPolicy": "Never",
            "env": [{"name": "MODE", "value": mode}, {"name": "MESSAGE", "value": message}],
            "ports": [{"name": "http", "containerPort": 8080}],
            "readinessProbe": {"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 1,
                               "failureThreshold": 1},
            "securityContext": {"runAsNonRoot": True, "readOnlyRootFilesystem": True,
                                "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
            **extra}


def pod(name: str, namespace: str, image: str, mode: str = "serve", **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [container(image, mode, **extra)], "terminationGracePeriodSeconds": 5}}


def deployment(name: str, namespace: str, image: str, replicas: int = 2, message: str = "v1") -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [container(image, message=message)],
                                           "terminationGracePeriodSeconds": 5}}}}


def rolled_out(replicas: int) -> Any:
    """A Deployment whose controller has seen its generation and whose every replica is updated and available."""
    def check(obj: dict[str, Any]) -> bool:
        status = obj.get("status", {})
        return (status.get("observedGeneration") == obj["metadata"]["generation"]
                and status.get("updatedReplicas") == replicas == status.get("availableReplicas")
                and status.get("replicas") == replicas and has_condition(obj, "Available"))
    return check


def test_a_pod_from_the_test_image_is_ready_and_answers_inside_the_namespace(node: NodeTestBed, test_app: str) -> None:
    node.ensure_namespace("node-pod")
    node.apply(pod("web", "node-pod", test_app, message="hello from the node"))
    ready = node.wait_condition("v1", "Pod", "web", "node-pod", "Ready")
    ip = ready["status"]["podIP"]
    assert ip.startswith(POD_CIDR.rsplit(".", 2)[0] + ".")
    assert ready["spec"]["nodeName"] == node.node_name and ready["status"]["hostIP"] == NODE_IP
    answer = node.request("GET", f"http://{ip}:8080/")
    assert (answer.status_code, answer.text) == (200, "hello from the node\n")
    assert node.request("GET", f"http://{ip}:8080/host").text.strip() == "web"
    # The API server reaches the kubelet for logs and exec, as `kubectl logs` and `kubectl exec` do.
    assert "testapp: mode serve, port 8080" in node.logs("web", "node-pod")
    assert "testapp: mode serve" in node.kubectl("logs", "-n", "node-pod", "web").stdout
    whoami = node.kubectl("exec", "-n", "node-pod", "web", "--", "python3", "-c", "import os; print(os.getuid())")
    assert whoami.stdout.strip() == "65532"


def test_a_deployment_rolls_out_and_a_rolling_update_completes(node: NodeTestBed, test_app: str) -> None:
    namespace = "node-rollout"
    node.ensure_namespace(namespace)
    node.apply(deployment("web", namespace, test_app, replicas=2, message="v1"))
    first = node.wait("apps/v1", "Deployment", "web", namespace, rolled_out(2))
    node.apply(deployment("web", namespace, test_app, replicas=2, message="v2"))
    second = node.wait("apps/v1", "Deployment", "web", namespace, rolled_out(2))
    assert second["metadata"]["generation"] == first["metadata"]["generation"] + 1
    sets = node.http.get(f"/apis/apps/v1/namespaces/{namespace}/replicasets").json()["items"]
    replicas = sorted((rs["spec"]["template"]["spec"]["containers"][0]["env"][1]["value"], rs["status"]["replicas"])
                      for rs in sets)
    assert replicas == [("v1", 0), ("v2", 2)]

    def new_pods_serving(items: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        running = [p for p in items if not p["metadata"].get("deletionTimestamp")]
        ready = [p for p in running if has_condition(p, "Ready")]
        return ready if len(running) == len(ready) == 2 else None

    for serving in node.wait_list("v1", "Pod", namespace, new_pods_serving, labels="app=web"):
        assert node.request("GET", f"http://{serving['status']['podIP']}:8080/").text == "v2\n"
    # Pods came and went on the bridge: it kept the MAC it was made with (else the pods' replies to the node can be
    # lost to a stale ARP entry for a while after each removal).
    bridge = subprocess.run(node.nsenter("ip", "-json", "link", "show", "dev", BRIDGE), capture_output=True,
                            text=True, check=True)
    assert json.loads(bridge.stdout)[0]["address"] == BRIDGE_MAC


def test_a_clusterip_service_carries_traffic_to_every_ready_pod(node: NodeTestBed, test_app: str) -> None:
    namespace = "node-service"
    node.ensure_namespace(namespace)
    node.apply(deployment("web", namespace, test_app, replicas=2))
    node.apply({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": namespace},
                "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": "http"}]}})
    node.wait("apps/v1", "Deployment", "web", namespace, rolled_out(2))
    service_ip = node.get("v1", "Service", "web", namespace)["spec"]["clusterIP"]  # type: ignore[index]
    pods = {p["metadata"]["name"] for p in node.http.get(f"/api/v1/namespaces/{namespace}/pods").json()["items"]}
    node.wait_list("discovery.k8s.io/v1", "EndpointSlice", namespace,
                   lambda slices: sum(e["conditions"].get("ready", False) for s in slices
                                      for e in s.get("endpoints") or []) == 2 or None,
                   labels="kubernetes.io/service-name=web", what="both pods ready in the Service's EndpointSlice")
    # kube-proxy programs its rules a moment after the EndpointSlice, and may carry one endpoint before the other
    # (its syncs are rate-limited): every pod answering through the ClusterIP is the event to wait for.
    seen: set[str] = set()

    def every_pod_answered() -> bool | None:
        with contextlib.suppress(RequestFailed):  # refused until the first rules are in
            seen.add(node.request("GET", f"http://{service_ip}/host", timeout=2).text.strip())
        return True if seen == pods else None

    wait_for("every pod answering through the Service", every_pod_answered, 60, interval=0.01)
    with node.traffic(f"http://{service_ip}/", interval=0.01) as traffic:
        for _ in range(20):  # the stream runs alongside these requests
            node.request("GET", f"http://{service_ip}/")
    counted = traffic.stop()
    assert counted["sent"] > 0 and counted["failed"] == 0, (counted, node.diagnostics())
    assert counted["bodies"] == {"v1\n": counted["ok"]}


def test_a_crash_looping_container_reaches_crashloopbackoff(node: NodeTestBed, test_app: str) -> None:
    with node.scratch_namespace("node-crash"):  # the loop goes on until its pod is gone
        node.apply(pod("crash", "node-crash", test_app, mode="crash"))

        def backing_off(obj: dict[str, Any]) -> dict[str, Any] | None:
            for status in obj.get("status", {}).get("containerStatuses", []):
                if status.get("state", {}).get("waiting", {}).get("reason") == "CrashLoopBackOff":
                    return dict(status)
            return None

        crashed = node.wait("v1", "Pod", "crash", "node-crash", backing_off)
        status = backing_off(crashed)
        assert status is not None and status["restartCount"] >= 1
        assert status["lastState"]["terminated"]["exitCode"] == 3
        assert "crashing at start, as asked" in node.logs("crash", "node-crash", previous=True)


def test_a_container_over_its_memory_limit_is_oomkilled(node: NodeTestBed, test_app: str) -> None:
    limits = {"resources": {"limits": {"memory": "64Mi", "cpu": "500m"}, "requests": {"memory": "64Mi", "cpu": "500m"}}}
    with node.scratch_namespace("node-oom"):  # restarted and killed again until its pod is gone
        node.apply(pod("hog", "node-oom", test_app, mode="oom", **limits))

        def oom_killed(obj: dict[str, Any]) -> bool:
            return any(s.get("lastState", {}).get("terminated", {}).get("reason") == "OOMKilled"
                       or s.get("state", {}).get("terminated", {}).get("reason") == "OOMKilled"
                       for s in obj.get("status", {}).get("containerStatuses", []))

        killed = node.wait("v1", "Pod", "hog", "node-oom", oom_killed)
        assert killed["status"]["qosClass"] == "Guaranteed"


def test_a_server_that_never_answers_stays_unready(node: NodeTestBed, test_app: str) -> None:
    node.ensure_namespace("node-hang")
    node.apply(pod("hang", "node-hang", test_app, mode="hang"))
    node.wait("v1", "Pod", "hang", "node-hang",
              lambda o: any(s.get("started") for s in o.get("status", {}).get("containerStatuses", [])))
    probe_failed = node.wait_list("v1", "Event", "node-hang",
                                  lambda events: next((e for e in events if e["reason"] == "Unhealthy"), None))
    assert "Readiness probe failed" in probe_failed["message"]
    assert not has_condition(node.get("v1", "Pod", "hang", "node-hang") or {}, "Ready")


def test_an_image_from_a_registry_fails_to_pull_without_a_packet_leaving_the_namespace(node: NodeTestBed) -> None:
    node.ensure_namespace("node-pull")
    node.apply(pod("pull", "node-pull", "registry.example.com/team/app:1.0", imagePullPolicy="IfNotPresent"))

    def pull_failed(obj: dict[str, Any]) -> dict[str, Any] | None:
        for status in obj.get("status", {}).get("containerStatuses", []):
            waiting = status.get("state", {}).get("waiting", {})
            if waiting.get("reason") in ("ErrImagePull", "ImagePullBackOff") and waiting.get("message"):
                return dict(waiting)
        return None

    waiting = pull_failed(node.wait("v1", "Pod", "pull", "node-pull", pull_failed))
    assert waiting is not None
    # The namespace has no default route: the resolver's address is unreachable from it.
    assert "network is unreachable" in waiting["message"], waiting


@pytest.mark.parametrize("propagation", ["Background", "Foreground"])
def test_the_garbage_collector_removes_a_deleted_deployments_replicasets_and_pods(
        node: NodeTestBed, test_app: str, propagation: str) -> None:
    namespace = f"node-gc-{propagation.lower()}"
    node.ensure_namespace(namespace)
    node.apply(deployment("web", namespace, test_app, replicas=1))
    node.wait("apps/v1", "Deployment", "web", namespace, rolled_out(1))
    [replicaset] = node.http.get(f"/apis/apps/v1/namespaces/{namespace}/replicasets").json()["items"]
    assert replicaset["metadata"]["ownerReferences"][0]["kind"] == "Deployment"
    resp = node.http.request("DELETE", f"/apis/apps/v1/namespaces/{namespace}/deployments/web",
                             json={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation})
    assert resp.status_code in (200, 202), resp.text
    if propagation == "Foreground":  # the owner waits, marked, until its dependents are gone
        assert "foregroundDeletion" in resp.json()["metadata"]["finalizers"]
    node.wait_gone("apps/v1", "Deployment", "web", namespace)
    node.wait_list("apps/v1", "ReplicaSet", namespace, lambda items: not items or None, what="ReplicaSets gone")
    node.wait_list("v1", "Pod", namespace, lambda items: not items or None, what="Pods gone")


# --- the host, before and after ------------------------------------------------------------------------


def _mentions(proc: Path, text: str) -> bool:
    try:
        return text in (proc / "cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


CRASHER = """
import os, signal, sys, tempfile
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from tests.testbed.node import start_node
from tests.testbed.testapp import build_test_app
workdir = Path(sys.argv[2])
bed = start_node(workdir, install_crds=False)
image = bed.import_image(build_test_app())
bed.ensure_namespace("crash")
bed.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "left", "namespace": "crash"},
           "spec": {"containers": [{"name": "app", "image": image, "imagePullPolicy": "Never"}]}})
bed.wait_condition("v1", "Pod", "left", "crash", "Ready")
print(bed.netns, flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # a pytest killed mid-run: no stop(), no release()
"""


def test_a_start_after_a_run_that_died_puts_the_host_back_first_and_a_stop_leaves_it_as_it_was(
        bare_host: dict[str, Any]) -> None:
    # One bed's start and stop after a death, rather than a bed of each: every start of a node costs ≈ 20 s here.
    dead_dir = Path(tempfile.mkdtemp(prefix="apprafter-bed-", dir="/tmp")) / "node"
    run = subprocess.run([sys.executable, "-c", CRASHER, str(REPO), str(dead_dir)], capture_output=True, text=True,
                         timeout=300, check=False,
                         # A private image store: the shared one would be wiped after this death.
                         env={**os.environ, "APPRAFTER_KEEP_TESTBED": "1", "APPRAFTER_NODE_IMAGE_CACHE": ""})
    assert run.returncode == -signal.SIGKILL, run.stderr[-3000:]
    dead_netns = run.stdout.strip().splitlines()[-1]
    # What the dead run left: its namespace, the pod's container and shim, mounts, kubelet's sysctls.
    left = hoststate.snapshot()
    assert dead_netns in left["netns"]
    assert left["sysctls"] != bare_host["sysctls"]
    assert [p for p in Path("/proc").iterdir() if p.name.isdigit() and _mentions(p, str(dead_dir))]  # the shim
    workdir = Path(tempfile.mkdtemp(prefix="apprafter-bed-", dir="/tmp")) / "node"
    bed = start_node(workdir, install_crds=False)
    try:
        recovered = "\n".join(bed.recovered)
        assert f"deleted network namespace {dead_netns}" in recovered
        assert "killed" in recovered and f"unmounted {dead_dir}" in recovered
        restored = {line.split(": ")[0].removeprefix("sysctl ") for line in bed.recovered if line.startswith("sysctl ")}
        assert restored == {k for k in hoststate.KUBELET_SYSCTLS if left["sysctls"][k] != bare_host["sysctls"][k]}
        assert dead_netns not in hoststate.snapshot()["netns"]
        # The new bed at work: a pod of its own running.
        changed = hoststate.read_sysctls()
        image = bed.import_image(build_test_app())
        bed.ensure_namespace("host")
        bed.apply(pod("web", "host", image))
        bed.wait_condition("v1", "Pod", "web", "host", "Ready")
        during = hoststate.snapshot()
    finally:
        bed.stop()
    assert during["netns"] == sorted([*bare_host["netns"], bed.netns])  # the only namespace, where it all ran
    assert any(m.startswith(str(workdir)) for m in during["mounts"])  # the pod's mounts live in the bed
    assert during["iptables"] == bare_host["iptables"]  # kube-proxy's rules are the namespace's, never the host's
    assert any(changed[k] != bare_host["sysctls"][k] for k in changed)  # kubelet did rewrite them
    # Stopped: the host as it was before either bed, nothing of either left running.
    assert hoststate.snapshot() == bare_host
    assert not workdir.exists()
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and _mentions(p, str(workdir))]
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and _mentions(p, str(dead_dir))]
    subprocess.run(["rm", "-rf", str(dead_dir.parent)], check=False)


def test_doctor_checks_the_node_tools_by_their_debian_version() -> None:
    proc = subprocess.run([sys.executable, "-m", "apprafter", "doctor", "--all", "-o", "json"], capture_output=True,
                          text=True, timeout=120, check=False, cwd=REPO)
    report = json.loads(proc.stdout)
    rows = {row["tool"]: row for row in report["node_tools"]}
    assert {"containerd", "ctr", "iptables", "/usr/lib/cni/bridge"} <= set(rows)
    assert all(row["ok"] for row in rows.values()), rows
    installed = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "containerd"], capture_output=True,
                               text=True, check=True).stdout
    assert installed.startswith(rows["containerd"]["version"])
    tools = {row["tool"]: row for row in report["tools"]}
    for name in ("kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kubectl"):
        assert tools[name]["ok"] and tools[name]["version"] == tools["kube-apiserver"]["version"], tools[name]
