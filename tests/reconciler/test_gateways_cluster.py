"""Public hostnames past one Gateway's 64 listeners (issue 44 item 4), through the real API server and `apprafter
operator` as its ServiceAccount with the chart's RBAC: 200 public apps' hostnames placed over four Gateways, the
Gateways past the chart's made by the operator, each app's routes attached to its hostname's Gateway, the placement
unchanged across a restart of the operator, and a Gateway nothing is placed on any more deleted."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lifecycle.listeners import GATEWAY_ANNOTATION, LISTENER_ANNOTATION, OVERFLOW_LABEL
from tests.reconciler.conftest import own_test_bed
from tests.reconciler.gateway_bed import (
    GATEWAY_API,
    GATEWAY_NAMESPACE,
    certificate_issued,
    chart_gateway,
    listed,
    listeners_of,
)
from tests.reconciler.helpers import (
    API,
    apply,
    cr,
    edit,
    fresh_namespace,
    gc_deletes_children,
    status,
    wait,
    wait_showing,
)
from tests.reconciler.operator_proc import Operator, operator_fixture
from tests.testbed.crds import bed_crd_files
from tests.testbed.kube import KubeTestBed

pytestmark = pytest.mark.testbed

GATEWAYS = ["public", "public-2", "public-3", "public-4"]
APPS, NAMESPACES = 200, 4
PUBLIC = edit(needs=None, env={"LOG_LEVEL": "info"}, expose={"port": 8080, "network": "public"})
# Four Gateways; a share that lets each namespace's 50 apps have theirs; no resync during the run (200 apps' passes
# every 10 s would be most of the work), a short backoff. On a bed of its own: 201 apps' Services would fill the
# shared bed's Service range (a /24) for every module after this one on the worker (the bed runs no namespace
# controller to free them).
operator = operator_fixture("--no-leader-elect", "--no-platform-stack", "--resync", "600", "--max-backoff", "2",
                            "--public-gateways", str(len(GATEWAYS)), "--listeners-per-namespace", "100", rbac=(),
                            name="gateways", bed="gateways_bed")


@pytest.fixture(scope="module")
def gateways_bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeTestBed]:
    """An API server of this module's own, with our CRDs, the child kinds' and the Gateway's."""
    with own_test_bed(Path(str(tmp_path_factory.mktemp("gateways")))) as kube:
        kube.install_crds([f for f in bed_crd_files() if f.name == "gateway.networking.k8s.io_gateways.yaml"])
        yield kube


def app_name(index: int) -> str:
    return f"w{index:03}"


def host(index: int) -> str:
    return f"{app_name(index)}.prod.apps.example.com"


def records(bed: KubeTestBed, namespace: str) -> dict[str, dict[str, Any]]:
    """The PublicHostname records of this module's hostnames (in the operator's records namespace), by hostname."""
    return {r["metadata"]["name"]: r for r in listed(bed, API, "PublicHostname", namespace)
            if r["metadata"]["name"].endswith(".prod.apps.example.com") and r["metadata"]["name"][0] == "w"}


def placement(bed: KubeTestBed) -> dict[str, str]:
    """Which Gateway carries each hostname's listener, read from the Gateways themselves."""
    return {name: gateway for gateway in GATEWAYS for name in listeners_of(bed, gateway) if name.startswith("w")}


def unsaid(bed: KubeTestBed, namespace: str, placed: dict[str, str]
           ) -> list[tuple[str, tuple[str | None, str | None]]]:
    """The records (in `namespace`) whose marks do not say their hostname listens on the Gateway carrying it."""
    held = records(bed, namespace)
    out = []
    for hostname, gateway in sorted(placed.items()):
        annotations = held.get(hostname, {}).get("metadata", {}).get("annotations") or {}
        said = (annotations.get(LISTENER_ANNOTATION), annotations.get(GATEWAY_ANNOTATION))
        if said != ("listening", gateway):
            out.append((hostname, said))
    return out


def misplaced(bed: KubeTestBed, placed: dict[str, str], where: dict[str, str]) -> list[tuple[str, list[str], str]]:
    """The apps' routes (HTTPS and redirect) not attached to their hostname's Gateway alone: (route, parents, its)."""
    out = []
    for namespace in sorted(set(where.values())):
        for route in listed(bed, GATEWAY_API, "HTTPRoute", namespace):
            hostname = route["spec"]["hostnames"][0]
            parents = [ref["name"] for ref in route["spec"]["parentRefs"]]
            if hostname in placed and parents != [placed[hostname]]:
                out.append((route["metadata"]["name"], parents, placed[hostname]))
    return out


def placement_of(bed: KubeTestBed, count: int) -> dict[str, str] | None:
    """The placement once `count` hostnames have their listener."""
    placed = placement(bed)
    return placed if len(placed) == count else None


