"""`apprafter platform freeze COMPONENT`'s decision: the component's running version into spec.overrides, and back."""

from __future__ import annotations

from typing import Any

import pytest

from platform_stack.freeze import FreezeRefused, freeze_component, frozen, unfreeze_component


def stack(overrides: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    components = [{"name": "keda", "version": "2.17.2", "enabled": True},
                  {"name": "backstage", "enabled": False},
                  {"name": "cilium", "version": "1.17.6", "enabled": True}]
    return {"spec": {**spec, **({"overrides": overrides} if overrides is not None else {})},
            "status": {"currentVersion": "1.0.0", "components": components}}


def test_a_freeze_pins_the_version_the_component_runs() -> None:
    patch, version = freeze_component(stack(), "keda")
    assert (patch, version) == ({"overrides": {"keda": {"pin": "2.17.2"}}}, "2.17.2")
    # a merge patch: the component's other overrides (values, enabled) stay as they are
    patch, _ = freeze_component(stack({"keda": {"values": {"replicas": 2}}}), "keda")
    assert patch == {"overrides": {"keda": {"pin": "2.17.2"}}}


def test_a_component_frozen_at_what_runs_needs_no_patch() -> None:
    assert freeze_component(stack({"keda": {"pin": "2.17.2"}}), "keda") == (None, "2.17.2")
    # pinned elsewhere (not applied yet): the freeze takes it back to what runs
    assert freeze_component(stack({"keda": {"pin": "2.18.0"}}), "keda")[0] == {"overrides": {"keda": {"pin": "2.17.2"}}}


@pytest.mark.parametrize(("component", "message"), [
    ("nope", "nope: no such component in the running stack (components: backstage, cilium, keda)"),
    ("backstage", "backstage: not enabled in the running stack: it has no version to freeze"),
])
def test_a_freeze_of_what_does_not_run_is_refused(component: str, message: str) -> None:
    with pytest.raises(FreezeRefused) as refused:
        freeze_component(stack(), component)
    assert refused.value.reason == message


def test_nothing_applied_yet_has_nothing_to_freeze() -> None:
    with pytest.raises(FreezeRefused, match="none yet: nothing is applied"):
        freeze_component({"spec": {}, "status": {}}, "keda")


def test_an_unfreeze_removes_the_pin_and_an_override_left_empty() -> None:
    assert unfreeze_component(stack({"keda": {"pin": "2.17.2"}}), "keda") == {"overrides": None}
    assert unfreeze_component(stack({"keda": {"pin": "2.17.2"}, "backstage": {"enabled": False}}), "keda") == \
        {"overrides": {"keda": None}}
    assert unfreeze_component(stack({"keda": {"pin": "2.17.2", "values": {"replicas": 2}}}), "keda") == \
        {"overrides": {"keda": {"pin": None}}}
    assert unfreeze_component(stack({"keda": {"values": {"replicas": 2}}}), "keda") is None
    assert unfreeze_component(stack(), "keda") is None


def test_frozen_lists_the_pinned_components_only() -> None:
    obj = stack({"keda": {"pin": "2.17.2"}, "backstage": {"enabled": False}, "cilium": {"pin": ""}}, pin="1.0.0")
    assert frozen(obj) == {"keda": "2.17.2"}
    assert frozen({"spec": {"overrides": "not a mapping"}}) == {}
