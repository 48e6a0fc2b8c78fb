"""Image updates through the operator (issue 43): an Application with `imagePolicy.resolve: "digest"` on a private
image in a real registry (distribution with token auth) gets the tag's digest applied, looked up with the pull
secret its SourceCredential derives; the tag pushed again with new content rolls the new digest out with an
ImageDigestMoved Event and status.images; the tag deleted keeps the running digest and the status says so.
lifecycle.image_digest's rules are tests/lifecycle/test_image_digest.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lifecycle.credentials.outputs import pull_secret_name
from lifecycle.image_digest import Resolved, TagGone, Unreachable
from platform_stack.docker_config import parse_docker_config
from platform_stack.registry.client import connect
from reconciler.image_digests import ask
from tests.reconciler.helpers import API, apply, condition, cr, edit, events, fresh_namespace, plans, wait_showing
from tests.reconciler.helpers import status as app_status
from tests.reconciler.operator_proc import Operator
from tests.testbed.distribution import AuthRegistry, delete_tag, distribution
from tests.testbed.kube import KubeTestBed
from tests.testbed.procs import free_port

pytestmark = pytest.mark.testbed


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthRegistry]:
    """The private registry: distribution behind a token service, as ghcr.io or Harbor answer."""
    with distribution(tmp_path_factory.mktemp("registry"), "token") as started:
        yield started


def push(registry: AuthRegistry, repository: str, tag: str, content: str, workdir: Path) -> str:
    """Push a one-layer artifact as the image's owner does (alice may push); the tag's digest now."""
    configs = [parse_docker_config((registry.docker_config(workdir / "docker") / "config.json").read_bytes(),
                                   "the pusher's config")]
    layer, config = workdir / f"layer-{content}", workdir / "config.json"
    layer.write_text(content)
    config.write_text("{}")
    client = connect(registry.url, True, configs, helpers=False)
    try:
        client.push_artifact(f"{registry.url}/{repository}:{tag}",
                             [f"{layer}:application/vnd.oci.image.layer.v1.tar"],
                             f"{config}:application/vnd.oci.image.config.v1+json", {})
        found = client.digest(repository, tag)
    finally:
        client.close()
    assert found is not None
    return found


def test_a_followed_tag_is_applied_by_digest_rolled_out_when_it_moves_and_kept_when_it_goes(
        bed: KubeTestBed, operator: Operator, registry: AuthRegistry, tmp_path: Path) -> None:
    records = operator.records_namespace
    first = push(registry, "team/shop", "stable", "one", tmp_path)
    bed.apply({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/basic-auth",
               "metadata": {"name": "shop-pull", "namespace": records},
               "stringData": {"username": registry.user, "password": registry.password}},
              field_manager="sealed-secrets-controller")
    bed.apply({"apiVersion": API, "kind": "SourceCredential", "metadata": {"name": "shop-pull", "namespace": records},
               "spec": {"registry": {"backend": {"sealedSecretRef": {"name": "shop-pull"}},
                                     "hosts": [f"{registry.url}/team/"]}}})
    namespace = fresh_namespace(bed, "digest")
    image = f"{registry.url}/team/shop:stable"
    apply(bed, cr(namespace, edit(edit(needs=None, env={"LOG_LEVEL": "info"}, expose={"port": 8080}), image=image,
                                  imagePolicy={"resolve": "digest", "interval": "1s"})))

    def deployed() -> str:
        deployment = bed.get("apps/v1", "Deployment", "demo", namespace) or {}
        containers = ((deployment.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []
        return str(containers[0]["image"]) if containers else ""

    def deployed_generation() -> bool:
        """The Deployment's controller (the bed's rollout stand-in) has rolled out its current template."""
        deployment = bed.get("apps/v1", "Deployment", "demo", namespace) or {}
        return (deployment.get("status") or {}).get("observedGeneration") == deployment["metadata"]["generation"]

    def shown() -> object:
        return {"deployed": deployed(), "status": app_status(bed, namespace)}

    def entry() -> dict[str, Any]:
        return ((app_status(bed, namespace).get("images") or [{}])[0])

    wait_showing("the tag applied as its digest", lambda: deployed() == f"{image}@{first}" or None, 30, shown)
    # made so: the pull secret was derived before the first Deployment, which lists it and was the registry's login
    # for the first look (else the tag ran first, then its digest: generation 2)
    made = bed.get("apps/v1", "Deployment", "demo", namespace)
    assert made is not None and made["metadata"]["generation"] == 1, shown()
    assert made["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": pull_secret_name("shop-pull")}]
    wait_showing("status.images with the digest", lambda: entry().get("digest") == first or None, 10, shown)
    assert entry()["image"] == image and entry()["container"] == "app"
    resolved = condition(app_status(bed, namespace), "ImageResolved")
    assert resolved is not None and (resolved["status"], resolved["reason"]) == ("True", "Resolved")
    assert app_status(bed, namespace)["lastAppliedSpec"]["image"] == image  # the gate's baseline keeps the tag

    # the tag moves in the registry: the new digest rolls out, an Event and the status say so
    second = push(registry, "team/shop", "stable", "two", tmp_path)
    assert second != first
    wait_showing("the new digest rolled out", lambda: deployed() == f"{image}@{second}" or None, 30, shown)
    moved = wait_showing("the ImageDigestMoved Event", lambda: events(bed, namespace, "ImageDigestMoved") or None,
                          10, shown)
    assert [e["note"] for e in moved] == [
        f"app: {image} moved in the registry: {first} -> {second}; rolling out {image}@{second}"]
    wait_showing("status.images at the new digest", lambda: entry().get("digest") == second or None, 10, shown)
    wait_showing("the rollout of the new digest Ready", lambda: (
        (st := app_status(bed, namespace)).get("phase") == "Ready"
        and (condition(st, "Ready") or {}).get("reason") == "Available" and deployed_generation()) or None, 10, shown)
    assert not events(bed, namespace, "DriftCorrected")  # the operator's own digest is no drift
    assert plans(bed, namespace) == []  # nor a change to approve

    # the tag deleted: the running digest stays, the status and a Warning Event say why
    delete_tag(registry, "team/shop", "stable")
    gone = wait_showing("the tag reported gone", lambda: ((c := condition(app_status(bed, namespace), "ImageResolved"))
                        and c["reason"] == "TagNotFound" and c) or None, 30, shown)
    kept = f"the tag is not in the registry any more (manifest unknown); keeping {second}, the digest running"
    assert gone["status"] == "False" and gone["message"] == f"app: {image}: {kept}"
    assert entry()["digest"] == second and entry()["message"] == kept
    assert deployed() == f"{image}@{second}"
    [warning] = wait_showing("the ImageTagGone Event", lambda: events(bed, namespace, "ImageTagGone") or None, 10,
                              shown)
    assert warning["type"] == "Warning"
    assert registry.password not in operator.log()


def test_a_registry_that_refuses_says_so_in_fixed_words(registry: AuthRegistry, tmp_path: Path) -> None:
    """The status names the registry's answer in a few fixed phrases (the tenant chose the host), never the CLI's
    remedies (`docker login`, `--plain-http`)."""
    image = f"{registry.url}/team/private:1"
    digest = push(registry, "team/private", "1", "private", tmp_path)
    login = parse_docker_config((registry.docker_config(tmp_path / "login") / "config.json").read_bytes(), "login")
    assert ask(image, [login]) == Resolved(digest)
    assert ask(f"{registry.url}/team/private:2", [login]) == TagGone()
    assert ask(image, []) == Unreachable(
        f"registry {registry.url} refused anonymous access (401 Unauthorized): the app has no pull secret for it (a "
        "SourceCredential whose registry hosts cover the image gives one)")
    wrong = parse_docker_config((registry.docker_config(tmp_path / "wrong", password="wrong") / "config.json")
                                .read_bytes(), "wrong")
    assert ask(image, [wrong]) == Unreachable(f"registry {registry.url} refused the pull secret's login (401 "
                                              "Unauthorized)")
    closed = f"127.0.0.1:{free_port()}"
    assert ask(f"{closed}/team/private:1", []) == Unreachable(
        f"registry {closed} did not answer usably (unreachable, too slow, a TLS or token failure, or a reply that is "
        "not a manifest: the operator's log says which)")
