"""Through the real kube-apiserver calling `apprafter webhook` over TLS: what is refused, by whom, with what message."""

from __future__ import annotations

import copy
import socket
import ssl
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509

from tests.admission.cluster import (
    Webhook,
    apply,
    eventually,
    fresh_namespace,
    merge_status,
    message,
    ok,
    register,
    unregister,
)
from tests.admission.reviews import APPROVER, EDITOR, OPERATOR, parser_cr, plan, platform_stack
from tests.renderer.helpers import MINIMAL, run_cli, write_app
from tests.testbed.kube import KubeTestBed
from tests.testbed.pki import CA

pytestmark = pytest.mark.testbed

DENIED = 'admission webhook "{}" denied the request'
APPS, PLANS, STACKS = (DENIED.format(f"{k}.apprafter.io") for k in ("applications", "migrationplans", "platformstacks"))


def env_key(cr: dict[str, Any]) -> None:
    cr["spec"]["base"]["env"]["log-level"] = "debug"


def image_missing_in_one_env(cr: dict[str, Any]) -> None:
    del cr["spec"]["base"]["image"]
    for env in ("dev", "staging"):  # the object deploys prod, which now has no image
        cr["spec"]["environments"][env]["image"] = "ghcr.io/user/parser:1.4.2"


def bad_name(cr: dict[str, Any]) -> None:
    cr["metadata"]["name"] = "parser.v2"


def bad_port(cr: dict[str, Any]) -> None:
    cr["spec"]["base"]["expose"]["port"] = 70000


def unknown_field(cr: dict[str, Any]) -> None:
    cr["spec"]["base"]["colour"] = "blue"


def unknown_field_in_env_reference(cr: dict[str, Any]) -> None:
    cr["spec"]["base"]["env"]["API_KEY"] = {"secret": "third-party-tron/key", "optional": True}


def wrong_type(cr: dict[str, Any]) -> None:
    cr["spec"]["base"]["replicas"] = "three"


def wrong_type_env_value(cr: dict[str, Any]) -> None:
    cr["spec"]["base"]["env"]["PORT"] = 8080


# (how to break the parser example, the field the refusal names, who refuses: the webhook or the CRD's schema)
HIDDEN_STYLE: list[tuple[Callable[[dict[str, Any]], None], str, str]] = [
    (env_key, "spec.base.env", APPS),
    (image_missing_in_one_env, "spec.base.image: image is empty in environment 'prod'", APPS),
    (bad_name, "metadata.name: 'parser.v2' is not a DNS-1035 label", APPS),
    (bad_port, "spec.base.expose.port", "Invalid value"),
    (unknown_field, ".spec.base.colour: field not declared in schema", "typed patch"),
    (unknown_field_in_env_reference, "spec.base.env.API_KEY", APPS),
    (wrong_type, ".spec.base.replicas: expected numeric", "typed patch"),
    (wrong_type_env_value, "spec.base.env.PORT", APPS),
]


@pytest.mark.parametrize(("breakage", "field", "refuser"), HIDDEN_STYLE, ids=[c[0].__name__ for c in HIDDEN_STYLE])
def test_a_broken_application_is_refused_naming_the_field(admission_bed: KubeTestBed, webhook: Webhook,
                                                          breakage: Callable[[dict[str, Any]], None], field: str,
                                                          refuser: str) -> None:
    cr = parser_cr(fresh_namespace(admission_bed))
    breakage(cr)
    with admission_bed.as_user(EDITOR) as editor:
        text = message(apply(editor, admission_bed, cr))
    assert field in text and refuser in text, text


def test_a_good_application_is_admitted_with_the_tier_warnings(admission_bed: KubeTestBed, webhook: Webhook) -> None:
    cr = parser_cr(fresh_namespace(admission_bed))
    with admission_bed.as_user(EDITOR) as editor:
        resp = apply(editor, admission_bed, cr)
    stored = ok(resp)
    assert stored["spec"]["environment"] == "prod"
    warnings = resp.headers.get_list("warning")
    assert any("prod: confidential: tier 'solo' has no confidential runtime" in w for w in warnings), warnings
    assert not any("interpolation" in w for w in warnings), warnings


def test_an_env_literal_that_looks_like_an_interpolation_reaches_the_client_as_a_warning(
        admission_bed: KubeTestBed, webhook: Webhook) -> None:
    cr = parser_cr(fresh_namespace(admission_bed))
    cr["spec"]["base"]["env"]["DB_URL"] = "${claim.pg.url}"  # a literal: nothing substitutes it
    with admission_bed.as_user(EDITOR) as editor:
        resp = apply(editor, admission_bed, cr)
    assert ok(resp)["spec"]["base"]["env"]["DB_URL"] == "${claim.pg.url}"  # a warning, not a refusal
    [warning] = [w for w in resp.headers.get_list("warning") if "interpolation" in w]
    assert "spec.base.env.DB_URL: this literal looks like an interpolation of a claim" in warning, warning
    assert "DB_URL: claim.pg.url" in warning, warning


