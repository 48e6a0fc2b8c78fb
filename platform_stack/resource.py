"""The PlatformStack resource (spec §3.11): its CRD source, the rules on the object its schema cannot hold, and
the spec as the controller reads it (defaults filled in, nothing unreadable taken as something else)."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from compatibility.versions import InvalidVersion, stack_version
from renderer.crds import AGE, CONDITIONS_LIST_MAP, STATUS_FILE, Column, CrdSource, SchemaPatch, cel, condition_column

KIND = "PlatformStack"
# One per cluster: the controller reads exactly this object.
NAME, NAMESPACE = "default", "apprafter-system"
VERSION_HISTORY_LIMIT = 10
CHANNELS = ("stable", "beta", "edge")
DEFAULT_REPOSITORY = "oci://ghcr.io/apprafter/platform-stack"
DEFAULT_CHECK_INTERVAL = 6 * 3600.0
MIN_CHECK_INTERVAL = 10.0  # a shorter interval is read as this: the registry is not polled in a tight loop
# spec.overrides.<component>.values is open (any Helm values): bounded here, in the webhook and the controller (a
# structural schema cannot bound what it does not type). The object carries them twice (spec, status.lastApplied).
MAX_VALUES_BYTES = 64 * 1024
MAX_OVERRIDES = 64  # components named in spec.overrides (the stack has 13)
SINGLETON = (f"a cluster has one PlatformStack, named {NAME!r} in namespace {NAMESPACE!r} "
             "(edit that one: apprafter platform ...)")

PLATFORM_STACK = CrdSource(
    KIND, "platform_stack", "platformstack.cue", "PlatformStackSpec", "platformstacks", ("pstack",),
    status_definition="PlatformStackStatus", extra_files=(STATUS_FILE,),
    patches=(
        # CEL sees metadata.name (not the namespace, which only the webhook checks).
        cel((), f"self.metadata.name == '{NAME}'", f"metadata.name: {SINGLETON}", "FieldValueInvalid"),
        SchemaPatch(("spec", "overrides"), {"maxProperties": MAX_OVERRIDES}),
        SchemaPatch(("status", "lastApplied", "overrides"), {"maxProperties": MAX_OVERRIDES}),
        SchemaPatch(("status", "versionHistory"), {"maxItems": VERSION_HISTORY_LIMIT}),
        SchemaPatch(("status", "conditions"), CONDITIONS_LIST_MAP),
        SchemaPatch(("status", "components"), {"x-kubernetes-list-type": "map",
                                               "x-kubernetes-list-map-keys": ["name"]}),
    ),
    columns=(Column("Channel", ".spec.channel"), Column("Pin", ".spec.pin"),
             Column("Current", ".status.currentVersion"), Column("Target", ".status.targetVersion", priority=1),
             Column("Available", ".status.availableVersion"),
             Column("Upstream", ".status.upstreamVersion", priority=1),
             condition_column("Ready"), Column("Verified", '.status.conditions[?(@.type=="SourceVerified")].status',
                                               priority=1), Column("Plan", ".status.migrationPlan", priority=1), AGE),
)


def check(document: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every (field, reason) that makes a PlatformStack object unacceptable beyond its schema."""
    problems: list[tuple[str, str]] = []
    meta = document.get("metadata") or {}
    for field, want in (("name", NAME), ("namespace", NAMESPACE)):
        if meta.get(field) != want:
            problems.append((f"metadata.{field}", f"{meta.get(field)!r}: {SINGLETON}"))
    spec = document.get("spec") or {}
    pin = spec.get("pin") if isinstance(spec, Mapping) else None
    if pin is not None:
        try:
            stack_version(str(pin))  # the one parser of stack versions (channels, plans, tags)
        except InvalidVersion as e:
            problems.append(("spec.pin", str(e)))
    overrides = spec.get("overrides") if isinstance(spec, Mapping) else None
    for name, override in sorted(overrides.items()) if isinstance(overrides, Mapping) else ():
        values = override.get("values") if isinstance(override, Mapping) else None
        if values is not None:
            size = _json_size(values)
            if size > MAX_VALUES_BYTES:
                problems.append((f"spec.overrides.{name}.values", f"{size} bytes as JSON, at most "
                                 f"{MAX_VALUES_BYTES} (set large values in a fork of the stack instead)"))
    return problems


