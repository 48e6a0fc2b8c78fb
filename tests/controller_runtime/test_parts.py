"""The operator's parts that need no cluster: no-op detection, the work queue, kubeconfig resolution, and the
renderer's side of the contract (child kinds, the inverse of the effective spec)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from controller_runtime.compare import covers, owned_fields_wanted, up_to_date
from controller_runtime.errors import KubeConfigError
from controller_runtime.kubeconfig import load_config
from controller_runtime.queue import FairGate, WorkQueue, fair_share
from renderer.effective import effective_spec, spec_for
from renderer.load import load
from renderer.manifests import KINDS
from renderer.render import render_loaded
from tests.compatibility.test_properties import workload
from tests.renderer.helpers import EXAMPLES

DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a", "labels": {"x": "1"}},
              "spec": {"replicas": 2, "template": {"spec": {"containers": [
                  {"name": "app", "image": "i:1", "resources": {"requests": {"cpu": "0.5"}}}]}}}}


def live_of(desired: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    """What the API server would hold: defaults added, quantities canonical, our managedFields."""
    live: dict[str, Any] = yaml.safe_load(yaml.safe_dump(desired))
    container = live["spec"]["template"]["spec"]["containers"][0]
    container |= {"terminationMessagePath": "/dev/termination-log", "imagePullPolicy": "IfNotPresent"}
    container["resources"]["requests"]["cpu"] = "500m"
    live["spec"]["strategy"] = {"type": "RollingUpdate"}
    live["metadata"]["managedFields"] = [{"manager": "op", "operation": "Apply", "fieldsV1": fields}]
    return live


OWNED = {"f:metadata": {"f:labels": {"f:x": {}}}, "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {
    "f:containers": {'k:{"name":"app"}': {".": {}, "f:name": {}, "f:image": {}, "f:resources": {}}}}}}}


def test_a_live_object_with_defaults_is_up_to_date() -> None:
    assert up_to_date(live_of(DEPLOYMENT, OWNED), DEPLOYMENT, "op")


def test_a_changed_value_or_a_dropped_field_needs_an_apply() -> None:
    live = live_of(DEPLOYMENT, OWNED)
    assert not up_to_date(live, {**DEPLOYMENT, "spec": {**DEPLOYMENT["spec"], "replicas": 3}}, "op")
    unlabelled = {**DEPLOYMENT, "metadata": {"name": "a"}}
    assert covers(live, unlabelled), "a subset is covered..."
    assert not owned_fields_wanted(live, unlabelled, "op"), "...but the label we applied must be removed"
    assert not up_to_date(live, unlabelled, "op")
    assert up_to_date(live, unlabelled, "someone-else")  # only our own fields count
    assert not up_to_date(None, DEPLOYMENT, "op")


def test_an_item_taken_out_of_an_atomic_list_we_own_needs_an_apply() -> None:
    # a CloudNativePG Cluster's spec.managed.roles: an atomic list (managedFields name the list, not its items)
    cluster = {"apiVersion": "postgresql.cnpg.io/v1", "kind": "Cluster", "metadata": {"name": "c"},
               "spec": {"managed": {"roles": [{"name": "a", "login": True}, {"name": "b", "login": True}]}}}
    live = {**cluster, "metadata": {"name": "c", "managedFields": [
        {"manager": "op", "operation": "Apply", "fieldsV1": {"f:spec": {"f:managed": {"f:roles": {}}}}}]}}
    without_b = {**cluster, "spec": {"managed": {"roles": [{"name": "a", "login": True}]}}}
    assert covers(live, without_b), "the fewer items are covered..."
    assert not up_to_date(live, without_b, "op"), "...but the apply replaces the list whole: b goes"
    assert up_to_date(live, cluster, "op")
    assert up_to_date(live, without_b, "someone-else")


@pytest.mark.parametrize(("live", "desired", "same"), [
    (1, 1.0, True), (True, 1, False), ("a", "a", True), (None, {}, True), (None, [], True), ([], [], True),
    ([1, 2], [1, 2], True), ([1, 2], [2, 1], False),
    ([{"a": 1, "d": 0}, {"x": 9}, {"b": 2}], [{"a": 1}, {"b": 2}], True),  # others' items between ours
    ([{"b": 2}, {"a": 1}], [{"a": 1}, {"b": 2}], False),
])
def test_covers(live: Any, desired: Any, same: bool) -> None:
    assert covers(live, desired) is same


@pytest.mark.parametrize(("live", "desired", "same"), [
    ("500m", "0.5", True), ("1Gi", "1024Mi", True), ("1", "1000m", True), ("1Gi", "1G", False),
    ("1k", "1e3", True), ("500m", ".5", True), ("2", "2.0", True), ("1", "2", False), ("1", "nonsense", False),
])
def test_quantities_are_compared_by_value_where_the_api_server_makes_them_canonical(live: str, desired: str,
                                                                                    same: bool) -> None:
    def resources(value: str) -> dict[str, Any]:
        return {"resources": {"requests": {"cpu": value}, "limits": {"memory": value}}}
    assert covers(resources(live), resources(desired)) is same
    assert covers({"emptyDir": {"sizeLimit": live}}, {"emptyDir": {"sizeLimit": desired}}) is same


def test_strings_elsewhere_are_compared_as_written() -> None:
    # an env value changed from "1000" to "1e3" is a change to apply, though both read as the same quantity
    assert not covers({"env": [{"name": "N", "value": "1000"}]}, {"env": [{"name": "N", "value": "1e3"}]})
    assert not covers({"replicas": "0.5"}, {"replicas": "500m"})


def test_the_queue_deduplicates_serialises_and_backs_off() -> None:
    async def scenario() -> None:
        q: WorkQueue[str] = WorkQueue(base_delay=0.01, max_delay=0.04)
        q.add("a")
        q.add("a")
        assert q.depth() == 1
        key = await q.get()
        q.add("a")  # while a worker has it: not handed to a second worker
        assert q.depth() == 0
        q.done(key)
        assert q.depth() == 1 and await q.get() == "a"
        q.done("a")
        assert [q.backoff("b") for _ in range(4)] == [0.01, 0.02, 0.04, 0.04]
        assert await asyncio.wait_for(q.get(), 1) == "b"
        q.done("b")
        q.forget("b")
        assert q.backoff("b") == 0.01
        q.add_after("c", 10)
        q.add_after("c", 0.01)  # the earlier re-add wins
        assert {await asyncio.wait_for(q.get(), 1), await asyncio.wait_for(q.get(), 1)} == {"b", "c"}
        q.close()
    asyncio.run(scenario())


def test_the_queue_serves_namespaces_in_turn_and_caps_each_at_its_share() -> None:
    async def scenario() -> None:
        q: WorkQueue[tuple[str, str]] = WorkQueue(group=lambda key: key[0], slots=4)
        for i in range(50):  # one tenant's flood first
            q.add(("flood", f"heavy{i}"))
        q.add(("quiet", "good"))
        taken = [await q.get() for _ in range(2)]
        assert taken == [("flood", "heavy0"), ("quiet", "good")], "the quiet namespace waits one turn, not 50"
        # two namespaces active: the flood holds at most half of the 4 workers
        more = [await q.get()]
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(q.get(), 0.05)
        assert more == [("flood", "heavy1")] and q.depth() == 48
        q.done(("quiet", "good"))  # the quiet namespace is idle again: the flood may use every worker
        assert [await asyncio.wait_for(q.get(), 1) for _ in range(2)] == [("flood", "heavy2"), ("flood", "heavy3")]
        q.close()
    asyncio.run(scenario())
    assert fair_share(8, 1) == 8 and fair_share(8, 3) == 3 and fair_share(2, 5) == 1


def test_the_cpu_gate_leaves_a_slot_for_another_namespace() -> None:
    async def scenario() -> None:
        gate = FairGate(2)
        order: list[str] = []

        async def render(group: str, name: str, hold: asyncio.Event) -> None:
            await gate.acquire(group)
            order.append(name)
            await hold.wait()
            gate.release(group)

        floods = [asyncio.Event() for _ in range(3)]
        tasks = [asyncio.create_task(render("flood", f"heavy{i}", e)) for i, e in enumerate(floods)]
        await asyncio.sleep(0)
        assert order == ["heavy0"], "one namespace holds one of the two slots, not both"
        good = asyncio.Event()
        tasks.append(asyncio.create_task(render("quiet", "good", good)))
        await asyncio.sleep(0)
        assert order == ["heavy0", "good"], "another namespace's render starts at once"
        for event in (*floods, good):
            event.set()
        await asyncio.gather(*tasks)
        assert order[2:] == ["heavy1", "heavy2"]
    asyncio.run(scenario())


def kubeconfig(path: Path, cluster: str, server: str, namespace: str | None = None) -> Path:
    context: dict[str, Any] = {"cluster": cluster, "user": "u"}
    if namespace:
        context["namespace"] = namespace
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": cluster,
        "clusters": [{"name": cluster, "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t"}}], "contexts": [{"name": cluster, "context": context}]}))
    return path


def test_kubeconfig_resolution_follows_kubectl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a = kubeconfig(tmp_path / "a", "first", "https://a.example:6443", "team-a")
    b = kubeconfig(tmp_path / "b", "second", "https://b.example:6443")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(tmp_path / "missing"), str(b), str(a)]))
    merged = load_config()
    assert merged.current_context == "second"  # the first file that names one wins
    assert merged.get().cluster.server == "https://b.example:6443"
    assert merged.get("first").namespace == "team-a"
    assert load_config(a).get().cluster.server == "https://a.example:6443"  # --kubeconfig beats KUBECONFIG
    assert load_config(None, "first").get().cluster.server == "https://a.example:6443"
    with pytest.raises(KubeConfigError, match="--context nope"):
        load_config(None, "nope")
    monkeypatch.delenv("KUBECONFIG")
    (tmp_path / ".kube").mkdir()
    kubeconfig(tmp_path / ".kube" / "config", "home", "https://home.example:6443")
    assert load_config().get().cluster.server == "https://home.example:6443"
    (tmp_path / ".kube" / "config").unlink()
    with pytest.raises(KubeConfigError, match="no cluster configured"):
        load_config()


def test_every_kind_the_renderer_emits_is_a_child_kind() -> None:
    kinds = {(k.api_version, k.kind) for k in KINDS}
    for example, envs in (("parser", ["dev", "staging", "prod"]), ("webapp", ["staging", "prod"]),
                          ("worker", ["dev", "prod"])):
        app = load(EXAMPLES / example)
        for env in envs:
            for obj in render_loaded(app, env, "manifests", "ns").objects:
                assert (obj["apiVersion"], obj["kind"]) in kinds


@given(workload, st.sampled_from(["nano", "small", None]))
def test_spec_for_inverts_the_effective_spec(eff: dict[str, Any], budget: str | None) -> None:
    if budget:
        eff = {**eff, "budget": budget}
    assert effective_spec(spec_for("prod", eff), "prod") == eff


def test_the_sharding_simulation_keeps_one_owner_per_application() -> None:
    # scripts/simulate_sharding.py asserts the ownership rule at every step; a broken design exits non-zero
    script = Path(__file__).resolve().parents[2] / "scripts" / "simulate_sharding.py"
    for seed in ("1", "2", "3"):
        done = subprocess.run([sys.executable, str(script), "--steps", "400", "--seed", seed], capture_output=True,
                              text=True, check=False)
        assert done.returncode == 0, done.stderr
        assert "at most one owner at every step" in done.stdout
