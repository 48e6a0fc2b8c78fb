"""The s3 backend's core on versitygw: one shared gateway per provider, a bucket and a user per claim, confined to it.

The gateway is made lazily for its first claim (lifecycle.backends.instance: Guaranteed, its buckets and its IAM on a
volume of its own), or it is a versitygw the administrator runs (`spec.config.address`, its admin Secret beside it).
Each claim is one account of versitygw's `user` role (it sees and reaches only the buckets it owns, and creates none)
and one bucket owned by it, both named from the claim's namespace and name, so re-creating the same app and need
re-binds to the same bucket; its secret is kept while the claim's connection Secret holds it. The client
(reconciler/backends/s3.py) carries out EnsureUser, EnsureBucket, TryUser and DropTenant as the gateway's admin.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, NamedTuple

from controller_runtime.outcomes import Done
from lifecycle.backends import instance as server
from lifecycle.backends.common import ready, size_not_applied, volume_refusals
from lifecycle.backends.contract import Gone, Hidden, Seen, Site, Step, Waiting
from lifecycle.backends.instance import Instance
from lifecycle.backends.shared_server import SharedServer

__all__ = ["BACKEND", "CORE", "PORT", "Config", "DropTenant", "EnsureBucket", "EnsureUser", "TryUser", "Versitygw",
           "bucket_of"]

BACKEND, TYPE = "versitygw", "s3"
PORT = 7070  # versitygw's default port
ADMIN_USER = "root"  # the integrated gateway's root account (ROOT_ACCESS_KEY_ID), its secret generated once
DATA = server.DATA  # the gateway's volume: buckets under buckets/, its internal IAM (users.json) under iam/
HASH_CHARS = 20  # hex characters of SHA-256 in a bucket's name: 80 bits
RESERVED = ("xn--", "sthree-", "amzn-s3-demo-")  # prefixes S3 keeps for itself (AWS's bucket naming rules)


class EnsureUser(NamedTuple):
    """As the admin: account `access` of role user with `secret` (created, or its secret set again)."""

    endpoint: str
    admin_access: str
    admin_secret: Hidden
    access: str
    secret: Hidden


class EnsureBucket(NamedTuple):
    """As the admin: `bucket` exists, owned by `owner` (another owner's bucket of that name is refused)."""

    endpoint: str
    admin_access: str
    admin_secret: Hidden
    bucket: str
    owner: str


class TryUser(NamedTuple):
    """As the user: a listing of its bucket (its credentials work on it)."""

    endpoint: str
    access: str
    secret: Hidden
    bucket: str


class DropTenant(NamedTuple):
    """As the admin: the user first, then every object (version) of the bucket, then the bucket."""

    endpoint: str
    admin_access: str
    admin_secret: Hidden
    access: str
    bucket: str


class Config(NamedTuple):
    """A provider's gateway, its volume and the image the operator runs it from."""

    instance: Instance
    storage_size: str
    storage_class: str | None
    image: str | None


def bucket_of(claim: Mapping[str, Any]) -> str:
    """The claim's bucket (and its user's access key): `<namespace>-<claim>` with its dots made `-` (a claim's name
    may have some: a DNS subdomain), cut to fit, `-` and 20 hex characters of the SHA-256 of `<namespace>/<claim>`:
    at most 63 characters of a-z, 0-9 and `-`, no dot (a valid S3 bucket name that virtual-hosted addressing and TLS
    take). The hash makes two claims' names differ even where the plain parts would not (`a-b`/`c` and `a`/`b-c`,
    `a`/`b.c` and `a`/`b-c`); a name S3 reserves gets a `b` in front."""
    meta = claim.get("metadata") or {}
    namespace, name = str(meta["namespace"]), str(meta["name"])
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).hexdigest()[:HASH_CHARS]
    plain = f"{namespace}-{name}".replace(".", "-")[: 63 - HASH_CHARS - 2].rstrip("-")
    bucket = f"{plain}-{digest}"
    return f"b{bucket}" if bucket.startswith(RESERVED) else bucket


