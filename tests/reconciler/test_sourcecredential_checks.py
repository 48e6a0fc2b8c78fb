"""The pure decisions of a SourceCredential check (lifecycle.credential_checks): each server answer read as Valid,
Invalid or Unverified in the server's words, when the next check is due, and what the coverage gate derives."""

from __future__ import annotations

from typing import Any

import pytest

from lifecycle import credential_checks as checks
from lifecycle.credential_outputs import Material, half_conditions, status
from lifecycle.sourcecredential import Backend, Credential, Half

HALF = Half(Backend("login", None), ("ghcr.io/myorg/", "ghcr.io/other/", "registry.example:5000/team/"))
PASSWORD = "pw-not-in-any-message"


@pytest.mark.parametrize(("status_code", "words", "state"), [
    (200, "", checks.VALID), (401, "HTTP 401 Unauthorized: authentication required", checks.INVALID),
    (403, "HTTP 403 Forbidden", checks.INVALID), (503, "HTTP 503 Service Unavailable", checks.UNVERIFIED),
    (429, "HTTP 429 Too Many Requests", checks.UNVERIFIED), (None, "registry r unreachable", checks.UNVERIFIED)])
def test_a_registry_answer_is_a_verdict_only_when_it_is_about_the_login(status_code: int | None, words: str,
                                                                        state: str) -> None:
    verdict = checks.registry_verdict("ghcr.io", status_code, words)
    assert verdict.state == state
    assert words in verdict.message


def test_a_refused_git_login_is_invalid_in_gits_words_and_a_missing_route_unverified() -> None:
    refused = checks.git_verdict("https://git.example/o/", 128, "remote: nope\nfatal: Authentication failed for "
                                 "'https://git.example/o/'\n", 20)
    assert refused == checks.Verdict(checks.INVALID, "git ls-remote https://git.example/o/ refused the login: "
                                     "fatal: Authentication failed for 'https://git.example/o/'")
    assert checks.git_verdict("u", 128, "fatal: unable to access 'u': The requested URL returned error: 403",
                              20).state == checks.INVALID
    assert checks.git_verdict("u", 0, "", 20).state == checks.VALID
    prefix = checks.git_verdict("u", 128, "fatal: repository 'u' not found\n", 20)
    assert prefix.state == checks.VALID and "no repository at the prefix itself" in prefix.message
    unreachable = checks.git_verdict("u", 128, "fatal: unable to access 'u': Could not resolve host: git.x\n", 20)
    assert unreachable.state == checks.UNVERIFIED and "Could not resolve host" in unreachable.message
    assert checks.git_verdict("u", 128, "fatal: unable to access 'u': The requested URL returned error: 502",
                              20).state == checks.UNVERIFIED
    timed_out = checks.git_verdict("u", None, "", 20)
    assert timed_out.state == checks.UNVERIFIED and "no answer within 20s" in timed_out.message


def test_a_half_is_invalid_if_any_server_refused_and_unverified_if_any_could_not_tell() -> None:
    good, bad, unknown = (checks.Verdict(checks.VALID, "a"), checks.Verdict(checks.INVALID, "b"),
                          checks.Verdict(checks.UNVERIFIED, "c"))
    assert checks.combined([good, unknown, bad]) == bad
    assert checks.combined([good, unknown]) == unknown
    assert checks.combined([good, good]).state == checks.VALID


def test_what_a_half_is_checked_against() -> None:
    assert checks.registry_hosts(HALF) == ["ghcr.io", "registry.example:5000"]
    git = Half(Backend("login", None), ("github.com/myorg/", "http://git.internal:3000/team/"))
    assert checks.git_urls(git) == ["http://git.internal:3000/team/", "https://github.com/myorg/"]


def test_checked_at_once_on_a_change_periodically_after_a_verdict_with_capped_backoff_otherwise() -> None:
    current = checks.fingerprint(HALF, "deploy", PASSWORD)
    assert PASSWORD not in current
    assert checks.wait_before_check(None, current, 100.0, 600, 60).seconds == 0
    valid = checks.after_check(None, current, checks.Verdict(checks.VALID, "ok"), 100.0, "t")
    assert checks.wait_before_check(valid, current, 100.0, 600, 60).seconds == 600
    assert checks.wait_before_check(valid, checks.fingerprint(HALF, "deploy", "rotated"), 100.0, 600, 60).seconds == 0
    narrowed = Half(HALF.backend, HALF.covers[:1])
    assert checks.wait_before_check(valid, checks.fingerprint(narrowed, "deploy", PASSWORD), 100.0, 600, 60).due
    last, waits = valid, []
    for _ in range(6):
        last = checks.after_check(last, current, checks.Verdict(checks.UNVERIFIED, "down"), 100.0, "t")
        waits.append(checks.wait_before_check(last, current, 100.0, 600, 60).seconds)
    assert waits == [5, 10, 20, 40, 60, 60]
    again = checks.after_check(last, current, checks.Verdict(checks.INVALID, "no"), 100.0, "t")
    assert again.unverified_runs == 0 and checks.wait_before_check(again, current, 700.0, 600, 60).seconds == 0


