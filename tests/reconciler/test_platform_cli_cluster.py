"""`apprafter platform pin|channel|freeze|unfreeze` write the PlatformStack's spec on the spec they read, through the
real API server: a status the controller writes between the read and the write is no reason to refuse (the CI run
of this stop failed `platform unfreeze` on one), a spec another writer changed meanwhile is."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from apprafter.cluster import with_cluster
from apprafter.platform_cmd import _get, _patch_spec
from controller_runtime.client import Kube
from platform_stack.resource import NAME, NAMESPACE
from tests.reconciler.helpers import API, write_status
from tests.testbed.kube import KubeTestBed
from toolchain.errors import UserError

pytestmark = pytest.mark.testbed


@pytest.fixture
def stack(bed: KubeTestBed) -> Iterator[None]:
    """A PlatformStack as its owner applies it (no controller runs here: this is about the command's write)."""
    bed.apply({"apiVersion": API, "kind": "PlatformStack", "metadata": {"name": NAME, "namespace": NAMESPACE},
               "spec": {"channel": "stable", "source": {"repoURL": "oci://registry.example/acme/platform-stack",
                                                         "checkInterval": "10m"},
                        "verify": {"provider": "cosign", "secretRef": {"name": "keys"}}}},
              field_manager="platform-admin")
    yield
    bed.delete(API, "PlatformStack", NAME, NAMESPACE)


def command(bed: KubeTestBed, meanwhile: dict[str, Any] | None, status: dict[str, Any] | None,
            spec: dict[str, Any]) -> str:
    """Read the stack as a command does, let another writer change it (its spec, or the controller its status),
    then write `spec` on what was read: the live channel after, or the refusal's words."""
    async def scenario(kube: Kube, _: str) -> str:
        read = await _get(kube)
        if status is not None:
            write_status(bed, "PlatformStack", NAME, NAMESPACE, status, "apprafter-operator-status")
        if meanwhile is not None:
            bed.apply({"apiVersion": API, "kind": "PlatformStack", "metadata": {"name": NAME, "namespace": NAMESPACE},
                       "spec": meanwhile}, field_manager="platform-admin")
        try:
            await _patch_spec(kube, read, spec)
        except UserError as e:
            return str(e)
        return str((await _get(kube))["spec"]["channel"])

    return with_cluster(bed.kubeconfig, None, scenario)


def test_a_status_written_meanwhile_does_not_refuse_the_command(bed: KubeTestBed, stack: None) -> None:
    assert command(bed, None, {"currentVersion": "1.1.0"}, {"channel": "beta"}) == "beta"


def test_a_spec_changed_meanwhile_refuses_it_and_keeps_the_other_writers_change(bed: KubeTestBed,
                                                                               stack: None) -> None:
    said = command(bed, {"channel": "edge"}, None, {"channel": "beta"})
    assert said == "platformstack/default: the PlatformStack's spec changed meanwhile: run the command again", said
    assert (bed.get(API, "PlatformStack", NAME, NAMESPACE) or {})["spec"]["channel"] == "edge"