def _json_size(value: Any) -> int:
    """Bytes of `value` as compact JSON (what the API server stores); past the bound when it cannot be encoded."""
    try:
        return len(json.dumps(value, separators=(",", ":")).encode())
    except (TypeError, ValueError, RecursionError):
        return MAX_VALUES_BYTES + 1


_DURATION = re.compile(r"([0-9]+)([smh])")
_UNIT = {"s": 1, "m": 60, "h": 3600}


def check_interval(text: str | None) -> float:
    """spec.source.checkInterval in seconds ("90s", "15m", "1h30m"); the default when unset, never below 10 s."""
    if text is None:
        return DEFAULT_CHECK_INTERVAL
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"{text!r} is not a duration such as 30s, 15m or 6h")
    return max(MIN_CHECK_INTERVAL, float(sum(int(n) * _UNIT[u] for n, u in parts)))


@dataclasses.dataclass(frozen=True)
class StackSpec:
    """A PlatformStack's spec as the controller acts on it."""

    channel: str
    pin: str | None
    auto_upgrade: bool
    repository: str  # oci://host/path of the chart: source.repoURL, else source.upstream, else the default
    insecure: bool
    check_interval: float
    credentials: str | None  # source.secretRef.name: a kubernetes.io/dockerconfigjson Secret
    keys: str | None  # verify.secretRef.name: cosign public keys (*.pub); None when verify is not set
    values: dict[str, Any]
    overrides: dict[str, Any]
    # A fork's source.upstream (set, and another repository than `repository`): read for availability only.
    upstream: str | None = None


def _ref(spec: Mapping[str, Any], *path: str) -> str | None:
    node: Any = spec
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
    return node if isinstance(node, str) and node else None


def read_spec(document: Mapping[str, Any]) -> tuple[StackSpec | None, list[tuple[str, str]]]:
    """The spec, or every (field, reason) that keeps the controller from acting on it (fail closed)."""
    problems = check(document)
    spec = document.get("spec") or {}
    if not isinstance(spec, Mapping):
        return None, [*problems, ("spec", "expected a mapping")]
    source = spec.get("source") or {}
    channel = spec.get("channel") or "stable"
    if channel not in CHANNELS:
        problems.append(("spec.channel", f"{channel!r}: one of {', '.join(CHANNELS)}"))
    try:
        interval = check_interval(source.get("checkInterval") if isinstance(source, Mapping) else None)
    except ValueError as e:
        problems.append(("spec.source.checkInterval", str(e)))
        interval = DEFAULT_CHECK_INTERVAL
    values, overrides = spec.get("values") or {}, spec.get("overrides") or {}
    for field, value in (("spec.values", values), ("spec.overrides", overrides), ("spec.source", source)):
        if not isinstance(value, Mapping):
            problems.append((field, "expected a mapping"))
    verify = spec.get("verify")
    if isinstance(verify, Mapping) and verify.get("provider", "cosign") != "cosign":
        problems.append(("spec.verify.provider", f"{verify.get('provider')!r}: only cosign is supported"))
    if problems:
        return None, problems
    repository = _ref(spec, "source", "repoURL") or _ref(spec, "source", "upstream") or DEFAULT_REPOSITORY
    upstream = _ref(spec, "source", "upstream")
    fork_of = upstream if upstream is not None and _repository(upstream) != _repository(repository) else None
    return StackSpec(str(channel), _ref(spec, "pin"), spec.get("autoUpgrade") is True, repository,
                     source.get("insecure") is True, interval, _ref(spec, "source", "secretRef", "name"),
                     _ref(spec, "verify", "secretRef", "name"), dict(values), dict(overrides), fork_of), []


def _repository(reference: str) -> str:
    """A chart repository reference as one spelling (`oci://` and a trailing `/` are the same repository)."""
    return reference.removeprefix("oci://").rstrip("/")


def push_history(history: Sequence[Mapping[str, Any]], entry: Mapping[str, Any],
                 limit: int = VERSION_HISTORY_LIMIT) -> list[dict[str, Any]]:
    """status.versionHistory after applying `entry`: newest first, at most `limit`; re-applying the version and
    digest at the head adds nothing (a retried pass, a values-only change)."""
    kept = [dict(h) for h in history if isinstance(h, Mapping)]
    if kept and (kept[0].get("version"), kept[0].get("digest")) == (entry.get("version"), entry.get("digest")):
        return kept[:limit]
    return [dict(entry), *kept][:limit]
