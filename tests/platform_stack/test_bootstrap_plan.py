"""lifecycle.bootstrap, the decisions of `apprafter cluster-bootstrap`, on what a cluster holds: Argo CD absent or
there, the loader's own objects unchanged or drifted, the PlatformStack and root Application left alone once they
exist; and the command's input errors, which fail before any registry or cluster is asked."""

from __future__ import annotations

import base64
import fnmatch
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from apprafter.bootstrap_cmd import _crds, _issuer, _sidecar, _tenant_project, sidecar_directory
from lifecycle.bootstrap import (
    FIELD_MANAGER,
    KEYS_SECRET,
    SIDECAR_MANAGER,
    Key,
    Request,
    Stack,
    crd_scopes,
    key_of,
    namespaced_in,
    plan,
    reads,
    sidecar_objects,
)
from lifecycle.bootstrap_settings import printed, with_gateway_class
from platform_stack import umbrella
from platform_stack.resource import MAX_VALUES_BYTES
from renderer.context import DEFAULTS, GATEWAY_NAMESPACE
from renderer.names import OPERATOR_FIELD_MANAGER
from tests.platform_stack.conftest import applications, cli, helm_template
from tests.testbed.argocd import ARGOCD_VERSIONS, install_manifest
from toolchain.errors import UserError

DIGEST = "sha256:" + "ab" * 32
STACK = Stack("registry.example.com/platform/platform-stack", "1.1.0", DIGEST, False)
KEY = ("release.pub", base64.b64encode(b"-----BEGIN PUBLIC KEY-----\n...\n-----END PUBLIC KEY-----\n").decode())


def request(**changes: Any) -> Request:
    fields: dict[str, Any] = {"stack": STACK, "values": {"tier": "solo", "domain": "example.com"},
                              "channel": "stable", "auto_upgrade": True, "public_key": KEY, "sidecar": _sidecar(None),
                              "crds": _crds(), "argocd_manifest": None, "tenant_project": _tenant_project()}
    return Request(**{**fields, **changes})


def argocd_there() -> dict[Key, dict[str, Any]]:
    """What makes an Argo CD: its Application CRD and its two workloads."""
    objs = [{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
             "metadata": {"name": "applications.argoproj.io"}},
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "argocd-repo-server",
                                                                          "namespace": "argocd"}},
            {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "argocd-application-controller",
                                                                           "namespace": "argocd"}}]
    return {key_of(o): o for o in objs}


def as_applied(obj: Mapping[str, Any], manager: str) -> dict[str, Any]:
    """A live object as a server-side apply of `obj` by `manager` left it (managedFields of every field it set)."""
    def fields(node: Any) -> Any:
        if isinstance(node, Mapping):
            return {f"f:{k}": fields(v) for k, v in node.items()}
        if isinstance(node, list):
            return {f"k:{{\"name\":\"{item['name']}\"}}": fields(item) for item in node if isinstance(item, Mapping)
                    and "name" in item}
        return {}
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    return {**obj, "metadata": {**obj["metadata"], "managedFields": [
        {"manager": manager, "operation": "Apply", "fieldsV1": fields(body)}]}}


def test_argo_cd_absent_without_a_manifest_is_the_users_to_fix() -> None:
    with pytest.raises(UserError) as error:
        plan(request(), {})
    (line,) = error.value.lines()
    assert line.startswith("--argocd-manifest: Argo CD is not installed in namespace argocd (missing "
                           "crd/applications.argoproj.io, deployment/argocd-repo-server, "
                           "statefulset/argocd-application-controller): pass --argocd-manifest FILE")


