"""lifecycle.hostname_policy alone (pure: the webhook's and the operator's one rule; tests/admission/test_hostnames.py
and tests/reconciler/test_tenant_cluster.py prove it through the API server): the platform's names, the default
name and who owns an app name, a namespace's grants, and what a HostnamePolicy may say; and which route holds a
hostname already (lifecycle.hostnames.served_by)."""

from __future__ import annotations

from typing import Any

import pytest

from lifecycle.hostname_policy import check, read_all, refusal
from lifecycle.hostnames import foreign_route_hostnames, served_by
from renderer.context import PlatformContext

CONTEXT = PlatformContext(domain="apps.example.com")


def policy(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": spec}


POLICIES = read_all([
    policy("team-a", namespaces=["team-a"], allowedHostnames={"allowed": ["shop.team-a.com", "x.prod.apps.example.com"],
                                                               "allowedRegex": r"[a-z0-9-]+\.team-a\.example"},
           apps={"allowed": ["shop"], "allowedRegex": r"a-.*"}),
    policy("everyone", allNamespaces=True, allowedHostnames={"allowed": ["status.example.org"]}),
])


def why(host: str, app: str = "shop", env: str = "prod", namespace: str = "team-a") -> str | None:
    return refusal(host, app, env, namespace, CONTEXT, POLICIES)


@pytest.mark.parametrize("host", ["apps.example.com", "argocd.apps.example.com", "ARGOCD.apps.example.com",
                                  "api.grafana.apps.example.com", "registry.apps.example.com"])
def test_the_platforms_names_are_nobodys(host: str) -> None:
    assert "is the platform's own (" in (why(host) or "")


def test_an_apps_default_name_is_its_own_unless_a_policy_gives_the_app_name_elsewhere() -> None:
    assert why("cart.prod.apps.example.com", app="cart", namespace="team-b") is None  # nobody owns "cart"
    assert why("shop.prod.apps.example.com") is None  # team-a owns "shop"
    said = why("shop.prod.apps.example.com", namespace="team-b") or ""
    assert "gives the app name shop to other namespaces" in said and "team-a" in said
    assert why("a-thing.dev.apps.example.com", app="a-thing", env="dev", namespace="team-b") is not None  # by regex


def test_another_apps_default_name_is_kept_for_its_owner() -> None:
    said = why("cart.prod.apps.example.com", app="evil", namespace="team-b") or ""
    assert "is the default name of app cart in environment prod" in said
    assert "evil.prod.apps.example.com" in said  # and what this Application's own is
    assert why("shop.staging.apps.example.com") is None  # team-a owns shop: any environment's
    assert why("x.prod.apps.example.com") is None  # an exact grant
    assert why("y.prod.apps.example.com") is not None


def test_other_names_need_a_grant_for_the_namespace() -> None:
    assert why("shop.team-a.com") is None
    assert why("web.team-a.example") is None  # regex, whole name
    assert why("web.team-a.example.evil.com") is not None  # the regex matches the whole name only
    assert why("status.example.org", namespace="anyone") is None  # allNamespaces
    said = why("shop.team-a.com", namespace="team-b") or ""
    assert said.startswith("no HostnamePolicy lets namespace team-b use shop.team-a.com")
    assert why("one.apps.example.com") is not None  # under the domain, not of the default shape: a grant's


def test_without_any_policy_only_default_names_are_allowed() -> None:
    assert refusal("web.prod.apps.example.com", "web", "prod", "ns", CONTEXT, ()) is None
    assert refusal("web.example.org", "web", "prod", "ns", CONTEXT, ()) is not None


@pytest.mark.parametrize(("spec", "field"), [
    ({"allowedHostnames": {"allowed": ["a.com"]}}, "spec"),
    ({"namespaces": ["a"], "allNamespaces": True}, "spec"),
    ({"namespaces": ["Team_A"]}, "spec.namespaces[0]"),
    ({"allNamespaces": True, "allowedHostnames": {"allowed": ["not a name"]}}, "spec.allowedHostnames.allowed[0]"),
    ({"allNamespaces": True, "allowedHostnames": {"allowedRegex": "(unclosed"}}, "spec.allowedHostnames.allowedRegex"),
    ({"allNamespaces": True, "apps": {"allowed": ["9lives"]}}, "spec.apps.allowed[0]"),
])
def test_a_policy_that_does_not_read_is_refused_and_skipped(spec: dict[str, Any], field: str) -> None:
    assert field in [f for f, _ in check(policy("bad", **spec))]
    assert read_all([policy("bad", **spec)]) == ()


def route(name: str, hosts: list[str], owner_kind: str = "", api_version: str = "apprafter.io/v1alpha1",
          ) -> dict[str, Any]:
    refs = [{"apiVersion": api_version, "kind": owner_kind, "name": "x", "uid": "u", "controller": True}]
    return {"kind": "HTTPRoute", "metadata": {"namespace": "argocd", "name": name,
                                              **({"ownerReferences": refs} if owner_kind else {})},
            "spec": {"hostnames": hosts}}


def test_a_route_no_application_made_holds_its_exact_hostnames() -> None:
    routes = [route("argocd", ["argocd.apps.example.com"]), route("shop", ["shop.team-a.com"], "Application"),
              route("wild", ["*.team-b.com"]),
              route("other", ["grafana.apps.example.com"], "Application", "other.io/v1")]  # not our Application
    assert served_by("argocd.apps.example.com", routes) == "HTTPRoute argocd/argocd (no controller)"
    assert served_by("shop.team-a.com", routes) == ""  # an Application's route: its record decides
    assert served_by("x.team-b.com", routes) == ""  # exact names only (docs/threat-model.md, out of scope)
    assert served_by("grafana.apps.example.com", routes).startswith("HTTPRoute argocd/other (controlled by Application")
    # the index the operator finds them by: each hostname of a route no Application of ours made, none of ours
    assert [foreign_route_hostnames(r) for r in routes] == [
        ("argocd.apps.example.com",), (), ("*.team-b.com",), ("grafana.apps.example.com",)]
