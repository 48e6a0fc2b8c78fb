"""What a reconcile tells the loop: done (and when an external check falls due, if one does), requeue (with backoff,
or after a delay), or terminal (nothing to retry until the object changes). Exceptions map onto the same outcomes by
their retry class, in one place."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple, Protocol, runtime_checkable

__all__ = ["Classified", "Done", "NextCheck", "Outcome", "Requeue", "Terminal", "outcome_of", "soonest"]


class NextCheck(NamedTuple):
    """When an object is due for its next look at something no watch reports (a registry, a repository, a vault):
    `seconds` from the decision's `now` (0: due now). Made by the cores, their clock passed in; Done carries it."""

    seconds: float

    @classmethod
    def now(cls) -> NextCheck:
        return cls(0.0)

    @classmethod
    def after_last(cls, last: float, interval: float, now: float) -> NextCheck:
        """`interval` seconds after the last look at `last` (both on the clock `now` is read from)."""
        return cls(max(0.0, last + interval - now))

    @property
    def due(self) -> bool:
        return self.seconds <= 0.0


def soonest(checks: Iterable[NextCheck]) -> NextCheck | None:
    """The first of several checks to fall due (None: there is none)."""
    return min(checks, default=None)


class Done(NamedTuple):
    """Reconciled; look again when `after` falls due if given (a periodic check), else at the next event or
    resync."""

    after: NextCheck | None = None


class Requeue(NamedTuple):
    """Not finished for a reason that may pass by itself: again after `after` seconds, or with capped exponential
    backoff when None."""

    reason: str
    after: float | None = None


class Terminal(NamedTuple):
    """Cannot go further until the object (or something it depends on) changes; its status says why."""

    reason: str


Outcome = Done | Requeue | Terminal


@runtime_checkable
class Classified(Protocol):
    """An error that knows its retry class: whether the same reconcile may succeed later without anyone changing
    anything (a server's Retry-After, as `retry_after`, when it sent one). Any error tree can provide it."""

    @property
    def retryable(self) -> bool: ...


def outcome_of(error: Classified) -> Requeue | Terminal:
    """An error raised out of a reconcile: requeued when its retry class says it may pass, else terminal. The
    server's Retry-After, when it sent one, is the delay."""
    if error.retryable:
        return Requeue(str(error), getattr(error, "retry_after", None))
    return Terminal(str(error))
