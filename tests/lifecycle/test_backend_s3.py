"""The s3 backend's core (lifecycle/backends/s3.py): the gateway a provider's config gives (integrated: its volume,
Deployment and Service, its root account made once; or one the administrator runs), a claim's bucket and user names
(valid S3 bucket names, distinct for every claim), the calls in order (user, bucket, try), the secret kept from the
claim's own Secret, nothing secret in a message or a call's repr, and the drop."""

from __future__ import annotations

import itertools
import re
from typing import Any

from controller_runtime.outcomes import Done, Requeue
from lifecycle.backends import instance as server
from lifecycle.backends.common import b64
from lifecycle.backends.contract import Again, Apply, CreateOnce, Gone, Ready, Seen, Site, Waiting
from lifecycle.backends.s3 import CORE, PORT, Config, DropTenant, EnsureBucket, EnsureUser, TryUser, bucket_of
from renderer.manifests.network import NEED_PORTS

NS = "apprafter-s3"
IMAGE = "ghcr.io/apprafter/versitygw:1.8.0"
FRESH = "a-fresh-secret"
BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")


def provider(**config: Any) -> dict[str, Any]:
    return {"metadata": {"name": "s3-integrated"}, "spec": {"type": "s3", "backend": "versitygw",
                                                            **({"config": config} if config else {})}}


def claim(namespace: str = "shop", name: str = "media-s3") -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name, "uid": "u"}, "spec": {"type": "s3"}}


def config(**given: Any) -> Config:
    found = CORE.configure(provider(**given), Site(NS, IMAGE))
    assert isinstance(found, Config), found
    return found


def admin() -> dict[str, Any]:
    return {"data": {"accessKey": b64("root"), "secretKey": b64("the-root-secret")}}


def seen(cfg: Config, *objects: Any, connection: dict[str, str] | None = None) -> Seen:
    return Seen(dict(zip(server.reads(cfg.instance), objects, strict=False)), connection, FRESH, 0)


AVAILABLE, SERVICE = {"status": {"availableReplicas": 1}}, {"spec": {"clusterIP": "10.0.0.9"}}
SLICES = [{"endpoints": [{"conditions": {"ready": True}}]}]


def test_bucket_names_are_valid_distinct_and_stable() -> None:
    namespaces = ["a", "a-b", "shop", "xn--", "sthree-x", "n" * 63]
    names = ["b", "b-c", "b.c", "media-s3", "media.v2-s3", "c", "q" * 200, "q" * 40 + ".x" * 100]
    buckets = [bucket_of(claim(n, c)) for n, c in itertools.product(namespaces, names)]
    assert len(set(buckets)) == len(buckets)
    for bucket in buckets:
        assert BUCKET_NAME.match(bucket) and "--" not in bucket[:4] and not bucket.startswith(("xn--", "sthree-"))
        assert "." not in bucket  # a claim's name may have dots; a bucket of ours has none
    assert bucket_of(claim()) == bucket_of(claim())  # the same app and need: the same bucket
    assert bucket_of(claim()).startswith("shop-media-s3-")


def test_an_integrated_gateway_gets_its_root_account_once_then_its_volume_deployment_and_service() -> None:
    cfg = config()
    first = CORE.provision(claim(), cfg, seen(cfg, None))
    assert isinstance(first.then, Again)
    [made] = first.writes
    assert isinstance(made, CreateOnce) and made.obj["data"] == {"accessKey": b64("root"), "secretKey": b64(FRESH)}
    waits = CORE.provision(claim(), cfg, seen(cfg, admin(), None, None, []))
    assert isinstance(waits.then, Waiting) and waits.then.reason == "InstanceNotReady"
    assert isinstance(waits.then.retry, Requeue) and not waits.calls
    pvc, deployment, service = (w.obj for w in waits.writes if isinstance(w, Apply))
    assert (pvc["kind"], pvc["spec"]["resources"]["requests"]["storage"]) == ("PersistentVolumeClaim", "1Gi")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == IMAGE and "--iam-cache-disable" in container["args"][0]
    assert {e["name"] for e in container["env"]} == {"ROOT_ACCESS_KEY_ID", "ROOT_SECRET_ACCESS_KEY"}
    assert "root" not in container["args"][0] and FRESH not in str(deployment)  # the secret stays in the Secret
    assert container["resources"]["requests"] == container["resources"]["limits"]
    assert service["spec"]["ports"][0]["port"] == 7070
    ready = CORE.provision(claim(), cfg, seen(cfg, admin(), AVAILABLE, SERVICE, SLICES))
    assert isinstance(ready.then, Ready) and [type(c) for c in ready.calls] == [EnsureUser, EnsureBucket, TryUser]
    assert ready.calls[0].endpoint == "http://10.0.0.9:7070"  # the cluster IP; the Secret keeps the DNS name
    assert ready.then.secret is not None and ready.then.secret["host"] == "s3-integrated.apprafter-s3.svc"


def test_a_gateway_the_administrator_runs_needs_its_admin_secret_and_no_image() -> None:
    own = CORE.configure(provider(address="127.0.0.1:7070"), Site(NS, None))
    assert isinstance(own, Config) and not own.instance.integrated
    waits = CORE.provision(claim(), own, seen(own, None))
    assert isinstance(waits.then, Waiting) and waits.then.reason == "AdminSecretMissing"
    assert isinstance(waits.then.retry, Done) and not waits.writes
    assert CORE.configure(provider(), Site(NS, None)) == [
        "the operator runs no versitygw here (no image for it: --backend-image versitygw=REF): set "
        "spec.config.address"]


