"""A review worker process (`python -m admission.worker`): answers AdmissionReviews from its stdin one at a time,
each within a CPU budget (ITIMER_PROF), in a data segment capped at its size after warm-up plus a memory budget.

Frames both ways are a 4-byte big-endian length and that many bytes. The first frame from the server is the
worker's configuration (JSON); the worker answers `ready` once the rules are warm, then, per review, reads a
header frame (JSON: path, now, and the HostnamePolicies when they changed) and a body frame and writes the Outcome
as JSON. A review over its CPU budget is
refused with a clear message and the worker carries on; one over its memory budget is refused and the worker
exits (the server starts another), since a MemoryError can leave any object half-built.
"""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import signal
import struct
import sys
from types import FrameType
from typing import IO, Any

from admission import memory, review
from lifecycle import hostname_policy
from renderer.context import PlatformContext
from toolchain.errors import ToolFailure

__all__ = ["read_frame", "write_frame"]

HEADER = struct.Struct(">I")


class _OverBudget(ToolFailure):
    """The review's CPU time ran out (raised from SIGPROF; nothing on a review's path catches a ToolFailure or
    `Exception` as a whole, so it reaches the worker's loop)."""


def read_frame(stream: IO[bytes]) -> bytes | None:
    """One frame, or None at the end of the stream."""
    head = stream.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    (size,) = HEADER.unpack(head)
    data = stream.read(size)
    return data if len(data) == size else None


def write_frame(stream: IO[bytes], data: bytes) -> None:
    stream.write(HEADER.pack(len(data)) + data)
    stream.flush()


def _data_bytes() -> int:
    with open("/proc/self/status", "rb") as status:
        for line in status:
            if line.startswith(b"VmData:"):
                return int(line.split()[1]) * 1024
    return 0


def _limit_memory(budget_mb: int) -> None:
    """The data segment may grow by `budget_mb` from here (RLIMIT_DATA: what Python allocates; not RLIMIT_AS)."""
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    soft = _data_bytes() + (budget_mb << 20)
    resource.setrlimit(resource.RLIMIT_DATA, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))


def _on_sigprof(_signum: int, _frame: FrameType | None) -> None:
    raise _OverBudget


def _tuples(value: Any) -> Any:
    """JSON's lists back into the tuples PlatformContext holds."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _settings(config: dict[str, Any]) -> review.Settings:
    context: dict[str, Any] = {k: _tuples(v) for k, v in config["context"].items() if k in PlatformContext._fields}
    return review.Settings(config["operator_user"], PlatformContext(**context), tuple(config["claim_status_users"]),
                           tuple(config["provider_writers"]))


def _answer(path: str, body: bytes, settings: review.Settings, now: str, cpu_seconds: float) -> tuple[
        review.Outcome, str]:
    """The outcome of one review and the budget it ran out of ("cpu", "memory"; "" when none)."""
    signal.setitimer(signal.ITIMER_PROF, cpu_seconds)
    try:
        if path == "/mutate":
            return review.mutating(body, settings, now), ""
        return review.validating(body, settings), ""
    except _OverBudget:
        signal.setitimer(signal.ITIMER_PROF, 0)
        return review.over_budget(body, f"{cpu_seconds:g} s of CPU time"), "cpu"
    except MemoryError:
        signal.setitimer(signal.ITIMER_PROF, 0)
        return review.over_budget(body, "its memory"), "memory"
    except Exception:  # a bug must refuse, never allow; the traceback goes to the webhook's log (stderr)
        signal.setitimer(signal.ITIMER_PROF, 0)
        import traceback

        traceback.print_exc()
        return review.internal_error(body), ""
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)


def main() -> None:
    # stdout carries frames only: anything printed goes to stderr (the webhook's log).
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    source = sys.stdin.buffer
    first = read_frame(source)
    if first is None:
        return
    config = json.loads(first)
    settings = _settings(config)
    memory.tune()
    review.warm_up()
    signal.signal(signal.SIGPROF, _on_sigprof)
    _limit_memory(int(config["memory_mb"]))
    write_frame(out, b"ready")
    while True:
        header, body = read_frame(source), read_frame(source)
        if header is None or body is None:
            return
        request = json.loads(header)
        if "policies" in request:  # the cluster's HostnamePolicies or ServiceProviders changed since its last review
            settings = dataclasses.replace(settings, hostname_policies=hostname_policy.read_all(request["policies"]),
                                           service_providers=tuple(request.get("providers") or ()))
        try:
            outcome, spent = _answer(request["path"], body, settings, request["now"], float(config["cpu_seconds"]))
        except _OverBudget:  # the timer fired as the review ended, before it was stopped
            outcome, spent = review.over_budget(body, f"{config['cpu_seconds']:g} s of CPU time"), "cpu"
        large = len(body) > memory.MMAP_THRESHOLD
        del body
        if large:  # what a large object's review took goes back to the system, not only to the allocator
            memory.trim()
        leave = spent == "memory"
        write_frame(out, json.dumps({"outcome": outcome.to_json(), "spent": spent, "leave": leave}).encode())
        if leave:
            return


if __name__ == "__main__":
    main()
