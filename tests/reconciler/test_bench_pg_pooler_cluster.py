"""scripts/bench_pg_pooler_claims.py runs: its `measure` with two further claims per provider through the API server,
the real operator with a PgBouncer image, CloudNativePG played (tests/reconciler/cnpg_stand_in.py): both providers'
Clusters made, the pooled one's Pooler and none for the other, every claim ready with its pooledUrl at the Pooler's
Service or at the Cluster's `-rw` one, and what it prints. The figures are the node's (docs/measurements.md)."""

from __future__ import annotations

import importlib.util
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.reconciler.cnpg_stand_in import CNPG, CloudNativePGStandIn
from tests.reconciler.helpers import API, BASE, CREATED
from tests.reconciler.operator_proc import FAST, Fixture, Operator, operator_fixture
from tests.testbed.kube import KubeTestBed

pytestmark = pytest.mark.testbed

RUN = f"pb{uuid.uuid4().hex[:6]}"
SERVICES = f"pooler-bench-svc-{RUN}"
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_pg_pooler_claims.py"


def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_pg_pooler_claims", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def pg_platform(bed: KubeTestBed, tmp_path_factory: pytest.TempPathFactory) -> str:
    bed.ensure_namespace(SERVICES)
    path = Path(tmp_path_factory.mktemp("platform")) / "platform.yaml"
    path.write_text(f"providerNamespaces: {{pg: {SERVICES}}}\n")
    return str(path)


operator = operator_fixture("--no-leader-elect", *FAST, "--platform", Fixture("pg_platform"),
                            "--backend-image", "cloudnative-pg=localhost/postgresql:15",
                            "--backend-image", "cloudnative-pg.pgbouncer=localhost/pgbouncer:0.1.0")


@pytest.fixture
def bench(bed: KubeTestBed) -> Iterator[ModuleType]:
    module = script()
    yield module
    for side in module.sides(RUN).values():
        bed.delete(API, "ServiceProvider", side.name)


def test_the_bench_measures_both_providers_claims_and_prints_their_ratio(
        bed: KubeTestBed, operator: Operator, bench: ModuleType) -> None:
    sides = bench.sides(RUN)
    stand_in = CloudNativePGStandIn(bed, SERVICES, [side.cluster for side in sides.values()])
    with stand_in.running():
        report = bench.measure(bed, BASE["image"], 2, SERVICES, run=RUN)
    CREATED.extend(f"{RUN}-{name}-{i}" for name in bench.SIDES for i in ("first", 0, 1))
    assert {name: len(took) for name, took in report.further.items()} == {"pooled": 2, "direct": 2}
    assert all(t > 0 for took in report.further.values() for t in took) and set(report.first) == set(bench.SIDES)
    # the pooled provider's Cluster has its Pooler, the other none (measure checked each claim's pooledUrl)
    pooled, direct = sides["pooled"], sides["direct"]
    assert bed.get(CNPG, "Pooler", f"{pooled.cluster}-pooler", SERVICES) is not None
    assert bed.get(CNPG, "Pooler", f"{direct.cluster}-pooler", SERVICES) is None
    said = bench.lines(report)
    assert said[0].startswith("load average at start: ") and said[-1].startswith("load average at end: ")
    assert [line.split(":")[0] for line in said[2:4]] == ["pooled", "direct"]
    assert all("p50" in line and "p99" in line for line in said[2:5]), said
    assert said[4].startswith("pooled / direct: p50 ") and "x, p99 " in said[4], said
