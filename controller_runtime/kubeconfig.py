"""The cluster to talk to, resolved as kubectl resolves it: --kubeconfig, KUBECONFIG (merged), ~/.kube/config, then
the in-cluster service account."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from lightkube import ConfigError, KubeConfig

from controller_runtime.errors import KubeConfigError

__all__ = ["IN_CLUSTER", "default_namespace", "load_config"]

IN_CLUSTER = Path("/var/run/secrets/kubernetes.io/serviceaccount")
_PATH_KEYS = ("certificate-authority", "client-certificate", "client-key", "tokenFile")


def _merge(paths: list[Path]) -> dict[str, Any]:
    """kubectl's KUBECONFIG merge: the first file to name a cluster, user, context or current-context wins."""
    merged: dict[str, Any] = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": []}
    for path in paths:
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as e:
            raise KubeConfigError(f"cannot read kubeconfig {path}: {e}") from None
        if not isinstance(data, dict):
            raise KubeConfigError(f"kubeconfig {path} is not a mapping")
        for key in ("clusters", "users", "contexts"):
            seen = {entry.get("name") for entry in merged[key]}
            for entry in data.get(key) or []:
                if isinstance(entry, dict) and entry.get("name") not in seen:
                    # relative certificate paths are relative to the file that names them
                    merged[key].append(_absolute_paths(entry, path.parent))
        if "current-context" not in merged and data.get("current-context"):
            merged["current-context"] = data["current-context"]
    return merged


def _absolute_paths(entry: dict[str, Any], base: Path) -> dict[str, Any]:
    out = dict(entry)
    for section in ("cluster", "user"):
        inner = out.get(section)
        if isinstance(inner, dict):
            out[section] = {k: (str(base / v) if k in _PATH_KEYS and isinstance(v, str) and not os.path.isabs(v)
                                else v) for k, v in inner.items()}
    return out


def load_config(kubeconfig: Path | None = None, context: str | None = None) -> KubeConfig:
    """--kubeconfig, else KUBECONFIG (a path list, merged), else ~/.kube/config, else the in-cluster account."""
    tried: list[str] = []
    if kubeconfig is not None:
        if not kubeconfig.is_file():
            raise KubeConfigError(f"--kubeconfig {kubeconfig}: no such file")
        paths = [kubeconfig]
    elif os.environ.get("KUBECONFIG"):
        paths = [Path(p).expanduser() for p in os.environ["KUBECONFIG"].split(os.pathsep) if p]
        paths = [p for p in paths if p.is_file()]
        tried.append("KUBECONFIG (no listed file exists)")
    else:
        default = Path("~/.kube/config").expanduser()
        paths = [default] if default.is_file() else []
        tried.append(f"{default} (absent)")
    if paths:
        config = KubeConfig.from_dict(_merge(paths), fname=paths[0])
        if context is not None and context not in config.contexts:
            raise KubeConfigError(f"--context {context}: not in {', '.join(map(str, paths))}")
        if context is not None:
            config.current_context = context
        return config
    try:
        return KubeConfig.from_service_account(IN_CLUSTER)
    except (ConfigError, KeyError):
        tried.append("in-cluster service account (not in a pod)")
    raise KubeConfigError("no cluster configured: pass --kubeconfig PATH or set KUBECONFIG; tried " + ", ".join(tried))


def default_namespace(config: KubeConfig) -> str:
    """The current context's namespace, as kubectl uses it when -n is not given."""
    single = config.get()
    return single.namespace if single is not None and single.namespace else "default"
