"""`apprafter stack`: build, push, sign, verify, release and classify the platform-stack chart."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from apprafter.convention import colour_wanted
from apprafter.errors import reported
from apprafter.options import no_color_option, output_option
from renderer.context import TIERS

TIER_CHOICES = ("all", *TIERS)  # the renderer's tiers, and the all-tier chart
MAX_FIELDS = 20  # fields listed per component in text output (JSON lists them all)


def _kube_version(value: str | None) -> str | None:
    """--kube-version checked before anything runs (a version that does not parse is never compared)."""
    from compatibility.versions import InvalidVersion, kubernetes_version
    from platform_stack.errors import StackError

    if value is not None:
        try:
            kubernetes_version(value)
        except InvalidVersion as e:
            raise StackError(f"--kube-version: {e}") from None
    return value


def _password(env_name: str) -> str:
    from platform_stack.errors import StackError

    password = os.environ.get(env_name)
    if password is None:
        raise StackError(f"--password-env: environment variable {env_name} is not set (the key's password)")
    return password


@click.group()
def stack() -> None:
    """The platform-stack chart: CUE source -> signed OCI Helm chart."""


@stack.command()
@click.option("--tier", type=click.Choice(TIER_CHOICES), default="all", show_default=True,
              help="Build the published all-tier chart, or a chart for one tier.")
@click.option("--version", "version", help="Stack version (default: the newest in compatibility.cue).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("out/platform-stack"),
              show_default=True, help="Output directory.")
@click.option("--source", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
              help="Platform-stack CUE source (default: the one shipped in the package).")
@reported
def build(tier: str, version: str | None, out: Path, source: Path | None) -> None:
    """Evaluate the CUE source and write the chart directory and a byte-reproducible .tgz."""
    from platform_stack.build import build as do_build
    from platform_stack.source import SOURCE_DIR

    result = do_build(out, source or SOURCE_DIR, tier, version)
    click.echo(f"{result.sha256}  {result.tgz}")


@stack.command()
@click.argument("tgz", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--to", "to", required=True,
              help="oci://host[:port]/namespace; the chart goes to <namespace>/<name>.")
@click.option("--plain-http", is_flag=True, help="Talk HTTP, not HTTPS, to the registry.")
@reported
def push(tgz: Path, to: str, plain_http: bool) -> None:
    """Push a chart .tgz with Helm's OCI media types; print the reference with the registry's digest."""
    from platform_stack.oci import push as do_push
    from platform_stack.oci import read_archive

    result = do_push(read_archive(tgz), to, plain_http)
    click.echo(result.reference.oci())


@stack.command()
@click.argument("reference")
@click.option("--key", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="cosign private key.")
@click.option("--password-env", default="COSIGN_PASSWORD", show_default=True,
              help="Environment variable holding the key's password (never printed).")
@click.option("--plain-http", is_flag=True, help="The registry speaks HTTP (loopback is HTTP anyway).")
@reported
def sign(reference: str, key: Path, password_env: str, plain_http: bool) -> None:
    """Sign REF@sha256:DIGEST with cosign (offline key pair, no transparency log)."""
    from platform_stack.signing import sign as do_sign

    ref = do_sign(reference, key, _password(password_env), plain_http)
    click.echo(f"signed {ref.oci()}")


@stack.command()
@click.argument("reference")
@click.option("--key", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="cosign public key.")
@click.option("--plain-http", is_flag=True, help="The registry speaks HTTP (loopback is HTTP anyway).")
@reported
def verify(reference: str, key: Path, plain_http: bool) -> None:
    """Verify REF@DIGEST (or REF:TAG, resolved now; REF:TAG@DIGEST also fails if the tag moved)."""
    from platform_stack.signing import verify as do_verify

    ref, _ = do_verify(reference, key, plain_http)
    click.echo(f"verified {ref.oci()}")


@stack.command()
@click.option("--tier", type=click.Choice(TIER_CHOICES), default="all", show_default=True)
@click.option("--version", "version", help="Stack version (default: the newest in compatibility.cue).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("out/platform-stack"),
              show_default=True)
@click.option("--source", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None)
@click.option("--to", "to", required=True, help="oci://host[:port]/namespace")
@click.option("--key", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="cosign private key.")
@click.option("--public-key", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="cosign public key to verify with (default: --key with .pub).")
@click.option("--password-env", default="COSIGN_PASSWORD", show_default=True)
@click.option("--plain-http", is_flag=True)
@reported
def release(tier: str, version: str | None, out: Path, source: Path | None, to: str, key: Path,
            public_key: Path | None, password_env: str, plain_http: bool) -> None:
    """The CI job: build, helm lint + template, push, sign, verify; stops at the first failure."""
    from platform_stack.release import run_release
    from platform_stack.source import SOURCE_DIR

    pub = public_key or key.with_suffix(".pub")
    outcome = run_release(source or SOURCE_DIR, tier, version, out, to, key, pub, _password(password_env),
                          plain_http, log=lambda msg: click.echo(msg, err=True))
    click.echo(f"{outcome.sha256}  {outcome.tgz}")
    click.echo(outcome.reference.oci())


@stack.command()
@click.option("--from", "from_", required=True, type=click.Path(exists=True, path_type=Path),
              help="Chart .tgz, built chart directory, or platform-stack source directory.")
@click.option("--to", "to", required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--tier", type=click.Choice(TIER_CHOICES[1:]), default=None,
              help="Tier to compare on (default: each chart's own default tier).")
@click.option("--overrides", "overrides_file", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              default=None, help="YAML/JSON of PlatformStack spec.overrides applied to both sides.")
@click.option("--kube-version", default=None,
              help="The cluster's Kubernetes version; a higher minimum is breaking.")
@output_option("stack classify")
@reported
def classify(from_: Path, to: Path, tier: str | None, overrides_file: Path | None, kube_version: str | None,
             output: str) -> None:
    """Classify the change from one stack to another: per component and overall."""
    from platform_stack.classify import classify_stack
    from platform_stack.snapshot import load_overrides, load_snapshot

    kube_version = _kube_version(kube_version)
    overrides = load_overrides(overrides_file) if overrides_file else None
    before, after = load_snapshot(from_, tier, overrides), load_snapshot(to, tier, overrides)
    result = classify_stack(before, after, kube_version)
    if output == "json":
        click.echo(json.dumps(result.to_dict(), indent=2, sort_keys=True))
        return
    click.echo(f"{result.from_version} -> {result.to_version}: {result.classification}")
    for reason in result.reasons:
        click.echo(f"  stack: {reason}")
    for change in result.components:
        if change.change == "unchanged":
            continue
        shown = change.fields[:MAX_FIELDS] + ([f"... {len(change.fields) - MAX_FIELDS} more"]
                                              if len(change.fields) > MAX_FIELDS else [])
        detail = f" ({', '.join(shown)})" if shown else ""
        click.echo(f"  {change.component}: {change.change}, {change.classification}{detail}")
        for reason in change.reasons:
            click.echo(f"    {reason}")


@stack.command("plan")
@click.option("--from", "from_", required=True, type=click.Path(exists=True, path_type=Path),
              help="Chart .tgz, built chart directory, or platform-stack source directory.")
@click.option("--to", "to", required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--tier", type=click.Choice(TIER_CHOICES[1:]), default=None)
@click.option("--kube-version", default=None, help="The cluster's Kubernetes version; a higher minimum is breaking.")
@output_option("stack plan")
@click.option("--detailed-exitcode", is_flag=True,
              help="Exit 2 when a change is gated (needs a MigrationPlan), and only then (errors exit 1).")
@no_color_option()
def plan(from_: Path, to: Path, tier: str | None, kube_version: str | None, output: str,
         detailed_exitcode: bool, no_color: bool) -> None:
    """Platform-scope plan: the same JSON and MigrationPlan shape as `apprafter plan`, over a stack change."""
    from apprafter.errors import report
    from toolchain.errors import USER_EXIT, AppRafterError

    try:
        gated = _stack_plan(from_, to, tier, kube_version, output, no_color)
    except (AppRafterError, MemoryError) as error:
        code = report(error)
        sys.exit(USER_EXIT if detailed_exitcode else code)  # with it, 2 means only "gated"
    if detailed_exitcode and gated:
        sys.exit(2)


def _stack_plan(from_: Path, to: Path, tier: str | None, kube_version: str | None, output: str,
                no_color: bool) -> bool:
    from compatibility.migrationplan import migration_plan
    from compatibility.plan import plan_json
    from compatibility.text import render_text
    from platform_stack.classify import classify_stack
    from platform_stack.migration import stack_plan
    from platform_stack.snapshot import load_snapshot

    kube_version = _kube_version(kube_version)
    before, after = load_snapshot(from_, tier), load_snapshot(to, tier)
    result = stack_plan(classify_stack(before, after, kube_version), before, after)
    document = migration_plan(result) if result.gated else None
    if output == "json":
        click.echo(json.dumps(plan_json(result, document), indent=2, sort_keys=True))
    else:
        click.echo(render_text(result, colour=colour_wanted(no_color, sys.stdout.isatty())), nl=False)
    return result.gated
