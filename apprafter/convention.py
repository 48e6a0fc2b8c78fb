"""The CLI's one flag convention (kubectl's), as data: how each shared concept is spelled, what each command prints.

Kept free of click: the click-free `render` parser (apprafter/render_run.py) reads it too. apprafter/options.py
builds the click options from it, and tests/cli/test_convention.py walks every command against it.
"""

from __future__ import annotations

from toolchain.record import Record

__all__ = ["ALIASES", "ALL_NAMESPACES", "CONTAINER", "DEPRECATED", "ENVIRONMENT", "FOLLOW", "NAMESPACE", "NO_COLOR",
           "OUTPUT", "OUTPUTS", "SPELLINGS", "VALUE_ALIASES", "Spelling", "colour_wanted"]


class Spelling(Record):
    """How one concept is spelled on every command that has it."""

    long: str
    short: str | None
    help: str


OUTPUT = Spelling("--output", "-o", "Output format.")
NAMESPACE = Spelling("--namespace", "-n", "Namespace.")
ALL_NAMESPACES = Spelling("--all-namespaces", "-A", "Every namespace.")
ENVIRONMENT = Spelling("--env", "-e", "Environment (one of the declared ones).")
NO_COLOR = Spelling("--no-color", None, "No ANSI colour (also off when NO_COLOR is set or stdout is no terminal).")
FOLLOW = Spelling("--follow", "-f", "Keep printing as it comes (kubectl logs -f).")
CONTAINER = Spelling("--container", "-c", "One container of the pods.")
SPELLINGS = (OUTPUT, NAMESPACE, ALL_NAMESPACES, ENVIRONMENT, NO_COLOR, FOLLOW, CONTAINER)

# What each command that prints data can print (`-o`), by its path; the first is the default. `yaml` is always the
# `json` document in YAML, except for `render`, `crds`, `cluster-bootstrap` and `repo creds add` (which writes
# nothing with it), whose YAML is the Kubernetes stream; `name` is kubectl's: one `kind[.group]/name` per object.
OUTPUTS: dict[str, tuple[str, ...]] = {
    "render": ("yaml", "json", "name"),
    "validate": ("text", "json", "yaml"),
    "lint": ("text", "json", "yaml"),
    "envs": ("text", "json", "yaml"),
    "crds": ("yaml", "json", "name"),
    "schema": ("jsonschema", "cue"),
    "cluster-bootstrap": ("yaml", "json"),
    "plan": ("text", "json", "yaml", "markdown"),
    "doctor": ("text", "json", "yaml"),
    "version": ("text", "json", "yaml"),
    "stack classify": ("text", "json", "yaml"),
    "stack plan": ("text", "json", "yaml"),
    "migration list": ("text", "json", "yaml"),
    "platform status": ("text", "json", "yaml"),
    "repo creds add": ("text", "yaml"),
    "repo creds list": ("text", "json", "yaml"),
    "app list": ("text", "json", "yaml"),
    "app status": ("text", "json", "yaml"),
    "db backups": ("text", "json", "yaml"),
}

# Old spellings, kept hidden; each use prints one deprecation line on stderr. flag -> the value of -o it stands
# for (None: it takes the value itself, as `--format json`).
DEPRECATED: dict[str, str | None] = {"--json": "json", "--format": None}
# The commands that had them.
ALIASES: dict[str, tuple[str, ...]] = {
    "envs": ("--json",),
    "doctor": ("--json",),
    "plan": ("--format",),
    "stack classify": ("--format",),
    "stack plan": ("--format",),
}
# Old values of -o, accepted with a deprecation line: command -> {old: new}.
VALUE_ALIASES: dict[str, dict[str, str]] = {"migration list": {"table": "text"}}


def colour_wanted(no_color: bool, is_terminal: bool, environ: dict[str, str] | None = None) -> bool:
    """ANSI colour only on a terminal, never with --no-color or a non-empty NO_COLOR (https://no-color.org)."""
    import os

    env = os.environ if environ is None else environ
    return is_terminal and not no_color and not env.get("NO_COLOR")
