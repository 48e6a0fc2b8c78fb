"""The contract every backend passes (issue 39; crossplane-runtime's conformance tests are the model): a claim becomes
ready with its connection, reaches its own data and no other claim's, its data outlives the claim and comes back to
the same app and need, and is dropped only after a data-migration plan that removes the need is approved — the other
claim's data untouched. A backend's module (test_contract_<backend>.py) defines the fixture `contract` (a `Contract`:
how to write, read and look for a claim's data with the real backend), its providers and its operator, and imports
these tests."""

from __future__ import annotations

import base64
import json
import secrets
from contextlib import AbstractContextManager
from typing import Any, Protocol

from lifecycle.backends.common import CLAIM_ANNOTATION
from lifecycle.backends.kept import KEPT_FOR_ANOTHER, KEPT_LABELS
from lifecycle.backends.registry import core_for
from lifecycle.binding import PROVISIONED
from tests.reconciler.helpers import (
    API,
    apply,
    collect_garbage,
    collect_owned,
    condition,
    cr,
    edit,
    events,
    fresh_namespace,
    plans,
    remake_namespace,
    wait,
    wait_phase,
    wait_showing,
)
from tests.reconciler.operator_proc import Operator
from tests.renderer.helpers import run_cli
from tests.testbed.kube import KubeTestBed

__all__ = ["Contract", "Handle", "test_a_claim_is_ready_with_its_connection_and_reaches_its_own_data_alone",
           "test_a_namespace_made_anew_under_a_deleted_ones_name_gets_none_of_its_data",
           "test_deleting_the_provider_keeps_the_data_and_the_provider_made_again_serves_it",
           "test_removing_the_need_drops_the_data_only_after_approval_and_no_other_claims",
           "test_the_data_outlives_the_claim_and_comes_back_to_the_same_app_and_need"]

Handle = dict[str, Any]  # a claim as the contract sees it: its connection Secret's data, its status.connection


class Contract(Protocol):
    """A backend under the contract, through the real backend (or, where the backend is a controller that cannot
    run on this tier, its stand-in: `settled`)."""

    need: str  # the need type
    fields: frozenset[str] | None  # the connection Secret's keys (None: the need has no Secret, as disk)
    kept_apart: bool  # its data is kept outside the claim's namespace (and outlives the namespace)

    def needs(self) -> dict[str, Any]:
        """The test app's spec with this need, selecting the module's provider."""
        ...

    def write(self, claim: Handle, marker: str) -> None:
        """Put `marker` in the claim's data, as the claim (its own credentials)."""
        ...

    def read(self, claim: Handle) -> str | None:
        """The marker in the claim's data, as the claim (None: none there)."""
        ...

    def denied(self, claim: Handle, other: Handle) -> None:
        """Assert that `claim`'s credentials reach nothing of `other`'s data."""
        ...

    def dropped(self, claim: Handle) -> bool:
        """Whether the claim's data is gone from the backend (looked at as its administrator)."""
        ...

    def settled(self) -> AbstractContextManager[None]:
        """While a test runs: what plays the backend's own controller on this tier (nothing for most)."""
        ...


def handle(bed: KubeTestBed, namespace: str, contract: Contract) -> Handle:
    """The claim's Handle once it is ready (its connection Secret's data when the need has one)."""
    name = f"demo-{contract.need}"

    def ready() -> dict[str, Any] | None:
        st = (bed.get(API, "ResourceClaim", name, namespace) or {}).get("status") or {}
        return st if st.get("ready") is True else None
    st = wait_showing(f"{namespace}/{name} ready", ready, 90,
                      lambda: (bed.get(API, "ResourceClaim", name, namespace) or {}).get("status"), "claim status now")
    found: Handle = {"namespace": namespace, "status": st, "connection": st.get("connection") or {}}
    if contract.fields is not None:
        secret = bed.get("v1", "Secret", f"{name}-conn", namespace)
        assert secret is not None, f"no Secret {namespace}/{name}-conn"
        found["secret"] = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    return found


