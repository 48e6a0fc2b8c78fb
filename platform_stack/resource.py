"""The PlatformStack resource (spec §3.11): its CRD source and the rules on the object its schema cannot hold."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from compatibility.versions import InvalidVersion, stack_version
from renderer.crds import AGE, CONDITIONS_LIST_MAP, STATUS_FILE, Column, CrdSource, SchemaPatch, cel, condition_column

KIND = "PlatformStack"
# One per cluster: the controller reads exactly this object.
NAME, NAMESPACE = "default", "apprafter-system"
VERSION_HISTORY_LIMIT = 10
SINGLETON = (f"a cluster has one PlatformStack, named {NAME!r} in namespace {NAMESPACE!r} "
             "(edit that one: apprafter platform ...)")

PLATFORM_STACK = CrdSource(
    KIND, "platform_stack", "platformstack.cue", "PlatformStackSpec", "platformstacks", ("pstack",),
    status_definition="PlatformStackStatus", extra_files=(STATUS_FILE,),
    patches=(
        # CEL sees metadata.name (not the namespace, which only the webhook checks).
        cel((), f"self.metadata.name == '{NAME}'", f"metadata.name: {SINGLETON}", "FieldValueInvalid"),
        SchemaPatch(("status", "versionHistory"), {"maxItems": VERSION_HISTORY_LIMIT}),
        SchemaPatch(("status", "conditions"), CONDITIONS_LIST_MAP),
        SchemaPatch(("status", "components"), {"x-kubernetes-list-type": "map",
                                               "x-kubernetes-list-map-keys": ["name"]}),
    ),
    columns=(Column("Channel", ".spec.channel"), Column("Pin", ".spec.pin"),
             Column("Current", ".status.currentVersion"), Column("Available", ".status.availableVersion"),
             condition_column("Ready"), Column("Verified", '.status.conditions[?(@.type=="SourceVerified")].status',
                                               priority=1), AGE),
)


def check(document: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every (field, reason) that makes a PlatformStack object unacceptable beyond its schema."""
    problems: list[tuple[str, str]] = []
    meta = document.get("metadata") or {}
    for field, want in (("name", NAME), ("namespace", NAMESPACE)):
        if meta.get(field) != want:
            problems.append((f"metadata.{field}", f"{meta.get(field)!r}: {SINGLETON}"))
    pin = (document.get("spec") or {}).get("pin")
    if pin is not None:
        try:
            stack_version(str(pin))  # the one parser of stack versions (channels, plans, tags)
        except InvalidVersion as e:
            problems.append(("spec.pin", str(e)))
    return problems
