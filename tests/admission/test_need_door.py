"""What the webhook says of an Application's needs at the door, against the providers it last read (issue 42 item 4):
a need no provider can ever serve as asked is refused at its field (a pg share larger than the Cluster's volume,
named s3 buckets), a need that binds to no provider (a type no backend serves: jetstream) and a size its provider
does not apply are admitted with a warning in the claim's own words. admission.review without a server; the same
through the API server: tests/admission/test_service_providers.py."""

from __future__ import annotations

import dataclasses
from typing import Any

from admission.review import Outcome, Settings, validating
from renderer.context import PlatformContext
from tests.admission.reviews import OPERATOR, body, parser_cr, review

INTEGRATED = {"tier": "integrated"}


def provider(name: str, kind: str, backend: str, **config: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": INTEGRATED},
            "spec": {"type": kind, "backend": backend, **({"config": config} if config else {})}}


PROVIDERS = (provider("pg-integrated", "pg", "cloudnative-pg", storage={"size": "4Gi"}),
             provider("redis-integrated", "redis", "redis-server"), provider("disk", "disk", "storage-class"),
             provider("s3-integrated", "s3", "versitygw"))
SETTINGS = dataclasses.replace(Settings(OPERATOR, PlatformContext()), service_providers=PROVIDERS)


def validate(cr: dict[str, Any]) -> Outcome:
    return validating(body(review(cr)), SETTINGS)


def with_needs(**needs: Any) -> dict[str, Any]:
    """The parser example with these needs alone (its env's claim references and autoscaling on a stream go)."""
    cr = parser_cr()
    base = cr["spec"]["base"]
    base["needs"], base["env"] = needs, {}
    base.pop("autoscale", None)
    for environment in cr["spec"].get("environments", {}).values():
        environment.pop("needs", None)
    return cr


def test_a_pg_share_larger_than_the_clusters_volume_is_refused_at_its_size() -> None:
    outcome = validate(with_needs(pg={"size": "xlarge"}))
    assert not outcome.allowed
    assert ("spec.base.needs.pg.size: needs.pg.size xlarge: its share of the Cluster's volume, 8Gi, is more than "
            "the whole volume (4Gi) (ServiceProvider pg-integrated)") in outcome.message
    assert validate(with_needs(pg={"size": "large"})).allowed


def test_named_s3_buckets_are_refused_at_their_field() -> None:
    outcome = validate(with_needs(s3={"buckets": ["ingest-archive"]}))
    assert not outcome.allowed
    assert ("spec.base.needs.s3.buckets: needs.s3.buckets ingest-archive: versitygw gives a claim one bucket of its "
            "own") in outcome.message
    assert validate(with_needs(s3={})).allowed


def test_a_need_no_provider_serves_and_a_size_not_applied_are_admitted_with_warnings() -> None:
    outcome = validate(with_needs(jetstream={"streams": ["s"]}, redis={"size": "large"}, s3={"size": "small"}))
    assert outcome.allowed
    warnings = outcome.review["response"]["warnings"]
    assert ('spec.base.needs.jetstream: NoMatchingProvider: no ServiceProvider serves "jetstream": no backend on '
            "this platform serves jetstream yet (types with one: disk, pg, redis, s3), so none can be made: remove "
            "needs.jetstream") in warnings
    assert ("spec.base.needs.redis.size: needs.redis.size large: not applied: redis-server bounds no user's memory "
            "or connections on a shared instance (a provider with isolation: instance gives each claim a server of "
            "its size) (ServiceProvider redis-integrated)") in warnings
    assert any(w.startswith("spec.base.needs.s3.size: needs.s3.size small: not applied: versitygw has no quota")
               for w in warnings), warnings
    quiet = validate(with_needs(pg={"size": "small"}, redis={}, disk={"size": "1Gi"}))
    assert quiet.allowed and not [w for w in quiet.review["response"].get("warnings", []) if "needs." in w]
