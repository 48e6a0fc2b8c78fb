"""The MigrationPlan gate (spec §3.8), written once for every scope: apply, apply an approved plan, or hold.

`judge` is the gate: a change applies only under its own plan (named by its hash), owned by the object that asks,
carrying the approvedSpecHash recomputed now (and whatever else the scope binds approval to), and approved;
otherwise it waits for that plan, pending or created anew. A `GateScope` names what differs between scopes. The
entry points: `decide` for an Application (`apprafter plan` makes the same plan, so the name and hash are the
CLI's), `decide_platform` for the PlatformStack (`apprafter stack plan`'s plan; a rejection reverts the pin) and
`decide_credential` for a SourceCredential.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from compatibility.application import DEFAULT_DOMAIN, Deployment, plan, soft_destructive
from compatibility.authority import APPLIED, APPROVED, PENDING, REACHABLE_FROM, REJECTED, SUPERSEDED
from compatibility.migrationplan import (
    credential_migration_plan,
    migration_plan,
    name,
    platform_migration_plan,
    previous_pin,
)
from compatibility.plan import Change, Plan
from compatibility.shape import check_spec
from controller_runtime.objects import controller_uid

__all__ = ["ACTIVE", "APPLICATION_GATE", "APPLIED", "APPROVED", "CREDENTIAL_GATE", "PENDING", "PLATFORM_GATE",
           "REJECTED", "SUPERSEDED", "Decision", "ExistingPlan", "GateDecision", "GateScope", "PlanPhase",
           "PlatformDecision", "PlatformPlan", "Rejection", "Verdict", "decide", "decide_credential",
           "decide_platform", "judge", "refused_platform"]

# Phases a plan can still be superseded from (the phase machine of compatibility.authority, which the CRD's
# CEL rules hold too); "" is a plan whose status was never written (created, then a crash).
ACTIVE = frozenset(p or "" for p in REACHABLE_FROM[SUPERSEDED] if p != SUPERSEDED)

Outcome = Literal["apply", "apply-approved", "hold", "revert", "rejected"]


@dataclasses.dataclass(frozen=True)
class ExistingPlan:
    """A MigrationPlan of the object asking (its Application and environment, its credential) as the cluster holds
    it."""

    name: str
    approved_spec_hash: str | None  # spec.trigger.approvedSpecHash; None when missing or empty
    phase: str  # status.phase, "" when none
    owner_uid: str | None  # uid of its controlling owner

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ExistingPlan:
        """The gate's view of a MigrationPlan object as the cluster holds it."""
        return cls(*_plan_fields(obj))

    @property
    def binding(self) -> tuple[str | None, ...]:
        """What approval is bound to besides the hash (nothing; a platform plan adds its chart digests)."""
        return ()


def _plan_fields(obj: Mapping[str, Any]) -> tuple[str, str | None, str, str | None]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    approved = (spec.get("trigger") or {}).get("approvedSpecHash")
    return (str(obj["metadata"]["name"]), approved if isinstance(approved, str) and approved else None,
            str(status.get("phase") or ""), controller_uid(obj))


@dataclasses.dataclass(frozen=True)
class PlatformPlan(ExistingPlan):
    """A platform-scope MigrationPlan of the PlatformStack, with the chart digests it was made for and the pin its
    previous-spec annotation restores on rejection ((False, None) when the annotation is missing or unreadable)."""

    from_digest: str | None = None
    to_digest: str | None = None
    previous_pin: tuple[bool, str | None] = (False, None)

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> PlatformPlan:
        platform = ((obj.get("spec") or {}).get("scope") or {}).get("platform") or {}
        return cls(*_plan_fields(obj), platform.get("fromDigest"), platform.get("toDigest"), previous_pin(obj))

    @property
    def binding(self) -> tuple[str | None, ...]:
        return (self.from_digest, self.to_digest)


