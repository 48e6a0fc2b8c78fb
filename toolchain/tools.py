"""Resolves each external tool to a binary at a supported version, with a remedy when it is not there.

A tool is supported at its pin, or (cue) anywhere in the range versions.env declares: an app repository
installs the package from PyPI and brings its own cue. The remedy names `make setup` only in a checkout of
this repository (where tools/setup.sh exists); anywhere else it names the install command and APPRAFTER_<TOOL>.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path

from toolchain.errors import ToolFailure
from toolchain.pins import pins
from toolchain.record import Record
from toolchain.regex import lazy

# Who checks what with `apprafter doctor --role`: an app repository's developer, who runs a cluster (bootstrap, the
# stack's signatures), who develops this repository (the test bed, the images, the node tier).
ROLES = ("developer", "cluster", "development")
SETUP_REMEDY = "run `make setup` (tools/setup.sh) to install it"
# Present only in a checkout of this repository (a wheel ships no tools/): decides which remedy a message names.
CHECKOUT_SETUP = Path(__file__).resolve().parent.parent / "tools" / "setup.sh"
_VERSION = lazy(r"v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?")


class ToolError(ToolFailure):
    """A required tool is missing or at the wrong version; the message names the remedy."""


class Tool(Record):
    """One external binary: its pin key, how to read its version, and whether users need it."""

    name: str
    pin_key: str
    version_argv: tuple[str, ...]
    parse: Callable[[str], str | None]
    purpose: str
    # Who needs it (ROLES): the app developer, who runs a cluster, who develops this repository (everything).
    roles: frozenset[str] = frozenset({"development"})
    # What the binary says about how it was built, beyond its version (doctor shows it).
    build_probe: Callable[[Path], list[str]] | None = None
    # How someone without this repository installs it ({version}: the pin); None: only `make setup` builds it.
    install: str | None = None
    # Pin keys of the oldest supported version and of the first one no longer supported (None: the pin only).
    oldest_key: str | None = None
    below_key: str | None = None
    # Pin keys of further versions the set-up installs beside the pin and the tests run too (never on PATH).
    also_pinned: tuple[str, ...] = ()

    @property
    def pinned(self) -> str:
        return pins()[self.pin_key]

    def supports(self, version: str | None) -> bool:
        """Whether a binary reporting `version` is usable: the pin, or a release inside the declared range
        (pre-releases only when pinned)."""
        if version is None:
            return False
        if version == self.pinned:
            return True
        if self.oldest_key is None or self.below_key is None:
            return False
        found = version_key(version)
        if found is None or found[3]:
            return False
        oldest, below = version_key(pins()[self.oldest_key]), version_key(pins()[self.below_key])
        assert oldest is not None and below is not None, "versions.env holds a range bound that is not a version"
        return oldest[:3] <= found[:3] < below[:3]

    @property
    def supported(self) -> str:
        """The supported versions as people read them: `>= v0.17.0, < v0.18.0`, or the pin alone."""
        if self.oldest_key is None or self.below_key is None:
            return self.pinned
        return f">= {pins()[self.oldest_key]}, < {pins()[self.below_key]}"


    @property
    def versions(self) -> tuple[str, ...]:
        """The pin first, then every other version the set-up installs and the tests run (also_pinned)."""
        return (self.pinned, *(pins()[key] for key in self.also_pinned))


def version_key(version: str) -> tuple[int, int, int, str] | None:
    """(major, minor, patch, pre-release) of a `vX.Y.Z[-pre]` version; None when it is not one."""
    m = _VERSION.fullmatch(version.strip())
    return (int(m[1]), int(m[2]), int(m[3]), m[4] or "") if m else None


def in_checkout() -> bool:
    """Whether this package runs from a checkout of its repository (which has `make setup`)."""
    return CHECKOUT_SETUP.is_file()


def remedy(name: str) -> str:
    """How to get `name` at a supported version: `make setup` in a checkout, else its install command and the
    APPRAFTER_<NAME> override (no message a user meets outside this repository names make)."""
    override = "APPRAFTER_" + name.upper().replace("-", "_")
    if in_checkout():
        return f"{SETUP_REMEDY}, or point {override} at one"
    tool = TOOLS[name]
    if tool.install is None:
        return f"install {name} {tool.pinned} and point {override} at it"
    return f"install one with `{tool.install.format(version=tool.pinned)}`, or point {override} at one"



def missing_remedy(name: str) -> str:
    """How to get a tool that is not found: where `go install` left it, when that is off PATH (the commonest case
    right after following the install page), else remedy()."""
    tool = TOOLS[name]
    if tool.install is not None and tool.install.startswith("go install"):
        from toolchain.gobin import off_path

        found = off_path(name)
        if found is not None:
            override = "APPRAFTER_" + name.upper().replace("-", "_")
            return (f"`go install` put it in {found.parent}, which is not on PATH: run `export "
                    f"PATH=\"$PATH:{found.parent}\"` (and add that line to your shell's profile), or point {override} "
                    f"at {found}")
    return remedy(name)


def scrubbed_env(home: str | Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment every tool we run gets: PATH, a private HOME and what the caller adds; no proxies, tokens,
    kubeconfigs or Argo CD variables reach it (and a tool's output never depends on the caller's settings)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}
    env.update(extra or {})
    return env

def _first(pattern: str) -> Callable[[str], str | None]:
    def parse(text: str) -> str | None:
        m = re.search(pattern, text, re.MULTILINE)  # compiled on use: the plugin never asks a version
        return ("v" + m.group(1).lstrip("v")) if m else None

    return parse


def _go_module(module: str) -> Callable[[str], str | None]:
    """Version of `module` from `go version -m` output (binaries without a version flag)."""
    return _first(r"^\s*(?:mod|dep)\s+" + re.escape(module) + r"\s+(v[^\s]+)")


def _output(argv: list[str], timeout: float = 30) -> str:
    import subprocess  # here, not at the top: the render's path imports this module and starts cue without it

    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def _helm_build(path: Path) -> list[str]:
    """The commit helm was built from, and the Kubernetes version it assumes without --kube-version."""
    commit = _output([str(path), "version", "--template", "{{.GitCommit}}"])
    import tempfile

    with tempfile.TemporaryDirectory(prefix="apprafter-doctor-") as tmp:
        chart = Path(tmp) / "probe"
        (chart / "templates").mkdir(parents=True)
        (chart / "Chart.yaml").write_text("apiVersion: v2\nname: probe\nversion: 0.1.0\n")
        (chart / "templates" / "kube.yaml").write_text("kube: {{ .Capabilities.KubeVersion.Version | quote }}\n")
        rendered = _output([str(path), "template", "probe", str(chart)])
    kube = re.search(r'kube: "(v[^"]+)"', rendered)
    return [f"commit {commit[:12] or 'unknown'}", f"assumes Kubernetes {kube.group(1) if kube else 'unknown'}"]


TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        Tool("cue", "CUE_VERSION", ("version",), _first(r"cue version (v\S+)"),
             "evaluates Application.cue and the platform stack", roles=frozenset(ROLES),
             install="go install cuelang.org/go/cmd/cue@{version}", oldest_key="CUE_OLDEST_VERSION",
             below_key="CUE_BELOW_VERSION"),
        Tool("helm", "HELM_VERSION", ("version", "--short"), _first(r"^(v\d+\.\d+\.\d+)"),
             "lints and templates the platform-stack chart", build_probe=_helm_build),
        Tool("cosign", "COSIGN_VERSION", ("version",), _first(r"GitVersion:\s+(v\S+)"),
             "signs and verifies the platform-stack OCI artifact", roles=frozenset({"cluster", "development"}),
             install="go install github.com/sigstore/cosign/v2/cmd/cosign@{version}"),
        Tool("registry", "GGCR_REGISTRY_VERSION", (), _go_module("github.com/google/go-containerregistry"),
             "OCI registry on loopback (test bed)"),
        Tool("docker-registry", "DOCKER_REGISTRY_VERSION", ("--version",),
             _first(r"docker/distribution v?(\d+\.\d+\.\d+)"),
             "registry that requires credentials, htpasswd or token (test bed; Debian package)"),
        Tool("etcd", "ETCD_VERSION", ("--version",), _first(r"etcd Version: (\S+)"),
             "storage for the test-bed API server"),
        Tool("kube-apiserver", "KUBERNETES_VERSION", ("--version",), _first(r"Kubernetes (v\S+)"),
             "the test-bed Kubernetes API server"),
        Tool("kube-controller-manager", "KUBERNETES_VERSION", ("--version",), _first(r"Kubernetes (v\S+)"),
             "the node tier's controllers (Deployments, ReplicaSets, garbage collector, tokens)"),
        Tool("kube-scheduler", "KUBERNETES_VERSION", ("--version",), _first(r"Kubernetes (v\S+)"),
             "the node tier's scheduler"),
        Tool("kubelet", "KUBERNETES_VERSION", ("--version",), _first(r"Kubernetes (v\S+)"),
             "the node tier's node agent (runs pods through containerd)"),
        Tool("kube-proxy", "KUBERNETES_VERSION", ("--version",), _first(r"Kubernetes (v\S+)"),
             "ClusterIP Services inside the node tier's network namespace (iptables mode)"),
        Tool("coredns", "COREDNS_VERSION", ("-version",), _first(r"CoreDNS-(\d+\.\d+\.\d+)"),
             "cluster DNS inside the node tier's network namespace (kube-dns at the 10th ClusterIP)"),
        Tool("traefik", "TRAEFIK_VERSION", ("version",), _first(r"Version:\s+(v\S+)"),
             "the node tier's Gateway API implementation (standing in for Cilium's Gateway; runs in the image)"),
        Tool("kubectl", "KUBERNETES_VERSION", ("version", "--client"), _first(r"Client Version: (v\S+)"),
             "the node tier's kubectl (logs, exec, what a person runs)"),
        Tool("argocd", "ARGOCD_VERSION", ("version", "--client", "--short"),
             _first(r"argocd: v?(\d+\.\d+\.\d+)"),
             "Argo CD's binary, run as each Argo CD component in the test bed",
             also_pinned=("ARGOCD_OLDEST_VERSION",)),
        Tool("argocd-cmp-client", "ARGOCD_VERSION", (), _go_module("github.com/argoproj/argo-cd/v3"),
             "calls the plugin server the way argocd-repo-server does (test bed)",
             also_pinned=("ARGOCD_OLDEST_VERSION",)),
        Tool("kustomize", "KUSTOMIZE_VERSION", ("version",), _first(r"^(v\d+\.\d+\.\d+)"),
             "builds deploy/argocd/'s overlay on Argo CD's install (test bed)"),
        Tool("kubeseal", "SEALED_SECRETS_VERSION", ("--version",), _first(r"kubeseal version: (v\S+)"),
             "seals a Secret as SealedSecrets' own client does: the format cross-check (test bed)"),
        Tool("sealed-secrets-controller", "SEALED_SECRETS_VERSION", ("--version",),
             _first(r"controller version: (v\S+)"), "unseals SealedSecrets on the test bed's API server"),
        Tool("cnpg-manager", "CNPG_VERSION", ("version",), _first(r"Version:(\d+\.\d+\.\d+)"),
             "CloudNativePG's operator and instance manager, shipped in the `cnpg` image (node tier)"),
        Tool("vault", "VAULT_VERSION", ("version",), _first(r"^Vault (v\d+\.\d+\.\d+)"),
             "stands in for OpenBao's server: KV v2 and the Kubernetes auth method on loopback (test bed)"),
        Tool("versitygw", "VERSITYGW_VERSION", ("--version",), _first(r"^Version\s*:\s*(v\S+)"),
             "S3-compatible object store of the s3 backend: posix storage, internal IAM, on loopback (test bed)"),
    )
}


def tools_dir() -> Path:
    """The version-keyed cache tools/setup.sh installs into."""
    env = os.environ.get("APPRAFTER_TOOLS_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "apprafter" / "tools"


def candidate_path(name: str, version: str | None = None) -> Path | None:
    """Where the binary is: APPRAFTER_<NAME> override, the cache, then PATH; for a `version` other than the pin
    (one of Tool.versions), only the cache."""
    tool = TOOLS[name]
    if version is not None and version != tool.pinned:
        if version not in tool.versions:
            raise ToolError(f"{name} {version} is not a supported version ({', '.join(tool.versions)})")
        return tools_dir() / name / version / name
    override = os.environ.get("APPRAFTER_" + name.upper().replace("-", "_"))
    if override:
        return Path(override)
    exact = tools_dir() / name / tool.pinned / name  # argocd-cmp-client/<version> links its source-keyed build
    if exact.exists():
        return exact
    import shutil  # only when the cache and APPRAFTER_<NAME> do not have it

    found = shutil.which(name)
    return Path(found) if found else None


def read_version(name: str, path: Path) -> str | None:
    """Ask the binary for its version (or read its Go build info when it has no version flag)."""
    tool = TOOLS[name]
    argv = [str(path), *tool.version_argv] if tool.version_argv else _go_version_argv(path)
    if argv is None:
        return None
    import tempfile

    with tempfile.TemporaryDirectory(prefix="apprafter-version-") as home:
        # Only PATH and a private HOME: a tool's version must not depend on (or see) the caller's settings.
        env = scrubbed_env(home)
        # Go telemetry off in that HOME: else `go` leaves a child writing counters there after it exits, and
        # removing the directory races it ("Directory not empty: 'telemetry'").
        telemetry = Path(home, ".config", "go", "telemetry")
        telemetry.mkdir(parents=True)
        (telemetry / "mode").write_text("off")
        import subprocess

        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False, env=env)
        except (OSError, subprocess.TimeoutExpired):
            return None
    return tool.parse(proc.stdout + proc.stderr)


def _go_version_argv(path: Path) -> list[str] | None:
    import shutil

    go = shutil.which("go")
    return [go, "version", "-m", str(path)] if go else None


def resolve(name: str, version: str | None = None) -> Path:
    """Path of `name` at a supported version (or at `version`, one of Tool.versions), or ToolError naming the
    version found, the versions supported and the fix.

    A binary from the version-keyed cache, or installed beside this package (its environment's bin/, as the
    images ship cue), is trusted as it is (no extra process per call: the plugin runs on every sync); any other,
    found on PATH or named by APPRAFTER_<NAME>, must report a supported version (one `<tool> version` run).
    """
    tool = TOOLS[name]
    path = candidate_path(name, version)
    if path is None or not path.exists():
        supported = tool.supported if version is None else version
        raise ToolError(f"{name} not found (supported: {supported}): {missing_remedy(name)}")
    if not _trusted(name, path):
        found = read_version(name, path)
        if not tool.supports(found):
            raise unsupported(name, path, found)
    return path


def _trusted(name: str, path: Path) -> bool:
    """The cache's entry for the pin or another of Tool.versions (the set-up built it so; other versions cached
    beside them, such as cue's test versions, are not trusted), or a binary in this package's own environment."""
    import sys

    cached, entry = tools_dir(), path.parent.name
    if path.parent == cached / "bin":  # the set-up links bin/ to the pinned entries
        return True
    if path.parent.parent == cached / name:  # argocd-cmp-client's entries are <version>-<source hash>
        return any(entry == version or entry.startswith(version + "-") for version in TOOLS[name].versions)
    return path.parent == Path(sys.prefix) / "bin"


def unsupported(name: str, path: Path, found: str | None) -> ToolError:
    """The error for a binary at a version outside the supported ones."""
    return ToolError(f"{name} at {path} is {found or 'of unknown version'}; apprafter supports {name} "
                     f"{TOOLS[name].supported}: {remedy(name)}")


def build_info(name: str, path: Path) -> list[str]:
    """How the binary at path was built: the tool's own account (build_probe) and the set-up's recipe stamp."""
    tool = TOOLS[name]
    info = tool.build_probe(path) if tool.build_probe else []
    try:
        info.append(f"recipe {(path.parent / '.recipe').read_text().strip()}")
    except OSError:  # no stamp (a tool reused from PATH), or the set-up is replacing this cache entry now
        info.append("recipe unknown")
    return info


def check(name: str, version: str | None = None) -> Path:
    """Like resolve(), and also verify that the binary is the pin (or `version`) itself (slower: runs it): what the
    images ship, and a second Argo CD line."""
    path = resolve(name, version)
    wanted = version or TOOLS[name].pinned
    found = read_version(name, path)
    if found != wanted:
        raise ToolError(f"{name} at {path} is {found or 'of unknown version'}, want {wanted}: {remedy(name)}")
    return path


# Each CRD source tools/fetch-crds.sh copies, keyed by its directory prefix, with its pin key.
CRD_SOURCES: dict[str, str] = {
    "gateway-api": "GATEWAY_API_VERSION",
    "keda": "KEDA_VERSION",
    "cilium": "CILIUM_VERSION",
    "argocd": "ARGOCD_VERSION",
    "cloudnative-pg": "CNPG_VERSION",
    "cert-manager": "CERT_MANAGER_VERSION",
}


def crds_dir() -> Path:
    """Where tools/fetch-crds.sh puts the CRDs: $TOOLS_DIR/crds/<source>-<version>/."""
    return tools_dir() / "crds"


def crd_files() -> list[Path]:
    """Every CRD YAML file at the pinned source versions, or ToolError naming the missing source."""
    files: list[Path] = []
    for source, pin_key in CRD_SOURCES.items():
        version = pins()[pin_key]
        src = crds_dir() / f"{source}-{version}"
        found = sorted(src.glob("*.yaml")) if src.is_dir() else []
        if not found:
            raise ToolError(f"CRDs of {source} {version} not found in {src}: {SETUP_REMEDY}")  # a checkout's test bed
        files.extend(found)
    return files
