"""What a SourceCredential pass looks at outside the cluster, decided without I/O: which OpenBao paths are due for a
read and which halves for a check (each at once when new or changed, then on the check interval, with capped backoff
while it cannot tell), each half's material as the pass finds it, and what the controller remembers of both between
passes (in its memory only: never written anywhere)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from controller_runtime.outcomes import NextCheck
from lifecycle.credentials.checks import (
    Checked,
    Verdict,
    after_check,
    combined,
    fingerprint,
    git_urls,
    registry_hosts,
    wait_before_check,
)
from lifecycle.credentials.material import Found, Material, Unreadable, material
from lifecycle.credentials.openbao import (
    BACKEND_UNAVAILABLE,
    KvPath,
    Read,
    after_read,
    kv_path,
    not_configured,
    wait_before_read,
)
from lifecycle.credentials.spec import HALVES, Credential, Half

__all__ = ["CheckRequest", "Looks", "Memory", "Observed", "ReadRequest", "Timing", "checked", "checks_due",
           "materials", "reads_due"]


class Timing(NamedTuple):
    """How often the outside is looked at: the seconds between two looks that gave an answer, the backoff's cap, and
    whether an OpenBao is configured at all (no: an openBaoPath half is Present Unknown, never read)."""

    interval: float
    cap: float
    openbao: bool


class Memory(NamedTuple):
    """What the controller remembers of one credential between passes: each half's last OpenBao read and last
    check, by half."""

    reads: Mapping[str, Read] = {}
    checks: Mapping[str, Checked] = {}


class ReadRequest(NamedTuple):
    """An OpenBao path to read (for `half`, the first half that names it)."""

    half: str
    path: KvPath


class CheckRequest(NamedTuple):
    """A half to check: against each of its registries (`GET /v2/`) or repository URLs (`git ls-remote`), with the
    material it is checked with."""

    half: str
    registries: tuple[str, ...]
    repositories: tuple[str, ...]
    login: Material


class Looks(NamedTuple):
    """What a pass must look at before it can decide: OpenBao paths to read, halves to check."""

    reads: tuple[ReadRequest, ...] = ()
    checks: tuple[CheckRequest, ...] = ()


class Observed(NamedTuple):
    """What a pass looked at so far: each OpenBao path's reply read (by path), each half's check (by half: the
    verdict of each server it was checked against)."""

    reads: Mapping[str, Material | Unreadable | str] = {}
    verdicts: Mapping[str, Sequence[Verdict]] = {}


NOT_A_PATH = Unreadable(BACKEND_UNAVAILABLE, "not an openBaoPath")  # the CRD and the webhook refuse it: never read
UNREAD = Unreadable(BACKEND_UNAVAILABLE, "not read yet (read again later)")  # a new path the pass did not read


def _halves(credential: Credential) -> list[tuple[str, Half]]:
    return [(name, half) for name, half in zip(HALVES, (credential.git, credential.registry), strict=True)
            if half is not None]


def reads_due(credential: Credential, memory: Memory, observed: Observed, now: float,
              timing: Timing) -> tuple[ReadRequest, ...]:
    """The OpenBao paths due for a read and not read yet this pass, each once (never read, its path changed, the
    interval passed, or its backoff after a read that could not tell)."""
    out: dict[str, ReadRequest] = {}
    for name, half in _halves(credential) if timing.openbao else []:
        path = half.backend.openbao_path
        kv = kv_path(path) if path is not None else None
        if (kv is not None and path not in observed.reads and path not in out
                and wait_before_read(memory.reads.get(name), str(path), now, timing.interval, timing.cap).due):
            out[str(path)] = ReadRequest(name, kv)
    return tuple(out.values())


def materials(credential: Credential, secrets: Mapping[str, Mapping[str, Any] | None], memory: Memory,
              observed: Observed, now: float, timing: Timing) -> tuple[dict[str, Found], dict[str, Read],
                                                                         list[NextCheck]]:
    """Each half's material: from its unsealed Secret (`secrets`, by name), or from OpenBao as read this pass or
    last; the memory of each openBaoPath half's read, and when each is due again."""
    found: dict[str, Found] = {}
    reads: dict[str, Read] = {}
    waits: list[NextCheck] = []
    for name, half in _halves(credential):
        if half.backend.sealed_secret:
            found[name] = material(secrets.get(half.backend.sealed_secret), half.backend.sealed_secret)
        path = half.backend.openbao_path
        if path is None:
            continue
        if not timing.openbao:
            found[name] = not_configured()
            continue
        last = memory.reads.get(name)
        reply = _reply(path, last, observed, now, timing)
        read = after_read(last, path, reply, now) if reply is not None else last
        assert read is not None  # no reply only when the last read of the same path stands
        reads[name] = read
        found[name] = read.found
        waits.append(wait_before_read(read, path, now, timing.interval, timing.cap))
    return found, reads, waits


def _reply(path: str, last: Read | None, observed: Observed, now: float,
           timing: Timing) -> Material | Unreadable | str | None:
    """What this pass read at `path` (None: nothing, the last read stands): OpenBao's reply, or for a path that is
    none, when due, why it is never read."""
    if path in observed.reads:
        return observed.reads[path]
    due = wait_before_read(last, path, now, timing.interval, timing.cap).due
    if kv_path(path) is None and due:
        return NOT_A_PATH
    return UNREAD if last is None or last.path != path else None


def checks_due(credential: Credential, found: Mapping[str, Found], memory: Memory, observed: Observed, now: float,
               timing: Timing, requested: str) -> tuple[CheckRequest, ...]:
    """The halves whose material is there, due for a check (new or changed, requested, the interval or the backoff
    passed) and not checked yet this pass."""
    out = []
    for name, half in _halves(credential):
        login = found.get(name)
        if isinstance(login, Material) and name not in observed.verdicts and wait_before_check(
                memory.checks.get(name), fingerprint(half, login.username, login.password), now, timing.interval,
                timing.cap, requested).due:
            registry = name == "registry"
            out.append(CheckRequest(name, tuple(registry_hosts(half)) if registry else (),
                                    () if registry else tuple(git_urls(half)), login))
    return tuple(out)


def checked(credential: Credential, found: Mapping[str, Found], memory: Memory, observed: Observed, now: float,
            timestamp: str, timing: Timing, requested: str) -> tuple[dict[str, Checked], dict[str, str],
                                                                    list[NextCheck]]:
    """For each half whose material is there: its last check (this pass's, or remembered), what a check depends on
    now (its fingerprint), and when it is due again."""
    last: dict[str, Checked] = {}
    current: dict[str, str] = {}
    waits: list[NextCheck] = []
    for name, half in _halves(credential):
        login = found.get(name)
        if not isinstance(login, Material):
            continue
        current[name] = fingerprint(half, login.username, login.password)
        before = memory.checks.get(name)
        now_checked = (after_check(before, current[name], combined(observed.verdicts[name]), now, timestamp,
                                   requested) if name in observed.verdicts else before)
        if now_checked is not None:
            last[name] = now_checked
        waits.append(wait_before_check(now_checked, current[name], now, timing.interval, timing.cap, requested))
    return last, current, waits
