"""Benchmark: `apprafter cmp generate` vs bare `cue export` of the same app, alone and inside a 500-app monorepo.

Prints medians measured side by side in one run (interleaved), as ratios.
Usage: .venv/bin/python scripts/bench_cmp.py [--runs 15] [--apps 500]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from benchlib import bare_cue_package, timed, timed_cpu

from toolchain.tools import resolve

ROOT = Path(__file__).resolve().parent.parent
GENERATE = [str(Path(sys.executable).parent / "apprafter"), "cmp", "generate"]


def argo_env(source_path: str) -> dict[str, str]:
    return {**os.environ, "ARGOCD_APP_NAME": "parser-prod", "ARGOCD_APP_NAMESPACE": "parser-prod",
            "ARGOCD_APP_SOURCE_PATH": source_path, "ARGOCD_APP_PARAMETERS": "null"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--apps", type=int, default=500)
    args = parser.parse_args()
    cue = str(resolve("cue"))
    with tempfile.TemporaryDirectory() as tmp:
        alone = Path(tmp) / "alone"
        shutil.copytree(ROOT / "examples" / "parser", alone)
        mono = Path(tmp) / "mono"
        for i in range(args.apps):
            shutil.copytree(ROOT / "examples" / ("parser", "webapp", "worker")[i % 3], mono / "apps" / f"a{i:03d}")
        target = mono / "apps" / "a000"
        bare = bare_cue_package(alone, Path(tmp) / "bare")
        t_gen, t_mono, t_cue, cpu_gen, cpu_cue = [], [], [], [], []
        for _ in range(args.runs):
            wall, cpu = timed_cpu(GENERATE, alone, argo_env("."))
            t_gen.append(wall)
            cpu_gen.append(cpu)
            t_mono.append(timed(GENERATE, target, argo_env("apps/a000")))
            wall, cpu = timed_cpu([cue, "export", "--out", "json", "."], bare)
            t_cue.append(wall)
            cpu_cue.append(cpu)
        g, m, c, gc, cc = (statistics.median(t) for t in (t_gen, t_mono, t_cue, cpu_gen, cpu_cue))
        print(f"cmp generate median {g * 1000:.0f} ms | bare cue export {c * 1000:.0f} ms | ratio {g / c:.2f}x | "
              f"overhead {1000 * (g - c):.0f} ms (wall)")
        print(f"cmp generate median {gc * 1000:.0f} ms | bare cue export {cc * 1000:.0f} ms | "
              f"overhead {1000 * (gc - cc):.0f} ms (CPU time, cue's included)")
        print(f"cmp generate inside a {args.apps}-app monorepo median {m * 1000:.0f} ms | alone {g * 1000:.0f} ms | "
              f"ratio {m / g:.2f}x")


if __name__ == "__main__":
    main()
