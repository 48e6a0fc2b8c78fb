"""`apprafter repo creds add` without a cluster: `-o yaml --cert FILE` prints a SealedSecret that the private key of
that certificate opens (the sealing of tests/lifecycle/credentials/test_sealing.py, through the CLI), and bad input
is one line per problem, exit 1, nothing on stdout, never the material. With the real controller:
test_repo_creds_cluster.py."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pytest
import yaml
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.lifecycle.credentials.test_sealing import _certificate, _open
from tests.renderer.helpers import APPRAFTER

PASSWORD = "pw-not-to-be-printed"


@pytest.fixture(scope="module")
def key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def cert(tmp_path: Path, key: rsa.RSAPrivateKey) -> Path:
    path = tmp_path / "cert.pem"
    path.write_bytes(_certificate(key))
    return path


def add(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([*APPRAFTER, "repo", "creds", "add", *args], input=stdin, capture_output=True, text=True,
                          timeout=60, check=False)


def test_yaml_for_a_config_repository_opens_with_the_clusters_key(cert: Path, key: rsa.RSAPrivateKey) -> None:
    result = add("myorg", "--git-prefix", "github.com/myorg/", "--project", "shop", "--registry-host",
                 "ghcr.io/myorg/", "--username", "deploy", "--password-stdin", "--registry-namespace", "shop",
                 "--registry-namespace", "billing", "--cert", str(cert), "-o", "yaml", stdin=PASSWORD + "\n")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert PASSWORD not in result.stdout and base64.b64encode(PASSWORD.encode()).decode() not in result.stdout
    sealed, credential = yaml.safe_load_all(result.stdout)
    assert (sealed["kind"], sealed["metadata"]) == ("SealedSecret", {"name": "myorg", "namespace": "apprafter-system"})
    encrypted = sealed["spec"]["encryptedData"]
    assert _open(key, encrypted["password"], b"apprafter-system/myorg") == PASSWORD.encode()  # one trailing \n off
    assert _open(key, encrypted["username"], b"apprafter-system/myorg") == b"deploy"
    assert credential["spec"]["git"] == {"backend": {"sealedSecretRef": {"name": "myorg"}},
                                         "repoPrefixes": ["github.com/myorg/"], "projects": ["shop"]}
    assert credential["spec"]["registry"] == {"backend": {"sealedSecretRef": {"name": "myorg"}},
                                              "hosts": ["ghcr.io/myorg/"], "namespaces": ["shop", "billing"]}


def test_from_secret_takes_string_data_or_data(cert: Path, key: rsa.RSAPrivateKey, tmp_path: Path) -> None:
    login = tmp_path / "login.yaml"
    login.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"},
                                     "data": {"username": base64.b64encode(b"deploy").decode(),
                                              "password": base64.b64encode(PASSWORD.encode()).decode()}}))
    result = add("myorg", "--registry-host", "ghcr.io/myorg/", "--from-secret", str(login), "--cert", str(cert),
                 "-n", "ops", "--registry-all-namespaces", "-o", "yaml")
    assert result.returncode == 0, result.stderr
    sealed, credential = yaml.safe_load_all(result.stdout)
    assert "namespaces" not in credential["spec"]["registry"]  # every namespace: the field left out
    assert _open(key, sealed["spec"]["encryptedData"]["password"], b"ops/myorg") == PASSWORD.encode()


GIT = ["--git-prefix", "github.com/o/", "--all-projects"]  # a git half, scoped to every project
BAD = [
    ("no login", GIT, "", "--from-secret/--password-stdin: the login: --from-secret "
     "FILE, or --username USER --password-stdin"),
    ("two logins", [*GIT, "--from-secret", "x.yaml", "--username", "u"], "",
     "--from-secret: excludes --username/--password-stdin"),
    ("no coverage", ["--username", "u", "--password-stdin"], PASSWORD, "--git-prefix/--registry-host: at least one"),
    ("an empty password", [*GIT, "--username", "u", "--password-stdin"], "\n",
     "<stdin>: password: one non-empty line of UTF-8 (the value is not shown)"),
    ("two lines", [*GIT, "--username", "u", "--password-stdin"], f"{PASSWORD}\nmore\n",
     "<stdin>: password: one non-empty line"),
    ("a token in a prefix", ["--git-prefix", f"https://u:{PASSWORD}@github.com/o/", "--all-projects", "--username", "u",
                             "--password-stdin"], PASSWORD, "spec.git.repoPrefixes[0]: a repository prefix is"),
    ("a scheme on a host", ["--registry-host", "https://ghcr.io/o/", "--username", "u", "--password-stdin",
                            "--registry-all-namespaces"], PASSWORD, "spec.registry.hosts[0]: a registry host has no "
     "scheme"),
    ("a registry half without its scope", ["--registry-host", "ghcr.io/o/", "--username", "u", "--password-stdin"],
     PASSWORD, "--registry-namespace/--registry-all-namespaces: a registry half needs its scope: --registry-namespace "
     "NS (repeatable) for the namespaces whose workloads may pull with the login, or --registry-all-namespaces"),
    ("both scopes", ["--registry-host", "ghcr.io/o/", "--registry-namespace", "a", "--registry-all-namespaces",
                     "--username", "u", "--password-stdin"], PASSWORD,
     "--registry-namespace/--registry-all-namespaces: one or the other"),
    ("a scope without a registry half", [*GIT, "--registry-namespace", "a", "--username",
                                         "u", "--password-stdin"], PASSWORD, "give them with --registry-host"),
    ("a namespace that is none", ["--registry-host", "ghcr.io/o/", "--registry-namespace", "Team_A", "--username",
                                  "u", "--password-stdin"], PASSWORD,
     "spec.registry.namespaces[0]: a namespace is a Kubernetes namespace name"),
    ("a project without a git half", ["--registry-host", "ghcr.io/o/", "--registry-all-namespaces", "--project", "a",
                                      "--username", "u", "--password-stdin"], PASSWORD,
     "--project/--all-projects: scope a git half: give them with --git-prefix"),
    ("a git half without its scope", ["--git-prefix", "github.com/o/", "--username", "u", "--password-stdin"],
     PASSWORD, "--project/--all-projects: a git half needs its scope: --project PROJECT (repeatable) for the "
     "projects whose Applications get the login, or --all-projects for every Argo CD project"),
    ("both git scopes", ["--git-prefix", "github.com/o/", "--project", "a", "--all-projects", "--username", "u",
                         "--password-stdin"], PASSWORD, "--project/--all-projects: one or the other"),
    ("a project that is none", ["--git-prefix", "github.com/o/", "--project", "Team/A", "--username", "u",
                                "--password-stdin"], PASSWORD,
     "spec.git.projects[0]: a project is an Argo CD AppProject's name"),
]


@pytest.mark.parametrize(("case", "args", "stdin", "said"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_one_line_exit_1_and_never_the_material(cert: Path, case: str, args: list[str], stdin: str,
                                                            said: str) -> None:
    result = add("myorg", *args, "--cert", str(cert), "-o", "yaml", stdin=stdin)
    assert result.returncode == 1 and result.stdout == "", (case, result.stdout)
    assert said in result.stderr and len(result.stderr.splitlines()) == 1, result.stderr
    assert PASSWORD not in result.stderr.replace(f"https://u:{PASSWORD}@", "")  # a prefix is not material-free


def test_a_secret_file_that_is_not_one_is_named_without_its_content(cert: Path, tmp_path: Path) -> None:
    broken = tmp_path / "login.yaml"
    broken.write_text(f"kind: Secret\nstringData: {{username: u, password: [{PASSWORD}\n")
    result = add("myorg", "--git-prefix", "github.com/o/", "--all-projects", "--from-secret", str(broken), "--cert",
                 str(cert))
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == f"{broken}: not a YAML or JSON Secret manifest (the content is not shown)\n"
    not_cert = tmp_path / "not.pem"
    not_cert.write_text("hello\n")
    result = add("myorg", "--git-prefix", "github.com/o/", "--all-projects", "--username", "u", "--password-stdin",
                 "--cert", str(not_cert), stdin=PASSWORD)
    assert result.returncode == 1 and result.stderr.startswith(f"{not_cert}: not a PEM certificate")
