"""One pass over the PlatformStack (spec §3.11) as pure decisions: what the umbrella Argo CD Application must carry,
and the status, events and outcome for each way a check can end (a finding, an apply, a hold for approval, a
rejection); lifecycle.stack_inputs reads what they decide on. reconciler/platformstack.py reads the cluster and the
registry (through platform_stack.upstream), calls these, writes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from compatibility.gate import PENDING, PlanPhase, PlatformDecision, PlatformPlan, refused_platform
from compatibility.text import approve_command
from controller_runtime.outcomes import Done, NextCheck, Outcome, Requeue
from lifecycle.conditions import Condition, StatusUpdate, carried, kept
from lifecycle.notes import Note
from lifecycle.stack_inputs import components
from platform_stack import umbrella
from platform_stack.channels import upgrade_available
from platform_stack.check_result import Baseline, Check, Finding
from platform_stack.resource import NAMESPACE, StackSpec, push_history

__all__ = ["CONDITIONS", "KEPT", "MIGRATION_APPROVED", "READY", "SOURCE_FINDINGS", "SOURCE_VERIFIED",
           "UPGRADE_AVAILABLE", "UPSTREAM_AHEAD", "StackVerdict", "applied", "baseline_of", "between_checks", "found",
           "held", "invalid", "moved_before", "pin_reverted", "plan_created_note", "refused_plans", "rejected",
           "umbrella_failed"]

READY, SOURCE_VERIFIED, UPGRADE_AVAILABLE, UPSTREAM_AHEAD, MIGRATION_APPROVED = (
    "Ready", "SourceVerified", "UpgradeAvailable", "UpstreamAhead", "MigrationApproved")
# The order status shows them in (UpstreamAhead only on a fork: spec.source.upstream beside another repoURL).
CONDITIONS = (READY, SOURCE_VERIFIED, UPGRADE_AVAILABLE, UPSTREAM_AHEAD, MIGRATION_APPROVED)
# Findings about the signature or its keys: SourceVerified=False with the same reason.
SOURCE_FINDINGS = frozenset({"VerificationFailed", "TagMoved", "NotConfigured", "KeysUnavailable"})
# Findings about a verified target that no plan could make run (spec §3.11): a plan for another target is over.
REFUSED = frozenset({"UnsupportedKubernetes"})
# Status fields a pass that learnt nothing new about them carries over as they are.
KEPT = ("currentVersion", "targetVersion", "availableVersion", "lastUpstreamCheck", "components", "versionHistory",
        "lastApplied", "migrationPlan", "rejectedPlan", "unverifiedVersions", "upstreamVersion")


class StackVerdict(NamedTuple):
    """What the edge carries out: the umbrella for `umbrella` (None: leave it) with automated sync on or off, the
    status, the events (recorded after the status), the plan the apply carried out, and the outcome."""

    umbrella: Baseline | None
    automated: bool
    status: StatusUpdate
    notes: list[Note]
    outcome: Outcome
    consumed: str | None = None
    remember: bool = True  # the check counts: the next one is due after checkInterval (else at the next pass)


def _next_check(spec: StackSpec) -> Done:
    """Done until the next look at the repository, checkInterval from this one."""
    return Done(NextCheck(spec.check_interval))


def _generation(obj: Mapping[str, Any]) -> int:
    return int(obj["metadata"].get("generation") or 0)


def _status(obj: Mapping[str, Any]) -> dict[str, Any]:
    return dict(obj.get("status") or {})


def _ordered(conditions: Iterable[Condition]) -> list[Condition]:
    return sorted(conditions, key=lambda c: CONDITIONS.index(c.type) if c.type in CONDITIONS else len(CONDITIONS))


def _update(obj: Mapping[str, Any], conditions: Iterable[Condition], fields: Mapping[str, Any],
            generation: int | None = None) -> StatusUpdate:
    return StatusUpdate(_ordered(conditions), fields, _generation(obj) if generation is None else generation)


def umbrella_failed(obj: Mapping[str, Any], message: str, retryable: bool) -> StatusUpdate:
    """The umbrella Application was refused: Ready Unknown (retried) when it may pass, else False."""
    status = _status(obj)
    ready = (Condition(READY, "Unknown", "Retrying", message) if retryable
             else Condition(READY, "False", "ApplyFailed", message))
    return _update(obj, [ready, *carried(status.get("conditions"), SOURCE_VERIFIED, UPGRADE_AVAILABLE,
                                         UPSTREAM_AHEAD, MIGRATION_APPROVED)], kept(status, *KEPT))


def invalid(obj: Mapping[str, Any], reason: str, message: str) -> StatusUpdate:
    """Nothing can be checked or applied: Ready=False (InvalidSpec, InvalidStatus); the rest carried."""
    status = _status(obj)
    return _update(obj, [Condition(READY, "False", reason, message),
                         *carried(status.get("conditions"), SOURCE_VERIFIED, UPGRADE_AVAILABLE, UPSTREAM_AHEAD,
                                  MIGRATION_APPROVED)],
                   kept(status, *KEPT))


def between_checks(obj: Mapping[str, Any], baseline: Baseline | None,
                   children: Iterable[Mapping[str, Any]]) -> tuple[bool, StatusUpdate | None]:
    """No check due: the umbrella stays as last applied (automated unless its tag moved), and the components' status
    follows Argo CD; (automated, the status to write or None when the components did not change)."""
    status = _status(obj)
    fresh = components(status.get("components") or [], children)
    update = None
    if fresh != (status.get("components") or []):
        update = _update(obj, carried(status.get("conditions"), *CONDITIONS), {**kept(status, *KEPT),
                                                                               "components": fresh},
                         generation=int(status.get("observedGeneration") or 0))
    return not moved_before(status), update


def moved_before(status: Mapping[str, Any]) -> bool:
    """The last check found the running version's tag moved."""
    previous = carried(status.get("conditions"), SOURCE_VERIFIED)
    return bool(previous and previous[0].reason == "TagMoved")


