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


# docs/user-guide.md#editors: what the editor file (cue vet) reports and what only `apprafter validate` does.
VET_PASSES = [
    (("ghcr.io/acme/shop:1.0.0", "ghcr.io/Acme/shop:1.0.0"),
     "spec.base.image: image 'ghcr.io/Acme/shop:1.0.0' is not a valid image reference: the repository 'Acme/shop' "
     "must be lowercase: 'acme/shop'"),
    (('expose: {port: 8080, network: "public", protocols: [ipv6, ipv4]}', 'expose: {network: "public"}'),
     "spec.base.expose.port: missing required field expose.port (an integer 1-65535)"),
    (("needs: pg: {}\n\t\t", "", "dev: {}", "dev: needs: pg: {}"),
     "spec.base.env.DATABASE_URL: claim.pg.url refers to need 'pg', which environment 'prod' does not declare"),
]
VET_REFUSES = [
    ("expose: {port: 8080,", "expose: {port: 70000,"),
    ("replicas: 2", 'replicas: "2"'),
    ('name: "shop"', 'name: "Shop"'),
    ('network: "public"', 'network: "public", hostname: "Shop.example.com"'),
    ("claim.pg.url", "claim.pg.uri"),
    ("needs: pg: {}", "needs: redis: {}"),
    ('network: "public"', 'network: "publik"'),
]


@pytest.fixture
def editor_repo(tmp_path: Path) -> Path:
    subprocess.run([str(resolve("cue")), "mod", "init", "example.com/shop"], cwd=tmp_path, check=True,
                   capture_output=True)
    write_app(tmp_path, SHOP)
    (tmp_path / "apprafter" / "schema_gen.cue").write_text(run_cli("schema", "-o", "cue", "--package", "app").stdout)
    return tmp_path


def _vet(repo: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(resolve("cue")), "vet", "-c", "./apprafter"], cwd=repo, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.mark.parametrize(("edit", "message"), VET_PASSES)
def test_what_cue_vet_passes_and_only_validate_reports(editor_repo: Path, edit: tuple[str, ...],
                                                       message: str) -> None:
    text = SHOP
    for old, new in zip(edit[::2], edit[1::2], strict=True):
        assert old in text
        text = text.replace(old, new)
    (editor_repo / "apprafter" / "Application.cue").write_text(text)
    assert _vet(editor_repo).returncode == 0, _vet(editor_repo).stderr
    result = run_cli("validate", cwd=editor_repo)
    assert result.returncode == 1 and result.stdout == ""
    assert [line.split(": ", 1)[1] for line in result.stderr.splitlines()] == [message]


@pytest.mark.parametrize("edit", VET_REFUSES)
def test_what_cue_vet_reports_as_validate_does(editor_repo: Path, edit: tuple[str, str]) -> None:
    assert edit[0] in SHOP
    (editor_repo / "apprafter" / "Application.cue").write_text(SHOP.replace(*edit))
    assert _vet(editor_repo).returncode == 1
    assert run_cli("validate", cwd=editor_repo).returncode == 1
