"""The built .tgz under the real helm: lint, one Application per enabled component, exact overrides."""

from __future__ import annotations

import copy
import json
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from platform_stack.effective import effective_components, with_overrides
from tests.platform_stack.conftest import ALL_TIERS, applications, helm, helm_template, ok, on_by_default
from tests.renderer.helpers import run_cli
from toolchain.pins import pins


def chart_values(chart: Path) -> dict[str, Any]:
    with tarfile.open(chart) as tar:
        handle = tar.extractfile(f"{chart.name.rsplit('-', 1)[0]}/values.yaml")
        assert handle is not None
        loaded: dict[str, Any] = yaml.safe_load(handle.read())
        return loaded


def values_file(tmp_path: Path, data: dict[str, Any]) -> str:
    path = tmp_path / "values.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_helm_lint_passes_for_the_published_chart(stack_all: Path) -> None:
    out = ok(helm("lint", "--strict", str(stack_all), "--kube-version", "1.34.0"))
    assert "1 chart(s) linted, 0 chart(s) failed" in out


@pytest.mark.parametrize("tier", ALL_TIERS)
def test_helm_lint_passes_for_each_tier_chart(tier: str, stack_tier: Callable[[str], Path]) -> None:
    out = ok(helm("lint", "--strict", str(stack_tier(tier)), "--kube-version", "1.34.0"))
    assert "0 chart(s) failed" in out


@pytest.mark.parametrize("tier", ALL_TIERS)
def test_one_application_per_enabled_component(
    tier: str, stack_all: Path, stack_tier: Callable[[str], Path], source_eval: dict[str, Any]
) -> None:
    expected = on_by_default(source_eval, tier)
    published = applications(helm_template(stack_all, "--set", f"tier={tier}"))
    one_tier = applications(helm_template(stack_tier(tier)))
    assert set(published) == expected
    assert set(one_tier) == expected
    # The one-tier chart renders the same Applications; only the chart name in a label differs.
    assert {n: _unnamed(a) for n, a in published.items()} == {n: _unnamed(a) for n, a in one_tier.items()}


