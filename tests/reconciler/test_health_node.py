"""Health earned from real pods on the node tier (tests/testbed/node.py): the operator, as its ServiceAccount with the
chart's RBAC, takes each Application through the state its workload is in — Ready only once every replica is
available, Failed on a crash loop, an image that cannot be pulled, a key missing from the (granted) Secret behind a
`secret:` env reference and an OOM kill, each naming the container and the reason and never a value — and Argo CD's
own Lua runner reads each live object as docs/argocd.md says. A child changed by hand is put back with one
DriftCorrected Event; deleting an Application takes its children, claims, plans, ReplicaSets and pods with it
through the garbage collector."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from lifecycle.secrets import GRANT_ANNOTATION
from renderer.manifests import KINDS
from tests.argocd import overrides
from tests.reconciler.helpers import API, ARGO, cr, grant_referenced, set_claims_ready, wait, write_status
from tests.reconciler.operator_proc import FAST, Operator, operator_fixture
from tests.testbed.node import NodeTestBed, has_condition

pytestmark = [pytest.mark.node, pytest.mark.testbed]

NOT_FOR_MESSAGES = "value-4711-never-in-a-message"  # an env literal: no condition or Event may repeat it


# Our CRDs on the node and one operator for the module, as its ServiceAccount with the chart's RBAC.
operator = operator_fixture("--no-leader-elect", "--no-platform-stack", *FAST, bed="node", rbac=(), crds=True,
                            name="health-node")


def workload(image: str, **fields: Any) -> dict[str, Any]:
    """spec.base of an app running the test image (serve mode unless `env` says otherwise), exposed on 8080."""
    return {"image": image, "replicas": 2, "expose": {"port": 8080},
            "env": {"MODE": "serve", "MESSAGE": NOT_FOR_MESSAGES}, **fields}


def deploy(node: NodeTestBed, base: dict[str, Any], name: str = "web", namespace: str | None = None) -> str:
    """Apply the Application as Argo CD would, in a fresh namespace (or `namespace`); returns the namespace."""
    namespace = namespace or f"health-{uuid.uuid4().hex[:8]}"
    node.ensure_namespace(namespace)
    obj = cr(namespace, base, name=name)
    grant_referenced(node, obj)  # the team grants the app the Secrets its env names
    node.apply(obj, field_manager=ARGO)
    return namespace


def current(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The status when it is for the object's generation."""
    status: dict[str, Any] = obj.get("status") or {}
    return status if status.get("observedGeneration") == obj["metadata"]["generation"] else None


def ready_condition(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status.get("conditions") or [] if c["type"] == "Ready")


def in_phase(phase: str, reasons: tuple[str, ...] = (), says: str = "") -> Callable[[dict[str, Any]], Any]:
    def check(obj: dict[str, Any]) -> Any:
        status = current(obj)
        if not status or status.get("phase") != phase:
            return None
        ready = ready_condition(status)
        return obj if (not reasons or ready["reason"] in reasons) and says in ready.get("message", "") else None
    return check


def wait_app(node: NodeTestBed, namespace: str, phase: str, *reasons: str, name: str = "web", says: str = "",
             timeout: float = 120) -> dict[str, Any]:
    """The Application once in `phase` with one of `reasons`, its Ready message saying `says`."""
    obj: dict[str, Any] = node.wait(API, "Application", name, namespace, in_phase(phase, reasons, says),
                                    timeout=timeout, what=f"Application {namespace}/{name} {phase} "
                                    f"{'/'.join(reasons)}{f' saying {says!r}' if says else ''}")
    return obj


def events(node: NodeTestBed, namespace: str, reason: str) -> list[dict[str, Any]]:
    items = node.http.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events").json()["items"]
    return [e for e in items if e.get("reason") == reason]


def reconciles_after(operator: Operator, count: float, more: int) -> None:
    wait(f"{more} more reconciles", lambda: operator.reconciles() >= count + more or None, 60)


