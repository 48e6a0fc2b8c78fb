"""`plan`'s default --from: the merge-base of HEAD with the repository's default branch, as `git:<commit>`.

The default branch is what `origin/HEAD` names (`git symbolic-ref refs/remotes/origin/HEAD`, set by `git clone` or
`git remote set-head origin --auto`), else a local `main`, else a local `master`. On the default branch itself the
merge-base is HEAD: the plan is then the working tree's uncommitted change, as `terraform plan` shows what is not
applied yet.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from apprafter.plan_sides import GIT_PREFIX, existing, git
from renderer.errors import Problem, UserError

__all__ = ["Base", "default_base", "default_branch"]

FALLBACK_BRANCHES = ("main", "master")
ORIGIN_HEAD = "refs/remotes/origin/HEAD"


class Base(NamedTuple):
    """The revision a plan compares with, and how it was found (said on stderr)."""

    spec: str  # git:<abbreviated commit>
    how: str


def default_branch(origin_head: str | None, local: set[str]) -> str | None:
    """origin/HEAD's branch (`origin/main`), else the first of FALLBACK_BRANCHES that exists locally."""
    if origin_head:
        return origin_head.removeprefix("refs/remotes/")
    return next((name for name in FALLBACK_BRANCHES if name in local), None)


def _out(args: list[str], where: Path) -> str | None:
    found = git(args, where)
    return found.stdout.decode().strip() if found.returncode == 0 else None


def default_base(path: Path) -> Base:
    """The merge-base of HEAD and the default branch in the repository holding `path`; UserError (naming what to
    pass instead) outside a repository, without a default branch, or without a common ancestor."""
    from renderer import userfile

    where, shown = existing(path), userfile.shown(path)
    if _out(["rev-parse", "--show-toplevel"], where) is None:
        raise UserError([Problem(shown, 0, 0, "", "not inside a git repository, so there is no default --from: pass "
                                 "--from OLD (a directory, a .cue file, an Application CR or git:<rev>)")])
    local = {name for name in FALLBACK_BRANCHES
             if _out(["rev-parse", "--verify", "--quiet", f"refs/heads/{name}"], where) is not None}
    branch = default_branch(_out(["symbolic-ref", "--quiet", ORIGIN_HEAD], where), local)
    if branch is None:
        raise UserError([Problem(shown, 0, 0, "", f"no default branch to plan against ({ORIGIN_HEAD} is not set, no "
                                 f"local {' or '.join(FALLBACK_BRANCHES)}): pass --from git:<rev>, or run `git "
                                 "remote set-head origin --auto`")])
    commit = _out(["merge-base", "HEAD", branch], where)
    if not commit:
        raise UserError([Problem(shown, 0, 0, "", f"HEAD and {branch} have no common commit: pass --from "
                                 "git:<rev>")])
    short = _out(["rev-parse", "--short", commit], where) or commit
    return Base(f"{GIT_PREFIX}{short}", f"the merge-base of HEAD and {branch}")
