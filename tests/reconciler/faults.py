"""What the fault tier shares: its seed, the children an Application's spec renders, and the invariants checked
after every fault (docs/test-bed.md, "The fault tier")."""

from __future__ import annotations

import functools
import json
import os
import random
from collections.abc import Mapping
from typing import Any

from compatibility.inputs import parse_cr
from renderer.effective import spec_for
from renderer.render import render_loaded
from tests.reconciler.helpers import API, children, cr, plans
from tests.testbed.kube import KubeTestBed

SEED_ENV = "APPRAFTER_FAULT_SEED"
CI_SEED = 25  # CI replays one fixed run (as hypothesis does there); developers draw a fresh seed each run


def fault_seed() -> int:
    """The seed of this run: APPRAFTER_FAULT_SEED, else CI_SEED in CI, else a fresh one (printed in the header)."""
    raw = os.environ.get(SEED_ENV, "").strip()
    if raw:
        return int(raw)
    return CI_SEED if os.environ.get("CI") else random.SystemRandom().randrange(1 << 31)


SEED = fault_seed()


def rng(test: str) -> random.Random:
    """One generator per test, from the run's seed and the test's name: a test replays alone as in the tier."""
    return random.Random(f"{SEED}:{test}")


Shape = tuple[frozenset[tuple[str, str]], str | None, int | None]  # children (kind, name), image, replicas


@functools.lru_cache(maxsize=512)
def _shape(namespace: str, name: str, effective_json: str) -> Shape:
    doc = cr(namespace, name=name, base={}, override={})
    doc["spec"] = spec_for("prod", json.loads(effective_json))
    objects = render_loaded(parse_cr(json.dumps(doc), name, strict_json=True), "prod", "manifests",
                            namespace).objects
    return _of({(o["kind"], o["metadata"]["name"]): o for o in objects})


def rendered(namespace: str, name: str, effective: Mapping[str, Any]) -> Shape:
    """What the operator applies for the effective spec `effective` (lastAppliedSpec's form)."""
    return _shape(namespace, name, json.dumps(effective, sort_keys=True))


def _of(objects: Mapping[tuple[str, str], Mapping[str, Any]]) -> Shape:
    deployment = next((o for (kind, _), o in objects.items() if kind == "Deployment"), None)
    spec = (deployment or {}).get("spec") or {}
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or [{}]
    return frozenset(objects), containers[0].get("image"), spec.get("replicas")


def live(bed: KubeTestBed, namespace: str, name: str) -> Shape:
    found = children(bed, namespace, f"{name}-prod")
    shape = _of(found)
    # the API server defaults replicas to 1 where the render leaves them to an autoscaler: compare what we set
    if not any(kind == "Deployment" for kind, _ in shape[0]):
        return shape
    deployment = next(o for (kind, _), o in found.items() if kind == "Deployment")
    ours = any("f:replicas" in json.dumps(m.get("fieldsV1", {})) for m in deployment["metadata"].get(
        "managedFields", []) if m.get("manager") == "apprafter-operator")
    return shape[0], shape[1], shape[2] if ours else None


def applications(bed: KubeTestBed, namespace: str) -> dict[str, dict[str, Any]]:
    items = bed.http.get(f"/apis/{API}/namespaces/{namespace}/applications").json()["items"]
    return {a["metadata"]["name"]: a for a in items}


def check_invariants(bed: KubeTestBed, namespace: str, targets: Mapping[str, Mapping[str, Any]],
                     applied_at: dict[str, str], where: str) -> None:
    """After any fault: (1) at most one open plan per Application; (2) the children are those of lastAppliedSpec or
    of the spec being applied (never of an older generation), and exactly lastAppliedSpec's once the status says
    Ready for the current generation; (3) a plan's appliedAt, once set, never changes (no approval consumed twice).
    `targets` is what each Application is being moved to (its effective spec)."""
    per_app: dict[str, list[str]] = {}
    for plan in plans(bed, namespace):
        meta, phase = plan["metadata"], (plan.get("status") or {}).get("phase")
        if phase not in ("applied", "rejected"):
            per_app.setdefault(meta["labels"]["app.kubernetes.io/name"], []).append(meta["name"])
        at = (plan.get("status") or {}).get("appliedAt")
        if at:
            assert applied_at.setdefault(meta["name"], at) == at, f"{where}: {meta['name']} applied twice"
    assert all(len(v) <= 1 for v in per_app.values()), f"{where}: duplicate open MigrationPlans {per_app}"
    for name, app in applications(bed, namespace).items():
        if name not in targets:
            continue
        status = app.get("status") or {}
        baseline = status.get("lastAppliedSpec")
        now = live(bed, namespace, name)
        if baseline is None:
            assert status.get("phase") != "Ready", f"{where}: {name} Ready without a baseline"
            continue
        allowed = {rendered(namespace, name, baseline), rendered(namespace, name, targets[name])}
        wanted_names = set().union(*(a[0] for a in allowed))
        assert now[0] <= wanted_names, f"{where}: {name} has children of another generation: " \
                                       f"{sorted(now[0] - wanted_names)}"
        assert (now[1], now[2]) in {(a[1], a[2]) for a in allowed}, \
            f"{where}: {name}'s Deployment {now[1:]} is neither lastAppliedSpec's nor the target's"
        if status.get("phase") == "Ready" and status.get("observedGeneration") == app["metadata"]["generation"]:
            assert now == rendered(namespace, name, baseline), \
                f"{where}: {name} says Ready for generation {status['observedGeneration']}, children differ"


FLOWCONTROL = "flowcontrol.apiserver.k8s.io/v1"


def throttle(bed: KubeTestBed, name: str, account: tuple[str, str]) -> str:
    """API Priority and Fairness sending every request of ServiceAccount (namespace, name) to a priority level of
    its own with one nominal share (the fewest seats the server gives), no lending or borrowing, the excess
    rejected with 429: the FlowSchema's uid (a reply names it once the server has taken the settings up)."""
    namespace, sa = account
    bed.apply({"apiVersion": FLOWCONTROL, "kind": "PriorityLevelConfiguration", "metadata": {"name": name},
               "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 1, "lendablePercent": 0,
                                                        "borrowingLimitPercent": 0,
                                                        "limitResponse": {"type": "Reject"}}}})
    schema = bed.apply({"apiVersion": FLOWCONTROL, "kind": "FlowSchema", "metadata": {"name": name},
                        "spec": {"matchingPrecedence": 100, "priorityLevelConfiguration": {"name": name},
                                 "distinguisherMethod": {"type": "ByUser"},
                                 "rules": [{"subjects": [{"kind": "ServiceAccount", "serviceAccount": {
                                     "name": sa, "namespace": namespace}}],
                                     "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                                        "clusterScope": True, "namespaces": ["*"]}],
                                     "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}})
    return str(schema["metadata"]["uid"])


def unthrottle(bed: KubeTestBed, name: str) -> None:
    for kind in ("FlowSchema", "PriorityLevelConfiguration"):
        bed.delete(FLOWCONTROL, kind, name)
