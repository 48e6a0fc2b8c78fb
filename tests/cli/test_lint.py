"""`apprafter lint` (and `validate`, which runs its rules) with the real cue, on the exact text: image references as
the kubelet parses them, moving tags warned, two apps with one name or one hostname, the cluster's own limits, every
problem at once, exit codes (1 on errors; on warnings only under --strict)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.monorepo import app_text
from tests.renderer.helpers import run_cli, write_app

F = "apprafter/Application.cue"
HEAD = 'apiVersion: "apprafter.io/v1alpha1"\nkind: "Application"\nmetadata: name: "blog"\n'
MOVING = 'pin a version tag or a digest (@sha256:...), or set imagePolicy: resolve: "digest" to follow it on purpose'
NOT_VALID = "is not a valid image reference"


def images_app(images: dict[str, str]) -> str:
    """One environment per image (prod keeps base's)."""
    envs = "\n".join(f'\t\t{env}: image: "{image}"' for env, image in images.items())
    return HEAD + ('spec: {\n\tbase: image: "ghcr.io/acme/blog:2.0.1"\n\tenvironments: {\n\t\tprod: {}\n'
                   f"{envs}\n\t}}\n}}\n")


def test_image_references_the_kubelet_refuses_are_errors_and_moving_ones_warnings(tmp_path: Path) -> None:
    write_app(tmp_path, images_app({"upper": "ghcr.io/acme/Blog:2.0.1", "scheme": "https://ghcr.io/acme/blog:2.0.1",
                                    "digest": "blog@sha256:abc", "tags": "blog:v1:2", "untagged": "ghcr.io/acme/blog",
                                    "latest": "ghcr.io/acme/blog:latest", "pinned": "blog:latest@sha256:" + "a" * 64}))
    result = run_cli("lint", ".", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.splitlines() == [
        f"{F}:8:10: spec.environments.upper.image: image 'ghcr.io/acme/Blog:2.0.1' {NOT_VALID}: the repository "
        "'acme/Blog' must be lowercase: 'acme/blog'",
        f"{F}:9:11: spec.environments.scheme.image: image 'https://ghcr.io/acme/blog:2.0.1' {NOT_VALID}: an image "
        "reference has no scheme: write 'ghcr.io/acme/blog:2.0.1'",
        f"{F}:10:11: spec.environments.digest.image: image 'blog@sha256:abc' {NOT_VALID}: a sha256 digest has 64 hex "
        "digits, this one 3",
        f"{F}:11:9: spec.environments.tags.image: image 'blog:v1:2' {NOT_VALID}: it holds more than one ':' after "
        "the repository (one tag at most: repository:tag)",
        f"warning: {F}:12:13: spec.environments.untagged.image: image 'ghcr.io/acme/blog' has no tag: the kubelet "
        f"pulls :latest, which moves; {MOVING}",
        f"warning: {F}:13:11: spec.environments.latest.image: image 'ghcr.io/acme/blog:latest' uses :latest, which "
        f"moves; {MOVING}",
        "1 app linted: 4 errors, 2 warnings"]
    # The refusals are the deploy rule (renderer.validate.check_deployment): render and the plugin refuse them too.
    rendered = run_cli("render", ".", "-e", "scheme", cwd=tmp_path)
    assert (rendered.returncode, rendered.stdout) == (1, "")
    assert rendered.stderr.splitlines() == [result.stderr.splitlines()[1]]
    assert run_cli("render", ".", "-e", "latest", cwd=tmp_path).returncode == 0  # a warning is no refusal


def test_warnings_fail_only_under_strict_and_json_carries_the_report(tmp_path: Path) -> None:
    write_app(tmp_path, images_app({"latest": "blog:latest"}).replace(
        "prod: {}", 'prod: {imagePolicy: resolve: "digest", image: "blog"}'))  # following a tag on purpose
    warning = (f"warning: {F}:8:11: spec.environments.latest.image: image 'blog:latest' uses :latest, which moves; "
               f"{MOVING}")
    plain = run_cli("lint", cwd=tmp_path)
    assert (plain.returncode, plain.stderr.splitlines()) == (0, [warning, "1 app linted: 0 errors, 1 warning"])
    strict = run_cli("lint", "--strict", cwd=tmp_path)
    assert (strict.returncode, strict.stderr) == (1, plain.stderr)
    report = run_cli("lint", "--strict", "-o", "json", cwd=tmp_path)
    assert (report.returncode, report.stderr) == (1, "")
    assert json.loads(report.stdout) == {
        "failed": True, "strict": True, "apps": [{"file": F, "app": "blog"}], "errors": [],
        "warnings": [{"file": F, "line": 8, "col": 11, "field": "spec.environments.latest.image",
                      "message": warning.split("spec.environments.latest.image: ", 1)[1]}]}
    valid = run_cli("validate", cwd=tmp_path)  # validate prints lint's warnings and stays valid
    assert (valid.returncode, valid.stderr.splitlines()) == (0, [warning, f"{F}: valid (latest, prod)"])


def monorepo(root: Path) -> Path:
    apps = root / "apps"
    public = 'hostname: "www.example.com"'
    write_app(apps / "shop", app_text("shop", network="public", envs="staging, prod").replace(
        'network: "public"', f'network: "public", {public}'))
    write_app(apps / "shop-copy", app_text("shop", envs="prod"))
    write_app(apps / "a", app_text("a", envs='"b-c"'))
    write_app(apps / "a-b", app_text("a-b", envs="c, web", network="public").replace(
        'network: "public"', f'network: "public", {public}'))
    return apps


def test_a_monorepo_is_linted_at_once_names_instances_and_hostnames_across_apps(tmp_path: Path) -> None:
    apps = monorepo(tmp_path)
    hostname = ("public hostname 'www.example.com' is claimed by a-b/c, a-b/web, shop/prod and shop/staging: the "
                "cluster gives it to the first deployment that asks and refuses the rest")
    instance = ("instance name 'a-b-c' is both a-b/c and a/b-c: the operator refuses the younger (NameConflict); "
                "rename an app or an environment")
    name = ("app name 'shop' is declared by 2 apps (shop-copy/apprafter/Application.cue and shop/apprafter/"
            "Application.cue): each app needs its own name (its Argo CD Applications and objects are named after it)")
    expected = [
        f"a-b/{F}:7:43: spec.base.expose.hostname: {hostname}",
        f'a-b/{F}:9:17: spec.environments.c: {instance}',
        f'a/{F}:9:17: spec.environments."b-c": {instance}',
        f"shop-copy/{F}:3:11: metadata.name: {name}",
        f"shop/{F}:3:11: metadata.name: {name}",
        f"shop/{F}:7:43: spec.base.expose.hostname: {hostname}",
        "4 apps linted: 6 errors, 0 warnings"]
    result = run_cli("lint", cwd=apps)  # `lint` in a directory of apps: every app below it, as --all
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.splitlines() == expected
    assert run_cli("lint", "--all", ".", cwd=apps).stderr == result.stderr
    validated = run_cli("validate", "--all", ".", cwd=apps)
    assert (validated.returncode, validated.stderr.splitlines()) == (1, expected[:-1])


def test_the_clusters_own_limits_every_one_in_one_run(tmp_path: Path) -> None:
    """Label values, the instance label `<app>-<env>`, env var names, ports, annotation keys and their total size:
    what the API server refuses, from cue's schema and the renderer's rules alike, in one run."""
    long_env = "e" * 60
    write_app(tmp_path, HEAD.replace('metadata: name: "blog"', 'metadata: {name: "blog", labels: team: "' + "x" * 64 +
                                     '", annotations: {"Bad Key": "v", big: "' + "y" * 262_200 + '"}}') +
              f'spec: {{\n\tbase: {{\n\t\timage: "ghcr.io/acme/blog:2.0.1"\n\t\texpose: port: 70000\n'
              f'\t\tenv: "log-level": "x"\n\t}}\n\tenvironments: {long_env}: {{}}\n}}\n')
    result = run_cli("lint", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.splitlines() == [
        f"{F}:3:40: metadata.labels.team: '{'x' * 64}' is not a label value (empty, or letters, digits, '-', '_', "
        "'.', at most 63 characters)",
        f"{F}:3:108: metadata.annotations: annotations hold 262203 bytes in all: the API server takes at most 262144 "
        "(256 KiB) on one object",
        f"{F}:3:122: metadata.annotations.\"Bad Key\": annotation key 'Bad Key' is not a qualified name ([DNS-name "
        "prefix/]name: letters, digits, '-', '_', '.', at most 63 characters)",
        f"{F}:7:17: spec.base.expose.port: port 70000 is out of range: a port is an integer 1-65535",
        f"{F}:8:8: spec.base.env.\"log-level\": env key 'log-level' must match ^[A-Z_][A-Z0-9_]*$",
        f"{F}:10:16: spec.environments.{long_env}: 'blog-{long_env}' (app and environment name) is longer than 63 "
        "characters: it is the app.kubernetes.io/instance label of every object",
        "1 app linted: 6 errors, 0 warnings"]
