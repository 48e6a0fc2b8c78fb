"""`apprafter repo creds add | list | check | remove`: SourceCredentials and their sealed material (spec §4.12).

The edge: reads the login (a file or stdin, never argv), the cluster's SealedSecrets certificate, the credential and
its users; lifecycle.credentials.sealing seals, lifecycle.credentials.gate predicts the plan a change waits on. The
login is never printed, logged or put in an error: only the SealedSecret carries it, sealed."""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from apprafter.cluster import refused, shown, table, with_cluster
from apprafter.errors import reported
from apprafter.kube_options import kube_options
from apprafter.options import namespace_option, output_option
from compatibility.migrationplan import name as plan_name
from compatibility.text import approve_command
from controller_runtime.kinds import GroupVersionKind
from lifecycle.conditions import by_type, find_condition
from lifecycle.credentials import checks, gate
from lifecycle.credentials.outputs import MATERIAL_KEYS, users
from lifecycle.credentials.spec import SOURCE_CREDENTIAL, Credential, check, read
from toolchain.errors import Problem, ToolFailure, UserError
from toolchain.timestamps import age

if TYPE_CHECKING:  # the client is imported when a command runs: `--help` never pays for it
    from compatibility.plan import Plan
    from controller_runtime.client import Kube

__all__ = ["repo"]

RECORDS = "apprafter-system"  # the operator's namespace, where SourceCredentials live
SEALED_SECRET = GroupVersionKind("bitnami.com/v1alpha1", "SealedSecret")
SERVICE = GroupVersionKind("v1", "Service")
ARGO_APPLICATION = GroupVersionKind("argoproj.io/v1alpha1", "Application")
DEPLOYMENT = GroupVersionKind("apps/v1", "Deployment")
MAX_MATERIAL = 64 * 1024  # bytes read from --from-secret or stdin
# kubeseal's defaults (--controller-name, --controller-namespace)
CONTROLLER_NAME, CONTROLLER_NAMESPACE = "sealed-secrets-controller", "kube-system"
# `repo creds check` exit codes beyond 1 (input) and 2 (environment): a half refused; none refused, one untold
CHECK_INVALID, CHECK_UNTOLD = 3, 4


def _fail(where: str, message: str) -> UserError:
    return UserError([Problem(where, 0, 0, "", message)])


def _environment(message: str, remedy: str) -> ToolFailure:
    """A failure of the cluster or the controller (exit 2), with its remedy."""
    return ToolFailure(f"{message}: {remedy}")


@click.group()
def repo() -> None:
    """Private repositories and registries (docs/private-sources.md)."""


@repo.group()
def creds() -> None:
    """SourceCredentials: one sealed login covering git repository prefixes and registry hosts."""


# --- reading the login ---------------------------------------------------------------------------------------------

def _one_line(value: str, where: str, key: str) -> str:
    if not value or "\n" in value or "\r" in value:
        raise _fail(where, f"{key}: one non-empty line of UTF-8 (the value is not shown)")
    return value


