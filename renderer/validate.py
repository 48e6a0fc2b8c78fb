"""Invariants beyond the schema (the webhook's rules), reported all at once with positions in the user's file.

Callable on any LoadedApp, whether cue evaluated it or not (a CR read as YAML/JSON, an AdmissionReview's
object): the name rules are the schema's own patterns (renderer/patterns.py), matched in full, and every
problem goes through the Redactor of the document's env literals.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterator, Mapping, Sequence

from renderer import argocd_annotations, imageref, patterns
from renderer import sealed as sealed_rules
from renderer.effective import effective_spec
from renderer.errors import Problem, field_path
from renderer.health import health_problems
from renderer.hostnames import hostname_problem
from renderer.names import ENVIRONMENT_IMMUTABLE
from renderer.redact import Redactor
from renderer.selectors import selector_problems
from renderer.source import LoadedApp
from toolchain.record import TYPE_CHECKING
from toolchain.regex import lazy

if TYPE_CHECKING:
    from typing import Any

    from renderer.fieldpos import Positions

__all__ = ["MAX_NAME", "check", "check_annotations_added", "check_deployment", "check_document", "check_environment",
           "check_update", "environments", "interpolation_warnings", "rewrite_prefixes", "unprintable", "written_at"]

MAX_NAME = 63  # a DNS label (an app, an environment, a namespace)
SECRET_KEY = lazy(r"[-._a-zA-Z0-9]+")
# The one rewrite Gateway API can express: a prefix capture replaced by another prefix (matched in full).
REWRITE_FROM = lazy(r"(?P<prefix>/[^()*+?\[\]{}|\\^$\n]*?)/?\(\.\*\)")
REWRITE_TO = lazy(r"(?P<prefix>/[^$()\n]*?)/?\$1")
# Gateway API's rule for an HTTPRoute PathPrefix value (its CRD's CEL validation).
GATEWAY_PATH = lazy(r"/(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|%[0-9a-fA-F]{2})*")
# Cilium's rules for toFQDNs matchName / matchPattern.
FQDN_NAME = lazy(r"(?:[-a-zA-Z0-9_]+\.?)+")
FQDN_PATTERN = lazy(r"(?:[-a-zA-Z0-9_*]+\.?)+")
NO_BLANKS = lazy(r"[^\s]+")
# What the API server cannot carry: it reads an applied object as YAML, whose reader refuses every character
# outside YAML's printable set (tab, LF, CR, U+0020-U+007E, U+0085, U+00A0-U+D7FF, U+E000-U+FFFD, U+10000 on),
# e.g. U+FFFE in an env literal ("control characters are not allowed"); JSON-escaped controls pass that reader
# but no container runtime takes a NUL. So every string of the document holds only YAML-printable characters.
# Written as the complement (what is NOT printable): the same set, and compiled in a twelfth of the time (a
# negated class over U+10000-U+10FFFF costs sre ≈ 15 ms of CPU at import, every render). Every character of it is
# one str.isprintable() refuses (Cc, Cs, Cn), so a printable string is not searched, and the pattern (still 1 ms
# to compile) is compiled only for a string with a newline, a tab or worse.
UNPRINTABLE = lazy("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff\ufffe\uffff]")
MAX_ANNOTATIONS = 256 * 1024  # the API server's bound on an object's annotation keys and values in all (256 KiB)
# Every object carries app.kubernetes.io/instance: <app>-<env>, a label value (at most 63 characters).
MAX_INSTANCE = 63
# An env literal written the way a template engine would interpolate a claim or secret (`${claim.pg.url}`,
# `{{ .secret.x }}`, `$(claim...)`): nothing substitutes it, the variable would hold those characters.
TEMPLATE = lazy(r"(?:\$\{|\$\(|\{\{)\s*\.?(?P<kind>claim|secret)\b")
# An env literal that reads exactly as a reference written in quotes: the variable would hold these characters.
QUOTED_CLAIM = lazy(r"claim\.(?P<need>[a-z][a-z0-9]*)\.(?P<field>[a-z]{1,16})")
QUOTED_SECRET = lazy(r'\{?\s*secret\s*:\s*"?(?P<ref>[a-z0-9][-a-z0-9.]*/[-._a-zA-Z0-9]+)"?\s*\}?')
WHOLE_CLAIM = lazy(r"\$\{\s*claim\.(?P<need>[a-z][a-z0-9]*)\.(?P<field>[a-z]{1,16})\s*\}")


def rewrite_prefixes(rewrite: dict[str, str]) -> tuple[str, str] | None:
    """(match prefix, replacement prefix) for a rewrite Gateway API can express, else None."""
    f, t = REWRITE_FROM.fullmatch(rewrite.get("from", "")), REWRITE_TO.fullmatch(rewrite.get("to", ""))
    if not f or not t:
        return None
    return (f["prefix"] or "/", t["prefix"] or "/")


def environments(app: LoadedApp) -> list[str]:
    return sorted(app.document.get("spec", {}).get("environments", {}))


class _Checker:
    def __init__(self, app: LoadedApp) -> None:
        self.app = app
        self.redactor = Redactor.for_document(app.document)
        self.problems: list[Problem] = []

    @functools.cached_property
    def index(self) -> Positions:
        """Built on the first problem: a valid app is never indexed."""
        return self.app.source.index

    def add(self, path: tuple[str | int, ...], message: str) -> None:
        line, col = self.index.find(path)
        field = field_path(path)
        self.problems.append(self.redactor.problem(Problem(self.app.source.display, line, col, field, message)))

    def where(self, env: str, *rel: str | int) -> tuple[str | int, ...]:
        return written_at(self.index, env, rel)


def written_at(index: Positions, env: str, rel: Sequence[str | int]) -> tuple[str | int, ...]:
    """The path an effective field of `env` is written at: in the override when it sets any part of the
    field, else in base (the one rule for pointing at an effective field)."""
    in_env = ("spec", "environments", env, *rel)
    for n in range(len(rel), 0, -1):
        if index.has(in_env[: 3 + n]):
            return in_env
    return ("spec", "base", *rel)


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else str(value)
    return repr(text) if len(text) <= 100 else repr(text[:100]) + "..."


def check_document(app: LoadedApp) -> list[Problem]:
    """Environment-independent rules: names, labels, at least one environment, env keys, secret refs."""
    c = _Checker(app)
    metadata = app.document.get("metadata", {})
    name = metadata.get("name", "")
    if not patterns.app_name(name):
        c.add(("metadata", "name"), f"{_shown(name)} is not {patterns.RULES['_appName']}")
    namespace = metadata.get("namespace")
    if namespace is not None and not patterns.dns_label(namespace):
        c.add(("metadata", "namespace"), f"{_shown(namespace)} is not {patterns.RULES['_dnsLabel']}")
    size = sum(len(str(k).encode()) + len(str(v).encode()) for k, v in metadata.get("annotations", {}).items())
    if size > MAX_ANNOTATIONS:
        c.add(("metadata", "annotations"), f"annotations hold {size} bytes in all: the API server takes at most "
              f"{MAX_ANNOTATIONS} (256 KiB) on one object")
    for kind in ("labels", "annotations"):
        for key, value in metadata.get(kind, {}).items():
            if not patterns.qualified_name(key):
                c.add(("metadata", kind, key), f"{kind[:-1]} key {_shown(key)} is not {patterns.RULES['_labelKey']}")
            elif kind == "labels" and not patterns.label_value(value):
                c.add(("metadata", kind, key), f"{_shown(value)} is not {patterns.RULES['_labelValue']}")
    for key, why in argocd_annotations.problems(metadata):
        c.add(("metadata", "annotations", key), why)
    spec = app.document.get("spec", {})
    envs = spec.get("environments", {})
    if not envs:
        c.add(("spec", "environments"), "declare at least one environment")
    for env in envs:
        if not patterns.dns_label(env):
            c.add(("spec", "environments", env), f"environment name {_shown(env)} is not "
                  f"{patterns.RULES['_dnsLabel']}")
        elif patterns.app_name(name) and len(name) + 1 + len(env) > MAX_INSTANCE:
            c.add(("spec", "environments", env), f"'{name}-{env}' (app and environment name) is longer than "
                  f"{MAX_INSTANCE} characters: it is the app.kubernetes.io/instance label of every object")
    for env in spec.get("budget", {}):
        if env not in envs:
            c.add(("spec", "budget", env), f"budget for undeclared environment {_shown(env)}")
    for path, at, char in unprintable(app.document):
        where = f"the key holds U+{ord(char):04X} (character {-at})" if at < 0 else \
            f"the value holds U+{ord(char):04X} (character {at + 1})"
        c.add(path, f"{where}, which the API server refuses (it reads objects as YAML: printable characters, tab "
              "and line breaks only)")
    _sealed_problems(c, spec.get("sealedSecrets"))
    for scope, workload in _workloads(spec):
        for key, value in workload.get("env", {}).items():
            if not patterns.env_key(key):
                c.add((*scope, "env", key), f"env key {_shown(key)} must match ^[A-Z_][A-Z0-9_]*$")
            if isinstance(value, dict) and "secret" in value:
                ref = value["secret"]
                secret, _, key_part = ref.partition("/")
                if not (patterns.dns_name(secret) and SECRET_KEY.fullmatch(key_part)):
                    c.add((*scope, "env", key, "secret"),
                          f'secret reference {_shown(ref)} must be "<secret-name>/<key>" (a DNS-1123 name and a key)')
    return c.problems


def _sealed_problems(c: _Checker, sealed: Any) -> None:
    """spec.sealedSecrets as the plugin stamps it, held to renderer.sealed's rules (an Application written by hand
    reaches the webhook and the operator without the repository's files)."""
    if not isinstance(sealed, Mapping):
        return  # absent; a wrong type is the schema's to say
    if len(sealed) > sealed_rules.MAX_FILES:
        c.add(("spec", "sealedSecrets"), f"{len(sealed)} sealed secrets; at most {sealed_rules.MAX_FILES} per "
              "environment")
    for name, data in sealed.items():
        if (wrong := sealed_rules.name_problem(str(name))) is not None:
            c.add(("spec", "sealedSecrets", name), wrong)
            continue
        for key, why in sealed_rules.data_problems(data):
            c.add(("spec", "sealedSecrets", name, *((key,) if key is not None else ())), why)


