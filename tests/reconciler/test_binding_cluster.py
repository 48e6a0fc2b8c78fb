"""The claim binder through the API server (reconciler/claims.py, lifecycle/binding.py): an Application's need
waits, named, until an administrator creates a matching ServiceProvider; then its claim is bound with no further
edit and stays bound whatever else comes or goes; a new claim that several providers match is not bound."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.reconciler.helpers import (
    API,
    add_provider,
    apply,
    condition,
    cr,
    edit,
    fresh_namespace,
    service_provider,
    status,
    wait,
    wait_showing,
)
from tests.reconciler.operator_proc import Operator
from tests.testbed.kube import KubeTestBed

pytestmark = pytest.mark.testbed

RUN = uuid.uuid4().hex[:8]  # this module's providers and selector: another module's providers never match
SELECTOR = {"tier": "integrated", "bed": RUN}
WANTED = f"bed={RUN},tier=integrated"
# internal: no public hostname for two namespaces' Applications to contend for
# redis on a dragonfly provider: a backend the schema declares and the operator does not run, so the binder alone
# writes these claims' status (the operator's own backends, redis-server and cloudnative-pg, have modules of their own)
NEED = edit(needs={"redis": {"selector": SELECTOR}}, env={"REDIS_URL": {"claim": "redis/url"}}, expose={"port": 8080})


@pytest.fixture(scope="module")
def providers(bed: KubeTestBed) -> Iterator[list[str]]:
    """The ServiceProviders the test makes (cluster-scoped: deleted at the module's end, whatever happened)."""
    made: list[str] = []
    yield made
    for name in made:
        bed.delete(API, "ServiceProvider", name)


def provider(bed: KubeTestBed, made: list[str], name: str) -> None:
    """A cluster administrator's ServiceProvider of type redis (backend dragonfly) with the module's labels."""
    add_provider(bed, name, "redis", "dragonfly", labels=SELECTOR)
    made.append(name)


def claim_status(bed: KubeTestBed, namespace: str, name: str = "demo-redis") -> dict[str, Any]:
    return (bed.get(API, "ResourceClaim", name, namespace) or {}).get("status") or {}


def bound(bed: KubeTestBed, namespace: str, reason: str, name: str = "demo-redis") -> dict[str, Any]:
    """The claim's status once its Bound condition has `reason`."""
    def probe() -> dict[str, Any] | None:
        st = claim_status(bed, namespace, name)
        return st if (condition(st, "Bound") or {}).get("reason") == reason else None
    return wait_showing(f"{namespace}/{name} Bound {reason}", probe, 60,
                        lambda: claim_status(bed, namespace, name), "claim status now")


def claims_ready_says(bed: KubeTestBed, namespace: str, text: str) -> str:
    """The Application's ClaimsReady message once it contains `text`."""
    def probe() -> str | None:
        message = str((condition(status(bed, namespace), "ClaimsReady") or {}).get("message", ""))
        return message if text in message else None
    return wait_showing(f"{namespace}/demo ClaimsReady saying {text!r}", probe, 60,
                        lambda: status(bed, namespace), "Application status now")


def binder_passes(operator: Operator) -> float:
    return operator.metric("apprafter_reconcile_total", controller="claims")


def test_a_need_waits_named_until_a_provider_binds_it_and_then_stays_bound(
        bed: KubeTestBed, operator: Operator, providers: list[str]) -> None:
    first = fresh_namespace(bed, "bind")
    apply(bed, cr(first, NEED))
    unbound = bound(bed, first, "NoMatchingProvider")
    assert "provider" not in unbound
    said = (condition(unbound, "Bound") or {})["message"]
    assert said.startswith(f"no ServiceProvider of type redis has labels {WANTED}"), said
    app_says = claims_ready_says(bed, first, "needs.redis waits: NoMatchingProvider: ")
    assert f"needs.redis waits: NoMatchingProvider: no ServiceProvider of type redis has labels {WANTED}" in app_says
    assert status(bed, first)["phase"] == "Pending"

    # an administrator creates the provider: the claim is bound, nobody edits anything else
    integrated = f"redis-integrated-{RUN}"
    provider(bed, providers, integrated)
    st = bound(bed, first, "Bound")
    assert st["provider"] == integrated and "ready" not in st  # ready stays the backend's
    assert (condition(st, "Bound") or {})["message"] == f"bound to ServiceProvider {integrated}"
    claims_ready_says(bed, first, f"needs.redis waits: bound to ServiceProvider {integrated}, not ready yet")
    claim = bed.get(API, "ResourceClaim", "demo-redis", first) or {}
    [binder] = [m for m in claim["metadata"]["managedFields"] if m.get("subresource") == "status"]
    assert (binder["manager"], binder["operation"]) == ("apprafter-operator-status", "Apply")
    assert set(binder["fieldsV1"]["f:status"]) == {"f:provider", "f:conditions"}

    # a second matching provider: the bound claim stays; a new claim elsewhere is ambiguous
    second = f"redis-second-{RUN}"
    provider(bed, providers, second)
    other = fresh_namespace(bed, "bind")
    apply(bed, cr(other, NEED))
    ambiguous = bound(bed, other, "AmbiguousProvider")
    assert "provider" not in ambiguous
    assert (condition(ambiguous, "Bound") or {})["message"] == (
        f"2 ServiceProviders of type redis match with labels {WANTED}: {integrated}, {second}; narrow "
        "needs.redis.selector to a label only one of them has")
    claims_ready_says(bed, other, "needs.redis waits: AmbiguousProvider: 2 ServiceProviders of type redis match")
    passes = binder_passes(operator)
    claims = len(bed.http.get(f"/apis/{API}/resourceclaims").json()["items"])
    wait("a resync of every claim", lambda: binder_passes(operator) >= passes + claims or None, 60)
    kept = claim_status(bed, first)
    assert kept["provider"] == integrated and condition(kept, "Bound") == condition(st, "Bound")

    # the bound provider is deleted: the claim stays bound to it and says so
    bed.delete(API, "ServiceProvider", integrated)
    missing = bound(bed, first, "ProviderMissing")
    assert missing["provider"] == integrated
    claims_ready_says(bed, first, f"needs.redis waits: ProviderMissing: bound to ServiceProvider {integrated}, which "
                                  "no longer exists")


def test_a_provider_scoped_to_a_teams_namespaces_binds_no_other_namespaces_claim(
        bed: KubeTestBed, operator: Operator, providers: list[str]) -> None:
    """Issue 41: any namespace could select a team's dedicated provider by its labels; its spec.namespaces scopes
    it, and narrowing it leaves a bound claim where its data is, saying why nothing more is provisioned."""
    team, stranger = fresh_namespace(bed, "team"), fresh_namespace(bed, "stranger")
    labels = {"bed": RUN, "team": "payments"}
    dedicated = f"redis-payments-{RUN}"
    made = service_provider(dedicated, "redis", "dragonfly", labels=labels)
    made["spec"]["namespaces"] = [team]
    bed.apply(made, field_manager="admin")
    providers.append(dedicated)
    need = edit(NEED, needs={"redis": {"selector": labels}})
    apply(bed, cr(team, need))
    apply(bed, cr(stranger, need))
    assert bound(bed, team, "Bound")["provider"] == dedicated
    refused = bound(bed, stranger, "NoMatchingProvider")
    assert "provider" not in refused
    said = (condition(refused, "Bound") or {})["message"]
    assert said.startswith(f"no ServiceProvider of type redis has labels bed={RUN},team=payments"), said
    assert dedicated not in said  # another team's dedicated provider is not named to this namespace
    claims_ready_says(bed, stranger, "needs.redis waits: NoMatchingProvider: no ServiceProvider of type redis has")

    made["spec"]["namespaces"] = [stranger]  # narrowed away from the team: its claim stays bound, and says so
    bed.apply(made, field_manager="admin")
    kept = bound(bed, team, "NamespaceNotAdmitted")
    assert kept["provider"] == dedicated
    assert f"no longer lists {team}: its data stays there" in (condition(kept, "Bound") or {})["message"]
