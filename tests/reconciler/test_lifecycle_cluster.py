"""Around the gate: no-op resyncs write nothing, removed children are pruned, bad input is reported on its
Application and never stops the loop, a hand-written baseline is not trusted."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.reconciler.helpers import (
    API,
    BASE,
    app,
    apply,
    children,
    claims_when_created,
    condition,
    cr,
    edit,
    fresh_namespace,
    plans,
    status,
    versions,
    wait,
    wait_phase,
    write_status,
)
from tests.reconciler.operator_proc import Operator
from tests.testbed.kube import KubeTestBed

pytestmark = pytest.mark.testbed

INTERNAL = edit(expose={"port": 8080}, needs=None, env={"LOG_LEVEL": "info"},
                autoscale={"on": "cpu", "min": 1, "max": 3})


def ready_app(bed: KubeTestBed, base: dict[str, Any] | None = None) -> str:
    ns = fresh_namespace(bed, "life")
    apply(bed, cr(ns, base))
    needs = (base if base is not None else BASE).get("needs") or {}
    if needs:
        claims_when_created(bed, ns, [f"demo-{n}" for n in needs])
    wait_phase(bed, ns, "Ready")
    return ns


def settled(operator: Operator, quiet: float) -> float:
    """Wait until the operator has written nothing for `quiet` seconds; its write count then."""
    last, since = operator.writes(), time.monotonic()
    deadline = since + 60
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = operator.writes()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return now
    raise AssertionError("the operator kept writing")


def snapshot(bed: KubeTestBed, namespaces: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for ns in namespaces:
        out[ns] = (app(bed, ns)["metadata"]["resourceVersion"], versions(children(bed, ns)),
                   [(p["metadata"]["name"], p["metadata"]["resourceVersion"]) for p in plans(bed, ns)])
    return out


def test_a_resync_that_finds_nothing_to_change_writes_nothing(bed: KubeTestBed, operator: Operator) -> None:
    ready = ready_app(bed)
    held = ready_app(bed, INTERNAL)
    apply(bed, cr(held, edit(INTERNAL, expose={"port": 8080, "network": "public"})))
    wait_phase(bed, held, "AwaitingMigrationApproval")
    failed = fresh_namespace(bed, "life")
    apply(bed, cr(failed, edit(env={"bad-key": "x"})))
    wait_phase(bed, failed, "Failed")
    writes = settled(operator, quiet=2.5)  # the resync period is 2 s
    before = snapshot(bed, [ready, held, failed])
    reconciles = operator.reconciles()
    apps = len(bed.http.get(f"/apis/{API}/applications").json()["items"])
    wait("two resyncs", lambda: operator.reconciles() >= reconciles + 2 * apps or None, 30)
    assert operator.writes() == writes, "a no-op resync wrote to the API server"
    assert snapshot(bed, [ready, held, failed]) == before


def test_children_the_render_no_longer_has_are_deleted(bed: KubeTestBed, operator: Operator) -> None:
    ns = ready_app(bed, INTERNAL)
    assert {k for k, _ in children(bed, ns)} >= {"Service", "ScaledObject", "Deployment"}
    apply(bed, cr(ns, edit(INTERNAL, expose=None, autoscale=None)))  # soft: no public reachability removed
    wait_phase(bed, ns, "Ready")
    kinds = {k for k, _ in children(bed, ns)}
    assert "Service" not in kinds and "ScaledObject" not in kinds
    assert {"Deployment", "NetworkPolicy", "CiliumNetworkPolicy", "ServiceAccount"} <= kinds
    deployment = children(bed, ns)[("Deployment", "demo")]
    assert deployment["spec"]["replicas"] == 2  # autoscale gone: the Deployment owns the count again
    assert "ports" not in deployment["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize(("problem", "base", "field"), [
    ("wrong type", edit(env={"LOG_LEVEL": 5}), "spec.base.env.LOG_LEVEL"),
    ("unknown field", edit(env={"DATABASE_URL": {"claim": "pg/url", "extra": "x"}}), "spec.base.env.DATABASE_URL"),
    ("renderer rule", edit(env={"bad-key": "x"}), "bad-key"),
    ("undeclared need", edit(needs=None), "spec.base.env.DATABASE_URL"),
])
def test_bad_input_is_reported_on_its_application_and_the_loop_goes_on(bed: KubeTestBed, operator: Operator,
                                                                      problem: str, base: dict[str, Any],
                                                                      field: str) -> None:
    ns = ready_app(bed)
    kids = versions(children(bed, ns))
    applied = status(bed, ns)["lastAppliedSpec"]
    apply(bed, cr(ns, base))
    st = wait_phase(bed, ns, "Failed")
    ready = condition(st, "Ready")
    assert ready and ready["status"] == "False" and ready["reason"] == "InvalidSpec"
    assert field in ready["message"] and "spec.base.env" in ready["message"], ready["message"]
    assert st["lastAppliedSpec"] == applied
    assert versions(children(bed, ns)) == kids
    other = ready_app(bed)  # the next Application is reconciled
    assert status(bed, other)["phase"] == "Ready"
    assert operator.alive() and operator.healthz() == 200
    apply(bed, cr(ns))  # fixed: Ready again, nothing to re-apply
    wait_phase(bed, ns, "Ready")
    assert versions(children(bed, ns)) == kids


def test_an_environment_that_is_not_declared_is_reported(bed: KubeTestBed, operator: Operator) -> None:
    ns = fresh_namespace(bed, "life")
    obj = cr(ns)
    obj["spec"]["environments"] = {"staging": {}}
    apply(bed, obj)
    st = wait_phase(bed, ns, "Failed")
    assert "environment 'prod' is not declared" in condition(st, "Ready")["message"]  # type: ignore[index]
    assert children(bed, ns) == {}


def test_a_baseline_written_by_someone_else_is_not_trusted(bed: KubeTestBed, operator: Operator) -> None:
    ns = ready_app(bed)
    kids = versions(children(bed, ns))
    forged = {**status(bed, ns)["lastAppliedSpec"], "image": "ghcr.io/evil/demo:1.0.0"}
    write_status(bed, "Application", "demo", ns, {"lastAppliedSpec": forged}, manager="intruder")
    apply(bed, cr(ns, edit(image="ghcr.io/evil/demo:1.0.0")))  # would look ungated against the forged baseline
    st = wait_phase(bed, ns, "Failed")
    ready = condition(st, "Ready")
    assert ready and ready["reason"] == "InvalidStatus" and "intruder" in ready["message"]
    assert versions(children(bed, ns)) == kids
    assert plans(bed, ns) == []
    assert ready_app(bed) and operator.alive()


def test_an_unreadable_baseline_fails_closed(bed: KubeTestBed, operator: Operator) -> None:
    ns = ready_app(bed)
    kids = versions(children(bed, ns))
    spoofed = {**status(bed, ns)["lastAppliedSpec"], "replicas": "three"}
    # written under the operator's own status field manager: only the content is wrong
    write_status(bed, "Application", "demo", ns, {"lastAppliedSpec": spoofed}, manager="apprafter-operator-status",
                 merge=False)
    apply(bed, cr(ns, edit(replicas=5)))
    st = wait_phase(bed, ns, "Failed")
    ready = condition(st, "Ready")
    assert ready and ready["reason"] == "InvalidStatus"
    assert "status.lastAppliedSpec.replicas" in ready["message"]
    assert versions(children(bed, ns)) == kids


def test_a_child_the_api_server_refuses_is_reported_and_retried(bed: KubeTestBed, operator: Operator) -> None:
    ns = fresh_namespace(bed, "life")
    squatter = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "demo", "namespace": ns},
                "spec": {"selector": {"matchLabels": {"made": "by-hand"}}, "template": {
                    "metadata": {"labels": {"made": "by-hand"}},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}
    bed.apply(squatter, field_manager="kubectl")  # same name, another selector: immutable
    errors = operator.metric("apprafter_reconcile_errors_total", controller="application")
    apply(bed, cr(ns, INTERNAL))
    st = wait_phase(bed, ns, "Failed")
    ready = condition(st, "Ready")
    assert ready and ready["reason"] == "ApplyFailed"
    assert "Deployment" in ready["message"] and "immutable" in ready["message"]
    assert "lastAppliedSpec" not in st
    wait("the error counted", lambda: operator.metric("apprafter_reconcile_errors_total", controller="application") > errors
         or None)
    bed.delete("apps/v1", "Deployment", "demo", ns)
    wait_phase(bed, ns, "Ready", timeout=30)  # retried with backoff (capped at 2 s here)


def test_probes_and_metrics(operator: Operator) -> None:
    assert operator.healthz() == 200
    assert operator.readyz() == (200, "running")
    names = {name for name, _ in operator.metrics()}
    assert {"apprafter_reconcile_total", "apprafter_reconcile_errors_total", "apprafter_reconcile_duration_seconds_bucket",
            "apprafter_kube_writes_total", "apprafter_workqueue_depth", "apprafter_watch_restarts_total"} <= names
    assert operator.metric("apprafter_reconcile_duration_seconds_count", controller="application") > 0
