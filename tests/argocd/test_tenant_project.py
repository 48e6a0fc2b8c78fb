"""No way around the operator (issue 34) through the real Argo CD, as a tenant whose Argo CD Applications live in the
stack's tenant AppProject (deploy/argocd/tenant-project.yaml): a repository's `.argocd-source.yaml` (Argo CD's
repo-server merges it over the source) and an Application's `plugin.env` cannot switch the plugin's mode; a
repository that switches the source away from the plugin, or a plugin that emits a Deployment, is refused by the
project before anything is applied; the Argo CD annotations an Application may carry are the renderer's and the
webhook's one rule; a hostname the tenant's namespace may not use is refused at the sync by the webhook; the Approve
action runs only in a project that opted in to MigrationPlans. In every case Argo CD manages the `apprafter.io`
Application and nothing else, and the operator's children keep its controlling owner.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.argocd.objects import APP_FILE, HELLO, PROD
from tests.renderer.helpers import run_cli, write_app
from tests.testbed.argocd import ARGOCD_API, conditions, sync_status
from tests.testbed.cmp import CmpServer, start_cmp_server
from tests.testbed.gitops import APPROVER, DEPLOY, REPO, GitOpsLoop, plugin_path
from tests.testbed.kube import ApplyRejected

pytestmark = pytest.mark.gitops

PROJECT = "apprafter-tenants"
REPO_NAME = "tenant"
ARGOCD_SERVER = "system:serviceaccount:argocd-loop:argocd-server"
PLATFORMS = "how the plugin renders is the platform's setting, made in the sidecar's own configuration"
# A Deployment a hostile repository would have Argo CD apply itself: no owner, another team's Secret in its env.
THIEF = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "thief"},
         "spec": {"selector": {"matchLabels": {"app": "thief"}},
                  "template": {"metadata": {"labels": {"app": "thief"}},
                               "spec": {"containers": [{"name": "c", "image": "ghcr.io/acme/thief:1", "env": [
                                   {"name": "T", "valueFrom": {"secretKeyRef": {"name": "team-b", "key": "k"}}}]}]}}}}


def tenant_application(loop: GitOpsLoop) -> dict[str, Any]:
    """The tenant's Argo CD Application, of the tenant project: our plugin, prod, auto-synced with prune; its namespace
    is the administrator's (no CreateNamespace: a Namespace is cluster-scoped, which the project forbids)."""
    app = loop.application(PROD, REPO_NAME, PROD, environment="prod")
    app["spec"]["project"] = PROJECT
    del app["spec"]["syncPolicy"]["syncOptions"]
    # One attempt per revision: an automated sync is otherwise retried 5 times over minutes (v3.1 and v3.6), and a
    # commit that reverts the refused one waits for the retries to end.
    app["spec"]["syncPolicy"]["retry"] = {"limit": 0}
    return app


def managed(loop: GitOpsLoop, name: str) -> list[tuple[str, str, str, str]]:
    """What Argo CD manages for `name`: (group, kind, namespace, name) of its status.resources."""
    return [(r.get("group", ""), r["kind"], r.get("namespace", ""), r["name"])
            for r in loop.argocd.get(name)["status"].get("resources", [])]


def unowned_workloads(loop: GitOpsLoop, namespace: str) -> list[str]:
    """Deployments, ServiceAccounts and Services in `namespace` that no Application of ours controls, or that Argo CD
    wrote (a field manager of its own): what Argo CD would have applied itself."""
    out = []
    for api, kind in (("apps/v1", "Deployment"), ("v1", "ServiceAccount"), ("v1", "Service")):
        path = loop.kube.resource_for(api, kind).path(None, namespace)
        for item in loop.kube.http.get(path).json()["items"]:
            meta = item["metadata"]
            ours = any(o["kind"] == "Application" and o.get("controller") for o in meta.get("ownerReferences") or [])
            argo = any(m.get("manager", "").startswith("argocd") for m in meta.get("managedFields") or [])
            if meta["name"] != "default" and (argo or not ours):
                out.append(f"{kind}/{meta['name']}")
    return out


