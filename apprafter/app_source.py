"""Where Argo CD finds an app the user points at in a checkout: the repository's URL (its `origin`, without a login),
the app's directory in it and the revision to follow (the remote's default branch), read with git."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from renderer.argocd_app import Source, plain_repo_url
from toolchain.errors import Problem, UserError

__all__ = ["git", "source_of"]

GIT_TIMEOUT = 30.0


def git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`git ARGS` in `cwd`, its output as text (never an editor or a pager, no prompt for a login)."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "GIT_EDITOR": "true"}
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=GIT_TIMEOUT,
                              check=False, env=env)
    except FileNotFoundError:
        raise UserError([Problem(str(cwd), 0, 0, "", "git is not on PATH: install git")]) from None


def _fail(where: Path, message: str) -> UserError:
    return UserError([Problem(str(where), 0, 0, "", message)])


def _revision(top: Path) -> str:
    """origin's default branch (origin/HEAD), else the branch checked out, else HEAD."""
    head = git(top, "symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD")
    if head.returncode == 0 and head.stdout.strip().startswith("origin/"):
        return head.stdout.strip().removeprefix("origin/")
    branch = git(top, "symbolic-ref", "--quiet", "--short", "HEAD")
    return branch.stdout.strip() if branch.returncode == 0 and branch.stdout.strip() else "HEAD"


def source_of(app_dir: Path, repo: str | None, revision: str | None) -> tuple[Source, list[str]]:
    """The Source of the app whose `apprafter/` directory is in `app_dir`, and notes for the user (a login left
    out of the URL). `repo`/`revision` given by the user win over what git says."""
    top_run = git(app_dir, "rev-parse", "--show-toplevel")
    if top_run.returncode != 0:
        raise _fail(app_dir, "not in a git repository: Argo CD deploys from git (git init, commit and push "
                             "first, or pass --repo URL and run it from a checkout of that repository)")
    top = Path(top_run.stdout.strip()).resolve()
    path = app_dir.resolve().relative_to(top).as_posix() if app_dir.resolve() != top else "."
    notes: list[str] = []
    if repo is None:
        remote = git(top, "remote", "get-url", "origin")
        if remote.returncode != 0 or not remote.stdout.strip():
            raise _fail(top, "the repository has no remote `origin`: push it somewhere Argo CD can read, or pass "
                             "--repo URL")
        repo = remote.stdout.strip()
    url = plain_repo_url(repo)
    if url != repo.strip():
        notes.append("the login in the repository URL is left out: Argo CD reads a private repository with the "
                     "credential a platform administrator adds (`apprafter repo creds add`)")
    return Source(url, path, revision or _revision(top)), notes
