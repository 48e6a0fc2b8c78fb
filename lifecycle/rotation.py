"""Credential rotation (spec 2.16a, issue 42 item 2): a claim's request for a new password, what the claim binder sees
of it, the status and Events it writes, and the pod-template stamp that rolls the app's pods onto the new password.

A person of the app's team writes a new value of `apprafter.io/rotate` on the claim (`apprafter db rotate`; who may:
compatibility.authority.rotate_writer). The claim's backend core makes a new password for it once: the request a
password answers is recorded with it (ISSUED_ANNOTATION on the connection Secret, and on pg's role password Secret),
so the same value twice rotates once. The claim binder writes the Secret, then status.rotation.issued; the Application
pass stamps every pod template that reads the Secret with it (`stamped`), so the Deployment rolls. Once no pod that
reads the Secret runs an older template (`holding`), the old password is refused (redis: taken off the user; pg: the
old login role's password replaced by one handed out to no one, lifecycle.backends.pg_roles) and, once the backend
says so (its Ready.refused), the claim says `completed`, with the Event CredentialsRotated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from compatibility.authority import ROTATE_ANNOTATION, ROTATE_REQUEST
from controller_runtime.objects import Key
from lifecycle.backends.common import connection_secret_of
from lifecycle.backends.contract import Rotation
from lifecycle.children import secrets_read
from lifecycle.notes import Note

__all__ = ["ISSUED_ANNOTATION", "RESTORE_PREFIX", "ROTATES", "ROTATE_ANNOTATION", "TEMPLATE_PREFIX", "Rotation",
           "concerned", "holding", "in_flight", "issued", "notes", "requested", "seen", "stamped", "status",
           "template_key"]

# What becomes of the old password meanwhile, for each need type whose backend rotates a claim's password
# (compatibility.authority.ROTATED_TYPES: the webhook refuses a request on any other).
ROTATES: Mapping[str, str] = {
    "pg": "PostgreSQL holds one password per role, so the claim alternates between two login roles: the new password "
          "is the other role's, the old role's keeps working until the app's pods have rolled, then it is replaced "
          "(connections already open stay open)",
    "redis": "redis holds both passwords on the user until the app's pods have rolled, then the old one is removed",
}
ISSUED_ANNOTATION = "apprafter.io/rotation"  # on a Secret holding a password: the request it was made for
TEMPLATE_PREFIX = "rotation.apprafter.io/"  # + the need type, on a pod template: the request its pods' password answers
# + the need type, on a pod template: the generation of the claim's data its pods connect to (lifecycle.restore)
RESTORE_PREFIX = "restore.apprafter.io/"
SHOWN_PODS = 5  # at most this many pod names in a message
ENDED = frozenset({"Succeeded", "Failed"})  # a pod in these phases holds no connection


def requested(claim: Mapping[str, Any]) -> str | None:
    """The claim's rotation request: its annotation, when it has a request's form (the webhook refuses any other)."""
    value = ((claim.get("metadata") or {}).get("annotations") or {}).get(ROTATE_ANNOTATION)
    return value if isinstance(value, str) and ROTATE_REQUEST.fullmatch(value) else None


def issued(obj: Mapping[str, Any] | None) -> str | None:
    """The request a Secret's password was made for (None: none, it predates any)."""
    value = (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(ISSUED_ANNOTATION)
    return value if isinstance(value, str) and value else None


def template_key(need: str) -> str:
    """The pod-template annotation that carries the request its pods' `need` password answers."""
    return f"{TEMPLATE_PREFIX}{need}"


def _secret(claim: Mapping[str, Any]) -> str:
    return str(((claim.get("status") or {}).get("connection") or {}).get("secretName") or connection_secret_of(claim))


def _type(claim: Mapping[str, Any]) -> str:
    return str((claim.get("spec") or {}).get("type") or "")


def holding(claim: Mapping[str, Any], answers: str | None, pods: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """The pods (by name) of the claim's namespace that read its connection Secret and were made from a template
    older than `answers` (the request the Secret's password answers): they may hold the old password. Terminating
    pods count (they still serve and hold connections); ended ones do not."""
    namespace, secret, key = (claim.get("metadata") or {}).get("namespace"), _secret(claim), template_key(_type(claim))
    names = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        if meta.get("namespace") != namespace or (pod.get("status") or {}).get("phase") in ENDED:
            continue
        if secret in secrets_read(pod) and (meta.get("annotations") or {}).get(key) != answers:
            names.append(str(meta.get("name")))
    return tuple(sorted(names))


def seen(claim: Mapping[str, Any], connection: Mapping[str, Any] | None,
         pods: Iterable[Mapping[str, Any]]) -> Rotation:
    """What a step of the claim's backend sees: the request, what the claim's own connection Secret (`connection`,
    None: it has none) answers, the pods that hold an older password. Nothing for a type that does not rotate."""
    if _type(claim) not in ROTATES:
        return Rotation()
    answers = issued(connection)
    return Rotation(requested(claim), answers, holding(claim, answers, pods))


def _said(claim: Mapping[str, Any], out: Mapping[str, Any], rotation: Rotation, ready: bool) -> str:
    """status.rotation.message: where the latest request stands, in words (nothing secret)."""
    asked, secret = out.get("requested"), _secret(claim)
    if out.get("completed") == asked:
        return (f"request {asked}: rotated; Secret {secret} holds the new password, every pod that reads it started "
                "with it, and the old password is refused")
    if out.get("issued") != asked:
        return f"request {asked}: a new password is being made" + ("" if ready else " once the claim is ready again")
    if rotation.holding and not rotation.due:
        shown = ", ".join(rotation.holding[:SHOWN_PODS]) + (", ..." if len(rotation.holding) > SHOWN_PODS else "")
        return (f"request {asked}: the new password is in Secret {secret}; waiting for {len(rotation.holding)} pod(s) "
                f"started with the old one to be replaced: {shown}")
    return f"request {asked}: the new password is in Secret {secret}; the app's pods roll onto it"


def status(claim: Mapping[str, Any], rotation: Rotation, answers: str | None, ready: bool,
           timestamp: str, refused: bool = True) -> dict[str, Any] | None:
    """status.rotation after a step (None: the claim never had a request nor a rotated password). `answers`: the
    request the connection Secret's password answers after the step (the backend's Ready.rotated), `ready`: the
    step ended Ready (its Secret written), `refused`: the backend refuses every older password (Ready.refused).
    Completed when the step refused every old password: the password answers the request, it was not made in this
    step, no pod holds an older one, and the backend says it refuses them."""
    before = (claim.get("status") or {}).get("rotation")
    before = dict(before) if isinstance(before, Mapping) else {}
    if rotation.requested is None and answers is None and not before:
        return None
    out = {key: before[key] for key in ("requested", "issued", "completed", "completedAt") if key in before}
    if rotation.requested is not None:
        out["requested"] = rotation.requested
    if ready and answers is not None:
        out["issued"] = answers
    if ready and refused and rotation.requested is not None and rotation.settled and answers == rotation.requested:
        if before.get("completed") != answers:
            out["completedAt"] = timestamp
        out["completed"] = answers
    if "requested" in out:
        out["message"] = _said(claim, out, rotation, ready)
    return out


def notes(claim: Mapping[str, Any], before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> list[Note]:
    """The Events a status.rotation change asks for: CredentialsRotating when a request's new password is handed
    out, CredentialsRotated when the request is completed (each once per request)."""
    before, after = before or {}, after or {}
    meta = claim.get("metadata") or {}
    asked, secret, kind = after.get("requested"), _secret(claim), _type(claim)
    out = []
    if asked and after.get("issued") == asked and before.get("issued") != asked and after.get("completed") != asked:
        out.append(Note("CredentialsRotating", f"request {asked}: a new password is in Secret {secret}; the app's pods "
                        f"roll onto it ({ROTATES.get(kind, '')})", f"{meta.get('uid')}/{asked}/issued"))
    if asked and after.get("completed") == asked and before.get("completed") != asked:
        out.append(Note("CredentialsRotated", f"request {asked}: credentials rotated: Secret {secret} holds the new "
                        "password, every pod that reads it started with it, and the old password is refused",
                        f"{meta.get('uid')}/{asked}/completed"))
    return out


def in_flight(claim: Mapping[str, Any]) -> bool:
    """Whether the claim's latest request is not completed yet (its pods' changes matter to it)."""
    now = (claim.get("status") or {}).get("rotation")
    return isinstance(now, Mapping) and bool(now.get("requested")) and now.get("completed") != now.get("requested")


def concerned(claims: Iterable[Mapping[str, Any]], pod: Mapping[str, Any]) -> list[Key]:
    """The claims a pod's change may complete: those of its namespace with a request in flight whose connection
    Secret it reads."""
    namespace = (pod.get("metadata") or {}).get("namespace")
    reads = secrets_read(pod)
    return sorted((str(namespace), str(c["metadata"]["name"])) for c in claims
                  if (c.get("metadata") or {}).get("namespace") == namespace and in_flight(c) and _secret(c) in reads)


def stamped(children: Iterable[Mapping[str, Any]], claims: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The children with every Deployment's pod template that reads a rotated claim's connection Secret annotated
    with the request its password answers (status.rotation.issued), and a restored claim's with the generation it
    points at (status.restore.generation, lifecycle.restore): a new one changes the template, which rolls the
    pods. Applied after the gate (like an image's digest): the spec is unchanged, nothing is planned. Only the
    Deployments that read such a Secret are copied."""
    stamps: dict[str, dict[str, str]] = {}
    for claim in claims:
        status, found = claim.get("status") or {}, {}
        answers = (status.get("rotation") or {}).get("issued")
        if isinstance(answers, str) and answers and _type(claim) in ROTATES:
            found[template_key(_type(claim))] = answers
        generation = (status.get("restore") or {}).get("generation")
        if isinstance(generation, int) and not isinstance(generation, bool) and generation > 1:
            found[f"{RESTORE_PREFIX}{_type(claim)}"] = str(generation)  # a restore switched it: roll onto it
        if found:
            stamps[_secret(claim)] = found
    out: list[dict[str, Any]] = []
    for child in children:
        template = ((child.get("spec") or {}).get("template") or {}) if child.get("kind") == "Deployment" else {}
        reads = secrets_read(template) if template else set()
        wanted = {key: value for secret, found in sorted(stamps.items()) if secret in reads
                  for key, value in found.items()}
        if not wanted:
            out.append(dict(child))
            continue
        meta = dict(template.get("metadata") or {})
        meta["annotations"] = {**(meta.get("annotations") or {}), **wanted}
        out.append({**child, "spec": {**child["spec"], "template": {**template, "metadata": meta}}})
    return out
