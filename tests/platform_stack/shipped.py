"""The integrated ServiceProviders a built stack ships on a tier, as Argo CD would apply them: the umbrella's
`service-providers` Application, its chart (deploy/charts/apprafter-service-providers) rendered by the real helm with
exactly the values that Application passes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.charts.chart import KUBE_VERSION
from tests.platform_stack.conftest import applications, helm, helm_template, ok
from tests.renderer.helpers import REPO

CHART = REPO / "deploy" / "charts" / "apprafter-service-providers"
COMPONENT = "service-providers"


def umbrella_apps(stack: Path, tier: str, *args: str) -> dict[str, dict[str, Any]]:
    return applications(helm_template(stack, "--set", f"tier={tier}", "--set", "domain=apps.example.com", *args))


def render(app: dict[str, Any], into: Path) -> list[dict[str, Any]]:
    """The chart templated with the Application's values, release name and namespace."""
    source = app["spec"]["source"]
    values = into / f"{app['metadata']['name']}-values.json"
    values.write_text(json.dumps(source["helm"].get("valuesObject", {})))
    out = ok(helm("template", source["helm"]["releaseName"], str(CHART), "--namespace",
                  app["spec"]["destination"]["namespace"], "--kube-version", KUBE_VERSION, "-f", str(values)))
    return [d for d in yaml.safe_load_all(out) if d]


def shipped(stack: Path, tier: str, into: Path, *args: str) -> list[dict[str, Any]]:
    """The ServiceProviders the stack applies on `tier` (umbrella `--set` args passed on, e.g. overrides)."""
    rendered = render(umbrella_apps(stack, tier, *args)[COMPONENT], into)
    return [obj for obj in rendered if obj["kind"] == "ServiceProvider"]


def backend_namespaces(stack: Path, tier: str, into: Path) -> set[str]:
    """The Namespaces the component makes for its providers' shared backends."""
    return {obj["metadata"]["name"] for obj in render(umbrella_apps(stack, tier)[COMPONENT], into)
            if obj["kind"] == "Namespace"}
