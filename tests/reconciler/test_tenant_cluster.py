"""A hostile tenant gets nothing (issue 24), through the real API server and `apprafter operator` run as its
ServiceAccount with the chart's RBAC: the tenant is a ServiceAccount that may write Applications in its own
namespace and nothing else. The baseline outlives the Application (delete and re-create, an orphaning delete), the
operator never applies onto what it does not control, a public hostname is its first deployment's, instance names
do not collide, Secrets are read only when granted, the new rule classes gate, the schema's bounds hold."""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx
import pytest

from compatibility.application import deployment
from lifecycle.baseline import record_name
from lifecycle.listeners import MAX_LISTENERS
from tests.reconciler.gateway_bed import GATEWAY_API, certificate_issued, chart_gateway, listeners_of
from tests.reconciler.helpers import (
    API,
    BASE,
    children,
    claims_when_created,
    condition,
    cr,
    edit,
    fresh_namespace,
    gc_deletes_children,
    grant_secret,
    plan_phase,
    plans,
    status,
    wait,
    wait_phase,
    wait_showing,
)
from tests.reconciler.helpers import (
    app as application,
)
from tests.reconciler.operator_proc import FAST, Operator, operator_fixture
from tests.renderer.helpers import run_cli
from tests.testbed.kube import KubeTestBed, ssl_context

pytestmark = pytest.mark.testbed

RBAC = "rbac.authorization.k8s.io/v1"
SIMPLE = edit(needs=None, env={"LOG_LEVEL": "info", "API_KEY": {"secret": "vendor/key"}})  # public, no claims
# The issue's held change: a new image repository and a new Secret reference (AR-SB008, AR-SB001).
HELD = edit(SIMPLE, image="ghcr.io/evil/demo:1.0.0", env={**SIMPLE["env"], "TOKEN": {"secret": "other/token"}})


# The operator as its ServiceAccount, bound by the chart's RBAC only (its records namespace included).
# One public Gateway, so it fills (the Gateways past it: tests/reconciler/test_gateways_cluster.py).
operator = operator_fixture("--no-leader-elect", "--no-platform-stack", *FAST, "--public-gateways", "1", rbac=(),
                            name="tenant")


class Tenant:
    """A ServiceAccount that may do anything with Applications in its namespace, and nothing else."""

    def __init__(self, bed: KubeTestBed, namespace: str) -> None:
        self.bed, self.namespace = bed, namespace
        role = {"apiVersion": RBAC, "kind": "Role", "metadata": {"name": "apps-only", "namespace": namespace},
                "rules": [{"apiGroups": ["apprafter.io"], "resources": ["applications"], "verbs": ["*"]}]}
        binding = {"apiVersion": RBAC, "kind": "RoleBinding", "metadata": {"name": "apps-only", "namespace": namespace},
                   "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": namespace}],
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "apps-only"}}
        bed.apply(role, field_manager="admin")
        bed.apply(binding, field_manager="admin")
        token = bed.service_account_token(namespace, "tenant")
        bed.wait_authorized(f"system:serviceaccount:{namespace}:tenant", verb="patch", group="apprafter.io",
                            resource="applications", namespace=namespace)
        self.http = httpx.Client(base_url=bed.url, verify=ssl_context(bed.ca_path), timeout=30,
                                 headers={"Authorization": f"Bearer {token}"})

    def path(self, name: str = "demo", namespace: str | None = None) -> str:
        return self.bed.resource_for(API, "Application").path(name, namespace or self.namespace)

    def apply(self, obj: dict[str, Any]) -> httpx.Response:
        """What Argo CD (or kubectl) does for the tenant: a server-side apply of the Application."""
        return self.http.patch(self.path(obj["metadata"]["name"]), content=json.dumps(obj).encode(),
                               params={"fieldManager": "tenant", "force": "true", "fieldValidation": "Strict"},
                               headers={"Content-Type": "application/apply-patch+yaml"})

    def delete(self, name: str = "demo", orphan: bool = False) -> httpx.Response:
        body = {"apiVersion": "v1", "kind": "DeleteOptions",
                "propagationPolicy": "Orphan" if orphan else "Background"}
        return self.http.request("DELETE", self.path(name), json=body)


def ok(resp: httpx.Response) -> dict[str, Any]:
    assert resp.status_code < 300, f"{resp.status_code}: {resp.text[:1500]}"
    result: dict[str, Any] = resp.json()
    return result


def tenant_namespace(bed: KubeTestBed, prefix: str) -> tuple[str, Tenant]:
    """A namespace with its tenant, and the Secrets its owner granted to the tenant's apps (SIMPLE's, HELD's)."""
    ns = fresh_namespace(bed, prefix)
    for secret in ("vendor", "other"):
        grant_secret(bed, ns, secret, "demo, shop, cart, evil, a, a-b")
    return ns, Tenant(bed, ns)


def ready(bed: KubeTestBed, ns: str, name: str = "demo") -> dict[str, Any]:
    return wait_phase(bed, ns, "Ready", name)


