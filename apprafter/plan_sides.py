"""The two sides `apprafter plan` compares, read from a path (CUE or an Application CR) or a git revision.

One app: `git:<rev>[:<path>]` is the file at that revision (`None` when the revision does not have it: a first
deployment or a removal). A monorepo (`--all DIR`): every apprafter/Application.cue below DIR, keyed by the app's
directory below DIR, from the working tree, another directory, or DIR at a git revision (its files read with one
`git ls-tree` and one `git cat-file --batch`, then evaluated in one cue process like the working tree).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from renderer.errors import Problem, ToolFailure, UserError
from renderer.load import APP_DIR, APP_FILE, MAX_FILE_BYTES, LoadedApp

__all__ = ["CR_SUFFIXES", "GIT_PREFIX", "existing", "git", "keyed", "load_side", "load_tree", "top"]

CR_SUFFIXES = (".yaml", ".yml", ".json")
GIT_PREFIX = "git:"
GIT_TIMEOUT = 60
MAX_TREE_ENTRIES = 200_000  # what `render --all` looks at below a directory, at most
APP_SUFFIX = f"{APP_DIR}/{APP_FILE}"
REGULAR_MODES = ("100644", "100755")


def _read(path: Path) -> tuple[bytes, str]:
    """A CR file's bytes and its name for messages; never a byte of a file that resolves outside the directory
    it was named from (a symlink or '..'), never a FIFO or device."""
    from renderer import userfile

    display = userfile.shown(path)
    data = userfile.read_bytes(path, display=display, root=Path(userfile.absolute(path)).parent,
                               root_name="the directory it is named in")
    return data, display


def load_path(path: Path) -> LoadedApp:
    """A CUE file or directory (evaluated by cue), or a YAML/JSON Application CR."""
    from compatibility.inputs import parse_cr
    from renderer.load import load

    if path.suffix in CR_SUFFIXES and not path.is_dir():
        return parse_cr(*_read(path), strict_json=path.suffix == ".json")
    if path.is_dir() or path.suffix == ".cue":
        return load(path)
    raise UserError([Problem(str(path), 1, 1, "", "want a .cue file, a directory, a .yaml/.yml/.json "
                             "Application CR, or git:<rev>[:<path>]")])


def _app_file(path: Path) -> Path:
    """The file a path names, the way `render` finds it (without requiring it to exist now)."""
    path = Path(os.path.abspath(path))
    if path.suffix in (*CR_SUFFIXES, ".cue"):
        return path
    return path / APP_FILE if path.name == APP_DIR else path / APP_DIR / APP_FILE


def git(args: list[str], cwd: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=GIT_TIMEOUT, check=False,
                              input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL)
    except FileNotFoundError:
        raise ToolFailure("git not found: install git to plan against git:<rev>") from None
    except subprocess.TimeoutExpired:
        raise ToolFailure(f"git did not answer within {GIT_TIMEOUT}s") from None


def _revision(spec: str) -> str:
    rev = spec[len(GIT_PREFIX):].partition(":")[0]
    if not rev or rev.startswith("-") or any(c.isspace() for c in rev):
        raise UserError([Problem(spec, 1, 1, "", "want git:<rev>[:<path>] with a revision such as origin/main")])
    return rev


def existing(path: Path) -> Path:
    """path, or its nearest ancestor that exists (a planned path may be gone: a removal)."""
    path = Path(os.path.abspath(path))
    while not path.is_dir() and path != path.parent:
        path = path.parent
    return path


def top(spec: str, where: Path) -> Path:
    """The root of the git repository that holds `where` (the planned path), or UserError naming `spec`."""
    from renderer import userfile

    found = git(["rev-parse", "--show-toplevel"], existing(where))
    if found.returncode != 0:
        raise UserError([Problem(spec, 1, 1, "", f"{userfile.shown(where)} is not inside a git repository")])
    return Path(os.path.realpath(found.stdout.decode().strip()))


def _commit(where: str, rev: str, root: Path) -> None:
    """UserError unless `rev` names a commit (a typo must not read as "nothing there": a first deployment)."""
    if git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], root).returncode != 0:
        raise UserError([Problem(where, 1, 1, "", f"unknown revision {rev!r} (is it fetched? a shallow clone "
                                 "needs fetch-depth: 0)")])


def _inside(spec: str, root: Path, target: Path) -> str:
    """target's path relative to the repository root (refused outside it)."""
    real = Path(os.path.realpath(target))
    if real != root and root not in real.parents:
        raise UserError([Problem(spec, 1, 1, "", f"{target} is outside the repository {root}")])
    return real.relative_to(root).as_posix()