def unprintable(document: Mapping[str, Any]) -> Iterator[tuple[tuple[str | int, ...], int, str]]:
    """(path, index, character) of the first unprintable character of every key and string value in the
    document's metadata and spec (a key's index is negative: -1 for its first character); one pass, no recursion."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((k,), document[k]) for k in ("metadata", "spec")
                                                     if k in document]
    while stack:
        path, node = stack.pop()
        if isinstance(node, str):
            found = None if node.isprintable() else UNPRINTABLE.search(node)  # printable: not one of them
            if found:
                yield path, found.start(), found.group()
        elif isinstance(node, Mapping):
            for key, value in node.items():
                found = UNPRINTABLE.search(key) if isinstance(key, str) and not key.isprintable() else None
                if found:
                    yield (*path, key), -1 - found.start(), found.group()
                stack.append(((*path, key), value))
        elif isinstance(node, list):
            stack.extend(((*path, i), item) for i, item in enumerate(node))


def _workloads(spec: dict[str, Any]) -> Iterator[tuple[tuple[str, ...], dict[str, Any]]]:
    yield ("spec", "base"), spec.get("base", {})
    for env, override in spec.get("environments", {}).items():
        yield ("spec", "environments", env), override


def check_environment(app: LoadedApp, env: str) -> list[Problem]:
    """Rules on the effective spec of one environment."""
    c = _Checker(app)
    eff = effective_spec(app.document["spec"], env)
    if not eff.get("image"):
        c.add(c.where(env, "image"), f"image is empty in environment {env!r}: set base.image or "
              f"environments.{env}.image")
    elif (refused := imageref.refusal(eff["image"])) is not None:  # the kubelet would leave it in InvalidImageName
        c.add(c.where(env, "image"), f"image {_shown(eff['image'])} is not a valid image reference: {refused}")
    needs = eff.get("needs", {})
    for need, fields in needs.items():
        for key, why in selector_problems((fields or {}).get("selector") or {}):
            c.add(c.where(env, "needs", need, "selector", key), why)
    for key, value in eff.get("env", {}).items():
        if isinstance(value, dict) and "claim" in value:
            need = value["claim"].split("/", 1)[0]
            if need not in needs:
                c.add(c.where(env, "env", key), f"claim.{value['claim'].replace('/', '.')} refers to need "
                      f"{need!r}, which environment {env!r} does not declare")
    expose = eff.get("expose")
    if expose is not None:
        if "port" not in expose:
            c.add(c.where(env, "expose"), f"expose.port is required (environment {env!r})")
        for i, path in enumerate(expose.get("paths", [])):
            if not GATEWAY_PATH.fullmatch(path):
                c.add((*c.where(env, "expose", "paths"), i), f"path {_shown(path)} must start with '/' and use only "
                      "URL path characters (Gateway API's rule)")
        hostname = expose.get("hostname")
        # a single label is refused too: a Gateway's listeners are named by hostname, and its own are one-label
        # names (http, https): one could take a listener's name and break the update for every app (issue 41)
        refused = hostname_problem(hostname) if isinstance(hostname, str) else None
        if refused is not None or (hostname is not None and not isinstance(hostname, str)):
            c.add(c.where(env, "expose", "hostname"), refused or f"hostname {_shown(hostname)} is not a DNS name")
        for i, rewrite in enumerate(expose.get("rewrites", [])):
            prefixes = rewrite_prefixes(rewrite)
            if prefixes is None or not all(GATEWAY_PATH.fullmatch(p) for p in prefixes):
                c.add((*c.where(env, "expose", "rewrites"), i),
                      f"rewrite {_shown(rewrite.get('from'))} -> {_shown(rewrite.get('to'))} cannot be expressed in "
                      "Gateway API: use a prefix capture, from: \"/old/(.*)\" to: \"/new/$1\"")
        protocols = expose.get("protocols")
        if protocols is not None and (not protocols or len(set(protocols)) != len(protocols)):
            c.add(c.where(env, "expose", "protocols"), "protocols must list ipv6 and/or ipv4, each once")
    autoscale = eff.get("autoscale")
    if autoscale and autoscale.get("min", 0) > autoscale.get("max", 0):
        c.add(c.where(env, "autoscale"), f"autoscale.min ({autoscale['min']}) exceeds autoscale.max "
              f"({autoscale['max']})")
    if autoscale and autoscale.get("on") == "jetstream_lag" and not needs.get("jetstream", {}).get("streams"):
        c.add(c.where(env, "autoscale", "on"), "autoscale on jetstream_lag needs needs.jetstream with at "
              "least one stream")
    if autoscale and autoscale.get("on") in ("cpu", "memory") and autoscale.get("min", 0) < 1:
        c.add(c.where(env, "autoscale", "min"), f"autoscale on {autoscale['on']} needs min >= 1 "
              "(scaling to zero needs an event source such as jetstream_lag)")
    for rel, message in health_problems(eff):
        c.add(c.where(env, *rel), message)
    external = eff.get("connects", {}).get("egress", {}).get("external", [])
    for i, rule in enumerate(external):
        problem = _egress_problem(rule)
        if problem:  # where it is written is looked up only now: finding positions costs milliseconds
            c.add((*c.where(env, "connects", "egress", "external"), i, *problem[0]), problem[1])
    return c.problems


def _egress_problem(rule: dict[str, Any]) -> tuple[tuple[str, ...], str] | None:
    """(field below the rule, message) for an external egress rule that cannot be rendered, else None."""
    if ("host" in rule) == ("cidr" in rule):
        return (), "each external egress rule needs exactly one of host or cidr"
    if "host" in rule and not (FQDN_PATTERN if "*" in rule["host"] else FQDN_NAME).fullmatch(rule["host"]):
        return ("host",), f"host {_shown(rule['host'])} is not a DNS name (or a pattern with '*')"
    if "cidr" in rule and not _cidr(rule["cidr"]):
        return ("cidr",), f"cidr {_shown(rule['cidr'])} is not an IPv4 or IPv6 network (a.b.c.d/n)"
    return None


def _cidr(value: str) -> bool:
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        return False
    return NO_BLANKS.fullmatch(value) is not None


def _quoted_reference(key: str, value: str) -> str | None:
    """The warning for an env literal that is exactly a reference in quotes (`"claim.pg.url"`), with the unquoted
    form; None for any other literal. The literal is shown: it is a reference's spelling, no secret."""
    claim = QUOTED_CLAIM.fullmatch(value) if value.startswith("claim.") else None  # the pattern's own prefix
    if claim:
        from renderer.schema_hints import need_fields

        fields = need_fields().get(claim["need"])
        if fields is None or claim["field"] not in [*fields, *(["pass"] if "password" in fields else [])]:
            return None
        return (f"{value!r} is a quoted string, so the variable holds those characters, not the claim's "
                f"{claim['field']}: write the reference unquoted, {key}: {value}")
    secret = QUOTED_SECRET.fullmatch(value) if "secret" in value else None  # a word the pattern holds
    if secret:
        return (f"{value!r} is a quoted string, so the variable holds those characters, not the secret's value: "
                f'write the reference as a struct, {key}: secret: "{secret["ref"]}"')
    return None


