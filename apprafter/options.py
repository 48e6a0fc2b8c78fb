"""The click options of the shared concepts, built from apprafter/convention.py: every command takes them from here.

`-o yaml` is derived here for every command whose body writes `-o json` (the same document, in YAML), so a
command implements text and json only; the old spellings (`--json`, `--format`, `-o table`) stay as hidden
aliases that print one deprecation line.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from apprafter.convention import (
    ALIASES,
    ALL_NAMESPACES,
    DEPRECATED,
    ENVIRONMENT,
    NAMESPACE,
    NO_COLOR,
    OUTPUT,
    OUTPUTS,
    VALUE_ALIASES,
    Spelling,
)

__all__ = ["all_namespaces_option", "deprecation", "env_option", "namespace_option", "no_color_option",
           "output_option"]

F = TypeVar("F", bound=Callable[..., Any])
# Commands whose body writes YAML itself (a Kubernetes stream), not the JSON document in YAML.
NATIVE_YAML = frozenset({"render", "crds", "cluster-bootstrap", "repo creds add"})
_ALIAS_VALUE = "apprafter.output_alias"


def _flags(spelling: Spelling) -> list[str]:
    return [spelling.short, spelling.long] if spelling.short else [spelling.long]


def deprecation(old: str, new: str) -> None:
    """The one line an old spelling prints."""
    click.echo(f"warning: {old} is deprecated: use {new}", err=True)


class _Formats(click.Choice):  # type: ignore[type-arg]  # click.Choice is generic in click >= 8.2 only
    """The -o choices, also accepting a command's old values (each with a deprecation line)."""

    def __init__(self, formats: tuple[str, ...], aliases: dict[str, str]) -> None:
        super().__init__(formats)
        self.aliases = aliases

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value in self.aliases:
            deprecation(f"-o {value}", f"-o {self.aliases[value]}")
            value = self.aliases[value]
        return super().convert(value, param, ctx)


def _keep_alias(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """-o's value, unless it was left at its default and an old spelling said otherwise."""
    alias = ctx.meta.get(_ALIAS_VALUE)
    if alias is not None and ctx.get_parameter_source(str(param.name)) is ParameterSource.DEFAULT:
        return alias
    return value


def _alias(flag: str, formats: tuple[str, ...]) -> Callable[[F], F]:
    """A hidden old spelling of -o."""
    stands_for = DEPRECATED[flag]

    def record(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if value is None or value is False:
            return
        chosen = stands_for or str(value)
        deprecation(f"{flag}{'' if stands_for else ' ' + chosen}", f"-o {chosen}")
        ctx.meta[_ALIAS_VALUE] = chosen

    if stands_for is None:
        return click.option(flag, type=click.Choice(formats), hidden=True, expose_value=False, callback=record,
                            help=f"Deprecated: use {OUTPUT.short}/{OUTPUT.long}.")
    return click.option(flag, is_flag=True, hidden=True, expose_value=False, callback=record,
                        help=f"Deprecated: use {OUTPUT.short} {stands_for}.")


def _yaml_from_json(func: F) -> F:
    """-o yaml: run the body for -o json and write that document as YAML (the one rule for every command)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("output") != "yaml":
            return func(*args, **kwargs)
        buffer = io.StringIO()
        try:
            with contextlib.redirect_stdout(buffer):
                return func(*args, **{**kwargs, "output": "json"})
        finally:  # also when the body exits (a detailed exit code) after writing its document
            text = buffer.getvalue()
            if text.strip():
                from renderer.emit import dump_yaml

                sys.stdout.write(dump_yaml(json.loads(text)))
                sys.stdout.flush()

    return wrapper  # type: ignore[return-value]  # same signature


def output_option(command: str, help: str | None = None) -> Callable[[F], F]:
    """-o/--output with the formats convention.OUTPUTS gives `command` (its old spellings as hidden aliases)."""
    formats = OUTPUTS[command]

    def decorate(func: F) -> F:
        if "yaml" in formats and command not in NATIVE_YAML:
            func = _yaml_from_json(func)
        for flag in reversed(ALIASES.get(command, ())):
            func = _alias(flag, formats)(func)
        return click.option(*_flags(OUTPUT), "output", type=_Formats(formats, VALUE_ALIASES.get(command, {})),
                            default=formats[0], show_default=True, callback=_keep_alias,
                            help=help or OUTPUT.help)(func)

    return decorate


def namespace_option(help: str, dest: str = "namespace", multiple: bool = False,
                     metavar: str | None = None) -> Callable[[F], F]:
    """-n/--namespace."""
    return click.option(*_flags(NAMESPACE), dest, multiple=multiple, metavar=metavar, help=help)


def all_namespaces_option(help: str) -> Callable[[F], F]:
    """-A/--all-namespaces."""
    return click.option(*_flags(ALL_NAMESPACES), "all_namespaces", is_flag=True, help=help)


def env_option(help: str, *, multiple: bool = False, required: bool = False,
               complete: Callable[..., list[Any]] | None = None) -> Callable[[F], F]:
    """-e/--env (completed from the environments the repository declares, when `complete` is given)."""
    return click.option(*_flags(ENVIRONMENT), "environment", multiple=multiple, required=required,
                        shell_complete=complete, metavar="ENV", help=help)


def no_color_option() -> Callable[[F], F]:
    """--no-color."""
    return click.option(NO_COLOR.long, "no_color", is_flag=True, help=NO_COLOR.help)
