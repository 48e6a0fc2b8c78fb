"""A component the stack drops (issue 42: the Dragonfly operator, which nothing used): gone from the chart, an
upgrade from a stack that ran it classified as a removal (breaking: gated, Argo CD deletes the operator and its
CRDs), and a PlatformStack that had turned it off (`overrides.dragonfly.enabled: false`, the node tier's and the
install page's way) upgrades with that override in place, under the real helm (what Argo CD renders) and the
Python twin (what the PlatformStack controller classifies); anything else said of a retired component, or of a name
the stack never had, is refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from platform_stack.errors import StackError
from platform_stack.snapshot import load_snapshot
from tests.platform_stack.conftest import applications, built_tgz, cli, helm, helm_template, ok

# The component as the stack had it before it was dropped (platform_stack/components/dragonfly.cue at the time).
DRAGONFLY = """package platformstack

components: dragonfly: {
	description: "Dragonfly operator backing needs.redis (redis-integrated provider)"
	source: {
		repoURL:        "ghcr.io/dragonflydb/dragonfly-operator/helm"
		chart:          "dragonfly-operator"
		targetRevision: "v1.1.11"
	}
	namespace: "dragonfly-operator-system"
	syncWave:  -2
	resourcePaths: [["manager", "resources"], ["rbacProxy", "resources"]]
	values: {
		manager: resources: {requests: {cpu: "25m", memory: "64Mi"}, limits: memory: "256Mi"}
		rbacProxy: resources: {requests: {cpu: "10m", memory: "32Mi"}, limits: memory: "128Mi"}
	}
	tiers: {dev: availability: "default", solo: availability: "default", team: availability: "default",
		production: availability: "default", regulated: availability: "default"}
}
"""
OFF = {"dragonfly": {"enabled": False}}


@pytest.fixture()
def with_dragonfly(source_copy: Path, tmp_path: Path) -> Path:
    """The stack of release 0.1.0 as it ran with the Dragonfly operator (this source, plus the component)."""
    (source_copy / "components" / "dragonfly.cue").write_text(DRAGONFLY)
    return built_tgz(tmp_path / "before", "--source", str(source_copy), "--version", "0.1.0")


def overrides_file(tmp_path: Path, overrides: dict[str, Any], name: str = "overrides.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(overrides))
    return str(path)


def test_the_stack_installs_no_dragonfly_operator(stack_all: Path) -> None:
    assert "dragonfly" not in applications(helm_template(stack_all))
    for tier in ("dev", "solo", "team", "production", "regulated"):
        assert "dragonfly" not in load_snapshot(stack_all, tier).components


def test_an_upgrade_from_a_stack_that_ran_it_is_a_removal_gated_as_breaking(with_dragonfly: Path,
                                                                           stack_all: Path) -> None:
    verdict = json.loads(ok(cli("stack", "classify", "--from", str(with_dragonfly), "--to", str(stack_all),
                                "--format", "json")))
    by_name = {c["component"]: c for c in verdict["components"]}
    assert (by_name["dragonfly"]["change"], by_name["dragonfly"]["classification"]) == ("removed", "breaking")
    assert by_name["dragonfly"]["reasons"] == ["component removed or disabled: Argo CD deletes what it deployed"]
    assert verdict["classification"] == "breaking"


def test_a_stack_that_had_turned_it_off_upgrades_with_its_override(with_dragonfly: Path, stack_all: Path,
                                                                   tmp_path: Path) -> None:
    off = overrides_file(tmp_path, OFF)
    verdict = json.loads(ok(cli("stack", "classify", "--from", str(with_dragonfly), "--to", str(stack_all),
                                "--overrides", off, "--format", "json")))
    assert "dragonfly" not in {c["component"] for c in verdict["components"]}  # off before, gone after
    assert load_snapshot(stack_all, "solo", OFF).components == load_snapshot(stack_all, "solo").components
    # what Argo CD renders of the umbrella with the PlatformStack's overrides passed through
    values = overrides_file(tmp_path, {"overrides": OFF}, "values.json")
    assert applications(helm_template(stack_all, "-f", values)) == applications(helm_template(stack_all))


@pytest.mark.parametrize(("overrides", "said"), [
    ({"dragonfly": {"enabled": True}}, "overrides.dragonfly: dragonfly is no longer in this stack"),
    ({"dragonfly": {"enabled": False, "pin": "v1.1.11"}}, "overrides.dragonfly: dragonfly is no longer in this stack"),
    ({"dragonfly": {"values": {}}}, "overrides.dragonfly: dragonfly is no longer in this stack"),
    ({"nope": {"enabled": False}}, "overrides.nope: no such component in this chart"),
])
def test_anything_else_of_a_retired_component_or_an_unknown_one_is_refused(
        stack_all: Path, tmp_path: Path, overrides: dict[str, Any], said: str) -> None:
    with pytest.raises(StackError) as refused:
        load_snapshot(stack_all, "solo", overrides)
    assert said in str(refused.value)
    rendered = helm("template", "x", str(stack_all), "--kube-version", "1.34.0", "-f",
                    overrides_file(tmp_path, {"overrides": overrides}))
    assert rendered.returncode != 0 and next(iter(overrides)) in rendered.stderr
