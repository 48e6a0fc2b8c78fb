"""Hostnames belong to tenants, at the door (issue 34): through the real API server, a tenant's Application asking for
the platform's names, another app's default name, or a name no HostnamePolicy grants its namespace is refused by the
webhook with HostnameNotAllowed (the operator says the same: tests/reconciler/test_tenant_cluster.py); a policy a
cluster administrator writes is read by the webhook as it changes; a policy that does not read is refused."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lifecycle import hostname_policy
from tests.admission.cluster import Webhook, apply, eventually, fresh_namespace, message, ok
from tests.admission.reviews import API, EDITOR, parser_cr
from tests.testbed.kube import KubeTestBed

pytestmark = pytest.mark.testbed

APPS = 'admission webhook "applications.apprafter.io" denied the request'
POLICIES = 'admission webhook "hostnamepolicies.apprafter.io" denied the request'


def public(namespace: str, hostname: str | None = None, name: str = "parser") -> dict[str, Any]:
    """The parser example made public in prod (with `hostname`, else its default one)."""
    cr = parser_cr(namespace)
    cr["metadata"]["name"] = name
    expose = cr["spec"]["environments"]["prod"]["expose"]
    expose["network"] = "public"
    cr["spec"]["base"]["expose"].pop("hostname", None)
    cr["spec"]["base"]["expose"].pop("sticky", None)  # refused on a public app (no Gateway carries it)
    if hostname:
        expose["hostname"] = hostname
    return cr


def policy(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "HostnamePolicy", "metadata": {"name": name}, "spec": spec}


@pytest.fixture()
def policies(admission_bed: KubeTestBed) -> Iterator[list[str]]:
    """Names of the HostnamePolicies the test makes (deleted after it)."""
    made: list[str] = []
    yield made
    for name in made:
        admission_bed.delete(API, "HostnamePolicy", name)


@pytest.mark.parametrize(("hostname", "said"), [
    ("argocd.apps.example.com", "argocd.apps.example.com is the platform's own"),
    ("metrics.grafana.apps.example.com", "is the platform's own (grafana.apps.example.com)"),
    ("cart.prod.apps.example.com", "is the default name of app cart in environment prod"),
    ("parser.example.org", "no HostnamePolicy lets namespace"),
])
def test_a_hostname_the_namespace_may_not_use_is_refused(admission_bed: KubeTestBed, webhook: Webhook,
                                                         hostname: str, said: str) -> None:
    ns = fresh_namespace(admission_bed)
    with admission_bed.as_user(EDITOR) as tenant:
        text = message(apply(tenant, admission_bed, public(ns, hostname)))
        assert APPS in text and "spec.environments.prod.expose.hostname: HostnameNotAllowed: " in text, text
        assert said in text, text
        assert ok(apply(tenant, admission_bed, public(ns)))["spec"]["environment"] == "prod"  # its default name


def test_a_policy_grants_hostnames_and_app_names_as_it_changes(admission_bed: KubeTestBed, webhook: Webhook,
                                                               policies: list[str]) -> None:
    bed = admission_bed
    mine, theirs = fresh_namespace(bed, "mine"), fresh_namespace(bed, "theirs")
    with bed.as_user(EDITOR) as tenant:
        wanted = public(mine, "shop.team-mine.example")
        assert "no HostnamePolicy lets namespace" in message(apply(tenant, bed, wanted, dry_run=True))
        policies.append("team-mine")
        grants = {"allowedRegex": r"[a-z]+\.team-mine\.example"}
        bed.apply(policy("team-mine", namespaces=[mine], allowedHostnames=grants, apps={"allowed": ["parser"]}))
        eventually("the webhook to read the policy", lambda: apply(tenant, bed, wanted, dry_run=True).status_code
                   < 300 or None)
        elsewhere = public(theirs, "shop.team-mine.example")
        assert "no HostnamePolicy lets namespace" in message(apply(tenant, bed, elsewhere))
        # the app name is now the namespace's: its default name elsewhere is refused, here it is allowed
        text = message(apply(tenant, bed, public(theirs)))
        assert ("metadata.name: HostnameNotAllowed: parser.prod.apps.example.com is the default name of app parser"
                in text), text
        assert ok(apply(tenant, bed, public(mine)))["metadata"]["namespace"] == mine
        # withdrawn: the webhook refuses again (what was admitted stays; the operator refuses it at its next pass)
        bed.delete(API, "HostnamePolicy", "team-mine")
        eventually("the webhook to see it gone", lambda: "no HostnamePolicy" in apply(
            tenant, bed, wanted, dry_run=True).text or None)


def test_a_policy_that_does_not_read_is_refused(admission_bed: KubeTestBed, webhook: Webhook,
                                                policies: list[str]) -> None:
    bad = policy("bad-regex", allNamespaces=True, allowedHostnames={"allowedRegex": "(unclosed"})
    text = message(admission_bed.http.post(admission_bed.resource_for(API, "HostnamePolicy").path(None, None),
                                           json=bad))
    assert POLICIES in text and "spec.allowedHostnames.allowedRegex: is not a regular expression" in text
    both = copy.deepcopy(bad)
    both["spec"] = {"allNamespaces": True, "namespaces": ["a"]}
    assert "one of the two" in message(admission_bed.http.post(
        admission_bed.resource_for(API, "HostnamePolicy").path(None, None), json=both))


def test_the_webhook_judges_hostnames_under_the_domain_it_is_given(tmp_path: Path) -> None:
    """`--domain` (the chart passes the operator's): an app's own default name under it is allowed, the platform's
    names under it are the platform's, and the default domain's names mean nothing (the webhook once had no such
    flag and judged every cluster by apps.example.com)."""
    from tests.admission.reviews import body, review

    server = Webhook(tmp_path / "webhook", ("--domain", "apps.acme.dev"))
    server.start()
    try:
        def answer(hostname: str | None) -> dict[str, Any]:
            with server.client() as client:
                resp = client.post("/validate", content=body(review(public("team-a", hostname))), timeout=60)
            assert resp.status_code == 200, resp.text[:500]
            response: dict[str, Any] = resp.json()["response"]
            return response

        assert answer(None)["allowed"] is True
        assert answer("parser.prod.apps.acme.dev")["allowed"] is True  # its own default name, written out
        for hostname, said in (("argocd.apps.acme.dev", "argocd.apps.acme.dev is the platform's own"),
                               ("parser.prod.apps.example.com", "no HostnamePolicy lets namespace team-a")):
            refused = answer(hostname)
            assert refused["allowed"] is False, hostname
            assert f"{hostname_policy.NOT_ALLOWED}: " in refused["status"]["message"], refused
            assert said in refused["status"]["message"], refused
    finally:
        server.stop()
