"""The PlatformStack pass's pure decisions on what issue 22 added: a fork's upstream (UpstreamAhead, never applied),
an upgrade the cluster's Kubernetes cannot run (refused, no plan, a plan made for another target superseded), value
overrides bounded and kept."""

from __future__ import annotations

from typing import Any

from compatibility.gate import APPLIED, PENDING, SUPERSEDED, PlatformDecision, PlatformPlan
from controller_runtime.errors import KubeError
from controller_runtime.outcomes import Done, Requeue
from lifecycle import platformstack as decisions
from lifecycle.stack_inputs import check_due, finding_of, memo_of
from platform_stack.check_result import Baseline, Check, Finding, Target, UpstreamNews
from platform_stack.classify import StackSnapshot, classify_stack, kubernetes_unmet
from platform_stack.errors import RegistryFailure, StackError, StackToolError
from platform_stack.resource import MAX_VALUES_BYTES, NAME, NAMESPACE, StackSpec, check, read_spec

DIGEST = "sha256:" + "a" * 64
RUNS = Baseline("1.1.0", DIGEST, "fork.example/acme/platform-stack")


def spec_of(document: dict[str, Any]) -> StackSpec:
    spec, problems = read_spec(document)
    assert spec is not None, problems
    return spec


def obj(**status: Any) -> dict[str, Any]:
    return {"metadata": {"name": NAME, "namespace": NAMESPACE, "generation": 3, "uid": "u"},
            "spec": {"source": {"repoURL": "oci://fork.example/acme/platform-stack",
                                "upstream": "oci://ghcr.io/apprafter/platform-stack"}},
            "status": status}


def result(news: UpstreamNews | None) -> Check:
    return Check("fork.example/acme/platform-stack", ("1.1.0", DIGEST), (), "1.1.0",
                 Target("1.1.0", DIGEST, "acme.pub", ()), None, None, DIGEST, upstream=news)


def applied(news: UpstreamNews | None, **status: Any) -> decisions.StackVerdict:
    return decisions.applied(obj(**status), spec_of(obj(**status)), RUNS, result(news),
                             PlatformDecision("apply", None), [], "2026-12-01T00:00:00Z")


def condition(verdict: decisions.StackVerdict, kind: str) -> Any:
    return next((c for c in verdict.status.conditions if c.type == kind), None)


def test_a_fork_reads_its_upstream_only_when_upstream_is_another_repository() -> None:
    spec = spec_of(obj())
    assert spec.upstream == "oci://ghcr.io/apprafter/platform-stack"
    assert spec.repository == "oci://fork.example/acme/platform-stack"
    same = obj()
    same["spec"]["source"]["upstream"] = "fork.example/acme/platform-stack/"  # one repository, spelt two ways
    assert spec_of(same).upstream is None
    del same["spec"]["source"]["repoURL"]
    assert spec_of(same).upstream is None


def test_a_newer_upstream_is_reported_and_never_the_target() -> None:
    verdict = applied(UpstreamNews("ghcr.io/apprafter/platform-stack", "2.0.0"))
    ahead = condition(verdict, "UpstreamAhead")
    assert (ahead.status, ahead.reason) == ("True", "NewerUpstream")
    assert "offers 2.0.0, the fork runs 1.1.0" in ahead.message and "nothing of upstream is applied" in ahead.message
    assert verdict.status.fields["upstreamVersion"] == "2.0.0"
    assert verdict.umbrella is not None and verdict.umbrella.version == "1.1.0"  # what runs stays the fork's
    assert verdict.status.fields["targetVersion"] == "1.1.0"
    [note] = [n for n in verdict.notes if n.reason == "UpstreamAhead"]
    assert note.text == condition(verdict, "UpstreamAhead").message and note.type == "Normal"
    # a first install (nothing ran before the check) compares upstream with what it applies
    first = decisions.applied(obj(), spec_of(obj()), None,
                              result(UpstreamNews("ghcr.io/apprafter/platform-stack", "2.0.0")),
                              PlatformDecision("apply", None), [], "2026-12-01T00:00:00Z")
    assert [n.reason for n in first.notes] == ["UpgradeApplied", "UpstreamAhead"]


