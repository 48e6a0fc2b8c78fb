"""The user guide's example app end to end on the bootstrapped node (issues 31 and 32's proof, in one piece):
`apprafter/Application.cue` with needs and a public hostname of its own, pushed to the bed's git, synced by Argo CD
through our plugin, its claims bound to the integrated ServiceProviders and provisioned by their backends (the
operator pod), its connection Secrets written, its Certificate issued (cert-manager played by the bed's CA), its
hostname's listener added to the stack's `public` Gateway by the operator and programmed by Traefik, its pods Ready,
Argo CD Healthy only then; each step timed from the commit. The app (tests/testbed/shopapp/) writes what a POST
gives it to its Postgres and its Redis and reads both back on GET, asked over HTTPS on its hostname through the
Gateway, as its users would.

pg is served by CloudNativePG (built here; the bed installs it in place of the stack's cloudnative-pg component, whose
upstream chart cannot be fetched here: tests/testbed/cnpg.py), redis by the operator's redis-server backend, the
Gateway by Traefik (tests/testbed/traefik.py; the stack bootstrapped with `--gateway-class traefik`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from tests.argocd.objects import APP_FILE
from tests.testbed.argocd import ARGOCD_API, sync_status
from tests.testbed.gitops import rolled_out
from tests.testbed.node import has_condition
from tests.testbed.procs import wait_for
from tests.testbed.stack_on_node import ARGOCD_NAMESPACE, StackOnNode
from tests.testbed.traefik import GATEWAY_API, Answer, NodeGateway, route_accepted

API = "apprafter.io/v1alpha1"
SHOP, SHOP_ARGO, SHOP_NAMESPACE = "shop", "shop-prod", "shop-prod"  # the guide's names: <app>-<env>
PORT = 3000
# What each need gives the app: its env from the claim (docs/user-guide.md, docs/platform-services.md).
ENV: dict[str, dict[str, str]] = {"pg": {"DATABASE_URL": "claim.pg.url"},
                                  "redis": {"REDIS_URL": "claim.redis.url", "REDIS_PREFIX": "claim.redis.prefix"}}
NEEDS = ("pg", "redis")  # the guide's example: both, each served by its integrated provider's backend
WAIT = 300.0
SESSION_SECRET = "shop-session"  # the guide's `SESSION_KEY: secret: "shop-session/key"`, sealed in the repository
FOLLOW_INTERVAL = "2s"  # how often the operator asks the registry about the shop's tag
HOSTNAME = "shop.acme.example"  # the guide's prod hostname: outside the platform's domain, so the admin allows it


def hostname_policy() -> dict[str, Any]:
    """What the cluster admin writes so that the shop's namespace may ask for its own hostname (docs/operator.md)."""
    return {"apiVersion": API, "kind": "HostnamePolicy", "metadata": {"name": "team-shop"},
            "spec": {"namespaces": [SHOP_NAMESPACE], "allowedHostnames": {"allowed": [HOSTNAME]}}}


def shop_cue(image: str, needs: Sequence[str] = NEEDS) -> str:
    """The guide's example, shaped for the node: the shop's image (a tag in a registry is followed: the operator
    applies its digest and rolls out when it moves), public with its own hostname in prod, its readiness on /healthz
    (200 once every backend answers), one replica in prod."""
    need_lines = "".join(f"\t\tneeds: {need}: {{}}\n" for need in needs)
    if not image.startswith("localhost/"):
        need_lines += f'\t\timagePolicy: {{resolve: "digest", interval: "{FOLLOW_INTERVAL}"}}\n'
    env_lines = "".join(f"\t\t\t{key}: {ref}\n" for need in needs for key, ref in ENV[need].items())
    env_lines += f'\t\t\tSESSION_KEY: secret: "{SESSION_SECRET}/key"\n'
    return f'''apiVersion: "apprafter.io/v1alpha1"
kind:       "Application"
metadata: name: "{SHOP}"
spec: {{
	base: {{
		image: "{image}"
		expose: {{port: {PORT}, network: "public"}}
		health: readiness: {{path: "/healthz", periodSeconds: 1, failureThreshold: 1}}
{need_lines}		env: {{
{env_lines}		}}
	}}
	environments: {{
		staging: replicas: 1
		prod: {{replicas: 1, expose: hostname: "{HOSTNAME}"}}
	}}
}}
'''


