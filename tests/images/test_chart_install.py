"""The operator chart installed for real (`helm install`) on the node tier's real single-node cluster: its pods
run from our images on the kubelet (uid 999, read-only root, the chart's security context and RBAC), the
operator reconciles with nothing but the chart's RBAC and the ServiceAccount token the kubelet mounts, and the
API server reaches the webhook over TLS through its Service (kube-proxy), as in a real install.

What the test plays because the node runs no add-ons: cert-manager (it issues the Secret the chart's Certificate
names), its cainjector (the CA into the webhook configurations the annotation names), Argo CD (it applies
Application specs) and the providers (claims become ready).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.charts.chart import CHART, NAMESPACE, VERSION
from tests.images.podman import PREFIX, Image
from tests.platform_stack.conftest import helm, ok
from tests.reconciler.helpers import API, apply, children, claims_when_created, cr, edit, plan_phase, wait, wait_phase
from tests.renderer.helpers import run_cli
from tests.testbed.cert_manager import inject_ca, issue_certificate
from tests.testbed.kube import KubeTestBed, ssl_context
from tests.testbed.node import NodeTestBed, Response, has_condition

pytestmark = [pytest.mark.images, pytest.mark.testbed, pytest.mark.node]

RELEASE = "apprafter-operator"
# the claims' provider as the chart's webhook knows it (claimStatusUsers empty: the operator's account)
PROVIDER = f"system:serviceaccount:{NAMESPACE}:apprafter-operator"
EDITOR, APPROVER, APPROVERS = "eve", "alice", "apprafter-approvers"
# The namespaces this module uses on the session's node (deleted, with the release, at the end of the module).
TEAM_A, TEAM_B, PROBE = "chart-team-a", "chart-team-b", "chart-probe"
APP_B = "shop"  # team B's app


class RunningPod:
    """One Ready pod of a Deployment as the node runs it: its name and its probes, sent from inside the node's
    network namespace to the pod's IP as the kubelet sends them (HTTPS without checking the certificate)."""

    def __init__(self, node: NodeTestBed, pod: dict[str, Any]) -> None:
        self.node, self.pod = node, pod
        self.name: str = pod["metadata"]["name"]
        self.container: dict[str, Any] = pod["spec"]["containers"][0]

    def port(self, name_or_number: str | int) -> int:
        if isinstance(name_or_number, int):
            return name_or_number
        return int(next(p["containerPort"] for p in self.container["ports"] if p["name"] == name_or_number))

    def probe(self, which: str = "readinessProbe") -> Response:
        get = self.container[which]["httpGet"]
        url = f"{get.get('scheme', 'HTTP').lower()}://{self.pod['status']['podIP']}:{self.port(get['port'])}{get['path']}"
        return self.node.request("GET", url, timeout=5)


