"""Benchmark: the same `apprafter cmp generate` and `render` from two git revisions, interleaved in one run.

Each revision is unpacked with `git archive` and run as `python -m apprafter` with it first on PYTHONPATH (the
same interpreter, the same cue), so the ratio is what the code between the revisions costs or saves.
Usage: .venv/bin/python scripts/bench_revisions.py BASE [HEAD] [--runs 31]   (HEAD: the working tree)
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def unpack(rev: str, into: Path) -> Path:
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
    with tempfile.TemporaryFile() as fh:
        fh.write(archive)
        fh.seek(0)
        with tarfile.open(fileobj=fh) as tar:
            tar.extractall(into, filter="data")
    return into


def timed(src: Path, argv: list[str], cwd: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(src), "ARGOCD_APP_NAME": "parser-prod", "ARGOCD_APP_SOURCE_PATH": ".",
           "PWD": str(cwd)}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "apprafter", *argv], env=env, cwd=cwd, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("base")
    parser.add_argument("head", nargs="?", default=None)
    parser.add_argument("--runs", type=int, default=31)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = unpack(args.base, Path(tmp) / "base")
        head = unpack(args.head, Path(tmp) / "head") if args.head else ROOT
        app = Path(tmp) / "app"
        shutil.copytree(ROOT / "examples" / "parser", app)
        for argv, cwd in ((["cmp", "generate"], app), (["render", str(app), "--env", "prod", "--mode", "manifests"],
                                                        Path(tmp))):
            a, b = [], []
            for _ in range(args.runs):  # interleaved so both see the same machine load
                a.append(timed(base, argv, cwd))
                b.append(timed(head, argv, cwd))
            ma, mb = statistics.median(a), statistics.median(b)
            name = "render" if argv[0] == "render" else " ".join(argv)
            print(f"{name}: {args.base} {ma * 1000:.0f} ms | {args.head or 'working tree'} {mb * 1000:.0f} ms | "
                  f"{1000 * (mb - ma):+.0f} ms | ratio {mb / ma:.2f}x")


if __name__ == "__main__":
    main()
