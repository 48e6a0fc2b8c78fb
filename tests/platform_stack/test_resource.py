"""The PlatformStack CRD (`apprafter crds`): issue 13's shape, defaults, and what the API server holds by itself."""

from __future__ import annotations

import copy
import uuid
from typing import Any

import pytest
import yaml

from platform_stack.resource import (
    DEFAULT_REPOSITORY,
    NAME,
    NAMESPACE,
    PLATFORM_STACK,
    VERSION_HISTORY_LIMIT,
    check_interval,
    push_history,
    read_spec,
)
from renderer.context import TIERS
from renderer.crds import crd, crd_documents
from renderer.emit import dump_stream
from tests.renderer.helpers import REPO, run_cli
from tests.testbed.kube import ApplyRejected, KubeTestBed

API = "apprafter.io/v1alpha1"


def schema() -> dict[str, Any]:
    result: dict[str, Any] = crd(PLATFORM_STACK)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return result


def test_apprafter_crds_lists_platformstack_with_issue_13s_shape() -> None:
    result = run_cli("crds")
    assert result.returncode == 0, result.stderr
    [printed] = [d for d in yaml.safe_load_all(result.stdout) if d and d["spec"]["names"]["kind"] == "PlatformStack"]
    assert printed == crd(PLATFORM_STACK)
    spec = schema()["properties"]["spec"]["properties"]
    assert set(spec) == {"channel", "pin", "autoUpgrade", "source", "values", "overrides", "verify"}
    assert set(spec["source"]["properties"]) == {"upstream", "repoURL", "checkInterval", "insecure", "secretRef"}
    assert set(spec["values"]["properties"]) == {"tier", "domain", "multitenancy"}
    override = spec["overrides"]["additionalProperties"]["properties"]
    assert set(override) == {"pin", "enabled", "values"}
    # any Helm values are kept (the one open field of the spec), the number of components is bounded
    assert override["values"] == {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                                  "description": override["values"]["description"]}
    assert spec["overrides"]["maxProperties"] == 64
    assert spec["verify"]["properties"]["provider"]["enum"] == ["cosign"]
    status = schema()["properties"]["status"]["properties"]
    assert {"currentVersion", "targetVersion", "availableVersion", "lastUpstreamCheck", "components",
            "versionHistory", "conditions"} <= set(status)
    assert status["conditions"]["x-kubernetes-list-map-keys"] == ["type"]


def test_the_tier_list_is_the_renderers() -> None:
    assert schema()["properties"]["spec"]["properties"]["values"]["properties"]["tier"]["enum"] == list(TIERS)


@pytest.fixture(scope="module")
def bed(kube: KubeTestBed, tmp_path_factory: pytest.TempPathFactory) -> KubeTestBed:
    path = tmp_path_factory.mktemp("crds") / "platformstack.yaml"
    path.write_text(dump_stream(crd_documents((PLATFORM_STACK,))))
    kube.install_crds([path])
    return kube


