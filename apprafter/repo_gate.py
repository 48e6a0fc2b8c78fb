"""The MigrationPlan a SourceCredential change will wait for, predicted by `apprafter repo creds add --upsert` and
`remove` before they write: the operator's own function (lifecycle.credentials.gate.planned) over the same users,
read from the cluster (Argo CD's Applications, our Deployments), so the name and hash printed are the plan's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from compatibility.migrationplan import name as plan_name
from compatibility.text import approve_command
from controller_runtime.kinds import GroupVersionKind
from lifecycle.credentials.coverage import users
from lifecycle.credentials.gate import planned

if TYPE_CHECKING:  # the client is imported when a command runs: `--help` never pays for it
    from compatibility.plan import Plan
    from controller_runtime.client import Kube

__all__ = ["predicted", "waits"]

ARGO_APPLICATION = GroupVersionKind("argoproj.io/v1alpha1", "Application")
DEPLOYMENT = GroupVersionKind("apps/v1", "Deployment")


async def predicted(kube: Kube, live: Mapping[str, Any] | None, desired: Mapping[str, Any] | None,
                    argocd_namespace: str) -> Plan | None:
    """The gated plan the operator will make of changing `live` into `desired` (None: deleting it); None when
    nothing is held (no credential yet, or nobody loses coverage)."""
    from controller_runtime.client import ALL_NAMESPACES
    from controller_runtime.errors import KubeError
    from renderer.names import MANAGED_BY, MANAGED_BY_LABEL

    if live is None:
        return None
    try:
        argo, _ = await kube.list(ARGO_APPLICATION, argocd_namespace)
    except KubeError as e:
        if e.code != 404:
            raise
        argo = []  # Argo CD is not installed: no Application syncs anything
    deployments, _ = await kube.list(DEPLOYMENT, ALL_NAMESPACES, {MANAGED_BY_LABEL: MANAGED_BY})
    result = planned(live, desired, users(argo, deployments))
    return result if result is not None and result.gated else None


def waits(result: Plan, namespace: str) -> str:
    """What a held change says: the plan, its hash, who loses coverage, and the command that approves it."""
    assert result.approved_spec_hash is not None
    wanted = plan_name(result)
    return (f"waits for MigrationPlan {wanted} (approvedSpecHash {result.approved_spec_hash}): "
            f"{'; '.join(c.reason for c in result.gated_changes)}; approve it with "
            f"`{approve_command(wanted, namespace)}`")