def never_says_a_value(node: NodeTestBed, namespace: str, obj: dict[str, Any]) -> None:
    assert NOT_FOR_MESSAGES not in json.dumps(obj["status"]["conditions"])  # lastAppliedSpec holds it, as the spec
    notes = [e.get("note", "") for e in node.http.get(
        f"/apis/events.k8s.io/v1/namespaces/{namespace}/events").json()["items"]]
    assert not [n for n in notes if NOT_FOR_MESSAGES in n]


# --- Ready only once the pods are available ------------------------------------------------------------

def test_ready_only_once_every_replica_is_available_and_argo_cd_says_healthy(node: NodeTestBed, test_app: str,
                                                                           operator: Operator) -> None:
    namespace = f"health-{uuid.uuid4().hex[:8]}"
    node.ensure_namespace(namespace)
    seen: list[dict[str, Any]] = []

    def ready(obj: dict[str, Any]) -> Any:
        status = current(obj)
        if status:
            seen.append(status)
        return obj if status and status.get("phase") == "Ready" else None

    node.apply(cr(namespace, workload(test_app, expose={"port": 8080, "network": "public"}), name="web"),
               field_manager=ARGO)
    node.wait(API, "Application", "web", namespace, ready, what="Application web Ready")
    # The digest comes with the pods' own status, which the operator may see a moment after the Deployment's.
    obj = node.wait(API, "Application", "web", namespace,
                    lambda o: o if ready(o) and o["status"].get("imageDigest") else None,
                    what="Application web Ready with the pods' image digest")
    deployment = node.get("apps/v1", "Deployment", "web", namespace)
    assert deployment is not None and deployment["status"]["availableReplicas"] == 2
    assert has_condition(deployment, "Available")
    # Before Ready the operator said it was rolling out, with the replicas it counted; never Ready early.
    progressing = [s for s in seen if s["phase"] == "Progressing"]
    assert progressing, [s["phase"] for s in seen]
    assert all(ready_condition(s)["reason"] == "Progressing" for s in progressing)
    assert any("replicas" in ready_condition(s)["message"] for s in progressing), progressing
    assert all(s["replicas"]["available"] == 2 for s in seen if s["phase"] == "Ready")
    status = obj["status"]
    assert status["replicas"] == {"desired": 2, "updated": 2, "ready": 2, "available": 2}
    route = node.get("gateway.networking.k8s.io/v1", "HTTPRoute", "web", namespace) or {}
    assert status["url"] == f"https://{route['spec']['hostnames'][0]}/"  # no Gateway controller: not reported on
    assert status["image"] == test_app
    # the digest the kubelet reports for the pods' image
    pods = node.http.get(f"/api/v1/namespaces/{namespace}/pods").json()["items"]
    assert {p["status"]["containerStatuses"][0]["imageID"].rpartition("@")[2].removeprefix("sha256:")
            for p in pods} == {status["imageDigest"].removeprefix("sha256:")}
    message = ready_condition(status)["message"]
    assert message.startswith("2/2 replicas available; ")
    assert overrides.health(obj) == overrides.Health("Healthy", message)
    never_says_a_value(node, namespace, obj)
    # A steady workload is a no-op: the resyncs after (every 10 s here) write nothing, pods watched or not.
    writes = operator.writes()
    reconciles_after(operator, operator.reconciles(), 3)
    assert operator.writes() == writes
    # as the docs say it (`applications` alone may be Argo CD's kind on a cluster that has both)
    columns = node.kubectl("get", "arapp", "-n", namespace).stdout.splitlines()
    assert columns[0].split() == ["NAME", "ENVIRONMENT", "PHASE", "READY", "DESIRED", "URL", "AGE"]
    assert columns[1].split()[:6] == ["web", "prod", "Ready", "2", "2", status["url"]]


# --- Degraded: pods that cannot run --------------------------------------------------------------------

def limits(memory: str) -> dict[str, Any]:
    return {"requests": {"cpu": "100m", "memory": memory}, "limits": {"memory": memory}}