# The webhook's line is word for word `render`'s for the environment the object deploys (renderer.validate's
# check_deployment, and the schema's name rules).
RULE_BREAKERS = {
    "image-missing": ('"ghcr.io/acme/demo:1.0.0"', '""'),
    "bad-name": ('name: "demo"', 'name: "demo.v2"'),
    "bad-environment-name": ("dev: {}", "Dev: {}"),
    "autoscale-bounds": ("expose: port: 8080", 'expose: port: 8080\n\t\tautoscale: {on: "cpu", min: 5, max: 2}'),
    "path": ("expose: port: 8080", 'expose: {port: 8080, paths: ["api"]}'),
    "rewrite": ("expose: port: 8080", 'expose: {port: 8080, rewrites: [{from: "/a/(.*)/b", to: "/x"}]}'),
    "egress": ("expose: port: 8080", "expose: port: 8080\n\t\tconnects: egress: external: [{port: 443}]"),
}
# Mistakes a schema catches (cue's for `validate`, the CUE-generated JSON schema's in the cluster): the wording
# differs by tool, the field does not.
SCHEMA_BREAKERS = {
    "env-key": ("expose: port: 8080", 'expose: port: 8080\n\t\tenv: "log-level": "x"'),
    "wrong-type": ("expose: port: 8080", 'expose: port: 8080\n\t\tenv: PORT: 8080'),
    "secret-reference": ("expose: port: 8080", 'expose: port: 8080\n\t\tenv: KEY: secret: "no-key-here"'),
    "claim-without-need": ("expose: port: 8080", "expose: port: 8080\n\t\tenv: DB: claim.pg.url"),
}


def validate_and_admit(bed: KubeTestBed, tmp_path: Path, old: str, new: str) -> tuple[list[str], str]:
    """(`apprafter render --env dev`'s problems as field: message, the webhook's refusal of the dev object) for
    MINIMAL with old -> new."""
    file = write_app(tmp_path, MINIMAL.replace(old, new))
    validated = run_cli("render", str(file), "--env", "dev")
    assert validated.returncode == 1, validated.stderr
    expected = [line.split(": ", 1)[1] for line in validated.stderr.splitlines()]  # drop file:line:col
    cr = unchecked_document(MINIMAL.replace(old, new))
    cr["metadata"]["namespace"] = fresh_namespace(bed)
    cr["spec"]["environment"] = "dev"
    with bed.as_user(EDITOR) as editor:
        text = message(apply(editor, bed, cr))
    assert APPS in text, text
    return expected, text


def unchecked_document(cue_text: str) -> dict[str, Any]:
    """The document `cue_text` describes, exported without the schema (so the mistake stays as written)."""
    import json
    import subprocess
    import tempfile

    from toolchain.tools import resolve

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "a.cue"
        src.write_text(cue_text.replace("claim.pg.url", '{claim: "pg/url"}').replace(
            'secret: "no-key-here"', '{secret: "no-key-here"}'))
        out = subprocess.run([str(resolve("cue")), "export", "--out", "json", str(src)], capture_output=True,
                             text=True, check=True, timeout=60)
    result: dict[str, Any] = json.loads(out.stdout)
    return result


@pytest.mark.parametrize("case", sorted(RULE_BREAKERS))
def test_the_refusal_has_the_same_wording_as_apprafter_render(admission_bed: KubeTestBed, webhook: Webhook,
                                                                tmp_path: Path, case: str) -> None:
    expected, text = validate_and_admit(admission_bed, tmp_path, *RULE_BREAKERS[case])
    for line in expected:
        assert line in text.splitlines(), (line, text)


@pytest.mark.parametrize("case", sorted(SCHEMA_BREAKERS))
def test_a_schema_refusal_names_the_field_apprafter_render_names(admission_bed: KubeTestBed, webhook: Webhook,
                                                                  tmp_path: Path, case: str) -> None:
    expected, text = validate_and_admit(admission_bed, tmp_path, *SCHEMA_BREAKERS[case])
    fields = [line.split(": ", 1)[0] for line in text.splitlines()[1:]]
    for line in expected:
        want = line.split(": ", 1)[0].replace('"', "")
        assert any(want.startswith(f) or f.startswith(want) for f in fields), (line, text)


