"""Property tests of the roll-up (primary, classes, approval hash) and of the classifier on generated apps."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from compatibility.application import classify, deployment, plan
from compatibility.classes import RANKS, is_gated
from compatibility.plan import Change, Subject, roll_up, spec_hash
from compatibility.rules import RULES
from renderer.health import probes

APP_RULES = sorted(r for r in RULES if not r.startswith(("AR-PS", "AR-SC")))
GATED = [r for r in APP_RULES if is_gated(RULES[r].classification)]
SOFT = [r for r in APP_RULES if not is_gated(RULES[r].classification)]  # safe and review: neither gates
SUBJECT = Subject("application", "demo", None, "prod")
# The spec's order, lowest to highest (security-boundary above data-migration; review, ungated, just above safe,
# issue 33): the oracle, not RANKS.
SPEC_ORDER = ["safe", "review", "requires-restart", "data-migration", "security-boundary"]
values = st.none() | st.integers(-5, 5) | st.text(max_size=5) | st.dictionaries(st.text(max_size=3), st.integers(),
                                                                                max_size=2)


def changes(rules: list[str]) -> st.SearchStrategy[Change]:
    return st.builds(Change, st.sampled_from(rules), st.text(min_size=1, max_size=8), values, values,
                     st.text(max_size=10))


@given(st.lists(changes(APP_RULES), max_size=12))
def test_primary_is_the_highest_class_present(items: list[Change]) -> None:
    result = roll_up(items, SUBJECT)
    present = {c.classification for c in items}
    assert set(result.classifications) == present
    assert result.primary == (max(present, key=SPEC_ORDER.index) if items else "safe")
    assert list(result.classifications) == sorted(present, key=SPEC_ORDER.index, reverse=True)
    assert result.gated == any(is_gated(c) for c in present)
    assert sorted(map(repr, result.changes)) == sorted(map(repr, items))  # nothing dropped, soft ones included


@given(st.lists(changes(GATED), min_size=1, max_size=8), st.lists(changes(SOFT), max_size=8), st.randoms())
def test_hash_ignores_soft_changes_and_order(gated: list[Change], soft: list[Change], rnd: Any) -> None:
    mixed = gated + soft
    rnd.shuffle(mixed)
    assert spec_hash(mixed, SUBJECT) == spec_hash(gated, SUBJECT)
    assert roll_up(mixed, SUBJECT).approved_spec_hash == spec_hash(gated, SUBJECT)
    assert (spec_hash(gated, SUBJECT) or "").startswith("sha256:")


@given(st.lists(changes(GATED), min_size=1, max_size=6), changes(GATED))
def test_hash_differs_when_the_gated_set_differs(gated: list[Change], extra: Change) -> None:
    key = (extra.rule, extra.field, repr(extra.from_), repr(extra.to))
    if key in {(c.rule, c.field, repr(c.from_), repr(c.to)) for c in gated}:
        return
    assert spec_hash([*gated, extra], SUBJECT) != spec_hash(gated, SUBJECT)
    other_env = Subject("application", "demo", None, "staging")
    assert spec_hash(gated, other_env) != spec_hash(gated, SUBJECT)


@given(st.lists(changes(SOFT), max_size=8))
def test_no_gated_change_means_not_gated(soft: list[Change]) -> None:
    result = roll_up(soft, SUBJECT)
    assert not result.gated and result.approved_spec_hash is None
    assert result.primary == ("review" if any(c.classification == "review" for c in soft) else "safe")


# --- the classifier on generated, schema-shaped Applications ----------------------------------------------
images = st.sampled_from(["ghcr.io/acme/a:1", "ghcr.io/acme/a:2", "ghcr.io/evil/a:1",
                          "ghcr.io/acme/a@sha256:" + "c" * 64])
env_values = st.sampled_from(["x", "y", {"claim": "pg/url"}, {"claim": "pg/host"}, {"secret": "s/k"},
                              {"secret": "t/k"}])
expose = st.fixed_dictionaries({"port": st.sampled_from([80, 8080])}, optional={
    "network": st.sampled_from(["public", "internal", "vpn"]),
    "hostname": st.sampled_from(["a.example.com", "b.example.com"]),
    "paths": st.sampled_from([["/"], ["/", "/api"]])})
probe = st.fixed_dictionaries({}, optional={"path": st.sampled_from(["/healthz", "/ready"]),
                                            "port": st.sampled_from([80, 9000]),
                                            "failureThreshold": st.integers(1, 4)})
health = st.just(False) | st.fixed_dictionaries({}, optional={
    "readiness": probe, "liveness": probe, "progressDeadlineSeconds": st.sampled_from([120, 600])})
workload = st.fixed_dictionaries({}, optional={
    "image": images, "replicas": st.integers(0, 3), "expose": expose, "health": health,
    "needs": st.dictionaries(st.sampled_from(["pg", "redis", "s3"]),
                             st.fixed_dictionaries({}, optional={"size": st.sampled_from(["nano", "small"])}),
                             max_size=3),
    "env": st.dictionaries(st.sampled_from(["A", "B", "C"]), env_values, max_size=3),
    "imagePolicy": st.fixed_dictionaries({}, optional={"resolve": st.sampled_from(["off", "digest"])}),
})
apps = st.builds(lambda base, prod: {"metadata": {"name": "demo"}, "spec": {
    "base": {"image": "ghcr.io/acme/a:1", **base}, "environments": {"prod": prod}}}, workload, workload)


@settings(max_examples=300)
@given(apps, apps)
def test_classifier_plans_are_consistent(a: dict[str, Any], b: dict[str, Any]) -> None:
    before, after = deployment(a, "prod"), deployment(b, "prod")
    result = plan(before, after)
    assert all(c.rule in RULES for c in result.changes)
    assert result.primary in RANKS["application"]
    assert result.gated == any(is_gated(c.classification) for c in result.changes)
    assert plan(after, after).changes == () and not plan(after, after).gated
    if _pruned(before.spec) == _pruned(after.spec):
        assert result.changes == ()
    if result.changes == ():  # only defaults written out differ (resolve: "off", replicas: 1, ...)
        assert classify(after, before) == []


def _pruned(spec: Any) -> Any:
    """An empty top-level map means the same as an absent one (needs: {} declares no need)."""
    return {k: v for k, v in spec.items() if v != {}}


@settings(max_examples=200)
@given(apps, apps)
def test_network_escalation_and_its_reverse(a: dict[str, Any], b: dict[str, Any]) -> None:
    forward = {c.rule for c in classify(deployment(a, "prod"), deployment(b, "prod"))}
    backward = {c.rule for c in classify(deployment(b, "prod"), deployment(a, "prod"))}
    assert ("AR-SB004" in forward) == ("AR-RR002" in backward)
    assert ("AR-DM001" in forward) == ("AR-RV001" in backward)
    assert ("AR-SB008" in forward) == ("AR-SB008" in backward)


@settings(max_examples=300)
@given(apps, apps)
def test_readiness_gone_from_a_serving_app_gates_and_nothing_else_about_health_does(a: dict[str, Any],
                                                                                    b: dict[str, Any]) -> None:
    before, after = deployment(a, "prod"), deployment(b, "prod")
    changes = classify(before, after)
    serving = "expose" in after.spec and (bool(after.spec.get("autoscale")) or after.spec.get("replicas", 1) != 0)
    disarmed = "readiness" in probes(before.spec) and "readiness" not in probes(after.spec)
    assert any(c.rule == "AR-RR006" for c in changes) == (disarmed and serving)
    health_rules = {c.rule for c in changes if c.field.startswith("health.")}
    assert health_rules <= {"AR-RR006", "AR-S014", "AR-S015"}
    if probes(before.spec) == probes(after.spec):  # the probes that run are the same: no probe change
        assert health_rules <= {"AR-S015"} and all(c.field == "health.progressDeadlineSeconds" for c in changes
                                                   if c.field.startswith("health."))
