"""Table of classifier cases: one positive and at least one negative per application rule, plus env scoping."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

BASE: dict[str, Any] = {
    "image": "ghcr.io/acme/demo:1.0.0",
    "replicas": 2,
    "expose": {"port": 8080, "network": "public"},
    "needs": {"pg": {"size": "small", "version": "16"}, "redis": {}},
    "env": {"LOG_LEVEL": "info", "DATABASE_URL": {"claim": "pg/url"}, "API_KEY": {"secret": "vendor/key"}},
}


def app(base: dict[str, Any] | None = None, envs: dict[str, Any] | None = None, name: str = "demo",
        **spec: Any) -> dict[str, Any]:
    """An Application document (what cue exports) with BASE as base and dev/prod environments."""
    return {"apiVersion": "apprafter.io/v1alpha1", "kind": "Application", "metadata": {"name": name},
            "spec": {"base": copy.deepcopy(BASE if base is None else base),
                     "environments": copy.deepcopy(envs if envs is not None else {"dev": {}, "prod": {}}), **spec}}


def with_base(**fields: Any) -> dict[str, Any]:
    """BASE with fields replaced (None deletes)."""
    out = copy.deepcopy(BASE)
    for key, value in fields.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


E = BASE["env"]
X = BASE["expose"]
HTTP = {"readiness": {"path": "/healthz"}}  # an HTTP readiness probe on expose.port
API = {"host": "api.example.com", "port": 443}
DNS = {"cidr": "10.0.0.0/8", "port": 53, "protocol": "UDP"}


def egress(*rules: dict[str, Any]) -> dict[str, Any]:
    return {"egress": {"external": list(rules)}}


@dataclasses.dataclass(frozen=True)
class Case:
    """before -> after in environment env: does `rule` fire (on `field`)?"""

    id: str
    rule: str
    before: dict[str, Any]
    after: dict[str, Any]
    fires: bool
    field: str = ""
    env: str = "prod"


CASES: list[Case] = [
    # AR-DM001 need removed
    Case("need-removed", "AR-DM001", app(), app(with_base(needs={"pg": BASE["needs"]["pg"]})), True, "needs.redis"),
    Case("need-kept", "AR-DM001", app(), app(with_base(needs={**BASE["needs"], "s3": {}})), False),
    # AR-DM002 renamed
    Case("renamed", "AR-DM002", app(), app(name="demo2"), True, "metadata.name"),
    Case("same-name", "AR-DM002", app(), app(name="demo"), False),
    # AR-DM003 major version
    Case("pg-major", "AR-DM003", app(), app(with_base(needs={"pg": {"size": "small", "version": "17"}, "redis": {}})),
         True, "needs.pg.version"),
    Case("pg-minor", "AR-DM003", app(with_base(needs={"pg": {"version": "16.2"}})),
         app(with_base(needs={"pg": {"version": "16.4"}})), False),
    # AR-RR001 public hostname changed/removed
    Case("hostname-changed", "AR-RR001", app(with_base(expose={**X, "hostname": "a.example.com"})),
         app(with_base(expose={**X, "hostname": "b.example.com"})), True, "expose.hostname"),
    Case("hostname-removed", "AR-RR001", app(with_base(expose={**X, "hostname": "a.example.com"})),
         app(), True, "expose.hostname"),
    Case("hostname-changed-internal", "AR-RR001", app(with_base(expose={"port": 8080, "hostname": "a.example.com"})),
         app(with_base(expose={"port": 8080, "hostname": "b.example.com"})), False),
    Case("hostname-set-to-default", "AR-RR001", app(),
         app(with_base(expose={**X, "hostname": "demo.prod.apps.example.com"})), False),
    # AR-RR002 public -> non-public
    Case("public-to-vpn", "AR-RR002", app(), app(with_base(expose={**X, "network": "vpn"})), True, "expose.network"),
    Case("expose-removed", "AR-RR002", app(), app(with_base(expose=None)), True, "expose.network"),
    Case("internal-to-vpn", "AR-RR002", app(with_base(expose={"port": 1})),
         app(with_base(expose={"port": 1, "network": "vpn"})), False),
    # AR-RR003 scale to zero
    Case("to-zero", "AR-RR003", app(), app(with_base(replicas=0)), True, "replicas"),
    Case("default-to-zero", "AR-RR003", app(with_base(replicas=None)), app(with_base(replicas=0)), True, "replicas"),
    Case("autoscaled-to-zero", "AR-RR003", app(with_base(autoscale={"on": "cpu", "min": 1, "max": 3})),
         app(with_base(replicas=0)), True, "replicas"),
    Case("zero-under-autoscale", "AR-RR003", app(with_base(autoscale={"on": "cpu", "min": 1, "max": 3})),
         app(with_base(replicas=0, autoscale={"on": "cpu", "min": 1, "max": 3})), False),
    Case("down-to-one", "AR-RR003", app(), app(with_base(replicas=1)), False),
    # AR-RR004 reference removed
    Case("claim-ref-removed", "AR-RR004", app(), app(with_base(env={"LOG_LEVEL": "info", "API_KEY": E["API_KEY"]})),
         True, "env.DATABASE_URL"),
    Case("secret-ref-removed", "AR-RR004", app(),
         app(with_base(env={"LOG_LEVEL": "info", "DATABASE_URL": E["DATABASE_URL"]})), True, "env.API_KEY"),
    Case("literal-removed", "AR-RR004", app(), app(with_base(env={k: v for k, v in E.items() if k != "LOG_LEVEL"})),
         False),
    # AR-RR005 reference rewired to a claim
    Case("claim-retargeted", "AR-RR005", app(), app(with_base(env={**E, "DATABASE_URL": {"claim": "redis/url"}})),
         True, "env.DATABASE_URL"),
    Case("secret-to-claim", "AR-RR005", app(), app(with_base(env={**E, "API_KEY": {"claim": "pg/password"}})),
         True, "env.API_KEY"),
    Case("literal-to-claim", "AR-RR005", app(), app(with_base(env={**E, "LOG_LEVEL": {"claim": "pg/host"}})), False),
    # AR-RR006 readiness removed from a serving app
    Case("health-false", "AR-RR006", app(), app(with_base(health=False)), True, "health.readiness"),
    Case("health-false-in-prod", "AR-RR006", app(with_base(health=HTTP)),
         app(with_base(health=HTTP), {"dev": {}, "prod": {"health": False}}), True, "health.readiness"),
    Case("health-false-dev-only", "AR-RR006", app(), app(envs={"dev": {"health": False}, "prod": {}}), False),
    Case("health-false-at-zero", "AR-RR006", app(), app(with_base(health=False, replicas=0)), False),
    Case("readiness-removed-worker", "AR-RR006", app(with_base(expose=None, health={"readiness": {"port": 9000}})),
         app(with_base(expose=None)), False),
    Case("health-removed-keeps-default", "AR-RR006", app(with_base(health=HTTP)), app(), False),
    Case("health-false-already", "AR-RR006", app(with_base(health=False)),
         app(with_base(health=False, replicas=5)), False),
    # AR-SB001 secret reference added
    Case("secret-added", "AR-SB001", app(), app(with_base(env={**E, "TOKEN": {"secret": "other/token"}})), True,
         "env.TOKEN"),
    Case("literal-to-secret", "AR-SB001", app(), app(with_base(env={**E, "LOG_LEVEL": {"secret": "s/level"}})), True,
         "env.LOG_LEVEL"),
    Case("claim-added", "AR-SB001", app(), app(with_base(env={**E, "REDIS_URL": {"claim": "redis/url"}})), False),
    # AR-SB002 downgraded to a literal
    Case("secret-to-literal", "AR-SB002", app(), app(with_base(env={**E, "API_KEY": "hunter2"})), True, "env.API_KEY"),
    Case("claim-to-literal", "AR-SB002", app(), app(with_base(env={**E, "DATABASE_URL": "postgres://x"})), True,
         "env.DATABASE_URL"),
    Case("literal-edit", "AR-SB002", app(), app(with_base(env={**E, "LOG_LEVEL": "debug"})), False),
    # AR-SB003 secret retargeted
    Case("secret-retargeted", "AR-SB003", app(), app(with_base(env={**E, "API_KEY": {"secret": "vendor/other"}})),
         True, "env.API_KEY"),
    Case("secret-unchanged", "AR-SB003", app(), app(with_base(env=dict(E))), False),
    # AR-SB004 escalated to public
    Case("internal-to-public", "AR-SB004", app(with_base(expose={"port": 8080})), app(), True, "expose.network"),
    Case("expose-added-public", "AR-SB004", app(with_base(expose=None)), app(), True, "expose.network"),
    Case("expose-added-internal", "AR-SB004", app(with_base(expose=None)),
         app(with_base(expose={"port": 8080, "network": "internal"})), False),
    # AR-SB005 public hostname added
    Case("hostname-added", "AR-SB005", app(), app(with_base(expose={**X, "hostname": "new.example.com"})), True,
         "expose.hostname"),
    Case("hostname-added-internal", "AR-SB005", app(with_base(expose={"port": 8080})),
         app(with_base(expose={"port": 8080, "hostname": "new.example.com"})), False),
    # AR-SB006 public port retargeted
    Case("public-port", "AR-SB006", app(), app(with_base(expose={**X, "port": 9090})), True, "expose.port"),
    Case("internal-port", "AR-SB006", app(with_base(expose={"port": 8080})), app(with_base(expose={"port": 9090})),
         False),
    # AR-SB007 resolve off -> digest on a floating tag
    Case("resolve-relaxed", "AR-SB007", app(with_base(imagePolicy={"resolve": "off"})),
         app(with_base(imagePolicy={"resolve": "digest"})), True, "imagePolicy.resolve"),
    Case("resolve-default-relaxed", "AR-SB007", app(), app(with_base(imagePolicy={"resolve": "digest"})), True,
         "imagePolicy.resolve"),
    Case("resolve-on-digest-image", "AR-SB007", app(with_base(image="ghcr.io/acme/demo@sha256:" + "a" * 64)),
         app(with_base(image="ghcr.io/acme/demo@sha256:" + "a" * 64, imagePolicy={"resolve": "digest"})), False),
    Case("resolve-hardened", "AR-SB007", app(with_base(imagePolicy={"resolve": "digest"})),
         app(with_base(imagePolicy={"resolve": "off"})), False),
    # AR-SB008 repository changed
    Case("repo-changed", "AR-SB008", app(), app(with_base(image="ghcr.io/evil/demo:1.0.0")), True, "image"),
    Case("registry-changed", "AR-SB008", app(), app(with_base(image="quay.io/acme/demo:1.0.0")), True, "image"),
    Case("tag-changed", "AR-SB008", app(), app(with_base(image="ghcr.io/acme/demo:1.1.0")), False),
    Case("docker-hub-short-name", "AR-SB008", app(with_base(image="nginx:1.25")),
         app(with_base(image="docker.io/library/nginx:1.27")), False),
    # Review: ungated, listed for review
    Case("need-added", "AR-RV001", app(), app(with_base(needs={**BASE["needs"], "s3": {}})), True, "needs.s3"),
    Case("need-added-neg", "AR-RV001", app(), app(), False),
    # Soft rules
    Case("size-up", "AR-S002", app(), app(with_base(needs={"pg": {"size": "large", "version": "16"}, "redis": {}})),
         True, "needs.pg.size"),
    Case("size-down", "AR-S002", app(), app(with_base(needs={"pg": {"size": "nano", "version": "16"}, "redis": {}})),
         True, "needs.pg.size"),
    Case("size-same", "AR-S002", app(), app(with_base(needs={"pg": {"size": "small", "version": "16"}, "redis": {}})),
         False),
    Case("selector", "AR-S003", app(), app(with_base(needs={**BASE["needs"], "redis": {"selector": {"tier": "x"}}})),
         True, "needs.redis.selector"),
    Case("selector-neg", "AR-S003", app(), app(with_base(needs=copy.deepcopy(BASE["needs"]))), False),
    Case("env-literal-added", "AR-S004", app(), app(with_base(env={**E, "NEW": "1"})), True, "env.NEW"),
    Case("env-claim-added", "AR-S004", app(), app(with_base(env={**E, "PGHOST": {"claim": "pg/host"}})), True,
         "env.PGHOST"),
    Case("env-secret-added-not-soft", "AR-S004", app(), app(with_base(env={**E, "T": {"secret": "a/b"}})), False),
    Case("env-literal-removed", "AR-S005", app(), app(with_base(env={k: v for k, v in E.items() if k != "LOG_LEVEL"})),
         True, "env.LOG_LEVEL"),
    Case("env-ref-removed-not-soft", "AR-S005", app(), app(with_base(env={"LOG_LEVEL": "info"})), False),
    Case("env-literal-changed", "AR-S006", app(), app(with_base(env={**E, "LOG_LEVEL": "debug"})), True,
         "env.LOG_LEVEL"),
    Case("env-literal-to-claim", "AR-S006", app(), app(with_base(env={**E, "LOG_LEVEL": {"claim": "pg/host"}})), True,
         "env.LOG_LEVEL"),
    Case("env-literal-same", "AR-S006", app(), app(with_base(env=dict(E))), False),
    Case("tag", "AR-S007", app(), app(with_base(image="ghcr.io/acme/demo:2.0.0")), True, "image"),
    Case("tag-to-digest", "AR-S007", app(), app(with_base(image="ghcr.io/acme/demo@sha256:" + "b" * 64)), True,
         "image"),
    Case("repo-not-soft", "AR-S007", app(), app(with_base(image="ghcr.io/other/demo:1.0.0")), False),
    Case("scale-up", "AR-S008", app(), app(with_base(replicas=5)), True, "replicas"),
    Case("scale-from-zero", "AR-S008", app(with_base(replicas=0)), app(), True, "replicas"),
    Case("scale-to-zero-not-soft", "AR-S008", app(), app(with_base(replicas=0)), False),
    Case("paths", "AR-S009", app(), app(with_base(expose={**X, "paths": ["/", "/api"]})), True, "expose.paths"),
    Case("internal-hostname-inert", "AR-S009", app(with_base(expose={"port": 8080})),
         app(with_base(expose={"port": 8080, "hostname": "x.example.com"})), True, "expose.hostname"),
    Case("vpn-to-internal", "AR-S009", app(with_base(expose={"port": 8080, "network": "vpn"})),
         app(with_base(expose={"port": 8080, "network": "internal"})), True, "expose.network"),
    Case("public-port-not-soft", "AR-S009", app(), app(with_base(expose={**X, "port": 1})), False),
    Case("resolve-hardening", "AR-S010", app(with_base(imagePolicy={"resolve": "digest"})),
         app(with_base(imagePolicy={"resolve": "off"})), True, "imagePolicy.resolve"),
    Case("interval", "AR-S010", app(with_base(imagePolicy={"resolve": "digest", "interval": "5m"})),
         app(with_base(imagePolicy={"resolve": "digest", "interval": "1h"})), True, "imagePolicy.interval"),
    Case("resolve-relaxed-not-soft", "AR-S010", app(), app(with_base(imagePolicy={"resolve": "digest"})), False),
    Case("budget", "AR-S011", app(budget={"prod": "small"}), app(budget={"prod": "large"}), True, "budget"),
    Case("resources", "AR-S011", app(), app(with_base(resources={"limits": {"memory": "1Gi"}})), True,
         "resources"),
    Case("autoscale", "AR-S011", app(), app(with_base(autoscale={"on": "cpu", "min": 1, "max": 5})), True,
         "autoscale"),
    Case("budget-other-env", "AR-S011", app(budget={"prod": "small", "dev": "nano"}),
         app(budget={"prod": "small", "dev": "large"}), False),
    # A list where the whole internet was open narrows egress (soft); losing the list or adding to it widens.
    Case("egress", "AR-S012", app(), app(with_base(connects=egress(API))), True, "connects.egress"),
    Case("egress-narrowed", "AR-S012", app(with_base(connects=egress(API, DNS))), app(with_base(connects=egress(API))),
         True, "connects.egress.external"),
    Case("egress-neg", "AR-S012", app(), app(), False),
    Case("egress-to-world", "AR-SB009", app(with_base(connects=egress(API))), app(), True, "connects.egress.external"),
    Case("egress-to-world-emptied", "AR-SB009", app(with_base(connects=egress(API))),
         app(with_base(connects=egress())), True, "connects.egress.external"),
    Case("egress-world-neg", "AR-SB009", app(), app(with_base(connects=egress(API))), False),
    Case("egress-host-added", "AR-SB010", app(with_base(connects=egress(API))),
         app(with_base(connects=egress(API, {"host": "paste.example.net", "port": 443}))), True,
         "connects.egress.external"),
    Case("egress-port-added", "AR-SB010", app(with_base(connects=egress(API))),
         app(with_base(connects=egress({**API, "port": 22}))), True, "connects.egress.external"),
    Case("egress-cidr-widened", "AR-SB010", app(with_base(connects=egress(DNS))),
         app(with_base(connects=egress({**DNS, "cidr": "0.0.0.0/0"}))), True, "connects.egress.external"),
    Case("egress-reordered-neg", "AR-SB010", app(with_base(connects=egress(API, DNS))),
         app(with_base(connects=egress(DNS, {**API, "host": "API.example.com."}))), False),
    Case("egress-narrowed-neg", "AR-SB010", app(with_base(connects=egress(API, DNS))),
         app(with_base(connects=egress(API))), False),
    Case("confidential-removed", "AR-SB011", app(with_base(confidential=True)), app(), True, "confidential"),
    Case("confidential-false", "AR-SB011", app(with_base(confidential=True)), app(with_base(confidential=False)),
         True, "confidential"),
    Case("confidential-added-neg", "AR-SB011", app(), app(with_base(confidential=True)), False),
    Case("confidential", "AR-S013", app(), app(with_base(confidential=True)), True, "confidential"),
    Case("confidential-removed-not-soft", "AR-S013", app(with_base(confidential=True)), app(), False),
    Case("command", "AR-S013", app(), app(with_base(command=["/bin/app", "--debug"])), True, "command"),
    Case("runtime-neg", "AR-S013", app(with_base(command=["a"])), app(with_base(command=["a"])), False),
    Case("http-to-tcp", "AR-S014", app(with_base(health=HTTP)), app(), True, "health.readiness.path"),
    Case("failure-threshold-up", "AR-S014", app(),
         app(with_base(health={"readiness": {"failureThreshold": 10}})), True, "health.readiness.failureThreshold"),
    Case("period-up", "AR-S014", app(), app(with_base(health={"readiness": {"periodSeconds": 60}})), True,
         "health.readiness.periodSeconds"),
    Case("timeout-up", "AR-S014", app(), app(with_base(health={"readiness": {"timeoutSeconds": 5}})), True,
         "health.readiness.timeoutSeconds"),
    Case("readiness-gone-from-worker", "AR-S014",
         app(with_base(expose=None, health={"readiness": {"port": 9000}})), app(with_base(expose=None)), True,
         "health.readiness"),
    Case("readiness-gone-at-zero", "AR-S014", app(), app(with_base(health=False, replicas=0)), True,
         "health.readiness"),
    Case("tcp-to-http", "AR-S014", app(), app(with_base(health=HTTP)), False),
    Case("failure-threshold-down", "AR-S014", app(), app(with_base(health={"readiness": {"failureThreshold": 1}})),
         False),
    Case("defaults-written-out", "AR-S014", app(),
         app(with_base(health={"readiness": {"port": 8080, "periodSeconds": 10, "failureThreshold": 3}})), False),
    Case("liveness-threshold-up", "AR-S014", app(with_base(health={"liveness": {}})),
         app(with_base(health={"liveness": {"failureThreshold": 9}})), False),
    Case("readiness-path-changed", "AR-S015", app(with_base(health=HTTP)),
         app(with_base(health={"readiness": {"path": "/ready"}})), True, "health.readiness.path"),
    Case("tcp-to-http-tightens", "AR-S015", app(), app(with_base(health=HTTP)), True, "health.readiness.path"),
    Case("liveness-added", "AR-S015", app(), app(with_base(health={"liveness": {"path": "/livez"}})), True,
         "health.liveness"),
    Case("startup-removed", "AR-S015", app(with_base(health={"startup": {"failureThreshold": 30}})), app(), True,
         "health.startup"),
    Case("deadline", "AR-S015", app(), app(with_base(health={"progressDeadlineSeconds": 120})), True,
         "health.progressDeadlineSeconds"),
    Case("deadline-default-written", "AR-S015", app(), app(with_base(health={"progressDeadlineSeconds": 600})),
         False),
    # Environment scoping: a change in one environment's override gates that environment only ...
    Case("override-gates-its-env", "AR-SB004", app(with_base(expose={"port": 8080})),
         app(with_base(expose={"port": 8080}), {"dev": {}, "prod": {"expose": {"network": "public"}}}), True,
         "expose.network", env="prod"),
    Case("override-does-not-gate-other-env", "AR-SB004", app(with_base(expose={"port": 8080})),
         app(with_base(expose={"port": 8080}), {"dev": {}, "prod": {"expose": {"network": "public"}}}), False,
         env="dev"),
    Case("env-override-removes-need-in-dev-only", "AR-DM001", app(envs={"dev": {}, "prod": {}}),
         app(with_base(needs={"pg": BASE["needs"]["pg"]}), {"dev": {}, "prod": {"needs": {"redis": {}}}}), False,
         env="prod"),
    Case("env-override-removes-need-in-dev-only-dev", "AR-DM001", app(envs={"dev": {}, "prod": {}}),
         app(with_base(needs={"pg": BASE["needs"]["pg"]}), {"dev": {}, "prod": {"needs": {"redis": {}}}}), True,
         "needs.redis", env="dev"),
    # ... and a base change hidden by an override does not gate that environment.
    Case("base-change-hidden-by-override", "AR-SB008", app(envs={"dev": {}, "prod": {"image": "ghcr.io/acme/x:1"}}),
         app(with_base(image="ghcr.io/evil/demo:1.0.0"), {"dev": {}, "prod": {"image": "ghcr.io/acme/x:1"}}), False,
         env="prod"),
    Case("base-change-visible-without-override", "AR-SB008",
         app(envs={"dev": {}, "prod": {"image": "ghcr.io/acme/x:1"}}),
         app(with_base(image="ghcr.io/evil/demo:1.0.0"), {"dev": {}, "prod": {"image": "ghcr.io/acme/x:1"}}), True,
         "image", env="dev"),
    Case("base-replicas-hidden", "AR-RR003", app(envs={"dev": {}, "prod": {"replicas": 3}}),
         app(with_base(replicas=0), {"dev": {}, "prod": {"replicas": 3}}), False, env="prod"),
    Case("base-hostname-hidden-by-network-override", "AR-RR001",
         app(with_base(expose={**X, "hostname": "a.example.com"}), {"dev": {}, "prod": {"expose": {"network": "vpn"}}}),
         app(with_base(expose={**X, "hostname": "b.example.com"}), {"dev": {}, "prod": {"expose": {"network": "vpn"}}}),
         False, env="prod"),
]
