"""Where a user's app file is: `apprafter/Application.cue` below the repository root, found from the root, the
apprafter/ directory or the file; and, when it is not there, what is (a misplaced file, another name); a file the
plugin would never read (another .cue file beside it, a misspelt `.apprafter/` directory) is refused by name."""

from __future__ import annotations

from pathlib import Path

from renderer import userfile
from renderer.errors import Problem, UserError

__all__ = ["APP_DIR", "APP_FILE", "locate"]

APP_DIR = "apprafter"
APP_FILE = "Application.cue"


def locate(path: Path, root: Path | None = None) -> tuple[Path, Path]:
    """Return (application file, root) for a repo root, an apprafter/ dir, or the file itself."""
    path = Path(userfile.absolute(path))
    if path.is_dir():
        candidate = path / APP_FILE if path.name == APP_DIR else path / APP_DIR / APP_FILE
        guessed_root = path.parent if path.name == APP_DIR else path
    else:
        candidate = path
        guessed_root = path.parent.parent if path.parent.name == APP_DIR else path.parent
    root = Path(userfile.absolute(root)) if root else guessed_root
    if not candidate.exists() and not candidate.is_symlink():
        raise UserError([_not_here(path, candidate)])
    if candidate.parent.name != APP_DIR and _misspelt(candidate.parent.name):
        raise UserError([Problem(userfile.shown(candidate), 0, 0, "", f"not where the plugin reads an app: the app "
                                 f"file is {APP_DIR}/{APP_FILE} at the repository root (the directory is named "
                                 f"{candidate.parent.name!r}): git mv {userfile.shown(candidate.parent)} "
                                 f"{userfile.shown(candidate.parent.parent / APP_DIR)}")])
    if candidate.parent.name == APP_DIR and candidate.name == APP_FILE:
        stray = sorted(p for p in candidate.parent.glob("*.cue") if p.name != APP_FILE)
        if stray:
            raise UserError([Problem(userfile.shown(p), 0, 0, "", f"not read: an app is the one file "
                                     f"{APP_DIR}/{APP_FILE} (cue would not see this file's fields): move what it "
                                     f"holds into {APP_FILE}, or the file out of {APP_DIR}/") for p in stray[:5]])
    return candidate, root


def _misspelt(name: str) -> bool:
    """Whether a directory name reads as apprafter/ misspelt (`.apprafter`, `Apprafter`, `apprafter.d`)."""
    return name.lower().strip("._-").removesuffix(".d") == APP_DIR


def _not_here(path: Path, candidate: Path) -> Problem:
    """Where the app file must be, named at what is there (never at a position in a file that does not exist)."""
    if candidate == path:
        return Problem(userfile.shown(path), 0, 0, "", "no such file")
    stray = path / APP_FILE
    if path.name != APP_DIR and stray.is_file():
        target = userfile.shown(path / APP_DIR)
        return Problem(userfile.shown(stray), 0, 0, "", f"misplaced: the app file is {APP_DIR}/{APP_FILE}, in an "
                       f"{APP_DIR}/ directory at the repository root (where the plugin looks): mkdir -p {target} && "
                       f"git mv {userfile.shown(stray)} {target}/")
    near = [d for d in path.iterdir() if d.is_dir() and _misspelt(d.name) and (d / APP_FILE).is_file()] \
        if path.is_dir() and path.name != APP_DIR else []
    if near:
        return Problem(userfile.shown(near[0] / APP_FILE), 0, 0, "", f"not where the plugin reads an app: the "
                       f"directory is named {APP_DIR}/, not {near[0].name}/: git mv {userfile.shown(near[0])} "
                       f"{userfile.shown(path / APP_DIR)}")
    folder = path if path.name == APP_DIR else path / APP_DIR
    others = sorted(p.name for p in folder.glob("*.cue")) if folder.is_dir() else []
    if others:
        return Problem(userfile.shown(folder), 0, 0, "", f"no {APP_FILE} here (found {', '.join(others[:5])}): the "
                       f"app file is named {APP_FILE}")
    return Problem(userfile.shown(path), 0, 0, "", f"no {APP_DIR}/{APP_FILE} here")
