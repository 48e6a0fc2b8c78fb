"""The I/O of a SourceCredential check (blocking, run in a thread, every step bounded): a registry's `GET /v2/`
through platform_stack.registry's transport (the token exchange or HTTP Basic its challenge asks for), and
`git ls-remote` with the login handed to git by GIT_ASKPASS from the environment, never on argv. What the servers
answered is read by lifecycle.credentials.checks."""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from lifecycle.credentials import checks
from lifecycle.credentials.material import Material
from lifecycle.image_digest import plain_http
from platform_stack.credentials import Credential
from platform_stack.registry.replies import RegistryFailure, failure_words
from platform_stack.registry.transport import Bounds, Transport
from toolchain.tools import scrubbed_env

__all__ = ["GIT_TIMEOUT", "REGISTRY_BOUNDS", "probe_git", "probe_registry"]

REGISTRY_BOUNDS = Bounds(connect_s=5.0, read_s=10.0, deadline_s=20.0)  # one host's check, token request included
GIT_TIMEOUT = 20.0  # one `git ls-remote`, connecting included
STDERR_CAP = 64 << 10  # bytes of git's stderr read back
# git asks "Username for 'URL': " then "Password for 'URL': "; the answers come from this process's environment.
_ASKPASS = """#!/bin/sh
case "$1" in
  Username*) printf '%s\\n' "$APPRAFTER_GIT_USERNAME" ;;
  *) printf '%s\\n' "$APPRAFTER_GIT_PASSWORD" ;;
esac
"""


def probe_registry(host: str, login: Material, bounds: Bounds = REGISTRY_BOUNDS,
                   insecure: Sequence[str] = ()) -> checks.Verdict:
    """`GET /v2/` on `host` with the login: plain HTTP for a loopback registry and the platform's
    --insecure-registries (lifecycle.image_digest.plain_http, as image updates ask them), HTTPS otherwise."""
    credential = Credential(login.username, login.password, source="the SourceCredential")
    transport = Transport(host, plain_http(host, insecure), credential, bounds)
    try:
        reply = transport.send("GET", f"{transport.base}/v2/")
    except RegistryFailure as e:
        return checks.registry_verdict(host, None, str(e))
    finally:
        transport.close()
    return checks.registry_verdict(host, reply.status, failure_words(reply))


def probe_git(url: str, login: Material, timeout_s: float = GIT_TIMEOUT) -> checks.Verdict:
    """`git ls-remote URL` with the login, no system or global git config, no terminal prompt, within timeout_s."""
    with tempfile.TemporaryDirectory(prefix="apprafter-git-check-") as scratch:
        askpass = Path(scratch) / "askpass"
        askpass.write_text(_ASKPASS)
        askpass.chmod(stat.S_IRWXU)
        env = scrubbed_env(scratch, {"GIT_ASKPASS": str(askpass), "GIT_TERMINAL_PROMPT": "0",
                                     "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
                                     "APPRAFTER_GIT_USERNAME": login.username,
                                     "APPRAFTER_GIT_PASSWORD": login.password})
        argv = ["git", "-c", "credential.helper=", "-c", "protocol.allow=never", "-c", "protocol.http.allow=always",
                "-c", "protocol.https.allow=always", "ls-remote", "--heads", "--", url]
        errors = Path(scratch) / "stderr"
        with errors.open("wb") as sink:
            try:
                proc = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=sink, timeout=timeout_s, check=False, cwd=scratch)
                code: int | None = proc.returncode
            except subprocess.TimeoutExpired:
                code = None
        with errors.open("rb") as said:
            text = said.read(STDERR_CAP).decode("utf-8", "replace")
    return checks.git_verdict(url, code, text, timeout_s)
