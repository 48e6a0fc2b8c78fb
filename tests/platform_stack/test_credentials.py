"""Registry credentials read the way docker and helm store them, including credential helpers and Secrets."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path

import pytest

from platform_stack.credentials import (
    credential_for,
    docker_config_json,
    local_configs,
    parse_docker_config,
    registry_key,
)
from toolchain.errors import ToolFailure, UserError


def auth(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.mark.parametrize(("server", "key"), [
    ("ghcr.io", "ghcr.io"), ("https://ghcr.io", "ghcr.io"), ("https://index.docker.io/v1/", "docker.io"),
    ("registry-1.docker.io", "docker.io"), ("127.0.0.1:5000", "127.0.0.1:5000"), ("HTTP://Quay.IO/v2/", "quay.io"),
])
def test_registry_keys_are_normalised_as_docker_does(server: str, key: str) -> None:
    assert registry_key(server) == key


def test_inline_auth_and_username_password_entries() -> None:
    config = parse_docker_config(json.dumps({"auths": {
        "https://index.docker.io/v1/": {"auth": auth("hub", "pw:with:colons")},
        "ghcr.io": {"username": "gh", "password": "tok"},
        "quay.io": {"identitytoken": "refresh"},
    }}), "config.json")
    hub = credential_for([config], "docker.io")
    assert hub is not None and (hub.username, hub.password, hub.source) == ("hub", "pw:with:colons", "config.json")
    ghcr = credential_for([config], "ghcr.io")
    assert ghcr is not None and ghcr.basic() == auth("gh", "tok")
    assert credential_for([config], "quay.io") is None  # an OAuth refresh token is not a Basic credential
    assert "tok" not in repr(ghcr)


def test_a_secrets_dockerconfigjson_reads_the_same_and_helpers_are_not_run_in_cluster(tmp_path: Path) -> None:
    secret_value = json.dumps({"auths": {"ghcr.io": {"auth": auth("bot", "s3cret")}}, "credsStore": "desktop"})
    config = parse_docker_config(base64.b64decode(base64.b64encode(secret_value.encode())), "secret acme/pull")
    found = credential_for([config], "ghcr.io", helpers=False)
    assert found is not None and found.password == "s3cret" and found.source == "secret acme/pull"
    assert credential_for([config], "quay.io", helpers=False) is None


@pytest.mark.parametrize(("text", "expected"), [
    ('{"auths": {"ghcr.io": {"auth": "!!"}}}', "cfg.json:1:32: auths.ghcr.io.auth: not base64 of user:password"),
    ('{"auths": {"ghcr.io": {"auth": "' + base64.b64encode(b"nocolon").decode() + '"}}}',
     "cfg.json:1:32: auths.ghcr.io.auth: not base64 of user:password"),
    ('{"auths": []}', "cfg.json:1:2: auths: expected a mapping of registry -> {auth}"),
    ('{"auths": {"a": {"auth": "x"}, "a": {}}}', "cfg.json:1:32: auths.a: duplicate key"),
    ("{not json", "cfg.json:1:2: not valid JSON:"),
])
def test_a_broken_config_is_one_line_at_the_field(text: str, expected: str) -> None:
    with pytest.raises(UserError) as err:
        parse_docker_config(text, "cfg.json")
    assert str(err.value).startswith(expected)


def helper(directory: Path, name: str, script: str) -> None:
    path = directory / f"docker-credential-{name}"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_credential_helpers_are_asked_for_their_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    helper(tmp_path, "good", 'read host; printf \'{"ServerURL": "%s", "Username": "u", "Secret": "from-helper"}\' '
                             '"$host"\n')
    helper(tmp_path, "none", "echo 'credentials not found in native keychain'; exit 1\n")
    helper(tmp_path, "junk", "echo not json\n")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    config = parse_docker_config(json.dumps({"credHelpers": {"ghcr.io": "good", "quay.io": "junk"},
                                             "credsStore": "none"}), "config.json")
    found = credential_for([config], "ghcr.io")
    assert found is not None and found.password == "from-helper" and found.source == "docker-credential-good"
    assert credential_for([config], "example.com") is None
    with pytest.raises(ToolFailure, match="docker-credential-junk replied with something that is not a credential"):
        credential_for([config], "quay.io")
    missing = parse_docker_config('{"credsStore": "nowhere"}', "config.json")
    with pytest.raises(ToolFailure, match="docker-credential-nowhere not found"):
        credential_for([missing], "ghcr.io")


def test_local_configs_follow_docker_config_then_helm(tmp_path: Path) -> None:
    docker, helm = tmp_path / "docker", tmp_path / "helm.json"
    docker.mkdir()
    (docker / "config.json").write_text(json.dumps({"auths": {"ghcr.io": {"auth": auth("docker", "a")}}}))
    helm.write_text(json.dumps({"auths": {"ghcr.io": {"auth": auth("helm", "b")},
                                          "quay.io": {"auth": auth("helm", "c")}}}))
    configs = local_configs({"HOME": str(tmp_path / "nohome"), "DOCKER_CONFIG": str(docker),
                             "HELM_REGISTRY_CONFIG": str(helm)})
    first, second = credential_for(configs, "ghcr.io"), credential_for(configs, "quay.io")
    assert first is not None and first.username == "docker"
    assert second is not None and second.username == "helm" and second.source == str(helm)
    assert local_configs({"HOME": str(tmp_path / "nohome")}) == []


def test_the_config_handed_to_cosign_holds_only_that_host() -> None:
    config = parse_docker_config(json.dumps({"auths": {"a.io": {"auth": auth("x", "y")},
                                                       "b.io": {"auth": auth("p", "q")}}}), "c.json")
    found = credential_for([config], "a.io")
    assert found is not None
    assert json.loads(docker_config_json("a.io", found)) == {"auths": {"a.io": {"auth": auth("x", "y")}}}
