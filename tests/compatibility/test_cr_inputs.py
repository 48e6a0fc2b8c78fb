"""`plan` on Application CRs, differentially against the CUE path: what render emits plan accepts, and the
same mistake written in CUE and in a CR is reported at the same field (the CR's at its YAML node)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compatibility.inputs import parse_cr
from compatibility.sides import side
from renderer.emit import dump_stream
from renderer.errors import UserError
from renderer.load import load
from renderer.render import render_loaded
from renderer.validate import UNPRINTABLE
from tests.renderer.helpers import run_cli

VALID: dict[str, Any] = {
    "apiVersion": "apprafter.io/v1alpha1", "kind": "Application", "metadata": {"name": "demo"},
    "spec": {"base": {"image": "ghcr.io/acme/demo:1", "expose": {"port": 8080}, "env": {"A": "x"}},
             "environments": {"dev": {}, "prod": {"replicas": 2}}},
}


def as_cue(root: Path, doc: dict[str, Any]) -> Path:
    """The document written as CUE (JSON is CUE) in root/apprafter/Application.cue."""
    (root / "apprafter").mkdir(parents=True, exist_ok=True)
    (root / "apprafter" / "Application.cue").write_text(json.dumps(doc, indent=1)[1:-1])
    return root


def with_mistake(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(VALID)
    parent = doc
    for part in path[:-1]:
        parent = parent.setdefault(part, {})
    if value is None:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return doc


def fields(error: UserError) -> set[str]:
    """Reported field paths, with cue's quoting of non-identifier labels ("bad-key") taken off."""
    return {p.field.replace('"', "") for p in error.problems}


MISTAKES = [
    (("spec", "base", "replicas"), "two"),
    (("spec", "base", "expose", "network"), "open"),
    (("spec", "base", "bogus"), 1),
    (("spec", "environments", "prod", "autoscale"), {"on": "cpu", "min": 1, "max": 3, "target": 0}),
    (("spec", "base", "expose", "port"), 70000),
    (("spec", "base", "env", "A"), {"secret": 1}),
    (("spec", "base", "env", "A"), {"claim": "pg/url", "x": 1}),
    (("spec", "base", "env", "bad-key"), "x"),
    (("metadata", "name"), 5),
    (("spec", "environments", "prod", "imagePolicy"), {"interval": "5 minutes"}),
    (("spec", "base", "needs"), {"pg": {"size": "huge"}}),
    (("spec", "base", "expose"), {"network": "public"}),
    (("spec", "environments"), None),
    (("kind",), "Secret"),
]


@pytest.mark.parametrize(("path", "value"), MISTAKES, ids=[".".join(p) + "=" + json.dumps(v) for p, v in MISTAKES])
def test_the_same_mistake_is_reported_at_the_same_field(tmp_path: Path, path: tuple[str, ...], value: Any) -> None:
    doc = with_mistake(path, value)
    with pytest.raises(UserError) as from_cue:
        side(load(as_cue(tmp_path, doc)), "prod", required=True)
    text = yaml.safe_dump(doc, sort_keys=False)
    with pytest.raises(UserError) as from_cr:
        side(parse_cr(text, "app.yaml"), "prod", required=True)
    assert fields(from_cr.value) == fields(from_cue.value)
    lines = text.splitlines()
    for problem in from_cr.value.problems:  # at the YAML node: its line writes the field (or its parent)
        written = [part for part in problem.field.split(".") if f"{part}:" in text]
        assert problem.file == "app.yaml" and f"{written[-1]}:" in lines[problem.line - 1], problem


def test_problems_point_at_the_yaml_node_not_at_line_1() -> None:
    text = ("apiVersion: apprafter.io/v1alpha1\nkind: Application\nmetadata:\n  name: demo\nspec:\n  base:\n"
            "    image: ghcr.io/acme/demo:1\n    autoscale: {on: cpu, min: 1, max: 3, target: 0}\n"
            "  environments:\n    prod:\n      replicas: two\n      bogus: 1\n")
    with pytest.raises(UserError) as err:
        parse_cr(text, "app.yaml")
    assert [str(p) for p in err.value.problems] == [
        "app.yaml:8:50: spec.base.autoscale.target: 0 is less than or equal to the minimum of 0",
        "app.yaml:11:17: spec.environments.prod.replicas: 'two' is not of type 'integer'",
        "app.yaml:12:7: spec.environments.prod.bogus: field not allowed",
    ]


def test_validation_after_the_schema_points_at_the_yaml_node_too() -> None:
    text = yaml.safe_dump(with_mistake(("spec", "environments", "prod", "env"), {"DB": {"claim": "pg/url"}}),
                          sort_keys=False)
    with pytest.raises(UserError) as err:
        side(parse_cr(text, "app.yaml"), "prod", required=True)
    (problem,) = err.value.problems
    assert problem.field == "spec.environments.prod.env.DB" and "need 'pg'" in problem.message
    assert text.splitlines()[problem.line - 1][problem.col - 1:].startswith("DB:")


def test_yaml_1_2_on_is_a_key_and_a_fractional_target_is_valid() -> None:
    text = ("apiVersion: apprafter.io/v1alpha1\nkind: Application\nmetadata: {name: demo}\nspec:\n  base:\n"
            "    image: ghcr.io/acme/demo:1\n    autoscale: {on: cpu, min: 1, max: 3, target: 0.5}\n"
            "  environments: {prod: {}}\n")
    after = side(parse_cr(text, "app.yaml"), "prod", required=True)
    assert after is not None and after.spec["autoscale"] == {"on": "cpu", "min": 1, "max": 3, "target": 0.5}


