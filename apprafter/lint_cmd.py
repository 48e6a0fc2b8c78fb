"""`apprafter lint`: argv onto renderer.lint (the rules live there); the report on stderr (text) or stdout (json/yaml),
exit 1 on errors, and on warnings under --strict (as `helm lint --strict`)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from apprafter.errors import reported
from apprafter.options import output_option
from toolchain.errors import USER_EXIT, Problem, UserError

if TYPE_CHECKING:
    from renderer.lint import Report
    from renderer.source import LoadedApp

__all__ = ["collect", "lint"]


def _apps_below(path: Path) -> bool:
    """Whether `path` is a directory of apps rather than one: it holds no app file of its own (nor a misplaced one),
    and apprafter/Application.cue files below it."""
    from renderer.load import APP_DIR, APP_FILE
    from renderer.render import discover

    if not path.is_dir() or path.name == APP_DIR or (path / APP_DIR).exists() or (path / APP_FILE).exists():
        return False
    try:
        return bool(discover(path))
    except UserError:  # too deep or too large to search: it is then read as one app (and said not to be one)
        return False


def collect(paths: Sequence[Path], all_dir: Path | None) -> tuple[list[LoadedApp], list[Problem]]:
    """The apps the PATHs name (a directory of apps: every app below it, as --all finds them), each group evaluated
    in one cue process; and every problem of those that did not load."""
    from renderer.render import load_all, load_many

    if all_dir is not None:
        if paths:
            raise click.UsageError("give PATH arguments or --all DIR, not both")
        return load_all(all_dir)
    apps: list[LoadedApp] = []
    problems: list[Problem] = []
    files: list[Path] = []
    for path in paths or (Path("."),):
        if _apps_below(path):
            found, failed = load_all(path)
            apps, problems = apps + found, problems + failed
        else:
            files.append(path)
    if files:
        found, failed = load_many(files)
        apps, problems = apps + found, problems + failed
    return apps, problems


def problem_json(problem: Problem) -> dict[str, Any]:
    """One problem in a report (`lint`, `validate`): where (line and column 0: the file as a whole) and what."""
    return {"file": problem.file, "line": problem.line, "col": problem.col, "field": problem.field,
            "message": problem.message}


def _document(apps: Sequence[LoadedApp], report: Report, strict: bool) -> dict[str, Any]:
    failed = bool(report.errors) or (strict and bool(report.warnings))
    return {"failed": failed, "strict": strict,
            "apps": [{"file": a.source.display, "app": a.name} for a in sorted(apps, key=lambda a: a.source.display)],
            "errors": [problem_json(p) for p in report.errors],
            "warnings": [problem_json(p) for p in report.warnings]}


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--all", "all_dir", type=click.Path(path_type=Path, file_okay=False),
              help="Lint every app under this directory, in one cue process.")
@click.option("--strict", is_flag=True, help="Exit 1 on warnings too (as helm lint --strict).")
@output_option("lint", help="text: one line per problem on stderr, in file order; json/yaml: the report on stdout.")
@reported
def lint(paths: tuple[Path, ...], all_dir: Path | None, strict: bool, output: str) -> None:
    """Check each PATH (default .; a repository, an apprafter/ dir, a .cue file, or a directory of apps) for what
    the cluster would refuse in any environment, and what moves under you.

    Errors: every rule of every environment (image references as the kubelet parses them, the cluster's name and
    label limits), two apps with one name, one instance name <app>-<env> twice, one public hostname claimed twice.
    Warnings: an untagged or :latest image, a literal that looks like an interpolation. Every problem at once, one
    line each (`file:line:col: field: message`; warnings start with `warning: `); exit 1 on errors, and on
    warnings with --strict.
    """
    from apprafter.budget import limit_own_memory
    from renderer.lint import lint as lint_apps

    limit_own_memory()
    apps, problems = collect(paths, all_dir)
    report = lint_apps(apps, problems)
    document = _document(apps, report, strict)
    if output == "json":
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
        sys.stdout.flush()
    else:
        lines = sorted([(p, str(p)) for p in report.errors] + [(p, f"warning: {p}") for p in report.warnings])
        for _, line in lines:
            click.echo(line, err=True)
        files = {a.source.display for a in apps} | {p.file for p in problems}
        click.echo(f"{_count(len(files), 'app')} linted: {_count(len(report.errors), 'error')}, "
                   f"{_count(len(report.warnings), 'warning')}", err=True)
    if document["failed"]:
        sys.exit(USER_EXIT)
