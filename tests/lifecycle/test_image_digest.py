"""lifecycle.image_digest alone (pure, the clock moved by hand; tests/reconciler/test_image_digest_cluster.py proves it
through the operator and a real registry): a followed tag is applied as its digest, a move is rolled out and said,
a vanished tag or a silent registry keeps the running digest, the next look comes at the interval (later while the
registry fails)."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from lifecycle.image_digest import (
    DEFAULT_INTERVAL,
    INTERVAL_ANNOTATION,
    MAX_BACKOFF,
    RESOLVE_ANNOTATION,
    Resolved,
    TagGone,
    Unreachable,
    allowed,
    answer,
    due,
    followed,
    interval_of,
    not_allowed,
    pinned,
    plain_http,
    previous,
    resolve,
)
from renderer.imageref import normalized

OLD = "sha256:" + "a" * 64
NEW = "sha256:" + "b" * 64
IMAGE = "registry.example/team/shop:latest"
T0 = datetime.datetime(2026, 12, 7, 12, 0, 0, tzinfo=datetime.UTC)


def stamp(seconds: float) -> tuple[float, str]:
    """(now, its meta/v1 Time) `seconds` after T0."""
    when = T0 + datetime.timedelta(seconds=seconds)
    return when.timestamp(), when.strftime("%Y-%m-%dT%H:%M:%SZ")


def deployment(image: str = IMAGE, interval: str | None = "30s", resolve: str = "digest") -> dict[str, Any]:
    annotations = {RESOLVE_ANNOTATION: resolve, **({INTERVAL_ANNOTATION: interval} if interval else {})}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "shop", "annotations": annotations},
            "spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}}}


def test_the_interval_is_read_bounded_and_defaults_to_five_minutes() -> None:
    assert [interval_of(t) for t in ("30s", "2m", "1h", "0s", "999h", "9" * 5000 + "s", "0009s", None, "5 m")] == [
        30.0, 120.0, 3600.0, 1.0, 86400.0, 86400.0, 9.0, DEFAULT_INTERVAL, DEFAULT_INTERVAL]
    assert DEFAULT_INTERVAL == 300.0
    [follow] = followed([deployment(interval=None), {"kind": "Service", "metadata": {}}])
    assert follow.interval == 300.0


def test_only_tags_of_deployments_that_ask_are_followed() -> None:
    assert followed([deployment(resolve="off")]) == []
    assert followed([deployment(image=f"{IMAGE}@{OLD}")]) == []  # pinned already: nothing moves
    assert [f.container for f in followed([deployment()])] == ["app"]


def test_a_first_look_applies_the_digest_without_a_move() -> None:
    [follow] = followed([deployment()])
    now, ts = stamp(0)
    assert due(follow, None, now)
    images = resolve([follow], {}, {"app": Resolved(OLD)}, now, ts)
    assert images.entries == [{"container": "app", "image": IMAGE, "checkedAt": ts, "digest": OLD, "resolvedAt": ts}]
    assert images.notes == []
    assert images.condition is not None and (images.condition.status, images.condition.reason) == ("True", "Resolved")
    assert images.next_check is not None and images.next_check.seconds == 30.0
    [child] = pinned([deployment()], images.entries)
    applied = child["spec"]["template"]["spec"]["containers"][0]["image"]
    assert applied == f"{IMAGE}@{OLD}"
    assert normalized(applied) is not None  # the kubelet's grammar takes repo:tag@digest
    assert deployment()["spec"]["template"]["spec"]["containers"][0]["image"] == IMAGE  # the render is not changed


def test_the_same_digest_is_quiet_and_a_moved_tag_is_rolled_out_and_said() -> None:
    [follow] = followed([deployment()])
    first = resolve([follow], {}, {"app": Resolved(OLD)}, *stamp(0)).entries
    now, ts = stamp(10)
    assert not due(follow, first[0], now)  # within the interval: the status' digest, no registry call
    carried = resolve([follow], previous({"images": first}), {}, now, ts)
    assert carried.entries == first and carried.notes == []
    assert carried.next_check is not None and carried.next_check.seconds == 20.0
    now, ts = stamp(30)
    assert due(follow, first[0], now)
    same = resolve([follow], previous({"images": first}), {"app": Resolved(OLD)}, now, ts)
    assert same.notes == [] and same.entries[0]["resolvedAt"] == first[0]["resolvedAt"]
    moved = resolve([follow], previous({"images": same.entries}), {"app": Resolved(NEW)}, *stamp(60))
    [note] = moved.notes
    assert (note.reason, note.type) == ("ImageDigestMoved", "Normal")
    assert note.text == (f"app: {IMAGE} moved in the registry: {OLD} -> {NEW}; rolling out {IMAGE}@{NEW}")
    assert moved.entries[0]["digest"] == NEW and moved.entries[0]["resolvedAt"] == stamp(60)[1]
    [child] = pinned([deployment()], moved.entries)
    assert child["spec"]["template"]["spec"]["containers"][0]["image"] == f"{IMAGE}@{NEW}"


def test_a_vanished_tag_keeps_the_running_digest_and_says_so_once() -> None:
    [follow] = followed([deployment()])
    running = resolve([follow], {}, {"app": Resolved(OLD)}, *stamp(0)).entries
    gone = resolve([follow], previous({"images": running}), {"app": TagGone()}, *stamp(30))
    entry = gone.entries[0]
    assert entry["digest"] == OLD and entry["resolvedAt"] == stamp(0)[1]
    assert entry["message"] == f"the tag is not in the registry any more (manifest unknown); keeping {OLD}, the " \
                               "digest running"
    assert gone.condition is not None
    assert (gone.condition.status, gone.condition.reason) == ("False", "TagNotFound")
    assert gone.condition.message == f"app: {IMAGE}: {entry['message']}"
    assert [n.reason for n in gone.notes] == ["ImageTagGone"] and gone.notes[0].type == "Warning"
    again = resolve([follow], previous({"images": gone.entries}), {"app": TagGone()}, *stamp(60))
    assert again.notes == [] and again.entries[0]["digest"] == OLD  # said once, still kept
    assert pinned([deployment()], again.entries)[0]["spec"]["template"]["spec"]["containers"][0]["image"] == \
        f"{IMAGE}@{OLD}"
    back = resolve([follow], previous({"images": again.entries}), {"app": Resolved(OLD)}, *stamp(90))
    assert "message" not in back.entries[0] and back.condition is not None and back.condition.status == "True"


def test_a_silent_registry_keeps_the_digest_and_backs_off() -> None:
    [follow] = followed([deployment()])
    entries = resolve([follow], {}, {"app": Resolved(OLD)}, *stamp(0)).entries
    waits = []
    for look in range(1, 9):
        failed = resolve([follow], previous({"images": entries}), {"app": Unreachable("registry x: HTTP 503")},
                         *stamp(look * 10_000))
        entries = failed.entries
        assert failed.next_check is not None
        waits.append(failed.next_check.seconds)
    assert waits == [60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, MAX_BACKOFF, MAX_BACKOFF]
    entry = entries[0]
    assert entry["digest"] == OLD and entry["failures"] == 8
    assert entry["message"] == f"registry x: HTTP 503; keeping {OLD}, the digest running"
    assert failed.condition is not None
    assert (failed.condition.status, failed.condition.reason) == ("Unknown", "RegistryUnavailable")
    assert failed.notes == []
    healed = resolve([follow], previous({"images": entries}), {"app": Resolved(OLD)}, *stamp(200_000))
    assert "failures" not in healed.entries[0] and healed.next_check is not None
    assert healed.next_check.seconds == 30.0


def test_without_a_digest_yet_the_tag_is_applied_as_rendered() -> None:
    [follow] = followed([deployment()])
    failed = resolve([follow], {}, {"app": Unreachable("registry x: connection refused")}, *stamp(0))
    assert "digest" not in failed.entries[0]
    assert failed.entries[0]["message"].endswith("applied by its tag until a digest is known")
    assert pinned([deployment()], failed.entries) == [deployment()]


@pytest.mark.parametrize("new_image", ["registry.example/team/shop:2", "registry.example/team/shop:latest"])
def test_a_new_image_in_the_spec_is_looked_up_at_once_and_is_no_move(new_image: str) -> None:
    [follow] = followed([deployment()])
    entries = resolve([follow], {}, {"app": Resolved(OLD)}, *stamp(0)).entries
    [changed] = followed([deployment(image=new_image, interval="1h")])
    now, ts = stamp(5)
    assert due(changed, entries[0], now) == (new_image != IMAGE)
    if new_image != IMAGE:
        fresh = resolve([changed], previous({"images": entries}), {"app": Resolved(NEW)}, now, ts)
        assert fresh.notes == [] and fresh.entries[0]["image"] == new_image and fresh.entries[0]["digest"] == NEW
        # the old tag's digest is never applied to the new tag
        assert pinned([deployment(image=new_image)], entries) == [deployment(image=new_image)]


def test_malformed_status_entries_count_as_none() -> None:
    assert previous({"images": "x"}) == {} and previous({"images": [1, {"container": 2}]}) == {}
    [follow] = followed([deployment()])
    entry = {"container": "app", "image": IMAGE, "digest": "sha256:nothex", "checkedAt": "yesterday"}
    assert due(follow, entry, stamp(0)[0])
    assert pinned([deployment()], [entry]) == [deployment()]


def test_the_registrys_answer_in_fixed_words() -> None:
    host = "registry.example"
    assert answer(host, 200, OLD, True) == Resolved(OLD)
    assert answer(host, 404, None, False) == TagGone()
    words = {status: answer(host, status, None, True) for status in (None, 200, 401, 403, 429, 503, 418)}
    assert words == {
        None: Unreachable("registry registry.example did not answer usably (unreachable, too slow, a TLS or token "
                          "failure, or a reply that is not a manifest: the operator's log says which)"),
        200: words[None],
        401: Unreachable("registry registry.example refused the pull secret's login (401 Unauthorized)"),
        403: Unreachable("registry registry.example refused access to the repository (403 Forbidden)"),
        429: Unreachable("registry registry.example is rate limiting (429 Too Many Requests)"),
        503: Unreachable("registry registry.example failed (HTTP 503)"),
        418: Unreachable("registry registry.example answered HTTP 418")}
    assert "no pull secret" in answer(host, 401, None, False).message  # type: ignore[union-attr]


def test_the_platforms_registries_bound_where_the_operator_asks() -> None:
    assert allowed("ghcr.io", ())  # none given: every registry
    assert allowed("127.0.0.1:5000", ("127.0.0.1:*", "localhost:*"))
    assert allowed("eu.registry.example.com", ("*.example.com",))
    assert not allowed("ghcr.io", ("127.0.0.1:*",))
    assert not_allowed("ghcr.io") == Unreachable(
        "registry ghcr.io is not one the platform lets the operator ask (the operator's --image-registries): the tag "
        "runs as rendered")


def test_plain_http_only_to_loopback_and_the_platforms_insecure_registries() -> None:
    """A registry served without TLS inside the platform's network is asked over plain HTTP when the operator's
    --insecure-registries names it; every other registry over HTTPS, whatever it is called."""
    for host in ("127.0.0.1:5000", "localhost:5000", "localhost", "[::1]:5000"):
        assert plain_http(host, ())  # loopback: always (the test bed's registries)
    assert not plain_http("registry.lan:5000", ())  # nothing named: HTTPS
    assert plain_http("registry.lan:5000", ("registry.lan:5000",))
    assert plain_http("10.0.0.7:5000", ("10.0.0.7:*",))
    assert not plain_http("registry.lan:5001", ("registry.lan:5000",))
    assert not plain_http("ghcr.io", ("registry.lan:5000", "*.example.com"))
    assert plain_http("eu.registry.example.com", ("*.example.com",))
    assert not plain_http("example.com", ("*.example.com",))
    assert not plain_http("eu.registry.example.com:5000", ("*.example.com",))  # a port is part of the host
    assert not plain_http("127.0.0.1.evil.com", ())  # a name that starts like loopback is not loopback
