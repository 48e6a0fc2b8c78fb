"""Argo CD's view of our resources (deploy/argocd/argocd-cm-patch.yaml), every branch run by Argo CD's own Lua
runner (`argocd admin settings resource-overrides`) on our plugin's real Application CR and on MigrationPlans the
real classifier builds; the statuses are the operator's shapes, and the API server accepts each of them. The
running operator's own objects go through the same runner in test_operator_health.py and test_gitops_loop.py."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from compatibility.classes import is_gated
from compatibility.migrationplan import migration_plan
from compatibility.platform import PlatformChange, roll_up_platform
from tests.argocd import overrides
from tests.argocd.objects import (
    app_status,
    edited,
    gated_plan,
    in_cluster,
    plan_object,
    rendered_cr,
    with_base,
)
from tests.testbed.kube import KubeTestBed, _rejected

PLAN = "hello-prod-0123456789"
CR = rendered_cr()
# (id, generation, status, Argo CD health, what the message must hold)
APPLICATION_CASES: list[tuple[str, int, dict[str, Any] | None, str, str]] = [
    ("no status", 1, None, "Progressing", "Waiting for the AppRafter operator to reconcile this Application"),
    ("stale observedGeneration", 2, app_status("Ready", 1, ("True", "Applied", "3 objects applied")),
     "Progressing", "The AppRafter operator has not reconciled generation 2 yet (observed: 1)"),
    ("no observedGeneration yet", 1, {"phase": "Ready"}, "Progressing",
     "The AppRafter operator has not reconciled generation 1 yet (observed: 0)"),
    ("Pending", 1, app_status("Pending", 1, ("False", "WaitingForClaims", "waiting for ResourceClaims: hello-pg")),
     "Progressing", "waiting for ResourceClaims: hello-pg"),
    ("Progressing", 1, app_status("Progressing", 1, ("False", "Applying", "applying 6 objects")), "Progressing",
     "applying 6 objects"),
    ("status without a phase", 3, app_status(None, 3), "Progressing",
     "The AppRafter operator is applying this Application"),
    ("Ready", 2, app_status("Ready", 2, ("True", "Applied", "6 objects applied")), "Healthy", "6 objects applied"),
    ("AwaitingMigrationApproval", 2, app_status(
        "AwaitingMigrationApproval", 2, ("False", "AwaitingMigrationApproval", "gated: requires-restart"),
        migrationPlan=PLAN), "Suspended",
     f"Awaiting approval of MigrationPlan {PLAN} (apprafter migration approve {PLAN} -n hello-prod); "
     "the previous version keeps running"),
    ("AwaitingMigrationApproval, plan not named yet", 2, app_status(
        "AwaitingMigrationApproval", 2, ("False", "AwaitingMigrationApproval", "creating the MigrationPlan")),
     "Suspended", "creating the MigrationPlan"),
    ("Failed", 1, app_status("Failed", 1, ("False", "ApplyFailed", "Deployment hello: admission webhook denied")),
     "Degraded", "Deployment hello: admission webhook denied"),
    # What the workload earns (lifecycle.health, reached by real pods in tests/reconciler/test_health_node.py).
    ("rolling out", 3, app_status("Progressing", 3, ("False", "Progressing", "Deployment hello: 2/3 replicas updated; "
                                                     "6 objects applied for generation 3")),
     "Progressing", "Deployment hello: 2/3 replicas updated; 6 objects applied for generation 3"),
    ("rolled out", 3, app_status("Ready", 3, ("True", "Available", "3/3 replicas available; 6 objects applied for "
                                              "generation 3"), replicas={"desired": 3, "updated": 3, "ready": 3,
                                                                         "available": 3}),
     "Healthy", "3/3 replicas available; 6 objects applied for generation 3"),
    ("crash loop", 3, app_status("Failed", 3, ("False", "CrashLoopBackOff", "pod hello-7d9-x2k: container app: "
                                               "CrashLoopBackOff (exit code 3, 4 restarts)")),
     "Degraded", "pod hello-7d9-x2k: container app: CrashLoopBackOff (exit code 3, 4 restarts)"),
    ("rollout past its deadline", 3, app_status("Failed", 3, (
        "False", "ProgressDeadlineExceeded", "Deployment hello: no progress for 30 s (ProgressDeadlineExceeded): 1/3 "
        "replicas updated, 0 available; the previous pods keep serving")),
     "Degraded", "Deployment hello: no progress for 30 s (ProgressDeadlineExceeded): 1/3 replicas updated, 0 "
                 "available; the previous pods keep serving"),
    ("Ready=False InvalidSpec", 4, app_status(
        "Pending", 4, ("False", "InvalidSpec", "spec.environments.prod.replicas: conflicting values 3 and -1")),
     "Degraded", "spec.environments.prod.replicas: conflicting values 3 and -1"),
]


@pytest.mark.parametrize(("generation", "status", "health", "message"),
                         [c[1:] for c in APPLICATION_CASES], ids=[c[0] for c in APPLICATION_CASES])
def test_application_health(generation: int, status: dict[str, Any] | None, health: str, message: str) -> None:
    got = overrides.health(in_cluster(CR, generation, status))
    assert (got.status, got.message) == (health, message)


def test_application_phase_from_a_newer_operator_is_unknown_not_healthy() -> None:
    got = overrides.health(in_cluster(CR, 1, app_status("Hibernating", 1)))
    assert got == overrides.Health("Unknown", "Unknown phase Hibernating (newer operator?)")


# Real plans for the prod CR: one gated change; and a soft change and a new claim (review: listed, not gated) riding
# along with two gated ones.
SCALE_TO_ZERO = gated_plan(CR, edited(CR, replicas=0))
MIXED = gated_plan(CR, with_base(edited(CR, replicas=0), image="ghcr.io/acme/hello:1.1.0",
                                 expose={"port": 8080, "network": "public"}, needs={"pg": {}}))


def test_the_plans_are_what_the_messages_claim() -> None:
    assert [c.classification for c in SCALE_TO_ZERO.changes] == ["requires-restart"]
    assert [c.classification for c in MIXED.changes].count("safe") == 1
    assert [(c.rule, c.classification) for c in MIXED.changes if c.field == "needs.pg"] == [("AR-RV001", "review")]
    assert len(MIXED.gated_changes) == 2


@pytest.mark.parametrize("gated", [SCALE_TO_ZERO, MIXED], ids=["one gated change",
                                                               "two gated, one soft, one for review"])
def test_pending_plan_is_suspended_with_its_primary_class_and_gated_count(gated: Any) -> None:
    obj = plan_object(gated, {"phase": "pending-approval"})
    name = obj["metadata"]["name"]
    # The Lua counts what compatibility/classes.py gates: the same number the plan reports.
    count = sum(is_gated(c["classification"]) for c in obj["spec"]["changes"])
    assert count == len(gated.gated_changes)
    noun = "gated change" if count == 1 else "gated changes"
    got = overrides.health(obj)
    assert got == overrides.Health(
        "Suspended", f"Awaiting approval: {gated.primary}, {count} {noun} (apprafter migration approve {name})")


PLAN_CASES: list[tuple[str, dict[str, Any] | None, str, str]] = [
    ("no phase yet", None, "Progressing", "Waiting for the AppRafter operator to set the plan's phase"),
    ("approved", {"phase": "approved", "approvedBy": "alice@example.com", "approvedAt": "2026-11-30T12:00:00Z"},
     "Progressing", "Approved by alice@example.com; waiting for the AppRafter operator to apply it"),
    ("approved, approver not stamped", {"phase": "approved"}, "Progressing",
     "Approved; waiting for the AppRafter operator to apply it"),
    ("applied", {"phase": "applied", "appliedAt": "2026-11-30T12:01:00Z"}, "Healthy",
     "Applied at 2026-11-30T12:01:00Z"),
    ("superseded", {"phase": "superseded", "supersededBy": "hello-prod-9876543210"}, "Healthy",
     "Superseded by MigrationPlan hello-prod-9876543210; nothing to approve here"),
    ("superseded by a revert", {"phase": "superseded"}, "Healthy",
     "Superseded by a newer change; nothing to approve here"),
    ("rejected", {"phase": "rejected", "message": "rejected by bob: restore pin 1.4.0"}, "Degraded",
     "Rejected: rejected by bob: restore pin 1.4.0"),
]


@pytest.mark.parametrize(("status", "health", "message"), [c[1:] for c in PLAN_CASES], ids=[c[0] for c in PLAN_CASES])
def test_migration_plan_health(status: dict[str, Any] | None, health: str, message: str) -> None:
    got = overrides.health(plan_object(SCALE_TO_ZERO, status))
    assert (got.status, got.message) == (health, message)


PHASES = [None, "pending-approval", "approved", "rejected", "applied", "superseded"]


@pytest.mark.parametrize("phase", PHASES, ids=[str(p) for p in PHASES])
def test_approve_is_offered_only_while_pending(phase: str | None) -> None:
    obj = plan_object(SCALE_TO_ZERO, None if phase is None else {"phase": phase})
    assert overrides.actions(obj) == {"approve": phase != "pending-approval"}


def test_approve_sets_status_phase_approved_and_nothing_else() -> None:
    obj = plan_object(MIXED, {"phase": "pending-approval"}, owner_uid=str(uuid.uuid4()))
    result = overrides.run_action(obj, "approve")
    expected = in_cluster(obj, 1, {"phase": "approved"})
    assert result == expected


@pytest.mark.parametrize("phase", [p for p in PHASES if p != "pending-approval"], ids=str)
def test_approve_refuses_every_other_phase(phase: str | None) -> None:
    # Argo CD's API runs an action even when discovery disabled it: the action itself must refuse.
    obj = plan_object(SCALE_TO_ZERO, None if phase is None else {"phase": phase})
    with pytest.raises(overrides.ActionFailed) as refused:
        overrides.run_action(obj, "approve")
    assert f"MigrationPlan {obj['metadata']['name']} is {phase or 'without a phase'}: only a pending-approval plan " \
           "can be approved" in str(refused.value)


STAMP = {"approvedBy": "alice@example.com", "approvedAt": "2026-11-30T12:00:00Z"}
# How the cluster reaches each plan phase: the CRD's CEL rules allow only the phase machine's transitions
# (approved only from pending-approval, rejected only for platform scope, no phase removed); the
# approver's stamp is the admission webhook's, not the CRD's.
PLAN_PATHS: dict[str, list[dict[str, Any]]] = {
    "approved": [{"phase": "pending-approval"}],
    "applied": [{"phase": "pending-approval"}, {"phase": "approved", **STAMP}],
    "superseded": [{"phase": "pending-approval"}],
    "rejected": [{"phase": "pending-approval"}],
}


@pytest.mark.testbed
def test_every_status_above_is_one_the_crds_accept(kube: KubeTestBed, apprafter_crds: list[str]) -> None:
    """The hand-written statuses are the operator's shapes: the typed status schema stores each unchanged, and
    each plan status is reachable through the phase machine the CRD enforces (a fresh plan per status)."""
    namespace = f"health-{uuid.uuid4().hex[:8]}"
    cr = rendered_cr(namespace=namespace)
    app = kube.apply(cr)
    for status in (c[2] for c in APPLICATION_CASES):
        if status is not None:
            assert write_status(kube, app, status, replace=True)["status"] == status
    for i, status in enumerate(c[1] for c in PLAN_CASES):
        if status is None:
            continue
        plan = kube.apply(_fresh_plan(cr, status["phase"], f"p{i}-{namespace}"))
        for step in PLAN_PATHS.get(status["phase"], []):
            write_status(kube, plan, step)
        stored = write_status(kube, plan, status)["status"]
        assert {k: stored.get(k) for k in status} == status


def _fresh_plan(cr: dict[str, Any], phase: str, name: str) -> dict[str, Any]:
    """An application-scope plan from the classifier (a platform-scope one for `rejected`), under its own name."""
    if phase == "rejected":
        obj = migration_plan(roll_up_platform([PlatformChange("cnpg", "version", "1.24.1", "1.25.0",
                                                              "data-migration", "1.25.0: data-migration")],
                                              "1.5.0", "1.6.0"))
    else:
        obj = migration_plan(gated_plan(cr, edited(cr, replicas=0)))
    obj["metadata"]["name"] = name
    return obj


def write_status(kube: KubeTestBed, obj: dict[str, Any], status: dict[str, Any],
                 replace: bool = False) -> dict[str, Any]:
    """Write obj's status through the status subresource (a JSON merge patch; `replace` clears it first)."""
    meta = obj["metadata"]
    info = kube.resource_for(obj["apiVersion"], obj["kind"])
    path = info.path(meta["name"], meta["namespace"]) + "/status"
    for body in ({"status": None}, {"status": status}) if replace else ({"status": status},):
        resp = kube.http.patch(path, json=body, headers={"Content-Type": "application/merge-patch+json"})
        if resp.status_code >= 300:
            raise _rejected(resp, f"{obj['kind']} {meta['name']} status")
    result: dict[str, Any] = resp.json()
    return result
