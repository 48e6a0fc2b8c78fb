"""lifecycle.binding alone (pure; tests/reconciler/test_binding_cluster.py proves it through the API server and the
operator): which ServiceProvider a claim is bound to, every message exactly, and what the Application's ClaimsReady
says of a need that waits (lifecycle.application)."""

from __future__ import annotations

from typing import Any

from lifecycle.application import Waiting, waiting_claims
from lifecycle.binding import Binding, bind, refusal, status_of, waiting_reason
from lifecycle.conditions import Condition

INTEGRATED = {"tier": "integrated"}


def claim(kind: str = "pg", selector: dict[str, str] | None = None, provider: str | None = None,
          **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": f"shop-{kind}", "namespace": "team", "generation": 2},
            "spec": {"type": kind, "selector": INTEGRATED if selector is None else selector},
            "status": {**({"provider": provider} if provider else {}), **status}}


def provider(name: str, kind: str = "pg", **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, **({"labels": labels} if labels else {})},
            "spec": {"type": kind, "backend": "cloudnative-pg"}}


def test_the_one_matching_provider_binds_the_claim() -> None:
    providers = [provider("pg-dev", tier="dev"), provider("pg-integrated", tier="integrated", zone="a"),
                 provider("redis-integrated", "redis", tier="integrated")]
    assert bind(claim(), providers) == Binding("pg-integrated", Condition(
        "Bound", "True", "Bound", "bound to ServiceProvider pg-integrated"))
    # an empty selector takes any provider of the type
    assert bind(claim(selector={}), providers[1:]).provider == "pg-integrated"


def test_no_provider_of_the_type_says_the_type_and_the_selector() -> None:
    assert bind(claim(), [provider("redis-integrated", "redis", tier="integrated")]) == Binding(None, Condition(
        "Bound", "False", "NoMatchingProvider", "no ServiceProvider of type pg has labels tier=integrated (none of "
        "type pg exists: a cluster administrator creates one)"))
    assert bind(claim(selector={}), []).condition.message == (
        "no ServiceProvider of type pg exists (a cluster administrator creates one)")


def test_a_type_no_backend_serves_says_no_provider_can_be_made() -> None:
    """jetstream and clickhouse have no backend in #Backends: the webhook refuses every ServiceProvider of them, so
    a cluster administrator cannot make one either (issue 42)."""
    for kind in ("jetstream", "clickhouse"):
        said = bind(claim(kind), [provider("pg-integrated", tier="integrated")]).condition
        assert said == Condition("Bound", "False", "NoMatchingProvider", (
            f'no ServiceProvider serves "{kind}": no backend on this platform serves {kind} yet (types with one: '
            f"disk, pg, redis, s3), so none can be made: remove needs.{kind}"))


def test_no_match_names_the_providers_of_the_type_with_their_labels_bounded() -> None:
    said = bind(claim(selector={"tier": "integrated", "zone": "b"}),
                [provider("pg-b", tier="integrated", zone="a"), provider("pg-a"), provider("pg-c", tier="dev")])
    assert said == Binding(None, Condition(
        "Bound", "False", "NoMatchingProvider", "no ServiceProvider of type pg has labels tier=integrated,zone=b "
        "(of type pg: pg-a [no labels], pg-b [tier=integrated,zone=a], pg-c [tier=dev]; change needs.pg.selector "
        "to match one)"))
    many = [provider(f"pg-{i:02}", **{f"label-{j:02}": "x" * 20 for j in range(10)}) for i in range(8)]
    message = bind(claim(), many).condition.message
    assert "\n" not in message and "pg-04 [" in message and "pg-05" not in message and " and 3 more;" in message
    assert "label-00=xxxxxxxxxxxxxxxxxxxx,label-01=" in message and "…]" in message
    assert len(message) < 700


