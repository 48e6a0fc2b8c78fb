"""What a chart repository offers the PlatformStack controller, read verify-first: SemVer tags, each resolved to a
digest and cosign-verified by that digest (any public key of a Secret may match) before its chart is pulled, by
digest, and read into the classifier's snapshots. Blocking I/O (registry requests, cosign, a scratch directory): the
controller runs a check in a thread. Verified digests and pulled charts are cached across checks (both are keyed by
content). What a check finds, and the rules it applies on the way, are platform_stack.check_result (pure).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import tempfile
from collections.abc import Hashable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

from compatibility.versions import stack_version
from platform_stack.channels import Offered, offered, select_target
from platform_stack.check_result import (
    Baseline,
    Check,
    Finding,
    Target,
    UpstreamNews,
    Verified,
    components,
    tag_moved,
    unchanged,
    unverified_entry,
    version_tag,
)
from platform_stack.classify import StackSnapshot, classify_stack, kubernetes_unmet
from platform_stack.docker_config import DockerConfig
from platform_stack.errors import RegistryFailure, StackError
from platform_stack.migration import stack_plan
from platform_stack.oci import CHART_LAYER_MEDIA_TYPE, CONFIG_MEDIA_TYPE, Reference, parse_reference
from platform_stack.registry import RegistryClient, connect
from platform_stack.signing import VerificationFailed, verify_digest
from platform_stack.snapshot import load_snapshot
from platform_stack.stack_secrets import PublicKeys
from platform_stack.tarball import MAX_ARCHIVE_BYTES
from toolchain.errors import AppRafterError, ToolFailure

__all__ = ["CHECK_DEADLINE", "MAX_CANDIDATES", "Session", "Upstream", "check", "upstream_news"]

CHECK_DEADLINE = 120.0  # every registry request of one check
PROVENANCE_MEDIA_TYPE = "application/vnd.cncf.helm.chart.provenance.v1.prov"
CHART_CACHE = 16  # charts and snapshots kept in memory (charts are tens of KB; a large one is not kept)
KEEP_CHART_BYTES = 1 << 20
# Each candidate costs a cosign run per key: whoever can push tags but not sign them must not be able to make a
# check run cosign without bound. The newest MAX_CANDIDATES of a channel are tried, with at most
# stack_secrets.MAX_KEYS keys.
MAX_CANDIDATES = 10


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
        unverified.append(unverified_entry(item.version, digest, result))
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
    moved = tag_moved(baseline, target_version, current_digest, running is session)
    if moved is not None:
        return found(moved)
    if target_version in seen:
        digest, result = seen[target_version]
    else:
        digest, result = _look(session, keys, Offered(target_version, version_tag(target_version)))
        if digest is not None and not result.ok:
            unverified.append(unverified_entry(target_version, digest, result))
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
    target = Target(version, digest, key, components(after))
    # Refused before anything is compared, planned or applied (spec §3.11): no plan could make it run.
    unmet = kubernetes_unmet(after, kube_version)
    if unmet is not None:
        kept = f"{baseline.version} keeps running" if baseline is not None else "nothing is installed"
        return found(Finding("UnsupportedKubernetes", f"{unmet}: {version} is not applied, {kept} (upgrade "
                             "the cluster, or pin a version it supports)", retryable=False))
    if baseline is None:
        return dataclasses.replace(partial, target=target)
    if unchanged(baseline, version, digest, tier, overrides):
        return dataclasses.replace(partial, target=target)
    try:
        before = running.snapshot(baseline.version, baseline.digest, (baseline.values or {}).get("tier"),
                                  baseline.overrides or None)
    except StackError as e:
        return found(Finding("InvalidChart", "the running chart: " + "; ".join(e.lines()), e.retryable))
    plan = stack_plan(classify_stack(before, after, kube_version), before, after)
    return dataclasses.replace(partial, target=target, plan=plan)
