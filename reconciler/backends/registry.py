"""The backends' clients and default images, by ServiceProvider `spec.backend` (the cores: lifecycle.backends.registry).

A backend without a client makes only Kubernetes writes (cloudnative-pg: CloudNativePG does the rest; storage-class).
A default image is the release's, published beside the operator's (tools/images.sh publish).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from toolchain.pins import pins

__all__ = ["CLIENTS", "IMAGES", "REGISTRY", "Client", "client_for", "default_image"]

REGISTRY = "ghcr.io/apprafter"  # where the release publishes its images


class Client(Protocol):
    """A backend's I/O: carries out one of its core's calls, or raises reconciler.backend_failure.BackendFailure."""

    async def call(self, call: object) -> None: ...


def _redis() -> Client:
    from reconciler.backends.redis import RedisClient

    return RedisClient()


def _s3() -> Client:
    from reconciler.backends.s3 import S3Client

    return S3Client()


# imported when the operator starts, not for the command line's --help
CLIENTS: Mapping[str, Callable[[], Client]] = {"redis-server": _redis, "versitygw": _s3}


def _release() -> str:
    from importlib.metadata import version

    return version("apprafter-render")


IMAGES: Mapping[str, Callable[[], str]] = {
    # Debian's redis-server (deploy/images/redis.Dockerfile)
    "redis-server": lambda: f"{REGISTRY}/redis:{_release()}",
    # tagged with its major version, the one CloudNativePG reads from the tag
    "cloudnative-pg": lambda: f"{REGISTRY}/postgresql:{pins()['POSTGRES_MAJOR']}",
    # the pinned versitygw the set-up builds from its Go module (deploy/images/versitygw.Dockerfile)
    "versitygw": lambda: f"{REGISTRY}/versitygw:{pins()['VERSITYGW_VERSION'].lstrip('v')}",
    # a part of a backend, `<backend>.<part>`: Debian's PgBouncer for the Cluster's Pooler
    # (deploy/images/pgbouncer.Dockerfile)
    "cloudnative-pg.pgbouncer": lambda: f"{REGISTRY}/pgbouncer:{_release()}",
}


def client_for(backend: str) -> Client | None:
    made = CLIENTS.get(backend)
    return made() if made else None


def default_image(backend: str) -> str | None:
    """The release's image of a backend's shared servers (None: the operator runs none for it)."""
    made = IMAGES.get(backend)
    return made() if made else None
