"""Where the suite's CPU goes: `pytest -p tests.cpu_profile` (any worker count) writes build/suite-cpu/<worker>.json,
the CPU seconds of each unit (tests/parallel.py) measured over the worker's process tree: the worker itself, the
servers and tools it started (alive, or reaped into their parent's children times). `python -m tests.cpu_profile`
prints them merged, the costliest first. On 2 cores the suite is CPU-bound (docs/development.md "The suite's time
budget"): these seconds, not wall time under contention, say what to cut."""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.parallel import unit_of

OUT = Path(__file__).resolve().parent.parent / "build" / "suite-cpu"
TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: str) -> tuple[int, float] | None:
    """(parent pid, CPU seconds of the process and its reaped children)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2:].split()  # after "pid (comm) ": state is field 0 here
    return int(fields[1]), sum(int(f) for f in fields[11:15]) / TICK


def tree_cpu(root: int) -> float:
    """CPU seconds of `root` and every live descendant (each with its reaped children)."""
    stats = {int(p): s for p in os.listdir("/proc") if p.isdigit() and (s := _stat(p)) is not None}
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in stats.items():
        children.setdefault(parent, []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            total += stats[pid][1]
        todo.extend(children.get(pid, ()))
    return total


class CpuProfile:
    """Measures at unit boundaries only: a worker runs each unit's tests in a row (tests/parallel.py), so the tree's
    CPU when the unit changes closes the last one. Measuring around every test instead walked /proc twice per test:
    ≈ 500 CPU-s over a full run, a fifth of what it measured (docs/development.md "The suite's time budget")."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.unit: str | None = None
        self.mark = 0.0

    def _close(self, now: float) -> None:
        if self.unit is not None:
            self.seconds[self.unit] = self.seconds.get(self.unit, 0.0) + now - self.mark
        self.mark = now

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
        unit = unit_of(item)
        if unit != self.unit:
            self._close(tree_cpu(os.getpid()))
            self.unit = unit
        yield

    def pytest_sessionfinish(self) -> None:
        self._close(tree_cpu(os.getpid()))
        OUT.mkdir(parents=True, exist_ok=True)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        (OUT / f"{worker}.json").write_text(json.dumps(dict(self.seconds), indent=1, sort_keys=True))


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER") or not getattr(config.option, "numprocesses", None):
        config.pluginmanager.register(CpuProfile(), "apprafter-cpu-profile")


def main() -> None:
    merged: Counter[str] = Counter()
    for path in sorted(OUT.glob("*.json")):
        for unit, seconds in json.loads(path.read_text()).items():
            merged[unit] += seconds
    total = sum(merged.values())
    for unit, seconds in merged.most_common(int(sys.argv[1]) if len(sys.argv) > 1 else 40):
        print(f"{seconds:8.0f} s  {seconds / total:6.1%}  {unit}")
    print(f"{total:8.0f} s  total CPU of the units")


if __name__ == "__main__":
    main()
