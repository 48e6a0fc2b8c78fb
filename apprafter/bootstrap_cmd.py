"""`apprafter cluster-bootstrap`: the minimal loader (spec §1.4) — verify the stack, install Argo CD if absent, put
the plugin's settings on it, apply the CRDs, create the PlatformStack and the root Application by digest, then step
back. The edge: reads the files and the cluster, verifies with cosign, applies what lifecycle.bootstrap decides."""

from __future__ import annotations

import base64
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from apprafter.errors import reported
from apprafter.kube_options import kube_options
from apprafter.options import output_option
from lifecycle import bootstrap_settings
from platform_stack.resource import CHANNELS
from renderer.context import TIERS
from toolchain.errors import Problem, UserError

if TYPE_CHECKING:  # imported when the command runs: `--help` never pays for them
    from controller_runtime.client import Kube
    from lifecycle.bootstrap import Key, Plan, Stack
    from platform_stack.classify import StackSnapshot

__all__ = ["cluster_bootstrap", "sidecar_directory"]

# deploy/argocd: package data in a wheel (pyproject's force-include), the checkout's directory otherwise.
_SIDECAR_CANDIDATES = (Path(__file__).resolve().parent / "argocd",
                       Path(__file__).resolve().parent.parent / "deploy" / "argocd")
MAX_MANIFEST_BYTES = 16 << 20  # Argo CD's install.yaml is ~1.5 MB
MAX_MANIFEST_OBJECTS = 1000
# Nodes of the manifest as data, an alias counted each time it is used: YAML aliases cannot make it grow past this
# when it is printed or sent (install.yaml: ≈ 60,000).
MAX_MANIFEST_NODES = 2_000_000
ESTABLISHED_SECONDS = 60.0
MAX_SOLVER_BYTES = 64 << 10
_DATA_KEY = re.compile(r"[-._a-zA-Z0-9]+")


def _fail(where: str, message: str) -> UserError:
    return UserError([Problem(where, 0, 0, "", message)])


def sidecar_directory() -> Path:
    """Where deploy/argocd's kustomize Component is (the one source of the sidecar settings)."""
    for path in _SIDECAR_CANDIDATES:
        if (path / "kustomization.yaml").is_file():
            return path
    from toolchain.errors import ToolFailure

    raise ToolFailure("deploy/argocd (the sidecar settings) is not next to the apprafter package: reinstall "
                      "apprafter-render")


def _sidecar(image: str | None) -> list[dict[str, Any]]:
    import yaml

    from lifecycle.bootstrap import sidecar_objects

    directory = sidecar_directory()
    component = yaml.safe_load((directory / "kustomization.yaml").read_text())
    patches = {entry["path"]: yaml.safe_load((directory / entry["path"]).read_text())
               for entry in component.get("patches") or []}
    return sidecar_objects(component, patches, image)


def _tenant_project() -> dict[str, Any]:
    """deploy/argocd/tenant-project.yaml: the AppProject tenants' Argo CD Applications belong in."""
    import yaml

    project: dict[str, Any] = yaml.safe_load((sidecar_directory() / "tenant-project.yaml").read_text())
    return project


