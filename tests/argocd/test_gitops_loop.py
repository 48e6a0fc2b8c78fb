"""The GitOps loop, through Argo CD and not around it: a commit to a git repository on loopback reaches the
cluster as our `apprafter.io` Application via Argo CD's repo-server, our plugin under Argo CD's plugin server
and Argo CD's application controller; Argo CD's API server shows our health and runs the Approve action.

No operator runs in this module yet (issue 9): where Argo CD must read the operator's status, the test writes
that status through the status subresource itself, as the operator's tests play the claim provider.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from compatibility.migrationplan import migration_plan
from tests.argocd.objects import APP_FILE, HELLO, app_status, edited, gated_plan
from tests.renderer.helpers import run_cli, write_app
from tests.testbed.argocd import conditions, sync_status
from tests.testbed.gitops import APPRAFTER_API, APPROVER, STAND_IN, VIEWER, GitOpsLoop

pytestmark = pytest.mark.gitops

REPO_NAME = "hello"
PROD, STAGING = "hello-prod", "hello-staging"  # Argo CD Applications; each syncs into a namespace of its name


@dataclasses.dataclass
class Deployed:
    """The prod Application after its first sync: the commit it synced and the object it created."""

    revision: str
    cr: dict[str, Any]


@pytest.fixture(scope="module")
def prod(loop: GitOpsLoop) -> Deployed:
    revision = loop.git.create(REPO_NAME, {APP_FILE: HELLO})
    loop.argocd.apply(loop.application(PROD, REPO_NAME, PROD, environment="prod"))
    loop.wait_synced(PROD, revision)
    cr = loop.apprafter_application("hello", PROD)
    assert cr is not None
    return Deployed(revision, cr)


def local_render(tmp_path: Path, text: str, environment: str, namespace: str) -> dict[str, Any]:
    """What `apprafter render` prints for `text` (the CR), as a user runs it before pushing."""
    write_app(tmp_path, text)
    result = run_cli("render", str(tmp_path), "--env", environment, "--namespace", namespace)
    assert result.returncode == 0, result.stderr
    cr: dict[str, Any] = yaml.safe_load(result.stdout)
    return cr


def tree_health(loop: GitOpsLoop, app: str, kind: str) -> dict[str, Any]:
    """What the UI shows on the node of `kind` in `app`'s tree: {status, message}."""
    health: dict[str, Any] = loop.argocd.tree_node(APPROVER.name, app, kind).get("health") or {}
    return health


def test_argo_cd_syncs_the_application_our_plugin_renders(loop: GitOpsLoop, prod: Deployed, tmp_path: Path) -> None:
    # Nothing has reconciled it yet, and Argo CD says so instead of calling it healthy.
    app = loop.argocd.wait(PROD, "Progressing", lambda a: sync_status(a)[1] == "Progressing")
    assert sync_status(app) == ("Synced", "Progressing", prod.revision)
    assert [(r["group"], r["kind"], r["namespace"], r["name"], r["status"]) for r in app["status"]["resources"]] == [
        ("apprafter.io", "Application", PROD, "hello", "Synced")]
    expected = local_render(tmp_path, HELLO, "prod", PROD)
    assert prod.cr["spec"] == expected["spec"]
    assert expected["metadata"]["labels"].items() <= prod.cr["metadata"]["labels"].items()
    assert tree_health(loop, PROD, "Application") == {
        "status": "Progressing", "message": "Waiting for the AppRafter operator to reconcile this Application"}


