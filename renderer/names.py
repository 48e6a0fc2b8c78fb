"""The API group and version of our kinds and the labels every object we write carries: one place for each."""

from __future__ import annotations

__all__ = ["API_VERSION", "ENVIRONMENT_LABEL", "GROUP", "INSTANCE_LABEL", "MANAGED_BY", "MANAGED_BY_LABEL",
           "NAME_LABEL", "OPERATOR_FIELD_MANAGER", "VERSION"]

GROUP = "apprafter.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
ENVIRONMENT_LABEL = f"{GROUP}/environment"
MANAGED_BY_LABEL, MANAGED_BY = "app.kubernetes.io/managed-by", "apprafter"
INSTANCE_LABEL = "app.kubernetes.io/instance"  # <app>-<env>: how the reconciler finds the children of one Application
NAME_LABEL = "app.kubernetes.io/name"
# The operator's server-side apply field manager (`apprafter operator --field-manager`'s default).
OPERATOR_FIELD_MANAGER = "apprafter-operator"
