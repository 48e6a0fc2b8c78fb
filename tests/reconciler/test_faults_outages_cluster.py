"""Outages under a running operator, on a test bed of this module's own: etcd stopped and started again, the API
server restarted during a burst of changes, both replicas killed at once, the webhook (failurePolicy Fail) killed
during a burst. After each the operator converges and the invariants of tests/reconciler/faults.py hold."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from compatibility.application import deployment
from tests.admission.cluster import Webhook, configurations, register, unregister
from tests.reconciler.conftest import own_test_bed
from tests.reconciler.faults import SEED, check_invariants, rng
from tests.reconciler.helpers import apply, cr, edit, fresh_namespace, status, wait
from tests.reconciler.operator_proc import FAST, Operator
from tests.reconciler.test_restarts_cluster import all_in, holder, plans_per_app
from tests.testbed.gitops import chart_operator
from tests.testbed.kube import ApplyRejected, KubeTestBed
from tests.testbed.procs import BedError

pytestmark = [pytest.mark.testbed, pytest.mark.faults]

SIMPLE = edit(needs=None, env={"LOG_LEVEL": "info"})
GATED = edit(SIMPLE, image="ghcr.io/evil/demo:1.0.0")
SHORT_LEASE = ("--leader-elect-lease-duration", "3", "--leader-elect-renew-deadline", "2",
               "--leader-elect-retry-period", "0.5")


@pytest.fixture(scope="module")
def own_bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeTestBed]:
    """A test bed of its own (its etcd and API server go down): our CRDs and the child kinds' CRDs only."""
    with own_test_bed(Path(str(tmp_path_factory.mktemp("outages")))) as kube:
        yield kube


