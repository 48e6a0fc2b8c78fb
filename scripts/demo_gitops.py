"""Demo: the GitOps loop on loopback, step by step, through Argo CD's own components; prints what Argo CD shows
and what each step cost. Run it with scripts/demo_gitops.sh (it sets the paths); `--keep` leaves everything
running until Enter, with the kubeconfig and Argo CD's address printed, and keeps the logs.

Until the AppRafter operator joins the loop (issue 9), the demo writes the operator's status itself where
Argo CD's health reads it; those steps say so.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from compatibility.migrationplan import migration_plan
from tests.argocd.objects import APP_FILE, HELLO, app_status, edited, gated_plan
from tests.testbed.argocd import conditions, sync_status
from tests.testbed.gitops import APPROVER, STAND_IN, GitOpsLoop, start_loop
from tests.testbed.kube import start_kube
from toolchain.tools import resolve

REPO, PROD, STAGING = "hello", "hello-prod", "hello-staging"


def say(text: str) -> None:
    print(f"\n==> {text}", flush=True)


def show(loop: GitOpsLoop, app: str) -> None:
    """`argocd app get`, as a person would run it against this Argo CD."""
    server = (loop.argocd.server_url or loop.argocd.start_server()).removeprefix("http://")
    argv = [str(resolve("argocd")), "app", "get", f"{loop.argocd.namespace}/{app}", "--server", server,
            "--plaintext", "--auth-token", loop.argocd.token(APPROVER.name), "--output", "tree"]
    with tempfile.TemporaryDirectory() as home:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False,
                              env={"PATH": "/usr/bin:/bin", "HOME": home})
    print("   $ argocd app get", f"{loop.argocd.namespace}/{app}", "--output tree")
    print("\n".join("   " + line for line in (proc.stdout or proc.stderr).rstrip().splitlines()))
    for node in loop.argocd.resource_tree(APPROVER.name, app):  # the UI shows these on hover
        health = node.get("health") or {}
        print(f"   health of {node['kind']}/{node['name']}: {health.get('status')}: {health.get('message')}")


def walk(loop: GitOpsLoop) -> None:
    say(f"a repository at {loop.git.url(REPO)} with apprafter/Application.cue (environments staging, prod)")
    head = loop.git.create(REPO, {APP_FILE: HELLO})
    say(f"Argo CD Application {PROD}: our plugin, environment=prod as a parameter, auto-sync with prune")
    with loop.timed("first Application created -> Synced (cold caches)"):
        loop.argocd.apply(loop.application(PROD, REPO, PROD, environment="prod"))
        loop.wait_synced(PROD, head)
    cr = loop.apprafter_application("hello", PROD)
    assert cr is not None
    show(loop, PROD)

    say("[stand-in for the operator] status Ready -> Argo CD reports Healthy")
    generation = cr["metadata"]["generation"]
    loop.write_status("Application", "hello", PROD, app_status("Ready", generation, ("True", "Applied", "applied")))
    loop.argocd.wait(PROD, "Healthy", lambda a: sync_status(a)[1] == "Healthy")
    show(loop, PROD)

    say("[stand-in for the operator] a gated change (prod scaled to zero): MigrationPlan, app held")
    plan = migration_plan(gated_plan(cr, edited(cr, replicas=0)), owner_uid=cr["metadata"]["uid"])
    name = plan["metadata"]["name"]
    loop.kube.apply(plan, field_manager=STAND_IN)
    loop.write_status("MigrationPlan", name, PROD, {"phase": "pending-approval"})
    loop.write_status("Application", "hello", PROD, app_status(
        "AwaitingMigrationApproval", generation, ("False", "AwaitingMigrationApproval", name), migrationPlan=name))
    loop.argocd.wait(PROD, "Suspended", lambda a: sync_status(a)[1] == "Suspended")
    show(loop, PROD)

    say(f"the Approve action on {name}, as user '{APPROVER.name}' ({APPROVER.role}), as the UI calls it")
    node = loop.argocd.tree_node(APPROVER.name, PROD, "MigrationPlan")
    resp = loop.argocd.resource_action(APPROVER.name, PROD, node, "approve")
    stored = loop.kube.get("apprafter.io/v1alpha1", "MigrationPlan", name, PROD) or {}
    print(f"   HTTP {resp.status_code}; MigrationPlan status now {stored.get('status')}")

    say("a commit (prod: 4 replicas), announced as Argo CD's git webhook would")
    with loop.timed("commit -> Synced"):
        good = HELLO.replace("prod: replicas: 3", "prod: replicas: 4")
        loop.wait_synced(PROD, loop.push(REPO, {APP_FILE: good}, "prod: 4 replicas", PROD))
    print("   synced; the apprafter.io Application's generation is now",
          (loop.apprafter_application("hello", PROD) or {}).get("metadata", {}).get("generation"))

    say("a commit with a broken Application.cue (port 70000)")
    with loop.timed("commit -> ComparisonError"):
        loop.push(REPO, {APP_FILE: good.replace("port: 8080", "port: 70000")}, "port out of range", PROD)
        app = loop.argocd.wait(PROD, "ComparisonError", lambda a: bool(conditions(a, "ComparisonError")))
    print("   ComparisonError:", conditions(app, "ComparisonError")[0]["message"])
    print("   the apprafter.io Application is still there:", loop.apprafter_application("hello", PROD) is not None)

    say("the fix")
    with loop.timed("fix commit -> Synced"):
        loop.wait_synced(PROD, loop.push(REPO, {APP_FILE: good}, "fix the port", PROD))
    show(loop, PROD)

    say(f"a second environment: Argo CD Application {STAGING}, environment from its name, own namespace")
    with loop.timed("second environment's Application created -> Synced"):
        loop.argocd.apply(loop.application(STAGING, REPO, STAGING))
        loop.wait_synced(STAGING, loop.git.git(REPO, "rev-parse", "HEAD").strip())
    show(loop, STAGING)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", action="store_true", help="keep everything running until Enter")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="apprafter-gitops-", dir="/tmp"))
    started = time.monotonic()
    say(f"starting etcd + kube-apiserver, Redis, git daemon, Argo CD (work dir {workdir})")
    kube = start_kube(workdir / "kube")
    kube_seconds = time.monotonic() - started
    try:
        started = time.monotonic()
        loop = start_loop(kube, workdir / "gitops")
        try:
            loop.timings["start-up: etcd + kube-apiserver + pinned CRDs"] = kube_seconds
            loop.timings["start-up: our CRDs, Redis, git daemon, plugin server, repo-server, controller"] = (
                time.monotonic() - started)
            walk(loop)
            say("what each step cost (seconds)")
            for step, seconds in loop.timings.items():
                print(f"   {seconds:6.1f}  {step}")
            if args.keep:
                say(f"running: KUBECONFIG={kube.kubeconfig}; Argo CD API {loop.argocd.server_url} "
                    f"(user {APPROVER.name}, password {APPROVER.password}); logs under {workdir}")
                input("   press Enter to tear everything down ")
        finally:
            loop.stop()
    finally:
        kube.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
