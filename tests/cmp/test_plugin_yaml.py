"""Our plugin.yaml files match Argo CD's ConfigManagementPlugin shape (Argo CD ignores unknown keys silently)."""

from __future__ import annotations

import copy
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.cmp.plugin_schema import PLUGIN_SCHEMA
from tests.renderer.helpers import REPO

PLUGINS = [REPO / "plugin.yaml", REPO / "deploy" / "argocd" / "plugin-discovery.yaml"]


@pytest.mark.parametrize("path", PLUGINS, ids=lambda p: p.name)
def test_plugin_yaml_is_valid(path: Path) -> None:
    doc = yaml.safe_load(path.read_text())
    jsonschema.validate(doc, PLUGIN_SCHEMA)
    spec = doc["spec"]
    assert f"{doc['metadata']['name']}-{spec['version']}" == "apprafter-cue-v1"
    assert spec["generate"]["command"] == ["apprafter", "cmp", "generate"]
    assert spec["parameters"]["dynamic"]["command"] == ["apprafter", "cmp", "parameters"]
    assert [p["name"] for p in spec["parameters"]["static"]] == ["environment"]
    assert spec.get("provideGitCreds") is False


def test_recommended_plugin_has_no_discovery_and_the_variant_has() -> None:
    named, variant = (yaml.safe_load(p.read_text())["spec"] for p in PLUGINS)
    assert "discover" not in named
    assert variant["discover"]["find"]["command"] == ["apprafter", "cmp", "discover"]


@pytest.mark.parametrize("mutate", [
    lambda d: d["spec"].update({"generte": {"command": ["x"]}}),
    lambda d: d["spec"]["parameters"]["static"][0].update({"defualt": "prod"}),
    lambda d: d["spec"]["parameters"].update({"dynamic": {"cmd": ["x"]}}),
    lambda d: d["spec"].pop("generate"),
])
def test_typos_are_caught(mutate: object) -> None:
    doc = copy.deepcopy(yaml.safe_load(PLUGINS[0].read_text()))
    mutate(doc)  # type: ignore[operator]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, PLUGIN_SCHEMA)
