"""`apprafter plan --from OLD --to NEW --env ENV`: read both sides (CUE, CR, git:<rev>), classify, print the plan."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import click

from apprafter.errors import report
from renderer.errors import Problem, ToolFailure, UserError
from renderer.load import APP_DIR, APP_FILE, MAX_FILE_BYTES, LoadedApp
from toolchain.errors import USER_EXIT, AppRafterError

CR_SUFFIXES = (".yaml", ".yml", ".json")
GIT_PREFIX = "git:"


def _read(path: Path) -> tuple[bytes, str]:
    """A CR file's bytes and its name for messages; never a byte of a file that resolves outside the directory
    it was named from (a symlink or '..'), never a FIFO or device."""
    from renderer import userfile

    display = userfile.shown(path)
    data = userfile.read_bytes(path, display=display, root=Path(userfile.absolute(path)).parent,
                               root_name="the directory it is named in")
    return data, display


def load_path(path: Path) -> LoadedApp:
    """A CUE file or directory (evaluated by cue), or a YAML/JSON Application CR."""
    from compatibility.inputs import parse_cr
    from renderer.load import load

    if path.suffix in CR_SUFFIXES and not path.is_dir():
        return parse_cr(*_read(path), strict_json=path.suffix == ".json")
    if path.is_dir() or path.suffix == ".cue":
        return load(path)
    raise UserError([Problem(str(path), 1, 1, "", "want a .cue file, a directory, a .yaml/.yml/.json "
                             "Application CR, or git:<rev>[:<path>]")])


def _app_file(path: Path) -> Path:
    """The file a path names, the way `render` finds it (without requiring it to exist now)."""
    path = Path(os.path.abspath(path))
    if path.suffix in (*CR_SUFFIXES, ".cue"):
        return path
    return path / APP_FILE if path.name == APP_DIR else path / APP_DIR / APP_FILE


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=60, check=False,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise ToolFailure("git not found: install git to plan against git:<rev>") from None
    except subprocess.TimeoutExpired:
        raise ToolFailure("git did not answer within 60s") from None


def load_git(spec: str, other: str | None) -> LoadedApp:
    """`git:<rev>[:<path>]`: the Application at <path> (else the other side's path, else .) at revision <rev>."""
    from compatibility.inputs import parse_cr
    from renderer.load import load

    rev, _, rel_arg = spec[len(GIT_PREFIX):].partition(":")
    if not rev or rev.startswith("-") or any(c.isspace() for c in rev):
        raise UserError([Problem(spec, 1, 1, "", "want git:<rev>[:<path>] with a revision such as origin/main")])
    default = other if other and not other.startswith(GIT_PREFIX) else "."
    target = _app_file(Path(rel_arg or default))
    top = _git(["rev-parse", "--show-toplevel"], Path.cwd())
    if top.returncode != 0:
        raise UserError([Problem(spec, 1, 1, "", "not inside a git repository")])
    root = Path(os.path.realpath(top.stdout.decode().strip()))
    real_parent = Path(os.path.realpath(target.parent))
    if real_parent != root and root not in real_parent.parents:
        raise UserError([Problem(spec, 1, 1, "", f"{target} is outside the repository {root}")])
    rel = (real_parent / target.name).relative_to(root).as_posix()
    display = f"git:{rev}:{rel}"
    shown = _git(["show", f"{rev}:{rel}"], root)
    if shown.returncode != 0:
        message = shown.stderr.decode(errors="replace").strip().splitlines()
        raise UserError([Problem(display, 1, 1, "", message[0] if message else "git show failed")])
    if len(shown.stdout) > MAX_FILE_BYTES:
        raise UserError([Problem(display, 1, 1, "", f"file larger than {MAX_FILE_BYTES} bytes")])
    if target.suffix in CR_SUFFIXES:
        return parse_cr(shown.stdout, display, strict_json=target.suffix == ".json")
    from renderer import userfile

    text = userfile.decode_text(shown.stdout, display)
    with tempfile.TemporaryDirectory(prefix="apprafter-plan-") as tmp:
        file = Path(tmp) / APP_DIR / APP_FILE
        file.parent.mkdir()
        file.write_text(text, encoding="utf-8")
        try:
            app = load(file, Path(tmp))
        except UserError as e:
            raise UserError([p._replace(file=display) if p.file.startswith(tmp) or p.file == str(file)
                             else p for p in e.problems]) from None
    return app._replace(source=app.source.replace(display=display))


def load_side(spec: str, other: str | None) -> LoadedApp:
    return load_git(spec, other) if spec.startswith(GIT_PREFIX) else load_path(Path(spec))


@click.command()
@click.option("--from", "from_", required=True, metavar="OLD",
              help="The applied version: .cue file or dir, YAML/JSON Application CR, or git:<rev>[:<path>].")
@click.option("--to", "to", required=True, metavar="NEW", help="The candidate version (same forms).")
@click.option("--env", "environment", required=True, help="Environment whose effective spec is compared.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--detailed-exitcode", is_flag=True,
              help="Exit 2 when a change is gated (0 not gated, 1 any error, tool failures included).")
@click.option("--namespace", help="The app's namespace (for the MigrationPlan; default metadata.namespace).")
@click.option("--domain", help="Platform domain of default hostnames {app}.{env}.{domain}.")
@click.option("--approver", "approvers", multiple=True, help="spec.approvers of the MigrationPlan (repeatable).")
def plan(from_: str, to: str, environment: str, fmt: str, detailed_exitcode: bool, namespace: str | None,
         domain: str | None, approvers: tuple[str, ...]) -> None:
    """Classify the change from OLD to NEW in one environment, like `terraform plan` (docs/plan.md)."""
    try:
        from apprafter.budget import limit_own_memory

        limit_own_memory()
        gated = _plan(from_, to, environment, fmt, namespace, domain, approvers)
    except (AppRafterError, MemoryError) as error:
        code = report(error)
        sys.exit(USER_EXIT if detailed_exitcode else code)  # with it, 2 means only "gated"
    sys.exit(2 if detailed_exitcode and gated else 0)


def _plan(from_: str, to: str, environment: str, fmt: str, namespace: str | None, domain: str | None,
          approvers: tuple[str, ...]) -> bool:
    from compatibility.application import DEFAULT_DOMAIN
    from compatibility.application import plan as make_plan
    from compatibility.migrationplan import migration_plan
    from compatibility.plan import Plan, Subject, plan_json
    from compatibility.sides import side
    from compatibility.text import render_text

    before_app, after_app = load_side(from_, to), load_side(to, from_)
    after = side(after_app, environment, required=True)
    before = side(before_app, environment, required=False)
    assert after is not None
    if namespace:
        after = dataclasses.replace(after, namespace=namespace)
    header = ""
    if before is None:
        result = Plan(Subject("application", after.app, after.namespace, environment), (), "safe", (), None)
        header = (f"apprafter plan: {after.app}, environment {environment} is new in {to}: first deployment, "
                  "no baseline to compare")
    else:
        result = make_plan(before, after, domain or DEFAULT_DOMAIN)
    obj = migration_plan(result, approvers=approvers) if result.gated else None
    if fmt == "json":
        sys.stdout.write(json.dumps(plan_json(result, obj), indent=2, sort_keys=False) + "\n")
    else:
        sys.stdout.write(render_text(result, colour=sys.stdout.isatty(), header=header))
    sys.stdout.flush()
    return result.gated
