"""The MigrationPlan object (spec §3.8) for a gated plan: one shape for application and platform scope."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from compatibility.classes import DATA_MIGRATION, REQUIRES_RESTART, UNGATED
from compatibility.plan import Change, Plan
from compatibility.versions import InvalidVersion, stack_version
from renderer.names import API_VERSION, ENVIRONMENT_LABEL, GROUP, MANAGED_BY, MANAGED_BY_LABEL

__all__ = ["CREDENTIAL_LABEL", "KIND", "PREVIOUS_SPEC_ANNOTATION", "credential_migration_plan", "migration_plan",
           "name", "platform_migration_plan", "previous_pin"]

KIND = "MigrationPlan"
PLATFORM_NAMESPACE = "apprafter-system"
# Spec §3.8: a rejected platform plan reverts PlatformStack spec.pin to the value saved here ({"pin": ...}).
PREVIOUS_SPEC_ANNOTATION = f"{GROUP}/previous-spec"
CREDENTIAL_LABEL = f"{GROUP}/source-credential"  # a credential-scope plan's credential (its controller's watch)


def _change(change: Change) -> dict[str, Any]:
    """A changes[] entry; from/to are left out when that side was absent (the API server drops nulls)."""
    out: dict[str, Any] = {"rule": change.rule, "type": change.type, "field": change.field,
                           "classification": change.classification, "reason": change.reason}
    if change.from_ is not None:
        out["from"] = change.from_
    if change.to is not None:
        out["to"] = change.to
    return out


def name(plan: Plan) -> str:
    """Deterministic: the same gated set gives the same name (`<app>-<env>-<hash10>`, `<stack>-platform-<hash10>`,
    `<credential>-credential-<hash10>`)."""
    assert plan.approved_spec_hash is not None
    digest = plan.approved_spec_hash.removeprefix("sha256:")[:10]
    s = plan.subject
    stem = f"{s.name}-{s.environment}" if s.scope == "application" else f"{s.name}-{s.scope}"
    return f"{stem[:242]}-{digest}"


def migration_plan(plan: Plan, *, owner_uid: str | None = None, approvers: Sequence[str] = ()) -> dict[str, Any]:
    """The MigrationPlan for a gated plan, ready to apply; ValueError when nothing is gated.

    Application scope: in the app's namespace (when known), with a controlling ownerReference to the
    Application CR when `owner_uid` is given (the reconciler knows it; `apprafter plan` does not).
    """
    if not plan.gated or plan.approved_spec_hash is None:
        raise ValueError("nothing is gated: no MigrationPlan")
    s = plan.subject
    trigger_change = plan.gated_changes[0]  # the plan's order puts the highest class first
    trigger: dict[str, Any] = {"type": trigger_change.type, "field": trigger_change.field,
                               "approvedSpecHash": plan.approved_spec_hash}
    trigger.update({k: v for k, v in (("from", trigger_change.from_), ("to", trigger_change.to)) if v is not None})
    classes = set(plan.classifications)
    metadata: dict[str, Any] = {"name": name(plan)}
    labels = {MANAGED_BY_LABEL: MANAGED_BY, f"{GROUP}/scope": s.scope}
    if s.scope == "application":
        scope: dict[str, Any] = {"type": "application", "application": {
            "ref": {"name": s.name, **({"namespace": s.namespace} if s.namespace else {})},
            "environment": s.environment or ""}}
        labels |= {"app.kubernetes.io/name": s.name, ENVIRONMENT_LABEL: s.environment or ""}
        if s.namespace:
            metadata["namespace"] = s.namespace
        if owner_uid:
            metadata["ownerReferences"] = [{"apiVersion": API_VERSION, "kind": "Application", "name": s.name,
                                            "uid": owner_uid, "controller": True, "blockOwnerDeletion": True}]
    elif s.scope == "credential":
        scope = {"type": "credential", "credential": {"ref": {"name": s.name,
                                                              "namespace": s.namespace or PLATFORM_NAMESPACE}}}
        labels[CREDENTIAL_LABEL] = s.name
        metadata["namespace"] = s.namespace or PLATFORM_NAMESPACE
    else:
        platform: dict[str, Any] = {"ref": {"name": s.name, "namespace": s.namespace or PLATFORM_NAMESPACE}}
        platform |= {k: v for k, v in (("fromVersion", s.from_version), ("toVersion", s.to_version)) if v}
        scope = {"type": "platform", "platform": platform}
        metadata["namespace"] = s.namespace or PLATFORM_NAMESPACE
    metadata["labels"] = dict(sorted(labels.items()))
    risks: dict[str, Any] = {
        "classification": plan.primary,
        "classifications": list(plan.classifications),
        # Only a requires-restart plan is undone by a revert; data loss and exposure are not (and what rides along
        # ungated, safe or for review, does not change that).
        "reversible": classes <= UNGATED | {REQUIRES_RESTART},
        "requiresFullBackup": DATA_MIGRATION in classes,
    }
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata,
            "spec": {"scope": scope, "trigger": trigger, "risks": risks,
                     "changes": [_change(c) for c in plan.changes], "approvers": list(approvers)}}


def platform_migration_plan(plan: Plan, *, owner_uid: str, from_digest: str | None, to_digest: str,
                            previous_pin: str | None) -> dict[str, Any]:
    """The PlatformStack controller's platform-scope plan: `migration_plan`'s (same name and hash as `apprafter
    stack plan`), owned by the PlatformStack, bound to the verified digests of both charts (spec fields, which
    cannot change), and carrying the pin a rejection reverts to (the previous-spec annotation)."""
    obj = migration_plan(plan)
    s = plan.subject
    meta = obj["metadata"]
    meta["ownerReferences"] = [{"apiVersion": API_VERSION, "kind": "PlatformStack", "name": s.name, "uid": owner_uid,
                                "controller": True, "blockOwnerDeletion": True}]
    meta["annotations"] = {PREVIOUS_SPEC_ANNOTATION: json.dumps({"pin": previous_pin}, sort_keys=True)}
    platform = obj["spec"]["scope"]["platform"]
    if from_digest:
        platform["fromDigest"] = from_digest
    platform["toDigest"] = to_digest
    return obj


def credential_migration_plan(plan: Plan, *, owner_uid: str) -> dict[str, Any]:
    """The SourceCredential controller's credential-scope plan: `migration_plan`'s, in the credential's namespace,
    owned by the credential (it goes with it)."""
    obj = migration_plan(plan)
    obj["metadata"]["ownerReferences"] = [{"apiVersion": API_VERSION, "kind": "SourceCredential",
                                           "name": plan.subject.name, "uid": owner_uid, "controller": True,
                                           "blockOwnerDeletion": True}]
    return obj


def previous_pin(plan: Mapping[str, Any]) -> tuple[bool, str | None]:
    """(found, pin) from a platform plan's previous-spec annotation; found is False when it is missing or not
    `{"pin": <SemVer version or null>}` (nothing is reverted on the strength of an unreadable annotation)."""
    text = ((plan.get("metadata") or {}).get("annotations") or {}).get(PREVIOUS_SPEC_ANNOTATION)
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return False, None
    pin = value.get("pin", False) if isinstance(value, dict) else False
    if pin is None:
        return True, None
    if not isinstance(pin, str):
        return False, None
    try:
        stack_version(pin)
    except InvalidVersion:
        return False, None
    return True, pin
