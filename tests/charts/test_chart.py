"""deploy/charts/apprafter-operator under the real helm: lint, what each object must be, least-privilege RBAC,
values checked and documented, and a server-side dry run of everything it renders."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from platform_stack.resource import NAME as PLATFORM_STACK_NAME
from platform_stack.umbrella import NAMESPACE as UMBRELLA_NAMESPACE
from renderer.manifests import KINDS
from renderer.settings import flags_context
from tests.charts.chart import CHART, KUBE_VERSION, NAMESPACE, VERSION, container, find, one, render, template
from tests.platform_stack.conftest import helm, ok
from tests.renderer.helpers import run_cli
from tests.testbed.kube import KubeTestBed

OPERATOR_SA = {"kind": "ServiceAccount", "name": "apprafter-operator", "namespace": NAMESPACE}
OPERATOR_USER = f"system:serviceaccount:{NAMESPACE}:apprafter-operator"
CHILD_VERBS = ["get", "list", "watch", "create", "patch", "delete"]


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return render()


def test_helm_lint_strict_is_clean() -> None:
    for args in ([], ["--set", "webhook.certManager.enabled=false", "--set", "webhook.tls.secretName=tls",
                      "--set", "webhook.tls.caBundle=Y2E=", "--set", "operator.replicas=2"]):
        out = ok(helm("lint", "--strict", str(CHART), "--kube-version", KUBE_VERSION, *args))
        assert "1 chart(s) linted, 0 chart(s) failed" in out
        # helm's only remark: there is no icon to point at.
        assert [line for line in out.splitlines() if line.startswith("[")] == ["[INFO] Chart.yaml: icon is recommended"]


def test_crds_are_what_apprafter_crds_prints() -> None:
    printed = run_cli("crds")
    assert printed.returncode == 0, printed.stderr
    shipped = (CHART / "crds" / "apprafter.io.yaml").read_text()
    assert shipped == printed.stdout, (
        "the chart's CRDs are stale: `apprafter crds > deploy/charts/apprafter-operator/crds/apprafter.io.yaml`")
    names = [d["metadata"]["name"] for d in yaml.safe_load_all(shipped) if d]
    assert names == ["applicationbaselines.apprafter.io", "applications.apprafter.io", "hostnamepolicies.apprafter.io",
                     "migrationplans.apprafter.io",
                     "platformstacks.apprafter.io", "publichostnames.apprafter.io", "resourceclaims.apprafter.io",
                     "serviceproviders.apprafter.io", "sourcecredentials.apprafter.io"]


def test_chart_image_and_package_share_one_version(objects: list[dict[str, Any]]) -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert (chart["version"], chart["appVersion"]) == (VERSION, VERSION)
    images = {container(d)["image"] for d in find(objects, "Deployment")}
    assert images == {f"ghcr.io/apprafter/apprafter-operator:{VERSION}"}


def test_operator_deployment_leader_elects_with_probes_and_a_locked_down_pod(objects: list[dict[str, Any]]) -> None:
    deployment = one(objects, "Deployment", "apprafter-operator")
    pod = deployment["spec"]["template"]["spec"]
    c = container(deployment)
    assert deployment["spec"]["replicas"] == 1
    assert pod["serviceAccountName"] == "apprafter-operator"
    assert c["args"][0] == "operator"
    assert {"--leader-elect", f"--leader-elect-resource-namespace={NAMESPACE}",
            "--leader-elect-resource-name=apprafter-operator"} <= set(c["args"])
    help_text = run_cli("operator", "--help").stdout
    for arg in c["args"][1:]:
        assert arg.split("=")[0] in help_text, arg
    assert {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}} in c["env"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert f"--health-port={ports['health']}" in c["args"] and f"--metrics-port={ports['metrics']}" in c["args"]
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert_locked_down(pod, c)
    assert not find(objects, "PodDisruptionBudget", "apprafter-operator")  # one replica: nothing to keep up

    two = render({"operator": {"replicas": 2}})
    assert one(two, "Deployment", "apprafter-operator")["spec"]["replicas"] == 2
    assert one(two, "PodDisruptionBudget", "apprafter-operator")["spec"]["maxUnavailable"] == 1
    refused = template({"operator": {"replicas": 2, "leaderElection": {"enabled": False}}})
    assert refused.returncode == 1
    assert "operator.replicas: more than one replica needs operator.leaderElection.enabled" in refused.stderr


def test_webhook_deployment_runs_two_replicas_reading_only_hostname_policies_and_providers(
        objects: list[dict[str, Any]]) -> None:
    deployment = one(objects, "Deployment", "apprafter-admission")
    pod = deployment["spec"]["template"]["spec"]
    c = container(deployment)
    assert deployment["spec"]["replicas"] == 2
    assert pod["automountServiceAccountToken"] is True  # the pod's token: its account reads HostnamePolicies
    assert one(objects, "ServiceAccount", "apprafter-admission")["automountServiceAccountToken"] is False
    assert rules(one(objects, "ClusterRole", "apprafter:admission")) == {
        ("apprafter.io", "hostnamepolicies", ()): ["get", "list", "watch"],
        ("apprafter.io", "serviceproviders", ()): ["get", "list", "watch"]}
    binding = one(objects, "ClusterRoleBinding", "apprafter:admission")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "apprafter-admission", "namespace": NAMESPACE}]
    assert c["args"][0] == "webhook"
    assert "--operator-user=system:serviceaccount:apprafter-system:apprafter-operator" in c["args"]
    help_text = run_cli("webhook", "--help").stdout
    for arg in c["args"][1:]:
        assert arg.split("=")[0] in help_text, arg
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        assert c[probe]["httpGet"] == {"path": path, "port": "https", "scheme": "HTTPS"}
    assert {m["mountPath"] for m in c["volumeMounts"]} == {"/etc/apprafter/tls", "/tmp"}
    assert_locked_down(pod, c)
    assert one(objects, "PodDisruptionBudget", "apprafter-admission")["spec"]["minAvailable"] == 1
    service = one(objects, "Service", "apprafter-admission")
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= {p["name"] for p in c["ports"]}


def assert_locked_down(pod: dict[str, Any], c: dict[str, Any]) -> None:
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert c["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]}}
    assert "memory" in c["resources"]["limits"]
    tmp = next(v for v in pod["volumes"] if v["name"] == "tmp")
    assert "emptyDir" in tmp  # /tmp is the one writable place


def test_webhook_configurations_fail_closed_with_cert_managers_ca(objects: list[dict[str, Any]]) -> None:
    serving = one(objects, "Certificate", "apprafter-admission")
    deployment = one(objects, "Deployment", "apprafter-admission")
    service = one(objects, "Service", "apprafter-admission")
    tls = next(v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == "tls")
    assert tls["secret"]["secretName"] == serving["spec"]["secretName"]
    assert f"apprafter-admission.{NAMESPACE}.svc" in serving["spec"]["dnsNames"]
    assert serving["spec"]["privateKey"]["rotationPolicy"] == "Always"
    configs = find(objects, "ValidatingWebhookConfiguration") + find(objects, "MutatingWebhookConfiguration")
    assert len(configs) == 2
    resources: set[str] = set()
    for config in configs:
        assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/apprafter-admission"
        for hook in config["webhooks"]:
            assert (hook["failurePolicy"], hook["sideEffects"], hook["timeoutSeconds"], hook["matchPolicy"]) == \
                ("Fail", "None", 5, "Equivalent")
            assert hook["clientConfig"]["service"]["name"] == service["metadata"]["name"]
            assert "caBundle" not in hook["clientConfig"]  # cert-manager's cainjector writes it
            resources |= {r for rule in hook["rules"] for r in rule["resources"]}
            # what the operator's identity alone allows skips the review; nothing else does
            for condition in hook.get("matchConditions", []):
                assert condition["expression"].startswith(
                    f"!(request.userInfo.username == '{OPERATOR_USER}'"), condition
    assert resources == {"applications", "applications/status", "migrationplans", "migrationplans/status",
                         "platformstacks", "platformstacks/status", "applicationbaselines",
                         "applicationbaselines/status", "publichostnames", "publichostnames/status",
                         "sourcecredentials", "sourcecredentials/status", "resourceclaims", "resourceclaims/status",
                         "hostnamepolicies", "serviceproviders"}


def test_without_cert_manager_the_given_secret_and_ca_are_used() -> None:
    refused = template({"webhook": {"certManager": {"enabled": False}}})
    assert refused.returncode == 1
    assert "webhook.tls.secretName: name the kubernetes.io/tls Secret of the webhook" in refused.stderr
    given = {"certManager": {"enabled": False}, "tls": {"secretName": "mine", "caBundle": "Y2E="}}
    objects = render({"webhook": given})
    assert not find(objects, "Certificate") and not find(objects, "Issuer")
    tls = next(v for v in one(objects, "Deployment", "apprafter-admission")["spec"]["template"]["spec"]["volumes"]
               if v["name"] == "tls")
    assert tls["secret"]["secretName"] == "mine"
    for config in find(objects, "ValidatingWebhookConfiguration") + find(objects, "MutatingWebhookConfiguration"):
        assert "annotations" not in config["metadata"]
        assert {h["clientConfig"]["caBundle"] for h in config["webhooks"]} == {"Y2E="}


def test_platform_settings_reach_the_operator_and_the_webhook_as_the_platform_file_they_read(
        objects: list[dict[str, Any]], tmp_path: Path) -> None:
    settings = {"gateway": {"implementation": "traefik", "drainSeconds": 7}, "providerNamespaces": {"pg": "data"}}
    given = render({"platform": {"domain": "example.com", "settings": settings}})
    (config,) = find(given, "ConfigMap", "apprafter-operator-platform")
    file = tmp_path / "platform.yaml"
    file.write_text(config["data"]["platform.yaml"])
    # what the operator and the webhook make of it: the same loader as their --platform, the flag's domain beside it
    context = flags_context(file, domain="example.com")
    assert (context.gateway_implementation, context.gateway_drain_seconds) == ("traefik", 7)
    assert dict(context.provider_namespaces)["pg"] == "data"
    checksums = set()
    for name in ("apprafter-operator", "apprafter-admission"):
        deployment = one(given, "Deployment", name)
        pod = deployment["spec"]["template"]
        mount = next(m for m in container(deployment)["volumeMounts"] if m["name"] == "platform")
        volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "platform")
        assert volume["configMap"]["name"] == config["metadata"]["name"]
        assert f"--platform={mount['mountPath']}/platform.yaml" in container(deployment)["args"]
        assert "--domain=example.com" in container(deployment)["args"]
        checksums.add(pod["metadata"]["annotations"]["checksum/platform"])
    assert len(checksums) == 1
    changed = render({"platform": {"settings": {**settings, "gateway": {"drainSeconds": 8}}}})
    assert one(changed, "Deployment", "apprafter-operator")["spec"]["template"]["metadata"]["annotations"][
        "checksum/platform"] not in checksums  # a changed file rolls the pods
    # none given: no ConfigMap, no flag, nothing mounted (the defaults, as before)
    assert not find(objects, "ConfigMap")
    plain = container(one(objects, "Deployment", "apprafter-operator"))
    assert not any(a.startswith("--platform") for a in plain["args"])


def rules(role: dict[str, Any]) -> dict[tuple[str, str, tuple[str, ...]], list[str]]:
    """(group, resource, resourceNames) -> verbs, one entry per resource."""
    out: dict[tuple[str, str, tuple[str, ...]], list[str]] = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                key = (group, resource, tuple(rule.get("resourceNames", ())))
                assert key not in out, f"{key} is granted twice"
                out[key] = rule["verbs"]
    return out


def test_operator_cluster_role_is_what_the_operator_does_and_no_more(objects: list[dict[str, Any]]) -> None:
    role = rules(one(objects, "ClusterRole", "apprafter:operator"))
    children = {(k.api_version.rpartition("/")[0], k.plural, ()): CHILD_VERBS for k in KINDS}
    assert {k: v for k, v in role.items() if k in children} == children  # every kind the renderer emits
    assert {k: v for k, v in role.items() if k not in children} == {
        ("apprafter.io", "applications", ()): ["get", "list", "watch"],
        ("apprafter.io", "applications/status", ()): ["patch"],
        ("apprafter.io", "applications/finalizers", ()): ["update"],
        ("apprafter.io", "migrationplans", ()): ["get", "list", "watch", "create", "patch", "delete"],
        ("apprafter.io", "migrationplans/status", ()): ["patch"],
        ("events.k8s.io", "events", ()): ["create"],
        ("", "pods", ()): ["get", "list", "watch"],  # read only: their states are the Application's health
        ("", "namespaces", ()): ["get"],  # a claim's namespace's UID: whose kept data is (lifecycle.backends.kept)
        ("apprafter.io", "hostnamepolicies", ()): ["get", "list", "watch"],  # who may use which hostname
        # the claim binder: which providers exist; a claim's status.provider and Bound condition
        ("apprafter.io", "serviceproviders", ()): ["get", "list", "watch"],
        ("apprafter.io", "resourceclaims/status", ()): ["patch"],
        # a connection Secret's owner reference blocks its claim's deletion
        ("apprafter.io", "resourceclaims/finalizers", ()): ["update"],
        # the redis-server backend: does its instance's Service have a ready endpoint to dial yet?
        ("discovery.k8s.io", "endpointslices", ()): ["list"],
        # the storage-class backend: a disk claim's PersistentVolumeClaim, and the StorageClasses it reads
        ("", "persistentvolumeclaims", ()): ["get", "list", "watch", "create", "patch", "delete"],
        ("storage.k8s.io", "storageclasses", ()): ["get", "list"],
        # the cloudnative-pg backend: the shared Cluster, never deleted, and a Database per claim, deleted once its
        # data was dropped (under an approved data-migration plan or an administrator's act)
        ("postgresql.cnpg.io", "clusters", ()): ["get", "list", "watch", "create", "patch", "delete"],
        # a restore: the recovered Cluster deleted once copied, by the Job that copies the claim's database
        ("batch", "jobs", ()): ["get", "list", "watch", "create", "patch"],
        ("postgresql.cnpg.io", "databases", ()): ["get", "list", "watch", "create", "patch", "delete"],
        ("postgresql.cnpg.io", "scheduledbackups", ()): ["get", "list", "watch", "create", "patch", "delete"],
        ("postgresql.cnpg.io", "poolers", ()): ["get", "list", "watch", "create", "patch", "delete"],
        ("apprafter.io", "platformstacks", ()): ["get", "list", "watch"],
        ("apprafter.io", "platformstacks", (PLATFORM_STACK_NAME,)): ["patch"],
        ("apprafter.io", "platformstacks/status", ()): ["patch"],
        # a platform MigrationPlan's owner reference blocks its PlatformStack's deletion
        ("apprafter.io", "platformstacks/finalizers", (PLATFORM_STACK_NAME,)): ["update"],
        # the metadata of the Secrets an Application's env names (are they granted to it?), by name; the Secrets
        # derived from SourceCredentials, written, watched by label and pruned
        ("", "secrets", ()): ["get", "list", "watch", "create", "patch", "delete"],
    }
    own = rules(one(objects, "Role", "apprafter:operator", NAMESPACE))
    assert own == {("coordination.k8s.io", "leases", ()): ["create"],
                   ("coordination.k8s.io", "leases", ("apprafter-operator",)): ["get", "update"],
                   # its records, in its own namespace; a baseline is never its to delete (a person forgets one)
                   ("apprafter.io", "applicationbaselines", ()): ["get", "list", "watch", "create", "patch"],
                   ("apprafter.io", "publichostnames", ()): ["get", "list", "watch", "create", "patch", "delete"],
                   # SourceCredentials: read, a finalizer patched on and off, their status
                   ("apprafter.io", "sourcecredentials", ()): ["get", "list", "watch", "patch"],
                   ("apprafter.io", "sourcecredentials/status", ()): ["patch"],
                   # a credential-scope MigrationPlan's owner reference blocks its owner's deletion
                   ("apprafter.io", "sourcecredentials/finalizers", ()): ["update"]}
    assert rules(one(objects, "ClusterRole", "apprafter:baseline-forgetter")) == {
        ("apprafter.io", "applicationbaselines", ()): ["get", "list", "watch", "delete"]}
    assert rules(one(objects, "Role", "apprafter:operator", UMBRELLA_NAMESPACE)) == {
        ("argoproj.io", "applications", ()): ["get", "list", "watch", "create", "patch"]}
    # the public Gateways' per-hostname listeners, in the Gateways' namespace alone: the chart's patched, the ones
    # past it made and patched, and deleted by name (never the chart's own)
    assert rules(one(objects, "Role", "apprafter:operator:listeners", "apprafter-gateway")) == {
        ("gateway.networking.k8s.io", "gateways", ()): ["get", "list", "watch", "create", "patch"],
        ("gateway.networking.k8s.io", "gateways", tuple(f"public-{i}" for i in range(2, 17))): ["delete"]}
    bindings = [b for b in find(objects, "ClusterRoleBinding") + find(objects, "RoleBinding")
                if b["roleRef"]["name"] != "apprafter:admission"]  # the webhook's (its one read grant)
    assert {(b["kind"], b["metadata"].get("namespace"), b["roleRef"]["name"]) for b in bindings} == {
        ("ClusterRoleBinding", None, "apprafter:operator"), ("RoleBinding", NAMESPACE, "apprafter:operator"),
        ("RoleBinding", UMBRELLA_NAMESPACE, "apprafter:operator"),
        ("RoleBinding", "apprafter-gateway", "apprafter:operator:listeners")}
    assert all(b["subjects"] == [OPERATOR_SA] for b in bindings)


def test_without_the_platform_stack_controller_the_operator_gets_none_of_its_permissions(
        objects: list[dict[str, Any]]) -> None:
    def grants(objs: list[dict[str, Any]], group_: str) -> dict[tuple[str | None, str], list[str]]:
        return {(r["metadata"].get("namespace"), resource): verbs
                for r in find(objs, "ClusterRole", "apprafter:operator") + find(objs, "Role", "apprafter:operator")
                for (group, resource, _), verbs in rules(r).items()
                if group == group_ and (group_ != "apprafter.io" or resource.startswith("platformstacks"))}

    without = render({"platformStack": {"enabled": False}})
    assert grants(objects, "apprafter.io") and not grants(without, "apprafter.io")
    # the SourceCredential controller's gate still reads Argo CD's Applications (their repoURLs); it writes none
    assert sorted(grants(objects, "argoproj.io")[(UMBRELLA_NAMESPACE, "applications")]) == [
        "create", "get", "list", "patch", "watch"]
    assert grants(without, "argoproj.io") == {(UMBRELLA_NAMESPACE, "applications"): ["get", "list", "watch"]}
    assert find(without, "RoleBinding", namespace=UMBRELLA_NAMESPACE)
    args = {name: container(one(objs, "Deployment", OPERATOR_SA["name"]))["args"]
            for name, objs in (("with", objects), ("without", without))}
    assert "--no-platform-stack" in args["without"] and "--no-platform-stack" not in args["with"]
    assert [a for a in args["without"] if a != "--no-platform-stack"] == args["with"]


def test_the_claim_binder_runs_where_the_operator_is_a_claim_provider(objects: list[dict[str, Any]]) -> None:
    binder = {("apprafter.io", "serviceproviders", ()): ["get", "list", "watch"],
              ("apprafter.io", "resourceclaims/status", ()): ["patch"],
              ("apprafter.io", "resourceclaims/finalizers", ()): ["update"],
              ("discovery.k8s.io", "endpointslices", ()): ["list"],
              ("", "persistentvolumeclaims", ()): ["get", "list", "watch", "create", "patch", "delete"],
              ("storage.k8s.io", "storageclasses", ()): ["get", "list"],
              ("postgresql.cnpg.io", "clusters", ()): ["get", "list", "watch", "create", "patch", "delete"],
              ("postgresql.cnpg.io", "databases", ()): ["get", "list", "watch", "create", "patch", "delete"],
              ("batch", "jobs", ()): ["get", "list", "watch", "create", "patch"]}

    def grants(objs: list[dict[str, Any]]) -> dict[tuple[str, str, tuple[str, ...]], list[str]]:
        return {k: v for k, v in rules(one(objs, "ClusterRole", "apprafter:operator")).items() if k in binder}

    def args(objs: list[dict[str, Any]]) -> list[str]:
        return list(container(one(objs, "Deployment", OPERATOR_SA["name"]))["args"])

    others = render({"webhook": {"claimStatusUsers": ["system:serviceaccount:pg:provider"]}})
    among = render({"webhook": {"claimStatusUsers": ["system:serviceaccount:pg:provider", OPERATOR_USER]}})
    assert grants(objects) == binder and grants(among) == binder
    assert "--no-claim-binder" not in args(objects) and "--no-claim-binder" not in args(among)
    # other providers alone may write claim status (the webhook): they bind, the operator gets none of it
    assert grants(others) == {} and "--no-claim-binder" in args(others)
    assert [a for a in args(others) if a != "--no-claim-binder"] == args(objects)


def test_argocd_namespace_moves_the_operators_argocd_role_and_flag(objects: list[dict[str, Any]]) -> None:
    default_args = container(one(objects, "Deployment", OPERATOR_SA["name"]))["args"]
    assert f"--argocd-namespace={UMBRELLA_NAMESPACE}" in default_args
    moved = render({"argocd": {"namespace": "gitops"}, "platformStack": {"enabled": False}})
    assert "--argocd-namespace=gitops" in container(one(moved, "Deployment", OPERATOR_SA["name"]))["args"]
    assert rules(one(moved, "Role", "apprafter:operator", "gitops")) == {
        ("argoproj.io", "applications", ()): ["get", "list", "watch"]}
    assert one(moved, "RoleBinding", "apprafter:operator", "gitops")["subjects"] == [OPERATOR_SA]
    assert not find(moved, "Role", namespace=UMBRELLA_NAMESPACE)
    # the PlatformStack's umbrella lives in argocd: the controller cannot follow Argo CD elsewhere
    refused = template({"argocd": {"namespace": "gitops"}})
    assert refused.returncode != 0
    assert "argocd.namespace" in refused.stderr and "platformStack.enabled" in refused.stderr
    assert template({"argocd": {"namespace": "Not_A_Name"}, "platformStack": {"enabled": False}}).returncode != 0


def test_only_the_operator_patches_application_status_and_approvers_have_their_own_role(
        objects: list[dict[str, Any]]) -> None:
    roles = find(objects, "ClusterRole") + find(objects, "Role")
    with_status = [r["metadata"]["name"] for r in roles if ("apprafter.io", "applications/status", ()) in rules(r)]
    assert with_status == ["apprafter:operator"]
    approver = rules(one(objects, "ClusterRole", "apprafter:migration-approver"))
    assert approver == {("apprafter.io", "migrationplans", ()): ["get", "list", "watch"],
                        ("apprafter.io", "migrationplans/status", ()): ["get", "patch", "update"]}


def test_images_are_pinned_never_latest() -> None:
    refused = template({"image": {"tag": "latest"}})
    assert refused.returncode == 1
    assert "image.tag: latest is not allowed: pin a version (or set image.digest)" in refused.stderr
    digest = "sha256:" + "ab" * 32
    objects = render({"image": {"registry": "registry.example.com/platform", "digest": digest}})
    images = {container(d)["image"] for d in find(objects, "Deployment")}
    assert images == {f"registry.example.com/platform/apprafter-operator:{VERSION}@{digest}"}
    bad = template({"image": {"digest": "sha256:short"}})
    assert bad.returncode == 1 and "/image/digest" in bad.stderr


def test_values_schema_refuses_a_misspelt_value() -> None:
    proc = template({"operator": {"replcas": 2}})
    assert proc.returncode == 1
    assert "additional properties 'replcas' not allowed" in proc.stderr


def test_a_release_can_carry_either_half() -> None:
    operator_only = render({"webhook": {"enabled": False}})
    webhook_only = render({"operator": {"enabled": False}})
    kinds = {(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")) for o in render()}
    halves = [{(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")) for o in objs}
              for objs in (operator_only, webhook_only)]
    assert halves[0] | halves[1] == kinds and not halves[0] & halves[1]
    assert container(one(webhook_only, "Deployment"))["args"][0] == "webhook"
    assert container(one(operator_only, "Deployment"))["args"][0] == "operator"


def flatten(values: Any, prefix: str = "") -> dict[str, Any]:
    """values.yaml as dotted keys down to scalars, lists and empty maps."""
    if not isinstance(values, dict) or not values:
        return {prefix: values}
    out: dict[str, Any] = {}
    for key, value in values.items():
        out.update(flatten(value, f"{prefix}.{key}" if prefix else key))
    return out


def test_readme_documents_every_value_with_its_default() -> None:
    leaves = flatten(yaml.safe_load((CHART / "values.yaml").read_text()))
    rows = re.findall(r"^\| `([^`]+)` \| (.*?) \| .* \|$", (CHART / "README.md").read_text(), re.MULTILINE)
    documented = dict(rows)
    # A documented key is a value or a whole map of them (securityContext, resources).
    for key in documented:
        assert key in leaves or any(leaf.startswith(key + ".") for leaf in leaves), f"{key} is not a value"
    for leaf, default in leaves.items():
        key = next((k for k in documented if leaf == k or leaf.startswith(k + ".")), None)
        assert key is not None, f"{leaf} is not in README.md's values table"
        if key == leaf:
            shown = "[]" if default == [] else "{}" if default == {} else '""' if default == "" else \
                str(default).lower() if isinstance(default, bool) else str(default)
            assert documented[key] == f"`{shown}`", f"{key}: README says {documented[key]}, values.yaml {shown}"


@pytest.mark.testbed
def test_everything_the_chart_renders_passes_a_server_side_dry_run(kube: KubeTestBed) -> None:
    objects = render(None, "--include-crds")
    stored = kube.dry_run_apply(objects, namespace=NAMESPACE)
    assert [o["kind"] for o in stored] == [o["kind"] for o in objects]
    assert {o["kind"] for o in stored} >= {"CustomResourceDefinition", "Deployment", "ClusterRole", "Role",
                                           "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration",
                                           "Certificate", "PodDisruptionBudget"}


def test_openbao_values_become_the_operators_flags_and_its_ca_a_mounted_file(objects: list[dict[str, Any]]) -> None:
    from apprafter.operator_cmd import operator

    plain = container(one(objects, "Deployment", OPERATOR_SA["name"]))
    assert not [a for a in plain["args"] if a.startswith("--openbao")]
    values = {"operator": {"openBao": {"address": "https://openbao.openbao.svc:8200", "authRole": "apprafter",
                                       "caConfigMap": "openbao-ca"}}}
    deployment = one(render(values), "Deployment", OPERATOR_SA["name"])
    args = [a for a in container(deployment)["args"] if a.startswith("--openbao")]
    assert args == ["--openbao-address=https://openbao.openbao.svc:8200", "--openbao-auth-role=apprafter",
                    "--openbao-auth-mount=kubernetes", "--openbao-ca-file=/etc/apprafter/openbao/ca.crt"]
    flags = {opt for param in operator.params for opt in param.opts}
    assert {a.split("=", 1)[0] for a in args} <= flags  # flags the operator really has
    mounts = {m["name"]: m["mountPath"] for m in container(deployment)["volumeMounts"]}
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert mounts["openbao-ca"] == "/etc/apprafter/openbao"
    assert volumes["openbao-ca"]["configMap"] == {"name": "openbao-ca", "items": [{"key": "ca.crt", "path": "ca.crt"}]}
    no_role = template({"operator": {"openBao": {"address": "https://openbao.openbao.svc:8200"}}})
    assert no_role.returncode != 0 and "operator.openBao.authRole" in no_role.stderr
    for bad in ({"address": "https://bao:8200/v1/secret"}, {"adress": "https://bao:8200"}):
        refused = template({"operator": {"openBao": bad}})
        assert refused.returncode != 0 and "/operator/openBao" in refused.stderr, refused.stderr


def test_the_platforms_domain_and_tier_reach_the_operator_and_the_webhook_alike(
        objects: list[dict[str, Any]]) -> None:
    """Both judge hostnames by one rule (lifecycle.hostname_policy), so both must be told the same domain: with the
    webhook on the default one, an app's own default name under the real domain was refused at the door."""
    from apprafter.operator_cmd import operator
    from apprafter.webhook_cmd import webhook

    def platform_args(rendered: list[dict[str, Any]], name: str) -> list[str]:
        args = container(one(rendered, "Deployment", name))["args"]
        return [a for a in args if a.startswith(("--domain", "--tier"))]

    for name in ("apprafter-operator", "apprafter-admission"):
        assert platform_args(objects, name) == []  # unset: each reads the platform file's or the default
    told = render({"platform": {"domain": "apps.acme.dev", "tier": "team"}})
    for name, command in (("apprafter-operator", operator), ("apprafter-admission", webhook)):
        args = platform_args(told, name)
        assert args == ["--domain=apps.acme.dev", "--tier=team"], (name, args)
        assert {a.split("=", 1)[0] for a in args} <= {opt for param in command.params for opt in param.opts}


