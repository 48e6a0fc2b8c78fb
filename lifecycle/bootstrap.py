"""What `apprafter cluster-bootstrap` applies (spec §1.4, §3.10, §3.11), decided from what it read of the cluster
and the stack version cosign verified: Argo CD when it is absent, the plugin's settings on it, the tenants' AppProject,
the CRDs, the PlatformStack `default` and the root (umbrella) Application by digest, each as one step saying how and
why. Pure: the edge (apprafter/bootstrap_cmd.py) reads, verifies, calls `plan` and applies the steps in order.

The loader steps back once the stack runs: the PlatformStack, the root Application and the tenants' AppProject are
created when absent and never changed afterwards (the PlatformStack controller, `apprafter platform ...` and the
administrator own them from there), so a run again never undoes an upgrade or an edit. What the loader owns outright
(the CRDs, the sidecar settings, the key Secret) is applied again only where the cluster differs from it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from controller_runtime.compare import up_to_date
from lifecycle.platformstack import baseline_of
from platform_stack import umbrella
from platform_stack.resource import KIND as STACK_KIND
from platform_stack.resource import NAME as STACK_NAME
from platform_stack.resource import NAMESPACE as STACK_NAMESPACE
from platform_stack.resource import read_spec
from renderer.names import API_VERSION as APPRAFTER_API
from renderer.names import OPERATOR_FIELD_MANAGER
from toolchain.errors import Problem, UserError

__all__ = ["ARGOCD_CRD", "ARGOCD_NAMESPACE", "CRD_API", "FIELD_MANAGER", "KEYS_SECRET", "SIDECAR_MANAGER", "Key",
           "Plan", "Request", "Stack", "Step", "argocd_found", "crd_scopes", "default_project", "key_of",
           "namespaced_in", "plan", "reads", "root_application", "sidecar_objects", "stack_spec",
           "tenant_project"]

FIELD_MANAGER = "apprafter-bootstrap"
# The sidecar settings' own field manager, as docs/install.md step 3 applies them (and takes them out again).
SIDECAR_MANAGER = "apprafter"
ARGOCD_NAMESPACE = umbrella.NAMESPACE  # where the PlatformStack controller writes the umbrella: Argo CD's namespace
KEYS_SECRET = "platform-stack-keys"
CRD_API = "apiextensions.k8s.io/v1"
ARGOCD_CRD = "applications.argoproj.io"
ARGOCD_API = "argoproj.io/v1alpha1"
# Argo CD is there when its Application CRD and the two workloads that render and sync are (the application
# controller is a StatefulSet in install.yaml, a Deployment in some Helm set-ups).
ARGOCD_WORKLOADS = (("argocd-repo-server", ("Deployment",)),
                    ("argocd-application-controller", ("StatefulSet", "Deployment")))

Key = tuple[str, str, str, str]  # apiVersion, kind, namespace ("" when cluster-scoped), name
Action = Literal["create", "apply", "unchanged", "kept"]
CHANGES: frozenset[str] = frozenset({"create", "apply"})


def key_of(obj: Mapping[str, Any]) -> Key:
    meta = obj["metadata"]
    return str(obj["apiVersion"]), str(obj["kind"]), str(meta.get("namespace") or ""), str(meta["name"])


@dataclasses.dataclass(frozen=True)
class Stack:
    """The stack version cosign verified: its repository (host/path), version and the digest that verified."""

    repository: str
    version: str
    digest: str
    insecure: bool  # the registry speaks plain HTTP (the controller must too)


@dataclasses.dataclass(frozen=True)
class Request:
    """What the user asked for, with the files it named already read (objects, not paths)."""

    stack: Stack
    values: Mapping[str, Any]  # PlatformStack spec.values: tier, domain, multitenancy
    channel: str
    auto_upgrade: bool
    public_key: tuple[str, str]  # (Secret data key, base64 of the PEM): a public key, not secret material
    sidecar: Sequence[Mapping[str, Any]]  # deploy/argocd's patches as objects in ARGOCD_NAMESPACE (sidecar_objects)
    crds: Sequence[Mapping[str, Any]]  # `apprafter crds`
    argocd_manifest: Sequence[Mapping[str, Any]] | None = None  # placed in ARGOCD_NAMESPACE (namespaced_in)
    manifest_name: str = "--argocd-manifest"  # how messages name the manifest
    registry_secret: str | None = None  # spec.source.secretRef: the controller's registry login
    # deploy/argocd/tenant-project.yaml: tenants' Argo CD Applications may create apprafter.io Applications only
    tenant_project: Mapping[str, Any] | None = None
    overrides: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # PlatformStack spec.overrides (the issuer)


@dataclasses.dataclass(frozen=True)
class Step:
    """One object: what to do with it, as which field manager, and why (one line)."""

    obj: Mapping[str, Any]
    action: Action
    manager: str
    force: bool
    why: str

    @property
    def changes(self) -> bool:
        return self.action in CHANGES


@dataclasses.dataclass(frozen=True)
class Plan:
    """The steps in the order they are applied, and what was found that needs no step."""

    steps: tuple[Step, ...]
    notes: tuple[str, ...]

    @property
    def changes(self) -> tuple[Step, ...]:
        return tuple(s for s in self.steps if s.changes)


def _meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    return {"name": name, **({"namespace": namespace} if namespace else {})}


def _namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(name)}


def sidecar_objects(component: Mapping[str, Any], patches: Mapping[str, Mapping[str, Any]],
                    image: str | None = None) -> list[dict[str, Any]]:
    """deploy/argocd's kustomize Component as the objects a server-side apply makes of it: each patch (by its file
    name in `patches`) named by its target, in ARGOCD_NAMESPACE, the sidecar's image replaced by `image` if given."""
    out = []
    for entry in component.get("patches") or []:
        target = entry["target"]
        obj = {k: v for k, v in patches[entry["path"]].items() if k != "metadata"}
        obj = {"apiVersion": obj.get("apiVersion"), "kind": target["kind"], **obj,
               "metadata": _meta(target["name"], ARGOCD_NAMESPACE)}
        if image is not None:
            obj = _with_image(obj, image)
        out.append(obj)
    return out


