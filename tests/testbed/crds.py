"""The CRDs every test bed serves: the pinned sources' (toolchain.tools.crd_files: Gateway API, KEDA, Cilium, Argo CD,
CloudNativePG, cert-manager) and the SealedSecret CRD the set-up keeps beside the SealedSecrets controller (a kind the
renderer emits: an app's sealed secrets, renderer.sealed)."""

from __future__ import annotations

from pathlib import Path

from toolchain.tools import crd_files, resolve

__all__ = ["bed_crd_files", "sealed_secret_crd"]


def sealed_secret_crd() -> Path:
    """helm/sealed-secrets/crds/ of the controller's module, as the set-up copies it beside the binary."""
    return resolve("sealed-secrets-controller").resolve().parent / "bitnami.com_sealedsecrets.yaml"


def bed_crd_files() -> list[Path]:
    """Every CRD a bed installs (ToolError naming a missing one, as crd_files)."""
    return [*crd_files(), sealed_secret_crd()]
