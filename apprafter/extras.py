"""Which extra (optional dependencies) each command needs, and the one line a command fails with without it.

The base install is the app developer's (render, validate, envs, plan, schema, crds, version, doctor, completion,
the Argo CD plugin); the commands of who runs a cluster need an extra of pyproject.toml. Which distributions an
extra holds is read from the installed package's metadata, so pyproject.toml stays the one list.
"""

from __future__ import annotations

import re

from toolchain.errors import ToolFailure

__all__ = ["DISTRIBUTION", "EXTRAS", "MissingExtra", "missing", "require"]

DISTRIBUTION = "apprafter-render"
# Top-level command -> the extra it needs. Every other command runs on the base install.
EXTRAS: dict[str, str] = {
    "cluster-bootstrap": "cluster",
    "migration": "cluster",
    "platform": "cluster",
    "repo": "cluster",
    "stack": "stack",
    "operator": "operator",
    "webhook": "webhook",
    # `app scaffold | rollback` and `app add --dry-run` need nothing more; the rest read the cluster
    **{f"app {sub}": "cluster" for sub in ("add", "list", "status", "logs", "remove", "open")},
    "secret seal": "cluster",
    "db": "cluster",
}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class MissingExtra(ToolFailure):
    """A command's extra is not installed: the message names the extra and the pip command that adds it."""


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def missing(extra: str) -> list[str]:
    """The distributions of `extra` ("" for the base install) that are not installed, by their names; [] when this
    package was not installed as a distribution (a source tree on PYTHONPATH: nothing to read, the imports decide)."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        requires = distribution(DISTRIBUTION).requires or []
    except PackageNotFoundError:
        return []
    marker = re.compile(r"""extra\s*==\s*["']""" + re.escape(extra) + """["']""")
    absent: list[str] = []
    for requirement in requires:
        spec, _, condition = requirement.partition(";")
        name = _NAME.match(spec.strip())
        wanted = marker.search(condition) if extra else "extra" not in condition
        if name is None or not wanted or _normal(name.group()) == DISTRIBUTION:
            continue
        try:
            distribution(name.group())
        except PackageNotFoundError:
            absent.append(name.group())
    return sorted(set(absent), key=str.lower)


def require(command: str) -> None:
    """MissingExtra (exit 2, one line) when `command`'s extra is not installed."""
    extra = EXTRAS.get(command)
    if extra is None:
        return
    absent = missing(extra)
    if absent:
        raise MissingExtra(f"`apprafter {command}` needs the extra [{extra}], which is not installed (missing "
                           f"{', '.join(absent)}): pip install '{DISTRIBUTION}[{extra}]'")
