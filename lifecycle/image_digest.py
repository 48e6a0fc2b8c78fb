"""Image updates (`imagePolicy.resolve: "digest"`): which containers follow a tag, when the registry is asked again,
what its answer makes of the image applied (`repo:tag@sha256:...`), the status entry, the Event of a move, and what
a vanished tag or an unreachable registry says. The running digest is never dropped: without an answer the last one
stays. reconciler/image_digests.py asks the registry; this module reads no clock (`now` is passed in)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from controller_runtime.outcomes import NextCheck, soonest
from lifecycle.conditions import Condition
from lifecycle.notes import Note
from renderer.imageref import is_digest_pinned, is_loopback, normalized
from toolchain.timestamps import parse_time

__all__ = ["DEFAULT_INTERVAL", "IMAGE_RESOLVED", "INTERVAL_ANNOTATION", "MAX_BACKOFF", "MAX_INTERVAL", "MIN_INTERVAL",
           "RESOLVE_ANNOTATION", "Answer", "Followed", "Images", "Resolved", "TagGone", "Unreachable", "allowed",
           "answer", "due", "followed", "in_force", "interval_of", "not_allowed", "pinned", "plain_http", "previous",
           "resolve", "with_digest"]

RESOLVE_ANNOTATION = "apprafter.io/image-resolve"  # written by renderer/manifests/workload.py
INTERVAL_ANNOTATION = "apprafter.io/image-resolve-interval"
DEFAULT_INTERVAL = 300.0  # imagePolicy.interval left out: 5m (docs/application.md)
MIN_INTERVAL, MAX_INTERVAL = 1.0, 86400.0  # what an interval is held to, whatever it says
MAX_BACKOFF = 3600.0  # a failing registry is asked again at most this far apart (or the interval, if longer)
IMAGE_RESOLVED = "ImageResolved"
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


class Followed(NamedTuple):
    """A container whose image tag the operator follows: the Deployment's container, its rendered image, and how
    often (seconds) the registry is asked again."""

    container: str
    image: str
    interval: float


class Resolved(NamedTuple):
    """The registry's answer: the tag points at this manifest digest."""

    digest: str


class TagGone(NamedTuple):
    """The registry answered, and has no such tag (404)."""


class Unreachable(NamedTuple):
    """The registry did not answer usably (transport failure, 401/403, 5xx, a reply that is not a manifest): in
    a few fixed words (`answer`), never the registry's own."""

    message: str


Answer = Resolved | TagGone | Unreachable


def answer(host: str, status: int | None, digest: str | None, with_login: bool) -> Answer:
    """What a `GET manifests/<tag>` said (`status` None: no usable answer at all). The words are fixed phrases:
    the tenant chose the host, and its status is no window onto what answers there (the operator's log has the
    registry's own words)."""
    if status == 200 and digest is not None:
        return Resolved(digest)
    if status == 404:
        return TagGone()
    if status is None or status == 200:
        return Unreachable(f"registry {host} did not answer usably (unreachable, too slow, a TLS or token failure, "
                           "or a reply that is not a manifest: the operator's log says which)")
    if status == 401 and not with_login:
        return Unreachable(f"registry {host} refused anonymous access (401 Unauthorized): the app has no pull "
                           "secret for it (a SourceCredential whose registry hosts cover the image gives one)")
    said = {401: "refused the pull secret's login (401 Unauthorized)",
            403: "refused access to the repository (403 Forbidden)",
            429: "is rate limiting (429 Too Many Requests)"}.get(status)
    if said is None:
        said = f"failed (HTTP {status})" if status >= 500 else f"answered HTTP {status}"
    return Unreachable(f"registry {host} {said}")


def _matches(host: str, patterns: Sequence[str]) -> bool:
    """Whether `host` (as the image names it: `ghcr.io`, `127.0.0.1:5000`) matches one of the platform's
    shell-style patterns (`*.example.com`, `registry.internal:*`): the one matcher of both registry flags."""
    import fnmatch

    return any(fnmatch.fnmatchcase(host, pattern) for pattern in patterns)


def allowed(host: str, registries: Sequence[str]) -> bool:
    """Whether the operator may ask `host` about tags: the platform's --image-registries patterns, none given:
    every registry."""
    return not registries or _matches(host, registries)


def plain_http(host: str, insecure: Sequence[str]) -> bool:
    """Whether `host` is asked over plain HTTP, never HTTPS: a loopback registry always, else one the platform's
    --insecure-registries patterns name (a registry served without TLS inside its own network)."""
    return is_loopback(host) or _matches(host, insecure)


