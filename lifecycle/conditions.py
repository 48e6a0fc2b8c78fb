"""meta/v1 Conditions as `kubectl describe` shows them (lastTransitionTime moves only when status changes), and the
status document a controller writes: its conditions, fields and the generation they are for."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, NamedTuple

__all__ = ["MAX_MESSAGE", "Condition", "ConditionStatus", "StatusUpdate", "by_type", "carried", "condition_status",
           "find_condition", "kept", "render", "status_document"]

ConditionStatus = Literal["True", "False", "Unknown"]
MAX_MESSAGE = 1024  # meta/v1 allows 32 KiB; a condition is read in `kubectl describe`


class Condition(NamedTuple):
    """One condition as computed now (without times)."""

    type: str
    status: ConditionStatus
    reason: str
    message: str


class StatusUpdate(NamedTuple):
    """The whole status a pass writes (fields left out are removed: every one of them is the controller's)."""

    conditions: Sequence[Condition]
    fields: Mapping[str, Any]  # None values are left out
    generation: int  # observedGeneration


def condition_status(value: Any) -> ConditionStatus:
    return "True" if value == "True" else "False" if value == "False" else "Unknown"


def by_type(conditions: Any) -> dict[str, Mapping[str, Any]]:
    """A conditions list as an object's status holds it (anyone's: ours, a Deployment's, Argo CD's), by type; an entry
    that is not an object, or a value that is not a list, counts as none."""
    if not isinstance(conditions, Iterable):
        return {}
    return {str(c.get("type")): c for c in conditions if isinstance(c, Mapping)}


def find_condition(conditions: Any, type_: str) -> Mapping[str, Any]:
    """The condition of `type_` in a conditions list ({} when there is none)."""
    return by_type(conditions).get(type_) or {}


def carried(previous: Iterable[Mapping[str, Any]] | None, *types: str) -> list[Condition]:
    """Previous conditions of these types, unchanged (in the order of `types`)."""
    found = by_type(previous)
    return [Condition(t, condition_status(found[t].get("status")), str(found[t].get("reason")),
                      str(found[t].get("message"))) for t in types if t in found]


def kept(status: Mapping[str, Any], *fields: str) -> dict[str, Any]:
    """Status fields carried over as they are (an apply that leaves out a field we own removes it)."""
    return {k: status[k] for k in fields if k in status}


def render(conditions: Iterable[Condition], previous: Iterable[Mapping[str, Any]], generation: int,
           timestamp: str) -> list[dict[str, Any]]:
    """The conditions list to write: each keeps its previous lastTransitionTime while its status holds."""
    before = by_type(previous)
    out = []
    for c in conditions:
        old = before.get(c.type) or {}
        since = old.get("lastTransitionTime") if old.get("status") == c.status else None
        message = c.message if len(c.message) <= MAX_MESSAGE else c.message[: MAX_MESSAGE - 1] + "…"
        out.append({"type": c.type, "status": c.status, "observedGeneration": generation,
                    "lastTransitionTime": str(since) if since else timestamp, "reason": c.reason, "message": message})
    return out


def status_document(update: StatusUpdate, previous: Mapping[str, Any], timestamp: str) -> dict[str, Any]:
    """The status to apply: observedGeneration, the rendered conditions (times kept from `previous`), the fields."""
    return {"observedGeneration": update.generation,
            "conditions": render(update.conditions, previous.get("conditions") or [], update.generation, timestamp),
            **{k: v for k, v in update.fields.items() if v is not None}}