def test_several_matching_providers_are_ambiguous_and_say_what_to_do() -> None:
    providers = [provider("pg-z", tier="integrated", zone="a"), provider("pg-a", tier="integrated")]
    assert bind(claim(), providers) == Binding(None, Condition(
        "Bound", "False", "AmbiguousProvider", "2 ServiceProviders of type pg match with labels tier=integrated: "
        "pg-a, pg-z; narrow needs.pg.selector to a label only one of them has"))
    many = [provider(f"pg-{i}", tier="integrated") for i in range(7)]
    assert bind(claim(), many).condition.message == (
        "7 ServiceProviders of type pg match with labels tier=integrated: pg-0, pg-1, pg-2, pg-3, pg-4 and 2 more; "
        "narrow needs.pg.selector to a label only one of them has")
    assert bind(claim(selector={}), many[:2]).condition.message.startswith("2 ServiceProviders of type pg match: ")


def test_a_bound_claim_stays_with_its_provider_whatever_else_matches() -> None:
    providers = [provider("pg-a", tier="integrated"), provider("pg-integrated", tier="integrated")]
    assert bind(claim(provider="pg-integrated"), providers) == Binding("pg-integrated", Condition(
        "Bound", "True", "Bound", "bound to ServiceProvider pg-integrated"))
    relabelled = [provider("pg-integrated", tier="dev")]
    assert bind(claim(provider="pg-integrated"), relabelled) == Binding("pg-integrated", Condition(
        "Bound", "True", "Bound", "bound to ServiceProvider pg-integrated (it no longer is of type pg with labels "
        "tier=integrated; a bound claim stays where its data is)"))


def test_a_claim_whose_provider_is_gone_stays_bound_and_says_so() -> None:
    assert bind(claim(provider="pg-integrated"), [provider("pg-other", tier="integrated")]) == Binding(
        "pg-integrated", Condition(
            "Bound", "False", "ProviderMissing", "bound to ServiceProvider pg-integrated, which no longer exists: its "
            "data was there, so the claim stays bound to it (create ServiceProvider pg-integrated again; a claim "
            "never moves)"))


def test_the_same_input_gives_the_same_binding_in_any_order() -> None:
    providers = [provider(f"pg-{i}", tier="dev" if i % 2 else "x") for i in range(6)]
    assert bind(claim(), providers) == bind(claim(), list(reversed(providers)))


def test_the_binder_writes_the_provider_and_its_condition_only() -> None:
    previous = {"type": "Bound", "status": "True", "lastTransitionTime": "T0", "reason": "Bound", "message": "m",
                "observedGeneration": 1}
    live = claim(provider="pg-integrated", ready=True, conditions=[previous, {"type": "Ready", "status": "True"}])
    binding = bind(live, [provider("pg-integrated", tier="integrated")])
    assert status_of(binding, live, "T1") == {"provider": "pg-integrated", "conditions": [{
        "type": "Bound", "status": "True", "observedGeneration": 2, "lastTransitionTime": "T0", "reason": "Bound",
        "message": "bound to ServiceProvider pg-integrated"}]}
    unbound = status_of(bind(claim(), []), claim(), "T1")
    assert set(unbound) == {"conditions"} and unbound["conditions"][0]["lastTransitionTime"] == "T1"


def test_a_waiting_claim_says_why() -> None:
    assert waiting_reason({}) == "not bound to a ServiceProvider yet"
    unbound = claim(conditions=[{"type": "Bound", "status": "False", "reason": "NoMatchingProvider",
                                 "message": "no ServiceProvider of type pg has labels tier=integrated"}])
    assert waiting_reason(unbound) == "NoMatchingProvider: no ServiceProvider of type pg has labels tier=integrated"
    bound = claim(provider="pg-integrated", conditions=[{"type": "Bound", "status": "True", "reason": "Bound",
                                                         "message": "m"}])
    assert waiting_reason(bound) == "bound to ServiceProvider pg-integrated, not ready yet (its backend provisions it)"


