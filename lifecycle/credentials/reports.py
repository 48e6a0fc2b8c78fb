"""What SourceCredentials' status tells others (spec §3.12): each half's state for `apprafter repo creds` and what
the halves add up to, and the condition an Application gets when the credentials covering its image were refused by
the registry or do not serve its namespace. Never a value of the material, nor the registry's words on an
Application (the credential's own status has them)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from lifecycle.conditions import Condition, by_type, find_condition
from lifecycle.credentials.checks import INVALID, UNVERIFIED, VALID
from lifecycle.credentials.coverage import Coverage, coverage_of, covers_image, serves_now
from lifecycle.credentials.spec import in_scope

__all__ = ["CREDENTIAL_CONDITION", "NAMESPACE_NOT_COVERED", "NOT_PRESENT", "Reported", "image_credentials", "outcome",
           "reported", "scoped_out"]

NOT_PRESENT = "NotPresent"  # a half's state when its material was not found (nothing to check)
CREDENTIAL_CONDITION = "SourceCredentialValid"  # on an Application whose image only Invalid credentials cover
NAMESPACE_NOT_COVERED = "NamespaceNotCovered"  # ... or whose image credentials cover, but not in its namespace


class Reported(NamedTuple):
    """One half as a SourceCredential's status reports it: VALID / INVALID / UNVERIFIED, or NOT_PRESENT (its
    material was not found: `reason` and `message` are Present's), and when it was last checked."""

    half: str
    state: str
    reason: str
    message: str
    last_validated: str


def _registry_invalid(obj: Mapping[str, Any]) -> bool:
    """Whether a SourceCredential's status says its registry half was refused (Valid False, reason Invalid)."""
    valid = find_condition(((obj.get("status") or {}).get("registry") or {}).get("conditions"), "Valid")
    return valid.get("status") == "False" and valid.get("reason") == INVALID


def _covering(image: str, credentials: Iterable[Mapping[str, Any]]) -> list[tuple[Mapping[str, Any], Coverage]]:
    """The SourceCredentials serving now (lifecycle.credentials.coverage.serves_now) whose registry hosts cover an
    image, with what each serves."""
    return [(obj, coverage) for obj in credentials if (now := serves_now(obj)) is not None
            and (coverage := coverage_of(now)).registry and covers_image(coverage.registry, image)]


def scoped_out(image: str | None, namespace: str, credentials: Iterable[Mapping[str, Any]]) -> bool:
    """Whether SourceCredentials cover an image's registry but none serves the namespace (their registry half's
    namespaces leave it out): its pods get no pull secret from any of them."""
    covering = _covering(image, credentials) if image else []
    return bool(covering) and not any(in_scope(c.namespaces, namespace) for _, c in covering)


def image_credentials(image: str | None, namespace: str,
                      credentials: Iterable[Mapping[str, Any]]) -> Condition | None:
    """An Application's condition when SourceCredentials cover its image but none serves its namespace (reason
    NamespaceNotCovered: nothing named, the credentials are not the tenant's), or when every one covering the image
    in its namespace was refused by the registry (CredentialInvalid: it names them, never their material nor the
    registry's words, which the credential's own status has). None otherwise."""
    if not image:
        return None
    covering = _covering(image, credentials)
    if covering and not any(in_scope(c.namespaces, namespace) for _, c in covering):
        return Condition(CREDENTIAL_CONDITION, "False", NAMESPACE_NOT_COVERED,
                         f"image {image} is under a registry host a SourceCredential covers, but none covers namespace "
                         f"{namespace}: its pods get no pull secret (the credential's spec.registry.namespaces does "
                         "not list this namespace)")
    serving = [obj for obj, c in covering if in_scope(c.namespaces, namespace)]
    if not serving or not all(_registry_invalid(obj) for obj in serving):
        return None
    named = ", ".join(sorted(f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}" for o in serving))
    return Condition(CREDENTIAL_CONDITION, "False", "CredentialInvalid",
                     f"image {image} is covered only by SourceCredential {named}, whose registry login is Invalid "
                     "(the registry refused it): pulls fail until its material is re-sealed (`kubectl describe "
                     "sourcecredential` shows the registry's words)")


def reported(obj: Mapping[str, Any]) -> list[Reported]:
    """Each half the spec declares, as the status reports it (a half without a status yet: Unverified)."""
    status = obj.get("status") or {}
    out = []
    for half in ("git", "registry"):
        if half not in (obj.get("spec") or {}):
            continue
        given = status.get(half)
        body: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
        found = by_type(body.get("conditions"))
        present, valid = found.get("Present") or {}, found.get("Valid") or {}
        if present and present.get("status") != "True":
            out.append(Reported(half, NOT_PRESENT, str(present.get("reason", "")), str(present.get("message", "")),
                                ""))
            continue
        reason = str(valid.get("reason") or UNVERIFIED)
        state = reason if reason in (VALID, INVALID) else UNVERIFIED
        out.append(Reported(half, state, reason, str(valid.get("message", "")), str(body.get("lastValidated", ""))))
    return out


def outcome(halves: Iterable[Reported]) -> str:
    """What the halves add up to: INVALID if one was refused, else UNVERIFIED if one could not be told (or has no
    material), else VALID."""
    states = {h.state for h in halves}
    if INVALID in states:
        return INVALID
    return UNVERIFIED if states - {VALID} else VALID
