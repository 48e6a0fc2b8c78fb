"""Argo CD's own plugin server runs a trivial plugin and answers through its gRPC API."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from tests.testbed.cmp import CmpError

pytestmark = pytest.mark.testbed

# The generator is looked up on the PATH the fixture caller adds (as the CMP sidecar finds `apprafter`).
GENERATOR = r"""#!/usr/bin/env python3
import glob, json, os, sys, time
if os.path.exists("FAIL"):
    sys.stderr.write("boom: bad input\n"); sys.exit(3)
if os.path.exists("SLEEP"):
    time.sleep(30)
if os.path.exists("NOT_OBJECT"):
    print("a log line that is not an object"); sys.exit(0)
for path in sorted(glob.glob("*.yaml")):
    sys.stdout.write(open(path).read().rstrip("\n") + "\n---\n")
keys = ["ARGOCD_APP_NAME", "ARGOCD_APP_NAMESPACE", "ARGOCD_APP_PROJECT_NAME", "ARGOCD_APP_REVISION",
        "ARGOCD_APP_REVISION_SHORT", "ARGOCD_APP_REVISION_SHORT_8", "ARGOCD_APP_SOURCE_REPO_URL",
        "ARGOCD_APP_SOURCE_PATH", "ARGOCD_APP_SOURCE_TARGET_REVISION", "KUBE_VERSION", "KUBE_API_VERSIONS",
        "ARGOCD_ENV_GREETING", "ARGOCD_APP_PARAMETERS", "PARAM_REPLICAS", "PARAM_TAGS_1", "PARAM_LABELS_TEAM"]
data = {k.lower().replace("_", "-"): os.environ[k] for k in keys if k in os.environ}
data["cwd-tail"] = "/".join(os.getcwd().split("/")[-2:])
data["leaked-test-env"] = str(any(k.startswith("PYTEST") for k in os.environ))
print(json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "build-env"}, "data": data}))
"""

PLUGIN_YAML = """\
apiVersion: argoproj.io/v1alpha1
kind: ConfigManagementPlugin
metadata:
  name: testbed-echo
spec:
  version: v1.0
  generate:
    command: [apprafter-testbed-gen]
  discover:
    fileName: "Application.cue"
  parameters:
    static:
      - name: replicas
        title: Replicas
        string: "1"
      - name: labels
        collectionType: map
        map: {}
    dynamic:
      command: [sh, -c, 'echo "[{\\"name\\": \\"from-dynamic\\", \\"string\\": \\"$ARGOCD_APP_NAME\\"}]"']
