"""Channels over SemVer tags and the version the PlatformStack controller targets (pure: no registry)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compatibility.versions import stack_version
from platform_stack.channels import Offered, in_channel, offered, select_target, tag_version, upgrade_available

TAGS = ["1.0.0", "1.0.0-rc.9", "1.0.0-rc.10", "1.0.0-beta.2", "1.0.0-alpha.1", "1.1.0", "1.1.0-rc1", "0.9.0",
        "2.0.0-rc.1", "v3.0.0", "latest", "sha256-" + "a" * 64 + ".sig", "1.2.0_build.7", "1.2"]


def versions(channel: str) -> list[str]:
    return [o.version for o in offered(TAGS, channel)]


def test_stable_offers_releases_only_newest_first() -> None:
    assert versions("stable") == ["1.2.0+build.7", "1.1.0", "1.0.0", "0.9.0"]


def test_beta_adds_rc_and_beta_pre_releases_by_semver_precedence() -> None:
    # rc.10 after rc.9 (string order would put rc.10 first); rc1 and alpha.1 are not beta's
    assert versions("beta") == ["2.0.0-rc.1", "1.2.0+build.7", "1.1.0", "1.0.0", "1.0.0-rc.10", "1.0.0-rc.9",
                                "1.0.0-beta.2", "0.9.0"]


def test_edge_offers_every_semver_tag() -> None:
    assert versions("edge") == ["2.0.0-rc.1", "1.2.0+build.7", "1.1.0", "1.1.0-rc1", "1.0.0", "1.0.0-rc.10",
                                "1.0.0-rc.9", "1.0.0-beta.2", "1.0.0-alpha.1", "0.9.0"]


def test_a_tag_is_kept_for_pulling() -> None:
    assert offered(["1.2.0_build.7"], "stable") == [Offered("1.2.0+build.7", "1.2.0_build.7")]


@pytest.mark.parametrize("tag", ["v1.0.0", "latest", "1.2", "sha256-abc.sig", "", "01.0.0", "1.0.0-rc.01"])
def test_tags_that_are_not_semver_are_no_version(tag: str) -> None:
    assert tag_version(tag) is None


@pytest.mark.parametrize(("pre", "channel", "offered_"), [
    ("rc.3", "beta", True), ("beta.12", "beta", True), ("rc", "beta", False), ("rc.1.2", "beta", False),
    ("alpha.1", "beta", False), ("rc.3", "stable", False), ("alpha.1", "edge", True)])
def test_which_pre_releases_a_channel_offers(pre: str, channel: str, offered_: bool) -> None:
    assert in_channel(stack_version(f"1.0.0-{pre}"), channel) is offered_


semver_core = st.tuples(*(st.integers(0, 30) for _ in range(3)))
pre_release = st.one_of(st.none(), st.tuples(st.sampled_from(["rc", "beta", "alpha"]), st.integers(0, 30)))


@given(st.lists(st.tuples(semver_core, pre_release), min_size=1, max_size=12, unique=True))
def test_newest_first_by_precedence_and_each_version_once(items: list[tuple[tuple[int, int, int], object]]) -> None:
    tags = [f"{a}.{b}.{c}" + (f"-{pre[0]}.{pre[1]}" if isinstance(pre, tuple) else "") for (a, b, c), pre in items]
    found = offered(tags, "edge")
    assert sorted(o.tag for o in found) == sorted(tags)
    order = [stack_version(o.version) for o in found]
    assert all(x > y for x, y in itertools.pairwise(order))


@pytest.mark.parametrize(("pin", "current", "available", "auto", "target"), [
    ("1.5.0", "2.0.0", "3.0.0", True, "1.5.0"),  # the pin wins, even downwards (the gate classifies that)
    (None, None, "1.1.0", False, "1.1.0"),  # first install: the newest available
    (None, None, None, True, None),  # nothing verifies yet: nothing to install
    (None, "1.0.0", "1.1.0", False, "1.0.0"),  # no autoUpgrade: what runs
    (None, "1.0.0", "1.1.0", True, "1.1.0"),
    (None, "2.0.0", "1.1.0", True, "2.0.0"),  # a channel with older releases never moves down
    (None, "1.0.0", None, True, "1.0.0"),
    (None, "1.0.0-rc.9", "1.0.0-rc.10", True, "1.0.0-rc.10"),
])
def test_target_version(pin: str | None, current: str | None, available: str | None, auto: bool,
                        target: str | None) -> None:
    assert select_target(pin, current, available, auto) == target


def test_upgrade_available_compares_by_precedence() -> None:
    assert upgrade_available("1.0.0-rc.9", "1.0.0-rc.10")
    assert not upgrade_available("1.0.0", "1.0.0-rc.10")
    assert not upgrade_available("1.0.0", None) and not upgrade_available(None, "1.0.0")
