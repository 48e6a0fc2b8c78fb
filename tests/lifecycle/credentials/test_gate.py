"""The SourceCredential gate decided without a cluster (lifecycle.credentials.gate, compatibility.gate): which coverage
changes take something from an Application and wait for a plan, the plan's hash by the documented formula, and
approval binding the change."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compatibility.gate import APPLIED, APPROVED, PENDING, REJECTED, SUPERSEDED, ExistingPlan, decide_credential
from compatibility.migrationplan import CREDENTIAL_LABEL
from lifecycle.credentials.coverage import Coverage, User, applied_coverage, coverage_of, image_users, repository_users
from lifecycle.credentials.gate import credential_plan
from lifecycle.credentials.spec import read

BASE = Coverage(("https://github.com/myorg/",), ("ghcr.io/myorg",))
USERS = [User("Argo CD Application argocd/shop", "git", "https://github.com/MyOrg/shop.git"),
         User("Application team/shop", "registry", "ghcr.io/myorg/shop:1.2", "team")]


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
                                                                      "ghcr.io/myorg/x", "b")])
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
    assert image_users([("Application n/x", "nginx", "n")]) == [User("Application n/x", "registry", "nginx", "n")]
    # Docker Hub names are normalised before they are compared with a host key
    plan = credential_plan("c", "ns", Coverage(None, ("docker.io/library",)), Coverage(None, ("docker.io/other",)),
                           image_users([("Application n/x", "nginx:1", "n")]))
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


def test_a_rejected_plan_stands_and_the_change_waits() -> None:
    """A credential-scope plan has no reject (the CRD's CEL rules and the webhook refuse it); should one be rejected
    all the same, the operator never overwrites a person's verdict by creating the plan anew: the change waits, as
    an Application's does, until the coverage is put back."""
    plan = credential_plan("myorg", "ns", BASE, None, USERS)
    assert plan is not None
    d = decide_credential(plan, [existing(plan, REJECTED)], owner_uid="uid-1")
    assert (d.outcome, d.phases, d.waiting_for) == ("hold", (), existing(plan, REJECTED).name)


def test_undoing_the_change_supersedes_the_plan() -> None:
    plan = credential_plan("myorg", "ns", BASE, None, USERS)
    assert plan is not None
    undone = decide_credential(credential_plan("myorg", "ns", BASE, BASE, USERS), [existing(plan, PENDING)],
                               owner_uid="uid-1")
    assert undone.outcome == "apply" and [p.phase for p in undone.phases] == [SUPERSEDED]


# --- the registry half's namespaces (spec.registry.namespaces) ------------------------------------------------------

SCOPED = Coverage(BASE.git, BASE.registry, ("team",))
OTHER = User("Application other/shop", "registry", "ghcr.io/myorg/shop:1.2", "other")


def test_a_scope_that_leaves_a_served_namespace_out_waits_for_a_plan() -> None:
    # set where it was absent (every namespace) while an Application elsewhere runs a covered image
    plan = credential_plan("myorg", "ns", BASE, SCOPED, [*USERS, OTHER])
    assert plan is not None and plan.gated and rules(plan) == [("AR-SC004", "breaking")]
    [change] = plan.changes
    assert (change.field, change.from_, change.to) == ("registry.namespaces", None, ["team"])
    assert "Application other/shop" in change.reason and "team/shop" not in change.reason
    # a namespace removed from the list
    wide = SCOPED._replace(namespaces=("other", "team"))
    narrowed = credential_plan("myorg", "ns", wide, SCOPED, [*USERS, OTHER])
    assert narrowed is not None and rules(narrowed) == [("AR-SC004", "breaking")]
    assert (narrowed.changes[0].from_, narrowed.changes[0].to) == (["other", "team"], ["team"])


def test_a_scope_change_nobody_loses_by_and_a_widening_are_soft() -> None:
    assert rules(credential_plan("myorg", "ns", BASE, SCOPED, USERS)) == [("AR-SC000", "safe")]  # only team's
    for wider in (SCOPED._replace(namespaces=("other", "team")), BASE):
        plan = credential_plan("myorg", "ns", SCOPED, wider, [*USERS, OTHER])
        assert plan is not None and not plan.gated and rules(plan) == [("AR-SC000", "safe")]
    assert not credential_plan("myorg", "ns", SCOPED, SCOPED, [*USERS, OTHER]).changes  # type: ignore[union-attr]


def test_hosts_and_deletion_count_only_the_namespaces_the_half_served() -> None:
    # OTHER never had the pull secret: narrowing the hosts away from its image or deleting takes nothing from it
    narrowed = credential_plan("myorg", "ns", SCOPED, SCOPED._replace(registry=("ghcr.io/myorg/other",)), [OTHER])
    assert narrowed is not None and not narrowed.gated
    deleted = credential_plan("myorg", "ns", SCOPED, None, [OTHER])
    assert deleted is not None and not deleted.gated
    # the half removed: its scope goes with it, no change of its own
    removed = credential_plan("myorg", "ns", SCOPED, Coverage(BASE.git, None), USERS)
    assert removed is not None and rules(removed) == [("AR-SC002", "breaking")]


def test_the_applied_scope_is_read_back_from_the_status() -> None:
    from lifecycle.credentials.assess import status_fields
    from lifecycle.credentials.spec import Backend, Credential, Half

    scoped = Credential("myorg", None, Half(Backend("x", None), ("ghcr.io/myorg/",), ("b", "a")))
    fields = status_fields(scoped, [], [])
    assert fields["registry"] == {"hosts": ["ghcr.io/myorg"], "namespaces": ["a", "b"]}
    assert applied_coverage(fields) == coverage_of(scoped) == Coverage(None, ("ghcr.io/myorg",), ("a", "b"))
    unscoped = scoped._replace(registry=scoped.registry._replace(namespaces=None))  # type: ignore[union-attr]
    assert "namespaces" not in status_fields(unscoped, [], [])["registry"]
    # a status written before the field existed applied the half everywhere
    assert applied_coverage({"registry": {"hosts": ["ghcr.io/myorg"]}}) == Coverage(None, ("ghcr.io/myorg",), None)


_NAMESPACES = ("a", "b", "c")
_HOSTS = ("ghcr.io/myorg", "ghcr.io/myorg/team", "quay.io/x")
_scopes = st.one_of(st.none(), st.lists(st.sampled_from(_NAMESPACES), min_size=1, unique=True).map(
    lambda names: tuple(sorted(names))))
_host_lists = st.lists(st.sampled_from(_HOSTS), min_size=1, unique=True).map(lambda hosts: tuple(sorted(hosts)))
_users = st.lists(st.builds(lambda ns, image: User(f"Application {ns}/{image}", "registry", image, ns),
                            st.sampled_from(_NAMESPACES),
                            st.sampled_from(("ghcr.io/myorg/app:1", "ghcr.io/myorg/team/app:1", "quay.io/x/y:2",
                                             "nginx:1"))), max_size=6)


def _served(coverage: Coverage | None, user: User) -> bool:
    """Written out apart from credential_gate: the user's image under a host key and its namespace in the scope."""
    if coverage is None or coverage.registry is None:
        return False
    repository = user.target.rsplit(":", 1)[0]
    return (any(repository == key or repository.startswith(key + "/") for key in coverage.registry)
            and (coverage.namespaces is None or user.namespace in coverage.namespaces))


@given(_host_lists, _scopes, st.one_of(st.none(), st.tuples(_host_lists, _scopes)), _users)
@settings(max_examples=300, deadline=None)
def test_a_registry_change_is_gated_exactly_when_someone_served_loses_the_pull_secret(
        hosts: tuple[str, ...], scope: tuple[str, ...] | None,
        after: tuple[tuple[str, ...], tuple[str, ...] | None] | None, users: list[User]) -> None:
    baseline = Coverage(None, hosts, scope)
    desired = Coverage(None, *after) if after is not None else None
    plan = credential_plan("c", "ns", baseline, desired, users)
    assert plan is not None
    losers = {u.who for u in users if _served(baseline, u) and not _served(desired, u)}
    assert plan.gated == bool(losers)
    named = " ".join(c.reason for c in plan.gated_changes)
    assert all(who in named for who in sorted(losers)[:5])