def rolled_out(node: NodeTestBed, name: str) -> list[RunningPod]:
    """Wait until Deployment `name` is rolled out (every replica updated, Ready and available); its pods."""
    def done(obj: dict[str, Any]) -> bool:
        status, replicas = obj.get("status", {}), obj["spec"]["replicas"]
        return bool(status.get("observedGeneration") == obj["metadata"]["generation"]
                and status.get("updatedReplicas", 0) == replicas == status.get("availableReplicas", 0)
                and status.get("replicas") == replicas)

    deployment = node.wait("apps/v1", "Deployment", name, NAMESPACE, done, timeout=180)
    labels = ",".join(f"{k}={v}" for k, v in deployment["spec"]["selector"]["matchLabels"].items())

    def ready(items: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        live = [p for p in items if not p["metadata"].get("deletionTimestamp")]
        return live if len(live) == deployment["spec"]["replicas"] and all(has_condition(p, "Ready")
                                                                          for p in live) else None

    return [RunningPod(node, p) for p in node.wait_list("v1", "Pod", NAMESPACE, ready, labels=labels)]


@dataclasses.dataclass
class Installed:
    bed: NodeTestBed
    workdir: Path
    notes: str
    manifest: list[dict[str, Any]]
    operator: RunningPod
    webhooks: list[RunningPod]

    def deployment(self, name: str) -> dict[str, Any]:
        found = self.bed.get("apps/v1", "Deployment", name, NAMESPACE)
        assert found is not None
        return found

    def kubeconfig(self, user: str) -> Path:
        groups = (APPROVERS,) if user == APPROVER else ()
        return self.bed.person_kubeconfig(self.workdir / f"{user}.kubeconfig", user, groups)

    def as_user(self, user: str) -> httpx.Client:
        return self.bed.as_person(user, (APPROVERS,) if user == APPROVER else ())


def helm_on(bed: KubeTestBed, *args: str) -> str:
    return ok(helm(*args, "--namespace", NAMESPACE, "--kubeconfig", str(bed.kubeconfig)))


def scale(bed: KubeTestBed, name: str, replicas: int) -> None:
    resp = bed.http.patch(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{name}/scale",
                          json={"spec": {"replicas": replicas}},
                          headers={"Content-Type": "application/merge-patch+json"})
    assert resp.status_code == 200, resp.text


def as_token(bed: KubeTestBed, token: str) -> httpx.Client:
    """An API client authenticated with a bearer token (a ServiceAccount's)."""
    return httpx.Client(base_url=bed.url, verify=ssl_context(bed.ca_path), timeout=30,
                        headers={"Authorization": f"Bearer {token}"})


def invalid_app(namespace: str) -> dict[str, Any]:
    """An Application the CRD schema admits and `apprafter validate` refuses (no image in any environment)."""
    return cr(namespace, edit(image=None), name="invalid")


def server_side_apply(client: httpx.Client, bed: KubeTestBed, obj: dict[str, Any], *, dry_run: bool = False,
                      status: bool = False) -> httpx.Response:
    info = bed.resource_for(obj["apiVersion"], obj["kind"])
    path = info.path(obj["metadata"]["name"], obj["metadata"].get("namespace")) + ("/status" if status else "")
    params = {"fieldManager": "test", "force": "true", **({"dryRun": "All"} if dry_run else {})}
    return client.patch(path, params=params, content=json.dumps(obj).encode(),
                        headers={"Content-Type": "application/apply-patch+yaml"})


def refused_by_webhook(bed: KubeTestBed, namespace: str) -> str | None:
    resp = server_side_apply(bed.http, bed, invalid_app(namespace), dry_run=True)
    message = str(resp.json().get("message", "")) if resp.status_code >= 400 else ""
    return message if 'admission webhook "applications.apprafter.io" denied the request' in message else None


@pytest.fixture(scope="module")
def installed(images: dict[str, Image], node: NodeTestBed, testbed_dir: Path) -> Iterator[Installed]:
    workdir = testbed_dir / "chart"
    workdir.mkdir()
    bed = node
    try:
        for image in images.values():  # the chart names them by tag, pulled IfNotPresent: present
            bed.import_image(image.ref)
        bed.ensure_namespace("argocd")  # Argo CD runs there before the operator is installed
        bed.ensure_namespace("apprafter-gateway")  # the Gateways' (the chart's listeners Role is made there)
        values = {"image": {"registry": PREFIX}}
        (workdir / "values.json").write_text(json.dumps(values))
        notes = helm_on(bed, "install", RELEASE, str(CHART), "--create-namespace", "-f", str(workdir / "values.json"))
        manifest = [d for d in yaml.safe_load_all(helm_on(bed, "get", "manifest", RELEASE)) if d]
        ca_pem = issue_certificate(bed, "apprafter-admission", NAMESPACE, workdir)
        hooks = sum(len(d["webhooks"]) for d in manifest if d["kind"].endswith("WebhookConfiguration"))
        assert hooks and inject_ca(bed, f"{NAMESPACE}/apprafter-admission", ca_pem) == hooks  # every one of them
        webhooks = rolled_out(bed, "apprafter-admission")
        bed.ensure_namespace(PROBE)
        wait("the API server calling the webhook", lambda: refused_by_webhook(bed, PROBE), 60)
        [operator] = rolled_out(bed, "apprafter-operator")
        yield Installed(bed, workdir, notes, manifest, operator, webhooks)
    finally:
        helm_on(bed, "uninstall", RELEASE, "--wait", "--timeout", "120s")
        for namespace in (TEAM_A, TEAM_B, PROBE, NAMESPACE):
            bed.delete("v1", "Namespace", namespace)
        bed.delete("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "approvers")
        for namespace in (TEAM_A, TEAM_B, PROBE, NAMESPACE):
            bed.wait_gone("v1", "Namespace", namespace, None, timeout=180)


def test_helm_install_deployed_every_object_of_the_chart(installed: Installed) -> None:
    bed = installed.bed
    [release] = json.loads(helm_on(bed, "list", "-o", "json"))
    assert (release["name"], release["status"], release["chart"]) == (RELEASE, "deployed",
                                                                      f"apprafter-operator-{VERSION}")
    for obj in installed.manifest:
        meta = obj["metadata"]
        assert bed.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace")), f"{obj['kind']} {meta}"
    for crd in ("applications", "migrationplans", "platformstacks", "resourceclaims"):
        found = bed.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", f"{crd}.apprafter.io")
        assert found is not None
        assert {"type": "Established", "status": "True"}.items() <= next(
            c for c in found["status"]["conditions"] if c["type"] == "Established").items()
    assert "--clusterrole=apprafter:migration-approver" in installed.notes


def test_both_pods_meet_the_restricted_pod_security_standard(installed: Installed) -> None:
    bed = installed.bed
    bed.http.patch(f"/api/v1/namespaces/{NAMESPACE}", json={"metadata": {"labels": {
        "pod-security.kubernetes.io/warn": "restricted", "pod-security.kubernetes.io/warn-version": "latest"}}},
        headers={"Content-Type": "application/merge-patch+json"}).raise_for_status()

    def warnings(deployment: dict[str, Any]) -> list[str]:
        """The API server's PodSecurity warnings for this Deployment's pod template (a dry-run create)."""
        body = {k: deployment[k] for k in ("apiVersion", "kind", "spec")}
        body["metadata"] = {"name": "pod-security-check", "namespace": NAMESPACE}
        resp = server_side_apply(bed.http, bed, body, dry_run=True)
        assert resp.status_code == 201, resp.text
        return [w for w in resp.headers.get_list("warning") if "PodSecurity" in w]

    for name in ("apprafter-operator", "apprafter-admission"):
        deployment = installed.deployment(name)
        assert warnings(deployment) == [], name
        # The check sees a pod that falls short: the same one with its container's security context taken away.
        loose = json.loads(json.dumps(deployment))
        del loose["spec"]["template"]["spec"]["containers"][0]["securityContext"]
        assert any("allowPrivilegeEscalation != false" in w for w in warnings(loose)), name


def runnable(bed: NodeTestBed, namespace: str, image: str, app: str = "demo") -> dict[str, Any]:
    """The operator tests' app (BASE) running the test image, with the Secrets its env references: the pg
    provider's connection Secret and the vendor's key (what the providers and the team would have made)."""
    for name, key in ((f"{app}-pg-conn", "url"), ("vendor", "key")):
        bed.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace},
                   "stringData": {key: "not-a-real-one"}})
    return edit(image=image)


