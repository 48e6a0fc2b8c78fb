"""Everything the renderer emits for the examples is accepted by a real kube-apiserver (server-side dry run)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from renderer.crds import crd_documents
from renderer.emit import dump_stream
from renderer.load import load
from renderer.render import MODES, Mode, render_loaded
from renderer.validate import environments
from tests.renderer.helpers import EXAMPLES
from tests.testbed.kube import ApplyRejected, KubeTestBed

pytestmark = pytest.mark.testbed


@pytest.fixture(scope="module")
def kube_with_our_crds(kube: KubeTestBed, tmp_path_factory: pytest.TempPathFactory) -> KubeTestBed:
    crds = tmp_path_factory.mktemp("crds") / "apprafter-crds.yaml"
    crds.write_text(dump_stream(crd_documents()))
    installed = kube.install_crds([crds])
    assert {"applications.apprafter.io", "resourceclaims.apprafter.io"} <= set(installed)
    return kube


CASES = [(e.name, env, mode) for e in sorted(EXAMPLES.iterdir()) for env in environments(load(e)) for mode in MODES]


@pytest.mark.parametrize(("example", "env", "mode"), CASES)
def test_rendered_objects_pass_server_side_dry_run(kube_with_our_crds: KubeTestBed, example: str, env: str,
                                                   mode: str) -> None:
    rendered = render_loaded(load(EXAMPLES / example), env, cast(Mode, mode))
    objects: list[dict[str, Any]] = list(yaml.safe_load_all(dump_stream(rendered.objects)))
    accepted = kube_with_our_crds.dry_run_apply(objects, namespace=f"{example}-{env}")
    assert [(o["kind"], o["metadata"]["name"]) for o in accepted] == [
        (o["kind"], o["metadata"]["name"]) for o in objects]


def test_the_application_crd_rejects_what_the_schema_forbids(kube_with_our_crds: KubeTestBed) -> None:
    cr = render_loaded(load(EXAMPLES / "parser"), "prod", "cr").objects[0]
    cr["spec"]["base"]["replicas"] = "three"
    with pytest.raises(ApplyRejected, match="replicas"):
        kube_with_our_crds.dry_run_apply([cr], namespace="parser-prod")


def test_crds_are_structural_and_served(kube_with_our_crds: KubeTestBed, tmp_path: Path) -> None:
    versions = kube_with_our_crds.api_versions()
    assert "apprafter.io/v1alpha1" in versions
