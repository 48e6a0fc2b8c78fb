"""Each error class: exact one-line message at the user's line and column, exit 1, nothing on stdout."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.renderer.helpers import MINIMAL, RUNAWAY, run_cli, write_app
from toolchain.pins import pins
from toolchain.tools import TOOLS, tools_dir

F = "apprafter/Application.cue"


def errors_of(tmp_path: Path, text: str, *args: str) -> list[str]:
    write_app(tmp_path, text)
    result = run_cli(*(args or ("render", ".", "--env", "dev")), cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    return result.stderr.splitlines()


def test_out_of_range_port(tmp_path: Path) -> None:
    text = MINIMAL.replace("expose: port: 8080", "expose: port: 70000")
    assert errors_of(tmp_path, text) == [
        f"{F}:7:17: spec.base.expose.port: port 70000 is out of range: a port is an integer 1-65535"]


def test_unknown_field_is_an_error(tmp_path: Path) -> None:
    text = MINIMAL.replace("replicas: 2", "replica: 2")
    assert errors_of(tmp_path, text) == [
        f"{F}:11:9: spec.environments.prod.replica: field not allowed; did you mean `replicas`?"]


def test_top_level_typo(tmp_path: Path) -> None:
    text = MINIMAL + 'metdata: name: "x"\n'
    assert errors_of(tmp_path, text) == [
        f"{F}:14:1: metdata: field not allowed at top level (an Application has apiVersion, kind, metadata, spec); "
        "did you mean `metadata`?"]


def test_bad_env_value_type(tmp_path: Path) -> None:
    text = MINIMAL.replace('expose: port: 8080', 'expose: port: 8080\n\t\tenv: LOG: 3')
    assert errors_of(tmp_path, text) == [
        f'{F}:8:13: spec.base.env.LOG: must be a string literal, claim.<need>.<field>, '
        'or {secret: "<secret-name>/<key>"}']


def test_bad_env_key(tmp_path: Path) -> None:
    text = MINIMAL.replace('expose: port: 8080', 'expose: port: 8080\n\t\tenv: "log-level": "x"')
    assert errors_of(tmp_path, text) == [
        f"{F}:8:8: spec.base.env.\"log-level\": env key 'log-level' must match ^[A-Z_][A-Z0-9_]*$"]


def test_claim_to_undeclared_need(tmp_path: Path) -> None:
    text = MINIMAL.replace('expose: port: 8080', 'expose: port: 8080\n\t\tenv: DB: claim.pg.url')
    assert errors_of(tmp_path, text) == [
        f"{F}:8:18: spec.base.env.DB: claim.pg is used in env.DB but needs has no pg: add needs: pg: {{}}"]


def test_claim_to_a_need_missing_in_the_effective_environment(tmp_path: Path) -> None:
    text = MINIMAL.replace('expose: port: 8080', 'expose: port: 8080\n\t\tenv: DB: claim.pg.url').replace(
        "prod: replicas: 2", "prod: {replicas: 2, needs: pg: {}}")
    assert errors_of(tmp_path, text) == [
        f"{F}:8:8: spec.base.env.DB: claim.pg.url refers to need 'pg', which environment 'dev' does not declare"]
    write_app(tmp_path, text)
    assert run_cli("render", ".", "--env", "prod", cwd=tmp_path).returncode == 0


def test_unknown_claim_field(tmp_path: Path) -> None:
    extra = 'expose: port: 8080\n\t\tneeds: redis: {}\n\t\tenv: U: claim.redis.db'
    text = MINIMAL.replace('expose: port: 8080', extra)
    assert errors_of(tmp_path, text) == [
        f"{F}:9:23: spec.base.env.U: claim.redis has no field 'db' (its fields are url, host, port, user, password, "
        "prefix)"]
    assert errors_of(tmp_path, text.replace("claim.redis.db", "claim.redis.uri")) == [
        f"{F}:9:23: spec.base.env.U: claim.redis has no field 'uri' (its fields are url, host, port, user, password, "
        "prefix); did you mean `url`?"]


def test_bad_secret_reference(tmp_path: Path) -> None:
    text = MINIMAL.replace('expose: port: 8080', 'expose: port: 8080\n\t\tenv: K: secret: "Bad_Name"')
    assert errors_of(tmp_path, text) == [
        f"{F}:8:11: spec.base.env.K.secret: secret reference 'Bad_Name' must be \"<secret-name>/<key>\" "
        "(a DNS-1123 name and a key)"]


def test_a_pg_version_is_a_major(tmp_path: Path) -> None:
    """A provider runs one PostgreSQL major and applies its minors: `16.2` or `latest` is refused at validate, the
    major itself is a provider's to serve or refuse (issue 42)."""
    for version in ("16.2", "latest", "016"):
        text = MINIMAL.replace("expose: port: 8080", f'expose: port: 8080\n\t\tneeds: pg: version: "{version}"')
        assert errors_of(tmp_path, text, "validate", ".") == [
            f"{F}:8:23: spec.base.needs.pg.version: '{version}' is not a PostgreSQL major version (\"16\": its "
            "provider applies the minors)"]
    good = MINIMAL.replace("expose: port: 8080", 'expose: port: 8080\n\t\tneeds: pg: version: "16"')
    write_app(tmp_path, good)
    assert run_cli("validate", ".", cwd=tmp_path).returncode == 0


