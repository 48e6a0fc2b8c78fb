"""Which ServiceProvider a ResourceClaim is bound to (spec §3.2, §3.3), and what a claim that is not ready says.

A claim binds to the one provider whose spec.type is the claim's and whose labels hold every key=value of the
claim's selector. A bound claim (status.provider) never moves: its data lives at that provider, so a new matching
provider leaves it where it is, and one whose provider is gone stays bound and says so. reconciler/claims.py reads
the claim and the providers, calls `bind`, writes `status_of`; lifecycle.application says why a need waits with
`waiting_reason`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from lifecycle.conditions import Condition, find_condition, render
from lifecycle.service_provider import backends

__all__ = ["AMBIGUOUS", "BOUND", "CLAIM_REFUSED", "MISSING", "NOT_ADMITTED", "NO_MATCH", "PROVISIONED", "UNBOUND",
           "Binding", "admits", "bind", "labels_text", "refusal", "status_of", "waiting_reason"]

BOUND = "Bound"  # the condition's type, and its reason when True
PROVISIONED = "Ready"  # a backend's condition on the claims it provisions (True: status.ready, the Secret written)
NO_MATCH, AMBIGUOUS, MISSING = "NoMatchingProvider", "AmbiguousProvider", "ProviderMissing"
NOT_ADMITTED = "NamespaceNotAdmitted"  # bound, and the provider's spec.namespaces no longer lists the claim's
# What an Application says of a claim that waits for a person, not for time (`refusal`): not bound to a provider
# that serves it, or bound and its backend will not provision it as it is asked.
UNBOUND, CLAIM_REFUSED = "Unbound", "ClaimRefused"
# A backend's Ready reasons that nothing but a person's change ends (the need, the provider, an object in the way):
# a new image, a restart or a retry never does. Each is a backend's (lifecycle/backends/), written on the claim.
WAITS_FOR_A_PERSON = frozenset({
    "InvalidConfig", "VersionNotServed", "BucketsNotServed", "ShareDoesNotFit", "SizeAboveLimit", "RolesLimitReached",
    "BackendRefused", "VolumeConflict", "VolumeLost", "KeptForAnotherNamespace"})
LISTED = 5  # providers named in one message at most (then "and N more")
LABELS_SHOWN = 80  # characters of one provider's labels in a message at most


class Binding(NamedTuple):
    """The provider the claim is bound to (None: not bound) and its Bound condition."""

    provider: str | None
    condition: Condition


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    labels = (obj.get("metadata") or {}).get("labels")
    return labels if isinstance(labels, Mapping) else {}


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def labels_text(labels: Mapping[str, Any]) -> str:
    """key=value,... sorted by key (a selector or a provider's labels as a message shows them)."""
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def admits(provider: Mapping[str, Any], namespace: str) -> bool:
    """Whether the provider serves claims of `namespace`: its spec.namespaces lists it, or it lists none (every
    namespace)."""
    listed = _spec(provider).get("namespaces")
    return not isinstance(listed, list) or namespace in listed


def _matches(provider: Mapping[str, Any], kind: Any, selector: Mapping[str, Any], namespace: str) -> bool:
    labels = _labels(provider)
    return (_spec(provider).get("type") == kind and all(labels.get(k) == v for k, v in selector.items())
            and admits(provider, namespace))


def _listed(names: list[str]) -> str:
    more = len(names) - LISTED
    return ", ".join(names[:LISTED]) + (f" and {more} more" if more > 0 else "")


def _described(provider: Mapping[str, Any]) -> str:
    shown = labels_text(_labels(provider)) or "no labels"
    if len(shown) > LABELS_SHOWN:
        shown = shown[: LABELS_SHOWN - 1] + "…"
    return f"{_name(provider)} [{shown}]"


def bind(claim: Mapping[str, Any], providers: Iterable[Mapping[str, Any]]) -> Binding:
    """The claim's binding given every ServiceProvider of the cluster: its own provider kept while it exists
    (ProviderMissing once it is gone), else the one candidate, else why there is none (NoMatchingProvider) or
    too many (AmbiguousProvider). Same input, same message (sorted by name)."""
    spec = _spec(claim)
    kind = spec.get("type")
    selector = spec.get("selector") if isinstance(spec.get("selector"), Mapping) else {}
    assert isinstance(selector, Mapping)
    by_name = {_name(p): p for p in providers}
    wanted = labels_text(selector)
    namespace = str((claim.get("metadata") or {}).get("namespace") or "")
    bound = ((claim.get("status") or {}) if isinstance(claim.get("status"), Mapping) else {}).get("provider")
    if isinstance(bound, str) and bound:
        provider = by_name.get(bound)
        if provider is None:
            return Binding(bound, Condition(BOUND, "False", MISSING, f"bound to ServiceProvider {bound}, which no "
                                            "longer exists: its data was there, so the claim stays bound to it "
                                            f"(create ServiceProvider {bound} again; a claim never moves)"))
        said = f"bound to ServiceProvider {bound}"
        if not admits(provider, namespace):  # its data is there: kept, not provisioned further (the backends ask)
            return Binding(bound, Condition(BOUND, "False", NOT_ADMITTED, f"bound to ServiceProvider {bound}, whose "
                                            f"spec.namespaces no longer lists {namespace}: its data stays there, "
                                            "nothing more is provisioned (its administrator lists the namespace "
                                            "again, or moves the data)"))
        if not _matches(provider, kind, selector, namespace):
            said += (f" (it no longer is of type {kind} with labels {wanted or 'any'}; a bound claim stays where "
                     "its data is)")
        return Binding(bound, Condition(BOUND, "True", BOUND, said))
    need = f"needs.{kind}"
    candidates = sorted(name for name, p in by_name.items() if _matches(p, kind, selector, namespace))
    if len(candidates) == 1:
        return Binding(candidates[0], Condition(BOUND, "True", BOUND, f"bound to ServiceProvider {candidates[0]}"))
    with_labels = f" with labels {wanted}" if wanted else ""
    if candidates:
        return Binding(None, Condition(BOUND, "False", AMBIGUOUS, f"{len(candidates)} ServiceProviders of type "
                                       f"{kind} match{with_labels}: {_listed(candidates)}; narrow {need}.selector "
                                       "to a label only one of them has"))
    of_type = [by_name[n] for n in sorted(by_name) if _spec(by_name[n]).get("type") == kind]
    same_type = [p for p in of_type if admits(p, namespace)]  # another team's dedicated one is not named here
    said = f"no ServiceProvider of type {kind}" + (f" has labels {wanted}" if wanted else " exists")
    if same_type:
        shown = [_described(p) for p in same_type]
        more = len(shown) - LISTED
        said += (f" (of type {kind}: {', '.join(shown[:LISTED])}{f' and {more} more' if more > 0 else ''}; change "
                 f"{need}.selector to match one)")
    elif of_type:
        said = (f"no ServiceProvider of type {kind} serves namespace {namespace} (each lists other namespaces in "
                f"spec.namespaces: a cluster administrator lists {namespace} in one, or creates one)")
    elif kind not in backends():  # the webhook refuses every provider of it: no administrator can make one
        said = (f'no ServiceProvider serves "{kind}": no backend on this platform serves {kind} yet (types with one: '
                f"{', '.join(sorted(backends()))}), so none can be made: remove {need}")
    elif wanted:
        said += f" (none of type {kind} exists: a cluster administrator creates one)"
    else:
        said += " (a cluster administrator creates one)"
    return Binding(None, Condition(BOUND, "False", NO_MATCH, said))


def status_of(binding: Binding, claim: Mapping[str, Any], timestamp: str,
              provisioned: tuple[Condition | Sequence[Condition], Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The claim's status as the operator writes it: status.provider and the Bound condition (each transition time
    kept while its status holds), and, when the operator's own backend serves the provider, that backend's Ready
    condition (or conditions: a disk claim's Size besides its Ready) and fields (status.ready, status.connection).
    Other backends' status is theirs."""
    status = claim.get("status") if isinstance(claim.get("status"), Mapping) else {}
    assert isinstance(status, Mapping)
    generation = int((claim.get("metadata") or {}).get("generation") or 0)
    backend = provisioned[0] if provisioned else []
    conditions = [binding.condition, *([backend] if isinstance(backend, Condition) else backend)]
    written = render(conditions, status.get("conditions") or [], generation, timestamp)
    return {**({"provider": binding.provider} if binding.provider else {}), **(provisioned[1] if provisioned else {}),
            "conditions": written}


def waiting_reason(claim: Mapping[str, Any]) -> str:
    """Why a claim that is not ready waits, as its live status says: its Bound condition when that is not True,
    else its backend's Ready condition when it has written one, else that its provider has not made it ready."""
    status = claim.get("status") if isinstance(claim.get("status"), Mapping) else {}
    assert isinstance(status, Mapping)
    bound = find_condition(status.get("conditions"), BOUND)
    if bound and bound.get("status") != "True":
        return f"{bound.get('reason')}: {bound.get('message')}"
    provider = status.get("provider")
    provisioning = find_condition(status.get("conditions"), PROVISIONED)
    if isinstance(provider, str) and provider and provisioning and provisioning.get("status") != "True":
        return f"bound to ServiceProvider {provider}: {provisioning.get('reason')}: {provisioning.get('message')}"
    if isinstance(provider, str) and provider:
        return f"bound to ServiceProvider {provider}, not ready yet (its backend provisions it)"
    return "not bound to a ServiceProvider yet"


def refusal(claim: Mapping[str, Any]) -> str | None:
    """Whether a claim that is not ready waits for a person rather than for time, as its live status says: UNBOUND
    when its Bound condition is False (no provider serves it, several do, its provider is gone or no longer admits
    its namespace), CLAIM_REFUSED when its backend's Ready reason is one of WAITS_FOR_A_PERSON; else None (it is
    being provisioned, or has not been looked at yet)."""
    status = claim.get("status") if isinstance(claim.get("status"), Mapping) else {}
    assert isinstance(status, Mapping)
    if status.get("ready") is True:
        return None
    bound = find_condition(status.get("conditions"), BOUND)
    if bound and bound.get("status") == "False":
        return UNBOUND
    provisioning = find_condition(status.get("conditions"), PROVISIONED)
    if provisioning.get("status") == "False" and provisioning.get("reason") in WAITS_FOR_A_PERSON:
        return CLAIM_REFUSED
    return None
