"""Benchmark: `apprafter render` vs bare `cue export` of the same input, and `render --all` vs N single renders.

Prints medians measured side by side in one run (ratios matter; these machines are noisy).
Usage: .venv/bin/python scripts/bench_render.py [--runs 15] [--apps 100]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import bare_cue_package, timed, timed_cpu

from toolchain.tools import resolve

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("apprafter", "renderer", "toolchain", "cmp", "compatibility")
APPRAFTER = [str(Path(sys.executable).parent / "apprafter")]


def median_pair(a: list[str], b: list[str], runs: int, cwd_b: Path | None = None) -> tuple[float, float]:
    ta, tb = [], []
    for _ in range(runs):  # interleaved so both see the same machine load
        ta.append(timed(a))
        tb.append(timed(b, cwd_b))
    return statistics.median(ta), statistics.median(tb)


def median_pair_cpu(a: list[str], b: list[str], runs: int,
                    cwd_b: Path | None = None) -> tuple[float, float, float, float]:
    """Medians of (wall a, wall b, CPU a, CPU b), interleaved."""
    wa, wb, ca, cb = [], [], [], []
    for _ in range(runs):
        wall, cpu = timed_cpu(a)
        wa.append(wall)
        ca.append(cpu)
        wall, cpu = timed_cpu(b, cwd_b)
        wb.append(wall)
        cb.append(cpu)
    return tuple(statistics.median(x) for x in (wa, wb, ca, cb))  # type: ignore[return-value]  # four medians


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--apps", type=int, default=100)
    args = parser.parse_args()
    cue = str(resolve("cue"))
    # As an installed wheel runs (pip compiles it): with PYTHONDONTWRITEBYTECODE set and no __pycache__ (a fresh
    # editable checkout), every run would compile the renderer's sources first (≈ 130 M instructions more).
    subprocess.run([sys.executable, "-m", "compileall", "-q", *PACKAGES], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    with tempfile.TemporaryDirectory() as tmp:
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        # the parser (no needs) and the shop (pg + redis, a public hostname, two environments: issue 44's app)
        for name in ("parser", "webapp"):
            example = ROOT / "examples" / name
            bare = bare_cue_package(example, Path(tmp) / f"bare-{name}")
            ours, theirs, ours_cpu, theirs_cpu = median_pair_cpu(
                [*APPRAFTER, "render", str(example), "--env", "prod", "--mode", "manifests"],
                [cue, "export", "--out", "json", "."], args.runs, cwd_b=bare)
            print(f"{name}: render (manifests) median {ours * 1000:.0f} ms | bare cue export {theirs * 1000:.0f} ms "
                  f"| overhead {1000 * (ours - theirs):.0f} ms | ratio {ours / theirs:.2f}x (wall)")
            print(f"{name}: render (manifests) median {ours_cpu * 1000:.0f} ms | bare cue export "
                  f"{theirs_cpu * 1000:.0f} ms | overhead {1000 * (ours_cpu - theirs_cpu):.0f} ms (CPU time, cue's "
                  "included)")

        mono = Path(tmp) / "mono"
        sources = [ROOT / "examples" / n for n in ("parser", "webapp", "worker")]
        for i in range(args.apps):
            dest = mono / f"app{i:03d}"
            shutil.copytree(sources[i % 3], dest)
            app_file = dest / "apprafter" / "Application.cue"
            text = app_file.read_text()
            for name in ('"parser"', '"shop"', '"ingest-worker"'):
                text = text.replace(f"metadata: name: {name}", f'metadata: name: "app{i:03d}"')
            app_file.write_text(text)
        all_runs = [timed([*APPRAFTER, "render", "--all", str(mono)]) for _ in range(3)]
        singles_start = time.perf_counter()
        for i in range(args.apps):
            envs = subprocess.run([*APPRAFTER, "envs", str(mono / f"app{i:03d}")], check=True,
                                  capture_output=True, text=True).stdout.split()
            for env in envs:
                subprocess.run([*APPRAFTER, "render", str(mono / f"app{i:03d}"), "--env", env], check=True,
                               stdout=subprocess.DEVNULL)
        singles = time.perf_counter() - singles_start
        t_all = statistics.median(all_runs)
        print(f"render --all over {args.apps} apps: median {t_all:.2f} s | one `render` per app and env "
              f"(+ envs): {singles:.2f} s | speed-up {singles / t_all:.1f}x")


if __name__ == "__main__":
    main()