def test_the_operator_pod_leads_and_reconciles_an_application_with_the_charts_rbac(installed: Installed,
                                                                                 test_app: str) -> None:
    bed = installed.bed
    lease = bed.get("coordination.k8s.io/v1", "Lease", "apprafter-operator", NAMESPACE)
    assert lease is not None and lease["spec"]["holderIdentity"] == installed.operator.name  # POD_NAME
    assert installed.operator.probe().text.strip() == "leading"
    assert installed.operator.probe("livenessProbe").status_code == 200
    # The pod as the kubelet runs it: the chart's user, a read-only root, the token the kubelet mounted.
    [status] = bed.get("v1", "Pod", installed.operator.name, NAMESPACE)["status"]["containerStatuses"]  # type: ignore[index]
    assert status["ready"] and status["restartCount"] == 0
    identity = bed.kubectl("exec", "-n", NAMESPACE, installed.operator.name, "--", "/opt/apprafter/bin/python",
                           "-c", "import os; print(os.getuid(), os.getgid()); open('/opt/x', 'w')", check=False)
    assert identity.stdout.split() == ["999", "999"] and "Read-only file system" in identity.stderr
    namespace = TEAM_A
    bed.ensure_namespace(namespace)
    apply(bed, cr(namespace, runnable(bed, namespace, test_app)))
    claims_when_created(bed, namespace, ["demo-pg", "demo-redis"], provider=PROVIDER)
    wait_phase(bed, namespace, "Ready", timeout=120)  # its pods Available, as the operator reads them
    made = children(bed, namespace)
    assert {kind for kind, _ in made} >= {"Deployment", "Service", "ServiceAccount", "HTTPRoute", "Certificate",
                                          "ReferenceGrant", "ResourceClaim", "NetworkPolicy"}
    for obj in made.values():
        managers = {f["manager"] for f in obj["metadata"]["managedFields"]}
        assert "apprafter-operator" in managers, obj["metadata"]["name"]
    app = bed.get(API, "Application", "demo", namespace)
    assert app is not None
    status_managers = {f["manager"] for f in app["metadata"]["managedFields"] if f.get("subresource") == "status"}
    assert status_managers == {"apprafter-operator-status"}


