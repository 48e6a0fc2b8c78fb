"""`render --all`: one cue process for a monorepo gives what single renders give; a broken app hides none."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from renderer import cue, load
from renderer.emit import dump_stream
from renderer.render import render, render_all
from tests.renderer.helpers import EXAMPLES, MINIMAL, RUNAWAY, run_cli, write_app


def monorepo(tmp_path: Path) -> Path:
    for example in ("parser", "webapp", "worker"):
        shutil.copytree(EXAMPLES / example, tmp_path / "apps" / example)
    return tmp_path


def test_all_matches_single_renders(tmp_path: Path) -> None:
    repo = monorepo(tmp_path)
    for mode in ("cr", "manifests"):
        rendered, problems = render_all(repo, mode)
        assert problems == []
        assert {(r.app, r.environment) for r in rendered} == {
            ("parser", "dev"), ("parser", "staging"), ("parser", "prod"), ("shop", "staging"), ("shop", "prod"),
            ("ingest-worker", "dev"), ("ingest-worker", "prod")}
        directory = {"parser": "parser", "shop": "webapp", "ingest-worker": "worker"}
        for r in rendered:
            single = render(repo / "apps" / directory[r.app], r.environment, mode)
            assert dump_stream(single.objects) == dump_stream(r.objects)


def test_all_through_the_cli_groups_output_per_app_and_env(tmp_path: Path) -> None:
    result = run_cli("render", "--all", str(monorepo(tmp_path)))
    assert result.returncode == 0, result.stderr
    headers = [line for line in result.stdout.splitlines() if line.startswith("# ")]
    assert headers == ["# parser/dev", "# parser/prod", "# parser/staging", "# shop/prod", "# shop/staging",
                       "# ingest-worker/dev", "# ingest-worker/prod"]


def test_a_broken_app_is_reported_and_the_others_still_render(tmp_path: Path) -> None:
    repo = monorepo(tmp_path)
    write_app(repo / "apps" / "broken", MINIMAL.replace("expose: port: 8080", "expose: port: -1"))
    rendered, problems = render_all(repo, "cr")
    assert len(rendered) == 7
    assert [p.field for p in problems] == ["spec.base.expose.port"]
    assert problems[0].file.endswith("apps/broken/apprafter/Application.cue")
    result = run_cli("render", "--all", str(repo))
    assert result.returncode == 1 and result.stdout == ""


def test_an_app_over_its_budget_is_its_own_problem_and_the_others_render(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    repo = monorepo(tmp_path)
    write_app(repo / "apps" / "runaway", 'import "list"\n\n' + MINIMAL + RUNAWAY)
    monkeypatch.setenv("APPRAFTER_CUE_TIMEOUT", "3")  # read when used
    rendered, problems = render_all(repo, "cr")
    assert len(rendered) == 7
    (problem,) = problems
    assert problem.file.endswith("apps/runaway/apprafter/Application.cue") and "did not finish within 3s" in \
        problem.message
    result = run_cli("render", "--all", str(repo), env={"APPRAFTER_CUE_TIMEOUT": "3"})
    assert result.returncode == 1 and result.stdout == ""
    assert [line.split(":")[0] for line in result.stderr.splitlines()] == [problem.file]


def test_after_a_failed_batch_only_the_broken_app_runs_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = monorepo(tmp_path)
    write_app(repo / "apps" / "broken", MINIMAL.replace("expose: port: 8080", "expose: port: -1"))
    runs: list[list[str]] = []
    real = load.run_cue

    def counting(args: list[str], cwd: Path, **kw: Any) -> cue.CueResult:
        runs.append(list(args))
        return real(args, cwd, **kw)

    monkeypatch.setattr(load, "run_cue", counting)
    rendered, problems = render_all(repo, "cr")
    assert len(rendered) == 7 and [p.field for p in problems] == ["spec.base.expose.port"]
    # The batch runs `export .` of all four; the broken one alone (`--all-errors`: and again without the port, then
    # without expose, so the renderer's rules read the rest: renderer.recovery); the three healthy ones in one more
    # batch.
    assert ["alone" if "--all-errors" in r else "batch" for r in runs] == ["batch", "alone", "alone", "alone", "batch"]
