"""Restarts: the operator killed mid-reconcile, the API server restarted under a running operator, and two
replicas of which exactly one reconciles until it dies."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from compatibility.application import deployment
from tests.reconciler.conftest import own_test_bed
from tests.reconciler.helpers import (
    API,
    apply,
    cr,
    edit,
    fresh_namespace,
    plan_phase,
    plans,
    status,
    wait,
    wait_phase,
    write_status,
)
from tests.reconciler.operator_proc import FAST, Operator
from tests.testbed.kube import KubeTestBed
from tests.testbed.procs import free_port, wait_for

pytestmark = pytest.mark.testbed

SIMPLE = edit(needs=None, env={"LOG_LEVEL": "info"})  # public, no claims: Ready as soon as it is applied
GATED = edit(SIMPLE, image="ghcr.io/evil/demo:1.0.0")


def phases(bed: KubeTestBed, namespace: str, names: list[str]) -> dict[str, str]:
    """The phase of each named Application that has processed its current generation (one LIST request)."""
    items = bed.http.get(f"/apis/{API}/namespaces/{namespace}/applications").json()["items"]
    done = {a["metadata"]["name"]: str((a.get("status") or {}).get("phase", "")) for a in items
            if (a.get("status") or {}).get("observedGeneration") == a["metadata"]["generation"]}
    return {n: done.get(n, "") for n in names}


def all_in(bed: KubeTestBed, namespace: str, names: list[str], phase: str, timeout: float = 60) -> None:
    def probe() -> bool | None:
        return all(p == phase for p in phases(bed, namespace, names).values()) or None
    try:
        wait(f"{len(names)} Applications {phase}", probe, timeout)
    except Exception as e:
        raise AssertionError(f"{e}: {phases(bed, namespace, names)}") from e


def plans_per_app(bed: KubeTestBed, namespace: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for p in plans(bed, namespace):
        out.setdefault(p["metadata"]["labels"]["app.kubernetes.io/name"], []).append(p["metadata"]["name"])
    return out


def approve_all(bed: KubeTestBed, namespace: str, names: list[str]) -> None:
    for n in names:
        write_status(bed, "MigrationPlan", status(bed, namespace, n)["migrationPlan"], namespace,
                     {"phase": "approved"}, manager="approver")


def kill_when_some_are(bed: KubeTestBed, operator: Operator, namespace: str, names: list[str], phase: str) -> int:
    """SIGKILL the operator as soon as the first of `names` reaches `phase`; how many had reached it."""
    wait_for(f"the first {phase}", lambda: any(p == phase for p in phases(bed, namespace, names).values()) or None,
             60, interval=0.01)
    operator.kill()
    done = sum(p == phase for p in phases(bed, namespace, names).values())
    assert done < len(names), "the operator finished before it was killed: nothing was interrupted"
    return done


def test_killed_mid_reconcile_it_converges_without_duplicate_plans(bed: KubeTestBed, tmp_path: Path) -> None:
    # two workers: a wave of 24 takes long enough that the kill lands in the middle of it
    op = Operator(bed, tmp_path, ("--no-leader-elect", "--workers", "2", *FAST), name="killed").start()
    try:
        ns = fresh_namespace(bed, "kill")
        old = [f"old{i}" for i in range(24)]
        new = [f"new{i}" for i in range(24)]
        for n in old:
            apply(bed, cr(ns, SIMPLE, name=n))
        all_in(bed, ns, old, "Ready")
        for n in old:
            apply(bed, cr(ns, GATED, name=n))
        for n in new:
            apply(bed, cr(ns, SIMPLE, name=n))
        kill_when_some_are(bed, op, ns, new, "Ready")
        op.start()
        all_in(bed, ns, new, "Ready")
        all_in(bed, ns, old, "AwaitingMigrationApproval")
        per_app = plans_per_app(bed, ns)
        assert sorted(per_app) == sorted(old) and all(len(v) == 1 for v in per_app.values()), per_app

        op.signal(signal.SIGSTOP)  # every approval lands before the operator moves again
        try:
            approve_all(bed, ns, old)
        finally:
            op.signal(signal.SIGCONT)
        kill_when_some_are(bed, op, ns, old, "Ready")
        op.start()
        all_in(bed, ns, old, "Ready")
        applied = {name: plan for name, [plan] in plans_per_app(bed, ns).items()}
        wait("every plan applied", lambda: all(plan_phase(bed, ns, p) == "applied" for p in applied.values()) or None)
        for n in old:
            assert status(bed, ns, n)["lastAppliedSpec"] == deployment(cr(ns, GATED, name=n), "prod").spec
        assert all(len(v) == 1 for v in plans_per_app(bed, ns).values())
    finally:
        op.stop()


@pytest.fixture
def own_bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeTestBed]:
    """A test bed of its own (its API server is restarted): our CRDs and the child kinds' CRDs only."""
    with own_test_bed(Path(str(tmp_path_factory.mktemp("restart")))) as kube:
        yield kube


