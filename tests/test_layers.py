"""The layering of docs/development.md, held over the import graph (every import, at module level or inside a
function): dependencies point down; edges never import each other (only apprafter/ wires them); the controller
runtime knows nothing of ours above toolchain/; cores take only the runtime's pure modules.

No core does I/O. The cores are renderer/, compatibility/, lifecycle/ and every platform_stack/ module not in
IO_MODULES (the stack's pure part: the data and rules a check, a plan or a status is made of). A module does I/O
when it imports, anywhere in it, a library that reaches outside the process other than by reading a file:
  the network   httpx, httpcore, requests, urllib.request, http.client, http.server, socketserver, socket, ssl,
                oras, lightkube, uvicorn
  processes     subprocess, multiprocessing, concurrent.futures
  threads, event loops   threading, _thread, asyncio, selectors
  file writes   tempfile, shutil
or when it imports a module of ours that does (`import a.b.c` runs `a` and `a.b` too, so a package's __init__
counts). Exceptions, each named with its reason: the one cue wrapper (CUE_WRAPPER), which every core may run, and
library modules that are pure functions (PURE_LIBRARY_MODULES). Reading files is no I/O here: a user's file is a
core's input. Blind spots, said plainly: a write through open() or Path.write_* alone, an import made through
importlib, and a relative import (we write none) are not seen; a module that does one of these is listed in
IO_MODULES by hand, which counts as much as a derived one. IO_MODULES is every I/O module below the edges, with
what it does: a module the imports show doing I/O and not listed fails `test_every_io_module_below_the_edges_is_listed`
(a new one is a decision someone writes down), and a core that reaches one fails `test_no_core_does_io`.

Within each core package the imports form no loop, counting those inside functions: a loop held together by a
function-level import is still a loop (a change of import order or a new module-level import breaks it at load).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
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
                          "controller_runtime.outcomes", "controller_runtime.quantity"})
CORES = frozenset({"renderer", "compatibility", "platform_stack", "lifecycle"})
# Whole packages of cores; platform_stack's cores are its modules outside IO_MODULES.
PURE_PACKAGES = frozenset({"renderer", "compatibility", "lifecycle"})
BELOW_EDGES = frozenset({"toolchain", "controller_runtime", "renderer", "compatibility", "platform_stack",
                         "lifecycle"})

IO_LIBRARIES = frozenset({
    "httpx", "httpcore", "requests", "urllib.request", "http.client", "http.server", "socketserver", "socket", "ssl",
    "oras", "lightkube", "uvicorn",
    "subprocess", "multiprocessing", "concurrent.futures",
    "threading", "_thread", "asyncio", "selectors",
    "tempfile", "shutil",
})
PURE_LIBRARY_MODULES = {
    "lightkube.utils.quantity": "parse_quantity, a pure function (its package's __init__ loads the client: a cost "
                                "at import, not I/O)",
}
CUE_WRAPPER = {
    "renderer.cue": "the one cue wrapper: cue as a subprocess, bounded in time, memory and output",
    "renderer.scratch": "its scratch directory, where renderer.load and renderer.crds write cue's input (writes no "
                        "import shows: named here so that nobody takes them for a core's own)",
    "toolchain.tools": "the tool lookup the wrapper runs (which cue, at which version: a version probe)",
    "toolchain.gobin": "where `go install` left a tool the lookup did not find (`go env`), for its message alone",
}
# Every module below the edges that does I/O, and what it does. Cores never import these.
IO_MODULES = {
    "toolchain.container_tools": "the image's and the node's tools, each asked its version as a process",
    "controller_runtime.client": "the API server over HTTP (lightkube, httpx)",
    "controller_runtime.events": "Events written through the client",
    "controller_runtime.finalizers": "finalizers added and removed through the client",
    "controller_runtime.informer": "list and watch through the client, on the event loop",
    "controller_runtime.pod_logs": "a container's log streamed through the API server (httpx)",
    "controller_runtime.port_forward": "a local listener carried to a pod's port over the API server's WebSocket",
    "controller_runtime.kubeconfig": "the kubeconfig and the in-cluster service account, for lightkube",
    "controller_runtime.lease": "the leader election Lease through the client",
    "controller_runtime.manager": "the event loop: informers, queue, workers, lease, probes",
    "controller_runtime.probes": "the probe and metrics ports (a thread serving HTTP)",
    "controller_runtime.queue": "the work queue's timers on the event loop",
    "controller_runtime.replies": "the client's replies and failed connections read (lightkube's and httpx's errors, "
                                  "anyio's): sends nothing, imports them",
    "controller_runtime.throttle": "Retry-After holds on the event loop",
    "controller_runtime.writes": "applies, status writes and deletes through the client",
    "platform_stack.build": "`stack build`: writes the chart directory and its .tgz",
    "platform_stack.credentials": "the local Docker and Helm configs, a credential helper run as a process",
    "platform_stack.helm": "helm lint and template, run as processes",
    "platform_stack.oci": "a chart pushed to a registry",
    "platform_stack.proc": "a tool run as a process (helm, cosign)",
    "platform_stack.registry": "the registry client (its __init__ loads client and transport)",
    "platform_stack.registry.client": "registry calls (oras-py's layout, httpx)",
    "platform_stack.registry.transport": "one registry host's HTTP (httpx, TLS)",
    "platform_stack.release": "`stack release`: build, push, sign, verify",
    "platform_stack.signing": "cosign sign and verify, run as a process",
    "platform_stack.snapshot": "a chart built from CUE source (`stack plan` of a source directory)",
    "platform_stack.tarball": "a chart's .tgz written atomically; the source's commit time from git",
    "platform_stack.upstream": "the PlatformStack controller's check: registry requests, cosign, a scratch directory",
}


def imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, dotted module) of every absolute import in a file."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module


def named(path: Path) -> set[str]:
    """Every dotted name an import in the file may load: `from a import b` loads a, and a.b when b is a module."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{alias.name}" for alias in node.names)
    return out


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


