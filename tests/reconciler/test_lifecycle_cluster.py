"""Around the gate: no-op resyncs write nothing, removed children are pruned, bad input is reported on its
Application and never stops the loop, a hand-written baseline is not trusted."""

from __future__ import annotations

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
from tests.testbed.gitops import paused
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


def resynced(operator: Operator, apps: int) -> None:
    """Wait for one more full resync: every Application reconciled once more (events add reconciles too)."""
    start = operator.reconciles()
    wait("a resync", lambda: operator.reconciles() >= start + apps or None, 30)


def settled(operator: Operator, apps: int, rounds: int = 10) -> float:
    """Resync until a whole round writes nothing (the work the test caused is done); the write count then."""
    last = operator.writes()
    for _ in range(rounds):
        resynced(operator, apps)
        now = operator.writes()
        if now == last:
            return now
        last = now
    raise AssertionError(f"the operator kept writing through {rounds} resyncs")


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
    apps = len(bed.http.get(f"/apis/{API}/applications").json()["items"])
    writes = settled(operator, apps)
    before = snapshot(bed, [ready, held, failed])
    resynced(operator, apps)
    resynced(operator, apps)
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
    other = ready_app(bed, INTERNAL)  # the next Application is reconciled (not public: demo's hostname is taken)
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
    assert ready_app(bed, INTERNAL) and operator.alive()


def test_an_unreadable_baseline_fails_closed(bed: KubeTestBed, operator: Operator) -> None:
    ns = ready_app(bed)
    kids = versions(children(bed, ns))
    spoofed = {**status(bed, ns)["lastAppliedSpec"], "replicas": "three"}
    # written under the operator's own field manager: only the content of the gate's baseline is wrong
    records = operator.records_namespace
    record = bed.get(API, "ApplicationBaseline", f"{ns}.demo.prod", records)
    assert record is not None
    bed.apply({**record, "spec": {**record["spec"], "effectiveSpec": spoofed},
               "metadata": {"name": record["metadata"]["name"], "namespace": records}},
              field_manager="apprafter-operator")
    # the operator watches baselines: it fails closed on the spoof itself (else a change applied before the spoof's
    # event arrived would be applied against the baseline it knew, and its baseline written over the spoof)
    # (a generous bound: under the full suite's load the baseline's watch event took longer than 30 s once)
    refused = condition(wait_phase(bed, ns, "Failed", timeout=120), "Ready")
    assert refused and refused["reason"] == "InvalidStatus"
    apply(bed, cr(ns, edit(replicas=5)))
    st = wait_phase(bed, ns, "Failed", timeout=120)
    ready = condition(st, "Ready")
    assert ready and ready["reason"] == "InvalidStatus"
    assert "the ApplicationBaseline's effectiveSpec.replicas" in ready["message"]
    assert versions(children(bed, ns)) == kids


def test_a_child_the_api_server_refuses_is_reported_and_retried(bed: KubeTestBed, operator: Operator) -> None:
    ns = fresh_namespace(bed, "life")
    errors = operator.metric("apprafter_reconcile_errors_total", controller="application")
    with paused(operator):  # the Deployment is the Application's (its controller) but with another selector
        uid = apply(bed, cr(ns, INTERNAL))["metadata"]["uid"]
        squatter = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
            "name": "demo", "namespace": ns, "ownerReferences": [{"apiVersion": API, "kind": "Application",
                                                                  "name": "demo", "uid": uid, "controller": True}]},
                    "spec": {"selector": {"matchLabels": {"made": "by-hand"}}, "template": {
                        "metadata": {"labels": {"made": "by-hand"}},
                        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}
        bed.apply(squatter, field_manager="kubectl")  # same name, another selector: immutable
    st = wait_phase(bed, ns, "Failed")
    ready = condition(st, "Ready")
    assert ready and ready["reason"] == "ApplyFailed"
    assert "Deployment" in ready["message"] and "immutable" in ready["message"]
    assert "lastAppliedSpec" not in st
    wait("the error counted",
         lambda: operator.metric("apprafter_reconcile_errors_total", controller="application") > errors or None)
    bed.delete("apps/v1", "Deployment", "demo", ns)
    wait_phase(bed, ns, "Ready", timeout=30)  # retried with backoff (capped at 2 s here)


def test_probes_and_metrics(operator: Operator) -> None:
    assert operator.healthz() == 200
    assert operator.readyz() == (200, "running")
    names = {name for name, _ in operator.metrics()}
    expected = {"apprafter_reconcile_total", "apprafter_reconcile_errors_total",
                "apprafter_reconcile_duration_seconds_bucket", "apprafter_kube_writes_total",
                "apprafter_workqueue_depth", "apprafter_watch_restarts_total", "apprafter_workqueue_adds_total",
                "apprafter_kube_requests_total"}
    assert expected <= names
    assert operator.metric("apprafter_reconcile_duration_seconds_count", controller="application") > 0
