"""The redis-server backend's core: one shared instance per provider, an ACL user per claim confined to its prefix;
or, where the provider says `isolation: instance`, an instance of each claim's own.

The instance is made lazily for its first claim (lifecycle.backends.instance: Guaranteed, `--maxmemory` below its
memory limit, its keys in an append-only file and its users in an ACL file on a volume of its own, so both survive a
restart of its pod), or it is a Redis the administrator runs (`spec.config.address`). Each claim is one ACL user
confined to its key and channel prefix; its password is kept while the claim's connection Secret holds it (a new one
otherwise, and one per rotation request, the old one kept beside it until the app's pods have rolled:
lifecycle.rotation). Every name is derived from the claim's namespace and name, so re-creating the same app and need
re-binds to the same user and keys. redis-server has no per-user limit of connections or memory, so on a shared
instance one claim can hold every connection slot or fill maxmemory; a claim's own instance (`isolation: instance`) is
sized by the claim's size (its memory, maxmemory, maxclients and volume: CLAIM_INSTANCES) and holds no other claim's
anything. The client (reconciler/backends/redis.py) carries out SetUser, TryUser and DropUser.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, NamedTuple

from controller_runtime.quantity import whole_bytes
from lifecycle.backends import instance as server
from lifecycle.backends.common import HASH_CHARS, claim_ref, ready, size_not_applied, volume_refusals
from lifecycle.backends.contract import Delete, Gone, Hidden, Seen, Site, Step
from lifecycle.backends.instance import DATA, Instance, Storage
from lifecycle.backends.shared_server import SharedServer

__all__ = ["BACKEND", "CORE", "FSYNC", "NO_SCRIPTING", "OWN_SCRIPTS", "PERMISSIONS", "PORT", "START",
           "Account", "Config", "DropUser", "RedisServer", "SetUser", "TryUser", "account_of", "acl_rules",
           "max_memory"]

BACKEND, TYPE = "redis-server", "redis"
PORT = 6379
MARGIN_FLOOR = 32 * 2**20
# Keys and values kept without expiry; keys with a TTL are evicted first (least recently used) when maxmemory is
# reached, then writes fail with OOM: one tenant's cache never silently evicts another's data without a TTL.
EVICTION = "volatile-lru"
SHARED_MAX_CLIENTS = 10000  # redis-server's own default: the shared instance's slots are every claim's
# A claim's own instance by the claim's size: the container's memory (maxmemory its provider's share of it),
# maxclients, as managed Redis plans size theirs, and its volume: 4x the memory, room for the append-only file at its
# largest (while it is rewritten: the old base and increments beside the new base, ~3x the data, the data at most
# 75 % of the memory). The smallest is the smallest instance that starts its users' work.
CLAIM_INSTANCES: Mapping[str, tuple[str, int, str]] = {"nano": ("64Mi", 32, "256Mi"), "small": ("128Mi", 64, "512Mi"),
                                                       "medium": ("256Mi", 256, "1Gi"),
                                                       "large": ("1Gi", 1000, "4Gi"),
                                                       "xlarge": ("4Gi", 4000, "16Gi")}
DEFAULT_SIZE = "small"
# A server busy with a script answers every other command BUSY (after redis' busy-reply-threshold, 5 s). The
# operator ends such a script with SCRIPT KILL (one that has not written: nothing of anyone's data is lost); one that
# has written cannot be killed, only SHUTDOWN NOSAVE ends it, which empties the instance of every claim's keys: that
# is its administrator's call, never the operator's (issue 41: restore service, never at other tenants' data).
BUSY_REPLY = "BUSY"
UNKILLABLE_REPLY = "UNKILLABLE"
# appendfsync: when an acknowledged write reaches the disk. Every policy writes it to the file (the kernel's page
# cache) before the reply, so a killed server or a deleted pod loses nothing; the policy bounds what a crash of the
# node itself loses: `always` nothing, `everysec` up to a second, `no` what the kernel had not flushed (~30 s).
FSYNC = ("always", "everysec", "no")
# The container's entry (`sh -c START redis <dir> <redis-server's args>`): the ACL file's `default` user (the admin)
# written from the admin Secret at every start (its SHA-256, never the password: the Secret stays the one source),
# every other user as the operator last saved it (ACL SAVE); then redis-server with its data and that file in <dir>.
# redis-server itself cannot do this: an ACL file without a `default` user gives the admin no password at all.
START = ('set -eu; umask 077; dir=$1; shift; acl="$dir/users.acl"; '
         'hash=$(printf %s "$ADMIN_PASSWORD" | sha256sum | cut -d" " -f1); '
         '{ echo "user default on #$hash ~* &* +@all"; '
         'if [ -f "$acl" ]; then grep -v "^user default " "$acl" || true; fi; } > "$acl.new"; '
         'mv "$acl.new" "$acl"; unset ADMIN_PASSWORD; exec redis-server "$@" --dir "$dir" --aclfile "$acl"')
# Ready once it answers the admin's PING with PONG (not while it loads its append-only file: LOADING).
READY = f'REDISCLI_AUTH="$ADMIN_PASSWORD" redis-cli -p {PORT} PING | grep -qx PONG'
ISOLATION_MESSAGE = ("an existing provider's isolation does not change: its claims' data is where it is (make "
                     "another provider)")

# What a claim's user may run (Redis' ACL categories, `ACL CAT`): everything on its own keys and channels, minus
# the categories that reach the whole instance or its configuration (@dangerous: KEYS, FLUSHALL, FLUSHDB, CONFIG,
# DEBUG, MODULE, ACL, CLIENT LIST/KILL, MONITOR, SORT with patterns, SHUTDOWN, ...; @admin), minus the commands that
# show other tenants' key or channel names (SCAN, RANDOMKEY, DBSIZE, PUBSUB, CLIENT TRACKING: its broadcast mode
# takes any prefix, another tenant's or none, and Redis does not check it against the user's keys) or switch
# databases (SELECT, MOVE, SWAPDB). INFO comes back: queue libraries (BullMQ, Sidekiq) read the server's version
# from it at connect; it shows instance-wide counters, never a key name or value.
PERMISSIONS = ("+@all", "-@dangerous", "-@admin", "-scan", "-randomkey", "-dbsize", "-pubsub", "-select", "-move",
               "-client|tracking", "+info")
# Scripting on a shared instance is off (@scripting: EVAL, EVALSHA, FCALL, FUNCTION, SCRIPT): a script runs alone on
# the server's one thread, so a busy one answers every other tenant BUSY, one that wrote cannot be killed (only a
# SHUTDOWN ends it, with every tenant's keys), and its Lua heap grows past maxmemory and the pod's limit. A provider
# whose claims are one team's may turn it on (`scripting: true`, for BullMQ and the like): then EVAL and EVALSHA run
# with the caller's ACL (a script reaches only its prefix), and FUNCTION (libraries are instance-wide) and SCRIPT
# FLUSH/KILL/DEBUG stay off.
NO_SCRIPTING = ("-@scripting",)
OWN_SCRIPTS = ("-function", "-script|flush", "-script|kill", "-script|debug")


class Account(NamedTuple):
    """A claim's ACL user and the prefix of its keys and channels."""

    user: str
    prefix: str