def _moved(status: Mapping[str, Any], result: Check | None, baseline: Baseline | None) -> bool:
    """The running version's tag names other content than was verified (judged by the last check when none)."""
    if result is None:
        return moved_before(status)
    return baseline is not None and result.current_digest != baseline.digest


def _moved_condition(baseline: Baseline) -> Condition:
    return Condition(SOURCE_VERIFIED, "False", "TagMoved", f"tag {baseline.version} no longer names the verified "
                     f"{baseline.digest}: automated sync of {umbrella.NAMESPACE}/{umbrella.NAME} is off")


def _upgrade(baseline: Baseline | None, result: Check) -> Condition:
    current = baseline.version if baseline else None
    if result.available and upgrade_available(current, result.available[0]):
        return Condition(UPGRADE_AVAILABLE, "True", "NewerVersion", f"{result.available[0]} is available "
                         f"(running {current})")
    newest = result.available[0] if result.available else "none verifies"
    return Condition(UPGRADE_AVAILABLE, "False", "UpToDate", f"newest of the channel: {newest}")


def _upstream_note(conditions: Iterable[Condition], result: Check) -> list[Note]:
    """The UpstreamAhead event, once per upstream version, when the condition says upstream is newer."""
    ahead = [c for c in conditions if c.type == UPSTREAM_AHEAD and c.status == "True"]
    news = result.upstream
    if not ahead or news is None:
        return []
    return [Note(UPSTREAM_AHEAD, ahead[0].message, f"upstream:{news.repository}:{news.version}")]


def _upstream(current: str | None, result: Check) -> list[Condition]:
    """UpstreamAhead of a fork: whether its upstream offers a newer version than what runs (never applied)."""
    news = result.upstream
    if news is None:
        return []
    where = f"upstream {news.repository}"
    if news.problem is not None:
        return [Condition(UPSTREAM_AHEAD, "Unknown", "UpstreamUnavailable", f"{where} could not be read: "
                          f"{news.problem}")]
    if upgrade_available(current, news.version):
        return [Condition(UPSTREAM_AHEAD, "True", "NewerUpstream", f"{where} offers {news.version}, the fork runs "
                          f"{current}: bring it into the fork to run it (nothing of upstream is applied)")]
    return [Condition(UPSTREAM_AHEAD, "False", "UpToDate", f"newest of {where}: {news.version or 'none'}")]


def _checked(status: Mapping[str, Any], result: Check, checked: str) -> dict[str, Any]:
    """The status fields every completed check sets (a fork's upstream that could not be read keeps its last
    version; not a fork: none)."""
    news, upstream = result.upstream, None
    if news is not None:
        upstream = status.get("upstreamVersion") if news.problem is not None else news.version
    return {"availableVersion": result.available[0] if result.available else None,
            "targetVersion": result.target_version, "lastUpstreamCheck": checked,
            "unverifiedVersions": list(result.unverified) or None, "upstreamVersion": upstream}


def _short(digest: str) -> str:
    return digest[:19] + "…" if len(digest) > 19 else digest


