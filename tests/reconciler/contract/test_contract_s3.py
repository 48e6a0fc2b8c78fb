"""The backend contract (suite.py) for versitygw: a gateway the administrator runs (the real versitygw, built by the
set-up, on 127.0.0.1) that each claim reaches as a user of its own, owning one bucket and reaching no other."""

from __future__ import annotations

import os
import secrets
import signal
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_auth import AWS4Auth

from tests.reconciler.contract.suite import *  # noqa: F403 - the contract's tests, run here for versitygw
from tests.reconciler.contract.suite import Handle, marked
from tests.reconciler.helpers import API, add_provider, edit
from tests.reconciler.operator_proc import FAST, Fixture, Operator, operator_fixture
from tests.testbed.kube import KubeTestBed
from tests.testbed.s3 import REGION, S3Server, start_s3

pytestmark = pytest.mark.testbed

RUN = uuid.uuid4().hex[:8]
ADMIN = ("ct-admin", secrets.token_urlsafe(30))
SERVICES, PROVIDER = f"ct-s3-svc-{RUN}", f"ct-s3-{RUN}"


class S3Contract:
    need = "s3"
    kept_apart = True
    fields = frozenset({"url", "host", "port", "user", "password", "bucket"})

    def __init__(self, server: S3Server, workdir: Path) -> None:
        self.server, self.workdir = server, workdir

    def needs(self) -> dict[str, Any]:
        return edit(needs={"s3": {"selector": {"bed": RUN}}}, env={"S3_URL": {"claim": "s3/url"}},
                    expose={"port": 8080})

    def as_user(self, claim: Handle) -> httpx.Client:
        secret = claim["secret"]
        return httpx.Client(base_url=secret["url"], auth=AWS4Auth(secret["user"], secret["password"], REGION, "s3"),
                            timeout=10, trust_env=False)

    def write(self, claim: Handle, marker: str) -> None:
        with self.as_user(claim) as c:
            c.put(f"/{claim['secret']['bucket']}/marker", content=marker.encode()).raise_for_status()

    def read(self, claim: Handle) -> str | None:
        with self.as_user(claim) as c:
            resp = c.get(f"/{claim['secret']['bucket']}/marker")
        return resp.text if resp.status_code == 200 else None

    def denied(self, claim: Handle, other: Handle) -> None:
        theirs = other["secret"]["bucket"]
        with self.as_user(claim) as c:
            for resp in (c.get(f"/{theirs}/marker"), c.put(f"/{theirs}/x", content=b"x"),
                         c.get(f"/{theirs}", params={"list-type": "2"}), c.delete(f"/{theirs}/marker"),
                         c.put(f"/{claim['secret']['bucket']}-more")):  # nor a bucket of its own making
                assert resp.status_code == 403, (resp.request.method, resp.request.url.path, resp.status_code)
            listed = c.get("/").text
        assert claim["secret"]["bucket"] in listed and theirs not in listed

    def dropped(self, claim: Handle) -> bool:
        with httpx.Client(base_url=self.server.endpoint, auth=AWS4Auth(*ADMIN, REGION, "s3"), timeout=10,
                          trust_env=False) as admin:
            bucket = admin.head(f"/{claim['secret']['bucket']}").status_code
        with self.as_user(claim) as c:
            user = c.get("/").status_code
        assert {bucket, user} <= {200, 403, 404}, (bucket, user)
        return (bucket, user) == (404, 403)

    def settled(self) -> AbstractContextManager[None]:
        return nullcontext()


@pytest.fixture(scope="module")
def s3_platform(bed: KubeTestBed, tmp_path_factory: pytest.TempPathFactory) -> str:
    bed.ensure_namespace(SERVICES)
    path = Path(tmp_path_factory.mktemp("platform")) / "platform.yaml"
    path.write_text(f"providerNamespaces: {{s3: {SERVICES}}}\n")
    return str(path)


@pytest.fixture(scope="module")
def contract(bed: KubeTestBed, s3_platform: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Contract]:
    workdir = Path(tmp_path_factory.mktemp("s3"))
    server = start_s3(workdir, *ADMIN)
    bed.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{PROVIDER}-admin", "namespace": SERVICES},
               "stringData": {"accessKey": ADMIN[0], "secretKey": ADMIN[1]}}, field_manager="admin")
    add_provider(bed, PROVIDER, "s3", "versitygw", {"address": f"127.0.0.1:{server.port}"}, labels={"bed": RUN})
    made = S3Contract(server, workdir)
    yield made
    bed.delete(API, "ServiceProvider", PROVIDER)
    made.server.stop()


operator = operator_fixture("--no-leader-elect", *FAST, "--platform", Fixture("s3_platform"))


def test_every_answered_put_and_account_outlive_the_gateway_killed_and_started_again(
        bed: KubeTestBed, operator: Operator, contract: S3Contract) -> None:
    """The gateway killed (SIGKILL: no shutdown, as a pod's container killed) and started again on its directories
    and port, as the integrated gateway's pod comes back on its volume (buckets and IAM under it,
    lifecycle.backends.s3): with no one acting (the operator stopped: nothing makes the account again), the app's
    same Secret reads every object whose PUT was answered, and its account still reaches no other bucket."""
    _, claim, marker = marked(bed, contract)
    _, other, _ = marked(bed, contract)
    with contract.as_user(claim) as c:  # answered just before the kill
        c.put(f"/{claim['secret']['bucket']}/last", content=marker.encode()[::-1]).raise_for_status()
    operator.terminate()
    try:
        server = contract.server
        os.killpg(server.process.popen.pid, signal.SIGKILL)
        server.stop()
        contract.server = start_s3(contract.workdir, *ADMIN, port=server.port)
        assert contract.read(claim) == marker
        with contract.as_user(claim) as c:
            assert c.get(f"/{claim['secret']['bucket']}/last").content == marker.encode()[::-1]
        contract.denied(claim, other)
    finally:
        operator.start()
