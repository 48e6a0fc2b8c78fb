"""`apprafter db rotate` against the real API server, without an operator (the test writes what the claim's provider
would): the app's namespace found from its Application of that environment, the request written on the need's claim
in the form the webhook takes, the wait for status.rotation to say it is completed (or the operator's silence, exit 2);
what it refuses, one line each. The operator's side: test_redis_cluster.py, test_pg_cluster.py."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compatibility.authority import ROTATE_ANNOTATION, ROTATE_REQUEST
from tests.reconciler.helpers import API, apply, cr, fresh_namespace, wait, write_status
from tests.renderer.helpers import APPRAFTER, run_cli
from tests.testbed.kube import PERSON, KubeTestBed

pytestmark = pytest.mark.testbed
PROVIDER = "apprafter-operator"  # who writes a claim's status here (the test, as the claim's provider would)


MADE: list[tuple[str, str]] = []  # (namespace, app) deployed by the test running


@pytest.fixture(autouse=True)
def removed(bed: KubeTestBed) -> Iterator[None]:
    """What a test deployed is deleted after it: no operator runs here, and the next module's, on the same API
    server, would take up the Applications and their claims."""
    MADE.clear()
    yield
    for namespace, app in MADE:
        bed.delete(API, "Application", app, namespace)
        bed.delete(API, "ResourceClaim", f"{app}-pg", namespace)


def deployed(bed: KubeTestBed, namespace: str, app: str, env: str = "prod") -> None:
    """What the operator leaves of APP's environment: its Application and its pg need's claim."""
    MADE.append((namespace, app))
    apply(bed, cr(namespace, name=app, env=env))
    # selecting no provider: another module's operator on the shared bed never binds (nor provisions) it
    bed.apply({"apiVersion": API, "kind": "ResourceClaim", "metadata": {"name": f"{app}-pg", "namespace": namespace},
               "spec": {"type": "pg", "selector": {"rotate-cli": "no-provider"}}}, field_manager="apprafter-operator")


def rotate(bed: KubeTestBed, app: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("db", "rotate", app, "--kubeconfig", str(bed.kubeconfig), *args)


def request_of(bed: KubeTestBed, namespace: str, claim: str) -> str:
    found = bed.get(API, "ResourceClaim", claim, namespace) or {}
    return str((found["metadata"].get("annotations") or {}).get(ROTATE_ANNOTATION))


def test_the_request_goes_on_the_needs_claim_of_the_apps_environment_and_the_command_waits_for_it(
        bed: KubeTestBed) -> None:
    app = f"rot-{uuid.uuid4().hex[:6]}"
    namespace, staging = fresh_namespace(bed, "rot"), fresh_namespace(bed, "rot")
    deployed(bed, namespace, app)
    deployed(bed, staging, app, "staging")  # another environment of the app, elsewhere: not this one's
    result = rotate(bed, app, "-e", "prod", "--need", "pg", "--timeout", "0")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    request = request_of(bed, namespace, f"{app}-pg")
    assert ROTATE_REQUEST.fullmatch(request)  # the form the webhook takes
    assert result.stdout == f"resourceclaim/{app}-pg: rotation {request} requested (namespace {namespace})\n"
    assert request_of(bed, staging, f"{app}-pg") == "None"

    # waited for: done once the claim's provider says so in status.rotation
    waiting = subprocess.Popen([*APPRAFTER, "db", "rotate", app, "-e", "staging", "--need", "pg", "--kubeconfig",
                                str(bed.kubeconfig)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        asked = wait("the request on the staging claim", lambda: r if (r := request_of(
            bed, staging, f"{app}-pg")) != "None" else None, 60)
        said = f"request {asked}: rotated; the old password is refused"
        write_status(bed, "ResourceClaim", f"{app}-pg", staging, {"rotation": {
            "requested": asked, "issued": asked, "completed": asked, "completedAt": "2026-12-08T10:00:00Z",
            "message": said}}, PROVIDER)
        out, err = waiting.communicate(timeout=60)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.communicate()
    assert waiting.returncode == 0, err
    assert out.splitlines()[-1] == f"resourceclaim/{app}-pg: {said}"


def test_without_an_answer_it_says_where_the_rotation_stands_and_exits_2(bed: KubeTestBed) -> None:
    app, namespace = f"rot-{uuid.uuid4().hex[:6]}", fresh_namespace(bed, "rot")
    deployed(bed, namespace, app)
    result = rotate(bed, app, "-e", "prod", "--need", "pg", "-n", namespace, "--timeout", "1")
    assert result.returncode == 2
    assert f"resourceclaim/{app}-pg: rotation {request_of(bed, namespace, f'{app}-pg')} not completed within 1s" \
        in result.stderr and "is the operator running?" in result.stderr


def test_what_it_refuses_is_one_line_exit_1(bed: KubeTestBed, tmp_path: Path) -> None:
    app, namespace, other = f"rot-{uuid.uuid4().hex[:6]}", fresh_namespace(bed, "rot"), fresh_namespace(bed, "rot")
    for where in (namespace, other):
        deployed(bed, where, app)
    person = bed.kubeconfig_for(tmp_path / "person.yaml", bed.user_tokens[PERSON], PERSON)  # no role at all
    cases: list[tuple[list[str], str]] = [
        (["-e", "prod", "--need", "pg"], f"app/{app}: Applications {app} of environment prod run in several "
                                         f"namespaces ({', '.join(sorted((namespace, other)))}): pass -n NAMESPACE"),
        (["-e", "dev", "--need", "pg"], f"app/{app}: no Application {app} of environment dev in any namespace"),
        (["-e", "prod", "--need", "redis", "-n", namespace],
         f"app/{app}: {app} has no need redis in environment prod (no ResourceClaim {namespace}/{app}-redis)"),
        (["-e", "prod", "--need", "disk", "-n", namespace], "Invalid value for '--need'"),
        (["-e", "prod", "--need", "pg", "-n", namespace, "--kubeconfig", str(person)],
         f"app/{app}: refused by the cluster: "),
    ]
    for args, said in cases:
        result = rotate(bed, app, *args)
        assert result.returncode == 1 and result.stdout == "" and said in result.stderr, (args, result.stderr)
    assert request_of(bed, namespace, f"{app}-pg") == "None"  # nothing was asked


def test_a_claim_with_a_status_keeps_it(bed: KubeTestBed) -> None:
    """The request is a metadata write: the claim's status (its provider's) is left as it was."""
    app, namespace = f"rot-{uuid.uuid4().hex[:6]}", fresh_namespace(bed, "rot")
    deployed(bed, namespace, app)
    kept: dict[str, Any] = {"ready": True, "rotation": {"requested": "earlier", "completed": "earlier"}}
    write_status(bed, "ResourceClaim", f"{app}-pg", namespace, kept, PROVIDER)
    assert rotate(bed, app, "-e", "prod", "--need", "pg", "-n", namespace, "--timeout", "0").returncode == 0
    assert (bed.get(API, "ResourceClaim", f"{app}-pg", namespace) or {})["status"] == kept
