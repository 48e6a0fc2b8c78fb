"""`apprafter repo creds` against the real SealedSecrets controller on the bare API server: `add` seals the login with
the controller's certificate, the controller unseals it, and the operator derives and checks both halves against the
token registry and the Basic-auth git server; kubeseal's own SealedSecret of the same login opens too (the format);
`-o yaml` applied as kubectl would works; a SealedSecret for another cluster's certificate is refused by the controller
and the credential says its material is not Present; `check` returns once re-checked; `remove` and `add --upsert`
predict the plan the operator makes (a narrowed registry scope included), and approval lets the credential go. No
password in any output or log of the bed."""

from __future__ import annotations

import base64
import datetime
import functools
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from lifecycle.credentials.outputs import pull_secret_name
from tests.lifecycle.credentials.test_gate import documented_hash
from tests.reconciler.credential_bed import (  # noqa: F401 - the module's fixtures
    Servers,
    credential_argocd_namespace,
    credential_operator,
    credential_servers,
)
from tests.reconciler.helpers import API, apply, cr, edit, fresh_namespace, plan_phase, plans, wait
from tests.reconciler.operator_proc import Operator
from tests.renderer.helpers import APPRAFTER
from tests.testbed.kube import KubeTestBed
from tests.testbed.procs import log_files, tool
from tests.testbed.sealed_secrets import SealedSecrets

pytestmark = pytest.mark.testbed

OUTPUTS: list[str] = []  # every stdout and stderr of the CLI this module ran: grepped for the password


def cli(bed: KubeTestBed, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    result = subprocess.run([*APPRAFTER, "repo", "creds", *args, "--kubeconfig", str(bed.kubeconfig)], input=stdin,
                            capture_output=True, text=True, timeout=180, check=False)
    OUTPUTS.extend((result.stdout, result.stderr))
    return result


def _status(bed: KubeTestBed, records: str, name: str) -> dict[str, Any]:
    return (bed.get(API, "SourceCredential", name, records) or {}).get("status") or {}


def _conditions(status: dict[str, Any], half: str) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in (status.get(half) or {}).get("conditions") or []}


def _both_valid(bed: KubeTestBed, records: str, name: str) -> dict[str, Any] | None:
    status = _status(bed, records, name)
    halves = [_conditions(status, h) for h in ("git", "registry")]
    ok = all(c.get("Present") == ("True", "MaterialFound") and c.get("Valid") == ("True", "Valid") for c in halves)
    return status if ok else None


def _unsealed(bed: KubeTestBed, records: str, name: str) -> dict[str, str] | None:
    secret = bed.get("v1", "Secret", name, records)
    if secret is None:
        return None
    return {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}


def _other_cluster_cert() -> bytes:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "another-cluster")])
    now = datetime.datetime.now(datetime.UTC)
    return (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(7).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM))


