"""Reading a registry's `Www-Authenticate` challenge and its token service's reply (pure functions)."""

from __future__ import annotations

import pytest

from platform_stack.registry.challenge import Challenge, parse_challenge, token_from


@pytest.mark.parametrize(("header", "scheme", "params"), [
    ('Bearer realm="https://ghcr.io/token",service="ghcr.io",scope="repository:acme/stack:pull,push"', "bearer",
     {"realm": "https://ghcr.io/token", "service": "ghcr.io", "scope": "repository:acme/stack:pull,push"}),
    ('Bearer realm="https://r/token",error="insufficient_scope",scope="repository:a:push"', "bearer",
     {"realm": "https://r/token", "error": "insufficient_scope", "scope": "repository:a:push"}),
    ('Basic realm="Registry Realm"', "basic", {"realm": "Registry Realm"}),
    ("basic realm=registry", "basic", {"realm": "registry"}),
    ('Bearer Realm="a\\"b", realm="second"', "bearer", {"realm": 'a"b'}),
    ("Bearer", "bearer", {}),
], ids=["ghcr", "insufficient-scope", "basic", "token-value", "escape-and-repeat", "bare"])
def test_a_challenge_is_read_as_rfc_7235_says(header: str, scheme: str, params: dict[str, str]) -> None:
    assert parse_challenge(header) == Challenge(scheme, params)


@pytest.mark.parametrize("header", ["", "   ", "realm=x"])
def test_no_challenge(header: str) -> None:
    assert parse_challenge(header) is None


@pytest.mark.parametrize(("realm", "plain_http", "url"), [
    ("https://auth.example/token", False, "https://auth.example/token"),
    ("http://127.0.0.1:5001/token", True, "http://127.0.0.1:5001/token"),
    ("http://auth.example/token", False, None),  # the credentials would cross in clear
    ("auth.example/token", False, None),
    ("file:///etc/passwd", True, None),
    ("", True, None),
])
def test_the_token_service_must_be_an_http_url_and_tls_for_a_tls_registry(realm: str, plain_http: bool,
                                                                          url: str | None) -> None:
    assert Challenge("bearer", {"realm": realm} if realm else {}).token_url(plain_http) == url


@pytest.mark.parametrize(("reply", "token"), [
    ({"token": "abc"}, "abc"),
    ({"access_token": "xyz", "expires_in": 300}, "xyz"),
    ({"token": "", "access_token": "xyz"}, "xyz"),
    ({"token": 42}, None),
    ({"token": "a b"}, None),  # would split the Authorization header
    ({"token": "a\r\nX-Injected: 1"}, None),
    (["abc"], None),
    (None, None),
])
def test_a_token_is_a_printable_word(reply: object, token: str | None) -> None:
    assert token_from(reply) == token
