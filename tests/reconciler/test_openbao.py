"""The OpenBao backend's decisions without a server: the path an openBaoPath reads, OpenBao's replies (a KV v2 read,
a Kubernetes login) read into material / missing / cannot tell in words without the token or the material, when
to read again and when to log in anew, and the operator's flags checked together."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from apprafter.operator_cmd import operator
from lifecycle import openbao as bao
from lifecycle.credential_outputs import Material, Unreadable, half_conditions
from lifecycle.sourcecredential import check

TOKEN = "s.the-client-token-never-printed"
PASSWORD = "pw-never-printed"
PATH = bao.KvPath("secret", "myorg/github")


def _kv(data: object, version: int = 3, **metadata: object) -> bytes:
    return json.dumps({"data": {"data": data, "metadata": {"version": version, **metadata}}}).encode()


def test_a_path_is_mount_then_secret_as_bao_kv_get_takes_it() -> None:
    assert bao.kv_path("secret/myorg/github") == PATH and PATH.api == "/v1/secret/data/myorg/github"
    assert str(PATH) == "secret/myorg/github"
    for bad in ("github", "/secret/x", "secret//x", "secret/../sys/raw", "secret/./x", "secret/x/", "secret/.hidden",
                "https://bao/x?token=s", "secret/x y", ""):
        assert bao.kv_path(bad) is None, bad
        spec = {"git": {"backend": {"openBaoPath": bad}, "repoPrefixes": ["github.com/o/"]}}
        problems = check({"metadata": {"name": "c", "namespace": "ns"}, "spec": spec}, "ns")
        assert [field for field, _ in problems] == ["spec.git.backend.openBaoPath"], bad  # the webhook's twin


def test_a_read_finds_the_login_and_says_where_and_which_version() -> None:
    found = bao.read_reply(PATH, 200, _kv({"username": "deploy", "password": PASSWORD}))
    assert found == Material("deploy", PASSWORD, "OpenBao secret/myorg/github, version 3")
    present = half_conditions(found)[0]
    assert (present.status, present.reason) == ("True", "MaterialFound")
    assert present.message == "the material was found with its keys (OpenBao secret/myorg/github, version 3)"


def test_a_missing_key_a_missing_secret_and_a_deleted_version_are_present_false() -> None:
    lacking = bao.read_reply(PATH, 200, _kv({"username": "deploy", "token": PASSWORD}))
    assert lacking == ("OpenBao secret secret/myorg/github (version 3) lacks a usable password (keys username, "
                       "password: one line of UTF-8 each)")
    two_lines = bao.read_reply(PATH, 200, _kv({"username": "deploy", "password": "a\nb"}))
    assert isinstance(two_lines, str) and "a\nb" not in two_lines
    not_a_string = bao.read_reply(PATH, 200, _kv({"username": "deploy", "password": 1234}))
    assert isinstance(not_a_string, str) and "lacks a usable password" in not_a_string
    absent = bao.read_reply(PATH, 404, b'{"errors":[]}')
    assert absent == ("OpenBao has no secret secret/myorg/github (GET /v1/secret/data/myorg/github: KV v2 mount "
                      "'secret', secret 'myorg/github')")
    deleted = bao.read_reply(PATH, 404, _kv(None, 4, deletion_time="2026-12-01T21:00:00Z", destroyed=False))
    assert isinstance(deleted, str) and "(version 4) is deleted" in deleted
    for missing in (lacking, absent, deleted):
        present = half_conditions(missing)[0]
        assert (present.status, present.reason) == ("False", "MaterialMissing")


@pytest.mark.parametrize(("status", "body", "reason", "said"), [
    (403, b'{"errors":["permission denied"]}', bao.ACCESS_DENIED,
     "OpenBao refused to read secret/myorg/github: permission denied (HTTP 403): the operator's policy needs `read` "
     "on secret/data/myorg/github"),
    (503, b'{"errors":["Vault is sealed"]}', bao.BACKEND_UNAVAILABLE,
     "OpenBao: GET /v1/secret/data/myorg/github: HTTP 503: Vault is sealed (read again later)"),
    (500, b"<html>proxy error</html>", bao.BACKEND_UNAVAILABLE,
     "OpenBao: GET /v1/secret/data/myorg/github: HTTP 500 (read again later)"),
    (200, json.dumps({"data": {"username": "deploy", "password": PASSWORD}}).encode(), bao.BACKEND_UNAVAILABLE,
     "OpenBao answered GET /v1/secret/data/myorg/github with no KV v2 secret (is 'secret' a KV version 2 mount?)"),
])
def test_what_cannot_tell_is_present_unknown(status: int, body: bytes, reason: str, said: str) -> None:
    found = bao.read_reply(PATH, status, body)
    assert found == Unreadable(reason, said) and PASSWORD not in said
    present, valid = half_conditions(found)
    assert (present.status, present.reason, present.message) == ("Unknown", reason, said)
    assert (valid.status, valid.reason) == ("Unknown", "Unverified")
    nothing = half_conditions(bao.not_configured())[0]
    assert (nothing.status, nothing.reason) == ("Unknown", "BackendUnavailable")
    assert "--openbao-address" in nothing.message


def test_a_login_gives_a_token_renewed_before_its_lease_ends_and_never_shown() -> None:
    where, body = bao.login_request("kubernetes", "apprafter-operator", "the.jwt")
    assert where == "/v1/auth/kubernetes/login" and json.loads(body) == {"role": "apprafter-operator", "jwt": "the.jwt"}
    reply = json.dumps({"auth": {"client_token": TOKEN, "lease_duration": 3600, "renewable": True}}).encode()
    token = bao.login_reply("apprafter-operator", 200, reply, now=100.0)
    assert isinstance(token, bao.Token) and token.value == TOKEN and TOKEN not in repr(token)
    assert token.relogin_at == 100.0 + bao.RELOGIN_AT * 3600
    assert bao.token_due(None, 0.0) and not bao.token_due(token, 100.0 + 2879) and bao.token_due(token, 100.0 + 2880)
    forever = bao.login_reply("r", 200, json.dumps({"auth": {"client_token": TOKEN, "lease_duration": 0}}).encode(), 1)
    assert isinstance(forever, bao.Token) and not bao.token_due(forever, 1e12)
    refused = bao.login_reply("apprafter-operator", 400, b'{"errors":["invalid role name \\"x\\""]}', 0.0)
    assert refused == Unreadable(bao.ACCESS_DENIED, "OpenBao refused the operator's Kubernetes login as role "
                                 "'apprafter-operator': invalid role name \"x\" (HTTP 400): check the role's bound "
                                 "ServiceAccount and namespace")
    failing = bao.login_reply("r", 502, b"", 0.0)
    assert failing == Unreadable(bao.BACKEND_UNAVAILABLE, "OpenBao's Kubernetes login as role 'r' failed: HTTP 502 "
                                 "(read again later)")


def test_reads_repeat_on_the_interval_and_back_off_while_they_cannot_tell() -> None:
    found = Material("u", "p")
    assert bao.wait_before_read(None, "secret/a", 0.0, 600.0, 300.0).seconds == 0.0
    first = bao.after_read(None, "secret/a", found, now=10.0)
    assert bao.wait_before_read(first, "secret/a", 10.0, 600.0, 300.0).seconds == 600.0
    assert bao.wait_before_read(first, "secret/b", 10.0, 600.0, 300.0).seconds == 0.0  # a changed path: at once
    down = bao.after_read(first, "secret/a", bao.unreachable("http://127.0.0.1:1", "cannot connect"), now=20.0)
    again = bao.after_read(down, "secret/a", bao.unreachable("http://127.0.0.1:1", "cannot connect"), now=25.0)
    assert (down.unreadable_runs, again.unreadable_runs) == (1, 2)
    assert bao.wait_before_read(down, "secret/a", 20.0, 600.0, 300.0).seconds == 5.0
    assert bao.wait_before_read(again, "secret/a", 25.0, 600.0, 300.0).seconds == 10.0
    assert bao.after_read(again, "secret/a", found, now=30.0).unreadable_runs == 0


def test_the_address_is_a_bare_http_url() -> None:
    assert bao.address_problem("https://openbao.openbao.svc:8200") is None
    assert bao.address_problem("http://127.0.0.1:8200/") is None
    for bad in ("openbao:8200", "ftp://x", "https://user:tok@bao:8200", "https://bao:8200/v1", "https://bao?x=1",
                "https://bao:port"):
        assert bao.address_problem(bad), bad


@pytest.mark.parametrize(("args", "said"), [
    (["--openbao-address", "https://bao:8200"], "exactly one of --openbao-auth-role"),
    (["--openbao-address", "https://bao:8200", "--openbao-auth-role", "r", "--openbao-token-file", "/t"],
     "exactly one of --openbao-auth-role"),
    (["--openbao-auth-role", "r"], "need --openbao-address"),
    (["--openbao-address", "https://bao:8200/v1/secret", "--openbao-auth-role", "r"], "no user@, path"),
])
def test_the_operator_refuses_an_openbao_flag_set_that_cannot_log_in(args: list[str], said: str) -> None:
    result = CliRunner().invoke(operator, ["--kubeconfig", "/nonexistent", *args])
    assert result.exit_code == 2 and said in result.output, result.output
