"""`make release`: the release recipe's local half (docs/development.md#release) as one command, with python3 alone.

Refuses unless the working tree is clean and every place that names the version says the same one (pyproject.toml,
the charts' version and appVersion, the operator component of the stack, every tag the docs pin); then tags HEAD
`v<version>` (annotated; again on the same commit is a no-op, on another commit refused). `make release` then builds
the wheel (`make dist`) from that clean, tagged commit. Pushing the tag and publishing are the maintainer's steps.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC_TAG = re.compile(r"(?:render@|rev: |--branch |\.git@)(v\d+\.\d+\.\d+)")


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()


def problems(version: str) -> list[str]:
    """Every place that names another version than pyproject.toml's."""
    found = []
    for chart in sorted((REPO / "deploy" / "charts").glob("*/Chart.yaml")):
        text = chart.read_text()
        for key in ("version", "appVersion"):
            named = re.search(rf'^{key}: "?([^"\s]+)"?$', text, re.MULTILINE)
            if named is None or named[1] != version:
                found.append(f"{chart.relative_to(REPO)}: {key} is {named[1] if named else 'missing'}, not {version}")
    operator = REPO / "platform_stack" / "components" / "apprafter-operator.cue"
    if f'version:  "{version}"' not in operator.read_text():
        found.append(f"{operator.relative_to(REPO)}: _apprafter.version is not {version}")
    for doc in (REPO / "README.md", REPO / ".pre-commit-hooks.yaml", *sorted((REPO / "docs").glob("*.md"))):
        for tag in sorted(set(DOC_TAG.findall(doc.read_text())) - {f"v{version}"}):
            found.append(f"{doc.relative_to(REPO)}: pins {tag}, not v{version}")
    return found


def main() -> int:
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    tag = f"v{version}"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    if dirty:
        print(f"release: the working tree has changes; commit them first:\n{dirty}", file=sys.stderr)
        return 1
    wrong = problems(version)
    if wrong:
        print("\n".join(f"release: {line}" for line in wrong), file=sys.stderr)
        return 1
    head = git("rev-parse", "HEAD")
    existing = subprocess.run(["git", "rev-parse", "-q", "--verify", f"refs/tags/{tag}^{{commit}}"], cwd=REPO,
                              capture_output=True, text=True, check=False).stdout.strip()
    if existing and existing != head:
        print(f"release: {tag} already tags {existing[:12]}, not HEAD {head[:12]}: a release tag never moves; "
              "raise the version (one commit, every place above) for a new release", file=sys.stderr)
        return 1
    if not existing:
        git("tag", "-a", tag, "-m", f"AppRafter render {version}")
    print(f"release: {tag} tags {head[:12]}{' (already)' if existing else ''}; next: the wheel (make dist), then "
          f"`git push origin {tag}` and the publishing steps of docs/development.md#release", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
