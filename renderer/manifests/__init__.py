"""`manifests` mode: the Kubernetes objects the reconciler applies for one environment of an Application."""

from __future__ import annotations

from toolchain.record import Record


class Kind(Record):  # a Record, not a dataclass or typing.NamedTuple: start-up (toolchain.record)
    """A kind manifests mode emits, with the plural the API serves it under."""

    api_version: str
    kind: str
    plural: str


# Every kind manifests mode can emit: what the reconciler applies, watches and may prune (nothing else).
KINDS: tuple[Kind, ...] = (
    Kind("v1", "ServiceAccount", "serviceaccounts"),
    Kind("apprafter.io/v1alpha1", "ResourceClaim", "resourceclaims"),
    Kind("apps/v1", "Deployment", "deployments"),
    Kind("v1", "Service", "services"),
    Kind("gateway.networking.k8s.io/v1", "HTTPRoute", "httproutes"),
    Kind("cert-manager.io/v1", "Certificate", "certificates"),
    Kind("gateway.networking.k8s.io/v1beta1", "ReferenceGrant", "referencegrants"),
    Kind("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies"),
    Kind("cilium.io/v2", "CiliumNetworkPolicy", "ciliumnetworkpolicies"),
    Kind("keda.sh/v1alpha1", "ScaledObject", "scaledobjects"),
    Kind("bitnami.com/v1alpha1", "SealedSecret", "sealedsecrets"),
)
CLAIM = KINDS[1]
HTTPROUTE = KINDS[4]
