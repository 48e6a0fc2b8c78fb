"""Platform objects: one ResourceClaim per need (§3.3), the KEDA ScaledObject for autoscale and one SealedSecret per
sealed secret the app ships (renderer.sealed)."""

from __future__ import annotations

from renderer.manifests.meta import Target, claim_name
from renderer.names import API_VERSION, GRANT_ANNOTATION
from toolchain.record import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

DEFAULT_SELECTOR = {"tier": "integrated"}
PARAMETER_FIELDS = ("streams", "buckets", "version", "mountPath")


def resource_claims(target: Target, eff: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for need, entry in sorted(eff.get("needs", {}).items()):
        spec: dict[str, Any] = {"type": need, "selector": dict(sorted(entry.get("selector", DEFAULT_SELECTOR).items()))}
        if "size" in entry:
            spec["size"] = entry["size"]
        parameters = {k: entry[k] for k in PARAMETER_FIELDS if k in entry}
        if parameters:
            spec["parameters"] = parameters
        out.append({"apiVersion": API_VERSION, "kind": "ResourceClaim",
                    "metadata": target.metadata(claim_name(target.app, need), need), "spec": spec})
    return out


def scaled_object(target: Target, eff: dict[str, Any]) -> dict[str, Any]:
    autoscale = eff["autoscale"]
    on = autoscale["on"]
    trigger: dict[str, Any]
    if on in ("cpu", "memory"):
        target_value = autoscale.get("target", 70)
        trigger = {"type": on, "metricType": "Utilization", "metadata": {"value": _num(target_value)}}
    else:  # jetstream_lag: validated to have needs.jetstream with a stream
        stream = eff["needs"]["jetstream"]["streams"][0]
        namespace = target.context.provider_namespace("jetstream")
        trigger = {"type": "nats-jetstream", "metadata": {
            "natsServerMonitoringEndpoint": f"nats.{namespace}.svc:8222", "account": "$G",
            "stream": stream, "consumer": target.app, "lagThreshold": _num(autoscale.get("target", 10))}}
    return {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "metadata": target.metadata(target.app, "app"),
            "spec": {"scaleTargetRef": {"name": target.app}, "minReplicaCount": autoscale["min"],
                     "maxReplicaCount": autoscale["max"], "triggers": [trigger]}}


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def sealed_secret(target: Target, name: str, encrypted: dict[str, str]) -> dict[str, Any]:
    """The SealedSecret the cluster's controller unseals into Secret `name` (strict scope: this namespace and name),
    its Secret labelled as the app's and granted to this app alone (lifecycle.secrets reads the grant)."""
    meta = target.metadata(name, "secret")
    template_meta: dict[str, Any] = {"name": name, "labels": meta["labels"],
                                     "annotations": {GRANT_ANNOTATION: target.app}}
    if target.namespace:
        template_meta["namespace"] = target.namespace
    return {"apiVersion": "bitnami.com/v1alpha1", "kind": "SealedSecret", "metadata": meta,
            "spec": {"encryptedData": dict(sorted(encrypted.items())),
                     "template": {"metadata": template_meta, "type": "Opaque"}}}
