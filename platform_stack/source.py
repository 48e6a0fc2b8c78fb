"""Evaluates the platform-stack CUE source with the real cue binary into the data a chart is built from."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from platform_stack.errors import StackError, StackToolError
from platform_stack.proc import run

SOURCE_DIR = Path(__file__).resolve().parent
TIERS = ("dev", "solo", "team", "production", "regulated")
ALL = "all"
CUE_TIMEOUT = 60.0

_POS = re.compile(r"^\s+(\S+?\.cue):(\d+):(\d+)\s*$")


def cue_files(source: Path) -> list[Path]:
    """The files of the stack package: top-level *.cue, components/*.cue, tiers/*.cue, sorted."""
    files = sorted(source.glob("*.cue")) + sorted((source / "components").glob("*.cue")) + \
        sorted((source / "tiers").glob("*.cue"))
    if not (source / "platform.cue").is_file():
        raise StackError(f"{source}:1:1: source: no platform.cue here (not a platform-stack source directory)")
    return files


def evaluate(source: Path = SOURCE_DIR, tier: str = ALL) -> dict[str, Any]:
    """`cue export -e build` for `tier` ("all" or one tier): {tiers, values, compatibility, schema}."""
    if tier != ALL and tier not in TIERS:
        raise StackError(f"--tier: {tier!r} is not one of {', '.join((ALL, *TIERS))}")
    files = [str(p.relative_to(source)) for p in cue_files(source)]
    proc = run("cue", ["export", *files, "-t", f"tier={tier}", "-e", "build", "--out", "json"],
               cwd=source, timeout=CUE_TIMEOUT)
    if proc.returncode != 0:
        raise StackError(*cue_error_lines(proc.stderr.decode(errors="replace"), source))
    try:
        data: dict[str, Any] = json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise StackToolError(f"cue export printed invalid JSON ({exc}): run `make setup` to reinstall cue") from exc
    return data


def cue_error_lines(stderr: str, source: Path) -> list[str]:
    """cue's `field: message` + indented positions -> one `file:line:col: field: message` line each."""
    out: list[str] = []
    message: str | None = None
    placed = False
    for line in stderr.splitlines():
        pos = _POS.match(line)
        if pos and message is not None:
            if not placed:
                path = (source / pos.group(1)).resolve()
                out.append(f"{_show(path)}:{pos.group(2)}:{pos.group(3)}: {message}")
                placed = True
            continue
        if line.strip() and not line.startswith((" ", "\t")):
            if message is not None and not placed:
                out.append(f"{_show(source / 'platform.cue')}:1:1: {message}")
            message, placed = line.strip().rstrip(":"), False
    if message is not None and not placed:
        out.append(f"{_show(source / 'platform.cue')}:1:1: {message}")
    return out or [f"{_show(source / 'platform.cue')}:1:1: cue: evaluation failed"]


def _show(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
