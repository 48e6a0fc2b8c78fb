"""The bare API server's stand-in for kube-controller-manager's Deployment controller: every Deployment of ours is
marked rolled out (observedGeneration caught up, every replica updated, ready and available, the conditions the
controller sets when a rollout completes) as soon as it is written, so that the operator's health sees a
workload that runs. Only for the bare `kube` bed, which runs no controllers and no kubelet: the node tier
(tests/testbed/node.py) runs the real ones, and every health the operator earns from pods is proven there
(tests/reconciler/test_health_node.py)."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from typing import Any

import httpx

from tests.testbed.kube import KubeTestBed, ssl_context

log = logging.getLogger("apprafter.testbed.rollouts")
MANAGER = "rollout-stand-in"  # the field manager of what it writes
SELECTOR = "app.kubernetes.io/managed-by=apprafter"
PATH = "/apis/apps/v1/deployments"


def rolled_out_status(deployment: Mapping[str, Any]) -> dict[str, Any]:
    """The status the Deployment controller writes once a rollout completed with every replica available."""
    replicas = (deployment.get("spec") or {}).get("replicas", 1)
    counts = {k: replicas for k in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas")}  # 0: unset
    condition = {"lastUpdateTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    return {"observedGeneration": deployment["metadata"]["generation"], **counts, "conditions": [
        {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
         "message": "Deployment has minimum availability.", **condition},
        {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
         "message": "ReplicaSet has successfully progressed (rollout stand-in).", **condition}]}


def _behind(deployment: Mapping[str, Any]) -> bool:
    status = deployment.get("status") or {}
    return bool(status.get("observedGeneration") != deployment["metadata"].get("generation")
                or status.get("replicas", 0) != (deployment.get("spec") or {}).get("replicas", 1))


class RolloutStandIn:
    """A thread watching every Deployment labelled as ours, writing its rolled-out status; `stop()` ends it."""

    def __init__(self, bed: KubeTestBed) -> None:
        self.bed = bed
        self.http = httpx.Client(base_url=bed.url, verify=ssl_context(bed.ca_path),
                                 timeout=httpx.Timeout(30, read=None), headers={"Authorization": f"Bearer {bed.token}"})
        self.stopped = threading.Event()
        self.written = 0
        self.thread = threading.Thread(target=self._run, name="rollout-stand-in", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped.is_set():
            try:
                listed = self.http.get(PATH, params={"labelSelector": SELECTOR})
                listed.raise_for_status()
                body = listed.json()
                for item in body["items"]:
                    self._mark(item)
                self._watch(body["metadata"]["resourceVersion"])
            except (httpx.HTTPError, KeyError, ValueError) as exc:  # an API server restart: list again
                log.debug("rollout stand-in: %s", exc)
                self.stopped.wait(0.2)

    def _watch(self, version: str) -> None:
        params = {"labelSelector": SELECTOR, "watch": "1", "resourceVersion": version, "allowWatchBookmarks": "false"}
        with self.http.stream("GET", PATH, params=params) as stream:
            for line in stream.iter_lines():
                if self.stopped.is_set():
                    return
                if not line:
                    continue
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    return  # 410 Gone: list again
                if event.get("type") in ("ADDED", "MODIFIED"):
                    self._mark(event["object"])

    def _mark(self, deployment: Mapping[str, Any]) -> None:
        if not _behind(deployment) or deployment["metadata"].get("deletionTimestamp"):
            return
        meta = deployment["metadata"]
        resp = self.http.patch(f"/apis/apps/v1/namespaces/{meta['namespace']}/deployments/{meta['name']}/status",
                               params={"fieldManager": MANAGER},
                               content=json.dumps({"status": rolled_out_status(deployment)}).encode(),
                               headers={"Content-Type": "application/merge-patch+json"})
        if resp.status_code < 300:
            self.written += 1
        elif resp.status_code != 404:
            log.warning("rollout stand-in: %s/%s: %s %s", meta["namespace"], meta["name"], resp.status_code,
                        resp.text[:300])

    def stop(self) -> None:
        self.stopped.set()
        self.http.close()
        self.thread.join(5)


def start_rollouts(bed: KubeTestBed) -> RolloutStandIn:
    """Play the Deployment controller on a bed that runs none (never on a NodeTestBed: it has the real one)."""
    from tests.testbed.node import NodeTestBed

    if isinstance(bed, NodeTestBed):
        raise TypeError("the node bed runs the real Deployment controller: no stand-in there")
    return RolloutStandIn(bed)