@dataclasses.dataclass
class Run:
    """One way from a commit (or a re-created Argo CD Application) to Healthy: seconds from `started` to each
    step, Argo CD's (sync, health) as it changed, and a Healthy seen before the claims and pods were (`early`)."""

    started: float
    revision: str  # the commit Argo CD must be Synced at
    steps: dict[str, float] = dataclasses.field(default_factory=dict)
    transitions: list[tuple[float, str, str]] = dataclasses.field(default_factory=list)
    early: list[str] = dataclasses.field(default_factory=list)
    claim_uids: dict[str, str] = dataclasses.field(default_factory=dict)
    degraded: list[str] = dataclasses.field(default_factory=list)  # what our Application said when Argo CD said so

    def step(self, name: str) -> None:
        self.steps[name] = round(time.monotonic() - self.started, 1)


class Outcome:
    """What a call in another thread returned or raised, awaited with a timeout."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None

    def run(self, call: Callable[..., Any], *args: Any) -> None:
        try:
            self.value = call(*args)
        except BaseException as exc:
            self.error = exc
        finally:
            self.done.set()

    def result(self, timeout: float) -> Any:
        if not self.done.wait(timeout):
            raise TimeoutError(f"no outcome in {timeout} s")
        if self.error is not None:
            raise self.error
        return self.value


def claim_names(needs: Sequence[str]) -> set[str]:
    return {f"{SHOP}-{need}" for need in needs}


def claims_ready(stack: StackOnNode, needs: Sequence[str]) -> str:
    """'' when every claim of the app is ready, else which is not (for a Healthy seen too early)."""
    waiting = []
    for name in sorted(claim_names(needs)):
        claim = stack.node.get(API, "ResourceClaim", name, SHOP_NAMESPACE) or {}
        if (claim.get("status") or {}).get("ready") is not True:
            waiting.append(name)
    return ", ".join(waiting)


def watch_argo(stack: StackOnNode, run: Run, image: str, needs: Sequence[str]) -> Callable[[dict[str, Any]], bool]:
    """A predicate on the Argo CD Application: records each (sync, health) change; true once Synced at the
    revision and Healthy, checked against the claims and pods at that look (a Healthy before is `early`)."""
    def look(app: dict[str, Any]) -> bool:
        sync, health, revision = sync_status(app)
        if not run.transitions or run.transitions[-1][1:] != (sync, health):
            run.transitions.append((round(time.monotonic() - run.started, 1), sync, health))
            if health == "Degraded":  # Argo CD v3 keeps a resource's health message out of its Application
                ours = stack.node.get(API, "Application", SHOP, SHOP_NAMESPACE) or {}
                run.degraded += [str(c.get("message")) for c in (ours.get("status") or {}).get("conditions") or []
                                 if c.get("type") == "Ready"]
        if (sync, health, revision) != ("Synced", "Healthy", run.revision):
            return False
        waiting = claims_ready(stack, needs)
        routed = route_accepted(stack.node.get(GATEWAY_API, "HTTPRoute", SHOP, SHOP_NAMESPACE) or {}) is not None
        if waiting or not routed or not rolled_out(stack.node, SHOP_NAMESPACE, SHOP):
            run.early.append(f"Healthy at {time.monotonic() - run.started:.1f} s with claims not ready: "
                             f"{waiting or '-'}; route accepted: {routed}; "
                             f"rolled out: {rolled_out(stack.node, SHOP_NAMESPACE, SHOP)}")
            return False
        # Healthy on a release before `image`: a followed tag on a private registry first runs as the tag, until the
        # pull secret the SourceCredential attaches lets the operator ask for its digest (docs/open-ends.md)
        return rolled_out(stack.node, SHOP_NAMESPACE, SHOP, image)
    return look


def to_healthy(stack: StackOnNode, gateway: NodeGateway, image: str, needs: Sequence[str], run: Run) -> Run:
    """Wait for each step in order (watches), timing each from `run.started`, while a second watch follows Argo
    CD's Application; cert-manager's part played when the Certificate appears; returns once it is Healthy."""
    node, argocd = stack.node, stack.argocd
    assert argocd is not None
    names = claim_names(needs)
    # Argo CD's watch in a daemon thread: a failing step below raises at once instead of waiting for it to time out.
    healthy = Outcome()
    threading.Thread(target=healthy.run, args=(argocd.wait_app, SHOP_ARGO, "Synced and Healthy with the shop's pods "
                                               "Ready", watch_argo(stack, run, image, needs), WAIT),
                     daemon=True, name="argo-cd-watch").start()

    def claims(predicate: Callable[[dict[str, Any]], bool]) -> Callable[[list[dict[str, Any]]], Any]:
        def every(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]] | None:
            found = {c["metadata"]["name"]: c for c in items if c["metadata"]["name"] in names and predicate(c)}
            return found if names <= found.keys() else None
        return every
    node.wait_list(API, "ResourceClaim", SHOP_NAMESPACE,
                   claims(lambda c: bool((c.get("status") or {}).get("provider")) and has_condition(c, "Bound")),
                   timeout=WAIT, what=f"claims {names} bound")
    run.step("claims bound")
    found = node.wait_list(API, "ResourceClaim", SHOP_NAMESPACE,
                           claims(lambda c: (c.get("status") or {}).get("ready") is True), timeout=WAIT,
                           what=f"claims {names} ready (backends provisioned)")
    run.claim_uids = {name: claim["metadata"]["uid"] for name, claim in found.items()}
    run.step("backends provisioned (claims ready)")
    secrets = {f"{SHOP}-{need}-conn" for need in needs}
    node.wait_list("v1", "Secret", SHOP_NAMESPACE, lambda items: secrets <= {s["metadata"]["name"] for s in items},
                   timeout=WAIT, what=f"connection Secrets {secrets}")
    run.step("connection Secrets written")
    node.wait("cert-manager.io/v1", "Certificate", SHOP, SHOP_NAMESPACE, lambda c: c, timeout=WAIT,
              what="the operator's Certificate for the shop's hostname")
    gateway.issue(SHOP, SHOP_NAMESPACE)
    run.step("Certificate issued (cert-manager played)")
    node.wait("apps/v1", "Deployment", SHOP, SHOP_NAMESPACE, lambda _: rolled_out(node, SHOP_NAMESPACE, SHOP, image),
              timeout=WAIT, what="the shop's pods Ready")
    run.step("pods Ready")
    node.wait(GATEWAY_API, "HTTPRoute", SHOP, SHOP_NAMESPACE, route_accepted, timeout=WAIT,
              what="the shop's route Accepted by Traefik on its hostname's listener")
    run.step("route Accepted (the operator's listener programmed)")
    healthy.result(WAIT)
    run.step("Argo CD Healthy")
    return run


def push_and_sync(stack: StackOnNode, gateway: NodeGateway, image: str, deployed: str, cert_url: str,
                  session_key: str, needs: Sequence[str] = NEEDS) -> Run:
    """The user's commits to their repository on the bed's git (the app, then its session key sealed with the
    certificate at `cert_url`), then `apprafter app add` (the tenants' AppProject, the namespace the admin made);
    each step until Healthy (the Deployment running `deployed`) timed from the first commit."""
    assert stack.git is not None
    started = time.monotonic()
    stack.git.create(SHOP, {APP_FILE: shop_cue(image, needs)}, message="the shop")
    # the guide's Secrets step: the session key sealed with the cluster's certificate, committed beside the app
    sealed = subprocess.run([sys.executable, "-m", "apprafter", "secret", "seal", SESSION_SECRET, "key", "-e", "prod",
                             "--cert", cert_url], cwd=stack.git.base / SHOP, input=session_key, capture_output=True,
                            text=True, timeout=120, check=False)
    assert sealed.returncode == 0, sealed.stderr
    revision = stack.git.commit(SHOP, {}, "the session key, sealed")
    app_cli(stack, "add", "-e", "prod", "--repo", stack.git.url(SHOP))
    return to_healthy(stack, gateway, deployed, needs, Run(started, revision))


def commit(stack: StackOnNode, image: str, needs: Sequence[str], message: str) -> str:
    """The user's next commit to the shop's repository, and the refresh its git webhook would ask of Argo CD."""
    assert stack.git is not None
    revision = stack.git.commit(SHOP, {APP_FILE: shop_cue(image, needs)}, message)
    stack.node.apply({"apiVersion": ARGOCD_API, "kind": "Application",
                      "metadata": {"name": SHOP_ARGO, "namespace": ARGOCD_NAMESPACE,
                                   "annotations": {"argocd.argoproj.io/refresh": "normal"}}},
                     field_manager="git-webhook")
    return revision


def app_cli(stack: StackOnNode, command: str, *args: str, timeout: float = 120) -> str:
    """`apprafter app COMMAND ...` as the user runs it in their checkout, against the node's API server; stdout."""
    assert stack.git is not None
    done = subprocess.run([sys.executable, "-m", "apprafter", "app", command, *args, "--kubeconfig",
                           str(stack.node.kubeconfig)], cwd=stack.git.base / SHOP, capture_output=True, text=True,
                          timeout=timeout, check=False, env={k: v for k, v in os.environ.items() if k != "KUBECONFIG"})
    assert done.returncode == 0, f"apprafter app {command}: exit {done.returncode}\n{done.stderr}"
    return done.stdout


@contextlib.contextmanager
def forwarded(stack: StackOnNode) -> Iterator[str]:
    """`apprafter app open shop --forward` running (a local port to one of the shop's pods): its URL; stopped with
    Ctrl-C (SIGINT) after the block, as its user stops it."""
    assert stack.git is not None
    process = subprocess.Popen([sys.executable, "-m", "apprafter", "app", "open", SHOP, "--forward", "--no-browser",
                                "--kubeconfig", str(stack.node.kubeconfig)], cwd=stack.git.base / SHOP,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={k: v for k, v in os.environ.items() if k != "KUBECONFIG"})
    try:
        ready, _, _ = select.select([process.stdout], [], [], 60)
        assert ready and process.stdout is not None, "apprafter app open printed no URL in 60 s"
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), (url, process.stderr.read() if process.poll() is not None else "")
        yield url
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    assert process.returncode == 0, process.stderr.read() if process.stderr else ""


