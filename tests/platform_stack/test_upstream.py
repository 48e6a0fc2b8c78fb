"""What the PlatformStack controller reads from a chart repository, without a cluster: tags, digests, cosign
verification before any pull (real registry, real cosign), the findings a check reports, the umbrella it applies."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from platform_stack.check_result import Baseline, Verified
from platform_stack.credentials import parse_docker_config
from platform_stack.errors import StackError
from platform_stack.registry import connect
from platform_stack.stack_secrets import MAX_KEYS, PublicKeys, keys_from_secret
from platform_stack.umbrella import umbrella
from platform_stack.upstream import MAX_CANDIDATES, Upstream, check
from tests.platform_stack.conftest import built_tgz, cli, ok
from tests.testbed.distribution import AuthRegistry
from tests.testbed.kube import KubeTestBed
from toolchain.tools import ToolError

KeyPair = Callable[[str], tuple[Path, Path, str]]
KUBE = "v1.34.4"


@pytest.fixture(scope="module")
def versions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The shipped source built as 0.1.0 and 0.2.0 (same components: a safe change)."""
    return {v: built_tgz(tmp_path_factory.mktemp(v), "--version", v) for v in ("0.1.0", "0.2.0")}


def publish(registry: Any, charts: dict[str, Path],
            signed: dict[str, tuple[Path, str] | None]) -> tuple[str, dict[str, str]]:
    """Push each version to a fresh repository, sign those with a key; (oci://repository, version -> digest)."""
    namespace = f"up-{uuid.uuid4().hex[:8]}"
    digests = {}
    for version, key in signed.items():
        ref = ok(cli("stack", "push", str(charts[version]), "--to", f"oci://{registry.url}/{namespace}",
                     "--plain-http")).strip()
        digests[version] = ref.rsplit("@", 1)[1]
        if key is not None:
            ok(cli("stack", "sign", f"{registry.url}/{namespace}/platform-stack@{digests[version]}", "--key",
                   str(key[0]), env={"COSIGN_PASSWORD": key[1]}))
    return f"oci://{registry.url}/{namespace}/platform-stack", digests


def keys_of(*pubs: Path) -> PublicKeys:
    return PublicKeys("apprafter-system/keys", tuple((p.name, p.read_bytes()) for p in pubs))


@pytest.mark.testbed
def test_the_newest_version_that_verifies_is_available_and_nothing_unverified_is_pulled(
        oci_registry: Any, versions: dict[str, Path], key_pair: KeyPair) -> None:
    key, pub, password = key_pair("release")
    repository, digests = publish(oci_registry, versions, {"0.1.0": (key, password), "0.2.0": None})
    upstream = Upstream()
    session = upstream.open(repository, True, [])
    result = check(session, keys_of(pub), channel="stable", pin=None, auto_upgrade=False, tier=None, overrides={},
                   baseline=None, kube_version=KUBE)
    assert result.available == ("0.1.0", digests["0.1.0"]) and result.finding is None
    assert [(u["version"], u["digest"]) for u in result.unverified] == [("0.2.0", digests["0.2.0"])]
    assert "release.pub: no signatures found" in result.unverified[0]["reason"]
    assert result.target is not None and (result.target.version, result.target.digest) == ("0.1.0", digests["0.1.0"])
    assert result.target.key == "release.pub" and result.plan is None
    assert {"name": "backstage", "version": "2.6.0", "enabled": True} in result.target.components
    assert list(upstream.charts) == [digests["0.1.0"]]  # the unsigned chart was never pulled

    pinned = check(session, keys_of(pub), channel="stable", pin="0.2.0", auto_upgrade=False, tier=None,
                   overrides={}, baseline=None, kube_version=KUBE)
    assert pinned.target is None and pinned.finding is not None
    assert pinned.finding.reason == "VerificationFailed" and "no signatures found" in pinned.finding.message
    assert list(upstream.charts) == [digests["0.1.0"]]


