"""Whether a SourceCredential's half works (spec §3.12), decided without I/O: what a half is checked against, a
check's observation read as Valid / Invalid / Unverified, the Valid condition, when to check again (at once on a
change, periodically, with capped backoff while unverified) and whether a half derives under the coverage gate.
Messages carry the registry's or git's own words and never the material."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from controller_runtime.outcomes import NextCheck
from lifecycle.conditions import Condition, by_type, condition_status, find_condition
from lifecycle.credential_gate import Coverage, applied_coverage, coverage_of, covers_image
from lifecycle.sourcecredential import Half, argocd_url, in_scope, pull_key, read

__all__ = ["CHECK_REQUEST_ANNOTATION", "CREDENTIAL_CONDITION", "GATES", "INVALID", "NOT_PRESENT", "UNVERIFIED",
           "VALID", "Checked", "Reported", "Verdict", "after_check", "backoff_s", "check_request", "combined",
           "derives", "fingerprint", "git_urls", "git_verdict", "image_credentials", "outcome", "registry_hosts",
           "registry_verdict", "reported", "scoped_out", "valid_condition", "wait_before_check"]

VALID, INVALID, UNVERIFIED = "Valid", "Invalid", "Unverified"
NOT_PRESENT = "NotPresent"  # a half's state when its material was not found (nothing to check)
# Set to a new value (`apprafter repo creds check`): every half is due at once; status.checkRequest echoes it back
CHECK_REQUEST_ANNOTATION = "apprafter.io/check-requested"
MAX_REQUEST = 128  # characters of a request kept (the status field's maxLength)
CREDENTIAL_CONDITION = "SourceCredentialValid"  # on an Application whose image only Invalid credentials cover
NAMESPACE_NOT_COVERED = "NamespaceNotCovered"  # ... or whose image credentials cover, but not in its namespace
GATES = ("present", "confirmed")  # a half derives once its material is present, or once it is also Valid
BACKOFF_BASE = 5.0  # seconds before the first re-check of an unverified half; doubled each time up to the cap
WORDS = 300  # characters of the server's words kept in a message
# git's words when the server refused the login it was given (the credential helper answered, then 401/403)
_REFUSED = re.compile(r"Authentication failed|returned error: 40[13]\b|Invalid username or (password|token)",
                      re.IGNORECASE)
_NOT_FOUND = re.compile(r"repository '[^']*' not found|returned error: 404\b", re.IGNORECASE)
_UNPRINTABLE = re.compile(r"[^\x20-\x7e]")


class Verdict(NamedTuple):
    """One check's outcome: VALID, INVALID or UNVERIFIED, and the server's words."""

    state: str
    message: str


class Reported(NamedTuple):
    """One half as a SourceCredential's status reports it: VALID / INVALID / UNVERIFIED, or NOT_PRESENT (its
    material was not found: `reason` and `message` are Present's), and when it was last checked."""

    half: str
    state: str
    reason: str
    message: str
    last_validated: str


class Checked(NamedTuple):
    """The last check of one half (kept in the operator's memory only): what it checked, its verdict, when
    (monotonic seconds and RFC 3339), how many checks in a row could not tell, and the check request it answered."""

    fingerprint: str
    verdict: Verdict
    at: float
    timestamp: str
    unverified_runs: int
    requested: str = ""


def _words(text: str) -> str:
    return _UNPRINTABLE.sub("?", " ".join(text.split()))[:WORDS]


def registry_hosts(half: Half) -> list[str]:
    """The registries a half is checked against: each entry's host[:port], once."""
    return sorted({pull_key(entry).split("/", 1)[0] for entry in half.covers})


def git_urls(half: Half) -> list[str]:
    """The URLs a half is checked against: each prefix as Argo CD matches it."""
    return sorted({argocd_url(prefix) for prefix in half.covers})


def registry_verdict(host: str, status: int | None, words: str) -> Verdict:
    """`GET /v2/` with the login (the token exchange answered): 2xx Valid; 401/403 Invalid in the registry's
    words; anything else (no answer, 5xx, 429, nonsense) Unverified: it says nothing about the login."""
    if status is None:
        return Verdict(UNVERIFIED, f"{_words(words)} (not a verdict on the login: checked again later)")
    if 200 <= status < 300:
        return Verdict(VALID, f"registry {host} accepted the login (GET /v2/: HTTP {status})")
    if status in (401, 403):
        return Verdict(INVALID, f"registry {host} refused the login: GET /v2/: {_words(words)}")
    return Verdict(UNVERIFIED, f"registry {host}: GET /v2/: {_words(words)} (not a verdict on the login: checked "
                               "again later)")


