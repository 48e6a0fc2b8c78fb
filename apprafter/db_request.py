"""Following a request a `db` command wrote on a claim's annotation (`<request>@<what>`: a restore, a kept
generation's drop) to its data-migration plan and, with `--wait`, to its end: one flow for both commands."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from apprafter.cluster import wait_for
from apprafter.repo_login import environment as environment_failure
from apprafter.repo_login import fail

if TYPE_CHECKING:
    from controller_runtime.client import Kube

__all__ = ["Followed", "follow"]


class Followed:
    """What one kind of request is: its name in messages (`restore`, `drop`), where the claim says it is
    (`status_of`) and who asked (`asked_of`), the phases that answer it and end it, and what a later request over
    it means (`taken_over_ok`: the later one wins, exit 0; else a failure)."""

    def __init__(self, what: str, status_of: Callable[[dict[str, Any] | None], dict[str, Any]],
                 asked_of: Callable[[dict[str, Any] | None], str | None], opened: tuple[str, ...],
                 ended: tuple[str, ...], before: str, *, taken_over_ok: bool) -> None:
        self.what, self.status_of, self.asked_of = what, status_of, asked_of
        self.opened, self.ended, self.before, self.taken_over_ok = opened, ended, before, taken_over_ok


async def follow(kube: Kube, kind: Followed, where: str, name: str, namespace: str, request: str, wait: bool,
                 timeout: float) -> None:
    """Wait for the operator's answer to `request` (its plan, printed with the command that approves it), then,
    with `wait`, for its end; each wait bounded by `timeout` (an environment failure past it, exit 2)."""
    from renderer.crds import RESOURCE_CLAIM

    ours = f"{request}@"

    def mine(obj: dict[str, Any] | None) -> bool:
        return str(kind.asked_of(obj) or "").startswith(ours)

    def answered(obj: dict[str, Any] | None, phases: tuple[str, ...]) -> bool:
        said = kind.status_of(obj)
        return obj is None or not mine(obj) or (said.get("requested") == request and said.get("phase") in phases)

    def ended(said: dict[str, Any]) -> None:
        if said.get("phase") == "Failed":
            raise fail(where, f"{kind.what} {request}: {said.get('message')}")

    done = await wait_for(kube, RESOURCE_CLAIM, name, namespace, lambda obj: answered(obj, kind.opened), timeout)
    if done is None:
        raise environment_failure(f"{where}: {kind.what} {request} not answered within {timeout:g}s",
                                  "is the operator running? (`kubectl -n apprafter-system get pods`); the "
                                  "request stays on the claim")
    if not done:
        raise fail(where, f"deleted while its {kind.what} was being requested")
    if not mine(done):
        if not kind.taken_over_ok:
            raise fail(where, f"another request took over while the {kind.what} was being requested")
        sys.stdout.write(f"{where}: a later request ({kind.asked_of(done) or 'none'}) took over\n")
        return
    said = kind.status_of(done)
    ended(said)
    plan = said.get("plan")
    sys.stdout.write(f"{where}: {said.get('message')}\n" if said.get("phase") != "AwaitingApproval" else
                     f"{where}: MigrationPlan {plan} awaits approval; {kind.before}:\n"
                     f"  apprafter migration approve {plan} -n {namespace}\n")
    sys.stdout.flush()
    if not wait or said.get("phase") in kind.ended:
        return
    done = await wait_for(kube, RESOURCE_CLAIM, name, namespace, lambda obj: answered(obj, kind.ended), timeout)
    if done is None:
        now = kind.status_of(await kube.get(RESOURCE_CLAIM, name, namespace)).get("message")
        raise environment_failure(f"{where}: {kind.what} {request} not done within {timeout:g}s ({now})",
                                  f"approve its plan; the {kind.what} goes on without this command")
    if not done or not mine(done):
        raise fail(where, f"deleted, or another request took over, during the {kind.what}")
    said = kind.status_of(done)
    ended(said)
    sys.stdout.write(f"{where}: {said.get('message')}\n")
