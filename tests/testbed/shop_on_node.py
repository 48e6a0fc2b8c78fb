"""The user guide's example app end to end on the bootstrapped node (issue 31's proof): `apprafter/Application.cue`
with needs, pushed to the bed's git, synced by Argo CD through our plugin, its claims bound to the integrated
ServiceProviders and provisioned by their backends (the operator pod), its connection Secrets written, its pods
Ready, Argo CD Healthy only then; each step timed from the commit. The app (tests/testbed/shopapp/) writes what a
POST gives it to its Postgres and its Redis and reads both back on GET.

pg is served by CloudNativePG (built here; the bed installs it in place of the stack's cloudnative-pg component, whose
upstream chart cannot be fetched here: tests/testbed/cnpg.py), redis by the operator's redis-server backend.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from tests.argocd.objects import APP_FILE
from tests.testbed.argocd import ARGOCD_API, sync_status
from tests.testbed.gitops import rolled_out
from tests.testbed.node import RequestFailed, has_condition
from tests.testbed.procs import wait_for
from tests.testbed.stack_on_node import ARGOCD_NAMESPACE, StackOnNode, user_application

API = "apprafter.io/v1alpha1"
SHOP, SHOP_ARGO, SHOP_NAMESPACE = "shop", "shop-prod", "shop-prod"  # the guide's names: <app>-<env>
PORT = 3000
# What each need gives the app: its env from the claim (docs/user-guide.md, docs/platform-services.md).
ENV: dict[str, dict[str, str]] = {"pg": {"DATABASE_URL": "claim.pg.url"},
                                  "redis": {"REDIS_URL": "claim.redis.url", "REDIS_PREFIX": "claim.redis.prefix"}}
NEEDS = ("pg", "redis")  # the guide's example: both, each served by its integrated provider's backend
WAIT = 300.0


def shop_cue(image: str, needs: Sequence[str] = NEEDS) -> str:
    """The guide's example, shaped for the node: the shop's image, internal (no gateway programs routes here), its
    readiness on /healthz (200 once every backend answers), one replica in prod."""
    need_lines = "".join(f"\t\tneeds: {need}: {{}}\n" for need in needs)
    env_lines = "".join(f"\t\t\t{key}: {ref}\n" for need in needs for key, ref in ENV[need].items())
    return f'''apiVersion: "apprafter.io/v1alpha1"
kind:       "Application"
metadata: name: "{SHOP}"
spec: {{
	base: {{
		image: "{image}"
		expose: {{port: {PORT}, network: "internal"}}
		health: readiness: {{path: "/healthz", periodSeconds: 1, failureThreshold: 1}}
{need_lines}		env: {{
{env_lines}		}}
	}}
	environments: {{
		staging: replicas: 1
		prod: replicas: 1
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
        if (sync, health, revision) != ("Synced", "Healthy", run.revision):
            return False
        waiting = claims_ready(stack, needs)
        if waiting or not rolled_out(stack.node, SHOP_NAMESPACE, SHOP, image):
            run.early.append(f"Healthy at {time.monotonic() - run.started:.1f} s with claims not ready: "
                             f"{waiting or '-'}; rolled out: {rolled_out(stack.node, SHOP_NAMESPACE, SHOP, image)}")
            return False
        return True
    return look


def to_healthy(stack: StackOnNode, image: str, needs: Sequence[str], run: Run) -> Run:
    """Wait for each step in order (watches), timing each from `run.started`, while a second watch follows Argo
    CD's Application; returns once it is Healthy."""
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
    node.wait("apps/v1", "Deployment", SHOP, SHOP_NAMESPACE, lambda _: rolled_out(node, SHOP_NAMESPACE, SHOP, image),
              timeout=WAIT, what="the shop's pods Ready")
    run.step("pods Ready")
    healthy.result(WAIT)
    run.step("Argo CD Healthy")
    return run


def push_and_sync(stack: StackOnNode, image: str, needs: Sequence[str] = NEEDS) -> Run:
    """The user's commit to their repository on the bed's git, their Argo CD Application (cascading: deleting it
    deletes the app); each step until Healthy timed from the commit."""
    assert stack.git is not None
    started = time.monotonic()
    revision = stack.git.create(SHOP, {APP_FILE: shop_cue(image, needs)}, message="the shop")
    apply_argo(stack)
    return to_healthy(stack, image, needs, Run(started, revision))


def apply_argo(stack: StackOnNode) -> None:
    assert stack.git is not None
    stack.node.apply(user_application(stack.git, name=SHOP_ARGO, repository=SHOP, namespace=SHOP_NAMESPACE,
                                      cascade=True), namespace=ARGOCD_NAMESPACE)


def delete_and_recreate(stack: StackOnNode, image: str, revision: str, needs: Sequence[str] = NEEDS) -> Run:
    """Delete the Argo CD Application (cascading: our Application, its Deployment and claims go), wait until they are
    gone, create it again; timed from the new Application to Healthy."""
    node = stack.node
    node.delete(ARGOCD_API, "Application", SHOP_ARGO, ARGOCD_NAMESPACE)
    node.wait_gone(ARGOCD_API, "Application", SHOP_ARGO, ARGOCD_NAMESPACE, timeout=WAIT)
    node.wait_gone(API, "Application", SHOP, SHOP_NAMESPACE, timeout=WAIT)
    for name in sorted(claim_names(needs)):
        node.wait_gone(API, "ResourceClaim", name, SHOP_NAMESPACE, timeout=WAIT)
    node.wait_list("v1", "Pod", SHOP_NAMESPACE, lambda items: not items or None, timeout=WAIT,
                   what="the shop's pods gone")
    started = time.monotonic()
    apply_argo(stack)
    return to_healthy(stack, image, needs, Run(started, revision))


def service_url(stack: StackOnNode, path: str) -> str:
    """The shop's Service at its cluster IP (reached from the node's network namespace, through kube-proxy)."""
    service = stack.node.get("v1", "Service", SHOP, SHOP_NAMESPACE) or {}
    return f"http://{service['spec']['clusterIP']}:{service['spec']['ports'][0]['port']}{path}"


def serving(stack: StackOnNode) -> None:
    """Until the Service answers /healthz: kube-proxy programs a new endpoint a moment after the EndpointSlice says it
    is ready (until then a Service without endpoints refuses connections), and nothing in the API says when."""
    def answers() -> bool | None:
        try:
            return True if stack.node.request("GET", service_url(stack, "/healthz"), timeout=5).status_code == 200 \
                else None
        except RequestFailed:
            return None
    wait_for("the shop's Service to answer through kube-proxy", answers, 30, interval=0.1)


def post_item(stack: StackOnNode, value: str) -> dict[str, Any]:
    resp = stack.node.request("POST", service_url(stack, "/items"), body=value.encode(),
                              headers={"Content-Type": "text/plain"})
    assert resp.status_code == 201, (resp.status_code, resp.text)
    return dict(json.loads(resp.content))


def get_items(stack: StackOnNode) -> dict[str, Any]:
    resp = stack.node.request("GET", service_url(stack, "/items"))
    assert resp.status_code == 200, (resp.status_code, resp.text)
    return dict(json.loads(resp.content))
