"""Golden output per example app, environment and mode, through the real CLI and cue; and determinism."""

from __future__ import annotations

import pytest

from renderer.load import load
from renderer.render import MODES
from renderer.validate import environments
from tests.renderer.helpers import EXAMPLES, REPO, run_cli

CASES = [(example.name, env, mode)
         for example in sorted(EXAMPLES.iterdir())
         for env in environments(load(example))
         for mode in MODES]


@pytest.mark.parametrize(("example", "env", "mode"), CASES)
def test_example_renders_its_golden_output(example: str, env: str, mode: str) -> None:
    result = run_cli("render", str(EXAMPLES / example), "--env", env, "--mode", mode)
    assert result.returncode == 0, result.stderr
    golden = REPO / "tests" / "renderer" / "golden" / f"{example}.{env}.{mode}.yaml"
    assert result.stdout == golden.read_text(), f"regenerate with scripts/update_goldens.py and review: {golden}"


def test_every_example_environment_has_a_golden_file() -> None:
    golden = {p.name for p in (REPO / "tests" / "renderer" / "golden").glob("*.yaml")}
    assert golden == {f"{e}.{env}.{m}.yaml" for e, env, m in CASES}
    assert {e for e, _, _ in CASES} >= {"parser", "webapp", "worker"}


def test_same_input_gives_the_same_bytes() -> None:
    runs = {run_cli("render", str(EXAMPLES / "parser"), "--env", "prod", "--mode", "manifests").stdout
            for _ in range(3)}
    assert len(runs) == 1 and runs.pop().startswith("---\n")


def test_spec_example_renders_for_every_environment() -> None:
    for env in ("dev", "staging", "prod"):
        result = run_cli("render", str(EXAMPLES / "parser"), "--env", env)
        assert result.returncode == 0, result.stderr
        assert f"environment: {env}\n" in result.stdout
