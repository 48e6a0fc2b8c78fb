"""Each example app in each environment, reconciled by `apprafter operator`: its children are exactly what
`apprafter render --mode manifests` prints, owned by the Application, applied by the operator's field manager."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from controller_runtime.compare import covers
from tests.reconciler.helpers import (
    app,
    apply,
    children,
    claims_when_created,
    condition,
    fresh_namespace,
    wait_phase,
)
from tests.reconciler.operator_proc import Operator
from tests.renderer.helpers import EXAMPLES, run_cli
from tests.testbed.kube import KubeTestBed

pytestmark = pytest.mark.testbed

CASES = [("parser", "parser", env) for env in ("dev", "staging", "prod")] + \
        [("webapp", "shop", env) for env in ("staging", "prod")] + \
        [("worker", "ingest-worker", env) for env in ("dev", "prod")]


def render(example: str, env: str, mode: str, namespace: str) -> list[dict[str, Any]]:
    result = run_cli("render", str(EXAMPLES / example), "--env", env, "--mode", mode, "--namespace", namespace)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


@pytest.mark.parametrize(("example", "name", "env"), CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_children_equal_render_and_are_owned(bed: KubeTestBed, operator: Operator, example: str, name: str,
                                             env: str) -> None:
    ns = fresh_namespace(bed, example)
    [application] = render(example, env, "cr", ns)
    want = {(o["kind"], o["metadata"]["name"]): o for o in render(example, env, "manifests", ns)}
    apply(bed, application)
    claims = [n for kind, n in want if kind == "ResourceClaim"]
    if claims:
        # this bed has no ServiceProvider: every claim binds to none, which fails the Application at once (issue 42)
        st = wait_phase(bed, ns, "Failed", name)
        assert condition(st, "ClaimsReady")["status"] == "False"  # type: ignore[index]
        assert condition(st, "Ready")["reason"] == "Unbound"  # type: ignore[index]
        waiting = children(bed, ns, f"{name}-{env}")
        assert {kind for kind, _ in waiting} == {"ResourceClaim"}, "no workload objects before the claims are ready"
        claims_when_created(bed, ns, claims)
    st = wait_phase(bed, ns, "Ready", name)
    ready = condition(st, "Ready")
    assert ready is not None and ready["reason"] == "Available"  # the rollout stand-in marked the Deployment so
    deployment = next(o for o in want.values() if o["kind"] == "Deployment")
    replicas = deployment["spec"].get("replicas", 1)  # an autoscaled app leaves them to KEDA: the API's default
    assert st["replicas"] == {"desired": replicas, "updated": replicas, "ready": replicas, "available": replicas}
    assert ready["message"].startswith(f"{replicas}/{replicas} replicas available; {len(want)} objects applied")
    route = next((o for o in want.values() if o["kind"] == "HTTPRoute"), None)
    assert st.get("url") == (f"https://{route['spec']['hostnames'][0]}/" if route else None)
    uid = app(bed, ns, name)["metadata"]["uid"]
    live = children(bed, ns, f"{name}-{env}")
    assert sorted(live) == sorted(want)
    for key, desired in want.items():
        obj = live[key]
        assert covers(obj, desired), f"{key}: live object differs from `apprafter render --mode manifests`"
        assert obj["metadata"]["ownerReferences"] == [{
            "apiVersion": "apprafter.io/v1alpha1", "kind": "Application", "name": name, "uid": uid,
            "controller": True, "blockOwnerDeletion": True}]
        managers = {(m["manager"], m["operation"]) for m in obj["metadata"]["managedFields"]
                    if m.get("subresource", "") == ""}
        assert ("apprafter-operator", "Apply") in managers
    assert st["image"] == next(o for o in want.values() if o["kind"] == "Deployment")[
        "spec"]["template"]["spec"]["containers"][0]["image"]
