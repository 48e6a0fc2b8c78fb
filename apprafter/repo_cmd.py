"""`apprafter repo creds add | list | check | remove`: SourceCredentials and their sealed material (spec §4.12).

The commands' wiring: the login and the certificate are read by apprafter.repo_login and sealed by
lifecycle.credentials.sealing; the plan a change waits on is predicted by apprafter.repo_gate (the operator's own
function); the operator's answer is waited for through apprafter.cluster.wait_for. The login is never printed, logged
or put in an error: only the SealedSecret carries it, sealed."""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import click

from apprafter.cluster import print_objects, refused, wait_for, with_cluster
from apprafter.errors import reported
from apprafter.kube_options import kube_options
from apprafter.options import namespace_option, output_option
from apprafter.repo_gate import predicted, waits
from apprafter.repo_login import (
    cert_from,
    cert_from_cluster,
    environment,
    fail,
    login_from_secret,
    one_line,
    password_from_stdin,
)
from apprafter.repo_status import SEALED_SECRET, half_lines, row, unsealing
from compatibility.migrationplan import name as plan_name
from lifecycle.credentials.checks import CHECK_REQUEST_ANNOTATION
from lifecycle.credentials.spec import SOURCE_CREDENTIAL, check
from toolchain.errors import Problem, UserError

if TYPE_CHECKING:  # the client is imported when a command runs: `--help` never pays for it
    from controller_runtime.client import Kube

__all__ = ["repo"]

RECORDS = "apprafter-system"  # the operator's namespace, where SourceCredentials live
# kubeseal's defaults (--controller-name, --controller-namespace)
CONTROLLER_NAME, CONTROLLER_NAMESPACE = "sealed-secrets-controller", "kube-system"


@click.group()
def repo() -> None:
    """Private repositories and registries (docs/private-sources.md)."""


@repo.group()
def creds() -> None:
    """SourceCredentials: one sealed login covering git repository prefixes and registry hosts."""


# --- add -----------------------------------------------------------------------------------------------------------

@creds.command()
@kube_options
@click.argument("name")
@click.option("--git-prefix", "git_prefixes", multiple=True, metavar="PREFIX",
              help="A repository URL prefix Argo CD gets the login for ([http(s)://]host[:port][/path/]; repeatable).")
@click.option("--project", "projects", multiple=True, metavar="PROJECT",
              help="An Argo CD project whose Applications get the git login (repeatable); a git half needs this or "
              "--all-projects. Scoped, the operator derives a project-scoped repository Secret per repository an "
              "Application of the project syncs instead of a template.")
@click.option("--all-projects", is_flag=True,
              help="Every Argo CD project's Applications get the git login (a repo-creds template, as Argo CD's own).")
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
        projects: tuple[str, ...], all_projects: bool, registry_hosts: tuple[str, ...],
        registry_namespaces: tuple[str, ...], registry_all_namespaces: bool,
        from_secret: Path | None, username: str | None, password_stdin: bool, cert: str | None,
        controller_name: str, controller_namespace: str, upsert: bool, argocd_namespace: str,
        namespace: str | None, output: str) -> None:
    """Seal a login and declare what it covers: the SealedSecret NAME (a kubernetes.io/basic-auth Secret once
    unsealed) and the SourceCredential NAME naming it. Each half says whom it serves: a git half the Argo CD
    projects (--project P, repeatable, or --all-projects), a registry half where its pull secret may go
    (--registry-namespace NS, repeatable, or --registry-all-namespaces)."""
    namespace = namespace or RECORDS
    scope = _scope(REGISTRY_SCOPE, registry_hosts, registry_namespaces, registry_all_namespaces)
    git_scope = _scope(GIT_SCOPE, git_prefixes, projects, all_projects)
    if from_secret is not None and (username is not None or password_stdin):
        raise fail("--from-secret", "excludes --username/--password-stdin: the login comes from one place")
    if from_secret is None and not (username and password_stdin):
        raise fail("--from-secret/--password-stdin", "the login: --from-secret FILE, or --username USER "
                   "--password-stdin (never on the command line)")
    if username is not None:
        one_line(username, "--username", "username")
    login = login_from_secret(from_secret) if from_secret is not None else (str(username), password_from_stdin())

    def sealed(pem: bytes, source: str) -> list[dict[str, Any]]:
        from lifecycle.credentials.sealing import certificate_key, credential_objects

        objects = credential_objects(certificate_key(pem, source), name, namespace, *login, git_prefixes,
                                     registry_hosts, scope, git_scope)
        _checked(objects[1], namespace)
        return objects

    if cert and output == "yaml":  # for a config repository: no cluster needed
        from renderer.emit import dump_stream

        sys.stdout.write(dump_stream(sealed(cert_from(cert), cert)))
        return
    given = sealed(cert_from(cert), cert) if cert else None

    async def run(kube: Kube, _: str) -> None:
        objects = given or sealed(await cert_from_cluster(kube, controller_name, controller_namespace),
                                  f"service {controller_namespace}/{controller_name}")
        if output == "yaml":
            from renderer.emit import dump_stream

            sys.stdout.write(dump_stream(objects))
            return
        await _write(kube, objects, upsert, argocd_namespace)

    with_cluster(kubeconfig, kube_context, run)


