"""The pure part of a PlatformStack check (platform_stack.check_result, platform_stack.stack_secrets): what runs read
fail-closed, when a running tag has moved, when nothing needs a plan, a registry login read from a Secret. The
real-tool twins are tests/platform_stack/test_upstream.py (a registry, cosign) and the controller's cluster tests."""

from __future__ import annotations

import base64
import json

import pytest

from platform_stack.check_result import Baseline, Verified, tag_moved, unchanged, unverified_entry, version_tag
from platform_stack.errors import StackError
from platform_stack.stack_secrets import DOCKER_CONFIG_KEY, docker_config_from_secret
from toolchain.errors import UserError

DIGEST, OTHER = "sha256:" + "a" * 64, "sha256:" + "b" * 64
RUNS = Baseline("1.2.0+build.1", DIGEST, "registry.example/acme/platform-stack", values={"tier": "team"},
                overrides={"grafana": {"enabled": False}})


def test_what_runs_is_read_back_as_written_and_refused_when_malformed() -> None:
    assert Baseline.read(RUNS.document()) == RUNS
    assert Baseline("1.0.0", DIGEST, "r/p").document() == {"version": "1.0.0", "digest": DIGEST, "repository": "r/p"}
    for raw, field in (([], "status.lastApplied: not a mapping"), ({"version": "1.0.0"}, "lastApplied.digest"),
                       ({**RUNS.document(), "values": []}, "lastApplied.values"),
                       ({**RUNS.document(), "pin": 1}, "lastApplied.pin")):
        with pytest.raises(StackError, match=field):
            Baseline.read(raw)


def test_a_tag_has_moved_only_under_the_running_version_in_its_own_repository() -> None:
    moved = tag_moved(RUNS, RUNS.version, OTHER, same_repository=True)
    assert moved is not None and moved.reason == "TagMoved"
    assert f"tag {version_tag(RUNS.version)} of the running version names {OTHER}; it was {DIGEST}" in moved.message
    gone = tag_moved(RUNS, RUNS.version, None, same_repository=True)
    assert gone is not None and "1.2.0_build.1 of the running version is gone" in gone.message
    assert tag_moved(RUNS, RUNS.version, DIGEST, same_repository=True) is None  # still the verified digest
    assert tag_moved(RUNS, "1.3.0", OTHER, same_repository=True) is None  # another target: verified on its own
    assert tag_moved(RUNS, RUNS.version, OTHER, same_repository=False) is None  # spec.source moved elsewhere
    assert tag_moved(None, RUNS.version, OTHER, same_repository=True) is None  # nothing runs yet


def test_nothing_is_planned_when_version_digest_tier_and_overrides_are_what_runs() -> None:
    assert unchanged(RUNS, RUNS.version, DIGEST, "team", {"grafana": {"enabled": False}})
    assert not unchanged(RUNS, RUNS.version, OTHER, "team", {"grafana": {"enabled": False}})
    assert not unchanged(RUNS, RUNS.version, DIGEST, "production", {"grafana": {"enabled": False}})
    assert not unchanged(RUNS, RUNS.version, DIGEST, "team", {})


def test_an_unverified_version_keeps_cosigns_words_within_bounds() -> None:
    assert unverified_entry("1.0.0", None, Verified(False, None, "x" * 600)) == {"version": "1.0.0",
                                                                                 "reason": "x" * 500}
    assert unverified_entry("1.0.0", DIGEST, Verified(False, None, "no match"))["digest"] == DIGEST


def test_a_registry_login_is_read_from_a_dockerconfigjson_secret() -> None:
    config = json.dumps({"auths": {"registry.example": {"auth": base64.b64encode(b"robot:s3cret").decode()}}})
    login = docker_config_from_secret({"data": {DOCKER_CONFIG_KEY: base64.b64encode(config.encode()).decode()}},
                                      "apprafter-system/pull")
    assert login.auths["registry.example"].username == "robot"
    assert "s3cret" not in repr(login)
    with pytest.raises(StackError, match=r"Secret apprafter-system/pull \.dockerconfigjson: missing"):
        docker_config_from_secret({"data": {}}, "apprafter-system/pull")
    with pytest.raises(StackError, match="not base64"):
        docker_config_from_secret({"data": {DOCKER_CONFIG_KEY: "%%%"}}, "apprafter-system/pull")
    with pytest.raises(UserError):
        docker_config_from_secret({"data": {DOCKER_CONFIG_KEY: base64.b64encode(b"[]").decode()}}, "ns/pull")
