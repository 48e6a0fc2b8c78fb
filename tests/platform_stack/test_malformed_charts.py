"""`stack classify`/`stack plan`/`stack push` on charts nobody should trust: one line at the file and field, exit 1,
bounded work; and every version compared by SemVer precedence."""

from __future__ import annotations

import gzip
import io
import json
import resource
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from compatibility.versions import InvalidVersion, kubernetes_version, need_major, stack_version
from platform_stack.classify import StackSnapshot, classify_stack
from tests.platform_stack.conftest import APPRAFTER, cli


def chart_dir(stack_all: Path, tmp_path: Path) -> Path:
    """The built chart unpacked into a directory we may edit."""
    with tarfile.open(stack_all) as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    return tmp_path / "unpacked" / "platform-stack"


def one_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 1 and proc.stdout == "" and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("command", ["classify", "plan"])
def test_an_unknown_class_names_the_file_line_and_class(stack_all: Path, tmp_path: Path, command: str) -> None:
    bad = chart_dir(stack_all, tmp_path)
    compat = bad / "compatibility.json"
    compat.write_text(compat.read_text().replace('"backstage": "data-migration"', '"backstage": "catastrophic"'))
    line = one_line(cli("stack", command, "--from", str(stack_all), "--to", str(bad)))
    lineno = next(i for i, text in enumerate(compat.read_text().splitlines(), 1) if "catastrophic" in text)
    assert line.startswith(f"{compat}:{lineno}:")
    assert '0.2.0.components.backstage: unknown class: \'catastrophic\' is not a platform-scope class' in line


@pytest.mark.parametrize(("file", "text", "expected"), [
    ("Chart.yaml", "apiVersion: v2\nname: platform-stack\n", "Chart.yaml:1:1: version: Chart.yaml needs a version"),
    ("Chart.yaml", "just a string\n", "Chart.yaml:1:1: version: Chart.yaml needs a version"),
    ("Chart.yaml", "apiVersion: v2\nname: x\nversion: 1.2\n", "Chart.yaml:3:10: version: Chart.yaml needs a version"),
    ("Chart.yaml", "name: x\nversion: banana\n", "Chart.yaml:2:10: version: 'banana' is not SemVer 2"),
    ("values.yaml", "- a\n- b\n", "values.yaml:1:1: expected a mapping (tier, components, overrides, ...)"),
    ("values.yaml", "tier: solo\ncomponents:\n  cilium: {enabled: true}\n",
     "values.yaml:3:3: components.cilium.source: expected a mapping"),
    ("values.yaml", "tier: solo\ncomponents: []\n", "values.yaml:2:1: components: expected a mapping"),
    ("compatibility.json", '{"banana": {}}', "compatibility.json:1:2: banana: 'banana' is not SemVer 2"),
    ("compatibility.json", '{"0.2.0": {"minimumKubernetesVersion": "latest"}}',
     "compatibility.json:1:40: 0.2.0.minimumKubernetesVersion: 'latest' is not a Kubernetes version"),
    ("compatibility.json", "[1, 2]", "compatibility.json:1:1: expected version -> {minimumKubernetesVersion"),
])
def test_malformed_chart_files_are_one_line_at_the_field(stack_all: Path, tmp_path: Path, file: str, text: str,
                                                         expected: str) -> None:
    bad = chart_dir(stack_all, tmp_path)
    (bad / file).write_text(text)
    line = one_line(cli("stack", "classify", "--from", str(stack_all), "--to", str(bad)))
    assert line.startswith(f"{bad}/{expected}"), line


def test_an_alias_bomb_chart_yaml_is_refused_without_expanding_it(stack_all: Path, tmp_path: Path) -> None:
    bad = chart_dir(stack_all, tmp_path)
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"a{i}: &a{i} [*a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}]"
              for i in range(1, 9)]
    (bad / "Chart.yaml").write_text("\n".join(lines) + "\nname: x\nversion: 1.0.0\n")
    line = one_line(cli("stack", "classify", "--from", str(stack_all), "--to", str(bad)))
    assert line.startswith(f"{bad}/Chart.yaml:2:10: a1.0: YAML alias *a0 is not allowed")  # refused, not expanded


def _tgz(path: Path, entries: dict[str, bytes]) -> Path:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in entries.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(gzip.compress(raw.getvalue(), compresslevel=9))
    return path


