"""Install for an app repository: the built wheel in a fresh virtualenv (no checkout on any path), a cue from the
tool cache on PATH, nothing else. validate, render and plan work; a cue outside the supported range is refused
with the version found, the range and both remedies, and no message names `make`. ≈ 30-60 s (pip from PyPI)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.cli.monorepo import app_text, git
from tests.renderer.helpers import REPO, write_app
from toolchain.pins import pins
from toolchain.tools import TOOLS, tools_dir


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(work / "dist"),
                    str(REPO)], check=True, capture_output=True, timeout=600)
    (wheel,) = (work / "dist").glob("*.whl")
    name = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["name"]
    assert wheel.name.startswith(name.replace("-", "_") + "-")
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(work / "venv")], check=True, timeout=300)
    pip = subprocess.run([str(work / "venv" / "bin" / "pip"), "install", "--quiet", str(wheel)], capture_output=True,
                         text=True, timeout=900, check=False)
    assert pip.returncode == 0, pip.stderr
    return work / "venv"


def cue_dir(version: str) -> Path:
    found = tools_dir() / "cue" / version
    assert (found / "cue").exists(), f"cue {version} missing: run `make setup`"
    return found


def apprafter(venv: Path, cwd: Path, *args: str, cue: str | None = None) -> subprocess.CompletedProcess[str]:
    """The installed console script, with only the venv and one cue on PATH and no tool cache."""
    path = f"{venv / 'bin'}:{cue_dir(cue or TOOLS['cue'].pinned)}:/usr/bin:/bin"
    env = {"PATH": path, "HOME": str(cwd.parent / "home"), "APPRAFTER_TOOLS_DIR": str(cwd.parent / "no-tools")}
    return subprocess.run(["apprafter", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
                          check=False)


def test_the_wheel_alone_validates_renders_and_plans(venv: Path, tmp_path: Path) -> None:
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import apprafter, toolchain.tools as t; "
                            "print(apprafter.__file__, t.in_checkout())"], capture_output=True, text=True,
                           check=True, env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path).stdout.split()
    assert where[0].startswith(str(venv)) and where[1] == "False"
    repo = tmp_path / "shop"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    write_app(repo, app_text("shop"))
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "first")
    write_app(repo, app_text("shop", network="public"))
    for version in (TOOLS["cue"].pinned, *(v for v in pins()["CUE_TEST_VERSIONS"].split() if TOOLS["cue"].supports(v))):
        valid = apprafter(venv, repo, "validate", cue=version)
        assert (valid.returncode, valid.stderr) == (0, "apprafter/Application.cue: valid (dev, prod)\n")
        rendered = apprafter(venv, repo, "render", "-e", "prod", "--mode", "manifests", cue=version)
        assert rendered.returncode == 0 and "kind: HTTPRoute" in rendered.stdout, rendered.stderr
        planned = apprafter(venv, repo, "plan", "--from", "git:main", "--to", ".", "-e", "prod",
                            "--detailed-exitcode", cue=version)
        assert planned.returncode == 2 and "AR-SB004" in planned.stdout and "MigrationPlan: shop-prod-" in \
            planned.stdout, planned.stderr
    version = apprafter(venv, repo, "version")
    assert version.returncode == 0 and f"cue       {TOOLS['cue'].pinned} at " in version.stdout
    assert apprafter(venv, repo, "doctor", "--users-only").returncode == 0


def test_a_cue_outside_the_range_names_both_remedies_and_no_make(venv: Path, tmp_path: Path) -> None:
    (outside,) = [v for v in pins()["CUE_TEST_VERSIONS"].split() if not TOOLS["cue"].supports(v)]
    repo = tmp_path / "shop"
    write_app(repo, app_text("shop"))
    found = cue_dir(outside) / "cue"
    remedy = (f"install one with `go install cuelang.org/go/cmd/cue@{TOOLS['cue'].pinned}`, or point APPRAFTER_CUE "
              "at one")
    for argv in (["validate"], ["render", "-e", "prod"], ["plan", "--from", ".", "--to", ".", "-e", "prod"]):
        result = apprafter(venv, repo, *argv, cue=outside)
        assert result.returncode == 2 and result.stdout == ""
        assert result.stderr == f"apprafter: cue at {found} is {outside}; apprafter supports cue " \
                                f"{TOOLS['cue'].supported}: {remedy}\n"
    doctor = apprafter(venv, repo, "doctor", "--users-only", cue=outside)
    assert doctor.returncode == 1 and f"cue: {remedy}" in doctor.stderr and "make" not in doctor.stderr + \
        doctor.stdout
    missing = subprocess.run(["apprafter", "validate"], cwd=repo, capture_output=True, text=True, check=False,
                             env={"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "APPRAFTER_TOOLS_DIR": str(tmp_path / "x"),
                                  "HOME": str(tmp_path)})
    assert missing.returncode == 2 and missing.stderr == (
        f"apprafter: cue not found (supported: {TOOLS['cue'].supported}): {remedy}\n")
    assert os.environ.get("PYTHONPATH") is None or str(REPO) not in os.environ["PYTHONPATH"]


def test_the_wheel_carries_the_sidecar_settings_cluster_bootstrap_applies(venv: Path) -> None:
    """`cluster-bootstrap` applies deploy/argocd's files themselves: the wheel holds them byte for byte."""
    found = subprocess.run([str(venv / "bin" / "python"), "-c", "from apprafter.bootstrap_cmd import "
                            "sidecar_directory; print(sidecar_directory())"], capture_output=True, text=True,
                           check=True, timeout=60, cwd=venv)
    directory = Path(found.stdout.strip())
    assert directory.is_relative_to(venv)
    checkout = REPO / "deploy" / "argocd"
    assert sorted(p.name for p in directory.iterdir()) == sorted(p.name for p in checkout.iterdir())
    for path in checkout.iterdir():
        assert (directory / path.name).read_bytes() == path.read_bytes(), path.name