def _manifest(path: Path) -> list[dict[str, Any]]:
    """The objects of an Argo CD install manifest (a YAML stream); one line naming the file on anything else."""
    import yaml

    if not path.is_file():
        raise _fail(str(path), "--argocd-manifest: no such file")
    if path.stat().st_size > MAX_MANIFEST_BYTES:
        raise _fail(str(path), f"--argocd-manifest: larger than {MAX_MANIFEST_BYTES} bytes: refused")
    loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        documents = list(yaml.load_all(path.read_text(errors="replace"), Loader=loader))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        problem = getattr(e, "problem", None) or "not YAML"
        raise UserError([Problem(str(path), mark.line + 1 if mark else 1, mark.column + 1 if mark else 1, "",
                                 str(problem))]) from None
    objects = []
    for index, doc in enumerate(d for d in documents if d is not None):
        meta = doc.get("metadata") if isinstance(doc, dict) else None
        if isinstance(doc, dict) and doc.get("kind") == "List":
            raise _fail(str(path), f"document {index + 1}: a List: give the objects one per document")
        if not isinstance(meta, dict) or not all(isinstance(x, str) and x for x in
                                                 (doc.get("apiVersion"), doc.get("kind"), meta.get("name"))):
            raise _fail(str(path), f"document {index + 1}: not a Kubernetes object (apiVersion, kind, metadata.name)")
        objects.append(doc)
    if not objects:
        raise _fail(str(path), "--argocd-manifest: no objects in it")
    if not bootstrap_settings.within(objects, MAX_MANIFEST_NODES):
        raise _fail(str(path), f"--argocd-manifest: more than {MAX_MANIFEST_NODES} values (YAML aliases count each "
                    "time they are used): refused")
    if len(objects) > MAX_MANIFEST_OBJECTS:
        raise _fail(str(path), f"--argocd-manifest: more than {MAX_MANIFEST_OBJECTS} objects: refused")
    return objects


def _public_key(path: Path) -> tuple[str, str]:
    """(Secret data key, base64 of the PEM) of the cosign public key file."""
    if not path.is_file():
        raise _fail(str(path), "--key: no such file (the cosign public key the stack is signed with)")
    pem = path.read_bytes()
    if b"PUBLIC KEY-----" not in pem or len(pem) > 16 << 10:
        raise _fail(str(path), "--key: not a PEM public key (cosign.pub); never pass the private key")
    name = path.name if path.name.endswith(".pub") and _DATA_KEY.fullmatch(path.name) else "cosign.pub"
    return name, base64.b64encode(pem).decode()


def _verify(reference: str, version: str, key: Path, plain_http: bool, tier: str) -> tuple[Stack, StackSnapshot]:
    """Resolve `version`'s tag to a digest and verify its cosign signature by that digest (platform_stack.signing,
    as `apprafter stack verify` and the PlatformStack controller verify); then read that digest's chart as the
    controller reads it (a Helm chart of that version: its minimumKubernetesVersion)."""
    from compatibility.versions import InvalidVersion, stack_version
    from lifecycle.bootstrap import Stack
    from platform_stack.check_result import version_tag
    from platform_stack.oci import Reference, parse_reference
    from platform_stack.registry import connect
    from platform_stack.signing import verify
    from platform_stack.upstream import Session, Upstream
    from renderer.imageref import is_loopback

    try:
        stack_version(version)
    except InvalidVersion as e:
        raise _fail("--version", str(e)) from None
    ref = parse_reference(reference)
    if ref.tag or ref.digest:
        raise _fail(reference[:200], "name the repository only (oci://HOST/REPO/platform-stack): the version is "
                    "--version")
    plain_http = plain_http or is_loopback(ref.host)
    verified, _ = verify(f"{ref.host}/{ref.repository}:{version_tag(version)}", key, plain_http)
    assert verified.digest is not None
    session = Session(Upstream(), Reference(ref.host, ref.repository), connect(ref.host, plain_http), plain_http)
    snapshot = session.snapshot(version, verified.digest, tier, None)
    return Stack(f"{ref.host}/{ref.repository}", version, verified.digest, plain_http), snapshot


async def _scopes(kube: Kube, objects: Sequence[Mapping[str, Any]], manifest: str) -> dict[tuple[str, str], bool]:
    """Whether each kind of `objects` is namespaced: the manifest's own CRDs, else what the server serves."""
    from controller_runtime.errors import KubeError
    from controller_runtime.kinds import GroupVersionKind
    from lifecycle.bootstrap import crd_scopes

    scopes = crd_scopes(objects)
    for api_version, kind in sorted({(o["apiVersion"], o["kind"]) for o in objects} - set(scopes)):
        try:
            scopes[(api_version, kind)] = (await kube.resource(GroupVersionKind(api_version, kind))).namespaced
        except KubeError as e:
            if e.code != 404:
                raise
            raise _fail(manifest, f"{kind} ({api_version}): the cluster does not serve this kind") from None
    return scopes


