"""Deployment and ServiceAccount: image, env references, probes and rollout, resources (never BestEffort), runtime
class, disk."""

from __future__ import annotations

from renderer import health
from renderer.manifests.meta import Target, connection_secret
from toolchain.record import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

# App seed per budget size (spec §4.5): low memory request + a present memory limit + a CPU request,
# no CPU limit. "small" applies when no budget is set.
BUDGET_SEEDS: dict[str, dict[str, dict[str, str]]] = {
    "nano": {"requests": {"cpu": "25m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
    "small": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
    "medium": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
    "large": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
    "xlarge": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}},
}
DEFAULT_BUDGET = "small"
DISK_MOUNT = "/data"


def resources(eff: dict[str, Any], warnings: list[str]) -> dict[str, Any]:
    """Explicit resources verbatim; otherwise the budget's seed. An explicit empty one falls back to the seed."""
    explicit = eff.get("resources")
    if explicit and (explicit.get("requests") or explicit.get("limits")):
        return {k: dict(sorted(v.items())) for k, v in sorted(explicit.items()) if v}
    if explicit is not None:
        warnings.append("resources sets neither requests nor limits: using the budget seed so the pod is "
                        "not BestEffort")
    seed = BUDGET_SEEDS[eff.get("budget", DEFAULT_BUDGET)]
    return {k: dict(v) for k, v in seed.items()}


def env_vars(target: Target, env: dict[str, Any]) -> list[dict[str, Any]]:
    """Literal values inline; claim and secret references as secretKeyRef (values never inlined)."""
    out: list[dict[str, Any]] = []
    for name in sorted(env):
        value = env[name]
        if isinstance(value, str):
            out.append({"name": name, "value": value})
        elif "claim" in value:
            need, _, field = value["claim"].partition("/")
            out.append({"name": name, "valueFrom": {"secretKeyRef": {
                "name": connection_secret(target.app, need), "key": field}}})
        else:
            secret, _, key = value["secret"].partition("/")
            out.append({"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}})
    return out


def service_account(target: Target) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": target.metadata(target.app),
            "automountServiceAccountToken": False}


def deployment(target: Target, eff: dict[str, Any], warnings: list[str]) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "app", "image": eff["image"]}
    if eff.get("command"):
        container["command"] = list(eff["command"])
    if eff.get("args"):
        container["args"] = list(eff["args"])
    if eff.get("env"):
        container["env"] = env_vars(target, eff["env"])
    expose = eff.get("expose")
    if expose:
        container["ports"] = [{"name": "http", "containerPort": expose["port"], "protocol": "TCP"}]
    container.update(health.container_probes(eff))
    drain = health.drain(eff, target.context)
    container.update(drain.container)
    container["resources"] = resources(eff, warnings)
    container["securityContext"] = {"allowPrivilegeEscalation": False}
    pod: dict[str, Any] = {
        "serviceAccountName": target.app,
        "automountServiceAccountToken": False,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        **drain.pod,
        "containers": [container],
    }
    disk = eff.get("needs", {}).get("disk")
    if disk is not None:
        container["volumeMounts"] = [{"name": "disk", "mountPath": disk.get("mountPath", DISK_MOUNT)}]
        pod["volumes"] = [{"name": "disk", "persistentVolumeClaim": {"claimName": f"{target.app}-disk"}}]
    if eff.get("confidential"):
        pod["runtimeClassName"] = target.context.confidential_runtime_class
        if not target.context.provides("confidential"):
            warnings.append(f"confidential: tier {target.context.tier!r} has no confidential runtime; pods "
                            f"ask for runtimeClassName {target.context.confidential_runtime_class!r} and will "
                            "not schedule until the cluster provides it")
    annotations: dict[str, str] = {}
    if eff.get("imagePolicy", {}).get("resolve") == "digest":
        annotations["apprafter.io/image-resolve"] = "digest"
        if eff["imagePolicy"].get("interval"):
            annotations["apprafter.io/image-resolve-interval"] = eff["imagePolicy"]["interval"]
    egress_ip = eff.get("network", {}).get("egressIP")
    pod_meta: dict[str, Any] = {"labels": target.labels("app")}
    if egress_ip and egress_ip.get("static"):
        if target.context.provides("static-egress-ip"):
            pod_meta["labels"] = {**pod_meta["labels"], "apprafter.io/egress-ip-pool":
                                  egress_ip.get("pool", "default")}
            pod_meta["labels"] = dict(sorted(pod_meta["labels"].items()))
        else:
            warnings.append(f"network.egressIP: tier {target.context.tier!r} has no egress-IP pools; traffic "
                            "leaves from the node's own (static) address and pool "
                            f"{egress_ip.get('pool', 'default')!r} is not used")
    spec: dict[str, Any] = {}
    if not eff.get("autoscale"):
        spec["replicas"] = eff.get("replicas", 1)
    spec.update({
        "progressDeadlineSeconds": health.progress_deadline(eff),
        "revisionHistoryLimit": 5,
        "selector": {"matchLabels": target.selector()},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": dict(health.ROLLING_UPDATE)},
        "template": {"metadata": pod_meta, "spec": pod},
    })
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": target.metadata(target.app, "app", annotations), "spec": spec}
