"""Evaluates the platform-stack CUE source with the real cue binary into the data a chart is built from."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from platform_stack.errors import StackError, StackToolError
from renderer.context import (
    CLUSTER_ISSUER,
    DEFAULTS,
    GATEWAY_NAMESPACE,
    GATEWAYS,
    HTTP_LISTENER,
    HTTPS_LISTENER,
    LISTENERS_FIELD_MANAGER,
    TIERS,
)
from renderer.cue import CueResult, run_cue
from renderer.cue_errors import parse_errors
from toolchain.tools import remedy

SOURCE_DIR = Path(__file__).resolve().parent
ALL = "all"
CUE_TIMEOUT = 60.0


def cue_files(source: Path) -> list[Path]:
    """The files of the stack package: top-level *.cue, components/*.cue, tiers/*.cue, sorted."""
    files = sorted(source.glob("*.cue")) + sorted((source / "components").glob("*.cue")) + \
        sorted((source / "tiers").glob("*.cue"))
    if not (source / "platform.cue").is_file():
        raise StackError(f"{source}:1:1: source: no platform.cue here (not a platform-stack source)")
    return files


def evaluate(source: Path = SOURCE_DIR, tier: str = ALL) -> dict[str, Any]:
    """`cue export -e build` for `tier` ("all" or one tier): {tiers, values, compatibility, schema}."""
    if tier != ALL and tier not in TIERS:
        raise StackError(f"--tier: {tier!r} is not one of {', '.join((ALL, *TIERS))}")
    files = [str(p.relative_to(source)) for p in cue_files(source)]
    proc = _export(files, source, tier, "build")
    if proc.returncode != 0:
        # The build expression reports a missing field at the comprehension that reads it; evaluating
        # the components alone names the component and tier instead (only on this failure path).
        detail = _export(files, source, tier, "components")
        stderr = (detail if detail.returncode != 0 else proc).stderr
        raise StackError(*(_point_at_overlay(line, source) for line in cue_error_lines(stderr, source)))
    try:
        data: dict[str, Any] = json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise StackToolError(f"cue printed invalid JSON ({exc}): {remedy('cue')}") from exc
    return data


def platform_tags() -> list[str]:
    """What the stack takes from the renderer, so both name the same Gateways, ClusterIssuer, DNS resolver and
    provider namespaces (the last two as JSON, the namespaces per service type: the network-policies component's
    default-deny leaves them alone, the integrated providers run their backends there)."""
    dns = {"namespace": DEFAULTS.dns_namespace, "podLabels": dict(DEFAULTS.dns_selector)}
    providers = dict(DEFAULTS.provider_namespaces)
    tags = {"gatewayNamespace": GATEWAY_NAMESPACE, "httpsListener": HTTPS_LISTENER, "httpListener": HTTP_LISTENER,
            "clusterIssuer": CLUSTER_ISSUER, "listenersManager": LISTENERS_FIELD_MANAGER,
            **{f"{network}Gateway": name for network, name in GATEWAYS.items()},
            "dns": json.dumps(dns, sort_keys=True), "providerNamespaces": json.dumps(providers, sort_keys=True)}
    return [arg for key, value in sorted(tags.items()) for arg in ("-t", f"{key}={value}")]


def _export(files: list[str], source: Path, tier: str, expression: str) -> CueResult:
    """The one cue runner (scrubbed environment, time and memory budget), on the stack's source."""
    return run_cue(["export", *files, "-t", f"tier={tier}", *platform_tags(), "-e", expression, "--out", "json"],
                   cwd=source, timeout_s=CUE_TIMEOUT)


_MISSING_TIER = re.compile(
    r"^\S+: components\.(?P<c>[^.]+)\.tiers\.(?P<t>[a-z]+)\.availability: incomplete value")


def _point_at_overlay(line: str, source: Path) -> str:
    """A component a tier overlay forgot: point at the overlay file, not at the schema line."""
    m = _MISSING_TIER.match(line)
    if not m:
        return line
    component, tier = m["c"], m["t"]
    where = _show(source / "tiers" / (tier + ".cue"))
    return (f"{where}:1:1: components.{component}.tiers.{tier}.availability: "
            f"missing: the {tier} overlay must make {component} required, default, opt-in or unavailable")


def cue_error_lines(stderr: str, source: Path) -> list[str]:
    """cue's errors (renderer.cue_errors reads them) -> one `file:line:col: field: message` line each."""
    out: list[str] = []
    for error in parse_errors(stderr):
        message = f"{error.path}: {error.message}" if error.path else error.message
        if error.positions:
            file, line, col = error.positions[0]
            out.append(f"{_show((source / file).resolve())}:{line}:{col}: {message}")
        else:
            out.append(f"{_show(source / 'platform.cue')}:1:1: {message}")
    return out or [f"{_show(source / 'platform.cue')}:1:1: cue: evaluation failed"]


def _show(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
