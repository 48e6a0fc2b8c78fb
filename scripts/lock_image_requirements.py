"""Pins the package's runtime dependencies, with hashes, for the images (deploy/images/requirements.txt): the base
install and the extras the images run (IMAGE_EXTRAS: the operator image runs `apprafter operator` and `apprafter
webhook`; the plugin sidecar installs the same lock and needs only the base).

The image build installs exactly these files with `pip install --no-deps --require-hashes`
(deploy/images/install-venv.sh): pip resolves nothing there, so what PyPI serves that day cannot change an image
(with dependencies on, pip re-resolves an extra's requirement, e.g. lightkube's `httpx[http2]`, against the newest
release and refuses the lock). The lock must therefore be closed: every requirement of every pinned distribution,
extras included, met by a pin. Resolved by pip itself for CPython 3.11 on linux x86_64 (this machine, as in the
images); the closure is checked when the lock is written and by `--verify`. The header carries a digest of
pyproject.toml's dependencies and of the image extras'; `--check` (run by `make images` and the tests) fails when
they changed since the lock was written.

Usage: .venv/bin/python scripts/lock_image_requirements.py [--check | --verify]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "deploy" / "images" / "requirements.txt"
DIGEST_PREFIX = "# pyproject-dependencies-sha256: "
PROJECT = "apprafter-render"
IMAGE_EXTRAS = ("operator", "webhook")


@dataclass(frozen=True)
class Dist:
    """One distribution as pip's installation report describes it."""

    name: str
    version: str
    sha256: str
    requires: tuple[str, ...]


def dependencies() -> list[str]:
    """The base install's requirements and those of IMAGE_EXTRAS, each once."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    return list(dict.fromkeys([*project["dependencies"], *(spec for extra in IMAGE_EXTRAS for spec in extras[extra])]))


def dependencies_digest() -> str:
    """sha256 of the requirements dependencies() lists, order-insensitive."""
    return hashlib.sha256(json.dumps(sorted(dependencies())).encode()).hexdigest()


def pip_report(args: list[str]) -> list[Dist]:
    """What `pip install --dry-run ARGS` would install, from PyPI only (as inside the image build)."""
    with tempfile.TemporaryDirectory(prefix="apprafter-lock-") as tmp:
        report = Path(tmp) / "report.json"
        env = {k: v for k, v in os.environ.items() if k not in ("PIP_FIND_LINKS", "PIP_INDEX_URL",
                                                                 "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX")}
        subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                        "--only-binary=:all:", "--report", str(report), *args], check=True, env=env)
        items = json.loads(report.read_text())["install"]
    return [Dist(item["metadata"]["name"], item["metadata"]["version"],
                 item["download_info"].get("archive_info", {}).get("hashes", {}).get("sha256", ""),
                 tuple(item["metadata"].get("requires_dist", ()))) for item in items]


def unmet(roots: Iterable[str], pinned: Mapping[str, Dist]) -> list[str]:
    """Every requirement reachable from `roots` (requirement strings, extras followed) that no pin meets: the
    lock is closed when this is empty. One line per problem, naming who requires what."""
    problems: list[str] = []
    seen: set[tuple[str, str]] = set()
    pending = [("pyproject.toml", Requirement(spec)) for spec in roots]
    while pending:
        who, req = pending.pop()
        name = canonicalize_name(req.name)
        dist = pinned.get(name)
        if dist is None:
            problems.append(f"{who} requires {req}: {req.name} is not pinned")
            continue
        if not req.specifier.contains(dist.version, prereleases=True):
            problems.append(f"{who} requires {req}: pinned {dist.name}=={dist.version} is outside it")
            continue
        for extra in ("", *sorted(req.extras)):
            if (name, extra) in seen:
                continue
            seen.add((name, extra))
            for spec in dist.requires:
                sub = Requirement(spec)
                if sub.marker is not None and not _applies(sub.marker, extra):
                    continue
                if sub.marker is None and extra:
                    continue  # an unconditional requirement was followed with extra ""
                pending.append((f"{dist.name}=={dist.version}" + (f"[{extra}]" if extra else ""), sub))
    return sorted(set(problems))


def _applies(marker: Marker, extra: str) -> bool:
    """Whether a requirement's marker holds on the images' Python (3.11, linux x86_64) for the given extra; a marker
    without an `extra` clause is followed with the empty extra only."""
    mentions_extra = "extra" in str(marker)
    if mentions_extra != bool(extra):
        return False
    env = {"python_version": "3.11", "python_full_version": "3.11.2", "sys_platform": "linux",
           "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
           "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": extra}
    return marker.evaluate(env)


def read_lock(text: str) -> list[tuple[str, str]]:
    """(name, version) of every pin in a lock file."""
    pins = []
    for line in text.splitlines():
        if "==" in line and not line.startswith(("#", " ")):
            name, _, rest = line.partition("==")
            pins.append((name.strip(), rest.split()[0]))
    return pins


def render(pinned: list[Dist]) -> str:
    lines = [
        f"# Runtime dependencies of apprafter-render[{','.join(IMAGE_EXTRAS)}] for the images, installed with pip "
        "--no-deps --require-hashes.",
        "# Generated by scripts/lock_image_requirements.py from pyproject.toml: do not edit, re-run it.",
        DIGEST_PREFIX + dependencies_digest(),
    ]
    lines += [f"{d.name}=={d.version} \\\n    --hash=sha256:{d.sha256}" for d in pinned]
    return "\n".join(lines) + "\n"


def lock() -> int:
    resolved = [d for d in pip_report([f"{ROOT}[{','.join(IMAGE_EXTRAS)}]"]) if canonicalize_name(d.name) != PROJECT]
    problems = unmet(dependencies(), {canonicalize_name(d.name): d for d in resolved})
    if problems:  # pip's own resolution left something out: never write a lock the image cannot install alone
        print("\n".join(f"{LOCK.relative_to(ROOT)}: {p}" for p in problems), file=sys.stderr)
        return 1
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    LOCK.write_text(render(sorted(resolved, key=lambda d: d.name.lower())))
    print(f"wrote {LOCK.relative_to(ROOT)}")
    return 0


def verify() -> int:
    """The lock as the image installs it (no dependencies resolved) meets every requirement, extras included."""
    installed = pip_report(["--no-deps", "--require-hashes", "-r", str(LOCK)])
    problems = unmet(dependencies(), {canonicalize_name(d.name): d for d in installed})
    for problem in problems:
        print(f"{LOCK.relative_to(ROOT)}: {problem}: run .venv/bin/python scripts/lock_image_requirements.py",
              file=sys.stderr)
    return 1 if problems else 0


def check() -> int:
    recorded = next((ln.removeprefix(DIGEST_PREFIX) for ln in LOCK.read_text().splitlines()
                     if ln.startswith(DIGEST_PREFIX)), None) if LOCK.is_file() else None
    if recorded != dependencies_digest():
        print(f"{LOCK.relative_to(ROOT)}:3:1: pyproject.toml's dependencies changed since the lock was "
              "written: run .venv/bin/python scripts/lock_image_requirements.py", file=sys.stderr)
        return 1
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="fail when pyproject's dependencies changed")
    mode.add_argument("--verify", action="store_true",
                      help="fail when the lock, installed without dependencies, leaves a requirement unmet (PyPI)")
    args = parser.parse_args()
    if args.check:
        return check()
    if args.verify:
        return verify()
    return lock()


if __name__ == "__main__":
    sys.exit(main())