def test_add_seals_for_the_real_controller_and_the_operator_checks_it(
        bed: KubeTestBed, sealed_secrets: SealedSecrets, operator: Operator, servers: Servers,
        tmp_path: Path) -> None:
    records = operator.records_namespace
    prefix, host = servers.private.url("myorg/"), f"{servers.registry_host}/myorg/"
    added = cli(bed, "add", "myorg", "--git-prefix", prefix, "--all-projects", "--registry-host", host,
                "--registry-all-namespaces", "--username", servers.user, "--password-stdin", "--cert",
                sealed_secrets.cert_url, "-n", records, stdin=servers.password + "\n")
    assert added.returncode == 0, added.stderr
    assert added.stdout == (f"sealedsecret/myorg created (namespace {records})\n"
                            f"sourcecredential/myorg created (namespace {records})\n")
    # the controller unsealed it into the basic-auth Secret the operator reads
    assert wait("the unsealed Secret", lambda: _unsealed(bed, records, "myorg")) == {
        "username": servers.user, "password": servers.password}
    assert bed.get("v1", "Secret", "myorg", records)["type"] == "kubernetes.io/basic-auth"  # type: ignore[index]
    wait("both halves Present and Valid", lambda: _both_valid(bed, records, "myorg"))

    # a second add of the same name is refused; --upsert replaces it
    again = cli(bed, "add", "myorg", "--git-prefix", prefix, "--all-projects", "--username", servers.user,
                "--password-stdin", "--cert", sealed_secrets.cert_url, "-n", records, stdin=servers.password)
    assert again.returncode == 1 and again.stdout == "" and "pass --upsert" in again.stderr

    # check: the operator checks again on request, and the answer names each half
    before = _status(bed, records, "myorg")
    checked = cli(bed, "check", "myorg", "-n", records, "--timeout", "60")
    assert checked.returncode == 0, checked.stderr
    lines = checked.stdout.splitlines()
    assert [line.split(" (")[0] for line in lines] == ["sourcecredential/myorg git: Valid",
                                                       "sourcecredential/myorg registry: Valid"]
    after = _status(bed, records, "myorg")
    assert after["checkRequest"] and after["checkRequest"] != before.get("checkRequest")
    assert "accepted the login" in lines[1]

    # list: the coverage and each half's state
    listed = cli(bed, "list", "-n", records)
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    assert header.split() == ["NAME", "GIT", "PROJECTS", "REGISTRY", "NAMESPACES", "GIT-VALID", "REGISTRY-VALID",
                              "PLAN", "AGE"]
    assert [r.split()[:8] for r in rows if r.startswith("myorg ")] == [
        ["myorg", prefix, "<all>", host, "<all>", "Valid", "Valid", "-"]]
    as_json = cli(bed, "list", "-n", records, "-o", "json")
    assert "myorg" in [o["metadata"]["name"] for o in json.loads(as_json.stdout)["items"]]

    # kubeseal's own SealedSecret of the same login opens too: the same format
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/basic-auth",
              "metadata": {"name": "by-kubeseal", "namespace": records},
              "stringData": {"username": servers.user, "password": servers.password}}
    sealed = subprocess.run([str(tool("kubeseal")), "--cert", sealed_secrets.cert_url, "-o", "json"],
                            input=json.dumps(secret), capture_output=True, text=True, timeout=60, check=False)
    assert sealed.returncode == 0, sealed.stderr
    assert servers.password not in sealed.stdout
    bed.apply(json.loads(sealed.stdout))
    assert wait("kubeseal's Secret unsealed", lambda: _unsealed(bed, records, "by-kubeseal")) == {
        "username": servers.user, "password": servers.password}

    # -o yaml: nothing written; what it prints, applied as `kubectl apply --server-side -f` would, works
    printed = cli(bed, "add", "from-repo", "--registry-host", host, "--registry-namespace", "shop", "--username",
                  servers.user, "--password-stdin", "--cert", sealed_secrets.cert_url, "-n", records, "-o", "yaml",
                  stdin=servers.password)
    assert printed.returncode == 0, printed.stderr
    documents = list(yaml.safe_load_all(printed.stdout))
    assert [d["kind"] for d in documents] == ["SealedSecret", "SourceCredential"]
    assert bed.get(API, "SourceCredential", "from-repo", records) is None
    for document in documents:
        bed.apply(document, field_manager="kubectl")
    assert wait("the printed one unsealed", lambda: _unsealed(bed, records, "from-repo"))["password"] == \
        servers.password
    wait("its registry half Valid", lambda: _conditions(_status(bed, records, "from-repo"), "registry")
         .get("Valid") == ("True", "Valid") or None)
    scoped = cli(bed, "list", "-n", records)
    assert [r.split()[4] for r in scoped.stdout.splitlines() if r.startswith("from-repo ")] == ["shop"]


