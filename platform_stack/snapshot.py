"""Loads a StackSnapshot from a chart .tgz, a built chart directory or a platform-stack CUE source."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import yaml

from platform_stack.classify import StackSnapshot
from platform_stack.effective import effective_components, with_overrides
from platform_stack.errors import StackError
from renderer import userfile

WANTED = ("Chart.yaml", "values.yaml", "compatibility.json")


def chart_files(path: Path, version: str | None = None) -> dict[str, bytes]:
    """Chart.yaml, values.yaml, compatibility.json of a .tgz, a chart dir, or a source (built in memory)."""
    if path.is_file():
        try:
            data = userfile.read_bytes(path, max_bytes=userfile.MAX_ARCHIVE_BYTES, what="the chart archive")
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
                out: dict[str, bytes] = {}
                for member in tar.getmembers():
                    rel = member.name.split("/", 1)[-1]
                    handle = tar.extractfile(member) if rel in WANTED else None
                    if handle is not None:
                        out[rel] = handle.read()
        except (OSError, tarfile.TarError) as exc:
            raise StackError(f"{path}:1:1: chart: not a readable chart archive ({exc})") from exc
    elif (path / "Chart.yaml").is_file():
        out = {name: userfile.read_bytes(path / name, root=path) for name in WANTED if (path / name).exists()}
    elif (path / "platform.cue").is_file():
        from platform_stack.build import build_chart

        chart, _ = build_chart(path, version=version)
        out = {name: chart.files[name] for name in WANTED}
    else:
        raise StackError(f"{path}:1:1: classify: not a chart .tgz, chart directory or platform-stack source")
    missing = [name for name in WANTED if name not in out]
    if missing:
        raise StackError(*(f"{path}:1:1: {name}: missing (not built by `apprafter stack build`)"
                           for name in missing))
    return out


def load_snapshot(path: Path, tier: str | None = None, overrides: dict[str, Any] | None = None,
                  version: str | None = None) -> StackSnapshot:
    """A snapshot of `path` with `tier` (default: the chart's) and PlatformStack-style `overrides` applied."""
    files = chart_files(path, version)
    try:
        meta = yaml.safe_load(files["Chart.yaml"])
        values = yaml.safe_load(files["values.yaml"])
        compatibility = json.loads(files["compatibility.json"])
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise StackError(f"{path}:1:1: chart: unreadable metadata ({exc})") from exc
    version = str(meta["version"])
    values = with_overrides(values, tier, overrides)
    try:
        components = effective_components(values)
    except StackError as exc:
        raise StackError(*(f"{path}:1:1: {line}" for line in exc.lines)) from exc
    minimum = str(compatibility.get(version, {}).get("minimumKubernetesVersion")
                  or (meta.get("annotations") or {}).get("apprafter.io/minimum-kubernetes-version", "0.0.0"))
    return StackSnapshot(version, minimum, compatibility, components)


def load_overrides(path: Path) -> dict[str, Any]:
    """Read a PlatformStack `spec.overrides` mapping (YAML or JSON)."""
    text = userfile.read_text(path, root=Path(userfile.absolute(path)).parent, what="the overrides file")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise StackError(f"{path}:1:1: overrides: unreadable ({exc})") from exc
    if not isinstance(data, dict):
        raise StackError(f"{path}:1:1: overrides: expected component -> {{pin, enabled, values}}")
    return data
