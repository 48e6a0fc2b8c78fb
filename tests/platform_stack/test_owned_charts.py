"""Every chart the platform stack names exists and does what the stack relies on. The charts this project owns
(deploy/charts) are pushed to the loopback registry, resolved there as each Application of the umbrella names them
and rendered by the real helm with exactly the values the umbrella passes: the Gateways' listeners and
certificates are what the renderer's HTTPRoutes attach to, the default-deny policy selects every pod of an app
namespace, every pod has requests and limits. Third-party charts cannot be fetched here: their pins and values
are checked instead (docs/platform-stack.md "Charts")."""

from __future__ import annotations

import fnmatch
import json
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from lifecycle.listeners import gateway_names
from platform_stack.governance import REQUIRED
from platform_stack.source import evaluate
from reconciler.gateway_listeners import DEFAULT_GATEWAYS
from renderer.context import (
    CLUSTER_ISSUER,
    DEFAULTS,
    GATEWAY_NAMESPACE,
    GATEWAYS,
    HTTP_LISTENER,
    LISTENERS_FIELD_MANAGER,
)
from renderer.manifests.meta import Target
from renderer.manifests.network import default_hostname, egress_policy, http_route
from scripts.package_chart import package
from tests.charts.chart import KUBE_VERSION, VERSION
from tests.platform_stack.conftest import ALL_TIERS, applications, cli, helm, helm_template, ok
from tests.platform_stack.shipped import render
from tests.renderer.helpers import REPO
from tests.testbed.kube import KubeTestBed
from toolchain.pins import pins

OURS = "ghcr.io/apprafter/charts"  # where the umbrella's Applications find this project's charts
CHARTS = REPO / "deploy" / "charts"
DOMAIN = "apps.example.com"
APP_NAMESPACE = "team-a"
POD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "Pod", "ReplicaSet"}


def umbrella(stack: Path, tier: str, *args: str) -> dict[str, dict[str, Any]]:
    """The umbrella's Applications on `tier` for the platform domain DOMAIN."""
    return applications(helm_template(stack, "--set", f"tier={tier}", "--set", f"domain={DOMAIN}", *args))


def at(values: Any, path: list[str | int]) -> Any:
    for key in path:
        values = values[key]
    return values