def targets(ns: str, specs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {n: dict(deployment(cr(ns, spec, name=n), "prod").spec) for n, spec in specs.items()}


def keep_applying(bed: KubeTestBed, obj: dict[str, Any]) -> None:
    """Apply as a user's tooling does through an outage: again until the API server takes it."""
    for _ in range(600):
        try:
            apply(bed, obj)
            return
        except (httpx.TransportError, ApplyRejected) as e:
            if isinstance(e, ApplyRejected) and e.code < 500 and e.code not in (0, 429):
                raise
            threading.Event().wait(0.1)
    raise AssertionError(f"never applied: {obj['metadata']}")


def converged(bed: KubeTestBed, ns: str, wanted: dict[str, dict[str, Any]], phase: str = "Ready") -> None:
    all_in(bed, ns, list(wanted), phase, timeout=120)
    for name, spec in wanted.items():
        assert status(bed, ns, name)["lastAppliedSpec"] == spec, f"seed {SEED}: {name}"
    check_invariants(bed, ns, wanted, {}, f"seed {SEED}")


def test_etcd_stopped_and_started_again(own_bed: KubeTestBed, tmp_path: Path) -> None:
    bed = own_bed
    lease_ns, ns = fresh_namespace(bed, "lease"), fresh_namespace(bed, "etcd")
    op = Operator(bed, tmp_path, (*SHORT_LEASE, "--leader-elect-resource-namespace", lease_ns, "--namespace", ns,
                                  *FAST), name="etcd").start()
    try:
        names = [f"a{i}" for i in range(6)]
        for n in names:
            apply(bed, cr(ns, SIMPLE, name=n))
        all_in(bed, ns, names, "Ready")
        bed.stop_etcd()
        try:
            # the outage lasts until the operator has noticed: it cannot renew its lease, steps down and exits 2
            # (its pod would be restarted); scripts/bench_faults.py measures a 20 s outage
            wait("the leader to step down", lambda: (not op.alive()) or None, 120)
            assert op.proc is not None and op.proc.popen.returncode == 2, op.log()[-2000:]
            assert "stepping down" in op.log() or "leadership lost" in op.log()
        finally:
            bed.start_etcd()
        op.start()  # what the kubelet does with an exited container
        specs = {n: edit(SIMPLE, replicas=3) for n in names}
        for n, spec in specs.items():
            apply(bed, cr(ns, spec, name=n))
        converged(bed, ns, targets(ns, specs))
        assert holder(bed, lease_ns) == op.name or holder(bed, lease_ns)
    finally:
        op.stop()


def test_the_api_server_restarted_during_a_burst(own_bed: KubeTestBed, tmp_path: Path) -> None:
    bed = own_bed
    draw = rng("burst")
    ns = fresh_namespace(bed, "burst")
    op = Operator(bed, tmp_path, ("--namespace", ns, *FAST), name="burst").start()
    try:
        old = [f"old{i}" for i in range(10)]
        for n in old:
            apply(bed, cr(ns, SIMPLE, name=n))
        all_in(bed, ns, old, "Ready")
        specs = {n: edit(SIMPLE, replicas=draw.randint(3, 6)) for n in old}
        specs.update({f"new{i}": SIMPLE for i in range(10)})
        order = list(specs)
        draw.shuffle(order)
        halfway, failures = threading.Event(), []

        def burst() -> None:
            try:
                for i, n in enumerate(order):
                    keep_applying(bed, cr(ns, specs[n], name=n))
                    if i == len(order) // 3:
                        halfway.set()
            except BaseException as e:  # reported by the main thread
                failures.append(e)
                halfway.set()

        writer = threading.Thread(target=burst)
        writer.start()
        assert halfway.wait(120)
        bed.restart_apiserver()  # from the main thread: the child dies with its starter
        writer.join(300)
        assert not writer.is_alive() and not failures, failures
        assert op.alive()
        converged(bed, ns, targets(ns, specs))
    finally:
        op.stop()


def test_both_replicas_killed_at_once(own_bed: KubeTestBed, tmp_path: Path) -> None:
    bed = own_bed
    lease_ns, ns = fresh_namespace(bed, "lease"), fresh_namespace(bed, "both")
    timing = (*SHORT_LEASE, "--leader-elect-resource-namespace", lease_ns, "--namespace", ns, *FAST)
    a = Operator(bed, tmp_path, (*timing, "--identity", "replica-a"), name="replica-a").start()
    b = Operator(bed, tmp_path, (*timing, "--identity", "replica-b"), name="replica-b").start()
    try:
        names = [f"a{i}" for i in range(8)]
        for n in names:
            apply(bed, cr(ns, SIMPLE, name=n))
        all_in(bed, ns, names, "Ready")
        assert holder(bed, lease_ns) in ("replica-a", "replica-b")
        a.kill()
        b.kill()
        specs = {n: (GATED if i % 2 else edit(SIMPLE, replicas=4)) for i, n in enumerate(names)}
        for n, spec in specs.items():  # while no replica runs
            apply(bed, cr(ns, spec, name=n))
        a.start(wait="up")
        b.start(wait="up")
        # the lease the dead leader held expires (by the new replicas' clocks), one of them takes it
        wait("one replica leading", lambda: sorted([a.readyz(), b.readyz()]) == [(200, "leading"), (200, "standby")]
             or None, 60)
        soft = {n: s for n, s in specs.items() if s is not GATED}
        held = {n: SIMPLE for n, s in specs.items() if s is GATED}
        all_in(bed, ns, list(soft), "Ready", timeout=120)
        all_in(bed, ns, list(held), "AwaitingMigrationApproval", timeout=120)
        check_invariants(bed, ns, {**targets(ns, soft), **targets(ns, held)}, {}, f"seed {SEED}")
        per_app = plans_per_app(bed, ns)
        assert sorted(per_app) == sorted(held) and all(len(v) == 1 for v in per_app.values()), per_app
        leader, standby = (a, b) if a.readyz() == (200, "leading") else (b, a)
        assert holder(bed, lease_ns) == leader.name and standby.reconciles() == 0
    finally:
        a.stop()
        b.stop()


def test_the_webhook_killed_during_a_burst(own_bed: KubeTestBed, tmp_path: Path) -> None:
    bed = own_bed
    ns = fresh_namespace(bed, "hook")
    hooks = [h for c in configurations("https://x", b"") for h in c["webhooks"]]
    assert hooks and all(h.get("failurePolicy") == "Fail" for h in hooks), "the chart's webhooks fail closed"
    webhook = Webhook(tmp_path / "webhook")
    webhook.start()
    register(bed, webhook.base_url, webhook.ca.pem)
    # the operator as the chart's ServiceAccount: the webhook lets only that user write status
    op = chart_operator(bed, tmp_path, ("--no-leader-elect", "--no-platform-stack", "--namespace", ns, *FAST),
                        (ns,), name="hooked")
    try:
        wait("the webhook answering through the API server",
             lambda: _admitted(bed, cr(ns, SIMPLE, name="probe")) or None, 60)
        op.start()
        names = [f"w{i}" for i in range(12)]
        for n in names[:4]:
            apply(bed, cr(ns, SIMPLE, name=n))
        assert webhook.process is not None
        webhook.process.popen.kill()  # kill -9
        webhook.process.popen.wait(10)
        refused = []
        for n in names[4:]:  # the rest of the burst while it is down: every write refused, nothing stored
            with pytest.raises(ApplyRejected) as caught:
                apply(bed, cr(ns, SIMPLE, name=n))
            assert "webhook" in str(caught.value), caught.value
            assert bed.get("apprafter.io/v1alpha1", "Application", n, ns) is None
            refused.append(n)
        with pytest.raises(ApplyRejected):  # an edit of an admitted one is refused as well
            apply(bed, cr(ns, edit(SIMPLE, replicas=5), name=names[0]))
        assert (bed.get("apprafter.io/v1alpha1", "Application", names[0], ns) or {})["metadata"]["generation"] == 1
        webhook.stop()
        webhook.start()
        for n in refused:  # the user's tooling tries again: everything flows
            keep_applying(bed, cr(ns, SIMPLE, name=n))
        converged(bed, ns, targets(ns, dict.fromkeys(["probe", *names], SIMPLE)))
    finally:
        op.stop()
        unregister(bed)
        webhook.stop()


def _admitted(bed: KubeTestBed, obj: dict[str, Any]) -> bool:
    try:
        apply(bed, obj)
        return True
    except (ApplyRejected, BedError):
        return False
