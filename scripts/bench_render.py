"""Benchmark: `apprafter render` vs bare `cue export` of the same input, and `render --all` vs N single renders.

Prints medians measured side by side in one run (ratios matter; these machines are noisy).
Usage: .venv/bin/python scripts/bench_render.py [--runs 15] [--apps 100]
       .venv/bin/python scripts/bench_render.py --trees OLD NEW [--runs 21] [--callgrind]
`--trees` compares checkouts (say main and a branch's worktree) in one run instead: each tree's `render` (the
console script with that tree first on PYTHONPATH) interleaved with bare `cue export`, and with `--callgrind` the
instructions of one render per tree (valgrind: the one figure load does not move). `--warm` adds what a warm
server would pay per render: the same render repeated inside one process that has imported everything (its CPU
and cue's), the floor a long-lived plugin process could reach before any request handling of its own.
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

WARM = """
import os, resource, statistics, sys
from apprafter import render_run
values = render_run.parse(sys.argv[2:])
sys.stdout = open(os.devnull, "w")
def used():
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
render_run.render(**values)  # the first one warms the caches a server would hold
cpu = []
for _ in range(int(sys.argv[1])):
    before = used()
    render_run.render(**values)
    cpu.append(used() - before)
print(statistics.median(cpu), file=sys.stderr)
"""

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


def compare_trees(trees: list[Path], runs: int, cue: str, callgrind: bool, warm: bool) -> None:
    """Each tree's render of the shop app beside bare cue, interleaved: medians of CPU and wall, and instructions."""
    example = ROOT / "examples" / "webapp"
    render = [*APPRAFTER, "render", str(example), "--env", "prod", "--mode", "manifests"]
    envs = [{**os.environ, "PYTHONPATH": str(tree)} for tree in trees]
    generate = [*APPRAFTER, "cmp", "generate"]  # the plugin, as Argo CD runs it for shop-prod (default mode: cr)
    argo = {"ARGOCD_APP_NAME": "shop-prod", "ARGOCD_APP_NAMESPACE": "shop", "ARGOCD_APP_SOURCE_PATH": ".",
            "ARGOCD_APP_PARAMETERS": "null"}
    for tree in trees:
        subprocess.run([sys.executable, "-m", "compileall", "-q", *PACKAGES], cwd=tree, check=True,
                       stdout=subprocess.DEVNULL)
    with tempfile.TemporaryDirectory() as tmp:
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        bare = bare_cue_package(example, Path(tmp) / "bare")
        bare_runs: list[tuple[float, float]] = []
        tree_runs: list[list[tuple[float, float]]] = [[] for _ in trees]
        plugin_runs: list[list[tuple[float, float]]] = [[] for _ in trees]
        for _ in range(runs):  # interleaved so every command sees the same machine load
            bare_runs.append(timed_cpu([cue, "export", "--out", "json", "."], bare))
            for i, env in enumerate(envs):
                tree_runs[i].append(timed_cpu(render, env=env))
                plugin_runs[i].append(timed_cpu(generate, example, {**env, **argo, "PWD": str(example)}))
        wall0, cpu0 = (statistics.median(x) for x in zip(*bare_runs, strict=True))
        print(f"bare cue export: CPU {cpu0 * 1000:.1f} ms, wall {wall0 * 1000:.1f} ms ({runs} runs)")
        for tree, measured, plugin in zip(trees, tree_runs, plugin_runs, strict=True):
            for what, taken in (("render --mode manifests", measured), ("cmp generate", plugin)):
                wall, cpu = (statistics.median(x) for x in zip(*taken, strict=True))
                print(f"{tree}: {what} CPU {cpu * 1000:.1f} ms (+{(cpu - cpu0) * 1000:.1f} ms over bare cue, "
                      f"{cpu / cpu0:.2f}x), wall {wall * 1000:.1f} ms (+{(wall - wall0) * 1000:.1f} ms)")
        if warm:
            for tree, env in zip(trees, envs, strict=True):
                out = subprocess.run([sys.executable, "-c", WARM, str(runs), *render[2:]], env=env, cwd="/",
                                     capture_output=True, text=True, check=True)
                print(f"{tree}: a warm process's render CPU {float(out.stderr.split()[-1]) * 1000:.1f} ms "
                      f"(median of {runs}, cue's included)")
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if callgrind:
        entry = "import sys; from apprafter.entry import main; sys.exit(main())"
        for tree, env in zip(trees, envs, strict=True):
            out = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
                                  "-c", entry, *render[1:]], env=env, cwd="/", capture_output=True, text=True,
                                 check=True)  # cwd: "-c" puts it first on sys.path
            count = next(line.split()[-1] for line in out.stderr.splitlines() if "Collected" in line)
            print(f"{tree}: {int(count) / 1e6:.1f} M instructions (callgrind, the Python process alone)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--apps", type=int, default=100)
    parser.add_argument("--trees", nargs="+", type=Path, help="checkouts to compare (only this, no --all)")
    parser.add_argument("--callgrind", action="store_true", help="with --trees: instructions per tree (valgrind)")
    parser.add_argument("--warm", action="store_true", help="with --trees: a render's CPU inside a warm process")
    args = parser.parse_args()
    cue = str(resolve("cue"))
    if args.trees:
        compare_trees([t.resolve() for t in args.trees], args.runs, cue, args.callgrind, args.warm)
        return
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
