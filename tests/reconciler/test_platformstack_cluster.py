"""The PlatformStack controller end to end (issue 13's proof): `apprafter operator` as a subprocess against the test
bed's kube-apiserver (Argo CD's CRDs installed), Debian's docker-registry wanting credentials (the token protocol
ghcr.io speaks), charts built with `apprafter stack build --version`, pushed with `stack push` and signed with
`stack sign` (the real cosign). The operator reads the registry with a pull-only account from a dockerconfigjson
Secret and verifies with the public keys of another Secret (either key may match)."""

from __future__ import annotations

import base64
import itertools
import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.platform_stack.conftest import applications, helm_template, ok
from tests.platform_stack.conftest import cli as stack_cli
from tests.reconciler.helpers import wait, wait_showing
from tests.reconciler.operator_proc import FAST, Operator, operator_fixture
from tests.renderer.helpers import run_cli
from tests.testbed.distribution import AuthRegistry, distribution
from tests.testbed.kube import KubeTestBed, _rejected
from tests.testbed.stack_releases import Publisher, build_releases, key_pairs

pytestmark = pytest.mark.testbed

API, ARGO = "apprafter.io/v1alpha1", "argoproj.io/v1alpha1"
NS, NAME = "apprafter-system", "default"
KEYS, CREDENTIALS = "platform-stack-keys", "registry-credentials"
# Every version the tests publish: the component a release moves and the class its compatibility entry gives it.
HISTORY = [f"1.1.{n}" for n in range(1, 11)]
RELEASES: list[tuple[str, tuple[str, str, str] | None, dict[str, str]]] = [
    ("1.0.0", None, {}),
    ("1.1.0", ("keda", '"2.17.2"', '"2.18.0"'), {}),  # safe
    *((v, None, {}) for v in HISTORY),
    ("1.2.0", None, {}),
    ("1.3.0", None, {}),
    ("2.0.0", ("cloudnative-pg", '"0.25.0"', '"0.26.0"'), {"cloudnative-pg": "data-migration"}),  # gated
    ("2.1.0-rc.1", ("cilium", '"1.17.6"', '"1.18.0"'), {"cilium": "requires-restart"}),  # gated
    ("2.2.0-alpha.1", None, {}),
    ("3.0.0", None, {}),  # needs a Kubernetes no cluster runs (MINIMUMS)
]
MINIMUMS = {"3.0.0": "1.99.0"}


# --- charts, keys, the registry ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def charts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """version -> chart .tgz of every release above."""
    return build_releases(tmp_path_factory.mktemp("charts"), RELEASES, MINIMUMS)


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path, str]]:
    """`release` and `retired` are in the Secret the operator verifies with, `other` is not."""
    return key_pairs(tmp_path_factory.mktemp("keys"), ("release", "retired", "other"))


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthRegistry]:
    """A registry of this module's own (it is stopped and started again by a test), speaking the token protocol."""
    with distribution(tmp_path_factory.mktemp("registry"), "token") as reg:
        yield reg


@pytest.fixture(scope="module")
def publisher(registry: AuthRegistry, charts: dict[str, Path], keys: dict[str, tuple[Path, Path, str]],
              tmp_path_factory: pytest.TempPathFactory) -> Publisher:
    return Publisher(registry, charts, keys, tmp_path_factory.mktemp("publisher"))


@pytest.fixture(scope="module")
def pub(publisher: Publisher) -> str:
    """One repository with the releases from 1.1.0 on, each signed with the release key."""
    return publisher.publish("pub", [(v, "release") for v, _, _ in RELEASES
                                     if v not in ("1.0.0", "1.2.0", "1.3.0", "3.0.0")])


# --- the cluster ---------------------------------------------------------------------------------------------

# The operator as its ServiceAccount with the operator chart's own RBAC, here and in Argo CD's namespace (what an
# install grants it, so every test also proves those permissions are enough); fast resync and backoff.
operator = operator_fixture("--no-leader-elect", *FAST, rbac=(NS, "argocd"), name="platformstack")


@pytest.fixture(scope="module")
def cluster(bed: KubeTestBed, registry: AuthRegistry, keys: dict[str, tuple[Path, Path, str]]) -> Iterator[KubeTestBed]:
    """The namespaces, the two Secrets (keys; a pull-only login), and nothing of the PlatformStack left behind."""
    for namespace in (NS, "argocd"):
        bed.ensure_namespace(namespace)
    pubs = {f"{name}.pub": base64.b64encode(keys[name][1].read_bytes()).decode() for name in ("retired", "release")}
    bed.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": KEYS, "namespace": NS}, "data": pubs})
    login = base64.b64encode(f"{registry.reader}:{registry.reader_password}".encode()).decode()
    config = json.dumps({"auths": {registry.url: {"auth": login}}}).encode()
    bed.apply({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
               "metadata": {"name": CREDENTIALS, "namespace": NS},
               "data": {".dockerconfigjson": base64.b64encode(config).decode()}})
    try:
        yield bed
    finally:
        clean(bed)