def test_duplicate_keys_in_a_cr_are_refused_where_they_are_written() -> None:
    text = "apiVersion: apprafter.io/v1alpha1\nkind: Application\nmetadata: {name: demo}\nmetadata: {name: evil}\n"
    with pytest.raises(UserError) as err:
        parse_cr(text, "app.yaml")
    assert str(err.value) == "app.yaml:4:1: metadata: duplicate key (the first one would be silently overridden)"


# --- every CR render emits is a CR plan accepts, read to the same effective spec --------------------------
dns = st.from_regex(r"[a-z]([a-z0-9]{0,6})", fullmatch=True)
sizes = st.sampled_from(["nano", "small", "medium", "large"])
needs = st.fixed_dictionaries({}, optional={
    "pg": st.fixed_dictionaries({}, optional={"size": sizes, "version": st.sampled_from(["15", "16"])}),
    "redis": st.fixed_dictionaries({}, optional={"size": sizes}),
    "jetstream": st.fixed_dictionaries({"streams": st.lists(dns, min_size=1, max_size=2)}),
    "s3": st.fixed_dictionaries({}, optional={"buckets": st.lists(dns, max_size=2)}),
    "disk": st.fixed_dictionaries({}, optional={"size": st.sampled_from(["small", "10Gi"])}),
})
expose = st.fixed_dictionaries({"port": st.integers(1, 65535)}, optional={
    "network": st.sampled_from(["public", "internal", "vpn"]), "hostname": st.builds("{}.example.com".format, dns),
    "paths": st.sampled_from([["/"], ["/", "/api"]]), "tls": st.booleans(), "websocket": st.booleans(),
    "sticky": st.booleans(), "protocols": st.sampled_from([["ipv4"], ["ipv6", "ipv4"]]),
    "rewrites": st.just([{"from": "/old/(.*)", "to": "/new/$1"}]),
})
targets = st.integers(1, 10000).map(lambda n: n / 100) | st.integers(1, 100)
autoscale = st.builds(lambda on, lo, extra, target: {"on": on, "min": lo, "max": lo + extra, "target": target},
                      st.sampled_from(["cpu", "memory"]), st.integers(1, 3), st.integers(0, 5), targets)
# Any text the API server can carry (validate.UNPRINTABLE refuses the rest at every door).
def printable(size: int) -> st.SearchStrategy[str]:
    return st.text(max_size=size).map(lambda text: UNPRINTABLE.sub("", text))


literal_env = st.dictionaries(st.sampled_from(["LOG", "MODE", "URL"]), printable(6) | st.just('{"x": 1}'),
                              max_size=2)
workload = st.fixed_dictionaries({}, optional={
    "replicas": st.integers(0, 5), "expose": expose, "autoscale": autoscale, "env": literal_env,
    "imagePolicy": st.fixed_dictionaries({}, optional={"resolve": st.sampled_from(["off", "digest"]),
                                                       "interval": st.sampled_from(["5m", "1h"])}),
    "confidential": st.booleans(), "command": st.lists(printable(4), max_size=2),
    "resources": st.just({"requests": {"cpu": "100m"}, "limits": {"memory": "1.5Gi"}}),
    "connects": st.just({"egress": {"external": [{"host": "api.example.com", "port": 443}, {"cidr": "10.0.0.0/8",
                                                                                              "port": 53,
                                                                                              "protocol": "UDP"}]}}),
})


@st.composite
def applications(draw: st.DrawFn) -> dict[str, Any]:
    base = {"image": "ghcr.io/acme/demo:1", **draw(workload), "needs": draw(needs)}
    if "expose" not in base:
        base["expose"] = {"port": 8080}
    env = dict(base.get("env", {}))
    for need in base["needs"]:
        if need != "disk":
            env[f"{need.upper()}_URL"] = {"claim": f"{need}/url"}
    env["API_KEY"] = {"secret": "vendor-creds/key"}
    base["env"] = env
    override = draw(workload)
    override.pop("expose", None)
    if "expose" in base and draw(st.booleans()):
        override["expose"] = {"network": draw(st.sampled_from(["public", "vpn"]))}
    if base["expose"].get("sticky") and "public" in (base["expose"].get("network"),
                                                      override.get("expose", {}).get("network")):
        del base["expose"]["sticky"]  # refused on a public app (validate.STICKY_PUBLIC): not a CR render emits
    return {"apiVersion": "apprafter.io/v1alpha1", "kind": "Application", "metadata": {"name": draw(dns)},
            "spec": {"base": base, "environments": {"dev": {}, "prod": override},
                     "budget": {"prod": draw(sizes)}}}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(applications())
def test_every_cr_render_emits_is_accepted_by_plan_with_the_same_effective_spec(tmp_path: Path,
                                                                                doc: dict[str, Any]) -> None:
    app = load(as_cue(tmp_path / "app", doc))
    for env in ("dev", "prod"):
        cr_text = dump_stream(render_loaded(app, env, "cr").objects)
        from_cr = side(parse_cr(cr_text, f"{env}.yaml"), env, required=True)
        from_cue = side(app, env, required=True)
        assert from_cr is not None and from_cue is not None
        assert from_cr.spec == from_cue.spec and from_cr.app == from_cue.app


def test_plan_reads_a_cr_that_render_wrote_with_a_fractional_target(tmp_path: Path) -> None:
    doc = with_mistake(("spec", "base", "autoscale"), {"on": "cpu", "min": 1, "max": 3, "target": 0.5})
    root = as_cue(tmp_path, doc)
    rendered = run_cli("render", str(root), "--env", "prod", "--mode", "cr")
    assert rendered.returncode == 0, rendered.stderr
    (tmp_path / "cr.yaml").write_text(rendered.stdout)
    result = run_cli("plan", "--from", str(tmp_path / "cr.yaml"), "--to", str(root), "--env", "prod")
    assert result.returncode == 0, result.stderr
    assert "No changes." in result.stdout