def test_argo_cd_reads_health_from_the_operators_status(loop: GitOpsLoop, prod: Deployed) -> None:
    generation = prod.cr["metadata"]["generation"]
    loop.write_status("Application", "hello", PROD, app_status(
        "Ready", generation, ("True", "Applied", "5 objects applied"), image="ghcr.io/acme/hello:1.0.0"))
    loop.argocd.wait(PROD, "Healthy", lambda a: sync_status(a)[:2] == ("Synced", "Healthy"))
    assert tree_health(loop, PROD, "Application") == {"status": "Healthy", "message": "5 objects applied"}

    # A gated change: the operator creates the plan (owned by the Application) and holds the app.
    plan = migration_plan(gated_plan(prod.cr, edited(prod.cr, replicas=0)), owner_uid=prod.cr["metadata"]["uid"])
    name = plan["metadata"]["name"]
    loop.kube.apply(plan, field_manager=STAND_IN)
    loop.write_status("MigrationPlan", name, PROD, {"phase": "pending-approval"})
    loop.write_status("Application", "hello", PROD, app_status(
        "AwaitingMigrationApproval", generation, ("False", "AwaitingMigrationApproval", f"waiting for {name}"),
        migrationPlan=name))
    loop.argocd.wait(PROD, "Suspended", lambda a: sync_status(a)[:2] == ("Synced", "Suspended"))
    assert tree_health(loop, PROD, "Application") == {"status": "Suspended", "message": (
        f"Awaiting approval of MigrationPlan {name} (apprafter migration approve {name} -n {PROD}); "
        "the previous version keeps running")}
    assert tree_health(loop, PROD, "MigrationPlan") == {
        "status": "Suspended", "message": f"Awaiting approval: requires-restart, 1 gated change "
                                          f"(apprafter migration approve {name})"}


def test_the_approve_action_writes_only_status_phase_through_the_status_subresource(
        loop: GitOpsLoop, prod: Deployed) -> None:
    node = loop.argocd.tree_node(APPROVER.name, PROD, "MigrationPlan")
    before = loop.kube.get(APPRAFTER_API, "MigrationPlan", node["name"], PROD)
    assert before is not None

    # Argo CD's RBAC decides who may press the button: role:readonly may look, not approve.
    listed = loop.argocd.resource_action(VIEWER.name, PROD, node)
    assert listed.status_code == 200 and listed.json()["actions"][0]["name"] == "approve"
    assert "disabled" not in listed.json()["actions"][0]
    denied = loop.argocd.resource_action(VIEWER.name, PROD, node, "approve")
    assert denied.status_code == 403, denied.text
    assert "permission denied" in denied.json()["message"]

    ran = loop.argocd.resource_action(APPROVER.name, PROD, node, "approve")
    assert ran.status_code == 200, ran.text
    after = loop.kube.get(APPRAFTER_API, "MigrationPlan", node["name"], PROD)
    assert after is not None
    assert after["status"] == {"phase": "approved"}
    assert (after["spec"], after["metadata"]["generation"]) == (before["spec"], before["metadata"]["generation"])
    # argocd-server patched the status subresource, with its own Kubernetes identity, and only status.phase.
    status_writes = [m for m in after["metadata"]["managedFields"] if m["manager"] == "argocd"]
    assert [(m.get("subresource"), m["fieldsV1"]) for m in status_writes] == [("status", {"f:status": {"f:phase": {}}})]

    # Who pressed it is in Argo CD's audit trail: an Event on the Argo CD Application, naming the user.
    events = loop.kube.http.get(f"/api/v1/namespaces/{loop.argocd.namespace}/events").json()["items"]
    assert f"{APPROVER.name} ran action approve on resource apprafter.io/MigrationPlan/{node['name']}" in {
        e["message"] for e in events if e["reason"] == "ResourceActionRan" and e["involvedObject"]["name"] == PROD}

    again = loop.argocd.resource_action(APPROVER.name, PROD, node, "approve")
    assert again.status_code >= 400
    assert "is approved: only a pending-approval plan can be approved" in again.json()["message"]
    listed = loop.argocd.resource_action(APPROVER.name, PROD, node)
    assert listed.json()["actions"][0]["disabled"] is True
    loop.argocd.wait(PROD, "plan node Progressing",
                     lambda _: tree_health(loop, PROD, "MigrationPlan").get("status") == "Progressing")
    assert tree_health(loop, PROD, "MigrationPlan")["message"] == (
        "Approved; waiting for the AppRafter operator to apply it")


