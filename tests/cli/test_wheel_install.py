"""Install for an app repository as docs/install.md says: the wheel `make dist` builds in a checkout with nothing set
up (no venv, no tools: python3's pip alone), the same bytes for the same commit, in a fresh virtualenv (no checkout on
any path) with the base install only, a cue from the tool cache or from `go install`, nothing else. validate, render
and plan work; plain `doctor` checks the app developer's needs alone; a cue that `go install` left off PATH is named
with the line that fixes it; a cue outside the supported range is refused with the version found, the range and both
remedies, and no message names `make`; a command of an extra says which. ≈ 30-60 s (pip from PyPI), plus `go
install` of cue (a minute when Go's build cache is cold)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.cli.monorepo import app_text, git
from tests.renderer.helpers import REPO, write_app
from toolchain.pins import pins
from toolchain.tools import TOOLS, tools_dir

PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
WHEEL = f"{PROJECT['name'].replace('-', '_')}-{PROJECT['version']}-py3-none-any.whl"
COMMITTED = "2026-01-02T03:04:06Z"  # the copy's one commit: what `make dist` stamps the wheel with (zip: even seconds)
BASE_PYTHON = Path(getattr(sys, "_base_executable", sys.executable))


def checkout(dest: Path) -> Path:
    """This checkout's files (tracked and new, not ignored: no venv, no dist, no caches) as a fresh repository of one
    commit made at COMMITTED."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file() or source.is_symlink():  # a tracked file deleted in the working tree is left out
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name, follow_symlinks=False)
    env = {**os.environ, "GIT_AUTHOR_DATE": COMMITTED, "GIT_COMMITTER_DATE": COMMITTED}
    for argv in (["init", "-q", "-b", "main"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@example.com",
                                                              "commit", "-qm", "release"]):
        subprocess.run(["git", *argv], cwd=dest, env=env, check=True, capture_output=True)
    return dest


def make_dist(repo: Path) -> subprocess.CompletedProcess[str]:
    """`make dist` with a plain Python on PATH (this interpreter's base, not a venv's) and nothing set up."""
    env = {"PATH": f"{BASE_PYTHON.parent}:/usr/bin:/bin", "HOME": os.environ.get("HOME", str(repo.parent))}
    return subprocess.run(["make", "dist"], cwd=repo, env=env, capture_output=True, text=True, timeout=600,
                          check=False)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    """A checkout and the bytes of the wheel its `make dist` built."""
    repo = checkout(tmp_path_factory.mktemp("checkout") / "render")
    made = make_dist(repo)
    assert (made.returncode, made.stdout) == (0, f"dist/{WHEEL}\n"), made.stderr
    assert not (repo / ".venv").exists()  # no venv, no `.[all,dev]`: the wheel alone
    return repo, (repo / "dist" / WHEEL).read_bytes()


def test_make_dist_needs_no_set_up_and_the_same_commit_gives_the_same_bytes(built: tuple[Path, bytes]) -> None:
    repo, first = built
    again = make_dist(repo)
    assert (again.returncode, again.stdout) == (0, f"dist/{WHEEL}\n"), again.stderr
    assert (repo / "dist" / WHEEL).read_bytes() == first
    with zipfile.ZipFile(repo / "dist" / WHEEL) as wheel:
        stamps = {info.date_time for info in wheel.infolist()}
    assert stamps == {(2026, 1, 2, 3, 4, 6)}  # the commit's time (SOURCE_DATE_EPOCH), not the build's