def refused_with(bed: KubeTestBed, ns: str, reason: str, name: str = "demo") -> str:
    """The Ready=False message once the operator refused the current generation with `reason`."""
    def probe() -> str | None:
        obj = bed.get(API, "Application", name, ns) or {}
        st = obj.get("status") or {}
        cond = condition(st, "Ready") or {}
        done = st.get("observedGeneration") == obj.get("metadata", {}).get("generation")
        return str(cond["message"]) if done and cond.get("reason") == reason else None
    return wait_showing(f"{ns}/{name} Ready=False {reason}", probe, 30,
                        lambda: json.dumps(status(bed, ns, name), indent=1)[:3000], "status now")


def gc_orphans_children(bed: KubeTestBed, ns: str, name: str = "demo") -> None:
    """What the garbage collector does for an orphaning delete: the owner references to the Application come off
    its children, then its `orphan` finalizer does, and it is gone."""
    for (kind, child), obj in children(bed, ns).items():
        info = bed.resource_for(obj["apiVersion"], kind)
        resp = bed.http.patch(info.path(child, ns), content=json.dumps({"metadata": {"ownerReferences": None}}),
                              headers={"Content-Type": "application/merge-patch+json"})
        assert resp.status_code == 200, resp.text
    info = bed.resource_for(API, "Application")
    resp = bed.http.patch(info.path(name, ns), content=json.dumps({"metadata": {"finalizers": None}}),
                          headers={"Content-Type": "application/merge-patch+json"})
    assert resp.status_code in (200, 404), resp.text
    wait(f"{ns}/{name} gone", lambda: bed.get(API, "Application", name, ns) is None or None)


def deployment_image(bed: KubeTestBed, ns: str, name: str = "demo") -> str:
    obj = bed.get("apps/v1", "Deployment", name, ns)
    assert obj is not None
    return str(obj["spec"]["template"]["spec"]["containers"][0]["image"])


def approve(bed: KubeTestBed, ns: str, plan: str) -> None:
    result = run_cli("migration", "approve", plan, "-n", ns, "--kubeconfig", str(bed.kubeconfig))
    assert result.returncode == 0, result.stderr


def held_plan(bed: KubeTestBed, ns: str) -> dict[str, Any]:
    st = wait_phase(bed, ns, "AwaitingMigrationApproval")
    plan = next(p for p in plans(bed, ns) if p["metadata"]["name"] == st["migrationPlan"])
    wait("the plan pending", lambda: plan_phase(bed, ns, plan["metadata"]["name"]) == "pending-approval" or None)
    return plan


# --- 1. a baseline that outlives its Application --------------------------------------------------------------

def test_delete_and_recreate_while_a_plan_waits_is_held_exactly_like_an_edit(bed: KubeTestBed,
                                                                            operator: Operator) -> None:
    ns, tenant = tenant_namespace(bed, "rebirth")
    first = ok(tenant.apply(cr(ns, SIMPLE)))
    ready(bed, ns)
    ok(tenant.apply(cr(ns, HELD)))
    waiting = held_plan(bed, ns)
    rules = {c["rule"] for c in waiting["spec"]["changes"]}
    assert {"AR-SB008", "AR-SB001"} <= rules

    ok(tenant.delete())
    gc_deletes_children(bed, operator, ns, first["metadata"]["uid"])
    wait("the Application gone", lambda: bed.get(API, "Application", "demo", ns) is None or None)
    record = bed.get(API, "ApplicationBaseline", record_name(ns, "demo", "prod"), operator.records_namespace)
    assert record is not None and not record["metadata"].get("ownerReferences")  # nothing for the GC to take
    assert record["spec"]["effectiveSpec"] == deployment(cr(ns, SIMPLE), "prod").spec

    again = ok(tenant.apply(cr(ns, HELD)))  # "remove the app from git, add it back"
    plan = held_plan(bed, ns)
    assert {c["rule"] for c in plan["spec"]["changes"]} == rules
    assert plan["metadata"]["ownerReferences"][0]["uid"] == again["metadata"]["uid"]
    assert status(bed, ns)["lastAppliedSpec"] == record["spec"]["effectiveSpec"]
    assert deployment_image(bed, ns) == SIMPLE["image"]  # the children are the baseline's, not the held change's
    env = {e["name"] for e in bed.get("apps/v1", "Deployment", "demo", ns)["spec"]["template"]["spec"][
        "containers"][0]["env"]}
    assert "TOKEN" not in env

    approve(bed, ns, plan["metadata"]["name"])
    ready(bed, ns)
    assert deployment_image(bed, ns) == HELD["image"]


