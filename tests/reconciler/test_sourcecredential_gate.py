"""The SourceCredential gate decided without a cluster (lifecycle.credential_gate, compatibility.gate): which coverage
changes take something from an Application and wait for a plan, the plan's hash by the documented formula, and
approval binding the change."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from compatibility.gate import APPLIED, APPROVED, PENDING, SUPERSEDED, ExistingPlan, decide_credential
from compatibility.migrationplan import CREDENTIAL_LABEL
from lifecycle.credential_gate import (
    Coverage,
    User,
    applied_coverage,
    coverage_of,
    credential_plan,
    image_users,
    repository_users,
)
from lifecycle.sourcecredential import read

BASE = Coverage(("https://github.com/myorg/",), ("ghcr.io/myorg",))
USERS = [User("Argo CD Application argocd/shop", "git", "https://github.com/MyOrg/shop.git"),
         User("Application team/shop", "registry", "ghcr.io/myorg/shop:1.2")]


def documented_hash(changes: list[dict[str, Any]], name: str) -> str:
    """docs/plan.md's formula, written out independently of compatibility.plan."""
    encoded = sorted(json.dumps({k: c.get(k) for k in ("rule", "field", "from", "to")}, sort_keys=True,
                                separators=(",", ":")) for c in changes)
    subject = json.dumps({"type": "credential", "name": name}, sort_keys=True, separators=(",", ":"))
    payload = '{"changes":[' + ",".join(encoded) + '],"subject":' + subject + "}"
    return "sha256:" + hashlib.sha256(payload.encode()).hexdigest()


def rules(plan: Any) -> list[tuple[str, str]]:
    return sorted((c.rule, c.classification) for c in plan.changes)


def test_nothing_applied_yet_has_nothing_to_take_away() -> None:
    assert credential_plan("myorg", "apprafter-system", None, BASE, USERS) is None
    assert credential_plan("myorg", "apprafter-system", None, None, USERS) is None


def test_a_rotation_or_a_widening_is_soft() -> None:
    assert not credential_plan("myorg", "ns", BASE, BASE, USERS).changes  # type: ignore[union-attr]
    wider = Coverage(("https://github.com/myorg/", "https://gitlab.com/myorg/"), ("ghcr.io",))
    plan = credential_plan("myorg", "ns", BASE, wider, USERS)
    assert plan is not None and not plan.gated and rules(plan) == [("AR-SC000", "safe")] * 2


@pytest.mark.parametrize(("desired", "rule"), [
    (Coverage(("https://github.com/myorg/other/",), BASE.registry), "AR-SC001"),  # narrowed
    (Coverage(None, BASE.registry), "AR-SC001"),  # the git half removed
    (Coverage(BASE.git, ("ghcr.io/myorg/other",)), "AR-SC002"),  # narrowed
    (Coverage(BASE.git, ("docker.io/myorg",)), "AR-SC002"),  # the host replaced
])
def test_taking_coverage_from_an_application_is_breaking(desired: Coverage, rule: str) -> None:
    plan = credential_plan("myorg", "ns", BASE, desired, USERS)
    assert plan is not None and plan.gated and plan.primary == "breaking"
    [gated] = plan.gated_changes
    assert gated.rule == rule and ("shop" in gated.reason)
    expected = [{"rule": c.rule, "field": c.field, "from": c.from_, "to": c.to} for c in plan.gated_changes]
    assert plan.approved_spec_hash == documented_hash(expected, "myorg")


def test_removing_what_nobody_matches_is_soft() -> None:
    two = Coverage(BASE.git, ("ghcr.io/myorg", "quay.io/myorg"))
    plan = credential_plan("myorg", "ns", two, BASE, USERS)
    assert plan is not None and not plan.gated and rules(plan) == [("AR-SC000", "safe")]
    plan = credential_plan("myorg", "ns", BASE, Coverage(None, BASE.registry), [USERS[1]])
    assert plan is not None and not plan.gated and rules(plan) == [("AR-SC000", "safe")]


def test_deleting_while_matched_gates_and_names_the_deletion() -> None:
    plan = credential_plan("myorg", "ns", BASE, None, USERS)
    assert plan is not None and plan.gated
    assert rules(plan) == [("AR-SC001", "breaking"), ("AR-SC002", "breaking"), ("AR-SC003", "breaking")]
    assert {c.to for c in plan.changes if c.rule != "AR-SC003"} == {None}
    unmatched = credential_plan("myorg", "ns", BASE, None, [])
    assert unmatched is not None and not unmatched.gated


def test_the_hash_binds_the_change_not_who_matches() -> None:
    narrowed = Coverage(BASE.git, ("ghcr.io/myorg/other",))
    one = credential_plan("myorg", "ns", BASE, narrowed, USERS)
    two = credential_plan("myorg", "ns", BASE, narrowed, [*USERS, User("Application b/x", "registry",
                                                                      "ghcr.io/myorg/x")])
    other = credential_plan("yourorg", "ns", BASE, narrowed, USERS)
    assert one and two and other and one.approved_spec_hash == two.approved_spec_hash != other.approved_spec_hash


