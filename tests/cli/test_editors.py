"""Editors and shells: `apprafter schema` (the JSON Schema, and the CUE file the language server and `cue vet` read,
with `claim` defined), `render --all-envs` and kubectl's `-o name`; with the real cue."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from renderer.load import load
from tests.renderer.helpers import EXAMPLES, MINIMAL, run_cli, write_app
from toolchain.tools import resolve

SHOP = '''package app

apiVersion: "apprafter.io/v1alpha1"
kind:       "Application"
metadata: name: "shop"
spec: {
	base: {
		image: "ghcr.io/acme/shop:1.0.0"
		expose: {port: 8080, network: "public", protocols: [ipv6, ipv4]}
		needs: pg: {}
		env: DATABASE_URL: claim.pg.url
	}
	environments: {dev: {}, prod: {replicas: 2}}
}
'''


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    result = run_cli("schema")
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def test_the_json_schema_takes_what_validate_takes_and_refuses_what_it_refuses(schema: dict[str, Any]) -> None:
    validator = jsonschema.Draft202012Validator(schema)
    validator.check_schema(schema)
    assert schema["title"] == "AppRafter Application (apprafter.io/v1alpha1)"
    for example in sorted(EXAMPLES.iterdir()):
        document = load(example).document
        assert list(validator.iter_errors(document)) == [], example.name
    document = load(EXAMPLES / "parser").document
    misspelt = json.loads(json.dumps(document).replace('"replicas"', '"replica"', 1))
    assert [e.message for e in validator.iter_errors(misspelt)] == [
        "Additional properties are not allowed ('replica' was unexpected)"]
    port = {**document, "spec": {**document["spec"], "base": {**document["spec"]["base"],
                                                              "expose": {"port": 70000}}}}
    assert [e.message for e in validator.iter_errors(port)] == ["70000 is greater than the maximum of 65535"]

    def base(**fields: object) -> dict[str, object]:
        spec = document["spec"]
        return {**document, "spec": {**spec, "base": {**spec["base"], **fields}}}

    claim = base(env={"DATABASE_URL": {"claim": "pg/url"}}, needs={"pg": {}})
    assert list(validator.iter_errors(claim)) == []  # the form `claim.pg.url` evaluates to
    assert list(validator.iter_errors(base(env={"DATABASE_URL": {"claim": "pg/uri"}})))
    assert list(validator.iter_errors(base(expose={"port": 8080, "protocols": ["ipv6", "ipv4"]}))) == []
    assert list(validator.iter_errors(base(expose={"port": 8080, "protocols": ["ipv7"]})))


def test_the_cue_file_defines_claim_for_the_language_server_and_cue_vet(tmp_path: Path) -> None:
    cue = str(resolve("cue"))
    subprocess.run([cue, "mod", "init", "example.com/shop"], cwd=tmp_path, check=True, capture_output=True)
    app = write_app(tmp_path, SHOP)
    generated = run_cli("schema", "-o", "cue", "--package", "app")
    assert generated.returncode == 0 and generated.stdout.splitlines()[2] == "package app"
    (app.parent / "schema_gen.cue").write_text(generated.stdout)

    def vet() -> subprocess.CompletedProcess[str]:
        return subprocess.run([cue, "vet", "-c", "./apprafter"], cwd=tmp_path, capture_output=True, text=True,
                              timeout=120, check=False)

    assert vet().returncode == 0, vet().stderr
    env = subprocess.run([cue, "eval", "./apprafter", "-e", "spec.base.env"], cwd=tmp_path, capture_output=True,
                         text=True, check=True, timeout=120).stdout
    assert env == 'DATABASE_URL: {\n    claim: "pg/url"\n}\n'  # claim.pg.url resolved as the renderer resolves it
    assert run_cli("validate", cwd=tmp_path).stderr == "apprafter/Application.cue: valid (dev, prod)\n"
    app.write_text(SHOP.replace("replicas: 2", "replica: 2"))
    misspelt = vet()
    assert misspelt.returncode == 1
    assert "_apprafterDocument.spec.environments.prod.replica: field not allowed" in misspelt.stderr
    bad = run_cli("schema", "-o", "cue", "--package", "my-app")
    assert bad.returncode == 1 and "not a CUE package name: 'my-app'" in bad.stderr


def test_render_every_environment_at_once_and_names_as_kubectl_prints_them(tmp_path: Path) -> None:
    write_app(tmp_path, MINIMAL)
    every = run_cli("render", "--all-envs", cwd=tmp_path)
    dev, prod = (run_cli("render", "-e", env, cwd=tmp_path).stdout for env in ("dev", "prod"))
    assert every.returncode == 0 and every.stdout == f"# demo/dev\n{dev}# demo/prod\n{prod}"
    names = run_cli("render", ".", "--all-envs", "--mode", "manifests", "-o", "name", cwd=tmp_path)
    assert names.stdout.splitlines()[:3] == ["serviceaccount/demo", "deployment.apps/demo", "service/demo"]
    assert run_cli("render", "-e", "prod", "-o", "name", cwd=tmp_path).stdout == "application.apprafter.io/demo\n"
    both = run_cli("render", "--all-envs", "-e", "prod", cwd=tmp_path)
    assert (both.returncode, both.stdout, both.stderr) == (1, "", "--all-envs: renders every environment: not with "
                                                                   "--env\n")
    neither = run_cli("render", cwd=tmp_path)
    assert neither.stderr == ("apprafter/Application.cue:1:1: --env is required (or --all-envs); declared "
                              "environments: dev, prod\n")
    crds = run_cli("crds", "-o", "name").stdout.splitlines()
    assert "customresourcedefinition.apiextensions.k8s.io/applications.apprafter.io" in crds
