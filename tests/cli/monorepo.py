"""A generated monorepo in a real git repository: N apps on the base branch, then edits in the working tree."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.renderer.helpers import write_app


def app_text(name: str, *, network: str = "internal", tag: str = "1.0.0", needs: str = "", envs: str = "dev, prod",
             extra: str = "") -> str:
    environments = ", ".join(f"{e.strip()}: {{}}" for e in envs.split(","))
    return (f'apiVersion: "apprafter.io/v1alpha1"\nkind: "Application"\nmetadata: name: "{name}"\n'
            f'spec: {{\n\tbase: {{\n\t\timage: "ghcr.io/acme/{name}:{tag}"\n'
            f'\t\texpose: {{port: 8080, network: "{network}"}}\n{needs}{extra}\t}}\n'
            f"\tenvironments: {{{environments}}}\n}}\n")


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=env).stdout


def base_repo(root: Path, count: int) -> Path:
    """A repository whose main holds apps/app-000 ... apps/app-<count-1>, each with dev and prod."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    for i in range(count):
        write_app(root / "apps" / f"app-{i:03d}", app_text(f"app-{i:03d}", needs="\t\tneeds: pg: {}\n"
                                                          if i % 5 == 0 else ""))
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "base")
    return root