FAILING: dict[str, tuple[Callable[[str], dict[str, Any]], tuple[str, ...], str]] = {
    "crash loop": (lambda image: workload(image, env={"MODE": "crash", "MESSAGE": NOT_FOR_MESSAGES}),
                   ("CrashLoopBackOff",), "exit code 3"),
    "image that does not exist": (lambda image: workload("localhost/apprafter-no-such-image:1.0"),
                                  ("ErrImagePull", "ImagePullBackOff"), "image localhost/apprafter-no-such-image:1.0"),
    # The Secret is granted to the app (deploy() grants what the env names, as its team would), without the key:
    # a Secret that is not granted, or not there, is refused by the operator before any pod (lifecycle.secrets).
    "missing Secret key": (lambda image: workload(image, env={"MODE": "serve", "MESSAGE": NOT_FOR_MESSAGES,
                                                              "API_KEY": {"secret": "third-party/apikey"}}),
                           ("CreateContainerConfigError",), "key apikey in Secret"),
    "OOM kill": (lambda image: workload(image, env={"MODE": "oom", "MESSAGE": NOT_FOR_MESSAGES},
                                        resources=limits("64Mi")), ("OOMKilled",), "memory limit"),
}


class TestAWorkloadThatCannotRun:
    """The failing apps run side by side, and are gone before the next test: a crash loop or an OOM kill left
    running would take the CPU and memory the later tests' timings and traffic rely on."""

    @pytest.fixture(scope="class")
    def failing(self, node: NodeTestBed, test_app: str, operator: Operator) -> Iterator[dict[str, str]]:
        """Every failing app applied at once (their waits overlap): case -> namespace."""
        with node.scratch_namespaces(f"health-{uuid.uuid4().hex[:8]}" for _ in FAILING) as made:
            namespaces = dict(zip(FAILING, made, strict=True))
            for case, (make, _, _) in FAILING.items():
                deploy(node, make(test_app), namespace=namespaces[case])
            yield namespaces

    @pytest.mark.parametrize("case", list(FAILING))
    def test_is_failed_with_the_container_and_the_reason(self, node: NodeTestBed, failing: dict[str, str],
                                                          case: str) -> None:
        _, reasons, fragment = FAILING[case]
        namespace = failing[case]
        # The kubelet's first word can be a passing one (e.g. "failed to sync secret cache" while its watch starts:
        # the operator then says what such an error usually means); its next names the cause, and so does the
        # Application, by itself (seen once under load, 2026-12-05).
        obj = wait_app(node, namespace, "Failed", *reasons, says=fragment)
        ready = ready_condition(obj["status"])
        assert ready["status"] == "False"
        assert "container app:" in ready["message"] and ready["reason"] in ready["message"]
        assert ready["message"].startswith("pod web-")
        never_says_a_value(node, namespace, obj)
        assert overrides.health(obj) == overrides.Health("Degraded", ready["message"])

    def test_a_missing_secret_key_added_later_heals(self, node: NodeTestBed, failing: dict[str, str]) -> None:
        namespace = failing["missing Secret key"]
        wait_app(node, namespace, "Failed", "CreateContainerConfigError")
        node.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {
            "name": "third-party", "namespace": namespace, "annotations": {GRANT_ANNOTATION: "web"}},
            "stringData": {"apikey": "s3cr3t"}}, field_manager="team")
        obj = wait_app(node, namespace, "Ready")
        assert "s3cr3t" not in json.dumps(obj["status"])


# --- scale to zero (gated), drift, deletion ------------------------------------------------------------

def approve(node: NodeTestBed, namespace: str, plan: str) -> None:
    write_status(node, "MigrationPlan", plan, namespace, {"phase": "approved"}, manager="approver")


def test_scale_to_zero_is_ready_with_no_pods(node: NodeTestBed, test_app: str, operator: Operator) -> None:
    namespace = deploy(node, workload(test_app, replicas=1))
    wait_app(node, namespace, "Ready")
    node.apply(cr(namespace, workload(test_app, replicas=0), name="web"), field_manager=ARGO)
    held = wait_app(node, namespace, "AwaitingMigrationApproval")
    assert held["status"]["replicas"]["available"] == 1  # the previous version keeps running
    approve(node, namespace, held["status"]["migrationPlan"])
    obj = wait_app(node, namespace, "Ready")
    assert obj["status"]["replicas"] == {"desired": 0, "updated": 0, "ready": 0, "available": 0}
    node.wait_list("v1", "Pod", namespace, lambda items: not items or None, what="no pods")