def test_image_update_registries_become_the_operators_flags(objects: list[dict[str, Any]]) -> None:
    """A platform whose registry is served over plain HTTP inside its network names it in the values; the operator
    then asks it over HTTP (lifecycle.image_digest.plain_http)."""
    from apprafter.operator_cmd import operator

    def registry_args(rendered: list[dict[str, Any]]) -> list[str]:
        args = container(one(rendered, "Deployment", OPERATOR_SA["name"]))["args"]
        return [a for a in args if a.startswith(("--image-registries", "--insecure-registries"))]

    assert registry_args(objects) == []  # none given: every registry, over HTTPS unless loopback
    told = render({"imageUpdates": {"registries": ["ghcr.io", "10.0.0.7:5000"],
                                    "insecureRegistries": ["10.0.0.7:5000", "*.lan"]}})
    args = registry_args(told)
    assert args == ["--image-registries=ghcr.io", "--image-registries=10.0.0.7:5000",
                    "--insecure-registries=10.0.0.7:5000", "--insecure-registries=*.lan"]
    assert {a.split("=", 1)[0] for a in args} <= {opt for param in operator.params for opt in param.opts}
    for bad in ("", "registry lan", " "):
        for key in ("registries", "insecureRegistries"):
            refused = template({"imageUpdates": {key: [bad]}})
            assert refused.returncode != 0 and f"/imageUpdates/{key}/0" in refused.stderr, refused.stderr
