"""The public API the reconciler and the admission webhook build on, and the one error tree."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

from toolchain.errors import AppRafterError

PACKAGES = ("apprafter", "toolchain", "controller_runtime", "renderer", "compatibility", "lifecycle", "platform_stack",
            "cmp", "admission", "reconciler")
ROOT = Path(__file__).resolve().parents[1]
# What the in-cluster edges call (docs/architecture.md): names and parameters are a contract.
CONTRACT = {
    "renderer.validate.check": ["app", "envs"],
    "renderer.effective.effective_spec": ["spec", "environment"],
    "renderer.render.render_loaded": ["app", "environment", "mode", "namespace", "context", "chosen_by"],
    "renderer.validate.check_deployment": ["app", "environment", "chosen_by"],
    "compatibility.application.deployment": ["document", "environment"],
    "compatibility.application.plan": ["before", "after", "domain"],
    "compatibility.migrationplan.migration_plan": ["plan", "owner_uid", "approvers"],
    "compatibility.plan.spec_hash": ["changes", "subject"],
    "compatibility.inputs.parse_cr": ["text", "display", "strict_json"],
    "platform_stack.credentials.parse_docker_config": ["text", "display"],
    "platform_stack.credentials.credential_for": ["configs", "host", "helpers"],
}


def modules() -> list[str]:
    names = []
    for package in PACKAGES:
        names.append(package)
        for info in pkgutil.walk_packages([str(ROOT / package)], prefix=f"{package}."):
            if not info.name.endswith(".__main__"):  # importing it runs the CLI
                names.append(info.name)
    return names


@pytest.mark.parametrize("dotted", sorted(CONTRACT))
def test_the_edges_contract_is_exported_with_its_parameters(dotted: str) -> None:
    module_name, _, name = dotted.rpartition(".")
    module = importlib.import_module(module_name)
    assert name in module.__all__
    assert list(inspect.signature(getattr(module, name)).parameters) == CONTRACT[dotted]


def test_every_exported_name_exists_and_every_package_is_typed() -> None:
    for name in modules():
        module = importlib.import_module(name)
        for exported in getattr(module, "__all__", ()):
            assert hasattr(module, exported), f"{name}.__all__ names {exported}, which it lacks"
    for package in PACKAGES:
        assert (ROOT / package / "py.typed").is_file()


# Errors outside the tree on purpose, each with why: none reaches the CLI (apprafter/errors.py prints the tree's), and
# each is Classified (controller_runtime.outcomes: its `retryable` decides Requeue or Terminal).
OUTSIDE_THE_TREE = {
    "reconciler.backend_failure.BackendFailure": "a platform-service backend's failure, raised inside a claim's "
                                                 "reconcile only; its reason is the claim's condition reason",
}


def test_every_error_we_raise_is_in_the_one_tree() -> None:
    outside = []
    for name in modules():
        for _, cls in inspect.getmembers(importlib.import_module(name), inspect.isclass):
            if cls.__module__ == name and issubclass(cls, BaseException) and not issubclass(cls, AppRafterError):
                outside.append(f"{name}.{cls.__name__}")
                # what controller_runtime.outcomes.Classified asks of it
                assert isinstance(getattr(cls, "retryable", None), property), f"{outside[-1]} is not Classified"
    assert sorted(outside) == sorted(OUTSIDE_THE_TREE)
