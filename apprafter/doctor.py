"""`apprafter doctor`: every external tool (and container tool), its path and version, and whether it is supported."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from apprafter.options import output_option
from toolchain.container_tools import ContainerTool, container_tools, find, node_tools
from toolchain.tools import TOOLS, build_info, candidate_path, in_checkout, read_version, remedy


@click.command()
@output_option("doctor")
@click.option("--users-only", is_flag=True,
              help="Check only what an app repository needs (cue), not the test bed or container tools.")
def doctor(output: str, users_only: bool) -> None:
    """Check the toolchain (cue: every version in the supported range; the rest: the pin); exit 1 when a tool is
    missing or unsupported."""
    rows: list[dict[str, Any]] = []
    for tool in TOOLS.values():
        if users_only and not tool.required_for_users:
            continue
        for wanted in tool.versions:  # the pin, then any further version the set-up installs and the tests run
            path = candidate_path(tool.name, None if wanted == tool.pinned else wanted)
            version = read_version(tool.name, path) if path and path.exists() else None
            ok = tool.supports(version) if wanted == tool.pinned else version == wanted
            build = build_info(tool.name, path) if version and path else []
            rows.append({"tool": tool.name, "pinned": wanted, "supported": tool.supported if wanted == tool.pinned
                         else wanted, "version": version, "build": build,
                         "path": str(path) if path and path.exists() else None, "ok": ok, "purpose": tool.purpose})
    # The images' build and run tools: Debian packages, any version from the minimum up.
    containers = [] if users_only else _debian_rows(container_tools())
    # ...and the node tier's (containerd, CNI plugins, iptables), by their Debian package's version.
    node = [] if users_only else _debian_rows(node_tools())
    bad = [r for r in [*rows, *containers, *node] if not r["ok"]]
    if output == "json":
        click.echo(json.dumps({"ok": not bad, "tools": rows, "container_tools": containers, "node_tools": node},
                              indent=2, sort_keys=True))
    else:
        for r in rows:
            mark = "ok " if r["ok"] else "BAD"
            built = f"  [{', '.join(r['build'])}]" if r["build"] else ""
            wanted = f"pinned {r['pinned']}" + (f"; supported {r['supported']}" if r["supported"] != r["pinned"]
                                                else "")
            click.echo(f"{mark} {r['tool']:<18} {r['version'] or 'missing':<10} ({wanted})  {r['path'] or '-'}{built}")
        for c in [*containers, *node]:
            mark = "ok " if c["ok"] else "BAD"
            wanted = f">= {c['minimum']}" if c["minimum"] else "any version"
            shown = c["version"] or ("present" if c["path"] else "missing")
            click.echo(f"{mark} {c['tool']:<18} {shown:<10} ({wanted}, Debian {c['package']})  {c['path'] or '-'}")
        for c in [*containers, *node]:
            if c["problem"]:
                click.echo(c["problem"], err=True)
        if bad and in_checkout():
            click.echo(f"{len(bad)} tool(s) missing or unsupported: run `make setup`", err=True)
        elif bad:
            for r in bad:
                if r["tool"] in TOOLS:
                    click.echo(f"{r['tool']}: {remedy(r['tool'])}", err=True)
    sys.exit(1 if bad else 0)


def _debian_rows(tools: list[ContainerTool]) -> list[dict[str, Any]]:
    found = [find(t) for t in tools]
    return [{"tool": f.tool.name, "package": f.tool.package, "minimum": f.tool.minimum, "version": f.version,
             "path": str(f.path) if f.path else None, "ok": f.ok, "problem": f.problem} for f in found]