def module_files(root: Path) -> dict[str, Path]:
    """Dotted name -> file of every module of every package of ours under `root` (a package is its __init__)."""
    out = {}
    for init in sorted(root.glob("*/__init__.py")):
        if init.parent.name == "tests":
            continue
        for path in sorted(init.parent.rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def io_libraries(path: Path) -> set[str]:
    """The I/O libraries a file imports (anywhere in it)."""
    return {library for name in named(path) for library in IO_LIBRARIES
            if _under(name, library) and not any(_under(name, pure) for pure in PURE_LIBRARY_MODULES)}


def loads(files: Mapping[str, Path], path: Path) -> set[str]:
    """The modules of ours importing the file's imports runs: each one named, and the packages above it."""
    out: set[str] = set()
    for name in named(path):
        parts = name.split(".")
        out.update(prefix for prefix in (".".join(parts[:i]) for i in range(1, len(parts) + 1)) if prefix in files)
    return out


def io_reasons(files: Mapping[str, Path], listed: Mapping[str, str]) -> dict[str, str]:
    """Each module of ours that does I/O -> why: what it is listed for, the libraries it imports, or the chain of
    modules of ours through which it reaches them."""
    why = {m: listed[m] for m in files if m in listed}
    why.update({m: ", ".join(sorted(libs)) for m, path in files.items()
                if m not in why and m not in CUE_WRAPPER and (libs := io_libraries(path))})
    deps = {m: loads(files, path) for m, path in files.items()}
    grown = True
    while grown:
        grown = False
        for module in sorted(files):
            if module in why or module in CUE_WRAPPER:
                continue
            through = sorted(d for d in deps[module] if d in why)
            if through:
                why[module] = f"{through[0]} ({why[through[0]]})"
                grown = True
    return why


def is_core(module: str, listed: Mapping[str, str]) -> bool:
    top = module.split(".")[0]
    return top in PURE_PACKAGES or (top == "platform_stack" and module not in listed)


def core_io(files: Mapping[str, Path], listed: Mapping[str, str]) -> list[str]:
    """The core modules that do I/O, each with the way it reaches it."""
    why = io_reasons(files, listed)
    return [f"{module} does I/O: {why[module]}" for module in sorted(why) if is_core(module, listed)]


def unlisted_io(files: Mapping[str, Path], listed: Mapping[str, str]) -> list[str]:
    """The modules below the edges that do I/O and are not in the list (nor the cue wrapper)."""
    why = io_reasons(files, listed)
    return [f"{module}: {why[module]}" for module in sorted(why)
            if module.split(".")[0] in BELOW_EDGES and module not in listed]


def loops(files: Mapping[str, Path], package: str) -> list[list[str]]:
    """The import loops within a package (every import counts, module level or inside a function): each set of
    modules that reach one another, sorted."""
    ours = {m for m in files if m == package or m.startswith(package + ".")}
    edges = {m: {n for n in named(files[m]) if n in ours and n != m} for m in ours}

    def reach(start: str) -> set[str]:
        seen: set[str] = set()
        todo = list(edges[start])
        while todo:
            module = todo.pop()
            if module not in seen:
                seen.add(module)
                todo.extend(edges[module])
        return seen

    reached = {m: reach(m) for m in ours}
    found = {frozenset(n for n in ours if n in reached[m] and m in reached[n]) for m in ours if m in reached[m]}
    return sorted(sorted(group) for group in found)


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


def test_no_core_does_io() -> None:
    assert core_io(module_files(ROOT), IO_MODULES) == []


def test_every_io_module_below_the_edges_is_listed() -> None:
    files = module_files(ROOT)
    assert unlisted_io(files, IO_MODULES) == []
    assert sorted(set(IO_MODULES) - set(files)) == []  # no stale names
    assert sorted(set(IO_MODULES) & set(CUE_WRAPPER)) == []


@pytest.mark.parametrize("package", sorted(CORES))
def test_a_core_package_imports_in_no_loop(package: str) -> None:
    assert loops(module_files(ROOT), package) == []


def plant(root: Path, modules: Mapping[str, str]) -> dict[str, Path]:
    """A tree of packages under `root` holding `modules` (dotted name -> source), as module_files reads it."""
    packages = {".".join(n.split(".")[:i]) for n in modules for i in range(1, n.count(".") + 1)}
    for package in sorted(packages):
        init = root.joinpath(*package.split("."), "__init__.py")
        init.parent.mkdir(parents=True, exist_ok=True)
        init.write_text(modules.get(package, ""))
    for name, source in modules.items():
        if name not in packages:
            root.joinpath(*name.split(".")).with_suffix(".py").write_text(source)
    return module_files(root)


def test_a_core_reaching_io_through_a_function_and_a_package_init_is_caught(tmp_path: Path) -> None:
    """Today's shape before issue 30: a core takes an error class from a registry package whose __init__ loads the
    client; and a pure-looking module imports a fetcher inside a function."""
    files = plant(tmp_path, {
        "lifecycle.inputs": "from platform_stack.registry.replies import Failure\n",
        "lifecycle.decide": "def f():\n    from platform_stack.fetch import get\n",
        "lifecycle.fine": "from platform_stack.rules import rule\nfrom renderer.cue import run_cue\n",
        "platform_stack.registry": "from platform_stack.registry.client import connect\n",
        "platform_stack.registry.client": "import httpx\n",
        "platform_stack.registry.replies": "class Failure(Exception): ...\n",
        "platform_stack.fetch": "def get():\n    import subprocess\n",
        "platform_stack.rules": "import re\n",
        "renderer.cue": "import subprocess\n",
    })
    # replies itself is pure; importing it runs platform_stack.registry's __init__, which is not.
    listed = {"platform_stack.registry": "the registry", "platform_stack.registry.client": "registry calls",
              "platform_stack.fetch": "a process"}
    assert core_io(files, listed) == [
        "lifecycle.decide does I/O: platform_stack.fetch (a process)",
        "lifecycle.inputs does I/O: platform_stack.registry (the registry)",
    ]
    # A new I/O module nobody listed is caught on its own, and so is the core behind it.
    assert unlisted_io(files, {}) == [
        "lifecycle.decide: platform_stack.fetch (subprocess)",
        "lifecycle.inputs: platform_stack.registry (platform_stack.registry.client (httpx))",
        "platform_stack.fetch: subprocess",
        "platform_stack.registry: platform_stack.registry.client (httpx)",
        "platform_stack.registry.client: httpx",
    ]
    assert "lifecycle.fine" not in io_reasons(files, {})  # a pure module and the cue wrapper are no I/O


def test_a_loop_held_together_by_a_function_level_import_is_caught(tmp_path: Path) -> None:
    """The renderer's loop before issue 30: crds -> validate -> load, and load back to crds inside a function."""
    files = plant(tmp_path, {
        "renderer.crds": "from renderer.validate import IMMUTABLE\n",
        "renderer.validate": "from renderer.load import LoadedApp\nIMMUTABLE = ''\n",
        "renderer.load": "def evaluate():\n    from renderer import crds\n",
        "renderer.names": "",
    })
    assert loops(files, "renderer") == [["renderer.crds", "renderer.load", "renderer.validate"]]


# The runtime's write steps (controller_runtime.writes) are the one place an object is applied only where it differs
# (`up_to_date` before an apply) and created once (a create whose 409 reads the winner). Elsewhere, by reason:
OWN_WRITE_STEPS = {
    "controller_runtime/compare.py": "defines up_to_date",
    "controller_runtime/writes.py": "the write steps themselves",
    "lifecycle/bootstrap.py": "cluster-bootstrap's plan says which objects are unchanged (its --dry-run prints it)",
    "controller_runtime/events.py": "an Event's 409 is the same occurrence reported already: nothing to read back",
}


def own_write_steps(path: Path) -> list[str]:
    """`path:line` of each call of up_to_date, and of each function that calls `.create(` and compares a `.code` (or
    a status code) with 409: a write step written by hand."""
    tree = ast.parse(path.read_text(), str(path))
    found = [f"{path.name}:{node.lineno} up_to_date" for node in ast.walk(tree) if isinstance(node, ast.Call)
             and getattr(node.func, "id", getattr(node.func, "attr", None)) == "up_to_date"]
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        creates = any(isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "create"
                      for n in ast.walk(function))
        checks_409 = any(isinstance(n, ast.Compare) and any(isinstance(c, ast.Constant) and c.value == 409
                                                            for c in n.comparators) for n in ast.walk(function))
        if creates and checks_409:
            found.append(f"{path.name}:{function.lineno} {function.name}: a create whose 409 is handled by hand")
    return found


SHIPPED = ("apprafter", "toolchain", "controller_runtime", "renderer", "compatibility", "lifecycle", "platform_stack",
           "cmp", "admission", "reconciler")


def test_no_write_step_is_written_by_hand() -> None:
    found = {}
    for package in SHIPPED:
        for path in sorted((ROOT / package).rglob("*.py")):
            where = str(path.relative_to(ROOT))
            if where not in OWN_WRITE_STEPS and (hand := own_write_steps(path)):
                found[where] = hand
    assert found == {}, "use controller_runtime.writes (ensure, create_once)"


def test_the_write_step_check_finds_both_patterns(tmp_path: Path) -> None:
    path = tmp_path / "hand.py"
    path.write_text("async def make(kube, obj):\n    try:\n        await kube.create(obj)\n    except E as e:\n"
                    "        if e.code != 409:\n            raise\n\n\n"
                    "def same(a, b):\n    return up_to_date(a, b, 'm')\n")
    assert [line.split(" ", 1)[1] for line in own_write_steps(path)] == [
        "up_to_date", "make: a create whose 409 is handled by hand"]


def wait_fors(path: Path) -> list[str]:
    """Every call of asyncio.wait_for in `path`: on Python 3.11 it swallows a cancellation that arrives as its
    awaitable completes (the task then runs on: a busy watch never stopped, `apprafter app remove --wait` hung in
    CI); asyncio.timeout does not (tests/controller_runtime/test_cancellation.py shows both)."""
    tree = ast.parse(path.read_text(), str(path))
    return [f"{path.name}:{node.lineno}" for node in ast.walk(tree) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute) and node.func.attr == "wait_for"
            and getattr(node.func.value, "id", None) == "asyncio"]


def test_no_shipped_code_awaits_with_asyncio_wait_for() -> None:
    found = {str(path.relative_to(ROOT)): calls for package in SHIPPED
             for path in sorted((ROOT / package).rglob("*.py")) if (calls := wait_fors(path))}
    assert found == {}, "use `async with asyncio.timeout(...)` (docs/development.md, conventions)"
