"""The override-wins merge rules of the effective spec, example by example and as properties."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from renderer.effective import effective_spec, merge

BASE: dict[str, Any] = {
    "image": "img:1", "replicas": 1,
    "env": {"A": "1", "B": {"secret": "s/k"}},
    "expose": {"port": 8080, "network": "public", "hostname": "a.example", "paths": ["/", "/x"]},
    "imagePolicy": {"resolve": "digest", "interval": "5m"},
    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
    "needs": {"pg": {"size": "small", "selector": {"tier": "integrated"}}, "redis": {}},
    "command": ["/a"],
}


def test_image_and_replicas_replace() -> None:
    out = merge(BASE, {"image": "img:2", "replicas": 0})
    assert (out["image"], out["replicas"]) == ("img:2", 0)


def test_env_merges_key_by_key_override_wins() -> None:
    out = merge(BASE, {"env": {"A": "2", "C": {"claim": "pg/url"}}})
    assert out["env"] == {"A": "2", "B": {"secret": "s/k"}, "C": {"claim": "pg/url"}}


def test_expose_deep_merges_by_subfield_and_inherits_the_port() -> None:
    out = merge(BASE, {"expose": {"network": "vpn"}})
    assert out["expose"] == {"port": 8080, "network": "vpn", "hostname": "a.example", "paths": ["/", "/x"]}


def test_expose_lists_replace_whole() -> None:
    assert merge(BASE, {"expose": {"paths": ["/only"]}})["expose"]["paths"] == ["/only"]


def test_image_policy_deep_merges() -> None:
    assert merge(BASE, {"imagePolicy": {"resolve": "off"}})["imagePolicy"] == {"resolve": "off", "interval": "5m"}


def test_health_deep_merges_by_probe_and_setting() -> None:
    base = {**BASE, "health": {"readiness": {"path": "/healthz", "periodSeconds": 5}, "liveness": {"path": "/livez"}}}
    out = merge(base, {"health": {"readiness": {"periodSeconds": 20}, "progressDeadlineSeconds": 120}})
    assert out["health"] == {"readiness": {"path": "/healthz", "periodSeconds": 20}, "liveness": {"path": "/livez"},
                             "progressDeadlineSeconds": 120}


def test_health_false_replaces_either_way() -> None:
    base = {**BASE, "health": {"readiness": {"path": "/healthz"}}}
    assert merge(base, {"health": False})["health"] is False
    assert merge({**BASE, "health": False}, {"health": {"liveness": {}}})["health"] == {"liveness": {}}
    assert merge({**BASE, "health": False}, {"replicas": 2})["health"] is False


def test_resources_merge_map_of_map() -> None:
    out = merge(BASE, {"resources": {"limits": {"memory": "2Gi"}}})
    assert out["resources"] == {"requests": {"cpu": "100m", "memory": "64Mi"},
                                "limits": {"cpu": "1", "memory": "2Gi"}}


def test_needs_replace_per_key() -> None:
    out = merge(BASE, {"needs": {"pg": {"selector": {"tier": "managed"}}, "s3": {}}})
    assert out["needs"] == {"pg": {"selector": {"tier": "managed"}}, "redis": {}, "s3": {}}


def test_other_fields_replace() -> None:
    assert merge(BASE, {"command": ["/b", "c"]})["command"] == ["/b", "c"]


def test_fields_absent_from_base_are_taken_from_the_override() -> None:
    out = merge({"image": "x"}, {"expose": {"port": 1}, "env": {"A": "1"}, "resources": {"limits": {"memory": "1Gi"}}})
    assert out == {"image": "x", "expose": {"port": 1}, "env": {"A": "1"}, "resources": {"limits": {"memory": "1Gi"}}}


def test_effective_spec_resolves_budget_and_leaves_inputs_alone() -> None:
    spec = {"base": BASE, "environments": {"prod": {"replicas": 3}}, "budget": {"prod": "medium"}}
    before = repr(spec)
    out = effective_spec(spec, "prod")
    assert out["replicas"] == 3 and out["budget"] == "medium"
    assert repr(spec) == before


scalars = st.one_of(st.text(max_size=5), st.integers(0, 9))
env_maps = st.dictionaries(st.sampled_from(["A", "B", "C", "D"]), scalars, max_size=4)
expose = st.fixed_dictionaries({}, optional={"port": st.integers(1, 65535),
                                             "network": st.sampled_from(["public", "internal", "vpn"]),
                                             "tls": st.booleans()})
probe = st.fixed_dictionaries({}, optional={"path": st.sampled_from(["/a", "/b"]), "port": st.integers(1, 9),
                                            "periodSeconds": st.integers(1, 9)})
health = st.just(False) | st.fixed_dictionaries({}, optional={"readiness": probe, "liveness": probe,
                                                              "progressDeadlineSeconds": st.integers(30, 99)})
workloads = st.fixed_dictionaries({}, optional={"image": st.text(max_size=5), "replicas": st.integers(0, 5),
                                                "env": env_maps, "expose": expose, "health": health})


@given(workloads, workloads)
def test_property_override_wins_on_every_key_it_sets(base: dict[str, Any], override: dict[str, Any]) -> None:
    out = merge(base, override)
    for key in ("image", "replicas"):
        if key in override:
            assert out[key] == override[key]
        elif key in base:
            assert out[key] == base[key]
    for group in ("env", "expose"):
        for k, v in override.get(group, {}).items():
            assert out[group][k] == v
        for k, v in base.get(group, {}).items():
            if k not in override.get(group, {}):
                assert out[group][k] == v


@given(workloads)
def test_property_empty_override_is_identity(base: dict[str, Any]) -> None:
    assert merge(base, {}) == base


@given(workloads, workloads)
def test_property_merge_is_idempotent(base: dict[str, Any], override: dict[str, Any]) -> None:
    once = merge(base, override)
    assert merge(once, override) == once


def _leaves(value: Any, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """Every setting below a struct by its path (an empty struct sets nothing)."""
    if not isinstance(value, dict):
        return {prefix: value}
    out: dict[tuple[str, ...], Any] = {}
    for key, item in value.items():
        out.update(_leaves(item, (*prefix, key)))
    return out


@settings(max_examples=400)
@given(workloads, workloads)
def test_property_health_merges_leaf_by_leaf_unless_either_side_is_false(base: dict[str, Any],
                                                                         override: dict[str, Any]) -> None:
    out = merge(base, override).get("health")
    if "health" not in override:
        assert out == base.get("health")
    elif override["health"] is False or base.get("health", {}) is False:
        assert out == override["health"]
    else:
        merged, ours, theirs = _leaves(out), _leaves(override["health"]), _leaves(base.get("health", {}))
        assert {k: merged[k] for k in ours} == ours  # every setting the override makes wins ...
        assert all(merged[k] == v for k, v in theirs.items() if k not in ours)
        assert set(merged) <= set(ours) | set(theirs)  # ... base's others stay, nothing else appears