def refused_render(loop: GitOpsLoop, name: str, text: str) -> str:
    """Until Argo CD shows the plugin's refusal containing `text` as the app's ComparisonError; its message."""
    app = loop.wait(name, f"ComparisonError with {text!r}",
                    lambda a: any(text in c["message"] for c in conditions(a, "ComparisonError")))
    return str(next(c["message"] for c in conditions(app, "ComparisonError") if text in c["message"]))


def refused_by_project(app: dict[str, Any], revision: str) -> bool:
    """Argo CD's sync of `revision` was refused by the project."""
    state = app["status"].get("operationState") or {}
    synced = ((state.get("operation") or {}).get("sync") or {}).get("revision")
    return synced == revision and f"is not permitted in project {PROJECT}" in sync_messages(app)


def sync_messages(app: dict[str, Any]) -> str:
    """The last sync operation's message and every resource result's, one per line."""
    state = app["status"].get("operationState") or {}
    return "\n".join([state.get("message", ""), *(r.get("message", "") for r in
                                                    (state.get("syncResult") or {}).get("resources") or [])])


def remove(loop: GitOpsLoop, paths: list[str], message: str, *apps: str) -> str:
    """Commit the removal of `paths` from the tenant's repository and refresh `apps`; the new sha."""
    for path in paths:
        (loop.git.base / REPO_NAME / path).unlink()
    return loop.push(REPO_NAME, {}, message, *apps)


@pytest.fixture(scope="module")
def deployed(loop: GitOpsLoop) -> dict[str, Any]:
    """The tenant project as the stack ships it (in the loop's Argo CD namespace), and the tenant's app in it,
    Healthy: the operator made its children."""
    project = yaml.safe_load((DEPLOY / "tenant-project.yaml").read_text())
    project["metadata"]["namespace"] = loop.argocd.namespace
    loop.kube.apply(project, field_manager="platform-admin")
    loop.kube.ensure_namespace(PROD)  # the administrator's: the project's users cannot create namespaces
    revision = loop.git.create(REPO_NAME, {APP_FILE: HELLO})
    loop.argocd.apply(tenant_application(loop))
    loop.wait_health(PROD, revision, "Healthy")
    cr = loop.apprafter_application("hello", PROD)
    assert cr is not None
    return cr


def test_argo_cd_manages_the_application_alone_and_stamps_it(loop: GitOpsLoop, deployed: dict[str, Any]) -> None:
    assert managed(loop, PROD) == [("apprafter.io", "Application", PROD, "hello")]
    # Argo CD's repo-server stamped its tracking id on what it rendered; the webhook admitted that stamp.
    assert deployed["metadata"]["annotations"]["argocd.argoproj.io/tracking-id"] == (
        f"{PROD}:apprafter.io/Application:{PROD}/hello")
    assert unowned_workloads(loop, PROD) == []
    assert loop.kube.get("apps/v1", "Deployment", "hello", PROD) is not None  # the operator's


@pytest.mark.parametrize("override", [".argocd-source.yaml", f".argocd-source-{PROD}.yaml"])
def test_a_repository_cannot_switch_the_plugins_mode(loop: GitOpsLoop, deployed: dict[str, Any],
                                                     override: str) -> None:
    before = loop.apprafter_application("hello", PROD)
    assert before is not None
    switch = {"plugin": {"env": [{"name": "APPRAFTER_MODE", "value": "manifests"},
                                 {"name": "APPRAFTER_DOMAIN", "value": "evil.example"}]}}
    loop.push(REPO_NAME, {override: yaml.safe_dump(switch)}, "render the objects ourselves", PROD)
    message = refused_render(loop, PROD, PLATFORMS)
    assert "plugin env APPRAFTER_DOMAIN, APPRAFTER_MODE: " + PLATFORMS in message
    assert managed(loop, PROD) == [("apprafter.io", "Application", PROD, "hello")]
    assert unowned_workloads(loop, PROD) == []
    after = loop.apprafter_application("hello", PROD)
    assert after is not None and after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    back = remove(loop, [override], "no more overrides", PROD)
    loop.wait_health(PROD, back, "Healthy")


