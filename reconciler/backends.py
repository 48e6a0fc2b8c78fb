"""What the claim binder asks of a backend the operator runs itself (redis-server, storage-class,
cloudnative-pg): whether it serves a claim, provision it, and drop a deleted claim's data when lifecycle.retention
says it may go."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from lifecycle.conditions import Condition

__all__ = ["ClaimBackend"]


class ClaimBackend(Protocol):
    """One backend of the operator's own. `drop` is the per-backend "drop data" hook: None once the claim's data is
    gone (or was never there), else why not yet (the claim's deletion waits, retried with backoff; nothing secret
    in it)."""

    backend: str  # the ServiceProvider spec.backend it serves

    def serves(self, claim: Mapping[str, Any], provider: Mapping[str, Any] | None) -> bool: ...

    async def provision(self, claim: Mapping[str, Any], provider: Mapping[str, Any]) -> tuple[
            Condition | Sequence[Condition], Mapping[str, Any]]: ...

    async def drop(self, claim: Mapping[str, Any], provider: Mapping[str, Any] | None) -> str | None: ...
