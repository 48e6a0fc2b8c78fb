"""Secrets from the repository on the API server, with the real SealedSecrets controller and the operator: a value
sealed with `apprafter secret seal` (the controller's certificate), shipped by the plugin's render of the app, made a
SealedSecret child by the operator, unsealed by the controller into a Secret granted to this app alone, read by its
Deployment's env; and a sealed secret under the name of a Secret someone else wrote is refused by name, with
nothing applied (the controller would not overwrite it either)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.reconciler.helpers import API, ARGO, fresh_namespace, wait, wait_phase
from tests.reconciler.operator_proc import Operator
from tests.reconciler.test_tenant_cluster import refused_with
from tests.renderer.helpers import run_cli, write_app
from tests.testbed.kube import KubeTestBed
from tests.testbed.sealed_secrets import SealedSecrets

pytestmark = pytest.mark.testbed

APP = '''apiVersion: "apprafter.io/v1alpha1"
kind:       "Application"
metadata: name: "demo"
spec: {
	base: {
		image: "ghcr.io/acme/demo:1.0.0"
		env: SESSION_KEY: secret: "session/key"
	}
	environments: prod: {}
}
'''
VALUE = "a-sealed-session-key"


def shipped(repo: Path, sealed_secrets: SealedSecrets, namespace: str) -> dict[str, Any]:
    """The app's repository with the value sealed for `namespace`; the Application CR the plugin renders of it."""
    write_app(repo, APP)
    sealed = run_cli("secret", "seal", "session", "key", "-e", "prod", "-n", namespace, "--cert",
                     sealed_secrets.cert_url, cwd=repo, stdin=VALUE)
    assert sealed.returncode == 0, sealed.stderr
    rendered = run_cli("render", ".", "-e", "prod", "-n", namespace, cwd=repo)
    assert rendered.returncode == 0, rendered.stderr
    cr: dict[str, Any] = yaml.safe_load(rendered.stdout)
    assert list(cr["spec"]["sealedSecrets"]) == ["session"]
    return cr


def test_a_sealed_secret_is_unsealed_for_its_app_and_read_by_its_deployment(
        bed: KubeTestBed, sealed_secrets: SealedSecrets, operator: Operator, tmp_path: Path) -> None:
    ns = fresh_namespace(bed, "sealed")
    app = bed.apply(shipped(tmp_path, sealed_secrets, ns), field_manager=ARGO)  # as Argo CD applies it: no grant
    wait_phase(bed, ns, "Ready")
    child = bed.get("bitnami.com/v1alpha1", "SealedSecret", "session", ns) or {}
    (owner,) = child["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("Application", app["metadata"]["uid"], True)
    secret = wait("the controller's Secret", lambda: bed.get("v1", "Secret", "session", ns))
    assert base64.b64decode(secret["data"]["key"]).decode() == VALUE
    assert secret["metadata"]["annotations"]["apprafter.io/applications"] == "demo"
    deployment = bed.get("apps/v1", "Deployment", "demo", ns)
    assert deployment is not None
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "SESSION_KEY", "valueFrom": {"secretKeyRef": {"name": "session", "key": "key"}}} in container["env"]
    assert VALUE not in operator.log()


def test_a_sealed_secret_never_takes_a_secret_someone_else_wrote(
        bed: KubeTestBed, sealed_secrets: SealedSecrets, operator: Operator, tmp_path: Path) -> None:
    ns = fresh_namespace(bed, "sealedtaken")
    bed.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "session", "namespace": ns},
               "data": {"key": base64.b64encode(b"theirs").decode()}}, field_manager="someone-else")
    bed.apply(shipped(tmp_path, sealed_secrets, ns), field_manager=ARGO)
    said = refused_with(bed, ns, "SecretNotGranted")
    assert ("session (shipped sealed, but a Secret of that name exists that no SealedSecret of this app unsealed: a "
            "sealed secret never overwrites it; seal yours under another name)") in said
    assert bed.get("bitnami.com/v1alpha1", "SealedSecret", "session", ns) is None
    assert bed.get("apps/v1", "Deployment", "demo", ns) is None
    theirs = bed.get("v1", "Secret", "session", ns)
    assert theirs is not None and base64.b64decode(theirs["data"]["key"]) == b"theirs"
    assert bed.get(API, "Application", "demo", ns) is not None
