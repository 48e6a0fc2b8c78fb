"""The claim binder through the API server (reconciler/claims.py, lifecycle/binding.py): an Application's need
that binds to no provider fails the Application at once, named (Unbound: Argo CD shows it Degraded), until an
administrator creates a matching ServiceProvider; then its claim is bound with no further edit and stays bound
whatever else comes or goes; a new claim that several providers match is not bound; a need of a type no backend
serves says no provider can be made; a provider written before the webhook refused its backend is said to be
refused on its claims, never a silent wait."""

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
    wait_phase,
    wait_showing,
)
from tests.reconciler.operator_proc import Operator
from tests.testbed.kube import KubeTestBed

pytestmark = pytest.mark.testbed

RUN = uuid.uuid4().hex[:8]  # this module's providers and selector: another module's providers never match
SELECTOR = {"tier": "integrated", "bed": RUN}
WANTED = f"bed={RUN},tier=integrated"
# internal: no public hostname for two namespaces' Applications to contend for
# redis on redis-server providers that name a Redis of the administrator's whose admin Secret never comes: bound
# claims stay AdminSecretMissing (the backend's provisioning has modules of its own: test_redis_cluster.py)
NEED = edit(needs={"redis": {"selector": SELECTOR}}, env={"REDIS_URL": {"claim": "redis/url"}}, expose={"port": 8080})


@pytest.fixture(scope="module")
def providers(bed: KubeTestBed) -> Iterator[list[str]]:
    """The ServiceProviders the test makes (cluster-scoped: deleted at the module's end, whatever happened)."""
    made: list[str] = []
    yield made
    for name in made:
        bed.delete(API, "ServiceProvider", name)


@pytest.fixture(scope="module")
def site(bed: KubeTestBed) -> str:
    """Where the module's providers keep their admin Secret (never made) and their claims' records."""
    return fresh_namespace(bed, "site")


def redis_config(namespace: str) -> dict[str, Any]:
    return {"address": "127.0.0.1:1", "namespace": namespace}


def provider(bed: KubeTestBed, made: list[str], name: str, namespace: str) -> None:
    """A cluster administrator's ServiceProvider of type redis (a Redis it runs) with the module's labels."""
    add_provider(bed, name, "redis", "redis-server", redis_config(namespace), labels=SELECTOR)
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


def unbound_application(bed: KubeTestBed, namespace: str, text: str) -> dict[str, Any]:
    """The Application's status once it failed for an unbound claim whose reason says `text` (Argo CD's Lua reads
    phase Failed as Degraded with the Ready message: tests/argocd/test_operator_health.py)."""
    def probe() -> dict[str, Any] | None:
        st = status(bed, namespace)
        ready = condition(st, "Ready") or {}
        return st if (st.get("phase"), ready.get("reason")) == ("Failed", "Unbound") and text in str(
            ready.get("message")) else None
    return wait_showing(f"{namespace}/demo Failed, Unbound, saying {text!r}", probe, 60,
                        lambda: status(bed, namespace), "Application status now")