def test_an_orphaning_delete_and_recreate_leaves_the_orphans_alone_until_adopted_then_holds(
        bed: KubeTestBed, operator: Operator) -> None:
    ns, tenant = tenant_namespace(bed, "orphan")
    ok(tenant.apply(cr(ns, SIMPLE)))
    ready(bed, ns)
    ok(tenant.apply(cr(ns, HELD)))
    held_plan(bed, ns)

    ok(tenant.delete(orphan=True))
    gc_orphans_children(bed, ns)
    before = {k: o["metadata"]["resourceVersion"] for k, o in children(bed, ns).items()}
    ok(tenant.apply(cr(ns, HELD)))
    text = refused_with(bed, ns, "ChildConflict")
    assert "Deployment demo (no controller; made by apprafter-operator)" in text, text
    assert "kubectl annotate KIND NAME apprafter.io/adopt=demo" in text
    after = {k: o["metadata"]["resourceVersion"] for k, o in children(bed, ns).items()}
    assert after == before and deployment_image(bed, ns) == SIMPLE["image"]  # the orphans were left alone

    for (kind, child), obj in children(bed, ns).items():  # whoever may write them hands them over
        info = bed.resource_for(obj["apiVersion"], kind)
        resp = bed.http.patch(info.path(child, ns), content=json.dumps(
            {"metadata": {"annotations": {"apprafter.io/adopt": "demo"}}}),
            headers={"Content-Type": "application/merge-patch+json"})
        assert resp.status_code == 200, resp.text
    plan = held_plan(bed, ns)  # adopted, and the gated difference is held exactly like an edit
    assert {"AR-SB008", "AR-SB001"} <= {c["rule"] for c in plan["spec"]["changes"]}
    assert deployment_image(bed, ns) == SIMPLE["image"]
    uid = bed.get(API, "Application", "demo", ns)["metadata"]["uid"]
    assert all(o["metadata"]["ownerReferences"][0]["uid"] == uid for o in children(bed, ns).values())


def test_a_recreated_application_with_its_baseline_spec_deploys_without_a_plan(bed: KubeTestBed,
                                                                               operator: Operator) -> None:
    ns, tenant = tenant_namespace(bed, "same")
    first = ok(tenant.apply(cr(ns, SIMPLE)))
    ready(bed, ns)
    ok(tenant.delete())
    gc_deletes_children(bed, operator, ns, first["metadata"]["uid"])
    wait("the Application gone", lambda: bed.get(API, "Application", "demo", ns) is None or None)
    ok(tenant.apply(cr(ns, edit(SIMPLE, replicas=3))))  # a soft difference: applied at once
    ready(bed, ns)
    assert plans(bed, ns) == []


def test_the_baseline_is_the_operators_alone(bed: KubeTestBed, operator: Operator) -> None:
    ns, tenant = tenant_namespace(bed, "private")
    ok(tenant.apply(cr(ns, SIMPLE)))
    ready(bed, ns)
    records = operator.records_namespace
    name = record_name(ns, "demo", "prod")
    info = bed.resource_for(API, "ApplicationBaseline")
    assert tenant.http.get(info.path(name, records)).status_code == 403
    assert tenant.http.get(info.path(None, records)).status_code == 403
    assert tenant.http.delete(info.path(name, records)).status_code == 403
    # Someone who may write it anyway (an admin, another controller) poisons it: the gate fails closed.
    forged = {"apiVersion": API, "kind": "ApplicationBaseline", "metadata": {"name": name, "namespace": records},
              "spec": {"effectiveSpec": deployment(cr(ns, HELD), "prod").spec}}
    bed.apply(forged, field_manager="someone-else")
    ok(tenant.apply(cr(ns, HELD)))
    text = refused_with(bed, ns, "InvalidStatus")
    assert f"ApplicationBaseline {name} was written by someone-else, not by the operator" in text
    assert deployment_image(bed, ns) == SIMPLE["image"]


