"""AdmissionReview (admission.k8s.io/v1) in, AdmissionReview out: the request is dispatched on kind,
subresource and operation to the core's rules. Pure: no server, no I/O, no clock (the caller passes `now`).

Fail closed: a body that is not an AdmissionReview, or a request this webhook has no rule for, is refused
with a message saying what is wrong; nothing here answers "allowed" without a rule that allows it.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import json
import re
from collections.abc import Mapping
from typing import Any

import jsonschema

from admission.rules import (
    FORBIDDEN,
    INVALID,
    VALIDATING,
    WRITES,
    Handler,
    Request,
    Settings,
    mutating_rules,
)
from compatibility.inputs import document_schema

__all__ = ["API_VERSION", "MAX_BODY_BYTES", "Outcome", "Settings", "busy", "internal_error", "mutating", "over_budget",
           "too_large", "uid_hint", "validating", "warm_up", "writer_hint"]
from toolchain.errors import USER_EXIT, AppRafterError

API_VERSION = "admission.k8s.io/v1"
GROUP = "apprafter.io"
MAX_BODY_BYTES = 3 << 20
MAX_PROBLEMS = 50
BAD_REQUEST, TOO_LARGE, BUSY, INTERNAL = 400, 413, 429, 500
_REASONS = {INVALID: "Invalid", FORBIDDEN: "Forbidden", BAD_REQUEST: "BadRequest", TOO_LARGE: "RequestEntityTooLarge",
            BUSY: "TooManyRequests", INTERNAL: "InternalError"}
# The request uid where the API server writes it (request.uid is the first "uid" of its JSON), read without
# parsing a body the server will not parse on its event loop.
_UID = re.compile(rb'"uid"\s*:\s*"([^"\\]{1,128})"')
# Who writes, and where, read the same way for the webhook's fair shares (the API server writes request.namespace
# and request.userInfo.username before the object).
_USER = re.compile(rb'"userInfo"\s*:\s*\{\s*"username"\s*:\s*"([^"\\]{1,256})"')
_NAMESPACE = re.compile(rb'"namespace"\s*:\s*"([^"\\]{1,63})"')

# What a request must carry for any rule to read it (the API server always sends these).
_OBJECT = {"type": ["object", "null"]}
REQUEST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "request"],
    "properties": {
        "apiVersion": {"const": API_VERSION},
        "kind": {"const": "AdmissionReview"},
        "request": {
            "type": "object",
            "required": ["uid", "kind", "operation", "userInfo"],
            "properties": {
                "uid": {"type": "string", "minLength": 1},
                "kind": {"type": "object", "required": ["group", "kind"],
                         "properties": {"group": {"type": "string"}, "kind": {"type": "string"}}},
                "subResource": {"type": "string"},
                "name": {"type": "string"},
                "namespace": {"type": "string"},
                "operation": {"type": "string"},
                "userInfo": {"type": "object", "required": ["username"],
                             "properties": {"username": {"type": "string"},
                                            "groups": {"type": "array", "items": {"type": "string"}}}},
                "object": _OBJECT,
                "oldObject": _OBJECT,
            },
        },
    },
}


@dataclasses.dataclass(frozen=True)
class Outcome:
    """The answer, plus what the server logs and counts (fields named in refusals, never their values)."""

    review: dict[str, Any]
    kind: str
    operation: str
    allowed: bool
    fields: tuple[str, ...] = ()
    subject: str = "-"
    user: str = "-"

    @property
    def message(self) -> str:
        return str(self.review["response"].get("status", {}).get("message", ""))

    def to_json(self) -> dict[str, Any]:
        """What a review worker sends back (admission.worker)."""
        return {"review": self.review, "kind": self.kind, "operation": self.operation, "allowed": self.allowed,
                "fields": list(self.fields), "subject": self.subject, "user": self.user}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Outcome:
        return cls(dict(data["review"]), str(data["kind"]), str(data["operation"]), data["allowed"] is True,
                   tuple(str(f) for f in data["fields"]), str(data["subject"]), str(data["user"]))


@functools.cache
def _request_validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(REQUEST_SCHEMA)


def _no_constant(name: str) -> Any:
    """NaN and Infinity are Python's extensions, not JSON: refused like any other malformed body."""
    raise ValueError(f"{name} is not JSON")