def test_argo_cd_absent_is_installed_from_the_manifest_crds_first_then_ours() -> None:
    objects = [o for o in yaml.safe_load_all(install_manifest(ARGOCD_VERSIONS[0]).read_text()) if o]
    cluster_scoped = ("ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition")
    scopes = {(o["apiVersion"], o["kind"]): o["kind"] not in cluster_scoped for o in objects}
    decided = plan(request(argocd_manifest=namespaced_in(objects, "argocd", scopes)), {})
    assert [s.obj["kind"] for s in decided.steps[:2]] == ["Namespace", "Namespace"]
    argocd_kinds = [s.obj["kind"] for s in decided.steps if s.why == "Argo CD"]
    crds = argocd_kinds.count("CustomResourceDefinition")
    assert crds == 3 and set(argocd_kinds[:crds]) == {"CustomResourceDefinition"}  # before the objects of their kinds
    assert all(s.action == "create" for s in decided.steps)
    argocd = [s for s in decided.steps if s.why == "Argo CD"]
    assert len(argocd) == len(objects) and all(s.force and s.manager == FIELD_MANAGER for s in argocd)
    assert all(bool(s.obj["metadata"].get("namespace") == "argocd") is (s.obj["kind"] not in cluster_scoped)
               for s in argocd)
    assert decided.notes[0].startswith("Argo CD is not installed in namespace argocd")
    # The sidecar settings after Argo CD, without force and as their own manager (docs/install.md step 3).
    sidecar = [s for s in decided.steps if s.manager == SIDECAR_MANAGER]
    assert [key_of(s.obj)[1:] for s in sidecar] == [("Deployment", "argocd", "argocd-repo-server"),
                                                    ("ConfigMap", "argocd", "argocd-cmd-params-cm"),
                                                    ("ConfigMap", "argocd", "argocd-cm"),
                                                    ("ConfigMap", "argocd", "argocd-rbac-cm")]
    assert not any(s.force for s in sidecar)
    assert min(decided.steps.index(s) for s in sidecar) > max(decided.steps.index(s) for s in argocd)
    assert [s.obj["kind"] for s in decided.steps[-2:]] == ["PlatformStack", "Application"]


def test_installing_argo_cd_creates_its_default_project_once_before_the_root_application() -> None:
    """argocd-server makes the project when it starts, which is after the root Application exists: the application
    controller would find the project missing and not look at the root Application again for minutes (seen on the
    node tier, tests/images/test_bootstrap_node.py)."""
    manifest = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "argocd"}}]
    decided = plan(request(argocd_manifest=manifest), {})
    kinds = [key_of(s.obj)[1:] for s in decided.steps]
    project = kinds.index(("AppProject", "argocd", "default"))
    assert decided.steps[project].action == "create"
    assert decided.steps[project].obj["spec"] == {"sourceRepos": ["*"],
                                                   "destinations": [{"server": "*", "namespace": "*"}],
                                                   "clusterResourceWhitelist": [{"group": "*", "kind": "*"}]}
    assert project < kinds.index(("Application", "argocd", "apprafter-platform"))
    # A project that is there already (argocd-server was quicker, or it was edited) is left as it is.
    key = key_of(decided.steps[project].obj)
    again = plan(request(argocd_manifest=manifest), {key: {"spec": {"sourceRepos": ["https://x"]}}})
    assert [s.action for s in again.steps if key_of(s.obj) == key] == ["kept"]


def test_argo_cd_there_is_not_installed_again_even_with_a_manifest() -> None:
    manifest = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "argocd"}}]
    decided = plan(request(argocd_manifest=manifest), argocd_there())
    assert not [s for s in decided.steps if s.why == "Argo CD"]
    # An Argo CD that runs has its own `default`; the tenants' project is ours, made whoever installed Argo CD.
    assert [key_of(s.obj)[1:] for s in decided.steps if s.obj["kind"] == "AppProject"] == [
        ("AppProject", "argocd", "apprafter-tenants")]
    assert decided.notes == ("Argo CD found in namespace argocd (crd/applications.argoproj.io, "
                             "deployment/argocd-repo-server, statefulset/argocd-application-controller): not "
                             "installed again",)


