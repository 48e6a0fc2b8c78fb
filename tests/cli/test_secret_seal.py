"""`apprafter secret seal` and the sealed files the plugin ships: sealed with a certificate given as a file (as in
CI), opened here with its private key the way the SealedSecrets controller opens them (strict scope: the namespace and
name are the OAEP label), stamped on the Application the plugin emits and rendered as the operator's SealedSecret
child; every file the plugin must not ship refused, one line each. The real controller opens them in
tests/reconciler/test_sealed_secrets_cluster.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.lifecycle.credentials.test_sealing import _certificate, _open
from tests.renderer.helpers import run_cli, write_app

APP = '''apiVersion: "apprafter.io/v1alpha1"
kind:       "Application"
metadata: name: "shop"
spec: {
	base: {
		image: "ghcr.io/acme/shop:1.4.2"
		env: SESSION_KEY: secret: "shop-session/key"
	}
	environments: {staging: {}, prod: {}}
}
'''
SEALED = "apprafter/secrets/prod/shop-session.yaml"


@pytest.fixture(scope="module")
def key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def repo(tmp_path: Path, key: rsa.RSAPrivateKey) -> Path:
    write_app(tmp_path, APP)
    (tmp_path / "cert.pem").write_bytes(_certificate(key))
    return tmp_path


def opened(key: rsa.RSAPrivateKey, ciphertext: str, namespace: str, name: str) -> bytes:
    """What the controller does: the session key under RSA-OAEP with the strict scope's label."""
    return _open(key, ciphertext, f"{namespace}/{name}".encode())


def seal(repo: Path, *args: str, value: str) -> None:
    done = run_cli("secret", "seal", "shop-session", *args, "--cert", "cert.pem", cwd=repo, stdin=value)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and value not in done.stderr


def test_seal_writes_a_strict_sealed_secret_that_opens_only_for_its_namespace_and_name(
        repo: Path, key: rsa.RSAPrivateKey) -> None:
    seal(repo, "key", "-e", "prod", value="s3cr3t-value")
    seal(repo, "other", "-e", "prod", value="second")  # a second key: the first kept
    written = yaml.safe_load((repo / SEALED).read_text())
    assert written["metadata"] == {"name": "shop-session", "namespace": "shop-prod"}
    data = written["spec"]["encryptedData"]
    assert sorted(data) == ["key", "other"]
    assert opened(key, data["key"], "shop-prod", "shop-session") == b"s3cr3t-value"
    assert opened(key, data["other"], "shop-prod", "shop-session") == b"second"
    with pytest.raises(ValueError):  # another namespace's label does not open it
        opened(key, data["key"], "shop-staging", "shop-session")
    assert "s3cr3t-value" not in (repo / SEALED).read_text()


def test_the_plugin_ships_the_environments_sealed_secrets_and_the_operator_makes_their_children(repo: Path) -> None:
    seal(repo, "key", "-e", "prod", value="v4lue-xyz")
    sealed = yaml.safe_load((repo / SEALED).read_text())  # written as JSON, as kubeseal writes by default
    ciphertext = sealed["spec"]["encryptedData"]["key"]
    other = {**sealed, "metadata": {**sealed["metadata"], "name": "other"}}  # as `kubeseal -o yaml` writes it
    (repo / "apprafter/secrets/prod/other.yaml").write_text(yaml.safe_dump(other))
    cr = yaml.safe_load(run_cli("render", ".", "-e", "prod", "-n", "shop-prod", cwd=repo).stdout)
    assert cr["spec"]["sealedSecrets"] == {"other": {"key": ciphertext}, "shop-session": {"key": ciphertext}}
    staging = yaml.safe_load(run_cli("render", ".", "-e", "staging", "-n", "shop-staging", cwd=repo).stdout)
    assert "sealedSecrets" not in staging["spec"]  # prod's secrets are prod's
    objects = list(yaml.safe_load_all(run_cli("render", ".", "-e", "prod", "-n", "shop-prod", "--mode",
                                              "manifests", cwd=repo).stdout))
    child = next(o for o in objects if o["kind"] == "SealedSecret" and o["metadata"]["name"] == "shop-session")
    assert child["metadata"]["name"] == "shop-session" and child["metadata"]["namespace"] == "shop-prod"
    assert child["spec"]["encryptedData"] == {"key": ciphertext}
    assert child["spec"]["template"]["metadata"]["annotations"] == {"apprafter.io/applications": "shop"}


def test_what_the_plugin_must_not_ship_is_refused_one_line_each(repo: Path) -> None:
    seal(repo, "key", "-e", "prod", value="v4lue-xyz")
    (repo / "apprafter/secrets/prod/notes.txt").write_text("x")
    sealed = yaml.safe_load((repo / SEALED).read_text())
    wide = {**sealed, "metadata": {**sealed["metadata"], "name": "wide",
                                   "annotations": {"sealedsecrets.bitnami.com/cluster-wide": "true"}}}
    (repo / "apprafter/secrets/prod/wide.yaml").write_text(yaml.safe_dump(wide))
    plain = {**sealed, "metadata": {"name": "plain"}, "spec": {"encryptedData": {"key": "not ciphertext!"}}}
    (repo / "apprafter/secrets/prod/plain.yaml").write_text(yaml.safe_dump(plain))
    done = run_cli("render", ".", "-e", "prod", "-n", "shop-prod", cwd=repo)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines() == [
        "apprafter/secrets/prod/notes.txt:1:1: not a sealed secret's file (<name>.yaml): move it out of secrets/prod/",
        "apprafter/secrets/prod/plain.yaml:1:1: spec.encryptedData.key: is not sealed ciphertext (base64): never "
        "commit a value itself",
        "apprafter/secrets/prod/wide.yaml:1:1: metadata.annotations.sealedsecrets.bitnami.com/cluster-wide: a wider "
        "scope than strict is refused (its ciphertext could be replayed elsewhere): seal it again for this namespace "
        "and name (apprafter secret seal NAME KEY -e ENV)"]
    other = run_cli("render", ".", "-e", "prod", "-n", "shop-other", cwd=repo)  # deployed elsewhere than sealed for
    assert "apprafter/secrets/prod/shop-session.yaml:1:1: metadata.namespace: sealed for namespace 'shop-prod'; this " \
           "environment deploys to 'shop-other'" in other.stderr


def test_the_value_never_comes_from_the_command_line_and_names_are_checked(repo: Path) -> None:
    bad = run_cli("secret", "seal", "Shop_Session", "key", "-e", "prod", "--cert", "cert.pem", cwd=repo, stdin="v")
    assert (bad.returncode, bad.stderr) == (1, "Shop_Session: is not a Secret name for a file (lowercase letters, "
                                               "digits and '-')\n")
    env = run_cli("secret", "seal", "s", "key", "-e", "qa", "--cert", "cert.pem", cwd=repo, stdin="v")
    assert env.stderr == "apprafter/Application.cue: environment qa is not declared; declared: prod, staging\n"
