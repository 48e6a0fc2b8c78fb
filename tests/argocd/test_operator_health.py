"""Argo CD's health of our kinds (deploy/argocd/argocd-cm-patch.yaml) on the AppRafter operator's real output:
the running operator (`apprafter operator`, as its ServiceAccount) takes Applications and their MigrationPlans
through the states the GitOps loop does not reach — not reconciled yet, a need no provider serves, an invalid spec, a
child the API server refuses, plans superseded by a newer change and by a revert — and Argo CD's own Lua runner
(`argocd admin settings resource-overrides health`) reads each live object. The loop (test_gitops_loop.py)
does the same for Ready, a stale generation, a held change and approved and applied plans.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.argocd import overrides
from tests.argocd.objects import edited, rendered_cr, with_base
from tests.compatibility.cases import BASE
from tests.reconciler.helpers import API, apply, condition, cr, plans, wait, wait_phase
from tests.reconciler.operator_proc import Fixture, Operator, operator_fixture
from tests.testbed.gitops import ARGOCD_NAMESPACE, delete_ours, paused
from tests.testbed.kube import KubeTestBed

pytestmark = pytest.mark.testbed


@pytest.fixture(scope="module")
def namespace(kube: KubeTestBed, apprafter_crds: list[str]) -> Iterator[str]:
    """The module's namespace; what the operator made there is deleted once it stopped."""
    name = f"argo-health-{uuid.uuid4().hex[:8]}"
    kube.ensure_namespace(name)
    yield name
    delete_ours(kube, (name,))


# The GitOps loop's operator (tests/testbed/gitops.py start_operator), watching the module's namespace only.
operator = operator_fixture("--no-leader-elect", "--no-platform-stack", "--max-backoff", "5", "--argocd-namespace",
                            ARGOCD_NAMESPACE, "--namespace", Fixture("namespace"), bed="kube",
                            rbac=(Fixture("namespace"),), argocd=ARGOCD_NAMESPACE, name="gitops-loop")


def live(kube: KubeTestBed, kind: str, name: str, namespace: str) -> dict[str, Any]:
    obj = kube.get(API, kind, name, namespace)
    assert obj is not None, f"{kind} {namespace}/{name} does not exist"
    return obj


def ready(obj: dict[str, Any]) -> dict[str, Any]:
    found = condition(obj["status"], "Ready")
    assert found is not None, obj["status"]
    return found


def ready_says(obj: dict[str, Any]) -> str:
    """The message of the operator's Ready condition: what the health message must repeat."""
    return str(ready(obj)["message"])