def test_a_need_fails_its_application_named_until_a_provider_binds_it_and_then_stays_bound(
        bed: KubeTestBed, operator: Operator, providers: list[str], site: str) -> None:
    first = fresh_namespace(bed, "bind")
    apply(bed, cr(first, NEED))
    unbound = bound(bed, first, "NoMatchingProvider")
    assert "provider" not in unbound
    said = (condition(unbound, "Bound") or {})["message"]
    assert said.startswith(f"no ServiceProvider of type redis has labels {WANTED}"), said
    app_says = claims_ready_says(bed, first, "needs.redis waits: NoMatchingProvider: ")
    assert f"needs.redis waits: NoMatchingProvider: no ServiceProvider of type redis has labels {WANTED}" in app_says
    failed = unbound_application(bed, first, f"needs.redis cannot be provisioned: NoMatchingProvider: {said}")
    assert (condition(failed, "ClaimsReady") or {})["reason"] == "Unbound"

    # an administrator creates the provider: the claim is bound, nobody edits anything else
    integrated = f"redis-integrated-{RUN}"
    provider(bed, providers, integrated, site)
    st = bound(bed, first, "Bound")
    assert st["provider"] == integrated and st.get("ready") is not True
    assert (condition(st, "Bound") or {})["message"] == f"bound to ServiceProvider {integrated}"
    claims_ready_says(bed, first, f"needs.redis waits: bound to ServiceProvider {integrated}: AdminSecretMissing")
    # waiting for an administrator's Redis to be set up is provisioning, not a refusal: Pending again
    assert wait_phase(bed, first, "Pending", "demo")
    claim = bed.get(API, "ResourceClaim", "demo-redis", first) or {}
    [binder] = [m for m in claim["metadata"]["managedFields"] if m.get("subresource") == "status"]
    assert (binder["manager"], binder["operation"]) == ("apprafter-operator-status", "Apply")
    assert set(binder["fieldsV1"]["f:status"]) == {"f:provider", "f:conditions", "f:ready"}

    # a second matching provider: the bound claim stays; a new claim elsewhere is ambiguous
    second = f"redis-second-{RUN}"
    provider(bed, providers, second, site)
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
        bed: KubeTestBed, operator: Operator, providers: list[str], site: str) -> None:
    """Issue 41: any namespace could select a team's dedicated provider by its labels; its spec.namespaces scopes
    it, and narrowing it leaves a bound claim where its data is, saying why nothing more is provisioned."""
    team, stranger = fresh_namespace(bed, "team"), fresh_namespace(bed, "stranger")
    labels = {"bed": RUN, "team": "payments"}
    dedicated = f"redis-payments-{RUN}"
    made = service_provider(dedicated, "redis", "redis-server", redis_config(site), labels=labels)
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


def test_a_need_of_a_type_no_backend_serves_fails_its_application_at_once_saying_none_can_be_made(
        bed: KubeTestBed, operator: Operator) -> None:
    """jetstream has no backend on this platform (#Backends): its claim used to wait forever, the Application
    Pending, Argo CD Progressing (issue 42). Now the claim, the Application and so Argo CD say it at once."""
    namespace = fresh_namespace(bed, "stream")
    need = edit(needs={"jetstream": {"streams": ["orders"]}}, env={"NATS_URL": {"claim": "jetstream/url"}},
                expose={"port": 8080})
    apply(bed, cr(namespace, need))
    said = ('no ServiceProvider serves "jetstream": no backend on this platform serves jetstream yet (types with one: '
            "disk, pg, redis, s3), so none can be made: remove needs.jetstream")
    claim = bound(bed, namespace, "NoMatchingProvider", "demo-jetstream")
    assert (condition(claim, "Bound") or {})["message"] == said
    failed = unbound_application(bed, namespace, said)
    assert (condition(failed, "Ready") or {})["message"] == (
        f"needs.jetstream cannot be provisioned: NoMatchingProvider: {said} (no workload until every ResourceClaim is "
        "ready)")


def test_a_provider_of_a_backend_no_core_serves_is_said_on_its_claims(
        bed: KubeTestBed, operator: Operator, providers: list[str]) -> None:
    """A provider written before the webhook refused its backend (`dragonfly`, which #Backends listed and nothing
    ran): its claims bound and waited with nothing said. Now they say why, and the Application fails."""
    namespace = fresh_namespace(bed, "legacy")
    labels = {"bed": RUN, "legacy": "dragonfly"}
    name = f"redis-dragonfly-{RUN}"
    bed.apply(service_provider(name, "redis", "dragonfly", labels=labels), field_manager="admin")  # no webhook here
    providers.append(name)
    apply(bed, cr(namespace, edit(NEED, needs={"redis": {"selector": labels}})))

    def refused() -> dict[str, Any] | None:
        st = claim_status(bed, namespace)
        return st if (condition(st, "Ready") or {}).get("reason") == "InvalidConfig" else None
    st = wait_showing(f"{namespace}/demo-redis Ready InvalidConfig", refused, 60,
                      lambda: claim_status(bed, namespace), "claim status now")
    assert st["provider"] == name
    assert (condition(st, "Ready") or {})["message"] == (
        f"ServiceProvider {name}: spec.backend: 'dragonfly' does not serve redis: use redis-server")
    def app_refused() -> dict[str, Any] | None:
        app_status = status(bed, namespace)
        return app_status if (condition(app_status, "Ready") or {}).get("reason") == "ClaimRefused" else None
    app_status = wait_showing(f"{namespace}/demo ClaimRefused", app_refused, 60, lambda: status(bed, namespace),
                              "Application status now")
    assert app_status["phase"] == "Failed"
