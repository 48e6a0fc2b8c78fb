"""`apprafter render | validate | envs | crds`: argv onto the renderer, YAML on stdout, problems on stderr."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import cast

import click

from apprafter.budget import limit_own_memory
from apprafter.errors import reported
from renderer import settings
from renderer import validate as checks
from renderer.context import TIERS
from renderer.emit import dump_stream
from renderer.errors import Problem, UserError
from renderer.load import load
from renderer.render import MODES, Mode, render_all, render_loaded


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


@click.command()
@click.argument("path", type=click.Path(path_type=Path), default=Path("."))
@click.option("--env", "environment", help="Environment to render (one of the declared ones).")
@click.option("--mode", type=click.Choice(MODES), default="cr", show_default=True,
              help="cr: the Application CR for the reconciler; manifests: the objects it applies.")
@click.option("--namespace", help="Namespace stamped on the output (default: metadata.namespace, else none).")
@click.option("--domain", help="Platform domain for default hostnames {app}.{env}.{domain}.")
@click.option("--tier", type=click.Choice(TIERS), help="Platform tier (what the cluster can provide).")
@click.option("--platform", "platform_file", type=click.Path(path_type=Path, dir_okay=False),
              help="YAML file with platform settings (domain, gateway, tier, ...).")
@click.option("--all", "all_dir", type=click.Path(path_type=Path, file_okay=False),
              help="Render every app under this directory, each environment, in one cue process.")
@reported
def render(path: Path, environment: str | None, mode: str, namespace: str | None, domain: str | None,
           tier: str | None, platform_file: Path | None, all_dir: Path | None) -> None:
    """Render PATH (repo root, apprafter/ dir or the .cue file) for one environment as a YAML stream."""
    limit_own_memory()
    context = settings.platform_context(platform_file, {"domain": _flag(domain, "--domain"),
                                                        "tier": _flag(tier, "--tier")})
    namespace = settings.namespace(_flag(namespace, "--namespace"))
    if all_dir is not None:
        rendered, problems = render_all(all_dir, cast(Mode, mode), context)
        if problems:
            raise UserError(problems)
        chunks = []
        for r in rendered:
            chunks.append(f"# {r.app}/{r.environment}\n" + dump_stream(r.objects))
            for warning in r.warnings:
                click.echo(f"warning: {warning}", err=True)
        _write("".join(chunks))
        return
    if not environment:
        app = load(path)
        raise UserError([_missing_env(app.source.display, checks.environments(app))])
    result = render_loaded(load(path), environment, cast(Mode, mode), namespace, context)
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)
    _write(dump_stream(result.objects))


def _flag(value: str | None, flag: str) -> settings.Given | None:
    return None if value is None else settings.Given(value, settings.Origin(flag))


def _missing_env(display: str, declared: list[str]) -> Problem:
    return Problem(display, 1, 1, "", f"--env is required; declared environments: {', '.join(declared)}")


@click.command()
@click.argument("path", type=click.Path(path_type=Path), default=Path("."))
@reported
def validate(path: Path) -> None:
    """Check PATH in every environment; exit 0 with a one-line confirmation on stderr when valid."""
    limit_own_memory()
    app = load(path)
    problems = checks.check(app)
    if problems:
        raise UserError(problems)
    click.echo(f"{app.source.display}: valid ({', '.join(checks.environments(app))})", err=True)


@click.command()
@click.argument("path", type=click.Path(path_type=Path), default=Path("."))
@click.option("--json", "as_json", is_flag=True, help="A JSON array (the form Argo CD's UI reads).")
@reported
def envs(path: Path, as_json: bool) -> None:
    """Print the environment names PATH declares."""
    limit_own_memory()
    names = checks.environments(load(path))
    _write(json.dumps(names) + "\n" if as_json else "".join(f"{n}\n" for n in names))


@click.command()
@reported
def crds() -> None:
    """Print the CRDs (Application, MigrationPlan, PlatformStack, ResourceClaim) generated from their CUE schemas."""
    from compatibility.crd import ALL_CRDS
    from platform_stack.resource import PLATFORM_STACK
    from renderer.crds import crd_documents

    _write(dump_stream(crd_documents((*ALL_CRDS, PLATFORM_STACK))))