class Scope(NamedTuple):
    """How a half's scope is said on the command line: its options, the option of its entries, and the words."""

    listed: str  # the option naming each (--project)
    metavar: str
    every: str  # the flag for all (--all-projects)
    entries: str  # the half's own option (--git-prefix)
    half: str
    names: str  # what is listed, plural
    needs: str  # why it is never the silent default


REGISTRY_SCOPE = Scope("--registry-namespace", "NS", "--registry-all-namespaces", "--registry-host", "registry half",
                       "namespaces", "whose workloads may pull with the login, or {every} for every namespace (then "
                       "anyone who may write an Application can pull with it)")
GIT_SCOPE = Scope("--project", "PROJECT", "--all-projects", "--git-prefix", "git half", "projects",
                  "whose Applications get the login, or {every} for every Argo CD project (then anyone who may make an "
                  "Argo CD Application in any project can clone with it)")


def _scope(scope: Scope, entries: tuple[str, ...], names: tuple[str, ...], every: bool) -> tuple[str, ...] | None:
    """A half's scope (None: all of them), said explicitly, as kubectl's -n / -A: an unscoped half serves every team,
    so it is never the silent default (issue 41: a git login offered to every Argo CD project)."""
    where = f"{scope.listed}/{scope.every}"
    if not entries and (names or every):
        raise fail(where, f"scope a {scope.half}: give them with {scope.entries}")
    if names and every:
        raise fail(where, f"one or the other: the {scope.names} listed, or every one")
    if entries and not names and not every:
        raise fail(where, f"a {scope.half} needs its scope: {scope.listed} {scope.metavar} (repeatable) for the "
                   f"{scope.names} "
                   + scope.needs.format(every=scope.every))
    return names if names else None


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
        raise environment("the cluster serves no SealedSecret kind (bitnami.com/v1alpha1)",
                          "install the SealedSecrets controller (docs/private-sources.md)") from None
    live = await kube.get(SOURCE_CREDENTIAL, meta["name"], meta["namespace"])
    if not upsert and (live is not None or await kube.get(SEALED_SECRET, meta["name"], meta["namespace"])):
        raise fail(where, f"exists in namespace {meta['namespace']}: pass --upsert to replace its material and "
                   "coverage")
    held = await predicted(kube, live, credential, argocd_namespace)
    try:
        await kube.apply(sealed)
        await kube.apply(credential)
    except KubeError as e:
        raise refused(e, where, "changed while writing it: retry") from None
    verb = "configured" if live is not None else "created"
    sys.stdout.write(f"sealedsecret/{meta['name']} {verb} (namespace {meta['namespace']})\n")
    sys.stdout.write(f"{where} {verb} (namespace {meta['namespace']})\n")
    if held is not None:
        sys.stdout.write(f"{where}: the coverage change {waits(held, meta['namespace'])}\n")


# --- list ----------------------------------------------------------------------------------------------------------

