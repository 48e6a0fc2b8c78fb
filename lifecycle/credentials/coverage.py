"""What SourceCredentials cover (spec §3.12), decided without a cluster: a credential's coverage as its spec asks and
as its status last applied it, what each credential serves now (as last applied while a change waits for its plan,
nothing once deleted), whether a prefix covers a repository or a host an image, who uses the coverage (Argo CD's
Applications, our Deployments)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from lifecycle.credentials.git_urls import template_covers
from lifecycle.credentials.spec import Backend, Credential, Half, argocd_project, argocd_url, pull_key, read
from renderer.effective import effective_spec
from renderer.imageref import split_image
from renderer.names import NAME_LABEL

__all__ = ["Coverage", "User", "application_image", "applied_coverage", "as_applied", "coverage_of", "covered",
           "covering", "covers_image", "covers_repository", "deployment_image", "image_users", "repository_users",
           "serves_now", "serving", "users"]

APP_CONTAINER = "app"  # the renderer's container name in every Deployment (renderer/manifests/workload.py)


class Coverage(NamedTuple):
    """What a credential covers, as derived: Argo CD's url prefixes and the pull secret's host keys (None: no half),
    the registry half's namespaces and the git half's Argo CD projects (None: every one)."""

    git: tuple[str, ...] | None
    registry: tuple[str, ...] | None
    namespaces: tuple[str, ...] | None = None
    projects: tuple[str, ...] | None = None


class User(NamedTuple):
    """Something a credential's coverage serves: who (for the plan's reason), the repository URL or image, for an
    image the namespace it runs in, for a repository the Argo CD project of the Application that syncs it."""

    who: str
    half: str  # "git" (a repository URL) | "registry" (an image reference)
    target: str
    namespace: str = ""
    project: str = ""


def coverage_of(credential: Credential) -> Coverage:
    """The coverage a credential's spec asks for."""
    git, registry = credential.git, credential.registry
    return Coverage(tuple(sorted({argocd_url(p) for p in git.covers})) if git else None,
                    tuple(sorted({pull_key(h) for h in registry.covers})) if registry else None,
                    tuple(sorted(set(registry.namespaces))) if registry and registry.namespaces is not None
                    else None,
                    tuple(sorted(set(git.projects))) if git and git.projects is not None else None)


def _strings(entries: Any) -> tuple[str, ...] | None:
    return tuple(sorted(e for e in entries if isinstance(e, str))) if isinstance(entries, list) else None


def applied_coverage(status: Mapping[str, Any] | None) -> Coverage | None:
    """The coverage last applied, as the status records it (the gate's baseline); None before the first pass wrote
    it. An entry that is not a string is dropped (a status only the operator writes); a status without the registry
    half's namespaces (or the git half's projects: absent, or written before the field existed) applied it to every
    namespace (project)."""
    status = status or {}
    halves: dict[str, Mapping[str, Any] | None] = {
        half: body if isinstance(body := status.get(half), Mapping) else None for half in ("git", "registry")}
    git = _strings((halves["git"] or {}).get("repoPrefixes"))
    registry = _strings((halves["registry"] or {}).get("hosts"))
    if git is None and registry is None:
        return None
    return Coverage(git, registry, _strings((halves["registry"] or {}).get("namespaces")) if registry else None,
                    _strings((halves["git"] or {}).get("projects")) if git else None)


def as_applied(credential: Credential, applied: Coverage | None) -> Credential:
    """A held credential as it was last applied: its coverage (prefixes and projects, hosts and namespaces) from the
    status, the backends of its spec."""
    if applied is None:
        return credential

    def half(spec: Half | None, entries: tuple[str, ...] | None, namespaces: tuple[str, ...] | None = None,
             projects: tuple[str, ...] | None = None) -> Half | None:
        backend = spec.backend if spec else Backend(None, None)
        return None if entries is None else Half(backend, entries, namespaces, projects)

    return credential._replace(git=half(credential.git, applied.git, projects=applied.projects),
                               registry=half(credential.registry, applied.registry, applied.namespaces))


def serves_now(obj: Mapping[str, Any]) -> Credential | None:
    """What one SourceCredential serves now: while a change waits for its plan what it last applied (the derived
    Secrets stay as they were, a deletion's too), once deleted nothing, else its spec."""
    status = obj.get("status") or {}
    if status.get("migrationPlan"):
        return as_applied(read(obj), applied_coverage(status))
    return None if obj["metadata"].get("deletionTimestamp") else read(obj)