"""

STATIC_CM = textwrap.dedent("""\
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: static
    data:
      from: repo-file
    """)


@pytest.fixture(scope="module")
def echo_plugin(argocd_cmp_server, tmp_path_factory):
    root = tmp_path_factory.mktemp("echo-plugin")
    bindir, plugin_dir = root / "bin", root / "plugin"
    bindir.mkdir()
    plugin_dir.mkdir()
    gen = bindir / "apprafter-testbed-gen"
    gen.write_text(GENERATOR)
    gen.chmod(0o755)
    (plugin_dir / "plugin.yaml").write_text(PLUGIN_YAML)
    return argocd_cmp_server(plugin_dir, path=[bindir])


@pytest.fixture
def repo(tmp_path) -> Path:
    for app in ("apps/parser", "apps/plain"):
        (tmp_path / app).mkdir(parents=True)
    (tmp_path / "apps/parser/Application.cue").write_text('kind: "Application"\n')
    (tmp_path / "apps/parser/static.yaml").write_text(STATIC_CM)
    (tmp_path / "apps/plain/static.yaml").write_text(STATIC_CM)
    (tmp_path / "README.md").write_text("repo root\n")
    return tmp_path


def test_plugin_server_announces_its_configuration(echo_plugin):
    assert echo_plugin.plugin_name == "testbed-echo-v1.0"
    assert echo_plugin.socket.name == "testbed-echo-v1.0.sock" and echo_plugin.socket.exists()
    assert echo_plugin.check()["isDiscoveryEnabled"] is True


def test_generate_returns_the_plugins_manifests_with_the_repo_server_env(echo_plugin, repo):
    params = [
        {"name": "replicas", "string": "3"},
        {"name": "tags", "array": ["a", "b"]},
        {"name": "labels", "map": {"team": "core"}},
    ]
    result = echo_plugin.generate(
        repo,
        "apps/parser",
        plugin_env={"GREETING": "hi $ARGOCD_APP_NAME"},
        parameters=params,
        app_name="parser-prod",
        namespace="argocd",
    )
    by_name = {m["metadata"]["name"]: m for m in result.manifests}
    assert set(by_name) == {"static", "build-env"}
    assert by_name["static"]["data"] == {"from": "repo-file"}
    env = by_name["build-env"]["data"]
    assert env["argocd-app-name"] == "parser-prod"
    assert env["argocd-app-namespace"] == "argocd"
    assert env["argocd-app-source-path"] == "apps/parser"
    assert env["argocd-app-revision-short"] == env["argocd-app-revision"][:7]
    assert env["argocd-app-revision-short-8"] == env["argocd-app-revision"][:8]
    assert env["kube-version"] == "1.34"
    assert "apps/v1" in env["kube-api-versions"].split(",")
    assert env["argocd-env-greeting"] == "hi parser-prod"  # Argo CD's envsubst of plugin.env
    assert json.loads(env["argocd-app-parameters"]) == params
    assert (env["param-replicas"], env["param-tags-1"], env["param-labels-team"]) == ("3", "b", "core")
    assert env["cwd-tail"] == "apps/parser"  # the command runs in the app dir of the unpacked repo
    assert env["leaked-test-env"] == "False"  # the server's env is minimal, not pytest's
    assert len(result.raw_manifests) == 2


def test_parameters_announcement_merges_dynamic_then_static(echo_plugin, repo):
    announced = echo_plugin.parameters(repo, "apps/parser", app_name="parser-prod")
    assert [p["name"] for p in announced] == ["from-dynamic", "replicas", "labels"]
    assert announced[0]["string"] == "parser-prod"
    assert announced[1]["string"] == "1" and announced[1]["title"] == "Replicas"
    assert announced[2]["collectionType"] == "map"


def test_discovery_matches_only_directories_with_the_file(echo_plugin, repo):
    assert echo_plugin.match(repo, "apps/parser") is True
    assert echo_plugin.match(repo, "apps/plain") is False
    found = echo_plugin.generate(repo, "apps/parser", plugin_name="")  # discovery over the socket dir
    assert {m["metadata"]["name"] for m in found.manifests} == {"static", "build-env"}
    with pytest.raises(CmpError, match="could not find plugin supporting the given repository"):
        echo_plugin.generate(repo, "apps/plain", plugin_name="")


def test_plugin_failure_surfaces_argo_cds_error_text(echo_plugin, repo):
    (repo / "apps/parser/FAIL").write_text("")
    with pytest.raises(CmpError) as exc:
        echo_plugin.generate(repo, "apps/parser")
    assert "boom: bad input" in str(exc.value) and "exit status 3" in str(exc.value)


def test_non_object_output_fails_the_generation(echo_plugin, repo):
    (repo / "apps/parser/NOT_OBJECT").write_text("")
    with pytest.raises(CmpError):
        echo_plugin.generate(repo, "apps/parser")


def test_generation_is_bounded_by_the_repo_server_deadline(echo_plugin, repo):
    (repo / "apps/parser/SLEEP").write_text("")
    with pytest.raises(CmpError) as exc:
        echo_plugin.generate(repo, "apps/parser", timeout=2)
    # Argo CD sends SIGTERM on the deadline and SIGKILL soon after; either may be what ends the command.
    assert re.search(r"`apprafter-testbed-gen` failed signal: (terminated|killed)", str(exc.value))
