"""The layering of docs/development.md, held over the import graph (every import, at module level or inside a
function): dependencies point down; edges never import each other (only apprafter/ wires them); the controller
runtime knows nothing of ours above toolchain/; cores take only the runtime's pure modules."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# package -> the packages of ours it may import (itself always)
ALLOWED: dict[str, frozenset[str]] = {
    "toolchain": frozenset(),
    "controller_runtime": frozenset({"toolchain"}),
    "renderer": frozenset({"toolchain"}),
    "compatibility": frozenset({"toolchain", "renderer", "controller_runtime"}),
    "platform_stack": frozenset({"toolchain", "renderer", "compatibility"}),
    "lifecycle": frozenset({"toolchain", "renderer", "compatibility", "platform_stack", "controller_runtime"}),
    "cmp": frozenset({"toolchain", "renderer", "compatibility"}),
    "admission": frozenset({"toolchain", "renderer", "compatibility", "platform_stack", "lifecycle",
                            "controller_runtime"}),
    "reconciler": frozenset({"toolchain", "renderer", "compatibility", "platform_stack", "lifecycle",
                             "controller_runtime"}),
    "apprafter": frozenset({"toolchain", "renderer", "compatibility", "platform_stack", "lifecycle",
                            "controller_runtime", "cmp", "admission", "reconciler"}),
}
# What a core may take from the runtime: pure modules with no I/O (kinds, object keys and owners, outcomes, the
# comparison of a live object with what an apply makes of it).
PURE_RUNTIME = frozenset({"controller_runtime.compare", "controller_runtime.kinds", "controller_runtime.objects",
                          "controller_runtime.outcomes"})
CORES = frozenset({"renderer", "compatibility", "platform_stack", "lifecycle"})


def imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, dotted module) of every absolute import in a file."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module


def violations(package: str) -> list[str]:
    out = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for line, module in imports(path):
            top = module.split(".")[0]
            if top == package or top not in ALLOWED:
                continue
            where = f"{path.relative_to(ROOT)}:{line}: {module}"
            if top not in ALLOWED[package]:
                out.append(f"{where} ({package} may not import {top})")
            elif package in CORES and top == "controller_runtime" and module not in PURE_RUNTIME:
                out.append(f"{where} (a core takes only the runtime's pure modules: {', '.join(sorted(PURE_RUNTIME))})")
    return out


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_dependencies_point_down(package: str) -> None:
    assert violations(package) == []


def test_every_package_is_in_the_map() -> None:
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests"}
    assert packages == set(ALLOWED)


def test_the_check_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from reconciler.application import ApplicationController\n")
    assert list(imports(module)) == [(2, "reconciler.application")]