def test_an_application_controller_as_a_deployment_counts_too() -> None:
    live = argocd_there()
    (controller,) = [k for k in live if k[1] == "StatefulSet"]
    del live[controller]
    live[("apps/v1", "Deployment", "argocd", "argocd-application-controller")] = {}
    assert plan(request(), live).notes[0].startswith("Argo CD found")


def test_the_root_application_is_the_controllers_umbrella_by_the_verified_digest() -> None:
    decided = plan(request(), argocd_there())
    root = decided.steps[-1]
    assert root.obj == umbrella.umbrella(STACK.repository, "1.1.0", DIGEST, {"tier": "solo", "domain": "example.com"},
                                         {}, automated=True)
    assert root.obj["spec"]["source"]["targetRevision"] == DIGEST
    assert (root.action, root.manager, root.force) == ("create", OPERATOR_FIELD_MANAGER, False)


def test_the_platform_stack_auto_upgrades_on_solo_and_is_pinned_otherwise() -> None:
    solo = plan(request(), argocd_there()).steps[-2].obj["spec"]
    assert solo["autoUpgrade"] is True and "pin" not in solo
    assert solo["verify"] == {"provider": "cosign", "secretRef": {"name": KEYS_SECRET}}
    assert solo["source"] == {"repoURL": f"oci://{STACK.repository}"}
    team = plan(request(auto_upgrade=False, values={"tier": "team"}, registry_secret="pull",
                        stack=Stack(STACK.repository, "1.1.0", DIGEST, True)), argocd_there()).steps[-2].obj["spec"]
    assert team["autoUpgrade"] is False and team["pin"] == "1.1.0"
    assert team["source"] == {"repoURL": f"oci://{STACK.repository}", "insecure": True, "secretRef": {"name": "pull"}}


def test_what_exists_of_the_loaders_own_is_unchanged_and_what_drifted_is_applied_again() -> None:
    first = plan(request(), argocd_there())
    live = {**argocd_there(), **{key_of(s.obj): as_applied(s.obj, s.manager) for s in first.steps}}
    again = plan(request(), live)
    assert again.changes == ()
    assert {s.obj["kind"] for s in again.steps if s.action == "kept"} == {"PlatformStack", "Application", "AppProject"}
    cm = next(s.obj for s in first.steps if key_of(s.obj)[1:] == ("ConfigMap", "argocd", "argocd-cm"))
    drifted = {**live, key_of(cm): {**live[key_of(cm)], "data": {}}}
    (changed,) = plan(request(), drifted).changes
    assert (key_of(changed.obj), changed.action) == (key_of(cm), "apply")


def test_the_tenants_project_is_created_once_after_the_plugin_and_then_left_to_the_administrator() -> None:
    decided = plan(request(), argocd_there())
    kinds = [key_of(s.obj)[1:] for s in decided.steps]
    step = decided.steps[kinds.index(("AppProject", "argocd", "apprafter-tenants"))]
    assert (step.action, step.manager, step.force) == ("create", FIELD_MANAGER, False)
    assert step.obj["spec"] == yaml.safe_load((sidecar_directory() / "tenant-project.yaml").read_text())["spec"]
    assert step.obj["spec"]["namespaceResourceWhitelist"] == [{"group": "apprafter.io", "kind": "Application"}]
    assert step.obj["spec"]["clusterResourceWhitelist"] == []
    assert max(i for i, s in enumerate(decided.steps) if s.manager == SIDECAR_MANAGER) < decided.steps.index(step)
    # Narrowed or opted in to the Approve action by its administrator: a run again keeps it as it is.
    edited = {**step.obj, "spec": {**step.obj["spec"], "namespaceResourceWhitelist": [
        {"group": "apprafter.io", "kind": "Application"}, {"group": "apprafter.io", "kind": "MigrationPlan"}]}}
    again = plan(request(), {**argocd_there(), key_of(step.obj): edited})
    assert [s.action for s in again.steps if key_of(s.obj) == key_of(step.obj)] == ["kept"]


