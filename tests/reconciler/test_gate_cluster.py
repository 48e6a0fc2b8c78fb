"""The MigrationPlan gate through the real API server and `apprafter operator`: every application rule family
holds on the last applied version with the plan `apprafter plan` prints, and applies only after approval."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from compatibility.application import deployment
from compatibility.inputs import parse_cr
from controller_runtime.compare import covers
from renderer.render import render_loaded
from tests.reconciler.helpers import (
    API,
    BASE,
    apply,
    children,
    claims_when_created,
    condition,
    cr,
    edit,
    events,
    fresh_namespace,
    plan_phase,
    plans,
    status,
    versions,
    wait,
    wait_phase,
    write_status,
)
from tests.reconciler.operator_proc import Operator
from tests.renderer.helpers import run_cli
from tests.testbed.kube import KubeTestBed

pytestmark = pytest.mark.testbed

X = BASE["expose"]
E = BASE["env"]
FAMILIES: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
    ("need-removed", "AR-DM001", BASE, edit(needs={"pg": BASE["needs"]["pg"]})),
    ("need-major-version", "AR-DM003", BASE, edit(needs={"pg": {"size": "small", "version": "17"}, "redis": {}})),
    ("public-hostname-changed", "AR-RR001", edit(expose={**X, "hostname": "a.example.com"}),
     edit(expose={**X, "hostname": "b.example.com"})),
    ("network-narrowed", "AR-RR002", BASE, edit(expose={"port": 8080, "network": "internal"})),
    ("scale-to-zero", "AR-RR003", BASE, edit(replicas=0)),
    ("env-reference-removed", "AR-RR004", BASE, edit(env={"LOG_LEVEL": "info", "API_KEY": E["API_KEY"]})),
    ("env-reference-rewired", "AR-RR005", BASE, edit(env={**E, "DATABASE_URL": {"claim": "redis/url"}})),
    ("secret-added", "AR-SB001", BASE, edit(env={**E, "TOKEN": {"secret": "other/token"}})),
    ("reference-downgraded-to-literal", "AR-SB002", BASE, edit(env={**E, "API_KEY": "hunter2"})),
    ("secret-retargeted", "AR-SB003", BASE, edit(env={**E, "API_KEY": {"secret": "vendor/other"}})),
    ("network-escalated", "AR-SB004", edit(expose={"port": 8080}), BASE),
    ("public-hostname-added", "AR-SB005", BASE, edit(expose={**X, "hostname": "new.example.com"})),
    ("public-port-retargeted", "AR-SB006", BASE, edit(expose={**X, "port": 9090})),
    ("image-resolve-relaxed", "AR-SB007", BASE, edit(imagePolicy={"resolve": "digest"})),
    ("image-repository-changed", "AR-SB008", BASE, edit(image="ghcr.io/evil/demo:1.0.0")),
]


def cli_plan(tmp_path: Path, before: dict[str, Any], after: dict[str, Any], namespace: str) -> dict[str, Any]:
    """What `apprafter plan --format json` prints for the same two CRs."""
    (tmp_path / "before.json").write_text(json.dumps(before))
    (tmp_path / "after.json").write_text(json.dumps(after))
    result = run_cli("plan", "--from", str(tmp_path / "before.json"), "--to", str(tmp_path / "after.json"),
                     "--env", "prod", "--format", "json", "--namespace", namespace)
    assert result.returncode == 0, result.stderr
    out: dict[str, Any] = json.loads(result.stdout)
    return out


def rendered(obj: dict[str, Any], namespace: str) -> dict[tuple[str, str], dict[str, Any]]:
    """The children the renderer makes of a CR (what `apprafter render --mode manifests` prints)."""
    loaded = parse_cr(json.dumps(obj), "cr.json", strict_json=True)
    return {(o["kind"], o["metadata"]["name"]): o
            for o in render_loaded(loaded, "prod", "manifests", namespace).objects}


def assert_children_are(bed: KubeTestBed, namespace: str, obj: dict[str, Any]) -> None:
    live, want = children(bed, namespace), rendered(obj, namespace)
    assert sorted(live) == sorted(want)
    for key, desired in want.items():
        assert covers(live[key], desired), f"{key} differs from the render"


def deployed(bed: KubeTestBed, namespace: str, obj: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """Apply a CR as a first deployment and wait until it is Ready (playing the claims' provider)."""
    apply(bed, obj)
    needs = obj["spec"]["base"].get("needs") or {}
    if needs:
        claims_when_created(bed, namespace, [f"demo-{n}" for n in needs])
    wait_phase(bed, namespace, "Ready")
    return children(bed, namespace)


def awaiting(bed: KubeTestBed, namespace: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The status and the MigrationPlan of an Application held for approval."""
    st = wait_phase(bed, namespace, "AwaitingMigrationApproval")
    [plan] = plans(bed, namespace)
    assert st["migrationPlan"] == plan["metadata"]["name"]
    wait(f"{plan['metadata']['name']} pending", lambda: plan_phase(bed, namespace, st["migrationPlan"])
         == "pending-approval" or None)
    return st, plan


@pytest.mark.parametrize(("family", "rule", "before", "after"), FAMILIES, ids=[f[0] for f in FAMILIES])
def test_a_gated_change_waits_for_approval_then_applies(bed: KubeTestBed, operator: Operator, tmp_path: Path,
                                                       family: str, rule: str, before: dict[str, Any],
                                                       after: dict[str, Any]) -> None:
    ns = fresh_namespace(bed, "gate")
    old, new = cr(ns, before), cr(ns, after)
    kids_before = deployed(bed, ns, old)
    applied_before = status(bed, ns)["lastAppliedSpec"]
    assert applied_before == deployment(old, "prod").spec

    apply(bed, new)
    st, plan = awaiting(bed, ns)
    expected = cli_plan(tmp_path, old, new, ns)
    assert expected["gated"] and rule in {c["rule"] for c in expected["changes"]}
    assert plan["spec"]["trigger"]["approvedSpecHash"] == expected["approvedSpecHash"]
    assert plan["metadata"]["name"] == expected["migrationPlan"]["metadata"]["name"]
    assert plan["spec"] == expected["migrationPlan"]["spec"]
    [owner] = plan["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "Application", "demo", status and bed.get(API, "Application", "demo", ns)["metadata"]["uid"], True)
    ready = condition(st, "Ready")
    assert ready and ready["status"] == "False" and ready["reason"] == "AwaitingMigrationApproval"
    assert plan["metadata"]["name"] in ready["message"]
    approved = condition(st, "MigrationApproved")
    assert approved and approved["status"] == "False"
    assert st["lastAppliedSpec"] == applied_before
    assert versions(children(bed, ns)) == versions(kids_before), "children changed while the plan waits"
    assert events(bed, ns, "MigrationPlanCreated")

    result = run_cli("migration", "approve", plan["metadata"]["name"], "-n", ns, "--kubeconfig", str(bed.kubeconfig))
    assert result.returncode == 0, result.stderr
    assert f"migrationplan/{plan['metadata']['name']} approved (namespace {ns})" in result.stdout
    if new["spec"]["base"].get("needs", {}).keys() - old["spec"]["base"].get("needs", {}).keys():
        claims_when_created(bed, ns, [f"demo-{n}" for n in new["spec"]["base"]["needs"]])
    st = wait_phase(bed, ns, "Ready")
    assert st["lastAppliedSpec"] == deployment(new, "prod").spec
    assert st["appliedMigrationPlan"] == plan["metadata"]["name"]
    wait("plan applied", lambda: plan_phase(bed, ns, plan["metadata"]["name"]) == "applied" or None)
    assert condition(status(bed, ns), "MigrationApproved")["status"] == "True"  # type: ignore[index]
    assert_children_are(bed, ns, new)
    assert len(plans(bed, ns)) == 1


def test_a_tampered_approved_spec_hash_is_refused_by_the_api_server(bed: KubeTestBed, operator: Operator) -> None:
    ns = fresh_namespace(bed, "tamper")
    deployed(bed, ns, cr(ns))
    apply(bed, cr(ns, edit(image="ghcr.io/evil/demo:1.0.0")))
    _, plan = awaiting(bed, ns)
    info = bed.resource_for(API, "MigrationPlan")
    forged = {"spec": {"trigger": {"approvedSpecHash": "sha256:" + "0" * 64}}}
    resp = bed.http.patch(info.path(plan["metadata"]["name"], ns), params={"fieldManager": "intruder"},
                          content=json.dumps(forged).encode(), headers={"Content-Type": "application/merge-patch+json"})
    assert resp.status_code == 422 and "immutable" in resp.text  # the CRD's CEL rule, webhook or not


def test_a_forged_approved_plan_is_never_applied(bed: KubeTestBed, operator: Operator, tmp_path: Path) -> None:
    ns = fresh_namespace(bed, "forged")
    kids = deployed(bed, ns, cr(ns))
    uid = bed.get(API, "Application", "demo", ns)["metadata"]["uid"]  # type: ignore[index]
    new = cr(ns, edit(image="ghcr.io/evil/demo:1.0.0"))
    expected = cli_plan(tmp_path, cr(ns), new, ns)["migrationPlan"]
    name = expected["metadata"]["name"]
    forged = {**expected, "spec": {**expected["spec"], "trigger": {
        **expected["spec"]["trigger"], "approvedSpecHash": "sha256:" + "0" * 64}}}
    forged["metadata"] = {**expected["metadata"], "ownerReferences": [{
        "apiVersion": API, "kind": "Application", "name": "demo", "uid": uid, "controller": True}]}
    operator.signal(signal.SIGSTOP)  # the forgery is in place, approved, before the operator sees the change
    try:
        bed.apply(forged, field_manager="intruder")
        write_status(bed, "MigrationPlan", name, ns, {"phase": "pending-approval"}, "intruder")
        write_status(bed, "MigrationPlan", name, ns, {"phase": "approved"}, "intruder")
        apply(bed, new)
    finally:
        operator.signal(signal.SIGCONT)
    st = wait_phase(bed, ns, "AwaitingMigrationApproval")
    assert st["migrationPlan"] == name

    def recreated() -> dict[str, Any] | None:
        obj = bed.get(API, "MigrationPlan", name, ns) or {}
        return obj if (obj.get("status") or {}).get("phase") == "pending-approval" else None

    plan = wait("the plan created anew", recreated)
    assert plan["spec"]["trigger"]["approvedSpecHash"] == expected["spec"]["trigger"]["approvedSpecHash"]
    assert "created anew" in plan["status"]["message"]
    assert events(bed, ns, "MigrationPlanRecreated")
    assert versions(children(bed, ns)) == versions(kids)
    assert status(bed, ns)["lastAppliedSpec"] == deployment(cr(ns), "prod").spec


def test_the_same_change_proposed_again_needs_a_new_approval(bed: KubeTestBed, operator: Operator) -> None:
    ns = fresh_namespace(bed, "again")
    deployed(bed, ns, cr(ns))
    moved = cr(ns, edit(image="ghcr.io/acme/other:1.0.0"))
    for target in (moved, cr(ns)):  # there and back: each direction is gated and approved once
        apply(bed, target)
        st = wait_phase(bed, ns, "AwaitingMigrationApproval")
        wait("pending", lambda st=st: plan_phase(bed, ns, st["migrationPlan"]) == "pending-approval" or None)
        write_status(bed, "MigrationPlan", st["migrationPlan"], ns, {"phase": "approved"}, "approver")
        wait_phase(bed, ns, "Ready")
    apply(bed, moved)  # the first change again: its plan was applied, so it is created anew and waits
    st = wait_phase(bed, ns, "AwaitingMigrationApproval")
    wait("a new pending plan", lambda: plan_phase(bed, ns, st["migrationPlan"]) == "pending-approval" or None)
    assert len(plans(bed, ns)) == 2
    assert events(bed, ns, "MigrationPlanRecreated")


def test_an_edit_after_approval_is_not_applied_and_gets_a_fresh_plan(bed: KubeTestBed, operator: Operator) -> None:
    ns = fresh_namespace(bed, "launder")
    kids = deployed(bed, ns, cr(ns))
    apply(bed, cr(ns, edit(replicas=0)))
    _, first = awaiting(bed, ns)
    operator.signal(signal.SIGSTOP)  # approve, then change the spec before the operator acts
    try:
        assert run_cli("migration", "approve", first["metadata"]["name"], "-n", ns, "--kubeconfig",
                       str(bed.kubeconfig)).returncode == 0
        apply(bed, cr(ns, edit(replicas=0, image="ghcr.io/evil/demo:1.0.0")))
    finally:
        operator.signal(signal.SIGCONT)
    wait("a second plan", lambda: len(plans(bed, ns)) == 2 or None)
    st = wait_phase(bed, ns, "AwaitingMigrationApproval")
    by_name = {p["metadata"]["name"]: p for p in plans(bed, ns)}
    second = st["migrationPlan"]
    assert second != first["metadata"]["name"]
    wait("first superseded", lambda: plan_phase(bed, ns, first["metadata"]["name"]) == "superseded" or None)
    old = bed.get(API, "MigrationPlan", first["metadata"]["name"], ns) or {}
    assert old["status"]["supersededBy"] == second
    assert {c["rule"] for c in by_name[second]["spec"]["changes"]} >= {"AR-RR003", "AR-SB008"}
    assert versions(children(bed, ns)) == versions(kids)


def test_a_revert_supersedes_the_plan_and_the_application_is_ready_again(bed: KubeTestBed, operator: Operator) -> None:
    ns = fresh_namespace(bed, "revert")
    kids = deployed(bed, ns, cr(ns))
    apply(bed, cr(ns, edit(needs={"pg": BASE["needs"]["pg"]})))
    _, plan = awaiting(bed, ns)
    apply(bed, cr(ns))  # git revert
    st = wait_phase(bed, ns, "Ready")
    wait("superseded", lambda: plan_phase(bed, ns, plan["metadata"]["name"]) == "superseded" or None)
    assert "migrationPlan" not in st
    assert condition(st, "MigrationApproved") is None
    assert versions(children(bed, ns)) == versions(kids)
    assert len(plans(bed, ns)) == 1


def test_a_new_claim_is_for_review_yet_applies_at_once_without_a_plan(bed: KubeTestBed, operator: Operator,
                                                                      tmp_path: Path) -> None:
    """AR-RV001 (class review): `plan` lists the new claim for review, and the operator applies it at once."""
    ns = fresh_namespace(bed, "claim")
    old, new = cr(ns, edit(needs={"pg": BASE["needs"]["pg"]})), cr(ns, BASE)  # redis added
    deployed(bed, ns, old)
    planned = cli_plan(tmp_path, old, new, ns)
    assert (planned["gated"], planned["primary"], planned["migrationPlan"]) == (False, "review", None)
    assert [(c["rule"], c["field"]) for c in planned["changes"]] == [("AR-RV001", "needs.redis")]
    apply(bed, new)
    claims_when_created(bed, ns, ["demo-pg", "demo-redis"])
    wanted = deployment(new, "prod").spec

    def applied() -> dict[str, Any] | None:
        st = status(bed, ns)
        return st if st.get("phase") == "Ready" and st.get("lastAppliedSpec") == wanted else None

    st = wait("the new claim applied", applied)
    assert st.get("migrationPlan") is None and plans(bed, ns) == []
    assert_children_are(bed, ns, new)


def test_soft_changes_apply_at_once_and_soft_destructive_ones_leave_an_event(bed: KubeTestBed,
                                                                           operator: Operator) -> None:
    ns = fresh_namespace(bed, "soft")
    deployed(bed, ns, cr(ns, edit(replicas=3)))
    softer = edit(replicas=2, image="ghcr.io/acme/demo:1.1.0", env={k: v for k, v in E.items() if k != "LOG_LEVEL"})
    apply(bed, cr(ns, softer))
    st = wait_phase(bed, ns, "Ready")
    assert st["lastAppliedSpec"] == deployment(cr(ns, softer), "prod").spec
    assert plans(bed, ns) == []
    [event] = wait("SoftDestructiveChange", lambda: events(bed, ns, "SoftDestructiveChange") or None)
    assert event["type"] == "Warning" and event["regarding"]["name"] == "demo"
    assert "replicas" in event["note"] and "env.LOG_LEVEL" in event["note"]
    assert "info" not in event["note"]  # the removed literal's value is never shown
    assert_children_are(bed, ns, cr(ns, softer))
