"""deploy/admission: what the issue asks of each object, and every object passes a server-side dry run."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.admission.cluster import DEPLOY
from tests.renderer.helpers import run_cli
from tests.testbed.kube import KubeTestBed


def objects() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == sorted(p.name for p in DEPLOY.glob("*.yaml")
                                                        if p.name != "kustomization.yaml")
    return [d for name in kustomization["resources"] for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


def by_kind(kind: str) -> list[dict[str, Any]]:
    return [o for o in objects() if o["kind"] == kind]


def test_the_deployment_runs_two_locked_down_replicas_of_apprafter_webhook() -> None:
    [deployment] = by_kind("Deployment")
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert deployment["spec"]["replicas"] == 2
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["automountServiceAccountToken"] is False
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["command"] == ["apprafter", "webhook"]
    help_text = run_cli("webhook", "--help").stdout
    for arg in container["args"]:
        assert arg.split("=")[0] in help_text
    assert "memory" in container["resources"]["limits"]
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert mounts == {"/etc/apprafter/tls", "/tmp"}
    [service] = by_kind("Service")
    ports = {p["name"] for p in container["ports"]}
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= ports
    assert by_kind("PodDisruptionBudget")[0]["spec"]["minAvailable"] == 1


def test_the_webhook_configurations_fail_closed_with_cert_managers_ca() -> None:
    [certificate] = [c for c in by_kind("Certificate") if not c["spec"].get("isCA")]
    [deployment], [service] = by_kind("Deployment"), by_kind("Service")
    tls_volume = next(v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == "tls")
    assert tls_volume["secret"]["secretName"] == certificate["spec"]["secretName"]
    assert f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc" in certificate["spec"]["dnsNames"]
    configs = by_kind("ValidatingWebhookConfiguration") + by_kind("MutatingWebhookConfiguration")
    assert len(configs) == 2
    resources: set[str] = set()
    for config in configs:
        assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == \
            f"{certificate['metadata']['namespace']}/{certificate['metadata']['name']}"
        for hook in config["webhooks"]:
            assert (hook["failurePolicy"], hook["sideEffects"], hook["timeoutSeconds"], hook["matchPolicy"]) == \
                ("Fail", "None", 5, "Equivalent")
            assert hook["clientConfig"]["service"]["name"] == service["metadata"]["name"]
            resources |= {r for rule in hook["rules"] for r in rule["resources"]}
    assert resources == {"applications", "applications/status", "migrationplans", "migrationplans/status",
                         "platformstacks", "platformstacks/status"}


@pytest.mark.testbed
def test_every_object_passes_a_server_side_dry_run(kube: KubeTestBed) -> None:
    stored = kube.dry_run_apply(objects(), namespace="apprafter-system")
    assert [o["kind"] for o in stored] == [o["kind"] for o in objects()]
    webhooks = [o for o in stored if o["kind"].endswith("WebhookConfiguration")]
    assert all(h["failurePolicy"] == "Fail" for o in webhooks for h in o["webhooks"])
