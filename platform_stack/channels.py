"""Channels over the SemVer tags of the chart repository (spec §3.11; the OCI tag is the source of truth), and which
version the PlatformStack controller targets. Pure: tags and versions in, versions out.

    stable  releases only (no pre-release part)
    beta    stable, plus pre-releases of the form -rc.N and -beta.N
    edge    every SemVer tag

Precedence is SemVer 2's (compatibility.versions: `1.0.0-rc.10` > `1.0.0-rc.9`), never string order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

import semver

from compatibility.versions import InvalidVersion, stack_version

__all__ = ["Offered", "in_channel", "offered", "select_target", "tag_version", "upgrade_available"]

_BETA = re.compile(r"(rc|beta)\.(0|[1-9][0-9]*)")


class Offered(NamedTuple):
    """A version a channel offers and the tag it is pushed under (helm writes `+` as `_` in tags)."""

    version: str
    tag: str


def tag_version(tag: str) -> semver.Version | None:
    """The SemVer version a tag names, or None for any other tag (cosign's `sha256-<hex>.sig`, `latest`, `v1.0.0`)."""
    if not tag[:1].isdigit():
        return None  # SemVer has no leading v: `v1.0.0` and `1.0.0` must not be one version twice
    try:
        return stack_version(tag.replace("_", "+"))
    except InvalidVersion:
        return None


def in_channel(version: semver.Version, channel: str) -> bool:
    """Whether `channel` offers `version`."""
    if channel == "edge":
        return True
    if version.prerelease is None:
        return True
    return channel == "beta" and _BETA.fullmatch(version.prerelease) is not None


def offered(tags: Iterable[str], channel: str) -> list[Offered]:
    """The versions `channel` offers among `tags`, newest first (ties in precedence, e.g. build metadata, by tag)."""
    found = []
    for tag in tags:
        version = tag_version(tag)
        if version is not None and in_channel(version, channel):
            found.append((version, tag))
    found.sort(key=lambda vt: vt[1], reverse=True)
    found.sort(key=lambda vt: vt[0], reverse=True)  # stable sort: precedence first, then the tag
    return [Offered(str(version), tag) for version, tag in found]


def _newer(a: str, b: str | None) -> bool:
    return b is None or stack_version(a) > stack_version(b)


def select_target(pin: str | None, current: str | None, available: str | None, auto_upgrade: bool) -> str | None:
    """The version to run: the pin; else, on a first install, the newest available; else the current one, moved
    to the newest available only with autoUpgrade (and never down: a channel switched to one with older releases
    keeps what runs)."""
    if pin is not None:
        return pin
    if current is None:
        return available
    if auto_upgrade and available is not None and _newer(available, current):
        return available
    return current


def upgrade_available(current: str | None, available: str | None) -> bool:
    """A version newer than the one running is available (UpgradeAvailable)."""
    return available is not None and current is not None and _newer(available, current)
