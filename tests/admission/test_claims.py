"""ResourceClaim writes through the real API server and webhook: a claim's status is its provider's (as an
Application's is the operator's), and a claim selects a provider by the provider's own labels, never by an identity
that could lead a binder to another namespace's data (renderer.selectors: the same rule `render` applies to needs)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from compatibility.authority import DROP_GENERATION_ANNOTATION, RESTORE_ANNOTATION, ROTATE_ANNOTATION
from lifecycle.retention import DROP_ANNOTATION
from tests.admission.cluster import Webhook, apply, fresh_namespace, merge_status, message, ok
from tests.admission.reviews import API, EDITOR, OPERATOR
from tests.testbed.kube import KubeTestBed

pytestmark = pytest.mark.testbed

CLAIMS = 'admission webhook "resourceclaims.apprafter.io" denied the request'


def claim(namespace: str, selector: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "ResourceClaim", "metadata": {"name": "shop-pg", "namespace": namespace},
            "spec": {"type": "pg", "selector": selector or {"tier": "integrated"}, "size": "small"}}


@pytest.mark.parametrize("key", ["kubernetes.io/metadata.name", "apprafter.io/namespace", "claims.apprafter.io/owner",
                                 "namespace"])
def test_a_claim_never_selects_by_an_identity(admission_bed: KubeTestBed, webhook: Webhook, key: str) -> None:
    ns = fresh_namespace(admission_bed)
    with admission_bed.as_user(EDITOR) as tenant, admission_bed.as_user(OPERATOR) as operator:
        hostile = claim(ns, {"tier": "integrated", key: "team-b"})
        for writer in (tenant, operator):  # whoever writes it: a claim's data is its own namespace's
            text = message(apply(writer, admission_bed, hostile))
            assert CLAIMS in text and f"spec.selector.{key}: selector key {key!r} is not a provider's label" in text
        good = claim(ns, {"tier": "integrated", "location": "in-cluster"})
        assert ok(apply(tenant, admission_bed, good))["spec"]["selector"] == good["spec"]["selector"]
        widened = copy.deepcopy(good)
        widened["spec"]["selector"][key] = "team-b"
        assert CLAIMS in message(apply(tenant, admission_bed, widened))  # not on an update either


def test_a_claims_status_is_its_providers(admission_bed: KubeTestBed, webhook: Webhook) -> None:
    ns = fresh_namespace(admission_bed)
    with admission_bed.as_user(EDITOR) as tenant, admission_bed.as_user(OPERATOR) as operator:
        made = claim(ns)
        ok(apply(operator, admission_bed, made))
        for refused in (merge_status(tenant, admission_bed, made, {"ready": True}),
                        apply(tenant, admission_bed, {**made, "status": {"ready": True}}, status=True)):
            text = message(refused)
            assert CLAIMS in text and f"only the claim's provider ({OPERATOR}) may write ResourceClaim status" in text
        stored = ok(merge_status(operator, admission_bed, made, {"ready": True, "message": "bound"}))
        assert stored["status"]["ready"] is True


def test_only_the_operator_and_an_administrator_ask_for_a_claims_data_to_be_dropped(
        admission_bed: KubeTestBed, webhook: Webhook) -> None:
    """apprafter.io/drop-data (lifecycle.retention): `MigrationPlan/<name>` is the operator's, written as it prunes
    a claim under an approved data-migration plan; `admin` and its removal a cluster administrator's."""
    ns = fresh_namespace(admission_bed)
    marked = "metadata.annotations.apprafter.io/drop-data"

    def annotated(value: str) -> dict[str, Any]:
        return {**claim(ns), "metadata": {**claim(ns)["metadata"], "annotations": {DROP_ANNOTATION: value}}}

    with admission_bed.as_user(EDITOR) as tenant, admission_bed.as_user(OPERATOR) as operator:
        ok(apply(operator, admission_bed, claim(ns)))
        for value in ("admin", "MigrationPlan/shop-prod-0123456789"):
            text = message(apply(tenant, admission_bed, annotated(value)))
            assert CLAIMS in text and marked in text and f"{EDITOR!r} may not" in text
        assert "may not" in message(apply(operator, admission_bed, annotated("admin")))
        ok(apply(operator, admission_bed, annotated("MigrationPlan/shop-prod-0123456789")))
        # the operator never turns one plan's mark into another's
        assert "may not" in message(apply(operator, admission_bed, annotated("MigrationPlan/other-0123456789")))
    # the bed's administrator (system:masters): may set `admin`
    ok(apply(admission_bed.http, admission_bed, annotated("admin"), manager="admin"))


def requested(ns: str, key: str, value: str, kind: str) -> dict[str, Any]:
    """A claim `shop-<kind>` of type `kind` carrying the request annotation `key: value` (a rotation, a restore)."""
    made = claim(ns)
    return {**made, "metadata": {**made["metadata"], "name": f"shop-{kind}", "annotations": {key: value}},
            "spec": {**made["spec"], "type": kind}}