def test_spec_environment_is_immutable_and_status_is_the_operators(admission_bed: KubeTestBed,
                                                                   webhook: Webhook) -> None:
    ns = fresh_namespace(admission_bed)
    cr = parser_cr(ns)
    with admission_bed.as_user(EDITOR) as editor, admission_bed.as_user(OPERATOR) as operator:
        ok(apply(editor, admission_bed, cr))
        moved = parser_cr(ns, environment="staging")
        assert "spec.environment is immutable" in message(apply(editor, admission_bed, moved))
        status = {**cr, "status": {"phase": "Ready"}}
        text = message(apply(editor, admission_bed, status, status=True))
        assert APPS in text and f"'{EDITOR}' may not" in text and f"only the operator ({OPERATOR})" in text
        stored = ok(apply(operator, admission_bed, status, status=True, manager="apprafter-operator"))
        assert stored["status"]["phase"] == "Ready"
        wiped = merge_status(editor, admission_bed, cr, {"lastAppliedSpec": None})
        assert f"'{EDITOR}' may not" in message(wiped)


def test_approval_is_a_persons_and_records_who(admission_bed: KubeTestBed, webhook: Webhook) -> None:
    ns = fresh_namespace(admission_bed)
    pending = plan(ns)
    bed = admission_bed
    with bed.as_user(EDITOR) as editor, bed.as_user(OPERATOR) as operator, bed.as_user(APPROVER) as approver:
        text = message(apply(editor, bed, pending))
        assert PLANS in text and f"only the operator ({OPERATOR}) creates MigrationPlans" in text
        ok(apply(operator, bed, pending))
        ok(merge_status(operator, bed, pending, {"phase": "pending-approval"}))
        text = message(merge_status(operator, bed, pending, {"phase": "approved"}))
        assert PLANS in text and f"'{OPERATOR}' is the operator and may not set 'approved'" in text
        # Write access to plans is not approve access: RBAC on the status subresource decides who approves.
        assert merge_status(editor, bed, pending, {"phase": "approved"}).status_code == 403
        approved = ok(merge_status(approver, bed, pending, {"phase": "approved", "approvedBy": "someone-else"}))
        assert approved["status"]["phase"] == "approved"
        assert approved["status"]["approvedBy"] == APPROVER
        assert approved["status"]["approvedAt"].endswith("Z")
        changed = copy.deepcopy(pending)
        changed["spec"]["trigger"]["approvedSpecHash"] = "sha256:" + "b" * 64
        assert "spec is immutable" in message(apply(operator, bed, changed))
        text = message(merge_status(operator, bed, pending, {"approvedBy": OPERATOR}))
        assert "status.approvedBy never changes once stamped" in text
        applied = ok(merge_status(operator, bed, pending, {"phase": "applied"}))
        assert applied["status"]["approvedBy"] == APPROVER and applied["status"]["phase"] == "applied"


def test_platformstack_is_one_per_cluster_with_a_semver_pin(admission_bed: KubeTestBed, webhook: Webhook) -> None:
    bed = admission_bed
    bed.ensure_namespace("apprafter-system")
    with bed.as_user(EDITOR) as editor, bed.as_user(OPERATOR) as operator:
        assert "a cluster has one PlatformStack, named 'default'" in message(
            apply(editor, bed, platform_stack(name="second")))
        ns = fresh_namespace(bed)
        text = message(apply(editor, bed, platform_stack(namespace=ns)))
        assert STACKS in text and f"metadata.namespace: '{ns}'" in text
        text = message(apply(editor, bed, platform_stack(pin="v2.0")))
        assert STACKS in text and "spec.pin: 'v2.0' is not SemVer 2" in text
        assert "Unsupported value: \"nightly\"" in message(apply(editor, bed, platform_stack(channel="nightly")))
        stack = platform_stack(pin="2.0.0-rc.1")
        assert ok(apply(editor, bed, stack))["spec"]["autoUpgrade"] is False
        forged = {**stack, "status": {"currentVersion": "2.0.0"}}
        assert f"'{EDITOR}' may not" in message(apply(editor, bed, forged, status=True))
        ok(apply(operator, bed, forged, status=True, manager="apprafter-operator"))


