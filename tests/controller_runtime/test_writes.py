"""The runtime's write steps against a real API server: ensure (apply unless up to date, the reply cached), the one
status writer, exact deletes and prune (uid and resourceVersion preconditions), finalizers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from controller_runtime.client import CHANGED, DELETED, GONE, Kube
from controller_runtime.errors import KubeError
from controller_runtime.finalizers import add_finalizer, has_finalizer, remove_finalizer
from controller_runtime.informer import Informer
from controller_runtime.writes import CREATED, UNCHANGED, create_once, delete_exactly, ensure, prune, write_status
from tests.controller_runtime.conftest import CONFIG_MAP, WIDGET, writes
from tests.testbed.kube import KubeTestBed

Run = Callable[..., Any]


def config_map(namespace: str, name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}, "data": data}


def widget(namespace: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": WIDGET.api_version, "kind": WIDGET.kind, "metadata": {"name": name, "namespace": namespace},
            "spec": spec}


def managers(obj: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(e["manager"], e["operation"], e.get("subresource", "")) for e in obj["metadata"]["managedFields"]}


def test_ensure_applies_what_is_missing_or_changed_and_nothing_else(run: Run, server: KubeTestBed,
                                                                    namespace: str) -> None:
    async def scenario(kube: Kube) -> None:
        cache = Informer(kube, CONFIG_MAP)  # never run: a cache our writes keep, as a running one would
        sent = writes("apply", "configmaps")
        first = await ensure(kube, cache, config_map(namespace, "cm", a="1"))
        assert first.written and first.before is None and first.obj["data"] == {"a": "1"}
        assert cache.get(namespace, "cm") == first.obj  # the reply, cached
        again = await ensure(kube, cache, config_map(namespace, "cm", a="1"))
        assert not again.written and again.obj == first.obj
        assert writes("apply", "configmaps") == sent + 1  # the second ensure sent nothing
        # someone else changes our field: the cache (here fed by hand, as its watch would) shows it, ensure puts
        # it back and says what it compared with
        edited = server.apply(config_map(namespace, "cm", a="2"), field_manager="someone-else")
        cache.update(edited)
        back = await ensure(kube, cache, config_map(namespace, "cm", a="1"))
        assert back.written and back.before is not None and back.before["data"] == {"a": "2"}
        assert back.obj["data"] == {"a": "1"} and ("runtime-test", "Apply", "") in managers(back.obj)
        # a field we applied before and no longer want is removed (the live object covers the new desire)
        more = await ensure(kube, cache, config_map(namespace, "cm", a="1", b="2"))
        fewer = await ensure(kube, cache, config_map(namespace, "cm", a="1"))
        assert more.written and fewer.written and fewer.obj["data"] == {"a": "1"}
        assert writes("apply", "configmaps") == sent + 4

    run(scenario)


def test_ensure_on_a_fresh_read_and_create_once_keeping_the_first_writers(run: Run, server: KubeTestBed,
                                                                          namespace: str) -> None:
    async def scenario(kube: Kube) -> None:
        # no cache: ensure reads fresh, or takes the caller's fresh read (`live`)
        first = await ensure(kube, None, config_map(namespace, "fresh", a="1"))
        assert first.result == CREATED
        sent = writes("apply", "configmaps")
        same = await ensure(kube, None, config_map(namespace, "fresh", a="1"), live=first.obj)
        assert not same.written and writes("apply", "configmaps") == sent
        # create once: the first writer's object stays; a second pass gets it back (a 409 read), never its own
        made = await create_once(kube, None, config_map(namespace, "once", password="first"))
        other = await create_once(kube, None, config_map(namespace, "once", password="second"))
        assert (made.result, other.result) == (CREATED, UNCHANGED)
        assert other.obj["data"] == {"password": "first"}
        assert other.obj["metadata"]["uid"] == made.obj["metadata"]["uid"]

    run(scenario)


def test_ensure_under_another_field_manager_without_force_meets_a_conflict(run: Run, server: KubeTestBed,
                                                                           namespace: str) -> None:
    server.apply(config_map(namespace, "taken", a="theirs"), field_manager="owner")

    async def scenario(kube: Kube) -> KubeError:
        cache = Informer(kube, CONFIG_MAP)
        with pytest.raises(KubeError) as refused:
            await ensure(kube, cache, config_map(namespace, "taken", a="ours"), force=False, field_manager="second")
        assert cache.get(namespace, "taken") is None  # nothing cached of a refused write
        done = await ensure(kube, cache, config_map(namespace, "taken", a="ours"), field_manager="second")
        assert ("second", "Apply", "") in managers(done.obj)
        return refused.value

    assert run(scenario).code == 409


def test_ensure_over_a_version_writes_over_that_one_only(run: Run, server: KubeTestBed, namespace: str) -> None:
    """A decision made on one version of an object is written over that version only: a change made meanwhile,
    even under the writer's own field manager and already in its cache, is a 409 and stays."""
    async def scenario(kube: Kube) -> KubeError:
        cache = Informer(kube, CONFIG_MAP)
        decided = (await ensure(kube, cache, config_map(namespace, "gate", a="good"))).obj
        version = decided["metadata"]["resourceVersion"]
        same = await ensure(kube, cache, config_map(namespace, "gate", a="good"), over=version)
        assert not same.written  # nothing changed since: nothing sent
        spoofed = server.apply(config_map(namespace, "gate", a="spoof"), field_manager="runtime-test")
        cache.update(spoofed)  # its event came before the write
        with pytest.raises(KubeError) as refused:
            await ensure(kube, cache, config_map(namespace, "gate", a="good"), over=version)
        live = server.get("v1", "ConfigMap", "gate", namespace)
        assert live is not None and live["data"] == {"a": "spoof"}
        fresh = await ensure(kube, cache, config_map(namespace, "gate", a="good"),
                             over=spoofed["metadata"]["resourceVersion"])
        assert fresh.written and fresh.obj["data"] == {"a": "good"}
        return refused.value

    assert run(scenario).code == 409


