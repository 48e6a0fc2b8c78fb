"""A backend core's steps carried out for one claim: read what it asks (fresh), make its writes and calls, again;
first, for provisioning, whether the data kept under its name is its namespace's (reconciler.kept_data).

The writes go through the runtime's write steps (controller_runtime.writes: ensure on the fresh read, create_once,
delete_exactly); the calls through the backend's client. The claim's connection Secret is written here, never by a
core, and only when it is the claim's own (absent, or owned by this claim).
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from controller_runtime.client import Kube
from controller_runtime.errors import KubeError
from controller_runtime.outcomes import Done, Requeue
from controller_runtime.writes import create_once, ensure
from lifecycle.backends.common import PROVIDER_LABEL, b64, connection_secret_of, decoded
from lifecycle.backends.contract import Again, Apply, Backend, CreateOnce, Delete, Ready, Rotation, Seen, Waiting
from lifecycle.backends.instance import SECRET
from lifecycle.rotation import ISSUED_ANNOTATION
from lifecycle.rotation import seen as rotation_seen
from reconciler import kept_data
from reconciler.backend_failure import BackendFailure
from reconciler.backends.registry import Client

__all__ = ["ROUNDS", "Carried", "carry_out", "write_all"]

log = logging.getLogger("apprafter.claims")

PASSWORD_BYTES = 32  # secrets.token_urlsafe: 43 URL-safe characters, fit for a URL as they are
ROUNDS = 6  # Again at most this often in one reconcile (a new instance: admin Secret, then its objects, ...)


class Carried(NamedTuple):
    """Where the claim stands after its steps: Ready (its Secret written) or Waiting; `secret`: the Secret's name;
    `rotation`: what the last step saw of the claim's rotation (lifecycle.rotation)."""

    then: Ready | Waiting
    secret: str | None = None
    rotation: Rotation = Rotation()


def _owned_by(obj: Mapping[str, Any], claim: Mapping[str, Any]) -> str | None:
    """The uid of the ResourceClaim of the claim's name that owns `obj` (None: no such owner)."""
    name = claim["metadata"]["name"]
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == claim["kind"] and ref.get("name") == name:
            return str(ref.get("uid"))
    return None


async def _seen(kube: Kube, core: Backend, claim: Mapping[str, Any], config: Any,
                connection: Mapping[str, Any] | None, pods: Sequence[Mapping[str, Any]]) -> Seen:
    objects: dict[Any, Any] = {}
    for read in core.reads(claim, config):
        if read.name is None:
            objects[read] = (await kube.list(read.kind, read.namespace or "", labels=dict(read.labels) or None))[0]
        else:
            objects[read] = await kube.get(read.kind, read.name, read.namespace)
    own = connection is not None and _owned_by(connection, claim) == claim["metadata"]["uid"]
    return Seen(objects, decoded(connection) if own else None, secrets.token_urlsafe(PASSWORD_BYTES), time.time(),
                rotation_seen(claim, connection if own else None, pods))


async def write_all(kube: Kube, writes: Sequence[Apply | CreateOnce | Delete], where: Mapping[str, str]) -> None:
    """A core's writes, in order: applied where the live object differs, created once, deleted (by uid)."""
    for write in writes:
        if isinstance(write, Apply):
            done = await ensure(kube, None, write.obj)
            if done.written:
                log.info("applied", extra={**where, "written": f"{write.obj['kind']} "
                                                               f"{write.obj['metadata']['name']}"})
        elif isinstance(write, CreateOnce):
            await create_once(kube, None, write.obj)
        elif isinstance(write, Delete):
            if write.uid is None:
                await kube.delete(write.kind, write.name, write.namespace)
            else:
                await kube.delete_exactly(write.kind, write.name, write.namespace, write.uid)
            log.info("deleted", extra={**where, "written": f"{write.kind.kind} {write.name}"})


