"""lifecycle.backends.kept: data a backend keeps outside a claim's namespace is the namespace's it was first
provisioned for (by UID), never a namespace's made anew under the same name; each backend says where it keeps it."""

from __future__ import annotations

from typing import Any

import pytest

from lifecycle.backends.common import CLAIM_ANNOTATION
from lifecycle.backends.contract import Site
from lifecycle.backends.kept import (
    GENERATION,
    KEPT_FOR_ANOTHER,
    NAMESPACE_UID,
    RECORD_TYPE,
    judge,
    record_name,
    record_object,
    recorded_generation,
    with_generation,
)
from lifecycle.backends.registry import REGISTERED
from tests.lifecycle.test_backends_registry import provider


def claim(namespace: str = "shop", name: str = "cart-pg") -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name, "uid": "claim-uid"}, "spec": {"type": "pg"}}


def namespace(uid: str) -> dict[str, Any]:
    return {"metadata": {"name": "shop", "uid": uid}}


def test_the_first_claim_records_its_namespace_and_the_same_namespace_is_recognised() -> None:
    first = judge(claim(), namespace("uid-1"), None, "apprafter-pg")
    assert first.ours and first.refused is None and first.record == record_object(claim(), "apprafter-pg", "uid-1")
    record = first.record
    assert record["type"] == RECORD_TYPE and "data" not in record  # no secret material: only whose it is
    assert record["metadata"]["name"] == "kept.shop.cart-pg"
    assert record["metadata"]["annotations"] == {CLAIM_ANNOTATION: "shop/cart-pg", NAMESPACE_UID: "uid-1"}
    again = judge(claim(), namespace("uid-1"), record, "apprafter-pg")
    assert again.ours and again.record is None and again.refused is None


def test_a_namespace_made_anew_under_the_name_gets_nothing_and_is_told_why() -> None:
    record = record_object(claim(), "apprafter-pg", "uid-1")
    judged = judge(claim(), namespace("uid-2"), record, "apprafter-pg")
    assert not judged.ours and judged.record is None and judged.refused is not None
    assert judged.refused.reason == KEPT_FOR_ANOTHER
    said = judged.refused.message
    assert "uid-1" in said and "uid-2" in said and "Secret apprafter-pg/kept.shop.cart-pg" in said, said


def test_a_namespace_that_cannot_be_read_gets_nothing() -> None:
    judged = judge(claim(), None, None, "apprafter-pg")
    assert not judged.ours and judged.record is None and judged.refused is not None
    assert judged.refused.reason == "NamespaceUnknown"


def test_record_names_are_distinct_and_fit_a_secret_name() -> None:
    long = claim("n" * 63, "c" * 253)
    assert len(record_name(long)) == 253 and record_name(long) != record_name(claim("n" * 63, "c" * 252))
    # a namespace name has no dot, so the first dot after `kept.` ends it: no two claims share a record
    assert record_name(claim("a", "b-c")) != record_name(claim("a-b", "c"))


@pytest.mark.parametrize("registered", REGISTERED, ids=[r.core.backend for r in REGISTERED])
def test_each_backend_says_where_it_keeps_data_and_may_read_namespaces_when_it_keeps_some(registered: Any) -> None:
    """Data outside the claim's namespace is recorded beside it (the provider's namespace); a backend whose data
    lives in the claim's namespace (a disk's PVC goes with it) keeps no record and reads no namespace."""
    core = registered.core
    config = core.configure(provider(core.type, core.backend, {}), Site("apprafter-x", "an/image:1"))
    assert not isinstance(config, list), config
    where = core.kept_in(config)
    assert where in (None, "apprafter-x")
    reads_namespaces = any(rule.resource == "namespaces" and "get" in rule.verbs for rule in registered.rules)
    assert reads_namespaces == (where is not None)
    assert [r.core.backend for r in REGISTERED if r.core.kept_in(r.core.configure(
        provider(r.core.type, r.core.backend, {}), Site("n", "i:1"))) is None] == ["storage-class"]


def test_a_record_carries_the_generation_a_restore_moved_the_data_to_and_keeps_whose_it_is() -> None:
    record = record_object(claim(), "apprafter-pg", "uid-1")
    assert recorded_generation(None) == recorded_generation(record) == 1
    moved = with_generation({**record, "metadata": {**record["metadata"], "resourceVersion": "7",
                                                    "annotations": {**record["metadata"]["annotations"],
                                                                    "other": "x"}}}, 3)
    assert recorded_generation(moved) == 3
    assert moved["metadata"]["annotations"] == {CLAIM_ANNOTATION: "shop/cart-pg", NAMESPACE_UID: "uid-1",
                                                GENERATION: "3"}
    assert judge(claim(), namespace("uid-1"), moved, "apprafter-pg").ours  # still this namespace's
    assert not judge(claim(), namespace("uid-2"), moved, "apprafter-pg").ours
    for said in ("1", "0", "-2", "two", ""):
        odd = {"metadata": {"annotations": {GENERATION: said}}}
        assert recorded_generation(odd) == 1
