"""The cache holds each object deflated with its kind's first object as the dictionary: several times smaller than
the compact JSON it replaced (the operator's memory at 10,000 Applications is mostly this cache), read back exactly;
a Secret's bytes are never kept as a dictionary once the Secret is gone."""

from __future__ import annotations

import json
from typing import Any, cast

from controller_runtime.client import ALL_NAMESPACES, Kube
from controller_runtime.informer import Informer
from controller_runtime.kinds import GroupVersionKind

DEPLOYMENT = GroupVersionKind("apps/v1", "Deployment")
SECRET = GroupVersionKind("v1", "Secret")


def deployment(i: int) -> dict[str, Any]:
    """A Deployment as the API server returns one of ours: labels, a pod template, managedFields."""
    name = f"app-{i}"
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "apprafter"}
    template = {"metadata": {"labels": labels}, "spec": {"containers": [{
        "name": "app", "image": f"ghcr.io/team-{i % 7}/{name}:1.{i}.0", "ports": [{"containerPort": 8080}],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
        "env": [{"name": "LOG_LEVEL", "value": "info"}]}]}}
    fields = {"f:metadata": {"f:labels": {f"f:{k}": {} for k in labels}},
              "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {'k:{"name":"app"}': {
                  ".": {}, "f:image": {}, "f:name": {}, "f:ports": {}, "f:resources": {}, "f:env": {}}}}}}}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": f"ns-{i}", "uid": f"{i:08d}-8c1b-4a57-9d1e-2f3a4b5c6d7e",
                         "resourceVersion": str(1000 + i), "generation": 1, "labels": labels,
                         "creationTimestamp": "2026-12-07T20:00:00Z",
                         "managedFields": [{"manager": "apprafter-operator", "operation": "Apply",
                                            "apiVersion": "apps/v1", "time": "2026-12-07T20:00:00Z",
                                            "fieldsType": "FieldsV1", "fieldsV1": fields}]},
            "spec": {"replicas": 2, "selector": {"matchLabels": labels}, "template": template},
            "status": {"observedGeneration": 1, "replicas": 2, "readyReplicas": 2}}


def test_objects_are_stored_several_times_smaller_and_read_back_exactly() -> None:
    cache = Informer(cast(Kube, None), DEPLOYMENT)  # no server: fed by hand as a list would
    objects = [deployment(i) for i in range(200)]
    cache._replace(ALL_NAMESPACES, objects)
    assert [cache.get(o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects] == objects
    assert sorted(cache.items(), key=lambda o: o["metadata"]["uid"]) == objects
    compact = sum(len(json.dumps(o, separators=(",", ":"))) for o in objects)
    assert cache.stored_bytes() * 4 < compact, (cache.stored_bytes(), compact)


def test_a_secret_is_not_kept_as_a_dictionary_once_it_is_gone() -> None:
    cache = Informer(cast(Kube, None), SECRET)
    first = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "a", "resourceVersion": "1"},
             "data": {"password": "c2VjcmV0LXRoYXQtbXVzdC1nbw=="}}
    cache._replace(ALL_NAMESPACES, [first])
    assert cache.get("a", "s") == first
    cache._event("DELETED", first)
    assert cache.stored_bytes() == 0  # nothing of it left in the cache