def test_an_archive_that_inflates_past_helms_limits_is_refused_unread(stack_all: Path, tmp_path: Path) -> None:
    zeros = b"\0" * (200 << 20)  # 200 MiB of zeros: about 200 KiB compressed
    bomb = _tgz(tmp_path / "bomb.tgz", {"platform-stack/Chart.yaml": b"name: x\nversion: 1.0.0\n",
                                        "platform-stack/zeros": zeros})
    del zeros
    assert bomb.stat().st_size < 1 << 20
    for args in (("classify", "--from", str(stack_all), "--to", str(bomb)),
                 ("push", str(bomb), "--to", "oci://127.0.0.1:1/acme", "--plain-http")):
        # 150 MiB of data segment: reading the inflated entry whole would end in a MemoryError.
        proc = subprocess.run([*APPRAFTER, "stack", *args], capture_output=True, text=True, timeout=120, check=False,
                              preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_DATA, (150 << 20, 150 << 20)))
        assert one_line(proc) == f"{bomb}:1:1: chart: inflates past Helm's limits (5242880 bytes a file, " \
                                 "104857600 in all, 10000 entries): refused"


def test_an_archive_that_is_not_a_chart_is_one_line(tmp_path: Path, stack_all: Path) -> None:
    garbage = tmp_path / "garbage.tgz"
    garbage.write_bytes(b"\x1f\x8b" + b"\0" * 100)
    assert one_line(cli("stack", "classify", "--from", str(stack_all), "--to", str(garbage))).startswith(
        f"{garbage}:1:1: chart: not a readable chart archive")
    two_tops = _tgz(tmp_path / "two.tgz", {"a/Chart.yaml": b"name: a\n", "b/Chart.yaml": b"name: b\n"})
    assert "expected every entry under one <chart>/ directory" in one_line(
        cli("stack", "push", str(two_tops), "--to", "oci://127.0.0.1:1/acme"))


def test_kube_version_flag_is_checked() -> None:
    proc = cli("stack", "classify", "--from", "/", "--to", "/", "--kube-version", "one.thirty")
    assert one_line(proc) == "--kube-version: 'one.thirty' is not a Kubernetes version (v1.31 or v1.31.4)"


# --- versions compare by SemVer precedence, never as strings ------------------------------------------------
def test_pre_releases_compare_numerically_and_bad_versions_do_not_parse() -> None:
    assert stack_version("1.0.0-rc.10") > stack_version("1.0.0-rc.9") > stack_version("1.0.0-beta.11")
    assert stack_version("1.0.0") > stack_version("1.0.0-rc.10") and stack_version("v0.2.0") == stack_version("0.2.0")
    for bad in ("1.0", "01.0.0", "1.0.0-", "latest", ""):
        with pytest.raises(InvalidVersion):
            stack_version(bad)
    assert kubernetes_version("v1.31.4-gke.100") == kubernetes_version("1.31.4") > kubernetes_version("1.31")
    assert kubernetes_version("v1.31.4+k3s1") == kubernetes_version("1.31.4")
    for bad in ("1.x", "v", "1.31.4.5", "latest"):
        with pytest.raises(InvalidVersion):
            kubernetes_version(bad)
    assert need_major("16.2") == need_major("v16") == "16" and need_major("16beta1") == "16beta1"


def test_classify_crosses_release_candidates_in_semver_order() -> None:
    compat = {v: {"minimumKubernetesVersion": "1.30.0", "components": {"pg": cls}} for v, cls in
              (("1.0.0-rc.9", "safe"), ("1.0.0-rc.10", "data-migration"), ("1.0.0", "safe"))}
    old = {"pg": {"source": {"targetRevision": "1"}, "selfManaged": False}}
    new = {"pg": {"source": {"targetRevision": "2"}, "selfManaged": False}}
    result = classify_stack(StackSnapshot("1.0.0-rc.9", "1.30.0", compat, old),
                            StackSnapshot("1.0.0-rc.10", "1.30.0", compat, new))
    assert result.classification == "data-migration"  # rc.10 follows rc.9 (string order would put it first)
    down = classify_stack(StackSnapshot("1.0.0-rc.10", "1.30.0", compat, old),
                          StackSnapshot("1.0.0-rc.9", "1.30.0", compat, new))
    assert down.classification == "breaking" and "downgrade" in down.components[0].reasons[0]


def test_a_plan_over_a_broken_chart_dir_never_reaches_the_classifier(stack_all: Path, tmp_path: Path) -> None:
    bad = chart_dir(stack_all, tmp_path)
    shutil.rmtree(bad / "templates")
    (bad / "compatibility.json").write_text(json.dumps({"0.2.0": {"components": {"x": 1}}}))
    assert "unknown class" in one_line(cli("stack", "plan", "--from", str(bad), "--to", str(stack_all)))