@pytest.mark.testbed
def test_any_key_may_match_and_a_match_is_not_verified_twice(oci_registry: Any, versions: dict[str, Path],
                                                            key_pair: KeyPair, monkeypatch: pytest.MonkeyPatch) -> None:
    key, pub, password = key_pair("release")
    _, other, _ = key_pair("other")
    repository, digests = publish(oci_registry, versions, {"0.1.0": (key, password)})
    session = Upstream().open(repository, True, [])
    both = keys_of(other, pub)
    assert session.verify(digests["0.1.0"], both).key == "release.pub"
    failed = session.verify(digests["0.1.0"], keys_of(other))
    assert not failed.ok and failed.reason.startswith("other.pub: no matching signatures")
    monkeypatch.setenv("APPRAFTER_COSIGN", "/nonexistent/cosign")
    assert session.verify(digests["0.1.0"], both).ok  # cached for this digest and key set
    with pytest.raises(ToolError):
        session.verify(digests["0.1.0"], keys_of(pub))  # another key set: cosign again (and it is gone)


@pytest.mark.testbed
def test_what_a_check_reports_instead_of_a_target(oci_registry: Any, versions: dict[str, Path],
                                                  key_pair: KeyPair) -> None:
    key, pub, password = key_pair("release")
    repository, digests = publish(oci_registry, versions, {"0.1.0": (key, password), "0.2.0": (key, password)})
    session = Upstream().open(repository, True, [])

    def look(**kw: Any) -> Any:
        args: dict[str, Any] = {"channel": "stable", "pin": None, "auto_upgrade": False, "tier": None,
                                "overrides": {}, "baseline": None, "kube_version": KUBE, **kw}
        return check(session, keys_of(pub), **args)

    missing = look(pin="9.9.9").finding
    assert (missing.reason, missing.retryable) == ("VersionNotFound", True)  # a tag may be pushed: retried
    old = look(kube_version="v1.29.3").finding
    assert old.reason == "UnsupportedKubernetes" and "needs Kubernetes >= 1.31.0, cluster runs v1.29.3" in old.message
    assert not old.retryable
    unknown = look(overrides={"nope": {"enabled": True}}).finding
    assert unknown.reason == "InvalidSpec" and "overrides.nope: no such component in this chart" in unknown.message
    assert not unknown.retryable  # the spec's own problem: only a spec change makes it pass
    assert "/tmp" not in unknown.message
    required = look(overrides={"cilium": {"enabled": False}}).finding
    assert required.reason == "InvalidSpec" and "cilium is required on tier solo" in required.message
    ran = Baseline("0.2.0", "sha256:" + "0" * 64, repository.removeprefix("oci://"))
    moved = look(baseline=ran).finding
    assert moved.reason == "TagMoved" and digests["0.2.0"] in moved.message and moved.retryable
    upgrade = look(pin="0.2.0", baseline=Baseline("0.1.0", digests["0.1.0"], repository.removeprefix("oci://")))
    assert upgrade.finding is None and upgrade.plan is not None and not upgrade.plan.gated
    assert upgrade.current_digest == digests["0.1.0"]
    # 0.2.0 needs Kubernetes 1.31: on 1.30 the upgrade is refused before it is compared or planned
    refused = look(pin="0.2.0", baseline=Baseline("0.1.0", digests["0.1.0"], repository.removeprefix("oci://")),
                   kube_version="v1.30.5")
    assert refused.finding.reason == "UnsupportedKubernetes" and refused.plan is None and refused.target is None
    assert refused.finding.message == ("stack 0.2.0 needs Kubernetes >= 1.31.0, cluster runs v1.30.5: 0.2.0 is not "
                                       "applied, 0.1.0 keeps running (upgrade the cluster, or pin a version it "
                                       "supports)")


@pytest.mark.testbed
@pytest.mark.parametrize("auth_registry", ["htpasswd"], indirect=True)
def test_tags_are_read_page_by_page_with_the_secrets_login(auth_registry: AuthRegistry, versions: dict[str, Path],
                                                          tmp_path: Path) -> None:
    env = {"DOCKER_CONFIG": str(auth_registry.docker_config(tmp_path / "docker"))}
    namespace = f"pages-{uuid.uuid4().hex[:6]}"
    for chart in versions.values():
        ok(cli("stack", "push", str(chart), "--to", f"oci://{auth_registry.url}/{namespace}", "--plain-http", env=env))
    login = base64.b64encode(f"{auth_registry.reader}:{auth_registry.reader_password}".encode()).decode()
    secret = parse_docker_config(json.dumps({"auths": {auth_registry.url: {"auth": login}}}), "Secret x")
    client = connect(auth_registry.url, True, [secret], helpers=False)
    assert sorted(client.tags(f"{namespace}/platform-stack", page=1) or []) == ["0.1.0", "0.2.0"]  # 2 pages
    assert client.tags(f"{namespace}/nothing-here") is None


