"""Benchmark: `apprafter <command> --help` for every command vs `apprafter --version` (click's own, no command
module imported), medians of interleaved runs. The goal is every help under 0.15 s.

Usage: .venv/bin/python scripts/bench_help.py [--runs 11]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import click
from benchlib import timed_cpu

from apprafter.cli import main as cli

APPRAFTER = [str(Path(sys.executable).parent / "apprafter")]


def paths(group: click.Group = cli, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    ctx = click.Context(group)
    out: list[tuple[str, ...]] = [prefix]
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            out += paths(command, (*prefix, name))
        else:
            out.append((*prefix, name))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=11)
    args = parser.parse_args()
    commands = paths()
    walls: dict[tuple[str, ...], list[float]] = {c: [] for c in commands}
    cpus: dict[tuple[str, ...], list[float]] = {c: [] for c in commands}
    version_wall, version_cpu = [], []
    for _ in range(args.runs):  # interleaved: every command sees the same machine load
        wall, cpu = timed_cpu([*APPRAFTER, "--version"])
        version_wall.append(wall)
        version_cpu.append(cpu)
        for command in commands:
            wall, cpu = timed_cpu([*APPRAFTER, *command, "--help"])
            walls[command].append(wall)
            cpus[command].append(cpu)
    base_wall, base_cpu = statistics.median(version_wall), statistics.median(version_cpu)
    print(f"load average {os.getloadavg()[0]:.1f}; {args.runs} runs each, medians")
    print(f"{'apprafter --version':<40} wall {base_wall * 1000:5.0f} ms  CPU {base_cpu * 1000:5.0f} ms")
    for command in sorted(commands, key=lambda c: -statistics.median(walls[c])):
        wall, cpu = statistics.median(walls[command]), statistics.median(cpus[command])
        name = " ".join(("apprafter", *command, "--help"))
        print(f"{name:<40} wall {wall * 1000:5.0f} ms  CPU {cpu * 1000:5.0f} ms  ({wall / base_wall:.2f}x --version)")
    slowest = max(statistics.median(w) for w in walls.values())
    print(f"slowest --help {slowest * 1000:.0f} ms ({'under' if slowest < 0.15 else 'OVER'} 150 ms)")


if __name__ == "__main__":
    main()