@dataclasses.dataclass(frozen=True)
class PlanPhase:
    """A phase an existing (or just created) plan must be moved to, and the note for its status.message."""

    name: str
    phase: str
    message: str
    superseded_by: str | None = None
    # Delete the plan and create it anew (then pending-approval): its spec is not this change's (a forged hash,
    # another owner), or it can no longer return to pending-approval (applied, superseded). A plan's spec is
    # immutable and its phase moves one way, so a fresh object is the only way back to a pending plan.
    recreate: bool = False


@dataclasses.dataclass(frozen=True)
class GateScope:
    """What differs between the scopes' gates: the words of the plans' status messages, and what a rejected plan
    does (what approval is bound to besides the hash is the plan's: ExistingPlan.binding). Everything else is
    `judge`, the same for every scope."""

    unplanned: str  # why plans in play are superseded when there is no plan (nothing to compare with)
    ungated: str  # why, when the change no longer needs approval
    changed: str  # why, when another change is asked for (after "superseded by <its plan>: ")
    not_ours: str  # why the plan of this change's name is created anew when it is not this change's
    # "stands": the rejected plan keeps its phase and the change waits (undoing the change moves on; a person's
    # verdict is never overwritten). "reverts": `judge` says "rejected" and the scope undoes what asked for it.
    rejected: Literal["stands", "reverts"]


APPLICATION_GATE = GateScope(
    unplanned="superseded: the Application has no applied spec to compare with",
    ungated="superseded: the change was reverted or no longer needs approval",
    changed="the spec changed again",
    not_ours="created anew: the plan of this name did not carry this change's approvedSpecHash or was not this "
             "Application's; approve this one",
    rejected="stands")
_STACK_UNGATED = "superseded: the PlatformStack no longer asks for this change"
PLATFORM_GATE = GateScope(
    unplanned=_STACK_UNGATED,
    ungated=_STACK_UNGATED,
    changed="the PlatformStack asks for another change",
    not_ours="created anew: the plan of this name was not made for this change (its approvedSpecHash, chart digests "
             "or owner differ); approve this one",
    rejected="reverts")
