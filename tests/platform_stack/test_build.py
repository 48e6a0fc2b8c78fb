"""`stack build`: reproducible bytes, the tarball layout helm expects, and failures a release author hits."""

from __future__ import annotations

import gzip
import hashlib
import io
import re
import tarfile
from pathlib import Path
from typing import Any

import yaml

from tests.platform_stack.conftest import EPOCH, built_tgz, cli, ok


def test_two_builds_are_byte_identical(tmp_path: Path) -> None:
    first = ok(cli("stack", "build", "--out", str(tmp_path / "a")))
    second = ok(cli("stack", "build", "--out", str(tmp_path / "b")))
    sha_a, path_a = first.strip().split("  ")
    sha_b, path_b = second.strip().split("  ")
    print("build 1 sha256:", sha_a)
    print("build 2 sha256:", sha_b)
    data_a, data_b = Path(path_a).read_bytes(), Path(path_b).read_bytes()
    assert data_a == data_b
    assert sha_a == sha_b == hashlib.sha256(data_a).hexdigest()


def test_tarball_is_normalised(stack_all: Path) -> None:
    data = stack_all.read_bytes()
    assert data[4:8] == b"\0\0\0\0", "gzip header mtime must be 0"
    assert not data[3] & 0x08, "gzip header must carry no file name"
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names == sorted(names)
    assert all(n.startswith("platform-stack/") and ".." not in n for n in names)
    for m in members:
        assert (m.mtime, m.uid, m.gid, m.uname, m.gname, m.mode, m.isfile()) == (
            int(EPOCH),
            0,
            0,
            "",
            "",
            0o644,
            True,
        ), m.name
    assert {
        "platform-stack/Chart.yaml",
        "platform-stack/values.yaml",
        "platform-stack/values.schema.json",
        "platform-stack/templates/applications.yaml",
    } <= set(names)


def test_source_date_epoch_sets_every_mtime_and_nothing_else(tmp_path: Path) -> None:
    a = built_tgz(tmp_path / "a")
    proc = cli("stack", "build", "--out", str(tmp_path / "b"), env={"SOURCE_DATE_EPOCH": "1800000000"})
    b = Path(ok(proc).split("  ")[1].strip())
    assert a.read_bytes() != b.read_bytes()
    with tarfile.open(a) as ta, tarfile.open(b) as tb:
        assert {m.mtime for m in tb.getmembers()} == {1800000000}
        for ma, mb in zip(ta.getmembers(), tb.getmembers(), strict=True):
            assert ma.name == mb.name
            fa, fb = ta.extractfile(ma), tb.extractfile(mb)
            assert fa is not None and fb is not None and fa.read() == fb.read()


def test_chart_metadata_comes_from_compatibility(stack_all: Path, source_eval: dict) -> None:  # type: ignore[type-arg]
    with tarfile.open(stack_all) as tar:
        handle = tar.extractfile("platform-stack/Chart.yaml")
        assert handle is not None
        meta = yaml.safe_load(handle.read())
    newest = max(source_eval["compatibility"], key=lambda v: tuple(int(x) for x in v.split(".")))
    assert meta["version"] == newest and meta["appVersion"] == newest
    assert meta["kubeVersion"] == f">={source_eval['compatibility'][newest]['minimumKubernetesVersion']}-0"
    assert stack_all.name == f"platform-stack-{newest}.tgz"


def test_values_yaml_components_are_a_map_in_documented_order(stack_all: Path) -> None:
    with tarfile.open(stack_all) as tar:
        handle = tar.extractfile("platform-stack/values.yaml")
        assert handle is not None
        text = handle.read().decode()
    values = yaml.safe_load(text)
    assert isinstance(values["components"], dict) and values["overrides"] == {}
    top = [line.split(":")[0] for line in text.splitlines() if re.match(r"^[a-z]", line)]
    assert top == ["tier", "domain", "argocd", "overrides", "components"]


def test_version_without_compatibility_entry_fails(tmp_path: Path) -> None:
    proc = cli("stack", "build", "--version", "9.9.9", "--out", str(tmp_path))
    assert proc.returncode == 1 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert re.match(
        r"^\S*compatibility\.cue:\d+:\d+: compatibilityTable: no entry for version 9\.9\.9", lines[0]
    )
    assert not list(tmp_path.glob("*.tgz"))


def test_component_without_class_in_the_built_version_fails(source_copy: Path, tmp_path: Path) -> None:
    compat = source_copy / "compatibility.cue"
    text = compat.read_text()
    last = text.rindex('"network-policies":')
    compat.write_text(text[:last] + "// removed\n" + text[text.index("\n", last) + 1 :])
    proc = cli("stack", "build", "--source", str(source_copy), "--out", str(tmp_path))
    assert proc.returncode == 1 and proc.stdout == ""
    assert 'compatibilityTable."0.2.0".components.network-policies: no class' in proc.stderr


def test_component_missing_from_a_tier_overlay_fails_with_position(source_copy: Path, tmp_path: Path) -> None:
    overlay = source_copy / "tiers" / "team.cue"
    overlay.write_text("\n".join(ln for ln in overlay.read_text().splitlines() if "keda:" not in ln) + "\n")
    proc = cli("stack", "build", "--source", str(source_copy), "--out", str(tmp_path))
    assert proc.returncode == 1 and proc.stdout == ""
    first = proc.stderr.splitlines()[0]
    assert re.match(r"^\S+\.cue:\d+:\d+: .*keda.*team", first), proc.stderr


def test_unknown_tier_is_a_usage_error(tmp_path: Path) -> None:
    proc = cli("stack", "build", "--tier", "huge", "--out", str(tmp_path))
    assert proc.returncode == 1 and proc.stdout == "" and "huge" in proc.stderr  # a usage error: the user's input


def test_missing_cue_is_a_tool_error_naming_the_remedy(tmp_path: Path) -> None:
    proc = cli("stack", "build", "--out", str(tmp_path), env={"APPRAFTER_CUE": str(tmp_path / "no-cue")})
    assert proc.returncode == 2 and proc.stdout == ""
    assert "make setup" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_the_stack_knows_the_renderers_tiers_in_order(source_eval: dict[str, Any]) -> None:
    from renderer.context import TIERS

    assert source_eval["tiers"] == list(TIERS)  # CUE's #tierNames and the renderer's tiers are one list
