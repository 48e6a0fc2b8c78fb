"""The MigrationPlan gate (spec §3.8) as one pure decision: apply, apply an approved plan, or hold.

The reconciler calls `decide` with what it read from the cluster; `apprafter plan` makes the same
`compatibility.application.plan` call, so the plan's name and `approvedSpecHash` are the CLI's. The PlatformStack
controller calls `decide_platform` with the plan `apprafter stack plan` makes for the same two charts; a platform
plan can also be rejected, which reverts the PlatformStack's pin.
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

__all__ = ["ACTIVE", "APPLIED", "APPROVED", "PENDING", "REJECTED", "SUPERSEDED", "CredentialDecision", "Decision",
           "ExistingPlan", "PlanPhase", "PlatformDecision", "PlatformPlan", "Rejection", "decide", "decide_credential",
           "decide_platform", "refused_platform"]

# Phases a plan can still be superseded from (the phase machine of compatibility.authority, which the CRD's
# CEL rules hold too); "" is a plan whose status was never written (created, then a crash).
ACTIVE = frozenset(p or "" for p in REACHABLE_FROM[SUPERSEDED] if p != SUPERSEDED)

Outcome = Literal["apply", "apply-approved", "hold"]


@dataclasses.dataclass(frozen=True)
class ExistingPlan:
    """A MigrationPlan of this Application and environment as the cluster holds it."""

    name: str
    approved_spec_hash: str | None  # spec.trigger.approvedSpecHash; None when missing or empty
    phase: str  # status.phase, "" when none
    owner_uid: str | None  # uid of its controlling owner

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ExistingPlan:
        """The gate's view of a MigrationPlan object as the cluster holds it."""
        return cls(*_plan_fields(obj))


def _plan_fields(obj: Mapping[str, Any]) -> tuple[str, str | None, str, str | None]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    approved = (spec.get("trigger") or {}).get("approvedSpecHash")
    return (str(obj["metadata"]["name"]), approved if isinstance(approved, str) and approved else None,
            str(status.get("phase") or ""), controller_uid(obj))


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
class Decision:
    """What the reconciler does: which effective spec the children reflect, and what happens to plans."""

    outcome: Outcome
    target: Mapping[str, Any]  # the effective spec to render and apply (the baseline while holding)
    plan: Plan | None  # baseline -> desired; None on a first deployment
    migration_plan: dict[str, Any] | None = None  # hold: the MigrationPlan to ensure
    consumed: str | None = None  # apply-approved: the plan whose approval this apply carries out
    phases: tuple[PlanPhase, ...] = ()
    soft_destructive: tuple[Change, ...] = ()  # soft changes that take something away (an Event when applied)

    @property
    def allowed(self) -> bool:
        return self.outcome != "hold"

    @property
    def waiting_for(self) -> str | None:
        """The plan an Application on hold waits for."""
        return self.migration_plan["metadata"]["name"] if self.migration_plan else None


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


def decide(desired: Deployment, baseline: Mapping[str, Any] | None, plans: Iterable[ExistingPlan], *,
           owner_uid: str, applied_plan: str | None = None, domain: str = DEFAULT_DOMAIN) -> Decision:
    """The gate for one Application: `desired` is the effective spec of its environment now, `baseline` the
    effective spec last applied (status.lastAppliedSpec; None on a first deployment), `plans` its
    MigrationPlans, `applied_plan` the plan the last apply consumed (status.appliedMigrationPlan).

    Approval binds the change, not the name: a plan applies only when it is `approved`, owned by this
    Application, and its approvedSpecHash equals the hash recomputed now for baseline -> desired. Raises
    compatibility.shape.Unreadable when the baseline cannot be read (fail closed: nothing applies).
    """
    plans = list(plans)
    if baseline is None:
        return Decision("apply", desired.spec, None, phases=tuple(_others(
            plans, None, applied_plan, None, "superseded: the Application has no applied spec to compare with")))
    before = Deployment(desired.app, desired.environment, check_spec(baseline), desired.namespace)
    result = plan(before, desired, domain)
    soft = tuple(c for c in result.changes if soft_destructive(c, before, desired))
    if not result.gated:
        return Decision("apply", desired.spec, result, phases=tuple(_others(
            plans, None, applied_plan, None, "superseded: the change was reverted or no longer needs approval")),
            soft_destructive=soft)
    wanted = name(result)
    why = f"superseded by {wanted}: the spec changed again"
    current = next((p for p in plans if p.name == wanted), None)
    if current is not None and current.phase == APPROVED and current.owner_uid == owner_uid \
            and current.approved_spec_hash is not None and current.approved_spec_hash == result.approved_spec_hash:
        return Decision("apply-approved", desired.spec, result, consumed=wanted,
                        phases=tuple(_others(plans, wanted, applied_plan, wanted, why)), soft_destructive=soft)
    phases = _others(plans, wanted, applied_plan, wanted, why)
    if current is None or current.phase == "":
        phases.append(PlanPhase(wanted, PENDING, "awaiting approval"))
    elif current.approved_spec_hash != result.approved_spec_hash or current.owner_uid != owner_uid:
        phases.append(PlanPhase(wanted, PENDING, "created anew: the plan of this name did not carry this change's "
                                "approvedSpecHash or was not this Application's; approve this one", recreate=True))
    elif current.phase not in REACHABLE_FROM[PENDING] and current.phase not in (APPROVED, REJECTED):
        phases.append(PlanPhase(wanted, PENDING, f"created anew: the same change is proposed again (the plan was "
                                f"{current.phase}); awaiting a new approval", recreate=True))
    return Decision("hold", before.spec, result, migration_plan(result, owner_uid=owner_uid), phases=tuple(phases),
                    soft_destructive=soft)


