"""Which SourceCredentials an event on an object their controller watches concerns, decided without a cluster: an
unsealed Secret (the credentials reading their material from it), one of our Deployments (those covering its image
or whose pull secret its pods reference) or Applications (those covering its image), an Argo CD Application (those
covering a repository it syncs), a derived Secret or a MigrationPlan (the credential it names)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lifecycle.credentials.coverage import application_image, covering, deployment_image, repository_users, serving
from lifecycle.credentials.outputs import attached, derived_from, pull_secret_name
from lifecycle.plans import credential_of

__all__ = ["backed_by", "concerned_by_application", "concerned_by_deployment", "concerned_by_image_of", "deriving",
           "planning"]


def backed_by(credentials: Iterable[Mapping[str, Any]], secret: str) -> list[str]:
    """The SourceCredentials serving now whose halves read their material from the unsealed Secret `secret`."""
    return sorted({c.name for c in serving(credentials)
                   if any(h is not None and h.backend.sealed_secret == secret for h in (c.git, c.registry))})


def concerned_by_deployment(credentials: Sequence[Mapping[str, Any]], deployment: Mapping[str, Any]) -> list[str]:
    """The SourceCredentials a Deployment of ours concerns: those covering its image, and those whose pull secret its
    pods reference."""
    image = deployment_image(deployment)
    referenced = set(attached(deployment))
    holders = {c.name for c in serving(credentials) if pull_secret_name(c.name) in referenced}
    return sorted({*(covering(credentials, "registry", image) if image else []), *holders})


def concerned_by_application(credentials: Sequence[Mapping[str, Any]], application: Mapping[str, Any]) -> list[str]:
    """The SourceCredentials covering a repository an Argo CD Application syncs."""
    return sorted({name for user in repository_users([application])
                   for name in covering(credentials, "git", user.target)})


def concerned_by_image_of(credentials: Sequence[Mapping[str, Any]], application: Mapping[str, Any]) -> list[str]:
    """The SourceCredentials covering the image one of our Applications names (its pull secret precedes the first
    Deployment)."""
    image = application_image(application)
    return covering(credentials, "registry", image) if image is not None else []


def deriving(secret: Mapping[str, Any], namespace: str) -> list[str]:
    """The SourceCredential of `namespace` a derived Secret came from."""
    source = derived_from(secret)
    return [source[1]] if source and source[0] == namespace else []


def planning(plan: Mapping[str, Any]) -> list[str]:
    """The SourceCredential a credential-scope MigrationPlan is about."""
    name = credential_of(plan)
    return [name] if name else []