def pod_specs(objects: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(kind/name, pod spec) of every object that runs pods."""
    out = []
    for obj in objects:
        if obj["kind"] not in POD_KINDS:
            continue
        spec = obj["spec"]
        template = spec.get("jobTemplate", {}).get("spec", spec).get("template", {"spec": spec})
        out.append((f"{obj['kind']}/{obj['metadata']['name']}", template["spec"]))
    return out


def owned() -> list[str]:
    """The charts the stack names from this project's registry, which must each be a directory of deploy/charts."""
    sources = {c["source"]["chart"] for c in evaluate()["values"]["components"].values()
               if c["source"]["repoURL"] == OURS}
    return sorted(sources)


def test_every_chart_of_this_project_the_stack_names_is_built_here_at_the_package_version() -> None:
    names = owned()
    assert names == sorted(p.name for p in CHARTS.iterdir() if (p / "Chart.yaml").is_file())
    version = VERSION
    components = evaluate()["values"]["components"].values()
    for component in components:
        if component["source"]["repoURL"] == OURS:
            chart = yaml.safe_load((CHARTS / component["source"]["chart"] / "Chart.yaml").read_text())
            assert (component["source"]["targetRevision"], chart["version"], chart["appVersion"]) == (
                version, version, version)


@pytest.mark.parametrize("tier", ALL_TIERS)
def test_every_component_of_every_tier_has_requests_and_limits(stack_all: Path, tier: str) -> None:
    """Spec §4.5: each container a component declares gets a CPU and memory request and a memory limit, through
    the values the umbrella passes on this tier (opt-in components switched on: a user may)."""
    evaluated = evaluate()
    components = evaluated["values"]["components"]
    opt_in = [name for name, c in components.items() if c["tiers"][tier]["availability"] == "opt-in"]
    apps = umbrella(stack_all, tier, *(arg for name in opt_in for arg in ("--set", f"overrides.{name}.enabled=true")))
    on_tier = {name for name, c in components.items() if c["tiers"][tier]["availability"] != "unavailable"}
    assert set(apps) == on_tier
    for name, app in apps.items():
        values = app["spec"]["source"]["helm"]["valuesObject"]
        paths = evaluated["resourcePaths"][name]
        assert paths or app["spec"]["source"]["repoURL"] == OURS, f"{name}: a third-party chart runs pods"
        for path in paths:
            resources = at(values, path)
            for field in REQUIRED:
                assert isinstance(at(resources, list(field)), str), (name, path, field)
            assert "cpu" not in resources.get("limits", {}), (name, path)  # Burstable: no CPU limit (ADR 0053)


def test_a_component_without_requests_is_refused_by_stack_build(source_copy: Path, tmp_path: Path) -> None:
    cue = source_copy / "components" / "sealed-secrets.cue"
    text = cue.read_text()
    cue.write_text(text.replace('limits: memory: "256Mi"', "limits: {}"))
    proc = cli("stack", "build", "--source", str(source_copy), "--out", str(tmp_path))
    assert proc.returncode == 1 and proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert lines and all(line.startswith(f"{cue}:1:1: components.sealed-secrets.tiers.") for line in lines), lines
    assert {line.rsplit(": ", 1)[1] for line in lines} == {"no limits.memory"}
    assert len(lines) == len(ALL_TIERS)  # one line per tier it runs on


def test_argocd_component_runs_the_pinned_argo_cd() -> None:
    argocd = evaluate()["values"]["components"]["argocd"]
    assert argocd["source"] == {"repoURL": "https://argoproj.github.io/argo-helm", "chart": "argo-cd",
                                "targetRevision": "10.1.1"}
    assert argocd["values"]["global"]["image"]["tag"] == pins()["ARGOCD_VERSION"]
    # argo-helm's keys the stack sets (read against the chart's values.yaml at 10.1.1; docs/platform-stack.md).
    for key in ("crds", "configs", "controller", "server", "repoServer", "redis", "redis-ha", "dex"):
        assert key in argocd["values"]


def test_the_gateway_chart_ships_the_pinned_gateway_api_crds() -> None:
    from toolchain.tools import crds_dir

    pinned = crds_dir() / f"gateway-api-{pins()['GATEWAY_API_VERSION']}"
    shipped = sorted((CHARTS / "apprafter-gateway" / "crds").glob("*.yaml"))
    assert [p.name for p in shipped] == sorted(p.name for p in pinned.glob("*.yaml"))
    for path in shipped:
        assert path.read_bytes() == (pinned / path.name).read_bytes(), (
            f"{path} is not the pinned module's: cp {pinned}/*.yaml {path.parent}/")


# ---- the charts resolved in the loopback registry, rendered with the umbrella's values --------------------


def published(registry: Any, tmp_path: Path) -> str:
    """Every chart of deploy/charts packaged as `make publish` does and pushed; the registry path that stands for
    ghcr.io/apprafter/charts."""
    where = f"{registry.url}/apprafter-{uuid.uuid4().hex[:8]}/charts"
    for chart in sorted(CHARTS.iterdir()):
        tgz = package(chart, tmp_path / "packaged")
        ok(cli("stack", "push", str(tgz), "--to", f"oci://{where}", "--plain-http"))
    return where


def resolve_and_render(app: dict[str, Any], where: str, tmp_path: Path) -> list[dict[str, Any]]:
    """What Argo CD does with one Application of ours: pull chart@targetRevision from the registry, then template
    it with the Application's values, release name, namespace and CRD choice."""
    source = app["spec"]["source"]
    assert source["repoURL"] == OURS
    into = tmp_path / app["metadata"]["name"]
    into.mkdir()
    pulled = helm("pull", f"oci://{where}/{source['chart']}", "--version", source["targetRevision"], "--plain-http",
                  "-d", str(into))
    ok(pulled)
    [tgz] = into.glob("*.tgz")
    values = into / "values.json"
    values.write_text(json.dumps(source["helm"].get("valuesObject", {})))
    crds = [] if source["helm"].get("skipCrds") else ["--include-crds"]
    out = ok(helm("template", source["helm"]["releaseName"], str(tgz), "--namespace",
                  app["spec"]["destination"]["namespace"], "--kube-version", KUBE_VERSION, "-f", str(values), *crds))
    return [d for d in yaml.safe_load_all(out) if d]


def routes() -> list[dict[str, Any]]:
    """The renderer's HTTPRoutes for a public app, with TLS and without."""
    target = Target("web", "prod", APP_NAMESPACE, DEFAULTS._replace(domain=DOMAIN))
    return [http_route(target, {"expose": {"port": 8080, "network": "public", "tls": tls}}, [])
            for tls in (True, False)]


def check_gateway(objects: list[dict[str, Any]], namespace: str, app: dict[str, Any]) -> None:
    """The stack's gateway on an ACME tier without a DNS provider: the Gateways with their http listeners, the public
    issuer solving HTTP-01 through the public one, no wildcard listener (HTTP-01 cannot prove one) and the apps'
    TLS routes naming the listener of their own hostname, which the operator adds and Argo CD leaves alone."""
    gateways = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Gateway"}
    assert set(gateways) == set(GATEWAYS.values())
    assert namespace == GATEWAY_NAMESPACE
    for route in routes():
        [hostname] = route["spec"]["hostnames"]
        assert hostname == default_hostname("web", "prod", DOMAIN)
        for parent in route["spec"]["parentRefs"]:
            gateway = gateways[parent["name"]]
            assert gateway["metadata"]["namespace"] == parent["namespace"]
            if parent["sectionName"] == HTTP_LISTENER:
                [listener] = [lst for lst in gateway["spec"]["listeners"] if lst["name"] == HTTP_LISTENER]
                assert listener["protocol"] == "HTTP"
                assert listener["allowedRoutes"]["namespaces"]["from"] == "All"  # the route is in the app's namespace
            else:  # the operator's listener of the hostname (lifecycle.listeners), not the chart's
                assert parent["sectionName"] == hostname
                assert hostname not in {lst["name"] for lst in gateway["spec"]["listeners"]}
    for gateway in gateways.values():
        assert [lst["protocol"] for lst in gateway["spec"]["listeners"]] == ["HTTP"]
    assert not [o for o in objects if o["kind"] == "Certificate"]
    [issuer] = [o for o in objects if o["kind"] == "ClusterIssuer"]
    assert issuer["metadata"]["name"] == CLUSTER_ISSUER
    [solver] = issuer["spec"]["acme"]["solvers"]
    # HTTP-01 through the public Gateway's http listener, and each Gateway the operator may place hostnames on past
    # it (lifecycle.listeners.gateway_names: a hostname's challenge comes where its DNS points)
    parents = solver["http01"]["gatewayHTTPRoute"]["parentRefs"]
    public = gateways[GATEWAYS["public"]]
    assert [(p["name"], p["namespace"], p["sectionName"]) for p in parents] == [
        (name, public["metadata"]["namespace"], HTTP_LISTENER)
        for name in gateway_names(public["metadata"]["name"], DEFAULT_GATEWAYS)]
    assert app["spec"]["ignoreDifferences"] == [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                                 "managedFieldsManagers": [LISTENERS_FIELD_MANAGER]}]
    assert {"ServerSideApply=true", "RespectIgnoreDifferences=true"} <= set(app["spec"]["syncPolicy"]["syncOptions"])
    assert not [o for o in objects if o["kind"] == "CustomResourceDefinition"]  # the gateway-api component's