def test_an_upstream_that_is_not_newer_or_cannot_be_read() -> None:
    same = applied(UpstreamNews("ghcr.io/apprafter/platform-stack", "1.1.0"))
    assert (condition(same, "UpstreamAhead").status, condition(same, "UpstreamAhead").reason) == ("False", "UpToDate")
    assert not [n for n in same.notes if n.reason == "UpstreamAhead"]
    down = applied(UpstreamNews("ghcr.io/apprafter/platform-stack", None, "registry ghcr.io unreachable"),
                   upstreamVersion="2.0.0")
    unknown = condition(down, "UpstreamAhead")
    assert (unknown.status, unknown.reason) == ("Unknown", "UpstreamUnavailable")
    assert "registry ghcr.io unreachable" in unknown.message
    assert down.status.fields["upstreamVersion"] == "2.0.0"  # the last version read stays
    assert condition(down, "Ready").reason == "Applied"  # the fork's own check is not upstream's to fail


def test_not_a_fork_has_no_upstream_condition_or_field() -> None:
    verdict = applied(None, upstreamVersion="2.0.0")
    assert condition(verdict, "UpstreamAhead") is None and verdict.status.fields["upstreamVersion"] is None


def snapshot(version: str, minimum: str) -> StackSnapshot:
    return StackSnapshot(version, minimum, {version: {"minimumKubernetesVersion": minimum, "components": {}}}, {})


def test_an_unmet_minimum_names_both_versions_and_stays_breaking_for_stack_classify() -> None:
    assert kubernetes_unmet(snapshot("3.0.0", "1.99.0"), "v1.34.4") == \
        "stack 3.0.0 needs Kubernetes >= 1.99.0, cluster runs v1.34.4"
    assert kubernetes_unmet(snapshot("3.0.0", "1.34.0"), "v1.34.4") is None
    verdict = classify_stack(snapshot("1.0.0", "1.30.0"), snapshot("3.0.0", "1.99.0"), "v1.34.4")
    assert verdict.classification == "breaking" and verdict.reasons == [
        "stack 3.0.0 needs Kubernetes >= 1.99.0, cluster runs v1.34.4"]


def test_a_refused_upgrade_keeps_what_runs_and_records_an_event() -> None:
    spec = spec_of(obj())
    finding = Finding("UnsupportedKubernetes", "stack 3.0.0 needs Kubernetes >= 1.99.0, cluster runs v1.34.4: "
                      "3.0.0 is not applied, 1.1.0 keeps running (upgrade the cluster, or pin a version it supports)",
                      retryable=False)
    refused = Check("fork.example/acme/platform-stack", ("1.1.0", DIGEST), (), "3.0.0", None, finding, None, DIGEST)
    verdict = decisions.found(obj(), spec, RUNS, finding, refused, "2026-12-01T00:00:00Z")
    assert verdict.umbrella == RUNS and verdict.automated
    ready = condition(verdict, "Ready")
    assert (ready.status, ready.reason, ready.message) == ("False", "UnsupportedKubernetes", finding.message)
    assert [(n.reason, n.type) for n in verdict.notes] == [("UnsupportedKubernetes", "Warning")]
    assert isinstance(verdict.outcome, Done) and "migrationPlan" not in verdict.status.fields


