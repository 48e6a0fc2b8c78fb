"""Which Secrets an Application may make its pods read: one whose writer granted it to the app (the annotation
`apprafter.io/applications` lists the app's name), or one a provider gives the app (its claims' connection Secrets;
not a SourceCredential's pull secret, which only the kubelet reads). Writing an Application does not let its author
read the namespace's Secrets, so it must not let the author's pods read them either (a pod's env is the author's to
print)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from renderer.manifests.meta import claim_name, connection_secret
from renderer.names import GRANT_ANNOTATION

__all__ = ["GRANT_ANNOTATION", "PROVIDERS", "Provider", "granted", "references", "refused"]



# A provider says whether it gives `app` (its effective spec `spec`) the Secret `name` (its metadata, None when it does
# not exist); the hook for more providers (a SourceCredential's pull secret is deliberately none:
# docs/private-sources.md).
Provider = Callable[[str, Mapping[str, Any], str, Mapping[str, Any] | None], bool]


def _claims(app: str, spec: Mapping[str, Any], name: str, metadata: Mapping[str, Any] | None) -> bool:
    """A claim's connection Secret, of a need this environment declares: once it exists, only as written by that
    claim (its controlling owner; a Secret of that name someone else wrote is not the claim's to give). Not there
    yet, the claim writes it, and no pod runs before the claim is ready."""
    claims = [claim_name(app, need) for need in spec.get("needs") or {} if connection_secret(app, need) == name]
    if not claims:
        return False
    return metadata is None or any(
        ref.get("controller") is True and ref.get("kind") == "ResourceClaim" and ref.get("name") == claims[0]
        and str(ref.get("apiVersion") or "").startswith("apprafter.io/")
        for ref in metadata.get("ownerReferences") or [])


PROVIDERS: tuple[Provider, ...] = (_claims,)


def references(spec: Mapping[str, Any]) -> list[str]:
    """The Secrets an effective spec's env `secret:` references name (claim references are the claim's), sorted."""
    out = set()
    for value in (spec.get("env") or {}).values():
        if isinstance(value, Mapping) and isinstance(value.get("secret"), str):
            out.add(value["secret"].partition("/")[0])
    return sorted(out)


def _unsealed(name: str, metadata: Mapping[str, Any] | None) -> bool:
    """A sealed secret the app ships: not unsealed yet (the pods wait for it), or unsealed from the SealedSecret of
    its name (whose ownership, as the app's child, the operator checks before it applies it). A Secret of that name
    someone else wrote is not the app's to take: the controller never overwrites it."""
    return metadata is None or any(
        ref.get("controller") is True and ref.get("kind") == "SealedSecret" and ref.get("name") == name
        and str(ref.get("apiVersion") or "").startswith("bitnami.com/")
        for ref in metadata.get("ownerReferences") or [])


def granted(app: str, spec: Mapping[str, Any], name: str, metadata: Mapping[str, Any] | None,
            providers: Sequence[Provider] = PROVIDERS, sealed: Collection[str] = ()) -> bool:
    """Whether `app` may read Secret `name` (metadata: the Secret's, None when it does not exist); `sealed`: the
    names of the sealed secrets the app ships (its spec.sealedSecrets)."""
    if name in sealed:
        return _unsealed(name, metadata)
    if any(provider(app, spec, name, metadata) for provider in providers):
        return True
    if metadata is None:
        return False
    listed = str((metadata.get("annotations") or {}).get(GRANT_ANNOTATION) or "")
    return app in {part.strip() for part in listed.replace(",", " ").split()}


def refused(app: str, namespace: str, spec: Mapping[str, Any], metadata: Mapping[str, Mapping[str, Any] | None],
            sealed: Collection[str] = ()) -> str | None:
    """The SecretNotGranted message for the references `app` may not use (metadata by Secret name), else None."""
    names: Iterable[str] = (n for n in references(spec)
                            if not granted(app, spec, n, metadata.get(n), sealed=sealed))
    missing = sorted(names)
    if not missing:
        return None
    listed = ", ".join(f"{n}{_said(app, spec, n, metadata.get(n), sealed)}" for n in missing)
    return (f"env secret references to Secrets not granted to this Application: {listed}; whoever may write such a "
            f"Secret grants it with `kubectl annotate secret NAME -n {namespace} {GRANT_ANNOTATION}={app}` (a list: "
            "app,app2), or the app ships it sealed (`apprafter secret seal`); claim references need no grant")


def _said(app: str, spec: Mapping[str, Any], name: str, metadata: Mapping[str, Any] | None,
          sealed: Collection[str] = ()) -> str:
    """What the refusal says of one Secret: not found, named as a claim's without being written by it, or shipped
    sealed under the name of a Secret someone else wrote."""
    if name in sealed:
        return (" (shipped sealed, but a Secret of that name exists that no SealedSecret of this app unsealed: a "
                "sealed secret never overwrites it; seal yours under another name)")
    if metadata is None:
        return " (not found)"
    if any(connection_secret(app, need) == name for need in spec.get("needs") or {}):
        return " (named as this app's claim's connection Secret, but not written by the claim)"
    return ""