def marked(bed: KubeTestBed, contract: Contract) -> tuple[str, Handle, str]:
    """A fresh namespace's app with the need, its claim ready and a marker written in its data: (namespace, the
    claim's Handle, the marker)."""
    namespace = fresh_namespace(bed, f"ct-{contract.need}")
    apply(bed, cr(namespace, contract.needs()))
    ready = handle(bed, namespace, contract)
    marker = secrets.token_hex(8)
    contract.write(ready, marker)
    return namespace, ready, marker


def two_ready(bed: KubeTestBed, contract: Contract) -> tuple[Handle, Handle]:
    namespaces = [fresh_namespace(bed, f"ct-{contract.need}") for _ in range(2)]
    for namespace in namespaces:
        apply(bed, cr(namespace, contract.needs()))
    first, second = (handle(bed, n, contract) for n in namespaces)
    return first, second


def test_a_claim_is_ready_with_its_connection_and_reaches_its_own_data_alone(
        bed: KubeTestBed, operator: Operator, contract: Contract) -> None:
    with contract.settled():
        a, b = two_ready(bed, contract)
    for claim in (a, b):
        assert (condition(claim["status"], "Ready") or {}).get("reason") == "Provisioned", claim["status"]
        if contract.fields is not None:
            assert set(claim["secret"]) == contract.fields
            assert claim["connection"]["secretName"] == f"demo-{contract.need}-conn"
            # status.connection says where, never with what: no value of the Secret that holds the password
            shown = json.dumps(claim["status"])
            password = claim["secret"]["password"]
            assert not [k for k, v in claim["secret"].items() if password in v and v in shown]
    marks = {claim["namespace"]: secrets.token_hex(8) for claim in (a, b)}
    for claim in (a, b):
        contract.write(claim, marks[claim["namespace"]])
    assert [contract.read(a), contract.read(b)] == [marks[a["namespace"]], marks[b["namespace"]]]
    contract.denied(a, b)
    contract.denied(b, a)
    if contract.fields is not None:
        log = operator.log()
        assert a["secret"]["password"] not in log and b["secret"]["password"] not in log


def test_the_data_outlives_the_claim_and_comes_back_to_the_same_app_and_need(
        bed: KubeTestBed, operator: Operator, contract: Contract) -> None:
    name = f"demo-{contract.need}"
    with contract.settled():
        namespace, _, marker = marked(bed, contract)
        old = bed.get(API, "ResourceClaim", name, namespace) or {}
        # the claim goes; the Application is still there, so its claim comes back
        bed.delete(API, "ResourceClaim", name, namespace)
        wait("the claim made anew", lambda: (bed.get(API, "ResourceClaim", name, namespace) or {}).get(
            "metadata", {}).get("uid") not in (None, old["metadata"]["uid"]) or None, 60)
        # the old claim's Secret goes as the garbage collector removes it on a cluster (the bare API server runs
        # none): only now, once the old claim is gone and nothing of it can write it again
        collect_garbage(bed, "Secret", f"{name}-conn", namespace, old["metadata"]["uid"])
        after = handle(bed, namespace, contract)
    assert not contract.dropped(after)
    assert contract.read(after) == marker
    wait("the DataRetained event", lambda: events(bed, namespace, "DataRetained") or None, 30)


def test_removing_the_need_drops_the_data_only_after_approval_and_no_other_claims(
        bed: KubeTestBed, operator: Operator, contract: Contract) -> None:
    with contract.settled():
        mine, theirs = two_ready(bed, contract)
        for claim in (mine, theirs):
            contract.write(claim, claim["namespace"])
        namespace = mine["namespace"]
        wait_phase(bed, namespace, "Ready", timeout=60)
        apply(bed, cr(namespace, edit(contract.needs(), needs=None, env={"LOG_LEVEL": "info"})))
        wait_phase(bed, namespace, "AwaitingMigrationApproval", timeout=60)
        [plan] = plans(bed, namespace)
        assert not contract.dropped(mine)  # held: nothing dropped while the plan waits
        result = run_cli("migration", "approve", plan["metadata"]["name"], "-n", namespace, "--kubeconfig",
                         str(bed.kubeconfig))
        assert result.returncode == 0, result.stderr
        wait("the claim gone", lambda: bed.get(API, "ResourceClaim", f"demo-{contract.need}", namespace) is None
             or None, 90)
    assert contract.dropped(mine)
    assert not contract.dropped(theirs) and contract.read(theirs) == theirs["namespace"]
    [note] = wait("the DataDropped event", lambda: events(bed, namespace, "DataDropped") or None, 30)
    assert plan["metadata"]["name"] in note["note"]