def _evaluate_text(data: bytes, display: str) -> LoadedApp:
    """A CUE Application given as bytes (read from git), evaluated as `render` evaluates a file."""
    from renderer import userfile
    from renderer.load import load

    text = userfile.decode_text(data, display)
    with tempfile.TemporaryDirectory(prefix="apprafter-plan-") as tmp:
        file = Path(tmp) / APP_DIR / APP_FILE
        file.parent.mkdir()
        file.write_text(text, encoding="utf-8")
        try:
            app = load(file, Path(tmp))
        except UserError as e:
            raise UserError([p._replace(file=display) if p.file.startswith(tmp) or p.file == str(file)
                             else p for p in e.problems]) from None
    return app._replace(source=app.source.replace(display=display))


def load_git(spec: str, other: str | None) -> LoadedApp | None:
    """`git:<rev>[:<path>]`: the Application at <path> (else the other side's path, else .) at revision <rev>;
    None when the revision has no such file."""
    from compatibility.inputs import parse_cr

    rev = _revision(spec)
    rel_arg = spec[len(GIT_PREFIX):].partition(":")[2]
    default = (other[len(GIT_PREFIX):].partition(":")[2] if other.startswith(GIT_PREFIX) else other) if other else ""
    default = default or "."
    target = _app_file(Path(rel_arg or default))
    root = top(spec, target.parent)
    rel = _inside(spec, root, target.parent) + "/" + target.name
    rel = rel.removeprefix("./")
    display = f"git:{rev}:{rel}"
    _commit(display, rev, root)
    if git(["cat-file", "-e", f"{rev}:{rel}"], root).returncode != 0:
        return None
    shown = git(["show", f"{rev}:{rel}"], root)
    if shown.returncode != 0:
        message = shown.stderr.decode(errors="replace").strip().splitlines()
        raise UserError([Problem(display, 1, 1, "", message[0] if message else "git show failed")])
    if len(shown.stdout) > MAX_FILE_BYTES:
        raise UserError([Problem(display, 1, 1, "", f"file larger than {MAX_FILE_BYTES} bytes")])
    if target.suffix in CR_SUFFIXES:
        return parse_cr(shown.stdout, display, strict_json=target.suffix == ".json")
    return _evaluate_text(shown.stdout, display)


def load_side(spec: str, other: str | None) -> LoadedApp | None:
    """One side of a one-app plan (None: a git revision without the file)."""
    return load_git(spec, other) if spec.startswith(GIT_PREFIX) else load_path(Path(spec))


def _key(app: LoadedApp, root: Path) -> str:
    """The app's directory below the planned one, as a POSIX path ("." for the directory itself)."""
    return Path(os.path.relpath(app.source.path.parent.parent, root)).as_posix()


def keyed(apps: list[LoadedApp], root: Path) -> dict[str, LoadedApp]:
    """The apps by their directory below root."""
    return {_key(app, Path(os.path.abspath(root))): app for app in apps}


def load_tree(spec: str, directory: Path) -> tuple[dict[str, LoadedApp], list[Problem]]:
    """Every app of one side of a monorepo plan: DIR in the working tree (spec "."), another directory, or
    `git:<rev>` (DIR at that revision); keyed by the app's directory below DIR. No app at all is an empty side
    (every app of the other side is then new, or removed)."""
    from renderer.render import discover, load_many

    if spec.startswith(GIT_PREFIX):
        if ":" in spec[len(GIT_PREFIX):]:
            raise UserError([Problem(spec, 1, 1, "", "with --all DIR, name the revision alone: git:<rev> (DIR is "
                                     "read at that revision)")])
        return _git_tree(spec, directory)
    root = Path(os.path.abspath(spec))
    if not root.is_dir():
        raise UserError([Problem(spec, 1, 1, "", "with --all, want a directory or git:<rev>")])
    apps, problems = load_many(discover(root), root)
    return keyed(apps, root), problems