def test_the_apps_team_asks_for_new_credentials_in_the_requests_form_on_a_claim_with_a_password(
        admission_bed: KubeTestBed, webhook: Webhook) -> None:
    """apprafter.io/rotate (lifecycle.rotation, `apprafter db rotate`): whoever may write the claim in its namespace
    asks, in the request's form; never the operator (a rotation is a person's act), never on a claim whose backend
    has no password to rotate."""
    ns = fresh_namespace(admission_bed)
    key = f"metadata.annotations.{ROTATE_ANNOTATION}"

    def annotated(value: str, kind: str = "pg") -> dict[str, Any]:
        return requested(ns, ROTATE_ANNOTATION, value, kind)

    with admission_bed.as_user(EDITOR) as tenant, admission_bed.as_user(OPERATOR) as operator:
        ok(apply(operator, admission_bed, claim(ns)))
        stored = ok(apply(tenant, admission_bed, annotated("20261208T100000Z-0a1b2c3d")))
        assert stored["metadata"]["annotations"][ROTATE_ANNOTATION] == "20261208T100000Z-0a1b2c3d"
        text = message(apply(tenant, admission_bed, annotated("now; and again")))
        assert CLAIMS in text and key in text and "is not a rotation request" in text
        assert "never the operator" in message(apply(operator, admission_bed, annotated("20261208T110000Z-1")))
        ok(apply(operator, admission_bed, {**claim(ns), "metadata": {**claim(ns)["metadata"], "name": "shop-disk"},
                                           "spec": {**claim(ns)["spec"], "type": "disk"}}))
        text = message(apply(tenant, admission_bed, annotated("20261208T100000Z-0a1b2c3d", "disk")))
        assert CLAIMS in text and "a claim of type disk has no password the operator rotates" in text


def test_the_apps_team_asks_for_a_restore_in_the_requests_form_on_a_pg_claim_and_the_operator_never(
        admission_bed: KubeTestBed, webhook: Webhook) -> None:
    """apprafter.io/restore (lifecycle.restore, `apprafter db restore`): whoever may write the claim in its namespace
    asks (the restore itself waits for a person's approval of its plan), `<request>@<UTC time>`; never the operator,
    never on a claim whose backend does not restore."""
    ns = fresh_namespace(admission_bed)
    key = f"metadata.annotations.{RESTORE_ANNOTATION}"

    def annotated(value: str, kind: str = "pg") -> dict[str, Any]:
        return requested(ns, RESTORE_ANNOTATION, value, kind)

    with admission_bed.as_user(EDITOR) as tenant, admission_bed.as_user(OPERATOR) as operator:
        ok(apply(operator, admission_bed, claim(ns)))
        asked = "20261208T100000Z-0a1b2c3d@2026-12-08T09:30:00.5Z"
        assert ok(apply(tenant, admission_bed, annotated(asked)))["metadata"]["annotations"][RESTORE_ANNOTATION] \
            == asked
        for bad in ("2026-12-08T09:30:00Z", "r1@2026-12-08T10:30:00+01:00", "r1@yesterday"):
            text = message(apply(tenant, admission_bed, annotated(bad)))
            assert CLAIMS in text and key in text and "is not a restore request" in text, bad
        assert "never the operator" in message(apply(operator, admission_bed, annotated("r2@2026-12-08T09:30:00Z")))
        ok(apply(operator, admission_bed, {**claim(ns), "metadata": {**claim(ns)["metadata"], "name": "shop-redis"},
                                           "spec": {**claim(ns)["spec"], "type": "redis"}}))
        text = message(apply(tenant, admission_bed, annotated(asked, "redis")))
        assert CLAIMS in text and "a claim of type redis has no point-in-time restore" in text


def test_the_apps_team_asks_for_a_kept_generation_to_be_dropped_never_the_live_one_and_never_the_operator(
        admission_bed: KubeTestBed, webhook: Webhook) -> None:
    """apprafter.io/drop-generation (lifecycle.generation_drop, `apprafter db drop-generation`): whoever may write the
    claim asks, `<request>@<N>`, for a generation its restores kept (status.restore.kept, as the claim stands); the
    live one, one not kept, the operator, another form and a claim without generations are refused, one line each."""
    ns = fresh_namespace(admission_bed)
    key = f"metadata.annotations.{DROP_GENERATION_ANNOTATION}"

    def annotated(value: str, kind: str = "pg") -> dict[str, Any]:
        return requested(ns, DROP_GENERATION_ANNOTATION, value, kind)

    with admission_bed.as_user(EDITOR) as tenant, admission_bed.as_user(OPERATOR) as operator:
        made = {**claim(ns), "metadata": {**claim(ns)["metadata"], "name": "shop-pg"}}
        ok(apply(operator, admission_bed, made))
        # after a restore: the app on generation 2, generation 1 kept
        ok(merge_status(operator, admission_bed, made, {"restore": {"generation": 2, "kept": [f"{ns}.shop-pg"]}}))
        for value, said in (("r1@2", f"generation 2 is the one the app uses (database {ns}.shop-pg~2)"),
                            ("r1@3", "generation 3 is not kept (kept: 1;"),
                            ("r1@0", "is not a request to drop a generation"),
                            ("r1", "is not a request to drop a generation")):
            text = message(apply(tenant, admission_bed, annotated(value)))
            assert CLAIMS in text and f"{key}: " in text and said in text, (value, text)
        assert "never the operator" in message(apply(operator, admission_bed, annotated("r2@1")))
        asked = "20261208T100000Z-0a1b2c3d@1"
        assert ok(apply(tenant, admission_bed, annotated(asked)))["metadata"]["annotations"][
            DROP_GENERATION_ANNOTATION] == asked
        # once generation 1 is dropped (off the kept list), the claim's other writes still pass: only a new request
        # is checked
        ok(merge_status(operator, admission_bed, made, {"restore": {"generation": 2, "kept": []}}))
        ok(apply(tenant, admission_bed, {**annotated(asked), "spec": {**annotated(asked)["spec"], "size": "medium"}}))
        ok(apply(operator, admission_bed, {**claim(ns), "metadata": {**claim(ns)["metadata"], "name": "shop-redis"},
                                           "spec": {**claim(ns)["spec"], "type": "redis"}}))
        text = message(apply(tenant, admission_bed, annotated("r3@1", "redis")))
        assert CLAIMS in text and "a claim of type redis has no generations" in text
