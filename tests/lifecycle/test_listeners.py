"""Which per-hostname listeners the public Gateway carries (lifecycle.listeners), on records and routes as the API
server holds them; the operator applying them to a real Gateway is tests/reconciler/test_listeners_cluster.py."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from lifecycle.listeners import (
    FIELD_MANAGER,
    GATEWAY_ANNOTATION,
    LISTENER_ANNOTATION,
    Slot,
    Spread,
    apply_object,
    full,
    gateway_names,
    issued,
    listener,
    mark_object,
    marks,
    on_placed_gateways,
    ours,
    overflow_object,
    spread,
)

GATEWAY = ("public", "apprafter-gateway")


def wanted(records: Iterable[Mapping[str, Any]], routes: Iterable[Mapping[str, Any]],
           certificates: Iterable[Mapping[str, Any]], gateway: tuple[str, str], room: int, share: int | None = None,
           listening: Iterable[str] = ()) -> Spread:
    """The spread over the one Gateway `gateway` with `room` for hostnames."""
    return spread(records, routes, certificates, [Slot(gateway[0], room, frozenset(listening))], gateway[1], share)


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


def marked_as(record: dict[str, Any], mark: str, gateway: str | None) -> dict[str, Any]:
    """The record as the listeners' field manager's apply left it."""
    return {**record, "metadata": {**record["metadata"], "annotations": mark_object(record, mark, gateway)["metadata"][
        "annotations"]}}


def certified(*pairs: tuple[str, str]) -> list[dict[str, Any]]:
    return [certificate(namespace, app) for namespace, app in pairs]


def test_a_held_tls_hostname_gets_a_listener_serving_its_apps_certificate_to_its_namespace_only() -> None:
    decided = wanted([record("shop.acme.example", "shop", "web")], [route("shop.acme.example", "shop", "web")],
                     certified(("shop", "web")), GATEWAY, 10)
    assert decided.left_out == ()
    assert decided.listeners["public"] == (listener("shop.acme.example", "shop", "web", "prod"),)
    [made] = decided.listeners["public"]
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
    assert wanted(held, [], cert, GATEWAY, 10).listeners["public"] == ()  # not routed (yet)
    plain = [route(host, "shop", "web", section="http")]
    assert wanted(held, plain, cert, GATEWAY, 10).listeners["public"] == ()  # plain HTTP
    # Someone else's route naming the hostname's listener: another namespace, another app, or not an Application's.
    assert wanted(held, [route(host, "evil", "web")], cert, GATEWAY, 10).listeners["public"] == ()
    assert wanted(held, [route(host, "shop", "web", owner="other")], cert, GATEWAY, 10).listeners["public"] == ()
    assert wanted(held, [route(host, "shop", "web", owner="")], cert, GATEWAY, 10).listeners["public"] == ()
    # A route of the holder for another Gateway.
    other = route(host, "shop", "web")
    other["spec"]["parentRefs"][0]["name"] = "internal"
    assert wanted(held, [other], cert, GATEWAY, 10).listeners["public"] == ()
    # A route that names the listener but not the hostname.
    assert wanted([record("x.acme.example", "shop", "web")], [route(host, "shop", "web", section="x.acme.example")],
                  cert, GATEWAY, 10).listeners["public"] == ()


def test_a_full_gateway_keeps_the_oldest_holdings_and_says_which_are_left_out() -> None:
    records = [record(f"a{i}.acme.example", f"ns{i}", "web", created=f"2026-12-0{i}T00:00:00Z") for i in (3, 1, 2)]
    routes = [route(f"a{i}.acme.example", f"ns{i}", "web") for i in (1, 2, 3)]
    certs = certified(*((f"ns{i}", "web") for i in (1, 2, 3)))
    decided = wanted(records, routes, certs, GATEWAY, 2)
    assert [item["name"] for item in decided.listeners["public"]] == ["a1.acme.example", "a2.acme.example"]
    assert decided.left_out == ("a3.acme.example",)
    assert wanted(records, routes, certs, GATEWAY, 0) == (
        {"public": ()}, {}, ("a1.acme.example", "a2.acme.example", "a3.acme.example"), ())
    # The same input, the same answer whatever the order it comes in.
    assert wanted(list(reversed(records)), list(reversed(routes)), list(reversed(certs)), GATEWAY, 2) == decided


def test_a_listener_comes_only_once_its_certificate_was_issued_and_stays_through_a_failing_renewal() -> None:
    """Before that it would name a Secret that does not exist: Traefik then refuses the whole shared Gateway."""
    host = "shop.acme.example"
    held, routed = [record(host, "shop", "web")], [route(host, "shop", "web")]
    for waiting in ([], [certificate("shop", "web", ready=None)], [certificate("shop", "web", ready="False")],
                    [certificate("shop", "web", environment="dev")]):  # another Secret than the listener serves
        assert wanted(held, routed, waiting, GATEWAY, 10).listeners["public"] == (), waiting
    renewing = certificate("shop", "web", ready="False", not_after="2027-03-01T00:00:00Z")
    assert issued(renewing, "web-prod-tls")
    assert [item["name"] for item in wanted(held, routed, [renewing], GATEWAY, 10).listeners["public"]] == [host]
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
    assert said == {"a1.acme.example": ("listening", "public"), "a2.acme.example": ("listening", "public"),
                    "a3.acme.example": ("gateway-full", None), "b.acme.example": ("waiting", None)}
    marked = [marked_as(r, *said[r["metadata"]["name"]]) for r in records]
    assert marks(marked, decided) == {}  # nothing to write again
    assert full(marked) == {"a3.acme.example": "gateway-full"}
    assert mark_object(records[2], "gateway-full") == {
        "apiVersion": "apprafter.io/v1alpha1", "kind": "PublicHostname",
        "metadata": {"name": "a3.acme.example", "namespace": "apprafter-system",
                     "annotations": {LISTENER_ANNOTATION: "gateway-full"}}}
    # room again: the one left out gets its listener, and its record says so
    roomy = wanted(marked, routes, certified(*((f"ns{i}", "web") for i in (1, 2, 3))), GATEWAY, 3)
    assert marks(marked, roomy) == {"a3.acme.example": ("listening", "public")}


def test_one_namespace_holds_at_most_its_share_of_the_listeners_the_oldest_first() -> None:
    """Issue 41: one tenant's many apps filled the Gateway; `share` bounds what one namespace holds."""
    records = [record(f"a{i}.acme.example", "greedy", f"web{i}", created=f"2026-12-0{i}T00:00:00Z") for i in (1, 2, 3)]
    records.append(record("b.acme.example", "modest", "web", created="2026-12-09T00:00:00Z"))
    routes = [route(f"a{i}.acme.example", "greedy", f"web{i}") for i in (1, 2, 3)]
    routes.append(route("b.acme.example", "modest", "web"))
    certs = certified(*(("greedy", f"web{i}") for i in (1, 2, 3)), ("modest", "web"))
    decided = wanted(records, routes, certs, GATEWAY, 3, share=2)
    assert [item["name"] for item in decided.listeners["public"]] == [
        "a1.acme.example", "a2.acme.example", "b.acme.example"]
    assert (decided.left_out, decided.over_share) == ((), ("a3.acme.example",))
    assert marks(records, decided)["a3.acme.example"] == ("namespace-full", None)
    # without a share, the greedy namespace's third takes the last room and the other namespace is left out
    assert wanted(records, routes, certs, GATEWAY, 3).left_out == ("b.acme.example",)
    # a share lowered under what a namespace holds takes no serving app off the Gateway: only new ones wait
    serving = wanted(records, routes, certs, GATEWAY, 4, share=1,
                     listening=["a1.acme.example", "a2.acme.example", "a3.acme.example"])
    assert [item["name"] for item in serving.listeners["public"]] == [
        "a1.acme.example", "a2.acme.example", "a3.acme.example", "b.acme.example"]
    assert serving.over_share == ()