def _with_image(obj: Mapping[str, Any], image: str) -> dict[str, Any]:
    """The patch with every container it adds running `image` (the sidecar, pinned by the digest one verified)."""
    spec = (obj.get("spec") or {}).get("template", {}).get("spec")
    if not isinstance(spec, Mapping) or not spec.get("containers"):
        return dict(obj)
    containers = [{**c, "image": image} for c in spec["containers"]]
    template = {**obj["spec"]["template"], "spec": {**spec, "containers": containers}}
    return {**obj, "spec": {**obj["spec"], "template": template}}


def crd_scopes(objects: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], bool]:
    """(apiVersion, kind) -> namespaced, for every kind a CRD among `objects` defines (served before it exists)."""
    out: dict[tuple[str, str], bool] = {}
    for obj in objects:
        if obj.get("kind") != "CustomResourceDefinition":
            continue
        spec = obj.get("spec") or {}
        for version in spec.get("versions") or []:
            out[(f"{spec.get('group')}/{version.get('name')}", str((spec.get("names") or {}).get("kind")))] = \
                spec.get("scope") == "Namespaced"
    return out


def namespaced_in(objects: Iterable[Mapping[str, Any]], namespace: str,
                  scopes: Mapping[tuple[str, str], bool]) -> list[dict[str, Any]]:
    """`objects` (a manifest's, namespaced ones without a namespace, as install.yaml has them) placed in
    `namespace`, as `kubectl apply -n` places them; cluster-scoped ones left as they are."""
    out = []
    for obj in objects:
        if scopes[(obj["apiVersion"], obj["kind"])] and not obj["metadata"].get("namespace"):
            obj = {**obj, "metadata": {**obj["metadata"], "namespace": namespace}}
        out.append(dict(obj))
    return out


def _argocd_probes() -> list[Key]:
    probes: list[Key] = [(CRD_API, "CustomResourceDefinition", "", ARGOCD_CRD)]
    for name, kinds in ARGOCD_WORKLOADS:
        probes += [("apps/v1", kind, ARGOCD_NAMESPACE, name) for kind in kinds]
    return probes


def stack_spec(request: Request) -> dict[str, Any]:
    """The PlatformStack's spec: the verified repository, the cluster's values, the key Secret to verify with; pinned
    to the bootstrapped version unless it auto-upgrades (then the channel moves it, gated by MigrationPlans)."""
    stack = request.stack
    source: dict[str, Any] = {"repoURL": f"oci://{stack.repository}"}
    if stack.insecure:
        source["insecure"] = True
    if request.registry_secret:
        source["secretRef"] = {"name": request.registry_secret}
    spec: dict[str, Any] = {"channel": request.channel, "autoUpgrade": request.auto_upgrade, "source": source,
                            "values": dict(request.values),
                            **({"overrides": dict(request.overrides)} if request.overrides else {}),
                            "verify": {"provider": "cosign", "secretRef": {"name": KEYS_SECRET}}}
    if not request.auto_upgrade:
        spec["pin"] = stack.version
    return spec