def test_a_login_sealed_for_another_cluster_is_not_present(
        bed: KubeTestBed, sealed_secrets: SealedSecrets, operator: Operator, servers: Servers,
        tmp_path: Path) -> None:
    records = operator.records_namespace
    other = tmp_path / "other-cluster.pem"
    other.write_bytes(_other_cluster_cert())
    login = tmp_path / "login.yaml"
    login.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"},
                                     "stringData": {"username": servers.user, "password": servers.password}}))
    added = cli(bed, "add", "elsewhere", "--registry-host", f"{servers.registry_host}/elsewhere/", "--from-secret",
                str(login), "--cert", str(other), "-n", records, "--registry-all-namespaces")
    assert added.returncode == 0, added.stderr

    def refused() -> dict[str, Any] | None:
        obj = bed.get("bitnami.com/v1alpha1", "SealedSecret", "elsewhere", records) or {}
        found = [c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == "Synced"]
        return found[0] if found and found[0]["status"] == "False" else None

    synced = wait("the controller refusing to unseal", refused, timeout=60)
    assert "no key could decrypt secret" in synced["message"], synced
    assert bed.get("v1", "Secret", "elsewhere", records) is None
    present = wait("the credential saying so", lambda: _conditions(_status(bed, records, "elsewhere"), "registry")
                   .get("Present"))
    assert present == ("False", "MaterialMissing")
    message = next(c["message"] for c in _status(bed, records, "elsewhere")["registry"]["conditions"]
                   if c["type"] == "Present")
    assert "Secret elsewhere not found" in message
    checked = cli(bed, "check", "elsewhere", "-n", records, "--timeout", "60")
    assert checked.returncode == 4, (checked.stdout, checked.stderr)
    assert checked.stdout.startswith("sourcecredential/elsewhere registry: not Present (MaterialMissing)")
    said = "(the SealedSecrets controller: no key could decrypt secret ({}))\n"  # the keys in the controller's order
    assert checked.stdout.endswith((said.format("password, username"), said.format("username, password")))

    # without --cert the certificate comes from the controller's Service, as kubeseal's: none here says so (exit 2)
    fetched = cli(bed, "add", "nocert", "--registry-host", f"{servers.registry_host}/x/", "--from-secret", str(login),
                  "--registry-namespace", "shop", "--controller-namespace", records, "-n", records)
    assert fetched.returncode == 2 and fetched.stdout == ""
    assert fetched.stderr == (f"apprafter: no Service {records}/sealed-secrets-controller: the SealedSecrets "
                              "controller's certificate cannot be fetched: pass --controller-name/"
                              "--controller-namespace, or --cert FILE|URL\n")


