"""The GitOps loop, through Argo CD and not around it: a commit to a git repository on loopback reaches the
cluster as our `apprafter.io` Application via Argo CD's repo-server, our plugin under Argo CD's plugin server
and Argo CD's application controller; the AppRafter operator applies its children and holds a gated change;
the admission webhook guards every write; Argo CD shows the operator's status as health and its API server
runs the Approve action. Each health Argo CD shows is also computed by `argocd admin settings
resource-overrides` on the same live object (the operator's real output).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller_runtime.compare import covers
from tests.argocd import overrides
from tests.argocd.objects import APP_FILE, HELLO, NEXT_REPOSITORY, PROD, SCALED, STAGING, TO_ZERO
from tests.reconciler.helpers import children, versions
from tests.renderer.helpers import APPRAFTER, run_cli, write_app
from tests.testbed.argocd import ARGOCD_API, conditions, sync_status
from tests.testbed.gitops import APPROVER, VIEWER, GitOpsLoop
from tests.testbed.kube import PERSON

pytestmark = pytest.mark.gitops

REPO_NAME = "hello"
ARGOCD_SERVER = "system:serviceaccount:argocd-loop:argocd-server"  # who argocd-server is to the API server


@dataclasses.dataclass
class Deployed:
    """The prod Application after its first sync: the commit it synced and the object it created."""

    revision: str
    cr: dict[str, Any]


@pytest.fixture(scope="module")
def checkout(loop: GitOpsLoop, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The user's clone of the app's repository (origin: the loop's git server)."""
    loop.git.create(REPO_NAME, {APP_FILE: HELLO})
    where = tmp_path_factory.mktemp("checkout") / REPO_NAME
    subprocess.run(["git", "clone", "--quiet", loop.git.url(REPO_NAME), str(where)], check=True, timeout=60)
    return where


HOLD = "example.com/hold"  # a finalizer no controller here removes


