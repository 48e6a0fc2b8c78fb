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
from collections.abc import Callable, Mapping
from typing import Any

import jsonschema

from compatibility import authority
from compatibility.inputs import document_schema
from compatibility.objects import check_application
from lifecycle import hostname_policy, hostnames
from lifecycle.backends import registry as backend_registry
from lifecycle.credentials import spec as credential_spec
from platform_stack import resource as platform_stack
from renderer import validate
from renderer.context import PlatformContext
from renderer.selectors import selector_problems
from toolchain.errors import USER_EXIT, AppRafterError

API_VERSION = "admission.k8s.io/v1"
GROUP = "apprafter.io"
MAX_BODY_BYTES = 3 << 20
MAX_PROBLEMS = 50
DEFAULT_OPERATOR_USER = "system:serviceaccount:apprafter-system:apprafter-operator"
INVALID, FORBIDDEN, BAD_REQUEST, TOO_LARGE, BUSY, INTERNAL = 422, 403, 400, 413, 429, 500
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
class Settings:
    """What the rules need from the command line: who the operator is, the platform (tier) for warnings, who
    provides claims."""

    operator_user: str = DEFAULT_OPERATOR_USER
    context: PlatformContext = dataclasses.field(default_factory=PlatformContext)
    claim_status_users: tuple[str, ...] = ()  # who provides claims (writes their status); none given: the operator
    provider_writers: tuple[str, ...] = ()  # who may write ServiceProviders (`group:NAME` a group); none: RBAC alone
    # The cluster's HostnamePolicies as the webhook last read them (admission.policies; replaced as they change).
    hostname_policies: tuple[hostname_policy.Policy, ...] = ()

    @property
    def claim_providers(self) -> tuple[str, ...]:
        return self.claim_status_users or (self.operator_user,)

    @property
    def operator_namespace(self) -> str | None:
        """The namespace of the operator's service account (system:serviceaccount:NS:NAME): where it keeps its
        records and reads SourceCredentials; None when the operator is not a service account."""
        parts = self.operator_user.split(":")
        return parts[2] if len(parts) == 4 and parts[:2] == ["system", "serviceaccount"] else None


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


@dataclasses.dataclass(frozen=True)
class _Request:
    """The parts of an AdmissionRequest the rules read (object/oldObject are {} when absent)."""

    uid: str
    kind: str
    subresource: str
    operation: str
    user: str
    namespace: str
    name: str
    obj: dict[str, Any]
    old: dict[str, Any]
    groups: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """Kind (with /subresource) for metrics and logs."""
        return f"{self.kind}/{self.subresource}" if self.subresource else self.kind

    @property
    def who(self) -> str:
        """How messages name the object: `Kind namespace/name`."""
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where or '(unnamed)'}"


@dataclasses.dataclass(frozen=True)
class _Verdict:
    """A rule's answer: (field, reason) problems (none = allowed), their status code, warnings, a JSON patch."""

    problems: tuple[tuple[str, str], ...] = ()
    code: int = INVALID
    warnings: tuple[str, ...] = ()
    patch: tuple[dict[str, Any], ...] = ()


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


