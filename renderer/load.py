"""Finds a user's apprafter/Application.cue inside its repository and evaluates it with cue against the schema.

The schema lives in its own package of a throwaway CUE module, where the user's file cannot reopen its
definitions (a user's `#Workload: {hostNetwork: bool}` is a definition of the user's own package, not an
extension of ours). The user's package gets only the injected `claim` binding and `ipv6`/`ipv4`; a third
package unifies `schema.#Application` with the user's regular top-level fields, so a top-level typo is
an unknown field of a closed definition.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from renderer import userfile
from renderer.cue import Budget, run_cue
from renderer.errors import Problem, ToolFailure, UserError
from renderer.fieldpos import Positions
from renderer.scratch import scratch_dir
from renderer.settings import TIMEOUT_ENV, limits

if TYPE_CHECKING:
    from renderer.positions import PositionIndex

__all__ = [
    "APP_DIR", "APP_FILE", "DOCUMENT_KEYS", "MAX_FILE_BYTES", "LoadedApp", "Source", "evaluate", "evaluate_many",
    "load", "locate", "read_source"
]

# The package's own files, read from disk (importlib.resources would cost the plugin ~10 ms of imports).
SCHEMA_DIR = Path(__file__).resolve().parent / "schema"
APP_DIR = "apprafter"
APP_FILE = "Application.cue"
MAX_FILE_BYTES = userfile.MAX_BYTES
INJECTED_TOP_LEVEL = frozenset({"claim", "ipv6", "ipv4"})
DOCUMENT_KEYS = ("apiVersion", "kind", "metadata", "spec")
MODULE = "apprafter.local/render"
_PACKAGE = re.compile(r"^\s*package\s+([A-Za-z_][A-Za-z0-9_]*)", re.MULTILINE)
_DEFAULT_PACKAGE = "apprafter"
_USER_FILE = f"app/{APP_FILE}"  # where the user's file sits in the module of a single evaluation


def _budget_end() -> float:
    return time.monotonic() + limits().timeout_s


class Source:  # a plain class, not a dataclass: `dataclasses` costs the plugin's start-up ~6 ms of imports
    """A user file read from inside its root, with what the injection needs to know about it.

    `positions` says where each field is written when the reader knows it already (a YAML CR); otherwise
    the CUE text is indexed when a problem first needs a position, once. Its time budget
    (APPRAFTER_CUE_TIMEOUT) starts when it is made and covers cue and the Python work on it.
    """

    __slots__ = ("_index", "budget_ends", "display", "package", "path", "positions", "text")

    def __init__(self, path: Path, display: str, text: str, package: str | None,
                 positions: Positions | None = None, budget_ends: float | None = None) -> None:
        self.path, self.display, self.text, self.package, self.positions = path, display, text, package, positions
        self.budget_ends = _budget_end() if budget_ends is None else budget_ends
        self._index: PositionIndex | None = None

    def __repr__(self) -> str:
        return f"Source({self.display!r}, package={self.package!r})"

    def replace(self, *, display: str | None = None, fresh_budget: bool = False) -> Source:
        """The same source under another name (e.g. git:<rev>:<path> for a file read from git), or with a new
        time budget (an app evaluated again alone after a batch)."""
        return Source(self.path, self.display if display is None else display, self.text, self.package,
                      self.positions, None if fresh_budget else self.budget_ends)

    @property
    def index(self) -> Positions:
        """Where each field is written: the reader's positions, else the CUE text's index (built once)."""
        return self.positions if self.positions is not None else self.cue_index

    @property
    def cue_index(self) -> PositionIndex:
        """The CUE text's index: labels, and where env values are written (for redaction); built on first use."""
        if self._index is None:
            from renderer.positions import PositionIndex  # only a problem needs it: valid apps never pay

            self._index = PositionIndex(self.text, self.check_time)
        return self._index

    def remaining(self) -> float:
        return self.budget_ends - time.monotonic()

    def check_time(self) -> None:
        if self.remaining() <= 0:
            raise Budget(f"working on {self.display} did not finish within the time budget and was stopped "
                         f"(raise {TIMEOUT_ENV}, or simplify the input)")

    def evaluable_text(self) -> tuple[str, int]:
        """The text cue sees and how far line 1 shifted (a package clause is added in place)."""
        if self.package:
            return self.text, 0
        prefix = f"package {_DEFAULT_PACKAGE}, "
        return prefix + self.text, len(prefix)


