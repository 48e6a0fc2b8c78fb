"""Hostile repositories and settings (issue 12), one class per test: never a crash, a hang, a leak or a pass.

Every run is the real CLI with the real cue; each failure must be one line per problem, exit 1 (the user's
input) or 2 (a tool or budget), nothing on stdout.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from renderer.load import LoadedApp, Source
from renderer.validate import check
from tests.renderer.helpers import MINIMAL, assert_clean_failure, run_capped, run_cli, write_app
from toolchain.tools import TOOLS

F = "apprafter/Application.cue"
SECRET = "Hunter2_do_not_print_me"  # not a DNS name either: our own checks refuse it where it is misused
DRAIN = "gateway.drainSeconds: must be a whole number of seconds from 0 to 300"  # the Gateway's drain, never echoed


def with_base(extra: str) -> str:
    return MINIMAL.replace("expose: port: 8080", "expose: port: 8080\n\t\t" + extra)


# 1. Position indexing is linear and under the budget.

def test_a_long_label_chain_is_indexed_in_linear_time_and_memory(tmp_path: Path) -> None:
    """60 KB of `a: a: a: ...` took 20 s and 1.9 GB; a problem's position now comes within the budget. cue's peak
    here is ≈ 120 MiB resident alone; under the full suite's load (three workers on two cores: Go's collector gets
    less CPU) its data segment once passed 256 MiB, so the budget is 384 MiB: still a fifth of what it took."""
    text = MINIMAL.replace("prod: replicas: 2", "prod: replica: 2") + "_x: " + "a: " * 20000 + "1\n"
    write_app(tmp_path, text)
    result = run_capped("render", ".", "--env", "dev", cwd=tmp_path, memory_mb=512,
                        env={"APPRAFTER_CUE_MEMORY_MB": "384"})
    assert assert_clean_failure(result, 1) == [
        f"{F}:11:9: spec.environments.prod.replica: field not allowed; did you mean `replicas`?"]


def test_the_python_side_is_under_the_memory_budget_too(tmp_path: Path) -> None:
    """cue refuses 400 000 nested lists with a position; finding it costs Python memory: the budget bounds it."""
    write_app(tmp_path, MINIMAL + "_x: " + "[" * 400000 + "]" * 400000 + "\n")
    result = run_capped("render", ".", "--env", "dev", cwd=tmp_path, memory_mb=512,
                        env={"APPRAFTER_CUE_MEMORY_MB": "256"})
    assert assert_clean_failure(result, 1) == [f"{F}:14:10005: expression exceeds maximum nesting depth of 10000"]
    # With a budget smaller than that work needs, the budget stops it: one line, exit 2, no traceback.
    result = run_capped("render", ".", "--env", "dev", cwd=tmp_path, memory_mb=512,
                        env={"APPRAFTER_CUE_MEMORY_MB": "64"})
    assert assert_clean_failure(result, 2)[0].startswith("apprafter: ")


# 2. Names are matched in full; the name rules are in the schema (cue reports them at the value).

@pytest.mark.parametrize(("edit", "expected"), [
    (('"demo"', '"demo\\n"'),
     f"{F}:3:17: metadata.name: 'demo\\n' is not a DNS-1035 label (a lowercase letter, then lowercase letters, "
     "digits and '-', at most 63 characters)"),
    (("dev: {}", '"dev\\n": {}'),
     f'{F}:10:3: spec.environments."dev\\n": environment name \'dev\\n\' is not a DNS-1123 label (lowercase '
     "letters, digits and '-', at most 63 characters)"),
    (("expose: port: 8080", 'expose: {port: 8080, hostname: "shop.example.com\\n"}'),
     f"{F}:7:34: spec.base.expose.hostname: hostname 'shop.example.com\\n' must hold no whitespace: use "
     "shop.example.com"),
    (("expose: port: 8080", 'expose: {port: 8080, hostname: "http"}'),
     f"{F}:7:24: spec.base.expose.hostname: hostname 'http' is a single label: a public hostname is a fully "
     "qualified name of two labels or more (shop.example.com)"),
    (('metadata: name: "demo"', 'metadata: {name: "demo", namespace: "shop\\n"}'),
     f"{F}:3:37: metadata.namespace: 'shop\\n' is not a DNS-1123 label (lowercase letters, digits and '-', at "
     "most 63 characters)"),
    (('metadata: name: "demo"', 'metadata: {name: "demo", labels: {"team name": "a"}}'),
     f'{F}:3:35: metadata.labels."team name": label key \'team name\' is not a qualified name ([DNS-name '
     "prefix/]name: letters, digits, '-', '_', '.', at most 63 characters)"),
    (('metadata: name: "demo"', 'metadata: {name: "demo", labels: {team: "a b"}}'),
     f"{F}:3:41: metadata.labels.team: 'a b' is not a label value (empty, or letters, digits, '-', '_', '.', at "
     "most 63 characters)"),
    (("expose: port: 8080", 'expose: port: 8080\n\t\tenv: K: secret: "db/password\\n"'),
     f'{F}:8:11: spec.base.env.K.secret: secret reference \'db/password\\n\' must be "<secret-name>/<key>" (a '
     "DNS-1123 name and a key)"),
    (("prod: replicas: 2", 'prod: {}\n\t\t"this-environment-name-is-long-enough-to-overflow-the-label-x": {}'),
     f'{F}:12:3: spec.environments."this-environment-name-is-long-enough-to-overflow-the-label-x": '
     "'demo-this-environment-name-is-long-enough-to-overflow-the-label-x' (app and environment name) is longer "
     "than 63 characters: it is the app.kubernetes.io/instance label of every object"),
])
def test_a_name_that_would_render_an_invalid_object_is_refused(tmp_path: Path, edit: tuple[str, str],
                                                                expected: str) -> None:
    write_app(tmp_path, MINIMAL.replace(*edit))
    assert assert_clean_failure(run_cli("validate", ".", cwd=tmp_path), 1) == [expected]


def loaded(document: dict[str, Any]) -> LoadedApp:
    """A document as the webhook gets it: JSON from the API server, no CUE source."""
    return LoadedApp(Source(Path("cr.json"), "cr.json", "", None), document)


def test_the_python_checks_match_in_full_on_a_document_without_cue() -> None:
    base: dict[str, Any] = {"image": "x:1", "expose": {"port": 80, "hostname": "a.example.com\n", "paths": ["/a\n"]},
            "env": {"K": {"secret": "db/key\n"}, "L\n": "v"}}
    doc: dict[str, Any] = {"apiVersion": "apprafter.io/v1alpha1", "kind": "Application",
           "metadata": {"name": "shop\n", "namespace": "ns\n", "labels": {"a\n": "b"}},
           "spec": {"base": base, "environments": {"dev\n": {}, "prod": {}}}}
    assert {p.field for p in check(loaded(doc))} == {
        "metadata.name", "metadata.namespace", 'metadata.labels."a\\n"', 'spec.environments."dev\\n"',
        'spec.base.env."L\\n"', "spec.base.env.K.secret", "spec.base.expose.hostname", "spec.base.expose.paths.0"}


# 3. Env literals never appear in a message.

@pytest.mark.parametrize("extra", [
    f'env: PASSWORD: "{SECRET}" & =~"^[0-9]+$"',  # the example
    f'env: PASSWORD: "{SECRET}"\n\t\treplicas: env.PASSWORD',  # used in another field
    f'env: PASSWORD: "{SECRET[:9]}" + "{SECRET[9:]}"\n\t\tcommand: [env.PASSWORD & =~"^x"]',  # computed
    f'env: PASSWORD: "{SECRET}"\n\t\timage: env.PASSWORD & =~"^ghcr"',
    f'env: PASSWORD: """\n\t\t\t{SECRET}\n\t\t\t"""\n\t\treplicas: env.PASSWORD',  # multi-line literal
])
def test_env_literals_are_redacted_in_cue_messages(tmp_path: Path, extra: str) -> None:
    write_app(tmp_path, with_base(extra))
    result = run_cli("render", ".", "--env", "dev", cwd=tmp_path)
    lines = assert_clean_failure(result, 1)
    assert SECRET not in result.stderr and SECRET[:9] not in result.stderr and SECRET[9:] not in result.stderr
    assert any("<redacted sha256:" in line for line in lines), lines


def test_a_value_cue_computes_from_an_env_literal_is_not_shown(tmp_path: Path) -> None:
    """cue reports strings.ToUpper(env.PASSWORD) at replicas, pointing at no env token: a computed string is shown
    only when it is written somewhere outside env values, which this one is not."""
    write_app(tmp_path, 'import "strings"\n\n' + with_base(f'env: PASSWORD: "{SECRET}"\n\t\t_up: '
                                                           "strings.ToUpper(env.PASSWORD)\n\t\treplicas: _up"))
    result = run_cli("render", ".", "--env", "dev", cwd=tmp_path)
    lines = assert_clean_failure(result, 1)
    assert SECRET.upper() not in result.stderr and SECRET not in result.stderr
    prefix = hashlib.sha256(SECRET.upper().encode()).hexdigest()[:8]
    assert lines == [f"{F}:11:8: spec.base.replicas: conflicting values int and <redacted sha256:{prefix}> "
                     "(mismatched types int and string)"]


def test_the_redaction_keeps_the_field_and_the_rule(tmp_path: Path) -> None:
    write_app(tmp_path, with_base(f'env: PASSWORD: "{SECRET}" & =~"^[0-9]+$"'))
    lines = run_cli("render", ".", "--env", "dev", cwd=tmp_path).stderr.splitlines()
    prefix = hashlib.sha256(SECRET.encode()).hexdigest()[:8]
    assert f'{F}:8:46: spec.base.env.PASSWORD: invalid value <redacted sha256:{prefix}> (out of bound =~"^[0-9]+$")' \
        in lines


def test_env_literals_are_redacted_in_our_own_checks() -> None:
    doc: dict[str, Any] = {"apiVersion": "apprafter.io/v1alpha1", "kind": "Application", "metadata": {"name": "shop"},
           "spec": {"base": {"image": "x:1", "env": {"TOKEN": SECRET},
                             "expose": {"port": 80, "hostname": SECRET, "paths": [SECRET]}},
                    "environments": {"dev": {}}}}
    problems = set(check(loaded(doc)))
    assert [p.field for p in sorted(problems)] == ["spec.base.expose.hostname", "spec.base.expose.paths.0"]
    assert all(SECRET not in str(p) and "<redacted sha256:" in p.message for p in problems)


def test_env_literals_are_redacted_in_plan_cr_messages(tmp_path: Path) -> None:
    cr = tmp_path / "cr.yaml"
    cr.write_text("apiVersion: apprafter.io/v1alpha1\nkind: Application\nmetadata: {name: shop}\nspec:\n"
                  f"  base: {{image: 'x:1', env: {{PASSWORD: {{literal: {SECRET}}}, OTHER: {SECRET}}}, replicas: "
                  f"{SECRET}}}\n  environments: {{dev: {{}}}}\n")
    result = run_cli("plan", "--from", str(cr), "--to", str(cr), "--env", "dev")
    assert_clean_failure(result, 1)
    assert SECRET not in result.stderr


# 4. Files outside the root are never read (render's own root; plan's file inputs).

def test_a_plan_input_that_resolves_outside_its_directory_is_not_quoted(tmp_path: Path) -> None:
    outside = tmp_path / "outside.yaml"
    outside.write_text(f"{SECRET}: [\n")  # a YAML error that would quote this line
    (tmp_path / "inputs").mkdir()
    (tmp_path / "inputs" / "cr.yaml").symlink_to(outside)
    result = run_cli("plan", "--from", str(tmp_path / "inputs" / "cr.yaml"), "--to", str(tmp_path / "inputs" /
                     "cr.yaml"), "--env", "dev")
    lines = assert_clean_failure(result, 1)
    assert SECRET not in result.stderr
    assert lines[0].endswith("refused: the file resolves outside the directory it is named in (a symlink or '..' "
                             "leaves it)")


# 5. A tool failure is judged by cue's exit status, never by words in a message.

@pytest.mark.parametrize("value", ["out of memory", "fatal error: runtime: out of memory",
                                   "cannot allocate memory"])
def test_a_user_value_cannot_pass_for_a_tool_failure(tmp_path: Path, value: str) -> None:
    write_app(tmp_path, with_base(f'replicas: "{value}"'))
    lines = assert_clean_failure(run_cli("render", ".", "--env", "dev", cwd=tmp_path), 1)
    assert lines == [f'{F}:8:13: spec.base.replicas: conflicting values "{value}" and int (mismatched types '
                     "string and int)"]


def test_a_real_out_of_memory_is_a_budget_failure(tmp_path: Path) -> None:
    write_app(tmp_path, 'import "list"\n\n' + MINIMAL + '_big: [for i in list.Range(0, 10000000, 1) {"x\\(i)"}]\n'
              "spec: base: replicas: len(_big)\n")
    result = run_cli("render", ".", "--env", "dev", cwd=tmp_path,
                     env={"APPRAFTER_CUE_MEMORY_MB": "64", "APPRAFTER_CUE_TIMEOUT": "60"})
    assert assert_clean_failure(result, 2) == [
        "apprafter: cue evaluation exceeded its memory budget of 64 MiB and was stopped (raise "
        "APPRAFTER_CUE_MEMORY_MB, or simplify the input)"]


def stand_in_cue(tmp_path: Path, code: int, stderr: str) -> dict[str, str]:
    """A cue that ends the way a Go runtime crash does (the real one is forced above, where it can be)."""
    script = tmp_path / "cue"
    # It answers `cue version` as a supported cue does (an APPRAFTER_CUE outside the cache is asked for its version).
    script.write_text(f"#!/bin/sh\nif [ \"$1\" = version ]; then echo 'cue version {TOOLS['cue'].pinned}'; exit 0; fi\n"
                      f"printf '%s\\n' '{stderr}' >&2\nexit {code}\n")
    script.chmod(0o755)
    return {"APPRAFTER_CUE": str(script)}


@pytest.mark.parametrize(("code", "stderr", "expected"), [
    (2, "panic: runtime error: index out of range [3] with length 3",
     "apprafter: cue crashed (panic); this is a bug in cue, not in the Application: run `apprafter doctor` and "
     "report it"),
    (2, "fatal error: runtime: out of memory",
     "apprafter: cue evaluation exceeded its memory budget of 1024 MiB and was stopped (raise "
     "APPRAFTER_CUE_MEMORY_MB, or simplify the input)"),
    (3, "spec.base.replicas: out of memory", "apprafter: cue exited with status 3 without an error report"),
    (2, "spec.base.replicas: out of memory", "apprafter: cue exited with status 2 without an error report"),
])
def test_how_cue_ended_is_read_from_its_status(tmp_path: Path, code: int, stderr: str, expected: str) -> None:
    write_app(tmp_path, MINIMAL)
    result = run_cli("render", ".", "--env", "dev", cwd=tmp_path, env=stand_in_cue(tmp_path, code, stderr))
    assert assert_clean_failure(result, 2) == [expected]


# 6. and 8. Settings: checked, named, read when used.

@pytest.mark.parametrize(("name", "value", "expected"), [
    ("APPRAFTER_CUE_TIMEOUT", "20s", "apprafter: APPRAFTER_CUE_TIMEOUT must be a number of seconds above 0 and at "
     "most 3600 (for example 20): fix it in the environment that runs apprafter"),
    ("APPRAFTER_CUE_TIMEOUT", "-1", "apprafter: APPRAFTER_CUE_TIMEOUT must be a number of seconds above 0 and at "
     "most 3600 (for example 20): fix it in the environment that runs apprafter"),
    ("APPRAFTER_CUE_MEMORY_MB", "1G", "apprafter: APPRAFTER_CUE_MEMORY_MB must be a whole number of MiB from 64 to "
     "1048576 (for example 1024): fix it in the environment that runs apprafter"),
])
@pytest.mark.parametrize("command", [("render", ".", "--env", "dev"), ("validate", "."),
                                     ("plan", "--from", ".", "--to", ".", "--env", "dev")])
def test_an_unusable_limit_is_one_line_naming_it(tmp_path: Path, name: str, value: str, expected: str,
                                                  command: tuple[str, ...]) -> None:
    write_app(tmp_path, MINIMAL)
    result = run_cli(*command, cwd=tmp_path, env={name: value})
    assert assert_clean_failure(result, 2) == [expected]


@pytest.mark.parametrize(("text", "expected"), [
    ("domain: [a, b]\n", "platform.yaml:1:1: domain: must be a DNS name (DNS-1123 labels joined by '.', at most 253 "
     "characters)"),
    ("ipFamilies: ipv5\n", "platform.yaml:1:13: ipFamilies: must be ipv6 and/or ipv4, a list with each at most "
     "once"),
    ("ipFamilies: [ipv6, ipv6]\n", "platform.yaml:1:1: ipFamilies: must be ipv6 and/or ipv4, a list with each at "
     "most once"),
    ("gateway: {namespace: 'apprafter system'}\n", "platform.yaml:1:22: gateway.namespace: must be a DNS-1123 label "
     "(lowercase letters, digits and '-', at most 63 characters)"),
    ("tier: gold\n", "platform.yaml:1:7: tier: must be one of dev, solo, team, production, regulated"),
    ("gateway: {drain: 5}\n", "platform.yaml:1:11: gateway.drain: unknown key; known: name, namespace, "
     "drainSeconds, implementation"),
    ("providerNamespaces: {pg: ../x}\n", "platform.yaml:1:26: providerNamespaces.pg: must be a DNS-1123 label "
     "(lowercase letters, digits and '-', at most 63 characters)"),
    ("providerNamespaces: {mysql: db}\n", "platform.yaml:1:22: providerNamespaces.mysql: unknown key; known: pg, "
     "redis, jetstream, clickhouse, s3"),
    ("domian: x\n", "platform.yaml:1:1: domian: unknown platform setting; known: clusterIssuer, "
     "confidentialRuntimeClass, domain, gateway, ipFamilies, providerNamespaces, tier"),
    ("domain: a.b\n1: x\n", 'platform.yaml:2:1: mapping key 1 is not a string (quote it: "1")'),
    ("gateway:\n  name: edge\n  true: x\n", 'platform.yaml:3:3: gateway: mapping key true is not a string (quote it: '
     '"true")'),
    ("domain: a.b\ntier: solo\x00\n", "platform.yaml:2:11: a NUL byte is not allowed in a text file"),
    ("domain: a.b\ntier: [solo\n", "platform.yaml:3:1: not valid YAML: expected ',' or ']', but got '<stream end>'"),
    ("- domain\n", "platform.yaml:1:1: a platform file is a mapping of settings (domain, tier, gateway, ...)"),
    # the Gateway's drain (renderer.health.drain): a whole number of seconds, 0-300, never echoed
    ("gateway: {drainSeconds: -1}\n", f"platform.yaml:1:25: {DRAIN}"),
    ("gateway: {drainSeconds: \"5s\"}\n", f"platform.yaml:1:25: {DRAIN}"),
    ("gateway:\n  drainSeconds: true\n", f"platform.yaml:2:17: {DRAIN}"),
    ("gateway:\n  name: public\n  drainSeconds: 301\n", f"platform.yaml:3:17: {DRAIN}"),
    ("gateway: {drainSeconds: 2.5}\n", f"platform.yaml:1:25: {DRAIN}"),
])
def test_a_bad_platform_file_is_reported_where_it_is_written(tmp_path: Path, text: str, expected: str) -> None:
    write_app(tmp_path, MINIMAL)
    (tmp_path / "platform.yaml").write_text(text)
    result = run_cli("render", ".", "--env", "dev", "--mode", "manifests", "--platform", "platform.yaml",
                     cwd=tmp_path)
    assert assert_clean_failure(result, 1) == [expected]


@pytest.mark.parametrize(("flag", "value", "expected"), [
    ("--domain", "apps.example.com\n", "--domain: must be a DNS name (DNS-1123 labels joined by '.', at most 253 "
     "characters)"),
    ("--domain", "a..b", "--domain: must be a DNS name (DNS-1123 labels joined by '.', at most 253 characters)"),
    ("--namespace", "shop ns", "--namespace: must be a DNS-1123 label (lowercase letters, digits and '-', at most 63 "
     "characters)"),
])
def test_a_bad_flag_value_is_refused_without_echoing_it(tmp_path: Path, flag: str, value: str,
                                                         expected: str) -> None:
    write_app(tmp_path, MINIMAL)
    result = run_cli("render", ".", "--env", "dev", "--mode", "manifests", flag, value, cwd=tmp_path)
    assert assert_clean_failure(result, 1) == [expected]


def test_a_good_platform_file_reaches_the_objects(tmp_path: Path) -> None:
    write_app(tmp_path, MINIMAL.replace("expose: port: 8080", 'expose: {port: 8080, network: "public"}'))
    (tmp_path / "platform.yaml").write_text("domain: apps.acme.test\nipFamilies: [ipv6]\n"
                                            "gateway: {name: edge, namespace: gw}\nproviderNamespaces: {pg: db}\n")
    result = run_cli("render", ".", "--env", "prod", "--mode", "manifests", "--platform", "platform.yaml",
                     cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "demo.prod.apps.acme.test" in result.stdout and "- IPv6" in result.stdout
    assert "name: edge" in result.stdout and "namespace: gw" in result.stdout


# 6. and 7. render --all: deep trees, empty batches, non-regular files.

def test_render_all_on_a_directory_without_apps_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    lines = assert_clean_failure(run_cli("render", "--all", str(tmp_path)), 1)
    assert lines == [f"{tmp_path}: no apprafter/Application.cue below this directory: nothing to render"]


def test_render_all_refuses_a_very_deep_tree_in_one_line(tmp_path: Path) -> None:
    deep = tmp_path
    for _ in range(40):
        deep = deep / "d"
    deep.mkdir(parents=True)
    write_app(tmp_path / "app", MINIMAL)
    lines = assert_clean_failure(run_cli("render", "--all", str(tmp_path)), 1)
    assert len(lines) == 1 and lines[0].endswith("more than 32 directory levels below the --all directory: "
                                                 "refused (point --all at the apps' directory)")


def fifo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("where", ["app", "platform", "plan-cr", "plan-cue"])
def test_a_fifo_is_refused_instead_of_blocking(tmp_path: Path, where: str) -> None:
    write_app(tmp_path / "ok", MINIMAL)
    if where == "app":
        fifo(tmp_path / "apprafter" / "Application.cue")
        args: tuple[str, ...] = ("render", ".", "--env", "dev")
    elif where == "platform":
        fifo(tmp_path / "platform.yaml")
        args = ("render", "ok", "--env", "dev", "--platform", "platform.yaml")
    elif where == "plan-cr":
        fifo(tmp_path / "cr.yaml")
        args = ("plan", "--from", "cr.yaml", "--to", "ok", "--env", "dev")
    else:
        fifo(tmp_path / "x" / "apprafter" / "Application.cue")
        args = ("plan", "--from", "ok", "--to", "x", "--env", "dev")
    result = run_capped(*args, cwd=tmp_path, memory_mb=1024, timeout=60)
    lines = assert_clean_failure(result, 1)
    assert lines[0].endswith("is a FIFO, not a regular file"), lines


def test_an_oversized_platform_file_is_refused(tmp_path: Path) -> None:
    write_app(tmp_path, MINIMAL)
    (tmp_path / "platform.yaml").write_text("domain: a.b\n" + "# pad\n" * 200000)
    result = run_cli("render", ".", "--env", "dev", "--platform", "platform.yaml", cwd=tmp_path)
    assert assert_clean_failure(result, 1) == ["platform.yaml:1:1: refused: the platform file is larger than "
                                               "1048576 bytes"]


def test_cue_printing_more_than_the_budget_is_stopped(tmp_path: Path) -> None:
    """A few lines of CUE that export megabytes: cue is cut off when its output passes 1/32 of the budget."""
    write_app(tmp_path, 'import ("list", "strings")\n\n' + MINIMAL.replace("prod: replicas: 2", "prod: args: _big")
              + '_x: strings.Repeat("x", 100000)\n_big: [for i in list.Range(0, 100, 1) {_x}]\n')
    result = run_cli("render", ".", "--env", "prod", cwd=tmp_path, env={"APPRAFTER_CUE_MEMORY_MB": "256"})
    assert assert_clean_failure(result, 2) == [
        "apprafter: cue printed more than 8 MiB and was stopped: the input evaluates to far more than it "
        "declares (raise APPRAFTER_CUE_MEMORY_MB, or simplify the input)"]


# 9. The injected schema cannot be reopened from the user's package.

@pytest.mark.parametrize(("reopen", "field"), [
    ("#Workload: hostNetwork?: bool\nspec: base: hostNetwork: true\n", "spec.base.hostNetwork"),  # passed on main
    ("#Workload: {hostNetwork: bool}\nspec: base: hostNetwork: true\n", "spec.base.hostNetwork"),
    ("#Expose: {hostPort?: int}\nspec: base: expose: hostPort: 80\n", "spec.base.expose.hostPort"),
    ("#ApplicationBase: securityContext?: privileged: bool\nspec: base: securityContext: privileged: true\n",
     "spec.base.securityContext"),
])
def test_a_user_definition_cannot_extend_the_schema(tmp_path: Path, reopen: str, field: str) -> None:
    write_app(tmp_path, MINIMAL + reopen)
    lines = assert_clean_failure(run_cli("render", ".", "--env", "dev", cwd=tmp_path), 1)
    assert lines == [f"{F}:15:{lines[0].split(':')[2]}: {field}: field not allowed"]


def test_a_user_definition_named_like_the_schema_is_only_the_users(tmp_path: Path) -> None:
    write_app(tmp_path, MINIMAL + "#Application: spec: base: privileged: true\n")
    result = run_cli("render", ".", "--env", "dev", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "privileged" not in result.stdout


def test_the_process_own_memory_budget_ends_in_one_line() -> None:
    """What apprafter's own work allocates past APPRAFTER_CUE_MEMORY_MB is a MemoryError, reported as the budget."""
    script = ("from apprafter.budget import limit_own_memory\nfrom apprafter.errors import reported\n\n"
              "@reported\ndef work():\n    limit_own_memory()\n    return bytearray(512 << 20)\n\nwork()\n")
    result = subprocess.run([sys.executable, "-c", script], env={**os.environ, "APPRAFTER_CUE_MEMORY_MB": "64"},
                            capture_output=True, text=True, timeout=60, check=False)
    assert assert_clean_failure(result, 2) == [
        "apprafter: the work on this input exceeded its memory budget and was stopped (raise "
        "APPRAFTER_CUE_MEMORY_MB, or simplify the input)"]