def instance_objects(config: Config, volume: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """The gateway's volume (`volume`: the live one, never asked smaller), Deployment and Service
    (lifecycle.backends.instance.on_volume): versitygw's posix backend on the volume, its root account from the
    admin Secret (environment, never argv), uid 999 on a read-only root."""
    instance = config.instance

    def root(key: str) -> dict[str, Any]:
        return {"valueFrom": {"secretKeyRef": {"name": instance.admin_secret, "key": key}}}
    container = {
        "name": "versitygw", "image": config.image, "command": ["/bin/sh", "-c"],
        # no IAM cache: a dropped claim's user is refused at once, not up to the cache's TTL (120 s) later
        "args": [f"mkdir -p {DATA}/iam {DATA}/buckets && exec versitygw --port :{PORT} --iam-dir {DATA}/iam "
                 f"--iam-cache-disable posix {DATA}/buckets"],
        "env": [{"name": "ROOT_ACCESS_KEY_ID", **root("accessKey")},
                {"name": "ROOT_SECRET_ACCESS_KEY", **root("secretKey")}],
        "ports": [{"name": "s3", "containerPort": PORT, "protocol": "TCP"}],
        "readinessProbe": {"tcpSocket": {"port": PORT}, "periodSeconds": 5},
        "livenessProbe": {"tcpSocket": {"port": PORT}, "periodSeconds": 10, "failureThreshold": 6},
    }
    return server.on_volume(instance, container, server.Storage(config.storage_size, config.storage_class), volume)


def _url(host: str, port: int) -> str:
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


class Versitygw(SharedServer):
    """The versitygw backend's core (lifecycle.backends.contract.Backend)."""

    backend, type, component, port = BACKEND, TYPE, "s3", PORT
    size_ignored = ("versitygw has no quota of a bucket's size or objects: every claim's bucket shares the gateway's "
                    "volume (spec.config.storage.size)")

    def configured(self, instance: Instance, config: Mapping[str, Any], site: Site) -> Config:
        storage = config["storage"]
        return Config(instance, str(storage["size"]), storage.get("storageClassName"), site.image)

    def beyond(self, claim: Mapping[str, Any], config: Config) -> str | None:
        """Named buckets: a claim gets one bucket, its own (`bucket_of`), so an app that counts on others is refused
        rather than handed a bucket it does not look in."""
        named = ((claim.get("spec") or {}).get("parameters") or {}).get("buckets")
        if not named:
            return None
        return (f"needs.s3.buckets {', '.join(map(str, named))}: versitygw gives a claim one bucket of its own, named "
                "by the platform (claim.s3.bucket), and makes no other: remove needs.s3.buckets and keep the objects "
                "under prefixes of claim.s3.bucket")

    def provision(self, claim: Mapping[str, Any], config: Config, seen: Seen) -> Step:
        refused = self.beyond(claim, config)
        if refused is not None:  # nothing made: its user and bucket would be half of what it asks
            return Step(Waiting("BucketsNotServed", refused, Done()))
        instance, found = config.instance, self.prepared(config, seen, provisioning=True)
        if isinstance(found, Step):
            return found
        admin, address, writes = found
        endpoint = _url(*address)
        bucket = bucket_of(claim)
        secret = server.kept_secret(seen, bucket)
        url = _url(instance.host, instance.port)
        fields = {"url": url, "host": instance.host, "port": str(instance.port), "user": bucket,
                  "password": str(secret), "bucket": bucket}
        connection = {"url": url, "host": instance.host, "port": instance.port, "user": bucket, "bucket": bucket}
        calls = (EnsureUser(endpoint, admin[0], admin[1], bucket, secret),
                 EnsureBucket(endpoint, admin[0], admin[1], bucket, bucket), TryUser(endpoint, bucket, secret, bucket))
        return Step(ready(f"bucket {bucket} and its user on {url}, reaching that bucket alone", connection, fields,
                          conditions=size_not_applied(claim, self.unsized(claim, config))), writes, calls)

    def drop(self, claim: Mapping[str, Any], config: Config, seen: Seen) -> Step:
        found = self.prepared(config, seen, provisioning=False)
        if isinstance(found, Step):
            return found
        (access, secret), address, _ = found
        bucket = bucket_of(claim)
        return Step(Gone(), calls=(DropTenant(_url(*address), access, secret, bucket, bucket),))

    def objects(self, config: Config, seen: Seen) -> list[dict[str, Any]]:
        return instance_objects(config, seen.get(server.reads(config.instance)[-1]))

    def admit(self, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> list[tuple[str, str]]:
        """What the gateway's volume cannot take. Not refused, in doubt: moving the gateway (`server`, `namespace`,
        `address`) while claims are bound to it, which leaves their buckets on the old one; the webhook sees the
        provider, not its claims."""
        if old is not None and ((old.get("spec") or {}).get("config") or {}).get("address"):
            return []  # a gateway the administrator ran: no volume of ours
        return volume_refusals(TYPE, BACKEND, old, new, "the gateway")

    def admin(self, config: Config, seen: Seen, *, make: bool) -> tuple[str, Hidden] | Step:
        """The gateway's admin (access key, secret): its root account, made once for an integrated gateway."""
        found = server.admin_of(config.instance, seen, {"accessKey": ADMIN_USER, "secretKey": seen.fresh}, make=make,
                                said="keys accessKey and secretKey: an admin account")
        return found if isinstance(found, Step) else (found["accessKey"], Hidden(found["secretKey"]))


CORE = Versitygw()
