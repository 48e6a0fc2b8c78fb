"""Ownership before force: whether the operator may apply a child onto what the cluster holds under its name, and
which Application holds an instance name (`<app>-<env>`, the app.kubernetes.io/instance label and the TLS Secret's
prefix) in a namespace. The operator never takes over an object it does not control; adoption is explicit."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, NamedTuple

from controller_runtime.objects import controller_uid

__all__ = ["ADOPT_ANNOTATION", "INSTANCE_INDEX", "Control", "conflicts", "control", "instance_holder", "instance_of",
           "owner_of"]

# Written on an existing object by someone who may write it, naming the Application (of its namespace) that may
# take it over: the one act that hands an object to the operator (Helm's and Flux's adoption work the same way).
ADOPT_ANNOTATION = "apprafter.io/adopt"
INSTANCE_INDEX = "instance"  # the Applications' cache index of instance_of

Verdict = Literal["ours", "absent", "adopt", "conflict"]


class Control(NamedTuple):
    """What the operator may do with one child: apply and force (ours, or handed over), create without forcing
    (absent), or leave it alone (conflict: `owner` says whose it is)."""

    verdict: Verdict
    owner: str = ""


def owner_of(live: Mapping[str, Any]) -> str:
    """Who an object is, in words: its controller (kind/name), else the manager that created it."""
    meta = live.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller"):
            return f"controlled by {ref.get('kind')} {ref.get('name')} (uid {ref.get('uid')})"
    managers = [m for m in meta.get("managedFields") or [] if m.get("manager") and m.get("subresource") != "status"]
    managers.sort(key=lambda m: str(m.get("time") or ""))
    return f"no controller; made by {managers[0]['manager']}" if managers else "no controller"


def control(live: Mapping[str, Any] | None, app: Mapping[str, Any]) -> Control:
    """May the operator apply this Application's child onto `live` (what the cluster has under that name)?"""
    if live is None:
        return Control("absent")
    uid = controller_uid(live)
    if uid == app["metadata"]["uid"]:
        return Control("ours")
    annotations = (live.get("metadata") or {}).get("annotations") or {}
    if uid is None and annotations.get(ADOPT_ANNOTATION) == app["metadata"]["name"]:
        return Control("adopt")
    return Control("conflict", owner_of(live))


def conflicts(children: Iterable[Mapping[str, Any]], live: Mapping[tuple[str, str], Mapping[str, Any] | None],
              app: Mapping[str, Any]) -> list[str]:
    """`Kind name (owner)` for each child that exists and is not this Application's to apply (live is keyed by
    (kind, name)); empty when every child may be applied."""
    out = []
    for child in children:
        key = (child["kind"], child["metadata"]["name"])
        verdict = control(live.get(key), app)
        if verdict.verdict == "conflict":
            out.append(f"{key[0]} {key[1]} ({verdict.owner})")
    return out


def _claim(app: Mapping[str, Any]) -> tuple[bool, str, str]:
    """Who keeps a contested instance name first: one already deployed (its baseline in status), then the oldest
    (creation time, then uid). creationTimestamp has whole seconds: two made in one second would be a coin toss."""
    meta = app.get("metadata") or {}
    deployed = bool((app.get("status") or {}).get("lastAppliedSpec"))
    return not deployed, str(meta.get("creationTimestamp") or ""), str(meta.get("uid") or "")


def instance_of(app: Mapping[str, Any]) -> str:
    """`namespace/name-environment`: the instance name an Application's children carry, within its namespace."""
    meta = app.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}-{(app.get('spec') or {}).get('environment')}"


def instance_holder(app: Mapping[str, Any], others: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The other Application of this namespace that holds this one's instance name, if any: names and environments
    can concatenate alike (`a-b` in `c`, `a` in `b-c`); the one already deployed keeps it, else the oldest."""
    meta, mine = app["metadata"], instance_of(app)
    rivals = [o for o in others if instance_of(o) == mine and (o.get("metadata") or {}).get("name") != meta["name"]
              and not o["metadata"].get("deletionTimestamp")]
    before = [o for o in rivals if _claim(o) < _claim(app)]
    return min(before, key=_claim) if before else None
