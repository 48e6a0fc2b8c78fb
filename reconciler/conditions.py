"""meta/v1 Conditions as `kubectl describe` shows them: lastTransitionTime moves only when status changes."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable, Mapping
from typing import Any, Literal

Status = Literal["True", "False", "Unknown"]
MAX_MESSAGE = 1024  # meta/v1 allows 32 KiB; a condition is read in `kubectl describe`


@dataclasses.dataclass(frozen=True)
class Condition:
    """One condition as computed now (without times)."""

    type: str
    status: Status
    reason: str
    message: str


def now() -> str:
    """RFC 3339 in UTC, seconds (meta/v1 Time)."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def render(conditions: Iterable[Condition], previous: Iterable[Mapping[str, Any]], generation: int,
           timestamp: str) -> list[dict[str, Any]]:
    """The conditions list to write: each keeps its previous lastTransitionTime while its status holds."""
    before = {c.get("type"): c for c in previous if isinstance(c, Mapping)}
    out = []
    for c in conditions:
        old = before.get(c.type) or {}
        kept = old.get("lastTransitionTime") if old.get("status") == c.status else None
        message = c.message if len(c.message) <= MAX_MESSAGE else c.message[: MAX_MESSAGE - 1] + "…"
        out.append({"type": c.type, "status": c.status, "observedGeneration": generation,
                    "lastTransitionTime": str(kept) if kept else timestamp, "reason": c.reason, "message": message})
    return out
