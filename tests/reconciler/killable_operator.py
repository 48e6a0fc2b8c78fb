"""The fault tier's operator: `python -m tests.reconciler.killable_operator operator ...` runs `apprafter` with a
kill switch on its writes, installed through the runtime's write observers (controller_runtime.observers). With
APPRAFTER_TEST_KILL_AT=before:N (or after:N) the process SIGKILLs itself just before its Nth write request is sent
(or just after its reply came back); with chance:P:SEED it does so at each of those points with probability P (a
generator seeded with SEED), so that the fault tier can stop a reconcile between any two of its writes. Lease writes
are not counted (their timing is the clock's, not the reconcile's). The product ships none of this."""

from __future__ import annotations

import os
import random
import signal
import sys

__all__ = ["ENTRY", "KILL_ENV", "KillSwitch"]

KILL_ENV = "APPRAFTER_TEST_KILL_AT"
ENTRY = "tests.reconciler.killable_operator"  # what `python -m` runs


class KillSwitch:
    """A write observer: counts write requests and kills the process at the one the environment names."""

    def __init__(self, spec: str | None = None) -> None:
        spec = os.environ.get(KILL_ENV, "") if spec is None else spec
        when, _, count = spec.partition(":")
        self.when = when if when in ("before", "after") and count.isdigit() else ""
        self.at = int(count) if self.when else 0
        self.chance, self._draw = 0.0, random.Random(0)
        if when == "chance":
            chance, _, seed = count.partition(":")
            self.chance, self._draw = float(chance), random.Random(seed)
        self.writes = 0

    def _hit(self, when: str) -> bool:
        if self.chance:
            return self._draw.random() < self.chance
        return self.when == when and self.writes == self.at

    def before(self, what: str, resource: str) -> None:
        if resource == "leases":
            return
        self.writes += 1
        if self._hit("before"):
            self._kill(f"before write {self.writes} ({what})")

    def after(self, what: str, resource: str) -> None:
        if resource != "leases" and self._hit("after"):
            self._kill(f"after write {self.writes} ({what})")

    @staticmethod
    def _kill(where: str) -> None:
        # the test reads this line to know where the kill landed; SIGKILL leaves no chance to flush anything else
        sys.stderr.write(f"fault hook: SIGKILL {where}\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    from apprafter.entry import main
    from controller_runtime.observers import observe_writes

    observe_writes(KillSwitch())
    main()
