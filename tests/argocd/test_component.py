"""deploy/argocd applied onto a live Argo CD install (Argo CD's install.yaml of each supported version, applied as its
getting-started guide says: `kubectl apply -n argocd --server-side --force-conflicts`), through an API server of its
own: the live objects before and after differ only in our sidecar, the plugin's timeouts, our resource
customizations and the approver role, by either route docs/install.md gives (a kustomization with the component, or
the patches applied server-side as their own field manager), and both routes come off again without a trace."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.testbed.argocd import ARGOCD_VERSIONS, install_objects, with_component
from tests.testbed.gitops import DEPLOY
from tests.testbed.kube import KubeTestBed, start_kube

pytestmark = pytest.mark.testbed

NAMESPACE = "argocd"
INSTALLER, OURS = "kubectl", "apprafter"  # kubectl's field manager for `kubectl apply --server-side`; the patches'
Key = tuple[str, str, str]  # kind, namespace, name
VOLATILE = ("managedFields", "resourceVersion", "generation", "uid", "creationTimestamp")


def key(obj: Mapping[str, Any]) -> Key:
    return obj["kind"], obj["metadata"].get("namespace") or "", obj["metadata"]["name"]


def flat(node: Any, path: str = "") -> dict[str, Any]:
    """Leaf path -> value; list items that have a name are addressed by it ([name=x]), as the API merges them."""
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for k, v in node.items():
            out.update(flat(v, f"{path}.{k}" if path else str(k)))
        return out or {path: {}}
    if isinstance(node, list) and node:
        out = {}
        for i, item in enumerate(node):
            where = f"[name={item['name']}]" if isinstance(item, dict) and "name" in item else f"[{i}]"
            out.update(flat(item, path + where))
        return out
    return {path: node}


def units(patch: Mapping[str, Any]) -> set[str]:
    """What a patch owns: each map leaf it sets, each named list item (container, volume) it adds, whole."""
    def walk(node: Any, path: str) -> set[str]:
        if isinstance(node, dict):
            return set().union(*(walk(v, f"{path}.{k}" if path else str(k)) for k, v in node.items()))
        if isinstance(node, list):
            return {f"{path}[name={item['name']}]" for item in node}
        return {path}
    return walk({k: v for k, v in patch.items() if k not in ("apiVersion", "kind", "metadata")}, "")


def patches() -> dict[Key, dict[str, Any]]:
    """deploy/argocd's patches as the objects they select (the target's kind and name, in NAMESPACE)."""
    component = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    out = {}
    for entry in component["patches"]:
        patch = yaml.safe_load((DEPLOY / entry["path"]).read_text())
        target = entry["target"]
        patch["metadata"] = {"name": target["name"], "namespace": NAMESPACE}
        out[(target["kind"], NAMESPACE, target["name"])] = patch
    return out


class Install:
    """One API server holding Argo CD `version`'s install.yaml, applied as Argo CD's guide says."""

    def __init__(self, bed: KubeTestBed, version: str) -> None:
        self.bed, self.version = bed, version
        self.api_versions = {key({**o, "metadata": {**o["metadata"], **self._namespace(o)}}): o["apiVersion"]
                             for o in install_objects(version)}

    def _namespace(self, obj: Mapping[str, Any]) -> dict[str, str]:
        return {"namespace": NAMESPACE} if self.bed.resource_for(obj["apiVersion"], obj["kind"]).namespaced else {}

    def apply(self, objects: list[dict[str, Any]], manager: str = INSTALLER, force: bool = True) -> None:
        with concurrent.futures.ThreadPoolExecutor(4) as pool:  # kubectl sends one request per object too
            list(pool.map(lambda o: self.bed.apply(o, namespace=NAMESPACE, field_manager=manager, force=force),
                          objects))

    def apply_install(self, version: str | None = None) -> None:
        self.apply(install_objects(version or self.version))

    def live(self) -> dict[Key, dict[str, Any]]:
        """Every object of the install as stored, its bookkeeping (managedFields, versions, uid) left out."""
        def read(item: tuple[Key, str]) -> dict[str, Any]:
            (kind, namespace, name), api_version = item
            stored = self.bed.get(api_version, kind, name, namespace or None)
            assert stored is not None, f"{kind} {namespace}/{name} is gone"
            stored["metadata"] = {k: v for k, v in stored["metadata"].items() if k not in VOLATILE}
            return stored

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            return dict(zip(self.api_versions, pool.map(read, self.api_versions.items()), strict=True))


def changes(before: Mapping[Key, Any], after: Mapping[Key, Any]) -> dict[Key, set[str]]:
    """The leaf paths that differ, per object (objects that did not change left out)."""
    out = {}
    for k in before:
        old, new = flat(before[k]), flat(after[k])
        changed = {p for p in old.keys() | new.keys() if old.get(p) != new.get(p)}
        if changed:
            out[k] = changed
    return out


def assert_only_ours(before: Mapping[Key, Any], after: Mapping[Key, Any]) -> None:
    """Exactly the four patched objects changed, each only under what its patch owns, all of which is there."""
    ours = {k: units(p) for k, p in patches().items()}
    changed = changes(before, after)
    assert set(changed) == set(ours)
    for k, paths in changed.items():
        outside = {p for p in paths if not any(p == u or p.startswith(u + ".") for u in ours[k])}
        assert not outside, f"{k}: changed outside our fields: {sorted(outside)}"
        live = flat(after[k])
        assert all(any(p == u or p.startswith(u + ".") for p in live) for u in ours[k])
        assert all(p in live for p in paths if p in flat(before[k]))  # nothing of Argo CD's removed


@pytest.fixture(scope="module", params=ARGOCD_VERSIONS, ids=[f"argocd-{v}" for v in ARGOCD_VERSIONS])
def install(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Install]:
    version = str(request.param)
    bed = start_kube(tmp_path_factory.mktemp(f"kube-{version}"), install_crds=False)
    try:
        bed.ensure_namespace(NAMESPACE)
        installed = Install(bed, version)
        installed.apply_install()
        yield installed
    finally:
        bed.stop()


def test_the_component_in_your_kustomization_changes_only_our_fields(install: Install) -> None:
    # What you had: your kustomization of Argo CD's install (its namespace transformer adds a few fields of its own).
    install.apply(with_component(None, install.version, NAMESPACE))
    before = install.live()
    install.apply(with_component(DEPLOY, install.version, NAMESPACE))  # `kubectl apply --server-side -k .`
    assert_only_ours(before, install.live())
    # Off again: the same kustomization without the component (the installer stops applying our fields).
    install.apply(with_component(None, install.version, NAMESPACE))
    assert install.live() == before


def test_the_patches_applied_on_their_own_change_only_our_fields_and_stay_through_a_reinstall(
        install: Install) -> None:
    install.apply_install()  # Argo CD as its guide installs it
    before = install.live()
    install.apply(list(patches().values()), OURS, force=False)  # a conflict would mean a field of Argo CD's
    with_ours = install.live()
    assert_only_ours(before, with_ours)
    install.apply_install()  # Argo CD re-applied as its guide says: our own field manager's fields stay
    assert install.live() == with_ours
    # Off again: our field manager applies the objects without our fields.
    install.apply([{"apiVersion": p["apiVersion"], "kind": p["kind"], "metadata": p["metadata"]}
                   for p in patches().values()], OURS, force=False)
    assert install.live() == before


def test_an_argo_cd_upgrade_keeps_the_patches(tmp_path: Path) -> None:
    """The oldest supported line with the patches applied, upgraded to the pin by re-applying the pin's install.yaml:
    the result is the pin's install with our fields, as if installed so."""
    oldest, pinned = ARGOCD_VERSIONS[-1], ARGOCD_VERSIONS[0]
    bed = start_kube(tmp_path / "kube", install_crds=False)
    try:
        bed.ensure_namespace(NAMESPACE)
        upgraded = Install(bed, oldest)
        upgraded.apply_install()
        upgraded.apply(list(patches().values()), OURS, force=False)
        upgraded.apply_install(pinned)
        upgraded = Install(bed, pinned)
        after = upgraded.live()
        upgraded.apply([{"apiVersion": p["apiVersion"], "kind": p["kind"], "metadata": p["metadata"]}
                        for p in patches().values()], OURS, force=False)
        assert_only_ours(upgraded.live(), after)
    finally:
        bed.stop()
