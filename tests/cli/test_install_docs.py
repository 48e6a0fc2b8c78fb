"""docs/install.md as written: the versions table is the sources' versions, every tag the docs name is the release
tag the recipe creates, every key file it verifies with exists (or is the one step 5 makes), and its "Try it" runs
as printed, with the real cue."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from tests.renderer.helpers import REPO, run_cli
from toolchain.pins import pins

INSTALL = (REPO / "docs" / "install.md").read_text()
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
TAG = f"v{VERSION}"


def row(piece: str) -> str:
    """The version cell of the versions table's row that starts with `piece`."""
    found = re.search(rf"^\| {re.escape(piece)}[^|]* \| ([^|]+) \|", INSTALL, re.MULTILINE)
    assert found is not None, piece
    return found[1]


def test_the_versions_table_is_the_sources() -> None:
    assert row("CLI `apprafter-render`") == f"{VERSION}, `{TAG}`"
    assert row("images") == VERSION
    charts = {re.search(r"^version: (\S+)$", p.read_text(), re.MULTILINE)[1]  # type: ignore[index]
              for p in (REPO / "deploy" / "charts").glob("*/Chart.yaml")}
    assert row("charts") == VERSION and charts == {VERSION}
    stacks = re.findall(r'^\t"(\d+\.\d+\.\d+)": \{', (REPO / "platform_stack" / "compatibility.cue").read_text(),
                        re.MULTILINE)
    newest = max(stacks, key=lambda v: tuple(map(int, v.split("."))))
    assert row("platform stack").startswith(f"{newest} (needs Kubernetes ≥ 1.31; carries AppRafter {VERSION})")
    operator = (REPO / "platform_stack" / "components" / "apprafter-operator.cue").read_text()
    assert f'version:  "{VERSION}"' in operator
    assert pins()["ARGOCD_OLDEST_VERSION"] in row("Argo CD") and pins()["ARGOCD_VERSION"] in row("Argo CD")
    assert pins()["KUBERNETES_VERSION"] in row("Kubernetes")
    cue = row("cue")
    assert pins()["CUE_OLDEST_VERSION"] in cue and pins()["CUE_BELOW_VERSION"] in cue and pins()["CUE_VERSION"] in cue


def test_every_tag_the_docs_name_is_the_release_tag() -> None:
    named = {}
    for path in (REPO / "README.md", REPO / ".pre-commit-hooks.yaml", *(REPO / "docs").glob("*.md")):
        for tag in re.findall(r"(?:render@|rev: |--branch )(v\d+\.\d+\.\d+)", path.read_text()):
            named.setdefault(tag, []).append(path.name)
    assert set(named) == {TAG}, named
    recipe = (REPO / "docs" / "development.md").read_text().split("## Release", 1)[1]
    assert "`make release`" in recipe  # it makes the tag: scripts/release.py, proved by tests/cli/test_wheel_install.py
    assert 'git("tag", "-a", tag' in (REPO / "scripts" / "release.py").read_text()
    assert "\nrelease:\n" in (REPO / "Makefile").read_text()


def test_every_key_install_md_verifies_with_exists_or_is_made_in_step_5() -> None:
    keys = set(re.findall(r"--key (\S+\.pub)", INSTALL))
    assert keys == {"cosign.pub"}  # made by `cosign generate-key-pair` in step 5
    assert "cosign generate-key-pair" in INSTALL.split("### 5.")[1].split("### 6.")[0]
    for named in re.findall(r"deploy/keys/[\w.-]+\.pub", INSTALL):
        if "apprafter-release" in named:  # said of releases to come, never given to a command
            continue
        assert (REPO / named).exists(), named


def test_try_it_runs_as_printed(tmp_path: Path) -> None:
    block = INSTALL.split("### 8. Try it")[1].split("```sh\n", 1)[1].split("\n```", 1)[0]
    cue = block.split("<<'CUE'\n", 1)[1].split("\nCUE\n", 1)[0]
    app = tmp_path / "hello" / "apprafter" / "Application.cue"
    app.parent.mkdir(parents=True)
    app.write_text(cue + "\n")
    valid = run_cli("validate", cwd=app.parent.parent)
    assert valid.returncode == 0 and f"# {valid.stderr.strip()}" in block, valid.stderr
    names = run_cli("render", "-e", "dev", "--mode", "manifests", "-o", "name", cwd=app.parent.parent)
    assert names.returncode == 0, names.stderr
    shown = re.search(r"-o name +# (.*)$", block, re.MULTILINE)
    assert shown is not None
    listed = [n.strip() for n in shown[1].split(",") if n.strip() not in ("...", "")]
    printed = names.stdout.splitlines()
    assert all(any(line.startswith(n.rstrip(".")) for line in printed) for n in listed), (listed, printed)