def test_remove_predicts_the_plan_the_operator_waits_on(
        bed: KubeTestBed, sealed_secrets: SealedSecrets, operator: Operator, servers: Servers,
        argocd_namespace: str) -> None:
    records = operator.records_namespace
    prefix = servers.private.url("team/")
    added = cli(bed, "add", "team", "--git-prefix", prefix, "--all-projects", "--username", servers.user,
                "--password-stdin",
                "--cert", sealed_secrets.cert_url, "-n", records, stdin=servers.password)
    assert added.returncode == 0, added.stderr
    wait("the coverage applied", lambda: (_status(bed, records, "team").get("git") or {}).get("repoPrefixes"))
    bed.apply({"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
               "metadata": {"name": "team-app", "namespace": argocd_namespace},
               "spec": {"project": "default", "source": {"repoURL": f"{prefix}app.git", "path": "."},
                        "destination": {"server": "https://kubernetes.default.svc", "namespace": "team"}}})

    # narrowing it away from the Application with --upsert: the plan it waits on is predicted too, then put back
    narrowed = cli(bed, "add", "team", "--upsert", "--git-prefix", servers.private.url("team/other/"), "--all-projects",
                   "--username",
                   servers.user, "--password-stdin", "--cert", sealed_secrets.cert_url, "-n", records,
                   "--argocd-namespace", argocd_namespace, stdin=servers.password)
    assert narrowed.returncode == 0, narrowed.stderr
    said = narrowed.stdout.splitlines()
    assert said[:2] == [f"sealedsecret/team configured (namespace {records})",
                        f"sourcecredential/team configured (namespace {records})"]
    narrowing = said[2].split("waits for MigrationPlan ")[1].split(" ")[0]
    held = wait("the narrowing held", lambda: _status(bed, records, "team").get("migrationPlan"))
    assert held == narrowing
    narrowing_plan = bed.get(API, "MigrationPlan", narrowing, records) or {}
    assert narrowing_plan["spec"]["trigger"]["approvedSpecHash"] == said[2].split("(approvedSpecHash ")[1].split(")")[0]
    restored = cli(bed, "add", "team", "--upsert", "--git-prefix", prefix, "--all-projects", "--username",
                   servers.user, "--password-stdin", "--cert", sealed_secrets.cert_url, "-n", records,
                   stdin=servers.password)
    assert restored.returncode == 0 and len(restored.stdout.splitlines()) == 2, restored.stdout
    wait("the narrowing superseded", lambda: "migrationPlan" not in _status(bed, records, "team") or None)

    removed = cli(bed, "remove", "team", "-n", records, "--argocd-namespace", argocd_namespace, "--timeout", "60")
    assert removed.returncode == 0, removed.stderr
    first, second = removed.stdout.splitlines()
    predicted = first.split("waits for MigrationPlan ")[1].split(" ")[0]
    predicted_hash = first.split("(approvedSpecHash ")[1].split(")")[0]
    assert f"Argo CD Application {argocd_namespace}/team-app would no longer be covered" in first
    assert second == f"sourcecredential/team held for MigrationPlan {predicted} (namespace {records})"
    plan = next(p for p in plans(bed, records) if p["metadata"]["name"] == predicted)  # the operator's own
    gated = [c for c in plan["spec"]["changes"] if c["classification"] != "safe"]
    assert plan["spec"]["trigger"]["approvedSpecHash"] == predicted_hash == documented_hash(gated, "team")
    assert plan_phase(bed, records, predicted) == "pending-approval"

    approved = subprocess.run([*APPRAFTER, "migration", "approve", predicted, "-n", records, "--kubeconfig",
                               str(bed.kubeconfig)], capture_output=True, text=True, timeout=60, check=False)
    assert approved.returncode == 0, approved.stderr
    wait("the credential gone", lambda: bed.get(API, "SourceCredential", "team", records) is None or None)

    # nothing uses it: removed at once, said so before and after
    cli(bed, "add", "lonely", "--git-prefix", servers.private.url("nobody/"), "--all-projects", "--username",
        servers.user, "--password-stdin", "--cert", sealed_secrets.cert_url, "-n", records, stdin=servers.password)
    wait("its coverage applied", lambda: (_status(bed, records, "lonely").get("git") or {}).get("repoPrefixes"))
    gone = cli(bed, "remove", "lonely", "-n", records, "--argocd-namespace", argocd_namespace)
    assert gone.returncode == 0, gone.stderr
    assert gone.stdout == ("sourcecredential/lonely: no Application loses coverage: removed at once\n"
                           f"sourcecredential/lonely deleted (namespace {records})\n")


