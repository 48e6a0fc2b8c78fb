"""Invariants beyond the schema (the webhook's rules), reported all at once with positions in the user's file."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from typing import Any

from renderer.effective import effective_spec
from renderer.errors import Problem
from renderer.load import LoadedApp
from renderer.positions import PositionIndex

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
ENV_KEY = re.compile(r"^[A-Z_][A-Z0-9_]*$")
SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
# The one rewrite Gateway API can express: a prefix capture replaced by another prefix.
REWRITE_FROM = re.compile(r"^(?P<prefix>/[^()*+?\[\]{}|\\^$]*?)/?\(\.\*\)$")
REWRITE_TO = re.compile(r"^(?P<prefix>/[^$()]*?)/?\$1$")
MAX_NAME = 63
# The plugin stamps spec.environment; switching it swaps the whole effective spec (spec §3.8). Also a CEL rule.
ENVIRONMENT_IMMUTABLE = ("is immutable: a different environment is a different deployment (<app>-<env>); "
                         "create a new Application instead")


def rewrite_prefixes(rewrite: dict[str, str]) -> tuple[str, str] | None:
    """(match prefix, replacement prefix) for a rewrite Gateway API can express, else None."""
    f, t = REWRITE_FROM.match(rewrite.get("from", "")), REWRITE_TO.match(rewrite.get("to", ""))
    if not f or not t:
        return None
    return (f["prefix"] or "/", t["prefix"] or "/")


def environments(app: LoadedApp) -> list[str]:
    return sorted(app.document.get("spec", {}).get("environments", {}))


class _Checker:
    def __init__(self, app: LoadedApp) -> None:
        self.app = app
        self.problems: list[Problem] = []

    @functools.cached_property
    def index(self) -> PositionIndex:
        """Positions in the user's file, found only when there is a problem to place (scanning costs ms)."""
        return self.app.source.index

    def add(self, path: tuple[str | int, ...], message: str) -> None:
        line, col = self.index.find(path)
        field = ".".join(str(p) for p in path)
        self.problems.append(Problem(self.app.source.display, line, col, field, message))

    def where(self, env: str, *rel: str | int) -> tuple[str | int, ...]:
        """The written location of an effective field: the override when it sets it, else base."""
        in_env = ("spec", "environments", env, *rel)
        for n in range(len(rel), 0, -1):
            if self.index.has(in_env[: 3 + n]):
                return in_env
        return ("spec", "base", *rel)


def check_document(app: LoadedApp) -> list[Problem]:
    """Environment-independent rules: names, at least one environment, env keys, secret refs."""
    c = _Checker(app)
    name = app.document.get("metadata", {}).get("name", "")
    if not DNS_LABEL.match(name) or len(name) > MAX_NAME:
        c.add(("metadata", "name"), f"{name!r} is not a DNS-1123 label (lowercase letters, digits, '-', "
              f"at most {MAX_NAME} characters)")
    spec = app.document.get("spec", {})
    envs = spec.get("environments", {})
    if not envs:
        c.add(("spec", "environments"), "declare at least one environment")
    for env in envs:
        if not DNS_LABEL.match(env) or len(env) > MAX_NAME:
            c.add(("spec", "environments", env), f"environment name {env!r} is not a DNS-1123 label")
    for env, budget_env in ((e, e) for e in spec.get("budget", {})):
        if budget_env not in envs:
            c.add(("spec", "budget", env), f"budget for undeclared environment {env!r}")
    for scope, workload in _workloads(spec):
        for key, value in workload.get("env", {}).items():
            if not ENV_KEY.match(key):
                c.add((*scope, "env", key), f"env key {key!r} must match ^[A-Z_][A-Z0-9_]*$")
            if isinstance(value, dict) and "secret" in value:
                ref = value["secret"]
                secret, _, key_part = ref.partition("/")
                if not (DNS_SUBDOMAIN.match(secret) and len(secret) <= 253 and SECRET_KEY.match(key_part)):
                    c.add((*scope, "env", key, "secret"),
                          f'secret reference {ref!r} must be "<secret-name>/<key>" (a DNS-1123 name and a key)')
    return c.problems


