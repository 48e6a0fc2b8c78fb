"""The openBaoPath backend on the bare API server against a real server speaking OpenBao's API: `vault server -dev`
on loopback (tests/testbed/vault.py says why Vault stands in). The operator reads the KV v2 secret with a token
from a file and derives the repo-creds and the pull secret, which the Basic-auth git server and the token registry
take; a new KV version re-derives both halves (rotation); a missing key or path is Present False; OpenBao down is
Present Unknown with what was derived kept. The Kubernetes auth method: the operator logs in with its
ServiceAccount token (Vault checks it by a TokenReview against the bed's API server), logs in anew before the
client token's lease ends and after it is revoked. No password and no operator token in any log of the bed."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lifecycle.credentials.outputs import CREDENTIAL_LABEL, pull_secret_name
from tests.reconciler.credential_bed import (
    Servers,
    approve,
    credential_servers,  # noqa: F401 - the module's fixture
    pending,
)
from tests.reconciler.helpers import API, apply, cr, edit, events, fresh_namespace, wait
from tests.reconciler.operator_proc import FAST, Operator
from tests.testbed.kube import KubeTestBed
from tests.testbed.procs import log_files
from tests.testbed.vault import OPERATOR_POLICY, DevVault, start_vault

pytestmark = pytest.mark.testbed

CHECK = ("--credential-check-interval", "2")  # OpenBao is re-read on the check interval (it is not watched)
POLICY = 'path "secret/data/myorg/*" { capabilities = ["read"] }'


@pytest.fixture
def vault(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevVault]:
    """A dev server of the test's own (in memory: one test stops it), the operator's policy written."""
    server = start_vault(tmp_path_factory.mktemp("vault"))
    try:
        server.policy(OPERATOR_POLICY, POLICY)
        yield server
    finally:
        server.stop()


def _operator(bed: KubeTestBed, workdir: Path, name: str, namespace: str, argocd: str, *openbao: str) -> Operator:
    return Operator(bed, workdir, ("--no-leader-elect", "--no-platform-stack", "--namespace", namespace,
                                   "--argocd-namespace", argocd, *FAST, *CHECK, *openbao), name=name).start()


def _credential(records: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "SourceCredential", "metadata": {"name": name, "namespace": records},
            "spec": spec}


def _decoded(secret: dict[str, Any] | None) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in ((secret or {}).get("data") or {}).items()}


def _repo_passwords(bed: KubeTestBed, namespace: str, credential: str) -> list[str]:
    resp = bed.http.get(f"/api/v1/namespaces/{namespace}/secrets",
                        params={"labelSelector": f"argocd.argoproj.io/secret-type=repo-creds,{CREDENTIAL_LABEL}="
                                                 f"{credential}"})
    resp.raise_for_status()
    return [_decoded(s)["password"] for s in resp.json()["items"]]


def _pull_password(bed: KubeTestBed, namespace: str, credential: str) -> str | None:
    secret = bed.get("v1", "Secret", pull_secret_name(credential), namespace)
    if secret is None:
        return None
    auths = json.loads(_decoded(secret)[".dockerconfigjson"])["auths"]
    return str(next(iter(auths.values()))["password"])


def _half(bed: KubeTestBed, records: str, name: str, half: str) -> dict[str, tuple[str, str, str]]:
    """A half's conditions: type -> (status, reason, message)."""
    found = ((bed.get(API, "SourceCredential", name, records) or {}).get("status") or {}).get(half) or {}
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in found.get("conditions") or []}


def _present(bed: KubeTestBed, records: str, name: str, half: str, status: str, words: str) -> Any:
    """Wait until a half's Present has this status and its message these words; the conditions."""
    return wait(f"{name} {half} Present {status} ({words})",
                lambda: ((c := _half(bed, records, name, half)) and c.get("Present", ("", "", ""))[0] == status
                         and words in c["Present"][2] and c) or None)


def _valid(bed: KubeTestBed, records: str, name: str, half: str, reason: str) -> Any:
    """Wait until a half's Valid has this reason; the conditions."""
    return wait(f"{name} {half} Valid {reason}",
                lambda: ((c := _half(bed, records, name, half)) and c.get("Valid", ("", ""))[1] == reason and c)
                or None)


def _logs(bed: KubeTestBed, *roots: Path) -> list[Path]:
    directories = {p.log_path.parent for p in bed.processes} | set(roots)
    return log_files(*directories)