def test_an_application_edited_to_switch_the_mode_is_refused(loop: GitOpsLoop, deployed: dict[str, Any]) -> None:
    app = tenant_application(loop)
    edited = copy.deepcopy(app)
    edited["spec"]["source"]["plugin"]["env"] = [{"name": "apprafter_mode", "value": "manifests"}]
    loop.argocd.apply(edited)
    assert "plugin env apprafter_mode: " + PLATFORMS in refused_render(loop, PROD, PLATFORMS)
    assert managed(loop, PROD) == [("apprafter.io", "Application", PROD, "hello")]
    assert unowned_workloads(loop, PROD) == []
    loop.argocd.apply(app)  # the same field manager: the env goes again
    loop.argocd.refresh(PROD)
    loop.wait(PROD, "the render accepted again", lambda a: not conditions(a, "ComparisonError")
              and sync_status(a)[:2] == ("Synced", "Healthy"))


def test_a_repository_cannot_leave_the_plugin_for_its_own_manifests(loop: GitOpsLoop,
                                                                    deployed: dict[str, Any]) -> None:
    """`.argocd-source.yaml` is merged over the whole source but its repository, path, revision and chart: a
    repository asking for a directory of plain manifests. Argo CD keeps the plugin beside it (the merge cannot remove
    a field) and refuses "multiple application sources"; were it to render them, the project would refuse the
    Deployment. Either way nothing is applied and the Application stays."""
    switch = {"plugin": None, "directory": {"include": "thief.yaml"}}
    files = {".argocd-source.yaml": yaml.safe_dump(switch), "thief.yaml": yaml.safe_dump(THIEF)}
    revision = loop.push(REPO_NAME, files, "apply a Deployment ourselves", PROD)
    loop.wait(PROD, "the directory source refused", lambda a: any(
        "multiple application sources defined: Directory,Plugin" in c["message"]
        for c in conditions(a, "ComparisonError")) or refused_by_project(a, revision))
    assert loop.kube.get("apps/v1", "Deployment", "thief", PROD) is None
    kept = loop.apprafter_application("hello", PROD)
    assert kept is not None and kept["metadata"]["uid"] == deployed["metadata"]["uid"]
    back = remove(loop, [".argocd-source.yaml", "thief.yaml"], "back to the plugin", PROD)
    loop.wait_health(PROD, back, "Healthy")


def test_argo_cd_annotations_are_the_renderers_and_the_webhooks_one_rule(loop: GitOpsLoop, deployed: dict[str, Any],
                                                                          tmp_path: Path) -> None:
    annotated = HELLO.replace('metadata: name: "hello"', '''metadata: {
	name: "hello"
	annotations: {
		"argocd.argoproj.io/sync-wave":    "1"
		"argocd.argoproj.io/sync-options": "Delete=false,Replace=true"
	}
}''')
    write_app(tmp_path, annotated)
    local = run_cli("render", ".", "--env", "prod", cwd=tmp_path)
    (line,) = local.stderr.splitlines()
    assert line.startswith('apprafter/Application.cue:7:3: metadata.annotations."argocd.argoproj.io/sync-options": '
                           "sync option 'Replace=true' may not be set on an Application")
    loop.push(REPO_NAME, {APP_FILE: annotated}, "replace it on every sync", PROD)
    assert line in refused_render(loop, PROD, "sync option 'Replace=true'")
    kept = annotated.replace(",Replace=true", "")
    revision = loop.push(REPO_NAME, {APP_FILE: kept}, "keep it when the app is deleted", PROD)
    loop.wait_health(PROD, revision, "Healthy")
    cr = loop.apprafter_application("hello", PROD)
    assert cr is not None
    assert {k: v for k, v in cr["metadata"]["annotations"].items()
            if k.startswith("argocd.argoproj.io/") and k != "argocd.argoproj.io/tracking-id"} == {
        "argocd.argoproj.io/sync-wave": "1", "argocd.argoproj.io/sync-options": "Delete=false"}
    # Written around Argo CD (a metadata-only write): the webhook holds it to the same rule.
    hook = {"apiVersion": "apprafter.io/v1alpha1", "kind": "Application",
            "metadata": {"name": "hello", "namespace": PROD, "annotations": {"argocd.argoproj.io/hook": "Skip"}}}
    with pytest.raises(ApplyRejected) as refused:
        loop.kube.apply(hook, field_manager="kubectl-annotate")
    assert 'metadata.annotations."argocd.argoproj.io/hook": is an instruction to Argo CD' in str(refused.value)


