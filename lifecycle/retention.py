"""Whether a deleted ResourceClaim's backend data may be dropped (issue 31 item 5), for every backend: data is never
lost by accident. No I/O: reconciler/claims.py reads the claim and the plan it names, asks `verdict`, and then either
lets the backend drop the data or leaves it where it is, and removes the finalizer.

Every claim a backend provisions carries FINALIZER, so its deletion waits for that backend. The default is to
RETAIN: the finalizer goes, the data stays, and the same app and need (the same claim name) get it back. The data is
dropped only when the claim carries DROP_ANNOTATION, written by the operator just before it prunes a claim under an
approved `data-migration` MigrationPlan whose changes remove that need (`MigrationPlan/<name>`, checked here against
the plan itself), or by a cluster administrator (`admin`: the documented admin act; the webhook lets no one else
write it, compatibility.authority.drop_data_writer).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from compatibility.authority import ADMIN_DROP, DROP_ANNOTATION, PLAN_DROP_PREFIX
from controller_runtime.objects import controller_uid

__all__ = ["ADMIN_DROP", "DROP_ANNOTATION", "FINALIZER", "Verdict", "claims_to_drop", "drop_mark", "verdict"]

FINALIZER = "apprafter.io/backend-data"  # on every claim a backend provisions: its deletion waits for the backend
NEED_REMOVED = "need-removed"  # compatibility.rules AR-DM001: the one change whose approval drops a claim's data
# A plan whose approval a person gave (approved), or that the operator carried out since (applied).
APPROVED_PHASES = frozenset({"approved", "applied"})


class Verdict(NamedTuple):
    """What happens to a deleted claim's data: dropped (`drop`) or retained, and why (names the plan or the act)."""

    drop: bool
    why: str


def drop_mark(plan: str) -> str:
    """DROP_ANNOTATION's value the operator writes on a claim it prunes under the approved plan `plan`."""
    return f"{PLAN_DROP_PREFIX}{plan}"


def _need(claim: Mapping[str, Any]) -> str:
    return f"needs.{(claim.get('spec') or {}).get('type')}"


def _removes(plan: Mapping[str, Any], need: str) -> bool:
    changes = (plan.get("spec") or {}).get("changes") or []
    return any(isinstance(c, Mapping) and c.get("type") == NEED_REMOVED and c.get("field") == need for c in changes)


def claims_to_drop(plan: Mapping[str, Any] | None, pruned: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Of the claims a pass prunes, those whose need the approved plan it consumed removes (their data goes with
    them), unless one is marked already (an administrator's `admin`: the mark is never rewritten); None: no plan was
    consumed, every pruned claim's data stays."""
    if plan is None or ((plan.get("status") or {}).get("phase") or "") not in APPROVED_PHASES:
        return []
    return [claim for claim in pruned if _removes(plan, _need(claim))
            and not ((claim.get("metadata") or {}).get("annotations") or {}).get(DROP_ANNOTATION)]


def verdict(claim: Mapping[str, Any], plan: Mapping[str, Any] | None) -> Verdict:
    """Whether the deleted `claim`'s data may be dropped now. `plan`: the MigrationPlan its DROP_ANNOTATION names, as
    the cluster holds it (None: it names none, or the plan does not exist). Dropped only for an administrator's act,
    or a plan approved by a person (or applied since), owned by the claim's own Application, whose changes remove
    the claim's need; anything else retains (fail closed: the data stays)."""
    meta = claim.get("metadata") or {}
    mark = str((meta.get("annotations") or {}).get(DROP_ANNOTATION) or "")
    need = _need(claim)
    kept = "the data stays (the same app and need get it back)"
    if not mark:
        return Verdict(False, f"no approved data-migration plan removes {need}: {kept}")
    if mark == ADMIN_DROP:
        return Verdict(True, f"a cluster administrator asked for it ({DROP_ANNOTATION}: {ADMIN_DROP})")
    if not mark.startswith(PLAN_DROP_PREFIX):
        return Verdict(False, f"{DROP_ANNOTATION}: {mark!r} is neither {ADMIN_DROP} nor {PLAN_DROP_PREFIX}<name>: "
                       + kept)
    name = mark[len(PLAN_DROP_PREFIX):]
    if plan is None or (plan.get("metadata") or {}).get("name") != name:
        return Verdict(False, f"MigrationPlan {name} does not exist: {kept}")
    status = plan.get("status") or {}
    phase = str(status.get("phase") or "")
    if phase not in APPROVED_PHASES:
        return Verdict(False, f"MigrationPlan {name} is {phase or 'without a phase'}, not approved: {kept}")
    owner = controller_uid(claim)
    if not owner or controller_uid(plan) != owner:
        return Verdict(False, f"MigrationPlan {name} is not about this claim's Application: {kept}")
    if not _removes(plan, need):
        return Verdict(False, f"MigrationPlan {name} does not remove {need}: {kept}")
    who = f" by {status['approvedBy']}" if status.get("approvedBy") else ""
    return Verdict(True, f"MigrationPlan {name}, approved{who}, removes {need}")
