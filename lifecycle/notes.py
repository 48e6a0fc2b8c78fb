"""Events a decision asks the edge to record on the object: reason, text, and the occurrence key that makes a
retried pass record it once."""

from __future__ import annotations

from typing import Literal, NamedTuple

__all__ = ["Note"]


class Note(NamedTuple):
    reason: str
    text: str
    occurrence: str
    type: Literal["Normal", "Warning"] = "Normal"
