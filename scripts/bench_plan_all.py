"""Benchmark: `apprafter plan --all` over a monorepo (N apps x 2 environments, the base from git) vs `render --all`
of both sides (the working tree and a checkout of the base), interleaved, medians. The goal is <= 1.3x.

Usage: .venv/bin/python scripts/bench_plan_all.py [--apps 100] [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchlib import timed_cpu

APPRAFTER = [str(Path(sys.executable).parent / "apprafter")]


def app(name: str, network: str = "internal", tag: str = "1.0.0", needs: bool = False) -> str:
    need = "\t\tneeds: pg: {}\n" if needs else ""
    return (f'apiVersion: "apprafter.io/v1alpha1"\nkind: "Application"\nmetadata: name: "{name}"\nspec: {{\n'
            f'\tbase: {{\n\t\timage: "ghcr.io/acme/{name}:{tag}"\n\t\texpose: {{port: 8080, network: "{network}"}}\n'
            f'{need}\t\tenv: LOG_LEVEL: "info"\n\t}}\n\tenvironments: {{dev: {{}}, prod: replicas: 2}}\n}}\n')


def write(root: Path, name: str, text: str) -> None:
    path = root / "apps" / name / "apprafter" / "Application.cue"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.com", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@example.com"}
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, env=env)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--apps", type=int, default=100)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-plan-all-") as tmp:
        repo, base = Path(tmp) / "repo", Path(tmp) / "base"
        repo.mkdir()
        git(repo, "init", "-q", "-b", "main")
        for i in range(args.apps):
            write(repo, f"app-{i:03d}", app(f"app-{i:03d}", needs=i % 4 == 0))
        git(repo, "add", ".")
        git(repo, "commit", "-qm", "base")
        git(repo, "worktree", "add", "-q", "--detach", str(base), "main")
        for i in range(0, args.apps, 10):  # a tenth gated, a tenth soft
            write(repo, f"app-{i:03d}", app(f"app-{i:03d}", network="public", needs=i % 4 == 0))
            write(repo, f"app-{i + 1:03d}", app(f"app-{i + 1:03d}", tag="1.1.0", needs=(i + 1) % 4 == 0))
        plan = [*APPRAFTER, "plan", "--all", "apps", "--from", "git:main", "-o", "json"]
        plan_wall, plan_cpu, render_wall, render_cpu = [], [], [], []
        for _ in range(args.runs):
            wall, cpu = timed_cpu(plan, cwd=repo)
            plan_wall.append(wall)
            plan_cpu.append(cpu)
            new_wall, new_cpu = timed_cpu([*APPRAFTER, "render", "--all", str(repo / "apps")])
            old_wall, old_cpu = timed_cpu([*APPRAFTER, "render", "--all", str(base / "apps")])
            render_wall.append(new_wall + old_wall)
            render_cpu.append(new_cpu + old_cpu)
        p, r = statistics.median(plan_wall), statistics.median(render_wall)
        pc, rc = statistics.median(plan_cpu), statistics.median(render_cpu)
        print(f"load average {os.getloadavg()[0]:.1f}; {args.apps} apps x 2 environments, {args.runs} runs, medians")
        print(f"plan --all --from git:main: wall {p:.2f} s, CPU {pc:.2f} s | render --all of both sides: wall "
              f"{r:.2f} s, CPU {rc:.2f} s | ratio {p / r:.2f}x wall, {pc / rc:.2f}x CPU (goal <= 1.3x)")


if __name__ == "__main__":
    main()
