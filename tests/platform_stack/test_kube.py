"""Every rendered Argo CD Application passes a server-side dry run in the test-bed API server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.platform_stack.conftest import ALL_TIERS, helm_template

pytestmark = pytest.mark.testbed


@pytest.mark.parametrize("tier", ALL_TIERS)
def test_rendered_applications_pass_server_side_dry_run(tier: str, stack_all: Path, kube: Any) -> None:
    objs = helm_template(stack_all, "--set", f"tier={tier}")
    assert objs
    stored = kube.dry_run_apply(objs, namespace="argocd")
    assert [o["metadata"]["name"] for o in stored] == [o["metadata"]["name"] for o in objs]
    for sent, got in zip(objs, stored, strict=True):
        assert got["kind"] == "Application"
        assert got["spec"]["source"] == sent["spec"]["source"]  # valuesObject survives the CRD's pruning
        assert got["spec"]["syncPolicy"] == sent["spec"]["syncPolicy"]