def clean(bed: KubeTestBed, operator: Operator | None = None) -> None:
    bed.delete(API, "PlatformStack", NAME, NS)
    if operator is not None:  # a pass of the previous test still running would apply the umbrella again
        idle(operator)
    bed.delete(ARGO, "Application", "apprafter-platform", "argocd")
    for plan in platform_plans(bed):
        bed.delete(API, "MigrationPlan", plan["metadata"]["name"], NS)
    for child in ("keda",):
        bed.delete(ARGO, "Application", child, "argocd")


def idle(operator: Operator, quiet: float = 1.0) -> None:
    """Wait until the PlatformStack controller has finished no pass for `quiet` seconds."""
    seen = {"count": -1.0, "since": time.monotonic()}

    def still() -> bool | None:
        count = operator.metric("apprafter_reconcile_total", controller="platformstack")
        if count != seen["count"]:
            seen.update(count=count, since=time.monotonic())
        return True if time.monotonic() - seen["since"] >= quiet else None

    wait("the PlatformStack controller idle", still, timeout=60)


@pytest.fixture()
def fresh(cluster: KubeTestBed, operator: Operator) -> Iterator[KubeTestBed]:
    """Each test starts without a PlatformStack, umbrella or platform plan."""
    clean(cluster, operator)
    wait("the PlatformStack gone", lambda: cluster.get(API, "PlatformStack", NAME, NS) is None or None)
    yield cluster
    assert operator.alive(), operator.log()[-3000:]


# --- reading and writing like a platform operator ------------------------------------------------------------

_intervals = itertools.count(11)


def create(bed: KubeTestBed, registry: str, repo: str, upstream: str | None = None, **spec: Any) -> None:
    """The PlatformStack, applied by its owner (a platform operator or `apprafter cluster-bootstrap`); `upstream`:
    a fork's spec.source.upstream (a repository name in the same registry)."""
    body = {"channel": "stable",
            "source": {"repoURL": f"oci://{registry}/{repo}/platform-stack", "insecure": True,
                       "checkInterval": "10m", "secretRef": {"name": CREDENTIALS},
                       **({"upstream": f"oci://{registry}/{upstream}/platform-stack"} if upstream else {})},
            "verify": {"provider": "cosign", "secretRef": {"name": KEYS}}, **spec}
    bed.apply({"apiVersion": API, "kind": "PlatformStack", "metadata": {"name": NAME, "namespace": NS},
               "spec": {k: v for k, v in body.items() if v is not None}}, field_manager="platform-admin")


def patch_spec(bed: KubeTestBed, spec: dict[str, Any]) -> None:
    info = bed.resource_for(API, "PlatformStack")
    resp = bed.http.patch(info.path(NAME, NS), params={"fieldManager": "platform-admin"},
                          content=json.dumps({"spec": spec}).encode(),
                          headers={"Content-Type": "application/merge-patch+json"})
    if resp.status_code >= 300:
        raise _rejected(resp, "PlatformStack spec")


def recheck(bed: KubeTestBed) -> None:
    """Make the controller look at the registry now: a new checkInterval is a new spec generation."""
    patch_spec(bed, {"source": {"checkInterval": f"{next(_intervals)}m"}})


def stack(bed: KubeTestBed) -> dict[str, Any]:
    obj = bed.get(API, "PlatformStack", NAME, NS)
    assert obj is not None
    return obj


def condition(st: dict[str, Any], type_: str) -> dict[str, Any]:
    return next((c for c in st.get("conditions") or [] if c["type"] == type_), {})


def settled(bed: KubeTestBed, reason: str, check: Callable[[dict[str, Any]], bool] = lambda st: True,
            timeout: float = 120) -> dict[str, Any]:
    """The status once the controller has acted on the current generation and Ready has `reason` (and `check`);
    a check verifies with cosign and reads the registry, slow on a loaded machine: the wait is generous."""
    def probe() -> dict[str, Any] | None:
        obj = stack(bed)
        st = obj.get("status") or {}
        done = st.get("observedGeneration") == obj["metadata"]["generation"] \
            and condition(st, "Ready").get("reason") == reason and check(st)
        return st if done else None
    return wait_showing(f"PlatformStack Ready reason {reason}", probe, timeout,
                        lambda: json.dumps(stack(bed).get('status'), indent=1)[:4000], "status now")


def umbrella(bed: KubeTestBed) -> dict[str, Any] | None:
    return bed.get(ARGO, "Application", "apprafter-platform", "argocd")


def umbrella_version(bed: KubeTestBed) -> str:
    """The umbrella's resourceVersion (it must exist)."""
    app = umbrella(bed)
    assert app is not None
    return str(app["metadata"]["resourceVersion"])


def platform_plans(bed: KubeTestBed) -> list[dict[str, Any]]:
    resp = bed.http.get(bed.resource_for(API, "MigrationPlan").path(None, NS))
    resp.raise_for_status()
    return [p for p in resp.json()["items"] if p["spec"]["scope"]["type"] == "platform"]


