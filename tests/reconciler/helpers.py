"""Reading and writing the test bed the way a user, Argo CD or a provider would, and waiting for the operator."""

from __future__ import annotations

import contextlib
import copy
import json
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from renderer.manifests import KINDS
from tests.compatibility.cases import BASE
from tests.testbed.kube import KubeTestBed, _rejected
from tests.testbed.procs import BedError, wait_for

if TYPE_CHECKING:
    from tests.reconciler.operator_proc import Operator

API = "apprafter.io/v1alpha1"
ARGO = "argocd-controller"  # who writes Application specs in a real cluster
T = TypeVar("T")

# BASE (the classifier cases' app): public, two needs, every kind of env value: each gated rule family is one
# edit away.


# Namespaces the running test made (tests/reconciler/conftest.py forgets their deployments after each test).
CREATED: list[str] = []


def fresh_namespace(bed: KubeTestBed, prefix: str = "op") -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    bed.ensure_namespace(name)
    CREATED.append(name)
    return name


def grant_secret(bed: KubeTestBed, namespace: str, name: str, apps: str) -> dict[str, Any]:
    """A Secret `name` granted to `apps` (its apprafter.io/applications annotation), as its owner writes it."""
    return bed.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": name, "namespace": namespace, "annotations": {"apprafter.io/applications": apps}},
        "stringData": {"key": "not-a-real-key", "token": "not-a-real-token", "other": "x"}}, field_manager="team")


def gone_lines(log: str, namespace: str, name: str) -> int:
    """How often the operator logged that it saw Application namespace/name gone."""
    count = 0
    for line in log.splitlines():
        if '"gone"' in line and namespace in line:
            entry = json.loads(line)
            count += entry.get("msg") == "gone" and (entry.get("namespace"), entry.get("object")) == (namespace, name)
    return count


def forget(bed: KubeTestBed, log: Callable[[], str], records: str, namespaces: list[str]) -> None:
    """What a cluster administrator does to retire deployments for good: delete the Applications, and once the
    operator has seen each gone (no pass of it can still write), forget their baselines and hostnames
    (docs/operator.md). A hostname one test's app held is then free for the next test's."""
    for namespace in namespaces:
        info = bed.resource_for(API, "Application")
        resp = bed.http.get(info.path(None, namespace))
        for item in resp.json().get("items", []) if resp.status_code == 200 else []:
            name = item["metadata"]["name"]
            seen = gone_lines(log(), namespace, name)
            bed.delete(API, "Application", name, namespace)
            wait(f"the operator to see {namespace}/{name} gone", lambda n=name, c=seen, ns=namespace: gone_lines(
                log(), ns, n) > c or None)
    for kind, holder in (("ApplicationBaseline", "application"), ("PublicHostname", "holder")):
        info = bed.resource_for(API, kind)
        resp = bed.http.get(info.path(None, records))
        for item in resp.json().get("items", []) if resp.status_code == 200 else []:
            if item["spec"][holder]["namespace"] in namespaces:
                bed.delete(API, kind, item["metadata"]["name"], records)


def cr(namespace: str, base: dict[str, Any] | None = None, *, name: str = "demo", env: str = "prod",
       override: dict[str, Any] | None = None) -> dict[str, Any]:
    """An Application CR as the plugin emits it (spec.environment stamped)."""
    return {"apiVersion": API, "kind": "Application", "metadata": {"name": name, "namespace": namespace},
            "spec": {"environment": env, "base": copy.deepcopy(base if base is not None else BASE),
                     "environments": {env: copy.deepcopy(override or {})}}}


