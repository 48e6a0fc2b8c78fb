"""kill -9 at seeded points inside reconciles (tests/reconciler/killable_operator.py, a kill switch on the
runtime's writes: before or after the Nth write) of first deployments, soft changes, gated changes and approvals;
restarted, the operator converges, and the invariants of tests/reconciler/faults.py hold after every kill."""

from __future__ import annotations

import collections
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from compatibility.application import deployment
from tests.reconciler.faults import SEED, applications, check_invariants, live, rendered, rng
from tests.reconciler.helpers import apply, cr, edit, fresh_namespace, plan_phase, plans, wait, write_status
from tests.reconciler.killable_operator import ENTRY, KILL_ENV
from tests.reconciler.operator_proc import Operator
from tests.testbed.kube import KubeTestBed

pytestmark = [pytest.mark.testbed, pytest.mark.faults]

# at least this many over the shards (40: the suite's time budget, about the two cycles a shard runs anyway; a
# developer's run draws a fresh seed, so kill points add up across runs; APPRAFTER_FAULT_KILLS=400 for a long run,
# APPRAFTER_FAULT_SHARDS=4 to run it on more workers)
KILLS = int(__import__("os").environ.get("APPRAFTER_FAULT_KILLS", "40"))
# The kills run in shards of their own (each its namespaces and operator, its own draws from the seed), so the
# suite's workers can run them side by side (tests/parallel.py: a fault test is a unit of its own). One by default:
# each shard runs two cycles at least whatever its kills, so more shards cost cycles, not kill points.
SHARDS = int(__import__("os").environ.get("APPRAFTER_FAULT_SHARDS", "1"))
APPS = 4
CHANCE = 0.12
SIMPLE = edit(needs=None, env={"LOG_LEVEL": "info"})
SCALED = edit(SIMPLE, replicas=3, autoscale={"on": "cpu", "min": 2, "max": 5})  # a soft change adding a child
WHERE = re.compile(r"fault hook: SIGKILL (before|after) write \d+ \((.*) \S+\)$", re.MULTILINE)


def phases_of(cycle: int) -> list[tuple[str, dict[str, Any] | None, str]]:
    """(what, the spec written, the phase every Application ends in); None: approve every open plan instead. A new
    image repository is gated (a new tag of the same one is not, on purpose)."""
    evil = edit(SIMPLE, image=f"ghcr.io/evil/demo:{cycle}.0.0")
    return [("first deployment", SIMPLE, "Ready"), ("soft change", SCALED, "Ready"),
            ("soft change back", edit(SIMPLE, replicas=2), "Ready"),
            ("gated change", evil, "AwaitingMigrationApproval"), ("approval", None, "Ready"),
            ("gated change again", edit(evil, image=f"ghcr.io/other/demo:{cycle}.0.0"), "AwaitingMigrationApproval")]


