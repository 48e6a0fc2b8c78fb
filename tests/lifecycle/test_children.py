"""Which removed claims a pass may prune now (lifecycle.children.in_use): none a pod still reads."""

from __future__ import annotations

from typing import Any

from lifecycle.children import in_use


def claim(name: str, secret: str | None) -> dict[str, Any]:
    status = {"connection": {"secretName": secret}} if secret else {}
    return {"metadata": {"name": name}, "status": status}


def pod(*, env: tuple[str, ...] | list[str] = (), env_from: tuple[str, ...] | list[str] = (),
        volumes: tuple[str, ...] | list[str] = (), init: tuple[str, ...] | list[str] = (),
        terminating: bool = False) -> dict[str, Any]:
    def container(names: list[str] | tuple[str, ...]) -> dict[str, Any]:
        return {"name": "c", "env": [{"name": f"V{i}", "valueFrom": {"secretKeyRef": {"name": n, "key": "url"}}}
                                     for i, n in enumerate(names)] + [{"name": "PLAIN", "value": "x"}]}
    meta: dict[str, Any] = {"name": "p"}
    if terminating:
        meta["deletionTimestamp"] = "2026-12-07T00:00:00Z"
    return {"metadata": meta, "spec": {
        "initContainers": [container(list(init))],
        "containers": [{**container(list(env)), "envFrom": [{"secretRef": {"name": n}} for n in env_from]}],
        "volumes": [{"name": f"v{i}", "secret": {"secretName": n}} for i, n in enumerate(volumes)]}}


def test_a_claim_whose_secret_a_pod_reads_is_in_use_however_it_reads_it() -> None:
    claims = [claim("demo-pg", "demo-pg-conn"), claim("demo-redis", "demo-redis-conn")]
    assert in_use(claims, [pod(env=["demo-redis-conn"])]) == {"demo-redis"}
    assert in_use(claims, [pod(env_from=["demo-pg-conn"])]) == {"demo-pg"}
    assert in_use(claims, [pod(volumes=["demo-pg-conn"])]) == {"demo-pg"}
    assert in_use(claims, [pod(init=["demo-pg-conn"]), pod(env=["demo-redis-conn"])]) == {"demo-pg", "demo-redis"}


def test_a_terminating_pod_still_holds_its_claims_and_none_left_holds_nothing() -> None:
    claims = [claim("demo-redis", "demo-redis-conn")]
    assert in_use(claims, [pod(env=["demo-redis-conn"], terminating=True)]) == {"demo-redis"}  # draining
    assert in_use(claims, [pod(env=["other"])]) == set()
    assert in_use(claims, []) == set()


def test_a_claim_without_a_connection_secret_yet_is_not_in_use() -> None:
    assert in_use([claim("demo-redis", None)], [pod(env=["demo-redis-conn"])]) == set()