def test_a_claim_gets_its_bucket_and_user_and_keeps_its_secret() -> None:
    own = CORE.configure(provider(address="127.0.0.1:7070"), Site(NS, None))
    assert isinstance(own, Config)
    bucket = bucket_of(claim())
    step = CORE.provision(claim(), own, seen(own, admin()))
    assert isinstance(step.then, Ready) and not step.writes
    assert step.then.secret == {"url": "http://127.0.0.1:7070", "host": "127.0.0.1", "port": "7070", "user": bucket,
                                "password": FRESH, "bucket": bucket}
    assert "password" not in step.then.connection and FRESH not in str(step.then.connection)
    user, made, tried = step.calls
    assert isinstance(user, EnsureUser) and (user.access, user.secret) == (bucket, FRESH)
    assert isinstance(made, EnsureBucket) and (made.bucket, made.owner) == (bucket, bucket)
    assert isinstance(tried, TryUser) and tried.bucket == bucket
    shown = repr(step.calls) + step.then.message
    assert FRESH not in shown and "the-root-secret" not in shown
    kept = CORE.provision(claim(), own, seen(own, admin(), connection={"user": bucket, "password": "kept"}))
    assert isinstance(kept.then, Ready) and kept.then.secret is not None and kept.then.secret["password"] == "kept"
    other = CORE.provision(claim(), own, seen(own, admin(), connection={"user": "someone", "password": "x"}))
    assert isinstance(other.then, Ready) and other.then.secret is not None and other.then.secret["password"] == FRESH


def test_the_drop_removes_the_user_then_the_bucket_as_the_admin() -> None:
    own = CORE.configure(provider(address="127.0.0.1:7070"), Site(NS, None))
    assert isinstance(own, Config)
    step = CORE.drop(claim(), own, seen(own, admin()))
    bucket = bucket_of(claim())
    assert isinstance(step.then, Gone)
    assert step.calls == (DropTenant("http://127.0.0.1:7070", "root", "the-root-secret", bucket, bucket),)
    assert not CORE.drop(claim(), own, seen(own, None)).calls  # no admin: it waits


def test_an_integrated_gateway_is_dialled_only_once_its_service_has_a_ready_endpoint() -> None:
    cfg = config()
    for service, slices in ((None, []), (SERVICE, []), (SERVICE, [{"endpoints": [{"conditions": {"ready": False}}]}])):
        step = CORE.provision(claim(), cfg, seen(cfg, admin(), AVAILABLE, service, slices))
        assert isinstance(step.then, Waiting) and step.then.reason == "InstanceNotReady"
        assert isinstance(step.then.retry, Requeue) and not step.calls and len(step.writes) == 3
        dropping = CORE.drop(claim(), cfg, seen(cfg, admin(), AVAILABLE, service, slices))
        assert isinstance(dropping.then, Waiting) and not dropping.calls and not dropping.writes


def test_no_secret_in_any_message_or_call() -> None:
    cfg, own = config(), CORE.configure(provider(address="[fd00::9]:7070"), Site(NS, None))
    assert isinstance(own, Config)
    kept = {"user": bucket_of(claim()), "password": "the-kept-secret"}
    steps = [CORE.provision(claim(), cfg, seen(cfg, None)),
             *(f(claim(), c, seen(c, admin(), *rest, connection=kept))
               for f in (CORE.provision, CORE.drop)
               for c, rest in ((cfg, (None, None, [])), (cfg, (AVAILABLE, SERVICE, SLICES)), (own, ())))]
    for step in steps:
        said = step.then.why if isinstance(step.then, Again) else getattr(step.then, "message", "")
        shown = repr(step.calls) + said + repr(step.then.connection if isinstance(step.then, Ready) else {})
        for secret in (FRESH, "the-root-secret", "the-kept-secret"):
            assert secret not in shown
    ready = CORE.provision(claim(), own, seen(own, admin()))
    assert isinstance(ready.then, Ready) and ready.then.secret is not None
    assert ready.then.secret["url"] == "http://[fd00::9]:7070" and ready.then.secret["host"] == "fd00::9"
    assert ready.calls[0].endpoint == "http://[fd00::9]:7070"


def test_the_gateways_volume_neither_shrinks_nor_changes_class() -> None:
    def provider_of(**storage: str) -> dict[str, Any]:
        return provider(**({"storage": storage} if storage else {}))

    assert CORE.admit(None, provider_of(size="1Mi")) == []  # a new provider: the schema's alone
    assert CORE.admit(provider_of(), provider_of(size="2Gi")) == []  # grown: the volume is expanded where it can be
    assert CORE.admit(provider_of(size="2Gi"), provider_of(size="2048Mi")) == []
    [(field, problem)] = CORE.admit(provider_of(), provider_of(size="512Mi"))  # the default is 1Gi
    assert field == "spec.config.storage.size" and problem.startswith("512Mi is smaller than 1Gi")
    [(field, _)] = CORE.admit(provider_of(), provider_of(storageClassName="fast"))
    assert field == "spec.config.storage.storageClassName"
    assert len(CORE.admit(provider_of(size="2Gi", storageClassName="a"), provider_of(storageClassName="b"))) == 2
    # a gateway the administrator ran has no volume of ours; moving the gateway is not refused (see admit)
    assert CORE.admit(provider(address="10.0.0.1:7070"), provider_of(size="1Mi", storageClassName="x")) == []
    assert CORE.admit(provider(), provider(server="other", namespace="elsewhere")) == []


def test_an_apps_egress_to_the_s3_namespace_opens_the_gateways_port() -> None:
    assert NEED_PORTS["s3"] == (PORT,) and config().instance.port == PORT
