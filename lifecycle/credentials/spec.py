"""The SourceCredential kind (spec §3.12): its CRD source, the rules that keep material and nonsense out of its spec
(one regex each, used by the CRD's CEL and by the webhook's twin), and the spec read into what it covers."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from renderer.crds import AGE, STATUS_FILE, Column, CrdSource, SchemaPatch, cel

__all__ = ["HALVES", "SOURCE_CREDENTIAL", "Backend", "Credential", "Half", "argocd_project", "argocd_url", "check",
           "in_scope",
           "pull_key", "read"]

HALVES = ("git", "registry")
LISTS = {"git": "repoPrefixes", "registry": "hosts"}
MAX_ENTRIES = 64
# A repository prefix as Argo CD matches it: http(s) or no scheme (https), a host, an optional port and path.
# No userinfo (`user:token@`), query or fragment: the only place a URL could carry material.
PREFIX = r"^(https?://)?[a-z0-9]([-a-z0-9.]*[a-z0-9])?(:[0-9]{1,5})?(/[-A-Za-z0-9._~/]*)?$"
PREFIX_MESSAGE = ("a repository prefix is [http(s)://]host[:port][/path/] (lowercase host; no user:token@, query or "
                  "fragment: material never goes in the spec)")
# A registry host and an optional path prefix, as the image reference spells it: no scheme, no userinfo.
HOST = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?(:[0-9]{1,5})?(/[a-z0-9._/-]*)?$"
SCHEME = "://"
SCHEME_MESSAGE = "a registry host has no scheme: write ghcr.io/myorg/, not https://ghcr.io/myorg/"
HOST_MESSAGE = "a registry host is host[:port][/path/] as an image reference spells it (lowercase, no user@)"
# An OpenBao KV v2 secret as `bao kv get` names it: <mount>/<path>, two segments or more, each of letters, digits and
# -_. not starting with '.' (so no '.', '..' or empty segment, no leading '/'); never a URL or a value.
BAO_PATH = r"^[A-Za-z0-9_-][A-Za-z0-9_.-]*(/[A-Za-z0-9_-][A-Za-z0-9_.-]*)+$"
BAO_MESSAGE = ("openBaoPath is <mount>/<path> of a KV v2 secret, as `bao kv get` takes it (secret/myorg/github: "
               "GET /v1/secret/data/myorg/github): segments of letters, digits, '-', '_', '.', none empty or starting "
               "with '.'")
HALVES_MESSAGE = "a SourceCredential covers git, registry or both: spec.git or spec.registry is required"
# The registry half's scope: namespace names as Kubernetes spells them (RFC 1123 labels); an empty list would mean
# "nowhere", which is the half removed, so it is refused rather than read either way.
NAMESPACE = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
NAMESPACE_MESSAGE = ("a namespace is a Kubernetes namespace name: lowercase letters, digits and '-', at most 63, "
                     "starting and ending with a letter or digit")
SCOPE_MESSAGE = (f"1 to {MAX_ENTRIES} namespaces; leave spec.registry.namespaces out for every namespace, or remove "
                 "the registry half for none")
# The git half's scope: Argo CD AppProject names (Kubernetes object names); an empty list is refused as above.
PROJECT = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
PROJECT_MESSAGE = ("a project is an Argo CD AppProject's name: lowercase letters, digits, '-' and '.', at most 253, "
                   "starting and ending with a letter or digit")
PROJECTS_MESSAGE = (f"1 to {MAX_ENTRIES} Argo CD projects; leave spec.git.projects out for every project, or remove "
                    "the git half for none")
# Each half's scope: its field, the longest name, the name's rule and the messages (the CRD's CEL and the twin's).
SCOPES = {"git": ("projects", 253, PROJECT, PROJECT_MESSAGE, PROJECTS_MESSAGE, "project"),
          "registry": ("namespaces", 63, NAMESPACE, NAMESPACE_MESSAGE, SCOPE_MESSAGE, "namespace")}


def _half_patches(half: str) -> tuple[SchemaPatch, ...]:
    entries = LISTS[half]
    listed = SchemaPatch(("spec", half, entries), {"minItems": 1, "maxItems": MAX_ENTRIES,
                                                     "x-kubernetes-list-type": "set"})
    backend = cel(("spec", half, "backend", "openBaoPath"), f"self.matches('{BAO_PATH}')", BAO_MESSAGE)
    field, _, rule, message, size_message, _ = SCOPES[half]
    scope = ("spec", half, field)
    scoped = (SchemaPatch(scope, {"maxItems": MAX_ENTRIES, "x-kubernetes-list-type": "set"}),
              cel(scope, "size(self) > 0", size_message), cel((*scope, "[]"), f"self.matches('{rule}')", message))
    if half == "git":
        return (listed, backend, cel(("spec", half, entries, "[]"), f"self.matches('{PREFIX}')", PREFIX_MESSAGE),
                *scoped)
    return (listed, backend, cel(("spec", half, entries, "[]"), f"!self.contains('{SCHEME}')", SCHEME_MESSAGE),
            cel(("spec", half, entries, "[]"), f"self.contains('{SCHEME}') || self.matches('{HOST}')", HOST_MESSAGE),
            *scoped)


_STATUS_LISTS = tuple(SchemaPatch(("status", half, "conditions"), {"x-kubernetes-list-type": "map",
                                                                   "x-kubernetes-list-map-keys": ["type"]})
                      for half in HALVES)


def _valid(half: str) -> str:
    return f'.status.{half}.conditions[?(@.type=="Valid")].status'


SOURCE_CREDENTIAL = CrdSource(
    "SourceCredential", "lifecycle", "sourcecredential.cue", "SourceCredentialSpec", "sourcecredentials",
    ("srccred",), status_definition="SourceCredentialStatus", extra_files=(STATUS_FILE,),
    patches=(cel(("spec",), "has(self.git) || has(self.registry)", HALVES_MESSAGE),
             *_half_patches("git"), *_half_patches("registry"), *_STATUS_LISTS),
    columns=(Column("Git", ".spec.git.repoPrefixes"), Column("Registry", ".spec.registry.hosts"),
             Column("Git-Valid", _valid("git")), Column("Registry-Valid", _valid("registry")), AGE),
)


class Backend(NamedTuple):
    """Where a half's material is: a SealedSecret's name (its Secret has the same name) or an OpenBao path."""

    sealed_secret: str | None
    openbao_path: str | None


class Half(NamedTuple):
    """One half of a credential: its backend and what it covers, as written; a registry half's `namespaces` are
    where its pull secret may go, a git half's `projects` the Argo CD projects its login serves (None: every one)."""

    backend: Backend
    covers: tuple[str, ...]
    namespaces: tuple[str, ...] | None = None
    projects: tuple[str, ...] | None = None