def interpolation_warnings(app: LoadedApp) -> list[Problem]:
    """Env literals that look like an interpolation of a claim or secret, or that are a reference in quotes, each
    naming the form to use instead.

    A warning, not an error (the literal may be meant). The value is never shown, except a literal that is exactly a
    reference (`"claim.pg.url"`), whose fix is that reference unquoted; the reference an interpolation suggests is
    spelled out only for a literal that is exactly `${claim.<need>.<field>}` of a need the app declares."""
    c = _Checker(app)
    spec = app.document.get("spec", {})
    declared = {need for _, workload in _workloads(spec) for need in workload.get("needs", {})}
    _sealed_problems(c, spec.get("sealedSecrets"))
    for scope, workload in _workloads(spec):
        for key, value in workload.get("env", {}).items():
            quoted = _quoted_reference(key, value) if isinstance(value, str) else None
            if quoted is not None:
                # shown as written: the Redactor of every other literal, never of this reference's own spelling
                line, col = c.index.find((*scope, "env", key))
                others = Redactor.of(c.redactor.values - {value})
                c.problems.append(others.problem(Problem(app.source.display, line, col,
                                                         field_path((*scope, "env", key)), quoted)))
                continue
            found = TEMPLATE.search(value) if isinstance(value, str) and ("claim" in value or "secret" in value) \
                else None  # one of the two words the pattern ends with
            if found is None:
                continue
            if found["kind"] == "secret":
                c.add((*scope, "env", key), "this literal looks like an interpolation of a secret, but nothing "
                      f'substitutes it: reference the secret instead, {key}: secret: "<secret-name>/<key>"')
                continue
            whole = WHOLE_CLAIM.fullmatch(value)
            form = (f"claim.{whole['need']}.{whole['field']}" if whole and whole["need"] in declared
                    else "claim.<need>.<field>")
            c.add((*scope, "env", key), "this literal looks like an interpolation of a claim, but nothing "
                  f"substitutes it: reference the claim instead, {key}: {form}")
    return c.problems


