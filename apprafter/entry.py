"""Console-script entry: the plugin's `apprafter cmp generate|parameters|discover` and a well-formed
`apprafter render` skip click's import.

Argo CD runs the plugin once per sync of every app, so its start-up time is user-visible latency; every
other command goes through the click CLI in apprafter.cli.
"""

from __future__ import annotations

import gc
import os
import sys

PLUGIN_COMMANDS = frozenset({"generate", "parameters", "discover"})


def _exit_now(code: int) -> None:
    """Flush and leave without the interpreter's teardown (module and object finalisation, a few ms): by now
    everything is written and the scratch directories are gone."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # the reader stopped reading: the output did not arrive whole
        code = code or 2
    os._exit(code)


def imports_done() -> None:
    """The fast paths' imports are over: the collector back on, what the imports made frozen out of its scans."""
    gc.freeze()
    gc.enable()


def main() -> None:
    args = sys.argv[1:]
    # The collector off while the fast paths import (what an import makes lives until exit: no cyclic garbage to
    # find, ≈ 3 M instructions of scans); imports_done() turns it back on before the work.
    gc.disable()
    if len(args) == 2 and args[0] == "cmp" and args[1] in PLUGIN_COMMANDS:
        from apprafter import cmp_entry

        _exit_now(cmp_entry.run(args[1]))
    if args[:1] == ["render"]:
        from apprafter import render_run

        values = render_run.parse(args[1:])
        if values is not None:  # well formed: no click (help and mistakes go to click below)
            from toolchain.errors import AppRafterError

            try:
                render_run.render(**values)  # type: ignore[arg-type]  # parse() fills every parameter
            except (AppRafterError, MemoryError) as error:
                from apprafter.errors import report

                _exit_now(report(error))
            _exit_now(0)
    gc.enable()
    from apprafter.cli import main as cli_main

    cli_main(prog_name="apprafter")  # also under `python -m apprafter`: one name in usage lines and completion
