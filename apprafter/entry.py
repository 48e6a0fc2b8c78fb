"""Console-script entry: the plugin's `apprafter cmp generate|parameters|discover` skip click's import.

Argo CD runs the plugin once per sync of every app, so its start-up time is user-visible latency; every
other command goes through the click CLI in apprafter.cli.
"""

from __future__ import annotations

import sys

PLUGIN_COMMANDS = frozenset({"generate", "parameters", "discover"})


def main() -> None:
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "cmp" and args[1] in PLUGIN_COMMANDS:
        from apprafter import cmp_entry

        sys.exit(cmp_entry.run(args[1]))
    from apprafter.cli import main as cli_main

    cli_main()
