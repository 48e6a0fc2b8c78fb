"""Demo: the GitOps loop on loopback, step by step, through Argo CD's own components, the AppRafter operator and
its admission webhook; prints what Argo CD shows and what each step cost. Run it with scripts/demo_gitops.sh (it
sets the paths); `--keep` leaves everything running until Enter, with the kubeconfig and Argo CD's address
printed, and keeps the logs. `--node` runs it on the node tier (tests/testbed/node.py): real pods from the test
image, and each step also times when the pods are Available (run that under `flock /tmp/apprafter-heavy.lock`).
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.argocd.objects import APP_FILE, HELLO, NEXT_REPOSITORY, PROD, SCALED, STAGING, TO_ZERO, served
from tests.testbed.argocd import conditions, operation_phase, sync_status
from tests.testbed.gitops import APPROVER, GitOpsLoop, rolled_out, start_loop
from tests.testbed.kube import PERSON, KubeTestBed, start_kube
from tests.testbed.node import NodeTestBed, start_node
from tests.testbed.procs import BedError
from tests.testbed.rollouts import start_rollouts
from tests.testbed.testapp import build_test_app
from toolchain.tools import resolve

REPO = "hello"


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
        if health.get("message"):
            print(f"   health of {node['kind']}/{node['name']}: {health['status']}: {health['message']}")


@dataclasses.dataclass(frozen=True)
class Seen:
    """One look at the cluster: our Application, the Argo CD Application, and a MigrationPlan (if named)."""

    cr: dict[str, Any]
    app: dict[str, Any]
    plan: dict[str, Any]
    rolled: bool = False  # on the node: the Deployment rolled out, every pod of its image Available

    @property
    def generation(self) -> int:
        return int(self.cr.get("metadata", {}).get("generation", 0))

    def reconciled(self, phase: str) -> bool:
        """The operator wrote its status for the current generation, in `phase`."""
        status = self.cr.get("status") or {}
        return status.get("observedGeneration") == self.generation and status.get("phase") == phase

    def argo(self, sync: str, health: str | None, revision: str) -> bool:
        got = sync_status(self.app)
        return got[0] == sync and got[2] == revision and (health is None or got[1] == health) and (
            health is not None or operation_phase(self.app) == "Succeeded")


Milestones = dict[str, Callable[[Seen], bool]]


def track(loop: GitOpsLoop, label: str, action: Callable[[], object], milestones: Milestones, *,
          app: str = PROD, plan: str = "", timeout: float = 120.0) -> None:
    """Run `action`, then look every 20 ms and record in loop.timings when each milestone first held (seconds
    after the action began), as "<label>: <milestone>"."""
    started = time.monotonic()
    action()
    pending = dict(milestones)
    while pending:
        seen = Seen(loop.apprafter_application("hello", app) or {}, loop.argocd.get(app),
                    (loop.migration_plan(plan, app) or {}) if plan else {},
                    isinstance(loop.kube, NodeTestBed) and rolled_out(loop.kube, app, "hello"))
        elapsed = time.monotonic() - started
        for name, holds in list(pending.items()):
            if holds(seen):
                loop.timings[f"{label}: {name}"] = elapsed
                del pending[name]
        if elapsed > timeout:
            raise BedError(f"{label}: no {', '.join(pending)} after {timeout:.0f}s\n{loop.argocd.logs()}")
        time.sleep(0.02)


def plan_of(loop: GitOpsLoop, namespace: str) -> str:
    cr = loop.apprafter_application("hello", namespace) or {}
    return str((cr.get("status") or {}).get("migrationPlan", ""))


def commit(loop: GitOpsLoop, label: str, text: str, message: str, phase: str, health: str) -> str:
    """Commit `text`, announce it as Argo CD's git webhook would, and time each step until Argo CD shows it."""
    generation = int((loop.apprafter_application("hello", PROD) or {})["metadata"]["generation"])
    sha = loop.git.commit(REPO, {APP_FILE: text}, message)
    track(loop, label, lambda: loop.argocd.refresh(PROD), {
        "Argo CD applied the new spec": lambda s: s.generation > generation,
        f"the operator reconciled it ({phase})": lambda s: s.generation > generation and s.reconciled(phase),
        "Argo CD reports Synced, sync operation Succeeded": lambda s: s.argo("Synced", None, sha),
        f"Argo CD reports {health}": lambda s: s.argo("Synced", health, sha)})
    return sha


def created(loop: GitOpsLoop, label: str, app: str, environment: str | None, revision: str) -> None:
    """Create the Argo CD Application `app` and time each step until Argo CD shows it Healthy."""
    spec = loop.application(app, REPO, app, environment=environment)
    track(loop, label, lambda: loop.argocd.apply(spec), {
        "our Application in the cluster": lambda s: bool(s.cr),
        "the operator applied it (Ready)": lambda s: s.reconciled("Ready"),
        "Argo CD reports Synced, sync operation Succeeded": lambda s: s.argo("Synced", None, revision),
        "Argo CD reports Healthy": lambda s: s.argo("Synced", "Healthy", revision)}, app=app)