class SetUser(NamedTuple):
    """As the instance's admin: ACL SETUSER `user` with `rules` (one command: the user is replaced whole), then ACL
    SAVE where the instance keeps its users in an ACL file (`save`: an integrated one)."""

    host: str
    port: int
    admin_password: Hidden
    user: str
    rules: tuple[str, ...]
    save: bool = False


class TryUser(NamedTuple):
    """AUTH as `user` and PING: its credentials work."""

    host: str
    port: int
    user: str
    password: Hidden


class DropUser(NamedTuple):
    """As the admin: ACL DELUSER `user` (and ACL SAVE: `save`) and UNLINK every key under `prefix`."""

    host: str
    port: int
    admin_password: Hidden
    user: str
    prefix: str
    save: bool = False


class Config(NamedTuple):
    """A provider's instance, its `--maxmemory` (bytes), the image the operator runs it from, whether its claims may
    run scripts, its volume and when its writes reach the disk."""

    instance: Instance
    max_memory: int
    image: str | None
    scripting: bool = False
    per_claim: bool = False  # isolation: instance
    percent: int = 75  # maxmemoryPercent
    max_clients: int = SHARED_MAX_CLIENTS
    storage: Storage = Storage("1Gi", None)
    appendfsync: str = "everysec"


def busy(reply: str) -> bool:
    """Whether a reply says the server is busy with a script."""
    return reply.startswith(BUSY_REPLY)


def still_wedged(where: str, reply: str) -> str | None:
    """After the admin's SCRIPT KILL: None when the server serves again (the script was killed, or had ended), else
    why it stays wedged (a script that wrote), in words for the claims it holds up."""
    if not reply.startswith(UNKILLABLE_REPLY):
        return None
    return (f"{where} is held by a script that has written (SCRIPT KILL cannot end it): only SHUTDOWN NOSAVE does, "
            "which empties the instance of every claim's keys, so the operator leaves that to its administrator")