class _Unreadable(AppRafterError):
    """The body is not an AdmissionReview this webhook can read (the caller's to fix: refused with 400)."""

    exit_code = USER_EXIT
    retry = False


def _parse(body: bytes) -> Request:
    """The request, or _Unreadable naming the first thing wrong."""
    try:
        doc = json.loads(body, parse_constant=_no_constant)
    except (ValueError, RecursionError) as e:
        raise _Unreadable(f"the body is not JSON ({type(e).__name__})") from None
    errors = sorted(_request_validator().iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        error = errors[0]
        where = ".".join(str(p) for p in error.absolute_path) or "(top level)"
        # The instance is left out of a type error: it could be a whole object with its values.
        what = f"must be of type {error.validator_value}" if error.validator == "type" else error.message[:200]
        raise _Unreadable(f"not an {API_VERSION} AdmissionReview: {where}: {what}")
    req = doc["request"]
    obj: dict[str, Any] = req.get("object") or {}
    old: dict[str, Any] = req.get("oldObject") or {}
    meta = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
    name = req.get("name") or meta.get("name") or meta.get("generateName") or ""
    group, kind = req["kind"]["group"], req["kind"]["kind"]
    return Request(req["uid"], kind if group == GROUP else f"{kind}.{group or 'core'}", req.get("subResource", ""),
                    req["operation"], req["userInfo"]["username"], req.get("namespace", ""), str(name), obj, old,
                    tuple(req["userInfo"].get("groups") or ()))


def _uid_of(body: bytes) -> str:
    """The request uid of a body that failed to parse, when one can be read (else the API server gets "")."""
    try:
        uid = json.loads(body)["request"]["uid"]
    except (ValueError, RecursionError, KeyError, TypeError):
        return ""
    return uid if isinstance(uid, str) else ""


def _answer(uid: str, allowed: bool, code: int = 200, message: str = "", warnings: tuple[str, ...] = (),
            patch: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    response: dict[str, Any] = {"uid": uid, "allowed": allowed}
    if not allowed:
        response["status"] = {"code": code, "reason": _REASONS.get(code, "Invalid"), "message": message}
    if warnings:
        response["warnings"] = list(warnings)
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(list(patch)).encode()).decode()
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}


def too_large(limit: int = MAX_BODY_BYTES) -> Outcome:
    """The answer to a body over `limit` bytes (not read, so its uid is unknown)."""
    message = f"refused: the AdmissionReview is larger than {limit} bytes ({limit >> 20} MiB)"
    return Outcome(_answer("", False, TOO_LARGE, message), "-", "-", False)


def uid_hint(body: bytes | bytearray) -> str:
    """The request uid from the first 4 KiB of a body, "" when none is there (the API server then refuses the
    answer, which with failurePolicy Fail refuses the write too)."""
    found = _UID.search(bytes(body[:4096]))
    return found.group(1).decode("utf-8", "replace") if found else ""


def writer_hint(body: bytes | bytearray) -> tuple[str, str]:
    """(username, namespace) of the request from the first 4 KiB of a body, "" for each not found there: what the
    webhook's fair shares key a review by before anyone parses it (a body sent past the API server may name anyone:
    the shares key it by its client too)."""
    head = bytes(body[:4096])
    user, namespace = _USER.search(head), _NAMESPACE.search(head)
    return (user.group(1).decode("utf-8", "replace") if user else "",
            namespace.group(1).decode("utf-8", "replace") if namespace else "")


def over_budget(body: bytes | bytearray, what: str) -> Outcome:
    """The answer to a review that ran out of `what` (CPU time, memory, time): refused, not retried: the same
    object costs the same again."""
    message = (f"refused: reviewing this object took more than the admission webhook's budget ({what}); nothing "
               "was admitted. Make it smaller (fewer environments, env values or lists), or check it with "
               "`apprafter validate`")
    return Outcome(_answer(uid_hint(body), False, TOO_LARGE, message), "-", "-", False)


def busy(body: bytes | bytearray, why: str) -> Outcome:
    """The answer when the webhook has no room for another review now (a 429 the writer may retry)."""
    message = f"refused for now: the admission webhook is at capacity ({why}); nothing was admitted: retry"
    return Outcome(_answer(uid_hint(body), False, BUSY, message), "-", "-", False)