def test_coverage_as_the_status_records_it() -> None:
    obj = {"metadata": {"name": "myorg", "namespace": "ns"},
           "spec": {"git": {"backend": {}, "repoPrefixes": ["github.com/myorg/", "http://git.internal/x/"]},
                    "registry": {"backend": {}, "hosts": ["ghcr.io/myorg/"]}}}
    wanted = coverage_of(read(obj))
    assert wanted == Coverage(("http://git.internal/x/", "https://github.com/myorg/"), ("ghcr.io/myorg",))
    assert applied_coverage({"git": {"repoPrefixes": list(wanted.git or [])},  # what credential_outputs writes
                             "registry": {"hosts": ["ghcr.io/myorg"]}}) == wanted
    assert applied_coverage({"observedGeneration": 1}) is None
    assert applied_coverage({"registry": {"hosts": ["x.io", 3]}}) == Coverage(None, ("x.io",))


def test_users_from_argo_cd_and_deployments() -> None:
    argo = [{"metadata": {"name": "a", "namespace": "argocd"},
             "spec": {"source": {"repoURL": "https://github.com/myorg/a"},
                      "sources": [{"repoURL": "https://github.com/myorg/b"}, {"chart": "x"}]}}]
    assert [u.target for u in repository_users(argo)] == ["https://github.com/myorg/a", "https://github.com/myorg/b"]
    assert image_users([("Application n/x", "nginx")]) == [User("Application n/x", "registry", "nginx")]
    # Docker Hub names are normalised before they are compared with a host key
    plan = credential_plan("c", "ns", Coverage(None, ("docker.io/library",)), Coverage(None, ("docker.io/other",)),
                           image_users([("Application n/x", "nginx:1")]))
    assert plan is not None and plan.gated


def existing(plan: Any, phase: str, owner: str = "uid-1", hash_: str | None = None) -> ExistingPlan:
    from compatibility.migrationplan import name

    return ExistingPlan(name(plan), hash_ or plan.approved_spec_hash, phase, owner)


def test_the_decision_holds_until_this_credentials_plan_is_approved() -> None:
    plan = credential_plan("myorg", "apprafter-system", BASE, None, USERS)
    assert plan is not None
    held = decide_credential(plan, [], owner_uid="uid-1")
    assert held.outcome == "hold" and held.migration_plan is not None
    document = held.migration_plan
    assert document["metadata"]["name"].startswith("myorg-credential-")
    assert document["metadata"]["namespace"] == "apprafter-system"
    assert document["metadata"]["labels"][CREDENTIAL_LABEL] == "myorg"
    assert document["spec"]["scope"] == {"type": "credential",
                                         "credential": {"ref": {"name": "myorg", "namespace": "apprafter-system"}}}
    assert document["spec"]["trigger"]["approvedSpecHash"] == plan.approved_spec_hash
    [owner] = document["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("SourceCredential", "uid-1", True)
    assert [(p.phase, p.recreate) for p in held.phases] == [(PENDING, False)]

    assert decide_credential(plan, [existing(plan, PENDING)], owner_uid="uid-1").outcome == "hold"
    approved = decide_credential(plan, [existing(plan, APPROVED)], owner_uid="uid-1")
    assert approved.outcome == "apply-approved" and approved.consumed == held.waiting_for
    # another credential's, or a forged hash: not an approval of this change
    for forged in (existing(plan, APPROVED, owner="uid-2"), existing(plan, APPROVED, hash_="sha256:" + "0" * 64)):
        again = decide_credential(plan, [forged], owner_uid="uid-1")
        assert again.outcome == "hold" and [p.recreate for p in again.phases] == [True]
    # applied before (the same change proposed again): a new plan
    assert [p.recreate for p in decide_credential(plan, [existing(plan, APPLIED)], owner_uid="uid-1").phases] == [True]


def test_undoing_the_change_supersedes_the_plan() -> None:
    plan = credential_plan("myorg", "ns", BASE, None, USERS)
    assert plan is not None
    undone = decide_credential(credential_plan("myorg", "ns", BASE, BASE, USERS), [existing(plan, PENDING)],
                               owner_uid="uid-1")
    assert undone.outcome == "apply" and [p.phase for p in undone.phases] == [SUPERSEDED]


def credential_object(name: str, hosts: list[str], valid: tuple[str, str] | None) -> dict[str, Any]:
    conditions = [{"type": "Valid", "status": valid[0], "reason": valid[1], "message": "refused: HTTP 401"}] \
        if valid else []
    return {"metadata": {"name": name, "namespace": "apprafter-system"},
            "spec": {"registry": {"backend": {"sealedSecretRef": {"name": "x"}}, "hosts": hosts}},
            "status": {"registry": {"conditions": conditions, "hosts": hosts}}}


def test_an_image_covered_only_by_invalid_credentials_is_named() -> None:
    from lifecycle.credential_checks import CREDENTIAL_CONDITION, image_credentials

    refused = credential_object("myorg", ["ghcr.io/myorg/"], ("False", "Invalid"))
    condition = image_credentials("ghcr.io/myorg/shop:1", [refused])
    assert condition is not None and (condition.type, condition.status, condition.reason) == (
        CREDENTIAL_CONDITION, "False", "CredentialInvalid")
    assert "apprafter-system/myorg" in condition.message and "HTTP 401" not in condition.message
    working = credential_object("other", ["ghcr.io/"], ("True", "Valid"))
    unverified = credential_object("other", ["ghcr.io/"], ("Unknown", "Unverified"))
    assert image_credentials("ghcr.io/myorg/shop:1", [refused, working]) is None  # another one may work
    assert image_credentials("ghcr.io/myorg/shop:1", [refused, unverified]) is None
    assert image_credentials("ghcr.io/elsewhere/shop:1", [refused]) is None  # not covered
    assert image_credentials(None, [refused]) is None
    deleting = {**refused, "metadata": {**refused["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    assert image_credentials("ghcr.io/myorg/shop:1", [deleting]) is None
