"""What the SourceCredential cluster tests share: the servers a credential is checked against, an Argo CD namespace
and an operator deriving into it, and the credential's MigrationPlans approved through the CLI."""

from __future__ import annotations

import http.server
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lifecycle.credentials.outputs import CREDENTIAL_LABEL
from tests.reconciler.helpers import plan_phase, plans
from tests.reconciler.operator_proc import FAST, Fixture, operator_fixture
from tests.renderer.helpers import run_cli
from tests.testbed.distribution import AuthRegistry, start_distribution
from tests.testbed.gitserver import GitHttpServer, GitServer, start_git_http_server, start_git_server
from tests.testbed.kube import KubeTestBed

# The fixtures are named servers, argocd_namespace and operator (a module imports them to use them)
__all__ = ["Servers", "approve", "credential_argocd_namespace", "credential_operator", "credential_plans",
           "credential_servers", "pending"]


class Servers:
    """What the checks talk to: the token registry, a Basic-auth git server with its login, a registry that fails."""

    def __init__(self, registry: AuthRegistry, git: GitServer, private: GitHttpServer,
                 failing: http.server.ThreadingHTTPServer, workdir: Path) -> None:
        self.registry, self.git, self.private, self.failing, self.workdir = registry, git, private, failing, workdir
        self.user, self.password = registry.user, registry.password  # one login, both halves (a classic PAT)

    @property
    def registry_host(self) -> str:
        return f"127.0.0.1:{self.registry.port}"


class _Failing(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(503)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture(scope="module", name="servers")
def credential_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """The token registry, the Basic-auth git server (its repository myorg/app) and a registry answering 503."""
    workdir = tmp_path_factory.mktemp("servers")
    registry = start_distribution(workdir / "registry", "token")
    git = start_git_server(workdir / "git")
    git.create("myorg/app", {"README": "private\n"})
    private = start_git_http_server(git.base, workdir, registry.user, registry.password)
    failing = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Failing)
    threading.Thread(target=failing.serve_forever, daemon=True).start()
    try:
        yield Servers(registry, git, private, failing, workdir)
    finally:
        failing.shutdown()
        failing.server_close()
        private.stop()
        git.stop()
        registry.stop()



@pytest.fixture(scope="module", name="argocd_namespace")
def credential_argocd_namespace(bed: KubeTestBed) -> str:
    """A namespace standing for Argo CD's: the derived repo-creds go there, its Applications are read from it."""
    name = f"argocd-{uuid.uuid4().hex[:6]}"
    bed.ensure_namespace(name)
    return name


# The operator of the credential tests: no PlatformStack controller, Argo CD in `argocd_namespace`.
credential_operator = operator_fixture("--no-leader-elect", "--no-platform-stack", "--argocd-namespace",
                                       Fixture("argocd_namespace"), *FAST)


def credential_plans(bed: KubeTestBed, records: str, name: str) -> list[dict[str, Any]]:
    """The MigrationPlans of the SourceCredential `name`."""
    return [p for p in plans(bed, records) if (p["metadata"].get("labels") or {}).get(CREDENTIAL_LABEL) == name]


def pending(bed: KubeTestBed, records: str, name: str) -> dict[str, Any] | None:
    """The credential's plan waiting for approval, if any."""
    found = [p for p in credential_plans(bed, records, name) if plan_phase(bed, records, p["metadata"]["name"])
             == "pending-approval"]
    return found[0] if found else None


def approve(bed: KubeTestBed, records: str, plan: dict[str, Any]) -> None:
    """`apprafter migration approve` of the plan, as a person does it."""
    result = run_cli("migration", "approve", plan["metadata"]["name"], "-n", records, "--kubeconfig",
                     str(bed.kubeconfig))
    assert result.returncode == 0, result.stderr
