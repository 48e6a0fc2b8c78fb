"""The `apprafter-validate` hook of .pre-commit-hooks.yaml, run by the real pre-commit (PyPI) as an app repository
runs it: its .pre-commit-config.yaml names this repository (a commit of the checkout as it is now, uncommitted
files included) at the release tag the docs pin (`rev: v<version>`, made by the release recipe, scripts/release.py);
pre-commit clones it, pip-installs it into its own environment, and the hook validates
the apprafter/Application.cue files with a cue found on PATH. ≈ 1 min: the install comes from PyPI."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.cli.monorepo import app_text, git
from tests.renderer.helpers import REPO, write_app
from toolchain.tools import TOOLS, tools_dir

PRE_COMMIT = Path(sys.executable).parent / "pre-commit"


def snapshot(into: Path) -> str:
    """This checkout's files (tracked and untracked, not ignored) committed in a repository of their own, tagged by
    the release recipe; the tag."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (REPO / name).is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, into / name)
    git(into, "init", "-q", "-b", "main")
    git(into, "add", ".")
    git(into, "commit", "-q", "-m", "snapshot")
    env = {**os.environ, "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    subprocess.run([sys.executable, str(into / "scripts" / "release.py")], cwd=into, env=env, check=True,
                   capture_output=True, timeout=120)
    version = tomllib.loads((into / "pyproject.toml").read_text())["project"]["version"]
    assert f"rev: v{version}" in (REPO / "docs" / "ci.md").read_text()  # the tag docs/ci.md pins
    return f"v{version}"


def test_the_hook_validates_changed_application_files(tmp_path: Path) -> None:
    hooks = tmp_path / "hooks-repo"
    rev = snapshot(hooks)
    repo = tmp_path / "app-repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    write_app(repo / "apps" / "shop", app_text("shop"))
    bad = write_app(repo / "apps" / "cart", app_text("cart", extra="\t\treplica: 2\n"))
    (repo / "README.md").write_text("# not an app\n")
    (repo / ".pre-commit-config.yaml").write_text(f"repos:\n- repo: {hooks}\n  rev: {rev}\n"
                                                  "  hooks: [{id: apprafter-validate}]\n")
    git(repo, "add", ".")
    cue_dir = tools_dir() / "cue" / TOOLS["cue"].pinned
    assert (cue_dir / "cue").exists(), "run `make setup`"
    env = {"PATH": f"{cue_dir}:{os.environ['PATH']}", "HOME": str(tmp_path / "home"),
           "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"), "APPRAFTER_TOOLS_DIR": str(tmp_path / "no-tools"),
           "PIP_DISABLE_PIP_VERSION_CHECK": "1"}

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(PRE_COMMIT), "run", "--all-files", "--verbose"], cwd=repo, env=env,
                              capture_output=True, text=True, timeout=900, check=False)

    failed = run()
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "apps/cart/apprafter/Application.cue:8:3: spec.base.replica: field not allowed; did you mean " \
           "`replicas`?" in failed.stdout
    assert "README" not in failed.stdout.split("apprafter validate")[-1]
    write_app(repo / "apps" / "cart", app_text("cart"))
    git(repo, "add", ".")
    passed = run()
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "apps/cart/apprafter/Application.cue: valid (dev, prod)" in passed.stdout
    assert "apps/shop/apprafter/Application.cue: valid (dev, prod)" in passed.stdout
    assert bad.exists()
