"""Our packages use other libraries through their public API only: no private attribute of anyone else's object,
and oras-py through the documented helpers we name.

Read from the source (an AST walk), not at run time, so that code paths no test reaches are covered too.
A private attribute is a `_name` (not a `__dunder__`) reached as `obj._name`, `super()._name`,
`getattr(obj, "_name")` or `type(name, bases, {"_name": ...})` that the module itself never defines (as a
function, class, module name, class attribute or `self._name`/`cls._name`), or as `self._name` that none of our
modules defines (an attribute inherited from a library's class). What such an access reaches is someone else's
internals (lightkube's `_client`, requests' `_content`, oras-py's `_tls_verify`): they change without notice.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("apprafter", "toolchain", "controller_runtime", "renderer", "compatibility", "lifecycle", "platform_stack",
            "cmp", "admission", "reconciler")
# Underscored names that are documented public API: namedtuple's methods, os._exit.
DOCUMENTED = frozenset({"_replace", "_asdict", "_fields", "_make", "_field_defaults", "_exit"})
# oras-py's documented helpers (its user guide, "Creating OCI Objects"): all we use of it. Its request loop
# (Registry.do_request, push, get_tags, ...) cannot be bounded through its public API (docs/platform-stack.md).
ORAS_API = frozenset({"oras.oci.NewManifest", "oras.oci.NewLayer", "oras.oci.ManifestConfig",
                      "oras.defaults.annotation_title"})
# Uses that issue 19 (item 3: the controller runtime, no private attributes of lightkube) removes; an entry
# whose use is gone fails the test below, so this list only shrinks.
KNOWN: frozenset[tuple[str, str]] = frozenset()  # none left: keep it that way


def sources() -> Iterator[tuple[str, ast.Module]]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield str(path.relative_to(ROOT)), ast.parse(path.read_text(), str(path))


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in DOCUMENTED


def defined_names(tree: ast.Module) -> set[str]:
    """The private names a module defines itself: functions, classes, module and class attributes, and
    attributes it sets on `self`/`cls`."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            names.add(node.attr)
        elif isinstance(node, ast.alias) and node.asname is None:
            names.add(node.name.rsplit(".", 1)[-1])
    return names


def foreign_private_uses(tree: ast.Module, ours: set[str], anywhere: set[str]) -> Iterator[tuple[int, str]]:
    """(line, expression) of each private attribute reached that `ours` (this module's names) does not define, or
    on `self`/`cls`, that `anywhere` (every module's) does not."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            on_self = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            if node.attr not in (anywhere if on_self else ours):
                yield node.lineno, ast.unparse(node)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) > 1:
                name = node.args[1]
                if isinstance(name, ast.Constant) and isinstance(name.value, str) and private(name.value) \
                        and name.value not in ours:
                    yield node.lineno, ast.unparse(node)
            if node.func.id == "type" and len(node.args) == 3 and isinstance(node.args[2], ast.Dict):
                for key in node.args[2].keys:
                    if isinstance(key, ast.Constant) and isinstance(key.value, str) and private(key.value):
                        yield node.lineno, repr(key.value)


def dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def oras_uses(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """(line, what) of each import of oras and each `oras.…` name used, outermost first."""
    inner: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "oras":
            yield node.lineno, f"from {node.module} import ..."
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "oras" and (alias.asname or alias.name not in
                                                           ("oras.oci", "oras.defaults")):
                    yield node.lineno, f"import {alias.name}"
        elif isinstance(node, ast.Attribute) and id(node) not in inner:
            name = dotted(node)
            if name is not None and name.split(".")[0] == "oras":
                inner.update(id(n) for n in ast.walk(node.value))
                yield node.lineno, name


def test_no_private_attribute_of_another_library_is_used() -> None:
    trees = list(sources())
    anywhere = set().union(*(defined_names(tree) for _, tree in trees))
    found = set()
    for path, tree in trees:
        found |= {(path, line, what) for line, what in foreign_private_uses(tree, defined_names(tree), anywhere)}
    unexpected = sorted(f"{path}:{line}: {what}" for path, line, what in found if (path, what) not in KNOWN)
    assert unexpected == [], "private attributes of other libraries (use their public API):\n" + "\n".join(unexpected)
    gone = KNOWN - {(path, what) for path, _, what in found}
    assert not gone, f"no longer used, delete from KNOWN: {sorted(gone)}"


def test_oras_is_used_through_its_documented_helpers_only() -> None:
    found = [f"{path}:{line}: {what}" for path, tree in sources() for line, what in oras_uses(tree)
             if what not in ORAS_API]
    assert found == []


def test_the_checks_catch_what_they_are_for() -> None:
    """The walks find the uses this tree had before (issue 19), so a green run means something."""
    before = ast.parse(
        "import oras.provider\n"
        "class Client(oras.provider.Registry):\n"
        "    def _check_200_response(self, response):\n"
        "        super()._check_200_response(response)\n"
        "        response._content = b''\n"
        "        self.auth.load_configs = None\n"
        "        http = self.client._client._client\n"
        "        verify = self._tls_verify\n"
        "        status = type('Status', (object,), {'_api_info': None})\n"
        "        getattr(http, '_transport')\n")
    names = defined_names(before)
    uses = {what for _, what in foreign_private_uses(before, names, names)}
    assert {"response._content", "self.client._client", "self.client._client._client", "'_api_info'",
            "getattr(http, '_transport')", "self._tls_verify"} <= uses
    assert "super()._check_200_response" not in uses  # our own override's name: the oras check below catches it
    assert [what for _, what in oras_uses(before)] == ["import oras.provider", "oras.provider.Registry"]
    now = ast.parse("import oras.oci\nmanifest = oras.oci.NewManifest()\nlayer = oras.oci.NewLayer('x', 'y')\n")
    assert [what for _, what in oras_uses(now) if what not in ORAS_API] == []
