"""docs/operator.md stays true: every flag of `apprafter operator` and every phase and reason the operator
writes is documented there."""

from __future__ import annotations

import re

from apprafter.operator_cmd import operator
from lifecycle.health import POD_FAILURES
from tests.renderer.helpers import REPO

DOC = (REPO / "docs" / "operator.md").read_text()


def test_every_flag_is_documented() -> None:
    names = [opt for param in operator.params for opt in [*param.opts, *param.secondary_opts]]
    flags = {opt for opt in names if opt.startswith("--")}
    assert sorted(f for f in flags - {"--no-color"} if f not in DOC) == []  # every command's: docs/cli.md


def test_every_phase_and_reason_the_operator_writes_is_documented() -> None:
    source = (REPO / "lifecycle" / "application.py").read_text() + (REPO / "reconciler" / "application.py").read_text()
    written = set(re.findall(r'Condition\([A-Z_]+, "(?:True|False|Unknown)", "([A-Za-z]+)"', source))
    written |= set(re.findall(r'phase = "([A-Za-z]+)"', source)) | set(re.findall(r'Refusal\("([A-Za-z]+)"', source))
    written |= set(re.findall(r'"phase": "([A-Za-z]+)"', source)) | set(re.findall(r'Note\("([A-Za-z]+)"', source))
    written |= {w for pair in re.findall(r'\("([A-Za-z]+)", "([A-Za-z]+)"\)', source) for w in pair}
    # What the workload earns (lifecycle.health) and drift (lifecycle.drift): the Ready reasons and the Event (a
    # current child's own reason never reaches the status: a current workload is `Available`).
    health = (REPO / "lifecycle" / "health.py").read_text() + (REPO / "lifecycle" / "drift.py").read_text()
    written |= set(re.findall(r'ChildState\((?:FAILED|IN_PROGRESS), "([A-Za-z]+)"', health))
    written |= set(re.findall(r'Workload\(CURRENT, "([A-Za-z]+)"', health))
    written |= set(re.findall(r'Note\("([A-Za-z]+)"', health))
    written |= set(POD_FAILURES)
    assert written >= {"InvalidSpec", "InvalidStatus", "WaitingForClaims", "AwaitingMigrationApproval", "Applied",
                       "Progressing", "Retrying", "Failed", "ApplyFailed", "Available", "ProgressDeadlineExceeded",
                       "RouteNotAccepted", "CrashLoopBackOff", "OOMKilled", "DriftCorrected"}
    assert sorted(w for w in written if f"`{w}`" not in DOC) == []


PLATFORM_DOC = (REPO / "docs" / "platform-stack.md").read_text()


def test_every_reason_and_event_of_the_platformstack_controller_is_documented() -> None:
    written = set()
    for module in ("reconciler/platformstack.py", "reconciler/stack_sources.py", "lifecycle/platformstack.py",
                   "lifecycle/stack_inputs.py", "platform_stack/upstream.py", "platform_stack/check_result.py",
                   "reconciler/plans.py"):
        source = (REPO / module).read_text()
        written |= set(re.findall(r'Condition\([A-Z_]+, "(?:True|False|Unknown)", "([A-Za-z]+)"', source))
        written |= set(re.findall(r'Finding\(\s*"([A-Za-z]+)"', source))
        written |= set(re.findall(r'recorder\.event\((?:self\.obj|regarding), "([A-Za-z]+)"', source))
        written |= set(re.findall(r'\("(?:Unknown|False)", "([A-Za-z]+)"\)', source))
        written |= set(re.findall(r'Note\("([A-Za-z]+)"', source))
        written |= set(re.findall(r'invalid\(self.obj, "([A-Za-z]+)"', source))
    assert written >= {"Applied", "AwaitingMigrationApproval", "VerificationFailed", "TagMoved", "NotConfigured",
                       "KeysUnavailable", "CredentialsUnavailable", "RegistryUnavailable", "CheckFailed",
                       "VersionNotFound", "NoVersionAvailable", "InvalidSpec", "InvalidChart", "UnsupportedKubernetes",
                       "InvalidStatus", "Retrying", "ApplyFailed", "Verified", "NewerVersion", "UpToDate",
                       "AwaitingApproval", "Rejected", "Approved", "UpgradeAvailable", "UpgradeApplied",
                       "MigrationPlanCreated", "MigrationPlanRecreated", "MigrationApplied", "PinReverted"}
    assert sorted(w for w in written if f"`{w}`" not in PLATFORM_DOC) == []


def test_every_platform_command_is_in_the_recipe() -> None:
    from apprafter.platform_cmd import platform

    assert sorted(platform.commands) == ["channel", "freeze", "status", "unfreeze", "upgrade"]
    assert sorted(c for c in platform.commands if f"apprafter platform {c}" not in PLATFORM_DOC) == []


SERVICES_DOC = (REPO / "docs" / "platform-services.md").read_text()


def test_every_reason_of_the_claim_binder_is_documented() -> None:
    from lifecycle import binding

    reasons = {binding.BOUND, binding.NO_MATCH, binding.AMBIGUOUS, binding.MISSING}
    assert sorted(r for r in reasons if f"`{r}`" not in SERVICES_DOC) == []
    assert "--no-claim-binder" in SERVICES_DOC and "--no-claim-binder" in DOC
