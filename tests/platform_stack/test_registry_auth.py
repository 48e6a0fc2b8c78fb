"""Push, sign and verify against a registry that wants credentials (Debian's docker-registry: HTTP Basic and the
token protocol), with credentials where users keep them; 401/403/404 each one clear line."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.platform_stack.conftest import cli, ok
from tests.testbed.distribution import AuthRegistry
from toolchain.tools import resolve, tools_dir

pytestmark = pytest.mark.testbed
KeyPair = Callable[[str], tuple[Path, Path, str]]


def no_credentials(tmp_path: Path) -> dict[str, str]:
    """An env in which neither Docker's nor Helm's config holds anything (a private HOME)."""
    home = tmp_path / "empty-home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("DOCKER_CONFIG", "HELM_REGISTRY_CONFIG",
                                                           "XDG_CONFIG_HOME")}
    return {**env, "HOME": str(home), "APPRAFTER_TOOLS_DIR": str(tools_dir())}  # the tools stay found


def one_line(proc: subprocess.CompletedProcess[str], code: int) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_push_without_credentials_is_one_line_naming_the_login(stack_all: Path, auth_registry: AuthRegistry,
                                                                 tmp_path: Path) -> None:
    proc = cli("stack", "push", str(stack_all), "--to", f"oci://{auth_registry.url}/acme", "--plain-http",
               env=no_credentials(tmp_path))
    line = one_line(proc, 2)
    assert "401 Unauthorized" in line and f"docker login {auth_registry.url}" in line
    assert str(tmp_path / "empty-home" / ".docker" / "config.json") in line


def test_docker_config_credentials_push_sign_and_verify(auth_registry: AuthRegistry, key_pair: KeyPair,
                                                        tmp_path: Path) -> None:
    key, pub, password = key_pair("release")
    docker = auth_registry.docker_config(tmp_path / "docker")
    env = {**no_credentials(tmp_path), "DOCKER_CONFIG": str(docker), "COSIGN_PASSWORD": password}
    proc = cli("stack", "release", "--tier", "dev", "--out", str(tmp_path / "out"), "--to",
               f"oci://{auth_registry.url}/release", "--key", str(key), "--public-key", str(pub), "--plain-http",
               env=env)
    ref = ok(proc).splitlines()[-1]
    assert ref.startswith(f"oci://{auth_registry.url}/release/platform-stack-dev:")
    assert auth_registry.password not in proc.stdout + proc.stderr
    # The same credentials reach cosign: verifying needs them, and works from the Docker config alone.
    assert ok(cli("stack", "verify", ref, "--key", str(pub), env=env)).strip() == f"verified {ref}"
    denied = cli("stack", "verify", ref, "--key", str(pub), env=no_credentials(tmp_path))
    assert "401 Unauthorized" in one_line(denied, 2)


def test_helm_registry_login_credentials_are_used(stack_all: Path, auth_registry: AuthRegistry,
                                                  tmp_path: Path) -> None:
    env = no_credentials(tmp_path)
    login = subprocess.run([str(resolve("helm")), "registry", "login", auth_registry.url, "--username",
                            auth_registry.user, "--password-stdin", "--plain-http"],
                           input=auth_registry.password, capture_output=True, text=True, env=env, timeout=60,
                           check=False)
    assert login.returncode == 0, login.stderr
    helm_config = tmp_path / "empty-home" / ".config" / "helm" / "registry" / "config.json"
    assert helm_config.is_file()  # written by the real helm, where users have it
    pushed = ok(cli("stack", "push", str(stack_all), "--to", f"oci://{auth_registry.url}/helmlogin", "--plain-http",
                    env=env)).strip()
    assert pushed.startswith(f"oci://{auth_registry.url}/helmlogin/platform-stack:")


def test_refused_credentials_and_unknown_tags_are_one_line_each(stack_all: Path, auth_registry: AuthRegistry,
                                                                key_pair: KeyPair, tmp_path: Path) -> None:
    wrong = auth_registry.docker_config(tmp_path / "wrong", password="not-the-password")
    env = {**no_credentials(tmp_path), "DOCKER_CONFIG": str(wrong)}
    refused = one_line(cli("stack", "push", str(stack_all), "--to", f"oci://{auth_registry.url}/acme",
                           "--plain-http", env=env), 2)
    assert "401 Unauthorized" in refused and "were refused" in refused and str(wrong) in refused
    assert "not-the-password" not in refused
    _, pub, _ = key_pair("release")
    good = {**no_credentials(tmp_path), "DOCKER_CONFIG": str(auth_registry.docker_config(tmp_path / "good"))}
    missing = one_line(cli("stack", "verify", f"oci://{auth_registry.url}/acme/none:9.9.9", "--key", str(pub),
                           env=good), 1)
    assert missing == f"oci://{auth_registry.url}/acme/none:9.9.9: verify: tag 9.9.9 not found"


@pytest.mark.parametrize("auth_registry", ["token"], indirect=True)  # htpasswd has no per-account access
def test_a_pull_only_account_cannot_push(stack_all: Path, auth_registry: AuthRegistry, tmp_path: Path) -> None:
    reader = auth_registry.docker_config(tmp_path / "reader", auth_registry.reader, auth_registry.reader_password)
    line = one_line(cli("stack", "push", str(stack_all), "--to", f"oci://{auth_registry.url}/acme", "--plain-http",
                        env={**no_credentials(tmp_path), "DOCKER_CONFIG": str(reader)}), 2)
    assert "may not" in line and "push" in line


def test_credentials_in_a_reference_are_refused_and_never_printed(stack_all: Path, tmp_path: Path) -> None:
    proc = cli("stack", "push", str(stack_all), "--to", "oci://alice:hunter2-secret@127.0.0.1:1/acme",
               env=no_credentials(tmp_path))
    line = one_line(proc, 1)
    assert "hunter2-secret" not in line and "alice" not in line
    assert "docker login 127.0.0.1:1" in line and "oci://***@127.0.0.1:1" in line
