"""200 public hostnames answering HTTPS on the node (issue 44 item 4): Traefik serving the chart's `public` Gateway
and the Gateways `apprafter operator` makes past it, in the node's network namespace as on a cluster. The apps come
in four waves, each once the one before is placed, so each wave fills one Gateway (the fill order itself is held by
tests/reconciler/test_gateways_cluster.py; here a wave that went elsewhere is a warning naming what the Gateways held:
seen in full runs, one hostname of the first wave on the second Gateway, unexplained: docs/open-ends.md); no hostname
moves once placed. The first app of each wave runs a pod ("hello from <app>" through its Gateway), the others run
none (Traefik answers 503 from the hostname's route: no endpoint); every hostname is asked over HTTPS with the bed's
CA verifying its own certificate (cert-manager played)."""

from __future__ import annotations

import subprocess
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.images.podman import make_images
from tests.reconciler.helpers import apply, cr
from tests.reconciler.operator_proc import Operator, operator_fixture
from tests.testbed.node import NodeTestBed
from tests.testbed.procs import wait_for
from tests.testbed.test_gateway_node import wait_answer
from tests.testbed.traefik import (
    DOMAIN,
    GATEWAY_API,
    NAMESPACE,
    NodeGateway,
    install_traefik,
    programmed,
    route_accepted,
    uninstall_traefik,
)

pytestmark = [pytest.mark.node, pytest.mark.testbed]

RUN = uuid.uuid4().hex[:6]
ENV = "prod"
# the chart's Gateway has room for 62 (its `https` and `http` are the chart's), each further one 63 (its `http` copy)
WAVES = (62, 63, 63, 12)
GATEWAYS = ("public", "public-2", "public-3", "public-4")
# No resync during the run (200 apps' passes every 10 s would be the node's CPU), a short backoff.
operator = operator_fixture("--no-leader-elect", "--no-platform-stack", "--no-claim-binder", "--resync", "600",
                            "--max-backoff", "2", "--domain", DOMAIN, "--public-gateways", "4",
                            "--listeners-per-namespace", "200", bed="node", crds=True, inside=True,
                            name="gateways-node", requires=("gateway",))


@pytest.fixture(scope="module")
def gateway(node: NodeTestBed, testbed_dir: Path) -> Iterator[NodeGateway]:
    """Traefik (the image `make images` builds, imported into the node) serving the chart's `public` Gateway."""
    image = node.import_image(make_images(names=("traefik",))["traefik"].ref)
    bed = install_traefik(node, image, testbed_dir / f"gateways-{RUN}")
    try:
        yield bed
    finally:
        uninstall_traefik(node)


def app(image: str, name: str, replicas: int) -> dict[str, Any]:
    return {"image": image, "replicas": replicas, "expose": {"port": 8080, "network": "public"},
            "env": {"MODE": "serve", "MESSAGE": f"hello from {name}"}}


def host(name: str) -> str:
    return f"{name}.{ENV}.{DOMAIN}"


def placed(gateways: list[dict[str, Any]]) -> dict[str, str]:
    """Which Gateway carries each of this module's hostnames' listeners."""
    return {item["name"]: gw["metadata"]["name"] for gw in gateways
            for item in (gw.get("spec") or {}).get("listeners") or [] if item["name"].endswith(f".{ENV}.{DOMAIN}")}


def managers(node: NodeTestBed) -> dict[str, Any]:
    """For a failure's message: each Gateway's listeners other than the apps' by the field managers that hold them,
    and how many of the apps' it carries."""
    out: dict[str, Any] = {}
    for gateway in node.wait_list(GATEWAY_API, "Gateway", NAMESPACE, lambda items: items or None, timeout=30):
        held: dict[str, list[str]] = {}
        for entry in gateway["metadata"].get("managedFields") or []:
            for key in ((entry.get("fieldsV1") or {}).get("f:spec") or {}).get("f:listeners") or {}:
                if key.startswith("k:"):
                    held.setdefault(key[2:], []).append(f"{entry.get('manager')}/{entry.get('operation')}")
        apps = f'.{ENV}.{DOMAIN}"' + "}"
        out[gateway["metadata"]["name"]] = {k: v for k, v in held.items() if not k.endswith(apps)} | {
            "apps": sum(1 for k in held if k.endswith(apps))}
    return out


def placement_log(operator: Operator) -> list[str]:
    """For a warning's message: the operator's log lines of the listener controller's writes and refusals."""
    return [line for line in operator.log().splitlines() if '"gateway-listeners"' in line][-12:]


def placed_all(gateways: list[dict[str, Any]], wanted: set[str]) -> dict[str, str] | None:
    """The placement once every hostname of `wanted` has its listener."""
    found = placed(gateways)
    return found if wanted <= set(found) else None


