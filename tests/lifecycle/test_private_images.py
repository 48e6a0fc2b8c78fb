"""lifecycle.private_images alone (pure; tests/reconciler/test_sourcecredential_cluster.py proves it through the
operator): a container whose image lies under a host a SourceCredential covers pulls every time, in any namespace."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lifecycle.private_images import private_hosts, pull_always, pull_secrets_awaited, with_pull_secrets


def deployment(*images: str) -> dict[str, Any]:
    return {"kind": "Deployment", "metadata": {"name": "demo"},
            "spec": {"template": {"spec": {"containers": [{"name": f"c{i}", "image": image}
                                                          for i, image in enumerate(images)]}}}}


def test_private_images_pull_every_time_public_ones_as_before() -> None:
    credentials = [{"metadata": {"name": "scoped", "namespace": "apprafter-system"},
                    "spec": {"registry": {"hosts": ["registry.example/team/"], "namespaces": ["team-a"],
                                          "backend": {"sealedSecretRef": {"name": "x"}}}}}]
    hosts = private_hosts(credentials)
    assert hosts == ("registry.example/team",)
    given = [deployment("registry.example/team/app:1", "docker.io/library/nginx:1"), {"kind": "Service"}]
    [changed, service] = pull_always(given, hosts)
    policies = [c.get("imagePullPolicy") for c in changed["spec"]["template"]["spec"]["containers"]]
    assert policies == ["Always", None] and service == {"kind": "Service"}
    assert "imagePullPolicy" not in given[0]["spec"]["template"]["spec"]["containers"][0]  # a copy was changed
    assert pull_always([deployment("registry.example/teamx/app:1")], hosts)[0] == deployment(
        "registry.example/teamx/app:1")  # path component by component
    assert pull_always(given, ()) == given


def credential(name: str, hosts: list[str], namespaces: list[str] | None = None,
               registry_valid: tuple[str, str] | None = None, present: bool = True) -> dict[str, Any]:
    registry: dict[str, Any] = {"hosts": hosts, "backend": {"sealedSecretRef": {"name": name}}}
    if namespaces is not None:
        registry["namespaces"] = namespaces
    conditions = [{"type": "Present", "status": "True" if present else "False",
                   "reason": "Found" if present else "NotFound", "message": ""}]
    if registry_valid:
        conditions.append({"type": "Valid", "status": registry_valid[0], "reason": registry_valid[1], "message": ""})
    return {"metadata": {"name": name, "namespace": "apprafter-system"}, "spec": {"registry": registry},
            "status": {"registry": {"conditions": conditions}}}


def app_deployment(namespace: str, image: str) -> dict[str, Any]:
    return {"kind": "Deployment", "metadata": {"name": "demo", "namespace": namespace},
            "spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}}}


def test_the_deployment_lists_the_pull_secrets_serving_its_image_and_waits_for_those_still_to_come() -> None:
    credentials = [credential("team", ["registry.example/team/"], ["shop"]),
                   credential("wide", ["registry.example/"]),
                   credential("other", ["registry.example/team/"], ["elsewhere"])]
    given = [app_deployment("shop", "registry.example/team/app:1"), {"kind": "Service", "metadata": {"name": "s"}}]
    [listed, service] = with_pull_secrets(given, credentials)
    assert listed["spec"]["template"]["spec"]["imagePullSecrets"] == [
        {"name": "apprafter-pull-team"}, {"name": "apprafter-pull-wide"}]  # not another namespace's credential
    assert "imagePullSecrets" not in given[0]["spec"]["template"]["spec"] and service == given[1]
    assert with_pull_secrets([app_deployment("shop", "docker.io/library/nginx:1")], credentials) == [
        app_deployment("shop", "docker.io/library/nginx:1")]  # a public image: nothing listed
    # those not derived yet are awaited; present ones are not
    def derived(*names: str) -> Callable[[str], bool]:
        return set(names).__contains__

    assert pull_secrets_awaited([listed], credentials, derived()) == ["apprafter-pull-team", "apprafter-pull-wide"]
    assert pull_secrets_awaited([listed], credentials, derived("apprafter-pull-wide")) == ["apprafter-pull-team"]
    assert pull_secrets_awaited([listed], credentials, derived("apprafter-pull-team", "apprafter-pull-wide")) == []


def test_a_credential_that_will_not_derive_is_not_waited_for() -> None:
    """Its material missing or its login refused: the status says so, the Application's condition names it, and
    the pods' pull failure is what the app shows (a wait would hide it)."""
    missing = credential("missing", ["registry.example/team/"], present=False)
    refused = credential("refused", ["registry.example/team/"], registry_valid=("False", "Invalid"))
    unchecked = credential("unchecked", ["registry.example/team/"], registry_valid=("Unknown", "Unverified"))
    listed = with_pull_secrets([app_deployment("shop", "registry.example/team/app:1")], [missing, refused, unchecked])
    awaited = pull_secrets_awaited(listed, [missing, refused, unchecked], lambda name: False)
    assert awaited == ["apprafter-pull-unchecked"]


def test_the_apps_apply_never_takes_a_pull_secret_away_before_the_credential_controller_judged_it() -> None:
    """A narrowing or a deletion may wait for a plan, and the Deployment's list entry the app's apply alone owns
    goes when it drops it: while the credential controller has not judged the change (its status has not observed
    the generation) or still holds the deletion (its finalizer), the app lists what the credential last applied."""
    applied = credential("team", ["registry.example/other/"])
    applied["metadata"]["generation"] = 2
    applied["status"].update({"observedGeneration": 1, "registry": {**applied["status"]["registry"],
                                                                    "hosts": ["registry.example/team"]}})
    shop = [app_deployment("shop", "registry.example/team/app:1")]

    def listed(obj: dict[str, Any]) -> list[Any]:
        return with_pull_secrets(shop, [obj])[0]["spec"]["template"]["spec"].get("imagePullSecrets") or []

    assert listed(applied) == [{"name": "apprafter-pull-team"}]  # narrowed, not judged yet: as applied
    judged = {**applied, "status": {**applied["status"], "observedGeneration": 2}}
    assert listed(judged) == []  # judged and carried out (no plan held it): the spec's coverage
    held = {**judged, "status": {**judged["status"], "migrationPlan": "team-credential-0123456789"}}
    assert listed(held) == [{"name": "apprafter-pull-team"}]  # held for its plan: as applied
    deleting = {**judged, "spec": {"registry": {**judged["spec"]["registry"], "hosts": ["registry.example/team/"]}},
                "metadata": {**judged["metadata"], "deletionTimestamp": "2026-12-07T00:00:00Z",
                             "finalizers": ["apprafter.io/derived-secrets"]}}
    assert listed(deleting) == [{"name": "apprafter-pull-team"}]  # its finalizer holds what it derived
    assert pull_secrets_awaited(with_pull_secrets(shop, [deleting]), [deleting], lambda name: False) == []
    gone = {**deleting, "metadata": {**deleting["metadata"], "finalizers": []}}
    assert listed(gone) == []