def test_a_refused_target_ends_the_wait_for_a_plan_made_for_another_target() -> None:
    waiting = obj(migrationPlan="platform-2-0-0", conditions=[
        {"type": "MigrationApproved", "status": "False", "reason": "AwaitingApproval",
         "message": "MigrationPlan platform-2-0-0 is pending-approval", "lastTransitionTime": "2026-12-01T00:00:00Z"}])
    plans = [PlatformPlan("platform-2-0-0", "hash", PENDING, "u", DIGEST, "sha256:" + "b" * 64, (True, None)),
             PlatformPlan("platform-1-9-0", "hash", APPLIED, "u", DIGEST, DIGEST, (True, None))]
    finding = Finding("UnsupportedKubernetes", "stack 3.0.0 needs Kubernetes >= 1.99.0, cluster runs v1.34.4", False)
    refused = Check("fork.example/acme/platform-stack", ("1.1.0", DIGEST), (), "3.0.0", None, finding, None, DIGEST)
    [phase] = decisions.refused_plans(refused, plans, RUNS)
    assert (phase.name, phase.phase) == ("platform-2-0-0", SUPERSEDED)
    assert "asks for 3.0.0, which this cluster's Kubernetes cannot run" in phase.message
    verdict = decisions.found(waiting, spec_of(waiting), RUNS, finding, refused, "2026-12-01T00:00:00Z")
    assert "migrationPlan" not in verdict.status.fields and condition(verdict, "MigrationApproved") is None
    # a finding that says nothing about the target (the registry is down) leaves the plan waiting
    down = Finding("RegistryUnavailable", "registry fork.example unreachable", retryable=True)
    unread = Check("fork.example/acme/platform-stack", (), (), None, None, down, None, DIGEST)
    assert decisions.refused_plans(unread, plans, RUNS) == ()
    kept = decisions.found(waiting, spec_of(waiting), RUNS, down, unread, "2026-12-01T00:00:00Z")
    assert kept.status.fields["migrationPlan"] == "platform-2-0-0"
    assert condition(kept, "MigrationApproved").reason == "AwaitingApproval"


def test_a_check_that_raised_is_retried_by_the_errors_retry_class() -> None:
    """A finding carries its retry class (made of an error: the error's): one that may pass by itself is retried
    with backoff and the check does not count; the spec's own problem waits for the spec to change."""
    for error, reason, retried in ((RegistryFailure("registry fork.example: unreachable"), "RegistryUnavailable", True),
                                   (StackToolError("helm: timed out"), "CheckFailed", True),
                                   (KubeError("forbidden", 403), "CheckFailed", False),
                                   (StackError("spec.values.tier: unknown"), "InvalidSpec", False)):
        finding = finding_of(error)
        assert (finding.reason, finding.retryable) == (reason, retried)
        verdict = decisions.found(obj(), spec_of(obj()), RUNS, finding)
        assert (isinstance(verdict.outcome, Requeue), verdict.remember) == (retried, not retried), error


def overrides(values: Any) -> dict[str, Any]:
    return {"metadata": {"name": NAME, "namespace": NAMESPACE}, "spec": {"overrides": {"keda": {"values": values}}}}


def test_override_values_are_bounded_in_size() -> None:
    assert check(overrides({"operator": {"replicaCount": 2}})) == []
    big = {"blob": "x" * MAX_VALUES_BYTES}
    [(field, message)] = check(overrides(big))
    assert field == "spec.overrides.keda.values" and f"at most {MAX_VALUES_BYTES}" in message
    spec, problems = read_spec(overrides(big))
    assert spec is None and problems[0][0] == "spec.overrides.keda.values"  # the controller acts on none of it


def test_a_spec_changed_while_the_repository_was_looked_at_is_looked_at_again_at_once() -> None:
    # The check looked at generation 2; its status write returned the object at generation 3 (the user's patch
    # landed meanwhile): the memo is the generation looked at, so the next pass checks generation 3 now.
    def at(generation: int) -> dict[str, Any]:
        return {"metadata": {"uid": "u1", "generation": generation}}

    memo = memo_of(at(3), 2, [], now=100.0)
    assert check_due(memo, at(3), [], interval=600.0, now=101.0).due
    assert not check_due(memo_of(at(3), 3, [], now=100.0), at(3), [], interval=600.0, now=101.0).due
    assert check_due(memo_of(at(3), 3, [], now=100.0), at(3), [], interval=600.0, now=700.0).due