def found(obj: Mapping[str, Any], spec: StackSpec, baseline: Baseline | None, finding: Finding,
          result: Check | None = None, checked: str = "") -> StackVerdict:
    """Nothing new can be applied: what runs keeps running (its umbrella as applied, automated sync off when its tag
    moved), the status says why; retried with backoff when the cause may pass by itself."""
    status = _status(obj)
    moved = _moved(status, result, baseline) or finding.reason == "TagMoved"
    fields = kept(status, *KEPT)
    if result is not None:
        fields.update(_checked(status, result, checked))
    conditions = [Condition(READY, "False", finding.reason, finding.message)]
    if finding.reason in SOURCE_FINDINGS:
        conditions.append(Condition(SOURCE_VERIFIED, "False", finding.reason, finding.message))
    elif moved and baseline is not None:
        conditions.append(_moved_condition(baseline))
    else:
        conditions += carried(status.get("conditions"), SOURCE_VERIFIED)
    conditions += [_upgrade(baseline, result)] if result is not None else carried(status.get("conditions"),
                                                                                  UPGRADE_AVAILABLE)
    conditions += _upstream(baseline.version if baseline else None, result) if result is not None \
        else carried(status.get("conditions"), UPSTREAM_AHEAD)
    if finding.reason in REFUSED:  # the wait for a plan is over (refused_plans supersedes it); verdicts stay
        fields.pop("migrationPlan", None)
        conditions += [c for c in carried(status.get("conditions"), MIGRATION_APPROVED)
                       if c.reason in ("Approved", "Rejected")]
    else:
        conditions += carried(status.get("conditions"), MIGRATION_APPROVED)
    notes = []
    if finding.reason == "RegistryUnavailable":
        notes.append(Note(finding.reason, finding.message, f"{finding.message}\0{status.get('lastUpstreamCheck')}",
                          "Warning"))
    elif finding.reason not in ("VerificationFailed", "TagMoved"):  # those have their events from the check
        notes.append(Note(finding.reason, finding.message, f"{_generation(obj)}:{finding.message}", "Warning"))
    if result is not None:
        notes += _upstream_note(conditions, result)
    retried = finding.retryable
    outcome: Outcome = Requeue(f"{finding.reason}: {finding.message}") if retried else _next_check(spec)
    return StackVerdict(baseline, not moved, _update(obj, conditions, fields), notes, outcome, remember=not retried)


def refused_plans(result: Check, plans: Iterable[PlatformPlan], baseline: Baseline | None) -> tuple[PlanPhase, ...]:
    """The plans a check that ended in a finding supersedes: every plan in play when the target is refused."""
    if result.finding is None or result.finding.reason not in REFUSED or result.target_version is None:
        return ()
    return refused_platform(plans, applied_plan=baseline.plan if baseline else None, target=result.target_version)


def _approved(status: Mapping[str, Any], decision: PlatformDecision) -> Condition | None:
    """MigrationApproved after an apply: Approved for the plan it carried out; the last approval or rejection stays
    on record; a wait for a plan that is no longer needed is over."""
    if decision.consumed:
        return Condition(MIGRATION_APPROVED, "True", "Approved", f"MigrationPlan {decision.consumed} approved")
    previous = carried(status.get("conditions"), MIGRATION_APPROVED)
    return previous[0] if previous and previous[0].reason in ("Approved", "Rejected") else None


def baseline_of(spec: StackSpec, version: str, digest: str, repository: str, plan: str | None = None) -> Baseline:
    """What an apply of `version` (verified as `digest` in `repository`) records and its umbrella carries: the spec's
    pin, values and every override, from the first apply on (cluster-bootstrap's root Application is this too)."""
    return Baseline(version, digest, repository, spec.pin, spec.values, spec.overrides, plan)


def applied(obj: Mapping[str, Any], spec: StackSpec, baseline: Baseline | None, result: Check,
            decision: PlatformDecision, children: Iterable[Mapping[str, Any]], checked: str) -> StackVerdict:
    """The verified target goes to the umbrella; the baseline and history are re-stamped, then the plan marked."""
    status, target = _status(obj), result.target
    assert target is not None
    unchanged = baseline is not None and (baseline.version, baseline.digest) == (target.version, target.digest)
    keep_plan = baseline.plan if baseline is not None and unchanged and not decision.consumed else None
    new = baseline_of(spec, target.version, target.digest, result.repository, decision.consumed or keep_plan)
    history = status.get("versionHistory") or []
    if not unchanged:
        entry = {"version": new.version, "digest": new.digest, "appliedAt": checked}
        history = push_history(history, {**entry, **({"plan": decision.consumed} if decision.consumed else {})})
    fields = {**kept(status, "rejectedPlan"), **_checked(status, result, checked), "currentVersion": new.version,
              "targetVersion": new.version, "components": components(list(target.components), children),
              "versionHistory": history, "lastApplied": new.document()}
    verified = Condition(SOURCE_VERIFIED, "True", "Verified", f"{new.version} ({new.digest}) verified with "
                         f"{target.key} of Secret {NAMESPACE}/{spec.keys}")
    ready = Condition(READY, "True", "Applied", f"{new.version} ({_short(new.digest)}) is applied to Argo CD "
                      f"Application {umbrella.NAMESPACE}/{umbrella.NAME}")
    approval = _approved(status, decision)
    notes = []
    if not unchanged:
        via = f" (MigrationPlan {decision.consumed})" if decision.consumed else ""
        notes.append(Note("UpgradeApplied", f"{baseline.version if baseline else 'nothing'} -> {new.version} "
                          f"({new.digest}){via}", f"{new.version}@{new.digest}"))
    if decision.consumed:
        notes.append(Note("MigrationApplied", f"MigrationPlan {decision.consumed} was approved; {new.version} is "
                          "applied", decision.consumed))
    conditions = [ready, verified, _upgrade(new, result), *_upstream(new.version, result),
                  *([approval] if approval else [])]
    return StackVerdict(new, True, _update(obj, conditions, fields), [*notes, *_upstream_note(conditions, result)],
                        _next_check(spec), decision.consumed)


