"""What the node tier's backend tests share: an Application Ready at its generation, a pod finished, and a client
pod that runs one shell script with an app's connection Secret as its environment."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def ready(obj: dict[str, Any]) -> Any:
    """The Application, once Ready at its current generation (else None: node.wait's probe)."""
    status = obj.get("status") or {}
    return obj if status.get("observedGeneration") == obj["metadata"]["generation"] and \
        status.get("phase") == "Ready" else None


def finished(obj: dict[str, Any]) -> Any:
    """The pod, once it ran to its end (either way)."""
    return obj if (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed") else None


def secret_env(secret: str, keys: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """Env variables (name, key) read from the keys of `secret`."""
    return [{"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}} for name, key in keys]


def client_pod(name: str, namespace: str, image: str, script: str, env: list[dict[str, Any]],
               uid: int) -> dict[str, Any]:
    """A pod that runs `script` once as `uid` (never restarted; no token, no service links)."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": {
        "restartPolicy": "Never", "automountServiceAccountToken": False, "enableServiceLinks": False,
        "containers": [{"name": "client", "image": image, "imagePullPolicy": "Never", "command": ["sh", "-c", script],
                        "env": env, "securityContext": {"runAsUser": uid, "allowPrivilegeEscalation": False}}]}}
