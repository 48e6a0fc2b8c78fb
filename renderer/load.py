"""Finds a user's apprafter/Application.cue inside its repository, injects the schema, and evaluates it with cue."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

from renderer.cue import run_cue
from renderer.cue_errors import to_problems
from renderer.errors import Problem, ToolFailure, UserError
from renderer.positions import PositionIndex

APP_DIR = "apprafter"
APP_FILE = "Application.cue"
MAX_FILE_BYTES = 1 << 20
INJECTED_TOP_LEVEL = frozenset({"claim", "ipv6", "ipv4"})
DOCUMENT_KEYS = ("apiVersion", "kind", "metadata", "spec")
_PACKAGE = re.compile(r"^\s*package\s+([A-Za-z_][A-Za-z0-9_]*)", re.MULTILINE)
_DEFAULT_PACKAGE = "apprafter"


@dataclasses.dataclass(frozen=True)
class Source:
    """A user file read from inside its root, with what the injection needs to know about it."""

    path: Path
    display: str
    text: str
    package: str | None

    @functools.cached_property
    def index(self) -> PositionIndex:
        """Built once per source: validation and positions ask for it many times per render."""
        return PositionIndex(self.text)

    def evaluable_text(self) -> tuple[str, int]:
        """The text cue sees and how far line 1 shifted (a package clause is added in place)."""
        if self.package:
            return self.text, 0
        prefix = f"package {_DEFAULT_PACKAGE}, "
        return prefix + self.text, len(prefix)


@dataclasses.dataclass(frozen=True)
class LoadedApp:
    """An evaluated Application document and where it came from."""

    source: Source
    document: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.document["metadata"]["name"])


def schema_text() -> str:
    return resources.files("renderer").joinpath("schema/application.cue").read_text()


def inject_text() -> str:
    return resources.files("renderer").joinpath("schema/inject.cue").read_text()


def locate(path: Path, root: Path | None = None) -> tuple[Path, Path]:
    """Return (application file, root) for a repo root, an apprafter/ dir, or the file itself."""
    path = Path(os.path.abspath(path))
    if path.is_dir():
        candidate = path / APP_FILE if path.name == APP_DIR else path / APP_DIR / APP_FILE
        guessed_root = path.parent if path.name == APP_DIR else path
    else:
        candidate = path
        guessed_root = path.parent.parent if path.parent.name == APP_DIR else path.parent
    root = Path(os.path.abspath(root)) if root else guessed_root
    if not candidate.exists() and not candidate.is_symlink():
        raise UserError([Problem(_display(candidate), 1, 1, "", f"no {APP_DIR}/{APP_FILE} here")])
    return candidate, root


def _display(path: Path) -> str:
    rel = os.path.relpath(path)
    return str(path) if rel.startswith("..") else rel


def read_source(path: Path, root: Path) -> Source:
    """Read the user file, refusing anything that leaves `root` (symlinks, `..`) or is too large."""
    display = _display(path)
    real, real_root = Path(os.path.realpath(path)), Path(os.path.realpath(root))
    if real != real_root and real_root not in real.parents:
        raise UserError([Problem(display, 1, 1, "", "refused: the file resolves outside the repository root "
                                 "(a symlink or '..' leaves it)")])
    if not real.exists() and path.is_symlink():
        raise UserError([Problem(display, 1, 1, "", "refused: the file is a symlink that does not resolve to a "
                                 "file inside the repository")])
    if not real.is_file():
        raise UserError([Problem(display, 1, 1, "", "not a regular file")])
    if real.stat().st_size > MAX_FILE_BYTES:
        raise UserError([Problem(display, 1, 1, "", f"file larger than {MAX_FILE_BYTES} bytes")])
    try:
        text = real.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError([Problem(display, 1, 1, "", "file is not UTF-8 text")]) from None
    problems = [Problem(display, *_line_col(text, m.start()), "", "file embedding (@embed/@extern) is not "
                        "allowed in Application.cue") for m in re.finditer(r"@(embed|extern)\b", text)]
    if problems:
        raise UserError(problems)
    m = _PACKAGE.search(_strip_comments(text))
    return Source(real, display, text, m.group(1) if m else None)


def _strip_comments(text: str) -> str:
    """Blank out // comments (keeping offsets) so a commented-out package clause is not taken."""
    return re.sub(r"//[^\n]*", lambda m: " " * len(m.group()), text)


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def write_package(directory: Path, source: Source) -> int:
    """Write the user file and the injected files as one package into directory; return the line-1 shift."""
    text, shift = source.evaluable_text()
    package = source.package or _DEFAULT_PACKAGE
    (directory / APP_FILE).write_text(text)
    (directory / "zz_apprafter_schema.cue").write_text(f"package {package}\n\n{schema_text()}")
    (directory / "zz_apprafter_inject.cue").write_text(f"package {package}\n\n{inject_text()}")
    return shift