def test_names_must_be_dns_labels(tmp_path: Path) -> None:
    text = MINIMAL.replace('"demo"', '"Demo_App"').replace("dev: {}", "Dev: {}")
    assert errors_of(tmp_path, text, "validate", ".") == [
        f"{F}:3:17: metadata.name: 'Demo_App' is not a DNS-1035 label (a lowercase letter, then lowercase "
        "letters, digits and '-', at most 63 characters)",
        f"{F}:10:3: spec.environments.Dev: environment name 'Dev' is not a DNS-1123 label (lowercase letters, "
        "digits and '-', at most 63 characters)",
    ]


def test_image_missing_in_an_environment(tmp_path: Path) -> None:
    text = MINIMAL.replace('image: "ghcr.io/acme/demo:1.0.0"', "").replace("dev: {}", 'dev: image: "x:1"')
    assert errors_of(tmp_path, text, "validate", ".") == [
        f"{F}:5:2: spec.base.image: image is empty in environment 'prod': set base.image or environments.prod.image"]


def test_rewrite_gateway_api_cannot_express(tmp_path: Path) -> None:
    text = MINIMAL.replace("expose: port: 8080", 'expose: {port: 8080, rewrites: [{from: "/a/(.*)/b", to: "/c/$1"}]}')
    assert errors_of(tmp_path, text) == [
        f"{F}:7:35: spec.base.expose.rewrites.0: rewrite '/a/(.*)/b' -> '/c/$1' cannot be expressed in Gateway API: "
        'use a prefix capture, from: "/old/(.*)" to: "/new/$1"']


def test_undeclared_environment_lists_the_declared_ones(tmp_path: Path) -> None:
    assert errors_of(tmp_path, MINIMAL, "render", ".", "--env", "qa") == [
        f"{F}:9:2: spec.environments: environment 'qa' is not declared; declared: dev, prod"]


def test_syntax_error(tmp_path: Path) -> None:
    text = MINIMAL.replace('kind:       "Application"', 'kind: "Application" ]')
    lines = errors_of(tmp_path, text)
    assert len(lines) == 1 and lines[0].startswith(f"{F}:2:")


def test_all_problems_reported_at_once(tmp_path: Path) -> None:
    text = MINIMAL.replace("dev: {}", 'dev: image: ""').replace(
        "prod: replicas: 2", 'prod: env: K: secret: "nokey"') + 'spec: budget: qa: "small"\n'
    assert errors_of(tmp_path, text, "validate", ".") == [
        f"{F}:10:8: spec.environments.dev.image: image is empty in environment 'dev': set base.image or "
        "environments.dev.image",
        f"{F}:11:17: spec.environments.prod.env.K.secret: secret reference 'nokey' must be \"<secret-name>/<key>\" "
        "(a DNS-1123 name and a key)",
        f"{F}:14:15: spec.budget.qa: budget for undeclared environment 'qa'",
    ]


def test_missing_file_is_a_user_error(tmp_path: Path) -> None:
    result = run_cli("render", str(tmp_path), "--env", "dev")
    assert result.returncode == 1 and result.stdout == ""
    assert "no apprafter/Application.cue here" in result.stderr


def test_symlink_escaping_the_repository_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside.cue"
    outside.write_text(MINIMAL)
    repo = tmp_path / "repo"
    (repo / "apprafter").mkdir(parents=True)
    (repo / "apprafter" / "Application.cue").symlink_to(outside)
    result = run_cli("render", ".", "--env", "dev", cwd=repo)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.strip() == (f"{F}:1:1: refused: the file resolves outside the repository root "
                                     "(a symlink or '..' leaves it)")


