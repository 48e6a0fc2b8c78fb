"""lifecycle.private_images alone (pure; tests/reconciler/test_sourcecredential_cluster.py proves it through the
operator): a container whose image lies under a host a SourceCredential covers pulls every time, in any namespace."""

from __future__ import annotations

from typing import Any

from lifecycle.private_images import private_hosts, pull_always


def deployment(*images: str) -> dict[str, Any]:
    return {"kind": "Deployment", "metadata": {"name": "demo"},
            "spec": {"template": {"spec": {"containers": [{"name": f"c{i}", "image": image}
                                                          for i, image in enumerate(images)]}}}}


def test_private_images_pull_every_time_public_ones_as_before() -> None:
    credentials = [{"metadata": {"name": "scoped", "namespace": "apprafter-system"},
                    "spec": {"registry": {"hosts": ["registry.example/team/"], "namespaces": ["team-a"],
                                          "backend": {"sealedSecretRef": {"name": "x"}}}}}]
    hosts = private_hosts(credentials)
    assert hosts == ("registry.example/team",)
    given = [deployment("registry.example/team/app:1", "docker.io/library/nginx:1"), {"kind": "Service"}]
    [changed, service] = pull_always(given, hosts)
    policies = [c.get("imagePullPolicy") for c in changed["spec"]["template"]["spec"]["containers"]]
    assert policies == ["Always", None] and service == {"kind": "Service"}
    assert "imagePullPolicy" not in given[0]["spec"]["template"]["spec"]["containers"][0]  # a copy was changed
    assert pull_always([deployment("registry.example/teamx/app:1")], hosts)[0] == deployment(
        "registry.example/teamx/app:1")  # path component by component
    assert pull_always(given, ()) == given