_COVERAGE_UNGATED = "superseded: the coverage change was undone or no longer takes anything from an Application"
CREDENTIAL_GATE = GateScope(
    unplanned=_COVERAGE_UNGATED,
    ungated=_COVERAGE_UNGATED,
    changed="the credential changed again",
    not_ours="created anew: the plan of this name did not carry this change's approvedSpecHash or was not this "
             "credential's; approve this one",
    rejected="stands")


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The gate's answer for one change in any scope: the outcome, the plan of the change (None when nothing gates)
    and the phases plans move to."""

    outcome: Literal["apply", "apply-approved", "hold", "rejected"]
    phases: tuple[PlanPhase, ...]
    wanted: str | None = None

    @property
    def consumed(self) -> str | None:
        """The approved plan an apply carries out."""
        return self.wanted if self.outcome == "apply-approved" else None


def _others(plans: Iterable[ExistingPlan], keep: str | None, applied_plan: str | None,
            superseded_by: str | None, why: str) -> list[PlanPhase]:
    """Every other plan still in play: finished if the last apply consumed it, else superseded."""
    out = []
    for p in sorted(plans, key=lambda p: p.name):
        if p.name == keep or p.phase not in ACTIVE:
            continue
        if p.name == applied_plan and p.phase == APPROVED:
            out.append(PlanPhase(p.name, APPLIED, "applied: the approved change is the applied spec"))
        else:
            out.append(PlanPhase(p.name, SUPERSEDED, why, superseded_by))
    return out


def judge(scope: GateScope, result: Plan | None, plans: Iterable[ExistingPlan], *, owner_uid: str,
          applied_plan: str | None = None, binding: tuple[str | None, ...] = ()) -> Verdict:
    """The gate for one change: `result` its plan (None when there is nothing to compare with), `plans` the asking
    object's MigrationPlans, `applied_plan` the plan its last apply consumed, `binding` what else the approval must
    have been made for (ExistingPlan.binding). Every other plan in play is superseded (or finished, if the last apply
    consumed it).

    Approval binds the change, not the name: the plan of this change applies only when it is approved, owned by
    `owner_uid`, and carries the approvedSpecHash recomputed now and this `binding`. A plan of that name that is not
    this change's, or that can no longer become pending (applied, superseded), is created anew.
    """
    plans = list(plans)
    if result is None or not result.gated:
        why = scope.unplanned if result is None else scope.ungated
        return Verdict("apply", tuple(_others(plans, None, applied_plan, None, why)))
    wanted = name(result)
    phases = _others(plans, wanted, applied_plan, wanted, f"superseded by {wanted}: {scope.changed}")
    current = next((p for p in plans if p.name == wanted), None)
    if current is None:
        phases.append(PlanPhase(wanted, PENDING, "awaiting approval"))
    elif current.owner_uid != owner_uid or current.approved_spec_hash is None \
            or current.approved_spec_hash != result.approved_spec_hash or current.binding != binding:
        phases.append(PlanPhase(wanted, PENDING, scope.not_ours, recreate=True))
    elif current.phase == APPROVED:
        return Verdict("apply-approved", tuple(phases), wanted)
    elif current.phase == REJECTED:
        if scope.rejected == "reverts":
            return Verdict("rejected", tuple(phases), wanted)
    elif current.phase == "":
        phases.append(PlanPhase(wanted, PENDING, "awaiting approval"))
    elif current.phase not in REACHABLE_FROM[PENDING]:
        phases.append(PlanPhase(wanted, PENDING, f"created anew: the same change is proposed again (the plan was "
                                f"{current.phase}); awaiting a new approval", recreate=True))
    return Verdict("hold", tuple(phases), wanted)


@dataclasses.dataclass(frozen=True)
class GateDecision:
    """What a controller carries out for a change: the outcome, the plan it was decided on (None when there was
    nothing to compare with), and what happens to plans. A SourceCredential's decision is this alone."""

    outcome: Outcome
    plan: Plan | None
    migration_plan: dict[str, Any] | None = None  # hold: the MigrationPlan to ensure
    consumed: str | None = None  # apply-approved: the plan whose approval this apply carries out
    phases: tuple[PlanPhase, ...] = ()

    @property
    def allowed(self) -> bool:
        return self.outcome in ("apply", "apply-approved")

    @property
    def waiting_for(self) -> str | None:
        """The plan a change on hold waits for."""
        return self.migration_plan["metadata"]["name"] if self.migration_plan else None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Decision(GateDecision):
    """An Application's: which effective spec the children reflect, and the soft changes that take something away
    (an Event when applied)."""

    target: Mapping[str, Any]  # the effective spec to render and apply (the baseline while holding)
    soft_destructive: tuple[Change, ...] = ()


def decide(desired: Deployment, baseline: Mapping[str, Any] | None, plans: Iterable[ExistingPlan], *,
           owner_uid: str, applied_plan: str | None = None, domain: str = DEFAULT_DOMAIN) -> Decision:
    """The gate for one Application: `desired` is the effective spec of its environment now, `baseline` the
    effective spec last applied (status.lastAppliedSpec; None on a first deployment), `plans` its
    MigrationPlans, `applied_plan` the plan the last apply consumed (status.appliedMigrationPlan). Raises
    compatibility.shape.Unreadable when the baseline cannot be read (fail closed: nothing applies)."""
    if baseline is None:
        verdict = judge(APPLICATION_GATE, None, plans, owner_uid=owner_uid, applied_plan=applied_plan)
        return Decision(verdict.outcome, None, phases=verdict.phases, target=desired.spec)
    before = Deployment(desired.app, desired.environment, check_spec(baseline), desired.namespace)
    result = plan(before, desired, domain)
    verdict = judge(APPLICATION_GATE, result, plans, owner_uid=owner_uid, applied_plan=applied_plan)
    held = verdict.outcome == "hold"
    return Decision(verdict.outcome, result, migration_plan(result, owner_uid=owner_uid) if held else None,
                    verdict.consumed, verdict.phases, target=before.spec if held else desired.spec,
                    soft_destructive=tuple(c for c in result.changes if soft_destructive(c, before, desired)))