def edit(base: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """BASE (or base) with fields replaced; None deletes a field."""
    kept = {k: v for k, v in (base if base is not None else BASE).items() if fields.get(k, v) is not None}
    return copy.deepcopy({**kept, **{k: v for k, v in fields.items() if v is not None}})


def apply(bed: KubeTestBed, obj: dict[str, Any]) -> dict[str, Any]:
    """Apply an Application as Argo CD does, its team having granted it the Secrets its env names (lifecycle.secrets;
    tests/reconciler/test_tenant_cluster.py writes as a tenant without that)."""
    grant_referenced(bed, obj)
    return bed.apply(obj, field_manager=ARGO)


def service_provider(name: str, type_: str, backend: str, config: dict[str, Any] | None = None,
                     labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A ServiceProvider as an administrator writes it (the one fixture every backend's tests use)."""
    return {"apiVersion": API, "kind": "ServiceProvider", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"type": type_, "backend": backend, **({"config": config} if config is not None else {})}}


def add_provider(target: Any, name: str, type_: str, backend: str, config: dict[str, Any] | None = None,
                 labels: dict[str, str] | None = None) -> None:
    """Write a ServiceProvider as the cluster's administrator (on any bed: the API server's, the node's)."""
    target.apply(service_provider(name, type_, backend, config, labels), field_manager="admin")


def grant_referenced(bed: KubeTestBed, obj: dict[str, Any]) -> None:
    """Every Secret the Application's env references (in base and each environment), granted to it."""
    meta, spec = obj["metadata"], obj.get("spec") or {}
    scopes = [spec.get("base") or {}, *(spec.get("environments") or {}).values()]
    names = {v["secret"].partition("/")[0] for scope in scopes for v in (scope.get("env") or {}).values()
             if isinstance(v, dict) and isinstance(v.get("secret"), str)}
    for name in sorted(names):
        existing = bed.get("v1", "Secret", name, meta["namespace"])
        granted = ((existing or {}).get("metadata", {}).get("annotations") or {}).get("apprafter.io/applications", "")
        apps = {a.strip() for a in granted.split(",") if a.strip()}
        if meta["name"] not in apps:
            grant_secret(bed, meta["namespace"], name, ", ".join(sorted(apps | {meta["name"]})))


def wait(what: str, probe: Callable[[], T | None], timeout: float = 30) -> T:
    return wait_for(what, probe, timeout, interval=0.1)


def wait_showing(what: str, probe: Callable[[], T | None], timeout: float, shown: Callable[[], object],
                 label: str = "status now") -> T:
    """`wait`, and on a timeout the failure shows what `shown` says then (an object's status, say): the one way
    every test waits for an object to reach a state."""
    try:
        return wait(what, probe, timeout)
    except BedError as e:
        raise AssertionError(f"{e}\n{label}: {shown()}") from None


def app(bed: KubeTestBed, namespace: str, name: str = "demo") -> dict[str, Any]:
    obj = bed.get(API, "Application", name, namespace)
    assert obj is not None
    return obj


def status(bed: KubeTestBed, namespace: str, name: str = "demo") -> dict[str, Any]:
    return app(bed, namespace, name).get("status") or {}


def condition(st: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in st.get("conditions") or [] if c["type"] == type_), None)


def wait_phase(bed: KubeTestBed, namespace: str, phase: str, name: str = "demo", timeout: float = 30) -> dict[str, Any]:
    """The status once the operator has processed the current generation and reached `phase`."""
    def probe() -> dict[str, Any] | None:
        obj = app(bed, namespace, name)
        st = obj.get("status") or {}
        done = st.get("observedGeneration") == obj["metadata"]["generation"] and st.get("phase") == phase
        return st if done else None
    return wait_showing(f"{namespace}/{name} phase {phase}", probe, timeout,
                        lambda: json.dumps(status(bed, namespace, name), indent=1)[:3000], "status now")


def children(bed: KubeTestBed, namespace: str, instance: str = "demo-prod") -> dict[tuple[str, str], dict[str, Any]]:
    """Every object of a kind the renderer emits, labelled with the app's instance: (kind, name) -> object."""
    out = {}
    for kind in KINDS:
        info = bed.resource_for(kind.api_version, kind.kind)
        selector = {"labelSelector": f"app.kubernetes.io/instance={instance}"}
        resp = bed.http.get(info.path(None, namespace), params=selector)
        resp.raise_for_status()
        for item in resp.json()["items"]:  # list items carry no apiVersion/kind
            out[(kind.kind, item["metadata"]["name"])] = {"apiVersion": kind.api_version, "kind": kind.kind, **item}
    return out


def versions(objs: dict[tuple[str, str], dict[str, Any]]) -> dict[tuple[str, str], str]:
    return {k: o["metadata"]["resourceVersion"] for k, o in objs.items()}


def set_claims_ready(bed: KubeTestBed, namespace: str, names: list[str], ready: bool = True,
                     provider: str | None = None) -> None:
    """Play the provider: write status.ready on each claim (as the user `provider` where the webhook reviews claims:
    only a claim's provider may write its status; with the admin's group, as no provider's RBAC is installed)."""
    info = bed.resource_for(API, "ResourceClaim")
    headers = {"Content-Type": "application/merge-patch+json",
               **({"Impersonate-User": provider, "Impersonate-Group": "system:masters"} if provider else {})}
    for claim in names:
        resp = bed.http.patch(info.path(claim, namespace) + "/status", params={"fieldManager": "provider"},
                              content=json.dumps({"status": {"ready": ready}}).encode(), headers=headers)
        if resp.status_code >= 300:
            raise _rejected(resp, f"claim {claim} status")


def claims_when_created(bed: KubeTestBed, namespace: str, names: list[str], timeout: float = 30,
                        provider: str | None = None) -> None:
    """Wait for the operator to create the claims, then make them ready."""
    wait(f"claims {names}", lambda: all(bed.get(API, "ResourceClaim", n, namespace) for n in names) or None, timeout)
    set_claims_ready(bed, namespace, names, provider=provider)


def plans(bed: KubeTestBed, namespace: str) -> list[dict[str, Any]]:
    info = bed.resource_for(API, "MigrationPlan")
    resp = bed.http.get(info.path(None, namespace))
    resp.raise_for_status()
    items: list[dict[str, Any]] = resp.json()["items"]
    return sorted(items, key=lambda p: p["metadata"]["name"])


def plan_phase(bed: KubeTestBed, namespace: str, name: str) -> str:
    obj = bed.get(API, "MigrationPlan", name, namespace) or {}
    return str((obj.get("status") or {}).get("phase") or "")


def write_status(bed: KubeTestBed, kind: str, name: str, namespace: str, status_: dict[str, Any],
                 manager: str, merge: bool = True) -> dict[str, Any]:
    info = bed.resource_for(API, kind)
    body = {"status": status_} if merge else {"apiVersion": API, "kind": kind,
                                              "metadata": {"name": name, "namespace": namespace}, "status": status_}
    resp = bed.http.patch(info.path(name, namespace) + "/status", params={"fieldManager": manager,
                                                                          **({} if merge else {"force": "true"})},
                          content=json.dumps(body).encode(),
                          headers={"Content-Type": "application/merge-patch+json" if merge
                                   else "application/apply-patch+yaml"})
    if resp.status_code >= 300:
        raise _rejected(resp, f"{kind} {namespace}/{name} status")
    result: dict[str, Any] = resp.json()
    return result


def events(bed: KubeTestBed, namespace: str, reason: str | None = None) -> list[dict[str, Any]]:
    resp = bed.http.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")
    resp.raise_for_status()
    items: list[dict[str, Any]] = resp.json()["items"]
    return [e for e in items if reason is None or e.get("reason") == reason]


def template_pod(bed: KubeTestBed, namespace: str, name: str, app: str = "demo") -> dict[str, Any]:
    """A pod made from the app's Deployment's pod template as it is now (labels, annotations, containers), as its
    ReplicaSet would make it (the bare API server runs no controller: the object is what the operator reads)."""
    template = (bed.get("apps/v1", "Deployment", app, namespace) or {})["spec"]["template"]
    meta = {"name": name, "namespace": namespace, "labels": template["metadata"]["labels"],
            "annotations": template["metadata"].get("annotations") or {}}
    made = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": template["spec"]["containers"]}}
    return bed.apply(made, field_manager="kube-controller-manager")


def collect_garbage(bed: KubeTestBed, kind: str, name: str, namespace: str, owner_uid: str) -> None:
    """What the garbage collector does on a cluster (the bare API server runs none): delete the object if its owner
    is the given, gone one. Call it once the owner is gone for good (its successor exists), so that nothing of the
    owner's can write the object again."""
    found = bed.get("v1", kind, name, namespace)
    if found is not None and owner_uid in {o.get("uid") for o in found["metadata"].get("ownerReferences") or []}:
        bed.delete("v1", kind, name, namespace)


def collect_owned(bed: KubeTestBed, owner_uid: str) -> list[str]:
    """What the garbage collector does once an object is deleted (the bare API server runs none): every namespaced
    object, in any namespace, whose ownerReferences name the deleted one is deleted; what went, as `Kind ns/name`."""
    went = []
    for info in bed.namespaced_resources():
        listed = bed.http.get(f"{info.prefix}/{info.plural}")
        for obj in listed.json().get("items") or [] if listed.status_code == 200 else []:
            meta = obj["metadata"]
            if owner_uid in {o.get("uid") for o in meta.get("ownerReferences") or []}:
                bed.http.delete(info.path(meta["name"], meta["namespace"]))
                went.append(f"{info.kind} {meta['namespace']}/{meta['name']}")
    return went


def remake_namespace(bed: KubeTestBed, namespace: str, timeout: float = 90) -> str:
    """A namespace deleted, as a cluster deletes one, then made again under its name (by another team, say): every
    object in it deleted, their finalizers honoured (a claim's waits for the operator), the namespace finalized as
    kube-controller-manager's namespace controller does (the bare API server runs none); the new namespace's UID."""
    old = bed.get("v1", "Namespace", namespace)
    assert old is not None
    bed.delete("v1", "Namespace", namespace)  # Terminating: the API server refuses anything new in it from now on
    kinds = bed.namespaced_resources()
    left: list[str] = []

    def emptied() -> bool | None:
        left.clear()
        for info in kinds:
            bed.http.delete(info.path(None, namespace))  # a deletecollection; 405 where a kind has none
            listed = bed.http.get(info.path(None, namespace))
            for obj in listed.json().get("items") or [] if listed.status_code == 200 else []:
                left.append(f"{info.kind} {obj['metadata']['name']} {obj['metadata'].get('finalizers') or ''}")
                _finalize_as_kubernetes(bed, info.path(obj["metadata"]["name"], namespace), obj)
        return True if not left else None
    wait_showing("every object of the deleted namespace gone", emptied, timeout, lambda: left, "left")
    finalized = bed.http.put(f"/api/v1/namespaces/{namespace}/finalize", json={
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}, "spec": {"finalizers": []}})
    assert finalized.status_code == 200, finalized.text
    wait("the namespace gone", lambda: bed.get("v1", "Namespace", namespace) is None or None, timeout)
    bed.ensure_namespace(namespace)
    made = bed.get("v1", "Namespace", namespace)
    assert made is not None and made["metadata"]["uid"] != old["metadata"]["uid"]
    return str(made["metadata"]["uid"])