def _no_secret_in_logs(bed: KubeTestBed, roots: list[Path], *secrets: str) -> None:
    logs = _logs(bed, *roots)
    assert any(log.name == "vault.log" for log in logs) and any("git-http" in log.name for log in logs)
    for log in logs:
        text = log.read_text(errors="replace")
        for secret in secrets:
            assert secret not in text, f"material or a token in {log}"


def test_the_operator_reads_derives_rotates_and_says_what_is_missing(
        bed: KubeTestBed, servers: Servers, vault: DevVault, tmp_path_factory: pytest.TempPathFactory) -> None:
    argocd, covered = fresh_namespace(bed, "argocd"), fresh_namespace(bed, "bao")
    token = vault.token([OPERATOR_POLICY])  # what a simple set-up hands the operator: a token, in a file
    workdir = tmp_path_factory.mktemp("bao-token")
    token_file = workdir / "token"
    token_file.write_text(token + "\n")
    assert vault.put("myorg/login", {"username": servers.user, "password": servers.password}) == 1
    op = _operator(bed, workdir, "bao-token", covered, argocd, "--openbao-address", vault.url,
                   "--openbao-token-file", str(token_file))
    wrong = f"wrong-{uuid.uuid4().hex}"
    try:
        records = op.records_namespace
        backend = {"openBaoPath": "secret/myorg/login"}
        apply(bed, cr(covered, edit(edit(needs=None, env={"LOG_LEVEL": "info"}, expose={"port": 8080}),
                                    image=f"{servers.registry_host}/myorg/demo:1")))
        bed.apply(_credential(records, "bao", {
            "git": {"backend": backend, "repoPrefixes": [servers.private.url("myorg/")]},
            "registry": {"backend": backend, "hosts": [f"{servers.registry_host}/myorg/"]}}))

        # read, derived, and taken by the real servers
        for half in ("git", "registry"):
            found = _present(bed, records, "bao", half, "True", "OpenBao secret/myorg/login, version 1")
            assert found["Present"][1] == "MaterialFound"
        wait("the repo-creds", lambda: _repo_passwords(bed, argocd, "bao") == [servers.password] or None)
        wait("the pull secret", lambda: _pull_password(bed, covered, "bao") == servers.password or None)
        for half in ("git", "registry"):
            assert _valid(bed, records, "bao", half, "Valid")["Valid"][0] == "True"

        # rotation: a new KV version re-derives both halves (and is checked again: the servers refuse it)
        assert vault.put("myorg/login", {"username": servers.user, "password": wrong}) == 2
        wait("the rotated repo-creds", lambda: _repo_passwords(bed, argocd, "bao") == [wrong] or None)
        wait("the rotated pull secret", lambda: _pull_password(bed, covered, "bao") == wrong or None)
        refused = _valid(bed, records, "bao", "registry", "Invalid")
        assert "version 2" in refused["Present"][2] and "refused the login" in refused["Valid"][2]
        assert vault.put("myorg/login", {"username": servers.user, "password": servers.password}) == 3
        wait("the repo-creds back", lambda: _repo_passwords(bed, argocd, "bao") == [servers.password] or None)

        # a version without the password: Present False, naming the key; nothing derived from it
        assert vault.put("myorg/login", {"username": servers.user}) == 4
        lacking = _present(bed, records, "bao", "git", "False", "lacks a usable password")
        assert lacking["Present"] == ("False", "MaterialMissing", "OpenBao secret secret/myorg/login (version 4) "
                                      "lacks a usable password (keys username, password: one line of UTF-8 each)")
        wait("the repo-creds pruned", lambda: _repo_passwords(bed, argocd, "bao") == [] or None)
        # a path with no secret, and one the operator's policy does not grant
        bed.apply(_credential(records, "absent", {"git": {"backend": {"openBaoPath": "secret/myorg/absent"},
                                                          "repoPrefixes": ["github.com/absent/"]}}))
        absent = _present(bed, records, "absent", "git", "False", "OpenBao has no secret secret/myorg/absent")
        assert absent["Present"][1] == "MaterialMissing"
        bed.apply(_credential(records, "denied", {"git": {"backend": {"openBaoPath": "secret/elsewhere/login"},
                                                          "repoPrefixes": ["github.com/denied/"]}}))
        denied = _present(bed, records, "denied", "git", "Unknown", "OpenBao refused to read secret/elsewhere/login")
        assert denied["Present"][1] == "AccessDenied" and "permission denied" in denied["Present"][2]

        # OpenBao down: Present Unknown, and what was derived stays as it was
        assert vault.put("myorg/login", {"username": servers.user, "password": servers.password}) == 5
        wait("the repo-creds again", lambda: _repo_passwords(bed, argocd, "bao") == [servers.password] or None)
        vault.stop()
        down = _present(bed, records, "bao", "registry", "Unknown", f"OpenBao {vault.url}: GET /v1/secret/data/myorg/")
        assert down["Present"][1] == "BackendUnavailable" and "cannot connect" in down["Present"][2]
        assert _repo_passwords(bed, argocd, "bao") == [servers.password]
        assert _pull_password(bed, covered, "bao") == servers.password

        for name in ("bao", "absent", "denied"):
            bed.delete(API, "SourceCredential", name, records)
        # the Application's image is covered: deleting "bao" waits for its plan (as for any backend)
        approve(bed, records, wait("the deletion's plan", lambda: pending(bed, records, "bao")))
        wait("the credentials gone", lambda: all(bed.get(API, "SourceCredential", n, records) is None
                                                 for n in ("bao", "absent", "denied")) or None)
        said = json.dumps(events(bed, records)) + json.dumps(bed.get(API, "SourceCredential", "bao", records))
        assert servers.password not in said and wrong not in said and token not in said
    finally:
        op.stop()
    _no_secret_in_logs(bed, [op.log_path.parent, servers.workdir, vault.workdir], servers.password, wrong, token)