class LoadedApp(NamedTuple):
    """An evaluated Application document and where it came from."""

    source: Source
    document: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.document["metadata"]["name"])


def schema_text() -> str:
    return (SCHEMA_DIR / "application.cue").read_text()


def inject_text() -> str:
    return (SCHEMA_DIR / "inject.cue").read_text()


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
        raise UserError([Problem(userfile.shown(candidate), 1, 1, "", f"no {APP_DIR}/{APP_FILE} here")])
    return candidate, root


def read_source(path: Path, root: Path) -> Source:
    """Read the user file, refusing anything that leaves `root` (symlinks, `..`), is not a regular file,
    or is too large."""
    display = userfile.shown(path)
    text = userfile.read_text(path, display=display, root=root, root_name="the repository root")
    problems = [Problem(display, *userfile.line_col(text, m.start()), "", "file embedding (@embed/@extern) is "
                        "not allowed in Application.cue") for m in re.finditer(r"@(embed|extern)\b", text)]
    if problems:
        raise UserError(problems)
    m = _PACKAGE.search(_strip_comments(text))
    return Source(Path(userfile.absolute(path)), display, text, m.group(1) if m else None)


def _strip_comments(text: str) -> str:
    """Blank out // comments (keeping offsets) so a commented-out package clause is not taken."""
    return re.sub(r"//[^\n]*", lambda m: " " * len(m.group()), text)


def _write_module(work: Path) -> None:
    """cue.mod and the schema package (which only we write)."""
    from toolchain.pins import pins

    (work / "cue.mod").mkdir()
    # The language version of the oldest cue we accept: every supported cue evaluates the module the same way.
    (work / "cue.mod" / "module.cue").write_text(
        f'module: "{MODULE}"\nlanguage: version: "{pins()["CUE_OLDEST_VERSION"]}"\n')
    (work / "schema").mkdir()
    (work / "schema" / "schema.cue").write_text(f"package schema\n\n{schema_text()}")


def write_package(directory: Path, source: Source) -> int:
    """Write the user file and the injected bindings as one package into directory; return the line-1 shift."""
    text, shift = source.evaluable_text()
    package = source.package or _DEFAULT_PACKAGE
    directory.mkdir(parents=True)
    (directory / APP_FILE).write_text(text)
    (directory / "zz_apprafter_inject.cue").write_text(f'package {package}\n\nimport schema "{MODULE}/schema"\n\n'
                                                       f"{inject_text()}")
    return shift


def _binding(alias: str) -> str:
    """The Application a user package stands for: the schema unified with its regular top-level fields."""
    skip = " && ".join(f'k != "{name}"' for name in sorted(INJECTED_TOP_LEVEL))
    return f"schema.#Application & {{for k, v in {alias} if {skip} {{(k): v}}}}"


def _imports(pairs: list[tuple[str, str]]) -> str:
    lines = [f'\tschema "{MODULE}/schema"'] + [f'\t{alias} "{MODULE}/{path}"' for alias, path in pairs]
    return "import (\n" + "\n".join(lines) + "\n)\n"


def write_module(work: Path, source: Source) -> int:
    """The module one evaluation runs in (`cue export .` in work); returns the line-1 shift of the user file."""
    _write_module(work)
    shift = write_package(work / "app", source)
    package = source.package or _DEFAULT_PACKAGE
    (work / "check.cue").write_text(f"package check\n\n{_imports([('app', f'app:{package}')])}\n"
                                    f"{_binding('app')}\n")
    return shift


def evaluate(source: Source) -> LoadedApp:
    """Evaluate one Application with the real cue; UserError with positions on bad input."""
    with scratch_dir("apprafter-render-") as tmp:
        work = Path(tmp)
        shift = write_module(work, source)
        source.check_time()
        result = run_cue(["export", "--out", "json", "--all-errors", "."], cwd=work, timeout_s=source.remaining())
        if result.returncode != 0:
            from renderer.cue_errors import to_problems  # only a failed evaluation needs it
            from renderer.redact import Redactor

            # The env literals written in the file; a string cue computed is never shown (cue_errors).
            redactor = Redactor.of(source.cue_index.env_literals)
            problems = to_problems(result.stderr, _USER_FILE, source.display, lambda: source.cue_index, shift,
                                   redactor, source.text, schema=schema_text)
            if not problems:
                raise ToolFailure(f"cue export failed without an error message (exit {result.returncode})")
            raise UserError(problems)
    return _finish(source, _json(result.stdout, source))


