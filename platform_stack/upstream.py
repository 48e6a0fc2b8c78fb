"""What a chart repository offers the PlatformStack controller, read verify-first: SemVer tags, each resolved to a
digest and cosign-verified by that digest (any public key of a Secret may match) before its chart is pulled, by
digest, and read into the classifier's snapshots. Blocking I/O (registry requests, cosign): the controller runs a
check in a thread. Verified digests and pulled charts are cached across checks (both are keyed by content).
"""

from __future__ import annotations

import base64
import binascii
import collections
import dataclasses
import hashlib
import json
import tempfile
from collections.abc import Hashable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

from compatibility.plan import Plan
from compatibility.versions import stack_version
from platform_stack.channels import Offered, offered, select_target
from platform_stack.classify import StackSnapshot, classify_stack, kubernetes_unmet
from platform_stack.credentials import DockerConfig, parse_docker_config
from platform_stack.errors import StackError
from platform_stack.migration import stack_plan
from platform_stack.oci import CHART_LAYER_MEDIA_TYPE, CONFIG_MEDIA_TYPE, Reference, parse_reference
from platform_stack.registry import RegistryClient, RegistryFailure, connect
from platform_stack.signing import VerificationFailed, verify_digest
from platform_stack.snapshot import load_snapshot
from platform_stack.tarball import MAX_ARCHIVE_BYTES
from toolchain.errors import AppRafterError, ToolFailure

__all__ = ["DOCKER_CONFIG_KEY", "Baseline", "Check", "Finding", "PublicKeys", "Session", "Target", "Upstream",
           "UpstreamNews", "Verified", "check", "docker_config_from_secret", "keys_from_secret", "upstream_news",
           "version_tag"]

CHECK_DEADLINE = 120.0  # every registry request of one check
PROVENANCE_MEDIA_TYPE = "application/vnd.cncf.helm.chart.provenance.v1.prov"
CHART_CACHE = 16  # charts and snapshots kept in memory (charts are tens of KB; a large one is not kept)
KEEP_CHART_BYTES = 1 << 20
# Each candidate costs a cosign run per key: whoever can push tags but not sign them must not be able to make a
# check run cosign without bound. The newest MAX_CANDIDATES of a channel are tried, with at most MAX_KEYS keys.
MAX_CANDIDATES = 10
MAX_KEYS = 8


@dataclasses.dataclass(frozen=True)
class PublicKeys:
    """The cosign public keys of the verify Secret: (file name, PEM) of each `*.pub` entry."""

    secret: str  # "apprafter-system/platform-stack-keys", for messages
    keys: tuple[tuple[str, bytes], ...]

    @property
    def fingerprint(self) -> str:
        """Which keys these are: a verification is cached for one key set only."""
        digest = hashlib.sha256()
        for name, pem in sorted(self.keys):
            digest.update(f"{len(name)}:{name}:{len(pem)}:".encode() + pem)
        return digest.hexdigest()


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