def events(bed: KubeTestBed, reason: str) -> list[dict[str, Any]]:
    resp = bed.http.get(f"/apis/events.k8s.io/v1/namespaces/{NS}/events")
    resp.raise_for_status()
    return [e for e in resp.json()["items"] if e.get("reason") == reason and e["regarding"]["kind"] == "PlatformStack"]


def recorded(bed: KubeTestBed, reason: str,
             check: Callable[[list[dict[str, Any]]], bool] = bool) -> list[dict[str, Any]]:
    """The PlatformStack's events of `reason` once `check` holds (the controller records them before the status)."""
    def probe() -> list[dict[str, Any]] | None:
        found = events(bed, reason)
        return found if found and check(found) else None
    return wait(f"PlatformStack event {reason}", probe, 60)


def platform(bed: KubeTestBed, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("platform", *args, "--kubeconfig", str(bed.kubeconfig))


def migration(bed: KubeTestBed, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("migration", *args, "--kubeconfig", str(bed.kubeconfig))


def done(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, (proc.returncode, proc.stderr)
    return proc.stdout


# --- the proof -------------------------------------------------------------------------------------------------

def test_stable_offers_the_newest_verified_release_and_a_gated_pin_waits_for_approval(
        fresh: KubeTestBed, registry: AuthRegistry, publisher: Publisher, charts: dict[str, Path]) -> None:
    bed = fresh
    repo = publisher.publish("early", [("1.0.0", "retired"), ("1.1.0", "release"), ("1.2.0", None),
                                       ("1.3.0", "other")])
    create(bed, registry.url, repo, pin="1.0.0")
    st = settled(bed, "Applied")
    assert st["currentVersion"] == "1.0.0"  # signed with the retired key: any key of the Secret may match
    assert "verified with retired.pub" in condition(st, "SourceVerified")["message"]
    assert condition(st, "UpgradeAvailable")["status"] == "True"
    # autoUpgrade, no pin: the newest release of the channel that verifies; 1.0.0 -> 1.1.0 is safe, so no plan
    patch_spec(bed, {"pin": None, "autoUpgrade": True})
    st = settled(bed, "Applied", lambda st: st.get("currentVersion") == "1.1.0")
    assert platform_plans(bed) == [] and recorded(bed, "UpgradeApplied")
    patch_spec(bed, {"autoUpgrade": False})
    st = settled(bed, "Applied")
    digest = publisher.digest(repo, "1.1.0")
    # 1.3.0 (another key) and 1.2.0 (unsigned) are newer, never offered: stable resolves to 1.1.0
    assert (st["currentVersion"], st["targetVersion"], st["availableVersion"]) == ("1.1.0", "1.1.0", "1.1.0")
    assert st["lastApplied"] == {"version": "1.1.0", "digest": digest,
                                 "repository": f"{registry.url}/{repo}/platform-stack"}
    unverified = {u["version"]: u for u in st["unverifiedVersions"]}
    assert list(unverified) == ["1.3.0", "1.2.0"]
    assert unverified["1.3.0"]["digest"] == publisher.digest(repo, "1.3.0")
    assert "release.pub: no matching signatures" in unverified["1.3.0"]["reason"]
    assert "retired.pub: no matching signatures" in unverified["1.3.0"]["reason"]
    assert "no signatures found" in unverified["1.2.0"]["reason"]
    assert recorded(bed, "VerificationFailed",
                    lambda found: {e["note"].split(" ")[0] for e in found} >= {"1.2.0", "1.3.0"})
    verified = condition(st, "SourceVerified")
    assert verified["status"] == "True" and f"1.1.0 ({digest}) verified with release.pub" in verified["message"]
    assert condition(st, "UpgradeAvailable")["status"] == "False"
    assert [(h["version"], h["digest"]) for h in st["versionHistory"]] == [("1.1.0", digest),
                                                                            ("1.0.0", publisher.digest(repo, "1.0.0"))]
    app = umbrella(bed)
    assert app is not None
    assert app["spec"]["source"] == {"repoURL": f"oci://{registry.url}/{repo}/platform-stack",
                                     "targetRevision": digest, "path": "."}
    assert app["spec"]["syncPolicy"]["automated"] == {"prune": True, "selfHeal": True}
    assert app["metadata"]["annotations"]["apprafter.io/stack-digest"] == digest
    installed = app["metadata"]["resourceVersion"]

    # A pin to the unsigned or the wrongly signed version: SourceVerified=False with cosign's reason, nothing applied
    for version, why, was in (("1.2.0", "no signatures found", ""),
                              ("1.3.0", "no matching signatures", " (was 1.2.0)")):
        assert done(platform(bed, "upgrade", "--to", version)) == \
            f"platformstack/default pinned to {version}{was} (namespace {NS})\n"
        st = settled(bed, "VerificationFailed")
        source = condition(st, "SourceVerified")
        assert why in source["message"] and source["status"] == "False"
        assert (st["currentVersion"], st["targetVersion"]) == ("1.1.0", version)
        assert umbrella_version(bed) == installed
    done(platform(bed, "unfreeze"))
    st = settled(bed, "Applied")
    assert condition(st, "SourceVerified")["status"] == "True"

    # 2.0.0 is released: it is available (UpgradeAvailable), nothing moves without autoUpgrade
    publisher.publish(repo, [("2.0.0", "release")])
    recheck(bed)
    st = settled(bed, "Applied", lambda st: st.get("availableVersion") == "2.0.0")
    assert condition(st, "UpgradeAvailable")["status"] == "True" and st["currentVersion"] == "1.1.0"
    assert "2.0.0 is available (running 1.1.0)" in condition(st, "UpgradeAvailable")["message"]

    # `platform upgrade` pins the available version: its change is gated, with stack plan's name and hash
    done(platform(bed, "upgrade"))
    st = settled(bed, "AwaitingMigrationApproval")
    [plan] = platform_plans(bed)
    name = plan["metadata"]["name"]
    assert st["migrationPlan"] == name and name.startswith("default-platform-")
    kube_version = bed.http.get("/version").json()["gitVersion"]
    cli_plan = json.loads(ok(stack_cli("stack", "plan", "--from", str(charts["1.1.0"]), "--to", str(charts["2.0.0"]),
                                       "--kube-version", kube_version, "--format", "json")))
    assert cli_plan["migrationPlan"]["metadata"]["name"] == name
    assert plan["spec"]["trigger"]["approvedSpecHash"] == cli_plan["approvedSpecHash"]
    assert plan["spec"]["changes"] == cli_plan["migrationPlan"]["spec"]["changes"]
    assert plan["spec"]["risks"]["classification"] == "data-migration"
    assert plan["spec"]["scope"]["platform"] == {
        "ref": {"name": NAME, "namespace": NS}, "fromVersion": "1.1.0", "toVersion": "2.0.0",
        "fromDigest": digest, "toDigest": publisher.digest(repo, "2.0.0")}
    assert plan["metadata"]["ownerReferences"][0]["uid"] == stack(bed)["metadata"]["uid"]
    assert json.loads(plan["metadata"]["annotations"]["apprafter.io/previous-spec"]) == {"pin": None}
    assert plan["status"]["phase"] == "pending-approval"
    assert umbrella_version(bed) == installed
    assert condition(st, "MigrationApproved")["reason"] == "AwaitingApproval"
    assert recorded(bed, "MigrationPlanCreated")

    # approve: the umbrella moves to 2.0.0, the plan is applied, the history records it
    done(migration(bed, "approve", name))
    st = settled(bed, "Applied", lambda st: st.get("currentVersion") == "2.0.0")
    app = umbrella(bed)
    assert app is not None and app["spec"]["source"]["targetRevision"] == publisher.digest(repo, "2.0.0")
    assert app["metadata"]["annotations"]["apprafter.io/stack-version"] == "2.0.0"
    assert wait("plan applied", lambda: platform_plans(bed)[0]["status"]["phase"] == "applied" or None)
    assert condition(st, "MigrationApproved")["status"] == "True"
    assert [(h["version"], h.get("plan")) for h in st["versionHistory"]] == [("2.0.0", name), ("1.1.0", None),
                                                                              ("1.0.0", None)]
    assert "migrationPlan" not in st and st["lastApplied"]["plan"] == name
    text = done(platform(bed, "status"))
    assert "  Current:      2.0.0  " + publisher.digest(repo, "2.0.0") in text
    assert "HISTORY" in text and name in text


def test_beta_and_edge_see_pre_releases_the_pin_wins_and_reject_reverts_the_pin(
        fresh: KubeTestBed, registry: AuthRegistry, publisher: Publisher, pub: str, operator: Operator) -> None:
    bed = fresh
    create(bed, registry.url, pub, pin="2.0.0")
    st = settled(bed, "Applied")  # a first install with a pin: nothing to compare with, nothing gated
    assert (st["currentVersion"], st["availableVersion"]) == ("2.0.0", "2.0.0")
    assert condition(st, "UpgradeAvailable")["status"] == "False"
    installed = umbrella_version(bed)

    for channel, newest in (("beta", "2.1.0-rc.1"), ("edge", "2.2.0-alpha.1"), ("beta", "2.1.0-rc.1")):
        assert done(platform(bed, "channel", channel)) == f"platformstack/default follows channel {channel} " \
            f"(namespace {NS})\n"
        st = settled(bed, "Applied", lambda st, newest=newest: st.get("availableVersion") == newest)
        assert condition(st, "UpgradeAvailable")["status"] == "True"
        assert (st["currentVersion"], st["targetVersion"]) == ("2.0.0", "2.0.0")  # the pin wins over the channel
    assert umbrella_version(bed) == installed

    done(platform(bed, "upgrade", "--to", "2.1.0-rc.1"))
    st = settled(bed, "AwaitingMigrationApproval")
    plan = st["migrationPlan"]
    [obj] = platform_plans(bed)
    assert obj["spec"]["risks"]["classification"] == "requires-restart"
    assert json.loads(obj["metadata"]["annotations"]["apprafter.io/previous-spec"]) == {"pin": "2.0.0"}
    # A killed operator starts with nothing in memory: its first check finds the same plan, creates no other,
    # touches neither the plan nor the umbrella, and only records that it looked (lastUpstreamCheck)
    before = stack(bed)["status"]
    held = (obj["metadata"]["resourceVersion"], umbrella_version(bed))
    operator.kill()
    operator.start()
    # the new process's first check, counted once its writes are done (lastUpstreamCheck has seconds only)
    wait("a check after the restart", lambda: operator.metric("apprafter_platform_check_seconds_count") or None,
         timeout=30)
    assert (platform_plans(bed)[0]["metadata"]["resourceVersion"], umbrella_version(bed)) == held
    assert {**stack(bed)["status"], "lastUpstreamCheck": ""} == {**before, "lastUpstreamCheck": ""}

    assert done(migration(bed, "reject", plan)) == f"migrationplan/{plan} rejected (namespace {NS})\n"
    wait("the pin reverted", lambda: stack(bed)["spec"].get("pin") == "2.0.0" or None)
    st = settled(bed, "Applied", lambda st: (st.get("rejectedPlan") or {}).get("name") == plan)
    assert condition(st, "MigrationApproved")["reason"] == "Rejected"
    assert (st["currentVersion"], st["targetVersion"]) == ("2.0.0", "2.0.0")
    assert umbrella_version(bed) == installed
    assert platform_plans(bed)[0]["status"]["phase"] == "rejected"
    assert recorded(bed, "PinReverted")
    text = done(platform(bed, "status"))
    assert "  Pin:          2.0.0\n" in text and "Rejected" in text


def test_a_moved_tag_is_caught_and_nothing_is_re_applied(fresh: KubeTestBed, registry: AuthRegistry,
                                                         publisher: Publisher, charts: dict[str, Path]) -> None:
    bed = fresh
    repo = publisher.publish("moved", [("1.1.0", "release")])
    create(bed, registry.url, repo)
    st = settled(bed, "Applied")
    verified = publisher.digest(repo, "1.1.0")
    # Argo CD reports a component's sync and health on its Application: the status shows it
    bed.apply({"apiVersion": ARGO, "kind": "Application",
               "metadata": {"name": "keda", "namespace": "argocd",
                            "labels": {"app.kubernetes.io/managed-by": "apprafter-platform-stack",
                                       "apprafter.io/component": "keda"}},
               "spec": {"project": "default", "destination": {"server": "https://kubernetes.default.svc"},
                        "source": {"repoURL": "https://kedacore.github.io/charts", "chart": "keda",
                                   "targetRevision": "2.18.0"}},
               "status": {"sync": {"status": "Synced"}, "health": {"status": "Healthy"}}}, field_manager="argocd")
    st = wait("keda's health in the status", lambda: next(
        (c for c in (stack(bed).get("status") or {}).get("components") or []
         if c["name"] == "keda" and c.get("health") == "Healthy"), None))
    assert st == {"name": "keda", "version": "2.18.0", "enabled": True, "sync": "Synced", "health": "Healthy"}

    moved = publisher.move_tag(repo, "1.1.0", charts["1.1.1"])
    assert moved != verified
    recheck(bed)
    st = settled(bed, "TagMoved")
    assert condition(st, "SourceVerified")["reason"] == "TagMoved"
    assert verified in condition(st, "SourceVerified")["message"]
    assert st["lastApplied"]["digest"] == verified and st["currentVersion"] == "1.1.0"
    app = umbrella(bed)
    assert app is not None and app["spec"]["source"]["targetRevision"] == verified  # the digest, not the tag
    assert "automated" not in (app["spec"].get("syncPolicy") or {})  # Argo CD no longer syncs the moved tag by itself
    assert app["metadata"]["annotations"]["apprafter.io/stack-digest"] == verified
    [event] = recorded(bed, "TagMoved")
    assert moved in event["note"] and verified in event["note"]
    assert [h["digest"] for h in st["versionHistory"]] == [verified]

    assert publisher.move_tag(repo, "1.1.0", charts["1.1.0"]) == verified  # moved back
    recheck(bed)
    st = settled(bed, "Applied")
    assert condition(st, "SourceVerified")["status"] == "True"
    assert (umbrella(bed) or {})["spec"]["syncPolicy"]["automated"] == {"prune": True, "selfHeal": True}


def test_version_history_keeps_the_last_ten(fresh: KubeTestBed, registry: AuthRegistry, publisher: Publisher,
                                            pub: str) -> None:
    bed = fresh
    create(bed, registry.url, pub, pin="1.1.0")
    settled(bed, "Applied")
    for version in HISTORY:
        done(platform(bed, "upgrade", "--to", version))
        settled(bed, "Applied", lambda st, version=version: st.get("currentVersion") == version)
    history = stack(bed)["status"]["versionHistory"]
    assert [h["version"] for h in history] == HISTORY[::-1]  # 11 applied, the oldest (1.1.0) dropped
    assert [h["digest"] for h in history] == [publisher.digest(pub, v) for v in HISTORY[::-1]]
    assert done(platform(bed, "freeze")) == f"platformstack/default frozen at 1.1.10 (namespace {NS})\n"


def test_a_registry_that_is_down_leaves_everything_as_it_was(fresh: KubeTestBed, registry: AuthRegistry,
                                                             pub: str) -> None:
    bed = fresh
    create(bed, registry.url, pub, pin="1.1.0")
    before = settled(bed, "Applied")
    app = umbrella(bed)
    assert app is not None
    registry.down()
    try:
        recheck(bed)
        st = settled(bed, "RegistryUnavailable")
        assert f"registry {registry.url} unreachable" in condition(st, "Ready")["message"]
        for field in ("currentVersion", "availableVersion", "lastApplied", "versionHistory", "lastUpstreamCheck"):
            assert st[field] == before[field], field
        unchanged = ("status", "reason", "message", "lastTransitionTime")
        assert [condition(st, "SourceVerified")[k] for k in unchanged] == \
            [condition(before, "SourceVerified")[k] for k in unchanged]
        assert umbrella_version(bed) == app["metadata"]["resourceVersion"]
        assert recorded(bed, "RegistryUnavailable")
    finally:
        registry.up()
    st = settled(bed, "Applied", lambda st: st["lastUpstreamCheck"] >= before["lastUpstreamCheck"])
    assert st["currentVersion"] == "1.1.0"


def test_nothing_is_applied_without_keys_to_verify_with(fresh: KubeTestBed, registry: AuthRegistry, pub: str) -> None:
    bed = fresh
    create(bed, registry.url, pub, verify=None)
    st = settled(bed, "NotConfigured")
    assert condition(st, "SourceVerified")["reason"] == "NotConfigured"
    patch_spec(bed, {"verify": {"provider": "cosign", "secretRef": {"name": "no-such-keys"}}})
    st = settled(bed, "KeysUnavailable")
    assert f"Secret {NS}/no-such-keys (spec.verify.secretRef) not found" in condition(st, "Ready")["message"]
    assert umbrella(bed) is None and "currentVersion" not in st


def test_platform_commands_fail_clearly(fresh: KubeTestBed) -> None:
    missing = platform(fresh, "status")
    assert missing.returncode == 1 and missing.stdout == ""
    assert missing.stderr == f"platformstack/default: no PlatformStack default in namespace {NS} " \
        "(`apprafter cluster-bootstrap` creates it)\n"
    create(fresh, "127.0.0.1:1", "nowhere")
    bad = platform(fresh, "upgrade", "--to", "two")
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr.startswith("platformstack/default: --to: 'two' is not SemVer 2")
    frozen = platform(fresh, "freeze")
    assert frozen.returncode == 1 and "nothing is applied yet" in frozen.stderr


# --- issue 22: values, component freezes, a fork's upstream, the Kubernetes minimum ---------------------------------

def plan_fields(plan: dict[str, Any]) -> set[str]:
    return {c["field"] for c in plan["spec"]["changes"]}


def test_override_values_reach_the_component_application_through_the_gate(
        fresh: KubeTestBed, registry: AuthRegistry, publisher: Publisher, pub: str, charts: dict[str, Path],
        tmp_path: Path) -> None:
    bed = fresh
    create(bed, registry.url, pub, pin="1.1.0")
    settled(bed, "Applied")
    installed = umbrella_version(bed)
    tweak = {"crds": {"enabled": False}, "replicaCount": 2}
    patch_spec(bed, {"overrides": {"cert-manager": {"values": tweak}}})
    # the CRD keeps the values (no pruning), and a values change is a component change: gated like any other
    assert stack(bed)["spec"]["overrides"] == {"cert-manager": {"values": tweak}}
    st = settled(bed, "AwaitingMigrationApproval")
    [plan] = platform_plans(bed)
    assert plan_fields(plan) == {"components.cert-manager.values.crds.enabled",
                                 "components.cert-manager.values.replicaCount"}
    assert plan["spec"]["risks"]["classification"] == "requires-restart"  # a config change within one version
    assert umbrella_version(bed) == installed  # nothing applied before the approval
    done(migration(bed, "approve", st["migrationPlan"]))
    st = settled(bed, "Applied", lambda st: st.get("lastApplied", {}).get("overrides"))
    assert st["lastApplied"]["overrides"] == {"cert-manager": {"values": tweak}}  # the baseline keeps them too
    app = umbrella(bed)
    assert app is not None
    values_object = app["spec"]["source"]["helm"]["valuesObject"]
    assert values_object["overrides"] == {"cert-manager": {"values": tweak}}
    # what Argo CD renders from the umbrella: the component's Application has the stack's values, ours over them
    values = tmp_path / "umbrella-values.json"
    values.write_text(json.dumps(values_object))
    rendered = applications(helm_template(charts["1.1.0"], "-f", str(values)))
    plain = {**values_object, "overrides": {}}
    values.write_text(json.dumps(plain))
    stacks = applications(helm_template(charts["1.1.0"], "-f", str(values)))["cert-manager"]["spec"]["source"]
    expected = {**stacks["helm"]["valuesObject"], "crds": {**stacks["helm"]["valuesObject"]["crds"], "enabled": False},
                "replicaCount": 2}
    assert stacks["helm"]["valuesObject"]["crds"]["enabled"] is True  # the override changes what the stack sets
    assert rendered["cert-manager"]["spec"]["source"]["helm"]["valuesObject"] == expected
    # a second check with nothing new: the kept values are the baseline, so nothing is gated again
    recheck(bed)
    settled(bed, "Applied")
    assert [p["status"]["phase"] for p in platform_plans(bed)] == ["applied"]


def test_a_frozen_component_keeps_its_version_through_a_stack_upgrade(
        fresh: KubeTestBed, registry: AuthRegistry, publisher: Publisher) -> None:
    bed = fresh
    repo = publisher.publish("frozen", [("1.0.0", "release"), ("2.0.0", "release")])
    create(bed, registry.url, repo, pin="1.0.0")
    st = settled(bed, "Applied")
    versions = {c["name"]: c.get("version") for c in st["components"]}
    assert (versions["keda"], versions["cloudnative-pg"]) == ("2.17.2", "0.25.0")
    assert done(platform(bed, "freeze", "keda")) == f"platformstack/default freezes keda at 2.17.2 (namespace {NS})\n"
    assert stack(bed)["spec"]["overrides"] == {"keda": {"pin": "2.17.2"}}
    st = settled(bed, "Applied", lambda st: st.get("lastApplied", {}).get("overrides"))  # what runs: no plan
    assert platform_plans(bed) == []
    assert done(platform(bed, "freeze", "keda")) == f"platformstack/default keeps keda at 2.17.2 (namespace {NS})\n"

    # 1.0.0 -> 2.0.0 moves keda (2.18.0) and cloudnative-pg (0.26.0, data-migration): keda stays, the others move
    done(platform(bed, "upgrade", "--to", "2.0.0"))
    st = settled(bed, "AwaitingMigrationApproval")
    [plan] = platform_plans(bed)
    assert "components.cloudnative-pg.source.targetRevision" in plan_fields(plan)
    assert not [f for f in plan_fields(plan) if f.startswith("components.keda")]
    done(migration(bed, "approve", st["migrationPlan"]))
    st = settled(bed, "Applied", lambda st: st.get("currentVersion") == "2.0.0")
    versions = {c["name"]: c.get("version") for c in st["components"]}
    assert (versions["keda"], versions["cloudnative-pg"]) == ("2.17.2", "0.26.0")
    app = umbrella(bed)
    assert app is not None and app["spec"]["source"]["helm"]["valuesObject"]["overrides"] == {
        "keda": {"pin": "2.17.2"}}
    text = done(platform(bed, "status"))
    assert "COMPONENTS" in text
    [keda] = [line for line in text.splitlines() if line.startswith("keda ")]
    assert keda.split()[1] == "2.17.2" and keda.endswith("at 2.17.2")
    [cnpg] = [line for line in text.splitlines() if line.startswith("cloudnative-pg ")]
    assert cnpg.split()[1] == "0.26.0" and cnpg.endswith(" -")

    # unfreeze: keda follows the stack again (2.18.0 within 2.0.0: a config change, gated as any other)
    assert done(platform(bed, "unfreeze", "keda")) == \
        f"platformstack/default lets keda move with the stack (namespace {NS})\n"
    assert "overrides" not in stack(bed)["spec"]
    settled(bed, "AwaitingMigrationApproval")
    [moved] = [p for p in platform_plans(bed) if p["status"]["phase"] == "pending-approval"]
    [change] = moved["spec"]["changes"]
    assert (change["field"], change["from"], change["to"]) == ("components.keda.source.targetRevision", "2.17.2",
                                                               "2.18.0")
    assert done(platform(bed, "unfreeze", "keda")) == f"platformstack/default does not freeze keda (namespace {NS})\n"
    refused = platform(bed, "freeze", "nope")
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.startswith("platformstack/default: nope: no such component in the running stack")


def test_a_fork_reports_a_newer_upstream_and_never_applies_it(
        fresh: KubeTestBed, registry: AuthRegistry, publisher: Publisher) -> None:
    bed = fresh
    # upstream releases 2.0.0 under its own key (not in the fork's Secret); the fork runs its 1.1.0
    upstream = publisher.publish("upstream", [("1.1.0", "other"), ("2.0.0", "other")])
    fork = publisher.publish("fork", [("1.1.0", "release")])
    create(bed, registry.url, fork, upstream=upstream, autoUpgrade=True)
    st = settled(bed, "Applied", lambda st: "upstreamVersion" in st)
    ahead = condition(st, "UpstreamAhead")
    assert (ahead["status"], ahead["reason"]) == ("True", "NewerUpstream")
    assert f"upstream {registry.url}/{upstream}/platform-stack offers 2.0.0, the fork runs 1.1.0" in ahead["message"]
    assert (st["upstreamVersion"], st["currentVersion"], st["availableVersion"]) == ("2.0.0", "1.1.0", "1.1.0")
    app = umbrella(bed)
    assert app is not None and app["spec"]["source"]["repoURL"] == f"oci://{registry.url}/{fork}/platform-stack"
    assert app["spec"]["source"]["targetRevision"] == publisher.digest(fork, "1.1.0")  # autoUpgrade: still the fork's
    assert platform_plans(bed) == []
    [event] = recorded(bed, "UpstreamAhead")
    assert event["note"] == ahead["message"]
    text = done(platform(bed, "status"))
    assert "  Upstream:     2.0.0  upstream " in text and "UpstreamAhead" in text

    # the fork catches up (its own signed 2.0.0): upstream is no longer ahead
    publisher.publish(fork, [("2.0.0", "release")])
    patch_spec(bed, {"pin": "2.0.0"})
    st = settled(bed, "AwaitingMigrationApproval")
    done(migration(bed, "approve", st["migrationPlan"]))
    st = settled(bed, "Applied", lambda st: st.get("currentVersion") == "2.0.0")
    assert (condition(st, "UpstreamAhead")["status"], condition(st, "UpstreamAhead")["reason"]) == ("False",
                                                                                                   "UpToDate")

    # an upstream that cannot be read says so, and the fork's own check goes on
    patch_spec(bed, {"source": {"upstream": f"oci://{registry.url}/gone/platform-stack"}})
    st = settled(bed, "Applied", lambda st: condition(st, "UpstreamAhead").get("status") == "Unknown")
    assert condition(st, "UpstreamAhead")["reason"] == "UpstreamUnavailable"
    assert st["upstreamVersion"] == "2.0.0" and st["currentVersion"] == "2.0.0"


def test_an_upgrade_past_the_clusters_kubernetes_is_refused_before_anything_is_planned_or_applied(
        fresh: KubeTestBed, registry: AuthRegistry, publisher: Publisher) -> None:
    bed = fresh
    repo = publisher.publish("kube", [("1.1.0", "release"), ("2.0.0", "release"), ("3.0.0", "release")])
    create(bed, registry.url, repo, pin="1.1.0")
    settled(bed, "Applied")
    installed = umbrella_version(bed)
    cluster_version = bed.http.get("/version").json()["gitVersion"]
    done(platform(bed, "upgrade", "--to", "3.0.0"))
    st = settled(bed, "UnsupportedKubernetes")
    ready = condition(st, "Ready")
    assert ready["status"] == "False"
    assert ready["message"] == (f"stack 3.0.0 needs Kubernetes >= 1.99.0, cluster runs {cluster_version}: 3.0.0 is "
                                "not applied, 1.1.0 keeps running (upgrade the cluster, or pin a version it supports)")
    assert platform_plans(bed) == [] and "migrationPlan" not in st  # no approvable plan
    assert umbrella_version(bed) == installed  # nothing patched
    assert (st["currentVersion"], st["targetVersion"]) == ("1.1.0", "3.0.0")
    assert [h["version"] for h in st["versionHistory"]] == ["1.1.0"]
    [event] = recorded(bed, "UnsupportedKubernetes")
    assert "needs Kubernetes >= 1.99.0" in event["note"] and cluster_version in event["note"]
    assert event["type"] == "Warning"
    # back to a version the cluster runs: Ready again, still no plan
    done(platform(bed, "upgrade", "--to", "1.1.0"))
    settled(bed, "Applied")
    assert platform_plans(bed) == [] and umbrella_version(bed) == installed
    # a plan waiting for another target (2.0.0) is over once the stack asks for one the cluster cannot run
    done(platform(bed, "upgrade", "--to", "2.0.0"))
    waiting = settled(bed, "AwaitingMigrationApproval")["migrationPlan"]
    done(platform(bed, "upgrade", "--to", "3.0.0"))
    st = settled(bed, "UnsupportedKubernetes")
    assert "migrationPlan" not in st and condition(st, "MigrationApproved") == {}
    [plan] = platform_plans(bed)
    assert (plan["metadata"]["name"], plan["status"]["phase"]) == (waiting, "superseded")
    assert "asks for 3.0.0, which this cluster's Kubernetes cannot run" in plan["status"]["message"]
    assert umbrella_version(bed) == installed