def test_the_status_writer_applies_the_whole_status_through_the_subresource_once(run: Run, server: KubeTestBed,
                                                                                 namespace: str) -> None:
    async def scenario(kube: Kube) -> None:
        cache = Informer(kube, WIDGET)
        obj = (await ensure(kube, cache, widget(namespace, "w", size=1))).obj
        sent = writes("apply-status", "widgets")
        written = await write_status(kube, cache, obj, {"phase": "Ready", "seen": 1})
        assert written["status"] == {"phase": "Ready", "seen": 1} and written["spec"] == {"size": 1}
        assert ("runtime-test-status", "Apply", "status") in managers(written)
        assert cache.get(namespace, "w") == written
        assert await write_status(kube, cache, written, {"phase": "Ready", "seen": 1}) is written  # unchanged
        assert writes("apply-status", "widgets") == sent + 1
        fewer = await write_status(kube, cache, written, {"phase": "Failed"})  # whole: `seen` is removed
        assert fewer["status"] == {"phase": "Failed"}
        # the status subresource ignores a spec, and the main resource a status: the writer touches only status
        assert server.get(WIDGET.api_version, WIDGET.kind, "w", namespace)["spec"] == {"size": 1}  # type: ignore[index]

    run(scenario)


def test_exact_deletes_leave_an_object_made_anew_under_the_name_and_one_changed_since(run: Run, server: KubeTestBed,
                                                                                    namespace: str) -> None:
    async def scenario(kube: Kube) -> None:
        cache = Informer(kube, CONFIG_MAP)
        old = (await ensure(kube, cache, config_map(namespace, "a", v="1"))).obj
        assert await delete_exactly(kube, cache, old) == DELETED and cache.get(namespace, "a") is None
        assert await delete_exactly(kube, cache, old) == GONE
        new = (await ensure(kube, cache, config_map(namespace, "a", v="2"))).obj  # made anew under the name
        assert await delete_exactly(kube, cache, old) == CHANGED  # the old uid: the new object stays
        assert cache.get(namespace, "a") == new and server.get("v1", "ConfigMap", "a", namespace) is not None
        edited = server.apply(config_map(namespace, "a", v="3"), field_manager="someone-else")
        cache.update(edited)  # the watch brought the edit while the pass decided on what it had read
        assert await delete_exactly(kube, cache, new, unchanged=True) == CHANGED  # read before that edit
        assert server.get("v1", "ConfigMap", "a", namespace) is not None
        assert cache.get(namespace, "a") == edited  # still there: no event would bring it back
        assert await delete_exactly(kube, cache, edited, unchanged=True) == DELETED
        assert server.get("v1", "ConfigMap", "a", namespace) is None

    run(scenario)


def test_prune_deletes_exactly_the_chosen_objects_one_by_one(run: Run, server: KubeTestBed, namespace: str) -> None:
    async def scenario(kube: Kube) -> None:
        cache = Informer(kube, CONFIG_MAP)
        made = [(await ensure(kube, cache, config_map(namespace, n))).obj for n in ("keep", "drop1", "drop2")]
        sent = writes("delete", "configmaps")
        done = [(p.obj["metadata"]["name"], p.deletion) async for p in prune(kube, cache, made[1:])]
        assert done == [("drop1", DELETED), ("drop2", DELETED)]
        assert writes("delete", "configmaps") == sent + 2
        assert [o["metadata"]["name"] for o in cache.items(namespace)] == ["keep"]
        left = {o["metadata"]["name"] for o in (await kube.list(CONFIG_MAP, namespace))[0]}
        assert left - {"kube-root-ca.crt"} == {"keep"}  # (that one a controller-manager would publish)

    run(scenario)


def test_finalizers_are_added_and_removed_once_with_the_resource_version_as_precondition(
        run: Run, server: KubeTestBed, namespace: str) -> None:
    async def scenario(kube: Kube) -> None:
        cache = Informer(kube, CONFIG_MAP)
        obj = (await ensure(kube, cache, config_map(namespace, "f"))).obj
        sent = writes("merge", "configmaps")
        held = await add_finalizer(kube, cache, obj, "runtime.test.example/cleanup")
        assert has_finalizer(held, "runtime.test.example/cleanup") and cache.get(namespace, "f") == held
        assert await add_finalizer(kube, cache, held, "runtime.test.example/cleanup") is held
        assert writes("merge", "configmaps") == sent + 1
        with pytest.raises(KubeError) as stale:  # read before the finalizer was added: refused, not overwritten
            await remove_finalizer(kube, cache, {**obj, "metadata": {**obj["metadata"],
                                                                     "finalizers": ["runtime.test.example/cleanup"]}},
                                   "runtime.test.example/cleanup")
        assert stale.value.code == 409
        await kube.delete(CONFIG_MAP, "f", namespace)  # held by the finalizer
        deleting = await kube.get(CONFIG_MAP, "f", namespace)
        assert deleting is not None and deleting["metadata"].get("deletionTimestamp")
        released = await remove_finalizer(kube, cache, deleting, "runtime.test.example/cleanup")
        assert not has_finalizer(released, "runtime.test.example/cleanup")
        assert await remove_finalizer(kube, cache, released, "runtime.test.example/cleanup") is released
        assert await kube.get(CONFIG_MAP, "f", namespace) is None  # the last finalizer gone, so is the object

    run(scenario)
