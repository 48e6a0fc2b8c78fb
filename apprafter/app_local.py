"""`apprafter app scaffold | rollback`: the two app commands that need no cluster. scaffold writes an
`apprafter/Application.cue` from a runtime preset (checked by the renderer before it is written); rollback is a
commit, as the spec has it (the app scope reverts through git): the plan of going back, then the commit, or the
git commands that make it."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

import click

from apprafter.app_common import failure
from apprafter.errors import reported
from toolchain.errors import ToolFailure

__all__ = ["PRESETS", "rollback", "scaffold", "scaffold_text"]


class Preset(NamedTuple):
    port: int
    env: tuple[tuple[str, str], ...]
    what: str


PRESETS: dict[str, Preset] = {
    "node": Preset(3000, (("NODE_ENV", "production"),), "Node.js (npm start on $PORT)"),
    "python": Preset(8000, (("PYTHONUNBUFFERED", "1"),), "Python (gunicorn, uvicorn, ...)"),
    "go": Preset(8080, (), "Go (one static binary)"),
    "ruby": Preset(3000, (("RAILS_ENV", "production"), ("RAILS_LOG_TO_STDOUT", "1")), "Ruby (Rails, Rack)"),
    "java": Preset(8080, (("JAVA_TOOL_OPTIONS", "-XX:MaxRAMPercentage=75"),), "Java (Spring Boot, ...)"),
    "static": Preset(8080, (), "static files (nginx-unprivileged listens on 8080)"),
}
# What each need adds to env, as docs/user-guide.md "What you get for needs" names the keys.
NEED_ENV = {"pg": (("DATABASE_URL", "claim.pg.url"),),
            "redis": (("REDIS_URL", "claim.redis.url"), ("REDIS_PREFIX", "claim.redis.prefix"))}
_LABEL = re.compile(r"[^a-z0-9-]+")


def _name_of(directory: Path) -> str:
    """The directory's name as an app name (a DNS-1123 label: lowercase, digits, '-')."""
    name = _LABEL.sub("-", directory.resolve().name.lower()).strip("-")[:40].strip("-")
    return name or "app"


def scaffold_text(name: str, preset: str, image: str, public: bool, needs: tuple[str, ...]) -> str:
    """The Application.cue of `preset` for app `name`: staging and prod, a readiness path, the needs' env."""
    chosen = PRESETS[preset]
    env = [*chosen.env, ("PORT", str(chosen.port))] + [pair for need in needs for pair in NEED_ENV.get(need, ())]
    width = max(len(key) for key, _ in env) + 1  # values aligned, as `cue fmt` aligns them
    env_lines = "".join(f'\t\t\t{(key + ":").ljust(width)} {value if value.startswith("claim.") else _quoted(value)}\n'
                        for key, value in env)
    need_lines = f'\t\tneeds: {{{", ".join(f"{n}: {{}}" for n in needs)}}}\n' if needs else ""
    network = "public" if public else "internal"
    return (f'// {chosen.what}: `apprafter app scaffold --preset {preset}` wrote it; every field: '
            'docs/application.md\n'
            f'apiVersion: "apprafter.io/v1alpha1"\nkind:       "Application"\nmetadata: name: "{name}"\nspec: {{\n'
            f'\tbase: {{\n\t\timage: "{image}"\n\t\texpose: {{port: {chosen.port}, network: "{network}"}}\n'
            f'\t\thealth: readiness: path: "/healthz"\n{need_lines}\t\tenv: {{\n{env_lines}\t\t}}\n\t}}\n'
            f'\tenvironments: {{\n\t\tstaging: replicas: 1\n\t\tprod: replicas: 2\n\t}}\n}}\n')


@click.command()
@click.argument("directory", type=click.Path(path_type=Path, file_okay=False), default=Path("."))
@click.option("--preset", type=click.Choice(sorted(PRESETS)), required=True,
              help="The runtime: its port and the environment variables it reads.")
@click.option("--name", help="The app's name (default: the directory's name).")
@click.option("--image", help="The image to run (default: registry.example.com/<name>:0.1.0, to replace).")
@click.option("--public", is_flag=True, help="Serve it over HTTPS on its own hostname (default: internal).")
@click.option("--needs", "needs", multiple=True, type=click.Choice(sorted(NEED_ENV)),
              help="A backend it uses, its connection in env (repeatable).")
