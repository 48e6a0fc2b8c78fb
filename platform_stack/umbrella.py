"""The umbrella Argo CD Application (spec §3.10, §3.11): the one root Application from which Argo CD installs the
platform-stack chart at the version the PlatformStack controller verified. Pure: what to apply, from what runs.

The chart is named by the digest cosign verified, through Argo CD's native OCI source (Argo CD >= 3.1:
`repoURL: oci://host/path/chart`, `targetRevision: sha256:...`, `path: .`), so what Argo CD pulls is byte for byte
what was verified, whatever the tag names later. The controller still re-resolves the tag on every check and turns
automated sync off when it moved (a second line, and an alarm: docs/platform-stack.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from renderer.names import GROUP, MANAGED_BY, MANAGED_BY_LABEL, NAME_LABEL

if TYPE_CHECKING:
    from platform_stack.check_result import Baseline

__all__ = ["API_VERSION", "DIGEST_ANNOTATION", "KIND", "LABELS", "NAME", "NAMESPACE", "VALUE_KEYS",
           "VERSION_ANNOTATION", "of", "umbrella"]

API_VERSION, KIND = "argoproj.io/v1alpha1", "Application"
NAME, NAMESPACE = "apprafter-platform", "argocd"
LABELS = {MANAGED_BY_LABEL: MANAGED_BY, NAME_LABEL: NAME}
VERSION_ANNOTATION, DIGEST_ANNOTATION = f"{GROUP}/stack-version", f"{GROUP}/stack-digest"
VALUE_KEYS = ("tier", "domain", "multitenancy")  # PlatformStack spec.values: the chart's top-level values
IN_CLUSTER = "https://kubernetes.default.svc"


def umbrella(repository: str, version: str, digest: str, values: Mapping[str, Any], overrides: Mapping[str, Any],
             *, automated: bool) -> dict[str, Any]:
    """The umbrella Application for chart `repository` (host/path/<chart>) at `version`, pulled as `digest` (the
    verified one), with the chart values of spec.values and spec.overrides (passed through: the chart's overrides
    have the shape of PlatformStack spec.overrides). Without `automated`, Argo CD syncs only when someone asks."""
    values_object: dict[str, Any] = {k: values[k] for k in VALUE_KEYS if k in values}
    if overrides:
        values_object["overrides"] = {k: dict(v) for k, v in sorted(overrides.items())}
    # An OCI Helm chart is unpacked at the root of the artifact: path "." (Argo CD's OCI source documentation).
    source: dict[str, Any] = {"repoURL": f"oci://{repository.removeprefix('oci://')}", "targetRevision": digest,
                              "path": "."}
    if values_object:
        source["helm"] = {"valuesObject": values_object}
    spec: dict[str, Any] = {"project": "default", "source": source,
                            "destination": {"server": IN_CLUSTER, "namespace": NAMESPACE}}
    if automated:
        spec["syncPolicy"] = {"automated": {"prune": True, "selfHeal": True}}
    return {"apiVersion": API_VERSION, "kind": KIND,
            "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": dict(LABELS),
                         "annotations": {VERSION_ANNOTATION: version, DIGEST_ANNOTATION: digest}},
            "spec": spec}


def of(base: Baseline, *, automated: bool) -> dict[str, Any]:
    """The umbrella Application that runs `base`: its version by digest, with the values and overrides it records.
    The PlatformStack controller writes it for what it applied, cluster-bootstrap for what the controller's first
    apply will record (lifecycle.bootstrap): one Application, whoever writes it first."""
    return umbrella(base.repository, base.version, base.digest, base.values, base.overrides, automated=automated)