def check_gateway_api(objects: list[dict[str, Any]], wave: int) -> None:
    """The Gateway API CRDs alone, in a sync wave before Cilium's (its operator looks for them when it starts)."""
    kinds = {o["kind"] for o in objects}
    assert kinds == {"CustomResourceDefinition"}
    names = {o["metadata"]["name"] for o in objects}
    assert {"gatewayclasses.gateway.networking.k8s.io", "gateways.gateway.networking.k8s.io",
            "httproutes.gateway.networking.k8s.io", "referencegrants.gateway.networking.k8s.io"} <= names
    assert wave < evaluate()["values"]["components"]["cilium"]["syncWave"]


def check_network_policies(objects: list[dict[str, Any]]) -> None:
    policies = {o["metadata"]["name"]: o for o in objects if o["kind"] == "CiliumClusterwideNetworkPolicy"}
    assert set(policies) == {"apprafter-default-deny", "apprafter-acme-http01-solvers"} and len(objects) == 2
    # cert-manager's HTTP-01 solvers in app namespaces take the challenge from the Gateway's data plane alone.
    solvers = policies["apprafter-acme-http01-solvers"]["spec"]
    assert solvers["endpointSelector"] == {"matchLabels": {"acme.cert-manager.io/http01-solver": "true"}}
    sources = [rule.get("fromEntities") or rule["fromEndpoints"] for rule in solvers["ingress"]]
    assert "egress" not in solvers and sources == [
        ["ingress"], [{"matchLabels": {"k8s:io.kubernetes.pod.namespace": GATEWAY_NAMESPACE}}]]
    assert {port["port"] for rule in solvers["ingress"] for ports in rule["toPorts"] for port in ports["ports"]} == {
        "8089"}
    policy = policies["apprafter-default-deny"]
    spec = policy["spec"]
    [expression] = spec["endpointSelector"]["matchExpressions"]
    assert "matchLabels" not in spec["endpointSelector"]  # every pod of a selected namespace, whatever its labels
    assert (expression["key"], expression["operator"]) == ("k8s:io.kubernetes.pod.namespace", "NotIn")
    assert APP_NAMESPACE not in expression["values"]
    platform = {c["namespace"] for c in evaluate()["values"]["components"].values()}
    assert platform | {ns for _, ns in DEFAULTS.provider_namespaces} | {"kube-system"} <= set(expression["values"])
    assert spec["enableDefaultDeny"] == {"ingress": True, "egress": True}
    assert "ingressDeny" not in spec and "egressDeny" not in spec  # nothing that would override the apps' allows
    assert "ingress" not in spec
    target = Target("web", "prod", APP_NAMESPACE, DEFAULTS)
    dns_rule = egress_policy(target, {})["spec"]["egress"][0]  # the renderer's own DNS rule for every app
    assert spec["egress"] == [dns_rule]


