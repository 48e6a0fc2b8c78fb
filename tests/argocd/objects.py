"""The objects Argo CD sees: our plugin's Application CR (the real renderer) and MigrationPlans the real
classifier builds, plus the statuses the operator writes (meta/v1 conditions)."""

from __future__ import annotations

import copy
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from compatibility.application import deployment, plan
from compatibility.migrationplan import migration_plan
from compatibility.plan import Plan
from renderer.load import load
from renderer.render import render_loaded

# The app the loop deploys and the health checks read: two environments, nothing that needs a provider.
HELLO = '''apiVersion: "apprafter.io/v1alpha1"
kind:       "Application"
metadata: name: "hello"
spec: {
	base: {
		image: "ghcr.io/acme/hello:1.0.0"
		replicas: 2
		expose: {port: 8080, network: "internal"}
		env: LOG_LEVEL: "info"
	}
	environments: {
		staging: replicas: 1
		prod: replicas: 3
	}
}
'''
APP_FILE = "apprafter/Application.cue"
# The loop's commits to HELLO, in order: a soft change; a gated change (image repository, AR-SB008) approved with
# the CLI; a gated change (scale to zero, AR-RR003) approved with Argo CD's Approve action.
SCALED = HELLO.replace("prod: replicas: 3", "prod: replicas: 4")
NEXT_REPOSITORY = SCALED.replace('"ghcr.io/acme/hello:1.0.0"', '"ghcr.io/acme/hello-next:2.0.0"')
TO_ZERO = NEXT_REPOSITORY.replace("prod: replicas: 4", "prod: replicas: 0")
# Argo CD Applications of the loop, each syncing into the namespace of its name (the operator's instance label).
PROD, STAGING = "hello-prod", "hello-staging"


def served(image: str, replicas: int = 2) -> str:
    """HELLO for the node tier: the test image (tests/testbed/testapp/) serving on 8080 behind an HTTP readiness
    probe, `replicas` in prod."""
    return f'''apiVersion: "apprafter.io/v1alpha1"
kind:       "Application"
metadata: name: "hello"
spec: {{
	base: {{
		image: "{image}"
		expose: {{port: 8080, network: "internal"}}
		env: {{MODE: "serve", MESSAGE: "hello"}}
		health: readiness: {{path: "/ready", periodSeconds: 1, failureThreshold: 1}}
	}}
	environments: {{
		staging: replicas: 1
		prod: replicas: {replicas}
	}}
}}
'''


def rendered_cr(text: str = HELLO, environment: str = "prod", namespace: str = "hello-prod") -> dict[str, Any]:
    """The Application CR our plugin emits for `text` (real cue, real renderer)."""
    with tempfile.TemporaryDirectory(prefix="apprafter-argocd-") as tmp:
        path = Path(tmp) / APP_FILE
        path.parent.mkdir()
        path.write_text(text)
        cr: dict[str, Any] = render_loaded(load(Path(tmp)), environment, "cr", namespace).objects[0]
    return cr


def in_cluster(obj: Mapping[str, Any], generation: int = 1, status: Mapping[str, Any] | None = None,
               ) -> dict[str, Any]:
    """`obj` as the API server returns it: metadata.generation set, `status` (None: no status at all)."""
    out = copy.deepcopy(dict(obj))
    out["metadata"]["generation"] = generation
    out.pop("status", None)
    if status is not None:
        out["status"] = copy.deepcopy(dict(status))
    return out


def condition(type_: str, status: str, reason: str, message: str) -> dict[str, Any]:
    return {"type": type_, "status": status, "lastTransitionTime": "2026-11-30T12:00:00Z", "reason": reason,
            "message": message}


def app_status(phase: str | None, observed: int = 1, ready: tuple[str, str, str] | None = None,
               **extra: Any) -> dict[str, Any]:
    """Application.status: phase, observedGeneration, a Ready condition (status, reason, message), extras."""
    out: dict[str, Any] = {"observedGeneration": observed}
    if phase is not None:
        out["phase"] = phase
    if ready is not None:
        out["conditions"] = [condition("Ready", *ready)]
    return out | extra


def gated_plan(before: Mapping[str, Any], after: Mapping[str, Any], environment: str = "prod") -> Plan:
    """What the classifier (the one `apprafter plan` and the operator call) makes of before -> after."""
    return plan(deployment(before, environment), deployment(after, environment))


def plan_object(gated: Plan, status: Mapping[str, Any] | None = None, owner_uid: str | None = None,
                ) -> dict[str, Any]:
    """The MigrationPlan the operator creates for `gated`, with `status` (None: before the phase is set)."""
    return in_cluster(migration_plan(gated, owner_uid=owner_uid), 1, status)


def edited(cr: Mapping[str, Any], environment: str = "prod", **fields: Any) -> dict[str, Any]:
    """`cr` with fields of environments[environment] replaced."""
    out = copy.deepcopy(dict(cr))
    out["spec"]["environments"][environment].update(fields)
    return out


def with_base(cr: Mapping[str, Any], **fields: Any) -> dict[str, Any]:
    """`cr` with fields of spec.base replaced."""
    out = copy.deepcopy(dict(cr))
    out["spec"]["base"].update(fields)
    return out
