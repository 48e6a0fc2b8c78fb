"""Which SourceCredential changes need a MigrationPlan (spec §3.8, §3.12), decided without a cluster: the coverage
last applied (the credential's status) against the spec's, and who loses it — an Argo CD Application whose
repository a removed or narrowed prefix covered, an Application whose rendered image a removed or narrowed host
covered, an Application in a namespace the registry half's scope no longer lists, or any of them when the credential
is deleted. A rotation of the material changes no coverage; a widening or the removal of an entry nobody matches is
soft."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from compatibility.plan import Change, Plan, Subject, roll_up
from lifecycle.git_urls import template_covers
from lifecycle.sourcecredential import Credential, argocd_url, in_scope, pull_key
from renderer.imageref import split_image

__all__ = ["Coverage", "User", "applied_coverage", "coverage_of", "covers_image", "covers_repository",
           "credential_plan", "image_users", "repository_users"]

HALF_FIELDS = {"git": "git.repoPrefixes", "registry": "registry.hosts"}
LOST_RULE = {"git": "AR-SC001", "registry": "AR-SC002"}
SCOPE_FIELD, SCOPE_RULE = "registry.namespaces", "AR-SC004"


class Coverage(NamedTuple):
    """What a credential covers, as derived: Argo CD's url prefixes and the pull secret's host keys (None: no half),
    and the registry half's namespaces (None: every namespace)."""

    git: tuple[str, ...] | None
    registry: tuple[str, ...] | None
    namespaces: tuple[str, ...] | None = None


class User(NamedTuple):
    """Something a credential's coverage serves: who (for the plan's reason), the repository URL or image, and for
    an image the namespace it runs in."""

    who: str
    half: str  # "git" (a repository URL) | "registry" (an image reference)
    target: str
    namespace: str = ""


def coverage_of(credential: Credential) -> Coverage:
    """The coverage a credential's spec asks for."""
    registry = credential.registry
    return Coverage(tuple(sorted({argocd_url(p) for p in credential.git.covers})) if credential.git else None,
                    tuple(sorted({pull_key(h) for h in registry.covers})) if registry else None,
                    tuple(sorted(set(registry.namespaces))) if registry and registry.namespaces is not None
                    else None)


def _strings(entries: Any) -> tuple[str, ...] | None:
    return tuple(sorted(e for e in entries if isinstance(e, str))) if isinstance(entries, list) else None


def applied_coverage(status: Mapping[str, Any] | None) -> Coverage | None:
    """The coverage last applied, as the status records it (the gate's baseline); None before the first pass wrote
    it. An entry that is not a string is dropped (a status only the operator writes); a status without the registry
    half's namespaces (absent, or written before the field existed) applied it to every namespace."""
    status = status or {}
    halves: dict[str, Mapping[str, Any] | None] = {
        half: body if isinstance(body := status.get(half), Mapping) else None for half in ("git", "registry")}
    git = _strings((halves["git"] or {}).get("repoPrefixes"))
    registry = _strings((halves["registry"] or {}).get("hosts"))
    if git is None and registry is None:
        return None
    return Coverage(git, registry, _strings((halves["registry"] or {}).get("namespaces")) if registry else None)


def covers_repository(prefixes: Iterable[str], url: str) -> bool:
    """Whether Argo CD would serve a repository URL from a template of one of the prefixes (its normalised
    longest-prefix rule, lifecycle.git_urls)."""
    return template_covers(prefixes, url)


def covers_image(keys: Iterable[str], image: str) -> bool:
    """Whether an image's repository (Docker Hub names normalised) is a host key or lies below one, path component
    by component (ghcr.io/my does not cover ghcr.io/myorg/app)."""
    repository, _, _ = split_image(image)
    return any(repository == key or repository.startswith(key + "/") for key in keys)


def _covered(half: str, entries: Sequence[str] | None, target: str) -> bool:
    if not entries:
        return False
    return covers_repository(entries, target) if half == "git" else covers_image(entries, target)


def repository_users(argo_applications: Iterable[Mapping[str, Any]]) -> list[User]:
    """Every repository an Argo CD Application syncs (spec.source and spec.sources[]), as git users."""
    out = []
    for app in argo_applications:
        spec = app.get("spec") or {}
        sources = [spec.get("source"), *(spec.get("sources") or [])]
        who = f"Argo CD Application {app['metadata'].get('namespace', '')}/{app['metadata']['name']}"
        out += [User(who, "git", str(s["repoURL"])) for s in sources if isinstance(s, Mapping) and s.get("repoURL")]
    return out


def image_users(images: Iterable[tuple[str, str, str]]) -> list[User]:
    """(who, rendered image, namespace) of each Application's workload, as registry users."""
    return [User(who, "registry", image, namespace) for who, image, namespace in images]


def _lost(half: str, before: Sequence[str] | None, after: Sequence[str] | None, users: Iterable[User],
          scope: Sequence[str] | None = None) -> list[str]:
    """Who the half covered before (a registry user only in the scope it had) and no longer does, sorted."""
    return sorted({u.who for u in users if u.half == half and _covered(half, before, u.target)
                   and (half == "git" or in_scope(scope, u.namespace)) and not _covered(half, after, u.target)})


def _scoped_out(baseline: Coverage, desired: Coverage, users: Iterable[User]) -> list[str]:
    """Who the registry half served before and still covers by host, in a namespace its new scope leaves out."""
    return sorted({u.who for u in users if u.half == "registry" and _covered("registry", baseline.registry, u.target)
                   and in_scope(baseline.namespaces, u.namespace) and _covered("registry", desired.registry,
                                                                                    u.target)
                   and not in_scope(desired.namespaces, u.namespace)})


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
    anyone adds AR-SC003. The registry half's namespaces are a change of their own while the half stays (AR-SC004
    when an Application in a namespace it leaves out loses its pull secret); a host change counts only the
    Applications in the scope the half had. The reason names who loses it (names and URLs only, never material)."""
    if baseline is None:
        return None
    changes: list[Change] = []
    for half in ("git", "registry"):
        before = getattr(baseline, half)
        after = getattr(desired, half) if desired is not None else None
        if before == after or (not before and not after):
            continue
        changes.append(_change(LOST_RULE[half], HALF_FIELDS[half], before, after,
                               _lost(half, before, after, users, baseline.namespaces)))
    if (desired is not None and baseline.registry and desired.registry
            and baseline.namespaces != desired.namespaces):
        changes.append(_change(SCOPE_RULE, SCOPE_FIELD, baseline.namespaces, desired.namespaces,
                               _scoped_out(baseline, desired, users)))
    if desired is None and any(c.rule != "AR-SC000" for c in changes):
        changes.append(Change("AR-SC003", "metadata.deletionTimestamp", None, "set",
                              f"SourceCredential {credential} is being deleted"))
    return roll_up(changes, Subject("credential", credential, namespace))