@pytest.fixture(scope="module")
def venv(built: tuple[Path, bytes], tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    wheel = work / WHEEL
    wheel.write_bytes(built[1])
    base = BASE_PYTHON
    subprocess.run([base, "-m", "venv", str(work / "venv")], check=True, timeout=300)
    pip = subprocess.run([str(work / "venv" / "bin" / "pip"), "install", "--quiet", str(wheel)], capture_output=True,
                         text=True, timeout=900, check=False)
    assert pip.returncode == 0, pip.stderr
    return work / "venv"


def cue_dir(version: str) -> Path:
    found = tools_dir() / "cue" / version
    assert (found / "cue").exists(), f"cue {version} missing: run `make setup`"
    return found


def apprafter(venv: Path, cwd: Path, *args: str, cue: str | None = None) -> subprocess.CompletedProcess[str]:
    """The installed console script, with only the venv and one cue on PATH and no tool cache."""
    path = f"{venv / 'bin'}:{cue_dir(cue or TOOLS['cue'].pinned)}:/usr/bin:/bin"
    env = {"PATH": path, "HOME": str(cwd.parent / "home"), "APPRAFTER_TOOLS_DIR": str(cwd.parent / "no-tools")}
    return subprocess.run(["apprafter", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
                          check=False)


def test_the_wheel_alone_validates_renders_and_plans(venv: Path, tmp_path: Path) -> None:
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import apprafter, toolchain.tools as t; "
                            "print(apprafter.__file__, t.in_checkout())"], capture_output=True, text=True,
                           check=True, env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path).stdout.split()
    assert where[0].startswith(str(venv)) and where[1] == "False"
    repo = tmp_path / "shop"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    write_app(repo, app_text("shop"))
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "first")
    write_app(repo, app_text("shop", network="public"))
    for version in (TOOLS["cue"].pinned, *(v for v in pins()["CUE_TEST_VERSIONS"].split() if TOOLS["cue"].supports(v))):
        valid = apprafter(venv, repo, "validate", cue=version)
        assert (valid.returncode, valid.stderr) == (0, "apprafter/Application.cue: valid (dev, prod)\n")
        rendered = apprafter(venv, repo, "render", "-e", "prod", "--mode", "manifests", cue=version)
        assert rendered.returncode == 0 and "kind: HTTPRoute" in rendered.stdout, rendered.stderr
        planned = apprafter(venv, repo, "plan", "--from", "git:main", "--to", ".", "-e", "prod",
                            "--detailed-exitcode", cue=version)
        assert planned.returncode == 2 and "AR-SB004" in planned.stdout and "MigrationPlan: shop-prod-" in \
            planned.stdout, planned.stderr
    version = apprafter(venv, repo, "version")
    assert version.returncode == 0 and f"cue       {TOOLS['cue'].pinned} at " in version.stdout
    # Plain `doctor` checks the app developer's needs only: cue and the base install, one row each, nothing about the
    # cluster's or this repository's tools (kubelet, etcd, podman, cosign, ...).
    doctor = apprafter(venv, repo, "doctor")
    assert (doctor.returncode, doctor.stderr) == (0, "")
    rows = doctor.stdout.splitlines()
    assert [row.split()[:2] for row in rows] == [["ok", "cue"], ["ok", "python"]], doctor.stdout
    cue = TOOLS["cue"]
    assert rows[0].startswith(f"ok  cue                {cue.pinned:<10} (pinned {cue.pinned}; supported "
                              f"{cue.supported})  {cue_dir(cue.pinned) / 'cue'}")
    assert rows[1] == "ok  python             installed  (the base install: render, validate, plan)"
    assert not any(word in doctor.stdout for word in ("kubelet", "etcd", "podman", "cosign", "BAD"))
    report = json.loads(apprafter(venv, repo, "doctor", "-o", "json").stdout)
    assert (report["ok"], report["roles"], [t["tool"] for t in report["tools"]], [p["extra"] for p in report["python"]],
            report["container_tools"], report["node_tools"]) == (True, ["developer"], ["cue"], [""], [], [])


# What only the extras bring: none of it is in the app developer's install.
EXTRAS_ONLY = {"lightkube", "httpx", "httpcore", "anyio", "h2", "oras", "requests", "uvicorn", "uvloop", "httptools",
               "prometheus-client", "cryptography", "pyyaml", "pydantic", "pydantic-settings"}


def test_the_base_install_is_the_app_developers_and_an_extra_says_its_name(venv: Path, tmp_path: Path) -> None:
    probe = ("import json, importlib.metadata as m; print(json.dumps(sorted({d.metadata['Name'].lower().replace('_', "
             "'-') for d in m.distributions()})))")
    listed = subprocess.run([str(venv / "bin" / "python"), "-c", probe], capture_output=True, text=True, check=True,
                            timeout=60, cwd=tmp_path).stdout
    installed = set(json.loads(listed)) - {"pip", "setuptools"}
    assert not installed & EXTRAS_ONLY and "apprafter-render" in installed and len(installed) <= 15, installed
    repo = tmp_path / "shop"
    write_app(repo, app_text("shop"))
    for argv, extra, missing in (
            (["operator"], "operator", "anyio, async-timeout, cryptography, h2, httpx, httpx-auth, lightkube, oras, "
                                       "prometheus-client, pyyaml, redis, sniffio"),
            (["webhook", "--tls-cert", "x"], "webhook", "cryptography, httptools, prometheus-client, uvicorn, uvloop"),
            (["stack", "verify", "oci://example.com/x:1"], "stack", "httpx, oras, pyyaml"),
            (["platform", "status"], "cluster", "anyio, cryptography, h2, httpx, lightkube, oras, pyyaml, sniffio")):
        result = apprafter(venv, repo, *argv)
        assert (result.returncode, result.stdout) == (2, "")
        assert result.stderr == (f"apprafter: `apprafter {argv[0]}` needs the extra [{extra}], which is not installed "
                                 f"(missing {missing}): pip install 'apprafter-render[{extra}]'\n")
        helped = apprafter(venv, repo, *argv[:1], "--help")  # the help needs no extra
        assert helped.returncode == 0 and helped.stdout.startswith(f"Usage: apprafter {argv[0]}")
    # the app developer's commands that read the cluster say the same; the ones that do not run without it
    status = apprafter(venv, repo, "app", "status", "shop")
    assert (status.returncode, status.stdout) == (2, "")
    assert status.stderr == ("apprafter: `apprafter app status` needs the extra [cluster], which is not installed "
                             "(missing anyio, cryptography, h2, httpx, lightkube, oras, pyyaml, sniffio): pip install "
                             "'apprafter-render[cluster]'\n")
    (tmp_path / "fresh").mkdir()
    scaffolded = apprafter(venv, tmp_path / "fresh", "app", "scaffold", "--preset", "go")
    assert scaffolded.returncode == 0, scaffolded.stderr
    doctor = apprafter(venv, repo, "doctor", "--role", "cluster")
    assert doctor.returncode == 1
    assert "BAD python[cluster]    missing    (extra [cluster])  missing anyio, cryptography" in doctor.stdout
    assert "python[cluster]: pip install 'apprafter-render[cluster]'" in doctor.stderr.splitlines()