# --- platform scope ----------------------------------------------------------------------------------------

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


@dataclasses.dataclass(frozen=True)
class Rejection:
    """status.rejectedPlan: a rejected plan whose pin revert was carried out, and the generation after it."""

    name: str
    generation: int


PlatformOutcome = Literal["apply", "apply-approved", "hold", "revert", "rejected"]


@dataclasses.dataclass(frozen=True)
class PlatformDecision:
    """What the PlatformStack controller does with a verified target: apply it, apply it under an approved plan,
    hold it for a plan, or (the plan was rejected) keep what runs, reverting spec.pin first when it must."""

    outcome: PlatformOutcome
    plan: Plan | None  # current -> target; None on a first install or when nothing differs
    migration_plan: dict[str, Any] | None = None  # hold: the plan to ensure
    consumed: str | None = None  # apply-approved
    phases: tuple[PlanPhase, ...] = ()
    rejected: str | None = None  # revert / rejected: the rejected plan
    revert_pin: str | None = None  # revert: the pin to write back (None: remove spec.pin)

    @property
    def allowed(self) -> bool:
        return self.outcome in ("apply", "apply-approved")

    @property
    def waiting_for(self) -> str | None:
        return self.migration_plan["metadata"]["name"] if self.migration_plan else None


def decide_platform(result: Plan | None, plans: Iterable[PlatformPlan], *, owner_uid: str, applied_plan: str | None,
                    from_digest: str | None, to_digest: str, previous_pin: str | None, pin: str | None,
                    rejection: Rejection | None, generation: int) -> PlatformDecision:
    """The gate for the PlatformStack: `result` is the platform-scope plan from the running chart (`from_digest`)
    to the verified target (`to_digest`), `plans` the PlatformStack's MigrationPlans, `applied_plan` the plan the
    last apply consumed (status.lastApplied.plan), `previous_pin` the pin the running version was applied under
    (what a rejection restores), `pin` spec.pin now, `rejection` status.rejectedPlan, `generation` the spec's.

    A plan applies only when approved, owned by this PlatformStack, with the approvedSpecHash recomputed now and
    the same two digests. A rejected plan reverts spec.pin to its previous-spec annotation once; the same change
    is then not proposed again until the spec changes (autoUpgrade keeps what runs meanwhile).
    """
    plans = list(plans)
    if result is None or not result.gated:
        return PlatformDecision("apply", result, phases=tuple(_others(
            plans, None, applied_plan, None, "superseded: the PlatformStack no longer asks for this change")))
    wanted = name(result)
    phases = _others(plans, wanted, applied_plan, wanted, f"superseded by {wanted}: the PlatformStack asks for "
                     "another change")
    current = next((p for p in plans if p.name == wanted), None)
    ours = current is not None and current.owner_uid == owner_uid and current.approved_spec_hash is not None \
        and current.approved_spec_hash == result.approved_spec_hash \
        and (current.from_digest, current.to_digest) == (from_digest, to_digest)
    if current is not None and ours and current.phase == APPROVED:
        return PlatformDecision("apply-approved", result, consumed=wanted, phases=tuple(phases))
    if current is not None and ours and current.phase == REJECTED:
        if rejection is None or rejection.name != wanted:
            found, restore = current.previous_pin
            if found and restore != pin:
                return PlatformDecision("revert", result, phases=tuple(phases), rejected=wanted, revert_pin=restore)
            return PlatformDecision("rejected", result, phases=tuple(phases), rejected=wanted)
        if generation <= rejection.generation:
            return PlatformDecision("rejected", result, phases=tuple(phases), rejected=wanted)
        phases.append(PlanPhase(wanted, PENDING, "created anew: the PlatformStack asks for this change again after "
                                "it was rejected; awaiting approval", recreate=True))
    elif current is None:
        phases.append(PlanPhase(wanted, PENDING, "awaiting approval"))
    elif not ours:
        phases.append(PlanPhase(wanted, PENDING, "created anew: the plan of this name was not made for this change "
                                "(its approvedSpecHash, chart digests or owner differ); approve this one",
                                recreate=True))
    elif current.phase == "":
        phases.append(PlanPhase(wanted, PENDING, "awaiting approval"))
    elif current.phase not in REACHABLE_FROM[PENDING]:
        phases.append(PlanPhase(wanted, PENDING, f"created anew: the same change is proposed again (the plan was "
                                f"{current.phase}); awaiting a new approval", recreate=True))
    document = platform_migration_plan(result, owner_uid=owner_uid, from_digest=from_digest, to_digest=to_digest,
                                       previous_pin=previous_pin)
    return PlatformDecision("hold", result, document, phases=tuple(phases))