@creds.command("list")
@kube_options
@namespace_option(f"The operator's namespace (default {RECORDS}).")
@output_option("repo creds list", help="text: a table; json: a v1 List of the SourceCredentials; yaml: the same.")
@reported
def list_creds(kubeconfig: Path | None, kube_context: str | None, namespace: str | None, output: str) -> None:
    """The SourceCredentials: what each covers (the git half's Argo CD PROJECTS and the registry half's NAMESPACES:
    `<all>` when unscoped), each half's state (Valid / Invalid / Unverified, or why its material is not Present) and
    the MigrationPlan a change waits for."""

    async def listed(kube: Kube, _: str) -> list[dict[str, Any]]:
        items, _version = await kube.list(SOURCE_CREDENTIAL, namespace or RECORDS)
        return items

    found = sorted(with_cluster(kubeconfig, kube_context, listed), key=lambda o: o["metadata"]["name"])
    header = ["NAME", "GIT", "PROJECTS", "REGISTRY", "NAMESPACES", "GIT-VALID", "REGISTRY-VALID", "PLAN", "AGE"]
    print_objects(found, output, header, row, f"No SourceCredentials found in namespace {namespace or RECORDS}.")


# --- check ---------------------------------------------------------------------------------------------------------

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
        from controller_runtime.errors import KubeError

        live = await kube.get(SOURCE_CREDENTIAL, name, namespace)
        if live is None:
            raise fail(f"sourcecredential/{name}", f"not found in namespace {namespace} "
                       "(`apprafter repo creds list` shows them)")
        try:
            patched = await kube.merge(SOURCE_CREDENTIAL, name, namespace, {"metadata": {"annotations": {
                CHECK_REQUEST_ANNOTATION: request}}})
        except KubeError as e:
            raise refused(e, f"sourcecredential/{name}", "changed while requesting the check: retry") from None
        answered = await wait_for(kube, SOURCE_CREDENTIAL, name, namespace, lambda obj: obj is None or (
            obj.get("status") or {}).get("checkRequest") == request, timeout)
        if answered is None:
            held = (patched.get("status") or {}).get("migrationPlan")
            why = f" (a change waits for MigrationPlan {held}: nothing is checked until then)" if held else ""
            raise environment(f"sourcecredential/{name}: the operator did not answer the check within {timeout:g}s"
                              f"{why}", "is the operator running? (`kubectl -n apprafter-system get pods`)")
        if not answered:
            raise fail(f"sourcecredential/{name}", "deleted while it was being checked")
        return answered, await unsealing(kube, answered)

    answered, unsealed = with_cluster(kubeconfig, kube_context, run)
    lines, code = half_lines(answered, unsealed)
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
        from controller_runtime.errors import KubeError

        live = await kube.get(SOURCE_CREDENTIAL, name, namespace)
        if live is None:
            raise fail(where, f"not found in namespace {namespace} (`apprafter repo creds list` shows them)")
        held = await predicted(kube, live, None, argocd_namespace)
        wanted = plan_name(held) if held is not None else None
        if held is not None:
            sys.stdout.write(f"{where}: the deletion {waits(held, namespace)}\n")
        else:
            sys.stdout.write(f"{where}: no Application loses coverage: removed at once\n")
        sys.stdout.flush()
        try:
            await kube.delete(SOURCE_CREDENTIAL, name, namespace)
        except KubeError as e:
            if e.code == 404:
                raise fail(where, "already gone") from None
            raise refused(e, where, "changed while deleting it: retry") from None
        if timeout == 0:
            return
        done = await wait_for(kube, SOURCE_CREDENTIAL, name, namespace, lambda obj: obj is None or bool(
            (obj.get("status") or {}).get("migrationPlan")), timeout)
        if done is None:
            raise environment(f"{where}: the operator neither removed nor held it within {timeout:g}s",
                              "is the operator running? (`kubectl -n apprafter-system get pods`)")
        if not done:
            sys.stdout.write(f"{where} deleted (namespace {namespace})\n")
            return
        plan = done["status"]["migrationPlan"]
        said = "" if plan == wanted else f" (not the predicted {wanted}: the Applications changed meanwhile)"
        sys.stdout.write(f"{where} held for MigrationPlan {plan}{said} (namespace {namespace})\n")

    with_cluster(kubeconfig, kube_context, run)
