"""An operator that says which of our modules each reconcile ran: `python -m tests.reconciler.traced_operator
operator ...` runs `apprafter` with every controller's reconcile wrapped; with APPRAFTER_TEST_TRACE=FILE each
reconcile appends one JSON line to FILE: the controller, the key, the modules of ours whose functions ran in it (its
task, the tasks it started and the threads they started), the calls from a core module into an edge module (a climb
back up the layers), the calls from an edge module into a core one (each returns: the edge and the core take turns),
and its writes. The product ships none of this (docs/measurements.md: a reconcile's path)."""

from __future__ import annotations

import contextvars
import json
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

__all__ = ["ENTRY", "TRACE_ENV", "module_of"]

TRACE_ENV = "APPRAFTER_TEST_TRACE"
ENTRY = "tests.reconciler.traced_operator"  # what `python -m` runs
ROOT = Path(__file__).resolve().parents[2]
EDGES = frozenset({"apprafter", "cmp", "admission", "reconciler"})
CORES = frozenset({"renderer", "compatibility", "platform_stack", "lifecycle"})
OURS = EDGES | CORES | {"controller_runtime", "toolchain"}


class Pass:
    """What one reconcile ran."""

    def __init__(self) -> None:
        self.modules: set[str] = set()
        self.climbs: dict[str, int] = {}
        self.descents: dict[str, int] = {}
        self.writes: list[str] = []


CURRENT: contextvars.ContextVar[Pass | None] = contextvars.ContextVar("apprafter_test_trace", default=None)
_modules: dict[str, str | None] = {}  # code file -> our module (None: not ours)


def module_of(filename: str) -> str | None:
    """`lifecycle.credentials.assess` for a file of ours, None for any other."""
    if filename not in _modules:
        try:
            relative = Path(filename).resolve().relative_to(ROOT)
        except ValueError:
            relative = None
        dotted = ".".join(relative.with_suffix("").parts) if relative is not None and relative.suffix == ".py" else ""
        _modules[filename] = dotted if dotted.split(".")[0] in OURS else None
    return _modules[filename]


def _trace(frame: FrameType, event: str, arg: Any) -> None:
    if event != "call" or frame.f_code.co_name == "<module>":
        return None
    found = CURRENT.get()
    if found is None:
        return None
    callee = module_of(frame.f_code.co_filename)
    if callee is None:
        return None
    found.modules.add(callee)
    caller = module_of(frame.f_back.f_code.co_filename) if frame.f_back is not None else None
    if caller is None or caller == callee:
        return None
    where = f"{caller} -> {callee}.{frame.f_code.co_name}"
    if caller.split(".")[0] in CORES and callee.split(".")[0] in EDGES:
        found.climbs[where] = found.climbs.get(where, 0) + 1
    elif caller.split(".")[0] in EDGES and callee.split(".")[0] in CORES:
        found.descents[where] = found.descents.get(where, 0) + 1
    return None


class _Writes:
    """A write observer (controller_runtime.observers): each write of the reconcile that sends it."""

    def before(self, what: str, resource: str) -> None:
        found = CURRENT.get()
        if found is not None:
            found.writes.append(what)

    def after(self, what: str, resource: str) -> None:
        return


def _traced(controller: str, reconcile: Callable[..., Any], out: Path) -> Callable[..., Any]:
    async def traced(self: Any, namespace: str, name: str) -> Any:
        found = Pass()
        token = CURRENT.set(found)
        outcome = "raised"
        try:
            result = await reconcile(self, namespace, name)
            outcome = type(result).__name__
            return result
        finally:
            CURRENT.reset(token)
            line = {"controller": controller, "key": f"{namespace}/{name}", "outcome": outcome,
                    "modules": sorted(found.modules), "climbs": found.climbs, "descents": found.descents,
                    "writes": found.writes}
            with out.open("a") as sink:
                sink.write(json.dumps(line) + "\n")

    return traced


def _threads_carry_the_context() -> None:
    """A thread started during a reconcile (a probe, a read) runs in that reconcile's context."""
    start, run = threading.Thread.start, threading.Thread.run

    def started(self: threading.Thread) -> None:
        self._apprafter_context = contextvars.copy_context()  # type: ignore[attr-defined]
        start(self)

    def running(self: threading.Thread) -> None:
        context = getattr(self, "_apprafter_context", None)
        if context is None:
            run(self)
        else:
            context.run(run, self)

    threading.Thread.start = started  # type: ignore[method-assign]
    threading.Thread.run = running  # type: ignore[method-assign]


def install(out: Path) -> None:
    from controller_runtime.observers import observe_writes
    from reconciler.application import ApplicationController
    from reconciler.sourcecredential import SourceCredentialController

    for name, cls in (("application", ApplicationController), ("sourcecredential", SourceCredentialController)):
        cls.reconcile = _traced(name, cls.reconcile, out)  # type: ignore[method-assign]
    observe_writes(_Writes())
    _threads_carry_the_context()
    threading.settrace(_trace)
    sys.settrace(_trace)


if __name__ == "__main__":
    from apprafter.entry import main

    install(Path(os.environ[TRACE_ENV]))
    main()