def _unnamed(app: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(app)
    del out["metadata"]["labels"]["app.kubernetes.io/part-of"]
    return out


def test_the_dev_tier_omits_what_appendix_c_marks_unavailable(stack_all: Path) -> None:
    apps = applications(helm_template(stack_all, "--set", "tier=dev"))
    assert "backstage" not in apps and "keda" not in apps  # unavailable, opt-in
    assert {"argocd", "cilium", "sealed-secrets"} <= set(apps)


def test_argocd_is_self_managed_and_others_are_not(stack_all: Path) -> None:
    apps = applications(helm_template(stack_all))
    argocd = apps["argocd"]
    assert "finalizers" not in argocd["metadata"]
    assert argocd["spec"]["syncPolicy"]["automated"]["prune"] is False
    for name, app in apps.items():
        if name != "argocd":
            assert app["metadata"]["finalizers"] == ["resources-finalizer.argocd.argoproj.io"], name


def test_sync_waves_and_sources_follow_the_values(stack_all: Path) -> None:
    values = chart_values(stack_all)
    for name, app in applications(helm_template(stack_all)).items():
        component = values["components"][name]
        assert app["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"] == str(component["syncWave"])
        src = app["spec"]["source"]
        assert (src["repoURL"], src["chart"], src["targetRevision"]) == (
            component["source"]["repoURL"],
            component["source"]["chart"],
            component["source"]["targetRevision"],
        )
        assert app["spec"]["destination"]["namespace"] == component["namespace"]


@pytest.mark.parametrize("tier", ALL_TIERS)
def test_python_rule_matches_the_template(tier: str, stack_all: Path) -> None:
    values = {**with_overrides(chart_values(stack_all), tier, None), "domain": "apps.example.com"}
    effective = effective_components(values)
    apps = applications(helm_template(stack_all, "--set", f"tier={tier}", "--set", "domain=apps.example.com"))
    assert set(apps) == set(effective)
    for name, app in apps.items():
        assert app["spec"]["source"]["targetRevision"] == effective[name]["source"]["targetRevision"]
        assert app["spec"]["source"]["helm"].get("valuesObject", {}) == effective[name]["values"]


def _diff(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> set[str]:
    return {n for n in set(before) | set(after) if before.get(n) != after.get(n)}


def test_pin_changes_only_that_targetrevision(stack_all: Path, tmp_path: Path) -> None:
    base = applications(helm_template(stack_all))
    pinned = applications(
        helm_template(stack_all, "-f", values_file(tmp_path, {"overrides": {"cilium": {"pin": "1.16.5"}}}))
    )
    assert _diff(base, pinned) == {"cilium"}
    expected = copy.deepcopy(base["cilium"])
    expected["spec"]["source"]["targetRevision"] = "1.16.5"
    assert pinned["cilium"] == expected


def test_enabled_false_omits_exactly_that_component(stack_all: Path, tmp_path: Path) -> None:
    base = applications(helm_template(stack_all))
    without = applications(
        helm_template(
            stack_all, "-f", values_file(tmp_path, {"overrides": {"backstage": {"enabled": False}}})
        )
    )
    assert set(base) - set(without) == {"backstage"}
    assert all(without[n] == base[n] for n in without)


def test_enabled_true_adds_an_opt_in_component(stack_all: Path, tmp_path: Path) -> None:
    base = applications(helm_template(stack_all, "--set", "tier=team"))
    assert "sealed-secrets" not in base
    more = applications(
        helm_template(
            stack_all,
            "-f",
            values_file(tmp_path, {"tier": "team", "overrides": {"sealed-secrets": {"enabled": True}}}),
        )
    )
    assert set(more) - set(base) == {"sealed-secrets"} and all(more[n] == base[n] for n in base)


def test_values_deep_merge_and_can_turn_things_off(stack_all: Path, tmp_path: Path) -> None:
    base = applications(helm_template(stack_all, "--set", "tier=team"))
    assert base["cilium"]["spec"]["source"]["helm"]["valuesObject"]["hubble"]["enabled"] is True
    changed = applications(
        helm_template(
            stack_all,
            "-f",
            values_file(
                tmp_path,
                {
                    "tier": "team",
                    "overrides": {"cilium": {"values": {"hubble": {"enabled": False}, "extra": {"n": 0}}}},
                },
            ),
        )
    )
    assert _diff(base, changed) == {"cilium"}
    expected = copy.deepcopy(base["cilium"])
    vals = expected["spec"]["source"]["helm"]["valuesObject"]
    vals["hubble"]["enabled"] = False  # sibling keys (relay, ui) stay
    vals["extra"] = {"n": 0}
    assert changed["cilium"] == expected


def test_null_in_override_values_deletes_the_key(stack_all: Path, tmp_path: Path) -> None:
    base = applications(helm_template(stack_all))
    changed = applications(
        helm_template(
            stack_all, "-f", values_file(tmp_path, {"overrides": {"capsule": {"values": {"manager": None}}}})
        )
    )
    assert "manager" in base["capsule"]["spec"]["source"]["helm"]["valuesObject"]
    assert "manager" not in changed["capsule"]["spec"]["source"]["helm"].get("valuesObject", {})


def test_disabling_a_required_component_fails(stack_all: Path, tmp_path: Path) -> None:
    proc = helm(
        "template",
        "x",
        str(stack_all),
        "--kube-version",
        "1.34.0",
        "-f",
        values_file(tmp_path, {"overrides": {"argocd": {"enabled": False}}}),
    )
    assert proc.returncode != 0
    assert "overrides.argocd.enabled: argocd is required on tier solo and cannot be disabled" in proc.stderr


def test_enabling_an_unavailable_component_fails(stack_all: Path, tmp_path: Path) -> None:
    proc = helm(
        "template",
        "x",
        str(stack_all),
        "--kube-version",
        "1.34.0",
        "-f",
        values_file(tmp_path, {"tier": "dev", "overrides": {"backstage": {"enabled": True}}}),
    )
    assert proc.returncode != 0 and "backstage is not available on tier dev" in proc.stderr


def test_schema_rejects_unknown_components_and_tiers(
    stack_all: Path, stack_tier: Callable[[str], Path]
) -> None:
    proc = helm("template", "x", str(stack_all), "--kube-version", "1.34.0", "--set", "overrides.nope.pin=1")
    assert proc.returncode != 0 and "nope" in proc.stderr
    proc = helm("template", "x", str(stack_tier("dev")), "--kube-version", "1.34.0", "--set", "tier=solo")
    assert proc.returncode != 0 and "tier" in proc.stderr


def test_kubernetes_below_the_minimum_is_refused(stack_all: Path) -> None:
    proc = helm("template", "x", str(stack_all), "--kube-version", "1.29.0")
    assert proc.returncode != 0 and "kubeVersion" in proc.stderr


def test_pinned_helm_assumes_the_kubernetes_its_release_assumes(stack_all: Path) -> None:
    # The platform chart wants kubeVersion >= 1.31: a released helm renders it without --kube-version.
    rendered = helm("template", "platform-stack", str(stack_all), "--namespace", "argocd")
    assert rendered.returncode == 0, rendered.stderr
    doctor = json.loads(run_cli("doctor", "--role", "development", "-o", "json").stdout)
    (row,) = [r for r in doctor["tools"] if r["tool"] == "helm"]
    assert f"commit {pins()['HELM_COMMIT'][:12]}" in row["build"]
    assert "assumes Kubernetes v1.34.0" in row["build"]  # helm v3.19's client-go v0.34 -> Kubernetes 1.34
    assert any(item.startswith("recipe ") for item in row["build"])


def test_multitenancy_is_a_platform_value_opt_in_from_team_up(stack_all: Path, tmp_path: Path) -> None:
    # PlatformStack.spec.values.multitenancy: true (spec §3.9): accepted by the values schema from team up.
    values = tmp_path / "values.yaml"
    values.write_text("tier: team\nmultitenancy: true\n")
    assert applications(helm_template(stack_all, "--values", str(values)))
    values.write_text("tier: solo\nmultitenancy: true\n")
    solo = helm("template", "platform-stack", str(stack_all), "--values", str(values), "--kube-version", "1.34.0")
    assert solo.returncode != 0 and "multitenancy: hard multi-tenancy is not available on tier solo" in solo.stderr
    values.write_text("tier: team\nmultitenancy: sometimes\n")
    typed = helm("template", "platform-stack", str(stack_all), "--values", str(values), "--kube-version", "1.34.0")
    assert typed.returncode != 0 and "multitenancy" in typed.stderr
