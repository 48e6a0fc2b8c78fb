"""CloudNativePG on the node tier: its operator installed as a cluster admin installs it, from upstream's release
manifest of the pinned version (CNPG_VERSION: CRDs, RBAC, webhooks, the Deployment; kept beside the binary by
tools/setup.sh build_cnpg_manager) with our images (the `cnpg` and `postgresql` images of `make images`), and a
StorageClass of the node's built-in host-path provisioner for the instances' volumes (tests/testbed/hostpath.py).
The operator runs as a pod in `cnpg-system` and manages its own webhook certificates as upstream's does (a CA and
a serving certificate in Secrets, the CA injected into its webhook configurations); the API server calls the
webhooks through their Service, so every Cluster, Database and role passes CloudNativePG's own defaulting and
validation."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml

from tests.testbed.node import STORAGE_CLASS, NodeTestBed
from toolchain.tools import TOOLS, tools_dir

API = "postgresql.cnpg.io/v1"
NAMESPACE = "cnpg-system"
DEPLOYMENT = "cnpg-controller-manager"
WEBHOOKS = (("MutatingWebhookConfiguration", "cnpg-mutating-webhook-configuration"),
            ("ValidatingWebhookConfiguration", "cnpg-validating-webhook-configuration"))
UPSTREAM_IMAGE = "ghcr.io/cloudnative-pg/cloudnative-pg"


def manifest() -> Path:
    """Upstream's install manifest at the pin (tools/setup.sh keeps it beside the `cnpg-manager` binary)."""
    pin = TOOLS["cnpg-manager"].pinned
    return tools_dir() / "cnpg-manager" / pin / f"cnpg-{pin.removeprefix('v')}.yaml"


@dataclasses.dataclass(frozen=True)
class CloudNativePG:
    """An installed operator: the image names its pods and the Clusters use."""

    operator_image: str
    postgres_image: str
    storage_class: str = STORAGE_CLASS  # the node's default: its host-path provisioner's
    pgbouncer_image: str = ""  # the Poolers' (`make images`' pgbouncer), when the module imported it


def _with_our_images(doc: dict[str, Any], operator_image: str, postgres_image: str) -> dict[str, Any]:
    """The Deployment runs our operator image (no registry: IfNotPresent), names it as the image of every
    instance's `bootstrap-controller` (OPERATOR_IMAGE_NAME) and our PostgreSQL image as the default operand."""
    if doc.get("kind") != "Deployment":
        return doc
    container = doc["spec"]["template"]["spec"]["containers"][0]
    container["image"], container["imagePullPolicy"] = operator_image, "IfNotPresent"
    env = [e for e in container["env"] if e["name"] not in ("OPERATOR_IMAGE_NAME", "POSTGRES_IMAGE_NAME")]
    container["env"] = [{"name": "OPERATOR_IMAGE_NAME", "value": operator_image},
                        {"name": "POSTGRES_IMAGE_NAME", "value": postgres_image}, *env]
    return doc


def install(node: NodeTestBed, operator_image: str, postgres_image: str, pgbouncer_image: str = "", *,
            timeout: float = 240) -> CloudNativePG:
    """Install the operator (images already imported into the node); returns once the
    operator's pod is Ready and its CA is in both webhook configurations (so the API server can call them)."""
    node.install_crds([manifest()], timeout=timeout)
    with manifest().open() as source:
        docs = [d for d in yaml.safe_load_all(source) if d and d.get("kind") != "CustomResourceDefinition"]
    for doc in sorted(docs, key=lambda d: d["kind"] != "Namespace"):
        node.apply(_with_our_images(doc, operator_image, postgres_image), field_manager="apprafter-testbed")
    node.wait_condition("apps/v1", "Deployment", DEPLOYMENT, NAMESPACE, "Available", timeout=timeout)
    for kind, name in WEBHOOKS:
        node.wait("admissionregistration.k8s.io/v1", kind, name, None,
                  lambda o: all(w.get("clientConfig", {}).get("caBundle") for w in o.get("webhooks", [])),
                  timeout=timeout, what=f"{kind} {name} with the operator's CA")
    return CloudNativePG(operator_image, postgres_image, pgbouncer_image=pgbouncer_image)


def uninstall(node: NodeTestBed) -> None:
    """Remove the operator, its webhooks and cluster-wide RBAC (the CRDs stay: the bed's own pinned set)."""
    with manifest().open() as source:
        docs = [d for d in yaml.safe_load_all(source) if d and d.get("kind") != "CustomResourceDefinition"]
    for doc in docs:
        if doc["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "ClusterRole",
                           "ClusterRoleBinding"):
            node.delete(doc["apiVersion"], doc["kind"], doc["metadata"]["name"])
    node.delete_namespace(NAMESPACE)


def cluster_ready(obj: dict[str, Any]) -> Any:
    """A Cluster whose `Ready` condition is True for its current spec, with every instance ready."""
    status = obj.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    return obj if ready and status.get("readyInstances") == obj["spec"]["instances"] else None


def roles_reconciled(*names: str) -> Any:
    """A predicate: every managed role in `names` is reconciled in PostgreSQL."""
    def check(obj: dict[str, Any]) -> Any:
        roles = ((obj.get("status") or {}).get("managedRolesStatus") or {})
        reconciled = set((roles.get("byStatus") or {}).get("reconciled") or [])
        return obj if set(names) <= reconciled and not roles.get("cannotReconcile") else None
    return check


def database_applied(obj: dict[str, Any]) -> Any:
    """A Database CR that CloudNativePG applied for its current generation."""
    status = obj.get("status") or {}
    return obj if status.get("applied") is True and \
        status.get("observedGeneration") == obj["metadata"]["generation"] else None