def test_upsert_and_remove_predict_the_plans_of_a_scoped_registry_half(
        bed: KubeTestBed, sealed_secrets: SealedSecrets, operator: Operator, servers: Servers,
        argocd_namespace: str) -> None:
    records = operator.records_namespace
    team, other = fresh_namespace(bed, "team"), fresh_namespace(bed, "other")
    host = f"{servers.registry_host}/shared/"
    for namespace in (team, other):
        apply(bed, cr(namespace, edit(edit(needs=None, env={"LOG_LEVEL": "info"}, expose={"port": 8080}),
                                      image=f"{host}demo:1")))

    def add(*scope: str, upsert: bool = True) -> subprocess.CompletedProcess[str]:
        flags = [f for ns in scope for f in ("--registry-namespace", ns)]
        return cli(bed, "add", "shared", *(["--upsert"] if upsert else []), "--registry-host", host, *flags,
                   "--username", servers.user, "--password-stdin", "--cert", sealed_secrets.cert_url, "-n", records,
                   "--argocd-namespace", argocd_namespace, stdin=servers.password)

    assert add(team, other, upsert=False).returncode == 0
    pull = pull_secret_name("shared")
    for namespace in (team, other):
        wait(f"the pull secret in {namespace}", functools.partial(bed.get, "v1", "Secret", pull, namespace))

    # narrowing the namespaces with --upsert: the plan it waits on, predicted to its name and hash
    narrowed = add(team)
    assert narrowed.returncode == 0, narrowed.stderr
    said = narrowed.stdout.splitlines()[2]
    assert f"Application {other}/demo would no longer be covered" in said and f"{team}/demo" not in said
    predicted = said.split("waits for MigrationPlan ")[1].split(" ")[0]
    assert wait("the narrowing held", lambda: _status(bed, records, "shared").get("migrationPlan")) == predicted
    plan = bed.get(API, "MigrationPlan", predicted, records) or {}
    gated = [c for c in plan["spec"]["changes"] if c["classification"] != "safe"]
    assert [c["rule"] for c in gated] == ["AR-SC004"]
    assert plan["spec"]["trigger"]["approvedSpecHash"] == said.split("(approvedSpecHash ")[1].split(")")[0] == \
        documented_hash(gated, "shared")
    assert bed.get("v1", "Secret", pull, other) is not None  # held: the other team keeps it until approved
    approved = subprocess.run([*APPRAFTER, "migration", "approve", predicted, "-n", records, "--kubeconfig",
                               str(bed.kubeconfig)], capture_output=True, text=True, timeout=60, check=False)
    assert approved.returncode == 0, approved.stderr
    wait("the other namespace's pull secret removed", lambda: bed.get("v1", "Secret", pull, other) is None or None)
    assert bed.get("v1", "Secret", pull, team) is not None

    # remove: only the Application in the scope loses anything, predicted exactly
    removed = cli(bed, "remove", "shared", "-n", records, "--argocd-namespace", argocd_namespace, "--timeout", "60")
    assert removed.returncode == 0, removed.stderr
    first, second = removed.stdout.splitlines()
    assert f"Application {team}/demo would no longer be covered" in first and other not in first
    predicted = first.split("waits for MigrationPlan ")[1].split(" ")[0]
    assert second == f"sourcecredential/shared held for MigrationPlan {predicted} (namespace {records})"
    plan = bed.get(API, "MigrationPlan", predicted, records) or {}
    assert plan["spec"]["trigger"]["approvedSpecHash"] == first.split("(approvedSpecHash ")[1].split(")")[0]
    approved = subprocess.run([*APPRAFTER, "migration", "approve", predicted, "-n", records, "--kubeconfig",
                               str(bed.kubeconfig)], capture_output=True, text=True, timeout=60, check=False)
    assert approved.returncode == 0, approved.stderr
    wait("the credential gone", lambda: bed.get(API, "SourceCredential", "shared", records) is None or None)


def test_the_password_is_in_no_output_or_log(bed: KubeTestBed, sealed_secrets: SealedSecrets, operator: Operator,
                                             servers: Servers) -> None:
    assert OUTPUTS, "the tests above ran the CLI"
    for text in OUTPUTS:
        assert servers.password not in text
    roots = {p.log_path.parent for p in bed.processes} | {operator.log_path.parent, sealed_secrets.log_path.parent,
                                                           servers.workdir}
    logs = log_files(*roots)
    assert any("sealed-secrets" in log.name for log in logs)
    for log in logs:
        assert servers.password not in log.read_text(errors="replace"), f"material in {log}"