def test_forgetting_a_baseline_is_a_persons_explicit_act(bed: KubeTestBed, operator: Operator) -> None:
    ns, tenant = tenant_namespace(bed, "forget")
    first = ok(tenant.apply(cr(ns, SIMPLE)))
    ready(bed, ns)
    ok(tenant.delete())
    gc_deletes_children(bed, operator, ns, first["metadata"]["uid"])
    records, name = operator.records_namespace, record_name(ns, "demo", "prod")
    info = bed.resource_for(API, "ApplicationBaseline")
    operator_http = httpx.Client(base_url=bed.url, verify=ssl_context(bed.ca_path), timeout=30, headers={
        "Authorization": f"Bearer {bed.service_account_token('apprafter-system', 'apprafter-operator')}"})
    assert operator_http.delete(info.path(name, records)).status_code == 403  # the operator never forgets
    forgetter = fresh_namespace(bed, "people")
    token = bed.service_account_token(forgetter, "platform-admin")
    bed.apply({"apiVersion": RBAC, "kind": "RoleBinding", "metadata": {"name": "forget", "namespace": records},
               "subjects": [{"kind": "ServiceAccount", "name": "platform-admin", "namespace": forgetter}],
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": "apprafter:baseline-forgetter"}}, field_manager="admin")
    bed.apply(chart_role("apprafter:baseline-forgetter"), field_manager="admin")
    person = httpx.Client(base_url=bed.url, verify=ssl_context(bed.ca_path), timeout=30,
                          headers={"Authorization": f"Bearer {token}"})
    wait("the forgetter's role honoured", lambda: person.get(info.path(name, records)).status_code == 200 or None)
    assert tenant.http.delete(info.path(name, records)).status_code == 403  # not the tenant's to forget
    assert person.delete(info.path(name, records)).status_code == 200
    ok(tenant.apply(cr(ns, HELD)))  # forgotten: a first deployment again, nothing to compare with
    ready(bed, ns)
    assert deployment_image(bed, ns) == HELD["image"] and plans(bed, ns) == []


def chart_role(name: str) -> dict[str, Any]:
    from tests.admission.cluster import chart_objects

    return next(o for o in chart_objects() if o["kind"] == "ClusterRole" and o["metadata"]["name"] == name)


# --- 2. ownership before force -------------------------------------------------------------------------------

FOREIGN: dict[str, dict[str, Any]] = {
    "Service": {"apiVersion": "v1", "kind": "Service", "spec": {
        "type": "NodePort", "selector": {"app": "billing"},
        "ports": [{"name": "legacy", "port": 80, "protocol": "TCP"}]}},
    "ServiceAccount": {"apiVersion": "v1", "kind": "ServiceAccount", "automountServiceAccountToken": True},
    "NetworkPolicy": {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "spec": {
        "podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{"from": [{"podSelector": {}}]}]}},
    "Deployment": {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {
        "replicas": 1, "selector": {"matchLabels": {"app": "billing"}},
        "template": {"metadata": {"labels": {"app": "billing"}},
                     "spec": {"containers": [{"name": "billing", "image": "registry.example/billing:7"}]}}}},
}


@pytest.mark.parametrize("kind", sorted(FOREIGN))
def test_an_object_the_application_does_not_control_is_left_alone(bed: KubeTestBed, operator: Operator,
                                                                 kind: str) -> None:
    ns, tenant = tenant_namespace(bed, "takeover")
    foreign = copy.deepcopy(FOREIGN[kind])
    foreign["metadata"] = {"name": "demo", "namespace": ns}
    made = bed.apply(foreign, field_manager="billing-team")
    ok(tenant.apply(cr(ns, SIMPLE)))
    text = refused_with(bed, ns, "ChildConflict")
    assert f"{kind} demo (no controller; made by billing-team)" in text, text
    live = bed.get(foreign["apiVersion"], kind, "demo", ns)
    assert live is not None and live["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"]
    assert children(bed, ns) == {}  # nothing applied: no half-taken app

    resp = bed.http.patch(bed.resource_for(foreign["apiVersion"], kind).path("demo", ns), content=json.dumps(
        {"metadata": {"annotations": {"apprafter.io/adopt": "demo"}}}),
        headers={"Content-Type": "application/merge-patch+json"})
    assert resp.status_code == 200, resp.text
    if kind == "Deployment":  # handed over, but its selector is immutable: the writer deletes it instead
        assert "field is immutable" in refused_with(bed, ns, "ApplyFailed")
        bed.delete(foreign["apiVersion"], kind, "demo", ns)
    ready(bed, ns)  # handed over by its writer: adopted
    adopted = bed.get(foreign["apiVersion"], kind, "demo", ns)
    assert adopted["metadata"]["ownerReferences"][0]["uid"] == bed.get(API, "Application", "demo", ns)["metadata"][
        "uid"]


def test_an_object_controlled_by_someone_else_is_not_adopted_even_when_annotated(bed: KubeTestBed,
                                                                                 operator: Operator) -> None:
    ns, tenant = tenant_namespace(bed, "controlled")
    owner = bed.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner", "namespace": ns}},
                      field_manager="billing-team")
    foreign = copy.deepcopy(FOREIGN["Service"])
    foreign["metadata"] = {"name": "demo", "namespace": ns, "annotations": {"apprafter.io/adopt": "demo"},
                           "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                                                "uid": owner["metadata"]["uid"], "controller": True}]}
    bed.apply(foreign, field_manager="billing-team")
    ok(tenant.apply(cr(ns, SIMPLE)))
    text = refused_with(bed, ns, "ChildConflict")
    assert "Service demo (controlled by ConfigMap owner" in text, text


def test_prune_takes_only_what_the_application_controls(bed: KubeTestBed, operator: Operator) -> None:
    ns, tenant = tenant_namespace(bed, "prune")
    ok(tenant.apply(cr(ns, SIMPLE)))
    ready(bed, ns)
    # Objects that carry the app's labels but are not its own (labels anyone who writes an object may set).
    labels = {"app.kubernetes.io/instance": "demo-prod", "app.kubernetes.io/managed-by": "apprafter",
              "app.kubernetes.io/name": "demo"}
    for name in ("demo-lookalike", "demo-egress-extra"):
        bed.apply({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns, "labels": labels},
                   "spec": {"ports": [{"port": 81, "protocol": "TCP"}]}}, field_manager="someone")
    ok(tenant.apply(cr(ns, edit(SIMPLE, expose={"port": 8080, "network": "public", "paths": ["/", "/x"]},
                                replicas=1))))
    ready(bed, ns)
    ok(tenant.apply(cr(ns, edit(SIMPLE, expose=None))))  # expose removed: a gated change (public reach)
    approve(bed, ns, held_plan(bed, ns)["metadata"]["name"])
    ready(bed, ns)
    assert bed.get("v1", "Service", "demo", ns) is None  # its own Service: pruned
    assert bed.get("v1", "Service", "demo-lookalike", ns) is not None  # labelled alike, not its own: kept
    assert bed.get("v1", "Service", "demo-egress-extra", ns) is not None


# --- 3. shared things have owners ----------------------------------------------------------------------------

def public(hostname: str | None = None) -> dict[str, Any]:
    expose = {"port": 8080, "network": "public", **({"hostname": hostname} if hostname else {})}
    return edit(SIMPLE, expose=expose)


def test_another_teams_hostname_gets_hostname_conflict_never_a_route(bed: KubeTestBed, operator: Operator) -> None:
    first, team_a = tenant_namespace(bed, "team-a")
    second, team_b = tenant_namespace(bed, "team-b")
    ok(team_a.apply(cr(first, public("shop.example.com"), name="shop")))
    ready(bed, first, "shop")
    ok(team_b.apply(cr(second, public("shop.example.com"), name="evil")))
    text = refused_with(bed, second, "HostnameConflict", "evil")
    assert f"shop.example.com is held by Application {first}/shop (environment prod)" in text, text
    assert children(bed, second, "evil-prod") == {}  # no HTTPRoute, no Certificate, nothing
    # The default hostname {app}.{env}.{domain} is a hostname like any other: the same app name elsewhere conflicts.
    ok(team_a.apply(cr(first, public(), name="cart")))
    ready(bed, first, "cart")
    ok(team_b.apply(cr(second, public(), name="cart")))
    text = refused_with(bed, second, "HostnameConflict", "cart")
    assert f"cart.prod.apps.example.com is held by Application {first}/cart" in text, text
    ok(team_b.apply(cr(second, public("evil-shop.example.com"), name="evil")))
    ready(bed, second, "evil")  # a hostname nobody holds is granted


def test_a_hostname_outlives_its_application_until_its_baseline_is_forgotten(bed: KubeTestBed,
                                                                            operator: Operator) -> None:
    first, team_a = tenant_namespace(bed, "holder")
    second, team_b = tenant_namespace(bed, "asker")
    held = ok(team_a.apply(cr(first, public("kept.example.com"))))
    ready(bed, first)
    ok(team_a.delete())
    gc_deletes_children(bed, operator, first, held["metadata"]["uid"])
    ok(team_b.apply(cr(second, public("kept.example.com"))))
    assert f"held by Application {first}/demo" in refused_with(bed, second, "HostnameConflict")
    bed.delete(API, "ApplicationBaseline", record_name(first, "demo", "prod"), operator.records_namespace)
    ready(bed, second)  # the holder is gone and forgotten: the hostname is the next asker's
    record = bed.get(API, "PublicHostname", "kept.example.com", operator.records_namespace)
    assert record is not None and record["spec"]["holder"]["namespace"] == second


def test_a_hostname_given_up_goes_to_the_next_asker(bed: KubeTestBed, operator: Operator) -> None:
    first, team_a = tenant_namespace(bed, "giver")
    second, team_b = tenant_namespace(bed, "taker")
    ok(team_a.apply(cr(first, public("moving.example.com"))))
    ready(bed, first)
    ok(team_b.apply(cr(second, public("moving.example.com"))))
    refused_with(bed, second, "HostnameConflict")
    ok(team_a.apply(cr(first, public("moved.example.com"))))  # AR-RR001: gated, approved
    approve(bed, first, held_plan(bed, first)["metadata"]["name"])
    ready(bed, first)
    ready(bed, second)
    route = bed.get("gateway.networking.k8s.io/v1", "HTTPRoute", "demo", second)
    assert route is not None and route["spec"]["hostnames"] == ["moving.example.com"]


def hostname_policy(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "HostnamePolicy", "metadata": {"name": name}, "spec": spec}


@pytest.mark.parametrize(("host", "said"), [
    ("argocd.apps.example.com", "argocd.apps.example.com is the platform's own (argocd.apps.example.com)"),
    ("login.grafana.apps.example.com", "is the platform's own (grafana.apps.example.com)"),
    ("apps.example.com", "apps.example.com is the platform's own"),
    ("shop.elsewhere.test", "no HostnamePolicy lets namespace"),
    ("cart.prod.apps.example.com", "is the default name of app cart in environment prod, kept for the namespace"),
    ("demo.staging.apps.example.com", "is the default name of app demo in environment staging"),
])
def test_a_hostname_its_namespace_may_not_use_gets_hostname_not_allowed(bed: KubeTestBed, operator: Operator,
                                                                       host: str, said: str) -> None:
    """The platform's names, names no HostnamePolicy grants the namespace (the test bed's grants example.com), and
    another app's (or environment's) default name: refused before any record is taken, nothing applied."""
    ns, tenant = tenant_namespace(bed, "squat")
    ok(tenant.apply(cr(ns, public(host))))
    text = refused_with(bed, ns, "HostnameNotAllowed")
    assert said in text, text
    assert children(bed, ns) == {}
    assert bed.get(API, "PublicHostname", host, operator.records_namespace) is None


def test_an_app_name_a_policy_gives_a_namespace_is_its_default_hostname(bed: KubeTestBed, operator: Operator) -> None:
    owner_ns, owner = tenant_namespace(bed, "owner")
    other_ns, other = tenant_namespace(bed, "other")
    bed.apply(hostname_policy("owners-of-cart", namespaces=[owner_ns], apps={"allowed": ["cart"]}))
    try:
        ok(other.apply(cr(other_ns, public(), name="cart")))  # the squatter comes first: it gets nothing
        text = refused_with(bed, other_ns, "HostnameNotAllowed", "cart")
        assert "gives the app name cart to other namespaces" in text, text
        ok(owner.apply(cr(owner_ns, public(), name="cart")))
        ready(bed, owner_ns, "cart")
        route = bed.get("gateway.networking.k8s.io/v1", "HTTPRoute", "cart", owner_ns)
        assert route is not None and route["spec"]["hostnames"] == ["cart.prod.apps.example.com"]
    finally:
        bed.delete(API, "HostnamePolicy", "owners-of-cart")


def test_a_hostname_a_route_not_ours_serves_is_held(bed: KubeTestBed, operator: Operator) -> None:
    """The platform's own route (Argo CD's UI, say) or anyone's: an Application asking for its hostname gets
    HostnameConflict naming it, and the hostname once the route is gone."""
    ns, tenant = tenant_namespace(bed, "route")
    bed.ensure_namespace("platform-ui")
    route = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
             "metadata": {"name": "dashboard", "namespace": "platform-ui"},
             "spec": {"parentRefs": [{"name": "public", "namespace": "apprafter-gateway"}],
                      "hostnames": ["dashboard.example.com"]}}
    bed.apply(route, "platform-ui")
    try:
        ok(tenant.apply(cr(ns, public("dashboard.example.com"))))
        text = refused_with(bed, ns, "HostnameConflict")
        assert "dashboard.example.com is held by HTTPRoute platform-ui/dashboard" in text, text
        assert children(bed, ns) == {}
    finally:
        bed.delete("gateway.networking.k8s.io/v1", "HTTPRoute", "dashboard", "platform-ui")
    ready(bed, ns)


def test_names_and_environments_that_concatenate_alike_do_not_share_an_instance(bed: KubeTestBed,
                                                                               operator: Operator) -> None:
    ns, tenant = tenant_namespace(bed, "instance")
    ok(tenant.apply(cr(ns, edit(SIMPLE, expose={"port": 8080}), name="a-b", env="c")))
    ready(bed, ns, "a-b")
    ok(tenant.apply(cr(ns, edit(SIMPLE, expose={"port": 8080}), name="a", env="b-c")))
    text = refused_with(bed, ns, "NameConflict", "a")
    assert "instance name a-b-c (the app.kubernetes.io/instance label and the TLS Secret a-b-c-tls) is already " \
           "Application a-b's (environment c)" in text, text
    assert bed.get("apps/v1", "Deployment", "a", ns) is None


# --- 3. Secrets the author could not name ---------------------------------------------------------------------

def test_a_pod_reads_only_secrets_granted_to_its_app(bed: KubeTestBed, operator: Operator) -> None:
    ns, tenant = tenant_namespace(bed, "secrets")
    grant_secret(bed, ns, "db-admin", "billing")  # the namespace's, granted to another app
    spec = edit(SIMPLE, env={"LOG_LEVEL": "info", "ADMIN": {"secret": "db-admin/password"},
                             "NOPE": {"secret": "nowhere/key"}})
    ok(tenant.apply(cr(ns, spec)))
    text = refused_with(bed, ns, "SecretNotGranted")
    assert "db-admin, nowhere (not found)" in text, text
    assert "kubectl annotate secret NAME -n" in text and "apprafter.io/applications=demo" in text
    assert bed.get("apps/v1", "Deployment", "demo", ns) is None
    grant_secret(bed, ns, "db-admin", "billing, demo")
    grant_secret(bed, ns, "nowhere", "demo")
    ready(bed, ns)


def test_a_claims_connection_secret_needs_no_grant_but_another_apps_does(bed: KubeTestBed,
                                                                        operator: Operator) -> None:
    ns, tenant = tenant_namespace(bed, "claims")
    own = edit(SIMPLE, needs={"pg": {}}, env={"PW": {"secret": "demo-pg-conn/password"}})
    ok(tenant.apply(cr(ns, own)))
    claims_when_created(bed, ns, ["demo-pg"])
    ready(bed, ns)
    other = edit(own, env={"PW": {"secret": "billing-pg-conn/password"}})
    ok(tenant.apply(cr(ns, other)))
    approve(bed, ns, held_plan(bed, ns)["metadata"]["name"])  # AR-SB003: retargeted, approved ...
    assert "billing-pg-conn (not found)" in refused_with(bed, ns, "SecretNotGranted")  # ... and still not granted


def test_a_secret_named_as_the_claims_but_not_written_by_it_is_never_mounted(bed: KubeTestBed,
                                                                            operator: Operator) -> None:
    """Issue 41: a Secret `demo-pg-conn` someone else wrote (not controlled by the claim) is not the claim's to
    give: the app that names it is refused before anything is applied, and no pod of it reads it."""
    ns, tenant = tenant_namespace(bed, "foreign")
    bed.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "demo-pg-conn", "namespace": ns},
               "data": {"password": "c29tZW9uZSBlbHNlJ3M="}}, field_manager="someone-else")
    ok(tenant.apply(cr(ns, edit(SIMPLE, needs={"pg": {}}, env={"PW": {"secret": "demo-pg-conn/password"}}))))
    said = refused_with(bed, ns, "SecretNotGranted")
    assert "demo-pg-conn (named as this app's claim's connection Secret, but not written by the claim)" in said
    assert bed.get("apps/v1", "Deployment", "demo", ns) is None