def serving(credentials: Iterable[Mapping[str, Any]], carried: tuple[str, Credential | None] | None = None
            ) -> list[Credential]:
    """What each SourceCredential serves now; `carried` is the one a pass carries out (None: being deleted) as it
    will serve."""
    out = []
    for obj in credentials:
        if carried is not None and obj["metadata"]["name"] == carried[0]:
            out += [carried[1]] if carried[1] is not None else []
        elif (now := serves_now(obj)) is not None:
            out.append(now)
    return out


def covers_repository(prefixes: Iterable[str], url: str) -> bool:
    """Whether Argo CD would serve a repository URL from a template of one of the prefixes (its normalised
    longest-prefix rule, lifecycle.credentials.git_urls)."""
    return template_covers(prefixes, url)


def covers_image(keys: Iterable[str], image: str) -> bool:
    """Whether an image's repository (Docker Hub names normalised) is a host key or lies below one, path component
    by component (ghcr.io/my does not cover ghcr.io/myorg/app)."""
    repository, _, _ = split_image(image)
    return any(repository == key or repository.startswith(key + "/") for key in keys)


def covered(half: str, entries: Sequence[str] | None, target: str) -> bool:
    """Whether a half's entries (Argo CD urls or host keys) cover a repository URL or an image."""
    if not entries:
        return False
    return covers_repository(entries, target) if half == "git" else covers_image(entries, target)


def deployment_image(deployment: Mapping[str, Any]) -> str | None:
    """The image the renderer's app container runs (the rendered image)."""
    containers = (((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or []
    return next((str(c.get("image")) for c in containers if c.get("name") == APP_CONTAINER and c.get("image")), None)


def application_image(application: Mapping[str, Any]) -> str | None:
    """The image one of our Applications runs in its environment (base merged with the environment's override),
    None when its spec does not say (the webhook refuses such a spec; a cache may still hold one)."""
    spec = application.get("spec")
    if not isinstance(spec, Mapping) or not isinstance(spec.get("environment"), str):
        return None
    try:
        image = effective_spec(spec, spec["environment"]).get("image")
    except (KeyError, TypeError, AttributeError):
        return None
    return image if isinstance(image, str) and image else None


def repository_users(argo_applications: Iterable[Mapping[str, Any]]) -> list[User]:
    """Every repository an Argo CD Application syncs (spec.source and spec.sources[]), as git users of its project."""
    out = []
    for app in argo_applications:
        spec = app.get("spec") or {}
        sources = [spec.get("source"), *(spec.get("sources") or [])]
        who = f"Argo CD Application {app['metadata'].get('namespace', '')}/{app['metadata']['name']}"
        out += [User(who, "git", str(s["repoURL"]), project=argocd_project(app)) for s in sources
                if isinstance(s, Mapping) and s.get("repoURL")]
    return out


def image_users(images: Iterable[tuple[str, str, str]]) -> list[User]:
    """(who, rendered image, namespace) of each Application's workload, as registry users."""
    return [User(who, "registry", image, namespace) for who, image, namespace in images]


def users(argo_applications: Iterable[Mapping[str, Any]], deployments: Iterable[Mapping[str, Any]]) -> list[User]:
    """What a credential's coverage serves, for the gate (the operator's and `repo creds`' prediction): the
    repositories Argo CD's Applications sync and the images our Deployments run, named by their Application."""
    images = []
    for deployment in deployments:
        meta = deployment["metadata"]
        image = deployment_image(deployment)
        if image:
            app = (meta.get("labels") or {}).get(NAME_LABEL) or meta["name"]
            images.append((f"Application {meta['namespace']}/{app}", image, str(meta["namespace"])))
    return [*repository_users(argo_applications), *image_users(images)]


def covering(credentials: Iterable[Mapping[str, Any]], half: str, target: str) -> list[str]:
    """The SourceCredentials whose spec or last-applied coverage covers a repository URL or an image, by name."""
    names = []
    for obj in credentials:
        for coverage in (coverage_of(read(obj)), applied_coverage(obj.get("status"))):
            if coverage is not None and covered(half, getattr(coverage, half), target):
                names.append(obj["metadata"]["name"])
    return sorted(set(names))
