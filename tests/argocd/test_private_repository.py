"""A private repository synced by the real Argo CD through the repo-creds a SourceCredential derives, and nothing
else: the repository on the bed's Basic-auth git HTTP server, the login in the Secret the SealedSecrets controller
would unseal, the operator deriving the template in Argo CD's namespace. Argo CD's own precedence holds with ours
beside hand-made ones (the longest template wins, a repository Secret overrides any template); removing the
credential waits for its MigrationPlan, and once approved Argo CD's hard refresh fails in its own words
(`failed to list refs: authentication required`). Scoped to an Argo CD project (spec.git.projects), the credential
derives a project-scoped repository Secret in place of the template: the project's Application still syncs, an
Application of another project naming the same repository gets no login. No password in any log of the loop, in an
Event or in a status."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from lifecycle.credentials.outputs import CREDENTIAL_LABEL
from tests.argocd.objects import APP_FILE, HELLO, PROD
from tests.reconciler.helpers import API, events, plan_phase, plans, wait
from tests.testbed.argocd import conditions, sync_status
from tests.testbed.gitops import DEPLOY, GitOpsLoop
from tests.testbed.gitserver import GitHttpServer, start_git_http_server
from tests.testbed.procs import log_files

pytestmark = pytest.mark.gitops

APP = "private"
OTHER = "other-team"  # an Argo CD Application of the tenant project naming the same private repository
TENANTS = "apprafter-tenants"
USER = "deploy"
PASSWORD = f"pw-{uuid.uuid4().hex}"  # grepped for in every log the loop wrote
WRONG = f"wrong-{uuid.uuid4().hex}"
SECRET_TYPE = "argocd.argoproj.io/secret-type"


class Private:
    """The private repository and what reaches it: its server, its URL, the commit Argo CD must sync."""

    def __init__(self, server: GitHttpServer, url: str, revision: str) -> None:
        self.server, self.url, self.revision = server, url, revision


@pytest.fixture(scope="module")
def private(loop: GitOpsLoop, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Private]:
    revision = loop.git.create("myorg/shop", {APP_FILE: HELLO})
    server = start_git_http_server(loop.git.base, tmp_path_factory.mktemp("git-http"), USER, PASSWORD)
    try:
        yield Private(server, server.url("myorg/shop"), revision)
    finally:
        server.stop()


def _credential(loop: GitOpsLoop, prefixes: list[str], projects: list[str] | None = None) -> dict[str, Any]:
    git: dict[str, Any] = {"backend": {"sealedSecretRef": {"name": "myorg-login"}}, "repoPrefixes": prefixes}
    if projects is not None:
        git["projects"] = projects
    return {"apiVersion": API, "kind": "SourceCredential",
            "metadata": {"name": "myorg", "namespace": loop.operator.records_namespace}, "spec": {"git": git}}


def _argocd_secrets(loop: GitOpsLoop) -> list[dict[str, Any]]:
    """Every Secret Argo CD reads as a repository or a template, in its namespace."""
    resp = loop.kube.http.get(f"/api/v1/namespaces/{loop.argocd.namespace}/secrets",
                              params={"labelSelector": SECRET_TYPE})
    resp.raise_for_status()
    return list(resp.json()["items"])


def _ours(loop: GitOpsLoop) -> list[dict[str, Any]]:
    return [s for s in _argocd_secrets(loop) if (s["metadata"].get("labels") or {}).get(CREDENTIAL_LABEL) == "myorg"]


def _hand_made(loop: GitOpsLoop, name: str, kind: str, url: str, password: str) -> None:
    """A Secret a person writes for Argo CD (`kubectl create secret` + label): a template or a repository."""
    loop.kube.apply({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                     "metadata": {"name": name, "namespace": loop.argocd.namespace, "labels": {SECRET_TYPE: kind}},
                     "stringData": {"type": "git", "url": url, "username": USER, "password": password}},
                    field_manager="kubectl-create")


def _comparison_error(app: dict[str, Any]) -> str | None:
    found = conditions(app, "ComparisonError")
    return str(found[0]["message"]) if found else None


def _compared(loop: GitOpsLoop, private: Private, ok: bool, what: str, name: str = APP) -> dict[str, Any]:
    """Hard-refresh the Application (Argo CD lists the refs anew, with the credential it picks now) until the
    comparison succeeds (Synced/Healthy at the commit, no ComparisonError) or fails with a ComparisonError. Each
    refresh follows the last one's result: the controller may have compared before its informer saw a Secret
    change, and nothing else makes it look again. A hard refresh passes Argo CD's repo-server caches (refs and
    manifests are cached by URL and revision, not by login): the clone is made with the login Argo CD picks for the
    Application's project now."""
    loop.argocd.refresh(name, "hard")

    def done(app: dict[str, Any]) -> bool:
        if "argocd.argoproj.io/refresh" in (app["metadata"].get("annotations") or {}):
            return False  # not compared yet
        error = _comparison_error(app)
        if (error is None and sync_status(app) == ("Synced", "Healthy", private.revision)) if ok else error:
            return True
        loop.argocd.refresh(name, "hard")
        return False

    return loop.wait(name, what, done)


