"""One pass over an Application (spec §4.5) as pure decisions: what to apply (or why nothing can be), and the
status, events and plan phases that follow. reconciler/application.py reads the cluster, calls these, writes."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from compatibility.gate import REJECTED, Decision, ExistingPlan, decide
from compatibility.inputs import load_document
from compatibility.plan import canonical
from compatibility.shape import Unreadable
from compatibility.sides import side
from compatibility.text import approve_command
from lifecycle.baseline import remembered
from lifecycle.binding import CLAIM_REFUSED, UNBOUND, refusal, waiting_reason
from lifecycle.children import owned
from lifecycle.conditions import Condition, StatusUpdate, carried, kept
from lifecycle.credentials.coverage import deployment_image
from lifecycle.credentials.reports import image_credentials
from lifecycle.health import CURRENT, FAILED, Workload
from lifecycle.image_digest import IMAGE_RESOLVED, Images
from lifecycle.notes import Note
from lifecycle.plans import plans_of
from renderer import validate
from renderer.context import PlatformContext
from renderer.effective import spec_for
from renderer.errors import Problem, UserError
from renderer.load import LoadedApp
from renderer.manifests import CLAIM
from renderer.render import render_loaded

__all__ = ["CLAIMS_READY", "MIGRATION_APPROVED", "PHASES", "READY", "WORKLOAD_FIELDS", "Desired", "Refusal", "Settled",
           "Waiting", "apply_failed", "assess", "awaiting_pull_secrets", "describe", "earned", "read_application",
           "refused", "settle", "waiting_claims", "waiting_note", "workload_fields"]

READY, CLAIMS_READY, MIGRATION_APPROVED = "Ready", "ClaimsReady", "MigrationApproved"
PHASES = ("Pending", "Progressing", "Ready", "AwaitingMigrationApproval", "Failed")
# What the gate remembers across passes, and the digests in force (lifecycle.image_digest); carried by every
# status write that does not change them.
KEPT = ("lastAppliedSpec", "appliedMigrationPlan", "image", "images")
# What the workload reports (lifecycle.health), written afresh by every pass that looked at it.
WORKLOAD_FIELDS = ("replicas", "url", "imageDigest")


class Refusal(NamedTuple):
    """The Application cannot be applied as it is (reason InvalidSpec or InvalidStatus); its children stay."""

    reason: str
    message: str
    problems: tuple[Problem, ...] = ()  # InvalidSpec: what `apprafter plan` and the webhook report, the same


class Desired(NamedTuple):
    """What this pass applies: the gate's decision, the ResourceClaims (first), the other children, warnings."""

    decision: Decision
    claims: list[dict[str, Any]]
    children: list[dict[str, Any]]
    warnings: list[str]

    @property
    def objects(self) -> list[dict[str, Any]]:
        return [*self.claims, *self.children]


class Settled(NamedTuple):
    """The status after a pass, the events to record before writing it, and the approved plan it carried out
    (marked applied once the status holds the new baseline)."""

    status: StatusUpdate
    notes: list[Note]
    consumed: str | None
    consumed_note: Note | None


def read_application(obj: Mapping[str, Any]) -> LoadedApp:
    """The Application as `apprafter plan` reads a CR file (and the webhook an object): the CUE-generated schema."""
    meta = obj.get("metadata", {})
    doc = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
           "metadata": {k: meta[k] for k in ("name", "namespace", "labels", "annotations") if k in meta},
           "spec": obj.get("spec")}
    return load_document(doc, f"Application {meta.get('namespace')}/{meta.get('name')}")


def describe(problems: Iterable[Problem]) -> str:
    """Problems as `field: message`, joined (positions point into a JSON dump of the CR: left out)."""
    return "; ".join(f"{p.field}: {p.message}" if p.field else p.message for p in problems)


def _generation(app: Mapping[str, Any]) -> int:
    return int(app["metadata"].get("generation") or 0)


def _status(app: Mapping[str, Any]) -> dict[str, Any]:
    status = app.get("status")
    return dict(status) if isinstance(status, Mapping) else {}