def effective(namespace: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return dict(deployment(cr(namespace, spec, name=name), "prod").spec)


def settled(bed: KubeTestBed, namespace: str, names: list[str], phase: str) -> bool:
    """Every Application in `phase` for its generation, and no approval left unconsumed."""
    if any((p.get("status") or {}).get("phase") == "approved" for p in plans(bed, namespace)):
        return False
    apps = applications(bed, namespace)
    return all(((apps.get(n) or {}).get("status") or {}).get("phase") == phase
               and apps[n]["status"].get("observedGeneration") == apps[n]["metadata"]["generation"] for n in names)


def ended(op: Operator, bed: KubeTestBed, namespace: str, names: list[str], phase: str) -> Callable[[], bool | None]:
    """Probe: the operator died (its kill switch) or every Application settled."""
    return lambda: (not op.alive()) or settled(bed, namespace, names, phase) or None


@pytest.mark.parametrize("shard", range(SHARDS))
def test_kill_minus_nine_anywhere_in_a_reconcile(bed: KubeTestBed, tmp_path: Path, shard: int) -> None:
    draw = rng(f"kills:{shard}")
    wanted = -(-KILLS // SHARDS)
    print(f"fault seed {SEED}, shard {shard} ({wanted} kills wanted)")
    kills: collections.Counter[str] = collections.Counter()
    applied_at: dict[str, str] = {}
    cycle = 0
    while sum(kills.values()) < wanted or cycle < 2:  # two cycles at least: each kind of write is cut
        cycle += 1
        assert cycle <= 40, f"seed {SEED}, shard {shard}: only {sum(kills.values())} kills in 40 cycles"
        ns = fresh_namespace(bed, "kill")
        names = [f"app{i}" for i in range(APPS)]
        op = Operator(bed, tmp_path / f"cycle{cycle}", ("--no-leader-elect", "--namespace", ns, "--resync", "2",
                                                        "--max-backoff", "1"), name="killed", entry=ENTRY)
        targets: dict[str, dict[str, Any]] = {}
        written: dict[str, Any] = {}
        try:
            for what, spec, phase in phases_of(cycle):
                if spec is None:
                    for plan in plans(bed, ns):
                        if (plan.get("status") or {}).get("phase") == "pending-approval":
                            write_status(bed, "MigrationPlan", plan["metadata"]["name"], ns, {"phase": "approved"},
                                         manager="approver")
                    targets = {n: effective(ns, n, written) for n in names}
                else:
                    written = spec
                    for n in names:
                        apply(bed, cr(ns, spec, name=n))
                    if phase == "Ready":
                        targets = {n: effective(ns, n, spec) for n in names}
                where = f"seed {SEED}, shard {shard}, cycle {cycle}, {what}"
                for attempt in range(16):  # kill, restart, ... until a run outlives its kill points
                    killing = attempt < 15
                    # each write is a kill point twice (before it is sent, after its reply): a run dies at one of
                    # them with CHANCE each, so every phase, short or long, is cut several times
                    point = f"chance:{CHANCE}:{draw.randrange(1 << 30)}"
                    op.start(wait=None, env={KILL_ENV: point} if killing else {})
                    wait(f"{where}: killed at {point} or {phase}", ended(op, bed, ns, names, phase), 90)
                    if op.alive():
                        break
                    landed = WHERE.search(op.log())
                    assert landed, f"{where}: the operator died without its kill switch:\n{op.log()[-3000:]}"
                    kills[f"{landed[1]} {landed[2]}"] += 1
                    op.stop()
                    check_invariants(bed, ns, targets, applied_at, f"{where}, kill at {point}")
                else:
                    raise AssertionError(f"{where}: never converged")
                check_invariants(bed, ns, targets, applied_at, f"{where}, converged")
                for n in names:  # converged exactly: what lastAppliedSpec renders, nothing of another generation
                    status = applications(bed, ns)[n]["status"]
                    assert status["lastAppliedSpec"] == targets[n], f"{where}: {n}"
                    assert live(bed, ns, n) == rendered(ns, n, targets[n]), f"{where}: {n}"
                op.stop()
            mine = collections.Counter(p["metadata"]["labels"]["app.kubernetes.io/name"] for p in plans(bed, ns))
            assert mine == dict.fromkeys(names, 2), \
                f"seed {SEED}, shard {shard}, cycle {cycle}: one plan per gated change: {mine}"
            assert all(plan_phase(bed, ns, p["metadata"]["name"]) in ("applied", "pending-approval")
                       for p in plans(bed, ns)), "the second change waits for its own approval"
        finally:
            op.stop()
            for n in names:  # out of later cycles' way (no garbage collector here: the children stay)
                bed.delete("apprafter.io/v1alpha1", "Application", n, ns)
    print(f"fault seed {SEED}, shard {shard}: {sum(kills.values())} kills in {cycle} cycles: " + ", ".join(
        f"{k} {v}" for k, v in sorted(kills.items())))
    # the kills landed where the issue asks: between child applies, between children and status, around a plan
    assert any(k.startswith("after apply") and "MigrationPlan" not in k and "status" not in k for k in kills), kills
    assert any("status of Application" in k for k in kills) and any("MigrationPlan" in k for k in kills), kills
