"""Benchmark: `apprafter stack build` (full stack, one tier) as a ratio to `helm template` of the result."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from toolchain.tools import resolve

REPO = Path(__file__).resolve().parent.parent


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, env=env, check=False, timeout=300)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(argv)}\n{proc.stderr.decode()}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=9, help="runs per measurement (median reported)")
    parser.add_argument("--tier", default="solo", help="the one tier to build")
    args = parser.parse_args()
    helm = str(resolve("helm"))
    apprafter = [sys.executable, "-c", "from apprafter.cli import main; main()"]
    env = {**os.environ, "SOURCE_DATE_EPOCH": "1700000000"}
    with tempfile.TemporaryDirectory(prefix="bench-stack-") as tmp:
        rows = []
        for label, extra in (("full stack", []), (f"tier {args.tier}", ["--tier", args.tier])):
            out = Path(tmp) / label.replace(" ", "-")
            build = [*apprafter, "stack", "build", "--out", str(out), *extra]
            timed(build, env)  # warm-up, and produces the chart helm templates
            tgz = next(out.glob("*.tgz"))
            template = [helm, "template", "bench", str(tgz), "--kube-version", "1.34.0"]
            timed(template, env)
            builds, templates = [], []
            for _ in range(args.n):  # interleaved: both see the same machine state
                builds.append(timed(build, env))
                templates.append(timed(template, env))
            b, t = statistics.median(builds), statistics.median(templates)
            rows.append((label, b, t))
    print(f"median of {args.n} runs, measured side by side")
    print(f"{'build':<14}{'stack build':>14}{'helm template':>16}{'ratio':>9}")
    for label, b, t in rows:
        print(f"{label:<14}{b * 1000:>11.0f} ms{t * 1000:>13.0f} ms{b / t:>8.2f}x")


if __name__ == "__main__":
    main()
