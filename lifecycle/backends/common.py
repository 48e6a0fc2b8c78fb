"""What every backend's core shares: a claim's names (its tenant name, its connection Secret), the labels of what a
backend makes, Secret data in and out, a provider's config with the schema's defaults, and the steps that say a
claim waits or is ready."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from typing import Any

from controller_runtime.outcomes import Done, Requeue
from controller_runtime.quantity import quantity, whole_bytes
from lifecycle.backends.contract import Ready, Step, Waiting
from lifecycle.conditions import Condition
from lifecycle.service_provider import check, with_defaults
from renderer.manifests.meta import connection_secret
from renderer.names import NAME_LABEL

__all__ = ["CLAIM_ANNOTATION", "PROVIDER_LABEL", "SIZE_CONDITION", "b64", "claim_ref", "config_of",
           "connection_secret_of", "decoded", "memory_at_least", "positive_cpu", "provider_name", "ready", "retried",
           "size_not_applied", "tenant_name", "waiting"]

PROVIDER_LABEL = "apprafter.io/service-provider"  # on everything a backend makes: whose provider it serves
CLAIM_ANNOTATION = "apprafter.io/claim"  # on a claim's objects outside its namespace: `<namespace>/<claim>`
HASH_CHARS = 20  # hex characters of SHA-256 in a hashed name: 80 bits
# A claim's second condition: what its need's size became at its backend (applied, kept, or not applied and why).
SIZE_CONDITION = "Size"


def provider_name(provider: Mapping[str, Any]) -> str:
    return str((provider.get("metadata") or {}).get("name") or "")


def claim_ref(claim: Mapping[str, Any]) -> str:
    """`<namespace>/<claim>`: the claim an object outside its namespace belongs to."""
    meta = claim.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def tenant_name(claim: Mapping[str, Any], limit: int) -> str:
    """The claim's name at a shared backend: `<namespace>.<claim>` when it fits in `limit` bytes; else its first
    bytes, `-` and 20 hex characters of the SHA-256 of `<namespace>/<claim>`: exactly `limit` bytes. A namespace
    has no dot, so no two plain names are the same; a hashed name is longer than any plain one, so never one of
    them; two hashed names are the same only if 80 bits of SHA-256 are."""
    meta = claim.get("metadata") or {}
    plain = f"{meta['namespace']}.{meta['name']}"
    if len(plain.encode()) <= limit:
        return plain
    digest = hashlib.sha256(claim_ref(claim).encode()).hexdigest()[:HASH_CHARS]
    return f"{plain[:limit - HASH_CHARS - 1]}-{digest}"


def connection_secret_of(claim: Mapping[str, Any]) -> str:
    """The name of the claim's connection Secret, `{app}-{need}-conn` (the name the renderer's env refers to)."""
    meta = claim.get("metadata") or {}
    need = str((claim.get("spec") or {}).get("type") or "")
    name = str(meta.get("name") or "")
    app = (meta.get("labels") or {}).get(NAME_LABEL) or (name[: -len(need) - 1] if name.endswith(f"-{need}") else name)
    return connection_secret(str(app), need)


def b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def decoded(secret: Mapping[str, Any] | None) -> dict[str, str] | None:
    """A Secret's data as text (None: no Secret, or data that is not base64 of UTF-8)."""
    if secret is None:
        return None
    try:
        return {str(k): base64.b64decode(str(v)).decode() for k, v in ((secret.get("data") or {}).items())}
    except (ValueError, UnicodeDecodeError):
        return None


def config_of(provider: Mapping[str, Any], type_: str, backend: str) -> dict[str, Any] | list[str]:
    """The provider's spec.config with the schema's defaults filled in (lifecycle/schema/serviceprovider.cue, the
    one place they are written), or what the schema refuses in it (the webhook's own check, said again here for a
    provider written before it)."""
    problems = [f"{field}: {problem}" for field, problem in check(provider)]
    if problems:
        return problems
    config = (provider.get("spec") or {}).get("config") or {}
    return with_defaults(type_, backend, config if isinstance(config, Mapping) else {})


def memory_at_least(value: Any, minimum: int, field: str) -> list[str]:
    """A memory quantity of at least `minimum` bytes, or the problem."""
    have = whole_bytes(value)
    if have is None or have < minimum:
        return [f"{field}: {value!r} is not a memory quantity of at least {minimum // 2**20}Mi"]
    return []


def positive_cpu(value: Any, field: str) -> list[str]:
    """A CPU quantity above zero, or the problem."""
    have = quantity(value)
    return [] if have is not None and have > 0 else [f"{field}: {value!r} is not a CPU quantity (250m, 1, 1.5)"]


def waiting(reason: str, message: str, retry: Requeue | Done | None = None, **rest: Any) -> Step:
    """A step that writes nothing and says the claim waits (nothing secret in `message`)."""
    return Step(Waiting(reason, message, retry if retry is not None else Done(), **rest))


def retried(reason: str, message: str, **rest: Any) -> Step:
    """A wait that passes by itself: looked at again with backoff (a watch may wake it sooner)."""
    return waiting(reason, message, Requeue(message), **rest)


def ready(message: str, connection: Mapping[str, Any], secret: Mapping[str, str] | None = None,
          **rest: Any) -> Ready:
    return Ready(message, connection, secret, **rest)


def volume_refusals(type_: str, backend: str, old: Mapping[str, Any] | None, new: Mapping[str, Any],
                    holder: str) -> list[tuple[str, str]]:
    """What a provider's `storage` cannot become once its volumes are made (None: a new provider): a smaller size
    (a volume never shrinks) or another storageClassName (fixed at the volume's making); either would leave the
    objects the operator applies refused by the API server. `holder` names what holds the volumes."""
    if old is None or (old.get("spec") or {}).get("backend") != backend:
        return []
    before, after = (with_defaults(type_, backend, (p.get("spec") or {}).get("config") or {}).get("storage") or {}
                     for p in (old, new))
    problems = []
    sizes = [str(s.get("size")) for s in (before, after)]
    was, now = (whole_bytes(size) for size in sizes)
    if was is not None and now is not None and now < was:
        problems.append(("spec.config.storage.size", f"{sizes[1]} is smaller than {sizes[0]}: a volume never "
                         f"shrinks ({holder} keeps {sizes[0]}); move the data to a new provider to use less"))
    if before.get("storageClassName") != after.get("storageClassName"):
        problems.append(("spec.config.storage.storageClassName", f"{holder} keeps the class its volumes were made "
                         f"with ({before.get('storageClassName') or 'the default'}); move the data to a new provider "
                         "to use another"))
    return problems


def size_not_applied(claim: Mapping[str, Any], why: str | None) -> tuple[Condition, ...]:
    """The claim's Size condition where its backend does not apply its size (`why`, None: it is applied or named
    none): False, NotApplied, saying why; the claim is provisioned all the same (a size sizes, the app works)."""
    size = (claim.get("spec") or {}).get("size")
    if not size or why is None:
        return ()
    return (Condition(SIZE_CONDITION, "False", "NotApplied", why),)