def default_project() -> dict[str, Any]:
    """Argo CD's AppProject `default` as argocd-server creates it when it starts (initializeDefaultProject): the root
    Application names it, and the application controller does not look at an Application again for its periodic
    reconciliation (minutes) once it found the project missing."""
    return {"apiVersion": ARGOCD_API, "kind": "AppProject", "metadata": _meta("default", ARGOCD_NAMESPACE),
            "spec": {"sourceRepos": ["*"], "destinations": [{"server": "*", "namespace": "*"}],
                     "clusterResourceWhitelist": [{"group": "*", "kind": "*"}]}}


def tenant_project(request: Request) -> dict[str, Any] | None:
    """The tenants' AppProject the request carries, in ARGOCD_NAMESPACE (where Argo CD reads projects)."""
    project = request.tenant_project
    if project is None:
        return None
    return {**project, "metadata": _meta(str(project["metadata"]["name"]), ARGOCD_NAMESPACE)}


def _desired(request: Request) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """(namespaces, the keys Secret, the PlatformStack, the root Application) this request makes."""
    key_name, key_b64 = request.public_key
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": _meta(KEYS_SECRET, STACK_NAMESPACE),
              "data": {key_name: key_b64}}
    platform_stack = {"apiVersion": APPRAFTER_API, "kind": STACK_KIND, "metadata": _meta(STACK_NAME, STACK_NAMESPACE),
                      "spec": stack_spec(request)}
    return [_namespace(ARGOCD_NAMESPACE), _namespace(STACK_NAMESPACE)], [secret], platform_stack, \
        root_application(request, platform_stack)


def root_application(request: Request, platform_stack: Mapping[str, Any]) -> dict[str, Any]:
    """The root Application: the umbrella the PlatformStack controller's first apply of the verified version writes
    for `platform_stack` as the controller reads it (its values and every override, `--gateway-class` and the issuer
    among them). Argo CD syncs it before the operator runs (the operator is a component of the stack), so its first
    sync, and every component Application that makes, already renders what was asked; the controller's takeover then
    writes nothing. UserError, one line per field, for a spec the controller would refuse."""
    spec, problems = read_spec(platform_stack)
    if spec is None:
        raise UserError([Problem(field, 0, 0, "", reason) for field, reason in problems])
    stack = request.stack
    return umbrella.of(baseline_of(spec, stack.version, stack.digest, stack.repository), automated=True)


def reads(request: Request) -> list[Key]:
    """Every object `plan` looks at: what it would apply, and what tells whether Argo CD is installed."""
    namespaces, secrets, platform_stack, root = _desired(request)
    project = tenant_project(request)
    objects = [*namespaces, *(request.argocd_manifest or ()), *request.sidecar, *([project] if project else []),
               *request.crds, *secrets, platform_stack, root]
    return list(dict.fromkeys([*_argocd_probes(), *(key_of(o) for o in objects), key_of(default_project())]))


def argocd_found(live: Mapping[Key, Mapping[str, Any]]) -> tuple[list[str], list[str], bool]:
    """(found, missing) of what makes an Argo CD: its Application CRD and its two workloads; and whether what was
    found is of an install this loader began (a run that stopped half-way), not someone else's."""
    found: list[str] = []
    missing: list[str] = []
    crd = live.get((CRD_API, "CustomResourceDefinition", "", ARGOCD_CRD))
    (found if crd is not None else missing).append(f"crd/{ARGOCD_CRD}")
    present = [crd]
    for name, kinds in ARGOCD_WORKLOADS:
        kind = next((k for k in kinds if ("apps/v1", k, ARGOCD_NAMESPACE, name) in live), None)
        (found if kind else missing).append(f"{(kind or kinds[0]).lower()}/{name}")
        present.append(live[("apps/v1", kind, ARGOCD_NAMESPACE, name)] if kind else None)
    return found, missing, any(_written_by(obj, FIELD_MANAGER) for obj in present)


def _written_by(obj: Mapping[str, Any] | None, manager: str) -> bool:
    return obj is not None and any(e.get("manager") == manager for e in obj.get("metadata", {}).get("managedFields")
                                   or [])


