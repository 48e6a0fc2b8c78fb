"""Which Secrets an app's env may name (lifecycle.secrets): a grant by the Secret's writer, or its own claim's
connection Secret as the claim wrote it (issue 41: a Secret of that name someone else wrote is not the claim's)."""

from __future__ import annotations

from typing import Any

from lifecycle.secrets import GRANT_ANNOTATION, granted, refused

SPEC = {"needs": {"pg": {}}, "env": {"PW": {"secret": "demo-pg-conn/password"}}}


def owned_by(kind: str, name: str, controller: bool = True, api: str = "apprafter.io/v1alpha1") -> dict[str, Any]:
    return {"name": "demo-pg-conn", "ownerReferences": [{"apiVersion": api, "kind": kind, "name": name,
                                                         "uid": "u", "controller": controller}]}


def test_a_claims_connection_secret_is_given_as_its_claim_wrote_it_or_before_it_exists() -> None:
    assert granted("demo", SPEC, "demo-pg-conn", owned_by("ResourceClaim", "demo-pg"))
    assert granted("demo", SPEC, "demo-pg-conn", None)  # the claim writes it; no pod runs before the claim is ready
    assert refused("demo", "shop", SPEC, {"demo-pg-conn": owned_by("ResourceClaim", "demo-pg")}) is None


def test_a_secret_named_as_a_claims_that_the_claim_did_not_write_is_not_given() -> None:
    for foreign in ({"name": "demo-pg-conn"}, owned_by("ResourceClaim", "demo-redis"),
                    owned_by("ResourceClaim", "demo-pg", controller=False), owned_by("Deployment", "demo-pg"),
                    owned_by("ResourceClaim", "demo-pg", api="example.com/v1")):
        assert not granted("demo", SPEC, "demo-pg-conn", foreign), foreign
        said = refused("demo", "shop", SPEC, {"demo-pg-conn": foreign})
        assert said is not None and said.startswith(
            "env secret references to Secrets not granted to this Application: demo-pg-conn (named as this app's "
            "claim's connection Secret, but not written by the claim)")
    # the need gone, the name is any Secret's: granted by its writer only
    assert not granted("demo", {}, "demo-pg-conn", owned_by("ResourceClaim", "demo-pg"))
    # its writer may still grant it on purpose
    assert granted("demo", SPEC, "demo-pg-conn", {"annotations": {GRANT_ANNOTATION: "demo"}})


def test_another_apps_claim_secret_is_not_given() -> None:
    other = {"needs": {"pg": {}}, "env": {"PW": {"secret": "billing-pg-conn/password"}}}
    assert not granted("demo", other, "billing-pg-conn", owned_by("ResourceClaim", "billing-pg"))
    assert refused("demo", "shop", other, {"billing-pg-conn": None}) is not None
