"""Every need field a backend does not apply is said, never dropped in silence (issue 42 item 4): a redis claim's size
on a shared instance and an s3 claim's size are provisioned and say on their Size condition why the size is not
applied (what the webhook warns at admission, `unsized`); an s3 claim's named buckets are refused (its app would look
in buckets that do not exist), at the webhook's door (`beyond`) and on the claim, nothing made for it."""

from __future__ import annotations

from typing import Any

from controller_runtime.outcomes import Done
from lifecycle.backends import redis, s3
from lifecycle.backends.contract import Ready, Seen, Site, Step, Waiting
from lifecycle.conditions import Condition
from tests.lifecycle import test_backend_redis as redis_tests
from tests.lifecycle import test_backend_s3 as s3_tests


def sized(claim: dict[str, Any], size: str | None = None, **parameters: Any) -> dict[str, Any]:
    if size is not None:
        claim["spec"]["size"] = size
    if parameters:
        claim["spec"]["parameters"] = parameters
    return claim


def redis_ready(claim: dict[str, Any], **config: Any) -> Ready:
    cfg = redis.CORE.configure(redis_tests.provider(**config), Site(redis_tests.NS, redis_tests.IMAGE))
    assert isinstance(cfg, redis.Config), cfg
    reads = redis.CORE.reads(claim, cfg)
    objects = (redis_tests.admin_secret(), redis_tests.AVAILABLE, redis_tests.SERVICE, redis_tests.SLICES)
    found = redis.CORE.provision(claim, cfg, Seen(dict(zip(reads, objects, strict=False)), None, "fresh", 0)).then
    assert isinstance(found, Ready), found
    return found


def s3_config() -> s3.Config:
    cfg = s3.CORE.configure(s3_tests.provider(address="127.0.0.1:7070"), Site(s3_tests.NS, None))
    assert isinstance(cfg, s3.Config), cfg
    return cfg


def test_a_shared_redis_instance_provisions_a_sized_claim_and_says_its_size_is_not_applied() -> None:
    why = ("needs.redis.size large: not applied: redis-server bounds no user's memory or connections on a shared "
           "instance (a provider with isolation: instance gives each claim a server of its size)")
    assert redis_ready(sized(redis_tests.claim(), "large")).conditions == (
        Condition("Size", "False", "NotApplied", why),)
    cfg = redis_tests.config()
    assert redis.CORE.unsized(sized(redis_tests.claim(), "large"), cfg) == why  # the webhook's warning: the same
    assert redis_ready(redis_tests.claim()).conditions == () and redis.CORE.unsized(redis_tests.claim(), cfg) is None


def test_a_redis_instance_of_the_claims_own_is_of_its_size_nothing_to_say() -> None:
    mine = sized(redis_tests.claim(), "nano")
    assert redis_ready(mine, isolation="instance").conditions == ()
    cfg = redis.CORE.configure(redis_tests.provider(isolation="instance"), Site(redis_tests.NS, redis_tests.IMAGE))
    assert redis.CORE.unsized(mine, cfg) is None


def test_an_s3_claims_size_is_not_applied_and_said() -> None:
    cfg = s3_config()
    step = s3.CORE.provision(sized(s3_tests.claim(), "medium"), cfg, s3_tests.seen(cfg, s3_tests.admin()))
    assert isinstance(step.then, Ready)
    assert step.then.conditions == (Condition("Size", "False", "NotApplied", (
        "needs.s3.size medium: not applied: versitygw has no quota of a bucket's size or objects: every claim's "
        "bucket shares the gateway's volume (spec.config.storage.size)")),)
    unsized = s3.CORE.provision(s3_tests.claim(), cfg, s3_tests.seen(cfg, s3_tests.admin())).then
    assert isinstance(unsized, Ready) and unsized.conditions == ()


def test_named_s3_buckets_are_refused_at_the_door_and_on_the_claim_and_nothing_is_made() -> None:
    cfg = s3_config()
    asks = sized(s3_tests.claim(), buckets=["ingest-archive", "thumbs"])
    why = ("needs.s3.buckets ingest-archive, thumbs: versitygw gives a claim one bucket of its own, named by the "
           "platform (claim.s3.bucket), and makes no other: remove needs.s3.buckets and keep the objects under "
           "prefixes of claim.s3.bucket")
    assert s3.CORE.beyond(asks, cfg) == why
    assert s3.CORE.provision(asks, cfg, s3_tests.seen(cfg, s3_tests.admin())) == Step(
        Waiting("BucketsNotServed", why, Done()))
    assert s3.CORE.beyond(s3_tests.claim(), cfg) is None
    assert s3.CORE.beyond(sized(s3_tests.claim(), buckets=[]), cfg) is None
