"""What the claim binder asks of a backend the operator runs itself (redis-server, storage-class; cloudnative-pg
when it is built): whether it serves a claim, provision it, and drop a deleted claim's data when lifecycle.retention
says it may go."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from lifecycle.conditions import Condition

__all__ = ["ClaimBackend", "drop_pg_database_and_role"]


class ClaimBackend(Protocol):
    """One backend of the operator's own. `drop` is the per-backend "drop data" hook: None once the claim's data is
    gone (or was never there), else why not yet (the claim's deletion waits, retried with backoff; nothing secret
    in it)."""

    backend: str  # the ServiceProvider spec.backend it serves

    def serves(self, claim: Mapping[str, Any], provider: Mapping[str, Any] | None) -> bool: ...

    async def provision(self, claim: Mapping[str, Any], provider: Mapping[str, Any]) -> tuple[
            Condition | Sequence[Condition], Mapping[str, Any]]: ...

    async def drop(self, claim: Mapping[str, Any], provider: Mapping[str, Any] | None) -> str | None: ...


async def drop_pg_database_and_role(claim: Mapping[str, Any], provider: Mapping[str, Any] | None) -> str | None:
    """THE HOOK the cloudnative-pg backend fills (issue 31 item 2, branch i31-pg): drop the claim's database and its
    role on the provider's shared Cluster (`DROP DATABASE ... WITH (FORCE)`, then `DROP ROLE`, or deleting the
    CloudNativePG `Database` and the managed role with `ensure: absent`), and its connection Secret goes with the
    claim (owned by it). Its backend class's `drop` calls this. Until it is built no pg claim is provisioned, so none
    carries the finalizer and nothing calls it; should one, the claim's deletion waits and says so."""
    return ("the cloudnative-pg backend does not drop a claim's database and role yet (issue 31 item 2): the data "
            "stays; remove the finalizer apprafter.io/backend-data by hand to let the claim go")
