"""etcd + kube-apiserver on loopback with token auth, RBAC and the pinned CRDs installed and Established."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import secrets
import ssl
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import httpx
import yaml
from lightkube import Client, KubeConfig

from tests.testbed.crds import bed_crd_files
from tests.testbed.pki import CA, service_account_keys
from tests.testbed.procs import BedError, ManagedProcess, free_port, tool, wait_for
from toolchain.pins import pins
from toolchain.tools import ToolError

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: CRDs are ~4 MB

ADMIN_USER = "apprafter-admin"
# A person the `kube` fixture knows (a token user with no roles: a test grants what it needs), e.g. an approver.
PERSON = "alice@example.com"
FIELD_MANAGER = "apprafter-test"
_DISCOVERY_ACCEPT = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"


class ApplyRejected(BedError):
    """The API server refused an object; `status` is its Status body, the message is the server's."""

    def __init__(self, message: str, status: Mapping[str, Any] | None = None, code: int = 0) -> None:
        super().__init__(message)
        self.status = dict(status or {})
        self.code = code


@dataclasses.dataclass(frozen=True)
class ResourceInfo:
    """Where a kind lives in the API: group/version, plural resource name, and scope."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def prefix(self) -> str:
        return "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"

    def path(self, name: str | None = None, namespace: str | None = None) -> str:
        base = self.prefix
        if self.namespaced:
            if not namespace:
                raise ValueError(f"{self.kind} is namespaced: a namespace is needed")
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        return f"{base}/{name}" if name else base


class KubeTestBed:
    """A running API server: `url`, `token`, `kubeconfig` path, `ca_path`, `client` (lightkube), `http`."""

    def __init__(self, url: str, token: str, ca_path: Path, kubeconfig: Path, processes: list[ManagedProcess]) -> None:
        self.url = url
        self.token = token
        self.ca_path = ca_path
        self.kubeconfig = kubeconfig
        self.processes = processes
        self.http = httpx.Client(
            base_url=url, verify=ssl_context(ca_path), timeout=30.0, headers={"Authorization": f"Bearer {token}"}
        )
        self.client = Client(config=KubeConfig.from_file(str(kubeconfig)), field_manager=FIELD_MANAGER)
        self._lock = threading.Lock()
        self._resources: dict[tuple[str, str], ResourceInfo] = {}
        self._namespaces: set[str] = set()
        self.crd_names: list[str] = []
        self.crd_install_seconds = 0.0
        self.apiserver_restarts = 0
        self.etcd_restarts = 0
        self.user_tokens: dict[str, str] = {}  # extra token users (start_kube(users=...)): name -> token

    # --- discovery -------------------------------------------------------------------------------

    def refresh_discovery(self) -> None:
        """Reload every group/version/kind the server serves (aggregated discovery, two requests)."""
        found: dict[tuple[str, str], ResourceInfo] = {}
        for root in ("/api", "/apis"):
            resp = self.http.get(root, headers={"Accept": _DISCOVERY_ACCEPT})
            resp.raise_for_status()
            body = resp.json()
            if body.get("kind") != "APIGroupDiscoveryList":
                raise BedError(f"{root}: the API server did not answer aggregated discovery: {body.get('kind')}")
            for group in body.get("items", []):
                gname = group.get("metadata", {}).get("name", "")
                for version in group.get("versions", []):
                    gv = f"{gname}/{version['version']}" if gname else version["version"]
                    for res in version.get("resources", []):
                        kind = res.get("responseKind", {}).get("kind")
                        if not kind or "/" in res["resource"]:
                            continue
                        info = ResourceInfo(gv, kind, res["resource"], res.get("scope") == "Namespaced")
                        found.setdefault((gv, kind), info)
        with self._lock:
            self._resources = found

    def resource_for(self, api_version: str, kind: str) -> ResourceInfo:
        """The plural and scope of apiVersion/kind (cached; refreshed once on a miss)."""
        key = (api_version, kind)
        with self._lock:
            info = self._resources.get(key)
        if info is None:
            self.refresh_discovery()
            with self._lock:
                info = self._resources.get(key)
        if info is None:
            raise ApplyRejected(
                f"the API server serves no kind {kind} in {api_version} (is its CRD among the installed ones?)"
            )
        return info

    def namespaced_resources(self) -> list[ResourceInfo]:
        """Every namespaced resource the API server serves now (discovery read afresh)."""
        self.refresh_discovery()
        with self._lock:
            return [info for info in self._resources.values() if info.namespaced]

    def api_versions(self) -> list[str]:
        """What Argo CD sends as KUBE_API_VERSIONS: every group/version and group/version/Kind, sorted."""
        if not self._resources:
            self.refresh_discovery()
        with self._lock:
            keys = list(self._resources)
        return sorted({gv for gv, _ in keys} | {f"{gv}/{kind}" for gv, kind in keys})

    def as_user(self, name: str) -> httpx.Client:
        """An httpx client authenticated as one of the extra token users (RBAC is the test's to grant)."""
        return httpx.Client(base_url=self.url, verify=ssl_context(self.ca_path), timeout=30.0,
                            headers={"Authorization": f"Bearer {self.user_tokens[name]}"})

    def wait_authorized(self, user: str, timeout: float = 60, **attributes: str) -> None:
        """Wait until RBAC lets `user` do what `attributes` say (a SubjectAccessReview's resourceAttributes): the
        API server's authorizer reads bindings from its own cache, so a binding just written is honoured a moment
        later, not at once."""
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                  "spec": {"user": user, "resourceAttributes": attributes}}

        def allowed() -> bool | None:
            resp = self.http.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", json=review)
            if resp.status_code != 201:
                raise _rejected(resp, "a SubjectAccessReview")
            return True if resp.json().get("status", {}).get("allowed") else None

        wait_for(f"RBAC to let {user} {attributes}", allowed, timeout, interval=0.1)

    def service_account_token(self, namespace: str, name: str, seconds: int = 86400) -> str:
        """A token for ServiceAccount namespace/name (created if missing) from the TokenRequest API, as a pod
        would mount it: the API server authenticates it as `system:serviceaccount:<namespace>:<name>`."""
        self.ensure_namespace(namespace)
        resp = self.http.post(f"/api/v1/namespaces/{namespace}/serviceaccounts",
                              json={"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})
        if resp.status_code not in (201, 409):
            raise _rejected(resp, f"creating ServiceAccount {namespace}/{name}")
        resp = self.http.post(f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", json={
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": seconds}})
        if resp.status_code != 201:
            raise _rejected(resp, f"a token for ServiceAccount {namespace}/{name}")
        token: str = resp.json()["status"]["token"]
        return token

    def kubeconfig_for(self, path: Path, token: str, user: str) -> Path:
        """A kubeconfig for this API server that authenticates with `token` (named `user` in the file)."""
        write_kubeconfig(path, self.url, token, self.ca_path.read_text(), user=user)
        return path

    # --- writes ----------------------------------------------------------------------------------

    def ensure_namespace(self, name: str) -> None:
        """Create namespace `name` (for real, also in dry runs) and its `default` ServiceAccount."""
        with self._lock:
            if name in self._namespaces:
                return
        for path, body in (
            ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
            (
                f"/api/v1/namespaces/{name}/serviceaccounts",
                {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}},
            ),
        ):
            resp = self.http.post(path, json=body)
            if resp.status_code not in (200, 201, 409):
                raise _rejected(resp, f"creating {path}")
        with self._lock:
            self._namespaces.add(name)

    def apply(
        self,
        obj: Mapping[str, Any],
        namespace: str = "default",
        *,
        dry_run: bool = False,
        field_manager: str = FIELD_MANAGER,
        force: bool = True,
    ) -> dict[str, Any]:
        """Server-side apply one object; returns what the server answers (defaulted, with managedFields)."""
        try:
            api_version, kind, name = obj["apiVersion"], obj["kind"], obj["metadata"]["name"]
        except (KeyError, TypeError) as exc:
            raise ApplyRejected(f"not a Kubernetes object (apiVersion, kind, metadata.name): {exc!r}") from exc
        info = self.resource_for(api_version, kind)
        ns = None
        if info.namespaced:
            ns = obj["metadata"].get("namespace") or namespace
            self.ensure_namespace(ns)
        params = {"fieldManager": field_manager, "force": "true" if force else "false"}
        if dry_run:
            params["dryRun"] = "All"
        resp = self.http.patch(
            info.path(name, ns),
            params=params,
            content=json.dumps(obj).encode(),
            headers={"Content-Type": "application/apply-patch+yaml"},
        )
        if resp.status_code >= 300:
            where = f"{ns}/{name}" if ns else name
            raise _rejected(resp, f"{kind} {where}")
        result: dict[str, Any] = resp.json()
        return result

    def dry_run_apply(
        self,
        objs: Iterable[Mapping[str, Any]] | Mapping[str, Any],
        namespace: str = "default",
        field_manager: str = FIELD_MANAGER,
    ) -> list[dict[str, Any]]:
        """Server-side apply each object with dryRun=All; raises ApplyRejected with the server's message.

        Accepts one object or many; `kind: *List` objects are flattened into their items. Namespaces the
        objects need are created for real (a dry-run namespace would not exist for the next object).
        Returns the objects as the server would store them, in order.
        """
        return [self.apply(o, namespace, dry_run=True, field_manager=field_manager) for o in _flatten(objs)]

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """The object as stored, or None when it does not exist."""
        info = self.resource_for(api_version, kind)
        resp = self.http.get(info.path(name, namespace if info.namespaced else None))
        if resp.status_code == 404:
            return None
        if resp.status_code >= 300:
            raise _rejected(resp, f"reading {kind} {name}")
        result: dict[str, Any] = resp.json()
        return result

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None, *,
               grace_seconds: int | None = None) -> None:
        """Delete an object if it exists (a Namespace is no longer taken as made: ensure_namespace makes it again);
        `grace_seconds`: a pod's grace period instead of its own (0: killed at once, as a crash would)."""
        if kind == "Namespace":
            with self._lock:
                self._namespaces.discard(name)
        info = self.resource_for(api_version, kind)
        params = {"gracePeriodSeconds": str(grace_seconds)} if grace_seconds is not None else None
        resp = self.http.delete(info.path(name, namespace if info.namespaced else None), params=params)
        if resp.status_code not in (200, 202, 404):
            raise _rejected(resp, f"deleting {kind} {name}")

    # --- CRDs ------------------------------------------------------------------------------------

    def _apply_crd(self, crd: Mapping[str, Any]) -> dict[str, Any]:
        """One CRD applied from a thread of install_crds; once more if the connection broke under it (a CI run saw
        `[Errno 9] Bad file descriptor` from the shared client's pool): a server-side apply is idempotent."""
        try:
            return self.apply(crd, field_manager="apprafter-testbed")
        except httpx.TransportError:
            return self.apply(crd, field_manager="apprafter-testbed")

    def install_crds(self, files: Iterable[Path], timeout: float = 60.0) -> list[str]:
        """Apply every CRD in `files` and wait until each is Established and served by discovery."""
        crds: list[dict[str, Any]] = []
        for path in files:
            with open(path, "rb") as fh:
                crds += [
                    d
                    for d in yaml.load_all(fh, Loader=_Loader)
                    if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition"
                ]
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(self._apply_crd, crds))
        pending = {c["metadata"]["name"] for c in crds}

        def established() -> bool | None:
            for name in sorted(pending):
                crd = self.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name) or {}
                conds = (crd.get("status") or {}).get("conditions") or []
                if any(c.get("type") == "Established" and c.get("status") == "True" for c in conds):
                    pending.discard(name)
            return True if not pending else None

        wait_for(f"CRDs to be Established ({len(crds)})", established, timeout, interval=0.1)
        wanted = {
            (f"{c['spec']['group']}/{v['name']}", c["spec"]["names"]["kind"])
            for c in crds
            for v in c["spec"]["versions"]
            if v.get("served", True)
        }

        def served() -> bool | None:
            self.refresh_discovery()
            return True if wanted <= set(self._resources) else None

        wait_for("installed CRDs to appear in API discovery", served, timeout, interval=0.2)
        names = sorted(c["metadata"]["name"] for c in crds)
        self.crd_names = names
        return names

    # --- restarts ---------------------------------------------------------------------------------

    def restart_apiserver(self, down: float = 0.0, timeout: float = 60.0) -> None:
        """Stop kube-apiserver and start it again: same port, certificates and tokens; etcd (and its data) keeps
        running. `down` seconds pass in between. Call from the main thread (the child dies with its starter)."""
        index = next(i for i, p in enumerate(self.processes) if p.name == "kube-apiserver")
        old = self.processes[index]
        argv, env = old.argv, old.env
        old.stop()
        time.sleep(down)
        self.apiserver_restarts += 1
        log = old.log_path.with_name(f"kube-apiserver.{self.apiserver_restarts}.log")
        new = ManagedProcess("kube-apiserver", argv, log, env=env)
        self.processes[index] = new
        wait_for("kube-apiserver /readyz after restart",
                 lambda: self.http.get("/readyz").status_code == 200 or None, timeout, new, interval=0.2)

    def stop_etcd(self) -> None:
        """Stop etcd (its data stays): the API server answers, but nothing it serves from etcd works."""
        next(p for p in self.processes if p.name == "etcd").stop()

    def start_etcd(self, timeout: float = 60.0) -> None:
        """Start etcd again on its data and ports; returns once the API server is ready again."""
        index = next(i for i, p in enumerate(self.processes) if p.name == "etcd")
        old = self.processes[index]
        self.etcd_restarts += 1
        self.processes[index] = ManagedProcess("etcd", old.argv, old.log_path.with_name(
            f"etcd.{self.etcd_restarts}.log"), env=old.env)
        wait_for("kube-apiserver /readyz after etcd came back",
                 lambda: self.http.get("/readyz").status_code == 200 or None, timeout, self.processes[index],
                 interval=0.2)

    def stop(self) -> None:
        self.http.close()
        self.client.close()
        for proc in reversed(self.processes):
            proc.stop()