async def _read(kube: Kube, keys: Sequence[Key]) -> dict[Key, dict[str, Any]]:
    """The objects of `keys` that exist (a kind the server does not serve yet: none of it exists)."""
    import asyncio

    from controller_runtime.errors import KubeError
    from controller_runtime.kinds import GroupVersionKind

    async def one(key: Key) -> dict[str, Any] | None:
        api_version, kind, namespace, name = key
        try:
            return await kube.get(GroupVersionKind(api_version, kind), name, namespace or None)
        except KubeError as e:
            if e.code == 404:
                return None
            raise

    found = await asyncio.gather(*(one(k) for k in keys))
    return {k: obj for k, obj in zip(keys, found, strict=True) if obj is not None}


async def _established(kube: Kube, names: Sequence[str]) -> None:
    """Wait until each CRD is Established (bounded): the objects of its kind are applied next."""
    import asyncio
    import time

    from controller_runtime.kinds import GroupVersionKind
    from lifecycle.bootstrap import CRD_API
    from lifecycle.conditions import find_condition

    crd = GroupVersionKind(CRD_API, "CustomResourceDefinition")
    deadline = time.monotonic() + ESTABLISHED_SECONDS
    for name in names:
        while True:
            obj = await kube.get(crd, name)
            established = find_condition(((obj or {}).get("status") or {}).get("conditions"), "Established")
            if established.get("status") == "True":
                break
            if time.monotonic() > deadline:
                from toolchain.errors import ToolFailure

                raise ToolFailure(f"crd/{name}: not Established after {ESTABLISHED_SECONDS:.0f} s: check the API "
                                  "server (kubectl get crd " + name + " -o yaml), then run cluster-bootstrap again")
            await asyncio.sleep(0.2)


async def _apply(kube: Kube, plan: Plan) -> list[str]:
    """Carry out the plan's changing steps in order; a line for each."""
    import asyncio
    import time

    from apprafter.cluster import refused
    from controller_runtime.errors import KubeError
    from lifecycle.bootstrap import key_of

    lines: list[str] = []
    pending_crds: list[str] = []
    for step in plan.changes:
        _, kind, namespace, name = key_of(step.obj)
        where = f"{kind.lower()}/{name}" + (f" -n {namespace}" if namespace else "")
        if kind != "CustomResourceDefinition" and pending_crds:
            await _established(kube, pending_crds)
            pending_crds = []
        deadline = time.monotonic() + ESTABLISHED_SECONDS
        while True:
            try:
                await kube.apply(step.obj, force=step.force, field_manager=step.manager)
                break
            except KubeError as e:
                # A kind whose CRD was just Established: discovery looks it up again within seconds (its 404 says
                # "does not serve"; namespaces were created first, so no other 404 is waited out).
                if e.code == 404 and "does not serve" in str(e) and time.monotonic() < deadline:
                    await asyncio.sleep(0.5)
                    continue
                if e.code == 409:
                    raise _fail(where, f"a field is owned by another manager: {e.detail} (remove it there, or "
                                "apply this object yourself with --force-conflicts)") from None
                raise refused(e, where, e.detail) from None
        if kind == "CustomResourceDefinition":
            pending_crds.append(name)
        lines.append(f"{'created' if step.action == 'create' else 'applied'} {where} ({step.why})")
    if pending_crds:
        await _established(kube, pending_crds)
    return lines


def _issuer(issuer: str | None, email: str | None, server: str | None, solver: Path | None) -> dict[str, Any]:
    """The public issuer's overrides (lifecycle.bootstrap_settings.issuer), the DNS-01 solver read from its file."""
    return bootstrap_settings.issuer(issuer, email, server, _solver(solver) if solver is not None else None)