def test_a_hostname_the_namespace_may_not_use_is_refused_at_the_sync(loop: GitOpsLoop,
                                                                     deployed: dict[str, Any]) -> None:
    """A push that asks for the platform's own name: Argo CD's apply of the Application is refused by the webhook
    (HostnameNotAllowed, the operator's one rule), the sync says why, and the deployed Application stays as it was."""
    squatting = HELLO.replace('expose: {port: 8080, network: "internal"}',
                              'expose: {port: 8080, network: "public", hostname: "argocd.apps.example.com"}')
    assert squatting != HELLO
    revision = loop.push(REPO_NAME, {APP_FILE: squatting}, "serve the platform's Argo CD name", PROD)

    def refused(app: dict[str, Any]) -> bool:
        state = app["status"].get("operationState") or {}
        synced = ((state.get("operation") or {}).get("sync") or {}).get("revision")
        return synced == revision and state.get("phase") in ("Failed", "Error") and \
            "HostnameNotAllowed" in sync_messages(app)

    app = loop.wait(PROD, "the sync refused with HostnameNotAllowed", refused)
    said = sync_messages(app)
    assert 'admission webhook "applications.apprafter.io" denied the request' in said, said
    assert "argocd.apps.example.com is the platform's own" in said, said
    cr = loop.apprafter_application("hello", PROD)
    assert cr is not None and cr["spec"]["base"]["expose"] == {"port": 8080, "network": "internal"}, cr["spec"]
    assert unowned_workloads(loop, PROD) == []
    revision = loop.push(REPO_NAME, {APP_FILE: HELLO}, "internal again", PROD)
    loop.wait_health(PROD, revision, "Healthy")