# --- 5. the new rule classes, and the schema's bounds ---------------------------------------------------------

@pytest.mark.parametrize(("before", "after", "rule"), [
    (edit(SIMPLE, connects={"egress": {"external": [{"host": "api.example.com", "port": 443}]}}), SIMPLE, "AR-SB009"),
    (edit(SIMPLE, connects={"egress": {"external": [{"host": "api.example.com", "port": 443}]}}),
     edit(SIMPLE, connects={"egress": {"external": [{"host": "api.example.com", "port": 443},
                                                    {"cidr": "0.0.0.0/0", "port": 443}]}}), "AR-SB010"),
    (edit(SIMPLE, confidential=True), SIMPLE, "AR-SB011"),
], ids=["egress-to-world", "egress-widened", "confidential-removed"])
def test_egress_widening_and_confidential_removal_wait_for_a_plan(bed: KubeTestBed, operator: Operator,
                                                                  before: dict[str, Any], after: dict[str, Any],
                                                                  rule: str) -> None:
    ns, tenant = tenant_namespace(bed, "classes")
    ok(tenant.apply(cr(ns, before)))
    ready(bed, ns)
    policy = bed.get("cilium.io/v2", "CiliumNetworkPolicy", "demo-egress", ns)
    ok(tenant.apply(cr(ns, after)))
    plan = held_plan(bed, ns)
    assert rule in {c["rule"] for c in plan["spec"]["changes"]}
    assert plan["spec"]["risks"]["classification"] == "security-boundary"
    assert bed.get("cilium.io/v2", "CiliumNetworkPolicy", "demo-egress", ns) == policy  # nothing widened yet