K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Kept(Generic[K, V]):
    """The most recently used `size` values of a key (what was learnt from content that never changes)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: collections.OrderedDict[K, V] = collections.OrderedDict()

    def get(self, key: K) -> V | None:
        if key in self._items:
            self._items.move_to_end(key)
            return self._items[key]
        return None

    def put(self, key: K, value: V) -> V:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)
        return value

    def __iter__(self) -> Iterator[K]:
        return iter(self._items)


class Session:
    """One check's view of one chart repository (host/path), with the registry credential it was given."""

    def __init__(self, upstream: Upstream, ref: Reference, client: RegistryClient, plain_http: bool) -> None:
        self.upstream, self.ref, self.client, self.plain_http = upstream, ref, client, plain_http

    @property
    def repository(self) -> str:
        return f"{self.ref.host}/{self.ref.repository}"

    def tags(self) -> list[str]:
        found = self.client.tags(self.ref.repository)
        if found is None:
            raise RegistryFailure(f"registry {self.ref.host}: no repository {self.ref.repository} (check "
                                  "spec.source.repoURL and the credentials)")
        return found

    def resolve(self, tag: str) -> str | None:
        """The digest `tag` names now (None: no such tag)."""
        found = self.client.manifest(self.ref.repository, tag)
        return found[0] if found is not None else None

    def verify(self, digest: str, keys: PublicKeys) -> Verified:
        """cosign verify of this repository's `digest` with each key until one matches (a match is cached)."""
        cache_key = (self.repository, digest, keys.fingerprint)
        if cache_key in self.upstream.verified:
            return Verified(True, self.upstream.verified[cache_key])
        ref = Reference(self.ref.host, self.ref.repository, None, digest)
        reasons = []
        with tempfile.TemporaryDirectory(prefix="apprafter-keys-") as tmp:
            for name, pem in sorted(keys.keys):
                path = Path(tmp) / "key.pub"
                path.write_bytes(pem)
                try:
                    verify_digest(ref, path, self.client, self.plain_http)
                except VerificationFailed as e:
                    reasons.append(f"{name}: {e.reason}")
                    continue
                self.upstream.verified[cache_key] = name
                return Verified(True, name)
        return Verified(False, None, "; ".join(reasons) or f"no *.pub key in Secret {keys.secret}")

    def chart(self, digest: str) -> bytes:
        """The chart .tgz of manifest `digest`: a Helm chart manifest, its one chart layer checked by digest."""
        kept = self.upstream.charts.get(digest)
        if kept is not None:
            return kept
        found = self.client.manifest(self.ref.repository, digest)
        if found is None:
            raise RegistryFailure(f"registry {self.ref.host}: {self.ref.repository}@{digest}: no such manifest")
        manifest = found[1]
        layers = [x for x in manifest["layers"] if x.get("mediaType") != PROVENANCE_MEDIA_TYPE]
        if manifest["config"].get("mediaType") != CONFIG_MEDIA_TYPE or len(layers) != 1 \
                or layers[0].get("mediaType") != CHART_LAYER_MEDIA_TYPE:
            raise StackError(f"{self.repository}@{digest}: not a Helm chart (config {CONFIG_MEDIA_TYPE} and one "
                             f"{CHART_LAYER_MEDIA_TYPE} layer)")
        data = self.client.blob(self.ref.repository, str(layers[0]["digest"]), MAX_ARCHIVE_BYTES)
        return self.upstream.charts.put(digest, data) if len(data) <= KEEP_CHART_BYTES else data

    def snapshot(self, version: str, digest: str, tier: str | None,
                 overrides: Mapping[str, Any] | None) -> StackSnapshot:
        """The classifier's view of the chart at `digest` (what `apprafter stack plan` reads from a .tgz); kept,
        since reading a chart's files safely costs tens of milliseconds and its content never changes."""
        key = (digest, version, tier, json.dumps(overrides or {}, sort_keys=True))
        kept = self.upstream.snapshots.get(key)
        return kept if kept is not None else self.upstream.snapshots.put(key, self._snapshot(version, digest, tier,
                                                                                             overrides))

    def _snapshot(self, version: str, digest: str, tier: str | None,
                  overrides: Mapping[str, Any] | None) -> StackSnapshot:
        data = self.chart(digest)
        with tempfile.TemporaryDirectory(prefix="apprafter-chart-") as tmp:
            path = Path(tmp) / f"platform-stack-{version}.tgz"
            path.write_bytes(data)
            try:
                snap = load_snapshot(path, tier, dict(overrides) if overrides else None)
            except ToolFailure:
                raise
            except AppRafterError as e:  # the chart's or the spec's: a finding, never a crash
                raise _relocated(e, f"{tmp}/") from None
        if stack_version(snap.version) != stack_version(version):
            raise StackError(f"{self.repository}@{digest}: Chart.yaml says version {snap.version[:40]}, the tag "
                                f"says {version}")
        return snap


def _relocated(error: AppRafterError, prefix: str) -> StackError:
    """The same problem with a temporary directory left out of its lines."""
    return StackError(*(line.replace(prefix, "") for line in error.lines()))


