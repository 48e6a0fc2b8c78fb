"""Every version the toolchain compares, parsed by the semver library: stack/chart versions, Kubernetes versions,
the versions of a need. Nothing is compared as a string and nothing unparsable is read as a version.

    stack_version("1.0.0-rc.10") > stack_version("1.0.0-rc.9")        # SemVer 2 precedence
    kubernetes_version("v1.31.4-gke.100") == kubernetes_version("1.31.4")
"""

from __future__ import annotations

import semver

from toolchain.errors import USER_EXIT, AppRafterError

__all__ = ["InvalidVersion", "kubernetes_version", "need_major", "stack_version"]


class InvalidVersion(AppRafterError):
    """Text that is not the version it should be; callers add where it was written."""

    exit_code = USER_EXIT


def _strip_v(text: str) -> str:
    return text[1:] if text[:1] in ("v", "V") else text


def stack_version(text: str) -> semver.Version:
    """A platform-stack (chart) version: SemVer 2 (MAJOR.MINOR.PATCH[-PRE][+BUILD]), one leading v allowed."""
    try:
        return semver.Version.parse(_strip_v(text.strip()))
    except (ValueError, TypeError):
        raise InvalidVersion(f"{text!r} is not SemVer 2 (MAJOR.MINOR.PATCH[-PRE])"[:200]) from None


def kubernetes_version(text: str) -> semver.Version:
    """A Kubernetes version as clusters report it ("v1.31.4", "1.31", "v1.31.4+k3s1", "1.31.0-gke.100").

    Only MAJOR.MINOR.PATCH counts: vendors write their build into the pre-release part, and helm's
    `>=1.31.0-0` admits them all, so `1.31.4-gke.100` runs what 1.31.4 runs.
    """
    try:
        version = semver.Version.parse(_strip_v(text.strip()), optional_minor_and_patch=True)
    except (ValueError, TypeError):
        raise InvalidVersion(f"{text!r} is not a Kubernetes version (v1.31 or v1.31.4)"[:200]) from None
    return version.finalize_version()


def need_major(text: str) -> str:
    """The major version of a need's `version` ("16", "16.2", "v16.2.1" -> "16"); the text itself when it is not
    a version, so that any change of an unreadable version counts as a major one (fail closed)."""
    try:
        return str(semver.Version.parse(_strip_v(text.strip()), optional_minor_and_patch=True).major)
    except (ValueError, TypeError):
        return text