def assess(app: Mapping[str, Any], plans: Sequence[Mapping[str, Any]], context: PlatformContext, *,
           status_manager: str, recorded: Mapping[str, Any] | None = None,
           field_manager: str = "apprafter-operator") -> Desired | Refusal:
    """What to apply for `app` given its MigrationPlans: validated exactly as `apprafter plan` validates a CR
    (renderer.validate.check_deployment), its baseline (`recorded`: its ApplicationBaseline, else its status;
    lifecycle.baseline) trusted only when the operator wrote it, gated by compatibility.gate.decide, rendered for
    the decision's target (the current spec, or the baseline while held)."""
    meta = app["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    environment = (app.get("spec") or {}).get("environment") if isinstance(app.get("spec"), Mapping) else None
    try:
        loaded = read_application(app)
        if not isinstance(environment, str) or not environment:
            raise UserError(validate.check_deployment(loaded, None))
        desired = side(loaded, environment, required=True)
    except UserError as e:
        return Refusal("InvalidSpec", describe(e.problems), tuple(e.problems))
    assert desired is not None
    memory = remembered(app, recorded, field_manager=field_manager, status_manager=status_manager)
    if isinstance(memory, str):
        return Refusal("InvalidStatus", f"{memory}: not trusted as the gate's baseline (fail closed: nothing applied)")
    existing = [ExistingPlan.of(p) for p in plans_of(plans, name, environment)]
    try:
        decision = decide(desired, memory.spec, existing, owner_uid=meta["uid"], applied_plan=memory.applied_plan,
                          domain=context.domain)
    except Unreadable as e:
        where = "status.lastAppliedSpec" if memory.source == "status" else "the ApplicationBaseline's effectiveSpec"
        field = f"{where}.{e.field}" if e.field else where
        return Refusal("InvalidStatus", f"{field}: {e.message} (fail closed: nothing applied)")
    held = decision.outcome == "hold"
    try:
        if held:
            doc = {"apiVersion": app["apiVersion"], "kind": app["kind"],
                   "metadata": {"name": name, "namespace": namespace},
                   "spec": spec_for(environment, decision.target)}
            loaded = load_document(doc, f"Application {namespace}/{name} status.lastAppliedSpec")
        rendered = render_loaded(loaded, environment, "manifests", namespace, context)
    except UserError as e:
        return Refusal("InvalidStatus" if held else "InvalidSpec",
                       f"{'status.lastAppliedSpec' if held else 'spec'}: {describe(e.problems)}")
    objects = owned(rendered.objects, app)
    claims = [o for o in objects if o["kind"] == CLAIM.kind]
    return Desired(decision, claims, [o for o in objects if o["kind"] != CLAIM.kind],
                   [w.split(": ", 2)[-1] for w in rendered.warnings])


class Waiting(NamedTuple):
    """A claim whose live object is not ready: its name, the need it is for, why, and whether it waits for a person
    (lifecycle.binding.refusal: UNBOUND, CLAIM_REFUSED) rather than for time (None)."""

    name: str
    need: str
    why: str
    refused: str | None = None


def waiting_claims(claims: Sequence[Mapping[str, Any]], live: Mapping[str, Mapping[str, Any]]) -> list[Waiting]:
    """The claims whose live object is not ready yet, with why: no workload until every one is."""
    out = []
    for claim in claims:
        name = claim["metadata"]["name"]
        found = live.get(name) or {}
        if (found.get("status") or {}).get("ready") is not True:
            out.append(Waiting(name, f"needs.{claim['spec']['type']}", waiting_reason(found), refusal(found)))
    return out


def waiting_note(decision: Decision, namespace: str) -> str:
    """What a held Application says: the plan, its classes, and the command that approves it."""
    assert decision.plan is not None
    name = decision.waiting_for or ""
    classes = ", ".join(decision.plan.classifications)
    return (f"MigrationPlan {name} ({decision.plan.primary}; classes: {classes}) awaits approval: "
            + approve_command(name, namespace))


def _migration_condition(status: Mapping[str, Any], decision: Decision,
                         plans: Mapping[str, Mapping[str, Any]]) -> Condition | None:
    if decision.outcome == "hold":
        waiting = decision.waiting_for or ""
        phase = ((plans.get(waiting) or {}).get("status") or {}).get("phase")
        if phase == REJECTED:
            return Condition(MIGRATION_APPROVED, "False", "Rejected", f"MigrationPlan {waiting} was rejected: "
                             "revert the change in git")
        return Condition(MIGRATION_APPROVED, "False", "AwaitingApproval", f"MigrationPlan {waiting} is "
                         f"{phase or 'pending-approval'}")
    if decision.consumed:
        return Condition(MIGRATION_APPROVED, "True", "Approved", f"MigrationPlan {decision.consumed} approved")
    previous = carried(status.get("conditions"), MIGRATION_APPROVED)
    return previous[0] if previous and previous[0].status == "True" else None


def settle(app: Mapping[str, Any], desired: Desired, plans: Mapping[str, Mapping[str, Any]],
           waiting: Sequence[Waiting], workload: Workload | None = None,
           credentials: Iterable[Mapping[str, Any]] = (), images: Images | None = None) -> Settled:
    """The status once the claims (and, when none waits, every child) are applied: AwaitingMigrationApproval while
    held, Failed while a claim waits for a person (reason Unbound or ClaimRefused: lifecycle.binding.refusal), Pending
    while a claim is not ready otherwise, else what the workload earned (`earned`) with the applied spec as
    the gate's new baseline. `credentials` are the SourceCredentials (with their status): one that covers the
    rendered image alone but was refused by the registry is named in a condition; credentials that cover the
    image but not this namespace are said to (unnamed: they are not the tenant's). `images`: the followed tags
    (lifecycle.image_digest), their `status.images` entries, Events and ImageResolved condition."""
    status, decision, generation = _status(app), desired.decision, _generation(app)
    namespace = app["metadata"]["namespace"]
    claims = desired.claims
    refused = [w for w in waiting if w.refused]
    # a claim that waits for a person is the Application's failure (Argo CD: Degraded), the first reason ranked
    stuck = next((r for r in (UNBOUND, CLAIM_REFUSED) if any(w.refused == r for w in refused)), None)
    claims_condition = None
    if claims:
        claims_condition = (Condition(CLAIMS_READY, "False", stuck or "WaitingForClaims",
                                      "; ".join(f"{w.need} waits: {w.why}" for w in waiting)) if waiting
                            else Condition(CLAIMS_READY, "True", "ClaimsReady", f"{len(claims)} ResourceClaims ready"))
    fields: dict[str, Any] = {**kept(status, *KEPT, *WORKLOAD_FIELDS), **workload_fields(workload)}
    fields.pop("images", None)
    if images is not None and images.entries:
        fields["images"] = images.entries
    notes: list[Note] = list(images.notes) if images is not None else []
    consumed = None
    if decision.outcome == "hold":
        phase = "AwaitingMigrationApproval"
        ready = Condition(READY, "False", "AwaitingMigrationApproval", waiting_note(decision, namespace))
        fields["migrationPlan"] = decision.waiting_for
        _held_at(fields, decision)
    elif stuck:
        phase = "Failed"
        ready = Condition(READY, "False", stuck, "; ".join(f"{w.need} cannot be provisioned: {w.why}" for w in refused)
                          + " (no workload until every ResourceClaim is ready)")
    elif waiting:
        phase = "Pending"
        ready = Condition(READY, "False", "WaitingForClaims", f"no workload until every ResourceClaim is ready "
                          f"(waiting for {', '.join(w.name for w in waiting)})")
    else:
        phase, ready = earned(desired, workload, generation)
        notes += _restamp(status, decision, fields)
        consumed = decision.consumed
    image = next((deployment_image(c) for c in desired.children if c.get("kind") == "Deployment"), None)
    credential_condition = image_credentials(image, namespace, credentials)
    conditions = [ready, *(c for c in (claims_condition, _migration_condition(status, decision, plans),
                                       credential_condition, images.condition if images else None) if c)]
    consumed_note = (Note("MigrationApplied", f"MigrationPlan {consumed} was approved; its change is applied",
                          consumed) if consumed else None)
    return Settled(StatusUpdate(conditions, {"phase": phase, **fields}, generation), notes, consumed, consumed_note)


def earned(desired: Desired, workload: Workload | None, generation: int) -> tuple[str, Condition]:
    """Phase and Ready condition once every child is applied: Ready only when the workload is current (every
    child current: the Deployment rolled out and available), Failed when it cannot run (the reason named),
    Progressing in between. Without a look at the workload (None), what the apply alone says."""
    note = f"; warnings: {'; '.join(desired.warnings)}" if desired.warnings else ""
    applied = f"{len(desired.objects)} objects applied for generation {generation}{note}"
    if workload is None:
        return "Ready", Condition(READY, "True", "Applied", applied)
    said = f"{workload.message}; {applied}" if workload.message else applied
    if workload.state == CURRENT:
        return "Ready", Condition(READY, "True", "Available", said)
    if workload.state == FAILED:
        return "Failed", Condition(READY, "False", workload.reason, said)
    return "Progressing", Condition(READY, "False", "Progressing", said)


def workload_fields(workload: Workload | None) -> dict[str, Any]:
    """status.replicas, url and imageDigest as the workload reports them (None: left out)."""
    if workload is None:
        return {}
    return {"replicas": workload.replicas, "url": workload.url, "imageDigest": workload.image_digest}


def _restamp(status: Mapping[str, Any], decision: Decision, fields: dict[str, Any]) -> list[Note]:
    """The applied spec becomes the gate's baseline (and the approved plan it consumed is recorded); a soft change
    that takes something away is a Warning Event, once per (old, new) pair."""
    target = dict(decision.target)
    old = status.get("lastAppliedSpec")
    notes = []
    if decision.soft_destructive and old != target:
        text = "; ".join(f"{c.field}: {c.reason} ({c.rule})" for c in decision.soft_destructive)
        occurrence = hashlib.sha256(canonical([old, target]).encode()).hexdigest()
        notes.append(Note("SoftDestructiveChange", f"applied without approval: {text}", occurrence, "Warning"))
    fields["lastAppliedSpec"] = target
    if decision.consumed:
        fields["appliedMigrationPlan"] = decision.consumed
    elif old != target:
        fields.pop("appliedMigrationPlan", None)
    if target.get("image"):
        fields["image"] = target["image"]
    return notes


def _held_at(fields: dict[str, Any], decision: Decision) -> None:
    """A held Application shows the baseline its children are at, also when this object never applied it (created
    again over its ApplicationBaseline: lifecycle.baseline)."""
    fields.setdefault("lastAppliedSpec", dict(decision.target))
    if decision.target.get("image"):
        fields.setdefault("image", decision.target["image"])


def refused(app: Mapping[str, Any], refusal: Refusal) -> StatusUpdate:
    """Failed: Ready=False with the reason; the gate's memory and the other conditions carried as they were."""
    status = _status(app)
    fields = {"phase": "Failed", **kept(status, *KEPT, *WORKLOAD_FIELDS, "migrationPlan")}
    conditions = [Condition(READY, "False", refusal.reason, refusal.message),
                  *carried(status.get("conditions"), CLAIMS_READY, MIGRATION_APPROVED, IMAGE_RESOLVED)]
    return StatusUpdate(conditions, fields, _generation(app))


def awaiting_pull_secrets(app: Mapping[str, Any], names: Sequence[str]) -> StatusUpdate:
    """Pending: nothing applied until the pull secrets its Deployment lists exist (lifecycle.private_images)."""
    status = _status(app)
    fields = {"phase": "Pending", **kept(status, *KEPT, *WORKLOAD_FIELDS, "migrationPlan")}
    condition = Condition(READY, "False", "WaitingForPullSecret",
                          f"no workload until the SourceCredentials serving its image have derived their pull secrets "
                          f"in this namespace (waiting for {', '.join(names)})")
    return StatusUpdate([condition, *carried(status.get("conditions"), CLAIMS_READY, MIGRATION_APPROVED,
                                             IMAGE_RESOLVED)], fields, _generation(app))


def apply_failed(app: Mapping[str, Any], message: str, retryable: bool) -> StatusUpdate:
    """A child the API server refused: Progressing (Ready Unknown, retried) when it may pass, else Failed."""
    status = _status(app)
    condition = (Condition(READY, "Unknown", "Retrying", message) if retryable
                 else Condition(READY, "False", "ApplyFailed", message))
    fields = {"phase": "Progressing" if retryable else "Failed",
              **kept(status, *KEPT, *WORKLOAD_FIELDS, "migrationPlan")}
    return StatusUpdate([condition], fields, _generation(app))
