"""Application scope (spec §3.8): classify the change between two effective per-environment specs."""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Callable, Mapping
from typing import Any

from compatibility.diff import leaf_diff
from compatibility.plan import Change, Plan, Subject, roll_up
from compatibility.rules import RULES
from compatibility.shape import Unreadable, check_spec, env_value, json_value, mapping
from compatibility.versions import need_major
from renderer.context import PlatformContext
from renderer.effective import effective_spec
from renderer.health import PROBES, describe, probes, progress_deadline
from renderer.imageref import is_digest_pinned, split_image
from renderer.manifests.network import default_hostname
from renderer.manifests.workload import BUDGET_SEEDS
from renderer.redact import digest

__all__ = ["DEFAULT_DOMAIN", "Deployment", "classify", "deployment", "plan", "soft_destructive"]

DEFAULT_DOMAIN = PlatformContext().domain
# Top-level fields compared leaf by leaf under one soft rule (after the specific rules had their say).
# connects and confidential have their gated rules first (egress(), confidential()).
SOFT_FIELDS = {"resources": "AR-S011", "budget": "AR-S011", "autoscale": "AR-S011", "network": "AR-S013",
               "command": "AR-S013", "args": "AR-S013"}


@dataclasses.dataclass(frozen=True)
class Deployment:
    """One side of a comparison: the app's name, the environment and that environment's effective spec."""

    app: str
    environment: str
    spec: Mapping[str, Any]
    namespace: str | None = None


def deployment(document: Mapping[str, Any], environment: str) -> Deployment:
    """The effective spec of `environment` in an Application document; Unreadable when it cannot be read.

    KeyError when the environment is not declared (the caller decides what that means).
    """
    if not isinstance(document, Mapping):
        raise Unreadable("", "an Application document is a mapping")
    json_value(document, "")
    meta, spec = mapping(document, "metadata"), mapping(document, "spec")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise Unreadable("metadata.name", "expected a non-empty string")
    namespace = meta.get("namespace")
    envs = mapping(spec, "environments")
    if environment not in envs:
        raise KeyError(environment)
    for key in ("base", "budget"):
        mapping(spec, key)
    if not isinstance(envs[environment], Mapping):
        raise Unreadable(f"environments.{environment}", "expected a mapping")
    try:
        eff = effective_spec(spec, environment)
    except (TypeError, AttributeError, ValueError) as e:
        raise Unreadable(f"environments.{environment}", f"cannot merge onto base: {e}") from None
    return Deployment(name, environment, check_spec(eff), namespace if isinstance(namespace, str) else None)


def _redacted(kind: str, target: str) -> Any:
    """How an env value appears in a plan: references as written, literals only as their sha256."""
    if kind == "literal":
        return {"literalSha256": digest(target)}
    return {kind: target}


