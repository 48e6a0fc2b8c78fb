"""Property tests (issue 12): generated hostile CUE, platform files and Argo CD input never crash, hang or leak.

Whatever is thrown at the loaders, the outcome is a result or a UserError/ToolFailure (exit 1 or 2), every
problem prints as one line, and no env literal's bytes appear in any message. The CLI sample runs the real
process under a hard memory cap and a hang guard: nothing on stdout, no traceback.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cmp import argo_env
from renderer import settings as renderer_settings
from renderer.errors import ToolFailure, UserError
from renderer.load import load
from renderer.validate import check
from tests.renderer.helpers import MINIMAL, assert_clean_failure, run_capped, write_app

SECRET = "Zq9_sEcReT_env_literal_7Kx"
LABELS = st.sampled_from(["a", "spec", "base", "env", "metadata", "_h", "#D", '"x y"', '"\\u0000"', '"a\\nb"',
                          '"\\t"', "environments", "dev"])
ATOMS = st.sampled_from(['"s"', '"\\u0007bell"', '"line\\nbreak"', "1", "true", "null", "_", "int", "string",
                         '"\\\\"', "#\"raw\"#", '"""\n\tm\n\t"""', "[]", "{}", "env.PASSWORD", '=~"^x$"', '"\\(1)"',
                         "spec.base.env.PASSWORD"])


@st.composite
def cue_value(draw: st.DrawFn, depth: int = 0) -> str:
    choice = draw(st.integers(0, 5 if depth < 4 else 0))
    if choice == 0:
        return draw(ATOMS)
    if choice == 1:  # deep nesting
        n = draw(st.integers(1, 400))
        opener, closer = draw(st.sampled_from([("{a: ", "}"), ("[", "]"), ("{", "}")]))
        return opener * n + draw(ATOMS) * (opener != "{") + closer * n
    if choice == 2:  # a long label chain
        return ": ".join(draw(st.lists(LABELS, min_size=1, max_size=300))) + ": " + draw(ATOMS)
    if choice == 3:
        fields = draw(st.lists(st.tuples(LABELS, cue_value(depth + 1)), max_size=4))
        return "{" + ", ".join(f"{k}: {v}" for k, v in fields) + "}"
    if choice == 4:
        return "[" + ", ".join(draw(st.lists(cue_value(depth + 1), max_size=4))) + "]"
    return draw(ATOMS) + " & " + draw(cue_value(depth + 1))


@st.composite
def hostile_cue(draw: st.DrawFn) -> str:
    """MINIMAL with an env literal, plus hostile fields anywhere (top level, base, an environment)."""
    text = MINIMAL.replace("expose: port: 8080", f'expose: port: 8080\n\t\tenv: PASSWORD: "{SECRET}"')
    where = draw(st.sampled_from(["top", "base", "env", "control"]))
    value = draw(cue_value())
    if where == "top":
        return text + f"{draw(LABELS)}: {value}\n"
    if where == "base":
        return text + f"spec: base: {draw(st.sampled_from(['replicas', 'image', 'args', 'x', 'env: Y']))}: {value}\n"
    if where == "env":
        return text + f"spec: environments: {draw(LABELS)}: {value}\n"
    raw = draw(st.text(alphabet=st.characters(max_codepoint=0x2030), max_size=40))
    return text + raw + "\n"


def check_problems(error: UserError | ToolFailure) -> None:
    text = "\n".join(error.lines())
    assert SECRET not in text and SECRET[:12] not in text
    assert len(text.splitlines()) == len(error.lines())  # one line each


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(hostile_cue())
def test_hostile_cue_is_a_result_or_clean_problems(tmp_path_factory: Any, text: str) -> None:
    root = tmp_path_factory.mktemp("cue")
    write_app(root, text)
    try:
        app = load(root)
        problems = check(app)
    except (UserError, ToolFailure) as error:
        check_problems(error)
        return
    if problems:
        check_problems(UserError(problems))


YAML_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10, 10**20), st.floats(allow_nan=True),
                         st.text(max_size=20),
                         st.sampled_from(["ipv6", "ipv4", "solo", "traefik", "a.b", "..", "x\ny"]))
YAML_KEYS = st.one_of(st.sampled_from(["domain", "tier", "ipFamilies", "gateway", "name", "namespace", "listener",
                                       "providerNamespaces", "pg", "clusterIssuer", "drainSeconds",
                                       "implementation"]),
                      st.text(max_size=8), st.integers(), st.booleans())
yaml_values = st.recursive(YAML_SCALARS, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(YAML_KEYS, inner, max_size=4), max_leaves=20)


@st.composite
def hostile_yaml(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 4))
    if kind == 0:
        return yaml.safe_dump(draw(yaml_values), allow_unicode=True)
    if kind == 1:  # deep
        n = draw(st.integers(10, 300))  # the reader stops at depth 64 (deeper costs its scanner, not us)
        return "domain: " + "[" * n + "]" * n + "\n"
    if kind == 2:  # aliases, a small bomb
        return "a: &a [x, x]\nb: &b [*a, *a]\nc: &c [*b, *b]\ndomain: *c\n"
    if kind == 3:  # odd bytes
        return draw(st.text(max_size=60)) + draw(st.sampled_from(["\x00", "\ufeff", "\x85", "\t", "!!binary x"]))
    return json.dumps(draw(yaml_values))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_yaml())
def test_hostile_platform_files_give_a_context_or_problems(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "platform.yaml"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            renderer_settings.platform_context(path)
        except UserError as error:
            check_problems(error)
            assert all(p.file == str(path) for p in error.problems)


ENV_NAMES = st.one_of(st.sampled_from(["ARGOCD_ENV_APPRAFTER_DOMAIN", "ARGOCD_ENV_apprafter_tier",
                                       "ARGOCD_ENV_APPRAFTER_MODE", "ARGOCD_ENV_APPRAFTER_ENVIRONMENT",
                                       "ARGOCD_ENV_Apprafter_Gateway_Namespace", "ARGOCD_APP_NAMESPACE",
                                       "ARGOCD_APP_NAME", "ARGOCD_ENV_APPRAFTER_X"]),
                      st.text(alphabet="ABCDEFGHIJ_abc", min_size=1, max_size=12).map(lambda s: "ARGOCD_ENV_" + s))
ENV_VALUES = st.one_of(st.text(max_size=30).map(lambda s: s.replace("\x00", "")), st.just(SECRET),
                       st.sampled_from(["dev", "prod", "manifests", "cr", "team", "a.b", "..", "x y"]))


@st.composite
def parameters(draw: st.DrawFn) -> str | None:
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return None
    if kind == 1:
        n = draw(st.integers(1, 3000))
        return "[" * n + "]" * n
    if kind == 2:
        return json.dumps(draw(yaml_values.filter(lambda v: not isinstance(v, float))), default=str)
    name = draw(st.sampled_from(["environment", "other", 7]))
    return json.dumps([{"name": name, draw(st.sampled_from(["string", "array", "map"])): draw(yaml_values)}],
                      default=str)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(ENV_NAMES, ENV_VALUES, max_size=5), parameters())
def test_hostile_plugin_env_is_read_or_refused_by_name(env: dict[str, str], params: str | None) -> None:
    if params is not None:
        env = {**env, "ARGOCD_APP_PARAMETERS": params}
    try:
        argo_env.choose_environment(env, ["dev", "prod"])
        argo_env.settings(env)
        renderer_settings.namespace(renderer_settings.Given(env.get("ARGOCD_APP_NAMESPACE"),
                                                            renderer_settings.Origin("ARGOCD_APP_NAMESPACE")))
    except UserError as error:
        check_problems(error)
        assert all(SECRET not in line for line in error.lines())


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(hostile_cue(), hostile_yaml())
def test_the_cli_fails_cleanly_under_a_memory_cap(tmp_path_factory: Any, text: str, platform: str) -> None:
    root = tmp_path_factory.mktemp("cli")
    write_app(root, text + "spec: base: replicas: -1\n")  # never valid: the run must fail
    (root / "platform.yaml").write_text(platform, encoding="utf-8", errors="surrogatepass")
    for args in (("render", ".", "--env", "dev"), ("render", ".", "--env", "dev", "--platform", "platform.yaml"),
                 ("validate", ".")):
        result = run_capped(*args, cwd=root, memory_mb=1536, timeout=90,
                            env={"APPRAFTER_CUE_TIMEOUT": "10", "APPRAFTER_CUE_MEMORY_MB": "512"})
        assert_clean_failure(result)
        assert SECRET not in result.stderr


def test_the_platform_file_alias_bomb_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "platform.yaml"
    path.write_text("a: &a [x, x]\nb: &b [*a, *a]\ndomain: *b\n")
    try:
        renderer_settings.platform_context(path)
    except UserError as error:
        assert error.lines() == [f"{path}:2:8: b.0: YAML alias *a is not allowed (write the value out)"]
    else:
        raise AssertionError("an alias was accepted")