def test_the_applications_claims_ready_names_each_need_that_waits() -> None:
    rendered = [claim("pg"), claim("redis"), claim("disk")]
    live = {"shop-pg": claim(conditions=[{"type": "Bound", "status": "False", "reason": "NoMatchingProvider",
                                          "message": "no ServiceProvider of type pg has labels tier=integrated"}]),
            "shop-redis": claim("redis", ready=True)}
    assert waiting_claims(rendered, live) == [
        Waiting("shop-pg", "needs.pg", "NoMatchingProvider: no ServiceProvider of type pg has labels "
                                       "tier=integrated", "Unbound"),
        Waiting("shop-disk", "needs.disk", "not bound to a ServiceProvider yet")]


def ready_condition(reason: str) -> dict[str, str]:
    return {"type": "Ready", "status": "False", "reason": reason, "message": "m"}


BOUND = {"type": "Bound", "status": "True", "reason": "Bound", "message": "bound to ServiceProvider p"}


def test_a_claim_that_waits_for_a_person_is_refused_one_that_waits_for_time_is_not() -> None:
    """What turns the Application Failed (Argo CD: Degraded) at once rather than Pending forever (issue 42)."""
    for reason in ("NoMatchingProvider", "AmbiguousProvider", "ProviderMissing", "NamespaceNotAdmitted"):
        unbound = claim(conditions=[{"type": "Bound", "status": "False", "reason": reason, "message": "m"}])
        assert refusal(unbound) == "Unbound", reason
    for reason in ("VersionNotServed", "BucketsNotServed", "ShareDoesNotFit", "InvalidConfig", "SizeAboveLimit",
                   "KeptForAnotherNamespace", "VolumeConflict"):
        assert refusal(claim(provider="p", conditions=[BOUND, ready_condition(reason)])) == "ClaimRefused", reason
    for reason in ("InstanceNotReady", "RoleNotReady", "DatabaseNotReady", "BackendUnreachable", "VolumeNotBound",
                   "SecretConflict", "WriteRefused", "InProgress"):
        assert refusal(claim(provider="p", conditions=[BOUND, ready_condition(reason)])) is None, reason
    assert refusal(claim()) is None and refusal({}) is None  # not looked at yet
    ready_again = claim(provider="p", ready=True, conditions=[BOUND, ready_condition("VersionNotServed")])
    assert refusal(ready_again) is None


def scoped(name: str, *namespaces: str, **labels: str) -> dict[str, Any]:
    found = provider(name, **labels)
    found["spec"]["namespaces"] = list(namespaces)
    return found


def test_a_provider_scoped_to_namespaces_binds_only_their_claims() -> None:
    """Issue 41: any namespace could select a team's dedicated provider by its labels; spec.namespaces scopes it."""
    dedicated = scoped("pg-payments", "payments", "payments-staging", tier="integrated", team="payments")
    shared = provider("pg-integrated", tier="integrated")
    payments = claim(selector={"team": "payments"})
    payments["metadata"]["namespace"] = "payments"
    assert bind(payments, [dedicated, shared]).provider == "pg-payments"
    # another namespace's claim, the same selector: not bound, and the other team's provider is not named to it
    refused = bind(claim(selector={"team": "payments"}), [dedicated, shared])
    assert refused == Binding(None, Condition("Bound", "False", "NoMatchingProvider", (
        "no ServiceProvider of type pg has labels team=payments (of type pg: pg-integrated [tier=integrated]; change "
        "needs.pg.selector to match one)")))
    # the integrated selector: only the shared one is a candidate here (no ambiguity with the dedicated one)
    assert bind(claim(), [dedicated, shared]).provider == "pg-integrated"
    assert bind(claim(selector={}), [dedicated]) == Binding(None, Condition("Bound", "False", "NoMatchingProvider", (
        "no ServiceProvider of type pg serves namespace team (each lists other namespaces in spec.namespaces: a "
        "cluster administrator lists team in one, or creates one)")))


def test_a_bound_claim_whose_namespace_its_provider_no_longer_lists_stays_bound_and_says_so() -> None:
    narrowed = scoped("pg-payments", "payments")
    said = bind(claim(provider="pg-payments"), [narrowed])
    assert said.provider == "pg-payments" and (said.condition.status, said.condition.reason) == (
        "False", "NamespaceNotAdmitted")
    assert "no longer lists team: its data stays there, nothing more is provisioned" in said.condition.message