def check_pods_have_resources(name: str, objects: list[dict[str, Any]]) -> None:
    for where, pod in pod_specs(objects):
        for container in pod.get("initContainers", []) + pod["containers"]:
            resources = container.get("resources", {})
            for field in REQUIRED:
                assert isinstance(at(resources, list(field)), str), (name, where, container["name"], field)


@pytest.mark.testbed
@pytest.mark.parametrize("tier", ["solo", "production"])
def test_each_chart_of_ours_resolves_in_the_registry_and_renders_what_the_stack_relies_on(
        stack_all: Path, oci_registry: Any, kube: KubeTestBed, tmp_path: Path, tier: str) -> None:
    where = published(oci_registry, tmp_path)
    apps = {name: app for name, app in umbrella(stack_all, tier).items() if app["spec"]["source"]["repoURL"] == OURS}
    assert {app["spec"]["source"]["chart"] for app in apps.values()} == set(owned())
    assert set(apps) == {"apprafter-operator", "apprafter-admission", "gateway-api", "gateway", "network-policies",
                         "service-providers"}
    rendered = {name: resolve_and_render(app, where, tmp_path) for name, app in apps.items()}
    for name, objects in rendered.items():
        check_pods_have_resources(name, objects)
        if not evaluate()["resourcePaths"][name]:
            assert not pod_specs(objects), f"{name} declares no containers but runs pods"
    check_gateway(rendered["gateway"], apps["gateway"]["spec"]["destination"]["namespace"], apps["gateway"])
    check_gateway_api(rendered["gateway-api"],
                      int(apps["gateway-api"]["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"]))
    check_network_policies(rendered["network-policies"])
    # The chart as pulled from the registry renders what the chart directory does (tests/platform_stack/
    # test_service_providers.py holds those to the webhook's rule, the binder and the docs).
    assert rendered["service-providers"] == render(apps["service-providers"], tmp_path)
    # The API server (the pinned Gateway API, cert-manager and Cilium CRDs) takes them as Argo CD would apply them.
    for name in ("gateway", "network-policies"):
        objects = [o for o in rendered[name] if o["kind"] != "CustomResourceDefinition"]
        namespace = apps[name]["spec"]["destination"]["namespace"]
        kube.ensure_namespace(namespace)
        accepted = kube.dry_run_apply(objects, namespace=namespace)
        assert [o["kind"] for o in accepted] == [o["kind"] for o in objects]