class _Classifier:
    def __init__(self, before: Deployment, after: Deployment, domain: str) -> None:
        self.old, self.new = check_spec(before.spec), check_spec(after.spec)
        self.before, self.after, self.domain = before, after, domain
        self.changes: list[Change] = []

    def add(self, rule: str, field: str, from_: Any, to: Any, reason: str) -> None:
        self.changes.append(Change(rule, field, from_, to, reason))

    def soft(self, rule: str, prefix: str, before: Any, after: Any, reason: Callable[[str], str]) -> None:
        for path, from_, to in leaf_diff(before, after, prefix):
            self.add(rule, path, from_, to, reason(path))

    def run(self) -> list[Change]:
        if self.before.app != self.after.app:
            self.add("AR-DM002", "metadata.name", self.before.app, self.after.app,
                     "a renamed Application is a new deployment: the old one, its claims and their data go")
        self.needs()
        self.env()
        self.image()
        self.replicas()
        self.expose()
        self.health()
        self.egress()
        self.confidential()
        for key, rule in SOFT_FIELDS.items():
            self.soft(rule, key, self.old.get(key), self.new.get(key), _SOFT_REASON[rule])
        return self.changes

    def needs(self) -> None:
        old, new = mapping(self.old, "needs"), mapping(self.new, "needs")
        for name in sorted(set(old) | set(new)):
            field = f"needs.{name}"
            if name not in new:
                self.add("AR-DM001", field, old[name], None, f"the {name} claim and its data are garbage-collected")
            elif name not in old:
                self.add("AR-RV001", field, None, new[name], f"a new {name} claim is provisioned")
            else:
                self.need(name, old[name], new[name])

    def need(self, name: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        field = f"needs.{name}"
        v_old, v_new = old.get("version"), new.get("version")
        if v_old is not None and v_new is not None and need_major(v_old) != need_major(v_new):
            self.add("AR-DM003", f"{field}.version", v_old, v_new,
                     f"a major {name} upgrade rewrites the data (dump/restore or pg_upgrade)")
            old, new = {**old, "version": None}, {**new, "version": None}
        self.soft("AR-S002", f"{field}.size", old.get("size"), new.get("size"),
                  lambda _: "storage is expansion-only: a shrink is refused by the provisioner")
        self.soft("AR-S003", field, {k: v for k, v in old.items() if k != "size"},
                  {k: v for k, v in new.items() if k != "size"},
                  lambda p: "a selector change moves the claim to another provider: gated at platform scope"
                  if ".selector" in p else "claim setting: applied by the provider in place")

    def env(self) -> None:
        old, new = mapping(self.old, "env"), mapping(self.new, "env")
        for key in sorted(set(old) | set(new)):
            field = f"env.{key}"
            a = env_value(old[key], field) if key in old else None
            b = env_value(new[key], field) if key in new else None
            if a == b:
                continue
            rule, reason = _env_rule(a, b)
            self.add(rule, field, _redacted(*a) if a else None, _redacted(*b) if b else None, reason)

    def image(self) -> None:
        old, new = self.old.get("image") or "", self.new.get("image") or ""
        if old == new:
            pass
        elif split_image(old)[0] != split_image(new)[0]:
            self.add("AR-SB008", "image", old, new, "a different repository can serve entirely different content")
        else:
            self.add("AR-S007", "image", old, new, "same repository: rolled out like any new tag")
        r_old = mapping(self.old, "imagePolicy").get("resolve", "off")
        r_new = mapping(self.new, "imagePolicy").get("resolve", "off")
        if r_old == "off" and r_new == "digest" and not is_digest_pinned(new):
            self.add("AR-SB007", "imagePolicy.resolve", r_old, r_new,
                     "a pinned reference returns to a mutable tag: a moved tag serves new content unreviewed")
        elif r_old != r_new:
            self.add("AR-S010", "imagePolicy.resolve", r_old, r_new,
                     "hardening (digest -> off)" if r_new == "off" else "the image is digest-pinned: no-op")
        self.soft("AR-S010", "imagePolicy", {**mapping(self.old, "imagePolicy"), "resolve": None},
                  {**mapping(self.new, "imagePolicy"), "resolve": None}, lambda _: "resolve schedule only")

    def replicas(self) -> None:
        old, new = _running(self.old), _running(self.new)
        if new == 0 and old != 0:
            self.add("AR-RR003", "replicas", "autoscaled" if old is None else old, 0,
                     "scale to zero is a deliberate outage")
            return
        self.soft("AR-S008", "replicas", self.old.get("replicas"), self.new.get("replicas"),
                  lambda _: "ignored while autoscale is on" if new is None else "the workload keeps running")

    def expose(self) -> None:
        old, new = mapping(self.old, "expose"), mapping(self.new, "expose")
        n_old, n_new = _network(self.old), _network(self.new)
        handled = {"network"}
        if n_old == "public" and n_new != "public":
            self.add("AR-RR002", "expose.network", n_old, n_new if n_new != "none" else None,
                     "removes external reachability: the public route is deleted")
        elif n_old != "public" and n_new == "public":
            host = new.get("hostname") or self.default_host(self.after)
            self.add("AR-SB004", "expose.network", n_old if n_old != "none" else None, n_new,
                     f"the blast radius widens from the cluster to the public Gateway: {host}")
        elif n_old == n_new == "public":
            handled |= {"hostname", "port"}
            self.public_hostname(old, new)
            if old.get("port") != new.get("port"):
                self.add("AR-SB006", "expose.port", old.get("port"), new.get("port"),
                         "moves the public surface (could publish a debug or metrics port)")
        else:
            self.soft("AR-S009", "expose.network", old.get("network"), new.get("network"),
                      lambda _: "no public reachability on either side")
        if n_old == n_new == "public":
            note = "keeps public reachability as it is"
        elif "public" in (n_old, n_new):
            note = "part of the network change above"
        else:
            note = "not public on either side: no route, so inert for reachability"
        self.soft("AR-S009", "expose", {k: v for k, v in old.items() if k not in handled},
                  {k: v for k, v in new.items() if k not in handled}, lambda _: note)

    def public_hostname(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        h_old = old.get("hostname") or self.default_host(self.before)
        h_new = new.get("hostname") or self.default_host(self.after)
        if h_old == h_new:
            return
        if "hostname" not in old and "hostname" in new:
            self.add("AR-SB005", "expose.hostname", h_old, h_new, f"publishes a new external name {h_new}")
        else:
            self.add("AR-RR001", "expose.hostname", h_old, h_new,
                     f"{h_old} stops resolving to the app and its certificate churns")

    def health(self) -> None:
        """Probes compared as they run (defaults resolved), so an edit that changes nothing is no change."""
        old, new = probes(self.old), probes(self.new)
        for name in PROBES:
            a, b, field = old.get(name), new.get(name), f"health.{name}"
            if a == b:
                continue
            if a is not None and b is not None:
                for path, from_, to in leaf_diff(a, b, field):
                    setting = path.rsplit(".", 1)[-1]
                    weaker = _WEAKER.get(setting) if name == "readiness" else None
                    if weaker is not None and weaker(from_, to):
                        self.add("AR-S014", path, from_, to, _WEAKER_REASON[setting])
                    else:
                        self.add("AR-S015", path, from_, to, "probe tuning: rolled out like any deploy")
            elif name == "readiness" and b is None and _serves(self.new):
                self.add("AR-RR006", field, describe(a), None,
                         "without readiness a new pod takes traffic as soon as it starts: a broken release replaces "
                         "every good pod, and the soft changes that rely on a rollout self-protecting no longer do")
            elif name == "readiness" and b is None:
                self.add("AR-S014", field, describe(a), None,
                         "no traffic reaches the app now: readiness only held its rollouts back")
            else:
                self.add("AR-S015", field, describe(a), describe(b),
                         f"{name} probe {'added' if a is None else 'removed'}: rolled out like any deploy")
        self.soft("AR-S015", "health.progressDeadlineSeconds", progress_deadline(self.old),
                  progress_deadline(self.new), lambda _: "how long a stalled rollout takes to be reported failed")
    def egress(self) -> None:
        """No external list is the whole internet (the renderer's world rule): losing the list, or a destination
        the list did not have, widens where the workload's data may go; anything else narrows it."""
        old, new = _external(self.old), _external(self.new)
        field = "connects.egress.external"
        handled = False
        if old and not new:
            self.add("AR-SB009", field, old, None, "the workload may reach the whole internet (the list of "
                     "destinations is gone)")
            handled = True
        elif old and new:
            known = {_destination(r) for r in old}
            added = [_destination(r) for r in new if _destination(r) not in known]
            if added:
                shown = ", ".join(f"{where}:{port}/{protocol}" for where, port, protocol in sorted(set(added)))
                self.add("AR-SB010", field, old, new, f"new destinations the workload may send data to: {shown}")
                handled = True
        before, after = mapping(self.old, "connects"), mapping(self.new, "connects")
        for path, from_, to in leaf_diff(before, after, "connects"):
            if not (handled and path == field):
                self.add("AR-S012", path, from_, to, "egress narrows: applied in place")

    def confidential(self) -> None:
        old, new = self.old.get("confidential") is True, self.new.get("confidential") is True
        if old and not new:
            self.add("AR-SB011", "confidential", True, self.new.get("confidential"),
                     "the workload leaves the confidential runtime: its memory is readable by the node again")
        else:
            self.soft("AR-S013", "confidential", self.old.get("confidential"), self.new.get("confidential"),
                      _SOFT_REASON["AR-S013"])

    def default_host(self, side: Deployment) -> str:
        return default_hostname(side.app, side.environment, self.domain)


_SOFT_REASON: dict[str, Callable[[str], str]] = {
    "AR-S011": lambda _: "capacity is ResourceQuota's job, not the gate's",
    "AR-S013": lambda _: "runtime setting: rolled out like any deploy",
}


def _env_rule(a: tuple[str, str] | None, b: tuple[str, str] | None) -> tuple[str, str]:
    """Rule and reason for one env key going from a to b ((kind, target) or None for absent); a != b."""
    if b is None:
        assert a is not None
        if a[0] == "literal":
            return "AR-S005", "a literal removal self-protects: new pods fail readiness, old ones keep serving"
        return "AR-RR004", f"the workload loses its wired {a[0]} reference {a[1]}"
    if b[0] == "secret":
        if a is not None and a[0] == "secret":
            return "AR-SB003", f"the workload now reads a different secret: {a[1]} -> {b[1]}"
        return "AR-SB001", f"the workload gains access to the external secret {b[1]}"
    if b[0] == "literal" and a is not None and a[0] != "literal":
        return "AR-SB002", f"a {a[0]} reference is replaced by an inline value"
    if a is not None and a[0] != "literal":
        return "AR-RR005", f"the workload loses its wired {a[0]} reference {a[1]} (the new claim is self-scoped)"
    if a is None:
        return "AR-S004", "a new literal" if b[0] == "literal" else "a claim reference to the app's own claim"
    return "AR-S006", "literal edit" if b[0] == "literal" else "a literal becomes a self-scoped claim reference"


# A readiness setting that checks less when it moves this way, and what that costs.
_WEAKER: dict[str, Callable[[Any, Any], bool]] = {
    "path": lambda _, to: to is None,
    "failureThreshold": lambda from_, to: to > from_,
    "periodSeconds": lambda from_, to: to > from_,
    "timeoutSeconds": lambda from_, to: to > from_,
}
_WEAKER_REASON = {
    "path": "TCP only checks that the port accepts connections: a pod that answers with errors stays ready",
    "failureThreshold": "a pod that stops answering keeps its traffic for longer",
    "periodSeconds": "a pod that stops answering keeps its traffic for longer",
    "timeoutSeconds": "a slower answer still counts as ready",
}


def _serves(spec: Mapping[str, Any]) -> bool:
    """Exposed and running (or autoscaled): traffic reaches its pods."""
    return "expose" in spec and _running(spec) != 0
def _external(spec: Mapping[str, Any]) -> list[Any]:
    """connects.egress.external as written ([] when absent: the whole internet)."""
    egress = mapping(mapping(spec, "connects"), "egress")
    external = egress.get("external")
    return list(external) if isinstance(external, list) else []


def _destination(rule: Any) -> tuple[str, str, str]:
    """(host or network, port, protocol) of an external egress rule, normalised (a cidr as its network)."""
    if not isinstance(rule, Mapping):
        raise Unreadable("connects.egress.external", "expected a list of mappings")
    where = str(rule.get("host") or "").lower().rstrip(".")
    if not where:
        try:
            where = str(ipaddress.ip_network(str(rule.get("cidr")), strict=False))
        except ValueError:
            where = str(rule.get("cidr"))
    return where, str(rule.get("port")), str(rule.get("protocol") or "TCP")


def _network(spec: Mapping[str, Any]) -> str:
    """public | internal | vpn, or none when nothing is exposed."""
    expose = mapping(spec, "expose")
    return str(expose.get("network", "internal")) if "expose" in spec else "none"


def _running(spec: Mapping[str, Any]) -> int | None:
    """Replica count the Deployment runs with, None when autoscale owns it (never zero by our hand)."""
    if spec.get("autoscale"):
        return None
    replicas = spec.get("replicas")
    return 1 if replicas is None else int(replicas)  # null is an absent field, as in the CR


SIZES = tuple(BUDGET_SEEDS)  # nano < small < ... < xlarge


def soft_destructive(change: Change, before: Deployment, after: Deployment) -> bool:
    """Whether a soft change still takes something away (its rule says when): it applies with an event."""
    when = RULES[change.rule].soft_destructive
    if when is None:
        return False
    if when == "always":
        return True
    if when == "removal":
        return change.from_ is not None and change.to is None
    if change.field == "replicas":  # what the Deployment runs with: an autoscaled side has no count of ours
        old, new = _running(before.spec), _running(after.spec)
        return old is not None and new is not None and new < old
    if change.from_ in SIZES and change.to in SIZES:
        return SIZES.index(change.to) < SIZES.index(change.from_)
    return False


def classify(before: Deployment, after: Deployment, domain: str = DEFAULT_DOMAIN) -> list[Change]:
    """Every change between two deployments of one environment, each with its rule, class and reason."""
    return _Classifier(before, after, domain).run()


def plan(before: Deployment, after: Deployment, domain: str = DEFAULT_DOMAIN) -> Plan:
    """classify, then roll up into a Plan for the application in after's environment."""
    subject = Subject("application", after.app, after.namespace, after.environment)
    return roll_up(classify(before, after, domain), subject)