def approved(loop: GitOpsLoop, label: str, approve: Callable[[], object], plan: str, revision: str) -> None:
    """Approve `plan` with `approve` and time each step until Argo CD shows the app Healthy again."""
    track(loop, label, approve, {
        "the operator applied it (plan applied)": lambda s: (s.plan.get("status") or {}).get("phase") == "applied",
        "Argo CD reports Healthy": lambda s: s.argo("Synced", "Healthy", revision)}, plan=plan)


def walk(loop: GitOpsLoop) -> None:
    say(f"a repository at {loop.git.url(REPO)} with apprafter/Application.cue (environments staging, prod)")
    head = loop.git.create(REPO, {APP_FILE: HELLO})
    say(f"Argo CD Application {PROD}: our plugin, environment=prod as a parameter, auto-sync with prune")
    created(loop, "first Application (cold caches)", PROD, "prod", head)
    show(loop, PROD)

    say("a commit: prod runs 4 replicas (a soft change: the operator applies it at once)")
    commit(loop, "soft change", SCALED, "prod: 4 replicas", "Ready", "Healthy")
    show(loop, PROD)

    say("a commit with a gated change: prod's image comes from another repository")
    head = commit(loop, "gated change", NEXT_REPOSITORY, "prod: the next image repository",
                  "AwaitingMigrationApproval", "Suspended")
    name = plan_of(loop, PROD)
    show(loop, PROD)
    say(f"{PERSON} approves it: apprafter migration approve {name} -n {PROD}")
    result: list[subprocess.CompletedProcess[str]] = []

    def cli() -> None:
        started = time.monotonic()
        result.append(loop.approve(name, PROD))
        loop.timings["approved with the CLI: the command returned"] = time.monotonic() - started

    approved(loop, "approved with the CLI", cli, name, head)
    print("   " + (result[0].stdout or result[0].stderr).strip())
    show(loop, PROD)

    say("a commit with another gated change: prod scaled to zero")
    head = commit(loop, "second gated change", TO_ZERO, "prod: scale to zero", "AwaitingMigrationApproval",
                  "Suspended")
    name = plan_of(loop, PROD)
    node = next(n for n in loop.argocd.resource_tree(APPROVER.name, PROD)
                if (n["kind"], n["name"]) == ("MigrationPlan", name))
    say(f"the Approve action on {name}, as Argo CD user '{APPROVER.name}' ({APPROVER.role}), as the UI calls it")
    answers: list[int] = []
    approved(loop, "approved with the Approve action", lambda: answers.append(
        loop.argocd.resource_action(APPROVER.name, PROD, node, "approve").status_code), name, head)
    status = (loop.migration_plan(name, PROD) or {}).get("status") or {}
    print(f"   HTTP {answers[0]}; plan {status.get('phase')}, approved by {status.get('approvedBy')} "
          "(argocd-server's ServiceAccount: the person is in Argo CD's ResourceActionRan Event)")
    show(loop, PROD)

    say("a commit with a broken Application.cue (port 70000)")
    broken = loop.git.commit(REPO, {APP_FILE: TO_ZERO.replace("port: 8080", "port: 70000")}, "port out of range")
    track(loop, "broken commit", lambda: loop.argocd.refresh(PROD), {
        "Argo CD reports ComparisonError": lambda s: bool(conditions(s.app, "ComparisonError"))})
    app = loop.argocd.get(PROD)
    print("   ComparisonError:", conditions(app, "ComparisonError")[0]["message"])
    last = (app["status"].get("history") or [{}])[-1].get("revision", "")
    print(f"   Argo CD's last sync is still {last[:8]} (not {broken[:8]}); the apprafter.io Application is "
          "still there:", loop.apprafter_application("hello", PROD) is not None)

    say("the fix (and LOG_LEVEL warn)")
    head = commit(loop, "fix", TO_ZERO.replace('LOG_LEVEL: "info"', 'LOG_LEVEL: "warn"'), "fix the port", "Ready",
                  "Healthy")
    show(loop, PROD)

    say(f"a second environment: Argo CD Application {STAGING}, environment from its name, own namespace")
    created(loop, "second environment", STAGING, None, head)
    show(loop, STAGING)


def node_commit(loop: GitOpsLoop, label: str, text: str, message: str, phase: str, health: str) -> str:
    """commit(), with the moment the new pods are Available (before Argo CD may call the app Healthy)."""
    generation = int((loop.apprafter_application("hello", PROD) or {})["metadata"]["generation"])
    sha = loop.git.commit(REPO, {APP_FILE: text}, message)
    milestones: Milestones = {
        "Argo CD applied the new spec": lambda s: s.generation > generation,
        "Argo CD reports Synced, sync operation Succeeded": lambda s: s.argo("Synced", None, sha)}
    if phase == "Ready":
        milestones["pods Available"] = lambda s: s.generation > generation and s.rolled
    milestones[f"the operator reports it ({phase})"] = lambda s: s.generation > generation and s.reconciled(phase)
    milestones[f"Argo CD reports {health}"] = lambda s: s.argo("Synced", health, sha)
    track(loop, label, lambda: loop.argocd.refresh(PROD), milestones, timeout=300)
    return sha