def denied(project: Mapping[str, Any], namespace: str) -> bool:
    """Argo CD's isDestinationMatched for the in-cluster server: a `!` pattern that rejects the namespace denies it."""
    patterns = [d["namespace"] for d in project["spec"]["destinations"]]
    if any(p.startswith("!") and fnmatch.fnmatchcase(namespace, p[1:]) for p in patterns):
        return True
    return not any(not p.startswith("!") and fnmatch.fnmatchcase(namespace, p) for p in patterns)


def test_the_tenants_project_denies_every_namespace_of_the_platform(source_eval: dict[str, Any]) -> None:
    project = _tenant_project()
    theirs = {c["namespace"] for c in source_eval["values"]["components"].values()}
    ours = {"argocd", "apprafter-system", "default", "kube-system", "kube-public", "kube-node-lease",
            GATEWAY_NAMESPACE, *dict(DEFAULTS.provider_namespaces).values()}
    assert sorted(n for n in theirs | ours if not denied(project, n)) == []
    assert not any(denied(project, n) for n in ("shop-prod", "team-a", "hello-staging", "payments"))
    assert {d["server"] for d in project["spec"]["destinations"]} == {"https://kubernetes.default.svc"}


def test_the_public_issuer_asked_for_is_the_platform_stacks_override_of_the_gateway() -> None:
    assert _issuer(None, None, None, None) == {}  # the tier's own: ACME, a CA of the cluster's own on dev
    assert _issuer("self-signed", None, None, None) == {"gateway": {"values": {"issuer": {"type": "selfSigned"}}}}
    assert _issuer("own", None, None, None) == {"gateway": {"values": {"issuer": {"type": "none"}}}}
    asked = _issuer(None, "ops@example.com", "https://acme-staging-v02.api.letsencrypt.org/directory", None)
    assert asked == {"gateway": {"values": {"issuer": {"type": "acme", "acme": {
        "email": "ops@example.com", "server": "https://acme-staging-v02.api.letsencrypt.org/directory"}}}}}
    steps = plan(request(overrides=asked), argocd_there()).steps
    stack = next(s.obj for s in steps if s.obj["kind"] == "PlatformStack")
    assert stack["spec"]["overrides"] == asked
    plain = next(s.obj for s in plan(request(), argocd_there()).steps if s.obj["kind"] == "PlatformStack")
    assert "overrides" not in plain["spec"]


def test_a_platform_stack_someone_changed_is_left_alone() -> None:
    first = plan(request(), argocd_there())
    live = {**argocd_there(), **{key_of(s.obj): as_applied(s.obj, s.manager) for s in first.steps}}
    stack = next(s.obj for s in first.steps if s.obj["kind"] == "PlatformStack")
    live[key_of(stack)] = {**stack, "spec": {**stack["spec"], "pin": "2.0.0"}}
    assert plan(request(values={"tier": "solo", "domain": "other.example"}), live).changes == ()


def test_the_sidecar_settings_are_deploy_argocds_patches_with_the_image_asked_for() -> None:
    directory = sidecar_directory()
    component = yaml.safe_load((directory / "kustomization.yaml").read_text())
    patches = {e["path"]: yaml.safe_load((directory / e["path"]).read_text()) for e in component["patches"]}
    objects = sidecar_objects(component, patches, "registry.example.com/argocd-cue-cmp@" + DIGEST)
    repo_server = objects[0]
    (container,) = repo_server["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example.com/argocd-cue-cmp@" + DIGEST
    untouched = patches["repo-server-patch.yaml"]["spec"]["template"]["spec"]["containers"][0]
    assert {k: v for k, v in container.items() if k != "image"} == {k: v for k, v in untouched.items()
                                                                     if k != "image"}
    assert [o["data"] for o in objects[1:]] == [patches[e["path"]]["data"] for e in component["patches"][1:]]


def test_reads_cover_everything_the_plan_looks_at() -> None:
    keys = set(reads(request()))
    assert set(argocd_there()) <= keys
    assert {key_of(s.obj) for s in plan(request(), argocd_there()).steps} <= keys


def test_dry_run_never_shows_a_secrets_values_but_the_release_key() -> None:
    ours = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": KEYS_SECRET}, "data": {"release.pub": "QQ=="}}
    theirs = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "argocd-secret"},
              "data": {"admin.password": "c2VjcmV0"}, "stringData": {"server.secretkey": "hunter2"}}
    assert printed(ours) == ours
    assert printed(theirs)["data"] == {"admin.password": "(not shown)"}
    assert printed(theirs)["stringData"] == {"server.secretkey": "(not shown)"}