@pytest.mark.parametrize(("field", "value", "said"), [
    (("replicas",), 2147483647, "spec.base.replicas: Invalid value: 2147483647: spec.base.replicas in body should "
                                "be less than or equal to 1000"),
    (("autoscale",), {"on": "cpu", "min": 1, "max": 5000}, "should be less than or equal to 1000"),
    (("autoscale",), {"on": "cpu", "min": 1, "max": 2, "target": 1e9}, "should be less than or equal to 100000"),
    (("resources",), {"limits": {"memory": "99999999999999Gi"}}, "spec.base.resources.limits.memory"),
    (("expose", "port"), 70000, "should be less than or equal to 65535"),
], ids=["replicas", "autoscale-max", "scale-target", "quantity", "port"])
def test_the_schemas_bounds_hold_at_the_api_server(bed: KubeTestBed, field: tuple[str, ...], value: Any,
                                                   said: str) -> None:
    ns, tenant = tenant_namespace(bed, "bounds")
    obj = cr(ns, SIMPLE)
    node = obj["spec"]["base"]
    for key in field[:-1]:
        node = node[key]
    node[field[-1]] = value
    resp = tenant.apply(obj)
    assert resp.status_code == 422, resp.text
    assert said in resp.json()["message"], resp.json()["message"]
    assert bed.get(API, "Application", "demo", ns) is None


