"""admission.review without a server: each rule's verdict, the refusal messages, and fail-closed parsing."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from admission.review import MAX_BODY_BYTES, Outcome, Settings, mutating, too_large, validating
from compatibility.authority import APPLIED, APPROVED, PENDING, REACHABLE_FROM, REJECTED, SUPERSEDED
from renderer.context import PlatformContext
from tests.admission.reviews import (
    APPROVER,
    EDITOR,
    OPERATOR,
    body,
    parser_cr,
    plan,
    platform_stack,
    review,
    with_status,
)

SETTINGS = Settings(OPERATOR, PlatformContext())
NOW = "2026-11-30T12:00:00Z"


def validate(request: dict[str, Any], settings: Settings = SETTINGS) -> Outcome:
    outcome = validating(body(request), settings)
    assert outcome.review["response"]["uid"] == request["request"]["uid"]
    return outcome


def refused(outcome: Outcome, code: int) -> str:
    response = outcome.review["response"]
    assert response["allowed"] is False, response
    assert response["status"]["code"] == code
    return outcome.message


# --- Application ---------------------------------------------------------------------------------------

def test_a_good_application_is_admitted_with_the_renderers_tier_warnings() -> None:
    outcome = validate(review(parser_cr()))
    assert outcome.allowed
    warnings = outcome.review["response"]["warnings"]
    assert any(w.startswith("prod: confidential: tier 'solo'") for w in warnings)
    production = Settings(OPERATOR, PlatformContext(tier="production"))
    assert not any("confidential" in w for w in validate(review(parser_cr()), production).review["response"]
                   .get("warnings", []))


def test_an_env_literal_that_looks_like_an_interpolation_is_admitted_with_renders_warning() -> None:
    cr = parser_cr()
    cr["spec"]["base"]["env"]["DB_URL"] = "${claim.pg.url}"
    outcome = validate(review(cr))
    assert outcome.allowed
    [warning] = [w for w in outcome.review["response"]["warnings"] if "interpolation" in w]
    assert "spec.base.env.DB_URL: this literal looks like an interpolation of a claim" in warning
    assert warning.endswith("reference the claim instead, DB_URL: claim.pg.url")
    assert not [w for w in validate(review(parser_cr())).review["response"]["warnings"] if "interpolation" in w]


def test_every_problem_is_listed_one_field_per_line_under_a_header_naming_object_and_user() -> None:
    cr = parser_cr(environment="staging")
    del cr["spec"]["base"]["image"]
    cr["spec"]["environments"]["prod"]["image"] = "ghcr.io/user/parser:2"
    cr["spec"]["environments"]["Dev"] = cr["spec"]["environments"].pop("dev")
    message = refused(validate(review(cr)), 422)
    lines = message.splitlines()
    assert lines == [
        f"Application team-a/parser (user '{EDITOR}'): 3 problems:",
        "spec.base.image: image is empty in environment 'staging': set base.image or environments.staging.image",
        "spec.budget.dev: budget for undeclared environment 'dev'",
        "spec.environments.Dev: environment name 'Dev' is not a DNS-1123 label (lowercase letters, digits and '-', "
        "at most 63 characters)"]


def test_an_object_is_judged_for_the_environment_it_deploys_as_render_judges_it() -> None:
    # Another environment's broken override is that environment's problem (`apprafter validate` reports it): the
    # plugin renders this one and the operator applies this one, so the webhook admits it too.
    cr = parser_cr(environment="prod")
    cr["spec"]["environments"]["dev"]["expose"] = {"paths": ["nope"]}
    assert validate(review(cr)).allowed
    cr["spec"]["environment"] = "dev"
    assert refused(validate(review(cr)), 422).splitlines()[1].startswith("spec.environments.dev.expose.paths.0: ")


def test_a_refusal_lists_at_most_fifty_problems() -> None:
    cr = parser_cr()
    cr["spec"]["environments"] = {f"Env{i}": {} for i in range(60)}
    lines = refused(validate(review(cr)), 422).splitlines()
    count = int(lines[0].rsplit(": ", 1)[1].split()[0])
    assert count > 60 and len(lines) == 1 + 50 + 1
    assert lines[-1] == f"... and {count - 50} more problems (run `apprafter validate`)"


def test_a_problem_is_named_where_it_is_written_base_or_environment() -> None:
    cr = parser_cr()
    cr["spec"]["environments"]["prod"]["image"] = ""
    cr["spec"]["base"]["expose"]["paths"] = ["nope"]
    lines = refused(validate(review(cr)), 422).splitlines()[1:]
    assert [line.split(": ")[0] for line in lines] == ["spec.environments.prod.expose.paths.0",
                                                       "spec.environments.prod.image"]


@pytest.mark.parametrize(("mutate", "field"), [
    (lambda cr: cr["spec"]["base"]["env"].__setitem__("log-level", "debug"), "spec.base.env.log-level"),
    (lambda cr: cr["spec"]["base"]["expose"].__setitem__("port", 70000), "spec.base.expose.port"),
    (lambda cr: cr["spec"]["base"].__setitem__("colour", "blue"), "spec.base.colour"),
    (lambda cr: cr["spec"]["base"].__setitem__("replicas", "three"), "spec.base.replicas"),
    (lambda cr: cr["spec"]["base"]["env"].__setitem__("PORT", 8080), "spec.base.env.PORT"),
    (lambda cr: cr["spec"]["environments"].__setitem__("Prod", {}), "spec.environments.Prod"),
    (lambda cr: cr["spec"].__setitem__("environment", "qa"), "spec.environment"),
])
def test_schema_and_rule_problems_name_the_field(mutate: Any, field: str) -> None:
    cr = parser_cr()
    mutate(cr)
    message = refused(validate(review(cr)), 422)
    assert f"\n{field}: " in message, message


@pytest.mark.parametrize(("sealed", "line"), [
    ({"Session": {"key": "QUJD"}}, "spec.sealedSecrets.Session: 'Session' is not a Secret name for a file "
     "(lowercase letters, digits and '-')"),
    ({"a.b": {"key": "QUJD"}}, """spec.sealedSecrets."a.b": 'a.b' is not a Secret name for a file (lowercase """
     "letters, digits and '-')"),
    ({"session": {}}, "spec.sealedSecrets.session: holds no key"),
    ({"session": {"k/ey": "QUJD"}}, """spec.sealedSecrets.session."k/ey": is not a Secret key (letters, digits, """
     "'-', '_', '.')"),
    ({"session": {"key": "plain text value!"}}, "spec.sealedSecrets.session.key: is not sealed ciphertext "
     "(base64): never commit a value itself"),
])
def test_sealed_secrets_written_by_hand_are_held_to_the_repository_files_rules(sealed: Any, line: str) -> None:
    """An Application written without the plugin carries spec.sealedSecrets as it likes: the webhook refuses what
    `render` refuses of a file in apprafter/secrets/<env>/ (renderer.sealed's rules, one place)."""
    cr = parser_cr()
    cr["spec"]["sealedSecrets"] = sealed
    assert refused(validate(review(cr)), 422).splitlines()[1:] == [line]
    cr["spec"]["sealedSecrets"] = {"session": {"key": "QUJD\nREVG"}}  # kubeseal's ciphertext wraps: admitted
    assert validate(review(cr)).allowed


@pytest.mark.parametrize(("health", "line"), [
    ({"readiness": {"periodSeconds": 0}}, "spec.environments.prod.health.readiness.periodSeconds: 0 is less than "
     "the minimum of 1"),
    ({"readiness": {"path": "healthz"}}, "spec.environments.prod.health.readiness.path: 'healthz' does not match "
     "'^/[!-~]*$'"),
    ({"progressDeadlineSeconds": 7200}, "spec.environments.prod.health.progressDeadlineSeconds: 7200 is greater "
     "than the maximum of 3600"),
    ({"readines": {}}, "spec.environments.prod.health.readines: field not allowed; did you mean `readiness`?"),
    (True, "spec.environments.prod.health: true is not allowed: want one of false, a struct"),
    ({"startup": {"failureThreshold": 120}}, "spec.environments.prod.health.progressDeadlineSeconds: "
     "progressDeadlineSeconds (600) must be longer than the 1200 s the probes give a healthy pod to become ready "
     "(startup: initialDelaySeconds + periodSeconds x failureThreshold), or every slow start is reported as a failed "
     "rollout"),
])
def test_a_bad_health_is_refused_with_its_field(health: Any, line: str) -> None:
    """The schema's bounds (the CUE source's, as the CRD carries them) and the renderer's health rules."""
    cr = parser_cr()
    cr["spec"]["environments"]["prod"]["health"] = health
    assert refused(validate(review(cr)), 422).splitlines()[1:] == [line]


def test_health_false_and_a_probe_struct_are_admitted() -> None:
    for health in (False, {"readiness": {"path": "/healthz", "failureThreshold": 5}, "liveness": {"path": "/livez"}}):
        cr = parser_cr()
        cr["spec"]["environments"]["prod"]["health"] = health
        assert validate(review(cr)).allowed


def test_spec_environment_cannot_change_on_update() -> None:
    old = parser_cr()
    new = parser_cr(environment="staging")
    message = refused(validate(review(new, old, operation="UPDATE")), 422)
    assert "spec.environment: is immutable: a different environment is a different deployment" in message
    assert "(was 'prod', now 'staging')" in message


def test_a_metadata_only_update_of_an_object_admitted_earlier_stays_writable() -> None:
    stored = parser_cr()
    stored["spec"]["base"]["env"]["log-level"] = "debug"  # admitted before this rule, say
    relabelled = copy.deepcopy(stored)
    relabelled["metadata"]["labels"]["team"] = "a"
    assert validate(review(relabelled, stored, operation="UPDATE")).allowed
    changed = copy.deepcopy(relabelled)
    changed["spec"]["base"]["replicas"] = 5
    refused(validate(review(changed, stored, operation="UPDATE")), 422)


def test_an_instruction_to_argo_cd_is_refused_on_create_and_on_a_metadata_only_update() -> None:
    # What Argo CD's repo-server stamps on what it renders is admitted (every sync writes it).
    synced = parser_cr()
    synced["metadata"]["annotations"] = {"argocd.argoproj.io/tracking-id":
                                         "parser-prod:apprafter.io/Application:team-a/parser",
                                         "argocd.argoproj.io/sync-wave": "1"}
    assert validate(review(synced)).allowed
    hooked = copy.deepcopy(synced)
    hooked["metadata"]["annotations"]["argocd.argoproj.io/hook"] = "Skip"
    message = refused(validate(review(hooked)), 422)
    assert 'metadata.annotations."argocd.argoproj.io/hook": is an instruction to Argo CD' in message
    # A write that changes only metadata is held to what it adds (issue 34: kubectl annotate, a label-only apply).
    replaced = copy.deepcopy(synced)
    replaced["metadata"]["annotations"]["argocd.argoproj.io/sync-options"] = "Replace=true,Force=true"
    message = refused(validate(review(replaced, synced, operation="UPDATE")), 422)
    assert ('metadata.annotations."argocd.argoproj.io/sync-options": sync option \'Replace=true\', \'Force=true\' '
            'may not be set on an Application') in message
    forged = copy.deepcopy(synced)
    forged["metadata"]["annotations"]["argocd.argoproj.io/tracking-id"] = (
        "someone-elses-app:apprafter.io/Application:team-b/parser")
    assert "must name this Application" in refused(validate(review(forged, synced, operation="UPDATE")), 422)
    # An object that carried one before the rule stays writable, as long as the write does not add one.
    relabelled = copy.deepcopy(hooked)
    relabelled["metadata"]["labels"]["team"] = "a"
    assert validate(review(relabelled, hooked, operation="UPDATE")).allowed


def test_application_status_is_the_operators_alone() -> None:
    old = parser_cr()
    new = with_status(old, phase="Ready")
    message = refused(validate(review(new, old, operation="UPDATE", subresource="status", user=EDITOR)), 403)
    assert f"'{EDITOR}' may not" in message and OPERATOR in message
    assert validate(review(new, old, operation="UPDATE", subresource="status", user=OPERATOR)).allowed


# --- MigrationPlan -------------------------------------------------------------------------------------

def test_only_the_operator_creates_plans_and_their_spec_never_changes() -> None:
    message = refused(validate(review(plan(), user=APPROVER)), 403)
    assert f"only the operator ({OPERATOR}) creates MigrationPlans; '{APPROVER}' may not" in message
    assert validate(review(plan(), user=OPERATOR)).allowed
    changed = plan()
    changed["spec"]["trigger"]["approvedSpecHash"] = "sha256:" + "b" * 64
    message = refused(validate(review(changed, plan(), operation="UPDATE", user=OPERATOR)), 403)
    assert "spec: is immutable" in message
    relabelled = plan()
    relabelled["metadata"]["labels"] = {"team": "a"}
    assert validate(review(relabelled, plan(), operation="UPDATE", user=APPROVER)).allowed


def status_write(before: str | None, after: str | None, user: str, scope: str = "application",
                 **extra: Any) -> Outcome:
    old = plan(scope=scope) if before is None else with_status(plan(scope=scope), phase=before)
    new = with_status(plan(scope=scope), **({"phase": after} if after else {}), **extra)
    return validate(review(new, old, operation="UPDATE", subresource="status", user=user))


def test_the_operator_may_not_approve_and_a_person_may() -> None:
    message = refused(status_write(PENDING, APPROVED, OPERATOR, approvedBy=OPERATOR, approvedAt=NOW), 403)
    assert f"status.phase: '{OPERATOR}' is the operator and may not set 'approved'" in message
    assert status_write(PENDING, APPROVED, APPROVER, approvedBy=APPROVER, approvedAt=NOW).allowed


def test_an_approval_must_carry_the_approvers_stamp() -> None:
    message = refused(status_write(PENDING, APPROVED, APPROVER), 403)
    assert "status.approvedBy: an approval records its approver" in message
    refused(status_write(PENDING, APPROVED, APPROVER, approvedBy="someone-else", approvedAt=NOW), 403)


@pytest.mark.parametrize("before", [None, PENDING, APPROVED, REJECTED, APPLIED, SUPERSEDED])
@pytest.mark.parametrize("after", [PENDING, APPROVED, REJECTED, APPLIED, SUPERSEDED])
def test_phases_move_only_along_the_table_and_each_by_its_own_kind_of_writer(before: str | None, after: str) -> None:
    person = after in (APPROVED, REJECTED)
    stamp = {"approvedBy": APPROVER, "approvedAt": NOW} if after == APPROVED and before != APPROVED else {}
    old_stamp = {"approvedBy": APPROVER, "approvedAt": NOW} if before == APPROVED else {}
    old = with_status(plan(scope="platform"), **({"phase": before} if before else {}), **old_stamp)
    new = with_status(plan(scope="platform"), phase=after, **old_stamp, **stamp)
    right = validate(review(new, old, operation="UPDATE", subresource="status",
                            user=APPROVER if person else OPERATOR))
    wrong = validate(review(new, old, operation="UPDATE", subresource="status",
                            user=OPERATOR if person else APPROVER))
    assert right.allowed == (before in REACHABLE_FROM[after]), right.message
    assert not wrong.allowed or before == after


def test_rejected_is_only_for_platform_scope() -> None:
    message = refused(status_write(PENDING, REJECTED, APPROVER, scope="application"), 403)
    assert "'rejected' is only for platform-scope plans; an application change is undone by reverting it in git" \
        in message
    assert status_write(PENDING, REJECTED, APPROVER, scope="platform").allowed


def test_a_person_writes_only_the_phase_and_the_stamp_never_changes() -> None:
    message = refused(status_write(PENDING, PENDING, APPROVER, message="all good"), 403)
    assert "status.message: belongs to the operator" in message
    old = with_status(plan(), phase=APPROVED, approvedBy=APPROVER, approvedAt=NOW)
    new = with_status(old, phase=APPLIED, approvedBy="mallory")
    message = refused(validate(review(new, old, operation="UPDATE", subresource="status", user=OPERATOR)), 403)
    assert "status.approvedBy: is stamped by the admission webhook" in message


def test_the_mutating_webhook_stamps_the_approver_and_time_on_approval_only() -> None:
    old = with_status(plan(), phase=PENDING)
    new = with_status(plan(), phase=APPROVED, approvedBy="forged", approvedAt="1999-01-01T00:00:00Z")
    outcome = mutating(body(review(new, old, operation="UPDATE", subresource="status", user=APPROVER)), SETTINGS, NOW)
    response = outcome.review["response"]
    assert response["allowed"] and response["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(response["patch"])) == [
        {"op": "add", "path": "/status/approvedBy", "value": APPROVER},
        {"op": "add", "path": "/status/approvedAt", "value": NOW}]
    applied = mutating(body(review(with_status(plan(), phase=APPLIED), new, operation="UPDATE", subresource="status",
                                   user=OPERATOR)), SETTINGS, NOW)
    assert applied.allowed and "patch" not in applied.review["response"]


# --- PlatformStack -------------------------------------------------------------------------------------

def test_platformstack_is_a_singleton_with_a_semver_pin() -> None:
    assert validate(review(platform_stack(pin="2.0.0-rc.1"))).allowed
    message = refused(validate(review(platform_stack(name="other", namespace="default"))), 422)
    assert "metadata.name: 'other': a cluster has one PlatformStack, named 'default' in namespace " \
           "'apprafter-system'" in message
    assert "metadata.namespace: 'default'" in message
    for pin in ("v1.2", "1.2", "latest"):
        message = refused(validate(review(platform_stack(pin=pin))), 422)
        assert f"spec.pin: {pin!r} is not SemVer 2 (MAJOR.MINOR.PATCH[-PRE])" in message
    status = with_status(platform_stack(), currentVersion="9.9.9")
    refused(validate(review(status, platform_stack(), operation="UPDATE", subresource="status")), 403)
    assert validate(review(status, platform_stack(), operation="UPDATE", subresource="status", user=OPERATOR)).allowed


def test_platformstack_override_values_are_bounded() -> None:
    assert validate(review(platform_stack(overrides={"keda": {"values": {"operator": {"replicaCount": 2}}}}))).allowed
    big = platform_stack(overrides={"keda": {"values": {"blob": "x" * 70_000}}})
    message = refused(validate(review(big)), 422)
    assert "spec.overrides.keda.values: 70011 bytes as JSON, at most 65536" in message


# --- fail closed ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("raw", "says"), [
    (b"not json", "the body is not JSON"),
    (b"[]", "(top level): must be of type object"),
    (body({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {}}),
     "apiVersion: 'admission.k8s.io/v1' was expected"),
    (body({**review(parser_cr()), "request": {**review(parser_cr())["request"], "userInfo": {}}}),
     "request.userInfo: 'username' is a required property"),
    (body({**review(parser_cr()), "request": {**review(parser_cr())["request"], "object": "x" * 64}}),
     "request.object: must be of type ['object', 'null']"),
], ids=["not-json", "not-an-object", "v1beta1", "no-username", "object-not-an-object"])  # ids without the random uid:
# every pytest-xdist worker must collect the same names
def test_an_unreadable_request_is_refused_with_what_is_wrong(raw: bytes, says: str) -> None:
    outcome = validating(raw, SETTINGS)
    assert not outcome.allowed and outcome.review["response"]["status"]["code"] == 400
    assert says in outcome.message and "x" * 64 not in outcome.message


def test_a_request_without_a_rule_is_refused() -> None:
    outcome = validate(review(None, parser_cr(), operation="DELETE"))
    assert "no rule for DELETE of Application" in refused(outcome, 400)
    other = review(parser_cr())
    other["request"]["kind"] = {"group": "", "version": "v1", "kind": "ConfigMap"}
    assert "no rule for CREATE of ConfigMap.core" in refused(validate(other), 400)
    assert "no rule for CREATE of Application" in refused(mutating(body(review(parser_cr())), SETTINGS, NOW), 400)


def test_too_large_is_refused() -> None:
    outcome = too_large()
    assert not outcome.allowed and str(MAX_BODY_BYTES) in outcome.message


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=20)


@given(JSON)
def test_nothing_unreadable_is_ever_allowed(value: Any) -> None:
    outcome = validating(body(value), SETTINGS)
    assert outcome.allowed is False and outcome.review["response"]["status"]["code"] == 400


@given(st.sampled_from(["request", "uid", "kind", "operation", "userInfo", "object"]), JSON)
def test_a_good_request_with_one_part_replaced_never_crashes_the_review(part: str, value: Any) -> None:
    request = review(parser_cr())
    if part == "request":
        request["request"] = value
    else:
        request["request"][part] = value
    outcome = validating(body(request), SETTINGS)
    response = outcome.review["response"]
    assert response["allowed"] is outcome.allowed
    if outcome.allowed:
        assert response["uid"] == request["request"]["uid"]
    else:
        assert outcome.message
