"""The change classes and their ranking per scope (spec §3.8): which class wins a plan's primary, which gate."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from toolchain.errors import AppRafterError

__all__ = [
    "BREAKING", "DATA_MIGRATION", "RANKS", "REQUIRES_RESTART", "REVIEW", "SAFE", "SECURITY_BOUNDARY", "UNGATED",
    "Scope", "UnknownClass", "is_gated", "is_reviewed", "rank", "ranked"
]

Scope = Literal["application", "platform", "credential"]

SAFE = "safe"
# Applies without approval like safe, but is what a reviewer looks at (issue 33): a new claim. Application scope only.
REVIEW = "review"
REQUIRES_RESTART = "requires-restart"
DATA_MIGRATION = "data-migration"
SECURITY_BOUNDARY = "security-boundary"
BREAKING = "breaking"

# Lowest to highest. security-boundary ranks above data-migration (ADR 0052: a data-loss change is
# coverable by backups, a leaked credential or a widened exposure is not); platform and credential scope have
# breaking.
RANKS: dict[Scope, tuple[str, ...]] = {
    "application": (SAFE, REVIEW, REQUIRES_RESTART, DATA_MIGRATION, SECURITY_BOUNDARY),
    "platform": (SAFE, REQUIRES_RESTART, DATA_MIGRATION, BREAKING),
    # A SourceCredential (spec §3.12): what it stops covering breaks the clone or the pull of whoever used it.
    "credential": (SAFE, BREAKING),
}


class UnknownClass(AppRafterError):
    """A classification that the scope does not rank (fail closed: never read as safe)."""


def rank(classification: str, scope: Scope) -> int:
    """Position of a class in its scope's ranking; UnknownClass for anything else."""
    order = RANKS[scope]
    if classification not in order:
        raise UnknownClass(f"{classification!r} is not a {scope}-scope class (one of {', '.join(order)})")
    return order.index(classification)


# The classes that apply without approval; every other class gates (a MigrationPlan, approvedSpecHash).
UNGATED = frozenset({SAFE, REVIEW})


def is_gated(classification: str) -> bool:
    """Every class except safe and review needs approval."""
    return classification not in UNGATED


def is_reviewed(classification: str) -> bool:
    """Every class except safe is listed for review: the gated ones and review."""
    return classification != SAFE


def ranked(classes: Iterable[str], scope: Scope) -> list[str]:
    """The distinct classes, highest first."""
    return sorted(set(classes), key=lambda c: rank(c, scope), reverse=True)
