"""How the CLI reports the controller runtime's own errors (controller_runtime.errors: KubeError, KubeConfigError,
not AppRafterErrors): one line on stderr, nothing on stdout, exit 2, as a tool failure; anything else is a bug and
keeps its traceback. Needs no tool: the cluster commands fail at the kubeconfig or the connection."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from apprafter.errors import report, reported
from controller_runtime.errors import KubeConfigError, KubeError
from tests.renderer.helpers import run_cli
from toolchain.errors import Problem, UserError


@pytest.mark.parametrize("error", [
    KubeError("cannot reach the API server (list migrationplans): ConnectError: refused", 0),
    KubeError("get PlatformStack apprafter-system/default: forbidden", 403, "Forbidden"),
    KubeConfigError("no cluster configured: pass --kubeconfig PATH or set KUBECONFIG"),
])
def test_a_runtime_error_is_one_line_and_exit_2(error: Exception, capsys: pytest.CaptureFixture[str]) -> None:
    @reported
    def command() -> None:
        raise error

    with pytest.raises(SystemExit) as exited:
        command()
    assert exited.value.code == 2
    assert capsys.readouterr() == ("", f"apprafter: {error}\n")


def test_the_programs_own_errors_keep_their_lines_and_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert report(UserError([Problem("platformstack/default", 0, 0, "", "refused by the cluster: no")])) == 1
    assert capsys.readouterr().err == "platformstack/default: refused by the cluster: no\n"
    assert report(KubeError("watch things: stalled", 0, "Stalled")) == 2
    assert capsys.readouterr().err == "apprafter: watch things: stalled\n"


def test_anything_else_is_a_bug_and_raises() -> None:
    @reported
    def command() -> None:
        raise ValueError("a bug")

    with pytest.raises(ValueError, match="a bug"):
        command()


def kubeconfig(path: Path, server: str) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]}))
    return path


@pytest.mark.parametrize("command", [("platform", "status"), ("migration", "list")])
def test_an_unreachable_api_server_is_one_line_and_exit_2(command: tuple[str, ...], tmp_path: Path) -> None:
    config = kubeconfig(tmp_path / "kubeconfig", "https://admin:hunter2@127.0.0.1:1")
    result = run_cli(*command, "--kubeconfig", str(config))
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    assert result.stderr.startswith("apprafter: cannot reach the API server (") and len(result.stderr.splitlines()) == 1
    assert result.stderr.endswith("(server https://***@127.0.0.1:1: check --kubeconfig and --context)\n")
    assert "hunter2" not in result.stderr


def test_no_kubeconfig_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = run_cli("platform", "status", "--kubeconfig", str(tmp_path / "absent"))
    assert (result.returncode, result.stdout, result.stderr) == (
        2, "", f"apprafter: --kubeconfig {tmp_path / 'absent'}: no such file\n")
    nothing = run_cli("migration", "list", env={"HOME": str(tmp_path), "KUBECONFIG": ""})
    assert (nothing.returncode, nothing.stdout) == (2, "")
    assert nothing.stderr.startswith("apprafter: no cluster configured: pass --kubeconfig PATH or set KUBECONFIG")