def _json(stdout: str, source: Source) -> Any:
    try:
        return json.loads(stdout)
    except json.JSONDecodeError as e:
        raise ToolFailure(f"cue export printed something that is not JSON: {e}") from e
    except RecursionError:
        raise UserError([Problem(source.display, 1, 1, "", "the Application evaluates to values nested too "
                                 "deeply")]) from None


def _finish(source: Source, exported: Any) -> LoadedApp:
    """The document cue exported (the schema closed it: nothing else is at top level)."""
    if not isinstance(exported, dict) or not isinstance(exported.get("metadata"), dict):
        raise ToolFailure("cue export did not produce an Application document")
    return LoadedApp(source, {k: exported[k] for k in DOCUMENT_KEYS if k in exported})


def load(path: Path, root: Path | None = None) -> LoadedApp:
    """Locate, read and evaluate the Application at `path`."""
    file, root = locate(path, root)
    return evaluate(read_source(file, root))


def _budget_problem(source: Source, budget: Budget) -> UserError:
    """An app that exceeds its own budget in a batch: its problem, named at its file (the others go on)."""
    return UserError([Problem(source.display, 1, 1, "", str(budget))])


def _evaluate_or_error(source: Source) -> LoadedApp | UserError:
    """One app alone, with its own time and memory budget (a fresh one: the batch used up the first)."""
    try:
        return evaluate(source.replace(fresh_budget=True))
    except UserError as e:
        return e
    except Budget as e:
        return _budget_problem(source, e)


def _run_batch(sources: list[Source]) -> tuple[dict[str, Any] | None, str]:
    """cue export of many apps in one process: (exported per app key, "") or (None, cue's stderr)."""
    with scratch_dir("apprafter-render-all-") as tmp:
        work = Path(tmp)
        _write_module(work)
        pairs, fields = [], []
        for i, source in enumerate(sources):
            write_package(work / "apps" / f"a{i}", source)
            pairs.append((f"a{i}", f"apps/a{i}:{source.package or _DEFAULT_PACKAGE}"))
            fields.append(f'"a{i}": {_binding(f"a{i}")}')
        (work / "all.cue").write_text(f"package all\n\n{_imports(pairs)}\n" + "\n".join(fields) + "\n")
        result = run_cue(["export", "--out", "json", "."], cwd=work)
    if result.returncode != 0:
        return None, result.stderr
    exported: dict[str, Any] = _json(result.stdout, sources[0])
    return exported, ""


_BATCH_FILE = re.compile(r"apps/a(\d+)/")


def evaluate_many(sources: list[Source]) -> list[LoadedApp | UserError]:
    """Evaluate many Applications in one cue process (one package per app in one module).

    One app's failure never costs the others: apps that cue names in its errors are evaluated again alone
    (for their own error positions) and the rest in one more batch; when the batch runs out of its time or
    memory budget, which app did it is unknown, so each is evaluated alone within its own budget.
    """
    results: dict[int, LoadedApp | UserError] = {}
    pending = list(range(len(sources)))
    while pending:
        try:
            exported, stderr = _run_batch([sources[i] for i in pending])
        except Budget:
            results.update({i: _evaluate_or_error(sources[i]) for i in pending})
            break
        if exported is not None:
            for key, i in enumerate(pending):
                try:
                    results[i] = _finish(sources[i], exported[f"a{key}"])
                except UserError as e:
                    results[i] = e
            break
        named = {pending[int(m)] for m in _BATCH_FILE.findall(stderr) if int(m) < len(pending)}
        if not named:  # nothing to tell the apps apart by: each alone
            named = set(pending)
        results.update({i: _evaluate_or_error(sources[i]) for i in sorted(named)})
        pending = [i for i in pending if i not in named]
    return [results[i] for i in range(len(sources))]