def _finish(source: Source, exported: dict[str, Any]) -> LoadedApp:
    """Drop injected names; anything else at top level besides the document keys is the user's typo."""
    index = source.index
    problems = [
        Problem(source.display, *index.find((key,)), key, "field not allowed at top level "
                "(an Application has apiVersion, kind, metadata, spec)")
        for key in exported if key not in INJECTED_TOP_LEVEL and key not in DOCUMENT_KEYS
    ]
    if problems:
        raise UserError(problems)
    return LoadedApp(source, {k: exported[k] for k in DOCUMENT_KEYS if k in exported})


def evaluate(source: Source) -> LoadedApp:
    """Evaluate one Application with the real cue; UserError with positions on bad input."""
    with tempfile.TemporaryDirectory(prefix="apprafter-render-") as tmp:
        work = Path(tmp)
        shift = write_package(work, source)
        result = run_cue(["export", "--out", "json", "--all-errors", APP_FILE,
                          "zz_apprafter_schema.cue", "zz_apprafter_inject.cue"], cwd=work)
    if result.returncode != 0:
        problems = to_problems(result.stderr, APP_FILE, source.display, source.index, shift)
        if not problems:
            raise ToolFailure(f"cue export failed without an error message (exit {result.returncode})")
        raise UserError(problems)
    try:
        exported = json.loads(result.stdout)
    except json.JSONDecodeError as e:
        raise ToolFailure(f"cue export printed something that is not JSON: {e}") from e
    return _finish(source, exported)


def load(path: Path, root: Path | None = None) -> LoadedApp:
    """Locate, read and evaluate the Application at `path`."""
    file, root = locate(path, root)
    return evaluate(read_source(file, root))


def evaluate_many(sources: list[Source]) -> list[LoadedApp | UserError]:
    """Evaluate many Applications in one cue process (a module importing one package per app).

    Apps whose evaluation fails are evaluated again one by one, so each gets its own error positions
    and one broken app never hides the others.
    """
    if not sources:
        return []
    with tempfile.TemporaryDirectory(prefix="apprafter-render-all-") as tmp:
        work = Path(tmp)
        (work / "cue.mod").mkdir()
        (work / "cue.mod" / "module.cue").write_text(
            'module: "apprafter.local/all"\nlanguage: version: "v0.9.0"\n')
        imports, fields = [], []
        for i, source in enumerate(sources):
            pkg_dir = work / "apps" / f"a{i}"
            pkg_dir.mkdir(parents=True)
            write_package(pkg_dir, source)
            package = source.package or _DEFAULT_PACKAGE
            imports.append(f'import a{i} "apprafter.local/all/apps/a{i}:{package}"')
            fields.append(f'"a{i}": a{i}')
        (work / "all.cue").write_text("package all\n\n" + "\n".join(imports) + "\n\nout: {\n\t"
                                      + "\n\t".join(fields) + "\n}\n")
        result = run_cue(["export", "--out", "json", "-e", "out", "."], cwd=work,
                         timeout_s=None, memory_mb=None)
    if result.returncode != 0:
        return [_evaluate_or_error(s) for s in sources]
    exported = json.loads(result.stdout)
    out: list[LoadedApp | UserError] = []
    for i, source in enumerate(sources):
        try:
            out.append(_finish(source, exported[f"a{i}"]))
        except UserError as e:
            out.append(e)
    return out


def _evaluate_or_error(source: Source) -> LoadedApp | UserError:
    try:
        return evaluate(source)
    except UserError as e:
        return e