def test_an_api_server_restart_under_a_running_operator(own_bed: KubeTestBed, tmp_path: Path) -> None:
    bed = own_bed
    op = Operator(bed, tmp_path, FAST, name="survivor").start()  # with leader election, default timings
    try:
        ns = fresh_namespace(bed, "restart")
        names = ["a", "b", "held"]
        for n in names:
            apply(bed, cr(ns, SIMPLE, name=n))
        all_in(bed, ns, names, "Ready")
        apply(bed, cr(ns, GATED, name="held"))
        wait_phase(bed, ns, "AwaitingMigrationApproval", "held")
        resumed = op.metric("apprafter_watch_restarts_total", cause="resume")
        relisted = op.metric("apprafter_watch_restarts_total", cause="relist")
        bed.restart_apiserver(down=2)
        assert op.alive() and op.healthz() == 200
        apply(bed, cr(ns, edit(SIMPLE, replicas=4), name="a"))  # only a resumed watch sees this
        apply(bed, cr(ns, SIMPLE, name="c"))
        all_in(bed, ns, ["a", "c"], "Ready")
        assert status(bed, ns, "a")["lastAppliedSpec"]["replicas"] == 4
        approve_all(bed, ns, ["held"])
        wait_phase(bed, ns, "Ready", "held")
        assert [len(v) for v in plans_per_app(bed, ns).values()] == [1]
        assert op.metric("apprafter_watch_restarts_total", cause="resume") > resumed  # resumed from its version
        # a fresh API server's watch cache starts after the versions the watches had: 410 Gone, listed again
        assert op.metric("apprafter_watch_restarts_total", cause="relist") > relisted
        assert op.metric("apprafter_leader") == 1, "the lease survived a short outage"
    finally:
        op.stop()


def holder(bed: KubeTestBed, namespace: str) -> Any:
    lease = bed.get("coordination.k8s.io/v1", "Lease", "apprafter-operator", namespace) or {}
    return (lease.get("spec") or {}).get("holderIdentity")


def lease_transitions(bed: KubeTestBed, namespace: str) -> int:
    lease = bed.get("coordination.k8s.io/v1", "Lease", "apprafter-operator", namespace) or {}
    return int((lease.get("spec") or {}).get("leaseTransitions") or 0)


def test_two_replicas_one_reconciles_and_a_dead_leader_is_replaced(bed: KubeTestBed, tmp_path: Path) -> None:
    lease_ns = fresh_namespace(bed, "lease")
    timing = ("--leader-elect-lease-duration", "3", "--leader-elect-renew-deadline", "2",
              "--leader-elect-retry-period", "0.5", "--leader-elect-resource-namespace", lease_ns, *FAST)
    a = Operator(bed, tmp_path, (*timing, "--identity", "replica-a"), name="replica-a").start()
    b = Operator(bed, tmp_path, (*timing, "--identity", "replica-b"), name="replica-b").start()
    try:
        leader, standby = (a, b) if holder(bed, lease_ns) == "replica-a" else (b, a)
        assert holder(bed, lease_ns) == leader.name
        assert leader.readyz() == (200, "leading") and standby.readyz() == (200, "standby")
        ns = fresh_namespace(bed, "ha")
        apply(bed, cr(ns, SIMPLE, name="first"))
        wait_phase(bed, ns, "Ready", "first")
        assert leader.reconciles() > 0 and standby.reconciles() == 0
        assert leader.metric("apprafter_leader") == 1 and standby.metric("apprafter_leader") == 0

        transitions = lease_transitions(bed, lease_ns)
        leader.kill()
        wait("the standby to lead", lambda: standby.readyz() == (200, "leading") or None, 20)
        assert holder(bed, lease_ns) == standby.name
        assert lease_transitions(bed, lease_ns) == transitions + 1, "one handover, recorded on the Lease"
        apply(bed, cr(ns, SIMPLE, name="second"))
        wait_phase(bed, ns, "Ready", "second")
        assert standby.reconciles() > 0

        leader.start()  # the old leader comes back as a standby
        assert leader.readyz() == (200, "standby")
        assert standby.terminate() == 0  # a clean stop hands the lease back at once
        assert holder(bed, lease_ns) in (None, leader.name)
        wait("the restarted replica to lead", lambda: leader.readyz() == (200, "leading") or None, 10)
    finally:
        a.stop()
        b.stop()


def test_without_an_api_server_it_waits_unready_and_stops_cleanly(bed: KubeTestBed, tmp_path: Path) -> None:
    config = yaml.safe_load(bed.kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{free_port()}"
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    op = Operator(bed, tmp_path, ("--leader-elect-retry-period", "0.2", "--leader-elect-renew-deadline", "1",
                                  "--leader-elect-lease-duration", "2"), name="alone", kubeconfig=path)
    op.start(wait="up")
    try:
        wait("unready", lambda: op.readyz() == (503, "waiting for the lease") or None, 10)
        assert op.healthz() == 200 and op.alive()
        assert op.terminate() == 0
        assert "lease not acquired" in op.log()
    finally:
        op.stop()