def git_verdict(url: str, exit_code: int | None, stderr: str, timeout_s: float) -> Verdict:
    """`git ls-remote URL` with the login: exit 0 Valid; a refused login Invalid in git's words; a repository not
    found after the login was taken Valid (a prefix need not be a repository); no answer in time, no route or a
    server failure Unverified."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    said = next((line for line in reversed(lines) if line.startswith(("fatal:", "error:"))), lines[-1] if lines
                else "")
    if exit_code is None:
        return Verdict(UNVERIFIED, f"git ls-remote {url}: no answer within {timeout_s:g}s (checked again later)")
    if exit_code == 0:
        return Verdict(VALID, f"git ls-remote {url}: the login was accepted")
    if _REFUSED.search(stderr):
        return Verdict(INVALID, f"git ls-remote {url} refused the login: {_words(said)}")
    if _NOT_FOUND.search(stderr):
        return Verdict(VALID, f"git ls-remote {url}: the login was accepted (no repository at the prefix itself: "
                              f"{_words(said)})")
    return Verdict(UNVERIFIED, f"git ls-remote {url}: {_words(said) or f'exit {exit_code}'} (not a verdict on the "
                               "login: checked again later)")


def combined(verdicts: Iterable[Verdict]) -> Verdict:
    """A half's verdict over its hosts or URLs: Invalid if any refused, else Unverified if any could not tell."""
    found = list(verdicts)
    for state in (INVALID, UNVERIFIED):
        worst = [v.message for v in found if v.state == state]
        if worst:
            return Verdict(state, "; ".join(worst))
    return Verdict(VALID, "; ".join(v.message for v in found))


def fingerprint(half: Half, username: str, password: str) -> str:
    """What a check depends on, hashed (a change means check again at once); kept in memory, never written."""
    secret = hashlib.sha256(password.encode()).hexdigest()
    return hashlib.sha256(json.dumps([sorted(half.covers), username, secret]).encode()).hexdigest()


def check_request(annotations: Mapping[str, Any] | None) -> str:
    """The credential's check request ("" when none): the annotation's value, bounded and printable."""
    value = (annotations or {}).get(CHECK_REQUEST_ANNOTATION)
    return _UNPRINTABLE.sub("?", value)[:MAX_REQUEST] if isinstance(value, str) else ""


def wait_before_check(last: Checked | None, current: str, now: float, interval_s: float, cap_s: float,
                      requested: str = "") -> NextCheck:
    """When the half is due for a check: now when never checked, changed since, or a check was requested since (a
    new request value); else `interval_s` after a verdict, or a backoff doubling from BACKOFF_BASE up to `cap_s` after
    each check that could not tell."""
    if last is None or last.fingerprint != current or last.requested != requested:
        return NextCheck.now()
    wait = backoff_s(last.unverified_runs, cap_s) if last.verdict.state == UNVERIFIED else interval_s
    return NextCheck.after_last(last.at, wait, now)


def backoff_s(runs: int, cap_s: float) -> float:
    """Seconds before trying again after `runs` tries in a row that could not tell: BACKOFF_BASE, doubling, capped."""
    return min(cap_s, BACKOFF_BASE * 2.0 ** max(0, runs - 1))


def after_check(last: Checked | None, current: str, verdict: Verdict, now: float, timestamp: str,
                requested: str = "") -> Checked:
    """The memory of a check just made (the count of checks in a row that could not tell, the request answered)."""
    runs = 0
    if verdict.state == UNVERIFIED:
        runs = (last.unverified_runs if last is not None and last.fingerprint == current else 0) + 1
    return Checked(current, verdict, now, timestamp, runs, requested)


def valid_condition(last: Checked | None, why_unchecked: str | None) -> Condition:
    """The half's Valid condition: True (Valid), False (Invalid: the server's words), Unknown (Unverified)."""
    if last is None:
        return Condition("Valid", "Unknown", UNVERIFIED, why_unchecked or "not checked yet")
    state = condition_status({VALID: "True", INVALID: "False"}.get(last.verdict.state))
    return Condition("Valid", state, last.verdict.state, last.verdict.message)


def derives(gate: str, present: bool, last: Checked | None, current: str | None) -> bool:
    """Whether a half's Secrets are written now: `present` as soon as the material is there; `confirmed` only
    once the current material was checked Valid (until then what it derived before stays as it was)."""
    if not present:
        return False
    if gate == "present":
        return True
    return last is not None and last.fingerprint == current and last.verdict.state == VALID


def _registry_invalid(obj: Mapping[str, Any]) -> bool:
    """Whether a SourceCredential's status says its registry half was refused (Valid False, reason Invalid)."""
    valid = find_condition(((obj.get("status") or {}).get("registry") or {}).get("conditions"), "Valid")
    return valid.get("status") == "False" and valid.get("reason") == INVALID


def _serving(obj: Mapping[str, Any]) -> Coverage:
    """What a SourceCredential serves now: the coverage last applied while a change waits for its plan (the derived
    Secrets stay as they were), else its spec's."""
    status = obj.get("status") or {}
    held = applied_coverage(status) if status.get("migrationPlan") else None
    return held if held is not None else coverage_of(read(obj))


def _covering(image: str, credentials: Iterable[Mapping[str, Any]]) -> list[tuple[Mapping[str, Any], Coverage]]:
    """The live SourceCredentials whose registry hosts cover an image, with what each serves."""
    return [(obj, coverage) for obj in credentials if not obj["metadata"].get("deletionTimestamp")
            and (coverage := _serving(obj)).registry and covers_image(coverage.registry, image)]


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
