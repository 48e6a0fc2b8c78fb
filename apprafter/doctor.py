"""`apprafter doctor`: what the caller's role needs (tools, their paths and versions, the Python extras), and whether
each is there at a supported version."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from apprafter.options import deprecation, output_option
from toolchain.container_tools import ContainerTool, container_tools, find, node_tools
from toolchain.tools import ROLES, TOOLS, build_info, candidate_path, in_checkout, missing_remedy, read_version, remedy

# The Python extras each role needs ("" is the base install: what render, validate and plan import).
EXTRAS_BY_ROLE: dict[str, tuple[str, ...]] = {
    "developer": ("",),
    "cluster": ("", "cluster", "stack"),
    "development": ("", "cluster", "stack", "operator", "webhook", "dev"),
}


@click.command()
@output_option("doctor")
@click.option("--role", "roles", type=click.Choice(ROLES), multiple=True,
              help="Whose needs to check (repeatable): developer (default: cue and the base install), cluster "
                   "(cosign, the cluster and stack extras), development (this repository's test bed, images and "
                   "node tier).")
@click.option("--all", "every_role", is_flag=True, help="Every role.")
@click.option("--users-only", is_flag=True, hidden=True, help="Deprecated: the default (--role developer).")
def doctor(output: str, roles: tuple[str, ...], every_role: bool, users_only: bool) -> None:
    """Check what your role needs: each tool's path and version (cue: every version in the supported range; the
    rest: the pin) and the Python extras; exit 1 when something is missing or unsupported."""
    if users_only:
        deprecation("--users-only", "--role developer (the default)")
    wanted = set(ROLES if every_role else roles or ("developer",))
    rows: list[dict[str, Any]] = []
    for tool in TOOLS.values():
        if not tool.roles & wanted:
            continue
        for version in tool.versions:  # the pin, then any further version the set-up installs and the tests run
            rows.append(_tool_row(tool.name, version))
    development = "development" in wanted
    # The images' build and run tools, and the node tier's: Debian packages, any version from the minimum up.
    containers = _debian_rows(container_tools()) if development else []
    node = _debian_rows(node_tools()) if development else []
    python = [_python_row(extra) for extra in dict.fromkeys(e for role in ROLES if role in wanted
                                                             for e in EXTRAS_BY_ROLE[role])]
    bad = [r for r in [*rows, *containers, *node, *python] if not r["ok"]]
    if output == "json":
        click.echo(json.dumps({"ok": not bad, "roles": [r for r in ROLES if r in wanted], "tools": rows,
                               "python": python, "container_tools": containers, "node_tools": node},
                              indent=2, sort_keys=True))
    else:
        _print(rows, [*containers, *node], python, bad)
    sys.exit(1 if bad else 0)


def _tool_row(name: str, wanted: str) -> dict[str, Any]:
    tool = TOOLS[name]
    path = candidate_path(name, None if wanted == tool.pinned else wanted)
    version = read_version(name, path) if path and path.exists() else None
    ok = tool.supports(version) if wanted == tool.pinned else version == wanted
    return {"tool": name, "pinned": wanted, "supported": tool.supported if wanted == tool.pinned else wanted,
            "version": version, "build": build_info(name, path) if version and path else [],
            "path": str(path) if path and path.exists() else None, "ok": ok, "purpose": tool.purpose}


def _python_row(extra: str) -> dict[str, Any]:
    from apprafter.extras import DISTRIBUTION, missing

    absent = missing(extra)
    return {"extra": extra, "ok": not absent, "missing": absent,
            "install": f"pip install '{DISTRIBUTION}[{extra}]'" if extra else f"pip install {DISTRIBUTION}"}


def _print(rows: list[dict[str, Any]], debian: list[dict[str, Any]], python: list[dict[str, Any]],
           bad: list[dict[str, Any]]) -> None:
    for r in rows:
        mark = "ok " if r["ok"] else "BAD"
        built = f"  [{', '.join(r['build'])}]" if r["build"] else ""
        wanted = f"pinned {r['pinned']}" + (f"; supported {r['supported']}" if r["supported"] != r["pinned"] else "")
        click.echo(f"{mark} {r['tool']:<18} {r['version'] or 'missing':<10} ({wanted})  {r['path'] or '-'}{built}")
    for c in debian:
        mark = "ok " if c["ok"] else "BAD"
        wanted = f">= {c['minimum']}" if c["minimum"] else "any version"
        shown = c["version"] or ("present" if c["path"] else "missing")
        click.echo(f"{mark} {c['tool']:<18} {shown:<10} ({wanted}, Debian {c['package']})  {c['path'] or '-'}")
    for p in python:
        name = f"python[{p['extra']}]" if p["extra"] else "python"
        state = "installed" if p["ok"] else "missing"
        what = f"extra [{p['extra']}]" if p["extra"] else "the base install: render, validate, plan"
        click.echo(f"{'ok ' if p['ok'] else 'BAD'} {name:<18} {state:<10} ({what})" +
                   (f"  missing {', '.join(p['missing'])}" if p["missing"] else ""))
    for c in debian:
        if c["problem"]:
            click.echo(c["problem"], err=True)
    tools = [r for r in bad if "extra" not in r]  # the Python rows have their own remedy below
    if tools and in_checkout():
        click.echo(f"{len(tools)} tool(s) missing or unsupported: run `make setup`", err=True)
    else:
        for r in (r for r in tools if r["tool"] in TOOLS):
            click.echo(f"{r['tool']}: {missing_remedy(r['tool']) if r['version'] is None else remedy(r['tool'])}",
                       err=True)
    for p in python:
        if not p["ok"]:
            click.echo(f"{'python[' + p['extra'] + ']' if p['extra'] else 'python'}: {p['install']}", err=True)


def _debian_rows(tools: list[ContainerTool]) -> list[dict[str, Any]]:
    found = [find(t) for t in tools]
    return [{"tool": f.tool.name, "package": f.tool.package, "minimum": f.tool.minimum, "version": f.version,
             "path": str(f.path) if f.path else None, "ok": f.ok, "problem": f.problem} for f in found]