def _from_secret(path: Path) -> tuple[str, str]:
    """username and password from a Secret manifest (data: base64, or stringData), YAML or JSON."""
    import base64
    import binascii

    import yaml

    where = str(path)
    try:
        raw = path.read_bytes()[:MAX_MATERIAL + 1]
    except OSError as e:
        raise _fail(where, f"cannot read it: {e.strerror}") from None
    if len(raw) > MAX_MATERIAL:
        raise _fail(where, f"larger than {MAX_MATERIAL} bytes: not a Secret manifest")
    try:
        document = yaml.safe_load(raw.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError):
        raise _fail(where, "not a YAML or JSON Secret manifest (the content is not shown)") from None
    if not isinstance(document, Mapping) or document.get("kind") != "Secret":
        raise _fail(where, "kind: a Secret manifest (kind: Secret, keys username and password)")
    values: dict[str, str] = {}
    string_data, data = document.get("stringData") or {}, document.get("data") or {}
    for key in MATERIAL_KEYS:
        if isinstance(string_data, Mapping) and isinstance(string_data.get(key), str):
            values[key] = string_data[key]
        elif isinstance(data, Mapping) and isinstance(data.get(key), str):
            try:
                values[key] = base64.b64decode(data[key], validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                raise _fail(where, f"data.{key}: not base64 of UTF-8 text (the value is not shown)") from None
        else:
            raise _fail(where, f"{key}: missing (stringData.{key} or data.{key}; kubernetes.io/basic-auth's keys)")
        _one_line(values[key], where, key)
    return values["username"], values["password"]


def _password_from_stdin() -> str:
    raw = sys.stdin.buffer.read(MAX_MATERIAL + 1)
    if len(raw) > MAX_MATERIAL:
        raise _fail("<stdin>", f"larger than {MAX_MATERIAL} bytes: not a password")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _fail("<stdin>", "password: not UTF-8 (the value is not shown)") from None
    return _one_line(text.removesuffix("\n").removesuffix("\r"), "<stdin>", "password")


# --- the certificate -----------------------------------------------------------------------------------------------

def _cert_from(source: str) -> bytes:
    """The certificate from a file or an http(s) URL (kubeseal --cert), bounded."""
    if source.startswith(("http://", "https://")):
        import httpx

        try:
            with httpx.Client(timeout=15.0) as client, client.stream("GET", source) as response:
                body = b""
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > MAX_MATERIAL:
                        raise _fail(source, f"larger than {MAX_MATERIAL} bytes: not a certificate")
                if response.status_code != 200:
                    raise _environment(f"GET {source}: HTTP {response.status_code}",
                                       "check --cert (the controller serves /v1/cert.pem)")
                return body
        except httpx.HTTPError as e:
            raise _environment(f"GET {source}: {e}", "check --cert and that the controller is reachable") from None
    try:
        return Path(source).read_bytes()[:MAX_MATERIAL]
    except OSError as e:
        raise _fail(source, f"cannot read the certificate: {e.strerror}") from None


async def _cert_from_cluster(kube: Kube, name: str, namespace: str) -> bytes:
    """The certificate as kubeseal fetches it: the controller's Service's first port, through the API server's
    service proxy (GET .../services/http:NAME:PORT/proxy/v1/cert.pem)."""
    service = await kube.get(SERVICE, name, namespace)
    if service is None:
        raise _environment(f"no Service {namespace}/{name}: the SealedSecrets controller's certificate cannot be "
                           "fetched", "pass --controller-name/--controller-namespace, or --cert FILE|URL")
    ports = (service.get("spec") or {}).get("ports") or [{}]
    port = ports[0].get("name") or str(ports[0].get("port", ""))
    path = f"/api/v1/namespaces/{namespace}/services/http:{name}:{port}/proxy/v1/cert.pem"
    response = await kube.http.get(path)
    if response.status_code != 200:
        raise _environment(f"GET {path}: HTTP {response.status_code}",
                           "is the SealedSecrets controller running? Or pass --cert FILE|URL")
    return bytes(response.content[:MAX_MATERIAL])


# --- the gate, predicted -------------------------------------------------------------------------------------------

async def _users(kube: Kube, argocd_namespace: str) -> list[gate.User]:
    """What the operator's gate counts as users: Argo CD's Applications, our Deployments (lifecycle.users)."""
    from controller_runtime.client import ALL_NAMESPACES
    from controller_runtime.errors import KubeError
    from renderer.names import MANAGED_BY, MANAGED_BY_LABEL

    try:
        argo, _ = await kube.list(ARGO_APPLICATION, argocd_namespace)
    except KubeError as e:
        if e.code != 404:
            raise
        argo = []  # Argo CD is not installed: no Application syncs anything
    deployments, _ = await kube.list(DEPLOYMENT, ALL_NAMESPACES, {MANAGED_BY_LABEL: MANAGED_BY})
    return users(argo, deployments)


def _predicted(live: Mapping[str, Any] | None, desired: gate.Coverage | None,
               found: list[gate.User]) -> Plan | None:
    """The credential-scope plan the operator will make of this change (None when nothing is held)."""
    if live is None:
        return None
    meta = live["metadata"]
    result = gate.credential_plan(meta["name"], meta["namespace"], gate.applied_coverage(live.get("status")),
                                  desired, found)
    return result if result is not None and result.gated else None


def _waits(result: Plan, namespace: str) -> str:
    assert result.approved_spec_hash is not None
    wanted = plan_name(result)
    return (f"waits for MigrationPlan {wanted} (approvedSpecHash {result.approved_spec_hash}): "
            f"{'; '.join(c.reason for c in result.gated_changes)}; approve it with "
            f"`{approve_command(wanted, namespace)}`")


# --- add -----------------------------------------------------------------------------------------------------------

@creds.command()
@kube_options
@click.argument("name")
@click.option("--git-prefix", "git_prefixes", multiple=True, metavar="PREFIX",
              help="A repository URL prefix Argo CD gets the login for ([http(s)://]host[:port][/path/]; repeatable).")
@click.option("--registry-host", "registry_hosts", multiple=True, metavar="HOST",
              help="A registry host[:port][/path/] the workloads pull from with the login (repeatable).")
@click.option("--registry-namespace", "registry_namespaces", multiple=True, metavar="NS",
              help="A namespace whose workloads may pull with the login (repeatable); a registry half needs this or "
              "--registry-all-namespaces.")
@click.option("--registry-all-namespaces", is_flag=True,
              help="Every namespace's workloads may pull with the login (anyone who may write an Application can).")
@click.option("--from-secret", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
              help="A Secret manifest holding username and password (stringData or data).")
@click.option("--username", metavar="USER", help="The login's user name (with --password-stdin).")
@click.option("--password-stdin", is_flag=True, help="Read the password (or token) from stdin, one line.")
@click.option("--cert", metavar="FILE|URL",
              help="The SealedSecrets certificate (default: fetched from the controller, as kubeseal does).")
@click.option("--controller-name", default=CONTROLLER_NAME, show_default=True,
              help="The SealedSecrets controller's Service.")
@click.option("--controller-namespace", default=CONTROLLER_NAMESPACE, show_default=True,
              help="The SealedSecrets controller's namespace.")
@click.option("--upsert", is_flag=True, help="Replace an existing credential (a rotation, or a coverage change: one "
              "that takes coverage from an Application waits for a MigrationPlan).")
@click.option("--argocd-namespace", default="argocd", show_default=True,
              help="Where Argo CD's Applications are (for the gate's prediction).")
@namespace_option(f"The operator's namespace (default {RECORDS}).")
@output_option("repo creds add", help="text: write them to the cluster; yaml: print the SealedSecret and the "
               "SourceCredential (for a config repository), write nothing.")
@reported
def add(kubeconfig: Path | None, kube_context: str | None, name: str, git_prefixes: tuple[str, ...],
        registry_hosts: tuple[str, ...], registry_namespaces: tuple[str, ...], registry_all_namespaces: bool,
        from_secret: Path | None, username: str | None, password_stdin: bool, cert: str | None,
        controller_name: str, controller_namespace: str, upsert: bool, argocd_namespace: str,
        namespace: str | None, output: str) -> None:
    """Seal a login and declare what it covers: the SealedSecret NAME (a kubernetes.io/basic-auth Secret once
    unsealed) and the SourceCredential NAME naming it. A registry half says where its pull secret may go:
    --registry-namespace NS (repeatable) or --registry-all-namespaces."""
    namespace = namespace or RECORDS
    scope = _scope(registry_hosts, registry_namespaces, registry_all_namespaces)
    if from_secret is not None and (username is not None or password_stdin):
        raise _fail("--from-secret", "excludes --username/--password-stdin: the login comes from one place")
    if from_secret is None and not (username and password_stdin):
        raise _fail("--from-secret/--password-stdin", "the login: --from-secret FILE, or --username USER "
                    "--password-stdin (never on the command line)")
    if username is not None:
        _one_line(username, "--username", "username")
    login = _from_secret(from_secret) if from_secret is not None else (str(username), _password_from_stdin())

    def sealed(pem: bytes, source: str) -> list[dict[str, Any]]:
        from lifecycle.credentials.sealing import certificate_key, credential_objects

        objects = credential_objects(certificate_key(pem, source), name, namespace, *login, git_prefixes,
                                     registry_hosts, scope)
        _checked(objects[1], namespace)
        return objects

    if cert and output == "yaml":  # for a config repository: no cluster needed
        from renderer.emit import dump_stream

        sys.stdout.write(dump_stream(sealed(_cert_from(cert), cert)))
        return
    given = sealed(_cert_from(cert), cert) if cert else None

    async def run(kube: Kube, _: str) -> None:
        objects = given or sealed(await _cert_from_cluster(kube, controller_name, controller_namespace),
                                  f"service {controller_namespace}/{controller_name}")
        if output == "yaml":
            from renderer.emit import dump_stream

            sys.stdout.write(dump_stream(objects))
            return
        await _write(kube, objects, upsert, argocd_namespace)

    with_cluster(kubeconfig, kube_context, run)


def _scope(hosts: tuple[str, ...], namespaces: tuple[str, ...], every: bool) -> tuple[str, ...] | None:
    """The registry half's namespaces (None: every namespace), said explicitly, as kubectl's -n / -A: an unscoped
    half lets any team that may write an Application pull with the login, so it is never the silent default."""
    where = "--registry-namespace/--registry-all-namespaces"
    if not hosts and (namespaces or every):
        raise _fail(where, "scope a registry half: give them with --registry-host")
    if namespaces and every:
        raise _fail(where, "one or the other: the namespaces listed, or every namespace")
    if hosts and not namespaces and not every:
        raise _fail(where, "a registry half needs its scope: --registry-namespace NS (repeatable) for the namespaces "
                    "whose workloads may pull with the login, or --registry-all-namespaces for every namespace (then "
                    "anyone who may write an Application can pull with it)")
    return namespaces if namespaces else None


def _checked(credential: dict[str, Any], namespace: str) -> None:
    """The SourceCredential's rules (lifecycle.credentials.spec.check) before anything is sealed into the cluster."""
    problems = check(credential, namespace)
    if problems:
        if credential["spec"] == {}:
            problems = [("--git-prefix/--registry-host", "at least one: a SourceCredential covers git, registry "
                         "or both")]
        raise UserError([Problem(field, 0, 0, "", reason) for field, reason in problems])


async def _write(kube: Kube, objects: list[dict[str, Any]], upsert: bool, argocd_namespace: str) -> None:
    from controller_runtime.errors import KubeError

    sealed, credential = objects
    meta = credential["metadata"]
    where = f"sourcecredential/{meta['name']}"
    try:
        await kube.resource(SEALED_SECRET)
    except KubeError as e:
        if e.code != 404:
            raise
        raise _environment("the cluster serves no SealedSecret kind (bitnami.com/v1alpha1)",
                           "install the SealedSecrets controller (docs/private-sources.md)") from None
    live = await kube.get(SOURCE_CREDENTIAL, meta["name"], meta["namespace"])
    if not upsert and (live is not None or await kube.get(SEALED_SECRET, meta["name"], meta["namespace"])):
        raise _fail(where, f"exists in namespace {meta['namespace']}: pass --upsert to replace its material and "
                    "coverage")
    held = _predicted(live, gate.coverage_of(read(credential)), await _users(kube, argocd_namespace))
    try:
        await kube.apply(sealed)
        await kube.apply(credential)
    except KubeError as e:
        raise refused(e, where, "changed while writing it: retry") from None
    verb = "configured" if live is not None else "created"
    sys.stdout.write(f"sealedsecret/{meta['name']} {verb} (namespace {meta['namespace']})\n")
    sys.stdout.write(f"{where} {verb} (namespace {meta['namespace']})\n")
    if held is not None:
        sys.stdout.write(f"{where}: the coverage change {_waits(held, meta['namespace'])}\n")


# --- list ----------------------------------------------------------------------------------------------------------

def _valid(obj: Mapping[str, Any], half: str) -> str:
    """A half's column: its state, `NotPresent(<reason>)` when its material was not found, `-` when not declared."""
    found = [h for h in checks.reported(obj) if h.half == half]
    if not found:
        return "-"
    return f"{checks.NOT_PRESENT}({found[0].reason})" if found[0].state == checks.NOT_PRESENT else found[0].reason


def _scope_column(credential: Credential) -> str:
    """Where the registry half's pull secret may go: its namespaces, `<all>` (no scope), `-` (no registry half)."""
    if credential.registry is None:
        return "-"
    return ",".join(credential.registry.namespaces) if credential.registry.namespaces is not None else "<all>"


def _row(obj: Mapping[str, Any]) -> list[str]:
    credential = read(obj)
    return [obj["metadata"]["name"], ",".join(credential.git.covers) if credential.git else "-",
            ",".join(credential.registry.covers) if credential.registry else "-", _scope_column(credential),
            _valid(obj, "git"),
            _valid(obj, "registry"), (obj.get("status") or {}).get("migrationPlan") or "-",
            age(obj["metadata"].get("creationTimestamp"))]


@creds.command("list")
@kube_options
@namespace_option(f"The operator's namespace (default {RECORDS}).")
@output_option("repo creds list", help="text: a table; json: a v1 List of the SourceCredentials; yaml: the same.")
@reported
def list_creds(kubeconfig: Path | None, kube_context: str | None, namespace: str | None, output: str) -> None:
    """The SourceCredentials: what each covers (the registry half's NAMESPACES: `<all>` when unscoped), each half's
    state (Valid / Invalid / Unverified, or why its material is not Present) and the MigrationPlan a change waits
    for."""

    async def listed(kube: Kube, _: str) -> list[dict[str, Any]]:
        items, _version = await kube.list(SOURCE_CREDENTIAL, namespace or RECORDS)
        return items

    found = sorted(with_cluster(kubeconfig, kube_context, listed), key=lambda o: o["metadata"]["name"])
    if output == "json":
        sys.stdout.write(json.dumps({"apiVersion": "v1", "kind": "List", "items": [shown(o) for o in found]},
                                    indent=2) + "\n")
        return
    if not found:
        click.echo(f"No SourceCredentials found in namespace {namespace or RECORDS}.", err=True)
        return
    sys.stdout.write(table([["NAME", "GIT", "REGISTRY", "NAMESPACES", "GIT-VALID", "REGISTRY-VALID", "PLAN", "AGE"],
                            *map(_row, found)]))


# --- check ---------------------------------------------------------------------------------------------------------

async def _watch_until(kube: Kube, name: str, namespace: str, resource_version: str, deadline: float,
                       done: Any) -> dict[str, Any] | None:
    """Watch the credential from `resource_version` until `done(obj or None)` is true; None past the deadline."""
    import asyncio

    from controller_runtime.errors import KubeError

    loop = asyncio.get_running_loop()
    while loop.time() < deadline:
        try:
            remaining = max(1, int(deadline - loop.time()))
            async for kind, obj in kube.watch(SOURCE_CREDENTIAL, resource_version, namespace,
                                              server_timeout=remaining):
                if kind == "BOOKMARK" or obj.get("metadata", {}).get("name") != name:
                    resource_version = obj.get("metadata", {}).get("resourceVersion") or resource_version
                    continue
                resource_version = obj["metadata"]["resourceVersion"]
                gone = kind == "DELETED"
                if done(None if gone else obj):
                    return {} if gone else obj
        except KubeError as e:
            if e.code != 410:
                raise
            live = await kube.get(SOURCE_CREDENTIAL, name, namespace)
            if done(live):
                return live or {}
            resource_version = live["metadata"]["resourceVersion"] if live else "0"
    return None


def _unseal_failure(sealed: Mapping[str, Any] | None) -> str:
    """What the SealedSecrets controller says of a SealedSecret it could not unseal ("" when it did or is silent)."""
    if sealed is None:
        return " (no SealedSecret of that name either)"
    synced = find_condition((sealed.get("status") or {}).get("conditions"), "Synced")
    if synced.get("status") == "False":
        return f" (the SealedSecrets controller: {str(synced.get('message', ''))[:300]})"
    return ""


def _half_lines(obj: Mapping[str, Any], unsealing: str = "") -> tuple[list[str], int]:
    """Each half's result, one line each, and the exit code they add up to; `unsealing` is what the SealedSecrets
    controller said of a material not Present."""
    halves = checks.reported(obj)
    lines = [f"{h.half}: not Present ({h.reason}): {h.message}{unsealing}" if h.state == checks.NOT_PRESENT
             else f"{h.half}: {h.reason} (checked {h.last_validated or 'never'}): {h.message}" for h in halves]
    return lines, {checks.VALID: 0, checks.INVALID: CHECK_INVALID}.get(checks.outcome(halves), CHECK_UNTOLD)


async def _unsealing(kube: Kube, obj: Mapping[str, Any]) -> str:
    """What the SealedSecrets controller says of the credential's SealedSecret when a half's material is missing."""
    from controller_runtime.errors import KubeError

    credential = read(obj)
    names = {h.backend.sealed_secret for h in (credential.git, credential.registry) if h and h.backend.sealed_secret}
    halves = {h: by_type(((obj.get("status") or {}).get(h) or {}).get("conditions")) for h in ("git", "registry")}
    missing = [h for h, found in halves.items() if found and (found.get("Present") or {}).get("status") != "True"]
    if not missing or len(names) != 1:
        return ""
    try:
        return _unseal_failure(await kube.get(SEALED_SECRET, names.pop(), obj["metadata"]["namespace"]))
    except KubeError as e:
        if e.code != 404:
            raise
        return " (the cluster serves no SealedSecret kind: nothing unseals the material)"


@creds.command("check")
@kube_options
@click.argument("name")
@namespace_option(f"The operator's namespace (default {RECORDS}).")
@click.option("--timeout", type=click.FloatRange(min=1), default=120.0, show_default=True, metavar="SECONDS",
              help="How long to wait for the operator's answer.")
@reported
def check_creds(kubeconfig: Path | None, kube_context: str | None, name: str, namespace: str | None,
                timeout: float) -> None:
    """Have the operator check NAME's halves now (against the repositories and registries) and print each result.
    Exit 0: every half Valid; 3: a half Invalid (refused); 4: none refused, one Unverified or its material not
    Present; 1 and 2 as every command."""
    namespace = namespace or RECORDS
    request = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{uuid.uuid4().hex[:8]}"

    async def run(kube: Kube, _: str) -> tuple[dict[str, Any], str]:
        import asyncio

        from controller_runtime.errors import KubeError

        live = await kube.get(SOURCE_CREDENTIAL, name, namespace)
        if live is None:
            raise _fail(f"sourcecredential/{name}", f"not found in namespace {namespace} "
                        "(`apprafter repo creds list` shows them)")
        try:
            patched = await kube.merge(SOURCE_CREDENTIAL, name, namespace, {"metadata": {"annotations": {
                checks.CHECK_REQUEST_ANNOTATION: request}}})
        except KubeError as e:
            raise refused(e, f"sourcecredential/{name}", "changed while requesting the check: retry") from None
        deadline = asyncio.get_running_loop().time() + timeout
        answered = await _watch_until(kube, name, namespace, patched["metadata"]["resourceVersion"], deadline,
                                      lambda obj: obj is None or (obj.get("status") or {}).get("checkRequest")
                                      == request)
        if answered is None:
            held = (patched.get("status") or {}).get("migrationPlan")
            why = f" (a change waits for MigrationPlan {held}: nothing is checked until then)" if held else ""
            raise _environment(f"sourcecredential/{name}: the operator did not answer the check within {timeout:g}s"
                               f"{why}", "is the operator running? (`kubectl -n apprafter-system get pods`)")
        if not answered:
            raise _fail(f"sourcecredential/{name}", "deleted while it was being checked")
        return answered, await _unsealing(kube, answered)

    answered, unsealing = with_cluster(kubeconfig, kube_context, run)
    lines, code = _half_lines(answered, unsealing)
    sys.stdout.write("".join(f"sourcecredential/{name} {line}\n" for line in lines))
    sys.exit(code)


# --- remove --------------------------------------------------------------------------------------------------------

@creds.command("remove")
@kube_options
@click.argument("name")
@namespace_option(f"The operator's namespace (default {RECORDS}).")
@click.option("--argocd-namespace", default="argocd", show_default=True,
              help="Where Argo CD's Applications are (for the gate's prediction).")
@click.option("--timeout", type=click.FloatRange(min=0), default=60.0, show_default=True, metavar="SECONDS",
              help="How long to wait for the operator to remove it or hold it (0: do not wait).")
@reported
def remove(kubeconfig: Path | None, kube_context: str | None, name: str, namespace: str | None,
           argocd_namespace: str, timeout: float) -> None:
    """Delete the SourceCredential NAME (its SealedSecret stays). When Applications use what it covers, the
    deletion waits for a MigrationPlan: its name and hash are printed before the deletion, then whether the
    operator removed it or holds it."""
    namespace = namespace or RECORDS
    where = f"sourcecredential/{name}"

    async def run(kube: Kube, _: str) -> None:
        import asyncio

        from controller_runtime.errors import KubeError

        live = await kube.get(SOURCE_CREDENTIAL, name, namespace)
        if live is None:
            raise _fail(where, f"not found in namespace {namespace} (`apprafter repo creds list` shows them)")
        held = _predicted(live, None, await _users(kube, argocd_namespace))
        wanted = plan_name(held) if held is not None else None
        if held is not None:
            sys.stdout.write(f"{where}: the deletion {_waits(held, namespace)}\n")
        else:
            sys.stdout.write(f"{where}: no Application loses coverage: removed at once\n")
        sys.stdout.flush()
        try:
            await kube.delete(SOURCE_CREDENTIAL, name, namespace)
        except KubeError as e:
            if e.code == 404:
                raise _fail(where, "already gone") from None
            raise refused(e, where, "changed while deleting it: retry") from None
        if timeout == 0:
            return
        deadline = asyncio.get_running_loop().time() + timeout
        done = await _watch_until(kube, name, namespace, live["metadata"]["resourceVersion"], deadline,
                                  lambda obj: obj is None or bool((obj.get("status") or {}).get("migrationPlan")))
        if done is None:
            raise _environment(f"{where}: the operator neither removed nor held it within {timeout:g}s",
                               "is the operator running? (`kubectl -n apprafter-system get pods`)")
        if not done:
            sys.stdout.write(f"{where} deleted (namespace {namespace})\n")
            return
        plan = done["status"]["migrationPlan"]
        said = "" if plan == wanted else f" (not the predicted {wanted}: the Applications changed meanwhile)"
        sys.stdout.write(f"{where} held for MigrationPlan {plan}{said} (namespace {namespace})\n")

    with_cluster(kubeconfig, kube_context, run)
