"""Argo CD's own plugin server (`argocd` run as argocd-cmp-server) and a repo-server-like client for it."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from tests.testbed.argocd import ARGOCD_VERSIONS
from tests.testbed.kube import kube_version
from tests.testbed.procs import BedError, ManagedProcess, tool, wait_for

DEFAULT_REVISION = "4f1c2a7e9b0d3c5a8e6f1b2d4c7a9e0f3b5d8c1a"
DEFAULT_REPO_URL = "https://git.example.com/acme/parser.git"
# What a stock cluster at the pinned version announces, enough for plugins that branch on API presence.
DEFAULT_API_VERSIONS = (
    "v1",
    "apps/v1",
    "batch/v1",
    "networking.k8s.io/v1",
    "policy/v1",
    "gateway.networking.k8s.io/v1",
    "keda.sh/v1alpha1",
    "cilium.io/v2",
    "postgresql.cnpg.io/v1",
    "cert-manager.io/v1",
    "argoproj.io/v1alpha1",
)


class CmpError(BedError):
    """Argo CD reported an error for a plugin call; the message is Argo CD's own text."""

    def __init__(self, message: str, response: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.response = dict(response or {})


@dataclasses.dataclass
class GenerateResult:
    """GenerateManifest's answer: the raw documents and the objects Argo CD's SplitYAML made of them."""

    manifests: list[dict[str, Any]]
    raw_manifests: list[str]


class CmpServer:
    """One running plugin server of Argo CD `version`. `plugin_name` is what an Application puts in
    spec.source.plugin.name."""

    def __init__(self, plugin_dir: Path, socket_dir: Path, plugin_name: str, process: ManagedProcess,
                 version: str) -> None:
        self.plugin_dir = plugin_dir
        self.socket_dir = socket_dir
        self.plugin_name = plugin_name
        self.process = process
        self.version = version

    @property
    def socket(self) -> Path:
        return self.socket_dir / f"{self.plugin_name}.sock"

    def log(self) -> str:
        """Everything the plugin server logged so far (commands' stderr shows up here)."""
        return self.process.log_text()

    def build_env(
        self,
        repo_path: Path,
        app_path: str,
        *,
        app_name: str = "parser",
        namespace: str = "argocd",
        project: str = "default",
        revision: str = DEFAULT_REVISION,
        repo_url: str = DEFAULT_REPO_URL,
        target_revision: str = "HEAD",
        kube_version_: str | None = None,
        api_versions: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> list[str]:
        """The build env argocd-repo-server passes to GenerateManifest (newEnv + getPluginEnvs) + `env`."""
        base = {
            "ARGOCD_APP_NAME": app_name,
            "ARGOCD_APP_NAMESPACE": namespace,
            "ARGOCD_APP_PROJECT_NAME": project,
            "ARGOCD_APP_REVISION": revision,
            "ARGOCD_APP_REVISION_SHORT": revision[:7],
            "ARGOCD_APP_REVISION_SHORT_8": revision[:8],
            "ARGOCD_APP_SOURCE_REPO_URL": repo_url,
            "ARGOCD_APP_SOURCE_PATH": app_path,
            "ARGOCD_APP_SOURCE_TARGET_REVISION": target_revision,
            "KUBE_VERSION": kube_version() if kube_version_ is None else kube_version_,
            "KUBE_API_VERSIONS": ",".join(DEFAULT_API_VERSIONS if api_versions is None else api_versions),
        }
        base.update(env or {})
        return [f"{k}={v}" for k, v in base.items()]

    def call(
        self,
        op: str,
        repo_path: Path,
        app_path: str,
        env: Sequence[str],
        *,
        plugin_env: Mapping[str, str] | None = None,
        parameters: Sequence[Mapping[str, Any]] | None = None,
        plugin_name: str | None = None,
        excluded_globs: Sequence[str] = (),
        timeout: float = 60.0,
    ) -> dict[str, Any]:
        """Run argocd-cmp-client once: `op` is generate | parameters | match | check. Raises CmpError."""
        plugin: dict[str, Any] | None = None
        if plugin_env is not None or parameters is not None:
            plugin = {"env": [{"name": k, "value": v} for k, v in (plugin_env or {}).items()]}
            if parameters is not None:
                plugin["parameters"] = [dict(p) for p in parameters]
        repo = Path(repo_path).resolve()
        request = {
            "op": op,
            "socketDir": str(self.socket_dir),
            "pluginName": self.plugin_name if plugin_name is None else plugin_name,
            "repoPath": str(repo),
            "appPath": str(repo / app_path),
            "env": list(env),
            "plugin": plugin,
            "excludedGlobs": list(excluded_globs),
            "timeoutSeconds": max(1, int(timeout)),
        }
        try:
            proc = subprocess.run(
                [str(tool("argocd-cmp-client", self.version))],
                input=json.dumps(request),
                text=True,
                capture_output=True,
                timeout=timeout + 15,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise CmpError(
                f"argocd-cmp-client did not answer within {timeout + 15:.0f}s\n{self.process.tail()}"
            ) from exc
        try:
            response: dict[str, Any] = json.loads(proc.stdout) if proc.stdout.strip() else {}
        except ValueError as exc:
            raise BedError(
                f"argocd-cmp-client printed no JSON (exit {proc.returncode}): {proc.stdout[:500]}"
                f"{proc.stderr[-2000:]}"
            ) from exc
        if response.get("error"):
            raise CmpError(response["error"], response)
        if proc.returncode != 0:
            raise BedError(f"argocd-cmp-client exited {proc.returncode}: {proc.stderr[-2000:]}")
        return response

    def generate(
        self,
        repo_path: Path,
        app_path: str = ".",
        *,
        env: Mapping[str, str] | None = None,
        plugin_env: Mapping[str, str] | None = None,
        parameters: Sequence[Mapping[str, Any]] | None = None,
        timeout: float = 60.0,
        plugin_name: str | None = None,
        excluded_globs: Sequence[str] = (),
        **app: Any,
    ) -> GenerateResult:
        """GenerateManifest as the repo-server calls it. `app` overrides build-env fields (app_name,
        namespace, project, revision, repo_url, target_revision, kube_version_, api_versions); `env`
        adds or overrides raw variables; `plugin_env` is the Application's plugin.env (arrives as
        ARGOCD_ENV_<name>); `parameters` its plugin.parameters ([{name, string|array|map}])."""
        build_env = self.build_env(Path(repo_path), app_path, env=env, **app)
        resp = self.call(
            "generate",
            repo_path,
            app_path,
            build_env,
            plugin_env=plugin_env,
            parameters=parameters,
            plugin_name=plugin_name,
            excluded_globs=excluded_globs,
            timeout=timeout,
        )
        return GenerateResult(resp.get("manifests") or [], resp.get("rawManifests") or [])

    def parameters(
        self,
        repo_path: Path,
        app_path: str = ".",
        *,
        env: Mapping[str, str] | None = None,
        plugin_env: Mapping[str, str] | None = None,
        parameters: Sequence[Mapping[str, Any]] | None = None,
        timeout: float = 60.0,
        plugin_name: str | None = None,
        app_name: str = "parser",
        repo_url: str = DEFAULT_REPO_URL,
        target_revision: str = "HEAD",
        revision: str = DEFAULT_REVISION,
    ) -> list[dict[str, Any]]:
        """GetParametersAnnouncement with the smaller env the repo-server sends for it (newEnvRepoQuery)."""
        base = {
            "ARGOCD_APP_NAME": app_name,
            "ARGOCD_APP_REVISION": revision,
            "ARGOCD_APP_SOURCE_REPO_URL": repo_url,
            "ARGOCD_APP_SOURCE_PATH": app_path,
            "ARGOCD_APP_SOURCE_TARGET_REVISION": target_revision,
            **(env or {}),
        }
        resp = self.call(
            "parameters",
            repo_path,
            app_path,
            [f"{k}={v}" for k, v in base.items()],
            plugin_env=plugin_env,
            parameters=parameters,
            plugin_name=plugin_name,
            timeout=timeout,
        )
        params: list[dict[str, Any]] = resp.get("parameters") or []
        return params

    def match(
        self,
        repo_path: Path,
        app_path: str = ".",
        *,
        env: Mapping[str, str] | None = None,
        timeout: float = 60.0,
        **app: Any,
    ) -> bool:
        """MatchRepository (discovery): True when the plugin claims the app directory."""
        build_env = self.build_env(Path(repo_path), app_path, env=env, **app)
        return bool(self.call("match", repo_path, app_path, build_env, timeout=timeout).get("isSupported"))

    def check(self) -> dict[str, Any]:
        """CheckPluginConfiguration: {isDiscoveryEnabled, provideGitCreds}."""
        with tempfile.TemporaryDirectory() as empty:
            return self.call("check", Path(empty), ".", [])

    def stop(self) -> None:
        """Argo CD's server only removes its socket on SIGTERM and keeps serving, so SIGKILL follows soon."""
        self.process.stop(grace=1.0)


def plugin_socket_name(plugin_dir: Path) -> str:
    """`<name>-<version>` (or `<name>`) from plugin.yaml, exactly as the server names its socket."""
    config = yaml.safe_load((plugin_dir / "plugin.yaml").read_text())
    name = config["metadata"]["name"]
    version = (config.get("spec") or {}).get("version")
    return f"{name}-{version}" if version else str(name)


def start_cmp_server(
    plugin_dir: Path,
    workdir: Path,
    *,
    path: Sequence[str | os.PathLike[str]] = (),
    env: Mapping[str, str] | None = None,
    socket_dir: Path | None = None,
    timeout: float = 30.0,
    version: str | None = None,
) -> CmpServer:
    """Start `argocd` (the pin, or `version`: one of ARGOCD_VERSIONS) as argocd-cmp-server for
    plugin_dir/plugin.yaml; wait for its socket to accept."""
    version = version or ARGOCD_VERSIONS[0]
    argocd = tool("argocd", version)
    tool("argocd-cmp-client", version)
    plugin_dir = Path(plugin_dir).resolve()
    name = plugin_socket_name(plugin_dir)
    workdir.mkdir(parents=True, exist_ok=True)
    home, tmp = workdir / "home", workdir / "tmp"
    home.mkdir(exist_ok=True)
    tmp.mkdir(exist_ok=True)
    sockets = socket_dir or workdir / "plugins"
    sockets.mkdir(exist_ok=True)
    server_env = {
        "PATH": os.pathsep.join([*(str(p) for p in path), os.environ.get("PATH", "/usr/bin:/bin")]),
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "ARGOCD_BINARY_NAME": "argocd-cmp-server",
        "ARGOCD_PLUGINSOCKFILEPATH": str(sockets),
        "ARGOCD_CMP_WORKDIR": str(tmp),
        "ARGOCD_CMP_SERVER_LOGFORMAT": "text",
        **(env or {}),
    }
    proc = ManagedProcess(
        f"argocd-cmp-server {name}",
        [argocd, "--config-dir-path", plugin_dir],
        workdir / f"cmp-server-{name}.log",
        env=server_env,
        cwd=home,
    )
    server = CmpServer(plugin_dir, sockets, name, proc, version)
    try:
        wait_for(
            f"the plugin server socket {server.socket}",
            lambda: True if "serving on" in proc.log_text() and server.socket.exists() else None,
            timeout,
            proc,
        )
        return server
    except BaseException:
        proc.stop()
        raise
