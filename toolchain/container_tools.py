"""The Debian packages the images and the node tier run (CONTAINER_TOOLS and NODE_TOOLS pins: a minimum each)."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
from pathlib import Path

from toolchain.pins import pins

SETUP_REMEDY = "run `make setup` (tools/setup-images.sh installs it with apt-get)"
NODE_REMEDY = "run `make setup` (tools/setup-node.sh installs it with apt-get)"
_VERSION = re.compile(r"\b(\d+\.\d+(?:\.\d+)?)")


@dataclasses.dataclass(frozen=True)
class ContainerTool:
    """One command, the Debian package that ships it, and the oldest version known to work (None: unchecked)."""

    name: str
    package: str
    minimum: str | None
    # Read the Debian package's version instead of `NAME --version` (the CNI plugins print none of their own).
    by_package: bool = False
    remedy: str = SETUP_REMEDY


@dataclasses.dataclass(frozen=True)
class Found:
    """What is on this machine for one tool: its path and version (None when missing or unreadable)."""

    tool: ContainerTool
    path: Path | None
    version: str | None

    @property
    def ok(self) -> bool:
        if self.path is None:
            return False
        if self.tool.minimum is None:
            return True
        return self.version is not None and _key(self.version) >= _key(self.tool.minimum)

    @property
    def problem(self) -> str | None:
        """Why the tool is not usable, with the remedy; None when it is."""
        if self.ok:
            return None
        if self.path is None:
            return f"{self.tool.name} not found (Debian package {self.tool.package}): {self.tool.remedy}"
        return (f"{self.tool.name} at {self.path} is {self.version or 'of unknown version'}, want >= "
                f"{self.tool.minimum}: upgrade the Debian package {self.tool.package}")


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def container_tools() -> list[ContainerTool]:
    """CONTAINER_TOOLS from versions.env: `command:package:minimum,...` ("-" = no version check)."""
    return _listed("CONTAINER_TOOLS")


def node_tools() -> list[ContainerTool]:
    """NODE_TOOLS from versions.env (containerd, CNI plugins, iptables...), checked by Debian package version."""
    return _listed("NODE_TOOLS", by_package=True, remedy=NODE_REMEDY)


def _listed(key: str, by_package: bool = False, remedy: str = SETUP_REMEDY) -> list[ContainerTool]:
    tools = []
    for entry in pins()[key].split(","):
        name, package, minimum = entry.split(":")
        tools.append(ContainerTool(name, package, None if minimum == "-" else minimum, by_package, remedy))
    return tools


def find(tool: ContainerTool) -> Found:
    """Locate `tool` (APPRAFTER_<NAME> overrides PATH) and read its `--version`."""
    override = os.environ.get("APPRAFTER_" + tool.name.upper().replace("-", "_"))
    where = override or shutil.which(tool.name)
    path = Path(where) if where and Path(where).is_file() else None
    if path is None or tool.minimum is None:
        return Found(tool, path, None)
    argv = ["dpkg-query", "-W", "-f", "${Version}", tool.package] if tool.by_package else [str(path), "--version"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return Found(tool, path, None)
    match = _VERSION.search(proc.stdout + proc.stderr)
    return Found(tool, path, match.group(1) if match else None)