def walk_node(loop: GitOpsLoop, image: str) -> None:
    """The walk on real pods: each step until the pods are Available and Argo CD says so."""
    say(f"a repository at {loop.git.url(REPO)}: the test image {image}, an HTTP readiness probe, prod 2 replicas")
    head = loop.git.create(REPO, {APP_FILE: served(image)})
    say(f"Argo CD Application {PROD}: our plugin, environment=prod, auto-sync with prune")
    spec = loop.application(PROD, REPO, PROD, environment="prod")
    track(loop, "first Application (cold caches)", lambda: loop.argocd.apply(spec), {
        "our Application in the cluster": lambda s: bool(s.cr),
        "pods Available": lambda s: s.rolled,
        "the operator reports it (Ready)": lambda s: s.reconciled("Ready"),
        "Argo CD reports Healthy": lambda s: s.argo("Synced", "Healthy", head)}, timeout=300)
    show(loop, PROD)
    say("a commit: prod runs 3 replicas (soft: applied at once; Healthy once the third pod is Available)")
    node_commit(loop, "soft change on pods", served(image, 3), "prod: 3 replicas", "Ready", "Healthy")
    say("a commit with a tag that was never pushed: the new pod cannot pull it; the old ones keep serving")
    missing = image.rpartition(":")[0] + ":no-such-tag"
    node_commit(loop, "image that cannot run", served(missing, 3), "prod: a missing tag", "Failed", "Degraded")
    show(loop, PROD)
    say("the revert")
    node_commit(loop, "revert", served(image, 3), "prod: back to the image that runs", "Ready", "Healthy")
    say("a gated change (the image from another repository), approved with the CLI")
    repository, _, tag = image.rpartition(":")
    other = f"{repository}-next:{tag}"
    assert isinstance(loop.kube, NodeTestBed)
    loop.kube.ctr("images", "tag", "--force", image, other, check=True)
    head = node_commit(loop, "gated change on pods", served(other, 3), "prod: another repository",
                       "AwaitingMigrationApproval", "Suspended")
    name = plan_of(loop, PROD)
    track(loop, "approved with the CLI, on pods", lambda: loop.approve(name, PROD), {
        "the operator applied it (plan applied)": lambda s: (s.plan.get("status") or {}).get("phase") == "applied",
        "pods Available": lambda s: s.rolled and ((s.cr.get("status") or {}).get("image") == other),
        "Argo CD reports Healthy": lambda s: s.argo("Synced", "Healthy", head)}, plan=name, timeout=300)
    show(loop, PROD)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", action="store_true", help="keep everything running until Enter")
    parser.add_argument("--node", action="store_true", help="on the node tier: real pods (needs the heavy lock)")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="apprafter-gitops-", dir="/tmp"))
    started = time.monotonic()
    cluster = ("a node (etcd, kube-apiserver, controllers, containerd, kubelet, kube-proxy)" if args.node
               else "etcd + kube-apiserver")
    say(f"starting {cluster}, the AppRafter webhook and operator, Redis, git daemon, Argo CD (work dir {workdir})")
    kube: KubeTestBed = (start_node(workdir / "node", users={PERSON: ()}) if args.node
                         else start_kube(workdir / "kube", users={PERSON: ()}))
    stand_in = None if args.node else start_rollouts(kube)  # the bare API server runs no Deployment controller
    image = kube.import_image(build_test_app()) if isinstance(kube, NodeTestBed) else ""
    kube_seconds = time.monotonic() - started
    try:
        started = time.monotonic()
        loop = start_loop(kube, workdir / "gitops", (PROD,) if args.node else (PROD, STAGING))
        try:
            loop.timings["start-up: the cluster + pinned CRDs" + (" + the test image" if args.node else "")] = (
                kube_seconds)
            loop.timings["start-up: our CRDs, webhook, operator, Redis, git daemon, plugin server, Argo CD"] = (
                time.monotonic() - started)
            if args.node:
                walk_node(loop, image)
            else:
                walk(loop)
            say("what each step cost (seconds)")
            for step, seconds in loop.timings.items():
                print(f"   {seconds:6.2f}  {step}")
            if args.keep:
                say(f"running: KUBECONFIG={kube.kubeconfig} (admin; {PERSON}: {loop.person_kubeconfig}); Argo CD "
                    f"API {loop.argocd.server_url} (user {APPROVER.name}, password {APPROVER.password}); logs "
                    f"under {workdir}")
                input("   press Enter to tear everything down ")
        finally:
            loop.stop()
    finally:
        if stand_in is not None:
            stand_in.stop()
        kube.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
