"""The application-scope plans are found by their Application (`namespace/name`, the label the operator writes): a
pass reads its own plans, not its namespace's every plan (lifecycle.plans.plan_key; reconciler/cache_indexes.py)."""

from __future__ import annotations

from typing import Any

from lifecycle.plans import plan_key, plans_of
from renderer.names import NAME_LABEL


def plan(namespace: str, name: str, app: str | None) -> dict[str, Any]:
    labels = {NAME_LABEL: app} if app else {}
    return {"metadata": {"namespace": namespace, "name": name, "labels": labels}}


def test_a_plan_is_keyed_by_its_application_and_one_without_the_label_by_none() -> None:
    plans = [plan("team-a", "shop-1", "shop"), plan("team-a", "blog-1", "blog"), plan("team-b", "shop-1", "shop"),
             plan("team-a", "loose", None)]
    assert [plan_key(p) for p in plans] == ["team-a/shop", "team-a/blog", "team-b/shop", None]
    # the index finds what plans_of would pick out of the namespace's every plan
    namespace_a = [p for p in plans if p["metadata"]["namespace"] == "team-a"]
    assert [p for p in plans if plan_key(p) == "team-a/shop"] == plans_of(namespace_a, "shop")
