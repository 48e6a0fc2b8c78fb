"""What one check of the chart repository starts from and finds, as data and pure rules: the baseline that runs
(status.lastApplied, read fail-closed), a digest's verification, a finding, the verified target, a fork's upstream
news, the whole check; the registry tag of a version, a chart's components, when a running tag has moved and when
nothing needs a plan. The I/O that fills them in is platform_stack.upstream."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from compatibility.plan import Plan
from platform_stack.classify import StackSnapshot
from platform_stack.errors import StackError

__all__ = ["Baseline", "Check", "Finding", "Target", "UpstreamNews", "Verified", "components", "tag_moved",
           "unchanged", "unverified_entry", "version_tag"]


@dataclasses.dataclass(frozen=True)
class Verified:
    """The outcome of verifying one digest: the key file that matched, or cosign's reason for each key."""

    ok: bool
    key: str | None = None
    reason: str = ""


@dataclasses.dataclass(frozen=True)
class Baseline:
    """What runs (status.lastApplied): the version, its verified digest and repository, the pin, values and
    overrides it was applied with, and the plan it carried out."""

    version: str
    digest: str
    repository: str
    pin: str | None = None
    values: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    overrides: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    plan: str | None = None

    @classmethod
    def read(cls, raw: Any) -> Baseline:
        """status.lastApplied read fail-closed (StackError naming the field)."""
        if not isinstance(raw, Mapping):
            raise StackError("status.lastApplied: not a mapping")
        for field in ("version", "digest", "repository"):
            if not isinstance(raw.get(field), str) or not raw[field]:
                raise StackError(f"status.lastApplied.{field}: missing")
        for field in ("values", "overrides"):
            if not isinstance(raw.get(field, {}), Mapping):
                raise StackError(f"status.lastApplied.{field}: not a mapping")
        for field in ("pin", "plan"):
            if raw.get(field) is not None and not isinstance(raw.get(field), str):
                raise StackError(f"status.lastApplied.{field}: not a string")
        return cls(raw["version"], raw["digest"], raw["repository"], raw.get("pin"), dict(raw.get("values") or {}),
                   dict(raw.get("overrides") or {}), raw.get("plan"))

    def document(self) -> dict[str, Any]:
        """status.lastApplied of this baseline (empty fields left out)."""
        out: dict[str, Any] = {"version": self.version, "digest": self.digest, "repository": self.repository}
        out.update({k: v for k, v in (("pin", self.pin), ("values", dict(self.values)),
                                      ("overrides", dict(self.overrides)), ("plan", self.plan)) if v})
        return out


@dataclasses.dataclass(frozen=True)
class Finding:
    """Why the target cannot be applied now: a condition reason, its message, and its retry class."""

    reason: str  # VersionNotFound, NoVersionAvailable, VerificationFailed, TagMoved, InvalidSpec, InvalidChart,
    #              UnsupportedKubernetes (and the controller's: NotConfigured, KeysUnavailable, CredentialsUnavailable,
    #              RegistryUnavailable, CheckFailed)
    message: str
    # Whether a later check may find otherwise with the PlatformStack's spec unchanged (a tag pushed, the registry
    # back, a key Secret fixed): retried with backoff; else it waits for the spec to change or the next check. A
    # finding made of an error carries the error's retry class (AppRafterError.retryable).
    retryable: bool


@dataclasses.dataclass(frozen=True)
class Target:
    """A verified version to run, with the snapshot of its chart (tier and overrides of the spec applied)."""

    version: str
    digest: str
    key: str  # the key file that verified it
    components: tuple[dict[str, Any], ...]  # status.components of its chart: name, version, enabled


@dataclasses.dataclass(frozen=True)
class UpstreamNews:
    """What a fork's spec.source.upstream offers on the channel: its newest version (None: none), or why it could not
    be read. Read for availability only: nothing of it is verified, pulled or applied."""

    repository: str  # host/path of the upstream chart repository
    version: str | None
    problem: str | None = None


@dataclasses.dataclass(frozen=True)
class Check:
    """One look at the repository: what the channel offers, what did not verify, the target and the plan."""

    repository: str  # host/path of the chart repository looked at
    available: tuple[str, str] | None  # (version, digest): the newest of the channel that verifies
    unverified: tuple[dict[str, str], ...]  # {version, digest?, reason}, newest first
    target_version: str | None
    target: Target | None  # None: nothing to apply (see finding)
    finding: Finding | None
    plan: Plan | None  # running chart -> target chart; None on a first install or when nothing differs
    current_digest: str | None  # what the running version's tag names now (None: the tag is gone)
    upstream: UpstreamNews | None = None  # a fork's upstream (None: not a fork)


def version_tag(version: str) -> str:
    """The registry tag of a stack version: helm's, which writes build metadata's `+` as `_`."""
    return version.replace("+", "_")


def components(snapshot: StackSnapshot) -> tuple[dict[str, Any], ...]:
    """status.components of a chart: every component of its release entry, enabled ones with their version."""
    entry = snapshot.compatibility.get(snapshot.version) or {}
    names = sorted(set(entry.get("components") or {}) | set(snapshot.components))
    out = []
    for name in names:
        component = snapshot.components.get(name)
        if component is None:
            out.append({"name": name, "enabled": False})
        else:
            out.append({"name": name, "version": str(component["source"]["targetRevision"]), "enabled": True})
    return tuple(out)


def unverified_entry(version: str, digest: str | None, result: Verified) -> dict[str, str]:
    """status.unverifiedVersions' entry of a version that did not verify (cosign's words cut at 500)."""
    entry = {"version": version, "reason": result.reason[:500]}
    if digest is not None:
        entry["digest"] = digest
    return entry


def tag_moved(baseline: Baseline | None, target_version: str, current_digest: str | None,
              same_repository: bool) -> Finding | None:
    """TagMoved when the target is what runs, from the repository it came from, and its tag no longer names the
    digest that was verified and applied: nothing is applied until a verified version is."""
    if baseline is None or target_version != baseline.version or not same_repository \
            or current_digest == baseline.digest:
        return None
    now = f"names {current_digest}" if current_digest else "is gone"
    return Finding("TagMoved", f"tag {version_tag(baseline.version)} of the running version {now}; it was "
                   f"{baseline.digest} when verified and applied: nothing is applied until a verified "
                   "version is (pin another version)", retryable=True)


def unchanged(baseline: Baseline, version: str, digest: str, tier: str | None, overrides: Mapping[str, Any]) -> bool:
    """Whether the target is what runs, with the same tier and overrides: there is nothing to plan."""
    return (baseline.version, baseline.digest, (baseline.values or {}).get("tier"), dict(baseline.overrides or {})) \
        == (version, digest, tier, dict(overrides))
