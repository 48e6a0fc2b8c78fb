"""`websocket` and `sticky` render only what the platform's Gateway implementation reads (issue 40 item 4), through
the real cue and the real CLI: Cilium's gets `timeouts.request: 0s` for a WebSocket route, Traefik's nothing (and a
warning that says why); `sticky` on a public app is refused, on an internal one it is the Service's affinity."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.renderer.helpers import MINIMAL, run_cli, write_app

REPO = Path(__file__).resolve().parents[2]


def render(tmp_path: Path, expose: str, implementation: str | None = None) -> tuple[int, dict[str, Any], str]:
    """`apprafter render --mode manifests` of an app exposed as `expose`, the platform's Gateway `implementation`
    (None: the default): (exit code, the objects by kind, stderr)."""
    write_app(tmp_path, MINIMAL.replace("expose: port: 8080", f"expose: {expose}"))
    args = ["render", ".", "--env", "dev", "--mode", "manifests"]
    if implementation is not None:
        (tmp_path / "platform.yaml").write_text(f"gateway: {{implementation: {implementation}}}\n")
        args += ["--platform", "platform.yaml"]
    result = run_cli(*args, cwd=tmp_path, env={"PYTHONPATH": str(REPO)})  # this tree's renderer, from tmp_path
    found = {o["kind"]: o for o in yaml.safe_load_all(result.stdout) if o} if result.returncode == 0 else {}
    return result.returncode, found, result.stderr


PUBLIC_WS = '{port: 8080, network: "public", websocket: true, paths: ["/", "/api"]}'


def test_websocket_lifts_the_request_timeout_under_cilium_and_adds_nothing_under_traefik(tmp_path: Path) -> None:
    code, cilium, err = render(tmp_path, PUBLIC_WS)  # Cilium's is the default
    assert code == 0 and "websocket" not in err, err
    assert [r.get("timeouts") for r in cilium["HTTPRoute"]["spec"]["rules"]] == [{"request": "0s"}]
    assert cilium["Service"]["spec"]["ports"][0]["appProtocol"] == "kubernetes.io/ws"

    code, traefik, err = render(tmp_path, PUBLIC_WS, "traefik")
    assert code == 0, err
    assert [r.get("timeouts") for r in traefik["HTTPRoute"]["spec"]["rules"]] == [None]  # Traefik reads none
    assert "dev: expose.websocket: the platform's Gateway is Traefik's, which upgrades every route" in err, err
    # the route is the one an app without the field gets: the field adds nothing there
    code, plain, _ = render(tmp_path, '{port: 8080, network: "public", paths: ["/", "/api"]}', "traefik")
    assert code == 0 and plain["HTTPRoute"] == traefik["HTTPRoute"]


def test_sticky_on_a_public_app_is_refused_naming_the_field(tmp_path: Path) -> None:
    for implementation in (None, "traefik"):
        code, _, err = render(tmp_path, '{port: 8080, network: "public", sticky: true}', implementation)
        assert code == 1, err
        [line] = [line for line in err.splitlines() if "sticky" in line]
        assert "spec.base.expose.sticky: sticky cannot hold through the platform's Gateway (Cilium's or Traefik's" in \
            line, err


def test_sticky_is_the_services_affinity_only_where_the_service_balances(tmp_path: Path) -> None:
    def affinity(expose: str) -> str:
        code, objs, err = render(tmp_path, expose)
        assert code == 0, err
        return str(objs["Service"]["spec"]["sessionAffinity"])

    assert affinity("{port: 8080, sticky: true}") == "ClientIP"  # internal: kube-proxy / Cilium balance
    assert affinity("{port: 8080, websocket: true}") == "ClientIP"  # sticky's default is websocket's
    assert affinity("{port: 8080, websocket: true, sticky: false}") == "None"
    # public: the implied default renders nothing the Gateway would not read
    assert affinity('{port: 8080, network: "public", websocket: true}') == "None"
    assert affinity('{port: 8080, network: "public", sticky: false}') == "None"


def test_an_unknown_gateway_implementation_is_refused_at_its_key(tmp_path: Path) -> None:
    code, _, err = render(tmp_path, "{port: 8080}", "nginx")
    assert code != 0
    assert "gateway.implementation" in err and "must be one of cilium, traefik" in err and "nginx" not in err, err