@pytest.fixture(scope="module")
def synced(loop: GitOpsLoop, private: Private) -> dict[str, Any]:
    """The credential's material and spec applied, the template derived, the Application synced through it."""
    records = loop.operator.records_namespace
    assert _argocd_secrets(loop) == []  # nothing but what the credential derives
    loop.kube.apply({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/basic-auth",
                     "metadata": {"name": "myorg-login", "namespace": records},
                     "stringData": {"username": USER, "password": PASSWORD}},
                    field_manager="sealed-secrets-controller")  # what the controller unseals from the SealedSecret
    loop.kube.apply(_credential(loop, [private.server.url("myorg/")]))
    wait("the derived repo-creds", lambda: _ours(loop) or None, timeout=60)
    app = loop.application(APP, "unused", PROD, environment="prod")
    app["spec"]["source"]["repoURL"] = private.url
    loop.argocd.apply(app)
    return loop.wait_health(APP, private.revision, "Healthy")


def test_argo_cd_syncs_the_private_repository_through_the_derived_template_only(
        loop: GitOpsLoop, private: Private, synced: dict[str, Any]) -> None:
    assert sync_status(synced) == ("Synced", "Healthy", private.revision)
    assert synced["spec"]["source"]["repoURL"] == private.url and "@" not in private.url
    [template] = _argocd_secrets(loop)  # the only credential Argo CD has anywhere is ours
    assert template["metadata"]["labels"][SECRET_TYPE] == "repo-creds"
    assert base64.b64decode(template["data"]["url"]).decode() == private.server.url("myorg/")
    assert "hello" in [r["name"] for r in synced["status"]["resources"]]
    requests = private.server.log.read_text().splitlines()
    assert any(line.endswith(" authorized") for line in requests)  # Argo CD came with the login ...
    assert loop.apprafter_application("hello", PROD) is not None  # ... and rendered through our plugin


def test_argo_cds_precedence_holds_beside_hand_made_secrets(loop: GitOpsLoop, private: Private,
                                                            synced: dict[str, Any]) -> None:
    try:
        # a longer hand-made template with a wrong password wins over ours
        _hand_made(loop, "hand-shop", "repo-creds", private.server.url("myorg/shop"), WRONG)
        failed = _compared(loop, private, False, "refused with the longer (hand-made) template")
        assert "authentication required" in str(_comparison_error(failed))
        # a shorter one with a wrong password loses to ours: once Argo CD has seen hand-shop go (written after
        # hand-host, so its informer holds hand-host too), ours serves the clone
        _hand_made(loop, "hand-host", "repo-creds", private.server.url(), WRONG)
        loop.kube.delete("v1", "Secret", "hand-shop", loop.argocd.namespace)
        _compared(loop, private, True, "synced through ours, the longer of the two left")
        # a repository Secret of the repository itself overrides every template, ours included; written with a
        # `.git` the Application's URL has not, it is the same repository to Argo CD (lifecycle.credentials.git_urls)
        _hand_made(loop, "hand-repository", "repository", f"{private.url}.git", WRONG)
        failed = _compared(loop, private, False, "refused with the repository Secret")
        assert "authentication required" in str(_comparison_error(failed))
        loop.kube.delete("v1", "Secret", "hand-repository", loop.argocd.namespace)
        _compared(loop, private, True, "synced through ours once the repository Secret is gone")
    finally:
        for name in ("hand-host", "hand-shop", "hand-repository"):
            loop.kube.delete("v1", "Secret", name, loop.argocd.namespace)


def _decoded(secret: dict[str, Any]) -> dict[str, str]:
    """A derived Secret's fields but the login (never read back out in a test's output)."""
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items() if k not in ("username", "password")}