def _owned(obj: Mapping[str, Any], live: Mapping[Key, Mapping[str, Any]], manager: str, force: bool,
           why: str) -> Step:
    """An object the loader owns: applied unless the cluster already is what the apply makes it."""
    current = live.get(key_of(obj))
    if current is None:
        return Step(obj, "create", manager, force, why)
    return Step(obj, "unchanged" if up_to_date(current, obj, manager) else "apply", manager, force, why)


def _once(obj: Mapping[str, Any], live: Mapping[Key, Mapping[str, Any]], why: str, kept: str,
          manager: str = FIELD_MANAGER) -> Step:
    """An object the loader creates and then leaves to others: created when absent, else kept as it is."""
    if key_of(obj) in live:
        return Step(obj, "kept", manager, False, kept)
    return Step(obj, "create", manager, False, why)


def plan(request: Request, live: Mapping[Key, Mapping[str, Any]]) -> Plan:
    """The steps, in order, for `request` on a cluster holding `live` (the objects of `reads` that exist). UserError
    when Argo CD is not (wholly) installed and no manifest to install it from was given."""
    namespaces, secrets, platform_stack, root = _desired(request)
    steps = [Step(ns, "unchanged" if key_of(ns) in live else "create", FIELD_MANAGER, False, "namespace")
             for ns in namespaces]
    notes = []
    found, missing, ours = argocd_found(live)
    if not missing:
        notes.append(f"Argo CD found in namespace {ARGOCD_NAMESPACE} ({', '.join(found)}): not installed again")
    elif found and not ours:
        # Someone else's Argo CD, under other names or elsewhere (a Helm release not named argocd): a second
        # install beside it would fight it for the CRDs.
        raise UserError([Problem(found[0], 0, 0, "", f"Argo CD is partly there ({', '.join(found)}; missing "
                                 f"{', '.join(missing)} in namespace {ARGOCD_NAMESPACE}), not installed by "
                                 "cluster-bootstrap: the loader needs Argo CD in namespace argocd under its own names "
                                 "(install.yaml, or the Helm chart as release argocd); it does not install a second "
                                 "one")])
    elif request.argocd_manifest is None:
        raise UserError([Problem("--argocd-manifest", 0, 0, "", f"Argo CD is not installed in namespace "
                                 f"{ARGOCD_NAMESPACE} (missing {', '.join(missing)}): pass --argocd-manifest FILE, "
                                 "the install.yaml of the Argo CD release (v3.1 or later) to install")])
    else:
        notes.append(f"Argo CD is not installed in namespace {ARGOCD_NAMESPACE} (missing {', '.join(missing)}): "
                     f"installing it from {request.manifest_name}" + (" (a run before began it)" if found else ""))
        # CRDs first: the manifest's other objects may be of their kinds (kubectl applies them in file order too).
        ordered = sorted(request.argocd_manifest, key=lambda o: o.get("kind") != "CustomResourceDefinition")
        steps += [_owned(o, live, FIELD_MANAGER, True, "Argo CD") for o in ordered]
        steps.append(_once(default_project(), live, "Argo CD's default project, before argocd-server makes it",
                           "exists: left as it is"))
    # Without force: the sidecar settings cannot take a field over from whoever installed Argo CD (docs/install.md).
    steps += [_owned(o, live, SIDECAR_MANAGER, False, "the plugin's settings (deploy/argocd)") for o in request.sidecar]
    project = tenant_project(request)
    if project is not None:
        # Created once, then the administrator's: copied per team, narrowed, opted in to the Approve action.
        steps.append(_once(project, live, "the tenants' AppProject: apprafter.io Applications only, outside the "
                           "platform's namespaces", "exists: left as it is (yours to narrow per team)"))
    # Forced, as docs/install.md upgrades them: a Helm-installed operator chart's `helm` owns them otherwise.
    steps += [_owned(o, live, FIELD_MANAGER, True, "AppRafter CRD") for o in request.crds]
    steps += [_owned(o, live, FIELD_MANAGER, True, "the release key the PlatformStack verifies with")
              for o in secrets]
    steps.append(_once(platform_stack, live, "the PlatformStack", "exists: left as it is (change it with "
                       "`apprafter platform ...`)"))
    # As the PlatformStack controller's own field manager: its next apply of the umbrella owns every field, so it can
    # also take one away (automated sync when a tag moved, a value dropped); a second owner would keep those.
    steps.append(_once(root, live, f"the root Application: {request.stack.repository} {request.stack.version} "
                       f"by digest {request.stack.digest}", "exists: left to the PlatformStack controller",
                       OPERATOR_FIELD_MANAGER))
    return Plan(tuple(steps), tuple(notes))
