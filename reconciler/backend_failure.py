"""A platform-service backend's failure as a reconcile sees it: unreachable (may pass) or refused (will not).

Outside toolchain.errors' tree on purpose: it never reaches the CLI, only a claim's reconcile, where
`controller_runtime.outcomes.Classified` (the `retryable` property) decides Requeue or Terminal, and `reason` becomes
the claim's condition reason.
"""

from __future__ import annotations

__all__ = ["REFUSED", "UNREACHABLE", "WEDGED", "BackendFailure"]

UNREACHABLE = "BackendUnreachable"  # connection refused, timeout, 5xx: the same call may succeed later
REFUSED = "BackendRefused"  # the backend said no (a 4xx): not until someone changes something
WEDGED = "InstanceWedged"  # a shared server serves no one until its administrator acts (or what holds it ends)


class BackendFailure(Exception):
    """A backend could not be reached (`reason` BackendUnreachable) or refused what was asked (BackendRefused); the
    message names the endpoint and the operation, never a secret."""

    def __init__(self, reason: str, message: str) -> None:
        if reason not in (UNREACHABLE, REFUSED, WEDGED):
            raise ValueError(f"unknown backend failure reason {reason!r}")
        super().__init__(message)
        self.reason = reason

    @property
    def retryable(self) -> bool:
        return self.reason in (UNREACHABLE, WEDGED)
