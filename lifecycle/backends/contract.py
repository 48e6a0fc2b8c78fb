"""The backend contract: what every backend's pure core answers, in steps the one claim reconciler carries out.

A backend serves one need type on one ServiceProvider `spec.backend` (pg on cloudnative-pg, redis on redis-server,
disk on storage-class, s3 on versitygw). Its core is pure: from the claim, its provider's config and what the edge
read (`Seen`), it says the next `Step` — the Kubernetes writes to make, the calls its client makes to the backend
itself, and then where the claim stands (`Ready`, `Waiting`, `Again`: look again at once, or `Gone`: its data is
dropped). The edge (reconciler/claims.py) owns everything every backend shares: the finalizer, retention, the
claim's conditions and status, the connection Secret (written only when it is the claim's own), the retries and the
events. Anchors: crossplane-runtime's managed reconciler (one reconciler, an external client per backend),
controller-runtime's controllerutil.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from controller_runtime.kinds import GroupVersionKind
from controller_runtime.outcomes import Done, Requeue
from lifecycle.conditions import Condition

__all__ = ["Again", "Apply", "Backend", "CreateOnce", "Delete", "Gone", "Hidden", "Read", "Ready", "Rotation", "Seen",
           "Site", "Step", "Waiting", "Write"]


class Hidden(str):
    """A secret in a backend call (a password, a key): a str to the client, `<hidden>` in every repr and log line."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "'<hidden>'"


class Site(NamedTuple):
    """What the operator was told for a backend: the namespace its shared servers run in (the platform's namespace
    for the need type, unless a provider names another) and the image it runs them from (None: it runs none)."""

    namespace: str
    image: str | None = None
    # the images of its other parts by name (cloudnative-pg's `pgbouncer`: its Pooler's), none: that part is off
    parts: tuple[tuple[str, str], ...] = ()

    def part(self, name: str) -> str | None:
        return dict(self.parts).get(name)


class Read(NamedTuple):
    """An object to read fresh (by name) or a list (by labels, `name` None) for the core to see."""

    kind: GroupVersionKind
    namespace: str | None
    name: str | None = None
    labels: tuple[tuple[str, str], ...] = ()


class Rotation(NamedTuple):
    """What the edge saw of a claim's rotation (lifecycle.rotation) before a step: the request (the claim's
    `apprafter.io/rotate`), the request the connection Secret's password answers, and the pods that read that Secret
    from an older pod template (they may hold the old password)."""

    requested: str | None = None
    issued: str | None = None
    holding: tuple[str, ...] = ()

    @property
    def due(self) -> bool:
        """A new password is to be made: the request is not the one the current password answers."""
        return self.requested is not None and self.requested != self.issued

    @property
    def settled(self) -> bool:
        """Old passwords may be refused: nothing is due, and no pod reads the Secret from an older template."""
        return not self.due and not self.holding


class Seen(NamedTuple):
    """What the edge read for one step: each Read's answer (an object or None; a list for a list), the decoded data
    of the claim's own connection Secret (None: it has none yet), a new random password the core may take (it is
    never used unless the core decides a new one is due), the time (epoch seconds) and the claim's rotation."""

    objects: Mapping[Read, Any]
    connection: Mapping[str, str] | None
    fresh: str
    now: float
    rotation: Rotation = Rotation()

    def get(self, read: Read) -> dict[str, Any] | None:
        found = self.objects.get(read)
        return found if isinstance(found, dict) else None

    def list(self, read: Read) -> list[dict[str, Any]]:
        found = self.objects.get(read)
        return list(found) if isinstance(found, list) else []


class Apply(NamedTuple):
    """Server-side apply this object where the live one differs (controller_runtime.writes.ensure)."""

    obj: dict[str, Any]


class CreateOnce(NamedTuple):
    """Create this object if none of its name exists, never change it after (a generated password)."""

    obj: dict[str, Any]