def _missing(bed: KubeTestBed, namespace: str, name: str) -> None:
    wait_showing(f"{namespace}/{name} to say its provider is missing", lambda: True if (condition(
        (bed.get(API, "ResourceClaim", name, namespace) or {}).get("status") or {}, "Bound") or {}).get(
        "reason") == "ProviderMissing" else None, 60,
        lambda: (bed.get(API, "ResourceClaim", name, namespace) or {}).get("status"), "the claim now")


def test_deleting_the_provider_keeps_the_data_and_the_provider_made_again_serves_it(
        bed: KubeTestBed, operator: Operator, contract: Contract) -> None:
    """A ServiceProvider deleted takes none of its claims' data: each claim stays bound to it (ProviderMissing, never
    moved), nothing at the backend is the provider's (the garbage collector, played, finds nothing it owns), the
    connection Secret stays as it was and the app's credentials still reach its data. A need removed meanwhile under
    an approved plan: its drop waits for the provider (DataDropWaiting, nothing dropped) where only the provider says
    where the data is, and goes at once where the claim says it (a disk's PVC: `drop_needs_provider`). Made again
    under its name, the provider serves the kept claim again, ready, with the same data and credentials, and carries
    out the drop that waited."""
    name = f"demo-{contract.need}"
    core = core_for(contract.need, None)
    assert core is not None
    with contract.settled():
        namespace, before, marker = marked(bed, contract)
        going, doomed, _ = marked(bed, contract)
        wait_phase(bed, going, "Ready", timeout=60)  # applied: the need's removal is gated against it
        bound = before["status"]["provider"]
        provider = bed.get(API, "ServiceProvider", bound)
        assert provider is not None
        secret = bed.get("v1", "Secret", f"{name}-conn", namespace)
        try:
            bed.delete(API, "ServiceProvider", bound)
            for where in (namespace, going):
                _missing(bed, where, name)
            assert collect_owned(bed, provider["metadata"]["uid"]) == []  # nothing of the data is the provider's
            claim = bed.get(API, "ResourceClaim", name, namespace) or {}
            assert claim["status"]["provider"] == bound  # a claim never moves: its data is there
            if secret is not None:
                now = bed.get("v1", "Secret", f"{name}-conn", namespace) or {}
                assert now.get("data") == secret["data"]  # the app's pods keep what they hold
            assert not contract.dropped(before) and contract.read(before) == marker
            # the other app's need removed and its plan approved while the provider is gone
            apply(bed, cr(going, edit(contract.needs(), needs=None, env={"LOG_LEVEL": "info"})))
            wait_phase(bed, going, "AwaitingMigrationApproval", timeout=60)
            [plan] = plans(bed, going)
            approved = run_cli("migration", "approve", plan["metadata"]["name"], "-n", going, "--kubeconfig",
                               str(bed.kubeconfig))
            assert approved.returncode == 0, approved.stderr
            if core.drop_needs_provider:
                [note] = wait("the DataDropWaiting event", lambda: events(bed, going, "DataDropWaiting") or None, 60)
                assert f"its ServiceProvider {bound} is gone" in note["note"], note
                assert not contract.dropped(doomed)
                assert bed.get(API, "ResourceClaim", name, going) is not None  # terminating, its finalizer held
            else:
                wait("the claim gone", lambda: bed.get(API, "ResourceClaim", name, going) is None or None, 60)
                assert contract.dropped(doomed)
        finally:
            if bed.get(API, "ServiceProvider", bound) is None:  # the module's other tests use it
                meta = provider["metadata"]
                bed.apply({"apiVersion": provider["apiVersion"], "kind": provider["kind"], "spec": provider["spec"],
                           "metadata": {"name": meta["name"], "labels": meta.get("labels") or {}}},
                          field_manager="admin")
        after = handle(bed, namespace, contract)
        bound_again = condition(after["status"], "Bound") or {}
        assert (after["status"]["provider"], bound_again.get("status")) == (bound, "True"), after["status"]
        wait("the dropped claim gone", lambda: bed.get(API, "ResourceClaim", name, going) is None or None, 90)
    assert contract.read(after) == marker and contract.read(before) == marker  # the credentials the pods hold too
    assert contract.dropped(doomed)
    [dropped] = wait("the DataDropped event", lambda: events(bed, going, "DataDropped") or None, 30)
    assert plan["metadata"]["name"] in dropped["note"]