def _workloads(spec: dict[str, Any]) -> Iterator[tuple[tuple[str, ...], dict[str, Any]]]:
    yield ("spec", "base"), spec.get("base", {})
    for env, override in spec.get("environments", {}).items():
        yield ("spec", "environments", env), override


def check_environment(app: LoadedApp, env: str) -> list[Problem]:
    """Rules on the effective spec of one environment."""
    c = _Checker(app)
    eff = effective_spec(app.document["spec"], env)
    if not eff.get("image"):
        c.add(c.where(env, "image"), f"image is empty in environment {env!r}: set base.image or "
              f"environments.{env}.image")
    needs = eff.get("needs", {})
    for key, value in eff.get("env", {}).items():
        if isinstance(value, dict) and "claim" in value:
            need = value["claim"].split("/", 1)[0]
            if need not in needs:
                c.add(c.where(env, "env", key), f"claim.{value['claim'].replace('/', '.')} refers to need "
                      f"{need!r}, which environment {env!r} does not declare")
    expose = eff.get("expose")
    if expose is not None:
        if "port" not in expose:
            c.add(c.where(env, "expose"), f"expose.port is required (environment {env!r})")
        for i, path in enumerate(expose.get("paths", [])):
            if not path.startswith("/"):
                c.add((*c.where(env, "expose", "paths"), i), f"path {path!r} must start with '/'")
        hostname = expose.get("hostname")
        if hostname is not None and not DNS_SUBDOMAIN.match(hostname):
            c.add(c.where(env, "expose", "hostname"), f"hostname {hostname!r} is not a DNS name")
        for i, rewrite in enumerate(expose.get("rewrites", [])):
            if rewrite_prefixes(rewrite) is None:
                c.add((*c.where(env, "expose", "rewrites"), i),
                      f"rewrite {rewrite.get('from')!r} -> {rewrite.get('to')!r} cannot be expressed in Gateway "
                      "API: use a prefix capture, from: \"/old/(.*)\" to: \"/new/$1\"")
        protocols = expose.get("protocols")
        if protocols is not None and (not protocols or len(set(protocols)) != len(protocols)):
            c.add(c.where(env, "expose", "protocols"), "protocols must list ipv6 and/or ipv4, each once")
    autoscale = eff.get("autoscale")
    if autoscale and autoscale.get("min", 0) > autoscale.get("max", 0):
        c.add(c.where(env, "autoscale"), f"autoscale.min ({autoscale['min']}) exceeds autoscale.max "
              f"({autoscale['max']})")
    if autoscale and autoscale.get("on") == "jetstream_lag" and not needs.get("jetstream", {}).get("streams"):
        c.add(c.where(env, "autoscale", "on"), "autoscale on jetstream_lag needs needs.jetstream with at "
              "least one stream")
    if autoscale and autoscale.get("on") in ("cpu", "memory") and autoscale.get("min", 0) < 1:
        c.add(c.where(env, "autoscale", "min"), f"autoscale on {autoscale['on']} needs min >= 1 "
              "(scaling to zero needs an event source such as jetstream_lag)")
    external = eff.get("connects", {}).get("egress", {}).get("external", [])
    for i, rule in enumerate(external):
        if ("host" in rule) == ("cidr" in rule):
            c.add((*c.where(env, "connects", "egress", "external"), i),
                  "each external egress rule needs exactly one of host or cidr")
    return c.problems


def check(app: LoadedApp, envs: list[str] | None = None) -> list[Problem]:
    """Every problem for the given environments (all when None), document-level ones first."""
    problems = check_document(app)
    declared = environments(app)
    for env in declared if envs is None else envs:
        if env in declared:
            problems.extend(check_environment(app, env))
    return problems


def check_update(old: Mapping[str, Any], new: Mapping[str, Any], display: str = "") -> list[Problem]:
    """Rules on changing an Application object in the cluster: spec.environment stays what it was."""
    before, after = (d.get("spec", {}).get("environment") for d in (old, new))
    if before == after:
        return []
    return [Problem(display, 0, 0, "spec.environment", f"{ENVIRONMENT_IMMUTABLE} (was {before!r}, now {after!r})")]
