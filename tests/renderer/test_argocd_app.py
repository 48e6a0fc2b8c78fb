"""renderer.argocd_app: the Argo CD Application `apprafter app add` writes."""

from __future__ import annotations

from renderer.argocd_app import Source, argocd_application, plain_repo_url


def test_the_application_names_our_plugin_the_environment_and_deletes_what_it_deployed() -> None:
    app = argocd_application("shop", "prod", Source("https://git.example.com/acme/shop.git", "services/shop", "main"),
                             namespace="shop-prod", project="team-a", argocd_namespace="argocd")
    assert app == {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": "shop-prod", "namespace": "argocd",
                     "labels": {"apprafter.io/app": "shop", "apprafter.io/environment": "prod"},
                     "finalizers": ["resources-finalizer.argocd.argoproj.io/background"]},
        "spec": {"project": "team-a",
                 "source": {"repoURL": "https://git.example.com/acme/shop.git", "path": "services/shop",
                            "targetRevision": "main",
                            "plugin": {"name": "apprafter-cue-v1",
                                       "parameters": [{"name": "environment", "string": "prod"}]}},
                 "destination": {"server": "https://kubernetes.default.svc", "namespace": "shop-prod"},
                 "syncPolicy": {"automated": {"prune": True, "selfHeal": True}}}}
    created = argocd_application("shop", "prod", Source("u", ".", "main"), namespace="x", project="p",
                                 argocd_namespace="argocd", create_namespace=True)
    assert created["spec"]["syncPolicy"]["syncOptions"] == ["CreateNamespace=true"]


def test_a_login_in_the_url_is_left_out() -> None:
    assert plain_repo_url("https://me:ghp_secret@github.com/acme/shop.git") == "https://github.com/acme/shop.git"
    assert plain_repo_url("HTTPS://token@host/x") == "HTTPS://host/x"
    assert plain_repo_url("git@github.com:acme/shop.git") == "git@github.com:acme/shop.git"  # ssh: a user, no secret
    assert plain_repo_url(" https://github.com/acme/shop ") == "https://github.com/acme/shop"
