"""The API group and version of our kinds, the labels every object we write carries, and the words of what never
changes on our kinds in the cluster (the CRD's CEL rule and the webhook say the same): one place for each."""

from __future__ import annotations

from toolchain.record import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Literal

    # What the renderer emits: the Application CR (the plugin's default) or the objects it stands for.
    Mode = Literal["cr", "manifests"]
else:
    Mode = str  # a name to import at run time too; the values are MODES

__all__ = ["API_VERSION", "ENVIRONMENT_IMMUTABLE", "ENVIRONMENT_LABEL", "GROUP", "INSTANCE_LABEL", "MANAGED_BY",
           "MANAGED_BY_LABEL", "MODES", "NAME_LABEL", "OPERATOR_FIELD_MANAGER", "VERSION", "Mode", "as_mode"]

GROUP = "apprafter.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
ENVIRONMENT_LABEL = f"{GROUP}/environment"
# On a Secret: the Applications (comma- or space-separated names) whose pods may read it (lifecycle.secrets).
GRANT_ANNOTATION = f"{GROUP}/applications"
MANAGED_BY_LABEL, MANAGED_BY = "app.kubernetes.io/managed-by", "apprafter"
INSTANCE_LABEL = "app.kubernetes.io/instance"  # <app>-<env>: how the reconciler finds the children of one Application
NAME_LABEL = "app.kubernetes.io/name"
# The operator's server-side apply field manager (`apprafter operator --field-manager`'s default).
OPERATOR_FIELD_MANAGER = "apprafter-operator"
MODES: tuple[Mode, ...] = ("cr", "manifests")
# The plugin stamps spec.environment; switching it swaps the whole effective spec (spec §3.8): the CRD's CEL rule
# (renderer.crds) and the webhook's check (renderer.validate.check_update) refuse it in these words.
ENVIRONMENT_IMMUTABLE = ("is immutable: a different environment is a different deployment (<app>-<env>); "
                         "create a new Application instead")


def as_mode(value: str) -> Mode:
    """A value already checked against MODES, typed as a Mode (`typing.cast` without importing typing)."""
    assert value in MODES, value
    return value  # mypy narrows `in MODES` to the Literal
