"""The refusals of a pass that would reach past its own tenant: an instance name another Application holds, a Secret
not granted, a child the operator does not control, a hostname its namespace may not use, a hostname another
deployment (or a route not ours) holds. Each is Ready=False with its reason (docs/operator.md); nothing is applied or
pruned, and the pass is tried again at the next resync."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lifecycle.application import Refusal
from lifecycle.hostname_policy import NOT_ALLOWED as HOSTNAME_NOT_ALLOWED
from lifecycle.ownership import ADOPT_ANNOTATION

__all__ = ["CHILD_CONFLICT", "HOSTNAME_CONFLICT", "HOSTNAME_NOT_ALLOWED", "NAME_CONFLICT", "SECRET_NOT_GRANTED",
           "child_conflict", "hostname_conflict", "hostname_not_allowed", "name_conflict", "secret_not_granted"]

NAME_CONFLICT, SECRET_NOT_GRANTED = "NameConflict", "SecretNotGranted"
CHILD_CONFLICT, HOSTNAME_CONFLICT = "ChildConflict", "HostnameConflict"


def name_conflict(app: Mapping[str, Any], holder: Mapping[str, Any]) -> Refusal:
    meta, other = app["metadata"], holder["metadata"]
    instance = f"{meta['name']}-{app['spec']['environment']}"
    return Refusal(NAME_CONFLICT, f"instance name {instance} (the app.kubernetes.io/instance label and the TLS "
                   f"Secret {instance}-tls) is already Application {other['name']}'s (environment "
                   f"{holder['spec']['environment']}) in this namespace: rename this Application or its environment")


def secret_not_granted(message: str) -> Refusal:
    return Refusal(SECRET_NOT_GRANTED, message)


def child_conflict(app: Mapping[str, Any], conflicts: Sequence[str]) -> Refusal:
    name = app["metadata"]["name"]
    return Refusal(CHILD_CONFLICT, f"left alone, not controlled by this Application: {'; '.join(conflicts)}; "
                   "to hand one over, whoever may write it runs "
                   f"`kubectl annotate KIND NAME {ADOPT_ANNOTATION}={name}` (it must have no controller), "
                   "or deletes it")


def hostname_conflict(taken: Sequence[tuple[str, str]]) -> Refusal:
    listed = "; ".join(f"{host} is held by {by}" for host, by in taken)
    return Refusal(HOSTNAME_CONFLICT, f"{listed}: no route or certificate for it here (a hostname is its first "
                   "deployment's until that deployment gives it up or is forgotten)")


def hostname_not_allowed(refused: Sequence[str]) -> Refusal:
    """`refused`: lifecycle.hostname_policy's reason for each hostname the Application may not use."""
    return Refusal(HOSTNAME_NOT_ALLOWED, f"{'; '.join(refused)}: no route or certificate for it (docs/operator.md "
                   "\"Public hostnames\")")
