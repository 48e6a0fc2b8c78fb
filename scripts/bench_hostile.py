"""Benchmark: `apprafter render` of hostile Applications (an error whose position must be found) vs bare `cue
export` of the same module: what the Python side adds when the input is built to make it work.

Prints medians measured side by side in one run (ratios matter; these machines are noisy).
Usage: .venv/bin/python scripts/bench_hostile.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import bare_cue_package

from tests.renderer.helpers import MINIMAL, write_app
from toolchain.tools import resolve

APPRAFTER = [str(Path(sys.executable).parent / "apprafter")]
TYPO = MINIMAL.replace("prod: replicas: 2", "prod: replica: 2")  # an unknown field: cue names it, we place it
CASES = {
    "60 KB label chain (a: a: a: ...)": TYPO + "_x: " + "a: " * 20000 + "1\n",
    "300 KiB label chain": TYPO + "_x: " + "a: " * 100000 + "1\n",  # 1 MiB of it exceeds cue's own budget
    "0.9 MiB of fields (_f0: 0, _f1: 1, ...)": TYPO + "".join(f"_f{i}: {i}\n" for i in range(65000)),
    "nested structs ({a: {a: ...}}) and fields": TYPO + "_x: " + "{a: " * 9000 + "1" + "}" * 9000 + "\n"
                                                + "".join(f"_g{i}: {i}\n" for i in range(55000)),
}


def failing_run(argv: list[str], cwd: Path) -> float:
    """Wall time of one run that must fail with the user's error (exit 1)."""
    start = time.perf_counter()
    code = subprocess.run(argv, cwd=cwd, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          ).returncode
    elapsed = time.perf_counter() - start
    if code != 1:
        raise SystemExit(f"{' '.join(argv)} exited {code}, want 1")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    cue = str(resolve("cue"))
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, text) in enumerate(CASES.items()):
            app = Path(tmp) / f"app{i}"
            write_app(app, text)
            bare = bare_cue_package(app, Path(tmp) / f"bare{i}")
            ours, theirs = [], []
            for _ in range(args.runs):  # interleaved so both see the same machine load
                ours.append(failing_run([*APPRAFTER, "render", ".", "--env", "dev"], app))
                theirs.append(failing_run([cue, "export", "--out", "json", "--all-errors", "."], bare))
            a, b = statistics.median(ours), statistics.median(theirs)
            print(f"{name} ({len(text) >> 10} KiB): render {a * 1000:.0f} ms | bare cue export {b * 1000:.0f} ms | "
                  f"overhead {1000 * (a - b):.0f} ms | ratio {a / b:.2f}x")


if __name__ == "__main__":
    main()