def gateway_chart(*sets: str) -> list[dict[str, Any]]:
    flags = [arg for value in (f"domain={DOMAIN}", *sets) for arg in ("--set", value)]
    out = ok(helm("template", "gateway", str(CHARTS / "apprafter-gateway"), "--namespace", GATEWAY_NAMESPACE,
                  "--kube-version", KUBE_VERSION, *flags))
    return [d for d in yaml.safe_load_all(out) if d]


def test_the_listeners_wildcard_certificates_come_only_from_an_issuer_that_can_sign_them() -> None:
    """A CA of the cluster's own (dev), ACME with a DNS-01 solver, or the administrator's issuer: the Gateways serve
    their networks' wildcards on `https`; ACME with HTTP-01 alone proves one hostname at a time, so no wildcard."""
    dns01 = ("issuer.acme.dns01.cloudflare.apiTokenSecretRef.name=cloudflare",
             "issuer.acme.dns01.cloudflare.apiTokenSecretRef.key=token", "issuer.acme.email=ops@example.com")
    for sets, issuers in ((("issuer.type=selfSigned",), [f"{CLUSTER_ISSUER}-root", CLUSTER_ISSUER]),
                          (dns01, [CLUSTER_ISSUER]), (("issuer.type=none",), [])):
        objects = gateway_chart(*sets)
        assert [o["metadata"]["name"] for o in objects if o["kind"] == "ClusterIssuer"] == issuers, sets
        certificates = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Certificate"}
        for gateway in (o for o in objects if o["kind"] == "Gateway"):
            [https] = [lst for lst in gateway["spec"]["listeners"] if lst["protocol"] == "HTTPS"]
            [ref] = https["tls"]["certificateRefs"]
            certificate = certificates[ref["name"]]
            assert certificate["spec"]["issuerRef"]["name"] == CLUSTER_ISSUER
            if gateway["metadata"]["name"] == GATEWAYS["public"]:  # every app's default hostname is covered
                host = default_hostname("web", "prod", DOMAIN)
                assert any(fnmatch.fnmatchcase(host, name) and name.count(".") == host.count(".")
                           for name in certificate["spec"]["dnsNames"])
    [ca] = [o for o in gateway_chart("issuer.type=selfSigned") if o["kind"] == "Certificate" and o["spec"].get("isCA")]
    assert ca["metadata"]["namespace"] == "cert-manager"  # a CA ClusterIssuer reads its Secret there
    [issuer] = [o for o in gateway_chart(*dns01) if o["kind"] == "ClusterIssuer"]
    acme = issuer["spec"]["acme"]
    assert acme["email"] == "ops@example.com"
    assert [list(solver) for solver in acme["solvers"]] == [["selector", "dns01"], ["http01"]]
    assert acme["solvers"][0]["selector"] == {"dnsZones": [DOMAIN]}  # the domain's names; other hostnames: HTTP-01


