"""Which per-hostname listeners the public Gateway carries (lifecycle.listeners), on records and routes as the API
server holds them; the operator applying them to a real Gateway is tests/reconciler/test_listeners_cluster.py."""

from __future__ import annotations

import json
from typing import Any

from lifecycle.listeners import (
    FIELD_MANAGER,
    LISTENER_ANNOTATION,
    apply_object,
    full,
    issued,
    listener,
    mark_object,
    marks,
    ours,
    wanted,
)

GATEWAY = ("public", "apprafter-gateway")


def record(host: str, namespace: str, app: str, environment: str = "prod", created: str = "2026-12-01T00:00:00Z",
           ) -> dict[str, Any]:
    return {"metadata": {"name": host, "namespace": "apprafter-system", "creationTimestamp": created},
            "spec": {"hostname": host, "holder": {"namespace": namespace, "name": app, "environment": environment}}}


def route(host: str, namespace: str, app: str, section: str | None = None, owner: str | None = None,
          ) -> dict[str, Any]:
    refs = [{"apiVersion": "apprafter.io/v1alpha1", "kind": "Application", "name": owner or app, "uid": "u",
             "controller": True}] if owner != "" else []
    return {"metadata": {"name": app, "namespace": namespace, "ownerReferences": refs},
            "spec": {"hostnames": [host], "parentRefs": [{"name": "public", "namespace": "apprafter-gateway",
                                                           "sectionName": section or host}]}}


def certificate(namespace: str, app: str, environment: str = "prod", ready: str | None = "True",
                not_after: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": ready}]
    if not_after:
        status["notAfter"] = not_after
    return {"metadata": {"name": app, "namespace": namespace},
            "spec": {"secretName": f"{app}-{environment}-tls"}, "status": status}


def certified(*pairs: tuple[str, str]) -> list[dict[str, Any]]:
    return [certificate(namespace, app) for namespace, app in pairs]


def test_a_held_tls_hostname_gets_a_listener_serving_its_apps_certificate_to_its_namespace_only() -> None:
    decided = wanted([record("shop.acme.example", "shop", "web")], [route("shop.acme.example", "shop", "web")],
                     certified(("shop", "web")), GATEWAY, 10)
    assert decided.left_out == ()
    assert decided.listeners == (listener("shop.acme.example", "shop", "web", "prod"),)
    [made] = decided.listeners
    assert (made["name"], made["hostname"], made["port"], made["protocol"]) == (
        "shop.acme.example", "shop.acme.example", 443, "HTTPS")
    assert made["tls"] == {"mode": "Terminate", "certificateRefs": [
        {"group": "", "kind": "Secret", "name": "web-prod-tls", "namespace": "shop"}]}
    assert made["allowedRoutes"]["namespaces"] == {
        "from": "Selector", "selector": {"matchLabels": {"kubernetes.io/metadata.name": "shop"}}}


def test_no_listener_without_the_holders_own_tls_route() -> None:
    host = "shop.acme.example"
    held = [record(host, "shop", "web")]
    cert = certified(("shop", "web"), ("evil", "web"))
    assert wanted(held, [], cert, GATEWAY, 10).listeners == ()  # not routed (yet)
    assert wanted(held, [route(host, "shop", "web", section="http")], cert, GATEWAY, 10).listeners == ()  # plain HTTP
    # Someone else's route naming the hostname's listener: another namespace, another app, or not an Application's.
    assert wanted(held, [route(host, "evil", "web")], cert, GATEWAY, 10).listeners == ()
    assert wanted(held, [route(host, "shop", "web", owner="other")], cert, GATEWAY, 10).listeners == ()
    assert wanted(held, [route(host, "shop", "web", owner="")], cert, GATEWAY, 10).listeners == ()
    # A route of the holder for another Gateway.
    other = route(host, "shop", "web")
    other["spec"]["parentRefs"][0]["name"] = "internal"
    assert wanted(held, [other], cert, GATEWAY, 10).listeners == ()
    # A route that names the listener but not the hostname.
    assert wanted([record("x.acme.example", "shop", "web")], [route(host, "shop", "web", section="x.acme.example")],
                  cert, GATEWAY, 10).listeners == ()


def test_a_full_gateway_keeps_the_oldest_holdings_and_says_which_are_left_out() -> None:
    records = [record(f"a{i}.acme.example", f"ns{i}", "web", created=f"2026-12-0{i}T00:00:00Z") for i in (3, 1, 2)]
    routes = [route(f"a{i}.acme.example", f"ns{i}", "web") for i in (1, 2, 3)]
    certs = certified(*((f"ns{i}", "web") for i in (1, 2, 3)))
    decided = wanted(records, routes, certs, GATEWAY, 2)
    assert [item["name"] for item in decided.listeners] == ["a1.acme.example", "a2.acme.example"]
    assert decided.left_out == ("a3.acme.example",)
    assert wanted(records, routes, certs, GATEWAY, 0) == ((), ("a1.acme.example", "a2.acme.example", "a3.acme.example"),
                                                        ())
    # The same input, the same answer whatever the order it comes in.
    assert wanted(list(reversed(records)), list(reversed(routes)), list(reversed(certs)), GATEWAY, 2) == decided


def test_a_listener_comes_only_once_its_certificate_was_issued_and_stays_through_a_failing_renewal() -> None:
    """Before that it would name a Secret that does not exist: Traefik then refuses the whole shared Gateway."""
    host = "shop.acme.example"
    held, routed = [record(host, "shop", "web")], [route(host, "shop", "web")]
    for waiting in ([], [certificate("shop", "web", ready=None)], [certificate("shop", "web", ready="False")],
                    [certificate("shop", "web", environment="dev")]):  # another Secret than the listener serves
        assert wanted(held, routed, waiting, GATEWAY, 10).listeners == (), waiting
    renewing = certificate("shop", "web", ready="False", not_after="2027-03-01T00:00:00Z")
    assert issued(renewing, "web-prod-tls")
    assert [item["name"] for item in wanted(held, routed, [renewing], GATEWAY, 10).listeners] == [host]
    assert not issued(None, "web-prod-tls")


def test_ours_reads_the_listeners_our_field_manager_applied() -> None:
    def entry(manager: str, names: list[str], operation: str = "Apply") -> dict[str, Any]:
        fields = {"f:spec": {"f:listeners": {
            **{"k:" + json.dumps({"name": name}, separators=(",", ":")): {".": {}, "f:name": {}} for name in names},
            ".": {}}}}
        return {"manager": manager, "operation": operation, "fieldsV1": fields}
    gateway = {"metadata": {"managedFields": [entry("argocd-controller", ["http", "https"]),
                                              entry(FIELD_MANAGER, ["b.example", "a.example"]),
                                              entry(FIELD_MANAGER, ["c.example"], operation="Update")]}}
    assert ours(gateway) == ["a.example", "b.example"]
    assert ours({"metadata": {}}) == []


def test_the_apply_names_the_gateway_and_carries_our_listeners_alone() -> None:
    live = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "public", "namespace": "apprafter-gateway", "uid": "x", "resourceVersion": "9"},
            "spec": {"gatewayClassName": "cilium", "listeners": [{"name": "http"}]}}
    made = listener("a.example", "ns", "web", "prod")
    assert apply_object(live, [made]) == {
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "public", "namespace": "apprafter-gateway"}, "spec": {"listeners": [made]}}
    assert apply_object(live, []) == {**apply_object(live, [made]), "spec": {"listeners": []}}


