"""The GitHub Action's step (action.yml): plan every app against the pull request's base, then tell GitHub.

Reads what GitHub gives a step (GITHUB_EVENT_PATH, GITHUB_REPOSITORY, GITHUB_API_URL, GITHUB_TOKEN,
GITHUB_STEP_SUMMARY, GITHUB_OUTPUT) and the action's inputs (INPUT_*); runs `apprafter plan --all DIR --from
git:<base> -o json` once; writes the Markdown to the job summary, creates or updates the one pull-request comment
that starts with MARKER, sets the outputs `gated` and `plan-names`, and when the input is invalid prints one
`::error file=,line=,col=::` annotation per problem (GitHub shows each on the offending line of the pull request).
Exit 1 on invalid input, 2 when no plan could be made (a tool failed); a gated change fails the step only with
`fail-on-gated: true`.

    python -m apprafter.github_action
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

from toolchain.errors import ToolFailure

__all__ = ["MARKER", "CommentError", "Settings", "annotation", "main", "run", "upsert_comment"]

MARKER = "<!-- apprafter-plan -->"
SUMMARY_LIMIT = 1_000_000  # GitHub takes up to 1 MiB of job summary per step
PER_PAGE = 100
MAX_PAGES = 50  # 5000 comments: a pull request with more is not searched further
TIMEOUT = 30.0


class Settings:
    """The step's inputs and GitHub's variables, read once."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.directory = env.get("INPUT_DIRECTORY") or "."
        self.environments = (env.get("INPUT_ENVIRONMENTS") or "").replace(",", " ").split()
        self.base = env.get("INPUT_BASE") or ""
        self.comment = (env.get("INPUT_COMMENT") or "true").lower() == "true"
        self.fail_on_gated = (env.get("INPUT_FAIL_ON_GATED") or "false").lower() == "true"
        self.token = env.get("INPUT_TOKEN") or env.get("GITHUB_TOKEN") or ""
        self.api = (env.get("GITHUB_API_URL") or "https://api.github.com").rstrip("/")
        self.repository = env.get("GITHUB_REPOSITORY") or ""
        self.event_path = env.get("GITHUB_EVENT_PATH") or ""
        self.summary = env.get("GITHUB_STEP_SUMMARY") or ""
        self.output = env.get("GITHUB_OUTPUT") or ""


def _event(settings: Settings) -> dict[str, Any]:
    if not settings.event_path:
        return {}
    with open(settings.event_path, encoding="utf-8") as file:
        event: dict[str, Any] = json.load(file)
    return event


def _plan(settings: Settings, base: str) -> subprocess.CompletedProcess[str]:
    """`apprafter plan --all` with this interpreter's apprafter (the one the action installed)."""
    argv = [sys.executable, "-m", "apprafter", "plan", "--all", settings.directory, "--from", f"git:{base}",
            "-o", "json", *(arg for env in settings.environments for arg in ("-e", env))]
    return subprocess.run(argv, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)


def _headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28", "Content-Type": "application/json"}


class CommentError(ToolFailure):
    """GitHub refused or could not be reached: the comment is not written (the summary and outputs still are)."""


def _call(api: str, token: str, method: str, path: str, body: Any = None) -> Any:
    """One GitHub REST call with the standard library (the base install carries no HTTP client)."""
    import urllib.error
    import urllib.request

    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(api + path, data=data, method=method, headers=_headers(token))
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as reply:  # the API URL GitHub gives
            return json.loads(reply.read() or b"null")
    except urllib.error.HTTPError as error:
        raise CommentError(f"{method} {path}: HTTP {error.code} {error.reason}") from None
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise CommentError(f"{method} {path}: {error}") from None


def upsert_comment(api: str, repository: str, number: int, token: str, body: str) -> str:
    """Create the pull request's comment that starts with MARKER, or update it in place (never a second one);
    returns what was done: "created", "updated" or "unchanged"."""
    listing = f"/repos/{repository}/issues/{number}/comments"
    found = None
    for page in range(1, MAX_PAGES + 1):
        comments = _call(api, token, "GET", f"{listing}?per_page={PER_PAGE}&page={page}")
        found = next((c for c in comments if str(c.get("body", "")).startswith(MARKER)), None)
        if found is not None or len(comments) < PER_PAGE:
            break
    if found is None:
        _call(api, token, "POST", listing, {"body": body})
        return "created"
    if found.get("body") == body:
        return "unchanged"
    _call(api, token, "PATCH", f"/repos/{repository}/issues/comments/{found['id']}", {"body": body})
    return "updated"


# `file:line:col: message` (a problem in the pull request's file); `git:<rev>:file:...` is the base's, not annotated on
# a line of the pull request.
_PROBLEM = re.compile(r"(?P<file>(?!git:)[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<message>.*)")


def _escape(text: str, property_value: bool = False) -> str:
    """A workflow command's data (or property value) as GitHub reads it back."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if property_value else text


def annotation(line: str) -> str:
    """The `::error` workflow command for one line of the plan's stderr: on the file, line and column when the line
    names a position in the pull request's files, else for the step as a whole."""
    found = _PROBLEM.fullmatch(line)
    if found is None:
        return f"::error title=apprafter plan::{_escape(line)}"
    where = ",".join(f"{key}={_escape(found[key], True)}" for key in ("file", "line", "col"))
    return f"::error {where},title=apprafter plan::{_escape(found['message'])}"


def _append(path: str, text: str) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as file:
            file.write(text)


def run(env: Mapping[str, str]) -> int:
    """The step; its exit code."""
    from compatibility.markdown import GITHUB_LIMIT, render_failure, render_markdown

    settings = Settings(env)
    event = _event(settings)
    pull = event.get("pull_request") or {}
    base = settings.base or (pull.get("base") or {}).get("sha") or ""
    if not base:
        print("apprafter: no base to plan against: run on a pull_request event or set the `base` input",
              file=sys.stderr)
        return 2
    result = _plan(settings, base)
    sys.stderr.write(result.stderr)
    if result.returncode == 0:
        document = json.loads(result.stdout)
        comment, summary = render_markdown(document, GITHUB_LIMIT), render_markdown(document, SUMMARY_LIMIT)
        gated = bool(document["gated"])
        names = [p["migrationPlanName"] for p in document["plans"] if p["migrationPlanName"]]
    else:
        comment = summary = render_failure(result.stderr.splitlines(), invalid=result.returncode == 1)
        gated, names = False, []
        for line in result.stderr.splitlines():  # the check's annotations, on the offending lines
            print(annotation(line), flush=True)
    _append(settings.summary, summary)
    _append(settings.output, f"gated={'true' if gated else 'false'}\nplan-names={' '.join(names)}\n")
    number = pull.get("number")
    if settings.comment and isinstance(number, int) and settings.token and settings.repository:
        try:
            done = upsert_comment(settings.api, settings.repository, number, settings.token, f"{MARKER}\n{comment}")
            print(f"apprafter: pull request comment {done}", file=sys.stderr)
        except CommentError as error:  # a fork's read-only token, say: the summary and outputs carry the plan
            print(f"::warning::apprafter: could not write the pull request comment: {error}", file=sys.stderr)
    if result.returncode != 0:
        return 1 if result.returncode == 1 else 2
    return 1 if gated and settings.fail_on_gated else 0


def main() -> None:
    sys.exit(run(os.environ))


if __name__ == "__main__":
    main()