def held(obj: Mapping[str, Any], spec: StackSpec, baseline: Baseline, result: Check, decision: PlatformDecision,
         plans: Mapping[str, Mapping[str, Any]], checked: str) -> StackVerdict:
    """A gated target: what runs keeps running until the plan is approved."""
    status = _status(obj)
    moved = _moved(status, result, baseline)
    name = decision.waiting_for or ""
    assert decision.plan is not None and result.target is not None
    note = (f"{result.target.version} waits for MigrationPlan {name} ({decision.plan.primary}; classes: "
            f"{', '.join(decision.plan.classifications)}): {approve_command(name)} (or reject it)")
    fields = {**kept(status, *KEPT), **_checked(status, result, checked), "migrationPlan": name}
    phase = ((plans.get(name) or {}).get("status") or {}).get("phase") or PENDING
    conditions = [Condition(READY, "False", "AwaitingMigrationApproval", note),
                  _moved_condition(baseline) if moved else Condition(
                      SOURCE_VERIFIED, "True", "Verified", f"{result.target.version} ({result.target.digest}) "
                      f"verified with {result.target.key} of Secret {NAMESPACE}/{spec.keys}"),
                  _upgrade(baseline, result), *_upstream(baseline.version, result),
                  Condition(MIGRATION_APPROVED, "False", "AwaitingApproval", f"MigrationPlan {name} is {phase}")]
    return StackVerdict(baseline, not moved, _update(obj, conditions, fields), _upstream_note(conditions, result),
                        _next_check(spec))


def plan_created_note(decision: PlatformDecision, name: str) -> str:
    assert decision.plan is not None
    return f"MigrationPlan {name} ({decision.plan.primary}) waits for approval: {approve_command(name)}"


def pin_reverted(decision: PlatformDecision) -> Note:
    """The event of a rejected plan's pin revert."""
    rejected_plan = decision.rejected or ""
    return Note("PinReverted", f"MigrationPlan {rejected_plan} was rejected: spec.pin is "
                f"{decision.revert_pin or 'unset'} again", rejected_plan)


def rejected(obj: Mapping[str, Any], spec: StackSpec, baseline: Baseline, result: Check, decision: PlatformDecision,
             checked: str, observed: int, reverted_generation: int | None) -> StackVerdict:
    """A rejected plan: what runs stays; the rejected change is not proposed again until the spec changes.
    `reverted_generation` is the generation the pin revert (already written) made, None when none was due: the
    new spec is then looked at again at once."""
    status = _status(obj)
    name = decision.rejected or ""
    moved = _moved(status, result, baseline)
    generation = reverted_generation if reverted_generation is not None else _generation(obj)
    fields = {**kept(status, *KEPT), **_checked(status, result, checked),
              "targetVersion": baseline.version, "rejectedPlan": {"name": name, "generation": generation}}
    fields.pop("migrationPlan", None)
    target = result.target.version if result.target else result.target_version
    source = _moved_condition(baseline) if moved else None
    ready = (Condition(READY, "False", "TagMoved", source.message) if source is not None
             else Condition(READY, "True", "Applied", f"{baseline.version} ({_short(baseline.digest)}) stays applied: "
                            f"{target} was rejected (MigrationPlan {name})"))
    reverted = f": spec.pin reverted to {decision.revert_pin or 'unset'}" if reverted_generation is not None else ""
    conditions = [ready, *([source] if source is not None else carried(status.get("conditions"), SOURCE_VERIFIED)),
                  _upgrade(baseline, result), *_upstream(baseline.version, result),
                  Condition(MIGRATION_APPROVED, "False", "Rejected", f"MigrationPlan {name} was rejected{reverted}")]
    notes = _upstream_note(conditions, result)
    if reverted_generation is not None:  # the spec changed: look at it again now
        return StackVerdict(baseline, not moved, _update(obj, conditions, fields, observed), notes,
                            Done(NextCheck.now()), remember=False)
    return StackVerdict(baseline, not moved, _update(obj, conditions, fields, observed), notes,
                        _next_check(spec))
