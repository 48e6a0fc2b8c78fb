"""What `apprafter repo creds list` and `check` print of a SourceCredential: its row (coverage, each half's state,
the plan a change waits for), each half's line and the exit code they add up to, and what the SealedSecrets
controller said of material that is not Present. Never a value of the material."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from controller_runtime.kinds import GroupVersionKind
from lifecycle.conditions import by_type, find_condition
from lifecycle.credentials import reports
from lifecycle.credentials.checks import INVALID, VALID
from lifecycle.credentials.spec import Half, read
from toolchain.timestamps import age

if TYPE_CHECKING:  # the client is imported when a command runs: `--help` never pays for it
    from controller_runtime.client import Kube

__all__ = ["CHECK_INVALID", "CHECK_UNTOLD", "SEALED_SECRET", "half_lines", "row", "unsealing"]

SEALED_SECRET = GroupVersionKind("bitnami.com/v1alpha1", "SealedSecret")
# `repo creds check` exit codes beyond 1 (input) and 2 (environment): a half refused; none refused, one untold
CHECK_INVALID, CHECK_UNTOLD = 3, 4


def _half_state(obj: Mapping[str, Any], half: str) -> str:
    """A half's column: its state, `NotPresent(<reason>)` when its material was not found, `-` when not declared."""
    found = [h for h in reports.reported(obj) if h.half == half]
    if not found:
        return "-"
    return f"{reports.NOT_PRESENT}({found[0].reason})" if found[0].state == reports.NOT_PRESENT else found[0].reason


def _scope_column(half: Half | None, scope: tuple[str, ...] | None) -> str:
    """Whom a half serves: the registry half's namespaces or the git half's Argo CD projects, `<all>` (no scope), `-`
    (no such half)."""
    if half is None:
        return "-"
    return ",".join(scope) if scope is not None else "<all>"


def row(obj: Mapping[str, Any]) -> list[str]:
    """A credential's row of `repo creds list`: name, git coverage and projects, registry coverage and namespaces,
    each half's state, plan, age."""
    credential = read(obj)
    git, registry = credential.git, credential.registry
    return [obj["metadata"]["name"], ",".join(git.covers) if git else "-",
            _scope_column(git, git.projects if git else None), ",".join(registry.covers) if registry else "-",
            _scope_column(registry, registry.namespaces if registry else None),
            _half_state(obj, "git"), _half_state(obj, "registry"),
            (obj.get("status") or {}).get("migrationPlan") or "-", age(obj["metadata"].get("creationTimestamp"))]


def _unseal_failure(sealed: Mapping[str, Any] | None) -> str:
    """What the SealedSecrets controller says of a SealedSecret it could not unseal ("" when it did or is silent)."""
    if sealed is None:
        return " (no SealedSecret of that name either)"
    synced = find_condition((sealed.get("status") or {}).get("conditions"), "Synced")
    if synced.get("status") == "False":
        return f" (the SealedSecrets controller: {str(synced.get('message', ''))[:300]})"
    return ""


def half_lines(obj: Mapping[str, Any], unsealed: str = "") -> tuple[list[str], int]:
    """Each half's result, one line each, and the exit code they add up to; `unsealed` is what the SealedSecrets
    controller said of a material not Present."""
    halves = reports.reported(obj)
    lines = [f"{h.half}: not Present ({h.reason}): {h.message}{unsealed}" if h.state == reports.NOT_PRESENT
             else f"{h.half}: {h.reason} (checked {h.last_validated or 'never'}): {h.message}" for h in halves]
    return lines, {VALID: 0, INVALID: CHECK_INVALID}.get(reports.outcome(halves), CHECK_UNTOLD)


async def unsealing(kube: Kube, obj: Mapping[str, Any]) -> str:
    """What the SealedSecrets controller says of the credential's SealedSecret when a half's material is missing."""
    from controller_runtime.errors import KubeError

    credential = read(obj)
    names = {h.backend.sealed_secret for h in (credential.git, credential.registry) if h and h.backend.sealed_secret}
    halves = {h: by_type(((obj.get("status") or {}).get(h) or {}).get("conditions")) for h in ("git", "registry")}
    missing = [h for h, found in halves.items() if found and (found.get("Present") or {}).get("status") != "True"]
    if not missing or len(names) != 1:
        return ""
    try:
        return _unseal_failure(await kube.get(SEALED_SECRET, names.pop(), obj["metadata"]["namespace"]))
    except KubeError as e:
        if e.code != 404:
            raise
        return " (the cluster serves no SealedSecret kind: nothing unseals the material)"