def hosts(count: int, start: int = 0) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """`count` held hostnames, one app each in a namespace of its own, routed and certified, oldest first."""
    numbers = range(start, start + count)
    return ([record(f"h{i:03}.acme.example", f"ns{i:03}", "web", created=f"2026-12-01T{i // 60:02}:{i % 60:02}:00Z")
             for i in numbers],
            [route(f"h{i:03}.acme.example", f"ns{i:03}", "web") for i in numbers],
            certified(*((f"ns{i:03}", "web") for i in numbers)))


def test_hostnames_fill_the_first_gateway_with_room_and_each_stays_where_it_was_placed() -> None:
    """Issue 44 item 4: past one Gateway's 64 listeners, the hostnames go on the next Gateway, oldest first."""
    records, routes, certs = hosts(5)
    slots = [Slot(name, 2) for name in gateway_names("public", 3)]
    decided = spread(records, routes, certs, slots, "apprafter-gateway")
    assert decided.placed == {"h000.acme.example": "public", "h001.acme.example": "public",
                              "h002.acme.example": "public-2", "h003.acme.example": "public-2",
                              "h004.acme.example": "public-3"}
    assert {name: [item["name"] for item in made] for name, made in decided.listeners.items()} == {
        "public": ["h000.acme.example", "h001.acme.example"], "public-2": ["h002.acme.example", "h003.acme.example"],
        "public-3": ["h004.acme.example"]}
    assert decided.left_out == ()
    # the same input in another order: the same answer
    assert spread(records[::-1], routes[::-1], certs[::-1], slots, "apprafter-gateway") == decided
    # the oldest goes; a newer one comes: it takes the room on the first Gateway, no one else moves
    newer, newer_route, newer_cert = hosts(1, start=9)
    after = [marked_as(r, "listening", decided.placed[r["metadata"]["name"]]) for r in records[1:]] + newer
    kept = {h: g for h, g in decided.placed.items() if h != "h000.acme.example"}
    listening = [Slot(name, 2, frozenset(h for h, g in kept.items() if g == name))
                 for name in gateway_names("public", 3)]
    moved = spread(after, routes + newer_route, certs + newer_cert, listening, "apprafter-gateway")
    assert moved.placed == {**kept, "h009.acme.example": "public"}
    # after a restart, the records' word alone (no listener yet: its certificate is being renewed) keeps the place
    unlistened = [Slot(name, 2) for name in gateway_names("public", 3)]
    assert spread(after, routes + newer_route, certs + newer_cert, unlistened, "apprafter-gateway").placed == \
        moved.placed


