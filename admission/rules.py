"""The webhook's rules, one per kind and subresource: what a write of it may be, as the core says (pure).

admission.review parses an AdmissionReview and dispatches it here on kind and subresource (VALIDATING, `mutating`);
each rule reads the request (`Request`) and the webhook's settings and answers a `Verdict`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from compatibility import authority
from compatibility.objects import check_application
from lifecycle import generation_drop, hostname_policy, hostnames
from lifecycle.backends import registry as backend_registry
from lifecycle.backends.contract import Site
from lifecycle.binding import bind
from lifecycle.credentials import spec as credential_spec
from platform_stack import resource as platform_stack
from renderer import validate
from renderer.context import PlatformContext
from renderer.selectors import selector_problems

__all__ = ["DEFAULT_OPERATOR_USER", "FORBIDDEN", "INVALID", "VALIDATING", "WRITES", "Handler", "Request", "Settings",
           "Verdict", "mutating_rules"]

DEFAULT_OPERATOR_USER = "system:serviceaccount:apprafter-system:apprafter-operator"
INVALID, FORBIDDEN = 422, 403


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
    # The cluster's ServiceProviders as the webhook last read them (name, labels, spec): a need's ceilings.
    service_providers: tuple[Mapping[str, Any], ...] = ()

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
class Request:
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
class Verdict:
    """A rule's answer: (field, reason) problems (none = allowed), their status code, warnings, a JSON patch."""

    problems: tuple[tuple[str, str], ...] = ()
    code: int = INVALID
    warnings: tuple[str, ...] = ()
    patch: tuple[dict[str, Any], ...] = ()


def _application(req: Request, settings: Settings) -> Verdict:
    problems = [(p.field, p.message) for p in validate.check_update(req.old, req.obj)] if req.old else []
    if req.old and req.old.get("spec") == req.obj.get("spec"):
        # metadata-only update: an object admitted before stays writable, but gains no instruction to Argo CD
        problems += [(p.field, p.message) for p in validate.check_annotations_added(req.old, req.obj)]
        return Verdict(tuple(problems))
    checked = check_application(req.obj, settings.context, req.who)
    problems += [(p.field, p.message) for p in checked.problems]
    if problems:
        return Verdict(tuple(problems), INVALID, tuple(checked.warnings))
    beyond, said = _beyond_providers(req, settings, checked.objects)
    warnings = (*checked.warnings, *said)
    if beyond:
        return Verdict(tuple(beyond), INVALID, warnings)
    return Verdict(tuple(_hostname_problems(req, settings, checked.objects)), FORBIDDEN, warnings)


# The webhook runs no backend's server: the cores refuse a site without an image (the operator could not run one
# there), and what the door asks of them (`beyond`, `unsized`) reads the provider's config alone.
_DOOR = Site("", "none: the webhook runs no server")


def _beyond_providers(req: Request, settings: Settings,
                      objects: list[dict[str, Any]]) -> tuple[list[tuple[str, str]], list[str]]:
    """(problems, warnings) of the needs at their provider, as the providers were last read. A problem: a need that
    its provider can never provision as asked (a size past its ceiling, a field it does not serve: the backend's own
    `beyond`), refused now rather than a claim that waits forever (issue 41). A warning: a need that binds to no
    provider (in the claim's own words: it may be made before its provider), or whose size its provider does not
    apply (issue 42)."""
    spec = req.obj.get("spec") or {}
    problems, warnings = [], []
    for obj in objects:
        if obj.get("kind") != "ResourceClaim":
            continue
        claim = {**obj, "metadata": {**(obj.get("metadata") or {}), "namespace": req.namespace}}
        binding = bind(claim, settings.service_providers)
        provider = next((p for p in settings.service_providers if p["metadata"]["name"] == binding.provider), None)
        kind = str((claim.get("spec") or {}).get("type") or "")
        if binding.condition.status != "True":
            warnings.append(f"{_need_field(spec, str(spec.get('environment')), kind, 'selector')}: "
                            f"{binding.condition.reason}: {binding.condition.message}")
        core = backend_registry.core_for(kind, str(((provider or {}).get("spec") or {}).get("backend") or ""))
        if provider is None or core is None:
            continue
        config = core.configure(provider, _DOOR)
        if isinstance(config, list):
            continue
        why = core.beyond(claim, config)
        if why:
            problems.append((_need_field(spec, str(spec.get("environment")), kind, why),
                             f"{why} (ServiceProvider {binding.provider})"))
        unsized = core.unsized(claim, config)
        if unsized:
            warnings.append(f"{_need_field(spec, str(spec.get('environment')), kind, 'size')}: {unsized} "
                            f"(ServiceProvider {binding.provider})")
    return problems, warnings


def _need_field(spec: Mapping[str, Any], environment: str, kind: str, why: str) -> str:
    """Where the need's field a refusal is about is written (the one `why` names: `needs.<type>.<field>`, else
    its size): the environment's override, else the base."""
    field = next((f for f in ("buckets", "version", "streams", "mountPath") if f"needs.{kind}.{f}" in why), "size")
    for where in (("environments", environment), ("base",)):
        node: Any = spec
        for key in (*where, "needs", kind):
            node = node.get(key) if isinstance(node, Mapping) else None
        if isinstance(node, Mapping) and field in node:
            return ".".join(("spec", *where, "needs", kind, field))
    return f"spec.base.needs.{kind}"