def _provisioned(bed: KubeTestBed, namespace: str, name: str) -> dict[str, Any]:
    return condition((bed.get(API, "ResourceClaim", name, namespace) or {}).get("status") or {}, PROVISIONED) or {}


def _record(bed: KubeTestBed, namespace: str, name: str) -> dict[str, Any]:
    """The record of whose the claim's kept data is, wherever its backend keeps it (lifecycle.backends.kept)."""
    selector = ",".join(f"{k}={v}" for k, v in KEPT_LABELS.items())
    listed = bed.http.get("/api/v1/secrets", params={"labelSelector": selector})
    assert listed.status_code == 200, listed.text
    [record] = [s for s in listed.json()["items"]
                if (s["metadata"].get("annotations") or {}).get(CLAIM_ANNOTATION) == f"{namespace}/{name}"]
    return dict(record)


def test_a_namespace_made_anew_under_a_deleted_ones_name_gets_none_of_its_data(
        bed: KubeTestBed, operator: Operator, contract: Contract) -> None:
    """Names are not identities (issue 41 item 4): data kept for a deleted namespace is not handed to a namespace
    made again under its name, nor dropped by it; an administrator gives it over by deleting its record."""
    name = f"demo-{contract.need}"
    with contract.settled():
        namespace, before, marker = marked(bed, contract)
        wait_phase(bed, namespace, "Ready", timeout=60)  # applied: its baseline outlives the namespace (the gate's)
        remake_namespace(bed, namespace)
        apply(bed, cr(namespace, contract.needs()))
        if not contract.kept_apart:  # it went with its namespace: the new one starts empty
            assert contract.read(handle(bed, namespace, contract)) is None
            return
        def refused_now() -> dict[str, Any] | None:
            said = _provisioned(bed, namespace, name)
            return said if said.get("reason") == KEPT_FOR_ANOTHER else None
        refused = wait_showing(f"{namespace}/{name} refused", refused_now, 60, lambda: (
            bed.get(API, "ResourceClaim", name, namespace) or {}).get("status") or (
            bed.get(API, "Application", "demo", namespace) or {}).get("status"), "the claim (or app) now")
        record = _record(bed, namespace, name)
        assert f"Secret {record['metadata']['namespace']}/{record['metadata']['name']}" in refused["message"]
        assert bed.get("v1", "Secret", f"{name}-conn", namespace) is None  # no credentials handed out
        # removing the need under an approved plan drops nothing of the deleted namespace's data
        apply(bed, cr(namespace, edit(contract.needs(), needs=None, env={"LOG_LEVEL": "info"})))
        wait_phase(bed, namespace, "AwaitingMigrationApproval", timeout=60)
        [plan] = plans(bed, namespace)
        approved = run_cli("migration", "approve", plan["metadata"]["name"], "-n", namespace, "--kubeconfig",
                           str(bed.kubeconfig))
        assert approved.returncode == 0, approved.stderr
        wait("the claim gone", lambda: bed.get(API, "ResourceClaim", name, namespace) is None or None, 90)
        [note] = wait("the DataRetained event", lambda: events(bed, namespace, "DataRetained") or None, 30)
        assert KEPT_FOR_ANOTHER not in note["note"] and "deleted earlier" in note["note"], note
        assert not contract.dropped(before) and contract.read(before) == marker
        # the administrator gives it to the namespace now of that name (the same team, making it again)
        bed.delete("v1", "Secret", record["metadata"]["name"], record["metadata"]["namespace"])
        apply(bed, cr(namespace, contract.needs()))
        after = handle(bed, namespace, contract)
    assert contract.read(after) == marker
    assert _record(bed, namespace, name)["metadata"]["uid"] != record["metadata"]["uid"]  # written for this one