def _parse(body: bytes) -> _Request:
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
    return _Request(req["uid"], kind if group == GROUP else f"{kind}.{group or 'core'}", req.get("subResource", ""),
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

def _application(req: _Request, settings: Settings) -> _Verdict:
    problems = [(p.field, p.message) for p in validate.check_update(req.old, req.obj)] if req.old else []
    if req.old and req.old.get("spec") == req.obj.get("spec"):
        # metadata-only update: an object admitted before stays writable, but gains no instruction to Argo CD
        problems += [(p.field, p.message) for p in validate.check_annotations_added(req.old, req.obj)]
        return _Verdict(tuple(problems))
    checked = check_application(req.obj, settings.context, req.who)
    problems += [(p.field, p.message) for p in checked.problems]
    if problems:
        return _Verdict(tuple(problems), INVALID, tuple(checked.warnings))
    return _Verdict(tuple(_hostname_problems(req, settings, checked.objects)), FORBIDDEN, tuple(checked.warnings))


def _hostname_problems(req: _Request, settings: Settings, objects: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """HostnameNotAllowed, as the operator says it (lifecycle.hostname_policy), for each public hostname the object's
    render routes; the field is where the hostname is written (the app's name, for its default one)."""
    spec = req.obj.get("spec") or {}
    environment, app = str(spec.get("environment")), str((req.obj.get("metadata") or {}).get("name"))
    field = "metadata.name"
    for where in (("environments", environment), ("base",)):
        node: Any = spec
        for key in where:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict) and (node.get("expose") or {}).get("hostname"):
            field = ".".join(("spec", *where, "expose", "hostname"))
            break
    problems = []
    for host in hostnames.hostnames(objects):
        why = hostname_policy.refusal(host, app, environment, req.namespace, settings.context,
                                      settings.hostname_policies)
        if why:
            problems.append((field, f"{hostname_policy.NOT_ALLOWED}: {why}"))
    return problems


def _operator_status(req: _Request, settings: Settings) -> _Verdict:
    reason = authority.status_writer(req.kind, req.user, settings.operator_user)
    return _Verdict((("status", reason),) if reason else (), FORBIDDEN)


def _operator_record(req: _Request, settings: Settings) -> _Verdict:
    reason = authority.record_writer(req.kind, req.user, settings.operator_user)
    return _Verdict((("metadata", reason),) if reason else (), FORBIDDEN)


def _migration_plan(req: _Request, settings: Settings) -> _Verdict:
    problems: list[tuple[str, str]] = []
    if req.operation == "CREATE":
        reason = authority.plan_create(req.user, settings.operator_user)
        problems += [("metadata", reason)] if reason else []
    else:
        reason = authority.plan_spec_change(req.old.get("spec"), req.obj.get("spec"))
        problems += [("spec", reason)] if reason else []
        if req.old.get("status") != req.obj.get("status"):
            problems.append(("status", "changes only through the status subresource"))
    return _Verdict(tuple(problems), FORBIDDEN)


def _scope(req: _Request) -> str | None:
    scope = (req.obj.get("spec") or {}).get("scope") or {}
    return scope.get("type") if isinstance(scope, dict) else None


def _migration_plan_status(req: _Request, settings: Settings) -> _Verdict:
    if req.old.get("spec") != req.obj.get("spec"):
        return _Verdict((("spec", "changes only through the main resource (and never: " +
                          authority.SPEC_IMMUTABLE + ")"),), FORBIDDEN)
    problems = authority.plan_phase_change(req.old.get("status"), req.obj.get("status"), _scope(req), req.user,
                                           settings.operator_user)
    return _Verdict(tuple(problems), FORBIDDEN)


def _drop_mark(obj: Mapping[str, Any]) -> str | None:
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(authority.DROP_ANNOTATION)
    return str(value) if value is not None else None


def _resource_claim(req: _Request, settings: Settings) -> _Verdict:
    selector = (req.obj.get("spec") or {}).get("selector") or {}
    problems = [(f"spec.selector.{key}", why) for key, why in selector_problems(selector)]
    reason = authority.drop_data_writer(_drop_mark(req.old), _drop_mark(req.obj), req.user, req.groups,
                                        settings.operator_user)
    if reason:
        problems.append((f"metadata.annotations.{authority.DROP_ANNOTATION}", reason))
    return _Verdict(tuple(problems), FORBIDDEN)


def _claim_status(req: _Request, settings: Settings) -> _Verdict:
    reason = authority.claim_status_writer(req.user, settings.claim_providers)
    return _Verdict((("status", reason),) if reason else (), FORBIDDEN)


def _hostname_policy(req: _Request, settings: Settings) -> _Verdict:
    return _Verdict(tuple(hostname_policy.check(req.obj)))


def _service_provider(req: _Request, settings: Settings) -> _Verdict:
    reason = authority.provider_writer(req.user, req.groups, settings.provider_writers)
    if reason:
        return _Verdict((("metadata", reason),), FORBIDDEN)
    return _Verdict(tuple(backend_registry.admit(req.old if req.operation == "UPDATE" else None, req.obj)))


def _platform_stack(req: _Request, settings: Settings) -> _Verdict:
    return _Verdict(tuple(platform_stack.check(req.obj)))


def _source_credential(req: _Request, settings: Settings) -> _Verdict:
    return _Verdict(tuple(credential_spec.check(req.obj, settings.operator_namespace)))


Handler = Callable[[_Request, Settings], _Verdict]
VALIDATING: dict[tuple[str, str], Handler] = {
    ("Application", ""): _application,
    ("Application", "status"): _operator_status,
    ("MigrationPlan", ""): _migration_plan,
    ("MigrationPlan", "status"): _migration_plan_status,
    ("PlatformStack", ""): _platform_stack,
    ("PlatformStack", "status"): _operator_status,
    ("ApplicationBaseline", ""): _operator_record,
    ("ApplicationBaseline", "status"): _operator_status,
    ("PublicHostname", ""): _operator_record,
    ("PublicHostname", "status"): _operator_status,
    ("SourceCredential", ""): _source_credential,
    ("SourceCredential", "status"): _operator_status,
    ("ResourceClaim", ""): _resource_claim,
    ("ResourceClaim", "status"): _claim_status,
    ("HostnamePolicy", ""): _hostname_policy,
    ("ServiceProvider", ""): _service_provider,
}
WRITES = frozenset({"CREATE", "UPDATE"})


def _approval_stamp(now: str) -> Handler:
    def stamp(req: _Request, settings: Settings) -> _Verdict:
        fields = authority.approval_stamp(req.old.get("status"), req.obj.get("status"), req.user, now)
        return _Verdict(patch=tuple({"op": "add", "path": f"/status/{k}", "value": v} for k, v in fields.items()))
    return stamp


def _mutating(now: str) -> dict[tuple[str, str], Handler]:
    return {("MigrationPlan", "status"): _approval_stamp(now)}


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
    return _review(body, settings, _mutating(now))
