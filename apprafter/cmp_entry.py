"""The plugin commands without click: Argo CD's env and working dir in, YAML/JSON out, short errors, exit codes."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from toolchain.errors import AppRafterError

MAX_ERROR_LINES = 20  # Argo CD shows stderr in the UI: keep it short


def run(command: str) -> int:
    """Run one plugin command; the exit code is 0 only when something was printed."""
    from apprafter.entry import imports_done
    from cmp import commands

    imports_done()

    cwd = Path.cwd()
    if command == "discover":
        found = commands.discover(cwd)
        if not found:
            return 1
        print(found)
        return 0
    try:
        from apprafter.budget import limit_own_memory

        limit_own_memory()
        if command == "parameters":
            sys.stdout.write(commands.parameters_json(os.environ, cwd))
            return 0
        stream, warnings = commands.generate_stream(os.environ, cwd)
    except (AppRafterError, MemoryError) as error:
        from apprafter.errors import report  # the error path's alone

        return report(error, MAX_ERROR_LINES)
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    sys.stdout.write(stream)
    sys.stdout.flush()
    return 0
