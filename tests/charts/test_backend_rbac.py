"""The operator chart's ClusterRole grants every registered backend what it declares it writes and reads
(lifecycle.backends.registry: each Registration's rules): a backend added without its RBAC fails here, not in a
cluster."""

from __future__ import annotations

from typing import Any

import pytest

from lifecycle.backends.registry import REGISTERED, Registration, Rule
from tests.charts.chart import one, render


def granted(role: dict[str, Any], rule: Rule) -> bool:
    """Whether one of the role's rules covers every verb of `rule` on its group and resource."""
    verbs = set(rule.verbs)
    for have in role.get("rules") or []:
        if rule.group in have.get("apiGroups", []) and rule.resource in have.get("resources", []) \
                and not have.get("resourceNames"):
            verbs -= set(have.get("verbs") or [])
    return not verbs


@pytest.fixture(scope="module")
def cluster_role() -> dict[str, Any]:
    return one(render(), "ClusterRole", "apprafter:operator")


@pytest.mark.parametrize("registered", REGISTERED, ids=lambda r: r.core.backend)
def test_the_operators_cluster_role_grants_each_backends_rules(cluster_role: dict[str, Any],
                                                               registered: Registration) -> None:
    missing = [rule for rule in registered.rules if not granted(cluster_role, rule)]
    assert not missing, f"{registered.core.backend}: the chart's ClusterRole does not grant {missing}"


def test_a_rule_the_role_lacks_is_found(cluster_role: dict[str, Any]) -> None:
    assert not granted(cluster_role, Rule("apps", "deployments", ("escalate",)))
    assert not granted(cluster_role, Rule("example.com", "widgets", ("get",)))