_WARM_UP: dict[str, Any] = {
    "apiVersion": "apprafter.io/v1alpha1", "kind": "Application", "metadata": {"name": "warm-up", "namespace": "x"},
    "spec": {"environment": "prod", "environments": {"prod": {}},
             "base": {"image": "registry.example/warm-up:1", "replicas": 1, "needs": {"pg": {}},
                      "expose": {"port": 8080, "network": "public", "paths": ["/"]},
                      "env": {"A": "b", "DB": {"claim": "pg/url"}, "KEY": {"secret": "s/k"}},
                      "connects": {"egress": {"external": [{"host": "api.example.com", "port": 443}]}},
                      "autoscale": {"on": "cpu", "min": 1, "max": 2}}}}


def warm_up() -> None:
    """Build what the first review would (the Application schema runs cue once, the validators, every lazy import
    of a review, refused and admitted), so no request pays for it."""
    document_schema()
    _request_validator()
    variants: list[dict[str, Any]] = [{"prod": {}, "Bad": {"env": {"NOTE": "literal"}}}, {"prod": {}}]
    for environments in variants:
        obj = {**_WARM_UP, "spec": {**_WARM_UP["spec"], "environments": environments}}
        request = {"uid": "warm-up", "kind": {"group": GROUP, "version": "v1alpha1", "kind": "Application"},
                   "operation": "CREATE", "userInfo": {"username": "warm-up"}, "object": obj}
        validating(json.dumps({"apiVersion": API_VERSION, "kind": "AdmissionReview", "request": request}).encode(),
                   Settings())


def internal_error(body: bytes) -> Outcome:
    """The answer when a rule itself failed (a bug): refused, never allowed; the traceback is in the webhook's log."""
    message = "refused: the admission webhook failed to evaluate this request (see its log); nothing was admitted"
    return Outcome(_answer(_uid_of(body), False, INTERNAL, message), "-", "-", False)


# --- rules, one handler per (kind, subresource) ----------------------------------------------------------

# --- entry points ----------------------------------------------------------------------------------------

def _review(body: bytes, settings: Settings, handlers: Mapping[tuple[str, str], Handler]) -> Outcome:
    try:
        req = _parse(body)
    except _Unreadable as e:
        return Outcome(_answer(_uid_of(body), False, BAD_REQUEST, f"refused: {e}"), "-", "-", False)
    handler = handlers.get((req.kind, req.subresource))
    if handler is None or req.operation not in WRITES:
        handled = ", ".join(f"{k}/{s}" if s else k for k, s in handlers)
        message = (f"refused: this webhook has no rule for {req.operation} of {req.label} ({req.who}); it handles "
                   f"CREATE and UPDATE of {handled}: check the webhook configuration's rules")
        return Outcome(_answer(req.uid, False, BAD_REQUEST, message), req.label, req.operation, False, (), req.who,
                       req.user)
    verdict = handler(req, settings)
    if not verdict.problems:
        return Outcome(_answer(req.uid, True, warnings=verdict.warnings, patch=verdict.patch), req.label, req.operation,
                       True, (), req.who, req.user)
    count = len(verdict.problems)
    lines = [f"{req.who} (user {req.user!r}): {count} problem{'s' if count > 1 else ''}:",
             *(f"{field}: {message}" for field, message in verdict.problems[:MAX_PROBLEMS])]
    if count > MAX_PROBLEMS:  # a message the API server hands back whole: bounded, the rest is one command away
        lines.append(f"... and {count - MAX_PROBLEMS} more problems (run `apprafter validate`)")
    return Outcome(_answer(req.uid, False, verdict.code, "\n".join(lines)), req.label, req.operation, False,
                   tuple(field for field, _ in verdict.problems[:MAX_PROBLEMS]), req.who, req.user)


def validating(body: bytes, settings: Settings) -> Outcome:
    """POST /validate: every validating rule, dispatched on the request's kind and subresource."""
    return _review(body, settings, VALIDATING)


def mutating(body: bytes, settings: Settings, now: str) -> Outcome:
    """POST /mutate: stamps status.approvedBy/approvedAt on a MigrationPlan status write that approves it."""
    return _review(body, settings, mutating_rules(now))