def _git_tree(spec: str, directory: Path) -> tuple[dict[str, LoadedApp], list[Problem]]:
    from renderer import userfile
    from renderer.render import discover, load_many

    rev = _revision(spec)
    root = top(spec, directory)
    _commit(spec, rev, root)
    prefix = _inside(spec, root, directory)
    listed = git(["ls-tree", "-r", "-z", "--full-tree", rev, *([] if prefix == "." else ["--", prefix])], root)
    if listed.returncode != 0:
        message = listed.stderr.decode(errors="replace").strip().splitlines()
        raise UserError([Problem(spec, 1, 1, "", message[0] if message else "git ls-tree failed")])
    records = listed.stdout.split(b"\0")
    if len(records) > MAX_TREE_ENTRIES:
        raise UserError([Problem(spec, 1, 1, "", f"more than {MAX_TREE_ENTRIES} files below {prefix} at {rev}: "
                                 "point --all at the apps' directory")])
    wanted: list[tuple[str, str]] = []  # (object id, path)
    problems: list[Problem] = []
    for record in records:
        meta, _, raw = record.partition(b"\t")
        path = raw.decode(errors="replace")
        if not (path == APP_SUFFIX or path.endswith("/" + APP_SUFFIX)):
            continue
        mode, kind, oid = meta.decode().split()
        if kind != "blob" or mode not in REGULAR_MODES:
            problems.append(Problem(f"git:{rev}:{path}", 1, 1, "", "not a regular file at this revision "
                                    "(a symlink or submodule): refused"))
            continue
        wanted.append((oid, path))
    blobs = _blobs(spec, root, [oid for oid, _ in wanted])
    with tempfile.TemporaryDirectory(prefix="apprafter-plan-all-") as tmp:
        for (_, path), data in zip(wanted, blobs, strict=True):
            if len(data) > MAX_FILE_BYTES:
                problems.append(Problem(f"git:{rev}:{path}", 1, 1, "", f"file larger than {MAX_FILE_BYTES} bytes"))
                continue
            file = Path(tmp, path)
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_bytes(data)
        base = Path(tmp, prefix)
        found = discover(base) if base.is_dir() else []
        apps, loading = load_many(found, base)
        renames = [(p.rstrip("/") + "/", f"git:{rev}:") for p in {tmp, userfile.shown(Path(tmp))}]

        def renamed(name: str) -> str:
            for old, new in renames:
                if name.startswith(old):
                    return new + name[len(old):]
            return name

        problems += [p._replace(file=renamed(p.file)) for p in loading]
        keyed = {_key(app, base): app._replace(source=app.source.replace(display=renamed(app.source.display)))
                 for app in apps}
    return keyed, problems


def _blobs(spec: str, root: Path, oids: list[str]) -> list[bytes]:
    """The contents of these blobs, in order, from one `git cat-file --batch`."""
    if not oids:
        return []
    out = git(["cat-file", "--batch"], root, stdin="".join(f"{oid}\n" for oid in oids).encode())
    if out.returncode != 0:
        raise ToolFailure(f"git cat-file failed: {out.stderr.decode(errors='replace').strip()[:200]}")
    data, at, blobs = out.stdout, 0, []
    for _ in oids:
        end = data.index(b"\n", at)
        header = data[at:end].split()
        if len(header) != 3:
            raise UserError([Problem(spec, 1, 1, "", f"git cat-file: {data[at:end].decode(errors='replace')}")])
        size = int(header[2])
        blobs.append(data[end + 1:end + 1 + size])
        at = end + 1 + size + 1
    return blobs
