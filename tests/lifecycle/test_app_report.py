"""lifecycle.app_report: what `apprafter app status` says of one environment, from the objects as read."""

from __future__ import annotations

from typing import Any

from lifecycle.app_report import report

ARGO = {"metadata": {"name": "shop-prod"},
        "status": {"sync": {"status": "Synced", "revision": "0123456789abcdef"}, "health": {"status": "Progressing"}}}


def _claim(name: str, ready: bool, reason: str = "", message: str = "") -> dict[str, Any]:
    conditions = [{"type": "Bound", "status": "True", "reason": "Bound", "message": "ok"}]
    if not ready:
        conditions.append({"type": "Ready", "status": "False", "reason": reason, "message": message})
    return {"metadata": {"name": name}, "spec": {"type": name.split("-")[-1]},
            "status": {"ready": ready, "conditions": conditions}}


def _app(phase: str, reason: str = "", message: str = "", status: str = "False") -> dict[str, Any]:
    return {"status": {"phase": phase, "url": "https://shop.acme.example", "replicas": {"ready": 1, "desired": 3},
                       "conditions": [{"type": "Ready", "status": status, "reason": reason, "message": message}]}}


def _plan(name: str, app: str, env: str, phase: str, created: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "shop-prod", "creationTimestamp": created},
            "spec": {"scope": {"type": "application", "application": {"ref": {"name": app}, "environment": env}},
                     "risks": {"classification": "data-migration"}},
            "status": {"phase": phase}}


def test_a_waiting_claim_is_the_problem_and_every_claim_is_listed() -> None:
    r = report("shop", "prod", "shop-prod", ARGO, _app("Pending", "WaitingForClaims", "no workload"),
               [_claim("shop-redis", True), _claim("shop-pg", False, "Provisioning", "the Cluster is\n  starting")],
               [], [], [])
    assert [(c.name, c.ready, c.why) for c in r.claims] == [
        ("shop-pg", False, "Provisioning: the Cluster is starting"), ("shop-redis", True, "")]
    assert r.problem == "WaitingForClaims: no workload"  # the Application's own word comes first while Pending
    assert (r.sync, r.health, r.revision, r.phase, r.replicas) == ("Synced", "Progressing", "0123456789ab",
                                                                   "Pending", "1/3")


def test_a_progressing_app_names_the_claim_that_waits() -> None:
    r = report("shop", "prod", "shop-prod", ARGO, _app("Progressing", "Progressing", "rolling out"),
               [_claim("shop-pg", False, "Provisioning", "starting")], [], [], [])
    assert r.problem == "claim shop-pg not ready: Provisioning: starting"


def test_only_this_apps_pending_plans_are_listed_oldest_first_with_their_approve_command() -> None:
    plans = [_plan("shop-prod-b", "shop", "prod", "pending-approval", "2026-12-07T02:00:00Z"),
             _plan("shop-prod-a", "shop", "prod", "pending-approval", "2026-12-07T01:00:00Z"),
             _plan("shop-prod-c", "shop", "prod", "applied", "2026-12-07T00:00:00Z"),
             _plan("cart-prod-a", "cart", "prod", "pending-approval", "2026-12-07T00:00:00Z"),
             _plan("shop-staging-a", "shop", "staging", "pending-approval", "2026-12-07T00:00:00Z")]
    r = report("shop", "prod", "shop-prod", ARGO, _app("Ready", "Ready", "ok", "True"), [], [], [], plans)
    assert [(p.name, p.approve) for p in r.plans] == [
        ("shop-prod-a", "apprafter migration approve shop-prod-a -n shop-prod"),
        ("shop-prod-b", "apprafter migration approve shop-prod-b -n shop-prod")]
    assert r.problem == ""


def test_hostnames_carry_their_certificates_state() -> None:
    routes = [{"spec": {"hostnames": ["shop.acme.example", "www.acme.example"]}}]
    certs = [{"spec": {"dnsNames": ["shop.acme.example"]},
              "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Issuing",
                                         "message": "HTTP-01 challenge pending"}]}}]
    r = report("shop", "prod", "shop-prod", ARGO, _app("Ready", "Ready", "ok", "True"), [], routes, certs, [])
    assert [tuple(h) for h in r.hostnames] == [
        ("shop.acme.example", "not issued: Issuing: HTTP-01 challenge pending"), ("www.acme.example", "")]


def test_argo_cds_render_error_is_what_the_plugin_said_and_comes_first() -> None:
    argo = {"metadata": {"name": "shop-prod"}, "status": {"conditions": [{"type": "ComparisonError", "message": (
        "Failed to load target state: rpc error: code = Unknown desc = `apprafter cmp generate` failed exit status 1:"
        " apprafter/Application.cue:7:17: spec.base.expose.port: invalid value 70000")}]}}
    r = report("shop", "prod", "shop-prod", argo, _app("Failed", "InvalidSpec", "x"), [], [], [], [])
    assert r.problem == ("Argo CD cannot render it: apprafter/Application.cue:7:17: spec.base.expose.port: invalid "
                         "value 70000")
    assert (r.sync, r.health, r.revision) == ("-", "-", "")


def test_a_missing_namespace_and_a_missing_argo_cd_application_are_said() -> None:
    assert report("shop", "prod", "shop-prod", ARGO, None, [], [], [], [], namespace_missing=True).problem == (
        "the namespace does not exist: a platform administrator creates it (docs/user-guide.md)")
    assert report("shop", "prod", "shop-prod", None, None, [], [], [], []).problem == (
        "no Argo CD Application: `apprafter app add` registers it")
    long = report("shop", "prod", "shop-prod", ARGO, _app("Failed", "CrashLoop", "x" * 500), [], [], [], [])
    assert len(long.problem) == 240 and long.problem.endswith("…")


def test_a_rotation_under_way_is_said_on_its_claim_and_a_completed_one_is_not() -> None:
    rotating = _claim("shop-redis", True)
    rotating["status"]["rotation"] = {"requested": "r2", "issued": "r2", "completed": "r1",
                                      "message": "request r2: the new password is in Secret shop-redis-conn; waiting "
                                                 "for 1 pod(s) started with the old one to be replaced: shop-abc"}
    done = _claim("shop-pg", True)
    done["status"]["rotation"] = {"requested": "r1", "issued": "r1", "completed": "r1",
                                  "message": "request r1: rotated"}
    r = report("shop", "prod", "shop-prod", ARGO, _app("Ready", "Ready", "ok", "True"), [rotating, done], [], [], [])
    assert [(c.name, c.rotation) for c in r.claims] == [
        ("shop-pg", ""), ("shop-redis", rotating["status"]["rotation"]["message"])]
    assert r.as_json()["claims"][1]["rotation"].endswith("to be replaced: shop-abc")