def own_instance(claim: Mapping[str, Any], config: Config) -> Config:
    """The claim's own instance (a provider's `isolation: instance`): `redis-<hash of namespace/claim>` beside where
    the shared one would run, sized by the claim's size (CLAIM_INSTANCES; the default for a size it does not name),
    its volume of the provider's class."""
    memory, clients, volume = CLAIM_INSTANCES.get(str((claim.get("spec") or {}).get("size") or DEFAULT_SIZE),
                                                  CLAIM_INSTANCES[DEFAULT_SIZE])
    name = f"redis-{hashlib.sha256(claim_ref(claim).encode()).hexdigest()[:HASH_CHARS]}"
    shared = config.instance
    instance = shared._replace(name=name, host=f"{name}.{shared.namespace}.svc", memory=memory, claim=claim_ref(claim))
    return config._replace(instance=instance, max_memory=max_memory(whole_bytes(memory) or 0, config.percent),
                           max_clients=clients, storage=config.storage._replace(size=volume))


def max_memory(limit: int, percent: int) -> int:
    """`--maxmemory` for a container memory limit: `percent` of it, and at least 32 MiB below it (what Redis uses
    beside its data: client buffers, up to 32 MiB per pub/sub subscriber before it is cut, allocator fragmentation;
    the default 75 % leaves a quarter)."""
    return min(limit * percent // 100, limit - MARGIN_FLOOR)


def account_of(claim: Mapping[str, Any]) -> Account:
    """The claim's user `<namespace>.<claim>` and key prefix `<namespace>.<claim>:` (a namespace has no dot, so no
    two claims' users or prefixes can be the same, and the colon ends the prefix: `a:` never covers `a-b:`)."""
    meta = claim.get("metadata") or {}
    user = f"{meta['namespace']}.{meta['name']}"
    return Account(user, f"{user}:")


def acl_rules(account: Account, password: str, scripting: bool = False, keep: bool = False) -> tuple[str, ...]:
    """ACL SETUSER's rules for the account (`>password`: hidden in every repr); its own scripts only where the
    provider allows scripting. `reset` makes the user exactly this; `keep` (a rotation under way) resets all but its
    passwords, so the old one stays valid beside the new until the app's pods have rolled (lifecycle.rotation)."""
    start = ("resetkeys", "resetchannels") if keep else ("reset",)
    return (*start, "on", Hidden(f">{password}"), f"~{account.prefix}*", f"&{account.prefix}*", *PERMISSIONS,
            *(OWN_SCRIPTS if scripting else NO_SCRIPTING))


def instance_objects(config: Config, volume: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """The volume, Deployment and Service of an integrated instance (lifecycle.backends.instance.on_volume; `volume`:
    the live one, never asked smaller). Its keys in an append-only file (no RDB snapshots), fsynced by
    `appendfsync`, and its users in the ACL file (START), both on the volume; the root file system stays read-only.
    The admin is the default user, its password from the Secret, as the environment (never argv)."""
    args = ["--port", str(PORT), "--bind", "*", "-::*", "--protected-mode", "no", "--save", "",
            "--appendonly", "yes", "--appendfsync", config.appendfsync,
            "--maxmemory", str(config.max_memory), "--maxmemory-policy", EVICTION,
            "--maxclients", str(config.max_clients)]
    container = {
        "name": "redis", "image": config.image, "command": ["/bin/sh", "-c", START, "redis", DATA], "args": args,
        "env": [{"name": "ADMIN_PASSWORD", "valueFrom": {"secretKeyRef": {"name": config.instance.admin_secret,
                                                                          "key": "password"}}}],
        "ports": [{"name": "redis", "containerPort": PORT, "protocol": "TCP"}],
        "readinessProbe": {"exec": {"command": ["/bin/sh", "-c", READY]}, "periodSeconds": 5, "timeoutSeconds": 5},
        "livenessProbe": {"tcpSocket": {"port": PORT}, "periodSeconds": 10, "failureThreshold": 6},
    }
    return server.on_volume(config.instance, container, config.storage, volume)


class RedisServer(SharedServer):
    """The redis-server backend's core (lifecycle.backends.contract.Backend)."""

    backend, type, component, port = BACKEND, TYPE, "redis", PORT
    size_ignored = ("redis-server bounds no user's memory or connections on a shared instance (a provider with "
                    "isolation: instance gives each claim a server of its size)")

    def configured(self, instance: Instance, config: Mapping[str, Any], site: Site) -> Config | list[str]:
        limit, percent = whole_bytes(instance.memory) or 0, int(config["maxmemoryPercent"])
        storage = Storage(str(config["storage"]["size"]), config["storage"].get("storageClassName"))
        per_claim = config["isolation"] == "instance"
        if per_claim and not instance.integrated:
            return ["spec.config.isolation: an instance per claim is one the operator runs: not with "
                    "spec.config.address"]
        return Config(instance, max_memory(limit, percent) if instance.integrated else 0, site.image,
                      bool(config["scripting"]), per_claim, percent, storage=storage,
                      appendfsync=str(config["appendfsync"]))

    def unsized(self, claim: Mapping[str, Any], config: Config) -> str | None:
        return None if config.per_claim else super().unsized(claim, config)  # its own instance is of its size

    def serving(self, claim: Mapping[str, Any], config: Config) -> Config:
        """The provider's shared instance, or the claim's own (`isolation: instance`)."""
        return own_instance(claim, config) if config.per_claim else config

    def admit(self, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> list[tuple[str, str]]:
        """A provider's isolation is fixed; so is what its volumes cannot become (another class; the shared
        instance's, a smaller size: a claim's own is sized by the claim). None of it for a Redis the administrator
        runs."""
        def config(provider: Mapping[str, Any] | None) -> Mapping[str, Any]:
            return ((provider or {}).get("spec") or {}).get("config") or {}
        if old is None:
            return []
        if str(config(old).get("isolation") or "shared") != str(config(new).get("isolation") or "shared"):
            return [("spec.config.isolation", ISOLATION_MESSAGE)]
        if config(old).get("address"):
            return []
        refused = volume_refusals(TYPE, BACKEND, old, new, "the instance")
        per_claim = config(new).get("isolation") == "instance"
        return [(field, why) for field, why in refused if not (per_claim and field == "spec.config.storage.size")]

    def provision(self, claim: Mapping[str, Any], config: Config, seen: Seen) -> Step:
        config = self.serving(claim, config)
        instance, found = config.instance, self.prepared(config, seen, provisioning=True)
        if isinstance(found, Step):
            return found
        admin, address, writes = found
        account, rotation = account_of(claim), seen.rotation
        # a rotation's new password, made once per request; the old one kept on the user until no pod holds it
        password = Hidden(seen.fresh) if rotation.due else server.kept_secret(seen, account.user)
        at = f"[{instance.host}]" if ":" in instance.host else instance.host
        secret = {"url": f"redis://{account.user}:{password}@{at}:{instance.port}/0", "host": instance.host,
                  "port": str(instance.port), "user": account.user, "password": str(password),
                  "prefix": account.prefix}
        connection = {"host": instance.host, "port": instance.port, "user": account.user, "prefix": account.prefix}
        said = f"ACL user {account.user} on {instance.host}:{instance.port}, keys and channels under {account.prefix}"
        calls = (SetUser(*address, admin, account.user,
                         acl_rules(account, password, config.scripting, keep=not rotation.settled),
                         instance.integrated),
                 TryUser(*address, account.user, password))
        answers = rotation.requested if rotation.due else rotation.issued
        return Step(ready(said, connection, secret, rotated=answers,
                          conditions=size_not_applied(claim, self.unsized(claim, config))), writes, calls)

    def drop(self, claim: Mapping[str, Any], config: Config, seen: Seen) -> Step:
        config = self.serving(claim, config)
        if config.per_claim:  # its own instance goes whole: its admin Secret, Deployment, Service and volume
            admin_secret, deployment, service, _, volume = server.reads(config.instance)
            made = [(read, seen.get(read)) for read in (deployment, service, volume, admin_secret)]
            return Step(Gone(), tuple(Delete(read.kind, read.namespace, str(read.name), str(obj["metadata"]["uid"]))
                                      for read, obj in made if obj is not None))
        if self.never_ran(config, seen):  # no admin Secret, Deployment or volume: nothing of the claim anywhere
            return Step(Gone())
        found = self.prepared(config, seen, provisioning=False)
        if isinstance(found, Step):
            return found
        admin, address, _ = found
        account = account_of(claim)
        return Step(Gone(), calls=(DropUser(*address, admin, account.user, account.prefix,
                                            config.instance.integrated),))

    def objects(self, config: Config, seen: Seen) -> list[dict[str, Any]]:
        return instance_objects(config, seen.get(server.reads(config.instance)[-1]))

    def admin(self, config: Config, seen: Seen, *, make: bool) -> Hidden | Step:
        """The instance's admin password (its default user's), made once for an integrated instance."""
        found = server.admin_of(config.instance, seen, {"password": seen.fresh}, make=make,
                                said="key password: the admin password")
        return found if isinstance(found, Step) else Hidden(found["password"])


CORE = RedisServer()
