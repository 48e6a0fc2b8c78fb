"""Argo CD's git URL rule, so the gate and the derivation agree with the repo-server on which repository a repo-creds
template serves: `NormalizeGitURL` and the longest-prefix match of `getRepositoryCredentialIndex` (argo-cd
util/git/git.go, util/db/repository_secrets.go; the same in v3.1.16 and v3.6.1)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit

__all__ = ["credential_index", "normalize_git_url", "template_covers"]

SSH_URL = re.compile(r"^(ssh://)?([^/:]*?)@[^@]+$")  # Argo CD's sshURLRegex
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:")
BAD_ESCAPE = re.compile(r"%(?![0-9a-f]{2})")


def _parses(url: str) -> bool:
    """Whether Go's url.Parse takes the (lowercased) URL; its String() gives such a URL back unchanged."""
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url) or BAD_ESCAPE.search(url):
        return False
    if url.startswith(":") or (":" in url.split("/", 1)[0] and not SCHEME.match(url)):
        return False  # "missing protocol scheme" / "first path segment in URL cannot contain colon"
    if "//" in url and SCHEME.match(url):
        try:
            urlsplit(url).port  # noqa: B018 - raises on a port that is not a number, as url.Parse refuses it
        except ValueError:
            return False
    return True


def normalize_git_url(repo: str) -> str:
    """Argo CD's NormalizeGitURL: trimmed, lowercased, scp-style SSH written as ssh:// and then shown without it, one
    trailing `.git` cut; "" when Go's URL parser refuses it (such a template matches nothing)."""
    repo = repo.strip().lower()
    if SSH_URL.match(repo) and not repo.startswith("ssh://"):
        repo = "ssh://" + repo.replace(":", "/", 1)
    repo = repo.removesuffix(".git")
    if not _parses(repo):
        return ""
    return repo.removeprefix("ssh://")


def credential_index(template_urls: Iterable[str], repo_url: str) -> int:
    """Which repo-creds template Argo CD uses for a repository: the index of the longest normalised `url` that the
    normalised repository URL starts with (the first of equal lengths), -1 for none. A plain string prefix, as Argo
    CD's: `https://host/org` also serves `https://host/organisation/app`."""
    repo = normalize_git_url(repo_url)
    best, index = 0, -1
    for position, url in enumerate(template_urls):
        template = normalize_git_url(url)
        if repo.startswith(template) and len(template) > best:
            best, index = len(template), position
    return index


def template_covers(template_urls: Iterable[str], repo_url: str) -> bool:
    """Whether any of the templates serves the repository."""
    return credential_index(template_urls, repo_url) >= 0