def _hostname_problems(req: Request, settings: Settings, objects: list[dict[str, Any]]) -> list[tuple[str, str]]:
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


def _operator_status(req: Request, settings: Settings) -> Verdict:
    reason = authority.status_writer(req.kind, req.user, settings.operator_user)
    return Verdict((("status", reason),) if reason else (), FORBIDDEN)


def _operator_record(req: Request, settings: Settings) -> Verdict:
    reason = authority.record_writer(req.kind, req.user, settings.operator_user)
    return Verdict((("metadata", reason),) if reason else (), FORBIDDEN)


def _migration_plan(req: Request, settings: Settings) -> Verdict:
    problems: list[tuple[str, str]] = []
    if req.operation == "CREATE":
        reason = authority.plan_create(req.user, settings.operator_user)
        problems += [("metadata", reason)] if reason else []
    else:
        reason = authority.plan_spec_change(req.old.get("spec"), req.obj.get("spec"))
        problems += [("spec", reason)] if reason else []
        if req.old.get("status") != req.obj.get("status"):
            problems.append(("status", "changes only through the status subresource"))
    return Verdict(tuple(problems), FORBIDDEN)


def _scope(req: Request) -> str | None:
    scope = (req.obj.get("spec") or {}).get("scope") or {}
    return scope.get("type") if isinstance(scope, dict) else None


def _migration_plan_status(req: Request, settings: Settings) -> Verdict:
    if req.old.get("spec") != req.obj.get("spec"):
        return Verdict((("spec", "changes only through the main resource (and never: " +
                          authority.SPEC_IMMUTABLE + ")"),), FORBIDDEN)
    problems = authority.plan_phase_change(req.old.get("status"), req.obj.get("status"), _scope(req), req.user,
                                           settings.operator_user)
    return Verdict(tuple(problems), FORBIDDEN)


def _annotation(obj: Mapping[str, Any], key: str) -> str | None:
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(key)
    return str(value) if value is not None else None


def _resource_claim(req: Request, settings: Settings) -> Verdict:
    selector = (req.obj.get("spec") or {}).get("selector") or {}
    problems = [(f"spec.selector.{key}", why) for key, why in selector_problems(selector)]
    drop = authority.DROP_ANNOTATION
    reason = authority.drop_data_writer(_annotation(req.old, drop), _annotation(req.obj, drop), req.user, req.groups,
                                        settings.operator_user)
    if reason:
        problems.append((f"metadata.annotations.{drop}", reason))
    need = str((req.obj.get("spec") or {}).get("type") or "")
    # the requests a team writes on its claim (a rotation, a restore, a kept generation's drop): asked by people,
    # never by the operator
    for key, writer in ((authority.ROTATE_ANNOTATION, authority.rotate_writer),
                        (authority.RESTORE_ANNOTATION, authority.restore_writer),
                        (authority.DROP_GENERATION_ANNOTATION, authority.drop_generation_writer)):
        reason = writer(_annotation(req.old, key), _annotation(req.obj, key), need, req.user, settings.operator_user)
        if reason:
            problems.append((f"metadata.annotations.{key}", reason))
    key = authority.DROP_GENERATION_ANNOTATION
    asked = generation_drop.requested(req.obj) if _annotation(req.old, key) != _annotation(req.obj, key) else None
    reason = generation_drop.refusal(req.old or req.obj, asked.generation) if asked is not None else None
    if reason:  # which generation may go, as the claim stands (its status: which are kept, which is live)
        problems.append((f"metadata.annotations.{key}", reason))
    return Verdict(tuple(problems), FORBIDDEN)


def _claim_status(req: Request, settings: Settings) -> Verdict:
    reason = authority.claim_status_writer(req.user, settings.claim_providers)
    return Verdict((("status", reason),) if reason else (), FORBIDDEN)


def _hostname_policy(req: Request, settings: Settings) -> Verdict:
    return Verdict(tuple(hostname_policy.check(req.obj)))


def _service_provider(req: Request, settings: Settings) -> Verdict:
    reason = authority.provider_writer(req.user, req.groups, settings.provider_writers)
    if reason:
        return Verdict((("metadata", reason),), FORBIDDEN)
    return Verdict(tuple(backend_registry.admit(req.old if req.operation == "UPDATE" else None, req.obj)))


def _platform_stack(req: Request, settings: Settings) -> Verdict:
    return Verdict(tuple(platform_stack.check(req.obj)))


def _source_credential(req: Request, settings: Settings) -> Verdict:
    return Verdict(tuple(credential_spec.check(req.obj, settings.operator_namespace)))


Handler = Callable[[Request, Settings], Verdict]
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
    def stamp(req: Request, settings: Settings) -> Verdict:
        fields = authority.approval_stamp(req.old.get("status"), req.obj.get("status"), req.user, now)
        return Verdict(patch=tuple({"op": "add", "path": f"/status/{k}", "value": v} for k, v in fields.items()))
    return stamp


def mutating_rules(now: str) -> dict[tuple[str, str], Handler]:
    return {("MigrationPlan", "status"): _approval_stamp(now)}