def test_unreadable_and_oversized_requests_are_refused_over_tls(webhook: Webhook) -> None:
    with webhook.client() as client:
        resp = client.post("/validate", content=b"{not json")
        assert resp.status_code == 200
        assert resp.json()["response"]["allowed"] is False
        assert resp.json()["response"]["status"]["message"] == "refused: the body is not JSON (JSONDecodeError)"
        big = client.post("/validate", content=b" " * ((3 << 20) + 1))
        assert big.status_code == 413 and big.json()["response"]["allowed"] is False
        assert client.get("/validate").status_code == 405
        assert client.get("/healthz").text == "ok" and client.get("/readyz").status_code == 200
        metrics = client.get("/metrics").text
    assert 'apprafter_webhook_requests_total{allowed="false",kind="-",operation="-",webhook="validate"}' in metrics
    assert "apprafter_webhook_request_duration_seconds_bucket" in metrics
    plain = httpx.get(f"http://127.0.0.1:{webhook.metrics_port}/metrics", timeout=10).text
    assert "apprafter_webhook_requests_total" in plain


def test_env_literal_values_never_reach_messages_or_logs(admission_bed: KubeTestBed, webhook: Webhook) -> None:
    secret = "hunter2-correct-horse-battery"
    cr = parser_cr(fresh_namespace(admission_bed))
    cr["spec"]["base"]["env"]["DB_PASSWORD"] = secret
    cr["spec"]["base"]["env"]["bad-key"] = secret
    cr["spec"]["environments"]["dev"]["env"] = {"TOKEN": {"literal": secret}}
    with admission_bed.as_user(EDITOR) as editor:
        text = message(apply(editor, admission_bed, cr))
    assert APPS in text and "spec.base.env" in text
    assert secret not in text
    assert secret not in webhook.log()


def test_certificate_rotation_mid_run_drops_no_request(admission_bed: KubeTestBed, webhook: Webhook,
                                                       tmp_path: Path) -> None:
    """New certificate files (from a new CA, the certificate written before its key) while writes go on: no write
    fails, the same process serves the new certificate, and the API server verifies that one."""
    bed, pid = admission_bed, webhook.process.popen.pid if webhook.process else None
    ns = fresh_namespace(bed)
    bad = parser_cr(ns)
    bad["spec"]["base"]["env"]["bad-key"] = "x"
    old_ca, new_ca = webhook.ca, CA("apprafter-admission-rotated-ca")
    rotated = new_ca.serving_cert(tmp_path / "rotated", "webhook")
    register(bed, webhook.base_url, old_ca.pem + new_ca.pem)  # cert-manager's CA stays; here both are trusted
    answers: list[str] = []
    done = threading.Event()

    def writes() -> None:
        with bed.as_user(EDITOR) as editor:
            while not done.is_set():
                answers.append(apply(editor, bed, bad, dry_run=True).json().get("message", ""))

    thread = threading.Thread(target=writes)
    thread.start()
    try:
        old_serial = served_serial(webhook.port, webhook.cert.ca_path)
        refusals = webhook.log().count(HALF_WRITTEN)
        webhook.cert.cert_path.write_bytes(rotated.cert_path.read_bytes())
        # A half-written pair: the webhook sees it, keeps serving the old one, and writes go on through it.
        eventually("the webhook to refuse the half-written pair", lambda: webhook.log().count(HALF_WRITTEN) > refusals
                   or None)
        more_answers(answers, 3)
        assert served_serial(webhook.port, webhook.cert.ca_path) == old_serial
        webhook.cert.key_path.write_bytes(rotated.key_path.read_bytes())
        eventually("the new certificate to be served",
                   lambda: served_serial(webhook.port, rotated.ca_path) != old_serial or None)
        more_answers(answers, 3)  # writes go on after the switch too
    finally:
        done.set()
        thread.join()
        webhook.cert.ca_path.write_bytes(new_ca.pem)
        webhook.ca = new_ca
    assert len(answers) > 5 and all(APPS in a for a in answers), [a for a in answers if APPS not in a][:3]
    assert webhook.process is not None and webhook.process.popen.pid == pid
    # The API server sees the new certificate: trusting only the old CA fails, only the new one works. (Each
    # bundle is one it never had: it keeps a client per bundle, whose open connections keep their certificate.)
    with bed.as_user(EDITOR) as editor:
        register(bed, webhook.base_url, old_ca.pem + CA("unrelated").pem)
        eventually("the API server to refuse the old CA's trust", lambda: "certificate signed by unknown authority"
                   in apply(editor, bed, bad, dry_run=True).json().get("message", "") or None)
        register(bed, webhook.base_url, new_ca.pem)
        eventually("the API server to verify the new certificate", lambda: APPS in apply(
            editor, bed, bad, dry_run=True).json().get("message", "") or None)


HALF_WRITTEN = "new certificate/key pair does not load yet, keeping serial"


def more_answers(answers: list[str], count: int) -> None:
    """Wait until `count` more writes have been answered (by the thread appending to `answers`)."""
    start = len(answers)
    eventually(f"{count} more answered writes", lambda: len(answers) >= start + count or None)


