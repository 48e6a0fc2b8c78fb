"""What the node tier's backend tests share: an Application Ready at its generation, a pod finished, a client pod
that runs one shell script with an app's connection Secret as its environment, and a bounded request loop against an
app's Service (`request_loop`, `loop_result`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tests.testbed.procs import wait_for

if TYPE_CHECKING:
    from tests.testbed.node import NodeTestBed

LOOP_POD = "fresh-loop"
LOOP_SECONDS = 300  # the loop's bound: it stops by itself then, if no one stopped it before
# A request every 50 ms to the app's /fresh (tests/testbed/shopapp/: each request opens NEW connections to its
# backends, so a password refused at login shows at once), each on a new HTTP connection through the app's Service
# (whichever pod serves it), bounded by 5 s; every failure printed with its time, a count at the end. It runs until
# /tmp/stop exists or LOOP_SECONDS passed.
LOOP = """
import os, sys, time, urllib.error, urllib.request
url, started, sent, failed = sys.argv[1], time.monotonic(), 0, 0
while not os.path.exists("/tmp/stop") and time.monotonic() - started < float(sys.argv[2]):
    at = time.monotonic() - started
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            status, body = reply.status, reply.read().decode().strip()
    except urllib.error.HTTPError as exc:
        status, body = exc.code, exc.read().decode().strip()
    except OSError as exc:
        status, body = None, type(exc).__name__
    sent += 1
    if status != 200:
        failed += 1
        print(f"failed at {at:.2f} s: {status} {body}", flush=True)
    elif sent - failed == 1:
        print("answering", flush=True)
    time.sleep(0.05)
print(f"sent {sent}, failed {failed}", flush=True)
"""


def ready(obj: dict[str, Any]) -> Any:
    """The Application, once Ready at its current generation (else None: node.wait's probe)."""
    status = obj.get("status") or {}
    return obj if status.get("observedGeneration") == obj["metadata"]["generation"] and \
        status.get("phase") == "Ready" else None


def finished(obj: dict[str, Any]) -> Any:
    """The pod, once it ran to its end (either way)."""
    return obj if (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed") else None


def secret_env(secret: str, keys: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """Env variables (name, key) read from the keys of `secret`."""
    return [{"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}} for name, key in keys]


def client_pod(name: str, namespace: str, image: str, script: str, env: list[dict[str, Any]],
               uid: int) -> dict[str, Any]:
    """A pod that runs `script` once as `uid` (never restarted; no token, no service links)."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": {
        "restartPolicy": "Never", "automountServiceAccountToken": False, "enableServiceLinks": False,
        "containers": [{"name": "client", "image": image, "imagePullPolicy": "Never", "command": ["sh", "-c", script],
                        "env": env, "securityContext": {"runAsUser": uid, "allowPrivilegeEscalation": False}}]}}


def request_loop(node: NodeTestBed, namespace: str, image: str, url: str) -> None:
    """Start LOOP in a pod of `namespace` (an image with python3: the shop's) against `url`, and wait until the app
    answered it once."""
    pod = client_pod(LOOP_POD, namespace, image, 'exec python3 -c "$LOOP" "$URL" "$SECONDS_MAX"',
                     [{"name": "LOOP", "value": LOOP}, {"name": "URL", "value": url},
                      {"name": "SECONDS_MAX", "value": str(LOOP_SECONDS)}], 65532)
    node.apply(pod, field_manager="test")

    def answered() -> str | None:
        phase = ((node.get("v1", "Pod", LOOP_POD, namespace) or {}).get("status") or {}).get("phase")
        said = node.logs(LOOP_POD, namespace) if phase in ("Running", "Succeeded", "Failed") else ""
        assert phase in ("Pending", "Running"), f"the request loop ended at once: {said}"
        return said if "answering" in said else None
    wait_for(f"the request loop in {namespace} answered", answered, 120, interval=0.5)


def loop_result(node: NodeTestBed, namespace: str) -> list[str]:
    """Stop the loop (its stop file) and say what it printed: the failures, then `sent N, failed M`."""
    node.kubectl("exec", "-n", namespace, LOOP_POD, "-c", "client", "--", "touch", "/tmp/stop")
    node.wait("v1", "Pod", LOOP_POD, namespace, finished, timeout=60, what=f"the request loop in {namespace} ended")
    return [line for line in node.logs(LOOP_POD, namespace).splitlines() if line != "answering"]
