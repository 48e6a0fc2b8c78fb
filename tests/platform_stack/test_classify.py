"""`stack classify`: per-component and overall classes from compatibility metadata and the values diff."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from platform_stack.classify import StackSnapshot, classify_stack
from platform_stack.snapshot import load_snapshot
from tests.platform_stack.conftest import built_tgz, cli, ok


def snap(
    version: str,
    components: dict[str, dict[str, Any]],
    compat: dict[str, dict[str, str]],
    minimum: str = "1.30.0",
) -> StackSnapshot:
    table = {v: {"minimumKubernetesVersion": minimum, "components": c} for v, c in compat.items()}
    return StackSnapshot(version, minimum, table, components)


def comp(rev: str, **values: Any) -> dict[str, Any]:
    return {
        "source": {"repoURL": "r", "chart": "c", "targetRevision": rev},
        "namespace": "n",
        "syncWave": 0,
        "selfManaged": False,
        "syncPolicy": {"automated": True},
        "values": values,
    }


def by_name(result: Any) -> dict[str, Any]:
    return {c.component: c for c in result.components}


def test_class_comes_from_every_version_crossed() -> None:
    compat = {"1.0.0": {"pg": "safe"}, "1.1.0": {"pg": "data-migration"}, "1.2.0": {"pg": "safe"}}
    result = classify_stack(
        snap("1.0.0", {"pg": comp("1")}, compat), snap("1.2.0", {"pg": comp("2")}, compat)
    )
    assert by_name(result)["pg"].classification == "data-migration"
    assert result.classification == "data-migration"
    assert by_name(result)["pg"].fields == ["source.targetRevision"]


def test_unchanged_component_is_safe_even_if_its_release_says_otherwise() -> None:
    compat = {"1.0.0": {"pg": "safe"}, "1.1.0": {"pg": "breaking"}}
    result = classify_stack(
        snap("1.0.0", {"pg": comp("1")}, compat), snap("1.1.0", {"pg": comp("1")}, compat)
    )
    assert by_name(result)["pg"].change == "unchanged" and result.classification == "safe"


def test_argocd_change_is_at_least_requires_restart() -> None:
    compat = {"1.0.0": {"argocd": "safe"}, "1.1.0": {"argocd": "safe"}}
    old, new = comp("1"), comp("1", replicas=2)
    old["selfManaged"] = new["selfManaged"] = True
    result = classify_stack(snap("1.0.0", {"argocd": old}, compat), snap("1.1.0", {"argocd": new}, compat))
    assert by_name(result)["argocd"].classification == "requires-restart"


def test_removed_is_breaking_added_is_safe_downgrade_is_breaking() -> None:
    compat = {"1.0.0": {"a": "safe", "b": "safe"}, "1.1.0": {"a": "safe", "b": "safe"}}
    before = snap("1.1.0", {"a": comp("2"), "gone": comp("1")}, compat)
    after = snap("1.0.0", {"a": comp("1"), "new": comp("1")}, compat)
    verdicts = by_name(classify_stack(before, after))
    assert (verdicts["gone"].change, verdicts["gone"].classification) == ("removed", "breaking")
    assert (verdicts["new"].change, verdicts["new"].classification) == ("added", "safe")
    assert verdicts["a"].classification == "breaking" and "downgrade" in verdicts["a"].reasons[0]


def test_kubernetes_minimum_above_the_cluster_is_breaking() -> None:
    compat: dict[str, dict[str, str]] = {"1.0.0": {}, "1.1.0": {}}
    before, after = snap("1.0.0", {}, compat), snap("1.1.0", {}, compat, minimum="1.33.0")
    assert classify_stack(before, after, "v1.32.9").classification == "breaking"
    assert classify_stack(before, after, "1.33.0").classification == "safe"
    assert classify_stack(before, after).classification == "safe"


def test_overall_is_the_highest_and_classifications_list_every_class_present() -> None:
    compat = {
        "1.0.0": {"a": "safe", "b": "safe"},
        "1.1.0": {"a": "requires-restart", "b": "data-migration"},
    }
    result = classify_stack(
        snap("1.0.0", {"a": comp("1"), "b": comp("1")}, compat),
        snap("1.1.0", {"a": comp("2"), "b": comp("2")}, compat),
    )
    assert result.classification == "data-migration"
    assert result.classifications == ["data-migration", "requires-restart"]
    assert set(result.classifications) <= {"safe", "requires-restart", "data-migration", "breaking"}  # spec


def _next_release(source: Path) -> None:
    """Bump the source to 0.3.0: Cilium moves, CloudNativePG gets a data migration, Argo CD 'safe'."""
    cilium = source / "components" / "cilium.cue"
    cilium.write_text(cilium.read_text().replace('"1.17.6"', '"1.18.0"'))
    cnpg = source / "components" / "cloudnative-pg.cue"
    cnpg.write_text(cnpg.read_text().replace('"0.25.0"', '"0.26.0"'))
    argocd = source / "components" / "argocd.cue"
    argocd.write_text(argocd.read_text().replace('"10.1.1"', '"10.1.2"'))
    compat = source / "compatibility.cue"
    text = compat.read_text()
    entry = text[text.index('\t"0.2.0": {') : text.rindex("}")]
    entry = entry.replace('"0.2.0"', '"0.3.0"').replace('"1.31.0"', '"1.32.0"')
    entry = re.sub(r'(\t+)([\w"-]+):(\s+)"[a-z-]+"', r'\1\2:\3"safe"', entry)
    entry = entry.replace('cilium:                "safe"', 'cilium: "requires-restart"')
    entry = re.sub(r'("cloudnative-pg":\s+)"safe"', r'\1"data-migration"', entry)
    compat.write_text(text[: text.rindex("}")] + entry + "}\n")


def test_two_versions_of_the_source_via_the_cli(source_copy: Path, tmp_path: Path) -> None:
    old = built_tgz(tmp_path / "old", "--source", str(source_copy))
    _next_release(source_copy)
    new_dir = tmp_path / "new"
    new = built_tgz(new_dir, "--source", str(source_copy))
    assert new.name == "platform-stack-0.3.0.tgz"
    for to in (new, new_dir / "platform-stack", source_copy):  # .tgz, built dir, source
        out = json.loads(
            ok(cli("stack", "classify", "--from", str(old), "--to", str(to), "--format", "json"))
        )
        verdicts = {c["component"]: c for c in out["components"]}
        assert out["from_version"] == "0.2.0" and out["to_version"] == "0.3.0"
        assert verdicts["cilium"]["classification"] == "requires-restart"
        assert verdicts["cloudnative-pg"]["classification"] == "data-migration"
        assert verdicts["argocd"]["classification"] == "requires-restart"  # metadata said safe
        changed = {n for n, c in verdicts.items() if c["change"] != "unchanged"}
        assert changed == {"cilium", "cloudnative-pg", "argocd"}
        assert out["classification"] == "data-migration"
    old_cluster = json.loads(
        ok(
            cli(
                "stack",
                "classify",
                "--from",
                str(old),
                "--to",
                str(new),
                "--kube-version",
                "1.31.4",
                "--format",
                "json",
            )
        )
    )
    assert old_cluster["classification"] == "breaking"
    assert "needs Kubernetes >= 1.32.0" in old_cluster["reasons"][0]
    text = ok(cli("stack", "classify", "--from", str(old), "--to", str(new)))
    assert text.splitlines()[0] == "0.2.0 -> 0.3.0: data-migration"
    assert "  cloudnative-pg: changed, data-migration (source.targetRevision)" in text


def test_overrides_feed_the_values_diff(stack_all: Path) -> None:
    """What PlatformController does: same chart, a user's new overrides -> what they would change."""
    before = load_snapshot(stack_all, "solo")
    after = load_snapshot(stack_all, "solo", {"backstage": {"enabled": False}, "cilium": {"pin": "1.17.7"}})
    verdicts = by_name(classify_stack(before, after))
    changed = {n: (v.change, v.classification) for n, v in verdicts.items() if v.change != "unchanged"}
    assert changed == {"backstage": ("removed", "breaking"), "cilium": ("changed", "requires-restart")}
    assert verdicts["cilium"].fields == ["source.targetRevision"]


def test_same_overrides_on_both_sides_change_nothing(stack_all: Path, tmp_path: Path) -> None:
    overrides = tmp_path / "overrides.yaml"
    overrides.write_text("backstage: {enabled: false}\ncilium: {values: {hubble: {enabled: true}}}\n")
    out = json.loads(
        ok(
            cli(
                "stack",
                "classify",
                "--from",
                str(stack_all),
                "--to",
                str(stack_all),
                "--overrides",
                str(overrides),
                "--tier",
                "team",
                "--format",
                "json",
            )
        )
    )
    assert out["classification"] == "safe"
    assert {c["change"] for c in out["components"]} == {"unchanged"}
    assert "backstage" not in {c["component"] for c in out["components"]}


def test_classify_rejects_something_that_is_not_a_stack(tmp_path: Path, stack_all: Path) -> None:
    proc = cli("stack", "classify", "--from", str(tmp_path), "--to", str(stack_all))
    assert proc.returncode == 1 and proc.stdout == "" and "not a chart .tgz" in proc.stderr
