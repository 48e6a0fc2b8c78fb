"""Argo CD's git URL normalisation and repo-creds matching, checked on Argo CD's own test cases (argo-cd v3.6.1
util/git/git_test.go TestSameURL, TestIsSSHURL; util/db db_test.go TestGetRepositoryCredentials,
repository_secrets_test.go TestSecretsRepositoryBackend_GetRepoCreds) and on what the gate reads from it."""

from __future__ import annotations

import pytest

from lifecycle.credentials.coverage import covers_repository
from lifecycle.credentials.git_urls import credential_index, normalize_git_url

# TestSameURL: each pair is the same repository for Argo CD.
SAME_URL = {
    "git@GITHUB.com:argoproj/test": "git@github.com:argoproj/test.git",
    "git@GITHUB.com:argoproj/test.git": "git@github.com:argoproj/test.git",
    "git@GITHUB.com:test": "git@github.com:test.git",
    "git@GITHUB.com:test.git": "git@github.com:test.git",
    "https://GITHUB.com/argoproj/test": "https://github.com/argoproj/test.git",
    "https://GITHUB.com/argoproj/test.git": "https://github.com/argoproj/test.git",
    "https://github.com/FOO": "https://github.com/foo",
    "https://github.com/TEST": "https://github.com/TEST.git",
    "https://github.com/TEST.git": "https://github.com/TEST.git",
    "https://github.com:4443/TEST": "https://github.com:4443/TEST.git",
    "https://github.com:4443/TEST.git": "https://github.com:4443/TEST",
    "ssh://git@GITHUB.com/argoproj/test": "git@github.com:argoproj/test.git",
    "ssh://git@GITHUB.com/argoproj/test.git": "git@github.com:argoproj/test.git",
    "ssh://git@GITHUB.com/test.git": "git@github.com:test.git",
    "ssh://git@github.com/test": "git@github.com:test.git",
    " https://github.com/argoproj/test ": "https://github.com/argoproj/test.git",
    "\thttps://github.com/argoproj/test\n": "https://github.com/argoproj/test.git",
    "https://1234.visualstudio.com/myproj/_git/myrepo": "https://1234.visualstudio.com/myproj/_git/myrepo",
    "https://dev.azure.com/1234/myproj/_git/myrepo": "https://dev.azure.com/1234/myproj/_git/myrepo",
}


@pytest.mark.parametrize(("left", "right"), sorted(SAME_URL.items()))
def test_argocds_same_url_cases_normalise_alike(left: str, right: str) -> None:
    assert normalize_git_url(left) != ""
    assert normalize_git_url(left) == normalize_git_url(right)


@pytest.mark.parametrize(("url", "normal"), [
    ("git@GITHUB.com:argoproj/test.git", "git@github.com/argoproj/test"),  # scp-style: ssh:// added, then cut
    ("ssh://git@github.com/argoproj/test.git", "git@github.com/argoproj/test"),
    ("https://github.com/myorg/", "https://github.com/myorg/"),  # a trailing slash stays
    ("https://github.com/myorg/app.git/", "https://github.com/myorg/app.git/"),  # only a final .git goes
    ("git://github.com/argoproj/test.git", "git://github.com/argoproj/test"),  # not SSH (TestIsSSHURL)
    ("ssh://git@GITHUB.com:argoproj/test", ""),  # url.Parse refuses the port
    ("://not a url", ""),
])
def test_normalisation_as_argocd_writes_it(url: str, normal: str) -> None:
    assert normalize_git_url(url) == normal


def test_the_longest_template_wins_the_first_of_equal_length() -> None:
    templates = ["https://git.example/", "https://git.example/team/", "https://GIT.example/team/", "https://x/"]
    assert credential_index(templates, "https://git.example/team/app.git") == 1
    assert credential_index(templates, "https://git.example/other/app") == 0
    assert credential_index(templates, "https://elsewhere/app") == -1


def test_argocds_repository_credentials_cases() -> None:
    # TestGetRepositoryCredentials: a template https://secured serves https://secured/repo only.
    for repo, index in (("https://unknown/repo", -1), ("https://known/repo", -1), ("https://secured/repo", 0),
                        ("https://missing/repo", -1)):
        assert credential_index(["https://secured"], repo) == index
    # TestSecretsRepositoryBackend_GetRepoCreds: scp-style templates by their normalised prefix.
    templates = ["git@github.com:argoproj", "git@gitlab.com", "git@gitlab.com"]
    assert credential_index(templates, "git@github.com:argoproj") == 0
    assert credential_index(templates, "git@gitlab.com") == 1
    assert credential_index(templates, "ssh://git@github.com/argoproj/argo-cd.git") == 0


def test_a_template_argocd_cannot_parse_serves_nothing() -> None:
    assert credential_index(["ssh://git@host:notaport/"], "ssh://git@host:notaport/app") == -1


def test_the_gate_covers_what_argocd_would_serve() -> None:
    prefixes = ["https://github.com/myorg/", "http://git.internal:3000/team"]
    assert covers_repository(prefixes, "https://GitHub.com/MyOrg/app.git")
    assert covers_repository(prefixes, "http://git.internal:3000/team/app")
    # Argo CD's match is a plain string prefix: a prefix without its slash serves a longer name too.
    assert covers_repository(prefixes, "http://git.internal:3000/teamwork/app")
    assert not covers_repository(prefixes, "https://github.com/myorganisation/app")
    assert not covers_repository(prefixes, "http://github.com/myorg/app")  # the scheme is part of the URL
    assert not covers_repository(prefixes, "git@github.com:myorg/app.git")  # scp-style is not https
