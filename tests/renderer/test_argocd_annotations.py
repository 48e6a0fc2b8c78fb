"""The Argo CD annotations an Application may carry (renderer/argocd_annotations.py), at render with the position
of the annotation in the user's file (issue 34 item 6)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from renderer import argocd_annotations
from tests.renderer.helpers import MINIMAL, assert_clean_failure, run_cli, write_app

OURS = {"name": "demo", "namespace": "shop"}


def why(key: str, value: str, **meta: str) -> str | None:
    found = dict(argocd_annotations.problems({**OURS, **meta, "annotations": {key: value}}))
    return found.get(key)


@pytest.mark.parametrize(("key", "value"), [
    ("argocd.argoproj.io/sync-wave", "5"),
    ("argocd.argoproj.io/sync-wave", "-3"),
    ("argocd.argoproj.io/sync-wave", "+2"),
    ("argocd.argoproj.io/sync-options", "Prune=false,"),
    ("argocd.argoproj.io/sync-options", "Prune=false"),
    ("argocd.argoproj.io/sync-options", "Prune=confirm, Delete=false"),
    ("argocd.argoproj.io/sync-options", "Delete=confirm"),
    # Argo CD's own stamps, as its repo-server writes them on what it renders
    ("argocd.argoproj.io/tracking-id", "shop-prod:apprafter.io/Application:shop/demo"),
    ("argocd.argoproj.io/tracking-id", "argocd-apps_shop-prod:apprafter.io/Application:shop/demo"),
    ("argocd.argoproj.io/installation-id", "cluster-a"),
    # not Argo CD's
    ("example.com/argocd.argoproj.io", "x"),
    ("team", "payments"),
    ("notargocd.argoproj.io/x", "y"),
])
def test_what_an_application_may_carry(key: str, value: str) -> None:
    assert why(key, value) is None


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("argocd.argoproj.io/sync-wave", "soon", "must be a whole number"),
    ("argocd.argoproj.io/sync-wave", " 5", "must be a whole number"),
    ("argocd.argoproj.io/sync-options", "Replace=true", "sync option 'Replace=true' may not be set"),
    ("argocd.argoproj.io/sync-options", "Prune=false,Force=true,ServerSideApply=true",
     "sync option 'Force=true', 'ServerSideApply=true' may not be set"),
    ("argocd.argoproj.io/sync-options", "Validate=false", "allowed: Prune=false, Prune=confirm, Delete=false, "
     "Delete=confirm"),
    ("argocd.argoproj.io/hook", "Skip", "is an instruction to Argo CD"),
    ("argocd.argoproj.io/hook-delete-policy", "HookSucceeded", "is an instruction to Argo CD"),
    ("argocd.argoproj.io/compare-options", "IgnoreExtraneous", "is an instruction to Argo CD"),
    ("argocd.argoproj.io/ignore-healthcheck", "true", "is an instruction to Argo CD"),
    ("argocd.argoproj.io/ignore-differences", "jsonPointers: [/spec]", "is an instruction to Argo CD"),
    ("argocd.argoproj.io/skip-reconcile", "true", "is an instruction to Argo CD"),
    ("link.argocd.argoproj.io/dashboard", "https://example.com", "is an instruction to Argo CD"),
    ("helm.sh/hook", "pre-install", "is an instruction to Argo CD"),
    ("helm.sh/hook-delete-policy", "hook-succeeded", "is an instruction to Argo CD"),
    ("argocd.argoproj.io/tracking-id", "other-app:apprafter.io/Application:shop/someone-else",
     "must name this Application"),
    ("argocd.argoproj.io/tracking-id", "other-app:apprafter.io/Application:team-b/demo", "must name this Application"),
    ("argocd.argoproj.io/tracking-id", "other-app:apps/Deployment:shop/demo", "must name this Application"),
])
def test_what_an_application_may_not_carry(key: str, value: str, expected: str) -> None:
    found = why(key, value)
    assert found is not None and expected in found


def test_a_tracking_id_is_checked_against_the_namespace_only_once_the_object_has_one() -> None:
    # `apprafter render` without --namespace: the plugin stamps Argo CD's destination namespace later
    assert why("argocd.argoproj.io/tracking-id", "shop-prod:apprafter.io/Application:shop/demo", namespace="") \
        is not None
    assert not list(argocd_annotations.problems({"name": "demo", "annotations": {
        "argocd.argoproj.io/tracking-id": "shop-prod:apprafter.io/Application:shop/demo"}}))


def test_a_write_is_held_only_to_what_it_adds() -> None:
    stored = {**OURS, "annotations": {"argocd.argoproj.io/hook": "Skip", "team": "a"}}  # admitted before the rule
    relabelled = {**stored, "labels": {"x": "y"}}
    assert not list(argocd_annotations.introduced(stored, relabelled))
    added = {**OURS, "annotations": {**stored["annotations"], "argocd.argoproj.io/sync-options": "Replace=true"}}
    assert [k for k, _ in argocd_annotations.introduced(stored, added)] == ["argocd.argoproj.io/sync-options"]
    changed = {**OURS, "annotations": {"argocd.argoproj.io/hook": "PreSync", "team": "a"}}
    assert [k for k, _ in argocd_annotations.introduced(stored, changed)] == ["argocd.argoproj.io/hook"]


def test_render_refuses_them_in_one_line_each_at_the_annotation(tmp_path: Path) -> None:
    text = MINIMAL.replace('metadata: name: "demo"', '''metadata: {
	name: "demo"
	annotations: {
		"argocd.argoproj.io/sync-wave":    "2"
		"argocd.argoproj.io/sync-options": "Prune=false,Replace=true"
		"argocd.argoproj.io/hook":         "Skip"
	}
}''')
    write_app(tmp_path, text)
    for command in (("render", ".", "--env", "prod"), ("validate", ".")):
        lines = assert_clean_failure(run_cli(*command, cwd=tmp_path), 1)
        assert lines == [
            "apprafter/Application.cue:7:3: metadata.annotations.\"argocd.argoproj.io/sync-options\": sync option "
            "'Replace=true' may not be set on an Application (Argo CD would act on it); allowed: Prune=false, "
            "Prune=confirm, Delete=false, Delete=confirm",
            "apprafter/Application.cue:8:3: metadata.annotations.\"argocd.argoproj.io/hook\": is an instruction to "
            "Argo CD, which an Application may not carry (allowed: argocd.argoproj.io/sync-wave, "
            "argocd.argoproj.io/sync-options)"], command
    kept = text.replace('\t\t"argocd.argoproj.io/hook":         "Skip"\n', "").replace(",Replace=true", "")
    write_app(tmp_path, kept)
    result = run_cli("render", ".", "--env", "prod", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert yaml.safe_load(result.stdout)["metadata"]["annotations"] == {
        "argocd.argoproj.io/sync-options": "Prune=false", "argocd.argoproj.io/sync-wave": "2"}
