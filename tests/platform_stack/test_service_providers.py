"""The stack ships the integrated ServiceProviders (issue 31 item 1): on every tier a built stack applies one
provider per type a backend serves, each passing the webhook's rule (its backend serves its type, its config is
what that backend reads), labelled so a need with no selector, and one with `selector: {tier: integrated}`, binds to
exactly the one of its type; their config per tier is what docs/platform-services.md says; and they are synced after
the CRD and the webhook that reviews them. Through the real API server and webhook: tests/admission/
test_service_providers.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from lifecycle.binding import BOUND, bind
from lifecycle.service_provider import backends, check
from tests.platform_stack.conftest import ALL_TIERS
from tests.platform_stack.shipped import COMPONENT, backend_namespaces, render, shipped, umbrella_apps
from tests.renderer.helpers import REPO

DOC = REPO / "docs" / "platform-services.md"
WAVE = "argocd.argoproj.io/sync-wave"


def by_type(providers: list[dict[str, Any]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for p in providers:
        out.setdefault(p["spec"]["type"], []).append(p["metadata"]["name"])
    return out


@pytest.mark.parametrize("tier", ALL_TIERS)
def test_each_tier_ships_one_provider_per_served_type_that_the_webhook_accepts_and_a_need_binds_to(
        stack_all: Path, tmp_path: Path, tier: str) -> None:
    providers = shipped(stack_all, tier, tmp_path)
    assert {(p["apiVersion"], p["kind"]) for p in providers} == {("apprafter.io/v1alpha1", "ServiceProvider")}
    types = by_type(providers)
    assert set(types) == set(backends()) and all(len(names) == 1 for names in types.values()), types
    assert {names[0] for names in types.values()} == {"pg-integrated", "redis-integrated", "disk", "s3-integrated"}
    for provider in providers:
        assert "namespace" not in provider["metadata"]  # cluster-scoped
        assert check(provider) == [], provider  # the webhook's rule, config included
    for kind, [name] in types.items():
        for selector in ({}, {"tier": "integrated"}, {"tier": "integrated", "location": "in-cluster"}):
            claim = {"metadata": {"name": f"shop-{kind}", "namespace": "team-a"},
                     "spec": {"type": kind, "selector": selector}}
            binding = bind(claim, providers)
            assert (binding.provider, binding.condition.reason) == (name, BOUND), (selector, binding)
        managed = bind({"spec": {"type": kind, "selector": {"tier": "managed"}}}, providers)
        assert managed.provider is None  # another tier's selector is not ours to serve


@pytest.mark.parametrize("tier", ALL_TIERS)
def test_the_providers_sync_after_the_crd_and_the_webhook_that_reviews_them(stack_all: Path, tier: str) -> None:
    apps = umbrella_apps(stack_all, tier)
    wave = {name: int(app["metadata"]["annotations"][WAVE]) for name, app in apps.items()}
    crds = [name for name, app in apps.items() if app["spec"]["source"]["chart"] == "apprafter-operator"
            and not app["spec"]["source"]["helm"].get("skipCrds")]
    assert crds == ["apprafter-operator"]
    assert wave[COMPONENT] > wave["apprafter-admission"] and wave[COMPONENT] > wave["apprafter-operator"]
    # Waves order the Applications, not the ends of their syncs: a write refused while the webhook pod does not serve
    # yet is tried again by Argo CD (automated sync alone never retries a failed attempt).
    retry = apps[COMPONENT]["spec"]["syncPolicy"]["retry"]
    assert retry["limit"] < 0 and retry["backoff"]["duration"], retry  # Argo CD: below 0, without end
    assert "retry" not in apps["apprafter-admission"]["spec"]["syncPolicy"]  # only where it is asked for


def _cell(value: Any) -> str:
    return "—" if value is None else f"`{value}`"


def _at(config: dict[str, Any], dotted: str) -> Any:
    value: Any = config
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _leaves(config: dict[str, Any], prefix: str = "") -> set[str]:
    out: set[str] = set()
    for key, value in config.items():
        out |= _leaves(value, f"{prefix}{key}.") if isinstance(value, dict) else {prefix + key}
    return out


def doc_tables() -> dict[str, dict[str, dict[str, str]]]:
    """provider -> config field -> tier -> cell, from each `#### <provider>` table of docs/platform-services.md."""
    tables: dict[str, dict[str, dict[str, str]]] = {}
    for section in re.split(r"^#### ", DOC.read_text(), flags=re.M)[1:]:
        section = re.split(r"^#{1,3} ", section, maxsplit=1, flags=re.M)[0]  # up to the next heading
        name = section.split("\n", 1)[0].strip("` ")
        header = next(line for line in section.splitlines() if line.startswith("| `spec.config`"))
        rows = [line for line in section.splitlines() if line.startswith("| `") and line != header]
        tiers = [c.strip() for c in header.strip("|").split("|")][2:]
        tables[name] = {}
        for row in rows:
            cells = [c.strip() for c in row.strip("|").split("|")]
            tables[name][cells[0].strip("`")] = dict(zip(tiers, cells[2:], strict=True))
    return tables


def test_the_config_per_tier_is_what_the_platform_services_page_says(stack_all: Path, tmp_path: Path) -> None:
    tables = doc_tables()
    for tier in ALL_TIERS:
        for provider in shipped(stack_all, tier, tmp_path):
            name, config = provider["metadata"]["name"], provider["spec"]["config"]
            table = tables[name]
            assert _leaves(config) <= set(table), (name, tier, _leaves(config) - set(table))
            for field, cells in table.items():
                assert cells[tier] == _cell(_at(config, field)), (name, field, tier)


@pytest.mark.parametrize("tier", ALL_TIERS)
def test_the_namespace_of_each_shared_backend_is_made_and_kept(stack_all: Path, tier: str, tmp_path: Path) -> None:
    """The operator makes a provider's instance in its config.namespace and creates no namespace: the chart does,
    and keeps it (a backend's data outlives the component)."""
    providers = shipped(stack_all, tier, tmp_path)
    wanted = {p["spec"]["config"]["namespace"] for p in providers if "namespace" in p["spec"].get("config", {})}
    assert wanted and backend_namespaces(stack_all, tier, tmp_path) == wanted
    for obj in render(umbrella_apps(stack_all, tier)[COMPONENT], tmp_path):
        if obj["kind"] == "Namespace":
            assert obj["metadata"]["annotations"] == {"argocd.argoproj.io/sync-options": "Delete=false",
                                                      "helm.sh/resource-policy": "keep"}
