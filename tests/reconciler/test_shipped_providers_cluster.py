"""The stack's integrated ServiceProviders (issue 31 item 1) through the operator's claim binder and the API server:
applied as Argo CD applies them, they bind an Application's needs with no selector each to the one of its type, and
`selector: {tier: integrated}` too, with no edit of anything; the Application then says each need waits for its
backend, not for a provider."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.platform_stack.conftest import stack_all  # noqa: F401 (the session's built stack)
from tests.platform_stack.shipped import shipped
from tests.reconciler.helpers import API, apply, condition, cr, edit, fresh_namespace, status, wait, wait_showing
from tests.reconciler.operator_proc import Operator
from tests.testbed.kube import KubeTestBed

pytestmark = pytest.mark.testbed

EXPOSE = {"port": 8080}  # internal: no public hostname for two namespaces' Applications to contend for


@pytest.fixture(scope="module")
def integrated(bed: KubeTestBed, stack_all: Path,  # noqa: F811
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The solo tier's shipped providers, applied as Argo CD's controller would: type -> provider name."""
    providers = shipped(stack_all, "solo", tmp_path_factory.mktemp("providers"))
    try:
        for provider in providers:
            bed.apply(provider, field_manager="argocd-controller")
        yield {p["spec"]["type"]: p["metadata"]["name"] for p in providers}
    finally:
        for provider in providers:
            bed.delete(API, "ServiceProvider", provider["metadata"]["name"])


def bound_to(bed: KubeTestBed, namespace: str, claim: str) -> dict[str, Any]:
    """The claim's status once its Bound condition is True."""
    def probe() -> dict[str, Any] | None:
        st = (bed.get(API, "ResourceClaim", claim, namespace) or {}).get("status") or {}
        return st if (condition(st, "Bound") or {}).get("status") == "True" else None
    return wait_showing(f"{namespace}/{claim} Bound", probe, 60,
                        lambda: bed.get(API, 'ResourceClaim', claim, namespace), "claim now")


def test_each_need_binds_to_the_integrated_provider_of_its_type(
        bed: KubeTestBed, operator: Operator, integrated: dict[str, str]) -> None:
    assert set(integrated) == {"pg", "redis", "disk", "s3"}
    plain = fresh_namespace(bed, "shipped")
    apply(bed, cr(plain, edit(needs={kind: {} for kind in integrated}, expose=EXPOSE)))
    chosen = fresh_namespace(bed, "shipped")
    apply(bed, cr(chosen, edit(needs={"pg": {"selector": {"tier": "integrated"}}}, expose=EXPOSE)))
    for kind, name in integrated.items():
        st = bound_to(bed, plain, f"demo-{kind}")
        # every type has the operator's backend now: redis', s3's and pg's instances this bed cannot run (no
        # namespace for them), disk's volume waits for a provisioner this bed has not (nor the shipped class): ready
        # false, each
        assert st["provider"] == name and st.get("ready") is False, st
    assert bound_to(bed, chosen, "demo-pg")["provider"] == integrated["pg"]

    def says() -> str | None:
        message = str((condition(status(bed, plain), "ClaimsReady") or {}).get("message", ""))
        named = all(f"bound to ServiceProvider {integrated[kind]}" in message for kind in integrated)
        waiting = (f"bound to ServiceProvider {integrated['pg']}: " in message
                   and f"bound to ServiceProvider {integrated['disk']}: VolumeNotBound: " in message)
        return message if named and waiting else None
    said = wait(f"{plain}/demo ClaimsReady naming each provider", says, 60)
    assert "NoMatchingProvider" not in said and "AmbiguousProvider" not in said, said
    assert status(bed, plain)["phase"] == "Pending"  # no claim of it is ready
