"""`apprafter version` (its own version, cue's and the schema's) and `apprafter completion bash|zsh|fish`."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from apprafter.options import output_option

DISTRIBUTION = "apprafter-render"
SHELLS = ("bash", "zsh", "fish")


def versions() -> dict[str, Any]:
    """What `version -o json` prints: this package, the cue it would run (and whether it is supported), the
    schema it validates against."""
    import hashlib
    from importlib.metadata import PackageNotFoundError, version

    from renderer.load import schema_text
    from renderer.names import API_VERSION
    from toolchain.tools import TOOLS, candidate_path, read_version

    try:
        own = version(DISTRIBUTION)
    except PackageNotFoundError:  # run from a source tree that was never installed
        own = "unknown"
    cue = TOOLS["cue"]
    path = candidate_path("cue")
    found = read_version("cue", path) if path is not None and path.exists() else None
    return {
        "apprafter": {"version": own, "distribution": DISTRIBUTION},
        "cue": {"version": found, "path": str(path) if found else None, "supported": cue.supported,
                "ok": cue.supports(found)},
        "schema": {"apiVersion": API_VERSION,
                   "sha256": hashlib.sha256(schema_text().encode()).hexdigest()[:12]},
    }


@click.command()
@output_option("version")
def version(output: str) -> None:
    """Print apprafter's version, the cue it runs (and the versions it supports) and the schema's version."""
    info = versions()
    if output == "json":
        sys.stdout.write(json.dumps(info, indent=2) + "\n")
        return
    cue = info["cue"]
    if cue["version"] is None:
        cue_line = f"not found (supported: {cue['supported']})"
    else:
        state = "supported" if cue["ok"] else "UNSUPPORTED; supported"
        cue_line = f"{cue['version']} at {cue['path']} ({state}: {cue['supported']})"
    sys.stdout.write(f"apprafter {info['apprafter']['version']} ({info['apprafter']['distribution']})\n"
                     f"cue       {cue_line}\n"
                     f"schema    {info['schema']['apiVersion']} sha256:{info['schema']['sha256']}\n")


@click.command()
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell: str) -> None:
    """Print the completion script for SHELL (commands, flags, and environment names read from the repository).

    \b
    bash: source <(apprafter completion bash)       (in ~/.bashrc)
    zsh:  source <(apprafter completion zsh)        (in ~/.zshrc)
    fish: apprafter completion fish > ~/.config/fish/completions/apprafter.fish
    """
    from click.shell_completion import get_completion_class

    from apprafter.cli import main

    complete = get_completion_class(shell)
    assert complete is not None  # every shell click.Choice lets through has a class
    sys.stdout.write(complete(main, {}, "apprafter", "_APPRAFTER_COMPLETE").source() + "\n")
