"""What the API server or the kubeconfig refused, in the one error tree (toolchain.errors) with its retry class."""

from __future__ import annotations

from toolchain.errors import ToolFailure

__all__ = ["RETRYABLE_CODES", "KubeConfigError", "KubeError"]

# Worth retrying as is: no answer (0), a conflict, throttling, and the server's own failures (>= 500).
RETRYABLE_CODES = frozenset({0, 409, 429})


class KubeConfigError(ToolFailure):
    """No usable kubeconfig (exit 2: an environment problem, with what was tried). Retrying does not help."""

    retry = False


class KubeError(ToolFailure):
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
