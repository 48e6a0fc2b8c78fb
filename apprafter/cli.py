"""Click entry point; subcommands are imported only when called, since the CMP runs this per sync."""

from __future__ import annotations

import importlib
from typing import cast

import click

# name -> "module:attribute" of a click command; imported on first use to keep start-up fast.
COMMANDS: dict[str, str] = {
    "doctor": "apprafter.doctor:doctor",
    "render": "apprafter.render_cmd:render",
    "validate": "apprafter.render_cmd:validate",
    "envs": "apprafter.render_cmd:envs",
    "crds": "apprafter.render_cmd:crds",
    "cmp": "apprafter.cmp_cmd:cmp",
    "stack": "apprafter.stack_cmd:stack",
    "plan": "apprafter.plan_cmd:plan",
    "operator": "apprafter.operator_cmd:operator",
    "migration": "apprafter.migration_cmd:migration",
    "platform": "apprafter.platform_cmd:platform",
    "webhook": "apprafter.webhook_cmd:webhook",
}


class LazyGroup(click.Group):
    """A click group whose subcommands live in modules loaded on demand."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, _, attr = target.partition(":")
        return cast(click.Command, getattr(importlib.import_module(module), attr))


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="apprafter-render", prog_name="apprafter")
def main() -> None:
    """AppRafter render toolchain: CUE Application -> Kubernetes objects."""
