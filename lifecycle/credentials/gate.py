"""Which SourceCredential changes need a MigrationPlan (spec §3.8, §3.12), decided without a cluster: the coverage
last applied (the credential's status) against the spec's, and who loses it — an Argo CD Application whose
repository a removed or narrowed prefix covered, an Application whose rendered image a removed or narrowed host
covered, an Application in a namespace the registry half's scope no longer lists, an Argo CD Application of a
project the git half's scope no longer lists, or any of them when the credential is deleted. A rotation of the
material changes no coverage; a widening or the removal of an entry nobody matches is soft."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from compatibility.plan import Change, Plan, Subject, roll_up
from lifecycle.credentials.coverage import Coverage, User, applied_coverage, coverage_of, covered
from lifecycle.credentials.spec import in_scope, read

__all__ = ["credential_plan", "planned"]

HALF_FIELDS = {"git": "git.repoPrefixes", "registry": "registry.hosts"}
LOST_RULE = {"git": "AR-SC001", "registry": "AR-SC002"}
# Each half's scope: its field, its rule, and what of a user it is matched on (the workload's namespace, the Argo CD
# Application's project).
SCOPES = {"registry": ("registry.namespaces", "AR-SC004", "namespaces", "namespace"),
          "git": ("git.projects", "AR-SC005", "projects", "project")}


def _scope(coverage: Coverage, half: str) -> Sequence[str] | None:
    return getattr(coverage, SCOPES[half][2])  # type: ignore[no-any-return]


def _in(scope: Sequence[str] | None, half: str, user: User) -> bool:
    return in_scope(scope, getattr(user, SCOPES[half][3]))


def _lost(half: str, before: Sequence[str] | None, after: Sequence[str] | None, users: Iterable[User],
          scope: Sequence[str] | None = None) -> list[str]:
    """Who the half covered before (only in the scope it had) and no longer does, sorted."""
    return sorted({u.who for u in users if u.half == half and covered(half, before, u.target)
                   and _in(scope, half, u) and not covered(half, after, u.target)})


def _scoped_out(half: str, baseline: Coverage, desired: Coverage, users: Iterable[User]) -> list[str]:
    """Who a half served before and still covers by entry, whose namespace (project) its new scope leaves out."""
    return sorted({u.who for u in users if u.half == half and covered(half, getattr(baseline, half), u.target)
                   and _in(_scope(baseline, half), half, u) and covered(half, getattr(desired, half), u.target)
                   and not _in(_scope(desired, half), half, u)})


def _change(rule: str, field: str, before: Sequence[str] | None, after: Sequence[str] | None,
            lost: Sequence[str]) -> Change:
    """A change of one field (a side None: absent), gated under `rule` when someone loses by it, else AR-SC000."""
    sides = (list(before) if before is not None else None, list(after) if after is not None else None)
    if lost:
        shown = ", ".join(lost[:5]) + (f" and {len(lost) - 5} more" if len(lost) > 5 else "")
        return Change(rule, field, *sides, f"{shown} would no longer be covered")
    return Change("AR-SC000", field, *sides, "no Application loses its coverage")


def credential_plan(credential: str, namespace: str, baseline: Coverage | None, desired: Coverage | None,
                    users: Sequence[User]) -> Plan | None:
    """The credential-scope plan from the last-applied coverage to the spec's (`desired` None: the credential is
    being deleted), None when nothing was applied yet (there is nothing to take away). A half's change is gated
    (breaking) when someone it covered loses the coverage, soft otherwise; a deletion that takes anything from
    anyone adds AR-SC003. A half's scope is a change of its own while the half stays: the registry's namespaces
    (AR-SC004 when an Application in a namespace it leaves out loses its pull secret), git's Argo CD projects
    (AR-SC005 when an Argo CD Application of a project it leaves out loses its login); an entry change counts only
    the users in the scope the half had. The reason names who loses it (names and URLs only, never material)."""
    if baseline is None:
        return None
    changes: list[Change] = []
    for half in ("git", "registry"):
        before = getattr(baseline, half)
        after = getattr(desired, half) if desired is not None else None
        if before == after or (not before and not after):
            continue
        changes.append(_change(LOST_RULE[half], HALF_FIELDS[half], before, after,
                               _lost(half, before, after, users, _scope(baseline, half))))
    for half in ("git", "registry"):
        field, rule, _, _ = SCOPES[half]
        if (desired is not None and getattr(baseline, half) and getattr(desired, half)
                and _scope(baseline, half) != _scope(desired, half)):
            changes.append(_change(rule, field, _scope(baseline, half), _scope(desired, half),
                                   _scoped_out(half, baseline, desired, users)))
    if desired is None and any(c.rule != "AR-SC000" for c in changes):
        changes.append(Change("AR-SC003", "metadata.deletionTimestamp", None, "set",
                              f"SourceCredential {credential} is being deleted"))
    return roll_up(changes, Subject("credential", credential, namespace))


def planned(live: Mapping[str, Any], desired: Mapping[str, Any] | None, users: Sequence[User]) -> Plan | None:
    """The plan of a change to the SourceCredential `live` (its status holds the coverage last applied) into
    `desired` (a SourceCredential document; None: `live` deleted): what the operator's gate decides on and what
    `apprafter repo creds` predicts, one answer."""
    meta = live["metadata"]
    return credential_plan(meta["name"], meta["namespace"], applied_coverage(live.get("status")),
                           coverage_of(read(desired)) if desired is not None else None, users)
