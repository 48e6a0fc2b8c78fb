"""The GitHub Action's step (apprafter/github_action.py), run as GitHub runs it: the variables and files a step
gets (GITHUB_EVENT_PATH, GITHUB_STEP_SUMMARY, GITHUB_OUTPUT, GITHUB_TOKEN, GITHUB_API_URL), a real git repository,
the real cue, and a stand-in for GitHub's comment API on 127.0.0.1. One golden comment per case; set
APPRAFTER_UPDATE_GOLDENS=1 to rewrite them (then review the diff)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import yaml

from apprafter.github_action import MARKER
from tests.cli.monorepo import app_text, git
from tests.renderer.helpers import REPO, write_app
from toolchain.tools import TOOLS

GOLDEN = Path(__file__).resolve().parent / "golden"
TOKEN = "ghs_test-token"
NUMBER = 7


class CommentAPI:
    """GitHub's issue-comment endpoints for one repository, in memory: list (paged), create, update."""

    def __init__(self) -> None:
        self.comments: list[dict[str, Any]] = []
        self.requests: list[tuple[str, str]] = []
        self.refuse = False
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _reply(self, code: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> dict[str, Any]:
                return json.loads(self.rfile.read(int(self.headers["Content-Length"])))  # type: ignore[no-any-return]

            def _handle(self, method: str) -> None:
                url = urlparse(self.path)
                api.requests.append((method, url.path))
                if self.headers.get("Authorization") != f"Bearer {TOKEN}" or api.refuse:
                    self._reply(403, {"message": "Resource not accessible by integration"})
                    return
                listing = f"/repos/acme/shop/issues/{NUMBER}/comments"
                if method == "GET" and url.path == listing:
                    query = parse_qs(url.query)
                    per_page, page = int(query["per_page"][0]), int(query["page"][0])
                    self._reply(200, api.comments[(page - 1) * per_page:page * per_page])
                elif method == "POST" and url.path == listing:
                    comment = {"id": 1000 + len(api.comments), "body": self._body()["body"]}
                    api.comments.append(comment)
                    self._reply(201, comment)
                elif method == "PATCH" and url.path.startswith("/repos/acme/shop/issues/comments/"):
                    wanted = int(url.path.rsplit("/", 1)[1])
                    (comment,) = [c for c in api.comments if c["id"] == wanted]
                    comment["body"] = self._body()["body"]
                    self._reply(200, comment)
                else:
                    self._reply(404, {"message": "Not Found"})

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

            def do_PATCH(self) -> None:
                self._handle("PATCH")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def ours(self) -> list[dict[str, Any]]:
        return [c for c in self.comments if c["body"].startswith(MARKER)]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def api() -> Iterator[CommentAPI]:
    server = CommentAPI()
    yield server
    server.close()


class Step:
    """One run of the step: its exit code, stderr, job summary and outputs."""

    def __init__(self, proc: subprocess.CompletedProcess[str], summary: Path, output: Path) -> None:
        self.code, self.stdout, self.stderr = proc.returncode, proc.stdout, proc.stderr
        self.summary = summary.read_text() if summary.exists() else ""
        self.outputs = dict(line.split("=", 1) for line in output.read_text().splitlines()) if output.exists() \
            else {}


def step(repo: Path, api: CommentAPI, base: str, environ: dict[str, str] | None = None, **inputs: str) -> Step:
    run_dir = repo.parent / f"run-{len(api.requests)}-{len(list(repo.parent.iterdir()))}"
    run_dir.mkdir()
    event = run_dir / "event.json"
    event.write_text(json.dumps({"action": "synchronize", "number": NUMBER,
                                 "pull_request": {"number": NUMBER, "base": {"sha": base, "ref": "main"}}}))
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", str(run_dir)),
           "APPRAFTER_TOOLS_DIR": os.environ.get("APPRAFTER_TOOLS_DIR", str(Path.home() / ".cache/apprafter/tools")),
           "GITHUB_EVENT_PATH": str(event), "GITHUB_STEP_SUMMARY": str(run_dir / "summary.md"),
           "GITHUB_OUTPUT": str(run_dir / "output"), "GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": api.url,
           "GITHUB_REPOSITORY": "acme/shop", "INPUT_DIRECTORY": "apps",
           **{f"INPUT_{k.upper()}": v for k, v in inputs.items()}, **(environ or {})}
    proc = subprocess.run([sys.executable, "-m", "apprafter.github_action"], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    return Step(proc, run_dir / "summary.md", run_dir / "output")


def repository(tmp_path: Path, *apps: tuple[str, str]) -> tuple[Path, str]:
    """A repository whose main holds these apps; returns it and main's commit."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write_app(root / "apps" / "catalog", app_text("catalog"))
    for name, text in apps:
        write_app(root / "apps" / name, text)
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "base")
    return root, git(root, "rev-parse", "HEAD").strip()


def golden(name: str, text: str) -> None:
    path = GOLDEN / f"action-{name}.md"
    if os.environ.get("APPRAFTER_UPDATE_GOLDENS"):
        path.write_text(text)
    assert text == path.read_text(), f"{path.name} differs (APPRAFTER_UPDATE_GOLDENS=1 rewrites it)"


SHOP = app_text("shop", needs="\t\tneeds: pg: {}\n")
CASES = {
    "first-deployment": ((), SHOP, 0, "false"),
    "soft-change": ((("shop", SHOP),), SHOP.replace("shop:1.0.0", "shop:1.1.0"), 0, "false"),
    "gated-security-boundary": ((("shop", SHOP),), SHOP.replace('"internal"', '"public"'), 0, "true"),
    "removal": ((("shop", SHOP),), None, 0, "true"),
    "invalid-input": ((("shop", SHOP),), SHOP.replace("needs: pg: {}", "needs: pg: {sise: \"small\"}"), 1, "false"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_case_comments_its_golden_and_sets_the_outputs(tmp_path: Path, api: CommentAPI, case: str) -> None:
    before, after, code, gated = CASES[case]
    repo, base = repository(tmp_path, *before)
    if after is None:
        git(repo, "rm", "-rq", "apps/shop")
    else:
        write_app(repo / "apps" / "shop", after)
    result = step(repo, api, base)
    assert result.code == code, result.stderr
    golden(case, result.summary)
    (comment,) = api.ours()
    assert comment["body"] == f"{MARKER}\n{result.summary}"
    assert result.outputs["gated"] == gated
    names = result.outputs["plan-names"].split()
    if case == "invalid-input":  # the check's annotation, on the offending line of the pull request
        assert result.stdout == ("::error file=apps/shop/apprafter/Application.cue,line=8,col=15,title=apprafter plan"
                                 "::spec.base.needs.pg.sise: field not allowed; did you mean `size`?\n")
    else:
        assert result.stdout == ""
    if case == "gated-security-boundary":
        assert names == [f"shop-{env}-" + n.rsplit("-", 1)[1] for env, n in zip(("dev", "prod"), names, strict=True)]
        assert all(name in result.summary for name in names)
    else:
        assert names == []


def test_every_problem_is_annotated_on_its_line_and_one_without_a_line_for_the_step(tmp_path: Path,
                                                                                   api: CommentAPI) -> None:
    """Two problems in the pull request's file, each on its line; the base's own problem (`git:<rev>:...`: no line
    of the pull request) and a tool failure (no position at all) annotate the step as a whole."""
    blog = app_text("blog")
    repo, base = repository(tmp_path, ("shop", SHOP), ("blog", blog.replace("blog:1.0.0", "blog:v1:2")))
    write_app(repo / "apps" / "blog", blog)  # the pull request fixes the base's broken app
    write_app(repo / "apps" / "shop", SHOP.replace("needs: pg: {}", 'needs: pg: {sise: "small"}')
              .replace("acme/shop:", "acme/Shop:"))
    result = step(repo, api, base)
    assert (result.code, result.outputs["gated"]) == (1, "false"), result.stderr
    shop = "file=apps/shop/apprafter/Application.cue"
    assert result.stdout.splitlines() == [
        f"::error {shop},line=6,col=3,title=apprafter plan::spec.base.image: image 'ghcr.io/acme/Shop:1.0.0' is not a "
        "valid image reference: the repository 'acme/Shop' must be lowercase: 'acme/shop'",
        f"::error {shop},line=8,col=15,title=apprafter plan::spec.base.needs.pg.sise: field not allowed; did you mean "
        "`size`?",
        f"::error title=apprafter plan::git:{base}:apps/blog/apprafter/Application.cue:6:3: spec.base.image: image "
        "'ghcr.io/acme/blog:v1:2' is not a valid image reference: it holds more than one ':' after the repository (one "
        "tag at most: repository:tag)"]
    # The comment (and the job summary) carries the plan's lines as they are.
    assert result.summary.endswith(
        "```text\n"
        "apps/shop/apprafter/Application.cue:6:3: spec.base.image: image 'ghcr.io/acme/Shop:1.0.0' is not a valid "
        "image reference: the repository 'acme/Shop' must be lowercase: 'acme/shop'\n"
        "apps/shop/apprafter/Application.cue:8:15: spec.base.needs.pg.sise: field not allowed; did you mean `size`?\n"
        f"git:{base}:apps/blog/apprafter/Application.cue:6:3: spec.base.image: image 'ghcr.io/acme/blog:v1:2' is not a "
        "valid image reference: it holds more than one ':' after the repository (one tag at most: repository:tag)\n"
        "```\n")

    failed = step(repo, api, base, {"APPRAFTER_CUE": str(tmp_path / "no-cue")})
    assert (failed.code, failed.outputs["gated"]) == (2, "false"), failed.stderr
    assert failed.stdout == (f"::error title=apprafter plan::apprafter: cue not found (supported: "
                             f"{TOOLS['cue'].supported}): run `make setup` (tools/setup.sh) to install it, or point "
                             "APPRAFTER_CUE at one\n")
    assert "**No plan: a tool failed.**" in failed.summary


def test_one_comment_is_updated_in_place_never_a_second(tmp_path: Path, api: CommentAPI) -> None:
    repo, base = repository(tmp_path, ("shop", SHOP))
    api.comments += [{"id": i, "body": f"a reviewer's comment {i}"} for i in range(150)]  # ours is on page 2
    write_app(repo / "apps" / "shop", SHOP.replace('"internal"', '"public"'))
    first = step(repo, api, base)
    assert first.code == 0 and "pull request comment created" in first.stderr
    again = step(repo, api, base)
    assert "pull request comment unchanged" in again.stderr and [m for m, _ in api.requests].count("PATCH") == 0
    write_app(repo / "apps" / "shop", SHOP.replace("shop:1.0.0", "shop:1.1.0"))
    soft = step(repo, api, base)
    assert "pull request comment updated" in soft.stderr
    (comment,) = api.ours()
    assert comment["id"] == 1150 and comment["body"] == f"{MARKER}\n{soft.summary}" and len(api.comments) == 151
    assert ("GET", "/repos/acme/shop/issues/7/comments") in api.requests


def test_fail_on_gated_and_a_comment_that_cannot_be_written(tmp_path: Path, api: CommentAPI) -> None:
    repo, base = repository(tmp_path, ("shop", SHOP))
    write_app(repo / "apps" / "shop", SHOP.replace('"internal"', '"public"'))
    assert step(repo, api, base, fail_on_gated="true").code == 1
    api.refuse = True  # a fork's pull request: the token cannot write
    refused = step(repo, api, base)
    assert refused.code == 0 and refused.outputs["gated"] == "true" and refused.summary.startswith("## AppRafter")
    assert "::warning::apprafter: could not write the pull request comment" in refused.stderr
    quiet = step(repo, api, base, comment="false")
    assert quiet.code == 0 and "pull request comment" not in quiet.stderr


def test_action_yml_runs_this_script_with_its_inputs() -> None:
    action = yaml.safe_load((REPO / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    (plan,) = [s for s in action["runs"]["steps"] if s.get("id") == "plan"]
    assert plan["run"] == "python -m apprafter.github_action"
    assert set(plan["env"]) == {f"INPUT_{name.upper().replace('-', '_')}" for name in action["inputs"]} - {
        "INPUT_PYTHON_VERSION"}
    assert {k: v["value"] for k, v in action["outputs"].items()} == {
        "gated": "${{ steps.plan.outputs.gated }}", "plan-names": "${{ steps.plan.outputs.plan-names }}"}
    script = (REPO / "apprafter" / "github_action.py").read_text()
    assert all(f'"{name}"' in script for name in plan["env"])