def delete_and_recreate(stack: StackOnNode, gateway: NodeGateway, deployed: str, revision: str,
                        needs: Sequence[str] = NEEDS) -> Run:
    """`apprafter app remove` (Argo CD's cascade: our Application goes, then its Deployment and claims), wait until
    they are gone, `apprafter app add` again; timed from the new Argo CD Application to Healthy."""
    node = stack.node
    assert stack.git is not None
    # the CLI's own bound first: on a timeout it says what Argo CD still waits for
    app_cli(stack, "remove", SHOP, "--yes", "--wait", "--timeout", f"{WAIT:.0f}", timeout=WAIT + 60)
    assert node.get(ARGOCD_API, "Application", SHOP_ARGO, ARGOCD_NAMESPACE) is None
    node.wait_gone(API, "Application", SHOP, SHOP_NAMESPACE, timeout=WAIT)
    for name in sorted(claim_names(needs)):
        node.wait_gone(API, "ResourceClaim", name, SHOP_NAMESPACE, timeout=WAIT)
    node.wait_list("v1", "Pod", SHOP_NAMESPACE, lambda items: not items or None, timeout=WAIT,
                   what="the shop's pods gone")
    started = time.monotonic()
    app_cli(stack, "add", "-e", "prod", "--repo", stack.git.url(SHOP))
    return to_healthy(stack, gateway, deployed, needs, Run(started, revision))


