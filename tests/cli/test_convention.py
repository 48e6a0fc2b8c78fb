"""The one CLI convention (apprafter/convention.py), walked over every command: flags, outputs, old spellings,
exit codes of usage errors, and what `--help` and the fast paths import."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
import yaml

from apprafter.cli import COMMANDS, main
from apprafter.convention import ALIASES, DEPRECATED, OUTPUTS, SPELLINGS, VALUE_ALIASES
from tests.renderer.helpers import MINIMAL, REPO, run_cli, write_app


def commands(group: click.Group = main, prefix: str = "") -> Iterator[tuple[str, click.Command]]:
    """Every command below the root, by its path (`migration list`)."""
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        path = f"{prefix}{name}"
        yield path, command
        if isinstance(command, click.Group):
            yield from commands(command, path + " ")


ALL = dict(commands())


def options(command: click.Command, hidden: bool = False) -> list[click.Option]:
    return [p for p in command.params if isinstance(p, click.Option) and p.hidden == hidden]


def test_the_walk_reaches_every_command() -> None:
    assert set(COMMANDS) <= set(ALL)
    assert {"migration list", "migration approve", "platform status", "stack plan", "cmp generate"} <= set(ALL)


@pytest.mark.parametrize("path", sorted(ALL))
def test_every_shared_concept_is_spelled_the_one_way(path: str) -> None:
    for option in options(ALL[path]):
        flags = set(option.opts) | set(option.secondary_opts)
        for spelling in SPELLINGS:
            spelled = {spelling.long} | ({spelling.short} if spelling.short else set())
            if flags & spelled:
                assert flags == spelled, f"{path}: {sorted(flags)} is not {sorted(spelled)}"
        assert not flags & set(DEPRECATED), f"{path}: {sorted(flags)} is a deprecated spelling"
        shorts = {f for f in flags if re.fullmatch(r"-[A-Za-z]", f)}
        known = {s.short for s in SPELLINGS if s.short} | {"-h"}
        assert shorts <= known, f"{path}: short flag {sorted(shorts - known)} is not part of the convention"


@pytest.mark.parametrize("path", sorted(ALL))
def test_output_formats_are_the_tables(path: str) -> None:
    output = [o for o in options(ALL[path]) if "--output" in o.opts]
    if path not in OUTPUTS:
        assert output == [], f"{path} has -o but is not in convention.OUTPUTS"
        return
    (option,) = output
    assert isinstance(option.type, click.Choice)
    assert tuple(option.type.choices) == OUTPUTS[path] and option.default == OUTPUTS[path][0]
    hidden = {flag for o in options(ALL[path], hidden=True) for flag in o.opts if flag in DEPRECATED}
    assert hidden == set(ALIASES.get(path, ())), path


def test_every_table_entry_is_a_command() -> None:
    assert set(OUTPUTS) <= set(ALL) and set(ALIASES) <= set(OUTPUTS) and set(VALUE_ALIASES) <= set(OUTPUTS)


def test_namespace_and_environment_options_exist_where_they_apply() -> None:
    def has(path: str, flag: str) -> bool:
        return any(flag in o.opts for o in options(ALL[path]))

    for path in ("render", "plan", "operator", "migration list", "migration approve", "migration reject"):
        assert has(path, "-n"), path
    assert has("migration list", "-A")
    for path in ("render", "plan"):
        assert has(path, "-e"), path
    for path in ALL:  # one global switch, accepted by every command (and before any)
        assert has(path, "--no-color"), path


def test_help_groups_the_commands_by_audience() -> None:
    from apprafter.cli import SECTIONS

    listed = [name for _, names in SECTIONS for name in names if name in COMMANDS]
    assert sorted(listed) == sorted(COMMANDS) and len(listed) == len(set(listed))
    result = run_cli("--help")
    headings = [line for line in result.stdout.splitlines() if line and not line.startswith(" ")]
    assert headings[-5:] == [f"{title}:" for title, _ in SECTIONS]
    app = result.stdout.split(SECTIONS[0][0])[1].split(SECTIONS[1][0])[0]
    assert "  render " in app and "  plan " in app and "operator" not in app


def test_no_color_before_the_command_turns_colour_off_for_it(tmp_path: Path) -> None:
    import os
    import pty

    public = MINIMAL.replace("expose: port: 8080", 'expose: {port: 8080, network: "public"}')
    old, new = write_app(tmp_path / "a", MINIMAL), write_app(tmp_path / "b", public)
    outputs = []
    for argv in (["plan"], ["--no-color", "plan"]):
        leader, follower = pty.openpty()
        proc = subprocess.run([sys.executable, "-m", "apprafter", *argv, "--from", str(old), "--to", str(new), "-e",
                               "prod"], stdout=follower, stderr=subprocess.PIPE, timeout=120, check=False,
                              env={k: v for k, v in os.environ.items() if k != "NO_COLOR"})
        os.close(follower)
        outputs.append(os.read(leader, 65536).decode())
        os.close(leader)
        assert proc.returncode == 0, proc.stderr
    assert "\x1b[" in outputs[0] and "\x1b[" not in outputs[1]


@pytest.mark.parametrize("path", sorted(ALL))
def test_a_usage_error_exits_1_never_2(path: str) -> None:
    result = run_cli(*path.split(), "--no-such-flag")
    assert result.returncode == 1 and result.stdout == "", (path, result.returncode, result.stderr)
    assert "No such option: --no-such-flag" in result.stderr or "No such option '--no-such-flag'" in result.stderr


def test_a_usage_error_under_detailed_exitcode_is_not_gated(tmp_path: Path) -> None:
    app = write_app(tmp_path, MINIMAL)
    for argv in (["plan", "--from", str(app), "--to", str(app), "-e", "prod", "--detailed-exitcode", "--to-much"],
                 ["plan", "--to", str(app), "--detailed-exitcode"],
                 ["plan", "--from", str(app), "--to", str(app), "-e", "prod", "--detailed-exitcode", "-o", "xml"],
                 ["stack", "plan", "--detailed-exitcode"]):
        result = run_cli(*argv)
        assert result.returncode == 1, (argv, result.stderr)


def test_old_spellings_still_work_with_one_deprecation_line(tmp_path: Path) -> None:
    write_app(tmp_path, MINIMAL)
    new = run_cli("envs", ".", "-o", "json", cwd=tmp_path)
    old = run_cli("envs", ".", "--json", cwd=tmp_path)
    assert new.stderr == "" and json.loads(new.stdout) == ["dev", "prod"]
    assert old.stdout == new.stdout and old.stderr == "warning: --json is deprecated: use -o json\n"
    fmt = run_cli("plan", "--from", ".", "--to", ".", "-e", "prod", "--format", "json", cwd=tmp_path)
    assert fmt.returncode == 0 and json.loads(fmt.stdout)["changes"] == []
    assert fmt.stderr == "warning: --format json is deprecated: use -o json\n"
    explicit = run_cli("plan", "--from", ".", "--to", ".", "-e", "prod", "-o", "text", "--format", "json",
                       cwd=tmp_path)
    assert explicit.stdout.startswith("apprafter plan:")  # -o wins over the old spelling


@pytest.mark.parametrize("argv", [["envs", "."], ["validate", "."], ["version"], ["doctor"],
                                  ["plan", "--from", ".", "--to", ".", "-e", "prod"]])
def test_yaml_is_the_json_document_in_yaml(tmp_path: Path, argv: list[str]) -> None:
    write_app(tmp_path, MINIMAL)
    as_json = run_cli(*argv, "-o", "json", cwd=tmp_path)
    as_yaml = run_cli(*argv, "-o", "yaml", cwd=tmp_path)
    assert as_json.returncode == as_yaml.returncode == 0, as_yaml.stderr
    assert yaml.safe_load(as_yaml.stdout) == json.loads(as_json.stdout)


def test_render_speaks_the_convention_on_its_fast_path_too(tmp_path: Path) -> None:
    write_app(tmp_path, MINIMAL)
    long = run_cli("render", ".", "--env", "prod", "--namespace", "shop", cwd=tmp_path)
    short = run_cli("render", ".", "-e", "prod", "-n", "shop", cwd=tmp_path)
    attached = run_cli("render", ".", "-eprod", "-nshop", cwd=tmp_path)  # click's path: the same answer
    assert long.returncode == 0 and long.stdout == short.stdout == attached.stdout
    listed = json.loads(run_cli("render", ".", "-e", "prod", "-n", "shop", "-o", "json", cwd=tmp_path).stdout)
    assert listed["kind"] == "List" and listed["items"] == list(yaml.safe_load_all(long.stdout))


HEAVY = ("lightkube", "httpx", "httpcore", "jsonschema", "asyncio", "reconciler", "oras", "requests", "yaml",
         "ruamel", "uvicorn", "cryptography", "openapi_schema_validator", "admission", "prometheus_client")


def test_no_command_module_imports_a_heavy_library_at_load() -> None:
    """`--help` of any command loads every command module (the root help lists them all): none may pull in the
    cluster client, HTTP, JSON Schema or YAML libraries, which their bodies import when they run."""
    probe = ("import sys, click\nfrom apprafter.cli import main\n"
             "def walk(group):\n    ctx = click.Context(group)\n    for name in group.list_commands(ctx):\n"
             "        command = group.get_command(ctx, name)\n"
             "        if isinstance(command, click.Group): walk(command)\n"
             "walk(main)\nprint('\\n'.join(sorted(sys.modules)))\n")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                            cwd=REPO).stdout.split()
    heavy = sorted(m for m in loaded if m.split(".")[0] in HEAVY)
    assert heavy == []


def imported(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> set[str]:
    """The modules a CLI run imports (python -X importtime), checking it succeeded."""
    import os

    env = {**(os.environ if env is None else env), "PYTHONPATH": str(REPO)}  # this tree, not the venv's install
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "apprafter", *argv], cwd=cwd,
                            capture_output=True, text=True, check=False, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    return {line.split("|")[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")}


def test_the_fast_paths_import_nothing_of_the_cli_convention(tmp_path: Path) -> None:
    import os

    write_app(tmp_path, MINIMAL)
    new = {"click", "apprafter.options", "apprafter.complete", "renderer.hints", "compatibility.monorepo",
           "compatibility.markdown", "apprafter.plan_sides", "difflib"}
    render = imported(["render", ".", "-e", "prod"], tmp_path)
    assert "renderer.render" in render and not render & new
    plugin_env = {**os.environ, "ARGOCD_APP_NAME": "demo-dev", "ARGOCD_APP_SOURCE_PATH": ".", "PWD": str(tmp_path)}
    plugin = imported(["cmp", "generate"], tmp_path, plugin_env)
    assert "cmp.commands" in plugin and not plugin & new


def test_the_fast_paths_leave_the_costly_stdlib_out(tmp_path: Path) -> None:
    """`render` and the plugin start cue and read their records without typing, subprocess (with its selectors,
    signal, threading) and copy: ≈ 35 M instructions, 10 ms of CPU of every run (docs/measurements.md)."""
    import os

    write_app(tmp_path, MINIMAL)
    costly = {"typing", "subprocess", "selectors", "signal", "threading", "copy"}  # (contextlib: -m imports it)
    for mode in ("cr", "manifests"):
        render = imported(["render", ".", "-e", "prod", "--mode", mode], tmp_path)
        assert "renderer.cue" in render and render & costly == set()
    plugin_env = {**os.environ, "ARGOCD_APP_NAME": "demo-dev", "ARGOCD_APP_SOURCE_PATH": ".", "PWD": str(tmp_path)}
    plugin = imported(["cmp", "generate"], tmp_path, plugin_env)
    assert "renderer.cue" in plugin and plugin & costly == set()


def test_the_collector_is_back_on_for_the_render_itself(capsys: pytest.CaptureFixture[str]) -> None:
    """The fast paths import with the garbage collector off (apprafter.entry); the render's own work runs with it
    on again, so cyclic garbage a hostile input makes is still collected within the memory budget."""
    import gc
    import resource

    from apprafter import render_run

    values = render_run.parse([str(REPO / "examples" / "webapp"), "--env", "prod"])
    assert values is not None
    data_limit = resource.getrlimit(resource.RLIMIT_DATA)  # the render caps its process: this one gets it back
    gc.disable()
    try:
        render_run.render(**values)  # type: ignore[arg-type]  # parse() fills every parameter
        assert gc.isenabled()
    finally:
        gc.enable()
        resource.setrlimit(resource.RLIMIT_DATA, data_limit)
    assert "kind: Application" in capsys.readouterr().out