def test_scoped_to_a_project_the_login_serves_that_projects_applications_only(
        loop: GitOpsLoop, private: Private, synced: dict[str, Any]) -> None:
    # absent -> [default]: no Application of another project syncs under the prefix yet, so nothing waits for a plan
    loop.kube.apply(_credential(loop, [private.server.url("myorg/")], ["default"]))

    def scoped() -> list[dict[str, Any]] | None:
        ours = _ours(loop)
        return ours if [s["metadata"]["labels"][SECRET_TYPE] for s in ours] == ["repository"] else None

    [repository] = wait("the template replaced by a project-scoped repository Secret", scoped, timeout=60)
    assert _decoded(repository) == {"type": "git", "url": private.url, "project": "default"}
    _compared(loop, private, True, "synced through the project-scoped repository Secret")

    project = yaml.safe_load((DEPLOY / "tenant-project.yaml").read_text())
    project["metadata"]["namespace"] = loop.argocd.namespace
    loop.kube.apply(project, field_manager="platform-admin")
    other = loop.application(OTHER, "unused", PROD, environment="prod")
    other["spec"]["project"] = TENANTS
    other["spec"]["source"]["repoURL"] = private.url
    del other["spec"]["syncPolicy"]  # compared only: nothing of it is ever applied
    try:
        loop.argocd.apply(other)
        failed = _compared(loop, private, False, "the other project's Application refused by the git server", OTHER)
        message = str(_comparison_error(failed))
        assert "failed to list refs: authentication required" in message, message
        # nothing derived for the tenant project, and nobody lost anything: no plan
        assert [s["metadata"]["name"] for s in _ours(loop)] == [repository["metadata"]["name"]]
        credential = loop.kube.get(API, "SourceCredential", "myorg", loop.operator.records_namespace)
        assert credential is not None and credential["status"]["git"]["projects"] == ["default"]
        assert not credential["status"].get("migrationPlan")
        _compared(loop, private, True, "the project's own Application still synced")
    finally:
        loop.kube.delete("argoproj.io/v1alpha1", "Application", OTHER, loop.argocd.namespace)


def test_removing_the_credential_waits_for_its_plan_then_argo_cd_says_authentication(
        loop: GitOpsLoop, private: Private, synced: dict[str, Any]) -> None:
    records = loop.operator.records_namespace
    loop.kube.delete(API, "SourceCredential", "myorg", records)

    def pending() -> dict[str, Any] | None:
        found = [p for p in plans(loop.kube, records)
                 if (p["metadata"].get("labels") or {}).get(CREDENTIAL_LABEL) == "myorg"
                 and plan_phase(loop.kube, records, p["metadata"]["name"]) == "pending-approval"]
        return found[0] if found else None

    plan = wait("the deletion's MigrationPlan", pending, timeout=60)
    assert f"Argo CD Application {loop.argocd.namespace}/{APP}" in json.dumps(plan["spec"]["changes"])
    assert _ours(loop), "the repo-creds went before the plan was approved"
    _compared(loop, private, True, "still synced while the plan waits")

    approved = loop.approve(plan["metadata"]["name"], records)
    assert approved.returncode == 0, approved.stderr
    wait("the credential gone", lambda: loop.kube.get(API, "SourceCredential", "myorg", records) is None or None,
         timeout=60)
    assert _argocd_secrets(loop) == []
    failed = _compared(loop, private, False, "Argo CD's ComparisonError without the credential")
    message = str(_comparison_error(failed))
    assert "failed to list refs: authentication required" in message, message  # go-git's words for the 401

    said = json.dumps([events(loop.kube, ns) for ns in (records, loop.argocd.namespace, PROD)])
    said += json.dumps(failed.get("status")) + json.dumps(plans(loop.kube, records))
    assert PASSWORD not in said and WRONG not in said
    logs = _loop_logs(loop, private)
    assert {"operator", "argocd", "git-http"} <= {kind for kind in _kinds(logs)}, logs
    for log in logs:
        text = log.read_text(errors="replace")
        assert PASSWORD not in text and WRONG not in text, f"material in {log}"


def _loop_logs(loop: GitOpsLoop, private: Private) -> list[Path]:
    """Every log the loop and the bed's API server wrote."""
    roots = {p.log_path.parent for p in loop.kube.processes} | {loop.argocd.workdir.parent,  # the loop's own
                                                                 private.server.log.parent}
    return log_files(*roots)


def _kinds(logs: list[Path]) -> set[str]:
    return {kind for log in logs for kind in ("operator", "argocd", "git-http") if kind in str(log)}