def test_the_renderer_keeps_names_apart_across_apps_and_environments() -> None:
    """Every name a render writes (kind, name) or points at (Secrets) is unique in a namespace once the instance
    names (`<app>-<env>`) are: two apps of one namespace never write or share one object."""
    from compatibility.inputs import parse_cr
    from renderer.render import render_loaded

    apps = [("a", "b-c"), ("a-b", "d"), ("a-b-c", "prod"), ("shop", "prod"), ("shop-pg", "prod"), ("shop-egress", "x")]
    seen: dict[tuple[str, str], str] = {}
    full = edit(BASE, needs={"pg": {}, "redis": {}, "disk": {}}, autoscale={"on": "cpu", "min": 1, "max": 3})
    for app, env in apps:
        obj = cr("team", full, name=app, env=env)
        loaded = parse_cr(json.dumps(obj), "cr.json", strict_json=True)
        for child in render_loaded(loaded, env, "manifests", "team").objects:
            names = [(child["kind"], child["metadata"]["name"])]
            if child["kind"] == "Certificate":
                names.append(("Secret", child["spec"]["secretName"]))
            for key in names:
                assert seen.setdefault(key, app) == app, f"{key} is written by {seen[key]} and {app}"
        for need in ("pg", "redis"):
            key = ("Secret", f"{app}-{need}-conn")
            assert seen.setdefault(key, app) == app, f"{key} is read by {seen[key]} and {app}"


def test_each_public_tls_hostname_gets_a_listener_of_its_own_serving_its_certificate(bed: KubeTestBed,
                                                                                     operator: Operator) -> None:
    """The operator adds to the public Gateway one HTTPS listener per held hostname once its certificate was issued,
    with that app's certificate Secret and routes from that app's namespace alone; the chart's listeners stay as
    Argo CD applied them; a hostname's listener goes with its app's route."""
    chart = chart_gateway(bed)
    try:
        listeners_for_their_hostnames(bed, operator, chart)
    finally:  # the bed's other operators (other records, so no listeners) must not meet this Gateway
        bed.delete(GATEWAY_API, "Gateway", "public", "apprafter-gateway")