def _finalize_as_kubernetes(bed: KubeTestBed, path: str, obj: dict[str, Any]) -> None:
    """What kube-controller-manager does for a deleted object (the bare API server runs none): its `kubernetes.io/`
    finalizers removed (a PVC's pvc-protection); anyone else's (a claim's, the operator's) are theirs to remove."""
    finalizers = obj["metadata"].get("finalizers") or []
    kept = [f for f in finalizers if not f.startswith("kubernetes.io/")]
    if obj["metadata"].get("deletionTimestamp") and kept != finalizers:
        bed.http.patch(path, content=json.dumps({"metadata": {"finalizers": kept,
                                                              "resourceVersion": obj["metadata"]["resourceVersion"]}}),
                       headers={"Content-Type": "application/merge-patch+json"})


def gc_deletes_children(bed: KubeTestBed, operator: Operator, ns: str, uid: str, name: str = "demo") -> None:
    """What the garbage collector does after a background delete (the test bed runs none): the children owned
    by the deleted Application go. The collector never stops, so it also takes a child the operator's last pass
    of the Application applied after the delete (that pass read the Application just before it went); this
    one-shot stand-in waits for the operator to say the Application is gone (no pass of it comes after that)."""
    def gone_logged() -> bool | None:
        for line in operator.log().splitlines():
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if (entry.get("msg"), entry.get("controller"), entry.get("namespace"), entry.get("object")) == (
                        "gone", "application", ns, name):
                    return True
        return None

    wait(f"the operator's last pass of {ns}/{name}", gone_logged)
    for (kind, child), obj in children(bed, ns, f"{name}-prod").items():
        if any(ref["uid"] == uid for ref in obj["metadata"].get("ownerReferences") or []):
            bed.delete(obj["apiVersion"], kind, child, ns)