def _logins(audit: Path) -> int:
    """How many Kubernetes logins Vault answered with a token (its audit log: one JSON object per line)."""
    if not audit.exists():
        return 0
    entries = [json.loads(line) for line in audit.read_text().splitlines() if line.strip()]
    return sum(1 for e in entries if e.get("type") == "response" and e.get("request", {}).get("path") ==
               "auth/kubernetes/login" and (e.get("auth") or {}).get("client_token"))


def test_the_kubernetes_auth_method_logs_in_and_in_again(bed: KubeTestBed, servers: Servers, vault: DevVault,
                                                         tmp_path_factory: pytest.TempPathFactory) -> None:
    argocd, quiet = fresh_namespace(bed, "argocd"), fresh_namespace(bed, "none")
    workdir = tmp_path_factory.mktemp("bao-kubernetes")
    # the operator's ServiceAccount token, as the kubelet projects it into the pod (here: a file)
    jwt = bed.service_account_token(quiet, "apprafter-operator", seconds=3600)
    jwt_file = workdir / "token"
    jwt_file.write_text(jwt)
    vault.kubernetes_auth(bed.url, bed.ca_path.read_text(), bed.token, role="apprafter-operator",
                          service_account="apprafter-operator", namespace=quiet, policies=[OPERATOR_POLICY],
                          token_ttl="6s")  # short: the operator must log in anew before each token expires
    audit = vault.audit_to(workdir / "audit.log")
    assert vault.put("myorg/git", {"username": servers.user, "password": servers.password}) == 1
    op = _operator(bed, workdir, "bao-kubernetes", quiet, argocd, "--openbao-address", vault.url,
                   "--openbao-auth-role", "apprafter-operator", "--openbao-jwt-file", str(jwt_file))
    try:
        records = op.records_namespace
        bed.apply(_credential(records, "kube", {"git": {"backend": {"openBaoPath": "secret/myorg/git"},
                                                        "repoPrefixes": [servers.private.url("myorg/")]}}))
        _present(bed, records, "kube", "git", "True", "OpenBao secret/myorg/git, version 1")
        wait("the repo-creds", lambda: _repo_passwords(bed, argocd, "kube") == [servers.password] or None)
        # the client token lives 6 s: the operator logs in anew before it ends (reads every 2 s never fail)
        wait("a second and a third login", lambda: _logins(audit) >= 3 or None)
        assert all(c[0] == "True" for c in [_half(bed, records, "kube", "git")["Present"]])
        # its token revoked: the read gets 403, the operator logs in again and reads the new version
        before = _logins(audit)
        vault.api("PUT", "sys/leases/revoke-prefix/auth/kubernetes/login")
        rotated = f"rotated-{uuid.uuid4().hex}"
        assert vault.put("myorg/git", {"username": servers.user, "password": rotated}) == 2
        wait("the rotated repo-creds", lambda: _repo_passwords(bed, argocd, "kube") == [rotated] or None)
        assert _logins(audit) > before
        bed.delete(API, "SourceCredential", "kube", records)
        wait("the credential gone", lambda: bed.get(API, "SourceCredential", "kube", records) is None or None)
    finally:
        op.stop()
    # Vault's audit log HMACs tokens and values: neither the password, the login's JWT nor a client token is in it
    _no_secret_in_logs(bed, [op.log_path.parent, servers.workdir, vault.workdir, workdir], servers.password,
                       rotated, jwt)