def test_the_webhook_pod_refuses_over_tls_what_validate_refuses(installed: Installed) -> None:
    message = refused_by_webhook(installed.bed, TEAM_A)
    assert message is not None
    assert "spec.base.image: image is empty in environment 'prod'" in message


def test_a_gated_change_waits_for_an_approver_and_an_ordinary_user_cannot_approve(installed: Installed,
                                                                                 test_app: str) -> None:
    bed, namespace = installed.bed, TEAM_B
    bed.ensure_namespace(namespace)
    bed.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "approvers"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": "apprafter:migration-approver"},
               "subjects": [{"kind": "Group", "name": APPROVERS, "apiGroup": "rbac.authorization.k8s.io"}]})
    editor_can_write_applications(bed, namespace)
    # not "demo": team A's demo holds the public hostname demo.prod.<domain> (the first deployment keeps it)
    base = runnable(bed, namespace, test_app, app=APP_B)
    apply(bed, cr(namespace, base, name=APP_B))
    claims_when_created(bed, namespace, [f"{APP_B}-pg", f"{APP_B}-redis"], provider=PROVIDER)
    wait_phase(bed, namespace, "Ready", name=APP_B, timeout=120)
    repository, _, tag = test_app.rpartition(":")
    other = f"{repository}-someone-else:{tag}"  # the same image under another repository name: gated
    bed.ctr("images", "tag", "--force", test_app, other, check=True)
    apply(bed, cr(namespace, edit(base, image=other), name=APP_B))
    plan = wait_phase(bed, namespace, "AwaitingMigrationApproval", name=APP_B)["migrationPlan"]
    wait("the plan pending", lambda: plan_phase(bed, namespace, plan) == "pending-approval" or None)

    def approve(user: str) -> Any:
        return run_cli("migration", "approve", plan, "-n", namespace, "--kubeconfig", str(installed.kubeconfig(user)))

    refused = approve(EDITOR)
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == (f'migrationplan/{plan}: refused by the cluster: migrationplans.apprafter.io "{plan}" is '
                              f'forbidden: User "{EDITOR}" cannot patch resource "migrationplans/status" in API group '
                              f'"apprafter.io" in the namespace "{namespace}"\n')
    assert plan_phase(bed, namespace, plan) == "pending-approval"
    approved = approve(APPROVER)
    assert approved.returncode == 0, approved.stderr
    stamped = bed.get(API, "MigrationPlan", plan, namespace)
    assert stamped is not None and stamped["status"]["approvedBy"] == APPROVER  # the mutating webhook, in the image
    wait_phase(bed, namespace, "Ready", name=APP_B, timeout=120)
    wait("the plan applied", lambda: plan_phase(bed, namespace, plan) == "applied" or None)
    [deployment] = [o for (kind, _), o in children(bed, namespace, f"{APP_B}-prod").items() if kind == "Deployment"]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == other
    assert deployment["status"]["availableReplicas"] == 2  # Ready came after the new pods were Available


def editor_can_write_applications(bed: KubeTestBed, namespace: str) -> None:
    """An ordinary team member: writes Applications and reads plans in the team's namespace."""
    bed.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": "editor", "namespace": namespace},
               "rules": [{"apiGroups": ["apprafter.io"], "resources": ["applications"], "verbs": ["*"]},
                         {"apiGroups": ["apprafter.io"], "resources": ["migrationplans"],
                          "verbs": ["get", "list", "watch"]}]})
    bed.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "editor", "namespace": namespace},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "editor"},
               "subjects": [{"kind": "User", "name": EDITOR, "apiGroup": "rbac.authorization.k8s.io"}]})


def forbidden(resp: httpx.Response) -> str:
    """RBAC's refusal (it comes before admission, so no webhook is involved)."""
    assert resp.status_code == 403, f"{resp.request.method} {resp.request.url}: {resp.status_code} {resp.text[:300]}"
    return str(resp.json()["message"])


def create_secret(client: httpx.Client, namespace: str) -> httpx.Response:
    """POST a Secret (a dry run: nothing is stored even if it were allowed)."""
    return client.post(f"/api/v1/namespaces/{namespace}/secrets", params={"dryRun": "All"},
                       json={"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "planted"},
                             "stringData": {"key": "value"}})


