"""The runtime's own error tree: what the API server or the kubeconfig refused, each error with its retry class
(controller_runtime.outcomes.Classified). The program the runtime runs in maps them onto its own errors."""

from __future__ import annotations

__all__ = ["RETRYABLE_CODES", "KubeConfigError", "KubeError", "KubeFailure"]

# Worth retrying as is: no answer (0), a conflict, throttling, and the server's own failures (>= 500).
RETRYABLE_CODES = frozenset({0, 409, 429})


class KubeFailure(Exception):
    """Base of the runtime's errors: the cluster or the way to it failed; `retryable` says whether the same call may
    succeed later without anyone changing anything."""

    @property
    def retryable(self) -> bool:
        return False


class KubeConfigError(KubeFailure):
    """No usable kubeconfig (an environment problem, with what was tried). Retrying does not help."""


class KubeError(KubeFailure):
    """The API server refused a request or could not be reached; `code` is the HTTP status (0: no answer)."""

    def __init__(self, message: str, code: int = 0, reason: str = "", retry_after: float | None = None,
                 detail: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.detail = detail or message  # the server's own words (its Status message), without what we asked
        self.retry_after = retry_after  # the server's Retry-After, in seconds, when it sent one

    @property
    def retryable(self) -> bool:
        return self.code in RETRYABLE_CODES or self.code >= 500
