"""What a reconcile tells the loop: done (maybe look again later), requeue (with backoff, or after a delay), or
terminal (nothing to retry until the object changes). Exceptions map onto the same outcomes, in one place."""

from __future__ import annotations

from typing import NamedTuple

from toolchain.errors import AppRafterError

__all__ = ["Done", "Outcome", "Requeue", "Terminal", "outcome_of"]


class Done(NamedTuple):
    """Reconciled; look again after `after` seconds if given (a periodic check), else at the next event or resync."""

    after: float | None = None


class Requeue(NamedTuple):
    """Not finished for a reason that may pass by itself: again after `after` seconds, or with capped exponential
    backoff when None."""

    reason: str
    after: float | None = None


class Terminal(NamedTuple):
    """Cannot go further until the object (or something it depends on) changes; its status says why."""

    reason: str


Outcome = Done | Requeue | Terminal


def outcome_of(error: AppRafterError) -> Requeue | Terminal:
    """An error raised out of a reconcile: requeued when its retry class says it may pass, else terminal. The
    server's Retry-After, when it sent one, is the delay."""
    if error.retryable:
        return Requeue(str(error), getattr(error, "retry_after", None))
    return Terminal(str(error))
