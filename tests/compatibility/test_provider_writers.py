"""Who may write a ServiceProvider (compatibility.authority.provider_writer): the named writers, by username or by
group; nobody named, RBAC alone decides. Through the real API server: tests/admission/test_service_providers.py."""

from __future__ import annotations

from compatibility.authority import provider_writer

WRITERS = ("group:system:masters", "system:serviceaccount:argocd:argocd-application-controller")


def test_the_named_writers_by_username_or_group_may_and_nobody_else() -> None:
    assert provider_writer("system:serviceaccount:argocd:argocd-application-controller", (), WRITERS) is None
    assert provider_writer("kubernetes-admin", ("system:authenticated", "system:masters"), WRITERS) is None
    refused = provider_writer("tenant", ("system:authenticated", "masters"), WRITERS)
    assert refused == ("only the platform's provider writers (group:system:masters, system:serviceaccount:argocd:"
                       "argocd-application-controller) may write ServiceProviders; 'tenant' may not (a provider "
                       "decides where the data of every claim it binds lives)")
    # A username that looks like a group entry is not the group; a group named like a user is not the user.
    assert provider_writer("group:system:masters", (), WRITERS) is not None
    assert provider_writer("x", ("system:serviceaccount:argocd:argocd-application-controller",), WRITERS) is not None


def test_nobody_named_leaves_it_to_rbac() -> None:
    assert provider_writer("anyone", (), ()) is None
