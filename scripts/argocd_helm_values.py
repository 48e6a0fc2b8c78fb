"""Writes deploy/argocd/helm-values.yaml, the values of Argo CD's Helm chart (argo-helm's argo-cd) that do what the
kustomize component deploy/argocd does, from the component's own patches (one source: edit the patches, then run
this): the sidecar and its volume as repoServer.extraContainers / repoServer.volumes, the ConfigMap data as
configs.params / configs.cm / configs.rbac, which the chart merges into argocd-cmd-params-cm, argocd-cm and
argocd-rbac-cm. `--check` exits 1 when the file is not what this writes (tests/argocd/test_helm_values.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy" / "argocd"
OUT = DEPLOY / "helm-values.yaml"
# ConfigMap the component patches -> the chart's values key whose entries become its data.
CONFIGMAP_VALUES = {"argocd-cmd-params-cm": "params", "argocd-cm": "cm", "argocd-rbac-cm": "rbac"}
HEADER = """\
# Values for Argo CD's Helm chart (argo-helm's argo-cd) with the same effect as the kustomize component beside this
# file: the apprafter-cue sidecar in argocd-repo-server, the repo-server timeouts the plugin needs, health checks and
# the Approve action for AppRafter's kinds, and role:apprafter-approver. Pass it with your own values:
#   helm upgrade argocd argo/argo-cd -n argocd --reuse-values -f deploy/argocd/helm-values.yaml
# The chart merges configs.cm / configs.params / configs.rbac into its ConfigMaps: keep your own keys beside ours.
# Generated from the component's patches by scripts/argocd_helm_values.py; do not edit by hand.
"""


class _Literal(str):
    """A multi-line string, written as a YAML literal block (the Lua stays readable)."""


def _literal(dumper: yaml.SafeDumper, text: _Literal) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|")


def _blocks(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _blocks(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_blocks(v) for v in node]
    return _Literal(node) if isinstance(node, str) and "\n" in node else node


def values() -> dict[str, Any]:
    """The chart values, read off the component's patches."""
    component = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    configs: dict[str, Any] = {}
    repo_server: dict[str, Any] = {}
    for entry in component["patches"]:
        patch = yaml.safe_load((DEPLOY / entry["path"]).read_text())
        target = entry["target"]
        if target["kind"] == "ConfigMap":
            configs[CONFIGMAP_VALUES[target["name"]]] = patch["data"]
        elif (target["kind"], target["name"]) == ("Deployment", "argocd-repo-server"):
            pod = patch["spec"]["template"]["spec"]
            if set(pod) - {"containers", "volumes"}:
                raise SystemExit(f"{entry['path']}: only containers and volumes map onto the chart's values")
            repo_server = {"extraContainers": pod["containers"], "volumes": pod.get("volumes", [])}
        else:
            raise SystemExit(f"{entry['path']}: no chart value for {target['kind']} {target['name']}")
    return {"repoServer": repo_server, "configs": configs}


def render() -> str:
    yaml.SafeDumper.add_representer(_Literal, _literal)
    return HEADER + yaml.safe_dump(_blocks(values()), sort_keys=False, width=120)


def main(argv: list[str]) -> int:
    text = render()
    if argv == ["--check"]:
        if not OUT.is_file() or OUT.read_text() != text:
            print(f"{OUT.relative_to(ROOT)} is not what the patches make: run scripts/argocd_helm_values.py",
                  file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
