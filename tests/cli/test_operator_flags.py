"""`apprafter operator`'s image-update flags as the operator reads them (click's parse, then OperatorSettings.of):
what reaches the Application controller."""

from __future__ import annotations

from apprafter.operator_cmd import operator
from apprafter.operator_settings import OperatorSettings


def platform_of(*args: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    context = operator.make_context("operator", ["--kubeconfig", "/nonexistent", *args])
    platform = OperatorSettings.of(context.params).platform
    return platform.image_registries, platform.insecure_registries


def test_registry_patterns_are_repeatable_and_kept_apart() -> None:
    assert platform_of() == ((), ())  # neither given: every registry asked, over HTTPS unless loopback
    given = platform_of("--image-registries", "*.example.com", "--image-registries", "registry.lan:5000",
                        "--insecure-registries", "registry.lan:5000", "--insecure-registries", "10.0.0.7:*")
    assert given == (("*.example.com", "registry.lan:5000"), ("registry.lan:5000", "10.0.0.7:*"))


def test_the_help_says_credentials_travel_in_clear() -> None:
    [option] = [p for p in operator.params if "--insecure-registries" in p.opts]
    assert "in clear" in (getattr(option, "help", None) or "")
