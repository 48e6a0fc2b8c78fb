"""Other writers: a field of a child taken over by another field manager (`kubectl scale`, an apply by someone
else) and a child deleted by hand are put back, with one DriftCorrected Event per drift and none on a resync that
found nothing."""

from __future__ import annotations

import json

import pytest

from tests.reconciler.helpers import apply, cr, edit, events, fresh_namespace, wait, wait_phase
from tests.reconciler.operator_proc import Operator
from tests.testbed.kube import KubeTestBed, _rejected

pytestmark = [pytest.mark.testbed, pytest.mark.faults]

SIMPLE = edit(needs=None, env={"LOG_LEVEL": "info"})


def deployment(bed: KubeTestBed, ns: str) -> dict:  # type: ignore[type-arg]
    found = bed.get("apps/v1", "Deployment", "demo", ns)
    assert found is not None
    return found


def notes(bed: KubeTestBed, ns: str) -> list[str]:
    return sorted(str(e.get("note")) for e in events(bed, ns, "DriftCorrected"))


def test_fields_taken_by_another_manager_and_a_deleted_child_are_put_back(bed: KubeTestBed,
                                                                           operator: Operator) -> None:
    ns = fresh_namespace(bed, "drift")
    apply(bed, cr(ns, SIMPLE))
    wait_phase(bed, ns, "Ready")
    assert notes(bed, ns) == []

    # kubectl scale: the scale subresource, its own field manager
    resp = bed.http.patch(f"/apis/apps/v1/namespaces/{ns}/deployments/demo/scale",
                          params={"fieldManager": "kubectl-scale"}, content=json.dumps({"spec": {"replicas": 7}}),
                          headers={"Content-Type": "application/merge-patch+json"})
    if resp.status_code >= 300:
        raise _rejected(resp, "scale")
    wait("replicas put back", lambda: deployment(bed, ns)["spec"]["replicas"] == 2 or None)
    wait("one DriftCorrected Event", lambda: notes(bed, ns) or None)
    assert notes(bed, ns) == ["Deployment demo was changed outside git (spec.replicas by kubectl-scale (scale)); put "
                              "back as declared"]

    # someone else's server-side apply of the container image (forced: it takes the field from us)
    live = deployment(bed, ns)
    container = live["spec"]["template"]["spec"]["containers"][0]
    bed.apply({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "demo", "namespace": ns},
               "spec": {"template": {"spec": {"containers": [{"name": container["name"],
                                                                "image": "ghcr.io/evil/miner:1"}]}}}},
              field_manager="intruder")
    wait("the image put back", lambda: deployment(bed, ns)["spec"]["template"]["spec"]["containers"][0]["image"]
         == container["image"] or None)
    wait("a second DriftCorrected Event", lambda: len(notes(bed, ns)) == 2 or None)
    assert (f"spec.template.spec.containers[{container['name']}].image by intruder" in
            " ".join(notes(bed, ns))), notes(bed, ns)

    # a child deleted by hand comes back (a new object: its own uid)
    service = bed.get("v1", "Service", "demo", ns)
    assert service is not None
    bed.delete("v1", "Service", "demo", ns)
    wait("the Service back", lambda: ((bed.get("v1", "Service", "demo", ns) or {}).get("metadata", {}).get("uid")
                                      not in (None, service["metadata"]["uid"])) or None)

    # resyncs that find nothing record nothing
    seen = operator.reconciles()
    wait("two more resyncs", lambda: operator.reconciles() >= seen + 2 or None)
    assert len(notes(bed, ns)) == 2