def not_allowed(host: str) -> Answer:
    """The answer for a registry the platform keeps the operator from asking (nothing is sent)."""
    return Unreachable(f"registry {host} is not one the platform lets the operator ask (the operator's "
                       "--image-registries): the tag runs as rendered")


class Images(NamedTuple):
    """The outcome for every followed container: the status entries (`status.images`), the Events, the Ready-side
    condition (None: nothing is followed) and when to ask again."""

    entries: list[dict[str, Any]]
    notes: list[Note]
    condition: Condition | None
    next_check: NextCheck | None


def interval_of(text: str | None) -> float:
    """An annotation's `5m` in seconds, held to [MIN_INTERVAL, MAX_INTERVAL]; absent or unreadable: the default."""
    found = re.fullmatch(r"([0-9]+)([smh])", text or "")
    if not found:
        return DEFAULT_INTERVAL
    if len(found[1].lstrip("0")) > 9:
        return MAX_INTERVAL  # the schema takes any digits; past a billion seconds is past the cap anyway
    return min(MAX_INTERVAL, max(MIN_INTERVAL, int(found[1]) * _UNITS[found[2]]))


def followed(children: Iterable[Mapping[str, Any]]) -> list[Followed]:
    """The containers of the Deployments rendered with `apprafter.io/image-resolve: digest` whose image is a tag (one
    pinned by a digest already has nothing to follow)."""
    out = []
    for child in children:
        annotations = (child.get("metadata") or {}).get("annotations") or {}
        if child.get("kind") != "Deployment" or annotations.get(RESOLVE_ANNOTATION) != "digest":
            continue
        interval = interval_of(annotations.get(INTERVAL_ANNOTATION))
        pod = ((child.get("spec") or {}).get("template") or {}).get("spec") or {}
        for container in pod.get("containers") or []:
            image = container.get("image")
            if isinstance(image, str) and normalized(image) is not None and not is_digest_pinned(image):
                out.append(Followed(str(container.get("name")), image, interval))
    return out


def previous(status: Mapping[str, Any] | None) -> dict[str, Mapping[str, Any]]:
    """The entries of `status.images` by container (anything malformed counts as none)."""
    entries = (status or {}).get("images")
    if not isinstance(entries, list):
        return {}
    return {str(e["container"]): e for e in entries if isinstance(e, Mapping) and isinstance(e.get("container"), str)}


def in_force(status: Mapping[str, Any] | None, image: str | None) -> str | None:
    """The digest an Application's status says `image` runs as (its tag resolved by the operator), else None:
    what `apprafter plan` shows of a CR read back from the cluster."""
    found = [d for e in previous(status).values() if e.get("image") == image and (d := _digest(e))]
    return found[0] if image and found else None


def _digest(entry: Mapping[str, Any] | None) -> str | None:
    found = (entry or {}).get("digest")
    return found if isinstance(found, str) and re.fullmatch(r"sha256:[0-9a-f]{64}", found) else None