def test_rbac_is_least_privilege(installed: Installed) -> None:
    bed = installed.bed
    team = TEAM_A  # its Application exists (the reconcile test above)
    app = {"apiVersion": API, "kind": "Application", "metadata": {"name": "demo", "namespace": team}}
    with as_token(bed, bed.service_account_token(NAMESPACE, "apprafter-admission")) as webhook_sa:
        assert 'cannot create resource "secrets"' in forbidden(create_secret(webhook_sa, NAMESPACE))
        forbidden(webhook_sa.get(f"/api/v1/namespaces/{NAMESPACE}/secrets/apprafter-admission-tls"))
        forbidden(server_side_apply(webhook_sa, bed, {**app, "status": {}}, dry_run=True, status=True))
    with as_token(bed, bed.service_account_token(NAMESPACE, "apprafter-operator")) as operator_sa:
        assert operator_sa.get(f"/api/v1/namespaces/{NAMESPACE}/secrets/apprafter-admission-tls").status_code == 200
        # Since SourceCredentials (issue 23) the operator writes Secrets: the repo-creds in Argo CD's namespace and
        # the pull secrets in workload namespaces, watched by label and pruned, which RBAC cannot narrow to a label
        # (docs/operator.md, its permissions); never `update` (it writes its own fields by server-side apply).
        for namespace in (NAMESPACE, team, "argocd"):
            assert all(allowed(operator_sa, {"group": "", "resource": "secrets", "verb": verb, "namespace": namespace})
                       for verb in ("get", "list", "watch", "create", "patch", "delete")), namespace
            assert not allowed(operator_sa, {"group": "", "resource": "secrets", "verb": "update",
                                             "namespace": namespace})
        assert operator_sa.get(f"/api/v1/namespaces/{team}/secrets/anything").status_code == 404
        # An Application's spec is Argo CD's: the operator writes its status only.
        forbidden(server_side_apply(operator_sa, bed, {**app, "spec": {"environment": "prod"}}, dry_run=True))
        # What the PlatformStack controller will do, granted (issue 13 runs it).
        for attributes in ({"group": "argoproj.io", "resource": "applications", "verb": "patch", "namespace": "argocd"},
                           {"group": "apprafter.io", "resource": "platformstacks", "subresource": "status",
                            "verb": "patch", "namespace": NAMESPACE},
                           {"group": "", "resource": "secrets", "verb": "get", "namespace": NAMESPACE}):
            assert allowed(operator_sa, attributes), attributes
        assert not allowed(operator_sa, {"group": "argoproj.io", "resource": "applications", "verb": "delete",
                                         "namespace": "argocd"})
        # Pods are read for their health (watched by label), never written.
        assert allowed(operator_sa, {"group": "", "resource": "pods", "verb": "watch", "namespace": team})
        assert not any(allowed(operator_sa, {"group": "", "resource": "pods", "verb": verb, "namespace": team})
                       for verb in ("create", "patch", "delete"))
    for user in (EDITOR, APPROVER):
        with installed.as_user(user) as person:
            forbidden(server_side_apply(person, bed, {**app, "status": {}}, dry_run=True, status=True))
    with installed.as_user(EDITOR) as editor:
        message = forbidden(editor.patch(f"/apis/apprafter.io/v1alpha1/namespaces/{TEAM_B}/migrationplans/x/status",
                                         params={"dryRun": "All"}, json={"status": {"phase": "approved"}},
                                         headers={"Content-Type": "application/merge-patch+json"}))
        assert "cannot patch resource \"migrationplans/status\"" in message


def allowed(client: httpx.Client, attributes: dict[str, str]) -> bool:
    """SelfSubjectAccessReview: would the API server authorize this request of the caller?"""
    resp = client.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                       json={"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                             "spec": {"resourceAttributes": attributes}})
    assert resp.status_code == 201, resp.text
    return bool(resp.json()["status"]["allowed"])


def test_writes_fail_closed_without_the_webhook_and_resume_with_a_new_pod(installed: Installed) -> None:
    bed = installed.bed
    valid = cr(TEAM_A, name="other")
    scale(bed, "apprafter-admission", 0)
    bed.wait_list("v1", "Pod", NAMESPACE, lambda pods: not pods or None,
                  labels="app.kubernetes.io/component=webhook", what="the webhook's pods gone")

    def refused_write() -> httpx.Response | None:
        resp = server_side_apply(bed.http, bed, valid, dry_run=True)
        return resp if resp.status_code >= 500 else None

    refused = wait("writes refused", refused_write)
    assert 'failed calling webhook "applications.apprafter.io"' in refused.json()["message"]
    scale(bed, "apprafter-admission", 2)
    installed.webhooks = rolled_out(bed, "apprafter-admission")
    wait("writes admitted", lambda: server_side_apply(bed.http, bed, valid, dry_run=True).status_code < 300 or None)
    assert refused_by_webhook(bed, TEAM_A) is not None