def test_a_check_request_makes_a_half_due_at_once_and_is_remembered() -> None:
    current = checks.fingerprint(HALF, "deploy", PASSWORD)
    valid = checks.after_check(None, current, checks.Verdict(checks.VALID, "ok"), 100.0, "t", "r1")
    assert checks.wait_before_check(valid, current, 100.0, 600, 60, "r1").seconds == 600  # answered: not again
    assert checks.wait_before_check(valid, current, 100.0, 600, 60, "r2").seconds == 0  # a new request: now
    assert checks.wait_before_check(valid, current, 100.0, 600, 60).due  # the annotation removed is a change too
    assert checks.check_request({checks.CHECK_REQUEST_ANNOTATION: "r\n" + "x" * 300}) == "r?" + "x" * 126
    assert checks.check_request(None) == "" and checks.check_request({checks.CHECK_REQUEST_ANNOTATION: 3}) == ""


def test_the_coverage_gate() -> None:
    current = checks.fingerprint(HALF, "deploy", PASSWORD)
    valid = checks.after_check(None, current, checks.Verdict(checks.VALID, "ok"), 0, "t")
    invalid = checks.after_check(None, current, checks.Verdict(checks.INVALID, "no"), 0, "t")
    assert checks.derives("present", True, invalid, current)
    assert not checks.derives("present", False, None, None)
    assert checks.derives("confirmed", True, valid, current)
    assert not checks.derives("confirmed", True, invalid, current)
    assert not checks.derives("confirmed", True, valid, checks.fingerprint(HALF, "deploy", "rotated"))


def test_the_status_carries_the_verdict_and_when_it_was_made() -> None:
    credential = Credential("myorg", None, HALF)
    current = checks.fingerprint(HALF, "deploy", PASSWORD)
    refused = checks.after_check(None, current, checks.registry_verdict(
        "ghcr.io", 401, "HTTP 401 Unauthorized: authentication required"), 0, "2026-01-02T03:04:05Z")
    document = status(credential, {"registry": Material("deploy", PASSWORD)}, {}, [], [], 3, "now",
                      {"registry": refused})
    valid = {c["type"]: c for c in document["registry"]["conditions"]}["Valid"]
    assert (valid["status"], valid["reason"]) == ("False", "Invalid")
    assert valid["message"] == "registry ghcr.io refused the login: GET /v2/: HTTP 401 Unauthorized: " \
                               "authentication required"
    assert document["registry"]["lastValidated"] == "2026-01-02T03:04:05Z"
    missing = half_conditions("Secret login not found", refused)[1]
    assert (missing.status, missing.reason, missing.message) == ("Unknown", "Unverified", "no material to check")


def test_what_the_status_reports_and_what_it_adds_up_to() -> None:
    def half(present: str, valid: str | None) -> dict[str, Any]:
        conditions = [{"type": "Present", "status": present, "reason": "MaterialFound" if present == "True" else
                       "MaterialMissing", "message": "m"}]
        if valid:
            conditions.append({"type": "Valid", "status": "x", "reason": valid, "message": "said"})
        return {"conditions": conditions, "lastValidated": "t"}

    spec = {"git": {}, "registry": {}}
    both = checks.reported({"spec": spec, "status": {"git": half("True", checks.INVALID),
                                                     "registry": half("False", None)}})
    assert [(h.half, h.state, h.reason) for h in both] == [("git", checks.INVALID, checks.INVALID),
                                                           ("registry", checks.NOT_PRESENT, "MaterialMissing")]
    assert checks.outcome(both) == checks.INVALID  # a refusal wins over a half that could not be told
    untold = checks.reported({"spec": spec, "status": {"git": half("True", checks.VALID)}})
    assert [h.state for h in untold] == [checks.VALID, checks.UNVERIFIED]
    assert checks.outcome(untold) == checks.UNVERIFIED
    assert checks.outcome(checks.reported({"spec": {"git": {}}, "status": {"git": half("True", checks.VALID)}})) \
        == checks.VALID