def _mine(follow: Followed, entry: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The previous entry, if it is about the same image (a new tag in the spec starts afresh)."""
    return entry if entry is not None and entry.get("image") == follow.image else None


def _wait(follow: Followed, entry: Mapping[str, Any]) -> float:
    """Seconds between the last look and the next: the interval, doubled per failed look in a row, capped."""
    failures = entry.get("failures")
    count = failures if isinstance(failures, int) and 0 < failures < 32 else 0
    return float(min(follow.interval * 2.0 ** count, max(follow.interval, MAX_BACKOFF)))


def _next(follow: Followed, entry: Mapping[str, Any] | None, now: float) -> NextCheck:
    mine = _mine(follow, entry)
    checked = parse_time(str((mine or {}).get("checkedAt") or ""))
    if mine is None or checked is None:
        return NextCheck.now()
    return NextCheck.after_last(checked.timestamp(), _wait(follow, mine), now)


def due(follow: Followed, entry: Mapping[str, Any] | None, now: float) -> bool:
    """Whether the registry is to be asked about `follow` in this pass (never asked, another image, or its wait
    since the last look is over)."""
    return _next(follow, entry, now).due


def _look(follow: Followed, entry: Mapping[str, Any] | None, answer: Answer,
          timestamp: str) -> tuple[dict[str, Any], Note | None]:
    """The entry after a look at the registry, and the Event it asks for."""
    mine = _mine(follow, entry)
    running = _digest(mine)
    base: dict[str, Any] = {"container": follow.container, "image": follow.image, "checkedAt": timestamp}
    if isinstance(answer, Resolved):
        if answer.digest == running and mine is not None:
            return {**base, "digest": running, "resolvedAt": mine.get("resolvedAt") or timestamp}, None
        note = None
        if running is not None:
            note = Note("ImageDigestMoved", f"{follow.container}: {follow.image} moved in the registry: {running} -> "
                        f"{answer.digest}; rolling out {follow.image}@{answer.digest}",
                        _occurrence(follow.image, running, answer.digest))
        return {**base, "digest": answer.digest, "resolvedAt": timestamp}, note
    kept = {"digest": running, "resolvedAt": (mine or {}).get("resolvedAt")} if running else {}
    holding = f"keeping {running}, the digest running" if running else "applied by its tag until a digest is known"
    if isinstance(answer, TagGone):
        message = f"the tag is not in the registry any more (manifest unknown); {holding}"
        first = (mine or {}).get("message") != message
        note = (Note("ImageTagGone", f"{follow.container}: {follow.image}: {message}",
                     _occurrence(follow.image, running or "", "gone"), "Warning") if first else None)
        return {**base, **kept, "message": message}, note
    failures = (mine or {}).get("failures")
    count = (failures if isinstance(failures, int) and failures > 0 else 0) + 1
    return {**base, **kept, "failures": count, "message": f"{answer.message}; {holding}"}, None


def _occurrence(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def resolve(follows: Sequence[Followed], entries: Mapping[str, Mapping[str, Any]], answers: Mapping[str, Answer],
            now: float, timestamp: str) -> Images:
    """Every followed container after this pass: those with an answer (the registry was asked: `due`) looked at
    again, the others carried as they were; the condition says the state of all, the next check is the soonest."""
    out, notes, checks = [], [], []
    for follow in follows:
        entry = entries.get(follow.container)
        if follow.container in answers:
            entry, note = _look(follow, entry, answers[follow.container], timestamp)
            notes += [note] if note else []
        elif _mine(follow, entry) is None:
            entry = {"container": follow.container, "image": follow.image}
        out.append(dict(entry or {}))
        checks.append(_next(follow, entry, now))
    return Images(out, notes, _condition(follows, out, now), soonest(checks))


def _condition(follows: Sequence[Followed], entries: Sequence[Mapping[str, Any]], now: float) -> Condition | None:
    """ImageResolved: True while every followed tag resolved at its last look, False when a tag is gone, Unknown
    while a registry does not answer (the digest running is kept either way)."""
    if not follows:
        return None
    gone = [e for e in entries if "message" in e and "failures" not in e]
    failing = [e for e in entries if "failures" in e]
    pending = [e for e in entries if "message" not in e and _digest(e) is None]
    said = "; ".join(f"{e['container']}: {e['image']}: {e['message']}" for e in (*gone, *failing))
    if gone:
        return Condition(IMAGE_RESOLVED, "False", "TagNotFound", said)
    if failing:
        return Condition(IMAGE_RESOLVED, "Unknown", "RegistryUnavailable", said)
    if pending:
        return Condition(IMAGE_RESOLVED, "Unknown", "Resolving", "; ".join(
            f"{e['container']}: {e['image']}: not looked up yet" for e in pending))
    return Condition(IMAGE_RESOLVED, "True", "Resolved", "; ".join(
        f"{e['container']}: {e['image']} is {e['digest']}" for e in entries))


def with_digest(image: str, digest: str) -> str:
    """`repo:tag@sha256:...`: the kubelet (distribution/reference) takes both and pulls by the digest; the tag stays
    readable in `kubectl get`."""
    return f"{image}@{digest}"


def pinned(children: Iterable[Mapping[str, Any]], entries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The children with each followed container's image pinned to its entry's digest (none known: the tag as
    rendered). Only the Deployments that follow a tag are copied."""
    digests = {(e.get("container"), e.get("image")): d for e in entries if (d := _digest(e))}
    out: list[dict[str, Any]] = []
    for child in children:
        annotations = (child.get("metadata") or {}).get("annotations") or {}
        if child.get("kind") != "Deployment" or annotations.get(RESOLVE_ANNOTATION) != "digest" or not digests:
            out.append(dict(child))
            continue
        spec = dict(child["spec"])
        template = dict(spec["template"])
        pod = dict(template["spec"])
        pod["containers"] = [
            {**c, "image": with_digest(c["image"], digests[(c.get("name"), c.get("image"))])}
            if (c.get("name"), c.get("image")) in digests else dict(c) for c in pod.get("containers") or []]
        template["spec"], spec["template"] = pod, template
        out.append({**child, "spec": spec})
    return out