def plan_in_phase(kube: KubeTestBed, name: str, namespace: str, phase: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        plan = live(kube, "MigrationPlan", name, namespace)
        return plan if (plan.get("status") or {}).get("phase") == phase else None
    return wait(f"MigrationPlan {name} {phase}", probe)


def held_by_another_plan(kube: KubeTestBed, namespace: str, previous: str) -> str:
    def probe() -> str | None:
        status = wait_phase(kube, namespace, "AwaitingMigrationApproval", name="hello")
        return str(status["migrationPlan"]) if status["migrationPlan"] != previous else None
    return wait(f"a plan other than {previous}", probe)


def test_an_application_before_and_after_the_operator_reconciles_it(kube: KubeTestBed, operator: Operator,
                                                                    namespace: str) -> None:
    with paused(operator):
        created = apply(kube, rendered_cr(namespace=namespace))
        assert "status" not in created
        assert overrides.health(created) == overrides.Health(
            "Progressing", "Waiting for the AppRafter operator to reconcile this Application")
    wait_phase(kube, namespace, "Ready", name="hello")
    obj = live(kube, "Application", "hello", namespace)
    assert overrides.health(obj) == overrides.Health("Healthy", ready_says(obj))


def squat(kube: KubeTestBed, namespace: str, name: str) -> None:
    """A Deployment of the app's name made by hand: not the Application's, so the operator leaves it alone."""
    kube.apply({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
                "spec": {"selector": {"matchLabels": {"made": "by-hand"}}, "template": {
                    "metadata": {"labels": {"made": "by-hand"}},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}, field_manager="kubectl")


INTERNAL = {"image": BASE["image"], "replicas": 2, "expose": {"port": 8080, "network": "internal"}}  # no claims
# (app name, spec.base, a squatting Deployment first?, phase, Ready reason, in its message, Argo CD health)
STATES = [
    # a need no provider serves (none in this bed): Degraded at once, saying so (issue 42: was Progressing forever)
    ("claims", BASE, False, "Failed", "Unbound", "needs.pg cannot be provisioned: NoMatchingProvider: ", "Degraded"),
    ("jetstream", {**INTERNAL, "needs": {"jetstream": {"streams": ["s"]}}}, False, "Failed", "Unbound",
     'needs.jetstream cannot be provisioned: NoMatchingProvider: no ServiceProvider serves "jetstream"', "Degraded"),
    ("invalid", {**BASE, "env": {"bad-key": "x"}}, False, "Failed", "InvalidSpec", "bad-key", "Degraded"),
    # a Deployment of that name that is someone else's: left alone (before issue 24 it was taken over, then refused)
    ("refused", INTERNAL, True, "Failed", "ChildConflict", "not controlled by this Application", "Degraded"),
]


@pytest.mark.parametrize(("name", "base", "squatted", "phase", "reason", "fragment", "health"), STATES,
                         ids=[s[0] for s in STATES])
def test_argo_cd_shows_the_operators_phase_and_message(kube: KubeTestBed, operator: Operator, namespace: str,
                                                       name: str, base: dict[str, Any], squatted: bool, phase: str,
                                                       reason: str, fragment: str, health: str) -> None:
    if squatted:
        squat(kube, namespace, name)
    apply(kube, cr(namespace, base, name=name))
    wait_phase(kube, namespace, phase, name=name)
    obj = live(kube, "Application", name, namespace)
    assert ready(obj)["reason"] == reason
    message = ready_says(obj)
    assert fragment in message
    assert overrides.health(obj) == overrides.Health(health, message)


def test_superseded_plans_are_healthy(kube: KubeTestBed, operator: Operator, namespace: str) -> None:
    applied = live(kube, "Application", "hello", namespace)
    assert applied["status"]["phase"] == "Ready"
    original = rendered_cr(namespace=namespace)

    apply(kube, edited(original, replicas=0))  # gated: scale to zero
    held = wait_phase(kube, namespace, "AwaitingMigrationApproval", name="hello")
    first = live(kube, "MigrationPlan", held["migrationPlan"], namespace)
    assert overrides.health(first) == overrides.Health(
        "Suspended", f"Awaiting approval: requires-restart, 1 gated change (apprafter migration approve "
                     f"{first['metadata']['name']})")

    # Another gated change while the first waits: the first plan is superseded by the new one.
    apply(kube, with_base(edited(original, replicas=0), image="ghcr.io/acme/hello-next:2.0.0"))
    second = held_by_another_plan(kube, namespace, first["metadata"]["name"])
    first = plan_in_phase(kube, first["metadata"]["name"], namespace, "superseded")
    assert first["status"]["supersededBy"] == second
    assert overrides.health(first) == overrides.Health(
        "Healthy", f"Superseded by MigrationPlan {second}; nothing to approve here")

    # The change reverted in git: nothing is gated any more, the waiting plan is superseded by no plan.
    apply(kube, original)
    wait_phase(kube, namespace, "Ready", name="hello")
    reverted = plan_in_phase(kube, second, namespace, "superseded")
    assert not reverted["status"].get("supersededBy")
    assert overrides.health(reverted) == overrides.Health(
        "Healthy", "Superseded by a newer change; nothing to approve here")
    assert {p["status"]["phase"] for p in plans(kube, namespace)} == {"superseded"}
    obj = live(kube, "Application", "hello", namespace)
    assert overrides.health(obj) == overrides.Health("Healthy", ready_says(obj))
