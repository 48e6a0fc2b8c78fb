"""Whose a claim's kept data is, the edge (lifecycle.backends.kept decides): read the claim's namespace and the
record beside the data, write the record the core asks for, delete it once the data is dropped."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller_runtime.client import Kube
from controller_runtime.kinds import GroupVersionKind
from controller_runtime.writes import ensure
from lifecycle.backends.contract import Backend, Waiting
from lifecycle.backends.instance import SECRET
from lifecycle.backends.kept import judge, record_name

__all__ = ["NAMESPACE", "forget", "refusal"]

NAMESPACE = GroupVersionKind("v1", "Namespace")


async def refusal(kube: Kube, core: Backend, claim: Mapping[str, Any], config: Any, *,
                  record: bool = True) -> Waiting | None:
    """Why the data kept under the claim's name is not the claim's (None: it is, or the backend keeps none outside
    the claim's namespace); when it is and no record says so yet, the record is written (unless not `record`)."""
    where = core.kept_in(config)
    if where is None:
        return None
    namespace = await kube.get(NAMESPACE, claim["metadata"]["namespace"])
    live = await kube.get(SECRET, record_name(claim), where)
    judged = judge(claim, namespace, live, where)
    if judged.record is not None and record:
        await ensure(kube, None, judged.record, live=live)
    return judged.refused


async def forget(kube: Kube, core: Backend, claim: Mapping[str, Any], config: Any) -> None:
    """The claim's record deleted once its data is dropped: the name holds nothing for anyone any more."""
    where = core.kept_in(config)
    if where is None:
        return
    live = await kube.get(SECRET, record_name(claim), where)
    if live is not None:
        await kube.delete_exactly(SECRET, live["metadata"]["name"], where, live["metadata"]["uid"])