def served_serial(port: int, ca: Path) -> int:
    """The serial number of the certificate the webhook presents, verified against `ca`."""
    context = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock, \
            context.wrap_socket(sock, server_hostname="127.0.0.1") as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def test_with_the_webhook_down_writes_are_refused_and_cel_still_holds(admission_bed: KubeTestBed,
                                                                      webhook: Webhook) -> None:
    bed, ns = admission_bed, fresh_namespace(admission_bed)
    app, pending = parser_cr(ns), plan(ns)
    bed.ensure_namespace("apprafter-system")
    with bed.as_user(EDITOR) as editor, bed.as_user(OPERATOR) as operator:
        ok(apply(editor, bed, app))
        ok(apply(operator, bed, pending))
        ok(merge_status(operator, bed, pending, {"phase": "pending-approval"}))
        scaled = copy.deepcopy(app)
        scaled["spec"]["base"]["replicas"] = 4
        moved = parser_cr(ns, environment="staging")
        changed = copy.deepcopy(pending)
        changed["spec"]["approvers"] = ["mallory@example.com"]
        webhook.stop()
        # failurePolicy: Fail: what the webhook would admit is refused while no replica answers ...
        assert 'failed calling webhook "applications.apprafter.io"' in message(apply(editor, bed, scaled))
        # ... but not the operator's own writes it would allow on the operator's identity alone (matchConditions)
        status = {**app, "status": {"phase": "Ready"}}
        assert 'failed calling webhook "applications.apprafter.io"' in message(apply(editor, bed, status,
                                                                                  status=True))
        assert ok(apply(operator, bed, status, status=True, manager="apprafter-operator"))["status"]["phase"] == "Ready"
        assert 'failed calling webhook "migrationplan-approvals.apprafter.io"' in message(
            merge_status(operator, bed, pending, {"phase": "superseded"}))
        # ... and the API server's own CEL rules answer first where they apply.
        assert "spec.environment is immutable" in message(apply(editor, bed, moved))
        assert "spec is immutable" in message(apply(operator, bed, changed))
        assert "a cluster has one PlatformStack" in message(apply(editor, bed, platform_stack(name="second")))
        # Without the configurations at all (deleted, or failurePolicy Ignore), CEL alone still holds what it can.
        unregister(bed)
        eventually("the webhook configurations to be gone", lambda: apply(editor, bed, scaled).status_code < 300
                   or None)
        assert "spec.environment is immutable" in message(apply(editor, bed, moved))
        assert "spec is immutable" in message(apply(operator, bed, changed))
        assert "status.phase may become applied only from approved" in message(
            merge_status(operator, bed, pending, {"phase": "applied"}))
        assert "status.phase rejected is only for platform-scope plans" in message(
            merge_status(operator, bed, pending, {"phase": "rejected"}))
        assert "a cluster has one PlatformStack" in message(apply(editor, bed, platform_stack(name="second")))
        # What needs the writer's identity is the webhook's alone: here the operator could approve.
        assert ok(merge_status(operator, bed, pending, {"phase": "approved"}))["status"]["phase"] == "approved"
        # Back up: a new webhook process and its configurations, and the cluster refuses and admits as before.
        webhook.start()
        register(bed, webhook.base_url, webhook.ca.pem)
        broken = copy.deepcopy(scaled)
        broken["spec"]["base"]["env"]["bad-key"] = "x"
        eventually("the restarted webhook to answer", lambda: APPS in apply(editor, bed, broken).json().get(
            "message", "") or None)
        rescaled = copy.deepcopy(scaled)
        rescaled["spec"]["base"]["replicas"] = 5
        assert ok(apply(editor, bed, rescaled))["spec"]["base"]["replicas"] == 5
        webhook.honoured = True


def test_an_unprintable_character_is_refused_naming_the_field(admission_bed: KubeTestBed, webhook: Webhook) -> None:
    """U+FFFE passes the API server's decoding of this write (JSON-escaped) but not the operator's apply of the
    Deployment (raw UTF-8, read as YAML): refused here, at the door, with the field and never the value."""
    cr = parser_cr(fresh_namespace(admission_bed))
    cr["spec"]["base"]["env"]["LOG_LEVEL"] = "very-secret\ufffevalue"
    with admission_bed.as_user(EDITOR) as editor:
        text = message(apply(editor, admission_bed, cr))
    assert APPS in text, text
    assert "spec.base.env.LOG_LEVEL: the value holds U+FFFE (character 12), which the API server refuses" in text
    assert "very-secret" not in text