def _solver(path: Path) -> dict[str, Any]:
    """A cert-manager ACME dns01 solver (its provider's block): read, never printed (it names Secrets)."""
    import yaml

    where = str(path)
    try:
        with path.open("rb") as stream:
            data = stream.read(MAX_SOLVER_BYTES + 1)
    except OSError as e:
        raise _fail(where, f"cannot read the DNS-01 solver file: {e.strerror}") from None
    if len(data) > MAX_SOLVER_BYTES:
        raise _fail(where, f"the DNS-01 solver file is larger than {MAX_SOLVER_BYTES >> 10} KiB")
    try:
        solver = yaml.safe_load(data)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise UserError([Problem(where, mark.line + 1 if mark else 0, mark.column + 1 if mark else 0, "",
                                 "not YAML: a cert-manager ACME dns01 solver, e.g. cloudflare: {apiTokenSecretRef: "
                                 "{name: cloudflare-token, key: api-token}}")]) from None
    if not isinstance(solver, dict) or not solver or not all(isinstance(key, str) for key in solver):
        raise _fail(where, "a cert-manager ACME dns01 solver: a mapping naming its DNS provider, e.g. cloudflare: "
                           "{apiTokenSecretRef: {name: cloudflare-token, key: api-token}}")
    return solver


@click.command("cluster-bootstrap")
@click.argument("reference", metavar="oci://HOST/REPO/platform-stack")
@click.option("--version", "version", required=True, metavar="VERSION", help="The stack version to install.")
@click.option("--key", required=True, type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="The cosign public key the stack is signed with (the release key: deploy/keys/README.md).")
@click.option("--tier", required=True, type=click.Choice(TIERS), help="PlatformStack spec.values.tier.")
@click.option("--domain", metavar="DOMAIN", help="PlatformStack spec.values.domain (the apps' public domain).")
@click.option("--multitenancy/--no-multitenancy", default=None, help="PlatformStack spec.values.multitenancy.")
@click.option("--issuer", type=click.Choice(sorted(bootstrap_settings.ISSUERS)),
              help="Who signs public certificates (the ClusterIssuer apprafter-public the stack makes): acme (every "
                   "tier but dev), self-signed (a CA of the cluster's own: dev), own (yours, by that name).")
@click.option("--acme-email", metavar="EMAIL", help="The ACME account's contact (expiry and policy notices).")
@click.option("--acme-server", metavar="URL",
              help="The ACME directory (default Let's Encrypt's; its staging directory while you try things).")
@click.option("--dns01-solver", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="A cert-manager ACME dns01 solver (YAML): the domain's names and its wildcards by DNS-01; without "
                   "it each app's hostname is proven by HTTP-01 through the public Gateway.")
@click.option("--gateway-class", metavar="NAME",
              help="The GatewayClass the stack's Gateways use (default cilium, the stack's own; e.g. traefik where "
                   "k3s runs Traefik: docs/platform-stack.md says what that leaves out).")
@click.option("--channel", type=click.Choice(CHANNELS), default="stable", show_default=True,
              help="The release channel the PlatformStack follows.")
@click.option("--auto-upgrade/--no-auto-upgrade", default=None,
              help="Move to new versions of the channel by itself, gated changes waiting for a MigrationPlan "
                   "(default: on for the solo tier, else off and pinned to --version).")
@click.option("--argocd-manifest", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="Argo CD's install manifest (install.yaml of v3.1 or later), applied only when Argo CD is not "
                   "installed in namespace argocd; nothing is downloaded.")
@click.option("--sidecar-image", metavar="IMAGE",
              help="The plugin sidecar's image, e.g. pinned by the digest you verified (default: deploy/argocd's).")
