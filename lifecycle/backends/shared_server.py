"""What the cores of a shared server the operator may run have in common (redis-server, versitygw): the config read
into an instance, the reads, and a provider's changes left to the schema."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from lifecycle.backends import instance as server
from lifecycle.backends.common import config_of
from lifecycle.backends.contract import Apply, Read, Seen, Site, Step

__all__ = ["Configured", "SharedServer"]

class Configured(Protocol):
    """A shared server's config as its core reads it: at least its instance."""

    @property
    def instance(self) -> server.Instance: ...


class SharedServer:
    """The base of a shared server's core; a core names its backend, type, component and port, and says its config
    (`configured`), its objects and its admin."""

    backend: str
    type: str
    component: str  # its objects' app.kubernetes.io/component
    port: int
    drop_needs_provider = True

    def configure(self, provider: Mapping[str, Any], site: Site) -> Any:
        """The provider's config with the schema's defaults, its instance (`server`, `namespace`, `address`), and the
        core's own reading of it; or the problems."""
        config = config_of(provider, self.type, self.backend)
        if isinstance(config, list):
            return config
        found = server.instance_of(provider, config, self.component, "server", site.namespace, self.port)
        if isinstance(found, list):
            return found
        if found.integrated and not site.image:
            return [f"the operator runs no {self.backend} here (no image for it: --backend-image {self.backend}=REF): "
                    "set spec.config.address"]
        return self.configured(found, config, site)

    def configured(self, instance: server.Instance, config: Mapping[str, Any], site: Site) -> Any:
        raise NotImplementedError

    def serving(self, claim: Mapping[str, Any], config: Any) -> Any:
        """The config of the instance that serves the claim: the provider's shared one (a core may give each claim
        its own)."""
        return config

    def reads(self, claim: Mapping[str, Any], config: Configured) -> Sequence[Read]:
        return server.reads(self.serving(claim, config).instance)

    # why a claim's size is not applied on the shared server (a core that sizes some claims says when)
    size_ignored = "a claim is an account on the one shared server, which gives no account a share of its own"

    def beyond(self, claim: Mapping[str, Any], config: Any) -> str | None:
        return None  # a claim is an account on the shared server: no size of its own

    def unsized(self, claim: Mapping[str, Any], config: Any) -> str | None:
        size = (claim.get("spec") or {}).get("size")
        return f"needs.{self.type}.size {size}: not applied: {self.size_ignored}" if size else None

    def kept_in(self, config: Configured) -> str:
        return config.instance.namespace  # beside the instance's admin Secret

    def admit(self, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> list[tuple[str, str]]:
        return []  # the schema says all such a provider may be

    def admin(self, config: Any, seen: Seen, *, make: bool) -> Any:
        """The server's admin credentials (made once for an integrated server when `make`), or the step that waits."""
        raise NotImplementedError

    def objects(self, config: Any, seen: Seen) -> list[dict[str, Any]]:
        """An integrated server's objects (volume, Deployment, Service; `seen` holds the live volume)."""
        raise NotImplementedError

    def never_ran(self, config: Any, seen: Seen) -> bool:
        """Whether an integrated server was never made (no admin Secret, no Deployment, no volume): none of a claim's
        data can be on it. Its volume outlives its pod and Deployment: while it is there, so may the data be."""
        instance = config.instance
        if not instance.integrated:
            return False
        admin, deployment, *_, volume = server.reads(instance)
        return all(seen.get(read) is None for read in (admin, deployment, volume))

    def prepared(self, config: Any, seen: Seen, *, provisioning: bool
                 ) -> tuple[Any, tuple[str, int], tuple[Apply, ...]] | Step:
        """What a step needs before it calls the server: its admin, where to dial it, its objects' writes (when
        provisioning an integrated one); or the step that waits instead."""
        admin = self.admin(config, seen, make=provisioning)
        return server.prepared(config.instance, seen, admin, self.objects(config, seen) if provisioning else ())