def answers(gateway: NodeGateway, names: list[str]) -> dict[str, int]:
    """GET https://<host>/ for each app's hostname, all in one curl inside the node's network namespace (each host
    resolved to the Gateway's address, its certificate verified with the bed's CA): the status each answered, 0 when
    the TLS handshake or the connection failed."""
    argv = ["curl", "-sS", "--max-time", "10", "--cacert", str(gateway.ca_path),
            "-w", "%{url_effective} %{http_code}\\n"]
    for name in names:  # each URL its own output: its body discarded
        argv += ["--resolve", f"{host(name)}:443:{gateway.address}", "-o", "/dev/null", f"https://{host(name)}/"]
    out = subprocess.run(gateway.node.nsenter(*argv), capture_output=True, text=True, timeout=300, check=False)
    codes = {line.split()[0]: int(line.split()[1]) for line in out.stdout.splitlines() if line.strip()}
    return {name: codes.get(f"https://{host(name)}/", 0) for name in names}


def test_two_hundred_public_hostnames_answer_https_over_four_gateways(
        node: NodeTestBed, gateway: NodeGateway, operator: Operator, test_app: str) -> None:
    namespace = f"gws-{RUN}"
    node.ensure_namespace(namespace)
    served: list[str] = []  # the first app of each wave, the one that runs a pod
    where: dict[str, str] = {}
    started = time.monotonic()
    try:
        index = 0
        for wave, size in enumerate(WAVES):
            names = [f"h{index + n:03}" for n in range(size)]
            index += size
            served.append(names[0])
            for name in names:
                apply(node, cr(namespace, app(test_app, name, 1 if name == names[0] else 0), name=name, env=ENV))
            for name in names:  # cert-manager's part, each once the operator made the app's Certificate
                node.wait("cert-manager.io/v1", "Certificate", name, namespace, lambda c: c, timeout=180,
                          what=f"the operator's Certificate {namespace}/{name}")
                gateway.issue(name, namespace)
            wanted = {host(name) for name in names}
            now = node.wait_list(GATEWAY_API, "Gateway", NAMESPACE, lambda items, wanted=wanted: placed_all(
                items, wanted), timeout=300, what=f"wave {wave}'s {size} listeners")
            # placed once: no hostname of an earlier wave moved
            assert {h: now[h] for h in where} == where, managers(node)
            where = now
            spread = Counter(where[h] for h in wanted)
            print(f"wave {wave}: {size} hostnames {dict(spread)} at {time.monotonic() - started:.1f} s")
            if spread != {GATEWAYS[wave]: size}:  # the chart's Gateway holds 62, the others 63: seen once, unexplained
                warnings.warn(f"wave {wave} went {dict(spread)}, not all on {GATEWAYS[wave]}: {managers(node)}; "
                              f"{placement_log(operator)}", stacklevel=1)
        # every hostname on one of the four
        used = sorted(set(where.values()), key=GATEWAYS.index)
        assert len(where) == sum(WAVES) and used == list(GATEWAYS)
        for name in used:  # Traefik programmed each, on the one address it serves every Gateway of its class at
            live = node.wait(GATEWAY_API, "Gateway", name, NAMESPACE, programmed, timeout=120,
                             what=f"Gateway {name} Programmed by Traefik")
            assert {a["value"] for a in live["status"]["addresses"]} == {gateway.address}
        assert len({where[host(name)] for name in served}) >= 3  # apps with pods on three Gateways at least
        for name in served:  # the first app of each wave through the Gateway its hostname is on, its route there
            route = node.wait(GATEWAY_API, "HTTPRoute", name, namespace, route_accepted, timeout=180,
                              what=f"HTTPRoute {name} Accepted")
            assert [p["parentRef"]["name"] for p in route["status"]["parents"]] == [where[host(name)]]
            answer = wait_answer(gateway, f"https://{host(name)}/", host(name), lambda a: a.status == 200, timeout=180)
            assert (answer.status, answer.body) == (200, f"hello from {name}\n")
            redirected = wait_answer(gateway, f"http://{host(name)}/x", host(name), lambda a: a.status == 301)
            assert redirected.headers["location"] == f"https://{host(name)}/x"
        # every hostname: its own certificate verified (000 otherwise), and its route answers (503: no pod)
        names = [f"h{n:03}" for n in range(sum(WAVES))]
        statuses = wait_for("every hostname answering from its route", lambda: (
            found if set((found := answers(gateway, names)).values()) <= {200, 503} else None), 120, interval=1)
        print(f"every hostname answered over HTTPS at {time.monotonic() - started:.1f} s")
        assert {n for n, s in statuses.items() if s == 200} == set(served)
        assert Counter(statuses.values()) == {200: len(served), 503: sum(WAVES) - len(served)}
    finally:
        node.delete_namespace(namespace, timeout=300)
