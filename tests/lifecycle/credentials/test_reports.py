"""What SourceCredentials' status tells others, decided without a cluster (lifecycle.credentials.reports): the
condition an Application gets when the credentials covering its image were refused or do not serve its namespace,
and each half's state for `apprafter repo creds`."""

from __future__ import annotations

import copy
from typing import Any

from lifecycle.credentials import checks
from lifecycle.credentials.reports import (
    CREDENTIAL_CONDITION,
    NAMESPACE_NOT_COVERED,
    NOT_PRESENT,
    image_credentials,
    outcome,
    reported,
    scoped_out,
)


def credential_object(name: str, hosts: list[str], valid: tuple[str, str] | None) -> dict[str, Any]:
    conditions = [{"type": "Valid", "status": valid[0], "reason": valid[1], "message": "refused: HTTP 401"}] \
        if valid else []
    return {"metadata": {"name": name, "namespace": "apprafter-system"},
            "spec": {"registry": {"backend": {"sealedSecretRef": {"name": "x"}}, "hosts": hosts}},
            "status": {"registry": {"conditions": conditions, "hosts": hosts}}}


def test_an_image_covered_only_by_invalid_credentials_is_named() -> None:
    refused = credential_object("myorg", ["ghcr.io/myorg/"], ("False", "Invalid"))
    condition = image_credentials("ghcr.io/myorg/shop:1", "team", [refused])
    assert condition is not None and (condition.type, condition.status, condition.reason) == (
        CREDENTIAL_CONDITION, "False", "CredentialInvalid")
    assert "apprafter-system/myorg" in condition.message and "HTTP 401" not in condition.message
    working = credential_object("other", ["ghcr.io/"], ("True", "Valid"))
    unverified = credential_object("other", ["ghcr.io/"], ("Unknown", "Unverified"))
    assert image_credentials("ghcr.io/myorg/shop:1", "team", [refused, working]) is None  # another one may work
    assert image_credentials("ghcr.io/myorg/shop:1", "team", [refused, unverified]) is None
    assert image_credentials("ghcr.io/elsewhere/shop:1", "team", [refused]) is None  # not covered
    assert image_credentials(None, "team", [refused]) is None
    deleting = {**refused, "metadata": {**refused["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    assert image_credentials("ghcr.io/myorg/shop:1", "team", [deleting]) is None
    # a deletion waiting for its plan still serves (its pull secret stays until the approval): it counts
    held = copy.deepcopy(deleting)
    held["status"]["migrationPlan"] = "myorg-credential-0123456789"
    still = image_credentials("ghcr.io/myorg/shop:1", "team", [held])
    assert still is not None and still.reason == "CredentialInvalid"


def test_an_image_covered_but_not_in_its_namespace_says_so_unnamed() -> None:
    scoped = credential_object("myorg", ["ghcr.io/myorg/"], ("True", "Valid"))
    scoped["spec"]["registry"]["namespaces"] = ["team"]
    condition = image_credentials("ghcr.io/myorg/shop:1", "intruder", [scoped])
    assert condition is not None and (condition.status, condition.reason) == ("False", NAMESPACE_NOT_COVERED)
    assert "namespace intruder" in condition.message and "myorg" not in condition.message.replace("ghcr.io/myorg", "")
    assert scoped_out("ghcr.io/myorg/shop:1", "intruder", [scoped])
    assert image_credentials("ghcr.io/myorg/shop:1", "team", [scoped]) is None and not scoped_out(
        "ghcr.io/myorg/shop:1", "team", [scoped])
    assert not scoped_out("ghcr.io/elsewhere/shop:1", "intruder", [scoped]) and not scoped_out(None, "x", [scoped])
    # another credential serving the namespace: covered there, and it is the one whose validity counts
    everywhere = credential_object("wide", ["ghcr.io/"], ("False", "Invalid"))
    assert not scoped_out("ghcr.io/myorg/shop:1", "intruder", [scoped, everywhere])
    invalid = image_credentials("ghcr.io/myorg/shop:1", "intruder", [scoped, everywhere])
    assert invalid is not None and invalid.reason == "CredentialInvalid" and "apprafter-system/wide" in invalid.message
    assert "apprafter-system/myorg" not in invalid.message
    # a narrowing waiting for its plan serves what it last applied (its pull secrets stay until the approval)
    held = copy.deepcopy(scoped)
    held["status"]["migrationPlan"] = "myorg-credential-0123456789"
    assert not scoped_out("ghcr.io/myorg/shop:1", "intruder", [held])


def test_what_the_status_reports_and_what_it_adds_up_to() -> None:
    def half(present: str, valid: str | None) -> dict[str, Any]:
        conditions = [{"type": "Present", "status": present, "reason": "MaterialFound" if present == "True" else
                       "MaterialMissing", "message": "m"}]
        if valid:
            conditions.append({"type": "Valid", "status": "x", "reason": valid, "message": "said"})
        return {"conditions": conditions, "lastValidated": "t"}

    spec = {"git": {}, "registry": {}}
    both = reported({"spec": spec, "status": {"git": half("True", checks.INVALID),
                                                     "registry": half("False", None)}})
    assert [(h.half, h.state, h.reason) for h in both] == [("git", checks.INVALID, checks.INVALID),
                                                           ("registry", NOT_PRESENT, "MaterialMissing")]
    assert outcome(both) == checks.INVALID  # a refusal wins over a half that could not be told
    untold = reported({"spec": spec, "status": {"git": half("True", checks.VALID)}})
    assert [h.state for h in untold] == [checks.VALID, checks.UNVERIFIED]
    assert outcome(untold) == checks.UNVERIFIED
    assert outcome(reported({"spec": {"git": {}}, "status": {"git": half("True", checks.VALID)}})) \
        == checks.VALID