def test_a_commit_reaches_the_cluster_through_argo_cd(loop: GitOpsLoop, prod: Deployed) -> None:
    revision = loop.push(REPO_NAME, {APP_FILE: HELLO.replace("prod: replicas: 3", "prod: replicas: 4")},
                         "prod: 4 replicas", PROD)
    loop.wait_synced(PROD, revision)
    cr = loop.apprafter_application("hello", PROD)
    assert cr is not None
    assert cr["spec"]["environments"]["prod"]["replicas"] == 4
    assert cr["metadata"]["uid"] == prod.cr["metadata"]["uid"]
    generation = cr["metadata"]["generation"]
    assert generation == prod.cr["metadata"]["generation"] + 1
    # The status still describes the previous generation: Argo CD must not call that healthy.
    loop.argocd.wait(PROD, "Progressing", lambda a: sync_status(a)[1] == "Progressing")
    assert tree_health(loop, PROD, "Application")["message"] == (
        f"The AppRafter operator has not reconciled generation {generation} yet (observed: {generation - 1})")


def test_a_broken_application_cue_is_argo_cds_comparison_error_and_prunes_nothing(
        loop: GitOpsLoop, prod: Deployed, tmp_path: Path) -> None:
    broken = HELLO.replace("port: 8080", "port: 70000")
    write_app(tmp_path, broken)
    local = run_cli("render", ".", "--env", "prod", cwd=tmp_path)  # as a user runs it in the repository
    assert local.returncode == 1
    (error_line,) = local.stderr.splitlines()
    assert error_line.startswith("apprafter/Application.cue:")
    kept = loop.apprafter_application("hello", PROD)
    assert kept is not None
    synced_before = sync_status(loop.argocd.get(PROD))[2]

    revision = loop.push(REPO_NAME, {APP_FILE: broken}, "port out of range", PROD)
    app = loop.argocd.wait(PROD, "ComparisonError", lambda a: bool(conditions(a, "ComparisonError")))
    (error,) = conditions(app, "ComparisonError")
    assert error_line in error["message"]
    assert "`apprafter cmp generate` failed exit status 1" in error["message"]
    now = loop.apprafter_application("hello", PROD)
    assert now is not None
    assert (now["metadata"]["uid"], now["metadata"]["resourceVersion"]) == (
        kept["metadata"]["uid"], kept["metadata"]["resourceVersion"])
    app = loop.argocd.get(PROD)
    assert sync_status(app)[2] in ("", synced_before)  # never synced to the broken commit
    assert revision not in {h["revision"] for h in app["status"].get("history", [])}

    fixed = loop.push(REPO_NAME, {APP_FILE: HELLO.replace("prod: replicas: 3", "prod: replicas: 4")
                                  .replace('LOG_LEVEL: "info"', 'LOG_LEVEL: "warn"')}, "fix the port", PROD)
    app = loop.wait_synced(PROD, fixed)
    assert not conditions(app, "ComparisonError")
    assert revision not in {h["revision"] for h in app["status"].get("history", [])}
    again = loop.apprafter_application("hello", PROD)
    assert again is not None and again["metadata"]["uid"] == kept["metadata"]["uid"]  # updated, never re-created


def test_a_second_environment_lands_in_its_own_namespace(loop: GitOpsLoop, prod: Deployed, tmp_path: Path) -> None:
    head = loop.git.git(REPO_NAME, "rev-parse", "HEAD").strip()
    prod_cr = loop.apprafter_application("hello", PROD)
    assert prod_cr is not None
    # No parameter: the plugin takes the environment from the Argo CD Application's name, <app>-<env>.
    loop.argocd.apply(loop.application(STAGING, REPO_NAME, STAGING))
    loop.wait_synced(STAGING, head)
    staging = loop.apprafter_application("hello", STAGING)
    assert staging is not None
    assert staging["spec"]["environment"] == "staging"
    assert staging["metadata"]["labels"]["apprafter.io/environment"] == "staging"
    source = loop.git.git(REPO_NAME, "show", f"{head}:{APP_FILE}")
    assert staging["spec"] == local_render(tmp_path, source, "staging", STAGING)["spec"]
    after = loop.apprafter_application("hello", PROD)
    assert after is not None
    assert after["metadata"]["resourceVersion"] == prod_cr["metadata"]["resourceVersion"]