def test_embed_is_refused(tmp_path: Path) -> None:
    text = "@extern(embed)\n" + MINIMAL
    assert errors_of(tmp_path, text) == [
        f"{F}:1:1: file embedding (@embed/@extern) is not allowed in Application.cue"]


@pytest.mark.parametrize("prefix", ["", "// a comment first\n", "\n\n", "package myapp\n\n",
                                    'package myapp\n\nimport "strings"\n\n_x: strings.ToUpper("a")\n'])
def test_package_clause_optional_and_positions_kept(tmp_path: Path, prefix: str) -> None:
    text = prefix + MINIMAL.replace("expose: port: 8080", "expose: port: 0")
    line = 7 + prefix.count("\n")
    assert errors_of(tmp_path, text) == [
        f"{F}:{line}:17: spec.base.expose.port: port 0 is out of range: a port is an integer 1-65535"]


def test_runaway_evaluation_is_stopped(tmp_path: Path) -> None:
    text = 'import "list"\n\n' + MINIMAL + RUNAWAY
    write_app(tmp_path, text)
    result = run_cli("render", ".", "--env", "dev", cwd=tmp_path,
                     env={"APPRAFTER_CUE_TIMEOUT": "2", "APPRAFTER_CUE_MEMORY_MB": "512"})
    assert result.returncode == 2 and result.stdout == ""
    assert ("did not finish within 2s" in result.stderr) or ("memory budget of 512 MiB" in result.stderr)


def test_missing_cue_is_a_tool_error_with_the_remedy(tmp_path: Path) -> None:
    write_app(tmp_path, MINIMAL)
    result = run_cli("render", ".", "--env", "dev", cwd=tmp_path, env={"APPRAFTER_CUE": str(tmp_path / "nope")})
    assert result.returncode == 2 and result.stdout == ""
    assert "make setup" in result.stderr


def _cue(version: str) -> Path:
    """A real cue of another version, cached by the set-up (CUE_TEST_VERSIONS)."""
    path = tools_dir() / "cue" / version / "cue"
    assert path.exists(), f"cue {version} missing: run `make setup` (tools/setup.sh caches CUE_TEST_VERSIONS)"
    return path


def _on_path(tmp_path: Path, version: str) -> dict[str, str]:
    """An environment whose only cue is the real cue `version`, found on PATH (no tool cache)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "cue").symlink_to(_cue(version))
    return {"APPRAFTER_TOOLS_DIR": str(tmp_path / "empty"), "PATH": f"{bin_dir}:/usr/bin:/bin"}


TEST_CUES = pins()["CUE_TEST_VERSIONS"].split()


def test_a_cue_outside_the_supported_range_is_refused_naming_the_version_and_the_range(tmp_path: Path) -> None:
    (outside,) = [v for v in TEST_CUES if not TOOLS["cue"].supports(v)]
    write_app(tmp_path, MINIMAL)
    env = _on_path(tmp_path, outside)
    result = run_cli("render", ".", "--env", "dev", cwd=tmp_path, env=env)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip() == (
        f"apprafter: cue at {tmp_path / 'bin' / 'cue'} is {outside}; apprafter supports cue "
        f"{TOOLS['cue'].supported}: run `make setup` (tools/setup.sh) to install it, or point APPRAFTER_CUE at one")
    explicit = run_cli("render", ".", "--env", "dev", cwd=tmp_path, env={"APPRAFTER_CUE": str(_cue(outside))})
    assert explicit.returncode == 2 and f"is {outside}; apprafter supports cue" in explicit.stderr


def test_a_cue_inside_the_range_renders_what_the_pinned_one_renders(tmp_path: Path) -> None:
    (inside,) = [v for v in TEST_CUES if TOOLS["cue"].supports(v)]
    assert inside != TOOLS["cue"].pinned
    write_app(tmp_path, MINIMAL)
    pinned = run_cli("render", ".", "--env", "prod", "--mode", "manifests", cwd=tmp_path)
    other = run_cli("render", ".", "--env", "prod", "--mode", "manifests", cwd=tmp_path,
                    env=_on_path(tmp_path, inside))
    assert other.returncode == 0, other.stderr
    assert other.stdout == pinned.stdout and pinned.stdout.count("kind: ") >= 4
    broken = write_app(tmp_path, MINIMAL.replace("prod: replicas: 2", "prod: replicas: \"two\""))
    errors = [run_cli("validate", ".", cwd=tmp_path, env=env).stderr for env in ({}, _on_path(tmp_path / "x", inside))]
    assert errors[0] == errors[1] and f"{broken.relative_to(tmp_path)}:" in errors[0]
