"""Roll detected changes up into a plan: primary class, distinct classes, every change, approval hash."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable
from typing import Any

from compatibility.classes import SAFE, Scope, is_gated, rank, ranked
from compatibility.rules import RULES

__all__ = ["Change", "Plan", "Subject", "canonical", "plan_json", "roll_up", "spec_hash"]


@dataclasses.dataclass(frozen=True)
class Change:
    """One detected change: rule id, field path, both sides (None when absent) and a one-line reason."""

    rule: str
    field: str
    from_: Any
    to: Any
    reason: str

    @property
    def classification(self) -> str:
        return RULES[self.rule].classification

    @property
    def type(self) -> str:
        return RULES[self.rule].type

    def to_json(self) -> dict[str, Any]:
        """The `changes[]` entry of `apprafter plan --format json`."""
        return {"rule": self.rule, "field": self.field, "classification": self.classification,
                "from": self.from_, "to": self.to, "reason": self.reason}


@dataclasses.dataclass(frozen=True)
class Subject:
    """What a plan is about: an application in one environment, the platform stack (name = PlatformStack), or a
    SourceCredential (name = the credential)."""

    scope: Scope
    name: str
    namespace: str | None = None
    environment: str | None = None  # application scope
    from_version: str | None = None  # platform scope
    to_version: str | None = None

    def hash_key(self) -> dict[str, Any]:
        """What the approval hash binds besides the changes (never the namespace: CI may not know it)."""
        if self.scope == "application":
            return {"type": "application", "name": self.name, "environment": self.environment}
        return {"type": self.scope, "name": self.name}


@dataclasses.dataclass(frozen=True)
class Plan:
    """The roll-up of one comparison; built by roll_up, read by the CLI and the reconcilers."""

    subject: Subject
    changes: tuple[Change, ...]
    primary: str
    classifications: tuple[str, ...]
    approved_spec_hash: str | None

    @property
    def gated(self) -> bool:
        return self.approved_spec_hash is not None

    @property
    def gated_changes(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if is_gated(c.classification))


def canonical(value: Any) -> str:
    """The canonical encoding the approval hash is taken over: sorted keys, no spaces, ASCII, no NaN."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def spec_hash(changes: Iterable[Change], subject: Subject) -> str | None:
    """sha256 over the gated changes only (rule, field, from, to), in canonical order; None when none gate."""
    gated = sorted(canonical({"rule": c.rule, "field": c.field, "from": c.from_, "to": c.to})
                   for c in changes if is_gated(c.classification))
    if not gated:
        return None
    payload = '{"changes":[' + ",".join(gated) + '],"subject":' + canonical(subject.hash_key()) + "}"
    return "sha256:" + hashlib.sha256(payload.encode()).hexdigest()


def _order(change: Change) -> tuple[int, str, str, str]:
    """Highest class first, then by field and rule: the order plans are printed in."""
    return (-rank(change.classification, _scope_of(change)), change.field, change.rule, canonical(change.to))


def _scope_of(change: Change) -> Scope:
    if change.rule.startswith("AR-PS"):
        return "platform"
    return "credential" if change.rule.startswith("AR-SC") else "application"


def roll_up(changes: Iterable[Change], subject: Subject) -> Plan:
    """primary = the highest class present (safe for none), classifications = distinct classes highest first,
    changes = every change (soft ones too), approvedSpecHash over the gated ones."""
    items = list(changes)
    for change in items:
        if change.rule not in RULES:
            raise ValueError(f"unknown rule id {change.rule!r}")
        if _scope_of(change) != subject.scope:
            raise ValueError(f"rule {change.rule} does not belong to {subject.scope} scope")
    classes = ranked((c.classification for c in items), subject.scope)
    return Plan(subject, tuple(sorted(items, key=_order)), classes[0] if classes else SAFE, tuple(classes),
                spec_hash(items, subject))


def plan_json(plan: Plan, migration_plan: dict[str, Any] | None) -> dict[str, Any]:
    """The document `apprafter plan --format json` prints (issue #6, exact keys)."""
    return {
        "environment": plan.subject.environment or "",
        "gated": plan.gated,
        "primary": plan.primary,
        "classifications": list(plan.classifications),
        "changes": [c.to_json() for c in plan.changes],
        "approvedSpecHash": plan.approved_spec_hash,
        "migrationPlan": migration_plan if plan.gated else None,
    }
