"""The versitygw image as `make images` builds it (deploy/images/versitygw.Dockerfile), run the way the s3 backend's
integrated gateway runs it: the container of lifecycle.backends.s3's Deployment (its command, its root account
from the environment) as uid 999 on a read-only root, all capabilities dropped, its data on a volume. A claim goes
through the core and its client (reconciler/backends/s3.py) as the operator would carry it out: its user and bucket
made, written to, kept across a restart of the gateway, then dropped. What the node tier adds (the Deployment under
kubelet, its Service) is not run here."""

from __future__ import annotations

import asyncio
import os
import secrets
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from httpx_auth import AWS4Auth

from lifecycle.backends import instance as server
from lifecycle.backends.common import b64
from lifecycle.backends.contract import Gone, Ready, Seen, Site
from lifecycle.backends.s3 import CORE, PORT, Config, instance_objects
from reconciler.backends.s3 import S3Client
from tests.images.podman import Image, inspect, make_images, podman
from tests.testbed.procs import free_port, wait_for
from tests.testbed.s3 import REGION
from toolchain.pins import pins

pytestmark = pytest.mark.images

ROOT = ("root", secrets.token_urlsafe(32))
CLAIM = {"metadata": {"namespace": "shop", "name": "media.v2-s3", "uid": "u"}, "spec": {"type": "s3"}}


@pytest.fixture(scope="module")
def image() -> Image:
    """The versitygw image alone (`tools/images.sh build versitygw`; kept when its inputs are unchanged)."""
    return make_images(names=("versitygw",))["versitygw"]


def deployed_container(image: Image) -> dict[str, Any]:
    """The container of the core's Deployment for an integrated provider running `image`."""
    config = CORE.configure({"metadata": {"name": "s3-integrated"}, "spec": {"type": "s3", "backend": "versitygw"}},
                            Site("apprafter-s3", image.ref))
    assert isinstance(config, Config)
    deployment = next(o for o in instance_objects(config) if o["kind"] == "Deployment")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return dict(container)


class Gateway:
    """The image running as its Deployment would, on the host's network (tools/containers.conf), at `port`."""

    def __init__(self, image: Image, port: int) -> None:
        self.name = f"apprafter-test-versitygw-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.volume, self.port = self.name, port
        container = deployed_container(image)
        assert container["env"] == [
            {"name": "ROOT_ACCESS_KEY_ID", "valueFrom": {"secretKeyRef": {"name": "s3-integrated-admin",
                                                                          "key": "accessKey"}}},
            {"name": "ROOT_SECRET_ACCESS_KEY", "valueFrom": {"secretKeyRef": {"name": "s3-integrated-admin",
                                                                              "key": "secretKey"}}}]
        [script] = container["args"]
        assert f"--port :{PORT} " in script
        # no tmpfs anywhere (the Deployment mounts none: only /data is writable); the host's network, so the
        # Deployment's port moved to a free one of this worker's; --timeout bounds a container a killed pytest leaves
        self.argv = ["run", "-d", "--timeout", "1800", "--name", self.name, "--read-only", "--read-only-tmpfs=false",
                     "--user", "999:999", "--cap-drop", "ALL",
                     "--security-opt", "no-new-privileges", "-v", f"{self.volume}:/data:U",
                     "-e", f"ROOT_ACCESS_KEY_ID={ROOT[0]}", "-e", f"ROOT_SECRET_ACCESS_KEY={ROOT[1]}",
                     "--entrypoint", container["command"][0], image.ref, *container["command"][1:],
                     script.replace(f"--port :{PORT} ", f"--port 127.0.0.1:{port} ")]

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        podman(*self.argv)
        auth = AWS4Auth(*ROOT, REGION, "s3")

        def answered() -> bool | None:
            try:
                return httpx.get(self.endpoint + "/", auth=auth, timeout=2, trust_env=False).status_code == 200 or None
            except httpx.TransportError:
                return None
        wait_for("the versitygw image to answer a signed ListBuckets", answered, 60)

    def stop(self) -> None:
        podman("rm", "-f", "-t", "5", self.name, check=False)


@pytest.fixture()
def gateway(image: Image) -> Iterator[Gateway]:
    gw = Gateway(image, free_port())
    try:
        gw.start()
        yield gw
    finally:
        gw.stop()
        podman("volume", "rm", "-f", gw.volume, check=False)


def test_the_image_is_the_pinned_versitygw_as_uid_999(image: Image) -> None:
    config = inspect(image.ref)["Config"]
    assert (config["Entrypoint"], config["User"]) == (["/usr/local/bin/versitygw"], "999")
    version = podman("run", "--rm", "--read-only", image.ref, "--version").stdout.splitlines()
    assert version[0].split(":", 1)[1].strip() == pins()["VERSITYGW_VERSION"]


def test_a_claim_on_the_image_run_as_its_deployment_gets_its_bucket_keeps_it_across_a_restart_and_is_dropped(
        gateway: Gateway) -> None:
    config = CORE.configure({"metadata": {"name": "s3-own"}, "spec": {"type": "s3", "backend": "versitygw", "config": {
        "address": f"127.0.0.1:{gateway.port}"}}}, Site("apprafter-s3"))
    assert isinstance(config, Config)
    admin = server.reads(config.instance)[0]
    seen = Seen({admin: {"data": {"accessKey": b64(ROOT[0]), "secretKey": b64(ROOT[1])}}}, None,
                secrets.token_urlsafe(32), 0)
    client = S3Client()

    async def carry_out(calls: tuple[Any, ...]) -> None:
        for call in calls:
            await client.call(call)

    step = CORE.provision(CLAIM, config, seen)
    assert isinstance(step.then, Ready) and step.then.secret is not None
    asyncio.run(carry_out(step.calls))
    secret = step.then.secret
    assert "." not in secret["bucket"]
    with httpx.Client(base_url=secret["url"], auth=AWS4Auth(secret["user"], secret["password"], REGION, "s3"),
                      timeout=10, trust_env=False) as user:
        user.put(f"/{secret['bucket']}/marker", content=b"kept" * 50_000).raise_for_status()
        gateway.stop()  # its data and its IAM are on the volume: a new container finds both
        gateway.start()
        assert user.get(f"/{secret['bucket']}/marker").content == b"kept" * 50_000
        again = CORE.provision(CLAIM, config, seen._replace(connection=secret, fresh="never-used"))
        assert isinstance(again.then, Ready) and again.then.secret == secret
        asyncio.run(carry_out(again.calls))  # the same user and bucket again: nothing changes
        drop = CORE.drop(CLAIM, config, seen)
        assert isinstance(drop.then, Gone)
        asyncio.run(carry_out(drop.calls))
        assert user.get(f"/{secret['bucket']}/marker").status_code == 403  # the user is gone at once
    with httpx.Client(base_url=gateway.endpoint, auth=AWS4Auth(*ROOT, REGION, "s3"), timeout=10,
                      trust_env=False) as root:
        assert root.head(f"/{secret['bucket']}").status_code == 404  # and so is the bucket