def check(app: LoadedApp, envs: list[str] | None = None) -> list[Problem]:
    """Every problem for the given environments (all when None), document-level ones first."""
    problems = check_document(app)
    declared = environments(app)
    for env in declared if envs is None else envs:
        if env in declared:
            problems.extend(check_environment(app, env))
    return problems


def check_deployment(app: LoadedApp, environment: str | None, chosen_by: str = "") -> list[Problem]:
    """Whether `app` may deploy `environment`: the one answer every edge gives (`render`, the plugin, `plan`, the
    admission webhook, the operator), so the cluster refuses exactly what the CLI refuses, in the same words.

    The document's rules, the environment declared, an object stamped for another environment refused, then the
    rules of that environment's effective spec (other environments' are `apprafter validate`'s question: an object
    deploys one). `environment` None means the one the object itself is stamped for (spec.environment), which a
    cluster object must carry. `chosen_by` says where the environment came from (the plugin's parameter, the
    app name), for the message when it is not declared.
    """
    display = app.source.display
    stamped = app.document.get("spec", {}).get("environment")
    if environment is None and stamped is None:
        line, col = app.source.index.find(("spec",))
        return [*check_document(app), Problem(display, line, col, "spec.environment", "is required: the object "
                                              "deploys one environment (the plugin stamps it)")]
    if environment is not None and stamped is not None and stamped != environment:
        line, col = app.source.index.find(("spec", "environment"))
        return [Problem(display, line, col, "spec.environment", f"this object is stamped for environment "
                        f"{stamped!r}, not {environment!r} (a different environment is a different deployment)")]
    wanted = environment if environment is not None else stamped
    declared = environments(app)
    if wanted not in declared:
        # an object stamped for it is wrong in its stamp; asked for it (--env, the plugin), it lacks the declaration
        field = ("spec", "environment") if stamped == wanted else ("spec", "environments")
        line, col = app.source.index.find(field)
        # the name is shown only when it could be one: it may come from an environment variable
        shown = _shown(wanted) if isinstance(wanted, str) and patterns.dns_label(wanted) else "(not a DNS-1123 label)"
        source = f" (from {chosen_by})" if chosen_by else ""
        return [*check_document(app), Problem(display, line, col, field_path(field), f"environment {shown}{source} "
                                              f"is not declared; declared: {', '.join(declared) or 'none'}")]
    return check(app, [str(wanted)])


def check_annotations_added(old: Mapping[str, Any], new: Mapping[str, Any], display: str = "") -> list[Problem]:
    """The Argo CD annotations a metadata-only write adds or changes that an Application may not carry (the rule of
    check_document, held only to what the write brings: an object admitted before stays writable)."""
    return [Problem(display, 0, 0, field_path(("metadata", "annotations", key)), why)
            for key, why in argocd_annotations.introduced(old.get("metadata") or {}, new.get("metadata") or {})]


def check_update(old: Mapping[str, Any], new: Mapping[str, Any], display: str = "") -> list[Problem]:
    """Rules on changing an Application object in the cluster: spec.environment stays what it was."""
    before, after = (d.get("spec", {}).get("environment") for d in (old, new))
    if before == after:
        return []
    return [Problem(display, 0, 0, "spec.environment", f"{ENVIRONMENT_IMMUTABLE} (was {before!r}, now {after!r})")]