# --- the command's own input errors: one line, exit 1, before any registry or cluster is asked -------------------

def bootstrap(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    key = tmp_path / "release.pub"
    if not key.exists():
        key.write_text("-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----\n")
    proc = cli("cluster-bootstrap", "oci://127.0.0.1:1/releases/platform-stack", "--version", "1.1.0", "--key",
               str(key), "--tier", "solo", "--kubeconfig", str(tmp_path / "no-kubeconfig"), *args)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize(("args", "line"), [
    (("--key", "/nonexistent/cosign.pub"), "/nonexistent/cosign.pub: --key: no such file (the cosign public key the "
                                           "stack is signed with)"),
    (("--argocd-manifest", "/nonexistent/install.yaml"), "/nonexistent/install.yaml: --argocd-manifest: no such file"),
    (("--domain", "a b"), "--domain: 'a b': a DNS domain such as example.com"),
    (("--acme-email", "ops"), "--acme-email: an email address such as ops@example.com (the ACME account's contact)"),
    (("--acme-server", "http://acme.example/dir"), "--acme-server: an https:// URL of an ACME directory"),
    (("--issuer", "self-signed", "--acme-email", "ops@example.com"),
     "--issuer: self-signed: --acme-email, --acme-server and --dns01-solver are for --issuer acme"),
    (("--dns01-solver", "/nonexistent/solver.yaml"),
     "/nonexistent/solver.yaml: cannot read the DNS-01 solver file: No such file or directory"),
    (("--gateway-class", "Traefik"), "--gateway-class: 'Traefik': a GatewayClass name such as traefik (lowercase "
                                     "letters, digits, '-' and '.')"),
])
def test_bad_input_is_one_line_and_exit_1(tmp_path: Path, args: tuple[str, ...], line: str) -> None:
    assert bootstrap(tmp_path, *args) == (1, "", line + "\n")


def test_a_dns01_solver_file_that_is_not_a_solver_is_refused_without_printing_it(tmp_path: Path) -> None:
    solver = tmp_path / "solver.yaml"
    for text in ("- cloudflare\n- hunter2\n", "{}\n", "cloudflare: {apiToken: [hunter2\n"):
        solver.write_text(text)
        code, out, err = bootstrap(tmp_path, "--dns01-solver", str(solver))
        assert (code, out) == (1, "") and len(err.splitlines()) == 1 and err.startswith(f"{solver}"), err
        assert "hunter2" not in err
    solver.write_text("cloudflare:\n  apiTokenSecretRef: {name: cloudflare-token, key: api-token}\n")
    assert _issuer(None, None, None, solver) == {"gateway": {"values": {"issuer": {"type": "acme", "acme": {
        "dns01": {"cloudflare": {"apiTokenSecretRef": {"name": "cloudflare-token", "key": "api-token"}}}}}}}}


def test_a_private_key_is_refused_without_printing_it(tmp_path: Path) -> None:
    private = tmp_path / "cosign.key"
    private.write_text("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nc2VjcmV0\n-----END ENCRYPTED SIGSTORE "
                       "PRIVATE KEY-----\n")
    code, out, err = bootstrap(tmp_path, "--key", str(private))
    assert (code, out) == (1, "")
    assert err == f"{private}: --key: not a PEM public key (cosign.pub); never pass the private key\n"


def test_a_manifest_that_is_not_yaml_names_the_place(tmp_path: Path) -> None:
    manifest = tmp_path / "install.yaml"
    manifest.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [x\n")
    code, out, err = bootstrap(tmp_path, "--argocd-manifest", str(manifest))
    assert (code, out) == (1, "")
    assert err.startswith(f"{manifest}:4:1: ") and len(err.splitlines()) == 1, err


def test_a_reference_with_a_tag_is_refused(tmp_path: Path) -> None:
    proc = cli("cluster-bootstrap", "oci://127.0.0.1:1/releases/platform-stack:1.1.0", "--version", "1.1.0",
               "--key", str(tmp_path / "k.pub"), "--tier", "solo")
    assert proc.returncode == 1 and proc.stdout == ""
    (tmp_path / "k.pub").write_text("-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----\n")
    proc = cli("cluster-bootstrap", "oci://127.0.0.1:1/releases/platform-stack:1.1.0", "--version", "1.1.0",
               "--key", str(tmp_path / "k.pub"), "--tier", "solo")
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == ("oci://127.0.0.1:1/releases/platform-stack:1.1.0: name the repository only "
                           "(oci://HOST/REPO/platform-stack): the version is --version\n")


def test_an_unreachable_registry_is_a_tool_failure(tmp_path: Path) -> None:
    code, out, err = bootstrap(tmp_path)
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1 and "127.0.0.1:1" in err, err


def test_a_kind_the_manifests_own_crd_defines_is_placed_by_the_crds_scope() -> None:
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "appprojects.argoproj.io"},
           "spec": {"group": "argoproj.io", "scope": "Namespaced", "names": {"kind": "AppProject"},
                    "versions": [{"name": "v1alpha1"}]}}
    project = {"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject", "metadata": {"name": "default"}}
    scopes = crd_scopes([crd, project])
    assert scopes == {("argoproj.io/v1alpha1", "AppProject"): True}
    placed = namespaced_in([project], "argocd", {**scopes, ("apiextensions.k8s.io/v1", "CustomResourceDefinition"):
                                                 False})
    assert placed[0]["metadata"] == {"name": "default", "namespace": "argocd"}