def issue_when_made(bed: KubeTestBed, where: dict[str, str]) -> None:
    """cert-manager's part for each app (by name, in its namespace), once the operator made its Certificate."""
    left = dict(where)

    def all_issued() -> bool | None:
        for name, ns in list(left.items()):
            if bed.get("cert-manager.io/v1", "Certificate", name, ns) is not None:
                certificate_issued(bed, name, ns)
                del left[name]
        return not left or None
    wait_showing(f"the operator's {len(where)} Certificates", all_issued,
                 300,
                 lambda: {name: status(bed, ns, name) for name, ns in list(left.items())[:2]})


def test_two_hundred_hostnames_go_over_four_gateways_and_stay_where_they_were_placed(
        gateways_bed: KubeTestBed, operator: Operator) -> None:
    bed = gateways_bed
    chart = chart_gateway(bed)
    namespaces = [fresh_namespace(bed, f"gw{n}") for n in range(NAMESPACES)]
    where = {app_name(i): namespaces[i % NAMESPACES] for i in range(APPS)}
    try:
        for name, ns in where.items():
            apply(bed, cr(ns, PUBLIC, name=name))
        issue_when_made(bed, where)
        placed = wait("every hostname's listener", lambda: placement_of(bed, APPS), timeout=300)
        # the chart's Gateway holds 62 (its own 2 listeners), each further one 63 (its copy of `http`), in order
        assert Counter(placed.values()) == {"public": 62, "public-2": 63, "public-3": 63, "public-4": 12}
        assert bed.get(GATEWAY_API, "Gateway", "public-5", GATEWAY_NAMESPACE) is None
        for name in GATEWAYS[1:]:
            made = bed.get(GATEWAY_API, "Gateway", name, GATEWAY_NAMESPACE) or {}
            assert made["metadata"]["labels"] == {"apprafter.io/network": "public", OVERFLOW_LABEL: "public"}
            assert made["spec"]["gatewayClassName"] == "cilium"
            http = chart["spec"]["listeners"][1]
            assert {key: listeners_of(bed, name)["http"][key] for key in http} == http  # the chart's, copied
        # each record says where (the same pass marks them after the Gateways), and each app's routes (its HTTPS
        # one and its redirect) attach there once its pass has read the record
        wait_showing("every record saying where its hostname is",
                     lambda: not unsaid(bed, operator.records_namespace, placed) or None, 120,
                     lambda: unsaid(bed, operator.records_namespace, placed)[:5], "records not saying it")
        held = records(bed, operator.records_namespace)
        wait_showing("every app's routes on its hostname's Gateway", lambda: not misplaced(bed, placed, where) or None,
                     120, lambda: misplaced(bed, placed, where)[:5], "routes elsewhere")

        # The operator restarts; a new app comes: it takes the room on the last Gateway, and nothing else is written.
        versions = {name: (bed.get(GATEWAY_API, "Gateway", name, GATEWAY_NAMESPACE) or {})["metadata"][
            "resourceVersion"] for name in GATEWAYS}
        record_versions = {h: r["metadata"]["resourceVersion"] for h, r in held.items()}
        operator.stop()
        operator.start()
        newest = app_name(APPS)
        where[newest] = namespaces[0]
        apply(bed, cr(namespaces[0], PUBLIC, name=newest))
        issue_when_made(bed, {newest: namespaces[0]})
        after = wait("the new hostname's listener", lambda: placement_of(bed, APPS + 1), timeout=300)
        assert after == {**placed, host(APPS): "public-4"}
        assert {name: (bed.get(GATEWAY_API, "Gateway", name, GATEWAY_NAMESPACE) or {})["metadata"][
            "resourceVersion"] for name in GATEWAYS[:3]} == {name: versions[name] for name in GATEWAYS[:3]}
        after_records = records(bed, operator.records_namespace)
        assert {h: after_records[h]["metadata"]["resourceVersion"] for h in record_versions} == record_versions

        # The apps on the last Gateway go (their routes with them): the Gateway goes too, the others stay as they were.
        for hostname in [h for h, g in after.items() if g == "public-4"]:
            name = hostname.split(".")[0]
            uid = (bed.get(API, "Application", name, where[name]) or {})["metadata"]["uid"]
            bed.delete(API, "Application", name, where[name])
            gc_deletes_children(bed, operator, where[name], uid, name)
        wait("the last Gateway deleted", lambda: bed.get(GATEWAY_API, "Gateway", "public-4", GATEWAY_NAMESPACE) is None
             or None, timeout=300)
        assert placement(bed) == {h: g for h, g in after.items() if g != "public-4"}
    finally:  # the bed's other operators (other records, so no listeners) must not meet these Gateways
        for name in GATEWAYS:
            bed.delete(GATEWAY_API, "Gateway", name, GATEWAY_NAMESPACE)