class Credential(NamedTuple):
    """A SourceCredential's spec read: its name, halves (None when absent) and namespace (the operator's)."""

    name: str
    git: Half | None
    registry: Half | None
    namespace: str = ""


def _entries(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def check(document: Mapping[str, Any], namespace: str | None = None) -> list[tuple[str, str]]:
    """Every (field, reason) that makes a SourceCredential unacceptable: the CRD's CEL rules again (for the webhook,
    in the same words), the backend that is not exactly one of the two, and a namespace other than the operator's."""
    problems: list[tuple[str, str]] = []
    meta = document.get("metadata") or {}
    if namespace is not None and meta.get("namespace") != namespace:
        problems.append(("metadata.namespace", f"{meta.get('namespace')!r}: a SourceCredential lives in the "
                         f"operator's namespace, {namespace!r} (it covers every namespace's Applications)"))
    spec = document.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    if not any(isinstance(spec.get(h), Mapping) for h in HALVES):
        problems.append(("spec", HALVES_MESSAGE))
    for half in HALVES:
        body = spec.get(half)
        if not isinstance(body, Mapping):
            continue
        entries = _entries(body.get(LISTS[half]))
        where = f"spec.{half}.{LISTS[half]}"
        if not 1 <= len(entries) <= MAX_ENTRIES:
            problems.append((where, f"{len(entries)} entries: 1 to {MAX_ENTRIES}"))
        if len(set(map(str, entries))) != len(entries):
            problems.append((where, "an entry is listed twice"))
        for index, entry in enumerate(entries):
            problems += [(f"{where}[{index}]", reason) for reason in _entry_problems(half, str(entry))]
        backend = body.get("backend")
        backend = backend if isinstance(backend, Mapping) else {}
        given = [k for k in ("sealedSecretRef", "openBaoPath") if k in backend]
        if len(given) != 1:
            problems.append((f"spec.{half}.backend", "exactly one of sealedSecretRef and openBaoPath"))
        path = backend.get("openBaoPath")
        if isinstance(path, str) and not re.fullmatch(BAO_PATH, path):
            problems.append((f"spec.{half}.backend.openBaoPath", BAO_MESSAGE))
        if body.get(SCOPES[half][0]) is not None:  # null: absent, as read() takes it
            problems += _scope_problems(half, body.get(SCOPES[half][0]))
    return problems


def _scope_problems(half: str, scope: Any) -> list[tuple[str, str]]:
    """What is wrong with a half's scope, the registry's namespaces or git's projects (the CRD's maxItems, set and
    CEL rules again)."""
    field, longest, rule, message, size_message, noun = SCOPES[half]
    where = f"spec.{half}.{field}"
    if not isinstance(scope, list) or not 1 <= len(scope) <= MAX_ENTRIES:
        return [(where, size_message)]
    problems = [(where, f"a {noun} is listed twice")] if len(set(map(str, scope))) != len(scope) else []
    return problems + [(f"{where}[{index}]", message) for index, name in enumerate(scope)
                       if not isinstance(name, str) or len(name) > longest or not re.fullmatch(rule, name)]


def _entry_problems(half: str, entry: str) -> list[str]:
    if half == "git":
        return [] if re.fullmatch(PREFIX, entry) else [PREFIX_MESSAGE]
    if SCHEME in entry:
        return [SCHEME_MESSAGE]
    return [] if re.fullmatch(HOST, entry) else [HOST_MESSAGE]


def _half(body: Any, entries: str) -> Half | None:
    if not isinstance(body, Mapping):
        return None
    given = body.get("backend")
    backend: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    ref = backend.get("sealedSecretRef")
    sealed = str(ref["name"]) if isinstance(ref, Mapping) and ref.get("name") else None
    path = backend.get("openBaoPath")
    scope = body.get("namespaces" if entries == "hosts" else "projects")
    names = tuple(sorted({str(n) for n in scope})) if isinstance(scope, list) else None
    return Half(Backend(sealed, str(path) if isinstance(path, str) else None),
                tuple(str(e) for e in _entries(body.get(entries))),
                names if entries == "hosts" else None, names if entries == "repoPrefixes" else None)


def read(document: Mapping[str, Any]) -> Credential:
    """The credential a (schema-checked) SourceCredential object declares."""
    given = document.get("spec")
    spec: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    return Credential(str(document["metadata"]["name"]), _half(spec.get("git"), "repoPrefixes"),
                      _half(spec.get("registry"), "hosts"), str(document["metadata"].get("namespace") or ""))


def argocd_url(prefix: str) -> str:
    """The `url` of the repo-creds Secret for a prefix: https:// when none is written (Argo CD compares whole URLs,
    scheme included, by prefix after normalising them: lifecycle.credentials.git_urls)."""
    return prefix if "://" in prefix else f"https://{prefix}"


def pull_key(host: str) -> str:
    """The dockerconfigjson `auths` key for a covered host: host[:port][/path], without a trailing slash (the
    kubelet matches keys by host and then path prefix)."""
    return host.rstrip("/")


def in_scope(scope: Sequence[str] | None, name: str) -> bool:
    """Whether a half's scope, the registry's namespaces or git's Argo CD projects (None: every one), includes a
    name."""
    return scope is None or name in scope


def argocd_project(app: Mapping[str, Any]) -> str:
    """The AppProject an Argo CD Application belongs to (Argo CD reads an empty spec.project as `default`)."""
    return str((app.get("spec") or {}).get("project") or "default")
