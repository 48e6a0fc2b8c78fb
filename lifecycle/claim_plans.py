"""The data-migration MigrationPlan of one claim's data operation (a restore, a kept generation's drop): one shape,
owned by the claim (it goes with it), its spec never changing once written."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from compatibility.classes import DATA_MIGRATION
from lifecycle.backends.common import CLAIM_ANNOTATION
from renderer.names import API_VERSION, ENVIRONMENT_LABEL, NAME_LABEL

__all__ = ["claim_plan"]


def claim_plan(claim: Mapping[str, Any], name: str, labels: Mapping[str, str], trigger: Mapping[str, Any],
               change: Mapping[str, Any], steps: Sequence[str], content: str,
               reversible: Callable[[int], bool]) -> dict[str, Any]:
    """The plan `name` for `claim`: `trigger` (its type and what it names; the approved hash of `content` is added),
    the one `change`, and `steps` in order (`reversible(step number)` for each)."""
    meta, claim_labels = claim["metadata"], claim["metadata"].get("labels") or {}
    owner = {"apiVersion": claim.get("apiVersion", API_VERSION), "kind": claim.get("kind", "ResourceClaim"),
             "name": meta["name"], "uid": meta["uid"]}
    return {"apiVersion": API_VERSION, "kind": "MigrationPlan",
            "metadata": {"name": name, "namespace": meta["namespace"],
                         "labels": {**labels, CLAIM_ANNOTATION: str(meta["name"])}, "ownerReferences": [owner]},
            "spec": {"scope": {"type": "application", "application": {
                         "ref": {"name": str(claim_labels.get(NAME_LABEL) or meta["name"]),
                                 "namespace": meta["namespace"]},
                         "environment": str(claim_labels.get(ENVIRONMENT_LABEL) or "")}},
                     "trigger": {**trigger,
                                 "approvedSpecHash": f"sha256:{hashlib.sha256(content.encode()).hexdigest()}"},
                     "risks": {"classification": DATA_MIGRATION, "classifications": [DATA_MIGRATION],
                               "reversible": False, "requiresFullBackup": False},
                     "changes": [dict(change)], "approvers": [],
                     "plan": [{"step": i, "action": action, "reversible": reversible(i)}
                              for i, action in enumerate(steps, start=1)]}}