def test_the_keys_are_the_pub_entries_of_the_secret() -> None:
    pem = base64.b64encode(b"-----BEGIN PUBLIC KEY-----\n").decode()
    keys = keys_from_secret({"data": {"b.pub": pem, "a.pub": pem, "README": pem}}, "ns/keys")
    assert [name for name, _ in keys.keys] == ["a.pub", "b.pub"]
    assert keys.fingerprint != keys_from_secret({"data": {"a.pub": pem}}, "ns/keys").fingerprint
    with pytest.raises(StackError, match=r"Secret ns/keys: no \*\.pub entry"):
        keys_from_secret({"data": {"cosign.key": pem}}, "ns/keys")
    with pytest.raises(StackError, match=r"a\.pub: not base64"):
        keys_from_secret({"data": {"a.pub": "%%%"}}, "ns/keys")


def test_the_umbrella_application() -> None:
    app = umbrella("ghcr.io/apprafter/platform-stack", "2.0.0", "sha256:" + "a" * 64,
                   {"tier": "team", "domain": "example.com"}, {"backstage": {"enabled": False}}, automated=True)
    assert app["metadata"]["name"] == "apprafter-platform" and app["metadata"]["namespace"] == "argocd"
    # Argo CD's native OCI source, by the verified digest: a moved tag cannot change what it pulls.
    assert app["spec"]["source"] == {"repoURL": "oci://ghcr.io/apprafter/platform-stack",
                                     "targetRevision": "sha256:" + "a" * 64, "path": ".",
                                     "helm": {"valuesObject": {"tier": "team", "domain": "example.com",
                                                               "overrides": {"backstage": {"enabled": False}}}}}
    assert app["spec"]["syncPolicy"] == {"automated": {"prune": True, "selfHeal": True}}
    assert app["metadata"]["annotations"] == {"apprafter.io/stack-version": "2.0.0",
                                              "apprafter.io/stack-digest": "sha256:" + "a" * 64}
    manual = umbrella("ghcr.io/apprafter/platform-stack", "2.0.0", "sha256:" + "a" * 64, {}, {}, automated=False)
    assert "syncPolicy" not in manual["spec"] and "helm" not in manual["spec"]["source"]


@pytest.mark.testbed
def test_argo_cd_accepts_the_umbrella(kube: KubeTestBed) -> None:
    app = umbrella("127.0.0.1:5000/apprafter/platform-stack", "2.1.0-rc.1", "sha256:" + "a" * 64,
                   {"tier": "solo", "multitenancy": False}, {"cilium": {"pin": "1.16.5"}}, automated=True)
    [stored] = kube.dry_run_apply([app], namespace="argocd")
    assert stored["spec"]["source"] == app["spec"]["source"]
    assert stored["spec"]["syncPolicy"] == app["spec"]["syncPolicy"]


class JunkTags:
    """A stand-in for a registry session whose newest tags nobody signed (the real-tool twin is the first test of
    this module): counts the verifications a check asks for."""

    repository = "registry.example/junk/platform-stack"

    def __init__(self) -> None:
        self.verified: list[str] = []

    def tags(self) -> list[str]:
        return ["0.1.0", *(f"9.{n}.0" for n in range(25))]

    def resolve(self, tag: str) -> str:
        return "sha256:" + tag.replace(".", "").rjust(64, "0")

    def verify(self, digest: str, keys: PublicKeys) -> Verified:
        self.verified.append(digest)
        return Verified(False, None, "release.pub: no signatures found")


def test_tags_nobody_signed_cannot_make_a_check_run_cosign_without_bound() -> None:
    session = JunkTags()
    result = check(session, keys_of(), channel="stable", pin=None, auto_upgrade=False, tier=None,
                   overrides={}, baseline=None, kube_version=KUBE)
    assert len(session.verified) == MAX_CANDIDATES == len(result.unverified)
    assert result.available is None and result.finding is not None
    assert result.finding.reason == "NoVersionAvailable" and f"the newest {MAX_CANDIDATES} were tried" in \
        result.finding.message


def test_at_most_a_few_keys_are_tried() -> None:
    pem = base64.b64encode(b"key").decode()
    with pytest.raises(StackError, match=f"at most {MAX_KEYS}"):
        keys_from_secret({"data": {f"k{n}.pub": pem for n in range(MAX_KEYS + 1)}}, "ns/keys")
