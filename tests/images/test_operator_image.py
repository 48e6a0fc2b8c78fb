"""The apprafter-operator image: its metadata, the pinned cue and cosign inside, and both of its commands.

Its runs against the API server (operator and webhook, as the chart deploys them) are in test_chart_install.py.
"""

from __future__ import annotations

import json

import pytest

from tests.images.podman import VERSION, Image, inspect, podman
from tests.renderer.helpers import run_cli

pytestmark = pytest.mark.images


@pytest.fixture(scope="module")
def operator_image(images: dict[str, Image]) -> Image:
    return images["apprafter-operator"]


def test_operator_image_metadata(operator_image: Image) -> None:
    config = inspect(operator_image.ref)["Config"]
    assert config["User"] == "999:999"
    assert config["Entrypoint"] == ["/opt/apprafter/bin/apprafter"]  # no shell between the kubelet and Python
    assert config["Cmd"] == ["operator"]
    assert "HOME=/tmp" in config["Env"]
    labels = config["Labels"]
    assert labels["org.opencontainers.image.title"] == "apprafter-operator"
    assert labels["org.opencontainers.image.version"] == VERSION
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    assert labels["org.opencontainers.image.base.name"].startswith("localhost/apprafter-base:")


def test_operator_image_ships_the_pinned_cue_and_cosign(operator_image: Image) -> None:
    doctor = podman("run", "--rm", "--read-only", "--user", "999:999", operator_image.ref, "doctor", "--role",
                    "cluster", "-o", "json", check=False)
    rows = {row["tool"]: row for row in json.loads(doctor.stdout)["tools"]}
    for tool in ("cue", "cosign"):  # at the pinned version, where the image's environment points
        assert (rows[tool]["ok"], rows[tool]["path"]) == (True, f"/opt/apprafter/bin/{tool}"), rows[tool]


def test_both_commands_are_the_packages(operator_image: Image) -> None:
    for command in ("operator", "webhook"):
        inside = podman("run", "--rm", "--read-only", operator_image.ref, command, "--help")
        outside = run_cli(command, "--help")  # `python -m apprafter` here, the console script there
        assert inside.stdout == outside.stdout.replace("python -m apprafter", "apprafter", 1)