def test_a_cue_from_go_install_renders_and_off_path_is_named(venv: Path, tmp_path: Path) -> None:
    """`go install cuelang.org/go/cmd/cue@<pin>`, as the install page says, into a GOPATH of its own (the shared
    module and build caches, so nothing is downloaded or compiled twice): off PATH it is named with the fix, on
    PATH it renders."""
    go = shutil.which("go")
    assert go is not None, "go missing: run `make setup`"
    gopath = tmp_path / "gopath"
    go_env = {"PATH": f"{Path(go).parent}:/usr/bin:/bin", "HOME": os.environ.get("HOME", str(tmp_path)),
              "GOPATH": str(gopath), "GOMODCACHE": subprocess.run([go, "env", "GOMODCACHE"], capture_output=True,
                                                                  text=True, check=True).stdout.strip(),
              "GOCACHE": subprocess.run([go, "env", "GOCACHE"], capture_output=True, text=True,
                                        check=True).stdout.strip(), "GOFLAGS": "-buildvcs=false"}
    # -trimpath as tools/setup.sh builds cue: the same build-cache entries, so this takes seconds, not minutes; it
    # changes nothing of where `go install` puts the binary, which is what this test is about.
    built = subprocess.run([go, "install", "-trimpath", f"cuelang.org/go/cmd/cue@{TOOLS['cue'].pinned}"], env=go_env,
                           capture_output=True, text=True, timeout=900, check=False, cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    gobin = gopath / "bin"
    repo = tmp_path / "shop"
    write_app(repo, app_text("shop"))
    env = {**go_env, "PATH": f"{venv / 'bin'}:{Path(go).parent}:/usr/bin:/bin",
           "APPRAFTER_TOOLS_DIR": str(tmp_path / "no-tools")}

    def run(*argv: str, path: str = env["PATH"]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["apprafter", *argv], cwd=repo, env={**env, "PATH": path}, capture_output=True,
                              text=True, timeout=300, check=False)

    off = run("validate")
    assert (off.returncode, off.stdout) == (2, "")
    assert off.stderr == (f"apprafter: cue not found (supported: {TOOLS['cue'].supported}): `go install` put it in "
                          f"{gobin}, which is not on PATH: run `export PATH=\"$PATH:{gobin}\"` (and add that line to "
                          f"your shell's profile), or point APPRAFTER_CUE at {gobin / 'cue'}\n")
    doctor = run("doctor")
    assert doctor.returncode == 1 and f"cue: `go install` put it in {gobin}, which is not on PATH" in doctor.stderr
    on = f"{env['PATH']}:{gobin}"
    assert run("validate", path=on).stderr == "apprafter/Application.cue: valid (dev, prod)\n"
    rendered = run("render", "--all-envs", "-o", "name", "--mode", "manifests", path=on)
    assert rendered.returncode == 0 and "deployment.apps/shop\n" in rendered.stdout, rendered.stderr
    assert run("doctor", path=on).returncode == 0


def test_a_cue_outside_the_range_names_both_remedies_and_no_make(venv: Path, tmp_path: Path) -> None:
    (outside,) = [v for v in pins()["CUE_TEST_VERSIONS"].split() if not TOOLS["cue"].supports(v)]
    repo = tmp_path / "shop"
    write_app(repo, app_text("shop"))
    found = cue_dir(outside) / "cue"
    remedy = (f"install one with `go install cuelang.org/go/cmd/cue@{TOOLS['cue'].pinned}`, or point APPRAFTER_CUE "
              "at one")
    for argv in (["validate"], ["render", "-e", "prod"], ["plan", "--from", ".", "--to", ".", "-e", "prod"]):
        result = apprafter(venv, repo, *argv, cue=outside)
        assert result.returncode == 2 and result.stdout == ""
        assert result.stderr == f"apprafter: cue at {found} is {outside}; apprafter supports cue " \
                                f"{TOOLS['cue'].supported}: {remedy}\n"
    doctor = apprafter(venv, repo, "doctor", cue=outside)
    assert doctor.returncode == 1 and f"cue: {remedy}" in doctor.stderr and "make" not in doctor.stderr + \
        doctor.stdout
    missing = subprocess.run(["apprafter", "validate"], cwd=repo, capture_output=True, text=True, check=False,
                             env={"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "APPRAFTER_TOOLS_DIR": str(tmp_path / "x"),
                                  "HOME": str(tmp_path)})
    assert missing.returncode == 2 and missing.stderr == (
        f"apprafter: cue not found (supported: {TOOLS['cue'].supported}): {remedy}\n")
    assert os.environ.get("PYTHONPATH") is None or str(REPO) not in os.environ["PYTHONPATH"]


def test_the_wheel_carries_the_sidecar_settings_cluster_bootstrap_applies(venv: Path) -> None:
    """`cluster-bootstrap` applies deploy/argocd's files themselves: the wheel holds them byte for byte."""
    found = subprocess.run([str(venv / "bin" / "python"), "-c", "from apprafter.bootstrap_cmd import "
                            "sidecar_directory; print(sidecar_directory())"], capture_output=True, text=True,
                           check=True, timeout=60, cwd=venv)
    directory = Path(found.stdout.strip())
    assert directory.is_relative_to(venv)
    checkout = REPO / "deploy" / "argocd"
    assert sorted(p.name for p in directory.iterdir()) == sorted(p.name for p in checkout.iterdir())
    for path in checkout.iterdir():
        assert (directory / path.name).read_bytes() == path.read_bytes(), path.name


def test_make_release_tags_the_version_the_docs_pin_and_pip_installs_that_tag(tmp_path: Path) -> None:
    """The release recipe (`make release`) on a clean checkout: the tag every doc pins, the wheel of that commit;
    then `pip install "apprafter-render @ git+<the repository>@v<version>"`, as the docs write it, installs it (issue
    43: every pinned install failed, the tag did not exist). Again on the same commit it changes nothing; a dirty
    tree is refused."""
    repo = checkout(tmp_path / "render")
    tag = f"v{PROJECT['version']}"
    env = {"PATH": f"{BASE_PYTHON.parent}:/usr/bin:/bin", "HOME": str(tmp_path / "home"), "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com"}

    def release() -> subprocess.CompletedProcess[str]:
        return subprocess.run(["make", "release"], cwd=repo, env=env, capture_output=True, text=True, timeout=600,
                              check=False)

    made = release()
    assert (made.returncode, made.stdout) == (0, f"dist/{WHEEL}\n"), made.stderr
    head = git(repo, "rev-parse", "HEAD").strip()
    assert git(repo, "rev-parse", f"{tag}^{{commit}}").strip() == head
    assert f"release: {tag} tags {head[:12]}" in made.stderr
    again = release()
    assert again.returncode == 0 and f"{tag} tags {head[:12]} (already)" in again.stderr
    (repo / "README.md").write_text("changed\n")
    dirty = release()
    assert dirty.returncode != 0 and "the working tree has changes" in dirty.stderr
    git(repo, "checkout", "README.md")
    subprocess.run([BASE_PYTHON, "-m", "venv", str(tmp_path / "venv")], check=True, timeout=300)
    pip = str(tmp_path / "venv" / "bin" / "pip")
    subprocess.run([pip, "install", "--quiet", "--upgrade", "pip"], check=True, timeout=600, capture_output=True)
    installed = subprocess.run([pip, "install", "--quiet", f"apprafter-render @ git+file://{repo}@{tag}"],
                               capture_output=True, text=True, timeout=900, check=False)
    assert installed.returncode == 0, installed.stderr
    version = apprafter(tmp_path / "venv", tmp_path, "--version")
    assert version.stdout == f"apprafter, version {PROJECT['version']}\n", version.stderr
    action = git(repo, "show", f"{tag}:action.yml")  # `uses: apprafter/render@<tag>` runs this file of the tag
    assert 'python -m pip install --quiet "$GITHUB_ACTION_PATH"' in action