def test_a_hostname_is_placed_before_its_certificate_and_every_gateway_full_leaves_the_newest_out() -> None:
    """Placed as soon as its route names its listener, so its DNS and its HTTP-01 challenge go where its listener
    will be; the listener itself waits for the certificate. When every Gateway is full, the newest wait."""
    records, routes, certs = hosts(4)
    slots = [Slot(name, 1) for name in gateway_names("public", 3)]
    decided = spread(records, routes, certs[1:], slots, "apprafter-gateway")
    assert decided.placed == {"h000.acme.example": "public", "h001.acme.example": "public-2",
                              "h002.acme.example": "public-3"}
    assert decided.listeners["public"] == ()  # h000 is placed, its certificate not issued yet
    assert decided.left_out == ("h003.acme.example",)
    assert marks(records, decided) == {"h000.acme.example": ("waiting", "public"),
                                       "h001.acme.example": ("listening", "public-2"),
                                       "h002.acme.example": ("listening", "public-3"),
                                       "h003.acme.example": ("gateway-full", None)}
    # a route that moved to the Gateway its hostname was placed on still counts as routed
    moved = route("h001.acme.example", "ns001", "web")
    moved["spec"]["parentRefs"][0]["name"] = "public-2"
    assert spread([records[1]], [moved], certs, slots, "apprafter-gateway").placed == {"h001.acme.example": "public"}
    assert spread([marked_as(records[1], "listening", "public-2")], [moved], certs, slots,
                  "apprafter-gateway").placed == {"h001.acme.example": "public-2"}


def test_two_hundred_hostnames_over_four_gateways_stable_whatever_the_order() -> None:
    """Issue 44 item 4's count: 200 hostnames, the chart's Gateway with its 2 listeners and three more."""
    records, routes, certs = hosts(200)
    slots = [Slot(name, 62) for name in gateway_names("public", 16)]
    decided = spread(records, routes, certs, slots, "apprafter-gateway")
    counts = {name: len(made) for name, made in decided.listeners.items() if made}
    assert counts == {"public": 62, "public-2": 62, "public-3": 62, "public-4": 14}
    shuffled = records[1::2] + records[::2]
    assert spread(shuffled, routes[::-1], certs, slots, "apprafter-gateway") == decided


def test_a_placed_hostnames_routes_attach_to_its_gateway_and_nothing_else_moves() -> None:
    held = [marked_as(record("shop.acme.example", "shop", "web"), "listening", "public-3")]
    https = route("shop.acme.example", "shop", "web")
    https["kind"] = "HTTPRoute"
    redirect = {**route("shop.acme.example", "shop", "web-redirect", section="http"), "kind": "HTTPRoute"}
    internal = {**route("shop.acme.example", "shop", "web-internal"), "kind": "HTTPRoute"}
    internal["spec"]["parentRefs"][0]["name"] = "internal"
    service = {"kind": "Service", "metadata": {"name": "web"}, "spec": {"hostnames": ["shop.acme.example"]}}
    moved = on_placed_gateways([https, redirect, internal, service], held, "public", "apprafter-gateway")
    assert [ref["name"] for child in moved[:3] for ref in child["spec"]["parentRefs"]] == [
        "public-3", "public-3", "internal"]
    assert moved[0]["spec"]["parentRefs"][0]["sectionName"] == "shop.acme.example"
    assert moved[3] is service and https["spec"]["parentRefs"][0]["name"] == "public"  # the input is not changed
    # placed on the chart's own Gateway, or not placed: as rendered
    for record_ in (marked_as(record("shop.acme.example", "shop", "web"), "listening", "public"),
                    record("shop.acme.example", "shop", "web")):
        assert on_placed_gateways([https], [record_], "public", "apprafter-gateway") == [https]
    assert GATEWAY_ANNOTATION in held[0]["metadata"]["annotations"]


def test_a_gateway_past_the_charts_copies_its_class_and_listeners_and_not_its_argo_cd_labels() -> None:
    main = {"metadata": {"name": "public", "namespace": "apprafter-gateway",
                         "labels": {"app.kubernetes.io/instance": "gateway", "apprafter.io/network": "public"}},
            "spec": {"gatewayClassName": "traefik", "listeners": [{"name": "http", "port": 80}]}}
    made = listener("a.example", "ns", "web", "prod")
    assert overflow_object(main, "public-2", main["spec"]["listeners"], [made]) == {
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "public-2", "namespace": "apprafter-gateway",
                     "labels": {"apprafter.io/network": "public", "apprafter.io/overflow-of": "public"}},
        "spec": {"gatewayClassName": "traefik", "listeners": [{"name": "http", "port": 80}, made]}}
    assert gateway_names("public", 1) == ["public"] and gateway_names("public", 3)[1:] == ["public-2", "public-3"]