def test_a_child_changed_by_hand_is_put_back_with_one_drift_event(node: NodeTestBed, test_app: str,
                                                                 operator: Operator) -> None:
    namespace = deploy(node, workload(test_app))
    wait_app(node, namespace, "Ready")
    corrections = operator.metric("apprafter_drift_corrections_total", kind="Deployment")
    node.kubectl("scale", "deployment/web", "-n", namespace, "--replicas=5")
    node.wait("apps/v1", "Deployment", "web", namespace,
              lambda d: (d["spec"]["replicas"] == 2 and d["metadata"]["generation"] >= 3) or None,
              what="the declared replicas back")
    [scaled] = node.wait_list("events.k8s.io/v1", "Event", namespace,
                              lambda items: [e for e in items if e["reason"] == "DriftCorrected"] or None)
    assert scaled["type"] == "Warning" and scaled["regarding"]["kind"] == "Application"
    assert scaled["note"] == ("Deployment web was changed outside git (spec.replicas by kubectl (scale)); put back "
                              "as declared")
    node.kubectl("set", "env", "deployment/web", "-n", namespace, "MESSAGE=changed-by-hand")
    node.wait_list("events.k8s.io/v1", "Event", namespace,
                   lambda items: len([e for e in items if e["reason"] == "DriftCorrected"]) == 2 or None)
    edited = [e for e in events(node, namespace, "DriftCorrected") if e["metadata"]["name"] != scaled["metadata"][
        "name"]]
    assert [e["note"] for e in edited] == [
        "Deployment web was changed outside git (spec.template.spec.containers[app].env[MESSAGE].value by "
        "kubectl-set); put back as declared"]
    deployment = node.get("apps/v1", "Deployment", "web", namespace) or {}
    assert {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]} == {
        "MODE": "serve", "MESSAGE": NOT_FOR_MESSAGES}
    wait_app(node, namespace, "Ready")
    # Resyncs that find nothing say nothing: every Application looked at again (twice), no third Event.
    reconciles_after(operator, operator.reconciles(), 2 * len(node.http.get(
        "/apis/apprafter.io/v1alpha1/applications").json()["items"]))
    assert len(events(node, namespace, "DriftCorrected")) == 2
    assert operator.metric("apprafter_drift_corrections_total", kind="Deployment") == corrections + 2


@pytest.mark.parametrize("propagation", ["Background", "Foreground"])
def test_deleting_an_application_takes_everything_with_it_through_the_garbage_collector(
        node: NodeTestBed, test_app: str, operator: Operator, propagation: str) -> None:
    namespace = deploy(node, workload(test_app, replicas=1, needs={"redis": {}}))
    node.wait(API, "ResourceClaim", "web-redis", namespace, lambda o: True, what="the claim")
    set_claims_ready(node, namespace, ["web-redis"])
    wait_app(node, namespace, "Ready")
    node.apply(cr(namespace, workload(test_app, replicas=0, needs={"redis": {}}), name="web"), field_manager=ARGO)
    held = wait_app(node, namespace, "AwaitingMigrationApproval")  # a plan waits, owned by the Application
    owned = {(k.kind, o["metadata"]["name"]) for k in (*KINDS,)
             for o in node.http.get(node.resource_for(k.api_version, k.kind).path(None, namespace)).json()["items"]}
    assert {("Deployment", "web"), ("ResourceClaim", "web-redis"), ("Service", "web")} <= owned
    assert node.get(API, "MigrationPlan", held["status"]["migrationPlan"], namespace) is not None
    resp = node.http.request("DELETE", f"/apis/apprafter.io/v1alpha1/namespaces/{namespace}/applications/web",
                             json={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation})
    assert resp.status_code in (200, 202), resp.text
    if propagation == "Foreground":
        assert "foregroundDeletion" in resp.json()["metadata"]["finalizers"]
    node.wait_gone(API, "Application", "web", namespace)
    for api_version, kind in [(k.api_version, k.kind) for k in KINDS] + [(API, "MigrationPlan"),
                                                                         ("apps/v1", "ReplicaSet"), ("v1", "Pod")]:
        if kind == "ServiceAccount":
            node.wait_list(api_version, kind, namespace, lambda items: [o for o in items if o["metadata"]["name"]
                                                                        == "default"] == items or None,
                           what="only the default ServiceAccount")
            continue
        node.wait_list(api_version, kind, namespace, lambda items: not items or None, what=f"{kind}s gone")