def test_the_gateway_chart_refuses_to_render_without_the_platform_domain(tmp_path: Path) -> None:
    shutil.copytree(CHARTS / "apprafter-gateway", tmp_path / "chart")
    proc = helm("template", "gateway", str(tmp_path / "chart"), "--kube-version", KUBE_VERSION)
    assert proc.returncode == 1
    assert "domain: set the platform's base domain (PlatformStack spec.values.domain)" in proc.stderr


def test_the_umbrella_passes_its_domain_to_the_gateway_only(stack_all: Path) -> None:
    apps = umbrella(stack_all, "solo")
    passed = {name for name, app in apps.items() if "domain" in app["spec"]["source"]["helm"].get("valuesObject", {})}
    assert passed == {"gateway"}
    assert apps["gateway"]["spec"]["source"]["helm"]["valuesObject"]["domain"] == DOMAIN
    overridden = applications(helm_template(stack_all, "--set", "tier=solo", "--set", f"domain={DOMAIN}", "--set",
                                            "overrides.gateway.values.domain=other.example.org"))
    assert overridden["gateway"]["spec"]["source"]["helm"]["valuesObject"]["domain"] == "other.example.org"


def test_the_umbrella_gives_the_operator_and_the_webhook_its_tier_and_domain(stack_all: Path,
                                                                             tmp_path: Path) -> None:
    """They render and judge with the platform's domain and tier, as the plugin does: through the operator chart's
    `platform.domain`/`platform.tier`, its flags; an override still wins."""
    apps = umbrella(stack_all, "team")
    given = {name: app["spec"]["source"]["helm"]["valuesObject"].get("platform") for name, app in apps.items()
             if "platform" in app["spec"]["source"]["helm"].get("valuesObject", {})}
    assert given == {"apprafter-operator": {"tier": "team", "domain": DOMAIN},
                     "apprafter-admission": {"tier": "team", "domain": DOMAIN}}
    for name, container in (("apprafter-operator", "operator"), ("apprafter-admission", "webhook")):
        values = tmp_path / f"{name}.json"
        values.write_text(json.dumps(apps[name]["spec"]["source"]["helm"]["valuesObject"]))
        objects = [d for d in yaml.safe_load_all(ok(helm("template", name, str(CHARTS / "apprafter-operator"),
                                                         "--kube-version", KUBE_VERSION, "-f", str(values)))) if d]
        [args] = [c["args"] for o in objects if o["kind"] == "Deployment"
                  for c in o["spec"]["template"]["spec"]["containers"] if c["name"] == container]
        assert f"--domain={DOMAIN}" in args and "--tier=team" in args, args
    no_domain = applications(helm_template(stack_all, "--set", "tier=solo"))
    assert no_domain["apprafter-operator"]["spec"]["source"]["helm"]["valuesObject"]["platform"] == {"tier": "solo"}
    overridden = umbrella(stack_all, "team", "--set", "overrides.apprafter-operator.values.platform.domain=other.org")
    assert overridden["apprafter-operator"]["spec"]["source"]["helm"]["valuesObject"]["platform"] == {
        "tier": "team", "domain": "other.org"}


def test_network_policy_chart_lint_and_gateway_chart_lint_are_clean() -> None:
    for chart, args in (("apprafter-gateway", ["--set", f"domain={DOMAIN}"]), ("apprafter-network-policies", []),
                        ("apprafter-service-providers", [])):
        out = ok(helm("lint", "--strict", str(CHARTS / chart), "--kube-version", KUBE_VERSION, *args))
        assert "1 chart(s) linted, 0 chart(s) failed" in out


@pytest.mark.parametrize("chart", ["apprafter-gateway", "apprafter-network-policies", "apprafter-service-providers"])
def test_every_value_of_our_stack_charts_is_documented_and_checked(chart: str) -> None:
    values = yaml.safe_load((CHARTS / chart / "values.yaml").read_text())
    schema = json.loads((CHARTS / chart / "values.schema.json").read_text())
    readme = (CHARTS / chart / "README.md").read_text()
    assert set(values) == set(schema["properties"]) and set(schema["required"]) <= set(values)
    for key in values:
        assert f"`{key}" in readme, f"{chart}: README.md does not describe {key}"
