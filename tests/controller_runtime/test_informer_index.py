"""controller_runtime.Informer's indexes without a server: an object is found by its index value after it is listed,
watched, written through, changed (its value moves) or forgotten, and an index added late covers what is cached."""

from __future__ import annotations

from typing import Any, cast

from controller_runtime.client import ALL_NAMESPACES, Kube
from controller_runtime.informer import Informer
from controller_runtime.kinds import GroupVersionKind

POD = GroupVersionKind("v1", "Pod")


def pod(name: str, app: str | None, version: int, namespace: str = "team-a") -> dict[str, Any]:
    labels = {"app": app} if app else {}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": str(version), "labels": labels}}


def by_app(obj: Any) -> str | None:
    app = (obj.get("metadata") or {}).get("labels", {}).get("app")
    return f"{obj['metadata']['namespace']}/{app}" if app else None


def names(informer: Informer, value: str, index: str = "app") -> list[str]:
    return [o["metadata"]["name"] for o in informer.indexed(index, value)]


def informer() -> Informer:
    cache = Informer(None, POD)  # type: ignore[arg-type]  # no server: fed as list and watch would
    cache.add_index("app", by_app)
    return cache


def test_objects_are_found_by_their_value_through_list_watch_and_write_through() -> None:
    cache = informer()
    cache._replace(ALL_NAMESPACES, [pod("web-1", "web", 1), pod("web-2", "web", 2), pod("db-1", "db", 3),
                                    pod("web-1", "web", 4, namespace="team-b"), pod("loose", None, 5)])
    assert names(cache, "team-a/web") == ["web-1", "web-2"]
    assert names(cache, "team-b/web") == ["web-1"] and names(cache, "team-a/db") == ["db-1"]
    assert names(cache, "team-a/none") == []
    cache._event("ADDED", pod("web-3", "web", 6))
    cache.update(pod("db-2", "db", 7))
    assert names(cache, "team-a/web") == ["web-1", "web-2", "web-3"] and names(cache, "team-a/db") == ["db-1", "db-2"]
    # a label change moves the object; a deletion, a forget and a re-list that lost it drop it
    cache._event("MODIFIED", pod("web-2", "db", 8))
    assert names(cache, "team-a/web") == ["web-1", "web-3"] and names(cache, "team-a/db") == ["db-1", "db-2", "web-2"]
    cache._event("DELETED", pod("web-1", "web", 9))
    cache.forget("team-a", "db-1")
    assert names(cache, "team-a/web") == ["web-3"] and names(cache, "team-a/db") == ["db-2", "web-2"]
    cache._replace(ALL_NAMESPACES, [pod("web-3", "web", 6)])
    assert names(cache, "team-a/web") == ["web-3"] and names(cache, "team-a/db") == [] == names(cache, "team-b/web")
    # an older version written through does not move it back
    cache.update(pod("web-3", "db", 5))
    assert names(cache, "team-a/web") == ["web-3"]


def test_an_index_added_late_covers_what_is_cached_and_adding_it_again_changes_nothing() -> None:
    cache = Informer(None, POD)  # type: ignore[arg-type]
    cache._replace(ALL_NAMESPACES, [pod("web-1", "web", 1), pod("loose", None, 2)])
    cache.add_index("app", by_app)
    cache.add_index("app", lambda obj: "elsewhere")  # the first one stays
    assert names(cache, "team-a/web") == ["web-1"] and names(cache, "elsewhere") == []
    copy = cache.indexed("app", "team-a/web")[0]
    copy["metadata"]["labels"]["app"] = "changed"  # a fresh copy: the cache is not changed through it
    assert names(cache, "team-a/web") == ["web-1"]


def test_an_object_with_several_values_is_found_by_each_and_by_none_once_changed() -> None:
    cache = Informer(cast(Kube, None), POD)  # no server: fed by hand
    cache.add_index("hosts", lambda obj: (obj.get("spec") or {}).get("hosts") or ())
    listed = {**pod("web-1", "web", 1), "spec": {"hosts": ["a.example", "b.example"]}}
    cache._replace(ALL_NAMESPACES, [listed, pod("loose", None, 2)])
    assert [names(cache, h, "hosts") for h in ("a.example", "b.example", "c.example")] == [["web-1"], ["web-1"], []]
    cache._event("MODIFIED", {**pod("web-1", "web", 3), "spec": {"hosts": ["c.example"]}})
    assert [names(cache, h, "hosts") for h in ("a.example", "b.example", "c.example")] == [[], [], ["web-1"]]
