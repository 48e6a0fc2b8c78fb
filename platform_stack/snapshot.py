"""Loads a StackSnapshot from a chart .tgz, a built chart directory or a platform-stack CUE source, fail closed.

Charts come from anyone's registry or release page: the archive is read within Helm's limits, each file with
the safe YAML/JSON reader (no aliases, bounded), and every field the classifier reads is checked, with
problems reported at their line in the file (`chart.tgz!/Chart.yaml:3:10: version: ...`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from compatibility.classes import UnknownClass, rank
from compatibility.versions import InvalidVersion, kubernetes_version, stack_version
from platform_stack.classify import StackSnapshot
from platform_stack.effective import ValuesError, effective_components, retired_components, with_overrides
from platform_stack.errors import StackError
from platform_stack.tarball import read_chart_files
from renderer import userfile
from renderer.yaml_input import YamlDocument, parse

__all__ = ["chart_files", "load_overrides", "load_snapshot"]

WANTED = ("Chart.yaml", "values.yaml", "compatibility.json")


def chart_files(path: Path, version: str | None = None) -> dict[str, YamlDocument]:
    """Chart.yaml, values.yaml, compatibility.json of a .tgz, a chart dir, or a source (built in memory), parsed."""
    raw: dict[str, bytes]
    if path.is_file():
        archive = read_chart_files(path, WANTED)
        raw, prefix = archive.files, f"{path}!/{archive.top}/"
    elif (path / "Chart.yaml").is_file():
        raw = {name: userfile.read_bytes(path / name, root=path) for name in WANTED if (path / name).exists()}
        prefix = f"{path}/"
    elif (path / "platform.cue").is_file():
        from platform_stack.build import build_chart

        chart, _ = build_chart(path, version=version)
        raw, prefix = {name: chart.files[name] for name in WANTED}, f"{path}:built/"
    else:
        raise StackError(f"{path}:1:1: classify: not a chart .tgz, chart directory or platform-stack source")
    missing = [name for name in WANTED if name not in raw]
    if missing:
        raise StackError(*(f"{path}:1:1: {name}: missing (not built by `apprafter stack build`)" for name in missing))
    return {name: parse(raw[name], prefix + name, json_only=name.endswith(".json")) for name in WANTED}


def _check_compatibility(doc: YamlDocument) -> dict[str, Any]:
    """version -> {minimumKubernetesVersion, components: name -> class}: every key, version and class readable."""
    table = doc.data
    if not isinstance(table, dict):
        raise doc.error((), "expected version -> {minimumKubernetesVersion, components}")
    for version, entry in table.items():
        try:
            stack_version(version)
        except InvalidVersion as e:
            raise doc.error((version,), str(e), at_key=True) from None
        if not isinstance(entry, dict) or not isinstance(entry.get("components", {}), dict):
            raise doc.error((version,), "expected {minimumKubernetesVersion, components: {name: class}}")
        minimum = entry.get("minimumKubernetesVersion")
        if minimum is not None:
            try:
                kubernetes_version(str(minimum))
            except InvalidVersion as e:
                raise doc.error((version, "minimumKubernetesVersion"), str(e)) from None
        for name, cls in entry.get("components", {}).items():
            try:
                rank(str(cls), "platform")
            except UnknownClass as e:
                raise doc.error((version, "components", name), f"unknown class: {e}") from None
    return table


def load_snapshot(path: Path, tier: str | None = None, overrides: dict[str, Any] | None = None,
                  version: str | None = None) -> StackSnapshot:
    """A snapshot of `path` with `tier` (default: the chart's) and PlatformStack-style `overrides` applied."""
    files = chart_files(path, version)
    meta, values_doc = files["Chart.yaml"], files["values.yaml"]
    if not isinstance(meta.data, dict) or not isinstance(meta.data.get("version"), str):
        raise meta.error(("version",), "Chart.yaml needs a version (SemVer 2)")
    chart_version = meta.data["version"]
    try:
        stack_version(chart_version)
    except InvalidVersion as e:
        raise meta.error(("version",), str(e)) from None
    compatibility = _check_compatibility(files["compatibility.json"])
    if not isinstance(values_doc.data, dict):
        raise values_doc.error((), "expected a mapping (tier, components, overrides, ...)")
    try:
        components = effective_components(with_overrides(values_doc.data, tier, overrides),
                                          retired_components(values_doc.data, compatibility))
    except ValuesError as e:
        raise values_doc.error(e.path, e.message) from None
    except StackError as e:
        raise StackError(*(f"{values_doc.display}:1:1: {line}" for line in e.lines())) from e
    annotations = meta.data.get("annotations")
    minimum = compatibility.get(chart_version, {}).get("minimumKubernetesVersion") or \
        (annotations.get("apprafter.io/minimum-kubernetes-version") if isinstance(annotations, dict) else None) \
        or "0.0.0"
    try:
        kubernetes_version(str(minimum))
    except InvalidVersion as e:
        raise meta.error(("annotations", "apprafter.io/minimum-kubernetes-version"), str(e)) from None
    return StackSnapshot(chart_version, str(minimum), compatibility, components)


def load_overrides(path: Path) -> dict[str, Any]:
    """Read a PlatformStack `spec.overrides` mapping (YAML or JSON)."""
    data = userfile.read_bytes(path, root=Path(userfile.absolute(path)).parent, what="the overrides file")
    doc = parse(data, str(path), json_only=path.suffix == ".json")
    if not isinstance(doc.data, dict):
        raise doc.error((), "overrides: expected component -> {pin, enabled, values}")
    return doc.data