def _secret_object(claim: Mapping[str, Any], provider: str, data: Mapping[str, str],
                   rotated: str | None = None) -> dict[str, Any]:
    """The claim's connection Secret in its namespace, owned by the claim (it goes with the claim; the data it
    points at stays at the backend), marked with the rotation request its password answers."""
    meta = claim["metadata"]
    owner = {"apiVersion": claim["apiVersion"], "kind": claim["kind"], "name": meta["name"], "uid": meta["uid"],
             "controller": True, "blockOwnerDeletion": True}
    marked = {"annotations": {ISSUED_ANNOTATION: rotated}} if rotated else {}
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": connection_secret_of(claim), "namespace": meta["namespace"],
                         "labels": {PROVIDER_LABEL: provider}, **marked, "ownerReferences": [owner]},
            "data": {k: b64(v) for k, v in sorted(data.items())}}


def _conflict(live: Mapping[str, Any] | None, claim: Mapping[str, Any]) -> Waiting | None:
    """Why the claim's connection Secret cannot be written (None: it can): one of that name not the claim's."""
    if live is None:
        return None
    name = f"Secret {claim['metadata']['namespace']}/{connection_secret_of(claim)}"
    owner = _owned_by(live, claim)
    if owner == claim["metadata"]["uid"]:
        return None
    if owner is not None:  # a deleted claim's of the same name: the garbage collector removes it
        return Waiting("SecretConflict", f"{name} is a deleted claim's, not yet removed", Requeue(f"{name} is stale"))
    return Waiting("SecretConflict", f"{name} exists and is not this claim's: it is left alone; delete or rename it")


async def carry_out(kube: Kube, core: Backend, client: Client | None, claim: Mapping[str, Any], config: Any,
                    provider: str, *, dropping: bool = False, pods: Sequence[Mapping[str, Any]] = ()) -> Carried | None:
    """Ask the core for steps until it says Ready or Waiting (provisioning) or Gone (dropping: None), carrying out
    each; a backend's failure and a refused write are the claim's Waiting, a retryable API error is raised. `pods`:
    those of the claim's namespace (which of them hold an older password: lifecycle.rotation)."""
    meta = claim["metadata"]
    where = {"controller": "claims", "namespace": meta["namespace"], "object": meta["name"]}
    secret_name = connection_secret_of(claim)
    try:
        refused = None if dropping else await kept_data.refusal(kube, core, claim, config)
        if refused is not None:  # the data kept under its name is another namespace's: nothing of it handed out
            return Carried(refused)
        for _ in range(ROUNDS):
            live_secret = await kube.get(SECRET, secret_name, meta["namespace"])
            seen = await _seen(kube, core, claim, config, live_secret, pods)
            step = core.drop(claim, config, seen) if dropping else core.provision(claim, config, seen)
            await write_all(kube, step.writes, where)
            for call in step.calls:
                if client is None:
                    raise TypeError(f"{core.backend} has no client for its call {type(call).__name__}")
                await client.call(call)
            then = step.then
            if isinstance(then, Again):
                log.info("again", extra={**where, "reason": then.why})
                continue
            if isinstance(then, Ready) and not dropping:
                if then.secret is None:
                    return Carried(then, rotation=seen.rotation)
                conflict = _conflict(live_secret, claim)
                if conflict is not None:
                    return Carried(conflict, rotation=seen.rotation)
                await ensure(kube, None, _secret_object(claim, provider, then.secret, then.rotated), live=live_secret)
                return Carried(then, secret_name, seen.rotation)
            if isinstance(then, Waiting):
                return Carried(then, rotation=seen.rotation)
            return None  # Gone
        return Carried(Waiting("InProgress", f"still in progress after {ROUNDS} steps", Requeue("in progress")))
    except BackendFailure as e:
        return Carried(Waiting(e.reason, str(e), Requeue(str(e)) if e.retryable else Done()))
    except KubeError as e:
        if e.retryable:
            raise
        return Carried(Waiting("WriteRefused", str(e)))