def test_the_approve_action_runs_only_in_a_project_that_opted_in(loop: GitOpsLoop, deployed: dict[str, Any]) -> None:
    source = loop.git.git(REPO_NAME, "show", f"HEAD:{APP_FILE}")
    moved = source.replace('"ghcr.io/acme/hello:1.0.0"', '"ghcr.io/acme/hello-next:2.0.0"')
    revision = loop.push(REPO_NAME, {APP_FILE: moved}, "the next image repository (gated)", PROD)
    loop.wait_health(PROD, revision, "Suspended")
    name = loop.apprafter_application("hello", PROD)["status"]["migrationPlan"]  # type: ignore[index]
    plan_node = {"kind": "MigrationPlan", "group": "apprafter.io", "version": "v1alpha1", "namespace": PROD,
                 "name": name}
    # The project does not permit MigrationPlans: Argo CD neither draws the plan nor runs the action on it, whoever
    # holds `action/*` in Argo CD's RBAC.
    assert name not in {n["name"] for n in loop.argocd.resource_tree(APPROVER.name, PROD)}
    denied = loop.argocd.resource_action(APPROVER.name, PROD, plan_node, "approve")
    assert denied.status_code >= 400, denied.text
    assert f"not found as part of application {PROD}" in denied.json()["message"]
    assert (loop.migration_plan(name, PROD) or {})["status"]["phase"] == "pending-approval"
    # The administrator opts the project in: the action runs, stamped with argocd-server's identity.
    project = loop.kube.get(ARGOCD_API, "AppProject", PROJECT, loop.argocd.namespace)
    assert project is not None
    project["spec"]["namespaceResourceWhitelist"].append({"group": "apprafter.io", "kind": "MigrationPlan"})
    loop.kube.apply({"apiVersion": ARGOCD_API, "kind": "AppProject",
                     "metadata": {"name": PROJECT, "namespace": loop.argocd.namespace}, "spec": project["spec"]},
                    field_manager="platform-admin")
    loop.argocd.refresh(PROD)
    loop.wait(PROD, "the plan in the tree", lambda _: name in {
        n["name"] for n in loop.argocd.resource_tree(APPROVER.name, PROD)})
    with loop.operator_paused():
        ran = loop.argocd.resource_action(APPROVER.name, PROD, plan_node, "approve")
        assert ran.status_code == 200, ran.text
        approved = loop.migration_plan(name, PROD)
        assert approved is not None
        assert (approved["status"]["phase"], approved["status"]["approvedBy"]) == ("approved", ARGOCD_SERVER)
    loop.wait_health(PROD, revision, "Healthy")
    assert unowned_workloads(loop, PROD) == []


@pytest.fixture
def manifests_plugin(loop: GitOpsLoop, tmp_path: Path) -> Iterator[CmpServer]:
    """A plugin that emits the workload objects (ours with APPRAFTER_MODE=manifests in its own env), installed
    beside ours in the repo-server, as a platform with several plugins would have it."""
    plugin_dir = tmp_path / "plugin"
    plugin_dir.mkdir()
    config = yaml.safe_load((REPO / "plugin.yaml").read_text())
    config["metadata"]["name"] = "apprafter-manifests"
    (plugin_dir / "plugin.yaml").write_text(yaml.safe_dump(config))
    server = start_cmp_server(plugin_dir, tmp_path / "cmp", path=plugin_path(), socket_dir=loop.cmp.socket_dir,
                              env={"APPRAFTER_MODE": "manifests"}, version=loop.argocd.version)
    try:
        yield server
    finally:
        server.stop()


def test_the_project_refuses_a_deployment_from_a_plugin_that_emits_one(loop: GitOpsLoop, deployed: dict[str, Any],
                                                                       manifests_plugin: CmpServer) -> None:
    """The repository names that other plugin in `.argocd-source.yaml` (the merge may change `plugin.name`): its
    Deployment, ServiceAccount and the rest are refused by the project before anything is applied or pruned. Last in
    the module: after a refused sync, Argo CD v3.6.1 skips auto-syncing later commits of the same source ("Skipping
    auto-sync: failed previous sync attempt"); the revert here needs no sync (the live Application is as rendered)."""
    switch = {"plugin": {"name": manifests_plugin.plugin_name}}
    revision = loop.push(REPO_NAME, {".argocd-source.yaml": yaml.safe_dump(switch)}, "the other plugin", PROD)
    app = loop.wait(PROD, f"the sync of {revision[:8]} refused", lambda a: refused_by_project(a, revision))
    message = sync_messages(app)
    assert f"resource apps:Deployment is not permitted in project {PROJECT}" in message
    assert f"resource :ServiceAccount is not permitted in project {PROJECT}" in message
    assert unowned_workloads(loop, PROD) == []
    kept = loop.apprafter_application("hello", PROD)  # not pruned: a sync refused is refused whole
    assert kept is not None and kept["metadata"]["uid"] == deployed["metadata"]["uid"]
    back = remove(loop, [".argocd-source.yaml"], "back to our plugin", PROD)
    loop.wait_health(PROD, back, "Healthy")
