"""The set-up's container tools and base image, `apprafter doctor`'s report of them, the images' dependency lock."""

from __future__ import annotations

import json
import re
import shutil
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

from tests.images.podman import REPO, inspect, podman, run
from toolchain.container_tools import container_tools

pytestmark = pytest.mark.images


def doctor(**env: str) -> tuple[int, dict[str, Any], str]:
    proc = run([sys.executable, "-m", "apprafter", "doctor", "--role", "development", "-o", "json"], check=False,
               extra_env=env)
    assert proc.stdout.startswith("{"), f"doctor exited {proc.returncode} without its report: {proc.stderr[-2000:]}"
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def test_doctor_reports_each_container_tool_with_its_version() -> None:
    code, report, _ = doctor()
    rows = {row["tool"]: row for row in report["container_tools"]}
    assert list(rows) == [t.name for t in container_tools()]
    assert set(rows) >= {"buildah", "podman", "skopeo", "umoci", "mmdebstrap", "runc"}
    podman_version = re.search(r"version (\S+)", podman("--version").stdout)
    assert podman_version and rows["podman"]["version"] == podman_version.group(1)
    assert all(row["ok"] and row["path"] for row in rows.values()), rows
    assert code == 0


def test_doctor_fails_naming_the_missing_tool_and_the_remedy() -> None:
    code, report, _ = doctor(APPRAFTER_PODMAN="/nonexistent/podman")
    assert code == 1
    assert report["ok"] is False
    text = run([sys.executable, "-m", "apprafter", "doctor", "--role", "development"], check=False,
               extra_env={"APPRAFTER_PODMAN": "/nonexistent/podman"})
    assert text.returncode == 1
    assert "BAD podman             missing" in text.stdout
    assert text.stderr.splitlines() == [
        "podman not found (Debian package podman): run `make setup` (tools/setup-images.sh installs it with apt-get)",
        "1 tool(s) missing or unsupported: run `make setup`",
    ]


def test_setup_finds_the_tools_and_the_base_image_and_rebuilds_nothing() -> None:
    proc = run(["tools/setup-images.sh"], timeout=120)
    name = run(["tools/base-image.sh", "--name"]).stdout.strip()
    assert "setup: container tools        present" in proc.stdout
    assert f"setup: base image             cached {name}" in proc.stderr
    assert re.fullmatch(r"localhost/apprafter-base:[a-z]+-[0-9a-f]{12}", name)


def test_base_image_is_minbase_python_without_docs_or_locales() -> None:
    name = run(["tools/base-image.sh", "--name"]).stdout.strip()
    out = podman("run", "--rm", "--read-only", name, "sh", "-c",
                 "python3 -c 'import venv, ensurepip, ssl; print(ssl.OPENSSL_VERSION)' && "
                 "find /usr/share/doc -type f ! -name copyright | wc -l && "
                 "find /usr/share/man /usr/share/locale /usr/share/info -type f ! -path /usr/share/info/dir | wc -l"
                 " && test -s /etc/ssl/certs/ca-certificates.crt && echo ca").stdout.split("\n")
    assert out[0].startswith("OpenSSL ")
    assert out[1:4] == ["0", "0", "ca"]
    assert inspect(name)["Created"].startswith("2025-05-20T00:00:00")  # the recipe's fixed epoch


def test_image_dependency_lock_pins_every_runtime_dependency() -> None:
    run([sys.executable, "scripts/lock_image_requirements.py", "--check"])
    pinned = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+) \\$", (REPO / "deploy/images/requirements.txt").read_text(),
                             re.MULTILINE))
    names = {n.lower().replace("_", "-"): v for n, v in pinned.items()}
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    for spec in [*project["dependencies"], *extras["operator"], *extras["webhook"]]:  # what the images run
        req = Requirement(spec)
        version = names.get(req.name.lower().replace("_", "-"))
        assert version is not None, f"{req.name} is not pinned"
        assert req.specifier.contains(version), f"{req.name}=={version} is outside {req.specifier}"


def test_image_dependency_lock_is_closed_so_the_image_resolves_nothing() -> None:
    """The image installs the lock with --no-deps: every requirement of every pin, extras included, must be pinned.
    This is what failed when PyPI served httpx 0.29.0 while the lock pinned 0.28.1: pip re-resolved lightkube's
    `httpx[http2]` against the newest release."""
    proc = run([sys.executable, "scripts/lock_image_requirements.py", "--verify"], check=False)
    assert proc.returncode == 0, proc.stderr


def test_lock_closure_names_an_extras_requirement_left_out() -> None:
    """The closure check itself: a lock without h2 is open (httpx[http2] needs it), though `pip check` passes it."""
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import lock_image_requirements as lock
    finally:
        sys.path.remove(str(REPO / "scripts"))
    dists = {"lightkube": lock.Dist("lightkube", "0.22.0", "", ("httpx[http2]<1.0.0,>=0.28.1",)),
             "httpx": lock.Dist("httpx", "0.28.1", "", ('h2<5,>=3; extra == "http2"', "idna")),
             "idna": lock.Dist("idna", "3.10", "", ())}
    assert lock.unmet(["lightkube>=0.15"], dists) == [
        'httpx==0.28.1[http2] requires h2<5,>=3; extra == "http2": h2 is not pinned']
    dists["h2"] = lock.Dist("h2", "4.4.1", "", ())
    assert lock.unmet(["lightkube>=0.15"], dists) == []
    dists["httpx"] = lock.Dist("httpx", "0.29.0", "", ())
    assert lock.unmet(["lightkube>=0.15", "httpx<0.29"], dists) == [
        "pyproject.toml requires httpx<0.29: pinned httpx==0.29.0 is outside it"]


def test_the_image_venv_script_installs_the_lock_and_the_wheel_alone(tmp_path: Path) -> None:
    """deploy/images/install-venv.sh as the image build runs it (context: the lock, this package's wheel): pip
    resolves nothing, `pip check` passes and the CLI starts from the venv it made."""
    context = tmp_path / "context"
    (context / "wheels").mkdir(parents=True)
    (context / "bin").mkdir()
    shutil.copy(REPO / "deploy/images/requirements.txt", context)
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(context / "wheels"),
         str(REPO)])
    venv = tmp_path / "venv"
    proc = run(["sh", str(REPO / "deploy/images/install-venv.sh")], check=False,
               extra_env={"CONTEXT": str(context), "VENV": str(venv)})
    assert proc.returncode == 0, proc.stderr
    assert not (venv / "bin/pip").exists()
    version = run([str(venv / "bin/apprafter"), "--version"]).stdout
    assert version.startswith("apprafter, version ")
