"""Which annotations Argo CD acts on an Application may carry: a sync wave, the options that keep it, Argo CD's own
stamps; nothing else (docs/argocd.md "Argo CD annotations").

Read in Argo CD v3.1.16 and v3.6.1 (and gitops-engine): every `argocd.argoproj.io/*` annotation of a synced object
is an instruction to Argo CD (hooks and their deletion, sync options such as Replace=true or ServerSideApply=true,
compare options, ignored differences, an ignored health check, UI links under `link.argocd.argoproj.io/*`), and
`helm.sh/hook*` make any object a hook. An Application needs none of them: it is one object, Argo CD's health of the
app is its health, and the operator keeps its children. Allowed: `argocd.argoproj.io/sync-wave` (a whole number;
harmless, one object), `argocd.argoproj.io/sync-options` with only Prune=false|confirm and Delete=false|confirm (they
keep the Application, and what it runs, from being removed: the tenant's own safety), and the two stamps Argo CD's
repo-server writes on every object it renders (`tracking-id`, which it overwrites over any value a repository
wrote, and `installation-id`); a tracking id must name this very object, so a write by hand cannot attach it to
another Argo CD application. One rule for the renderer, `plan`, the webhook and the operator.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from toolchain.record import TYPE_CHECKING
from toolchain.regex import lazy

if TYPE_CHECKING:
    from typing import Any

__all__ = ["ALLOWED_SYNC_OPTIONS", "SYNC_OPTIONS", "SYNC_WAVE", "TRACKING_ID", "introduced", "problems"]

ARGOCD_DOMAIN = "argocd.argoproj.io"
SYNC_WAVE = f"{ARGOCD_DOMAIN}/sync-wave"
SYNC_OPTIONS = f"{ARGOCD_DOMAIN}/sync-options"
TRACKING_ID = f"{ARGOCD_DOMAIN}/tracking-id"
INSTALLATION_ID = f"{ARGOCD_DOMAIN}/installation-id"
ALLOWED_SYNC_OPTIONS = ("Prune=false", "Prune=confirm", "Delete=false", "Delete=confirm")
# gitops-engine treats an object with these as a Helm hook (pkg/sync/hook/helm), whatever renders it.
HELM_HOOKS = ("helm.sh/hook", "helm.sh/hook-weight", "helm.sh/hook-delete-policy")
WHOLE_NUMBER = lazy(r"[-+]?[0-9]{1,9}")  # what Go's strconv.Atoi reads (Argo CD ignores anything else)
# Argo CD's format (util/argo/resource_tracking.go BuildAppInstanceValue): <app>:<group>/<kind>:<namespace>/<name>
TRACKING = lazy(r"[^:]+:apprafter\.io/Application:(?P<namespace>[^/]*)/(?P<name>.+)")


def _argo_cds(key: str) -> bool:
    prefix = key.partition("/")[0] if "/" in key else ""
    return prefix == ARGOCD_DOMAIN or prefix.endswith("." + ARGOCD_DOMAIN) or key in HELM_HOOKS


def _problem(key: str, value: Any, name: Any, namespace: Any) -> str | None:
    """Why this annotation may not be on the Application, or None when it may."""
    if not _argo_cds(key):
        return None
    if not isinstance(value, str):
        return None  # the schema's type check reports it
    if key == SYNC_WAVE:
        return None if WHOLE_NUMBER.fullmatch(value) else "must be a whole number (Argo CD's sync wave)"
    if key == SYNC_OPTIONS:
        options = [o.strip() for o in value.split(",") if o.strip()]  # as Argo CD reads the list
        refused = [o for o in options if o not in ALLOWED_SYNC_OPTIONS]
        if refused:
            shown = ", ".join(repr(o[:60]) for o in refused[:3])
            return (f"sync option {shown} may not be set on an Application (Argo CD would act on it); allowed: "
                    f"{', '.join(ALLOWED_SYNC_OPTIONS)}")
        return None
    if key == INSTALLATION_ID:
        return None
    if key == TRACKING_ID:
        found = TRACKING.fullmatch(value)
        if found and found["name"] == name and (namespace is None or found["namespace"] == namespace):
            return None
        return "is Argo CD's own stamp (its repo-server writes it): it must name this Application, or be left out"
    return f"is an instruction to Argo CD, which an Application may not carry (allowed: {SYNC_WAVE}, {SYNC_OPTIONS})"


def problems(metadata: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(annotation key, why) for every annotation of `metadata` an Application may not carry."""
    for key, value in _annotations(metadata).items():
        why = _problem(str(key), value, metadata.get("name"), metadata.get("namespace"))
        if why:
            yield str(key), why


def introduced(old: Mapping[str, Any], new: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """The problems of the annotations a write adds or changes (`old` -> `new` metadata): an object admitted before
    this rule stays writable as long as a write brings no new instruction to Argo CD."""
    before, after = _annotations(old), _annotations(new)
    for key, why in problems(new):
        if after.get(key) != before.get(key):
            yield key, why


def _annotations(metadata: Mapping[str, Any]) -> Mapping[str, Any]:
    found = metadata.get("annotations")
    return found if isinstance(found, Mapping) else {}
