"""Platform scope (§3.8, §3.11): roll per-component results of `apprafter stack classify` into the same Plan.

The input is deliberately plain so the platform classifier can call this without importing anything else
from this package:

    PlatformChange(component="cnpg", field="values.image.tag", from_="1.24.1", to="1.25.0",
                   classification="data-migration", reason="1.25.0: data-migration")

`classification` is one of safe | requires-restart | data-migration | breaking (anything else raises
UnknownClass: fail closed). Each change gets the platform rule for its class (AR-PS000..AR-PS003).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from compatibility.classes import rank
from compatibility.plan import Change, Plan, Subject, roll_up
from compatibility.rules import PLATFORM_RULE_BY_CLASS
from compatibility.shape import json_value

__all__ = ["PlatformChange", "roll_up_platform"]

PLATFORM_STACK = "default"


@dataclasses.dataclass(frozen=True)
class PlatformChange:
    """One platform-scope result: component, field path within it (or "" for the whole component),
    both sides (None when absent), the class the stack classifier gave and its one-line reason."""

    component: str
    field: str
    from_: Any
    to: Any
    classification: str
    reason: str


def to_change(item: PlatformChange) -> Change:
    """The Change for one platform result (field `components.<component>[.<field>]`)."""
    rank(item.classification, "platform")  # UnknownClass for anything the platform scope does not rank
    json_value(item.from_, "from")
    json_value(item.to, "to")
    field = f"components.{item.component}" + (f".{item.field}" if item.field else "")
    return Change(PLATFORM_RULE_BY_CLASS[item.classification].id, field, item.from_, item.to, item.reason)


def roll_up_platform(items: Iterable[PlatformChange], from_version: str, to_version: str,
                     stack: str = PLATFORM_STACK) -> Plan:
    """The platform-scope Plan: same primary/classifications/changes/hash rules as application scope."""
    subject = Subject("platform", stack, None, None, from_version, to_version)
    return roll_up((to_change(i) for i in items), subject)
