"""The backends' registry (lifecycle/backends/registry.py) against the CUE schema (lifecycle.service_provider): one
core per (type, backend), each a backend the schema lists for its type; `admit` says the schema's problems first and
then the backend's own; `core_for` finds a provider's core, or with no backend (the provider is gone) the one core of
the type."""

from __future__ import annotations

from typing import Any

import pytest

from lifecycle.backends import pg, registry
from lifecycle.backends.contract import Site
from lifecycle.backends.registry import REGISTERED, Registration, admit, core_for, registration
from lifecycle.service_provider import backends, check

IDS = [f"{r.core.type}-{r.core.backend}" for r in REGISTERED]


def provider(type_: str, backend: str, config: dict[str, Any] | None = None, name: str = "p") -> dict[str, Any]:
    return {"apiVersion": "apprafter.io/v1alpha1", "kind": "ServiceProvider", "metadata": {"name": name},
            "spec": {"type": type_, "backend": backend, **({"config": config} if config is not None else {})}}


def test_every_registered_core_serves_a_distinct_type_and_backend() -> None:
    served = [(r.core.type, r.core.backend) for r in REGISTERED]
    assert len(set(served)) == len(served), served
    assert len({id(r.core) for r in REGISTERED}) == len(REGISTERED)  # no core registered twice under two names


@pytest.mark.parametrize("registered", REGISTERED, ids=IDS)
def test_a_registered_backend_is_one_the_schema_lists_for_its_type(registered: Registration) -> None:
    core = registered.core
    assert core.backend in backends().get(core.type, ()), (core.type, core.backend, backends())
    assert check(provider(core.type, core.backend)) == []  # the webhook lets such a provider through


@pytest.mark.parametrize("registered", REGISTERED, ids=IDS)
def test_admit_says_the_schemas_problems_for_a_config_the_backend_does_not_read(registered: Registration) -> None:
    core = registered.core
    bad = provider(core.type, core.backend, {"noSuchSetting": 1})
    problems = admit(None, bad)
    assert problems and problems == check(bad)
    assert [field for field, _ in problems] == ["spec.config.noSuchSetting"]
    assert admit(None, provider(core.type, core.backend, {})) == []
    # the core says the same problems when it reads that provider (a provider written before the webhook)
    assert core.configure(bad, Site("ns", "an/image:1")) == [f"{field}: {problem}" for field, problem in problems]


def test_admit_refuses_a_backend_that_does_not_serve_the_type() -> None:
    wrong = provider("redis", "cloudnative-pg")
    [(field, problem)] = admit(None, wrong)
    assert field == "spec.backend" and "does not serve redis" in problem


def test_admit_asks_the_providers_core_once_the_schema_passes() -> None:
    old = provider("pg", "cloudnative-pg", {"storage": {"size": "20Gi"}})
    new = provider("pg", "cloudnative-pg", {"storage": {"size": "10Gi"}})
    assert check(new) == []
    refused = admit(old, new)
    assert refused and refused == pg.CORE.admit(old, new)
    assert admit(new, old) == []



def test_every_backend_the_schema_admits_is_one_a_core_serves_and_no_other() -> None:
    """A provider of a backend no core serves would bind claims that wait forever with nothing said (issue 42: the
    schema listed `dragonfly` for redis, which nothing ran): #Backends and REGISTERED are the same pairs."""
    schema = {(kind, backend) for kind, served in backends().items() for backend in served}
    assert schema == {(r.core.type, r.core.backend) for r in REGISTERED}
    assert admit(None, provider("redis", "dragonfly", {})) == [
        ("spec.backend", "'dragonfly' does not serve redis: use redis-server")]


@pytest.mark.parametrize("registered", REGISTERED, ids=IDS)
def test_core_for_finds_the_core_of_its_type_and_backend_and_with_no_backend_the_one_of_its_type(
        registered: Registration) -> None:
    core = registered.core
    assert core_for(core.type, core.backend) is core
    assert registration(core.type, core.backend) is registered
    of_type = [r for r in REGISTERED if r.core.type == core.type]
    assert core_for(core.type, None) is (core if len(of_type) == 1 else None)
    others = {r.core.type for r in REGISTERED} - {core.type}
    assert all(core_for(other, core.backend) is None for other in others)


def test_core_for_with_no_backend_finds_none_when_two_cores_serve_the_type(monkeypatch: pytest.MonkeyPatch) -> None:
    [redis] = [r for r in REGISTERED if r.core.type == "redis"]

    class Another:
        backend, type, drop_needs_provider = "another-redis", "redis", True

    second = Registration(Another(), (), ())  # type: ignore[arg-type]
    monkeypatch.setattr(registry, "REGISTERED", (*REGISTERED, second))
    assert core_for("redis", None) is None  # which one held the claim's data is not the registry's to guess
    assert core_for("redis", "redis-server") is redis.core and core_for("redis", "another-redis") is second.core
    assert core_for("no-such-type", None) is None


@pytest.mark.parametrize("registered", [r for r in REGISTERED if not r.core.drop_needs_provider],
                         ids=[i for r, i in zip(REGISTERED, IDS, strict=True) if not r.core.drop_needs_provider])
def test_a_core_that_drops_without_its_provider_reads_a_provider_of_a_name_alone(registered: Registration) -> None:
    """The edge hands such a core the provider's name and nothing else once the provider is gone."""
    assert not isinstance(registered.core.configure({"metadata": {"name": "gone"}}, Site("ns")), list)
