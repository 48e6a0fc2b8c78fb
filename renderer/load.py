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
from pathlib import Path

from renderer import userfile
from renderer.cue import Budget, run_cue
from renderer.errors import Problem, ToolFailure, UserError
from renderer.locate import APP_DIR, APP_FILE, locate
from renderer.scratch import scratch_dir
from renderer.source import DEFAULT_PACKAGE, LoadedApp, Source
from toolchain.record import TYPE_CHECKING
from toolchain.regex import lazy

if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "APP_DIR", "APP_FILE", "DOCUMENT_KEYS", "MAX_FILE_BYTES", "LoadedApp", "Source", "evaluate", "evaluate_many",
    "load", "locate", "read_source"
]

# The package's own files, read from disk (importlib.resources would cost the plugin ~10 ms of imports).
SCHEMA_DIR = Path(__file__).resolve().parent / "schema"
MAX_FILE_BYTES = userfile.MAX_BYTES
INJECTED_TOP_LEVEL = frozenset({"claim", "ipv6", "ipv4"})
DOCUMENT_KEYS = ("apiVersion", "kind", "metadata", "spec")
MODULE = "apprafter.local/render"
_PACKAGE = re.compile(r"^\s*package\s+([A-Za-z_][A-Za-z0-9_]*)", re.MULTILINE)

_USER_FILE = f"app/{APP_FILE}"  # where the user's file sits in the module of a single evaluation


def schema_text() -> str:
    return (SCHEMA_DIR / "application.cue").read_text()


def inject_text() -> str:
    return (SCHEMA_DIR / "inject.cue").read_text()


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
    package = source.package or DEFAULT_PACKAGE
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


def _check_package(source: Source, binding: str) -> str:
    """check.cue: the package `cue export .` exports, `binding` the Application it stands for."""
    return f"package check\n\n{_imports([('app', f'app:{source.package or DEFAULT_PACKAGE}')])}\n{binding}\n"


def write_module(work: Path, source: Source) -> int:
    """The module one evaluation runs in (`cue export .` in work); returns the line-1 shift of the user file."""
    _write_module(work)
    shift = write_package(work / "app", source)
    (work / "check.cue").write_text(_check_package(source, _binding("app")))
    return shift


_EXPORT = ["export", "--out", "json", "--all-errors", "."]


def evaluate(source: Source) -> LoadedApp:
    """Evaluate one Application with the real cue; UserError with positions on bad input, every problem of the
    file at once (renderer.recovery)."""
    with scratch_dir("apprafter-render-") as tmp:
        work = Path(tmp)
        shift = write_module(work, source)
        source.check_time()
        result = run_cue(_EXPORT, cwd=work, timeout_s=source.remaining())
        if result.returncode != 0:
            if not result.stderr.strip():
                raise ToolFailure(f"cue export failed without an error message (exit {result.returncode})")
            raise UserError(_every_problem(source, work, shift, result.stderr))
    return _finish(source, _json(result.stdout, source))


def _every_problem(source: Source, work: Path, shift: int, stderr: str) -> list[Problem]:
    """cue's problems of a failed evaluation, pass by pass, and the renderer's rules on what evaluated."""
    from renderer import recovery  # only a failed evaluation needs these
    from renderer.cue_errors import to_problems
    from renderer.redact import Redactor
    from renderer.validate import check

    # The env literals written in the file; a string cue computed is never shown (cue_errors).
    redactor = Redactor.of(source.cue_index.env_literals)

    def problems_of(text: str) -> list[Problem]:
        return to_problems(text, _USER_FILE, source.display, lambda: source.cue_index, shift, redactor, source.text,
                           schema=schema_text)

    def run(excluded: set[tuple[str | int, ...]]) -> tuple[str, Any] | None:
        binding = recovery.rebuilt("app", excluded, sorted(INJECTED_TOP_LEVEL))
        (work / "check.cue").write_text(_check_package(source, binding))
        if source.remaining() <= 0:
            return None
        try:
            again = run_cue(_EXPORT, cwd=work, timeout_s=source.remaining())
        except Budget:
            return None  # what the passes so far found is reported; the budget's own error would hide it
        if again.returncode != 0:
            return (again.stderr, None) if again.stderr.strip() else None
        return "", _json(again.stdout, source)

    def checked(document: Any) -> list[Problem]:
        return check(_finish(source, document))

    patched = recovery.resolved((work / _USER_FILE).read_text(), stderr, _USER_FILE)
    if patched is None:
        problems = recovery.recover(stderr, run, problems_of, checked)
    else:  # the rest of the file, with a string where each unresolved reference was: what follows from it left out
        text, fields = patched
        (work / _USER_FILE).write_text(text)
        again = run(set())
        rest = [] if again is None else recovery.recover(again[0], run, problems_of, checked) if again[0] \
            else checked(again[1])
        problems = list(dict.fromkeys([*problems_of(stderr), *(p for p in rest if not any(
            p.field == f or p.field.startswith(f + ".") for f in fields))]))
    if not problems:
        raise ToolFailure("cue export failed with an error message this version does not read")
    return problems


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
            pairs.append((f"a{i}", f"apps/a{i}:{source.package or DEFAULT_PACKAGE}"))
            fields.append(f'"a{i}": {_binding(f"a{i}")}')
        (work / "all.cue").write_text(f"package all\n\n{_imports(pairs)}\n" + "\n".join(fields) + "\n")
        result = run_cue(["export", "--out", "json", "."], cwd=work)
    if result.returncode != 0:
        return None, result.stderr
    exported: dict[str, Any] = _json(result.stdout, sources[0])
    return exported, ""


_BATCH_FILE = lazy(r"apps/a(\d+)/")


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
