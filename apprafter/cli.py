"""Click entry point; subcommands are imported only when called, since the CMP runs this per sync."""

from __future__ import annotations

import importlib
import sys
from typing import Any, cast

import click

from apprafter.extras import EXTRAS
from toolchain.errors import USER_EXIT

# name -> "module:attribute" of a click command; imported on first use to keep start-up fast.
COMMANDS: dict[str, str] = {
    "app": "apprafter.app_cmd:app",
    "doctor": "apprafter.doctor:doctor",
    "render": "apprafter.render_cmd:render",
    "validate": "apprafter.render_cmd:validate",
    "lint": "apprafter.lint_cmd:lint",
    "envs": "apprafter.render_cmd:envs",
    "crds": "apprafter.render_cmd:crds",
    "cluster-bootstrap": "apprafter.bootstrap_cmd:cluster_bootstrap",
    "cmp": "apprafter.cmp_cmd:cmp",
    "stack": "apprafter.stack_cmd:stack",
    "plan": "apprafter.plan_cmd:plan",
    "operator": "apprafter.operator_cmd:operator",
    "migration": "apprafter.migration_cmd:migration",
    "platform": "apprafter.platform_cmd:platform",
    "repo": "apprafter.repo_cmd:repo",
    "webhook": "apprafter.webhook_cmd:webhook",
    "version": "apprafter.version_cmd:version",
    "completion": "apprafter.version_cmd:completion",
    "schema": "apprafter.schema_cmd:schema",
    "secret": "apprafter.secret_cmd:secret",
    "db": "apprafter.db_cmd:db",
}
# `apprafter --help` by audience, as `kubectl --help` groups its commands; every command is in one section (a name
# missing from COMMANDS is left out, so a section may list a command that comes later).
SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("App commands (an app repository: the base install)",
     ("render", "validate", "lint", "plan", "envs", "schema", "app", "db", "secret")),
    ("Cluster commands (who runs the platform: the [cluster] extra)",
     ("cluster-bootstrap", "platform", "migration", "repo", "crds")),
    ("Platform stack (who publishes it: the [stack] extra)", ("stack",)),
    ("In the cluster (what the images run: [operator], [webhook]; the Argo CD plugin)",
     ("operator", "webhook", "cmp")),
    ("This tool", ("version", "doctor", "completion")),
)
# A usage error (an unknown flag, a missing argument) is the user's input: exit 1, as kubectl, helm and terraform
# exit, never click's 2, which means a tool failure here and "gated" under `plan --detailed-exitcode`.
USAGE_EXIT = USER_EXIT
HELP_OPTIONS = ("-h", "--help")


class LazyGroup(click.Group):
    """A click group whose subcommands live in modules loaded on demand."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, _, attr = target.partition(":")
        return _with_no_color(cast(click.Command, getattr(importlib.import_module(module), attr)))

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None,
                                                                             list[str]]:
        """The subcommand, once its extra is there (apprafter.extras): its help and completion work without it."""
        name, command, rest = super().resolve_command(ctx, args)
        asks_help = any(arg in HELP_OPTIONS for arg in rest) or (isinstance(command, click.Group) and not rest)
        if name in EXTRAS and not ctx.resilient_parsing and not asks_help:
            from apprafter.errors import report
            from apprafter.extras import MissingExtra, require

            try:
                require(name)
            except MissingExtra as error:
                sys.exit(report(error))
        return name, command, rest

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands in SECTIONS, each section under its heading."""
        width = formatter.width - 6 - max(len(name) for name in COMMANDS)
        for title, names in SECTIONS:
            rows = []
            for name in names:
                command = self.get_command(ctx, name) if name in COMMANDS else None
                if command is not None and not command.hidden:
                    rows.append((name, command.get_short_help_str(width)))
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as e:
            e.exit_code = USAGE_EXIT  # type: ignore[misc]  # click reads it off the instance when it exits
            raise

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as e:  # from a subcommand's parsing or its body
            e.exit_code = USAGE_EXIT  # type: ignore[misc]  # click reads it off the instance when it exits
            raise


def _no_colour(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    """--no-color anywhere on the command line: colour off for the whole run (convention.colour_wanted reads it)."""
    if value:
        import os

        os.environ["NO_COLOR"] = "1"


def _no_color_option(hidden: bool = False) -> click.Option:
    from apprafter.convention import NO_COLOR

    return click.Option([NO_COLOR.long], is_flag=True, expose_value=False, callback=_no_colour, hidden=hidden,
                        help=NO_COLOR.help)


def _with_no_color(command: click.Command) -> click.Command:
    """The command (and each subcommand) with --no-color, where it has none of its own: one global switch."""
    if not any("--no-color" in getattr(p, "opts", ()) for p in command.params):
        command.params.append(_no_color_option())
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _with_no_color(sub)
    return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": list(HELP_OPTIONS)})
@click.version_option(package_name="apprafter-render", prog_name="apprafter")
@click.option("--no-color", is_flag=True, expose_value=False, callback=_no_colour,
              help="No ANSI colour from any command (as every command's --no-color, or NO_COLOR).")
def main() -> None:
    """AppRafter render toolchain: CUE Application -> Kubernetes objects.

    An app repository needs only the app commands; the rest come with an extra (pip install
    'apprafter-render[cluster]', [stack], [operator], [webhook]).
    """