class Upstream:
    """Chart repositories as the controller reads them; what it learnt is kept between checks."""

    def __init__(self) -> None:
        self.verified: dict[tuple[str, str, str], str] = {}  # (repository, digest, key set) -> key that matched
        self.charts: Kept[str, bytes] = Kept(CHART_CACHE)  # digest -> chart .tgz
        # (digest, version, tier, overrides) -> what the classifier reads of it
        self.snapshots: Kept[tuple[str, str, str | None, str], StackSnapshot] = Kept(CHART_CACHE)

    def open(self, repository: str, insecure: bool, configs: Sequence[DockerConfig]) -> Session:
        """A session on `repository` ([oci://]host/path) with the credential `configs` hold for its host (a Secret's
        .dockerconfigjson: no credential helpers); StackError when it is not a repository reference."""
        ref = parse_reference(repository)
        if ref.tag or ref.digest:
            raise StackError(f"spec.source.repoURL: {repository[:200]}: name the repository only (no tag or "
                             "digest): the controller picks the version")
        client = connect(ref.host, insecure, configs, helpers=False, deadline_s=CHECK_DEADLINE)
        return Session(self, ref, client, insecure)


def _components(snapshot: StackSnapshot) -> tuple[dict[str, Any], ...]:
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


def version_tag(version: str) -> str:
    """The registry tag of a stack version: helm's, which writes build metadata's `+` as `_`."""
    return version.replace("+", "_")


def check(session: Session, keys: PublicKeys, *, channel: str, pin: str | None, auto_upgrade: bool,
          tier: str | None, overrides: Mapping[str, Any], baseline: Baseline | None, kube_version: str,
          running: Session | None = None) -> Check:
    """Look at the repository: the channel's newest verifying version, the target (channels.select_target), its
    digest verified before its chart is pulled, and the plan from what runs to it (`apprafter stack plan`'s).
    `running` is a session on the repository the running version came from, when spec.source moved elsewhere."""
    running = running or session
    tags = session.tags()
    unverified: list[dict[str, str]] = []
    seen: dict[str, tuple[str | None, Verified]] = {}  # version -> (digest, verification)
    available: tuple[str, str] | None = None
    candidates = offered(tags, channel)
    for item in candidates[:MAX_CANDIDATES]:
        digest, result = _look(session, keys, item)
        seen[item.version] = (digest, result)
        if digest is not None and result.ok:
            available = (item.version, digest)
            break
        unverified.append(_unverified(item.version, digest, result))
    current = baseline.version if baseline is not None else None
    current_digest = running.resolve(version_tag(current)) if current is not None else None
    target_version = select_target(pin, current, available[0] if available else None, auto_upgrade)

    def found(finding: Finding) -> Check:
        return Check(session.repository, available, tuple(unverified), target_version, None, finding, None,
                     current_digest)

    if target_version is None:
        tried = f" (the newest {MAX_CANDIDATES} were tried)" if len(candidates) > MAX_CANDIDATES else ""
        return found(Finding("NoVersionAvailable", f"no version of channel {channel} in {session.repository} "
                             f"verifies{tried}" + (" (see unverifiedVersions)" if unverified else ""), retryable=True))
    if baseline is not None and target_version == current and running is session \
            and current_digest != baseline.digest:
        now = f"names {current_digest}" if current_digest else "is gone"
        return found(Finding("TagMoved", f"tag {version_tag(current or '')} of the running version {now}; it was "
                             f"{baseline.digest} when verified and applied: nothing is applied until a verified "
                             "version is (pin another version)", retryable=True))
    if target_version in seen:
        digest, result = seen[target_version]
    else:
        digest, result = _look(session, keys, Offered(target_version, version_tag(target_version)))
        if digest is not None and not result.ok:
            unverified.append(_unverified(target_version, digest, result))
    if digest is None:
        return found(Finding("VersionNotFound", f"no tag {version_tag(target_version)} in {session.repository}",
                             retryable=True))
    if not result.ok:
        return found(Finding("VerificationFailed", f"{target_version} ({digest}) does not verify with the keys of "
                             f"Secret {keys.secret}: {result.reason}", retryable=True))
    partial = Check(session.repository, available, tuple(unverified), target_version, None, None, None,
                    current_digest)
    return _classified(session, running, partial, target_version, digest, result.key or "", tier, overrides,
                       baseline, kube_version)


def upstream_news(upstream: Upstream, repository: str, insecure: bool, configs: Sequence[DockerConfig],
                  channel: str) -> UpstreamNews:
    """The newest version `channel` offers in a fork's upstream repository, from its tags alone (one request). A
    reference or a registry that fails is the news' problem, never the fork's check's."""
    try:
        session = upstream.open(repository, insecure, configs)
        newest = offered(session.tags(), channel)
    except (RegistryFailure, StackError) as e:
        return UpstreamNews(repository.removeprefix("oci://"), None, "; ".join(str(e).splitlines())[:500])
    return UpstreamNews(session.repository, newest[0].version if newest else None)


