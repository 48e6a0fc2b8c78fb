"""`apprafter plan --from` a CR read back from the cluster (`kubectl get arapp -o yaml`) shows the digest the operator
runs a followed tag as (`imagePolicy.resolve: "digest"`, status.images): on the image's change line, or on its own line
when the image stays."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from tests.renderer.helpers import run_cli

DIGEST = "sha256:" + "c" * 64
LIVE: dict[str, Any] = {
    "apiVersion": "apprafter.io/v1alpha1", "kind": "Application", "metadata": {"name": "shop", "namespace": "shop"},
    "spec": {"environment": "prod", "base": {"image": "ghcr.io/acme/shop:stable", "expose": {"port": 8080},
                                             "imagePolicy": {"resolve": "digest", "interval": "5m"}},
             "environments": {"prod": {}}},
    "status": {"phase": "Ready", "image": "ghcr.io/acme/shop:stable", "images": [
        {"container": "app", "image": "ghcr.io/acme/shop:stable", "digest": DIGEST,
         "resolvedAt": "2026-12-07T12:00:00Z", "checkedAt": "2026-12-07T12:05:00Z"}]},
}


def plan(tmp_path: Path, new: dict[str, Any], live: dict[str, Any] = LIVE) -> str:
    (tmp_path / "live.yaml").write_text(yaml.safe_dump(live))
    (tmp_path / "new.yaml").write_text(yaml.safe_dump(new))
    result = run_cli("plan", "--from", str(tmp_path / "live.yaml"), "--to", str(tmp_path / "new.yaml"), "-e", "prod",
                     "--no-color")
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_digest_in_force_is_on_the_image_line(tmp_path: Path) -> None:
    new = copy.deepcopy({k: v for k, v in LIVE.items() if k != "status"})
    new["spec"]["base"]["image"] = "ghcr.io/acme/shop:2.0"
    out = plan(tmp_path, new)
    assert f"  ~ image: ghcr.io/acme/shop:stable (in force: {DIGEST}) -> ghcr.io/acme/shop:2.0  [" in out, out


def test_an_unchanged_followed_image_says_its_digest(tmp_path: Path) -> None:
    new = copy.deepcopy({k: v for k, v in LIVE.items() if k != "status"})
    new["spec"]["base"]["replicas"] = 2
    out = plan(tmp_path, new)
    assert f"  image: ghcr.io/acme/shop:stable (in force: {DIGEST}), unchanged" in out, out
    unresolved = copy.deepcopy(LIVE)
    del unresolved["status"]["images"]  # resolve: off, or not looked up yet: nothing to say
    assert "in force" not in plan(tmp_path, new, unresolved)