def _flatten(objs: Iterable[Mapping[str, Any]] | Mapping[str, Any]) -> list[Mapping[str, Any]]:
    out: list[Mapping[str, Any]] = []
    for obj in [objs] if isinstance(objs, Mapping) else objs:
        if isinstance(obj, Mapping) and str(obj.get("kind", "")).endswith("List") and "items" in obj:
            out.extend(_flatten(obj["items"] or []))
        else:
            out.append(obj)
    return out


def _rejected(resp: httpx.Response, what: str) -> ApplyRejected:
    try:
        status = resp.json()
    except ValueError:
        status = {"message": resp.text[:2000]}
    message = status.get("message") or resp.text[:2000]
    return ApplyRejected(
        f"{what}: rejected by the API server ({resp.status_code} {status.get('reason', '')}): {message}",
        status,
        resp.status_code,
    )


def ssl_context(ca_path: Path) -> ssl.SSLContext:
    """A client TLS context trusting only the test bed's CA."""
    return ssl.create_default_context(cafile=str(ca_path))


def _server_env(home: Path) -> dict[str, str]:
    """A minimal environment: no proxies, a private HOME."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "TMPDIR": str(home)}


def start_kube(
    workdir: Path, timeout: float = 120.0, install_crds: bool = True, users: Mapping[str, Iterable[str]] | None = None,
    service_cidr: str = "10.0.0.0/24", apiserver_args: Iterable[str] = (),
) -> KubeTestBed:
    """Start etcd and kube-apiserver on 127.0.0.1 and install the pinned CRDs; stop() tears it all down.

    `users` adds token users (username -> groups) besides the admin; their tokens are in `bed.user_tokens`.
    `service_cidr` is the IPv4 Service range (a /24 holds ~250 Services: the benchmarks widen it);
    `apiserver_args` are more kube-apiserver flags (e.g. lower in-flight limits for API Priority and Fairness).
    """
    etcd_bin, apiserver_bin = tool("etcd"), tool("kube-apiserver")
    try:
        files = bed_crd_files() if install_crds else []
    except ToolError as exc:
        import pytest

        pytest.fail(f"test bed needs the CRDs: {exc}", pytrace=False)
    workdir.mkdir(parents=True, exist_ok=True)
    home = workdir / "home"
    certs = workdir / "certs"
    home.mkdir()
    certs.mkdir()
    ca = CA()
    serving = ca.serving_cert(certs, "apiserver", ("localhost", "kubernetes", "kubernetes.default.svc"))
    sa_priv, sa_pub = service_account_keys(certs)
    token = secrets.token_hex(24)
    tokens = workdir / "tokens.csv"
    user_tokens = {name: secrets.token_hex(24) for name in users or {}}
    lines = [f'{token},{ADMIN_USER},{ADMIN_USER}-uid,"system:masters"']
    for name, groups in (users or {}).items():
        listed = ",".join(groups)
        lines.append(f'{user_tokens[name]},{name},{name}-uid' + (f',"{listed}"' if listed else ""))
    tokens.write_text("\n".join(lines) + "\n")
    tokens.chmod(0o600)
    etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
    env = _server_env(home)
    procs: list[ManagedProcess] = []
    try:
        etcd_url, peer_url = f"http://127.0.0.1:{etcd_port}", f"http://127.0.0.1:{peer_port}"
        procs.append(
            ManagedProcess(
                "etcd",
                [
                    etcd_bin,
                    "--name=testbed",
                    f"--data-dir={workdir / 'etcd'}",
                    f"--listen-client-urls={etcd_url}",
                    f"--advertise-client-urls={etcd_url}",
                    f"--listen-peer-urls={peer_url}",
                    f"--initial-advertise-peer-urls={peer_url}",
                    f"--initial-cluster=testbed={peer_url}",
                    "--unsafe-no-fsync",
                    "--log-level=warn",
                ],
                workdir / "etcd.log",
                env=env,
            )
        )
        url = f"https://127.0.0.1:{api_port}"
        apiserver = ManagedProcess(
            "kube-apiserver",
            [
                apiserver_bin,
                f"--etcd-servers={etcd_url}",
                f"--cert-dir={certs}",
                f"--tls-cert-file={serving.cert_path}",
                f"--tls-private-key-file={serving.key_path}",
                f"--secure-port={api_port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--service-cluster-ip-range={service_cidr},fd00:10::/108",
                "--allow-privileged=true",
                "--authorization-mode=RBAC",
                f"--token-auth-file={tokens}",
                f"--service-account-issuer={url}",
                f"--service-account-key-file={sa_pub}",
                f"--service-account-signing-key-file={sa_priv}",
                "--profiling=false",
                "--v=1",
                *apiserver_args,
            ],
            workdir / "kube-apiserver.log",
            env=env,
        )
        procs.append(apiserver)
        kubeconfig = workdir / "kubeconfig"
        write_kubeconfig(kubeconfig, url, token, serving.ca_pem.decode())
        with httpx.Client(
            verify=ssl_context(serving.ca_path), timeout=5, headers={"Authorization": f"Bearer {token}"}
        ) as probe:
            wait_for(
                "kube-apiserver /readyz",
                lambda: probe.get(url + "/readyz").status_code == 200 or None,
                timeout,
                apiserver,
                interval=0.2,
            )
        bed = KubeTestBed(url, token, serving.ca_path, kubeconfig, procs)
        bed.user_tokens = user_tokens
    except BaseException:
        for p in reversed(procs):
            p.stop()
        raise
    try:
        started = time.monotonic()
        if files:
            bed.install_crds(files, timeout=timeout)
        bed.crd_install_seconds = time.monotonic() - started
        return bed
    except BaseException as exc:
        bed.stop()
        if isinstance(exc, BedError):
            raise BedError(f"{exc}\n{apiserver.tail()}") from exc
        raise


def write_kubeconfig(path: Path, url: str, token: str, ca_pem: str, user: str = ADMIN_USER) -> None:
    """A kubeconfig with one cluster, one token user and one current context named `testbed`."""
    import base64

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "testbed",
        "clusters": [
            {
                "name": "testbed",
                "cluster": {
                    "server": url,
                    "certificate-authority-data": base64.b64encode(ca_pem.encode()).decode(),
                },
            }
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [
            {"name": "testbed", "context": {"cluster": "testbed", "user": user, "namespace": "default"}}
        ],
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)


def kube_version() -> str:
    """KUBE_VERSION as Argo CD sends it for this API server: "<major>.<minor>" of the pinned release."""
    major, minor = pins()["KUBERNETES_VERSION"].lstrip("v").split(".")[:2]
    return f"{major}.{minor}"
