"""Names, labels and metadata shared by every rendered object."""

from __future__ import annotations

from renderer.context import PlatformContext
from renderer.names import ENVIRONMENT_LABEL, INSTANCE_LABEL, MANAGED_BY, MANAGED_BY_LABEL, NAME_LABEL
from toolchain.record import TYPE_CHECKING, Record

if TYPE_CHECKING:
    from typing import Any


class Target(Record):
    """What one render is for: the app, its environment, its namespace and the platform around it."""

    app: str
    environment: str
    namespace: str | None
    context: PlatformContext

    @property
    def instance(self) -> str:
        return f"{self.app}-{self.environment}"

    def selector(self) -> dict[str, str]:
        return {INSTANCE_LABEL: self.instance, NAME_LABEL: self.app}

    def labels(self, component: str | None = None) -> dict[str, str]:
        labels = {
            INSTANCE_LABEL: self.instance,
            MANAGED_BY_LABEL: MANAGED_BY,
            NAME_LABEL: self.app,
            "app.kubernetes.io/part-of": self.app,
            ENVIRONMENT_LABEL: self.environment,
        }
        if component:
            labels["app.kubernetes.io/component"] = component
        return dict(sorted(labels.items()))

    def metadata(self, name: str, component: str | None = None,
                 annotations: dict[str, str] | None = None) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name}
        if self.namespace:
            meta["namespace"] = self.namespace
        meta["labels"] = self.labels(component)
        if annotations:
            meta["annotations"] = dict(sorted(annotations.items()))
        return meta


def claim_name(app: str, need: str) -> str:
    """The ResourceClaim an app's need becomes (the one name the renderer and the Secret grant use)."""
    return f"{app}-{need}"


def connection_secret(app: str, need: str) -> str:
    """The Secret a ResourceClaim's provider writes the connection fields into."""
    return f"{app}-{need}-conn"