@click.option("--registry-secret", metavar="NAME",
              help="A kubernetes.io/dockerconfigjson Secret in apprafter-system the operator reads the registry "
                   "with (PlatformStack spec.source.secretRef).")
@click.option("--plain-http", is_flag=True, help="The registry speaks HTTP (loopback is HTTP anyway).")
@click.option("--dry-run", is_flag=True, help="Print the objects it would apply (a YAML stream) and change nothing.")
@output_option("cluster-bootstrap", help="With --dry-run: yaml, the stream to apply; json, one JSON List.")
@kube_options
@reported
def cluster_bootstrap(reference: str, version: str, key: Path, tier: str, domain: str | None,
                      multitenancy: bool | None, issuer: str | None, acme_email: str | None,
                      acme_server: str | None, dns01_solver: Path | None, gateway_class: str | None,
                      channel: str, auto_upgrade: bool | None,
                      argocd_manifest: Path | None, sidecar_image: str | None, registry_secret: str | None,
                      plain_http: bool, dry_run: bool, output: str, kubeconfig: Path | None,
                      kube_context: str | None) -> None:
    """Install the platform stack on a cluster: verify the stack version's signature, install Argo CD if it is
    absent, add the AppRafter plugin to it, apply the CRDs, create the PlatformStack `default` and the root Argo CD
    Application naming the verified chart by digest. Then Argo CD and the operator take over. Safe to run again."""
    from apprafter.cluster import with_cluster
    from lifecycle.bootstrap import Request, namespaced_in, plan, reads

    values = bootstrap_settings.values(tier, domain, multitenancy)
    overrides = bootstrap_settings.with_gateway_class(_issuer(issuer, acme_email, acme_server, dns01_solver),
                                                      gateway_class)
    public_key = _public_key(key)
    manifest = _manifest(argocd_manifest) if argocd_manifest is not None else None
    sidecar = _sidecar(sidecar_image)
    crds = _crds()
    stack, snapshot = _verify(reference, version, key, plain_http, tier)

    async def run(kube: Kube, _: str) -> Plan | list[str]:
        from lifecycle.bootstrap import ARGOCD_NAMESPACE
        from platform_stack.classify import kubernetes_unmet

        unmet = kubernetes_unmet(snapshot, await kube.version())
        if unmet is not None:  # the controller would refuse it (UnsupportedKubernetes): nothing is applied
            raise _fail("--version", f"{unmet}: pick a version this cluster can run, or upgrade Kubernetes first")

        placed = None
        if manifest is not None:
            placed = namespaced_in(manifest, ARGOCD_NAMESPACE, await _scopes(kube, manifest, str(argocd_manifest)))
        request = Request(stack, values, channel, tier == "solo" if auto_upgrade is None else auto_upgrade,
                          public_key, sidecar, crds, placed, str(argocd_manifest), registry_secret,
                          tenant_project=_tenant_project(), overrides=overrides)
        decided = plan(request, await _read(kube, reads(request)))
        if dry_run:
            return decided
        return [*decided.notes, *await _apply(kube, decided), *bootstrap_settings.summary(decided)]

    result = with_cluster(kubeconfig, kube_context, run)
    if isinstance(result, list):
        sys.stdout.write("".join(f"{line}\n" for line in result))
        return
    objects = [bootstrap_settings.printed(step.obj) for step in result.changes]
    if output == "json":
        import json

        sys.stdout.write(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=2) + "\n")
    else:
        from renderer.emit import dump_stream

        sys.stdout.write(dump_stream(objects))
    for note in (*result.notes, *bootstrap_settings.summary(result, dry=True)):
        print(note, file=sys.stderr)


def _crds() -> list[dict[str, Any]]:
    """`apprafter crds`."""
    from lifecycle.crd import OPERATOR_CRDS
    from platform_stack.resource import PLATFORM_STACK
    from renderer.crds import crd_documents

    return crd_documents((*OPERATOR_CRDS, PLATFORM_STACK))