def stack(name: str = NAME, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "PlatformStack", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": spec}


@pytest.mark.testbed
def test_the_api_server_defaults_and_validates_a_platformstack(bed: KubeTestBed) -> None:
    [stored] = bed.dry_run_apply([stack(source={"checkInterval": "6h", "insecure": True,
                                                "secretRef": {"name": "registry"}},
                                        verify={"provider": "cosign", "secretRef": {"name": "keys"}},
                                        overrides={"cilium": {"pin": "1.16.5"}, "backstage": {"enabled": False},
                                                   "keda": {"values": {"operator": {"replicaCount": 2},
                                                                       "resources": [{"cpu": "1"}]}}},
                                        values={"tier": "solo", "multitenancy": False})])
    assert stored["spec"]["channel"] == "stable" and stored["spec"]["autoUpgrade"] is False
    assert stored["spec"]["overrides"]["keda"] == {"values": {"operator": {"replicaCount": 2},
                                                              "resources": [{"cpu": "1"}]}}  # not pruned
    with pytest.raises(ApplyRejected, match=r'spec\.channel: Unsupported value: "nightly"'):
        bed.dry_run_apply([stack(channel="nightly")])
    with pytest.raises(ApplyRejected, match=r"spec\.source\.checkInterval"):
        bed.dry_run_apply([stack(source={"checkInterval": "six hours"})])
    with pytest.raises(ApplyRejected, match="a cluster has one PlatformStack, named 'default'"):
        bed.dry_run_apply([stack(name=f"second-{uuid.uuid4().hex[:4]}")])


@pytest.mark.testbed
def test_the_status_is_typed_and_keeps_at_most_ten_versions(bed: KubeTestBed) -> None:
    bed.apply(stack())
    entry = {"version": "1.0.0", "digest": "sha256:" + "d" * 64, "appliedAt": "2026-11-30T12:00:00Z"}
    body = {**stack(), "status": {"currentVersion": "1.0.0", "versionHistory": [entry] * VERSION_HISTORY_LIMIT}}
    info = bed.resource_for(API, "PlatformStack")
    url = info.path(NAME, NAMESPACE) + "/status"
    params = {"fieldManager": "status-test", "force": "true"}
    headers = {"Content-Type": "application/apply-patch+yaml"}
    ok = bed.http.patch(url, params=params, json=body, headers=headers)
    assert ok.status_code == 200, ok.text
    too_many = copy.deepcopy(body)
    too_many["status"]["versionHistory"].append(entry)
    refused = bed.http.patch(url, params=params, json=too_many, headers=headers)
    assert refused.status_code == 422 and "must have at most 10 items" in refused.text
    bad_digest = copy.deepcopy(body)
    bad_digest["status"]["versionHistory"] = [{**entry, "digest": "latest"}]
    assert bed.http.patch(url, params=params, json=bad_digest, headers=headers).status_code == 422


@pytest.mark.testbed
def test_the_documented_example_is_accepted_as_written(bed: KubeTestBed) -> None:
    doc = (REPO / "docs" / "platform-stack.md").read_text().split("## The PlatformStack resource", 1)[1]
    example = yaml.safe_load(doc.split("```yaml\n", 1)[1].split("```", 1)[0])
    [stored] = bed.dry_run_apply([example])
    assert stored["spec"] == example["spec"]


# --- the spec as the controller reads it ------------------------------------------------------------------------

def test_the_controller_reads_the_spec_with_its_defaults() -> None:
    spec, problems = read_spec(stack())
    assert problems == [] and spec is not None
    assert (spec.channel, spec.pin, spec.auto_upgrade, spec.repository, spec.insecure) == (
        "stable", None, False, DEFAULT_REPOSITORY, False)
    assert (spec.check_interval, spec.credentials, spec.keys, spec.values, spec.overrides) == (
        6 * 3600, None, None, {}, {})
    full, _ = read_spec(stack(channel="beta", pin="2.0.0", autoUpgrade=True,
                              source={"upstream": "oci://up/stack", "repoURL": "oci://fork/stack", "insecure": True,
                                      "checkInterval": "1h30m", "secretRef": {"name": "creds"}},
                              verify={"provider": "cosign", "secretRef": {"name": "keys"}},
                              values={"tier": "team"}, overrides={"backstage": {"enabled": False}}))
    assert full is not None
    assert (full.repository, full.check_interval, full.credentials, full.keys) == ("oci://fork/stack", 5400,
                                                                                   "creds", "keys")
    upstream, _ = read_spec(stack(source={"upstream": "oci://up/stack"}))
    assert upstream is not None and upstream.repository == "oci://up/stack"


def test_a_spec_the_controller_cannot_act_on_names_each_field() -> None:
    spec, problems = read_spec(stack(pin="two", channel="nightly", source={"checkInterval": "6 hours"},
                                     verify={"provider": "notation", "secretRef": {"name": "k"}}))
    assert spec is None
    assert [field for field, _ in problems] == ["spec.pin", "spec.channel", "spec.source.checkInterval",
                                                "spec.verify.provider"]
    _, elsewhere = read_spec({**stack(), "metadata": {"name": NAME, "namespace": "default"}})
    assert elsewhere[0][0] == "metadata.namespace"


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30), ("15m", 900), ("6h", 21600), ("1h30m", 5400),
                                               ("0s", 10), ("5s", 10), (None, 21600)])
def test_check_interval(text: str | None, seconds: float) -> None:
    assert check_interval(text) == seconds


@pytest.mark.parametrize("text", ["", "6", "h", "1d", "1h 30m", "-5s"])
def test_a_check_interval_that_is_not_a_duration_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        check_interval(text)


def test_version_history_is_a_ring_of_ten_newest_first() -> None:
    history: list[dict[str, Any]] = []
    for n in range(12):
        history = push_history(history, {"version": f"1.0.{n}", "digest": f"sha256:{n}", "appliedAt": "t"})
    assert [h["version"] for h in history] == [f"1.0.{n}" for n in range(11, 1, -1)]
    assert push_history(history, {"version": "1.0.11", "digest": "sha256:11", "appliedAt": "later"}) == history
    moved = push_history(history, {"version": "1.0.11", "digest": "sha256:other", "appliedAt": "t"})
    assert len(moved) == VERSION_HISTORY_LIMIT and moved[0]["digest"] == "sha256:other"
