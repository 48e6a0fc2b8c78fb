"""The set-up keys its tool cache by build recipe: a changed recipe rebuilds a tool whose version did not change."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.renderer.helpers import REPO


def _setup(tmp_path: Path, tools_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(tmp_path / "tools" / "setup.sh"), "docker-registry"], capture_output=True, text=True,
                          env={**os.environ, "APPRAFTER_TOOLS_DIR": str(tools_dir)}, timeout=300, check=False)


def test_a_changed_build_recipe_rebuilds_a_tool_of_the_same_version(tmp_path: Path) -> None:
    shutil.copytree(REPO / "tools", tmp_path / "tools")
    tools_dir = tmp_path / "cache"
    first = _setup(tmp_path, tools_dir)
    assert first.returncode == 0 and "built in" in first.stdout, first.stderr
    assert "cached" in _setup(tmp_path, tools_dir).stdout
    script = tmp_path / "tools" / "setup.sh"
    recipe = '  ln -s "$(command -v docker-registry)" "$1/docker-registry"'
    assert recipe in script.read_text()
    script.write_text(script.read_text().replace(recipe, recipe.replace("ln -s", "ln -sf")))
    again = _setup(tmp_path, tools_dir)
    assert again.returncode == 0 and "built by another recipe: rebuilding" in again.stdout, again.stdout
    assert "built in" in again.stdout