def test_a_full_gateway_leaves_the_newest_hostname_without_a_listener_and_its_app_says_so(
        bed: KubeTestBed, operator: Operator) -> None:
    """Issue 41: once the Gateway's 64 listeners are taken, the next app got none and still read Ready (only the
    operator's log said "gateway full"); now it says Ready=False ListenerUnavailable, and gets its listener once
    there is room."""
    chart_gateway(bed, others=MAX_LISTENERS - 3)  # room for one hostname's listener
    try:
        first, team_a = tenant_namespace(bed, "full-a")
        second, team_b = tenant_namespace(bed, "full-b")
        ok(team_a.apply(cr(first, public("first.example.com"), name="shop")))
        ready(bed, first, "shop")
        certificate_issued(bed, "shop", first)
        wait("the first hostname's listener", lambda: "first.example.com" in listeners_of(bed) or None)
        ok(team_b.apply(cr(second, public("second.example.com"), name="cart")))
        # no Gateway has room for it: its app says so once its route names its listener (where it would be placed),
        # with or without its certificate
        wait("the second app's Certificate", lambda: bed.get("cert-manager.io/v1", "Certificate", "cart", second))
        certificate_issued(bed, "cart", second)
        said = refused_with(bed, second, "ListenerUnavailable", "cart")
        assert said.startswith("hostname second.example.com has no listener: every public Gateway is full"), said
        assert "second.example.com" not in listeners_of(bed) and len(listeners_of(bed)) == MAX_LISTENERS
        assert (application(bed, second, "cart").get("status") or {}).get("phase") == "Failed"
        # room again: the first app goes, the second gets its listener and is Ready
        uid = (bed.get(API, "Application", "shop", first) or {})["metadata"]["uid"]
        ok(team_a.delete("shop"))
        gc_deletes_children(bed, operator, first, uid, "shop")
        wait("the second hostname's listener", lambda: "second.example.com" in listeners_of(bed) or None)
        ready(bed, second, "cart")
    finally:  # the bed's other operators (other records, so no listeners) must not meet this Gateway
        bed.delete(GATEWAY_API, "Gateway", "public", "apprafter-gateway")


def listeners_for_their_hostnames(bed: KubeTestBed, operator: Operator, chart: dict[str, Any]) -> None:
    first, team_a = tenant_namespace(bed, "listen-a")
    second, team_b = tenant_namespace(bed, "listen-b")
    ok(team_a.apply(cr(first, public("listen.example.com"), name="shop")))
    ok(team_b.apply(cr(second, public(), name="cart")))
    ready(bed, first, "shop")
    ready(bed, second, "cart")
    default = "cart.prod.apps.example.com"
    # No listener names a Secret before cert-manager wrote it (Traefik would refuse the whole shared Gateway).
    assert set(listeners_of(bed)) == {"https", "http"}
    certificate_issued(bed, "shop", first)
    certificate_issued(bed, "cart", second)
    wait("both hostnames' listeners", lambda: {"listen.example.com", default} <= set(listeners_of(bed)) or None)
    live = listeners_of(bed)
    for host, ns, app in (("listen.example.com", first, "shop"), (default, second, "cart")):
        assert live[host]["hostname"] == host and (live[host]["port"], live[host]["protocol"]) == (443, "HTTPS")
        assert live[host]["tls"]["certificateRefs"] == [{"group": "", "kind": "Secret", "name": f"{app}-prod-tls",
                                                        "namespace": ns}]
        assert live[host]["allowedRoutes"]["namespaces"] == {
            "from": "Selector", "selector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}
        route = bed.get(GATEWAY_API, "HTTPRoute", app, ns)
        assert route is not None and route["spec"]["parentRefs"][0]["sectionName"] == host
        grant = bed.get("gateway.networking.k8s.io/v1beta1", "ReferenceGrant", f"{app}-gateway-tls", ns)
        assert grant is not None and grant["spec"]["to"] == [{"group": "", "kind": "Secret", "name": f"{app}-prod-tls"}]
    for original in chart["spec"]["listeners"]:  # Argo CD's, as it applied them
        assert {k: live[original["name"]][k] for k in original} == original
    # A hand-made route in the other namespace naming the first app's listener adds nothing (and the listener
    # takes routes from the first namespace alone).
    squat = {"apiVersion": GATEWAY_API, "kind": "HTTPRoute", "metadata": {"name": "shop", "namespace": second},
             "spec": {"hostnames": ["listen.example.com"], "parentRefs": [
                 {"name": "public", "namespace": "apprafter-gateway", "sectionName": "listen.example.com"}]}}
    bed.apply(squat, second, field_manager="tenant")
    assert set(listeners_of(bed)) == {"https", "http", "listen.example.com", default}
    bed.delete(GATEWAY_API, "HTTPRoute", "shop", second)
    # The app goes: its route goes with it (the garbage collector), and so does its listener.
    uid = (bed.get(API, "Application", "shop", first) or {})["metadata"]["uid"]
    ok(team_a.delete("shop"))
    gc_deletes_children(bed, operator, first, uid, "shop")
    wait("the listener of the app that went", lambda: "listen.example.com" not in listeners_of(bed) or None)
    assert set(listeners_of(bed)) == {"https", "http", default}