def test_every_flag_is_in_the_install_guide() -> None:
    from apprafter.bootstrap_cmd import cluster_bootstrap
    from tests.renderer.helpers import REPO

    guide = (REPO / "docs" / "install.md").read_text()
    section = guide[guide.index("## The platform on a cluster"):guide.index("## The manual steps")]
    flags = {o for p in cluster_bootstrap.params for o in [*p.opts, *p.secondary_opts] if o.startswith("--")}
    not_listed = {"--help", "--no-color", "--output", "--kubeconfig", "--context"}  # every command's, or kubectl's
    assert sorted(f for f in flags - not_listed if f not in section) == []


def test_a_manifest_that_aliases_itself_large_is_refused(tmp_path: Path) -> None:
    """A few lines of YAML aliases that would be billions of values once printed or sent."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, "
              f"*a{i - 1}, *a{i - 1}]" for i in range(1, 9)]
    manifest = tmp_path / "install.yaml"
    manifest.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: boom}\ndata:\n"
                        + "".join(f"  {line}\n" for line in lines))
    code, out, err = bootstrap(tmp_path, "--argocd-manifest", str(manifest))
    assert (code, out) == (1, "")
    assert err == (f"{manifest}: --argocd-manifest: more than 2000000 values (YAML aliases count each time they "
                   "are used): refused\n")


def test_someone_elses_argo_cd_under_other_names_is_not_installed_beside() -> None:
    """The CRD is there (a Helm release `cd` has cd-argocd-repo-server), the standard workloads are not: refused."""
    crd = {k: v for k, v in argocd_there().items() if k[1] == "CustomResourceDefinition"}
    manifest = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "argocd-cm", "namespace": "argocd"}}]
    with pytest.raises(UserError) as error:
        plan(request(argocd_manifest=manifest), {k: as_applied(v, "helm") for k, v in crd.items()})
    (line,) = error.value.lines()
    assert line == ("crd/applications.argoproj.io: Argo CD is partly there (crd/applications.argoproj.io; missing "
                    "deployment/argocd-repo-server, statefulset/argocd-application-controller in namespace argocd), "
                    "not installed by cluster-bootstrap: the loader needs Argo CD in namespace argocd under its own "
                    "names (install.yaml, or the Helm chart as release argocd); it does not install a second one")


def test_an_install_a_run_before_began_is_finished() -> None:
    crd = {k: as_applied(v, FIELD_MANAGER) for k, v in argocd_there().items() if k[1] == "CustomResourceDefinition"}
    manifest = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "argocd-cm", "namespace": "argocd"}}]
    decided = plan(request(argocd_manifest=manifest), crd)
    assert decided.notes[0].endswith("installing it from --argocd-manifest (a run before began it)")
    assert [key_of(s.obj) for s in decided.steps if s.why == "Argo CD"] == [key_of(manifest[0])]


def test_a_gateway_class_joins_the_issuer_in_the_gateway_components_overrides() -> None:
    assert with_gateway_class({}, None) == {}
    assert with_gateway_class({}, "traefik") == {"gateway": {"values": {"gatewayClassName": "traefik"}}}
    issuer = _issuer("acme", "ops@example.com", None, None)
    assert with_gateway_class(issuer, "traefik") == {"gateway": {"values": {
        "issuer": {"type": "acme", "acme": {"email": "ops@example.com"}}, "gatewayClassName": "traefik"}}}


def test_the_root_application_carries_every_override_so_argo_cds_first_sync_renders_the_class_asked(
        stack_all: Path, source_eval: dict[str, Any], tmp_path: Path) -> None:
    """Issue 40: the root Application is what Argo CD syncs first, before the operator (a component of the stack)
    runs; it carries the PlatformStack's overrides, so the `gateway` component Application the umbrella chart makes
    from it names the class asked from its first version (not the chart's `cilium`)."""
    asked = with_gateway_class(_issuer("self-signed", None, None, None), "traefik")
    steps = plan(request(overrides=asked), argocd_there()).steps
    stack = next(s.obj for s in steps if s.obj["kind"] == "PlatformStack")
    root = next(s.obj for s in steps if s.obj["kind"] == "Application")
    values = root["spec"]["source"]["helm"]["valuesObject"]
    assert values["overrides"] == stack["spec"]["overrides"] == asked
    default = source_eval["values"]["components"]["gateway"]["values"]["gatewayClassName"]
    assert default != "traefik"
    for given, want in ((values, "traefik"), ({k: v for k, v in values.items() if k != "overrides"}, default)):
        (tmp_path / "values.yaml").write_text(yaml.safe_dump(given))
        gateway = applications(helm_template(stack_all, "-f", str(tmp_path / "values.yaml")))["gateway"]
        assert gateway["spec"]["source"]["helm"]["valuesObject"]["gatewayClassName"] == want


def test_a_platform_stack_the_controller_would_refuse_is_refused_before_anything_is_applied() -> None:
    """An override past the controller's bound (a DNS-01 solver file of 64 KiB, say): one line naming the field,
    instead of a PlatformStack the controller would call InvalidSpec and a root Application it would not match."""
    big = {"gateway": {"values": {"issuer": {"type": "acme", "acme": {"dns01": {"x": "y" * MAX_VALUES_BYTES}}}}}}
    with pytest.raises(UserError) as raised:
        plan(request(overrides=big), argocd_there())
    [line] = str(raised.value).splitlines()
    assert line.startswith("spec.overrides.gateway.values: ") and f"bytes as JSON, at most {MAX_VALUES_BYTES} " in line