# --- platform scope ----------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Rejection:
    """status.rejectedPlan: a rejected plan whose pin revert was carried out, and the generation after it."""

    name: str
    generation: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlatformDecision(GateDecision):
    """The PlatformStack's: besides apply and hold, a rejected plan keeps what runs ("rejected"), reverting spec.pin
    first when it must ("revert")."""

    rejected: str | None = None  # revert / rejected: the rejected plan
    revert_pin: str | None = None  # revert: the pin to write back (None: remove spec.pin)


def decide_platform(result: Plan | None, plans: Iterable[PlatformPlan], *, owner_uid: str, applied_plan: str | None,
                    from_digest: str | None, to_digest: str, previous_pin: str | None, pin: str | None,
                    rejection: Rejection | None, generation: int) -> PlatformDecision:
    """The gate for the PlatformStack: `result` is the platform-scope plan from the running chart (`from_digest`)
    to the verified target (`to_digest`), `plans` the PlatformStack's MigrationPlans, `applied_plan` the plan the
    last apply consumed (status.lastApplied.plan), `previous_pin` the pin the running version was applied under
    (what a rejection restores), `pin` spec.pin now, `rejection` status.rejectedPlan, `generation` the spec's.

    Approval is bound to the two digests too. A rejected plan reverts spec.pin to its previous-spec annotation
    once; the same change is then not proposed again until the spec changes (autoUpgrade keeps what runs meanwhile).
    """
    plans = list(plans)
    verdict = judge(PLATFORM_GATE, result, plans, owner_uid=owner_uid, applied_plan=applied_plan,
                    binding=(from_digest, to_digest))
    phases, wanted = verdict.phases, verdict.wanted
    if verdict.outcome == "rejected":
        assert wanted is not None
        if rejection is None or rejection.name != wanted:
            found, restore = next(p for p in plans if p.name == wanted).previous_pin
            if found and restore != pin:
                return PlatformDecision("revert", result, phases=phases, rejected=wanted, revert_pin=restore)
            return PlatformDecision("rejected", result, phases=phases, rejected=wanted)
        if generation <= rejection.generation:
            return PlatformDecision("rejected", result, phases=phases, rejected=wanted)
        phases += (PlanPhase(wanted, PENDING, "created anew: the PlatformStack asks for this change again after it "
                             "was rejected; awaiting approval", recreate=True),)
    elif verdict.outcome != "hold":
        return PlatformDecision(verdict.outcome, result, consumed=verdict.consumed, phases=phases)
    assert result is not None
    document = platform_migration_plan(result, owner_uid=owner_uid, from_digest=from_digest, to_digest=to_digest,
                                       previous_pin=previous_pin)
    return PlatformDecision("hold", result, document, phases=phases)


def refused_platform(plans: Iterable[PlatformPlan], *, applied_plan: str | None, target: str) -> tuple[PlanPhase, ...]:
    """The PlatformStack asks for `target`, which no plan could make run (its minimumKubernetesVersion is unmet):
    a plan still in play was made for another target and would wait for an approval that can never apply."""
    return tuple(_others(plans, None, applied_plan, None, f"superseded: the PlatformStack asks for {target}, which "
                         "this cluster's Kubernetes cannot run"))


# --- credential scope --------------------------------------------------------------------------------------

def decide_credential(result: Plan | None, plans: Iterable[ExistingPlan], *, owner_uid: str) -> GateDecision:
    """The gate for one SourceCredential: `result` is its credential-scope plan (lifecycle.credentials.gate; None when
    nothing was applied yet), `plans` its MigrationPlans. While held, the derived Secrets stay as they were."""
    verdict = judge(CREDENTIAL_GATE, result, plans, owner_uid=owner_uid)
    held = verdict.outcome == "hold"
    document = credential_migration_plan(result, owner_uid=owner_uid) if held and result is not None else None
    return GateDecision(verdict.outcome, result, document, verdict.consumed, verdict.phases)
