"""Benchmark: the app developer's install before and after a change of the dependencies, side by side.

Builds the wheel of a git revision (--before, default the commit before the extras: `git log` of pyproject.toml
names it) and of the working tree, installs each alone into a fresh virtualenv (the base install, from PyPI), and
measures: distributions installed (pip and setuptools left out), MB installed (site-packages, the same left out),
the `pip install` wall time (network included: noisy), the import time of what render, validate and plan load, and
`apprafter --help` and `apprafter render` (examples/parser, prod, manifests) wall and CPU time, as medians of
interleaved runs. The cue of the tool cache renders for both.

Usage: .venv/bin/python scripts/bench_install.py [--before REV] [--runs 11]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import timed_cpu

ROOT = Path(__file__).resolve().parent.parent
LEFT_OUT = {"pip", "setuptools", "_distutils_hack", "pkg_resources", "distutils-precedence.pth"}
IMPORTS = "import apprafter.cli, apprafter.render_cmd, apprafter.plan_cmd, renderer.render, compatibility.monorepo"


def _wheel(source: Path, into: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(into), str(source)],
                   check=True, timeout=600)
    (wheel,) = into.glob("*.whl")
    return wheel


def _tree(rev: str, into: Path) -> Path:
    """The files of `rev`, as `git archive` gives them."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def _venv(wheel: Path, where: Path) -> tuple[Path, float]:
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(where)], check=True, timeout=300)
    start = time.perf_counter()
    env = {k: v for k, v in os.environ.items() if k != "PIP_FIND_LINKS"}
    subprocess.run([str(where / "bin" / "pip"), "install", "--quiet", str(wheel)], check=True, timeout=900, env=env)
    return where, time.perf_counter() - start


def _size(venv: Path) -> tuple[int, float]:
    """(distributions, MB) installed in the venv, pip and setuptools left out."""
    (site,) = (venv / "lib").glob("python*/site-packages")
    listed = subprocess.run([str(venv / "bin" / "python"), "-c", "import json, importlib.metadata as m; print(json."
                             "dumps(sorted({d.metadata['Name'].lower() for d in m.distributions()})))"],
                            capture_output=True, text=True, check=True).stdout
    dists = [d for d in json.loads(listed) if d not in LEFT_OUT]
    total = 0
    for entry in site.iterdir():
        name = entry.name.split("-")[0].lower()
        if name in LEFT_OUT or entry.name in LEFT_OUT:
            continue
        for dirpath, _, files in os.walk(entry) if entry.is_dir() else [(str(site), [], [entry.name])]:
            total += sum(os.path.getsize(os.path.join(dirpath, f)) for f in files)
    return len(dists), total / 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", default=None, help="git revision of the 'before' side")
    parser.add_argument("--runs", type=int, default=11)
    args = parser.parse_args()
    before = args.before or subprocess.run(
        ["git", "log", "-1", "--format=%H", "--grep=install: the base install", "--", "pyproject.toml"],
        cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip() + "~1"
    example = ROOT / "examples" / "parser"
    with tempfile.TemporaryDirectory(prefix="apprafter-bench-install-") as tmp:
        work = Path(tmp)
        sides = {"before": _wheel(_tree(before, work / "src-before"), work / "dist-before"),
                 "after": _wheel(ROOT, work / "dist-after")}
        venvs, pip_time = {}, {}
        for name, wheel in sides.items():
            venvs[name], pip_time[name] = _venv(wheel, work / f"venv-{name}")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", tmp),
               "APPRAFTER_TOOLS_DIR": os.environ.get("APPRAFTER_TOOLS_DIR",
                                                     str(Path.home() / ".cache/apprafter/tools"))}
        commands = {"import": ["bin/python", "-c", IMPORTS], "--help": ["bin/apprafter", "--help"],
                    "render": ["bin/apprafter", "render", str(example), "-e", "prod", "--mode", "manifests"]}
        walls: dict[tuple[str, str], list[float]] = {}
        cpus: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.runs):  # interleaved: both sides see the same machine load
            for what, argv in commands.items():
                for name, venv in venvs.items():
                    wall, cpu = timed_cpu([str(venv / argv[0]), *argv[1:]], cwd=work, env=env)
                    walls.setdefault((what, name), []).append(wall)
                    cpus.setdefault((what, name), []).append(cpu)
        print(f"load average {os.getloadavg()[0]:.1f}; before = {before}; {args.runs} interleaved runs, medians")
        print(f"{'':<28}{'before':>18}{'after':>18}")
        sizes = {name: _size(venv) for name, venv in venvs.items()}
        print(f"{'distributions installed':<28}{sizes['before'][0]:>18}{sizes['after'][0]:>18}")
        print(f"{'MB installed':<28}{sizes['before'][1]:>18.1f}{sizes['after'][1]:>18.1f}")
        print(f"{'pip install (s, network)':<28}{pip_time['before']:>18.1f}{pip_time['after']:>18.1f}")
        for what in commands:
            cells = [f"{statistics.median(walls[(what, n)]) * 1000:.0f} / "
                     f"{statistics.median(cpus[(what, n)]) * 1000:.0f}" for n in ("before", "after")]
            print(f"{what + ' (ms wall / CPU)':<28}{cells[0]:>18}{cells[1]:>18}")
        shutil.rmtree(work / "src-before", ignore_errors=True)


if __name__ == "__main__":
    main()