# --- issue 26: a rollout that protects itself ----------------------------------------------------------

PROBED = {"readiness": {"path": "/ready", "periodSeconds": 1, "failureThreshold": 1}, "progressDeadlineSeconds": 30}


def every_pod_answers(node: NodeTestBed, namespace: str, url: str) -> None:
    """kube-proxy may carry one ready endpoint before the other: wait until each pod has answered via `url`."""
    from tests.testbed.node import RequestFailed
    from tests.testbed.procs import wait_for

    pods = {p["metadata"]["name"] for p in node.http.get(f"/api/v1/namespaces/{namespace}/pods").json()["items"]
            if not p["metadata"].get("deletionTimestamp")}
    seen: set[str] = set()

    def answered() -> bool | None:
        with contextlib.suppress(RequestFailed):
            seen.add(node.request("GET", url + "host", timeout=2).text.strip())
        return True if seen >= pods else None

    wait_for("every pod answering through the Service", answered, 60, interval=0.01)


def test_a_release_that_never_answers_stays_unavailable_while_the_old_pods_serve_until_a_revert(
        node: NodeTestBed, test_app: str, operator: Operator) -> None:
    good = workload(test_app, health=PROBED, env={"MODE": "serve", "MESSAGE": "v1"})
    namespace = deploy(node, good)
    wait_app(node, namespace, "Ready")
    service = node.get("v1", "Service", "web", namespace) or {}
    url = f"http://{service['spec']['clusterIP']}:8080/"
    every_pod_answers(node, namespace, url)
    with node.traffic(url, interval=0.02) as traffic:
        # The release's process starts and listens, and never answers: its readiness probe times out.
        node.apply(cr(namespace, workload(test_app, health=PROBED, env={"MODE": "hang", "MESSAGE": "v2"}),
                      name="web"), field_manager=ARGO)
        # first "the Deployment controller has not seen generation 2 yet", then the replicas it counts
        node.wait(API, "Application", "web", namespace,
                  lambda o: o if in_phase("Progressing")(o) and "replicas" in ready_condition(o["status"])["message"]
                  else None, what="Progressing, counting the new release's replicas")
        failed = wait_app(node, namespace, "Failed", "ProgressDeadlineExceeded", timeout=180)
    counted = traffic.stop()  # already stopped by the block: its counts
    # every request answered, all along
    assert counted["sent"] > 100 and counted["failed"] == 0, (counted, node.diagnostics())
    assert counted["bodies"] == {"v1\n": counted["ok"]}  # by the old pods only
    message = ready_condition(failed["status"])["message"]
    assert message.startswith("Deployment web: no progress for 30 s (ProgressDeadlineExceeded): 1/2 replicas "
                              "updated, 2 available; the previous pods keep serving"), message
    assert overrides.health(failed) == overrides.Health("Degraded", message)
    deployment = node.get("apps/v1", "Deployment", "web", namespace) or {}
    assert deployment["status"]["availableReplicas"] == 2 and deployment["status"]["updatedReplicas"] == 1
    hung = [p for p in node.http.get(f"/api/v1/namespaces/{namespace}/pods").json()["items"]
            if p["spec"]["containers"][0]["env"][0]["value"] == "v2"]
    assert hung and not any(has_condition(p, "Ready") for p in hung)  # un-Available: never Ready

    node.apply(cr(namespace, good, name="web"), field_manager=ARGO)  # the revert in git
    healed = wait_app(node, namespace, "Ready")
    assert healed["status"]["replicas"] == {"desired": 2, "updated": 2, "ready": 2, "available": 2}
    node.wait_list("v1", "Pod", namespace, lambda items: all(
        p["spec"]["containers"][0]["env"][0]["value"] == "v1" for p in items) or None, what="only v1 pods")