class Delete(NamedTuple):
    """Delete the object of this kind and name, only while it is the one with `uid` (None: whichever it is)."""

    kind: GroupVersionKind
    namespace: str | None
    name: str
    uid: str | None = None


Write = Apply | CreateOnce | Delete


class Ready(NamedTuple):
    """The claim is provisioned: its Ready message, status.connection (never a secret), the connection Secret's data
    (None: the need has no connection fields, as disk), the backend's other conditions, and the rotation request
    the Secret's password answers (None: none; written on the Secret, lifecycle.rotation), and whether every older
    password is refused by now (False: the backend still takes one it handed out before, pg's retiring role)."""

    message: str
    connection: Mapping[str, Any]
    secret: Mapping[str, str] | None = None
    conditions: tuple[Condition, ...] = ()
    rotated: str | None = None
    refused: bool = True


class Waiting(NamedTuple):
    """Not provisioned yet: the Ready condition's reason and message (nothing secret), what to do about it (Requeue:
    it may pass by itself, retried with backoff or after a delay; Done: a watched change wakes the claim), the
    backend's other conditions and the status fields to keep meanwhile."""

    reason: str
    message: str
    retry: Requeue | Done = Done()
    conditions: tuple[Condition, ...] = ()
    fields: Mapping[str, Any] = {}


class Again(NamedTuple):
    """The step's writes move things on and the core wants to see the result: read and decide again at once."""

    why: str


class Gone(NamedTuple):
    """The claim's data is dropped (nothing of it is left at the backend)."""


class Step(NamedTuple):
    """The next writes, then the backend client's calls (typed by each backend, in order), then where the claim
    stands once both are made."""

    then: Ready | Waiting | Again | Gone
    writes: tuple[Write, ...] = ()
    calls: tuple[Any, ...] = ()


class Backend(Protocol):
    """A backend's pure core (lifecycle/backends/<name>.py), registered in lifecycle.backends.registry."""

    @property
    def backend(self) -> str:
        """The ServiceProvider spec.backend it serves."""
        ...

    @property
    def type(self) -> str:
        """The need type it serves."""
        ...

    @property
    def drop_needs_provider(self) -> bool:
        """False: a claim's data is found from the claim alone (a disk's PVC), so it is dropped even once its
        provider is gone (`configure` then sees a provider of that name with no config)."""
        ...

    def configure(self, provider: Mapping[str, Any], site: Site) -> Any:
        """The provider's config as this core reads it (with the site's namespace and image in it), or its problems
        (a list of `spec.config.<key>: problem`)."""
        ...

    def reads(self, claim: Mapping[str, Any], config: Any) -> Sequence[Read]:
        """What the edge reads, fresh, before each step (for provisioning and for dropping)."""
        ...

    def provision(self, claim: Mapping[str, Any], config: Any, seen: Seen) -> Step:
        """The next step of provisioning the claim."""
        ...

    def drop(self, claim: Mapping[str, Any], config: Any, seen: Seen) -> Step:
        """The next step of dropping a deleted claim's data (lifecycle.retention decided it may go)."""
        ...

    def admit(self, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> list[tuple[str, str]]:
        """(field, problem) of a provider write the schema lets through but this backend refuses (the webhook's)."""
        ...

    def beyond(self, claim: Mapping[str, Any], config: Any) -> str | None:
        """Why no claim like this one is ever provisioned on this provider (a size past its ceiling), else None: the
        webhook refuses such an Application at admission, and provisioning says the same on the claim."""
        ...

    def unsized(self, claim: Mapping[str, Any], config: Any) -> str | None:
        """Why the claim's size is not applied on this provider (None: it is, or the need names none): the claim is
        provisioned all the same and says so on its Size condition; the webhook warns at admission."""
        ...

    def kept_in(self, config: Any) -> str | None:
        """The namespace where a claim's data is recorded as its namespace's (lifecycle.backends.kept), when the data
        is kept outside the claim's namespace; None: it lives in the claim's namespace and goes with it."""
        ...