@click.option("--force", is_flag=True, help="Overwrite an existing apprafter/Application.cue.")
@reported
def scaffold(directory: Path, preset: str, name: str | None, image: str | None, public: bool,
             needs: tuple[str, ...], force: bool) -> None:
    """Write DIRECTORY/apprafter/Application.cue for a runtime preset: it validates as written; change the image."""
    from renderer.load import evaluate, read_source
    from renderer.render import render_loaded

    name = name or _name_of(directory)
    target = directory / "apprafter" / "Application.cue"
    if (target.exists() or target.is_symlink()) and not force:
        raise failure(str(target), "exists: pass --force to overwrite it")
    text = scaffold_text(name, preset, image or f"registry.example.com/{name}:0.1.0", public,
                         tuple(sorted(set(needs))))
    with tempfile.TemporaryDirectory(prefix="apprafter-scaffold-") as scratch:
        trial = Path(scratch) / "apprafter" / "Application.cue"
        trial.parent.mkdir()
        trial.write_text(text)
        loaded = evaluate(read_source(trial, Path(scratch)))  # the user's --name or --image is checked here
        for environment in ("staging", "prod"):
            render_loaded(loaded, environment, namespace=f"{name}-{environment}")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    click.echo(f"wrote {target}" + ("" if image else ": set image to yours") + "; then `apprafter validate` and "
               "`apprafter app add` once it is pushed", err=True)


def _git(top: Path, *args: str) -> str:
    from apprafter.app_source import git

    done = git(top, *args)
    if done.returncode != 0:
        raise failure(str(top), f"git {' '.join(args)}: {done.stderr.strip() or 'failed'}")
    return done.stdout


@click.command()
@click.argument("path", type=click.Path(path_type=Path), default=Path("."))
@click.option("--to", "to", metavar="REV", help="The commit whose app file to go back to (default: the app file "
                                                "before its last change).")
@click.option("--commit", "make_commit", is_flag=True, help="Make the commit (default: show the plan and the git "
                                                            "commands).")
@reported
def rollback(path: Path, to: str | None, make_commit: bool) -> None:
    """Roll the app at PATH back through git: the app file as it was at REV, its plan against HEAD (what the cluster
    will do, what waits for approval), then a commit that Argo CD deploys once pushed."""
    from renderer.locate import locate

    file, _ = locate(path)
    top = Path(_git(file.parent, "rev-parse", "--show-toplevel").strip()).resolve()
    rel = file.resolve().relative_to(top).as_posix()
    if _git(top, "status", "--porcelain", "--", rel).strip():
        raise failure(rel, "has changes not committed: commit or stash them first")
    if to is None:
        last = _git(top, "log", "-n", "1", "--format=%H", "--", rel).strip()
        if not last:
            raise failure(rel, "is not committed yet: nothing to roll back")
        to = f"{last}^"
    shown = git_show(top, to, rel)
    current = (top / rel).read_bytes()
    if shown == current:
        raise failure(rel, f"is already as it was at {to}: nothing to roll back")
    revision = _git(top, "rev-parse", "--short", to).strip()
    subject = _git(top, "log", "-n", "1", "--format=%s", to).strip()
    with tempfile.TemporaryDirectory(prefix="apprafter-rollback-") as scratch:
        old, new = Path(scratch) / "head", Path(scratch) / "rollback"
        for side, data in ((old, current), (new, shown)):
            (side / "apprafter").mkdir(parents=True)
            (side / "apprafter" / "Application.cue").write_bytes(data)
        planned = subprocess.run([sys.executable, "-m", "apprafter", "plan", str(new), "--from", str(old)],
                                 capture_output=True, text=True, check=False, timeout=300)
    if planned.returncode != 0:
        sys.stderr.write(planned.stderr)
        raise ToolFailure(f"the plan of the rollback failed (exit {planned.returncode})")
    sys.stdout.write(planned.stdout)
    message = f"Roll back {rel} to {revision} ({subject})"
    if not make_commit:
        click.echo(f"nothing changed; to roll back: git checkout {revision} -- {rel} && git commit -m "
                   f"{_shell(message)} (or run again with --commit), then git push", err=True)
        return
    (top / rel).write_bytes(shown)
    _git(top, "add", "--", rel)
    _git(top, "commit", "-q", "-m", message, "--", rel)
    click.echo(f"committed {_git(top, 'rev-parse', '--short', 'HEAD').strip()}: {message}; git push deploys it "
               "(a gated change then waits for approval: apprafter app status)", err=True)


def git_show(top: Path, revision: str, rel: str) -> bytes:
    """The app file's bytes at `revision` (an error when it did not exist there)."""
    from apprafter.app_source import GIT_TIMEOUT

    done = subprocess.run(["git", "show", f"{revision}:{rel}"], cwd=top, capture_output=True, check=False,
                          timeout=GIT_TIMEOUT)
    if done.returncode != 0:
        raise failure(rel, f"not in {revision}: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def _shell(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _quoted(text: str) -> str:
    """A CUE string literal (JSON's escaping is CUE's for these characters)."""
    import json

    return json.dumps(text)