def _look(session: Session, keys: PublicKeys, item: Offered) -> tuple[str | None, Verified]:
    digest = session.resolve(item.tag)
    if digest is None:
        return None, Verified(False, None, f"tag {item.tag} is gone")
    return digest, session.verify(digest, keys)


def _unverified(version: str, digest: str | None, result: Verified) -> dict[str, str]:
    entry = {"version": version, "reason": result.reason[:500]}
    if digest is not None:
        entry["digest"] = digest
    return entry


def _classified(session: Session, running: Session, partial: Check, version: str, digest: str, key: str,
                tier: str | None, overrides: Mapping[str, Any], baseline: Baseline | None, kube_version: str) -> Check:
    """Pull the verified target (and the running chart) by digest and classify the change between them."""
    def found(finding: Finding) -> Check:
        return dataclasses.replace(partial, finding=finding)

    try:
        after = session.snapshot(version, digest, tier, overrides)
    except StackError as e:
        try:
            session.snapshot(version, digest, None, None)  # the chart alone: if this fails too, it is the chart's
        except StackError as chart_error:
            return found(Finding("InvalidChart", "; ".join(chart_error.lines()), chart_error.retryable))
        return found(Finding("InvalidSpec", "; ".join(e.lines()), e.retryable))
    target = Target(version, digest, key, _components(after))
    # Refused before anything is compared, planned or applied (spec §3.11): no plan could make it run.
    unmet = kubernetes_unmet(after, kube_version)
    if unmet is not None:
        kept = f"{baseline.version} keeps running" if baseline is not None else "nothing is installed"
        return found(Finding("UnsupportedKubernetes", f"{unmet}: {version} is not applied, {kept} (upgrade "
                             "the cluster, or pin a version it supports)", retryable=False))
    if baseline is None:
        return dataclasses.replace(partial, target=target)
    same = (baseline.version, baseline.digest, (baseline.values or {}).get("tier"), dict(baseline.overrides or {})) \
        == (version, digest, tier, dict(overrides))
    if same:
        return dataclasses.replace(partial, target=target)
    try:
        before = running.snapshot(baseline.version, baseline.digest, (baseline.values or {}).get("tier"),
                                  baseline.overrides or None)
    except StackError as e:
        return found(Finding("InvalidChart", "the running chart: " + "; ".join(e.lines()), e.retryable))
    plan = stack_plan(classify_stack(before, after, kube_version), before, after)
    return dataclasses.replace(partial, target=target, plan=plan)


DOCKER_CONFIG_KEY = ".dockerconfigjson"


def docker_config_from_secret(secret: Mapping[str, Any], display: str) -> DockerConfig:
    """The login of a kubernetes.io/dockerconfigjson Secret (its data is base64); StackError or UserError naming the
    Secret and the key when it cannot be read."""
    where = f"Secret {display} {DOCKER_CONFIG_KEY}"
    raw = (secret.get("data") or {}).get(DOCKER_CONFIG_KEY)
    if not isinstance(raw, str):
        raise StackError(f"{where}: missing (a kubernetes.io/dockerconfigjson Secret has it)")
    try:
        text = base64.b64decode(raw, validate=True)
    except binascii.Error:
        raise StackError(f"{where}: not base64") from None
    return parse_docker_config(text, where)


def keys_from_secret(secret: Mapping[str, Any], display: str) -> PublicKeys:
    """The `*.pub` entries of a Secret (data is base64); StackError naming the Secret when there is none."""
    keys: list[tuple[str, bytes]] = []
    for name, value in sorted((secret.get("data") or {}).items()):
        if not str(name).endswith(".pub"):
            continue
        try:
            keys.append((str(name), base64.b64decode(str(value), validate=True)))
        except binascii.Error:
            raise StackError(f"Secret {display}: {name}: not base64") from None
    if not keys:
        raise StackError(f"Secret {display}: no *.pub entry (cosign public keys)")
    if len(keys) > MAX_KEYS:
        raise StackError(f"Secret {display}: {len(keys)} *.pub entries, at most {MAX_KEYS} (each is tried in turn)")
    return PublicKeys(display, tuple(keys))