def refused_platform(plans: Iterable[PlatformPlan], *, applied_plan: str | None, target: str) -> tuple[PlanPhase, ...]:
    """The PlatformStack asks for `target`, which no plan could make run (its minimumKubernetesVersion is unmet):
    a plan still in play was made for another target and would wait for an approval that can never apply."""
    return tuple(_others(plans, None, applied_plan, None, f"superseded: the PlatformStack asks for {target}, which "
                         "this cluster's Kubernetes cannot run"))


# --- credential scope --------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class CredentialDecision:
    """What the SourceCredential controller does with a coverage change: carry it out, carry it out under an
    approved plan, or hold it (the derived Secrets stay as they were) for a plan."""

    outcome: Outcome
    plan: Plan | None  # the last-applied coverage -> the spec's (or deletion); None when nothing was applied yet
    migration_plan: dict[str, Any] | None = None  # hold: the plan to ensure
    consumed: str | None = None  # apply-approved: the plan to mark applied once the change is carried out
    phases: tuple[PlanPhase, ...] = ()

    @property
    def allowed(self) -> bool:
        return self.outcome != "hold"

    @property
    def waiting_for(self) -> str | None:
        return self.migration_plan["metadata"]["name"] if self.migration_plan else None


def decide_credential(result: Plan | None, plans: Iterable[ExistingPlan], *, owner_uid: str) -> CredentialDecision:
    """The gate for one SourceCredential: `result` is its credential-scope plan (lifecycle.credential_gate), `plans`
    its MigrationPlans. As for an Application, a plan applies only when approved, owned by this credential, and its
    approvedSpecHash equals the hash recomputed now; a change that no longer gates supersedes every plan in play."""
    plans = list(plans)
    if result is None or not result.gated:
        return CredentialDecision("apply", result, phases=tuple(_others(
            plans, None, None, None, "superseded: the coverage change was undone or no longer takes anything from "
            "an Application")))
    wanted = name(result)
    phases = _others(plans, wanted, None, wanted, f"superseded by {wanted}: the credential changed again")
    current = next((p for p in plans if p.name == wanted), None)
    ours = current is not None and current.owner_uid == owner_uid \
        and current.approved_spec_hash is not None and current.approved_spec_hash == result.approved_spec_hash
    if current is not None and ours and current.phase == APPROVED:
        return CredentialDecision("apply-approved", result, consumed=wanted, phases=tuple(phases))
    if current is None or (ours and current.phase == ""):
        phases.append(PlanPhase(wanted, PENDING, "awaiting approval"))
    elif not ours:
        phases.append(PlanPhase(wanted, PENDING, "created anew: the plan of this name did not carry this change's "
                                "approvedSpecHash or was not this credential's; approve this one", recreate=True))
    elif current.phase not in REACHABLE_FROM[PENDING]:
        phases.append(PlanPhase(wanted, PENDING, f"created anew: the same change is proposed again (the plan was "
                                f"{current.phase}); awaiting a new approval", recreate=True))
    return CredentialDecision("hold", result, credential_migration_plan(result, owner_uid=owner_uid),
                              phases=tuple(phases))