def test_each_record_says_whether_its_hostname_got_its_listener_and_only_a_change_is_written() -> None:
    """Issue 41: a hostname left out of a full Gateway was said only in the operator's log; its record now says
    `gateway-full`, which its Application reads (ListenerUnavailable)."""
    records = [record(f"a{i}.acme.example", f"ns{i}", "web", created=f"2026-12-0{i}T00:00:00Z") for i in (1, 2, 3)]
    records.append(record("b.acme.example", "nsb", "web"))  # no route of its holder: not due a listener
    routes = [route(f"a{i}.acme.example", f"ns{i}", "web") for i in (1, 2, 3)]
    decided = wanted(records, routes, certified(*((f"ns{i}", "web") for i in (1, 2, 3))), GATEWAY, 2)
    said = marks(records, decided)
    assert said == {"a1.acme.example": "listening", "a2.acme.example": "listening",
                    "a3.acme.example": "gateway-full", "b.acme.example": "waiting"}
    marked = [{**r, "metadata": {**r["metadata"], "annotations": {LISTENER_ANNOTATION: said[r["metadata"]["name"]]}}}
              for r in records]
    assert marks(marked, decided) == {}  # nothing to write again
    assert full(marked) == {"a3.acme.example": "gateway-full"}
    assert mark_object(records[2], "gateway-full") == {
        "apiVersion": "apprafter.io/v1alpha1", "kind": "PublicHostname",
        "metadata": {"name": "a3.acme.example", "namespace": "apprafter-system",
                     "annotations": {LISTENER_ANNOTATION: "gateway-full"}}}
    # room again: the one left out gets its listener, and its record says so
    roomy = wanted(marked, routes, certified(*((f"ns{i}", "web") for i in (1, 2, 3))), GATEWAY, 3)
    assert marks(marked, roomy) == {"a3.acme.example": "listening"}


def test_one_namespace_holds_at_most_its_share_of_the_listeners_the_oldest_first() -> None:
    """Issue 41: one tenant's many apps filled the Gateway; `share` bounds what one namespace holds."""
    records = [record(f"a{i}.acme.example", "greedy", f"web{i}", created=f"2026-12-0{i}T00:00:00Z") for i in (1, 2, 3)]
    records.append(record("b.acme.example", "modest", "web", created="2026-12-09T00:00:00Z"))
    routes = [route(f"a{i}.acme.example", "greedy", f"web{i}") for i in (1, 2, 3)]
    routes.append(route("b.acme.example", "modest", "web"))
    certs = certified(*(("greedy", f"web{i}") for i in (1, 2, 3)), ("modest", "web"))
    decided = wanted(records, routes, certs, GATEWAY, 3, share=2)
    assert [item["name"] for item in decided.listeners] == ["a1.acme.example", "a2.acme.example", "b.acme.example"]
    assert (decided.left_out, decided.over_share) == ((), ("a3.acme.example",))
    assert marks(records, decided)["a3.acme.example"] == "namespace-full"
    # without a share, the greedy namespace's third takes the last room and the other namespace is left out
    assert wanted(records, routes, certs, GATEWAY, 3).left_out == ("b.acme.example",)
    # a share lowered under what a namespace holds takes no serving app off the Gateway: only new ones wait
    serving = wanted(records, routes, certs, GATEWAY, 4, share=1,
                     listening=["a1.acme.example", "a2.acme.example", "a3.acme.example"])
    assert [item["name"] for item in serving.listeners] == ["a1.acme.example", "a2.acme.example", "a3.acme.example",
                                                            "b.acme.example"]
    assert serving.over_share == ()