def ask(gateway: NodeGateway, method: str, path: str, body: bytes | None = None) -> Answer:
    """One request as the shop's users make it: HTTPS on its hostname, resolved to the Gateway's address, the
    certificate verified against the CA that played its issuer."""
    headers = {"Content-Type": "text/plain"} if body is not None else None
    return gateway.curl(f"https://{HOSTNAME}{path}", HOSTNAME, method=method, headers=headers, body=body)


def serving(gateway: NodeGateway) -> None:
    """Until /healthz answers 200 through the Gateway: Traefik applies a new configuration (the listener, the
    route's endpoints) a moment after it writes the status that says so, and nothing in the API says when."""
    def answers() -> bool | None:
        try:
            return True if ask(gateway, "GET", "/healthz").status == 200 else None
        except subprocess.CalledProcessError:
            return None
    wait_for(f"https://{HOSTNAME}/healthz to answer through the Gateway", answers, 60, interval=0.2)


def post_item(gateway: NodeGateway, value: str) -> dict[str, Any]:
    answer = ask(gateway, "POST", "/items", value.encode())
    assert answer.status == 201, (answer.status, answer.body)
    return dict(json.loads(answer.body))


def get_items(gateway: NodeGateway) -> dict[str, Any]:
    answer = ask(gateway, "GET", "/items")
    assert answer.status == 200, (answer.status, answer.body)
    return dict(json.loads(answer.body))