def app_cli(loop: GitOpsLoop, checkout: Path, command: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`apprafter app COMMAND ...` in the user's clone, against the loop's Argo CD."""
    return run_cli("app", command, *args, "--argocd-namespace", loop.argocd.namespace, "--kubeconfig",
                   str(loop.kube.kubeconfig), cwd=checkout)


@pytest.fixture(scope="module")
def prod(loop: GitOpsLoop, checkout: Path) -> Deployed:
    # The user connects the repository with `apprafter app add`: no Argo CD YAML of theirs.
    added = app_cli(loop, checkout, "add", "-e", "prod", "--project", "default", "--create-namespace")
    assert added.returncode == 0, added.stderr
    assert added.stdout == f"application.argoproj.io/{PROD} created\n"
    revision = loop.git.git(REPO_NAME, "rev-parse", "HEAD").strip()
    loop.wait_health(PROD, revision, "Healthy")
    return Deployed(revision, current(loop, PROD))


def current(loop: GitOpsLoop, namespace: str) -> dict[str, Any]:
    cr = loop.apprafter_application("hello", namespace)
    assert cr is not None
    return cr


def local(tmp_path: Path, text: str, *args: str) -> str:
    """What the `apprafter` CLI prints for a repository holding `text`, as a user runs it before pushing."""
    write_app(tmp_path, text)
    result = run_cli(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return result.stdout


def rendered_children(tmp_path: Path, text: str, environment: str, namespace: str) -> dict[tuple[str, str], Any]:
    """`apprafter render --mode manifests`: the objects the operator must make of the CR, by (kind, name)."""
    out = local(tmp_path, text, "render", ".", "--env", environment, "--mode", "manifests", "--namespace", namespace)
    return {(o["kind"], o["metadata"]["name"]): o for o in yaml.safe_load_all(out) if o}


def assert_children_follow(loop: GitOpsLoop, tmp_path: Path, text: str, environment: str, namespace: str,
                           ) -> dict[tuple[str, str], dict[str, Any]]:
    """The live children are exactly what `apprafter render --mode manifests` prints for `text`."""
    live, want = children(loop.kube, namespace, namespace), rendered_children(tmp_path, text, environment, namespace)
    assert sorted(live) == sorted(want)
    for key, desired in want.items():
        assert covers(live[key], desired), f"{key} is not as rendered"
    return live


def node(loop: GitOpsLoop, app: str, kind: str, name: str) -> dict[str, Any]:
    """The tree node the UI draws for one object of `app`."""
    found = [n for n in loop.argocd.resource_tree(APPROVER.name, app) if (n["kind"], n["name"]) == (kind, name)]
    assert len(found) == 1, f"{app}: {kind}/{name} is not in the resource tree once: {found}"
    return found[0]


def tree_health(loop: GitOpsLoop, app: str, kind: str, name: str = "hello") -> dict[str, Any]:
    """What the UI shows on that node: {status, message}."""
    health: dict[str, Any] = node(loop, app, kind, name).get("health") or {}
    return health


def shown(loop: GitOpsLoop, app: str, obj: dict[str, Any], health: str, message: str) -> None:
    """Argo CD shows `obj` (a live object of ours) with this health, and its Lua run by `argocd admin` on the
    same object says the same."""
    kind, name = obj["kind"], obj["metadata"]["name"]
    loop.wait(app, f"{kind}/{name} {health}", lambda _: tree_health(loop, app, kind, name).get("status") == health)
    assert tree_health(loop, app, kind, name) == {"status": health, "message": message}
    assert overrides.health(obj) == overrides.Health(health, message)


def ready_message(cr: dict[str, Any]) -> str:
    ready = next(c for c in cr["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"
    return str(ready["message"])


def test_argo_cd_syncs_and_the_operator_makes_it_healthy(loop: GitOpsLoop, prod: Deployed, tmp_path: Path) -> None:
    app = loop.argocd.get(PROD)
    assert sync_status(app) == ("Synced", "Healthy", prod.revision)
    # Argo CD manages only what the plugin rendered: the children are the operator's, never OutOfSync or pruned.
    assert [(r["group"], r["kind"], r["namespace"], r["name"], r["status"]) for r in app["status"]["resources"]] == [
        ("apprafter.io", "Application", PROD, "hello", "Synced")]
    cr = prod.cr
    assert cr["spec"] == yaml.safe_load(local(tmp_path, HELLO, "render", ".", "--env", "prod", "--namespace",
                                              PROD))["spec"]
    assert (cr["status"]["phase"], cr["status"]["observedGeneration"]) == ("Ready", cr["metadata"]["generation"])
    kids = assert_children_follow(loop, tmp_path, HELLO, "prod", PROD)
    assert kids[("Deployment", "hello")]["spec"]["replicas"] == 3
    for obj in kids.values():
        (owner,) = obj["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"], owner["controller"]) == ("Application", cr["metadata"]["uid"], True)
    # The UI draws them under the Application (Argo CD follows ownerReferences).
    tree = loop.argocd.resource_tree(APPROVER.name, PROD)
    under = {(n["kind"], n["name"]) for n in tree
             if any(p.get("uid") == cr["metadata"]["uid"] for p in n.get("parentRefs") or [])}
    assert under == set(kids)
    shown(loop, PROD, cr, "Healthy", ready_message(cr))
    # The app's health is its managed resources' only, so it is our Application's: Healthy once the operator saw
    # the Deployment rolled out (here the bare bed's stand-in marks it so; test_gitops_node.py runs real pods),
    # as the Deployment's own node says.
    assert cr["status"]["replicas"] == {"desired": 3, "updated": 3, "ready": 3, "available": 3}
    assert tree_health(loop, PROD, "Deployment")["status"] == "Healthy"
    assert sync_status(loop.argocd.get(PROD))[1] == "Healthy"


def test_app_add_made_the_argo_cd_application_and_app_status_and_list_show_it(
        loop: GitOpsLoop, prod: Deployed, checkout: Path) -> None:
    app = loop.argocd.get(PROD)
    assert app["spec"]["source"] == {"repoURL": loop.git.url(REPO_NAME), "path": ".", "targetRevision": "main",
                                     "plugin": {"name": loop.cmp.plugin_name,
                                                "parameters": [{"name": "environment", "string": "prod"}]}}
    assert app["metadata"]["labels"] == {"apprafter.io/app": "hello", "apprafter.io/environment": "prod"}
    again = app_cli(loop, checkout, "add", "-e", "prod", "--project", "default", "--create-namespace")
    assert (again.returncode, again.stdout) == (0, f"application.argoproj.io/{PROD} unchanged\n"), again.stderr
    status = app_cli(loop, checkout, "status", "hello")
    assert status.returncode == 0, status.stderr
    assert status.stdout == (f"{PROD} (namespace {PROD})\n  argo cd:   Synced, Healthy at {prod.revision[:12]}\n"
                             "  phase:     Ready, replicas 3/3\n")
    listed = app_cli(loop, checkout, "list")
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()
    assert header.split() == ["APP", "ENVIRONMENT", "NAMESPACE", "SYNC", "HEALTH", "REVISION", "REPOSITORY"]
    assert row.split() == ["hello", "prod", PROD, "Synced", "Healthy", prod.revision[:12], loop.git.url(REPO_NAME),
                           "."]


def test_a_commit_reaches_the_children_through_argo_cd_and_the_operator(loop: GitOpsLoop, prod: Deployed,
                                                                        tmp_path: Path) -> None:
    before = children(loop.kube, PROD, PROD)
    with loop.operator_paused():
        revision = loop.push(REPO_NAME, {APP_FILE: SCALED}, "prod: 4 replicas", PROD)
        loop.wait_synced(PROD, revision)
        # The status still describes the previous generation: Argo CD must not call that healthy.
        cr = current(loop, PROD)
        generation = cr["metadata"]["generation"]
        assert (generation, cr["status"]["observedGeneration"]) == (prod.cr["metadata"]["generation"] + 1,
                                                                     generation - 1)
        shown(loop, PROD, cr, "Progressing",
              f"The AppRafter operator has not reconciled generation {generation} yet (observed: {generation - 1})")
        loop.wait(PROD, "app Progressing", lambda a: sync_status(a) == ("Synced", "Progressing", revision))
        assert versions(children(loop.kube, PROD, PROD)) == versions(before)
    loop.wait_health(PROD, revision, "Healthy")
    kids = assert_children_follow(loop, tmp_path, SCALED, "prod", PROD)
    assert kids[("Deployment", "hello")]["spec"]["replicas"] == 4
    assert {k: o["metadata"]["uid"] for k, o in kids.items()} == {k: o["metadata"]["uid"] for k, o in before.items()}
    cr = current(loop, PROD)
    assert cr["metadata"]["uid"] == prod.cr["metadata"]["uid"]
    shown(loop, PROD, cr, "Healthy", ready_message(cr))


def test_a_gated_change_waits_for_its_plan_and_the_cli_approval_rolls_it_out(loop: GitOpsLoop, prod: Deployed,
                                                                            tmp_path: Path, checkout: Path) -> None:
    # Before pushing, the user previews the plan in the repository, as docs/operator.md says.
    work = loop.git.base / REPO_NAME
    (work / APP_FILE).write_text(NEXT_REPOSITORY)
    preview = run_cli("plan", "--from", "git:main", "--to", ".", "--env", "prod", "--namespace", PROD,
                      "--format", "json", cwd=work)
    assert preview.returncode == 0, preview.stderr
    previewed = json.loads(preview.stdout)["migrationPlan"]
    before = children(loop.kube, PROD, PROD)

    revision = loop.push(REPO_NAME, {APP_FILE: NEXT_REPOSITORY}, "prod: the next image repository", PROD)
    loop.wait_health(PROD, revision, "Suspended")
    cr = current(loop, PROD)
    name = cr["status"]["migrationPlan"]
    assert name == previewed["metadata"]["name"]
    plan = loop.migration_plan(name, PROD)
    assert plan is not None
    assert plan["spec"] == previewed["spec"]
    assert plan["status"]["phase"] == "pending-approval"
    assert [o["uid"] for o in plan["metadata"]["ownerReferences"]] == [cr["metadata"]["uid"]]
    shown(loop, PROD, cr, "Suspended", f"Awaiting approval of MigrationPlan {name} (apprafter migration approve "
                                       f"{name} -n {PROD}); the previous version keeps running")
    said = app_cli(loop, checkout, "status", "hello", "-e", "prod").stdout.splitlines()
    assert f"  waiting:   MigrationPlan {name} (security-boundary): apprafter migration approve {name} -n {PROD}" \
        in said
    held = next(c for c in cr["status"]["conditions"] if c["type"] == "Ready")
    assert said[-1] == f"  problem:   AwaitingMigrationApproval: {held['message']}"  # the Application's own word
    assert f"apprafter migration approve {name} -n {PROD}" in said[-1]
    shown(loop, PROD, plan, "Suspended",
          f"Awaiting approval: security-boundary, 1 gated change (apprafter migration approve {name})")
    # Every child keeps the previous version.
    held = children(loop.kube, PROD, PROD)
    assert versions(held) == versions(before)
    assert held[("Deployment", "hello")]["spec"]["template"]["spec"]["containers"][0]["image"] == (
        "ghcr.io/acme/hello:1.0.0")

    approved = loop.approve(name, PROD)
    assert approved.returncode == 0, approved.stderr
    assert approved.stdout == f"migrationplan/{name} approved (namespace {PROD})\n"
    loop.wait(PROD, "plan applied", lambda _: (loop.migration_plan(name, PROD) or {}).get("status", {}).get(
        "phase") == "applied")
    loop.wait_health(PROD, revision, "Healthy")
    kids = assert_children_follow(loop, tmp_path, NEXT_REPOSITORY, "prod", PROD)
    assert kids[("Deployment", "hello")]["spec"]["template"]["spec"]["containers"][0]["image"] == (
        "ghcr.io/acme/hello-next:2.0.0")
    plan = loop.migration_plan(name, PROD)
    assert plan is not None
    assert plan["status"]["approvedBy"] == PERSON  # the webhook stamped the person who ran the CLI
    shown(loop, PROD, plan, "Healthy", f"Applied at {plan['status']['appliedAt']}")
    cr = current(loop, PROD)
    shown(loop, PROD, cr, "Healthy", ready_message(cr))


def test_a_gated_change_is_approved_with_argo_cds_approve_action(loop: GitOpsLoop, prod: Deployed,
                                                                 tmp_path: Path) -> None:
    revision = loop.push(REPO_NAME, {APP_FILE: TO_ZERO}, "prod: scale to zero", PROD)
    loop.wait_health(PROD, revision, "Suspended")
    name = current(loop, PROD)["status"]["migrationPlan"]
    plan_node = node(loop, PROD, "MigrationPlan", name)
    before = loop.migration_plan(name, PROD)
    assert before is not None and before["status"]["phase"] == "pending-approval"
    assert before["spec"]["risks"]["classification"] == "requires-restart"
    assert children(loop.kube, PROD, PROD)[("Deployment", "hello")]["spec"]["replicas"] == 4

    # Argo CD's RBAC decides who may press the button: role:readonly may look, not approve.
    listed = loop.argocd.resource_action(VIEWER.name, PROD, plan_node)
    assert listed.status_code == 200 and listed.json()["actions"][0]["name"] == "approve"
    assert "disabled" not in listed.json()["actions"][0]
    denied = loop.argocd.resource_action(VIEWER.name, PROD, plan_node, "approve")
    assert denied.status_code == 403, denied.text
    assert "permission denied" in denied.json()["message"]

    with loop.operator_paused():  # to see the approval before the operator applies it
        ran = loop.argocd.resource_action(APPROVER.name, PROD, plan_node, "approve")
        assert ran.status_code == 200, ran.text
        approved = loop.migration_plan(name, PROD)
        assert approved is not None
        # argocd-server patched the status subresource with its own identity; the webhook stamped that identity.
        assert approved["status"]["phase"] == "approved"
        assert approved["status"]["approvedBy"] == ARGOCD_SERVER
        assert approved["status"]["approvedAt"]
        assert (approved["spec"], approved["metadata"]["generation"]) == (before["spec"],
                                                                          before["metadata"]["generation"])
        # Its merge patch carried status.phase alone (the stamp is the webhook's mutation, owned by no manager).
        writes = [m for m in approved["metadata"]["managedFields"] if m["manager"] == "argocd"]
        assert [(m.get("subresource"), m["fieldsV1"]) for m in writes] == [("status", {"f:status": {"f:phase": {}}})]
        shown(loop, PROD, approved, "Progressing",
              f"Approved by {ARGOCD_SERVER}; waiting for the AppRafter operator to apply it")
        # Who pressed it is in Argo CD's audit trail: an Event on the Argo CD Application, naming the user.
        events = loop.kube.http.get(f"/api/v1/namespaces/{loop.argocd.namespace}/events").json()["items"]
        assert f"{APPROVER.name} ran action approve on resource apprafter.io/MigrationPlan/{name}" in {
            e["message"] for e in events if e["reason"] == "ResourceActionRan" and e["involvedObject"]["name"] == PROD}
        again = loop.argocd.resource_action(APPROVER.name, PROD, plan_node, "approve")
        assert again.status_code >= 400
        assert f"MigrationPlan {name} is approved: only a pending-approval plan can be approved" in (
            again.json()["message"])
        assert children(loop.kube, PROD, PROD)[("Deployment", "hello")]["spec"]["replicas"] == 4

    loop.wait(PROD, "plan applied", lambda _: (loop.migration_plan(name, PROD) or {}).get("status", {}).get(
        "phase") == "applied")
    loop.wait_health(PROD, revision, "Healthy")
    kids = assert_children_follow(loop, tmp_path, TO_ZERO, "prod", PROD)
    assert kids[("Deployment", "hello")]["spec"]["replicas"] == 0
    assert loop.argocd.resource_action(APPROVER.name, PROD, plan_node).json()["actions"][0]["disabled"] is True


def test_a_broken_application_cue_is_argo_cds_comparison_error_and_prunes_nothing(
        loop: GitOpsLoop, prod: Deployed, tmp_path: Path, checkout: Path) -> None:
    broken = TO_ZERO.replace("port: 8080", "port: 70000")
    write_app(tmp_path, broken)
    local_run = run_cli("render", ".", "--env", "prod", cwd=tmp_path)  # as a user runs it in the repository
    assert local_run.returncode == 1
    (error_line,) = local_run.stderr.splitlines()
    assert error_line.startswith("apprafter/Application.cue:")
    kept, kept_children = current(loop, PROD), versions(children(loop.kube, PROD, PROD))
    synced_before = sync_status(loop.argocd.get(PROD))[2]

    revision = loop.push(REPO_NAME, {APP_FILE: broken}, "port out of range", PROD)
    app = loop.wait(PROD, "ComparisonError", lambda a: bool(conditions(a, "ComparisonError")))
    (error,) = conditions(app, "ComparisonError")
    assert error_line in error["message"]
    assert "`apprafter cmp generate` failed exit status 1" in error["message"]
    problem = app_cli(loop, checkout, "status", "hello").stdout.splitlines()[-1]
    assert problem == f"  problem:   Argo CD cannot render it: {error_line}"
    now = current(loop, PROD)
    assert (now["metadata"]["uid"], now["metadata"]["resourceVersion"]) == (
        kept["metadata"]["uid"], kept["metadata"]["resourceVersion"])
    assert versions(children(loop.kube, PROD, PROD)) == kept_children
    app = loop.argocd.get(PROD)
    # Never synced to the broken commit. What status.sync.revision shows meanwhile differs: v3.1 keeps the last
    # synced sha (or nothing), v3.6 the unresolved targetRevision ("main") of the failed comparison.
    assert sync_status(app)[2] in ("", synced_before, "main")
    assert app["status"]["operationState"]["syncResult"]["revision"] == synced_before
    assert revision not in {h["revision"] for h in app["status"].get("history", [])}

    fixed_text = TO_ZERO.replace('LOG_LEVEL: "info"', 'LOG_LEVEL: "warn"')
    fixed = loop.push(REPO_NAME, {APP_FILE: fixed_text}, "fix the port", PROD)
    app = loop.wait_health(PROD, fixed, "Healthy")
    assert not conditions(app, "ComparisonError")
    assert revision not in {h["revision"] for h in app["status"].get("history", [])}
    assert current(loop, PROD)["metadata"]["uid"] == kept["metadata"]["uid"]  # updated, never re-created
    kids = assert_children_follow(loop, tmp_path, fixed_text, "prod", PROD)
    assert kids[("Deployment", "hello")]["spec"]["template"]["spec"]["containers"][0]["env"] == [
        {"name": "LOG_LEVEL", "value": "warn"}]


def test_a_second_environment_lands_in_its_own_namespace(loop: GitOpsLoop, prod: Deployed, tmp_path: Path) -> None:
    head = loop.git.git(REPO_NAME, "rev-parse", "HEAD").strip()
    prod_cr, prod_children = current(loop, PROD), versions(children(loop.kube, PROD, PROD))
    # No parameter: the plugin takes the environment from the Argo CD Application's name, <app>-<env>.
    loop.argocd.apply(loop.application(STAGING, REPO_NAME, STAGING))
    loop.wait_health(STAGING, head, "Healthy")
    staging = current(loop, STAGING)
    assert staging["spec"]["environment"] == "staging"
    assert staging["metadata"]["labels"]["apprafter.io/environment"] == "staging"
    source = loop.git.git(REPO_NAME, "show", f"{head}:{APP_FILE}")
    assert staging["spec"] == yaml.safe_load(local(tmp_path, source, "render", ".", "--env", "staging",
                                                   "--namespace", STAGING))["spec"]
    kids = assert_children_follow(loop, tmp_path, source, "staging", STAGING)
    assert kids[("Deployment", "hello")]["spec"]["replicas"] == 1
    assert all(o["metadata"]["namespace"] == STAGING for o in kids.values())
    shown(loop, STAGING, staging, "Healthy", ready_message(staging))
    assert current(loop, PROD)["metadata"]["resourceVersion"] == prod_cr["metadata"]["resourceVersion"]
    assert versions(children(loop.kube, PROD, PROD)) == prod_children


def test_app_add_refuses_a_name_another_application_holds_and_app_remove_removes_what_it_added(
        loop: GitOpsLoop, prod: Deployed, checkout: Path) -> None:
    loop.argocd.get(STAGING)  # made by hand above, without app add
    refused = app_cli(loop, checkout, "add", "-e", "staging", "--project", "default", "--create-namespace")
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.splitlines() == [
        f"application.argoproj.io/{STAGING}: exists and deploys {loop.git.url(REPO_NAME)} (not made by apprafter app "
        "add): an app name is one app in a cluster; rename yours or remove that one"]
    asked = app_cli(loop, checkout, "remove", "hello")  # not at a terminal: nothing without --yes
    assert asked.returncode == 1
    assert asked.stdout.splitlines()[:2] == [
        "apprafter app remove hello will remove:",
        f"  - application.argoproj.io/{PROD}: the app hello in namespace {PROD} and everything it runs (Deployment, "
        "Service, routes, policies)"]
    assert "nothing removed: pass --yes" in asked.stderr
    loop.argocd.get(PROD)  # still there
    # Something else holds the Argo CD Application (a finalizer no controller here removes): `--wait` gives up at
    # its timeout saying so; a second run waits until the hold is lifted, then returns 0.
    held = {"apiVersion": ARGOCD_API, "kind": "Application",
            "metadata": {"name": PROD, "namespace": loop.argocd.namespace, "finalizers": [HOLD]}}
    loop.kube.apply(held, field_manager="hold")
    stuck = app_cli(loop, checkout, "remove", "hello", "--yes", "--wait", "--timeout", "1")
    assert stuck.returncode == 1 and stuck.stderr.count("\n") == 1, stuck.stderr
    assert stuck.stderr.startswith(f"application.argoproj.io/{PROD}: still there after 1 s, waiting for "), \
        stuck.stderr
    assert f"finalizer {HOLD}" in stuck.stderr, stuck.stderr
    waiting = subprocess.Popen([*APPRAFTER, "app", "remove", "hello", "--yes", "--wait", "--argocd-namespace",
                                loop.argocd.namespace, "--kubeconfig", str(loop.kube.kubeconfig)], cwd=checkout,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert waiting.stdout is not None and waiting.stdout.readline() == "apprafter app remove hello will remove:\n"
        loop.kube.apply({**held, "metadata": {**held["metadata"], "finalizers": []}}, field_manager="hold")
        out, err = waiting.communicate(timeout=120)
    finally:
        waiting.kill()
    removed = subprocess.CompletedProcess(waiting.args, waiting.returncode, out, err)
    assert removed.returncode == 0, removed.stderr
    assert loop.kube.get(ARGOCD_API, "Application", PROD, loop.argocd.namespace) is None
    assert loop.apprafter_application("hello", PROD) is None  # Argo CD deleted what it deployed (its cascade)
    loop.argocd.get(STAGING)  # another app's, untouched
    gone = app_cli(loop, checkout, "status", "hello")
    assert gone.returncode == 1
    assert gone.stderr.strip() == (f"app/hello: no hello is registered in {loop.argocd.namespace}: `apprafter app "
                                   "add` registers it, `apprafter app list` shows what is")
