"""A git half scoped to Argo CD projects (spec.git.projects), decided without a cluster: the spec read and its webhook
twin, the project-scoped repository Secrets derived in place of templates (one per project and repository an
Application of a listed project syncs), the status that records the scope, and the gate on a narrowing (AR-SC005)."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest

from lifecycle.credentials.coverage import Coverage, User, applied_coverage, coverage_of, repository_users
from lifecycle.credentials.gate import credential_plan
from lifecycle.credentials.material import Material
from lifecycle.credentials.outputs import half_of, repo_creds, repository_secrets
from lifecycle.credentials.spec import argocd_project, check, read
from tests.lifecycle.credentials.test_assess import SPEC, cluster, credential, run
from tests.lifecycle.credentials.test_spec import _review

LOGIN = Material("deploy", "pw-never-in-a-message")
SCOPED_SPEC = {"git": {**SPEC["git"], "projects": ["team-a", "shop.web"]}}


def argo_app(name: str, project: str | None, *repos: str) -> dict[str, Any]:
    """An Argo CD Application of `project` (None: spec.project unset) syncing `repos` (one source, or sources[])."""
    spec: dict[str, Any] = {"project": project} if project is not None else {}
    if len(repos) == 1:
        spec["source"] = {"repoURL": repos[0]}
    else:
        spec["sources"] = [{"repoURL": r} for r in repos]
    return {"metadata": {"name": name, "namespace": "argocd"}, "spec": spec}


APPS = [argo_app("a-shop", "team-a", "https://github.com/myorg/shop"),
        argo_app("a-shop-again", "team-a", "https://github.com/MyOrg/shop.git"),  # the same repository to Argo CD
        argo_app("web", "shop.web", "https://github.com/myorg/shop", "https://github.com/myorg/web"),
        argo_app("intruder", "team-b", "https://github.com/myorg/shop"),
        argo_app("unset", None, "https://github.com/myorg/shop"),  # Argo CD's `default` project
        argo_app("elsewhere", "team-a", "https://gitlab.com/myorg/shop")]


def decoded(secret: dict[str, Any]) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}


def test_projects_are_read_sorted_absent_is_every_project_and_the_twin_refuses_nonsense() -> None:
    obj = credential(SCOPED_SPEC)
    assert check(obj, "apprafter-system") == [] and _review(obj)["allowed"] is True
    assert read(obj).git.projects == ("shop.web", "team-a")  # type: ignore[union-attr]
    assert read(credential()).git.projects is None  # type: ignore[union-attr]
    assert read(credential()).registry.projects is None  # type: ignore[union-attr]
    assert argocd_project(argo_app("x", None, "r")) == "default"


@pytest.mark.parametrize(("projects", "field", "said"), [
    ([], "spec.git.projects", "1 to 64 Argo CD projects; leave spec.git.projects out for every project"),
    ("team-a", "spec.git.projects", "1 to 64 Argo CD projects"),
    ([f"p{i}" for i in range(65)], "spec.git.projects", "1 to 64 Argo CD projects"),
    (["team-a", "team-a"], "spec.git.projects", "a project is listed twice"),
    (["Team"], "spec.git.projects[0]", "a project is an Argo CD AppProject's name"),
    (["ok", "team/a"], "spec.git.projects[1]", "a project is an Argo CD AppProject's name"),
    (["a" * 254], "spec.git.projects[0]", "at most 253"),
    ([7], "spec.git.projects[0]", "a project is an Argo CD AppProject's name"),
])
def test_the_webhook_twin_refuses_malformed_projects(projects: Any, field: str, said: str) -> None:
    obj = credential({"git": {**SPEC["git"], "projects": projects}})
    problems = check(obj, "apprafter-system")
    assert any(f == field and said in reason for f, reason in problems), problems
    refused = _review(obj)
    assert not refused["allowed"] and field in refused["status"]["message"]


def test_a_scoped_git_half_derives_a_repository_secret_per_project_and_repository_and_no_template() -> None:
    secrets = repository_secrets(read(credential(SCOPED_SPEC)), LOGIN, "argocd", APPS)
    assert sorted((d["project"], d["url"]) for d in map(decoded, secrets)) == [
        ("shop.web", "https://github.com/myorg/shop"), ("shop.web", "https://github.com/myorg/web"),
        ("team-a", "https://github.com/myorg/shop")]  # one of the two spellings of one repository
    for secret in secrets:
        assert secret["metadata"]["labels"]["argocd.argoproj.io/secret-type"] == "repository"
        assert secret["metadata"]["namespace"] == "argocd" and half_of(secret) == "git"
        assert {k: v for k, v in decoded(secret).items() if k in ("type", "username", "password")} == {
            "type": "git", "username": "deploy", "password": LOGIN.password}
    assert len({s["metadata"]["name"] for s in secrets}) == 3
    assert repository_secrets(read(credential(SCOPED_SPEC)), LOGIN, "argocd", reversed(APPS)) == secrets


def test_assess_derives_the_scoped_secrets_prunes_the_templates_and_records_the_scope() -> None:
    before = credential()
    templates = repo_creds(read(before), LOGIN, "argocd")
    obj = credential(SCOPED_SPEC, status={"git": {"repoPrefixes": ["https://github.com/myorg/"]}})
    listed = [a for a in APPS if argocd_project(a) in ("team-a", "shop.web")]
    decided, _ = run("myorg", obj, cluster(obj, derived=templates, deployments=[], argo=listed))
    assert decided.decision is not None and decided.decision.allowed  # no Application of another project loses
    assert decided.derive == repository_secrets(read(obj), LOGIN, "argocd", APPS)  # only listed projects' anyway
    assert decided.prune == templates
    status = decided.status
    assert status is not None and status["git"]["projects"] == ["shop.web", "team-a"]
    assert status["repoCredsSecrets"] == sorted(s["metadata"]["name"] for s in decided.derive)
    assert applied_coverage(status) == Coverage(("https://github.com/myorg/",), None, None, ("shop.web", "team-a"))
    assert LOGIN.password not in str(status)


def test_an_application_of_a_project_left_out_makes_the_narrowing_wait_for_a_plan() -> None:
    users = repository_users(APPS)
    intruder = User("Argo CD Application argocd/intruder", "git", "https://github.com/myorg/shop", project="team-b")
    assert intruder in users
    every = Coverage(("https://github.com/myorg/",), None)
    scoped = coverage_of(read(credential(SCOPED_SPEC)))
    plan = credential_plan("myorg", "ns", every, scoped, users)
    assert plan is not None and plan.gated
    [change] = plan.changes
    assert (change.rule, change.field, change.from_, change.to) == (
        "AR-SC005", "git.projects", None, ["shop.web", "team-a"])
    assert "argocd/intruder" in change.reason and "argocd/unset" in change.reason and "a-shop" not in change.reason
    # nobody of a project left out: soft; a widening: soft
    ours = [u for u in users if u.project in ("team-a", "shop.web")]
    assert not credential_plan("myorg", "ns", every, scoped, ours).gated  # type: ignore[union-attr]
    assert not credential_plan("myorg", "ns", scoped, every, users).gated  # type: ignore[union-attr]


def test_prefixes_and_deletion_count_only_the_projects_the_half_served() -> None:
    scoped = Coverage(("https://github.com/myorg/",), None, None, ("team-a",))
    intruder = [u for u in repository_users(APPS) if u.project == "team-b"]
    assert not credential_plan("myorg", "ns", scoped, None, intruder).gated  # type: ignore[union-attr]
    narrowed = scoped._replace(git=("https://github.com/myorg/web/",))
    assert not credential_plan("myorg", "ns", scoped, narrowed, intruder).gated  # type: ignore[union-attr]
    mine = [u for u in repository_users(APPS) if u.project == "team-a"]
    deleted = credential_plan("myorg", "ns", scoped, None, mine)
    assert deleted is not None and deleted.gated and {c.rule for c in deleted.gated_changes} == {"AR-SC001",
                                                                                                 "AR-SC003"}


def test_a_held_narrowing_keeps_serving_every_project_through_the_templates() -> None:
    templates = repo_creds(read(credential()), LOGIN, "argocd")
    obj = credential(SCOPED_SPEC, status={"git": {"repoPrefixes": ["https://github.com/myorg/"]}})
    decided, _ = run("myorg", obj, cluster(copy.deepcopy(obj), derived=templates, deployments=[], argo=APPS))
    assert decided.decision is not None and not decided.decision.allowed
    assert decided.derive == [] and decided.prune == [] and decided.status is not None
    assert "projects" not in decided.status["git"] and decided.status["migrationPlan"]
