"""lifecycle.health and lifecycle.drift without a cluster: kstatus' Deployment rules in the operator's words, the
container states that fail a workload, what the Application's status says of them, and drift named from
managedFields. The node tier (test_health_node.py) reaches each state with real pods."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from lifecycle.application import Desired, earned
from lifecycle.drift import drift, drift_note, field_path, owns
from lifecycle.health import (
    CURRENT,
    FAILED,
    IN_PROGRESS,
    child_state,
    deployment_state,
    image_digest,
    pod_failures,
    workload,
)

OPERATOR = "apprafter-operator"


def deployment(replicas: int = 3, generation: int = 2, observed: int = 2, *, updated: int | None = None,
               ready: int | None = None, available: int | None = None, progressing: str = "NewReplicaSetAvailable",
               total: int | None = None, available_condition: str = "True") -> dict[str, Any]:
    status: dict[str, Any] = {"observedGeneration": observed, "conditions": [
        {"type": "Available", "status": available_condition, "reason": "MinimumReplicasAvailable"},
        {"type": "Progressing", "status": "False" if progressing == "ProgressDeadlineExceeded" else "True",
         "reason": progressing}]}
    counts = {"replicas": total, "updatedReplicas": updated, "readyReplicas": ready, "availableReplicas": available}
    status |= {k: (replicas if v is None else v) for k, v in counts.items() if (replicas if v is None else v)}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "generation": generation},
            "spec": {"replicas": replicas, "progressDeadlineSeconds": 30}, "status": status}


@pytest.mark.parametrize(("obj", "state", "message"), [
    (deployment(), CURRENT, "3/3 replicas available"),
    (deployment(generation=3), IN_PROGRESS, "Deployment web: the Deployment controller has not seen generation 3 yet"),
    (deployment(updated=2, progressing="ReplicaSetUpdated"), IN_PROGRESS, "Deployment web: 2/3 replicas updated"),
    (deployment(total=4, progressing="ReplicaSetUpdated"), IN_PROGRESS, "Deployment web: 1 old replica terminating"),
    (deployment(available=1), IN_PROGRESS, "Deployment web: 1/3 replicas available"),
    (deployment(ready=2, available=3), IN_PROGRESS, "Deployment web: 2/3 replicas ready"),
    (deployment(progressing="ReplicaSetUpdated"), IN_PROGRESS, "Deployment web: the rollout has not completed"),
    (deployment(available_condition="False"), IN_PROGRESS, "Deployment web: not available"),
    (deployment(0), CURRENT, "0/0 replicas available"),
    (deployment(updated=1, available=0, progressing="ProgressDeadlineExceeded"), FAILED,
     "Deployment web: no progress for 30 s (ProgressDeadlineExceeded): 1/3 replicas updated, 0 available; the "
     "previous pods keep serving"),
], ids=["rolled out", "generation not seen", "updating", "old terminating", "not available", "not ready",
        "rollout not complete", "Available=False", "scaled to zero", "deadline"])
def test_deployment_states_follow_kstatus(obj: dict[str, Any], state: str, message: str) -> None:
    assert deployment_state(obj)[::2] == (state, message)


def container(name: str = "app", *, ready: bool = False, restarts: int = 0, waiting: dict[str, Any] | None = None,
              terminated: dict[str, Any] | None = None, last: dict[str, Any] | None = None,
              image: str = "ghcr.io/acme/web:1") -> dict[str, Any]:
    state: dict[str, Any] = {"waiting": waiting} if waiting else {"terminated": terminated} if terminated else {
        "running": {"startedAt": "2026-01-01T00:00:00Z"}}
    out = {"name": name, "ready": ready, "restartCount": restarts, "state": state, "image": image,
           "imageID": "ghcr.io/acme/web@sha256:" + "a" * 64}
    if last:
        out["lastState"] = {"terminated": last}
    return out


def pod(name: str, *containers: dict[str, Any], phase: str = "Running", **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, **meta}, "status": {"phase": phase, "containerStatuses": list(containers)}}


CRASHED = {"exitCode": 3, "reason": "Error"}
FAILURES = [
    (container(waiting={"reason": "CrashLoopBackOff", "message": "back-off 10s"}, restarts=2, last=CRASHED),
     "CrashLoopBackOff", "exit code 3, 2 restarts"),
    (container(restarts=1, last=CRASHED), "CrashLoopBackOff", "exit code 3, 1 restarts"),  # between two back-offs
    (container(terminated=CRASHED, restarts=4), "CrashLoopBackOff", "exit code 3, 4 restarts"),
    (container(waiting={"reason": "CrashLoopBackOff"}, restarts=3, last={"exitCode": 137, "reason": "OOMKilled"}),
     "OOMKilled", "killed at its memory limit, 3 restarts: raise resources.limits.memory or use less"),
    (container(waiting={"reason": "ImagePullBackOff", "message": "Back-off pulling image"}), "ImagePullBackOff",
     "image ghcr.io/acme/web:1 cannot be pulled (the kubelet is backing off; the pod's events have its last error); "
     "the pod has no pull secret (a SourceCredential whose registry hosts cover the image gives one)"),
    (container(waiting={"reason": "ErrImagePull", "message": 'failed to pull and unpack image "ghcr.io/acme/web:1": '
                        'failed to resolve reference "ghcr.io/acme/web:1": failed to authorize: failed to fetch '
                        'anonymous token: unexpected status from GET request to https://ghcr.io/token?scope=x: '
                        '401 Unauthorized'}), "ErrImagePull",
     "image ghcr.io/acme/web:1 cannot be pulled: the registry refused access (failed to authorize); the pod has no "
     "pull secret (a SourceCredential whose registry hosts cover the image gives one)"),
    (container(waiting={"reason": "ErrImagePull", "message": 'rpc error: code = NotFound desc = failed to pull and '
                        'unpack image "ghcr.io/acme/web:1": failed to resolve reference "ghcr.io/acme/web:1": '
                        'ghcr.io/acme/web:1: not found'}), "ErrImagePull",
     "image ghcr.io/acme/web:1 cannot be pulled: not found in the registry"),
    (container(waiting={"reason": "ErrImagePull", "message": 'failed to do request: Head "https://ghcr.io/v2/": '
                        'dial tcp 10.0.0.1:443: connect: network is unreachable'}), "ErrImagePull",
     "image ghcr.io/acme/web:1 cannot be pulled: the registry is not reachable from the node (network is "
     "unreachable)"),
    (container(waiting={"reason": "ErrImageNeverPull"}), "ErrImageNeverPull",
     "image ghcr.io/acme/web:1 not on the node, and imagePullPolicy is Never"),
    (container(waiting={"reason": "CreateContainerConfigError",
                        "message": "couldn't find key api-key in Secret shop/third-party"}),
     "CreateContainerConfigError", "couldn't find key api-key in Secret shop/third-party"),
    (container(waiting={"reason": "CreateContainerConfigError", "message": "something with a value=hunter2"}),
     "CreateContainerConfigError", "the container cannot be created as declared (an env reference to a missing "
                                   "Secret or key?)"),
]


@pytest.mark.parametrize("message", [
    'failed to sync secret cache: timed out waiting for the condition',
    'failed to sync configmap cache: timed out waiting for the condition',
    'object "shop-prod"/"shop-pg-conn" not registered',
])
def test_the_kubelets_own_cache_not_ready_is_no_failure_yet(message: str) -> None:
    # The kubelet retries at once; the pod is starting, not failing (Argo CD would say Degraded for a moment).
    waiting = container(waiting={"reason": "CreateContainerConfigError", "message": message})
    pod = {"metadata": {"name": "web-1"}, "status": {"phase": "Pending", "containerStatuses": [waiting]}}
    assert pod_failures([pod]) == []
    # its next word, the cause, is the failure
    missing = container(waiting={"reason": "CreateContainerConfigError",
                                 "message": 'secret "shop-pg-conn" not found'})
    [found] = pod_failures([{**pod, "status": {"phase": "Pending", "containerStatuses": [missing]}}])
    assert (found.reason, found.detail) == ("CreateContainerConfigError", 'secret "shop-pg-conn" not found')


def test_a_refused_pull_names_the_pods_pull_secrets() -> None:
    refused = container(waiting={"reason": "ErrImagePull", "message": "...: failed to fetch oauth token: unexpected "
                                 "status from GET request to http://127.0.0.1:5000/token: 401 Unauthorized"})
    secret = {"metadata": {"name": "web-1"}, "spec": {"imagePullSecrets": [{"name": "apprafter-pull-myorg"}]},
              "status": {"phase": "Pending", "containerStatuses": [refused]}}
    [found] = pod_failures([secret])
    assert found.detail == ("image ghcr.io/acme/web:1 cannot be pulled: the registry refused access (401 "
                            "Unauthorized); the pod pulls with apprafter-pull-myorg")
    assert "127.0.0.1:5000/token" not in found.detail  # the kubelet's own message is not repeated
    # no pull secret because the credentials covering the image leave this namespace out: said so, nothing named
    unsecreted = {"metadata": {"name": "web-1"}, "status": {"phase": "Pending", "containerStatuses": [refused]}}
    [scoped] = pod_failures([unsecreted], scoped_out=True)
    assert scoped.detail == ("image ghcr.io/acme/web:1 cannot be pulled: the registry refused access (401 "
                             "Unauthorized); the pod has no pull secret (a SourceCredential covers the image's "
                             "registry, but not this namespace: its spec.registry.namespaces does not list it)")
    assert pod_failures([secret], scoped_out=True) == [found]  # a pod with a pull secret is told by its name


@pytest.mark.parametrize(("status", "reason", "detail"), FAILURES,
                         ids=["back-off", "running again, not ready", "terminated", "OOM", "pull", "refused",
                              "not found", "unreachable", "never pull",
                              "missing key", "message not repeated"])
def test_containers_that_cannot_run(status: dict[str, Any], reason: str, detail: str) -> None:
    [found] = pod_failures([pod("web-1", status)])
    assert (found.pod, found.container, found.reason, found.detail) == ("web-1", "app", reason, detail)


def test_healthy_starting_and_finished_pods_are_no_failure() -> None:
    assert pod_failures([
        pod("ready", container(ready=True, restarts=3, last={"exitCode": 137, "reason": "OOMKilled"})),
        pod("starting", container(waiting={"reason": "ContainerCreating"})),
        pod("probing", container()),  # running, not ready yet, never crashed: the rollout's to judge
        pod("leaving", container(terminated=CRASHED, restarts=2), deletionTimestamp="2026-01-01T00:00:00Z"),
        pod("evicted", container(terminated=CRASHED, restarts=2), phase="Failed"),
    ]) == []


CHILDREN: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}},
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"template": {
                "spec": {"containers": [{"name": "app", "image": "ghcr.io/acme/web:1"}]}}}},
            {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", "metadata": {"name": "web"},
             "spec": {"hostnames": ["web.prod.example.com"]}},
            {"apiVersion": "cert-manager.io/v1", "kind": "Certificate", "metadata": {"name": "web"}}]


def live_of(deployed: dict[str, Any], **others: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    out = {(c["kind"], "web"): {**c, **others.get(c["kind"], {})} for c in CHILDREN}
    template = CHILDREN[1]["spec"]["template"]
    out[("Deployment", "web")] = {**deployed, "spec": {**deployed["spec"], "template": template}}
    return out


def test_the_digest_is_read_from_the_pods_that_declare_the_image() -> None:
    ready = container(ready=True)
    # containerd names the image by any of its tags: the pod's own spec says which image it runs
    retagged = {**pod("web-a", {**ready, "image": "ghcr.io/acme/web-copy:1"}),
                "spec": {"containers": [{"name": "app", "image": "ghcr.io/acme/web:1"}]}}
    assert image_digest([retagged], "ghcr.io/acme/web:1") == "sha256:" + "a" * 64
    old = {**retagged, "spec": {"containers": [{"name": "app", "image": "ghcr.io/acme/web:0"}]}}
    assert image_digest([old], "ghcr.io/acme/web:1") is None  # a pod of the previous release
    moved = {**retagged, "status": {"containerStatuses": [{**ready, "imageID": "sha256:" + "b" * 64}]}}
    assert image_digest([retagged, moved], "ghcr.io/acme/web:1") is None  # a tag that moved: not one answer


def test_the_workload_adds_up_failures_first_then_progress() -> None:
    good = pod("web-a", container(ready=True))
    current = workload(CHILDREN, live_of(deployment()), [good])
    assert current.state == CURRENT and current.message == "3/3 replicas available"
    assert current.replicas == {"desired": 3, "updated": 3, "ready": 3, "available": 3}
    assert current.url == "https://web.prod.example.com/"
    assert current.image_digest == "sha256:" + "a" * 64
    rolling = workload(CHILDREN, live_of(deployment(updated=2, progressing="ReplicaSetUpdated")), [good])
    assert (rolling.state, rolling.reason, rolling.message) == (IN_PROGRESS, "Progressing",
                                                                 "Deployment web: 2/3 replicas updated")
    crashing = [pod(f"web-{n}", container(waiting={"reason": "CrashLoopBackOff"}, restarts=1, last=CRASHED))
                for n in "cb"]
    failed = workload(CHILDREN, live_of(deployment(updated=2, progressing="ReplicaSetUpdated")), [good, *crashing])
    assert (failed.state, failed.reason) == (FAILED, "CrashLoopBackOff")
    assert failed.message == "pod web-b: container app: CrashLoopBackOff (exit code 3, 1 restarts) (and 1 more pod)"
    pending = workload(CHILDREN, {k: v for k, v in live_of(deployment()).items() if k[0] != "Service"}, [good])
    assert (pending.state, pending.message) == (IN_PROGRESS, "Service web: not created yet")


def test_a_route_or_certificate_counts_only_where_its_controller_reports() -> None:
    refused = {"status": {"parents": [{"parentRef": {"name": "public"}, "conditions": [
        {"type": "Accepted", "status": "False", "reason": "NotAllowedByListeners", "message": "no listener"}]}]}}
    assert workload(CHILDREN, live_of(deployment(), HTTPRoute=refused), [])[:3] == (
        FAILED, "RouteNotAccepted",
        "HTTPRoute web: not accepted by Gateway public (NotAllowedByListeners: no listener)")
    # The hostname's own listener is not on the Gateway yet (its certificate is being issued): it waits.
    waiting = {"status": {"parents": [{"parentRef": {"name": "public", "sectionName": "web.example.com"},
                                       "conditions": [{"type": "Accepted", "status": "False",
                                                       "reason": "NoMatchingParent", "message": "no such listener"}]}]}}
    assert workload(CHILDREN, live_of(deployment(), HTTPRoute=waiting), [])[:3] == (
        IN_PROGRESS, "Progressing", "HTTPRoute web: Gateway public has no listener web.example.com yet (the operator "
                                    "adds it once the app's certificate is issued)")
    # The route moved to the Gateway its hostname was placed on: what the chart's Gateway said of it is stale.
    moved = {**refused, "spec": {"parentRefs": [{"name": "public-2", "sectionName": "web.example.com"}]}}
    assert workload(CHILDREN, live_of(deployment(), HTTPRoute=moved), [])[0] != FAILED
    moved["status"]["parents"].append({"parentRef": {"name": "public-2"}, "conditions": [
        {"type": "Accepted", "status": "False", "reason": "NotAllowedByListeners", "message": "no listener"}]})
    assert workload(CHILDREN, live_of(deployment(), HTTPRoute=moved), [])[2] == (
        "HTTPRoute web: not accepted by Gateway public-2 (NotAllowedByListeners: no listener)")
    issuing = {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Issuing", "message": "x"}]}}
    assert workload(CHILDREN, live_of(deployment(), Certificate=issuing), [])[:3] == (
        IN_PROGRESS, "Progressing", "Certificate web not ready (Issuing: x)")
    assert child_state({"kind": "Certificate", "metadata": {"name": "web"}}).state == CURRENT  # no cert-manager
    # The Gateway is full: the hostname's record says so (lifecycle.listeners), and the app fails, named
    waiting_for_room = workload(CHILDREN, live_of(deployment(), HTTPRoute=waiting), [],
                                unlistened={"web.example.com": "gateway-full"})
    assert waiting_for_room[:3] == (FAILED, "ListenerUnavailable", (
        "hostname web.example.com has no listener: every public Gateway is full (64 listeners each, as many "
        "Gateways as the operator may make; the oldest hostnames keep theirs): the platform team makes room or "
        "allows more Gateways; it comes once there is room"))
    over_share = workload(CHILDREN, live_of(deployment()), [],
                          unlistened={"web.example.com": "namespace-full", "www.example.com": "namespace-full"})
    assert over_share[:3] == (FAILED, "ListenerUnavailable", (
        "hostname web.example.com (and 1 more) has no listener: its namespace holds its share of the public "
        "Gateways' listeners (the oldest hostnames keep theirs): another of its apps gives one up, or the platform "
        "team raises the share; it comes once there is room"))


def test_the_phase_and_ready_condition_the_workload_earns() -> None:
    desired = Desired(None, [], [dict(c) for c in CHILDREN], [])  # type: ignore[arg-type]
    rolling = workload(CHILDREN, live_of(deployment(updated=2, progressing="ReplicaSetUpdated")), [])
    phase, ready = earned(desired, rolling, 4)
    assert (phase, ready.status, ready.reason) == ("Progressing", "False", "Progressing")
    assert ready.message == "Deployment web: 2/3 replicas updated; 4 objects applied for generation 4"
    phase, ready = earned(desired, workload(CHILDREN, live_of(deployment()), []), 4)
    assert (phase, ready.status, ready.reason) == ("Ready", "True", "Available")
    stuck = workload(CHILDREN, live_of(deployment(updated=1, available=0, progressing="ProgressDeadlineExceeded")), [])
    phase, ready = earned(desired, stuck, 4)
    assert (phase, ready.status, ready.reason) == ("Failed", "False", "ProgressDeadlineExceeded")
    assert earned(desired, None, 4)[1].reason == "Applied"  # no look at the workload: what the apply says


# --- drift --------------------------------------------------------------------------------------------

DESIRED: dict[str, Any] = {
    "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"a": "1"}},
           "spec": {"replicas": 2, "template": {"spec": {"containers": [{
               "name": "app", "image": "i:1", "env": [{"name": "LOG_LEVEL", "value": "info"}],
               "resources": {"requests": {"cpu": "0.5"}}}]}}}}
OURS = {"f:metadata": {"f:labels": {"f:a": {}}}, "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {
    "f:containers": {'k:{"name":"app"}': {".": {}, "f:name": {}, "f:image": {}, "f:env": {
        'k:{"name":"LOG_LEVEL"}': {".": {}, "f:name": {}, "f:value": {}}}, "f:resources": {}}}}}}}


def live_after(change: Any, *entries: dict[str, Any]) -> dict[str, Any]:
    live = copy.deepcopy(DESIRED)
    live["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "500m"  # canonical
    change(live)
    live["metadata"] |= {"resourceVersion": "42", "managedFields": [
        {"manager": OPERATOR, "operation": "Apply", "fieldsV1": OURS}, *entries]}
    return live


def scaled(live: dict[str, Any]) -> None:
    live["spec"]["replicas"] = 5


def edited(live: dict[str, Any]) -> None:
    live["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] = "debug"


SCALE: dict[str, Any] = {"manager": "kubectl", "operation": "Update", "subresource": "scale",
                         "fieldsV1": {"f:spec": {"f:replicas": {}}}}
EDIT: dict[str, Any] = {"manager": "kubectl-edit", "operation": "Update", "fieldsV1": {"f:spec": {"f:template": {
    "f:spec": {"f:containers": {'k:{"name":"app"}': {"f:env": {'k:{"name":"LOG_LEVEL"}': {"f:value": {}}}}}}}}}}


def test_kubectl_scale_and_edit_are_drift_named_by_field_and_manager() -> None:
    found = drift(live_after(scaled, SCALE), DESIRED, OPERATOR)
    assert found is not None and [tuple(f) for f in found.fields] == [("spec.replicas", ("kubectl (scale)",))]
    note = drift_note(found)
    assert (note.reason, note.type) == ("DriftCorrected", "Warning")
    assert note.text == ("Deployment web was changed outside git (spec.replicas by kubectl (scale)); put back as "
                         "declared")
    again = drift(live_after(scaled, SCALE), DESIRED, OPERATOR)
    assert again is not None and drift_note(again).occurrence == note.occurrence  # a retried pass: the same Event
    edit = drift(live_after(edited, EDIT), DESIRED, OPERATOR)
    assert edit is not None and edit.managers == ("kubectl-edit",)
    assert [f.path for f in edit.fields] == ["spec.template.spec.containers[app].env[LOG_LEVEL].value"]
    assert "debug" not in drift_note(edit).text and "info" not in drift_note(edit).text


def test_our_own_change_a_first_apply_and_an_unchanged_child_are_no_drift() -> None:
    assert drift(None, DESIRED, OPERATOR) is None
    assert drift(live_after(lambda live: None), DESIRED, OPERATOR) is None  # quantities compared by value
    assert drift(live_after(scaled), DESIRED, OPERATOR) is None  # replicas still ours: the render changed
    removed = drift(live_after(lambda live: live["metadata"]["labels"].pop("a")), DESIRED, OPERATOR)
    assert removed is None  # nobody holds a removed field: put back, but no manager to name


def test_managed_fields_sets_are_read_as_the_api_server_writes_them() -> None:
    steps = ("spec", "template", "spec", "containers", {"name": "app"}, "env", {"name": "LOG_LEVEL"}, "value")
    assert owns(OURS, steps) and owns(EDIT["fieldsV1"], steps)
    assert not owns(SCALE["fieldsV1"], steps)
    assert owns({"f:spec": {"f:selector": {}}}, ("spec", "selector", "matchLabels", "app"))  # atomic above
    assert field_path(steps) == "spec.template.spec.containers[app].env[LOG_LEVEL].value"
